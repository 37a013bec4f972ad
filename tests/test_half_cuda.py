"""The 16-bit floats in the CUDA kernels (SPEC section 15), under Numba's simulator.

The adding CUDA pullbacks read the 16-bit cotangent's bits and widen and narrow in the kernel
(``_units.cuda_half_helpers``: device functions, the CPU kernels' conversions): checked here

- the conversions of the float32 route (kron's forward, mixed dtypes) run as CUDA kernels
  with the same device functions, the results NumPy's bit for bit;
- the device functions against NumPy's and ml_dtypes' casts: every 16-bit pattern widened
  (NaN payloads included), float32 values around the rounding cases narrowed (halfway points
  both ways, subnormals, overflow, zeros; a NaN narrows to a quiet NaN of its sign);
- take's pullback: equal bit for bit to NumPy's float32 ``np.add.at`` rounded once (it adds in
  the same order), within one ulp of the float64 sum rounded once, NaN and infinities kept,
  the same bits on every run; one kernel reads the bits (no conversion pass); take_along_axis's
  the same way; index_add's forward (the same scatter-add onto ``x``'s widened bits) too;
- repeat's and tile's pullbacks (the nest kernel: one thread per ``dx`` element): the float64
  sum rounded once, bit for bit (sums of a few 16-bit values are exact in float32), NaN and
  infinities kept, the same bits on every run, one kernel;
- broadcast_to's reduction (float64 sum rounded through float32, as the float32 kernel's
  result is) and mean's pullback (float32 quotient rounded once): within one ulp of the
  float64 reference rounded once (double rounding; almost always exact); sum's moves the bits;
- kron's pullback (the block gathers: float64 sums rounded through float32 in the kernel):
  within one ulp of the float64 reference rounded once, NaN and infinities kept, same bits.

The simulator runs each CUDA thread as a Python thread: the shapes are small. Each script
runs in a subprocess (``NUMBA_ENABLE_CUDASIM`` is read when ``numba.cuda`` is imported).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ci import run_in_cuda_simulator


_PRELUDE = """
import numpy as np, ml_dtypes
FORMATS = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]

def bits(array):
    return np.ascontiguousarray(array).view(np.uint16)

def ulps(ours, expected):
    def ordered(array):
        b = bits(array).astype(np.int64)
        return np.where(b & 0x8000, -(b & 0x7FFF), b)
    return np.abs(ordered(ours) - ordered(expected))
"""

_HELPERS_SCRIPT = _PRELUDE + '''
from stablerules._units import cuda_half_helpers
from numba import cuda

DRIVER = """from numba import cuda, types


@cuda.jit
def widen_all(source, out):
    for t in range(cuda.grid(1), source.size, cuda.gridsize(1)):
        out[t] = widen(source[t])


@cuda.jit
def narrow_all(source, out):
    for t in range(cuda.grid(1), source.size, cuda.gridsize(1)):
        out[t] = narrow(source[t])
