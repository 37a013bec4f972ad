"""The 16-bit floats (SPEC section 15): ``np.float16`` and ``ml_dtypes.bfloat16`` in every op.

- Forwards equal NumPy's bit for bit (``index_add``, which NumPy has no single function for,
  against the float64 sum rounded once: it accumulates in float32, as the spec asks).
- Pullbacks equal the float64 reference (the VJP of NumPy's own forward in float64, by basis
  vectors, never the rule's formula) rounded once to the format, or within one unit in the
  last place where the float32 accumulation rounds differently from float64 (the ops that add:
  counted, and bounded by one ulp).
  On the small cases every pullback is exact; on long sums (about 300 terms) take's float32
  scatter-add is one ulp off on a few entries in ten thousand.
- Scatter-adds bitwise equal for 1 and 2 threads (subprocesses); CUDA under the simulator.
- The conversion kernels against NumPy's and ml_dtypes' casts on every 16-bit pattern; the
  testing utilities (float64 finite differences, the format's tolerance), autograd (float16),
  the tangent algebra, specs and precompile, byte order, NumPy's dtype promotion.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
import stablerules.testing as testing
from stablerules import Fill, NoTangent, Val, ZeroTangent
from tests.ci import in_ci, run_in_cuda_simulator, skip_unless_ci

try:
    import ml_dtypes  # the `half` extra (JAX's own dependency), in `test`
except ImportError:  # pragma: no cover - installed with the test extra
    if in_ci():
        raise
    pytest.skip("ml_dtypes (the `half` extra) is not installed", allow_module_level=True)

REPO = Path(__file__).resolve().parents[1]
Array = npt.NDArray[Any]
FORMATS = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule

COUNTS = np.array([1, 0, 2, 3])
TAKE = np.array([2, 0, 2, 1, 2])
ALONG = np.array([[0, 3, 3], [1, 1, 2], [3, 0, 3]])


@dataclass(frozen=True)
class Op:
    """``call(*xs)``: the op, its arguments and keywords; NumPy's ``reference(*xs)`` (the same call on any dtype), the data
    arguments' shapes, and how a pullback's result holds their tangents."""

    name: str
    call: Callable[..., tuple[Any, tuple[Any, ...], dict[str, Any]]]
    reference: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    sequence: bool = False  # the tangents are back(dy)[0] (one tuple for the sequence)
    adds: bool = False  # the pullback (or forward) sums: one-ulp differences allowed
    positions: tuple[int, ...] = (0, 1)  # where the data arguments' tangents are in back(dy)

    def ours(self, *xs: Array) -> Any:
        target, args, kwargs = self.call(*xs)
        return target(*args, **kwargs)

    def rrule(self, *xs: Array) -> tuple[Any, Callable[[object], tuple[object, ...]]]:
        target, args, kwargs = self.call(*xs)
        result: tuple[Any, Callable[[object], tuple[object, ...]]] = _rrule(target, *args, **kwargs)
        return result


def _index_add(x: Array, values: Array) -> Array:
    out = x.astype(np.float64)
    np.add.at(out, TAKE, values.astype(np.float64))
    return out


OPS = [
    Op("repeat", lambda x: (sr.repeat, (x, Val(3)), dict(axis=Val(0))), lambda x: np.repeat(x, 3, axis=0), ((3, 4),), adds=True),
    Op("repeat_counts", lambda x: (sr.repeat, (x, COUNTS), dict(axis=Val(1))), lambda x: np.repeat(x, COUNTS, axis=1), ((3, 4),), adds=True),
    Op("tile", lambda x: (sr.tile, (x, Val((2, 3))), dict()), lambda x: np.tile(x, (2, 3)), ((3, 4),), adds=True),
    Op("concatenate", lambda a, b: (sr.concatenate, ((a, b),), dict(axis=Val(1))), lambda a, b: np.concatenate((a, b), axis=1), ((3, 4), (3, 2)), sequence=True),
    Op("stack", lambda a, b: (sr.stack, ((a, b),), dict(axis=Val(1))), lambda a, b: np.stack((a, b), axis=1), ((3, 4), (3, 4)), sequence=True),
    Op("hstack", lambda a, b: (sr.hstack, ((a, b),), dict()), lambda a, b: np.hstack((a, b)), ((3, 4), (3, 2)), sequence=True),
    Op("vstack", lambda a, b: (sr.vstack, ((a, b),), dict()), lambda a, b: np.vstack((a, b)), ((3, 4), (2, 4)), sequence=True),
    Op("cat", lambda a, b: (sr.cat, (a, b), dict(dims=Val(1))), lambda a, b: np.concatenate((a, b), axis=1), ((3, 4), (3, 2))),
    Op("kron", lambda a, b: (sr.kron, (a, b), dict()), lambda a, b: np.kron(a, b), ((2, 3), (3, 2)), adds=True),
    Op("flip", lambda x: (sr.flip, (x, Val(1)), dict()), lambda x: np.flip(x, 1), ((3, 4),)),
    Op("roll", lambda x: (sr.roll, (x, Val(2)), dict(axis=Val(1))), lambda x: np.roll(x, 2, axis=1), ((3, 4),)),
    Op("permute_dims", lambda x: (sr.permute_dims, (x, Val((1, 2, 0))), dict()), lambda x: np.permute_dims(x, (1, 2, 0)), ((2, 3, 4),)),
    Op("transpose", lambda x: (sr.transpose, (x,), dict()), lambda x: np.transpose(x), ((3, 4),)),
    Op("swapaxes", lambda x: (sr.swapaxes, (x, Val(0), Val(2)), dict()), lambda x: np.swapaxes(x, 0, 2), ((2, 3, 4),)),
    Op("reshape", lambda x: (sr.reshape, (x, Val((4, 3))), dict()), lambda x: np.reshape(x, (4, 3)), ((3, 4),)),
    Op("broadcast_to", lambda x: (sr.broadcast_to, (x, Val((2, 3, 5, 4))), dict()), lambda x: np.broadcast_to(x, (2, 3, 5, 4)), ((3, 1, 4),), adds=True),
    Op("sum", lambda x: (sr.sum, (x, Val(0)), dict()), lambda x: np.sum(x, 0), ((7, 5),), adds=True),
    Op("sum_all", lambda x: (sr.sum, (x,), dict()), lambda x: np.sum(x), ((7, 5),), adds=True),
    Op("mean", lambda x: (sr.mean, (x, Val(1)), dict(keepdims=Val(True))), lambda x: np.mean(x, 1, keepdims=True), ((7, 5),), adds=True),
    Op("pad", lambda x: (sr.pad, (x, Val((1, 2, 0, 1)), 1.5), dict()), lambda x: np.pad(x, ((1, 2), (0, 1)), constant_values=1.5), ((3, 4),)),
    Op("split", lambda x: (sr.split, (x, Val((1, 3))), dict(axis=Val(1))), lambda x: tuple(np.split(x, (1, 3), axis=1)), ((3, 4),)),
    Op("getindex", lambda x: (sr.getindex, (x, sr.ix[1:, ::2]), dict()), lambda x: x[1:, ::2], ((3, 4),)),
    Op("take", lambda x: (sr.take, (x, TAKE), dict(axis=Val(0))), lambda x: np.take(x, TAKE, axis=0), ((3, 4),), adds=True),
    Op("take_along_axis", lambda x: (sr.take_along_axis, (x, ALONG), dict(axis=Val(1))), lambda x: np.take_along_axis(x, ALONG, axis=1), ((3, 4),), adds=True),
    Op("index_add", lambda x, v: (sr.index_add, (x, TAKE, v), dict(axis=Val(0))), _index_add, ((3, 4), (5, 4)), adds=True, positions=(0, 2)),
]
IDS = [op.name for op in OPS]


def _data(shape: tuple[int, ...], dtype: np.dtype[Any], seed: int) -> Array:
    rng = np.random.default_rng(seed)
    return np.asarray(rng.standard_normal(shape) * 3).astype(dtype)


def _bits(array: Array) -> Array:
    assert array.dtype.itemsize == 2, array.dtype
    return np.ascontiguousarray(array).view(np.uint16)


def _ulps(ours: Array, expected: Array) -> Array:
    """How many representable values apart, per element (same format; sign-magnitude order)."""
    def ordered(array: Array) -> Array:
        bits = _bits(array).astype(np.int64)
        result: Array = np.where(bits & 0x8000, -(bits & 0x7FFF), bits)
        return result

    distance: Array = np.abs(ordered(ours) - ordered(expected))
    return distance


def _outputs(value: object) -> list[Array]:
    return [np.asarray(item) for item in value] if isinstance(value, (tuple, list)) else [np.asarray(value)]


def _vjp(op: Op, xs: list[Array], dys: list[Array]) -> list[Array]:
    """The float64 VJP of NumPy's forward, by basis vectors: every op is affine in each
    argument (kron bilinear), so ``dx[i] = <f(x with x_k = e_i) - f(x with x_k = 0), dy>``."""
    wide = [x.astype(np.float64) for x in xs]
    grads = []
    for k, x in enumerate(wide):
        zero = list(wide)
        zero[k] = np.zeros_like(x)
        base = _outputs(op.reference(*zero))
        grad = np.zeros(x.size)
        for i in range(x.size):
            basis = np.zeros(x.size)
            basis[i] = 1.0
            trial = list(wide)
            trial[k] = basis.reshape(x.shape)
            grad[i] = sum(float(np.sum((y - y0) * dy)) for y, y0, dy in zip(_outputs(op.reference(*trial)), base, dys))
        grads.append(grad.reshape(x.shape))
    return grads


def _tangents(op: Op, result: tuple[Any, ...], count: int) -> list[object]:
    """The data arguments' tangents, a ``Fill`` made dense."""
    found = list(result[0]) if op.sequence else [result[position] for position in op.positions[:count]]
    return [np.full(tangent.shape, tangent.value, tangent.dtype) if isinstance(tangent, Fill) else tangent for tangent in found]


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_forward_is_numpys_bit_for_bit(op: Op, dtype: np.dtype[Any]) -> None:
    xs = [_data(shape, dtype, seed) for seed, shape in enumerate(op.shapes)]
    xs[0].flat[0] = np.nan
    ours = _outputs(op.ours(*xs))
    if op.name == "index_add":
        expected = [op.reference(*xs).astype(dtype)]  # float32 accumulation, one rounding
    else:
        expected = _outputs(op.reference(*xs))
    assert len(ours) == len(expected)
    for got, want in zip(ours, expected):
        assert got.dtype == want.dtype == dtype
        assert got.shape == want.shape
        np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_non_native_float16_gets_numpys_dtype_and_values(op: Op) -> None:
    swapped = np.dtype(np.float16).newbyteorder()
    xs = [_data(shape, np.dtype(np.float16), seed).astype(swapped) for seed, shape in enumerate(op.shapes)]
    ours = _outputs(op.ours(*xs))
    expected = [op.reference(*xs).astype(np.float16)] if op.name == "index_add" else _outputs(op.reference(*xs))
    for got, want in zip(ours, expected, strict=True):
        assert got.dtype == want.dtype, (op.name, got.dtype, want.dtype)
        np.testing.assert_array_equal(_bits(got.astype(np.float16)), _bits(want.astype(np.float16)))
    y, back = op.rrule(*xs)
    dys = [_data(out.shape, np.dtype(np.float16), 9) for out in _outputs(y)]
    tangents = _tangents(op, back(tuple(dys) if isinstance(y, tuple) else dys[0]), len(xs))
    assert all(isinstance(t, np.ndarray) and t.dtype == np.float16 for t in tangents)


