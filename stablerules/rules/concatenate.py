"""The concatenate family: ``concatenate``, ``stack``, ``hstack``, ``vstack`` and Julia's ``cat``.

No compiled kernels, on purpose
-------------------------------
A concatenation moves bytes and does no arithmetic. The forward is one allocation of NumPy's
result dtype and block copies (``concatenate`` itself, or slice assignment for ``cat``'s
block-diagonal form); the pullback is a slicing of the cotangent, so each tangent is a *view*
into ``dy`` (zero copy) and is copied only when its input's dtype differs from the output's;
the pushforward is one allocation and block copies. A generated kernel would copy what a view
gives for free, and on the forward NumPy's (or CuPy's) copy loops are already memory-bound.
So a plan requests no kernels: ``precompile`` only validates the signature and warms its plan,
and ``explain`` has no source to print; on the rule scaffold (``stablerules._rule``) these are
view ops, whose compiled implementation is the plan itself. Every path is the same for NumPy
and CuPy arrays (the namespace comes from the inputs).

Plans
-----
Everything that depends on the signature alone (output shape and dtype, the index tuple that
cuts each input's block out of the output, per-input tangent dtypes, whether a block needs a
reshape or a cast) is computed once, validated, and kept in a :class:`ConcatenationPlan`, found
again by the scaffold's plan key (the input shapes are part of it: a plan's slices depend on
them), so a repeated call skips validation and index arithmetic. A pullback closure holds its
plan, nothing else: it never sees the primal arrays. A cotangent that already is an array of
the output's array type, shape and dtype is sliced as it is, whatever its layout; any other
form (another dtype, ``Fill``, ``ZeroTangent``, ``Thunk``) is prepared first. Both give the
same tangents; which one runs depends on the cotangent's type, never on the data.

Decisions
---------
- ``concatenate``/``stack``/``hstack``/``vstack`` take a tuple or list of arrays (NumPy or
  CuPy); Python scalars, nested lists and a single array standing for a sequence are refused
  with a ``TypeError``. ``cat`` also takes Python scalars and NumPy scalars.
- Output dtype: NumPy's ``result_type`` with NEP 50 rules, so a Python scalar in ``cat`` is
  "weak": ``cat(float32_array, 1.0, dims=...)`` is float32.
- The tangent of a Python ``float``/``complex`` given to ``cat`` is a 0-d array of NumPy's
  default dtype (float64 / complex128); a Python ``int``/``bool`` gets ``NoTangent()``.
- A Python ``int`` given to ``cat`` reads as int64 whatever its value (NumPy picks uint64 or
  object for large ones), and must fit the result dtype: ``ValueError`` otherwise (NumPy's
  ``OverflowError``), e.g. ``cat(int8_array, 300, dims=...)`` or ``cat(2**63, dims=...)``.
- ``cat``'s ``dims`` must be non-negative and distinct; ``Val(k)`` and ``Val((k,))`` mean
  the same. With several dims, input ``i`` starts, along each of them, where input ``i-1``
  ended (Julia's block diagonal); everything outside the blocks is zero.
- ``frule`` returns a dense tangent of the output's dtype; a tangent for a non-differentiable
  input is ignored (read as zero); an output of integer/bool dtype gets ``NoTangent()``.
"""

from __future__ import annotations

import math
import types as pytypes
from collections.abc import Callable, Sequence
from functools import reduce
from typing import TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .._arrays import (
    MAX_NDIM,
    ArrayLike,
    ArraySpec,
    InputFacts,
    array_like,
    checked_size,
    input_facts,
    is_array,
    joint_device,
    is_differentiable,
    normalize_axis,
    shape_text,
    static_int,
    shareable,
    static_ints,
)
from .._memo import memoized
from .._plan import DensePullback, Plan
from .._results import NO_TANGENT
from .._rule import RuleOp
from .._tangents import Cotangent, DenseCotangent, Fill, NoTangent, ZeroTangent, project
from .._val import Val
from .. import _facts
from .._facts import A as _A

_DT = TypeVar("_DT", bound=np.generic)

Shape: TypeAlias = tuple[int, ...]
Index: TypeAlias = tuple["slice | int | pytypes.EllipsisType", ...]
DType: TypeAlias = np.dtype[np.generic]
Scalar: TypeAlias = "bool | int | float | complex"

