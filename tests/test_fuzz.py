"""Fuzzing every op (issue 9): random shapes, counts, axes and dtypes, valid and invalid.

A valid call matches NumPy (forward, dtype included) and its pullback matches an independent
NumPy computation: for the gather ops (repeat, tile, the concatenate family), NumPy's op
applied to arrays of element ids, then ``np.add.at`` of the cotangent along that map; for
kron, an einsum over the cotangent's blocks. An invalid call (one NumPy refuses, or one with a
dtype stablerules does not support) raises ``ValueError`` or ``TypeError`` - exactly those
types: not NumPy's ``AxisError``, not ``IndexError``, not a Numba error, never a crash.

Bounded in time: static counts are drawn from small sets so kernel signatures repeat (each new
one is a 0.1-0.3 s compile); extents, which are runtime arguments, vary freely.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stablerules as sr
from stablerules import Fill, NoTangent, Val, ZeroTangent

from .references import kron_pullback
from .rules import assert_every_op_has_a_row, op_of

Array = npt.NDArray[Any]
Shape = tuple[int, ...]

SUPPORTED = [np.dtype(name) for name in ("float64", "float32", "complex128", "complex64", "int64", "int8", "bool")]
UNSUPPORTED = [np.dtype(object), np.dtype("U2"), np.dtype(np.longdouble), np.dtype([("a", "f8")]), np.dtype("M8[s]")]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class Invalid(Exception):
    """The reference refused the call: stablerules must raise ValueError or TypeError."""


def supported(dtype: np.dtype[Any]) -> bool:
    return dtype in SUPPORTED


def call(op: object, *args: object, **kwargs: object) -> object:
    return cast(Callable[..., object], op)(*args, **kwargs)


Back = Callable[[object], tuple[object, ...]]


def rrule_call(op: object, *args: object, **kwargs: object) -> tuple[object, Back]:
    """``sr.rrule`` for an op and arguments chosen at run time (its overloads type each op's
    own call; these tests build calls from tables, some deliberately ill-typed)."""
    # An annotated name, not a cast: mypy checks a cast of the overloaded rule against each of
    # its thousands of overloads, an assignment only until one fits.
    rrule: Callable[..., tuple[object, Back]] = sr.rrule
    return rrule(op, *args, **kwargs)


def make(shape: Shape, dtype: np.dtype[Any], seed: int) -> Array:
    rng = np.random.default_rng(seed)
    if dtype.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iub":
        return rng.integers(0, 3, shape).astype(dtype)
    if dtype.kind == "M":
        return rng.integers(0, 10**6, shape).astype(dtype)
    if dtype.kind == "U":
        return rng.integers(0, 99, shape).astype(dtype)
    if dtype.kind == "O":
        return rng.standard_normal(shape).astype(object)
    out = np.zeros(shape, dtype=dtype)
    out["a"] = rng.standard_normal(shape)
    return out


def reference(numpy: Callable[[], Array]) -> Array:
    """NumPy's answer, or ``Invalid`` when NumPy refuses (whatever NumPy raises)."""
    try:
        return np.asarray(numpy())
    except Exception as error:  # NumPy raises ValueError, TypeError, AxisError, IndexError...
        raise Invalid(f"{type(error).__name__}: {error}") from error


def outcome(ours: Callable[[], object], numpy: Callable[[], Array], dtypes: Sequence[np.dtype[Any]]) -> tuple[Array, object] | None:
    """Run both. ``None`` when the call is invalid and stablerules said so with exactly
    ``ValueError``/``TypeError`` (a ``TypeError`` when a dtype is unsupported); otherwise
    ``(NumPy's result, ours)``, for a valid call that stablerules answered."""
    try:
        want: Array | None = reference(numpy)
        why = ""
    except Invalid as refused:
        want, why = None, str(refused)
    bad_dtype = not all(supported(dtype) for dtype in dtypes)
    try:
        got = ours()
    except Exception as error:
        if type(error) not in (ValueError, TypeError):
            raise AssertionError(f"stablerules raised {type(error).__name__} (not ValueError/TypeError): {error}") from error
        if bad_dtype:
            # A ValueError is right too when the call is invalid on other grounds as well.
            assert type(error) is TypeError or want is None, f"an unsupported dtype gave {type(error).__name__}: {error}"
            return None
        if want is not None:
            raise AssertionError(f"stablerules refused a call NumPy accepts: {type(error).__name__}: {error}") from error
        return None
    assert not bad_dtype, f"an unsupported dtype was accepted: {dtypes}"
    assert want is not None, f"stablerules accepted a call NumPy refuses ({why})"
    return want, got


