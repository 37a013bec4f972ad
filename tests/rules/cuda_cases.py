"""CUDA kernels against the CPU kernels and NumPy, exactly.

Not collected by a plain ``pytest`` run (the name does not start with ``test_``):
``tests/rules/test_cuda.py`` runs it in a subprocess with ``NUMBA_ENABLE_CUDASIM=1
STABLERULES_DEVICE=cuda`` (Numba's simulator, NumPy arrays), and ``bench/gpu_check.py`` runs it
on a GPU with ``STABLERULES_DEVICE=cuda`` only (NumPy arrays copied in and out by Numba around
each launch, and CuPy arrays when CuPy is installed). Without either the module skips (in CI, where the simulator is always installed, it fails).

Every case runs the forward, the pullback and the pushforward on the CUDA kernels and on the
CPU kernels in the same process (``kernel_target`` reads ``STABLERULES_DEVICE`` at call time,
so switching it with ``monkeypatch`` switches kernel families) and compares them with ``==``:
the data are small integers in floating dtypes, so every sum is exact whatever its order. An
independent NumPy reference checks the values too: the op applied with NumPy, and for the
pullback the adjoint of the op's index map (``np.bincount`` over where each output element
comes from) or, for ``kron``, ``einsum`` over the cotangent's interleaved view. Shapes are
tiny: the simulator runs each CUDA thread as a Python thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent
from stablerules._cache import CACHE
from stablerules._cuda import cuda_available, simulator_enabled
from stablerules._guards import count_launches
from stablerules._launch import kernel_launches
from tests.ci import in_ci
from tests.rules import Case as RobustnessCase, assert_every_op_has_a_row, collect

# The cases choose their ops at run time (typed Any): their rule calls go through these
# untyped names, so that mypy does not try each of the rules' thousands of overloads on every
# such call (about 0.25 s each; the result would be Any all the same).
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule

Array = npt.NDArray[Any]

if os.environ.get("STABLERULES_DEVICE", "").strip().lower() != "cuda":
    pytest.skip("run with STABLERULES_DEVICE=cuda (tests/rules/test_cuda.py does)", allow_module_level=True)
if not cuda_available():
    if in_ci():  # the simulator is always installed in CI: a broken one fails the run
        raise RuntimeError(
            f"CI={os.environ.get('CI')}: CUDA kernels cannot run here (numba.cuda did not import, or "
            f"its simulator failed; NUMBA_ENABLE_CUDASIM={os.environ.get('NUMBA_ENABLE_CUDASIM')!r})"
        )
    pytest.skip("no CUDA GPU and Numba's simulator is off (NUMBA_ENABLE_CUDASIM=1)", allow_module_level=True)


def _cupy() -> ModuleType | None:
    if simulator_enabled():
        return None
    try:
        import cupy
    except ImportError:
        return None
    return cupy


CUPY = _cupy()
NAMESPACES = ["numpy"] + (["cupy"] if CUPY is not None else [])
RNG = np.random.default_rng(8)


def integers(shape: tuple[int, ...], dtype: npt.DTypeLike) -> Array:
    """Small integers in ``dtype``: every sum of a few thousand of them is exact."""
    resolved = np.dtype(dtype)
    values = RNG.integers(-8, 9, shape)
    if resolved.kind == "c":
        return (values + 1j * RNG.integers(-8, 9, shape)).astype(resolved)
    if resolved.kind == "b":
        return (values > 0).astype(resolved)
    return values.astype(resolved)


def host(value: object) -> Any:
    """A NumPy copy of a CuPy array; anything else as it is."""
    get = getattr(value, "get", None)
    return get() if CUPY is not None and isinstance(value, CUPY.ndarray) and callable(get) else value


def device(value: object, namespace: str) -> Any:
    if namespace == "cupy" and isinstance(value, np.ndarray):
        assert CUPY is not None
        return CUPY.asarray(value)
    return value


def assert_same(cuda_value: object, cpu_value: object, namespace: str, what: str) -> None:
    """Equal tangents: the same kind, and for arrays the same dtype, shape and values, with
    the CUDA one living in ``namespace``."""
    if isinstance(cpu_value, np.ndarray):
        wanted = np.ndarray if namespace == "numpy" else CUPY.ndarray  # type: ignore[union-attr]
        assert isinstance(cuda_value, wanted), f"{what}: got {type(cuda_value).__name__}"
        got = host(cuda_value)
        assert isinstance(got, np.ndarray)
        assert got.dtype == cpu_value.dtype and got.shape == cpu_value.shape, (what, got.dtype, got.shape)
        np.testing.assert_array_equal(got, cpu_value, err_msg=what)
    else:
        assert cuda_value == cpu_value, f"{what}: {cuda_value!r} != {cpu_value!r}"


@pytest.fixture
def on_cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], Any]], Any]]:
    """``on_cpu(fn)`` runs ``fn`` with the CPU kernels, then goes back to the CUDA ones."""

    def run(fn: Callable[[], Any]) -> Any:
        monkeypatch.setenv("STABLERULES_DEVICE", "cpu")
        try:
            return fn()
        finally:
            monkeypatch.setenv("STABLERULES_DEVICE", "cuda")

    yield run


def cuda_signatures() -> set[sr.ShapeSignature]:
    return {signature for signature in CACHE._entries if signature.device == "cuda"}


@contextlib.contextmanager
def cuda_kernel_runs(op: str, kind: str, expected: bool = True) -> Iterator[None]:
    """The block launches a CUDA kernel of ``op`` and ``kind`` (a prefix), when ``expected``
    (an empty output has nothing to launch): results equal to the CPU's are not enough, the
    work must have run in CUDA kernels."""
    with count_launches():
        before = kernel_launches(op=op, kind=kind, device="cuda")
        yield
        after = kernel_launches(op=op, kind=kind, device="cuda")
    if expected:
        assert after > before, f"no CUDA {op} {kind} kernel ran"


# ------------------------------------------------------------------------------------ cases


@dataclass(frozen=True)
class Case:
    """One op call: ``op(x, *rest, **kwargs)``; ``reference`` is the same call in NumPy."""

    name: str
    op: Any
    shape: tuple[int, ...]
    rest: tuple[object, ...]
    kwargs: dict[str, object] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float64",)

    def __str__(self) -> str:
        return self.name


def julia_reference(x: Array, inner: tuple[int, ...], outer: tuple[int, ...]) -> Array:
    n = max(x.ndim, len(inner), len(outer))
    y = x.reshape(x.shape + (1,) * (n - x.ndim))
    for axis, count in enumerate(inner + (1,) * (n - len(inner))):
        y = np.repeat(y, count, axis=axis)
    return np.tile(y, outer + (1,) * (n - len(outer)))


def static(value: object) -> tuple[int, ...]:
    """The counts in ``Val(int)`` or ``Val(tuple)``; ``()`` for ``None``."""
    if value is None:
        return ()
    assert isinstance(value, Val)
    inner = value.value
    return inner if isinstance(inner, tuple) else (inner,)


def numpy_repeat(case: Case, x: Array) -> Array:
    """The case's op, computed by NumPy (any dtype, including int64 index arrays)."""
    if case.op is sr.tile:
        reps = case.rest[0]
        assert isinstance(reps, Val)
        return np.tile(x, reps.value)
    if "inner" in case.kwargs or "outer" in case.kwargs:
        return julia_reference(x, static(case.kwargs.get("inner")), static(case.kwargs.get("outer")))
    repeats = case.rest[0]
    axis = case.kwargs.get("axis")
    count = repeats.value if isinstance(repeats, Val) else np.asarray(repeats)
    return np.repeat(x, count, axis=axis.value if isinstance(axis, Val) else None)