_AXIS0: Val[int] = Val(0)
_PYTHON_SCALARS = (bool, int, float, complex)
_LARGEST_FLOAT_INT = int(np.finfo(np.float64).max)


# ======================================================================================
# Plans: everything a signature fixes, computed and validated once
# ======================================================================================


class ConcatenationPlan(Plan):
    """Where each input lives in the output, for one signature.

    ``indices[i]`` cuts input ``i``'s block out of the output, already of input ``i``'s
    shape (padded axes are integer indices), except for ``axis=None`` where ``reshapes[i]``
    gives the shape to view the flat block as. ``forward_axis`` is the one axis the forward
    concatenates along, or ``None`` for ``cat``'s block-diagonal form (zeros, then blocks);
    ``forward_shapes[i]`` is the shape input ``i`` is viewed as before that concatenation;
    ``flatten`` (``axis=None``) hands the inputs to the namespace's own flattening concatenate.
    ``tangent_dtypes[i]`` is ``None`` for a non-differentiable input (an input's tangent has
    its dtype in native byte order, as every op's). ``views_only`` says
    that every tangent is a plain view of a cotangent of the output's dtype.
    """

    def __init__(
        self,
        op: str,
        inputs: Sequence[InputFacts],
        out_shape: Shape,
        out_dtype: DType,
        indices: tuple[Index, ...],
        reshapes: tuple[Shape | None, ...],
        forward_axis: int | None,
        forward_shapes: tuple[Shape | None, ...],
        flatten: bool = False,
    ) -> None:
        tangent_dtypes = tuple(item.tangent_dtype for item in inputs)  # native, as every op's
        differentiable = is_differentiable(out_dtype)
        super().__init__(
            op,
            inputs,
            out_shape=out_shape,
            out_dtype=out_dtype,
            differentiable=differentiable,
            input_tangents=tuple(dtype is not None for dtype in tangent_dtypes),
            any_layout=True,  # the pullback slices dy: any memory layout will do
        )
        self.tangent_dtypes = tangent_dtypes
        self.indices = indices
        self.reshapes = reshapes
        self.forward_axis = forward_axis
        self.forward_shapes = forward_shapes
        self.python_scalars = tuple(item.scalar for item in inputs)
        self.flatten = flatten
        self.views_only = differentiable and all(
            # `is not None` first: NumPy reads `dtype == None` as `dtype == float64`.
            dtype is not None and dtype == out_dtype and reshape is None
            for dtype, reshape in zip(tangent_dtypes, reshapes)
        )

    def forward(self, arrays: tuple[object, ...]) -> ArrayLike:
        """One allocation of the output's dtype, then block copies."""
        xp = self.namespace
        if True in self.python_scalars:
            _check_python_ints(arrays, self.out_dtype)
        if self.flatten:
            return cast(ArrayLike, xp.concatenate(arrays, axis=None, dtype=self.out_dtype))
        if self.forward_axis is None:
            out = xp.zeros(self.out_shape, dtype=self.out_dtype)
            for index, value in zip(self.indices, arrays):
                out[index] = value
            return cast(ArrayLike, out)
        parts: list[ArrayLike] = []
        for value, shape, python_scalar in zip(arrays, self.forward_shapes, self.python_scalars):
            part = cast(ArrayLike, xp.asarray(value, dtype=self.out_dtype) if python_scalar else value)
            parts.append(part if shape is None else part.reshape(shape))
        return cast(ArrayLike, xp.concatenate(parts, axis=self.forward_axis, dtype=self.out_dtype))

    def pullback(self, saved: object) -> DensePullback:
        """One tangent per input: views of the cotangent, cast only where an input's dtype
        differs."""
        indices = self.indices
        if self.views_only:

            def views(dy: ArrayLike) -> tuple[object, ...]:
                tangents = tuple(map(dy.__getitem__, indices))
                if shareable(dy):  # views of dy are tangents as they are
                    return tangents
                return tuple(tangent.copy() for tangent in tangents)

            return views
        blocks = tuple(zip(indices, self.reshapes, self.tangent_dtypes))
        out_dtype = self.out_dtype

        def slices(dy: ArrayLike) -> tuple[object, ...]:
            copy = not shareable(dy)
            tangents: list[object] = []
            for index, reshape, dtype in blocks:
                if dtype is None:
                    tangents.append(NO_TANGENT)
                    continue
                view = dy[index]
                if reshape is not None:
                    view = view.reshape(reshape)
                tangents.append((view.copy() if copy else view) if dtype == out_dtype else project(view, dtype))
            return tuple(tangents)

        return slices

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        """Slices of a ``Fill`` are ``Fill``s."""
        value = fill.value
        return tuple(
            NO_TANGENT if dtype is None else Fill(value, shape, dtype)  # Fill takes a real dtype's real part
            for dtype, shape in zip(self.tangent_dtypes, self.input_shapes)
        )

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        """One allocation of the output's dtype; each input's tangent copied into its block."""
        block_diagonal = self.forward_axis is None
        out = (self.namespace.zeros if block_diagonal else self.namespace.empty)(self.out_shape, dtype=self.out_dtype)
        for index, reshape, tangent in zip(self.indices, self.reshapes, tangents):
            target = out[index]
            if reshape is not None:
                target = target.reshape(reshape)
            if isinstance(tangent, DenseCotangent):
                target[...] = tangent.array
            elif isinstance(tangent, Fill):
                target[...] = tangent.value
            elif not block_diagonal:
                target[...] = 0
        return out