def test_forward_moves_signalling_nans_and_payloads_as_bits() -> None:
    for dtype, bits in [(np.dtype(np.float16), [0x7D01, 0xFC01, 0x7E05]), (np.dtype(ml_dtypes.bfloat16), [0x7F81, 0xFF81, 0x7FC3])]:
        x = np.array(bits * 4, np.uint16).view(dtype).reshape(3, 4)
        for op in OPS:
            if op.adds and op.name not in ("repeat", "tile", "broadcast_to", "take", "take_along_axis", "repeat_counts"):
                continue
            xs = [x] + [_data(shape, dtype, 1) for shape in op.shapes[1:]] if op.shapes[0] == (3, 4) else None
            if xs is None:
                continue
            for got, want in zip(_outputs(op.ours(*xs)), _outputs(op.reference(*xs))):
                np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=op.name)


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_pullback_is_the_float64_reference_rounded_once(op: Op, dtype: np.dtype[Any]) -> None:
    xs = [_data(shape, dtype, seed) for seed, shape in enumerate(op.shapes)]
    y, back = op.rrule(*xs)
    dys = [_data(out.shape, dtype, 10 + index) for index, out in enumerate(_outputs(y))]
    result = back(tuple(dys) if isinstance(y, tuple) else dys[0])
    tangents = _tangents(op, result, len(xs))
    references = _vjp(op, xs, [dy.astype(np.float64) for dy in dys])
    for tangent, reference, x in zip(tangents, references, xs):
        assert isinstance(tangent, np.ndarray), tangent
        assert tangent.dtype == dtype and tangent.shape == x.shape
        rounded = reference.astype(dtype)
        ulps = _ulps(tangent, rounded)
        if op.adds:
            assert ulps.max() <= 1, (op.name, ulps.max())
        else:
            np.testing.assert_array_equal(_bits(tangent), _bits(rounded))


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_testing_utilities_check_every_op(op: Op, dtype: np.dtype[Any]) -> None:
    """``sr.testing`` on 16-bit arguments: finite differences in float64, the format's
    tolerance, lazy cotangents and the steady state (no compile, no fallback) included."""
    xs = [_data(shape, dtype, seed) for seed, shape in enumerate(op.shapes)]
    target, args, kwargs = op.call(*xs)
    testing.test_rrule(target, *args, **kwargs)
    testing.test_frule(target, *args, **kwargs)


