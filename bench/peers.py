"""Adapters for the libraries users would otherwise differentiate with: JAX (a jitted vjp),
PyTorch (autograd on CPU) and HIPS autograd.

None is a dependency: each is imported with ``importlib.import_module`` when present and
reported as "not installed" when not. They are used through ``getattr`` on the module, so
their (large, partly untyped) APIs need no stubs here.

Each adapter turns a workload's ``OpSpec`` into the peer's natural formulation and returns a
``PeerCase``: zero-argument callables for the forward and the pullback (each blocks until the
result exists), and a function giving the pullback's gradients as NumPy arrays, for the check
against the NumPy reference.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

import numpy as np

from workloads import (
    Array,
    BroadcastTo,
    Concatenate,
    Kron,
    OpSpec,
    RepeatAxis,
    RepeatInnerOuter,
    Roll,
    SumAxes,
    julia_repeat,
)

PEER_NAMES = ("jax", "torch", "autograd")
PEER_LABELS = {"jax": "jax jit(vjp)", "torch": "torch autograd", "autograd": "HIPS autograd"}


@dataclass(frozen=True)
class PeerCase:
    """One workload prepared for one peer. ``setup_s`` is its first call (trace, compile)."""

    forward: Callable[[], object]
    pullback: Callable[[], object]
    gradients: Callable[[], list[Array]]
    setup_s: float


@dataclass
class Peer:
    """A peer library: ``status`` is "ok", "not installed", "skipped" or "error: ..."."""

    name: str
    status: str
    version: str | None = None
    modules: dict[str, ModuleType] | None = None

    @property
    def label(self) -> str:
        return PEER_LABELS.get(self.name, self.name)

    def module(self, name: str) -> ModuleType:
        assert self.modules is not None, f"{self.name} is not loaded"
        return self.modules[name]

    def case(self, spec: OpSpec, arrays: Sequence[Array], dy: Array) -> PeerCase:
        if self.name == "jax":
            return _jax_case(self, spec, arrays, dy)
        if self.name == "torch":
            return _torch_case(self, spec, arrays, dy)
        if self.name == "autograd":
            return _autograd_case(self, spec, arrays, dy)
        raise ValueError(f"unknown peer {self.name!r}")


def _installed_version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def load_peers(enabled: bool) -> dict[str, Peer]:
    """Import the peers that are installed (all skipped when not ``enabled``)."""
    peers: dict[str, Peer] = {}
    for name in PEER_NAMES:
        if not enabled:
            peers[name] = Peer(name, "skipped")
            continue
        if _installed_version(name) is None:
            peers[name] = Peer(name, "not installed")
            continue
        try:
            peers[name] = Peer(name, "ok", _installed_version(name), _import_peer(name))
        except Exception as error:  # a broken install is reported, not fatal
            peers[name] = Peer(name, f"error: {type(error).__name__}: {error}")
    return peers


def _import_peer(name: str) -> dict[str, ModuleType]:
    if name == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        jax = import_module("jax")
        jax.config.update("jax_enable_x64", True)  # the workloads are float64 (W4 float32)
        return {"jax": jax, "jnp": import_module("jax.numpy")}
    if name == "torch":
        return {"torch": import_module("torch")}
    return {"autograd": import_module("autograd"), "anp": import_module("autograd.numpy")}


# --- JAX -------------------------------------------------------------------------------------


def _jax_function(jnp: ModuleType, spec: OpSpec) -> Callable[..., object]:
    if isinstance(spec, RepeatAxis):
        return lambda x: jnp.repeat(x, spec.repeats, axis=spec.axis)
    if isinstance(spec, RepeatInnerOuter):
        return lambda x: julia_repeat(jnp, x, spec.inner, spec.outer)
    if isinstance(spec, Concatenate):
        return lambda *xs: jnp.concatenate(xs, axis=spec.axis)
    if isinstance(spec, Roll):
        return lambda x: jnp.roll(x, spec.shift, axis=spec.axis)
    if isinstance(spec, BroadcastTo):
        return lambda x: jnp.broadcast_to(x, spec.shape)
    if isinstance(spec, SumAxes):
        return lambda x: jnp.sum(x, axis=spec.axis)
    assert isinstance(spec, Kron)
    return lambda a, b: jnp.kron(a, b)


def jax_vjp(peer: Peer, spec: OpSpec) -> tuple[Callable[..., object], Callable[..., object]]:
    """``(jit(f), jit(vjp))`` where ``vjp(dy, *primals)`` returns the gradients. The primals
    are arguments, not constants, and the unused forward is dead code XLA removes."""
    jax = peer.module("jax")
    function = _jax_function(peer.module("jnp"), spec)

    def vjp(dy: object, *primals: object) -> object:
        return jax.vjp(function, *primals)[1](dy)

    forward: Callable[..., object] = jax.jit(function)
    backward: Callable[..., object] = jax.jit(vjp)
    return forward, backward


def _jax_case(peer: Peer, spec: OpSpec, arrays: Sequence[Array], dy: Array) -> PeerCase:
    jax = peer.module("jax")
    forward, backward = jax_vjp(peer, spec)
    primals = [jax.device_put(array) for array in arrays]
    cotangent = jax.device_put(dy)
    block = jax.block_until_ready

    started = time.perf_counter()
    block(backward(cotangent, *primals))
    setup_s = time.perf_counter() - started
    block(forward(*primals))

    def gradients() -> list[Array]:
        return [np.asarray(g) for g in block(backward(cotangent, *primals))]

    return PeerCase(
        forward=lambda: block(forward(*primals)),
        pullback=lambda: block(backward(cotangent, *primals)),
        gradients=gradients,
        setup_s=setup_s,
    )


def jax_shape_sweep(peer: Peer, spec: OpSpec, cases: Sequence[tuple[Sequence[Array], Array]]) -> list[float]:
    """Seconds of the first jitted-vjp call per new shape (JAX traces and compiles each)."""
    jax = peer.module("jax")
    _, backward = jax_vjp(peer, spec)
    seconds = []
    for arrays, dy in cases:
        primals = [jax.device_put(array) for array in arrays]
        cotangent = jax.device_put(dy)
        started = time.perf_counter()
        jax.block_until_ready(backward(cotangent, *primals))
        seconds.append(time.perf_counter() - started)
    return seconds


# --- PyTorch ---------------------------------------------------------------------------------


def _torch_function(torch: ModuleType, spec: OpSpec) -> Callable[..., object]:
    if isinstance(spec, RepeatAxis):
        return lambda x: torch.repeat_interleave(x, spec.repeats, dim=spec.axis)
    if isinstance(spec, RepeatInnerOuter):
        inner, outer = spec.inner, spec.outer

        def julia(x: object) -> object:
            shape = tuple(getattr(x, "shape"))
            base = shape + (1,) * max(0, len(inner) - len(shape))
            counts = inner + (1,) * max(0, len(base) - len(inner))
            spread = [v for n in base for v in (n, 1)]
            widened = [v for pair in zip(base, counts) for v in pair]
            result = getattr(x, "reshape")(spread).expand(widened).reshape([n * c for n, c in zip(base, counts)])
            if outer is None:
                return result
            result = result.reshape(tuple(result.shape) + (1,) * max(0, len(outer) - result.dim()))
            return result.repeat(*(outer + (1,) * max(0, result.dim() - len(outer))))

        return julia
    if isinstance(spec, Concatenate):
        return lambda *xs: torch.cat(xs, dim=spec.axis)
    if isinstance(spec, Roll):
        return lambda x: torch.roll(x, spec.shift, dims=spec.axis)
    if isinstance(spec, BroadcastTo):
        return lambda x: getattr(x, "expand")(*spec.shape)
    if isinstance(spec, SumAxes):
        return lambda x: torch.sum(x, dim=spec.axis)
    assert isinstance(spec, Kron)
    return lambda a, b: torch.kron(a, b)


def _torch_case(peer: Peer, spec: OpSpec, arrays: Sequence[Array], dy: Array) -> PeerCase:
    torch = peer.module("torch")
    function = _torch_function(torch, spec)
    leaves = [torch.from_numpy(np.array(array)).requires_grad_(True) for array in arrays]
    plain = [leaf.detach() for leaf in leaves]  # forward without building a graph
    cotangent = torch.from_numpy(dy)
    started = time.perf_counter()
    output = function(*leaves)

    def torch_gradients() -> tuple[object, ...]:
        return tuple(torch.autograd.grad(output, leaves, grad_outputs=cotangent, retain_graph=True))

    def pullback() -> object:
        return torch_gradients()

    pullback()
    setup_s = time.perf_counter() - started

    def gradients() -> list[Array]:
        return [np.asarray(getattr(gradient, "numpy")()) for gradient in torch_gradients()]

    return PeerCase(forward=lambda: function(*plain), pullback=pullback, gradients=gradients, setup_s=setup_s)


# --- HIPS autograd ---------------------------------------------------------------------------


def _autograd_function(anp: ModuleType, spec: OpSpec) -> Callable[..., object]:
    if isinstance(spec, RepeatAxis):
        return lambda x: anp.repeat(x, spec.repeats, axis=spec.axis)
    if isinstance(spec, RepeatInnerOuter):
        return lambda x: julia_repeat(anp, x, spec.inner, spec.outer)
    if isinstance(spec, Concatenate):
        return lambda *xs: anp.concatenate(xs, axis=spec.axis)
    if isinstance(spec, Roll):
        # One axis at a time: autograd's vjp of roll negates the shift (a tuple fails there).
        def roll(x: object) -> object:
            for shift, axis in zip(spec.shift, spec.axis):
                x = anp.roll(x, shift, axis=axis)
            return x

        return roll
    if isinstance(spec, BroadcastTo):
        return lambda x: anp.broadcast_to(x, spec.shape)
    if isinstance(spec, SumAxes):
        return lambda x: anp.sum(x, axis=spec.axis)
    assert isinstance(spec, Kron)
    return lambda a, b: anp.kron(a, b)


def _autograd_case(peer: Peer, spec: OpSpec, arrays: Sequence[Array], dy: Array) -> PeerCase:
    autograd = peer.module("autograd")
    function = _autograd_function(peer.module("anp"), spec)
    started = time.perf_counter()
    # One tuple argument, so one backward pass gives every input's gradient.
    vjp, _ = autograd.make_vjp(lambda primals: function(*primals))(tuple(arrays))
    setup_s = time.perf_counter() - started

    def gradients() -> list[Array]:
        return [np.asarray(g) for g in vjp(dy)]

    return PeerCase(
        forward=lambda: function(*arrays),
        pullback=lambda: vjp(dy),
        gradients=gradients,
        setup_s=setup_s,
    )