def _sequence(arrays: object, op: str) -> tuple[object, ...]:
    """The inputs of a sequence-taking op, as a tuple; ``TypeError`` for anything else."""
    if isinstance(arrays, (tuple, list)):
        if not arrays:
            raise ValueError(f"{op}: need at least one array, got an empty sequence")
        return tuple(array_like(value, name) for value, name in zip(arrays, _names(len(arrays))))
    raise TypeError(
        f"{op}: arrays must be a tuple or list of arrays, got {type(arrays).__name__}"
    )


def _inputs(values: Sequence[object], names: Sequence[str], op: str, allow_scalars: bool) -> list[InputFacts]:
    """Read each input (``TypeError`` naming it for a kind or dtype no op takes) and check
    their device. A Python scalar (``cat``'s) is weak: see ``input_facts``; the values that do
    not fit the result dtype are refused by ``_check_python_ints``."""
    described: list[InputFacts] = []
    for name, value in zip(names, values):
        scalar = type(value) in _PYTHON_SCALARS and allow_scalars
        if not (scalar or is_array(value) or isinstance(value, ArraySpec)):
            wanted = "an array or a Python scalar" if allow_scalars else "an array"
            raise TypeError(f"{op}: {name} must be {wanted}, got {type(value).__name__}")
        described.append(input_facts(value, name, op, weak_scalars=allow_scalars))
    try:
        joint_device(described)
    except TypeError as error:
        raise TypeError(f"{op}: {error}") from None
    return described


def _result_dtype(inputs: Sequence[InputFacts]) -> DType:
    """NumPy's result dtype, Python scalars weak (NEP 50); no 32/64-argument limit."""
    strong = [item.dtype for item in inputs if not item.scalar]
    weak = [item.value for item in inputs if item.scalar]
    if strong:
        dtype: DType = reduce(np.promote_types, strong)
        for scalar in weak:
            dtype = np.result_type(dtype, cast(Scalar, scalar))
    else:
        dtype = reduce(np.promote_types, [item.dtype for item in inputs])
    # native, as NumPy's result (promote_types of one dtype alone keeps its byte order)
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def _block_plan(
    op: str,
    inputs: Sequence[InputFacts],
    block_shapes: Sequence[Shape],
    kept_axes: Sequence[tuple[int, ...]],
    joined_axes: tuple[int, ...],
    along: str,
) -> ConcatenationPlan:
    """The plan for inputs placed as blocks of ``block_shapes`` (all of the output's ndim).

    ``kept_axes[i]`` are the block axes that are input ``i``'s own axes (the others are
    size-1 padding, indexed by an integer so each block view has the input's shape);
    ``joined_axes`` are the axes the blocks follow each other along. ``along`` phrases them
    for error messages.
    """
    ndim = len(block_shapes[0])
    first = inputs[0]
    out_shape = list(block_shapes[0])
    for item, block in zip(inputs[1:], block_shapes[1:]):
        for axis in range(ndim):
            if axis not in joined_axes and block[axis] != block_shapes[0][axis]:
                raise ValueError(
                    f"{op}: {first.name} has shape {shape_text(first.shape)} and {item.name} has "
                    f"shape {shape_text(item.shape)}; they differ along axis {axis}, but input "
                    f"shapes must match except {along}"
                )
    for axis in joined_axes:
        out_shape[axis] = sum(block[axis] for block in block_shapes)
    out_dtype = _result_dtype(inputs)
    checked_size(out_shape, out_dtype.itemsize, op)

    offsets = dict.fromkeys(joined_axes, 0)
    indices: list[Index] = []
    for block, kept in zip(block_shapes, kept_axes):
        index: list[slice | int | pytypes.EllipsisType] = []
        for axis in range(ndim):
            if axis in offsets:
                start = offsets[axis]
                index.append(slice(start, start + block[axis]) if axis in kept else start)
            else:
                index.append(slice(None) if axis in kept else 0)
        if not kept:
            index.append(Ellipsis)  # an all-integer index would give a scalar, not a 0-d view
        indices.append(tuple(index))
        for axis in joined_axes:
            offsets[axis] += block[axis]

    block_diagonal = len(joined_axes) > 1
    forward_shapes = tuple(
        None if block == item.shape else block for item, block in zip(inputs, block_shapes)
    )
    return ConcatenationPlan(
        op, inputs, tuple(out_shape), out_dtype, tuple(indices), (None,) * len(inputs),
        None if block_diagonal else joined_axes[0], forward_shapes,
    )


