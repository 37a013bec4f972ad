"""The concatenate family: forward vs NumPy, rules vs central finite differences.

The finite-difference helpers below are local on purpose (``stablerules.testing`` lands
later); they only call the public op, never the rule's own formula. Concatenation is linear
and exact, so a central difference with step 0.5 is exact up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from tests.references import array_rrule as rrule, dense, random_array

Array = npt.NDArray[Any]
Leaf = Array | float | complex | int | bool
STEP = 0.5

RNG = np.random.default_rng(20240604)

# Rule calls on ops chosen at run time (typed as callables) go through this untyped name, so
# that mypy does not try each of the rules' thousands of overloads on every such call (the result
# would be loose all the same).
_frule: Callable[..., tuple[object, object]] = sr.frule


def arrays(tangents: object) -> tuple[Array, ...]:
    """The tangents of a pullback result (or of its sequence entry), each checked dense."""
    assert isinstance(tangents, tuple)
    return tuple(dense(tangent) for tangent in tangents)


def only(result: tuple[object, ...]) -> tuple[object, ...]:
    """The tangent tuple of a one-argument sequence op: ``back(dy) == ((da, db, ...),)``."""
    assert len(result) == 1 and isinstance(result[0], tuple)
    return result[0]


def differentiable(leaf: Leaf) -> bool:
    if isinstance(leaf, np.ndarray):
        return leaf.dtype.kind in "fc"
    return isinstance(leaf, (float, complex))


def leaf_dtype(leaf: Leaf) -> np.dtype[np.generic]:
    return leaf.dtype if isinstance(leaf, np.ndarray) else np.asarray(leaf).dtype


def nudged(leaves: Sequence[Leaf], position: int, flat: int, delta: complex) -> list[Leaf]:
    """A copy of ``leaves`` with one element of leaf ``position`` moved by ``delta``."""
    moved = list(leaves)
    leaf = leaves[position]
    if isinstance(leaf, np.ndarray):
        copy = leaf.copy()
        copy.reshape(-1)[flat] += delta if copy.dtype.kind == "c" else delta.real
        moved[position] = copy
    else:
        moved[position] = leaf + (delta if isinstance(leaf, complex) else delta.real)
    return moved


def loss(y: Array, dy: Array) -> float:
    return float(np.vdot(dy.astype(np.complex128), y.astype(np.complex128)).real)


def fd_pullback(call: Callable[[Sequence[Leaf]], Array], leaves: Sequence[Leaf], dy: Array) -> list[Array | None]:
    """dL/dRe(x) + i dL/dIm(x) for L = Re<dy, call(x)>, by central differences."""
    gradients: list[Array | None] = []
    for position, leaf in enumerate(leaves):
        if not differentiable(leaf):
            gradients.append(None)
            continue
        dtype = leaf_dtype(leaf)
        size = int(np.size(leaf))
        gradient = np.zeros(size, dtype=np.complex128)
        directions = (1.0, 1j) if dtype.kind == "c" else (1.0,)
        for flat in range(size):
            for direction in directions:
                plus = loss(call(nudged(leaves, position, flat, STEP * direction)), dy)
                minus = loss(call(nudged(leaves, position, flat, -STEP * direction)), dy)
                gradient[flat] += (plus - minus) / (2 * STEP) * direction
        shaped = gradient.reshape(np.shape(leaf))
        gradients.append(shaped if dtype.kind == "c" else shaped.real)
    return gradients


def fd_pushforward(call: Callable[[Sequence[Leaf]], Array], leaves: Sequence[Leaf], tangents: Sequence[Leaf | None]) -> Array:
    """(call(x + h v) - call(x - h v)) / 2h."""
    def moved(sign: float) -> list[Leaf]:
        out: list[Leaf] = []
        for leaf, tangent in zip(leaves, tangents):
            if tangent is None:
                out.append(leaf)
            elif isinstance(leaf, np.ndarray):
                out.append(np.asarray(leaf + sign * STEP * np.asarray(tangent), dtype=leaf.dtype))
            else:
                assert isinstance(tangent, (float, complex)) and isinstance(leaf, (float, complex))
                out.append(leaf + sign * STEP * tangent)
        return out

    plus, minus = moved(1.0), moved(-1.0)
    return (call(plus).astype(np.complex128) - call(minus).astype(np.complex128)) / (2 * STEP)


def tolerance(dtype: np.dtype[np.generic]) -> float:
    return 1e-5 if dtype in (np.dtype(np.float32), np.dtype(np.complex64)) else 1e-12


def random_tangent(leaf: Leaf) -> Leaf | None:
    if not differentiable(leaf):
        return None
    if isinstance(leaf, np.ndarray):
        return random_array(RNG, leaf.shape, leaf.dtype)
    return complex(RNG.uniform(-1, 1), RNG.uniform(-1, 1)) if isinstance(leaf, complex) else float(RNG.uniform(-1, 1))


def check_rules(
    call: Callable[[Sequence[Leaf]], Array],
    rrule_call: Callable[[Sequence[Leaf]], tuple[object, Callable[[object], tuple[object, ...]]]],
    frule_call: Callable[[Sequence[Leaf | None], Sequence[Leaf]], tuple[object, object]],
    flatten: Callable[[tuple[object, ...]], Sequence[object]],
    leaves: Sequence[Leaf],
) -> None:
    """Primal, pullback (vs FD), pushforward (vs FD) and the tangents' shapes and dtypes."""
    expected_y = call(leaves)
    y, back = rrule_call(leaves)
    assert isinstance(y, np.ndarray)
    assert y.dtype == expected_y.dtype and np.array_equal(y, expected_y)
    dy = random_array(RNG, y.shape, y.dtype if y.dtype.kind in "fc" else np.float64)
    tangents = flatten(back(dy))
    assert len(tangents) == len(leaves)
    for tangent, leaf, reference in zip(tangents, leaves, fd_pullback(call, leaves, dy)):
        if reference is None:
            assert tangent == NoTangent()
            continue
        dtype = leaf_dtype(leaf)
        assert isinstance(tangent, np.ndarray)
        assert tangent.shape == np.shape(leaf) and tangent.dtype == dtype
        # A float64 input of a float32 output (a weak Python scalar) is rounded to float32.
        bound = max(tolerance(dtype), tolerance(y.dtype))
        np.testing.assert_allclose(tangent, reference, rtol=bound, atol=bound)

    directions = [random_tangent(leaf) for leaf in leaves]
    y2, pushed = frule_call(directions, leaves)
    assert isinstance(y2, np.ndarray) and np.array_equal(y2, expected_y)
    if y.dtype.kind not in "fc":
        assert pushed == NoTangent()
        return
    assert isinstance(pushed, np.ndarray) and pushed.shape == y.shape and pushed.dtype == y.dtype
    reference_push = fd_pushforward(call, leaves, directions)
    # Finite differences of a float32 input carry float32 rounding into any output dtype.
    push_tolerance = max(tolerance(leaf_dtype(leaf)) for leaf in leaves if differentiable(leaf))
    np.testing.assert_allclose(
        pushed, reference_push if y.dtype.kind == "c" else reference_push.real,
        rtol=push_tolerance, atol=push_tolerance,
    )


