"""Each ``srt`` op's forward as torch's own op, and the table of the ops' torch facts.

SPEC section 14: per op, one static choice of which implementation runs the forward and which
the pullback, declared by the op's family beside its rules (``ENGINE_FACTS``, see
``stablerules._facts``) and gathered here in :data:`FACTS`. In torch the forward is always torch's own op (so autograd, ``torch.compile``,
``vmap``, meta and fake tensors, DTensor and FSDP see ordinary torch code and inductor fuses
around it). The pullback is

- ``"torch"``: torch's own autograd, where it is already at the memory bound (views, one copy
  or one slice per input: the concatenate family, flip, roll, permutes, reshape, pad, split,
  basic indexing, and the reductions, whose pullback is an O(1) ``expand``). Such an op is
  plain torch code: no ``autograd.Function``, no custom op, nothing of ours at run time.
- ``"kernel"``: our compiled pullback kernel, where it beats torch's (repeat/tile, kron,
  broadcast_to, and the indexing ops' deterministic scatter-adds): an ``autograd.Function``
  whose forward is the torch op here and whose backward runs our kernel (eager) or the
  ``torch.library`` custom op ``stablerules::<name>_vjp`` whose fake implementation computes
  shapes symbolically (``torch.compile``, fake tensors).

Every forward reproduces ``stablerules``' results exactly: NumPy's semantics (``repeat`` with
``axis=None`` flattens, ``kron`` of any ndim, ``take`` wraps negative indices and raises
``IndexError`` naming an out-of-range one, as the core does) and NumPy's result dtypes (mixed
inputs promoted as ``np.result_type`` does, before torch's op runs). The arguments have been
bound and validated by the core's own plan for the signature before any forward here runs, so
the error messages are the core's.

Decisions where the spec is silent:
- A view op returns what torch's own op returns, views included (``permute_dims``,
  ``reshape``, ``split``, ``getindex`` share the input's memory, as ``Tensor.permute`` does;
  autograd knows them). A kernel op's result never aliases an input.
- Negative-step slices in ``getindex`` (which torch's indexing does not take) are a ``flip``
  followed by a positive-step slice: the same elements, torch's autograd for both.
- Integer indices are range-checked in eager mode (the core's check, its message); under
  ``torch.compile`` the check would be data-dependent control flow, so it is left to torch's
  own indexing kernels there (which raise on an out-of-range index).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import torch
import torch.nn.functional as F

from stablerules import Val
from stablerules._facts import Shapes, TorchFacts
from stablerules._schema import OPS

if TYPE_CHECKING:
    from ._call import Call, Tensors

Forward = Callable[["Call", "Tensors"], "Tensors"]


def _gathered() -> dict[str, TorchFacts]:
    """Every op's torch facts, as its family declares them beside its rules (``ENGINE_FACTS``)."""
    return {
        op.name: importlib.import_module(f"stablerules.rules.{op.family}").ENGINE_FACTS[op.name].torch
        for op in OPS
    }


# The adapter's table of them (tests swap entries to force a choice).
FACTS: dict[str, TorchFacts] = _gathered()


@dataclass(frozen=True)
class Implementation:
    """Which implementation one signature runs in torch, and why: settled once, when the
    signature is first seen (``sr.explain`` and ``TorchOp.implementations`` show it).

    ``forward`` names torch's op; ``pullback`` is ``"torch"`` (torch's autograd) or
    ``"kernel"`` (our compiled kernel) in eager mode; ``compiled_pullback`` the same under
    ``torch.compile`` and for fake tensors (where a kernel op's pullback is always the
    ``stablerules::<name>_vjp`` custom op: the size bound is an eager choice); ``why`` the
    op's declared reason, or the per-signature size choice."""

    op: str
    forward: str
    pullback: Literal["torch", "kernel"]
    compiled_pullback: Literal["torch", "kernel"]
    why: str

    def label(self) -> str:
        """``"<forward> / <pullback>"`` in words (the key of ``TorchOp.implementations``)."""
        return f"forward {self.forward}; pullback {_PULLBACK_WORDS[self.pullback]}"

    def describe(self) -> str:
        """The implementation in a few lines of text."""
        lines = [f"forward: {self.forward} (torch's own op)", f"pullback: {_PULLBACK_WORDS[self.pullback]}"]
        if self.compiled_pullback != self.pullback:
            lines[-1] += f" in eager mode; under torch.compile {_PULLBACK_WORDS[self.compiled_pullback]}"
        if "kernel" in (self.pullback, self.compiled_pullback):
            lines.append(f"our pullback kernel: torch.ops.stablerules.{self.op}_vjp under torch.compile")
        lines.append(f"why: {self.why}")
        return "\n".join(lines)


