"""The broadcast family: ``broadcast_to``, ``sum`` and ``mean``.

Forwards are compared with NumPy exactly (values, dtype); pullbacks with independent NumPy
references (``dy.sum`` over the broadcast axes; ``np.broadcast_to`` of ``dy`` for ``sum``, of
``dy / count`` for ``mean``) on small-integer data, where every sum is exact whatever its
order, and with central finite differences through ``stablerules.testing``.
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
from stablerules.testing import test_frule, test_rrule
from tests import references
from tests.references import array_rrule as rrule, dense

Array = npt.NDArray[Any]

RNG = np.random.default_rng(515)

# Rule calls on ops chosen at run time (typed as callables) go through these untyped names, so
# that mypy does not try each of the rules' thousands of overloads on every such call (the result
# would be loose all the same).
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule
FLOATING = ["float32", "float64", "complex64", "complex128"]


def integers(shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    return references.small_integers(RNG, shape, dtype)


def broadcast_reference(x_shape: tuple[int, ...], dy: Array) -> Array:
    """``dy`` summed over the axes ``np.broadcast_to`` added or stretched, in ``x``'s shape."""
    lead = dy.ndim - len(x_shape)
    summed: Array = dy.sum(axis=tuple(range(lead))) if lead else dy
    stretched = tuple(axis for axis, extent in enumerate(x_shape) if extent == 1 and summed.shape[axis] != 1)
    reduced: Array = summed.sum(axis=stretched, keepdims=True)
    return reduced.reshape(x_shape).astype(dy.dtype)


def sum_reference(x_shape: tuple[int, ...], axis: tuple[int, ...] | None, keepdims: bool, dy: Array, count: int = 1) -> Array:
    """``dy`` (divided by ``count``) broadcast back over the summed axes."""
    axes = tuple(range(len(x_shape))) if axis is None else tuple(a % len(x_shape) for a in axis)
    kept = dy if keepdims else np.expand_dims(dy, axes)
    return np.broadcast_to(kept / count if count != 1 else kept, x_shape).astype(dy.dtype)


# ------------------------------------------------------------------------------- broadcast_to

BROADCAST_CASES = [
    ((1, 4, 1, 5), (3, 4, 6, 5)),
    ((4, 1), (2, 4, 7)),
    ((1,), (9,)),
    ((3, 1, 2, 1), (2, 3, 4, 2, 5)),
    ((2, 3), (5, 2, 3)),
    ((2, 3), (2, 3)),
    ((), (4, 2)),
    ((1, 1), (1, 1)),
    ((3, 1), (3, 0)),
    ((0, 1), (2, 0, 4)),
    ((5, 1, 1), (5, 3, 2)),
]


@pytest.mark.parametrize(("x_shape", "shape"), BROADCAST_CASES)
@pytest.mark.parametrize("dtype", FLOATING)
def test_broadcast_to_forward_and_pullback(x_shape: tuple[int, ...], shape: tuple[int, ...], dtype: str) -> None:
    x = integers(x_shape, dtype)
    y, back = rrule(sr.broadcast_to, x, Val(shape))
    expected = np.broadcast_to(x, shape)
    assert y.dtype == expected.dtype and y.shape == expected.shape and not y.flags.writeable
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(sr.broadcast_to(x, Val(shape)), expected)
    dy = integers(shape, dtype)
    dx, static = back(dy)
    assert static == NoTangent()
    got = dense(dx)
    assert got.dtype == np.dtype(dtype) and got.shape == x_shape
    np.testing.assert_array_equal(got, broadcast_reference(x_shape, dy))


@pytest.mark.parametrize(("x_shape", "shape"), BROADCAST_CASES[:6])
def test_broadcast_to_rules_against_finite_differences(x_shape: tuple[int, ...], shape: tuple[int, ...]) -> None:
    x = RNG.standard_normal(x_shape)
    test_rrule(sr.broadcast_to, x, Val(shape))
    test_frule(sr.broadcast_to, x, Val(shape))
    test_rrule(sr.broadcast_to, x.astype(np.complex64), shape=Val(shape))
    test_frule(sr.broadcast_to, x.astype(np.float32), shape=Val(shape))


