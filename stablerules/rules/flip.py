"""The flip family: ``flip`` (Julia's ``reverse``) and ``roll`` (Julia's ``circshift``).

flip: views, no kernel
----------------------
``np.flip`` is a view of its input with negative strides, and so is its pullback: the
cotangent flipped along the same axes. Both are one indexing of the array (NumPy or CuPy, the
namespace is the input's), O(1) whatever the size; a ``Fill`` flips to itself. So ``flip``
lists no kernels: ``precompile`` validates the signature and ``explain`` has nothing to print.

roll: one copy kernel, shifts at run time
-----------------------------------------
``y[..., (i + s) % n, ...] = x[..., i, ...]`` along each rolled axis. Rolling moves bytes and
does no arithmetic, so the kernel copies the *bits*: the data are read as unsigned integers of
the dtype's size (a 16-byte ``complex128`` as two ``uint64``), and one kernel serves every
dtype of that size, NaN payloads and byte order included (the result has NumPy's dtype, a
non-native one too).

The static signature is the *pattern* of the loop nest: the axes, in order, merged into groups
that are either plain (adjacent axes that are not rolled, merged into one loop) or rolled (one
axis each; an axis named twice gets the sum of its shifts, as in NumPy; ``axis=None`` rolls the
flattened array: one rolled group over every axis). Extents and the shifts themselves (reduced
``mod`` the extent, which depends on the shape) are runtime arguments: every shape and every
shift of one pattern share one compiled kernel, and the pullback, which is the roll by
``-shift``, runs the forward kernel with the complementary shifts, as does the pushforward
(the op is linear). Shifts that are statically 0 make their axis plain. The kernel walks the
*output* (each thread owns a range of the outermost loop, so writes never overlap): a rolled
level maps its output index ``j`` to the source ``j - s`` (wrapped once). The last group's
rows are not copied one by one (56-unit rows rolled by 5 would be two runs of 5 and 51): under
their parent level, the output rows fall into at most two runs whose source rows are
contiguous, and each run is copied as one flat copy of the source shifted by the last
group's shift, in chunks of ~16 kB, then the chunk's wrapped columns (the ``min(s, n - s)``
columns of the row's shorter side) are rewritten while the chunk is in L1 (see
``_emit_rows``). Copies use unsigned indices (Numba emits no negative-index wraparound code
for them, so LLVM turns the loops into vector copies). The CUDA kernel is a gather: thread
``t`` writes ``y[t]``, its source found by one division per rolled group.

Decisions
---------
- ``flip(x)`` of a 0-d array is a 0-d array (NumPy returns a scalar); ``flip``'s result is,
  as NumPy's, a view of ``x`` (writable when ``x`` is).
- ``roll``'s ``shift`` and ``axis`` broadcast as in NumPy: ``Val(int)`` with ``Val(tuple)``
  rolls every named axis by the same shift, a 1-tuple with a longer tuple likewise; otherwise
  they must have the same length. Shifts are Python ints, any size, reduced ``mod`` the extent.
- Tangents have the native-order dtype of the primal (a ``>f8`` primal gets float64
  tangents); an integer or bool primal gets ``NoTangent()`` (its cotangent is still checked).
"""

from __future__ import annotations

import math
import types as pytypes
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from .. import _pool
from .._arrays import ArrayLike, InputFacts, checked_size, input_facts, normalize_axis, shape_text, static_ints
from .._key import Kernel, KernelSource, ShapeSignature
from .._memo import cached_property
from .._codegen import INDEX, SourceWriter, cpu_kernel, greatest, least, nest_limit, readonly_array, writable_array
from .._codegen import emit_copy as _emit_copy, plus as _plus, tuple_text as _tuple_text
from .._cuda import cuda_array_type, cuda_kernel
from .._memo import memoized
from .._op import KernelRequest
from .._launch import cpu_launcher, cuda_launch
from .._plan import DensePullback, Plan
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill
from .._units import UNITS, as_units
from .._val import Val
from .._views import ViewPlan
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)