_PULLBACK_WORDS = {"torch": "torch's autograd", "kernel": "our compiled kernel"}


def implementation(name: str, size: int | None, shapes: Shapes, call: Call) -> Implementation:
    """The implementation of a signature of op ``name`` whose result has ``size`` elements
    (``None``: unknown) from inputs of ``shapes``: the op's declared facts, and for a kernel
    op, torch's own pullback in eager mode for a signature of one of its ``torch_forms``."""
    fact = FACTS[name]
    if fact.pullback == "torch":
        return Implementation(name, fact.forward, "torch", "torch", fact.why)
    for form in fact.torch_forms:
        if form.covers(call.static, shapes, size):
            where = "at every size measured" if form.below is None else f"below {name}'s bound of {form.below}"
            why = (
                f"a signature of {name}'s form '{form.words}': its result has {size} elements, {where}, "
                f"where torch's own backward is faster than a call of our kernel"
            )
            return Implementation(name, fact.forward, "torch", "kernel", why)
    why = fact.why
    if fact.torch_forms:
        shown = "unknown" if size is None else str(size)
        forms = "; ".join(form.words + ("" if form.below is None else f" below {form.below}") for form in fact.torch_forms)
        why += f" (result elements: {shown}; torch's own for {forms})"
    return Implementation(name, fact.forward, "kernel", "kernel", why)


class Revalidate(Exception):
    """Raised by a forward for inputs torch's op would take but the core refuses (a view
    op's signature is not keyed by shapes): the caller runs the core's check, which raises."""


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _v(call: Call, name: str, default: object = None) -> object:
    value = call.static(name, default)
    return value.value if isinstance(value, Val) else value


def _ints(value: object) -> tuple[int, ...]:
    return (value,) if isinstance(value, int) else tuple(cast("tuple[int, ...]", value))


_NUMPY: dict[torch.dtype, np.dtype[np.generic]] = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}
_TORCH = {value: key for key, value in _NUMPY.items()}


# Result dtypes as NumPy gives them, tabulated once at import: forwards run under dynamo's
# tracing too, where NumPy's dtype functions cannot be called.
_PAIRS: dict[tuple[torch.dtype, torch.dtype], torch.dtype] = {}
for _a, _na in _NUMPY.items():
    for _b, _nb in _NUMPY.items():
        _PAIRS[_a, _b] = _TORCH[np.result_type(_na, _nb)]
_SCALARS: dict[tuple[torch.dtype, type], torch.dtype] = {}
for _a, _na in _NUMPY.items():
    for _kind, _example in ((bool, True), (int, 1), (float, 1.0), (complex, 1j)):
        # np.kron makes a Python scalar an array (``asanyarray``): an int is int64, not "weak"
        _SCALARS[_a, _kind] = _TORCH[np.result_type(_na, np.asarray(_example).dtype)]
_SUMS: dict[torch.dtype, torch.dtype] = {_a: _TORCH.get(np.sum(np.zeros(1, _na)).dtype, _a) for _a, _na in _NUMPY.items()}


def _result_dtype(dtypes: tuple[torch.dtype, ...]) -> torch.dtype:
    """NumPy's result dtype of arrays of these dtypes (torch's promotion for bfloat16)."""
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = _PAIRS.get((result, dtype)) or torch.promote_types(result, dtype)
    return result


def _promoted(tensors: Tensors) -> Tensors:
    first = tensors[0].dtype
    for tensor in tensors:
        if tensor.dtype != first:
            dtype = _result_dtype(tuple(t.dtype for t in tensors))
            return tuple(t.to(dtype) for t in tensors)
    return tensors


def _scalar_dtype(dtype: torch.dtype, scalar: type) -> torch.dtype:
    """``np.kron``'s result dtype for an array of ``dtype`` and a Python scalar."""
    found = _SCALARS.get((dtype, scalar))
    if found is not None:
        return found
    return torch.promote_types(dtype, {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}[scalar])


def _axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


# ---------------------------------------------------------------------------------------------
# the forwards, by op
# ---------------------------------------------------------------------------------------------