"""
for dtype in FORMATS:
    namespace = {}
    exec(compile(cuda_half_helpers(DRIVER, dtype.name), "<cuda half helpers>", "exec"), namespace)
    every = np.arange(1 << 16, dtype=np.uint16)
    wide = np.empty(1 << 16, np.float32)
    namespace["widen_all"][4, 64](every, wide)
    expected = every.view(dtype).astype(np.float32)
    nan = np.isnan(expected)
    assert (wide.view(np.uint32)[~nan] == expected.view(np.uint32)[~nan]).all(), dtype
    assert np.isnan(wide[nan]).all() and (np.signbit(wide[nan]) == np.signbit(expected[nan])).all()
    # the rounding cases around a sample of the format's values (every float16 subnormal)
    step = 1 << (13 if dtype == np.float16 else 16)
    finite = expected[~nan].view(np.uint32).astype(np.int64)
    rng = np.random.default_rng(3)
    base = np.concatenate([finite[::97], finite[(np.abs(expected[~nan]) < 2.0 ** -13)][:: (1 if dtype == np.float16 else 40)],
                           np.array([0x7F7F0000, 0x477FE000, 0x477FF000, 0x38800000, 0x33000000, 0, 0x80000000])])
    offsets = np.array([0, 1, step // 2 - 1, step // 2, step // 2 + 1, -1, -(step // 2)])
    candidates = np.concatenate([(base[:, None] + offsets[None, :]).reshape(-1), rng.integers(0, 1 << 32, 3000),
                                 np.array([0x7F800000, 0xFF800000, 0x7FC00001, 0xFF812345, 0x7F800001])])
    values = candidates[(candidates >= 0) & (candidates < (1 << 32))].astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        reference = values.astype(dtype)
    got = np.empty(values.size, np.uint16)
    namespace["narrow_all"][4, 64](values, got)
    keep = ~np.isnan(values)
    assert (got[keep] == bits(reference)[keep]).all(), (dtype, np.flatnonzero(got[keep] != bits(reference)[keep])[:5])
    narrowed = got[~keep].view(dtype).astype(np.float32)
    assert (~keep).sum() >= 3 and np.isnan(narrowed).all()
    assert (np.signbit(narrowed) == np.signbit(values[~keep])).all()
    assert (got[~keep] & (0x0200 if dtype == np.float16 else 0x0040)).all()  # quiet
    assert np.isinf(reference[keep].astype(np.float32)).any() and (np.abs(reference[keep].astype(np.float32)) < 2.0 ** -14).any()
    print(dtype, values.size)
print("ok")
'''

_TAKE_SCRIPT = _PRELUDE + """
import stablerules as sr
from stablerules import Val, NoTangent
from stablerules._arrays import kernel_target
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches

assert kernel_target("cpu") == "cuda"
CASES = [
    ((12, 3), np.array([3, 0, 3, 11, 3, 1, 0, 0, 7] * 3), 0),
    ((2, 9, 2), np.array([8, 0, 0, 5, 5, 5, 2] * 2), 1),
    ((3, 5), np.array([0, 14, 5, 5, 9] * 3), None),
]
for dtype in FORMATS:
    for seed, (shape, idx, axis) in enumerate(CASES):
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        y, back = sr.rrule(sr.take, x, idx, axis=None if axis is None else Val(axis))
        dy = (rng.standard_normal(y.shape) * 3).astype(dtype).reshape(-1)
        big = 40000.0 if dtype == np.float16 else 3e38
        dy[1], dy[dy.size // 2], dy[-1], dy[4] = np.nan, np.inf, -np.inf, -0.0
        dy[5:7] = np.asarray(big, dtype)  # two adjacent: their sum may overflow the format
        dy = dy.reshape(y.shape)
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="take", kind="accumulate-half", device="cuda")
            dx, tangent = back(dy)
            assert kernel_launches(op="half") == before[0], "a conversion pass ran"
            assert kernel_launches(op="take", kind="accumulate-half", device="cuda") == before[1] + 1
            assert kernel_launches(device="cpu") == 0
        again = back(dy)[0]
        assert (bits(again) == bits(dx)).all(), "not the same bits on a second run"
        assert isinstance(tangent, NoTangent) and dx.dtype == dtype and dx.shape == x.shape
        expected = np.zeros(shape, np.float32)
        wide = np.zeros(shape)
        for target, source in ((expected, dy.astype(np.float32)), (wide, dy.astype(np.float64))):
            if axis is None:
                np.add.at(target.reshape(-1), idx, source.reshape(-1))
            else:
                np.add.at(np.moveaxis(target, axis, 0), idx, np.moveaxis(source, axis, 0))
        with np.errstate(all="ignore"):
            rounded = expected.astype(dtype)
            rounded64 = wide.astype(dtype)
        nan = np.isnan(expected)
        assert nan.any() and np.isnan(dx[nan].astype(np.float32)).all()
        assert (bits(dx)[~nan] == bits(rounded)[~nan]).all(), (dtype, seed, dx, rounded)
        assert np.isinf(dx.astype(np.float32)).any()
        finite = np.isfinite(wide) & (np.abs(wide) < float(np.finfo(dtype).max))
        assert ulps(dx[finite], rounded64[finite]).max() <= 1
