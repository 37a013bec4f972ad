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

Rows are slices, so the innermost loops vectorize. The CPU kernels split the outermost group
across threads (the scaffold's ``cpu_launcher``): an outer kept group gives each thread its own
range of the output, an outer reduced group gives each thread after the first its own zeroed
accumulator, added at the end. The CUDA kernels are gathers, one thread per output element (a
kept element summing its reduced entries, or a full element reading its kept one), with no
atomics; adjacent threads read adjacent entries when the last group is kept, and each
thread reads a contiguous run when it is reduced (not coalesced: a block-per-row reduction
would be the next step there).

No kernel where none pays: the forwards are NumPy's (or CuPy's) own ``broadcast_to`` (a
read-only view), ``sum`` and ``mean`` (so results and dtypes are NumPy's exactly);
``broadcast_to``'s pushforward is a broadcast view of the tangent and ``sum``'s is a sum of it.

Decisions
---------
- ``sum``/``mean`` of every axis without ``keepdims`` return a 0-d array where NumPy returns a
  NumPy scalar (the same value and dtype), as ``kron`` does for 0-d operands.
- The density rule: a dense cotangent gives a dense ``dx`` for every extent, with one
  exception, a full reduction (``axis=None`` or every axis, without ``keepdims``): its 0-d
  cotangent gives a ``Fill`` in O(1) (its value read on the host, a device synchronization
  for CuPy), and the types say so. A one-element cotangent of any other shape (``keepdims``,
  or a sum over axes of extent 1) gives a dense, writable ``dx``. A ``Fill`` cotangent of any
  shape gives a ``Fill``.
- ``broadcast_to`` to ``x``'s own shape (nothing reduced) has ``dx`` = ``dy`` itself (a view
  of the cotangent, projected); so has ``sum`` over no axis of extent > 1. A read-only or
  stride-0 ``dy`` gives a copy instead (``_arrays.writable``), as the view ops' pullbacks do.
- ``broadcast_to``'s ``shape`` may be ``Val(int)`` (a 1-D shape), as NumPy's; ``sum``'s
  ``axis=Val(())`` reduces nothing. Duplicate or out-of-range axes are a ``ValueError``, for a
  0-d ``x`` too: NumPy's ``np.sum`` takes ``axis=0`` or ``-1`` there (a legacy rule of its
  ``reduce``, which ``np.mean``, a tuple axis and ``jnp.sum`` do not follow); ours refuses it,
  as they do, in every engine.
- Integer and bool inputs: the forward as NumPy (``sum`` of int32 is int64, ``mean`` of ints
  float64); their tangent is ``NoTangent()``.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import (
    ArrayLike,
    InputFacts,
    checked_size,
    input_facts,
    shape_text,
    static_bool,
    static_ints,
    writable,
)
from .._key import KernelSource, ShapeSignature
from .._codegen import INDEX, SourceWriter, cpu_kernel, nest_limit, numba_scalar, readonly_array, writable_array
from .._cuda import cuda_array_type, cuda_kernel
from .. import _pool
from .._memo import cached_property, memoized
from .._op import KernelRequest
from .._launch import cpu_launcher, cuda_launch
from .._plan import DensePullback, KernelPullback, Plan
from .._results import ZERO_TANGENT
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill
from .._units import HALF_FORMATS, WIDENED, cuda_half_helpers, half_helpers
from .._val import Val
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)
_F = TypeVar("_F", bound=np.inexact)
DType = np.dtype[np.generic]

_FALSE: Val[bool] = Val(False)
# The kernels nest one loop per group inside their own loops (the thread-range loop, a tile's).
_MAX_GROUPS = nest_limit(reserved=4)
_REAL = {"float32": "float32", "float64": "float64", "complex64": "float32", "complex128": "float64"}


# ---------------------------------------------------------------------------------------------
# The index map: groups of full-array axes, reduced ("r") or kept ("k")
# ---------------------------------------------------------------------------------------------


@memoized(maxsize=1024)
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


@dataclass(frozen=True, slots=True)
class _IndexMap:
    """One call's index map: the primal input's shape, the full array's size, the group
    pattern and extents, and how many full entries meet each kept one (``count``)."""

    x_shape: tuple[int, ...]
    full_size: int
    pattern: str
    extents: tuple[int, ...]
    count: int


def _kernel_request(index_map: _IndexMap, dtype: DType | None, kind: str, target: str) -> KernelRequest | None:
    """The pullback kernel (``kind``: "reduce", "sum" or "mean"); ``None`` when the pullback
    needs none (a non-floating input, an empty array, nothing reduced, a one-element ``dy``)."""
    pattern = index_map.pattern
    if dtype is None or index_map.full_size == 0 or "r" not in pattern:
        return None
    if kind != "reduce" and "k" not in pattern:
        return None  # sum's cotangent has one element: the pullback is a Fill
    static: tuple[object, ...] = (pattern, kind == "mean")
    signature = ShapeSignature(
        "broadcast", "reduce" if kind == "reduce" else "expand", static, (dtype.name,), (len(pattern),), target
    )
    render = _render_cuda if target == "cuda" else _render_cpu
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


