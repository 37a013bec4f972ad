"""The rule scaffold (``stablerules._rule``), on a tiny op written the way a new op is.

``scale(x, k)`` is ``k * x`` with ``k`` static: one CPU kernel serves its forward, its
pullback and its pushforward (the map is self-adjoint). The module shows the whole recipe
(binding, validation, a plan with a lazily compiled launcher) and checks what the scaffold
promises every op: registration, keys, dynamic statics, ``NoTangent`` padding, lazy
cotangents, the frule tangent check, the pullback builder, launch counting, the steady-state
check that no rule left its kernel (and a mutation that proves the check can fire), and
guards that hold per thread.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._arrays import ArrayLike, ArraySpec, as_array, check_dtype, contiguous, static_int
from stablerules._cache import CACHE, KernelSource, ShapeSignature
from stablerules._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array, writable_array
from stablerules._registry import FRULES, PULLBACKS, RRULES, KernelRequest
from stablerules._rule import DensePullback, Plan, RuleOp, context_launches, cpu_launcher, kernel_launches
from stablerules._tangents import Cotangent, DenseCotangent
from stablerules.testing import test_frule as check_frule
from stablerules.testing import test_rrule as check_rrule

# Held as plain callables: the scaffold's example op has no overloads in _dispatch.py.
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule

# A salt per test session: the kernel is compiled in this session, never found warm.
_SALT = uuid.uuid4().hex[:8]


def _render_scale(signature: ShapeSignature) -> KernelSource:
    (factor,) = signature.static
    body = SourceWriter()
    body.line(f"# salt {_SALT}")
    with body.block("for i in range(lo, hi):"):
        body.line(f"y[i] = x[i] * {factor}")
    dtype = signature.dtypes[0]
    parameters = [("x", readonly_array(dtype)), ("y", writable_array(dtype)), ("lo", INDEX), ("hi", INDEX)]
    return cpu_kernel(signature, parameters, body, f"test op: y = {factor} * x")


class ScalePlan(Plan):
    """``scale`` of one static factor, input dtype and shape."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype[np.generic], factor: int) -> None:
        self.op = "scale"
        self.out_shape = shape
        self.out_dtype = dtype
        self.differentiable = dtype.kind in "fc"
        self.input_tangents = (self.differentiable,)
        self.input_shapes = (shape,)
        self.input_dtypes = (dtype,)
        self.size = int(np.prod(shape))
        self.factor = factor
        self.kernel_entries = frozenset({"forward", "pullback", "pushforward"} if self.size else ())
        signature = ShapeSignature("test-scale", "forward", (factor,), (dtype.name,), (1,))
        self.request = KernelRequest(signature, lambda: _render_scale(signature))

    def requests(self) -> list[KernelRequest]:
        return [self.request]

    @cached_property
    def launch(self) -> object:
        return cpu_launcher(self.request.get(), 2, extent=self.size, work=self.size)

    def _apply(self, x: ArrayLike) -> ArrayLike:
        source = contiguous(x).astype(self.out_dtype, copy=False).reshape(-1)
        y = np.empty(self.size, self.out_dtype)
        if self.size:
            self.launch(source, y)  # type: ignore[operator]
        return y.reshape(self.out_shape)

    def forward(self, arrays: tuple[object, ...]) -> object:
        return self._apply(as_array(arrays[0], "x"))

    def pullback(self, saved: object) -> DensePullback:
        def dense(dy: ArrayLike) -> tuple[object, ...]:
            return (self._apply(dy),)

        return dense

    def fill_pullback(self, saved: object, dense: object, fill: Fill) -> tuple[object, ...]:
        return (Fill(fill.value * self.factor, self.out_shape, self.out_dtype),)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return self._apply(tangent.array)
        if isinstance(tangent, Fill):
            return Fill(tangent.value * self.factor, self.out_shape, self.out_dtype)
        return ZeroTangent()


