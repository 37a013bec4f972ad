"""Robustness (issue 9): bad input gets a clear error before any kernel, unusual but valid input
gets the right answer, and nothing crashes the process.

Every op is described once, by its family's ``ROBUSTNESS`` rows in ``tests/rules/`` (its call,
its NumPy reference, the input shapes of a regular, an empty and, where the op takes them, a
0-d call), collected here as ``CASES``. Pullbacks are checked against an independent
reference: NumPy's own op applied to arrays of element *ids* says which input element each
output element copies, and ``np.add.at`` sums the cotangent back along that map.

Calls that could crash the interpreter (huge sizes: NumPy itself segfaults on
``np.repeat(np.ones(4), 2**62)``) run in a subprocess with its address space capped, so a
segfault or a runaway allocation fails one test instead of the run (or the machine).
Cache faults live in ``tests/test_cache.py``; the two missing there are at the end.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import types as pytypes
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._arrays import MAX_NDIM, common_device

from .references import kron_pullback
from .rules import Case, assert_every_op_has_a_row, collect

Array = npt.NDArray[Any]
Shape = tuple[int, ...]

REPO = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(9)


# ---------------------------------------------------------------------------------------------
# The ops: each family's ``ROBUSTNESS`` rows, in tests/rules/test_<family>.py
# ---------------------------------------------------------------------------------------------


def julia_repeat(x: Array, inner: Shape, outer: Shape) -> Array:
    """Julia's ``repeat(x; inner, outer)`` from NumPy's ``repeat`` and ``tile``."""
    n = max(x.ndim, len(inner), len(outer))
    y = x.reshape(x.shape + (1,) * (n - x.ndim))
    for axis, count in enumerate(inner + (1,) * (n - len(inner))):
        y = np.repeat(y, count, axis=axis)
    return np.tile(y, outer + (1,) * (n - len(outer)))


CASES: list[Case] = collect("ROBUSTNESS")

# Ops without rows here, and why; every other op of the schema must have one.
NO_ROWS = {
    "mean": "an integer x gives a float mean: the integer-primal and integer-output tests do not apply; "
    "the density test below covers it",
    "split": "a tuple of outputs: its cotangent, density and byte-order tests are below",
    "getindex": "its index is a static of its own kind (sr.ix): tests/rules/test_indexing.py",
    "take": "indices are data with their own checks: tests/rules/test_indexing.py",
    "take_along_axis": "indices are data with their own checks: tests/rules/test_indexing.py",
    "index_add": "indices are data with their own checks: tests/rules/test_indexing.py",
}


def test_every_op_has_a_row() -> None:
    assert_every_op_has_a_row("ROBUSTNESS", (case.op_name for case in CASES), NO_ROWS)
    assert len({case.name for case in CASES}) == len(CASES), "two rows share an id"


def test_family_test_files_import_no_engine() -> None:
    """Their engine tables are functions: a family's own tests run without torch, jax or autograd."""
    code = (
        "import sys; from tests.rules import FAMILIES, collect; collect('ROBUSTNESS'); "
        "assert all(f'tests.rules.test_{f}' in sys.modules for f in FAMILIES); "
        "loaded = {'torch', 'jax', 'autograd'} & set(sys.modules); assert not loaded, loaded"
    )
    run_isolated(code)


Back = Callable[[object], tuple[object, ...]]


def rrule_call(op: object, *args: object, **kwargs: object) -> tuple[object, Back]:
    """``sr.rrule`` for an op and arguments chosen at run time (its overloads type each op's
    own call; these tests build calls from tables, some deliberately ill-typed)."""
    # An annotated name, not a cast: mypy checks a cast of the overloaded rule against each of
    # its thousands of overloads, an assignment only until one fits.
    rrule: Callable[..., tuple[object, Back]] = sr.rrule
    return rrule(op, *args, **kwargs)


def call(op: object, *args: object, **kwargs: object) -> object:
    """Call ``op`` with arguments its type forbids (the point of the tests that use it)."""
    return cast(Callable[..., object], op)(*args, **kwargs)


def run(case: Case, xs: Sequence[Array]) -> Array:
    args, kwargs = case.call(xs)
    y = call(case.op, *args, **kwargs)
    assert isinstance(y, np.ndarray)
    return y


def rrule(case: Case, xs: Sequence[Array]) -> tuple[Array, Callable[[object], tuple[object, ...]]]:
    args, kwargs = case.call(xs)
    y, back = rrule_call(case.op, *args, **kwargs)
    assert isinstance(y, np.ndarray)
    return y, back