def test_broadcast_to_lazy_cotangents_and_tangents() -> None:
    x = integers((1, 3, 1))
    _, back = rrule(sr.broadcast_to, x, shape=Val((4, 3, 5)))
    assert back(Fill(2.0, (4, 3, 5))) == (Fill(40.0, (1, 3, 1), np.float64),)
    assert back(ZeroTangent()) == (ZeroTangent(),)
    dy = integers((4, 3, 5))
    np.testing.assert_array_equal(dense(back(Thunk(lambda: dy))[0]), broadcast_reference((1, 3, 1), dy))
    _, ydot = sr.frule(sr.broadcast_to, (Fill(1.5, (1, 3, 1)),), x, shape=Val((4, 3, 5)))
    assert ydot == Fill(1.5, (4, 3, 5), np.float64)
    _, ydot = sr.frule(sr.broadcast_to, (ZeroTangent(),), x, shape=Val((4, 3, 5)))
    assert ydot == ZeroTangent()
    tangent = integers((1, 3, 1))
    _, ydot = sr.frule(sr.broadcast_to, (tangent,), x, shape=Val((4, 3, 5)))
    view = dense(ydot)
    assert not view.flags.writeable and np.shares_memory(view, tangent)
    np.testing.assert_array_equal(view, np.broadcast_to(tangent, (4, 3, 5)))


def test_broadcast_to_own_shape_pullback_is_the_cotangent() -> None:
    x = integers((2, 3))
    _, back = rrule(sr.broadcast_to, x, shape=Val((2, 3)))
    dy = integers((2, 3))
    (dx,) = back(dy)
    assert dx is dy or np.shares_memory(dense(dx), dy)
    np.testing.assert_array_equal(dense(dx), dy)


def test_broadcast_to_float32_accumulates_wide() -> None:
    # 2**24 + 1 ones: a float32 running sum stops at 2**24; a float64 one reaches the exact total.
    count = 2**24 + 8
    x = np.ones((1,), np.float32)
    _, back = rrule(sr.broadcast_to, x, shape=Val((count,)))
    (dx,) = back(np.ones(count, np.float32))
    assert dense(dx).dtype == np.float32 and dense(dx)[0] == np.float32(count)


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize(("x_shape", "shape"), [((1, 7, 1, 9), (11, 7, 5, 9)), ((6, 1), (6, 40)), ((1,), (500,))])
def test_broadcast_to_threads_match_serial(
    monkeypatch: pytest.MonkeyPatch, threads: str, x_shape: tuple[int, ...], shape: tuple[int, ...]
) -> None:
    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 16)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", threads)
    x = integers(x_shape)
    _, back = rrule(sr.broadcast_to, x, shape=Val(shape))
    dy = integers(shape)
    np.testing.assert_array_equal(dense(back(dy)[0]), broadcast_reference(x_shape, dy))


# -------------------------------------------------------------------------------- sum / mean

SUM_CASES: list[tuple[tuple[int, ...], tuple[int, ...] | None]] = [
    ((4, 5, 6), (1, 2)),
    ((4, 5, 6), (0,)),
    ((4, 5, 6), (1,)),
    ((4, 5, 6), (-1, 0)),
    ((2, 3, 4, 5), (0, 2)),
    ((2, 3, 4, 5), (1, 3)),
    ((4, 5, 6), None),
    ((4, 5, 6), ()),
    ((7,), (0,)),
    ((3, 1, 4), (1,)),
    ((), None),
    ((0, 3), (0,)),
    ((3, 0), (1,)),
    ((200, 3, 40), (0, 2)),
]


