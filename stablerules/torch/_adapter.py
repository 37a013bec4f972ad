"""The machinery behind ``stablerules.torch``: any of our ops as a PyTorch op, generically.

An op is described once (an :class:`Entry`: the ``stablerules`` op, its parameters, which of
them hold tensors, a batching rule) and declares its engine facts (``_native.FACTS``: SPEC
section 14): its forward is always torch's own op (``_native.FORWARDS``: the family's
forward rule over torch's array functions, ``_native.TORCH``); its pullback is
torch's autograd (the view ops: plain torch code) or our compiled kernel (the kernel ops).
Everything else is shared:

- A call's *signature* (:class:`TorchSignature`: the op, the arguments' structure, the statics, the
  tensors' dtypes, shapes and devices) is bound and validated once, at its first call, by the
  core's own plan on ``ArraySpec``s (so every error is the core's, before torch's op runs);
  later calls find it by a key made from their arguments (one pass over them).
- Each signature's implementation (:class:`_native.Implementation`: torch's forward op, whose
  pullback runs in eager mode and under ``torch.compile``, and why) is settled with it, once:
  ``sr.explain(srt.<op>, *args)`` prints it (with our pullback kernels' source where they run)
  and ``TorchOp.implementations()`` counts an op's signatures by implementation. Its eager
  forward is ``_native.prepare``'s: torch's op with the statics read once.
- A view op's call is then torch's own op and nothing else, in every mode: autograd,
  ``torch.func``, ``vmap``, ``torch.compile``, meta and fake tensors, DTensor and FSDP see
  ordinary torch code. So is, in eager mode, a kernel op's call of one of the op's
  ``torch_forms`` (a static per-signature choice: kron's, repeat's and tile's small results, a
  1-axis tile, a broadcast by new leading axes).
- A kernel op's call with gradients runs a ``torch.autograd.Function`` whose forward is
  torch's op: :class:`_PlainForward` (``ctx`` in ``forward``, the cheapest) when no
  torch.func transform or forward-mode AD is active, else :class:`_Forward` (``setup_context``,
  ``jvp``, ``vmap``). A linear call saves no tensors (its pullback reads shapes only: one
  closure per signature); a non-linear one saves its inputs and builds its pullback
  (``sr.pullback``) in ``backward`` from the saved tensors. ``backward`` runs our kernel
  directly when no graph is being built (the cotangent a NumPy view, the gradient back through
  ``torch.from_numpy``: no copy), else through :class:`_PullbackFunction`, another ``Function`` whose
  own backward is the op's tangent map (for a linear op, the op itself: torch's op) and, for
  a non-linear op, the entry's second-order rule: so ``create_graph=True``,
  ``torch.func.grad`` of ``grad`` and so on compose to any order. ``vmap`` is the entry's
  batching rule (the batch axis moved to the front, statics shifted; the indexing ops offset
  batched indices into the batch flattened along their axis), never torch's per-sample loop.
- Under ``torch.compile``, and for fake tensors, a kernel op whose result is below its
  ``TorchFacts.compiled_below`` is torch's op with torch's autograd (inductor fuses both);
  at and above it, :class:`_Kernel`: torch's op
  forward (dynamo traces it, inductor fuses around it) and a backward that calls the
  ``torch.library`` custom op ``stablerules::<name>_vjp`` with schema ``(Tensor?[]
  cotangents, Tensor[] saved, SymInt[] shapes, int[] ndims, str call, str dtypes)``: the
  inputs' shapes as ``SymInt``s (its fake implementation builds the gradients' shapes from
  them, symbolically: one graph for every size of a dimension that no ``Val`` names), only
  the tensors the pullback reads (kron's factors, the indices), the call's statics and the
  dtypes as text (no shapes). Its own autograd is the op's second-order rule.
- ``DTensor`` inputs of a kernel op go to custom ops with sharding strategies (``_sharding``),
  so a shard on an axis the op leaves alone stays a shard; a view op's are torch's own.
- Our kernels run with ``torch.get_num_threads()`` threads (``_parallel.ENGINE_THREADS`` is
  set around each pullback; ``STABLERULES_NUM_THREADS`` wins when set).

Tensors reach the kernels as zero-copy views: on the CPU a read-only NumPy array through
DLPack (``torch.utils.dlpack.to_dlpack``; ``Tensor.numpy`` would mark the storage as never
resizable, which FSDP2's resharding needs), conjugate and negative bits resolved first;
cotangents as writable arrays (``Tensor.numpy``), so that a gradient may view its cotangent.

Cotangents: an all-stride-0 cotangent (what ``sum``, ``mean`` and ``expand`` give) of at least
``FILL_THRESHOLD`` elements reaches the rules as an ``sr.Fill`` in O(1); smaller ones are read
densely (the check and the ``Fill`` cost more than the copy they save). A ``Fill`` result comes
back as an expanded 0-d tensor, a zero result as ``None`` (eager) or zeros (custom ops, whose
outputs must be plain tensors).

Decisions where the issue is silent:
- A view op returns what torch's op returns (views included; under ``no_grad`` detached). A
  kernel op's result never aliases an input (``broadcast_to``'s is ``Tensor.expand``'s view).
  Gradients may view the cotangent (torch's own ``cat`` backward does the same); custom-op
  results never alias (torch's rule for them).
- A non-linear op's pullback is rebuilt in ``backward`` rather than kept from ``forward``: a
  closure would hold views of memory that FSDP2 frees after the forward and gathers anew
  (at another address) before the backward.
- ``float16`` and ``bfloat16``: torch's forward; on the CPU our pullback is the core's 16-bit
  kernel (it reads the cotangent's bits, accumulates in float32 and rounds once; bfloat16
  crosses as ml_dtypes' ``bfloat16`` over the same memory); on a CUDA device the float32 kernel
  on the cotangent upcast once, rounded once to the input's dtype. The same under
  ``torch.autocast``.
- Meta tensors: torch's forward gives shapes and dtypes; a kernel op's backward gives empty
  meta gradients of the inputs' shapes and dtypes (no data, no kernel).
- ``kron`` takes a Python scalar for either factor, as ``np.kron`` does: the scalar is a
  static of the signature (no gradient; a new value is a new signature), and the call is
  linear in the tensor; its dtype is ``np.kron``'s (the scalar made an array).
- Integer indices (``take``, ``take_along_axis``, ``index_add``) are tensor data, not statics:
  a NumPy array or list is made a tensor; new values of the same shape and dtype reuse the
  signature (and, under ``torch.compile``, the graph); they get no gradient, and a tensor of
  them that requires grad is a ``TypeError``. Out-of-range indices are the core's
  ``IndexError`` in eager mode (torch's own under ``torch.compile``). ``getindex``'s
  ``sr.ix[...]`` index is a static (part of the signature, as a ``Val`` is). The kernel
  indexing ops have no sharding rule (a ``DTensor`` input raises ``TypeError``).
- The signature cache holds at most ``_MAX_SIGNATURES`` signatures per op, then starts again.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Sequence, Sized
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

import numpy as np
import torch
import torch.utils.dlpack

import stablerules as sr
from stablerules import Val

from .._arrays import index_data
from .._binding import Argument
from ._library import define
from .._record import RECORDINGS
from .._guards import uncounted
from .._rule import RuleOp
from .._memo import register as register_cache

from .. import _parallel, _pool
from ._call import BatchRule, Call, Engine, Entry, OptionalTensors, SecondOrderRule, TangentRule, Tensors
from .._facts import Revalidate
from ._native import FACTS, FORWARDS, HALF_DTYPES as _HALF, Implementation, compiled_by_torch, implementation, prepare
from ._sharding import DTensorEngine, Kernels, is_dtensor, shard_rule
from ._private import FUNCTORCH_ACTIVE, forward_ad_active

if TYPE_CHECKING:
    from torch.autograd.function import FunctionCtx

_R = TypeVar("_R", torch.Tensor, tuple[torch.Tensor, ...])

# The two private torch names we use (in ._private, where no public API answers the question;
# tests/test_private.py fails first on a torch that moves them): whether a torch.func transform is active, and the
# forward-mode AD level. Without them every call that requires grad would take the
# ``setup_context`` Function that torch.func and forward AD need, several times the cost of the
# plain one.
_FUNCTORCH_ACTIVE: Callable[[], bool] = FUNCTORCH_ACTIVE  # torch._private
_FORWARD_AD = torch.autograd.forward_ad

# Below this many elements a stride-0 cotangent is read densely: detecting it and building the
# Fill costs more than copying a small one.
FILL_THRESHOLD = 4096

# The op is chosen at run time: its rule calls go through these names, so that the type checker
# does not try each of the rules' overloads on every such call (for the same loose result).
_pullback: Callable[..., Callable[[object], tuple[object, ...]]] = sr.pullback


def bind(entry: Entry, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[Call, Tensors]:
    """Split a call into its :class:`Call` and its tensors (the shared binder matches the
    arguments to the op's parameters); ``TypeError`` naming the argument for a non-tensor
    where a tensor belongs, a tensor where a static belongs, or a parameter the op does not
    have."""
    arrays = entry.arrays
    tensors: list[torch.Tensor] = []
    layout: list[tuple[str, int]] = []
    statics: list[tuple[str, object]] = []
    bound = entry.binder.bind(args, kwargs, "stablerules.torch.")
    for argument in bound:
        name, value = argument.param.name, argument.value
        if argument.param.role == "varargs":
            values = cast("tuple[object, ...]", value)
            layout.append((name, len(values)))
            tensors.extend(_tensors(entry, name, values))
        elif name in arrays:
            _bind_array(entry, name, value, tensors, layout, statics)
        else:
            statics.append((name, _static(entry, name, value)))
    if len(bound) < len(entry.required):  # after the given arguments' checks, as before
        _missing(entry, bound)
    return Call(entry, tuple(layout), tuple(statics)), tuple(tensors)


def _missing(entry: Entry, bound: Sequence[Argument]) -> None:
    """Python's own error for required positional parameters a call left out, worded as the
    op's ``__call__`` words it (``Tile.__call__() missing 1 required positional argument:
    'reps'``), as the NumPy op gives it."""
    given = {argument.param.name for argument in bound}
    missing = [f"'{name}'" for name in entry.required if name not in given]
    if not missing:
        return
    names = missing[0] if len(missing) == 1 else (
        f"{missing[0]} and {missing[1]}" if len(missing) == 2 else ", ".join(missing[:-1]) + f", and {missing[-1]}"
    )
    plural = "s" if len(missing) > 1 else ""
    raise TypeError(f"{entry.binder.schema.cls}.__call__() missing {len(missing)} required positional argument{plural}: {names}")


_PYTHON_SCALARS = (bool, int, float, complex)


def _bind_array(
    entry: Entry,
    name: str,
    value: object,
    tensors: list[torch.Tensor],
    layout: list[tuple[str, int]],
    statics: list[tuple[str, object]],
) -> None:
    if name in entry.data:
        tensors.append(as_data(entry, name, value))
        layout.append((name, -1))
    elif isinstance(value, torch.Tensor):
        tensors.append(value)
        layout.append((name, -1))
    elif isinstance(value, (tuple, list)):
        tensors.extend(_tensors(entry, name, value))
        layout.append((name, len(value)))
    elif entry.scalars and type(value) in _PYTHON_SCALARS:
        statics.append((name, value))
    else:
        raise TypeError(
            f"stablerules.torch.{entry.name}: argument {name!r} must be a torch.Tensor "
            f"({'or a Python scalar' if entry.scalars else 'or a sequence of them'}), got {type(value).__name__}"
        )


def as_data(entry: Entry, name: str, value: object) -> torch.Tensor:
    """A data argument (integer indices) as a tensor: a NumPy array or a (nested) list of
    ints is made one (a copy for a list, a view for an array); ``TypeError`` for anything
    else, or for a tensor that requires grad (indices have no gradient)."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            raise TypeError(
                f"stablerules.torch.{entry.name}: argument {name!r} is integer data (no gradient), "
                f"got a tensor that requires grad"
            )
        return value
    if isinstance(value, (np.ndarray, list, tuple)) or type(value) is int:
        return torch.as_tensor(np.asarray(index_data(value)))
    raise TypeError(
        f"stablerules.torch.{entry.name}: argument {name!r} must be an integer torch.Tensor, NumPy array "
        f"or list, got {type(value).__name__}"
    )


