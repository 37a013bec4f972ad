"""The repeat family: ``repeat`` (NumPy's form and Julia's ``inner``/``outer`` form) and ``tile``.

Every static form reduces to one normalized loop nest. Pad the input to ``n`` axes; along
axis ``d`` the output is ``outer[d]`` copies of (each input element repeated ``inner[d]``
times), so its memory order per axis is ``(o_d, j_d, r_d)``: outer copy, input index, inner
copy. The output, viewed flat, is the C array of shape
``(outer[0], s[0], inner[0], outer[1], s[1], inner[1], ...)``. Loops with a count of 1 and
padded axes (statically of extent 1) vanish, adjacent count loops merge into one count (their
product), adjacent input axes merge into one extent. What is left alternates::

    np.repeat(x(100,), 7, axis=0)                      ->  (s, 7)
    repeat(x(200,3,4), inner=(7,1,10))                 ->  (s, 7, s, 10)
    repeat(x(200,3,4), inner=(7,1,10), outer=(4,1,2))  ->  (4, s, 7, s, 2, s, 10)
    np.tile(x(3,5), (2, 1))                            ->  (2, s)

That nest is the kernel's static signature: counts are constants in the generated source,
the extents of the ``s`` loops are runtime arguments (one kernel serves every shape), so
``np.repeat``, Julia's ``repeat`` and ``np.tile`` calls that normalize to the same nest share
one compiled kernel. The forward kernel walks the nest writing ``y``; the pullback walks it
over ``dy`` in memory order, summing each innermost run of copies in registers (a pairwise
tree, so the adds do not form one dependent chain) and adding into ``dx`` (assigning, into
``np.empty``, when each ``dx`` element is visited once). A small count right before the last
input loop (the 7 in ``(s, 7, s, 10)``) is summed first, elementwise over its adjacent copies
of the block (contiguous loads, which vectorize), then the runs: through a scratch buffer of
at most ``_BUFFER_SIZE`` elements, the only temporary, when there is a run (``_Nest.copies_level``
says when). Otherwise a small leading count (the 4 in W3's ``(4, s, 7, s, 2, s, 10)``) is fused
into the innermost sums (``_Nest.outer_level``): the input loop runs outermost and each run is
read from every copy at once, so the copies stream together and ``dx`` is updated once instead
of once per copy. The pushforward is the forward kernel applied to the tangent. Kernels
partition the first ``s`` loop across threads, so each thread owns a disjoint range of ``dx``
(loops outside it run in full in every thread).

Per-element counts arrays (``np.repeat(x, counts, axis)``) are data: a segment kernel over
``x`` viewed as ``(outer, n, inner)``, with offsets computed once per call.

Static-count calls on NumPy arrays are *prepared* once per signature (op, static values, x's
dtype and shape, rrule arity) and kept in the shared ``PlanCache``: validation, the nest, the
kernels and the pullback closure (which holds no call data, so every rrule of the signature
returns the same one). A repeated call allocates ``y`` and calls the kernel (~2 us for W1,
against ~1 us for ``np.repeat``). Counts arrays, CuPy arrays and ``STABLERULES_DEVICE=cuda``
take the general path; plain-int static arguments share their ``Val``'s plan but are still
counted as dynamic on every call.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar, overload

import numpy as np
import numpy.typing as npt

from .._arrays import (
    ArrayLike,
    ArraySpec,
    array_namespace,
    as_array,
    check_dtype,
    checked_size,
    common_device,
    contiguous,
    device_of,
    dtype_name,
    is_array,
    kernel_target,
    normalize_axis,
    shape_text,
    static_int,
    static_ints,
)
from .._cache import CACHE, Kernel, KernelSource, PlanCache, ShapeSignature
from .._codegen import INDEX, SourceWriter, cpu_kernel, numba_scalar, readonly_array, writable_array
from .._cuda import cuda_array_type, cuda_kernel, launch
from .. import _parallel
from .._parallel import chunk_bounds, run_chunks
from .._registry import KernelRequest, Op, frule_rule, rrule_rule
from .._typing import deprecated
from .._tangents import (
    DenseCotangent,
    Fill,
    NoTangent,
    ZeroTangent,
    prepare_cotangent,
    prepare_tangent,
)
from .._val import Val

_DT = TypeVar("_DT", bound=np.generic)

_NO_TANGENT = NoTangent()
_ZERO_TANGENT = ZeroTangent()
# Names the CPU as a cotangent's device for prepare_cotangent (one on another is a TypeError).
_NUMPY_LIKE: ArrayLike = np.empty((0,))
# Counts whose product reaches this cannot index memory: rejected before any kernel is built.
_COUNT_LIMIT = 2**62
# Python refuses source with more than 20 statically nested blocks ("too many statically
# nested blocks"); a nest of n levels emits at most n nested loops: refused beyond that.
_MAX_NEST_LEVELS = 20
# Innermost counts up to this size are summed as one unrolled pairwise expression.
_UNROLL_LIMIT = 16
# Elements of the CPU pullback's scratch buffer (summed copies of a chunk of the block; 16 KiB
# of float64, so it stays in the L1 cache between the copy sums and the run sums).
_BUFFER_SIZE = 2048
_BUFFERED_COPIES = 4
# The most copies of a leading count the CPU pullback reads at once (``_Nest.outer_level``):
# one concurrent stream of dy each.
_FUSED_OUTER = 8
_INPUT_AXIS = "s"

NestItem = int | str
Pullback = Callable[[object], tuple[object, ...]]


# ---------------------------------------------------------------------------------------------
# Normalization: every static form -> (axes map, inner, outer) -> loop nest
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Layout:
    """A static repeat: each padded axis ``d`` reads the input axes ``axes[d]`` (``()`` for a
    padded axis of extent 1, several for a flattened input), repeats each element
    ``inner[d]`` times and tiles the result ``outer[d]`` times."""

    axes: tuple[tuple[int, ...], ...]
    inner: tuple[int, ...]
    outer: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Nest:
    """The normalized loop nest of a :class:`_Layout` (shape independent)."""

    layout: _Layout
    items: tuple[NestItem, ...]  # counts (ints >= 2) and "s" (input loops), outermost first
    groups: tuple[tuple[int, ...], ...]  # the input axes merged into each "s" loop
    total: int  # product of every count: how many times each input element appears
    empty: bool  # some count is 0: the output is empty

    @property
    def copies_level(self) -> int:
        """The level of the count whose copies the CPU pullback sums elementwise, or -1.

        That is the count right before the last input loop, when it is at most
        ``_UNROLL_LIMIT``: its copies are adjacent equal blocks of ``dy`` (the loop times
        the run after it), summed elementwise with contiguous loads, which vectorizes where
        summing each run of each copy does not. With a run after the loop the sum goes
        through a buffer before the runs are summed: only for ``_BUFFERED_COPIES`` copies or
        more and runs up to ``_UNROLL_LIMIT`` (for fewer copies of a small block, the buffer's
        extra pass costs more than it saves)."""
        items = self.items
        block = len(items) - 1 if items[-1] == _INPUT_AXIS else len(items) - 2
        run = items[-1] if isinstance(items[-1], int) else 1
        count = items[block - 1] if block >= 1 else 1
        if not isinstance(count, int) or not 2 <= count <= _UNROLL_LIMIT:
            return -1
        if run == 1 or _BUFFERED_COPIES <= count and run <= _UNROLL_LIMIT:
            return block - 1
        return -1

    @property
    def outer_level(self) -> int:
        """0 when the CPU pullback fuses the leading count into the innermost sums, else -1.

        A nest that starts with a count (the outer copies of the whole array, like the 4 in
        ``(4, s, 7, s, 2, s, 10)``) would walk its first input loop once per copy: a thread
        then reads its part of each copy after the other and adds into its ``dx`` range that
        many times. Fused, the kernel runs the input loop outermost and each innermost run sum
        adds the same run of every copy (``step0`` apart): one pass over ``dx``, the copies
        read as concurrent streams (W3's pullback: ~300 -> ~260 us with 2 threads). Only for
        at most ``_FUSED_OUTER`` copies, runs up to ``_UNROLL_LIMIT`` and no summed copies
        before the block (``copies_level``, which already sums adjacent copies elementwise)."""
        items = self.items
        count = items[0]
        if not isinstance(count, int) or count > _FUSED_OUTER or len(items) < 2 or items[1] != _INPUT_AXIS:
            return -1
        run = items[-1] if isinstance(items[-1], int) else 1
        if run > _UNROLL_LIMIT or self.copies_level >= 0:
            return -1
        return 0

    @property
    def accumulates(self) -> bool:
        """Whether the CPU pullback visits a ``dx`` element more than once (a count loop other
        than the innermost, the summed copies and the fused outer count): it then adds into
        zeros instead of assigning."""
        fused = (self.copies_level, self.outer_level)
        return any(isinstance(item, int) and level not in fused for level, item in enumerate(self.items[:-1]))

    def extents(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(math.prod(shape[axis] for axis in group) for group in self.groups)

    def output_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        layout = self.layout
        return tuple(
            outer * math.prod(shape[axis] for axis in axes) * inner
            for axes, inner, outer in zip(layout.axes, layout.inner, layout.outer)
        )


@functools.lru_cache(maxsize=1024)
def _nest(layout: _Layout) -> _Nest:
    total = math.prod(layout.inner) * math.prod(layout.outer)
    empty = total == 0
    if not empty and total >= _COUNT_LIMIT:
        raise ValueError(
            f"repeat: the repeat counts inner={layout.inner}, outer={layout.outer} multiply to "
            f"{total}, too large to index an array"
        )
    merged: list[NestItem] = []
    groups: list[tuple[int, ...]] = []
    for axes, inner, outer in zip(layout.axes, layout.inner, layout.outer):
        for item in (outer, axes, inner):
            if isinstance(item, int):
                if item == 1:
                    continue
                if merged and isinstance(merged[-1], int):
                    merged[-1] *= item
                else:
                    merged.append(item)
            elif item:
                if merged and merged[-1] == _INPUT_AXIS:
                    groups[-1] += item
                else:
                    merged.append(_INPUT_AXIS)
                    groups.append(item)
    if not groups:
        # Every input axis is statically 1 (a 0-d input): one loop of extent 1 to partition.
        merged.insert(0, _INPUT_AXIS)
        groups.append(())
    if len(merged) > _MAX_NEST_LEVELS:
        raise ValueError(
            f"repeat: inner={layout.inner}, outer={layout.outer} make a loop nest of "
            f"{len(merged)} levels (counts and axes that do not merge); compiled kernels nest at "
            f"most {_MAX_NEST_LEVELS} loops: repeat along fewer axes per call"
        )
    return _Nest(layout, tuple(merged), tuple(groups), total, empty)


@functools.lru_cache(maxsize=1024)
def _numpy_layout(ndim: int, count: int, axis: int | None) -> _Layout:
    if axis is None:
        return _Layout((tuple(range(ndim)),), (count,), (1,))
    inner = tuple(count if d == axis else 1 for d in range(ndim))
    return _Layout(tuple((d,) for d in range(ndim)), inner, (1,) * ndim)


@functools.lru_cache(maxsize=1024)
def _julia_layout(ndim: int, inner: tuple[int, ...], outer: tuple[int, ...]) -> _Layout:
    n = max(ndim, len(inner), len(outer))
    axes = tuple((d,) if d < ndim else () for d in range(n))
    return _Layout(axes, inner + (1,) * (n - len(inner)), outer + (1,) * (n - len(outer)))


@functools.lru_cache(maxsize=1024)
def _tile_layout(ndim: int, reps: tuple[int, ...]) -> _Layout:
    n = max(ndim, len(reps))
    lead = n - ndim
    axes = tuple(() if d < lead else (d - lead,) for d in range(n))
    return _Layout(axes, (1,) * n, (1,) * (n - len(reps)) + reps)


# ---------------------------------------------------------------------------------------------
# Kernel generation
# ---------------------------------------------------------------------------------------------


def _product_text(static: int, terms: Sequence[str]) -> str:
    parts = list(terms) + ([str(static)] if static != 1 or not terms else [])
    return " * ".join(parts)


def _tuple_text(parts: Sequence[str]) -> str:
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def _plus(base: str, term: str) -> str:
    if base == "0":
        return term
    return base if term == "0" else f"{base} + {term}"


def _times(index: str, step: str) -> str:
    if index == "0" or step == "0":
        return "0"
    return index if step == "1" else f"{index} * {step}"


def _pairwise(terms: Sequence[str]) -> str:
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return f"({_pairwise(terms[:middle])} + {_pairwise(terms[middle:])})"


def _pairwise_sum(array: str, base: str, lo: int, hi: int) -> str:
    return _pairwise([f"{array}[{_plus(base, str(offset))}]" for offset in range(lo, hi)])


def _emit_run_sum(writer: SourceWriter, array: str, base: str, count: int) -> None:
    """``total = sum(array[base:base + count])`` without one long chain of dependent adds."""
    if count <= _UNROLL_LIMIT:
        writer.line(f"total = {_pairwise_sum(array, base, 0, count)}")
        return
    whole = count - count % 4
    for lane in range(4):
        writer.line(f"sum{lane} = {array}[{_plus(base, str(lane))}]")
    with writer.block(f"for r in range(4, {whole}, 4):"):
        for lane in range(4):
            writer.line(f"sum{lane} += {array}[{_plus(_plus(base, 'r'), str(lane))}]")
    for extra in range(whole, count):
        writer.line(f"sum{extra - whole} += {array}[{_plus(base, str(extra))}]")
    writer.line("total = (sum0 + sum1) + (sum2 + sum3)")


@dataclass(frozen=True, slots=True)
class _Levels:
    """Per level of a nest, as source text: the runtime extent names ``e0, e1, ...`` (one
    per input loop), each level's size, its input loop's number (-1 for a count), its flat
    step in ``y``/``dy``; and per input loop its flat step in ``x``/``dx``."""

    extents: list[str]
    sizes: list[str]
    axis_at: list[int]
    long_steps: list[str]
    short_steps: list[str]


def _nest_levels(nest: _Nest) -> _Levels:
    items = nest.items
    extents = [f"e{k}" for k in range(len(nest.groups))]
    sizes: list[str] = []
    axis_at: list[int] = []  # the input loop's number at each level, -1 for a count
    for item in items:
        axis_at.append(-1 if isinstance(item, int) else len([a for a in axis_at if a >= 0]))
        sizes.append(str(item) if isinstance(item, int) else extents[axis_at[-1]])
    long_steps: list[str] = []  # per level: the flat step of y / dy
    static, terms = 1, list[str]()
    for item, size in zip(reversed(items), reversed(sizes)):
        long_steps.insert(0, _product_text(static, terms))
        if isinstance(item, int):
            static *= item
        else:
            terms.insert(0, size)
    short_steps = [_product_text(1, extents[k + 1 :]) for k in range(len(extents))]  # x / dx
    return _Levels(extents, sizes, axis_at, long_steps, short_steps)


def _render_nest(signature: ShapeSignature, nest: _Nest, dtype: str, pullback: bool) -> KernelSource:
    """The forward (``y`` from ``x``) or pullback (``dx`` from ``dy``) kernel of a nest.

    Outer loops carry flat offsets; the innermost input loop (with the count after it, if
    any) works on slices of both arrays indexed from 0 by its loop variable. Such indices
    are provably non-negative, so Numba emits no negative-index wraparound and LLVM
    vectorizes the loop (the run sums with gathers): about 1.6x faster than flat indexing.
    """
    items = nest.items
    levels = _nest_levels(nest)
    extents, sizes, axis_at = levels.extents, levels.sizes, levels.axis_at
    long_steps, short_steps = levels.long_steps, levels.short_steps
    # The innermost block: the last input loop and the count after it (1 if none).
    block = len(items) - 1 if items[-1] == _INPUT_AXIS else len(items) - 2
    run = items[-1] if isinstance(items[-1], int) else 1
    copies_level = nest.copies_level if pullback else -1
    copies = items[copies_level] if copies_level >= 0 else 1
    assert isinstance(copies, int)
    outer_level = nest.outer_level if pullback else -1
    outer = items[0] if outer_level == 0 else 1
    assert isinstance(outer, int)
    operator = "+=" if nest.accumulates else "="
    chunk = max(_BUFFER_SIZE // run, 1)  # block loop iterations per buffer fill

    long_name, short_name = ("dy", "dx") if pullback else ("y", "x")
    writer = SourceWriter()
    writer.line(f"# {long_name} is the C array {_tuple_text(sizes)} read flat, {short_name} the C array")
    writer.line(f"# {_tuple_text(extents)}; loop j0 runs over [lo, hi): each thread owns that range of it.")
    # Products of several factors get a name, computed once; literals and single names do not.
    long_names = [f"step{level}" if " * " in long_steps[level] else long_steps[level] for level in range(len(items))]
    short_names = [f"stride{axis}" if " * " in short_steps[axis] else short_steps[axis] for axis in range(len(extents))]
    for level in range(block):
        if long_names[level] != long_steps[level]:
            writer.line(f"{long_names[level]} = {long_steps[level]}")
    for axis in range(axis_at[block]):
        if short_names[axis] != short_steps[axis]:
            writer.line(f"{short_names[axis]} = {short_steps[axis]}")
    if copies_level >= 0 and run > 1:
        count = "hi - lo" if axis_at[block] == 0 else extents[axis_at[block]]
        writer.line(f"buffer = np.empty(min({count}, {chunk}) * {run}, np.{dtype})  # summed copies of a chunk")

    def long_step(level: int) -> str:
        return long_names[level]

    def short_step(axis: int) -> str:
        return short_names[axis]

    def emit_block(long_base: str, short_base: str) -> None:
        axis = axis_at[block]
        index = f"j{axis}"
        start, stop, count = ("lo", "hi", "hi - lo") if axis == 0 else ("0", extents[axis], extents[axis])
        run_text = str(run)
        if outer > 1:
            stride = long_step(0)
            offsets = ["0", stride] + [f"{copy} * {stride}" for copy in range(2, outer)]
            first, last = _plus(long_base, _times(start, run_text)), _plus(long_base, _times(stop, run_text))
            for copy, offset in enumerate(offsets):
                writer.line(f"dy_block{copy} = dy[{_plus(first, offset)}:{_plus(last, offset)}]")
        else:
            writer.line(
                f"{long_name}_block = {long_name}[{_plus(long_base, _times(start, run_text))}:"
                f"{_plus(long_base, _times(stop, run_text))}]"
            )
        writer.line(f"{short_name}_block = {short_name}[{_plus(short_base, start)}:{_plus(short_base, stop)}]")
        with writer.block(f"for {index} in range({count}):"):
            if pullback and outer > 1:
                # The fused outer count: the same run of each copy, summed pairwise.
                if run == 1:
                    writer.line(f"dx_block[{index}] {operator} {_pairwise([f'dy_block{c}[{index}]' for c in range(outer)])}")
                else:
                    writer.line(f"k = {index} * {run}")
                    sums = [_pairwise_sum(f"dy_block{c}", "k", 0, run) for c in range(outer)]
                    writer.line(f"dx_block[{index}] {operator} {_pairwise(sums)}")
            elif pullback:
                if run == 1:
                    writer.line(f"dx_block[{index}] {operator} dy_block[{index}]")
                else:
                    writer.line(f"k = {index} * {run}")
                    _emit_run_sum(writer, "dy_block", "k", run)
                    writer.line(f"dx_block[{index}] {operator} total")
            elif run == 1:
                writer.line(f"y_block[{index}] = x_block[{index}]")
            else:
                writer.line(f"value = x_block[{index}]")
                writer.line(f"k = {index} * {run}")
                with writer.block(f"for r in range({run}):"):
                    writer.line("y_block[k + r] = value")

    def emit_copies(long_base: str, short_base: str) -> None:
        # The count right before the block: dy holds that many adjacent copies of the block
        # (stride apart), one slice each, summed elementwise (contiguous loads) first.
        axis = axis_at[block]
        index = f"j{axis}"
        start, stop = ("lo", "hi") if axis == 0 else ("0", extents[axis])
        stride = long_step(copies_level)
        offsets = ["0", stride] + [f"{copy} * {stride}" for copy in range(2, copies)]

        def slice_copies(begin: str, end: str) -> None:
            for copy, offset in enumerate(offsets):
                writer.line(f"copy{copy} = dy[{_plus(begin, offset)}:{_plus(end, offset)}]")

        def copy_sum(position: str) -> str:
            return _pairwise([f"copy{copy}[{position}]" for copy in range(copies)])

        if run == 1:
            count = "hi - lo" if axis == 0 else extents[axis]
            slice_copies(_plus(long_base, start), _plus(long_base, stop))
            writer.line(f"dx_block = dx[{_plus(short_base, start)}:{_plus(short_base, stop)}]")
            with writer.block(f"for {index} in range({count}):"):
                writer.line(f"dx_block[{index}] {operator} {copy_sum(index)}")
            return
        # The summed block goes through `buffer`, a chunk of the block loop at a time.
        with writer.block(f"for chunk in range({start}, {stop}, {chunk}):"):
            writer.line(f"n = min({stop} - chunk, {chunk})")
            writer.line(f"width = n * {run}")
            writer.line(f"first = {_plus(long_base, f'chunk * {run}')}")
            slice_copies("first", "first + width")
            with writer.block("for i in range(width):"):
                writer.line(f"buffer[i] = {copy_sum('i')}")
            writer.line(f"dx_block = dx[{_plus(short_base, 'chunk')}:{_plus(short_base, 'chunk + n')}]")
            with writer.block(f"for {index} in range(n):"):
                writer.line(f"k = {index} * {run}")
                _emit_run_sum(writer, "buffer", "k", run)
                writer.line(f"dx_block[{index}] {operator} total")

    def emit(level: int, long_base: str, short_base: str) -> None:
        if level == block:
            emit_block(long_base, short_base)
            return
        if level == copies_level:
            emit_copies(long_base, short_base)
            return
        if level == outer_level:
            emit(level + 1, long_base, short_base)  # summed in the block, a stream per copy
            return
        item = items[level]
        if isinstance(item, int):
            with writer.block(f"for r{level} in range({item}):"):
                writer.line(f"p{level} = {_plus(long_base, _times(f'r{level}', long_step(level)))}")
                emit(level + 1, f"p{level}", short_base)
            return
        axis = axis_at[level]
        index = f"j{axis}"
        with writer.block(f"for {index} in range({'lo, hi' if axis == 0 else extents[axis]}):"):
            writer.line(f"p{level} = {_plus(long_base, _times(index, long_step(level)))}")
            writer.line(f"q{axis} = {_plus(short_base, _times(index, short_step(axis)))}")
            emit(level + 1, f"p{level}", f"q{axis}")

    emit(0, "0", "0")
    first, second = (long_name, short_name) if pullback else (short_name, long_name)
    parameters = [
        (first, readonly_array(dtype)),
        (second, writable_array(dtype)),
        *((name, INDEX) for name in extents),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    what = "pullback: dx[j] = sum of dy over the copies of x[j]" if pullback else "forward: y = repeat(x)"
    return cpu_kernel(
        signature, parameters, writer, f"repeat nest {nest.items}, {what}", numpy=copies_level >= 0 and run > 1
    )


def _differentiable(dtype: np.dtype[np.generic]) -> bool:
    # ``is_differentiable`` for dtypes that passed ``check_dtype``, without ``dtype.name``.
    return dtype.kind in "fc"


def _nest_signature(nest: _Nest, dtype: np.dtype[np.generic], kind: str, target: str = "cpu") -> ShapeSignature:
    return ShapeSignature("repeat", kind, nest.items, (dtype_name(dtype),), (len(nest.groups),), target)


def _nest_request(nest: _Nest, dtype: np.dtype[np.generic], kind: str, target: str = "cpu") -> KernelRequest:
    signature = _nest_signature(nest, dtype, kind, target)
    render = _render_nest_cuda if target == "cuda" else _render_nest
    return KernelRequest(
        signature, lambda: render(signature, nest, dtype_name(dtype), pullback=kind == "pullback")
    )


def _render_segments(signature: ShapeSignature, dtype: str, pullback: bool, unit_inner: bool) -> KernelSource:
    """Per-element counts along one axis: ``x`` is ``(outer, n, inner)``, ``y`` is
    ``(outer, total, inner)``; element ``i`` of the axis fills rows ``offsets[i]:offsets[i+1]``.
    Slices keep every index non-negative (no wraparound code, see ``_render_nest``)."""
    long_name, short_name = ("dy", "dx") if pullback else ("y", "x")
    writer = SourceWriter()
    writer.line(f"# {short_name} is (outer, n, inner), {long_name} is (outer, total, inner), both read flat;")
    writer.line(f"# element i of the repeated axis is rows offsets[i]:offsets[i + 1] of {long_name}.")
    writer.line("# Each thread owns the range [lo, hi) of that axis.")
    writer.line("starts = offsets[lo:hi + 1]")
    with writer.block("for a in range(outer):"):
        if unit_inner:
            writer.line(f"{long_name}_row = {long_name}[a * total:(a + 1) * total]")
            writer.line(f"{short_name}_part = {short_name}[a * n + lo:a * n + hi]")
            with writer.block("for i in range(hi - lo):"):
                writer.line(f"segment = {long_name}_row[starts[i]:starts[i + 1]]")
                if pullback:
                    with writer.block("if segment.size == 0:"):
                        writer.line("dx_part[i] = 0")
                    with writer.block("else:"):
                        writer.line("total_ = segment[0]")
                        with writer.block("for t in range(1, segment.size):"):
                            writer.line("total_ += segment[t]")
                        writer.line("dx_part[i] = total_")
                else:
                    writer.line("value = x_part[i]")
                    with writer.block("for t in range(segment.size):"):
                        writer.line("segment[t] = value")
        else:
            writer.line(f"{long_name}_row = {long_name}[a * total * inner:(a + 1) * total * inner]")
            writer.line(f"{short_name}_part = {short_name}[(a * n + lo) * inner:(a * n + hi) * inner]")
            with writer.block("for i in range(hi - lo):"):
                writer.line(f"{short_name}_slab = {short_name}_part[i * inner:(i + 1) * inner]")
                writer.line(f"rows = {long_name}_row[starts[i] * inner:starts[i + 1] * inner]")
                with writer.block("for t in range(starts[i + 1] - starts[i]):"):
                    writer.line(f"{long_name}_slab = rows[t * inner:(t + 1) * inner]")
                    with writer.block("for b in range(inner):"):
                        if pullback:
                            writer.line("dx_slab[b] += dy_slab[b]")
                        else:
                            writer.line("y_slab[b] = x_slab[b]")
    first, second = (long_name, short_name) if pullback else (short_name, long_name)
    parameters = [
        (first, readonly_array(dtype)),
        (second, writable_array(dtype)),
        ("offsets", readonly_array("int64")),
        ("outer", INDEX),
        ("n", INDEX),
        ("inner", INDEX),
        ("total", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    what = "pullback: segment sums" if pullback else "forward: segment copies"
    return cpu_kernel(signature, parameters, writer, f"repeat with per-element counts, {what}")


def _segments_request(dtype: np.dtype[np.generic], kind: str, unit_inner: bool, target: str = "cpu") -> KernelRequest:
    signature = ShapeSignature(
        "repeat", f"{kind}-counts", ("inner=1" if unit_inner else "inner=n",), (dtype_name(dtype),), (1,), target
    )
    render = _render_segments_cuda if target == "cuda" else _render_segments
    return KernelRequest(
        signature,
        lambda: render(signature, dtype.name, pullback=kind == "pullback", unit_inner=unit_inner),
    )


# ---------------------------------------------------------------------------------------------
# CUDA kernels: gathers, one thread per output element (no atomics)
# ---------------------------------------------------------------------------------------------
#
# Forward: thread t writes y[t], reading the x element it copies (coalesced writes; the reads
# of x hit cache). Pullback: thread j owns dx[j] and sums its copies in dy with static trip
# counts; adjacent threads read adjacent runs of dy, so the warp's reads cover contiguous
# memory. Per-element counts: the forward finds the source row by binary search over the
# offsets, the pullback sums the rows offsets[i]:offsets[i + 1]. Index arithmetic: a flat
# index is split into loop indices by division, one per runtime extent (constant divisors,
# the counts, compile to multiplications); the pullback divides once per dx element, not per
# element of dy.


def _emit_unflatten(writer: SourceWriter, index: str, dims: Sequence[tuple[str, str | None]]) -> None:
    """Assign the named loop indices of a flat ``index`` over C-ordered ``dims`` (size text,
    index name or ``None`` for a loop whose index is not needed), outermost first."""
    named = [position for position, (_, name) in enumerate(dims) if name is not None]
    if not named:
        return
    current = index
    for position in range(len(dims) - 1, named[0] - 1, -1):
        size, name = dims[position]
        if position == 0:
            writer.line(f"{name} = {current}")  # the outermost index needs no division
        elif position == named[0]:
            writer.line(f"{name} = {current} % {size}")  # nothing outside it is needed
        else:
            writer.line(f"q{position} = {current} // {size}")
            if name is not None:
                writer.line(f"{name} = {current} - q{position} * {size}")
            current = f"q{position}"


def _horner(names: Sequence[str], extents: Sequence[str]) -> str:
    """The flat C index of ``names`` over ``extents``: ``(j0 * e1 + j1) * e2 + j2``."""
    text = names[0]
    for name, extent in zip(names[1:], extents[1:]):
        text = f"({text}) * {extent} + {name}" if " + " in text else f"{text} * {extent} + {name}"
    return text


def _render_nest_cuda(signature: ShapeSignature, nest: _Nest, dtype: str, pullback: bool) -> KernelSource:
    """The CUDA forward (one thread per ``y`` element) or pullback (one thread per ``dx``
    element, summing its copies) of a nest."""
    items = nest.items
    levels = _nest_levels(nest)
    extents, sizes, axis_at, long_steps = levels.extents, levels.sizes, levels.axis_at, levels.long_steps
    indices = [f"j{axis}" for axis in range(len(extents))]
    setup = SourceWriter()
    writer = SourceWriter()
    if not pullback:
        writer.line(f"# y is the C array {_tuple_text(sizes)} read flat, x the C array {_tuple_text(extents)};")
        writer.line("# thread t writes y[t], a copy of the x element at the input loops' indices.")
        dims = [(size, None if axis < 0 else indices[axis]) for size, axis in zip(sizes, axis_at)]
        _emit_unflatten(writer, "t", dims)
        writer.line(f"y[t] = x[{_horner(indices, extents)}]")
        parameters = [("x", cuda_array_type(dtype)), ("y", cuda_array_type(dtype))]
        what = "forward: y[t] = x[source of t]"
    else:
        writer.line(f"# dy is the C array {_tuple_text(sizes)} read flat, dx the C array {_tuple_text(extents)};")
        writer.line("# thread j owns dx[j] and sums its copies in dy (static trip counts).")
        names = [f"step{level}" if " * " in long_steps[level] else long_steps[level] for level in range(len(items))]
        for level, name in enumerate(names):
            if name != long_steps[level]:
                setup.line(f"{name} = {long_steps[level]}")
        _emit_unflatten(writer, "j", list(zip(extents, indices)))
        terms = [_times(indices[axis], names[level]) for level, axis in enumerate(axis_at) if axis >= 0]
        writer.line(f"base = {' + '.join(term for term in terms if term != '0') or '0'}")
        counts = [level for level, item in enumerate(items) if isinstance(item, int)]
        if not counts:
            writer.line("dx[j] = dy[base]")
        else:
            writer.line(f"gradient = {numba_scalar(dtype)}(0)")
            offset = "base"
            with contextlib.ExitStack() as loops:
                for level in counts:
                    loops.enter_context(writer.block(f"for r{level} in range({items[level]}):"))
                    step = _times(f"r{level}", names[level])
                    if level == counts[-1]:
                        writer.line(f"gradient += dy[{_plus(offset, step)}]")
                    else:
                        writer.line(f"p{level} = {_plus(offset, step)}")
                        offset = f"p{level}"
            writer.line("dx[j] = gradient")
        parameters = [("dy", cuda_array_type(dtype)), ("dx", cuda_array_type(dtype))]
        what = "pullback: dx[j] = sum of dy over the copies of x[j]"
    parameters += [*((name, INDEX) for name in extents), ("total", INDEX)]
    return cuda_kernel(
        signature, parameters, writer, f"repeat nest {nest.items}, {what}",
        index="j" if pullback else "t", setup=setup,
    )


def _render_segments_cuda(signature: ShapeSignature, dtype: str, pullback: bool, unit_inner: bool) -> KernelSource:
    """Per-element counts along one axis on CUDA: ``x`` is ``(outer, n, inner)``, ``y`` is
    ``(outer, rows, inner)``; element ``i`` of the axis fills rows ``offsets[i]:offsets[i+1]``."""
    writer = SourceWriter()
    if pullback:
        writer.line("# dx is (outer, n, inner), dy (outer, rows, inner), both read flat; thread j owns dx[j]")
        writer.line("# and sums the rows offsets[i]:offsets[i + 1] of dy at its (a, b).")
        dims = [("outer", "a"), ("n", "i")] + ([] if unit_inner else [("inner", "b")])
        _emit_unflatten(writer, "j", dims)
        writer.line(f"gradient = {numba_scalar(dtype)}(0)")
        with writer.block("for row in range(offsets[i], offsets[i + 1]):"):
            writer.line("gradient += dy[a * rows + row]" if unit_inner else "gradient += dy[(a * rows + row) * inner + b]")
        writer.line("dx[j] = gradient")
        parameters = [("dy", cuda_array_type(dtype)), ("dx", cuda_array_type(dtype))]
        what = "pullback: segment sums"
    else:
        writer.line("# x is (outer, n, inner), y (outer, rows, inner), both read flat; thread t writes y[t],")
        writer.line("# copying element i of the axis, the one with offsets[i] <= row < offsets[i + 1].")
        dims = [("outer", "a"), ("rows", "row")] + ([] if unit_inner else [("inner", "b")])
        _emit_unflatten(writer, "t", dims)
        writer.line("low = 0")
        writer.line("high = n")
        with writer.block("while high - low > 1:"):
            writer.line("middle = (low + high) // 2")
            with writer.block("if offsets[middle] <= row:"):
                writer.line("low = middle")
            with writer.block("else:"):
                writer.line("high = middle")
        writer.line("y[t] = x[a * n + low]" if unit_inner else "y[t] = x[(a * n + low) * inner + b]")
        parameters = [("x", cuda_array_type(dtype)), ("y", cuda_array_type(dtype))]
        what = "forward: segment copies"
    parameters += [
        ("offsets", cuda_array_type("int64")),
        ("outer", INDEX),
        ("n", INDEX),
        ("inner", INDEX),
        ("rows", INDEX),
        ("total", INDEX),
    ]
    return cuda_kernel(
        signature, parameters, writer, f"repeat with per-element counts, {what}",
        index="j" if pullback else "t",
    )


# ---------------------------------------------------------------------------------------------
# Validation and plans: one call's static form plus its input's shape
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _NestPlan:
    """A call with static counts: the nest, and this input's extents and output shape."""

    nest: _Nest
    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]
    out_shape: tuple[int, ...]
    extents: tuple[int, ...]
    target: str = "cpu"  # which kernels run: "cpu" or "cuda" (kernel_target)


