"""The pad family: ``pad`` (constant mode) and ``split``.

Forwards are compared with ``np.pad`` and ``np.split`` exactly; pullbacks with independent
NumPy references (the interior slice of ``dy`` and the sum of the rest for ``pad``; the parts
concatenated, or added with ``np.add.at`` where they overlap, for ``split``) and with central
finite differences through ``stablerules.testing``.
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
from stablerules.testing import test_frule, test_rrule
from tests import references
from tests.references import dense

Array = npt.NDArray[Any]
RNG = np.random.default_rng(77)
FLOATING = ["float32", "float64", "complex64", "complex128"]

# Rule calls on arrays of run-time dtypes (typed Array, of Any) go through these untyped names, so
# that mypy does not try each of the rules' thousands of overloads on every such call (the result
# would be Any all the same); calls on arrays of a declared dtype keep the overloads.
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule


def integers(shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    return references.small_integers(RNG, shape, dtype)


def pairs(widths: tuple[int, ...], ndim: int) -> list[tuple[int, int]]:
    if len(widths) == 1:
        return [(widths[0], widths[0])] * ndim
    return [(widths[2 * axis], widths[2 * axis + 1]) for axis in range(ndim)]


def numpy_pad(x: Array, widths: tuple[int, ...], constant: object = 0) -> Array:
    """``np.pad`` with our ``pad_width`` form (NumPy needs integer pairs, none for a 0-d x)."""
    width_pairs = pairs(widths, x.ndim) if x.ndim else 0
    padded: Array = np.pad(x, width_pairs, constant_values=constant)  # type: ignore[call-overload]
    return padded


# ---------------------------------------------------------------------------------------- pad

PAD_CASES: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((3, 4), (1, 2, 0, 3)),
    ((3, 4), (2,)),
    ((5,), (0, 4)),
    ((2, 3, 4), (1, 0, 0, 2, 3, 1)),
    ((2, 3), (0,)),
    ((0, 3), (1, 1, 2, 0)),
    ((), ()),
    ((), (3,)),
]


@pytest.mark.parametrize(("shape", "widths"), PAD_CASES)
@pytest.mark.parametrize("dtype", FLOATING)
def test_pad_forward_and_pullback(shape: tuple[int, ...], widths: tuple[int, ...], dtype: str) -> None:
    x = integers(shape, dtype)
    width_pairs = pairs(widths, len(shape))
    expected = numpy_pad(x, widths, 2.5)
    y, back = _rrule(sr.pad, x, Val(widths), 2.5)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(sr.pad(x, Val(widths)), numpy_pad(x, widths))
    dy = integers(y.shape, dtype)
    dx, static, dc = back(dy)
    interior = tuple(slice(before, before + extent) for extent, (before, _) in zip(shape, width_pairs)) or (Ellipsis,)
    np.testing.assert_array_equal(dense(dx), dy[interior])
    assert dense(dx).dtype == np.dtype(dtype) and np.shares_memory(dense(dx), dy) or dense(dx).size == 0
    assert static == NoTangent()
    mask = np.ones(y.shape, bool)
    mask[interior] = False
    border = dy[mask].sum() if dy.size else 0.0
    constant = dense(dc)
    assert constant.shape == () and constant.dtype == np.float64
    assert constant == (border.real if np.iscomplexobj(border) else border)


@pytest.mark.parametrize(
    "constant", [0, 7, -1, 2.7, np.float32(1.5), np.array(3.0), np.int16(-4), True], ids=repr
)
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32", "complex64", "bool"])
def test_pad_converts_the_constant_as_numpy(constant: Any, dtype: str) -> None:
    x = integers((2, 3), dtype)
    with np.errstate(over="ignore"):
        expected = np.pad(x, ((1, 0), (2, 1)), constant_values=constant)
    got = sr.pad(x, Val((1, 0, 2, 1)), constant)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_pad_rules_against_finite_differences() -> None:
    x = RNG.standard_normal((3, 4))
    test_rrule(sr.pad, x, Val((1, 2, 0, 1)))
    test_frule(sr.pad, x, Val((1, 2, 0, 1)))
    test_rrule(sr.pad, x, Val(2), 1.5)
    test_frule(sr.pad, x, Val(2), 1.5)
    test_rrule(sr.pad, x.astype(np.complex64), Val((1, 0, 2, 1)), np.float32(0.5))
    test_frule(sr.pad, x.astype(np.complex128), Val((0, 1, 1, 0)), 0.5 + 1j)
    test_rrule(sr.pad, x.astype(np.float32), Val(1), constant_values=3.0)
    test_frule(sr.pad, x.astype(np.float32), pad_width=Val(1))


def test_pad_constant_tangent_kinds() -> None:
    x = integers((2, 2))
    dy = integers((4, 4))
    assert _rrule(sr.pad, x, Val(1), 3)[1](dy)[2] == NoTangent()  # a Python int
    assert _rrule(sr.pad, x, Val(1), np.int64(3))[1](dy)[2] == NoTangent()
    dc = dense(_rrule(sr.pad, x, Val(1), np.float32(3))[1](dy)[2])
    assert dc.dtype == np.float32 and dc == dy.sum() - dy[1:3, 1:3].sum()
    dc = dense(sr.rrule(sr.pad, x.astype(np.complex128), Val(1), 1j)[1](dy.astype(np.complex128))[2])
    assert dc.dtype == np.complex128
    assert sr.rrule(sr.pad, x.astype(np.int32), Val(1), 2.5)[1](dy) == (NoTangent(),) * 3
    # a keyword constant gets no entry
    assert len(_rrule(sr.pad, x, Val(1), constant_values=2.5)[1](dy)) == 2


def test_pad_lazy_cotangents_and_tangents() -> None:
    x = integers((2, 3))
    _, back = _rrule(sr.pad, x, Val(1), 0.5)
    assert back(Fill(2.0, (4, 5)))[0] == Fill(2.0, (2, 3), np.float64)
    assert dense(back(Fill(2.0, (4, 5)))[2]) == 2.0 * (20 - 6)
    assert back(ZeroTangent()) == (ZeroTangent(), NoTangent(), ZeroTangent())
    dy = integers((4, 5))
    np.testing.assert_array_equal(dense(back(Thunk(lambda: dy))[0]), dy[1:3, 1:4])
    _, ydot = _frule(sr.pad, (ZeroTangent(), NoTangent()), x, Val(1))
    assert ydot == ZeroTangent()
    _, ydot = _frule(sr.pad, (Fill(1.5, (2, 3)), NoTangent(), 1.5), x, Val(1), 0.5)
    assert ydot == Fill(1.5, (4, 5), np.float64)
    _, ydot = _frule(sr.pad, (Fill(1.5, (2, 3)), NoTangent()), x, Val(1))
    expected = np.pad(np.full((2, 3), 1.5), 1)
    np.testing.assert_array_equal(dense(ydot), expected)
    _, ydot = _frule(sr.pad, (ZeroTangent(), NoTangent(), 2.0), x, Val(1), 0.5)
    np.testing.assert_array_equal(dense(ydot), np.pad(np.zeros((2, 3)), 1, constant_values=2.0))


def test_pad_validation() -> None:
    x = np.ones((2, 3))
    compiles = sr.cache_info().compiles
    with pytest.raises(ValueError, match=r"2 \* ndim = 4 ints.*shape \(2, 3\), got 3 ints"):
        sr.pad(x, Val((1, 2, 3)))
    with pytest.raises(ValueError, match="negative width"):
        sr.pad(x, Val(-1))
    with pytest.raises(TypeError, match="complex but x has dtype float64"):
        sr.pad(x, Val(1), 1j)
    with pytest.raises(ValueError, match="must be a scalar"):
        sr.pad(x, Val(1), np.ones(2))
    with pytest.raises(TypeError, match="must be a scalar"):
        sr.pad(x, Val(1), "a")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="'pad_width' must be Val"):
        sr.pad(x, Val(True))
    _, back = sr.rrule(sr.pad, x, Val(1))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
        back(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(2, 3\)"):
        sr.frule(sr.pad, (np.ones((4, 5)), NoTangent()), x, Val(1))
    assert sr.cache_info().compiles == compiles


# -------------------------------------------------------------------------------------- split

SPLIT_CASES: list[tuple[tuple[int, ...], int | tuple[int, ...], int]] = [
    ((6, 4), 3, 0),
    ((6, 4), 2, 1),
    ((6, 4), 2, -1),
    ((10,), (3, 7), 0),
    ((10,), (3, 1, -2, 20), 0),
    ((4, 9, 2), (2, 2, 5), 1),
    ((4, 3), (), 0),
    ((0, 3), 2, 0),
    ((5, 2), (0, 5), 0),
]


def _split_reference_pullback(x_shape: tuple[int, ...], indices: int | tuple[int, ...], axis: int, dys: list[Array]) -> Array:
    """``np.add.at`` of every part's cotangent at the positions ``np.split`` took it from."""
    positions = np.arange(int(np.prod(x_shape)), dtype=np.int64).reshape(x_shape)
    total = np.zeros(int(np.prod(x_shape)), dtype=dys[0].dtype if dys else np.float64)
    for part, dy in zip(np.split(positions, indices, axis=axis), dys):
        np.add.at(total, part.reshape(-1), dy.reshape(-1))
    return total.reshape(x_shape)


