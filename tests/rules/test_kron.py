"""kron: forward against ``np.kron``, rules against central finite differences of ``np.kron``.

``kron`` is bilinear, so a central difference ``(f(x + h v) - f(x - h v)) / 2h`` equals the
directional derivative up to rounding only: the checks below can be tight. The adjoint
identity checked is SPEC section 4's: ``Re(vdot(dx, v)) == Re(vdot(dy, J v))``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
import stablerules._parallel as parallel
from stablerules.testing import _central_jvp
from tests.references import random_array

A_SHAPES = [(), (3,), (2, 3), (3, 1), (1, 3), (2, 3, 2)]
B_SHAPES = [(), (2,), (2, 2), (1, 3), (3, 1), (2, 2, 3)]
SHAPE_PAIRS = list(itertools.product(A_SHAPES, B_SHAPES))
DTYPE_PAIRS = [
    (np.float64, np.float64),
    (np.complex128, np.complex128),
    (np.float64, np.complex128),
    (np.complex128, np.float64),
]

Array = npt.NDArray[Any]
Pullback = Callable[[object], tuple[Any, Any]]


def _rrule(a: Array, b: Array) -> tuple[Array, Pullback]:
    """``sr.rrule(sr.kron, a, b)`` with the primal checked to be an array."""
    y, back = sr.rrule(sr.kron, a, b)
    assert isinstance(y, np.ndarray)
    typed: Pullback = back
    return y, typed


def _frule(tangents: tuple[object, object], a: Array, b: Array) -> tuple[Array, Any]:
    y, dy = sr.frule(sr.kron, tangents, a, b)
    assert isinstance(y, np.ndarray)
    return y, dy


def _inner(x: object, v: Array) -> float:
    """``Re(vdot(x, v))``: the real inner product the complex convention is stated in."""
    return float(np.vdot(np.asarray(x), v).real)


def _jvp_fd(a: Array, b: Array, va: Array | None, vb: Array | None, step: float = 1e-3) -> Array:
    """``J (va, vb)`` of ``np.kron`` at ``(a, b)`` by central differences (``None``: that
    operand does not move)."""
    return _central_jvp(np.kron, (a, b), (va, vb), h=step)


def _check_rrule(a: Array, b: Array, rng: np.random.Generator, rtol: float = 1e-9) -> None:
    y, back = _rrule(a, b)
    expected = np.kron(a, b)
    assert y.shape == np.shape(expected) and y.dtype == expected.dtype
    _assert_same_product(y, expected, a, b)
    dy = random_array(rng, y.shape, y.dtype)
    da, db = back(dy)
    assert isinstance(da, np.ndarray) and da.shape == a.shape and da.dtype == a.dtype
    assert isinstance(db, np.ndarray) and db.shape == b.shape and db.dtype == b.dtype
    for _ in range(2):
        va, vb = random_array(rng, a.shape, a.dtype), random_array(rng, b.shape, b.dtype)
        jva = _jvp_fd(a, b, va, None)
        jvb = _jvp_fd(a, b, None, vb)
        scale = 1 + np.abs(dy).sum() * (1 + np.abs(jva).max(initial=0) + np.abs(jvb).max(initial=0))
        assert abs(_inner(da, va) - _inner(dy, jva)) <= rtol * scale
        assert abs(_inner(db, vb) - _inner(dy, jvb)) <= rtol * scale


def _check_frule(a: Array, b: Array, rng: np.random.Generator, rtol: float = 1e-9) -> None:
    va, vb = random_array(rng, a.shape, a.dtype), random_array(rng, b.shape, b.dtype)
    y, dy = _frule((va, vb), a, b)
    _assert_same_product(y, np.kron(a, b), a, b)
    expected = _jvp_fd(a, b, va, vb)
    assert isinstance(dy, np.ndarray) and dy.shape == expected.shape and dy.dtype == expected.dtype
    np.testing.assert_allclose(dy, expected, rtol=rtol, atol=rtol * (1 + np.abs(expected).max(initial=0)))
    _, only_a = _frule((va, sr.ZeroTangent()), a, b)
    np.testing.assert_allclose(only_a, _jvp_fd(a, b, va, None), rtol=rtol, atol=rtol * 10)
    _, only_b = _frule((sr.NoTangent(), vb), a, b)
    np.testing.assert_allclose(only_b, _jvp_fd(a, b, None, vb), rtol=rtol, atol=rtol * 10)
    assert _frule((sr.ZeroTangent(), sr.ZeroTangent()), a, b)[1] == sr.ZeroTangent()


# --------------------------------------------------------------------------------------------
# forward
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a_dtype", "b_dtype"), DTYPE_PAIRS + [(np.float32, np.float32), (np.int8, np.int16), (np.bool_, np.bool_), (np.int64, np.float32), (np.float32, np.complex64)])
def test_forward_matches_numpy_for_every_shape_pair(a_dtype: type, b_dtype: type) -> None:
    rng = np.random.default_rng(0)
    for a_shape, b_shape in SHAPE_PAIRS:
        a, b = _operand(rng, a_shape, a_dtype), _operand(rng, b_shape, b_dtype)
        y, expected = sr.kron(a, b), np.kron(a, b)
        assert isinstance(y, np.ndarray)
        assert (y.shape, y.dtype) == (np.shape(expected), np.asarray(expected).dtype), (a_shape, b_shape)
        _assert_same_product(y, expected, a, b)


def _operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> Array:
    """Random values; integers up to +-100 (so int8 products wrap, as NumPy's do)."""
    if np.dtype(dtype).kind in "iub":
        return np.asarray(rng.integers(-100, 100, size=shape)).astype(dtype)
    return random_array(rng, shape, dtype)


def _assert_same_product(y: Array, expected: object, a: npt.ArrayLike, b: npt.ArrayLike) -> None:
    """Bit-equal to NumPy, except where both operands are complex: NumPy's SIMD loops fuse one
    multiply-add of ``(ac - bd) + (ad + bc)i`` into an FMA (depending on the CPU), which moves
    the last bit."""
    expected = np.asarray(expected)
    if np.iscomplexobj(a) and np.iscomplexobj(b) and y.size:
        tolerance = 2 * np.finfo(y.dtype).eps * np.abs(expected).max()
        np.testing.assert_allclose(y, expected, rtol=0, atol=tolerance)
    else:
        np.testing.assert_array_equal(y, expected)


def test_forward_layouts_and_scalars() -> None:
    rng = np.random.default_rng(1)
    a = random_array(rng, (4, 6), np.float64)[:, ::2]  # strided
    b = random_array(rng, (3, 2), np.complex128).T  # Fortran order
    _assert_same_product(sr.kron(a, b), np.kron(a, b), a, b)
    _assert_same_product(sr.kron(a[::-1], b), np.kron(a[::-1], b), a[::-1], b)
    _assert_same_product(sr.kron(2.5, b), np.kron(2.5, b), 2.5, b)
    _assert_same_product(sr.kron(b, 3), np.kron(b, 3), b, 3)
    _assert_same_product(sr.kron(b, b[::-1]), np.kron(b, b[::-1]), b, b[::-1])
    assert sr.kron(2.0, 3.0).shape == () and float(sr.kron(2.0, 3.0)) == 6.0
    swapped = np.arange(6.0).reshape(2, 3).astype(">f8")  # non-native byte order
    _assert_same_product(sr.kron(swapped, b), np.kron(swapped, b), swapped, b)
    _, back = _rrule(swapped, b)
    assert back(np.ones((4, 9)))[0].dtype == swapped.dtype.newbyteorder("=")  # tangents are native (README)
    empty = sr.kron(np.ones((0, 3)), b)
    assert empty.shape == np.kron(np.ones((0, 3)), b).shape == (0, 9)


# --------------------------------------------------------------------------------------------
# rules against finite differences
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a_dtype", "b_dtype"), DTYPE_PAIRS)
def test_rrule_against_finite_differences(a_dtype: type, b_dtype: type) -> None:
    rng = np.random.default_rng(2)
    for a_shape, b_shape in SHAPE_PAIRS:
        _check_rrule(random_array(rng, a_shape, a_dtype), random_array(rng, b_shape, b_dtype), rng)


@pytest.mark.parametrize(("a_dtype", "b_dtype"), DTYPE_PAIRS)
def test_frule_against_finite_differences(a_dtype: type, b_dtype: type) -> None:
    rng = np.random.default_rng(3)
    for a_shape, b_shape in SHAPE_PAIRS:
        _check_frule(random_array(rng, a_shape, a_dtype), random_array(rng, b_shape, b_dtype), rng)


@pytest.mark.parametrize(
    ("a_dtype", "b_dtype"),
    DTYPE_PAIRS + [(np.float32, np.float32), (np.complex64, np.float32), (np.float32, np.complex128)],
)
def test_rows_in_groups(a_dtype: type, b_dtype: type) -> None:
    # The pullback takes a's last axis four rows at a time, then the rest one by one.
    rng = np.random.default_rng(12)
    single = max(np.finfo(a_dtype).eps, np.finfo(b_dtype).eps) > 1e-10
    rtol = 1e-4 if single else 1e-9
    for a_shape, b_shape in [((9,), (5,)), ((2, 7), (3, 4)), ((2, 6, 5), (2,))]:
        _check_rrule(random_array(rng, a_shape, a_dtype), random_array(rng, b_shape, b_dtype), rng, rtol=rtol)


@pytest.mark.parametrize(("a_dtype", "b_dtype"), [(np.int16, np.complex128), (np.complex128, np.int64), (np.int32, np.float32)])
def test_integer_and_complex_operands(a_dtype: type, b_dtype: type) -> None:
    rng = np.random.default_rng(13)
    a, b = _operand(rng, (2, 5), a_dtype), _operand(rng, (3, 2), b_dtype)
    y, back = _rrule(a, b)
    np.testing.assert_array_equal(y, np.kron(a, b))
    dy = random_array(rng, y.shape, y.dtype)
    da, db = back(dy)
    dy4 = dy.reshape(2, 3, 5, 2)
    if np.dtype(a_dtype).kind == "i":
        assert da == sr.NoTangent()
        assert db.dtype == b.dtype
        np.testing.assert_allclose(db, np.einsum("ikjl,ij->kl", dy4, a), rtol=1e-6)
    else:
        assert db == sr.NoTangent()
        assert da.dtype == a.dtype
        np.testing.assert_allclose(da, np.einsum("ikjl,kl->ij", dy4, b), rtol=1e-12)


def test_larger_shapes_and_long_rows() -> None:
    # Rows longer than a tile (2048 float64 accumulators) and blocks of many rows.
    rng = np.random.default_rng(4)
    _check_rrule(random_array(rng, (3, 5), np.float64), random_array(rng, (2, 2500), np.float64), rng)
    _check_rrule(random_array(rng, (7,), np.complex128), random_array(rng, (1100,), np.complex128), rng)
    _check_frule(random_array(rng, (3, 5), np.float64), random_array(rng, (2, 2500), np.float64), rng)


def test_float32_stays_float32_and_accumulates_wide() -> None:
    rng = np.random.default_rng(5)
    a = random_array(rng, (3, 4), np.float32)
    b = random_array(rng, (50, 60), np.float32)
    y, back = _rrule(a, b)
    assert y.dtype == np.float32
    dy = random_array(rng, y.shape, np.float32)
    da, db = back(dy)
    assert da.dtype == np.float32 and db.dtype == np.float32
    dy4 = dy.astype(np.float64).reshape(3, 50, 4, 60)
    # Reference in float64: a float64 accumulation rounds only once, at the end.
    np.testing.assert_allclose(da, np.einsum("ikjl,kl->ij", dy4, b.astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(db, np.einsum("ikjl,ij->kl", dy4, a.astype(np.float64)), rtol=1e-6, atol=1e-6)
    y64, dy64 = _frule((a, b), a, b)
    assert dy64.dtype == np.float32
    c64 = random_array(rng, (2,), np.complex64)
    _, back_c = _rrule(a, c64)
    da_c, db_c = back_c(random_array(rng, (3, 8), np.complex64))
    assert da_c.dtype == np.float32 and db_c.dtype == np.complex64


def test_cotangent_of_other_dtype_is_projected() -> None:
    rng = np.random.default_rng(6)
    a, b = random_array(rng, (2, 3), np.float64), random_array(rng, (2, 2), np.float64)
    y, back = _rrule(a, b)
    dy = random_array(rng, y.shape, np.complex128)
    da, db = back(dy)
    da_real, db_real = back(dy.real.copy())
    np.testing.assert_array_equal(da, da_real)
    np.testing.assert_array_equal(db, db_real)
    da32, _ = back(dy.real.astype(np.float32))
    assert da32.dtype == np.float64


# --------------------------------------------------------------------------------------------
# lazy cotangents and tangents
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a_dtype", "b_dtype"), DTYPE_PAIRS)
def test_lazy_cotangents_equal_their_dense_equivalents(a_dtype: type, b_dtype: type) -> None:
    rng = np.random.default_rng(7)
    a, b = random_array(rng, (2, 3), a_dtype), random_array(rng, (3, 1, 2), b_dtype)
    y, back = _rrule(a, b)
    value = 0.5 - 1.5j if y.dtype.kind == "c" else 0.5
    fill = sr.Fill(value, y.shape, y.dtype)
    lazy = back(fill)
    dense = back(np.asarray(fill))
    for tangent, reference, primal in zip(lazy, dense, (a, b)):
        assert isinstance(tangent, sr.Fill)
        assert tangent.shape == primal.shape and tangent.dtype == primal.dtype
        np.testing.assert_allclose(np.asarray(tangent), reference, rtol=1e-12)
    assert back(sr.ZeroTangent()) == (sr.ZeroTangent(), sr.ZeroTangent())
    dy = random_array(rng, y.shape, y.dtype)
    calls: list[int] = []

    def evaluate() -> Array:
        calls.append(1)
        return dy

    thunk = sr.Thunk(evaluate)
    for tangent, reference in zip(back(thunk), back(dy)):
        np.testing.assert_array_equal(tangent, reference)
    assert calls == [1]


def test_lazy_tangents_in_frule() -> None:
    rng = np.random.default_rng(8)
    a, b = random_array(rng, (2, 3), np.float64), random_array(rng, (2, 2), np.complex128)
    fill = sr.Fill(2.0, a.shape, np.float64)
    _, lazy = _frule((fill, sr.Thunk(lambda: b)), a, b)
    _, dense = _frule((np.full(a.shape, 2.0), b), a, b)
    np.testing.assert_array_equal(lazy, dense)
    # A complex tangent of a real operand is projected onto its real part.
    _, projected = _frule((np.full(a.shape, 2.0 + 5j), sr.ZeroTangent()), a, b)
    np.testing.assert_allclose(projected, np.kron(np.full(a.shape, 2.0), b))


# --------------------------------------------------------------------------------------------
# integer operands
# --------------------------------------------------------------------------------------------


def test_integer_operands_get_no_tangent() -> None:
    rng = np.random.default_rng(9)
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = random_array(rng, (2, 2), np.float64)
    y, back = _rrule(ints, b)
    np.testing.assert_array_equal(y, np.kron(ints, b))
    dy = random_array(rng, y.shape, np.float64)
    da, db = back(dy)
    assert da == sr.NoTangent()
    dy4 = dy.reshape(2, 2, 3, 2)
    np.testing.assert_allclose(db, np.einsum("ikjl,ij->kl", dy4, ints))
    assert back(sr.Fill(1.0, y.shape))[0] == sr.NoTangent()
    assert back(sr.ZeroTangent()) == (sr.NoTangent(), sr.ZeroTangent())
    _, dy_forward = _frule((sr.NoTangent(), b), ints, b)
    np.testing.assert_array_equal(dy_forward, np.kron(ints, b))
    y_int, back_int = _rrule(ints, ints)
    assert y_int.dtype == np.int32
    assert back_int(np.ones(y_int.shape)) == (sr.NoTangent(), sr.NoTangent())
    with pytest.raises(ValueError, match=r"\(4, 9\)"):
        back_int(np.ones((3, 3)))


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


def test_error_messages() -> None:
    a, b = np.ones((2, 3)), np.ones((2, 2))
    _, back = _rrule(a, b)
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(4, 6\)"):
        back(np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(4, 6\)"):
        back(sr.Fill(1.0, (4, 5)))
    with pytest.raises(TypeError, match="'a'.*object"):
        sr.kron(np.array([object()]), b)
    with pytest.raises(TypeError, match=f"'b'.*{np.dtype(np.longdouble)}"):  # float16 is supported (SPEC 15)
        sr.kron(a, np.ones(2, np.longdouble))
    with pytest.raises(TypeError, match="'b'.*<U"):
        _rrule(a, np.array(["x"]))
    with pytest.raises(TypeError, match="'a' must be an array"):
        sr.kron({1.0, 2.0}, b)  # type: ignore[call-overload]  # a set is no array-like (a list is: test_array_likes.py)
    with pytest.raises(ValueError, match=r"tangent of 'b'.*\(3,\).*\(2, 2\)"):
        _frule((sr.ZeroTangent(), np.ones(3)), a, b)
    with pytest.raises(ValueError, match="tangents.*one entry per positional argument"):
        sr.frule(sr.kron, (np.ones((2, 3)),), a, b)  # type: ignore[arg-type, type-var]  # wrong arity, on purpose
    with pytest.raises(ValueError, match="too large"):
        sr.kron(np.broadcast_to(np.ones(1), (2**31,)), np.broadcast_to(np.ones(1), (2**31,)))


# --------------------------------------------------------------------------------------------
# threads, compile cache
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("a_dtype", [np.complex128, np.float64, np.float32])  # the real ones: one channel a side
@pytest.mark.parametrize(("a_shape", "b_shape"), [((5, 4), (3, 6)), ((1, 4), (7, 6)), ((3,), (2, 2, 50)), ((9,), (40,)), ((40,), (30,))])
def test_threaded_path_matches(
    monkeypatch: pytest.MonkeyPatch, a_shape: tuple[int, ...], b_shape: tuple[int, ...], a_dtype: type[np.generic]
) -> None:
    rng = np.random.default_rng(10)
    a, b = random_array(rng, a_shape, a_dtype), random_array(rng, b_shape, np.float64)
    y, back = _rrule(a, b)
    dy = random_array(rng, y.shape, y.dtype)
    serial = back(dy)
    va, vb = random_array(rng, a.shape, a.dtype), random_array(rng, b.shape, b.dtype)
    serial_forward = _frule((va, vb), a, b)[1]
    monkeypatch.setattr(parallel, "PARALLEL_THRESHOLD", 0)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "3")
    assert len(parallel.chunk_bounds(5, 100)) > 1
    y_threaded, back_threaded = _rrule(a, b)
    np.testing.assert_array_equal(y_threaded, y)
    for threaded, reference in zip(back_threaded(dy), serial):
        np.testing.assert_allclose(threaded, reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(_frule((va, vb), a, b)[1], serial_forward)


def test_prepared_signature_serves_new_data_and_layouts() -> None:
    # After the first call a signature (dtypes and shapes) is served from its prepared plan:
    # each later call must still read its own operands, whatever their layout.
    rng = np.random.default_rng(12)
    base_a, base_b = random_array(rng, (4, 3), np.float64), random_array(rng, (2, 5), np.complex128)
    sr.kron(base_a, base_b)
    _rrule(base_a, base_b)
    hits = sr.cache_info().plan_hits
    operands = [
        (random_array(rng, (4, 3), np.float64), random_array(rng, (2, 5), np.complex128)),
        (np.asfortranarray(random_array(rng, (4, 3), np.float64)), random_array(rng, (2, 10), np.complex128)[:, ::2]),
        (random_array(rng, (4, 3), np.float64).astype(">f8"), random_array(rng, (5, 2), np.complex128).T),
    ]
    with sr.no_compile():
        for a, b in operands:
            np.testing.assert_array_equal(sr.kron(a, b), np.kron(a, b))
            y, back = _rrule(a, b)
            np.testing.assert_array_equal(y, np.kron(a, b))
            dy = random_array(rng, y.shape, y.dtype)
            va, vb = random_array(rng, a.shape, np.float64), random_array(rng, b.shape, np.complex128)
            da, db = back(dy)
            # The adjoint identity against NumPy's kron, which is bilinear: J(va, vb) is
            # kron(va, b) + kron(a, vb).
            expected = _inner(dy, np.kron(va, b) + np.kron(a, vb))
            assert abs(_inner(da, va) + _inner(db, vb) - expected) <= 1e-10 * max(1.0, abs(expected))
    # The first two pairs are the warm signature (4 hits); '>f8' is a dtype of its own: its
    # forward builds a new plan (with the same kernels), which its rrule then finds (1 hit).
    assert sr.cache_info().plan_hits == hits + 5


def test_second_call_compiles_nothing() -> None:
    rng = np.random.default_rng(11)
    a, b = random_array(rng, (2, 3), np.float64), random_array(rng, (3, 2), np.complex128)
    sr.precompile(sr.kron, sr.ArraySpec((5, 1), np.float64), sr.ArraySpec((1, 4), np.complex128))
    # Same ndims and dtypes, other extents: every kernel is already there.
    with sr.no_compile(), sr.no_fallback():
        y, back = _rrule(a, b)
        back(random_array(rng, y.shape, y.dtype))
        _frule((a, b), a, b)
        _frule((sr.ZeroTangent(), b), a, b)
        sr.kron(a, b)
    text = sr.explain(sr.kron, sr.ArraySpec((2, 3), np.float64), sr.ArraySpec((3,), np.complex128))
    assert text.count("def kernel(") == 3 and "pullback" in text and "pushforward" in text


# --------------------------------------------------------------------------------------------
# the shared rule checker (stablerules.testing), one line per case
# --------------------------------------------------------------------------------------------

from stablerules.testing import test_frule as check_frule  # noqa: E402
from stablerules.testing import test_rrule as check_rrule  # noqa: E402


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPE_PAIRS)
@pytest.mark.parametrize(("a_dtype", "b_dtype"), [(np.float64, np.complex128), (np.float32, np.float32)])
def test_kron_passes_the_shared_checker(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], a_dtype: type, b_dtype: type
) -> None:
    rng = np.random.default_rng(hash((a_shape, b_shape)) % 2**32)
    a, b = random_array(rng, a_shape, a_dtype), random_array(rng, b_shape, b_dtype)
    check_rrule(sr.kron, a, b)
    check_frule(sr.kron, a, b)


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402

ROBUSTNESS = [
    Case(
        "kron",
        sr.kron,
        lambda xs: ((xs[0], xs[1]), {}),
        lambda xs: np.kron(xs[0], xs[1]),
        ((3, 2), (2, 3)),
        ((0, 2), (2, 3)),
        ((), ()),
        bilinear=True,
    )
]

# label | expected exception | message pattern | expression (evaluated in a capped subprocess)
HUGE_CALLS = r"""
kron huge              | MemoryError | more than this machine      | sr.kron(huge(2**20), huge(2**20))
kron 2**62             | ValueError  | too large to allocate       | sr.kron(huge(2**31), huge(2**31))
rrule kron huge        | MemoryError | more than this machine      | sr.rrule(sr.kron, huge(2**20), huge(2**20))
kron huge 2-D          | MemoryError | more than this machine      | sr.kron(np.broadcast_to(1.0, (2**12, 2**12)), np.broadcast_to(1.0, (2**12, 2**12)))
""".strip().splitlines()


def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase("kron", lambda a, b: srt.kron(a, b), np.kron, ((2, 3), (3, 2))),
        TorchCase("kron-ndim", lambda a, b: srt.kron(a, b), np.kron, ((3,), (2, 2))),
    ]


def jax_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import jax.numpy as jnp

    import stablerules.jax as srj

    return [
        ("kron", srj.kron, (rand(2, 3), rand(3, 2)), jnp.kron),
        ("kron 3-d by 1-d", srj.kron, (rand(2, 1, 3), rand(2)), jnp.kron),
        ("kron complex (jnp path)", srj.kron, (rand(2, 2, dtype=np.complex128), rand(3, 2, dtype=np.complex128)), jnp.kron),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [("kron", lambda x: srj.kron(x, x))]


def jax_call_errors(rand: Callable[..., Any]) -> list[tuple[Callable[[], Any], type[Exception], str]]:
    import stablerules.jax as srj

    return [
        (
            lambda: srj.kron(rand(2), "x"),  # type: ignore[arg-type]
            TypeError,
            "kron: argument 'b' must be an array (a jax.Array, or what jnp.asarray reads as one), got str",
        ),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        ("kron", lambda a, b: sra.kron(a, b), (rand(2, 3), rand(3, 2)), lambda a, b: anp.kron(a, b)),
        ("kron 3-d by 1-d", lambda a, b: sra.kron(a, b), (rand(2, 1, 3), rand(2)), None),
        (
            "kron complex",
            lambda a, b: sra.kron(a, b),
            (rand(2, 2, complex_=True), rand(3, 2, complex_=True)),
            lambda a, b: anp.kron(a, b),
        ),
        ("kron real by complex", lambda a, b: sra.kron(a, b), (rand(2, 2), rand(2, 3, complex_=True)), None),
    ]


@pytest.mark.parametrize("scalar", [True, 2, 2.0, 2j, -3])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_kron_of_an_array_and_a_python_scalar_has_np_krons_dtype_and_values(dtype: str, scalar: complex) -> None:
    """On main: a 16-bit array and a Python scalar kept the 16-bit dtype (np.kron reads the
    scalar as an array: float16 and 2 give float64, as float32 and 2 do)."""
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        numpy_dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        numpy_dtype = np.dtype(dtype)
    x = np.array([1.5, -2.0, 0.25]).astype(numpy_dtype)
    for got, expected in ((sr.kron(x, scalar), np.kron(x, scalar)), (sr.kron(scalar, x), np.kron(scalar, x))):
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
    y, back = sr.rrule(sr.kron, x, scalar)
    tangent = back(np.ones(y.shape, y.dtype))[0]
    assert isinstance(tangent, np.ndarray) and tangent.dtype == numpy_dtype  # a tangent has its primal's dtype


def test_kron_of_big_endian_operands_gives_native_tangents() -> None:
    """On main: the tangents kept the operands' byte order (every other op's are native)."""
    a = np.arange(1.0, 4.0).astype(">f8")
    b = (np.arange(2.0) + 1j).astype(">c16")
    y, back = sr.rrule(sr.kron, a, b)
    np.testing.assert_array_equal(y, np.kron(a, b))
    da, db = back(np.ones(y.shape, y.dtype))
    assert (da.dtype, db.dtype) == (np.dtype("float64"), np.dtype("complex128"))
    assert da.dtype.isnative and db.dtype.isnative
    np.testing.assert_allclose(da, [np.sum(np.conj(b)).real] * 3)
