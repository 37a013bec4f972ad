"""The indexing family: ``getindex`` (a static basic index, ``sr.ix``), ``take``,
``take_along_axis`` and ``index_add``.

getindex: NumPy's view, and a one-pass pullback
-----------------------------------------------
``sr.ix[...]`` is a :class:`StaticIndex`: ints (negative allowed), slices with any step,
``None`` and ``...``, validated when it is written and hashable, so it keys plans and kernels
as a ``Val`` does. ``getindex(x, sr.ix[...])`` is ``x[...]``: NumPy's own view (no kernel).
Its pullback writes ``dx`` in one pass over ``dx``'s memory: each element is either the
cotangent entry it was selected as or zero. There is no zero fill followed by a scatter, and
no atomics on any device: the selection is a product of per-axis arithmetic progressions,
known when the plan is built. The kernel's static signature is the *pattern* of the loop nest
(per axis of ``x``: ``full``, ``point`` or ``range``, the trailing run of fully selected axes
merged into one contiguous level); extents, positions, starts, steps and counts are run-time
arguments, so shapes share kernels (one kernel per pattern and floating dtype; the innermost
copies use unsigned indices, so LLVM emits no negative-index wraparound code in them). A
4-byte dtype whose last axis takes every other element of an even extent (``sr.ix[..., ::2]``,
``1::2``, ``::-2``) writes that axis as 64-bit units, one per pair of elements: the selected
half holds the cotangent's bits, the other half zero (little-endian: the low half is the even
offset), so each row is one unit store per selected element instead of a zero fill and a
strided store; other dtypes, steps and odd
extents take the element loop of the same kernel. When
the selection covers all of ``x`` (``sr.ix[...]``,
``sr.ix[::-1]``, an int on an axis of length 1) the pullback is a view of the cotangent and a
``Fill`` cotangent gives a ``Fill``.

take, take_along_axis, index_add: deterministic scatter-adds
-------------------------------------------------------------
``x`` is read as ``(outer, n, inner)`` around the indexed axis (``axis=None``: the flattened
array, ``outer = inner = 1``). The gathers (``take``'s forward and pushforward, the ``values``
tangent of ``index_add``) copy rows of ``inner`` elements, as unsigned integers of the dtype's
size. The scatter-adds (``take``'s pullback and ``index_add``'s forward) need no sort on the
CPU: ``dst``'s rows are cut into parts, one per thread (of about equal cost, rows written
plus twice the terms added, from a count of the indices per bin of rows: the ``balance``
kernel), and each part first writes all its rows (zeros for a pullback, a copy of ``x`` for
``index_add``: one contiguous pass, so ``dx`` is written once, page faults included, by the
thread that owns it, with no separate zero fill), then scans the indices in increasing
``t`` and adds ``src[o, t]`` to each of its rows ``w[t]`` (the cotangent read in address
order). Every output element is written by one thread with its terms in increasing ``t``:
the bits are the same on every run and for every thread count, and equal those of
``np.add.at`` (which adds in index order) on zeros or on a copy of ``x``. Each part reads
all of ``indices`` (an O(m) integer scan per part and outer slab). ``sorted=Val(True)``
(indices non-decreasing after wrapping) replaces the scan by two bisections per part (its
``t`` range); ``unique=Val(True)`` needs no other kernel on the CPU (the scan is already one
pass), its promise is still checked. Promises are checked on every call before any kernel
runs (``ValueError`` naming the first offending position); the check costs an O(m) pass
(``sorted``) or an O(n + m) count (``unique`` alone).

``take_along_axis``'s pullback needs no scan: ``indices`` has the output's shape, so the
pullback walks ``dx`` by its outer rows (one thread each): it zeroes the row's ``n * inner``
elements and adds the row's ``m * inner`` cotangent entries in ``t`` order, in cache.

On CUDA the positions are sorted by index, stably, in parallel: ``ceil(log2 m)`` merge
passes of doubling run width (each thread places one position by a bisection in the partner
run; the keys ``(w[t], t)`` are distinct, so the order is the CPU's increasing ``t`` per
index), then one bisection per row gives the bucket offsets; each ``dx`` element is summed
by the one thread that owns it. ``take(..., deterministic=Val(False))`` instead adds the
cotangent with atomics into zeros (faster on a GPU, not bitwise reproducible).
``take_along_axis``'s CUDA pullback is a gather over ``t``.

Decisions where NumPy is silent or where we differ
--------------------------------------------------
- ``getindex`` returns a 0-d view where NumPy returns a scalar (an int on every axis), as
  ``flip`` does. ``sr.ix`` refuses arrays, lists and bools (advanced indexing is ``take``),
  a zero step (``ValueError``, as Python's ``slice.indices``) and two ellipses (``IndexError``,
  as NumPy); an entry NumPy refuses too (a float such as ``sr.ix[0, 0.0]``, a string) is
  NumPy's ``IndexError`` naming the entry, and one that NumPy reads as advanced indexing (an
  array, a list, a bool) a ``TypeError`` pointing at ``take``; an int out of range or too
  many indices are ``IndexError``s, as NumPy's.
- Indices: any integer dtype (``uint64`` too); float indices raise NumPy's exception
  (``TypeError`` for ``take``/``index_add``, ``IndexError`` for ``take_along_axis``); *bool*
  indices, which ``np.take`` silently reads as 0 and 1, are a ``TypeError`` (a mask is not a
  list of positions). Out of range is an ``IndexError`` naming the index, the axis and its
  length. Integer ``indices`` get ``NoTangent()``.
- ``take_along_axis`` broadcasts ``x`` and ``indices`` against each other on the axes other
  than ``axis``, both ways, as NumPy 2 does (``x`` of shape ``(3, 4, 1)`` and ``indices`` of
  ``(1, 2, 5)`` along axis 1 give ``(3, 2, 5)``). Where an extent 1 of ``x`` meets a larger
  one, the kernels read a C-ordered copy of ``x`` broadcast (one copy, of the output's extents
  with ``x``'s along ``axis``) and the pullback scatter-adds into a ``dx`` of that shape, then
  sums it over the broadcast axes (the adjoint of a broadcast); otherwise there is no copy and
  no sum. Promises are ``take``'s only (``take_along_axis``'s pullback has no sort).
- ``index_add`` keeps ``x``'s dtype (``values`` cast as ``np.add.at`` casts, ``same_kind``);
  a bool ``x`` is a ``TypeError``; the result keeps ``x``'s byte order (``'>f8'`` stays
  ``'>f8'``, as ``np.add.at`` on a copy). ``dx`` is ``dy`` itself (no copy; one copy where
  ``dy`` is read-only, since tangents are writable); ``dvalues`` is ``take(dy, indices,
  axis)`` summed over the axes along which ``values`` was broadcast.
- The pullbacks of ``take``, ``take_along_axis`` and ``index_add`` read the indices' values
  (``saves_primals``) and only the shapes and dtypes of ``x`` and ``values``
  (``saved_inputs``): their ``sr.pullback`` takes ``ArraySpec``s for ``x`` and ``values``,
  and needs an array for ``indices``.
"""

from __future__ import annotations

import functools
import math
import operator
import types as pytypes
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, SupportsIndex, TypeAlias, TypeVar, cast, final

import numpy as np
import numpy.typing as npt

from .._memo import memoized
from .. import _parallel, _pool
from .._arrays import (
    ArrayLike,
    ArraySpec,
    InputFacts,
    array_namespace,
    as_array,
    checked_size,
    input_facts,
    normalize_axis,
    shape_text,
    static_bool,
    shareable,
    static_int,
    writable,
)
from .._codegen import INDEX, SourceWriter, cpu_kernel, emit_copy, greatest, least, readonly_array, writable_array
from .._cuda import cuda_array_type, cuda_kernel
from .._guards import COUNTERS
from .._key import Kernel, KernelSource, ShapeSignature
from .._launch import cpu_launch, cuda_launch, empty_launch
from .._op import KernelRequest
from .._plan import DensePullback, KernelPullback, Plan
from .._results import NO_TANGENT
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill, ZeroTangent
from .._units import UNITS, as_units, cuda_half_helpers, half_helpers
from .._val import Val
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)
_ShapeT = TypeVar("_ShapeT", bound=tuple[int, ...])

Shape: TypeAlias = tuple[int, ...]
DType: TypeAlias = np.dtype[np.generic]
_Slice: TypeAlias = "slice[int | None, int | None, int | None]"
Entry: TypeAlias = "int | _Slice | None | pytypes.EllipsisType"

_INTP: DType = np.dtype(np.intp)
_NOTHING = ZeroTangent()


def _unit_of(dtype: DType) -> tuple[DType, int]:
    """The unsigned integer type a copy moves ``dtype``'s bits as, and units per element."""
    return UNITS[min(dtype.itemsize, 8)], max(dtype.itemsize // 8, 1)


def _flat(array: ArrayLike, dtype: DType) -> ArrayLike:
    """``array`` as a flat C-contiguous array of ``dtype`` (a view when it already is one)."""
    xp = np if isinstance(array, np.ndarray) else array_namespace(array)
    flat: ArrayLike = xp.ascontiguousarray(array, dtype=dtype).reshape(-1)
    return flat


def _emit_copy(writer: SourceWriter, target: str, source: str, count: str) -> None:
    """``dst[target + t] = src[source + t]`` for ``t < count`` (:func:`emit_copy`)."""
    emit_copy(writer, target, source, count, dst="dst", src="src")


def _emit_zero(writer: SourceWriter, target: str, count: str) -> None:
    writer.line(f"into = np.uintp({target})")
    with writer.block(f"for t in range(np.uintp({count})):"):
        writer.line("dst[into + t] = 0")


# ======================================================================================
# sr.ix: the static basic index
# ======================================================================================

# Entry codes in a StaticIndex's key: (kind, ...) flattened into one tuple of ints.
_INT, _SLICE, _NEWAXIS, _ELLIPSIS = 0, 1, 2, 3


def _check_entry(entry: object, position: int) -> Entry:
    if entry is None or entry is Ellipsis:
        return entry
    if isinstance(entry, (bool, np.bool_)):
        raise TypeError(
            f"index: entry {position} is a bool ({entry!r}); a static index takes ints, slices, "
            f"None and ...; a boolean mask is advanced indexing"
        )
    if isinstance(entry, (int, np.integer)):
        return int(entry)
    if isinstance(entry, slice):
        parts = []
        for name in ("start", "stop", "step"):
            value = getattr(entry, name)
            if value is not None and (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))):
                raise TypeError(
                    f"index: entry {position} is a slice whose {name} is {type(value).__name__} "
                    f"({value!r}); slice bounds must be ints or None"
                )
            parts.append(None if value is None else int(value))
        if parts[2] == 0:
            raise ValueError(f"index: entry {position} is a slice with step 0 (slice step cannot be zero)")
        return slice(*parts)
    kind = type(entry).__name__
    if isinstance(entry, (list, tuple)) or hasattr(entry, "__array__") or hasattr(entry, "__array_interface__"):
        # Valid in NumPy (advanced indexing), not a static index: a TypeError pointing at take.
        raise TypeError(
            f"index: entry {position} is {kind} ({entry!r}); only integers, slices (`:`), ellipsis "
            f"(`...`) and None (numpy.newaxis) are valid static indices (for an array of indices use "
            f"sr.take or sr.take_along_axis)"
        )
    if isinstance(entry, SupportsIndex):  # an integer type of another library (``__index__``), as NumPy reads it
        return operator.index(entry)
    # What NumPy refuses as an index (a float, a string, any other object): its IndexError.
    raise IndexError(
        f"index: entry {position} is {kind} ({entry!r}); only integers, slices (`:`), ellipsis "
        f"(`...`) and None (numpy.newaxis) are valid static indices"
    )


Slices: TypeAlias = "_Slice | pytypes.EllipsisType | tuple[_Slice | pytypes.EllipsisType, ...]"
"""To the type checker: the key of a ``StaticIndex`` of slices and ``...`` only (it keeps the
rank): ``StaticIndex[Slices]``."""

Basic: TypeAlias = object
"""To the type checker: the key of any ``StaticIndex`` (ints, slices, ``None``, ``...``):
``StaticIndex[Basic]``."""

_Key = TypeVar("_Key", covariant=True)
_NewKey = TypeVar("_NewKey")


@final
class StaticIndex(Generic[_Key]):
    """A static basic index, written ``sr.ix[...]``: ints (negative allowed), slices with any
    step, ``None`` and ``...``. Frozen and hashable; part of a plan's key as a ``Val`` is.
    ``entries`` holds the index as a tuple (slices with Python-int bounds). Its type parameter
    is for the type checker only: the key's own type as written, ``sr.ix[0, :, None]`` a
    ``StaticIndex[tuple[int, slice[None, None, None], None]]``, from which getindex's result
    type counts the rank (``ndim(x)`` minus the ints plus the ``None`` entries, for indices of
    up to three entries; longer ones give an untracked rank). ``StaticIndex[Slices]`` is one of
    slices and ``...`` only, ``StaticIndex[Basic]`` any."""

    __slots__ = ("entries", "key")

    entries: tuple[Entry, ...]
    key: Val[tuple[int, ...]]

    def __init__(self, entries: _Key) -> None:
        given = entries if isinstance(entries, tuple) else (entries,)
        checked = tuple(_check_entry(entry, position) for position, entry in enumerate(given))
        if sum(entry is Ellipsis for entry in checked) > 1:
            raise IndexError("index: an index can only have a single ellipsis ('...')")
        code: list[int] = []
        for entry in checked:
            if entry is None:
                code.append(_NEWAXIS)
            elif entry is Ellipsis:
                code.append(_ELLIPSIS)
            elif isinstance(entry, int):
                code += [_INT, entry]
            else:
                assert isinstance(entry, slice)
                bounds = (entry.start, entry.stop, entry.step)
                flags = sum(1 << k for k, value in enumerate(bounds) if value is not None)
                code += [_SLICE, flags, *(0 if value is None else value for value in bounds)]
        object.__setattr__(self, "entries", checked)
        object.__setattr__(self, "key", Val(tuple(code)))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("StaticIndex is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("StaticIndex is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StaticIndex):
            return NotImplemented
        return self.key == other.key

    def __hash__(self) -> int:
        return hash((StaticIndex, self.key))

    def __reduce__(self) -> tuple[type[StaticIndex[object]], tuple[tuple[Entry, ...]]]:
        return (StaticIndex, (self.entries,))

    def __repr__(self) -> str:
        def text(entry: Entry) -> str:
            if entry is None:
                return "None"
            if entry is Ellipsis:
                return "..."
            if isinstance(entry, int):
                return str(entry)
            assert isinstance(entry, slice)
            start = "" if entry.start is None else str(entry.start)
            stop = "" if entry.stop is None else str(entry.stop)
            return f"{start}:{stop}" + ("" if entry.step is None else f":{entry.step}")

        inner = ", ".join(text(entry) for entry in self.entries)
        return f"ix[{inner or '()'}]"