REPEAT_CASES = [
    Case("numpy-axis", sr.repeat, (2, 3, 4), (Val(3),), {"axis": Val(1)}, ("float32", "float64", "complex64", "complex128")),
    Case("numpy-flat", sr.repeat, (3, 4), (Val(2),)),
    Case("numpy-zero-count", sr.repeat, (3, 4), (Val(0),), {"axis": Val(0)}),
    Case("numpy-0d", sr.repeat, (), (Val(5),)),
    Case("julia-W3-small", sr.repeat, (5, 3, 4), (), {"inner": Val((7, 1, 10)), "outer": Val((4, 1, 2))}),
    Case("julia-trailing-axes", sr.repeat, (4,), (), {"inner": Val((2, 3)), "outer": Val((1, 1, 2))}, ("complex128",)),
    Case("julia-outer-only", sr.repeat, (3, 5), (), {"outer": Val((2, 3))}),
    Case("tile-new-axes", sr.tile, (2, 3), (Val((2, 1, 3)),)),
    Case("tile-int", sr.tile, (7,), (Val(3),), {}, ("float32",)),
    Case("counts-middle-axis", sr.repeat, (2, 4, 3), (np.array([1, 0, 3, 2]),), {"axis": Val(1)}, ("float64", "complex64")),
    Case("counts-last-axis", sr.repeat, (3, 4), (np.array([2, 0, 1, 5]),), {"axis": Val(1)}),
    Case("counts-flat", sr.repeat, (2, 3), (np.array([1, 2, 0, 3, 1, 2]),)),
    Case("counts-broadcast-one", sr.repeat, (5, 2), (np.array([3]),), {"axis": Val(0)}),
    Case("empty-input", sr.repeat, (0, 3), (Val(2),), {"axis": Val(1)}),
]


def arguments(case: Case, x: object, namespace: str) -> tuple[object, ...]:
    return (x, *(device(value, namespace) for value in case.rest))


def tangents_of(case: Case, tangent: object) -> tuple[object, ...]:
    return (tangent,) + (NoTangent(),) * len(case.rest)


def adjoint_reference(case: Case, dy: Array) -> Array:
    """``J^H dy`` for the case's index map: each output element comes from one input element
    (found by running the op in NumPy on the input's flat indices); sum dy over them."""
    indices = np.arange(int(np.prod(case.shape, dtype=np.int64)), dtype=np.int64).reshape(case.shape)
    sources = numpy_repeat(case, indices).reshape(-1)
    size = indices.size
    flat = dy.reshape(-1)
    real = np.bincount(sources, weights=flat.real, minlength=size)
    if dy.dtype.kind == "c":
        real = real + 1j * np.bincount(sources, weights=flat.imag, minlength=size)
    return real.astype(dy.dtype).reshape(case.shape)


REPEAT_PARAMETERS = [
    pytest.param(case, dtype, namespace, id=f"{case.name}-{dtype}-{namespace}")
    for case in REPEAT_CASES
    for dtype in case.dtypes
    for namespace in NAMESPACES
]


@pytest.mark.parametrize(("case", "dtype", "namespace"), REPEAT_PARAMETERS)
def test_repeat_family_forward_pullback_pushforward(
    case: Case, dtype: str, namespace: str, on_cpu: Callable[[Callable[[], Any]], Any]
) -> None:
    x_host = integers(case.shape, dtype)
    x = device(x_host, namespace)
    args = arguments(case, x, namespace)

    y_cpu = on_cpu(lambda: case.op(x_host, *case.rest, **case.kwargs))
    runs = y_cpu.size > 0
    with cuda_kernel_runs("repeat", "forward", runs):
        y = case.op(*args, **case.kwargs)
    assert_same(y, y_cpu, namespace, "forward vs CPU")
    np.testing.assert_array_equal(y_cpu, numpy_repeat(case, x_host))

    y_rule, back = _rrule(case.op, *args, **case.kwargs)
    assert_same(y_rule, y_cpu, namespace, "rrule primal")
    dy_host = integers(y_cpu.shape, dtype)
    with cuda_kernel_runs("repeat", "pullback", runs):
        tangents = back(device(dy_host, namespace))
    _, back_cpu = on_cpu(lambda: _rrule(case.op, x_host, *case.rest, **case.kwargs))
    expected = back_cpu(dy_host)
    assert len(tangents) == len(expected) == len(args)
    for position, (got, want) in enumerate(zip(tangents, expected)):
        assert_same(got, want, namespace, f"pullback entry {position}")
    np.testing.assert_array_equal(expected[0], adjoint_reference(case, dy_host))

    dx_host = integers(case.shape, dtype)
    with cuda_kernel_runs("repeat", "forward", runs):  # the pushforward runs the forward kernel
        y_frule, ydot = _frule(case.op, tangents_of(case, device(dx_host, namespace)), *args, **case.kwargs)
    assert_same(y_frule, y_cpu, namespace, "frule primal")
    _, ydot_cpu = on_cpu(lambda: _frule(case.op, tangents_of(case, dx_host), x_host, *case.rest, **case.kwargs))
    assert_same(ydot, ydot_cpu, namespace, "pushforward")
    np.testing.assert_array_equal(ydot_cpu, numpy_repeat(case, dx_host))


