"""The indexing family: ``sr.ix``, ``getindex``, ``take``, ``take_along_axis``, ``index_add``.

Forward results are compared with NumPy (``x[index]``, ``np.take``, ``np.take_along_axis``,
``np.add.at`` on a copy: values, shape and dtype); pullbacks with ``np.add.at`` on zeros (the
scatter-adds, bit for bit: both add in index order) or NumPy's own assignment ``dx[index] =
dy`` on zeros (getindex), and with central finite differences through ``stablerules.testing``:
never with the rule's own formula.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches
from stablerules.rules.indexing import GetindexPlan, TakeAlongAxisPlan, TakePlan
from stablerules.testing import test_frule as check_frule
from stablerules.testing import test_rrule as check_rrule
from tests import references
from tests.references import array_rrule as rrule, dense

Array = npt.NDArray[Any]
RNG = np.random.default_rng(25)
REPO = Path(__file__).resolve().parents[2]

# Calls on ops chosen at run time (typed Any) go through these untyped names, so that mypy does
# not try each of the rules' thousands of overloads on every such call (the result would be Any
# all the same).
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule
_pullback: Callable[..., Any] = sr.pullback


def random_array(shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    return references.random_array(RNG, shape, dtype)


def numpy_index(index: sr.StaticIndex[Any]) -> tuple[Any, ...]:
    return index.entries


# ======================================================================================
# sr.ix
# ======================================================================================


def test_ix_is_frozen_hashable_and_keyed_by_value() -> None:
    a, b = sr.ix[1:-1, ::2], sr.ix[1:-1, ::2]
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != sr.ix[1:-1, ::3] and sr.ix[0] != sr.ix[0:1] and sr.ix[None] != sr.ix[...]
    assert sr.ix[2] == sr.ix[2,] and sr.ix[np.int64(2)] == sr.ix[2]
    assert a.entries == (slice(1, -1, None), slice(None, None, 2))
    assert repr(sr.ix[1:3, ..., None, -1, ::-2]) == "ix[1:3, ..., None, -1, ::-2]"
    with pytest.raises(AttributeError):
        setattr(a, "entries", ())


@pytest.mark.parametrize(
    ("entry", "error", "match"),
    [
        (np.array([1, 2]), TypeError, "entry 0 is ndarray"),
        ([1, 2], TypeError, "entry 0 is list"),
        (True, TypeError, "entry 0 is a bool"),
        (1.5, IndexError, "entry 0 is float"),
        ((0, 0.0), IndexError, r"entry 1 is float \(0.0\)"),
        (slice(1.0, 2), TypeError, "start is float"),
        (slice(None, None, 0), ValueError, "step 0"),
        ((Ellipsis, 1, Ellipsis), IndexError, "single ellipsis"),
        ((0, "a"), IndexError, "entry 1 is str"),
        ((0, 1j), IndexError, "entry 1 is complex"),
    ],
)
def test_ix_refuses_what_numpy_refuses(entry: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        sr.ix[entry]


@pytest.mark.parametrize("entry", [(0, 0.0), 1.5, (0, "a"), (Ellipsis, 2.0)])
def test_ix_entry_numpy_refuses_is_numpys_index_error(entry: object) -> None:
    """An entry that NumPy itself refuses as an index (a float, a string) raises NumPy's
    exception, ``IndexError``, naming the entry. On main: ``TypeError: index: entry 1 is float
    (0.0); only integers, slices ...``."""
    x = np.ones((3, 4))
    with pytest.raises(IndexError):
        x[entry]  # type: ignore[call-overload]
    with pytest.raises(IndexError, match=r"index: entry \d is (float|str)"):
        sr.ix[entry]
    with pytest.raises(IndexError, match=r"index: entry \d is (float|str)"):
        sr.getindex(x, entry)  # type: ignore[call-overload]


def test_ix_takes_what_numpy_reads_as_an_int() -> None:
    """Objects with ``__index__`` (another library's integers) are ints, as NumPy reads them."""

    class Position:
        def __index__(self) -> int:
            return 2

    assert sr.ix[Position(), 1] == sr.ix[2, 1]
    x = random_array((4, 3))
    np.testing.assert_array_equal(sr.getindex(x, sr.ix[Position()]), x[Position()])


# ======================================================================================
# getindex
# ======================================================================================

GETINDEX_CASES: list[tuple[tuple[int, ...], sr.StaticIndex[Any]]] = [
    ((7,), sr.ix[2:5]),
    ((7,), sr.ix[::2]),
    ((7,), sr.ix[::-3]),
    ((7,), sr.ix[-1]),
    ((7,), sr.ix[5:1:-1]),
    ((7,), sr.ix[...]),
    ((7,), sr.ix[::-1]),
    ((7,), sr.ix[4:2]),
    ((4, 6), sr.ix[1:-1, ::2]),
    ((4, 6), sr.ix[..., 0]),
    ((4, 6), sr.ix[:, None, -1]),
    ((4, 6), sr.ix[2]),
    ((4, 6), sr.ix[2, 3]),
    ((4, 6), sr.ix[::-1, 4:1:-2]),
    ((4, 6), sr.ix[None, 1:3, None]),
    ((4, 6), sr.ix[:, 1:4]),
    ((3, 4, 5), sr.ix[1, :, ::2]),
    ((3, 4, 5), sr.ix[:, 2]),
    ((3, 4, 5), sr.ix[::2, 1:, -2:]),
    ((3, 4, 5), sr.ix[..., ::-1, 1]),
    ((2, 3, 4, 5), sr.ix[1, ..., 1:4:2]),
    ((1, 5), sr.ix[0, ::-1]),
    ((), sr.ix[...]),
    ((), sr.ix[None]),
    ((0, 3), sr.ix[:, 1]),
]


@pytest.mark.parametrize(("shape", "index"), GETINDEX_CASES, ids=[f"{s}-{i}" for s, i in GETINDEX_CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int16, np.bool_])
def test_getindex_forward_is_numpys_view(shape: tuple[int, ...], index: sr.StaticIndex[Any], dtype: npt.DTypeLike) -> None:
    x = random_array(shape, dtype)
    y = sr.getindex(x, index)
    expected = np.asarray(x[numpy_index(index)])
    assert isinstance(y, np.ndarray) and y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
    if x.size:
        assert np.shares_memory(y, x) or y.size == 0  # NumPy's view, not a copy


@pytest.mark.parametrize(("shape", "index"), GETINDEX_CASES, ids=[f"{s}-{i}" for s, i in GETINDEX_CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_getindex_pullback_is_numpys_assignment_into_zeros(shape: tuple[int, ...], index: sr.StaticIndex[Any], dtype: npt.DTypeLike) -> None:
    x = random_array(shape, dtype)
    y, back = rrule(sr.getindex, x, index)
    dy = random_array(y.shape, dtype)
    dx, no = back(dy)
    assert no == NoTangent()
    expected = np.zeros(shape, dtype)
    expected[numpy_index(index)] = dy
    got = np.asarray(dx)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("shape", "index"), GETINDEX_CASES[:22], ids=[f"{s}-{i}" for s, i in GETINDEX_CASES[:22]])
def test_getindex_rules_against_finite_differences(shape: tuple[int, ...], index: sr.StaticIndex[Any]) -> None:
    x = random_array(shape)
    check_rrule(sr.getindex, x, index)
    check_frule(sr.getindex, x, index)


def test_getindex_float32_and_complex_rules() -> None:
    check_rrule(sr.getindex, random_array((5, 6), np.float32), sr.ix[1:-1, ::2])
    check_rrule(sr.getindex, random_array((5, 6), np.complex128), sr.ix[::-2, 3])
    check_frule(sr.getindex, random_array((5, 6), np.complex64), sr.ix[None, 1:3])


def test_getindex_pullback_is_one_kernel_launch_with_no_zero_fill_first() -> None:
    x = random_array((64, 32), np.float32)
    y, back = rrule(sr.getindex, x, sr.ix[1:-1, ::2])
    dy = random_array(y.shape, np.float32)
    back(dy)
    with sr.no_compile(), sr.no_fallback(), count_launches():
        before = kernel_launches(op="getindex")
        dx = dense(back(dy)[0])
        assert kernel_launches(op="getindex") == before + 1
    assert dx.dtype == np.float32
    # The kernel writes every element: garbage in a reused output block would show here.
    for _ in range(3):
        np.testing.assert_array_equal(dense(back(dy)[0])[0], 0)


def test_getindex_covering_index_pulls_back_to_a_view_and_fills_stay_fills() -> None:
    x = random_array((3, 4))
    y, back = rrule(sr.getindex, x, sr.ix[::-1, None])
    dy = random_array(y.shape)
    dx = dense(back(dy)[0])
    assert np.shares_memory(dx, dy)
    np.testing.assert_array_equal(dx, dy[::-1, 0])
    assert back(Fill(2.0, y.shape, np.float64))[0] == Fill(2.0, (3, 4), np.float64)
    y, back = rrule(sr.getindex, x, sr.ix[1:, ::2])
    got = dense(back(Fill(2.0, y.shape, np.float64))[0])
    expected = np.zeros((3, 4))
    expected[1:, ::2] = 2.0
    np.testing.assert_array_equal(got, expected)
    assert back(ZeroTangent())[0] == ZeroTangent()
    np.testing.assert_array_equal(dense(back(Thunk(lambda: np.ones(y.shape)))[0]), (expected > 0).astype(float))
    _, ydot = sr.frule(sr.getindex, (Fill(3.0, (3, 4), np.float64), NoTangent()), x, sr.ix[1:, ::2])
    assert ydot == Fill(3.0, (2, 2), np.float64)


def test_getindex_shapes_share_one_kernel_per_pattern() -> None:
    x = random_array((6, 10), np.float32)
    y, back = rrule(sr.getindex, x, sr.ix[1:-1, ::2])
    back(random_array(y.shape, np.float32))
    with sr.no_compile():
        for shape, index in (((9, 7), sr.ix[2:, 1::3]), ((5, 5), sr.ix[::-1, 4:0:-2])):
            v = random_array(shape, np.float32)
            y, back = rrule(sr.getindex, v, index)
            dy = random_array(y.shape, np.float32)
            expected = np.zeros(shape, np.float32)
            expected[numpy_index(index)] = dy
            np.testing.assert_array_equal(dense(back(dy)[0]), expected)


def test_getindex_plain_tuple_counts_as_dynamic() -> None:
    x = random_array((4, 6))
    before = sr.cache_info().dynamic_arguments
    y = sr.getindex(x, (slice(1, 3), 2))
    np.testing.assert_array_equal(y, x[1:3, 2])
    assert sr.cache_info().dynamic_arguments == before + 1
    sr.getindex(x, (slice(1, 3), 2))
    assert sr.cache_info().dynamic_arguments == before + 2
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError, match="index"):
        sr.getindex(x, (slice(1, 3), 2))
    with sr.no_fallback():
        sr.getindex(x, sr.ix[1:3, 2])


@pytest.mark.parametrize(
    ("shape", "index", "error", "match"),
    [
        ((4, 6), sr.ix[4], IndexError, "index 4 is out of bounds for axis 0 with size 4"),
        ((4, 6), sr.ix[:, -7], IndexError, "index -7 is out of bounds for axis 1 with size 6"),
        ((4, 6), sr.ix[1, 2, 3], IndexError, "too many indices"),
        ((), sr.ix[0], IndexError, "too many indices"),
    ],
)
def test_getindex_bad_indices_are_numpys_errors(shape: tuple[int, ...], index: sr.StaticIndex[Any], error: type[Exception], match: str) -> None:
    x = random_array(shape)
    with pytest.raises(error, match=match):
        sr.getindex(x, index)
    with pytest.raises(error):
        x[numpy_index(index)]


def test_getindex_refuses_non_index_statics_and_bad_cotangents() -> None:
    x = random_array((4, 6))
    with pytest.raises(TypeError, match="getindex: index must be"):
        sr.getindex(x, [1, 2])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="entry 0 is ndarray"):
        sr.getindex(x, (np.array([1]),))
    _, back = rrule(sr.getindex, x, sr.ix[1:3])
    with pytest.raises(ValueError, match=r"\(2, 6\)"):
        back(np.ones((3, 6)))
    y, back = rrule(sr.getindex, np.arange(6).reshape(2, 3), sr.ix[1])
    assert back(np.ones(3)) == (NoTangent(), NoTangent())