def _numpy_reduction(op: object) -> Callable[..., Any]:
    return np.mean if op is sr.mean else np.sum


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("x_shape", "axis"), SUM_CASES)
@pytest.mark.parametrize("op", [sr.sum, sr.mean], ids=["sum", "mean"])
def test_sum_mean_forward_and_pullback(op: Any, x_shape: tuple[int, ...], axis: tuple[int, ...] | None, keepdims: bool) -> None:
    x = integers(x_shape, "float64")
    axis_argument = None if axis is None else Val(axis)
    expected = np.asarray(_numpy_reduction(op)(x, axis=axis, keepdims=keepdims))
    y, back = rrule(op, x, axis=axis_argument, keepdims=Val(keepdims))
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)
    dy = integers(y.shape, "float64")
    (dx,) = back(dy)
    axes = tuple(range(len(x_shape))) if axis is None else axis
    count = int(np.prod([x_shape[a] for a in axes], dtype=np.int64)) if op is sr.mean else 1
    reference = sum_reference(x_shape, axis, keepdims, dy, max(count, 1))
    np.testing.assert_array_equal(np.asarray(dx), reference)
    assert np.asarray(dx).dtype == np.float64 and np.asarray(dx).shape == x_shape


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "bool", "float32", "complex64", "complex128"])
@pytest.mark.parametrize("op", [sr.sum, sr.mean], ids=["sum", "mean"])
def test_sum_mean_dtypes_are_numpys(op: Any, dtype: str) -> None:
    x = integers((3, 4), dtype)
    for axis in (None, Val(0), Val((0, 1))):
        y = op(x, axis)
        expected = np.asarray(_numpy_reduction(op)(x, axis=None if axis is None else axis.value))
        assert y.dtype == expected.dtype and y.shape == expected.shape
        np.testing.assert_allclose(y, expected, rtol=1e-6)
    y, back = rrule(op, x, axis=Val(1))
    differentiable = np.dtype(dtype).kind in "fc"
    result = back(np.ones(y.shape))
    if differentiable:
        assert dense(result[0]).dtype == np.dtype(dtype)
    else:
        assert result == (NoTangent(),)
        _, ydot = sr.frule(op, (NoTangent(),), x, axis=Val(1))
        assert ydot == NoTangent()


@pytest.mark.parametrize(("x_shape", "axis"), [((3, 4, 5), (0, 2)), ((3, 4), (1,)), ((3, 4), None), ((2, 3), ())])
@pytest.mark.parametrize("op", [sr.sum, sr.mean], ids=["sum", "mean"])
def test_sum_mean_rules_against_finite_differences(op: Any, x_shape: tuple[int, ...], axis: tuple[int, ...] | None) -> None:
    x = RNG.standard_normal(x_shape)
    axis_argument = None if axis is None else Val(axis)
    test_rrule(op, x, axis_argument)
    test_frule(op, x, axis=axis_argument, keepdims=Val(True))
    test_rrule(op, x.astype(np.complex128), axis=axis_argument, keepdims=Val(True))
    test_frule(op, x.astype(np.float32), axis_argument, Val(False))


def test_sum_pullback_of_a_full_reduction_or_a_fill_is_a_fill() -> None:
    x = integers((200, 3, 40))
    _, back = rrule(sr.sum, x)
    assert back(np.asarray(2.5)) == (Fill(2.5, (200, 3, 40), np.float64),)
    assert back(2.5) == (Fill(2.5, (200, 3, 40), np.float64),)
    # keepdims: a one-element dy that is not 0-d gives a dense dx (only a 0-d one gives a Fill)
    _, back = rrule(sr.mean, x, keepdims=Val(True))
    (dx,) = back(np.full((1, 1, 1), 24000.0))
    assert isinstance(dx, np.ndarray)
    np.testing.assert_array_equal(dx, np.ones((200, 3, 40)))
    assert back(Fill(24000.0, (1, 1, 1))) == (Fill(1.0, (200, 3, 40), np.float64),)
    _, back = rrule(sr.sum, x, axis=Val((0, 2)))
    assert back(Fill(3.0, (3,))) == (Fill(3.0, (200, 3, 40), np.float64),)
    assert back(ZeroTangent()) == (ZeroTangent(),)
    dy = integers((3,))
    np.testing.assert_array_equal(dense(back(Thunk(lambda: dy))[0]), sum_reference((200, 3, 40), (0, 2), False, dy))
    _, back = rrule(sr.mean, x.astype(np.float32), axis=Val((0, 2)))
    assert back(Fill(8000.0, (3,))) == (Fill(1.0, (200, 3, 40), np.float32),)