def _static(entry: Entry, name: str, value: object) -> object:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        raise TypeError(
            f"stablerules.torch.{entry.name}: argument {name!r} is static (a Val, or a plain int or tuple); "
            f"got an array: per-element counts make the result's shape depend on data, which the torch "
            f"adapter does not support"
        )
    return tuple(value) if isinstance(value, list) else value


def _tensors(entry: Entry, name: str, values: Sequence[object]) -> Tensors:
    for index, value in enumerate(values):
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"stablerules.torch.{entry.name}: {name}[{index}] must be a torch.Tensor, got {type(value).__name__}"
            )
    return tuple(cast("Sequence[torch.Tensor]", values))


def _arguments(call: Call, arrays: Sequence[object]) -> tuple[tuple[object, ...], dict[str, object]]:
    """The op's positional and keyword arguments for ``arrays`` (one per tensor, in order)."""
    if len(call.arrays) == 1 and call.arrays[0][1] < 0 and not call.entry.scalars:
        return (arrays[0],), dict(call.statics)
    if call.entry.scalars:  # scalars among the array arguments: those in parameter order
        named = dict(call.statics)
        named.update((name, arrays[index]) for index, (name, _) in enumerate(call.arrays))
        leading = [name for name in call.entry.parameters if name in call.entry.arrays]
        return tuple(named.pop(name) for name in leading), named
    positional: list[object] = []
    index = 0
    for _, count in call.arrays:
        if count < 0:
            positional.append(arrays[index])
            index += 1
        else:
            positional.append(tuple(arrays[index : index + count]))
            index += count
    if call.entry.variadic:
        positional = list(cast("tuple[object, ...]", positional[0]))
    return tuple(positional), dict(call.statics)


def _tangent_groups(call: Call, tangents: tuple[object, ...]) -> list[object]:
    """The pullback's result (one entry per positional argument) flattened to one per tensor."""
    if call.entry.scalars:  # tangents by parameter position; scalars' dropped
        return [tangents[call.entry.order[name]] for name, _ in call.arrays]
    if call.entry.variadic:
        return list(tangents)
    flat: list[object] = []
    for (_, count), tangent in zip(call.arrays, tangents):
        if count < 0:
            flat.append(tangent)
        else:
            flat.extend(cast("tuple[object, ...]", tangent))
    return flat


# ---------------------------------------------------------------------------------------------
# tensors <-> arrays
# ---------------------------------------------------------------------------------------------


class _Capsule:
    """A DLPack capsule from ``torch.utils.dlpack.to_dlpack`` as ``np.from_dlpack`` takes it.

    ``np.from_dlpack(tensor)`` costs several times more (torch's ``__dlpack__`` checks its
    arguments in Python); the capsule made directly makes the whole view as cheap as
    ``tensor.numpy()``, which we avoid because it marks the tensor's storage as never
    resizable (FSDP2 frees and regathers its parameters by resizing their storage)."""

    __slots__ = ("capsule",)

    def __init__(self, capsule: object) -> None:
        self.capsule = capsule

    def __dlpack__(self, **options: object) -> object:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


# Public and documented (torch.utils.dlpack.to_dlpack), though not in the module's __all__.
_TO_DLPACK: Callable[[torch.Tensor], object] = getattr(torch.utils.dlpack, "to_dlpack")
_FROM_DLPACK: Callable[[object], np.ndarray[tuple[int, ...], np.dtype[np.generic]]] = np.from_dlpack  # type: ignore[assignment]


def _array(tensor: torch.Tensor) -> object:
    """A zero-copy view of ``tensor``'s memory: NumPy (read-only) on the CPU, CuPy on a CUDA
    device. Conjugate and negative bits are resolved first (a copy only if one is set)."""
    if tensor.is_conj() or tensor.is_neg():
        tensor = tensor.detach().resolve_conj().resolve_neg()
    if tensor.is_cpu:
        if tensor.dtype is torch.bfloat16:  # NumPy has no DLPack bfloat16: the bits, as ml_dtypes'
            return _FROM_DLPACK(_Capsule(_TO_DLPACK(tensor.detach().view(torch.int16)))).view(_bfloat16())
        return _FROM_DLPACK(_Capsule(_TO_DLPACK(tensor)))
    if tensor.is_cuda:
        return _cupy().from_dlpack(tensor.detach())  # type: ignore[attr-defined]
    raise TypeError(f"stablerules.torch: tensors on {tensor.device} are not supported (CPU and CUDA are)")


def _cotangent_array(tensor: torch.Tensor) -> object:
    """A cotangent's memory as an array: writable (a gradient may view it, as torch's own
    ``cat`` backward does) where it is a plain CPU tensor (``Tensor.numpy``: a cotangent's
    storage is never resized by anyone), else as :func:`_array`."""
    if tensor.is_cpu and not (tensor.requires_grad or tensor.is_conj() or tensor.is_neg()) and type(tensor) is torch.Tensor:
        if tensor.dtype is torch.bfloat16:
            return tensor.view(torch.int16).numpy().view(_bfloat16())
        return tensor.numpy()
    return _array(tensor)


def _bfloat16() -> np.dtype[np.generic]:
    """ml_dtypes' ``bfloat16``, imported when the first bfloat16 tensor reaches our kernels."""
    import ml_dtypes  # noqa: PLC0415 - only a 16-bit float brings it (SPEC section 15)

    dtype: np.dtype[np.generic] = np.dtype(ml_dtypes.bfloat16)
    return dtype


def _cupy() -> object:
    try:
        import cupy  # noqa: PLC0415 - only CUDA tensors need it
    except ImportError as error:
        raise RuntimeError(
            "stablerules.torch: CUDA tensors reach our CUDA kernels through CuPy (zero-copy, DLPack), "
            "which is not installed: pip install 'stablerules[cuda]' (we never copy through the host)"
        ) from error
    return cupy


def _tensor(array: object, inputs: Sequence[object] = ()) -> torch.Tensor:
    """``array`` as a tensor sharing its memory, unless it aliases one of ``inputs`` (then a
    copy, as autograd would not know of the view) or torch cannot hold it as it is (negative
    strides, read-only)."""
    if type(array) is np.ndarray:
        if array.dtype.kind == "V" and array.dtype.type.__name__ == "bfloat16":  # ml_dtypes': torch's from its bits
            return _tensor(array.view(np.int16), inputs).view(torch.bfloat16)
        if array.base is None:  # a fresh result of our kernels (inputs arrive as views)
            return torch.from_numpy(array)
        flags = array.flags
        if flags.writeable and not _borrowed(array):  # memory our kernels allocated: as it is
            return torch.from_numpy(array)
        if (
            not flags.writeable
            or any(stride < 0 for stride in array.strides)
            or any(np.may_share_memory(array, item) for item in inputs)
        ):
            array = np.array(array)
        return torch.from_numpy(array)
    if type(array).__module__.startswith("cupy"):
        if any(_cupy().shares_memory(array, item) for item in inputs):  # type: ignore[attr-defined]
            array = array.copy()  # type: ignore[attr-defined]
        return torch.utils.dlpack.from_dlpack(array)
    return torch.as_tensor(array)


