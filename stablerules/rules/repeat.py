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
says when). Otherwise a small leading count (the 4 in ``(4, s, 7, s, 2, s, 10)``) is fused
into the innermost sums (``_Nest.outer_level``): the input loop runs outermost and each run is
read from every copy at once, so the copies stream together and ``dx`` is updated once instead
of once per copy. The pushforward is the forward kernel applied to the tangent. Kernels
partition the first ``s`` loop across threads, so each thread owns a disjoint range of ``dx``
(loops outside it run in full in every thread).

Per-element counts arrays (``np.repeat(x, counts, axis)``) are data: a segment kernel over
``x`` viewed as ``(outer, n, inner)``, with offsets computed once per call.

Both run on the rule scaffold (``stablerules._rule``): a call's signature (op, static values,
``x``'s dtype and shape, device) has one plan, :class:`NestPlan` or :class:`CountsPlan`,
built once, whose pullback closure holds no call data for static counts (every rrule of the
signature returns the same one). The CPU and CUDA kernels are one path each per plan.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import (
    ArrayLike,
    ArraySpec,
    InputFacts,
    array_namespace,
    as_array,
    checked_size,
    contiguous,
    dtype_name,
    input_facts,
    is_array,
    joint_device,
    normalize_axis,
    shape_text,
    static_int,
    static_ints,
)
from .._key import Kernel, KernelSource, ShapeSignature
from .._codegen import INDEX, SourceWriter, cpu_kernel, least, nest_limit, numba_scalar, readonly_array, writable_array
from .._codegen import plus as _plus, tuple_text as _tuple_text
from .._cuda import cuda_array_type, cuda_kernel
from .. import _pool
from .._memo import cached_property, memoized
from .._op import KernelRequest
from .._launch import cpu_launch, cpu_launcher, cuda_launch, empty_launch
from .._plan import DensePullback, KernelPullback, Plan
from .._results import NO_TANGENT
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill, ZeroTangent
from .._units import cuda_half_helpers, half_helpers
from .._val import Val
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)

_NDARRAY = np.ndarray
# Counts whose product reaches this cannot index memory: rejected before any kernel is built.
_COUNT_LIMIT = 2**62
# A nest of n levels emits at most n nested loops: refused beyond Python's block limit.
_MAX_NEST_LEVELS = nest_limit()
# Innermost counts up to this size are summed as one unrolled pairwise expression.
_UNROLL_LIMIT = 16
# Elements of the CPU pullback's scratch buffer (summed copies of a chunk of the block; 16 KiB
# of float64, so it stays in the L1 cache between the copy sums and the run sums).
_BUFFER_SIZE = 2048
_BUFFERED_COPIES = 4
# A 16-bit pullback widens the dy under one iteration of its partition loop at once (its
# copies summed) when that sum has at most this many elements (64 KiB of float32).
_WIDE_REGION = 16384
# The most copies of a leading count the CPU pullback reads at once (``_Nest.outer_level``):
# one concurrent stream of dy each.
_FUSED_OUTER = 8
_INPUT_AXIS = "s"

NestItem = int | str


# ---------------------------------------------------------------------------------------------
# Normalization: every static form -> (axes map, inner, outer) -> loop nest
# ---------------------------------------------------------------------------------------------


# A NamedTuple, not a frozen dataclass: its definition cost (see ``_schema.Param``).
class _Layout(NamedTuple):
    """A static repeat: each padded axis ``d`` reads the input axes ``axes[d]`` (``()`` for a
    padded axis of extent 1, several for a flattened input), repeats each element
    ``inner[d]`` times and tiles the result ``outer[d]`` times."""

    axes: tuple[tuple[int, ...], ...]
    inner: tuple[int, ...]
    outer: tuple[int, ...]


class _Nest(NamedTuple):
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
        read as concurrent streams (faster with 2 threads). Only for
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


class _NestLimit(ValueError):
    """A static repeat beyond what the kernels index or nest. Its message is the reason alone:
    :class:`NestPlan` words it as the user's call (``tile: reps=...``), since one layout serves
    ``repeat``'s two forms and ``tile``."""


@memoized(maxsize=1024)
def _nest(layout: _Layout) -> _Nest:
    total = math.prod(layout.inner) * math.prod(layout.outer)
    empty = total == 0
    if not empty and total >= _COUNT_LIMIT:
        raise _NestLimit(f"each element would be copied {total} times, a count too large to index an array")
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
        raise _NestLimit(
            f"the loop nest would have {len(merged)} levels (counts and axes that do not merge); "
            f"compiled kernels nest at most {_MAX_NEST_LEVELS} loops: repeat along fewer axes per call"
        )
    return _Nest(layout, tuple(merged), tuple(groups), total, empty)


@memoized(maxsize=1024)
def _numpy_layout(ndim: int, count: int, axis: int | None) -> _Layout:
    if axis is None:
        return _Layout((tuple(range(ndim)),), (count,), (1,))
    inner = tuple(count if d == axis else 1 for d in range(ndim))
    return _Layout(tuple((d,) for d in range(ndim)), inner, (1,) * ndim)


@memoized(maxsize=1024)
def _julia_layout(ndim: int, inner: tuple[int, ...], outer: tuple[int, ...]) -> _Layout:
    n = max(ndim, len(inner), len(outer))
    axes = tuple((d,) if d < ndim else () for d in range(n))
    return _Layout(axes, inner + (1,) * (n - len(inner)), outer + (1,) * (n - len(outer)))


@memoized(maxsize=1024)
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


def _times(index: str, step: str) -> str:
    if index == "0" or step == "0":
        return "0"
    return index if step == "1" else f"{index} * {step}"


def _pairwise(terms: Sequence[str]) -> str:
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return f"({_pairwise(terms[:middle])} + {_pairwise(terms[middle:])})"


def _read(array: str, index: str, widen: bool = False) -> str:
    """``array[index]``; ``widen``: a 16-bit element read as its bits and widened to float32
    in the kernel (``_units.half_helpers``)."""
    return f"widen({array}[{index}])" if widen else f"{array}[{index}]"


def _pairwise_sum(array: str, base: str, lo: int, hi: int, widen: bool = False) -> str:
    return _pairwise([_read(array, _plus(base, str(offset)), widen) for offset in range(lo, hi)])


def _emit_run_sum(writer: SourceWriter, array: str, base: str, count: int, widen: bool = False) -> None:
    """``total = sum(array[base:base + count])`` without one long chain of dependent adds."""
    if count <= _UNROLL_LIMIT:
        writer.line(f"total = {_pairwise_sum(array, base, 0, count, widen)}")
        return
    whole = count - count % 4
    for lane in range(4):
        writer.line(f"sum{lane} = {_read(array, _plus(base, str(lane)), widen)}")
    with writer.block(f"for r in range(4, {whole}, 4):"):
        for lane in range(4):
            writer.line(f"sum{lane} += {_read(array, _plus(_plus(base, 'r'), str(lane)), widen)}")
    for extra in range(whole, count):
        writer.line(f"sum{extra - whole} += {_read(array, _plus(base, str(extra)), widen)}")
    writer.line("total = (sum0 + sum1) + (sum2 + sum3)")


class _Levels(NamedTuple):
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


def _half_slabs(nest: _Nest) -> bool:
    """Whether a 16-bit pullback of ``nest`` that adds into ``dx`` more than once
    (``accumulates``) can still write ``dx``'s bits once: where every count that revisits
    ``dx`` is inside the partition loop (``j0``, the first input loop, with at most the fused
    outer count before it) and that loop is not the block's. Each ``j0`` then owns a slab of
    ``dx`` that no other iteration touches: the kernel sums it in a float32 slab (zeroed,
    then the float32 kernel's additions in their order) and writes it rounded once, instead
    of a float32 ``dx`` of zeros rounded by a pass of its own after the kernel. The slabs of
    consecutive ``j0`` are contiguous: a buffer holds those of about ``SLAB_ELEMENTS``
    elements at a time, zeroed and rounded by one loop each (bfloat16, one thread: W3
    139-142 -> 130-133 us; a U-Net's x2 upsample of (4, 32, 16, 16) 27-29 -> 23-24 us, of
    (2, 64, 32, 32) 97-100 -> 77-80 us; one slab per ``j0`` instead made the first 26 -> 59
    us)."""
    if not nest.accumulates:
        return False
    items = nest.items
    block = len(items) - 1 if items[-1] == _INPUT_AXIS else len(items) - 2
    first = items.index(_INPUT_AXIS)
    return first < block and (first == 0 or (first == 1 and nest.outer_level == 0))


