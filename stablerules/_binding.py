"""One binder for the engine adapters: a call of an op split into its parameters, by the
op's schema row (``_schema.py``: its parameters, in call order).

:meth:`Binder.bind` matches a call's positional and keyword arguments to the op's parameters
as Python would (a keyword-only parameter cannot be given by position; a name given twice,
or one the op does not have, is a ``TypeError`` naming the op and the argument), without
defaults: a parameter the call leaves out is absent, and the op applies its own default (and
its own message for a required one). The result, one :class:`Argument` per given parameter in
parameter order, is what every adapter builds on: the torch adapter reads which arguments
hold tensors and which are statics; the autograd adapter splits them into differentiable
leaves and a :class:`Structure` that rebuilds the call from new leaves (tangents,
cotangents). The JAX adapter's ops are functions with the ops' own signatures (Python binds
them) that validate through the NumPy ops' ``bind``/``plan``.

:func:`split_function` is the NumPy ops' own ``bind``: a function generated from the schema
row that splits a call into its arrays and its statics, with the schema's defaults, so Python
itself binds the call (no per-call work beyond a plain function call).

This module imports nothing from an engine, and nothing but the op schema and ``Val`` (which
the schema's defaults spell).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NamedTuple, cast

from ._schema import OPS, OpSchema, Param
from ._val import Val

ARRAY_ROLES = frozenset({"array", "arrays", "varargs", "value"})
"""The roles of parameters that may hold an engine's differentiable arrays (``value``: an
affine op's constant, a scalar or an array)."""


class Argument(NamedTuple):
    """One given parameter of a call: its schema parameter, its value (the tuple of the call's
    positional arguments for a variadic parameter) and whether it was given by keyword."""

    param: Param
    value: object
    keyword: bool


class Binder:
    """The binder of one op (:func:`binder`): its parameters by name and by position."""

    __slots__ = ("schema", "name", "positional", "index", "variadic")

    def __init__(self, schema: OpSchema) -> None:
        self.schema = schema
        self.name = schema.name
        self.variadic = bool(schema.params) and schema.params[0].role == "varargs"
        params = schema.params[1:] if self.variadic else schema.params
        # Parameters that a positional argument may fill, in order (none after a variadic one).
        self.positional: tuple[Param, ...] = () if self.variadic else tuple(p for p in params if not p.keyword_only)
        self.index = {param.name: position for position, param in enumerate(schema.params)}

    def bind(self, args: tuple[object, ...], kwargs: dict[str, object], owner: str) -> tuple[Argument, ...]:
        """The call's arguments, one per given parameter, in parameter order. ``owner`` prefixes
        the op's name in messages (``"stablerules.torch."``)."""
        params = self.schema.params
        if self.variadic:
            bound: list[Argument] = [Argument(params[0], tuple(args), False)]
        else:
            if len(args) > len(self.positional):
                names = ", ".join(param.name for param in self.positional)
                raise TypeError(
                    f"{owner}{self.name} takes at most {len(self.positional)} positional arguments ({names}), got {len(args)}"
                )
            bound = [Argument(param, value, False) for param, value in zip(self.positional, args)]
        if not kwargs:
            return tuple(bound)
        given = {argument.param.name for argument in bound}
        index = self.index
        for name, value in kwargs.items():
            position = index.get(name)
            if position is None or name in given or params[position].role == "varargs":
                raise TypeError(f"{owner}{self.name}: unexpected or repeated argument {name!r}")
            given.add(name)
            bound.append(Argument(params[position], value, True))
        bound.sort(key=lambda argument: index[argument.param.name])
        return tuple(bound)


BINDERS: dict[str, Binder] = {schema.name: Binder(schema) for schema in OPS}
"""Every op's binder, by the op's name."""


def binder(name: str) -> Binder:
    """The binder of the op called ``name``."""
    return BINDERS[name]


SPLIT_ROLES = frozenset({"array", "value", "data"})
"""The roles of parameters that :func:`split_function` passes as arrays (the others of a
generated split are statics)."""


def split_function(
    schema: OpSchema, qualname: str, required: Mapping[str, str] = {}, absent: object = None
) -> Callable[..., tuple[tuple[object, ...], tuple[object, ...]]]:
    """The method ``bind(self, ...)`` of the op of ``schema``: its parameters as the schema
    lists them (positional or keyword, the schema's defaults), returning ``(arrays, statics)``
    (the parameters of the roles in :data:`SPLIT_ROLES`, then the statics, each in parameter
    order). ``qualname`` is the name Python's own binding errors give it (``"Flip.__call__"``).
    ``required`` holds the op's own message for a required parameter it words itself: a call
    that gives it as ``absent`` raises the message as a ``TypeError``. A non-None ``absent`` is
    also the parameter's default (leaving it out raises the message); with ``None`` the
    parameter has no default (leaving it out is Python's own missing-argument error). An op
    whose call splits otherwise (a sequence of arrays, a conversion) binds itself."""
    params: list[str] = []
    arrays: list[str] = []
    statics: list[str] = []
    checks: list[str] = []
    keyword = False
    for param in schema.params:
        if param.role not in SPLIT_ROLES and param.role != "static":
            raise ValueError(f"{schema.name}: a parameter of role {param.role!r} is not split by the layout")
        if param.keyword_only and not keyword:
            params.append("*")
            keyword = True
        if param.name in required:
            params.append(param.name if absent is None else f"{param.name}=_absent")
            checks.append(f"    if {param.name} is _absent:\n        raise TypeError(_required[{param.name!r}])\n")
        elif param.default is not None:
            params.append(f"{param.name}={param.default}")
        else:
            params.append(param.name)
        (arrays if param.role in SPLIT_ROLES else statics).append(param.name)

    def spelled(names: list[str]) -> str:
        return "(" + "".join(f"{name}, " for name in names).rstrip(" ") + ")" if names else "()"

    source = (
        f"def bind(self, {', '.join(params)}):\n{''.join(checks)}"
        f"    return {spelled(arrays)}, {spelled(statics)}\n"
    )
    namespace: dict[str, object] = {"Val": Val, "_absent": absent, "_required": dict(required)}
    exec(compile(source, f"<bind of {schema.name}>", "exec"), namespace)
    function = cast("Callable[..., tuple[tuple[object, ...], tuple[object, ...]]]", namespace["bind"])
    function.__qualname__ = qualname
    return function