def _borrowed(array: np.ndarray[tuple[int, ...], np.dtype[np.generic]]) -> bool:
    """Whether ``array``'s memory is not NumPy's own (a view of a torch tensor's, say)."""
    root = array
    while True:
        base = root.base
        if base is None:
            return not root.flags.owndata
        if type(base) is not np.ndarray:
            return True
        root = base


def _cotangent(tensor: torch.Tensor | None) -> object:
    """A torch cotangent as our rules take it: ``None`` is a ``ZeroTangent``, a large
    all-stride-0 tensor a ``Fill`` (O(1)), anything else a view of its memory."""
    if tensor is None:
        return sr.ZeroTangent()
    array = _cotangent_array(tensor)
    if tensor.numel() >= FILL_THRESHOLD and not any(tensor.stride()) and type(array) is np.ndarray:
        return sr.Fill(array[(0,) * array.ndim].item(), tuple(tensor.shape), array.dtype)
    return array


def _gradient(tangent: object, like: torch.Tensor, dense: bool) -> torch.Tensor | None:
    """Our tangent as a torch gradient for ``like``: a ``Fill`` is an expanded 0-d tensor, a
    zero is ``None`` (or, when ``dense``, zeros: custom ops return plain tensors)."""
    if type(tangent) is np.ndarray:
        return _tensor(tangent)
    tangent = sr.unthunk(tangent)
    if isinstance(tangent, sr.Fill):
        result = torch.tensor(tangent.value, dtype=like.dtype, device=like.device).expand(tangent.shape)
        return result.contiguous() if dense else result
    if isinstance(tangent, (sr.ZeroTangent, sr.NoTangent)):
        return torch.zeros_like(like) if dense else None
    return _tensor(tangent)


# ---------------------------------------------------------------------------------------------
# running our rules
# ---------------------------------------------------------------------------------------------

def _on_stream(tensors: Sequence[torch.Tensor], run: Callable[[], _Result]) -> _Result:
    """Run ``run()`` with CuPy's current stream set to torch's, for CUDA tensors."""
    if not tensors or not tensors[0].is_cuda:
        return run()
    cupy = _cupy()
    stream = torch.cuda.current_stream(tensors[0].device)
    with cupy.cuda.ExternalStream(stream.cuda_stream):  # type: ignore[attr-defined]
        return run()


_Result = tuple[object, ...]


def _outputs(result: object) -> tuple[object, ...]:
    return tuple(result) if isinstance(result, tuple) else (result,)


def run_op(call: Call, tensors: Tensors) -> Tensors:
    """The op's result tensors (no pullback)."""
    arrays = [_array(tensor) for tensor in tensors]
    args, kwargs = _arguments(call, arrays)
    y = _on_stream(tensors, lambda: (call.entry.op(*args, **kwargs),))[0]
    return tuple(_tensor(item, arrays) for item in _outputs(y))


_LINEAR_PULLBACKS: dict[object, Callable[[object], tuple[object, ...]]] = {}


def _closure(call: Call, tensors: Tensors) -> Callable[[object], tuple[object, ...]]:
    """The pullback closure of ``call`` on ``tensors``, from ``sr.pullback`` (no primal
    computed); one per signature for a linear op (its pullback reads shapes and dtypes only)."""
    linear = call.linear and call.primal_free
    key: object = None
    if linear:
        key = (call, tuple((tuple(t.shape), t.dtype, t.device) for t in tensors))
        known = _LINEAR_PULLBACKS.get(key)
        if known is not None:
            return known
    arrays = [_array(tensor) for tensor in tensors]
    args, kwargs = _arguments(call, arrays)
    back: Callable[[object], tuple[object, ...]] = _pullback(call.entry.op, *args, **kwargs)
    if linear:
        _LINEAR_PULLBACKS[key] = back
    return back


def run_pullback(
    call: Call,
    cotangents: OptionalTensors,
    tensors: Tensors,
    back: Callable[[object], tuple[object, ...]] | None,
    dense: bool = False,
) -> OptionalTensors:
    """One gradient per tensor (``None`` for a zero, unless ``dense``) from the cotangents.

    Meta tensors give empty gradients of the inputs' shapes and dtypes (no data). 16-bit
    floats on the CPU reach the core's 16-bit kernels as they are (bfloat16 as ml_dtypes'
    bits: no conversion pass; they accumulate in float32 and round once); on a CUDA device they
    run the float32 kernel on the cotangents upcast once, the gradient rounded once to the
    input's dtype (float32 accumulation, one rounding, CuPy having no bfloat16).
    Our kernels run with ``torch.get_num_threads()`` threads (``STABLERULES_NUM_THREADS`` wins)."""
    special = False
    for value in (*tensors, *cotangents):
        if value is not None and (value.is_meta or (value.dtype in _HALF and not value.is_cpu)):
            special = True
            break
    if special and any(value is not None and value.is_meta for value in (*tensors, *cotangents)):
        return tuple(
            None if not (dense or differentiable(t)) else torch.empty(t.shape, dtype=t.dtype, device="meta") for t in tensors
        )
    if special:
        wide = run_pullback(
            call,
            tuple(None if c is None else _widened(c) for c in cotangents),
            tuple(_widened(t) for t in tensors),
            None,
            dense,
        )
        return tuple(g if g is None else g.to(t.dtype) for g, t in zip(wide, tensors))
    threads = _parallel.ENGINE_THREADS
    outer = threads.count
    threads.count = torch.get_num_threads()
    memory = _pool.ENGINE_MEMORY
    outer_make = memory.make
    if tensors[0].is_cpu:
        memory.make = _torch_bytes
    try:
        return _run_pullback(call, cotangents, tensors, back, dense)
    finally:
        threads.count = outer
        memory.make = outer_make


def _torch_bytes(nbytes: int, zeroed: bool) -> np.ndarray[tuple[int], np.dtype[np.uint8]] | None:
    """``nbytes`` of torch's CPU memory as a NumPy ``uint8`` array (``_pool.ENGINE_MEMORY``):
    our large results in torch are allocated as torch allocates its own (no transparent huge
    pages asked for, torch's alignment). ``None`` (the pool then takes NumPy's) where a mode
    of torch's makes its factories return something else (a fake or functional tensor, a
    default device other than the CPU)."""
    block = torch.zeros(nbytes, dtype=torch.uint8) if zeroed else torch.empty(nbytes, dtype=torch.uint8)
    if type(block) is not torch.Tensor or not block.is_cpu:
        return None
    return cast("np.ndarray[tuple[int], np.dtype[np.uint8]]", block.numpy())


def _widened(tensor: torch.Tensor) -> torch.Tensor:
    """A 16-bit float tensor as float32 (a stride-0 one stays stride-0); others as they are."""
    if tensor.dtype not in _HALF:
        return tensor
    if tensor.numel() and not any(tensor.stride()):
        return tensor.detach()[(0,) * tensor.ndim].to(torch.float32).expand(tensor.shape)
    return tensor.to(torch.float32)


def _run_pullback(
    call: Call,
    cotangents: OptionalTensors,
    tensors: Tensors,
    back: Callable[[object], tuple[object, ...]] | None,
    dense: bool,
) -> OptionalTensors:
    if back is None:
        back = _closure(call, tensors)
    dy: object
    if len(cotangents) == 1 and not call.entry.tuple_result:
        dy = _cotangent(cotangents[0])
    else:  # a tuple-returning op's pullback takes a tuple, even of one part
        dy = tuple(_cotangent(c) for c in cotangents)
    if tensors[0].is_cuda:
        tangents = _on_stream(tensors, lambda: back(dy))
    else:
        tangents = back(dy)
    if len(tensors) == 1 and call.arrays[0][1] < 0 and not call.entry.scalars:  # (dx, NoTangent(), ...)
        return (_gradient(tangents[0], tensors[0], dense),)
    return tuple(_gradient(t, like, dense) for t, like in zip(_tangent_groups(call, tangents), tensors))


# ---------------------------------------------------------------------------------------------
# engines: where a forward or pullback call goes
# ---------------------------------------------------------------------------------------------


class _EagerEngine:
    """Calls through the autograd Functions (eager mode, torch.func transforms)."""

    def forward(self, call: Call, tensors: Tensors) -> Tensors:
        return signature_of(call, tensors).apply(tensors)

    def pullback(
        self,
        call: Call,
        cotangents: OptionalTensors,
        tensors: Tensors,
        back: Callable[[object], tuple[object, ...]] | None = None,
    ) -> OptionalTensors:
        if not torch.is_grad_enabled() and not _transforms_active():
            return run_pullback(call, cotangents, tensors, back)
        return cast("OptionalTensors", _PullbackFunction.apply(call, back, len(cotangents), *cotangents, *tensors))


EAGER = _EagerEngine()


def _transforms_active() -> bool:
    return bool(_FUNCTORCH_ACTIVE())


def _forward_mode() -> bool:
    return bool(_FUNCTORCH_ACTIVE()) or forward_ad_active()