def test_sum_frule_lazy_tangents() -> None:
    x = integers((4, 5))
    _, ydot = sr.frule(sr.sum, (Fill(2.0, (4, 5)),), x, axis=Val(1))
    assert ydot == Fill(10.0, (4,), np.float64)
    _, ydot = sr.frule(sr.mean, (Fill(2.0, (4, 5)),), x)
    assert ydot == Fill(2.0, (), np.float64)
    _, ydot = sr.frule(sr.mean, (ZeroTangent(),), x)
    assert ydot == ZeroTangent()
    tangent = integers((4, 5))
    _, ydot = sr.frule(sr.sum, (Thunk(lambda: tangent),), x, axis=Val(0), keepdims=Val(True))
    np.testing.assert_array_equal(dense(ydot), tangent.sum(axis=0, keepdims=True))


def test_sum_cotangents_are_projected() -> None:
    x = integers((3, 4), "float32")
    _, back = rrule(sr.sum, x, axis=Val(1))
    dy = integers((3,), "complex128")
    (dx,) = back(dy)
    assert dense(dx).dtype == np.float32
    np.testing.assert_array_equal(dense(dx), np.broadcast_to(dy.real[:, None], (3, 4)).astype(np.float32))


def test_sum_pullback_is_fresh_and_writable() -> None:
    x = integers((5, 6))
    _, back = rrule(sr.sum, x, axis=Val(1))
    dy = integers((5,))
    (dx,) = back(dy)
    assert dense(dx).flags.writeable and dense(dx).flags.c_contiguous and not np.shares_memory(dense(dx), dy)


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize(("x_shape", "axis"), [((11, 7, 9), (0, 2)), ((13, 40), (1,)), ((9, 3, 8), (1,))])
def test_sum_threads_match_serial(monkeypatch: pytest.MonkeyPatch, threads: str, x_shape: tuple[int, ...], axis: tuple[int, ...]) -> None:
    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 16)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", threads)
    x = integers(x_shape)
    for op, count in ((sr.sum, 1), (sr.mean, int(np.prod([x_shape[a] for a in axis])))):
        y, back = rrule(op, x, axis=Val(axis))
        dy = integers(y.shape)
        np.testing.assert_array_equal(dense(back(dy)[0]), sum_reference(x_shape, axis, False, dy, count))


# ---------------------------------------------------------------------------- shared promises


def test_tangent_arity_follows_positional_arguments() -> None:
    x = integers((2, 3))
    assert len(rrule(sr.broadcast_to, x, Val((4, 2, 3)))[1](np.ones((4, 2, 3)))) == 2
    assert len(rrule(sr.broadcast_to, x, shape=Val((4, 2, 3)))[1](np.ones((4, 2, 3)))) == 1
    assert rrule(sr.sum, x, Val(0), Val(True))[1](np.ones((1, 3)))[1:] == (NoTangent(), NoTangent())
    assert len(rrule(sr.mean, x)[1](1.0)) == 1


