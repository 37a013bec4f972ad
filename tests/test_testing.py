"""``stablerules.testing``: correct user rules pass, and each kind of wrong rule is caught.

The library's ops are tested with these helpers in ``tests/rules``; here every rule is a
user-defined one registered through ``sr.register_rrule`` / ``sr.register_frule``. Each
"caught" test asserts on the message, not only on the exception type.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._arrays import is_dynamic_static, static_int
from stablerules._guards import COUNTERS
from stablerules._cache import CACHE
from stablerules._key import KernelSource, ShapeSignature
from stablerules._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array, writable_array
from stablerules._registry import FRULES, RRULES
from stablerules._typing import RulePullback as Pullback
from stablerules._tangents import DenseCotangent, prepare_cotangent, project
from stablerules.testing import test_frule, test_rrule
from tests.references import random_array

Array = npt.NDArray[Any]  # the rules below do arithmetic on any dtype
Register = Callable[..., None]

FLOATING = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture
def register() -> Iterator[Register]:
    """Register rules for the test's own functions; unregistered afterwards."""
    registered: list[object] = []

    def add(
        fn: object,
        rrule: Callable[..., tuple[object, Pullback]] | None = None,
        frule: Callable[..., tuple[object, object]] | None = None,
    ) -> None:
        if rrule is not None:
            sr.register_rrule(fn, rrule)
        if frule is not None:
            sr.register_frule(fn, frule)
        registered.append(fn)

    yield add
    for fn in registered:
        RRULES.unregister(fn)
        FRULES.unregister(fn)


def _random(shape: tuple[int, ...], dtype: npt.DTypeLike, seed: int = 0) -> Array:
    """The shared factory's values from a generator of their own (each test names its seed)."""
    return random_array(np.random.default_rng(seed), shape, dtype)