def test_testing_tolerances_are_the_formats() -> None:
    """A pullback off by a few units in the last place fails, one off by a fraction of a unit
    passes: the default tolerance is the format's (``rtol`` 1e-3 for float16, 1e-2 for
    bfloat16), with finite differences in float64."""
    for dtype, eps in [(np.dtype(np.float16), 2.0**-10), (np.dtype(ml_dtypes.bfloat16), 2.0**-7)]:
        for factor, passes in [(1.0, True), (1.0 + eps / 4, True), (1.0 + 8 * eps, False)]:
            def double(x: Array) -> Array:
                return (np.asarray(x, np.float64) * 2).astype(np.asarray(x).dtype)

            def rule(x: Array, factor: float = factor) -> tuple[Array, Callable[[object], tuple[Array]]]:
                y = double(x)
                return y, lambda dy: ((sr.materialize(dy, y).astype(np.float64) * 2 * factor).astype(x.dtype),)

            sr.register_rrule(double, rule)
            x = np.linspace(1.0, 2.0, 8).astype(dtype)
            if passes:
                testing.test_rrule(double, x, check_compile=False)
            else:
                with pytest.raises(AssertionError, match="finite differences"):
                    testing.test_rrule(double, x, check_compile=False)


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_autograd_takes_float16_through_every_op(op: Op) -> None:
    """``autograd.grad`` through ``stablerules.autograd`` on float16 leaves (autograd's own
    vspaces take float16; it has no bfloat16): the forward NumPy's bits, the gradients of
    ``sum(op(xs) * dy)`` float16, equal to the float64 reference rounded once (one ulp where
    an adding op's float32 accumulation rounds differently)."""
    import autograd
    import autograd.numpy as anp

    import stablerules.autograd as sra

    dtype = np.dtype(np.float16)
    xs = [_data(shape, dtype, seed) for seed, shape in enumerate(op.shapes)]
    target, args, kwargs = op.call(*xs)
    boxed = getattr(sra, target.name)
    outputs = _outputs(op.reference(*xs))
    dys = [_data(y.shape, dtype, 10 + index) for index, y in enumerate(outputs)]
    positions = [index for index, arg in enumerate(args) if any(arg is x for x in xs)]

    def call(*values: Any) -> Any:
        if op.sequence:
            return boxed(tuple(values), *args[1:], **kwargs)
        given = list(args)
        for position, value in zip(positions if positions else [0], values):
            given[position] = value
        return boxed(*given, **kwargs)

    if op.name != "index_add":  # (its float32 accumulation is checked in the forward test)
        for got, want in zip(_outputs(call(*xs)), outputs, strict=True):
            np.testing.assert_array_equal(_bits(got), _bits(want))

    def loss(*values: Any) -> Any:
        y = call(*values)
        parts = [y[index] for index in range(len(dys))] if op.name == "split" else [y]  # a SequenceBox
        return sum(anp.sum(part * dy) for part, dy in zip(parts, dys))

    references = _vjp(op, xs, [dy.astype(np.float64) for dy in dys])
    for k, (x, reference) in enumerate(zip(xs, references)):
        gradient = autograd.grad(loss, k)(*xs)
        assert gradient.dtype == dtype and gradient.shape == x.shape
        ulps = _ulps(gradient, reference.astype(dtype))
        assert ulps.max() <= (1 if op.adds else 0), (op.name, k, ulps.max())


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_conversion_kernels_are_numpys_casts_bit_for_bit(dtype: np.dtype[Any]) -> None:
    """The CPU kernels that convert (``_half.widen``/``narrow``) against NumPy's and ml_dtypes'
    own casts: every 16-bit pattern widened, and float32 patterns around every rounding case
    (halfway points both ways, the subnormal range, overflow to infinity, zeros, infinities)
    narrowed; a NaN stays a NaN of its sign."""
    from stablerules import _half

    every = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    wide = _half.widen(every)
    assert wide.dtype == np.float32
    expected = every.astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(wide.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])
    assert np.isnan(wide[nan]).all()
    # float32 patterns: each 16-bit value's float32 bits, plus and minus 0..2 and a halfway step
    step = 1 << (13 if dtype == np.float16 else 16)
    base = expected[~nan].view(np.uint32).astype(np.int64)
    offsets = np.array([0, 1, 2, step // 2 - 1, step // 2, step // 2 + 1, -1, -2, -(step // 2)])
    bits = (base[:, None] + offsets[None, :]).reshape(-1)
    rng = np.random.default_rng(0)
    bits = np.concatenate([bits, rng.integers(0, 1 << 32, 200000)])
    bits = bits[(bits >= 0) & (bits < (1 << 32))].astype(np.uint32)
    values = bits.view(np.float32)
    with np.errstate(all="ignore"):
        reference = values.astype(dtype)
    got = _half.narrow(values, dtype)
    assert got.dtype == dtype
    keep = ~np.isnan(values)
    np.testing.assert_array_equal(_bits(got)[keep], _bits(reference)[keep])
    assert np.isnan(got[~keep].astype(np.float32)).all()
    np.testing.assert_array_equal(np.signbit(got[~keep].astype(np.float32)), np.signbit(values[~keep]))


_HELPERS_DRIVER = """import numpy as np
from numba import njit, types


@njit
def widen_all(bits, out):
    for i in range(bits.size):
        out[i] = widen(bits[i])


@njit
def narrow_all(values, out):
    for i in range(values.size):
        out[i] = narrow(values[i])
"""


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_in_kernel_conversions_are_numpys_casts_bit_for_bit(dtype: np.dtype[Any]) -> None:
    """The conversions the fused kernels inline (``_units.half_helpers``: ``widen`` of the
    bits, ``narrow`` to the bits) against NumPy's and ml_dtypes' casts: every 16-bit pattern
    widened (NaN payloads included), and float32 patterns around every rounding case narrowed
    (halfway points both ways, subnormals, overflow to infinity, zeros); a NaN narrows to a
    quiet NaN of its sign."""
    from stablerules._units import half_helpers

    namespace: dict[str, Any] = {}
    exec(compile(half_helpers(_HELPERS_DRIVER, dtype.name), "<half helpers>", "exec"), namespace)
    every = np.arange(1 << 16, dtype=np.uint16)
    wide = np.empty(1 << 16, np.float32)
    namespace["widen_all"](every, wide)
    expected = every.view(dtype).astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(wide.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])
    assert np.isnan(wide[nan]).all()
    np.testing.assert_array_equal(np.signbit(wide[nan]), np.signbit(expected[nan]))
    step = 1 << (13 if dtype == np.float16 else 16)
    base = expected[~nan].view(np.uint32).astype(np.int64)
    offsets = np.array([0, 1, 2, step // 2 - 1, step // 2, step // 2 + 1, -1, -2, -(step // 2)])
    bits = (base[:, None] + offsets[None, :]).reshape(-1)
    bits = np.concatenate([bits, np.random.default_rng(1).integers(0, 1 << 32, 200000)])
    values = bits[(bits >= 0) & (bits < (1 << 32))].astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        reference = values.astype(dtype)
    got = np.empty(values.size, np.uint16)
    namespace["narrow_all"](values, got)
    keep = ~np.isnan(values)
    np.testing.assert_array_equal(got[keep], _bits(reference)[keep])
    narrowed_nans = got[~keep].view(dtype).astype(np.float32)
    assert np.isnan(narrowed_nans).all()
    np.testing.assert_array_equal(np.signbit(narrowed_nans), np.signbit(values[~keep]))
    quiet = 0x0200 if dtype == np.float16 else 0x0040
    assert (got[~keep] & quiet).all()
    with pytest.raises(ValueError, match="format"):
        half_helpers(_HELPERS_DRIVER, "float32")


def _special(dy: Array, dtype: np.dtype[Any]) -> Array:
    """``dy`` with NaNs, infinities, signed zeros and large values at fixed places."""
    flat = dy.reshape(-1).copy()
    big = 40000.0 if dtype == np.float16 else 3e38
    flat[3] = np.nan
    flat[flat.size // 2] = np.inf
    flat[-1] = -np.inf
    flat[13] = -0.0
    flat[17:19] = np.asarray(big, dtype)  # two adjacent: their sum overflows the format
    return flat.reshape(dy.shape)


_TAKE_CASES = [
    ((50, 7), np.array([3, 0, 3, 49, 3, 1, 0, 0, 7] * 9), 0),
    ((3, 40, 5), np.array([39, 0, 0, 5, 5, 5, 12] * 5), 1),
    ((4, 30), np.array([0, 119, 5, 5, 60] * 8), None),
    ((64, 16), (np.random.default_rng(2).zipf(1.2, 3000) - 1) % 64, 0),
    ((200, 3), np.repeat(np.arange(0, 200, 3), 4), 0),
]


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_take_pullback_sums_the_16_bit_cotangent_in_float32_in_one_kernel(dtype: np.dtype[Any]) -> None:
    """take's 16-bit scatter-add reads ``dy``'s bits and writes ``dx`` rounded once from a
    float32 sum in index-position order: equal bit for bit to NumPy's float32 ``np.add.at``
    (which adds in that order) rounded once, NaN, infinities, signed zeros and overflow
    included; no conversion pass runs (no ``half`` kernel launch), the fused kernel does.
    With many terms, within one ulp of the float64 sum rounded once."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    for seed, (shape, idx, axis) in enumerate(_TAKE_CASES):
        x = _data(shape, dtype, seed)
        y, back = _rrule(sr.take, x, idx, axis=None if axis is None else Val(axis))
        dy = _special(_data(y.shape, dtype, seed + 10), dtype)
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="take", kind="accumulate-half")
            (dx, tangent) = back(dy)
            assert kernel_launches(op="half") == before[0]
            assert kernel_launches(op="take", kind="accumulate-half") == before[1] + 1
        assert isinstance(tangent, NoTangent) and dx.dtype == dtype and dx.shape == x.shape
        expected = np.zeros(x.shape, np.float32)
        if axis is None:
            np.add.at(expected.reshape(-1), idx, dy.astype(np.float32).reshape(-1))
        else:
            np.add.at(np.moveaxis(expected, axis, 0), idx, np.moveaxis(dy.astype(np.float32), axis, 0))
        with np.errstate(all="ignore"):
            rounded = expected.astype(dtype)
        same = ~np.isnan(expected)
        np.testing.assert_array_equal(_bits(dx)[same], _bits(rounded)[same])
        assert np.isnan(dx[~np.isnan(expected) == False]).all()  # noqa: E712
        assert np.isinf(dx.astype(np.float32)).any()  # the infinities (or float16 overflow) reached dx
        wide = np.zeros(x.shape)
        if axis is None:
            np.add.at(wide.reshape(-1), idx, dy.astype(np.float64).reshape(-1))
        else:
            np.add.at(np.moveaxis(wide, axis, 0), idx, np.moveaxis(dy.astype(np.float64), axis, 0))
        finite = np.isfinite(wide) & (np.abs(wide) < float(np.finfo(dtype).max))
        with np.errstate(all="ignore"):
            assert _ulps(dx[finite], wide[finite].astype(dtype)).max() <= 1


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_take_along_axis_pullback_sums_the_16_bit_cotangent_in_one_kernel(dtype: np.dtype[Any]) -> None:
    """take_along_axis's 16-bit scatter-add reads ``dy``'s bits and writes ``dx``'s, summing
    each row in float32 in ``(t, c)`` order: equal bit for bit to NumPy's float32 ``np.add.at``
    in that order rounded once (NaN, infinities, overflow), with no conversion pass."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    rng = np.random.default_rng(4)
    for seed, (shape, index_shape, axis) in enumerate((((6, 5, 4), (6, 30, 4), 1), ((7, 9), (7, 40), 1), ((20, 3), (50, 3), 0))):
        x = _data(shape, dtype, seed)
        indices = rng.integers(0, shape[axis], index_shape)
        y, back = _rrule(sr.take_along_axis, x, indices, axis=Val(axis))
        dy = _special(_data(y.shape, dtype, seed + 40), dtype)
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="take_along_axis", kind="scatter-along-half")
            (dx, tangent) = back(dy)[:2]
            assert kernel_launches(op="half") == before[0]
            assert kernel_launches(op="take_along_axis", kind="scatter-along-half") == before[1] + 1
        assert isinstance(tangent, NoTangent) and dx.dtype == dtype and dx.shape == x.shape
        expected = np.zeros(shape, np.float32)
        where = list(np.indices(index_shape))
        where[axis] = indices
        np.add.at(expected, tuple(where), dy.astype(np.float32))
        with np.errstate(all="ignore"):
            rounded = expected.astype(dtype)
        same = ~np.isnan(expected)
        np.testing.assert_array_equal(_bits(dx)[same], _bits(rounded)[same])
        assert np.isnan(dx[~same]).all() and (~same).any()


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_index_add_forward_sums_16_bit_values_onto_x_in_one_kernel(dtype: np.dtype[Any]) -> None:
    """index_add of ``x`` and ``values`` of one 16-bit dtype reads both as bits and writes
    ``y``'s: each row ``x``'s value plus its terms in index-position order, in float32, rounded
    once; equal bit for bit to NumPy's float32 ``np.add.at`` onto ``x`` rounded once (NaN,
    infinities, overflow), with no conversion pass; ``rrule``'s primal is the same."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    rng = np.random.default_rng(5)
    for seed, (shape, axis, values_shape) in enumerate((((20, 6), 0, (50, 6)), ((4, 9, 3), 1, (4, 50, 3)), ((20, 6), 0, (1, 6)))):
        x = _special(_data(shape, dtype, seed), dtype)
        idx = rng.integers(0, shape[axis], 50)
        values = _data(values_shape, dtype, seed + 50)
        values = _special(values, dtype) if values.size > 20 else values
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="index_add", kind="accumulate-half")
            y = sr.index_add(x, idx, values, axis=Val(axis))
            assert kernel_launches(op="half") == before[0]
            assert kernel_launches(op="index_add", kind="accumulate-half") == before[1] + 1
        assert y.dtype == dtype and y.shape == x.shape
        expected = x.astype(np.float32)
        target = shape[:axis] + (50,) + shape[axis + 1 :]
        np.add.at(np.moveaxis(expected, axis, 0), idx, np.moveaxis(np.broadcast_to(values.astype(np.float32), target), axis, 0))
        with np.errstate(all="ignore"):
            rounded = expected.astype(dtype)
        same = ~np.isnan(expected)
        np.testing.assert_array_equal(_bits(y)[same], _bits(rounded)[same])
        assert np.isnan(y[~same]).all() and (~same).any()
        primal, _ = _rrule(sr.index_add, x, idx, values, axis=Val(axis))
        np.testing.assert_array_equal(_bits(primal), _bits(y))


_REPEATS: list[tuple[Callable[[Array], tuple[Any, Any]], Callable[[Array], Array], bool]] = [
    # (rrule, float64 reference pullback, whether dx is visited more than once)
    (lambda x: _rrule(sr.repeat, x, inner=Val((7, 1, 10)), outer=Val((4, 1, 2))),
     lambda dy: dy.reshape(4, 6, 7, 3, 2, 4, 10).sum(axis=(0, 2, 4, 6)), True),
    (lambda x: _rrule(sr.repeat, x, Val(3), axis=Val(1)), lambda dy: dy.reshape(6, 3, 3, 4).sum(axis=2), False),
    (lambda x: _rrule(sr.repeat, x, Val(20), axis=Val(2)), lambda dy: dy.reshape(6, 3, 4, 20).sum(axis=3), False),
    (lambda x: _rrule(sr.tile, x, Val((2, 1, 3))), lambda dy: dy.reshape(2, 6, 3, 3, 4).sum(axis=(0, 3)), True),
    (lambda x: _rrule(sr.repeat, x, inner=Val((1, 20, 1))), lambda dy: dy.reshape(6, 3, 20, 4).sum(axis=2), True),
    (lambda x: _rrule(sr.repeat, x, inner=Val((2, 1, 1)), outer=Val((1, 1, 3))),
     lambda dy: dy.reshape(6, 2, 3, 3, 4).sum(axis=(1, 3)), True),
    (lambda x: _rrule(sr.repeat, x, inner=Val((1, 5, 3)), outer=Val((3, 1, 1))),
     lambda dy: dy.reshape(3, 6, 3, 5, 4, 3).sum(axis=(0, 3, 5)), True),
]


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_repeat_pullback_reads_the_16_bit_cotangent_in_its_kernel(dtype: np.dtype[Any]) -> None:
    """repeat's and tile's 16-bit pullbacks read ``dy``'s bits in the nest kernel (no widening
    pass: no ``half`` widen launch) and sum in float32: within one ulp of the float64 sum
    rounded once (exact on these small cases except where a float32 sum rounds differently),
    NaN and infinities kept; where each ``dx`` element is visited once no conversion launch
    runs at all, nor where it is visited more than once but summed in float32 slabs that the
    kernel rounds (``repeat._half_slabs``: every count that revisits ``dx`` inside the
    partition loop); where a leading count revisits all of ``dx`` (tile's 2, repeat's outer 3
    with summed copies) one rounding launch follows."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    slabbed_seeds = []
    for seed, (rule, reference, accumulates) in enumerate(_REPEATS):
        x = _data((6, 3, 4), dtype, seed)
        y, back = rule(x)
        dy = _special(_data(y.shape, dtype, seed + 20), dtype)
        with count_launches():
            kinds = ("pullback-half", "pullback-half-slabs")
            before = [kernel_launches(op="half", kind="widen"), kernel_launches(op="half"), *(kernel_launches(op="repeat", kind=k) for k in kinds)]
            dx = back(dy)[0]
            slabbed = kernel_launches(op="repeat", kind="pullback-half-slabs") > before[3]
            assert kernel_launches(op="half", kind="widen") == before[0]
            rounding = 1 if accumulates and not slabbed else 0
            assert kernel_launches(op="half") == before[1] + rounding, (seed, kernel_launches(op="half", kind="narrow"))
            assert kernel_launches(op="repeat", kind="pullback-half") + kernel_launches(op="repeat", kind="pullback-half-slabs") >= sum(before[2:]) + 1
            assert not slabbed or accumulates
            if slabbed:
                slabbed_seeds.append(seed)
        assert dx.dtype == dtype and dx.shape == x.shape
        with np.errstate(all="ignore"):
            expected = reference(dy.astype(np.float64))
            nan = np.isnan(expected)
            np.testing.assert_array_equal(np.isnan(dx), nan)
            finite = np.isfinite(expected) & (np.abs(expected) < float(np.finfo(dtype).max) / 2)
            assert _ulps(dx[finite], expected[finite].astype(dtype)).max() <= 1
            infinite = np.isinf(expected)
            np.testing.assert_array_equal(dx[infinite].astype(np.float64), expected[infinite])
            overflow = np.isfinite(expected) & (np.abs(expected) >= float(np.finfo(dtype).max) * 1.01)
            np.testing.assert_array_equal(dx[overflow].astype(np.float64), np.sign(expected[overflow]) * np.inf)
        assert nan.any() and (infinite | overflow).any(), seed
    assert slabbed_seeds == [0, 4, 5]  # W3, (1, 20, 1), (2, 1, 1) by (1, 1, 3); not 3 and 6
    # Where the dy under one partition-loop iteration is too large to widen at once (the
    # kernel's run-time choice), its blocks are widened a chunk at a time: the same sums.
    for shape, inner, outer in (((2, 1000, 8), (2, 1, 3), (1, 1, 1)), ((3, 900, 8), (1, 1, 2), (2, 1, 1))):
        x = _data(shape, dtype, 7)
        y, back = _rrule(sr.repeat, x, inner=Val(inner), outer=Val(outer))
        dy = _data(y.shape, dtype, 8)
        dx = back(dy)[0]
        split = [outer[0], shape[0], inner[0], outer[1], shape[1], inner[1], outer[2], shape[2], inner[2]]
        expected = dy.astype(np.float64).reshape(split).sum(axis=(0, 2, 3, 5, 6, 8))
        assert dx.dtype == dtype and _ulps(dx, expected.astype(dtype)).max() <= 1


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_broadcast_to_pullback_reads_the_16_bit_cotangent_in_its_kernel(dtype: np.dtype[Any]) -> None:
    """broadcast_to's 16-bit pullback (a reduction) reads ``dy``'s bits in its kernel (no
    widening pass over ``dy``; only ``dx``, the size of ``x``, is rounded after): within one
    ulp of the float64 sum rounded once, NaN and infinities kept, for every group pattern."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    cases = [((1, 64, 1, 7), (32, 64, 5, 7)), ((5, 1), (5, 300)), ((1,), (1000,)), ((3, 1, 4), (3, 50, 4)), ((1, 8), (40, 8))]
    for seed, (x_shape, shape) in enumerate(cases):
        x = _data(x_shape, dtype, seed)
        y, back = _rrule(sr.broadcast_to, x, Val(shape))
        dy = _special(_data(shape, dtype, seed + 30), dtype)
        with count_launches():
            before = kernel_launches(op="half", kind="widen"), kernel_launches(op="broadcast", kind="reduce")
            dx = back(dy)[0]
            assert kernel_launches(op="half", kind="widen") == before[0]
            assert kernel_launches(op="broadcast", kind="reduce") > before[1]
        assert dx.dtype == dtype and dx.shape == x_shape
        lead = len(shape) - len(x_shape)
        axes = tuple(a for a in range(len(shape)) if a < lead or x_shape[a - lead] == 1)
        with np.errstate(all="ignore"):
            expected = dy.astype(np.float64).sum(axis=axes).reshape(x_shape)
            np.testing.assert_array_equal(np.isnan(dx), np.isnan(expected))
            finite = np.isfinite(expected) & (np.abs(expected) < float(np.finfo(dtype).max) / 2)
            assert not finite.any() or _ulps(dx[finite], expected[finite].astype(dtype)).max() <= 1
            infinite = np.isinf(expected)
            np.testing.assert_array_equal(dx[infinite].astype(np.float64), expected[infinite])
            # The float32 kernel's horizontal sums start from zero, not from a NaN or an
            # infinity another row left in the accumulator (they did: one NaN row made all NaN).
            (dx32,) = _rrule(sr.broadcast_to, x.astype(np.float32), Val(shape))[1](dy.astype(np.float32))[:1]
            np.testing.assert_array_equal(np.isnan(dx32), np.isnan(expected))


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_sum_and_mean_pullbacks_write_the_16_bit_bits_in_one_pass(dtype: np.dtype[Any]) -> None:
    """sum's 16-bit pullback copies ``dy``'s bits along the summed axes (exact, NaN payloads
    included) and mean's divides each widened element in float32 and rounds it (within one
    ulp of the float64 quotient rounded once), in the expand kernel: no conversion pass."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    for seed, (shape, axes) in enumerate((((6, 7, 5), (1,)), ((6, 7, 5), (0, 2)), ((30, 40), (0,)), ((30, 40), (1,)))):
        x = _data(shape, dtype, seed)
        count = int(np.prod([shape[a] for a in axes]))
        for op in (sr.sum, sr.mean):
            y, back = _rrule(op, x, Val(axes if len(axes) > 1 else axes[0]))
            dy = _special(_data(y.shape, dtype, seed + 60), dtype) if y.size > 20 else _data(y.shape, dtype, seed + 60)
            with count_launches():
                before = kernel_launches(op="half")
                dx = back(dy)[0]
                assert kernel_launches(op="half") == before
            assert dx.dtype == dtype and dx.shape == shape
            spread = np.broadcast_to(np.expand_dims(dy, axes), shape)
            if op is sr.sum:
                np.testing.assert_array_equal(_bits(dx), _bits(np.ascontiguousarray(spread)))
            else:
                with np.errstate(all="ignore"):
                    expected = spread.astype(np.float64) / count
                    np.testing.assert_array_equal(np.isnan(dx), np.isnan(expected))
                    finite = np.isfinite(expected)
                    assert _ulps(dx[finite], expected[finite].astype(dtype)).max() <= 1
                    np.testing.assert_array_equal(dx[~finite & ~np.isnan(expected)].astype(np.float64), expected[~finite & ~np.isnan(expected)])


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_kron_pullback_reads_the_16_bit_cotangent_in_its_kernel(dtype: np.dtype[Any]) -> None:
    """kron's 16-bit pullback reads ``dy``'s bits in the fused kernel (no widening pass over
    ``dy``, the size of ``a`` times ``b``): ``da`` and ``db`` within one ulp of the float64
    sums (of ``dy`` times the other operand) rounded once, NaN kept."""
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    for seed, (a_shape, b_shape) in enumerate((((3, 4), (5, 6)), ((7,), (40,)), ((2, 3, 2), (4, 1, 5)), ((60, 50), (30, 40)))):
        a, b = _data(a_shape, dtype, seed), _data(b_shape, dtype, seed + 1)
        y, back = _rrule(sr.kron, a, b)
        dy = _data(y.shape, dtype, seed + 70)
        dy.reshape(-1)[5] = np.nan
        with count_launches():
            before = kernel_launches(op="half", kind="widen"), kernel_launches(op="kron", kind="pullback-half")
            da, db = back(dy)[:2]
            assert kernel_launches(op="half", kind="widen") == before[0]
            assert kernel_launches(op="kron", kind="pullback-half") > before[1]
        assert da.dtype == db.dtype == dtype and da.shape == a_shape and db.shape == b_shape
        # the float64 reference: dy viewed as (a_0, b_0, a_1, b_1, ...), contracted with b / a
        n = len(a_shape)
        split = [extent for pair in zip(a_shape, b_shape) for extent in pair]
        wide = dy.astype(np.float64).reshape(split)
        a_axes, b_axes = list(range(0, 2 * n, 2)), list(range(1, 2 * n, 2))
        expected_a = np.tensordot(wide, b.astype(np.float64), axes=(b_axes, list(range(n))))
        expected_b = np.tensordot(wide, a.astype(np.float64), axes=(a_axes, list(range(n))))
        for ours, expected in ((da, expected_a), (db, expected_b)):
            nan = np.isnan(expected)
            np.testing.assert_array_equal(np.isnan(ours), nan)
            assert nan.any() and _ulps(ours[~nan], expected[~nan].astype(dtype)).max() <= 1


def test_specs_precompile_and_the_steady_state() -> None:
    """``ArraySpec``s of the 16-bit dtypes plan (``precompile``, ``sr.pullback``): after
    ``precompile`` a call compiles nothing and falls back to nothing."""
    bf16 = np.dtype(ml_dtypes.bfloat16)
    spec = sr.ArraySpec((3, 4), bf16)
    signatures = sr.precompile(sr.repeat, spec, Val(2), axis=Val(0))
    kinds = {(signature.op, signature.kind, signature.dtypes) for signature in signatures}
    assert ("half", "narrow", ("bfloat16",)) in kinds and ("half", "widen", ("bfloat16",)) in kinds
    assert ("repeat", "forward", ("uint16",)) in kinds and ("repeat", "pullback", ("float32",)) in kinds
    back: Callable[[object], tuple[Any, ...]] = sr.pullback(sr.repeat, spec, Val(2), axis=Val(0))
    dy = _data((6, 4), bf16, 1)
    x = _data((3, 4), bf16, 0)
    with sr.no_compile(), sr.no_fallback():
        y, back_again = _rrule(sr.repeat, x, Val(2), axis=Val(0))
        assert y.dtype == bf16
        np.testing.assert_array_equal(_bits(back(dy)[0]), _bits(back_again(dy)[0]))


def test_adding_pullbacks_mostly_round_exactly() -> None:
    """The one-ulp allowance is rare: over many sums, almost every entry is the float64 sum
    rounded once (a float32 accumulation differs only near a halfway point)."""
    for dtype in FORMATS:
        x = _data((64, 256), dtype, 3)
        y, back = _rrule(sr.broadcast_to, x[:, None, :], Val((64, 40, 256)))
        dy = _data(y.shape, dtype, 4)
        (dx, *_) = back(dy)
        reference = dy.astype(np.float64).sum(axis=1, keepdims=True).astype(dtype)
        ulps = _ulps(dx, reference)
        assert ulps.max() <= 1
        assert (ulps == 0).mean() > 0.99
        # take's scatter-add (float32 accumulation, about 300 terms a row) and repeat's sums
        idx = np.random.default_rng(0).integers(0, 64, 20000)
        y, back = _rrule(sr.take, x, idx, axis=Val(0))
        dy = _data(y.shape, dtype, 5)
        expected = np.zeros((64, 256))
        np.add.at(expected, idx, dy.astype(np.float64))
        ulps = _ulps(back(dy)[0], expected.astype(dtype))
        assert ulps.max() <= 1 and (ulps == 0).mean() > 0.99
        y, back = _rrule(sr.repeat, x, Val(300), axis=Val(1))
        dy = _data(y.shape, dtype, 6)
        ulps = _ulps(back(dy)[0], dy.astype(np.float64).reshape(64, 256, 300).sum(2).astype(dtype))
        assert ulps.max() <= 1 and (ulps == 0).mean() > 0.99


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_indexing_pullbacks_take_an_array_spec_for_a_16_bit_x(dtype: np.dtype[Any]) -> None:
    """The indexing pullbacks read only the indices, in 16 bits as in float32: ``sr.pullback``
    with an ``ArraySpec`` for ``x`` gives the same bits as ``rrule``'s pullback (before, the
    16-bit plan did not pass on which inputs its pullback reads: ``TypeError: take pullback:
    it reads the primal values; pass arrays, not ArraySpecs``)."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3).astype(dtype)
    y, back = sr.rrule(sr.take, x, TAKE, axis=Val(0))
    dy = (np.arange(y.size, dtype=np.float32).reshape(y.shape) / 7).astype(dtype)
    (spec_dx, _) = sr.pullback(sr.take, sr.ArraySpec(x.shape, dtype), TAKE, axis=Val(0))(dy)
    (dx, _) = back(dy)
    assert isinstance(spec_dx, np.ndarray) and isinstance(dx, np.ndarray)
    assert spec_dx.dtype == dtype
    assert spec_dx.view(np.uint16).tolist() == dx.view(np.uint16).tolist()


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_mixed_dtypes_follow_numpys_promotion(dtype: np.dtype[Any]) -> None:
    x = _data((3, 4), dtype, 0)
    others: list[Array] = [np.ones((3, 2), np.float32), np.ones((3, 2), np.int8), np.ones((3, 2), np.int16), np.ones((3, 2), np.float64)]
    for other in others:
        got = sr.concatenate((x, other), axis=Val(1))
        want = np.concatenate((x, other), axis=1)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        y, back = _rrule(sr.concatenate, (x, other), axis=Val(1))
        (dx, dother), *_ = back(np.ones(y.shape, y.dtype))
        assert dx.dtype == dtype
        if other.dtype.kind == "f":
            assert dother.dtype == other.dtype
    assert sr.kron(x, np.ones(2, np.int8)).dtype == np.kron(x, np.ones(2, np.int8)).dtype
    assert sr.cat(x[0], 1.5, dims=Val(0)).dtype == np.result_type(x, 1.5) == dtype  # NEP 50: a weak scalar


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_fill_and_zero_cotangents_and_frule(dtype: np.dtype[Any]) -> None:
    x = _data((3, 4), dtype, 0)
    y, back = _rrule(sr.sum, x)
    (dx, *_) = back(Fill(2.0, (), dtype))
    assert isinstance(dx, Fill) and dx.dtype == dtype and dx.value == 2.0 and dx.shape == (3, 4)
    assert isinstance(back(ZeroTangent())[0], ZeroTangent)
    y, back = _rrule(sr.repeat, x, Val(2), axis=Val(1))
    (dx, *_) = back(Fill(1.5, y.shape, dtype))
    np.testing.assert_array_equal(np.asarray(dx, np.float64), np.full((3, 4), 3.0))
    assert np.asarray(dx).dtype == dtype
    t = _data((3, 4), dtype, 5)
    y, dy = _frule(sr.repeat, (t, NoTangent()), x, Val(2))
    assert dy.dtype == dtype
    np.testing.assert_array_equal(_bits(dy), _bits(np.repeat(t, 2)))
    a, b = _data((2, 2), dtype, 1), _data((3,), dtype, 2)
    ta, tb = _data((2, 2), dtype, 3), _data((3,), dtype, 4)
    y, dy = _frule(sr.kron, (ta, tb), a, b)

    def wide(value: Array) -> Array:
        return value.astype(np.float64)

    reference = (np.kron(wide(ta), wide(b)) + np.kron(wide(a), wide(tb))).astype(dtype)
    assert dy.dtype == dtype and _ulps(dy, reference).max() <= 1


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_tangent_algebra_keeps_the_format(dtype: np.dtype[Any]) -> None:
    x = _data((2, 3), dtype, 0)
    fill = Fill(1.5, (2, 3), dtype)
    assert fill.dtype == dtype and fill.value == 1.5
    total = np.asarray(fill + x)
    assert total.dtype == dtype
    np.testing.assert_array_equal(_bits(total), _bits((x.astype(np.float64) + 1.5).astype(dtype)))
    dense = sr.materialize(fill, x)
    assert dense.dtype == dtype and (dense.astype(np.float64) == 1.5).all()
    zeros = sr.materialize(ZeroTangent(), x)
    assert zeros.dtype == dtype and not zeros.astype(np.float64).any()
    assert (fill * 2).dtype == dtype and (fill * 2).value == 3.0


def test_bad_16_bit_relatives_are_still_refused() -> None:
    with pytest.raises(TypeError, match=r"^repeat: argument 'x' has dtype float8_e4m3fn"):
        sr.repeat(np.ones(3, ml_dtypes.float8_e4m3fn), Val(2))


_THREADS_SCRIPT = """
import hashlib, numpy as np, ml_dtypes, stablerules as sr
from stablerules import Val
digest = hashlib.sha256()
for dtype in (np.float16, ml_dtypes.bfloat16):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 64)).astype(dtype)
    idx = rng.integers(0, 50, 4000)
    along = rng.integers(0, 64, (50, 300))
    for op, args, kwargs in [
        (sr.take, (x, idx), dict(axis=Val(0))),
        (sr.take_along_axis, (x, along), dict(axis=Val(1))),
        (sr.repeat, (x, Val(40)), dict(axis=Val(0))),
        (sr.take, (x, (rng.zipf(1.2, 6000) - 1) % 50), dict(axis=Val(0))),
        (sr.repeat, (x,), dict(inner=Val((3, 10)), outer=Val((2, 2)))),
    ]:
        y, back = sr.rrule(op, *args, **kwargs)
        dy = rng.standard_normal(y.shape).astype(dtype)
        digest.update(back(dy)[0].tobytes())
    v = rng.standard_normal((4000, 64)).astype(dtype)
    digest.update(sr.index_add(x, idx, v, axis=Val(0)).tobytes())
