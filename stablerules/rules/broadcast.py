"""The broadcast family: ``broadcast_to``, ``sum`` and ``mean``, and their rules.

One index map serves all three. Broadcasting ``x`` to ``shape`` and summing ``x`` over some axes
are adjoint: both relate a *full* array (the broadcast result; the summed input) to a *kept*
array (``x``; the sum) through the axes that are *reduced* (broadcast from extent 1, or summed).
Axes of extent 1 are dropped and adjacent axes of the same kind merged, which leaves an
alternating sequence of groups, the *pattern*::

    broadcast_to(x(1,64,1,56), (32,64,56,56))    ->  r k r k   extents (32, 64, 56, 56)
    sum(x(200,3,40), axis=(0, 2))                ->  r k r     extents (200, 3, 40)
    sum(x(4,5,6), axis=(1, 2))                   ->  k r       extents (4, 30)

The pattern is the kernels' static signature (with the dtype); the extents are runtime
arguments, so every shape with the same pattern shares a kernel. Two kernels walk the full
array in memory order, one pass each:

- *reduce* (``broadcast_to``'s pullback): ``dx[kept] += dy[full]``. A trailing kept group is
  an elementwise row update, a trailing reduced group a horizontal sum; float32 and complex64
  accumulate in float64/complex128 (a ``dx``-sized buffer, cast at the end).
- *expand* (``sum``'s and ``mean``'s pullback): ``dx[full] = dy[kept]`` (divided by the count
  for ``mean``), a row copy or a row fill.

The CPU kernels split the outermost group across threads (``_parallel``): an outer kept group
gives each thread its own range of the output, an outer reduced group gives each thread after
the first its own zeroed accumulator, added at the end. The CUDA kernels are gathers, one
thread per output element (a kept element summing its reduced entries, or a full element
reading its kept one), with no atomics.

No kernel where none pays: the forwards are NumPy's (or CuPy's) own ``broadcast_to`` (a
read-only view), ``sum`` and ``mean`` (so results and dtypes are NumPy's exactly);
``broadcast_to``'s pushforward is a broadcast view of the tangent and ``sum``'s is a sum of it.

Decisions where SPEC is silent
------------------------------
- ``sum``/``mean`` of every axis without ``keepdims`` return a 0-d array where NumPy returns a
  NumPy scalar (the same value and dtype), as ``kron`` does for 0-d operands.
- A cotangent of one element (a full reduction) gives a ``Fill`` (its value read on the host,
  a device synchronization for CuPy); a ``Fill`` cotangent of any shape gives a ``Fill``.
- ``broadcast_to`` to ``x``'s own shape (nothing reduced) has ``dx`` = ``dy`` itself (a view
  of the cotangent, projected); so has ``sum`` over no axis of extent > 1.
- ``broadcast_to``'s ``shape`` may be ``Val(int)`` (a 1-D shape), as NumPy's; ``sum``'s
  ``axis=Val(())`` reduces nothing. Duplicate or out-of-range axes are a ``ValueError``.
- Integer and bool inputs: the forward as NumPy (``sum`` of int32 is int64, ``mean`` of ints
  float64); their tangent is ``NoTangent()``.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar, cast, overload

import numpy as np
import numpy.typing as npt

from .. import _parallel
from .._arrays import (
    ArrayLike,
    ArraySpec,
    array_namespace,
    as_array,
    check_dtype,
    checked_size,
    device_of,
    is_differentiable,
    kernel_target,
    shape_text,
    static_bool,
    static_ints,
)
from .._cache import Kernel, KernelSource, PlanCache, ShapeSignature
from .._codegen import INDEX, SourceWriter, cpu_kernel, numba_scalar, readonly_array, writable_array
from .._cuda import cuda_array_type, cuda_kernel, launch
from .._parallel import chunk_bounds, run_chunks
from .._registry import KernelRequest, Op, frule_rule, rrule_rule
from .._tangents import DenseCotangent, Fill, NoTangent, ZeroTangent, prepare_cotangent, prepare_tangent
from .._val import Val

_DT = TypeVar("_DT", bound=np.generic)
_F = TypeVar("_F", bound=np.inexact)
DType = np.dtype[np.generic]
Pullback = Callable[[object], tuple[object, ...]]

_NO_TANGENT = NoTangent()
_ZERO_TANGENT = ZeroTangent()
_FALSE: Val[bool] = Val(False)
_FLOAT64: DType = np.dtype(np.float64)
# Python refuses source with more than 20 statically nested blocks; the kernels nest one loop
# per group (plus the function and the thread-range loop).
_MAX_GROUPS = 16
_WIDENED = {
    "float32": np.dtype(np.float64),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex128),
    "complex128": np.dtype(np.complex128),
}
_REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}


# ---------------------------------------------------------------------------------------------
# The index map: groups of full-array axes, reduced ("r") or kept ("k")
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _groups(full: tuple[int, ...], reduced: tuple[bool, ...]) -> tuple[str, tuple[int, ...]]:
    """``(pattern, extents)``: axes of extent 1 dropped, adjacent axes of one kind merged."""
    kinds: list[str] = []
    extents: list[int] = []
    for extent, is_reduced in zip(full, reduced):
        if extent == 1:
            continue
        kind = "r" if is_reduced else "k"
        if kinds and kinds[-1] == kind:
            extents[-1] *= extent
        else:
            kinds.append(kind)
            extents.append(extent)
    return "".join(kinds), tuple(extents)


@dataclass(frozen=True, slots=True, eq=False)
class _Plan:
    """One call signature: shapes, dtypes, the group pattern, the kernel target.

    ``x_shape``/``dtype`` are the primal input's (``dtype`` native, ``None`` when the input is
    not differentiable); ``y_shape`` the output's; ``full_size`` the size of the full array;
    ``count`` the number of entries each kept element sums (``mean``'s divisor).
    """

    op: str
    x_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    dtype: DType | None
    pattern: str
    extents: tuple[int, ...]
    full_size: int
    count: int
    target: str
    axes: tuple[int, ...] | None = None  # sum/mean: the normalized axes
    keepdims: bool = False


def _signature(plan: _Plan, kind: str) -> ShapeSignature:
    assert plan.dtype is not None
    static: tuple[object, ...] = (plan.pattern, kind == "mean")
    name = "reduce" if kind == "reduce" else "expand"
    return ShapeSignature("broadcast", name, static, (plan.dtype.name,), (len(plan.pattern),), plan.target)


def _kernel_request(plan: _Plan, kind: str) -> KernelRequest | None:
    """The pullback kernel of a plan (``kind``: "reduce", "sum" or "mean"); ``None`` when the
    pullback needs none (nothing reduced, an empty array, a one-element cotangent)."""
    if plan.dtype is None or plan.full_size == 0 or "r" not in plan.pattern:
        return None
    if kind != "reduce" and "k" not in plan.pattern:
        return None  # sum's cotangent has one element: the pullback is a Fill
    signature = _signature(plan, kind)
    render = _render_cuda if plan.target == "cuda" else _render_cpu
    return KernelRequest(signature, functools.partial(render, signature))


# ---------------------------------------------------------------------------------------------
# Kernel templates
# ---------------------------------------------------------------------------------------------


def _walk(writer: SourceWriter, pattern: str, body: Callable[[str, str, str], None]) -> None:
    """The CPU loop nest over the full array in memory order, the outer group split as
    ``[lo, hi)``.

    ``full{d}``/``kept{d}`` are the flat positions after group ``d`` in the full and the kept
    array (a kept position before any kept group is 0 and not written); ``body(full_base,
    kept_base, kind)`` writes the innermost group's loop (``kind`` is
    that group's; one group alone is the ``[lo, hi)`` range itself).
    """
    count = len(pattern)
    if count == 1:
        body("0", "0", pattern[0])
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(writer.block("for i0 in range(lo, hi):"))
        full = "i0"
        kept = "i0" if pattern[0] == "k" else ""  # "": still 0, no kept group outside
        for group in range(1, count - 1):
            stack.enter_context(writer.block(f"for i{group} in range(E{group}):"))
            writer.line(f"full{group} = {full} * E{group} + i{group}")
            full = f"full{group}"
            if pattern[group] == "k":
                writer.line(f"kept{group} = {kept} * E{group} + i{group}" if kept else f"kept{group} = i{group}")
                kept = f"kept{group}"
        last = count - 1
        if pattern[last] == "k":
            kept = f"{kept} * E{last}" if kept else "0"
        body(f"{full} * E{last}", kept or "0", pattern[last])


def _render_cpu(signature: ShapeSignature) -> KernelSource:
    pattern, mean = signature.static
    assert isinstance(pattern, str)
    dtype = np.dtype(signature.dtypes[0])
    wide = _WIDENED[dtype.name]
    writer = SourceWriter()
    count = len(pattern)
    extents = [(f"E{group}", INDEX) for group in range(count)]
    if signature.kind == "reduce":
        writer.line(f"# dy is the full array (groups {pattern}, extents E0..), acc the kept one: acc[kept] += dy[full]")

        def reduce_body(full: str, kept: str, kind: str) -> None:
            last = f"E{count - 1}"
            if count == 1:  # a full reduction of [lo, hi)
                writer.line("total = acc[0] * 0")
                with writer.block("for j in range(lo, hi):"):
                    writer.line("total += dy[j]")
                writer.line("acc[0] += total")
                return
            writer.line(f"src = {full}")
            if kind == "k":
                writer.line(f"dst = {kept}")
                with writer.block(f"for j in range({last}):"):
                    writer.line("acc[dst + j] += dy[src + j]")
            else:
                writer.line("total = acc[0] * 0")
                with writer.block(f"for j in range({last}):"):
                    writer.line("total += dy[src + j]")
                writer.line(f"acc[{kept}] += total")

        _walk(writer, pattern, reduce_body)
        parameters = [("dy", readonly_array(dtype)), ("acc", writable_array(wide)), *extents, ("lo", INDEX), ("hi", INDEX)]
        description = f"broadcast_to pullback: a sum over the reduced groups of {pattern!r}, one pass over dy"
        return cpu_kernel(signature, parameters, writer, description, reassociate=True)

    divide = " / divisor" if mean else ""
    writer.line(f"# dx is the full array (groups {pattern}, extents E0..), dy the kept one: dx[full] = dy[kept]{divide}")

    def expand_body(full: str, kept: str, kind: str) -> None:
        last = f"E{count - 1}"
        writer.line(f"dst = {full}")
        if kind == "k":
            writer.line(f"src = {kept}")
            with writer.block(f"for j in range({last}):"):
                writer.line(f"dx[dst + j] = dy[src + j]{divide}")
        else:
            writer.line(f"value = dy[{kept}]{divide}")
            with writer.block(f"for j in range({last}):"):
                writer.line("dx[dst + j] = value")

    _walk(writer, pattern, expand_body)
    parameters = [("dy", readonly_array(dtype)), ("dx", writable_array(dtype)), *extents]
    if mean:
        parameters.append(("divisor", numba_scalar(_REAL[dtype.name])))
    parameters += [("lo", INDEX), ("hi", INDEX)]
    what = "mean" if mean else "sum"
    description = f"{what} pullback: dy copied along the reduced groups of {pattern!r}, one pass over dx"
    return cpu_kernel(signature, parameters, writer, description)


def _render_cuda(signature: ShapeSignature) -> KernelSource:
    """Gathers: one thread per kept element (reduce) or per full element (expand)."""
    pattern, mean = signature.static
    assert isinstance(pattern, str)
    dtype = np.dtype(signature.dtypes[0])
    wide = _WIDENED[dtype.name]
    count = len(pattern)
    extents = [(f"E{group}", INDEX) for group in range(count)]
    writer = SourceWriter()
    if signature.kind == "reduce":
        kept_groups = [group for group in range(count) if pattern[group] == "k"]
        writer.line("# t is a kept element: its index in each kept group, innermost first")
        rest = "t"
        for group in reversed(kept_groups[1:]):
            writer.line(f"k{group} = {rest} % E{group}")
            writer.line(f"q{group} = {rest} // E{group}")
            rest = f"q{group}"
        if kept_groups:
            writer.line(f"k{kept_groups[0]} = {rest}")
        writer.line(f"total = {numba_scalar(wide)}(0)")
        with contextlib.ExitStack() as stack:
            previous = ""
            for group in range(count):
                if pattern[group] == "r":
                    stack.enter_context(writer.block(f"for r{group} in range(E{group}):"))
                index = f"{pattern[group]}{group}"
                writer.line(f"at{group} = {previous} * E{group} + {index}" if previous else f"at{group} = {index}")
                previous = f"at{group}"
            writer.line(f"total += dy[{previous}]")
        store = "total" if wide == dtype else f"{numba_scalar(dtype)}(total)"
        writer.line(f"dx[t] = {store}")
        parameters = [("dy", cuda_array_type(dtype.name)), ("dx", cuda_array_type(dtype.name)), *extents, ("total", INDEX)]
        return cuda_kernel(
            signature, parameters, writer, f"broadcast_to pullback: one thread per element of dx, groups {pattern!r}",
            total="total",
        )
    writer.line("# t is a full element: split it into its groups, innermost first")
    rest = "t"
    for group in range(count - 1, 0, -1):
        writer.line(f"i{group} = {rest} % E{group}")
        writer.line(f"q{group} = {rest} // E{group}")
        rest = f"q{group}"
    writer.line(f"i0 = {rest}")
    kept = "0"
    for group in range(count):
        if pattern[group] == "k":
            kept = f"i{group}" if kept == "0" else f"({kept}) * E{group} + i{group}"
    divide = " / divisor" if mean else ""
    writer.line(f"dx[t] = dy[{kept}]{divide}")
    parameters = [("dy", cuda_array_type(dtype.name)), ("dx", cuda_array_type(dtype.name)), *extents]
    if mean:
        parameters.append(("divisor", numba_scalar(_REAL[dtype.name])))
    parameters.append(("size", INDEX))
    what = "mean" if mean else "sum"
    return cuda_kernel(
        signature, parameters, writer, f"{what} pullback: one thread per element of dx, groups {pattern!r}", total="size"
    )


# ---------------------------------------------------------------------------------------------
# Validation, one function per op
# ---------------------------------------------------------------------------------------------


def _input(x: object) -> tuple[ArrayLike | None, tuple[int, ...], DType, str]:
    """``(array or None for a spec, shape, dtype, kernel target)``; ``TypeError`` for a
    non-array or an unsupported dtype."""
    if isinstance(x, ArraySpec):
        check_dtype(x.dtype, "x")
        return None, x.shape, x.dtype, kernel_target(device_of(x))
    array = as_array(x, "x")
    return array, tuple(array.shape), array.dtype, kernel_target(device_of(array))


def _tangent_dtype(dtype: DType) -> DType | None:
    return np.dtype(dtype.name) if is_differentiable(dtype) else None


def _check_broadcast_to(x_shape: tuple[int, ...], dtype: DType, shape: tuple[int, ...], target: str) -> _Plan:
    if any(extent < 0 for extent in shape):
        raise ValueError(f"broadcast_to: shape {shape_text(shape)} has a negative extent")
    if len(shape) < len(x_shape):
        raise ValueError(
            f"broadcast_to: x of shape {shape_text(x_shape)} has more dimensions than the target "
            f"shape {shape_text(shape)}"
        )
    lead = len(shape) - len(x_shape)
    for axis, extent in enumerate(x_shape):
        if extent != 1 and extent != shape[lead + axis]:
            raise ValueError(
                f"broadcast_to: x of shape {shape_text(x_shape)} cannot be broadcast to shape "
                f"{shape_text(shape)}: axis {axis} of x has extent {extent} but the target has "
                f"{shape[lead + axis]} (an extent must match or be 1)"
            )
    checked_size(shape, 1, "broadcast_to")
    reduced = tuple(axis < lead or x_shape[axis - lead] == 1 for axis in range(len(shape)))
    pattern, extents = _groups(shape, reduced)
    if len(pattern) > _MAX_GROUPS:
        raise ValueError(
            f"broadcast_to: x of shape {shape_text(x_shape)} to {shape_text(shape)} alternates broadcast "
            f"and kept axes {len(pattern)} times; the compiled kernels take at most {_MAX_GROUPS}"
        )
    full_size = math.prod(shape)
    count = full_size // max(math.prod(x_shape), 1) if full_size else 0
    return _Plan("broadcast_to", x_shape, shape, _tangent_dtype(dtype), pattern, extents, full_size, count, target)


def _check_sum(
    op: str, x_shape: tuple[int, ...], dtype: DType, axis: tuple[int, ...] | None, keepdims: bool, target: str
) -> _Plan:
    ndim = len(x_shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        for item in axis:
            if not -ndim <= item < ndim:
                raise ValueError(
                    f"{op}: axis {item} is out of bounds for x of shape {shape_text(x_shape)} "
                    f"(dimension {ndim})"
                )
        axes = tuple(item % ndim for item in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{op}: duplicate value in axis={axis} for x of shape {shape_text(x_shape)}")
        axes = tuple(sorted(axes))
    reduced = tuple(position in axes for position in range(ndim))
    if keepdims:
        y_shape = tuple(1 if is_reduced else extent for extent, is_reduced in zip(x_shape, reduced))
    else:
        y_shape = tuple(extent for extent, is_reduced in zip(x_shape, reduced) if not is_reduced)
    pattern, extents = _groups(x_shape, reduced)
    if len(pattern) > _MAX_GROUPS:
        raise ValueError(
            f"{op}: axis={axis} alternates summed and kept axes of x (shape {shape_text(x_shape)}) "
            f"{len(pattern)} times; the compiled kernels take at most {_MAX_GROUPS}"
        )
    count = math.prod(x_shape[position] for position in axes)
    return _Plan(
        op, x_shape, y_shape, _tangent_dtype(dtype), pattern, extents, math.prod(x_shape), count, target,
        axes, keepdims,
    )


_PLANS: PlanCache[_Plan] = PlanCache()


def _broadcast_plan(x: object, shape: object) -> tuple[ArrayLike | None, _Plan]:
    array, x_shape, dtype, target = _input(x)
    target_shape = static_ints(shape, "shape")
    key = ("broadcast_to", x_shape, dtype, target_shape, target)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.remember(key, _check_broadcast_to(x_shape, dtype, target_shape, target))
    return array, plan


def _sum_plan(op: str, x: object, axis: object, keepdims: object) -> tuple[ArrayLike | None, _Plan]:
    array, x_shape, dtype, target = _input(x)
    axes = None if axis is None else static_ints(axis, "axis")
    flag = static_bool(keepdims, "keepdims")
    key = (op, x_shape, dtype, axes, flag, target)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.remember(key, _check_sum(op, x_shape, dtype, axes, flag, target))
    return array, plan


def _need(array: ArrayLike | None) -> ArrayLike:
    if array is None:
        raise TypeError("an ArraySpec describes a signature for precompile/explain; pass an array to compute")
    return array


# ---------------------------------------------------------------------------------------------
# Running the kernels
# ---------------------------------------------------------------------------------------------


def _kernel(plan: _Plan, kind: str) -> Kernel | None:
    request = _kernel_request(plan, kind)
    return None if request is None else request.get()


def _reduce(plan: _Plan, kernel: Kernel | None, dy: ArrayLike) -> ArrayLike:
    """``dx`` from a dense C-contiguous ``dy`` of the full shape: the sum over reduced groups."""
    assert plan.dtype is not None
    dtype = plan.dtype
    xp = array_namespace(dy)
    if kernel is None:
        if plan.full_size == 0:
            return cast(ArrayLike, xp.zeros(plan.x_shape, dtype=dtype))
        return dy.reshape(plan.x_shape)  # nothing reduced: dy itself
    flat = dy.reshape(-1)
    kept_size = math.prod(plan.x_shape)
    if plan.target == "cuda":
        dx: ArrayLike = xp.empty(kept_size, dtype=dtype)
        launch(kernel, kept_size, flat, dx, *plan.extents, kept_size, work=plan.count)
        return dx.reshape(plan.x_shape)
    wide = _WIDENED[dtype.name]
    extent = plan.extents[0]
    function = kernel.entry
    chunks = chunk_bounds(extent, plan.full_size)
    acc = np.zeros(kept_size, dtype=wide)
    if len(chunks) == 1:
        function(flat, acc, *plan.extents, 0, extent)
    elif plan.pattern[0] == "k":
        run_chunks(function, [(flat, acc, *plan.extents, lo, hi) for lo, hi in chunks])
    else:
        partials = [acc] + [np.zeros(kept_size, dtype=wide) for _ in chunks[1:]]
        run_chunks(function, [(flat, part, *plan.extents, lo, hi) for part, (lo, hi) in zip(partials, chunks)])
        for part in partials[1:]:
            np.add(acc, part, out=acc)
    return (acc if wide == dtype else acc.astype(dtype)).reshape(plan.x_shape)


def _expand(plan: _Plan, kernel: Kernel | None, dy: ArrayLike, mean: bool) -> ArrayLike:
    """``dx`` from a dense C-contiguous ``dy`` of the kept shape: ``dy`` copied along the
    reduced groups (divided by the count for ``mean``)."""
    assert plan.dtype is not None and kernel is not None
    dtype = plan.dtype
    xp = array_namespace(dy)
    flat = dy.reshape(-1)
    dx: ArrayLike = xp.empty(plan.full_size, dtype=dtype)
    divisor = (float(plan.count),) if mean else ()
    if plan.target == "cuda":
        launch(kernel, plan.full_size, flat, dx, *plan.extents, *divisor, plan.full_size)
        return dx.reshape(plan.x_shape)
    extent = plan.extents[0]
    chunks = chunk_bounds(extent, plan.full_size) if plan.full_size >= _parallel.PARALLEL_THRESHOLD else [(0, extent)]
    run_chunks(kernel.entry, [(flat, dx, *plan.extents, *divisor, lo, hi) for lo, hi in chunks])
    return dx.reshape(plan.x_shape)


def _like(array: ArrayLike | None) -> ArrayLike | None:
    return None if array is None or type(array) is np.ndarray else array


def _check_cotangent(dy: object, shape: tuple[int, ...], like: ArrayLike | None) -> None:
    """A non-differentiable output's cotangent: validated as any other, then not read."""
    prepare_cotangent(dy, shape, _FLOAT64, like)


def _count_positional(positional: int) -> tuple[NoTangent, ...]:
    return (_NO_TANGENT,) * (positional - 1)


# ---------------------------------------------------------------------------------------------
# broadcast_to
# ---------------------------------------------------------------------------------------------


def _broadcast_arguments(x: object, shape: object) -> tuple[object, object]:
    return x, shape


class BroadcastTo(Op):
    name = "broadcast_to"

    def __call__(self, x: npt.NDArray[_DT], shape: Val[tuple[int, ...]] | Val[int] | tuple[int, ...] | int) -> npt.NDArray[_DT]:
        """``np.broadcast_to(x, shape)``: a read-only view of ``x`` with the given shape
        (``Val(tuple)``, static; a plain tuple is accepted and counted as dynamic).

        Rules: ``back(dy)`` returns ``(dx,)`` (plus ``NoTangent()`` for a positional
        ``shape``), ``dx`` the sum of ``dy`` over the broadcast axes: one compiled pass over
        ``dy`` (float32/complex64 accumulated in float64/complex128), a fresh array; to
        ``x``'s own shape ``dx`` is ``dy`` itself, a view. A ``Fill`` cotangent gives a
        ``Fill`` (scaled by the copies of each element). The pushforward of a tangent is its
        broadcast view (read-only, as the primal), of a ``Fill`` a ``Fill``.
        """
        array, plan = _broadcast_plan(x, shape)
        return cast("npt.NDArray[_DT]", array_namespace(_need(array)).broadcast_to(array, plan.y_shape))

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """The pullback's reduce kernel (the forward and pushforward are views)."""
        _, plan = _broadcast_plan(*_broadcast_arguments(*args, **kwargs))
        request = _kernel_request(plan, "reduce")
        return [] if request is None else [request]


broadcast_to = BroadcastTo()


def _broadcast_pullback(plan: _Plan, positional: int, like: ArrayLike | None) -> Pullback:
    rest = _count_positional(positional)
    y_shape = plan.y_shape
    if plan.dtype is None:

        def broadcast_to_pullback_integer(dy: object) -> tuple[object, ...]:
            _check_cotangent(dy, y_shape, like)
            return (_NO_TANGENT, *rest)

        return broadcast_to_pullback_integer

    kernel = _kernel(plan, "reduce")
    dtype, x_shape, count = plan.dtype, plan.x_shape, plan.count

    def broadcast_to_pullback(dy: object) -> tuple[object, ...]:
        cotangent = prepare_cotangent(dy, y_shape, dtype, like)
        if isinstance(cotangent, DenseCotangent):
            return (_reduce(plan, kernel, cotangent.array), *rest)
        if isinstance(cotangent, Fill):
            return (Fill(cotangent.value * count, x_shape, dtype), *rest)
        return (_ZERO_TANGENT, *rest)

    return broadcast_to_pullback


@rrule_rule(broadcast_to)
def _broadcast_to_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    array, plan = _broadcast_plan(*_broadcast_arguments(*args, **kwargs))
    x = _need(array)
    y: ArrayLike = array_namespace(x).broadcast_to(x, plan.y_shape)
    return y, _broadcast_pullback(plan, len(args), _like(x))


def _check_tangents(op: str, tangents: object, positional: int) -> object:
    if not isinstance(tangents, tuple) or len(tangents) != positional:
        count = len(tangents) if isinstance(tangents, tuple) else type(tangents).__name__
        raise ValueError(
            f"{op} frule: tangents must be a tuple with one entry per positional argument ({positional}), got {count}"
        )
    return tangents[0]


@frule_rule(broadcast_to)
def _broadcast_to_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    array, plan = _broadcast_plan(*_broadcast_arguments(*args, **kwargs))
    x = _need(array)
    tangent = _check_tangents("broadcast_to", tangents, len(args))
    xp = array_namespace(x)
    y: ArrayLike = xp.broadcast_to(x, plan.y_shape)
    if plan.dtype is None:
        return y, _NO_TANGENT
    prepared = prepare_tangent(tangent, plan.x_shape, plan.dtype, _like(x), "broadcast_to frule: the tangent of x")
    if isinstance(prepared, ZeroTangent):
        return y, prepared
    if isinstance(prepared, Fill):
        return y, Fill(prepared.value, plan.y_shape, plan.dtype)
    return y, xp.broadcast_to(prepared.array, plan.y_shape)


# ---------------------------------------------------------------------------------------------
# sum and mean
# ---------------------------------------------------------------------------------------------


def _sum_arguments(x: object, axis: object = None, keepdims: object = _FALSE) -> tuple[object, object, object]:
    return x, axis, keepdims


def _reduction(plan: _Plan, x: ArrayLike, mean: bool) -> ArrayLike:
    """NumPy's (or CuPy's) own sum or mean; a 0-d array where NumPy gives a scalar."""
    xp = array_namespace(x)
    function = xp.mean if mean else xp.sum
    result = function(x, axis=plan.axes, keepdims=plan.keepdims)
    if not hasattr(result, "shape") or isinstance(result, np.generic):
        return np.asarray(result)
    return cast(ArrayLike, result)


_AxisArgument = Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...] | None
_KeepdimsArgument = Val[bool] | bool


