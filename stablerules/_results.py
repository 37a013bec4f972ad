"""A call's tangents in the call's order: the scaffold's result padding and tangent ordering.

A plan knows its tangents in the order of its array arguments (``bind``'s ``arrays``); a call
names them by parameter position. ``positions`` (from the schema, :func:`array_positions`)
says where each array argument sits among the op's parameters: ``(0, 2)`` for ``pad(x,
pad_width, constant_values)``. A pullback's result has one entry per positional argument
(``NoTangent()`` for statics given positionally, a sequence argument's tangents as one tuple,
nothing for keyword arguments); a tangent a plan defers as a ``Thunk`` (pad's constant, whose
tangent reads the border) is forced only where its argument was given positionally, and
dropped otherwise. ``frule``'s tangents are read from the same positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._schema import BY_NAME as SCHEMA_BY_NAME
from ._tangents import NoTangent, ZeroTangent, unthunk

NO_TANGENT = NoTangent()
ZERO_TANGENT = ZeroTangent()


def array_positions(name: str) -> tuple[int, ...] | None:
    """Where op ``name``'s array arguments sit among its parameters (every parameter that is
    not static, in call order); ``None`` where they come first, in order (and for an op
    without a schema row, or one taking its arrays as ``*arrays``)."""
    schema = SCHEMA_BY_NAME.get(name)
    if schema is None or any(param.role == "varargs" for param in schema.params):
        return None  # varargs (cat): the arrays are the leading positional arguments, in order
    positions = tuple(index for index, param in enumerate(schema.params) if param.role != "static")
    return None if positions == tuple(range(len(positions))) else positions


def _slots(positions: tuple[int, ...] | None, count: int) -> tuple[int, ...] | None:
    """The positions of ``count`` array arguments, or ``None`` where they come first, in order."""
    if positions is None or positions[:count] == tuple(range(count)):
        return None
    return positions[:count]


def ordered_tangents(
    tangents: tuple[object, ...], positional: int, count: int, positions: tuple[int, ...] | None
) -> tuple[object, ...]:
    """The tangents of ``count`` array arguments from one tangent per positional argument
    (``ZeroTangent()`` for one given by keyword)."""
    slots = _slots(positions, count)
    if slots is None:
        return tangents[:count] + (ZERO_TANGENT,) * max(count - positional, 0)
    return tuple(tangents[at] if at < positional else ZERO_TANGENT for at in slots)


Finish = Callable[[tuple[object, ...]], tuple[object, ...]]


def _padding_finish(sequence: bool, keep: int, count: int, padding: tuple[object, ...]) -> Finish:
    """Arrays first, in order: the first ``keep`` tangents (all, as one tuple, for a sequence
    argument), then ``padding``."""

    def finish(tangents: tuple[object, ...]) -> tuple[object, ...]:
        if sequence:
            return (tangents, *padding)
        return tangents[:keep] + padding if keep < count else tangents + padding

    return finish


def _reordering_finish(slots: tuple[int, ...], positional: int) -> Finish:
    """Arrays at ``slots``: each tangent at its argument's position (forced, if a ``Thunk``),
    ``NoTangent()`` elsewhere, ``positional`` entries."""
    places = tuple((index, at) for index, at in enumerate(slots) if at < positional)

    def finish(tangents: tuple[object, ...]) -> tuple[object, ...]:
        result: list[object] = [NO_TANGENT] * positional
        for index, at in places:
            result[at] = unthunk(tangents[index])
        return tuple(result)

    return finish


class ResultForm:
    """A plan's tangents as one call's result (see the module docstring). ``simple``: the
    result is the tangents followed by ``padding``."""

    __slots__ = ("padding", "simple", "finish", "zeros", "no_tangents")

    def __init__(
        self,
        count: int,
        zero_tangents: tuple[object, ...],
        sequence: bool,
        positional: int,
        positions: tuple[int, ...] | None = None,
    ) -> None:
        slots = None if sequence else _slots(positions, count)
        if slots is not None:
            self.padding: tuple[object, ...] = ()
            self.simple = False
            self.finish = _reordering_finish(slots, positional)
        else:
            if sequence:
                self.padding = (NO_TANGENT,) * max(positional - 1, 0)
                keep = count
            else:
                self.padding = (NO_TANGENT,) * max(positional - count, 0)
                keep = min(positional, count)
            self.simple = not sequence and keep == count
            self.finish = _padding_finish(sequence, keep, count, self.padding)
        self.zeros = self.finish(zero_tangents)
        self.no_tangents = self.finish((NO_TANGENT,) * count)


def given_tangents(name: str, tangents: Sequence[object], count: int) -> Sequence[object]:
    """A sequence argument's tangents (``frule``): one per array, or a zero for all."""
    inner = unthunk(tangents[0]) if tangents else ZERO_TANGENT
    if isinstance(inner, (ZeroTangent, NoTangent)):
        return (ZERO_TANGENT,) * count
    if isinstance(inner, (tuple, list)) and len(inner) == count:
        return inner
    got = len(inner) if isinstance(inner, (tuple, list)) else type(inner).__name__
    raise ValueError(f"{name} frule: the tangent of arrays must hold one tangent per array ({count}), got {got}")