# ======================================================================================
# take
# ======================================================================================


def add_at(shape: tuple[int, ...], where: tuple[Any, ...], values: Array, dtype: npt.DTypeLike) -> Array:
    out = np.zeros(shape, dtype)
    np.add.at(out, where, values)
    return out


def take_reference_pullback(x_shape: tuple[int, ...], indices: Array, axis: int | None, dy: Array) -> Array:
    if axis is None:
        n = int(np.prod(x_shape))
        return add_at((n,), (np.where(indices < 0, indices + n, indices).reshape(-1),), dy.reshape(-1), dy.dtype).reshape(x_shape)
    n = x_shape[axis]
    wrapped = np.where(indices < 0, indices + n, indices)
    return add_at(x_shape, (slice(None),) * axis + (wrapped,), dy, dy.dtype)


TAKE_CASES: list[tuple[tuple[int, ...], tuple[int, ...], int | None]] = [
    ((7,), (5,), 0),
    ((7,), (5,), None),
    ((4, 6), (9,), 0),
    ((4, 6), (3, 2), 1),
    ((4, 6), (2, 5), None),
    ((3, 4, 5), (6,), 1),
    ((3, 4, 5), (2, 3), -1),
    ((3, 4, 5), (), 0),
    ((2, 3), (0,), 1),
    ((), (3,), None),
]


def indices_for(n: int, shape: tuple[int, ...]) -> Array:
    return RNG.integers(-n, n, shape) if n else np.zeros(shape, np.int64)


@pytest.mark.parametrize(("shape", "ishape", "axis"), TAKE_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int8, np.bool_])
def test_take_forward_is_numpys(shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None, dtype: npt.DTypeLike) -> None:
    x = random_array(shape, dtype)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    indices = indices_for(n, ishape)
    y = sr.take(x, indices, None if axis is None else Val(axis))
    expected = np.take(x, indices, axis=axis)
    assert isinstance(y, np.ndarray) and y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def _fits(shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None, promise: str) -> bool:
    """Distinct indices need at least as many rows as positions."""
    n = int(np.prod(shape)) if axis is None else shape[axis % max(len(shape), 1)]
    return promise in ("none", "sorted") or int(np.prod(ishape)) <= n


PULLBACK_CASES = [
    pytest.param(*case, promise, id=f"{case}-{promise}")
    for case in TAKE_CASES
    for promise in ("none", "sorted", "unique", "both")
    if _fits(*case, promise)
]