def differentiable(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()


_differentiable = differentiable


def filled(tangents: OptionalTensors, tensors: Tensors) -> Tensors:
    """``None`` tangents as zeros of their primal (expanded: O(1) memory)."""
    return tuple(
        t if t is not None else torch.zeros((), dtype=p.dtype, device=p.device).expand(p.shape)
        for t, p in zip(tangents, tensors)
    )


def tangent_map(engine: Engine, call: Call, tangents: OptionalTensors, tensors: Tensors) -> Tensors:
    """The op's pushforward of ``tangents`` at ``tensors`` (a linear op applied to them)."""
    rule = call.entry.tangent
    if rule is not None and (not call.linear or call.entry.second_order is None):  # pad's affine rule stays
        return rule(engine, call, tangents, tensors)
    if call.entry.data:  # data (indices) as they were: the op is linear in the others only
        tangents = tuple(p if data else t for t, p, data in zip(tangents, tensors, call.data_mask()))
    return engine.forward(call, filled(tangents, tensors))


def pullback_of_pullback(
    engine: Engine, call: Call, cotangents: OptionalTensors, tensors: Tensors, grads: OptionalTensors
) -> tuple[OptionalTensors, OptionalTensors]:
    """Gradients of (cotangents, tensors) for the pullback's result's gradients ``grads``."""
    rule = call.entry.second_order
    if rule is not None and not call.linear:
        return rule(engine, call, cotangents, tensors, grads)
    if all(g is None for g in grads):
        return (None,) * len(cotangents), (None,) * len(tensors)
    return tangent_map(engine, call, grads, tensors), (None,) * len(tensors)


# ---------------------------------------------------------------------------------------------
# eager: autograd Functions
# ---------------------------------------------------------------------------------------------


class _Box:
    """Carries the pullback closure from ``forward`` to ``setup_context`` (torch.func needs a
    ``forward`` without ``ctx``; its inputs reach ``setup_context`` as they were)."""

    __slots__ = ("back",)

    def __init__(self) -> None:
        self.back: Callable[[object], tuple[object, ...]] | None = None


class _Function(torch.autograd.Function):
    """Our Functions with ``setup_context`` (what torch.func transforms need)."""


class _Forward(_Function):
    @staticmethod
    def forward(call: Call, box: _Box, *tensors: torch.Tensor) -> Tensors:
        box.back = None  # built in backward from the saved tensors
        return _owned(FORWARDS[call.entry.name](call, tensors), tensors)

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[object, ...], output: object) -> None:
        call = cast("Call", inputs[0])
        box = cast("_Box", inputs[1])
        tensors = cast("Tensors", inputs[2:])
        c = cast("_Context", ctx)
        c.call, c.back = call, box.back
        box.back = None
        c.save_for_backward(*tensors)
        if _forward_mode():  # jvp reads the primals; plain reverse mode skips the cost
            c.save_for_forward(*tensors)
        c.set_materialize_grads(False)

    @staticmethod
    def backward(ctx: FunctionCtx, *cotangents: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        return _backward(cast("_Context", ctx), cotangents, 2)

    @staticmethod
    def jvp(ctx: FunctionCtx, *tangents: torch.Tensor | None) -> Tensors:
        c = cast("_Context", ctx)
        return tangent_map(EAGER, c.call, tangents[2:], c.saved_tensors)

    @staticmethod
    def vmap(info: object, in_dims: tuple[int | None, ...], call: Call, box: _Box, *tensors: torch.Tensor) -> tuple[Tensors, tuple[int, ...]]:
        size = cast("int", getattr(info, "batch_size"))
        dims = in_dims[2:]
        moved = tuple(t.movedim(d, 0) if d is not None else t for t, d in zip(tensors, dims))
        outputs = call.entry.batch(EAGER, call, moved, tuple(d is not None for d in dims), size)
        return outputs, (0,) * len(outputs)


def _backward(c: _Context, cotangents: OptionalTensors, statics: int) -> OptionalTensors:
    """A forward Function's gradients: ``None`` for its ``statics`` leading non-tensor
    inputs, then one per tensor (``None`` where torch needs none)."""
    tensors = c.saved_tensors  # torch's check that no input was modified in place
    if all(g is None for g in cotangents):
        return (None,) * (statics + len(tensors))
    grads = EAGER.pullback(c.call, cotangents, tensors, c.back)
    if len(grads) == 1:
        return (None,) * statics + grads
    return (None,) * statics + tuple(g if need else None for g, need in zip(grads, c.needs_input_grad[statics:]))


class _PlainForward(torch.autograd.Function):
    """The op in plain eager mode (no torch.func transform, no forward-mode AD): ``ctx`` in
    ``forward``, cheaper per call than ``setup_context`` (a tiny op's budget). Its
    first input is the call's :class:`TorchSignature`. A linear call saves no tensors (its pullback
    reads shapes only, as torch's own linear ops); one linear in its arrays whose pullback reads
    only its integer data (take, take_along_axis, index_add: the indices) saves that data alone,
    as torch's own indexing ops save their indices and not the indexed tensor (so an in-place
    update of ``x`` after the call does not fail the backward, and ``x`` is not kept alive by
    the graph); any other saves its inputs. A pullback is built in ``backward`` from the saved
    tensors: a closure made in ``forward`` would hold views of memory that FSDP2 frees and
    regathers in between."""

    @staticmethod
    def forward(ctx: FunctionCtx, signature: TorchSignature, *tensors: torch.Tensor) -> Tensors:
        c = cast("_Context", ctx)
        c.signature = signature
        if not signature.linear:
            mask = signature.data_only
            c.save_for_backward(*(tensors if mask is None else [t for t, data in zip(tensors, mask) if data]))
        c.set_materialize_grads(False)
        return signature.forward(tensors)

    @staticmethod
    def backward(ctx: FunctionCtx, *cotangents: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        c = cast("_Context", ctx)
        signature = c.signature
        if signature.linear:
            tensors = signature.placeholders()
            back = None if signature.special else signature.linear_pullback()
        elif signature.data_only is not None:
            saved = iter(c.saved_tensors)  # the data, the rest standing in as placeholders
            tensors = tuple(next(saved) if data else p for p, data in zip(signature.placeholders(), signature.data_only))
            back = None
        else:
            tensors, back = c.saved_tensors, None
        if all(g is None for g in cotangents):
            return (None,) * (1 + len(tensors))
        grads = EAGER.pullback(signature.call, cotangents, tensors, back)
        if len(grads) == 1:
            return (None, *grads)
        return (None, *(g if need else None for g, need in zip(grads, c.needs_input_grad[1:])))


_PLAIN_APPLY = _PlainForward.apply


class _Context(Protocol):
    signature: TorchSignature
    call: Call
    results: tuple[tuple[torch.Size, torch.dtype, torch.device] | None, ...]
    back: Callable[[object], tuple[object, ...]] | None
    counts: int
    saved_tensors: Tensors
    needs_input_grad: tuple[bool, ...]

    def save_for_backward(self, *tensors: torch.Tensor) -> None: ...

    def save_for_forward(self, *tensors: torch.Tensor) -> None: ...

    def set_materialize_grads(self, value: bool) -> None: ...


class _PullbackFunction(_Function):
    @staticmethod
    def forward(
        call: Call, back: Callable[[object], tuple[object, ...]] | None, counts: int, *values: torch.Tensor | None
    ) -> OptionalTensors:
        tensors = cast("Tensors", values[counts:])
        return run_pullback(call, values[:counts], tensors, back)

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[object, ...], output: object) -> None:
        c = cast("_Context", ctx)
        c.call = cast("Call", inputs[0])
        c.counts = cast("int", inputs[2])
        values = cast("OptionalTensors", inputs[3:])
        # None cotangents stay None: save_for_backward takes them.
        c.save_for_backward(*values)  # type: ignore[arg-type]
        if _forward_mode():  # jvp reads them (forward over reverse: a Hessian)
            c.save_for_forward(*values)  # type: ignore[arg-type]
            c.results = tuple(
                None if r is None else (r.shape, r.dtype, r.device) for r in cast("OptionalTensors", output)
            )
        c.set_materialize_grads(False)

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        c = cast("_Context", ctx)
        values = cast("OptionalTensors", c.saved_tensors)
        cotangents, tensors = values[: c.counts], cast("Tensors", values[c.counts :])
        d_cotangents, d_tensors = pullback_of_pullback(EAGER, c.call, cotangents, tensors, grads)
        return (None, None, None, *d_cotangents, *d_tensors)

    @staticmethod
    def jvp(ctx: FunctionCtx, *tangents: torch.Tensor | None) -> OptionalTensors:
        """Forward mode through a pullback (``torch.func.hessian``, ``jacfwd(jacrev(f))``, a
        Hessian-vector product ``jvp(grad(f), ...)``). A pullback is linear in its cotangents:
        their tangents go through the same pullback. A linear op's pullback reads no value of
        its tensors (only shapes and integer data), so theirs add nothing; a bilinear op's
        (kron) is linear in each factor too, so theirs add the pullback of the cotangents at
        the factors' tangents: ``d(dy . b) = t_dy . b + dy . t_b``. Until round 24 this was
        missing, and each of these transforms over an op whose pullback is our kernel raised
        torch's "You must implement the jvp function"."""
        c = cast("_Context", ctx)
        values = cast("OptionalTensors", c.saved_tensors)
        cotangents, tensors = values[: c.counts], cast("Tensors", values[c.counts :])
        d_cotangents = tangents[3 : 3 + c.counts]
        d_tensors = tangents[3 + c.counts :]
        terms: list[OptionalTensors] = []
        if any(t is not None for t in d_cotangents):
            terms.append(EAGER.pullback(c.call, d_cotangents, tensors))
        if not c.call.linear and any(t is not None for t in d_tensors) and any(dy is not None for dy in cotangents):
            terms.append(EAGER.pullback(c.call, cotangents, filled(d_tensors, tensors)))
        results: list[torch.Tensor | None] = []
        for position, meta in enumerate(c.results):
            if meta is None:
                results.append(None)
                continue
            parts = [part for term in terms if (part := term[position]) is not None]
            total = parts[0] if parts else torch.zeros(meta[0], dtype=meta[1], device=meta[2])
            for part in parts[1:]:
                total = total + part
            results.append(total)
        return tuple(results)

    @staticmethod
    def vmap(
        info: object,
        in_dims: tuple[int | None, ...],
        call: Call,
        back: Callable[[object], tuple[object, ...]] | None,
        counts: int,
        *values: torch.Tensor | None,
    ) -> tuple[OptionalTensors, tuple[int | None, ...]]:
        """A batch of pullbacks (``jacrev``, batched gradients): one call of our pullback per
        sample (the op's batching rule covers the forward, the hot path)."""
        size = cast("int", getattr(info, "batch_size"))
        results = []
        for index in range(size):
            sample = tuple(
                value.select(dim, index) if value is not None and dim is not None else value
                for value, dim in zip(values, in_dims[3:])
            )
            results.append(EAGER.pullback(call, sample[:counts], cast("Tensors", sample[counts:])))
        outputs: list[torch.Tensor | None] = []
        for position, like in enumerate(cast("Tensors", values[counts:])):
            items = [result[position] for result in results]
            if all(item is None for item in items):
                outputs.append(None)
                continue
            dim = in_dims[3 + counts + position]
            shape = (like.select(dim, 0) if dim is not None else like).shape
            outputs.append(
                torch.stack([item if item is not None else like.new_zeros(shape) for item in items])
            )
        return tuple(outputs), tuple(None if output is None else 0 for output in outputs)


# ---------------------------------------------------------------------------------------------
# torch.compile: custom ops
# ---------------------------------------------------------------------------------------------

_CALLS: dict[str, Call] = {}
_STATIC_INDEX = type(sr.ix[0])


def _encode_entry(entry: object) -> object:
    if isinstance(entry, slice):
        return ("slice", entry.start, entry.stop, entry.step)
    return "..." if entry is Ellipsis else entry


def _decode_entry(entry: object) -> object:
    if isinstance(entry, tuple):
        return slice(*entry[1:])
    return Ellipsis if entry == "..." else entry


def _encode_static(value: object) -> object:
    if isinstance(value, Val):
        return ("Val", value.value)
    if isinstance(value, _STATIC_INDEX):
        return ("ix", tuple(_encode_entry(entry) for entry in value.entries))
    return ("plain", value)


def _decode_static(value: object) -> object:
    kind, inner = cast("tuple[str, object]", value)
    if kind == "ix":
        return sr.ix[tuple(_decode_entry(entry) for entry in cast("tuple[object, ...]", inner))]
    if kind != "Val":
        return inner
    return Val(inner) if isinstance(inner, int) else Val(cast("tuple[int, ...]", inner))


def encode(call: Call) -> str:
    """The call's arrays layout and statics as text (Python literals: ints, tuples, None)."""
    text = repr((call.arrays, tuple((name, _encode_static(value)) for name, value in call.statics)))
    if not _IS_COMPILING():  # a table written while dynamo traces would be guarded on
        _CALLS.setdefault(call.entry.name + text, call)
    return text


def decode(entry: Entry, text: str) -> Call:
    call = _CALLS.get(entry.name + text)
    if call is None:
        arrays, statics = ast.literal_eval(text)
        call = Call(entry, arrays, tuple((name, _decode_static(value)) for name, value in statics))
        _CALLS[entry.name + text] = call
    return call


_META: dict[object, tuple[tuple[tuple[int, ...], torch.dtype], ...]] = {}
_NUMPY_DTYPES: dict[torch.dtype, np.dtype[np.generic]] = {
    torch.bool: np.dtype(np.bool_),
    torch.uint8: np.dtype(np.uint8),
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: np.dtype(np.int64),
    torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64),
    torch.complex64: np.dtype(np.complex64),
    torch.complex128: np.dtype(np.complex128),
}
_TORCH_DTYPES = {value: key for key, value in _NUMPY_DTYPES.items()}