def _decode(code: tuple[int, ...]) -> tuple[Entry, ...]:
    entries: list[Entry] = []
    position = 0
    while position < len(code):
        kind = code[position]
        if kind == _NEWAXIS:
            entries.append(None)
            position += 1
        elif kind == _ELLIPSIS:
            entries.append(Ellipsis)
            position += 1
        elif kind == _INT:
            entries.append(code[position + 1])
            position += 2
        else:
            flags = code[position + 1]
            values = [code[position + 2 + k] if flags & (1 << k) else None for k in range(3)]
            entries.append(slice(*values))
            position += 5
    return tuple(entries)


@final
class _IndexMaker:
    """``sr.ix``: ``sr.ix[2:5, ::2]`` is a :class:`StaticIndex`."""

    __slots__ = ()

    def __getitem__(self, entries: _NewKey) -> StaticIndex[_NewKey]:
        """One generic signature, no overloads: the key keeps its type (see StaticIndex)."""
        return StaticIndex(entries)

    def __repr__(self) -> str:
        return "stablerules.ix"


ix: Final = _IndexMaker()


def _static_index(value: object) -> Val[tuple[int, ...]]:
    """The key of getindex's ``index``: a ``StaticIndex``'s own, or, for a plain tuple (or a
    single int, slice, ``None``, ``...``), the same counted as a dynamic argument."""
    if type(value) is StaticIndex:
        return value.key
    if isinstance(value, (tuple, slice, int, np.integer)) or value is None or value is Ellipsis:
        index: StaticIndex[Basic] = StaticIndex(value)
        COUNTERS.note_dynamic_argument("index", value)
        return index.key
    if isinstance(value, (float, complex, str, np.floating, np.complexfloating)):
        StaticIndex(value)  # NumPy's IndexError for what it refuses as an index, naming the entry
    raise TypeError(
        f"getindex: index must be a static index sr.ix[...] (or a plain tuple of ints, slices, None "
        f"and ..., counted as dynamic), got {type(value).__name__}: {value!r}"
    )


# ======================================================================================
# getindex
# ======================================================================================

_FULL, _POINT, _RANGE = "full", "point", "range"


class _Selection:
    """``index`` applied to a shape: per axis of ``x``, ``(kind, extent, first, step, count,
    reversed)`` (a ``point`` has ``first`` its position and count 1), the output's shape, and
    NumPy's index for the view (``...`` appended so that every-int indexing is a 0-d view)."""

    def __init__(self, entries: tuple[Entry, ...], shape: Shape) -> None:
        ndim = len(shape)
        consumed = sum(1 for entry in entries if entry is not None and entry is not Ellipsis)
        if consumed > ndim:
            raise IndexError(
                f"getindex: too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed"
            )
        if Ellipsis in entries:
            at = entries.index(Ellipsis)
            expanded = entries[:at] + (slice(None),) * (ndim - consumed) + entries[at + 1 :]
        else:
            expanded = entries + (slice(None),) * (ndim - consumed)
        self.view_index: tuple[Entry, ...] = entries + (() if Ellipsis in entries else (Ellipsis,))
        axes: list[tuple[str, int, int, int, int, bool]] = []
        out: list[int] = []
        y_axis_of: list[int] = []  # per x axis kept as an output axis: its position in out
        axis = 0
        for entry in expanded:
            if entry is None:
                out.append(1)
                continue
            extent = shape[axis]
            if isinstance(entry, int):
                if not -extent <= entry < extent:
                    raise IndexError(
                        f"getindex: index {entry} is out of bounds for axis {axis} with size {extent}"
                    )
                axes.append((_POINT, extent, entry % extent, 1, 1, False))
                y_axis_of.append(-1)
            else:
                assert isinstance(entry, slice)
                start, stop, step = entry.indices(extent)
                count = len(range(start, stop, step))
                first = start if step > 0 else start + (count - 1) * step
                reversed_ = step < 0 and count > 1
                kind = _FULL if (count == extent and abs(step) == 1 and not reversed_) else _RANGE
                axes.append((kind, extent, first if count else 0, abs(step), count, reversed_))
                y_axis_of.append(len(out))
                out.append(count)
            axis += 1
        self.axes = axes
        self.out_shape: Shape = tuple(out)
        self.y_axis_of = y_axis_of
        # Covering: every element of x is selected (a view of dy is dx).
        self.covering = all(count == extent for _, extent, _, _, count, _ in axes)
        self.reversed_axes = tuple(a for a, spec in enumerate(axes) if spec[5])


