"""The op table of ``stablerules.torch``: one :class:`Entry` per op, with its batching rule.

A new op is one ``_entry(...)`` line and its place in :data:`ENTRIES` (its public
``TorchOp``, typed with its signature Protocol, is generated from the op schema into
``_public.py`` by ``tools/generate.py``, and re-exported). The entry says how a batch axis in front
changes the op's statics (most ops: shift an axis by one, ``shift_axes("axis")``); its
parameters, and which of them hold tensors, come from the op's schema row. A linear op
needs nothing else; kron, the one bilinear op, brings its jvp and its second-order rule. An
affine op (``pad`` with a non-zero constant) must give a ``tangent`` rule (its tangent map is
the op with the constant zeroed); a tuple-returning op (``split``) sets ``tuple_result``; an
op that takes a Python scalar for an array, as NumPy's does (``kron(t, 2.0)``), sets
``scalars`` (the scalar is then a static: no gradient, and the call is linear in the other
factor). Its DTensor sharding needs no line: an op that ``stablerules.torch._sharding`` does
not know is replicated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch

import stablerules as sr
from stablerules import Val

from .. import _facts
from .._binding import binder
from . import _native, _signatures
from ._adapter import TorchOp, filled
from ._call import BatchRule, Call, Engine, Entry, OptionalTensors, SecondOrderRule, TangentRule, Tensors


def _shift(axis: int) -> int:
    """An axis of the unbatched op as an axis of the batched one (batch axis in front)."""
    return axis + 1 if axis >= 0 else axis


def _expand(tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    """Every tensor with the batch axis in front (an unbatched one broadcast: a view)."""
    return tuple(t if b else t.expand(size, *t.shape) for t, b in zip(tensors, batched))


def _flatten(tensors: Tensors, size: int) -> Tensors:
    return tuple(t.reshape(size, math.prod(t.shape[1:])) for t in tensors)


# --- batching rules ---------------------------------------------------------------------------


def _batch_repeat(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    (x,) = tensors
    if call.static("repeats") is None:  # Julia's form: a count of 1 for the batch axis
        changes: dict[str, object] = {
            name: Val((1, *_facts.counts(call.static(name)))) for name in ("inner", "outer") if call.static(name) is not None
        }
        return engine.forward(call.replace(None, **changes), (x,))
    axis = _facts.value(call.static("axis"))
    if axis is None:  # NumPy repeats the flattened array: flatten each sample
        return engine.forward(call.replace(axis=Val(1)), _flatten((x,), size))
    return engine.forward(call.replace(axis=Val(_shift(axis))), (x,))  # type: ignore[arg-type]


def _batch_tile(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    (x,) = tensors
    reps = _facts.counts(call.static("reps"))
    ndim = x.ndim - 1
    if len(reps) > ndim:  # NumPy's new leading axes go after the batch axis
        x = x.reshape(size, *(1,) * (len(reps) - ndim), *x.shape[1:])
        return engine.forward(call.replace(reps=Val((1, *reps))), (x,))
    return engine.forward(call.replace(reps=Val((1,) * (ndim - len(reps) + 1) + reps)), (x,))


def shift_axes(name: str, default: object = None, *, none: str = "all") -> BatchRule:
    """The batching rule of an op whose static ``name`` is an axis or a tuple of axes (int,
    negative allowed): each shifted past the batch axis. ``None`` (or an absent ``name``
    with ``default`` None) means every axis (``none="all"``: flip, sum, mean) or the
    flattened array (``none="flatten"``: concatenate; ``"flatten-reshape"``: roll, whose
    result has the input's shape)."""

    def shift_axes_rule(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
        tensors = _expand(tensors, batched, size)
        axis = _facts.value(call.static(name, default))
        if axis is None:
            if none.startswith("flatten"):
                outputs = engine.forward(call.replace(None, **{name: Val(1)}), _flatten(tensors, size))
                if none == "flatten":
                    return outputs
                return tuple(output.reshape(tensors[0].shape) for output in outputs)
            shifted: object = Val(tuple(range(1, tensors[0].ndim)))
        elif isinstance(axis, int):
            shifted = Val(_shift(axis))
        else:
            shifted = Val(tuple(_shift(a) for a in cast("tuple[int, ...]", axis)))
        return engine.forward(call.replace(None, **{name: shifted}), tensors)

    return shift_axes_rule


def _batch_hstack(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    tensors = tuple(t.reshape(size, 1) if t.ndim == 1 else t for t in _expand(tensors, batched, size))
    axis = 1 if tensors[0].ndim == 2 else 2  # NumPy: axis 0 for 1-D samples, else 1
    return engine.forward(Call(CONCATENATE, call.arrays, (("axis", Val(axis)),)), tensors)


def _batch_vstack(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    tensors = tuple(t.reshape(size, 1, *(t.shape[1:] or (1,))) if t.ndim <= 2 else t for t in _expand(tensors, batched, size))
    return engine.forward(Call(CONCATENATE, call.arrays, (("axis", Val(1)),)), tensors)


def _batch_cat(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    dims = _facts.value(call.static("dims"))
    shifted = Val(dims + 1) if isinstance(dims, int) else Val(tuple(d + 1 for d in cast("tuple[int, ...]", dims)))
    return engine.forward(call.replace(dims=shifted), _expand(tensors, batched, size))


def _batch_kron(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    if len(tensors) == 1:  # a Python scalar for one factor: kron scales, the batch axis stays in front
        return engine.forward(call, tensors)
    a, b = tensors
    a_ndim, b_ndim = a.ndim - batched[0], b.ndim - batched[1]
    ndim = max(a_ndim, b_ndim)
    # Both samples padded to one ndim (kron pads the shorter with leading 1s), batch in front.
    a = a.reshape(a.shape[0] if batched[0] else 1, *(1,) * (ndim - a_ndim), *a.shape[batched[0] :])
    b = b.reshape(b.shape[0] if batched[1] else 1, *(1,) * (ndim - b_ndim), *b.shape[batched[1] :])
    if not (batched[0] and batched[1]):
        return engine.forward(call, (a, b))  # kron of (B, ...) and (1, ...): the batch comes out in front
    # Both batched: kron would pair every a with every b; the per-sample outer product instead
    # (torch's own ops, differentiable the same way).
    spread_a = a.reshape(size, *(n for m in a.shape[1:] for n in (m, 1)))
    spread_b = b.reshape(size, *(n for m in b.shape[1:] for n in (1, m)))
    return ((spread_a * spread_b).reshape(size, *(m * n for m, n in zip(a.shape[1:], b.shape[1:]))),)


def _batch_permute(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    """permute_dims and transpose: the batch axis stays in front, the others permuted behind it
    (transpose's ``axes=None`` is the reversed order)."""
    (x,) = tensors
    axes = _facts.value(call.static("axes"))
    order = tuple(range(x.ndim - 2, -1, -1)) if axes is None else cast("tuple[int, ...]", axes)
    return engine.forward(call.replace(axes=Val((0, *(_shift(axis) for axis in order)))), (x,))


def _batch_reshape(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    (x,) = tensors
    shape = _facts.counts(call.static("shape"))
    return engine.forward(call.replace(shape=Val((size, *shape))), (x,))


def _batch_broadcast_to(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    (x,) = tensors
    shape = _facts.counts(call.static("shape"))
    # NumPy aligns trailing axes: each sample padded with leading 1s first, batch in front.
    x = x.reshape(size, *(1,) * (len(shape) - (x.ndim - 1)), *x.shape[1:])
    return engine.forward(call.replace(shape=Val((size, *shape))), (x,))


def _batch_pad(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    (x,) = tensors
    widths = _facts.value(call.static("pad_width"))
    every = (widths,) * 2 * (x.ndim - 1) if isinstance(widths, int) else cast("tuple[int, ...]", widths)
    return engine.forward(call.replace(pad_width=Val((0, 0, *every))), (x,))


def _pad_tangent(engine: Engine, call: Call, tangents: OptionalTensors, tensors: Tensors) -> Tensors:
    """pad is affine in ``x``: its tangent map is the op with the constant made zero."""
    return engine.forward(call.replace(constant_values=0), filled(tangents, tensors))


def _offsets(size: int, n: int, ndim: int, device: torch.device) -> torch.Tensor:
    """Each sample's offset into its batch flattened with an axis of extent ``n``."""
    return (torch.arange(size, device=device) * n).reshape(size, *(1,) * (ndim - 1))


def _batch_take(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    """Unbatched indices: the same take with the axis shifted (each sample flattened for
    ``axis=None``). Batched indices: one take on the batch flattened into the axis, each
    sample's indices offset into its own block (range-checked and wrapped first)."""
    x, indices = tensors
    axis = _facts.value(call.static("axis"))
    if not batched[1]:
        if axis is None:
            return engine.forward(call.replace(axis=Val(1)), (x.reshape(size, -1), indices))
        return engine.forward(call.replace(axis=Val(_shift(cast("int", axis)))), (x, indices))
    x = x if batched[0] else x.expand(size, *x.shape)
    if axis is None:
        x = x.reshape(size, -1)
        a = 1
    else:
        a = _shift(cast("int", axis)) if cast("int", axis) >= 0 else cast("int", axis) + x.ndim
    n = int(x.shape[a])
    wrapped = _native._indices(call, indices, n, None if axis is None else a - 1)
    moved = x.movedim(a, 1)
    flat = moved.reshape(size * n, *moved.shape[2:])
    y = engine.forward(call.replace(axis=Val(0)), (flat, wrapped + _offsets(size, n, indices.ndim, x.device)))[0]
    k = indices.ndim - 1
    return (y.movedim(tuple(range(1, 1 + k)), tuple(range(a, a + k))),)


def _batch_take_along_axis(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    x, indices = _expand(tensors, batched, size)
    axis = _facts.value(call.static("axis"))
    if axis is None:
        return engine.forward(call.replace(axis=Val(1)), (x.reshape(size, -1), indices))
    return engine.forward(call.replace(axis=Val(_shift(cast("int", axis)))), (x, indices))


def _batch_index_add(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    """Unbatched indices: the axis shifted. Batched ones: one index_add on the batch
    flattened into the axis, each sample's indices offset into its own block."""
    x, indices, values = tensors
    axis = cast("int", _facts.value(call.static("axis", Val(0))))
    if not batched[1]:
        x = x if batched[0] else x.expand(size, *x.shape)
        values = values if batched[2] else values.expand(size, *values.shape)
        return engine.forward(call.replace(axis=Val(_shift(axis))), (x, indices, values))
    x = x if batched[0] else x.expand(size, *x.shape)
    values = values if batched[2] else values.expand(size, *values.shape)
    a = _shift(axis) if axis >= 0 else axis + x.ndim
    n, k = int(x.shape[a]), int(indices.shape[1])
    wrapped = _native._indices(call, indices, n, a - 1)
    moved_x, moved_v = x.movedim(a, 1), values.movedim(a, 1)
    flat_x = moved_x.reshape(size * n, *moved_x.shape[2:])
    flat_v = moved_v.reshape(size * k, *moved_v.shape[2:])
    flat_i = (wrapped + _offsets(size, n, 2, x.device)).reshape(-1)
    y = engine.forward(call.replace(axis=Val(0)), (flat_x, flat_i, flat_v))[0]
    return (y.reshape(moved_x.shape).movedim(1, a),)


def _no_batch(engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int) -> Tensors:
    """getindex is torch's own indexing (torch batches it); this rule is never reached."""
    raise NotImplementedError(f"stablerules.torch.{call.entry.name}: no batching rule of ours")


# --- kron's rules beyond linearity -----------------------------------------------------------


def _kron_tangent(engine: Engine, call: Call, tangents: OptionalTensors, tensors: Tensors) -> Tensors:
    """kron(da, b) + kron(a, db): kron is bilinear."""
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


def _kron_second_order(
    engine: Engine, call: Call, cotangents: OptionalTensors, tensors: Tensors, grads: OptionalTensors
) -> tuple[OptionalTensors, OptionalTensors]:
    """The pullback ``(dy, a, b) -> (dy . conj(b), dy . conj(a))`` is linear in ``dy`` (its
    pullback there is kron's tangent map) and in each of ``b``, ``a`` (its pullback there is
    the same contraction with the other factor's gradient in place of that factor)."""
    (dy,) = cotangents
    a, b = tensors
    ga, gb = grads
    d_dy = _kron_tangent(engine, call, grads, tensors)[0] if (ga is not None or gb is not None) else None
    d_a = d_b = None
    if dy is not None:
        if gb is not None:
            d_a = engine.pullback(call, (dy,), (a, gb))[0]
        if ga is not None:
            d_b = engine.pullback(call, (dy,), (ga, b))[1]
    return (d_dy,), (d_a, d_b)


# --- the table --------------------------------------------------------------------------------


def _entry(
    op: object,
    batch: BatchRule,
    tangent: TangentRule | None = None,
    second_order: SecondOrderRule | None = None,
    tuple_result: bool = False,
    scalars: bool = False,
) -> Entry:
    """The op's entry; which parameters hold tensors comes from its schema row: its
    arrays, and the integer data that its pullback reads (take's indices: a linear op that
    is not primal-free). Other data (repeat's per-element counts) is static here: a result
    shape set by data is not supported."""
    name: str = getattr(op, "name")
    schema = binder(name).schema
    reads_data = schema.kind == "linear" and not schema.primal_free
    arrays = frozenset(p.name for p in schema.params if p.role in ("array", "arrays", "varargs"))
    data = frozenset(p.name for p in schema.params if p.role == "data" and reads_data)
    return Entry(name, op, arrays | data, batch, tangent, second_order, tuple_result, scalars, data)  # type: ignore[arg-type]


REPEAT = _entry(sr.repeat, _batch_repeat)
TILE = _entry(sr.tile, _batch_tile)
CONCATENATE = _entry(sr.concatenate, shift_axes("axis", Val(0), none="flatten"))
STACK = _entry(sr.stack, shift_axes("axis", Val(0)))
HSTACK = _entry(sr.hstack, _batch_hstack)
VSTACK = _entry(sr.vstack, _batch_vstack)
CAT = _entry(sr.cat, _batch_cat)
KRON = _entry(sr.kron, _batch_kron, _kron_tangent, _kron_second_order, scalars=True)
FLIP = _entry(sr.flip, shift_axes("axis"))
ROLL = _entry(sr.roll, shift_axes("axis", none="flatten-reshape"))
PERMUTE_DIMS = _entry(sr.permute_dims, _batch_permute)
TRANSPOSE = _entry(sr.transpose, _batch_permute)
RESHAPE = _entry(sr.reshape, _batch_reshape)
BROADCAST_TO = _entry(sr.broadcast_to, _batch_broadcast_to)
SUM = _entry(sr.sum, shift_axes("axis"))
MEAN = _entry(sr.mean, shift_axes("axis"))
PAD = _entry(sr.pad, _batch_pad, _pad_tangent)
GETINDEX = _entry(sr.getindex, _no_batch)
TAKE = _entry(sr.take, _batch_take)
TAKE_ALONG_AXIS = _entry(sr.take_along_axis, _batch_take_along_axis)
INDEX_ADD = _entry(sr.index_add, _batch_index_add)
SPLIT = _entry(sr.split, shift_axes("axis", Val(0)), tuple_result=True)

ENTRIES: dict[str, Entry] = {
    entry.name: entry
    for entry in (
        REPEAT,
        TILE,
        CONCATENATE,
        STACK,
        HSTACK,
        VSTACK,
        CAT,
        KRON,
        FLIP,
        ROLL,
        PERMUTE_DIMS,
        TRANSPOSE,
        RESHAPE,
        BROADCAST_TO,
        SUM,
        MEAN,
        PAD,
        GETINDEX,
        TAKE,
        TAKE_ALONG_AXIS,
        INDEX_ADD,
        SPLIT,
    )
}
"""Every op's entry, by the op's name (``_public`` makes each a typed ``TorchOp``)."""