@dataclass(frozen=True, slots=True)
class _CountsPlan:
    """A call with a per-element counts array along one axis (or the flattened input)."""

    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]
    out_shape: tuple[int, ...]
    outer: int
    length: int
    inner: int
    unit_inner: bool
    counts: ArrayLike | None  # int64, on x's device; None when planning from an ArraySpec
    offsets: ArrayLike | None
    total: int
    counts_shape: tuple[int, ...]  # where the counts lie along x's axes (for a Fill's pullback)
    target: str = "cpu"


_Plan = _NestPlan | _CountsPlan


# Native-order dtypes that check_dtype accepts.
_SUPPORTED_DTYPES = frozenset(
    np.dtype(name)
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128",
    )
)


def _native(dtype: np.dtype[np.generic]) -> np.dtype[np.generic]:
    # Kernels are compiled for native byte order; '>f8' computes (and returns) as float64.
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def _input_facts(x: object, name: str) -> tuple[ArrayLike | None, tuple[int, ...], np.dtype[np.generic], str]:
    """``(array or None for a spec, shape, native dtype, kernel target)``."""
    if type(x) is np.ndarray and x.dtype in _SUPPORTED_DTYPES:
        array: ArrayLike | None = x  # the common case, without check_dtype's ~1.5 us
        shape, dtype, device = x.shape, x.dtype, "cpu"
    elif isinstance(x, ArraySpec):
        array = None
        shape, dtype, device = x.shape, x.dtype, device_of(x)
        check_dtype(dtype, name)
    else:
        array = as_array(x, name)
        shape, dtype, device = tuple(array.shape), array.dtype, device_of(array)
    return array, shape, _native(dtype), kernel_target(device)


