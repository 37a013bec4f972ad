"""NumPy parity and the README's promises across every op (issue 38): a dense cotangent gives
dense, writable tangents (read-only and stride-0 cotangents included); NumPy's masked arrays
and matrices are refused with a ``TypeError`` naming the op and the argument, never silently
turned into plain arrays.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Val
from tests import references

Array = npt.NDArray[Any]
RNG = np.random.default_rng(38)

# Calls on ops chosen at run time go through an untyped name (mypy would try every overload).
_rrule: Callable[..., Any] = sr.rrule


def random_array(shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    return references.random_array(RNG, shape, dtype)


X = random_array((3, 4))
X32 = random_array((3, 4), np.float32)

# (id, op, positional arguments, keyword arguments): every view op whose pullback hands out
# views of the cotangent, and a few others for good measure.
VIEW_CALLS: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = [
    ("flip", sr.flip, (X,), {}),
    ("flip axis", sr.flip, (X, Val(1)), {}),
    ("transpose", sr.transpose, (X,), {}),
    ("permute_dims", sr.permute_dims, (X, Val((1, 0))), {}),
    ("swapaxes", sr.swapaxes, (X, Val(1), Val(0)), {}),
    ("reshape", sr.reshape, (X, Val((2, 6))), {}),
    ("pad", sr.pad, (X, Val(1)), {}),
    ("pad constant", sr.pad, (X, Val((1, 0, 2, 1)), 2.0), {}),
    ("concatenate", sr.concatenate, ((X, X),), {"axis": Val(1)}),
    ("concatenate mixed dtypes", sr.concatenate, ((X, X32),), {"axis": Val(0)}),
    ("stack", sr.stack, ((X, X),), {}),
    ("hstack", sr.hstack, ((X, X),), {}),
    ("vstack", sr.vstack, ((X[0], X[1]),), {}),
    ("cat", sr.cat, (X, X), {"dims": Val(0)}),
    ("cat block-diagonal", sr.cat, (X, X), {"dims": Val((0, 1))}),
    ("getindex covering", sr.getindex, (X, sr.ix[::-1]), {}),
    ("getindex", sr.getindex, (X, sr.ix[1:, ::2]), {}),
    ("index_add", sr.index_add, (X, np.array([0, 2, 0]), random_array((3, 4))), {}),
    ("roll", sr.roll, (X, Val(1)), {}),
    ("split", sr.split, (X, Val(2), Val(1)), {}),
]


def _cotangents(y: Any, kind: str) -> Any:
    """A cotangent of ``y``'s structure: read-only, or a stride-0 ``np.broadcast_to`` view."""

    def one(part: Array) -> Array:
        if kind == "broadcast":
            return np.broadcast_to(np.asarray(1.5, part.dtype), part.shape)
        frozen = random_array(part.shape, part.dtype)
        frozen.flags.writeable = False
        return frozen

    return tuple(one(part) for part in y) if isinstance(y, tuple) else one(y)


def _arrays(tangents: tuple[Any, ...]) -> list[Array]:
    found: list[Array] = []
    for tangent in tangents:
        if isinstance(tangent, tuple):
            found += _arrays(tangent)
        elif isinstance(tangent, np.ndarray):
            found.append(tangent)
    return found


def _owns_each_element(array: Array) -> bool:
    return not any(stride == 0 and extent > 1 for stride, extent in zip(array.strides, array.shape))


@pytest.mark.parametrize(("name", "op", "args", "kwargs"), VIEW_CALLS, ids=[call[0] for call in VIEW_CALLS])
@pytest.mark.parametrize("kind", ["read-only", "broadcast"])
def test_dense_cotangents_give_dense_writable_tangents(name: str, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any], kind: str) -> None:
    """The README: "A dense cotangent gives dense, writable tangents for every op". On main the
    view ops (flip, transpose, permute_dims, reshape, pad, the concatenate family, a covering
    getindex, index_add's ``dx``) returned read-only views of a read-only ``dy`` and stride-0
    read-only views of an ``np.broadcast_to`` one (``assert not dx.flags.writeable`` held).
    Each tangent must be writable, own each of its elements, and equal the pullback of a
    writable copy of the same cotangent (which is the zero-copy case)."""
    y, back = _rrule(op, *args, **kwargs)
    dy = _cotangents(y, kind)
    tangents = _arrays(back(dy))
    copies = tuple(np.array(part) for part in dy) if isinstance(dy, tuple) else np.array(dy)
    expected = _arrays(back(copies))
    assert tangents and len(tangents) == len(expected)
    for tangent, reference in zip(tangents, expected):
        assert tangent.flags.writeable, name
        assert _owns_each_element(tangent), (name, tangent.strides)
        assert tangent.shape == reference.shape and tangent.dtype == reference.dtype
        np.testing.assert_array_equal(tangent, reference)
        tangent += 1.0  # accumulating in place works and writes nothing else
    for part in dy if isinstance(dy, tuple) else (dy,):
        assert not part.flags.writeable  # the cotangent itself was left alone


def test_writable_cotangents_still_give_zero_copy_views() -> None:
    """Copies happen only for a read-only or stride-0 cotangent: a writable one still pulls
    back to views of itself (the view ops' point)."""
    dy = random_array((3, 4))
    for op, args in ((sr.flip, (X,)), (sr.transpose, (X,)), (sr.reshape, (X, Val((12,)))), (sr.pad, (random_array((1, 2)), Val(1)))):
        y, back = _rrule(op, *args)
        cotangent = dy.reshape(y.shape) if y.size == dy.size else random_array(y.shape)
        (dx,) = back(cotangent)[:1]
        assert np.shares_memory(dx, cotangent) and dx.flags.writeable
    _, back = _rrule(sr.concatenate, (X, X), axis=Val(0))
    wide = random_array((6, 4))
    ((da, db),) = back(wide)
    assert np.shares_memory(da, wide) and np.shares_memory(db, wide)
    _, back = _rrule(sr.index_add, X, np.array([1]), random_array((1, 4)))
    dx = back(dy)[0]
    assert dx is dy