def test_validation_comes_first_and_names_the_arguments() -> None:
    before = sr.cache_info().compiles
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"x of shape \(2, 3\) cannot be broadcast to shape \(4, 2\)"):
        sr.broadcast_to(x, Val((4, 2)))
    with pytest.raises(ValueError, match=r"more dimensions than the target shape \(3,\)"):
        sr.rrule(sr.broadcast_to, x, Val((3,)))
    with pytest.raises(ValueError, match="negative extent"):
        sr.broadcast_to(x, Val((-1, 3)))
    with pytest.raises(TypeError, match="'shape' must be Val"):
        sr.broadcast_to(x, Val(True))
    with pytest.raises(ValueError, match=r"axis 2 is out of bounds for x of shape \(2, 3\)"):
        sr.sum(x, Val(2))
    with pytest.raises(ValueError, match="duplicate value in axis"):
        sr.mean(x, Val((0, -2)))
    sr.sum(x, Val(0), Val(True))
    with pytest.raises(TypeError, match="'keepdims' must be Val\\(True\\) or Val\\(False\\)"):
        sr.sum(x, Val(0), Val(1))  # type: ignore[arg-type, type-var]  # not Val(True)'s plan: 1 is not a flag
    with pytest.raises(TypeError, match="'axis' must be Val"):
        sr.sum(x, Val(False))
    with pytest.raises(TypeError, match="'x' must be an array"):
        sr.sum("abc")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="dtype"):
        sr.broadcast_to(np.array(["a"]), Val((2, 1)))
    assert sr.cache_info().compiles == before
    _, back = rrule(sr.broadcast_to, x[:1], Val((4, 2, 3)))
    compiles = sr.cache_info().compiles
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4, 2, 3\)"):
        back(np.ones((4, 3)))
    _, back = rrule(sr.sum, x, Val(1))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        back(np.ones(3))
    with pytest.raises(ValueError, match=r"one entry per positional argument"):
        sr.frule(sr.sum, (np.ones((2, 3)),), x, Val(1))  # type: ignore[arg-type, type-var]
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        sr.frule(sr.mean, (np.ones((3, 2)),), x)
    assert sr.cache_info().compiles == compiles


def test_plain_static_arguments_count_as_dynamic() -> None:
    x = integers((2, 3))
    dynamic = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.broadcast_to(x, (4, 2, 3)), np.broadcast_to(x, (4, 2, 3)))
    np.testing.assert_array_equal(sr.sum(x, 1, True), np.sum(x, 1, keepdims=True))
    np.testing.assert_array_equal(sr.mean(x, (0, 1)), np.mean(x))
    assert sr.cache_info().dynamic_arguments == dynamic + 4
    sr.sum(x, 1, True)
    assert sr.cache_info().dynamic_arguments == dynamic + 6  # counted on every call
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError, match="keepdims"):
        sr.sum(x, Val(1), True)
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError, match="shape"):
        sr.rrule(sr.broadcast_to, x, (4, 2, 3))


def test_second_call_compiles_nothing() -> None:
    x = integers((1, 3, 1))
    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (sr.broadcast_to, (x, Val((2, 3, 4)))),
        (sr.sum, (integers((2, 3, 4)), Val((0, 2)))),
        (sr.mean, (integers((2, 3, 4)), Val(1), Val(True))),
    ]
    for op, args in calls:
        y, back = _rrule(op, *args)
        back(np.ones(np.shape(y)))
        with sr.no_compile(), sr.no_fallback():
            y, back = _rrule(op, *args)
            back(np.ones(np.shape(y)))
            _frule(op, (np.ones(args[0].shape),) + (NoTangent(),) * (len(args) - 1), *args)


def test_patterns_share_kernels_across_shapes() -> None:
    sr.rrule(sr.broadcast_to, integers((1, 3)), Val((2, 3)))[1](np.ones((2, 3)))
    compiles = sr.cache_info().compiles
    for x_shape, shape in (((1, 5), (7, 5)), ((4, 1, 5), (3, 4, 1, 5)), ((1, 1, 2), (3, 4, 2))):
        _, back = rrule(sr.broadcast_to, integers(x_shape), Val(shape))
        back(np.ones(shape))
    assert sr.cache_info().compiles == compiles