@pytest.mark.parametrize(("shape", "ishape", "axis", "promise"), PULLBACK_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_take_pullback_is_np_add_at_on_zeros_bitwise(
    shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None, promise: str, dtype: npt.DTypeLike
) -> None:
    x = random_array(shape, dtype)
    n = int(np.prod(shape)) if axis is None else shape[axis % max(len(shape), 1)]
    m = int(np.prod(ishape))
    if promise == "none":
        indices = indices_for(n, ishape)
    elif promise == "sorted":
        indices = np.sort(RNG.integers(0, max(n, 1), ishape).reshape(-1)).reshape(ishape) if n else np.zeros(ishape, np.int64)
    else:
        assert m <= n
        chosen = RNG.permutation(n)[:m]
        indices = (np.sort(chosen) if promise == "both" else chosen).reshape(ishape)
    kwargs: dict[str, Val[bool]] = {}
    if promise in ("sorted", "both"):
        kwargs["sorted"] = Val(True)
    if promise in ("unique", "both"):
        kwargs["unique"] = Val(True)
    y, back = rrule(sr.take, x, indices, None if axis is None else Val(axis), **kwargs)
    dy = random_array(y.shape, dtype)
    dx, no_indices, no_axis = back(dy)
    assert no_indices == NoTangent() and no_axis == NoTangent()
    expected = take_reference_pullback(shape, indices, None if axis is None else axis % len(shape), dy)
    got = dense(dx)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    np.testing.assert_array_equal(got, expected)  # bit for bit: both add in index order


@pytest.mark.parametrize(("shape", "ishape", "axis"), TAKE_CASES[:8])
def test_take_rules_against_finite_differences(shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None) -> None:
    x = random_array(shape)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    indices = indices_for(n, ishape)
    check_rrule(sr.take, x, indices, None if axis is None else Val(axis))
    check_frule(sr.take, x, indices, None if axis is None else Val(axis))


def test_take_float32_complex_and_promises_against_finite_differences() -> None:
    x = random_array((6, 3), np.float32)
    check_rrule(sr.take, x, np.array([5, 0, 0, 2, 5]), Val(0))
    check_rrule(sr.take, random_array((6, 3), np.complex128), np.array([1, 2, 4]), Val(0), unique=Val(True), sorted=Val(True))
    check_rrule(sr.take, random_array((3, 6)), np.array([4, 1, 0]), Val(1), unique=Val(True))
    check_frule(sr.take, random_array((3, 6), np.complex64), np.array([1, 1, 3]), Val(1), sorted=Val(True))


def test_take_lazy_cotangents() -> None:
    x = random_array((5, 3))
    indices = np.array([4, 0, 4, 4, -1])
    y, back = rrule(sr.take, x, indices, Val(0))
    got = dense(back(Fill(2.0, y.shape, np.float64))[0])
    np.testing.assert_array_equal(got, add_at((5, 3), (np.array([4, 0, 4, 4, 4]),), np.full(y.shape, 2.0), np.float64))
    assert back(ZeroTangent())[0] == ZeroTangent()
    dy = random_array(y.shape)
    np.testing.assert_array_equal(dense(back(Thunk(lambda: dy))[0]), take_reference_pullback((5, 3), indices, 0, dy))
    _, ydot = sr.frule(sr.take, (Fill(1.5, (5, 3), np.float64), NoTangent(), NoTangent()), x, indices, Val(0))
    assert ydot == Fill(1.5, (5, 3), np.float64)


def test_take_pullback_builder_and_integer_x() -> None:
    x = random_array((5, 3))
    indices = np.array([1, 1, 3])
    back = sr.pullback(sr.take, x, indices, Val(0))
    dy = random_array((3, 3))
    np.testing.assert_array_equal(dense(back(dy)[0]), take_reference_pullback((5, 3), indices, 0, dy))
    _, integer_back = rrule(sr.take, np.arange(15).reshape(5, 3), indices, Val(0))
    assert integer_back(dy) == (NoTangent(), NoTangent(), NoTangent())


@pytest.mark.parametrize("indices", [[], (), [[]], [[], []]], ids=["[]", "()", "[[]]", "[[], []]"])
def test_empty_index_lists_are_read_as_numpy_reads_them(indices: Any) -> None:  # lists, nested
    """``np.take(x, [])`` is an empty take (NumPy reads a list of indices as ``intp``, and an
    empty one has no element to say otherwise); ``np.asarray([])`` is float64, which we
    refused as float indices (a ``TypeError``) in every op with integer data, in every engine."""
    x = random_array((5, 3))
    y, back = rrule(sr.take, x, indices, Val(0))
    expected = np.take(x, indices, axis=0)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(dense(back(np.ones_like(y))[0]), np.zeros_like(x))
    assert sr.take(x, indices).shape == np.take(x, indices).shape
    empty: Any = []
    added = sr.index_add(x, empty, np.ones((0, 3)))
    np.testing.assert_array_equal(added, x)
    counts = sr.repeat(np.zeros(0), [])
    assert counts.shape == np.repeat(np.zeros(0), []).shape == (0,)
    with pytest.raises(ValueError, match="indices"):  # a ragged list is still NumPy's ValueError, named
        ragged: Any = [[], [1]]
        sr.take(x, ragged, Val(0))


@pytest.mark.parametrize(
    ("indices", "axis", "error", "match"),
    [
        (np.array([0, 5]), 0, IndexError, "index 5 is out of bounds for axis 0 with size 5"),
        (np.array([-6]), 0, IndexError, "index -6 is out of bounds for axis 0 with size 5"),
        (np.array([15]), None, IndexError, "index 15 is out of bounds for the flattened array with size 15"),
        (np.array([1.0]), 0, TypeError, "Cannot cast|cannot cast"),
        (np.array([True]), 0, TypeError, "bool"),
        (np.array([1]), 2, np.exceptions.AxisError, "axis 2 is out of bounds"),
    ],
)
def test_take_bad_indices(indices: Array, axis: int | None, error: type[Exception], match: str) -> None:
    x = random_array((5, 3))
    sr.clear_caches()
    compiles = sr.cache_info().compiles
    with pytest.raises(error, match=match):
        sr.take(x, indices, None if axis is None else Val(axis))
    with pytest.raises(error, match=match):
        sr.rrule(sr.take, x, indices, None if axis is None else Val(axis))
    assert sr.cache_info().compiles == compiles  # refused before any kernel was built
    if indices.dtype.kind != "b":  # NumPy reads a bool array as 0 and 1; we refuse it
        with pytest.raises(error):
            np.take(x, indices, axis=axis)


def test_take_broken_promises_are_value_errors_before_any_kernel() -> None:
    x = random_array((5, 3))
    with pytest.raises(ValueError, match=r"sorted=Val\(True\).*indices\[2\] = 1 follows indices\[1\] = 3"):
        sr.take(x, np.array([0, 3, 1]), Val(0), sorted=Val(True))
    with pytest.raises(ValueError, match=r"unique=Val\(True\).*positions 0 and 2 both hold 4"):
        sr.rrule(sr.take, x, np.array([4, 1, -1]), Val(0), unique=Val(True))
    with pytest.raises(ValueError, match="increasing"):
        sr.take(x, np.array([0, 3, 3]), Val(0), sorted=Val(True), unique=Val(True))
    sr.take(x, np.array([0, 3, 3]), Val(0), sorted=Val(True))  # sorted allows repeats
    sr.take(x, np.array([4, 0, -2]), Val(0), unique=Val(True))


def test_take_saves_its_own_copy_of_the_indices() -> None:
    x = random_array((5, 3))
    indices = np.array([1, 2, 3])
    _, back = rrule(sr.take, x, indices, Val(0))
    indices[:] = 10**9  # would be out of bounds in a kernel that read the caller's array
    dy = np.ones((3, 3))
    np.testing.assert_array_equal(dense(back(dy)[0]), take_reference_pullback((5, 3), np.array([1, 2, 3]), 0, dy))


_DETERMINISM_SCRIPT = r"""
import hashlib, sys
import numpy as np
import stablerules as sr
from stablerules import Val
from stablerules import _parallel
_parallel.PARALLEL_THRESHOLD = 1  # split even this small case across the threads
rng = np.random.default_rng(0)
x = rng.standard_normal((3000, 16)).astype(np.float32)
idx = (rng.zipf(1.3, 20000) % 3000).astype(np.int64)
dy = rng.standard_normal((20000, 16)).astype(np.float32)
x2 = rng.standard_normal((200, 64)).astype(np.float32)
idx2 = rng.integers(0, 64, (200, 50))
dy2 = rng.standard_normal((200, 50)).astype(np.float32)
v = rng.standard_normal((20000, 16)).astype(np.float32)
digest = hashlib.sha256()
for _ in range(3):
    _, back = sr.rrule(sr.take, x, idx, Val(0))
    digest.update(back(dy)[0].tobytes())
    _, back = sr.rrule(sr.take, x, np.sort(idx), Val(0), sorted=Val(True))
    digest.update(back(dy)[0].tobytes())
    _, back = sr.rrule(sr.take_along_axis, x2, idx2, Val(1))
    digest.update(back(dy2)[0].tobytes())
    digest.update(sr.index_add(x, idx, v).tobytes())
ref = np.zeros_like(x); np.add.at(ref, idx, dy)
_, back = sr.rrule(sr.take, x, idx, Val(0))
assert np.array_equal(back(dy)[0], ref)
print(digest.hexdigest())
"""


def test_scatter_adds_are_bitwise_deterministic_for_one_and_two_threads(tmp_path: Path) -> None:
    """The same bits on repeated runs (inside one process) and with 1 or 2 threads (the
    pool's size is fixed per process, so each count is its own process)."""
    digests = []
    for threads in ("1", "2", "2"):
        environment = dict(os.environ, STABLERULES_NUM_THREADS=threads, PYTHONPATH=str(REPO))
        environment.setdefault("STABLERULES_CACHE_DIR", str(tmp_path / "cache"))
        result = subprocess.run(
            [sys.executable, "-c", _DETERMINISM_SCRIPT], cwd=REPO, env=environment, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr[-3000:]
        digests.append(result.stdout.strip())
    assert len(set(digests)) == 1, digests


def test_take_pullback_splits_across_threads_and_matches_add_at(monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules import _parallel

    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "2")
    x = random_array((400, 8), np.float32)
    indices = RNG.zipf(1.2, 3000) % 400
    _, back = rrule(sr.take, x, indices, Val(0))
    dy = random_array((3000, 8), np.float32)
    with count_launches():
        balanced = kernel_launches(op="take", kind="balance")
        np.testing.assert_array_equal(dense(back(dy)[0]), take_reference_pullback((400, 8), indices, 0, dy))
        assert kernel_launches(op="take", kind="balance") == balanced + 1  # parts of equal cost
    z = random_array((3, 50, 4))  # several outer slabs: parts of equal rows
    _, back = rrule(sr.take, z, indices % 50, Val(1))
    dz = random_array((3, 3000, 4))
    np.testing.assert_array_equal(dense(back(dz)[0]), take_reference_pullback((3, 50, 4), indices % 50, 1, dz))
    values = random_array((3000, 8), np.float32)
    np.testing.assert_array_equal(sr.index_add(x, indices, values), index_add_reference(x, indices, values, 0))
    # Four parts where one row holds every term (parts cut at bin edges, some empty), and a
    # tall x whose parts are cut at bins of several rows: the same bits as np.add.at.
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "4")
    same = np.full(3000, 7)
    _, back = rrule(sr.take, x, same, Val(0))
    np.testing.assert_array_equal(dense(back(dy)[0]), take_reference_pullback((400, 8), same, 0, dy))
    np.testing.assert_array_equal(sr.index_add(x, same, values), index_add_reference(x, same, values, 0))
    tall = random_array((5000, 2), np.float32)
    spread = RNG.zipf(1.1, 3000) % 5000
    _, back = rrule(sr.take, tall, spread, Val(0))
    dt = random_array((3000, 2), np.float32)
    np.testing.assert_array_equal(dense(back(dt)[0]), take_reference_pullback((5000, 2), spread, 0, dt))
    _, back = rrule(sr.take, tall, np.sort(spread), Val(0), sorted=Val(True))
    np.testing.assert_array_equal(dense(back(dt)[0]), take_reference_pullback((5000, 2), np.sort(spread), 0, dt))


_CUDA_SORT_SCRIPT = r"""
import numpy as np
import stablerules as sr
from stablerules import Val
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches
rng = np.random.default_rng(1)
x = rng.standard_normal((40, 3))
idx = (rng.zipf(1.3, 300) - 1) % 40 - 20  # many repeats, negative ones too: more than one grid of positions
dy = rng.standard_normal((300, 3))
expected = np.zeros_like(x)
np.add.at(expected, idx, dy)
with count_launches():
    _, back = sr.rrule(sr.take, x, idx, Val(0))
    dx = back(dy)[0]
    merges = kernel_launches(op="take", kind="merge", device="cuda")
    offsets = kernel_launches(op="take", kind="offsets", device="cuda")
assert np.array_equal(dx, expected), "take pullback"
assert (merges, offsets) == (9, 1), (merges, offsets)  # ceil(log2(300)) merge passes, then the offsets
_, back = sr.rrule(sr.take, x, np.sort(idx % 40), Val(0), sorted=Val(True))
expected = np.zeros_like(x)
np.add.at(expected, np.sort(idx % 40), dy)
assert np.array_equal(back(dy)[0], expected), "take pullback, sorted"
values = rng.standard_normal((300, 3))
expected = x.copy()
np.add.at(expected, idx, values)
assert np.array_equal(sr.index_add(x, idx, values), expected), "index_add"
print("ok")
"""


@pytest.mark.cuda
def test_cuda_bucket_sort_is_parallel_and_gives_np_add_at_bitwise(tmp_path: Path) -> None:
    """The CUDA scatter-add's stable sort (merge passes, one thread per position) under
    Numba's simulator, at more positions than the simulator's grid has threads."""
    import importlib.util

    from tests.ci import skip_unless_ci

    if importlib.util.find_spec("numba.cuda") is None:
        skip_unless_ci("numba.cuda (and so its simulator) is not installed")
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", STABLERULES_DEVICE="cuda", PYTHONPATH=str(REPO))
    environment.setdefault("STABLERULES_CACHE_DIR", str(tmp_path / "cache"))
    result = subprocess.run(
        [sys.executable, "-c", _CUDA_SORT_SCRIPT], cwd=REPO, env=environment, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout[-2000:] + result.stderr[-3000:]


# ======================================================================================
# take_along_axis
# ======================================================================================

ALONG_CASES: list[tuple[tuple[int, ...], tuple[int, ...], int | None]] = [
    ((7,), (5,), 0),
    ((4, 6), (4, 3), 1),
    ((4, 6), (9, 6), 0),
    ((4, 6), (1, 3), 1),
    ((3, 4, 5), (3, 2, 5), 1),
    ((3, 4, 5), (3, 4, 7), -1),
    ((3, 4, 5), (1, 4, 2), 2),
    ((3, 4), (5,), None),
    ((3, 4), (3, 0), 1),
]


@pytest.mark.parametrize(("shape", "ishape", "axis"), ALONG_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int32, np.bool_])
def test_take_along_axis_forward_is_numpys(shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None, dtype: npt.DTypeLike) -> None:
    x = random_array(shape, dtype)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    indices = indices_for(n, ishape)
    y = sr.take_along_axis(x, indices, None if axis is None else Val(axis))
    expected = np.take_along_axis(x, indices, axis=axis)
    assert isinstance(y, np.ndarray) and y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def along_reference_pullback(x_shape: tuple[int, ...], indices: Array, axis: int | None, dy: Array) -> Array:
    if axis is None:
        n = int(np.prod(x_shape))
        return add_at((n,), (np.where(indices < 0, indices + n, indices),), dy, dy.dtype).reshape(x_shape)
    axis %= len(x_shape)
    wrapped = np.broadcast_to(np.where(indices < 0, indices + x_shape[axis], indices), dy.shape)
    grids: list[Any] = list(np.indices(dy.shape, sparse=True))
    grids[axis] = wrapped
    return add_at(x_shape, tuple(grids), dy, dy.dtype)


@pytest.mark.parametrize(("shape", "ishape", "axis"), ALONG_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_take_along_axis_pullback_is_np_add_at_on_zeros_bitwise(
    shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None, dtype: npt.DTypeLike
) -> None:
    x = random_array(shape, dtype)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    indices = indices_for(n, ishape)
    y, back = rrule(sr.take_along_axis, x, indices, None if axis is None else Val(axis))
    dy = random_array(y.shape, dtype)
    dx, no_indices, no_axis = back(dy)
    assert no_indices == NoTangent() and no_axis == NoTangent()
    np.testing.assert_array_equal(dense(dx), along_reference_pullback(shape, indices, axis, dy))


@pytest.mark.parametrize(("shape", "ishape", "axis"), ALONG_CASES[:8])
def test_take_along_axis_rules_against_finite_differences(shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None) -> None:
    x = random_array(shape)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    indices = indices_for(n, ishape)
    check_rrule(sr.take_along_axis, x, indices, None if axis is None else Val(axis))
    check_frule(sr.take_along_axis, x, indices, None if axis is None else Val(axis))


def test_take_along_axis_bad_inputs() -> None:
    x = random_array((4, 6))
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 1 with size 6"):
        sr.take_along_axis(x, np.array([[6]]), Val(1))
    with pytest.raises(IndexError, match="integer array"):
        sr.take_along_axis(x, np.array([[1.0]]), Val(1))
    with pytest.raises(TypeError, match="bool"):
        sr.take_along_axis(x, np.array([[True]]), Val(1))
    with pytest.raises(ValueError, match="same number of dimensions"):
        sr.take_along_axis(x, np.array([1]), Val(1))
    with pytest.raises(ValueError, match="single dimension"):
        sr.take_along_axis(x, np.array([[1]]), None)
    with pytest.raises(ValueError, match=r"indices of shape \(2, 3\) do not match x of shape \(4, 6\) on axis 0"):
        sr.take_along_axis(x, np.zeros((2, 3), np.int64), Val(1))


# --- NumPy 2's broadcasting, both ways, and NumPy's and JAX's own test cases ----------------


def _add_keepdims(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function(a, axis=...)`` with the reduced axis kept (NumPy's test helper's behaviour)."""

    def wrapped(a: Array, axis: int | None, **kwargs: Any) -> Any:
        result = function(a, axis=axis, **kwargs)
        return np.expand_dims(result, axis=0 if axis is None else axis)

    return wrapped


@pytest.mark.parametrize("axis", [0, 1, 2, None])
def test_take_along_axis_numpy_argequivalent(axis: int | None) -> None:
    """NumPy's ``TestTakeAlongAxis.test_argequivalent``: ``take_along_axis(a, argf(a))`` is
    ``f(a)`` for sort/argsort, min/argmin, max/argmax and partition/argpartition."""
    a = RNG.random((3, 4, 5))
    pairs: list[tuple[Callable[..., Any], Callable[..., Any], dict[str, Any]]] = [
        (np.sort, np.argsort, {}),
        (_add_keepdims(np.min), _add_keepdims(np.argmin), {}),
        (_add_keepdims(np.max), _add_keepdims(np.argmax), {}),
        (np.partition, np.argpartition, {"kth": 2}),
    ]
    static = None if axis is None else Val(axis)
    for function, argfunction, kwargs in pairs:
        indices = argfunction(a, axis=axis, **kwargs)
        np.testing.assert_array_equal(sr.take_along_axis(a, indices, static), function(a, axis=axis, **kwargs))
    check_rrule(sr.take_along_axis, a, np.argsort(a, axis=axis), static)


def test_take_along_axis_numpy_invalid_cases() -> None:
    """NumPy's ``TestTakeAlongAxis.test_invalid``: too few index dimensions (``ValueError``),
    bool and float indices (``IndexError``; bool is also our ``TypeError``), an axis out of
    range (``AxisError``)."""
    a = np.ones((10, 10))
    ai = np.ones((10, 2), dtype=np.intp)
    np.testing.assert_array_equal(sr.take_along_axis(a, ai, Val(1)), np.take_along_axis(a, ai, axis=1))
    with pytest.raises(ValueError, match="same number of dimensions"):
        sr.take_along_axis(a, np.array(1), Val(1))
    with pytest.raises(IndexError, match="bool"):
        sr.take_along_axis(a, ai.astype(bool), Val(1))
    with pytest.raises(IndexError, match="integer array"):
        sr.take_along_axis(a, ai.astype(float), Val(1))
    with pytest.raises(np.exceptions.AxisError):
        sr.take_along_axis(a, ai, Val(10))
    with pytest.raises(IndexError):
        np.take_along_axis(a, ai.astype(bool), axis=1)
    with pytest.raises(IndexError):
        np.take_along_axis(a, ai.astype(float), axis=1)


def test_take_along_axis_numpy_empty() -> None:
    """NumPy's ``TestTakeAlongAxis.test_empty``: an empty result keeps the indices' shape."""
    a = np.ones((3, 4, 5))
    ai = np.ones((3, 0, 5), dtype=np.intp)
    y, back = rrule(sr.take_along_axis, a, ai, Val(1))
    assert y.shape == (3, 0, 5) == np.take_along_axis(a, ai, axis=1).shape
    np.testing.assert_array_equal(dense(back(np.ones((3, 0, 5)))[0]), np.zeros((3, 4, 5)))


def test_take_along_axis_numpy_broadcast_both_ways() -> None:
    """NumPy's ``TestTakeAlongAxis.test_broadcast``: the axes other than ``axis`` broadcast in
    both directions. On main: ``ValueError: take_along_axis: indices of shape (1, 2, 5) do not
    match x of shape (3, 4, 1) on axis 2 (indices broadcast against x, not x against
    indices)``."""
    a = np.ones((3, 4, 1))
    ai = np.ones((1, 2, 5), dtype=np.intp)
    y = sr.take_along_axis(a, ai, Val(1))
    assert y.shape == (3, 2, 5) == np.take_along_axis(a, ai, axis=1).shape
    np.testing.assert_array_equal(y, np.take_along_axis(a, ai, axis=1))


def test_take_along_axis_jax_input_tensor_has_singleton_dimension() -> None:
    """JAX's ``testTakeAlongAxisInputTensorHasSingletonDimension``: ``x`` of shape
    ``(2, 1, 5, 7, 13)`` and uint8 indices of ``(2, 3, 5, 11, 1)`` along axis -2 equal NumPy."""
    h = random_array((2, 1, 5, 7, 13), np.float32)
    g = RNG.integers(0, 7, (2, 3, 5, 11, 1)).astype(np.uint8)
    y = sr.take_along_axis(h, g, Val(-2))
    expected = np.take_along_axis(h, g, axis=-2)
    assert y.shape == expected.shape == (2, 3, 5, 11, 13) and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


BROADCAST_ALONG_CASES: list[tuple[tuple[int, ...], tuple[int, ...], int]] = [
    ((3, 4, 1), (1, 6, 5), 1),
    ((1, 5), (4, 3), 1),
    ((5, 1), (2, 3), 0),
    ((2, 1, 5, 7, 3), (2, 3, 5, 4, 1), -2),
    ((1, 4, 1), (3, 2, 2), 1),
]


@pytest.mark.parametrize(("shape", "ishape", "axis"), BROADCAST_ALONG_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_take_along_axis_broadcast_x_pullback_is_np_add_at_summed(
    shape: tuple[int, ...], ishape: tuple[int, ...], axis: int, dtype: npt.DTypeLike
) -> None:
    """Where ``x`` broadcasts against ``indices``, ``dx`` is ``np.add.at`` into the broadcast
    ``x`` summed over the broadcast axes (an independent reference), and the rules pass the
    finite-difference checks."""
    x = random_array(shape, dtype)
    indices = indices_for(shape[axis], ishape)
    y, back = rrule(sr.take_along_axis, x, indices, Val(axis))
    expected = np.take_along_axis(x, indices, axis=axis)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
    dy = random_array(y.shape, dtype)
    dx = dense(back(dy)[0])
    wide_shape = tuple(n if d == axis % len(shape) else m for d, (n, m) in enumerate(zip(shape, y.shape)))
    wide = along_reference_pullback(wide_shape, indices, axis, dy)
    broadcast = tuple(d for d, (n, m) in enumerate(zip(shape, wide_shape)) if n != m)
    assert dx.shape == shape and dx.dtype == x.dtype
    np.testing.assert_allclose(dx, wide.sum(axis=broadcast, keepdims=True), rtol=1e-13, atol=1e-15)
    if dtype == np.float64:
        check_rrule(sr.take_along_axis, x, indices, Val(axis))
        check_frule(sr.take_along_axis, x, indices, Val(axis))


def test_take_along_axis_broadcast_incompatible_axes_are_refused() -> None:
    x = random_array((3, 4, 2))
    with pytest.raises(ValueError, match=r"indices of shape \(1, 2, 5\) do not match x of shape \(3, 4, 2\) on axis 2"):
        sr.take_along_axis(x, np.zeros((1, 2, 5), np.intp), Val(1))
    with pytest.raises(IndexError, match="shape mismatch"):  # NumPy's fancy index; ours is a shape error
        np.take_along_axis(x, np.zeros((1, 2, 5), np.intp), axis=1)


# ======================================================================================
# index_add
# ======================================================================================

INDEX_ADD_CASES: list[tuple[tuple[int, ...], int, tuple[int, ...], int]] = [
    ((6,), 4, (4,), 0),
    ((5, 3), 7, (7, 3), 0),
    ((5, 3), 7, (3,), 0),
    ((5, 3), 7, (7, 1), 0),
    ((5, 3), 4, (5, 4), 1),
    ((5, 3), 4, (), 1),
    ((2, 5, 3), 6, (2, 6, 3), 1),
    ((2, 5, 3), 6, (6, 1), -2),
    ((4, 3), 0, (0, 3), 0),
]


def index_add_reference(x: Array, indices: Array, values: Array, axis: int) -> Array:
    out = x.copy()
    where: Any = (slice(None),) * (axis % x.ndim) + (indices,)
    np.add.at(out, where, values)
    return out


@pytest.mark.parametrize(("shape", "m", "vshape", "axis"), INDEX_ADD_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64])
def test_index_add_forward_is_np_add_at_on_a_copy(shape: tuple[int, ...], m: int, vshape: tuple[int, ...], axis: int, dtype: npt.DTypeLike) -> None:
    x = random_array(shape, dtype)
    indices = RNG.integers(-shape[axis], shape[axis], (m,))
    values = random_array(vshape, dtype)
    y = sr.index_add(x, indices, values, Val(axis))
    expected = index_add_reference(x, indices, values, axis)
    assert isinstance(y, np.ndarray) and y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)
    assert not np.shares_memory(y, x)


@pytest.mark.parametrize(("shape", "m", "vshape", "axis"), INDEX_ADD_CASES)
def test_index_add_rules(shape: tuple[int, ...], m: int, vshape: tuple[int, ...], axis: int) -> None:
    x = random_array(shape)
    indices = RNG.integers(-shape[axis], shape[axis], (m,))
    values = random_array(vshape)
    check_rrule(sr.index_add, x, indices, values, Val(axis))
    check_frule(sr.index_add, x, indices, values, Val(axis))
    y, back = rrule(sr.index_add, x, indices, values, Val(axis))
    dy = random_array(y.shape)
    dx, no, dvalues, _ = back(dy)
    assert no == NoTangent()
    np.testing.assert_array_equal(dense(dx), dy)
    taken = np.take(dy, indices, axis=axis)
    lead = taken.ndim - len(vshape)
    summed = taken.sum(axis=tuple(range(lead)) + tuple(lead + d for d, e in enumerate(vshape) if e == 1 and taken.shape[lead + d] != 1)).reshape(vshape)
    np.testing.assert_allclose(dense(dvalues), summed, rtol=1e-12)


def test_index_add_mixed_dtypes_and_lazy_cotangents() -> None:
    x = random_array((5, 3), np.float32)
    indices = np.array([0, 0, 4])
    values = random_array((3, 3), np.float64)
    with pytest.raises(TypeError, match="same_kind"):
        sr.index_add(np.zeros((5, 3), np.float32), indices, random_array((3, 3), np.complex64))
    y, back = rrule(sr.index_add, x, indices, values)
    assert y.dtype == np.float32
    dx, _, dvalues = back(random_array((5, 3), np.float32))
    assert dense(dx).dtype == np.float32 and dense(dvalues).dtype == np.float64
    fill = Fill(np.float32(2.0), (5, 3), np.float32)
    dx, _, dvalues = back(fill)
    assert dx == fill and dvalues == Fill(2.0, (3, 3), np.float64)
    _, back = rrule(sr.index_add, random_array((5, 3)), indices, random_array((3,)))
    assert back(Fill(1.0, (5, 3), np.float64))[2] == Fill(3.0, (3,), np.float64)
    assert back(ZeroTangent())[0] == ZeroTangent()
    _, back = rrule(sr.index_add, x, indices, np.ones((3, 3), np.int64))
    assert back(np.ones((5, 3), np.float32))[2] == NoTangent()


def test_index_add_bad_inputs() -> None:
    x = random_array((5, 3))
    with pytest.raises(ValueError, match=r"values of shape \(2, 3\) do not broadcast to \(3, 3\)"):
        sr.index_add(x, np.array([0, 1, 2]), np.ones((2, 3)))
    with pytest.raises(ValueError, match="indices must be 1-D"):
        sr.index_add(x, np.array([[0]]), np.ones((1, 1, 3)))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        sr.index_add(x, np.array([5]), np.ones((1, 3)))
    with pytest.raises(IndexError, match="integer array"):
        sr.index_add(x, np.array([1.0]), np.ones((1, 3)))
    with pytest.raises(TypeError, match="bool"):
        sr.index_add(x, np.array([True]), np.ones((1, 3)))
    with pytest.raises(TypeError, match="bool"):
        sr.index_add(np.zeros(3, bool), np.array([1]), np.ones(1, bool))


def test_index_add_keeps_a_big_endian_x_byte_order() -> None:
    """``np.add.at`` on a copy of a ``'>f8'`` ``x`` stays ``'>f8'``; so does ``index_add``.
    On main the result was native (``float64``). Tangents stay native."""
    for dtype in (">f8", ">c16", ">i4", ">f4"):
        x = random_array((5, 3), np.dtype(dtype).newbyteorder("="))
        x = x.astype(dtype)
        indices = np.array([0, 4, 0, -1])
        values = random_array((4, 3), np.int8 if dtype == ">i4" else np.float32)
        y = sr.index_add(x, indices, values)
        expected = index_add_reference(x, indices, values, 0)
        assert y.dtype == expected.dtype == np.dtype(dtype), (y.dtype, expected.dtype)
        np.testing.assert_array_equal(y, expected)
    x = random_array((5, 3)).astype(">f8")
    y, back = rrule(sr.index_add, x, indices, random_array((4, 3)))
    assert y.dtype == np.dtype(">f8")
    dx, _, dvalues = back(random_array((5, 3)))
    assert dense(dx).dtype == np.float64 and dense(dx).dtype.isnative and dense(dvalues).dtype == np.float64


# ======================================================================================
# sr.pullback with ArraySpecs: the indexing pullbacks read only the indices' values
# ======================================================================================


def _pullback_cases() -> list[tuple[str, Any, tuple[Any, ...], tuple[int, ...]]]:
    """``(id, op, arguments, positions that may be ArraySpecs)``."""
    x = random_array((5, 3))
    return [
        ("take axis", sr.take, (x, np.array([1, 1, -1, 0]), Val(0)), (0,)),
        ("take flat", sr.take, (x, np.array([[14, 0], [0, 3]]), None), (0,)),
        ("take_along_axis", sr.take_along_axis, (x, np.array([[0, 2, -1, 2]] * 5), Val(1)), (0,)),
        ("take_along_axis broadcast", sr.take_along_axis, (random_array((1, 3)), np.array([[0], [2], [2], [1]]), Val(1)), (0,)),
        ("index_add", sr.index_add, (x, np.array([0, 4, 0]), random_array((3, 3)), Val(0)), (0, 2)),
        ("index_add broadcast values", sr.index_add, (x, np.array([0, 4, 0]), random_array((3,)), Val(0)), (0, 2)),
        ("index_add mixed dtypes", sr.index_add, (x.astype(np.float32), np.array([1, 1]), random_array((2, 3)), Val(0)), (0, 2)),
    ]


@pytest.mark.parametrize(("name", "op", "args", "specs"), _pullback_cases(), ids=[case[0] for case in _pullback_cases()])
def test_pullback_of_indexing_ops_takes_array_specs(name: str, op: Any, args: tuple[Any, ...], specs: tuple[int, ...]) -> None:
    """SPEC section 8: every op but ``kron`` takes ``ArraySpec``s in ``sr.pullback``; these
    pullbacks read only the shapes and dtypes of ``x`` (and ``values``) and the indices. On
    main: ``TypeError: take pullback: it reads the primal values; pass arrays, not
    ArraySpecs``. The pullback equals ``rrule``'s with the real arrays, bit for bit, for dense,
    ``Fill`` and ``ZeroTangent`` cotangents."""
    spec_args = tuple(sr.ArraySpec(a.shape, a.dtype) if k in specs else a for k, a in enumerate(args))
    back = _pullback(op, *spec_args)
    y, reference = _rrule(op, *args)
    for dy in (random_array(y.shape, y.dtype), Fill(y.dtype.type(1.5), y.shape, y.dtype), ZeroTangent()):
        got, expected = back(dy), reference(dy)
        assert len(got) == len(expected) == len(args)
        for a, b in zip(got, expected):
            assert type(a) is type(b)
            if isinstance(b, (np.ndarray, Fill)):
                assert a.shape == b.shape and a.dtype == b.dtype
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            else:
                assert a == b


def test_pullback_of_indexing_ops_needs_the_indices_values() -> None:
    """The indices are data the pullback reads: an ``ArraySpec`` for them is a ``TypeError``
    naming them; kron, which reads its operands, keeps its message."""
    x = random_array((5, 3))
    with pytest.raises(TypeError, match=r"^take pullback: it reads the values of 'indices'; pass an array"):
        _pullback(sr.take, x, sr.ArraySpec((4,), np.int64), Val(0))
    with pytest.raises(TypeError, match=r"^index_add pullback: it reads the values of 'indices'"):
        _pullback(sr.index_add, sr.ArraySpec((5, 3), np.float64), sr.ArraySpec((2,), np.intp), sr.ArraySpec((2, 3), np.float64))
    with pytest.raises(TypeError, match=r"^kron pullback: it reads the primal values"):
        _pullback(sr.kron, sr.ArraySpec((2, 2), np.float64), x)


# ======================================================================================
# No dynamic fallback: the checks catch a NumPy stand-in for each kernel
# ======================================================================================


@pytest.fixture
def fresh_plans() -> Any:
    sr.clear_caches()
    yield
    sr.clear_caches()


def test_numpy_stand_ins_for_the_indexing_kernels_are_caught(fresh_plans: None, monkeypatch: pytest.MonkeyPatch) -> None:
    x = random_array((6, 4))
    indices = np.array([5, 0, 5, 2])
    check_rrule(sr.take, x, indices, Val(0))  # the real kernels pass
    check_rrule(sr.getindex, x, sr.ix[1:-1, ::2])
    check_rrule(sr.take_along_axis, x, np.array([[1, 3]] * 6), Val(1))

    def numpy_take_pullback(self: TakePlan, saved: object) -> Any:
        def add_at_pullback(dy: Array) -> tuple[object, ...]:
            dx = np.zeros(self.in_shape, self.out_dtype)
            np.add.at(dx, saved, dy)  # type: ignore[arg-type]
            return (dx, NoTangent())

        return add_at_pullback

    sr.clear_caches()
    monkeypatch.setattr(TakePlan, "pullback", numpy_take_pullback)
    y, back = rrule(sr.take, x, indices, Val(0))
    np.testing.assert_array_equal(dense(back(np.ones(y.shape))[0]), take_reference_pullback((6, 4), indices, 0, np.ones(y.shape)))
    with pytest.raises(AssertionError, match="take pullback: no compiled kernel of its signature ran"):
        check_rrule(sr.take, x, indices, Val(0))
    monkeypatch.undo()
    sr.clear_caches()

    def numpy_getindex_pullback(self: GetindexPlan, saved: object) -> Any:
        def assignment(dy: Array) -> tuple[object, ...]:
            dx = np.zeros(self.in_shape, self.out_dtype)
            dx[self.view_index] = dy
            return (dx,)

        return assignment

    monkeypatch.setattr(GetindexPlan, "pullback", numpy_getindex_pullback)
    with pytest.raises(AssertionError, match="getindex pullback: no compiled kernel of its signature ran"):
        check_rrule(sr.getindex, x, sr.ix[1:-1, ::2])
    monkeypatch.undo()
    sr.clear_caches()

    def numpy_gather(self: TakeAlongAxisPlan, source: Array, w: Array, dtype: Any) -> Array:
        return np.take_along_axis(source, w.reshape(self.out_shape), axis=self.axis).astype(dtype)

    monkeypatch.setattr(TakeAlongAxisPlan, "_gather", numpy_gather)
    with pytest.raises(AssertionError, match="take_along_axis forward: no compiled kernel"):
        check_rrule(sr.take_along_axis, x, np.array([[1, 3]] * 6), Val(1))


def test_warm_calls_compile_nothing_and_take_no_fallback() -> None:
    x = random_array((6, 4), np.float32)
    indices = np.array([5, 0, 5, 2])
    calls: list[tuple[Any, tuple[object, ...], dict[str, Val[bool]]]] = [
        (sr.take, (x, indices, Val(0)), {}),
        (sr.take, (x, np.array([0, 2, 2, 5]), Val(0)), {"sorted": Val(True)}),
        (sr.take, (x, np.array([3, 0, 2]), Val(0)), {"unique": Val(True)}),
        (sr.take_along_axis, (x, np.array([[1, 3]] * 6), Val(1)), {}),
        (sr.index_add, (x, indices, np.ones((4, 4), np.float32)), {}),
        (sr.getindex, (x, sr.ix[::2, 1:]), {}),
    ]
    for op, args, kwargs in calls:
        y, back = _rrule(op, *args, **kwargs)
        back(np.ones(np.shape(y), np.float32))
    with sr.no_compile(), sr.no_fallback():
        for op, args, kwargs in calls:
            y, back = _rrule(op, *args, **kwargs)
            back(np.ones(np.shape(y), np.float32))
            _frule(op, (np.ones(x.shape, np.float32),) + (NoTangent(),) * (len(args) - 1), *args, **kwargs)


def test_precompile_and_explain_list_the_kernels() -> None:
    spec = sr.ArraySpec((6, 4), np.float32)
    signatures = sr.precompile(sr.getindex, spec, sr.ix[1:, ::2])
    assert [s.kind for s in signatures] == ["pullback"]
    text = sr.explain(sr.take, random_array((6, 4)), np.array([1, 2]), Val(0))
    assert "balance" in text and "accumulate" in text and "gather" in text


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from collections.abc import Callable  # noqa: E402


def torch_indexing(leaf: Callable[..., Any]) -> list[tuple[str, tuple[Callable[..., Any], tuple[Any, ...], Callable[..., Any]]]]:
    """``(id, (our call on the differentiable inputs, those inputs, torch's own op))``; ``leaf(*shape,
    seed=...)`` makes a differentiable input. Repeated and negative indices throughout: their
    pullbacks are scatter-adds."""
    import torch

    import stablerules.torch as srt

    take_i = torch.tensor([0, -1, 2, 0, 3, -1])
    along_i = torch.tensor([[0, 1, -1, 2, 0], [4, 4, -5, 0, 1], [1, 1, 1, 1, 1], [-1, 0, 3, 3, 2]])
    add_i = torch.tensor([0, 1, 1, -1, 0])
    index = sr.ix[1:, ::-2]
    return [
        ("take axis", (lambda x: srt.take(x, take_i, axis=Val(1)), (leaf(4, 5),), lambda x: x.index_select(1, take_i % 5))),
        ("take flat", (lambda x: srt.take(x, take_i), (leaf(4, 5),), lambda x: torch.take(x, take_i % 20))),
        (
            "take_along_axis",
            (lambda x: srt.take_along_axis(x, along_i, Val(1)), (leaf(4, 5),), lambda x: torch.take_along_dim(x, along_i % 5, 1)),
        ),
        (
            "index_add",
            (lambda x, v: srt.index_add(x, add_i, v, Val(0)), (leaf(4, 3), leaf(5, 3, seed=4)), lambda x, v: torch.index_add(x, 0, add_i % 4, v)),
        ),
        (
            "index_add axis 1",
            (lambda x, v: srt.index_add(x, add_i, v, Val(-1)), (leaf(3, 4), leaf(3, 5, seed=4)), lambda x, v: torch.index_add(x, 1, add_i % 4, v)),
        ),
        ("getindex", (lambda x: srt.getindex(x, index), (leaf(4, 5),), lambda x: x[1:, [4, 2, 0]])),
        ("getindex newaxis int", (lambda x: srt.getindex(x, sr.ix[None, ..., -2]), (leaf(3, 4, 2),), lambda x: x[None, ..., -2])),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("getindex", lambda x: srj.getindex(x, sr.ix[1:, ::-2])),
        ("take", lambda x: srj.take(x, np.array([2, 0, 2]), Val(0))),
        ("take_along_axis", lambda x: srj.take_along_axis(x, np.array([[1, -1]] * 3), Val(1))),
        ("index_add", lambda x: srj.index_add(x, np.array([2, 0, 2]), np.ones((3, 4)))),
    ]


# Every other element on the last axis: the float32 pullback writes dx's pairs of elements as
# 64-bit units (the selected half from dy, the other zero); odd extents and other dtypes take
# the element loop. Starts even and odd, reversed steps, one or no element selected.
STEP_TWO_CASES = [
    ((6, 8), sr.ix[:, ::2]),
    ((6, 8), sr.ix[:, 1::2]),
    ((6, 8), sr.ix[:, ::-2]),
    ((6, 8), sr.ix[:, -2::-2]),
    ((6, 8), sr.ix[1:-1, 2:7:2]),
    ((5, 7), sr.ix[:, 1::2]),
    ((5, 7), sr.ix[:, ::-2]),
    ((3, 4, 10), sr.ix[1, :, 3:9:2]),
    ((5, 10, 4), sr.ix[:, ::2, 1::2]),
    ((7, 2), sr.ix[1:, 1::2]),
    ((4, 6), sr.ix[:, 3:4:2]),
    ((4, 6), sr.ix[:, 6::2]),
    ((4, 6), sr.ix[2:2, ::2]),
    ((37, 130), sr.ix[2:-3, 1::2]),
    ((37, 130), sr.ix[::3, -1::-2]),
    ((66, 2048), sr.ix[1:-1, ::2]),
]


@pytest.mark.parametrize(("shape", "index"), STEP_TWO_CASES, ids=[f"{s}-{i}" for s, i in STEP_TWO_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_getindex_step_two_pullback_is_numpys_assignment_bit_for_bit(
    shape: tuple[int, ...], index: sr.StaticIndex[Any], dtype: npt.DTypeLike, threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stablerules import _parallel

    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", threads)
    x = random_array(shape, dtype)
    y, back = rrule(sr.getindex, x, index)
    dy = random_array(y.shape, dtype)
    if dy.size >= 3:  # bits copied, not values: a negative zero and a NaN with a payload
        dy.reshape(-1)[:3] = (-0.0, np.inf, 0.0)
        dy.reshape(-1)[1:2].view(np.uint32 if np.dtype(dtype).itemsize == 4 else np.uint64)[0] |= 5
    expected = np.zeros(shape, dtype)
    expected[numpy_index(index)] = dy
    for _ in range(2):  # a reused output block: every element is written
        got = np.asarray(dense(back(dy)[0]))
        assert got.dtype == np.dtype(dtype) and got.shape == shape
        assert got.tobytes() == expected.tobytes()
    with sr.no_compile(), sr.no_fallback():
        assert np.asarray(dense(back(dy)[0])).tobytes() == expected.tobytes()


@pytest.mark.parametrize(("x_dtype", "values_dtype"), [("f4", "f8"), (">f4", "<f8"), ("c8", "c16"), ("f4", "f4"), ("f8", "f4")])
@pytest.mark.parametrize(("shape", "axis"), [((4, 3), 0), ((4, 3), 1), ((2, 5, 3), 1)])
def test_index_add_of_wider_values_is_np_add_at_bit_for_bit(
    x_dtype: str, values_dtype: str, shape: tuple[int, ...], axis: int
) -> None:
    """On main: values were cast to x's dtype before the adds, and np.add.at adds each in the
    wider dtype and rounds after each: float32 1 + float64 (2**-24 + 2**-50) was 1.0, not
    1.0000001."""
    rng = np.random.default_rng(len(shape) + axis)
    x = rng.standard_normal(shape).astype(x_dtype)
    indices = rng.integers(-shape[axis], shape[axis], 9)
    values_shape = shape[:axis] + (9,) + shape[axis + 1 :]
    values = (rng.standard_normal(values_shape) * 2.0**-20 + 2.0**-24 + 2.0**-50).astype(values_dtype)
    expected = x.copy()
    np.add.at(expected, (slice(None),) * axis + (indices,), values)  # type: ignore[arg-type]  # numpy's stub takes no tuple index
    got = sr.index_add(x, indices, values, axis=Val(axis))
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
    one = np.ones(1, np.float32)
    np.add.at(one, [0], np.array([2.0**-24 + 2.0**-50]))
    assert sr.index_add(np.ones(1, np.float32), np.array([0]), np.array([2.0**-24 + 2.0**-50]), axis=Val(0))[0] == one[0] > 1
