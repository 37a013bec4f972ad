"""The kron family: ``kron(a, b)``, NumPy's Kronecker product for any ndims, and its rules.

Layout. Both operands are read with ``n = max(a.ndim, b.ndim, 1)`` axes: the one with fewer
axes gets leading 1-axes (NumPy's rule) and a 0-d operand is a one-element array. Viewed flat,
``y`` is then the C array of shape ``(A0, B0, A1, B1, ..., A{n-1}, B{n-1})`` (the axes of ``a``
and ``b`` interleaved) with ``y[i0, k0, i1, k1, ...] = a[i0, i1, ...] * b[k0, k1, ...]``.

Every kernel walks that loop nest in ``y``'s memory order. Only ``n`` and the dtypes are static:
the extents ``A0..A{n-1}, B0..B{n-1}`` are runtime arguments and the padding 1-axes are ordinary
extents, so one compiled kernel serves every shape pair of the same ``n`` and dtypes. The
innermost pair of axes is one *block*: ``A{n-1}`` rows of ``y``, each a contiguous run of
``B{n-1}`` elements; rows are cut into tiles of at most ``_TILE_BYTES`` so that the rows of
``b``/``db`` that a tile reuses stay in L1 however long the last axis is.

Pullback. One kernel reads ``dy`` once, in memory order, and produces both gradients:
``da[i] += row . b`` (a dot product per row of ``y``) and ``db += a[i] * row`` (an update of
the reused row of ``db``). It works on real arrays only: a complex ``dy`` is read as its
interleaved real view, and complex operands become one or two real *channels* (see
``_pullback_channels``), so every kind of operand runs the same vectorizable template.
Accumulators are float64 whatever the input precision.

Threads. The outermost axis pair ``(i0, k0)`` is flattened into ``A0 * B0`` block ranges
(``A0`` rows when ``n == 1``) and split across threads: each thread reads and writes one
contiguous range of ``y``/``dy``, and the split stays balanced when either operand is padded
(``A0 == 1`` or ``B0 == 1``). The forward and pushforward kernels own their range of ``y``.
The pullback's threads all add into ``da`` and ``db``, so each thread after the first gets
zeroed partial buffers of both, summed at the end: no atomics, and the extra memory is
``threads - 1`` sets of accumulators (``a.size + b.size`` float64 for real operands, up to
``2 * a.size + 4 * b.size`` for complex ones), tiny next to the cotangent.

Plans. A call's signature (operand dtypes and shapes, device) has one :class:`KronPlan` on
the rule scaffold (``stablerules._rule``): validation, the layout and the kernels are settled
once; the pullback closure is made per rrule, since it holds the operands.

CUDA (CuPy arrays, or ``STABLERULES_DEVICE=cuda``). ``y``'s flat index of ``a[i] * b[k]`` is
``offset_a[i] + offset_b[k]``; one small kernel writes both tables (per call, on the device,
from the extents), so the other kernels are independent of ``n`` and index without dividing
per element. Forward and pushforward: one thread per pair ``(i, k)``. Pullback: one launch of
gathers, no atomics: warps own ``da`` elements (lanes stride along ``b``'s rows, coalesced),
lanes own consecutive ``db`` elements (warps split ``a``), each with a shared-memory
reduction; complex values natively, sums in float64/complex128 as on the CPU. It reads ``dy``
twice.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias, TypeVar, Union, cast

import numpy as np
import numpy.typing as npt

from .._arrays import (
    ArrayLike,
    InputFacts,
    as_array,
    check_dtype,
    checked_size,
    contiguous,
    input_facts,
    is_differentiable,
    joint_device,
    joint_namespace,
    kernel_target,
    shape_text,
)
from .._key import Kernel, KernelSource, ShapeSignature
from .._codegen import INDEX, SourceWriter, conj, cpu_kernel, greatest, least, nest_limit, numba_scalar, readonly_array, writable_array
from .._cuda import cuda_array_type, cuda_block_kernel, cuda_kernel
from .._memo import cached_property, memoized
from .._op import KernelRequest
from .._launch import cpu_launcher, cuda_launch, cuda_launch_blocks
from .._plan import DensePullback, Plan, SavedDense
from .._results import NO_TANGENT, ZERO_TANGENT
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill
from .._units import HALF_FORMATS, WIDENED, cuda_half_helpers, half_helpers
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)

KronOperand: TypeAlias = Union[npt.NDArray[np.generic], bool, int, float, complex]
"""An operand of ``kron``: an array, or a Python scalar (read as a 0-d array, as NumPy does)."""

# The rows of b (and db) that one row tile reuses take at most this many bytes together, so
# they stay in L1 (48 KiB on the machines we measured) next to the streaming cotangent.
_TILE_BYTES = 32768
# The kernels nest two loops per axis plus the row-tile loops: 9 axes is the most that compiles.
_MAX_AXES = nest_limit(per_level=2, reserved=2)
_FLOAT64: np.dtype[np.generic] = np.dtype(np.float64)

# The pullback walks the rows of a block this many at a time. They share each load of b and
# each load-add-store of db, a third of the instructions per element on short rows. The rows
# of a group are a quarter of the block apart, not adjacent: the group then reads the block as
# four sequential streams in different 4 KiB pages, which the hardware prefetchers follow
# (both choices were measured).
_ROWS = 4

# Accumulation precision: float32 / complex64 sums run in float64 (complex128 for the closed
# forms of a Fill). A kron gradient entry sums |b| (or |a|) products, 3e4 of them for a b
# of shape (300, 100), where float32 accumulation would lose about 3 digits; products of float32 values
# are exact in float64, and the conversion costs nothing on the memory-bound path (the
# cotangent is still read in its own dtype, only the accumulators are wide): ``WIDENED``.


# --------------------------------------------------------------------------------------------
# Layout: everything a call's kernels need, from shapes and dtypes only
# --------------------------------------------------------------------------------------------


# A NamedTuple, not a frozen dataclass: its definition cost (see ``_schema.Param``).
class _KronLayout(NamedTuple):
    """Shapes, dtypes and kernel signatures of one ``kron(a, b)`` call signature.

    ``a_kernel_dtype``/``b_kernel_dtype`` are what the forward kernels read: a floating
    operand as it is (the kernel converts), a non-floating one cast beforehand to the result
    dtype (its real counterpart when the result is complex). ``pullback_extents`` are the
    extents of the pullback's real view: the last axis of ``b`` counts real and imaginary
    parts when the result is complex.
    """

    ndim: int
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    y_size: int
    extents: tuple[int, ...]
    pullback_extents: tuple[int, ...]
    blocks: int
    result: np.dtype[np.generic]
    real: np.dtype[np.generic]
    a_dtype: np.dtype[np.generic]
    b_dtype: np.dtype[np.generic]
    a_kernel_dtype: np.dtype[np.generic]
    b_kernel_dtype: np.dtype[np.generic]
    a_differentiable: bool
    b_differentiable: bool
    forward: ShapeSignature
    pullback: ShapeSignature
    pushforward: ShapeSignature


_REAL_OF: dict[str, np.dtype[np.generic]] = {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}


def _real_dtype(dtype: np.dtype[np.generic]) -> np.dtype[np.generic]:
    return _REAL_OF.get(dtype.name, dtype)


def _kernel_dtype(dtype: np.dtype[np.generic], result: np.dtype[np.generic]) -> np.dtype[np.generic]:
    """The native-byte-order dtype a kernel reads an operand as."""
    return np.dtype(dtype.name) if dtype.kind in "fc" else _real_dtype(result)


def _padded(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return (1,) * (ndim - len(shape)) + shape


@memoized(maxsize=512)
def _layout(
    a_shape: tuple[int, ...],
    a_dtype: np.dtype[np.generic],
    b_shape: tuple[int, ...],
    b_dtype: np.dtype[np.generic],
) -> _KronLayout:
    """The layout of ``kron`` on operands of these shapes and dtypes (memoized: a pure
    function of its arguments, so repeated calls of one signature skip the arithmetic)."""
    check_dtype(a_dtype, "a")
    check_dtype(b_dtype, "b")
    if max(len(a_shape), len(b_shape)) > _MAX_AXES:
        raise ValueError(
            f"kron: a has shape {shape_text(a_shape)} and b has shape {shape_text(b_shape)}; the "
            f"compiled kernels nest two loops per axis and take at most {_MAX_AXES} axes"
        )
    result: np.dtype[np.generic] = np.dtype(np.result_type(a_dtype, b_dtype).name)
    y_ndim = max(len(a_shape), len(b_shape))
    y_shape = tuple(
        extent_a * extent_b
        for extent_a, extent_b in zip(_padded(a_shape, y_ndim), _padded(b_shape, y_ndim))
    )
    y_size = checked_size(y_shape, result.itemsize, "kron: the output")
    ndim = max(y_ndim, 1)
    a_padded = _padded(a_shape, ndim)
    b_padded = _padded(b_shape, ndim)
    a_kernel_dtype = _kernel_dtype(a_dtype, result)
    b_kernel_dtype = _kernel_dtype(b_dtype, result)
    dtypes = (result.name, a_kernel_dtype.name, b_kernel_dtype.name)
    want_a, want_b = is_differentiable(a_dtype), is_differentiable(b_dtype)
    # Pullback channels (see _pullback_channels): one per real array on each side; a
    # complex ``a`` needs two on both sides, everything else one.
    channels = 2 if a_kernel_dtype.kind == "c" else 1
    static = (channels if want_b else 0, channels if want_a else 0)
    view = 2 if result.kind == "c" else 1
    real = _real_dtype(result)
    return _KronLayout(
        ndim=ndim,
        a_shape=a_shape,
        b_shape=b_shape,
        y_shape=y_shape,
        y_size=y_size,
        extents=a_padded + b_padded,
        pullback_extents=a_padded + b_padded[:-1] + (b_padded[-1] * view,),
        blocks=a_padded[0] * b_padded[0] if ndim > 1 else a_padded[0],
        result=result,
        real=real,
        a_dtype=a_dtype,
        b_dtype=b_dtype,
        a_kernel_dtype=a_kernel_dtype,
        b_kernel_dtype=b_kernel_dtype,
        a_differentiable=want_a,
        b_differentiable=want_b,
        forward=ShapeSignature("kron", "forward", (), dtypes, (ndim,)),
        pullback=ShapeSignature("kron", "pullback", static, (real.name,), (ndim,)),
        pushforward=ShapeSignature("kron", "pushforward", (), dtypes, (ndim,)),
    )


# --------------------------------------------------------------------------------------------
# Kernel templates
# --------------------------------------------------------------------------------------------


def _extent_parameters(ndim: int) -> list[tuple[str, str]]:
    return [(f"A{axis}", INDEX) for axis in range(ndim)] + [(f"B{axis}", INDEX) for axis in range(ndim)]


def _cast(expression: str, dtype: np.dtype[np.generic], target: np.dtype[np.generic]) -> str:
    """``expression`` (of ``dtype``) converted to ``target``; itself when they agree."""
    return expression if dtype == target else f"{numba_scalar(target)}({expression})"


def _tile(column_bytes: int) -> int:
    """Row-tile width when each column of the tile's reused rows takes ``column_bytes``."""
    return max(64, _TILE_BYTES // max(column_bytes, 1))


@contextlib.contextmanager
def _row_tiles(
    writer: SourceWriter,
    ndim: int,
    flat: str,
    tile: int,
    a_rows: tuple[str, ...],
    b_rows: tuple[str, ...],
) -> Iterator[tuple[str, str]]:
    """Write the loop nest every kron kernel shares, down to one row tile.

    Inside it, ``<name>_row`` is the last-axis row of each array in ``a_rows`` (``a`` and its
    companions: ``da``, ``a_tangent``) at the current outer indices, ``<name>_tile`` is
    ``width`` elements of the last-axis row of each array in ``b_rows``, and
    ``<flat>_block`` is the block of ``flat`` (``y`` or ``dy``) they meet in: ``A{n-1}`` rows of
    ``B{n-1}``. Yields the bounds ``(first, end)`` of the row index; the caller writes the
    row loop.
    """
    last = ndim - 1
    with contextlib.ExitStack() as stack:
        if ndim == 1:
            writer.line(f"# one block: {flat} is A0 rows of B0 elements; this call owns rows [lo, hi)")
            rows = ("lo", "hi")
            for name in a_rows:
                writer.line(f"{name}_row = {name}")
            writer.line(f"{flat}_block = {flat}")
        else:
            writer.line(f"# {flat} is (A0, B0, A1, B1, ...); this call owns blocks i0 * B0 + k0 in [lo, hi)")
            stack.enter_context(writer.block("for i0 in range(lo // B0, (hi + B0 - 1) // B0):"))
            stack.enter_context(writer.block(f"for k0 in range({greatest('lo - i0 * B0', '0')}, {least('hi - i0 * B0', 'B0')}):"))
            writer.line("block = i0 * B0 + k0")
            a_at, b_at, y_at = "i0", "k0", "block"
            for axis in range(1, last):
                stack.enter_context(writer.block(f"for i{axis} in range(A{axis}):"))
                writer.line(f"a_at{axis} = {a_at} * A{axis} + i{axis}")
                stack.enter_context(writer.block(f"for k{axis} in range(B{axis}):"))
                writer.line(f"b_at{axis} = {b_at} * B{axis} + k{axis}")
                writer.line(f"y_at{axis} = ({y_at} * A{axis} + i{axis}) * B{axis} + k{axis}")
                a_at, b_at, y_at = f"a_at{axis}", f"b_at{axis}", f"y_at{axis}"
            rows = ("0", f"A{last}")
            writer.line(f"# one block: A{last} rows of B{last} elements, row i is a_row[i] * b_row")
            for name in a_rows:
                writer.line(f"{name}_row = {name}[{a_at} * A{last}:({a_at} + 1) * A{last}]")
            span = f"A{last} * B{last}"
            writer.line(f"{flat}_block = {flat}[{y_at} * ({span}):({y_at} + 1) * ({span})]")
        stack.enter_context(writer.block(f"for j_lo in range(0, B{last}, {tile}):"))
        writer.line(f"width = {least(str(tile), f'B{last} - j_lo')}")
        b_base = "j_lo" if ndim == 1 else f"{b_at} * B{last} + j_lo"
        for name in b_rows:
            writer.line(f"{name}_tile = {name}[{b_base}:{b_base} + width]")
        yield rows


def _row(flat: str, ndim: int, index: str = "i") -> str:
    """The current tile of row ``index`` of ``flat``'s block (columns ``j_lo`` + [0, width))."""
    last = ndim - 1
    start = f"({index}) * B{last} + j_lo" if " " in index else f"{index} * B{last} + j_lo"
    return f"{flat}_block[{start}:{start} + width]"


def _render_product(signature: ShapeSignature) -> KernelSource:
    """``y = kron(a, b)``: the forward kernel, also the pushforward with one zero tangent."""
    result, a_dtype, b_dtype = (np.dtype(name) for name in signature.dtypes)
    (ndim,) = signature.ndims
    writer = SourceWriter()
    with _row_tiles(writer, ndim, "y", _tile(b_dtype.itemsize), ("a",), ("b",)) as (first, end):
        with writer.block(f"for i in range({first}, {end}):"):
            writer.line(f"row = {_row('y', ndim)}")
            writer.line(f"a_i = {_cast('a_row[i]', a_dtype, result)}")
            with writer.block("for j in range(width):"):
                writer.line(f"row[j] = a_i * {_cast('b_tile[j]', b_dtype, result)}")
    parameters = [
        ("y", writable_array(result)),
        ("a", readonly_array(a_dtype)),
        ("b", readonly_array(b_dtype)),
        *_extent_parameters(ndim),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, f"kron forward, {ndim} axis pairs")


def _render_pushforward(signature: ShapeSignature) -> KernelSource:
    """``y = kron(a_tangent, b) + kron(a, b_tangent)`` in one pass, one output."""
    result, a_dtype, b_dtype = (np.dtype(name) for name in signature.dtypes)
    (ndim,) = signature.ndims
    writer = SourceWriter()
    rows = _row_tiles(writer, ndim, "y", _tile(2 * b_dtype.itemsize), ("a", "a_tangent"), ("b", "b_tangent"))
    with rows as (first, end):
        with writer.block(f"for i in range({first}, {end}):"):
            writer.line(f"row = {_row('y', ndim)}")
            writer.line(f"a_i = {_cast('a_row[i]', a_dtype, result)}")
            writer.line(f"a_tangent_i = {_cast('a_tangent_row[i]', a_dtype, result)}")
            with writer.block("for j in range(width):"):
                b_j = _cast("b_tile[j]", b_dtype, result)
                b_tangent_j = _cast("b_tangent_tile[j]", b_dtype, result)
                writer.line(f"row[j] = a_tangent_i * {b_j} + a_i * {b_tangent_j}")
    parameters = [
        ("y", writable_array(result)),
        ("a", readonly_array(a_dtype)),
        ("b", readonly_array(b_dtype)),
        ("a_tangent", readonly_array(a_dtype)),
        ("b_tangent", readonly_array(b_dtype)),
        *_extent_parameters(ndim),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, f"kron pushforward, {ndim} axis pairs")


def _emit_kron_rows(
    writer: SourceWriter,
    count: int,
    ndim: int,
    names: tuple[list[str], list[str], list[str], list[str]],
    half: str | None,
    real: np.dtype[np.generic],
    wide: np.dtype[np.generic],
) -> None:
    """``count`` rows of kron's fused CPU pullback, ``stride`` apart from row ``i`` on: each
    b and db element is loaded once for all of them (``names``: the a, b, da and db arrays'
    names, one per channel)."""
    a_names, b_names, da_names, db_names = names
    group = [(r, "i" if r == 0 else "i + stride" if r == 1 else f"i + {r} * stride") for r in range(count)]
    for r, index in group:
        writer.line(f"row_{r} = {_row('dy', ndim, index)}")
    for r, index in group:
        for name in a_names:
            writer.line(f"{name}_{r} = {name}_row[{index}]")
        for name in da_names:
            writer.line(f"{name}_total_{r} = 0.0")
    with writer.block("for j in range(width):"):
        for r, _ in group:
            if half is not None:
                writer.line(f"value_{r} = {numba_scalar(wide)}(widen(row_{r}[j]))")
            else:
                writer.line(f"value_{r} = {_cast(f'row_{r}[j]', real, wide)}")
        for name, total in zip(b_names, da_names):
            writer.line(f"{name}_j = {name}_tile[j]")
            for r, _ in group:
                writer.line(f"{total}_total_{r} += value_{r} * {name}_j")
        for name, gradient in zip(a_names, db_names):
            terms = " + ".join(f"value_{r} * {name}_{r}" for r, _ in group)
            writer.line(f"{gradient}_tile[j] += {terms}")
    for name in da_names:
        for r, index in group:
            writer.line(f"{name}_row[{index}] += {name}_total_{r}")


def _render_pullback(signature: ShapeSignature, half: str | None = None) -> KernelSource:
    """The fused pullback over real views: ``da_c[i] += sum_k dy[i, k] * b_c[k]`` for each
    b-side channel ``c`` and ``db_c[k] += sum_i dy[i, k] * a_c[i]`` for each a-side channel,
    reading ``dy`` once in memory order (``_pullback_channels`` says what the channels are).
    ``half``: ``dy`` is that 16-bit format's bits, widened where read (the operands float32)."""
    a_channels, b_channels = signature.static
    assert isinstance(a_channels, int) and isinstance(b_channels, int)
    real = np.dtype(np.float32) if half is not None else np.dtype(signature.dtypes[0])
    wide = WIDENED[real.name]
    (ndim,) = signature.ndims
    a_names = ["a"] if a_channels == 1 else [f"a_{c}" for c in range(a_channels)]
    b_names = ["b"] if b_channels == 1 else [f"b_{c}" for c in range(b_channels)]
    da_names = ["da"] if b_channels == 1 else [f"da_{c}" for c in range(b_channels)]  # pairs with b_c
    db_names = ["db"] if a_channels == 1 else [f"db_{c}" for c in range(a_channels)]  # pairs with a_c

    names = (a_names, b_names, da_names, db_names)
    writer = SourceWriter()
    a_rows = tuple(a_names + da_names)
    b_rows = tuple(b_names + db_names)
    column_bytes = real.itemsize * b_channels + wide.itemsize * a_channels
    with _row_tiles(writer, ndim, "dy", _tile(column_bytes), a_rows, b_rows) as (first, end):
        count = f"({end} - {first})" if first != "0" else end
        writer.line(f"# {_ROWS} rows at a time, stride rows apart: they share each load of a b element")
        writer.line(f"# and each update of a db element, and read the block as {_ROWS} sequential")
        writer.line("# streams in different pages, which the hardware prefetchers follow")
        writer.line(f"stride = {count} // {_ROWS}")
        with writer.block(f"for i in range({first}, {first} + stride):" if first != "0" else "for i in range(stride):"):
            _emit_kron_rows(writer, _ROWS, ndim, names, half, real, wide)
        with writer.block(f"for i in range({first} + {_ROWS} * stride, {end}):" if first != "0" else f"for i in range({_ROWS} * stride, {end}):"):
            _emit_kron_rows(writer, 1, ndim, names, half, real, wide)
    parameters = [("dy", readonly_array("uint16" if half is not None else real))]
    parameters += [(name, readonly_array(real)) for name in a_names + b_names]
    parameters += [(name, writable_array(wide)) for name in da_names + db_names]
    parameters += [*_extent_parameters(ndim), ("lo", INDEX), ("hi", INDEX)]
    description = f"kron pullback, {ndim} axis pairs, {a_channels} a-side and {b_channels} b-side channels"
    if half is not None:
        source = cpu_kernel(signature, parameters, writer, f"{description} ({half} bits)", reassociate=True, numpy=True)
        return KernelSource(half_helpers(source.text, half), source.entry)
    return cpu_kernel(signature, parameters, writer, description, reassociate=True)


def _product_request(layout: _KronLayout) -> KernelRequest:
    return KernelRequest(layout.forward, functools.partial(_render_product, layout.forward))


def _pushforward_request(layout: _KronLayout) -> KernelRequest:
    return KernelRequest(layout.pushforward, functools.partial(_render_pushforward, layout.pushforward))


def _pullback_request(layout: _KronLayout) -> KernelRequest:
    return KernelRequest(layout.pullback, functools.partial(_render_pullback, layout.pullback))


def _half_pullback_request(layout: _KronLayout, format: str) -> KernelRequest:
    """The CPU pullback kernel reading a 16-bit ``format``'s ``dy`` as bits (float32 operands)."""
    signature = layout.pullback._replace(kind="pullback-half", dtypes=(format,))
    return KernelRequest(signature, functools.partial(_render_pullback, signature, format))


# ---------------------------------------------------------------------------------------------
# CUDA kernels
# ---------------------------------------------------------------------------------------------
#
# Offsets. y's flat index of a[i] * b[k] splits into offset_a[i] + offset_b[k] (y is the C
# array (A0, B0, A1, B1, ...): i's axes and k's axes contribute separately). One small kernel
# computes both tables, ``offsets = offset_a ++ offset_b`` (a.size + b.size int64s, on the
# device, from the extents alone); every other kernel then indexes y/dy without a division
# per element.
#
# Forward and pushforward: one thread per pair p = i * b.size + k (one division by b.size),
# writing y[offset_a[i] + offset_b[k]]; adjacent threads write adjacent elements of a row.
#
# Pullback: one block-stride kernel whose units cover da, then db, both gathers (no atomics):
#   - a da unit is _KRON_WARPS elements of da, one warp each: its 32 lanes stride over k
#     (adjacent lanes read adjacent dy elements of a row, coalesced) summing
#     dy[offset_a[i] + offset_b[k]] * conj(b[k]), then the warp's 32 partial sums are reduced
#     in shared memory;
#   - a db unit is 32 consecutive elements of db, one per lane (coalesced along k): the block's
#     warps split the i loop, summing dy[offset_a[i] + offset_b[k]] * conj(a[i]) (a[i] and
#     offset_a[i] are the same for the whole warp: broadcast loads), then the warps' partial
#     sums are reduced in shared memory.
# One launch instead of two (small problems pay one launch latency); each unit kind is the
# reduction shape that keeps its reads coalesced. Sums run in float64 / complex128 as on the CPU.
# dy is read twice (once by the da units, once by the db units).

_KRON_LANES = 32
_KRON_WARPS = 8
_KRON_THREADS = _KRON_LANES * _KRON_WARPS


def _cuda_strides(ndim: int, setup: SourceWriter) -> tuple[list[str], list[str]]:
    """Per axis, the step in y of a's index and of b's index, as source text: y's axis pair
    ``d`` has stride ``ystride{d} = prod(A_e * B_e, e > d)`` (defined in ``setup``), so b's
    index steps by ``ystride{d}`` and a's by ``B{d} * ystride{d}``."""
    ystrides = ["1"] * ndim
    for axis in range(ndim - 2, -1, -1):
        ystrides[axis] = f"A{axis + 1} * B{axis + 1}" + ("" if ystrides[axis + 1] == "1" else f" * ystride{axis + 1}")
    for axis in range(ndim - 1, -1, -1):  # inner strides first: outer ones use them
        if ystrides[axis] != "1":
            setup.line(f"ystride{axis} = {ystrides[axis]}")
    b_steps = ["1" if ystrides[axis] == "1" else f"ystride{axis}" for axis in range(ndim)]
    a_steps = [f"B{axis}" if b_steps[axis] == "1" else f"B{axis} * {b_steps[axis]}" for axis in range(ndim)]
    return a_steps, b_steps


def _unflatten_axes(writer: SourceWriter, index: str, prefix: str, extents: str, ndim: int) -> list[str]:
    """Split the flat C index ``index`` over ``{extents}0..`` into ``{prefix}0..``; one division
    per axis but the outermost."""
    names = [f"{prefix}{axis}" for axis in range(ndim)]
    current = index
    for axis in range(ndim - 1, 0, -1):
        writer.line(f"{prefix}q{axis} = {current} // {extents}{axis}")
        writer.line(f"{names[axis]} = {current} - {prefix}q{axis} * {extents}{axis}")
        current = f"{prefix}q{axis}"
    writer.line(f"{names[0]} = {current}")
    return names


def _dot(names: list[str], steps: list[str]) -> str:
    """``i0 * step0 + i1 * step1 + ...`` as source text, without multiplications by 1."""
    terms = []
    for name, step in zip(names, steps):
        if step == "1":
            terms.append(name)
        else:
            terms.append(f"{name} * ({step})" if " " in step else f"{name} * {step}")
    return " + ".join(terms)


def _render_offsets_cuda(signature: ShapeSignature) -> KernelSource:
    """The offset tables of ``n`` axis pairs: one thread per element of ``a`` and of ``b``."""
    (ndim,) = signature.ndims
    setup = SourceWriter()
    a_steps, b_steps = _cuda_strides(ndim, setup)
    writer = SourceWriter()
    writer.line("# y is the C array (A0, B0, A1, B1, ...); y's flat index of a[i] * b[k] is")
    writer.line("# offsets[i] + offsets[size_a + k]")
    with writer.block("if t < size_a:"):
        names = _unflatten_axes(writer, "t", "i", "A", ndim)
        writer.line(f"offsets[t] = {_dot(names, a_steps)}")
    with writer.block("else:"):
        writer.line("k = t - size_a")
        names = _unflatten_axes(writer, "k", "k", "B", ndim)
        writer.line(f"offsets[t] = {_dot(names, b_steps)}")
    parameters = [("offsets", cuda_array_type("int64")), *_extent_parameters(ndim), ("size_a", INDEX), ("total", INDEX)]
    return cuda_kernel(signature, parameters, writer, f"kron offsets of y, {ndim} axis pairs", setup=setup)


def _render_product_cuda(signature: ShapeSignature, tangent: bool) -> KernelSource:
    """``y = kron(a, b)`` (or, with ``tangent``, ``kron(a_tangent, b) + kron(a, b_tangent)``):
    one thread per pair (i, k)."""
    result, a_dtype, b_dtype = (np.dtype(name) for name in signature.dtypes)
    writer = SourceWriter()
    writer.line("i = p // size_b")
    writer.line("k = p - i * size_b")
    a_i, b_k = _cast("a[i]", a_dtype, result), _cast("b[k]", b_dtype, result)
    if tangent:
        a_t, b_t = _cast("a_tangent[i]", a_dtype, result), _cast("b_tangent[k]", b_dtype, result)
        writer.line(f"y[offsets[i] + offsets[size_a + k]] = {a_t} * {b_k} + {a_i} * {b_t}")
    else:
        writer.line(f"y[offsets[i] + offsets[size_a + k]] = {a_i} * {b_k}")
    parameters = [("y", cuda_array_type(result.name)), ("a", cuda_array_type(a_dtype.name)), ("b", cuda_array_type(b_dtype.name))]
    if tangent:
        parameters += [("a_tangent", cuda_array_type(a_dtype.name)), ("b_tangent", cuda_array_type(b_dtype.name))]
    parameters += [("offsets", cuda_array_type("int64")), ("size_a", INDEX), ("size_b", INDEX), ("total", INDEX)]
    what = "pushforward" if tangent else "forward"
    return cuda_kernel(signature, parameters, writer, f"kron {what}: one thread per pair (i, k)", index="p")


def _store(expression: str, wide: np.dtype[np.generic], target: np.dtype[np.generic]) -> str:
    """A wide sum stored into ``target``: the real part for a real target, then cast."""
    if wide.kind == "c" and target.kind != "c":
        expression = f"{expression}.real"
    return expression if np.dtype(target) == wide else f"{numba_scalar(target)}({expression})"


def _render_pullback_cuda(signature: ShapeSignature) -> KernelSource:
    """da and db as gathers in one block-stride kernel (units: da first, then db).

    ``pullback-half`` (float32 operands, ``static`` the 16-bit format twice): ``dy``, ``da``
    and ``db`` are ``uint16`` bits; each ``dy`` term is widened in registers, the sums run in
    float64 as float32's do, and each result is rounded through float32 to the format in the
    kernel (``_units.cuda_half_helpers``): the float32 route's bits."""
    half = signature.kind == "pullback-half"
    source = _render_pullback_cuda_text(signature, half)
    if half:
        return KernelSource(cuda_half_helpers(source.text, str(signature.static[0])), source.entry)
    return source


def _emit_kron_da(writer: SourceWriter, zero: str, product: str, stored: str) -> None:
    """The da half of kron's CUDA pullback: ``_KRON_WARPS`` elements of da a unit, one per
    warp, its lanes striding over ``k`` (``product``: one term), reduced in the block's shared
    buffer and ``stored`` by lane 0 of each warp."""
    writer.line(f"# {_KRON_WARPS} elements of da, one per warp; lanes stride over k")
    writer.line(f"i = unit * {_KRON_WARPS} + warp")
    writer.line(f"gradient = {zero}")
    with writer.block("if i < size_a:"):
        writer.line("base = offsets[i]")
        with writer.block(f"for k in range(column, size_b, {_KRON_LANES}):"):
            writer.line(f"gradient += {product}")
    writer.line("buffer[lane] = gradient")
    writer.line("cuda.syncthreads()")
    for step in (16, 8, 4, 2, 1):
        with writer.block(f"if column < {step}:"):
            writer.line(f"buffer[lane] += buffer[lane + {step}]")
        writer.line("cuda.syncthreads()")
    with writer.block("if column == 0 and i < size_a:"):
        writer.line(f"da[i] = {stored}")


def _emit_kron_db(writer: SourceWriter, zero: str, product: str, stored: str) -> None:
    """The db half: ``_KRON_LANES`` consecutive elements of db a unit, one per lane, the
    warps splitting the ``i`` loop, reduced across warps and ``stored`` by warp 0."""
    writer.line(f"# {_KRON_LANES} consecutive elements of db, one per lane; warps split the i loop")
    writer.line(f"k = (unit - da_units) * {_KRON_LANES} + column")
    writer.line(f"gradient = {zero}")
    with writer.block("if k < size_b:"):
        writer.line("base = offsets[size_a + k]")
        with writer.block(f"for i in range(warp, size_a, {_KRON_WARPS}):"):
            writer.line(f"gradient += {product}")
    writer.line("buffer[lane] = gradient")
    writer.line("cuda.syncthreads()")
    step = _KRON_WARPS // 2
    while step:
        with writer.block(f"if warp < {step}:"):
            writer.line(f"buffer[lane] += buffer[lane + {step * _KRON_LANES}]")
        writer.line("cuda.syncthreads()")
        step //= 2
    with writer.block("if warp == 0 and k < size_b:"):
        writer.line(f"db[k] = {stored}")


def _render_pullback_cuda_text(signature: ShapeSignature, half: bool) -> KernelSource:
    result, a_dtype, b_dtype = (np.dtype(name) for name in signature.dtypes[:3])
    da_name, db_name = (str(name) for name in signature.static)
    want_a, want_b = da_name != "-", db_name != "-"
    bits = np.dtype(np.uint16)
    da_dtype = bits if half else np.dtype(da_name) if want_a else result
    db_dtype = bits if half else np.dtype(db_name) if want_b else result
    wide = WIDENED[result.name]
    zero = f"{numba_scalar(wide)}(0)"

    def term(array: str, index: str, dtype: np.dtype[np.generic]) -> str:
        return conj(_cast(f"{array}[{index}]", dtype, wide), wide)

    def read_dy(index: str) -> str:
        return f"{numba_scalar(wide)}(widen(dy[{index}]))" if half else _cast(f"dy[{index}]", result, wide)

    def store(expression: str, target: np.dtype[np.generic]) -> str:
        return f"narrow(np.float32({expression}))" if half else _store(expression, wide, target)

    setup = SourceWriter()
    setup.line(f"buffer = cuda.shared.array({_KRON_THREADS}, {numba_scalar(wide)})")
    setup.line(f"warp = lane // {_KRON_LANES}")
    setup.line(f"column = lane % {_KRON_LANES}")
    writer = SourceWriter()
    if want_a:
        with (writer.block("if unit < da_units:") if want_b else contextlib.nullcontext()):
            _emit_kron_da(writer, zero, f"{read_dy('base + offsets[size_a + k]')} * {term('b', 'k', b_dtype)}", store("buffer[lane]", da_dtype))
    if want_b:
        with (writer.block("else:") if want_a else contextlib.nullcontext()):
            _emit_kron_db(writer, zero, f"{read_dy('offsets[i] + base')} * {term('a', 'i', a_dtype)}", store("buffer[lane]", db_dtype))
    writer.line("cuda.syncthreads()  # the buffer is reused by the next unit")
    parameters = [
        ("dy", cuda_array_type("uint16" if half else result.name)),
        ("a", cuda_array_type(a_dtype.name)),
        ("b", cuda_array_type(b_dtype.name)),
        *((("da", cuda_array_type(da_dtype.name)),) if want_a else ()),
        *((("db", cuda_array_type(db_dtype.name)),) if want_b else ()),
        ("offsets", cuda_array_type("int64")),
        ("size_a", INDEX),
        ("size_b", INDEX),
        ("da_units", INDEX),
        ("units", INDEX),
    ]
    wanted = " and ".join(name for name, flag in (("da", want_a), ("db", want_b)) if flag)
    return cuda_block_kernel(
        signature, parameters, writer, f"kron pullback: {wanted} as gathers, {_KRON_THREADS} threads a block", setup=setup
    )



# --------------------------------------------------------------------------------------------
# The plan: one signature (operand shapes and dtypes, device), its kernels and how to run them
# --------------------------------------------------------------------------------------------


def _kernel_operand(array: ArrayLike, dtype: np.dtype[np.generic]) -> ArrayLike:
    """``array`` as the flat C array of ``dtype`` that the kernels read."""
    if type(array) is np.ndarray and array.dtype is dtype and array.flags.c_contiguous:
        return array.reshape(-1)  # the common case, without contiguous()'s namespace lookup
    flat = contiguous(array).reshape(-1)
    return flat if flat.dtype == dtype else flat.astype(dtype)


_Arrays = tuple[ArrayLike, ...]
_Totals = tuple[npt.NDArray[np.float64], ...]


@dataclass(frozen=True, slots=True)
class _CudaCall:
    """One call's operands on the device: flat kernel operands and the offset tables."""

    a: ArrayLike
    b: ArrayLike
    offsets: ArrayLike


def _operand_pair(saved: object) -> tuple[ArrayLike, ArrayLike]:
    """What a CPU plan saves: the two flat kernel operands."""
    assert isinstance(saved, tuple) and len(saved) == 2
    return saved[0], saved[1]


class KronPlan(Plan):
    """``kron`` of one signature: the layout, the kernels of its target, and the rules.

    The pullback reads the operands (``saves_primals``): on the CPU their flat kernel operands,
    on CUDA those and the call's offset tables (:class:`_CudaCall`).
    """

    saves_primals = True

    def __init__(self, layout: _KronLayout, a: InputFacts, b: InputFacts) -> None:
        device = joint_device((a, b))  # a Python scalar lives on any device
        differentiable = layout.a_differentiable or layout.b_differentiable
        entries = ["forward"]
        if differentiable:
            entries += ["pullback", "pushforward"]
        super().__init__(
            "kron",
            (a, b),
            out_shape=layout.y_shape,
            out_dtype=layout.result,
            differentiable=differentiable,
            input_tangents=(layout.a_differentiable, layout.b_differentiable),
            input_dtypes=(layout.a_kernel_dtype, layout.b_kernel_dtype),
            namespace=joint_namespace((a, b)) if device == "cuda" else np,
            kernel_entries=frozenset(entries if layout.y_size else ()),
        )
        self.layout = layout
        self.target = kernel_target(device)
        # The CPU pullback's launcher: the channel counts follow from the layout alone, so it
        # is built once per plan, at the first pullback.
        self.pullback_launcher: Callable[..., None] | None = None

    def requests(self) -> list[KernelRequest]:
        layout = self.layout
        if self.target == "cuda":
            return list(_cuda_requests(layout).values())
        requests = [_product_request(layout)]
        if layout.a_differentiable or layout.b_differentiable:
            requests.append(_pullback_request(layout))
        if layout.a_differentiable and layout.b_differentiable:
            requests.append(_pushforward_request(layout))
        return requests

    # --- operands ---------------------------------------------------------------------------

    def _operands(self, arrays: tuple[object, ...]) -> tuple[ArrayLike, ArrayLike]:
        """The flat kernel operands; a Python scalar next to a CuPy array moves to the device."""
        layout = self.layout
        a, b = arrays
        if type(a) is not np.ndarray or type(b) is not np.ndarray:
            a, b = as_array(a, "a"), as_array(b, "b")
            if self.namespace is not np:
                a, b = self.namespace.asarray(a), self.namespace.asarray(b)
        return _kernel_operand(a, layout.a_kernel_dtype), _kernel_operand(b, layout.b_kernel_dtype)

    def _cuda_call(self, a: ArrayLike, b: ArrayLike) -> _CudaCall:
        offsets: ArrayLike = self.namespace.empty(a.size + b.size, dtype=np.int64)
        cuda_launch(self._cuda_kernel("offsets"), offsets.size, offsets, *self.layout.extents, a.size, offsets.size)
        return _CudaCall(a, b, offsets)

    def save(self, arrays: tuple[object, ...]) -> object:
        a, b = self._operands(arrays)
        return self._cuda_call(a, b) if self.target == "cuda" else (a, b)

    def forward_and_save(self, arrays: tuple[object, ...]) -> tuple[object, object]:
        saved = self.save(arrays)
        if isinstance(saved, _CudaCall):
            return self._cuda_product(saved, saved.a, saved.b), saved
        a, b = _operand_pair(saved)
        return self._product(a, b), saved

    # --- forward ----------------------------------------------------------------------------

    @cached_property
    def _product_launch(self) -> Callable[..., None]:
        layout = self.layout
        kernel = _product_request(layout).get()
        return cpu_launcher(kernel, 3, layout.extents, extent=layout.blocks, work=layout.y_size)

    def _product(self, left: ArrayLike, right: ArrayLike) -> ArrayLike:
        """``kron(left, right)`` for flat kernel operands of this layout."""
        layout = self.layout
        y = np.empty(layout.y_size, dtype=layout.result)
        if layout.y_size:
            self._product_launch(y, left, right)
        return y.reshape(layout.y_shape)

    def _cuda_kernel(self, kind: str) -> Kernel:
        return _cuda_requests(self.layout)[kind].get()

    def _cuda_product(self, call: _CudaCall, left: ArrayLike, right: ArrayLike) -> ArrayLike:
        layout = self.layout
        y: ArrayLike = self.namespace.empty(layout.y_size, dtype=layout.result)
        if layout.y_size:
            kernel = self._cuda_kernel("forward")
            cuda_launch(kernel, layout.y_size, y, left, right, call.offsets, left.size, right.size, layout.y_size)
        return y.reshape(layout.y_shape)

    def forward(self, arrays: tuple[object, ...]) -> ArrayLike:
        a, b = self._operands(arrays)
        if self.target == "cuda":
            return self._cuda_product(self._cuda_call(a, b), a, b)
        return self._product(a, b)

    # --- pullback ---------------------------------------------------------------------------

    def pullback(self, saved: object) -> DensePullback:
        """``da[i] = sum_k dy[i, k] * conj(b[k])`` and ``db[k] = sum_i dy[i, k] * conj(a[i])``:
        one fused kernel reading ``dy`` once (CPU; threads add into private accumulators), or
        one launch of gathers (CUDA)."""
        if isinstance(saved, _CudaCall):
            return self._cuda_pullback(saved)
        a_flat, b_flat = _operand_pair(saved)
        layout = self.layout
        a_side, b_side = _pullback_channels(layout, a_flat, b_flat)
        view = 2 if layout.result.kind == "c" else 1  # db's accumulators hold (re, im) pairs
        sizes = (a_flat.size,) * len(b_side) + (b_flat.size * view,) * len(a_side)
        real, size = layout.real, layout.y_size
        want_a, want_b = layout.a_differentiable, layout.b_differentiable
        inputs = (*a_side, *b_side)
        launch = self._pullback_launch(len(inputs), len(sizes))
        if layout.result.kind != "c" and len(a_side) == len(b_side) == 1:
            return functools.partial(_real_saved_dense, launch, layout, (a_side[0], b_side[0]))
        zeros = np.zeros

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            totals = tuple(map(zeros, sizes))  # float64
            if size:
                launch(dy.reshape(-1).view(real), *inputs, *totals)
            return (
                _combine_da(totals[: len(b_side)], layout) if want_a else NO_TANGENT,
                _combine_db(totals[len(b_side) :], layout) if want_b else NO_TANGENT,
            )

        return dense

    def _half_applies(self, target: str = "cpu") -> bool:
        layout = self.layout
        return (
            self.target == target
            and layout.result.kind != "c"
            and layout.real == np.dtype(np.float32)
            and layout.a_dtype == layout.b_dtype == layout.real
            and layout.a_differentiable
            and layout.b_differentiable
        )

    def half_requests(self, dtype: np.dtype[np.generic]) -> list[KernelRequest]:
        """The kernel :meth:`half_pullback` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        if self._half_applies("cuda") and self.layout.y_size:
            return [_cuda_half_pullback_request(self.layout, dtype.name)]
        return [_half_pullback_request(self.layout, dtype.name)] if self._half_applies() and self.layout.y_size else []

    def half_pullback(self, saved: object, dtype: np.dtype[np.generic]) -> DensePullback | None:
        """For 16-bit ``a`` and ``b`` of ``dtype`` (this plan being their float32 stand-ins',
        see ``stablerules._half``; ``saved`` holds the operands in float32): ``dy -> (da,
        db)``, the fused kernel reading ``dy``'s bits (widened where read, summed in float64
        as float32's are), ``da`` and ``db`` rounded to float32 and then to ``dtype`` (as the
        float32 route rounds them; CUDA: the gathers of :meth:`_cuda_pullback`, rounded in the
        kernel). ``None`` where it does not apply."""
        if isinstance(saved, _CudaCall):
            return self._cuda_half_pullback(saved, dtype) if self._half_applies("cuda") and self.layout.y_size else None
        if not self._half_applies():
            return None
        from .._half import narrow  # noqa: PLC0415 - _half is loaded with the first 16-bit array

        layout = self.layout
        a, b = _operand_pair(saved)
        if a.dtype != layout.real or b.dtype != layout.real or not layout.y_size:
            return None
        launch = cpu_launcher(
            _half_pullback_request(layout, dtype.name).get(),
            5,
            layout.pullback_extents,
            extent=layout.blocks,
            work=layout.y_size,
            private=2,
        )
        uint16, float32 = np.dtype(np.uint16), np.dtype(np.float32)

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            da, db = np.zeros(a.size), np.zeros(b.size)
            launch(dy.reshape(-1).view(uint16), a, b, da, db)
            return (
                narrow(da.astype(float32), dtype).reshape(layout.a_shape),
                narrow(db.astype(float32), dtype).reshape(layout.b_shape),
            )

        return dense

    def saved_dense(self) -> SavedDense | None:
        """The CPU pullback of a real ``kron`` with both operands differentiable as one shared
        function of ``(saved, dy)`` (see ``Plan.saved_dense``): the saved flat operands are
        the kernel's channels, cast to the result's dtype where they differ."""
        layout = self.layout
        if self.target == "cuda" or layout.result.kind == "c" or not (layout.a_differentiable and layout.b_differentiable):
            return None
        return functools.partial(_real_saved_dense, self._pullback_launch(2, 2), layout)

    def _pullback_launch(self, inputs: int, accumulators: int) -> Callable[..., None]:
        """``launch(dy, *inputs, *accumulators)``, built once per plan: the channel counts
        follow from the layout alone, so every rrule of the signature shares it."""
        launch = self.pullback_launcher
        if launch is None:
            layout = self.layout
            launch = self.pullback_launcher = cpu_launcher(
                _pullback_request(layout).get(),
                1 + inputs + accumulators,
                layout.pullback_extents,
                extent=layout.blocks,
                work=layout.y_size,
                private=accumulators,
            )
        return launch

    def _cuda_half_pullback(self, call: _CudaCall, dtype: np.dtype[np.generic]) -> DensePullback:
        layout, xp = self.layout, self.namespace
        kernel = _cuda_half_pullback_request(layout, dtype.name).get()
        size_a, size_b = call.a.size, call.b.size
        da_units = -(-size_a // _KRON_WARPS)
        units = da_units + -(-size_b // _KRON_LANES)
        bits = np.dtype(np.uint16)

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            da, db = xp.empty(size_a, dtype=bits), xp.empty(size_b, dtype=bits)
            cuda_launch_blocks(
                kernel, units, _KRON_THREADS, dy.reshape(-1).view(bits), call.a, call.b, da, db,
                call.offsets, size_a, size_b, da_units, units,
            )
            return (da.view(dtype).reshape(layout.a_shape), db.view(dtype).reshape(layout.b_shape))

        return dense

    def _cuda_pullback(self, call: _CudaCall) -> DensePullback:
        layout, xp = self.layout, self.namespace
        kernel = self._cuda_kernel("pullback")
        want_a, want_b = layout.a_differentiable, layout.b_differentiable
        size_a, size_b = call.a.size, call.b.size
        da_units = -(-size_a // _KRON_WARPS) if want_a else 0
        units = da_units + (-(-size_b // _KRON_LANES) if want_b else 0)
        da_native, db_native = np.dtype(layout.a_dtype.name), np.dtype(layout.b_dtype.name)

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            da: ArrayLike | None = xp.empty(size_a, dtype=da_native) if want_a else None
            db: ArrayLike | None = xp.empty(size_b, dtype=db_native) if want_b else None
            gradients = [gradient for gradient in (da, db) if gradient is not None]
            if units:
                cuda_launch_blocks(
                    kernel, units, _KRON_THREADS, dy.reshape(-1), call.a, call.b, *gradients,
                    call.offsets, size_a, size_b, da_units, units,
                )
            return (
                _finish(da, layout.a_shape, layout.a_dtype) if da is not None else NO_TANGENT,
                _finish(db, layout.b_shape, layout.b_dtype) if db is not None else NO_TANGENT,
            )

        return dense

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        """``Fill(c * conj(sum(b)))`` over ``a``'s shape and ``Fill(c * conj(sum(a)))`` over
        ``b``'s: every element of an operand meets every element of the other once."""
        a, b = (saved.a, saved.b) if isinstance(saved, _CudaCall) else _operand_pair(saved)
        layout = self.layout
        return (
            _fill_gradient(fill.value, b, layout.a_shape, layout.a_dtype) if layout.a_differentiable else NO_TANGENT,
            _fill_gradient(fill.value, a, layout.b_shape, layout.b_dtype) if layout.b_differentiable else NO_TANGENT,
        )

    # --- pushforward ------------------------------------------------------------------------

    @cached_property
    def _pushforward_launch(self) -> Callable[..., None]:
        layout = self.layout
        kernel = _pushforward_request(layout).get()
        return cpu_launcher(kernel, 5, layout.extents, extent=layout.blocks, work=layout.y_size)

    def _tangent_operand(self, tangent: Cotangent, size: int, dtype: np.dtype[np.generic]) -> ArrayLike | None:
        if isinstance(tangent, DenseCotangent):
            return tangent.array.reshape(-1)
        if isinstance(tangent, Fill):
            filled: ArrayLike = self.namespace.full(size, tangent.value, dtype=dtype)
            return filled
        return None

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        """``kron(da, b) + kron(a, db)`` in one pass (the pushforward kernel), or the forward
        kernel on the one tangent that is not a hard zero; ``ZeroTangent()`` for none."""
        layout = self.layout
        a, b = self._operands(arrays)
        a_tangent = self._tangent_operand(tangents[0], a.size, layout.a_kernel_dtype)
        b_tangent = self._tangent_operand(tangents[1], b.size, layout.b_kernel_dtype)
        if a_tangent is None and b_tangent is None:
            return ZERO_TANGENT
        if self.target == "cuda":
            call = self._cuda_call(a, b)
            if a_tangent is None or b_tangent is None:
                return self._cuda_product(call, a if a_tangent is None else a_tangent, b if b_tangent is None else b_tangent)
            dy: ArrayLike = self.namespace.empty(layout.y_size, dtype=layout.result)
            if layout.y_size:
                cuda_launch(
                    self._cuda_kernel("pushforward"), layout.y_size, dy, a, b, a_tangent, b_tangent,
                    call.offsets, a.size, b.size, layout.y_size,
                )
            return dy.reshape(layout.y_shape)
        if a_tangent is None or b_tangent is None:
            return self._product(a if a_tangent is None else a_tangent, b if b_tangent is None else b_tangent)
        dy_flat = np.empty(layout.y_size, dtype=layout.result)
        if layout.y_size:
            self._pushforward_launch(dy_flat, a, b, a_tangent, b_tangent)
        return dy_flat.reshape(layout.y_shape)