def _flat_plan(op: str, inputs: Sequence[InputFacts]) -> ConcatenationPlan:
    """``axis=None``: every input flattened (C order), then joined into one vector."""
    sizes = [math.prod(item.shape) for item in inputs]
    out_dtype = _result_dtype(inputs)
    checked_size((sum(sizes),), out_dtype.itemsize, op)
    indices: list[Index] = []
    start = 0
    for size in sizes:
        indices.append((slice(start, start + size),))
        start += size
    reshapes = tuple(None if len(item.shape) == 1 else item.shape for item in inputs)
    no_views = (None,) * len(inputs)
    return ConcatenationPlan(op, inputs, (start,), out_dtype, tuple(indices), reshapes, 0, no_views, flatten=True)


# ======================================================================================
# Validation, one function per op
# ======================================================================================


def _names(count: int) -> list[str]:
    return [f"arrays[{position}]" for position in range(count)]


def _plan_concatenate(values: Sequence[object], axis: int | None) -> ConcatenationPlan:
    inputs = _inputs(values, _names(len(values)), "concatenate", allow_scalars=False)
    if axis is None:
        return _flat_plan("concatenate", inputs)
    first = inputs[0]
    for item in inputs:
        if not item.shape:
            raise ValueError(
                f"concatenate: zero-dimensional arrays cannot be concatenated, but {item.name} "
                f"has shape (); use axis=None, stack or cat"
            )
        if len(item.shape) != len(first.shape):
            raise ValueError(
                f"concatenate: all arrays must have the same number of dimensions, but "
                f"{first.name} has shape {shape_text(first.shape)} and {item.name} has shape "
                f"{shape_text(item.shape)}"
            )
    ndim = len(first.shape)
    normalized = normalize_axis(axis, ndim, "concatenate: axis")
    shapes = [item.shape for item in inputs]
    kept = [tuple(range(ndim))] * len(inputs)
    return _block_plan("concatenate", inputs, shapes, kept, (normalized,), f"along axis {normalized}")


def _plan_stack(values: Sequence[object], axis: int) -> ConcatenationPlan:
    inputs = _inputs(values, _names(len(values)), "stack", allow_scalars=False)
    first = inputs[0]
    for item in inputs:
        if item.shape != first.shape:
            raise ValueError(
                f"stack: all arrays must have the same shape, but {first.name} has shape "
                f"{shape_text(first.shape)} and {item.name} has shape {shape_text(item.shape)}"
            )
    ndim = len(first.shape)
    normalized = normalize_axis(axis, ndim + 1, "stack: axis")
    block = first.shape[:normalized] + (1,) + first.shape[normalized:]
    kept = tuple(position for position in range(ndim + 1) if position != normalized)
    return _block_plan(
        "stack", inputs, [block] * len(inputs), [kept] * len(inputs), (normalized,),
        f"along the new axis {normalized}",
    )


def _plan_hstack(values: Sequence[object]) -> ConcatenationPlan:
    inputs = _inputs(values, _names(len(values)), "hstack", allow_scalars=False)
    blocks = [item.shape if item.shape else (1,) for item in inputs]  # np.atleast_1d
    kept = [tuple(range(len(item.shape))) for item in inputs]
    _check_same_ndim("hstack", inputs, blocks, "after np.atleast_1d")
    axis = 0 if len(blocks[0]) == 1 else 1
    return _block_plan("hstack", inputs, blocks, kept, (axis,), f"along axis {axis}")


