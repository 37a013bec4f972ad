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
and are kept in the shared ``PlanCache``; ``clear_caches()`` empties it. ``pad``'s constant is
an array argument of the scaffold (data, never a static): a Python scalar keys the plan by its
type, a 0-d array by its dtype; a NumPy scalar is not a key the scaffold takes, so such a call
builds its plan anew (microseconds). The border sum that is the constant's tangent runs only
when the constant was given positionally.

Decisions
---------
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
  ``x`` is an integer array) gets ``NoTangent()``. A keyword argument gets no tangent (a
  pullback returns one tangent per positional argument).
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
from types import EllipsisType
from typing import TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import (
    ArrayLike,
    ArraySpec,
    InputFacts,
    checked_size,
    input_facts,
    is_array,
    normalize_axis,
    shape_text,
    static_int,
    shareable,
    static_ints,
)
from .._plan import DensePullback, Plan
from .._results import NO_TANGENT, ZERO_TANGENT
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill, Thunk, ZeroTangent
from .._val import Val
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)
DType: TypeAlias = np.dtype[np.generic]
Index: TypeAlias = tuple["slice | EllipsisType", ...]

_AXIS0: Val[int] = Val(0)
_FLOAT64: DType = np.dtype(np.float64)


# =============================================================================================
# pad
# =============================================================================================


def _pairs(x_shape: tuple[int, ...], widths: tuple[int, ...]) -> list[tuple[int, int]]:
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
    return pairs


def _constant(constant_values: object, dtype: DType) -> np.generic:
    """The constant as ``np.pad`` reads it (``np.array(value)``), checked against ``x``'s dtype."""
    value = constant_values
    if isinstance(value, ArraySpec):
        value = np.zeros((), value.dtype) if value.shape == () else np.zeros(value.shape, value.dtype)
    elif not isinstance(value, np.ndarray) and is_array(value):  # a CuPy array: read on the host
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


