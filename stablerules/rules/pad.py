"""The pad family: ``pad`` (constant mode) and ``split``, and their rules.

No compiled kernels, on purpose (as the concatenate family): both ops move blocks of bytes.
``pad``'s forward is one allocation, the border slabs set to the constant and the interior
copied; its pullback is a *slice* of the cotangent (``dx = dy[interior]``, a view, no copy).
``split``'s forward is views of ``x``, its pullback one allocation of ``x``'s shape with every
part's cotangent copied into its block (a ``ZeroTangent`` part as zeros, a ``Fill`` part as its
constant), the pushforward views of the tangent. NumPy's (or CuPy's) block copies are
memory-bound already; a kernel would copy what a view gives for free. So ``kernel_requests``
lists none: ``precompile`` validates the signature and warms its plan, ``explain`` is empty.

Plans (index tuples, border slabs, part blocks, shapes, dtypes) depend on the signature alone
and are kept in the shared ``PlanCache``; ``clear_caches()`` empties it.

Decisions where SPEC is silent
------------------------------
- ``pad_width``: ``Val(k)`` pads every side of every axis by ``k``; ``Val((b0, a0, b1, a1,
  ...))`` (``2 * ndim`` ints) pads axis ``d`` by ``b_d`` before and ``a_d`` after. Negative
  widths are a ``ValueError``. A 0-d ``x`` is returned as a 0-d copy (as ``np.pad``).
- ``constant_values`` is one scalar (a Python or NumPy scalar, or a 0-d array; NumPy's
  per-axis pairs are not taken), converted as ``np.pad`` converts it (``np.array(value)``,
  then assigned: a float into an integer array truncates, -1 into uint8 wraps). A complex
  constant for a real ``x`` is a ``TypeError`` (NumPy warns and drops the imaginary part).
- The constant is differentiable when passed positionally: its tangent is the sum of ``dy``
  over the border, a 0-d array of float64/complex128 for a Python float/complex, of its own
  dtype for a floating NumPy scalar or 0-d array; an integer constant (or any constant when
  ``x`` is an integer array) gets ``NoTangent()``. A keyword argument gets no tangent (SPEC).
- ``split`` returns a tuple (``np.split`` returns a list) of views of ``x``; indices follow
  Python's slicing as ``np.split``'s do (negative counts from the end, past the end is empty,
  out of order gives empty or overlapping parts: overlapping parts' cotangents are added).
  Sections that do not divide the axis are a ``ValueError``, as in NumPy; zero sections too.
- ``split``'s pullback takes a tuple (or list) of one cotangent per part, each an array, a
  ``Fill``, a ``ZeroTangent`` or a ``Thunk``, or ``ZeroTangent()`` (or a ``Thunk`` of the tuple)
  as a whole. All parts zero gives ``ZeroTangent()``; ``Fill`` parts of one value that tile
  ``x`` give a ``Fill``; otherwise one fresh array.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import EllipsisType
from typing import TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import (
    ArrayLike,
    ArraySpec,
    array_namespace,
    as_array,
    check_dtype,
    checked_size,
    is_array,
    is_differentiable,
    normalize_axis,
    shape_text,
    static_int,
    static_ints,
)
from .._cache import PlanCache
from .._registry import KernelRequest, Op, frule_rule, rrule_rule
from .._tangents import DenseCotangent, Fill, NoTangent, ZeroTangent, prepare_cotangent, prepare_tangent, unthunk
from .._val import Val

_DT = TypeVar("_DT", bound=np.generic)
DType: TypeAlias = np.dtype[np.generic]
Index: TypeAlias = tuple["slice | EllipsisType", ...]
Pullback = Callable[[object], tuple[object, ...]]

_NO_TANGENT = NoTangent()
_ZERO_TANGENT = ZeroTangent()
_AXIS0: Val[int] = Val(0)
_FLOAT64: DType = np.dtype(np.float64)


def _input(x: object) -> tuple[ArrayLike | None, tuple[int, ...], DType]:
    """``(array or None for a spec, shape, dtype)``; ``TypeError`` for a non-array or an
    unsupported dtype."""
    if isinstance(x, ArraySpec):
        check_dtype(x.dtype, "x")
        return None, x.shape, x.dtype
    array = as_array(x, "x")
    return array, tuple(array.shape), array.dtype


def _need(array: ArrayLike | None) -> ArrayLike:
    if array is None:
        raise TypeError("an ArraySpec describes a signature for precompile/explain; pass an array to compute")
    return array


def _tangent_dtype(dtype: DType) -> DType | None:
    return np.dtype(dtype.name) if is_differentiable(dtype) else None


def _like(array: ArrayLike | None) -> ArrayLike | None:
    return None if array is None or type(array) is np.ndarray else array


def _check_tangents(op: str, tangents: object, positional: int) -> tuple[object, ...]:
    if not isinstance(tangents, tuple) or len(tangents) != positional:
        count = len(tangents) if isinstance(tangents, tuple) else type(tangents).__name__
        raise ValueError(
            f"{op} frule: tangents must be a tuple with one entry per positional argument ({positional}), got {count}"
        )
    return tangents


_PLANS: PlanCache[object] = PlanCache()


# =============================================================================================
# pad
# =============================================================================================


@dataclass(frozen=True, slots=True, eq=False)
class _PadPlan:
    """``interior`` cuts ``x``'s block out of ``y``; ``borders`` are disjoint slabs covering
    the rest of ``y`` (each set to the constant by the forward, summed for its tangent)."""

    x_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    dtype: DType
    tangent_dtype: DType | None
    interior: Index
    borders: tuple[Index, ...]
    border_size: int


def _check_pad(x_shape: tuple[int, ...], dtype: DType, widths: tuple[int, ...]) -> _PadPlan:
    ndim = len(x_shape)
    if len(widths) == 1:
        pairs = [(widths[0], widths[0])] * ndim
    elif len(widths) == 2 * ndim:
        pairs = [(widths[2 * axis], widths[2 * axis + 1]) for axis in range(ndim)]
    else:
        raise ValueError(
            f"pad: pad_width must be Val(int) or Val of 2 * ndim = {2 * ndim} ints (before, after for "
            f"each axis) for x of shape {shape_text(x_shape)}, got {len(widths)} ints: {widths}"
        )
    if any(width < 0 for width in widths):
        raise ValueError(f"pad: pad_width={widths} has a negative width; widths must be non-negative")
    y_shape = tuple(before + extent + after for extent, (before, after) in zip(x_shape, pairs))
    checked_size(y_shape, dtype.itemsize, "pad")
    interior: Index = tuple(slice(before, before + extent) for extent, (before, _) in zip(x_shape, pairs))
    borders: list[Index] = []
    for axis, (before, after) in enumerate(pairs):
        # Slabs along this axis, inside the interior along earlier axes: disjoint, covering.
        head = interior[:axis]
        tail = tuple(slice(None) for _ in range(axis + 1, ndim))
        if before:
            borders.append((*head, slice(0, before), *tail))
        if after:
            start = y_shape[axis] - after
            borders.append((*head, slice(start, y_shape[axis]), *tail))
    if not interior:
        interior = (Ellipsis,)  # an empty index would read a 0-d dy as a scalar, not a view
    border_size = math.prod(y_shape) - math.prod(x_shape)
    return _PadPlan(x_shape, y_shape, dtype, _tangent_dtype(dtype), interior, tuple(borders), border_size)


def _pad_plan(x: object, pad_width: object) -> tuple[ArrayLike | None, _PadPlan]:
    array, x_shape, dtype = _input(x)
    widths = static_ints(pad_width, "pad_width")
    key = ("pad", x_shape, dtype, widths)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.remember(key, _check_pad(x_shape, dtype, widths))
    return array, cast(_PadPlan, plan)


def _constant(constant_values: object, dtype: DType) -> np.generic:
    """The constant as ``np.pad`` reads it (``np.array(value)``), checked against ``x``'s dtype."""
    value = constant_values
    if not isinstance(value, np.ndarray) and is_array(value):  # a CuPy array: read on the host
        array: ArrayLike = value
        if tuple(array.shape) != ():
            raise ValueError(f"pad: constant_values must be a scalar, got an array of shape {shape_text(array.shape)}")
        value = array.item()
    if not isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)):
        raise TypeError(f"pad: constant_values must be a scalar, got {type(constant_values).__name__}")
    scalar = np.array(value)
    if scalar.shape != ():
        raise ValueError(f"pad: constant_values must be a scalar, got an array of shape {shape_text(scalar.shape)}")
    if scalar.dtype.kind not in "biufc":
        raise TypeError(f"pad: constant_values must be a number, got dtype {scalar.dtype}")
    if scalar.dtype.kind == "c" and dtype.kind != "c":
        raise TypeError(
            f"pad: constant_values={constant_values!r} is complex but x has dtype {dtype}; "
            f"NumPy would drop the imaginary part"
        )
    return cast(np.generic, scalar[()])