def _plan_vstack(values: Sequence[object]) -> ConcatenationPlan:
    inputs = _inputs(values, _names(len(values)), "vstack", allow_scalars=False)
    blocks: list[Shape] = []
    kept: list[tuple[int, ...]] = []
    for item in inputs:  # np.atleast_2d: () -> (1, 1), (n,) -> (1, n)
        if not item.shape:
            blocks.append((1, 1))
            kept.append(())
        elif len(item.shape) == 1:
            blocks.append((1,) + item.shape)
            kept.append((1,))
        else:
            blocks.append(item.shape)
            kept.append(tuple(range(len(item.shape))))
    _check_same_ndim("vstack", inputs, blocks, "after np.atleast_2d")
    return _block_plan("vstack", inputs, blocks, kept, (0,), "along axis 0")


def _check_same_ndim(op: str, inputs: Sequence[InputFacts], blocks: Sequence[Shape], how: str) -> None:
    for item, block in zip(inputs, blocks):
        if len(block) != len(blocks[0]):
            raise ValueError(
                f"{op}: all arrays must have the same number of dimensions {how}, but "
                f"{inputs[0].name} has shape {shape_text(inputs[0].shape)} and {item.name} has "
                f"shape {shape_text(item.shape)}"
            )


def _plan_cat(values: Sequence[object], dims: tuple[int, ...]) -> ConcatenationPlan:
    if not values:
        raise ValueError("cat: need at least one array or scalar")
    if not dims:
        raise ValueError("cat: dims must name at least one axis, got Val(())")
    if any(dim < 0 for dim in dims):
        raise ValueError(f"cat: dims are 0-based axes and must be non-negative, got {dims}")
    if len(set(dims)) != len(dims):
        raise ValueError(f"cat: dims must be distinct, got {dims}")
    if max(dims) >= MAX_NDIM:
        # Checked before the padding below builds tuples of max(dims) + 1 entries.
        raise ValueError(
            f"cat: dims={dims} needs a result of {max(dims) + 1} dimensions; NumPy arrays have "
            f"at most {MAX_NDIM}"
        )
    names = [f"arrays[{position}]" for position in range(len(values))]
    inputs = _inputs(values, names, "cat", allow_scalars=True)
    ndim = max(max(len(item.shape) for item in inputs), max(dims) + 1)
    blocks = [item.shape + (1,) * (ndim - len(item.shape)) for item in inputs]  # Julia's padding
    kept = [tuple(range(len(item.shape))) for item in inputs]
    joined = tuple(sorted(dims))
    along = f"along axis {joined[0]}" if len(joined) == 1 else f"along axes {joined}"
    return _block_plan("cat", inputs, blocks, kept, joined, along + " (inputs padded with trailing size-1 axes)")


def _check_python_ints(values: Sequence[object], out_dtype: DType) -> None:
    """A Python int is weak (NEP 50): it takes the result's dtype, so it must fit it. NumPy
    raises ``OverflowError`` when it does not; this names the input instead. Run on every
    call, cached plan or not: a plan's key holds a scalar's type, not its value."""
    for position, value in enumerate(values):
        if type(value) is int:
            low, high = _int_bounds(out_dtype)
            if not low <= value <= high:
                shown = str(value) if value.bit_length() <= 128 else f"of {value.bit_length()} bits"
                raise ValueError(
                    f"cat: arrays[{position}] is the Python int {shown}, which does not fit the "
                    f"result dtype {out_dtype} (a Python scalar takes the arrays' dtype, as in "
                    f"NumPy); pass it as an array of a wider dtype"
                )