def _check_counts_value(values: tuple[int, ...], name: str) -> None:
    for value in values:
        if value < 0:
            raise ValueError(f"repeat: {name}={values if len(values) > 1 else values[0]} has a negative count")


def _nest_plan(
    layout: _Layout, shape: tuple[int, ...], dtype: np.dtype[np.generic], what: str, target: str = "cpu"
) -> _NestPlan:
    nest = _nest(layout)
    out_shape = nest.output_shape(shape)
    for extent in out_shape:
        if extent >= _COUNT_LIMIT:
            raise ValueError(f"{what}: the output shape {shape_text(out_shape)} is too large to allocate")
    checked_size(out_shape, dtype.itemsize, what)
    return _NestPlan(nest, shape, dtype, out_shape, nest.extents(shape), target)


def _check_repeat(
    x: object, repeats: object, axis: object, inner: object, outer: object
) -> tuple[ArrayLike | None, _Plan]:
    """Validate a ``repeat`` call (either form) and plan it; messages name the arguments."""
    array, shape, dtype, target = _input_facts(x, "x")
    ndim = len(shape)
    if repeats is None:
        if axis is not None:
            raise TypeError("repeat: axis goes with repeats (NumPy's form); Julia's form takes inner=/outer=")
        inner_counts = () if inner is None else static_ints(inner, "inner")
        outer_counts = () if outer is None else static_ints(outer, "outer")
        _check_counts_value(inner_counts, "inner")
        _check_counts_value(outer_counts, "outer")
        return array, _nest_plan(_julia_layout(ndim, inner_counts, outer_counts), shape, dtype, "repeat", target)
    if inner is not None or outer is not None:
        raise TypeError(
            "repeat: pass either repeats (and axis), as np.repeat, or inner=/outer=, as Julia's "
            "repeat, not both"
        )
    axis_index = None if axis is None else normalize_axis(static_int(axis, "axis"), max(ndim, 1), "repeat: axis")
    if ndim == 0:
        axis_index = None  # NumPy reads a 0-d x as 1-d: axis 0 (or -1) repeats it as axis=None does
    if isinstance(repeats, Val) or (
        isinstance(repeats, (int, np.integer)) and not isinstance(repeats, (bool, np.bool_))
    ):
        if isinstance(repeats, Val) and not isinstance(repeats.value, int):
            raise TypeError(
                f"repeat: repeats must be Val(int) or a 1-D integer array of per-element counts, "
                f"got {repeats!r}; for counts per axis use inner={repeats!r}"
            )
        count = static_int(repeats, "repeats")
        _check_counts_value((count,), "repeats")
        return array, _nest_plan(_numpy_layout(ndim, count, axis_index), shape, dtype, "repeat", target)
    if not (type(x) is np.ndarray and type(repeats) is np.ndarray):  # two NumPy arrays: both on cpu
        common_device((x, repeats), ("x", "repeats"))
    return array, _counts_plan(repeats, shape, dtype, axis_index, target, array)