@pytest.mark.parametrize(("shape", "indices", "axis"), SPLIT_CASES)
@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_split_forward_and_pullback(shape: tuple[int, ...], indices: int | tuple[int, ...], axis: int, dtype: str) -> None:
    x = integers(shape, dtype)
    expected = np.split(x, indices, axis=axis)
    static: Val[int] | Val[tuple[int, ...]] = Val(indices) if isinstance(indices, int) else Val(indices)
    parts, back = _rrule(sr.split, x, static, Val(axis))
    assert isinstance(parts, tuple) and len(parts) == len(expected)
    for got, want in zip(parts, expected):
        assert got.dtype == want.dtype and got.shape == want.shape and np.shares_memory(got, x) or got.size == 0
        np.testing.assert_array_equal(got, want)
    dys = [integers(part.shape, dtype) for part in parts]
    dx, *rest = back(tuple(dys))
    assert rest == [NoTangent(), NoTangent()]
    np.testing.assert_array_equal(dense(dx), _split_reference_pullback(shape, indices, axis, dys))
    assert dense(dx).dtype == np.dtype(dtype)


def test_split_rules_against_finite_differences() -> None:
    x = RNG.standard_normal((6, 4))
    test_rrule(sr.split, x, Val(3))
    test_frule(sr.split, x, Val(3))
    test_rrule(sr.split, x, Val((1, 3)), Val(1))
    test_frule(sr.split, x.astype(np.complex64), Val((1, 3)), axis=Val(1))
    test_rrule(sr.split, np.arange(10.0), Val((3, 1, -2, 20)))
    test_frule(sr.split, np.arange(10.0), indices_or_sections=Val((3, 1, -2, 20)))