def sequence_tangents(op: Callable[..., object], **kwargs: object) -> Callable[[Sequence[Leaf | None], Sequence[Leaf]], tuple[object, object]]:
    def call(directions: Sequence[Leaf | None], leaves: Sequence[Leaf]) -> tuple[object, object]:
        tangents = tuple(NoTangent() if t is None else t for t in directions)
        return _frule(op, (tangents,), tuple(leaves), **kwargs)

    return call


def check_sequence_op(op: Callable[..., Array], numpy_op: Callable[..., Array], leaves: Sequence[Leaf], **kwargs: object) -> None:
    """For concatenate/stack/hstack/vstack: one positional argument, the sequence."""
    numpy_kwargs = {key: value.value if isinstance(value, Val) else value for key, value in kwargs.items()}

    def call(values: Sequence[Leaf]) -> Array:
        y = op(tuple(values), **kwargs)
        reference = numpy_op(tuple(values), **numpy_kwargs)
        assert y.dtype == reference.dtype and np.array_equal(y, reference)
        return y

    def flatten(result: tuple[object, ...]) -> Sequence[object]:
        assert len(result) == 1 and isinstance(result[0], tuple)
        return result[0]

    check_rules(
        call,
        lambda values: sr.rrule(op, tuple(values), **kwargs),
        sequence_tangents(op, **kwargs),
        flatten,
        leaves,
    )


# ======================================================================================
# concatenate
# ======================================================================================

CONCATENATE_CASES = [
    ([(2, 3), (4, 3)], 0, ["float64", "float64"]),
    ([(2, 3), (2, 1), (2, 2)], 1, ["float32", "float32", "float32"]),
    ([(2, 3), (2, 2)], -1, ["float64", "float32"]),
    ([(1, 2, 3), (1, 0, 3), (1, 1, 3)], 1, ["complex128", "complex128", "complex128"]),
    ([(3,), (2,)], 0, ["float32", "complex64"]),
    ([(2, 2), (2, 1)], 1, ["int64", "float64"]),
    ([(2,), (3,)], 0, ["int32", "bool"]),
    ([(0, 2), (0, 3)], 1, ["float64", "float64"]),
    ([(2, 3), (3,), ()], None, ["float64", "float32", "float64"]),
]


@pytest.mark.parametrize(("shapes", "axis", "dtypes"), CONCATENATE_CASES)
def test_concatenate_matches_numpy_and_finite_differences(
    shapes: list[tuple[int, ...]], axis: int | None, dtypes: list[str]
) -> None:
    leaves = [random_array(RNG, shape, dtype) for shape, dtype in zip(shapes, dtypes)]
    check_sequence_op(sr.concatenate, np.concatenate, leaves, axis=None if axis is None else Val(axis))


def test_concatenate_default_axis_and_list_input() -> None:
    a, b = random_array(RNG, (2, 3), np.float64), random_array(RNG, (1, 3), np.float64)
    np.testing.assert_array_equal(sr.concatenate([a, b]), np.concatenate([a, b]))


def test_concatenate_of_strided_inputs() -> None:
    base = random_array(RNG, (4, 6), np.float64)
    a, b = base[::2, ::-1], np.asfortranarray(base[1::2])
    y, back = rrule(sr.concatenate, (a, b), axis=Val(0))
    np.testing.assert_array_equal(y, np.concatenate((a, b), axis=0))
    dy = random_array(RNG, y.shape, np.float64)
    da, db = arrays(only(back(dy)))
    np.testing.assert_array_equal(da, dy[:2])
    np.testing.assert_array_equal(db, dy[2:])


def test_concatenate_flattens_strided_inputs() -> None:
    base = random_array(RNG, (3, 4), np.float32)
    a, b = base.T, base[::2, 1:3]
    y, back = rrule(sr.concatenate, (a, b), axis=None)
    np.testing.assert_array_equal(y, np.concatenate((a, b), axis=None))
    dy = random_array(RNG, y.shape, np.float32)
    da, db = arrays(only(back(dy)))
    assert da.shape == (4, 3) and db.shape == (2, 2)
    assert np.shares_memory(da, dy) and np.shares_memory(db, dy)
    np.testing.assert_array_equal(da, dy[:12].reshape(4, 3))
    np.testing.assert_array_equal(db, dy[12:].reshape(2, 2))


# ======================================================================================
# stack, hstack, vstack
# ======================================================================================


@pytest.mark.parametrize(
    ("shape", "axis", "dtypes"),
    [
        ((2, 3), 0, ["float64", "float64", "float64"]),
        ((2, 3), 2, ["float32", "float32"]),
        ((2, 3), -2, ["complex64", "float32"]),
        ((), 0, ["float64", "float64"]),
        ((0, 2), 1, ["float64", "float64"]),
        ((3,), 1, ["int64", "float64"]),
    ],
)
def test_stack(shape: tuple[int, ...], axis: int, dtypes: list[str]) -> None:
    leaves = [random_array(RNG, shape, dtype) for dtype in dtypes]
    check_sequence_op(sr.stack, np.stack, leaves, axis=Val(axis))


@pytest.mark.parametrize(
    ("shapes", "dtypes"),
    [
        ([(3,), (2,)], ["float64", "float64"]),
        ([(3,), (), (1,)], ["float64", "float32", "float64"]),
        ([(2, 1), (2, 3)], ["complex128", "complex128"]),
        ([(2, 2, 1), (2, 1, 1)], ["float32", "float32"]),
        ([(), ()], ["float64", "int64"]),
    ],
)
def test_hstack(shapes: list[tuple[int, ...]], dtypes: list[str]) -> None:
    leaves = [random_array(RNG, shape, dtype) for shape, dtype in zip(shapes, dtypes)]
    check_sequence_op(sr.hstack, np.hstack, leaves)