def _constant_tangent_dtype(constant_values: object, plan: _PadPlan) -> DType | None:
    """The dtype of the constant's tangent (see the module docstring), ``None`` for none."""
    if plan.tangent_dtype is None:
        return None
    if isinstance(constant_values, bool) or isinstance(constant_values, int):
        return None
    if isinstance(constant_values, float):
        return _FLOAT64
    if isinstance(constant_values, complex):
        return np.dtype(np.complex128)
    dtype = getattr(constant_values, "dtype", None)
    if isinstance(dtype, np.dtype) and is_differentiable(dtype):
        return np.dtype(dtype.name)
    return None


def _pad_forward(plan: _PadPlan, x: ArrayLike, constant: np.generic) -> ArrayLike:
    """One allocation: the border slabs set to the constant, the interior copied."""
    xp = array_namespace(x)
    y: ArrayLike = xp.empty(plan.y_shape, dtype=plan.dtype)
    for border in plan.borders:
        y[border] = constant
    y[plan.interior] = x
    return y


def _pad_arguments(x: object, pad_width: object, constant_values: object = 0) -> tuple[object, object, object]:
    return x, pad_width, constant_values


class Pad(Op):
    name = "pad"

    def __call__(
        self,
        x: npt.NDArray[_DT],
        pad_width: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...],
        constant_values: bool | int | float | complex | np.generic | npt.NDArray[np.generic] = 0,
    ) -> npt.NDArray[_DT]:
        """``np.pad(x, pad_width, mode="constant", constant_values=...)``: ``x`` surrounded by
        ``constant_values``. ``pad_width`` is ``Val(k)`` (every side) or ``Val`` of ``2 * ndim``
        ints ``(before_0, after_0, before_1, after_1, ...)``, static (a plain int or tuple is
        accepted and counted as dynamic); ``constant_values`` is a scalar (data).

        Rules: ``back(dy)`` returns ``(dx, NoTangent()[, dc])``, one entry per positional
        argument: ``dx = dy[interior]``, a *view* of the cotangent (writable when ``dy`` is);
        ``dc`` (a positional floating constant) the sum of ``dy`` over the border. A ``Fill``
        cotangent gives a ``Fill`` (a slice of it). The pushforward is the tangent padded with
        the constant's tangent (zero for a keyword or integer constant).
        """
        array, plan = _pad_plan(x, pad_width)
        x_array = _need(array)
        return cast("npt.NDArray[_DT]", _pad_forward(plan, x_array, _constant(constant_values, plan.dtype)))

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """No kernels (see the module docstring); validates the signature and warms its plan."""
        x, pad_width, constant_values = _pad_arguments(*args, **kwargs)
        _, plan = _pad_plan(x, pad_width)
        _constant(constant_values, plan.dtype)
        return []


