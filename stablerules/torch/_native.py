"""Torch's array functions for the ops' forwards (:class:`TorchNamespace`), and the table of
the ops' torch facts.

SPEC section 14: per op, one static choice of which implementation runs the forward and which
the pullback, declared by the op's family beside its rules (``ENGINE_FACTS``, see
``stablerules._facts``) and gathered here in :data:`FACTS`. In torch the forward is always torch's own op (so autograd, ``torch.compile``,
``vmap``, meta and fake tensors, DTensor and FSDP see ordinary torch code and inductor fuses
around it): each family writes its ops' forwards once, against the NumPy-named functions of
``stablerules._facts.Namespace``, and :data:`TORCH` lends them torch's ops; nothing here
names an op. The pullback is

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import numpy as np
import torch
import torch.nn.functional as F

from stablerules._facts import EngineFacts, OpCall, Shapes, TorchFacts
from stablerules._schema import OPS

if TYPE_CHECKING:
    from ._call import Call, Tensors

Forward = Callable[["Call", "Tensors"], "Tensors"]


_FAMILY_FACTS: dict[str, EngineFacts] = {
    op.name: importlib.import_module(f"stablerules.rules.{op.family}").ENGINE_FACTS[op.name] for op in OPS
}
"""Every op's engine facts, as its family declares them beside its rules (``ENGINE_FACTS``)."""

# The adapter's table of their torch facts (tests swap entries to force a choice).
FACTS: dict[str, TorchFacts] = {name: facts.torch for name, facts in _FAMILY_FACTS.items()}


@dataclass(frozen=True)
class Implementation:
    """Which implementation one signature runs in torch, and why: settled once, when the
    signature is first seen (``sr.explain`` and ``TorchOp.implementations`` show it).

    ``forward`` names torch's op; ``pullback`` is ``"torch"`` (torch's autograd) or
    ``"kernel"`` (our compiled kernel) in eager mode; ``compiled_pullback`` the same under
    ``torch.compile`` and for fake tensors, decided by ``TorchFacts.compiled_below`` (torch's
    autograd, fused by inductor, below it; our ``stablerules::<name>_vjp`` custom op at and
    above it, and for ops without one); ``why`` the op's declared reason, or the per-signature
    size choice."""

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


def implementation(name: str, size: int | None, shapes: Shapes, call: Call, half: bool = False) -> Implementation:
    """The implementation of a signature of op ``name`` whose result has ``size`` elements
    (``None``: unknown) from inputs of ``shapes``: the op's declared facts, and for a kernel
    op, torch's own pullback in eager mode for a signature of one of its ``torch_forms``.
    ``half``: an input is a 16-bit float (``TorchFacts.half_once`` then decides whether
    torch's own pullback may run it)."""
    fact = FACTS[name]
    if fact.pullback == "torch":
        return Implementation(name, fact.forward, "torch", "torch", fact.why)
    compiled: Literal["torch", "kernel"] = "torch" if compiled_by_torch(name, size, half) else "kernel"
    if half and not fact.half_once:
        why = (
            f"{fact.why}; a 16-bit float input takes it at every size: torch's own backward of {name} "
            f"rounds the gradient to the format more than once"
        )
        return Implementation(name, fact.forward, "kernel", compiled, why)
    under_compile = (
        f"; under torch.compile, torch's autograd below {fact.compiled_below} result elements"
        f" (inductor fuses it)" if fact.compiled_below is not None else ""
    )
    for form in fact.torch_forms:
        if form.covers(call.static, shapes, size):
            where = "at every size measured" if form.below is None else f"below {name}'s bound of {form.below}"
            why = (
                f"a signature of {name}'s form '{form.words}': its result has {size} elements, {where}, "
                f"where torch's own backward is faster than a call of our kernel{under_compile}"
            )
            return Implementation(name, form.forward or fact.forward, "torch", compiled, why)
    why = fact.why
    if fact.torch_forms:
        shown = "unknown" if size is None else str(size)
        forms = "; ".join(form.words + ("" if form.below is None else f" below {form.below}") for form in fact.torch_forms)
        why += f" (result elements: {shown}; torch's own for {forms})"
    return Implementation(name, fact.forward, "kernel", compiled, why + under_compile)


