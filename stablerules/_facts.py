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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from ._val import Val

Statics = Callable[[str, object], object]
Shapes = tuple[tuple[int, ...], ...]
AxisMap = list[tuple[tuple[int, ...], int]]
ShardRule = Callable[[Statics, Shapes], AxisMap]

VIEW = "torch's backward is views or one copy per input: already at the memory bound"
KERNEL = "our pullback kernel does in one pass what torch's backward does in several"


@dataclass(frozen=True)
class TorchForm:
    """A form of a kernel op's signatures whose pullback torch's own autograd does faster than
    a call of our kernel, in eager mode (measured; the crossovers are in the benchmark notes):
    a static per-signature choice, made once from the statics and the inputs' shapes, never
    from data. ``below``: only for results of fewer elements (``None``: at every size
    measured, up to 1M elements). Under ``torch.compile`` such a signature's pullback stays our
    ``<name>_vjp`` custom op (the choice reads shapes, which are symbolic there)."""

    words: str
    test: Callable[[Statics, Shapes], bool]
    below: int | None = None

    def covers(self, statics: Statics, shapes: Shapes, size: int | None) -> bool:
        """Whether a signature (result of ``size`` elements, ``None``: unknown) is of this form."""
        if self.below is not None and (size is None or size >= self.below):
            return False
        return self.test(statics, shapes)


@dataclass(frozen=True)
class TorchFacts:
    """One op's implementation in torch: which torch op runs its forward, whose pullback runs
    (``"torch"``: torch's autograd; ``"kernel"``: our compiled kernel), and why; for a kernel
    op, the forms of its signatures that take torch's own pullback in eager mode."""

    forward: str
    pullback: Literal["torch", "kernel"]
    why: str
    torch_forms: tuple[TorchForm, ...] = ()


def replicated(statics: Statics, shapes: Shapes) -> AxisMap:
    """No axis kept: a sharded input is gathered (kron; reshape and broadcast_to, whose
    statics name global shapes that a rank's shard does not have)."""
    return []


@dataclass(frozen=True)
class EngineFacts:
    """An op's facts for every engine: ``torch`` (:class:`TorchFacts`) and ``shard`` (the axes
    a sharded input keeps; ``None``: no sharding rule yet, DTensor inputs are refused)."""

    torch: TorchFacts
    shard: ShardRule | None = replicated


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