Shape: TypeAlias = tuple[int, ...]
DType: TypeAlias = np.dtype[np.generic]
_Static: TypeAlias = "Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...]"

# A nest of more groups than Python's block limit leaves is refused (an ndim-64 array rolled
# along every other axis would need 64 levels).
_MAX_NEST_LEVELS = nest_limit(reserved=2)
_PLAIN = "plain"
_ROLLED = "rolled"
# Rows are copied in chunks of about this many bytes (see _emit_rows): a chunk and its
# source stay in L1 while the wrapped columns are fixed.
_CHUNK_BYTES = 16384


def _axes(value: object, ndim: int, op: str, name: str = "axis") -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The axes in ``Val(int)``/``Val(tuple)`` (plain values count as dynamic) as given and
    normalized; ``ValueError`` naming the array's dimension for one out of bounds."""
    given = static_ints(value, name)
    try:
        return given, tuple(normalize_axis(axis, ndim, name) for axis in given)
    except ValueError as error:
        raise ValueError(f"{op}: {error}") from None


# ======================================================================================
# flip
# ======================================================================================


@memoized(maxsize=1024)
def _flip_index(ndim: int, axes: tuple[int, ...]) -> tuple[slice | pytypes.EllipsisType, ...]:
    # The trailing Ellipsis keeps a 0-d view 0-d (``x[()]`` would be a scalar).
    return (*(slice(None, None, -1) if axis in axes else slice(None) for axis in range(ndim)), Ellipsis)


class FlipPlan(ViewPlan):
    """A flip of one shape: one index views an array of that shape flipped, and flipping is
    its own adjoint."""

    def __init__(self, facts: InputFacts, axes: tuple[int, ...]) -> None:
        super().__init__("flip", facts, facts.shape)
        self.index = _flip_index(len(facts.shape), axes)

    def view(self, array: ArrayLike) -> ArrayLike:
        return array[self.index]

    def unview(self, array: ArrayLike) -> ArrayLike:
        return array[self.index]


def _plan_flip(x: object, axis: object) -> FlipPlan:
    """Validate ``flip(x, axis)``: ``TypeError`` for a bad ``x`` or ``axis``, ``ValueError``
    for an axis out of bounds or named twice; nothing runs before this."""
    facts = input_facts(x, "x", "flip")
    ndim = len(facts.shape)
    if axis is None:
        axes = tuple(range(ndim))
    else:
        given, axes = _axes(axis, ndim, "flip")
        if len(set(axes)) != len(axes):
            raise ValueError(f"flip: axis {given} names an axis twice (x has shape {shape_text(facts.shape)})")
    return FlipPlan(facts, axes)


class Flip(RuleOp):
    name = "flip"
    static_names = ("axis",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], axis: _Static | None = None) -> npt.NDArray[_DT]:
        """Reverse the order of elements along ``axis`` (``np.flip``; Julia's ``reverse(x;
        dims)``): ``Val(int)``, ``Val(tuple)`` or ``None`` for every axis. Static.

        The result is a view of ``x``, as NumPy's. Rules: ``back(dy)`` returns ``(dx,)`` plus
        ``NoTangent()`` for an ``axis`` given positionally; ``dx`` is ``dy`` flipped: a
        *view of the cotangent* when ``dy`` has ``x``'s dtype and is writable, else a view of
        its projected copy (a copy where ``dy`` is read-only or stride 0: tangents are writable). A ``Fill`` cotangent gives a ``Fill``, ``ZeroTangent``
        a ``ZeroTangent``. The pushforward is the tangent flipped. No kernel is compiled.
        """
        return self.forward(x, axis)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_flip(arrays[0], statics[0])


flip = Flip()


# ======================================================================================
# roll: layout (static), plan (per shape), kernels
# ======================================================================================


# A NamedTuple, not a frozen dataclass: its definition cost (see ``_schema.Param``).
class RollLayout(NamedTuple):
    """What the static arguments and the input's ndim and itemsize fix.

    ``groups[k]`` are the axes merged into loop ``k`` (the last may be the extra axis of
    length ``factor`` that splits a 16-byte element into two 8-byte units); ``pattern[k]``
    says whether it is rolled; ``shifts[k]`` is a rolled group's net shift (a Python int, not
    yet reduced) and 0 for a plain one.
    """

    pattern: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]
    shifts: tuple[int, ...]
    unit: DType
    factor: int


