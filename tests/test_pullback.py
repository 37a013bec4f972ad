"""``sr.pullback`` (SPEC section 8, last bullet): the rrule's pullback without the primal.

Library ops without a registered pullback builder fall back to their rrule (the forward runs,
``y`` is dropped): these tests hold for both, comparing with ``rrule``'s pullback on the same
cotangents. ArraySpec arguments are tested through a user-registered builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import ArraySpec, Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._registry import PULLBACK_BUILDERS, RRULES

F64 = npt.NDArray[np.float64]

# Calls on ops chosen at run time (typed object), and user functions given ArraySpecs (which the
# rules' overloads do not describe), go through these untyped names, so that mypy does not try
# each of the rules' thousands of overloads on every such call only to give up.
_rrule: Callable[..., Any] = sr.rrule
_pullback: Callable[..., Any] = sr.pullback


def _assert_same_tangents(actual: object, expected: object) -> None:
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for got, want in zip(actual, expected):
            _assert_same_tangents(got, want)
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray) and actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
    else:
        assert actual == expected, (actual, expected)


CASES: list[tuple[str, Callable[[], tuple[object, tuple[object, ...], dict[str, object]]]]] = [
    ("repeat", lambda: (sr.repeat, (np.arange(6.0).reshape(2, 3), Val(2)), {"axis": Val(1)})),
    ("repeat inner/outer", lambda: (sr.repeat, (np.arange(6, dtype=np.float32).reshape(2, 3),), {"inner": Val((1, 2)), "outer": Val(2)})),
    ("tile", lambda: (sr.tile, (np.arange(4.0) + 1j, Val((2, 1))), {})),
    ("concatenate", lambda: (sr.concatenate, ((np.ones((2, 2)), np.arange(6.0).reshape(2, 3)),), {"axis": Val(1)})),
    ("stack", lambda: (sr.stack, ((np.ones(3), np.arange(3.0)), Val(1)), {})),
    ("cat", lambda: (sr.cat, (np.ones((2, 2)), np.arange(3.0)), {"dims": Val((0, 1))})),
    ("kron", lambda: (sr.kron, (np.arange(6.0).reshape(2, 3), np.arange(4.0).reshape(2, 2) - 1), {})),
]


@pytest.mark.parametrize(("name", "case"), CASES, ids=[name for name, _ in CASES])
def test_pullback_equals_the_rrules_pullback(name: str, case: Callable[[], tuple[object, tuple[object, ...], dict[str, object]]]) -> None:
    op, args, kwargs = case()
    y, back = _rrule(op, *args, **kwargs)
    alone = _pullback(op, *args, **kwargs)
    rng = np.random.default_rng(0)
    dense = rng.standard_normal(y.shape).astype(y.dtype)
    for dy in (dense, Fill(2.0, y.shape, y.dtype), ZeroTangent(), Thunk(lambda: dense)):
        _assert_same_tangents(alone(dy), back(dy))
    with pytest.raises(ValueError, match="shape"):
        alone(np.ones(y.shape + (2,)))


def _double_sum(x: F64) -> np.float64:
    return np.float64(2.0 * x.sum())


def _double_sum_rrule(x: F64) -> tuple[np.float64, Callable[[object], tuple[object, ...]]]:
    return _double_sum(x), _double_sum_pullback_for(x.shape)


def _double_sum_pullback_for(shape: tuple[int, ...]) -> Callable[[object], tuple[object, ...]]:
    def double_sum_pullback(dy: object) -> tuple[object, ...]:
        dy = sr.unthunk(dy)
        if isinstance(dy, ZeroTangent):
            return (dy,)
        return (Fill(2.0 * complex(dy).real, shape),)  # type: ignore[call-overload]

    return double_sum_pullback


def _double_sum_builder(x: F64 | ArraySpec) -> Callable[[object], tuple[object, ...]]:
    builds.append(type(x).__name__)
    return _double_sum_pullback_for(tuple(x.shape))


builds: list[str] = []


@pytest.fixture
def registered() -> object:
    sr.register_rrule(_double_sum, _double_sum_rrule, pullback_builder=_double_sum_builder)
    yield _double_sum
    RRULES.unregister(_double_sum)
    PULLBACK_BUILDERS.unregister(_double_sum)


def test_a_user_builder_takes_array_specs(registered: object) -> None:
    builds.clear()
    back = _pullback(_double_sum, ArraySpec((2, 3), np.float64))
    assert back(np.float64(1.5)) == (Fill(3.0, (2, 3)),)
    assert back(ZeroTangent()) == (ZeroTangent(),)
    x = np.ones((2, 3))
    assert sr.pullback(_double_sum, x)(np.float64(1.0)) == sr.rrule(_double_sum, x)[1](np.float64(1.0))
    assert builds == ["ArraySpec", "ndarray"]  # the builder, not the rrule, served both
    # Replacing the rule without a builder drops the old builder (it would disagree).
    sr.register_rrule(_double_sum, _double_sum_rrule, replace=True)
    assert _double_sum not in PULLBACK_BUILDERS
    with pytest.raises(TypeError, match="ArraySpec.*no pullback builder"):
        _pullback(_double_sum, ArraySpec((2, 3), np.float64))


def test_without_a_builder_pullback_runs_the_rrule() -> None:
    calls: list[int] = []

    def scale(x: F64) -> F64:
        return 3.0 * x

    def scale_rrule(x: F64) -> tuple[F64, Callable[[object], tuple[object, ...]]]:
        calls.append(1)

        def scale_pullback(dy: object) -> tuple[object, ...]:
            return (3.0 * dy,)  # type: ignore[operator]

        return scale(x), scale_pullback

    sr.register_rrule(scale, scale_rrule)
    try:
        back = sr.pullback(scale, np.ones(2))
        assert calls == [1]
        np.testing.assert_array_equal(back(np.array([1.0, 2.0])), (np.array([3.0, 6.0]),))
        assert back(ZeroTangent()) == (ZeroTangent(),)
        assert back(Fill(1.0, (2,))) == (Fill(3.0, (2,)),)
        with pytest.raises(TypeError, match=r"argument 0 of .*scale is an ArraySpec"):
            _pullback(scale, ArraySpec((2,), np.float64))
    finally:
        RRULES.unregister(scale)


def test_pullback_refuses_unknown_functions_and_bad_builders() -> None:
    def unknown(x: F64) -> F64:
        return x

    with pytest.raises(TypeError, match="pullback: no rrule is registered for .*unknown"):
        sr.pullback(unknown, np.ones(2))
    with pytest.raises(TypeError, match="register_rrule: pullback_builder must be callable, got int"):
        sr.register_rrule(unknown, lambda x: (x, lambda dy: (dy,)), pullback_builder=3)  # type: ignore[arg-type]
    # The builder's former keyword is refused alike, and says it is deprecated.
    with (
        pytest.warns(DeprecationWarning, match="register_rrule: pullback= is deprecated"),
        pytest.raises(TypeError, match="register_rrule: pullback must be callable, got int"),
    ):
        sr.register_rrule(unknown, lambda x: (x, lambda dy: (dy,)), pullback=3)  # type: ignore[arg-type]
    assert unknown not in RRULES


def test_no_tangent_entries_follow_the_rrule() -> None:
    x = np.arange(3.0)
    back = sr.pullback(sr.repeat, x, Val(2), Val(0))
    dx, counts, axis = back(np.ones(6))
    np.testing.assert_array_equal(dx, np.full(3, 2.0))
    assert counts == NoTangent() and axis == NoTangent()