def assert_forward(got: object, want: Array, exact: bool = True) -> Array:
    assert isinstance(got, np.ndarray), type(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(got.dtype).eps, atol=0)
    return got


def gather_pullback(numpy: Callable[[Sequence[Array]], Array], shapes: Sequence[Shape], dy: Array) -> list[Array]:
    """``dx`` per input of a gather op (an op that copies elements: numpy(ids) names the
    source of each output element, 0 none) by summing ``dy`` into the sources."""
    ids, start = [], 1
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        ids.append(np.arange(start, start + size, dtype=np.int64).reshape(shape))
        start += size
    source = np.asarray(numpy(ids))
    total = np.zeros(start, dtype=np.result_type(dy.dtype, np.float64))
    np.add.at(total, source.reshape(-1), dy.reshape(-1))
    out, start = [], 1
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        out.append(total[start : start + size].reshape(shape))
        start += size
    return out


def assert_tangent(tangent: object, want: Array, primal: Array, output: np.dtype[Any]) -> None:
    """A primal's tangent: NoTangent for integers, else its shape and dtype and ``want``'s
    values (to the precision of the primal or the output, whichever is coarser: the
    cotangent is first rounded to the output's dtype)."""
    if primal.dtype.kind not in "fc":
        assert isinstance(tangent, NoTangent), tangent
        return
    assert isinstance(tangent, np.ndarray), tangent
    assert tangent.shape == primal.shape and tangent.dtype == primal.dtype, (tangent.shape, tangent.dtype)
    expected = want if primal.dtype.kind == "c" else want.real
    single = {np.dtype(np.float32), np.dtype(np.complex64)}
    tolerance = 1e-5 if primal.dtype in single or output in single else 1e-12
    np.testing.assert_allclose(tangent, expected, rtol=tolerance, atol=tolerance)


def cotangent(y: Array, seed: int) -> Array:
    kind = np.complex128 if y.dtype.kind == "c" else np.float64
    return make(y.shape, np.dtype(kind), seed)


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
dtypes = st.sampled_from(SUPPORTED * 3 + UNSUPPORTED)
seeds = st.integers(0, 2**16)


# ---------------------------------------------------------------------------------------------
# repeat (both forms) and tile
# ---------------------------------------------------------------------------------------------

# Static counts from small sets (each new nest of counts is a compile); -1 is invalid.
COUNTS = st.sampled_from([0, 1, 2, 3, -1])
SMALL_COUNTS = st.sampled_from([0, 1, 2, -1])
REPEAT_DTYPES = st.sampled_from([np.dtype(np.float64)] * 4 + [np.dtype(np.int64), np.dtype(np.complex128)] + UNSUPPORTED)


def julia_repeat(x: Array, inner: Shape, outer: Shape) -> Array:
    if any(count < 0 for count in inner + outer):
        raise ValueError("negative count")
    n = max(x.ndim, len(inner), len(outer))
    y = x.reshape(x.shape + (1,) * (n - x.ndim))
    for axis, count in enumerate(inner + (1,) * (n - len(inner))):
        y = np.repeat(y, count, axis=axis)
    return np.tile(y, outer + (1,) * (n - len(outer)))


@st.composite
def repeat_calls(draw: st.DrawFn) -> tuple[str, Shape, np.dtype[Any], dict[str, Any]]:
    shape = draw(shapes)
    dtype = draw(REPEAT_DTYPES)
    form = draw(st.sampled_from(["static", "counts", "julia", "tile"]))
    ndim = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-ndim - 1, ndim)))
    if form == "static":
        return form, shape, dtype, {"count": draw(COUNTS), "axis": axis}
    if form == "counts":
        length = int(np.prod(shape)) if axis is None else (shape[axis] if -ndim <= axis < ndim else 1)
        size = draw(st.sampled_from([length, length, 1, length + 1, max(length - 1, 0)]))
        counts_dtype = draw(st.sampled_from([np.int64, np.int64, np.int32, np.uint8, np.float64]))
        counts = np.array(draw(st.lists(st.integers(-1, 3) if counts_dtype != np.uint8 else st.integers(0, 3), min_size=size, max_size=size)))
        return form, shape, dtype, {"counts": counts.astype(counts_dtype), "axis": axis}
    tuples = st.lists(SMALL_COUNTS, min_size=0, max_size=3).map(tuple)
    if form == "julia":
        return form, shape, dtype, {"inner": draw(tuples), "outer": draw(tuples)}
    return form, shape, dtype, {"reps": draw(tuples)}