@memoized(maxsize=64)
def _int_bounds(dtype: DType) -> tuple[int, int]:
    """The Python ints a dtype holds (a float dtype: those below float64's overflow)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype.str)
        return int(info.min), int(info.max)
    return -_LARGEST_FLOAT_INT, _LARGEST_FLOAT_INT


# ======================================================================================
# The ops
# ======================================================================================


class Concatenate(RuleOp):
    """``np.concatenate(arrays, axis)``; ``axis`` is ``Val(int)`` (negative allowed) or ``None``.

    ``None`` flattens each input (C order) first. The output dtype is NumPy's result dtype.
    Rules: ``back(dy)`` is ``((da, db, ...),)`` (plus ``NoTangent()`` for an ``axis`` passed
    positionally); each tangent is a view into ``dy`` when its input has ``dy``'s dtype, a
    projected copy otherwise, ``NoTangent()`` for integer/bool inputs. A ``Fill`` cotangent
    gives ``Fill`` tangents, a ``ZeroTangent`` gives ``ZeroTangent``s. The axis is static.
    """

    name = "concatenate"
    static_names = ("axis",)
    sequence = True

    def __call__(self, arrays: Sequence[npt.NDArray[_DT]], axis: Val[int] | int | None = _AXIS0) -> npt.NDArray[_DT]:
        return cast("npt.NDArray[_DT]", self.forward(arrays, axis))

    def bind(self, arrays: object, axis: object = _AXIS0) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return _sequence(arrays, "concatenate"), (axis,)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        axis = statics[0]
        return _plan_concatenate(arrays, None if axis is None else static_int(axis, "axis"))


class Stack(RuleOp):
    """``np.stack(arrays, axis)``: equal-shaped arrays joined along a new axis ``Val(int)``.

    ``back(dy)`` is ``((da, db, ...),)``; each tangent is the view ``dy[..., i, ...]`` (a copy
    only where the input's dtype differs from ``dy``'s). Same lazy-cotangent rules as
    ``concatenate``. The axis is static.
    """

    name = "stack"
    static_names = ("axis",)
    sequence = True

    def __call__(self, arrays: Sequence[npt.NDArray[_DT]], axis: Val[int] | int = _AXIS0) -> npt.NDArray[_DT]:
        return cast("npt.NDArray[_DT]", self.forward(arrays, axis))

    def bind(self, arrays: object, axis: object = _AXIS0) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return _sequence(arrays, "stack"), (axis,)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_stack(arrays, static_int(statics[0], "axis"))


class Hstack(RuleOp):
    """``np.hstack(arrays)``: along axis 0 for 1-D (and 0-d) inputs, axis 1 otherwise.

    ``back(dy)`` is ``((da, db, ...),)``, views into ``dy`` as for ``concatenate``; a 0-d
    input's tangent is a 0-d view.
    """

    name = "hstack"
    sequence = True

    def __call__(self, arrays: Sequence[npt.NDArray[_DT]]) -> npt.NDArray[_DT]:
        return cast("npt.NDArray[_DT]", self.forward(arrays))

    def bind(self, arrays: object) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return _sequence(arrays, "hstack"), ()

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_hstack(arrays)


class Vstack(RuleOp):
    """``np.vstack(arrays)``: along axis 0 after ``np.atleast_2d`` (a 1-D input is a row).

    ``back(dy)`` is ``((da, db, ...),)``, views into ``dy`` as for ``concatenate``; a 1-D
    input's tangent is its row of ``dy``, of the input's own shape.
    """

    name = "vstack"
    sequence = True

    def __call__(self, arrays: Sequence[npt.NDArray[_DT]]) -> npt.NDArray[_DT]:
        return cast("npt.NDArray[_DT]", self.forward(arrays))

    def bind(self, arrays: object) -> tuple[tuple[object, ...], tuple[object, ...]]:  # type: ignore[override]
        return _sequence(arrays, "vstack"), ()

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_vstack(arrays)


class Cat(RuleOp):
    """Julia's ``cat(arrays...; dims)`` with 0-based axes.

    ``dims=Val(k)``: inputs joined along axis ``k``; inputs of fewer than ``k + 1`` axes (and
    0-d arrays, Python scalars) are read with trailing size-1 axes, so ``cat(a, b,
    dims=Val(a.ndim))`` stacks them along a new last axis. ``dims=Val((i, j, ...))``: inputs
    placed block-diagonally along all those axes, zeros elsewhere. Output dtype: NumPy's
    result dtype, Python scalars weak.

    ``back(dy)`` is ``(da, db, ...)``, one per positional argument: views into ``dy`` of each
    input's shape (off-diagonal blocks are never read); a Python float/complex gets a 0-d
    float64/complex128 array, a Python int/bool ``NoTangent()``. ``dims`` is static.
    """

    name = "cat"
    static_names = ("dims",)

    def __call__(
        self,
        *arrays: npt.NDArray[np.generic] | np.generic | bool | int | float | complex,
        dims: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...],
    ) -> npt.NDArray[np.generic]:
        return cast("npt.NDArray[np.generic]", self.forward(*arrays, dims=dims))

    def bind(self, *arrays: object, **kwargs: object) -> tuple[tuple[object, ...], tuple[object, ...]]:
        unexpected = set(kwargs) - {"dims"}
        if unexpected:
            raise TypeError(f"cat: unexpected keyword arguments {sorted(unexpected)}; cat takes only dims=")
        dims = kwargs.get("dims")
        if dims is None:
            raise TypeError("cat: dims is required, e.g. dims=Val(0) or dims=Val((0, 1))")
        # A NumPy scalar is a 0-d array of its (strong) dtype; Python scalars stay weak.
        values = tuple(array_like(value, name, weak_scalars=True) for value, name in zip(arrays, _names(len(arrays))))
        return values, (dims,)

    def plan(self, arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
        return _plan_cat(arrays, static_ints(statics[0], "dims"))

concatenate = Concatenate()
stack = Stack()
hstack = Hstack()
vstack = Vstack()
cat = Cat()

__all__ = ["Cat", "ConcatenationPlan", "Concatenate", "Hstack", "Stack", "Vstack", "cat", "concatenate", "hstack", "stack", "vstack"]


# --- engine facts (stablerules._facts) -------------------------------------------------------


def _joined_shards(name: str) -> _facts.ShardRule:
    """The axes a concatenation leaves alone: every axis but the joined one, of inputs of one rank."""

    def shards(statics: _facts.Statics, shapes: _facts.Shapes) -> _facts.AxisMap:
        ndims = {len(shape) for shape in shapes}
        ndim = len(shapes[0]) if shapes else 0
        if len(ndims) != 1 or ndim == 0:
            return []
        count = len(shapes)
        if name == "concatenate":
            return _facts.others(ndim, _facts.axes(statics("axis", Val(0)), ndim), count)
        if name == "stack":
            (new,) = cast("set[int]", _facts.axes(statics("axis", Val(0)), ndim + 1))
            return [((axis,) * count, axis if axis < new else axis + 1) for axis in range(ndim)]
        if name == "hstack":
            return [] if ndim == 1 else _facts.others(ndim, {1}, count)
        if name == "vstack":
            return [((0,) * count, 1)] if ndim == 1 else _facts.others(ndim, {0}, count)
        return _facts.others(ndim, set(_facts.counts(statics("dims", None))), count)

    return shards


def _batch_hstack(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """hstack under a batch axis: concatenate on axis 1 (1-D samples, made ``(size, 1)``
    each) or 2, as NumPy's hstack does on the samples (axis 0 for 1-D ones, else 1)."""
    arrays = _facts.expanded(ops, arrays, batched, size)
    arrays = tuple(ops.reshape(x, (size, 1)) if len(ops.shape(x)) == 1 else x for x in arrays)
    axis = 1 if len(ops.shape(arrays[0])) == 2 else 2
    return ops.forward_as("concatenate", call, arrays, axis=Val(axis))