def _getindex_layout(selection: _Selection, factor: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The kernel's pattern and its run-time arguments: per level ``e`` and, for a point,
    ``p``; for a range ``f, s, c, ys, yb``; for a full level ``ys`` (the cotangent's step).
    Units are the copy's units (``factor`` per element: the extra axis of a 16-byte dtype)."""
    y_shape = selection.out_shape
    y_strides = [math.prod(y_shape[k + 1 :]) * factor for k in range(len(y_shape))]
    levels: list[tuple[str, int, int, int, int, int, int]] = []  # kind, e, p/f, s, c, ys, yb
    for (kind, extent, first, step, count, reversed_), y_axis in zip(selection.axes, selection.y_axis_of):
        if kind == _POINT:
            levels.append((_POINT, extent, first, 0, 0, 0, 0))
            continue
        stride = y_strides[y_axis]
        if reversed_:
            levels.append((_RANGE, extent, first, step, count, -stride, (count - 1) * stride))
        else:
            levels.append((kind, extent, first, step, count, stride, 0))
    if factor > 1:
        levels.append((_FULL, factor, 0, 1, factor, 1, 0))
    if not levels:
        levels.append((_FULL, 1, 0, 1, 1, 1, 0))
    # The trailing run of full levels is one contiguous level.
    while len(levels) >= 2 and levels[-1][0] == _FULL and levels[-2][0] == _FULL:
        (_, e1, _, _, _, _, _), (_, e2, _, _, _, _, _) = levels[-2], levels[-1]
        levels[-2:] = [(_FULL, e1 * e2, 0, 1, e1 * e2, 1, 0)]
    pattern = tuple(level[0] for level in levels)
    arguments: list[int] = []
    for kind, extent, first, step, count, ys, yb in levels:
        arguments.append(extent)
        if kind == _POINT:
            arguments.append(first)
        elif kind == _RANGE:
            arguments += [first, step, count, ys, yb]
        else:
            arguments.append(ys)
    return pattern, tuple(arguments)


def _getindex_parameters(pattern: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    for level, kind in enumerate(pattern):
        names.append(f"e{level}")
        if kind == _POINT:
            names.append(f"p{level}")
        elif kind == _RANGE:
            names += [f"f{level}", f"s{level}", f"c{level}", f"ys{level}", f"yb{level}"]
        else:
            names.append(f"ys{level}")
    return names


def _emit_paired(writer: SourceWriter, last: int, x_base: str, y_base: str) -> None:
    """One row of ``dx`` where the last level takes every other element of an even extent:
    64-bit units ``wide[a + k]`` (``a`` the row's first unit; the row starts at an even
    element since the extent is even), zeros before and after the selected units, each
    selected unit dy's 32 bits shifted into the half at the selected offset (the low half,
    little-endian, when ``f`` is even)."""
    writer.line(f"half = f{last} % 2")
    writer.line(f"a = ({x_base}) // 2 + (f{last} - half) // 2")
    _emit_zero_units(writer, f"({x_base}) // 2", f"(f{last} - half) // 2")
    writer.line("into = np.uintp(a)")
    writer.line(f"fro = np.uintp({y_base} + yb{last})")
    writer.line("shift = np.uint64(32 * half)")
    with writer.block(f"if ys{last} > 0:"):
        with writer.block(f"for j in range(np.uintp(c{last})):"):
            writer.line("wide[into + j] = np.uint64(narrow[fro + j]) << shift")
    with writer.block("else:"):
        with writer.block(f"for j in range(np.uintp(c{last})):"):
            writer.line("wide[into + j] = np.uint64(narrow[fro - j]) << shift")
    _emit_zero_units(writer, f"a + c{last}", f"e{last} // 2 - (f{last} - half) // 2 - c{last}")


def _emit_zero_units(writer: SourceWriter, target: str, count: str) -> None:
    writer.line(f"into = np.uintp({target})")
    with writer.block(f"for t in range(np.uintp({count})):"):
        writer.line("wide[into + t] = 0")


def _render_getindex_pullback(signature: ShapeSignature, pattern: tuple[str, ...], unit: str) -> KernelSource:
    """The CPU pullback of a basic index: ``dst`` (dx) written once, in its memory order;
    each element is the ``src`` (dy) entry selected there, or zero."""
    names = _getindex_parameters(pattern)
    last = len(pattern) - 1
    writer = SourceWriter()
    writer.line(f"# dx is a C array (e0, ..., e{last}) read flat; per level: full (every index), point")
    writer.line("# (only p), range (f + j*s for j < c, dy offset yb + j*ys); dx is zero where nothing is selected.")
    writer.line("# Loop i0 runs over [lo, hi) of dx's first level: each thread owns that range of dx.")
    paired = last > 0 and pattern[last] == _RANGE and np.dtype(unit).itemsize == 4
    if paired:
        writer.line("# Step 2 on the last level: dx's pairs of elements as one 64-bit unit each (its 32-bit")
        writer.line("# half that is selected holds dy's bits, the other half zero).")
        writer.line("wide = dst[: dst.size - dst.size % 2].view(np.uint64)")
        writer.line("narrow = src.view(np.uint32)")
    for level in range(last):
        writer.line(f"xs{level} = {' * '.join(f'e{k}' for k in range(level + 1, last + 1))}")
    if last == 0:
        _emit_getindex_one_level(writer, pattern[0])
    else:
        _emit_getindex_level(writer, pattern, paired, 0, "0", "0")
    parameters = [
        ("src", readonly_array(unit)),
        ("dst", writable_array(unit)),
        *((name, INDEX) for name in names),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, f"getindex pullback {pattern}: dx from dy in one pass", numpy=True)


def _emit_getindex_one_level(writer: SourceWriter, kind: str) -> None:
    """A one-level index's pullback over ``[lo, hi)`` of dx."""
    if kind == _FULL:
        _emit_copy(writer, "lo", "lo", "hi - lo")
    elif kind == _POINT:
        _emit_zero(writer, "lo", "hi - lo")
        with writer.block("if lo <= p0 and p0 < hi:"):
            writer.line("dst[p0] = src[0]")
    else:
        _emit_zero(writer, "lo", "hi - lo")
        writer.line("jlo = 0 if lo <= f0 else (lo - f0 + s0 - 1) // s0")
        writer.line(f"jhi = 0 if hi <= f0 else {least('c0', '(hi - f0 + s0 - 1) // s0')}")
        with writer.block("for j in range(jlo, jhi):"):
            writer.line("dst[f0 + j * s0] = src[yb0 + j * ys0]")


def _emit_getindex_level(writer: SourceWriter, pattern: tuple[str, ...], paired: bool, level: int, x_base: str, y_base: str) -> None:
    """The loop over dx's ``level`` (its first over ``[lo, hi)``), at dx offset ``x_base``
    and dy offset ``y_base``: the selected entries' next level, zeros elsewhere."""
    last = len(pattern) - 1
    if level == last:
        _emit_getindex_last(writer, pattern, paired, x_base, y_base)
        return
    kind = pattern[level]
    index = f"i{level}"
    loop = f"range(lo, hi)" if level == 0 else f"range(e{level})"
    with writer.block(f"for {index} in {loop}:"):
        x_here = f"x{level}"
        writer.line(f"{x_here} = {x_base} + {index} * xs{level}" if x_base != "0" else f"{x_here} = {index} * xs{level}")
        if kind == _FULL:
            writer.line(f"y{level} = {y_base} + {index} * ys{level}")
            _emit_getindex_level(writer, pattern, paired, level + 1, x_here, f"y{level}")
        elif kind == _POINT:
            with writer.block(f"if {index} == p{level}:"):
                _emit_getindex_level(writer, pattern, paired, level + 1, x_here, y_base)
            with writer.block("else:"):
                _emit_zero(writer, x_here, f"xs{level}")
        else:
            writer.line(f"d{level} = {index} - f{level}")
            with writer.block(f"if d{level} >= 0 and d{level} < c{level} * s{level} and d{level} % s{level} == 0:"):
                writer.line(f"y{level} = {y_base} + yb{level} + (d{level} // s{level}) * ys{level}")
                _emit_getindex_level(writer, pattern, paired, level + 1, x_here, f"y{level}")
            with writer.block("else:"):
                _emit_zero(writer, x_here, f"xs{level}")


def _emit_getindex_last(writer: SourceWriter, pattern: tuple[str, ...], paired: bool, x_base: str, y_base: str) -> None:
    """dx's last level at offset ``x_base`` from dy at ``y_base``: a copy, a point, or a
    range (contiguous, step 2 as 64-bit pairs where ``paired``, or strided, either way in dy)."""
    last = len(pattern) - 1
    kind = pattern[last]
    e = f"e{last}"
    if kind == _FULL:
        _emit_copy(writer, x_base, y_base, e)
    elif kind == _POINT:
        _emit_zero(writer, x_base, e)
        writer.line(f"dst[{x_base} + p{last}] = src[{y_base}]")
    else:
        with writer.block(f"if s{last} == 1 and ys{last} == 1:"):
            _emit_zero(writer, x_base, f"f{last}")
            _emit_copy(writer, f"{x_base} + f{last}", y_base, f"c{last}")
            _emit_zero(writer, f"{x_base} + f{last} + c{last}", f"{e} - f{last} - c{last}")
        if paired:
            with writer.block(f"elif s{last} == 2 and {e} % 2 == 0 and (ys{last} == 1 or ys{last} == -1):"):
                _emit_paired(writer, last, x_base, y_base)
        with writer.block("else:"):
            _emit_zero(writer, x_base, e)
            # Unsigned indices (no negative-index wraparound code in the loop): a reversed
            # axis walks dy down from its offset for j = 0.
            writer.line(f"into = np.uintp({x_base} + f{last})")
            writer.line(f"fro = np.uintp({y_base} + yb{last})")
            writer.line(f"step = np.uintp(s{last})")
            with writer.block(f"if ys{last} > 0:"):
                writer.line(f"ystep = np.uintp(ys{last})")
                with writer.block(f"for j in range(np.uintp(c{last})):"):
                    writer.line("dst[into + j * step] = src[fro + j * ystep]")
            with writer.block("else:"):
                writer.line(f"ystep = np.uintp(-ys{last})")
                with writer.block(f"for j in range(np.uintp(c{last})):"):
                    writer.line("dst[into + j * step] = src[fro - j * ystep]")


def _render_getindex_pullback_cuda(signature: ShapeSignature, pattern: tuple[str, ...], unit: str) -> KernelSource:
    """The CUDA pullback of a basic index: thread ``t`` writes ``dx[t]``, the ``dy`` entry
    selected there or zero (a gather: no atomics)."""
    names = _getindex_parameters(pattern)
    last = len(pattern) - 1
    writer = SourceWriter()
    writer.line("# thread t writes dx[t]: its level indices by division, then dy's offset or zero")
    writer.line("rest = t")
    writer.line("offset = 0")
    writer.line("selected = True")
    for level in range(last, -1, -1):
        kind = pattern[level]
        writer.line(f"i{level} = rest % e{level}")
        writer.line(f"rest = rest // e{level}")
        if kind == _FULL:
            writer.line(f"offset += i{level} * ys{level}")
        elif kind == _POINT:
            with writer.block(f"if i{level} != p{level}:"):
                writer.line("selected = False")
        else:
            writer.line(f"d{level} = i{level} - f{level}")
            with writer.block(f"if d{level} >= 0 and d{level} < c{level} * s{level} and d{level} % s{level} == 0:"):
                writer.line(f"offset += yb{level} + (d{level} // s{level}) * ys{level}")
            with writer.block("else:"):
                writer.line("selected = False")
    with writer.block("if selected:"):
        writer.line("dst[t] = src[offset]")
    with writer.block("else:"):
        writer.line("dst[t] = 0")
    parameters = [
        ("src", cuda_array_type(unit)),
        ("dst", cuda_array_type(unit)),
        *((name, INDEX) for name in names),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, f"getindex pullback {pattern}: dx[t] from dy")


@memoized(maxsize=256)
def _getindex_request(pattern: tuple[str, ...], unit: str, target: str) -> KernelRequest:
    signature = ShapeSignature("getindex", "pullback", pattern, (unit,), (len(pattern),), target)
    render = _render_getindex_pullback_cuda if target == "cuda" else _render_getindex_pullback
    return KernelRequest(signature, lambda: render(signature, pattern, unit))


class GetindexPlan(Plan):
    """``x[index]`` for one shape: NumPy's view forward and pushforward, and a one-pass
    pullback kernel (a view of ``dy`` when the selection covers ``x``)."""

    def __init__(self, facts: InputFacts, index: tuple[Entry, ...]) -> None:
        selection = _Selection(index, facts.shape)
        super().__init__("getindex", (facts,), out_shape=selection.out_shape, any_layout=selection.covering)
        self.selection = selection
        self.view_index = selection.view_index
        self.in_shape = facts.shape
        self.target = facts.target
        self.size = math.prod(facts.shape)
        self.covering = selection.covering
        self.request: KernelRequest | None = None
        if self.differentiable and not self.covering and self.size and math.prod(self.out_shape):
            pattern, self.arguments = _getindex_layout(selection, 1)
            self.request = _getindex_request(pattern, self.out_dtype.name, facts.target)
            self.first_extent = self.arguments[0]
            self.kernel_entries = frozenset({"pullback"})
        flip = [slice(None)] * len(facts.shape)
        for axis in selection.reversed_axes:
            flip[axis] = slice(None, None, -1)
        self.flip_index = (*flip, Ellipsis)

    def requests(self) -> list[KernelRequest]:
        return [] if self.request is None else [self.request]

    def forward(self, arrays: tuple[object, ...]) -> object:
        (x,) = arrays
        if type(x) is not type(self.like):
            x = input_facts(x, "x", "getindex").need_array("getindex")
        return x[self.view_index]

    def pullback(self, saved: object) -> DensePullback | KernelPullback:
        in_shape, dtype = self.in_shape, self.out_dtype
        if self.covering:
            flip_index = self.flip_index

            def covering_pullback(dy: ArrayLike) -> tuple[object, ...]:
                dx = dy.reshape(in_shape)[flip_index]  # type: ignore[index]
                return (dx if shareable(dy) else dx.copy(),)

            return covering_pullback
        if self.request is None:  # nothing selected, or nothing to write

            def zero_pullback(dy: ArrayLike) -> tuple[object, ...]:
                return (self.namespace.zeros(in_shape, dtype=dtype),)

            return zero_pullback
        kernel = self.request.get()
        arguments = self.arguments
        if self.target == "cuda":
            total, namespace = self.size, self.namespace

            def cuda_pullback(dy: ArrayLike) -> tuple[object, ...]:
                dx: ArrayLike = namespace.empty(in_shape, dtype=dtype)
                cuda_launch(kernel, total, dy.reshape(-1), dx.reshape(-1), *arguments, total)
                return (dx,)

            return cuda_pullback
        return KernelPullback(kernel, arguments, self.first_extent, self.size, self.size, dtype, in_shape)

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        if self.covering:
            return (Fill(fill.value, self.in_shape, self.out_dtype),)
        return super().fill_pullback(saved, dense, fill)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return tangent.array[self.view_index]
        if isinstance(tangent, Fill):
            return Fill(tangent.value, self.out_shape, self.out_dtype)
        return tangent


class Getindex(RuleOp):
    name = "getindex"
    static_names = ("index",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], index: object) -> npt.NDArray[_DT]:
        """``x[index]`` for a static basic index ``index = sr.ix[...]`` (ints, slices with any
        step, ``None``, ``...``): NumPy's view (a 0-d view where NumPy gives a scalar).

        Rules: ``back(dy)`` returns ``(dx, NoTangent())`` (the index given positionally):
        ``dx`` has ``x``'s shape, ``dy`` where selected and zeros elsewhere, written in one
        pass by a compiled kernel (no scatter, no atomics); a view of ``dy`` when the index
        selects every element. A ``Fill`` cotangent gives a ``Fill`` when the selection
        covers ``x``; ``ZeroTangent`` gives ``ZeroTangent``. The pushforward is the
        tangent's view. A plain tuple works too, counted as a dynamic argument.
        """
        return self.forward(x, index)  # type: ignore[return-value]

    def bind(self, x: object, index: object) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return (x,), (_static_index(index),)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", "getindex")
        key = statics[0]
        assert isinstance(key, Val)
        return GetindexPlan(facts, _decode(key.value))


getindex = Getindex()


# ======================================================================================
# Indices: validation (data, per call), wrapping and promises
# ======================================================================================


def _axis_text(axis: int | None, n: int) -> str:
    return f"axis {axis} with size {n}" if axis is not None else f"the flattened array with size {n}"


class BoolIndicesError(TypeError, IndexError):
    """Bool ``indices`` where NumPy raises ``IndexError`` (``np.take_along_axis``): both our
    ``TypeError`` (a mask is not a list of positions) and NumPy's ``IndexError``, as NumPy's
    own ``AxisError`` is both a ``ValueError`` and an ``IndexError``."""


def _check_indices_dtype(op: str, dtype: DType, numpy_error: type[Exception]) -> None:
    """Integer dtypes pass; others raise what NumPy raises (``numpy_error``), bool a
    ``TypeError`` (a mask is not a list of positions; also an ``IndexError`` where NumPy
    raises one)."""
    if dtype.kind in "iu":
        return
    if dtype.kind == "b":
        raise (BoolIndicesError if numpy_error is IndexError else TypeError)(
            f"{op}: indices has dtype bool; indices must be integers (a boolean mask is not a "
            f"list of positions: np.flatnonzero(mask) gives them)"
        )
    if numpy_error is IndexError:
        raise IndexError(f"{op}: `indices` must be an integer array, got dtype {dtype}")
    raise TypeError(
        f"{op}: indices must be an integer array: cannot cast array data from dtype({str(dtype)!r}) "
        f"to dtype('int64') according to the rule 'same_kind'"
    )


def _wrapped_indices(op: str, indices: ArrayLike, n: int, axis: int | None, copy: bool = True) -> ArrayLike:
    """``indices`` as a C-contiguous ``intp`` array with negative entries wrapped, after the
    range check (``IndexError`` naming the index, the axis and its length). With ``copy`` it
    never is the caller's array: a pullback keeps it, and its kernels trust its range."""
    xp = array_namespace(indices)
    if indices.size == 0:
        empty: ArrayLike = xp.zeros(indices.shape, dtype=_INTP)
        return empty
    if n == 0:
        raise IndexError(f"{op}: cannot take from an empty axis ({_axis_text(axis, n)}): every index is out of bounds")
    low, high = indices.min(), indices.max()
    if int(high) >= n or int(low) < -n:
        bad = int(high) if int(high) >= n else int(low)
        raise IndexError(f"{op}: index {bad} is out of bounds for {_axis_text(axis, n)}")
    if int(low) < 0:
        wrapped: npt.NDArray[np.intp] = xp.ascontiguousarray(indices, dtype=_INTP)
        shifted: ArrayLike = wrapped + (wrapped < 0) * n
        return shifted
    result: ArrayLike = (
        xp.array(indices, dtype=_INTP, order="C", copy=True) if copy else xp.ascontiguousarray(indices, dtype=_INTP)
    )
    return result


def _check_promises(op: str, w: ArrayLike, n: int, unique: bool, sorted_: bool) -> None:
    """``ValueError`` for a broken ``unique``/``sorted`` promise, naming the first position
    where it breaks (the indices already wrapped)."""
    if not (unique or sorted_) or w.size < 2:
        return
    flat: npt.NDArray[np.intp] = w.reshape(-1)  # type: ignore[assignment]
    xp = array_namespace(flat)
    if sorted_:
        bad = flat[1:] <= flat[:-1] if unique else flat[1:] < flat[:-1]
        if bool(bad.any()):
            t = int(xp.argmax(bad)) + 1
            what = "increasing (sorted and unique)" if unique else "non-decreasing"
            raise ValueError(
                f"{op}: sorted=Val(True) promises {what} indices (after negative ones are wrapped), "
                f"but indices[{t}] = {int(flat[t])} follows indices[{t - 1}] = {int(flat[t - 1])}"
            )
        return
    counts = xp.bincount(flat, minlength=n)
    if int(counts.max()) > 1:
        value = int(xp.argmax(counts > 1))
        positions = [int(p) for p in xp.flatnonzero(flat == value)[:2]]
        raise ValueError(
            f"{op}: unique=Val(True) promises distinct indices (after negative ones are wrapped), "
            f"but positions {positions[0]} and {positions[1]} both hold {value}"
        )


# ======================================================================================
# Kernels shared by take, take_along_axis and index_add
# ======================================================================================


def _signature(op: str, kind: str, static: tuple[object, ...], dtype: str, target: str) -> ShapeSignature:
    return ShapeSignature(op, kind, static, (dtype,), (1,), target)


def _render_gather(signature: ShapeSignature, unit: str) -> KernelSource:
    """``y[o, t, :] = x[o, w[t], :]`` over rows ``r = o * m + t`` in ``[lo, hi)``."""
    writer = SourceWriter()
    writer.line("# x is (outer, n, inner), y is (outer, m, inner), read flat; rows r = o * m + t in [lo, hi).")
    writer.line("o = lo // m")
    writer.line("t = lo - o * m")
    with writer.block("for r in range(lo, hi):"):
        writer.line("src_row = (o * n + w[t]) * inner")
        writer.line("into = np.uintp(r * inner)")
        writer.line("fro = np.uintp(src_row)")
        with writer.block("for c in range(np.uintp(inner)):"):
            writer.line("y[into + c] = x[fro + c]")
        writer.line("t += 1")
        with writer.block("if t == m:"):
            writer.line("t = 0")
            writer.line("o += 1")
    parameters = [
        ("x", readonly_array(unit)),
        ("w", readonly_array("intp")),
        ("y", writable_array(unit)),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    # noalias: y is fresh (take's 1-D gather 0.59x the time, bench/README.md round 10)
    return cpu_kernel(signature, parameters, writer, "take gather: rows of x at the indices", numpy=True, noalias=True)


def _render_accumulate(signature: ShapeSignature, dtype: str, mode: str, based: bool) -> KernelSource:
    """``dst[o, i, :] = base[o, i, :] + sum(src[o, t, :] for t with w[t] == i)`` (``base``
    zero unless ``based``), terms in increasing ``t``. Part ``p`` owns the rows ``r = o * n +
    i`` in ``[bounds[p], bounds[p + 1])``: it writes them all first (``base`` or zeros, one
    contiguous pass), then adds, ``t`` increasing, each ``src`` row whose index falls in
    them; this call runs parts ``[lo, hi)``. ``mode``: ``scan`` reads all of ``w`` per
    slab; ``sorted`` (``w`` non-decreasing) finds the part's ``t`` range by bisection."""
    writer = SourceWriter()
    writer.line("# src is (outer, m, inner), dst (and base) (outer, n, inner), read flat.")
    with writer.block("for part in range(lo, hi):"):
        writer.line("first = bounds[part]")
        writer.line("last = bounds[part + 1]")
        writer.line("into = np.uintp(first * inner)")
        with writer.block("for c in range(np.uintp((last - first) * inner)):"):
            writer.line("dst[into + c] = base[into + c]" if based else "dst[into + c] = 0")
        with writer.block("if first < last:"):
            with writer.block("for o in range(first // n, (last - 1) // n + 1):"):
                writer.line(f"ilo = {greatest('first - o * n', '0')}")
                writer.line(f"ihi = {least('last - o * n', 'n')}")
                if mode == "scan":
                    with writer.block("for t in range(m):"):
                        writer.line("i = w[t]")
                        with writer.block("if i >= ilo and i < ihi:"):
                            _emit_add_row(writer)
                else:
                    _emit_bisect(writer, "t0", "ilo")
                    _emit_bisect(writer, "t1", "ihi")
                    with writer.block("for t in range(t0, t1):"):
                        writer.line("i = w[t]")
                        _emit_add_row(writer)
    parameters = [("src", readonly_array(dtype))]
    if based:
        parameters.append(("base", readonly_array(dtype)))
    parameters += [
        ("w", readonly_array("intp")),
        ("dst", writable_array(dtype)),
        ("bounds", readonly_array("intp")),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    # noalias: dst is fresh, never base or src (take's scatter-add 0.63-0.95x the time, bench/README.md round 10)
    return cpu_kernel(
        signature, parameters, writer, f"accumulate ({mode}{', onto base' if based else ''}): a deterministic scatter-add", numpy=True,
        noalias=True,
    )


def _emit_add_row(writer: SourceWriter) -> None:
    """``dst`` row ``(o, i)`` += ``src`` row ``(o, t)``."""
    writer.line("into = np.uintp((o * n + i) * inner)")
    writer.line("fro = np.uintp((o * m + t) * inner)")
    with writer.block("for c in range(np.uintp(inner)):"):
        writer.line("dst[into + c] += src[fro + c]")


def _emit_bisect(writer: SourceWriter, target: str, value: str) -> None:
    """``target`` = the first ``t`` with ``w[t] >= value`` (``w`` non-decreasing)."""
    writer.line("a = 0")
    writer.line("b = m")
    with writer.block("while a < b:"):
        writer.line("h = (a + b) >> 1")
        with writer.block(f"if w[h] < {value}:"):
            writer.line("a = h + 1")
        with writer.block("else:"):
            writer.line("b = h")
    writer.line(f"{target} = a")


# Balance counts indices per bin of rows, at most this many bins (a power of two rows each).
_BALANCE_BINS = 1024


def _render_balance(signature: ShapeSignature) -> KernelSource:
    """Row bounds of ``parts`` parts of about equal cost (a row written costs one, a term
    added two: it reads a row of ``src`` and adds it, measured on float32 rows), for one outer slab (``outer == 1``), cut at the edges of bins of ``1 <<
    shift`` rows (a count of the indices per bin, O(m + bins)). Serial."""
    writer = SourceWriter()
    writer.line("bins = ((n - 1) >> shift) + 1")
    writer.line("# four interleaved counts per bin: repeated indices do not wait on one counter")
    writer.line("lanes = np.zeros(4 * bins, dtype=np.intp)")
    with writer.block("for t in range(m):"):
        writer.line("lanes[((w[t] >> shift) << 2) | (t & 3)] += 1")
    writer.line("counts = np.empty(bins, dtype=np.intp)")
    with writer.block("for b in range(bins):"):
        writer.line("counts[b] = lanes[4 * b] + lanes[4 * b + 1] + lanes[4 * b + 2] + lanes[4 * b + 3]")
    writer.line("total = n + 2 * m  # a term reads its src row and adds it: about two rows written")
    writer.line("bounds[0] = 0")
    writer.line("p = 1")
    writer.line("terms = 0")
    with writer.block("for b in range(bins + 1):"):
        writer.line(f"edge = {least('(b << shift)', 'n')}")
        writer.line("cost = edge + 2 * terms")
        with writer.block("while p < parts and cost * parts >= total * p:"):
            writer.line("bounds[p] = edge")
            writer.line("p += 1")
        with writer.block("if b < bins:"):
            writer.line("terms += counts[b]")
    with writer.block("while p < parts:"):
        writer.line("bounds[p] = n")
        writer.line("p += 1")
    writer.line("bounds[parts] = n")
    parameters = [
        ("w", readonly_array("intp")),
        ("bounds", writable_array("intp")),
        ("n", INDEX),
        ("m", INDEX),
        ("parts", INDEX),
        ("shift", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, "balance: row bounds of parts of equal cost", numpy=True)


def _render_gather_along(signature: ShapeSignature, unit: str) -> KernelSource:
    """``y[o, t, c] = x[o, w[o, t, c], c]`` over outer rows ``o`` in ``[lo, hi)``."""
    writer = SourceWriter()
    writer.line("# x is (outer, n, inner), w and y (outer, m, inner), read flat.")
    with writer.block("for o in range(lo, hi):"):
        writer.line("base = o * n * inner")
        with writer.block("for k in range(o * m * inner, (o + 1) * m * inner):"):
            writer.line("c = k % inner")
            writer.line("y[k] = x[base + w[k] * inner + c]")
    parameters = [
        ("x", readonly_array(unit)),
        ("w", readonly_array("intp")),
        ("y", writable_array(unit)),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, "take_along_axis gather")


def _render_scatter_along(signature: ShapeSignature, dtype: str) -> KernelSource:
    """``dx[o, :, :] = 0`` then ``dx[o, w[o, t, c], c] += dy[o, t, c]`` in ``(t, c)`` order,
    per outer row ``o`` in ``[lo, hi)``: each row of dx is written by one thread, in cache."""
    writer = SourceWriter()
    writer.line("# dy and w are (outer, m, inner), dx (outer, n, inner), read flat.")
    with writer.block("for o in range(lo, hi):"):
        writer.line("base = o * n * inner")
        writer.line("into = np.uintp(base)")
        with writer.block("for c in range(np.uintp(n * inner)):"):
            writer.line("dx[into + c] = 0")
        writer.line("k = o * m * inner")
        with writer.block("for t in range(m):"):
            with writer.block("for c in range(inner):"):
                writer.line("dx[base + w[k] * inner + c] += dy[k]")
                writer.line("k += 1")
    parameters = [
        ("dy", readonly_array(dtype)),
        ("w", readonly_array("intp")),
        ("dx", writable_array(dtype)),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, "take_along_axis pullback: a deterministic scatter-add per row", numpy=True)


def _render_scatter_along_half(signature: ShapeSignature, format: str) -> KernelSource:
    """The 16-bit ``_render_scatter_along``: per outer row ``o``, ``acc`` (a float32 slab of
    ``n * inner``, reused) zeroed, ``dy``'s bits widened and added in ``(t, c)`` order (the
    float32 kernel's order), then written to ``dx``'s bits rounded once."""
    writer = SourceWriter()
    writer.line("# dy (bits) and w are (outer, m, inner), dx (bits) (outer, n, inner), read flat.")
    writer.line("acc = np.empty(n * inner, np.float32)")
    with writer.block("for o in range(lo, hi):"):
        with writer.block("for c in range(np.uintp(n * inner)):"):
            writer.line("acc[c] = np.float32(0)")
        writer.line("k = o * m * inner")
        with writer.block("for t in range(m):"):
            with writer.block("for c in range(inner):"):
                writer.line("acc[w[k] * inner + c] += widen(dy[k])")
                writer.line("k += 1")
        writer.line("into = np.uintp(o * n * inner)")
        with writer.block("for c in range(np.uintp(n * inner)):"):
            writer.line("dx[into + c] = narrow(acc[c])")
    parameters = [
        ("dy", readonly_array("uint16")),
        ("w", readonly_array("intp")),
        ("dx", writable_array("uint16")),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    source = cpu_kernel(signature, parameters, writer, f"take_along_axis pullback ({format} bits): a deterministic scatter-add per row", numpy=True)
    return KernelSource(half_helpers(source.text, format), source.entry)


# --- CUDA -------------------------------------------------------------------------------


def _render_gather_cuda(signature: ShapeSignature, unit: str) -> KernelSource:
    writer = SourceWriter()
    writer.line("# thread t writes y[t], y (outer, m, inner) flat, from x (outer, n, inner)")
    writer.line("c = t % inner")
    writer.line("r = t // inner")
    writer.line("k = r % m")
    writer.line("o = r // m")
    writer.line("y[t] = x[(o * n + w[k]) * inner + c]")
    parameters = [
        ("x", cuda_array_type(unit)),
        ("w", cuda_array_type("intp")),
        ("y", cuda_array_type(unit)),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, "take gather: y[t] = x[row of w]")


def _render_merge_cuda(signature: ShapeSignature) -> KernelSource:
    """One pass of a merge sort of positions by ``(w[t], t)``: the runs of ``width`` in
    ``src``, each already sorted, merged in pairs into ``dst``. Thread ``j`` places ``src[j]``
    at its own run's rank plus the count of smaller keys in the partner run (a bisection);
    keys are distinct, so every position is written once and the order is the stable one."""
    writer = SourceWriter()
    writer.line("first = (j // (2 * width)) * (2 * width)  # not `start`: the grid-stride loop's own")
    writer.line("# no min(): typing it for a GPU asks the CUDA driver, which a PTX-only build lacks")
    writer.line("mid = first + width")
    with writer.block("if mid > m:"):
        writer.line("mid = m")
    writer.line("last = first + 2 * width")
    with writer.block("if last > m:"):
        writer.line("last = m")
    writer.line("v = src[j]")
    writer.line("key = w[v]")
    writer.line("# the partner run: the right one for an element of the left, and the reverse")
    with writer.block("if j < mid:"):
        writer.line("a = mid")
        writer.line("b = last")
    with writer.block("else:"):
        writer.line("a = first")
        writer.line("b = mid")
    with writer.block("while a < b:"):
        writer.line("h = (a + b) // 2")
        writer.line("u = src[h]")
        with writer.block("if w[u] < key or (w[u] == key and u < v):"):
            writer.line("a = h + 1")
        with writer.block("else:"):
            writer.line("b = h")
    writer.line("dst[j - mid + a] = v")
    parameters = [
        ("w", cuda_array_type("intp")),
        ("src", cuda_array_type("intp")),
        ("dst", cuda_array_type("intp")),
        ("m", INDEX),
        ("width", INDEX),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, "bucket: one merge pass of a stable sort by index", index="j")


def _render_offsets_cuda(signature: ShapeSignature) -> KernelSource:
    """Bucket starts from the sorted positions: ``offsets[i]`` is the first ``k`` with
    ``w[order[k]] >= i`` (a bisection per ``i``)."""
    writer = SourceWriter()
    writer.line("a = 0")
    writer.line("b = m")
    with writer.block("while a < b:"):
        writer.line("h = (a + b) // 2")
        with writer.block("if w[order[h]] < i:"):
            writer.line("a = h + 1")
        with writer.block("else:"):
            writer.line("b = h")
    writer.line("offsets[i] = a")
    parameters = [
        ("w", cuda_array_type("intp")),
        ("order", cuda_array_type("intp")),
        ("offsets", cuda_array_type("intp")),
        ("m", INDEX),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, "bucket offsets: where each index's positions start", index="i")


def _render_accumulate_cuda(signature: ShapeSignature, dtype: str, based: bool = False, half: bool = False) -> KernelSource:
    """Thread ``t`` owns ``dst[t]`` and sums its bucket's ``src`` entries in the sorted order,
    onto ``base[t]`` when ``based`` (index_add's forward), else onto zero: no atomics. With
    ``half`` (``dtype`` is then the 16-bit format: ``"accumulate-half"``), ``src``, ``base``
    and ``dst`` are bits, widened in registers (``_units.cuda_half_helpers``) and summed in
    float32, the sum written rounded once to nearest even: the float32 kernel's sums, with
    no float32 array of either size."""
    widen = "widen({})" if half else "{}"
    writer = SourceWriter()
    writer.line(
        "# thread t owns dst[t], dst (outer, n, inner) flat: its bucket's terms in order, in float32"
        if half
        else "# thread t owns dst[t], dst (outer, n, inner) flat: base plus its bucket's terms in order"
    )
    writer.line("c = t % inner")
    writer.line("r = t // inner")
    writer.line("i = r % n")
    writer.line("o = r // n")
    writer.line(f"acc = {widen.format('base[t]')}" if based else ("acc = np.float32(0)" if half else "acc = zero[0]"))
    with writer.block("for k in range(offsets[i], offsets[i + 1]):"):
        writer.line(f"acc += {widen.format('src[(o * m + order[k]) * inner + c]')}")
    writer.line("dst[t] = narrow(acc)" if half else "dst[t] = acc")
    unit = cuda_array_type("uint16" if half else dtype)
    parameters = [("src", unit)]
    if based:
        parameters.append(("base", unit))
    elif not half:
        parameters.append(("zero", unit))
    parameters += [
        ("offsets", cuda_array_type("intp")),
        ("order", cuda_array_type("intp")),
        ("dst", unit),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("total", INDEX),
    ]
    if not half:
        return cuda_kernel(signature, parameters, writer, "accumulate: each dst element sums its bucket (no atomics)")
    what = f"accumulate {dtype}{' onto base' if based else ''}: each dst element sums its bucket in float32 (no atomics), rounded once"
    source = cuda_kernel(signature, parameters, writer, what)
    return KernelSource(cuda_half_helpers(source.text, dtype), source.entry)


def _render_atomic_cuda(signature: ShapeSignature, dtype: str) -> KernelSource:
    writer = SourceWriter()
    writer.line("# thread t adds src[t], src (outer, m, inner) flat, into dst's row w[k] with an atomic")
    writer.line("c = t % inner")
    writer.line("r = t // inner")
    writer.line("k = r % m")
    writer.line("o = r // m")
    if np.dtype(dtype).kind == "c":  # atomics are real: the two channels separately
        writer.line("cuda.atomic.add(dst_real, 2 * ((o * n + w[k]) * inner + c), src[t].real)")
        writer.line("cuda.atomic.add(dst_real, 2 * ((o * n + w[k]) * inner + c) + 1, src[t].imag)")
    else:
        writer.line("cuda.atomic.add(dst_real, (o * n + w[k]) * inner + c, src[t])")
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    parameters = [
        ("src", cuda_array_type(dtype)),
        ("w", cuda_array_type("intp")),
        ("dst_real", cuda_array_type(real)),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, "scatter-add with atomics (not bitwise reproducible)")


def _render_gather_along_cuda(signature: ShapeSignature, unit: str) -> KernelSource:
    writer = SourceWriter()
    writer.line("c = t % inner")
    writer.line("o = t // (m * inner)")
    writer.line("y[t] = x[(o * n + w[t]) * inner + c]")
    parameters = [
        ("x", cuda_array_type(unit)),
        ("w", cuda_array_type("intp")),
        ("y", cuda_array_type(unit)),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, "take_along_axis gather")


def _render_scatter_along_cuda(signature: ShapeSignature, dtype: str, half: bool = False) -> KernelSource:
    """take_along_axis's pullback: thread ``t`` owns ``dx[t]`` and sums, over ``k`` in order,
    the ``dy`` entries whose index is its row (no atomics). With ``half`` (``dtype`` is then
    the 16-bit format: ``"scatter-along-half"``), ``dy`` and ``dx`` are bits, widened in
    registers and summed in float32, the sum written rounded once (``_units.cuda_half_helpers``)."""
    writer = SourceWriter()
    writer.line(
        "# thread t owns dx[t], dx (outer, n, inner) flat: the float32 sum over k of dy where w == its row"
        if half
        else "# thread t owns dx[t], dx (outer, n, inner) flat: the sum over k of dy where w == its row"
    )
    writer.line("c = t % inner")
    writer.line("r = t // inner")
    writer.line("i = r % n")
    writer.line("o = r // n")
    writer.line("acc = np.float32(0)" if half else "acc = zero[0]")
    with writer.block("for k in range(m):"):
        writer.line("at = (o * m + k) * inner + c")
        with writer.block("if w[at] == i:"):
            writer.line("acc += widen(dy[at])" if half else "acc += dy[at]")
    writer.line("dx[t] = narrow(acc)" if half else "dx[t] = acc")
    unit = cuda_array_type("uint16" if half else dtype)
    parameters = [
        ("dy", unit),
        *([] if half else [("zero", unit)]),
        ("w", cuda_array_type("intp")),
        ("dx", unit),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("total", INDEX),
    ]
    if not half:
        return cuda_kernel(signature, parameters, writer, "take_along_axis pullback: a gather over k (no atomics)")
    what = f"take_along_axis pullback ({dtype} bits): a gather over k in float32 (no atomics), rounded once"
    source = cuda_kernel(signature, parameters, writer, what)
    return KernelSource(cuda_half_helpers(source.text, dtype), source.entry)


def _render_buckets(signature: ShapeSignature) -> KernelSource:
    """A stable counting sort of the positions ``t`` by index ``w[t]``: ``offsets`` (``n + 1``,
    bucket ``i`` is ``order[offsets[i]:offsets[i + 1]]``) and ``order`` (``m``, increasing ``t``
    within a bucket); then the row bounds of ``parts`` parts of about equal cost of the
    ``outer * n`` rows (a row written costs one, a term added two, as ``balance`` counts).
    Serial, O(n + m)."""
    writer = SourceWriter()
    writer.line("# Bucket i's count at offsets[i + 2], summed from the left: offsets[i + 1] is then where")
    writer.line("# bucket i starts, and placing its positions moves it to where bucket i + 1 starts.")
    with writer.block("for i in range(n + 1):"):
        writer.line("offsets[i] = 0")
    with writer.block("for t in range(m):"):
        with writer.block("if w[t] + 2 <= n:"):
            writer.line("offsets[w[t] + 2] += 1")
    with writer.block("for i in range(1, n):"):
        writer.line("offsets[i + 1] += offsets[i]")
    with writer.block("for t in range(m):"):
        writer.line("i = w[t] + 1")
        writer.line("order[offsets[i]] = t")
        writer.line("offsets[i] += 1")
    writer.line("# cost(r) of the rows before r = o * n + i: o * (n + 2 m) + i + 2 offsets[i], increasing")
    writer.line("total = outer * (n + 2 * m)")
    writer.line("rows = outer * n")
    writer.line("bounds[0] = 0")
    writer.line("bounds[parts] = rows")
    with writer.block("for p in range(1, parts):"):
        writer.line("target = total * p // parts")
        writer.line("a = bounds[p - 1]")
        writer.line("b = rows")
        with writer.block("while a < b:"):
            writer.line("h = (a + b) >> 1")
            writer.line("o = h // n")
            writer.line("i = h - o * n")
            with writer.block("if o * (n + 2 * m) + i + 2 * offsets[i] < target:"):
                writer.line("a = h + 1")
            with writer.block("else:"):
                writer.line("b = h")
        writer.line("bounds[p] = a")
    parameters = [
        ("w", readonly_array("intp")),
        ("offsets", writable_array("intp")),
        ("order", writable_array("intp")),
        ("bounds", writable_array("intp")),
        ("n", INDEX),
        ("m", INDEX),
        ("outer", INDEX),
        ("parts", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(signature, parameters, writer, "buckets: the positions sorted by index, stably; balanced parts", numpy=True)


# The 16-bit scatter-add adds this many terms per pass over its float32 row (in order: the
# same sums), and asks for the rows of dy it reads this many terms ahead (bucket order is a
# random walk over dy's rows). W10 in bfloat16: 866-877 -> 709-798 us for the kernel (bench/README.md,
# round 18).
_TERMS = 4
_AHEAD = 4


def _emit_prefetch(writer: SourceWriter, term: str) -> None:
    """Ask for the cache lines of the ``src`` row of term ``term`` (if there is one)."""
    with writer.block(f"if {term} < m:"):
        writer.line(f"ahead = np.uintp((o * m + order[{term}]) * inner)")
        with writer.block(f"for q in range(0, {least('np.uintp(inner)', '256')}, 32):  # its first 8 lines (of 16-bit units)"):
            writer.line("prefetch(src, ahead + q)")


def _render_accumulate_half(signature: ShapeSignature, format: str, based: bool = False) -> KernelSource:
    """The scatter-add of a 16-bit ``src`` (``uint16`` bits) into a 16-bit ``dst`` (onto
    ``base``'s row, widened, when ``based``; else onto zero): each row
    ``r = o * n + i`` in ``[lo, hi)`` sums its bucket's ``src`` rows (``t`` increasing) in a
    float32 row of registers/L1 (each term widened from its bits) and is written once, rounded
    to nearest even: the float32 scatter-add's sums, with no float32 array of either size
    (a run of rows without terms is one contiguous fill of zeros). Part ``p`` owns rows
    ``[bounds[p], bounds[p + 1])``; this call runs parts ``[lo, hi)``."""
    writer = SourceWriter()
    writer.line("# src is (outer, m, inner), dst (outer, n, inner), bits read flat.")
    writer.line("acc = np.empty(inner, np.float32)")
    writer.line("r = bounds[lo]")
    writer.line("end = bounds[hi]")
    with writer.block("while r < end:"):
        writer.line("o = r // n")
        writer.line("i = r - o * n")
        writer.line("k0 = offsets[i]")
        writer.line("k1 = offsets[i + 1]")
        writer.line("into = np.uintp(r * inner)")
        if not based:
            with writer.block("if k0 == k1:  # a run of rows without terms (in this slab): one contiguous fill"):
                writer.line(f"stop = {least('end', '(o + 1) * n')}")
                writer.line("r += 1")
                with writer.block("while r < stop and offsets[r - o * n] == offsets[r - o * n + 1]:"):
                    writer.line("r += 1")
                with writer.block("for c in range(np.uintp(r * inner - into)):"):
                    writer.line("dst[into + c] = np.uint16(0)")
                writer.line("continue")
        start = "widen(base[into + c])" if based else "np.float32(0)"
        with writer.block("if k1 - k0 == 1:  # one term: added to its start and rounded, no pass over acc"):
            _emit_prefetch(writer, f"k0 + {_AHEAD}")
            writer.line("f0 = np.uintp((o * m + order[k0]) * inner)")
            with writer.block("for c in range(np.uintp(inner)):"):
                writer.line(f"dst[into + c] = narrow({start} + widen(src[f0 + c]))")
            writer.line("r += 1")
            writer.line("continue")
        with writer.block("for c in range(np.uintp(inner)):"):
            writer.line(f"acc[c] = {start}")
        writer.line("k = k0")
        with writer.block(f"while k + {_TERMS} <= k1:  # {_TERMS} terms per pass over acc, added in order"):
            with writer.block(f"for j in range({_AHEAD}, {_AHEAD + _TERMS}):"):
                _emit_prefetch(writer, "k + j")
            terms = ""
            for j in range(_TERMS):
                writer.line(f"f{j} = np.uintp((o * m + order[k + {j}]) * inner)")
                terms += f" + widen(src[f{j} + c])"
            with writer.block("for c in range(np.uintp(inner)):"):
                writer.line(f"acc[c] = acc[c]{terms}")
            writer.line(f"k += {_TERMS}")
        with writer.block("while k < k1:"):
            _emit_prefetch(writer, f"k + {_AHEAD}")
            writer.line("f0 = np.uintp((o * m + order[k]) * inner)")
            with writer.block("for c in range(np.uintp(inner)):"):
                writer.line("acc[c] = acc[c] + widen(src[f0 + c])")
            writer.line("k += 1")
        with writer.block("for c in range(np.uintp(inner)):"):
            writer.line("dst[into + c] = narrow(acc[c])")
        writer.line("r += 1")
    parameters = [
        ("src", readonly_array("uint16")),
        *([("base", readonly_array("uint16"))] if based else []),
        ("offsets", readonly_array("intp")),
        ("order", readonly_array("intp")),
        ("dst", writable_array("uint16")),
        ("bounds", readonly_array("intp")),
        ("n", INDEX),
        ("m", INDEX),
        ("inner", INDEX),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    what = f"accumulate {format}{' onto base' if based else ''}: a deterministic scatter-add in float32"
    source = cpu_kernel(signature, parameters, writer, what, numpy=True, noalias=True, prefetch=True)
    return KernelSource(half_helpers(source.text, format), source.entry)


_CPU_RENDERERS: dict[str, Callable[..., KernelSource]] = {
    "gather": _render_gather,
    "balance": _render_balance,
    "accumulate": _render_accumulate,
    "gather-along": _render_gather_along,
    "scatter-along": _render_scatter_along,
    "buckets": _render_buckets,
    "accumulate-half": _render_accumulate_half,
    "scatter-along-half": _render_scatter_along_half,
}
_CUDA_RENDERERS: dict[str, Callable[..., KernelSource]] = {
    "gather": _render_gather_cuda,
    "merge": _render_merge_cuda,
    "offsets": _render_offsets_cuda,
    "accumulate": _render_accumulate_cuda,
    "atomic": _render_atomic_cuda,
    "gather-along": _render_gather_along_cuda,
    "scatter-along": _render_scatter_along_cuda,
    "accumulate-half": functools.partial(_render_accumulate_cuda, half=True),
    "scatter-along-half": functools.partial(_render_scatter_along_cuda, half=True),
}


@memoized(maxsize=512)
def _request(op: str, kind: str, dtype: str, target: str, options: tuple[object, ...] = ()) -> KernelRequest:
    """A kernel of the family: ``kind`` names its template, ``options`` its static choices."""
    signature = _signature(op, kind, options, dtype, target)
    renderers = _CUDA_RENDERERS if target == "cuda" else _CPU_RENDERERS
    render = renderers[kind]
    if kind in ("merge", "offsets", "balance", "buckets"):
        return KernelRequest(signature, lambda: render(signature))
    return KernelRequest(signature, lambda: render(signature, dtype, *options))


class _ScatterAdd:
    """The deterministic scatter-add ``dst = base + (src added at w along the axis)`` of one
    plan (``base`` zero unless ``based``): its kernels, chosen by the target and the
    ``sorted`` promise, and the launches that run them.

    CPU: one ``accumulate`` launch over parts of ``dst``'s rows (one part per thread where
    the work is split, ``_parallel``'s policy; of about equal cost from a per-bin count of the
    indices, the ``balance`` kernel, for one outer slab, else of equal rows). CUDA: a stable
    sort of the positions by index (``merge`` passes, then ``offsets``), then one thread per
    ``dst`` element sums its bucket in order."""

    def __init__(self, op: str, dtype: str, n: int, m: int, inner: int, outer: int, sorted_: bool, based: bool, target: str) -> None:
        self.n, self.m, self.inner, self.outer, self.based, self.target = n, m, inner, outer, based, target
        self.dtype = np.dtype(dtype)
        if target == "cuda":
            self.prepare_requests = [_request(op, "merge", "intp", target), _request(op, "offsets", "intp", target)]
            self.accumulate_request = _request(op, "accumulate", dtype, target, (based,))
            self.balance_request: KernelRequest | None = None
        else:
            self.prepare_requests = []
            self.accumulate_request = _request(op, "accumulate", dtype, target, ("sorted" if sorted_ else "scan", based))
            self.balance_request = _request(op, "balance", "intp", target) if outer == 1 else None
        self.shift = max(0, (n - 1).bit_length() - _BALANCE_BINS.bit_length() + 1) if n > 1 else 0

    def requests(self) -> list[KernelRequest]:
        balance = [self.balance_request] if self.balance_request is not None else []
        return [*self.prepare_requests, *balance, self.accumulate_request]

    def _bounds(self, w: ArrayLike, work: int) -> ArrayLike:
        """The CPU parts' row bounds. Each row is written by one part, its terms in order, so
        the bits do not depend on the split."""
        rows = self.outer * self.n
        parts = _parallel.thread_count() if work >= _parallel.PARALLEL_THRESHOLD and rows >= 2 else 1
        parts = max(1, min(parts, rows))
        bounds = np.empty(parts + 1, dtype=_INTP)
        if parts > 1 and self.balance_request is not None:
            cpu_launch(self.balance_request.get(), w, bounds, self.n, self.m, parts, self.shift, extent=1, work=0)
        else:
            bounds[:] = [rows * part // parts for part in range(parts + 1)]
        return bounds

    def run(self, src: ArrayLike, base: ArrayLike | None, w: ArrayLike, dst: ArrayLike, namespace: pytypes.ModuleType) -> None:
        """Write all of ``dst`` (flat, ``outer * n * inner``) from ``src`` (flat, ``outer * m *
        inner``), ``base`` (flat, as ``dst``; only when ``based``) and ``w`` (flat, wrapped)."""
        n, m, inner = self.n, self.m, self.inner
        kernel = self.accumulate_request.get()
        first: tuple[ArrayLike, ...] = (src, base) if base is not None else (src,)
        if self.target == "cuda":
            offsets, order = self._sort(w, namespace)
            if base is None:
                first = (src, namespace.zeros(1, dtype=self.dtype))
            cuda_launch(kernel, dst.size, *first, offsets, order, dst, n, m, inner, dst.size, work=max(m // max(n, 1), 1))
            return
        work = dst.size + src.size
        bounds = self._bounds(w, work)
        cpu_launch(kernel, *first, w, dst, bounds, n, m, inner, extent=len(bounds) - 1, work=work)

    def _sort(self, w: ArrayLike, namespace: pytypes.ModuleType) -> tuple[ArrayLike, ArrayLike]:
        """CUDA: ``order`` (the positions sorted by index, stably: merge passes of doubling
        width, ``ceil(log2 m)`` launches) and the bucket ``offsets`` (``n + 1``)."""
        merge, offsets_kernel = (request.get() for request in self.prepare_requests)
        n, m = self.n, self.m
        order = namespace.arange(max(m, 1), dtype=_INTP)
        spare = namespace.empty(max(m, 1), dtype=_INTP)
        width = 1
        while width < m:
            cuda_launch(merge, m, w, order, spare, m, width, m)
            order, spare = spare, order
            width *= 2
        offsets = namespace.empty(n + 1, dtype=_INTP)
        cuda_launch(offsets_kernel, n + 1, w, order, offsets, m, n + 1)
        return offsets, order


def _layout(shape: Shape, axis: int | None) -> tuple[int, int, int]:
    """``(outer, n, inner)`` around ``axis`` (``None``: the flattened array)."""
    if axis is None:
        return 1, math.prod(shape), 1
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _axis_of(op: str, axis: object, ndim: int) -> int | None:
    if axis is None:
        return None
    value = static_int(axis, "axis")
    try:
        return normalize_axis(value, ndim)
    except ValueError:
        raise np.exceptions.AxisError(f"{op}: axis {value} is out of bounds for an array of dimension {ndim}") from None


def _index_facts(op: str, indices: object, numpy_error: type[Exception]) -> InputFacts:
    facts = input_facts(indices, "indices", op)
    _check_indices_dtype(op, facts.dtype, numpy_error)
    return facts


# ======================================================================================
# take
# ======================================================================================


class _GatherPlan(Plan):
    """What take's and take_along_axis's plans share: the forward gathers ``x`` at the checked
    indices (``_indices``, a copy when the pullback keeps them) with the plan's ``_gather``."""

    op: str
    y_dtype: DType
    in_shape: Shape
    size: int
    y_size: int

    def _indices(self, arrays: tuple[object, ...], copy: bool) -> ArrayLike:
        raise NotImplementedError

    def _gather(self, source: ArrayLike, w: ArrayLike, dtype: DType) -> ArrayLike:
        raise NotImplementedError

    def forward(self, arrays: tuple[object, ...]) -> object:
        return self._forward(arrays, copy=False)[0]

    def forward_and_save(self, arrays: tuple[object, ...]) -> tuple[object, object]:
        return self._forward(arrays, copy=True)

    def _forward(self, arrays: tuple[object, ...], copy: bool) -> tuple[ArrayLike, ArrayLike]:
        x = arrays[0]
        if type(x) is not type(self.like):
            x = input_facts(x, "x", self.op).need_array(self.op)
        w = self._indices(arrays, copy)
        return self._gather(x, w, self.y_dtype), w

    def _empty_pullback(self) -> DensePullback:
        """The pullback where ``x`` or ``y`` is empty: zeros, no kernel."""
        in_shape, dtype, namespace = self.in_shape, self.out_dtype, self.namespace

        def empty_pullback(dy: ArrayLike) -> tuple[object, ...]:
            return (namespace.zeros(in_shape, dtype=dtype), NO_TANGENT)

        return empty_pullback

    def _dense_pullback(self, scatter: Callable[[ArrayLike, ArrayLike], None], zeros: bool = False) -> DensePullback:
        """``dy -> (dx, NoTangent())`` where ``scatter(dy_flat, dx_flat)`` writes all of a fresh
        ``dx`` (a pooled block on the CPU from 1 MiB up; ``zeros``: a zeroed one, for
        atomics)."""
        in_shape, dtype, namespace = self.in_shape, self.out_dtype, self.namespace
        allocate: Callable[..., ArrayLike]
        if zeros:
            allocate = namespace.zeros
        elif namespace is np:
            allocate = _pool.allocator(self.size * dtype.itemsize)
        else:
            allocate = namespace.empty

        def pullback(dy: ArrayLike) -> tuple[object, ...]:
            dx = allocate(in_shape, dtype)
            scatter(dy.reshape(-1), dx.reshape(-1))
            return (dx, NO_TANGENT)

        return pullback


class TakePlan(_GatherPlan):
    """``np.take(x, indices, axis)`` for one signature (shapes, dtypes, statics): the gather
    kernel (forward, pushforward) and the deterministic scatter-add (pullback)."""

    saves_primals = True
    saved_inputs = (1,)  # the indices: x (and values) may be ArraySpecs in sr.pullback

    def __init__(
        self, facts: InputFacts, index_facts: InputFacts, axis: int | None, unique: bool, sorted_: bool, deterministic: bool
    ) -> None:
        outer, n, inner = _layout(facts.shape, axis)
        m = math.prod(index_facts.shape)
        self.axis, self.outer, self.n, self.inner, self.m = axis, outer, n, inner, m
        self.unique, self.sorted = unique, sorted_
        out_shape = index_facts.shape if axis is None else facts.shape[:axis] + index_facts.shape + facts.shape[axis + 1 :]
        super().__init__("take", (facts, index_facts), out_shape=out_shape, namespace=facts.namespace)
        self.y_dtype = facts.dtype
        self.target = facts.target
        self.in_shape = facts.shape
        self.size = math.prod(facts.shape)
        self.y_size = checked_size(self.out_shape, facts.dtype.itemsize, "take")
        unit, factor = _unit_of(facts.dtype)
        self.unit, self.factor = unit, factor
        self.gather_request = _request("take", "gather", unit.name, facts.target)
        dtype = facts.native.name
        self.atomic = facts.target == "cuda" and not deterministic
        self.scatter = _ScatterAdd("take", dtype, n, m, inner, outer, sorted_, False, facts.target)
        self.atomic_request = _request("take", "atomic", dtype, facts.target) if self.atomic else None
        entries = set()
        if self.y_size:
            entries |= {"forward", "pushforward"}
            if self.size:
                entries.add("pullback")
        self.kernel_entries = frozenset(entries)

    def requests(self) -> list[KernelRequest]:
        if not self.y_size:
            return []
        requests = [self.gather_request]
        if self.differentiable:
            requests += [self.atomic_request] if self.atomic_request is not None else self.scatter.requests()
        return requests

    # --- data -----------------------------------------------------------------------------

    def save(self, arrays: tuple[object, ...]) -> object:
        return self._indices(arrays, copy=True)

    def _indices(self, arrays: tuple[object, ...], copy: bool) -> ArrayLike:
        facts = input_facts(arrays[1], "indices", "take")
        indices = facts.need_array("take")
        w = _wrapped_indices("take", indices, self.n, self.axis, copy).reshape(-1)
        _check_promises("take", w, self.n, self.unique, self.sorted)
        return w

    def _gather(self, source: ArrayLike, w: ArrayLike, dtype: DType) -> ArrayLike:
        namespace = self.namespace
        y: ArrayLike = namespace.empty(self.out_shape, dtype=dtype)
        if not self.y_size:
            return y
        kernel = self.gather_request.get()
        src = as_units(source, self.unit)
        out = y.reshape(-1).view(self.unit)
        inner = self.inner * self.factor
        if self.target == "cuda":
            cuda_launch(kernel, out.size, src, w, out, self.n, self.m, inner, out.size)
        else:
            cpu_launch(kernel, src, w, out, self.n, self.m, inner, extent=self.outer * self.m, work=out.size)
        return y

    def pullback(self, saved: object) -> DensePullback:
        w: ArrayLike = saved  # type: ignore[assignment]
        namespace = self.namespace
        if not self.size or not self.y_size:
            return self._empty_pullback()
        if self.atomic_request is not None:
            kernel = self.atomic_request.get()
            n, m, inner = self.n, self.m, self.inner
            real = np.dtype(np.float32) if self.out_dtype.name in ("float32", "complex64") else np.dtype(np.float64)

            def atomic(dy: ArrayLike, dx: ArrayLike) -> None:
                cuda_launch(kernel, dy.size, dy, w, dx.view(real), n, m, inner, dy.size)

            return self._dense_pullback(atomic, zeros=True)
        scatter = self.scatter

        def deterministic(dy: ArrayLike, dx: ArrayLike) -> None:
            scatter.run(dy, None, w, dx, namespace)

        return self._dense_pullback(deterministic)

    def half_requests(self, dtype: DType) -> list[KernelRequest]:
        """The kernels :meth:`half_pullback` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        if self.atomic or not self.size or not self.y_size:
            return []
        if self.target == "cuda":
            return [*self.scatter.prepare_requests, _request("take", "accumulate-half", dtype.name, "cuda")]
        return [_request("take", "buckets", "intp", "cpu"), _request("take", "accumulate-half", dtype.name, "cpu")]

    def half_pullback(self, saved: object, dtype: DType) -> DensePullback | None:
        """For a 16-bit ``x`` of ``dtype`` (this plan being its float32 stand-in's, see
        ``stablerules._half``): ``dy -> (dx, NoTangent())`` (``dy`` native, C-ordered, of
        ``dtype``), the scatter-add
        reading and writing the 16-bit bits and summing in float32 (the deterministic
        scatter-add's order: the same bits for every thread count). ``None`` where it does not
        apply (atomics, empty arrays): the caller converts around :meth:`pullback`. CUDA: the
        float32 route's stable sort of the positions, then one thread per ``dx`` element sums
        its bucket's widened terms in order and rounds once (the same bits every run)."""
        if self.atomic or not self.size or not self.y_size:
            return None
        if self.target == "cuda":
            return self._half_pullback_cuda(saved, dtype)
        w: ArrayLike = saved  # type: ignore[assignment]
        buckets = _request("take", "buckets", "intp", "cpu").get()
        accumulate = _request("take", "accumulate-half", dtype.name, "cpu").get()
        n, m, inner, rows, size = self.n, self.m, self.inner, self.outer * self.n, self.size
        allocate = _pool.allocator(size * 2)
        uint16 = np.dtype(np.uint16)

        shape = self.in_shape

        outer, work = self.outer, size + self.y_size

        def pullback(dy: ArrayLike) -> tuple[object, ...]:
            # The parts split the rows, not the sums: the bits do not depend on their number.
            parts = min(_parallel.thread_count(), rows) if work >= _parallel.PARALLEL_THRESHOLD else 1
            offsets = np.empty(n + 1, dtype=_INTP)
            order = np.empty(max(m, 1), dtype=_INTP)
            bounds = np.empty(parts + 1, dtype=_INTP)
            cpu_launch(buckets, w, offsets, order, bounds, n, m, outer, parts, extent=1, work=0)
            dx = allocate((size,), uint16)
            bits = dy.reshape(-1).view(uint16)
            cpu_launch(accumulate, bits, offsets, order, dx, bounds, n, m, inner, extent=parts, work=work)
            return (dx.view(dtype).reshape(shape), NO_TANGENT)

        return pullback

    def _half_pullback_cuda(self, saved: object, dtype: DType) -> DensePullback:
        w: ArrayLike = saved  # type: ignore[assignment]
        accumulate = _request("take", "accumulate-half", dtype.name, "cuda").get()
        scatter, namespace = self.scatter, self.namespace
        n, m, inner, size, shape = self.n, self.m, self.inner, self.size, self.in_shape
        uint16 = np.dtype(np.uint16)
        work = max(m // max(n, 1), 1)

        def pullback(dy: ArrayLike) -> tuple[object, ...]:
            offsets, order = scatter._sort(w, namespace)
            dx = namespace.empty(size, dtype=uint16)
            cuda_launch(accumulate, size, dy.reshape(-1).view(uint16), offsets, order, dx, n, m, inner, size, work=work)
            return (dx.view(dtype).reshape(shape), NO_TANGENT)

        return pullback

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        """A constant cotangent: each row of ``dx`` is the constant times its index count."""
        w: ArrayLike = saved  # type: ignore[assignment]
        namespace = self.namespace
        counts = namespace.bincount(w, minlength=self.n).astype(self.out_dtype) if w.size else namespace.zeros(self.n, dtype=self.out_dtype)
        rows = counts * namespace.asarray(fill.value, dtype=self.out_dtype)
        dx = namespace.broadcast_to(rows.reshape(1, self.n, 1), (self.outer, self.n, self.inner))
        return (namespace.ascontiguousarray(dx).reshape(self.in_shape), NO_TANGENT)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        tangent = tangents[0]
        if isinstance(tangent, DenseCotangent):
            return self._gather(tangent.array, self._indices(arrays, copy=False), self.out_dtype)
        if isinstance(tangent, Fill):
            self._indices(arrays, copy=False)  # the indices are checked whatever the tangent
            return Fill(tangent.value, self.out_shape, self.out_dtype)
        return tangent


class Take(RuleOp):
    name = "take"
    static_names = ("axis", "unique", "sorted", "deterministic")
    input_names = ("x", "indices")

    def __call__(
        self,
        x: npt.NDArray[_DT],
        indices: npt.NDArray[np.integer] | Sequence[int],
        axis: int | Val[int] | None = None,
        *,
        unique: Val[bool] | bool = Val(False),
        sorted: Val[bool] | bool = Val(False),
        deterministic: Val[bool] | bool = Val(True),
    ) -> npt.NDArray[_DT]:
        """``np.take(x, indices, axis)``: elements (``axis=None``: of the flattened ``x``) or
        slices along ``axis`` (``Val(int)``, static) at ``indices`` (an integer array of any
        shape, data; negative entries count from the end; out of range is an ``IndexError``).

        ``unique=Val(True)``/``sorted=Val(True)`` promise distinct / non-decreasing indices
        (after wrapping) and select simpler pullback kernels; a broken promise is a
        ``ValueError``. ``deterministic=Val(False)`` lets the CUDA pullback use atomics.

        Rules: ``back(dy)`` returns ``(dx, NoTangent())`` (plus ``NoTangent()`` for an axis
        given positionally): ``dx`` is ``dy`` scatter-added at the indices, deterministic (the
        same bits on every run and thread count, those of ``np.add.at`` on zeros). A ``Fill``
        cotangent gives each row the constant times its index count; the pushforward is the
        tangent taken at the same indices (a ``Fill`` stays one).
        """
        return self.forward(x, indices, axis, unique=unique, sorted=sorted, deterministic=deterministic)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", "take")
        index_facts = _index_facts("take", arrays[1], TypeError)
        axis, unique, sorted_, deterministic = statics
        return TakePlan(
            facts,
            index_facts,
            _axis_of("take", axis, len(facts.shape)),
            static_bool(unique, "unique"),
            static_bool(sorted_, "sorted"),
            static_bool(deterministic, "deterministic"),
        )


take = Take()


# ======================================================================================
# take_along_axis
# ======================================================================================


class TakeAlongAxisPlan(_GatherPlan):
    """``np.take_along_axis(x, indices, axis)`` for one signature: gathers (forward,
    pushforward) and the per-row deterministic scatter-add (pullback)."""

    saves_primals = True
    saved_inputs = (1,)  # the indices: x (and values) may be ArraySpecs in sr.pullback

    def __init__(self, facts: InputFacts, index_facts: InputFacts, axis: int | None) -> None:
        shape, ishape = facts.shape, index_facts.shape
        if axis is None:
            if len(ishape) != 1:
                raise ValueError(
                    f"take_along_axis: when axis=None, indices must have a single dimension, got shape {shape_text(ishape)}"
                )
            out_shape: Shape = ishape
        else:
            if len(ishape) != len(shape):
                raise ValueError(
                    f"take_along_axis: indices and x must have the same number of dimensions, got "
                    f"indices of shape {shape_text(ishape)} and x of shape {shape_text(shape)}"
                )
            out = []
            for d, (a, b) in enumerate(zip(shape, ishape)):
                if d == axis or b == a or a == 1:
                    out.append(b)
                elif b == 1:
                    out.append(a)
                else:
                    raise ValueError(
                        f"take_along_axis: indices of shape {shape_text(ishape)} do not match x of shape "
                        f"{shape_text(shape)} on axis {d} (the axes other than axis {axis} must be equal "
                        f"or 1, to broadcast)"
                    )
            out_shape = tuple(out)
        super().__init__("take_along_axis", (facts, index_facts), out_shape=out_shape, namespace=facts.namespace)
        self.axis = axis
        self.index_shape = ishape
        # x broadcast against indices on the other axes: what the kernels read (x itself
        # unless an extent 1 of x meets a larger one of indices).
        x_shape = shape if axis is None else out_shape[:axis] + (shape[axis],) + out_shape[axis + 1 :]
        self.x_shape = x_shape
        self.broadcast_axes = tuple(d for d, (a, b) in enumerate(zip(shape, x_shape)) if a != b)
        if self.broadcast_axes:
            checked_size(x_shape, facts.dtype.itemsize, "take_along_axis (x broadcast against indices)")
        outer, n, inner = _layout(x_shape, axis)
        m = 1 if axis is None else out_shape[axis]
        if axis is None:
            m = math.prod(ishape)
        self.outer, self.n, self.inner, self.m = outer, n, inner, m
        self.y_dtype = facts.dtype
        self.target = facts.target
        self.in_shape = shape
        self.size = math.prod(x_shape)
        self.y_size = checked_size(out_shape, facts.dtype.itemsize, "take_along_axis")
        self.unit, self.factor = _unit_of(facts.dtype)
        # A 16-byte element is two units: the gather reads the units of the index's element.
        self.gather_request = _request("take_along_axis", "gather-along", self.unit.name, facts.target)
        self.scatter_request = _request("take_along_axis", "scatter-along", facts.native.name, facts.target)
        entries = set()
        if self.y_size:
            entries |= {"forward", "pushforward"}
            if self.size:
                entries.add("pullback")
        self.kernel_entries = frozenset(entries)

    def requests(self) -> list[KernelRequest]:
        if not self.y_size:
            return []
        return [self.gather_request] + ([self.scatter_request] if self.differentiable else [])

    def save(self, arrays: tuple[object, ...]) -> object:
        return self._indices(arrays, copy=True)

    def _indices(self, arrays: tuple[object, ...], copy: bool) -> ArrayLike:
        indices = input_facts(arrays[1], "indices", "take_along_axis").need_array("take_along_axis")
        w = _wrapped_indices("take_along_axis", indices, self.n, self.axis, copy)
        namespace = array_namespace(w)
        if w.shape != self.out_shape:
            w = namespace.ascontiguousarray(namespace.broadcast_to(w, self.out_shape))
        flat: ArrayLike = w.reshape(-1)
        return flat

    def _gather(self, source: ArrayLike, w: ArrayLike, dtype: DType) -> ArrayLike:
        y: ArrayLike = self.namespace.empty(self.out_shape, dtype=dtype)
        if not self.y_size:
            return y
        kernel = self.gather_request.get()
        unit, factor = self.unit, self.factor
        if self.broadcast_axes:  # read as the C-ordered copy of x broadcast against indices
            source = self.namespace.broadcast_to(source, self.x_shape)
        src = as_units(source, unit)
        out = y.reshape(-1).view(unit)
        n, m, inner = self.n, self.m, self.inner
        if factor > 1:  # an element is `factor` units: each unit of (outer, m, inner, factor) takes its element's index
            w = self.namespace.repeat(w, factor)
            inner *= factor
        if self.target == "cuda":
            cuda_launch(kernel, out.size, src, w, out, n, m, inner, out.size)
        else:
            cpu_launch(kernel, src, w, out, n, m, inner, extent=self.outer, work=out.size)
        return y

    def pullback(self, saved: object) -> DensePullback:
        w: ArrayLike = saved  # type: ignore[assignment]
        if not self.size or not self.y_size:
            return self._empty_pullback()
        kernel = self.scatter_request.get()
        n, m, inner, outer = self.n, self.m, self.inner, self.outer
        if self.target == "cuda":
            zero = self.namespace.zeros(1, dtype=self.out_dtype)

            def gather(dy: ArrayLike, dx: ArrayLike) -> None:
                cuda_launch(kernel, dx.size, dy, zero, w, dx, n, m, inner, dx.size, work=m)

            return self._summed_pullback(gather) if self.broadcast_axes else self._dense_pullback(gather)

        def rows(dy: ArrayLike, dx: ArrayLike) -> None:
            cpu_launch(kernel, dy, w, dx, n, m, inner, extent=outer, work=dx.size + dy.size)

        return self._summed_pullback(rows) if self.broadcast_axes else self._dense_pullback(rows)

    def half_requests(self, dtype: DType) -> list[KernelRequest]:
        """The kernel :meth:`half_pullback` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        if self.broadcast_axes or not self.size or not self.y_size:
            return []
        return [_request("take_along_axis", "scatter-along-half", dtype.name, self.target)]

    def half_pullback(self, saved: object, dtype: DType) -> DensePullback | None:
        """For a 16-bit ``x`` of ``dtype`` (this plan being its float32 stand-in's, see
        ``stablerules._half``): ``dy -> (dx, NoTangent())`` (``dy`` native, C-ordered, of
        ``dtype``), the per-row scatter-add reading ``dy``'s bits and writing ``dx``'s, summed
        in a float32 row in the float32 kernel's order (CUDA: one thread per ``dx`` element,
        summing over ``k`` in order, as the float32 CUDA kernel). ``None`` where it does not
        apply (``x`` broadcast against the indices, empty arrays)."""
        requests = self.half_requests(dtype)
        if not requests:
            return None
        kernel = requests[0].get()
        w: ArrayLike = saved  # type: ignore[assignment]
        n, m, inner, outer, size, shape = self.n, self.m, self.inner, self.outer, self.size, self.in_shape
        if self.target == "cuda":
            empty, half_bits = self.namespace.empty, np.dtype(np.uint16)

            def cuda_pullback(dy: ArrayLike) -> tuple[object, ...]:
                dx = empty(size, dtype=half_bits)
                cuda_launch(kernel, size, dy.reshape(-1).view(half_bits), w, dx, n, m, inner, size, work=m)
                return (dx.view(dtype).reshape(shape), NO_TANGENT)

            return cuda_pullback
        allocate = _pool.allocator(size * 2)
        uint16 = np.dtype(np.uint16)

        def pullback(dy: ArrayLike) -> tuple[object, ...]:
            dx = allocate((size,), uint16)
            bits = dy.reshape(-1).view(uint16)
            cpu_launch(kernel, bits, w, dx, n, m, inner, extent=outer, work=size + bits.size)
            return (dx.view(dtype).reshape(shape), NO_TANGENT)

        return pullback

    def _summed_pullback(self, scatter: Callable[[ArrayLike, ArrayLike], None]) -> DensePullback:
        """Where ``x`` was broadcast against ``indices``: the scatter-add into ``dx`` of the
        broadcast shape, then summed over the broadcast axes (NumPy's ``sum``, deterministic
        for a given shape), as the adjoint of a broadcast is."""
        x_shape, in_shape, axes = self.x_shape, self.in_shape, self.broadcast_axes
        dtype, namespace = self.out_dtype, self.namespace

        def summed_pullback(dy: ArrayLike) -> tuple[object, ...]:
            wide: ArrayLike = namespace.empty(x_shape, dtype=dtype)
            scatter(dy.reshape(-1), wide.reshape(-1))
            dx: ArrayLike = namespace.ascontiguousarray(wide.sum(axis=axes, keepdims=True).reshape(in_shape))
            return (dx, NO_TANGENT)

        return summed_pullback

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        tangent = tangents[0]
        w = self._indices(arrays, copy=False)
        if isinstance(tangent, DenseCotangent):
            return self._gather(tangent.array, w, self.out_dtype)
        if isinstance(tangent, Fill):
            return Fill(tangent.value, self.out_shape, self.out_dtype)
        return tangent


class TakeAlongAxis(RuleOp):
    name = "take_along_axis"
    required_messages = {"axis": "take_along_axis: axis is required (Val(int), or None for the flattened array)"}
    absent_default = "missing"  # None is an axis here (the flattened array)
    static_names = ("axis",)
    input_names = ("x", "indices")

    def __call__(self, x: npt.NDArray[_DT], indices: npt.NDArray[np.integer], axis: object) -> Any:
        """``np.take_along_axis(x, indices, axis)``: ``y[..., t, ...] = x[..., indices[..., t,
        ...], ...]`` along ``axis`` (``Val(int)``, static; ``None``: ``x`` flattened and
        ``indices`` 1-D). ``indices`` (data, integers, negative wrapped) and ``x`` broadcast
        against each other on the other axes, both ways, as in NumPy 2.

        Rules: ``back(dy)`` returns ``(dx, NoTangent())`` (plus one for an axis given
        positionally): ``dy`` scatter-added along ``axis``, deterministic (each row of
        ``dx`` is written by one thread, terms in order: the bits of ``np.add.at`` on
        zeros). The pushforward is the tangent taken along the axis.
        """
        return self.forward(x, indices, axis)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", "take_along_axis")
        index_facts = _index_facts("take_along_axis", arrays[1], IndexError)
        axis = _axis_of("take_along_axis", statics[0], len(facts.shape))
        return TakeAlongAxisPlan(facts, index_facts, axis)


take_along_axis = TakeAlongAxis()


# ======================================================================================
# index_add
# ======================================================================================


class IndexAddPlan(Plan):
    """``x`` with ``values`` added at ``indices`` along ``axis``: the deterministic
    accumulation onto ``x`` (forward, pushforward), and the pullback ``(dy, take(dy))``."""

    saves_primals = True
    saved_inputs = (1,)  # the indices: x (and values) may be ArraySpecs in sr.pullback

    def __init__(self, facts: InputFacts, index_facts: InputFacts, value_facts: InputFacts, axis: int) -> None:
        if facts.dtype.kind == "b":
            raise TypeError("index_add: x has dtype bool; index_add adds, so x must be numeric")
        if len(index_facts.shape) != 1:
            raise ValueError(f"index_add: indices must be 1-D, got shape {shape_text(index_facts.shape)}")
        if not np.can_cast(value_facts.native, facts.native, casting="same_kind"):
            raise TypeError(
                f"index_add: values of dtype {value_facts.native} cannot be added into x of dtype "
                f"{facts.native} (casting rule 'same_kind')"
            )
        shape = facts.shape
        m = index_facts.shape[0]
        target_shape = shape[:axis] + (m,) + shape[axis + 1 :]
        try:
            broadcast = np.broadcast_shapes(value_facts.shape, target_shape)
        except ValueError:
            broadcast = None
        if broadcast != target_shape:
            raise ValueError(
                f"index_add: values of shape {shape_text(value_facts.shape)} do not broadcast to "
                f"{shape_text(target_shape)} (x of shape {shape_text(shape)} with axis {axis} "
                f"replaced by len(indices) = {m})"
            )
        super().__init__("index_add", (facts, index_facts, value_facts), out_shape=shape, namespace=facts.namespace)
        self.axis = axis
        self.values_shape = value_facts.shape
        self.target_shape = target_shape
        outer, n, inner = _layout(shape, axis)
        self.outer, self.n, self.inner, self.m = outer, n, inner, m
        self.y_dtype = facts.native
        # The primal keeps x's byte order, as np.add.at on a copy of x does (the kernels add
        # in native order; a non-native result is one byte-swapping copy); tangents are native.
        self.result_dtype = facts.dtype
        values_diff = self.input_tangents[2]
        self.values_dtype = value_facts.native
        self.target = facts.target
        # values of a wider float dtype than x's, on the CPU: np.add.at's own arithmetic (_accumulate)
        self.wider_values = (
            facts.target == "cpu" and facts.native.kind in "fc" and np.result_type(facts.native, value_facts.native) != facts.native
        )
        self.size = checked_size(shape, facts.dtype.itemsize, "index_add")
        # Axes along which values was broadcast: summed in dvalues.
        lead = len(target_shape) - len(value_facts.shape)
        self.reduce_axes = tuple(range(lead)) + tuple(
            lead + d for d, extent in enumerate(value_facts.shape) if extent == 1 and target_shape[lead + d] != 1
        )
        self.scatter = _ScatterAdd("index_add", facts.native.name, n, m, inner, outer, False, True, facts.target)
        self.unit, self.factor = _unit_of(facts.native)
        self.gather_request = _request("index_add", "gather", self.unit.name, facts.target)
        entries = {"forward", "pushforward"} if self.size else set()
        if self.size and values_diff and m:
            entries.add("pullback")
        self.kernel_entries = frozenset(entries)

    def requests(self) -> list[KernelRequest]:
        if not self.size:
            return []
        requests = self.scatter.requests()
        if self.input_tangents[2]:
            requests.append(self.gather_request)
        return requests

    def save(self, arrays: tuple[object, ...]) -> object:
        return self._indices(arrays, copy=True)

    def _indices(self, arrays: tuple[object, ...], copy: bool) -> ArrayLike:
        indices = input_facts(arrays[1], "indices", "index_add").need_array("index_add")
        flat: ArrayLike = _wrapped_indices("index_add", indices, self.n, self.axis, copy).reshape(-1)
        return flat

    def _accumulate(self, base: ArrayLike, values: ArrayLike, w: ArrayLike) -> ArrayLike:
        namespace, dtype = self.namespace, self.y_dtype
        y: ArrayLike = namespace.empty(self.out_shape, dtype=dtype)
        if not self.size:
            return y
        if self.wider_values:
            # float32 x, float64 values: np.add.at adds each term in float64 and rounds to
            # float32 after each add, which adding values cast to float32 does not reproduce.
            # Such a signature (its dtypes are part of it) runs NumPy's own np.add.at, on the
            # same (outer, n, inner) view and in the same order of terms; on CUDA the values
            # are cast first (a documented difference, README).
            y[...] = base
            np.add.at(
                y.reshape(self.outer, self.n, self.inner),
                (slice(None), w, slice(None)),  # type: ignore[arg-type]  # numpy's stub takes no tuple index
                np.broadcast_to(values, self.target_shape).reshape(self.outer, self.m, self.inner),
            )
            return y
        src = namespace.ascontiguousarray(namespace.broadcast_to(values.astype(dtype, copy=False), self.target_shape)).reshape(-1)
        if not src.size:
            src = namespace.zeros(1, dtype=dtype)
        elif namespace is np and not src.flags.writeable:  # a broadcast view: Numba's CUDA copies arguments back
            src = src.copy()
        self.scatter.run(src, _flat(base, dtype), w, y.reshape(-1), namespace)
        return y

    def forward(self, arrays: tuple[object, ...]) -> object:
        return self._forward(arrays, copy=False)[0]

    def forward_and_save(self, arrays: tuple[object, ...]) -> tuple[object, object]:
        return self._forward(arrays, copy=True)

    def half_forward_requests(self, dtype: DType) -> list[KernelRequest]:
        """The kernels :meth:`half_forward` runs for a 16-bit ``dtype`` (for ``precompile``)."""
        if not self.size:
            return []
        if self.target == "cuda":
            return [*self.scatter.prepare_requests, _request("index_add", "accumulate-half", dtype.name, "cuda", (True,))]
        return [_request("index_add", "buckets", "intp", "cpu"), _request("index_add", "accumulate-half", dtype.name, "cpu", (True,))]

    def half_forward(self, dtype: DType) -> Callable[[tuple[object, ...], bool], tuple[ArrayLike, ArrayLike]] | None:
        """For ``x`` and ``values`` of one 16-bit ``dtype`` (this plan being the float32
        stand-ins', see ``stablerules._half``): ``(arrays, copy) -> (y, w)``, the accumulation
        onto ``x`` reading both as bits and writing ``y``'s, each row summed in float32 from
        ``x``'s value in index-position order and rounded once (CUDA: the stable sort of the
        positions, then one thread per ``y`` element). ``None`` where it does not apply
        (empty ``x``)."""
        requests = self.half_forward_requests(dtype)
        if not requests:
            return None
        if self.target == "cuda":
            return self._half_forward_cuda(dtype)
        buckets, accumulate = (request.get() for request in requests)
        n, m, inner, outer, size = self.n, self.m, self.inner, self.outer, self.size
        rows, work, shape, target_shape = outer * n, size + outer * m * inner, self.out_shape, self.target_shape
        uint16 = np.dtype(np.uint16)

        def forward(arrays: tuple[object, ...], copy: bool) -> tuple[ArrayLike, ArrayLike]:
            x = cast(ArrayLike, arrays[0])  # NumPy arrays of dtype (the caller checked)
            values = cast(ArrayLike, arrays[2])
            w = self._indices(arrays, copy)
            base = np.ascontiguousarray(x).reshape(-1).view(uint16)
            src = np.ascontiguousarray(np.broadcast_to(values, target_shape)).reshape(-1).view(uint16)
            parts = min(_parallel.thread_count(), rows) if work >= _parallel.PARALLEL_THRESHOLD else 1
            offsets = np.empty(n + 1, dtype=_INTP)
            order = np.empty(max(m, 1), dtype=_INTP)
            bounds = np.empty(parts + 1, dtype=_INTP)
            cpu_launch(buckets, w, offsets, order, bounds, n, m, outer, parts, extent=1, work=0)
            y = np.empty(size, dtype=uint16)
            source = src if src.size else np.zeros(1, uint16)
            cpu_launch(accumulate, source, base, offsets, order, y, bounds, n, m, inner, extent=parts, work=work)
            return y.view(dtype).reshape(shape), w

        return forward

    def _half_forward_cuda(self, dtype: DType) -> Callable[[tuple[object, ...], bool], tuple[ArrayLike, ArrayLike]]:
        accumulate = _request("index_add", "accumulate-half", dtype.name, "cuda", (True,)).get()
        scatter, namespace = self.scatter, self.namespace
        n, m, inner, size, shape, target_shape = self.n, self.m, self.inner, self.size, self.out_shape, self.target_shape
        uint16 = np.dtype(np.uint16)

        def forward(arrays: tuple[object, ...], copy: bool) -> tuple[ArrayLike, ArrayLike]:
            x = cast(ArrayLike, arrays[0])  # arrays of dtype (the caller checked)
            values = cast(ArrayLike, arrays[2])
            w = self._indices(arrays, copy)
            base = namespace.ascontiguousarray(x).reshape(-1).view(uint16)
            src = namespace.ascontiguousarray(namespace.broadcast_to(values, target_shape)).reshape(-1).view(uint16)
            if not src.size:
                src = namespace.zeros(1, dtype=uint16)
            elif namespace is np and not src.flags.writeable:  # Numba's CUDA copies arguments back
                src = src.copy()
            offsets, order = scatter._sort(w, namespace)
            y = namespace.empty(size, dtype=uint16)
            cuda_launch(accumulate, size, src, base, offsets, order, y, n, m, inner, size, work=max(m // max(n, 1), 1))
            return y.view(dtype).reshape(shape), w

        return forward

    def _forward(self, arrays: tuple[object, ...], copy: bool) -> tuple[ArrayLike, ArrayLike]:
        x, _, values = arrays
        x_array = input_facts(x, "x", "index_add").need_array("index_add")
        values_array = input_facts(values, "values", "index_add").need_array("index_add")
        w = self._indices(arrays, copy)
        y = self._accumulate(x_array, values_array, w)
        if self.result_dtype != self.y_dtype:
            y = y.astype(self.result_dtype)
        return y, w

    def _take(self, dy: ArrayLike, w: ArrayLike) -> ArrayLike:
        """``take(dy, w, axis)`` as ``values``' tangent: summed over broadcast axes, cast."""
        namespace = self.namespace
        taken: ArrayLike = namespace.empty(self.target_shape, dtype=self.out_dtype)
        if taken.size:
            kernel = self.gather_request.get()
            src, out = as_units(dy, self.unit), taken.reshape(-1).view(self.unit)
            inner = self.inner * self.factor
            if self.target == "cuda":
                cuda_launch(kernel, out.size, src, w, out, self.n, self.m, inner, out.size)
            else:
                cpu_launch(kernel, src, w, out, self.n, self.m, inner, extent=self.outer * self.m, work=out.size)
        if self.reduce_axes:
            taken = namespace.asarray(taken.sum(axis=self.reduce_axes)).reshape(self.values_shape)
        if self.values_dtype != self.out_dtype:
            taken = taken.real.astype(self.values_dtype) if self.values_dtype.kind == "f" else taken.astype(self.values_dtype)
        return taken

    def pullback(self, saved: object) -> DensePullback:
        w: ArrayLike = saved  # type: ignore[assignment]
        values_diff = self.input_tangents[2]
        values_shape, values_dtype, namespace = self.values_shape, self.values_dtype, self.namespace
        take_dy = self._take

        def index_add_pullback(dy: ArrayLike) -> tuple[object, ...]:
            dx = writable(dy)  # dy itself, unless it is read-only
            if not values_diff:
                return (dx, NO_TANGENT, NO_TANGENT)
            if not w.size:
                return (dx, NO_TANGENT, namespace.zeros(values_shape, dtype=values_dtype))
            return (dx, NO_TANGENT, take_dy(dy, w))

        return index_add_pullback

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        factor = math.prod(self.target_shape) // max(math.prod(self.values_shape), 1) if self.values_shape else math.prod(self.target_shape)
        dvalues: object = NO_TANGENT
        if self.input_tangents[2]:
            value = np.asarray(fill.value, dtype=self.out_dtype) * factor
            if self.values_dtype.kind == "f":
                value = value.real
            dvalues = Fill(value.astype(self.values_dtype).item(), self.values_shape, self.values_dtype)
        return (fill, NO_TANGENT, dvalues)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        x_tangent, _, v_tangent = tangents
        w = self._indices(arrays, copy=False)
        namespace, dtype = self.namespace, self.out_dtype
        if isinstance(v_tangent, ZeroTangent):  # nothing is added: the tangent of x passes through
            empty_launch()
            return x_tangent.array if isinstance(x_tangent, DenseCotangent) else x_tangent
        base = x_tangent.array if isinstance(x_tangent, DenseCotangent) else namespace.asarray(
            namespace.zeros(self.out_shape, dtype=dtype) if isinstance(x_tangent, ZeroTangent) else np.asarray(x_tangent)
        )
        values = v_tangent.array if isinstance(v_tangent, DenseCotangent) else namespace.asarray(np.asarray(v_tangent))
        return self._accumulate(base, values, w)


class IndexAdd(RuleOp):
    name = "index_add"
    static_names = ("axis",)
    input_names = ("x", "indices", "values")

    def __call__(self, x: npt.NDArray[_DT], indices: object, values: object, axis: object = Val(0)) -> Any:
        """Out of place ``index_add``: a copy of ``x`` with ``values`` added at ``indices``
        (1-D integers, data, negative wrapped) along ``axis`` (``Val(int)``, static), repeats
        accumulated in index order (``np.add.at`` on a copy; torch's ``index_add``; JAX's
        ``x.at[...].add``). ``values`` has ``x``'s shape with ``axis`` replaced by
        ``len(indices)``, or broadcasts to it.

        Rules: ``back(dy)`` returns ``(dy, NoTangent(), dvalues)`` (plus one for an axis given
        positionally) with ``dvalues = take(dy, indices, axis)`` (summed over the axes along
        which ``values`` was broadcast). A ``Fill`` cotangent gives ``Fill``s. The
        pushforward is ``index_add(dx, indices, dvalues)``, deterministic as the forward.
        """
        return self.forward(x, indices, values, axis)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", "index_add")
        index_facts = _index_facts("index_add", arrays[1], IndexError)
        value_facts = input_facts(arrays[2], "values", "index_add")
        axis = _axis_of("index_add", statics[0], len(facts.shape))
        if axis is None:
            raise TypeError("index_add: axis must be Val(int)")
        return IndexAddPlan(facts, index_facts, value_facts, axis)


index_add = IndexAdd()


__all__ = [
    "Getindex",
    "GetindexPlan",
    "IndexAdd",
    "IndexAddPlan",
    "StaticIndex",
    "Take",
    "TakeAlongAxis",
    "TakeAlongAxisPlan",
    "TakePlan",
    "getindex",
    "index_add",
    "ix",
    "take",
    "take_along_axis",
]


# --- engine facts (stablerules._facts) -------------------------------------------------------

# No sharding rule yet for the indexing ops (shard=None): DTensor inputs are refused with a message.
def _batch_take(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """take under a batch axis. Unbatched indices: the same take with the axis shifted (each
    sample flattened for ``axis=None``). Batched indices: one take on the batch flattened
    into the axis, each sample's indices offset into its own block (range-checked and
    wrapped first)."""
    x, indices = arrays
    axis = cast("int | None", _facts.value(call.static("axis")))
    if not batched[1]:
        if axis is None:
            return ops.forward(call.replace(axis=Val(1)), (ops.reshape(x, (size, -1)), indices))
        return ops.forward(call.replace(axis=Val(_facts.shifted(axis))), (x, indices))
    x = x if batched[0] else ops.expand(x, size)
    if axis is None:
        x = ops.reshape(x, (size, -1))
        a = 1
    else:
        a = _facts.shifted(axis) if axis >= 0 else axis + len(ops.shape(x))
    n = ops.shape(x)[a]
    k = len(ops.shape(indices)) - 1
    wrapped = ops.wrapped(call, indices, n, None if axis is None else a - 1)
    moved = ops.movedim(x, a, 1)
    flat = ops.reshape(moved, (size * n, *ops.shape(moved)[2:]))
    y = ops.forward(call.replace(axis=Val(0)), (flat, ops.add(wrapped, ops.offsets(size, n, k + 1, x))))[0]
    return (ops.movedim(y, tuple(range(1, 1 + k)), tuple(range(a, a + k))),)


def _batch_take_along_axis(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """take_along_axis under a batch axis: the axis shifted (each sample flattened for
    ``axis=None``)."""
    x, indices = _facts.expanded(ops, arrays, batched, size)
    axis = cast("int | None", _facts.value(call.static("axis")))
    if axis is None:
        return ops.forward(call.replace(axis=Val(1)), (ops.reshape(x, (size, -1)), indices))
    return ops.forward(call.replace(axis=Val(_facts.shifted(axis))), (x, indices))


def _batch_index_add(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """index_add under a batch axis. Unbatched indices: the axis shifted. Batched ones: one
    index_add on the batch flattened into the axis, each sample's indices offset into its
    own block."""
    x, indices, values = arrays
    axis = cast("int", _facts.value(call.static("axis", Val(0))))
    x = x if batched[0] else ops.expand(x, size)
    values = values if batched[2] else ops.expand(values, size)
    if not batched[1]:
        return ops.forward(call.replace(axis=Val(_facts.shifted(axis))), (x, indices, values))
    a = _facts.shifted(axis) if axis >= 0 else axis + len(ops.shape(x))
    n, k = ops.shape(x)[a], ops.shape(indices)[1]
    wrapped = ops.wrapped(call, indices, n, a - 1)
    moved_x, moved_v = ops.movedim(x, a, 1), ops.movedim(values, a, 1)
    flat_x = ops.reshape(moved_x, (size * n, *ops.shape(moved_x)[2:]))
    flat_v = ops.reshape(moved_v, (size * k, *ops.shape(moved_v)[2:]))
    flat_i = ops.reshape(ops.add(wrapped, ops.offsets(size, n, 2, x)), (-1,))
    y = ops.forward(call.replace(axis=Val(0)), (flat_x, flat_i, flat_v))[0]
    return (ops.movedim(ops.reshape(y, ops.shape(moved_x)), 1, a),)


def _forward_getindex(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    """Basic indexing; a negative-step slice (which torch's indexing does not take) as a
    ``flip`` followed by a positive-step slice: the same elements. ``index`` is an ``sr.ix[...]``
    or, as the NumPy op takes it, a plain tuple of ints, slices, ``None`` and ``...`` (or one
    of them), checked as ``sr.ix`` checks its entries."""
    (x,) = arrays
    shape = xp.shape(x)
    index = call.static("index")
    entries: tuple[object, ...] = (index if type(index) is StaticIndex else StaticIndex(index)).entries
    consuming = sum(1 for entry in entries if entry is not None and entry is not Ellipsis)
    axis = 0
    out: list[object] = []
    flips: list[int] = []
    for entry in entries:
        if entry is Ellipsis:
            out.append(entry)
            axis += len(shape) - consuming
            continue
        if entry is None:
            out.append(None)
            continue
        if isinstance(entry, slice) and entry.step is not None and entry.step < 0:
            n = int(shape[axis])
            start, stop, step = entry.indices(n)
            count = len(range(start, stop, step))
            first = n - 1 - start
            flips.append(axis)
            out.append(slice(first, first + count * -step, -step))
        else:
            out.append(entry)
        axis += 1
    if flips:
        x = xp.flip(x, tuple(flips))
    return (xp.getitem(x, tuple(out)),)


def _wrap_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def _forward_take(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    x, indices = arrays
    axis = _facts.value(call.static("axis"))
    shape = xp.shape(x)
    if axis is None:
        size = 1
        for extent in shape:
            size *= int(extent)
        wrapped = xp.wrapped(call, indices, size, None)
        return (xp.reshape(xp.take(xp.reshape(x, (-1,)), xp.reshape(wrapped, (-1,)), 0), xp.shape(indices)),)
    a = _wrap_axis(cast("int", axis), len(shape))
    wrapped = xp.wrapped(call, indices, int(shape[a]), a)
    y = xp.take(x, xp.reshape(wrapped, (-1,)), a)
    return (xp.reshape(y, (*shape[:a], *xp.shape(indices), *shape[a + 1 :])),)


def _forward_take_along_axis(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    x, indices = arrays
    axis = _facts.value(call.static("axis"))
    if axis is None:
        x = xp.reshape(x, (-1,))
        a = 0
    else:
        a = _wrap_axis(cast("int", axis), len(xp.shape(x)))
    wrapped = xp.wrapped(call, indices, int(xp.shape(x)[a]), a if axis is not None else None)
    return (xp.gather(x, wrapped, a),)


def _forward_index_add(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    """``x`` plus ``values`` at the indices, in ``x``'s dtype (NumPy's, as the core's result);
    ``values`` broadcast to ``x``'s shape with the axis replaced (the core's rule)."""
    x, indices, values = arrays
    shape = xp.shape(x)
    a = _wrap_axis(cast("int", _facts.value(call.static("axis", Val(0)))), len(shape))
    wrapped = xp.reshape(xp.wrapped(call, indices, int(shape[a]), a), (-1,))
    target = (*shape[:a], xp.shape(wrapped)[0], *shape[a + 1 :])
    if tuple(xp.shape(values)) != target:
        values = xp.broadcast_to(values, target)
    return (xp.index_add(x, wrapped, values, a),)


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "getindex": _facts.EngineFacts(
        _facts.TorchFacts("basic indexing (and flip for negative steps)", "torch", _facts.VIEW), None, forward=_forward_getindex
    ),
    "take": _facts.EngineFacts(
        _facts.TorchFacts("torch.take / index_select", "kernel", _facts.KERNEL + " (deterministic scatter-add)"),
        None,
        _batch_take,
        forward=_forward_take,
    ),
    "take_along_axis": _facts.EngineFacts(
        _facts.TorchFacts("torch.take_along_dim", "kernel", _facts.KERNEL + " (deterministic scatter-add)"),
        None,
        _batch_take_along_axis,
        forward=_forward_take_along_axis,
    ),
    "index_add": _facts.EngineFacts(
        _facts.TorchFacts("torch.index_add", "kernel", _facts.KERNEL + " (deterministic gather)"),
        None,
        _batch_index_add,
        forward=_forward_index_add,
    ),
}