class PadPlan(Plan):
    """``pad`` of one input dtype and shape by static widths, with a constant of one type.

    ``interior`` cuts ``x``'s block out of ``y``; ``borders`` are disjoint slabs covering the
    rest of ``y`` (set to the constant by the forward, summed for the constant's tangent). The
    array arguments are ``(x, constant_values)``.
    """

    def __init__(self, x: InputFacts, widths: tuple[int, ...], constant: InputFacts) -> None:
        x_shape, dtype = x.shape, x.dtype
        pairs = _pairs(x_shape, widths)
        y_shape = tuple(before + extent + after for extent, (before, after) in zip(x_shape, pairs))
        checked_size(y_shape, dtype.itemsize, "pad")
        ndim = len(x_shape)
        interior: Index = tuple(slice(before, before + extent) for extent, (before, _) in zip(x_shape, pairs))
        borders: list[Index] = []
        for axis, (before, after) in enumerate(pairs):
            # Slabs along this axis, inside the interior along earlier axes: disjoint, covering.
            head = interior[:axis]
            tail = tuple(slice(None) for _ in range(axis + 1, ndim))
            if before:
                borders.append((*head, slice(0, before), *tail))
            if after:
                borders.append((*head, slice(y_shape[axis] - after, y_shape[axis]), *tail))
        # The constant's tangent: of its own dtype (see the module docstring), when x has one.
        constant_dtype = constant.tangent_dtype if x.differentiable else None
        super().__init__(
            "pad",
            (x, constant),
            out_shape=y_shape,
            input_tangents=(x.differentiable, constant_dtype is not None),
            input_dtypes=(x.native, constant_dtype or _FLOAT64),
            namespace=x.namespace,
            any_layout=True,  # slicing takes dy in any layout
        )
        self.x_shape = x_shape
        self.dtype = dtype
        self.interior: Index = interior or (Ellipsis,)  # () would read a 0-d dy as a scalar, not a view
        self.borders = tuple(borders)
        self.border_size = math.prod(y_shape) - math.prod(x_shape)
        self.constant_dtype = constant_dtype

    def forward(self, arrays: tuple[object, ...]) -> object:
        """One allocation: the border slabs set to the constant, the interior copied."""
        x = cast(ArrayLike, self.namespace.asarray(arrays[0]))  # a list input too (no copy of an array)
        constant = _constant(arrays[1], self.dtype)
        y: ArrayLike = self.namespace.empty(self.out_shape, dtype=x.dtype)
        for border in self.borders:
            y[border] = constant
        y[self.interior] = x
        return y

    def _border_sum(self, dy: ArrayLike) -> ArrayLike:
        """The sum of ``dy`` over the border slabs: the constant's tangent, a 0-d array."""
        assert self.constant_dtype is not None
        xp = self.namespace
        wide = np.complex128 if dy.dtype.kind == "c" else np.float64
        total = xp.zeros((), dtype=wide)
        for border in self.borders:
            total = total + dy[border].sum(dtype=wide)
        if self.constant_dtype.kind != "c":
            total = total.real
        return cast(ArrayLike, xp.asarray(total, dtype=self.constant_dtype))

    def pullback(self, saved: object) -> DensePullback:
        interior = self.interior
        if self.constant_dtype is None:

            def pad_pullback_dense(dy: ArrayLike) -> tuple[object, ...]:
                dx = dy[interior]
                return (dx if shareable(dy) else dx.copy(), NO_TANGENT)

            return pad_pullback_dense
        border_sum = self._border_sum

        def pad_pullback_dense_constant(dy: ArrayLike) -> tuple[object, ...]:
            # The constant's tangent reads the border: deferred, run only where the constant
            # was given positionally (the scaffold's result form unthunks it; otherwise it is dropped).
            dx = dy[interior]
            return (dx if shareable(dy) else dx.copy(), Thunk(lambda: border_sum(dy)))

        return pad_pullback_dense_constant

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        dx = Fill(fill.value, self.x_shape, self.out_dtype)
        if self.constant_dtype is None:
            return (dx, NO_TANGENT)
        total = complex(fill.value) * self.border_size
        constant = self.namespace.asarray(total if self.constant_dtype.kind == "c" else total.real, dtype=self.constant_dtype)
        return (dx, constant)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        tangent, constant_tangent = tangents
        border: complex | None = None
        if isinstance(constant_tangent, DenseCotangent):
            border = complex(constant_tangent.array.item())
        elif isinstance(constant_tangent, Fill):
            border = complex(constant_tangent.value)
        if isinstance(tangent, ZeroTangent) and border is None:
            return ZERO_TANGENT
        dtype = self.out_dtype
        if dtype.kind != "c" and border is not None:
            border = complex(border.real)
        if isinstance(tangent, Fill) and (border == tangent.value or (border is None and tangent.value == 0)):
            return Fill(tangent.value, self.out_shape, dtype)
        dy: ArrayLike = self.namespace.empty(self.out_shape, dtype=dtype)
        for slab in self.borders:
            dy[slab] = 0 if border is None else (border if dtype.kind == "c" else border.real)
        if isinstance(tangent, DenseCotangent):
            dy[self.interior] = tangent.array
        else:
            dy[self.interior] = tangent.value if isinstance(tangent, Fill) else 0
        return dy


class Pad(RuleOp):
    """``np.pad(x, pad_width, mode="constant", constant_values=...)``: ``x`` surrounded by
    ``constant_values``. ``pad_width`` is ``Val(k)`` (every side) or ``Val`` of ``2 * ndim``
    ints ``(before_0, after_0, before_1, after_1, ...)``, static (a plain int or tuple is
    accepted and counted as dynamic); ``constant_values`` is a scalar (data).

    Rules: ``back(dy)`` returns ``(dx, NoTangent()[, dc])``, one entry per positional
    argument: ``dx = dy[interior]``, a *view* of the cotangent (writable when ``dy`` is);
    ``dc`` (a positional floating constant) the sum of ``dy`` over the border. A ``Fill``
    cotangent gives a ``Fill`` (a slice of it). The pushforward is the tangent padded with the
    constant's tangent (zero for a keyword or integer constant).
    """

    name = "pad"
    static_names = ("pad_width",)
    input_names = ("x", "constant_values")

    def __call__(
        self,
        x: npt.NDArray[_DT],
        pad_width: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...],
        constant_values: bool | int | float | complex | np.generic | npt.NDArray[np.generic] = 0,
    ) -> npt.NDArray[_DT]:
        return cast("npt.NDArray[_DT]", self.forward(x, pad_width, constant_values))

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        x, constant_values = arrays
        facts = input_facts(x, "x", "pad")
        widths = static_ints(statics[0], "pad_width")
        _constant(constant_values, facts.dtype)  # its kind: checked once per plan (keyed by its type)
        constant = input_facts(constant_values, "constant_values", "pad", weak_scalars=True)
        return PadPlan(facts, widths, constant)