@memoized(maxsize=1024)
def _roll_layout(ndim: int, itemsize: int, net: tuple[tuple[int, int], ...] | None, flat_shift: int) -> RollLayout:
    """``net``: (axis, summed shift) per rolled axis, or ``None`` for ``axis=None`` (the
    flattened array rolled by ``flat_shift``)."""
    factor = max(itemsize // 8, 1)
    unit = UNITS[min(itemsize, 8)]
    axes = ndim + (1 if factor > 1 else 0)  # the unit axis is the last, never rolled
    pattern: list[str] = []
    groups: list[tuple[int, ...]] = []
    shifts: list[int] = []
    rolled = {} if net is None else dict(net)
    if net is None and flat_shift != 0:
        pattern.append(_ROLLED)
        groups.append(tuple(range(ndim)))
        shifts.append(flat_shift)
        start = ndim
    else:
        start = 0
    for axis in range(start, axes):
        shift = rolled.get(axis, 0)
        if shift != 0:
            pattern.append(_ROLLED)
            groups.append((axis,))
            shifts.append(shift)
        elif pattern and pattern[-1] == _PLAIN:
            groups[-1] += (axis,)
        else:
            pattern.append(_PLAIN)
            groups.append((axis,))
            shifts.append(0)
    if not groups:  # a 0-d array rolled by nothing: one loop of extent 1
        pattern.append(_PLAIN)
        groups.append(())
        shifts.append(0)
    if len(groups) > _MAX_NEST_LEVELS:
        raise ValueError(
            f"roll: rolling axes {sorted(rolled)} of an array of dimension {ndim} makes a loop "
            f"nest of {len(groups)} levels (rolled axes that do not merge with their "
            f"neighbours); compiled kernels nest at most {_MAX_NEST_LEVELS}: roll along fewer "
            f"non-adjacent axes per call"
        )
    return RollLayout(tuple(pattern), tuple(groups), tuple(shifts), unit, factor)


def _roll_shifts(shift: object, axis: object, ndim: int) -> tuple[tuple[tuple[int, int], ...] | None, int]:
    """``(net, flat_shift)`` for ``_roll_layout``: NumPy's broadcasting of ``shift`` against
    ``axis``, repeated axes summed."""
    shifts = static_ints(shift, "shift")
    if axis is None:
        return None, sum(shifts)
    given, axes = _axes(axis, ndim, "roll")
    # A single value (an int, or a 1-tuple) broadcasts against the other, as in NumPy.
    if len(shifts) != len(axes):
        if len(shifts) == 1:
            shifts = shifts * len(axes)
        elif len(axes) == 1:
            axes = axes * len(shifts)
        else:
            raise ValueError(
                f"roll: shift {shifts} and axis {given} must have the same length (or one of them a single value)"
            )
    net: dict[int, int] = {}
    for value, along in zip(shifts, axes):
        net[along] = net.get(along, 0) + value
    return tuple(sorted((along, value) for along, value in net.items() if value != 0)), 0


def _roll_signature(layout: RollLayout, target: str) -> ShapeSignature:
    return ShapeSignature("roll", "copy", layout.pattern, (layout.unit.name,), (len(layout.groups),), target)


def _roll_request(layout: RollLayout, target: str) -> KernelRequest:
    signature = _roll_signature(layout, target)
    render = _render_roll_cuda if target == "cuda" else _render_roll
    return KernelRequest(signature, lambda: render(signature, layout.pattern, layout.unit.name))


def _parameters(pattern: Sequence[str]) -> tuple[list[str], list[str]]:
    """Extent names ``e0, e1, ...`` (one per group) and shift names (one per rolled group)."""
    extents = [f"e{level}" for level in range(len(pattern))]
    shifts = [f"s{level}" for level, kind in enumerate(pattern) if kind == _ROLLED]
    return extents, shifts


def _steps(extents: Sequence[str]) -> list[str]:
    """Per level, the flat step of its index: the product of the extents inside it."""
    return [" * ".join(extents[level + 1 :]) or "1" for level in range(len(extents))]


def _render_roll(signature: ShapeSignature, pattern: tuple[str, ...], unit: str) -> KernelSource:
    """The CPU kernel of a roll pattern: ``y`` is ``x`` rolled by ``s_k`` along each rolled
    group ``k`` (``0 <= s_k < e_k``); the pullback and pushforward call it too."""
    extents, shifts = _parameters(pattern)
    steps = _steps(extents)
    last = len(pattern) - 1
    writer = SourceWriter()
    writer.line(f"# x and y are C arrays {_tuple_text(extents)} read flat (the dtype's bits as {unit});")
    rolled = [f"e{level}" for level, kind in enumerate(pattern) if kind == _ROLLED]
    if rolled:
        writer.line(f"# y[..., j, ...] = x[..., (j - s) mod e, ...] along {', '.join(rolled)} (shift s, 0 <= s < e).")
    writer.line("# Loop j0 runs over [lo, hi) of the output: each thread owns that range of y.")
    for level in range(last):
        if " * " in steps[level]:
            writer.line(f"step{level} = {steps[level]}")
    if last:
        # Rows (the last group) are copied in chunks of about this many units: long runs, and
        # a chunk's wrapped columns are rewritten while it is still in L1.
        writer.line(f"rows = {greatest(f'{_CHUNK_BYTES // np.dtype(unit).itemsize} // e{last}', '1')}")

    _emit_roll_level(writer, pattern, steps, 0, "0", "0")
    parameters = [
        ("x", readonly_array(unit)),
        ("y", writable_array(unit)),
        *((name, INDEX) for name in extents),
        *((name, INDEX) for name in shifts),
        ("lo", INDEX),
        ("hi", INDEX),
    ]
    return cpu_kernel(
        signature, parameters, writer, f"roll {pattern}: y = x rolled by s along the rolled groups", numpy=True
    )


def _emit_roll_level(writer: SourceWriter, pattern: tuple[str, ...], steps: list[str], level: int, y_base: str, x_base: str) -> None:
    """The loop over ``y``'s ``level`` (its first over ``[lo, hi)``), at offsets ``y_base``
    and ``x_base``: a rolled group reads ``x`` at ``(j - s) mod e``; the last two levels are
    copied as rows (``_emit_rows``), a single level as one or two flat copies."""
    last = len(pattern) - 1
    if level == last:  # one group: a flat copy (or roll) of [lo, hi)
        if pattern[level] == _PLAIN:
            _emit_copy(writer, "lo", "lo", "hi - lo")
            return
        # Outputs [0, s) come from the source's tail, [s, e) from its head: this thread's [lo, hi) of them.
        with writer.block("if s0 > lo:"):
            _emit_copy(writer, "lo", "lo + e0 - s0", f"{least('hi', 's0')} - lo")
        writer.line(f"start = {greatest('lo', 's0')}")
        with writer.block("if hi > start:"):
            _emit_copy(writer, "start", "start - s0", "hi - start")
        return
    if level == last - 1:
        _emit_rows(writer, pattern, level, y_base, x_base)
        return
    step = f"step{level}" if " * " in steps[level] else steps[level]
    index = f"j{level}"
    low, high = ("lo", "hi") if level == 0 else ("0", f"e{level}")
    with writer.block(f"for {index} in range({low}, {high}):" if low != "0" else f"for {index} in range({high}):"):
        if pattern[level] == _ROLLED:
            writer.line(f"i{level} = {index} - s{level}")
            with writer.block(f"if i{level} < 0:"):
                writer.line(f"i{level} += e{level}")
            source = f"i{level}"
        else:
            source = index
        writer.line(f"y{level} = {_plus(y_base, f'{index} * {step}' if step != '1' else index)}")
        writer.line(f"x{level} = {_plus(x_base, f'{source} * {step}' if step != '1' else source)}")
        _emit_roll_level(writer, pattern, steps, level + 1, f"y{level}", f"x{level}")


def _emit_rows(writer: SourceWriter, pattern: tuple[str, ...], level: int, y_base: str, x_base: str) -> None:
    """The last two levels: the rows of the last group (``n = e{last}`` units each) under
    their parent ``level``. The parent's output rows fall into runs whose source rows are
    contiguous too (one run for a plain parent; ``[s, e)`` and ``[0, s)`` for a rolled one,
    source row ``j - lag``), so a run of rows is one flat copy of the source shifted by the
    last group's shift, chunk by chunk. For a rolled last group that copy is right for all
    but the wrapped columns of each row, rewritten right after from the row's other end: the
    ``min(s, n - s)`` columns of the shorter side (when ``2 s <= n``, the flat copy is offset
    by ``-s`` and columns ``[0, s)`` are fixed; else it is offset by ``n - s`` and columns
    ``[s, n)`` are fixed). Every read stays inside the chunk's source rows."""
    last = level + 1
    n = f"e{last}"
    low, high = ("lo", "hi") if level == 0 else ("0", f"e{level}")
    if pattern[level] == _PLAIN:
        runs = [(low, high, "0")]
    else:
        shift = f"s{level}"
        runs = [  # in the output's memory order (faster than the source's)
            (low, least(high, shift) if level == 0 else shift, f"({shift} - e{level})"),
            (greatest(low, shift) if level == 0 else shift, high, shift),
        ]
    for start, stop, lag in runs:
        with writer.block(f"for r0 in range({start}, {stop}, rows):"):
            writer.line(f"r1 = {least('r0 + rows', stop)}")
            writer.line(f"yr = {_plus(y_base, f'r0 * {n}')}")
            writer.line(f"xr = {_plus(x_base, f'(r0 - {lag}) * {n}' if lag != '0' else f'r0 * {n}')}")
            writer.line(f"count = (r1 - r0) * {n}")
            if pattern[last] == _PLAIN:
                _emit_copy(writer, "yr", "xr", "count")
                continue
            shift = f"s{last}"
            with writer.block(f"if 2 * {shift} <= {n}:"):
                _emit_copy(writer, f"yr + {shift}", "xr", f"count - {shift}")
                with writer.block(f"if {shift} > 0:"):
                    with writer.block("for row in range(r1 - r0):"):
                        _emit_copy(writer, f"yr + row * {n}", f"xr + row * {n} + {n} - {shift}", shift)
            with writer.block("else:"):
                _emit_copy(writer, "yr", f"xr + {n} - {shift}", f"count - {n} + {shift}")
                with writer.block("for row in range(r1 - r0):"):
                    _emit_copy(writer, f"yr + row * {n} + {shift}", f"xr + row * {n}", f"{n} - {shift}")


def _render_roll_cuda(signature: ShapeSignature, pattern: tuple[str, ...], unit: str) -> KernelSource:
    """The CUDA kernel of a roll pattern: thread ``t`` writes ``y[t]``, copying the element
    its rolled indices come from (one division and one modulo per rolled group)."""
    extents, shifts = _parameters(pattern)
    steps = _steps(extents)
    setup = SourceWriter()
    writer = SourceWriter()
    writer.line(f"# x and y are C arrays {_tuple_text(extents)} read flat (the dtype's bits as {unit});")
    writer.line("# thread t writes y[t] = x[t with each rolled index j replaced by (j - s) mod e].")
    for level, kind in enumerate(pattern):
        if kind == _ROLLED and " * " in steps[level]:
            setup.line(f"step{level} = {steps[level]}")
    writer.line("source = t")
    for level, kind in enumerate(pattern):
        if kind != _ROLLED:
            continue
        step = f"step{level}" if " * " in steps[level] else steps[level]
        quotient = f"t // {step}" if step != "1" else "t"
        writer.line(f"j{level} = {quotient} % e{level}" if level else f"j{level} = {quotient}")
        writer.line(f"i{level} = j{level} - s{level}")
        with writer.block(f"if i{level} < 0:"):
            writer.line(f"i{level} += e{level}")
        writer.line(f"source += (i{level} - j{level}) * {step}" if step != "1" else f"source += i{level} - j{level}")
    writer.line("y[t] = x[source]")
    parameters = [
        ("x", cuda_array_type(unit)),
        ("y", cuda_array_type(unit)),
        *((name, INDEX) for name in extents),
        *((name, INDEX) for name in shifts),
        ("total", INDEX),
    ]
    return cuda_kernel(signature, parameters, writer, f"roll {pattern}: y[t] = x[source of t]", setup=setup)


# ======================================================================================
# roll: the plan and the op
# ======================================================================================


class RollPlan(Plan):
    """A roll of one shape: the layout, the runtime extents of its groups, and the reduced
    shifts of its rolled groups for the forward map and for its adjoint, the roll back.
    Forward, pullback and pushforward run the one copy kernel of the layout's pattern."""

    def __init__(self, facts: InputFacts, layout: RollLayout) -> None:
        shape = facts.shape + ((layout.factor,) if layout.factor > 1 else ())
        extents = tuple(math.prod(shape[axis] for axis in group) for group in layout.groups)
        forward = tuple(value % extent if extent else 0 for value, extent in zip(layout.shifts, extents))
        backward = tuple((extent - value) % extent if extent else 0 for value, extent in zip(forward, extents))
        size = checked_size(facts.shape, facts.dtype.itemsize, "roll")
        super().__init__(
            "roll", (facts,), out_shape=facts.shape, kernel_entries=frozenset({"forward", "pullback", "pushforward"} if size else ())
        )
        self.layout = layout
        self.y_dtype = facts.dtype  # the result keeps x's dtype, byte order included (as NumPy's)
        self.target = facts.target
        self.size = size
        self.units = self.size * layout.factor
        # Results and tangents share the size (x's dtype and its native order): one allocator,
        # chosen here (the output pool's from 1 MiB up on the CPU, CuPy's own on a GPU).
        namespace = facts.namespace
        self.allocate = (
            _pool.allocator(self.size * facts.dtype.itemsize)
            if namespace is np
            else lambda shape, dtype: namespace.empty(shape, dtype=dtype)
        )
        self.extents = extents
        rolled = [level for level, kind in enumerate(layout.pattern) if kind == _ROLLED]
        self.forward_shifts = tuple(forward[level] for level in rolled)
        self.backward_shifts = tuple(backward[level] for level in rolled)
        self.request = _roll_request(layout, facts.target)

    def requests(self) -> list[KernelRequest]:
        return [self.request] if self.size else []

    @cached_property
    def kernel(self) -> Kernel:
        return self.request.get()  # compiled (or loaded) at the first call that runs it

    @cached_property
    def forward_launch(self) -> Callable[[ArrayLike, ArrayLike], None]:
        return self._launcher(self.forward_shifts)

    @cached_property
    def backward_launch(self) -> Callable[[ArrayLike, ArrayLike], None]:
        return self._launcher(self.backward_shifts)

    def _launcher(self, shifts: tuple[int, ...]) -> Callable[[ArrayLike, ArrayLike], None]:
        kernel, trailing = self.kernel, (*self.extents, *shifts)
        if self.target == "cuda":
            total = self.units

            def launch(source: ArrayLike, target: ArrayLike) -> None:
                cuda_launch(kernel, total, source, target, *trailing, total)

            return launch
        return cpu_launcher(kernel, 2, trailing, extent=self.extents[0], work=self.units)

    def _run(self, launch: Callable[[ArrayLike, ArrayLike], None] | None, source: ArrayLike, dtype: DType) -> ArrayLike:
        out: ArrayLike = self.allocate(self.out_shape, dtype)
        if launch is not None:
            unit = self.layout.unit
            launch(as_units(source, unit), out.reshape(-1).view(unit))
        return out

    def forward(self, arrays: tuple[object, ...]) -> object:
        (x,) = arrays
        if type(x) is not type(self.like):  # a Python scalar (a 0-d array), or an ArraySpec (an error)
            x = input_facts(x, "x", "roll").need_array("roll")
        return self._run(self.forward_launch if self.size else None, x, self.y_dtype)

    def pullback(self, saved: object) -> DensePullback:
        launch = self.backward_launch if self.size else None
        run, dtype = self._run, self.out_dtype

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            return (run(launch, dy, dtype),)

        return dense

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        return (fill,)  # a constant rolled is itself (the fill comes with x's shape and dtype)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return self._run(self.forward_launch if self.size else None, tangent.array, self.out_dtype)
        return tangent


def _plan_roll(x: object, shift: object, axis: object) -> RollPlan:
    """Validate ``roll(x, shift, axis)`` and plan it for ``x``'s shape; nothing runs before."""
    facts = input_facts(x, "x", "roll")
    ndim = len(facts.shape)
    net, flat_shift = _roll_shifts(shift, axis, ndim)
    return RollPlan(facts, _roll_layout(ndim, facts.dtype.itemsize, net, flat_shift))


class Roll(RuleOp):
    name = "roll"
    required_messages = {"shift": "roll: shift is required, e.g. roll(x, Val(1), axis=Val(0))"}
    static_names = ("shift", "axis")
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[_DT], shift: _Static, axis: _Static | None = None) -> npt.NDArray[_DT]:
        """Roll array elements along ``axis`` (``np.roll``; Julia's ``circshift``): element
        ``i`` moves to ``(i + shift) % n``. ``shift`` is ``Val(int)`` or ``Val(tuple)``;
        ``axis`` is ``Val(int)``, ``Val(tuple)`` (broadcast against ``shift`` as in NumPy,
        repeated axes adding up) or ``None`` (roll the flattened array). Both static.

        The result is a new array of ``x``'s dtype (byte order included), made by one
        compiled copy kernel. Rules: ``back(dy)`` returns ``(dx, NoTangent(), ...)``, one
        entry per positional argument; ``dx`` is ``dy`` rolled back by ``-shift`` (a new
        array, one pass of the same kernel). A ``Fill`` cotangent gives a ``Fill``,
        ``ZeroTangent`` a ``ZeroTangent``; the pushforward rolls the tangent likewise.
        """
        return self.forward(x, shift, axis)  # type: ignore[return-value]

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_roll(arrays[0], *statics)