def _dense(dy: object, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> Array | None:
    """The cotangent as a dense array, or ``None`` for a hard zero."""
    cotangent = prepare_cotangent(dy, shape, dtype)
    if isinstance(cotangent, ZeroTangent):
        return None
    if isinstance(cotangent, Fill):
        return np.asarray(cotangent)
    assert isinstance(cotangent, DenseCotangent)
    return cotangent.array


# --------------------------------------------------------------------------------------------
# User functions and their correct rules


def _factor(k: Val[int] | int) -> int:
    """A user rule's static ``k``: read, and counted as a dynamic argument when plain (the
    library's readers only read; the library's ops count their statics in the scaffold)."""
    if is_dynamic_static(k):
        COUNTERS.note_dynamic_argument("k", k)
    return static_int(k, "k")


def scale(x: Array, k: Val[int] | int) -> Array:
    """``x * k`` with a static integer ``k``."""
    return np.asarray(x * _factor(k))


def scale_rrule(x: Array, k: Val[int] | int) -> tuple[Array, Pullback]:
    factor = _factor(k)
    shape, dtype = x.shape, x.dtype

    def scale_pullback(dy: object) -> tuple[object, ...]:
        cotangent = prepare_cotangent(dy, shape, dtype)
        if isinstance(cotangent, ZeroTangent):
            return ZeroTangent(), NoTangent()
        if isinstance(cotangent, Fill):
            return Fill(cotangent.value * factor, shape, dtype), NoTangent()
        assert isinstance(cotangent, DenseCotangent)
        return np.asarray(cotangent.array * factor, dtype=dtype), NoTangent()

    return scale(x, k), scale_pullback


def scale_frule(tangents: tuple[object, ...], x: Array, k: Val[int] | int) -> tuple[Array, object]:
    dx = tangents[0]
    y = scale(x, k)
    if isinstance(dx, ZeroTangent):
        return y, ZeroTangent()
    return y, np.asarray(np.asarray(dx) * _factor(k), dtype=x.dtype)


def outer(a: Array, b: Array) -> Array:
    return np.asarray(np.multiply.outer(a, b))


def _outer_tangents(dy: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """The adjoint of ``(a, b) -> outer(a, b)``: ``da = sum dy * conj(b)``, ``db = sum conj(a) * dy``."""
    a_axes = list(range(a.ndim))
    b_axes = list(range(a.ndim, a.ndim + b.ndim))
    da = np.tensordot(dy, np.conj(b), axes=(b_axes, list(range(b.ndim))))
    db = np.tensordot(np.conj(a), dy, axes=(a_axes, a_axes))
    return project(np.asarray(da), a.dtype), project(np.asarray(db), b.dtype)


def outer_rrule(a: Array, b: Array) -> tuple[Array, Pullback]:
    y = outer(a, b)
    shape, dtype = y.shape, y.dtype

    def outer_pullback(dy: object) -> tuple[object, ...]:
        dense = _dense(dy, shape, dtype)
        if dense is None:
            return ZeroTangent(), ZeroTangent()
        return _outer_tangents(dense, a, b)

    return y, outer_pullback


def outer_frule(tangents: tuple[object, ...], a: Array, b: Array) -> tuple[Array, object]:
    da, db = tangents
    y = outer(a, b)
    dy = np.zeros_like(y)
    if not isinstance(da, ZeroTangent):
        dy = dy + outer(np.asarray(da), b)
    if not isinstance(db, ZeroTangent):
        dy = dy + outer(a, np.asarray(db))
    return y, dy


def split_sum(arrays: tuple[Array, ...]) -> Array:
    """The sum of a sequence of same-shaped arrays (a sequence-of-arrays argument)."""
    total = arrays[0]
    for array in arrays[1:]:
        total = total + array
    return np.asarray(total)


def split_sum_rrule(arrays: tuple[Array, ...]) -> tuple[Array, Pullback]:
    y = split_sum(arrays)
    shape, dtype = y.shape, y.dtype
    dtypes = [array.dtype for array in arrays]

    def split_sum_pullback(dy: object) -> tuple[object, ...]:
        cotangent = prepare_cotangent(dy, shape, dtype)
        if isinstance(cotangent, ZeroTangent):
            return (tuple(ZeroTangent() for _ in dtypes),)
        if isinstance(cotangent, Fill):
            return (tuple(Fill(cotangent.value, shape, each) for each in dtypes),)
        assert isinstance(cotangent, DenseCotangent)
        return (tuple(project(cotangent.array, each).copy() for each in dtypes),)

    return y, split_sum_pullback


def split_sum_frule(tangents: tuple[object, ...], arrays: tuple[Array, ...]) -> tuple[Array, object]:
    parts = tangents[0]
    y = split_sum(arrays)
    if isinstance(parts, ZeroTangent):
        return y, ZeroTangent()
    assert isinstance(parts, tuple)
    dy = np.zeros_like(y)
    for part in parts:
        if not isinstance(part, ZeroTangent):
            dy = dy + part
    return y, dy


def take(x: Array, indices: Array) -> Array:
    """``x[indices]`` with an integer index array (data, not differentiable)."""
    return np.asarray(x[indices])


def take_rrule(x: Array, indices: Array) -> tuple[Array, Pullback]:
    y = take(x, indices)
    shape, dtype, x_shape = y.shape, y.dtype, x.shape

    def take_pullback(dy: object) -> tuple[object, ...]:
        dense = _dense(dy, shape, dtype)
        if dense is None:
            return ZeroTangent(), NoTangent()
        dx = np.zeros(x_shape, dtype=dtype)
        np.add.at(dx, indices, dense)
        return dx, NoTangent()

    return y, take_pullback


def axpy(alpha: float, x: Array) -> Array:
    """``alpha * x`` with a Python ``float`` alpha (a differentiable 0-d value)."""
    return np.asarray(alpha * x)


def axpy_rrule(alpha: float, x: Array) -> tuple[Array, Pullback]:
    y = axpy(alpha, x)
    shape, dtype = y.shape, y.dtype

    def axpy_pullback(dy: object) -> tuple[object, ...]:
        dense = _dense(dy, shape, dtype)
        if dense is None:
            return ZeroTangent(), ZeroTangent()
        dalpha = float(np.vdot(x, dense).real)
        return dalpha, np.asarray(alpha * dense, dtype=x.dtype)

    return y, axpy_pullback


def axpy_frule(tangents: tuple[object, ...], alpha: float, x: Array) -> tuple[Array, object]:
    dalpha, dx = tangents
    y = axpy(alpha, x)
    dy = np.zeros_like(y)
    if not isinstance(dalpha, ZeroTangent):
        dy = dy + float(dalpha) * x  # type: ignore[arg-type]
    if not isinstance(dx, ZeroTangent):
        dy = dy + alpha * np.asarray(dx)
    return y, np.asarray(dy, dtype=y.dtype)


def abs2(z: Array) -> Array:
    """``|z|**2``: a real function of a complex argument (not holomorphic)."""
    return np.asarray((z * np.conj(z)).real)


def abs2_rrule(z: Array) -> tuple[Array, Pullback]:
    y = abs2(z)
    shape, dtype = y.shape, y.dtype

    def abs2_pullback(dy: object) -> tuple[object, ...]:
        dense = _dense(dy, shape, dtype)
        if dense is None:
            return (ZeroTangent(),)
        return (np.asarray(2 * dense * z, dtype=z.dtype),)

    return y, abs2_pullback


def abs2_frule(tangents: tuple[object, ...], z: Array) -> tuple[Array, object]:
    dz = tangents[0]
    y = abs2(z)
    if isinstance(dz, ZeroTangent):
        return y, ZeroTangent()
    return y, np.asarray(2 * (np.conj(z) * np.asarray(dz)).real, dtype=y.dtype)


def halves(x: Array) -> tuple[Array, Array]:
    """A tuple output: the first and second half of a vector."""
    middle = x.shape[0] // 2
    return x[:middle].copy(), x[middle:].copy()


def halves_rrule(x: Array) -> tuple[tuple[Array, Array], Pullback]:
    y = halves(x)
    middle, dtype = x.shape[0] // 2, x.dtype
    shapes = (y[0].shape, y[1].shape)

    def halves_pullback(dy: object) -> tuple[object, ...]:
        dy = sr.unthunk(dy)
        if isinstance(dy, ZeroTangent):
            return (ZeroTangent(),)
        assert isinstance(dy, tuple)
        parts = [_dense(part, shape, dtype) for part, shape in zip(dy, shapes)]
        dx = np.zeros(x.shape, dtype=dtype)
        if parts[0] is not None:
            dx[:middle] = parts[0]
        if parts[1] is not None:
            dx[middle:] = parts[1]
        return (dx,)

    return y, halves_pullback


def _register_correct(register: Register) -> None:
    register(scale, scale_rrule, scale_frule)
    register(outer, outer_rrule, outer_frule)
    register(split_sum, split_sum_rrule, split_sum_frule)
    register(take, take_rrule)
    register(axpy, axpy_rrule, axpy_frule)
    register(abs2, abs2_rrule, abs2_frule)
    register(halves, halves_rrule)


# --------------------------------------------------------------------------------------------
# Correct rules pass


@pytest.mark.parametrize("dtype", FLOATING)
def test_scale_passes(register: Register, dtype: type[np.generic]) -> None:
    _register_correct(register)
    x = _random((3, 4), dtype)
    test_rrule(scale, x, Val(3))
    test_frule(scale, x, Val(3))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0)])