# About this many float32 elements of dx per slab buffer of a 16-bit pullback summed in slabs
# (``_half_slabs``; a few j0 at a time where one j0's slab is smaller): one zeroing and one
# rounding loop per buffer, not per j0.
SLAB_ELEMENTS = 1024


class _NestWriter:
    """The source of a nest's forward (``y`` from ``x``) or pullback (``dx`` from ``dy``)
    kernel, one method per part of the nest: the loops outside the block (:meth:`level`), the
    summed copies before it (:meth:`copies`, pullback only) and the block (:meth:`block`).

    Outer loops carry flat offsets; the innermost input loop (with the count after it, if
    any) works on slices of both arrays indexed from 0 by its loop variable. Such indices
    are provably non-negative, so Numba emits no negative-index wraparound and LLVM
    vectorizes the loop (the run sums with gathers), which flat indexing does not.
    """

    def __init__(self, nest: _Nest, dtype: str, pullback: bool, half: str | None = None) -> None:
        """``half`` (a pullback only): the 16-bit format of ``dy``, read as ``uint16`` bits and
        widened in the kernel; the sums are float32's, and ``dx`` is written rounded once to
        that format (``uint16`` bits) where each element is visited once, else accumulated in
        a float32 ``dx`` that the caller rounds."""
        items = self.items = nest.items
        self.half = half
        levels = _nest_levels(nest)
        self.extents, self.sizes, self.axis_at = levels.extents, levels.sizes, levels.axis_at
        self.pullback = pullback
        self.dtype = dtype
        # The innermost block: the last input loop and the count after it (1 if none).
        self.block_level = len(items) - 1 if items[-1] == _INPUT_AXIS else len(items) - 2
        run = items[-1]
        self.run = run if isinstance(run, int) else 1
        self.copies_level = nest.copies_level if pullback else -1
        copies = items[self.copies_level] if self.copies_level >= 0 else 1
        outer_level = self.outer_level = nest.outer_level if pullback else -1
        outer = items[0] if outer_level == 0 else 1
        assert isinstance(copies, int) and isinstance(outer, int)
        self.copies, self.outer = copies, outer
        self.operator = "+=" if nest.accumulates else "="
        # Element types: dy's and dx's as the kernel sees them, and the sums' (the buffer's).
        self.dy_type = self.dx_type = self.sum_type = dtype
        if half is not None:
            self.dy_type, self.sum_type = "uint16", "float32"
            self.dx_type = "float32" if nest.accumulates else "uint16"
        # A 16-bit pullback summed in float32 slabs of dx (``_half_slabs``): the kernel's dx is
        # the slab, and ``out`` (its parameter) dx's bits.
        self.slabs = half is not None and pullback and _half_slabs(nest)
        # A 16-bit pullback's runs (``run > 1``) are summed from float32 copies of a chunk of
        # the block (widened by a contiguous loop, which vectorizes), in ``wide{copy}``.
        self.widened = half is not None and pullback and self.run > 1
        self.wide_chunk = max(_BUFFER_SIZE // (self.run * self.outer), 1)
        # Better still, where the part of dy under one iteration of the partition loop is
        # small (``_WIDE_REGION`` elements per copy, checked at run time): that whole region
        # widened and its fused outer copies summed elementwise by one contiguous loop, which
        # vectorizes (``region0``), and the float32 kernel's loops for one copy run on it: a
        # quarter of the run sums for four copies, from cache. The float32 sums are those of
        # the float32 kernel in another order (copies first, then runs): the same float32
        # accumulation, within one unit in the last place of the 16-bit result. Only without
        # summed copies (``copies_sum`` reads dy by contiguous loops already).
        first_input = self.axis_at.index(0)
        self.region_level = (
            first_input + 1 if self.widened and self.copies_level < 0 and first_input + 1 <= self.block_level else -1
        )
        self.in_region = self.past_region = False
        self.chunk = max(_BUFFER_SIZE // self.run, 1)  # block loop iterations per buffer fill
        self.long_name, self.short_name = ("dy", "dx") if pullback else ("y", "x")
        # Products of several factors get a name, computed once; literals and single names do not.
        self.long_steps, self.short_steps = levels.long_steps, levels.short_steps
        self.long_names = [f"step{level}" if " * " in step else step for level, step in enumerate(levels.long_steps)]
        self.short_names = [f"stride{axis}" if " * " in step else step for axis, step in enumerate(levels.short_steps)]
        self.writer = SourceWriter()

    def render(self, signature: ShapeSignature) -> KernelSource:
        parameters, buffered = self.body()
        what = "pullback: dx[j] = sum of dy over the copies of x[j]" if self.pullback else "forward: y = repeat(x)"
        if self.half is not None:
            what += f" ({self.half} bits, summed in float32)"
        source = cpu_kernel(signature, parameters, self.writer, f"repeat nest {self.items}, {what}", numpy=buffered)
        if self.half is not None:
            source = KernelSource(half_helpers(source.text, self.half), source.entry)
        return source

    def body(self) -> tuple[list[tuple[str, str]], bool]:
        """Write the kernel's body; its parameters and whether it needs NumPy (a buffer)."""
        writer, extents, block_axis = self.writer, self.extents, self.axis_at[self.block_level]
        long_name, short_name = self.long_name, self.short_name
        writer.line(f"# {long_name} is the C array {_tuple_text(self.sizes)} read flat, {short_name} the C array")
        writer.line(f"# {_tuple_text(extents)}; loop j0 runs over [lo, hi): each thread owns that range of it.")
        for level in range(self.block_level):
            if self.long_names[level] != self.long_steps[level]:
                writer.line(f"{self.long_names[level]} = {self.long_steps[level]}")
        for axis in range(block_axis):
            if self.short_names[axis] != self.short_steps[axis]:
                writer.line(f"{self.short_names[axis]} = {self.short_steps[axis]}")
        buffered = self.copies_level >= 0 and self.run > 1
        if self.widened and self.copies_level < 0:
            for copy in range(self.outer):
                writer.line(f"wide{copy} = np.empty({self.wide_chunk * self.run}, np.float32)  # a chunk of a copy, widened")
        if self.region_level >= 0:
            region = self.long_names[self.region_level - 1]
            writer.line(f"region = {region}  # dy elements under one iteration of the partition loop, per copy")
            writer.line(f"in_region = region <= {_WIDE_REGION}")
            writer.line("region0 = np.empty(region if in_region else 0, np.float32)  # the copies' sum, widened")
        if buffered:
            count = "hi - lo" if block_axis == 0 else extents[block_axis]
            writer.line(
                f"buffer = np.empty({least(str(count), str(self.chunk))} * {self.run}, np.{self.sum_type})  # summed copies of a chunk"
            )
        if self.slabs:
            slab = self.short_names[0]
            writer.line(f"# out holds dx's bits: the slabs of dx of a few j0 at a time (about {SLAB_ELEMENTS}")
            writer.line("# elements) are summed in float32, then written rounded.")
            writer.line(f"rows = 1 if {slab} >= {SLAB_ELEMENTS} or {slab} == 0 else {SLAB_ELEMENTS} // {slab}")
            writer.line(f"dx = np.empty(rows * {slab}, np.float32)  # the slabs of rows j0, summed in float32")
        self.level(0, "0", "0")
        first, second = (long_name, short_name) if self.pullback else (short_name, long_name)
        first_type, second_type = (self.dy_type, self.dx_type) if self.pullback else (self.dtype, self.dtype)
        if self.slabs:
            second, second_type = "out", "uint16"
        parameters = [
            (first, readonly_array(first_type)),
            (second, writable_array(second_type)),
            *((name, INDEX) for name in extents),
            ("lo", INDEX),
            ("hi", INDEX),
        ]
        return parameters, buffered or self.half is not None

    def store(self, target: str, value: str) -> str:
        """The line adding (or assigning) ``value`` into ``target`` of ``dx``: rounded to the
        16-bit format where ``dx`` is its bits."""
        if self.dx_type == "uint16" and self.half is not None:
            return f"{target} = narrow({value})"
        return f"{target} {self.operator} {value}"

    def _bounds(self, axis: int) -> tuple[str, str, str]:
        """``(start, stop, count)`` of input loop ``axis``: the thread's ``[lo, hi)`` for the first."""
        extent = self.extents[axis]
        return ("lo", "hi", "hi - lo") if axis == 0 else ("0", extent, extent)

    def level(self, level: int, long_base: str, short_base: str) -> None:
        """The loop of ``level`` and everything inside it."""
        writer = self.writer
        if level == self.region_level and not self.in_region and not self.past_region:
            with writer.block("if in_region:"):
                for copy in range(self.outer):
                    offset = "0" if copy == 0 else self.long_names[0] if copy == 1 else f"{copy} * {self.long_names[0]}"
                    writer.line(f"first{copy} = np.uintp({_plus(long_base, offset)})")
                with writer.block("for u in range(np.uintp(region)):"):
                    terms = [_read("dy", f"first{copy} + u", True) for copy in range(self.outer)]
                    writer.line(f"region0[u] = {_pairwise(terms)}")
                self.in_region = True
                self.level(level, "0", short_base)
                self.in_region = False
            with writer.block("else:"):
                self.past_region = True
                self.level(level, long_base, short_base)
                self.past_region = False
            return
        if level == self.block_level:
            self.block(long_base, short_base)
            return
        if level == self.copies_level:
            self.copies_sum(long_base, short_base)
            return
        if level == self.outer_level:
            self.level(level + 1, long_base, short_base)  # summed in the block, a stream per copy
            return
        item = self.items[level]
        if isinstance(item, int):
            with writer.block(f"for r{level} in range({item}):"):
                writer.line(f"p{level} = {_plus(long_base, _times(f'r{level}', self.long_names[level]))}")
                self.level(level + 1, f"p{level}", short_base)
            return
        axis = self.axis_at[level]
        index = f"j{axis}"
        if axis == 0 and self.slabs:
            slab = self.short_names[0]
            with writer.block("for c0 in range(lo, hi, rows):"):
                writer.line(f"c1 = {least('c0 + rows', 'hi')}")
                writer.line(f"n0 = np.uintp((c1 - c0) * {slab})")
                with writer.block("for i in range(n0):"):
                    writer.line("dx[i] = np.float32(0)")
                with writer.block("for j0 in range(c0, c1):"):
                    writer.line(f"p{level} = {_plus(long_base, _times(index, self.long_names[level]))}")
                    writer.line(f"q0 = {_times('(j0 - c0)', slab)}")
                    self.level(level + 1, f"p{level}", "q0")
                writer.line(f"at = np.uintp({_times('c0', slab)})")
                with writer.block("for i in range(n0):"):
                    writer.line("out[at + i] = narrow(dx[i])")
            return
        with writer.block(f"for {index} in range({'lo, hi' if axis == 0 else self.extents[axis]}):"):
            writer.line(f"p{level} = {_plus(long_base, _times(index, self.long_names[level]))}")
            writer.line(f"q{axis} = {_plus(short_base, _times(index, self.short_names[axis]))}")
            self.level(level + 1, f"p{level}", f"q{axis}")

    def block(self, long_base: str, short_base: str) -> None:
        """The last input loop and the run after it: a copy per run (forward) or a run sum
        (in a widened region, of the copies' sum: one copy)."""
        writer, run, outer = self.writer, self.run, 1 if self.in_region else self.outer
        widen = self.half is not None and not self.in_region
        long_name, short_name = self.long_name, self.short_name
        axis = self.axis_at[self.block_level]
        index = f"j{axis}"
        start, stop, count = self._bounds(axis)
        run_text = str(run)
        if outer > 1:
            stride = self.long_names[0]
            offsets = ["0", stride] + [f"{copy} * {stride}" for copy in range(2, outer)]
            first, last = _plus(long_base, _times(start, run_text)), _plus(long_base, _times(stop, run_text))
            for copy, offset in enumerate(offsets):
                writer.line(f"dy_block{copy} = dy[{_plus(first, offset)}:{_plus(last, offset)}]")
        elif self.in_region:
            writer.line(f"dy_block = region0[{_plus(long_base, _times(start, run_text))}:{_plus(long_base, _times(stop, run_text))}]")
        else:
            writer.line(
                f"{long_name}_block = {long_name}[{_plus(long_base, _times(start, run_text))}:"
                f"{_plus(long_base, _times(stop, run_text))}]"
            )
        writer.line(f"{short_name}_block = {short_name}[{_plus(short_base, start)}:{_plus(short_base, stop)}]")
        if self.widened and not self.in_region:
            self.widened_block(count)
            return
        with writer.block(f"for {index} in range({count}):"):
            if self.pullback and outer > 1:
                # The fused outer count: the same run of each copy, summed pairwise.
                if run == 1:
                    terms = [_read(f"dy_block{c}", index, widen) for c in range(outer)]
                    writer.line(self.store(f"dx_block[{index}]", _pairwise(terms)))
                else:
                    writer.line(f"k = {index} * {run}")
                    sums = [_pairwise_sum(f"dy_block{c}", "k", 0, run, widen) for c in range(outer)]
                    writer.line(self.store(f"dx_block[{index}]", _pairwise(sums)))
            elif self.pullback:
                if run == 1:
                    writer.line(self.store(f"dx_block[{index}]", _read("dy_block", index, widen)))
                else:
                    writer.line(f"k = {index} * {run}")
                    _emit_run_sum(writer, "dy_block", "k", run, widen)
                    writer.line(self.store(f"dx_block[{index}]", "total"))
            elif run == 1:
                writer.line(f"y_block[{index}] = x_block[{index}]")
            else:
                writer.line(f"value = x_block[{index}]")
                writer.line(f"k = {index} * {run}")
                with writer.block(f"for r in range({run}):"):
                    writer.line("y_block[k + r] = value")

    def widened_block(self, count: str) -> None:
        """The block of a 16-bit pullback with runs: a chunk of the block loop at a time, each
        copy's ``dy`` chunk widened into ``wide{copy}`` by a contiguous loop, then the run sums
        of the float32 kernel (the same expressions, in the same order) from there."""
        writer, run, outer, chunk = self.writer, self.run, self.outer, self.wide_chunk
        index = f"j{self.axis_at[self.block_level]}"
        names = [f"dy_block{copy}" for copy in range(outer)] if outer > 1 else ["dy_block"]
        with writer.block(f"for chunk in range(0, {count}, {chunk}):"):
            writer.line(f"n = {least(f'{count} - chunk', str(chunk))}")
            writer.line(f"first = np.uintp(chunk * {run})")
            for copy, name in enumerate(names):
                with writer.block(f"for u in range(np.uintp(n * {run})):"):
                    writer.line(f"wide{copy}[u] = widen({name}[first + u])")
            writer.line("dx_chunk = dx_block[chunk:chunk + n]")
            with writer.block(f"for {index} in range(n):"):
                writer.line(f"k = {index} * {run}")
                if outer > 1:
                    sums = [_pairwise_sum(f"wide{copy}", "k", 0, run) for copy in range(outer)]
                    writer.line(self.store(f"dx_chunk[{index}]", _pairwise(sums)))
                else:
                    _emit_run_sum(writer, "wide0", "k", run)
                    writer.line(self.store(f"dx_chunk[{index}]", "total"))

    def copies_sum(self, long_base: str, short_base: str) -> None:
        """The count right before the block: ``dy`` holds that many adjacent copies of the
        block (``stride`` apart), one slice each, summed elementwise (contiguous loads) first;
        with a run after the loop, through ``buffer``, a chunk of the block loop at a time."""
        writer, run, copies = self.writer, self.run, self.copies
        widen = self.half is not None
        axis = self.axis_at[self.block_level]
        index = f"j{axis}"
        start, stop, count = self._bounds(axis)
        stride = self.long_names[self.copies_level]
        offsets = ["0", stride] + [f"{copy} * {stride}" for copy in range(2, copies)]

        def slice_copies(begin: str, end: str) -> None:
            for copy, offset in enumerate(offsets):
                writer.line(f"copy{copy} = dy[{_plus(begin, offset)}:{_plus(end, offset)}]")

        def copy_sum(position: str) -> str:
            return _pairwise([_read(f"copy{copy}", position, widen) for copy in range(copies)])

        if run == 1:
            slice_copies(_plus(long_base, start), _plus(long_base, stop))
            writer.line(f"dx_block = dx[{_plus(short_base, start)}:{_plus(short_base, stop)}]")
            with writer.block(f"for {index} in range({count}):"):
                writer.line(self.store(f"dx_block[{index}]", copy_sum(index)))
            return
        chunk = self.chunk
        with writer.block(f"for chunk in range({start}, {stop}, {chunk}):"):
            writer.line(f"n = {least(f'{stop} - chunk', str(chunk))}")
            writer.line(f"width = n * {run}")
            writer.line(f"first = {_plus(long_base, f'chunk * {run}')}")
            slice_copies("first", "first + width")
            with writer.block("for i in range(width):"):
                writer.line(f"buffer[i] = {copy_sum('i')}")
            writer.line(f"dx_block = dx[{_plus(short_base, 'chunk')}:{_plus(short_base, 'chunk + n')}]")
            with writer.block(f"for {index} in range(n):"):
                writer.line(f"k = {index} * {run}")
                _emit_run_sum(writer, "buffer", "k", run)
                writer.line(self.store(f"dx_block[{index}]", "total"))


def _render_nest(signature: ShapeSignature, nest: _Nest, dtype: str, pullback: bool, half: str | None = None) -> KernelSource:
    """The forward (``y`` from ``x``) or pullback (``dx`` from ``dy``) kernel of a nest;
    ``half``: the pullback of a 16-bit format on its bits (:class:`_NestWriter`, its own nest).

    The CPU pullback of a one-count nest ``(s, c, s)`` (see :func:`_pullback_nest`) also
    serves ``(s, c)``, a runtime inner extent of 1: it branches on that extent once, to the
    run sums ``(s, c)``'s own kernel would do, else to the summed copies of the block."""
    if half is not None or not (pullback and _is_one_count(nest.items, 3)):
        return _NestWriter(nest, dtype, pullback, half).render(signature)
    runs = _NestWriter(_Nest(nest.layout, nest.items[:2], nest.groups[:1], nest.total, nest.empty), dtype, True)
    _, runs_buffered = runs.body()
    blocks = _NestWriter(nest, dtype, True)
    parameters, blocks_buffered = blocks.body()
    writer = SourceWriter()
    writer.line("# One kernel for dy of (e0, c, e1) and of (e0, c) (e1 == 1): the run sums for the latter.")
    for header, part in (("if e1 == 1:", runs), ("else:", blocks)):
        with writer.block(header):
            for line in part.writer.text().splitlines():
                writer.line(line)
    what = "pullback: dx[j] = sum of dy over the copies of x[j]"
    description = f"repeat nest {nest.items} (also {nest.items[:2]}), {what}"
    return cpu_kernel(signature, parameters, writer, description, numpy=runs_buffered or blocks_buffered)


def _is_one_count(items: tuple[NestItem, ...], length: int) -> bool:
    """Whether ``items`` is ``(s, c)`` (``length`` 2) or ``(s, c, s)`` (``length`` 3)."""
    return (
        len(items) == length
        and items[0] == _INPUT_AXIS
        and isinstance(items[1], int)
        and (length == 2 or items[2] == _INPUT_AXIS)
    )


@memoized(maxsize=1024)
def _pullback_nest(nest: _Nest) -> _Nest:
    """The nest a CPU pullback kernel is keyed on: ``(s, c)`` (one count, innermost: the
    last axis repeated, or a flattened input) becomes ``(s, c, s)`` with a last input loop
    of no axes (extent 1), so that a repeat along the last axis and along any other share
    one kernel (a U-Net's two upsamples, every rank alike); every other nest is its own.
    The plan's ``accumulates`` stays its own nest's: the shared kernel's ``e1 == 1`` branch
    assigns (correct into zeros as well)."""
    items = nest.items
    if not _is_one_count(items, 2):
        return nest
    return _Nest(nest.layout, (*items, _INPUT_AXIS), (*nest.groups, ()), nest.total, nest.empty)


@memoized(maxsize=256)
def _half_nest_request(nest: _Nest, format: str, target: str = "cpu") -> KernelRequest:
    """The pullback kernel of a nest for a 16-bit ``format`` (read and written as bits); on
    the CPU, of its own kind where it sums in slabs of ``dx`` (:func:`_half_slabs`)."""
    kind = "pullback-half-slabs" if target == "cpu" and _half_slabs(nest) else "pullback-half"
    signature = ShapeSignature("repeat", kind, nest.items, (format,), (len(nest.groups),), target)
    if target == "cuda":
        return KernelRequest(signature, lambda: _render_nest_cuda(signature, nest, "uint16", pullback=True, half=format))
    return KernelRequest(signature, lambda: _render_nest(signature, nest, format, pullback=True, half=format))


def _nest_request(nest: _Nest, dtype: np.dtype[np.generic], kind: str, target: str) -> KernelRequest:
    if kind == "pullback" and target == "cpu":
        nest = _pullback_nest(nest)
    signature = ShapeSignature("repeat", kind, nest.items, (dtype_name(dtype),), (len(nest.groups),), target)
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


def _segments_request(dtype: np.dtype[np.generic], kind: str, unit_inner: bool, target: str) -> KernelRequest:
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


def _render_nest_cuda(signature: ShapeSignature, nest: _Nest, dtype: str, pullback: bool, half: str | None = None) -> KernelSource:
    """The CUDA forward (one thread per ``y`` element) or pullback (one thread per ``dx``
    element, summing its copies) of a nest. ``half`` (a pullback, ``dtype`` ``uint16``): the
    16-bit format whose bits ``dy`` and ``dx`` hold; each copy is widened in registers, summed
    in float32 in the float32 kernel's order and the sum rounded once (``cuda_half_helpers``);
    a single copy moves its bits."""
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
            writer.line("gradient = np.float32(0)" if half else f"gradient = {numba_scalar(dtype)}(0)")
            offset = "base"
            with contextlib.ExitStack() as loops:
                for level in counts:
                    loops.enter_context(writer.block(f"for r{level} in range({items[level]}):"))
                    step = _times(f"r{level}", names[level])
                    if level == counts[-1]:
                        term = f"dy[{_plus(offset, step)}]"
                        writer.line(f"gradient += {f'widen({term})' if half else term}")
                    else:
                        writer.line(f"p{level} = {_plus(offset, step)}")
                        offset = f"p{level}"
            writer.line("dx[j] = narrow(gradient)" if half else "dx[j] = gradient")
        parameters = [("dy", cuda_array_type(dtype)), ("dx", cuda_array_type(dtype))]
        what = "pullback: dx[j] = sum of dy over the copies of x[j]"
    parameters += [*((name, INDEX) for name in extents), ("total", INDEX)]
    if half:
        what += f" ({half} bits, summed in float32, rounded once)"
    source = cuda_kernel(
        signature, parameters, writer, f"repeat nest {nest.items}, {what}",
        index="j" if pullback else "t", setup=setup,
    )
    return KernelSource(cuda_half_helpers(source.text, half), source.entry) if half else source


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
# Plans: one call signature, validated once
# ---------------------------------------------------------------------------------------------


def _flat_input(x: object, dtype: np.dtype[np.generic]) -> ArrayLike:
    """``x`` (an array or a Python scalar) as the flat, C-ordered array of ``dtype`` that a
    kernel reads: one copy at most, made also for an empty output, so an input whose C-ordered
    copy cannot exist (a huge broadcast view) is refused whatever the counts."""
    if type(x) is _NDARRAY and x.dtype is dtype and x.flags.c_contiguous:
        return x.reshape(-1)
    return contiguous(as_array(x, "x")).astype(dtype, copy=False).reshape(-1)


def _check_counts_value(values: tuple[int, ...], name: str) -> None:
    for value in values:
        if value < 0:
            raise ValueError(f"repeat: {name}={values if len(values) > 1 else values[0]} has a negative count")


class _RepeatPlan(Plan):
    """What every repeat plan holds: the input and output, the kernel target, the kernels.
    Kernels compute in native byte order: a ``'>f8'`` input computes as float64, and its
    result is given NumPy's dtype (``'>f8'``, one byte-swapping copy); its tangents are native."""

    def __init__(
        self, op: str, inputs: tuple[InputFacts, ...], out_shape: tuple[int, ...], kernel_entries: frozenset[str]
    ) -> None:
        super().__init__(op, inputs, out_shape=out_shape, kernel_entries=kernel_entries)
        x = inputs[0]
        self.shape = x.shape
        self.size = math.prod(x.shape)
        self.target = x.target
        # NumPy's result keeps a non-native byte order (np.repeat of '>f8' is '>f8')
        self.result_dtype = None if x.dtype == x.native else x.dtype

    def _result(self, y: ArrayLike) -> ArrayLike:
        """The kernels' native-order result in NumPy's result dtype."""
        return y if self.result_dtype is None else y.astype(self.result_dtype)

    def _kinds(self) -> list[str]:
        return ["forward", "pullback"] if self.differentiable else ["forward"]


class NestPlan(_RepeatPlan):
    """A call with static counts (``repeat`` either form, ``tile``): the loop nest, this
    input's extents and the output's shape. The pushforward runs the forward kernel."""

    def __init__(self, op: str, layout: _Layout, x: InputFacts, arguments: str) -> None:
        """``arguments``: the static arguments as the user wrote them (``"reps=(2, 3)"``), for
        messages."""
        try:
            nest = _nest(layout)
        except _NestLimit as error:
            raise ValueError(f"{op}: {arguments} for x of shape {shape_text(x.shape)}: {error}") from None
        out_shape = nest.output_shape(x.shape)
        for extent in out_shape:
            if extent >= _COUNT_LIMIT:
                raise ValueError(f"{op}: the output shape {shape_text(out_shape)} is too large to allocate")
        out_size = checked_size(out_shape, x.native.itemsize, op)
        runs = not nest.empty and (x.target == "cpu" or out_size > 0)
        kinds = ["forward", "pullback", "pushforward"] if x.differentiable else ["forward", "pushforward"]
        super().__init__(op, (x,), out_shape, frozenset(kinds if runs else ()))
        self.nest = nest
        self.out_size = out_size
        self.flat_output = len(out_shape) == 1
        self.extents = nest.extents(x.shape)

    def requests(self) -> list[KernelRequest]:
        if self.nest.empty:
            return []
        return [_nest_request(self.nest, self.out_dtype, kind, self.target) for kind in self._kinds()]

    def _kernel(self, kind: str) -> Kernel | None:
        return None if self.nest.empty else _nest_request(self.nest, self.out_dtype, kind, self.target).get()

    @cached_property
    def _forward_launch(self) -> Callable[..., None]:
        """``launch(x_flat, y_flat)``: the forward kernel (which also pushes tangents forward)."""
        kernel = self._kernel("forward")
        if kernel is None:
            return _launch_nothing
        if self.target == "cuda":
            return functools.partial(_cuda_pair_launch, kernel, self.out_size, self.extents, 1)
        return cpu_launcher(kernel, 2, self.extents, extent=self.extents[0], work=self.out_size)

    def forward(self, arrays: tuple[object, ...]) -> ArrayLike:
        return self._result(self._apply(arrays[0]))  # type: ignore[arg-type]

    def _apply(self, x: ArrayLike) -> ArrayLike:
        dtype = self.out_dtype
        y: ArrayLike = self.namespace.empty(self.out_size, dtype)
        self._forward_launch(_flat_input(x, dtype), y)
        return y if self.flat_output else y.reshape(self.out_shape)

    def pullback(self, saved: object) -> DensePullback | KernelPullback:
        """Checks nothing (the scaffold did): allocates ``dx`` and makes one kernel call (or
        one per thread)."""
        kernel = self._kernel("pullback")
        size, shape, dtype = self.size, self.shape, self.out_dtype
        flat_input = len(shape) == 1
        if kernel is None:
            zeros = self.namespace.zeros

            def empty_output(dy: ArrayLike) -> tuple[object, ...]:
                return (zeros(shape, dtype),)

            return empty_output
        if self.target == "cpu":
            extents = _pullback_nest(self.nest).extents(shape)
            return KernelPullback(
                kernel, extents, self.extents[0], self.out_size, size, dtype, shape, self.nest.accumulates
            )
        launch = functools.partial(_cuda_pair_launch, kernel, size, self.extents, self.nest.total)
        allocate = self.namespace.empty

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            dx: ArrayLike = allocate(size, dtype)
            launch(dy.reshape(-1), dx)
            return (dx if flat_input else dx.reshape(shape),)

        return dense

    def half_requests(self, dtype: np.dtype[np.generic]) -> list[KernelRequest]:
        """The kernels :meth:`half_pullback` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        if self.nest.empty or "pullback" not in self.kernel_entries:
            return []
        return [_half_nest_request(self.nest, dtype.name, self.target)]

    def half_pullback(self, saved: object, dtype: np.dtype[np.generic]) -> DensePullback | None:
        """For a 16-bit ``x`` of ``dtype`` (this plan being its float32 stand-in's, see
        ``stablerules._half``): ``dy -> (dx,)`` (``dy`` native, C-ordered, of ``dtype``), one
        kernel reading ``dy``'s bits, summing in float32 (the float32 kernel's sums, in its
        order) and writing ``dx`` rounded once; where ``dx`` is visited more than once, it
        accumulates in float32 (``x``'s size, not ``dy``'s) and is rounded after. CUDA: one
        thread per ``dx`` element sums its copies (widened) in float32 and rounds once.
        ``None`` where it does not apply (an empty nest)."""
        if self.nest.empty:
            return None
        if self.target == "cuda":
            return self._half_pullback_cuda(dtype)
        from .._half import narrow  # noqa: PLC0415 - _half is loaded with the first 16-bit array

        kernel = _half_nest_request(self.nest, dtype.name).get()
        launch = cpu_launcher(kernel, 2, self.extents, extent=self.extents[0], work=self.out_size)
        size, shape = self.size, self.shape
        accumulates = self.nest.accumulates and not _half_slabs(self.nest)  # else rounded in the kernel's slabs
        uint16 = np.dtype(np.uint16)
        allocate = np.zeros if accumulates else _pool.allocator(size * 2)
        wide = np.dtype(np.float32) if accumulates else uint16

        def pullback(dy: ArrayLike) -> tuple[object, ...]:
            dx: ArrayLike = allocate(size, wide)
            launch(dy.reshape(-1).view(uint16), dx)
            result = narrow(dx, dtype) if accumulates else dx.view(dtype)
            return (result.reshape(shape),)

        return pullback

    def _half_pullback_cuda(self, dtype: np.dtype[np.generic]) -> DensePullback:
        kernel = _half_nest_request(self.nest, dtype.name, "cuda").get()
        size, shape, allocate = self.size, self.shape, self.namespace.empty
        launch = functools.partial(_cuda_pair_launch, kernel, size, self.extents, self.nest.total)
        uint16 = np.dtype(np.uint16)

        def pullback(dy: ArrayLike) -> tuple[object, ...]:
            dx: ArrayLike = allocate(size, uint16)
            launch(dy.reshape(-1).view(uint16), dx)
            return (dx.view(dtype).reshape(shape),)

        return pullback

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        """A ``Fill`` scaled by the number of copies of each element: no array at all."""
        return (Fill(fill.value * self.nest.total, self.shape, self.out_dtype),)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        tangent = tangents[0]
        if isinstance(tangent, DenseCotangent):
            return self._apply(tangent.array)
        if isinstance(tangent, Fill):
            return Fill(tangent.value, self.out_shape, self.out_dtype)
        return tangent


def _launch_nothing(*arrays: object) -> None:
    return None


def _cuda_pair_launch(kernel: Kernel, total: int, extents: tuple[int, ...], work: int, source: ArrayLike, target: ArrayLike) -> None:
    """A nest kernel on CUDA: one thread per element of ``target`` (``total`` of them)."""
    if total > 0:
        cuda_launch(kernel, total, source, target, *extents, total, work=work)


@dataclass(frozen=True, slots=True)
class _SavedCounts:
    """One call's per-element counts: as int64 on ``x``'s device, their offsets, the output."""

    counts: ArrayLike
    offsets: ArrayLike
    total: int
    out_shape: tuple[int, ...]


class CountsPlan(_RepeatPlan):
    """``np.repeat(x, counts, axis)`` with a counts array (data): ``x`` read as ``(outer, n,
    inner)``. The counts' values (and so the output's length) are read per call, on the host,
    as ``np.repeat`` and ``cupy.repeat`` do; the pullback keeps them (``saves_primals``)."""

    saves_primals = True

    def __init__(self, x: InputFacts, axis: int | None, counts: object) -> None:
        shape = x.shape
        if axis is None:
            self.outer, self.length, self.inner = 1, math.prod(shape), 1
            where = f"x has {self.length} elements (shape {shape_text(shape)}, flattened as axis=None)"
        else:
            self.outer, self.length, self.inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
            where = f"x has {self.length} elements along axis {axis} (shape {shape_text(shape)})"
        self.axis = axis
        self.unit_inner = axis is None or axis == len(shape) - 1
        if not (isinstance(counts, ArraySpec) or is_array(counts)):
            raise TypeError(
                f"repeat: repeats must be Val(int) or a 1-D integer array of per-element counts, "
                f"got {type(counts).__name__}"
            )
        if counts.dtype.kind not in "iu":  # before the reader's dtype check: say what repeats holds
            raise TypeError(f"repeat: repeats must hold integers, got an array of dtype {counts.dtype}")
        counts_facts = input_facts(counts, "repeats", "repeat")
        joint_device((x, counts_facts))
        counts_shape = counts_facts.shape
        if len(counts_shape) > 1:
            raise ValueError(f"repeat: repeats must be a 1-D array of counts, got shape {shape_text(counts_shape)}")
        counts_length = math.prod(counts_shape)
        if counts_length not in (1, self.length):
            raise ValueError(f"repeat: repeats has {counts_length} counts but {where}; give {self.length} counts or 1")
        location = [1] * len(shape)
        if axis is not None:
            location[axis] = self.length
        self.counts_shape = tuple(location) if axis is not None else shape  # the counts along x, for a Fill
        out_shape = (0,) if axis is None else shape[:axis] + (0,) + shape[axis + 1 :]  # for an ArraySpec
        kinds = ["forward", "pullback"] if x.differentiable else ["forward"]
        super().__init__("repeat", (x, counts_facts), out_shape, frozenset(kinds))

    def requests(self) -> list[KernelRequest]:
        return [_segments_request(self.out_dtype, kind, self.unit_inner, self.target) for kind in self._kinds()]

    def save(self, arrays: tuple[object, ...]) -> _SavedCounts:
        """Counts, offsets and output shape; every size checked before anything of ``x``'s
        length is allocated (``x`` may be a broadcast view far larger than memory, and one
        count stands for all of them)."""
        values: ArrayLike = arrays[1]  # type: ignore[assignment]
        xp = array_namespace(values)
        flat = values.reshape(-1)
        if flat.size and flat.min() < 0:
            raise ValueError(f"repeat: repeats holds a negative count ({int(flat.min())})")
        if flat.size and int(flat.max()) >= _COUNT_LIMIT:
            raise ValueError(f"repeat: repeats holds a count of {int(flat.max())}, too large to allocate")
        length, axis, shape = self.length, self.axis, self.shape
        if flat.size == 1:
            total = int(flat[0]) * length
        else:
            total_exact = int(flat.max()) * length if length else 0
            total = int(flat.sum(dtype=np.int64)) if total_exact < _COUNT_LIMIT else sum(int(c) for c in flat.tolist())
        out_shape = (total,) if axis is None else shape[:axis] + (total,) + shape[axis + 1 :]
        checked_size(out_shape, self.out_dtype.itemsize, "repeat")
        checked_size((2 * (length + 1),), 8, "repeat: the per-element counts and their offsets")
        counts = xp.ascontiguousarray(xp.broadcast_to(flat.astype(np.int64), (length,)))
        offsets = xp.zeros(length + 1, dtype=np.int64)
        if length:
            offsets[1:] = xp.cumsum(counts)
        return _SavedCounts(counts, offsets, total, out_shape)

    def cotangent_shape(self, saved: object) -> tuple[int, ...]:
        assert isinstance(saved, _SavedCounts)
        return saved.out_shape

    def _launch(self, kind: str, counts: _SavedCounts, source: ArrayLike, target: ArrayLike) -> None:
        kernel = _segments_request(self.out_dtype, kind, self.unit_inner, self.target).get()
        arguments = (counts.offsets, self.outer, self.length, self.inner, counts.total)
        if self.target == "cuda":
            size = target.size
            work = 1 if kind == "forward" else -(-counts.total // max(self.length, 1))
            if size > 0:
                cuda_launch(kernel, size, source, target, *arguments, size, work=work)
            else:
                empty_launch()
            return
        work = self.outer * counts.total * self.inner
        cpu_launch(kernel, source, target, *arguments, extent=self.length, work=work)

    def forward(self, arrays: tuple[object, ...]) -> ArrayLike:
        counts = self.save(arrays)
        y: ArrayLike = self.namespace.empty(counts.out_shape, dtype=self.out_dtype)
        self._launch("forward", counts, _flat_input(arrays[0], self.out_dtype), y.reshape(-1))
        return self._result(y)

    def pullback(self, saved: object) -> DensePullback:
        assert isinstance(saved, _SavedCounts)
        counts = saved
        allocate = self.namespace.empty if self.unit_inner or self.target == "cuda" else self.namespace.zeros
        size, shape, dtype = self.size, self.shape, self.out_dtype

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            dx: ArrayLike = allocate(size, dtype)
            self._launch("pullback", counts, dy.reshape(-1), dx)
            return (dx.reshape(shape), NO_TANGENT)

        return dense

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        """``value * counts[i]`` spread along the axis: of ``x``'s size, not ``dy``'s."""
        assert isinstance(saved, _SavedCounts)
        xp = self.namespace
        dx: ArrayLike = xp.empty(self.shape, dtype=self.out_dtype)
        dx[...] = (xp.asarray(fill.value, dtype=self.out_dtype) * saved.counts).reshape(self.counts_shape)
        return (dx, NO_TANGENT)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        tangent = tangents[0]
        if isinstance(tangent, ZeroTangent):
            return tangent
        counts = self.save(arrays)
        if isinstance(tangent, Fill):
            return Fill(tangent.value, counts.out_shape, self.out_dtype)
        dy: ArrayLike = self.namespace.empty(counts.out_shape, dtype=self.out_dtype)
        self._launch("forward", counts, tangent.array.reshape(-1), dy.reshape(-1))
        return dy


# ---------------------------------------------------------------------------------------------
# repeat
# ---------------------------------------------------------------------------------------------

_ValCounts = Val[int] | Val[tuple[int, ...]]
_StaticCounts = _ValCounts | int | tuple[int, ...]


def _is_static_count(value: object) -> bool:
    return value is None or type(value) is Val or (
        isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    )


class Repeat(RuleOp):
    name = "repeat"
    static_names = ("repeats", "axis", "inner", "outer")
    input_names = ("x", "repeats")

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
        return self.forward(x, repeats, axis, inner=inner, outer=outer)  # type: ignore[return-value]

    def bind(  # type: ignore[override]
        self, x: object, repeats: object = None, axis: object = None, *, inner: object = None, outer: object = None
    ) -> tuple[tuple[object, ...], tuple[object, ...]]:
        if _is_static_count(repeats):
            return (x,), (repeats, axis, inner, outer)
        if isinstance(repeats, (list, tuple)):  # per-element counts given as a list: an array on x's device
            xp = array_namespace(x)
            repeats = xp.asarray(repeats, dtype=np.int64 if len(repeats) == 0 else None)
        return (x, repeats), (None, axis, inner, outer)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        """Validate a ``repeat`` call (either form) and plan it; messages name the arguments."""
        x = input_facts(arrays[0], "x", "repeat")
        repeats, axis, inner, outer = statics
        ndim = len(x.shape)
        if len(arrays) == 1 and repeats is None:
            if axis is not None:
                raise TypeError("repeat: axis goes with repeats (NumPy's form); Julia's form takes inner=/outer=")
            inner_counts = () if inner is None else static_ints(inner, "inner")
            outer_counts = () if outer is None else static_ints(outer, "outer")
            _check_counts_value(inner_counts, "inner")
            _check_counts_value(outer_counts, "outer")
            given = ", ".join(
                f"{name}={value.value if isinstance(value, Val) else value!r}"
                for name, value in (("inner", inner), ("outer", outer))
                if value is not None
            )
            return NestPlan("repeat", _julia_layout(ndim, inner_counts, outer_counts), x, given)
        if inner is not None or outer is not None:
            raise TypeError(
                "repeat: pass either repeats (and axis), as np.repeat, or inner=/outer=, as Julia's "
                "repeat, not both"
            )
        axis_index = None if axis is None else normalize_axis(static_int(axis, "axis"), max(ndim, 1), "repeat: axis")
        if ndim == 0:
            axis_index = None  # NumPy reads a 0-d x as 1-d: axis 0 (or -1) repeats it as axis=None does
        if len(arrays) == 1:
            if isinstance(repeats, Val) and (not isinstance(repeats.value, int) or isinstance(repeats.value, bool)):
                raise TypeError(
                    f"repeat: repeats must be Val(int) or a 1-D integer array of per-element counts, "
                    f"got {repeats!r}; for counts per axis use inner={repeats!r}"
                )
            count = static_int(repeats, "repeats")
            _check_counts_value((count,), "repeats")
            return NestPlan("repeat", _numpy_layout(ndim, count, axis_index), x, f"repeats={count}")
        return CountsPlan(x, axis_index, arrays[1])


repeat = Repeat()


# ---------------------------------------------------------------------------------------------
# tile
# ---------------------------------------------------------------------------------------------


class Tile(RuleOp):
    name = "tile"
    static_names = ("reps",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], reps: _StaticCounts) -> npt.NDArray[_DT]:
        """Construct an array by repeating ``x`` the number of times given by ``reps``
        (``np.tile``): ``reps`` is ``Val(int)`` or ``Val(tuple)``, static; when it is longer
        than ``x.ndim`` new axes are leading, when shorter it is padded with leading 1s.

        Rules: ``back(dy)`` returns ``(dx, NoTangent())``, ``dx`` the sum of ``dy`` over the
        tiles (a ``Fill`` cotangent gives a ``Fill``).
        """
        return self.forward(x, reps)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        """Validate a ``tile`` call and plan it."""
        x = input_facts(arrays[0], "x", "tile")
        counts = static_ints(statics[0], "reps")
        if any(count < 0 for count in counts):
            raise ValueError(f"tile: reps={counts} has a negative count")
        given = statics[0].value if isinstance(statics[0], Val) else statics[0]
        return NestPlan("tile", _tile_layout(len(x.shape), counts), x, f"reps={given!r}")


tile = Tile()


# ======================================================================================
# Kernel export: what an engine that runs our kernels itself (the JAX adapter's XLA FFI
# handlers) needs of repeat, through these two functions only
# ======================================================================================


class JuliaForm(NamedTuple):
    """A planned repeat/tile call with static counts in Julia's form: ``x`` reshaped to
    ``shape`` (input axes merged or padded: a free reshape), then each axis ``d`` repeated
    ``inner[d]`` times element-wise and tiled ``outer[d]`` times; the result has
    ``out_shape``."""

    shape: tuple[int, ...]
    inner: tuple[int, ...]
    outer: tuple[int, ...]
    out_shape: tuple[int, ...]


def export_julia_form(plan: Plan, x_shape: tuple[int, ...]) -> JuliaForm | None:
    """The Julia form of a plan of ``repeat`` or ``tile`` (from ``op.plan(*op.bind(...))``)
    on an input of ``x_shape``; ``None`` for a plan that is no loop nest (per-element
    counts, which are data)."""
    if not isinstance(plan, NestPlan):
        return None
    layout = plan.nest.layout
    shape = tuple(math.prod(x_shape[axis] for axis in axes) for axes in layout.axes)
    return JuliaForm(shape, layout.inner, layout.outer, plan.out_shape)


class NestKernel(NamedTuple):
    """The CPU kernel of a Julia-form nest: ``kernel(source, target, *extents, lo, hi)``,
    extent ``k`` being the product of the input's axes ``groups[k]`` and ``lo, hi`` the range
    ``0, extents[0]`` of the outermost loop. ``request`` is ``None`` when a count is 0 (an
    empty output, a zero gradient); ``accumulates``: the pullback adds into a zeroed ``dx``."""

    request: KernelRequest | None
    groups: tuple[tuple[int, ...], ...]
    accumulates: bool


def export_nest_kernel(inner: tuple[int, ...], outer: tuple[int, ...], dtype: np.dtype[np.generic], kind: str) -> NestKernel:
    """The CPU kernel (``kind``: ``"forward"`` or ``"pullback"``) of Julia's
    ``repeat(x, inner, outer)`` with one count per axis of ``x``, for ``dtype``."""
    nest = _nest(_julia_layout(len(inner), inner, outer))
    request = None if nest.empty else _nest_request(nest, dtype, kind, "cpu")
    groups = _pullback_nest(nest).groups if kind == "pullback" else nest.groups
    return NestKernel(request, groups, nest.accumulates)


# --- engine facts (stablerules._facts) -------------------------------------------------------

# Below these many result elements torch's own backward beats the round trip to our kernel
# (measured; the crossovers are in the benchmark notes): repeat's of a single
# ``repeat_interleave`` (one reduction of a view; several steps or a list of counts: ours
# wins), tile's (one reduction of a view); a 1-axis tile by one count at every size.
REPEAT_TORCH_BELOW = 1024
TILE_TORCH_BELOW = 1024
# Below this many result elements a nearest-neighbour upsample (Julia's inner counts on the
# trailing axes of an (N, C, ...) input) runs torch's ``F.interpolate``, forward and backward
# (``Namespace.upsampler``), against our doubling copies and kernel. Fwd + bwd of
# inner=(1, 1, 2, 2), batch 4, 32 channels, one thread, alone: 8x8 interpolate 114-118 us
# against ours 140-151 (float32), 104-122 against 157-180 (bfloat16); 16x16 (131,072 result
# elements) ours 303-327 against 435-443 (float32), even in bfloat16 (282-334 against 310-331).
# Inside the U-Net's step each of our calls costs more than alone (its 8x8 upsample: forward
# 124-162 us against interpolate's 64-86), so the bound sits at the 16x16 signature
# (bench/README.md, round 16).
UPSAMPLE_TORCH_BELOW = 1 << 17


def _one_repeat_interleave(statics: _facts.Statics, shapes: _facts.Shapes) -> bool:
    repeats = _facts.value(statics("repeats", None))
    if repeats is not None:
        return type(repeats) is int
    inner, outer = _facts.counts(statics("inner", None)), _facts.counts(statics("outer", None))
    return sum(count != 1 for count in inner) == 1 and all(count == 1 for count in outer)


def _nearest_upsample(statics: _facts.Statics, shapes: _facts.Shapes) -> bool:
    """Julia's inner counts alone on an ``(N, C, ...)`` input of 3 to 5 axes, N and C counts 1,
    the others 1, 2, 4 or 8 (torch's ``F.interpolate`` in ``"nearest"`` mode does it exactly;
    torch's eager ``Namespace.upsampler`` checks that again with the dtype and the extents,
    and the forward repeats per axis where it does not hold)."""
    if _facts.value(statics("repeats", None)) is not None or any(count != 1 for count in _facts.counts(statics("outer", None))):
        return False
    inner = _facts.counts(statics("inner", None))
    ndim = len(shapes[0])
    if not 3 <= ndim <= 5 or len(inner) > ndim:
        return False
    inner = inner + (1,) * (ndim - len(inner))
    spatial = inner[2:]
    return inner[0] == 1 and inner[1] == 1 and any(count != 1 for count in spatial) and all(count in (1, 2, 4, 8) for count in spatial)


def _one_axis_tile(statics: _facts.Statics, shapes: _facts.Shapes) -> bool:
    """A tile of a 1-axis input by one count: torch's backward sums one contiguous view."""
    return len(shapes[0]) == 1 and len(_facts.counts(statics("reps", None))) == 1


