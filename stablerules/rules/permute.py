"""Axis bookkeeping: ``permute_dims``, ``transpose``, ``swapaxes`` and ``reshape``. Views, no kernels.

Each of these ops moves no data in NumPy: ``np.transpose``/``np.permute_dims`` return a view
with permuted strides, ``np.reshape`` a view whenever the strides allow (a copy otherwise).
Their pullbacks are the inverse maps, views of the cotangent too: ``dy`` transposed by the
inverse permutation, ``dy`` reshaped to ``x``'s shape. A ``Fill`` cotangent is a ``Fill`` of
``x``'s shape (a constant permuted or reshaped is the same constant), a ``ZeroTangent`` stays.
So no kernel is ever compiled: ``precompile`` validates the signature, ``explain`` has nothing
to print, and the same code serves NumPy and CuPy arrays (the namespace is the input's).

Decisions
---------
- The result is NumPy's: a view of ``x`` (``reshape``: a view when NumPy's is, else a copy).
- ``permute_dims``/``transpose`` accept negative axes, as NumPy does; ``transpose(x)``
  reverses the axes. ``swapaxes(x, axis1, axis2)`` is the permutation that exchanges two axes
  (``np.swapaxes``; torch's ``swapaxes``/``transpose(x, dim0, dim1)``); both axes are
  ``Val(int)``, negative ones count from the end, and naming one axis twice is the identity. ``reshape``'s shape is ``Val(tuple)`` or ``Val(int)`` (a 1-D shape); as in
  NumPy, one entry may be negative (any negative value, not only ``-1``) and is inferred.
- Tangents have the native-order dtype of the primal; an integer or bool primal gets
  ``NoTangent()``. A dense cotangent of the tangent's dtype is viewed as it is, whatever its
  layout; one of another dtype is projected first (one copy), and the tangent is a view of
  that copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import MAX_NDIM, ArrayLike, InputFacts, input_facts, normalize_axis, shape_text, static_int, static_ints
from .._memo import memoized
from .._plan import Plan
from .._rule import RuleOp
from .._val import Val
from .._views import ViewPlan
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)

Shape: TypeAlias = tuple[int, ...]
_StaticTuple: TypeAlias = "Val[tuple[int, ...]] | tuple[int, ...]"


# ======================================================================================
# permute_dims and transpose
# ======================================================================================


class PermutationPlan(ViewPlan):
    """A permutation of one shape's axes; its adjoint is the inverse permutation."""

    def __init__(self, op: str, facts: InputFacts, axes: tuple[int, ...], inverse: tuple[int, ...], out_shape: Shape) -> None:
        super().__init__(op, facts, out_shape)
        self.axes = axes
        self.inverse = inverse

    def view(self, array: ArrayLike) -> ArrayLike:
        return array.transpose(self.axes)

    def unview(self, array: ArrayLike) -> ArrayLike:
        return array.transpose(self.inverse)


@memoized(maxsize=1024)
def _permutation(op: str, axes: tuple[int, ...], shape: Shape) -> tuple[tuple[int, ...], tuple[int, ...], Shape]:
    ndim = len(shape)
    if len(axes) != ndim:
        raise ValueError(f"{op}: axes {axes} must name each of the {ndim} axes of x (shape {shape_text(shape)}) once")
    try:
        normalized = tuple(normalize_axis(axis, ndim, "axes") for axis in axes)
    except ValueError as error:
        raise ValueError(f"{op}: {error} (x has shape {shape_text(shape)})") from None
    if len(set(normalized)) != ndim:
        raise ValueError(f"{op}: axes {axes} names an axis twice (x has shape {shape_text(shape)})")
    inverse = tuple(int(position) for position in np.argsort(normalized))
    return normalized, inverse, tuple(shape[axis] for axis in normalized)


def _plan_permutation(op: str, x: object, axes: object) -> PermutationPlan:
    """Validate ``permute_dims(x, axes)`` / ``transpose(x, axes)`` (``None``: reversed)."""
    facts = input_facts(x, "x", op)
    if axes is None:
        permutation = tuple(range(len(facts.shape)))[::-1]
    else:
        if isinstance(axes, Val) and isinstance(axes.value, int):
            raise TypeError(f"{op}: axes must be Val(tuple of ints), got {axes!r}")
        permutation = static_ints(axes, "axes")
    normalized, inverse, out_shape = _permutation(op, permutation, facts.shape)
    return PermutationPlan(op, facts, normalized, inverse, out_shape)