def test_zero_dimensional_and_empty_arrays_pass(register: Register, shape: tuple[int, ...]) -> None:
    _register_correct(register)
    for dtype in (np.float32, np.complex128):
        x = _random(shape, dtype)
        test_rrule(scale, x, Val(2))
        test_frule(scale, x, Val(2))


def test_strided_and_repeated_arguments_pass(register: Register) -> None:
    _register_correct(register)
    strided = np.asfortranarray(_random((3, 4), np.float64))[:, ::2]
    test_rrule(outer, strided, _random((2,), np.float64))
    test_frule(outer, strided, _random((2,), np.float64))
    same = _random((3,), np.complex64)
    test_rrule(outer, same, same)  # one tangent per position, even for one array object
    test_rrule(axpy, np.float64(2.0), _random((3,), np.float64))  # NumPy scalar argument


def test_plain_int_static_argument_passes(register: Register) -> None:
    # A plain int is a dynamic argument: no_fallback() would reject it, so the steady-state
    # check only asks that nothing compiles.
    _register_correct(register)
    x = _random((5,), np.float64)
    before = sr.cache_info().dynamic_arguments
    test_rrule(scale, x, 2)
    test_frule(scale, x, 2)
    assert sr.cache_info().dynamic_arguments > before


@pytest.mark.parametrize(
    ("dtype_a", "dtype_b"),
    [*((dtype, dtype) for dtype in FLOATING), (np.float32, np.complex128), (np.complex64, np.float64)],
)
def test_outer_passes(register: Register, dtype_a: type[np.generic], dtype_b: type[np.generic]) -> None:
    _register_correct(register)
    a, b = _random((2, 3), dtype_a, 1), _random((4,), dtype_b, 2)
    test_rrule(outer, a, b)
    test_frule(outer, a, b)