def test_precompile_and_explain_with_specs() -> None:
    spec = sr.ArraySpec((1, 64, 1, 56), np.float32)
    signatures = sr.precompile(sr.broadcast_to, spec, Val((32, 64, 56, 56)))
    assert [signature.kind for signature in signatures] == ["reduce"]
    text = sr.explain(sr.broadcast_to, spec, Val((32, 64, 56, 56)))
    assert "out[j] += row[j]" in text and "'rkrk'" in text
    text = sr.explain(sr.mean, sr.ArraySpec((200, 3, 40), np.float64), Val((0, 2)))
    assert "out[j] = value" in text and "divisor" in text
    assert sr.explain(sr.sum, sr.ArraySpec((3, 4), np.float64)) == ""  # a one-element cotangent: a Fill
    assert sr.precompile(sr.sum, sr.ArraySpec((3, 4), np.int32), Val(0)) == ()


def test_pullback_without_forward_takes_specs() -> None:
    from stablerules._registry import PULLBACK_BUILDERS

    builder: Callable[..., Any] = PULLBACK_BUILDERS.lookup(sr.broadcast_to)
    back = builder(sr.ArraySpec((1, 3, 1), np.float32), Val((4, 3, 5)))
    dy = integers((4, 3, 5), "float32")
    dx, static = back(dy)
    assert static == NoTangent()
    np.testing.assert_array_equal(dense(dx), broadcast_reference((1, 3, 1), dy))
    builder = cast(Callable[..., Any], PULLBACK_BUILDERS.lookup(sr.mean))
    back = builder(sr.ArraySpec((4, 6), np.float64), axis=Val(1))
    dy = integers((4,))
    np.testing.assert_array_equal(dense(back(dy)[0]), sum_reference((4, 6), (1,), False, dy, 6))


def test_too_many_groups_is_a_value_error() -> None:
    shape = (2, 1) * 9
    with pytest.raises(ValueError, match="at most 16"):
        sr.rrule(sr.broadcast_to, np.ones(shape), Val((2, 3) * 9))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_broadcasts_and_sums(data: st.DataObject) -> None:
    ndim = data.draw(st.integers(0, 5))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    x_shape = tuple(1 if data.draw(st.booleans()) else extent for extent in shape)
    target = lead + shape
    x = integers(x_shape)
    y, back = rrule(sr.broadcast_to, x, shape=Val(target))
    np.testing.assert_array_equal(y, np.broadcast_to(x, target))
    dy = integers(target)
    np.testing.assert_array_equal(np.asarray(back(dy)[0]), broadcast_reference(x_shape, dy))
    axes = tuple(axis for axis in range(len(target)) if data.draw(st.booleans()))
    keepdims = data.draw(st.booleans())
    z = integers(target)
    y, back = rrule(sr.sum, z, axis=Val(axes), keepdims=Val(keepdims))
    np.testing.assert_array_equal(y, np.sum(z, axis=axes, keepdims=keepdims))
    dy = integers(y.shape)
    np.testing.assert_array_equal(np.asarray(back(dy)[0]), sum_reference(target, axes, keepdims, dy))


def test_fill_pullbacks_are_o1_whatever_the_size() -> None:
    """A 3e9-element x (never allocated: the pullback is built from an ArraySpec): the pullback
    of a Fill, or of a full sum's scalar, is a Fill, in microseconds."""
    from stablerules._registry import PULLBACK_BUILDERS

    builder: Callable[..., Any] = PULLBACK_BUILDERS.lookup(sr.sum)
    huge = sr.ArraySpec((100_000, 3, 10_000), np.float64)
    back = builder(huge, axis=Val((0, 2)))
    assert back(Fill(2.0, (3,))) == (Fill(2.0, huge.shape, np.float64),)
    assert builder(huge)(np.asarray(1.5)) == (Fill(1.5, huge.shape, np.float64),)
    back_mean = cast(Callable[..., Any], PULLBACK_BUILDERS.lookup(sr.mean))(huge, Val((0, 2)))
    assert back_mean(Fill(1e9, (3,))) == (Fill(1.0, huge.shape, np.float64), NoTangent())