class Scale(RuleOp):
    name = "scale"
    static_names = ("k",)
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[np.float64], k: Val[int] | int) -> npt.NDArray[np.float64]:
        return self.forward(x, k)  # type: ignore[return-value]

    def bind(self, x: object, k: object) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return (x,), (k,)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        (x,) = arrays
        factor = static_int(statics[0], "k")
        if isinstance(x, ArraySpec):
            shape, dtype = x.shape, x.dtype
        else:
            array = as_array(x, "x")
            shape, dtype = tuple(array.shape), array.dtype
        check_dtype(dtype, "x")
        return ScalePlan(shape, np.dtype(dtype.name), factor)


@pytest.fixture(scope="module")
def scale() -> Iterator[Scale]:
    op = Scale()
    yield op
    for registry in (RRULES, FRULES, PULLBACKS):
        registry.unregister(op)


def _x() -> npt.NDArray[np.float64]:
    return np.random.default_rng(1).standard_normal((3, 4))


def test_rules_are_registered_and_named(scale: Scale) -> None:
    x = _x()
    np.testing.assert_array_equal(scale(x, Val(3)), 3 * x)
    y, back = _rrule(scale, x, Val(3))
    np.testing.assert_array_equal(y, 3 * x)
    assert back.__name__ == "scale_pullback"
    dx, dk = back(np.ones((3, 4)))
    np.testing.assert_array_equal(dx, np.full((3, 4), 3.0))
    assert dk == NoTangent()  # the positional static's entry
    _, back_keyword = _rrule(scale, x, k=Val(3))
    assert len(back_keyword(np.ones((3, 4)))) == 1  # keyword arguments get no tangent


def test_shared_checker_passes(scale: Scale) -> None:
    check_rrule(scale, _x(), Val(2))
    check_frule(scale, _x(), Val(2))


def test_lazy_cotangents_and_validation(scale: Scale) -> None:
    x = _x()
    _, back = _rrule(scale, x, Val(2))
    assert back(ZeroTangent()) == (ZeroTangent(), NoTangent())
    assert back(Fill(1.5, (3, 4))) == (Fill(3.0, (3, 4)), NoTangent())
    np.testing.assert_array_equal(back(Thunk(lambda: np.ones((3, 4))))[0], np.full((3, 4), 2.0))
    np.testing.assert_array_equal(back(np.ones((3, 4), np.float32))[0], np.full((3, 4), 2.0))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        back(np.ones((4, 3)))
    _, back_int = _rrule(scale, np.arange(3), Val(2))
    assert back_int(np.ones(3)) == (NoTangent(), NoTangent())


def test_frule_tangent_check_is_one_value_error(scale: Scale) -> None:
    x = _x()
    with pytest.raises(ValueError, match=r"scale frule: .*one entry per positional argument \(2\), got 1"):
        _frule(scale, (x,), x, Val(2))
    with pytest.raises(ValueError, match="one entry per positional"):
        _frule(scale, x, x, Val(2))
    _, dy = _frule(scale, (Thunk(lambda: x), NoTangent()), x, Val(2))
    np.testing.assert_array_equal(dy, 2 * x)
    assert _frule(scale, (ZeroTangent(), NoTangent()), x, Val(2))[1] == ZeroTangent()


def test_plain_int_statics_are_dynamic_every_call(scale: Scale) -> None:
    x = _x()
    for _ in range(3):  # a miss, then plan hits: counted once per call either way
        before = sr.cache_info().dynamic_arguments
        scale(x, 5)
        assert sr.cache_info().dynamic_arguments == before + 1
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError, match="'k'"):
        scale(x, 5)
    with sr.no_fallback():
        scale(x, Val(5))