def test_outer_large_argument_is_sampled(register: Register) -> None:
    # 1200 elements: more than the element-by-element limit, so a random sample of elements
    # and two random directions are checked.
    _register_correct(register)
    test_rrule(outer, _random((30, 40), np.float64), _random((3,), np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_sequence_argument_passes(register: Register, dtype: type[np.generic]) -> None:
    _register_correct(register)
    arrays = (_random((2, 3), dtype, 1), _random((2, 3), dtype, 2), _random((2, 3), dtype, 3))
    test_rrule(split_sum, arrays)
    test_frule(split_sum, arrays)
    test_rrule(split_sum, list(arrays))


def test_integer_array_argument_gets_no_tangent(register: Register) -> None:
    _register_correct(register)
    test_rrule(take, _random((6,), np.float32), np.array([0, 2, 2, 5]))


def test_python_scalar_is_differentiable(register: Register) -> None:
    _register_correct(register)
    test_rrule(axpy, 1.5, _random((4,), np.float64))
    test_rrule(axpy, 1.5, _random((4,), np.float32))
    test_frule(axpy, 1.5, _random((4,), np.float64))


def test_complex_non_holomorphic_passes(register: Register) -> None:
    _register_correct(register)
    for dtype in (np.complex64, np.complex128):
        z = _random((3, 2), dtype)
        test_rrule(abs2, z)
        test_frule(abs2, z)


def test_tuple_output_passes(register: Register) -> None:
    _register_correct(register)
    test_rrule(halves, _random((5,), np.float32))


def test_options_do_not_clash_with_op_keywords(register: Register) -> None:
    def shifted(x: Array, *, rtol: float) -> Array:
        return np.asarray(x + rtol)

    def shifted_rrule(x: Array, *, rtol: float) -> tuple[Array, Pullback]:
        def shifted_pullback(dy: object) -> tuple[object, ...]:
            return (_dense(dy, x.shape, x.dtype) if not isinstance(dy, ZeroTangent) else ZeroTangent(),)

        return shifted(x, rtol=rtol), shifted_pullback

    register(shifted, shifted_rrule)
    test_rrule(shifted, _random((3,), np.float64), fkwargs={"rtol": 2.0}, rtol=1e-6)
    with pytest.raises(TypeError, match="given both directly and in fkwargs"):
        test_rrule(scale, _random((3,), np.float64), Val(2), fkwargs={"k": 1}, k=2)


def test_op_refusing_promotion_falls_back_to_primal_precision(register: Register) -> None:
    def scale32(x: Array) -> Array:
        if x.dtype != np.float32:
            raise TypeError("scale32 takes float32 only")
        return np.asarray(x * np.float32(3))

    def scale32_rrule(x: Array) -> tuple[Array, Pullback]:
        def scale32_pullback(dy: object) -> tuple[object, ...]:
            dense = _dense(dy, x.shape, x.dtype)
            return (ZeroTangent() if dense is None else np.asarray(dense * np.float32(factor), dtype=x.dtype),)

        return scale32(x), scale32_pullback

    factor = 3.0
    register(scale32, scale32_rrule)
    x = _random((4,), np.float32)
    test_rrule(scale32, x)
    factor = 3.03  # 1% off: still caught at the looser 32-bit tolerance
    with pytest.raises(AssertionError, match=r"in the primal precision, because op raised TypeError.*argument 0"):
        test_rrule(scale32, x)


def test_kernel_rule_compiles_once(register: Register) -> None:
    # A rule that looks up a real Numba kernel at rrule time, as the library's rules do: the
    # second call hits the memory cache, so the steady-state check passes.
    def doubled(x: Array) -> Array:
        return np.asarray(x * 2)

    def doubled_rrule(x: Array) -> tuple[Array, Pullback]:
        kernel = _numba_doubling_kernel(x.dtype.name)
        size, shape, dtype = x.size, x.shape, x.dtype

        def doubled_pullback(dy: object) -> tuple[object, ...]:
            dense = _dense(dy, shape, dtype)
            if dense is None:
                return (ZeroTangent(),)
            dx = np.empty(size, dtype=dtype)
            kernel(np.ascontiguousarray(dense).reshape(-1), dx, 0, size)
            return (dx.reshape(shape),)

        return doubled(x), doubled_pullback

    register(doubled, doubled_rrule)
    before = sr.cache_info()
    test_rrule(doubled, _random((3, 2), np.float64))
    after = sr.cache_info()
    assert after.compiles + after.disk_hits == before.compiles + before.disk_hits + 1


def _numba_doubling_kernel(dtype: str) -> Callable[..., object]:
    signature = ShapeSignature("test_testing.doubled", "pullback", (), (dtype,), (1,))

    def render() -> KernelSource:
        body = SourceWriter()
        with body.block("for i in range(lo, hi):"):
            body.line("dx[i] = dy[i] * 2")
        parameters = [("dy", readonly_array(dtype)), ("dx", writable_array(dtype)), ("lo", INDEX), ("hi", INDEX)]
        return cpu_kernel(signature, parameters, body, "test_testing: double the cotangent")

    return CACHE.get(signature, render).function


def scale_rows(x: Array, w: Array) -> Array:
    """``x * w[:, None]``: row ``i`` of ``x`` scaled by ``w[i]``."""
    return np.asarray(x * w[:, None])


def scale_rows_frule(tangents: tuple[object, ...], x: Array, w: Array) -> tuple[Array, object]:
    """Plain arithmetic on the tangents, no special cases: a ``ZeroTangent`` or ``Fill``
    tangent goes through the tangent algebra (SPEC section 8)."""
    dx, dw = tangents
    return scale_rows(x, w), dx * w[:, None] + x * dw[:, None]  # type: ignore[index]


def scale_rows_rrule(x: Array, w: Array) -> tuple[Array, Callable[[object], tuple[object, ...]]]:
    def scale_rows_pullback(dy: object) -> tuple[object, ...]:
        return dy * w[:, None].conj(), (dy * x.conj()).sum(axis=1)

    return scale_rows(x, w), scale_rows_pullback


@pytest.mark.parametrize("dtype", FLOATING)
def test_rules_written_with_plain_arithmetic_pass(register: Register, dtype: type[np.generic]) -> None:
    # test_frule passes ZeroTangent() for one argument at a time and Fill tangents; test_rrule
    # passes Fill, ZeroTangent() and Thunk cotangents: all reach the rule's plain arithmetic.
    register(scale_rows, rrule=scale_rows_rrule, frule=scale_rows_frule)
    x, w = _random((3, 4), dtype, 1), _random((3,), dtype, 2)
    test_frule(scale_rows, x, w)
    test_rrule(scale_rows, x, w)
    pushed = sr.frule(scale_rows, (ZeroTangent(), ZeroTangent()), x, w)[1]
    assert pushed == ZeroTangent()
    y, back = sr.rrule(scale_rows, x, w)
    assert back(ZeroTangent()) == (ZeroTangent(), ZeroTangent())
    dx, dw = back(Fill(2.0, y.shape, y.dtype))
    np.testing.assert_allclose(dx, 2.0 * np.broadcast_to(w[:, None].conj(), y.shape), rtol=1e-6)  # type: ignore[call-overload]
    np.testing.assert_allclose(dw, 2.0 * x.conj().sum(axis=1), rtol=1e-5)  # type: ignore[call-overload]


def test_library_functions_are_not_collected_by_pytest() -> None:
    assert getattr(test_rrule, "__test__", True) is False
    assert getattr(test_frule, "__test__", True) is False


# --------------------------------------------------------------------------------------------
# Wrong rules are caught


def _kernel(name: str, *static: object) -> Callable[[Array], Array]:
    """A trivial (pure Python) kernel from the real cache, keyed by ``static``."""
    signature = ShapeSignature(name, "pullback", tuple(static), ("float64",), (1,))

    def render() -> KernelSource:
        return KernelSource(f"# {signature!r}\ndef kernel(dy):\n    return dy * 2\n")

    function = CACHE.get(signature, render).function

    def run(dy: Array) -> Array:
        return np.asarray(function(dy))

    return run


def test_tangent_off_by_one_percent_is_caught(register: Register) -> None:
    def outer_bad(a: Array, b: Array) -> Array:
        return outer(a, b)

    def outer_bad_rrule(a: Array, b: Array) -> tuple[Array, Pullback]:
        y, back = outer_rrule(a, b)

        def outer_bad_pullback(dy: object) -> tuple[object, ...]:
            da, db = back(dy)
            return da, (np.asarray(db) * 1.01).astype(b.dtype)

        return y, outer_bad_pullback

    register(outer_bad, outer_bad_rrule)
    for dtype in (np.float32, np.complex128):
        with pytest.raises(
            AssertionError,
            match=r"test_rrule\(.*outer_bad\), finite differences \(in 64-bit precision\).*argument 1 "
            r"\(" + np.dtype(dtype).name + r" \(4,\)\): 4 of 4 checked elements differ; max abs error .*max rel error 0\.01",
        ):
            test_rrule(outer_bad, _random((2, 3), dtype, 1), _random((4,), dtype, 2))


def test_single_element_off_by_one_percent_is_caught(register: Register) -> None:
    def outer_one(a: Array, b: Array) -> Array:
        return outer(a, b)

    def outer_one_rrule(a: Array, b: Array) -> tuple[Array, Pullback]:
        y, back = outer_rrule(a, b)

        def outer_one_pullback(dy: object) -> tuple[object, ...]:
            da, db = back(dy)
            da = np.array(da)
            da[1, 2] *= 1.01
            return da, db

        return y, outer_one_pullback

    register(outer_one, outer_one_rrule)
    with pytest.raises(AssertionError, match=r"argument 0 \(float32 \(2, 3\)\): 1 of 6 checked elements differ.*worst at index \(1, 2\)"):
        test_rrule(outer_one, _random((2, 3), np.float32, 1), _random((4,), np.float32, 2))


def test_missing_conjugate_is_caught(register: Register) -> None:
    def outer_noconj(a: Array, b: Array) -> Array:
        return outer(a, b)

    def outer_noconj_rrule(a: Array, b: Array) -> tuple[Array, Pullback]:
        y = outer(a, b)

        def outer_noconj_pullback(dy: object) -> tuple[object, ...]:
            dense = _dense(dy, y.shape, y.dtype)
            assert dense is not None
            return _outer_tangents(dense, np.conj(a), np.conj(b))

        return y, outer_noconj_pullback

    register(outer_noconj, outer_noconj_rrule)
    outer_noconj_rrule(_random((2,), np.complex128), _random((2,), np.complex128))
    with pytest.raises(AssertionError, match=r"finite differences.*argument 0 \(complex128 \(2, 3\)\)"):
        test_rrule(outer_noconj, _random((2, 3), np.complex128, 1), _random((4,), np.complex128, 2))


def test_wrong_tangent_dtype_is_caught(register: Register) -> None:
    def scale64(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale64_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale64_pullback(dy: object) -> tuple[object, ...]:
            dx, dk = back(dy)
            return np.asarray(dx, dtype=np.float64), dk

        return y, scale64_pullback

    register(scale64, scale64_rrule)
    with pytest.raises(
        AssertionError,
        match=r"pullback\(dense dy\): argument 0's tangent has dtype float64 but the primal has dtype float32 \(shape \(3, 4\)\)",
    ):
        test_rrule(scale64, _random((3, 4), np.float32), Val(2))


def test_wrong_tangent_shape_is_caught(register: Register) -> None:
    def flat_back(x: Array) -> Array:
        return np.asarray(x * 1.0)

    def flat_back_rrule(x: Array) -> tuple[Array, Pullback]:
        def flat_back_pullback(dy: object) -> tuple[object, ...]:
            return (np.asarray(dy).reshape(-1),)

        return flat_back(x), flat_back_pullback

    register(flat_back, flat_back_rrule)
    with pytest.raises(AssertionError, match=r"argument 0's tangent has shape \(6,\) but the primal has shape \(2, 3\)"):
        test_rrule(flat_back, _random((2, 3), np.float64))


def test_wrong_pushforward_is_caught(register: Register) -> None:
    def outer_push(a: Array, b: Array) -> Array:
        return outer(a, b)

    def outer_push_frule(tangents: tuple[object, ...], a: Array, b: Array) -> tuple[Array, object]:
        y, dy = outer_frule(tangents, a, b)
        return y, np.asarray(dy) * np.asarray(1.01, dtype=y.dtype)

    register(outer_push, frule=outer_push_frule)
    with pytest.raises(
        AssertionError,
        match=r"test_frule\(.*outer_push\), pushforward vs finite differences \(in 64-bit precision\) J v, "
        r"random tangents: output \(float32 \(2, 3, 4\)\): .*max rel error 0\.01",
    ):
        test_frule(outer_push, _random((2, 3), np.float32, 1), _random((4,), np.float32, 2))


def test_pushforward_mishandling_zero_tangent_is_caught(register: Register) -> None:
    def outer_zero(a: Array, b: Array) -> Array:
        return outer(a, b)

    def outer_zero_frule(tangents: tuple[object, ...], a: Array, b: Array) -> tuple[Array, object]:
        da, db = tangents
        y = outer(a, b)
        if isinstance(da, ZeroTangent):  # wrong: forgets db's contribution
            return y, ZeroTangent()
        return outer_frule(tangents, a, b)

    register(outer_zero, frule=outer_zero_frule)
    with pytest.raises(AssertionError, match=r"only argument 1's tangent, others ZeroTangent\(\): output"):
        test_frule(outer_zero, _random((2,), np.float64, 1), _random((3,), np.float64, 2))


def test_pushforward_mishandling_fill_tangent_is_caught(register: Register) -> None:
    def scale_rows_fill(x: Array, w: Array) -> Array:
        return scale_rows(x, w)

    def scale_rows_fill_frule(tangents: tuple[object, ...], x: Array, w: Array) -> tuple[Array, object]:
        dx, dw = tangents
        if isinstance(dx, Fill):  # wrong: a shortcut that drops dw's contribution
            return scale_rows(x, w), dx * w[:, None]
        return scale_rows_frule(tangents, x, w)

    register(scale_rows_fill, frule=scale_rows_fill_frule)
    with pytest.raises(AssertionError, match=r"J v, Fill tangents: output \(float64 \(3, 4\)\)"):
        test_frule(scale_rows_fill, _random((3, 4), np.float64, 1), _random((3,), np.float64, 2))


def test_wrong_pushforward_dtype_is_caught(register: Register) -> None:
    def scale_push64(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_push64_frule(tangents: tuple[object, ...], x: Array, k: Val[int]) -> tuple[Array, object]:
        y, dy = scale_frule(tangents, x, k)
        return y, np.asarray(dy, dtype=np.complex64) if not isinstance(dy, ZeroTangent) else dy

    register(scale_push64, frule=scale_push64_frule)
    with pytest.raises(AssertionError, match=r"pushforward: output's tangent has dtype complex64 but the primal has dtype float32"):
        test_frule(scale_push64, _random((3,), np.float32), Val(2))


def test_tangent_for_static_argument_is_caught(register: Register) -> None:
    def scale_zero(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_zero_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale_zero_pullback(dy: object) -> tuple[object, ...]:
            return back(dy)[0], ZeroTangent()

        return y, scale_zero_pullback

    register(scale_zero, scale_zero_rrule)
    with pytest.raises(
        AssertionError,
        match=r"argument 1 \(Val\(2\)\) is not differentiable, so its tangent must be NoTangent\(\); got ZeroTangent\(\)",
    ):
        test_rrule(scale_zero, _random((3,), np.float64), Val(2))


def test_no_tangent_for_differentiable_argument_is_caught(register: Register) -> None:
    def take_none(x: Array, indices: Array) -> Array:
        return take(x, indices)

    def take_none_rrule(x: Array, indices: Array) -> tuple[Array, Pullback]:
        y, _ = take_rrule(x, indices)

        def take_none_pullback(dy: object) -> tuple[object, ...]:
            return NoTangent(), NoTangent()

        return y, take_none_pullback

    register(take_none, take_none_rrule)
    with pytest.raises(AssertionError, match=r"argument 0 \(float64 \(4,\)\) is differentiable but its tangent is NoTangent\(\)"):
        test_rrule(take_none, _random((4,), np.float64), np.array([1, 3]))


def test_tangent_for_integer_array_is_caught(register: Register) -> None:
    def take_int(x: Array, indices: Array) -> Array:
        return take(x, indices)

    def take_int_rrule(x: Array, indices: Array) -> tuple[Array, Pullback]:
        y, back = take_rrule(x, indices)

        def take_int_pullback(dy: object) -> tuple[object, ...]:
            return back(dy)[0], np.zeros(indices.shape)

        return y, take_int_pullback

    register(take_int, take_int_rrule)
    with pytest.raises(AssertionError, match=r"argument 1 \(ndarray int64 \(2,\)\) is not differentiable.*got ndarray float64 \(2,\)"):
        test_rrule(take_int, _random((4,), np.float64), np.array([1, 3], dtype=np.int64))


def test_wrong_arity_is_caught(register: Register) -> None:
    def scale_short(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_short_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale_short_pullback(dy: object) -> tuple[object, ...]:
            return (back(dy)[0],)

        return y, scale_short_pullback

    register(scale_short, scale_short_rrule)
    with pytest.raises(
        AssertionError,
        match=r"the pullback returned 1 entries for 2 positional arguments; expected one per positional "
        r"argument: \(tangent of float64 \(3,\), NoTangent\(\)\)",
    ):
        test_rrule(scale_short, _random((3,), np.float64), Val(2))


def test_sequence_tangent_as_list_is_caught(register: Register) -> None:
    def split_list(arrays: tuple[Array, ...]) -> Array:
        return split_sum(arrays)

    def split_list_rrule(arrays: tuple[Array, ...]) -> tuple[Array, Pullback]:
        y, back = split_sum_rrule(arrays)

        def split_list_pullback(dy: object) -> tuple[object, ...]:
            (parts,) = back(dy)
            assert isinstance(parts, tuple)
            return (list(parts),)

        return y, split_list_pullback

    register(split_list, split_list_rrule)
    with pytest.raises(AssertionError, match=r"argument 0 is a sequence of 2, so its tangent must be a tuple .*got list of 2"):
        test_rrule(split_list, (_random((2,), np.float64), _random((2,), np.float64)))


def test_fill_mishandled_is_caught(register: Register) -> None:
    def scale_fill(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_fill_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale_fill_pullback(dy: object) -> tuple[object, ...]:
            if isinstance(dy, Fill):  # wrong: treats a Fill as a zero
                return np.zeros(x.shape, dtype=x.dtype), NoTangent()
            return back(dy)

        return y, scale_fill_pullback

    register(scale_fill, scale_fill_rrule)
    with pytest.raises(
        AssertionError,
        match=r"pullback\(Fill of shape \(2, 3\)\) vs its dense equivalent: argument 0 \(complex64 \(2, 3\)\): 6 of 6",
    ):
        test_rrule(scale_fill, _random((2, 3), np.complex64), Val(2))


def test_zero_tangent_mishandled_is_caught(register: Register) -> None:
    def scale_nonzero(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_nonzero_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale_nonzero_pullback(dy: object) -> tuple[object, ...]:
            if isinstance(dy, ZeroTangent):  # wrong: a hard zero becomes ones
                return np.ones(x.shape, dtype=x.dtype), NoTangent()
            return back(dy)

        return y, scale_nonzero_pullback

    register(scale_nonzero, scale_nonzero_rrule)
    with pytest.raises(
        AssertionError, match=r"pullback\(ZeroTangent\(\)\): argument 0 \(float64 \(3,\)\) got a nonzero tangent"
    ):
        test_rrule(scale_nonzero, _random((3,), np.float64), Val(2))


def test_thunk_mishandled_is_caught(register: Register) -> None:
    def scale_thunk(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_thunk_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale_thunk_pullback(dy: object) -> tuple[object, ...]:
            if isinstance(dy, Thunk):  # wrong: ignores a lazy cotangent
                return ZeroTangent(), NoTangent()
            return back(dy)

        return y, scale_thunk_pullback

    register(scale_thunk, scale_thunk_rrule)
    with pytest.raises(AssertionError, match=r"pullback\(Thunk\) vs its dense equivalent: argument 0"):
        test_rrule(scale_thunk, _random((3,), np.float64), Val(2))


def test_wrong_primal_is_caught(register: Register) -> None:
    def scale_primal(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_primal_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)
        return np.asarray(y, dtype=np.float64), back

    register(scale_primal, scale_primal_rrule)
    with pytest.raises(
        AssertionError,
        match=r"primal: the rule's primal output is ndarray float64 \(3,\) but op returned ndarray float32 \(3,\)",
    ):
        test_rrule(scale_primal, _random((3,), np.float32), Val(2))

    def scale_value(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_value_frule(tangents: tuple[object, ...], x: Array, k: Val[int]) -> tuple[Array, object]:
        y, dy = scale_frule(tangents, x, k)
        y = y.copy()
        y[1] += 1e-3
        return y, dy

    register(scale_value, frule=scale_value_frule)
    with pytest.raises(AssertionError, match=r"primal output differs from op's: max abs difference 0\.001 at index \(1,\)"):
        test_frule(scale_value, _random((3,), np.float64), Val(2))


def test_recompiling_rule_is_caught(register: Register) -> None:
    calls = itertools.count()

    def recompiles(x: Array) -> Array:
        return np.asarray(x * 2)

    def recompiles_rrule(x: Array) -> tuple[Array, Pullback]:
        kernel = _kernel("recompiles", next(calls))  # a new signature on every call

        def recompiles_pullback(dy: object) -> tuple[object, ...]:
            dense = _dense(dy, x.shape, x.dtype)
            return (ZeroTangent() if dense is None else kernel(dense),)

        return recompiles(x), recompiles_pullback

    def recompiles_frule(tangents: tuple[object, ...], x: Array) -> tuple[Array, object]:
        _kernel("recompiles-forward", next(calls))
        dx = tangents[0]
        return recompiles(x), ZeroTangent() if isinstance(dx, ZeroTangent) else np.asarray(dx) * 2

    register(recompiles, recompiles_rrule, recompiles_frule)
    with pytest.raises(AssertionError, match=r"second call: a second call of the same signature compiled \(or loaded from disk\) a kernel"):
        test_rrule(recompiles, _random((3,), np.float64))
    with pytest.raises(AssertionError, match=r"test_frule\(.*recompiles\), second call: .*compiled"):
        test_frule(recompiles, _random((3,), np.float64))
    test_rrule(recompiles, _random((3,), np.float64), check_compile=False)


def test_fallback_is_caught(register: Register) -> None:
    def falls_back(x: Array, k: Val[int] | int) -> Array:
        return scale(x, k)

    def falls_back_rrule(x: Array, k: Val[int] | int) -> tuple[Array, Pullback]:
        COUNTERS.note_fallback("falls_back: generic path")
        return scale_rrule(x, k)

    register(falls_back, falls_back_rrule)
    # With Val static arguments, no_fallback() is active and raises.
    with pytest.raises(AssertionError, match=r"second call of the same signature left its specialized path: .*falls_back: generic path"):
        test_rrule(falls_back, _random((3,), np.float64), Val(2))
    # With a plain int (dynamic), the fallback counter still catches it.
    with pytest.raises(AssertionError, match=r"second call of the same signature took a fallback path \(1 noted\)"):
        test_rrule(falls_back, _random((3,), np.float64), 2)


def test_in_place_modification_is_caught(register: Register) -> None:
    def scale_mutates(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_mutates_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        y, back = scale_rrule(x, k)

        def scale_mutates_pullback(dy: object) -> tuple[object, ...]:
            x[...] = 0  # wrong: clobbers the primal
            return back(dy)

        return y, scale_mutates_pullback

    register(scale_mutates, scale_mutates_rrule)
    with pytest.raises(AssertionError, match=r"argument 0 was modified in place by rrule or its pullback"):
        test_rrule(scale_mutates, _random((3,), np.float64), Val(2))


def test_wrong_python_scalar_tangent_is_caught(register: Register) -> None:
    def axpy_bad(alpha: float, x: Array) -> Array:
        return axpy(alpha, x)

    def axpy_bad_rrule(alpha: float, x: Array) -> tuple[Array, Pullback]:
        y, back = axpy_rrule(alpha, x)

        def axpy_bad_pullback(dy: object) -> tuple[object, ...]:
            dalpha, dx = back(dy)
            return np.ones(2), dx

        return y, axpy_bad_pullback

    register(axpy_bad, axpy_bad_rrule)
    with pytest.raises(AssertionError, match=r"argument 0's tangent has shape \(2,\) but the primal has shape \(\) \(Python float\)"):
        test_rrule(axpy_bad, 1.5, _random((4,), np.float64))


def test_pushforward_modifying_its_tangent_is_caught(register: Register) -> None:
    def scale_inplace(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_inplace_frule(tangents: tuple[object, ...], x: Array, k: Val[int]) -> tuple[Array, object]:
        dx = tangents[0]
        if isinstance(dx, ZeroTangent):
            return scale(x, k), ZeroTangent()
        assert isinstance(dx, np.ndarray)
        dx *= k.value  # wrong: scales the caller's tangent in place
        return scale(x, k), dx

    register(scale_inplace, frule=scale_inplace_frule)
    with pytest.raises(AssertionError, match=r"the tangent of argument 0 was modified in place by frule"):
        test_frule(scale_inplace, _random((3,), np.float64), Val(2))


def test_pullback_modifying_its_cotangent_is_caught(register: Register) -> None:
    def scale_dy(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_dy_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        def scale_dy_pullback(dy: object) -> tuple[object, ...]:
            dy = sr.unthunk(dy)
            if isinstance(dy, (ZeroTangent, Fill)):
                return scale_rrule(x, k)[1](dy)
            assert isinstance(dy, np.ndarray)
            dy *= k.value  # wrong: reuses the caller's cotangent as scratch
            return dy, NoTangent()

        return scale(x, k), scale_dy_pullback

    register(scale_dy, scale_dy_rrule)
    with pytest.raises(AssertionError, match=r"the cotangent dy was modified in place by the pullback"):
        test_rrule(scale_dy, _random((3,), np.float64), Val(2))


def test_pullback_raising_is_reported(register: Register) -> None:
    def scale_raises(x: Array, k: Val[int]) -> Array:
        return scale(x, k)

    def scale_raises_rrule(x: Array, k: Val[int]) -> tuple[Array, Pullback]:
        def scale_raises_pullback(dy: object) -> tuple[object, ...]:
            if isinstance(dy, Thunk):
                raise TypeError("cannot handle a Thunk")
            return scale_rrule(x, k)[1](dy)

        return scale(x, k), scale_raises_pullback

    register(scale_raises, scale_raises_rrule)
    with pytest.raises(AssertionError, match=r"pullback\(Thunk\) raised TypeError: cannot handle a Thunk"):
        test_rrule(scale_raises, _random((3,), np.float64), Val(2))