_TILE_ROWS = 4


def _reduce_tile(writer: SourceWriter, count: int, wide: str, full: str, kept: str, kind: str, half: bool = False) -> None:
    """The innermost reduced-then-kept pair of a reduction (``...rk``): a tile of ``rows``
    contiguous rows of ``E{last}`` entries, all added into one row of ``acc``.

    Rows are taken ``_TILE_ROWS`` at a time, widened and summed pairwise before the one add
    into ``acc``: a quarter of the accumulator's loads and stores per entry of ``dy``, and a
    body that vectorizes along the row. ``full``/``kept`` are the tile's positions from
    ``_walk`` over the pattern without its last group (whose innermost group is the rows).
    ``half``: ``dy`` holds 16-bit bits, widened where read.
    """
    last = f"E{count - 1}"
    if count == 2:  # the rows are the thread's [lo, hi) range itself
        first, stop, base = "lo", "hi", "0"
    else:
        first, stop, base = "0", f"E{count - 2}", full
    writer.line(f"out = acc[{kept} * {last}:{kept} * {last} + {last}]" if kept != "0" else f"out = acc[:{last}]")
    writer.line(f"start = {base} * {last}" if base != "0" else f"start = {first} * {last}")
    writer.line(f"rows = {stop} - {first}" if first != "0" else f"rows = {stop}")
    writer.line(f"blocked = rows - rows % {_TILE_ROWS}")
    with writer.block(f"for r in range(0, blocked, {_TILE_ROWS}):"):
        for row in range(_TILE_ROWS):
            writer.line(f"row{row} = dy[start + (r + {row}) * {last}:start + (r + {row} + 1) * {last}]")
        terms = [f"types.{wide}({_read(f'row{row}[j]', half)})" for row in range(_TILE_ROWS)]
        pairs = [f"({terms[index]} + {terms[index + 1]})" for index in range(0, _TILE_ROWS, 2)]
        with writer.block(f"for j in range({last}):"):
            writer.line(f"out[j] += {' + '.join(pairs)}")
    with writer.block("for r in range(blocked, rows):"):
        writer.line(f"row = dy[start + r * {last}:start + (r + 1) * {last}]")
        with writer.block(f"for j in range({last}):"):
            writer.line(f"out[j] += {_read('row[j]', half)}")


def _read(element: str, half: bool) -> str:
    """An element of ``dy`` as the sums read it: a 16-bit one widened from its bits."""
    return f"widen({element})" if half else element


def _render_cpu(signature: ShapeSignature) -> KernelSource:
    """broadcast_to's pullback (``reduce``: a sum over the reduced groups) or sum's and mean's
    (``expand``: dy copied along them), one pass. A 16-bit dtype's bits are read as uint16
    and widened in the kernel (``_units.half_helpers``), summed in float64 as float32's are."""
    pattern, mean = signature.static
    assert isinstance(pattern, str)
    half = signature.dtypes[0] in HALF_FORMATS
    dtype = np.dtype(np.uint16) if half else np.dtype(signature.dtypes[0])
    if signature.kind == "reduce":
        return _render_reduce_cpu(signature, pattern, dtype, half)
    return _render_expand_cpu(signature, pattern, dtype, half, bool(mean))


def _render_reduce_cpu(signature: ShapeSignature, pattern: str, dtype: np.dtype[np.generic], half: bool) -> KernelSource:
    """``acc[kept] += dy[full]`` over the reduced groups of ``pattern``."""
    wide = np.dtype(np.float64) if half else WIDENED[dtype.name]
    writer = SourceWriter()
    count = len(pattern)
    extents = [(f"E{group}", INDEX) for group in range(count)]
    writer.line(f"# dy is the full array (groups {pattern}, extents E0..), acc the kept one: acc[kept] += dy[full]")

    def reduce_body(full: str, kept: str, kind: str) -> None:
        # Rows are slices: indices from range() are known non-negative, so the loops
        # vectorize (a flat dy[src + j] would need a wraparound check per element).
        last = f"E{count - 1}"
        if count == 1:  # a full reduction of [lo, hi)
            writer.line("row = dy[lo:hi]")
            writer.line(f"total = types.{wide.name}(0)  # not acc[0] * 0: a NaN or infinity there is no zero")
            with writer.block("for j in range(hi - lo):"):
                writer.line(f"total += {_read('row[j]', half)}")
            writer.line("acc[0] += total")
            return
        writer.line(f"row = dy[{full}:{full} + {last}]")
        if kind == "k":
            writer.line(f"out = acc[{kept}:{kept} + {last}]")
            with writer.block(f"for j in range({last}):"):
                writer.line(f"out[j] += {_read('row[j]', half)}")
        else:
            writer.line(f"total = types.{wide.name}(0)  # not acc[0] * 0: a NaN or infinity there is no zero")
            with writer.block(f"for j in range({last}):"):
                writer.line(f"total += {_read('row[j]', half)}")
            writer.line(f"acc[{kept}] += total")

    if count >= 2 and pattern[-2:] == "rk":
        _walk(writer, pattern[:-1], functools.partial(_reduce_tile, writer, count, wide.name, half=half))
    else:
        _walk(writer, pattern, reduce_body)
    parameters = [("dy", readonly_array(dtype)), ("acc", writable_array(wide)), *extents, ("lo", INDEX), ("hi", INDEX)]
    description = f"broadcast_to pullback: a sum over the reduced groups of {pattern!r}, one pass over dy"
    if half:
        source = cpu_kernel(
            signature, parameters, writer, description + f" ({signature.dtypes[0]} bits)", reassociate=True, numpy=True, noalias=True
        )
        return KernelSource(half_helpers(source.text, signature.dtypes[0]), source.entry)
    # noalias: acc is a fresh accumulator; without it LLVM keeps a second, checked version of
    # each loop ((300, 1, 5) -> (300, 300, 5): 0.72x the time; W8, memory-bound, unchanged;
    # bench/README.md round 10)
    return cpu_kernel(signature, parameters, writer, description, reassociate=True, noalias=True)


