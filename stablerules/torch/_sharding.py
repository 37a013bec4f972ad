"""``DTensor`` inputs: our ops as custom ops with ``register_sharding`` strategies.

A call on ``DTensor``\\ s goes through two more custom ops per entry, made the first time a
``DTensor`` reaches the op (never while dynamo traces): ``stablerules::<name>_output``
``(Tensor[] arrays, int index, str call) -> Tensor``, the op's result number ``index``, and
``stablerules::<name>_gradient`` ``(Tensor?[] cotangents, Tensor[] arrays, int index, str call)
-> Tensor``, the gradient of input number ``index``. One tensor out of each because DTensor's
sharding propagation describes a fixed number of results, not a list; the ``int`` comes before
the ``str`` because ``register_sharding`` keys its cache on the arguments from the first
``int`` on, so two calls that differ only in their statics never share a sharding decision.

The strategies say which axes the op leaves alone: a ``Shard(d)`` input stays sharded where
axis ``d`` of every input maps to one axis of the result, element for element (``repeat``
along axis 1 of a ``Shard(0)`` tensor: the result is ``Shard(0)``, each rank repeating its
rows). Every op also offers the all-``Replicate`` strategy, which DTensor takes (gathering
first) where no axis is left alone: the repeated, tiled, concatenated, flipped, rolled,
reduced or padded axis itself, ``kron``, and ``reshape``/``broadcast_to``, whose statics name
global shapes that a rank's shard does not have. Reductions over a sharded axis are
gathered, not returned ``Partial``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from stablerules._facts import AxisMap, EngineFacts, ShardRule
from stablerules._schema import BY_NAME

from ._library import define

if TYPE_CHECKING:
    from ._call import Call, Entry, OptionalTensors, Tensors

@dataclass(frozen=True)
class Kernels:
    """What the custom ops here run, given by the adapter (which imports this module; this
    module imports nothing of the adapter's at run time: no import cycle)."""

    run_op: Callable[[Call, Tensors], Tensors]
    run_pullback: Callable[..., OptionalTensors]
    output_meta: Callable[[Call, Sequence[torch.Tensor]], tuple[tuple[tuple[int, ...], torch.dtype], ...]]
    fresh: Callable[[torch.Tensor, Sequence[torch.Tensor]], torch.Tensor]
    encode: Callable[[Call], str]
    decode: Callable[[Entry, str], Call]
    differentiable: Callable[[torch.Tensor], bool]


def axis_map(call: Call, shapes: Sequence[tuple[int, ...]]) -> AxisMap:
    """The axes ``call`` leaves alone, for inputs of global ``shapes``: its family's shard
    rule (``ENGINE_FACTS``, ``stablerules._facts``)."""
    rule = shard_rule(call.entry.name)
    return [] if rule is None else rule(call.static, tuple(shapes))


def shard_rule(name: str) -> ShardRule | None:
    """The op's declared shard rule (``None``: no sharding rule yet)."""
    op = BY_NAME[name]
    facts: EngineFacts = importlib.import_module(f"stablerules.rules.{op.family}").ENGINE_FACTS[name]
    return facts.shard


def _placements() -> tuple[type, type]:
    from torch.distributed.tensor import Replicate, Shard  # noqa: PLC0415 - only DTensor calls need it

    return Replicate, Shard


def _shapes(specs: Sequence[object]) -> list[tuple[int, ...]]:
    return [tuple(getattr(spec, "shape")) for spec in specs]


_REGISTERED: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {}


def dtensor_ops(entry: Entry, kernels: Kernels) -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    """``stablerules::<name>_output`` and ``<name>_gradient`` with their sharding strategies."""
    known = _REGISTERED.get(entry.name)
    if known is not None:
        return known
    from torch.distributed.tensor.experimental import register_sharding  # noqa: PLC0415

    name = entry.name

    def output_kernel(arrays: list[torch.Tensor], index: int, call: str) -> torch.Tensor:
        result = kernels.run_op(kernels.decode(entry, call), tuple(arrays))[index]
        return kernels.fresh(result, arrays)

    def output_fake(arrays: list[torch.Tensor], index: int, call: str) -> torch.Tensor:
        shape, dtype = kernels.output_meta(kernels.decode(entry, call), arrays)[index]
        return torch.empty(shape, dtype=dtype, device=arrays[0].device)

    def gradient_kernel(cotangents: list[torch.Tensor | None], arrays: list[torch.Tensor], index: int, call: str) -> torch.Tensor:
        grads = kernels.run_pullback(kernels.decode(entry, call), tuple(cotangents), tuple(arrays), None, dense=True)
        return kernels.fresh(cast("torch.Tensor", grads[index]), [*arrays, *(c for c in cotangents if c is not None)])

    def gradient_fake(cotangents: list[torch.Tensor | None], arrays: list[torch.Tensor], index: int, call: str) -> torch.Tensor:
        return torch.empty_like(arrays[index], memory_format=torch.contiguous_format)

    gradient_op = cast(
        "Callable[..., torch.Tensor]",
        define(f"{name}_gradient", "(Tensor?[] cotangents, Tensor[] arrays, int index, str call) -> Tensor", gradient_kernel, gradient_fake),
    )
    output_op = cast(
        "Callable[..., torch.Tensor]",
        define(f"{name}_output", "(Tensor[] arrays, int index, str call) -> Tensor", output_kernel, output_fake, _output_autograd(entry, kernels, gradient_op)),
    )
    output_strategy, gradient_strategy = _strategies(entry, kernels)
    namespace = torch.ops.stablerules
    register_sharding(getattr(namespace, f"{name}_output").default)(output_strategy)
    register_sharding(getattr(namespace, f"{name}_gradient").default)(gradient_strategy)
    _REGISTERED[name] = (output_op, gradient_op)
    return output_op, gradient_op


def _output_autograd(
    entry: Entry, kernels: Kernels, gradient_op: Callable[..., torch.Tensor]
) -> tuple[Callable[..., tuple[object, None, None]], Callable[..., None]]:
    """The ``_output`` op's backward (one ``_gradient`` op per differentiable input) and its
    ``setup_context``."""

    def output_setup(ctx: object, inputs: tuple[object, ...], output: object) -> None:
        arrays = cast("list[torch.Tensor]", inputs[0])
        setattr(ctx, "call", inputs[2])
        setattr(ctx, "index", inputs[1])
        setattr(ctx, "outputs", len(kernels.output_meta(kernels.decode(entry, cast("str", inputs[2])), arrays)))
        getattr(ctx, "save_for_backward")(*arrays)

    def output_backward(ctx: object, grad: torch.Tensor) -> tuple[object, None, None]:
        arrays = cast("Tensors", getattr(ctx, "saved_tensors"))
        cotangents: list[torch.Tensor | None] = [None] * cast("int", getattr(ctx, "outputs"))
        cotangents[cast("int", getattr(ctx, "index"))] = grad
        text = cast("str", getattr(ctx, "call"))
        grads = [
            gradient_op(cotangents, list(arrays), index, text) if kernels.differentiable(t) else None
            for index, t in enumerate(arrays)
        ]
        return grads, None, None

    return output_backward, output_setup


Strategies = list[tuple[list[object], list[object]]]


def _strategies(entry: Entry, kernels: Kernels) -> tuple[Callable[..., Strategies], Callable[..., Strategies]]:
    """The ``_output`` and ``_gradient`` ops' sharding strategies: all ``Replicate``, and a
    ``Shard`` of each axis the op's shard rule leaves alone (:func:`axis_map`)."""
    replicate, shard = _placements()

    def output_strategy(arrays: list[object], index: int, call: str) -> Strategies:
        bound = kernels.decode(entry, call)
        count = len(arrays)
        strategies: Strategies = [([replicate()], [replicate()] * count + [None, None])]
        for axes, out in axis_map(bound, _shapes(arrays)):
            strategies.append(([shard(out)], [shard(axis) for axis in axes] + [None, None]))
        return strategies

    def gradient_strategy(cotangents: list[object | None], arrays: list[object], index: int, call: str) -> Strategies:
        bound = kernels.decode(entry, call)
        count = len(arrays)

        def dy(placement: object) -> list[object]:
            return [placement if c is not None else None for c in cotangents]

        strategies: Strategies = [([replicate()], dy(replicate()) + [replicate()] * count + [None, None])]
        for axes, out in axis_map(bound, _shapes(arrays)):
            strategies.append(([shard(axes[index])], dy(shard(out)) + [shard(axis) for axis in axes] + [None, None]))
        return strategies

    return output_strategy, gradient_strategy


class DTensorEngine:
    """Calls on ``DTensor``\\ s: one ``_output`` op per result, one ``_gradient`` op per input."""

    def __init__(self, kernels: Kernels) -> None:
        self.kernels = kernels

    def forward(self, call: Call, tensors: Tensors) -> Tensors:
        kernels = self.kernels
        output_op, _ = dtensor_ops(call.entry, kernels)
        text = kernels.encode(call)
        count = len(kernels.output_meta(call, tensors))
        return tuple(output_op(list(tensors), index, text) for index in range(count))

    def pullback(self, call: Call, cotangents: OptionalTensors, tensors: Tensors) -> OptionalTensors:
        kernels = self.kernels
        _, gradient_op = dtensor_ops(call.entry, kernels)
        text = kernels.encode(call)
        return tuple(
            gradient_op(list(cotangents), list(tensors), index, text) if kernels.differentiable(t) else None
            for index, t in enumerate(tensors)
        )



def is_dtensor(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a ``DTensor`` (without importing torch.distributed for plain ones)."""
    if type(tensor).__name__ != "DTensor":
        return False
    from torch.distributed.tensor import DTensor  # noqa: PLC0415

    return isinstance(tensor, DTensor)