# =============================================================================================
# split
# =============================================================================================


def _plan_split(x_shape: tuple[int, ...], sections: int | None, points: tuple[int, ...], axis: int) -> tuple[tuple[Index, ...], tuple[tuple[int, ...], ...], bool]:
    """Each part's index and shape, and whether the parts tile ``x`` (disjoint, covering)."""
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
    tiles = tiles and (position == length if spans else True)
    return tuple(indices), tuple(shapes), tiles


class SplitPlan(Plan):
    """``split`` of one input dtype and shape at static places: ``indices[i]`` cuts part ``i``
    out of ``x`` (NumPy's slices); ``tiles`` says the parts are disjoint and cover ``x`` (the
    pullback then writes blocks into ``np.empty``, else it adds them into zeros)."""

    def __init__(
        self, x: InputFacts, indices: tuple[Index, ...], shapes: tuple[tuple[int, ...], ...], tiles: bool
    ) -> None:
        super().__init__("split", (x,), out_shape=x.shape, output_shapes=shapes, any_layout=True)
        self.x_shape = x.shape
        self.indices = indices
        self.tiles = tiles

    def forward(self, arrays: tuple[object, ...]) -> object:
        x = cast(ArrayLike, self.namespace.asarray(arrays[0]))  # a list input too (no copy of an array)
        return tuple(map(x.__getitem__, self.indices))

    def pullback(self, saved: object) -> DensePullback:
        x_shape, indices, tiles, dtype, xp = self.x_shape, self.indices, self.tiles, self.out_dtype, self.namespace
        shapes = self.output_shapes
        assert shapes is not None
        sizes = tuple(math.prod(shape) for shape in shapes)

        def split_pullback_parts(parts: tuple[Cotangent, ...]) -> tuple[object, ...]:
            fills = {part.value for part in parts if isinstance(part, Fill)}
            if tiles and len(fills) == 1 and all(isinstance(part, Fill) or not size for part, size in zip(parts, sizes)):
                return (Fill(fills.pop(), x_shape, dtype),)
            if tiles:  # one allocation, every block written once
                dx: ArrayLike = xp.empty(x_shape, dtype=dtype)
                for index, part in zip(indices, parts):
                    if isinstance(part, DenseCotangent):
                        dx[index] = part.array
                    else:
                        dx[index] = part.value if isinstance(part, Fill) else 0
                return (dx,)
            dx = xp.zeros(x_shape, dtype=dtype)  # overlapping parts add
            for index, part in zip(indices, parts):
                if isinstance(part, DenseCotangent):
                    xp.add(dx[index], part.array, out=dx[index])
                elif isinstance(part, Fill):
                    xp.add(dx[index], part.value, out=dx[index])
            return (dx,)

        return split_pullback_parts

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return tuple(map(tangent.array.__getitem__, self.indices))
        if isinstance(tangent, Fill):
            shapes = self.output_shapes
            assert shapes is not None
            return tuple(Fill(tangent.value, shape, self.out_dtype) for shape in shapes)
        return ZERO_TANGENT