class _Reduction(Op):
    mean = False

    def _compute(self, x: object, axis: object, keepdims: object) -> ArrayLike:
        array, plan = _sum_plan(self.name, x, axis, keepdims)
        return _reduction(plan, _need(array), self.mean)

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """The pullback's expand kernel (the forward is NumPy's, the pushforward a sum)."""
        _, plan = _sum_plan(self.name, *_sum_arguments(*args, **kwargs))
        request = _kernel_request(plan, "mean" if self.mean else "sum")
        return [] if request is None else [request]


class Sum(_Reduction):
    """``np.sum(x, axis, keepdims)``: ``axis`` is ``None`` (every axis), ``Val(int)`` or
    ``Val(tuple)`` (negative allowed); ``keepdims`` is ``Val(True)`` or ``Val(False)``. Both
    static (plain values accepted, counted as dynamic). The result has NumPy's dtype (int32
    sums to int64); a full reduction is a 0-d array.

    Rules: ``back(dy)`` returns ``(dx, NoTangent(), ...)``, one entry per positional argument:
    ``dx`` is ``dy`` copied along the summed axes, one compiled pass, a fresh writable array;
    a cotangent of one element (a full reduction) or a ``Fill`` gives a ``Fill`` in O(1);
    with no axis of extent > 1 summed ``dx`` is ``dy`` itself (a view of the cotangent). The
    pushforward is the sum of the tangent (a ``Fill`` times the count for a ``Fill``).
    """

    name = "sum"

    @overload
    def __call__(self, x: npt.NDArray[_F], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE) -> npt.NDArray[_F]: ...

    @overload
    def __call__(
        self, x: npt.NDArray[np.bool_ | np.integer], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE
    ) -> npt.NDArray[np.integer]: ...

    def __call__(self, x: npt.NDArray[np.generic], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE) -> npt.NDArray[np.generic]:
        return self._compute(x, axis, keepdims)