pad = Pad()


def _border_sum(plan: _PadPlan, dy: ArrayLike, dtype: DType) -> ArrayLike:
    """The sum of ``dy`` over the border slabs, a 0-d array of ``dtype`` (projected)."""
    xp = array_namespace(dy)
    total = xp.zeros((), dtype=np.complex128 if dy.dtype.kind == "c" else np.float64)
    for border in plan.borders:
        total = total + dy[border].sum(dtype=total.dtype)
    if dtype.kind != "c":
        total = total.real
    return cast(ArrayLike, xp.asarray(total, dtype=dtype))


def _pad_pullback(plan: _PadPlan, positional: int, constant_dtype: DType | None, like: ArrayLike | None) -> Pullback:
    middle = (_NO_TANGENT,) if positional >= 2 else ()
    has_constant = positional >= 3
    y_shape = plan.y_shape
    dtype = plan.tangent_dtype
    if dtype is None:

        def pad_pullback_integer(dy: object) -> tuple[object, ...]:
            prepare_cotangent(dy, y_shape, _FLOAT64, like)  # validates dy
            return (_NO_TANGENT, *middle, *((_NO_TANGENT,) if has_constant else ()))

        return pad_pullback_integer

    interior, x_shape, border_size = plan.interior, plan.x_shape, plan.border_size

    def pad_pullback(dy: object) -> tuple[object, ...]:
        cotangent = prepare_cotangent(dy, y_shape, dtype, like)
        constant: object = _NO_TANGENT
        if isinstance(cotangent, DenseCotangent):
            dx: object = cotangent.array[interior]
            if constant_dtype is not None:
                constant = _border_sum(plan, cotangent.array, constant_dtype)
        elif isinstance(cotangent, Fill):
            dx = Fill(cotangent.value, x_shape, dtype)
            if constant_dtype is not None:
                total = complex(cotangent.value) * border_size
                xp = np if like is None else array_namespace(like)
                constant = xp.asarray(total if constant_dtype.kind == "c" else total.real, dtype=constant_dtype)
        else:
            dx = _ZERO_TANGENT
            if constant_dtype is not None:
                constant = _ZERO_TANGENT
        return (dx, *middle, *((constant,) if has_constant else ()))

    return pad_pullback