# ---------------------------------------------------------------- the reduction's row tiles

# Shapes whose last two groups are a reduced run of rows then a kept row (``...rk``): the
# reduction sums rows four at a time, so row counts around multiples of four (and fewer than
# four), with and without groups outside, and with the rows themselves split across threads.
TILE_CASES = [
    ((1, 5), (rows, 5)) for rows in (1, 2, 3, 4, 5, 7, 8, 9)
] + [
    ((1, 3, 1, 6), (2, 3, rows, 6)) for rows in (1, 3, 4, 6, 9)
] + [
    ((4, 1, 7), (4, rows, 7)) for rows in (2, 5, 8)
]


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize(("x_shape", "shape"), TILE_CASES)
def test_broadcast_to_row_tiles_match_the_reference(
    monkeypatch: pytest.MonkeyPatch, threads: str, dtype: str, x_shape: tuple[int, ...], shape: tuple[int, ...]
) -> None:
    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", threads)
    x = integers(x_shape, dtype)
    _, back = rrule(sr.broadcast_to, x, shape=Val(shape))
    dy = integers(shape, dtype)
    (dx,) = back(dy)
    got = dense(dx)
    assert got.dtype == np.dtype(dtype) and got.shape == x_shape
    np.testing.assert_array_equal(got, broadcast_reference(x_shape, dy))


def test_broadcast_to_row_tiles_accumulate_wide() -> None:
    # Rows of float32 2**24 and 1: a float32 sum of a tile's rows would round each 1 away.
    rows = 4 * 1024
    dy = np.ones((rows, 3), np.float32)
    dy[0] = 2.0**24
    _, back = rrule(sr.broadcast_to, np.ones((1, 3), np.float32), shape=Val((rows, 3)))
    (dx,) = back(dy)
    np.testing.assert_array_equal(dense(dx), np.full((1, 3), 2.0**24 + rows - 1, np.float32))


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from collections.abc import Sequence  # noqa: E402

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402


def _stretched(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A new leading axis and every 1 stretched to 4: ``(3, 1) -> (2, 3, 4)``."""
    return (2,) + tuple(4 if extent == 1 else extent for extent in shape)


def _sum_adjoint(xs: Sequence[Array], dy: Array) -> list[Array]:
    """``sum(x, axis=1)``'s adjoint: ``dy`` broadcast back along axis 1."""
    return [np.broadcast_to(np.expand_dims(dy, 1), xs[0].shape)]


ROBUSTNESS = [
    Case(
        "broadcast_to",
        sr.broadcast_to,
        lambda xs: ((xs[0], Val(_stretched(xs[0].shape))), {}),
        lambda xs: np.broadcast_to(xs[0], _stretched(xs[0].shape)),
        ((3, 1),),
        ((0, 1),),
        ((),),
    ),
    Case(
        "sum",
        sr.sum,
        lambda xs: ((xs[0], Val(1)), {}),
        lambda xs: np.sum(xs[0], axis=1),
        ((3, 4),),
        ((0, 4),),
        adjoint=_sum_adjoint,
    ),
]


def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase("broadcast_to", lambda x: srt.broadcast_to(x, Val((2, 3, 4))), lambda x: np.broadcast_to(x, (2, 3, 4)), ((3, 1),)),
        TorchCase("sum-axis", lambda x: srt.sum(x, Val(1)), lambda x: np.sum(x, axis=1), ((2, 3, 2),)),
        TorchCase("sum-all", lambda x: srt.sum(x), lambda x: np.asarray(np.sum(x)), ((2, 3),)),
        TorchCase(
            "sum-keepdims", lambda x: srt.sum(x, Val((0, 2)), Val(True)), lambda x: np.sum(x, axis=(0, 2), keepdims=True), ((2, 3, 2),)
        ),
        TorchCase("mean", lambda x: srt.mean(x, Val(-1)), lambda x: np.mean(x, axis=-1), ((2, 3),)),
        TorchCase("mean-all-keepdims", lambda x: srt.mean(x, keepdims=Val(True)), lambda x: np.mean(x, keepdims=True), ((2, 3),)),
    ]


