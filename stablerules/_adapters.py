"""What the engine adapters (``stablerules.autograd``, ``stablerules.jax``) share: the op
table, a call split into differentiable leaves and static structure, and pullbacks in the
engines' convention.

The op table. An adapter op is one :class:`AdaptedOp` entry: the op's name (the adapters
look the op up on ``stablerules``, and call ``sr.rrule``/``sr.frule`` for it) and how it
depends on its array arguments:

- ``"linear"``: jointly linear in all of them (repeat, tile, the concatenate family, and the
  structure ops flip ... split). Its pushforward is the op applied to the tangents and its
  pullback does not depend on the primal values, so an engine's second-order rules are the
  op and its pullback again.
- ``"multilinear"``: linear in each array separately (``kron``). Its pushforward is
  ``sum_i op(x with x_i := t_i)`` and the derivative of its pullback with respect to ``x_j``
  is ``sum_{i != j} pullback at (x with x_i := h_i), column j``.

A new op of either kind is one line in :data:`OPS` (and one re-export line in
``stablerules/autograd.py``; ``stablerules.jax`` writes each op for XLA, see ``_jax.py``).

An affine op (``pad`` with a nonzero ``constant_values``) is linear jointly in its arrays
*and* its constant: ``pad(x, w, c)`` is linear in ``(x, c)``. Its entry names the constant
(``constant=(position, keyword)``): where the constant is a leaf (a float given
positionally) the op is linear in its leaves as it is; where it is static (a keyword, an
integer), the tangent map is the op with the constant made zero
(:meth:`Structure.linearized`), the pullback (which reads no values) as it is.

Complex numbers. stablerules' pullbacks follow ChainRules (``back(dy)`` is the adjoint
``J^H dy``); JAX and HIPS autograd both pass cotangents through the *transpose* ``J^T``
(their gradient of a real function of ``z`` is the conjugate of ChainRules'). So an engine's
pullback is ``conj(back(conj(g)))``: :func:`engine_pullback`. For real arrays, and for any
op with real coefficients (all but ``kron``), the two agree and no conjugate is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._tangents import Fill, NoTangent, ZeroTangent, unthunk

Kind = Literal["linear", "multilinear"]


@dataclass(frozen=True, slots=True)
class AdaptedOp:
    """One op of the adapters: its name on ``stablerules`` and its kind (module docstring)."""

    name: str
    kind: Kind
    constant: tuple[int, str] | None = None  # an affine op's constant: (position, keyword)
    # The pullback reads data arguments (take's indices), so the op keeps them (its rrule
    # ``saves_primals``) and a pullback built without a forward gets arrays, not ArraySpecs.
    reads_data: bool = False


OPS: tuple[AdaptedOp, ...] = (
    AdaptedOp("repeat", "linear"),
    AdaptedOp("tile", "linear"),
    AdaptedOp("concatenate", "linear"),
    AdaptedOp("stack", "linear"),
    AdaptedOp("hstack", "linear"),
    AdaptedOp("vstack", "linear"),
    AdaptedOp("cat", "linear"),
    AdaptedOp("kron", "multilinear"),
    AdaptedOp("flip", "linear"),
    AdaptedOp("roll", "linear"),
    AdaptedOp("permute_dims", "linear"),
    AdaptedOp("transpose", "linear"),
    AdaptedOp("reshape", "linear"),
    AdaptedOp("broadcast_to", "linear"),
    AdaptedOp("sum", "linear"),
    AdaptedOp("mean", "linear"),
    AdaptedOp("pad", "linear", constant=(2, "constant_values")),
    AdaptedOp("split", "linear"),
    # The indexing family: linear in x (and index_add's values); the indices are static data.
    AdaptedOp("getindex", "linear"),
    AdaptedOp("take", "linear", reads_data=True),
    AdaptedOp("take_along_axis", "linear", reads_data=True),
    AdaptedOp("index_add", "linear", reads_data=True),
)


# ---------------------------------------------------------------------------------------------
# A call as leaves and structure
# ---------------------------------------------------------------------------------------------
#
# Positional arguments are arrays (leaves), sequences of arrays (concatenate's ``arrays``:
# each element a leaf) or statics (a ``Val``, ``None``, a counts array); keyword arguments
# are all static. ``Structure`` records, per positional argument, which leaves it holds, so
# the call can be rebuilt from new leaves (tangents, cotangents) and the rrule's per-argument
# tangents read back per leaf.

Slot = int | tuple[Literal["static"], object]
"""One place of the call: the index of a leaf, or a static value kept as it is."""


@dataclass(frozen=True, slots=True)
class Argument:
    """One positional argument: a single slot, or a sequence (``list``/``tuple``) of slots."""

    slots: tuple[Slot, ...]
    sequence: type | None  # list or tuple for a sequence argument, None for a single slot


@dataclass(frozen=True, slots=True)
class Structure:
    """A call without its leaves: positional arguments as slots, keyword arguments as they are."""

    arguments: tuple[Argument, ...]
    keywords: tuple[tuple[str, object], ...]
    leaves: int

    def rebuild(self, leaves: Sequence[object]) -> tuple[tuple[object, ...], dict[str, object]]:
        """``(args, kwargs)`` of the call with ``leaves`` in the leaves' places."""
        args: list[object] = []
        for argument in self.arguments:
            values = [leaves[slot] if isinstance(slot, int) else slot[1] for slot in argument.slots]
            args.append(values[0] if argument.sequence is None else argument.sequence(values))
        return tuple(args), dict(self.keywords)

    def linearized(self, constant: tuple[int, str] | None) -> Structure:
        """The call of the tangent map of an affine op: its ``constant`` (position, keyword)
        made zero where it is static (a leaf constant is a tangent like any leaf)."""
        if constant is None:
            return self
        position, keyword = constant
        arguments = list(self.arguments)
        if position < len(arguments) and not isinstance(arguments[position].slots[0], int):
            arguments[position] = Argument((("static", 0),), None)
        keywords = tuple((key, 0 if key == keyword else value) for key, value in self.keywords)
        return Structure(tuple(arguments), keywords, self.leaves)

    def tangents(self, tangents: Sequence[object]) -> tuple[object, ...]:
        """An frule's ``tangents`` (one entry per positional argument, ``NoTangent`` for
        statics) from one tangent per leaf."""
        result: list[object] = []
        for argument in self.arguments:
            values = [tangents[slot] if isinstance(slot, int) else NoTangent() for slot in argument.slots]
            result.append(values[0] if argument.sequence is None else tuple(values))
        return tuple(result)

    def per_leaf(self, tangents: tuple[object, ...]) -> list[object]:
        """An rrule pullback's result (one entry per positional argument) as one tangent per leaf."""
        result: list[object] = [NoTangent()] * self.leaves
        for argument, tangent in zip(self.arguments, tangents):
            if argument.sequence is None:
                if isinstance(argument.slots[0], int):
                    result[argument.slots[0]] = tangent
                continue
            parts = tangent if isinstance(tangent, tuple) else (tangent,) * len(argument.slots)
            for slot, part in zip(argument.slots, parts):
                if isinstance(slot, int):
                    result[slot] = part
        return result