def test_pullback_builder_takes_specs_and_runs_no_forward(scale: Scale) -> None:
    x = _x()
    _rrule(scale, x, Val(4))
    forward_launches = kernel_launches()
    builder: Callable[..., Any] = PULLBACKS.lookup(scale)
    back = builder(ArraySpec((3, 4), np.float64), Val(4))
    assert kernel_launches() == forward_launches  # building it ran nothing
    dx, _ = back(np.ones((3, 4)))
    np.testing.assert_array_equal(dx, np.full((3, 4), 4.0))
    assert kernel_launches() == forward_launches + 1


def test_every_entry_launches_its_kernel(scale: Scale) -> None:
    x = _x()
    y, back = _rrule(scale, x, Val(6))
    signature = ShapeSignature("test-scale", "forward", (6,), ("float64",), (1,))
    before = kernel_launches(signature)
    with sr.no_compile(), sr.no_fallback():
        scale(x, Val(6))
        _rrule(scale, x, Val(6))
        back(np.ones((3, 4)))
        _frule(scale, (x, NoTangent()), x, Val(6))  # forward + pushforward
    assert kernel_launches(signature) == before + 5


def test_a_numpy_path_in_place_of_a_kernel_is_caught(scale: Scale, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation: the pullback computes ``k * dy`` with NumPy instead of launching its
    kernel. Results are still right, so only the steady-state check can notice."""
    x = _x()
    _rrule(scale, x, Val(7))

    def numpy_pullback(self: ScalePlan, saved: object) -> DensePullback:
        return lambda dy: (self.factor * dy,)

    monkeypatch.setattr(ScalePlan, "pullback", numpy_pullback)
    fresh = np.random.default_rng(2).standard_normal((2, 5))  # a new signature: a new closure
    _, back = _rrule(scale, fresh, Val(7))
    np.testing.assert_array_equal(back(np.ones((2, 5)))[0], np.full((2, 5), 7.0))  # still right
    with sr.no_fallback(), pytest.raises(sr.DynamicFallbackError, match="scale pullback: no compiled kernel"):
        back(np.ones((2, 5)))
    fallbacks = sr.cache_info().fallbacks
    with sr.no_compile():  # counted (as testing.test_rrule checks) even without no_fallback
        back(np.ones((2, 5)))
    assert sr.cache_info().fallbacks == fallbacks + 1
    with pytest.raises(AssertionError, match="left its specialized path: .*no compiled kernel"):
        check_rrule(scale, np.random.default_rng(3).standard_normal((5,)), Val(7))


def test_guards_hold_per_thread() -> None:
    """A guard in one thread neither fires on another thread's compile nor hides it."""
    started, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def guarded_thread() -> None:
        with sr.no_compile():
            started.set()
            release.wait(30)
            try:  # this thread's own compile, while the main thread is unguarded
                CACHE.get(*_unique_kernel())
            except BaseException as error:  # noqa: BLE001 - handed to the main thread
                errors.append(error)

    thread = threading.Thread(target=guarded_thread)
    thread.start()
    assert started.wait(30)
    CACHE.get(*_unique_kernel())  # the other thread's guard does not fire here
    release.set()
    thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], sr.RecompileError)  # nor is its own hidden


def _unique_kernel() -> tuple[ShapeSignature, Callable[[], KernelSource]]:
    salt = uuid.uuid4().hex
    signature = ShapeSignature("test-thread", "forward", (salt,), ("float64",), (1,))

    def render() -> KernelSource:
        body = SourceWriter()
        body.line(f"# salt {salt}")
        with body.block("for i in range(lo, hi):"):
            body.line("y[i] = x[i]")
        parameters = [("x", readonly_array("float64")), ("y", writable_array("float64")), ("lo", INDEX), ("hi", INDEX)]
        return cpu_kernel(signature, parameters, body, "test kernel: a copy")

    return signature, render


def test_context_launches_count_only_inside_guards(scale: Scale) -> None:
    x = _x()
    scale(x, Val(8))
    before = context_launches()
    scale(x, Val(8))
    assert context_launches() == before
    with sr.no_compile():
        scale(x, Val(8))
    assert context_launches() == before + 1