def _batch_vstack(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """vstack under a batch axis: samples of fewer than 2 axes made ``(1, n)``, then
    concatenate on axis 1."""
    arrays = _facts.expanded(ops, arrays, batched, size)
    arrays = tuple(
        ops.reshape(x, (size, 1, *(ops.shape(x)[1:] or (1,)))) if len(ops.shape(x)) <= 2 else x for x in arrays
    )
    return ops.forward_as("concatenate", call, arrays, axis=Val(1))


def _batch_cat(
    ops: _facts.ArrayOps[_A], call: _facts.OpCall, arrays: tuple[_A, ...], batched: tuple[bool, ...], size: int
) -> tuple[_A, ...]:
    """Julia's cat under a batch axis: each of ``dims`` shifted by one."""
    dims = _facts.value(call.static("dims"))
    moved = Val(dims + 1) if isinstance(dims, int) else Val(tuple(d + 1 for d in cast("tuple[int, ...]", dims)))
    return ops.forward(call.replace(dims=moved), _facts.expanded(ops, arrays, batched, size))


_BATCH: dict[str, _facts.BatchRule] = {
    "concatenate": _facts.shift_axes("axis", Val(0), none="flatten"),
    "stack": _facts.shift_axes("axis", Val(0)),
    "hstack": _batch_hstack,
    "vstack": _batch_vstack,
    "cat": _batch_cat,
}


def _forward_concatenate(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    arrays = xp.promoted(arrays)
    axis = _facts.value(call.static("axis", Val(0)))
    if axis is None:
        return (xp.concatenate([xp.reshape(a, (-1,)) for a in arrays], 0),)
    return (xp.concatenate(arrays, cast("int", axis)),)


def _forward_stack(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    return (xp.stack(xp.promoted(arrays), cast("int", _facts.value(call.static("axis", Val(0))))),)


def _forward_hstack(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    return (xp.hstack(xp.promoted(arrays)),)


def _forward_vstack(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    return (xp.vstack(xp.promoted(arrays)),)


def _forward_cat(xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]) -> tuple[_A, ...]:
    """Julia's ``cat``: one dim concatenates (trailing axes of 1 added as needed), several
    place the arrays block-diagonally: each padded with zeros along the other dims to its
    block's place, then all concatenated along the first dim. Exact: values are moved, never
    added to a zero (a ``-0.0`` stays one)."""
    arrays = xp.promoted(arrays)
    dims = _facts.counts(call.static("dims"))
    shapes = [xp.shape(a) for a in arrays]
    ndim = max(max(len(s) for s in shapes), max(dims) + 1)
    padded = [xp.reshape(a, (*s, *(1,) * (ndim - len(s)))) if len(s) < ndim else a for a, s in zip(arrays, shapes)]
    if len(dims) == 1:
        return (xp.concatenate(padded, dims[0]),)
    shapes = [xp.shape(p) for p in padded]
    totals = {dim: sum(int(s[dim]) for s in shapes) for dim in dims[1:]}
    offsets = dict.fromkeys(dims[1:], 0)
    blocks: list[_A] = []
    for part, part_shape in zip(padded, shapes):
        widths = tuple(
            (offsets[dim], totals[dim] - offsets[dim] - int(part_shape[dim])) if dim in offsets else (0, 0)
            for dim in range(ndim)
        )
        blocks.append(xp.pad(part, widths, 0) if any(any(pair) for pair in widths) else part)
        for dim in offsets:
            offsets[dim] += int(part_shape[dim])
    return (xp.concatenate(blocks, dims[0]),)


def _joined(
    xp: _facts.Namespace[_A], join: Callable[[tuple[_A, ...], int], _A], axis: int, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]]:
    """The join along ``axis`` for one signature, whose dtypes are part of it (an engine keys
    each tensor's dtype): inputs of one dtype join as they are, and so do mixed ones where
    the engine's join promotes them to NumPy's result dtype itself
    (``Namespace.joins_promoting``); other mixed ones are promoted first."""
    if xp.promoted(arrays) is arrays or xp.joins_promoting(arrays):
        return lambda arrays: (join(arrays, axis),)
    promoted = xp.promoted
    return lambda arrays: (join(promoted(arrays), axis),)


def _prepared_concatenate(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    """A DenseNet block's concatenation with its axis read once."""
    axis = _facts.value(call.static("axis", Val(0)))
    return _joined(xp, xp.concatenate, axis, arrays) if type(axis) is int else None


def _prepared_stack(
    xp: _facts.Namespace[_A], call: _facts.OpCall, arrays: tuple[_A, ...]
) -> Callable[[tuple[_A, ...]], tuple[_A, ...]] | None:
    axis = _facts.value(call.static("axis", Val(0)))
    return _joined(xp, xp.stack, axis, arrays) if type(axis) is int else None


_FORWARDS: dict[str, tuple[str, _facts.ForwardRule, _facts.PreparedRule | None]] = {
    "concatenate": ("torch.cat", _forward_concatenate, _prepared_concatenate),
    "stack": ("torch.stack", _forward_stack, _prepared_stack),
    "hstack": ("torch.hstack", _forward_hstack, None),
    "vstack": ("torch.vstack", _forward_vstack, None),
    "cat": ("torch.cat / F.pad (block-diagonal)", _forward_cat, None),
}

ENGINE_FACTS: dict[str, _facts.EngineFacts] = {
    name: _facts.EngineFacts(
        _facts.TorchFacts(words, "torch", _facts.VIEW), _joined_shards(name), _BATCH[name], forward=forward, prepared=prepared
    )
    for name, (words, forward, prepared) in _FORWARDS.items()
}