@rrule_rule(pad)
def _pad_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    x, pad_width, constant_values = _pad_arguments(*args, **kwargs)
    array, plan = _pad_plan(x, pad_width)
    x_array = _need(array)
    y = _pad_forward(plan, x_array, _constant(constant_values, plan.dtype))
    constant_dtype = _constant_tangent_dtype(constant_values, plan) if len(args) >= 3 else None
    return y, _pad_pullback(plan, len(args), constant_dtype, _like(x_array))


def _scalar_tangent(tangent: object, dtype: DType) -> complex | None:
    """The constant's tangent as a number (projected onto ``dtype``), ``None`` for a zero."""
    tangent = unthunk(tangent)
    if isinstance(tangent, (ZeroTangent, NoTangent)):
        return None
    if isinstance(tangent, Fill):
        if tangent.shape != ():
            raise ValueError(f"pad frule: the tangent of constant_values is a Fill of shape {shape_text(tangent.shape)}; it must be a scalar")
        value = complex(tangent.value)
    elif isinstance(tangent, (int, float, complex, np.number)) and not isinstance(tangent, bool):
        value = complex(tangent)
    elif is_array(tangent) and tuple(tangent.shape) == ():
        value = complex(tangent.item())
    else:
        raise TypeError(
            f"pad frule: the tangent of constant_values must be a scalar, a 0-d array, ZeroTangent or "
            f"NoTangent, got {type(tangent).__name__}"
        )
    return value if dtype.kind == "c" else complex(value.real)


@frule_rule(pad)
def _pad_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    x, pad_width, constant_values = _pad_arguments(*args, **kwargs)
    array, plan = _pad_plan(x, pad_width)
    x_array = _need(array)
    entries = _check_tangents("pad", tangents, len(args))
    y = _pad_forward(plan, x_array, _constant(constant_values, plan.dtype))
    dtype = plan.tangent_dtype
    if dtype is None:
        return y, _NO_TANGENT
    prepared = prepare_tangent(entries[0], plan.x_shape, dtype, _like(x_array), "pad frule: the tangent of x")
    constant: complex | None = None
    if len(args) >= 3 and _constant_tangent_dtype(constant_values, plan) is not None:
        constant = _scalar_tangent(entries[2], dtype)
    if isinstance(prepared, ZeroTangent) and constant is None:
        return y, _ZERO_TANGENT
    if isinstance(prepared, Fill) and (constant == prepared.value or (constant is None and prepared.value == 0)):
        return y, Fill(prepared.value, plan.y_shape, dtype)
    xp = array_namespace(x_array)
    border = 0 if constant is None else (constant if dtype.kind == "c" else constant.real)
    dy: ArrayLike = xp.empty(plan.y_shape, dtype=dtype)
    for slab in plan.borders:
        dy[slab] = border
    if isinstance(prepared, DenseCotangent):
        dy[plan.interior] = prepared.array
    else:
        dy[plan.interior] = prepared.value if isinstance(prepared, Fill) else 0
    return y, dy


# =============================================================================================
# split
# =============================================================================================