# --------------------------------------------------------------------------------------------
# kron: the op
# --------------------------------------------------------------------------------------------


class Kron(RuleOp):
    name = "kron"
    input_names = ("a", "b")

    def __call__(self, a: KronOperand, b: KronOperand) -> npt.NDArray[np.generic]:
        """The Kronecker product of ``a`` and ``b``, as ``np.kron``: blocks of ``b`` scaled by
        the elements of ``a``, for up to 9 axes (the operand with fewer axes gets leading 1-axes;
        0-d operands and Python scalars multiply; where NumPy returns a scalar for two 0-d
        operands, this returns a 0-d array). Any numeric dtypes; the result has
        ``np.result_type(a, b)``. Nothing is static but the number of axes: one compiled kernel
        serves every shape of the same ndims and dtypes.

        Rules: ``back(dy)`` returns ``(da, db)`` with ``da[i] = sum_k dy[i, k] * conj(b[k])``
        and ``db[k] = sum_i dy[i, k] * conj(a[i])`` over the interleaved index (the adjoint of
        ``kron``; the real part for a real operand), each of its operand's shape and dtype; an
        integer operand gets ``NoTangent()``. A dense ``dy`` is read once by one fused kernel
        (split across threads for large ``dy``; float32 and complex64 accumulate in float64).
        A ``Fill(c)`` gives ``Fill(c * conj(sum(b)))`` over ``a``'s shape and ``Fill(c *
        conj(sum(a)))`` over ``b``'s without materializing ``dy``. ``frule`` gives ``kron(da,
        b) + kron(a, db)`` in one pass, one output of ``y``'s dtype; a ``ZeroTangent`` (or an
        integer operand) drops its term, and with both dropped ``dy`` is ``ZeroTangent()``; a
        ``Fill`` tangent is expanded.
        """
        return self.forward(a, b)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        """Validate ``kron(a, b)``: dtypes, devices (``TypeError`` naming the argument), axes."""
        a, b = input_facts(arrays[0], "a", "kron"), input_facts(arrays[1], "b", "kron")
        return KronPlan(_layout(a.shape, a.native, b.shape, b.native), a, b)  # native: the tangents' dtypes