ALONG = [  # x's shape, the indices, the axis
    ((4, 5), np.array([[0, 4, 4], [1, 1, 2], [4, 0, 4], [3, 3, 3]]), 1),
    ((3, 4), np.array([[2, 0, 2, 1], [2, 2, 2, 0], [1, 0, 2, 2], [0, 0, 1, 2], [2, 1, 0, 2]]), 0),
    ((6,), np.array([5, 0, 5, 5, 2, 2, 1, 5]), None),
]
for dtype in FORMATS:
    for seed, (shape, idx, axis) in enumerate(ALONG):
        rng = np.random.default_rng(seed + 5)
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        y, back = sr.rrule(sr.take_along_axis, x, idx, axis=None if axis is None else Val(axis))
        dy = (rng.standard_normal(y.shape) * 3).astype(dtype).reshape(-1)
        dy[1], dy[-1], dy[2] = np.nan, np.inf, -0.0
        dy = dy.reshape(y.shape)
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="take_along_axis", kind="scatter-along-half", device="cuda")
            dx, tangent = back(dy)
            assert kernel_launches(op="half") == before[0], "a conversion pass ran"
            assert kernel_launches(op="take_along_axis", kind="scatter-along-half", device="cuda") == before[1] + 1
            assert kernel_launches(device="cpu") == 0
        assert (bits(back(dy)[0]) == bits(dx)).all(), "not the same bits on a second run"
        assert isinstance(tangent, NoTangent) and dx.dtype == dtype and dx.shape == x.shape
        at = tuple(np.indices(idx.shape))
        at = (idx,) if axis is None else at[:axis] + (idx,) + at[axis + 1:]
        expected, wide = np.zeros(shape, np.float32), np.zeros(shape)
        np.add.at(expected, at, dy.astype(np.float32))  # C order: each dx entry's terms by increasing k
        np.add.at(wide, at, dy.astype(np.float64))
        with np.errstate(all="ignore"):
            rounded, rounded64 = expected.astype(dtype), wide.astype(dtype)
        nan = np.isnan(expected)
        assert nan.any() and np.isnan(dx[nan].astype(np.float32)).all() and not np.isnan(dx[~nan].astype(np.float32)).any()
        assert (bits(dx)[~nan] == bits(rounded)[~nan]).all(), (dtype, seed, dx, rounded)
        finite = np.isfinite(wide)
        assert np.isinf(dx.astype(np.float32)).any() and ulps(dx[finite], rounded64[finite]).max() <= 1
# index_add's forward (x plus values scatter-added): the bits read and written in one kernel
for dtype in FORMATS:
    rng = np.random.default_rng(70)
    for seed, (shape, axis, values_shape) in enumerate((((6, 3), 0, (9, 3)), ((2, 5, 2), 1, (2, 9, 2)), ((6, 3), 0, (1, 3)))):
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        x.reshape(-1)[1], x.reshape(-1)[-1] = np.nan, -np.inf
        idx = rng.integers(0, shape[axis], 9)
        values = (rng.standard_normal(values_shape) * 3).astype(dtype)
        values.reshape(-1)[0] = np.inf
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="index_add", kind="accumulate-half", device="cuda")
            y = sr.index_add(x, idx, values, axis=Val(axis))
            assert kernel_launches(op="half") == before[0], "a conversion pass ran"
            assert kernel_launches(op="index_add", kind="accumulate-half", device="cuda") == before[1] + 1
            assert kernel_launches(device="cpu") == 0
        assert y.dtype == dtype and y.shape == x.shape
        assert (bits(sr.index_add(x, idx, values, axis=Val(axis))) == bits(y)).all(), "not the same bits twice"
        expected = x.astype(np.float32)
        target = shape[:axis] + (9,) + shape[axis + 1:]
        np.add.at(np.moveaxis(expected, axis, 0), idx, np.moveaxis(np.broadcast_to(values.astype(np.float32), target), axis, 0))
        with np.errstate(all="ignore"):
            rounded = expected.astype(dtype)
        nan = np.isnan(expected)
        assert nan.any() and np.isnan(y[nan].astype(np.float32)).all()
        assert (bits(y)[~nan] == bits(rounded)[~nan]).all(), (dtype, seed, y, rounded)
        assert np.isinf(y.astype(np.float32)).any()