def _render_expand_cpu(signature: ShapeSignature, pattern: str, dtype: np.dtype[np.generic], half: bool, mean: bool) -> KernelSource:
    """``dx[full] = dy[kept]`` (divided by the count for a mean) along the reduced groups."""
    writer = SourceWriter()
    count = len(pattern)
    extents = [(f"E{group}", INDEX) for group in range(count)]
    divide = " / divisor" if mean else ""
    writer.line(f"# dx is the full array (groups {pattern}, extents E0..), dy the kept one: dx[full] = dy[kept]{divide}")

    def scaled(element: str) -> str:
        """``dy``'s element as ``dx`` takes it: a 16-bit mean's divided in float32 and rounded
        once more to the format (as the float32 route rounds its float32 quotient); a 16-bit
        sum's bits copied."""
        if half and mean:
            return f"narrow(widen({element}){divide})"
        return f"{element}{divide}"

    def expand_body(full: str, kept: str, kind: str) -> None:
        last = f"E{count - 1}"
        writer.line(f"out = dx[{full}:{full} + {last}]")
        if kind == "k":
            writer.line(f"row = dy[{kept}:{kept} + {last}]")
            with writer.block(f"for j in range({last}):"):
                writer.line(f"out[j] = {scaled('row[j]')}")
        else:
            writer.line(f"value = {scaled(f'dy[{kept}]')}")
            with writer.block(f"for j in range({last}):"):
                writer.line("out[j] = value")

    _walk(writer, pattern, expand_body)
    parameters = [("dy", readonly_array(dtype)), ("dx", writable_array(dtype)), *extents]
    if mean:
        parameters.append(("divisor", numba_scalar("float32" if half else _REAL[dtype.name])))
    parameters += [("lo", INDEX), ("hi", INDEX)]
    what = "mean" if mean else "sum"
    description = f"{what} pullback: dy copied along the reduced groups of {pattern!r}, one pass over dx"
    if half:
        source = cpu_kernel(signature, parameters, writer, description + f" ({signature.dtypes[0]} bits)", numpy=True)
        return KernelSource(half_helpers(source.text, signature.dtypes[0]), source.entry)
    return cpu_kernel(signature, parameters, writer, description)


def _render_cuda(signature: ShapeSignature) -> KernelSource:
    """Gathers: one thread per kept element (reduce) or per full element (expand). A 16-bit
    signature (``half``): ``dy`` and ``dx`` are ``uint16`` bits, widened and narrowed in the
    kernel (``_units.cuda_half_helpers``): the reduction sums in float64 and rounds through
    float32 (as the float32 kernel and its result's rounding do), sum's expand moves the
    bits, mean's divides in float32 and rounds once."""
    source = _render_cuda_text(signature)
    half = signature.dtypes[0]
    if half in HALF_FORMATS:
        return KernelSource(cuda_half_helpers(source.text, half), source.entry)
    return source