class Mean(_Reduction):
    """``np.mean(x, axis, keepdims)``, arguments as ``sum``'s (integers and bools average to
    float64). Rules as ``sum``'s, divided by the number of entries averaged: ``dx`` is ``dy /
    count`` copied along the averaged axes (a ``Fill`` for one-element or ``Fill`` cotangents;
    ``dy`` itself when the count is 1).
    """

    name = "mean"
    mean = True

    @overload
    def __call__(self, x: npt.NDArray[_F], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE) -> npt.NDArray[_F]: ...

    @overload
    def __call__(
        self, x: npt.NDArray[np.bool_ | np.integer], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE
    ) -> npt.NDArray[np.float64]: ...

    def __call__(self, x: npt.NDArray[np.generic], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE) -> npt.NDArray[np.generic]:
        return self._compute(x, axis, keepdims)


sum = Sum()  # noqa: A001 - NumPy's name, as the SPEC says
mean = Mean()


def _sum_pullback(plan: _Plan, positional: int, like: ArrayLike | None, is_mean: bool) -> Pullback:
    rest = _count_positional(positional)
    y_shape = plan.y_shape
    if plan.dtype is None:

        def sum_pullback_integer(dy: object) -> tuple[object, ...]:
            _check_cotangent(dy, y_shape, like)
            return (_NO_TANGENT, *rest)

        return sum_pullback_integer

    kernel = _kernel(plan, "mean" if is_mean else "sum")
    dtype, x_shape, count = plan.dtype, plan.x_shape, plan.count
    empty = plan.full_size == 0
    single = math.prod(y_shape) == 1
    # mean divides by the count (1 for sum); an empty x has nothing to divide
    scale = max(count, 1) if is_mean else 1

    def sum_pullback(dy: object) -> tuple[object, ...]:
        cotangent = prepare_cotangent(dy, y_shape, dtype, like)
        if isinstance(cotangent, DenseCotangent):
            array = cotangent.array
            if empty:
                return (array_namespace(array).zeros(x_shape, dtype=dtype), *rest)
            if single:
                value = complex(array.reshape(-1)[0].item())
                return (Fill(value / scale if scale != 1 else value, x_shape, dtype), *rest)
            if kernel is None:  # nothing of extent > 1 summed: dx is dy (count 1)
                return (array.reshape(x_shape), *rest)
            return (_expand(plan, kernel, array, is_mean), *rest)
        if isinstance(cotangent, Fill):
            value = cotangent.value
            return (Fill(value / scale if scale != 1 else value, x_shape, dtype), *rest)
        return (_ZERO_TANGENT, *rest)

    return sum_pullback