def _counts_plan(
    repeats: object,
    shape: tuple[int, ...],
    dtype: np.dtype[np.generic],
    axis: int | None,
    target: str = "cpu",
    like: ArrayLike | None = None,
) -> _CountsPlan:
    """Counts, offsets and output shape; the counts live where ``x`` (``like``) lives, and a
    list of ints is moved there. Their values are read on the host once (the output's size
    depends on them), as ``np.repeat`` and ``cupy.repeat`` do."""
    if axis is None:
        outer, length, inner = 1, math.prod(shape), 1
        where = f"x has {length} elements (shape {shape_text(shape)}, flattened as axis=None)"
    else:
        outer, length, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
        where = f"x has {length} elements along axis {axis} (shape {shape_text(shape)})"
    unit_inner = axis is None or axis == len(shape) - 1
    if isinstance(repeats, ArraySpec):
        counts_dtype, counts_shape, values = repeats.dtype, repeats.shape, None
    else:
        if isinstance(repeats, (list, tuple)):
            xp = np if like is None else array_namespace(like)
            repeats = xp.asarray(repeats, dtype=np.int64 if len(repeats) == 0 else None)
        if not is_array(repeats):
            raise TypeError(
                f"repeat: repeats must be Val(int) or a 1-D integer array of per-element counts, "
                f"got {type(repeats).__name__}"
            )
        values = repeats
        counts_dtype, counts_shape = values.dtype, tuple(values.shape)
    if counts_dtype.kind not in "iu":
        raise TypeError(f"repeat: repeats must hold integers, got an array of dtype {counts_dtype}")
    if len(counts_shape) > 1:
        raise ValueError(f"repeat: repeats must be a 1-D array of counts, got shape {shape_text(counts_shape)}")
    counts_length = math.prod(counts_shape)
    if counts_length not in (1, length):
        raise ValueError(f"repeat: repeats has {counts_length} counts but {where}; give {length} counts or 1")
    location = [1] * len(shape)
    if axis is not None:
        location[axis] = length
    counts_shape_in_x = tuple(location) if axis is not None else shape
    if values is None:
        out_shape = (0,) if axis is None else shape[:axis] + (0,) + shape[axis + 1 :]
        return _CountsPlan(
            shape, dtype, out_shape, outer, length, inner, unit_inner, None, None, 0, counts_shape_in_x, target
        )
    xp = array_namespace(values)
    flat = values.reshape(-1)
    if flat.size and flat.min() < 0:
        raise ValueError(f"repeat: repeats holds a negative count ({int(flat.min())})")
    if flat.size and int(flat.max()) >= _COUNT_LIMIT:
        raise ValueError(f"repeat: repeats holds a count of {int(flat.max())}, too large to allocate")
    # Every size is checked before anything of x's length is allocated: x may be a broadcast
    # view far larger than memory (np.broadcast_to), and one count stands for all of them.
    if flat.size == 1:
        total = int(flat[0]) * length
    else:
        total_exact = int(flat.max()) * length if length else 0
        total = int(flat.sum(dtype=np.int64)) if total_exact < _COUNT_LIMIT else sum(int(c) for c in flat.tolist())
    out_shape = (total,) if axis is None else shape[:axis] + (total,) + shape[axis + 1 :]
    checked_size(out_shape, dtype.itemsize, "repeat")
    checked_size((2 * (length + 1),), 8, "repeat: the per-element counts and their offsets")
    counts = xp.ascontiguousarray(xp.broadcast_to(flat.astype(np.int64), (length,)))
    offsets = xp.zeros(length + 1, dtype=np.int64)
    if length:
        offsets[1:] = xp.cumsum(counts)
    return _CountsPlan(
        shape, dtype, out_shape, outer, length, inner, unit_inner, counts, offsets, total, counts_shape_in_x, target
    )