print(digest.hexdigest())
"""


def test_scatter_adds_are_bitwise_equal_for_one_and_two_threads(tmp_path: Path) -> None:
    digests = []
    for threads in ("1", "2"):
        environment = dict(os.environ, STABLERULES_NUM_THREADS=threads, STABLERULES_PARALLEL_THRESHOLD="1024")
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
        result = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        digests.append(result.stdout.strip())
    assert len(digests[0]) == 64 and digests[0] == digests[1]


_CUDA_SCRIPT = """
import numpy as np, ml_dtypes, stablerules as sr
from stablerules import Val
from stablerules._arrays import kernel_target
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches
assert kernel_target("cpu") == "cuda"
with count_launches():
  for dtype in (np.float16, ml_dtypes.bfloat16):
      rng = np.random.default_rng(0)
      x = rng.standard_normal((3, 4)).astype(dtype)
      y = sr.repeat(x, Val(2), axis=Val(1))
      assert y.dtype == dtype and (y.view(np.uint16) == np.repeat(x, 2, axis=1).view(np.uint16)).all()
      idx = np.array([2, 0, 2, 1, 2])
      y, back = sr.rrule(sr.take, x, idx, axis=Val(0))
      assert (y.view(np.uint16) == np.take(x, idx, axis=0).view(np.uint16)).all()
      dy = rng.standard_normal(y.shape).astype(dtype)
      dx = back(dy)[0]
      want = np.zeros((3, 4))
      np.add.at(want, idx, dy.astype(np.float64))
      assert dx.dtype == dtype and (dx.view(np.uint16) == want.astype(dtype).view(np.uint16)).all(), (dx, want)
      y, back = sr.rrule(sr.sum, x, Val(0))
      assert (y.view(np.uint16) == np.sum(x, 0).view(np.uint16)).all()
assert kernel_launches(op="take", device="cuda") >= 4 and kernel_launches(op="repeat", device="cuda") >= 2 and kernel_launches(device="cpu") == 0
print("ok")
"""


@pytest.mark.slow
def test_cuda_kernels_take_16_bit_floats_in_the_simulator(tmp_path: Path) -> None:
    assert run_in_cuda_simulator(_CUDA_SCRIPT, tmp_path).strip() == "ok"


def test_import_does_not_import_ml_dtypes() -> None:
    code = "import sys, stablerules as sr, numpy as np; sr.repeat(np.ones(3, np.float16), sr.Val(2)); print('ml_dtypes' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


_ = hashlib  # used in the subprocess scripts' text