def _render_cuda_text(signature: ShapeSignature) -> KernelSource:
    pattern, mean = signature.static
    assert isinstance(pattern, str)
    half = signature.dtypes[0] in HALF_FORMATS
    dtype = np.dtype(np.uint16) if half else np.dtype(signature.dtypes[0])
    wide = np.dtype(np.float64) if half else WIDENED[dtype.name]
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
            writer.line(f"total += widen(dy[{previous}])" if half else f"total += dy[{previous}]")
        store = "narrow(np.float32(total))" if half else "total" if wide == dtype else f"{numba_scalar(dtype)}(total)"
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
    if half and mean:
        writer.line(f"dx[t] = narrow(widen(dy[{kept}]) / divisor)")
    else:
        writer.line(f"dx[t] = dy[{kept}]{divide}")
    parameters = [("dy", cuda_array_type(dtype.name)), ("dx", cuda_array_type(dtype.name)), *extents]
    if mean:
        parameters.append(("divisor", numba_scalar("float32" if half else _REAL[dtype.name])))
    parameters.append(("size", INDEX))
    what = "mean" if mean else "sum"
    return cuda_kernel(
        signature, parameters, writer, f"{what} pullback: one thread per element of dx, groups {pattern!r}", total="size"
    )


# ---------------------------------------------------------------------------------------------
# Validation, one function per op
# ---------------------------------------------------------------------------------------------


def _plan_broadcast_to(x_shape: tuple[int, ...], shape: tuple[int, ...], itemsize: int) -> _IndexMap:
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
    # The result is a zero-strided view, as NumPy's: any size costs no memory.
    checked_size(shape, itemsize, "broadcast_to", allocates=False)
    reduced = tuple(axis < lead or x_shape[axis - lead] == 1 for axis in range(len(shape)))
    pattern, extents = _groups(shape, reduced)
    if len(pattern) > _MAX_GROUPS:
        raise ValueError(
            f"broadcast_to: x of shape {shape_text(x_shape)} to {shape_text(shape)} alternates broadcast "
            f"and kept axes {len(pattern)} times; the compiled kernels take at most {_MAX_GROUPS}"
        )
    full_size = math.prod(shape)
    count = full_size // max(math.prod(x_shape), 1) if full_size else 0
    return _IndexMap(x_shape, full_size, pattern, extents, count)


def _plan_sum(
    op: str, x_shape: tuple[int, ...], axis: tuple[int, ...] | None, keepdims: bool
) -> tuple[_IndexMap, tuple[int, ...], tuple[int, ...]]:
    """The index map, the normalized axes and the output's shape."""
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
    return _IndexMap(x_shape, math.prod(x_shape), pattern, extents, count), axes, y_shape


# ---------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------


class _IndexPlan(Plan):
    """What ``broadcast_to`` and ``sum``/``mean`` plans share: the index map, the input's
    tangent dtype (``None`` for an integer or bool input), the target and the pullback kernel."""

    def __init__(
        self,
        op: str,
        index_map: _IndexMap,
        facts: InputFacts,
        *,
        kernel_kind: str,
        out_shape: tuple[int, ...],
        out_dtype: DType,
    ) -> None:
        """``kernel_kind``: the pullback kernel's (``"reduce"``, ``"sum"``, ``"mean"``)."""
        tangent_dtype = facts.tangent_dtype
        request = _kernel_request(index_map, tangent_dtype, kernel_kind, facts.target)
        super().__init__(
            op,
            (facts,),
            out_shape=out_shape,
            out_dtype=out_dtype,
            differentiable=facts.differentiable,
            kernel_entries=frozenset() if request is None else frozenset({"pullback"}),
            any_layout=request is None,  # no kernel: dy is returned (or zeros made) as is
        )
        self.kernel_kind = kernel_kind
        self.index_map = index_map
        self.tangent_dtype = tangent_dtype
        self.target = facts.target
        self.request = request

    def requests(self) -> list[KernelRequest]:
        return [] if self.request is None else [self.request]

    @cached_property
    def launch(self) -> Callable[..., None]:
        """The pullback kernel, split across threads (CPU) or launched on the device (CUDA)."""
        assert self.request is not None and self.tangent_dtype is not None
        kernel = self.request.get()
        index_map = self.index_map
        extents = index_map.extents
        if self.target == "cuda":
            if self.kernel_kind == "reduce":
                kept = math.prod(index_map.x_shape)

                def launch_cuda_reduce(dy: ArrayLike, dx: ArrayLike) -> None:
                    cuda_launch(kernel, kept, dy, dx, *extents, kept, work=index_map.count)

                return launch_cuda_reduce
            divisor = (float(index_map.count),) if self.kernel_kind == "mean" else ()
            size = index_map.full_size

            def launch_cuda_expand(dy: ArrayLike, dx: ArrayLike) -> None:
                cuda_launch(kernel, size, dy, dx, *extents, *divisor, size)

            return launch_cuda_expand
        # CPU: only broadcast_to's reduction launches through here (sum's and mean's pullback is
        # a KernelPullback). An outer reduced group: each thread adds into its own accumulator.
        assert self.kernel_kind == "reduce"
        private = 1 if index_map.pattern[0] == "r" else 0
        return cpu_launcher(kernel, 2, extents, extent=extents[0], work=index_map.full_size, private=private)