@dataclass(frozen=True, slots=True, eq=False)
class _SplitPlan:
    """``indices[i]`` cuts part ``i`` out of ``x`` (NumPy's slices); ``tiles`` says the parts
    are disjoint and cover ``x`` (the pullback then assigns blocks into ``np.empty``)."""

    x_shape: tuple[int, ...]
    dtype: DType
    tangent_dtype: DType | None
    indices: tuple[Index, ...]
    part_shapes: tuple[tuple[int, ...], ...]
    tiles: bool


def _check_split(x_shape: tuple[int, ...], dtype: DType, sections: int | None, points: tuple[int, ...], axis: int) -> _SplitPlan:
    if not x_shape:
        raise ValueError("split: x has shape (); a 0-d array cannot be split (np.split needs an axis)")
    where = normalize_axis(axis, len(x_shape), "split: axis")
    length = x_shape[where]
    if sections is not None:
        if sections <= 0:
            raise ValueError(f"split: sections must be positive, got Val({sections})")
        if length % sections:
            raise ValueError(
                f"split: x of shape {shape_text(x_shape)} has {length} elements along axis {where}, which "
                f"{sections} sections do not divide equally (array split does not result in an equal division)"
            )
        step = length // sections
        points = tuple(step * part for part in range(1, sections))
    bounds = (0, *points, None)
    indices: list[Index] = []
    shapes: list[tuple[int, ...]] = []
    spans: list[tuple[int, int]] = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        cut = slice(start, stop)
        first, end, _ = cut.indices(length)
        size = max(end - first, 0)
        indices.append((*(slice(None),) * where, cut))
        shapes.append(x_shape[:where] + (size,) + x_shape[where + 1 :])
        if size:
            spans.append((first, first + size))
    position = 0
    tiles = True
    for first, end in spans:  # in order, non-empty parts must follow each other exactly
        tiles = tiles and first == position
        position = end
    tiles = tiles and position == length if spans else True
    return _SplitPlan(x_shape, dtype, _tangent_dtype(dtype), tuple(indices), tuple(shapes), tiles)


def _split_plan(x: object, indices_or_sections: object, axis: object) -> tuple[ArrayLike | None, _SplitPlan]:
    array, x_shape, dtype = _input(x)
    sections: int | None = None
    points: tuple[int, ...] = ()
    if isinstance(indices_or_sections, Val) and isinstance(indices_or_sections.value, tuple):
        points = indices_or_sections.value
    elif type(indices_or_sections) is tuple or type(indices_or_sections) is list:
        points = static_ints(indices_or_sections, "indices_or_sections")
    else:
        sections = static_int(indices_or_sections, "indices_or_sections")
    axis_value = static_int(axis, "axis")
    key = ("split", x_shape, dtype, sections, points, axis_value)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.remember(key, _check_split(x_shape, dtype, sections, points, axis_value))
    return array, cast(_SplitPlan, plan)


def _split_arguments(x: object, indices_or_sections: object, axis: object = _AXIS0) -> tuple[object, object, object]:
    return x, indices_or_sections, axis


class Split(Op):
    name = "split"

    def __call__(
        self,
        x: npt.NDArray[_DT],
        indices_or_sections: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...],
        axis: Val[int] | int = _AXIS0,
    ) -> tuple[npt.NDArray[_DT], ...]:
        """``np.split(x, indices_or_sections, axis)`` as a tuple of views of ``x``:
        ``Val(k)`` cuts ``k`` equal parts (``k`` must divide the axis), ``Val((i, j, ...))``
        cuts at those indices. Both static, as ``axis`` (plain values counted as dynamic).

        Rules: ``back(dys)`` takes a tuple of one cotangent per part (any may be
        ``ZeroTangent()``) and returns ``(dx, NoTangent()[, NoTangent()])``: ``dx`` is one
        fresh array with every part's cotangent in its block (zeros for a ``ZeroTangent``),
        a ``Fill`` when every part is a ``Fill`` of one value, ``ZeroTangent()`` when all are
        zero. The pushforward is the tuple of the tangent's views (``Fill``s for a ``Fill``).
        """
        array, plan = _split_plan(x, indices_or_sections, axis)
        x_array = _need(array)
        return tuple(cast("npt.NDArray[_DT]", x_array[index]) for index in plan.indices)

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """No kernels (see the module docstring); validates the signature and warms its plan."""
        _split_plan(*_split_arguments(*args, **kwargs))
        return []