def values(shape: Shape, dtype: npt.DTypeLike = np.float64) -> Array:
    resolved = np.dtype(dtype)
    if resolved.kind == "c":
        return np.asarray(RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(resolved)
    if resolved.kind in "iub":
        return RNG.integers(0, 5, shape).astype(resolved)
    return RNG.standard_normal(shape).astype(resolved)


def reference_pullback(case: Case, xs: Sequence[Array], dy: Array) -> list[Array]:
    """``dx`` for each input, from NumPy alone.

    A gather op (everything but kron) applied to arrays of 1-based element ids says which
    input element each output element is (0: none, off cat's block diagonal); the pullback
    sums ``dy`` into those elements. kron: ``da = sum dy * conj(b)`` over the blocks, by einsum.
    """
    dy = np.asarray(dy)
    if case.bilinear:
        a, b = xs
        return list(kron_pullback(a, b, dy))
    if case.adjoint is not None:
        return case.adjoint(xs, dy)
    ids: list[Array] = []
    start = 1
    for x in xs:
        ids.append(np.arange(start, start + x.size, dtype=np.int64).reshape(x.shape))
        start += x.size
    source = np.asarray(case.numpy(ids))
    assert source.shape == dy.shape
    total = np.zeros(start, dtype=np.result_type(dy.dtype, np.float64))
    with np.errstate(invalid="ignore"):  # inf + -inf is nan: the cases with specials want it
        np.add.at(total, source.reshape(-1), dy.reshape(-1))
    result: list[Array] = []
    start = 1
    for x in xs:
        result.append(total[start : start + x.size].reshape(x.shape))
        start += x.size
    return result


def assert_tangent(tangent: object, expected: Array, primal: Array, rtol: float = 1e-12) -> None:
    """``tangent`` is a dense array of the primal's shape and dtype, equal to ``expected``
    projected onto that dtype (real part for a real primal); NaN and inf where expected."""
    assert isinstance(tangent, np.ndarray), tangent
    assert tangent.shape == primal.shape
    # A big-endian primal: its tangent may be big-endian (the concatenate family's views of a
    # big-endian dy) or native (what the kernels compute in); the forward's result is NumPy's.
    assert tangent.dtype.newbyteorder("=") == primal.dtype.newbyteorder("="), (tangent.dtype, primal.dtype)
    want = expected.real if primal.dtype.kind != "c" else expected
    np.testing.assert_allclose(tangent, want.astype(tangent.dtype), rtol=rtol, atol=rtol, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# Layouts: the same values as C-contiguous, strided, negative-stride, Fortran, read-only,
# broadcast (zero-stride) and big-endian arrays
# ---------------------------------------------------------------------------------------------


def strided(v: Array) -> Array:
    if v.ndim == 0:
        return v
    base = np.zeros(v.shape[:-1] + (2 * v.shape[-1] + 1,), dtype=v.dtype)
    base[..., 1::2] = v
    out = base[..., 1::2]
    assert not out.flags.c_contiguous or v.shape[-1] <= 1 or v.size == 0
    return out


def negative(v: Array) -> Array:
    if v.ndim == 0:
        return v
    return v[::-1].copy()[::-1]


def fortran(v: Array) -> Array:
    return np.asfortranarray(v)


def readonly(v: Array) -> Array:
    out = v.copy()
    out.setflags(write=False)
    return out


def broadcast(v: Array) -> Array:
    """A zero-stride view; its values are the first row repeated (the reference uses them)."""
    if v.ndim == 0 or v.shape[0] == 0:
        return np.broadcast_to(v, v.shape)
    return np.broadcast_to(v[:1], v.shape)


def bigendian(v: Array) -> Array:
    return v.astype(v.dtype.newbyteorder(">"))


LAYOUTS: dict[str, Callable[[Array], Array]] = {
    "strided": strided,
    "negative-stride": negative,
    "fortran": fortran,
    "readonly": readonly,
    "broadcast": broadcast,
    "big-endian": bigendian,
}


# ---------------------------------------------------------------------------------------------
# Valid but unusual inputs give right answers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_unusual_input_layouts(case: Case, layout: str) -> None:
    transform = LAYOUTS[layout]
    xs = [transform(values(shape)) for shape in case.shapes]
    want = case.numpy([np.array(x) for x in xs])
    y, back = rrule(case, xs)
    np.testing.assert_array_equal(y, want)
    assert y.dtype == want.dtype  # byte order included
    dy = values(y.shape)
    for tangent, expected, x in zip(case.tangents(back(dy), len(xs)), reference_pullback(case, xs, dy), xs):
        assert_tangent(tangent, expected, x)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_unusual_cotangent_layouts(case: Case, layout: str) -> None:
    xs = [values(shape, np.complex128) for shape in case.shapes]
    y, back = rrule(case, xs)
    dy = LAYOUTS[layout](values(y.shape, np.complex128))
    for tangent, expected, x in zip(case.tangents(back(dy), len(xs)), reference_pullback(case, xs, np.array(dy)), xs):
        assert_tangent(tangent, expected, x)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_zero_size_inputs(case: Case) -> None:
    xs = [values(shape) for shape in case.empty_shapes]
    want = case.numpy(xs)
    y, back = rrule(case, xs)
    np.testing.assert_array_equal(y, want)
    assert y.shape == want.shape and y.dtype == want.dtype
    dy = values(y.shape)
    for tangent, expected, x in zip(case.tangents(back(dy), len(xs)), reference_pullback(case, xs, dy), xs):
        assert_tangent(tangent, expected, x)


@pytest.mark.parametrize("case", [case for case in CASES if case.scalar_shapes is not None], ids=str)
def test_zero_dimensional_inputs(case: Case) -> None:
    assert case.scalar_shapes is not None
    xs = [values(shape) for shape in case.scalar_shapes]
    want = case.numpy(xs)
    y, back = rrule(case, xs)
    np.testing.assert_array_equal(y, want)
    assert y.shape == want.shape and y.dtype == want.dtype
    dy = values(y.shape)
    tangents = case.tangents(back(dy), len(xs))
    for tangent, expected, x in zip(tangents, reference_pullback(case, xs, dy), xs):
        assert_tangent(tangent, expected, x)


def test_zero_dimensional_repeat_with_an_axis_is_numpys() -> None:
    # NumPy reads a 0-d array as 1-d when an axis is given.
    x = np.array(2.5)
    for axis in (0, -1):
        np.testing.assert_array_equal(sr.repeat(x, Val(3), axis=Val(axis)), np.repeat(x, 3, axis=axis))
        np.testing.assert_array_equal(
            sr.repeat(x, np.array([3]), axis=Val(axis)), np.repeat(x, np.array([3]), axis=axis)
        )
    y, back = sr.rrule(sr.repeat, x, Val(3), axis=Val(0))
    (dx, _) = back(np.array([1.0, 2.0, 4.0]))
    assert isinstance(dx, np.ndarray) and dx.shape == () and dx == 7.0
    with pytest.raises(ValueError, match="axis 1 is out of bounds"):
        sr.repeat(x, Val(3), axis=Val(1))


SPECIALS = np.array([1.0, np.inf, -np.inf, np.nan, -0.0, 2.0, np.inf, 3.0])


@pytest.mark.parametrize("case", CASES, ids=str)
def test_nan_and_inf_propagate_as_the_math_says(case: Case) -> None:
    """Forward copies NaN/inf bit for bit; pullbacks sum them (inf + -inf = nan, x + inf =
    inf), exactly as NumPy's sums of the same cotangent entries do."""
    xs = [np.resize(SPECIALS, shape) for shape in case.shapes]
    if case.bilinear:
        xs = [np.resize(SPECIALS[:4], case.shapes[0]), np.resize(np.array([0.0, 1.0, 2.0]), case.shapes[1])]
    with np.errstate(invalid="ignore"):  # kron: inf * 0; sum: inf + -inf (NumPy's own sum warns)
        want = case.numpy(xs)
        y, back = rrule(case, xs)
    np.testing.assert_array_equal(y, want)  # NaN == NaN here, signed zeros compared by value
    np.testing.assert_array_equal(np.signbit(y), np.signbit(want))
    dy = np.resize(SPECIALS[::-1], y.shape)
    if case.bilinear:
        dy = np.resize(np.array([1.0, np.inf, 0.0, -1.0, np.nan]), y.shape)
    for tangent, expected, x in zip(case.tangents(back(dy), len(xs)), reference_pullback(case, xs, dy), xs):
        assert_tangent(tangent, expected, x)


def test_repeat_pullback_of_inf_and_nan_against_reshape_sum() -> None:
    x = np.zeros((2, 3))
    _, back = sr.rrule(sr.repeat, x, Val(2), axis=Val(1))
    dy = np.array([[np.inf, 1.0, np.inf, -np.inf, 2.0, 3.0], [np.nan, 0.0, 5.0, 5.0, -np.inf, -np.inf]])
    (dx, _) = back(dy)
    with np.errstate(invalid="ignore"):
        want = dy.reshape(2, 3, 2).sum(axis=2)  # [[inf, nan, 5], [nan, 10, -inf]]
    assert_tangent(dx, want, x)
    assert isinstance(dx, np.ndarray)
    assert np.isnan(dx[0, 1]) and np.isnan(dx[1, 0]) and dx[0, 0] == np.inf and dx[1, 2] == -np.inf
    # A Fill of inf gives a Fill of inf (count * inf); of nan, nan.
    (lazy, _) = back(Fill(np.inf, dy.shape))
    assert isinstance(lazy, Fill) and lazy.value == np.inf
    (lazy, _) = back(Fill(np.nan, dy.shape))
    assert isinstance(lazy, Fill) and np.isnan(lazy.value)


def test_kron_inf_times_zero_is_nan_as_numpy() -> None:
    a = np.array([0.0, np.inf, 1.0])
    b = np.array([0.0, 2.0, np.nan])
    y = np.asarray(call(sr.kron, a, b))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(y, np.kron(a, b))
    assert np.isnan(y[3])  # inf * 0


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("primal", [np.float32, np.complex64])
@pytest.mark.parametrize("cotangent", [np.int64, np.int8, np.bool_, np.float64, np.complex128])
def test_cotangents_of_any_numeric_dtype_are_projected(
    case: Case, primal: type[np.generic], cotangent: type[np.generic]
) -> None:
    xs = [values(shape, primal) for shape in case.shapes]
    y, back = rrule(case, xs)
    dy = values(y.shape, cotangent)
    expected = reference_pullback(case, xs, dy)
    for tangent, want, x in zip(case.tangents(back(dy), len(xs)), expected, xs):
        assert_tangent(tangent, want, x, rtol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_integer_primals_get_no_tangent_and_still_check_the_cotangent(case: Case) -> None:
    xs = [values(shape, np.int32) for shape in case.shapes]
    y, back = rrule(case, xs)
    np.testing.assert_array_equal(y, case.numpy(xs))
    assert all(isinstance(t, NoTangent) for t in case.tangents(back(np.ones(y.shape)), len(xs)))
    with pytest.raises(ValueError, match=re.escape(str(y.shape))):
        back(np.ones(y.shape + (2,)))


# ---------------------------------------------------------------------------------------------
# Bad cotangents: ValueError naming both shapes, TypeError naming the dtype
# ---------------------------------------------------------------------------------------------


def wrong_shapes(shape: Shape) -> list[Shape]:
    return [shape + (1,), shape[::-1] if shape[::-1] != shape else (sum(shape) + 1,), (), tuple(n + 1 for n in shape)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_cotangent_of_the_wrong_shape(case: Case) -> None:
    xs = [values(shape) for shape in case.shapes]
    y, back = rrule(case, xs)
    for shape in wrong_shapes(y.shape):
        if shape == y.shape:
            continue
        both = rf"{re.escape(str(shape))}.*{re.escape(str(y.shape))}"
        for dy in (np.ones(shape), np.ones(shape, np.float32), Fill(1.0, shape), Thunk(functools.partial(np.ones, shape))):
            with pytest.raises(ValueError, match=both):
                back(dy)
    with pytest.raises(ValueError, match=re.escape(str(y.shape))):
        back(np.broadcast_to(1.0, y.shape + (3,)))


BAD_DTYPES = [np.dtype(object), np.dtype("U3"), np.dtype([("re", "f8"), ("im", "f8")]), np.dtype(np.longdouble)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_cotangent_of_an_unsupported_dtype(case: Case) -> None:
    xs = [values(shape) for shape in case.shapes]
    y, back = rrule(case, xs)
    for dtype in BAD_DTYPES:
        with pytest.raises(TypeError, match=re.escape(str(dtype))):
            back(np.zeros(y.shape, dtype=dtype))
    for bad in ([1.0], None, "dy", NoTangent()):
        with pytest.raises(TypeError):
            back(bad)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_cotangent_of_an_integer_output_is_validated_too(case: Case) -> None:
    # No kernel reads it, but a wrong one is still the caller's bug: the same errors.
    xs = [values(shape, np.int64) for shape in case.shapes]
    y, back = rrule(case, xs)
    assert y.dtype == np.int64
    for dtype in BAD_DTYPES:
        with pytest.raises(TypeError, match=re.escape(str(dtype))):
            back(np.zeros(y.shape, dtype=dtype))
    for bad in ([1.0], None, "dy", NoTangent()):
        with pytest.raises(TypeError):
            back(bad)
    with pytest.raises(ValueError, match=re.escape(str(y.shape))):
        back(Fill(1.0, y.shape + (1,)))


# ---------------------------------------------------------------------------------------------
# Bad arguments: the right error, naming the argument and the shapes, before any kernel
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=str)
def test_unsupported_input_dtypes_name_the_dtype(case: Case) -> None:
    for dtype in BAD_DTYPES:
        xs = [np.zeros(shape, dtype=dtype) for shape in case.shapes]
        with pytest.raises(TypeError, match=re.escape(str(dtype))):
            run(case, xs)
        with pytest.raises(TypeError, match=re.escape(str(dtype))):
            rrule(case, xs)
        # One bad input among good ones.
        mixed = [values(shape) for shape in case.shapes]
        mixed[-1] = np.zeros(case.shapes[-1], dtype=dtype)
        with pytest.raises(TypeError, match=re.escape(str(dtype))):
            run(case, mixed)


def compiles() -> int:
    return sr.cache_info().compiles


def expect_error(kind: type[Exception], pattern: str, call: Callable[[], object]) -> None:
    """``call()`` raises exactly ``kind`` (not a subclass such as NumPy's AxisError, not
    IndexError) with a message matching ``pattern``, and compiles nothing on the way."""
    before = compiles()
    with pytest.raises(Exception) as caught:
        call()
    assert type(caught.value) is kind, f"{type(caught.value).__name__}: {caught.value}"
    assert re.search(pattern, str(caught.value)), f"{pattern!r} not in {str(caught.value)!r}"
    assert compiles() == before, "a kernel was compiled before the arguments were validated"


def test_bad_repeat_counts() -> None:
    x = values((3, 4))
    # Static counts: each value below is new, so a kernel built before validation would show.
    expect_error(ValueError, r"repeats=-1 .*negative", lambda: sr.repeat(x, Val(-1), axis=Val(0)))
    expect_error(ValueError, r"inner=\(2, -3\).*negative", lambda: sr.repeat(x, inner=Val((2, -3))))
    expect_error(ValueError, r"outer=-7 .*negative", lambda: sr.repeat(x, outer=Val(-7)))
    expect_error(ValueError, r"reps=\(5, -2\).*negative", lambda: sr.tile(x, Val((5, -2))))
    expect_error(TypeError, r"Val", lambda: call(Val, 1.5))
    expect_error(TypeError, r"repeats.*float", lambda: call(sr.repeat, x, 1.5))
    expect_error(TypeError, r"repeats.*bool", lambda: call(sr.repeat, x, True))
    expect_error(TypeError, r"reps.*str", lambda: call(sr.tile, x, "2"))
    expect_error(TypeError, r"inner.*ndarray", lambda: call(sr.repeat, x, inner=np.array([2])))
    # Counts arrays: dtype, length, sign, rank.
    expect_error(TypeError, r"repeats must hold integers.*float64", lambda: sr.repeat(x, np.array([1.0, 2.0, 1.0]), axis=Val(0)))
    expect_error(TypeError, r"repeats must hold integers.*object", lambda: sr.repeat(x, [2**70, 1, 1], axis=Val(0)))
    expect_error(
        ValueError,
        r"repeats has 2 counts but x has 3 elements along axis 0 \(shape \(3, 4\)\)",
        lambda: sr.repeat(x, np.array([1, 2]), axis=Val(0)),
    )
    expect_error(
        ValueError, r"repeats has 5 counts but x has 12 elements", lambda: sr.repeat(x, np.arange(5))
    )
    expect_error(ValueError, r"negative count \(-2\)", lambda: sr.repeat(x, np.array([1, -2, 3]), axis=Val(0)))
    expect_error(ValueError, r"1-D.*\(3, 1\)", lambda: sr.repeat(x, np.ones((3, 1), dtype=int), axis=Val(0)))


def test_axes_out_of_range() -> None:
    x = values((3, 4))
    expect_error(ValueError, r"axis 2 is out of bounds .*dimension 2", lambda: sr.repeat(x, Val(2), axis=Val(2)))
    expect_error(ValueError, r"axis -3 is out of bounds", lambda: sr.repeat(x, np.array([1, 1, 1]), axis=Val(-3)))
    expect_error(ValueError, r"concatenate: axis 2 is out of bounds", lambda: sr.concatenate((x, x), axis=Val(2)))
    expect_error(ValueError, r"stack: axis -4 is out of bounds", lambda: sr.stack((x, x), axis=Val(-4)))
    expect_error(ValueError, r"non-negative.*\(-1,\)", lambda: sr.cat(x, x, dims=Val(-1)))
    expect_error(ValueError, r"dims=\(64,\).*65 dimensions.*at most 64", lambda: sr.cat(x, dims=Val(MAX_NDIM)))
    expect_error(ValueError, r"dims must be distinct", lambda: sr.cat(x, x, dims=Val((1, 1))))
    expect_error(TypeError, r"axis.*Val\(int\)", lambda: call(sr.concatenate, (x, x), axis=Val((0,))))
    expect_error(TypeError, r"axis.*float", lambda: call(sr.stack, (x, x), axis=1.0))


def test_array_spec_is_validated() -> None:
    with pytest.raises(ValueError, match=r"non-negative.*\(3, -1\)"):
        sr.ArraySpec((3, -1), np.float64)
    with pytest.raises(ValueError, match=r"device.*'tpu'"):
        sr.ArraySpec((3,), np.float64, device="tpu")
    with pytest.raises(TypeError, match="object"):
        sr.precompile(sr.repeat, sr.ArraySpec((3,), object), Val(2))
    with pytest.raises(TypeError, match="mixed devices: arrays\\[0\\] on cuda, arrays\\[1\\] on cpu"):
        sr.precompile(sr.concatenate, (sr.ArraySpec((3,), np.float64, "cuda:0"), sr.ArraySpec((3,), np.float64)))


def test_too_many_dimensions_are_refused_before_a_kernel() -> None:
    x = values((2,))
    expect_error(ValueError, r"70 dimensions.*at most 64", lambda: sr.repeat(x, inner=Val((1,) * 69 + (3,))))
    expect_error(ValueError, r"66 dimensions", lambda: sr.tile(x, Val((1,) * 65 + (5,))))
    expect_error(ValueError, r"65 dimensions", lambda: sr.stack((np.ones((1,) * 64),) * 2))
    # Two loops per axis in kron's kernels: at most 9 axes (a SyntaxError before).
    many = np.ones((1,) * 10)
    expect_error(ValueError, r"\(1, 1, 1, 1, 1, 1, 1, 1, 1, 1\).*\(2,\).*at most 9 axes", lambda: call(sr.kron, many, np.ones(2)))
    expect_error(ValueError, r"at most 9 axes", lambda: rrule_call(sr.kron, np.ones(2), np.ones((1,) * 33)))


def test_repeat_loop_nests_deeper_than_python_allows_are_refused() -> None:
    # Each count that does not merge with a neighbour is one more nested loop in the
    # generated kernel; Python refuses more than 20 nested blocks (a SyntaxError, before).
    x = np.ones((2,) * 11)
    expect_error(ValueError, r"^repeat: inner=\(2, 2, .*loop nest would have 22 levels.*at most 20", lambda: sr.repeat(x, inner=Val((2,) * 11)))
    expect_error(ValueError, r"^tile: reps=\(3, 3, .*loop nest would have 22 levels", lambda: sr.tile(x, Val((3,) * 11)))
    # 20 levels still compile and are right (the forward kernel nests deepest: one more loop
    # for the copies of each element; a deep compile takes seconds, so only that one).
    x = values((1, 2) * 5)
    inner = (2,) * 10
    np.testing.assert_array_equal(sr.repeat(x, inner=Val(inner)), julia_repeat(x, inner, ()))


def test_concatenation_shape_mismatches_quote_both_shapes() -> None:
    a, b, v = values((2, 3)), values((2, 4)), values((3,))
    expect_error(
        ValueError,
        r"same number of dimensions.*arrays\[0\] has shape \(2, 3\).*arrays\[1\] has shape \(3,\)",
        lambda: sr.concatenate((a, v)),
    )
    expect_error(
        ValueError,
        r"arrays\[0\] has shape \(2, 3\) and arrays\[1\] has shape \(2, 4\); they differ along axis 1",
        lambda: sr.concatenate((a, b), axis=Val(0)),
    )
    expect_error(ValueError, r"zero-dimensional.*arrays\[1\] has shape \(\)", lambda: sr.concatenate((v, np.array(1.0))))
    expect_error(ValueError, r"same shape.*\(2, 3\).*\(2, 4\)", lambda: sr.stack((a, b)))
    expect_error(ValueError, r"same number of dimensions.*\(2, 3\).*\(3,\)", lambda: sr.hstack((a, v)))
    expect_error(ValueError, r"\(2, 3\).*\(3, 1\).*differ along axis 0", lambda: sr.hstack((a, values((3, 1)))))
    expect_error(ValueError, r"\(2, 3\).*\(4,\).*differ along axis 1", lambda: sr.vstack((a, values((4,)))))
    expect_error(ValueError, r"same number of dimensions.*\(2, 3\).*\(2, 3, 1\)", lambda: sr.vstack((a, values((2, 3, 1)))))
    expect_error(ValueError, r"\(2, 3\).*\(2, 4\).*differ along axis 1", lambda: sr.cat(a, b, dims=Val(0)))
    expect_error(ValueError, r"need at least one array", lambda: sr.concatenate(()))
    expect_error(TypeError, r"arrays\[1\] must be an array, got dict", lambda: call(sr.stack, (v, {"a": 1.0})))
    expect_error(TypeError, r"tuple or list of arrays, got ndarray", lambda: call(sr.concatenate, a))


def test_cat_python_ints_that_do_not_fit_the_result_dtype() -> None:
    small = np.ones(2, dtype=np.int8)
    np.testing.assert_array_equal(sr.cat(small, 100, dims=Val(0)), np.array([1, 1, 100], dtype=np.int8))
    # 300 after 100: the same signature (a cached plan) must still check the value.
    expect_error(ValueError, r"arrays\[1\] is the Python int 300.*int8", lambda: sr.cat(small, 300, dims=Val(0)))
    expect_error(ValueError, r"arrays\[1\] is the Python int -1.*uint8", lambda: sr.cat(small.astype(np.uint8), -1, dims=Val(0)))
    # A Python int reads as int64 whatever its value: a plan (keyed by the scalar's type) made
    # for 2**63 must not turn a later cat(3) into uint64, nor 2**64 into an object array.
    expect_error(ValueError, r"Python int 9223372036854775808.*int64", lambda: sr.cat(2**63, dims=Val(0)))
    assert sr.cat(3, dims=Val(0)).dtype == np.int64
    expect_error(ValueError, r"Python int 18446744073709551616", lambda: sr.cat(2**64, dims=Val(0)))
    expect_error(ValueError, r"Python int of 1101 bits.*float64", lambda: sr.cat(np.ones(1), 2**1100, dims=Val(0)))
    # Next to floats a huge int is a float, as in NumPy; next to uint64 arrays it is uint64.
    assert sr.cat(np.ones(1), 2**64, dims=Val(0))[1] == float(2**64)
    big = sr.cat(np.ones(1, dtype=np.uint64), 2**63, dims=Val(0))
    assert big.dtype == np.uint64 and big[1] == 2**63


def test_frule_tangents_are_validated() -> None:
    x = values((3, 4))
    # frule computes the primal first (its kernel may compile): warm those kernels, so that
    # expect_error's no-compile check is about the tangent's validation.
    sr.frule(sr.repeat, (x, NoTangent()), x, Val(2))
    sr.frule(sr.tile, (x, NoTangent()), x, Val(2))
    for bad, kind, pattern in [
        (np.ones((4, 3)), ValueError, r"\(4, 3\).*\(3, 4\)"),
        (np.ones((3, 4), dtype=object), TypeError, "object"),
        ([[1.0] * 4] * 3, TypeError, "list"),
    ]:
        expect_error(kind, pattern, lambda: sr.frule(sr.repeat, (bad, NoTangent()), x, Val(2)))
        expect_error(kind, pattern, lambda: sr.frule(sr.tile, (bad, NoTangent()), x, Val(2)))
        expect_error(kind, pattern, lambda: sr.frule(sr.concatenate, ((bad, ZeroTangent()),), (x, x)))
        expect_error(kind, pattern, lambda: sr.frule(sr.cat, (bad, ZeroTangent()), x, x, dims=Val(0)))
    expect_error(TypeError, "<U1", lambda: sr.frule(sr.stack, ((np.full((3, 4), "a"), ZeroTangent()),), (x, x)))
    frule: Callable[..., object] = sr.frule  # not a cast: see rrule_call
    frule(sr.kron, (x, ZeroTangent()), x, x)
    for bad, kind, pattern in [
        (np.ones((4, 3)), ValueError, r"\(4, 3\).*\(3, 4\)"),
        (np.ones((3, 4), dtype=object), TypeError, "object"),
        ([[1.0] * 4] * 3, TypeError, "list"),
    ]:
        expect_error(kind, pattern, lambda: frule(sr.kron, (bad, ZeroTangent()), x, x))


# ---------------------------------------------------------------------------------------------
# Mixed devices. CuPy is not installed here: a stand-in module named ``cupy`` with its own
# ``ndarray`` type is what the device checks see (they look at the array's type and module).
# ---------------------------------------------------------------------------------------------


class _FakeCupyArray:
    """Shape and dtype, in a module named ``cupy``: what ``is_array``/``device_of`` look at."""

    __module__ = "cupy"

    def __init__(self, array: Array) -> None:
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim
        self.size = array.size
        self.flags = array.flags


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> type[_FakeCupyArray]:
    module = pytypes.ModuleType("cupy")
    module.ndarray = _FakeCupyArray  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", module)
    return _FakeCupyArray


def test_common_device_names_the_arrays(fake_cupy: type[_FakeCupyArray]) -> None:
    gpu = fake_cupy(np.ones(3))
    assert common_device([np.ones(3), np.ones(2)], ["a", "b"]) == "cpu"
    assert common_device([gpu, gpu], ["a", "b"]) == "cuda"
    with pytest.raises(TypeError, match=r"mixed devices: a on cpu, b on cuda"):
        common_device([np.ones(3), gpu], ["a", "b"])


def test_mixed_devices_are_type_errors(fake_cupy: type[_FakeCupyArray]) -> None:
    cpu, gpu = np.ones((3, 4)), fake_cupy(np.ones((3, 4)))
    expect_error(TypeError, r"mixed devices: arrays\[0\] on cpu, arrays\[1\] on cuda", lambda: call(sr.concatenate, (cpu, gpu)))
    expect_error(TypeError, r"mixed devices", lambda: call(sr.stack, (gpu, cpu)))
    expect_error(TypeError, r"mixed devices", lambda: call(sr.hstack, (cpu, gpu)))
    expect_error(TypeError, r"mixed devices", lambda: call(sr.vstack, (cpu, gpu)))
    expect_error(TypeError, r"mixed devices", lambda: call(sr.cat, cpu, gpu, dims=Val(0)))
    expect_error(TypeError, r"mixed devices: x on cpu, repeats on cuda",
                 lambda: call(sr.repeat, cpu, fake_cupy(np.ones(3, dtype=np.int64)), axis=Val(0)))
    with pytest.raises(TypeError, match="mixed devices"):
        call(sr.kron, cpu, gpu)


def test_cotangent_on_another_device_is_a_type_error(fake_cupy: type[_FakeCupyArray]) -> None:
    x = np.ones((3, 4))
    for op, args in [(sr.concatenate, ((x, x),)), (sr.stack, ((x, x),)), (sr.hstack, ((x, x),))]:
        y, back = rrule_call(op, *args)
        with pytest.raises(TypeError, match="mixed devices"):
            back(fake_cupy(np.asarray(y)))
    y, back = sr.rrule(sr.cat, x, x, dims=Val(0))
    with pytest.raises(TypeError, match="mixed devices"):
        back(fake_cupy(np.asarray(y)))
    y, back = rrule_call(sr.kron, x, x)
    with pytest.raises(TypeError, match="mixed devices"):
        back(fake_cupy(np.asarray(y)))


# ---------------------------------------------------------------------------------------------
# Huge sizes: ValueError / MemoryError before allocating, in a subprocess
# ---------------------------------------------------------------------------------------------

# Each family's ``HUGE_CALLS`` lines: label | expected exception | message pattern | expression
# (evaluated in the child). ``huge(n)`` is np.broadcast_to(0.0, (n,)): an n-element input that costs nothing. The
# MemoryError cases ask for at least 8 TiB, more than any machine these tests run on.
HUGE_CALLS: list[str] = collect("HUGE_CALLS")

_CHILD = r"""
import json, resource, sys
# A cap on the address space: a check that regressed shows as a MemoryError here instead of
# the kernel's OOM killer taking this process (or a neighbour).
limit = 8 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import numpy as np
import stablerules as sr
from stablerules import Val

def huge(n):
    return np.broadcast_to(np.float64(0.0), (n,))

for line in sys.stdin.read().strip().splitlines():
    label, _, _, expression = [part.strip() for part in line.split("|")]
    print(json.dumps({"label": label, "started": True}), flush=True)
    try:
        result = eval(expression)
        outcome = {"label": label, "type": None, "message": repr(type(result))}
    except BaseException as error:
        outcome = {"label": label, "type": type(error).__name__, "message": str(error)[:500]}
    print(json.dumps(outcome), flush=True)
"""


def run_isolated(code: str, stdin: str = "", timeout: float = 300) -> str:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); return its stdout.

    A negative return code is a signal (a segfault, an abort, the OOM killer): the test fails
    naming it, with the child's last output, instead of taking the test run down with it.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    completed = subprocess.run(
        [sys.executable, "-c", code], input=stdin, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )
    if completed.returncode < 0:
        name = signal.Signals(-completed.returncode).name
        pytest.fail(
            f"the subprocess was killed by {name} (a crash, not an exception); last output:\n"
            f"{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_run_isolated_reports_a_crash_as_a_failure() -> None:
    with pytest.raises(pytest.fail.Exception, match="SIGSEGV"):
        run_isolated("import ctypes; ctypes.string_at(0)")
    assert run_isolated("print('fine')") == "fine\n"


def test_huge_sizes_are_refused_before_allocating() -> None:
    table = "\n".join(HUGE_CALLS)
    expected = {}
    for line in HUGE_CALLS:
        label, kind, pattern, _ = [part.strip() for part in line.split("|")]
        expected[label] = (kind, pattern)
    output = run_isolated(_CHILD, stdin=table)
    outcomes = {}
    for line in output.splitlines():
        record = json.loads(line)
        if "started" not in record:
            outcomes[record["label"]] = record
    problems = []
    for label, (kind, pattern) in expected.items():
        got = outcomes.get(label)
        if got is None:
            problems.append(f"{label}: no outcome")
        elif got["type"] != kind or not re.search(pattern, got["message"]):
            problems.append(f"{label}: expected {kind} matching {pattern!r}, got {got['type']}: {got['message']}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Cache faults missing from tests/test_cache.py: a cache directory someone else owns, and one
# writable by its group, are refused (a Numba cache file is a pickle: loading one runs code).
# ---------------------------------------------------------------------------------------------


def _fresh_cache_run() -> object:
    from stablerules._cache import KernelCache

    from .test_cache import run_kernel

    cache = KernelCache()
    np.testing.assert_array_equal(run_kernel(cache, uuid.uuid4().hex), 2 * np.arange(6.0))
    return cache.store


def test_cache_dir_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules._cache import MemoryStore

    directory = tmp_path / "someone-elses-cache"
    directory.mkdir(mode=0o700)
    directory.chmod(0o700)  # private, but (below) not ours
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(directory))
    monkeypatch.delenv("STABLERULES_DISK_CACHE", raising=False)
    other = os.getuid() + 1
    monkeypatch.setattr(os, "getuid", lambda: other)
    with pytest.warns(RuntimeWarning, match="not owned by this user"):
        store = _fresh_cache_run()
    assert isinstance(store, MemoryStore)
    assert not (directory / "kernels").exists()


@pytest.mark.parametrize("mode", [0o770, 0o720, 0o702])
def test_cache_dir_writable_by_group_or_others_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    from stablerules._cache import MemoryStore

    directory = tmp_path / "loose-cache"
    directory.mkdir()
    directory.chmod(mode)
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(directory))
    monkeypatch.delenv("STABLERULES_DISK_CACHE", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = _fresh_cache_run()
    messages = [str(w.message) for w in caught if "writable by other users" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert isinstance(store, MemoryStore)


def test_invalid_rendered_source_is_raised_not_reported_as_a_damaged_cache_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stablerules._cache import KernelCache
    from stablerules._key import KernelSource, ShapeSignature
    from stablerules._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array

    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STABLERULES_DISK_CACHE", raising=False)
    signature = ShapeSignature("broken", "forward", (uuid.uuid4().hex,), ("float64",), (1,))

    def render() -> KernelSource:
        body = SourceWriter()
        body.line("x[lo] = (")  # a rule's bug: not Python
        return cpu_kernel(signature, [("x", readonly_array("float64")), ("lo", INDEX), ("hi", INDEX)], body, "broken")

    cache = KernelCache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(SyntaxError):
            cache.get(signature, render)
    assert not [w for w in caught if "could not be loaded" in str(w.message)], [str(w.message) for w in caught]
    assert not list((tmp_path / "cache" / "kernels").glob("*.py"))


# ---------------------------------------------------------------------------------------------
# The density rule: a dense cotangent gives dense tangents, for every op and every extent; the
# one exception is a full reduction (sum/mean over every axis, no keepdims), whose 0-d
# cotangent pulls back to a Fill. Before, sum(x(1, 1), axis=Val(0)), a one-element output,
# pulled a dense dy back to a Fill although its types promise an ndarray.
# ---------------------------------------------------------------------------------------------


def _extent_variants(shapes: tuple[Shape, ...]) -> list[tuple[Shape, ...]]:
    """The case's shapes, every extent 1, and each axis alone set to 1 (where NumPy takes it)."""
    variants = [shapes, tuple(tuple(1 for _ in shape) for shape in shapes)]
    for axis in range(max((len(shape) for shape in shapes), default=0)):
        variants.append(tuple(tuple(1 if d == axis else n for d, n in enumerate(shape)) for shape in shapes))
    return variants


def _assert_dense(tangents: Sequence[object], xs: Sequence[Array], what: str) -> None:
    for tangent, x in zip(tangents, xs):
        assert isinstance(tangent, np.ndarray), f"{what}: a dense dy gave {tangent!r}"
        assert tangent.shape == x.shape and tangent.dtype == x.dtype, what


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_dense_cotangent_gives_dense_tangents_for_every_extent(case: Case) -> None:
    variants = _extent_variants(case.shapes) + [case.empty_shapes]
    if case.scalar_shapes is not None:
        variants.append(case.scalar_shapes)
    checked = 0
    for shapes in variants:
        xs = [values(shape) for shape in shapes]
        try:
            case.numpy(xs)
        except ValueError:
            continue  # not a valid call for NumPy either (reshape of one element to (-1, 2))
        y, back = rrule(case, xs)
        dy = values(y.shape)
        tangents = case.tangents(back(dy), len(xs))
        _assert_dense(tangents, xs, f"{case} of {shapes}")
        for tangent, expected, x in zip(tangents, reference_pullback(case, xs, dy), xs):
            assert_tangent(tangent, expected, x)
        checked += 1
    assert checked >= 3


REDUCTION_SHAPES: list[Shape] = [(), (1,), (5,), (1, 1), (3, 1), (1, 4), (3, 4), (2, 1, 3), (0, 3), (1, 0)]


def _reduction_axes(ndim: int) -> list[tuple[int, ...] | None]:
    axes: list[tuple[int, ...] | None] = [None, ()]
    axes += [(axis,) for axis in range(ndim)]
    axes += [(a, b) for a in range(ndim) for b in range(a + 1, ndim)]
    if ndim > 2:
        axes.append(tuple(range(ndim)))
    return axes


@pytest.mark.parametrize("op", [sr.sum, sr.mean], ids=["sum", "mean"])
@pytest.mark.parametrize("shape", REDUCTION_SHAPES, ids=str)
def test_only_a_full_reductions_zero_d_cotangent_pulls_back_to_a_fill(op: object, shape: Shape) -> None:
    reference = np.sum if op is sr.sum else np.mean
    for axis in _reduction_axes(len(shape)):
        for keepdims in (False, True):
            x = values(shape)
            static = None if axis is None else Val(axis)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty slice
                y, back = rrule_call(op, x, axis=static, keepdims=Val(keepdims))
                expect_shape = np.shape(reference(x, axis=axis, keepdims=keepdims))
            assert isinstance(y, np.ndarray)
            dy = values(y.shape)
            (dx,) = cast(tuple[Any], back(dy))
            assert y.shape == expect_shape
            count = x.size // max(y.size, 1) if x.size else 0
            scale = 1.0 / count if op is sr.mean and count else 1.0
            kept = dy.reshape([1 if axis is None or d in axis else n for d, n in enumerate(shape)]) if x.size else dy
            expected = np.broadcast_to(kept * scale, shape) if x.size else np.zeros(shape)
            what = f"{op}(x{shape}, axis={axis}, keepdims={keepdims})"
            if y.shape == ():  # a full reduction: the one Fill (typed so)
                assert isinstance(dx, Fill), what
                np.testing.assert_allclose(np.asarray(dx), expected, rtol=1e-12)
            else:
                _assert_dense([dx], [x], what)
                assert dx.flags.writeable, what
                np.testing.assert_allclose(dx, expected, rtol=1e-12)


@pytest.mark.parametrize("shape", [(4, 3), (2, 1), (2,), (4, 0)], ids=str)
def test_split_dense_cotangents_give_a_dense_tangent(shape: Shape) -> None:
    x = values(shape)
    parts, back = rrule_call(sr.split, x, Val(2), axis=Val(0))
    assert isinstance(parts, tuple)
    dys = tuple(values(part.shape) for part in parts)
    (dx, _) = back(dys)
    _assert_dense([dx], [x], f"split(x{shape})")
    np.testing.assert_array_equal(dx, np.concatenate(dys, axis=0))


# ---------------------------------------------------------------------------------------------
# Errors name the op the user called, the argument and the shapes
# ---------------------------------------------------------------------------------------------


def test_tile_errors_name_tile_and_reps() -> None:
    x = values((2, 2))
    with pytest.raises(ValueError) as caught:
        sr.tile(x, Val((10**10, 10**10)))
    message = str(caught.value)
    # Before: "repeat: the repeat counts inner=(1, 1), outer=(10000000000, 10000000000) multiply
    # to 100000000000000000000, too large to index an array" (an op and arguments never written)
    assert not message.startswith("repeat"), message
    assert "inner=" not in message and "outer=" not in message, message
    assert message.startswith("tile: reps=(10000000000, 10000000000) for x of shape (2, 2): "), message
    with pytest.raises(ValueError, match=r"^repeat: outer=\(10000000000, 10000000000\) for x of shape \(2, 2\): "):
        sr.repeat(x, outer=Val((10**10, 10**10)))


def test_pullback_errors_name_the_op() -> None:
    _, back = rrule_call(sr.repeat, values((3,)), Val(2), axis=Val(0))
    # Before: "pullback: cotangent dy has shape (5,) but the output has shape (6,)"
    with pytest.raises(ValueError, match=r"^repeat pullback: the cotangent dy has shape \(5,\) but the output has shape \(6,\)$"):
        back(np.ones(5))
    with pytest.raises(TypeError, match=r"^repeat pullback: got NoTangent\(\) as the cotangent dy"):
        back(NoTangent())
    # (float16 was the example until 16-bit floats became supported, SPEC 15)
    with pytest.raises(TypeError, match=rf"^repeat pullback: argument 'dy' has dtype {np.dtype(np.longdouble)}"):
        back(np.ones(6, np.longdouble))
    _, back = rrule_call(sr.kron, values((2, 2)), values((3,)))
    with pytest.raises(ValueError, match=r"^kron pullback: the cotangent dy has shape \(7,\) but the output has shape \(2, 6\)"):
        back(np.ones(7))
    _, back = rrule_call(sr.split, values((4, 3)), Val(2))
    with pytest.raises(ValueError, match=r"^split pullback: the cotangent dy\[1\] has shape \(3, 3\) but the output y\[1\] has shape \(2, 3\)"):
        back((np.ones((2, 3)), np.ones((3, 3))))
    pullback: Callable[..., object] = sr.pullback  # not a cast: see rrule_call
    with pytest.raises(TypeError, match=r"^kron pullback: it reads the primal values"):
        pullback(sr.kron, sr.ArraySpec((2,), np.float64), sr.ArraySpec((2,), np.float64))


@pytest.mark.parametrize(
    ("op", "args", "pattern"),
    [
        (sr.repeat, (np.array([1.0], dtype=object), Val(2)), r"^repeat: argument 'x' has dtype object"),
        (sr.tile, (np.array([1.0], dtype=object), Val(2)), r"^tile: argument 'x' has dtype object"),
        (sr.kron, ("a", np.ones(2)), r"^kron: argument 'a' must be an array"),
        (sr.sum, (np.array([1.0], dtype=object),), r"^sum: argument 'x' has dtype object"),
        (sr.repeat, (np.ones(2), Val(2), Val(True)), r"^repeat: argument 'axis' must be Val\(int\)"),
        (sr.tile, (np.ones(2), "a"), r"^tile: argument 'reps' must be Val"),
        (sr.mean, (np.ones(2), None, Val(3)), r"^mean: argument 'keepdims' must be Val\(True\)"),
    ],
)
def test_shared_argument_readers_errors_name_the_op(op: object, args: tuple[object, ...], pattern: str) -> None:
    # Before: the shared readers' messages alone ("argument 'x' has dtype object, ..."), no op
    expect_error(TypeError, pattern, lambda: call(op, *args))


# ---------------------------------------------------------------------------------------------
# NumPy parity: byte order, and broadcast_to of any size
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [">f8", ">f4", ">c16", ">i4", "<f8"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_non_native_byte_order_gives_numpys_result_dtype(case: Case, dtype: str) -> None:
    """Before, ``sr.repeat(x_big_endian, ...)`` came back native-endian (float64 where NumPy
    gives '>f8'); the kernels compute on native copies, the result has NumPy's dtype."""
    resolved = np.dtype(dtype)
    xs = [values(shape, resolved.newbyteorder("=")).astype(resolved) for shape in case.shapes]
    want = case.numpy(xs)
    args, kwargs = case.call(xs)
    for y in (call(case.op, *args, **kwargs), rrule_call(case.op, *args, **kwargs)[0]):
        assert isinstance(y, np.ndarray)
        assert y.dtype == want.dtype, (case.name, y.dtype.str, want.dtype.str)
        # kron's complex products may round differently from NumPy's (in native order too)
        np.testing.assert_allclose(y, want, rtol=1e-14 if case.bilinear else 0, atol=0)


def test_split_and_mean_keep_numpys_byte_order() -> None:
    x = values((4, 3)).astype(">f8")
    for part, expected in zip(cast(tuple[Array, ...], call(sr.split, x, Val(2))), np.split(x, 2)):
        assert part.dtype == expected.dtype
    assert cast(Array, call(sr.mean, x, Val(0))).dtype == np.mean(x, axis=0).dtype


def test_broadcast_to_of_any_size_is_a_view_as_numpys() -> None:
    """Before: ``MemoryError: broadcast_to: an array of shape (1000000000000, 2, 3) needs
    48000000000000 bytes, more than this machine's ...``; NumPy returns a stride-0 view."""
    x = values((2, 3))
    shape = (10**12, 2, 3)
    want = np.broadcast_to(x, shape)
    for y in (sr.broadcast_to(x, Val(shape)), rrule_call(sr.broadcast_to, x, Val(shape))[0]):
        assert isinstance(y, np.ndarray)
        assert y.shape == shape and y.strides == want.strides and y.dtype == want.dtype
        assert not y.flags.writeable and np.shares_memory(y, x)
        np.testing.assert_array_equal(y[-1], x)
    _, back = rrule_call(sr.broadcast_to, x, Val(shape))
    (dx, _) = back(Fill(1.0, shape))  # the lazy cotangent of a sum: no memory either
    assert dx == Fill(1e12, (2, 3), np.float64)
    _, ydot = sr.frule(sr.broadcast_to, (np.ones((2, 3)), NoTangent()), x, Val(shape))
    assert isinstance(ydot, np.ndarray) and ydot.strides == want.strides
    # Beyond what NumPy can describe, NumPy's error kind, naming the op and the shape
    expect_error(ValueError, r"^broadcast_to: a view of shape \(2305843009213693952, 2, 3\)", lambda: sr.broadcast_to(x, Val((2**61, 2, 3))))