def _repeat(call: Call, tensors: Tensors) -> Tensors:
    """``repeat_interleave`` per axis with a count (faster than one copy of an ``expand``, and
    than ``F.interpolate``, for a nearest-neighbour upsample), then ``Tensor.repeat``."""
    (x,) = tensors
    repeats = _v(call, "repeats")
    if repeats is None:  # Julia's inner/outer form
        return (_julia(x, _ints(_v(call, "inner") or ()), _ints(_v(call, "outer") or ())),)
    # Per-element counts (a list or tuple, static here) as the tensor repeat_interleave takes.
    times = repeats if isinstance(repeats, int) else torch.tensor(repeats, dtype=torch.int64, device=x.device)
    along = _v(call, "axis")
    if along is None:
        return (x.reshape(-1).repeat_interleave(times),)
    return (x.repeat_interleave(times, dim=cast("int", along)),)


def _julia(x: torch.Tensor, inner: tuple[int, ...], outer: tuple[int, ...]) -> torch.Tensor:
    """Julia's ``repeat(x; inner, outer)``. Inner counts alone: ``repeat_interleave`` per axis
    (as fast as an ``expand`` for one or two axes, and faster for a nearest upsample). Inner
    and outer counts together: one ``expand`` of each axis as ``(outer, n, inner)`` and one
    ``reshape``, a single copy of the result (per-axis ``repeat_interleave`` and then
    ``Tensor.repeat`` copy it once per step); exact either way, and plain torch ops that
    ``torch.compile`` traces with symbolic sizes."""
    n = max(x.ndim, len(inner), len(outer))
    y = x.reshape(*x.shape, *(1,) * (n - x.ndim)) if n > x.ndim else x
    repeats_inner = any(count != 1 for count in inner)
    repeats_outer = any(count != 1 for count in outer)
    if repeats_inner and repeats_outer:
        inner = inner + (1,) * (n - len(inner))
        outer = outer + (1,) * (n - len(outer))
        shape = y.shape
        spread = y.reshape([k for m in shape for k in (1, m, 1)])
        wide = spread.expand([k for m, i, o in zip(shape, inner, outer) for k in (o, m, i)])
        return wide.reshape([m * i * o for m, i, o in zip(shape, inner, outer)])
    for axis, count in enumerate(inner):
        if count != 1:
            y = y.repeat_interleave(count, dim=axis)
    if repeats_outer:
        y = y.repeat(*outer, *(1,) * (n - len(outer)))
    return y.clone() if y is x or y._base is x else y