print("ok")
"""

_REPEAT_SCRIPT = _PRELUDE + """
import stablerules as sr
from stablerules import Val
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches

REPEATS = [  # the op on x (3, 2, 4) and the float64 reference of its pullback
    (lambda x: sr.rrule(sr.repeat, x, Val(3), axis=Val(1)), lambda dy: dy.reshape(3, 2, 3, 4).sum(axis=2)),
    (lambda x: sr.rrule(sr.tile, x, Val((2, 1, 3))), lambda dy: dy.reshape(2, 3, 2, 3, 4).sum(axis=(0, 3))),
    (lambda x: sr.rrule(sr.repeat, x, inner=Val((2, 1, 1)), outer=Val((1, 1, 3))),
     lambda dy: dy.reshape(3, 2, 2, 3, 4).sum(axis=(1, 3))),
    (lambda x: sr.rrule(sr.repeat, x, Val(1), axis=Val(0)), lambda dy: dy),
]
for dtype in FORMATS:
    for seed, (rule, reference) in enumerate(REPEATS):
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal((3, 2, 4)) * 3).astype(dtype)
        y, back = rule(x)
        dy = (rng.standard_normal(y.shape) * 3).astype(dtype).reshape(-1)
        big = 40000.0 if dtype == np.float16 else 3e38
        dy[1], dy[dy.size // 2], dy[-1], dy[4] = np.nan, np.inf, -np.inf, -0.0
        dy[5:7] = np.asarray(big, dtype)
        dy = dy.reshape(y.shape)
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="repeat", kind="pullback-half", device="cuda")
            dx = back(dy)[0]
            assert kernel_launches(op="half") == before[0], "a conversion pass ran"
            assert kernel_launches(op="repeat", kind="pullback-half", device="cuda") == before[1] + 1
            assert kernel_launches(device="cpu") == 0
        assert (bits(back(dy)[0]) == bits(dx)).all(), "not the same bits on a second run"
        assert dx.dtype == dtype and dx.shape == x.shape
        with np.errstate(all="ignore"):
            expected = reference(dy.astype(np.float64))
            rounded = expected.astype(dtype)
        nan = np.isnan(expected)
        assert nan.any() and (np.isnan(dx.astype(np.float32)) == nan).all()
        # the sums of a few 16-bit values are exact in float32: one rounding, the float64 one's
        assert (bits(dx)[~nan] == bits(rounded)[~nan]).all(), (dtype, seed, dx, rounded)
        assert np.isinf(dx.astype(np.float32)).any()
print("ok")
"""

_REDUCE_SCRIPT = _PRELUDE + """
import stablerules as sr
from stablerules import Val
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches

