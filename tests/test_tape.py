"""Pullbacks kept on a tape: few objects for the garbage collector, same gradients.

A ``saves_primals`` plan with a shared ``saved_dense`` (kron's real CPU case) gives one small
object per rrule holding the signature's shared form and the call's saved arrays; a long
hand-chained tape then keeps its per-step cost (``bench/tape.py`` times it)."""

from __future__ import annotations

import gc
import traceback
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr

Array = npt.NDArray[Any]


def _kron_pullback_reference(dy: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """``np.kron``'s adjoint for 2-D operands, written with ``tensordot`` (independent of the
    rule's kernel)."""
    m, n = a.shape
    p, q = b.shape
    d4 = dy.reshape(m, p, n, q)
    return np.tensordot(d4, b, axes=([1, 3], [0, 1])), np.tensordot(d4, a, axes=([0, 2], [0, 1]))


def _tracked_reachable(root: object, stop: set[int]) -> list[object]:
    """The objects the collector tracks that ``root`` reaches through ``gc.get_referents``,
    not entering ``stop`` (the signature's shared objects) nor types and modules."""
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or id(item) in stop or not gc.is_tracked(item):
            continue
        if issubclass(type(item), type) or type(item).__name__ == "module":
            continue
        seen[id(item)] = item
        stack.extend(gc.get_referents(item))
    return list(seen.values())


def _shared_objects(root: object) -> set[int]:
    found: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in found or issubclass(type(item), type) or type(item).__name__ == "module":
            continue
        found.add(id(item))
        stack.extend(gc.get_referents(item))
    return found


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_kron_pullback_holds_its_form_and_saved_arrays_only(dtype: str) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)).astype(dtype), rng.standard_normal((3, 2)).astype(dtype)
    _, back = sr.rrule(sr.kron, a, b)
    form = back.form
    reached = _tracked_reachable(back, _shared_objects(form))
    # The pullback itself and the tuple of its saved operands: nothing per call besides.
    assert len(reached) <= 2, [type(item).__name__ for item in reached]
    _, other = sr.rrule(sr.kron, a, b)
    assert other.form is form  # shared by every rrule of the signature


def test_a_tape_of_kron_pullbacks_tracks_a_few_objects_per_step() -> None:
    rng = np.random.default_rng(1)
    operands = [(rng.standard_normal((2, 2)), rng.standard_normal((2, 2))) for _ in range(400)]
    sr.rrule(sr.kron, *operands[0])  # the plan and its shared form exist before counting
    gc.collect()
    before = len(gc.get_objects())
    tape = [sr.rrule(sr.kron, a, b)[1] for a, b in operands]
    after = len(gc.get_objects())
    per_step = (after - before - 1) / len(tape)  # the list itself is one
    assert per_step <= 3.0, per_step
    # and each still computes its own call's gradient
    dy = rng.standard_normal((4, 4))
    for (a, b), back in zip(operands[:5], tape[:5]):
        da, db = back(dy)
        want_a, want_b = _kron_pullback_reference(dy, a, b)
        np.testing.assert_allclose(da, want_a, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(db, want_b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("a_dtype", "b_dtype"), [("float32", "float32"), ("float32", "float64"), ("float64", "float32")])
def test_kron_pullback_gradients_match_finite_differences(a_dtype: str, b_dtype: str) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3)).astype(a_dtype)
    b = rng.standard_normal((3, 2)).astype(b_dtype)
    y, back = sr.rrule(sr.kron, a, b)
    dy = rng.standard_normal(y.shape).astype(y.dtype)
    da, db = back(dy)
    assert (da.dtype, db.dtype, da.shape, db.shape) == (a.dtype, b.dtype, a.shape, b.shape)
    a64, b64, dy64 = a.astype(np.float64), b.astype(np.float64), dy.astype(np.float64)
    step = 1e-6
    for operand, gradient, which in ((a64, da, 0), (b64, db, 1)):
        numeric = np.empty(operand.shape)
        for index in np.ndindex(operand.shape):
            plus, minus = operand.copy(), operand.copy()
            plus[index] += step
            minus[index] -= step
            pair_plus = (plus, b64) if which == 0 else (a64, plus)
            pair_minus = (minus, b64) if which == 0 else (a64, minus)
            numeric[index] = np.sum(dy64 * (np.kron(*pair_plus) - np.kron(*pair_minus))) / (2 * step)
        np.testing.assert_allclose(gradient, numeric, rtol=1e-4, atol=1e-4)


def test_kron_pullback_other_cotangents_and_errors() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 2)), rng.standard_normal((3, 1))
    y, back = sr.rrule(sr.kron, a, b)
    dy = rng.standard_normal((y.shape[1], y.shape[0])).T  # not C-contiguous: the general path
    want = _kron_pullback_reference(np.ascontiguousarray(dy), a, b)
    for got, expected in zip(back(dy), want):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    da, db = back(sr.Fill(2.0, y.shape, y.dtype))
    np.testing.assert_allclose(sr.materialize(da, a), _kron_pullback_reference(np.full(y.shape, 2.0), a, b)[0])
    np.testing.assert_allclose(sr.materialize(db, b), _kron_pullback_reference(np.full(y.shape, 2.0), a, b)[1])
    assert back(sr.ZeroTangent()) == (sr.ZeroTangent(), sr.ZeroTangent())
    with pytest.raises(ValueError, match=r"kron.*\(6, 2\).*\(2, 6\)|kron.*\(2, 6\).*\(6, 2\)"):
        back(np.ones((2, 6)))


def test_kron_pullback_is_named_in_tracebacks() -> None:
    a, b = np.ones((2, 2)), np.ones((2, 2))
    _, back = sr.rrule(sr.kron, a, b)
    assert back.__name__ == "kron_pullback"  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as raised:
        back(np.ones((3, 3)))
    names = [frame.name for frame in traceback.extract_tb(raised.value.__traceback__)]
    assert "kron_pullback" in names, names