def output_meta(call: Call, arrays: Sequence[torch.Tensor]) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
    """Shapes and dtypes of the op's results, from one run on stride-0 zero inputs."""
    shapes = tuple((tuple(int(n) for n in a.shape), a.dtype) for a in arrays)
    key = (call, shapes)
    meta = _META.get(key)
    if meta is None:
        check_tensors(call, arrays)
        dummies = [np.broadcast_to(np.zeros((), _NUMPY_DTYPES[dtype]), shape) for shape, dtype in shapes]
        args, kwargs = _arguments(call, dummies)
        outputs = cast("tuple[np.ndarray[tuple[int, ...], np.dtype[np.generic]], ...]", _outputs(call.entry.op(*args, **kwargs)))
        meta = tuple((tuple(output.shape), _TORCH_DTYPES[output.dtype]) for output in outputs)
        _META[key] = meta
    return meta


def _owned(outputs: Tensors, inputs: Tensors) -> Tensors:
    """A kernel op's results as its Function may return them: never an input itself."""
    for output in outputs:
        for tensor in inputs:  # plain loops: a tiny op's budget
            if output is tensor:
                return tuple(o.clone() if any(o is t for t in inputs) else o for o in outputs)
    return outputs


def _spec_dtype(dtype: torch.dtype) -> np.dtype[np.generic]:
    """The NumPy dtype a tensor's spec has: its own (bfloat16 as ml_dtypes'), so a 16-bit
    call is validated, and noted by ``sr.record``, with the dtype its kernels run in."""
    if dtype is torch.bfloat16:
        return _bfloat16()
    if dtype is torch.float16:
        return np.dtype(np.float16)
    return _NUMPY_DTYPES[dtype]


def validate(call: Call, tensors: Tensors) -> tuple[Callable[[], object] | None, int | None]:
    """Validate a new signature with the core's own plan (``ArraySpec``s: shapes and dtypes,
    no data, nothing computed): every error is the core's, before torch's op runs. Returns
    what every call must repeat: the plan lookup that counts plain (dynamic) statics, or
    ``None`` when every static is static; and the result's element count (``None`` when the
    plan does not say). The validation counts nothing (``uncounted``): the call that made the
    signature counts its plain statics as every later one does, when it runs (until round 23
    its first call counted them twice)."""
    specs = [sr.ArraySpec(tuple(int(n) for n in t.shape), _spec_dtype(t.dtype)) for t in tensors]
    op = cast("RuleOp", call.entry.op)
    args, kwargs = _arguments(call, specs)
    with uncounted():
        plan = op.prepare(args, kwargs)
    shape = getattr(plan, "out_shape", None)
    size = math.prod(shape) if type(shape) is tuple else None
    if all(value is None or type(value) is Val or type(value) is _STATIC_INDEX for _, value in call.statics):
        return None, size
    return (lambda: op.prepare(args, kwargs)), size


# --- kernel ops outside plain eager mode: torch's op forward, our vjp as a custom op -----------

def compiled(call: Call, tensors: Tensors) -> Tensors:
    """The call as ``torch.compile`` and fake tensors see it: torch's own op; for a kernel op
    inside an autograd Function whose backward is the ``stablerules::<name>_vjp`` custom op."""
    name = call.entry.name
    if FACTS[name].pullback == "torch":
        return FORWARDS[name](call, tensors)
    if FACTS[name].compiled_below is not None:
        outputs = FORWARDS[name](call, tensors)
        # A symbolic size (dynamic=True) guards only on its side of the bound: one graph below
        # it, one above, never one per size.
        if compiled_by_torch(name, sum(output.numel() for output in outputs), any(t.dtype in _HALF for t in tensors)):
            return outputs  # torch's autograd through torch's op: inductor fuses the backward
        # (else these traced outputs are unused, and dropped from the graph)
    if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
        # Nothing to differentiate: torch's op alone (an autograd Function whose inputs need
        # no gradient is traced by dynamo as a plain call of its forward, without a ctx).
        return _owned(FORWARDS[name](call, tensors), tensors)
    return cast("Tensors", _Kernel.apply(call, *tensors))


def _pin(value: object) -> object:
    if type(value) is tuple:
        return tuple(_pin(item) for item in cast("tuple[object, ...]", value))
    if type(value) is bool:
        return value
    return operator.index(cast("int", value))


def _pinned(call: Call) -> Call:
    """The call with its ``Val`` statics made constants of the graph being traced.

    A ``Val`` passed as an argument of a function compiled with ``dynamic=True`` reaches us
    with its ints made ``SymInt``s by dynamo (which then fail where the vjp's statics are
    written as text). A ``Val`` is static by definition: ``operator.index`` makes dynamo
    specialize each int (a guard on its value), so every value is its own graph, as it is
    its own kernel outside ``torch.compile``."""
    statics: list[tuple[str, object]] = []
    for name, value in call.statics:
        if type(value) is Val:
            value = Val(cast("int | tuple[int, ...]", _pin(value.value)))
        statics.append((name, value))
    return Call(call.entry, call.arrays, tuple(statics))


def _needed(call: Call) -> tuple[bool, ...]:
    """Which of a call's tensors its pullback reads (the others: only their shapes)."""
    if not call.linear:
        return (True,) * sum(max(count, 1) for _, count in call.arrays)
    return call.data_mask()