kron = Kron()




def _pullback_channels(layout: _KronLayout, a: ArrayLike, b: ArrayLike) -> tuple[_Arrays, _Arrays]:
    """The real arrays the pullback kernel reads: ``(a_side, b_side)``.

    The kernel sees ``dy`` as a real array (a complex one as its interleaved real view, whose
    last axis is twice as long) and accumulates ``da_c = sum dy * b_c`` for each b-side array,
    ``db_c = sum dy * a_c`` for each a-side array. With ``y = a * b`` and the complex
    convention (``da = sum dy * conj(b)``), writing ``(re, im)`` pairs:

    - real result: ``a``; ``b``.
    - real ``a``, complex ``b``: ``a``; ``view(b)``. ``da`` is then exactly ``Re(sum dy *
      conj(b))`` and ``db``'s view is ``sum dy * a``.
    - complex ``a``, complex ``b``: ``Re(a), Im(a)``; ``view(b), view(1j * b)``. Then
      ``da = da_0 + 1j * da_1`` and ``db = (P[0::2] + Q[1::2]) + 1j * (P[1::2] - Q[0::2])``
      for ``P, Q = db_0, db_1``.
    - complex ``a``, real ``b``: ``Re(a), Im(a)``; ``b`` on the even and on the odd places of
      a real view. Then ``da = da_0 + 1j * da_1`` and ``db = P[0::2] + Q[1::2]``.

    Every channel is a plain real multiply-add, so the kernel vectorizes for complex dtypes as
    well as for real ones; the extra arrays are O(a.size + b.size).
    """
    real, result = layout.real, layout.result
    a_complex, b_complex = layout.a_kernel_dtype.kind == "c", layout.b_kernel_dtype.kind == "c"
    a_side: _Arrays = ()
    b_side: _Arrays = ()
    if layout.b_differentiable:
        a_cast = a.astype(result, copy=False)
        a_side = (np.ascontiguousarray(a_cast.real), np.ascontiguousarray(a_cast.imag)) if a_complex else (a.astype(real, copy=False),)
    if layout.a_differentiable:
        if b_complex:
            b_cast = b.astype(result, copy=False)
            b_side = (b_cast.view(real),) + ((np.multiply(b_cast, 1j).view(real),) if a_complex else ())
        elif a_complex:
            b_real = b.astype(real, copy=False)
            b_even, b_odd = np.zeros(2 * b.size, real), np.zeros(2 * b.size, real)
            b_even[0::2] = b_real
            b_odd[1::2] = b_real
            b_side = (b_even, b_odd)
        else:
            b_side = (b.astype(real, copy=False),)
    return a_side, b_side