LAZY_CASES = [REPEAT_CASES[0], REPEAT_CASES[4], REPEAT_CASES[9]]


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("case", LAZY_CASES, ids=str)
def test_repeat_family_lazy_cotangents(case: Case, namespace: str, on_cpu: Callable[[Callable[[], Any]], Any]) -> None:
    """``Fill``, ``ZeroTangent`` and ``Thunk`` cotangents and tangents give what the CPU gives."""
    x_host = integers(case.shape, "float64")
    args = arguments(case, device(x_host, namespace), namespace)
    y, back = _rrule(case.op, *args, **case.kwargs)
    _, back_cpu = on_cpu(lambda: _rrule(case.op, x_host, *case.rest, **case.kwargs))
    shape = tuple(host(y).shape)
    fill = Fill(3.0, shape, np.float64)
    for cotangent in (fill, ZeroTangent(), Thunk(lambda: fill)):
        got, want = back(cotangent)[0], back_cpu(cotangent)[0]
        assert type(got) is type(want) or isinstance(want, np.ndarray)
        assert_same(got, want, namespace, f"pullback of {cotangent!r}")
    dense_thunk = Thunk(lambda: device(np.full(shape, 2.0), namespace))
    assert_same(back(dense_thunk)[0], back_cpu(Thunk(lambda: np.full(shape, 2.0)))[0], namespace, "dense thunk")
    for tangent in (Fill(2.0, case.shape, np.float64), ZeroTangent()):
        _, got_tangent = _frule(case.op, tangents_of(case, tangent), *args, **case.kwargs)
        _, want_tangent = on_cpu(lambda: _frule(case.op, tangents_of(case, tangent), x_host, *case.rest, **case.kwargs))
        assert_same(got_tangent, want_tangent, namespace, f"pushforward of {tangent!r}")


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_integer_inputs_forward_and_no_tangent(namespace: str) -> None:
    x_host = integers((3, 4), "int32")
    x = device(x_host, namespace)
    y, back = sr.rrule(sr.repeat, x, Val(2), axis=Val(1))
    np.testing.assert_array_equal(host(y), np.repeat(x_host, 2, axis=1))
    assert back(device(np.ones((3, 8)), namespace)) == (NoTangent(), NoTangent())
    counts = device(np.array([0, 1, 2, 1]), namespace)
    np.testing.assert_array_equal(host(sr.repeat(x, counts, axis=Val(1))), np.repeat(x_host, [0, 1, 2, 1], axis=1))


def test_repeat_kernels_are_cuda_kernels_compiled_once() -> None:
    """A call builds CUDA kernels (device "cuda" in the signature); a second call of the same
    signature, even at other extents, compiles nothing and takes no fallback."""
    kwargs: dict[str, object] = {"inner": Val((2, 1)), "outer": Val((1, 3))}
    x = integers((4, 3), "float64")
    y, back = sr.rrule(sr.repeat, x, inner=Val((2, 1)), outer=Val((1, 3)))
    back(integers(host(y).shape, "float64"))
    compiles = sr.cache_info().compiles
    signatures = sr.precompile(sr.repeat, sr.ArraySpec((4, 3), np.float64, device="cuda"), **kwargs)
    assert sr.cache_info().compiles == compiles  # the call built them all
    assert set(signatures) <= cuda_signatures()
    assert {signature.kind for signature in signatures} == {"forward", "pullback"}
    with sr.no_compile(), sr.no_fallback():
        for shape in ((4, 3), (2, 5), (1, 1)):
            x = integers(shape, "float64")
            y, back = sr.rrule(sr.repeat, x, inner=Val((2, 1)), outer=Val((1, 3)))
            dy = integers(host(y).shape, "float64")
            np.testing.assert_array_equal(back(dy)[0], adjoint_reference(Case("again", sr.repeat, shape, (), kwargs), dy))
            _, ydot = sr.frule(sr.repeat, (x,), x, inner=Val((2, 1)), outer=Val((1, 3)))
            np.testing.assert_array_equal(ydot, y)
    assert sr.cache_info().compiles == compiles


def test_precompile_cuda_specs_builds_the_kernels_a_call_uses() -> None:
    spec = sr.ArraySpec((3, 2), np.complex64, device="cuda")
    signatures = sr.precompile(sr.tile, spec, Val((2, 2)))
    assert signatures and all(signature.device == "cuda" for signature in signatures)
    x = integers((3, 2), "complex64")
    with sr.no_compile():
        y, back = sr.rrule(sr.tile, x, Val((2, 2)))
        back(integers(host(y).shape, "complex64"))
    source = sr.explain(sr.tile, spec, Val((2, 2)))
    assert "@cuda.jit" in source and "cuda.grid(1)" in source


@pytest.mark.skipif(CUPY is None, reason="mixed devices need CuPy on a GPU")
def test_mixed_devices_are_type_errors() -> None:
    assert CUPY is not None
    x = CUPY.asarray(integers((3, 4), "float64"))
    with pytest.raises(TypeError, match="cpu"):
        sr.repeat(x, np.array([1, 2, 0, 1]), axis=Val(1))
    y, back = sr.rrule(sr.repeat, x, Val(2), axis=Val(0))
    with pytest.raises(TypeError, match="mixed devices"):
        back(np.ones((6, 4)))


# ------------------------------------------------------------------ concatenate family
# No kernels (slicing and the namespace's own concatenate): under the simulator this is the
# NumPy path again; on a GPU with CuPy it checks that every path stays on the device.

CONCATENATE_CALLS: list[tuple[str, Any, Callable[[list[Any]], tuple[object, ...]], dict[str, object], list[tuple[int, ...]]]] = [
    ("concatenate", sr.concatenate, lambda arrays: (tuple(arrays),), {"axis": Val(1)}, [(2, 3), (2, 4)]),
    ("concatenate-flat", sr.concatenate, lambda arrays: (tuple(arrays),), {"axis": None}, [(2, 3), (5,)]),
    ("stack", sr.stack, lambda arrays: (tuple(arrays),), {"axis": Val(1)}, [(2, 3), (2, 3)]),
    ("hstack", sr.hstack, lambda arrays: (tuple(arrays),), {}, [(3,), (2,)]),
    ("vstack", sr.vstack, lambda arrays: (tuple(arrays),), {}, [(3,), (2, 3)]),
    ("cat-block-diagonal", sr.cat, lambda arrays: (*arrays, 2.0), {"dims": Val((0, 1))}, [(2, 2), (1, 3)]),
]


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize(("name", "op", "pack", "kwargs", "shapes"), CONCATENATE_CALLS, ids=[c[0] for c in CONCATENATE_CALLS])
def test_concatenate_family_stays_on_the_device(
    name: str,
    op: Any,
    pack: Callable[[list[Any]], tuple[object, ...]],
    kwargs: dict[str, object],
    shapes: list[tuple[int, ...]],
    namespace: str,
    on_cpu: Callable[[Callable[[], Any]], Any],
) -> None:
    hosts = [integers(shape, "float64") for shape in shapes]
    args = pack([device(array, namespace) for array in hosts])
    host_args = pack(hosts)
    y, back = _rrule(op, *args, **kwargs)
    y_cpu, back_cpu = on_cpu(lambda: _rrule(op, *host_args, **kwargs))
    assert_same(y, y_cpu, namespace, f"{name} forward")
    dy = integers(y_cpu.shape, "float64")

    def flatten(tangents: tuple[object, ...]) -> list[object]:
        return [item for entry in tangents for item in (entry if isinstance(entry, tuple) else (entry,))]

    for got, want in zip(flatten(back(device(dy, namespace))), flatten(back_cpu(dy)), strict=True):
        assert_same(got, want, namespace, f"{name} pullback")
    tangent_hosts = [integers(shape, "float64") for shape in shapes]

    def tangents_for(arrays: list[Any]) -> tuple[object, ...]:
        packed = pack(arrays)
        if op is sr.cat:
            return (*packed[:-1], NoTangent())
        return packed

    _, ydot = _frule(op, tangents_for([device(t, namespace) for t in tangent_hosts]), *args, **kwargs)
    _, ydot_cpu = on_cpu(lambda: _frule(op, tangents_for(tangent_hosts), *host_args, **kwargs))
    assert_same(ydot, ydot_cpu, namespace, f"{name} pushforward")


