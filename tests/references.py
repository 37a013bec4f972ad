"""Independent NumPy references shared by the test modules (never the rules' own formulas),
and the small typed wrappers the rule tests share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

import stablerules as sr

Array = npt.NDArray[Any]
Back = Callable[[object], tuple[object, ...]]

# Rule calls on an op and arguments typed only as callables and objects go through this untyped
# name, so that mypy does not try each of the rules' thousands of overloads on every such call
# (the result would be Any all the same).
_rrule: Callable[..., Any] = sr.rrule


def array_rrule(op: Callable[..., object], *args: object, **kwargs: object) -> tuple[Array, Back]:
    """``sr.rrule`` with the primal checked to be an array (for the type checker too)."""
    y, back = _rrule(op, *args, **kwargs)
    assert isinstance(y, np.ndarray)
    return y, back


def dense(tangent: object) -> Array:
    """A tangent checked to be a dense NumPy array (not a ``Fill``, a zero or a thunk)."""
    assert isinstance(tangent, np.ndarray), tangent
    array: Array = tangent
    return array


def kron_pullback(a: Array, b: Array, dy: Array) -> tuple[Array, Array]:
    """``(da, db)`` of ``np.kron(a, b)`` for cotangent ``dy``, by two einsums over dy's blocks:
    ``da = sum dy * conj(b)``, ``db = sum dy * conj(a)`` (the complex convention of SPEC 4)."""
    n = max(a.ndim, b.ndim)
    a_ = a.reshape((1,) * (n - a.ndim) + a.shape)
    b_ = b.reshape((1,) * (n - b.ndim) + b.shape)
    blocks = dy.reshape(tuple(extent for pair in zip(a_.shape, b_.shape) for extent in pair))
    letters = "abcdefghijklmnopqrst"
    a_axes = "".join(letters[2 * d] for d in range(n))
    b_axes = "".join(letters[2 * d + 1] for d in range(n))
    pairs = "".join(letters[2 * d] + letters[2 * d + 1] for d in range(n))
    da = np.einsum(f"{pairs},{b_axes}->{a_axes}", blocks, np.conj(b_)).reshape(a.shape)
    db = np.einsum(f"{pairs},{a_axes}->{b_axes}", blocks, np.conj(a_)).reshape(b.shape)
    return da, db


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    """Random values of ``dtype``: normal for floating and complex, 0..99 for integers, coin
    flips for bools."""
    resolved = np.dtype(dtype)
    if resolved.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(resolved)
    if resolved.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if resolved.kind in "iu":
        return rng.integers(0, 100, shape).astype(resolved)
    return np.asarray(rng.standard_normal(shape)).astype(resolved)


def small_integers(rng: np.random.Generator, shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    """Small integers (-8..8) in ``dtype``: sums of them are exact in any order."""
    resolved = np.dtype(dtype)
    values: Array = np.asarray(rng.integers(-8, 9, shape))
    if resolved.kind == "c":
        values = values + 1j * rng.integers(-8, 9, shape)
    elif resolved.kind == "b":
        values = values > 0
    return np.asarray(values, dtype=resolved)