roll = Roll()


__all__ = ["Flip", "FlipPlan", "Roll", "RollLayout", "RollPlan", "flip", "roll"]


# --- engine facts (stablerules._facts) -------------------------------------------------------


def _flip_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    return _facts.others(ndim, _facts.axes(statics("axis", None), ndim))


def _forward_flip(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    axis = _facts.value(call.static("axis"))
    return (xp.flip(x, tuple(range(len(xp.shape(x)))) if axis is None else _facts.counts(axis)),)


def _prepared_flip(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    """``flip`` with its axes read once (the signature fixes the rank)."""
    axis = _facts.value(call.static("axis"))
    axes = tuple(range(len(xp.shape(arrays[0])))) if axis is None else _facts.counts(axis)
    flip = xp.flip
    return lambda arrays: (flip(arrays[0], axes),)


def _forward_roll(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    shift = _facts.counts(call.static("shift"))
    axis = _facts.value(call.static("axis"))
    if axis is None:  # NumPy rolls the flattened array by each shift in turn: by their sum
        return (xp.roll(x, sum(shift)),)
    axes = _facts.counts(axis)
    if len(shift) == 1 and len(axes) > 1:
        shift = shift * len(axes)
    elif len(axes) == 1 and len(shift) > 1:
        axes = axes * len(shift)
    return (xp.roll(x, shift, axes),)


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "flip": _facts.EngineFacts(
        _facts.TorchFacts("torch.flip", "torch", _facts.VIEW), _flip_shards, _facts.shift_axes("axis"),
        forward=_forward_flip, prepared=_prepared_flip,
    ),
    "roll": _facts.EngineFacts(
        _facts.TorchFacts("torch.roll", "torch", _facts.VIEW),
        _flip_shards,
        _facts.shift_axes("axis", none="flatten-reshape"),
        forward=_forward_roll,
    ),
}