class BroadcastPlan(_IndexPlan):
    """``broadcast_to`` of one input dtype and shape to one target shape."""

    def __init__(self, index_map: _IndexMap, shape: tuple[int, ...], facts: InputFacts) -> None:
        super().__init__(
            "broadcast_to", index_map, facts, kernel_kind="reduce", out_shape=shape, out_dtype=facts.native
        )

    def forward(self, arrays: tuple[object, ...]) -> object:
        return self.namespace.broadcast_to(arrays[0], self.out_shape)

    def pullback(self, saved: object) -> DensePullback:
        index_map, dtype, xp = self.index_map, self.out_dtype, self.namespace
        x_shape = index_map.x_shape
        if self.request is None:
            if index_map.full_size == 0:

                def broadcast_to_pullback_empty(dy: ArrayLike) -> tuple[object, ...]:
                    return (xp.zeros(x_shape, dtype=dtype),)

                return broadcast_to_pullback_empty

            def broadcast_to_pullback_view(dy: ArrayLike) -> tuple[object, ...]:
                return (writable(dy).reshape(x_shape),)  # nothing reduced: dy itself, a view

            return broadcast_to_pullback_view

        wide = WIDENED[dtype.name]
        kept = math.prod(x_shape)
        cuda = self.target == "cuda"
        launch = self.launch

        def broadcast_to_pullback_dense(dy: ArrayLike) -> tuple[object, ...]:
            if cuda:
                dx: ArrayLike = xp.empty(kept, dtype=dtype)
                launch(dy.reshape(-1), dx)
                return (dx.reshape(x_shape),)
            accumulator = np.zeros(kept, dtype=wide)
            launch(dy.reshape(-1), accumulator)
            return ((accumulator if wide == dtype else accumulator.astype(dtype)).reshape(x_shape),)

        return broadcast_to_pullback_dense

    def _half_request(self, dtype: DType) -> KernelRequest | None:
        if self.request is None:
            return None
        signature = self.request.signature._replace(dtypes=(dtype.name,))
        render = _render_cuda if self.target == "cuda" else _render_cpu
        return KernelRequest(signature, functools.partial(render, signature))

    def half_requests(self, dtype: DType) -> list[KernelRequest]:
        """The kernel :meth:`half_pullback` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        request = self._half_request(dtype)
        return [] if request is None else [request]

    def half_pullback(self, saved: object, dtype: DType) -> DensePullback | None:
        """For a 16-bit ``x`` of ``dtype`` (this plan being its float32 stand-in's, see
        ``stablerules._half``): ``dy -> (dx,)`` (``dy`` native, C-ordered, of ``dtype``), the
        reduction reading ``dy``'s bits (widened in the kernel, no float32 copy of ``dy``),
        summed in float64 as float32's are, rounded to float32 and then to ``dtype`` (as the
        float32 pullback's result is). ``None`` where it does not apply."""
        request = self._half_request(dtype)
        if request is None:
            return None
        from .._half import narrow  # noqa: PLC0415 - _half is loaded with the first 16-bit array

        index_map = self.index_map
        extents, x_shape = index_map.extents, index_map.x_shape
        if self.target == "cuda":  # one thread per dx element: float64 sum, rounded in the kernel
            kernel, kept, empty = request.get(), math.prod(x_shape), self.namespace.empty
            half_bits = np.dtype(np.uint16)

            def broadcast_to_pullback_half_cuda(dy: ArrayLike) -> tuple[object, ...]:
                dx = empty(kept, dtype=half_bits)
                cuda_launch(kernel, kept, dy.reshape(-1).view(half_bits), dx, *extents, kept, work=index_map.count)
                return (dx.view(dtype).reshape(x_shape),)

            return broadcast_to_pullback_half_cuda
        private = 1 if index_map.pattern[0] == "r" else 0
        launch = cpu_launcher(request.get(), 2, extents, extent=extents[0], work=index_map.full_size, private=private)
        kept = math.prod(x_shape)
        uint16, float32 = np.dtype(np.uint16), np.dtype(np.float32)

        def broadcast_to_pullback_half(dy: ArrayLike) -> tuple[object, ...]:
            accumulator = np.zeros(kept, dtype=np.float64)
            launch(dy.reshape(-1).view(uint16), accumulator)
            return (narrow(accumulator.astype(float32), dtype).reshape(x_shape),)

        return broadcast_to_pullback_half

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        return (Fill(fill.value * self.index_map.count, self.index_map.x_shape, self.out_dtype),)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return self.namespace.broadcast_to(tangent.array, self.out_shape)
        if isinstance(tangent, Fill):
            return Fill(tangent.value, self.out_shape, self.out_dtype)
        return ZERO_TANGENT