def without_negatives(counts: object, compute: Callable[[], Array]) -> Array:
    """NumPy repeats an empty array by a negative count without complaint; stablerules
    refuses a negative count whatever the array (issue 9), so the reference does too."""
    if np.any(np.asarray(counts) < 0):
        raise ValueError("negative count")
    return compute()


@FUZZ
@given(repeat_calls(), seeds)
def test_fuzz_repeat_and_tile(spec: tuple[str, Shape, np.dtype[Any], dict[str, Any]], seed: int) -> None:
    form, shape, dtype, params = spec
    x = make(shape, dtype, seed)
    args: tuple[object, ...]
    kwargs: dict[str, object]
    numpy: Callable[[Sequence[Array]], Array]
    op: object = sr.repeat
    if form == "static":
        count, axis = params["count"], params["axis"]
        args, kwargs = (x, Val(count)), ({} if axis is None else {"axis": Val(axis)})
        numpy = lambda xs: without_negatives(count, lambda: np.repeat(xs[0], count, axis=axis))  # noqa: E731
    elif form == "counts":
        counts, axis = params["counts"], params["axis"]
        args, kwargs = (x, counts), ({} if axis is None else {"axis": Val(axis)})
        numpy = lambda xs: without_negatives(counts, lambda: np.repeat(xs[0], counts, axis=axis))  # noqa: E731
    elif form == "julia":
        inner, outer = params["inner"], params["outer"]
        args, kwargs = (x,), {"inner": Val(inner), "outer": Val(outer)}
        numpy = lambda xs: julia_repeat(xs[0], inner, outer)  # noqa: E731
    else:
        reps = params["reps"]
        op, args, kwargs = sr.tile, (x, Val(reps)), {}
        numpy = lambda xs: without_negatives(reps, lambda: np.tile(xs[0], reps))  # noqa: E731
    result = outcome(lambda: rrule_call(op, *args, **kwargs), lambda: numpy([x]), [dtype])
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Callable[[object], tuple[object, ...]]], result[1])
    y = assert_forward(y, want)
    assert_forward(call(op, *args, **kwargs), want)
    dy = cotangent(y, seed + 1)
    tangents = back(dy)
    assert len(tangents) == len(args)
    assert all(isinstance(t, NoTangent) for t in tangents[1:])
    (expected,) = gather_pullback(numpy, [x.shape], dy)
    assert_tangent(tangents[0], expected, x, y.dtype)
    if dtype.kind in "fc":  # a Fill cotangent gives the pullback of its dense equivalent
        (lazy, *_) = back(Fill(2.0, y.shape, dy.dtype))
        (dense_dx, *_) = back(np.full(y.shape, 2.0))
        np.testing.assert_allclose(np.asarray(lazy), np.asarray(dense_dx), rtol=1e-6)
    with pytest.raises(ValueError, match=r"shape"):
        back(np.zeros(y.shape + (1,)))


# ---------------------------------------------------------------------------------------------
# concatenate, stack, hstack, vstack, cat
# ---------------------------------------------------------------------------------------------


def julia_cat(values: Sequence[object], dims: Shape) -> Array:
    """Julia's cat with 0-based dims, refusing what Julia refuses."""
    if not values or not dims or any(d < 0 for d in dims) or len(set(dims)) != len(dims):
        raise ValueError("bad dims")
    dtype = np.result_type(*cast(list[Any], values))  # NEP 50: Python scalars are weak
    arrays = [np.asarray(value) for value in values]
    ndim = max(max(a.ndim for a in arrays), max(dims) + 1)
    padded = [a.reshape(a.shape + (1,) * (ndim - a.ndim)) for a in arrays]
    for a in padded:
        for axis in range(ndim):
            if axis not in dims and a.shape[axis] != padded[0].shape[axis]:
                raise ValueError("shape mismatch")
    shape: list[int] = list(padded[0].shape)
    for dim in dims:
        shape[dim] = sum(a.shape[dim] for a in padded)
    out = np.zeros(shape, dtype=dtype)
    offsets = dict.fromkeys(dims, 0)
    for a in padded:
        out[tuple(slice(offsets[d], offsets[d] + a.shape[d]) if d in offsets else slice(None) for d in range(ndim))] = a
        for dim in dims:
            offsets[dim] += a.shape[dim]
    return out