# --------------------------------------------------------------------------------------------
# Masked arrays and matrices: refused by the one input layer, for every op
# --------------------------------------------------------------------------------------------

MASKED = np.ma.array(np.arange(12.0).reshape(3, 4), mask=np.arange(12).reshape(3, 4) % 5 == 0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", PendingDeprecationWarning)  # NumPy discourages np.matrix
    MATRIX = np.asmatrix(np.arange(12.0).reshape(3, 4))

SUBCLASS_CALLS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("repeat", lambda a: sr.repeat(a, Val(2), Val(0)), "x"),
    ("repeat counts", lambda a: sr.repeat(np.ones(3), a[0, :3].astype(np.int64)), "repeats"),
    ("tile", lambda a: sr.tile(a, Val(2)), "x"),
    ("roll", lambda a: sr.roll(a, Val(1), Val(0)), "x"),
    ("flip", lambda a: sr.flip(a), "x"),
    ("sum", lambda a: sr.sum(a, axis=Val(0)), "x"),
    ("mean", lambda a: sr.mean(a), "x"),
    ("broadcast_to", lambda a: sr.broadcast_to(a, Val((2, 3, 4))), "x"),
    ("reshape", lambda a: sr.reshape(a, Val((12,))), "x"),
    ("permute_dims", lambda a: sr.permute_dims(a, Val((1, 0))), "x"),
    ("pad", lambda a: sr.pad(a, Val(1)), "x"),
    ("split", lambda a: sr.split(a, Val(2), Val(1)), "x"),
    ("concatenate", lambda a: sr.concatenate((X, a)), "arrays[1]"),
    ("cat", lambda a: sr.cat(a, X, dims=Val(0)), "arrays[0]"),
    ("kron", lambda a: sr.kron(X, a), "b"),
    ("getindex", lambda a: sr.getindex(a, sr.ix[1:]), "x"),
    ("take", lambda a: sr.take(a, np.array([0, 2]), Val(1)), "x"),
    ("take indices", lambda a: sr.take(X, (a[:, :1] % 4).astype(np.int64), Val(1)), "indices"),
    ("take_along_axis", lambda a: sr.take_along_axis(a, np.zeros((3, 1), np.intp), Val(1)), "x"),
    ("index_add values", lambda a: sr.index_add(X, np.array([0, 1, 2]), a), "values"),
    ("rrule", lambda a: sr.rrule(sr.tile, a, Val(2)), "x"),
    ("pullback", lambda a: sr.pullback(sr.flip, a), "x"),
    ("precompile", lambda a: sr.precompile(sr.roll, a, Val(1)), "x"),
]


@pytest.mark.parametrize(("name", "call", "argument"), SUBCLASS_CALLS, ids=[call[0] for call in SUBCLASS_CALLS])
@pytest.mark.parametrize("kind", ["masked", "matrix"])
def test_masked_arrays_and_matrices_are_refused_by_every_op(name: str, call: Callable[[Any], Any], argument: str, kind: str) -> None:
    """On main a masked array through ``repeat``/``roll``/``tile`` came back as a plain array
    with the masked payloads exposed (NumPy keeps the mask), and ``sr.sum(m, axis=Val(0))`` of
    an ``np.matrix`` raised ``TypeError: matrix.sum() got an unexpected keyword argument
    'keepdims'`` (and ``sr.roll`` of one crashed the process with a segmentation fault). Now every op refuses both with a ``TypeError`` naming the op, the argument
    and the subclass, before any kernel runs, also after a plain array of the same shape and
    dtype has built the signature's plan (no plan-cache hit lets one through)."""
    value = MASKED if kind == "masked" else MATRIX
    plain = np.asarray(value)
    op_name = name.split()[0] if name not in ("rrule", "pullback", "precompile") else {"rrule": "tile", "pullback": "flip", "precompile": "roll"}[name]
    call(np.array(plain))  # the plain array works, and warms the plan
    what = "MaskedArray" if kind == "masked" else "matrix"
    with pytest.raises(TypeError, match=rf"^{op_name}: .*{re.escape(argument)}.*\b{what}\b") as error:
        call(value)
    if argument != "repeats":  # repeat's counts have their own reader, and message
        assert f"argument '{argument}' is a numpy.{'ma.' if kind == 'masked' else ''}{what}" in str(error.value)


def test_masked_and_matrix_cotangents_are_refused() -> None:
    _, back = sr.rrule(sr.flip, X)
    for value, what in ((MASKED, "MaskedArray"), (MATRIX, "matrix")):
        with pytest.raises(TypeError, match=rf"flip pullback: the cotangent dy must be an array, .* got {what}"):
            back(value)


def test_other_ndarray_subclasses_are_read_as_arrays(tmp_path: Any) -> None:
    """A memory-mapped array (an ndarray subclass with plain array semantics) is an array."""
    mapped = np.memmap(tmp_path / "x.bin", dtype=np.float64, mode="w+", shape=(3, 4))
    mapped[:] = X
    np.testing.assert_array_equal(sr.repeat(mapped, Val(2), Val(0)), np.repeat(X, 2, axis=0))
    np.testing.assert_array_equal(sr.sum(mapped, axis=Val(0)), X.sum(axis=0))