def split_call(
    args: tuple[object, ...], kwargs: dict[str, object], is_leaf: Callable[[object], bool]
) -> tuple[list[object], Structure]:
    """The leaves of a call (``is_leaf`` says which values are differentiable arrays of the
    engine) and its structure."""
    leaves: list[object] = []
    arguments: list[Argument] = []

    def slot(value: object) -> Slot:
        if is_leaf(value):
            leaves.append(value)
            return len(leaves) - 1
        return ("static", value)

    for value in args:
        if isinstance(value, (list, tuple)):
            arguments.append(Argument(tuple(slot(item) for item in value), type(value)))
        else:
            arguments.append(Argument((slot(value),), None))
    return leaves, Structure(tuple(arguments), tuple(kwargs.items()), len(leaves))


# ---------------------------------------------------------------------------------------------
# Tangents as the engines want them
# ---------------------------------------------------------------------------------------------


def dense(tangent: object, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """A rule's tangent as a writable array of ``shape`` and ``dtype``: a ``Fill`` or a zero
    is materialized (never a read-only broadcast view), a read-only array is copied. An
    integer or bool primal's ``NoTangent`` becomes float zeros (what the engines expect of
    an argument they were asked to differentiate anyway)."""
    tangent = unthunk(tangent)
    if isinstance(tangent, np.ndarray):
        if tangent.flags.writeable and tangent.shape == shape:
            return tangent
        return np.array(np.broadcast_to(tangent, shape), copy=True)
    if not np.issubdtype(dtype, np.inexact):
        dtype = np.dtype(np.float64)
    if isinstance(tangent, Fill):
        value: complex = tangent.value if dtype.kind == "c" else complex(tangent.value).real
        return np.full(shape, value, dtype)
    if isinstance(tangent, (ZeroTangent, NoTangent)):
        return np.zeros(shape, dtype)
    return np.array(np.broadcast_to(np.asarray(tangent), shape), dtype=dtype, copy=True)


def conjugate_tree(value: object) -> object:
    """``conj`` of an array or of a tuple/list of arrays; real arrays and lazy tangents as they are."""
    if isinstance(value, np.ndarray):
        return np.conj(value) if value.dtype.kind == "c" else value
    if isinstance(value, (tuple, list)):
        return type(value)(conjugate_tree(item) for item in value)
    return value


def engine_pullback(back: Callable[[object], tuple[object, ...]], g: object) -> tuple[object, ...]:
    """``back`` (ChainRules' adjoint) applied in the engines' transpose convention:
    ``conj(back(conj(g)))``; no conjugate (and no copy) is taken of real arrays."""
    return tuple(conjugate_tree(item) for item in back(conjugate_tree(g)))