JOIN_OPS = ["concatenate", "concatenate-flat", "stack", "hstack", "vstack", "cat"]
CAT_DIMS = st.sampled_from([0, 1, 2, 3, (0, 1), (1, 2), (0, 2), (0, 1, 2), -1, (1, 1), ()])


@st.composite
def join_calls(draw: st.DrawFn) -> tuple[str, list[Shape], list[np.dtype[Any]], object, list[bool]]:
    op = draw(st.sampled_from(JOIN_OPS))
    count = draw(st.integers(1, 3))
    base = draw(shapes)
    ndim = len(base)
    axis = draw(st.integers(-ndim - 2, ndim + 1)) if op in ("concatenate", "stack") else None
    shape_list: list[Shape] = []
    for _ in range(count):
        shape = list(base)
        variation = draw(st.sampled_from(["same", "same", "same", "extent", "extent", "drop", "add"]))
        if variation == "extent" and shape:
            shape[draw(st.integers(0, len(shape) - 1))] = draw(st.integers(0, 3))
        elif variation == "drop" and shape:
            shape.pop()
        elif variation == "add":
            shape.append(draw(st.integers(0, 2)))
        shape_list.append(tuple(shape))
    same_dtype = draw(st.booleans())
    first = draw(dtypes)
    dtype_list = [first if same_dtype else draw(dtypes) for _ in range(count)]
    scalars = [op == "cat" and draw(st.integers(0, 5)) == 0 for _ in range(count)]
    static: object = draw(CAT_DIMS) if op == "cat" else axis
    return op, shape_list, dtype_list, static, scalars


def join_numpy(op: str, static: object) -> Callable[[Sequence[Any]], Array]:
    if op == "concatenate":
        return lambda xs: np.concatenate(xs, axis=cast(int, static))
    if op == "concatenate-flat":
        return lambda xs: np.concatenate(xs, axis=None)
    if op == "stack":
        return lambda xs: np.stack(xs, axis=cast(int, static))
    if op == "hstack":
        return lambda xs: np.hstack(xs)
    if op == "vstack":
        return lambda xs: np.vstack(xs)
    dims = (static,) if isinstance(static, int) else cast(Shape, static)
    return lambda xs: julia_cat(xs, dims)


@FUZZ
@given(join_calls(), seeds)
def test_fuzz_concatenate_family(spec: tuple[str, list[Shape], list[np.dtype[Any]], object, list[bool]], seed: int) -> None:
    op_name, shape_list, dtype_list, static, scalars = spec
    arrays = [make(shape, dtype, seed + k) for k, (shape, dtype) in enumerate(zip(shape_list, dtype_list))]
    # cat takes Python floats too (weak scalars); their tangent is a 0-d float64 array.
    values: list[object] = [float(k) + 0.5 if scalar else a for k, (a, scalar) in enumerate(zip(arrays, scalars))]
    value_dtypes = [np.dtype(np.float64) if scalar else a.dtype for a, scalar in zip(arrays, scalars)]
    numpy = join_numpy(op_name, static)
    op: object
    args: tuple[object, ...]
    kwargs: dict[str, object] = {}
    if op_name == "cat":
        op, args, kwargs = sr.cat, tuple(values), {"dims": Val(cast(Any, static))}
    else:
        op = {"concatenate-flat": sr.concatenate}.get(op_name) or getattr(sr, op_name)
        args = (tuple(values),)
        if op_name == "concatenate-flat":
            kwargs = {"axis": None}
        elif op_name in ("concatenate", "stack"):
            kwargs = {"axis": Val(cast(int, static))}
    result = outcome(lambda: rrule_call(op, *args, **kwargs), lambda: numpy(values), value_dtypes)
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Callable[[object], tuple[object, ...]]], result[1])
    y = assert_forward(y, want)
    assert_forward(call(op, *args, **kwargs), want)
    dy = cotangent(y, seed + 7)
    output = back(dy)
    tangents = list(cast(Sequence[object], output[0])) if op_name != "cat" else list(output)
    assert len(tangents) == len(values)
    primals = [np.asarray(v) for v in values]
    if y.dtype.kind not in "fc":
        assert all(isinstance(t, NoTangent) for t in tangents)
    else:
        expected = gather_pullback(numpy, [p.shape for p in primals], dy)
        for tangent, want_dx, primal in zip(tangents, expected, primals):
            assert_tangent(tangent, want_dx, primal, y.dtype)
    zero = back(ZeroTangent())
    zeros = list(cast(Sequence[object], zero[0])) if op_name != "cat" else list(zero)
    assert all(isinstance(t, (ZeroTangent, NoTangent)) for t in zeros)
    with pytest.raises(ValueError, match=r"shape"):
        back(np.zeros(y.shape + (2,)))