@pytest.mark.parametrize(
    ("shapes", "dtypes"),
    [
        ([(3,), (3,)], ["float64", "float64"]),
        ([(3,), (2, 3)], ["float32", "float64"]),
        ([(), (1, 1)], ["float64", "float64"]),
        ([(1, 2, 2), (3, 2, 2)], ["complex64", "complex64"]),
        ([(2,), (0, 2)], ["float64", "float64"]),
    ],
)
def test_vstack(shapes: list[tuple[int, ...]], dtypes: list[str]) -> None:
    leaves = [random_array(RNG, shape, dtype) for shape, dtype in zip(shapes, dtypes)]
    check_sequence_op(sr.vstack, np.vstack, leaves)


def test_stack_family_views_have_input_shapes() -> None:
    a, b = random_array(RNG, (3,), np.float64), random_array(RNG, (3,), np.float64)
    for op in (sr.stack, sr.vstack):
        y, back = rrule(op, (a, b))
        dy = random_array(RNG, y.shape, np.float64)
        da, db = arrays(only(back(dy)))
        assert da.shape == (3,) and np.shares_memory(da, dy) and np.shares_memory(db, dy)
    y, back = rrule(sr.hstack, (np.array(1.0), a))
    dy = random_array(RNG, y.shape, np.float64)
    ds, da = arrays(only(back(dy)))
    assert ds.shape == () and ds.shape == () and np.shares_memory(ds, dy)
    assert ds == dy[0]


# ======================================================================================
# cat (Julia semantics, 0-based dims)
# ======================================================================================


def julia_cat(values: Sequence[Leaf], dims: tuple[int, ...]) -> Array:
    """An independent reference: pad, then copy blocks along all of ``dims`` (zeros elsewhere)."""
    arrays = [np.asarray(value) for value in values]
    dtype = np.result_type(*values)
    ndim = max(max(array.ndim for array in arrays), max(dims) + 1)
    padded = [array.reshape(array.shape + (1,) * (ndim - array.ndim)) for array in arrays]
    shape: list[int] = list(padded[0].shape)
    for dim in dims:
        shape[dim] = sum(array.shape[dim] for array in padded)
    out = np.zeros(shape, dtype=dtype)
    offsets = [0] * ndim
    for array in padded:
        out[tuple(slice(offsets[d], offsets[d] + array.shape[d]) if d in dims else slice(None) for d in range(ndim))] = array
        for dim in dims:
            offsets[dim] += array.shape[dim]
    return out


def check_cat(leaves: Sequence[Leaf], dims: int | tuple[int, ...]) -> None:
    static: Val[int] | Val[tuple[int, ...]] = Val(dims) if isinstance(dims, int) else Val(dims)
    dims_tuple = (dims,) if isinstance(dims, int) else dims

    def call(values: Sequence[Leaf]) -> Array:
        y = sr.cat(*values, dims=static)
        reference = julia_cat(values, dims_tuple)
        assert y.dtype == reference.dtype and np.array_equal(y, reference)
        return y

    def frule_call(directions: Sequence[Leaf | None], values: Sequence[Leaf]) -> tuple[object, object]:
        return sr.frule(sr.cat, tuple(NoTangent() if t is None else t for t in directions), *values, dims=static)

    check_rules(call, lambda values: sr.rrule(sr.cat, *values, dims=static), frule_call, lambda result: result, leaves)


CAT_CASES: list[tuple[list[tuple[int, ...] | str], int | tuple[int, ...], list[str]]] = [
    ([(2, 3), (2, 1)], 1, ["float64", "float64"]),
    ([(2, 3), (2, 3)], 2, ["float32", "float32"]),
    ([(2,), (2, 3)], 1, ["float64", "float64"]),
    ([(2,), (2,)], 3, ["complex128", "float64"]),
    ([(), (), ()], 0, ["float64", "float64", "float64"]),
    ([(2, 2), (1, 3)], (0, 1), ["float64", "float32"]),
    ([(2,), (), (1, 2)], (0, 1), ["complex64", "complex64", "complex64"]),
    ([(2, 1), (2, 2)], (1, 2), ["float64", "float64"]),
    ([(2, 3), (0, 3)], 0, ["float64", "float64"]),
    ([(2,), "float", (1,)], 0, ["float32", "", "float32"]),
    ([(2,), "complex", "int"], (0, 1), ["float64", "", ""]),
    ([(2,), (1,)], 0, ["int64", "int32"]),
]


@pytest.mark.parametrize(("shapes", "dims", "dtypes"), CAT_CASES)
def test_cat(shapes: list[tuple[int, ...] | str], dims: int | tuple[int, ...], dtypes: list[str]) -> None:
    leaves: list[Leaf] = []
    for shape, dtype in zip(shapes, dtypes):
        if shape == "float":
            leaves.append(float(RNG.uniform(-1, 1)))
        elif shape == "complex":
            leaves.append(complex(RNG.uniform(-1, 1), RNG.uniform(-1, 1)))
        elif shape == "int":
            leaves.append(3)
        else:
            assert isinstance(shape, tuple)
            leaves.append(random_array(RNG, shape, dtype))
    check_cat(leaves, dims)


def test_cat_known_values() -> None:
    np.testing.assert_array_equal(sr.cat(1.0, 2.0, 3.0, dims=Val((0, 1))), np.diag([1.0, 2.0, 3.0]))
    a, b = random_array(RNG, (2, 3), np.float64), random_array(RNG, (2, 3), np.float64)
    np.testing.assert_array_equal(sr.cat(a, b, dims=Val(2)), np.stack((a, b), axis=2))
    np.testing.assert_array_equal(sr.cat(a, b, dims=Val((0,))), np.concatenate((a, b), axis=0))
    block = sr.cat(a, b, dims=Val((0, 1)))
    np.testing.assert_array_equal(block, np.block([[a, np.zeros((2, 3))], [np.zeros((2, 3)), b]]))
    assert sr.cat(np.float32(1.0), 2.0, dims=Val(0)).dtype == np.float32  # NumPy scalar: strong
    assert sr.cat(random_array(RNG, (2,), np.float32), 2.0, dims=Val(0)).dtype == np.float32  # Python: weak
    assert sr.cat(1, True, dims=Val(0)).dtype == np.int64
    y, back = rrule(sr.cat, 1, 2, dims=Val((0, 1)))
    np.testing.assert_array_equal(y, np.diag([1, 2]))
    assert back(np.ones((2, 2))) == (NoTangent(), NoTangent())
    with pytest.raises(ValueError, match=r"\(2, 3, 4\).*\(2, 3\)"):
        sr.cat(np.zeros((2, 3, 4)), np.zeros((2, 3)), dims=Val(1))  # read as (2, 3, 1)


