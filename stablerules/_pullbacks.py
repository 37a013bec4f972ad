"""The pullbacks the scaffold makes of a plan: everything but ``dy`` settled once.

- a closure per (plan, positional arity), or per rrule for a ``saves_primals`` plan; a
  :class:`~stablerules._plan.KernelPullback` becomes one generated function
  (:func:`kernel_pullback`);
- a ``saves_primals`` plan with a ``saved_dense`` gets a :class:`SavedPullback`: the shared
  :class:`SavedForm` and ``saved``, nothing else per rrule;
- any cotangent but a C-contiguous array of the output's type, dtype and shape, and any call
  inside a guard, takes :func:`general_pullback`.

The result is put in the call's order by ``_results.ResultForm``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _parallel, _pool
from ._arrays import ArrayLike
from ._codegen import template_function
from ._guards import OPEN_GUARDS, steady_state_checked
from ._plan import DensePullback, KernelPullback, Plan, SavedDense
from ._renamed import named, named_subclass
from ._results import NO_TANGENT, ResultForm
from ._steady import counted
from ._tangents import DenseCotangent, Fill, ZeroTangent, prepare_cotangent, unthunk
from ._typing import RulePullback

_FLOAT64: np.dtype[np.generic] = np.dtype(np.float64)


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


def kernel_pullback(
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
        allocate=_pool.allocator(spec.size * spec.dtype.itemsize, spec.zeros),
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


def result_form(plan: Plan, sequence: bool, positions: tuple[int, ...] | None, positional: int) -> ResultForm:
    """How this plan's tangents become a call's result, for ``positional`` arguments:
    settled once per (plan, positional), so a pullback made per call (``saves_primals``)
    only closes over it."""
    forms = plan.result_forms
    form = forms.get(positional)
    if form is None:
        form = forms.setdefault(
            positional, ResultForm(len(plan.input_tangents), plan.zero_tangents, sequence, positional, positions)
        )
    return form


def make_pullback(
    name: str, sequence: bool, positions: tuple[int, ...] | None, plan: Plan, saved: object, positional: int
) -> RulePullback:
    """The pullback closure: everything but ``dy`` settled here, once. A ``saves_primals``
    plan with a :meth:`Plan.saved_dense` gets a :class:`SavedPullback` instead: the
    shared form and ``saved``, nothing else per rrule."""
    if plan.saves_primals:
        forms = plan.saved_forms
        if positional in forms:
            saved_form = forms[positional]
        else:
            saved_form = forms.setdefault(positional, SavedForm.of(name, sequence, positions, plan, positional))
        if saved_form is not None:
            kind: type[SavedPullback] = saved_form.kind
            return kind(saved_form, saved)
    form = result_form(plan, sequence, positions, positional)
    finish, padding = form.finish, form.padding
    out_shape, out_dtype, like = plan.cotangent_shape(saved), plan.out_dtype, plan.like
    if plan.output_shapes is not None:
        return named(multiple_output_pullback(name, plan, saved, finish), f"{name}_pullback")
    if not plan.differentiable:
        no_tangents = form.no_tangents

        def constant_pullback(dy: object) -> tuple[object, ...]:
            prepare_cotangent(dy, out_shape, _FLOAT64, like, name)  # validates dy's shape
            return no_tangents

        return named(constant_pullback, f"{name}_pullback")

    made = plan.pullback(saved)
    dense = made.dense() if isinstance(made, KernelPullback) else made
    zeros = form.zeros
    array_type = type(like)
    any_layout = plan.any_layout
    checked = "pullback" in plan.kernel_entries
    simple = form.simple

    def general(dy: object) -> tuple[object, ...]:
        return general_pullback(name, plan, saved, dense, dy, out_shape, out_dtype, like, checked, finish, zeros)

    if isinstance(made, KernelPullback) and simple and array_type is np.ndarray:
        return named(kernel_pullback(made, out_dtype, out_shape, made.rest + padding, general), f"{name}_pullback")

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

    return named(pullback, f"{name}_pullback")


def multiple_output_pullback(
    name: str, plan: Plan, saved: object, finish: Callable[[tuple[object, ...]], tuple[object, ...]]
) -> RulePullback:
    """The pullback of a plan with several outputs: ``dy`` is a tuple (or list) of one
    cotangent per output, each dense, ``Fill``, ``ZeroTangent`` or ``Thunk``; the plan's
    dense pullback gets them prepared (``DenseCotangent``, ``Fill``, ``ZeroTangent``)."""
    shapes = plan.output_shapes
    assert shapes is not None
    like, count = plan.like, len(shapes)
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
        if OPEN_GUARDS[0] and checked and steady_state_checked() and any(
            isinstance(cotangent, DenseCotangent) for cotangent in prepared
        ):
            return finish(counted(name, "pullback", lambda: dense(prepared)))
        return finish(dense(prepared))

    return pullback


def general_pullback(
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
            array = cotangent.array
            return finish(counted(name, "pullback", lambda: dense(array)))
        return finish(dense(cotangent.array))
    if isinstance(cotangent, Fill):
        return finish(plan.fill_pullback(saved, dense, cotangent))
    return zeros


class SavedForm:
    """What every pullback of one (``saves_primals`` plan, positional arity) shares, settled
    once: the plan's :meth:`~Plan.saved_dense`, the cotangent's expected type, dtype and shape,
    the result form, and the pullback class named after the op (``kron_pullback``)."""

    __slots__ = (
        "plan", "name", "dense", "array_type", "out_dtype", "out_shape", "any_layout",
        "simple", "padding", "finish", "zeros", "checked", "kind",
    )

    @classmethod
    def of(
        cls, name: str, sequence: bool, positions: tuple[int, ...] | None, plan: Plan, positional: int
    ) -> SavedForm | None:
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
        return None if dense is None else cls(name, result_form(plan, sequence, positions, positional), plan, dense)

    def __init__(self, name: str, form: ResultForm, plan: Plan, dense: SavedDense) -> None:
        self.plan = plan
        self.name = name
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
        self.kind = named_subclass(SavedPullback, f"{name}_pullback")

    def general(self, saved: object, dy: object) -> tuple[object, ...]:
        """Any cotangent but a C-contiguous array of the output's type, dtype and shape, and
        any call inside a guard (the closures' ``general``)."""
        dense: DensePullback = functools.partial(self.dense, saved)
        return general_pullback(
            self.name, self.plan, saved, dense, dy, self.out_shape, self.out_dtype, self.plan.like,
            self.checked, self.finish, self.zeros,
        )


class SavedPullback:
    """One rrule's pullback of a plan with :meth:`Plan.saved_dense`: its shared
    :class:`SavedForm` and the rrule's ``saved``, so a tape of them holds two tracked objects
    a step (this instance and ``saved``'s tuple; arrays are not tracked). Each op gets a
    subclass named ``<op>_pullback`` whose ``__call__``'s code carries that name, so
    tracebacks and ``__name__`` read as the closures' do."""

    __slots__ = ("form", "saved")

    def __init__(self, form: SavedForm, saved: object) -> None:
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
