"""``stablerules.autograd``: our ops as HIPS autograd primitives.

Gradients are checked by ``autograd.test_util.check_grads`` (finite differences, to second
order in reverse mode) and against autograd's own composition of the same op (``anp.repeat``,
``anp.concatenate``, ``anp.kron``...), never against our rules' formulas.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any, assert_type

import autograd
import autograd.numpy as anp
import numpy as np
import numpy.typing as npt
import pytest
from autograd.test_util import check_grads

import stablerules as sr
import stablerules.autograd as sra
from stablerules import Fill, Val, ZeroTangent
from stablerules.autograd._adapter import dense

from .rules import assert_every_op_has_a_row, collect, op_of

Array = npt.NDArray[Any]
RNG = np.random.default_rng(17)


def rand(*shape: int, complex_: bool = False) -> Array:
    real = RNG.standard_normal(shape)
    return real + 1j * RNG.standard_normal(shape) if complex_ else real


# (name, function of the arrays, arrays, autograd's own composition or None): each family's
# autograd_cases rows.
CASES: list[tuple[str, Callable[..., Any], tuple[Array, ...], Callable[..., Any] | None]] = collect("autograd_cases", rand)
IDS = [case[0] for case in CASES]

# Ops without rows in CASES, and why; every other op of the schema must have one.
NO_ROWS = {
    "getindex": "indices are data (or sr.ix): test_indexing_ops_check_grads_to_second_order",
    "take": "indices are data: test_indexing_ops_check_grads_to_second_order",
    "take_along_axis": "indices are data: test_indexing_ops_check_grads_to_second_order",
    "index_add": "indices are data: test_indexing_ops_check_grads_to_second_order",
}


def test_every_op_has_a_row() -> None:
    assert_every_op_has_a_row("autograd_cases", (op_of(name) for name in IDS), NO_ROWS)
    assert len(set(IDS)) == len(IDS), "two rows share an id"


@pytest.mark.parametrize(("name", "fn", "args", "reference"), CASES, ids=IDS)
def test_check_grads_second_order(
    name: str, fn: Callable[..., Any], args: tuple[Array, ...], reference: Callable[..., Any] | None
) -> None:
    argnums = tuple(range(len(args)))
    for argnum in argnums:
        check_grads(fn, modes=["rev"], order=2, argnum=argnum)(*args)  # type: ignore[call-arg]


@pytest.mark.parametrize(("name", "fn", "args", "reference"), [c for c in CASES if c[3] is not None], ids=[c[0] for c in CASES if c[3] is not None])
def test_gradients_equal_autograds_own_composition(
    name: str, fn: Callable[..., Any], args: tuple[Array, ...], reference: Callable[..., Any]
) -> None:
    y = reference(*args)
    weights = rand(*np.shape(y), complex_=np.iscomplexobj(y))

    def loss(f: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *xs: anp.real(anp.sum(f(*xs) * weights))

    np.testing.assert_allclose(fn(*args), y, rtol=1e-15, atol=1e-15)  # complex products may round differently
    for argnum in range(len(args)):
        ours = autograd.grad(loss(fn), argnum)(*args)
        theirs = autograd.grad(loss(reference), argnum)(*args)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
        assert ours.dtype == args[argnum].dtype and ours.flags.writeable


def test_plain_call_is_the_op() -> None:
    x = rand(3, 4)
    out = sra.repeat(x, inner=Val((2, 1)))
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, sr.repeat(x, inner=Val((2, 1))))


def test_third_order_kron() -> None:
    # d^3/da^3 of sum(kron(a, b)^3) at scalar-sized a: 6 * sum(b^3), exact.
    b = rand(2, 3)

    def f(a: Any) -> Any:
        return anp.sum(sra.kron(anp.reshape(a, (1, 1)), b) ** 3)

    third = autograd.grad(autograd.grad(autograd.grad(f)))(0.7)
    np.testing.assert_allclose(third, 6 * np.sum(b**3), rtol=1e-12)


def test_float32_gradients_stay_float32() -> None:
    x = rand(3, 2).astype(np.float32)
    g = autograd.grad(lambda x: anp.sum(sra.tile(x, Val((2, 2))) ** 2))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 4 * 2 * x, rtol=1e-6)


def test_counts_array_is_data_not_a_leaf() -> None:
    x = rand(4)
    counts = np.array([1, 0, 2, 3])
    g = autograd.grad(lambda x: anp.sum(anp.multiply(sra.repeat(x, counts, axis=Val(0)), 2.0)))(x)
    np.testing.assert_array_equal(g, 2.0 * counts)


def test_view_gradients_are_writable() -> None:
    # concatenate's pullback returns views of the cotangent; the gradients must be usable
    # (and writable) arrays of their own shapes.
    a, b = rand(2, 3), rand(2, 2)
    ga, gb = autograd.grad(lambda a, b: anp.sum(sra.concatenate((a, b), axis=Val(1)) ** 2), (0, 1))(a, b)  # type: ignore[arg-type]
    for g, x in ((ga, a), (gb, b)):
        assert g.flags.writeable
        g += 0.0
        np.testing.assert_allclose(g, 2 * x)


def test_lazy_tangents_materialize_as_writable_arrays() -> None:
    filled = dense(Fill(2.5, (2, 3), np.dtype(np.float64)), (2, 3), np.dtype(np.float64))
    zero = dense(ZeroTangent(), (4,), np.dtype(np.float32))
    read_only = np.ones((2, 3))
    read_only.flags.writeable = False
    copied = dense(read_only, (2, 3), np.dtype(np.float64))
    for array in (filled, zero, copied):
        assert array.flags.writeable and array.flags.owndata
    np.testing.assert_array_equal(filled, np.full((2, 3), 2.5))
    assert zero.dtype == np.float32 and not zero.any()


def test_bad_input_raises_the_ops_error_before_any_kernel() -> None:
    with pytest.raises(ValueError, match="shape"):
        autograd.grad(lambda a: anp.sum(sra.concatenate((a, np.ones((3, 3))), axis=Val(0))))(rand(2, 2))


def test_import_stablerules_imports_no_engine() -> None:
    code = "import sys, stablerules; print(sorted(m for m in ('autograd', 'jax', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_are_pinned_and_live_in_the_implementation() -> None:
    assert sorted(sra.__all__) == sorted(
        ["cat", "concatenate", "hstack", "kron", "repeat", "stack", "tile", "vstack"]
        + ["broadcast_to", "flip", "mean", "pad", "permute_dims", "reshape", "roll", "split", "sum", "swapaxes", "transpose"]
        + ["getindex", "index_add", "take", "take_along_axis"]
    )
    for name in sra.__all__:
        function = getattr(sra, name)
        assert function.__module__ == "stablerules.autograd._public" and function.__name__ == name


def test_every_op_of_stablerules_is_adapted() -> None:
    # the table (stablerules._schema.OPS) names every array op of the public face
    ops = {name for name in sr.__all__ if isinstance(getattr(sr, name), type(sr.kron).__mro__[1])}
    assert ops == set(sra.__all__)


# --- the indexing family: the indices (and getindex's sr.ix) are static data -----------------


def test_indexing_ops_check_grads_to_second_order() -> None:
    x = rand(5, 4)
    rows = np.array([4, 0, 4, -1, 2])
    cases: list[tuple[Callable[..., object], tuple[object, ...]]] = [
        (lambda v: anp.sum(sra.getindex(v, sr.ix[1:, ::2]) ** 2), (x,)),
        (lambda v: anp.sum(sra.take(v, rows, Val(0)) ** 2), (x,)),
        (lambda v: anp.sum(sra.take(v, rows) ** 2), (x,)),
        (lambda v: anp.sum(sra.take_along_axis(v, np.array([[1, 1, 3]] * 5), Val(1)) ** 2), (x,)),
        (lambda v, w: anp.sum(sra.index_add(v, rows, w) ** 2), (x, rand(5, 4))),
    ]
    for fn, args in cases:
        for argnum in range(len(args)):
            check_grads(fn, modes=["rev"], order=2, argnum=argnum)(*args)  # type: ignore[call-arg]


def test_indexing_gradients_equal_autograds_own_composition() -> None:
    x = rand(6, 3)
    rows = np.array([5, 0, 5, 5, 2])
    ours = autograd.grad(lambda v: anp.sum(anp.sin(sra.take(v, rows, Val(0)))))(x)
    theirs = autograd.grad(lambda v: anp.sum(anp.sin(v[rows])))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    ours = autograd.grad(lambda v: anp.sum(anp.sin(sra.getindex(v, sr.ix[::-2, 1]))))(x)
    theirs = autograd.grad(lambda v: anp.sum(anp.sin(v[::-2, 1])))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_the_ops_are_typed_from_the_schema() -> None:
    """mypy checks these (tests are in its files): arrays in and out, split a tuple."""
    x = np.ones((2, 3))
    assert_type(sra.repeat(x, Val(2), axis=Val(0)), npt.NDArray[Any])
    parts = assert_type(sra.split(x, Val(3), axis=Val(1)), tuple[npt.NDArray[Any], ...])
    assert len(parts) == 3 and all(isinstance(part, np.ndarray) for part in parts)