# ---------------------------------------------- flip, roll, permute_dims, transpose, reshape
# roll has CUDA kernels (one gather per pattern; forward, pullback and pushforward all run it,
# on the unsigned-integer bits of the dtype); the others are views, the same code on every
# device. Each case: forward, pullback and pushforward against the CPU and against NumPy.

STRUCTURE_CASES: list[tuple[str, Any, Callable[[Array], Array], Callable[[Array], Array], tuple[int, ...], tuple[object, ...], dict[str, object], tuple[str, ...]]] = [
    ("roll-last-two", sr.roll, lambda v: np.roll(v, (3, -5), axis=(2, 3)), lambda v: np.roll(v, (-3, 5), axis=(2, 3)),
     (2, 3, 6, 7), (Val((3, -5)),), {"axis": Val((2, 3))}, ("float32", "float64", "complex128", "int8")),
    ("roll-flat", sr.roll, lambda v: np.roll(v, 7), lambda v: np.roll(v, -7), (3, 5), (Val(7),), {}, ("float64", "complex64")),
    ("roll-first-axis", sr.roll, lambda v: np.roll(v, 2, axis=0), lambda v: np.roll(v, -2, axis=0),
     (5, 4, 3), (Val(2),), {"axis": Val(0)}, ("float64",)),
    ("roll-repeated-axis", sr.roll, lambda v: np.roll(v, (1, 1), axis=(1, 1)), lambda v: np.roll(v, -2, axis=1),
     (4, 5), (Val((1, 1)), Val((1, 1))), {}, ("float64",)),
    ("roll-empty", sr.roll, lambda v: np.roll(v, 1, axis=1), lambda v: np.roll(v, -1, axis=1), (0, 3), (Val(1),), {"axis": Val(1)}, ("float64",)),
    ("flip", sr.flip, lambda v: np.flip(v, (0, 2)), lambda v: np.flip(v, (0, 2)), (2, 3, 4), (), {"axis": Val((0, 2))}, ("float64", "complex64")),
    ("permute-dims", sr.permute_dims, lambda v: np.permute_dims(v, (2, 0, 1)), lambda v: np.permute_dims(v, (1, 2, 0)),
     (2, 3, 4), (Val((2, 0, 1)),), {}, ("float64",)),
    ("transpose", sr.transpose, lambda v: np.transpose(v), lambda v: np.transpose(v), (2, 3, 4), (), {}, ("float32",)),
    ("swapaxes", sr.swapaxes, lambda v: np.swapaxes(v, 0, 2), lambda v: np.swapaxes(v, 0, 2), (2, 3, 4), (Val(0), Val(2)), {}, ("float64",)),
    ("reshape", sr.reshape, lambda v: np.reshape(v, (4, -1)), lambda v: np.reshape(v, (2, 3, 4)), (2, 3, 4), (Val((4, -1)),), {}, ("float64",)),
]
STRUCTURE_PARAMETERS = [
    pytest.param(case, dtype, namespace, id=f"{case[0]}-{dtype}-{namespace}")
    for case in STRUCTURE_CASES
    for dtype in case[7]
    for namespace in NAMESPACES
]


@pytest.mark.parametrize(("case", "dtype", "namespace"), STRUCTURE_PARAMETERS)
def test_structure_ops_forward_pullback_pushforward(
    case: tuple[str, Any, Callable[[Array], Array], Callable[[Array], Array], tuple[int, ...], tuple[object, ...], dict[str, object], tuple[str, ...]],
    dtype: str,
    namespace: str,
    on_cpu: Callable[[Callable[[], Any]], Any],
) -> None:
    name, op, forward, adjoint, shape, rest, kwargs, _ = case
    x_host = integers(shape, dtype)
    x = device(x_host, namespace)
    args = (x, *rest)
    kernels = op is sr.roll and x_host.size > 0  # the view ops launch nothing, on any device
    with cuda_kernel_runs("roll", "copy", kernels):
        y = op(*args, **kwargs)
    y_cpu = on_cpu(lambda: op(x_host, *rest, **kwargs))
    assert_same(np.ascontiguousarray(host(y)) if namespace == "numpy" else y, np.ascontiguousarray(y_cpu), namespace, f"{name} forward")
    np.testing.assert_array_equal(y_cpu, forward(x_host))
    y_rule, back = _rrule(op, *args, **kwargs)
    dy_host = integers(tuple(host(y_rule).shape), dtype)
    with cuda_kernel_runs("roll", "copy", kernels and np.dtype(dtype).kind in "fc"):
        got = back(device(dy_host, namespace))
    want = on_cpu(lambda: _rrule(op, x_host, *rest, **kwargs)[1](dy_host))
    assert len(got) == len(want) == len(args)
    if np.dtype(dtype).kind in "fc":
        assert_same(np.ascontiguousarray(host(got[0])) if namespace == "numpy" else got[0], np.ascontiguousarray(want[0]), namespace, f"{name} pullback")
        np.testing.assert_array_equal(want[0], adjoint(dy_host))
        dx_host = integers(shape, dtype)
        tangents = (device(dx_host, namespace),) + (NoTangent(),) * len(rest)
        with cuda_kernel_runs("roll", "copy", kernels):
            _, ydot = _frule(op, tangents, *args, **kwargs)
        np.testing.assert_array_equal(host(ydot), forward(dx_host))
        fill = Fill(2.0, tuple(host(y_rule).shape), np.dtype(dtype))
        assert back(fill)[0] == Fill(2.0, shape, np.dtype(dtype))
        assert back(ZeroTangent())[0] == ZeroTangent()
        np.testing.assert_array_equal(host(back(Thunk(lambda: device(dy_host, namespace)))[0]), adjoint(dy_host))
    else:
        assert got[0] == NoTangent()


def test_roll_is_a_cuda_kernel_compiled_once_for_every_shape_and_shift() -> None:
    x = integers((3, 4, 5), "float64")
    y, back = sr.rrule(sr.roll, x, Val(2), axis=Val(1))
    back(integers((3, 4, 5), "float64"))
    signatures = sr.precompile(sr.roll, sr.ArraySpec((3, 4, 5), np.float64, device="cuda"), Val(2), axis=Val(1))
    assert len(signatures) == 1 and signatures[0] in cuda_signatures()
    with sr.no_compile(), sr.no_fallback():
        for shape, shift in (((2, 7, 3), 5), ((1, 1, 1), -1)):
            v = integers(shape, "int64")  # another dtype of 8 bytes: the same kernel
            np.testing.assert_array_equal(host(sr.roll(v, Val(shift), axis=Val(1))), np.roll(v, shift, axis=1))
            y, back = sr.rrule(sr.roll, v.astype(np.float64), Val(shift), axis=Val(1))
            dy = integers(shape, "float64")
            np.testing.assert_array_equal(host(back(dy)[0]), np.roll(dy, -shift, axis=1))


