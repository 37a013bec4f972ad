"""The flip family: ``flip`` and ``roll``.

Forward results are compared with NumPy (``np.flip``, ``np.roll``: values, shape and dtype);
pullbacks with NumPy's adjoint of the op (the same op undone: ``np.flip`` again, ``np.roll`` by
``-shift``), with the adjoint identity against NumPy's forward, and with central finite
differences through ``stablerules.testing``: never with the rule's own formula.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules import _parallel
from stablerules.testing import test_frule as check_frule
from stablerules.testing import test_rrule as check_rrule
from tests.references import array_rrule as rrule, dense, random_array

Array = npt.NDArray[Any]
Back = Callable[[object], tuple[object, ...]]
Static = Val[int] | Val[tuple[int, ...]]

RNG = np.random.default_rng(2024)
DTYPES = [np.float64, np.float32, np.complex128, np.complex64, np.int64, np.int8, np.uint16, np.bool_]


def static(value: int | tuple[int, ...]) -> Static:
    return Val(value) if isinstance(value, int) else Val(value)


def val(value: int | tuple[int, ...] | None) -> Static | None:
    return None if value is None else static(value)


def negated(shift: int | tuple[int, ...]) -> int | tuple[int, ...]:
    return -shift if isinstance(shift, int) else tuple(-value for value in shift)


# ======================================================================================
# flip
# ======================================================================================

FLIP_CASES: list[tuple[tuple[int, ...], int | tuple[int, ...] | None]] = [
    ((), None),
    ((), ()),
    ((5,), None),
    ((5,), 0),
    ((5,), -1),
    ((0,), 0),
    ((3, 4), None),
    ((3, 4), 1),
    ((3, 4), (0, 1)),
    ((3, 4), (1, 0)),
    ((3, 4), ()),
    ((2, 0, 3), (0, 2)),
    ((2, 3, 4), (-1, 0)),
    ((2, 3, 4, 5), (1, 3)),
]


@pytest.mark.parametrize(("shape", "axis"), FLIP_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int8, np.bool_])
def test_flip_forward_is_numpys(shape: tuple[int, ...], axis: int | tuple[int, ...] | None, dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, shape, dtype)
    y = sr.flip(x, val(axis))
    expected = np.asarray(np.flip(x, axis))
    assert isinstance(y, np.ndarray) and y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
    assert np.shares_memory(y, x) or x.size == 0  # a view, as NumPy's


@pytest.mark.parametrize(("shape", "axis"), FLIP_CASES)
def test_flip_pullback_and_pushforward_are_flips(shape: tuple[int, ...], axis: int | tuple[int, ...] | None) -> None:
    x = random_array(RNG, shape, np.complex128)
    y, back = rrule(sr.flip, x, axis=val(axis))
    dy = random_array(RNG, y.shape, np.complex128)
    (dx,) = back(dy)
    np.testing.assert_array_equal(dense(dx), np.flip(dy, axis))
    v = random_array(RNG, shape, np.complex128)
    # The adjoint identity against NumPy's forward.
    np.testing.assert_allclose(np.vdot(dense(dx), v), np.vdot(dy, np.flip(v, axis)), rtol=1e-12, atol=1e-12)
    _, tangent = sr.frule(sr.flip, (v,), x, axis=val(axis))
    np.testing.assert_array_equal(dense(tangent), np.flip(v, axis))


@pytest.mark.parametrize(
    ("shape", "axis", "dtype"),
    [((5,), 0, np.float64), ((3, 4), None, np.float32), ((2, 3, 4), (0, 2), np.complex128), ((), None, np.float64),
     ((0, 3), 1, np.float64), ((3, 2), -1, np.complex64)],
)
def test_flip_passes_the_shared_checker(shape: tuple[int, ...], axis: int | tuple[int, ...] | None, dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, shape, dtype)
    check_rrule(sr.flip, x, axis=val(axis))
    check_frule(sr.flip, x, axis=val(axis))
    check_rrule(sr.flip, x, val(axis))
    check_frule(sr.flip, x, val(axis))


def test_flip_pullback_is_a_view_of_the_cotangent() -> None:
    x = random_array(RNG, (3, 4))
    _, back = rrule(sr.flip, x, axis=Val(1))
    dy = random_array(RNG, (3, 4))
    dx = dense(back(dy)[0])
    assert np.shares_memory(dx, dy) and dx.flags.writeable
    readonly = dy.copy()
    readonly.flags.writeable = False
    # Tangents are writable (the README's promise; issue 38): a read-only dy costs one copy.
    dx_readonly = dense(back(readonly)[0])
    assert dx_readonly.flags.writeable and not np.shares_memory(dx_readonly, readonly)
    np.testing.assert_array_equal(dx_readonly, dx)
    # Another dtype is projected first: a view of that copy, of x's dtype.
    dx32 = dense(back(dy.astype(np.float32))[0])
    assert dx32.dtype == np.float64 and not np.shares_memory(dx32, dy)
    np.testing.assert_array_equal(dx32, np.flip(dy.astype(np.float32), 1))


def test_flip_tangents_are_projected_and_keep_the_primals_dtype() -> None:
    x = random_array(RNG, (4, 3), np.float32)
    y, back = rrule(sr.flip, x)
    dy = random_array(RNG, y.shape, np.complex128)
    dx = dense(back(dy)[0])
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, np.flip(dy.real), rtol=1e-6)
    fill = back(Fill(2.0 - 1.0j, y.shape, np.complex128))[0]
    assert fill == Fill(2.0, x.shape, np.float32)
    big = random_array(RNG, (3,)).astype(">f8")
    y_big, back_big = rrule(sr.flip, big, Val(0))
    assert y_big.dtype == np.dtype(">f8")  # NumPy's view keeps the byte order
    dx_big = dense(back_big(np.ones(3))[0])
    assert dx_big.dtype == np.float64


def test_flip_lazy_cotangents_and_tangents() -> None:
    x = random_array(RNG, (3, 4), np.complex128)
    y, back = rrule(sr.flip, x, Val((0, 1)))
    assert back(ZeroTangent()) == (ZeroTangent(), NoTangent())
    assert back(Fill(1.5 + 1j, y.shape, np.complex128)) == (Fill(1.5 + 1j, x.shape, np.complex128), NoTangent())
    dy = random_array(RNG, y.shape, np.complex128)
    calls: list[int] = []

    def make() -> Array:
        calls.append(1)
        return dy

    np.testing.assert_array_equal(dense(back(Thunk(make))[0]), np.flip(dy))
    assert calls == [1]
    assert sr.frule(sr.flip, (ZeroTangent(), NoTangent()), x, Val(0))[1] == ZeroTangent()
    assert sr.frule(sr.flip, (Fill(2.0, x.shape, np.complex128),), x)[1] == Fill(2.0, x.shape, np.complex128)
    v = random_array(RNG, x.shape, np.complex128)
    np.testing.assert_array_equal(dense(sr.frule(sr.flip, (Thunk(lambda: v),), x)[1]), np.flip(v))


def test_flip_of_integers_gets_no_tangent_and_checks_the_cotangent() -> None:
    x = random_array(RNG, (3, 2), np.int64)
    y, back = rrule(sr.flip, x, Val(0))
    np.testing.assert_array_equal(y, np.flip(x, 0))
    assert back(np.ones(y.shape)) == (NoTangent(), NoTangent())
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        back(np.ones((2, 3)))
    assert sr.frule(sr.flip, (np.ones(x.shape),), x)[1] == NoTangent()


def test_flip_errors_are_clear_and_come_first() -> None:
    x = random_array(RNG, (3, 4))
    compiles = sr.cache_info().compiles
    with pytest.raises(ValueError, match=r"flip: axis 2 is out of bounds for an array of dimension 2"):
        sr.flip(x, Val(2))
    with pytest.raises(ValueError, match=r"names an axis twice.*\(3, 4\)"):
        sr.flip(x, Val((0, -2)))
    with pytest.raises(TypeError, match="axis"):
        sr.flip(x, "0")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="dtype"):
        sr.flip(np.array(["a", "b"]), Val(0))
    # Array-likes follow NumPy's rule (_arrays.array_like): a list is read as np.asarray reads it,
    # anything else is refused naming the argument.
    np.testing.assert_array_equal(sr.flip([1.0, 2.0], Val(0)), np.flip([1.0, 2.0], 0))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="must be an array"):
        sr.flip({1.0, 2.0}, Val(0))  # type: ignore[call-overload]
    _, back = rrule(sr.flip, x, Val(0))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        back(np.ones((4, 3)))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        back(Fill(1.0, (4, 3)))
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(3, 4\)"):
        sr.frule(sr.flip, (np.ones((3, 5)), NoTangent()), x, Val(0))
    with pytest.raises(ValueError, match="one entry per positional argument"):
        sr.frule(sr.flip, (np.ones((3, 4)),), x, Val(0))  # type: ignore[arg-type]  # wrong arity, on purpose
    assert sr.cache_info().compiles == compiles


def test_flip_plain_axis_counts_as_dynamic() -> None:
    x = random_array(RNG, (3, 4))
    before = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.flip(x, 1), np.flip(x, 1))
    np.testing.assert_array_equal(sr.flip(x, (0, 1)), np.flip(x, (0, 1)))
    assert sr.cache_info().dynamic_arguments == before + 2
    sr.flip(x, Val(1))
    with sr.no_fallback():
        sr.flip(x, Val(1))
        sr.flip(x)
        with pytest.raises(sr.DynamicFallbackError):
            sr.flip(x, 1)


def test_flip_lists_no_kernels() -> None:
    spec = sr.ArraySpec((3, 4), np.float32)
    assert sr.precompile(sr.flip, spec, Val(0)) == ()
    assert sr.explain(sr.flip, spec, axis=None) == ""
    with pytest.raises(ValueError, match="out of bounds"):
        sr.precompile(sr.flip, spec, Val(3))
    with pytest.raises(TypeError, match="ArraySpec only describes"):
        sr.flip(spec, Val(0))  # type: ignore[call-overload]


# ======================================================================================
# roll
# ======================================================================================

ROLL_CASES: list[tuple[tuple[int, ...], int | tuple[int, ...], int | tuple[int, ...] | None]] = [
    ((), 3, None),
    ((7,), 2, None),
    ((7,), -3, 0),
    ((7,), 9, -1),
    ((7,), 0, 0),
    ((7,), 2**70, 0),
    ((0,), 2, 0),
    ((3, 4), 5, None),
    ((3, 4), (1, 2), None),
    ((3, 4), 1, 0),
    ((3, 4), 1, 1),
    ((3, 4), (1, -1), (0, 1)),
    ((3, 4), (1, 1), (1, 1)),
    ((3, 4), 2, (0, 1)),
    ((3, 4), (1, 3), 1),
    ((3, 4), (2,), (0, 1)),
    ((3, 4), 1, ()),
    ((3, 4), 4, 1),
    ((2, 0, 3), 1, (0, 2)),
    ((2, 3, 4), (1, -1), (0, 2)),
    ((2, 3, 4, 5), (3, -5), (2, 3)),
    ((2, 3, 4, 5), (1, 2, 3), (0, 1, 3)),
    ((5, 1, 3), 4, 1),
]


@pytest.mark.parametrize(("shape", "shift", "axis"), ROLL_CASES)
def test_roll_forward_is_numpys(shape: tuple[int, ...], shift: int | tuple[int, ...], axis: int | tuple[int, ...] | None) -> None:
    for dtype in DTYPES + [">f8", "<c16", ">i2"]:
        x = random_array(RNG, shape, dtype)
        y = sr.roll(x, static(shift), axis=val(axis))
        expected = np.roll(x, shift, axis=axis)
        assert y.shape == expected.shape and y.dtype == expected.dtype, (dtype, y.dtype)
        np.testing.assert_array_equal(y, expected)
        assert not np.shares_memory(y, x) or x.size == 0


def test_roll_of_a_0d_array_along_no_axis_is_a_copy() -> None:
    # NumPy 2.4 fails on this call inside np.roll (an empty zip); rolling along no axis is
    # the identity, as for arrays of any other dimension.
    x = np.array(2.5)
    y = sr.roll(x, Val(()), axis=Val(()))
    assert y.shape == () and y.dtype == x.dtype and y == x and not np.shares_memory(x, y)


def test_roll_copies_bits_exactly() -> None:
    bits = np.array([0x7FF8000000000001, 0x7FF0000000000000, 0x8000000000000000, 1], dtype=np.uint64)
    x = bits.view(np.float64)  # a NaN with a payload, inf, -0.0, a subnormal
    y = sr.roll(x, Val(1))
    np.testing.assert_array_equal(y.view(np.uint64), np.roll(bits, 1))


@pytest.mark.parametrize(("shape", "shift", "axis"), ROLL_CASES)
def test_roll_pullback_and_pushforward_are_rolls(
    shape: tuple[int, ...], shift: int | tuple[int, ...], axis: int | tuple[int, ...] | None
) -> None:
    x = random_array(RNG, shape, np.complex128)
    y, back = rrule(sr.roll, x, static(shift), axis=val(axis))
    dy = random_array(RNG, y.shape, np.complex128)
    dx, dshift = back(dy)
    assert dshift == NoTangent()
    np.testing.assert_array_equal(dense(dx), np.roll(dy, negated(shift), axis=axis))
    v = random_array(RNG, shape, np.complex128)
    np.testing.assert_allclose(np.vdot(dense(dx), v), np.vdot(dy, np.roll(v, shift, axis=axis)), rtol=1e-12, atol=1e-12)
    _, tangent = sr.frule(sr.roll, (v, NoTangent()), x, static(shift), axis=val(axis))
    np.testing.assert_array_equal(dense(tangent), np.roll(v, shift, axis=axis))


@pytest.mark.parametrize(
    ("shape", "shift", "axis", "dtype"),
    [
        ((7,), 2, 0, np.float64),
        ((3, 4), (1, -1), (0, 1), np.float32),
        ((2, 3, 4), 5, None, np.complex128),
        ((2, 3, 4), (1, 2), (2, 2), np.complex64),
        ((), 1, None, np.float64),
        ((0, 3), 1, 1, np.float64),
    ],
)
def test_roll_passes_the_shared_checker(
    shape: tuple[int, ...], shift: int | tuple[int, ...], axis: int | tuple[int, ...] | None, dtype: npt.DTypeLike
) -> None:
    x = random_array(RNG, shape, dtype)
    check_rrule(sr.roll, x, static(shift), axis=val(axis))
    check_frule(sr.roll, x, static(shift), axis=val(axis))
    check_rrule(sr.roll, x, static(shift), val(axis))


def test_roll_tangents_are_fresh_projected_and_of_the_primals_dtype() -> None:
    x = random_array(RNG, (4, 3), np.float32)
    y, back = rrule(sr.roll, x, Val(1), axis=Val(0))
    dy = random_array(RNG, y.shape, np.complex128)
    dx = dense(back(dy)[0])
    assert dx.dtype == np.float32 and dx.flags.writeable and not np.shares_memory(dx, dy)
    np.testing.assert_allclose(dx, np.roll(dy.real, -1, axis=0), rtol=1e-6)
    big = random_array(RNG, (5,)).astype(">f8")
    y_big, back_big = rrule(sr.roll, big, Val(2))
    assert y_big.dtype == np.dtype(">f8")
    np.testing.assert_array_equal(y_big, np.roll(big, 2))
    dx_big = dense(back_big(np.arange(5.0))[0])
    assert dx_big.dtype == np.float64
    np.testing.assert_array_equal(dx_big, np.roll(np.arange(5.0), -2))


def test_roll_lazy_cotangents_and_tangents() -> None:
    x = random_array(RNG, (3, 4), np.complex64)
    y, back = rrule(sr.roll, x, Val((1, 2)), Val((0, 1)))
    assert back(ZeroTangent()) == (ZeroTangent(), NoTangent(), NoTangent())
    assert back(Fill(1.5, y.shape, np.float64))[0] == Fill(1.5, x.shape, np.complex64)
    dy = random_array(RNG, y.shape, np.complex64)
    np.testing.assert_array_equal(dense(back(Thunk(lambda: dy))[0]), np.roll(dy, (-1, -2), axis=(0, 1)))
    tangents: tuple[object, object, object] = (Fill(2.0, x.shape, np.complex64), NoTangent(), NoTangent())
    assert sr.frule(sr.roll, tangents, x, Val((1, 2)), Val((0, 1)))[1] == Fill(2.0, x.shape, np.complex64)
    assert sr.frule(sr.roll, (ZeroTangent(), NoTangent()), x, Val(1))[1] == ZeroTangent()


def test_roll_of_integers_gets_no_tangent() -> None:
    x = random_array(RNG, (3, 2), np.int8)
    y, back = rrule(sr.roll, x, Val(1), axis=Val(0))
    np.testing.assert_array_equal(y, np.roll(x, 1, axis=0))
    assert back(np.ones(y.shape)) == (NoTangent(), NoTangent())
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(3, 2\)"):
        back(np.ones((3, 3)))
    assert sr.frule(sr.roll, (np.ones(x.shape), NoTangent()), x, Val(1))[1] == NoTangent()


def layouts(array: Array) -> list[Array]:
    """The same values as strided, negative-stride, Fortran-order, read-only and big-endian arrays."""
    strided = np.zeros((array.shape[0] * 2,) + array.shape[1:], dtype=array.dtype)[::2]
    strided[...] = array
    reversed_ = np.ascontiguousarray(array[::-1])[::-1]
    readonly = array.copy()
    readonly.setflags(write=False)
    return [strided, reversed_, np.asfortranarray(array), readonly, array.astype(array.dtype.newbyteorder(">"))]


def test_roll_layouts_of_inputs_and_cotangents() -> None:
    x = random_array(RNG, (4, 5))
    y, back = rrule(sr.roll, x, Val((1, -2)), axis=Val((0, 1)))
    dy = random_array(RNG, y.shape)
    dx = dense(back(dy)[0])
    for variant in layouts(x):
        np.testing.assert_array_equal(sr.roll(variant, Val((1, -2)), axis=Val((0, 1))), np.roll(x, (1, -2), axis=(0, 1)))
        _, tangent = sr.frule(sr.roll, (variant, NoTangent()), x, Val((1, -2)), axis=Val((0, 1)))
        np.testing.assert_array_equal(dense(tangent), y)
    for variant in layouts(dy):
        np.testing.assert_array_equal(dense(back(variant)[0]), dx)
    x_before = x.copy()
    back(dy)
    np.testing.assert_array_equal(x, x_before)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_roll_thread_split_matches_numpy(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 16)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", str(threads))
    for shape, shift, axis in (((7, 5, 3), (2, -1), (0, 2)), ((41,), 17, 0), ((5, 8), 3, 0), ((6, 4), (2, 1), (1, 1))):
        x = random_array(RNG, shape)
        y, back = rrule(sr.roll, x, static(shift), axis=static(axis))
        np.testing.assert_array_equal(y, np.roll(x, shift, axis=axis))
        dy = random_array(RNG, shape)
        np.testing.assert_array_equal(dense(back(dy)[0]), np.roll(dy, negated(shift), axis=axis))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128])
def test_roll_rows_copied_as_runs_match_numpy(monkeypatch: pytest.MonkeyPatch, threads: int, dtype: type) -> None:
    """The last group's rows copied as flat runs (many rows per run, runs longer than one
    chunk of rows, the wrapped columns fixed on either side of the row), under a plain and a
    rolled parent, the parent split across threads, shifts reduced to 0 at run time."""
    from stablerules.rules import flip as flip_module

    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 16)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", str(threads))
    n = 7
    rows = flip_module._CHUNK_BYTES // np.dtype(dtype).itemsize // n  # rows per chunk, for n-unit rows
    cases: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = [
        ((2, 2 * rows + 5, n), (3, 1), (1, 2)),  # rolled parent, 2 s <= n
        ((2, 2 * rows + 5, n), (-rows, 5), (1, 2)),  # 2 s > n
        ((2, 2 * rows + 5, n), (1, n), (1, 2)),  # the last shift is 0 mod n
        ((2, 2 * rows + 5, n), (0, -1), (1, 2)),  # a plain parent of rolled rows
        ((3 * rows + 2, n), (rows + 1, 2), (0, 1)),  # the parent is the thread-split level
        ((3 * rows + 2, n), (2 * rows, 0), (0, 1)),  # ... with plain rows
        ((3 * rows + 2, n), (0, 3), (0, 1)),  # ... plain, over the thread ranges
        ((4, 3, 5, n), (1, -2, 9), (0, 2, 3)),  # rolled levels above the rows' parent
    ]
    for shape, shift, axis in cases:
        x = random_array(RNG, shape, dtype)
        y, back = rrule(sr.roll, x, Val(shift), axis=Val(axis))
        np.testing.assert_array_equal(y, np.roll(x, shift, axis=axis))
        if np.issubdtype(dtype, np.inexact):
            dy = random_array(RNG, shape, dtype)
            np.testing.assert_array_equal(dense(back(dy)[0]), np.roll(dy, negated(shift), axis=axis))


def test_roll_errors_are_clear_and_come_first() -> None:
    x = random_array(RNG, (3, 4))
    compiles = sr.cache_info().compiles
    with pytest.raises(ValueError, match=r"roll: axis 2 is out of bounds for an array of dimension 2"):
        sr.roll(x, Val(1), axis=Val(2))
    with pytest.raises(ValueError, match=r"shift \(1, 2, 3\) and axis \(0, 1\) must have the same length"):
        sr.roll(x, Val((1, 2, 3)), axis=Val((0, 1)))
    with pytest.raises(TypeError, match="shift is required"):
        sr.roll(x, None)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="axis"):
        sr.roll(x, Val(1), axis="0")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="shift"):
        sr.roll(x, 1.5)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="dtype"):
        sr.roll(np.array([1.0], dtype=np.longdouble), Val(1))  # float16 is supported (SPEC 15)
    with pytest.raises(ValueError, match="out of bounds"):
        sr.roll(np.array(1.0), Val(1), axis=Val(0))
    deep = np.ones((1,) * 40)
    with pytest.raises(ValueError, match="loop nest of 40 levels"):
        sr.roll(deep, Val(1), axis=Val(tuple(range(0, 40, 2))))
    _, back = rrule(sr.roll, x, Val(1))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        back(np.ones((4, 3)))
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(3, 4\)"):
        sr.frule(sr.roll, (np.ones((3, 5)), NoTangent()), x, Val(1))


def test_roll_plain_statics_count_as_dynamic() -> None:
    x = random_array(RNG, (3, 4))
    before = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.roll(x, 1, axis=0), np.roll(x, 1, axis=0))
    np.testing.assert_array_equal(sr.roll(x, (1, 2), axis=(0, 1)), np.roll(x, (1, 2), axis=(0, 1)))
    assert sr.cache_info().dynamic_arguments == before + 4
    sr.roll(x, Val(1), axis=Val(0))
    with sr.no_fallback():
        sr.roll(x, Val(1), axis=Val(0))
        with pytest.raises(sr.DynamicFallbackError):
            sr.roll(x, 1, axis=Val(0))


def test_roll_kernels_are_shared_by_shapes_shifts_and_dtypes_of_one_size() -> None:
    x = random_array(RNG, (6, 5, 4), np.float32)
    y, back = rrule(sr.roll, x, Val(2), axis=Val(1))
    back(random_array(RNG, y.shape, np.float32))
    sr.frule(sr.roll, (x, NoTangent(), NoTangent()), x, Val(2), Val(1))
    with sr.no_compile(), sr.no_fallback():
        # Other shapes, other shifts, another dtype of 4 bytes: the same kernel.
        for shape, shift, dtype in (((2, 9, 3), -4, np.int32), ((1, 1, 1), 7, np.float32), ((3, 2, 8), 1, np.uint32)):
            v = random_array(RNG, shape, dtype)
            np.testing.assert_array_equal(sr.roll(v, static(shift), axis=Val(1)), np.roll(v, shift, axis=1))
        w = random_array(RNG, (4, 3, 2), np.float32)
        y, back = rrule(sr.roll, w, Val(5), axis=Val(1))
        dy = random_array(RNG, y.shape, np.float32)
        np.testing.assert_array_equal(dense(back(dy)[0]), np.roll(dy, -5, axis=1))


def test_roll_forward_and_pullback_are_one_kernel() -> None:
    spec = sr.ArraySpec((64, 64, 56, 56), np.float32)
    signatures = sr.precompile(sr.roll, spec, Val((3, -5)), axis=Val((2, 3)))
    assert len(signatures) == 1 and signatures[0].op == "roll" and signatures[0].dtypes == ("uint32",)
    text = sr.explain(sr.roll, spec, Val((3, -5)), axis=Val((2, 3)))
    assert "def kernel(x, y, e0, e1, e2, s1, s2, lo, hi)" in text
    x = random_array(RNG, (3, 2, 5, 4), np.float32)
    with sr.no_compile():
        y, back = rrule(sr.roll, x, Val((3, -5)), axis=Val((2, 3)))
        np.testing.assert_array_equal(dense(back(y)[0]), x)
    assert sr.precompile(sr.roll, sr.ArraySpec((0, 3), np.float64), Val(1)) == ()


# ======================================================================================
# hypothesis
# ======================================================================================


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple),
    data=st.data(),
)
def test_flip_and_roll_random(shape: tuple[int, ...], data: st.DataObject) -> None:
    ndim = len(shape)
    axes = st.integers(-ndim, ndim - 1) if ndim else st.nothing()
    axis = data.draw(st.one_of(st.none(), st.lists(axes, max_size=3).map(tuple), axes) if ndim else st.none())
    shift = data.draw(st.integers(-9, 9))
    x = random_array(RNG, shape)
    v = random_array(RNG, shape)
    y, back = rrule(sr.roll, x, static(shift), axis=val(axis))
    np.testing.assert_array_equal(y, np.roll(x, shift, axis=axis))
    dy = random_array(RNG, y.shape)
    dx = dense(back(dy)[0])
    np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, np.roll(v, shift, axis=axis)), rtol=1e-9, atol=1e-12)
    flip_axis = axis if not isinstance(axis, tuple) or len(set(a % ndim for a in axis)) == len(axis) else None
    y2, back2 = rrule(sr.flip, x, val(flip_axis))
    np.testing.assert_array_equal(y2, np.flip(x, flip_axis))
    np.testing.assert_allclose(np.vdot(dense(back2(dy)[0]), v), np.vdot(dy, np.flip(v, flip_axis)), rtol=1e-9, atol=1e-12)


# ======================================================================================
# the scaffold: pullbacks without a forward, kernel launches
# ======================================================================================


def test_pullbacks_without_a_forward_take_specs() -> None:
    from stablerules._registry import PULLBACK_BUILDERS

    dy = random_array(RNG, (3, 4))
    build = PULLBACK_BUILDERS.lookup(sr.roll)
    back = build(sr.ArraySpec((3, 4), np.float64), Val((1, 2)), axis=Val((0, 1)))
    dx, dshift = back(dy)
    np.testing.assert_array_equal(dense(dx), np.roll(dy, (-1, -2), axis=(0, 1)))
    assert dshift == NoTangent()
    back_flip = PULLBACK_BUILDERS.lookup(sr.flip)(sr.ArraySpec((3, 4), np.float64), axis=Val(1))
    np.testing.assert_array_equal(dense(back_flip(dy)[0]), np.flip(dy, 1))
    assert back_flip(Fill(2.0, (3, 4))) == (Fill(2.0, (3, 4), np.float64),)


def test_roll_rules_launch_the_kernel_once_each() -> None:
    from stablerules._guards import count_launches
    from stablerules._launch import kernel_launches

    x = random_array(RNG, (5, 6), np.float32)
    (signature,) = sr.precompile(sr.roll, x, Val(2), axis=Val(1))
    with count_launches():  # launches are counted only inside a guard or count_launches()
        before = kernel_launches(signature)
        y, back = rrule(sr.roll, x, Val(2), axis=Val(1))
        back(random_array(RNG, y.shape, np.float32))
        sr.frule(sr.roll, (x, NoTangent()), x, Val(2), axis=Val(1))
        assert kernel_launches(signature) == before + 4  # forward, pullback, frule's forward and pushforward
        back(Fill(1.0, y.shape, np.float32))
        back(ZeroTangent())
        assert kernel_launches(signature) == before + 4  # lazy cotangents launch nothing


def test_a_numpy_pullback_in_place_of_rolls_kernel_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pullback computed by ``np.roll`` (right values, no kernel) fails the shared
    checker's steady-state check: the rule must run its compiled kernel."""
    from stablerules._plan import DensePullback
    from stablerules.rules.flip import RollPlan

    def numpy_pullback(self: RollPlan, saved: object) -> DensePullback:
        def rolled_back(dy: Array) -> tuple[object, ...]:
            return (np.roll(dy, (-1, -2), axis=(0, 1)),)

        return rolled_back

    x = random_array(RNG, (3, 4))
    check_rrule(sr.roll, x, Val((1, 2)), axis=Val((0, 1)))  # the real kernel passes
    sr.clear_caches()
    try:
        monkeypatch.setattr(RollPlan, "pullback", numpy_pullback)
        y, back = rrule(sr.roll, x, Val((1, 2)), axis=Val((0, 1)))
        dy = random_array(RNG, y.shape)
        np.testing.assert_array_equal(dense(back(dy)[0]), np.roll(dy, (-1, -2), axis=(0, 1)))  # the mutant is right
        with pytest.raises(AssertionError, match="roll pullback: no compiled kernel of its signature ran"):
            check_rrule(sr.roll, x, Val((1, 2)), axis=Val((0, 1)))
    finally:
        monkeypatch.undo()
        sr.clear_caches()


