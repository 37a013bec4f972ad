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
import time
import uuid
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._arrays import ArrayLike, ArraySpec, InputFacts, as_array, contiguous, input_facts, static_int
from stablerules._cache import CACHE
from stablerules._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array, writable_array
from stablerules._op import KernelRequest
from stablerules._registry import FRULES, PULLBACK_BUILDERS, RRULES
from stablerules._guards import count_launches
from stablerules._key import KernelSource, ShapeSignature
from stablerules._launch import context_launches, cpu_launcher, kernel_launches
from stablerules._plan import DensePullback, Plan
from stablerules._rule import RuleOp
from stablerules._tangents import Cotangent, DenseCotangent
from stablerules.testing import test_frule as check_frule
from stablerules.testing import test_rrule as check_rrule

# Held as plain callables: the scaffold's example op has no overloads in _dispatch.py.
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule
_pullback: Callable[..., Any] = sr.pullback

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

    def __init__(self, x: InputFacts, factor: int) -> None:
        shape, dtype = x.shape, x.native
        size = int(np.prod(shape))
        super().__init__(
            "scale", (x,), out_shape=shape, kernel_entries=frozenset({"forward", "pullback", "pushforward"} if size else ())
        )
        self.size = size
        self.factor = factor
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
        x = input_facts(arrays[0], "x", "scale")  # the one input reader: shape, dtypes, device
        return ScalePlan(x, static_int(statics[0], "k"))


@pytest.fixture(scope="module")
def scale() -> Iterator[Scale]:
    op = Scale()
    yield op
    for registry in (RRULES, FRULES, PULLBACK_BUILDERS):
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


def test_a_plan_is_typed_fields_from_its_input_facts(scale: Scale) -> None:
    """What the scaffold reads of a plan are the constructor's fields, derived from the input
    facts; its own memos (one pullback per arity) are fields too, not hidden entries."""
    x = _x().astype(">f8")  # a non-native input: the facts give its native dtype to tangents
    plan = scale.lookup((x,), (Val(4),))
    assert isinstance(plan, ScalePlan)
    assert (plan.op, plan.out_shape, plan.out_dtype, plan.input_shapes) == ("scale", (3, 4), np.dtype(np.float64), ((3, 4),))
    assert (plan.differentiable, plan.input_tangents, plan.input_dtypes) == (True, (True,), (np.dtype(np.float64),))
    assert plan.namespace is np and plan.output_shapes is None and not plan.any_layout and not plan.saves_primals
    _, first = _rrule(scale, x, Val(4))
    _, again = _rrule(scale, x, Val(4))
    assert first is again and plan.pullbacks == {2: first} and set(plan.result_forms) == {2}
    assert not [name for name in vars(plan) if name.startswith("_")]
    integers = scale.lookup((np.arange(3),), (Val(2),))
    assert (integers.differentiable, integers.input_tangents) == (False, (False,))


def test_pullback_builder_takes_specs_and_runs_no_forward(scale: Scale) -> None:
    x = _x()
    _rrule(scale, x, Val(4))
    with count_launches():
        forward_launches = kernel_launches()
        builder: Callable[..., Any] = PULLBACK_BUILDERS.lookup(scale)
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


# --------------------------------------------------------------------------------------------
# The library's ops: every entry runs its signature's kernels, and a NumPy path is caught
# --------------------------------------------------------------------------------------------

from stablerules.rules.kron import KronPlan  # noqa: E402
from stablerules.rules.repeat import NestPlan  # noqa: E402

_KERNEL_CALLS: list[tuple[str, Callable[..., Any], tuple[object, ...], dict[str, object]]] = [
    ("repeat-numpy", sr.repeat, (np.arange(12.0).reshape(3, 4), Val(3)), {"axis": Val(1)}),
    ("repeat-julia", sr.repeat, (np.arange(24.0).reshape(2, 3, 4),), {"inner": Val((2, 1, 3)), "outer": Val((2, 1, 1))}),
    ("repeat-counts", sr.repeat, (np.arange(6.0).reshape(2, 3), np.array([1, 0, 2])), {"axis": Val(1)}),
    ("tile", sr.tile, (np.arange(6.0).reshape(2, 3), Val((2, 2))), {}),
    ("kron", sr.kron, (np.arange(6.0).reshape(2, 3), np.arange(4.0).reshape(2, 2) + 1j), {}),
]