# ---------------------------------------------------------------------------------------------
# flip, roll, permute_dims, transpose, swapaxes, reshape
# ---------------------------------------------------------------------------------------------

STRUCTURE_OPS = ["flip", "roll", "permute_dims", "transpose", "swapaxes", "reshape"]
# roll's kernels depend on the pattern of rolled axes, not on the shifts: shifts vary freely.
SHIFTS = st.one_of(st.integers(-7, 7), st.sampled_from([2**65, -(2**40)]), st.lists(st.integers(-5, 5), max_size=3).map(tuple))


def static_value(value: object) -> object:
    """``Val(value)`` for an int or a tuple of ints, ``None`` as it is."""
    return None if value is None else Val(cast(Any, value))


@st.composite
def structure_calls(draw: st.DrawFn) -> tuple[str, Shape, np.dtype[Any], tuple[object, ...]]:
    shape = draw(shapes)
    dtype = draw(dtypes)
    op = draw(st.sampled_from(STRUCTURE_OPS))
    ndim = len(shape)
    axis = st.integers(-ndim - 1, ndim)
    axes = st.one_of(st.none(), axis, st.lists(axis, max_size=3).map(tuple))
    if op == "flip":
        return op, shape, dtype, (draw(axes),)
    if op == "roll":
        chosen = draw(axes)
        if ndim == 0 and chosen == ():
            chosen = None  # NumPy 2.4 itself fails inside np.roll on that call (an empty zip)
        return op, shape, dtype, (draw(SHIFTS), chosen)
    if op == "swapaxes":
        return op, shape, dtype, (draw(axis), draw(axis))
    if op in ("permute_dims", "transpose"):
        permutation = list(draw(st.permutations(range(ndim))))
        mutation = draw(st.sampled_from(["none"] * 4 + ["drop", "duplicate", "out of range", "negative"]))
        if mutation == "drop" and permutation:
            permutation.pop()
        elif mutation == "duplicate" and permutation:
            permutation[-1] = permutation[0]
        elif mutation == "out of range":
            permutation.append(ndim)
        elif mutation == "negative" and permutation:
            permutation[0] -= ndim
        static = None if op == "transpose" and draw(st.booleans()) else tuple(permutation)
        return op, shape, dtype, (static,)
    size = int(np.prod(shape))
    candidates = [(-1,), (size,), (1, -1), (-1, 1, 1), (-1, -1), (size + 1,), (0, -1), shape[::-1], (), (size, 1)]
    return op, shape, dtype, (draw(st.sampled_from(candidates)),)


def structure_numpy(op: str, statics: tuple[object, ...]) -> Callable[[Sequence[Array]], Array]:
    if op == "flip":
        return lambda xs: np.flip(xs[0], cast(Any, statics[0]))
    if op == "roll":
        return lambda xs: np.roll(xs[0], cast(Any, statics[0]), axis=cast(Any, statics[1]))
    if op == "permute_dims":
        return lambda xs: np.permute_dims(xs[0], cast(Any, statics[0]))
    if op == "transpose":
        return lambda xs: np.transpose(xs[0], cast(Any, statics[0]))
    if op == "swapaxes":
        return lambda xs: np.swapaxes(xs[0], cast(Any, statics[0]), cast(Any, statics[1]))
    return lambda xs: np.reshape(xs[0], cast(Any, statics[0]))