def test_flip_runs_its_view_plan_and_no_kernel() -> None:
    from stablerules._launch import kernel_launches

    x = random_array(RNG, (3, 4))
    plan = sr.flip.lookup(*sr.flip.bind(x, Val(1)))
    assert plan.requests() == [] and plan.kernel_entries == frozenset()
    launches = kernel_launches()
    with sr.no_compile(), sr.no_fallback():
        y, back = rrule(sr.flip, x, Val(1))
        back(random_array(RNG, (3, 4)))
        sr.frule(sr.flip, (x, NoTangent()), x, Val(1))
    assert kernel_launches() == launches


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402

ROBUSTNESS = [
    Case("flip", sr.flip, lambda xs: ((xs[0],), {"axis": Val((0, 2))}), lambda xs: np.flip(xs[0], (0, 2)),
         ((3, 4, 2),), ((0, 4, 2),)),
    Case("flip-all", sr.flip, lambda xs: ((xs[0], None), {}), lambda xs: np.flip(xs[0]), ((3, 4),), ((3, 0),), ((),)),
    Case("roll", sr.roll, lambda xs: ((xs[0], Val((1, -2))), {"axis": Val((0, 1))}),
         lambda xs: np.roll(xs[0], (1, -2), axis=(0, 1)), ((3, 4),), ((0, 4),)),
    Case("roll-flat", sr.roll, lambda xs: ((xs[0], Val(5)), {}), lambda xs: np.roll(xs[0], 5), ((3, 4),), ((0, 4),), ((),)),
]