class PermuteDims(RuleOp):
    name = "permute_dims"
    required_messages = {"axes": "permute_dims: axes is required, e.g. permute_dims(x, Val((1, 0)))"}
    static_names = ("axes",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], axes: _StaticTuple) -> npt.NDArray[_DT]:
        """Permute the axes of ``x`` (``np.permute_dims``; Julia's ``permutedims``, 0-based):
        axis ``k`` of the result is axis ``axes[k]`` of ``x``. ``axes`` is ``Val(tuple)``, static.

        The result is a view of ``x``, as NumPy's. Rules: ``back(dy)`` returns ``(dx,)`` plus
        ``NoTangent()`` for ``axes`` given positionally; ``dx`` is ``dy`` permuted back: a
        *view of the cotangent* (of its projected copy when ``dy``'s dtype differs). A
        ``Fill`` cotangent gives a ``Fill``; the pushforward permutes the tangent. No kernel.
        """
        return self.forward(x, axes)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_permutation("permute_dims", arrays[0], statics[0])


class Transpose(RuleOp):
    name = "transpose"
    static_names = ("axes",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], axes: _StaticTuple | None = None) -> npt.NDArray[_DT]:
        """``np.transpose(x, axes)``: ``permute_dims`` with ``axes=None`` meaning the axes
        reversed. Same rules as ``permute_dims`` (``dx`` a view of the cotangent)."""
        return self.forward(x, axes)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_permutation("transpose", arrays[0], statics[0])


def _swapped(ndim: int, axis1: int, axis2: int) -> tuple[int, ...]:
    """The permutation of ``ndim`` axes that exchanges ``axis1`` and ``axis2`` (normalized)."""
    order = list(range(ndim))
    order[axis1], order[axis2] = order[axis2], order[axis1]
    return tuple(order)


def _plan_swapaxes(x: object, axis1: object, axis2: object) -> PermutationPlan:
    """Validate ``swapaxes(x, axis1, axis2)``: each axis an int in ``[-ndim, ndim)``."""
    facts = input_facts(x, "x", "swapaxes")
    ndim = len(facts.shape)
    try:
        first = normalize_axis(static_int(axis1, "axis1"), ndim, "axis1")
        second = normalize_axis(static_int(axis2, "axis2"), ndim, "axis2")
    except ValueError as error:
        raise ValueError(f"swapaxes: {error} (x has shape {shape_text(facts.shape)})") from None
    normalized, inverse, out_shape = _permutation("swapaxes", _swapped(ndim, first, second), facts.shape)
    return PermutationPlan("swapaxes", facts, normalized, inverse, out_shape)


class Swapaxes(RuleOp):
    name = "swapaxes"
    required_messages = {
        "axis1": "swapaxes: axis1 is required, e.g. swapaxes(x, Val(0), Val(1))",
        "axis2": "swapaxes: axis2 is required, e.g. swapaxes(x, Val(0), Val(1))",
    }
    static_names = ("axis1", "axis2")
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], axis1: Val[int] | int, axis2: Val[int] | int) -> npt.NDArray[_DT]:
        """Exchange two axes of ``x`` (``np.swapaxes``; torch's ``x.transpose(dim0, dim1)``);
        ``axis1`` and ``axis2`` are ``Val(int)``, static. Same rules as ``permute_dims``: the
        result is a view of ``x``, ``dx`` the cotangent with the two axes exchanged back (a
        *view of the cotangent*), a ``Fill`` gives a ``Fill``. No kernel.
        """
        return self.forward(x, axis1, axis2)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_swapaxes(arrays[0], statics[0], statics[1])


permute_dims = PermuteDims()
transpose = Transpose()
swapaxes = Swapaxes()


# ======================================================================================
# reshape
# ======================================================================================


class ReshapePlan(ViewPlan):
    """A reshape of one shape into another (C order); its adjoint reshapes back."""

    def view(self, array: ArrayLike) -> ArrayLike:
        return array.reshape(self.out_shape)

    def unview(self, array: ArrayLike) -> ArrayLike:
        return array.reshape(self.in_shape)


@memoized(maxsize=1024)
def _reshaped(shape: Shape, wanted: tuple[int, ...]) -> Shape:
    size = math.prod(shape)
    unknown = [position for position, extent in enumerate(wanted) if extent < 0]
    if len(unknown) > 1:
        raise ValueError(f"reshape: shape {wanted} has {len(unknown)} negative (inferred) entries; at most one is allowed")
    known = math.prod(extent for extent in wanted if extent >= 0)
    if unknown and known and size % known == 0:
        result = list(wanted)
        result[unknown[0]] = size // known
        return tuple(result)
    if unknown or known != size:
        raise ValueError(f"reshape: cannot reshape x of shape {shape_text(shape)} (size {size}) into shape {wanted}")
    return wanted


def _plan_reshape(x: object, shape: object) -> ReshapePlan:
    """Validate ``reshape(x, shape)``: ``ValueError`` naming both shapes when the sizes
    differ, for two inferred entries, or for more than NumPy's 64 axes."""
    facts = input_facts(x, "x", "reshape")
    wanted = static_ints(shape, "shape")
    if len(wanted) > MAX_NDIM:
        raise ValueError(f"reshape: shape {wanted} has {len(wanted)} dimensions; NumPy arrays have at most {MAX_NDIM}")
    return ReshapePlan("reshape", facts, _reshaped(facts.shape, wanted))