exact = total = 0
for dtype in FORMATS:
    big = 40000.0 if dtype == np.float16 else 3e38
    for seed in range(3):
        rng = np.random.default_rng(seed + 30)
        # broadcast_to: dx sums dy over the broadcast axes (float64, rounded through float32)
        x = (rng.standard_normal((3, 1, 4)) * 3).astype(dtype)
        y, back = sr.rrule(sr.broadcast_to, x, Val((2, 3, 5, 4)))
        dy = (rng.standard_normal(y.shape) * 3).astype(dtype)
        dy[0, 0, 0, 0], dy[1, 1, 2, 1], dy[0, 2, :2, 2] = np.nan, np.inf, big
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="broadcast", kind="reduce", device="cuda")
            dx = back(dy)[0]
            assert kernel_launches(op="half") == before[0], "a conversion pass ran"
            assert kernel_launches(op="broadcast", kind="reduce", device="cuda") == before[1] + 1
            assert kernel_launches(device="cpu") == 0
        assert (bits(back(dy)[0]) == bits(dx)).all() and dx.dtype == dtype and dx.shape == x.shape
        with np.errstate(all="ignore"):
            expected = dy.astype(np.float64).sum(axis=(0, 2), keepdims=True)[0]
            rounded = expected.astype(dtype)
        nan = np.isnan(expected)
        assert nan.any() and (np.isnan(dx.astype(np.float32)) == nan).all()
        assert np.isinf(dx.astype(np.float32)).any()
        finite = np.isfinite(expected) & (np.abs(expected) < float(np.finfo(dtype).max))
        assert ulps(dx[finite], rounded[finite]).max() <= 1
        exact += int((bits(dx)[finite] == bits(rounded)[finite]).sum()); total += int(finite.sum())
        # sum's pullback moves dy's bits; mean's divides in float32 and rounds once
        x = (rng.standard_normal((3, 4, 5)) * 3).astype(dtype)
        for op in (sr.sum, sr.mean):
            y, back = sr.rrule(op, x, Val(1))
            dy = (rng.standard_normal(y.shape) * 3).astype(dtype)
            dy[0, 0], dy[1, 1], dy[2, 2] = np.nan, -np.inf, -0.0
            with count_launches():
                before = kernel_launches(op="half"), kernel_launches(op="broadcast", kind="expand", device="cuda")
                dx = back(dy)[0]
                assert kernel_launches(op="half") == before[0], "a conversion pass ran"
                assert kernel_launches(op="broadcast", kind="expand", device="cuda") == before[1] + 1
            assert dx.dtype == dtype and dx.shape == x.shape
            with np.errstate(all="ignore"):
                expected = np.broadcast_to((dy.astype(np.float64) / (4 if op is sr.mean else 1))[:, None, :], x.shape)
                rounded = expected.astype(dtype)
            nan = np.isnan(expected)
            assert nan.any() and (np.isnan(dx.astype(np.float32)) == nan).all()
            if op is sr.sum:
                assert (bits(dx) == bits(np.broadcast_to(dy[:, None, :], x.shape))).all()
            else:
                assert ulps(dx[~nan], rounded[~nan]).max() <= 1 and np.isinf(dx.astype(np.float32)).any()
                exact += int((bits(dx)[~nan] == bits(rounded)[~nan]).sum()); total += int((~nan).sum())
assert exact >= 0.97 * total, (exact, total)
print("ok")
"""

_KRON_SCRIPT = _PRELUDE + """
import stablerules as sr
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches

for dtype in FORMATS:
    big = 40000.0 if dtype == np.float16 else 3e38
    for seed, (a_shape, b_shape) in enumerate((((2, 3), (3, 2)), ((5,), (7,)))):
        rng = np.random.default_rng(seed + 50)
        a, b = ((rng.standard_normal(shape) * 3).astype(dtype) for shape in (a_shape, b_shape))
        y, back = sr.rrule(sr.kron, a, b)
        dy = (rng.standard_normal(y.shape) * 3).astype(dtype).reshape(-1)
        dy[4], dy[-1] = np.nan, np.inf
        dy = dy.reshape(y.shape)
        with count_launches():
            before = kernel_launches(op="half"), kernel_launches(op="kron", kind="pullback-half", device="cuda")
            da, db = back(dy)[:2]
            assert kernel_launches(op="half") == before[0], "a conversion pass ran"
            assert kernel_launches(op="kron", kind="pullback-half", device="cuda") == before[1] + 1
            assert kernel_launches(device="cpu") == 0
        again = back(dy)[:2]
        assert (bits(again[0]) == bits(da)).all() and (bits(again[1]) == bits(db)).all(), "not the same bits twice"
        assert da.dtype == db.dtype == dtype and da.shape == a_shape and db.shape == b_shape
        n = len(a_shape)
        split = [extent for pair in zip(a_shape, b_shape) for extent in pair]
        wide = dy.astype(np.float64).reshape(split)
        a_axes, b_axes = list(range(0, 2 * n, 2)), list(range(1, 2 * n, 2))
        with np.errstate(all="ignore"):
            expected_a = np.tensordot(wide, b.astype(np.float64), axes=(b_axes, list(range(n))))
            expected_b = np.tensordot(wide, a.astype(np.float64), axes=(a_axes, list(range(n))))
        for ours, expected in ((da, expected_a), (db, expected_b)):
            nan = np.isnan(expected)
            assert nan.any() and (np.isnan(ours.astype(np.float32)) == nan).all()
            infinite = np.isinf(expected)
            assert infinite.any() and (ours[infinite].astype(np.float64) == expected[infinite]).all()
            finite = np.isfinite(expected)
            assert ulps(ours[finite], expected[finite].astype(dtype)).max() <= 1
