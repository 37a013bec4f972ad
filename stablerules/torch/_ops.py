"""The op table of ``stablerules.torch``: one :class:`Entry` per op of the schema, read from
the op's schema row and its family's engine facts (``ENGINE_FACTS``, ``stablerules._facts``).

Nothing here is per op. The parameters, and which of them hold tensors, come from the schema
row; the batching rule (how a batch axis in front changes the op's statics) and whether a
Python scalar may stand for an array (``kron(t, 2.0)``, as NumPy's) from the family's facts,
run on torch's tensors through :class:`TorchArrayOps`. A linear op needs nothing else; an
affine one (the schema's ``constant``: ``pad`` with a non-zero constant) has as tangent map
the op with the constant made zero; a bilinear one (the schema's ``multilinear`` kind:
``kron``) has the product rule as its jvp and its second-order rule below. A tuple-returning
op (the schema's ``tuple_output``: ``split``) returns a tuple. Its DTensor sharding is also
the family's fact (``stablerules.torch._sharding``).
"""

from __future__ import annotations

import importlib
from typing import Any, cast

import torch

import stablerules as sr

from .. import _facts
from .._binding import binder
from .._schema import OPS
from . import _native
from ._adapter import TorchOp, filled
from ._call import BatchRule, Call, Engine, Entry, OptionalTensors, SecondOrderRule, TangentRule, Tensors


class TorchArrayOps:
    """The array operations a family's batching rule is written against
    (:class:`stablerules._facts.ArrayOps`), on torch tensors, through ``engine``."""

    __slots__ = ("engine",)

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def forward(self, call: _facts.OpCall, arrays: Tensors) -> Tensors:
        return self.engine.forward(cast("Call", call), arrays)

    def forward_as(self, name: str, call: _facts.OpCall, arrays: Tensors, **statics: object) -> Tensors:
        entry = ENTRIES[name]
        ordered = tuple(sorted(statics.items(), key=lambda item: entry.order[item[0]]))
        return self.engine.forward(Call(entry, cast("Call", call).arrays, ordered), arrays)

    def shape(self, x: torch.Tensor) -> tuple[int, ...]:
        return tuple(x.shape)

    def reshape(self, x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        return x.reshape(shape)

    def expand(self, x: torch.Tensor, size: int) -> torch.Tensor:
        return x.expand(size, *x.shape)

    def movedim(self, x: torch.Tensor, source: int | tuple[int, ...], destination: int | tuple[int, ...]) -> torch.Tensor:
        sources = (source,) if isinstance(source, int) else source
        return x.movedim(sources, (destination,) if isinstance(destination, int) else destination)

    def multiply(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b

    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def offsets(self, size: int, n: int, ndim: int, like: torch.Tensor) -> torch.Tensor:
        return (torch.arange(size, device=like.device) * n).reshape(size, *(1,) * (ndim - 1))

    def wrapped(self, call: _facts.OpCall, indices: torch.Tensor, n: int, axis: int | None) -> torch.Tensor:
        return _native.TORCH.wrapped(call, indices, n, axis)


def _batching(rule: _facts.BatchRule | None) -> BatchRule:
    """The family's batching rule on torch tensors (``None``: torch batches the op itself, as
    its own indexing; the rule is then never reached)."""

    def batch(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
        if rule is None:
            raise NotImplementedError(f"stablerules.torch.{call.entry.name}: no batching rule of ours")
        return rule(TorchArrayOps(engine), call, tensors, batched, size)

    return batch


def _affine_tangent(constant: str) -> TangentRule:
    """An affine op's tangent map: the op with its constant (the static ``constant``) zero."""

    def affine_tangent(engine: Engine, call: Call, tangents: OptionalTensors, tensors: Tensors) -> Tensors:
        return engine.forward(call.replace(**{constant: 0}), filled(tangents, tensors))

    return affine_tangent


# --- a bilinear op's rules beyond linearity -----------------------------------------------------------


def _bilinear_tangent(engine: Engine, call: Call, tangents: OptionalTensors, tensors: Tensors) -> Tensors:
    """``op(da, b) + op(a, db)``: the product rule of a bilinear op (kron)."""
    a, b = tensors
    da, db = tangents
    terms = []
    if da is not None:
        terms.append(engine.forward(call, (da, b))[0])
    if db is not None:
        terms.append(engine.forward(call, (a, db))[0])
    if not terms:
        terms.append(engine.forward(call, (torch.zeros_like(a), b))[0])
    return (terms[0] if len(terms) == 1 else terms[0] + terms[1],)


def _bilinear_second_order(
    engine: Engine, call: Call, cotangents: OptionalTensors, tensors: Tensors, grads: OptionalTensors
) -> tuple[OptionalTensors, OptionalTensors]:
    """The pullback ``(dy, a, b) -> (dy . conj(b), dy . conj(a))`` is linear in ``dy`` (its
    pullback there is kron's tangent map) and in each of ``b``, ``a`` (its pullback there is
    the same contraction with the other factor's gradient in place of that factor)."""
    (dy,) = cotangents
    a, b = tensors
    ga, gb = grads
    d_dy = _bilinear_tangent(engine, call, grads, tensors)[0] if (ga is not None or gb is not None) else None
    d_a = d_b = None
    if dy is not None:
        if gb is not None:
            d_a = engine.pullback(call, (dy,), (a, gb))[0]
        if ga is not None:
            d_b = engine.pullback(call, (dy,), (ga, b))[1]
    return (d_dy,), (d_a, d_b)


# --- the table --------------------------------------------------------------------------------


def _entry(name: str) -> Entry:
    """The op's entry, from its schema row and its family's engine facts. Which parameters
    hold tensors: its arrays, and the integer data that its pullback reads (take's indices: a
    linear op that is not primal-free). Other data (repeat's per-element counts) is static
    here: a result shape set by data is not supported."""
    b = binder(name)
    schema = b.schema
    facts: _facts.EngineFacts = importlib.import_module(f"stablerules.rules.{schema.family}").ENGINE_FACTS[name]
    reads_data = schema.kind == "linear" and not schema.primal_free
    arrays = frozenset(p.name for p in schema.params if p.role in ("array", "arrays", "varargs"))
    data = frozenset(p.name for p in schema.params if p.role == "data" and reads_data)
    tangent: TangentRule | None = None
    second_order: SecondOrderRule | None = None
    if schema.constant is not None:
        tangent = _affine_tangent(schema.constant[1])
    if schema.kind == "multilinear":
        tangent, second_order = _bilinear_tangent, _bilinear_second_order
    tuple_result = any(sig.tuple_output for sig in schema.signatures)
    return Entry(
        name, getattr(sr, name), arrays | data, _batching(facts.batch), tangent, second_order, tuple_result, facts.scalars, data
    )


ENTRIES: dict[str, Entry] = {op.name: _entry(op.name) for op in OPS}
"""Every op's entry, by the op's name."""

DEFINITIONS: dict[str, Any] = {name: TorchOp(entry) for name, entry in ENTRIES.items()}
"""Every op of ``stablerules.torch``: a :class:`TorchOp` over its entry (``_public`` types each
with its Protocol)."""