class SumPlan(_IndexPlan):
    """``sum`` or ``mean`` of one input dtype and shape over static axes."""

    def __init__(
        self,
        op: str,
        index_map: _IndexMap,
        axes: tuple[int, ...],
        keepdims: bool,
        y_shape: tuple[int, ...],
        facts: InputFacts,
    ) -> None:
        mean = op == "mean"
        # NumPy's result dtype (int32 sums to int64, integers average to float64)
        reduction = np.mean if mean else np.sum
        out_dtype = facts.tangent_dtype or np.dtype(reduction(np.zeros(1, dtype=facts.dtype)).dtype.name)
        super().__init__(op, index_map, facts, kernel_kind=op, out_shape=y_shape, out_dtype=out_dtype)
        self.mean = mean
        self.axes = axes
        self.keepdims = keepdims

    def _reduce(self, x: object) -> ArrayLike:
        """NumPy's (or CuPy's) own sum or mean; a 0-d array where NumPy gives a scalar."""
        reduction = self.namespace.mean if self.mean else self.namespace.sum
        result = reduction(x, axis=self.axes, keepdims=self.keepdims)
        if isinstance(result, np.generic):
            return np.asarray(result)
        return cast(ArrayLike, result)

    def forward(self, arrays: tuple[object, ...]) -> object:
        return self._reduce(arrays[0])

    def _constant(self, value: complex) -> Fill:
        """The pullback of a constant cotangent: ``value`` (divided by the count for mean)."""
        scale = max(self.index_map.count, 1) if self.mean else 1
        return Fill(value / scale if scale != 1 else value, self.index_map.x_shape, self.out_dtype)

    def pullback(self, saved: object) -> DensePullback | KernelPullback:
        index_map, dtype, xp = self.index_map, self.out_dtype, self.namespace
        x_shape = index_map.x_shape
        if self.out_shape == ():
            # A full reduction, the one case where a dense cotangent gives a Fill (typed so):
            # its 0-d cotangent is one number, and dx is that number everywhere.
            constant = self._constant

            def sum_pullback_scalar(dy: ArrayLike) -> tuple[object, ...]:
                return (constant(complex(dy.reshape(-1)[0].item())),)  # O(1): a Fill

            return sum_pullback_scalar
        if index_map.full_size == 0:

            def sum_pullback_empty(dy: ArrayLike) -> tuple[object, ...]:
                return (xp.zeros(x_shape, dtype=dtype),)

            return sum_pullback_empty
        if "r" not in index_map.pattern:

            def sum_pullback_view(dy: ArrayLike) -> tuple[object, ...]:
                return (writable(dy).reshape(x_shape),)  # nothing of extent > 1 summed: dy itself, a view

            return sum_pullback_view
        if "k" not in index_map.pattern:
            # Every axis of extent > 1 reduced, with keepdims or beside axes of extent 1: dy
            # has one element, and dx is dense (only a 0-d cotangent gives a Fill). The one
            # element is broadcast on the device, with no host read.
            scale = max(index_map.count, 1) if self.mean else 1

            def sum_pullback_one(dy: ArrayLike) -> tuple[object, ...]:
                dx: ArrayLike = xp.empty(x_shape, dtype=dtype)
                one: ArrayLike = dy.reshape(())
                dx[...] = one / scale if scale != 1 else one  # type: ignore[operator]
                return (dx,)

            return sum_pullback_one

        size = index_map.full_size
        if self.target == "cpu":
            # One allocation and one launch: the scaffold generates the whole pullback.
            assert self.request is not None
            extents = index_map.extents
            trailing = (*extents, float(index_map.count)) if self.mean else extents
            return KernelPullback(self.request.get(), trailing, extents[0], size, size, dtype, x_shape)
        launch = self.launch
        flat_dy = len(self.out_shape) == 1

        def sum_pullback_dense(dy: ArrayLike) -> tuple[object, ...]:
            dx: ArrayLike = xp.empty(size, dtype=dtype)
            launch(dy if flat_dy else dy.reshape(-1), dx)
            return (dx.reshape(x_shape),)

        return sum_pullback_dense

    def half_requests(self, dtype: DType) -> list[KernelRequest]:
        """The kernel :meth:`half_pullback` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        index_map = self.index_map
        if self.request is None or self.out_shape == () or "k" not in index_map.pattern:
            return []
        signature = self.request.signature._replace(dtypes=(dtype.name,))
        render = _render_cuda if self.target == "cuda" else _render_cpu
        return [KernelRequest(signature, functools.partial(render, signature))]

    def half_pullback(self, saved: object, dtype: DType) -> DensePullback | None:
        """For a 16-bit ``x`` of ``dtype`` (this plan being its float32 stand-in's, see
        ``stablerules._half``): ``dy -> (dx,)`` (``dy`` native, C-ordered, of ``dtype``), one
        pass writing ``dx``'s bits from ``dy``'s (``sum``: copied; ``mean``: divided in float32
        and rounded to the format, as the float32 route does; CUDA: one thread per ``dx``
        element). ``None`` where it does not apply (the cases with no kernel)."""
        requests = self.half_requests(dtype)
        if not requests:
            return None
        index_map = self.index_map
        extents, size, x_shape = index_map.extents, index_map.full_size, index_map.x_shape
        if self.target == "cuda":
            kernel, empty, half_bits = requests[0].get(), self.namespace.empty, np.dtype(np.uint16)
            divisor = (np.float32(index_map.count),) if self.mean else ()

            def sum_pullback_half_cuda(dy: ArrayLike) -> tuple[object, ...]:
                dx = empty(size, dtype=half_bits)
                cuda_launch(kernel, size, dy.reshape(-1).view(half_bits), dx, *extents, *divisor, size)
                return (dx.view(dtype).reshape(x_shape),)

            return sum_pullback_half_cuda
        trailing = (*extents, float(index_map.count)) if self.mean else extents
        launch = cpu_launcher(requests[0].get(), 2, trailing, extent=extents[0], work=size)
        uint16 = np.dtype(np.uint16)
        allocate = _pool.allocator(size * 2)

        def sum_pullback_half(dy: ArrayLike) -> tuple[object, ...]:
            dx = allocate(size, uint16)
            launch(dy.reshape(-1).view(uint16), dx)
            return (dx.view(dtype).reshape(x_shape),)

        return sum_pullback_half

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        return (self._constant(fill.value),)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return self._reduce(tangent.array)
        if isinstance(tangent, Fill):
            value = tangent.value if self.mean else tangent.value * self.index_map.count
            return Fill(value, self.out_shape, self.out_dtype)
        return ZERO_TANGENT


# ---------------------------------------------------------------------------------------------
# The ops
# ---------------------------------------------------------------------------------------------

_ShapeArgument = Val[tuple[int, ...]] | Val[int] | tuple[int, ...] | int
_AxisArgument = Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...] | None
_KeepdimsArgument = Val[bool] | bool


class BroadcastTo(RuleOp):
    """``np.broadcast_to(x, shape)``: a read-only view of ``x`` with the given shape
    (``Val(tuple)``, static; a plain tuple is accepted and counted as dynamic). As NumPy's, the
    view costs no memory whatever its size (zero strides along the broadcast axes); only a
    shape NumPy cannot describe (2**63 bytes or more) is a ``ValueError``.

    Rules: ``back(dy)`` returns ``(dx,)`` (plus ``NoTangent()`` for a positional ``shape``),
    ``dx`` the sum of ``dy`` over the broadcast axes: one compiled pass over ``dy``
    (float32/complex64 accumulated in float64/complex128), a fresh array; to ``x``'s own shape
    ``dx`` is ``dy`` itself (a view of the cotangent). A ``Fill`` cotangent gives a ``Fill``
    (scaled by the copies of each element). The pushforward of a tangent is its broadcast view
    (read-only, as the primal), of a ``Fill`` a ``Fill``.
    """

    name = "broadcast_to"
    static_names = ("shape",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], shape: _ShapeArgument) -> npt.NDArray[_DT]:
        return cast("npt.NDArray[_DT]", self.forward(x, shape))

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", "broadcast_to")
        shape = static_ints(statics[0], "shape")
        return BroadcastPlan(_plan_broadcast_to(facts.shape, shape, facts.dtype.itemsize), shape, facts)


class _Reduction(RuleOp):
    static_names = ("axis", "keepdims")
    input_names = ("x",)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", self.name)
        axis = None if statics[0] is None else static_ints(statics[0], "axis")
        keepdims = static_bool(statics[1], "keepdims")
        index_map, axes, y_shape = _plan_sum(self.name, facts.shape, axis, keepdims)
        return SumPlan(self.name, index_map, axes, keepdims, y_shape, facts)


class Sum(_Reduction):
    """``np.sum(x, axis, keepdims)``: ``axis`` is ``None`` (every axis), ``Val(int)`` or
    ``Val(tuple)`` (negative allowed); ``keepdims`` is ``Val(True)`` or ``Val(False)``. Both
    static (plain values accepted, counted as dynamic). The result has NumPy's dtype (int32
    sums to int64); a full reduction is a 0-d array.

    Rules: ``back(dy)`` returns ``(dx, NoTangent(), ...)``, one entry per positional argument:
    ``dx`` is ``dy`` copied along the summed axes, one compiled pass, a fresh writable array;
    a full reduction's 0-d cotangent (``axis=None`` or every axis, without ``keepdims``) or a
    ``Fill`` gives a ``Fill`` in O(1), any other dense ``dy`` a dense ``dx``; with no axis of extent > 1 summed ``dx`` is ``dy`` itself (a view of the cotangent). The
    pushforward is the sum of the tangent (a ``Fill`` times the count for a ``Fill``).
    """

    name = "sum"

    def __call__(
        self, x: npt.NDArray[np.generic], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE
    ) -> npt.NDArray[np.generic]:
        return cast("npt.NDArray[np.generic]", self.forward(x, axis, keepdims))


class Mean(_Reduction):
    """``np.mean(x, axis, keepdims)``, arguments as ``sum``'s (integers and bools average to
    float64). Rules as ``sum``'s, divided by the number of entries averaged: ``dx`` is ``dy /
    count`` copied along the averaged axes (a ``Fill`` for a full reduction's 0-d cotangent
    and for ``Fill`` cotangents, as ``sum``'s; ``dy`` itself when the count is 1).
    """

    name = "mean"

    def __call__(
        self, x: npt.NDArray[np.generic], axis: _AxisArgument = None, keepdims: _KeepdimsArgument = _FALSE
    ) -> npt.NDArray[np.generic]:
        return cast("npt.NDArray[np.generic]", self.forward(x, axis, keepdims))


broadcast_to = BroadcastTo()
sum = Sum()  # noqa: A001 - NumPy's name (``sr.sum``), the builtin's shadowing is meant
mean = Mean()


__all__ = ["BroadcastPlan", "BroadcastTo", "Mean", "Sum", "SumPlan", "broadcast_to", "mean", "sum"]


# --- engine facts (stablerules._facts) -------------------------------------------------------


def _new_leading_axes(statics: _facts.Statics, shapes: _facts.Shapes) -> bool:
    """A broadcast that only puts new axes in front (``(n...) -> (m..., n...)``): torch's
    backward is one sum over the leading block of a contiguous ``dy``."""
    shape, target = shapes[0], _facts.counts(statics("shape", None))
    return len(target) > len(shape) and (not shape or target[-len(shape):] == shape)


def _reduction_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    reduced = _facts.axes(statics("axis", None), ndim)
    if reduced is None:
        return []
    keep = bool(_facts.value(statics("keepdims", Val(False))))
    return [((axis,), axis if keep else axis - len([r for r in reduced if r < axis])) for axis in range(ndim) if axis not in reduced]


_EXPAND = "torch's backward is an O(1) expand"

def _batch_broadcast_to(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """broadcast_to under a batch axis: each sample padded with leading 1s first (NumPy
    aligns trailing axes), the batch extent in front of the shape."""
    (x,) = arrays
    shape = _facts.counts(call.static("shape"))
    x_shape = ops.shape(x)
    x = ops.reshape(x, (size, *(1,) * (len(shape) - (len(x_shape) - 1)), *x_shape[1:]))
    return ops.forward(call.replace(shape=Val((size, *shape))), (x,))


def _forward_broadcast_to(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    return (xp.broadcast_to(x, _facts.counts(call.static("shape"))),)


def _reduction_axes(xp: _facts.Namespace[_A], x: _A, call: _facts.OpCall) -> tuple[int, ...]:
    axis = _facts.value(call.static("axis"))
    return tuple(range(len(xp.shape(x)))) if axis is None else _facts.counts(axis)


def _forward_sum(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    return (xp.sum(x, _reduction_axes(xp, x, call), bool(_facts.value(call.static("keepdims", False)))),)


def _forward_mean(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    return (xp.mean(x, _reduction_axes(xp, x, call), bool(_facts.value(call.static("keepdims", False)))),)


def _prepared_reduction(
    xp: _facts.Namespace[_A], reduce: Callable[[_A, tuple[int, ...], bool], _A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]]:
    """``sum`` or ``mean`` with its axes (the signature fixes the rank) and ``keepdims`` read once."""
    axes, keepdims = _reduction_axes(xp, arrays[0], call), bool(_facts.value(call.static("keepdims", False)))
    return lambda arrays: (reduce(arrays[0], axes, keepdims),)


def _prepared_sum(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    return _prepared_reduction(xp, xp.sum, call, arrays)


def _prepared_mean(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    return _prepared_reduction(xp, xp.mean, call, arrays)


# Under torch.compile inductor's fused backward of ``expand`` beat a call of our custom op at
# every size measured (results of 4K-4M elements, 1 and 2 threads: inductor/ours 0.05-0.55;
# the benchmark notes): torch's autograd there up to twice the largest size measured.
BROADCAST_COMPILED_BELOW = 1 << 23


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "broadcast_to": _facts.EngineFacts(
        _facts.TorchFacts(
            "Tensor.expand", "kernel", _facts.KERNEL, (_facts.EngineForm("new leading axes only", _new_leading_axes),),
            compiled_below=BROADCAST_COMPILED_BELOW,
        ),
        batch=_batch_broadcast_to,
        forward=_forward_broadcast_to,
    ),
    "sum": _facts.EngineFacts(
        _facts.TorchFacts("torch.sum", "torch", _EXPAND), _reduction_shards, _facts.shift_axes("axis"),
        forward=_forward_sum, prepared=_prepared_sum,
    ),
    "mean": _facts.EngineFacts(
        _facts.TorchFacts("torch.mean", "torch", _EXPAND), _reduction_shards, _facts.shift_axes("axis"),
        forward=_forward_mean, prepared=_prepared_mean,
    ),
}