print("ok")
"""

_CONVERT_SCRIPT = _PRELUDE + """
import stablerules as sr
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches

for dtype in FORMATS:
    rng = np.random.default_rng(60)
    a, b = (rng.standard_normal(shape).astype(dtype) for shape in ((2, 3), (3, 2)))
    a.reshape(-1)[1], b.reshape(-1)[2] = np.nan, np.inf
    with count_launches():
        before = [kernel_launches(op="half", kind=kind, device="cuda") for kind in ("widen", "narrow")]
        y = sr.kron(a, b)  # the float32 route: both operands widened, the product narrowed, on the device
        after = [kernel_launches(op="half", kind=kind, device="cuda") for kind in ("widen", "narrow")]
        assert after[0] == before[0] + 2 and after[1] == before[1] + 1, (before, after)
        assert kernel_launches(device="cpu") == 0
    with np.errstate(all="ignore"):
        expected = np.kron(a, b)
    nan = np.isnan(expected.astype(np.float32))
    assert y.dtype == dtype and nan.any() and (np.isnan(y.astype(np.float32)) == nan).all()
    assert (bits(y)[~nan] == bits(expected)[~nan]).all()
    # mixed dtypes (float32 route): int8 joins the format, the result rounded on the device
    ints = np.array([[1, -2], [3, 4]], np.int8)
    with count_launches():
        before = kernel_launches(op="half", kind="narrow", device="cuda")
        joined = sr.concatenate((a[:, :2], ints))
        assert kernel_launches(op="half", kind="narrow", device="cuda") == before + 1
    assert joined.dtype == np.result_type(a, ints)
    assert (bits(joined) == bits(np.concatenate((a[:, :2], ints)))).all()
print("ok")
"""


def _run(script: str, tmp_path: Path) -> None:
    run_in_cuda_simulator(script, tmp_path)


@pytest.mark.slow
def test_cuda_device_conversions_are_numpys_casts_bit_for_bit(tmp_path: Path) -> None:
    _run(_HELPERS_SCRIPT, tmp_path)


@pytest.mark.slow
def test_cuda_scatter_adds_of_take_take_along_axis_and_index_add_sum_the_16_bit_bits_in_float32(tmp_path: Path) -> None:
    _run(_TAKE_SCRIPT, tmp_path)


@pytest.mark.slow
def test_cuda_repeat_and_tile_pullbacks_sum_the_16_bit_bits_in_float32_in_one_kernel(tmp_path: Path) -> None:
    _run(_REPEAT_SCRIPT, tmp_path)


@pytest.mark.slow
def test_cuda_broadcast_to_sum_and_mean_pullbacks_read_the_16_bit_bits(tmp_path: Path) -> None:
    _run(_REDUCE_SCRIPT, tmp_path)


@pytest.mark.slow
def test_cuda_kron_pullback_reads_the_16_bit_bits(tmp_path: Path) -> None:
    _run(_KRON_SCRIPT, tmp_path)


@pytest.mark.slow
def test_cuda_float32_route_converts_in_cuda_kernels(tmp_path: Path) -> None:
    _run(_CONVERT_SCRIPT, tmp_path)