def _real_saved_dense(
    launch: Callable[..., None], layout: _KronLayout, saved: object, dy: ArrayLike
) -> tuple[object, ...]:
    """The CPU dense pullback of a real ``kron`` whose operands are both differentiable: one
    channel a side (``saved``'s flat operands, cast to the result's real dtype where they
    differ), so the two float64 accumulators are ``da`` and ``db`` themselves, reshaped (and
    cast to a float32 operand's dtype). The general path's tuples of channels and its
    combining calls are per-call overhead a small kron feels. A module function bound to the
    plan's ``launch`` and ``layout`` by ``functools.partial``: a pullback kept per rrule then
    holds only ``saved``."""
    a, b = _operand_pair(saved)
    real = layout.real
    if a.dtype != real:
        a = a.astype(real)
    if b.dtype != real:
        b = b.astype(real)
    da, db = np.zeros(a.size), np.zeros(b.size)
    if layout.y_size:
        launch(dy.reshape(-1), a, b, da, db)
    a_dtype, b_dtype = layout.a_dtype, layout.b_dtype
    return (
        da.reshape(layout.a_shape) if a_dtype == _FLOAT64 else da.reshape(layout.a_shape).astype(a_dtype),
        db.reshape(layout.b_shape) if b_dtype == _FLOAT64 else db.reshape(layout.b_shape).astype(b_dtype),
    )