def _check_tile(x: object, reps: object) -> tuple[ArrayLike | None, _NestPlan]:
    """Validate a ``tile`` call and plan it."""
    array, shape, dtype, target = _input_facts(x, "x")
    counts = static_ints(reps, "reps")
    if any(count < 0 for count in counts):
        raise ValueError(f"tile: reps={counts} has a negative count")
    return array, _nest_plan(_tile_layout(len(shape), counts), shape, dtype, "tile", target)


# ---------------------------------------------------------------------------------------------
# Running a plan: kernels, forward, pullback, pushforward
# ---------------------------------------------------------------------------------------------


def _requests(plan: _Plan, kind: str) -> KernelRequest | None:
    """The kernel of ``kind`` ("forward" or "pullback") for a plan; None when none runs."""
    if isinstance(plan, _NestPlan):
        return None if plan.nest.empty else _nest_request(plan.nest, plan.dtype, kind, plan.target)
    return _segments_request(plan.dtype, kind, plan.unit_inner, plan.target)


def _kernel_requests(plan: _Plan) -> list[KernelRequest]:
    kinds = ["forward", "pullback"] if _differentiable(plan.dtype) else ["forward"]
    return [request for kind in kinds if (request := _requests(plan, kind)) is not None]


def _kernel(plan: _Plan, kind: str) -> Kernel | None:
    request = _requests(plan, kind)
    return None if request is None else request.get()