# ------------------------------------------------------------------------------------ kron

KRON_CASES: list[tuple[str, tuple[int, ...], str, tuple[int, ...], str]] = [
    ("2d-f64", (3, 4), "float64", (2, 5), "float64"),
    ("units-and-lanes-stride", (9, 5), "float64", (4, 9), "float64"),
    ("1d-c64", (5,), "complex64", (7,), "complex64"),
    ("3d-f32-c128", (2, 3, 2), "float32", (2, 1, 3), "complex128"),
    ("c128-f64", (3, 2), "complex128", (2, 2), "float64"),
    ("int-a", (2, 3), "int32", (3, 2), "float64"),
    ("0d-a", (), "float64", (3,), "float32"),
    ("ints", (2, 2), "int64", (2, 2), "int8"),
    ("empty-b", (2, 2), "float64", (0, 3), "float64"),
]


def kron_adjoint(dy: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """``(sum_k dy[i, k] conj(b[k]), sum_i dy[i, k] conj(a[i]))`` over kron's interleaved
    index, by ``einsum`` on dy's view ``(A0, B0, A1, B1, ...)``; projected and cast like the
    tangents of real operands."""
    n = max(a.ndim, b.ndim, 1)
    a_padded = a.reshape((1,) * (n - a.ndim) + a.shape)
    b_padded = b.reshape((1,) * (n - b.ndim) + b.shape)
    view = dy.reshape(tuple(extent for pair in zip(a_padded.shape, b_padded.shape) for extent in pair))
    a_letters = "".join(chr(ord("a") + 2 * axis) for axis in range(n))
    b_letters = "".join(chr(ord("b") + 2 * axis) for axis in range(n))
    y_letters = "".join(chr(ord("a") + axis) for axis in range(2 * n))
    wide = np.complex128
    da = np.einsum(f"{y_letters},{b_letters}->{a_letters}", view.astype(wide), np.conj(b_padded.astype(wide)))
    db = np.einsum(f"{y_letters},{a_letters}->{b_letters}", view.astype(wide), np.conj(a_padded.astype(wide)))

    def finish(gradient: Array, primal: Array) -> Array:
        gradient = gradient if primal.dtype.kind == "c" else gradient.real
        return gradient.reshape(primal.shape).astype(primal.dtype)

    return finish(da, a), finish(db, b)


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize(("name", "a_shape", "a_dtype", "b_shape", "b_dtype"), KRON_CASES, ids=[c[0] for c in KRON_CASES])
def test_kron_forward_pullback_pushforward(
    name: str,
    a_shape: tuple[int, ...],
    a_dtype: str,
    b_shape: tuple[int, ...],
    b_dtype: str,
    namespace: str,
    on_cpu: Callable[[Callable[[], Any]], Any],
) -> None:
    a_host, b_host = integers(a_shape, a_dtype), integers(b_shape, b_dtype)
    a, b = device(a_host, namespace), device(b_host, namespace)
    y_cpu = on_cpu(lambda: sr.kron(a_host, b_host))
    runs = y_cpu.size > 0
    with cuda_kernel_runs("kron", "forward", runs):
        y = sr.kron(a, b)
    assert_same(y, y_cpu, namespace, "forward vs CPU")
    np.testing.assert_array_equal(y_cpu, np.kron(a_host, b_host))

    y_rule, back = sr.rrule(sr.kron, a, b)
    assert_same(y_rule, y_cpu, namespace, "rrule primal")
    dy_host = integers(y_cpu.shape, y_cpu.dtype)
    _, back_cpu = on_cpu(lambda: sr.rrule(sr.kron, a_host, b_host))
    differentiable = y_cpu.dtype.kind in "fc"
    with cuda_kernel_runs("kron", "pullback", runs and differentiable):
        got = back(device(dy_host, namespace))
    want = back_cpu(dy_host)
    assert len(got) == len(want) == 2
    for position, (tangent, expected) in enumerate(zip(got, want)):
        assert_same(tangent, expected, namespace, f"pullback entry {position}")
    references = kron_adjoint(dy_host, a_host, b_host)
    for expected, reference, primal in zip(want, references, (a_host, b_host)):
        if primal.dtype.kind in "fc":
            np.testing.assert_array_equal(expected, reference)
        else:
            assert expected == NoTangent()

    ta_host, tb_host = integers(a_shape, a_dtype), integers(b_shape, b_dtype)
    for tangents_host in ((ta_host, tb_host), (ta_host, ZeroTangent()), (ZeroTangent(), tb_host)):
        tangents = tuple(device(t, namespace) for t in tangents_host)
        dense = [t for t, primal in zip(tangents_host, (a_host, b_host)) if isinstance(t, np.ndarray) and primal.dtype.kind in "fc"]
        kind = "pushforward" if len(dense) == 2 else "forward"
        with cuda_kernel_runs("kron", kind, runs and bool(dense)):
            _, ydot = sr.frule(sr.kron, tangents, a, b)
        _, ydot_cpu = on_cpu(lambda: sr.frule(sr.kron, tangents_host, a_host, b_host))
        assert_same(ydot, ydot_cpu, namespace, f"pushforward of {[type(t).__name__ for t in tangents_host]}")
    if a_host.dtype.kind in "fc" and b_host.dtype.kind in "fc":
        expected = np.kron(ta_host, b_host) + np.kron(a_host, tb_host)
        np.testing.assert_array_equal(on_cpu(lambda: sr.frule(sr.kron, (ta_host, tb_host), a_host, b_host))[1], expected)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_kron_lazy_cotangents_and_scalars(namespace: str, on_cpu: Callable[[Callable[[], Any]], Any]) -> None:
    a_host, b_host = integers((3, 2), "complex128"), integers((2, 3), "float64")
    a, b = device(a_host, namespace), device(b_host, namespace)
    y, back = sr.rrule(sr.kron, a, b)
    _, back_cpu = on_cpu(lambda: sr.rrule(sr.kron, a_host, b_host))
    shape = tuple(host(y).shape)
    fill = Fill(2.0 - 1.0j, shape, np.complex128)
    for cotangent in (fill, ZeroTangent(), Thunk(lambda: fill)):
        for got, want in zip(back(cotangent), back_cpu(cotangent)):
            assert_same(got, want, namespace, f"pullback of {cotangent!r}")
    scaled = sr.kron(2.0, b)
    assert_same(scaled, np.kron(2.0, b_host), namespace, "kron of a Python scalar")
    y2, back2 = sr.rrule(sr.kron, 3.0, b)
    assert_same(back2(device(np.ones(b_host.shape), namespace))[1], np.full(b_host.shape, 3.0), namespace, "db for a scalar a")


def test_kron_kernels_compile_once_and_only_offsets_depend_on_ndim() -> None:
    a, b = integers((2, 3), "float64"), integers((3, 2), "float64")
    y, back = sr.rrule(sr.kron, a, b)
    back(integers(host(y).shape, "float64"))
    sr.frule(sr.kron, (a, b), a, b)
    info = sr.cache_info()
    built = info.compiles + info.disk_hits
    with sr.no_compile(), sr.no_fallback():
        for a_shape, b_shape in (((4, 1), (2, 5)), ((1, 1), (1, 1))):
            a, b = integers(a_shape, "float64"), integers(b_shape, "float64")
            y, back = sr.rrule(sr.kron, a, b)
            dy = integers(host(y).shape, "float64")
            for got, want in zip(back(dy), kron_adjoint(dy, a, b)):
                np.testing.assert_array_equal(got, want)
    y, back = sr.rrule(sr.kron, integers((1, 2, 1, 2), "float64"), integers((2, 1, 2, 1), "float64"))
    back(integers(host(y).shape, "float64"))
    info = sr.cache_info()
    assert info.compiles + info.disk_hits == built + 1  # the offsets kernel for four axis pairs
    kinds = {signature.kind for signature in cuda_signatures() if signature.op == "kron"}
    assert kinds == {"offsets", "forward", "pullback", "pushforward"}


@pytest.mark.skipif(CUPY is None, reason="mixed devices need CuPy on a GPU")
def test_kron_mixed_devices_are_type_errors() -> None:
    assert CUPY is not None
    with pytest.raises(TypeError, match="mixed devices"):
        sr.kron(CUPY.ones((2, 2)), np.ones((2, 2)))


# ----------------------------------------------------- broadcast_to, sum, mean, pad, split
# broadcast_to's pullback (a gather per element of dx over its broadcast copies) and sum's and
# mean's (a gather per element of dx from its kept entry) are CUDA kernels; the forwards are
# the namespace's own broadcast_to/sum/mean; pad and split slice and copy blocks.

BROADCAST_CASES: list[tuple[tuple[int, ...], tuple[int, ...], str]] = [
    ((1, 4, 1, 5), (3, 4, 6, 5), "float32"),
    ((4, 1), (2, 4, 7), "complex64"),
    ((1,), (9,), "float64"),
    ((3, 1, 2, 1), (2, 3, 4, 2, 5), "complex128"),
    ((2, 3), (2, 3), "float64"),
    ((2, 1), (3, 2, 0), "float64"),
]


def broadcast_adjoint(x_shape: tuple[int, ...], dy: Array) -> Array:
    lead = dy.ndim - len(x_shape)
    summed = dy.sum(axis=tuple(range(lead))) if lead else dy
    stretched = tuple(axis for axis, extent in enumerate(x_shape) if extent == 1 and summed.shape[axis] != 1)
    reduced: Array = summed.sum(axis=stretched, keepdims=True)
    return reduced.reshape(x_shape).astype(dy.dtype)


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize(("x_shape", "shape", "dtype"), BROADCAST_CASES, ids=[f"{c[0]}->{c[1]}-{c[2]}" for c in BROADCAST_CASES])
def test_broadcast_to_forward_pullback_pushforward(
    x_shape: tuple[int, ...], shape: tuple[int, ...], dtype: str, namespace: str, on_cpu: Callable[[Callable[[], Any]], Any]
) -> None:
    x_host = integers(x_shape, dtype)
    x = device(x_host, namespace)
    y, back = sr.rrule(sr.broadcast_to, x, Val(shape))
    y_cpu, back_cpu = on_cpu(lambda: sr.rrule(sr.broadcast_to, x_host, Val(shape)))
    np.testing.assert_array_equal(host(y), np.broadcast_to(x_host, shape))
    dy_host = integers(shape, dtype)
    got, want = back(device(dy_host, namespace)), back_cpu(dy_host)
    for position, (tangent, expected) in enumerate(zip(got, want, strict=True)):
        assert_same(tangent, expected, namespace, f"pullback entry {position}")
    np.testing.assert_array_equal(want[0], broadcast_adjoint(x_shape, dy_host))
    tangent_host = integers(x_shape, dtype)
    _, ydot = sr.frule(sr.broadcast_to, (device(tangent_host, namespace), NoTangent()), x, Val(shape))
    np.testing.assert_array_equal(host(ydot), np.broadcast_to(tangent_host, shape))
    for cotangent in (Fill(2.0, shape, np.float64), ZeroTangent()):
        assert back(cotangent) == back_cpu(cotangent)


SUM_CASES: list[tuple[tuple[int, ...], tuple[int, ...] | None, str]] = [
    ((4, 5, 6), (1, 2), "float64"),
    ((2, 3, 4, 5), (0, 2), "float32"),
    ((20, 3, 4), (0, 2), "complex64"),
    ((4, 5), (0,), "complex128"),
    ((3, 4), None, "float64"),
    ((3, 1), (1,), "float64"),
]


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("op", [sr.sum, sr.mean], ids=["sum", "mean"])
@pytest.mark.parametrize(("x_shape", "axis", "dtype"), SUM_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in SUM_CASES])
def test_sum_mean_forward_pullback_pushforward(
    x_shape: tuple[int, ...],
    axis: tuple[int, ...] | None,
    dtype: str,
    op: Any,
    keepdims: bool,
    namespace: str,
    on_cpu: Callable[[Callable[[], Any]], Any],
) -> None:
    x_host = integers(x_shape, dtype)
    x = device(x_host, namespace)
    axis_value = None if axis is None else Val(axis)
    y, back = _rrule(op, x, axis=axis_value, keepdims=Val(keepdims))
    y_cpu, back_cpu = on_cpu(lambda: _rrule(op, x_host, axis=axis_value, keepdims=Val(keepdims)))
    reference = (np.mean if op is sr.mean else np.sum)(x_host, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(host(y), reference, rtol=1e-6)
    dy_host = integers(tuple(np.shape(y_cpu)), dtype)
    (got,), (want,) = back(device(dy_host, namespace)), back_cpu(dy_host)
    if isinstance(want, Fill):
        assert got == want
    else:
        assert_same(got, want, namespace, "pullback")
    axes = tuple(range(len(x_shape))) if axis is None else axis
    count = int(np.prod([x_shape[a] for a in axes])) if op is sr.mean else 1
    kept = dy_host if keepdims else np.expand_dims(dy_host, axes)
    np.testing.assert_array_equal(np.asarray(want), np.broadcast_to(kept / count if count != 1 else kept, x_shape).astype(dtype))
    tangent_host = integers(x_shape, dtype)
    _, ydot = _frule(op, (device(tangent_host, namespace),), x, axis=axis_value, keepdims=Val(keepdims))
    _, ydot_cpu = on_cpu(lambda: _frule(op, (tangent_host,), x_host, axis=axis_value, keepdims=Val(keepdims)))
    assert_same(ydot, ydot_cpu, namespace, "pushforward")


def test_broadcast_kernels_are_cuda_kernels_compiled_once() -> None:
    x = integers((1, 3, 1), "float64")
    _, back = sr.rrule(sr.broadcast_to, x, Val((2, 3, 4)))
    back(integers((2, 3, 4), "float64"))
    _, back = sr.rrule(sr.mean, integers((2, 3, 4), "float64"), Val((0, 2)))
    back(integers((3,), "float64"))
    kinds = {signature.kind for signature in cuda_signatures() if signature.op == "broadcast"}
    assert kinds == {"reduce", "expand"}
    compiles = sr.cache_info().compiles
    with sr.no_compile(), sr.no_fallback():
        for x_shape, shape in (((1, 5, 1), (7, 5, 2)), ((1, 1, 1), (2, 1, 3))):
            dy = integers(shape, "float64")
            _, back = sr.rrule(sr.broadcast_to, integers(x_shape, "float64"), Val(shape))
            np.testing.assert_array_equal(back(dy)[0], broadcast_adjoint(x_shape, dy))
        _, back = sr.rrule(sr.mean, integers((5, 2, 7), "float64"), Val((0, 2)))
        np.testing.assert_array_equal(back(np.array([35.0, 70.0]))[0], np.broadcast_to(np.array([1.0, 2.0])[None, :, None], (5, 2, 7)))
    assert sr.cache_info().compiles == compiles
    source = sr.explain(sr.broadcast_to, sr.ArraySpec((1, 3, 1), np.float32, device="cuda"), Val((2, 3, 4)))
    assert "@cuda.jit" in source and "total += dy[" in source


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_pad_and_split_stay_on_the_device(namespace: str, on_cpu: Callable[[Callable[[], Any]], Any]) -> None:
    x_host = integers((3, 4), "float64")
    x = device(x_host, namespace)
    y, back = sr.rrule(sr.pad, x, Val((1, 0, 2, 1)), 2.0)
    y_cpu, back_cpu = on_cpu(lambda: sr.rrule(sr.pad, x_host, Val((1, 0, 2, 1)), 2.0))
    assert_same(y, y_cpu, namespace, "pad forward")
    dy = integers(y_cpu.shape, "float64")
    for position, (got, want) in enumerate(zip(back(device(dy, namespace)), back_cpu(dy), strict=True)):
        if isinstance(want, np.ndarray) and want.shape == ():
            np.testing.assert_array_equal(host(got), want)
        else:
            assert_same(got, want, namespace, f"pad pullback entry {position}")
    parts, split_back = sr.rrule(sr.split, x, Val((1, 3)), Val(1))
    parts_cpu, split_back_cpu = on_cpu(lambda: sr.rrule(sr.split, x_host, Val((1, 3)), Val(1)))
    for got_part, want_part in zip(parts, parts_cpu, strict=True):
        assert_same(got_part, want_part, namespace, "split forward")
    dys = [integers(part.shape, "float64") for part in parts_cpu]
    cotangents = (device(dys[0], namespace), ZeroTangent(), device(dys[2], namespace))
    assert_same(split_back(cotangents)[0], split_back_cpu((dys[0], ZeroTangent(), dys[2]))[0], namespace, "split pullback")


@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize(
    ("shape", "axis", "keepdims"),
    [((3, 1), None, True), ((1, 4), Val(0), False), ((2, 1, 3), Val((0, 2)), True), ((1, 1), Val(0), False)],
)
def test_sum_mean_one_element_dy_gives_a_dense_dx_on_the_device(
    namespace: str, shape: tuple[int, ...], axis: Val[Any] | None, keepdims: bool, on_cpu: Callable[[Callable[[], Any]], Any]
) -> None:
    """The density rule on CUDA: only a full reduction's 0-d cotangent gives a Fill."""
    x_host = integers(shape, "float64")
    for op in (sr.sum, sr.mean):
        y, back = sr.rrule(op, device(x_host, namespace), axis=axis, keepdims=Val(keepdims))
        y_cpu, back_cpu = on_cpu(lambda: sr.rrule(op, x_host, axis=axis, keepdims=Val(keepdims)))
        dy = integers(y_cpu.shape, "float64")
        (got,), (want,) = back(device(dy, namespace)), back_cpu(dy)
        assert isinstance(want, np.ndarray)
        assert_same(got, want, namespace, f"{op} pullback of x{shape}")


# ------------------------------------------------------------------------------- indexing
# getindex's forward and pushforward are NumPy's views on every device; its pullback is a
# CUDA gather (each thread writes one element of dx). take's forward is a gather; its pullback
# is a one-thread counting sort and a gather over buckets (deterministic), or, with
# deterministic=Val(False), atomics into zeros. take_along_axis's pullback is a gather over
# the taken positions; index_add's forward is take's bucketed accumulation onto x.

GETINDEX_CUDA_CASES = [
    ((5, 6), sr.ix[1:-1, ::2]),
    ((4, 7), sr.ix[::-1, 2]),
    ((3, 4, 5), sr.ix[None, 1, ::-2, 1:4]),
    ((9,), sr.ix[7:1:-3]),
]


@pytest.mark.parametrize(("shape", "index"), GETINDEX_CUDA_CASES, ids=[str(i) for _, i in GETINDEX_CUDA_CASES])
@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_getindex_pullback_is_a_cuda_gather(
    shape: tuple[int, ...], index: Any, dtype: str, on_cpu: Callable[[Callable[[], Any]], Any]
) -> None:
    x = integers(shape, dtype)
    y, back = sr.rrule(sr.getindex, x, index)
    np.testing.assert_array_equal(host(y), x[index.entries])
    dy = integers(tuple(host(y).shape), dtype)
    with cuda_kernel_runs("getindex", "pullback"):
        dx = back(dy)[0]
    expected = np.zeros(shape, dtype)
    expected[index.entries] = dy
    np.testing.assert_array_equal(host(dx), expected)
    cpu = on_cpu(lambda: sr.rrule(sr.getindex, x, index)[1](dy)[0])
    assert_same(dx, cpu, "numpy", "getindex pullback")


TAKE_CUDA_CASES = [
    ((6, 3), (7,), 0),
    ((4, 5), (2, 3), 1),
    ((3, 4), (5,), None),
    ((2, 3, 4), (6,), -1),
]


@pytest.mark.parametrize(("shape", "ishape", "axis"), TAKE_CUDA_CASES)
@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_take_forward_pullback_pushforward_on_cuda(
    shape: tuple[int, ...], ishape: tuple[int, ...], axis: int | None, deterministic: bool, dtype: str,
    on_cpu: Callable[[Callable[[], Any]], Any],
) -> None:
    x = integers(shape, dtype)
    n = int(np.prod(shape)) if axis is None else shape[axis]
    indices = RNG.integers(-n, n, ishape)
    static = None if axis is None else Val(axis)
    kwargs = {"deterministic": Val(deterministic)}
    with cuda_kernel_runs("take", "gather"):
        y, back = sr.rrule(sr.take, x, indices, static, **kwargs)
    np.testing.assert_array_equal(host(y), np.take(x, indices, axis=axis))
    dy = integers(tuple(host(y).shape), dtype)
    with cuda_kernel_runs("take", "atomic" if not deterministic else "accumulate"):
        dx = back(dy)[0]
    wrapped = np.where(indices < 0, indices + n, indices)
    expected = np.zeros(int(np.prod(shape)) if axis is None else shape, dtype)
    where: Any = wrapped.reshape(-1) if axis is None else (slice(None),) * (axis % len(shape)) + (wrapped,)
    np.add.at(expected, where, dy.reshape(-1) if axis is None else dy)
    np.testing.assert_array_equal(host(dx), expected.reshape(shape))
    cpu = on_cpu(lambda: sr.rrule(sr.take, x, indices, static)[1](dy)[0])
    assert_same(dx, cpu, "numpy", "take pullback")
    tangent = integers(shape, dtype)
    with cuda_kernel_runs("take", "gather"):
        _, ydot = sr.frule(sr.take, (tangent, NoTangent(), NoTangent()), x, indices, static, **kwargs)
    np.testing.assert_array_equal(host(ydot), np.take(tangent, indices, axis=axis))


def test_take_along_axis_and_index_add_on_cuda(on_cpu: Callable[[Callable[[], Any]], Any]) -> None:
    x = integers((4, 6), "float64")
    indices = RNG.integers(-6, 6, (4, 3))
    with cuda_kernel_runs("take_along_axis", "gather-along"):
        y, back = sr.rrule(sr.take_along_axis, x, indices, Val(1))
    np.testing.assert_array_equal(host(y), np.take_along_axis(x, indices, axis=1))
    dy = integers((4, 3), "float64")
    with cuda_kernel_runs("take_along_axis", "scatter-along"):
        dx = back(dy)[0]
    expected = np.zeros((4, 6))
    np.add.at(expected, (np.arange(4)[:, None], np.where(indices < 0, indices + 6, indices)), dy)
    np.testing.assert_array_equal(host(dx), expected)
    assert_same(dx, on_cpu(lambda: sr.rrule(sr.take_along_axis, x, indices, Val(1))[1](dy)[0]), "numpy", "take_along_axis pullback")
    z = integers((2, 4, 6), "complex128")  # 16-byte elements: two units per element
    k = RNG.integers(0, 4, (2, 2, 6))
    np.testing.assert_array_equal(host(sr.take_along_axis(z, k, Val(1))), np.take_along_axis(z, k, axis=1))

    rows = np.array([4, 0, 4, -1, 2])
    values = integers((5, 3), "float32")
    base = integers((5, 3), "float32")
    with cuda_kernel_runs("index_add", "accumulate"):
        y, add_back = sr.rrule(sr.index_add, base, rows, values)
    expected = base.copy()
    np.add.at(expected, rows, values)
    np.testing.assert_array_equal(host(y), expected)
    dy = integers((5, 3), "float32")
    added, _, dvalues = add_back(dy)
    np.testing.assert_array_equal(host(added), dy)
    np.testing.assert_array_equal(host(dvalues), np.take(dy, rows, axis=0))


def test_indexing_cuda_kernels_compile_once_for_every_shape() -> None:
    x = integers((6, 3), "float64")
    y, back = sr.rrule(sr.take, x, np.array([1, 1, 5]), Val(0))
    back(integers((3, 3), "float64"))
    y, slice_back = sr.rrule(sr.getindex, x, sr.ix[1:, ::2])
    slice_back(integers(tuple(y.shape), "float64"))
    with sr.no_compile(), sr.no_fallback():
        v = integers((9, 2), "float64")
        y, back = sr.rrule(sr.take, v, np.array([8, 0, 8, 8]), Val(0))
        expected = np.zeros((9, 2))
        dy = integers((4, 2), "float64")
        np.add.at(expected, np.array([8, 0, 8, 8]), dy)
        np.testing.assert_array_equal(host(back(dy)[0]), expected)
        y, slice_back = sr.rrule(sr.getindex, v, sr.ix[2:, 1::3])
        slice_back(integers(tuple(y.shape), "float64"))


# ----------------------------------------------------------- every op, from its family's rows
# Each family's ROBUSTNESS rows (tests/rules/test_<family>.py), run on the CUDA kernels and on
# the CPU kernels: forward, pullback and pushforward equal, and the forward equal to NumPy's.
# A new op's row there runs here too; the ops without such a row have their cases above.

ROWS: list[RobustnessCase] = collect("ROBUSTNESS")
CASES_ABOVE = {
    "mean": "test_sum_mean_forward_pullback_pushforward",
    "split": "test_pad_and_split_stay_on_the_device",
    "getindex": "test_getindex_pullback_is_a_cuda_gather",
    "take": "test_take_forward_pullback_pushforward_on_cuda",
    "take_along_axis": "test_take_along_axis_and_index_add_on_cuda",
    "index_add": "test_take_along_axis_and_index_add_on_cuda",
}


def test_every_op_has_a_cuda_case() -> None:
    assert_every_op_has_a_row("ROBUSTNESS on CUDA", (row.op_name for row in ROWS), CASES_ABOVE)


def _flat(tangents: tuple[object, ...]) -> list[object]:
    return [item for entry in tangents for item in (entry if isinstance(entry, tuple) else (entry,))]


@pytest.mark.parametrize("case", ROWS, ids=str)
def test_every_row_on_cuda_equals_the_cpu(case: RobustnessCase, on_cpu: Callable[[Callable[[], Any]], Any]) -> None:
    xs = [integers(shape, "float64") for shape in case.shapes]
    args, kwargs = case.call(xs)
    op = cast(Callable[..., Any], case.op)
    y, y_cpu = op(*args, **kwargs), on_cpu(lambda: op(*args, **kwargs))
    assert_same(y, y_cpu, "numpy", "forward")
    np.testing.assert_array_equal(y_cpu, case.numpy(xs))

    rrule = _rrule
    _, back = rrule(op, *args, **kwargs)
    _, back_cpu = on_cpu(lambda: rrule(op, *args, **kwargs))
    dy = integers(y_cpu.shape, "float64")
    for position, (got, want) in enumerate(zip(_flat(back(dy)), _flat(back_cpu(dy)), strict=True)):
        assert_same(got, want, "numpy", f"pullback entry {position}")

    def tangent(arg: object) -> object:
        if isinstance(arg, np.ndarray) and any(arg is x for x in xs):
            return integers(arg.shape, "float64")
        if isinstance(arg, tuple) and arg and all(any(a is x for x in xs) for a in arg):
            return tuple(integers(np.asarray(a).shape, "float64") for a in arg)
        return NoTangent()

    tangents = tuple(tangent(arg) for arg in args)
    frule = _frule
    _, ydot = frule(op, tangents, *args, **kwargs)
    _, ydot_cpu = on_cpu(lambda: frule(op, tangents, *args, **kwargs))
    assert_same(ydot, ydot_cpu, "numpy", "pushforward")