@FUZZ
@given(structure_calls(), seeds)
def test_fuzz_flip_roll_permute_reshape(spec: tuple[str, Shape, np.dtype[Any], tuple[object, ...]], seed: int) -> None:
    op_name, shape, dtype, statics = spec
    x = make(shape, dtype, seed)
    op = getattr(sr, op_name)
    numpy = structure_numpy(op_name, statics)
    args: tuple[object, ...] = (x, *(static_value(value) for value in statics))
    result = outcome(lambda: rrule_call(op, *args), lambda: numpy([x]), [dtype])
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Callable[[object], tuple[object, ...]]], result[1])
    y = assert_forward(y, want)
    assert_forward(call(op, *args), want)
    dy = cotangent(y, seed + 3)
    tangents = back(dy)
    assert len(tangents) == len(args)
    assert all(isinstance(t, NoTangent) for t in tangents[1:])
    (expected,) = gather_pullback(numpy, [x.shape], dy)
    assert_tangent(tangents[0], expected, x, y.dtype)
    if dtype.kind in "fc":  # a Fill cotangent gives a Fill, equal to the pullback of its dense equivalent
        (lazy, *_) = back(Fill(2.0, y.shape, dy.dtype))
        assert isinstance(lazy, Fill)
        np.testing.assert_array_equal(np.asarray(lazy), np.asarray(back(np.full(y.shape, 2.0))[0]))
        assert back(ZeroTangent())[0] == ZeroTangent()
    with pytest.raises(ValueError, match=r"shape"):
        back(np.zeros(y.shape + (1,)))


# ---------------------------------------------------------------------------------------------
# kron
# ---------------------------------------------------------------------------------------------


# Each (dtype pair, ndim) is a kernel signature: pairs come from a small set.
F64, C128, F32, I64 = (np.dtype(name) for name in ("float64", "complex128", "float32", "int64"))
KRON_DTYPES = st.sampled_from(
    [(F64, F64)] * 4 + [(C128, C128), (F32, C128), (I64, I64), (I64, F64)]
    + [(F64, bad) for bad in UNSUPPORTED[:3]] + [(bad, C128) for bad in UNSUPPORTED[3:]]
)


@settings(FUZZ, max_examples=150)
@given(shapes, shapes, KRON_DTYPES, seeds)
def test_fuzz_kron(shape_a: Shape, shape_b: Shape, pair: tuple[np.dtype[Any], np.dtype[Any]], seed: int) -> None:
    dtype_a, dtype_b = pair
    a, b = make(shape_a, dtype_a, seed), make(shape_b, dtype_b, seed + 1)
    result = outcome(lambda: rrule_call(sr.kron, a, b), lambda: np.kron(a, b), [dtype_a, dtype_b])
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Callable[[object], tuple[object, ...]]], result[1])
    # NumPy multiplies complex numbers with fused multiply-adds (its SIMD loops), so a
    # complex product can differ from NumPy's in the last bit; real products are exact.
    y = assert_forward(y, want, exact=want.dtype.kind != "c")
    if y.dtype.kind not in "fc":
        return
    dy = cotangent(y, seed + 2)
    da, db = back(dy)
    want_da, want_db = kron_pullback(a.astype(y.dtype), b.astype(y.dtype), dy)
    assert_tangent(da, want_da, a, y.dtype)
    assert_tangent(db, want_db, b, y.dtype)
    with pytest.raises(ValueError, match=r"shape"):
        back(np.zeros(y.shape + (1,)))


def test_fuzz_reference_refusals_are_exact() -> None:
    """The harness itself: a NumPy refusal is ``Invalid``, whatever NumPy's exception type."""
    with pytest.raises(Invalid):
        reference(lambda: np.repeat(np.ones(3), 2, axis=3))  # AxisError
    with pytest.raises(Invalid):
        reference(lambda: np.concatenate([np.ones(2), np.ones((2, 2))]))


# ---------------------------------------------------------------------------------------------
# broadcast_to, sum, mean, pad, split
# ---------------------------------------------------------------------------------------------
# broadcast_to, pad and split are gathers (pad's border reads no input): their pullbacks are
# checked with gather_pullback over NumPy's own op on element ids. sum and mean against
# NumPy's broadcast of dy (divided by the count for mean).

STRUCTURE_DTYPES = st.sampled_from([np.dtype(np.float64)] * 4 + [np.dtype(np.complex64), np.dtype(np.int64), np.dtype(np.bool_)] + UNSUPPORTED)


@st.composite
def broadcast_calls(draw: st.DrawFn) -> tuple[Shape, Shape]:
    """A target shape and an input shape that usually broadcasts to it (a 1 here and there,
    leading axes dropped), sometimes not (an extent changed, or extra leading axes)."""
    target = draw(st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple))
    drop = draw(st.integers(0, len(target)))
    x_shape = tuple(1 if draw(st.integers(0, 2)) == 0 else extent for extent in target[drop:])
    if draw(st.integers(0, 5)) == 0 and x_shape:
        x_shape = x_shape[:-1] + (x_shape[-1] + 2,)
    if draw(st.integers(0, 9)) == 0:
        x_shape = (2,) + target
    if draw(st.integers(0, 9)) == 0 and target:
        target = target[:-1] + (-1,)
    return x_shape, target


