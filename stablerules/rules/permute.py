"""Axis bookkeeping: ``permute_dims``, ``transpose`` and ``reshape``. Views, no kernels.

Each of these ops moves no data in NumPy: ``np.transpose``/``np.permute_dims`` return a view
with permuted strides, ``np.reshape`` a view whenever the strides allow (a copy otherwise).
Their pullbacks are the inverse maps, views of the cotangent too: ``dy`` transposed by the
inverse permutation, ``dy`` reshaped to ``x``'s shape. A ``Fill`` cotangent is a ``Fill`` of
``x``'s shape (a constant permuted or reshaped is the same constant), a ``ZeroTangent`` stays.
So no kernel is ever compiled: ``precompile`` validates the signature, ``explain`` has nothing
to print, and the same code serves NumPy and CuPy arrays (the namespace is the input's).

Decisions where SPEC is silent
------------------------------
- The result is NumPy's: a view of ``x`` (``reshape``: a view when NumPy's is, else a copy).
- ``permute_dims``/``transpose`` accept negative axes, as NumPy does; ``transpose(x)``
  reverses the axes. ``reshape``'s shape is ``Val(tuple)`` or ``Val(int)`` (a 1-D shape); as in
  NumPy, one entry may be negative (any negative value, not only ``-1``) and is inferred.
- Tangents have the native-order dtype of the primal; an integer or bool primal gets
  ``NoTangent()``. A dense cotangent of the tangent's dtype is viewed as it is, whatever its
  layout; one of another dtype is projected first (one copy), and the tangent is a view of
  that copy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import ArrayLike, normalize_axis, shape_text, static_ints
from .._registry import KernelRequest, Op, frule_rule, rrule_rule
from .._tangents import Fill, NoTangent, ZeroTangent, prepare_cotangent
from .._val import Val
from .flip import _check_tangents, _input, _namespace_like, _need_array, _tangent_source, _view_source

_DT = TypeVar("_DT", bound=np.generic)

Shape: TypeAlias = tuple[int, ...]
DType: TypeAlias = np.dtype[np.generic]
Pullback = Callable[[object], tuple[object, ...]]
_StaticTuple: TypeAlias = "Val[tuple[int, ...]] | tuple[int, ...]"

_NO_TANGENT = NoTangent()


@dataclass(frozen=True, slots=True)
class AxesPlan:
    """One call's view maps: ``forward(x)`` is the op, ``backward(dy)`` its adjoint (a view),
    for arrays of ``in_shape`` and ``out_shape``."""

    op: str
    in_shape: Shape
    out_shape: Shape
    tangent_dtype: DType | None
    permutation: tuple[int, ...] | None  # permute_dims / transpose: the axes
    inverse: tuple[int, ...] | None

    def forward(self, array: ArrayLike) -> ArrayLike:
        if self.permutation is not None:
            return cast(ArrayLike, array.transpose(self.permutation))
        return cast(ArrayLike, array.reshape(self.out_shape))

    def backward(self, array: ArrayLike) -> ArrayLike:
        if self.inverse is not None:
            return cast(ArrayLike, array.transpose(self.inverse))
        return cast(ArrayLike, array.reshape(self.in_shape))


@functools.lru_cache(maxsize=1024)
def _permutation(op: str, axes: tuple[int, ...], shape: Shape) -> tuple[tuple[int, ...], tuple[int, ...], Shape]:
    ndim = len(shape)
    if len(axes) != ndim:
        raise ValueError(
            f"{op}: axes {axes} must name each of the {ndim} axes of x (shape {shape_text(shape)}) once"
        )
    normalized = tuple(normalize_axis(axis, ndim, "axes") for axis in axes)
    if len(set(normalized)) != ndim:
        raise ValueError(f"{op}: axes {axes} names an axis twice (x has shape {shape_text(shape)})")
    inverse = tuple(int(position) for position in np.argsort(normalized))
    return normalized, inverse, tuple(shape[axis] for axis in normalized)


def _check_permutation(op: str, x: object, axes: object) -> tuple[ArrayLike | None, AxesPlan]:
    item = _input(x, op)
    if axes is None:
        permutation = tuple(range(len(item.shape)))[::-1]
    else:
        if isinstance(axes, Val) and isinstance(axes.value, int):
            raise TypeError(f"{op}: axes must be Val(tuple of ints), got {axes!r}")
        permutation = static_ints(axes, "axes")
    try:
        normalized, inverse, out_shape = _permutation(op, permutation, item.shape)
    except ValueError as error:
        message = str(error)
        raise ValueError(message if message.startswith(op) else f"{op}: {message}") from None
    return item.array, AxesPlan(op, item.shape, out_shape, item.tangent_dtype, normalized, inverse)


@functools.lru_cache(maxsize=1024)
def _reshaped(shape: Shape, size: int, wanted: tuple[int, ...]) -> Shape:
    unknown = [position for position, extent in enumerate(wanted) if extent < 0]
    if len(unknown) > 1:
        raise ValueError(f"reshape: shape {wanted} has {len(unknown)} negative (inferred) entries; at most one is allowed")
    known = math.prod(extent for extent in wanted if extent >= 0)
    if unknown:
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape x of shape {shape_text(shape)} (size {size}) into shape {wanted}")
        result = list(wanted)
        result[unknown[0]] = size // known
        return tuple(result)
    if known != size:
        raise ValueError(f"reshape: cannot reshape x of shape {shape_text(shape)} (size {size}) into shape {wanted}")
    return wanted


def _check_reshape(x: object, shape: object) -> tuple[ArrayLike | None, AxesPlan]:
    item = _input(x, "reshape")
    if shape is None:
        raise TypeError("reshape: shape is required, e.g. reshape(x, Val((2, -1)))")
    wanted = static_ints(shape, "shape")
    if len(wanted) > 64:
        raise ValueError(f"reshape: shape {wanted} has {len(wanted)} dimensions; NumPy arrays have at most 64")
    out_shape = _reshaped(item.shape, math.prod(item.shape), wanted)
    return item.array, AxesPlan("reshape", item.shape, out_shape, item.tangent_dtype, None, None)


def _pullback_of(plan: AxesPlan, positional: int, like: ArrayLike) -> Pullback:
    """The pullback of a view op: ``dy`` mapped back by ``plan.backward`` (a view)."""
    rest = (_NO_TANGENT,) * (positional - 1)
    out_shape, in_shape, dtype, backward = plan.out_shape, plan.in_shape, plan.tangent_dtype, plan.backward
    if dtype is None:

        def constant_pullback(dy: object) -> tuple[object, ...]:
            prepare_cotangent(dy, out_shape, np.dtype(np.float64), like)  # validates dy's shape
            return (_NO_TANGENT, *rest)

        return constant_pullback

    def pullback(dy: object) -> tuple[object, ...]:
        source = _view_source(dy, out_shape, dtype, like)
        if isinstance(source, Fill):
            return (Fill(source.value, in_shape, dtype), *rest)
        if isinstance(source, ZeroTangent):
            return (source, *rest)
        return (backward(source), *rest)

    pullback.__name__ = pullback.__qualname__ = f"{plan.op}_pullback"
    return pullback


def _pushforward(plan: AxesPlan, tangent: object, like: ArrayLike) -> object:
    if plan.tangent_dtype is None:
        return _NO_TANGENT
    source = _tangent_source(tangent, plan.in_shape, plan.tangent_dtype, like, f"{plan.op} frule: the tangent of x")
    if isinstance(source, Fill):
        return Fill(source.value, plan.out_shape, plan.tangent_dtype)
    if isinstance(source, ZeroTangent):
        return source
    return plan.forward(source)


# ======================================================================================
# permute_dims
# ======================================================================================


def _permute_dims_arguments(x: object, axes: object = None) -> tuple[object, object]:
    if axes is None:
        raise TypeError("permute_dims: axes is required, e.g. permute_dims(x, Val((1, 0)))")
    return x, axes


class _PermuteDims(Op):
    name = "permute_dims"

    def __call__(self, x: npt.NDArray[_DT], axes: _StaticTuple) -> npt.NDArray[_DT]:
        """Permute the axes of ``x`` (``np.permute_dims``; Julia's ``permutedims``, 0-based):
        axis ``k`` of the result is axis ``axes[k]`` of ``x``. ``axes`` is ``Val(tuple)``, static.

        The result is a view of ``x``, as NumPy's. Rules: ``back(dy)`` returns ``(dx,)`` plus
        ``NoTangent()`` for ``axes`` given positionally; ``dx`` is ``dy`` permuted back: a
        *view of the cotangent* (a view of its projected copy when ``dy``'s dtype differs).
        A ``Fill`` cotangent gives a ``Fill``; the pushforward permutes the tangent (a view).
        """
        array, plan = _check_permutation("permute_dims", *_permute_dims_arguments(x, axes))
        return cast("npt.NDArray[_DT]", plan.forward(_need_array_of(array, "permute_dims")))

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """No kernels: the op and its rules are views. Validates the signature."""
        _check_permutation("permute_dims", *_permute_dims_arguments(*args, **kwargs))
        return []


permute_dims = _PermuteDims()


def _need_array_of(array: ArrayLike | None, op: str) -> ArrayLike:
    if array is None:
        raise TypeError(f"{op}: x must be an array (an ArraySpec only describes one, for precompile/explain)")
    return array


@rrule_rule(permute_dims)
def _permute_dims_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    x, axes = _permute_dims_arguments(*args, **kwargs)
    array, plan = _check_permutation("permute_dims", x, axes)
    array = _need_array_of(array, "permute_dims")
    return plan.forward(array), _pullback_of(plan, len(args), _namespace_like(_input(array, "permute_dims")))


@frule_rule(permute_dims)
def _permute_dims_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    x, axes = _permute_dims_arguments(*args, **kwargs)
    array, plan = _check_permutation("permute_dims", x, axes)
    array = _need_array_of(array, "permute_dims")
    tangent = _check_tangents(tangents, len(args), "permute_dims")
    return plan.forward(array), _pushforward(plan, tangent, _namespace_like(_input(array, "permute_dims")))


# ======================================================================================
# transpose
# ======================================================================================


def _transpose_arguments(x: object, axes: object = None) -> tuple[object, object]:
    return x, axes


class _Transpose(Op):
    name = "transpose"

    def __call__(self, x: npt.NDArray[_DT], axes: _StaticTuple | None = None) -> npt.NDArray[_DT]:
        """``np.transpose(x, axes)``: ``permute_dims`` with ``axes=None`` meaning the axes
        reversed. Same rules as ``permute_dims`` (``dx`` a view of the cotangent)."""
        array, plan = _check_permutation("transpose", x, axes)
        return cast("npt.NDArray[_DT]", plan.forward(_need_array_of(array, "transpose")))

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """No kernels: the op and its rules are views. Validates the signature."""
        _check_permutation("transpose", *_transpose_arguments(*args, **kwargs))
        return []


transpose = _Transpose()


@rrule_rule(transpose)
def _transpose_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    x, axes = _transpose_arguments(*args, **kwargs)
    array, plan = _check_permutation("transpose", x, axes)
    array = _need_array_of(array, "transpose")
    return plan.forward(array), _pullback_of(plan, len(args), _namespace_like(_input(array, "transpose")))


@frule_rule(transpose)
def _transpose_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    x, axes = _transpose_arguments(*args, **kwargs)
    array, plan = _check_permutation("transpose", x, axes)
    array = _need_array_of(array, "transpose")
    tangent = _check_tangents(tangents, len(args), "transpose")
    return plan.forward(array), _pushforward(plan, tangent, _namespace_like(_input(array, "transpose")))


# ======================================================================================
# reshape
# ======================================================================================


def _reshape_arguments(x: object, shape: object = None) -> tuple[object, object]:
    return x, shape


class _Reshape(Op):
    name = "reshape"

    def __call__(self, x: npt.NDArray[_DT], shape: _StaticTuple | Val[int] | int) -> npt.NDArray[_DT]:
        """Give ``x`` a new shape without changing its data, in C order (``np.reshape``):
        ``shape`` is ``Val(tuple)`` (one entry may be negative: inferred) or ``Val(int)``.

        The result is NumPy's: a view of ``x`` when the strides allow, else a copy. Rules:
        ``back(dy)`` returns ``(dx,)`` plus ``NoTangent()`` for ``shape`` given positionally;
        ``dx`` is ``dy`` reshaped to ``x``'s shape: a *view of the cotangent* when ``dy``'s
        layout allows (always for a C-contiguous ``dy``). A ``Fill`` gives a ``Fill``.
        """
        array, plan = _check_reshape(x, shape)
        return cast("npt.NDArray[_DT]", plan.forward(_need_array_of(array, "reshape")))

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """No kernels: the op and its rules are views. Validates the signature."""
        _check_reshape(*_reshape_arguments(*args, **kwargs))
        return []


reshape = _Reshape()


@rrule_rule(reshape)
def _reshape_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    x, shape = _reshape_arguments(*args, **kwargs)
    array, plan = _check_reshape(x, shape)
    array = _need_array_of(array, "reshape")
    return plan.forward(array), _pullback_of(plan, len(args), _namespace_like(_input(array, "reshape")))


@frule_rule(reshape)
def _reshape_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    x, shape = _reshape_arguments(*args, **kwargs)
    array, plan = _check_reshape(x, shape)
    array = _need_array_of(array, "reshape")
    tangent = _check_tangents(tangents, len(args), "reshape")
    return plan.forward(array), _pushforward(plan, tangent, _namespace_like(_input(array, "reshape")))


__all__ = ["AxesPlan", "permute_dims", "reshape", "transpose"]