def _sum_rrule(op: _Reduction) -> Callable[..., tuple[ArrayLike, Pullback]]:
    def rule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
        array, plan = _sum_plan(op.name, *_sum_arguments(*args, **kwargs))
        x = _need(array)
        return _reduction(plan, x, op.mean), _sum_pullback(plan, len(args), _like(x), op.mean)

    return rule


def _sum_frule(op: _Reduction) -> Callable[..., tuple[ArrayLike, object]]:
    def rule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
        array, plan = _sum_plan(op.name, *_sum_arguments(*args, **kwargs))
        x = _need(array)
        tangent = _check_tangents(op.name, tangents, len(args))
        y = _reduction(plan, x, op.mean)
        if plan.dtype is None:
            return y, _NO_TANGENT
        prepared = prepare_tangent(tangent, plan.x_shape, plan.dtype, _like(x), f"{op.name} frule: the tangent of x")
        if isinstance(prepared, ZeroTangent):
            return y, prepared
        if isinstance(prepared, Fill):
            value = prepared.value if op.mean else prepared.value * plan.count
            return y, Fill(value, plan.y_shape, plan.dtype)
        return y, _reduction(plan, prepared.array, op.mean)

    return rule


rrule_rule(sum)(_sum_rrule(sum))
frule_rule(sum)(_sum_frule(sum))
rrule_rule(mean)(_sum_rrule(mean))
frule_rule(mean)(_sum_frule(mean))


__all__ = ["BroadcastTo", "Mean", "Sum", "broadcast_to", "mean", "sum"]