def compiled_by_torch(name: str, size: int | None, half: bool = False) -> bool:
    """Whether, under ``torch.compile``, a signature of op ``name`` whose result has ``size``
    elements (``None``: unknown) takes torch's autograd (``TorchFacts.compiled_below``); never
    for a 16-bit float input (``half``) of an op whose torch backward rounds it more than once
    (``TorchFacts.half_once``). A symbolic size (``dynamic=True``) is compared as dynamo
    compares it: a guard on which side of the bound the graph's sizes lie, not on the sizes."""
    fact = FACTS[name]
    bound = fact.compiled_below
    if half and not fact.half_once:
        return False
    return bound is not None and size is not None and bool(size < bound)


# ---------------------------------------------------------------------------------------------
# NumPy's result dtypes
# ---------------------------------------------------------------------------------------------


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
HALF_DTYPES = (torch.float16, torch.bfloat16)


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
# bfloat16 as NumPy promotes ml_dtypes' bfloat16, tabulated here (ml_dtypes loads only when a
# 16-bit array arrives): tests/test_torch.py checks this table against ml_dtypes itself.
_BFLOAT16_WITH: dict[torch.dtype, torch.dtype] = {
    torch.bfloat16: torch.bfloat16, torch.bool: torch.bfloat16, torch.uint8: torch.bfloat16, torch.int8: torch.bfloat16,
    torch.uint16: torch.float32, torch.int16: torch.float32, torch.float16: torch.float32, torch.float32: torch.float32,
    torch.uint32: torch.float64, torch.uint64: torch.float64, torch.int32: torch.float64, torch.int64: torch.float64,
    torch.float64: torch.float64, torch.complex64: torch.complex64, torch.complex128: torch.complex128,
}
for _b, _result in _BFLOAT16_WITH.items():
    _PAIRS[torch.bfloat16, _b] = _PAIRS[_b, torch.bfloat16] = _result
for _kind, _as in ((bool, torch.bool), (int, torch.int64), (float, torch.float64), (complex, torch.complex128)):
    _SCALARS[torch.bfloat16, _kind] = _BFLOAT16_WITH[_as]
_SUMS: dict[torch.dtype, torch.dtype] = {_a: _TORCH.get(np.sum(np.zeros(1, _na)).dtype, _a) for _a, _na in _NUMPY.items()}


def _result_dtype(dtypes: tuple[torch.dtype, ...]) -> torch.dtype:
    """NumPy's result dtype of arrays of these dtypes (``torch.promote_types`` for a pair
    NumPy has no dtype for: none of the dtypes we take)."""
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = _PAIRS.get((result, dtype)) or torch.promote_types(result, dtype)
    return result


def _promoted(tensors: Tensors) -> Tensors:
    first = tensors[0].dtype
    for tensor in tensors:
        if tensor.dtype is not first:  # dtypes are singletons
            dtype = _result_dtype(tuple(t.dtype for t in tensors))
            return tuple(t.to(dtype) for t in tensors)
    return tensors


def _scalar_dtype(dtype: torch.dtype, scalar: type) -> torch.dtype:
    """``np.kron``'s result dtype for an array of ``dtype`` and a Python scalar."""
    found = _SCALARS.get((dtype, scalar))
    if found is not None:
        return found
    return torch.promote_types(dtype, {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}[scalar])


def _pad_value(dtype: torch.dtype, value: object) -> float:
    """A real ``pad`` constant as ``np.pad`` sets it in an array of ``dtype``: NumPy's cast
    (-1 is 255 in ``uint8``, 1e40 is inf in ``float32``, with NumPy's warning; what NumPy
    refuses, refused with its error), where ``F.pad`` refuses any constant out of the dtype's
    range. Under ``torch.compile`` torch's own conversion (dynamo traces no NumPy here)."""
    compiling = torch.compiler.is_compiling()
    numpy_dtype = None if compiling else _NUMPY.get(dtype)
    if dtype == torch.bfloat16 and not compiling:
        import ml_dtypes  # noqa: PLC0415 - a bfloat16 tensor is here: the 16-bit formats' module

        numpy_dtype = np.dtype(ml_dtypes.bfloat16)
    if numpy_dtype is None:
        is_float = dtype.is_floating_point
        return cast("float", value) if is_float else bool(value) if dtype == torch.bool else int(cast("float", value))
    cell = np.empty(1, numpy_dtype)
    cell[0:1] = np.array(value)[()]  # as the core's forward sets its border slabs
    return cast("float", cell[0].item() if numpy_dtype.kind in "biu" else float(cell[0]))