def test_split_pullback_takes_zero_fill_and_thunk_parts() -> None:
    x = integers((6, 4))
    _, back = _rrule(sr.split, x, Val(3))
    da = integers((2, 4))
    dx, _ = back((da, ZeroTangent(), Fill(2.0, (2, 4))))
    np.testing.assert_array_equal(dense(dx), np.concatenate([da, np.zeros((2, 4)), np.full((2, 4), 2.0)]))
    assert back((Fill(2.0, (2, 4)),) * 3) == (Fill(2.0, (6, 4), np.float64), NoTangent())
    assert back((ZeroTangent(),) * 3) == (ZeroTangent(), NoTangent())
    assert back(ZeroTangent()) == (ZeroTangent(), NoTangent())
    assert back(Thunk(lambda: (ZeroTangent(),) * 3)) == (ZeroTangent(), NoTangent())
    dx, _ = back([Thunk(lambda: da), da, da])
    np.testing.assert_array_equal(dense(dx), np.concatenate([da] * 3))
    # Fills of different values are dense
    dx, _ = back((Fill(1.0, (2, 4)), Fill(2.0, (2, 4)), ZeroTangent()))
    np.testing.assert_array_equal(dense(dx), np.concatenate([np.ones((2, 4)), np.full((2, 4), 2.0), np.zeros((2, 4))]))
    # overlapping parts add; their Fills do not make a Fill
    _, back = sr.rrule(sr.split, np.arange(10.0), Val((3, 1)))
    dx, _ = back((Fill(1.0, (3,)), Fill(1.0, (0,)), Fill(1.0, (9,))))
    np.testing.assert_array_equal(dense(dx), [1, 2, 2] + [1] * 7)


def test_split_frule_lazy_tangents() -> None:
    x = integers((6, 4))
    _, parts = _frule(sr.split, (Fill(1.0, (6, 4)), NoTangent()), x, Val(2))
    assert parts == (Fill(1.0, (3, 4), np.float64),) * 2
    _, parts = _frule(sr.split, (ZeroTangent(), NoTangent()), x, Val(2))
    assert parts == ZeroTangent()
    _, parts = sr.frule(sr.split, (NoTangent(), NoTangent()), x.astype(np.int32), Val(2))
    assert parts == NoTangent()
    tangent = integers((6, 4))
    _, parts = _frule(sr.split, (tangent, NoTangent()), x, Val(2))
    assert isinstance(parts, tuple) and all(np.shares_memory(dense(part), tangent) for part in parts)