def test_cat_scalar_tangents() -> None:
    x = random_array(RNG, (2,), np.float32)
    y, back = rrule(sr.cat, x, 2.5, 3, 1j, dims=Val(0))
    assert y.dtype == np.complex64
    dy = random_array(RNG, y.shape, np.complex64)
    dx, dfloat, dint, dcomplex = back(dy)
    dx, dfloat, dcomplex = dense(dx), dense(dfloat), dense(dcomplex)
    assert dx.dtype == np.float32 and np.shares_memory(dx, dy)
    np.testing.assert_array_equal(dx, dy[:2].real)
    assert isinstance(dfloat, np.ndarray) and dfloat.shape == () and dfloat.dtype == np.float64
    assert dfloat == np.float64(dy[2].real)
    assert dint == NoTangent()
    assert isinstance(dcomplex, np.ndarray) and dcomplex.shape == () and dcomplex.dtype == np.complex128
    assert dcomplex == np.complex128(dy[4])


def test_cat_block_diagonal_reads_only_blocks() -> None:
    a, b = random_array(RNG, (2, 2), np.float64), random_array(RNG, (1, 3), np.float64)
    y, back = rrule(sr.cat, a, b, dims=Val((0, 1)))
    dy = random_array(RNG, y.shape, np.float64)
    da, db = arrays(back(dy))
    np.testing.assert_array_equal(da, dy[:2, :2])
    np.testing.assert_array_equal(db, dy[2:, 2:])
    assert np.shares_memory(da, dy) and np.shares_memory(db, dy)
    fa, fb = back(Fill(2.0, y.shape, np.float64))
    assert fa == Fill(2.0, (2, 2), np.float64) and fb == Fill(2.0, (1, 3), np.float64)
    _, pushed = sr.frule(sr.cat, (np.float64(2.0), 0.5), 1.0, np.float64(3.0), dims=Val(0))
    np.testing.assert_array_equal(pushed, [2.0, 0.5])
    _, pushed = sr.frule(sr.cat, (Fill(1.0, (2, 2)), ZeroTangent()), a, b, dims=Val((0, 1)))
    expected = np.zeros((3, 5))
    expected[:2, :2] = 1.0
    np.testing.assert_array_equal(pushed, expected)


# ======================================================================================
# Pullback details: views, casts, lazy cotangents
# ======================================================================================


def test_pullback_views_are_zero_copy_and_casts_copy_once() -> None:
    a, b = random_array(RNG, (2, 3), np.float32), random_array(RNG, (2, 2), np.float32)
    y, back = rrule(sr.concatenate, (a, b), axis=Val(1))
    dy = random_array(RNG, y.shape, np.float32)
    da, db = arrays(only(back(dy)))
    assert np.shares_memory(da, dy) and np.shares_memory(db, dy)
    # A float64 cotangent is projected onto float32 once; the tangents are views of that copy.
    da64, _ = arrays(only(back(dy.astype(np.float64))))
    assert da64.dtype == np.float32 and not np.shares_memory(da64, dy)
    # A non-contiguous cotangent is still sliced, not copied.
    wide = random_array(RNG, (2, 10), np.float32)[:, ::2]
    dw, _ = arrays(only(back(wide)))
    assert np.shares_memory(dw, wide)
    np.testing.assert_array_equal(dw, wide[:, :3])

    c = random_array(RNG, (2, 2), np.float64)
    y, back = rrule(sr.concatenate, (a, c), axis=Val(1))
    dy = random_array(RNG, y.shape, np.float64)
    da, dc = arrays(only(back(dy)))
    assert da.dtype == np.float32 and not np.shares_memory(da, dy)
    assert dc.dtype == np.float64 and np.shares_memory(dc, dy)

    z = random_array(RNG, (2, 2), np.complex64)
    y, back = rrule(sr.concatenate, (a, z), axis=Val(1))
    dy = random_array(RNG, y.shape, np.complex64)
    da, dz = arrays(only(back(dy)))
    assert da.dtype == np.float32 and np.array_equal(da, dy[:, :3].real)
    assert dz.dtype == np.complex64 and np.shares_memory(dz, dy)


def test_fill_cotangent_from_sum() -> None:
    a, b = random_array(RNG, (2, 3), np.float32), random_array(RNG, (2, 2), np.float64)
    y, back = rrule(sr.concatenate, (a, b), axis=Val(1))
    # The pullback of s = sum(y) is a Fill of y's shape.
    sum_cotangent = Fill(1.0, y.shape, y.dtype)
    da, db = only(back(sum_cotangent))
    assert da == Fill(1.0, (2, 3), np.float32)
    assert db == Fill(1.0, (2, 2), np.float64)
    np.testing.assert_array_equal(np.asarray(da), np.ones((2, 3), np.float32))
    # A complex Fill onto a real input keeps the real part.
    z = random_array(RNG, (2, 2), np.complex128)
    y, back = rrule(sr.concatenate, (a, z), axis=Val(1))
    da, dz = only(back(Fill(2.0 + 3.0j, y.shape, np.complex128)))
    assert da == Fill(2.0, (2, 3), np.float32) and dz == Fill(2.0 + 3.0j, (2, 2), np.complex128)
    # Integer inputs stay NoTangent.
    i = random_array(RNG, (2, 1), np.int64)
    y, back = rrule(sr.stack, (b, b.astype(np.int64)), axis=Val(0))
    db1, di = only(back(Fill(1.0, y.shape, y.dtype)))
    assert db1 == Fill(1.0, (2, 2), np.float64) and di == NoTangent()
    del i


