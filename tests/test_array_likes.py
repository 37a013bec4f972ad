"""Array arguments follow NumPy's rule for array-likes, the same in every op (``_arrays.array_like``).

Lists and tuples (nested), NumPy scalars and Python scalars are read with ``np.asarray``, so
each call equals NumPy's own on the same arguments, dtype included, and ``concatenate``
refuses a scalar exactly where ``np.concatenate`` does (0-d input); ``cat`` keeps Python
scalars weak (Julia's ``cat``, NEP 50). Anything NumPy would read as an object array (a dict,
a set) is a ``TypeError`` naming the argument. Pullbacks give a list argument a tangent of
``np.asarray(list)``'s shape and dtype, checked by the adjoint identity against NumPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import NoTangent, Val

Array = npt.NDArray[Any]
X32 = np.arange(3.0, dtype=np.float32)
_L = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
srx: Any = sr  # the ops untyped, for the calls on lists below

# The ops' types ask for arrays (that is what gives exact dtypes); array-likes are a run-time
# reading, so the calls here go through plain callables.
repeat: Callable[..., Array] = sr.repeat
tile: Callable[..., Array] = sr.tile
kron: Callable[..., Array] = sr.kron
concatenate: Callable[..., Array] = sr.concatenate
stack: Callable[..., Array] = sr.stack
hstack: Callable[..., Array] = sr.hstack
vstack: Callable[..., Array] = sr.vstack
cat: Callable[..., Array] = sr.cat
rrule: Callable[..., tuple[Array, Callable[[object], tuple[Any, ...]]]] = sr.rrule

# (name, stablerules call, NumPy call): the arguments mix arrays with lists, tuples and scalars.
CASES: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
    ("repeat-list", lambda: repeat([1.0, 2.0], Val(2)), lambda: np.repeat([1.0, 2.0], 2)),
    ("repeat-nested-tuple", lambda: repeat(((1, 2), (3, 4)), Val(2), axis=Val(1)), lambda: np.repeat(((1, 2), (3, 4)), 2, axis=1)),
    ("repeat-python-scalar", lambda: repeat(2.5, Val(3)), lambda: np.repeat(2.5, 3)),
    ("repeat-numpy-scalar", lambda: repeat(np.float32(2.5), Val(3)), lambda: np.repeat(np.float32(2.5), 3)),
    ("tile-list", lambda: tile([1, 2], Val((2, 1))), lambda: np.tile([1, 2], (2, 1))),
    ("kron-list", lambda: kron([1.0, 2.0], X32), lambda: np.kron([1.0, 2.0], X32)),
    ("kron-scalar", lambda: kron(2, X32), lambda: np.kron(2, X32)),
    ("concatenate-list", lambda: concatenate((X32, [1.0, 2.0])), lambda: np.concatenate((X32, [1.0, 2.0]))),
    ("concatenate-lists-only", lambda: concatenate([[1, 2], [3]]), lambda: np.concatenate([[1, 2], [3]])),
    ("stack-python-scalars", lambda: stack((1.0, 2.0)), lambda: np.stack((1.0, 2.0))),
    ("stack-numpy-scalars", lambda: stack((np.int8(1), np.int8(2))), lambda: np.stack((np.int8(1), np.int8(2)))),
    ("hstack-scalar", lambda: hstack((X32, 1.0)), lambda: np.hstack((X32, 1.0))),
    ("vstack-list", lambda: vstack((X32, [1, 2, 3])), lambda: np.vstack((X32, [1, 2, 3]))),
    ("cat-list", lambda: cat(X32, [1.0], dims=Val(0)), lambda: np.concatenate((X32, [1.0]))),
    ("cat-numpy-scalar", lambda: cat(X32, np.float64(1.5), dims=Val(0)), lambda: np.concatenate((X32, [np.float64(1.5)]))),
    # Every other op on a nested list (pad's was an AttributeError: found by tools/behaviour.py).
    ("flip-list", lambda: srx.flip(_L, Val(0)), lambda: np.flip(_L, 0)),
    ("roll-list", lambda: srx.roll(_L, Val(1), Val(1)), lambda: np.roll(_L, 1, 1)),
    ("permute_dims-list", lambda: srx.permute_dims(_L, Val((1, 0))), lambda: np.transpose(_L, (1, 0))),
    ("transpose-list", lambda: srx.transpose(_L), lambda: np.transpose(_L)),
    ("reshape-list", lambda: srx.reshape(_L, Val((3, 2))), lambda: np.reshape(_L, (3, 2))),
    ("broadcast_to-list", lambda: srx.broadcast_to(_L, Val((2, 2, 3))), lambda: np.broadcast_to(_L, (2, 2, 3))),
    ("sum-list", lambda: srx.sum(_L, Val(1)), lambda: np.sum(_L, 1)),
    ("mean-list", lambda: srx.mean(_L, Val(0)), lambda: np.mean(_L, 0)),
    ("pad-list", lambda: srx.pad(_L, Val(1)), lambda: np.pad(_L, 1)),
    ("pad-int-list", lambda: srx.pad([[1, 2], [3, 4]], Val((0, 1, 2, 0)), 7), lambda: np.pad([[1, 2], [3, 4]], ((0, 1), (2, 0)), constant_values=7)),
    ("getindex-list", lambda: srx.getindex(_L, sr.ix[1, ::-1]), lambda: np.asarray(_L)[1, ::-1]),
    ("take-list", lambda: srx.take(_L, [0, 2], Val(1)), lambda: np.take(_L, [0, 2], 1)),
    ("take_along_axis-list", lambda: srx.take_along_axis(_L, [[0], [2]], Val(1)), lambda: np.take_along_axis(np.asarray(_L), np.array([[0], [2]]), 1)),
    ("index_add-list", lambda: srx.index_add(_L, [0, 0], [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], Val(0)), lambda: np.asarray(_L) + [[3.0], [0.0]]),
]


@pytest.mark.parametrize(("cuts", "axis"), [(Val((2, 1)), Val(0)), (Val(3), Val(1)), (Val((1,)), Val(-1))], ids=str)
def test_split_of_a_list_is_numpys(cuts: Val[int] | Val[tuple[int, ...]], axis: Val[int]) -> None:
    """``split`` of a nested list: NumPy's parts (it was a ``TypeError`` from indexing the list)."""
    parts = srx.split(_L, cuts, axis)
    expected = np.split(np.asarray(_L), cuts.value, axis.value)
    assert len(parts) == len(expected)
    for part, want in zip(parts, expected):
        assert isinstance(part, np.ndarray) and part.dtype == want.dtype
        np.testing.assert_array_equal(part, want)


