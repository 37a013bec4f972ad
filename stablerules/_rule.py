"""The rule scaffold: what every op shares, written once.

An op module supplies three things; the scaffold does the rest.

1. **Binding.** A subclass of :class:`RuleOp` with ``name``, ``static_names``,
   ``input_names`` and ``bind(*args, **kwargs) -> (arrays, statics)``: it binds a call the way
   the op's ``__call__`` does (same parameters and defaults) and returns the *array
   arguments* (arrays, ``ArraySpec``s, Python scalars where the op takes them, per-element data
   such as a counts array), in positional order, and the *static arguments* as given (``Val``,
   plain int or tuple, ``None``), in the order of ``static_names``. ``input_names`` name the
   array arguments in messages (``("x",)``, ``("a", "b")``). ``sequence = True`` says the
   arrays came as one sequence argument (``concatenate((a, b))``): its tangent is one tuple.
   The op's ``__call__`` carries its typed overloads; its body is
   ``return self.forward(*args, **kwargs)``. Instantiating the op (``flip = Flip()``)
   registers its rules.
2. **Validation and plan.** ``plan(arrays, statics) -> Plan``: the op's ``_check_*``
   (``TypeError``/``ValueError`` naming arguments and shapes, before any kernel) and
   everything the signature fixes. ``arrays`` may hold ``ArraySpec``s (``precompile``,
   ``explain``, ``sr.pullback``), so a plan reads only shapes, dtypes and devices: each array
   argument through ``_arrays.input_facts`` (the one input layer: shape, dtype as given and
   native, namespace, device, kernel target, a weak Python scalar), statics through
   ``static_int``/``static_ints``/``static_bool``. The scaffold counts a plain static as a
   dynamic argument, once per call (``_count_dynamic_statics``). Building a plan compiles
   nothing (``explain`` builds plans too): a plan gets its kernels lazily, e.g. a
   ``functools.cached_property`` returning ``cpu_launcher(request.get(), ...)``.
3. **The plan.** A :class:`Plan` subclass, one instance per signature, kept in the shared
   ``PlanCache`` and reused by every later call of that signature. Its constructor takes the
   typed fields the scaffold reads (see :class:`Plan`): the input facts, ``out_shape``,
   ``out_dtype``, ``output_shapes``, ``differentiable``, ``input_tangents``,
   ``input_dtypes``, ``kernel_entries``, ``any_layout``; ``saves_primals`` is a class
   attribute;

   and implements:

   - ``requests() -> list[KernelRequest]``: every kernel of the signature, for ``precompile``
     (compiles them) and ``explain`` (prints them); ``[]`` for view ops;
   - ``forward(arrays) -> y``;
   - ``pullback(saved) -> dense``, called once per signature (``saved`` is ``None``) or, with
     ``saves_primals``, once per rrule (``saved = save(arrays)``). ``dense(dy)`` gets an
     array of ``out_shape`` and ``out_dtype`` (C-contiguous unless ``any_layout``; with
     ``output_shapes``, the tuple of prepared cotangents: ``DenseCotangent``, ``Fill`` or
     ``ZeroTangent()``, not all zero) and returns one tangent per array argument
     (``NoTangent()`` for a non-differentiable one). A pullback that is one CPU kernel
     launch is better returned as a :class:`KernelPullback`: the scaffold then generates
     the whole pullback as one function;
   - ``fill_pullback(saved, dense, fill)``: the tangents for a ``Fill`` cotangent (default:
     ``dense`` of the materialized fill; override it to stay lazy);
   - ``pushforward(arrays, tangents) -> dy``; each tangent arrives prepared: a
     ``DenseCotangent`` (C-contiguous, the input's dtype), a ``Fill`` or ``ZeroTangent()``
     (also for ``NoTangent()``, for an argument without a tangent and for a non-differentiable
     input). Only called when the output is differentiable (else ``dy`` is ``NoTangent()``);
   - with ``saves_primals`` only: ``save(arrays)``, ``forward_and_save(arrays)`` (override it
     when the two share work) and, when the output's shape depends on data (repeat's counts
     array), ``cotangent_shape(saved)``; optionally ``saved_dense()``: the dense pullback as
     one shared function of ``(saved, dy)``, so that a pullback kept on a tape is one small
     object (its signature's shared form and ``saved``) rather than closures the garbage
     collector must scan (see :meth:`Plan.saved_dense`).

   Kernels run through the launchers of ``_launch`` (``cpu_launcher``, ``cpu_launch``,
   ``cuda_launch``, ``cuda_launch_blocks``), never by calling a kernel directly: that is
   what counts them. An entry whose work is empty for this call's data calls
   ``empty_launch``.

What the scaffold does, for every op alike:

- registration: ``rrule``/``frule`` in ``RRULES``/``FRULES`` and, in ``PULLBACK_BUILDERS``, a builder
  ``builder(*args, **kwargs) -> pullback`` that runs no forward, takes ``ArraySpec``s unless
  the plan ``saves_primals``, and shares the rrule's plan and kernels. Rules and pullbacks are
  named functions (``repeat_rrule``, ``repeat_pullback``) so tracebacks read well (a
  ``saved_dense`` plan's pullback is an instance of a class of that name whose ``__call__``
  carries it);
- the plan key: the op, each array argument's dtype and shape (a Python scalar's type), the
  static values and the kernel target (``kernel_target`` of the arguments' device). An
  argument it cannot key (a list, a NumPy integer as a static) gets a plan for that call alone.
  While a ``sr.record(path)`` block is open, each lookup's signature is noted (``_record``);
- dynamic statics: a plain ``int``/``tuple`` static is counted in
  ``cache_info().dynamic_arguments`` and refused inside ``no_fallback()``, on every call;
- cotangents: ``Thunk``s unthunked, shapes validated before any kernel (``ValueError`` naming
  both shapes), ``ZeroTangent`` gives ``ZeroTangent()``/``NoTangent()`` per argument, a
  non-floating output's pullback gives ``NoTangent()``s, and the result has one entry per
  positional argument: ``NoTangent()`` for statics given positionally, a sequence argument's
  tangents as one tuple, nothing for keyword arguments;
- ``frule``'s tangent check: one ``ValueError`` unless ``tangents`` is a tuple (or list) with
  one entry per positional argument (and, for a sequence argument, one tangent per array);
- output allocation: a :class:`KernelPullback`'s ``dx`` comes from ``_pool.empty`` (a reused
  block of the output pool from 1 MiB up, once nothing references it; ``np.empty`` below);
  plans that allocate their own large NumPy outputs take them from there too (``roll``);
- the thread split: :func:`cpu_launcher` runs a kernel over ``[lo, hi)`` ranges of its
  partition loop, split across threads by ``_parallel``'s policy (one call below
  ``PARALLEL_THRESHOLD`` elements of work); :func:`cuda_launch`/:func:`cuda_launch_blocks`
  for CUDA kernels;
- no code generated in a steady state: launchers and one-function pullbacks are small Python
  functions made from templates whose text depends only on arities, compiled once per text
  and process (``_codegen.template_function``) and bound to each plan's constants; a plan
  builds them once, and a pullback made per call (``saves_primals``) only closes over what the
  plan settled. ``no_compile()`` refuses any other code generation in the block (an ``exec``
  or ``compile`` of source), besides kernel compiles and loads;
- launch counting and the steady-state check that makes "no dynamic fallback" provable: while
  a guard or ``count_launches()`` is open, every launch through those launchers is counted per
  kernel signature (:func:`kernel_launches`); outside them launching costs no counting.
  Inside ``no_compile()`` or ``no_fallback()`` (this context's), each forward, dense pullback
  and pushforward entry listed in ``kernel_entries`` must launch at least one compiled kernel;
  one that does not (a NumPy composition in its place) is a fallback: counted in
  ``cache_info().fallbacks`` and, inside ``no_fallback()``, a ``DynamicFallbackError``.
  ``testing.test_rrule``/``test_frule`` run every second call under those guards. View ops
  (``kernel_entries`` empty) run their precomputed view plan, which is their compiled
  implementation.

So a new op is one module under ``rules/`` (its ``RuleOp`` subclass, ``_check_*``, ``Plan``
subclass and kernel templates), its row in ``_schema.py`` (the generated stubs type it), and
its tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import CodeType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from . import _parallel, _pool
from ._arrays import ArrayLike, ArraySpec, InputFacts, device_of, is_array, is_dynamic_static, joint_namespace, kernel_target, shape_text
from ._binding import split_function
# The plan store lives with the kernel cache (it counts plan hits there); nothing else of the
# cache is used here: kernels come through KernelRequest, counting through _launch.
from ._cache import PlanCache
from ._codegen import template_function
from ._guards import COUNTERS, OPEN_GUARDS, steady_state_checked
from ._layout import BY_NAME as LAYOUT_BY_NAME
from ._launch import context_launches, count_unlaunched, cpu_launcher
from ._op import KernelRequest, Op
from ._record import RECORDINGS
from ._record import note as note_signature
from ._registry import FRULES, PULLBACK_BUILDERS, RRULES
from ._tangents import (
    Cotangent,
    DenseCotangent,
    Fill,
    NoTangent,
    ZeroTangent,
    prepare_cotangent,
    prepare_tangent,
    unthunk,
)
from ._typing import RulePullback
from ._val import Val

if TYPE_CHECKING:
    from ._key import Kernel

DensePullback = Callable[[Any], tuple[object, ...]]
"""A plan's pullback of a dense cotangent (an array; for a plan with ``output_shapes``, the
tuple of prepared cotangents): one tangent per array argument."""

SavedDense = Callable[[Any, Any], tuple[object, ...]]
"""A ``saves_primals`` plan's dense pullback as one function of ``(saved, dy)``, shared by
every rrule of the signature (:meth:`Plan.saved_dense`)."""

NO_TANGENT = NoTangent()
ZERO_TANGENT = ZeroTangent()
_FLOAT64: np.dtype[np.generic] = np.dtype(np.float64)
_NDARRAY = np.ndarray

@dataclass(frozen=True)
class KernelPullback:
    """A dense pullback that is one CPU kernel launch, which a plan may return from
    ``pullback`` instead of a function: ``dx = allocate(size, dtype)`` (``np.zeros`` when
    ``zeros``, else ``_pool.empty``: ``np.empty``, from 1 MiB up a block of the output pool),
    then ``kernel(dy_flat, dx, *trailing, lo, hi)`` over ``[0, extent)`` (split as
    :func:`cpu_launcher` splits), and the tangents are ``dx`` viewed as
    ``shape`` followed by ``rest``. The scaffold then generates the whole pullback as one
    function (the hot path of a small pullback is mostly call overhead: a frame less, and the
    cotangent's layout checked once, see ``_kernel_pullback``)."""

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
        allocate = np.zeros if self.zeros else _pool.allocator(self.size * self.dtype.itemsize)
        size, dtype, shape, rest = self.size, self.dtype, self.shape, self.rest

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            dx = allocate(size, dtype)
            launch(dy.reshape(-1), dx)
            return (dx.reshape(shape), *rest)

        return dense


# Generated with its constants as globals, not closure cells, and with no comprehension (which
# would make dx and dy cell variables): both slow every call measurably at this size.
_KERNEL_PULLBACK_TEMPLATE = """
def pullback(dy):
    if type(dy) is array_type and dy.dtype is out_dtype and {layout} and not open_guards[0]:
        dx = allocate(shape, dtype)
        if work < parallel.PARALLEL_THRESHOLD:
            entry({flat}, {flat_dx}, {trailing}0, extent)
        else:
            parallel.run_partitioned(entry, ({flat}, {flat_dx}, {trailing}), extent, work)
        return (dx, {tail})
    return general(dy)
"""


def _kernel_pullback(
    spec: KernelPullback,
    out_dtype: np.dtype[np.generic],
    out_shape: tuple[int, ...],
    tail: tuple[object, ...],
    general: RulePullback,
) -> RulePullback:
    """The one-function pullback of a :class:`KernelPullback`; ``tail`` follows ``dx`` in the
    result (the plan's ``rest`` and the scaffold's padding); anything but a C-contiguous
    ndarray of the output's dtype and shape, and any call inside a guard, goes to ``general``.

    For a 1-D output the layout check is ``dy.strides == (itemsize,) and len(dy) == n`` (one
    axis, contiguous, ``n`` long; strides first, as ``len`` of a 0-d array raises) and ``dy``
    goes to the kernel as it is; otherwise ``dy.shape == out_shape`` and ``dy.ravel()`` (a view
    when ``dy`` is C-contiguous, else the one copy that makes it so)."""
    values = [f"value{index}" for index in range(len(spec.trailing))]
    tails = [f"tail{index}" for index in range(len(tail))]
    one_axis = len(out_shape) == 1
    text = _KERNEL_PULLBACK_TEMPLATE.format(
        layout="dy.strides == strides and len(dy) == length" if one_axis else "dy.shape == out_shape",
        flat="dy" if one_axis else "dy.ravel()",
        trailing="".join(f"{name}, " for name in values),
        flat_dx="dx" if len(spec.shape) == 1 else "dx.ravel()",  # a view: dx is allocated in its shape
        tail="".join(f"{name}, " for name in tails),
    )
    namespace: dict[str, object] = dict(zip(values, spec.trailing))
    namespace.update(zip(tails, tail))
    namespace.update(
        array_type=np.ndarray,
        out_dtype=out_dtype,
        out_shape=out_shape,
        strides=(out_dtype.itemsize,),
        length=out_shape[0] if one_axis else -1,
        open_guards=OPEN_GUARDS,
        general=general,
        allocate=np.zeros if spec.zeros else _pool.allocator(spec.size * spec.dtype.itemsize),
        dtype=spec.dtype,
        parallel=_parallel,
        entry=spec.kernel.entry,
        extent=spec.extent,
        work=spec.work if spec.extent >= 2 else -1,
        shape=spec.shape,
    )
    pullback: RulePullback = template_function(text, "pullback", "<stablerules pullback>", namespace)  # type: ignore[assignment]
    return pullback


# ---------------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------------


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
    result_forms: dict[int, _ResultForm]
    saved_forms: dict[int, _SavedForm | None]

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
# ---------------------------------------------------------------------------------------------

_PLANS: PlanCache[Plan] = PlanCache()
_UNKEYED = object()
_PYTHON_SCALARS = (bool, int, float, complex)


def _static_key(value: object) -> object:
    """A static argument as it enters the key: a ``Val``'s value (a bool tagged, so that
    ``Val(True)`` never finds ``Val(1)``'s plan), a plain int or tuple of plain ints (dynamic),
    ``None``; ``_UNKEYED`` for anything else."""
    value_type = type(value)
    if value_type is Val:
        inner = value.value  # type: ignore[attr-defined]
        # Val(True) == Val(1) as dict keys would be (True == 1): a flag keys apart from a count
        return (bool, inner) if type(inner) is bool else inner
    if value is None or value_type is int:
        return value
    if value_type is tuple and all(type(item) is int for item in value):  # type: ignore[attr-defined]
        return value
    return _UNKEYED


class RuleOp(Op):
    """Base of the ops built on the scaffold. Instantiating one registers its rules."""

    name: str = "op"
    static_names: tuple[str, ...] = ()
    sequence: bool = False
    required_messages: ClassVar[dict[str, str]] = {}
    """The op's own message for a required parameter it words itself (the layout's ``bind``
    raises it when the parameter is given as ``absent_default``, or left out where that is not
    ``None``; see :func:`split_function`)."""
    absent_default: ClassVar[object] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """An op's ``plan`` names the op in its errors and counts its plain statics, for every
        caller (the scaffold and the adapters alike): a shared reader (``as_array``,
        ``static_int``) says only ``argument 'x'`` and counts nothing. (An op's ``plan`` must not
        call a base class's ``plan``, which would count again.)

        An op that defines no ``bind`` (nor inherits one from a base below ``RuleOp``) gets
        the one its layout generates (:func:`split_function`), named after its top class below
        ``RuleOp`` in Python's binding errors."""
        super().__init_subclass__(**kwargs)
        if "plan" in cls.__dict__:
            cls.plan = _planned(cls.__dict__["plan"])  # type: ignore[method-assign]
        layout = LAYOUT_BY_NAME.get(cls.name)
        if layout is not None and cls.bind is RuleOp.bind:
            top = cls.__mro__[cls.__mro__.index(RuleOp) - 1]
            cls.bind = split_function(  # type: ignore[method-assign]
                layout, f"{top.__name__}.bind", cls.required_messages, cls.absent_default
            )

    def __init__(self) -> None:
        op = self

        def rrule(*args: object, **kwargs: object) -> tuple[object, RulePullback]:
            return op._rrule(*args, **kwargs)

        def frule(tangents: object, *args: object, **kwargs: object) -> tuple[object, object]:
            return op._frule(tangents, *args, **kwargs)

        def pullback(*args: object, **kwargs: object) -> RulePullback:
            return op._pullback_builder(*args, **kwargs)

        RRULES.register(self, _named(rrule, f"{self.name}_rrule"))
        FRULES.register(self, _named(frule, f"{self.name}_frule"))
        PULLBACK_BUILDERS.register(self, _named(pullback, f"{self.name}_pullback_builder"))

    # --- supplied by the op -------------------------------------------------------------------

    def bind(self, *args: object, **kwargs: object) -> tuple[tuple[object, ...], tuple[object, ...]]:
        raise NotImplementedError

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        raise NotImplementedError

    # --- the scaffold ---------------------------------------------------------------------------

    def _bind(self, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[tuple[object, ...], tuple[object, ...]]:
        try:
            return self.bind(*args, **kwargs)
        except TypeError as error:
            message = str(error)
            if message.startswith(f"{self.name}:"):
                raise
            raise TypeError(f"{self.name}: {message.replace('bind()', self.name + '()')}") from None

    def lookup(self, arrays: tuple[object, ...], statics: tuple[object, ...], specs: bool = False) -> Plan:
        """The plan of this call's signature: from the plan cache, or validated and built.
        ``specs`` says whether ``ArraySpec``s may stand for arrays (no computation runs)."""
        key = self._key(arrays, statics, specs)
        if RECORDINGS:
            note_signature(self, key, arrays, statics)
        if key is None:
            if not specs:
                self._refuse_specs(arrays)
            return _plan_of(self, arrays, statics)
        plan = _PLANS.get(key)
        if plan is None:
            return _PLANS.remember(key, _plan_of(self, arrays, statics))
        # A plan hit builds nothing, so the plain statics are counted here; a plan built
        # counts them in ``plan`` (``_planned``): once per call either way.
        for value in statics:
            if value is not None and type(value) is not Val and is_dynamic_static(value):
                _count_dynamic_statics(self, statics)
                break
        return plan

    def _refuse_specs(self, arrays: tuple[object, ...]) -> None:
        for name, value in zip(self._input_names(len(arrays)), arrays):
            if isinstance(value, ArraySpec):
                raise TypeError(
                    f"{self.name}: {name} must be an array (an ArraySpec only describes one, for "
                    f"precompile, explain and pullback)"
                )

    def _key(self, arrays: tuple[object, ...], statics: tuple[object, ...], specs: bool) -> Hashable | None:
        parts: list[object] = [self]
        device = "cpu"
        for value in arrays:
            value_type = type(value)
            if value_type is _NDARRAY:
                parts.append(value.dtype)  # type: ignore[attr-defined]
                parts.append(value.shape)  # type: ignore[attr-defined]
            elif value_type in _PYTHON_SCALARS:
                parts.append(value_type)
            elif value_type is ArraySpec or is_array(value):
                if value_type is ArraySpec and not specs:
                    self._refuse_specs(arrays)
                spec: ArraySpec = value  # type: ignore[assignment]
                where = device_of(value)
                if where != "cpu":
                    device = where
                # A CPU ArraySpec keys as a NumPy array does: precompile warms the call's plan.
                parts.append(spec.dtype if where == "cpu" else (where, spec.dtype))
                parts.append(tuple(spec.shape))
            else:
                return None
        for value in statics:
            static = _static_key(value)
            if static is _UNKEYED:
                return None
            parts.append(static)
        parts.append(kernel_target(device))
        return tuple(parts)

    def forward(self, *args: object, **kwargs: object) -> object:
        """The op's forward call (what ``__call__`` runs)."""
        arrays, statics = self._bind(args, kwargs)
        plan = self.lookup(arrays, statics)
        if OPEN_GUARDS[0] and "forward" in plan.kernel_entries and steady_state_checked():
            before = context_launches()
            y = plan.forward(arrays)
            count_unlaunched(self.name, "forward", before)
            return y
        return plan.forward(arrays)

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """Every kernel (forward, pullback, pushforward) this call's signature uses."""
        arrays, statics = self._bind(args, kwargs)
        return self.lookup(arrays, statics, specs=True).requests()

    def _rrule(self, *args: object, **kwargs: object) -> tuple[object, RulePullback]:
        arrays, statics = self._bind(args, kwargs)
        plan = self.lookup(arrays, statics)
        checked = OPEN_GUARDS[0] and "forward" in plan.kernel_entries and steady_state_checked()
        before = context_launches() if checked else 0
        if plan.saves_primals:
            y, saved = plan.forward_and_save(arrays)
            pullback = self._make_pullback(plan, saved, len(args))
        else:
            y = plan.forward(arrays)
            pullback = self._pullback_of(plan, len(args))
        if checked:
            count_unlaunched(self.name, "forward", before)
        return y, pullback

    def _pullback_builder(self, *args: object, **kwargs: object) -> RulePullback:
        arrays, statics = self._bind(args, kwargs)
        plan = self.lookup(arrays, statics, specs=True)
        if plan.saves_primals:
            read = plan.saved_inputs
            if read is None and any(isinstance(value, ArraySpec) for value in arrays):
                raise TypeError(
                    f"{self.name} pullback: it reads the primal values; pass arrays, not ArraySpecs"
                )
            for position in read or ():
                if isinstance(arrays[position], ArraySpec):
                    name = self._input_names(len(arrays))[position]
                    raise TypeError(
                        f"{self.name} pullback: it reads the values of {name}; pass an array for it, "
                        f"not an ArraySpec"
                    )
            return self._make_pullback(plan, plan.save(arrays), len(args))
        return self._pullback_of(plan, len(args))

    def _pullback_of(self, plan: Plan, positional: int) -> RulePullback:
        cache = plan.pullbacks
        pullback = cache.get(positional)
        if pullback is None:
            pullback = cache.setdefault(positional, self._make_pullback(plan, None, positional))
        return pullback

    def _result_form(self, plan: Plan, positional: int) -> _ResultForm:
        """How this plan's tangents become a call's result, for ``positional`` arguments:
        settled once per (plan, positional), so a pullback made per call (``saves_primals``)
        only closes over it."""
        forms = plan.result_forms
        form = forms.get(positional)
        if form is None:
            form = forms.setdefault(positional, _ResultForm(plan, self.sequence, positional))
        return form

    def _make_pullback(self, plan: Plan, saved: object, positional: int) -> RulePullback:
        """The pullback closure: everything but ``dy`` settled here, once. A ``saves_primals``
        plan with a :meth:`Plan.saved_dense` gets a :class:`_SavedPullback` instead: the
        shared form and ``saved``, nothing else per rrule."""
        if plan.saves_primals:
            forms = plan.saved_forms
            if positional in forms:
                saved_form = forms[positional]
            else:
                saved_form = forms.setdefault(positional, _SavedForm.of(self, plan, positional))
            if saved_form is not None:
                return saved_form.kind(saved_form, saved)
        form = self._result_form(plan, positional)
        finish, padding, name = form.finish, form.padding, self.name
        out_shape, out_dtype, like = plan.cotangent_shape(saved), plan.out_dtype, plan.like
        if plan.output_shapes is not None:
            return _named(self._multiple_output_pullback(plan, saved, finish), f"{name}_pullback")
        if not plan.differentiable:
            no_tangents = form.no_tangents

            def constant_pullback(dy: object) -> tuple[object, ...]:
                prepare_cotangent(dy, out_shape, _FLOAT64, like, name)  # validates dy's shape
                return no_tangents

            return _named(constant_pullback, f"{name}_pullback")

        made = plan.pullback(saved)
        dense = made.dense() if isinstance(made, KernelPullback) else made
        zeros = form.zeros
        array_type = type(like)
        any_layout = plan.any_layout
        checked = "pullback" in plan.kernel_entries
        simple = form.simple

        def general(dy: object) -> tuple[object, ...]:
            return _general_pullback(name, plan, saved, dense, dy, out_shape, out_dtype, like, checked, finish, zeros)

        if isinstance(made, KernelPullback) and simple and array_type is np.ndarray:
            return _named(_kernel_pullback(made, out_dtype, out_shape, made.rest + padding, general), f"{name}_pullback")

        def pullback(dy: object) -> tuple[object, ...]:
            if (
                type(dy) is array_type
                and dy.dtype is out_dtype
                and dy.shape == out_shape
                and not OPEN_GUARDS[0]
                and (any_layout or dy.flags.c_contiguous)
            ):
                array: ArrayLike = dy
                return dense(array) + padding if simple else finish(dense(array))
            return general(dy)

        return _named(pullback, f"{name}_pullback")

    def _multiple_output_pullback(
        self, plan: Plan, saved: object, finish: Callable[[tuple[object, ...]], tuple[object, ...]]
    ) -> RulePullback:
        """The pullback of a plan with several outputs: ``dy`` is a tuple (or list) of one
        cotangent per output, each dense, ``Fill``, ``ZeroTangent`` or ``Thunk``; the plan's
        dense pullback gets them prepared (``DenseCotangent``, ``Fill``, ``ZeroTangent``)."""
        shapes = plan.output_shapes
        assert shapes is not None
        name, like, count = self.name, plan.like, len(shapes)
        dtype = plan.out_dtype if plan.differentiable else _FLOAT64
        no_tangents = finish((NO_TANGENT,) * len(plan.input_tangents))
        zeros = finish(plan.zero_tangents) if plan.differentiable else no_tangents
        made = plan.pullback(saved) if plan.differentiable else None
        dense = made.dense() if isinstance(made, KernelPullback) else made
        checked = "pullback" in plan.kernel_entries

        def pullback(dy: object) -> tuple[object, ...]:
            dy = unthunk(dy)
            if isinstance(dy, ZeroTangent):
                return zeros
            if not isinstance(dy, (tuple, list)) or len(dy) != count:
                got = f"{len(dy)} entries" if isinstance(dy, (tuple, list)) else type(dy).__name__
                raise ValueError(
                    f"{name} pullback: {name} has {count} outputs, so dy must be a tuple of {count} "
                    f"cotangents, got {got}"
                )
            prepared = tuple(
                prepare_cotangent(cotangent, shape, dtype, like, name, f"dy[{index}]")
                for index, (cotangent, shape) in enumerate(zip(dy, shapes))
            )
            if dense is None:
                return no_tangents
            if all(isinstance(cotangent, ZeroTangent) for cotangent in prepared):
                return zeros
            if OPEN_GUARDS[0] and checked and steady_state_checked() and any(isinstance(cotangent, DenseCotangent) for cotangent in prepared):
                before = context_launches()
                tangents = dense(prepared)
                count_unlaunched(name, "pullback", before)
                return finish(tangents)
            return finish(dense(prepared))

        return pullback

    def _frule(self, tangents: object, *args: object, **kwargs: object) -> tuple[object, object]:
        arrays, statics = self._bind(args, kwargs)
        plan = self.lookup(arrays, statics)
        positional = len(args)
        if not isinstance(tangents, (tuple, list)) or len(tangents) != positional:
            got = len(tangents) if isinstance(tangents, (tuple, list)) else type(tangents).__name__
            raise ValueError(
                f"{self.name} frule: tangents must be a tuple with one entry per positional "
                f"argument ({positional}), got {got}"
            )
        checked = OPEN_GUARDS[0] and steady_state_checked()
        before = context_launches() if checked else 0
        y = plan.forward(arrays)
        if checked and "forward" in plan.kernel_entries:
            count_unlaunched(self.name, "forward", before)
        if not plan.differentiable:
            return y, NO_TANGENT
        prepared = self._prepare_tangents(plan, tuple(tangents), positional)
        if checked and "pushforward" in plan.kernel_entries and any(
            isinstance(tangent, DenseCotangent) for tangent in prepared
        ):
            before = context_launches()
            dy = plan.pushforward(arrays, prepared)
            count_unlaunched(self.name, "pushforward", before)
            return y, dy
        return y, plan.pushforward(arrays, prepared)

    def _prepare_tangents(self, plan: Plan, tangents: tuple[object, ...], positional: int) -> tuple[Cotangent, ...]:
        count = len(plan.input_tangents)
        if self.sequence:
            inner = unthunk(tangents[0]) if tangents else ZERO_TANGENT
            if isinstance(inner, (ZeroTangent, NoTangent)):
                given: Sequence[object] = (ZERO_TANGENT,) * count
            elif isinstance(inner, (tuple, list)) and len(inner) == count:
                given = inner
            else:
                got = len(inner) if isinstance(inner, (tuple, list)) else type(inner).__name__
                raise ValueError(
                    f"{self.name} frule: the tangent of arrays must hold one tangent per array "
                    f"({count}), got {got}"
                )
        else:
            given = tangents[:count] + (ZERO_TANGENT,) * max(count - positional, 0)
        names = self._input_names(count)
        return tuple(
            _prepare_tangent(tangent, shape, dtype, plan.like, f"{self.name} frule: the tangent of {name}")
            if wanted
            else ZERO_TANGENT
            for tangent, wanted, shape, dtype, name in zip(
                given, plan.input_tangents, plan.input_shapes, plan.input_dtypes, names
            )
        )

    def _input_names(self, count: int) -> list[str]:
        """How messages name the array arguments: ``arrays[i]`` for a sequence, else the op's
        ``input_names`` (``("x",)``, ``("a", "b")``)."""
        names = getattr(self, "input_names", ())
        if self.sequence or len(names) < count:
            return [f"arrays[{index}]" for index in range(count)]
        return [repr(name) for name in names[:count]]


class _ResultForm:
    """A plan's tangents as one call's result: one entry per positional argument
    (``NoTangent()`` for statics given positionally), a sequence argument's tangents as one
    tuple, nothing for keyword arguments."""

    __slots__ = ("padding", "simple", "finish", "zeros", "no_tangents")

    def __init__(self, plan: Plan, sequence: bool, positional: int) -> None:
        count = len(plan.input_tangents)
        if sequence:
            padding: tuple[object, ...] = (NO_TANGENT,) * max(positional - 1, 0)
            keep = count
        else:
            padding = (NO_TANGENT,) * max(positional - count, 0)
            keep = min(positional, count)

        def finish(tangents: tuple[object, ...]) -> tuple[object, ...]:
            if sequence:
                return (tangents, *padding)
            return tangents[:keep] + padding if keep < count else tangents + padding

        self.padding = padding
        self.simple = not sequence and keep == count
        self.finish = finish
        self.zeros = finish(plan.zero_tangents)
        self.no_tangents = finish((NO_TANGENT,) * count)


def _general_pullback(
    name: str,
    plan: Plan,
    saved: object,
    dense: DensePullback,
    dy: object,
    out_shape: tuple[int, ...],
    out_dtype: Any,
    like: Any,
    checked: bool,
    finish: Callable[[tuple[object, ...]], tuple[object, ...]],
    zeros: tuple[object, ...],
) -> tuple[object, ...]:
    """A pullback's path for any cotangent but a C-contiguous array of the output's type, dtype
    and shape, and for any call inside a guard: the cotangent prepared (a ``Thunk`` unthunked,
    the shape checked), a dense one through ``dense`` (its launches counted inside a guard), a
    ``Fill`` through the plan's ``fill_pullback``, a zero to ``zeros``. Shared by the closures
    and the saved pullbacks."""
    cotangent = prepare_cotangent(dy, out_shape, out_dtype, like, name)
    if isinstance(cotangent, DenseCotangent):
        if OPEN_GUARDS[0] and checked and steady_state_checked():
            before = context_launches()
            tangents = dense(cotangent.array)
            count_unlaunched(name, "pullback", before)
            return finish(tangents)
        return finish(dense(cotangent.array))
    if isinstance(cotangent, Fill):
        return finish(plan.fill_pullback(saved, dense, cotangent))
    return zeros


class _SavedForm:
    """What every pullback of one (``saves_primals`` plan, positional arity) shares, settled
    once: the plan's :meth:`~Plan.saved_dense`, the cotangent's expected type, dtype and shape,
    the result form, and the pullback class named after the op (``kron_pullback``)."""

    __slots__ = (
        "plan", "name", "dense", "array_type", "out_dtype", "out_shape", "any_layout",
        "simple", "padding", "finish", "zeros", "checked", "kind",
    )

    @classmethod
    def of(cls, op: RuleOp, plan: Plan, positional: int) -> _SavedForm | None:
        """The shared form, or ``None`` where the plan's pullbacks are closures (no
        ``saved_dense``; several outputs; not differentiable; a data-dependent cotangent
        shape)."""
        if (
            not plan.differentiable
            or plan.output_shapes is not None
            or type(plan).cotangent_shape is not Plan.cotangent_shape
        ):
            return None
        dense = plan.saved_dense()
        return None if dense is None else cls(op, plan, positional, dense)

    def __init__(self, op: RuleOp, plan: Plan, positional: int, dense: SavedDense) -> None:
        form = op._result_form(plan, positional)
        self.plan = plan
        self.name = op.name
        self.dense = dense
        self.array_type = type(plan.like)
        self.out_dtype = plan.out_dtype
        self.out_shape = plan.out_shape
        self.any_layout = plan.any_layout
        self.simple = form.simple
        self.padding = form.padding
        self.finish = form.finish
        self.zeros = form.zeros
        self.checked = "pullback" in plan.kernel_entries
        self.kind = _saved_pullback_class(f"{op.name}_pullback")

    def general(self, saved: object, dy: object) -> tuple[object, ...]:
        """Any cotangent but a C-contiguous array of the output's type, dtype and shape, and
        any call inside a guard (the closures' ``general``)."""
        dense: DensePullback = functools.partial(self.dense, saved)
        return _general_pullback(
            self.name, self.plan, saved, dense, dy, self.out_shape, self.out_dtype, self.plan.like,
            self.checked, self.finish, self.zeros,
        )


class _SavedPullback:
    """One rrule's pullback of a plan with :meth:`Plan.saved_dense`: its shared
    :class:`_SavedForm` and the rrule's ``saved``, so a tape of them holds two tracked objects
    a step (this instance and ``saved``'s tuple; arrays are not tracked). Each op gets a
    subclass named ``<op>_pullback`` whose ``__call__``'s code carries that name, so
    tracebacks and ``__name__`` read as the closures' do."""

    __slots__ = ("form", "saved")

    def __init__(self, form: _SavedForm, saved: object) -> None:
        self.form = form
        self.saved = saved

    def __call__(self, dy: Any) -> tuple[object, ...]:
        form = self.form
        if (
            type(dy) is form.array_type
            and dy.dtype is form.out_dtype
            and dy.shape == form.out_shape
            and not OPEN_GUARDS[0]
            and (form.any_layout or dy.flags.c_contiguous)
        ):
            if form.simple:
                return form.dense(self.saved, dy) + form.padding
            return form.finish(form.dense(self.saved, dy))
        return form.general(self.saved, dy)


_SAVED_PULLBACK_CLASSES: dict[str, type[_SavedPullback]] = {}


def _saved_pullback_class(name: str) -> type[_SavedPullback]:
    """The subclass of :class:`_SavedPullback` called ``name``, made once per name."""
    kind = _SAVED_PULLBACK_CLASSES.get(name)
    if kind is None:
        call = _SavedPullback.__call__
        renamed = FunctionType(call.__code__.replace(co_name=name, co_qualname=name), call.__globals__, name)
        namespace = {"__slots__": (), "__call__": renamed, "__name__": name, "__qualname__": name}
        kind = _SAVED_PULLBACK_CLASSES.setdefault(name, type(name, (_SavedPullback,), namespace))
    return kind


def _count_dynamic_statics(op: RuleOp, statics: tuple[object, ...]) -> None:
    """Count each plain static of a call (a dynamic argument; a ``DynamicFallbackError``
    inside ``no_fallback()``): the one place statics are counted."""
    for name, value in zip(op.static_names, statics):
        if value is not None and type(value) is not Val and is_dynamic_static(value):
            COUNTERS.note_dynamic_argument(name, value)


def _planned(plan: Callable[..., Plan]) -> Callable[..., Plan]:
    """An op's ``plan``, naming the op in its errors and counting the call's plain statics once
    it validated them."""

    @functools.wraps(plan)
    def planned(self: RuleOp, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _named_errors(self, lambda: plan(self, arrays, statics), statics)

    return planned


def _named_errors(op: RuleOp, build: Callable[[], Plan], statics: tuple[object, ...]) -> Plan:
    try:
        built = build()
    except (TypeError, ValueError) as error:
        message = str(error)
        if type(error) not in (TypeError, ValueError) or message.startswith((f"{op.name}:", f"{op.name} ")):
            raise
        raise type(error)(f"{op.name}: {message}") from None
    _count_dynamic_statics(op, statics)
    return built


def _plan_of(op: RuleOp, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
    """The plan the scaffold builds for a call (``lookup``): the op's own, or for a 16-bit
    argument (float16, bfloat16) ``_half``'s, wrapping the op's plans for float32 and uint16
    stand-ins. (An adapter calling ``op.plan`` directly gets the op's own, which refuses the
    16-bit dtypes with its usual message.)"""
    halves = _half.half_arguments(arrays)
    if halves is None:
        return op.plan(arrays, statics)
    plan = getattr(type(op).plan, "__wrapped__", None)  # the op's unwrapped plan
    if plan is None:  # pragma: no cover - every op's plan is wrapped by __init_subclass__
        return op.plan(arrays, statics)
    return _named_errors(op, lambda: _half.half_plan(op, plan, halves, statics), statics)


from . import _half  # noqa: E402 - it builds on Plan, defined above


def _prepare_tangent(
    tangent: object, shape: tuple[int, ...], dtype: np.dtype[np.generic], like: ArrayLike, where: str
) -> Cotangent:
    """``prepare_tangent``, saying so when a ``Fill`` has the wrong shape."""
    tangent = unthunk(tangent)
    if isinstance(tangent, Fill) and tangent.shape != shape:
        raise ValueError(
            f"{where} is a Fill of shape {shape_text(tangent.shape)} but its primal has shape {shape_text(shape)}"
        )
    return prepare_tangent(tangent, shape, dtype, like, where)


_Function = TypeVar("_Function", bound=Callable[..., object])


_RENAMED: dict[tuple[CodeType, str], CodeType] = {}


def _named(function: _Function, name: str) -> _Function:
    """``function`` renamed (its code too, which is what tracebacks show). The renamed code is
    made once per (code, name): a pullback made per call (``saves_primals``) only rebinds it."""
    code = function.__code__
    renamed = _RENAMED.get((code, name))
    if renamed is None:
        renamed = _RENAMED.setdefault((code, name), code.replace(co_name=name, co_qualname=name))
    function.__code__ = renamed
    function.__name__ = name
    function.__qualname__ = name
    return function


__all__ = [
    "DensePullback",
    "KernelPullback",
    "NO_TANGENT",
    "SavedDense",
    "Plan",
    "RuleOp",
    "ZERO_TANGENT",
]