def _do_nothing(*args: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class _Launch:
    """How to call a plan's kernel: ``function(source, target, *arguments, lo, hi)`` over
    ``[0, extent)``, in one call, or split across threads when ``work`` (elements) reaches
    ``PARALLEL_THRESHOLD`` (read at each call, like the thread count)."""

    function: Callable[..., object]
    arguments: tuple[object, ...]
    extent: int
    work: int

    def __call__(self, source: ArrayLike, target: ArrayLike) -> None:
        if self.work < _parallel.PARALLEL_THRESHOLD or self.extent < 2:
            self.function(source, target, *self.arguments, 0, self.extent)
        else:
            chunks = chunk_bounds(self.extent, self.work)
            run_chunks(self.function, [(source, target, *self.arguments, lo, hi) for lo, hi in chunks])


def _launch(plan: _Plan, kernel: Kernel | None) -> _Launch:
    if kernel is None:
        return _Launch(_do_nothing, (), 0, 0)
    work = math.prod(plan.out_shape)
    arguments: tuple[object, ...]
    if isinstance(plan, _NestPlan):
        extent, arguments = plan.extents[0], plan.extents
    else:
        extent = plan.length
        arguments = (plan.offsets, plan.outer, plan.length, plan.inner, plan.total)
    return _Launch(kernel.entry, arguments, extent, work)


def _source(x: ArrayLike, dtype: np.dtype[np.generic]) -> ArrayLike:
    """``x`` as the flat, C-ordered array of ``dtype`` that a kernel reads."""
    if type(x) is np.ndarray and x.dtype is dtype and x.flags.c_contiguous:
        return x.reshape(-1)
    return contiguous(x).astype(dtype, copy=False).reshape(-1)


def _forward(plan: _Plan, kernel: Kernel | None, x: ArrayLike) -> ArrayLike:
    """``y`` from ``x`` (or the tangent of ``y`` from the tangent of ``x``)."""
    if plan.target == "cuda":
        return _forward_cuda(plan, kernel, x)
    y = np.empty(plan.out_shape, dtype=plan.dtype)
    # x is read (copied when strided) even for an empty output, so an input whose C-ordered
    # copy cannot exist (a huge broadcast view) is refused whatever the counts.
    source = _source(x, plan.dtype)
    if kernel is not None:
        _launch(plan, kernel)(source, y.reshape(-1))
    return y


def _lazy_pullback(plan: _Plan, cotangent: Fill) -> ArrayLike | Fill:
    """The pullback of a constant cotangent, without materializing it: a ``Fill`` for static
    counts, ``value * counts[i]`` spread along the axis (the size of ``x``) for a counts array."""
    if isinstance(plan, _NestPlan):
        return Fill(cotangent.value * plan.nest.total, plan.shape, plan.dtype)
    assert plan.counts is not None
    xp = array_namespace(plan.counts)
    dx: ArrayLike = xp.empty(plan.shape, dtype=plan.dtype)
    dx[...] = (xp.asarray(cotangent.value, dtype=plan.dtype) * plan.counts).reshape(plan.counts_shape)
    return dx


def _make_pullback(
    plan: _Plan, kernel: Kernel | None, positional: int, namespace: ModuleType = np
) -> Pullback:
    """The pullback closure of a plan. Everything but ``dy`` is settled here, once: a call
    checks ``dy``, allocates ``dx`` and makes one kernel call (or one per thread)."""
    if plan.target == "cuda":
        return _make_cuda_pullback(plan, kernel, positional, namespace)
    rest = (_NO_TANGENT,) * (positional - 1)
    out_shape, x_shape, dtype = plan.out_shape, plan.shape, plan.dtype
    if not _differentiable(dtype):

        def constant_pullback(dy: object) -> tuple[object, ...]:
            prepare_cotangent(dy, out_shape, np.dtype(np.float64))  # validates dy's shape
            return (_NO_TANGENT, *rest)

        return constant_pullback

    launch = _launch(plan, kernel)
    function, arguments, extent = launch.function, launch.arguments, launch.extent
    # Below the threshold (checked per call, as _Launch does) one kernel call, inline.
    work = launch.work if extent >= 2 else -1
    size = math.prod(x_shape)
    flat_input = len(x_shape) == 1
    if kernel is None:
        allocate: Callable[..., ArrayLike] = np.zeros
    elif isinstance(plan, _NestPlan):
        allocate = np.zeros if plan.nest.accumulates else np.empty
    else:
        allocate = np.empty if plan.unit_inner else np.zeros
    ndarray = np.ndarray

    def repeat_pullback(dy: object) -> tuple[object, ...]:
        if type(dy) is ndarray and dy.dtype is dtype and dy.shape == out_shape:
            flat = dy.ravel()  # a view when C-contiguous, else one copy
        else:
            prepared = prepare_cotangent(dy, out_shape, dtype, _NUMPY_LIKE)
            if isinstance(prepared, DenseCotangent):
                flat = prepared.array.reshape(-1)
            elif isinstance(prepared, Fill):
                return (_lazy_pullback(plan, prepared), *rest)
            else:
                return (_ZERO_TANGENT, *rest)
        dx_flat = allocate(size, dtype)
        if work < _parallel.PARALLEL_THRESHOLD:
            function(flat, dx_flat, *arguments, 0, extent)
        else:
            launch(flat, dx_flat)
        return (dx_flat if flat_input else dx_flat.reshape(x_shape), *rest)

    return repeat_pullback


def _prepare_tangent(tangent: object, plan: _Plan, like: ArrayLike | None = None) -> DenseCotangent | Fill | ZeroTangent:
    return prepare_tangent(tangent, plan.shape, plan.dtype, like, "repeat frule: the tangent of x")


def _pushforward(
    plan: _Plan, forward: Callable[[ArrayLike], ArrayLike], tangent: object, like: ArrayLike | None = None
) -> object:
    """The tangent of ``y``: the forward map (``forward``, the plan's) applied to ``x``'s
    tangent (it is linear). ``like`` (the primal output) says which device the tangent must be on."""
    if not _differentiable(plan.dtype):
        return _NO_TANGENT
    prepared = _prepare_tangent(tangent, plan, like)
    if isinstance(prepared, ZeroTangent):
        return prepared
    if isinstance(prepared, Fill):
        return Fill(prepared.value, plan.out_shape, plan.dtype)
    return forward(prepared.array)


# ---------------------------------------------------------------------------------------------
# Running a plan on CUDA: arrays allocated in the input's namespace, kernels on its stream
# ---------------------------------------------------------------------------------------------


def _cuda_arguments(plan: _Plan) -> tuple[object, ...]:
    """A CUDA kernel's arguments between its two arrays and its element count."""
    if isinstance(plan, _NestPlan):
        return plan.extents
    return (plan.offsets, plan.outer, plan.length, plan.inner, plan.total)


def _forward_cuda(plan: _Plan, kernel: Kernel | None, x: ArrayLike) -> ArrayLike:
    """``y`` from ``x`` on the device ``x`` lives on (NumPy arrays under the simulator)."""
    xp = array_namespace(x)
    y: ArrayLike = xp.empty(plan.out_shape, dtype=plan.dtype)
    if kernel is not None:
        source = contiguous(x).astype(plan.dtype, copy=False).reshape(-1)
        launch(kernel, y.size, source, y.reshape(-1), *_cuda_arguments(plan), y.size)
    return y


def _make_cuda_pullback(plan: _Plan, kernel: Kernel | None, positional: int, namespace: ModuleType) -> Pullback:
    """The pullback closure on CUDA: one gather launch, one thread per ``dx`` element."""
    rest = (_NO_TANGENT,) * (positional - 1)
    out_shape, x_shape, dtype = plan.out_shape, plan.shape, plan.dtype
    like: ArrayLike = namespace.empty((0,), dtype=dtype)  # names the device; holds no data
    if not _differentiable(dtype):

        def constant_pullback(dy: object) -> tuple[object, ...]:
            prepare_cotangent(dy, out_shape, np.dtype(np.float64), like)  # validates dy's shape
            return (_NO_TANGENT, *rest)

        return constant_pullback

    size = math.prod(x_shape)
    arguments = (*_cuda_arguments(plan), size)
    if isinstance(plan, _NestPlan):
        work = plan.nest.total
    else:
        work = -(-plan.total // max(plan.length, 1))
    allocate: Callable[..., ArrayLike] = namespace.zeros if kernel is None else namespace.empty

    def repeat_pullback(dy: object) -> tuple[object, ...]:
        prepared = prepare_cotangent(dy, out_shape, dtype, like)
        if isinstance(prepared, Fill):
            return (_lazy_pullback(plan, prepared), *rest)
        if isinstance(prepared, ZeroTangent):
            return (_ZERO_TANGENT, *rest)
        dx = allocate(x_shape, dtype)
        if kernel is not None:
            launch(kernel, size, prepared.array.reshape(-1), dx.reshape(-1), *arguments, work=work)
        return (dx, *rest)

    return repeat_pullback


def _need_array(array: ArrayLike | None) -> ArrayLike:
    if array is None:
        raise TypeError("x must be an array (an ArraySpec only describes one, for precompile/explain)")
    return array


def _check_tangents(tangents: object, positional: int) -> tuple[object, ...]:
    if not isinstance(tangents, tuple) or len(tangents) != positional:
        count = len(tangents) if isinstance(tangents, tuple) else type(tangents).__name__
        raise ValueError(
            f"frule: tangents must be a tuple with one entry per positional argument "
            f"({positional}), got {count}"
        )
    return tangents


# ---------------------------------------------------------------------------------------------
# Prepared signatures: a static-count call, settled once and found again by its key
# ---------------------------------------------------------------------------------------------
#
# A call whose counts are all Val (or None) on a NumPy array with CPU kernels depends only on
# its op, its static values, x's dtype and x's shape: validation, the plan, the kernels and the
# pullback closure (which holds no call data) are built once and kept in the shared PlanCache.
# A hit allocates y and calls the kernel. Plain-int counts (dynamic, counted on every call),
# counts arrays (data), CuPy arrays and STABLERULES_DEVICE=cuda take the general path.


@dataclass(frozen=True, slots=True, eq=False)
class _Prepared:
    """One static-count signature: its plan, the forward kernel's call, and for an rrule
    entry (``positional`` > 0) the pullback closure of that arity."""

    plan: _NestPlan
    launch: _Launch
    function: Callable[..., object] | None  # the forward kernel's entry; None for an empty output
    arguments: tuple[object, ...]
    extent: int
    work: int  # elements of y, or -1 when the partition loop cannot be split
    out_size: int
    flat_output: bool
    pullback: Pullback | None

    def forward(self, x: ArrayLike) -> ArrayLike:
        """``y`` (or the pushforward of a dense tangent) from an array of the plan's shape."""
        plan = self.plan
        dtype = plan.dtype
        y = np.empty(self.out_size, dtype)
        if type(x) is _NDARRAY and x.dtype is dtype and x.flags.c_contiguous:
            source = x.reshape(-1)
        else:
            source = contiguous(x).astype(dtype, copy=False).reshape(-1)  # as _forward: even when empty
        if self.function is not None:
            if self.work < _parallel.PARALLEL_THRESHOLD:
                self.function(source, y, *self.arguments, 0, self.extent)
            else:
                self.launch(source, y)
        return y if self.flat_output else y.reshape(plan.out_shape)


_NDARRAY = np.ndarray
_PLANS: PlanCache[_Prepared] = PlanCache()


def _prepare(plan: _NestPlan, positional: int, named: Callable[[Pullback], Pullback] | None = None) -> _Prepared:
    kernel = _kernel(plan, "forward")
    launch = _launch(plan, kernel)
    pullback: Pullback | None = None
    if positional:
        pullback_kernel = _kernel(plan, "pullback") if _differentiable(plan.dtype) else None
        pullback = _make_pullback(plan, pullback_kernel, positional)
        if named is not None:
            pullback = named(pullback)
    out_size = math.prod(plan.out_shape)
    return _Prepared(
        plan,
        launch,
        None if kernel is None else launch.function,
        launch.arguments,
        launch.extent,
        launch.work if launch.extent >= 2 else -1,
        out_size,
        len(plan.out_shape) == 1,
        pullback,
    )


def _static_key(value: object, counts: bool) -> object:
    """A static argument as it enters a plan key: a ``Val``'s value, or a plain int (or, for
    per-axis ``counts``, a tuple of plain ints), which is dynamic; ``_UNPLANNED`` for anything
    else (a bool, a NumPy integer, a list, a counts array: the general path handles them)."""
    kind = type(value)
    if kind is Val:
        return value.value  # type: ignore[attr-defined]
    if kind is int:
        return value
    if counts and kind is tuple and all(type(item) is int for item in value):  # type: ignore[attr-defined]
        return value
    return _UNPLANNED


_UNPLANNED = object()


def _count_dynamic(names: tuple[str, ...], values: tuple[object, ...]) -> None:
    """What the general path's ``static_int``/``static_ints`` do for a plain static argument,
    in the same order: count it, and refuse it inside ``no_fallback()``."""
    for name, value in zip(names, values):
        if value is not None and type(value) is not Val:
            CACHE.note_dynamic_argument(name, value)


def _prepared_repeat(
    positional: int, x: object, repeats: object, axis: object, inner: object, outer: object
) -> _Prepared | None:
    """The prepared signature of a ``repeat`` call (``positional`` 0 for the forward map,
    else the rrule's arity), or ``None`` when the call takes the general path.

    Static arguments enter the key by value, so ``Val(7)`` and a plain ``7`` share a plan; a
    plain one is still counted as dynamic on every call (by the general path on a miss, here
    on a hit). A plain tuple for ``repeats`` is a counts array (data) and is never planned.
    """
    if type(x) is not _NDARRAY or kernel_target("cpu") != "cpu":
        return None
    # Unrolled on purpose: a loop over the four arguments (or one helper call each) costs
    # ~0.5 us of a ~1.5 us forward call (measured); this is the hot path of every call.
    dynamic = False
    if repeats is None:
        repeats_value: object = None
    elif type(repeats) is Val:
        repeats_value = repeats.value
    else:
        repeats_value = _static_key(repeats, counts=False)
        if repeats_value is _UNPLANNED:
            return None
        dynamic = True
    if axis is None:
        axis_value: object = None
    elif type(axis) is Val:
        axis_value = axis.value
    else:
        axis_value = _static_key(axis, counts=False)
        if axis_value is _UNPLANNED:
            return None
        dynamic = True
    if inner is None:
        inner_value: object = None
    elif type(inner) is Val:
        inner_value = inner.value
    else:
        inner_value = _static_key(inner, counts=True)
        if inner_value is _UNPLANNED:
            return None
        dynamic = True
    if outer is None:
        outer_value: object = None
    elif type(outer) is Val:
        outer_value = outer.value
    else:
        outer_value = _static_key(outer, counts=True)
        if outer_value is _UNPLANNED:
            return None
        dynamic = True
    key = ("repeat", positional, x.dtype, x.shape, repeats_value, axis_value, inner_value, outer_value)
    prepared = _PLANS.get(key)
    if prepared is None:
        _, plan = _check_repeat(x, repeats, axis, inner, outer)  # counts dynamic arguments itself
        if not isinstance(plan, _NestPlan):  # pragma: no cover - static counts always plan a nest
            return None
        return _PLANS.remember(key, _prepare(plan, positional))
    if dynamic:
        _count_dynamic(("axis", "repeats", "inner", "outer"), (axis, repeats, inner, outer))
    return prepared


def _prepared_tile(positional: int, x: object, reps: object) -> _Prepared | None:
    """The prepared signature of a ``tile`` call, as :func:`_prepared_repeat`."""
    if type(x) is not _NDARRAY or kernel_target("cpu") != "cpu":
        return None
    reps_value = _static_key(reps, counts=True)
    if reps_value is _UNPLANNED:
        return None
    key = ("tile", positional, x.dtype, x.shape, reps_value)
    prepared = _PLANS.get(key)
    if prepared is None:
        _, plan = _check_tile(x, reps)  # counts a dynamic reps itself
        return _PLANS.remember(key, _prepare(plan, positional, _named_tile_pullback))
    if type(reps) is not Val:
        _count_dynamic(("reps",), (reps,))
    return prepared


# ---------------------------------------------------------------------------------------------
# repeat
# ---------------------------------------------------------------------------------------------

_ValCounts = Val[int] | Val[tuple[int, ...]]
_StaticCounts = _ValCounts | int | tuple[int, ...]


def _repeat_arguments(
    x: object, repeats: object = None, axis: object = None, *, inner: object = None, outer: object = None
) -> tuple[object, object, object, object, object]:
    return x, repeats, axis, inner, outer


class _Repeat(Op):
    name = "repeat"

    @overload
    def __call__(
        self,
        x: npt.NDArray[_DT],
        repeats: Val[int] | npt.NDArray[np.integer] | Sequence[int],
        axis: Val[int] | None = None,
    ) -> npt.NDArray[_DT]: ...

    @overload
    def __call__(
        self,
        x: npt.NDArray[_DT],
        *,
        inner: _ValCounts | None = None,
        outer: _ValCounts | None = None,
    ) -> npt.NDArray[_DT]: ...

    @overload
    @deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
    def __call__(
        self,
        x: npt.NDArray[_DT],
        repeats: Val[int] | int | npt.NDArray[np.integer] | Sequence[int],
        axis: Val[int] | int | None = None,
    ) -> npt.NDArray[_DT]: ...

    @overload
    @deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
    def __call__(
        self,
        x: npt.NDArray[_DT],
        *,
        inner: _StaticCounts | None = None,
        outer: _StaticCounts | None = None,
    ) -> npt.NDArray[_DT]: ...

    def __call__(
        self,
        x: object,
        repeats: object = None,
        axis: object = None,
        *,
        inner: object = None,
        outer: object = None,
    ) -> ArrayLike:
        """Repeat elements of an array: ``np.repeat(x, repeats, axis)``, or Julia's
        ``repeat(x; inner, outer)``.

        NumPy's form: ``repeats`` is ``Val(k)`` (static, compiled in) or a 1-D integer array of
        per-element counts (data: of length ``x.shape[axis]``, or 1); ``axis`` is ``Val(int)``
        or ``None`` (repeat the flattened input). A list of ints counts as such an array.

        Julia's form: ``inner=Val(tuple)`` repeats each element ``inner[d]`` times along axis
        ``d``, then ``outer=Val(tuple)`` tiles the whole array ``outer[d]`` times; ``Val(k)``
        means ``(k,)``; a tuple longer than ``x.ndim`` reads ``x`` as
        ``x.shape + (1,) * extra``; shorter tuples are padded with 1.

        Rules: ``back(dy)`` returns ``(dx, NoTangent(), ...)``, one entry per positional
        argument; ``dx[j]`` is the sum of ``dy`` over the copies of ``x[j]`` (a ``Fill``
        cotangent gives a ``Fill`` scaled by the number of copies). Zero counts give empty
        outputs and zero gradients. Counts whose product or output size cannot be allocated
        are a ``ValueError`` (NumPy itself crashes on some). A non-native byte order computes
        and returns in native order.
        """
        prepared = _prepared_repeat(0, x, repeats, axis, inner, outer)
        if prepared is not None:
            return prepared.forward(x)  # type: ignore[arg-type]
        array, plan = _check_repeat(x, repeats, axis, inner, outer)
        return _forward(plan, _kernel(plan, "forward"), _need_array(array))

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """The forward and pullback kernels of this call (the pushforward runs the forward one)."""
        _, plan = _check_repeat(*_repeat_arguments(*args, **kwargs))
        return _kernel_requests(plan)


repeat = _Repeat()


@rrule_rule(repeat)
def _repeat_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    arguments = _repeat_arguments(*args, **kwargs)
    prepared = _prepared_repeat(len(args), *arguments)
    if prepared is not None and prepared.pullback is not None:
        return prepared.forward(arguments[0]), prepared.pullback  # type: ignore[arg-type]
    array, plan = _check_repeat(*arguments)
    y = _forward(plan, _kernel(plan, "forward"), _need_array(array))
    pullback_kernel = _kernel(plan, "pullback") if _differentiable(plan.dtype) else None
    return y, _make_pullback(plan, pullback_kernel, len(args), array_namespace(y))


@frule_rule(repeat)
def _repeat_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    arguments = _repeat_arguments(*args, **kwargs)
    prepared = _prepared_repeat(0, *arguments)
    tangent = _check_tangents(tangents, len(args))[0]
    if prepared is not None:
        y = prepared.forward(arguments[0])  # type: ignore[arg-type]
        return y, _pushforward(prepared.plan, prepared.forward, tangent, y)
    array, plan = _check_repeat(*arguments)
    kernel = _kernel(plan, "forward")
    y = _forward(plan, kernel, _need_array(array))
    return y, _pushforward(plan, functools.partial(_forward, plan, kernel), tangent, y)


# ---------------------------------------------------------------------------------------------
# tile
# ---------------------------------------------------------------------------------------------


def _tile_arguments(x: object, reps: object) -> tuple[object, object]:
    return x, reps


class _Tile(Op):
    name = "tile"

    @overload
    def __call__(self, x: npt.NDArray[_DT], reps: _ValCounts) -> npt.NDArray[_DT]: ...

    @overload
    @deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
    def __call__(self, x: npt.NDArray[_DT], reps: _StaticCounts) -> npt.NDArray[_DT]: ...

    def __call__(self, x: npt.NDArray[_DT], reps: _StaticCounts) -> npt.NDArray[_DT]:
        """Construct an array by repeating ``x`` the number of times given by ``reps``
        (``np.tile``): ``reps`` is ``Val(int)`` or ``Val(tuple)``, static; when it is longer
        than ``x.ndim`` new axes are leading, when shorter it is padded with leading 1s.

        Rules: ``back(dy)`` returns ``(dx, NoTangent())``, ``dx`` the sum of ``dy`` over the
        tiles (a ``Fill`` cotangent gives a ``Fill``).
        """
        prepared = _prepared_tile(0, x, reps)
        if prepared is not None:
            return prepared.forward(x)  # type: ignore[return-value]
        array, plan = _check_tile(x, reps)
        return _forward(plan, _kernel(plan, "forward"), _need_array(array))  # type: ignore[return-value]

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """The forward and pullback kernels of this call (the pushforward runs the forward one)."""
        _, plan = _check_tile(*_tile_arguments(*args, **kwargs))
        return _kernel_requests(plan)


tile = _Tile()


def _named_tile_pullback(pullback: Pullback) -> Pullback:
    def tile_pullback(dy: object) -> tuple[object, ...]:
        return pullback(dy)

    return tile_pullback


@rrule_rule(tile)
def _tile_rrule(*args: object, **kwargs: object) -> tuple[ArrayLike, Pullback]:
    arguments = _tile_arguments(*args, **kwargs)
    prepared = _prepared_tile(len(args), *arguments)
    if prepared is not None and prepared.pullback is not None:
        return prepared.forward(arguments[0]), prepared.pullback  # type: ignore[arg-type]
    array, plan = _check_tile(*arguments)
    y = _forward(plan, _kernel(plan, "forward"), _need_array(array))
    pullback_kernel = _kernel(plan, "pullback") if _differentiable(plan.dtype) else None
    return y, _named_tile_pullback(_make_pullback(plan, pullback_kernel, len(args), array_namespace(y)))


@frule_rule(tile)
def _tile_frule(tangents: object, *args: object, **kwargs: object) -> tuple[ArrayLike, object]:
    arguments = _tile_arguments(*args, **kwargs)
    prepared = _prepared_tile(0, *arguments)
    tangent = _check_tangents(tangents, len(args))[0]
    if prepared is not None:
        y = prepared.forward(arguments[0])  # type: ignore[arg-type]
        return y, _pushforward(prepared.plan, prepared.forward, tangent, y)
    array, plan = _check_tile(*arguments)
    kernel = _kernel(plan, "forward")
    y = _forward(plan, kernel, _need_array(array))
    return y, _pushforward(plan, functools.partial(_forward, plan, kernel), tangent, y)
