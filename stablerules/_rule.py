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

Where each job lives: the ``Plan`` base and ``KernelPullback`` in ``_plan``; the plan key in
``_keying``; the steady-state check in ``_steady``; the result's order and padding in
``_results``; the pullbacks made of a plan in ``_pullbacks``; the renaming of code objects in
``_renamed``; registration, lookup and the rules themselves here (``RuleOp``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from . import _half
from ._arrays import ArrayLike, ArraySpec, index_data, is_dynamic_static, shape_text
from ._binding import split_function
# The plan store lives with the kernel cache (it counts plan hits there); nothing else of the
# cache is used here: kernels come through KernelRequest, counting through _launch.
from ._cache import PlanCache
from ._guards import COUNTERS, OPEN_GUARDS, steady_state_checked
from ._keying import plan_key
from ._launch import context_launches, count_unlaunched
from ._schema import BY_NAME as SCHEMA_BY_NAME
from ._op import KernelRequest, Op
from ._plan import Plan
from ._pullbacks import make_pullback
from ._record import RECORDINGS
from ._record import note as note_signature
from ._registry import FRULES, PULLBACK_BUILDERS, RRULES
from ._renamed import named
from ._results import NO_TANGENT, ZERO_TANGENT, array_positions, given_tangents, ordered_tangents
from ._steady import checked as steady_checked
from ._steady import counted
from ._tangents import Cotangent, DenseCotangent, Fill, prepare_tangent, unthunk
from ._typing import RulePullback
from ._val import Val

_PLANS: PlanCache[Plan] = PlanCache()


class RuleOp(Op):
    """Base of the ops built on the scaffold. Instantiating one registers its rules."""

    name: str = "op"
    static_names: tuple[str, ...] = ()
    sequence: bool = False
    required_messages: ClassVar[dict[str, str]] = {}
    """The op's own message for a required parameter it words itself (the schema's ``bind``
    raises it when the parameter is given as ``absent_default``, or left out where that is not
    ``None``; see :func:`split_function`)."""
    absent_default: ClassVar[object] = None
    data_slots: ClassVar[tuple[int, ...]] = ()
    """Where the integer data (indices, counts) sits among the bound arrays: an empty list or
    tuple there is read as NumPy reads it (``_arrays.index_data``)."""
    array_positions: ClassVar[tuple[int, ...] | None] = None
    """Where the array arguments sit among the op's parameters (``_results.array_positions``,
    from its schema row); ``None``: first, in order."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """An op's ``plan`` names the op in its errors and counts its plain statics, for every
        caller (the scaffold and the adapters alike): a shared reader (``as_array``,
        ``static_int``) says only ``argument 'x'`` and counts nothing. (An op's ``plan`` must not
        call a base class's ``plan``, which would count again.)

        An op that defines no ``bind`` (nor inherits one from a base below ``RuleOp``) gets
        the one its schema row generates (:func:`split_function`), named in Python's binding
        errors as the op's ``__call__`` of its top class below ``RuleOp`` (``Tile.__call__()
        missing 1 required positional argument: 'reps'``): an adapter that binds through it
        words a missing argument as the op's own call does."""
        super().__init_subclass__(**kwargs)
        if "plan" in cls.__dict__:
            cls.plan = _planned(cls.__dict__["plan"])  # type: ignore[method-assign]
        cls.array_positions = array_positions(cls.name)
        schema = SCHEMA_BY_NAME.get(cls.name)
        if schema is not None and not any(param.role == "varargs" for param in schema.params):
            bound = [param for param in schema.params if param.role != "static"]
            cls.data_slots = tuple(index for index, param in enumerate(bound) if param.role == "data")
        if schema is not None and cls.bind is RuleOp.bind:
            top = cls.__mro__[cls.__mro__.index(RuleOp) - 1]
            cls.bind = split_function(  # type: ignore[method-assign]
                schema, f"{top.__name__}.__call__", cls.required_messages, cls.absent_default
            )

    def __init__(self) -> None:
        op = self

        def rrule(*args: object, **kwargs: object) -> tuple[object, RulePullback]:
            return op._rrule(*args, **kwargs)

        def frule(tangents: object, *args: object, **kwargs: object) -> tuple[object, object]:
            return op._frule(tangents, *args, **kwargs)

        def pullback(*args: object, **kwargs: object) -> RulePullback:
            return op._pullback_builder(*args, **kwargs)

        RRULES.register(self, named(rrule, f"{self.name}_rrule"))
        FRULES.register(self, named(frule, f"{self.name}_frule"))
        PULLBACK_BUILDERS.register(self, named(pullback, f"{self.name}_pullback_builder"))

    # --- supplied by the op -------------------------------------------------------------------

    def bind(self, *args: object, **kwargs: object) -> tuple[tuple[object, ...], tuple[object, ...]]:
        raise NotImplementedError

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        raise NotImplementedError

    # --- the scaffold ---------------------------------------------------------------------------

    def _bind(self, args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[tuple[object, ...], tuple[object, ...]]:
        try:
            arrays, statics = self.bind(*args, **kwargs)
            for slot in self.data_slots:
                if slot < len(arrays) and type(arrays[slot]) in (list, tuple):
                    arrays = (*arrays[:slot], index_data(arrays[slot]), *arrays[slot + 1 :])
            return arrays, statics
        except TypeError as error:
            message = str(error)
            if message.startswith(f"{self.name}:"):
                raise
            for bound in ("bind()", "__call__()"):  # a binding error words the op's rule by its name
                message = message.replace(bound, self.name + "()")
            raise TypeError(f"{self.name}: {message}") from None

    def lookup(self, arrays: tuple[object, ...], statics: tuple[object, ...], specs: bool = False) -> Plan:
        """The plan of this call's signature: from the plan cache, or validated and built.
        ``specs`` says whether ``ArraySpec``s may stand for arrays (no computation runs)."""
        key = plan_key(self, arrays, statics, specs, self._refuse_specs)
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

    def prepare(
        self, args: tuple[object, ...], kwargs: dict[str, object], values: dict[int, object] | None = None
    ) -> Plan:
        """The one door of an adapter (torch, JAX) into the scaffold: the plan of a call whose
        arrays may be ``ArraySpec``\\ s (shapes and dtypes, no data), bound as the op binds
        (its own binding errors), validated by the op's own checks and cached as every call's
        plan. ``values`` gives, by position among the arrays, the concrete data the adapter
        has (JAX's indices outside a trace): the plan's checks of their values run too (an
        index out of range is the op's ``IndexError``)."""
        arrays, statics = self.bind(*args, **kwargs)
        plan = self.lookup(arrays, statics, specs=True)
        if values:
            plan.save(tuple(values.get(position, value) for position, value in enumerate(arrays)))
        return plan

    def _refuse_specs(self, arrays: tuple[object, ...]) -> None:
        for name, value in zip(self._input_names(len(arrays)), arrays):
            if isinstance(value, ArraySpec):
                raise TypeError(
                    f"{self.name}: {name} must be an array (an ArraySpec only describes one, for "
                    f"precompile, explain and pullback)"
                )

    def forward(self, *args: object, **kwargs: object) -> object:
        """The op's forward call (what ``__call__`` runs)."""
        arrays, statics = self._bind(args, kwargs)
        plan = self.lookup(arrays, statics)
        if OPEN_GUARDS[0] and steady_checked(plan.kernel_entries, "forward"):
            return counted(self.name, "forward", lambda: plan.forward(arrays))
        return plan.forward(arrays)

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """Every kernel (forward, pullback, pushforward) this call's signature uses."""
        arrays, statics = self._bind(args, kwargs)
        return self.lookup(arrays, statics, specs=True).requests()

    def _rrule(self, *args: object, **kwargs: object) -> tuple[object, RulePullback]:
        arrays, statics = self._bind(args, kwargs)
        plan = self.lookup(arrays, statics)
        checked = OPEN_GUARDS[0] and steady_checked(plan.kernel_entries, "forward")
        before = context_launches() if checked else 0
        if plan.saves_primals:
            y, saved = plan.forward_and_save(arrays)
            pullback = make_pullback(self.name, self.sequence, self.array_positions, plan, saved, len(args))
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
            return make_pullback(
                self.name, self.sequence, self.array_positions, plan, plan.save(arrays), len(args)
            )
        return self._pullback_of(plan, len(args))

    def _pullback_of(self, plan: Plan, positional: int) -> RulePullback:
        cache = plan.pullbacks
        pullback = cache.get(positional)
        if pullback is None:
            pullback = cache.setdefault(
                positional, make_pullback(self.name, self.sequence, self.array_positions, plan, None, positional)
            )
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
            return y, counted(self.name, "pushforward", lambda: plan.pushforward(arrays, prepared))
        return y, plan.pushforward(arrays, prepared)

    def _prepare_tangents(self, plan: Plan, tangents: tuple[object, ...], positional: int) -> tuple[Cotangent, ...]:
        count = len(plan.input_tangents)
        if self.sequence:
            given: Sequence[object] = given_tangents(self.name, tangents, count)
        else:
            given = ordered_tangents(tangents, positional, count, self.array_positions)
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


__all__ = ["RuleOp"]