@FUZZ
@given(broadcast_calls(), STRUCTURE_DTYPES, seeds)
def test_fuzz_broadcast_to(shapes_pair: tuple[Shape, Shape], dtype: np.dtype[Any], seed: int) -> None:
    x_shape, target = shapes_pair
    x = make(x_shape, dtype, seed)
    result = outcome(lambda: rrule_call(sr.broadcast_to, x, Val(target)), lambda: np.broadcast_to(x, target), [dtype])
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Back], result[1])
    y = assert_forward(y, want)
    assert not y.flags.writeable
    dy = cotangent(y, seed + 1)
    (dx, static) = back(dy)
    assert static == NoTangent()
    if y.dtype.kind in "fc":
        (expected,) = gather_pullback(lambda xs: np.broadcast_to(xs[0], target), [x_shape], dy)
        assert_tangent(dx, expected, x, y.dtype)
    else:
        assert dx == NoTangent()
    with pytest.raises(ValueError, match=r"shape"):
        back(np.zeros(y.shape + (2,)))


@st.composite
def sum_calls(draw: st.DrawFn) -> tuple[Shape, Shape | None, bool]:
    shape = draw(st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple))
    ndim = len(shape)
    axis = draw(st.one_of(st.none(), st.lists(st.integers(-ndim - 1, ndim), max_size=3).map(tuple)))
    return shape, axis, draw(st.booleans())


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@FUZZ
@given(sum_calls(), STRUCTURE_DTYPES, st.booleans(), seeds)
def test_fuzz_sum_mean(spec: tuple[Shape, Shape | None, bool], dtype: np.dtype[Any], is_mean: bool, seed: int) -> None:
    shape, axis, keepdims = spec
    x = make(shape, dtype, seed)
    op = sr.mean if is_mean else sr.sum
    reduction = np.mean if is_mean else np.sum
    static = None if axis is None else Val(axis)

    def numpy() -> Array:
        return np.asarray(reduction(x, axis=axis, keepdims=keepdims))

    result = outcome(lambda: rrule_call(op, x, static, Val(keepdims)), numpy, [dtype])
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Back], result[1])
    y = assert_forward(y, want)  # NumPy's own reduction: equal, NaN (a mean of nothing) included
    dy = cotangent(y, seed + 1)
    dx, *statics = back(dy)
    assert statics == [NoTangent(), NoTangent()]
    if x.dtype.kind not in "fc":
        assert dx == NoTangent()
        return
    axes = tuple(range(len(shape))) if axis is None else tuple(a % len(shape) for a in axis)
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64)) if is_mean else 1
    kept = dy if keepdims else np.expand_dims(dy, axes)
    expected = np.broadcast_to(kept / max(count, 1), shape)
    assert_tangent(np.asarray(dx) if isinstance(dx, Fill) else dx, expected, x, y.dtype)


@st.composite
def pad_calls(draw: st.DrawFn) -> tuple[Shape, Shape, object]:
    shape = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple))
    count = draw(st.sampled_from([1, 2 * len(shape), 2 * len(shape), 2 * len(shape) + 1]))
    widths = tuple(draw(st.lists(st.integers(-1, 2), min_size=count, max_size=count)))
    constant = draw(st.sampled_from([0, 1.5, -2, 2j]))
    return shape, widths, constant


def numpy_pad(x: Array, widths: Shape, constant: object) -> Array:
    ndim = x.ndim
    if len(widths) == 1:
        pairs: object = widths[0]
    elif len(widths) == 2 * ndim:
        pairs = [(widths[2 * k], widths[2 * k + 1]) for k in range(ndim)] if ndim else 0
    else:
        raise ValueError("pad_width has the wrong length")
    if constant == 2j and x.dtype.kind != "c":
        raise TypeError("a complex constant for a real array")  # NumPy warns and drops it
    return np.pad(x, cast(Any, pairs), constant_values=cast(Any, constant))