def test_zero_and_thunk_cotangents() -> None:
    a, i = random_array(RNG, (2,), np.float64), random_array(RNG, (3,), np.int64)
    y, back = rrule(sr.concatenate, (a, i))
    assert back(ZeroTangent()) == ((ZeroTangent(), NoTangent()),)
    dy = random_array(RNG, y.shape, np.float64)
    da, di = only(back(Thunk(lambda: dy)))
    assert di == NoTangent() and np.array_equal(dense(da), dy[:2])
    da, _ = only(back(Thunk(lambda: Fill(1.0, y.shape))))
    assert da == Fill(1.0, (2,), np.float64)
    # All-integer output: every tangent is NoTangent, the cotangent's shape is still checked.
    y, back = rrule(sr.concatenate, (i, i))
    assert back(np.ones(6)) == ((NoTangent(), NoTangent()),)
    with pytest.raises(ValueError, match=r"\(5,\).*\(6,\)"):
        back(np.ones(5))


def test_wrong_cotangent_shape_names_both_shapes() -> None:
    a = random_array(RNG, (2, 3), np.float64)
    _, back = rrule(sr.concatenate, (a, a), axis=Val(0))
    with pytest.raises(ValueError, match=r"\(4, 4\).*\(4, 3\)"):
        back(np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(4, 3\)"):
        back(Fill(1.0, (3, 3)))


def test_tangent_structure() -> None:
    a, b, c = (random_array(RNG, (2,), np.float64) for _ in range(3))
    _, back = rrule(sr.concatenate, (a, b), Val(0))  # axis passed positionally
    result = back(np.ones(4))
    assert len(result) == 2 and len(arrays(result[0])) == 2 and result[1] == NoTangent()
    _, back = rrule(sr.stack, [a, b, c])
    assert len(back(np.ones((3, 2)))) == 1
    _, back = rrule(sr.cat, a, b, c, dims=Val(0))
    assert len(back(np.ones(6))) == 3
    _, pushed = sr.frule(sr.concatenate, ((ZeroTangent(), b), NoTangent()), (a, b), Val(0))
    np.testing.assert_array_equal(pushed, np.concatenate((np.zeros(2), b)))
    _, pushed = sr.frule(sr.stack, (ZeroTangent(),), (a, b))
    np.testing.assert_array_equal(pushed, np.zeros((2, 2)))
    _, pushed = sr.frule(sr.hstack, ((Thunk(lambda: a), Fill(2.0, (2,))),), (a, b))
    np.testing.assert_array_equal(pushed, np.concatenate((a, [2.0, 2.0])))


def test_frule_checks_tangents() -> None:
    a = random_array(RNG, (2,), np.float64)
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        sr.frule(sr.concatenate, ((a, np.ones(3)),), (a, a))
    with pytest.raises(ValueError, match="one entry per positional"):
        sr.frule(sr.concatenate, (), (a, a))  # type: ignore[arg-type]  # wrong arity, on purpose
    with pytest.raises(ValueError, match="one tangent per array"):
        sr.frule(sr.concatenate, ((a,),), (a, a))
    with pytest.raises(ValueError, match=r"Fill of shape \(3,\)"):
        sr.frule(sr.cat, (a, Fill(1.0, (3,))), a, a, dims=Val(0))
    # The real part of a complex tangent for a real input.
    _, pushed = sr.frule(sr.concatenate, ((a * (1 + 2j), ZeroTangent()),), (a, a))
    np.testing.assert_array_equal(pushed, np.concatenate((a, np.zeros(2))))


# ======================================================================================
# A DenseNet-style chain
# ======================================================================================


def test_densenet_chain() -> None:
    """Four dense blocks: features grow along channels by concatenation, then a 1x1 "conv".

    The gradient of the input through all four concatenation pullbacks (and hand-written
    pullbacks of the convolutions) is checked against central finite differences, for a
    dense cotangent and for the Fill that sum's pullback produces.
    """
    growth, steps = 2, 4
    x0 = random_array(RNG, (1, 3, 2, 2), np.float64)
    weights = [random_array(RNG, (growth, 3 + growth * k), np.float64) for k in range(steps)]

    def dense_block(features: Array, weight: Array) -> tuple[Array, Callable[[object], Array]]:
        new: Array = np.tanh(np.einsum("oc,nchw->nohw", weight, features))
        y, back = rrule(sr.concatenate, (features, new), axis=Val(1))

        def dense_block_pullback(dy: object) -> Array:
            dfeatures, dnew = only(back(dy))
            if isinstance(dy, Fill):  # sum's Fill stays lazy through the concatenation
                assert isinstance(dfeatures, Fill) and isinstance(dnew, Fill)
            else:
                assert np.shares_memory(dense(dfeatures), dy)
            dpre = sr.materialize(dnew, new) * (1 - new**2)
            result: Array = sr.materialize(dfeatures, features) + np.einsum("oc,nohw->nchw", weight, dpre)
            return result

        return y, dense_block_pullback

    def forward(x: Array) -> tuple[Array, list[Callable[[object], Array]]]:
        pullbacks = []
        features = x
        for weight in weights:
            features, pullback = dense_block(features, weight)
            pullbacks.append(pullback)
        return features, pullbacks

    out, pullbacks = forward(x0)
    assert out.shape == (1, 3 + growth * steps, 2, 2)
    for dy in (random_array(RNG, out.shape, np.float64), Fill(1.0, out.shape)):
        gradient: object = dy
        for pullback in reversed(pullbacks):
            gradient = pullback(gradient)
        dense_dy = np.asarray(dy)
        h = 1e-6
        expected = np.zeros(x0.size)
        for flat in range(x0.size):
            step = np.zeros(x0.size)
            step[flat] = h
            plus = np.vdot(dense_dy, forward(x0 + step.reshape(x0.shape))[0])
            minus = np.vdot(dense_dy, forward(x0 - step.reshape(x0.shape))[0])
            expected[flat] = (plus - minus) / (2 * h)
        np.testing.assert_allclose(dense(gradient), expected.reshape(x0.shape), rtol=1e-6, atol=1e-8)


# ======================================================================================
# Errors
# ======================================================================================


def test_errors_quote_shapes() -> None:
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        sr.concatenate((np.zeros((2, 3)), np.zeros((2, 4))), axis=Val(0))
    with pytest.raises(ValueError, match=r"same number of dimensions.*\(2, 3\).*\(3,\)"):
        sr.concatenate((np.zeros((2, 3)), np.zeros(3)))
    with pytest.raises(ValueError, match="zero-dimensional"):
        sr.concatenate((np.zeros(()), np.zeros(())))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        sr.concatenate((np.zeros((2, 3)),), axis=Val(2))
    with pytest.raises(ValueError, match="axis -4 is out of bounds"):
        sr.stack((np.zeros((2, 3)),), axis=Val(-4))
    with pytest.raises(ValueError, match=r"same shape.*\(2, 3\).*\(3, 2\)"):
        sr.stack((np.zeros((2, 3)), np.zeros((3, 2))))
    with pytest.raises(ValueError, match=r"\(2,\).*\(2, 2\)"):
        sr.hstack((np.zeros(2), np.zeros((2, 2))))
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 2\)"):
        sr.vstack((np.zeros(3), np.zeros((2, 2))))
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(3, 3\)"):
        sr.cat(np.zeros((2, 2)), np.zeros((3, 3)), dims=Val(0))
    with pytest.raises(ValueError, match="empty sequence"):
        sr.concatenate(())
    with pytest.raises(ValueError, match="at least one"):
        sr.cat(dims=Val(0))
    with pytest.raises(ValueError, match="non-negative"):
        sr.cat(np.zeros(2), dims=Val(-1))
    with pytest.raises(ValueError, match="distinct"):
        sr.cat(np.zeros(2), dims=Val((0, 0)))
    with pytest.raises(TypeError, match="dtype object"):
        sr.concatenate((np.zeros(2), np.zeros(2, dtype=object)))
    with pytest.raises(TypeError, match="tuple or list"):
        sr.concatenate(np.zeros((2, 2)))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"arrays\[1\] must be an array"):
        sr.concatenate((np.zeros(2), {1.0, 2.0}))  # type: ignore[arg-type]  # a set is no array-like
    with pytest.raises(TypeError, match="mixed devices"):
        sr.precompile(sr.concatenate, (sr.ArraySpec((2,), np.float64), sr.ArraySpec((2,), np.float64, device="cuda")))


