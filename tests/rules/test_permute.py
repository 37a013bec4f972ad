"""Axis bookkeeping: ``permute_dims``, ``transpose``, ``swapaxes`` and ``reshape``.

Forward results are compared with NumPy (``np.permute_dims``, ``np.transpose``,
``np.swapaxes``, ``np.reshape``); pullbacks with NumPy's inverse maps, with the adjoint identity against
NumPy's forward, and with central finite differences through ``stablerules.testing``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules.testing import test_frule as check_frule
from stablerules.testing import test_rrule as check_rrule
from tests.references import array_rrule as rrule, dense, random_array

Array = npt.NDArray[Any]

RNG = np.random.default_rng(77)


def static(value: int | tuple[int, ...]) -> Val[int] | Val[tuple[int, ...]]:
    return Val(value) if isinstance(value, int) else Val(value)


# ======================================================================================
# permute_dims and transpose
# ======================================================================================

PERMUTATIONS: list[tuple[tuple[int, ...], tuple[int, ...] | None]] = [
    ((), ()),
    ((), None),
    ((5,), (0,)),
    ((5,), None),
    ((3, 4), (1, 0)),
    ((3, 4), (0, 1)),
    ((3, 4), None),
    ((3, 4), (-1, 0)),
    ((2, 0, 3), (2, 0, 1)),
    ((2, 3, 4), (1, 2, 0)),
    ((2, 3, 4, 5), (3, 1, 0, 2)),
    ((2, 3, 4, 5), None),
]


@pytest.mark.parametrize(("shape", "axes"), PERMUTATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int16, np.bool_])
def test_transpose_and_permute_dims_forward_are_numpys(
    shape: tuple[int, ...], axes: tuple[int, ...] | None, dtype: npt.DTypeLike
) -> None:
    x = random_array(RNG, shape, dtype)
    y = sr.transpose(x, None if axes is None else Val(axes))
    expected = np.transpose(x, axes)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
    assert np.shares_memory(y, x) or x.size == 0
    if axes is not None:
        z = sr.permute_dims(x, Val(axes))
        expected = np.permute_dims(x, axes)
        assert z.shape == expected.shape and z.dtype == expected.dtype
        np.testing.assert_array_equal(z, expected)


@pytest.mark.parametrize(("shape", "axes"), PERMUTATIONS)
def test_transpose_pullback_and_pushforward(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> None:
    x = random_array(RNG, shape, np.complex128)
    static = None if axes is None else Val(axes)
    y, back = rrule(sr.transpose, x, axes=static)
    dy = random_array(RNG, y.shape, np.complex128)
    (dx,) = back(dy)
    inverse = None if axes is None else tuple(np.argsort([a % max(len(shape), 1) for a in axes]))
    np.testing.assert_array_equal(dense(dx), np.transpose(dy, inverse))
    v = random_array(RNG, shape, np.complex128)
    np.testing.assert_allclose(np.vdot(dense(dx), v), np.vdot(dy, np.transpose(v, axes)), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(dense(sr.frule(sr.transpose, (v,), x, axes=static)[1]), np.transpose(v, axes))
    if axes is not None:
        _, back_p = rrule(sr.permute_dims, x, Val(axes))
        dxp, daxes = back_p(dy)
        assert daxes == NoTangent()
        np.testing.assert_array_equal(dense(dxp), dense(dx))
        np.testing.assert_array_equal(
            dense(sr.frule(sr.permute_dims, (v, NoTangent()), x, Val(axes))[1]), np.permute_dims(v, axes)
        )


@pytest.mark.parametrize(
    ("shape", "axes", "dtype"),
    [((3, 4), (1, 0), np.float64), ((2, 3, 4), (2, 0, 1), np.float32), ((2, 3), (1, 0), np.complex64),
     ((), (), np.float64), ((0, 2), (1, 0), np.complex128)],
)
def test_permutations_pass_the_shared_checker(shape: tuple[int, ...], axes: tuple[int, ...], dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, shape, dtype)
    check_rrule(sr.permute_dims, x, Val(axes))
    check_frule(sr.permute_dims, x, Val(axes))
    check_rrule(sr.permute_dims, x, axes=Val(axes))
    check_rrule(sr.transpose, x)
    check_frule(sr.transpose, x, Val(axes))


def test_permutation_pullback_is_a_view_of_the_cotangent() -> None:
    x = random_array(RNG, (3, 4, 2))
    _, back = rrule(sr.permute_dims, x, Val((2, 0, 1)))
    dy = random_array(RNG, (2, 3, 4))
    dx = dense(back(dy)[0])
    assert np.shares_memory(dx, dy) and dx.shape == (3, 4, 2)
    strided = random_array(RNG, (4, 3, 8))[::2].transpose(2, 1, 0)[:, :, ::1]  # any layout is viewed as it is
    assert strided.shape == (8, 3, 2)
    _, back2 = rrule(sr.transpose, random_array(RNG, (2, 3, 8)))
    assert np.shares_memory(dense(back2(strided)[0]), strided)


def test_permutation_lazy_cotangents_projection_and_integers() -> None:
    x = random_array(RNG, (3, 4), np.float32)
    y, back = rrule(sr.transpose, x)
    assert back(ZeroTangent()) == (ZeroTangent(),)
    assert back(Fill(1.0 + 2.0j, y.shape, np.complex64)) == (Fill(1.0, x.shape, np.float32),)
    dy = random_array(RNG, y.shape, np.complex128)
    dx = dense(back(Thunk(lambda: dy))[0])
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, dy.real.T, rtol=1e-6)
    assert sr.frule(sr.transpose, (Fill(2.0, x.shape, np.float32),), x)[1] == Fill(2.0, y.shape, np.float32)
    assert sr.frule(sr.permute_dims, (ZeroTangent(), NoTangent()), x, Val((1, 0)))[1] == ZeroTangent()
    n = random_array(RNG, (3, 4), np.int32)
    y_int, back_int = rrule(sr.permute_dims, n, Val((1, 0)))
    np.testing.assert_array_equal(y_int, n.T)
    assert back_int(np.ones((4, 3))) == (NoTangent(), NoTangent())
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3\)"):
        back_int(np.ones((3, 4)))


def test_permutation_errors() -> None:
    x = random_array(RNG, (3, 4))
    with pytest.raises(ValueError, match=r"permute_dims: axes \(0,\) must name each of the 2 axes of x \(shape \(3, 4\)\) once"):
        sr.permute_dims(x, Val((0,)))
    with pytest.raises(ValueError, match=r"transpose: axes \(0, 0\) names an axis twice"):
        sr.transpose(x, Val((0, 0)))
    with pytest.raises(ValueError, match="out of bounds"):
        sr.permute_dims(x, Val((0, 2)))
    with pytest.raises(TypeError, match="axes"):
        sr.permute_dims(x)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"Val\(tuple of ints\)"):
        sr.permute_dims(x, Val(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        sr.transpose(np.array([[1.0]], dtype=np.longdouble))  # float16 is supported (SPEC 15)
    _, back = rrule(sr.transpose, x)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3\)"):
        back(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        sr.frule(sr.transpose, (np.ones((4, 3)),), x)


# ======================================================================================
# swapaxes
# ======================================================================================

SWAPS: list[tuple[tuple[int, ...], int, int]] = [
    ((5,), 0, 0),
    ((5,), -1, 0),
    ((3, 4), 0, 1),
    ((3, 4), 1, 1),
    ((3, 4), -1, -2),
    ((2, 0, 3), 0, 2),
    ((2, 3, 4), 2, 0),
    ((2, 3, 4, 5), 1, -1),
]


@pytest.mark.parametrize(("shape", "axis1", "axis2"), SWAPS)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int16, np.bool_])
def test_swapaxes_forward_is_numpys(shape: tuple[int, ...], axis1: int, axis2: int, dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, shape, dtype)
    y = sr.swapaxes(x, Val(axis1), Val(axis2))
    expected = np.swapaxes(x, axis1, axis2)
    assert y.shape == expected.shape and y.dtype == expected.dtype and y.strides == expected.strides
    np.testing.assert_array_equal(y, expected)
    assert np.shares_memory(y, x) or x.size == 0


@pytest.mark.parametrize(("shape", "axis1", "axis2"), SWAPS)
def test_swapaxes_passes_the_shared_checker(shape: tuple[int, ...], axis1: int, axis2: int) -> None:
    x = random_array(RNG, shape)
    check_rrule(sr.swapaxes, x, Val(axis1), Val(axis2))
    check_frule(sr.swapaxes, x, Val(axis1), Val(axis2))
    check_rrule(sr.swapaxes, x, axis1=Val(axis1), axis2=Val(axis2))


def test_swapaxes_pullback_is_numpys_inverse_and_a_view() -> None:
    x = random_array(RNG, (3, 4, 2))
    y, back = rrule(sr.swapaxes, x, Val(0), Val(-1))
    dy = random_array(RNG, y.shape)
    dx = dense(back(dy)[0])
    np.testing.assert_array_equal(dx, np.swapaxes(dy, 0, -1))
    assert np.shares_memory(dx, dy) and dx.shape == x.shape
    assert back(Fill(2.0, y.shape, np.float64))[0] == Fill(2.0, x.shape, np.float64)
    assert back(ZeroTangent())[0] == ZeroTangent()


def test_swapaxes_errors() -> None:
    x = random_array(RNG, (3, 4))
    with pytest.raises(ValueError, match=r"swapaxes: axis1 2 is out of bounds for an array of dimension 2 \(x has shape \(3, 4\)\)"):
        sr.swapaxes(x, Val(2), Val(0))
    with pytest.raises(ValueError, match=r"swapaxes: axis2 -3 is out of bounds"):
        sr.swapaxes(x, Val(0), Val(-3))
    with pytest.raises(TypeError, match=r"argument 'axis1' must be Val\(int\)"):
        sr.swapaxes(x, Val((0, 1)), Val(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'axis2'"):
        sr.swapaxes(x, Val(0))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="swapaxes: axis2 is required"):
        sr.swapaxes(x, Val(0), None)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"out of bounds"):
        sr.swapaxes(np.float64(1.0), Val(0), Val(0))  # type: ignore[call-overload]  # a 0-d input


# ======================================================================================
# reshape
# ======================================================================================

RESHAPES: list[tuple[tuple[int, ...], int | tuple[int, ...]]] = [
    ((), ()),
    ((), (1, 1)),
    ((1,), ()),
    ((6,), (2, 3)),
    ((6,), 6),
    ((6,), -1),
    ((2, 3), (3, 2)),
    ((2, 3), (-1,)),
    ((2, 3), (3, -1)),
    ((2, 3), (1, -5, 1)),
    ((2, 3, 4), (4, 6)),
    ((0, 3), (3, 0)),
    ((0, 3), (-1,)),
    ((0, 3), (5, -1)),
]


@pytest.mark.parametrize(("shape", "new"), RESHAPES)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.uint8])
def test_reshape_forward_is_numpys(shape: tuple[int, ...], new: int | tuple[int, ...], dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, shape, dtype)
    y = sr.reshape(x, static(new))
    expected = np.reshape(x, new)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
    assert np.shares_memory(y, x) or x.size == 0


@pytest.mark.parametrize(("shape", "new"), RESHAPES)
def test_reshape_pullback_and_pushforward(shape: tuple[int, ...], new: int | tuple[int, ...]) -> None:
    x = random_array(RNG, shape, np.complex128)
    y, back = rrule(sr.reshape, x, static(new))
    dy = random_array(RNG, y.shape, np.complex128)
    dx, dshape = back(dy)
    assert dshape == NoTangent()
    np.testing.assert_array_equal(dense(dx), dy.reshape(shape))
    assert np.shares_memory(dense(dx), dy) or dy.size == 0
    v = random_array(RNG, shape, np.complex128)
    np.testing.assert_allclose(np.vdot(dense(dx), v), np.vdot(dy, np.reshape(v, new)), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(dense(sr.frule(sr.reshape, (v, NoTangent()), x, static(new))[1]), np.reshape(v, new))


@pytest.mark.parametrize(
    ("shape", "new", "dtype"),
    [((2, 3), (3, 2), np.float64), ((2, 3, 4), (-1, 4), np.float32), ((4,), (2, 2), np.complex128), ((), (1,), np.float64)],
)
def test_reshape_passes_the_shared_checker(shape: tuple[int, ...], new: tuple[int, ...], dtype: npt.DTypeLike) -> None:
    x = random_array(RNG, shape, dtype)
    check_rrule(sr.reshape, x, static(new))
    check_frule(sr.reshape, x, static(new))
    check_rrule(sr.reshape, x, shape=static(new))


def test_reshape_of_a_strided_input_copies_as_numpy_does() -> None:
    x = random_array(RNG, (4, 6))[:, ::2]
    y = sr.reshape(x, Val((12,)))
    np.testing.assert_array_equal(y, np.reshape(x, 12))
    _, back = rrule(sr.reshape, x, Val(-1))
    dy = random_array(RNG, (12,))[::-1]  # a negative-stride cotangent: reshaped (a copy if it must)
    np.testing.assert_array_equal(dense(back(dy)[0]), dy.reshape(4, 3))


def test_reshape_lazy_cotangents() -> None:
    x = random_array(RNG, (2, 3), np.complex128)
    y, back = rrule(sr.reshape, x, Val((3, 2)))
    assert back(Fill(0.5j, y.shape, np.complex128)) == (Fill(0.5j, x.shape, np.complex128), NoTangent())
    assert back(ZeroTangent()) == (ZeroTangent(), NoTangent())
    assert sr.frule(sr.reshape, (Fill(1.0, x.shape, np.complex128), NoTangent()), x, Val((6,)))[1] == Fill(1.0, (6,), np.complex128)
    assert sr.frule(sr.reshape, (NoTangent(), NoTangent()), x, Val((6,)))[1] == ZeroTangent()


def test_reshape_errors() -> None:
    x = random_array(RNG, (2, 3))
    with pytest.raises(ValueError, match=r"cannot reshape x of shape \(2, 3\) \(size 6\) into shape \(4, 2\)"):
        sr.reshape(x, Val((4, 2)))
    with pytest.raises(ValueError, match="at most one"):
        sr.reshape(x, Val((-1, -1)))
    with pytest.raises(ValueError, match=r"into shape \(0, -1\)"):
        sr.reshape(x, Val((0, -1)))
    with pytest.raises(TypeError, match="shape"):
        sr.reshape(x)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="shape"):
        sr.reshape(x, "6")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="at most 64"):
        sr.reshape(np.ones(1), Val((1,) * 65))
    _, back = rrule(sr.reshape, x, Val((3, 2)))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        back(np.ones((2, 3)))


# ======================================================================================
# statics, guards, precompile
# ======================================================================================


def test_plain_statics_count_as_dynamic_and_vals_do_not() -> None:
    x = random_array(RNG, (2, 3))
    before = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.reshape(x, (3, 2)), x.reshape(3, 2))
    np.testing.assert_array_equal(sr.permute_dims(x, (1, 0)), x.T)
    np.testing.assert_array_equal(sr.transpose(x, (1, 0)), x.T)
    assert sr.cache_info().dynamic_arguments == before + 3
    with sr.no_fallback(), sr.no_compile():
        sr.reshape(x, Val((3, 2)))
        sr.permute_dims(x, Val((1, 0)))
        sr.transpose(x)
        y, back = rrule(sr.reshape, x, Val(-1))
        back(np.ones(6))
        with pytest.raises(sr.DynamicFallbackError):
            sr.reshape(x, 6)


def test_view_ops_list_no_kernels() -> None:
    spec = sr.ArraySpec((2, 3), np.float32)
    assert sr.precompile(sr.reshape, spec, Val((3, 2))) == ()
    assert sr.precompile(sr.permute_dims, spec, Val((1, 0))) == ()
    assert sr.precompile(sr.transpose, spec) == ()
    assert sr.explain(sr.transpose, spec, Val((1, 0))) == ""
    with pytest.raises(ValueError, match="cannot reshape"):
        sr.precompile(sr.reshape, spec, Val((4,)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple), data=st.data())
def test_permutations_and_reshapes_random(shape: tuple[int, ...], data: st.DataObject) -> None:
    x = random_array(RNG, shape)
    v = random_array(RNG, shape)
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    y, back = rrule(sr.permute_dims, x, Val(axes))
    np.testing.assert_array_equal(y, np.permute_dims(x, axes))
    dy = random_array(RNG, y.shape)
    np.testing.assert_allclose(np.vdot(dense(back(dy)[0]), v), np.vdot(dy, np.permute_dims(v, axes)), rtol=1e-9, atol=1e-12)
    flat = data.draw(st.sampled_from([(-1,), (1, -1), (-1, 1)]) if x.size else st.just((0,)))
    y2, back2 = rrule(sr.reshape, x, Val(flat))
    np.testing.assert_array_equal(y2, np.reshape(x, flat))
    dy2 = random_array(RNG, y2.shape)
    np.testing.assert_allclose(np.vdot(dense(back2(dy2)[0]), v), np.vdot(dy2, np.reshape(v, flat)), rtol=1e-9, atol=1e-12)


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from collections.abc import Callable  # noqa: E402

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402

ROBUSTNESS = [
    Case("permute-dims", sr.permute_dims, lambda xs: ((xs[0], Val((2, 0, 1))), {}),
         lambda xs: np.permute_dims(xs[0], (2, 0, 1)), ((3, 4, 2),), ((3, 0, 2),)),
    Case("transpose", sr.transpose, lambda xs: ((xs[0],), {}), lambda xs: np.transpose(xs[0]), ((3, 4),), ((0, 4),), ((),)),
    Case("reshape", sr.reshape, lambda xs: ((xs[0], Val((-1, 2))), {}), lambda xs: np.reshape(xs[0], (-1, 2)),
         ((3, 4),), ((0, 4),)),
    Case("swapaxes", sr.swapaxes, lambda xs: ((xs[0], Val(0), Val(-1)), {}), lambda xs: np.swapaxes(xs[0], 0, -1),
         ((3, 4, 2),), ((3, 0, 2),)),
]


def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase("permute_dims", lambda x: srt.permute_dims(x, Val((2, 0, 1))), lambda x: np.transpose(x, (2, 0, 1)), ((2, 3, 4),)),
        TorchCase("transpose", lambda x: srt.transpose(x), np.transpose, ((2, 3, 4),)),
        TorchCase("reshape", lambda x: srt.reshape(x, Val((3, -1))), lambda x: np.reshape(x, (3, -1)), ((2, 3, 2),)),
        TorchCase("swapaxes", lambda x: srt.swapaxes(x, Val(0), Val(-1)), lambda x: np.swapaxes(x, 0, -1), ((2, 3, 4),)),
    ]


def jax_structure(rand: Callable[..., Any]) -> list[ArrayCase]:
    import stablerules.jax as srj

    return [
        ("permute_dims", lambda x: srj.permute_dims(x, Val((2, 0, 1))), (rand(2, 3, 4),), lambda x: np.transpose(x, (2, 0, 1))),
        ("transpose", lambda x: srj.transpose(x), (rand(2, 3, 4),), np.transpose),
        ("reshape", lambda x: srj.reshape(x, Val((3, -1))), (rand(2, 3, 2),), lambda x: np.reshape(x, (3, -1))),
        ("swapaxes", lambda x: srj.swapaxes(x, Val(0), Val(-1)), (rand(2, 3, 4),), lambda x: np.swapaxes(x, 0, -1)),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("permute_dims", lambda x: srj.permute_dims(x, Val((1, 0)))),
        ("transpose", lambda x: srj.transpose(x)),
        ("reshape", lambda x: srj.reshape(x, Val((4, 3)))),
        ("swapaxes", lambda x: srj.swapaxes(x, Val(1), Val(0))),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        ("permute_dims", lambda x: sra.permute_dims(x, Val((2, 0, 1))), (rand(2, 3, 4),), lambda x: anp.transpose(x, (2, 0, 1))),
        ("transpose", lambda x: sra.transpose(x), (rand(2, 3, 4),), lambda x: anp.transpose(x)),
        ("reshape", lambda x: sra.reshape(x, Val((3, -1))), (rand(2, 3, 2),), lambda x: anp.reshape(x, (3, -1))),
        ("swapaxes", lambda x: sra.swapaxes(x, Val(0), Val(-1)), (rand(2, 3, 4),), lambda x: anp.swapaxes(x, 0, -1)),
    ]
