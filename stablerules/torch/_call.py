"""The torch adapter's call types, below every other torch module: an op's :class:`Entry`
(its schema row's parameters and its torch rules), a bound :class:`Call`, the
:class:`Engine` a call goes through, and the rule protocols. The adapter, the forwards
(``_native``), the DTensor ops (``_sharding``) and the op table (``_ops``) import them from
here, so none of them imports another for its types (no circle between torch modules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, TypeAlias

import torch

from .._binding import Binder, binder

Tensors: TypeAlias = tuple[torch.Tensor, ...]
OptionalTensors: TypeAlias = tuple[torch.Tensor | None, ...]


class Engine(Protocol):
    def forward(self, call: Call, tensors: Tensors) -> Tensors: ...

    def pullback(self, call: Call, cotangents: OptionalTensors, tensors: Tensors) -> OptionalTensors: ...


class BatchRule(Protocol):
    """``(engine, call, tensors, batched, size) -> outputs``: the op on tensors whose leading
    axis (of extent ``size``) is the batch where ``batched`` says so (the others are the
    unbatched tensors as they were); every output's batch axis is 0."""

    def __call__(
        self, engine: Engine, call: Call, tensors: Tensors, batched: tuple[bool, ...], size: int
    ) -> Tensors: ...


class SecondOrderRule(Protocol):
    """``(engine, call, cotangents, tensors, grads) -> (grads of cotangents, grads of
    tensors)``: the pullback of a non-linear op's pullback, in terms of the op and its pullback."""

    def __call__(
        self, engine: Engine, call: Call, cotangents: OptionalTensors, tensors: Tensors, grads: OptionalTensors
    ) -> tuple[OptionalTensors, OptionalTensors]: ...


class TangentRule(Protocol):
    """``(engine, call, tangents, tensors) -> tangents of the outputs`` (a non-linear op's jvp)."""

    def __call__(self, engine: Engine, call: Call, tangents: OptionalTensors, tensors: Tensors) -> Tensors: ...


@dataclass(eq=False)
class Entry:
    """One ``stablerules`` op as seen from torch.

    Its parameters are the op's schema row's (``stablerules._schema``);
    ``parameters`` are their names in call order, ``"*name"`` for a variadic one,
    whose arguments are all tensors); ``arrays`` names those holding a tensor or a sequence
    of tensors, every other parameter is static. ``data`` names the arrays that
    are integer data (``take``'s ``indices``): a tensor (a NumPy array or a list is made one)
    that travels with the others to the kernels but is never differentiated, and whose values
    are part of no signature (new indices, same shape and dtype: no new signature). A call
    with data is linear in its other tensors, but its pullback reads the data: it is saved
    for the backward, and no pullback closure is shared between calls. A linear op (``second_order``
    is ``None``) has a pullback that reads no primal values and is its own tangent map; a
    non-linear one supplies ``tangent`` (its jvp) and ``second_order``.
    """

    name: str
    op: Callable[..., object]
    arrays: frozenset[str]
    batch: BatchRule
    tangent: TangentRule | None = None
    second_order: SecondOrderRule | None = None
    tuple_result: bool = False  # the op returns a tuple of arrays (split)
    scalars: bool = False  # a Python scalar may stand for an array argument (kron, as NumPy's)
    data: frozenset[str] = frozenset()  # array parameters that are integer data (take's indices)

    binder: Binder = field(init=False)
    parameters: tuple[str, ...] = field(init=False)  # in call order, ``"*name"`` for a variadic one
    variadic: bool = field(init=False)
    order: dict[str, int] = field(init=False)  # each parameter's position (without a ``*``)
    required: tuple[str, ...] = field(init=False)  # positional parameters without a default

    def __post_init__(self) -> None:
        # Plain attributes, not properties: dynamo traces the binding code under torch.compile.
        self.binder = binder(self.name)
        self.parameters = tuple(
            ("*" if param.role == "varargs" else "") + param.name for param in self.binder.schema.params
        )
        self.variadic = self.binder.variadic
        self.order = {name.lstrip("*"): index for index, name in enumerate(self.parameters)}
        self.required = tuple(
            param.name
            for param in self.binder.schema.params
            if param.default is None and not param.keyword_only and param.role != "varargs"
        )

    def __repr__(self) -> str:
        return f"<stablerules.torch entry {self.name}>"


class Call(NamedTuple):
    """A bound call: which parameters hold a tensor (count ``-1``) or a sequence of ``count``
    tensors, in parameter order, and the static arguments (passed to the op by keyword, in
    parameter order). Hashable: it keys the per-signature caches."""

    entry: Entry
    arrays: tuple[tuple[str, int], ...]
    statics: tuple[tuple[str, object], ...]

    @property
    def linear(self) -> bool:
        """Whether the call is linear in its tensors: a linear op, or a bilinear one with a
        Python scalar for one factor (``kron(t, 2.0)``)."""
        return self.entry.second_order is None or len(self.arrays) < len(self.entry.arrays)

    @property
    def primal_free(self) -> bool:
        """Whether a linear call's pullback reads no tensor's values (no data among them)."""
        return not self.entry.data

    def data_mask(self) -> tuple[bool, ...]:
        """For each tensor (in order): whether it is data (never differentiated)."""
        data = self.entry.data
        return tuple(name in data for name, count in self.arrays for _ in range(max(count, 1)))

    def static(self, name: str, default: object = None) -> object:
        for key, value in self.statics:
            if key == name:
                return value
        return default

    def replace(self, entry: Entry | None = None, /, **statics: object) -> Call:
        """This call with some statics replaced (or added), possibly as a call of another op."""
        merged = dict(self.statics)
        merged.update(statics)
        order = self.entry.order
        return Call(self.entry if entry is None else entry, self.arrays, tuple(sorted(merged.items(), key=lambda item: order[item[0]])))