# ======================================================================================
# Signatures: no compile, no fallback, precompile, plan reuse
# ======================================================================================


def test_repeated_calls_compile_nothing_and_take_no_fallback() -> None:
    a, b = random_array(RNG, (2, 3), np.float32), random_array(RNG, (2, 1), np.float32)
    c = random_array(RNG, (1, 3), np.float32)

    def everything() -> None:
        for op in (sr.concatenate, sr.stack):
            y, back = rrule(op, (a, a), axis=Val(1))
            back(np.ones_like(y))
            back(Fill(1.0, y.shape, y.dtype))
            sr.frule(op, ((a, ZeroTangent()),), (a, a), axis=Val(1))
        for sequence_op in (sr.hstack, sr.vstack):
            pair = (a, b) if sequence_op is sr.hstack else (a, c)
            y, back = rrule(sequence_op, pair)
            back(np.ones_like(y))
        y, back = rrule(sr.cat, a, c, 1.0, dims=Val((0, 1)))
        back(np.ones_like(y))
        sr.frule(sr.cat, (a, c, 0.5), a, c, 1.0, dims=Val((0, 1)))

    everything()
    before = sr.cache_info()
    with sr.no_compile(), sr.no_fallback():
        everything()
        everything()
    after = sr.cache_info()
    assert after.compiles == before.compiles and after.fallbacks == before.fallbacks
    assert after.dynamic_arguments == before.dynamic_arguments


def test_plain_int_axis_is_a_dynamic_argument() -> None:
    a = random_array(RNG, (2,), np.float64)
    before = sr.cache_info().dynamic_arguments
    np.testing.assert_array_equal(sr.concatenate((a, a), axis=0), np.concatenate((a, a)))
    assert sr.cache_info().dynamic_arguments == before + 1
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError):
        sr.concatenate((a, a), axis=0)
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError):
        sr.cat(a, a, dims=(0, 1))


def test_precompile_and_explain_need_no_kernels() -> None:
    spec = sr.ArraySpec((2, 3), np.float32)
    assert sr.precompile(sr.concatenate, (spec, spec), axis=Val(1)) == ()
    assert sr.precompile(sr.cat, spec, 1.0, dims=Val((0, 1))) == ()
    assert sr.precompile(sr.hstack, (spec, spec)) == ()
    assert sr.explain(sr.stack, (spec, spec), axis=Val(0)) == ""
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2, 4\)"):
        sr.precompile(sr.concatenate, (spec, sr.ArraySpec((2, 4), np.float32)))


def _concatenate_plan(arrays: object, axis: object) -> tuple[object, object]:
    """The plan the scaffold finds (or builds) for ``concatenate(arrays, axis)``."""
    bound_arrays, statics = sr.concatenate.bind(arrays, axis)
    return bound_arrays, sr.concatenate.lookup(bound_arrays, statics, specs=True)


def test_plans_are_reused_per_signature() -> None:
    a = random_array(RNG, (2, 3), np.float32)
    _, first = _concatenate_plan((a, a), Val(1))
    _, second = _concatenate_plan([a.copy(), a.copy()], Val(1))
    assert first is second
    _, other = _concatenate_plan((a, a), Val(0))
    assert other is not first
    spec = sr.ArraySpec((5, 3), np.float32)
    sr.precompile(sr.concatenate, (spec, spec), axis=Val(0))  # warms the plan
    _, warmed = _concatenate_plan((random_array(RNG, (5, 3), np.float32),) * 2, Val(0))
    _, again = _concatenate_plan((spec, spec), Val(0))
    assert warmed is again


# --- the shared rule checker (stablerules.testing), one line per case ---------------------

from stablerules.testing import test_frule as check_frule  # noqa: E402
from stablerules.testing import test_rrule as check_rrule  # noqa: E402


def _r(shape: tuple[int, ...], dtype: str = "float64") -> Array:
    return random_array(RNG, shape, dtype)


