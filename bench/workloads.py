"""The seed workloads W1-W6, W7-W9 (issue 15), and their NumPy references.

Each workload is one op call with static arguments (an ``OpSpec``), its input shapes and
dtype, the NumPy formulations its pullback is compared against (the best one counts), and
the goals from the issues that filed it (repeat: issue 3, concatenate: issue 4, kron: issue 5,
broadcast_to and sum: issue 15).

stablerules is reached only through its public face (``import stablerules as sr``). The ops
and ``rrule`` are held as plain callables here, so this file neither depends on how precisely
the library types them nor breaks when an op is not there yet: a missing op raises, and the
runner reports the error in that workload's row.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

# Any dtype: the workloads mix float32 and float64, and NumPy's stubs reject NDArray[np.generic]
# in kron and einsum.
Array: TypeAlias = npt.NDArray[Any]
Shape: TypeAlias = tuple[int, ...]
Pullback: TypeAlias = Callable[..., object]
ReverseRule: TypeAlias = Callable[..., tuple[object, Pullback]]
Operation: TypeAlias = Callable[..., object]

# Held as plain callables on purpose (see the module docstring).
_rrule: ReverseRule = sr.rrule


def _op(name: str) -> Operation:
    """The public op ``name``, looked up when it is called: importing this file loads no op's
    module (each loads on its first use, and ``cache_report``'s fresh processes time that load
    as part of the first call, as a user's first call pays it)."""
    op: Operation = getattr(sr, name)
    return op


# --- what is called -------------------------------------------------------------------------


@dataclass(frozen=True)
class RepeatAxis:
    """``repeat(x, Val(repeats), axis=Val(axis))``, NumPy's form."""

    repeats: int
    axis: int

    def describe(self) -> str:
        return f"repeat(x, Val({self.repeats}), axis=Val({self.axis}))"


@dataclass(frozen=True)
class RepeatInnerOuter:
    """``repeat(x, inner=Val(inner), outer=Val(outer))``, Julia's form."""

    inner: Shape
    outer: Shape | None = None

    def describe(self) -> str:
        outer = "" if self.outer is None else f", outer=Val({self.outer})"
        return f"repeat(x, inner=Val({self.inner}){outer})"


@dataclass(frozen=True)
class Concatenate:
    """``concatenate((a, b), axis=Val(axis))``."""

    axis: int

    def describe(self) -> str:
        return f"concatenate((a, b), axis=Val({self.axis}))"


@dataclass(frozen=True)
class Kron:
    """``kron(a, b)``."""

    def describe(self) -> str:
        return "kron(a, b)"


@dataclass(frozen=True)
class Roll:
    """``roll(x, Val(shift), axis=Val(axis))``."""

    shift: tuple[int, ...]
    axis: tuple[int, ...]

    def describe(self) -> str:
        return f"roll(x, Val({self.shift}), axis=Val({self.axis}))"

    def back(self) -> tuple[int, ...]:
        """The shifts of the pullback (the roll back)."""
        return tuple(-value for value in self.shift)


@dataclass(frozen=True)
class BroadcastTo:
    """``broadcast_to(x, Val(shape))``; its pullback is a reduction over the broadcast axes."""

    shape: Shape

    def describe(self) -> str:
        return f"broadcast_to(x, Val({self.shape}))"


@dataclass(frozen=True)
class SumAxes:
    """``sum(x, axis=Val(axis))``; its pullback copies ``dy`` along the summed axes.
    ``fill``: the cotangent is a ``Fill`` (a constant), whose pullback is a ``Fill`` in O(1)."""

    axis: Shape
    fill: bool = False

    def describe(self) -> str:
        return f"sum(x, axis=Val({self.axis}))" + (", dy a Fill" if self.fill else "")


OpSpec: TypeAlias = RepeatAxis | RepeatInnerOuter | Concatenate | Kron | Roll | BroadcastTo | SumAxes


def pad_shape(shape: Shape, length: int) -> Shape:
    """Julia reads an array as ``shape + (1,) * k`` when a count tuple is longer."""
    return shape + (1,) * max(0, length - len(shape))


def julia_repeat(xp: ModuleType, x: object, inner: Shape, outer: Shape | None) -> object:
    """Julia's ``repeat(x; inner, outer)`` with NumPy-like functions from ``xp``
    (``numpy``, ``jax.numpy`` or ``autograd.numpy``): broadcast, reshape, then tile."""
    shape: Shape = tuple(getattr(x, "shape"))
    base = pad_shape(shape, len(inner))
    counts = pad_shape(inner, len(base))
    spread = tuple(v for pair in zip(base, (1,) * len(base)) for v in pair)
    widened = tuple(v for pair in zip(base, counts) for v in pair)
    result = xp.reshape(xp.broadcast_to(xp.reshape(x, spread), widened), tuple(n * c for n, c in zip(base, counts)))
    if outer is None:
        return result
    result_shape: Shape = tuple(result.shape)
    result = xp.reshape(result, pad_shape(result_shape, len(outer)))
    return xp.tile(result, pad_shape(outer, len(result.shape)))


def call_ours_forward(spec: OpSpec, arrays: Sequence[Array]) -> object:
    """The stablerules forward op for ``spec``."""
    if isinstance(spec, RepeatAxis):
        return _op("repeat")(arrays[0], Val(spec.repeats), axis=Val(spec.axis))
    if isinstance(spec, RepeatInnerOuter):
        if spec.outer is None:
            return _op("repeat")(arrays[0], inner=Val(spec.inner))
        return _op("repeat")(arrays[0], inner=Val(spec.inner), outer=Val(spec.outer))
    if isinstance(spec, Concatenate):
        return _op("concatenate")(tuple(arrays), axis=Val(spec.axis))
    if isinstance(spec, Roll):
        return _op("roll")(arrays[0], Val(spec.shift), axis=Val(spec.axis))
    if isinstance(spec, BroadcastTo):
        return _op("broadcast_to")(arrays[0], Val(spec.shape))
    if isinstance(spec, SumAxes):
        return _op("sum")(arrays[0], axis=Val(spec.axis))
    return _op("kron")(arrays[0], arrays[1])


def call_ours_rrule(spec: OpSpec, arrays: Sequence[Array]) -> tuple[object, Pullback]:
    """``sr.rrule`` of the op for ``spec``: the primal and its pullback."""
    if isinstance(spec, RepeatAxis):
        return _rrule(sr.repeat, arrays[0], Val(spec.repeats), axis=Val(spec.axis))
    if isinstance(spec, RepeatInnerOuter):
        if spec.outer is None:
            return _rrule(sr.repeat, arrays[0], inner=Val(spec.inner))
        return _rrule(sr.repeat, arrays[0], inner=Val(spec.inner), outer=Val(spec.outer))
    if isinstance(spec, Concatenate):
        return _rrule(sr.concatenate, tuple(arrays), axis=Val(spec.axis))
    if isinstance(spec, Roll):
        return _rrule(sr.roll, arrays[0], Val(spec.shift), axis=Val(spec.axis))
    if isinstance(spec, BroadcastTo):
        return _rrule(sr.broadcast_to, arrays[0], shape=Val(spec.shape))
    if isinstance(spec, SumAxes):
        return _rrule(sr.sum, arrays[0], axis=Val(spec.axis))
    return _rrule(sr.kron, arrays[0], arrays[1])


def ours_cotangent(spec: OpSpec, dy: Array) -> object:
    """The cotangent stablerules gets: ``dy`` itself, or for a ``fill`` workload the ``Fill``
    of ``dy``'s first value (the peers and NumPy get the dense equivalent, ``dy``)."""
    if isinstance(spec, SumAxes) and spec.fill:
        return sr.Fill(float(dy.reshape(-1)[0]), tuple(dy.shape), dy.dtype)
    return dy


def tangent_arrays(tangents: object) -> list[Array]:
    """The dense arrays in a pullback's result, in order, skipping ``NoTangent``s."""
    if isinstance(tangents, np.ndarray):
        return [tangents]
    if isinstance(tangents, (tuple, list)):
        return [array for item in tangents for array in tangent_arrays(item)]
    if isinstance(tangents, sr.NoTangent):
        return []
    if isinstance(tangents, sr.Fill):  # a lazy tangent (W9's Fill case), materialized to check it
        return [np.asarray(tangents)]
    raise TypeError(f"expected dense tangents from a dense cotangent, got {type(tangents).__name__}")


# --- NumPy references ------------------------------------------------------------------------


def reference_forward(spec: OpSpec, arrays: Sequence[Array]) -> Array:
    """NumPy's own result (the forward rule must equal it exactly)."""
    if isinstance(spec, RepeatAxis):
        return np.repeat(arrays[0], spec.repeats, axis=spec.axis)
    if isinstance(spec, RepeatInnerOuter):
        result = julia_repeat(np, arrays[0], spec.inner, spec.outer)
        assert isinstance(result, np.ndarray)
        return result
    if isinstance(spec, Concatenate):
        return np.concatenate(tuple(arrays), axis=spec.axis)
    if isinstance(spec, Roll):
        return np.roll(arrays[0], spec.shift, axis=spec.axis)
    if isinstance(spec, BroadcastTo):
        return np.broadcast_to(arrays[0], spec.shape)
    if isinstance(spec, SumAxes):
        return np.asarray(np.sum(arrays[0], axis=spec.axis))
    return np.kron(arrays[0], arrays[1])


ReferencePullback: TypeAlias = Callable[[Sequence[Array], Array], tuple[Array, ...]]


def _repeat_axis_sum(spec: RepeatAxis) -> ReferencePullback:
    def reshape_sum(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        axis = spec.axis % len(shape)
        split = shape[:axis] + (shape[axis], spec.repeats) + shape[axis + 1 :]
        return (dy.reshape(split).sum(axis=axis + 1),)

    return reshape_sum


def _inner_outer_split(spec: RepeatInnerOuter, shape: Shape) -> tuple[Shape, tuple[int, ...], Shape]:
    """dy viewed as (outer_0, n_0, inner_0, outer_1, n_1, inner_1, ...): that view, the
    axes to sum, and x's shape padded to the count tuples' length."""
    length = max(len(shape), len(spec.inner), len(spec.outer or ()))
    base = pad_shape(shape, length)
    inner = pad_shape(spec.inner, length)
    outer = pad_shape(spec.outer or (), length)
    view = tuple(v for d in range(length) for v in (outer[d], base[d], inner[d]))
    axes = tuple(a for d in range(length) for a in (3 * d, 3 * d + 2))
    return view, axes, base


def _repeat_inner_outer_one_sum(spec: RepeatInnerOuter) -> ReferencePullback:
    def one_sum(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        view, axes, _ = _inner_outer_split(spec, shape)
        return (dy.reshape(view).sum(axis=axes).reshape(shape),)

    return one_sum


def _repeat_inner_outer_staged(spec: RepeatInnerOuter) -> ReferencePullback:
    def staged_sums(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        view, axes, _ = _inner_outer_split(spec, shape)
        reduced = dy.reshape(view)
        for axis in sorted(axes, reverse=True):  # one axis at a time, innermost first
            if reduced.shape[axis] != 1:
                reduced = reduced.sum(axis=axis)
            else:
                reduced = reduced.reshape(reduced.shape[:axis] + reduced.shape[axis + 1 :])
        return (reduced.reshape(shape),)

    return staged_sums


def _concatenate_slices(spec: Concatenate) -> ReferencePullback:
    def bare_slices(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        axis = spec.axis % dy.ndim
        pieces = []
        start = 0
        for array in arrays:
            stop = start + array.shape[axis]
            index = (slice(None),) * axis + (slice(start, stop),)
            pieces.append(dy[index])
            start = stop
        return tuple(pieces)

    return bare_slices


def _kron_einsum(optimize: bool) -> ReferencePullback:
    def einsums(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        a, b = arrays
        (m, n), (p, q) = a.shape, b.shape
        blocks = dy.reshape(m, p, n, q)  # dy[i*p + k, j*q + l] = a[i, j] * b[k, l]
        da = np.einsum("ikjl,kl->ij", blocks, np.conj(b), optimize=optimize)
        db = np.einsum("ikjl,ij->kl", blocks, np.conj(a), optimize=optimize)
        return (da, db)

    return einsums


def _roll_back(spec: Roll) -> ReferencePullback:
    def roll_back(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        return (np.roll(dy, spec.back(), axis=spec.axis),)

    return roll_back


def _roll_back_slices(spec: Roll) -> ReferencePullback:
    def slice_copies(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        # One allocation, then each of the 2**k blocks copied once (np.roll allocates per axis).
        dx = np.empty_like(dy)
        pieces: list[list[tuple[slice, slice]]] = [[(slice(None), slice(None))] for _ in range(dy.ndim)]
        for shift, axis in zip(spec.back(), spec.axis):
            offset = shift % dy.shape[axis]
            if offset:
                pieces[axis] = [(slice(None, -offset), slice(offset, None)), (slice(-offset, None), slice(None, offset))]
        for combination in itertools.product(*pieces):
            source = tuple(pair[0] for pair in combination)
            target = tuple(pair[1] for pair in combination)
            dx[target] = dy[source]
        return (dx,)

    return slice_copies
def _broadcast_sums(spec: BroadcastTo) -> dict[str, ReferencePullback]:
    def broadcast_axes(shape: Shape) -> tuple[int, ...]:
        lead = len(spec.shape) - len(shape)
        return tuple(axis for axis, extent in enumerate(spec.shape) if axis < lead or shape[axis - lead] == 1)

    def one_sum(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        return (dy.sum(axis=broadcast_axes(shape), keepdims=True).reshape(shape),)

    def add_reduce(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        return (np.add.reduce(dy, axis=broadcast_axes(shape), keepdims=True).reshape(shape),)

    return {"dy.sum(broadcast axes)": one_sum, "np.add.reduce": add_reduce}


def _sum_broadcast_copies(spec: SumAxes) -> dict[str, ReferencePullback]:
    """NumPy's broadcast copy of ``dy`` to ``x``'s shape (a fresh array, as ours is)."""

    def copy(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        return (np.broadcast_to(np.expand_dims(dy, spec.axis), shape).copy(),)

    def copyto(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
        shape = arrays[0].shape
        out = np.empty(shape, dtype=dy.dtype)
        np.copyto(out, np.expand_dims(dy, spec.axis))
        return (out,)

    if spec.fill:  # the dense equivalent of a Fill: NumPy's np.full of x's shape
        def full(arrays: Sequence[Array], dy: Array) -> tuple[Array, ...]:
            return (np.full(arrays[0].shape, dy.reshape(-1)[0], dtype=dy.dtype),)

        return {"np.full": full, "broadcast copy": copy}
    return {"broadcast copy": copy, "np.copyto(empty, broadcast)": copyto}


def reference_pullbacks(spec: OpSpec) -> dict[str, ReferencePullback]:
    """NumPy formulations of the pullback, by name; the fastest one is the reference."""
    if isinstance(spec, RepeatAxis):
        return {"reshape+sum": _repeat_axis_sum(spec)}
    if isinstance(spec, RepeatInnerOuter):
        return {
            "reshape+one sum": _repeat_inner_outer_one_sum(spec),
            "reshape+staged sums": _repeat_inner_outer_staged(spec),
        }
    if isinstance(spec, Concatenate):
        return {"bare slices": _concatenate_slices(spec)}
    if isinstance(spec, Roll):
        return {"np.roll by -shift": _roll_back(spec), "one allocation, block copies": _roll_back_slices(spec)}
    if isinstance(spec, BroadcastTo):
        return _broadcast_sums(spec)
    if isinstance(spec, SumAxes):
        return _sum_broadcast_copies(spec)
    return {"einsum optimize=False": _kron_einsum(False), "einsum optimize=True": _kron_einsum(True)}


# --- the workloads ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One benchmark: an op call, its inputs, its reference and its goals.

    ``goals`` maps a comparison (``"numpy"``, ``"jax"``) to the smallest acceptable ratio
    ``reference_time / stablerules_time`` of the pullback; ``lazy_goal``: the pullback must
    return a ``Fill`` (O(1), for a ``Fill`` cotangent).
    """

    id: str
    issue: int
    spec: OpSpec
    shapes: tuple[Shape, ...]
    dtype: str
    reference_text: str
    goals: dict[str, float] = field(default_factory=dict)
    bandwidth_goal: float | None = None
    memory_goal: float | None = None
    arange_input: bool = False
    large: bool = False
    lazy_goal: bool = False

    def output_shape(self) -> Shape:
        """The primal's shape, computed without running the op (W6's is 4.8 GB)."""
        spec = self.spec
        if isinstance(spec, RepeatAxis):
            shape = list(self.shapes[0])
            shape[spec.axis] *= spec.repeats
            return tuple(shape)
        if isinstance(spec, RepeatInnerOuter):
            length = max(len(self.shapes[0]), len(spec.inner), len(spec.outer or ()))
            base = pad_shape(self.shapes[0], length)
            inner = pad_shape(spec.inner, length)
            outer = pad_shape(spec.outer or (), length)
            return tuple(n * i * o for n, i, o in zip(base, inner, outer))
        if isinstance(spec, Roll):
            return self.shapes[0]
        if isinstance(spec, Concatenate):
            first = list(self.shapes[0])
            first[spec.axis] = sum(shape[spec.axis] for shape in self.shapes)
            return tuple(first)
        if isinstance(spec, BroadcastTo):
            return spec.shape
        if isinstance(spec, SumAxes):
            return tuple(extent for axis, extent in enumerate(self.shapes[0]) if axis not in spec.axis)
        a, b = self.shapes
        return tuple(m * n for m, n in zip(a, b))

    def cotangent_bytes(self) -> int:
        return math.prod(self.output_shape()) * np.dtype(self.dtype).itemsize

    def make_inputs(self, seed: int = 0) -> tuple[list[Array], Array]:
        """The primal arrays and a cotangent of the output's shape and dtype."""
        rng = np.random.default_rng(seed)
        dtype = np.dtype(self.dtype)
        if self.arange_input:
            arrays: list[Array] = [np.arange(math.prod(self.shapes[0]), dtype=dtype).reshape(self.shapes[0])]
        else:
            arrays = [rng.standard_normal(shape).astype(dtype) for shape in self.shapes]
        dy: Array = rng.standard_normal(self.output_shape(), dtype=np.float64 if dtype.itemsize >= 8 else np.float32)
        if isinstance(self.spec, SumAxes) and self.spec.fill:
            dy = np.full_like(dy, dy.reshape(-1)[0])  # the dense equivalent of the Fill ours gets
        return arrays, dy.astype(dtype, copy=False)


def workloads(*, tiny: bool, large: bool) -> list[Workload]:
    """W1-W5, W7, W8, W9 (a dense cotangent) and W9s (a Fill), and W6 when ``large``; ``tiny``
    shrinks every size (for the test)."""
    w1 = RepeatAxis(3, 0) if tiny else RepeatAxis(7, 0)
    w2 = RepeatInnerOuter((2, 1, 3)) if tiny else RepeatInnerOuter((7, 1, 10))
    w3 = RepeatInnerOuter((2, 1, 3), (2, 1, 2)) if tiny else RepeatInnerOuter((7, 1, 10), (4, 1, 2))
    x1: Shape = (10,) if tiny else (100,)
    x2: Shape = (4, 3, 2) if tiny else (200, 3, 4)
    c: Shape = (1, 4, 5, 5) if tiny else (1, 64, 56, 56)
    k5: tuple[Shape, Shape] = ((2, 3), (3, 2)) if tiny else ((10, 20), (30, 10))
    k6: tuple[Shape, Shape] = ((6, 8), (9, 5)) if tiny else ((100, 200), (300, 100))
    r7: Shape = (2, 3, 6, 7) if tiny else (64, 64, 56, 56)
    b8: tuple[Shape, Shape] = ((1, 4, 1, 5), (3, 4, 6, 5)) if tiny else ((1, 64, 1, 56), (32, 64, 56, 56))
    s9: Shape = (20, 3, 4) if tiny else (200, 3, 40)
    result = [
        Workload("W1", 3, w1, (x1,), "float64", f"dy.reshape({x1[0]}, {w1.repeats}).sum(1)",
                 goals={"numpy": 2.0, "jax": 8.0}, arange_input=True),
        Workload("W2", 3, w2, (x2,), "float64", "dy.reshape(...).sum(axes)", goals={"numpy": 5.0, "jax": 2.5}),
        Workload("W3", 3, w3, (x2,), "float64", "dy.reshape(...).sum(axes)", goals={"numpy": 8.0, "jax": 6.0}),
        Workload("W4", 4, Concatenate(1), (c, c), "float32", "two bare slices of dy",
                 goals={"numpy": 0.25, "jax": 10.0}),
        Workload("W5", 5, Kron(), k5, "float64", "two einsums on dy's 4-D view",
                 goals={"numpy": 3.0, "jax": 4.0}),
        Workload("W7", 15, Roll((3, -5), (2, 3)), (r7,), "float32", "np.roll(dy, (-3, 5), axis=(2, 3))",
                 goals={"jax": 2.0}, bandwidth_goal=0.7),
        Workload("W8", 15, BroadcastTo(b8[1]), (b8[0],), "float32", "dy.sum over the broadcast axes",
                 goals={"jax": 2.0}, bandwidth_goal=0.7),
        Workload("W9", 15, SumAxes((0, 2)), (s9,), "float64", "NumPy's broadcast copy of dy",
                 goals={"numpy": 3.0}),
        Workload("W9s", 15, SumAxes((0, 2), fill=True), (s9,), "float64", "np.full of x's shape (dense)",
                 lazy_goal=True),
    ]
    if large:
        result.append(
            Workload("W6", 5, Kron(), k6, "float64", "two einsums on dy's 4-D view",
                     goals={"numpy": 3.0, "jax": 2.5}, bandwidth_goal=0.7, memory_goal=0.01, large=True)
        )
    return result


def check_close(name: str, got: Sequence[Array], expected: Sequence[Array]) -> str | None:
    """``None`` when ``got`` matches ``expected`` (shapes, dtypes, values), else why not."""
    if len(got) != len(expected):
        return f"{name}: {len(got)} arrays, expected {len(expected)}"
    for index, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        if g.shape != e.shape:
            return f"{name}[{index}]: shape {g.shape}, expected {e.shape}"
        if g.dtype != e.dtype:
            return f"{name}[{index}]: dtype {g.dtype}, expected {e.dtype}"
        rtol = 1e-4 if e.dtype.itemsize <= 4 or e.dtype == np.complex64 else 1e-9
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        if not np.allclose(g, e, rtol=rtol, atol=rtol * max(scale, 1.0)):
            error = float(np.max(np.abs(g.astype(np.complex128) - e)))
            return f"{name}[{index}]: differs from the NumPy reference (max abs error {error:.3g})"
    return None
