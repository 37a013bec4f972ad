"""The ``Plan`` base: one signature of one op, built once and reused, and what its dense
pullback may be (a function, or a :class:`KernelPullback`: one CPU kernel launch). The op
module's contract is in ``_rule``'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from . import _pool
from ._arrays import ArrayLike, InputFacts, joint_namespace
from ._launch import cpu_launcher
from ._memo import cached_property
from ._op import KernelRequest
from ._results import NO_TANGENT, ZERO_TANGENT, ResultForm
from ._tangents import Cotangent, Fill
from ._typing import RulePullback

if TYPE_CHECKING:
    from ._key import Kernel

DensePullback = Callable[[Any], tuple[object, ...]]
"""A plan's pullback of a dense cotangent (an array; for a plan with ``output_shapes``, the
tuple of prepared cotangents): one tangent per array argument."""

SavedDense = Callable[[Any, Any], tuple[object, ...]]
"""A ``saves_primals`` plan's dense pullback as one function of ``(saved, dy)``, shared by
every rrule of the signature (:meth:`Plan.saved_dense`)."""


# A NamedTuple, not a frozen dataclass: its definition cost (see ``_schema.Param``).
class KernelPullback(NamedTuple):
    """A dense pullback that is one CPU kernel launch, which a plan may return from
    ``pullback`` instead of a function: ``dx = allocate(size, dtype)`` (``_pool.zeros`` when
    ``zeros``, else ``_pool.empty``: ``np.empty``, from 1 MiB up a block of the output pool),
    then ``kernel(dy_flat, dx, *trailing, lo, hi)`` over ``[0, extent)`` (split as
    :func:`cpu_launcher` splits), and the tangents are ``dx`` viewed as
    ``shape`` followed by ``rest``. The scaffold then generates the whole pullback as one
    function (the hot path of a small pullback is mostly call overhead: a frame less, and the
    cotangent's layout checked once, see ``_pullbacks.kernel_pullback``)."""

    kernel: Kernel
    trailing: tuple[object, ...]
    extent: int
    work: int
    size: int
    dtype: np.dtype[np.generic]
    shape: tuple[int, ...]
    zeros: bool = False
    rest: tuple[object, ...] = ()

    def dense(self) -> DensePullback:
        """The same pullback as a plain dense function (the scaffold's general path)."""
        launch = cpu_launcher(self.kernel, 2, self.trailing, extent=self.extent, work=self.work)
        allocate = _pool.allocator(self.size * self.dtype.itemsize, self.zeros)
        size, dtype, shape, rest = self.size, self.dtype, self.shape, self.rest

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            dx = allocate(size, dtype)
            launch(dy.reshape(-1), dx)
            return (dx.reshape(shape), *rest)

        return dense


# Generated with its constants as globals, not closure cells, and with no comprehension (which


class Plan:
    """One signature of one op, built once and reused (see the module docstring).

    A subclass computes what its signature fixes, then calls this constructor with what the
    scaffold reads, every field typed here:

    - ``op``: the op's name; ``inputs``: the facts of each array argument, in order (from
      ``_arrays.input_facts``): they give ``input_shapes``, and by default the namespace (the
      arguments' device), ``input_dtypes`` (each argument's native dtype) and
      ``input_tangents`` (which arguments get a tangent: the floating ones, when the output
      is differentiable);
    - ``out_shape``, ``out_dtype`` (default: the first input's native dtype): the primal
      output; ``output_shapes``: for several outputs (``split``) their shapes, all of
      ``out_dtype``; ``differentiable`` (default: ``out_dtype`` is floating);
    - ``kernel_entries``: which of ``"forward"``, ``"pullback"``, ``"pushforward"`` launch a
      compiled kernel (empty for view ops and empty outputs), checked inside the guards;
    - ``any_layout``: the dense pullback takes ``dy`` in any memory layout (slicing does).

    ``saves_primals`` (the pullback reads the primals, as kron's does) is a property of the
    plan's class, not of a signature. The scaffold's own per-plan memos (pullbacks and result
    forms by arity) are fields too.
    """

    saves_primals: ClassVar[bool] = False
    saved_inputs: tuple[int, ...] | None = None
    """For ``saves_primals``: the positions (among the array arguments) whose *values*
    ``save`` reads; ``None``: all of them. ``sr.pullback`` takes ``ArraySpec``s for the
    others (take's ``x``: its pullback reads only the indices)."""

    op: str
    out_shape: tuple[int, ...]
    out_dtype: np.dtype[np.generic]
    output_shapes: tuple[tuple[int, ...], ...] | None
    differentiable: bool
    input_tangents: tuple[bool, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[np.dtype[np.generic], ...]
    namespace: ModuleType
    kernel_entries: frozenset[str]
    any_layout: bool
    pullbacks: dict[int, RulePullback]
    result_forms: dict[int, ResultForm]
    saved_forms: dict[int, Any]  # _pullbacks.SavedForm or None, per positional arity

    def __init__(
        self,
        op: str,
        inputs: Sequence[InputFacts],
        *,
        out_shape: tuple[int, ...],
        out_dtype: np.dtype[np.generic] | None = None,
        output_shapes: tuple[tuple[int, ...], ...] | None = None,
        differentiable: bool | None = None,
        input_tangents: tuple[bool, ...] | None = None,
        input_dtypes: tuple[np.dtype[np.generic], ...] | None = None,
        namespace: ModuleType | None = None,
        kernel_entries: frozenset[str] = frozenset(),
        any_layout: bool = False,
    ) -> None:
        self.op = op
        self.out_shape = out_shape
        self.out_dtype = dtype = inputs[0].native if out_dtype is None else out_dtype
        self.output_shapes = output_shapes
        self.differentiable = dtype.kind in "fc" if differentiable is None else differentiable
        self.input_tangents = (
            tuple(self.differentiable and facts.differentiable for facts in inputs)
            if input_tangents is None
            else input_tangents
        )
        self.input_shapes = tuple(facts.shape for facts in inputs)
        self.input_dtypes = tuple(facts.native for facts in inputs) if input_dtypes is None else input_dtypes
        self.namespace = joint_namespace(inputs) if namespace is None else namespace
        self.kernel_entries = kernel_entries
        self.any_layout = any_layout
        self.pullbacks = {}
        self.result_forms = {}
        self.saved_forms = {}

    def requests(self) -> list[KernelRequest]:
        return []

    def forward(self, arrays: tuple[object, ...]) -> object:
        raise NotImplementedError

    def save(self, arrays: tuple[object, ...]) -> object:
        """What the pullback keeps of the primals (only for ``saves_primals``)."""
        return None

    def forward_and_save(self, arrays: tuple[object, ...]) -> tuple[object, object]:
        """``(forward(arrays), save(arrays))``, for ``saves_primals``; override it when the two
        share work (kron's flattened operands)."""
        return self.forward(arrays), self.save(arrays)

    def cotangent_shape(self, saved: object) -> tuple[int, ...]:
        """The shape the pullback's ``dy`` must have: ``out_shape``, unless the output's shape
        depends on data the plan saved (repeat's per-element counts)."""
        return self.out_shape

    def pullback(self, saved: object) -> DensePullback | KernelPullback:
        raise NotImplementedError

    def saved_dense(self) -> SavedDense | None:
        """For ``saves_primals``: the dense pullback as one function ``dense(saved, dy)``
        (same contract as ``pullback(saved)(dy)``), built once and shared by every rrule of the
        signature; ``None`` (the default) where the plan has none, and then ``pullback(saved)``
        makes a dense function per rrule.

        With it, a pullback kept on a tape is one small object holding the signature's shared
        form and ``saved``: two objects for Python's cyclic garbage collector to track, where a
        closure per rrule holds dozens, which every collection re-scans (a long hand-chained
        tape then slows down as it grows). Used only where ``cotangent_shape`` is the plan's
        ``out_shape`` (not data-dependent)."""
        return None

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        """Tangents for a ``Fill`` cotangent; by default, the dense pullback of it materialized."""
        array: ArrayLike = self.namespace.full(self.out_shape, fill.value, dtype=self.out_dtype)
        return dense(array)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        raise NotImplementedError

    @cached_property
    def like(self) -> ArrayLike:
        """An empty array on the plan's device: names it to ``prepare_cotangent``."""
        like: ArrayLike = self.namespace.empty((0,))
        return like

    @cached_property
    def zero_tangents(self) -> tuple[object, ...]:
        return tuple(ZERO_TANGENT if wanted else NO_TANGENT for wanted in self.input_tangents)


# ---------------------------------------------------------------------------------------------
# Ops


__all__ = ["DensePullback", "KernelPullback", "Plan", "SavedDense"]