class _Kernel(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, call: Call, *tensors: torch.Tensor) -> Tensors:
        c = cast("Any", ctx)
        c.call = call
        c.save_for_backward(*tensors)
        c.set_materialize_grads(False)
        return _owned(FORWARDS[call.entry.name](call, tensors), tensors)

    @staticmethod
    def backward(ctx: FunctionCtx, *cotangents: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        c = cast("Any", ctx)
        tensors = cast("Tensors", c.saved_tensors)
        if all(g is None for g in cotangents):
            return (None,) * (1 + len(tensors))
        return (None, *_vjp(c.call, cotangents, tensors))


def _vjp(call: Call, cotangents: OptionalTensors, tensors: Tensors) -> OptionalTensors:
    needed = _needed(call)
    saved = [t for t, keep in zip(tensors, needed) if keep]
    shapes = [n for t in tensors for n in t.shape]
    ndims = [t.ndim for t in tensors]
    dtypes = ",".join(_dtype_name(t.dtype) for t in tensors)
    op = _VJPS[call.entry.name]
    grads = op(list(cotangents), saved, shapes, ndims, encode(call), dtypes)
    data = call.data_mask()
    return tuple(None if is_data or not differentiable(t) else g for g, t, is_data in zip(grads, tensors, data))


class _CompiledEngine:
    """Calls through torch's ops and the vjp custom ops (torch.compile, fake tensors)."""

    def forward(self, call: Call, tensors: Tensors) -> Tensors:
        return compiled(call, tensors)

    def pullback(self, call: Call, cotangents: OptionalTensors, tensors: Tensors) -> OptionalTensors:
        return _vjp(call, cotangents, tensors)


COMPILED = _CompiledEngine()
_VJPS: dict[str, Callable[..., list[torch.Tensor]]] = {}


def _rebuild(
    call: Call,
    saved: Sequence[torch.Tensor],
    shapes: Sequence[int],
    ndims: Sequence[int],
    dtypes: str,
    device: torch.device,
    shared: bool = False,
) -> Tensors:
    """A call's tensors from those its pullback reads and the others' shapes (stride-0 zeros).

    With ``shared`` (the vjp op's kernel: real tensors, concrete sizes) the stride-0 zeros are
    made once per shape, dtype and device and shared by every call and with the eager
    signatures of those shapes (:meth:`TorchSignature.placeholders`): a pullback reads only
    their shapes and dtypes. Making them on each call was 35-40 us of the embedding head's compiled
    backward (in its memory state, after our kernel's 25.6 MB pass). The vjp op's own backward
    may run inside a trace (fake tensors), so it makes its own."""
    kinds = _DTYPES_OF.get(dtypes)
    if kinds is None:
        kinds = _DTYPES_OF[dtypes] = tuple(getattr(torch, name) for name in dtypes.split(","))
    it = iter(saved)
    tensors: list[torch.Tensor] = []
    offset = 0
    for keep, ndim, dtype in zip(_needed(call), ndims, kinds):
        shape = tuple(shapes[offset : offset + ndim])
        offset += ndim
        if keep:
            tensors.append(next(it))
        elif shared:
            tensors.append(_placeholder(shape, dtype, device))
        else:
            tensors.append(torch.zeros((), dtype=dtype, device=device).expand(shape))
    return tuple(tensors)


_DTYPES_OF: dict[str, tuple[torch.dtype, ...]] = {}  # a vjp op's dtypes text, read
_PLACEHOLDERS: dict[tuple[object, ...], torch.Tensor] = {}


def _placeholder(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Stride-0 zeros of ``shape``, kept for the next call of that shape, dtype and device
    (only a plain tensor of plain int extents is kept: nothing a mode of torch's made)."""
    if not all(type(n) is int for n in shape):  # a symbolic extent (not hashable)
        return torch.zeros((), dtype=dtype, device=device).expand(shape)
    key = (shape, dtype, device)
    made = _PLACEHOLDERS.get(key)
    if made is None:
        made = torch.zeros((), dtype=dtype, device=device).expand(shape)
        if type(made) is torch.Tensor:
            if len(_PLACEHOLDERS) >= _MAX_SIGNATURES:
                _PLACEHOLDERS.clear()
            _PLACEHOLDERS[key] = made
    return made


def register_vjp(entry: Entry) -> None:
    """Define ``stablerules::<name>_vjp`` (once per name): the kernel op's pullback, its inputs'
    shapes as ``SymInt[]`` (the fake implementation builds them symbolically: one graph for
    every size), the tensors it reads, the call's statics (no shapes) and the dtypes as text."""
    name = entry.name
    if name in _VJPS or FACTS[name].pullback == "torch":
        return
    schema = "(Tensor?[] cotangents, Tensor[] saved, SymInt[] shapes, int[] ndims, str call, str dtypes) -> Tensor[]"

    def vjp_kernel(
        cotangents: list[torch.Tensor | None], saved: list[torch.Tensor], shapes: list[int], ndims: list[int], call: str, dtypes: str
    ) -> list[torch.Tensor]:
        bound = decode(entry, call)
        device = next(c.device for c in cotangents if c is not None)
        tensors = _rebuild(bound, saved, shapes, ndims, dtypes, device, shared=True)
        grads = run_pullback(bound, tuple(cotangents), tensors, None, dense=True)
        inputs = [*saved, *(c for c in cotangents if c is not None)]
        return [fresh(cast("torch.Tensor", g), inputs) for g in grads]

    def vjp_fake(
        cotangents: list[torch.Tensor | None], saved: list[torch.Tensor], shapes: list[int], ndims: list[int], call: str, dtypes: str
    ) -> list[torch.Tensor]:
        device = next(c.device for c in cotangents if c is not None)
        kinds = [getattr(torch, kind) for kind in dtypes.split(",")]
        out: list[torch.Tensor] = []
        offset = 0
        for ndim, dtype in zip(ndims, kinds):
            out.append(torch.empty(tuple(shapes[offset : offset + ndim]), dtype=dtype, device=device))
            offset += ndim
        return out

    def vjp_setup(ctx: FunctionCtx, inputs: tuple[object, ...], output: object) -> None:
        c = cast("Any", ctx)
        cotangents = cast("list[torch.Tensor | None]", inputs[0])
        c.counts = len(cotangents)
        c.shapes, c.ndims, c.text, c.dtypes = inputs[2], inputs[3], inputs[4], inputs[5]
        c.save_for_backward(*cotangents, *cast("list[torch.Tensor]", inputs[1]))

    def vjp_backward(ctx: FunctionCtx, grads: list[torch.Tensor | None]) -> tuple[object, ...]:
        c = cast("Any", ctx)
        values = cast("OptionalTensors", c.saved_tensors)
        cotangents, saved = values[: c.counts], cast("Tensors", values[c.counts :])
        bound = decode(entry, c.text)
        device = next(v.device for v in values if v is not None)
        tensors = _rebuild(bound, saved, c.shapes, c.ndims, c.dtypes, device)
        d_cotangents, d_tensors = pullback_of_pullback(COMPILED, bound, cotangents, tensors, tuple(grads))
        d_saved = [d for d, keep in zip(d_tensors, _needed(bound)) if keep]
        return list(d_cotangents), d_saved, None, None, None, None

    op = define(f"{name}_vjp", schema, vjp_kernel, vjp_fake, (vjp_backward, vjp_setup))
    _VJPS[name] = cast("Callable[..., list[torch.Tensor]]", op)


def fresh(tensor: torch.Tensor, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """``tensor`` as a custom op may return it: contiguous, aliasing none of ``inputs``."""
    return tensor.clone(memory_format=torch.contiguous_format) if _aliases(tensor, inputs) else tensor.contiguous()


def _aliases(tensor: torch.Tensor, others: Sequence[torch.Tensor]) -> bool:
    if tensor.numel() == 0:
        return False
    storage = tensor.untyped_storage().data_ptr()
    return any(other.numel() and other.untyped_storage().data_ptr() == storage for other in others)


# DTensor calls of kernel ops: _sharding's custom ops, running this module's functions.
DTENSOR = DTensorEngine(Kernels(run_op, run_pullback, output_meta, fresh, encode, decode, differentiable))


# ---------------------------------------------------------------------------------------------
# signatures: what a call needs, settled once
# ---------------------------------------------------------------------------------------------


_PLAIN_TENSOR = torch.Tensor
_PARAMETER = torch.nn.Parameter
_PLAIN_TENSORS = (_PLAIN_TENSOR, _PARAMETER)
_TENSOR = "tensor"  # a plain tensor argument, as it enters a signature's key
_DTYPE = operator.attrgetter("dtype")
_NDIM = operator.attrgetter("ndim")
_MAX_SIGNATURES = 4096  # per op; then the cache starts again (a program cycling through shapes)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check_tensors(call: Call, tensors: Sequence[torch.Tensor]) -> None:
    """``TypeError`` naming the op and the argument for a dtype or device we do not take."""
    names = [name if count < 0 else f"{name}[{index}]" for name, count in call.arrays for index in range(max(count, 1))]
    for name, tensor in zip(names, tensors):
        if tensor.dtype not in _NUMPY_DTYPES and tensor.dtype not in _HALF:
            supported = "bool, the integer dtypes, float16, bfloat16, float32, float64, complex64 and complex128"
            raise TypeError(
                f"stablerules.torch.{call.entry.name}: argument {name!r} has dtype {_dtype_name(tensor.dtype)}, "
                f"which stablerules does not support (its kernels take {supported}); convert it first, "
                f"e.g. {name}.to(torch.float32)"
            )
        if tensor.device.type not in ("cpu", "cuda", "meta"):
            raise TypeError(
                f"stablerules.torch.{call.entry.name}: argument {name!r} is on {tensor.device}, which is not "
                f"supported (CPU and CUDA tensors are)"
            )


class TorchSignature:
    """One call signature of one op: the bound :class:`Call` (statics included), its tensors'
    dtypes, shapes and devices, and how the op takes its arrays. Bound and validated once, at
    the first call with that signature; every later call looks it up by a key made from its
    arguments' structure, statics, dtypes and shapes, and goes straight to the op."""

    __slots__ = (
        "call", "entry", "order", "plain", "dtensor", "linear", "likes", "_placeholders", "_back",
        "native", "run", "recount", "special", "implementation", "direct", "data_only",
    )

    def __init__(self, call: Call, tensors: Tensors, order: tuple[int, ...] | None) -> None:
        check_tensors(call, tensors)
        self.recount, size = validate(call, tensors)
        # torch's autograd (plain torch code): a view op, or a kernel op below its size bound
        half = any(t.dtype in _HALF for t in tensors)
        self.implementation = implementation(call.entry.name, size, tuple(tuple(t.shape) for t in tensors), call, half)
        self.native = self.implementation.pullback == "torch"
        self.run = prepare(call, tensors, self.native)  # torch's op, the statics read once
        self.call = call
        self.entry = call.entry
        self.order = order  # where each bound tensor sits among the arguments, when not in order
        self.plain = all(type(t) in _PLAIN_TENSORS for t in tensors)
        self.dtensor = not self.plain and any(is_dtensor(t) for t in tensors)
        if self.dtensor and shard_rule(call.entry.name) is None and not self.native:
            raise TypeError(
                f"stablerules.torch.{call.entry.name}: DTensor inputs are not supported yet (no sharding rule); "
                f"call it on local tensors (DTensor.to_local, or full_tensor for the gathered array)"
            )
        self.linear = call.linear and call.primal_free  # saves no tensors, shares one pullback
        # linear in its arrays, its pullback reading only its data (indices): saves the data alone
        self.data_only = call.data_mask() if call.linear and not call.primal_free else None
        self.likes = tuple((tuple(t.shape), t.dtype, t.device) for t in tensors)
        # meta tensors and 16-bit floats off the CPU: run_pullback's own paths (no shared closure)
        self.special = any(t.is_meta or (t.dtype in _HALF and not t.is_cpu) for t in tensors)
        # torch's op and its autograd, called straight from TorchOp.__call__ (nothing to recount)
        self.direct = self.native and self.recount is None and order is None
        self._placeholders: Tensors | None = None
        self._back: Callable[[object], tuple[object, ...]] | None = None

    def refused(self, tensors: Tensors, error: Exception) -> None:
        """Where torch's op refused this call's tensors (``error``): the core's message when
        the core refuses them too (raised here); the caller re-raises torch's otherwise."""
        check_tensors(self.call, tensors)
        validate(self.call, tensors)
        if isinstance(error, Revalidate):
            raise AssertionError(f"stablerules.torch.{self.entry.name}: {error}") from None

    def forward(self, tensors: Tensors) -> Tensors:
        """The op's results: torch's own op (in a kernel op's Function: no aliasing)."""
        return _owned(self.run(tensors), tensors)

    def apply(self, tensors: Tensors) -> Tensors:
        """The call through the mechanism its tensors and torch's modes ask for: a view op is
        torch's own code (every mode, every tensor subclass); a kernel op an autograd
        Function around torch's op whose backward is our kernel."""
        if self.recount is not None:
            self.recount()
        elif RECORDINGS:  # an open ``sr.record`` notes every call's signature, not only a new one's
            validate(self.call, tensors)
        if self.native:
            try:
                outputs = self.run(tensors)
            except Exception as error:
                self.refused(tensors, error)
                raise
            return outputs if _GRAD_ENABLED() else _detached(outputs)
        if _FUNCTORCH_ACTIVE() or forward_ad_active():
            return cast("Tensors", _Forward.apply(self.call, _Box(), *tensors))
        if not self.plain:  # DTensor: custom ops with sharding rules; others (fake): the vjp op
            return DTENSOR.forward(self.call, tensors) if self.dtensor else compiled(self.call, tensors)
        if _GRAD_ENABLED():
            for tensor in tensors:
                if tensor.requires_grad:
                    return cast("Tensors", _PLAIN_APPLY(self, *tensors))
        return self.forward(tensors)

    def placeholders(self) -> Tensors:
        """Stride-0 zeros standing for the inputs where only their shapes and dtypes count
        (shared with the compiled pullbacks' of the same shapes: :func:`_placeholder`)."""
        if self._placeholders is None:
            self._placeholders = tuple(_placeholder(shape, dtype, device) for shape, dtype, device in self.likes)
        return self._placeholders

    def linear_pullback(self) -> Callable[[object], tuple[object, ...]]:
        """A linear call's pullback closure (it reads shapes and dtypes, no primal values)."""
        if self._back is None:
            self._back = _closure(self.call, self.placeholders())
        return self._back


def _detached(outputs: Tensors) -> Tensors:
    """Outputs made under ``no_grad``: torch keeps ``requires_grad`` on views made there, ours
    are detached as a result made under ``no_grad`` is."""
    for output in outputs:
        if output.requires_grad:
            return tuple(o.detach() if o.requires_grad else o for o in outputs)
    return outputs


def _walk(
    entry: Entry, args: tuple[object, ...], kwargs: dict[str, object], shaped: bool = True
) -> tuple[tuple[object, ...], list[torch.Tensor]] | None:
    """A call's signature key and its tensors in argument order; ``None`` where the arguments
    are not of the forms a key covers (the binder then says what is wrong). Without
    ``shaped`` (a view op: torch's op checks extents on every call) the key holds each
    tensor's dtype and number of axes, not its shape or device: what the core checks once per
    signature and torch's op does not check as NumPy does (a dtype we do not take, a complex
    ``pad`` constant for a real tensor, NumPy's result dtype of mixed inputs, the axes of a
    0-d tensor, torch's legacy ``(0,)`` tensor that ``torch.cat`` skips)."""
    key: list[object] = []
    tensors: list[torch.Tensor] = []
    for value in args:
        kind = type(value)
        if kind is _PLAIN_TENSOR or kind is _PARAMETER:  # the commonest forms first, inline (every call walks)
            tensors.append(value)  # type: ignore[arg-type]
            key.append(_TENSOR)
        elif kind is Val:  # its value and the value's type: C hashing and comparing, no Val methods
            key += (Val, type(value._value), value._value)  # type: ignore[attr-defined]
        elif kind is list or kind is tuple:  # a DenseNet block's 25 plain tensors: C loops
            items = cast("Sequence[object]", value)
            types = tuple(map(type, items))
            if items and types.count(_PLAIN_TENSOR) == len(types):
                tensors.extend(items)  # type: ignore[arg-type]
                key.append((_TENSOR, len(types)))
            elif not _token(value, key, tensors):
                return None
        elif not _token(value, key, tensors):
            return None
    if kwargs:
        for name, value in kwargs.items():
            key.append(name)
            if type(value) is Val:
                key += (Val, type(value._value), value._value)
            elif not _token(value, key, tensors):
                return None
    if shaped:
        for tensor in tensors:
            if tensor.is_cpu:
                key += (tensor.dtype, tensor.shape)
            else:
                key += (tensor.dtype, tensor.shape, tensor.device)
    else:  # C loops: a DenseNet block concatenates 25 tensors
        key += map(_DTYPE, tensors)
        key += map(_NDIM, tensors)
    return tuple(key), tensors


def _token(value: object, key: list[object], tensors: list[torch.Tensor]) -> bool:
    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        tensors.append(value)  # type: ignore[arg-type]
        key.append(_TENSOR)
        return True
    if kind is Val or kind is _STATIC_INDEX:
        key.append(value)
        return True
    if kind is tuple or kind is list:
        items = cast("Sequence[object]", value)
        types = tuple(map(type, items))  # C loops: a DenseNet block concatenates 25 tensors
        if items and types.count(torch.Tensor) == len(types):  # plain tensors: their count keys
            tensors.extend(cast("Sequence[torch.Tensor]", items))
            key.append((_TENSOR, len(types)))
            return True
        if items and all(issubclass(t, torch.Tensor) for t in types):  # subclasses: their types key
            tensors.extend(cast("Sequence[torch.Tensor]", items))
            key.append((_TENSOR, types))
            return True
        if all(type(item) is int for item in items):
            key.append((kind, *items))
            return True
        return False
    if isinstance(value, torch.Tensor):  # a subclass: its type keys apart
        tensors.append(value)
        key.append(kind)
        return True
    if value is None or kind in _PYTHON_SCALARS:
        key.append(kind)  # 1, 1.0 and True are equal keys; their types are not
        # 0.0 and -0.0 are equal keys too, and a NaN equals no key: a float keys by its bits
        if isinstance(value, float):
            key.append(value.hex())
        elif isinstance(value, complex):
            key.append((value.real.hex(), value.imag.hex()))
        else:
            key.append(value)
        return True
    return False


def _order(entry: Entry, call: Call, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[int, ...] | None:
    """Where each tensor of ``call`` (parameter order) sits among the tensors of the
    arguments as written (positional, then keywords as passed); ``None`` when the same."""
    if entry.variadic or not any(name in entry.arrays for name in kwargs):
        return None
    written: list[tuple[str, object]] = list(zip(entry.parameters, args)) + list(kwargs.items())
    start: dict[str, int] = {}
    offset = 0
    for name, value in written:
        if name in entry.arrays and isinstance(value, (torch.Tensor, tuple, list)):
            start[name] = offset
            offset += 1 if isinstance(value, torch.Tensor) else len(cast("Sequence[object]", value))
    order = tuple(start[name] + index for name, count in call.arrays for index in range(max(count, 1)))
    return None if order == tuple(range(len(order))) else order


_CALL_SIGNATURES: dict[tuple[object, ...], TorchSignature] = {}


def signature_of(call: Call, tensors: Tensors) -> TorchSignature:
    """The :class:`TorchSignature` of a call made by our own rules (batching, tangent maps)."""
    key = (call, *((t.dtype, t.shape, t.device, type(t)) for t in tensors))
    signature = _CALL_SIGNATURES.get(key)
    if signature is None:
        if len(_CALL_SIGNATURES) >= _MAX_SIGNATURES:
            _CALL_SIGNATURES.clear()
        signature = _CALL_SIGNATURES[key] = TorchSignature(call, tensors, None)
    return signature


class TorchOp(Generic[_R]):
    """One of our ops on torch tensors: ``op(*args, **kwargs)`` with ``stablerules``' argument
    forms (statics as ``Val``), returning a tensor (``_R`` is ``torch.Tensor``; a tuple of
    them for an op that returns a tuple) on the inputs' device; differentiable by every torch
    mechanism (see the module). Arguments are checked when a signature is first seen, not
    typed per op: one generic callable serves every op."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.signatures: dict[tuple[object, ...], TorchSignature] = {}
        # A view op's signatures are keyed by dtypes and ranks, not shapes: torch's op checks
        # each call's extents, and where it refuses one (or _native.Revalidate asks), the
        # core's check names the error.
        self.shaped = FACTS[entry.name].pullback != "torch"
        self.flat = not entry.data  # calls keyed from their arguments as given (no data to convert first)
        # direct signatures of calls of two positional plain CPU tensors, by their dtypes and shapes
        self.pairs: dict[tuple[object, ...], TorchSignature] = {}
        self.tuple_result = entry.tuple_result
        _TORCH_OPS.append(self)
        register_vjp(entry)
        self.__name__ = entry.name
        self.__qualname__ = entry.name
        self.__doc__ = (
            f"``stablerules.{entry.name}`` on torch tensors (same arguments, statics as ``Val``).\n\n"
            + (getattr(entry.op, "__call__").__doc__ or "")
        )

    def __call__(self, *args: object, **kwargs: object) -> _R:
        if _IS_COMPILING():  # dynamo traces this branch: torch's op, our vjp as a custom op
            call, tensors = bind(self.entry, args, kwargs)
            outputs = compiled(_pinned(call), tensors)
        elif self.flat and not RECORDINGS:
            # The hot path, flat: a known signature whose call is torch's own op (its forward
            # and its autograd: TorchSignature.direct) goes straight to it. Each frame here
            # costs several times its isolated time inside a model (bench/README.md, rounds 12
            # and 13). Two positional plain CPU tensors (a Kalman filter's small kron) are
            # keyed by their dtypes and shapes alone, without the walk.
            signature: TorchSignature | None = None
            walked: tuple[tuple[object, ...], list[torch.Tensor]] | None = None
            if self.pairs and not kwargs and len(args) == 2:
                found: Tensors = args  # type: ignore[assignment]  # checked before the lookup
                a, b = found
                if type(a) in _PLAIN_TENSORS and type(b) in _PLAIN_TENSORS and a.is_cpu and b.is_cpu:
                    signature = self.pairs.get((a.dtype, a.shape, b.dtype, b.shape))
            if signature is None:
                walked = _walk(self.entry, args, kwargs, self.shaped)
                if walked is not None:
                    try:
                        signature = self.signatures.get(walked[0])
                    except TypeError:  # an unhashable static: bound every call
                        walked = None
                    if signature is not None and signature.direct:
                        found = tuple(walked[1])  # type: ignore[index]  # walked is not None here
                    else:
                        signature = None
            if signature is not None:
                try:
                    outputs = signature.run(found)
                except Exception as error:
                    signature.refused(found, error)
                    raise
                if not _GRAD_ENABLED():
                    outputs = _detached(outputs)
            else:
                signature, found = self._signature(args, kwargs, walked)
                outputs = signature.apply(found)
        else:
            signature, found = self.signature(args, kwargs)
            outputs = signature.apply(found)
        return outputs if self.tuple_result else outputs[0]  # type: ignore[return-value]  # _R: the op's result

    def signature(self, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[TorchSignature, Tensors]:
        """The call's :class:`TorchSignature` (cached) and its tensors in the order it binds them."""
        if self.entry.data:  # data given as NumPy arrays or lists: tensors before the key is made
            args, kwargs = _with_data(self.entry, args, kwargs)
        return self._signature(args, kwargs, _walk(self.entry, args, kwargs, self.shaped))

    def _signature(
        self, args: tuple[object, ...], kwargs: dict[str, object], walked: tuple[tuple[object, ...], list[torch.Tensor]] | None
    ) -> tuple[TorchSignature, Tensors]:
        if walked is not None:
            key, tensors = walked
            try:
                signature = self.signatures.get(key)
            except TypeError:  # an unhashable static: bound every call
                signature, walked = None, None
            if signature is not None:
                order = signature.order
                return signature, tuple(tensors) if order is None else tuple(tensors[i] for i in order)
        call, bound = bind(self.entry, args, kwargs)
        signature = TorchSignature(call, bound, _order(self.entry, call, args, kwargs))
        if walked is not None:
            if len(self.signatures) >= _MAX_SIGNATURES:
                self.signatures.clear()
                self.pairs.clear()
            self.signatures[walked[0]] = signature
            if signature.direct and not kwargs and len(bound) == len(args) == 2:
                a, b = bound
                if type(a) in _PLAIN_TENSORS and type(b) in _PLAIN_TENSORS and a.is_cpu and b.is_cpu:
                    self.pairs[(a.dtype, a.shape, b.dtype, b.shape)] = signature
        return signature, bound

    def explain(self, *args: object, **kwargs: object) -> str:
        """``sr.explain(srt.<op>, *args)``: which implementation this call's signature runs in
        torch and why (the forward: torch's op; the pullback: torch's autograd or our kernel),
        followed, where our kernel runs the pullback, by the generated source of its pullback
        kernels. Settles the signature as a call would (the same checks and errors); runs
        nothing, compiles nothing."""
        if self.entry.data:
            args, kwargs = _with_data(self.entry, args, kwargs)
        call, tensors = bind(self.entry, args, kwargs)
        signature = TorchSignature(call, tensors, None)
        shapes = ", ".join(f"{_dtype_name(t.dtype)}{list(t.shape)}" for t in tensors)
        text = f"# --- {self.entry.name} in stablerules.torch: {self.entry.name}({shapes}) ---\n"
        text += signature.implementation.describe() + "\n"
        if "kernel" in (signature.implementation.pullback, signature.implementation.compiled_pullback):
            from .._cache import CACHE  # noqa: PLC0415 - explain only

            specs = [sr.ArraySpec(tuple(int(n) for n in t.shape), _spec_dtype(t.dtype)) for t in tensors]
            op = cast("RuleOp", self.entry.op)
            core_args, core_kwargs = _arguments(call, specs)
            for request in op.kernel_requests(*core_args, **core_kwargs):
                if request.signature.kind == "pullback":
                    source = CACHE.source(request.signature, request.render)
                    text += f"# --- {request.signature.op} {request.signature.kind} ---\n{source}\n"
        return text

    def implementations(self) -> dict[str, int]:
        """How many of this op's signatures seen so far (since the caches were last cleared)
        run each implementation: ``{"forward <torch op>; pullback <whose>": count}``."""
        counts: dict[str, int] = {}
        for signature in self.signatures.values():
            label = signature.implementation.label()
            counts[label] = counts.get(label, 0) + 1
        return counts

    def __repr__(self) -> str:
        return f"<stablerules.torch op {self.entry.name}>"


def _with_data(entry: Entry, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[tuple[object, ...], dict[str, object]]:
    """The arguments with data given as NumPy arrays or lists made tensors (as they are when
    every data argument is a tensor already: the common case, checked first)."""
    data = entry.data
    for name in data:
        position = entry.order[name]
        value = args[position] if position < len(args) else kwargs.get(name)
        if type(value) is not torch.Tensor and value is not None:
            break
    else:
        return args, kwargs
    parameters = entry.parameters
    args = tuple(as_data(entry, name, value) if name in data else value for name, value in zip(parameters, args)) + args[len(parameters) :]
    if kwargs:
        kwargs = {name: as_data(entry, name, value) if name in data else value for name, value in kwargs.items()}
    return args, kwargs


_IS_COMPILING = torch.compiler.is_compiling
_GRAD_ENABLED = torch.is_grad_enabled


# ---------------------------------------------------------------------------------------------
# clear_caches() reaches every table of the adapter
# ---------------------------------------------------------------------------------------------

_TORCH_OPS: list[TorchOp[Any]] = []  # every op object, whose signature tables clear_caches() empties


def _clear_tables() -> None:
    for table in (_LINEAR_PULLBACKS, _CALLS, _META, _CALL_SIGNATURES, _PLACEHOLDERS):
        table.clear()
    for op in _TORCH_OPS:
        op.signatures.clear()
        op.pairs.clear()


def _tables_size() -> int:
    tables: list[Sized] = [_LINEAR_PULLBACKS, _CALLS, _META, _CALL_SIGNATURES, _PLACEHOLDERS]
    return sum(len(table) for table in tables) + sum(len(op.signatures) + len(op.pairs) for op in _TORCH_OPS)


register_cache("stablerules.torch._adapter.signatures", _clear_tables, _tables_size)