@pytest.mark.parametrize(("name", "ours", "numpy"), CASES, ids=[case[0] for case in CASES])
def test_array_likes_are_read_as_numpy_reads_them(
    name: str, ours: Callable[[], object], numpy: Callable[[], object]
) -> None:
    expected = np.asarray(numpy())
    result = ours()
    assert isinstance(result, np.ndarray), name
    assert result.dtype == expected.dtype and result.shape == expected.shape, (name, result, expected)
    np.testing.assert_array_equal(result, expected)


def test_cat_keeps_python_scalars_weak() -> None:
    result = cat(X32, 1.5, dims=Val(0))
    assert result.dtype == np.float32  # NumPy's np.concatenate((X32, [1.5])) would be float64
    np.testing.assert_array_equal(result, np.array([0.0, 1.0, 2.0, 1.5], dtype=np.float32))


def test_concatenate_refuses_a_scalar_as_numpy_does() -> None:
    with pytest.raises(ValueError):
        np.concatenate((X32, 1.0))
    with pytest.raises(ValueError, match=r"zero-dimensional.*arrays\[1\] has shape \(\)"):
        concatenate((X32, 1.0))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: repeat({1.0: 2.0}, Val(2)), r"argument 'x' must be an array .*got dict"),
        (lambda: kron(X32, {1.0}), r"argument 'b' must be an array .*got set"),
        (lambda: concatenate((X32, object())), r"arrays\[1\] must be an array, got object"),
        (lambda: repeat(["a", "b"], Val(2)), r"argument 'x' has dtype <U1"),
    ],
)
def test_what_numpy_reads_as_objects_or_strings_is_a_type_error(call: Callable[[], object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()


def test_a_ragged_list_is_a_value_error_naming_the_argument() -> None:
    with pytest.raises(ValueError, match=r"argument 'x' is not an array-like of one shape"):
        repeat([[1.0], [1.0, 2.0]], Val(2))
    with pytest.raises(ValueError, match=r"argument 'arrays\[0\]' is not an array-like of one shape"):
        concatenate(([[1.0], [1.0, 2.0]], X32))


def test_a_list_argument_gets_the_tangent_of_its_array() -> None:
    rng = np.random.default_rng(3)
    values = [1.0, 2.0, 3.0]
    y, back = rrule(sr.repeat, values, Val(2))
    dy = rng.standard_normal(6)
    (dx, counts) = back(dy)
    assert isinstance(dx, np.ndarray) and dx.shape == (3,) and dx.dtype == np.float64 and counts == NoTangent()
    v = rng.standard_normal(3)
    np.testing.assert_allclose(np.vdot(dx, v), np.vdot(dy, np.repeat(v, 2)), rtol=1e-12)

    y, back = rrule(sr.concatenate, ([1.0, 2.0], X32))
    dy = rng.standard_normal(5)
    ((da, db),) = back(dy)
    np.testing.assert_array_equal(np.asarray(da), dy[:2])
    assert np.asarray(db).dtype == np.float32
    # A list of ints is an int64 array: not differentiable, as an int64 array would be.
    _, back = rrule(sr.kron, [1, 2], X32)
    (da, db) = back(rng.standard_normal(6))
    assert da == NoTangent() and np.asarray(db).shape == (3,)