class Split(RuleOp):
    """``np.split(x, indices_or_sections, axis)`` as a tuple of views of ``x``: ``Val(k)``
    cuts ``k`` equal parts (``k`` must divide the axis), ``Val((i, j, ...))`` cuts at those
    indices. Both static, as ``axis`` (plain values counted as dynamic).

    Rules: ``back(dys)`` takes a tuple of one cotangent per part (any may be
    ``ZeroTangent()``) and returns ``(dx, NoTangent()[, NoTangent()])``: ``dx`` is one fresh
    array with every part's cotangent in its block (zeros for a ``ZeroTangent``), a ``Fill``
    when every part is a ``Fill`` of one value, ``ZeroTangent()`` when all are zero. The
    pushforward is the tuple of the tangent's views (``Fill``s for a ``Fill``).
    """

    name = "split"
    static_names = ("indices_or_sections", "axis")
    input_names = ("x",)

    def __call__(
        self,
        x: npt.NDArray[_DT],
        indices_or_sections: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...],
        axis: Val[int] | int = _AXIS0,
    ) -> tuple[npt.NDArray[_DT], ...]:
        return cast("tuple[npt.NDArray[_DT], ...]", self.forward(x, indices_or_sections, axis))

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        facts = input_facts(arrays[0], "x", "split")
        given = statics[0]
        sections: int | None = None
        points: tuple[int, ...] = ()
        if isinstance(given, Val) and isinstance(given.value, tuple):
            points = given.value
        elif type(given) is tuple or type(given) is list:
            points = static_ints(given, "indices_or_sections")
        else:
            sections = static_int(given, "indices_or_sections")
        axis = static_int(statics[1], "axis")
        indices, shapes, tiles = _plan_split(facts.shape, sections, points, axis)
        return SplitPlan(facts, indices, shapes, tiles)


pad = Pad()
split = Split()


__all__ = ["Pad", "PadPlan", "Split", "SplitPlan", "pad", "split"]


# --- engine facts (stablerules._facts) -------------------------------------------------------


def _pad_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    widths = _facts.counts(statics("pad_width", None))
    if len(widths) == 1:
        return [] if widths[0] else _facts.others(ndim, set())
    return [((axis,), axis) for axis in range(ndim) if widths[2 * axis] == widths[2 * axis + 1] == 0]


def _split_shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
    ndim = len(shapes[0])
    return _facts.others(ndim, _facts.axes(statics("axis", Val(0)), ndim))


def _batch_pad(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """pad under a batch axis: no padding of the batch axis."""
    (x,) = arrays
    widths = _facts.value(call.static("pad_width"))
    every = (widths,) * 2 * (len(ops.shape(x)) - 1) if isinstance(widths, int) else cast("tuple[int, ...]", widths)
    return ops.forward(call.replace(pad_width=Val((0, 0, *every))), (x,))


def _forward_pad(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    """``np.pad`` in constant mode; the constant a static scalar, or (where the engine takes
    one, as JAX does) an array after ``x``."""
    x = arrays[0]
    ndim = len(xp.shape(x))
    flat = _facts.counts(call.static("pad_width"))
    if len(flat) == 1:  # one width for every side of every axis (the core's rule)
        flat = flat * (2 * ndim)
    if len(flat) != 2 * ndim:
        raise _facts.Revalidate(f"pad_width {flat} for {ndim} axes")
    if not any(flat):
        return (xp.copy(x),)
    widths = tuple((flat[2 * axis], flat[2 * axis + 1]) for axis in range(ndim))
    return (xp.pad(x, widths, arrays[1] if len(arrays) > 1 else call.static("constant_values", 0)),)


def _forward_split(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    (x,) = arrays
    sections = _facts.value(call.static("indices_or_sections"))
    axis = cast("int", _facts.value(call.static("axis", Val(0))))
    if isinstance(sections, int):
        shape = xp.shape(x)
        if len(shape) == 0 or sections <= 0 or shape[axis] % sections:
            raise _facts.Revalidate(f"{sections} sections of shape {tuple(shape)} along axis {axis}")
        return xp.split(x, sections, axis)
    return xp.split(x, tuple(cast("tuple[int, ...]", sections)), axis)


ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    "pad": _facts.EngineFacts(_facts.TorchFacts("F.pad", "torch", _facts.VIEW), _pad_shards, _batch_pad, forward=_forward_pad),
    "split": _facts.EngineFacts(
        _facts.TorchFacts("torch.tensor_split", "torch", _facts.VIEW),
        _split_shards,
        _facts.shift_axes("axis", Val(0)),
        forward=_forward_split,
    ),
}