split = Split()


def _part_cotangents(dys: object, plan: _SplitPlan, dtype: DType, like: ArrayLike | None) -> list[DenseCotangent | Fill | ZeroTangent] | None:
    """Each part's cotangent, validated before anything is written; ``None`` for a whole zero."""
    dys = unthunk(dys)
    if isinstance(dys, ZeroTangent):
        return None
    if not isinstance(dys, (tuple, list)):
        raise TypeError(
            f"split pullback: the cotangent must be a tuple with one entry per part ({len(plan.indices)}), "
            f"got {type(dys).__name__}"
        )
    if len(dys) != len(plan.indices):
        raise ValueError(
            f"split pullback: got {len(dys)} cotangents for {len(plan.indices)} parts of shapes "
            f"{', '.join(shape_text(shape) for shape in plan.part_shapes)}"
        )
    return [prepare_cotangent(dy, shape, dtype, like) for dy, shape in zip(dys, plan.part_shapes)]


def _split_pullback(plan: _SplitPlan, positional: int, like: ArrayLike | None) -> Pullback:
    rest = (_NO_TANGENT,) * (positional - 1)
    dtype = plan.tangent_dtype
    if dtype is None:

        def split_pullback_integer(dys: object) -> tuple[object, ...]:
            _part_cotangents(dys, plan, _FLOAT64, like)  # validates every part
            return (_NO_TANGENT, *rest)

        return split_pullback_integer

    x_shape, indices, tiles = plan.x_shape, plan.indices, plan.tiles
    xp = np if like is None else array_namespace(like)

    def split_pullback(dys: object) -> tuple[object, ...]:
        parts = _part_cotangents(dys, plan, dtype, like)
        if parts is None or all(isinstance(part, ZeroTangent) for part in parts):
            return (_ZERO_TANGENT, *rest)
        fills = {part.value for part in parts if isinstance(part, Fill)}
        if tiles and len(fills) == 1 and all(isinstance(part, Fill) or math.prod(shape) == 0 for part, shape in zip(parts, plan.part_shapes)):
            return (Fill(fills.pop(), x_shape, dtype), *rest)
        dense = [part.array for part in parts if isinstance(part, DenseCotangent)]
        namespace = array_namespace(dense[0]) if dense else xp
        if tiles:
            dx: ArrayLike = namespace.empty(x_shape, dtype=dtype)
            for index, part in zip(indices, parts):
                dx[index] = part.array if isinstance(part, DenseCotangent) else (part.value if isinstance(part, Fill) else 0)
        else:
            dx = namespace.zeros(x_shape, dtype=dtype)
            for index, part in zip(indices, parts):
                if isinstance(part, DenseCotangent):
                    namespace.add(dx[index], part.array, out=dx[index])
                elif isinstance(part, Fill):
                    namespace.add(dx[index], part.value, out=dx[index])
        return (dx, *rest)

    return split_pullback


@rrule_rule(split)
def _split_rrule(*args: object, **kwargs: object) -> tuple[tuple[ArrayLike, ...], Pullback]:
    array, plan = _split_plan(*_split_arguments(*args, **kwargs))
    x = _need(array)
    return tuple(map(x.__getitem__, plan.indices)), _split_pullback(plan, len(args), _like(x))


@frule_rule(split)
def _split_frule(tangents: object, *args: object, **kwargs: object) -> tuple[tuple[ArrayLike, ...], object]:
    array, plan = _split_plan(*_split_arguments(*args, **kwargs))
    x = _need(array)
    entries = _check_tangents("split", tangents, len(args))
    y = tuple(map(x.__getitem__, plan.indices))
    if plan.tangent_dtype is None:
        return y, _NO_TANGENT
    prepared = prepare_tangent(entries[0], plan.x_shape, plan.tangent_dtype, _like(x), "split frule: the tangent of x")
    if isinstance(prepared, ZeroTangent):
        return y, prepared
    if isinstance(prepared, Fill):
        return y, tuple(Fill(prepared.value, shape, plan.tangent_dtype) for shape in plan.part_shapes)
    return y, tuple(map(prepared.array.__getitem__, plan.indices))


__all__ = ["Pad", "Split", "pad", "split"]