def _kron(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.kron``; where it refuses a transposed operand (torch 2.14's ``kron`` views a
    non-contiguous input, "view size is not compatible"), the same op on contiguous copies:
    NumPy takes any strides. A refusal of contiguous operands is torch's to raise."""
    try:
        return torch.kron(a, b)
    except RuntimeError:
        if a.is_contiguous() and b.is_contiguous():
            raise
        return torch.kron(a.contiguous(), b.contiguous())


class TorchNamespace:
    """The array functions torch lends the ops' forwards (``stablerules._facts.Namespace``):
    torch's own ops under NumPy's names, semantics and result dtypes. Each family writes its
    ops' forwards against these (``ENGINE_FACTS[name].forward``); this shim is the whole of
    what torch needs to know to run any op's forward."""

    def shape(self, x: torch.Tensor) -> tuple[int, ...]:
        return x.shape

    promoted = staticmethod(_promoted)

    def joins_promoting(self, tensors: Tensors) -> bool:
        return False  # traced and subclass calls (inductor, DTensor): inputs converted first

    def reshape(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        return x.reshape(shape)

    def broadcast_to(self, x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        return x.expand(shape)

    def permute_dims(self, x: torch.Tensor, axes: tuple[int, ...]) -> torch.Tensor:
        return x.permute(axes)

    def flip(self, x: torch.Tensor, axes: tuple[int, ...]) -> torch.Tensor:
        return torch.flip(x, axes)

    def roll(self, x: torch.Tensor, shifts: int | tuple[int, ...], axes: tuple[int, ...] | None = None) -> torch.Tensor:
        return torch.roll(x, shifts) if axes is None else torch.roll(x, shifts, axes)

    def concatenate(self, arrays: list[torch.Tensor] | Tensors, axis: int) -> torch.Tensor:
        return torch.cat(arrays, axis)

    def stack(self, arrays: list[torch.Tensor] | Tensors, axis: int) -> torch.Tensor:
        return torch.stack(arrays, axis)

    def hstack(self, arrays: list[torch.Tensor] | Tensors) -> torch.Tensor:
        return torch.hstack(arrays)

    def vstack(self, arrays: list[torch.Tensor] | Tensors) -> torch.Tensor:
        return torch.vstack(arrays)

    def repeat(self, x: torch.Tensor, repeats: int | tuple[int, ...], axis: int) -> torch.Tensor:
        """``repeat_interleave``; per-element counts (static here) as the tensor it takes."""
        if isinstance(repeats, int):
            return x.repeat_interleave(repeats, dim=axis)
        return x.repeat_interleave(torch.tensor(repeats, dtype=torch.int64, device=x.device), dim=axis)

    def tile(self, x: torch.Tensor, reps: tuple[int, ...]) -> torch.Tensor:
        return x.tile(reps)

    def upsampler(self, x: torch.Tensor, counts: tuple[int, ...]) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return None  # a repeat per axis: what inductor and our pullback's forward want

    def fresh(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return y.clone() if y is x or y._base is x else y

    def single_sum(self, x: torch.Tensor) -> bool:
        """A 16-bit float: autograd (eager, or traced under ``torch.compile`` below the
        compiled bound) rounds each op's sum to the format; inductor computes in float32
        either way, aot_eager and the eager backend did not (repeat's two-axis upsample
        in bfloat16: 40 units in the last place off the float64 gradient rounded once)."""
        return x.dtype in HALF_DTYPES

    def kron(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            return _kron(a, b)
        # torch.kron's own composition, written out: it specializes symbolic sizes under
        # torch.compile(dynamic=True); this one does not (the same products, the same values).
        ndim = max(a.ndim, b.ndim)
        a = a.reshape(*(1,) * (ndim - a.ndim), *a.shape)
        b = b.reshape(*(1,) * (ndim - b.ndim), *b.shape)
        spread_a = a.reshape([n for m in a.shape for n in (m, 1)])
        spread_b = b.reshape([n for m in b.shape for n in (1, m)])
        return (spread_a * spread_b).reshape([m * n for m, n in zip(a.shape, b.shape)])

    def scale(self, x: torch.Tensor, scalar: complex) -> torch.Tensor:
        dtype = _scalar_dtype(x.dtype, type(scalar))
        return (x.to(dtype) * scalar).to(dtype)

    def add(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def pad(self, x: torch.Tensor, widths: tuple[tuple[int, int], ...], value: object) -> torch.Tensor:
        """``F.pad`` (its widths from the last axis back); a complex array or constant as
        its real and imaginary parts (``F.pad`` pads no complex constant)."""
        pads = [width for before_after in reversed(widths) for width in before_after]
        if x.is_complex() or isinstance(value, complex):
            constant = complex(cast("complex", value))
            real = F.pad(x.real if x.is_complex() else x, pads, value=constant.real)
            imag = F.pad(x.imag if x.is_complex() else torch.zeros_like(x), pads, value=constant.imag)
            return torch.complex(real, imag)
        constant = _pad_value(x.dtype, value)
        if type(constant) is int and int(float(constant)) != constant:  # F.pad's value is a double
            y = x.new_full([n + before + after for n, (before, after) in zip(x.shape, widths)], constant)
            y[tuple(slice(before, before + n) for n, (before, _) in zip(x.shape, widths))] = x
            return y
        return F.pad(x, pads, value=constant)

    def copy(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    def split(self, x: torch.Tensor, sections: int | tuple[int, ...], axis: int) -> Tensors:
        if isinstance(sections, int):
            return tuple(torch.tensor_split(x, sections, dim=axis))
        return tuple(torch.tensor_split(x, list(sections), dim=axis))

    def getitem(self, x: torch.Tensor, index: tuple[object, ...]) -> torch.Tensor:
        return x[cast("tuple[int | slice | None, ...]", index)]

    def sum(self, x: torch.Tensor, axes: tuple[int, ...], keepdims: bool) -> torch.Tensor:
        dtype = _SUMS.get(x.dtype, x.dtype)
        if dtype == torch.uint64:  # torch sums no uint64: the same bits through int64
            return torch.sum(x.to(torch.int64), dim=axes, keepdim=keepdims).to(dtype)
        if dtype == x.dtype:
            return torch.sum(x, axes, keepdims)  # positional: torch parses them faster (0.5 us of a small sum)
        return torch.sum(x, dim=axes, keepdim=keepdims, dtype=dtype)

    def mean(self, x: torch.Tensor, axes: tuple[int, ...], keepdims: bool) -> torch.Tensor:
        if not (x.is_floating_point() or x.is_complex()):
            x = x.to(torch.float64)  # NumPy's mean of integers is float64
        count = 1
        for axis in axes:
            count *= int(x.shape[axis])
        wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else None
        total = torch.sum(x, dim=axes, keepdim=keepdims, dtype=wide)
        return (total / count).to(x.dtype)  # NumPy's sum, then one division

    def wrapped(self, call: OpCall, indices: torch.Tensor, n: int, axis: int | None) -> torch.Tensor:
        return _indices(cast("Call", call), indices, n, axis)

    def take(self, x: torch.Tensor, indices: torch.Tensor, axis: int) -> torch.Tensor:
        return x.index_select(axis, indices)

    def gather(self, x: torch.Tensor, indices: torch.Tensor, axis: int) -> torch.Tensor:
        """``torch.gather``, which does not broadcast (and ``torch.take_along_dim``'s
        broadcasting specializes symbolic sizes): each operand expanded only where the extents
        differ."""
        x_shape, i_shape = list(x.shape), list(indices.shape)
        for d in range(x.ndim):
            if d != axis and x_shape[d] != i_shape[d]:
                x_shape[d] = i_shape[d] = max(x_shape[d], i_shape[d])
        if x_shape != list(x.shape):
            x = x.expand(x_shape[:axis] + [-1] + x_shape[axis + 1 :])
        if i_shape != list(indices.shape):
            indices = indices.expand(i_shape[:axis] + [-1] + i_shape[axis + 1 :])
        return torch.gather(x, axis, indices)

    def index_add(self, x: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, axis: int) -> torch.Tensor:
        return torch.index_add(x, axis, indices, values.to(x.dtype))


class _EagerNamespace(TorchNamespace):
    """:class:`TorchNamespace` for eager calls only (``prepare``): ``torch.cat`` itself, a
    builtin called with no frame of ours (a DenseNet's 62 concatenations), and ``torch.kron``
    behind one frame (a Kalman filter's 400 small krons a step; :func:`_kron`)."""

    kron = staticmethod(_kron)  # torch.kron, one frame of ours
    concatenate = staticmethod(torch.cat)  # type: ignore[assignment]  # the same call, a builtin's signature

    def joins_promoting(self, tensors: Tensors) -> bool:
        """``torch.cat`` and ``torch.stack`` promote mixed inputs themselves (by
        ``torch.promote_types``), reading each input once; converting each input to NumPy's
        result dtype first made a 25-input concatenation of bfloat16 and float32 tensors 74 us
        against ``torch.cat``'s 35-41 (an autocast model's skip connections mix the two). Where
        torch's promotion of the signature's dtypes is NumPy's (bfloat16 with float32, float16
        with float64, ...), the join takes them as they are; where the two differ (an integer
        with float32: float32 in torch, float64 in NumPy) they are converted first. The
        gradient is the same: torch's autograd rounds each input's slice to its dtype, as the
        conversion's backward did."""
        dtypes = tuple(t.dtype for t in tensors)
        folded = dtypes[0]
        for dtype in dtypes[1:]:
            folded = torch.promote_types(folded, dtype)
        return folded == _result_dtype(dtypes)

    def upsampler(self, x: torch.Tensor, counts: tuple[int, ...]) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """``F.interpolate(·, scale_factor=counts[2:], mode="nearest")``: a nearest-neighbour
        upsample in one op, forward and backward (``upsample_nearest*d``), where autograd
        records it (a small signature of repeat's upsample form). ``None`` (a repeat per
        axis) unless ``x`` is a plain real floating tensor (no subclass: a ``DTensor`` keeps
        the per-axis ops its sharding rules know) of 3 to 5 axes, the first two counts are 1
        and the others 1, 2, 4 or 8 with each scaled extent below 2**24: there torch's source
        index, ``floor(i * (1 / count))`` in float32, is exact, so the result is the repeat's
        bit for bit. The test reads what the signature fixes (rank, dtype, shape)."""
        return _nearest(x, counts)


# A doubling repeat on the CPU of at least this many input elements, whose copies along the
# axis are runs of at most DOUBLED_RUN elements, is built as two strided copies into a new
# tensor (:func:`_doubled`); bench/README.md (round 12) has the crossover's measurements.
DOUBLED_FROM = 8192
DOUBLED_RUN = 16


class _UnrecordedNamespace(_EagerNamespace):
    """:class:`_EagerNamespace` for the eager forward of an op whose pullback is our kernel.
    That forward runs where autograd records nothing (our Function's ``forward``, or no input
    requiring a gradient), so it may build its result in place; a forward whose pullback is
    torch's own (a small signature, a view op) uses :class:`_EagerNamespace`, whose ops torch's
    autograd records."""

    def repeat(self, x: torch.Tensor, repeats: int | tuple[int, ...], axis: int) -> torch.Tensor:
        """A doubling ``repeat`` of short runs (a nearest-neighbour upsample's) as
        :func:`_doubled`: ``repeat_interleave`` copies from a stride-0 broadcast of ``x``, one
        element at a time where the runs are short (1.5-3x slower on the U-Net's upsamples,
        3x in bfloat16). Static per signature: the test reads only what a kernel op's
        signature fixes (the shape, the dtype, the device), so every call of a signature takes
        the same form. It runs on each call (about 1 us against the copies' 15 us and more):
        deciding it in the signature's setup would need a ``repeater`` in every engine's
        ``Namespace``, left for the flatter call path (bench/README.md, round 12)."""
        if repeats == 2 and type(repeats) is int and x.is_cpu and x.numel() >= DOUBLED_FROM:
            axis %= x.ndim
            run = 1
            for extent in x.shape[axis + 1 :]:
                run *= extent
            if run <= DOUBLED_RUN:
                return _doubled(x, axis)
        return super().repeat(x, repeats, axis)

    def upsampler(self, x: torch.Tensor, counts: tuple[int, ...]) -> Callable[[torch.Tensor], torch.Tensor] | None:
        return None  # our pullback's forward: the doubling copies are the faster (the form's bound)

    def single_sum(self, x: torch.Tensor) -> bool:
        return False  # our kernel's pullback, which rounds once


_EXACT_COUNTS = (1, 2, 4, 8)


def _nearest(x: torch.Tensor, counts: tuple[int, ...]) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """:meth:`_EagerNamespace.upsampler`'s ``F.interpolate``, or ``None`` where it does not
    apply (its docstring says when)."""
    if not 3 <= x.ndim <= 5 or len(counts) != x.ndim or counts[0] != 1 or counts[1] != 1:
        return None
    spatial = counts[2:]
    if type(x) is not torch.Tensor or not x.is_floating_point() or all(count == 1 for count in spatial):
        return None
    for count, extent in zip(spatial, x.shape[2:]):
        if count not in _EXACT_COUNTS or extent * count >= 1 << 24:
            return None
    scales = tuple(float(count) for count in spatial)
    return lambda t: F.interpolate(t, scale_factor=scales, mode="nearest")


def _doubled(x: torch.Tensor, axis: int) -> torch.Tensor:
    """``x.repeat_interleave(2, dim=axis)`` (``axis`` non-negative): a new contiguous tensor
    seen as ``(..., n, 2, ...)``, ``x`` copied into each half by ``copy_`` (torch's strided
    copy, which keeps the runs of ``x`` contiguous where the broadcast one does not). The same
    elements, dtype, device and layout (contiguous, as ``repeat_interleave``'s result)."""
    shape = tuple(x.shape)
    out = x.new_empty((*shape[: axis + 1], 2, *shape[axis + 1 :]))  # contiguous
    out.select(axis + 1, 0).copy_(x)
    out.select(axis + 1, 1).copy_(x)
    return out.view(*shape[:axis], 2 * shape[axis], *shape[axis + 1 :])


TORCH = TorchNamespace()
_EAGER = _EagerNamespace()
_UNRECORDED = _UnrecordedNamespace()


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


def _forward(name: str) -> Forward:
    rule = _FAMILY_FACTS[name].forward
    return lambda call, tensors: rule(TORCH, call, tensors)


FORWARDS: dict[str, Forward] = {op.name: _forward(op.name) for op in OPS}
"""Each op's forward in torch: its family's rule (``ENGINE_FACTS[name].forward``) over :data:`TORCH`."""


# ---------------------------------------------------------------------------------------------
# per-signature eager forwards: the statics read once
# ---------------------------------------------------------------------------------------------

Prepared = Callable[["Tensors"], "Tensors"]


def prepare(call: Call, tensors: Tensors, recorded: bool) -> Prepared:
    """The op's eager forward for one signature: its family's ``prepared`` rule (statics read
    once, torch's op called directly) for the hot ops (a DenseNet block's 25-input
    concatenation, an upsample's ``repeat``, a Kalman filter's small ``kron``), else its
    ``FORWARDS`` entry. Every signature fixes its tensors' dtypes and ranks (a view op's key
    holds them, not its extents; a kernel op's holds its shapes too), so a prepared forward
    settles NumPy's promotion once. Used in eager mode only: under ``torch.compile`` the calls go
    through ``FORWARDS``. ``recorded``: whether torch's autograd records the forward (the
    pullback is torch's own); where it does not, the forward may build its result in place
    (:class:`_UnrecordedNamespace`)."""
    maker = _FAMILY_FACTS[call.entry.name].prepared
    prepared = maker(_EAGER if recorded else _UNRECORDED, call, tensors) if maker is not None else None
    if prepared is not None:
        return prepared
    forward = FORWARDS[call.entry.name]
    return lambda tensors: forward(call, tensors)