def test_split_integer_input() -> None:
    x = integers((6, 4), "int32")
    parts, back = _rrule(sr.split, x, Val(2))
    assert all(part.dtype == np.int32 for part in parts)
    result: object = back((np.ones((3, 4)), ZeroTangent()))
    assert result == (NoTangent(), NoTangent())
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(3, 4\)"):
        back((np.ones((2, 4)), ZeroTangent()))


def test_split_validation() -> None:
    x = np.ones((6, 4))
    compiles = sr.cache_info().compiles
    with pytest.raises(ValueError, match=r"6 elements along axis 0, which 4 sections do not divide"):
        sr.split(x, Val(4))
    with pytest.raises(ValueError, match="sections must be positive"):
        sr.split(x, Val(0))
    with pytest.raises(ValueError, match="0-d array cannot be split"):
        sr.split(np.ones(()), Val(1))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        sr.split(x, Val(2), Val(2))
    _, back = sr.rrule(sr.split, x, Val(2))
    with pytest.raises(ValueError, match=r"split has 2 outputs, so dy must be a tuple of 2 cotangents, got 3 entries"):
        back((np.ones((3, 4)),) * 3)
    with pytest.raises(ValueError, match="dy must be a tuple of 2 cotangents, got ndarray"):
        back(np.ones((6, 4)))
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(3, 4\)"):
        back((np.ones((3, 4)), np.ones((4, 4))))
    assert sr.cache_info().compiles == compiles


def test_plain_static_arguments_count_as_dynamic() -> None:
    x = integers((6, 4))
    dynamic = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.pad(x, 1), np.pad(x, 1))
    np.testing.assert_array_equal(sr.pad(x, (1, 0, 0, 2)), np.pad(x, ((1, 0), (0, 2))))
    assert [part.shape for part in sr.split(x, 2, 1)] == [(6, 2), (6, 2)]
    assert [part.shape for part in sr.split(x, (1, 4))] == [(1, 4), (3, 4), (2, 4)]
    assert sr.cache_info().dynamic_arguments == dynamic + 5
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError, match="pad_width"):
        sr.pad(x, 1)
    with sr.no_fallback():
        sr.pad(x, Val(1), 3.0)  # the constant is data, never a dynamic static argument
        sr.split(x, Val(2), Val(1))