# label | expected exception | message pattern | expression (evaluated in a capped subprocess)
HUGE_CALLS = r"""
roll huge x            | MemoryError | more than this machine      | sr.roll(huge(2**40), Val(1))
rrule roll huge x      | MemoryError | more than this machine      | sr.rrule(sr.roll, huge(2**40), Val(1), axis=Val(0))
roll 2**62 bytes       | ValueError  | too large to allocate       | sr.roll(huge(2**59), Val(1))
""".strip().splitlines()


def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase("flip", lambda x: srt.flip(x, Val((0, 2))), lambda x: np.flip(x, (0, 2)), ((2, 3, 2),)),
        TorchCase("flip-all", lambda x: srt.flip(x), np.flip, ((2, 3),)),
        TorchCase("roll", lambda x: srt.roll(x, Val((1, -2)), axis=Val((0, 1))), lambda x: np.roll(x, (1, -2), (0, 1)), ((3, 4),)),
        TorchCase("roll-flat", lambda x: srt.roll(x, Val(2)), lambda x: np.roll(x, 2), ((2, 3),)),
    ]


def jax_structure(rand: Callable[..., Any]) -> list[ArrayCase]:
    import stablerules.jax as srj

    return [
        ("flip", lambda x: srj.flip(x, Val((0, 2))), (rand(2, 3, 2),), lambda x: np.flip(x, (0, 2))),
        ("flip all", lambda x: srj.flip(x), (rand(2, 3),), np.flip),
        ("roll", lambda x: srj.roll(x, Val((1, -2)), axis=Val((0, 1))), (rand(3, 4),), lambda x: np.roll(x, (1, -2), (0, 1))),
        ("roll flat", lambda x: srj.roll(x, Val(2)), (rand(2, 3),), lambda x: np.roll(x, 2)),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("flip", lambda x: srj.flip(x, Val(0))),
        ("roll", lambda x: srj.roll(x, Val(1), axis=Val(0))),
    ]


def jax_call_errors(rand: Callable[..., Any]) -> list[tuple[Callable[[], Any], type[Exception], str]]:
    import stablerules.jax as srj

    return [
        (
            lambda: srj.flip("x", Val(0)),  # type: ignore[arg-type]
            TypeError,
            "flip: argument 'x' must be an array (a jax.Array, or what jnp.asarray reads as one), got str",
        ),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        ("flip", lambda x: sra.flip(x, Val((0, 2))), (rand(2, 3, 2),), lambda x: x[::-1, :, ::-1]),
        ("flip all", lambda x: sra.flip(x), (rand(2, 3),), lambda x: x[::-1, ::-1]),
        ("roll", lambda x: sra.roll(x, Val((1, -2)), axis=Val((0, 1))), (rand(3, 4),), lambda x: anp.roll(anp.roll(x, 1, 0), -2, 1)),
        ("roll flat", lambda x: sra.roll(x, Val(2)), (rand(2, 3),), lambda x: anp.roll(x, 2)),
    ]
