"""The repeat family: ``repeat`` (NumPy's and Julia's forms) and ``tile``.

Forward results are compared with NumPy (for Julia's form, with ``np.repeat`` per axis then
``np.tile``); pullbacks and pushforwards with central finite differences of the forward, or
with the adjoint identity against the NumPy reference, never with the rule's own formula.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules import _parallel
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches
from tests.references import array_rrule as rrule, dense, random_array

# Any keeps NumPy's operator overloads usable in the tests; the library's API has none.
Array = npt.NDArray[Any]
Forward = Callable[[Array], Array]

RNG = np.random.default_rng(1234)

# Rule calls on an op typed only as a callable go through this untyped name, so that mypy does
# not try each of the rules' thousands of overloads on every such call (the result would be
# loose all the same).
_frule: Callable[..., Any] = sr.frule


def static(value: Val[int] | Val[tuple[int, ...]]) -> tuple[int, ...]:
    inner = value.value
    return (inner,) if isinstance(inner, int) else inner


def julia_reference(x: Array, inner: tuple[int, ...], outer: tuple[int, ...]) -> Array:
    """Julia's ``repeat(x; inner, outer)`` built from NumPy: pad trailing axes, ``np.repeat``
    along each axis, then ``np.tile``."""
    n = max(x.ndim, len(inner), len(outer))
    y = np.asarray(x).reshape(x.shape + (1,) * (n - x.ndim))
    for axis, count in enumerate(inner + (1,) * (n - len(inner))):
        y = np.repeat(y, count, axis=axis)
    return np.tile(y, outer + (1,) * (n - len(outer)))


# ------------------------------------------------------------------- finite differences


def fd_pullback(f: Forward, x: Array, dy: Array, step: float = 1e-6) -> Array:
    """``dL/dRe(x) + i dL/dIm(x)`` for ``L(x) = Re(vdot(dy, f(x)))``, central differences in
    float64 / complex128 (the ops are linear, so this is exact up to rounding)."""
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    base: Array = x.astype(wide)
    dy_wide = np.asarray(dy).astype(np.complex128)

    def loss(point: Array) -> float:
        return float(np.real(np.vdot(dy_wide, f(point).astype(np.complex128))))

    gradient: Array = np.zeros(x.shape, dtype=wide)
    directions: list[complex] = [1.0, 1j] if x.dtype.kind == "c" else [1.0]
    for index in np.ndindex(*x.shape):
        for direction in directions:
            plus, minus = base.copy(), base.copy()
            plus[index] += step * direction
            minus[index] -= step * direction
            gradient[index] += direction * (loss(plus) - loss(minus)) / (2 * step)
    return gradient


def fd_pushforward(f: Forward, x: Array, dx: Array, step: float = 1e-6) -> Array:
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    base: Array = x.astype(wide)
    direction: Array = np.asarray(dx).astype(wide)
    return (f(base + step * direction) - f(base - step * direction)) / (2 * step)


def assert_pullback_matches_fd(
    op: Callable[..., Array], x: Array, *args: object, **kwargs: object
) -> None:
    y, back = rrule(op, x, *args, **kwargs)
    dy = random_array(RNG, np.shape(y), np.asarray(y).dtype)
    tangents = back(dy)
    assert len(tangents) == 1 + len(args)
    assert all(isinstance(t, NoTangent) for t in tangents[1:])
    dx = tangents[0]
    assert isinstance(dx, np.ndarray)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    tolerance = 1e-4 if x.dtype in (np.float32, np.complex64) else 1e-7

    def forward(point: Array) -> Array:
        return op(point, *args, **kwargs)

    np.testing.assert_allclose(dx, fd_pullback(forward, x, dy), rtol=tolerance, atol=tolerance)


def assert_pushforward_matches_fd(
    op: Callable[..., Array], x: Array, *args: object, **kwargs: object
) -> None:
    dx = random_array(RNG, x.shape, x.dtype)
    tangents = (dx,) + (NoTangent(),) * len(args)
    y, dy = _frule(op, tangents, x, *args, **kwargs)
    assert isinstance(dy, np.ndarray)
    assert dy.shape == dense(y).shape and dy.dtype == x.dtype
    tolerance = 1e-4 if x.dtype in (np.float32, np.complex64) else 1e-7

    def forward(point: Array) -> Array:
        return op(point, *args, **kwargs)

    np.testing.assert_allclose(dy, fd_pushforward(forward, x, dx), rtol=tolerance, atol=tolerance)


# ------------------------------------------------------------------- forward vs NumPy

NUMPY_CASES = [
    ((), 3, None),
    ((5,), 0, 0),
    ((5,), 1, None),
    ((5,), 3, 0),
    ((5,), 3, -1),
    ((0,), 4, 0),
    ((3, 4), 2, 0),
    ((3, 4), 2, 1),
    ((3, 4), 2, None),
    ((3, 4), 0, 1),
    ((2, 0, 3), 2, 2),
    ((2, 3, 4), 3, 1),
    ((2, 3, 4), 20, 2),
    ((1, 3, 1), 2, 0),
]


@pytest.mark.parametrize(("shape", "count", "axis"), NUMPY_CASES)
def test_numpy_form_forward(shape: tuple[int, ...], count: int, axis: int | None) -> None:
    x = random_array(RNG, shape)
    y = sr.repeat(x, Val(count), axis=None if axis is None else Val(axis))
    expected = np.repeat(x, count, axis=axis)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


JULIA_CASES: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = [
    ((), (), ()),
    ((), (3,), ()),
    ((), (), (2, 3)),
    ((4,), (2,), ()),
    ((4,), (), (3,)),
    ((4,), (2,), (3,)),
    ((4,), (2, 3), (1, 1, 2)),
    ((3, 4), (2, 1), (1, 2)),
    ((3, 4), (1, 3), (2, 1)),
    ((3, 4), (2,), ()),
    ((3, 4), (0, 2), ()),
    ((3, 4), (), (2, 0)),
    ((3, 0), (2, 2), (2, 1)),
    ((2, 3, 4), (2, 1, 3), ()),
    ((2, 3, 4), (1, 1, 1), (1, 1, 1)),
    ((2, 3, 4), (2, 1, 3), (2, 1, 2)),
    ((200, 3, 4), (7, 1, 10), (4, 1, 2)),
]


@pytest.mark.parametrize(("shape", "inner", "outer"), JULIA_CASES)
def test_julia_form_forward(shape: tuple[int, ...], inner: tuple[int, ...], outer: tuple[int, ...]) -> None:
    x = random_array(RNG, shape)
    y = sr.repeat(
        x, inner=Val(inner) if inner else None, outer=Val(outer) if outer else None
    )
    expected = julia_reference(x, inner, outer)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def test_julia_form_int_counts_mean_first_axis() -> None:
    x = random_array(RNG, (3, 4))
    np.testing.assert_array_equal(sr.repeat(x, inner=Val(2), outer=Val(3)), julia_reference(x, (2,), (3,)))


TILE_CASES: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((), (3,)),
    ((), ()),
    ((4,), (3,)),
    ((4,), (2, 3)),
    ((4,), (0,)),
    ((3, 4), (2,)),
    ((3, 4), (2, 1)),
    ((3, 4), (1, 1)),
    ((3, 4), (2, 1, 3)),
    ((2, 3, 4), (2, 2)),
    ((0, 3), (2, 2)),
]


@pytest.mark.parametrize(("shape", "reps"), TILE_CASES)
def test_tile_forward(shape: tuple[int, ...], reps: tuple[int, ...]) -> None:
    x = random_array(RNG, shape)
    y = sr.tile(x, Val(reps))
    expected = np.tile(x, reps)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def test_tile_int_reps() -> None:
    x = random_array(RNG, (3, 4))
    np.testing.assert_array_equal(sr.tile(x, Val(3)), np.tile(x, 3))


COUNTS_CASES: list[tuple[tuple[int, ...], list[int], int | None]] = [
    ((4,), [1, 0, 3, 2], 0),
    ((4,), [2], 0),
    ((4,), [0, 0, 0, 0], 0),
    ((3, 4), [1, 2, 0], 0),
    ((3, 4), [3, 0, 1, 2], 1),
    ((3, 4), [2], 1),
    ((2, 3, 4), [1, 0, 5], 1),
    ((2, 3), [1, 2, 0, 1, 1, 3], None),
    ((2, 3), [2], None),
    ((0, 3), [], 0),
    ((0, 3), [2, 1, 1], 1),
    ((), [3], None),
]


@pytest.mark.parametrize(("shape", "counts", "axis"), COUNTS_CASES)
def test_counts_array_forward(shape: tuple[int, ...], counts: list[int], axis: int | None) -> None:
    x = random_array(RNG, shape)
    counts_array = np.array(counts, dtype=np.int64)
    y = sr.repeat(x, counts_array, axis=None if axis is None else Val(axis))
    expected = np.repeat(x, counts_array, axis=axis)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def test_counts_as_list_and_other_integer_dtypes() -> None:
    x = random_array(RNG, (3, 2))
    expected = np.repeat(x, [2, 0, 1], axis=0)
    np.testing.assert_array_equal(sr.repeat(x, [2, 0, 1], Val(0)), expected)
    np.testing.assert_array_equal(sr.repeat(x, np.array([2, 0, 1], dtype=np.uint8), Val(0)), expected)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.uint8, np.float32, np.complex64, np.complex128])
def test_forward_keeps_dtype(dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, (3, 4), dtype)
    for y, expected in [
        (sr.repeat(x, Val(2), axis=Val(1)), np.repeat(x, 2, axis=1)),
        (sr.repeat(x, inner=Val((2, 1)), outer=Val((1, 2))), julia_reference(x, (2, 1), (1, 2))),
        (sr.tile(x, Val((2, 1))), np.tile(x, (2, 1))),
        (sr.repeat(x, np.array([1, 0, 2]), axis=Val(0)), np.repeat(x, [1, 0, 2], axis=0)),
    ]:
        assert y.dtype == expected.dtype
        np.testing.assert_array_equal(y, expected)


def test_python_scalar_input() -> None:
    np.testing.assert_array_equal(sr.repeat(2.5, Val(3)), np.repeat(2.5, 3))  # type: ignore[call-overload]


def test_non_native_byte_order_gives_numpys_result_dtype() -> None:
    x = random_array(RNG, (3, 4)).astype(">f8")
    y = sr.repeat(x, Val(2), axis=Val(0))
    np.testing.assert_array_equal(y, np.repeat(x, 2, axis=0))
    assert y.dtype == np.dtype(">f8")  # NumPy's (the kernels compute on a native copy)
    _, back = sr.rrule(sr.repeat, x, Val(2), axis=Val(0))
    (dx, _) = back(np.ones((6, 4)))
    assert dx.dtype == np.float64  # tangents are native


# ------------------------------------------------------------------- rules vs finite differences

PULLBACK_CASES: list[tuple[str, tuple[int, ...], tuple[object, ...], dict[str, object]]] = [
    ("repeat", (5,), (Val(3),), {"axis": Val(0)}),
    ("repeat", (3, 4), (Val(2),), {"axis": Val(1)}),
    ("repeat", (3, 4), (Val(2),), {}),
    ("repeat", (), (Val(3),), {}),
    ("repeat", (3, 4), (Val(0),), {"axis": Val(0)}),
    ("repeat", (2, 3), (Val(20),), {"axis": Val(0)}),
    ("repeat", (3, 4), (), {"inner": Val((2, 3))}),
    ("repeat", (3, 4), (), {"outer": Val((2, 3))}),
    ("repeat", (2, 3, 2), (), {"inner": Val((2, 1, 3)), "outer": Val((2, 1, 2))}),
    ("repeat", (3,), (), {"inner": Val((2, 2)), "outer": Val((1, 1, 3))}),
    ("repeat", (), (), {"inner": Val((2,)), "outer": Val((3,))}),
    ("repeat", (3, 4), (), {"inner": Val((2, 0))}),
    ("repeat", (2, 3, 4), (np.array([1, 0, 3]),), {"axis": Val(1)}),
    ("repeat", (3, 4), (np.array([2, 1, 0, 3]),), {"axis": Val(1)}),
    ("repeat", (2, 3), (np.array([2, 0, 1, 1, 3, 1]),), {}),
    ("repeat", (4,), (np.array([3]),), {"axis": Val(0)}),
    ("tile", (3, 4), (Val((2, 1, 3)),), {}),
    ("tile", (3, 4), (Val((2,)),), {}),
    ("tile", (), (Val((2, 3)),), {}),
]


def case_id(case: tuple[str, tuple[int, ...], tuple[object, ...], dict[str, object]]) -> str:
    op, shape, args, kwargs = case
    return f"{op}-{shape}-{args}-{kwargs}"


def op_named(name: str) -> Callable[..., Array]:
    ops: dict[str, Callable[..., Array]] = {"repeat": sr.repeat, "tile": sr.tile}
    return ops[name]


@pytest.mark.parametrize("case", PULLBACK_CASES, ids=case_id)
def test_pullback_matches_finite_differences(
    case: tuple[str, tuple[int, ...], tuple[object, ...], dict[str, object]],
) -> None:
    name, shape, args, kwargs = case
    assert_pullback_matches_fd(op_named(name), random_array(RNG, shape), *args, **kwargs)


@pytest.mark.parametrize("case", PULLBACK_CASES, ids=case_id)
def test_pushforward_matches_finite_differences(
    case: tuple[str, tuple[int, ...], tuple[object, ...], dict[str, object]],
) -> None:
    name, shape, args, kwargs = case
    assert_pushforward_matches_fd(op_named(name), random_array(RNG, shape), *args, **kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.complex128])
@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((Val(3),), {"axis": Val(0)}),
        ((), {"inner": Val((2, 1)), "outer": Val((1, 3))}),
        ((np.array([1, 0, 2]),), {"axis": Val(0)}),
    ],
)
def test_rules_other_dtypes(dtype: npt.DTypeLike, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    x = random_array(RNG, (3, 2), dtype)
    assert_pullback_matches_fd(sr.repeat, x, *args, **kwargs)
    assert_pushforward_matches_fd(sr.repeat, x, *args, **kwargs)


def test_tile_rules_complex() -> None:
    x = random_array(RNG, (2, 3), np.complex128)
    assert_pullback_matches_fd(sr.tile, x, Val((2, 2)))
    assert_pushforward_matches_fd(sr.tile, x, Val((2, 2)))


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((Val(7),), {"axis": Val(0)}),
        ((), {"inner": Val((7, 1, 10))}),
        ((), {"inner": Val((7, 1, 10)), "outer": Val((4, 1, 2))}),
        ((Val(70),), {"axis": Val(2)}),
        ((np.arange(4) % 3,), {"axis": Val(2)}),
    ],
)
def test_pullback_larger_arrays_against_numpy_reduction(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    # Too large for finite differences; the adjoint identity against NumPy's forward instead:
    # vdot(dx, v) == vdot(dy, repeat(v)) for every v.
    x = random_array(RNG, (200, 3, 4))
    y, back = rrule(sr.repeat, x, *args, **kwargs)
    dy = random_array(RNG, y.shape)
    dx = back(dy)[0]
    assert isinstance(dx, np.ndarray)

    def reference(v: Array) -> Array:
        inner, outer, axis = kwargs.get("inner"), kwargs.get("outer"), kwargs.get("axis")
        if isinstance(inner, Val):
            return julia_reference(v, static(inner), static(outer) if isinstance(outer, Val) else ())
        count = args[0]
        assert isinstance(axis, Val) and isinstance(axis.value, int)
        if isinstance(count, Val):
            return np.repeat(v, static(count), axis=axis.value)
        return np.repeat(v, dense(count), axis=axis.value)

    for _ in range(3):
        v = random_array(RNG, x.shape)
        np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, reference(v)), rtol=1e-10)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(
    ("shape", "inner", "outer"),
    [
        ((3, 700), (4, 3), (1, 1)),  # copies summed through the buffer, two chunks of the block
        ((1500,), (3,), (5,)),  # the same with the block on the partitioned loop
        ((50, 20), (4, 2), (1, 2)),  # 8 merged copies, runs of 2
        ((5, 300), (1, 1), (2, 3)),  # copies without runs, added to the outer copies
        ((300, 7), (1, 1), (3, 1)),  # copies without runs, on the partitioned loop
        ((6, 4, 5), (2, 1, 3), (1, 1, 1)),  # 2 copies of runs of 3: summed run by run
    ],
)
def test_pullback_copy_sums_against_numpy_reduction(
    monkeypatch: pytest.MonkeyPatch, threads: int, shape: tuple[int, ...], inner: tuple[int, ...], outer: tuple[int, ...]
) -> None:
    # dy viewed as (outer[0], s[0], inner[0], outer[1], ...) summed over the counts, with
    # infinities and NaNs in place (the pullback's sums must propagate them as NumPy's do).
    if threads > 1:
        monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 1)
        monkeypatch.setenv("STABLERULES_NUM_THREADS", str(threads))
    x = random_array(RNG, shape)
    y, back = rrule(sr.repeat, x, inner=Val(inner), outer=Val(outer))
    dy = random_array(RNG, y.shape)
    flat = dy.reshape(-1)
    flat[:: max(flat.size // 5, 1)] = np.inf
    flat[3] = -np.inf
    flat[flat.size // 2] = np.nan
    split = tuple(n for o, s, i in zip(outer, shape, inner) for n in (o, s, i))
    expected = dy.reshape(split).sum(axis=tuple(k for k in range(len(split)) if k % 3 != 1))
    np.testing.assert_allclose(dense(back(dy)[0]), expected, rtol=1e-12, atol=1e-12)


def test_parallel_partition_matches_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    x = random_array(RNG, (40, 3, 5))
    kwargs: dict[str, object] = {"inner": Val((3, 1, 2)), "outer": Val((2, 1, 2))}
    y, back = rrule(sr.repeat, x, **kwargs)
    dy = random_array(RNG, y.shape)
    serial = dense(back(dy)[0])
    counts = np.array([2, 0, 3])
    yc, backc = rrule(sr.repeat, x, counts, Val(1))
    dyc = random_array(RNG, yc.shape)
    serial_counts = dense(backc(dyc)[0])
    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "3")
    y2, back2 = rrule(sr.repeat, x, **kwargs)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_allclose(dense(back2(dy)[0]), serial, rtol=1e-12)
    y3, back3 = rrule(sr.repeat, x, counts, Val(1))
    np.testing.assert_array_equal(y3, yc)
    np.testing.assert_allclose(dense(back3(dyc)[0]), serial_counts, rtol=1e-12)


# ------------------------------------------------------------------- tangent structure and projection


def test_tangent_arity_follows_positional_arguments() -> None:
    x = random_array(RNG, (3, 4))
    _, back = rrule(sr.repeat, x, Val(2), Val(0))
    assert len(back(np.ones((6, 4)))) == 3
    _, back = rrule(sr.repeat, x, Val(2), axis=Val(0))
    assert len(back(np.ones((6, 4)))) == 2
    _, back = rrule(sr.repeat, x, repeats=Val(2), axis=Val(0))
    assert len(back(np.ones((6, 4)))) == 1
    _, back = rrule(sr.repeat, x, inner=Val((2,)))
    assert len(back(np.ones((6, 4)))) == 1
    _, back = rrule(sr.tile, x, Val((2,)))
    dx, dreps = back(np.ones((3, 8)))
    assert isinstance(dreps, NoTangent)
    np.testing.assert_array_equal(dense(dx), np.full((3, 4), 2.0))


def test_float32_stays_float32_and_cotangents_are_projected() -> None:
    x = random_array(RNG, (4, 3), np.float32)
    y, back = rrule(sr.repeat, x, Val(2), axis=Val(0))
    assert y.dtype == np.float32
    dy = random_array(RNG, y.shape, np.complex128)
    dx = back(dy)[0]
    assert isinstance(dx, np.ndarray) and dx.dtype == np.float32
    np.testing.assert_allclose(dx, dy.real.reshape(4, 2, 3).sum(axis=1), rtol=1e-5)
    dx64 = back(dy.real)[0]
    assert isinstance(dx64, np.ndarray) and dx64.dtype == np.float32
    fill = back(Fill(1.5, y.shape, np.float64))[0]
    assert isinstance(fill, Fill) and fill.dtype == np.float32


def test_integer_and_bool_inputs_get_no_tangent() -> None:
    for dtype in (np.int64, np.bool_):
        x = random_array(RNG, (3, 2), dtype)
        y, back = rrule(sr.repeat, x, Val(2), axis=Val(0))
        np.testing.assert_array_equal(y, np.repeat(x, 2, axis=0))
        assert back(np.ones(y.shape)) == (NoTangent(), NoTangent())
        with pytest.raises(ValueError, match=r"\(6, 2\)"):
            back(np.ones((5, 2)))
        y2, dy = sr.frule(sr.tile, (np.ones(x.shape), NoTangent()), x, Val((2,)))
        np.testing.assert_array_equal(y2, np.tile(x, 2))
        assert dy == NoTangent()


@pytest.mark.parametrize(
    ("name", "args", "kwargs", "scale"),
    [
        ("repeat", (Val(3),), {"axis": Val(1)}, 3),
        ("repeat", (), {"inner": Val((2, 3)), "outer": Val((2, 1, 5))}, 60),
        ("tile", (Val((2, 2)),), {}, 4),
    ],
)
def test_fill_cotangent_gives_scaled_fill(
    name: str, args: tuple[object, ...], kwargs: dict[str, object], scale: int
) -> None:
    x = random_array(RNG, (3, 4))
    y, back = rrule(op_named(name), x, *args, **kwargs)
    dx = back(Fill(0.5, y.shape))[0]
    assert dx == Fill(0.5 * scale, x.shape, np.float64)
    np.testing.assert_allclose(np.asarray(dx), dense(back(np.full(y.shape, 0.5))[0]))


def test_fill_cotangent_with_counts_array_is_dense_and_exact() -> None:
    x = random_array(RNG, (3, 4), np.complex128)
    counts = np.array([1, 0, 3, 2])
    y, back = rrule(sr.repeat, x, counts, Val(1))
    dx = back(Fill(0.5 - 1j, y.shape, np.complex128))[0]
    assert isinstance(dx, np.ndarray) and dx.flags.writeable and dx.dtype == np.complex128
    np.testing.assert_allclose(dx, dense(back(np.full(y.shape, 0.5 - 1j))[0]))
    _, back_flat = rrule(sr.repeat, random_array(RNG, (2, 2)), np.array([1, 2, 0, 4]))
    dx_flat = back_flat(Fill(2.0, (7,)))[0]
    np.testing.assert_array_equal(dense(dx_flat), [[2.0, 4.0], [0.0, 8.0]])


def test_zero_and_thunk_cotangents_and_tangents() -> None:
    x = random_array(RNG, (3, 4))
    y, back = rrule(sr.repeat, x, inner=Val((2, 1)))
    assert back(ZeroTangent()) == (ZeroTangent(),)
    dy = random_array(RNG, y.shape)
    calls = []

    def make() -> Array:
        calls.append(1)
        return dy

    np.testing.assert_array_equal(dense(back(Thunk(make))[0]), dense(back(dy)[0]))
    assert calls == [1]
    _, dy_zero = sr.frule(sr.repeat, (ZeroTangent(),), x, inner=Val((2, 1)))
    assert dy_zero == ZeroTangent()
    _, dy_fill = sr.frule(sr.repeat, (Fill(2.0, x.shape),), x, inner=Val((2, 1)))
    assert dy_fill == Fill(2.0, y.shape, np.float64)
    dx = random_array(RNG, x.shape)
    _, dy_thunk = sr.frule(sr.repeat, (Thunk(lambda: dx),), x, inner=Val((2, 1)))
    np.testing.assert_array_equal(dense(dy_thunk), julia_reference(dx, (2, 1), ()))


def layouts(array: Array) -> list[Array]:
    """The same values as strided, negative-stride, Fortran-order and read-only arrays."""
    strided = np.zeros((array.shape[0] * 2,) + array.shape[1:], dtype=array.dtype)[::2]
    strided[...] = array
    reversed_ = np.ascontiguousarray(array[::-1])[::-1]
    fortran = np.asfortranarray(array)
    readonly = array.copy()
    readonly.setflags(write=False)
    return [strided, reversed_, fortran, readonly]


def test_layouts_of_inputs_and_cotangents() -> None:
    x = random_array(RNG, (4, 3))
    kwargs: dict[str, Val[tuple[int, ...]]] = {"inner": Val((2, 3)), "outer": Val((1, 2))}
    y, back = rrule(sr.repeat, x, **kwargs)
    dy = random_array(RNG, y.shape)
    dx = back(dy)[0]
    for variant in layouts(x):
        y2, back2 = rrule(sr.repeat, variant, **kwargs)
        np.testing.assert_array_equal(y2, y)
        np.testing.assert_array_equal(sr.tile(variant, Val((2, 1))), np.tile(x, (2, 1)))
        np.testing.assert_array_equal(sr.repeat(variant, np.array([1, 2, 0, 1]), Val(0)), np.repeat(x, [1, 2, 0, 1], axis=0))
        _, tangent = sr.frule(sr.repeat, (variant,), x, **kwargs)
        np.testing.assert_array_equal(dense(tangent), y)
    for variant in layouts(dy):
        np.testing.assert_array_equal(dense(back(variant)[0]), dx)


def test_one_axis_cotangents_of_every_layout_dtype_and_shape() -> None:
    # A 1-D output's pullback passes a contiguous dy of its dtype to the kernel as it is:
    # every other layout or dtype must still give the right sums (one copy, or a
    # projection), and every other shape a ValueError naming both shapes, before any kernel.
    x = random_array(RNG, (50,))
    _, back = rrule(sr.repeat, x, Val(3), axis=Val(0))
    dy = random_array(RNG, (150,))
    for variant in [dy, *layouts(dy), dy.astype(">f8"), dy.astype(np.float32)]:
        expected = np.asarray(variant, dtype=np.float64).reshape(50, 3).sum(axis=1)
        dx = back(variant)[0]
        assert isinstance(dx, np.ndarray) and dx.dtype == np.float64 and dx.shape == (50,)
        np.testing.assert_allclose(dx, expected, rtol=1e-12)
    _, back_one = rrule(sr.repeat, random_array(RNG, (1,)), Val(1), axis=Val(0))
    np.testing.assert_array_equal(back_one(np.array([5.0, 7.0])[::2])[0], [5.0])  # one element, stride 16
    with count_launches():
        before = kernel_launches(op="repeat", kind="pullback")
        for wrong in [np.ones(149), np.ones(300)[::2][:149], np.ones((150, 1)), np.ones((1, 150)), np.ones(())]:
            with pytest.raises(ValueError, match=rf"{re.escape(str(wrong.shape))} but the output has shape \(150,\)"):
                back(wrong)
        assert kernel_launches(op="repeat", kind="pullback") == before
    for wrong in [np.ones(149), np.ones((150, 1)), np.ones(())]:  # outside the guards: the fast path's own checks
        with pytest.raises(ValueError, match=rf"{re.escape(str(wrong.shape))} but the output has shape \(150,\)"):
            back(wrong)


def test_returned_tangents_are_fresh_writable_arrays() -> None:
    x = random_array(RNG, (5,))
    _, back = rrule(sr.repeat, x, Val(1), axis=Val(0))
    dy = random_array(RNG, (5,))
    dx = back(dy)[0]
    assert isinstance(dx, np.ndarray) and dx.flags.writeable
    assert not np.shares_memory(dx, dy)


# ------------------------------------------------------------------- errors


def test_invalid_arguments() -> None:
    x = random_array(RNG, (3, 4))
    pair: object = Val((2, 3))
    with pytest.raises(ValueError, match="negative"):
        sr.repeat(x, Val(-1), axis=Val(0))
    with pytest.raises(ValueError, match="negative"):
        sr.repeat(x, inner=Val((2, -1)))
    with pytest.raises(ValueError, match="negative"):
        sr.tile(x, Val((2, -1)))
    with pytest.raises(ValueError, match="negative"):
        sr.repeat(x, np.array([1, -1, 2]), axis=Val(0))
    with pytest.raises(ValueError, match=r"4 counts but x has 3 elements along axis 0 \(shape \(3, 4\)\)"):
        sr.repeat(x, np.array([1, 1, 1, 1]), axis=Val(0))
    with pytest.raises(ValueError, match=r"1-D.*\(2, 2\)"):
        sr.repeat(x, np.ones((2, 2), dtype=int), axis=Val(0))
    with pytest.raises(TypeError, match="integers"):
        sr.repeat(x, np.array([1.0, 2.0, 1.0]), axis=Val(0))
    with pytest.raises(TypeError, match="integers"):
        sr.repeat(x, np.array([True, False, True]), axis=Val(0))
    with pytest.raises(TypeError, match="inner="):
        sr.repeat(x, pair)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="not both"):
        sr.repeat(x, Val(2), inner=Val(2))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="axis"):
        sr.repeat(x, axis=Val(0), inner=Val(2))  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="out of bounds"):
        sr.repeat(x, Val(2), axis=Val(2))
    with pytest.raises(ValueError, match="out of bounds"):
        sr.repeat(np.float64(1.0), Val(2), axis=Val(1))  # type: ignore[call-overload]  # NumPy reads 0-d as 1-d
    with pytest.raises(TypeError, match="dtype"):
        sr.repeat(np.array(["a", "b"]), Val(2))
    with pytest.raises(TypeError, match="Val"):
        sr.repeat(x, Val(2), axis="0")  # type: ignore[call-overload]


def test_huge_counts_are_value_errors_not_crashes() -> None:
    x = np.ones(4)
    with pytest.raises(ValueError, match="too large"):
        sr.repeat(x, Val(2**62))
    with pytest.raises(ValueError, match="too large"):
        sr.repeat(x, Val(2**59), axis=Val(0))  # 2**61 elements of 8 bytes
    with pytest.raises(ValueError, match="too large"):
        sr.repeat(x, inner=Val((2**31, 2**31, 2**31)))
    with pytest.raises(ValueError, match="too large"):
        sr.tile(x, Val((2**40, 2**30)))
    with pytest.raises(ValueError, match="too large"):
        sr.repeat(x, np.array([2**62, 1, 1, 1]), axis=Val(0))
    with pytest.raises(ValueError, match="too large"):
        sr.repeat(x, np.array([2**61, 2**61, 2**61, 2**61], dtype=np.int64), axis=Val(0))
    with pytest.raises(ValueError, match="too large"):
        sr.repeat(x, np.array([2**64 - 1, 1, 1, 1], dtype=np.uint64), axis=Val(0))


def test_wrong_cotangent_and_tangent_shapes() -> None:
    x = random_array(RNG, (3, 4))
    _, back = rrule(sr.repeat, x, Val(2), axis=Val(0))
    with pytest.raises(ValueError, match=r"\(6, 5\).*\(6, 4\)"):
        back(np.ones((6, 5)))
    with pytest.raises(ValueError, match=r"\(6, 5\).*\(6, 4\)"):
        back(Fill(1.0, (6, 5)))
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(3, 4\)"):
        sr.frule(sr.repeat, (np.ones((3, 5)), NoTangent()), x, Val(2), axis=Val(0))
    with pytest.raises(ValueError, match="one entry per positional argument"):
        sr.frule(sr.repeat, (np.ones((3, 4)),), x, Val(2), axis=Val(0))  # type: ignore[arg-type]  # wrong arity, on purpose


# ------------------------------------------------------------------- compile cache, precompile, explain


def test_second_call_compiles_nothing_and_takes_no_fallback() -> None:
    x = random_array(RNG, (6, 5))
    counts = np.array([1, 2, 0, 1, 3, 1])
    # (op, args, kwargs, NumPy's forward for an input v with the same static arguments)
    calls: list[tuple[Callable[..., object], tuple[object, ...], dict[str, object], Forward]] = [
        (sr.repeat, (x, Val(3)), {"axis": Val(1)}, lambda v: np.repeat(v, 3, axis=1)),
        (sr.repeat, (x,), {"inner": Val((2, 1, 2)), "outer": Val((1, 3))}, lambda v: julia_reference(v, (2, 1, 2), (1, 3))),
        (sr.repeat, (x, counts), {"axis": Val(0)}, lambda v: np.repeat(v, 1, axis=0)),  # counts of ones below
        (sr.tile, (x, Val((2, 1, 2))), {}, lambda v: np.tile(v, (2, 1, 2))),
    ]
    for op, args, kwargs, _ in calls:
        y, back = rrule(op, *args, **kwargs)
        back(np.ones(np.shape(y)))
        _frule(op, (x,) + (NoTangent(),) * (len(args) - 1), *args, **kwargs)
    other = random_array(RNG, (9, 2))  # another shape, same signatures
    before = sr.cache_info()
    with sr.no_compile(), sr.no_fallback():
        for op, args, kwargs, reference in calls:
            counts_form = op is sr.repeat  # a bool, so that op keeps its declared type below
            for value in (x, other):
                if counts_form and len(args) == 2 and not isinstance(args[1], Val):
                    call_args: tuple[object, ...] = (value, np.ones(value.shape[0], dtype=int))
                else:
                    call_args = (value, *args[1:])
                y, back = rrule(op, *call_args, **kwargs)
                expected = reference(value)
                np.testing.assert_array_equal(np.asarray(y), expected)
                dy = random_array(RNG, expected.shape)
                v = random_array(RNG, value.shape)
                dx = dense(back(dy)[0])
                np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, reference(v)), rtol=1e-12)
                _, dy_forward = _frule(op, (v,) + (NoTangent(),) * (len(args) - 1), *call_args, **kwargs)
                np.testing.assert_array_equal(dense(dy_forward), reference(v))
        # The guards are on: a signature not seen before is refused inside the block.
        with pytest.raises(sr.RecompileError):
            sr.tile(random_array(RNG, (2, 1, 1, 2), np.int16), Val((1, 7, 1, 1, 3)))  # used nowhere else
    after = sr.cache_info()
    assert (after.compiles, after.disk_hits, after.dynamic_arguments) == (
        before.compiles, before.disk_hits, before.dynamic_arguments
    )


def test_plain_static_arguments_count_as_dynamic() -> None:
    x = random_array(RNG, (3,))
    before = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.repeat(x, 2, axis=0), np.repeat(x, 2, axis=0))
    assert sr.cache_info().dynamic_arguments == before + 2
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError):
        sr.tile(x, (2, 2))


def test_plain_static_arguments_are_counted_on_every_call() -> None:
    # Val calls are served from a prepared signature after the first; a plain int is dynamic
    # and is counted (and refused inside no_fallback) every time, however warm its signature.
    x = random_array(RNG, (3, 2))
    calls: list[Callable[[], object]] = [
        lambda: sr.repeat(x, 2, axis=0),
        lambda: sr.rrule(sr.repeat, x, 2, 0),  # plain ints, on purpose
        lambda: sr.repeat(x, Val(2), axis=0),
        lambda: sr.tile(x, (2, 1)),
        lambda: sr.repeat(x, inner=(2, 1)),
    ]
    for _ in range(3):
        before = sr.cache_info().dynamic_arguments
        for call in calls:
            call()
        assert sr.cache_info().dynamic_arguments == before + 7
    sr.repeat(x, Val(2), axis=Val(0))
    with sr.no_fallback():
        for _ in range(2):
            np.testing.assert_array_equal(sr.repeat(x, Val(2), axis=Val(0)), np.repeat(x, 2, axis=0))
            for call in calls:
                with pytest.raises(sr.DynamicFallbackError):
                    call()


def test_prepared_signatures_are_counted_and_cleared() -> None:
    x = random_array(RNG, (4, 3))
    y, back = rrule(sr.repeat, x, Val(3), axis=Val(1))
    dy = random_array(RNG, y.shape)
    expected = dense(back(dy)[0])
    sr.repeat(x, Val(3), axis=Val(1))  # the forward map's own entry (it builds no pullback)
    hits = sr.cache_info().plan_hits
    with sr.no_compile():
        y2, back2 = rrule(sr.repeat, x, Val(3), axis=Val(1))
        sr.repeat(x, Val(3), axis=Val(1))
    assert sr.cache_info().plan_hits == hits + 2  # one for the rrule, one for the forward map
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(dense(back2(dy)[0]), expected)
    sr.clear_caches()
    # The plans went with the kernels: the same call now needs its kernel again.
    with sr.no_compile(), pytest.raises(sr.RecompileError):
        sr.repeat(x, Val(3), axis=Val(1))
    np.testing.assert_array_equal(dense(back(dy)[0]), expected)  # a pullback keeps its kernel


@pytest.mark.parametrize("make", ["strided", "transposed", "fortran", "swapped", "readonly"])
def test_prepared_signature_serves_every_layout(make: str) -> None:
    base = random_array(RNG, (6, 4))
    layouts = {
        "strided": base[::2],
        "transposed": base.T,
        "fortran": np.asfortranarray(base),
        "swapped": base.astype(">f8"),
        "readonly": base.copy(),
    }
    x = layouts[make]
    x.flags.writeable = make != "readonly"
    contiguous_x = np.ascontiguousarray(x, dtype=np.float64)
    for _ in range(2):  # the second call is served by the prepared signature
        np.testing.assert_array_equal(sr.repeat(x, Val(2), axis=Val(0)), np.repeat(x, 2, axis=0))
        np.testing.assert_array_equal(sr.tile(x, Val((2, 3))), np.tile(x, (2, 3)))
        y, back = rrule(sr.repeat, x, inner=Val((1, 3)), outer=Val((2, 1)))
        np.testing.assert_array_equal(y, julia_reference(contiguous_x, (1, 3), (2, 1)))
        dy = random_array(RNG, y.shape)
        v = random_array(RNG, x.shape)
        dx = dense(back(dy)[0])
        assert dx.shape == x.shape and dx.dtype == np.float64
        np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, julia_reference(v, (1, 3), (2, 1))), rtol=1e-12)
        _, dy_forward = sr.frule(sr.tile, (v, NoTangent()), x, Val((2, 3)))
        np.testing.assert_array_equal(dense(dy_forward), np.tile(v, (2, 3)))


def test_counts_arrays_are_data_not_signature() -> None:
    # Same shapes, dtypes and axis, other counts: each call reads its own counts.
    x = random_array(RNG, (4, 2))
    for counts in ([1, 2, 0, 3], [3, 0, 0, 1], [0, 0, 0, 0], [2, 2, 2, 2]):
        array = np.array(counts)
        for _ in range(2):
            y, back = rrule(sr.repeat, x, array, Val(0))
            np.testing.assert_array_equal(y, np.repeat(x, counts, axis=0))
            np.testing.assert_array_equal(sr.repeat(x, array, axis=Val(0)), y)
            dy = random_array(RNG, y.shape)
            v = random_array(RNG, x.shape)
            dx = dense(back(dy)[0])
            np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, np.repeat(v, counts, axis=0)), rtol=1e-12, atol=1e-12)


def test_precompile_and_explain_with_specs() -> None:
    spec = sr.ArraySpec((17, 3, 4), np.float32)
    signatures = sr.precompile(sr.repeat, spec, inner=Val((5, 1, 3)), outer=Val((2,)))
    assert [signature.kind for signature in signatures] == ["forward", "pullback"]
    x = random_array(RNG, (5, 3, 4), np.float32)
    with sr.no_compile():
        y, back = rrule(sr.repeat, x, inner=Val((5, 1, 3)), outer=Val((2,)))
        back(np.ones(y.shape, np.float32))
    text = sr.explain(sr.tile, sr.ArraySpec((3, 4), np.complex64), Val((2, 1)))
    assert "def kernel(x, y, e0, lo, hi)" in text and "def kernel(dy, dx, e0, lo, hi)" in text
    counts_spec = sr.ArraySpec((4,), np.int64)
    signatures = sr.precompile(sr.repeat, sr.ArraySpec((3, 4), np.float64), counts_spec, Val(1))
    assert [signature.kind for signature in signatures] == ["forward-counts", "pullback-counts"]
    assert len(sr.precompile(sr.repeat, sr.ArraySpec((3, 4), np.int32), Val(2))) == 1


def test_static_forms_share_kernels() -> None:
    # np.repeat along the last axis, Julia's inner on it and nothing else, are one nest.
    x = random_array(RNG, (4, 5))
    sr.repeat(x, Val(6), axis=Val(1))
    with sr.no_compile():
        np.testing.assert_array_equal(sr.repeat(x, inner=Val((1, 6))), np.repeat(x, 6, axis=1))
        np.testing.assert_array_equal(sr.repeat(x.reshape(20), Val(6)), np.repeat(x, 6))


# ------------------------------------------------------------------- hypothesis


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
    inner=st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple),
    outer=st.lists(st.integers(0, 2), min_size=0, max_size=4).map(tuple),
)
def test_julia_form_random(shape: tuple[int, ...], inner: tuple[int, ...], outer: tuple[int, ...]) -> None:
    x = random_array(RNG, shape)
    kwargs = {"inner": Val(inner) if inner else None, "outer": Val(outer) if outer else None}
    y, back = rrule(sr.repeat, x, **kwargs)
    expected = julia_reference(x, inner, outer)
    np.testing.assert_array_equal(y, expected)
    dy = random_array(RNG, y.shape)
    dx = back(dy)[0]
    v = random_array(RNG, shape)
    # The adjoint identity against NumPy's forward: vdot(dx, v) == vdot(dy, repeat(v)).
    np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, julia_reference(v, inner, outer)), rtol=1e-9, atol=1e-12)
    _, tangent = sr.frule(sr.repeat, (v,), x, **kwargs)
    np.testing.assert_array_equal(dense(tangent), julia_reference(v, inner, outer))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple),
    data=st.data(),
)
def test_counts_array_random(shape: tuple[int, ...], data: st.DataObject) -> None:
    axis = data.draw(st.one_of(st.none(), st.integers(0, len(shape) - 1)))
    length = math.prod(shape) if axis is None else shape[axis]
    counts = np.array(data.draw(st.lists(st.integers(0, 3), min_size=length, max_size=length)), dtype=np.int64)
    x = random_array(RNG, shape)
    y, back = rrule(sr.repeat, x, counts, None if axis is None else Val(axis))
    np.testing.assert_array_equal(y, np.repeat(x, counts, axis=axis))
    dy = random_array(RNG, y.shape)
    dx = back(dy)[0]
    v = random_array(RNG, shape)
    np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, np.repeat(v, counts, axis=axis)), rtol=1e-9, atol=1e-12)


# --- the shared rule checker (stablerules.testing), one line per case ---------------------

from stablerules.testing import test_frule as check_frule  # noqa: E402
from stablerules.testing import test_rrule as check_rrule  # noqa: E402


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((random_array(RNG, (5,)), Val(3)), {"axis": Val(0)}),
        ((random_array(RNG, (2, 3)), Val(2)), {"axis": Val(-1)}),
        ((random_array(RNG, (2, 3), np.float32), Val(2)), {"axis": None}),
        ((random_array(RNG, (2, 3), np.complex128), Val(0)), {"axis": Val(0)}),
        ((random_array(RNG, (3, 2)), np.array([1, 0, 2])), {"axis": Val(0)}),
        ((random_array(RNG, (4, 1, 3)),), {"inner": Val((2, 1, 3)), "outer": Val((1, 2, 1))}),
        ((random_array(RNG, ()),), {"inner": Val((2, 3))}),
        ((random_array(RNG, (2,), np.complex64),), {"outer": Val((2, 3))}),
        ((random_array(RNG, (0, 3)),), {"inner": Val((2, 2))}),
    ],
)
def test_repeat_passes_the_shared_checker(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    check_rrule(sr.repeat, *args, fkwargs=kwargs)
    check_frule(sr.repeat, *args, fkwargs=kwargs)


@pytest.mark.parametrize(
    ("shape", "reps"), [((2, 3), (2,)), ((3,), (2, 2)), ((2, 1, 2), (1, 3, 1)), ((), (3,))]
)
def test_tile_passes_the_shared_checker(shape: tuple[int, ...], reps: tuple[int, ...]) -> None:
    x = random_array(RNG, shape)
    check_rrule(sr.tile, x, Val(reps))
    check_frule(sr.tile, x, Val(reps))


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402


def _counts(shape: tuple[int, ...]) -> Array:
    return np.arange(shape[0]) % 3  # 0, 1, 2, 0, ...: zero counts included


ROBUSTNESS = [
    Case(
        "repeat-axis",
        sr.repeat,
        lambda xs: ((xs[0], Val(2)), {"axis": Val(1)}),
        lambda xs: np.repeat(xs[0], 2, axis=1),
        ((3, 4),),
        ((3, 0),),
    ),
    Case(
        "repeat-flat",
        sr.repeat,
        lambda xs: ((xs[0], Val(3)), {}),
        lambda xs: np.repeat(xs[0], 3),
        ((3, 4),),
        ((0, 4),),
        ((),),
    ),
    Case(
        "repeat-counts",
        sr.repeat,
        lambda xs: ((xs[0], _counts(xs[0].shape)), {"axis": Val(0)}),
        lambda xs: np.repeat(xs[0], _counts(xs[0].shape), axis=0),
        ((5, 3),),
        ((0, 3),),
    ),
    Case(
        "repeat-inner-outer",
        sr.repeat,
        lambda xs: ((xs[0],), {"inner": Val((2, 1)), "outer": Val((1, 2, 2))}),
        lambda xs: julia_reference(xs[0], (2, 1), (1, 2, 2)),
        ((3, 4),),
        ((3, 0),),
        ((),),
    ),
    Case(
        "tile",
        sr.tile,
        lambda xs: ((xs[0], Val((2, 1, 2))), {}),
        lambda xs: np.tile(xs[0], (2, 1, 2)),
        ((3, 4),),
        ((0, 4),),
        ((),),
    ),
]

# label | expected exception | message pattern | expression (evaluated in a capped subprocess)
HUGE_CALLS = r"""
repeat 2**62           | ValueError  | ^repeat: repeats=4611686018427387904 for x of shape \(4,\): each element would be copied .* too large to index | sr.repeat(np.ones(4), Val(2**62))
repeat 2**61           | ValueError  | too large to allocate       | sr.repeat(np.ones(4), Val(2**61))
repeat 2**40           | MemoryError | more than this machine      | sr.repeat(np.ones(4), Val(2**40))
repeat 2**40 axis      | MemoryError | more than this machine      | sr.repeat(np.ones((4, 2)), Val(2**40), axis=Val(0))
rrule repeat 2**40     | MemoryError | more than this machine      | sr.rrule(sr.repeat, np.ones(4), Val(2**40))
repeat inner product   | ValueError  | ^repeat: inner=\(2147483648, 2147483648, 4\) for x of shape \(4,\): each element would be copied | sr.repeat(np.ones(4), inner=Val((2**31, 2**31, 4)))
repeat outer huge      | MemoryError | more than this machine      | sr.repeat(np.ones(3), outer=Val((2**20, 2**20)))
repeat counts 2**62    | ValueError  | too large to allocate       | sr.repeat(np.ones(4), np.array([2**62, 1, 1, 1]))
repeat counts sum      | ValueError  | too large to allocate       | sr.repeat(np.ones(4), np.array([2**61] * 4))
repeat counts uint64   | ValueError  | too large to allocate       | sr.repeat(np.ones(4), np.array([2**64 - 1, 1, 1, 1], dtype=np.uint64))
repeat counts memory   | MemoryError | more than this machine      | sr.repeat(np.ones(4), np.array([2**40, 1, 1, 1]))
repeat huge x count 1  | MemoryError | more than this machine      | sr.repeat(huge(2**40), np.array([1]))
repeat huge x count 0  | MemoryError | counts and their offsets    | sr.repeat(huge(2**40), np.array([0]))
repeat huge x Val(0)   | MemoryError | C-ordered copy              | sr.repeat(huge(2**40), Val(0))
repeat huge x Val(2)   | MemoryError | more than this machine      | sr.repeat(huge(2**40), Val(2))
repeat huge x Val big  | ValueError  | too large to allocate       | sr.repeat(huge(2**40), Val(2**30))
tile huge reps         | ValueError  | ^tile: reps=\(2147483648, 2147483648\) for x of shape \(4,\): each element would be copied | sr.tile(np.ones(4), Val((2**31, 2**31)))
tile huge memory       | MemoryError | more than this machine      | sr.tile(np.ones(4), Val((2**20, 2**20)))
tile huge x            | ValueError  | too large to allocate       | sr.tile(huge(2**40), Val((2**22,)))
precompile huge spec   | MemoryError | more than this machine      | sr.precompile(sr.repeat, sr.ArraySpec((2**40,), np.float64), Val(3))
""".strip().splitlines()



def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase("repeat-axis", lambda x: srt.repeat(x, Val(2), axis=Val(1)), lambda x: np.repeat(x, 2, axis=1), ((3, 2),)),
        TorchCase("repeat-flat", lambda x: srt.repeat(x, Val(3)), lambda x: np.repeat(x, 3), ((2, 2),)),
        TorchCase(
            "repeat-inner-outer",
            lambda x: srt.repeat(x, inner=Val((2, 1)), outer=Val((1, 2, 2))),
            lambda x: julia_reference(x, (2, 1), (1, 2, 2)),
            ((2, 3),),
        ),
        # Results of 4096 elements and more whose last axis repeats each element 2-16 times:
        # torch's forward repeats that axis of the input first (one more pass, on the input).
        TorchCase(
            "repeat-inner-outer-rows",
            lambda x: srt.repeat(x, inner=Val((1, 3)), outer=Val((8, 16))),
            lambda x: julia_reference(x, (1, 3), (8, 16)),
            ((4, 4),),
        ),
        TorchCase(
            "repeat-inner-outer-new-axis",
            lambda x: srt.repeat(x, inner=Val((1, 4)), outer=Val((4, 4))),
            lambda x: julia_reference(x, (1, 4), (4, 4)),
            ((64,),),
        ),
        TorchCase("tile", lambda x: srt.tile(x, Val((2, 1, 2))), lambda x: np.tile(x, (2, 1, 2)), ((2, 3),)),
    ]


def jax_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import jax.numpy as jnp

    import stablerules.jax as srj

    def julia(x: Any, inner: tuple[int, ...], outer: tuple[int, ...]) -> Any:
        for axis, count in enumerate(inner):
            x = jnp.repeat(x, count, axis=axis)
        return jnp.tile(x, outer)

    return [
        ("repeat numpy form", lambda x: srj.repeat(x, Val(3), axis=Val(1)), (rand(2, 3),), lambda x: jnp.repeat(x, 3, axis=1)),
        ("repeat axis=None", lambda x: srj.repeat(x, Val(2)), (rand(2, 3),), lambda x: jnp.repeat(x, 2)),
        (
            "repeat inner/outer (W3-like)",
            lambda x: srj.repeat(x, inner=Val((2, 1, 3)), outer=Val((2, 1, 2))),
            (rand(3, 2, 2),),
            lambda x: julia(x, (2, 1, 3), (2, 1, 2)),
        ),
        ("repeat inner adds an axis", lambda x: srj.repeat(x, inner=Val((2, 1, 3))), (rand(3, 2),), None),
        (
            "repeat inner/outer, rows first",
            lambda x: srj.repeat(x, inner=Val((1, 3)), outer=Val((8, 16))),
            (rand(4, 4),),
            lambda x: julia(x, (1, 3), (8, 16)),
        ),
        ("tile", lambda x: srj.tile(x, Val((2, 1, 3))), (rand(3, 2),), lambda x: jnp.tile(x, (2, 1, 3))),
        ("tile 0-d", lambda x: srj.tile(x, Val(3)), (rand(),), lambda x: jnp.tile(x, 3)),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("repeat", lambda x: srj.repeat(x, Val(2), axis=Val(0))),
        ("tile", lambda x: srj.tile(x, Val((1, 2)))),
    ]


def jax_call_errors(rand: Callable[..., Any]) -> list[tuple[Callable[[], Any], type[Exception], str]]:
    import stablerules.jax as srj

    return [
        (
            lambda: srj.repeat({}, Val(2)),  # type: ignore[call-overload]
            TypeError,
            "repeat: argument 'x' must be an array (a jax.Array, or what jnp.asarray reads as one), got dict",
        ),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        ("repeat numpy form", lambda x: sra.repeat(x, Val(3), axis=Val(1)), (rand(2, 3),), lambda x: anp.repeat(x, 3, axis=1)),
        ("repeat axis=None", lambda x: sra.repeat(x, Val(2)), (rand(2, 3),), lambda x: anp.repeat(x, 2)),
        (
            "repeat inner/outer (W3-like)",
            lambda x: sra.repeat(x, inner=Val((2, 1, 3)), outer=Val((2, 1, 2))),
            (rand(3, 2, 2),),
            lambda x: anp.tile(anp.repeat(anp.repeat(x, 2, axis=0), 3, axis=2), (2, 1, 2)),
        ),
        ("tile", lambda x: sra.tile(x, Val((2, 1, 3))), (rand(3, 2),), lambda x: anp.tile(x, (2, 1, 3))),
    ]


@pytest.mark.parametrize("count", [2, 19])  # summed copies / an accumulated count loop
def test_one_count_pullbacks_of_every_axis_and_rank_share_one_kernel(count: int) -> None:
    # A repeat along the last axis (the nest (s, c)) and along any other axis (s, c, s), of
    # rank 1 to 5, has one CPU pullback kernel: once it is built, the others' pullbacks load
    # no kernel and compile none, and each gradient is NumPy's reduction (with an inner
    # extent of 1 at runtime too, and with infinities and NaNs kept in place).
    from stablerules.rules import repeat as repeat_rules

    dtype = np.float32
    cases = [((2, 3, 4, 5), 2), ((2, 3, 4, 5), 3), ((3, 4, 5), 1), ((3, 4, 5, 6, 2), 4), ((7,), 0), ((3, 4, 1), 1), ((4, 1, 3), 0)]
    kernels = []
    for shape, axis in cases:
        plan = sr.repeat.plan(*sr.repeat.bind(np.zeros(shape, dtype), Val(count), axis=Val(axis)))
        assert isinstance(plan, repeat_rules.NestPlan)
        before = sr.cache_info()
        kernels.append(plan._kernel("pullback"))
        after = sr.cache_info()
        if len(kernels) > 1:
            assert (after.compiles, after.disk_hits) == (before.compiles, before.disk_hits)
    assert all(kernel is kernels[0] for kernel in kernels)
    for shape, axis in cases:
        x = random_array(RNG, shape).astype(dtype)
        y, back = rrule(sr.repeat, x, Val(count), axis=Val(axis))
        dy = random_array(RNG, y.shape).astype(dtype)
        flat = dy.reshape(-1)
        flat[:: max(flat.size // 3, 1)] = np.inf
        flat[flat.size // 2] = np.nan
        expected = dy.reshape(shape[:axis] + (shape[axis], count) + shape[axis + 1 :]).sum(axis=axis + 1)
        np.testing.assert_allclose(dense(back(dy)[0]), expected, rtol=1e-5, atol=1e-5)