def _repeat_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    if statics("repeats", None) is not None:
        return _facts.others(ndim, _facts.axes(statics("axis", None), ndim))
    inner, outer = _facts.counts(statics("inner", None)), _facts.counts(statics("outer", None))
    return [
        ((axis,), axis)
        for axis in range(ndim)
        if (inner[axis] if axis < len(inner) else 1) == 1 and (outer[axis] if axis < len(outer) else 1) == 1
    ]


def _tile_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    reps = _facts.counts(statics("reps", None))
    length = max(ndim, len(reps))
    padded = (1,) * (length - len(reps)) + reps
    shift = length - ndim
    return [((axis,), axis + shift) for axis in range(ndim) if padded[axis + shift] == 1]


def _batch_repeat(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """repeat under a batch axis: Julia's form counts 1 for it; NumPy's flattened form
    flattens each sample; otherwise the axis shifts."""
    if call.static("repeats") is None:
        changes: dict[str, object] = {
            name: Val((1, *_facts.counts(call.static(name)))) for name in ("inner", "outer") if call.static(name) is not None
        }
        return ops.forward(call.replace(**changes), arrays)
    axis = _facts.value(call.static("axis"))
    if axis is None:
        return ops.forward(call.replace(axis=Val(1)), _facts.flattened(ops, arrays, size))
    return ops.forward(call.replace(axis=Val(_facts.shifted(cast("int", axis)))), arrays)


def _batch_tile(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """tile under a batch axis: a count of 1 for it (NumPy's new leading axes of ``reps``
    go after the batch axis)."""
    (x,) = arrays
    reps = _facts.counts(call.static("reps"))
    shape = ops.shape(x)
    ndim = len(shape) - 1
    if len(reps) > ndim:
        x = ops.reshape(x, (size, *(1,) * (len(reps) - ndim), *shape[1:]))
        return ops.forward(call.replace(reps=Val((1, *reps))), (x,))
    return ops.forward(call.replace(reps=Val((1,) * (ndim - len(reps) + 1) + reps)), (x,))


def _forward_repeat(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    """``np.repeat`` per axis with a count (in torch ``repeat_interleave``: faster than one
    copy of an ``expand``, and than ``F.interpolate``, for a nearest-neighbour upsample);
    Julia's form by :func:`_julia`."""
    (x,) = arrays
    repeats = _facts.value(call.static("repeats"))
    if repeats is None:  # Julia's inner/outer form
        return (_julia(xp, x, _facts.counts(call.static("inner")), _facts.counts(call.static("outer"))),)
    along = _facts.value(call.static("axis"))
    times = cast("int | tuple[int, ...]", repeats if isinstance(repeats, int) else tuple(cast("tuple[int, ...]", repeats)))
    if along is None:
        return (xp.repeat(xp.reshape(x, (-1,)), times, 0),)
    return (xp.repeat(x, times, cast("int", along)),)


def _julia(xp: _facts.Namespace[_A], x: _A, inner: tuple[int, ...], outer: tuple[int, ...], one_op: bool = True) -> _A:
    """Julia's ``repeat(x; inner, outer)``. Inner counts alone: a ``repeat`` per axis (as fast
    as an ``expand`` for one or two axes, and faster for a nearest upsample), the last axis
    first: its copy, whose runs are the shortest, then runs on the smallest array, and the
    others copy longer runs (torch, one thread, ``inner=(1, 1, 2, 2)`` of a (4, 32, 16, 16)
    float64 input: 197 -> 134 us with ``repeat_interleave``, 65 -> 51 us in float32 with the
    eager doubling form; the repeats commute, the result is the same). Inner and outer
    counts together: one broadcast of each axis as ``(outer, n, inner)`` and one ``reshape``,
    a single copy of the result (a ``repeat`` per axis and then a ``tile`` copy it once per
    step), after the last axis's inner count of 2-16 is applied to the input where the result
    is large (a copy whose innermost run is one element repeated a few times is 2-2.5x slower
    than one of whole rows); exact either way, and plain engine ops that a compiler traces
    with symbolic sizes (the size check guards only on its side of the bound). Where the
    engine's autodiff records the forward of a 16-bit input (``Namespace.single_sum``), inner
    counts on several axes take the one broadcast too, and no pass comes first: one sum in
    its backward, rounded once. Inner counts alone that the engine does in one op of its own
    (``Namespace.upsampler``: torch's eager ``F.interpolate`` for a small nearest upsample
    whose pullback is torch's) take that op, before any other form (``one_op=False``: a
    caller that has asked once for the signature, and was told none)."""
    x_shape = xp.shape(x)
    n = max(len(x_shape), len(inner), len(outer))
    y = xp.reshape(x, (*x_shape, *(1,) * (n - len(x_shape)))) if n > len(x_shape) else x
    repeats_inner = any(count != 1 for count in inner)
    repeats_outer = any(count != 1 for count in outer)
    upsample = _upsampler(xp, y, inner, outer) if one_op else None
    if upsample is not None:  # the engine's one op (torch's eager nearest upsample)
        return upsample(y)
    # Where the engine's autodiff records this forward and rounds a 16-bit gradient after
    # each op's sum (``Namespace.single_sum``), inner counts on several axes are one
    # broadcast too, without the input's pass: a single sum, rounded once.
    single = repeats_inner and sum(count != 1 for count in inner) + repeats_outer > 1 and xp.single_sum(y)
    if repeats_inner and (repeats_outer or single):
        inner = inner + (1,) * (n - len(inner))
        outer = outer + (1,) * (n - len(outer))
        if not single and 2 <= inner[-1] <= _SHORT_RUN and _worth_a_pass(x_shape, inner, outer):
            # The last axis's inner count first, on the (small) input: the one broadcast copy
            # then moves whole rows instead of each element a few times (W3's forward in
            # torch, float64, one thread: 1.09 ms -> 0.61 ms; see the benchmark notes).
            y = xp.repeat(y, inner[-1], n - 1)
            inner = (*inner[:-1], 1)
        shape = xp.shape(y)
        spread = xp.reshape(y, [k for m in shape for k in (1, m, 1)])
        wide = xp.broadcast_to(spread, [k for m, i, o in zip(shape, inner, outer) for k in (o, m, i)])
        return xp.reshape(wide, [m * i * o for m, i, o in zip(shape, inner, outer)])
    for axis in range(len(inner) - 1, -1, -1):  # the last axis first: see the docstring
        if inner[axis] != 1:
            y = xp.repeat(y, inner[axis], axis)
    if repeats_outer:
        y = xp.tile(y, (*outer, *(1,) * (n - len(outer))))
    return xp.fresh(y, x)


# Julia's form with inner and outer counts: a last-axis inner count up to this many is applied
# to the input first (a longer run of one element copies as fast as a row), when the result
# has at least _PASS_ELEMENTS elements (below, the extra op costs more than it saves).
_SHORT_RUN = 16
_PASS_ELEMENTS = 4096


def _upsampler(xp: _facts.Namespace[_A], x: _A, inner: tuple[int, ...], outer: tuple[int, ...]) -> Callable[[_A], _A] | None:
    """The engine's one op for Julia's inner counts alone on ``x`` (``Namespace.upsampler``),
    or ``None``: outer counts, no count, more counts than axes, or none the engine has."""
    ndim = len(xp.shape(x))
    if len(inner) > ndim or all(count == 1 for count in inner) or any(count != 1 for count in outer):
        return None
    return xp.upsampler(x, inner + (1,) * (ndim - len(inner)))


def _worth_a_pass(shape: tuple[int, ...], inner: tuple[int, ...], outer: tuple[int, ...]) -> bool:
    """Whether the result is large enough for the input's extra pass. Under ``torch.compile``
    with symbolic sizes the comparison is a guard on which side of the bound the sizes lie
    (one graph each side, never one per size)."""
    size = 1
    for extent in (*shape, *inner, *outer):
        size *= extent
    return size >= _PASS_ELEMENTS


def _prepared_repeat(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    """An upsample's ``repeat`` with its statics read once (an integer count, or Julia's form);
    inner counts the engine upsamples in one op (``Namespace.upsampler``) take that op, chosen
    once for the signature (its rank, dtype and shape are the choice's inputs)."""
    times, axis = _facts.value(call.static("repeats")), _facts.value(call.static("axis"))
    if times is None:  # Julia's inner/outer form
        inner, outer = _facts.counts(call.static("inner")), _facts.counts(call.static("outer"))
        upsample = _upsampler(xp, arrays[0], inner, outer)
        if upsample is not None:  # the signature fixes what the choice reads
            return lambda arrays: (upsample(arrays[0]),)
        return lambda arrays: (_julia(xp, arrays[0], inner, outer, one_op=False),)
    if type(times) is not int:
        return None
    count: int = times
    if axis is None:
        return lambda arrays: (xp.repeat(xp.reshape(arrays[0], (-1,)), count, 0),)
    dim = cast("int", axis)
    return lambda arrays: (xp.repeat(arrays[0], count, dim),)


def _forward_tile(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    """``np.tile``, whose new leading axes (``reps`` longer than ``x``'s axes) are made a
    reshape of ``x`` first, so the engine's tile adds none: torch's ``Tensor.tile`` backward
    sums each new leading axis apart and rounds a 16-bit gradient after each sum (848 units in
    the last place of bfloat16 off the float64 gradient rounded once, where the sum cancels:
    ``tile((3, 3), (2, 2, 2))``). With every axis there, its backward is one float32 sum over
    the tiled axes, rounded once, as SPEC section 15 asks of a pullback that adds. The result
    is the same array."""
    (x,) = arrays
    reps = _facts.counts(call.static("reps"))
    shape = xp.shape(x)
    if len(reps) > len(shape):
        x = xp.reshape(x, (*(1,) * (len(reps) - len(shape)), *shape))
    return (xp.fresh(xp.tile(x, reps), arrays[0]),)


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "repeat": _facts.EngineFacts(
        _facts.TorchFacts(
            "Tensor.repeat_interleave / Tensor.repeat (eager: a doubling of short runs as two Tensor.copy_)", "kernel", _facts.KERNEL,
            (
                _facts.EngineForm(
                    "a nearest-neighbour upsample (inner counts of 2, 4 or 8 on the trailing axes of an (N, C, ...) input:"
                    " F.interpolate's nearest mode, forward and backward)", _nearest_upsample, UPSAMPLE_TORCH_BELOW,
                    forward="F.interpolate(mode='nearest') in eager mode (a real floating input), else Tensor.repeat_interleave",
                ),
                _facts.EngineForm("a single repeat_interleave (an integer count, or one inner count)", _one_repeat_interleave, REPEAT_TORCH_BELOW),
            ),
            compiled_below=_facts.COMPILED_BELOW,
        ),
        _repeat_shards,
        _batch_repeat,
        forward=_forward_repeat,
        prepared=_prepared_repeat,
    ),
    "tile": _facts.EngineFacts(
        _facts.TorchFacts(
            "Tensor.tile", "kernel", _facts.KERNEL,
            (
                _facts.EngineForm("a 1-axis input tiled by one count", _one_axis_tile),
                _facts.EngineForm("any reps", lambda statics, shapes: True, TILE_TORCH_BELOW),
            ),
            compiled_below=_facts.COMPILED_BELOW,
        ),
        _tile_shards,
        _batch_tile,
        forward=_forward_tile,
    ),
}