@FUZZ
@given(pad_calls(), STRUCTURE_DTYPES, seeds)
def test_fuzz_pad(spec: tuple[Shape, Shape, object], dtype: np.dtype[Any], seed: int) -> None:
    shape, widths, constant = spec
    x = make(shape, dtype, seed)
    result = outcome(lambda: rrule_call(sr.pad, x, Val(widths), constant), lambda: numpy_pad(x, widths, constant), [dtype])
    if result is None:
        return
    want, (y, back) = result[0], cast(tuple[object, Back], result[1])
    y = assert_forward(y, want)
    dy = cotangent(y, seed + 1)
    dx, static, dconstant = back(dy)
    assert static == NoTangent()
    if y.dtype.kind not in "fc":
        assert dx == NoTangent() and dconstant == NoTangent()
        return
    (expected,) = gather_pullback(lambda xs: numpy_pad(xs[0], widths, 0), [shape], dy)
    assert_tangent(dx, expected, x, y.dtype)
    if isinstance(constant, int):
        assert dconstant == NoTangent()
    else:
        border = dy[numpy_pad(np.zeros(shape, bool), widths, True)].sum()  # the padded cells
        got = np.asarray(dconstant)
        assert got.shape == () and got.dtype == np.asarray(constant).dtype
        # dy is rounded to the output's dtype before it is summed: 32-bit outputs lose digits
        tolerance = 1e-5 if y.dtype in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-12
        np.testing.assert_allclose(got, border if got.dtype.kind == "c" else np.real(border), rtol=tolerance, atol=tolerance)


@st.composite
def split_calls(draw: st.DrawFn) -> tuple[Shape, int | Shape, int]:
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple))
    ndim = len(shape)
    axis = draw(st.integers(-ndim - 1, ndim))
    indices: int | Shape = draw(st.one_of(st.integers(0, 4), st.lists(st.integers(-5, 6), max_size=3).map(tuple)))
    return shape, indices, axis


@FUZZ
@given(split_calls(), STRUCTURE_DTYPES, seeds)
def test_fuzz_split(spec: tuple[Shape, int | Shape, int], dtype: np.dtype[Any], seed: int) -> None:
    shape, indices, axis = spec
    x = make(shape, dtype, seed)

    def numpy() -> Array:
        parts = np.split(x, indices, axis=axis)
        return np.asarray(len(parts))  # the parts are compared below, one by one

    static: Val[int] | Val[tuple[int, ...]] = Val(indices) if isinstance(indices, int) else Val(indices)
    result = outcome(lambda: rrule_call(sr.split, x, static, Val(axis)), numpy, [dtype])
    if result is None:
        return
    parts, back = cast(tuple[tuple[Array, ...], Back], result[1])
    expected_parts = np.split(x, indices, axis=axis)
    assert isinstance(parts, tuple) and len(parts) == len(expected_parts)
    for part, want in zip(parts, expected_parts):
        assert_forward(part, want)
    dys = [cotangent(part, seed + k) for k, part in enumerate(parts)]
    dx, *statics = back(tuple(dys))
    assert statics == [NoTangent(), NoTangent()]
    if x.dtype.kind not in "fc":
        assert dx == NoTangent()
        return
    flat = np.concatenate([dy.reshape(-1) for dy in dys]) if dys else np.zeros(0)
    (expected,) = gather_pullback(
        lambda xs: np.concatenate([part.reshape(-1) for part in np.split(xs[0], indices, axis=axis)]), [shape], flat
    )
    assert_tangent(dx, expected, x, x.dtype)
    with pytest.raises(ValueError, match="cotangents"):
        back(tuple(dys) + (dys[0],))


# ---------------------------------------------------------------------------------------------
# Every op is fuzzed, or says why not
# ---------------------------------------------------------------------------------------------

# The ops whose calls each fuzz test above draws.
FUZZED: dict[str, set[str]] = {
    "test_fuzz_repeat_and_tile": {"repeat", "tile"},
    "test_fuzz_concatenate_family": {op_of(name) for name in JOIN_OPS},
    "test_fuzz_flip_roll_permute_reshape": set(STRUCTURE_OPS),
    "test_fuzz_kron": {"kron"},
    "test_fuzz_broadcast_to": {"broadcast_to"},
    "test_fuzz_sum_mean": {"sum", "mean"},
    "test_fuzz_pad": {"pad"},
    "test_fuzz_split": {"split"},
}
NOT_FUZZED = {
    name: "not fuzzed yet; its forward, rules and bad inputs are tests/rules/test_indexing.py's parametrized cases"
    for name in ("getindex", "take", "take_along_axis", "index_add")
}


def test_every_op_is_fuzzed() -> None:
    assert all(callable(globals().get(test)) for test in FUZZED), sorted(set(FUZZED) - set(globals()))
    assert_every_op_has_a_row("the fuzz tests", set().union(*FUZZED.values()), NOT_FUZZED)
