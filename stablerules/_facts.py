"""The engine facts an op family declares beside its rules (SPEC section 14; issue 34 step 5).

Each family module under ``stablerules.rules`` holds ``ENGINE_FACTS``: for each of its ops,
which implementation runs in torch (the forward is always torch's own op; the pullback
torch's autograd where it is already at the memory bound, or our compiled kernel, with the
forms of signatures where torch's own is faster) and which axes a sharded input keeps (the
DTensor strategies). The adapters read these tables; they hold no per-op knowledge of their
own. Nothing here imports an engine: the facts are data and pure functions of a call's
statics and its inputs' shapes.

- ``Statics``: a call's static arguments by name (``statics(name, default)``), each a ``Val``
  or a plain value, as the adapter bound them.
- ``Shapes``: the inputs' shapes, in argument order.
- An axis map (:data:`AxisMap`): for each axis that maps element for element to one axis of
  the result, that axis of every input and the result's axis (``[]``: no such axis, the
  sharded call is gathered first).
- A batching rule (:class:`BatchRule`): the op on arrays with a batch axis in front (a
  ``vmap``), written against :class:`ArrayOps`, the few array operations an engine lends it
  (torch's tensors in ``stablerules.torch._ops``), so that it names no engine.
- A forward (:class:`ForwardRule`): the op as the engine's own ops, written against
  :class:`Namespace`, the NumPy-named array functions an engine lends (torch's shim in
  ``stablerules.torch._native``); the engine's adapter holds no op's forward.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol, TypeVar, cast

from ._val import Val

Statics = Callable[[str, object], object]
Shapes = tuple[tuple[int, ...], ...]
AxisMap = list[tuple[tuple[int, ...], int]]
ShardRule = Callable[[Statics, Shapes], AxisMap]

VIEW = "torch's backward is views or one copy per input: already at the memory bound"
KERNEL = "our pullback kernel does in one pass what torch's backward does in several"


# A NamedTuple, not a frozen dataclass: its definition cost (see ``_schema.Param``).
class EngineForm(NamedTuple):
    """A form of a kernel op's signatures whose pullback an engine's own autodiff does faster
    than a call of our kernel (measured; the crossovers are in the benchmark notes): a static
    per-signature choice, made once from the statics and the inputs' shapes, never from data.
    ``below``: only for results of fewer elements (``None``: at every size measured, up to 1M
    elements). In torch (``TorchFacts.torch_forms``) an eager-mode choice: under
    ``torch.compile`` the op's ``TorchFacts.compiled_below`` decides instead (inductor's fused
    backward against our ``<name>_vjp`` custom op). In JAX (``EngineFacts.jax_forms``) shapes
    are static at trace time, so the choice holds under ``jit`` too. ``forward``: the engine's
    op that runs the form's forward in eager mode, where it is another than the op's (repeat's
    nearest upsample: ``F.interpolate``; ``Namespace.upsampler``)."""

    words: str
    test: Callable[[Statics, Shapes], bool]
    below: int | None = None
    forward: str | None = None  # torch's op for the form's forward, where not the op's own

    def covers(self, statics: Statics, shapes: Shapes, size: int | None) -> bool:
        """Whether a signature (result of ``size`` elements, ``None``: unknown) is of this form."""
        if self.below is not None and (size is None or size >= self.below):
            return False
        return self.test(statics, shapes)


# Under torch.compile, below this many result elements inductor's own backward of a one-pass
# pullback (repeat, tile, kron) beats a call of our custom op: fwd + bwd with a dense dy, 1 and
# 2 threads, inductor/ours 0.42-0.71 at 65K-524K elements, 0.94-1.16 at 2M-33M (the notes).
COMPILED_BELOW = 1 << 20


class TorchFacts(NamedTuple):
    """One op's implementation in torch: which torch op runs its forward, whose pullback runs
    (``"torch"``: torch's autograd; ``"kernel"``: our compiled kernel), and why; for a kernel
    op, the forms of its signatures that take torch's own pullback in eager mode, and
    ``compiled_below``: under ``torch.compile``, a signature whose result has fewer elements
    takes torch's autograd too (inductor fuses that backward into its generated kernels, where
    a call of our custom op costs more than it saves; measured, in the benchmark notes). With
    symbolic shapes (``dynamic=True``) the graph guards on which side of the bound its sizes
    lie: one graph for every size below it, one for every size above. ``half_once``: whether
    torch's own backward of those signatures rounds a 16-bit gradient once, as SPEC section 15
    asks of a pullback that adds (float32 sums); where it does not (kron: autograd's
    ``MulBackward`` rounds each product to the format before summing them, off the float64
    gradient rounded once by up to 28-780 units in the last place where the sum cancels), a
    signature with a 16-bit float input takes our kernel eager and compiled alike."""

    forward: str
    pullback: Literal["torch", "kernel"]
    why: str
    torch_forms: tuple[EngineForm, ...] = ()
    compiled_below: int | None = None
    half_once: bool = True


def replicated(statics: Statics, shapes: Shapes) -> AxisMap:
    """No axis kept: a sharded input is gathered (kron; reshape and broadcast_to, whose
    statics name global shapes that a rank's shard does not have)."""
    return []


A = TypeVar("A")


class OpCall(Protocol):
    """A bound call as a batching rule sees it: its statics by name, and the same call with
    some statics replaced (or added)."""

    def static(self, name: str, default: object = None) -> object: ...

    def replace(self, **statics: object) -> OpCall: ...


class ArrayOps(Protocol[A]):
    """The array operations an engine lends a batching rule (arrays of type ``A``)."""

    def forward(self, call: OpCall, arrays: tuple[A, ...]) -> tuple[A, ...]:
        """The op's call on ``arrays`` (differentiable in the engine, batched again if nested)."""
        ...

    def forward_as(self, name: str, call: OpCall, arrays: tuple[A, ...], **statics: object) -> tuple[A, ...]:
        """The op ``name`` on ``call``'s arrays, with exactly ``statics`` (hstack as concatenate)."""
        ...

    def shape(self, x: A) -> tuple[int, ...]: ...

    def reshape(self, x: A, shape: tuple[int, ...]) -> A:
        """``x`` reshaped in C order (one extent may be ``-1``)."""
        ...

    def expand(self, x: A, size: int) -> A:
        """``x`` with a leading axis of extent ``size`` (a broadcast view)."""
        ...

    def movedim(self, x: A, source: int | tuple[int, ...], destination: int | tuple[int, ...]) -> A: ...

    def multiply(self, a: A, b: A) -> A:
        """Elementwise product, broadcasting (differentiable in the engine)."""
        ...

    def add(self, a: A, b: A) -> A: ...

    def offsets(self, size: int, n: int, ndim: int, like: A) -> A:
        """``arange(size) * n`` shaped ``(size, 1, ...)`` to ``ndim`` axes, on ``like``'s device."""
        ...

    def wrapped(self, call: OpCall, indices: A, n: int, axis: int | None) -> A:
        """``indices`` range-checked against an axis of extent ``n`` (the op's own error) and
        negative ones wrapped."""
        ...


class Revalidate(Exception):
    """Raised by a forward for inputs the engine's op would take but the core refuses (a
    ``pad_width`` of the wrong length, sections that do not divide an axis): the adapter then
    runs the core's check, whose error names the argument."""


class Namespace(Protocol[A]):
    """The array functions an engine lends the ops' forwards (arrays of type ``A``), each with
    NumPy's semantics and NumPy's result dtypes: ``torch`` lends a shim over its own ops
    (``stablerules.torch._native``). A forward written against it names no engine, and a new
    op composed of these functions costs no engine anything. Axes are non-negative or
    negative ints as NumPy takes them; the inputs were validated by the op's plan first."""

    def shape(self, x: A) -> tuple[int, ...]: ...

    def promoted(self, arrays: tuple[A, ...]) -> tuple[A, ...]:
        """The arrays in NumPy's result dtype of them all (the very tuple given, when their
        dtypes agree)."""
        ...

    def joins_promoting(self, arrays: tuple[A, ...]) -> bool:
        """Whether the engine's own ``concatenate`` and ``stack`` of arrays of these dtypes
        promote them to NumPy's result dtype by themselves, in the join (no conversion of each
        input first): asked once per signature, whose dtypes it fixes."""
        ...

    def reshape(self, x: A, shape: Sequence[int]) -> A: ...

    def broadcast_to(self, x: A, shape: Sequence[int]) -> A:
        """``x`` broadcast to ``shape`` (a view; ``-1`` keeps an extent)."""
        ...

    def permute_dims(self, x: A, axes: tuple[int, ...]) -> A: ...

    def flip(self, x: A, axes: tuple[int, ...]) -> A: ...

    def roll(self, x: A, shifts: int | tuple[int, ...], axes: tuple[int, ...] | None = None) -> A:
        """``np.roll``; ``axes`` ``None``: the flattened array by one shift."""
        ...

    def concatenate(self, arrays: list[A] | tuple[A, ...], axis: int) -> A:
        """Arrays of one dtype joined along ``axis``."""
        ...

    def stack(self, arrays: list[A] | tuple[A, ...], axis: int) -> A: ...

    def hstack(self, arrays: list[A] | tuple[A, ...]) -> A: ...

    def vstack(self, arrays: list[A] | tuple[A, ...]) -> A: ...

    def repeat(self, x: A, repeats: int | tuple[int, ...], axis: int) -> A:
        """``np.repeat`` along ``axis`` (one count, or one per element)."""
        ...

    def tile(self, x: A, reps: tuple[int, ...]) -> A:
        """``np.tile``, or Julia's ``outer`` counts when ``reps`` has ``x``'s rank."""
        ...

    def upsampler(self, x: A, counts: tuple[int, ...]) -> Callable[[A], A] | None:
        """Julia's ``repeat(·; inner=counts)`` (a count per axis of ``x``) as one op of the
        engine's, for arrays of ``x``'s signature (rank, dtype, shape), where the engine has
        one and it is the faster form (torch's eager nearest-neighbour upsample of a small
        signature whose pullback is torch's own); ``None`` where not: the forward then
        repeats axis by axis."""
        ...

    def fresh(self, y: A, x: A) -> A:
        """``y``, copied if it is ``x`` or a view of it (a kernel op's result owns its memory)."""
        ...

    def single_sum(self, x: A) -> bool:
        """Whether a forward on ``x`` whose pullback adds must be one op of the engine's (one
        broadcast and one reshape), not a chain of them: where the engine's autodiff records
        the forward and rounds a 16-bit gradient after each op's sum (torch's autograd, whose
        backward of two ``repeat_interleave`` rounds twice), so that the pullback rounds
        once (SPEC section 15). ``False`` where our kernel runs the pullback, and for other
        dtypes."""
        ...

    def kron(self, a: A, b: A) -> A:
        """``np.kron`` of arrays of one dtype."""
        ...

    def scale(self, x: A, scalar: complex) -> A:
        """``np.kron(x, scalar)``: NumPy's result dtype for ``x`` and the Python scalar."""
        ...

    def add(self, a: A, b: A) -> A: ...

    def pad(self, x: A, widths: tuple[tuple[int, int], ...], value: object) -> A:
        """``np.pad`` in constant mode, ``(before, after)`` per axis; ``value`` a Python
        scalar (complex included)."""
        ...

    def copy(self, x: A) -> A: ...

    def split(self, x: A, sections: int | tuple[int, ...], axis: int) -> tuple[A, ...]:
        """``np.array_split`` (equal sections, or cuts at indices)."""
        ...

    def getitem(self, x: A, index: tuple[object, ...]) -> A:
        """Basic indexing: ints, slices of positive step, ``None`` and ``Ellipsis``."""
        ...

    def sum(self, x: A, axes: tuple[int, ...], keepdims: bool) -> A:
        """``np.sum``, NumPy's result dtype."""
        ...

    def mean(self, x: A, axes: tuple[int, ...], keepdims: bool) -> A:
        """``np.mean``, NumPy's result dtype; 16-bit floats summed in float32."""
        ...

    def wrapped(self, call: OpCall, indices: A, n: int, axis: int | None) -> A:
        """``indices`` range-checked against an axis of extent ``n`` (the op's own error) and
        negative ones wrapped."""
        ...

    def take(self, x: A, indices: A, axis: int) -> A:
        """``np.take`` of wrapped 1-d indices along ``axis``."""
        ...

    def gather(self, x: A, indices: A, axis: int) -> A:
        """``np.take_along_axis`` of wrapped indices along ``axis`` (the other axes broadcast)."""
        ...

    def index_add(self, x: A, indices: A, values: A, axis: int) -> A:
        """``x`` plus ``values`` at wrapped 1-d ``indices`` along ``axis`` (a new array of
        ``x``'s dtype, as NumPy's ``np.add.at`` of a copy): ``values`` of the shape it adds,
        cast to ``x``'s dtype first (same kind, the op's check)."""
        ...


class ForwardRule(Protocol):
    """``(xp, call, arrays) -> outputs``: the op's forward in an engine, as the engine's own
    ops (``xp``), so that its compilers see and fuse it. It reproduces the NumPy op's results
    exactly: values, dtypes and shapes."""

    def __call__(self, xp: Namespace[A], call: OpCall, arrays: tuple[A, ...]) -> tuple[A, ...]: ...


class PreparedRule(Protocol):
    """``(xp, call, arrays) -> forward or None``: an op's forward for one signature (``arrays``
    its first call's) with its statics read once, for the hot ops' eager calls (``None``: this
    signature takes the plain :class:`ForwardRule`). A signature fixes its arrays' dtypes and
    ranks (an engine keys them for every op), not a view op's extents."""

    def __call__(self, xp: Namespace[A], call: OpCall, arrays: tuple[A, ...]) -> Callable[[tuple[A, ...]], tuple[A, ...]] | None: ...


class BatchRule(Protocol):
    """``(ops, call, arrays, batched, size) -> outputs``: the op on arrays whose leading axis
    (of extent ``size``) is the batch where ``batched`` says so (the others are the unbatched
    arrays as they were); every output's batch axis is 0."""

    def __call__(self, ops: ArrayOps[A], call: OpCall, arrays: tuple[A, ...], batched: tuple[bool, ...], size: int) -> tuple[A, ...]: ...


@dataclass(frozen=True)
class EngineFacts:
    """An op's facts for every engine: ``torch`` (:class:`TorchFacts`), ``shard`` (the axes a
    sharded input keeps; ``None``: no sharding rule yet, DTensor inputs are refused),
    ``batch`` (its batching rule; ``None``: the engine batches the op itself, as torch does
    its own indexing) and ``scalars`` (a Python scalar may stand for an array argument, as in
    NumPy's ``kron(a, 2.0)``: the scalar is then a static); ``forward`` (its forward in an
    engine, as the engine's own ops: a :class:`ForwardRule`) and, for a hot op, ``prepared``
    (the same with the statics read once per signature); ``jax_forms``, for an op that JAX
    runs as our primitive (repeat, tile, kron), the forms of its signatures whose pullback is
    JAX's own autodiff of the op's XLA forward instead: XLA fuses that with its neighbours in
    a jitted program, where our kernel's custom call stands alone (a Kalman filter's 2x2
    krons in a ``scan``)."""

    torch: TorchFacts
    shard: ShardRule | None = replicated
    batch: BatchRule | None = None
    scalars: bool = False
    forward: ForwardRule = field(kw_only=True)
    prepared: PreparedRule | None = field(default=None, kw_only=True)
    jax_forms: tuple[EngineForm, ...] = field(default=(), kw_only=True)


def value(static: object) -> object:
    """A static's value (a ``Val``'s, or the plain value)."""
    return static.value if isinstance(static, Val) else static


def counts(static: object) -> tuple[int, ...]:
    """An int or tuple static as a tuple (``None``: empty)."""
    got = value(static)
    if got is None:
        return ()
    return (got,) if isinstance(got, int) else cast("tuple[int, ...]", got)


def axes(static: object, ndim: int) -> set[int] | None:
    """An axis static as a set of non-negative axes (``None``: every axis)."""
    got = value(static)
    if got is None:
        return None
    return {axis + ndim if axis < 0 else axis for axis in counts(got)}


def others(ndim: int, moved: set[int] | None, inputs: int = 1) -> AxisMap:
    """Every axis but ``moved`` (``None``: all moved) is the same axis of the result."""
    if moved is None:
        return []
    return [((axis,) * inputs, axis) for axis in range(ndim) if axis not in moved]


# --- batching rules' helpers -------------------------------------------------------------------


def shifted(axis: int) -> int:
    """An axis of the unbatched op as an axis of the batched one (batch axis in front)."""
    return axis + 1 if axis >= 0 else axis


def expanded(ops: ArrayOps[A], arrays: tuple[A, ...], batched: tuple[bool, ...], size: int) -> tuple[A, ...]:
    """Every array with the batch axis in front (an unbatched one broadcast: a view)."""
    return tuple(x if b else ops.expand(x, size) for x, b in zip(arrays, batched))


def flattened(ops: ArrayOps[A], arrays: tuple[A, ...], size: int) -> tuple[A, ...]:
    """Each batched array as ``(size, its sample's elements)``."""
    return tuple(ops.reshape(x, (size, math.prod(ops.shape(x)[1:]))) for x in arrays)


def shift_axes(name: str, default: object = None, *, none: Literal["all", "flatten", "flatten-reshape"] = "all") -> BatchRule:
    """The batching rule of an op whose static ``name`` is an axis or a tuple of axes (int,
    negative allowed): each shifted past the batch axis. ``None`` (or an absent ``name``
    with ``default`` None) means every axis (``none="all"``: flip, sum, mean) or the
    flattened array (``none="flatten"``: concatenate; ``"flatten-reshape"``: roll, whose
    result has the input's shape)."""

    def shift_axes_rule(ops: ArrayOps[A], call: OpCall, arrays: tuple[A, ...], batched: tuple[bool, ...], size: int) -> tuple[A, ...]:
        arrays = expanded(ops, arrays, batched, size)
        axis = value(call.static(name, default))
        if axis is None:
            if none != "all":
                outputs = ops.forward(call.replace(**{name: Val(1)}), flattened(ops, arrays, size))
                if none == "flatten":
                    return outputs
                return tuple(ops.reshape(output, ops.shape(arrays[0])) for output in outputs)
            moved: object = Val(tuple(range(1, len(ops.shape(arrays[0])))))
        elif isinstance(axis, int):
            moved = Val(shifted(axis))
        else:
            moved = Val(tuple(shifted(a) for a in cast("tuple[int, ...]", axis)))
        return ops.forward(call.replace(**{name: moved}), arrays)

    return shift_axes_rule