@pytest.mark.parametrize(
    ("op", "args", "kwargs"),
    [
        (sr.concatenate, ((_r((2, 3)), _r((2, 4))),), {"axis": Val(1)}),
        (sr.concatenate, ((_r((2, 3)), _r((1, 3)), _r((0, 3))),), {"axis": Val(-2)}),
        (sr.concatenate, ((_r((2, 3), "float32"), _r((2, 2), "complex64")),), {"axis": Val(1)}),
        (sr.concatenate, ((_r((2, 3)), _r((4,))),), {"axis": None}),
        (sr.stack, ((_r((2, 3)), _r((2, 3), "complex128")),), {"axis": Val(2)}),
        (sr.hstack, ((_r((3,)), _r((2,), "float32")),), {}),
        (sr.vstack, ((_r((3,)), _r((2, 3))),), {}),
        (sr.cat, (_r((2, 2)), _r((3, 2))), {"dims": Val(0)}),
        (sr.cat, (_r((2, 2)), _r((2, 2))), {"dims": Val(3)}),
        (sr.cat, (_r((2, 2)), _r((1, 3), "complex128")), {"dims": Val((0, 1))}),
        (sr.cat, (_r(()), 1.5, _r((1,))), {"dims": Val(0)}),
    ],
)
def test_rules_pass_the_shared_checker(op: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    check_rrule(op, *args, fkwargs=kwargs)
    check_frule(op, *args, fkwargs=kwargs)


# =============================================================================================
# This family's rows in the cross-cutting tables (read through tests.rules.collect; the table
# names and row shapes are listed in tests/rules/__init__.py). Engine tables are functions:
# importing this file imports no engine.
# =============================================================================================

from tests.rules import ArrayCase, Case, TorchCase  # noqa: E402

ROBUSTNESS = [
    Case(
        "concatenate",
        sr.concatenate,
        lambda xs: (((*xs,),), {"axis": Val(-1)}),
        lambda xs: np.concatenate(xs, axis=-1),
        ((3, 4), (3, 2)),
        ((0, 4), (0, 2)),
        sequence=True,
    ),
    Case(
        "concatenate-flat",
        sr.concatenate,
        lambda xs: (((*xs,),), {"axis": None}),
        lambda xs: np.concatenate(xs, axis=None),
        ((3, 4), (5,)),
        ((0, 4), (0,)),
        ((), ()),
        sequence=True,
    ),
    Case(
        "stack",
        sr.stack,
        lambda xs: (((*xs,),), {"axis": Val(-1)}),
        lambda xs: np.stack(xs, axis=-1),
        ((3, 4), (3, 4)),
        ((3, 0), (3, 0)),
        ((), ()),
        sequence=True,
    ),
    Case(
        "hstack",
        sr.hstack,
        lambda xs: (((*xs,),), {}),
        lambda xs: np.hstack(xs),
        ((3, 4), (3, 1)),
        ((0, 4), (0, 1)),
        ((), ()),
        sequence=True,
    ),
    Case(
        "vstack",
        sr.vstack,
        lambda xs: (((*xs,),), {}),
        lambda xs: np.vstack(xs),
        ((3, 4), (4,)),
        ((0, 4), (0, 4)),
        ((), ()),
        sequence=True,
    ),
    Case(
        "cat-new-axis",
        sr.cat,
        lambda xs: ((*xs,), {"dims": Val(2)}),
        lambda xs: julia_cat(xs, (2,)),
        ((3, 4), (3, 4)),
        ((0, 4), (0, 4)),
        ((), ()),
    ),
    Case(
        "cat-block-diagonal",
        sr.cat,
        lambda xs: ((*xs,), {"dims": Val((0, 1))}),
        lambda xs: julia_cat(xs, (0, 1)),
        ((3, 4), (2, 1)),
        ((0, 4), (2, 0)),
        ((), ()),
    ),
]

# label | expected exception | message pattern | expression (evaluated in a capped subprocess)
HUGE_CALLS = r"""
concatenate huge       | MemoryError | more than this machine      | sr.concatenate((huge(2**40), huge(2**40)))
concatenate flat huge  | MemoryError | more than this machine      | sr.concatenate((huge(2**40), np.ones(3)), axis=None)
concatenate 2**62      | ValueError  | too large to allocate       | sr.concatenate((huge(2**59), huge(2**59)))
stack huge             | MemoryError | more than this machine      | sr.stack((huge(2**40), huge(2**40)))
hstack huge            | MemoryError | more than this machine      | sr.hstack((huge(2**40), huge(2**40)))
vstack huge            | MemoryError | more than this machine      | sr.vstack((huge(2**40), huge(2**40)))
cat huge dims          | ValueError  | at most 64                  | sr.cat(np.ones(3), np.ones(3), dims=Val(2**40))
cat block diagonal     | MemoryError | more than this machine      | sr.cat(huge(2**40), huge(2**40), dims=Val((0, 1)))
cat new axis huge      | MemoryError | more than this machine      | sr.cat(huge(2**40), huge(2**40), dims=Val(1))
""".strip().splitlines()


def torch_cases() -> list[TorchCase]:
    import stablerules.torch as srt

    return [
        TorchCase(
            "concatenate",
            lambda a, b: srt.concatenate((a, b), axis=Val(0)),
            lambda a, b: np.concatenate((a, b), axis=0),
            ((2, 3), (1, 3)),
        ),
        TorchCase(
            "concatenate-flat",
            lambda a, b: srt.concatenate([a, b], axis=None),
            lambda a, b: np.concatenate((a, b), axis=None),
            ((2, 2), (3,)),
        ),
        TorchCase("stack", lambda a, b: srt.stack((a, b), axis=Val(1)), lambda a, b: np.stack((a, b), axis=1), ((2, 3), (2, 3))),
        TorchCase("hstack", lambda a, b: srt.hstack((a, b)), lambda a, b: np.hstack((a, b)), ((2,), (3,))),
        TorchCase("vstack", lambda a, b: srt.vstack((a, b)), lambda a, b: np.vstack((a, b)), ((3,), (2, 3))),
        TorchCase("cat-diagonal", lambda a, b: srt.cat(a, b, dims=Val((0, 1))), lambda a, b: julia_cat((a, b), (0, 1)), ((2, 2), (1, 3))),
        TorchCase(
            "cat-new-axis",
            lambda a, b: srt.cat(a, b, dims=Val(2)),
            lambda a, b: np.stack((a, b), axis=2),
            ((2, 3), (2, 3)),
        ),
    ]


def jax_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import jax.numpy as jnp

    import stablerules.jax as srj

    return [
        (
            "concatenate",
            lambda a, b: srj.concatenate((a, b), axis=Val(1)),
            (rand(2, 3), rand(2, 4)),
            lambda a, b: jnp.concatenate((a, b), axis=1),
        ),
        ("concatenate axis=None", lambda a, b: srj.concatenate([a, b], axis=None), (rand(2, 3), rand(4)), None),
        ("stack", lambda a, b: srj.stack((a, b), axis=Val(1)), (rand(2, 3), rand(2, 3)), lambda a, b: jnp.stack((a, b), axis=1)),
        ("hstack", lambda a, b: srj.hstack((a, b)), (rand(2, 3), rand(2, 1)), lambda a, b: jnp.hstack((a, b))),
        ("vstack", lambda a, b: srj.vstack((a, b)), (rand(3), rand(2, 3)), lambda a, b: jnp.vstack((a, b))),
        ("cat block-diagonal", lambda a, b: srj.cat(a, b, dims=Val((0, 1))), (rand(2, 3), rand(1, 2)), None),
        ("cat new axis", lambda a, b: srj.cat(a, b, dims=Val(2)), (rand(2, 3), rand(2, 3)), None),
    ]


def jax_op_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    import stablerules.jax as srj

    return [
        ("concatenate", lambda x: srj.concatenate((x, x), axis=Val(1))),
        ("stack", lambda x: srj.stack((x, x))),
        ("hstack", lambda x: srj.hstack((x, x))),
        ("vstack", lambda x: srj.vstack((x, x))),
        ("cat", lambda x: srj.cat(x, x, dims=Val(1))),
    ]


def jax_call_errors(rand: Callable[..., Any]) -> list[tuple[Callable[[], Any], type[Exception], str]]:
    import stablerules.jax as srj

    return [
        (
            lambda: srj.concatenate((rand(2, 2), rand(2, 2)), axis=Val(2)),
            ValueError,
            "concatenate: axis 2 is out of bounds for an array of dimension 2",
        ),
        (
            lambda: srj.concatenate((rand(2, 3), rand(2, 4)), axis=Val(0)),
            ValueError,
            "concatenate: arrays[0] has shape (2, 3) and arrays[1] has shape (2, 4); they differ along axis 1, "
            "but input shapes must match except along axis 0",
        ),
        (
            lambda: srj.concatenate((rand(2, 3), rand(3)), axis=Val(0)),
            ValueError,
            "concatenate: all arrays must have the same number of dimensions, but arrays[0] has shape (2, 3) "
            "and arrays[1] has shape (3,)",
        ),
        (lambda: srj.concatenate((), axis=Val(0)), ValueError, "concatenate: need at least one array, got an empty sequence"),
        (
            lambda: srj.stack((rand(2, 3), rand(2, 4))),
            ValueError,
            "stack: all arrays must have the same shape, but arrays[0] has shape (2, 3) and arrays[1] has shape (2, 4)",
        ),
        (lambda: srj.stack((rand(2, 3), rand(2, 3)), axis=Val(5)), ValueError, "stack: axis 5 is out of bounds for an array of dimension 3"),
        (
            lambda: srj.hstack((rand(2, 3), rand(3, 3))),
            ValueError,
            "hstack: arrays[0] has shape (2, 3) and arrays[1] has shape (3, 3); they differ along axis 0, but "
            "input shapes must match except along axis 1",
        ),
        (
            lambda: srj.vstack((rand(2, 3), rand(2, 4))),
            ValueError,
            "vstack: arrays[0] has shape (2, 3) and arrays[1] has shape (2, 4); they differ along axis 1, but "
            "input shapes must match except along axis 0",
        ),
        (
            lambda: srj.cat(rand(2, 3), rand(2, 4), dims=Val(0)),
            ValueError,
            "cat: arrays[0] has shape (2, 3) and arrays[1] has shape (2, 4); they differ along axis 1, but input "
            "shapes must match except along axis 0 (inputs padded with trailing size-1 axes)",
        ),
    ]


def autograd_cases(rand: Callable[..., Any]) -> list[ArrayCase]:
    import autograd.numpy as anp

    import stablerules.autograd as sra

    return [
        (
            "concatenate",
            lambda a, b: sra.concatenate((a, b), axis=Val(1)),
            (rand(2, 3), rand(2, 4)),
            lambda a, b: anp.concatenate((a, b), axis=1),
        ),
        ("concatenate axis=None", lambda a, b: sra.concatenate([a, b], axis=None), (rand(2, 3), rand(4)), None),
        ("stack", lambda a, b: sra.stack((a, b), axis=Val(1)), (rand(2, 3), rand(2, 3)), lambda a, b: anp.stack((a, b), axis=1)),
        ("hstack", lambda a, b: sra.hstack((a, b)), (rand(2, 3), rand(2, 1)), lambda a, b: anp.hstack((a, b))),
        ("vstack", lambda a, b: sra.vstack((a, b)), (rand(3), rand(2, 3)), lambda a, b: anp.vstack((a, b))),
        ("cat block-diagonal", lambda a, b: sra.cat(a, b, dims=Val((0, 1))), (rand(2, 3), rand(1, 2)), None),
        ("cat new axis", lambda a, b: sra.cat(a, b, dims=Val(2)), (rand(2, 3), rand(2, 3)), None),
    ]


@pytest.mark.parametrize("op", [sr.concatenate, sr.stack, sr.hstack, sr.vstack])
def test_big_endian_inputs_give_numpys_native_result_and_native_tangents(op: Any) -> None:
    """On main: one input kept its byte order in the result (np.concatenate's is native), and
    the tangents kept the inputs' (every other op's are native)."""
    a = np.arange(6.0).reshape(2, 3).astype(">f8")
    references: dict[object, Callable[..., Any]] = {sr.concatenate: np.concatenate, sr.stack: np.stack, sr.hstack: np.hstack, sr.vstack: np.vstack}
    reference = references[op]
    for arrays in ((a,), (a, a)):
        got, expected = op(arrays), reference(arrays)
        assert got.dtype == expected.dtype and got.dtype.isnative
        np.testing.assert_array_equal(got, expected)
        y, back = rrule(op, arrays)
        tangents = cast("Sequence[Any]", back(np.ones(y.shape))[0])
        assert all(t.dtype == np.dtype("float64") and t.dtype.isnative for t in tangents)