def _tile(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    y = x.tile(_ints(_v(call, "reps")))
    return (y.clone() if y is x or y._base is x else y,)


def _concatenate(call: Call, tensors: Tensors) -> Tensors:
    tensors = _promoted(tensors)
    axis = _v(call, "axis", Val(0))
    if axis is None:
        return (torch.cat([t.reshape(-1) for t in tensors]),)
    return (torch.cat(tensors, dim=cast("int", axis)),)


def _stack(call: Call, tensors: Tensors) -> Tensors:
    return (torch.stack(_promoted(tensors), dim=cast("int", _v(call, "axis", Val(0)))),)


def _hstack(call: Call, tensors: Tensors) -> Tensors:
    return (torch.hstack(_promoted(tensors)),)


def _vstack(call: Call, tensors: Tensors) -> Tensors:
    return (torch.vstack(_promoted(tensors)),)


def _cat(call: Call, tensors: Tensors) -> Tensors:
    """Julia's ``cat``: one dim concatenates (trailing axes of 1 added as needed), several
    place the arrays block-diagonally (zeros elsewhere)."""
    tensors = _promoted(tensors)
    dims = _ints(_v(call, "dims"))
    ndim = max(max(t.ndim for t in tensors), max(dims) + 1)
    padded = [t.reshape(*t.shape, *(1,) * (ndim - t.ndim)) if t.ndim < ndim else t for t in tensors]
    if len(dims) == 1:
        return (torch.cat(padded, dim=dims[0]),)
    shape = list(padded[0].shape)
    for dim in dims:
        shape[dim] = sum(int(p.shape[dim]) for p in padded)
    offsets = [0] * ndim
    total: torch.Tensor | None = None
    for part in padded:
        widths: list[int] = []
        for dim in range(ndim - 1, -1, -1):
            if dim in dims:
                widths += [offsets[dim], shape[dim] - offsets[dim] - int(part.shape[dim])]
            else:
                widths += [0, 0]
        block = F.pad(part, widths)
        total = block if total is None else total + block
        for dim in dims:
            offsets[dim] += int(part.shape[dim])
    assert total is not None
    return (total,)


def _kron(call: Call, tensors: Tensors) -> Tensors:
    if len(tensors) == 1:  # a Python scalar for one factor: kron scales
        (t,) = tensors
        scalar = call.static("b") if call.static("a") is None else call.static("a")
        dtype = _scalar_dtype(t.dtype, type(scalar))
        return ((t.to(dtype) * cast("complex", scalar)).to(dtype),)
    a, b = _promoted(tensors)
    if not torch.compiler.is_compiling():
        return (torch.kron(a, b),)
    # torch.kron's own composition, written out: it specializes symbolic sizes under
    # torch.compile(dynamic=True); this one does not (the same products, the same values).
    ndim = max(a.ndim, b.ndim)
    a = a.reshape(*(1,) * (ndim - a.ndim), *a.shape)
    b = b.reshape(*(1,) * (ndim - b.ndim), *b.shape)
    spread_a = a.reshape([n for m in a.shape for n in (m, 1)])
    spread_b = b.reshape([n for m in b.shape for n in (1, m)])
    return ((spread_a * spread_b).reshape([m * n for m, n in zip(a.shape, b.shape)]),)


def _flip(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    axis = _v(call, "axis")
    dims = tuple(range(x.ndim)) if axis is None else _ints(axis)
    return (torch.flip(x, dims),)


def _roll(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    shift = _ints(_v(call, "shift"))
    axis = _v(call, "axis")
    if axis is None:  # NumPy rolls the flattened array by each shift in turn: by their sum
        return (torch.roll(x, sum(shift)),)
    axes = _ints(axis)
    if len(shift) == 1 and len(axes) > 1:
        shift = shift * len(axes)
    elif len(axes) == 1 and len(shift) > 1:
        axes = axes * len(shift)
    return (torch.roll(x, shift, axes),)


def _permute_dims(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    axes = _v(call, "axes")
    order = tuple(range(x.ndim - 1, -1, -1)) if axes is None else _ints(axes)
    return (x.permute(order),)


def _reshape(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    return (x.reshape(_ints(_v(call, "shape"))),)


def _broadcast_to(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    return (x.expand(_ints(_v(call, "shape"))),)


def _reduction_dims(x: torch.Tensor, call: Call) -> tuple[int, ...]:
    axis = _v(call, "axis")
    return tuple(range(x.ndim)) if axis is None else _ints(axis)


def _sum(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    keep = bool(_v(call, "keepdims", False))
    dtype = _SUMS.get(x.dtype, x.dtype)
    dims = _reduction_dims(x, call)
    if dtype == torch.uint64:  # torch sums no uint64: the same bits through int64
        return (torch.sum(x.to(torch.int64), dim=dims, keepdim=keep).to(dtype),)
    return (torch.sum(x, dim=dims, keepdim=keep, dtype=dtype if dtype != x.dtype else None),)


def _mean(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    keep = bool(_v(call, "keepdims", False))
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(torch.float64)  # NumPy's mean of integers is float64
    dims = _reduction_dims(x, call)
    count = 1
    for dim in dims:
        count *= int(x.shape[dim])
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else None
    total = torch.sum(x, dim=dims, keepdim=keep, dtype=wide)
    return ((total / count).to(x.dtype),)  # NumPy's sum, then one division


def _pad(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    widths = _v(call, "pad_width")
    flat = _ints(widths)
    if len(flat) == 1:  # one width for every side of every axis (the core's rule)
        flat = flat * (2 * x.ndim)
    value = call.static("constant_values", 0)
    if len(flat) != 2 * x.ndim:
        raise Revalidate(f"pad_width {flat} for {x.ndim} axes")
    pads: list[int] = []
    for dim in range(x.ndim - 1, -1, -1):
        pads += [flat[2 * dim], flat[2 * dim + 1]]
    if not any(pads):
        return (x.clone(),)
    if x.is_complex() or isinstance(value, complex):
        real = F.pad(x.real if x.is_complex() else x, pads, value=complex(cast("complex", value)).real)
        imag = F.pad(x.imag if x.is_complex() else torch.zeros_like(x), pads, value=complex(cast("complex", value)).imag)
        return (torch.complex(real, imag),)
    if not x.is_floating_point():
        value = bool(value) if x.dtype == torch.bool else int(cast("float", value))
    return (F.pad(x, pads, value=cast("float", value)),)


def _split(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    sections = _v(call, "indices_or_sections")
    axis = cast("int", _v(call, "axis", Val(0)))
    if isinstance(sections, int):
        if x.ndim == 0 or sections <= 0 or x.shape[axis] % sections:
            raise Revalidate(f"{sections} sections of shape {tuple(x.shape)} along axis {axis}")
        return tuple(torch.tensor_split(x, sections, dim=axis))
    return tuple(torch.tensor_split(x, list(cast("tuple[int, ...]", sections)), dim=axis))


def _getindex(call: Call, tensors: Tensors) -> Tensors:
    (x,) = tensors
    index = call.static("index")
    entries: tuple[object, ...] = getattr(index, "entries")
    consuming = sum(1 for entry in entries if entry is not None and entry is not Ellipsis)
    axis = 0
    out: list[object] = []
    flips: list[int] = []
    for entry in entries:
        if entry is Ellipsis:
            out.append(entry)
            axis += x.ndim - consuming
            continue
        if entry is None:
            out.append(None)
            continue
        if isinstance(entry, slice) and entry.step is not None and entry.step < 0:
            n = int(x.shape[axis])
            start, stop, step = entry.indices(n)
            count = len(range(start, stop, step))
            first = n - 1 - start
            flips.append(axis)
            out.append(slice(first, first + count * -step, -step))
        else:
            out.append(entry)
        axis += 1
    if flips:
        x = x.flip(flips)
    return (x[cast("tuple[int | slice | None, ...]", tuple(out))],)


def _indices(call: Call, indices: torch.Tensor, n: int, axis: int | None) -> torch.Tensor:
    """``indices`` with negative entries wrapped; in eager mode on the CPU range-checked by
    the core (its ``IndexError`` naming the index, the axis and its length)."""
    if indices.is_cpu and type(indices) is torch.Tensor and not torch.compiler.is_compiling():
        if indices.numel() == 0 or indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
            return _core_indices(call, indices, n, axis)
        low, high = (int(v) for v in torch.aminmax(indices))
        if low < -n or high >= n:
            return _core_indices(call, indices, n, axis)  # raises the core's IndexError
        if low >= 0:
            return indices if indices.dtype == torch.int64 else indices.to(torch.int64)
    indices = indices.to(torch.int64)
    return torch.where(indices < 0, indices + n, indices)


def _core_indices(call: Call, indices: torch.Tensor, n: int, axis: int | None) -> torch.Tensor:
    """The core's check and wrapping (its messages: an empty axis, an out-of-range index)."""
    from stablerules.rules.indexing import _wrapped_indices  # noqa: PLC0415 - the core's check

    wrapped = _wrapped_indices(call.entry.name, indices.numpy(), n, axis, copy=False)
    return torch.from_numpy(np.asarray(wrapped)).to(torch.int64)


def _take(call: Call, tensors: Tensors) -> Tensors:
    x, indices = tensors
    axis = _v(call, "axis")
    if axis is None:
        wrapped = _indices(call, indices, int(x.numel()), None)
        return (x.reshape(-1)[wrapped.reshape(-1)].reshape(indices.shape),)
    a = _axis(cast("int", axis), x.ndim)
    wrapped = _indices(call, indices, int(x.shape[a]), a)
    y = x.index_select(a, wrapped.reshape(-1))
    return (y.reshape(*x.shape[:a], *indices.shape, *x.shape[a + 1 :]),)


def _take_along_axis(call: Call, tensors: Tensors) -> Tensors:
    x, indices = tensors
    axis = _v(call, "axis")
    if axis is None:
        x = x.reshape(-1)
        a = 0
    else:
        a = _axis(cast("int", axis), x.ndim)
    wrapped = _indices(call, indices, int(x.shape[a]), a if axis is not None else None)
    # NumPy broadcasts the other axes; torch.gather does not (and torch.take_along_dim's
    # broadcasting specializes symbolic sizes): expanded only where the extents differ.
    x_shape = list(x.shape)
    i_shape = list(wrapped.shape)
    for d in range(x.ndim):
        if d != a and x_shape[d] != i_shape[d]:
            x_shape[d] = i_shape[d] = max(x_shape[d], i_shape[d])
    if x_shape != list(x.shape):
        x = x.expand(x_shape[:a] + [-1] + x_shape[a + 1 :])
    if i_shape != list(wrapped.shape):
        wrapped = wrapped.expand(i_shape[:a] + [-1] + i_shape[a + 1 :])
    return (torch.gather(x, a, wrapped),)


def _index_add(call: Call, tensors: Tensors) -> Tensors:
    x, indices, values = tensors
    dtype = _result_dtype((x.dtype, values.dtype)) if x.dtype != values.dtype else x.dtype
    a = _axis(cast("int", _v(call, "axis", Val(0))), x.ndim)
    wrapped = _indices(call, indices, int(x.shape[a]), a).reshape(-1)
    target = (*x.shape[:a], wrapped.numel(), *x.shape[a + 1 :])
    if tuple(values.shape) != target:  # values broadcast to x's shape with the axis replaced (the core's rule)
        values = values.expand(target)
    return (torch.index_add(x.to(dtype), a, wrapped, values.to(dtype)),)


FORWARDS: dict[str, Forward] = {
    "repeat": _repeat,
    "tile": _tile,
    "concatenate": _concatenate,
    "stack": _stack,
    "hstack": _hstack,
    "vstack": _vstack,
    "cat": _cat,
    "kron": _kron,
    "flip": _flip,
    "roll": _roll,
    "permute_dims": _permute_dims,
    "transpose": _permute_dims,
    "reshape": _reshape,
    "broadcast_to": _broadcast_to,
    "sum": _sum,
    "mean": _mean,
    "pad": _pad,
    "split": _split,
    "getindex": _getindex,
    "take": _take,
    "take_along_axis": _take_along_axis,
    "index_add": _index_add,
}


# ---------------------------------------------------------------------------------------------
# per-signature eager forwards: the statics read once
# ---------------------------------------------------------------------------------------------

Prepared = Callable[["Tensors"], "Tensors"]


def prepare(call: Call, tensors: Tensors) -> Prepared:
    """The op's eager forward for one signature: ``FORWARDS[name]`` with the call's statics
    read once (a signature fixes them), torch's op called directly. The hot ops have their
    own (a DenseNet block's 25-input concatenation, an upsample's ``repeat``, a Kalman
    filter's small ``kron``); the others close over their ``FORWARDS`` entry. A view op's
    signature does not fix its tensors' dtypes (its key leaves them out): its forward checks
    them on every call, as ``FORWARDS`` does; a kernel op's signature fixes them. Used in
    eager mode only: under ``torch.compile`` the calls go through ``FORWARDS``."""
    maker = _PREPARERS.get(call.entry.name)
    prepared = maker(call, tensors) if maker is not None else None
    if prepared is not None:
        return prepared
    forward = FORWARDS[call.entry.name]
    return lambda tensors: forward(call, tensors)


def _joined(join: Callable[..., torch.Tensor], axis: int) -> Prepared:
    def run(tensors: Tensors) -> Tensors:
        first = tensors[0].dtype
        for tensor in tensors:
            if tensor.dtype is not first:  # mixed dtypes: NumPy's result dtype first
                return (join(_promoted(tensors), axis),)
        return (join(tensors, axis),)

    return run


def _prepare_concatenate(call: Call, tensors: Tensors) -> Prepared | None:
    axis = _v(call, "axis", Val(0))
    return _joined(torch.cat, axis) if type(axis) is int else None


def _prepare_stack(call: Call, tensors: Tensors) -> Prepared | None:
    axis = _v(call, "axis", Val(0))
    return _joined(torch.stack, axis) if type(axis) is int else None


def _prepare_repeat(call: Call, tensors: Tensors) -> Prepared | None:
    times, axis = _v(call, "repeats"), _v(call, "axis")
    if times is None:  # Julia's inner/outer form
        inner, outer = _ints(_v(call, "inner") or ()), _ints(_v(call, "outer") or ())
        return lambda tensors: (_julia(tensors[0], inner, outer),)
    if type(times) is not int:
        return None
    if axis is None:
        return lambda tensors: (tensors[0].reshape(-1).repeat_interleave(times),)
    dim = cast("int", axis)
    return lambda tensors: (tensors[0].repeat_interleave(times, dim=dim),)


def _prepare_kron(call: Call, tensors: Tensors) -> Prepared | None:
    if len(tensors) != 2 or tensors[0].dtype != tensors[1].dtype:
        return None  # a scalar factor, or mixed dtypes (promoted per call by FORWARDS)
    kron = torch.kron
    return lambda tensors: (kron(tensors[0], tensors[1]),)


_PREPARERS: dict[str, Callable[[Call, Tensors], Prepared | None]] = {
    "concatenate": _prepare_concatenate,
    "stack": _prepare_stack,
    "repeat": _prepare_repeat,
    "kron": _prepare_kron,
}