class Reshape(RuleOp):
    name = "reshape"
    required_messages = {"shape": "reshape: shape is required, e.g. reshape(x, Val((2, -1)))"}
    static_names = ("shape",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], shape: _StaticTuple | Val[int] | int) -> npt.NDArray[_DT]:
        """Give ``x`` a new shape without changing its data, in C order (``np.reshape``):
        ``shape`` is ``Val(tuple)`` (one entry may be negative: inferred) or ``Val(int)``.

        The result is NumPy's: a view of ``x`` when the strides allow, else a copy. Rules:
        ``back(dy)`` returns ``(dx,)`` plus ``NoTangent()`` for ``shape`` given positionally;
        ``dx`` is ``dy`` reshaped to ``x``'s shape: a *view of the cotangent* when ``dy``'s
        layout allows (always for a C-contiguous ``dy``). A ``Fill`` gives a ``Fill``.
        """
        return self.forward(x, shape)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_reshape(arrays[0], statics[0])


reshape = Reshape()


__all__ = [
    "PermutationPlan",
    "PermuteDims",
    "Reshape",
    "ReshapePlan",
    "Swapaxes",
    "Transpose",
    "permute_dims",
    "reshape",
    "swapaxes",
    "transpose",
]


# --- engine facts (stablerules._facts) -------------------------------------------------------


def _permute_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    axes = _facts.counts(statics("axes", None)) or tuple(range(ndim - 1, -1, -1))
    return [((axis,), position) for position, axis in enumerate(axes)]


def _batch_permute(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """permute_dims and transpose under a batch axis: the batch axis stays in front, the
    others permuted behind it (transpose's ``axes=None`` is the reversed order)."""
    (x,) = arrays
    axes = _facts.value(call.static("axes"))
    order = tuple(range(len(ops.shape(x)) - 2, -1, -1)) if axes is None else cast("tuple[int, ...]", axes)
    return ops.forward(call.replace(axes=Val((0, *(_facts.shifted(axis) for axis in order)))), (x,))


def _swapaxes_order(statics: _facts.Statics, ndim: int) -> tuple[int, ...]:
    axis1, axis2 = (_facts.counts(statics(name, None))[0] % ndim for name in ("axis1", "axis2"))
    return _swapped(ndim, axis1, axis2)


def _swapaxes_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    return [((axis,), position) for position, axis in enumerate(_swapaxes_order(statics, len(shapes[0])))]


def _batch_swapaxes(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """swapaxes under a batch axis: both axes shifted past the batch axis in front."""
    axis1, axis2 = (_facts.counts(call.static(name))[0] for name in ("axis1", "axis2"))
    return ops.forward(call.replace(axis1=Val(_facts.shifted(axis1)), axis2=Val(_facts.shifted(axis2))), arrays)


def _forward_swapaxes(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    return (xp.permute_dims(x, _swapaxes_order(call.static, len(xp.shape(x)))),)


def _batch_reshape(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """reshape under a batch axis: the batch extent in front of the new shape."""
    return ops.forward(call.replace(shape=Val((size, *_facts.counts(call.static("shape"))))), arrays)


def _forward_permute(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    axes = _facts.value(call.static("axes"))
    return (xp.permute_dims(x, tuple(range(len(xp.shape(x)) - 1, -1, -1)) if axes is None else _facts.counts(axes)),)


def _forward_reshape(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    return (xp.reshape(x, _facts.counts(call.static("shape"))),)


def _prepared_reshape(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    """``reshape`` with its shape read once."""
    shape, reshape = _facts.counts(call.static("shape")), xp.reshape
    return lambda arrays: (reshape(arrays[0], shape),)


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "permute_dims": _facts.EngineFacts(
        _facts.TorchFacts("Tensor.permute", "torch", _facts.VIEW), _permute_shards, _batch_permute, forward=_forward_permute
    ),
    "transpose": _facts.EngineFacts(
        _facts.TorchFacts("Tensor.permute", "torch", _facts.VIEW), _permute_shards, _batch_permute, forward=_forward_permute
    ),
    "swapaxes": _facts.EngineFacts(
        _facts.TorchFacts("Tensor.permute", "torch", _facts.VIEW), _swapaxes_shards, _batch_swapaxes, forward=_forward_swapaxes
    ),
    "reshape": _facts.EngineFacts(
        _facts.TorchFacts("Tensor.reshape", "torch", _facts.VIEW), batch=_batch_reshape, forward=_forward_reshape,
        prepared=_prepared_reshape,
    ),
}