def jax_structure(rand: Callable[..., Any]) -> list[ArrayCase]:
    import stablerules.jax as srj

    return [
        ("broadcast_to", lambda x: srj.broadcast_to(x, Val((2, 3, 4))), (rand(3, 1),), lambda x: np.broadcast_to(x, (2, 3, 4))),
        ("sum axis", lambda x: srj.sum(x, Val(1)), (rand(2, 3, 2),), lambda x: np.sum(x, axis=1)),
        ("sum all", lambda x: srj.sum(x), (rand(2, 3),), np.sum),
        ("sum keepdims", lambda x: srj.sum(x, Val((0, 2)), Val(True)), (rand(2, 3, 2),), lambda x: np.sum(x, axis=(0, 2), keepdims=True)),
        ("mean", lambda x: srj.mean(x, Val(-1)), (rand(2, 3),), lambda x: np.mean(x, axis=-1)),
        ("mean all keepdims", lambda x: srj.mean(x, keepdims=Val(True)), (rand(2, 3),), lambda x: np.mean(x, keepdims=True)),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("broadcast_to", lambda x: srj.broadcast_to(x, Val((2, 3, 4)))),
        ("sum", lambda x: srj.sum(x, Val(0))),
        ("mean", lambda x: srj.mean(x)),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        ("broadcast_to", lambda x: sra.broadcast_to(x, Val((2, 3, 4))), (rand(3, 1),), lambda x: x * anp.ones((2, 3, 4))),
        ("sum axis", lambda x: sra.sum(x, Val(1)), (rand(2, 3, 2),), lambda x: anp.sum(x, axis=1)),
        ("sum all", lambda x: sra.sum(x), (rand(2, 3),), lambda x: anp.sum(x)),
        ("sum keepdims", lambda x: sra.sum(x, Val((0, 2)), Val(True)), (rand(2, 3, 2),), lambda x: anp.sum(x, axis=(0, 2), keepdims=True)),
        ("mean", lambda x: sra.mean(x, Val(-1), keepdims=Val(False)), (rand(2, 3),), lambda x: anp.mean(x, axis=-1)),
        ("mean all keepdims", lambda x: sra.mean(x, keepdims=Val(True)), (rand(2, 3),), lambda x: anp.mean(x, keepdims=True)),
    ]


@pytest.mark.parametrize(
    ("op", "static"), [(sr.sum, Val(())), (sr.mean, Val(())), (sr.broadcast_to, Val((2, 3)))], ids=["sum", "mean", "broadcast_to"]
)
def test_a_pullback_that_reduces_nothing_gives_a_writable_tangent_for_a_read_only_cotangent(op: Any, static: Any) -> None:
    """On main: dx was dy itself, read-only, where the README promises dense writable tangents."""
    y, back = sr.rrule(op, np.ones((2, 3)), static)
    dy = np.arange(6.0).reshape(2, 3)
    dy.flags.writeable = False
    dx = back(dy)[0]
    assert dx.flags.writeable and not np.shares_memory(dx, dy)
    np.testing.assert_array_equal(dx, dy)
    writable = np.arange(6.0).reshape(2, 3)
    assert np.shares_memory(back(writable)[0], writable)  # a writable dy is still a view: no copy