def test_no_kernels_to_compile_or_explain() -> None:
    spec = sr.ArraySpec((3, 4), np.float32)
    assert sr.precompile(sr.pad, spec, Val(1)) == ()
    assert sr.explain(sr.split, spec, Val(2), Val(1)) == ""
    with pytest.raises(ValueError, match="do not divide"):
        sr.precompile(sr.split, spec, Val(3), Val(1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_pads_and_splits(data: st.DataObject) -> None:
    ndim = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    widths = tuple(data.draw(st.lists(st.integers(0, 3), min_size=2 * ndim, max_size=2 * ndim)))
    x = integers(shape)
    y, back = _rrule(sr.pad, x, Val(widths), 1.0)
    np.testing.assert_array_equal(y, numpy_pad(x, widths, 1.0))
    dy = integers(y.shape)
    interior = tuple(slice(before, before + extent) for extent, (before, _) in zip(shape, pairs(widths, ndim))) or (Ellipsis,)
    np.testing.assert_array_equal(dense(back(dy)[0]), dy[interior])
    axis = data.draw(st.integers(-ndim, ndim - 1))
    indices = tuple(data.draw(st.lists(st.integers(-6, 8), max_size=4)))
    parts, split_back = _rrule(sr.split, x, Val(indices), axis=Val(axis))
    expected = np.split(x, indices, axis=axis)
    assert [part.shape for part in parts] == [part.shape for part in expected]
    dys = [integers(part.shape) for part in parts]
    np.testing.assert_array_equal(dense(split_back(tuple(dys))[0]), _split_reference_pullback(shape, indices, axis, dys))


def test_pullbacks_without_forward_take_specs() -> None:
    from stablerules._registry import PULLBACK_BUILDERS

    builder: Callable[..., Any] = PULLBACK_BUILDERS.lookup(sr.pad)
    back = builder(sr.ArraySpec((2, 3), np.float32), Val(1))
    dy = integers((4, 5), "float32")
    dx, static = back(dy)
    assert static == NoTangent()
    np.testing.assert_array_equal(dense(dx), dy[1:3, 1:4])
    builder = cast(Callable[..., Any], PULLBACK_BUILDERS.lookup(sr.split))
    back = builder(sr.ArraySpec((6, 4), np.float64), Val(2), axis=Val(1))
    parts = (integers((6, 2)), ZeroTangent())
    (dx, _) = back(parts)
    np.testing.assert_array_equal(dense(dx), np.concatenate([parts[0], np.zeros((6, 2))], axis=1))


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402

ROBUSTNESS = [
    Case(
        "pad",
        sr.pad,
        lambda xs: ((xs[0], Val((1, 0, 2, 1))), {}),
        lambda xs: np.pad(xs[0], ((1, 0), (2, 1))),
        ((3, 4),),
        ((0, 4),),
    ),
]


def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase("pad", lambda x: srt.pad(x, Val((1, 0, 2, 1))), lambda x: np.pad(x, ((1, 0), (2, 1))), ((2, 3),)),
        TorchCase("pad-constant", lambda x: srt.pad(x, Val(1), 2.5), lambda x: np.pad(x, 1, constant_values=2.5), ((2, 3),)),
        TorchCase("split", lambda x: srt.split(x, Val(3), axis=Val(1)), lambda x: tuple(np.split(x, 3, axis=1)), ((2, 6),)),
        TorchCase("split-indices", lambda x: srt.split(x, Val((1, 3))), lambda x: tuple(np.split(x, (1, 3))), ((5, 2),)),
        TorchCase("split-one", lambda x: srt.split(x, Val(1)), lambda x: tuple(np.split(x, 1)), ((3,),)),
    ]


def jax_structure(rand: Callable[..., Any]) -> list[ArrayCase]:
    import stablerules.jax as srj

    return [
        ("pad", lambda x: srj.pad(x, Val((1, 0, 2, 1))), (rand(2, 3),), lambda x: np.pad(x, ((1, 0), (2, 1)))),
        ("pad constant", lambda x: srj.pad(x, Val(1), 2.5), (rand(2, 3),), lambda x: np.pad(x, 1, constant_values=2.5)),
        (
            "pad traced constant",
            lambda x, c: srj.pad(x, Val((0, 2)), c),
            (rand(3), rand()),
            lambda x, c: np.pad(x, (0, 2), constant_values=c),
        ),
        ("split", lambda x: srj.split(x, Val(3), axis=Val(1)), (rand(2, 6),), lambda x: tuple(np.split(x, 3, axis=1))),
        ("split indices", lambda x: srj.split(x, Val((1, 3))), (rand(5, 2),), lambda x: tuple(np.split(x, (1, 3)))),
        ("split one part", lambda x: srj.split(x, Val(1)), (rand(3),), lambda x: tuple(np.split(x, 1))),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("pad", lambda x: srj.pad(x, Val(1))),
        ("split", lambda x: srj.split(x, Val(2), axis=Val(1))),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        ("pad", lambda x: sra.pad(x, Val((1, 0, 2, 1))), (rand(2, 3),), lambda x: anp.pad(x, ((1, 0), (2, 1)), "constant")),
        (
            "pad nonzero constant (affine)",
            lambda x: sra.pad(x, Val(1), constant_values=2.5),
            (rand(2, 3),),
            lambda x: anp.pad(x, 1, "constant", constant_values=2.5),
        ),
        (
            "pad positional integer constant (affine)",
            lambda x: sra.pad(x, Val(2), 3),
            (rand(2),),
            lambda x: anp.pad(x, 2, "constant", constant_values=3),
        ),
        ("pad differentiable constant", lambda x, c: sra.pad(x, Val(1), c), (rand(2, 2), rand()), None),
        ("pad complex", lambda x: sra.pad(x, Val(1), constant_values=1j), (rand(2, complex_=True),), None),
        # split's parts weighted differently, so that each part's cotangent matters
        (
            "split sections",
            lambda x: anp.concatenate([p * (i + 1) for i, p in enumerate(sra.split(x, Val(3), axis=Val(1)))], axis=1),
            (rand(2, 6),),
            lambda x: anp.concatenate([p * (i + 1) for i, p in enumerate(anp.split(x, 3, axis=1))], axis=1),
        ),
        (
            "split indices, one part unused",
            lambda x: anp.multiply(sra.split(x, Val((1, 3)))[2], 2.0),
            (rand(5, 2),),
            lambda x: anp.multiply(x[3:], 2.0),
        ),
        ("split one part", lambda x: sra.split(x, Val(1))[0], (rand(3),), lambda x: x * 1.0),
    ]