def _combine_da(totals: _Totals, layout: _KronLayout) -> ArrayLike:
    """``da`` from the b-side channel sums (see ``_pullback_channels``)."""
    da = totals[0] if len(totals) == 1 else totals[0] + 1j * totals[1]
    return _finish(da, layout.a_shape, layout.a_dtype)


def _combine_db(totals: _Totals, layout: _KronLayout) -> ArrayLike:
    """``db`` from the a-side channel sums (see ``_pullback_channels``)."""
    b_complex = layout.b_kernel_dtype.kind == "c"
    db: ArrayLike
    if len(totals) == 1:
        db = totals[0].view(np.complex128) if b_complex else totals[0]
    else:
        first, second = totals
        db = first[0::2] + second[1::2]
        if b_complex:
            db = db + 1j * (first[1::2] - second[0::2])
    return _finish(db, layout.b_shape, layout.b_dtype)




def _finish(gradient: ArrayLike, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> ArrayLike:
    """A combined accumulator as the gradient: the operand's shape, cast to its dtype."""
    gradient = gradient.reshape(shape)
    return gradient if gradient.dtype == dtype else gradient.astype(dtype)


def _fill_gradient(value: complex, other: ArrayLike, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> Fill:
    """The gradient of one operand for a ``Fill(value)`` cotangent: ``value * conj(sum(other))``
    everywhere (every element of an operand meets every element of the other once)."""
    total = np.sum(other, dtype=WIDENED[other.dtype.name])
    return Fill(complex(value * np.conj(total)), shape, dtype)  # the real part for a real dtype


# --------------------------------------------------------------------------------------------
# Running the CUDA kernels: arrays in the operands' namespace, kernels on its stream
# --------------------------------------------------------------------------------------------


class _CudaKernels(NamedTuple):
    """The CUDA signatures of one layout (``pullback`` is ``None`` for integer operands)."""

    offsets: ShapeSignature
    forward: ShapeSignature
    pushforward: ShapeSignature
    pullback: ShapeSignature | None


@memoized(maxsize=512)
def _cuda_kernels(layout: _KronLayout) -> _CudaKernels:
    dtypes = (layout.result.name, layout.a_kernel_dtype.name, layout.b_kernel_dtype.name)
    wanted = (
        layout.a_dtype.name if layout.a_differentiable else "-",
        layout.b_dtype.name if layout.b_differentiable else "-",
    )
    # Only the offsets kernel depends on the number of axes: the others index through the tables.
    return _CudaKernels(
        offsets=ShapeSignature("kron", "offsets", (), (), (layout.ndim,), "cuda"),
        forward=ShapeSignature("kron", "forward", (), dtypes, (), "cuda"),
        pushforward=ShapeSignature("kron", "pushforward", (), dtypes, (), "cuda"),
        pullback=ShapeSignature("kron", "pullback", wanted, dtypes, (), "cuda") if wanted != ("-", "-") else None,
    )


def _cuda_half_pullback_request(layout: _KronLayout, format: str) -> KernelRequest:
    """The CUDA pullback kernel reading and writing a 16-bit ``format``'s bits (float32
    operands; both operands differentiable)."""
    dtypes = (layout.result.name, layout.a_kernel_dtype.name, layout.b_kernel_dtype.name)
    signature = ShapeSignature("kron", "pullback-half", (format, format), dtypes, (), "cuda")
    return KernelRequest(signature, functools.partial(_render_pullback_cuda, signature))


def _cuda_requests(layout: _KronLayout) -> dict[str, KernelRequest]:
    kernels = _cuda_kernels(layout)
    requests = {
        "offsets": KernelRequest(kernels.offsets, functools.partial(_render_offsets_cuda, kernels.offsets)),
        "forward": KernelRequest(kernels.forward, functools.partial(_render_product_cuda, kernels.forward, False)),
    }
    if kernels.pullback is not None:
        requests["pullback"] = KernelRequest(kernels.pullback, functools.partial(_render_pullback_cuda, kernels.pullback))
    if layout.a_differentiable and layout.b_differentiable:
        requests["pushforward"] = KernelRequest(
            kernels.pushforward, functools.partial(_render_product_cuda, kernels.pushforward, True)
        )
    return requests


# ======================================================================================
# Kernel export: what an engine that runs our kernels itself (the JAX adapter's XLA FFI
# handlers) needs of kron, through this one function only
# ======================================================================================


class KronKernels(NamedTuple):
    """kron's CPU kernels for ``n = max(a.ndim, b.ndim, 1)`` axis pairs and one real dtype,
    the operands' extents padded with leading 1s to ``n`` axes (``A0..A{n-1}``,
    ``B0..B{n-1}``):

    - ``forward(y, a, b, A0.., B0.., lo, hi)`` writes ``y = kron(a, b)``;
    - ``pullback(dy, a, b, da, db, A0.., B0.., lo, hi)`` adds ``dy``'s contractions with
      ``b`` and ``a`` into ``da`` and ``db``, float64 accumulators (zeroed by the caller);

    both over the block range ``lo, hi`` of ``0, A0 * B0`` (``0, A0`` when ``n == 1``); all
    arrays flat and C-contiguous."""

    forward: KernelRequest
    pullback: KernelRequest


EXPORT_MAX_AXES = _MAX_AXES
"""The most axes an operand of kron's kernels may have (a caller checks it per call)."""


def export_kron_kernels(a_ndim: int, b_ndim: int, dtype: np.dtype[np.generic]) -> KronKernels | None:
    """kron's CPU kernels for operands of these ranks and a real ``dtype`` (float32 or
    float64), or ``None`` where no kernel serves them (more than ``EXPORT_MAX_AXES`` axes)."""
    if max(a_ndim, b_ndim) > EXPORT_MAX_AXES:
        return None
    layout = _layout((1,) * a_ndim, dtype, (1,) * b_ndim, dtype)
    return KronKernels(_product_request(layout), _pullback_request(layout))


# --- engine facts (stablerules._facts) -------------------------------------------------------

# Below this many result elements torch's own backward (two small reductions) beats the round
# trip to our kernel, for inputs of at most 2 axes (for 3 axes and more ours wins at these sizes).
KRON_TORCH_BELOW = 20000
# Below this many result elements, for inputs of at most 2 axes, JAX's own pullback (its
# autodiff of the XLA forward) runs instead of our kernel: a lone jit(vjp) of such a kron is
# dispatch either way (8-11 us both), and inside a jitted program XLA fuses its reductions with
# the neighbouring ops, where our custom call stands alone (the Kalman filter's 2x2 krons in a
# scan: 1.13-1.15x stock's step with our kernel, 1.00-1.02x with XLA's). From 4096 elements
# (8x8 by 8x8) our kernel is 2-5x faster than XLA's pullback.
KRON_JAX_BELOW = 1024


def _two_axes_at_most(statics: _facts.Statics, shapes: _facts.Shapes) -> bool:
    return all(len(shape) <= 2 for shape in shapes)


def _batch_kron(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """kron under a batch axis. A Python scalar for one factor: kron scales, the batch axis
    stays in front. Otherwise both samples are padded to one rank (kron pads the shorter with
    leading 1s), batch (or 1) in front; with one factor batched that is one kron call (the
    batch comes out in front); with both, kron would pair every ``a`` with every ``b``, so the
    per-sample outer product is the engine's own product, differentiable the same way."""
    if len(arrays) == 1:
        return ops.forward(call, arrays)
    a, b = arrays
    a_shape, b_shape = ops.shape(a), ops.shape(b)
    a_ndim, b_ndim = len(a_shape) - batched[0], len(b_shape) - batched[1]
    ndim = max(a_ndim, b_ndim)
    a = ops.reshape(a, (a_shape[0] if batched[0] else 1, *(1,) * (ndim - a_ndim), *a_shape[batched[0] :]))
    b = ops.reshape(b, (b_shape[0] if batched[1] else 1, *(1,) * (ndim - b_ndim), *b_shape[batched[1] :]))
    if not (batched[0] and batched[1]):
        return ops.forward(call, (a, b))
    a_items, b_items = ops.shape(a)[1:], ops.shape(b)[1:]
    spread_a = ops.reshape(a, (size, *(n for m in a_items for n in (m, 1))))
    spread_b = ops.reshape(b, (size, *(n for m in b_items for n in (1, m))))
    return (ops.reshape(ops.multiply(spread_a, spread_b), (size, *(m * n for m, n in zip(a_items, b_items)))),)


def _forward_kron(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    if len(arrays) == 1:  # a Python scalar for one factor: kron scales
        scalar = call.static("b") if call.static("a") is None else call.static("a")
        return (xp.scale(arrays[0], cast("complex", scalar)),)
    a, b = xp.promoted(arrays)
    return (xp.kron(a, b),)


def _prepared_kron(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    """A Kalman filter's small ``kron`` of two arrays of one dtype, the engine's op called
    directly (a scalar factor, or mixed dtypes: the plain forward, promoting per call)."""
    if len(arrays) != 2 or xp.promoted(arrays) is not arrays:
        return None
    kron = xp.kron
    return lambda arrays: (kron(arrays[0], arrays[1]),)


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "kron": _facts.EngineFacts(
        _facts.TorchFacts(
            "torch.kron", "kernel", _facts.KERNEL,
            (_facts.EngineForm("inputs of at most 2 axes", _two_axes_at_most, KRON_TORCH_BELOW),),
            compiled_below=_facts.COMPILED_BELOW,
            half_once=False,
        ),
        batch=_batch_kron,
        scalars=True,
        forward=_forward_kron,
        prepared=_prepared_kron,
        jax_forms=(_facts.EngineForm("inputs of at most 2 axes", _two_axes_at_most, KRON_JAX_BELOW),),
    ),
}