@pytest.mark.parametrize(("name", "op", "args", "kwargs"), _KERNEL_CALLS, ids=[call[0] for call in _KERNEL_CALLS])
def test_every_entry_of_every_op_launches_its_kernels(
    name: str, op: Callable[..., Any], args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    """A steady call launches the signature's own kernel for the forward, the dense pullback
    and the pushforward, counted per kernel signature."""
    y, back = _rrule(op, *args, **kwargs)
    dy = np.ones(y.shape, y.dtype)
    tangents = tuple(np.ones_like(arg) if i == 0 or op is sr.kron else NoTangent() for i, arg in enumerate(args))
    back(dy)
    _frule(op, tangents, *args, **kwargs)
    op_name = "repeat" if op is sr.tile else getattr(op, "name")
    forward_kind = "forward"
    pushforward_kind = "pushforward" if op is sr.kron else "forward"

    def launches(kind: str) -> int:
        return kernel_launches(op=op_name, kind=kind, device="cpu")

    with sr.no_compile(), sr.no_fallback():
        before = launches(forward_kind)
        op(*args, **kwargs)
        assert launches(forward_kind) == before + 1, "forward"
        y, back = _rrule(op, *args, **kwargs)
        assert launches(forward_kind) == before + 2, "rrule's forward"
        before = launches("pullback")
        back(dy)
        assert launches("pullback") == before + 1, "pullback"
        before = launches(pushforward_kind)
        _frule(op, tangents, *args, **kwargs)
        assert launches(pushforward_kind) == before + (1 if op is sr.kron else 2), "frule's forward and pushforward"


def test_view_ops_run_their_plan_and_no_kernel() -> None:
    a, b = np.ones((2, 3)), np.ones((2, 4))
    plan = sr.concatenate.lookup(*sr.concatenate.bind((a, b), Val(1)))
    assert plan.requests() == [] and plan.kernel_entries == frozenset()
    with sr.no_compile(), sr.no_fallback():
        launches = kernel_launches()
        y, back = _rrule(sr.concatenate, (a, b), axis=Val(1))
        (da, db), = back(np.arange(14.0).reshape(2, 7))
        assert kernel_launches() == launches
    assert np.shares_memory(da, y) is False and da.base is not None  # a view of dy, not a copy


@pytest.fixture
def fresh_plans() -> Iterator[None]:
    """Plans built around a mutation must not outlive it (they hold its closures)."""
    sr.clear_caches()
    yield
    sr.clear_caches()


def test_numpy_pullback_in_place_of_repeat_kernel_fails_the_suite_checks(
    fresh_plans: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's mutation: repeat's CPU pullback computed as NumPy's reshape-sum, right
    results and all. The shared checker (what every rule test runs) must fail on it."""

    def numpy_pullback(self: NestPlan, saved: object) -> DensePullback:
        count = self.nest.total

        def reshape_sum(dy: ArrayLike) -> tuple[object, ...]:
            return (dy.reshape(-1, count).sum(axis=1).reshape(self.shape),)

        return reshape_sum

    x = np.random.default_rng(4).standard_normal(6)
    check_rrule(sr.repeat, x, Val(3), axis=Val(0))  # the real kernel passes
    sr.clear_caches()
    monkeypatch.setattr(NestPlan, "pullback", numpy_pullback)
    y, back = _rrule(sr.repeat, x, Val(3), axis=Val(0))
    np.testing.assert_allclose(back(np.ones(18))[0], np.full(6, 3.0))  # the mutant is right
    with pytest.raises(AssertionError, match="repeat pullback: no compiled kernel of its signature ran"):
        check_rrule(sr.repeat, x, Val(3), axis=Val(0))


def test_numpy_forward_and_pushforward_in_place_of_kernels_are_caught(
    fresh_plans: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))

    def numpy_product(self: KronPlan, left: npt.NDArray[Any], right: npt.NDArray[Any]) -> ArrayLike:
        return np.kron(left.reshape(self.layout.a_shape), right.reshape(self.layout.b_shape))

    monkeypatch.setattr(KronPlan, "_product", numpy_product)  # kron's CPU forward, all entries
    with pytest.raises(AssertionError, match="kron forward: no compiled kernel"):
        check_rrule(sr.kron, a, b)
    monkeypatch.undo()
    sr.clear_caches()

    kernel_pushforward = NestPlan.pushforward

    def numpy_pushforward(self: NestPlan, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        tangent = tangents[0]
        if isinstance(tangent, DenseCotangent):
            return np.tile(tangent.array, (2, 2))
        return kernel_pushforward(self, arrays, tangents)  # lazy tangents run no kernel anyway

    monkeypatch.setattr(NestPlan, "pushforward", numpy_pushforward)
    with pytest.raises(AssertionError, match="tile pushforward: no compiled kernel"):
        check_frule(sr.tile, a, Val((2, 2)))


# --------------------------------------------------------------------------------------------
# An op with several outputs (as split): the scaffold prepares each output's cotangent
# --------------------------------------------------------------------------------------------


class HalvesPlan(Plan):
    """``halves(x)``: the two halves of a 1-D ``x`` of even length, as copies (no kernel)."""

    def __init__(self, x: InputFacts) -> None:
        self.half = half = x.shape[0] // 2
        super().__init__("halves", (x,), out_shape=(half,), output_shapes=((half,), (half,)))

    def forward(self, arrays: tuple[object, ...]) -> object:
        x = as_array(arrays[0], "x")
        return x[: self.half].copy(), x[self.half :].copy()

    def pullback(self, saved: object) -> DensePullback:
        def dense(cotangents: tuple[Cotangent, ...]) -> tuple[object, ...]:
            parts = [
                entry.array if isinstance(entry, DenseCotangent)
                else np.full(self.half, entry.value if isinstance(entry, Fill) else 0.0, self.out_dtype)
                for entry in cotangents
            ]
            return (np.concatenate(parts),)

        return dense

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return tangent.array[: self.half].copy(), tangent.array[self.half :].copy()
        return ZeroTangent(), ZeroTangent()


class Halves(RuleOp):
    name = "halves"
    input_names = ("x",)

    def __call__(self, x: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        return self.forward(x)  # type: ignore[return-value]

    def bind(self, x: object) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return (x,), ()

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        x = input_facts(arrays[0], "x", "halves")
        if len(x.shape) != 1 or x.shape[0] % 2:
            raise ValueError(f"halves: x must be 1-D of even length, got shape {x.shape}")
        return HalvesPlan(x)


def test_several_outputs_take_a_tuple_of_cotangents() -> None:
    halves = Halves()
    try:
        x = np.arange(6.0)
        (first, second), back = _rrule(halves, x)
        np.testing.assert_array_equal(first, [0.0, 1.0, 2.0])
        (dx,) = back((np.ones(3), np.full(3, 2.0)))
        np.testing.assert_array_equal(dx, [1, 1, 1, 2, 2, 2])
        (dx,) = back((ZeroTangent(), Thunk(lambda: Fill(3.0, (3,)))))
        np.testing.assert_array_equal(dx, [0, 0, 0, 3, 3, 3])
        assert back(ZeroTangent()) == (ZeroTangent(),)
        assert back((ZeroTangent(), ZeroTangent())) == (ZeroTangent(),)
        with pytest.raises(ValueError, match="halves has 2 outputs, so dy must be a tuple of 2 cotangents, got 1 entries"):
            back((np.ones(3),))
        with pytest.raises(ValueError, match=r"\(4,\).*\(3,\)"):
            back((np.ones(4), np.ones(3)))
        _, (d_first, d_second) = _frule(halves, (np.arange(6.0) * 2,), x)
        np.testing.assert_array_equal(d_second, [6.0, 8.0, 10.0])
        check_rrule(halves, np.random.default_rng(6).standard_normal(4))
    finally:
        for registry in (RRULES, FRULES, PULLBACK_BUILDERS):
            registry.unregister(halves)


def _occupy_the_pool(release: threading.Event) -> threading.Thread:
    """A launch on another thread whose two chunks (2 threads: its caller's and the pool's one
    thread's) block until ``release`` is set; returned once both are running."""
    from stablerules import _parallel

    started = threading.Barrier(3)
    # A pool thread whose job its caller ran itself (a chunk that holds the GIL) is busy until
    # it has had the GIL once since: wait for that first.
    deadline = time.monotonic() + 30
    while any(worker.busy.locked() for worker in _parallel._workers) and time.monotonic() < deadline:
        time.sleep(0.001)

    def occupy(lo: int, hi: int) -> None:
        started.wait(30)
        release.wait(30)

    background = threading.Thread(target=_parallel.run_chunks, args=(occupy, [(0, 1), (1, 2)]))
    background.start()
    started.wait(30)  # the background caller and the pool thread are both inside occupy()
    return background


def test_a_split_runs_its_chunks_on_a_pool_thread_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The calling thread's chunk waits for the other chunk: it can only end because a pool
    thread ran that chunk meanwhile (else the wait times out and the caller runs it itself)."""
    from stablerules import _parallel

    monkeypatch.setenv("STABLERULES_NUM_THREADS", "2")
    other_ran = threading.Event()
    ran: dict[int, int] = {}

    def chunk(lo: int, hi: int) -> None:
        ran[lo] = threading.get_ident()
        if lo == 0:
            assert other_ran.wait(30), "no pool thread ran the second chunk"
        else:
            other_ran.set()

    _parallel.run_chunks(chunk, [(0, 1), (1, 2)])
    assert ran[0] == threading.get_ident() and ran[1] != threading.get_ident()


def test_a_pool_threads_error_is_raised_by_the_caller_after_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules import _parallel

    monkeypatch.setenv("STABLERULES_NUM_THREADS", "3")
    ran: list[int] = []

    def chunk(lo: int, hi: int) -> None:
        if lo == 1:
            raise ValueError("chunk 1 failed")
        ran.append(lo)

    with pytest.raises(ValueError, match="chunk 1 failed"):
        _parallel.run_chunks(chunk, [(0, 1), (1, 2), (2, 3)])
    assert sorted(ran) == [0, 2]
    _parallel.run_chunks(chunk, [(0, 1), (2, 3)])  # the pool still serves
    assert sorted(ran) == [0, 0, 2, 2]


def test_a_pool_thread_that_cannot_start_leaves_its_chunks_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    """As at interpreter shutdown (``can't create new thread``): the launch runs every chunk in
    the calling thread instead of failing."""
    from stablerules import _parallel

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setenv("STABLERULES_NUM_THREADS", "4")
    monkeypatch.setattr(_parallel, "_workers", [])  # none started yet
    monkeypatch.setattr(threading.Thread, "start", refuse)
    ran: list[tuple[int, int]] = []
    _parallel.run_chunks(lambda lo, hi: ran.append((lo, threading.get_ident())), [(0, 1), (1, 2), (2, 3)])
    assert sorted(lo for lo, _ in ran) == [0, 1, 2] and {ident for _, ident in ran} == {threading.get_ident()}
    assert _parallel._workers == []


def test_a_chunk_no_pool_thread_started_runs_in_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every pool thread busy, run_chunks runs the other chunks itself instead of waiting."""
    from stablerules import _parallel

    monkeypatch.setenv("STABLERULES_NUM_THREADS", "2")
    release = threading.Event()
    background = _occupy_the_pool(release)
    ran: list[tuple[int, int]] = []
    try:
        _parallel.run_chunks(lambda lo, hi: ran.append((lo, threading.get_ident())), [(0, 1), (1, 2), (2, 3)])
        assert not release.is_set()
    finally:
        release.set()
        background.join(30)
    assert sorted(lo for lo, _ in ran) == [0, 1, 2]
    assert {ident for _, ident in ran} == {threading.get_ident()}


def test_split_ranges_give_the_calling_thread_the_hand_offs_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's range is larger by ``HANDOFF_WORK`` elements per other range; ranges
    cover the extent in order, none empty; small work is one range."""
    from stablerules import _parallel

    threshold = _parallel.PARALLEL_THRESHOLD
    for threads in (2, 3, 8):
        monkeypatch.setenv("STABLERULES_NUM_THREADS", str(threads))
        assert _parallel.chunk_bounds(200, threshold - 1) == [(0, 200)]
        for extent, work in ((200, 1_344_000), (2, threshold), (5, 10**9), (3, threshold), (1000, 50 * threshold)):
            bounds = _parallel.chunk_bounds(extent, work)
            assert len(bounds) == min(threads, extent)
            assert [lo for lo, _ in bounds] == [0] + [hi for _, hi in bounds[:-1]] and bounds[-1][1] == extent
            assert all(hi > lo for lo, hi in bounds)
            if extent >= 1000:
                per_index = work / extent
                others = len(bounds) - 1
                first = bounds[0][1] * per_index
                assert abs(first - (work + others * _parallel.HANDOFF_WORK) / len(bounds)) <= per_index
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "2")
    (_, first), (_, _) = _parallel.chunk_bounds(200, 1_344_000)  # W3's pullback
    assert first == 115  # 100 + 196608 / 6720 / 2 indices (6720 elements each), rounded


# --------------------------------------------------------------------------------------------
# A steady state generates no code: everything a call needs is built once per signature
# --------------------------------------------------------------------------------------------


def test_a_planted_per_call_exec_is_caught(scale: Scale, monkeypatch: pytest.MonkeyPatch, fresh_plans: None) -> None:
    """The mutation: a pullback that builds a helper from source at every call (what a
    launcher made per call does). Results are right; only ``no_compile()`` can notice."""

    def generating_pullback(self: ScalePlan, saved: object) -> DensePullback:
        def dense(dy: ArrayLike) -> tuple[object, ...]:
            namespace: dict[str, object] = {}
            exec("def helper(apply, dy):\n    return apply(dy)\n", namespace)
            return (namespace["helper"](self._apply, dy),)  # type: ignore[operator]

        return dense

    monkeypatch.setattr(ScalePlan, "pullback", generating_pullback)
    x = _x()
    y, back = _rrule(scale, x, Val(3))
    np.testing.assert_array_equal(back(np.ones_like(y))[0], np.full(x.shape, 3.0))
    with sr.no_compile(), pytest.raises(sr.RecompileError, match="code was generated"):
        back(np.ones_like(y))
    with pytest.raises(AssertionError):
        check_rrule(scale, x, Val(3))


_STEADY_CALLS: list[tuple[str, Callable[..., Any], tuple[object, ...], dict[str, object]]] = [
    ("repeat", sr.repeat, (np.ones((4, 5)), Val(3)), {"axis": Val(1)}),
    ("repeat-counts", sr.repeat, (np.ones((2, 3)), np.array([1, 0, 2])), {"axis": Val(1)}),
    ("tile", sr.tile, (np.ones((4, 5)), Val((2, 3))), {}),
    ("concatenate", sr.concatenate, ((np.ones((4, 5)), np.ones((4, 3))),), {"axis": Val(1)}),
    ("cat", sr.cat, (np.ones((4, 5)), np.ones((4, 3))), {"dims": Val(1)}),
    ("hstack", sr.hstack, ((np.ones((4, 5)), np.ones((4, 3))),), {}),
    ("vstack", sr.vstack, ((np.ones((4, 5)), np.ones((2, 5))),), {}),
    ("stack", sr.stack, ((np.ones((4, 5)), np.ones((4, 5))),), {"axis": Val(1)}),
    ("split", sr.split, (np.ones((4, 5)), Val(2)), {"axis": Val(0)}),
    ("pad", sr.pad, (np.ones((4, 5)), Val((1, 2, 0, 3))), {}),
    ("permute_dims", sr.permute_dims, (np.ones((3, 4, 5)), Val((2, 0, 1))), {}),
    ("transpose", sr.transpose, (np.ones((4, 5)),), {}),
    ("reshape", sr.reshape, (np.ones((4, 5)), Val((5, 4))), {}),
    ("flip", sr.flip, (np.ones((4, 5)), Val(1)), {}),
    ("roll", sr.roll, (np.ones((4, 5)), Val(2)), {"axis": Val(1)}),
    ("sum", sr.sum, (np.ones((3, 4, 5)), Val(1)), {}),
    ("mean", sr.mean, (np.ones((3, 4, 5)), Val(1)), {}),
    ("broadcast_to", sr.broadcast_to, (np.ones((1, 5)), Val((4, 5))), {}),
    ("kron", sr.kron, (np.ones((8, 8)), np.ones((8, 8))), {}),
    ("kron-complex", sr.kron, (np.ones((2, 3)), np.ones((2, 2)) + 1j), {}),
    ("kron-large", sr.kron, (np.ones((40, 40)), np.ones((20, 20))), {}),  # split across threads
]


def _cotangent(y: object) -> object:
    if isinstance(y, (tuple, list)):
        return tuple(np.ones_like(part) for part in y)
    return np.ones_like(y)


@pytest.mark.parametrize(("name", "op", "args", "kwargs"), _STEADY_CALLS, ids=[call[0] for call in _STEADY_CALLS])
def test_steady_calls_of_every_op_generate_no_code(
    name: str, op: Callable[..., Any], args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    """After one call of a signature, its rrule, pullback (both forms), builder, forward and
    frule compile no template and run no generated code: ``no_compile()`` would raise on
    either."""
    from stablerules import _codegen

    def tangent(arg: object) -> object:
        if isinstance(arg, np.ndarray) and arg.dtype.kind in "fc":
            return np.ones_like(arg)
        if isinstance(arg, tuple):
            return tuple(np.ones_like(part) for part in arg)
        return NoTangent()

    tangents = tuple(tangent(arg) for arg in args)

    def step() -> None:
        y, back = _rrule(op, *args, **kwargs)
        dy = _cotangent(y)
        back(dy)
        _pullback(op, *args, **kwargs)(dy)
        op(*args, **kwargs)
        _frule(op, tangents, *args, **kwargs)

    step()
    before, compiles = _codegen.template_compiles[0], sr.cache_info().compiles
    with sr.no_compile():
        for _ in range(3):
            step()
    assert _codegen.template_compiles[0] == before
    assert sr.cache_info().compiles == compiles


# --------------------------------------------------------------------------------------------
# Reductions into private accumulators: chunks taken by whichever thread is free
# --------------------------------------------------------------------------------------------


def test_shared_chunks_run_once_each_and_never_wait_for_a_busy_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules import _parallel

    monkeypatch.setenv("STABLERULES_NUM_THREADS", "2")
    release = threading.Event()
    background = _occupy_the_pool(release)
    ran: list[tuple[int, int]] = []
    try:
        _parallel.run_shared(lambda lo, hi: ran.append((lo, threading.get_ident())), [(i, i + 1) for i in range(6)])
        assert not release.is_set()  # returned while every pool thread was still busy
    finally:
        release.set()
        background.join(30)
    assert sorted(lo for lo, _ in ran) == list(range(6))
    assert {ident for _, ident in ran} == {threading.get_ident()}
    ran.clear()
    _parallel.run_shared(lambda lo, hi: ran.append((lo, threading.get_ident())), [(i, i + 1) for i in range(40)])
    assert sorted(lo for lo, _ in ran) == list(range(40))  # each chunk once, whoever took it


@pytest.mark.parametrize("threads", ["2", "3"])
def test_split_reductions_give_the_same_bits_every_run(monkeypatch: pytest.MonkeyPatch, threads: str) -> None:
    """Partial sums per chunk, added in chunk order: the result does not depend on which
    thread ran which chunk (non-integer data, where the order of additions shows)."""
    from stablerules import _parallel

    monkeypatch.setattr(_parallel, "PARALLEL_THRESHOLD", 1)
    monkeypatch.setenv("STABLERULES_NUM_THREADS", threads)
    rng = np.random.default_rng(7)
    x = np.ones((1, 3, 1, 5))
    _, back = _rrule(sr.broadcast_to, x, Val((23, 3, 17, 5)))
    dy = rng.standard_normal((23, 3, 17, 5))
    assert len(_parallel.reduction_bounds(23, dy.size)) == 2 * int(threads)
    first = back(dy)[0]
    for _ in range(30):
        assert np.array_equal(back(dy)[0], first)
    np.testing.assert_allclose(first, dy.sum(axis=(0, 2), keepdims=True), rtol=1e-12)
    a, b = rng.standard_normal((40, 30)), rng.standard_normal((20, 20))
    _, kron_back = _rrule(sr.kron, a, b)
    dk = rng.standard_normal((800, 600))
    grads = kron_back(dk)
    for _ in range(10):
        again = kron_back(dk)
        assert np.array_equal(again[0], grads[0]) and np.array_equal(again[1], grads[1])
    view = dk.reshape(40, 20, 30, 20)
    np.testing.assert_allclose(grads[0], np.einsum("ikjl,kl->ij", view, b), rtol=1e-10)
    np.testing.assert_allclose(grads[1], np.einsum("ikjl,ij->kl", view, a), rtol=1e-10)