def rebuild(arguments: Sequence[Argument], values: Sequence[object]) -> tuple[tuple[object, ...], dict[str, object]]:
    """``(args, kwargs)`` of the call with ``values[i]`` for ``arguments[i]``, each given as it
    was (by position or by keyword; a variadic parameter's values spread)."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for argument, value in zip(arguments, values):
        if argument.keyword:
            kwargs[argument.param.name] = value
        elif argument.param.role == "varargs":
            args.extend(cast("Sequence[object]", value))
        else:
            args.append(value)
    return tuple(args), kwargs


# ---------------------------------------------------------------------------------------------
# A call as differentiable leaves and structure (the autograd adapter's view of a call)
# ---------------------------------------------------------------------------------------------

Slot = int | tuple[Literal["static"], object]
"""One place of the call: the index of a leaf, or a static value kept as it is."""


class Place(NamedTuple):
    """One given argument: a single slot, or a sequence (``list``/``tuple``) of slots."""

    argument: Argument
    slots: tuple[Slot, ...]
    sequence: type | None  # list or tuple for a sequence argument, None for a single slot


class Structure(NamedTuple):
    """A bound call without its leaves: each argument as slots, so the call can be rebuilt
    from new leaves and an rrule's per-argument tangents read back per leaf."""

    places: tuple[Place, ...]
    leaves: int

    def rebuild(self, leaves: Sequence[object]) -> tuple[tuple[object, ...], dict[str, object]]:
        """``(args, kwargs)`` of the call with ``leaves`` in the leaves' places."""
        values: list[object] = []
        for place in self.places:
            items = [leaves[slot] if isinstance(slot, int) else slot[1] for slot in place.slots]
            values.append(items[0] if place.sequence is None else place.sequence(items))
        return rebuild([place.argument for place in self.places], values)

    def linearized(self, constant: tuple[int, str] | None) -> Structure:
        """The call of the tangent map of an affine op: its ``constant`` (position, keyword)
        made zero where it is static (a leaf constant is a tangent like any leaf)."""
        if constant is None:
            return self
        name = constant[1]
        places = tuple(
            place._replace(slots=(("static", 0),), sequence=None)
            if place.argument.param.name == name and not isinstance(place.slots[0], int)
            else place
            for place in self.places
        )
        return Structure(places, self.leaves)

    def per_leaf(self, tangents: tuple[object, ...], missing: object) -> list[object]:
        """An rrule pullback's result (one entry per positional argument of the rebuilt call)
        as one tangent per leaf (``missing`` where a leaf gets none)."""
        result: list[object] = [missing] * self.leaves
        positional = [place for place in self.places if not place.argument.keyword]
        if positional and positional[0].argument.param.role == "varargs":  # one tangent per value
            for slot, tangent in zip(positional[0].slots, tangents):
                if isinstance(slot, int):
                    result[slot] = tangent
            return result
        for place, tangent in zip(positional, tangents):
            if place.sequence is None:
                if isinstance(place.slots[0], int):
                    result[place.slots[0]] = tangent
                continue
            parts = tangent if isinstance(tangent, tuple) else (tangent,) * len(place.slots)
            for slot, part in zip(place.slots, parts):
                if isinstance(slot, int):
                    result[slot] = part
        return result


def split_leaves(arguments: Sequence[Argument], is_leaf: Callable[[object], bool]) -> tuple[list[object], Structure]:
    """The differentiable leaves of a bound call (``is_leaf`` says which values are; only
    positional arguments of the array roles hold leaves: keyword arguments are static, as
    ``rrule`` gives them no tangent) and its structure."""
    leaves: list[object] = []
    places: list[Place] = []

    def slot(value: object, may_be_leaf: bool) -> Slot:
        if may_be_leaf and is_leaf(value):
            leaves.append(value)
            return len(leaves) - 1
        return ("static", value)

    for argument in arguments:
        may_be_leaf = not argument.keyword and argument.param.role in ARRAY_ROLES
        value = argument.value
        if argument.param.role == "varargs":
            items = cast("Sequence[object]", value)
            places.append(Place(argument, tuple(slot(item, may_be_leaf) for item in items), tuple))
        elif isinstance(value, (list, tuple)) and argument.param.role == "arrays":
            places.append(Place(argument, tuple(slot(item, may_be_leaf) for item in value), type(value)))
        else:
            places.append(Place(argument, (slot(value, may_be_leaf),), None))
    return leaves, Structure(tuple(places), len(leaves))


__all__ = [
    "ARRAY_ROLES",
    "Argument",
    "BINDERS",
    "Binder",
    "Place",
    "SPLIT_ROLES",
    "Structure",
    "binder",
    "rebuild",
    "split_function",
    "split_leaves",
]
