"""``rrule`` / ``pullback`` / ``frule`` dispatch, rule registration, ``precompile`` and ``explain``.

At run time ``rrule`` and ``frule`` are one dict lookup (the registry) and a call. For mypy
they are overloaded once per op and call form, so the primal is exact and the pullback's tuple
has the call's positional arity (``_typing.py`` explains the decisions); the last overload
types a user-registered function from its own signature. The op classes are imported for the
type checker only: at run time the core knows no op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeAlias, TypeVar, cast, overload

import numpy as np
from numpy.typing import NDArray

from ._arrays import ArraySpec
from ._cache import ShapeSignature
from ._registry import FRULES, PULLBACKS, RRULES, KernelRequest, Op
from ._registry import _describe as describe_function
from ._tangents import NoTangent, ZeroTangent
from ._typing import (
    ArrayPullback,
    ArrayStaticPullback,
    ArrayStaticStaticPullback,
    CountsArray,
    DenseOrNoTangent,
    Function,
    LooseArrayPullback,
    LooseArrayStaticPullback,
    LooseArrayStaticStaticPullback,
    LoosePadConstantPullback,
    LoosePairPullback,
    LooseSequencePullback,
    LooseSequenceStaticPullback,
    LooseSplitPullback,
    LooseSplitStaticPullback,
    LooseSplitStaticStaticPullback,
    LooseTangent,
    LooseVariadicPullback,
    PadConstantPullback,
    PairPullback,
    Pullback,
    QuadruplePullback,
    RulePullback,
    SequencePullback,
    SequenceStaticPullback,
    SplitPullback,
    SplitStaticPullback,
    SplitStaticStaticPullback,
    SplitTangent,
    Tangent,
    TriplePullback,
    VariadicPullback,
    deprecated,
)
from ._val import Val

if TYPE_CHECKING:
    from .rules.broadcast import BroadcastTo, Mean, Sum
    from .rules.pad import Pad, Split
    from .rules.concatenate import Cat, Concatenate, Hstack, Stack, Vstack
    from .rules.flip import Flip, Roll
    from .rules.indexing import Getindex, IndexAdd, StaticIndex, Take, TakeAlongAxis  # temporary indexing block
    from .rules.kron import Kron
    from .rules.permute import PermuteDims, Reshape, Transpose
    from .rules.repeat import Repeat, Tile

_F = TypeVar("_F", bound=np.inexact)
_G = TypeVar("_G", bound=np.generic)
_P = ParamSpec("_P")
_R = TypeVar("_R")

# Static arguments are Val; plain ints and tuples (SPEC's convenience, counted as dynamic) have
# their own overloads, marked deprecated (see _typing.py).
_Axis: TypeAlias = Val[int]
_OptionalAxis: TypeAlias = Val[int] | None
_Counts: TypeAlias = Val[int] | Val[tuple[int, ...]]
_Repeats: TypeAlias = Val[int] | CountsArray
_CatInput: TypeAlias = NDArray[np.generic] | np.generic | bool | int | float | complex
_KronOperand: TypeAlias = NDArray[np.generic] | bool | int | float | complex
_Dense: TypeAlias = NDArray[np.generic]
_PlainCounts: TypeAlias = int | tuple[int, ...]
_AnyCounts: TypeAlias = _Counts | _PlainCounts
_AxisOrAxes: TypeAlias = Val[int] | Val[tuple[int, ...]]
# The temporary indexing block's aliases (see there).
_Index: TypeAlias = "StaticIndex[object] | tuple[object, ...] | slice[int | None, int | None, int | None] | int"
_Indices: TypeAlias = NDArray[np.integer] | Sequence[int]
_IndexFlag: TypeAlias = Val[bool] | bool
_Permutation: TypeAlias = Val[tuple[int, ...]]
_Shape: TypeAlias = Val[tuple[int, ...]] | Val[int]
_Axes: TypeAlias = Val[int] | Val[tuple[int, ...]] | None
_Flag: TypeAlias = Val[bool]
_Integral: TypeAlias = NDArray[np.bool_ | np.integer]
_PadConstant: TypeAlias = bool | int | float | complex | np.generic | NDArray[np.generic]
_NoTangents1: TypeAlias = Pullback[tuple[NoTangent], tuple[NoTangent]]
_NoTangents2: TypeAlias = Pullback[tuple[NoTangent, NoTangent], tuple[NoTangent, NoTangent]]
_NoTangents3: TypeAlias = Pullback[tuple[NoTangent, NoTangent, NoTangent], tuple[NoTangent, NoTangent, NoTangent]]
_DenseOrSpec: TypeAlias = NDArray[np.generic] | ArraySpec


def register_rrule(
    fn: object,
    rule: Callable[..., tuple[object, RulePullback]],
    *,
    pullback: Callable[..., RulePullback] | None = None,
    replace: bool = False,
) -> None:
    """Register ``rule(*args, **kwargs) -> (y, pullback)`` as ``fn``'s reverse rule.

    ``pullback(dy)`` returns one tangent per positional argument. A second registration for
    the same ``fn`` is a ``ValueError`` unless ``replace=True``.

    ``pullback``, optional: a builder ``pullback(*args, **kwargs) -> back`` giving the same
    ``back`` as ``rule`` without the forward, for ``sr.pullback(fn, ...)``; it may accept
    ``ArraySpec``s where ``back`` needs no primal values. Without one, ``sr.pullback`` runs
    ``rule`` and drops ``y``. Replacing a rule without a builder drops the old builder (it
    would disagree with the new rule).
    """
    if pullback is not None and not callable(pullback):
        raise TypeError(f"register_rrule: pullback must be callable, got {type(pullback).__name__}")
    RRULES.register(fn, rule, replace=replace)
    if pullback is None:
        PULLBACKS.unregister(fn)
    else:
        PULLBACKS.register(fn, pullback, replace=True)


def register_frule(fn: object, rule: Callable[..., tuple[object, object]], *, replace: bool = False) -> None:
    """Register ``rule(tangents, *args, **kwargs) -> (y, dy)`` as ``fn``'s forward rule."""
    FRULES.register(fn, rule, replace=replace)


# ======================================================================================
# rrule
# ======================================================================================

# --- concatenate, stack: ((da, db, ...),), plus NoTangent for an axis given positionally
@overload
def rrule(
    op: Concatenate, arrays: Sequence[NDArray[_F]], /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], SequencePullback[_F]]: ...
@overload
def rrule(
    op: Concatenate, arrays: Sequence[NDArray[_F]], axis: _OptionalAxis, /
) -> tuple[NDArray[_F], SequenceStaticPullback[_F]]: ...
@overload
def rrule(
    op: Concatenate, arrays: Sequence[NDArray[_G]], /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_G], LooseSequencePullback[_G]]: ...
@overload
def rrule(
    op: Concatenate, arrays: Sequence[NDArray[_G]], axis: _OptionalAxis, /
) -> tuple[NDArray[_G], LooseSequenceStaticPullback[_G]]: ...
@overload
def rrule(
    op: Stack, arrays: Sequence[NDArray[_F]], /, *, axis: _Axis = ...
) -> tuple[NDArray[_F], SequencePullback[_F]]: ...
@overload
def rrule(
    op: Stack, arrays: Sequence[NDArray[_F]], axis: _Axis, /
) -> tuple[NDArray[_F], SequenceStaticPullback[_F]]: ...
@overload
def rrule(
    op: Stack, arrays: Sequence[NDArray[_G]], /, *, axis: _Axis = ...
) -> tuple[NDArray[_G], LooseSequencePullback[_G]]: ...
@overload
def rrule(
    op: Stack, arrays: Sequence[NDArray[_G]], axis: _Axis, /
) -> tuple[NDArray[_G], LooseSequenceStaticPullback[_G]]: ...


# --- hstack, vstack: ((da, db, ...),)
@overload
def rrule(op: Hstack | Vstack, arrays: Sequence[NDArray[_F]], /) -> tuple[NDArray[_F], SequencePullback[_F]]: ...
@overload
def rrule(
    op: Hstack | Vstack, arrays: Sequence[NDArray[_G]], /
) -> tuple[NDArray[_G], LooseSequencePullback[_G]]: ...


# --- cat: (da, db, ...), one entry per positional argument
@overload
def rrule(op: Cat, a: NDArray[_F], /, *, dims: _Counts) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: Cat, a: NDArray[_F], b: NDArray[_F], /, *, dims: _Counts
) -> tuple[NDArray[_F], PairPullback[_F]]: ...
@overload
def rrule(
    op: Cat, a: NDArray[_F], b: NDArray[_F], c: NDArray[_F], /, *, dims: _Counts
) -> tuple[NDArray[_F], TriplePullback[_F]]: ...
@overload
def rrule(
    op: Cat, a: NDArray[_F], b: NDArray[_F], c: NDArray[_F], d: NDArray[_F], /, *, dims: _Counts
) -> tuple[NDArray[_F], QuadruplePullback[_F]]: ...
@overload
def rrule(op: Cat, /, *arrays: NDArray[_F], dims: _Counts) -> tuple[NDArray[_F], VariadicPullback[_F]]: ...
@overload
def rrule(op: Cat, /, *arrays: NDArray[_G], dims: _Counts) -> tuple[NDArray[_G], LooseVariadicPullback[_G]]: ...
@overload
def rrule(
    op: Cat, /, *arrays: _CatInput, dims: _Counts
) -> tuple[NDArray[np.generic], LooseVariadicPullback[np.generic]]: ...


# --- repeat: (dx, NoTangent()[, NoTangent()]) with repeats; (dx,) with inner/outer only
@overload
def rrule(
    op: Repeat, x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(
    op: Repeat, x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
def rrule(
    op: Repeat, x: NDArray[_F], /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: Repeat, x: NDArray[_G], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Repeat, x: NDArray[_G], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
def rrule(
    op: Repeat, x: NDArray[_G], /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...


# --- tile: (dx, NoTangent()), or (dx,) with reps given by keyword
@overload
def rrule(op: Tile, x: NDArray[_F], reps: _Counts, /) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(op: Tile, x: NDArray[_F], /, *, reps: _Counts) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(op: Tile, x: NDArray[_G], reps: _Counts, /) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(op: Tile, x: NDArray[_G], /, *, reps: _Counts) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...


# --- kron: (da, db); a Python scalar operand's tangent is a 0-d array (or NoTangent for an int)
@overload
def rrule(op: Kron, a: NDArray[_F], b: NDArray[_F], /) -> tuple[NDArray[_F], PairPullback[_F]]: ...
@overload
def rrule(op: Kron, a: NDArray[_G], b: NDArray[_G], /) -> tuple[NDArray[_G], LoosePairPullback[_G]]: ...
@overload
def rrule(
    op: Kron, a: _KronOperand, b: _KronOperand, /
) -> tuple[NDArray[np.generic], LoosePairPullback[np.generic]]: ...


# --- flip, roll, permute_dims, transpose: (dx,) plus NoTangent per static given positionally
@overload
def rrule(
    op: Flip, x: NDArray[_F], /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(op: Flip, x: NDArray[_F], axis: _AxisOrAxes | None, /) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(
    op: Flip, x: NDArray[_G], /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
def rrule(
    op: Flip, x: NDArray[_G], axis: _AxisOrAxes | None, /
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes, axis: _AxisOrAxes | None, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
def rrule(
    op: Roll, x: NDArray[_F], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes, axis: _AxisOrAxes | None, /
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
def rrule(
    op: Roll, x: NDArray[_G], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
def rrule(
    op: PermuteDims | Transpose, x: NDArray[_F], axes: _Permutation, /
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(op: PermuteDims, x: NDArray[_F], /, *, axes: _Permutation) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: Transpose, x: NDArray[_F], /, *, axes: _Permutation | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: PermuteDims | Transpose, x: NDArray[_G], axes: _Permutation, /
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: PermuteDims, x: NDArray[_G], /, *, axes: _Permutation
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
def rrule(
    op: Transpose, x: NDArray[_G], /, *, axes: _Permutation | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
# --- reshape, broadcast_to, sum, mean, pad, split
# reshape, broadcast_to: (dx[, NoTangent()]); sum/mean: (dx, NoTangent() per positional axis/keepdims),
# an integer or bool input's entries all NoTangent (its sum is an integer array, its mean
# float64); pad: (dx, NoTangent()[, the constant's tangent]); split: its output is a tuple, its
# pullback takes a tuple of cotangents (TuplePullback).
@overload
def rrule(
    op: Reshape | BroadcastTo, x: NDArray[_F], shape: _Shape, /
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(op: Reshape | BroadcastTo, x: NDArray[_F], /, *, shape: _Shape) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: Reshape | BroadcastTo, x: NDArray[_G], shape: _Shape, /
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Reshape | BroadcastTo, x: NDArray[_G], /, *, shape: _Shape
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
def rrule(
    op: Sum | Mean, x: NDArray[_F], /, *, axis: _Axes = ..., keepdims: _Flag = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: Sum | Mean, x: NDArray[_F], axis: _Axes, /, *, keepdims: _Flag = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(
    op: Sum | Mean, x: NDArray[_F], axis: _Axes, keepdims: _Flag, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
def rrule(
    op: Sum, x: _Integral, /, *, axis: _Axes = ..., keepdims: _Flag = ...
) -> tuple[NDArray[np.integer], _NoTangents1]: ...
@overload
def rrule(
    op: Sum, x: _Integral, axis: _Axes, /, *, keepdims: _Flag = ...
) -> tuple[NDArray[np.integer], _NoTangents2]: ...
@overload
def rrule(op: Sum, x: _Integral, axis: _Axes, keepdims: _Flag, /) -> tuple[NDArray[np.integer], _NoTangents3]: ...
@overload
def rrule(
    op: Mean, x: _Integral, /, *, axis: _Axes = ..., keepdims: _Flag = ...
) -> tuple[NDArray[np.float64], _NoTangents1]: ...
@overload
def rrule(
    op: Mean, x: _Integral, axis: _Axes, /, *, keepdims: _Flag = ...
) -> tuple[NDArray[np.float64], _NoTangents2]: ...
@overload
def rrule(op: Mean, x: _Integral, axis: _Axes, keepdims: _Flag, /) -> tuple[NDArray[np.float64], _NoTangents3]: ...
@overload
def rrule(
    op: Pad, x: NDArray[_F], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(
    op: Pad, x: NDArray[_F], pad_width: _Counts, constant_values: _PadConstant, /
) -> tuple[NDArray[_F], PadConstantPullback[_F]]: ...
@overload
def rrule(
    op: Pad, x: NDArray[_G], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Pad, x: NDArray[_G], pad_width: _Counts, constant_values: _PadConstant, /
) -> tuple[NDArray[_G], LoosePadConstantPullback[_G]]: ...
@overload
def rrule(
    op: Split, x: NDArray[_F], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> tuple[tuple[NDArray[_F], ...], SplitStaticPullback[_F]]: ...
@overload
def rrule(
    op: Split, x: NDArray[_F], indices_or_sections: _Counts, axis: _Axis, /
) -> tuple[tuple[NDArray[_F], ...], SplitStaticStaticPullback[_F]]: ...
@overload
def rrule(
    op: Split, x: NDArray[_F], /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> tuple[tuple[NDArray[_F], ...], SplitPullback[_F]]: ...
@overload
def rrule(
    op: Split, x: NDArray[_G], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> tuple[tuple[NDArray[_G], ...], LooseSplitStaticPullback[_G]]: ...
@overload
def rrule(
    op: Split, x: NDArray[_G], indices_or_sections: _Counts, axis: _Axis, /
) -> tuple[tuple[NDArray[_G], ...], LooseSplitStaticStaticPullback[_G]]: ...
@overload
def rrule(
    op: Split, x: NDArray[_G], /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> tuple[tuple[NDArray[_G], ...], LooseSplitPullback[_G]]: ...


# --- plain ints or tuples as static arguments: accepted and typed as the Val forms above, marked
# deprecated so that mypy with the `deprecated` error code on says "use Val" (see _typing.py)
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Concatenate | Stack, arrays: Sequence[NDArray[_F]], /, *, axis: int
) -> tuple[NDArray[_F], SequencePullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Concatenate | Stack, arrays: Sequence[NDArray[_F]], axis: int, /
) -> tuple[NDArray[_F], SequenceStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Concatenate | Stack, arrays: Sequence[NDArray[_G]], /, *, axis: int
) -> tuple[NDArray[_G], LooseSequencePullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Concatenate | Stack, arrays: Sequence[NDArray[_G]], axis: int, /
) -> tuple[NDArray[_G], LooseSequenceStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Cat, /, *arrays: NDArray[_F], dims: _PlainCounts) -> tuple[NDArray[_F], VariadicPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Cat, /, *arrays: NDArray[_G], dims: _PlainCounts) -> tuple[NDArray[_G], LooseVariadicPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Cat, /, *arrays: _CatInput, dims: _PlainCounts
) -> tuple[NDArray[np.generic], LooseVariadicPullback[np.generic]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Repeat, x: NDArray[_F], repeats: _Repeats | int, /, *, axis: _OptionalAxis | int = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Repeat, x: NDArray[_F], repeats: _Repeats | int, axis: _OptionalAxis | int, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Repeat, x: NDArray[_F], /, *, inner: _AnyCounts | None = ..., outer: _AnyCounts | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Repeat, x: NDArray[_G], repeats: _Repeats | int, /, *, axis: _OptionalAxis | int = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Repeat, x: NDArray[_G], repeats: _Repeats | int, axis: _OptionalAxis | int, /
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Repeat, x: NDArray[_G], /, *, inner: _AnyCounts | None = ..., outer: _AnyCounts | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Tile, x: NDArray[_F], reps: _PlainCounts, /) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Tile, x: NDArray[_F], /, *, reps: _PlainCounts) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Tile, x: NDArray[_G], reps: _PlainCounts, /) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Tile, x: NDArray[_G], /, *, reps: _PlainCounts) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...

# flip, roll, permute_dims, transpose, reshape, broadcast_to, sum, mean, pad, split. An op with one
# static takes only a plain value here (these forms never overlap its Val forms); roll, sum/mean
# and split take Val or plain for each static, so a Val beside a plain value matches too.
# Forms that coincide once positional names are dropped are merged (flip, reshape, broadcast_to).
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Flip, x: NDArray[_F], /, *, axis: _PlainCounts) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: Flip, x: NDArray[_G], /, *, axis: _PlainCounts) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes | _PlainCounts, /, *, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Roll, x: NDArray[_F], /, *, shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes | _PlainCounts, /, *, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None, /
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Roll, x: NDArray[_G], /, *, shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: PermuteDims | Transpose, x: NDArray[_F], axes: tuple[int, ...], /
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: PermuteDims | Transpose, x: NDArray[_F], /, *, axes: tuple[int, ...]
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: PermuteDims | Transpose, x: NDArray[_G], axes: tuple[int, ...], /
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: PermuteDims | Transpose, x: NDArray[_G], /, *, axes: tuple[int, ...]
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Flip | Reshape | BroadcastTo, x: NDArray[_F], shape: _PlainCounts, /
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Reshape | BroadcastTo, x: NDArray[_F], /, *, shape: _PlainCounts
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Flip | Reshape | BroadcastTo, x: NDArray[_G], shape: _PlainCounts, /
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Reshape | BroadcastTo, x: NDArray[_G], /, *, shape: _PlainCounts
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Sum | Mean, x: NDArray[_F], /, *, axis: _Axes | _PlainCounts = ..., keepdims: _Flag | bool = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Sum | Mean, x: NDArray[_F], axis: _Axes | _PlainCounts, /, *, keepdims: _Flag | bool = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Sum | Mean, x: NDArray[_F], axis: _Axes | _PlainCounts, keepdims: _Flag | bool, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Sum, x: _Integral, /, *, axis: _Axes | _PlainCounts = ..., keepdims: _Flag | bool = ...
) -> tuple[NDArray[np.integer], _NoTangents1]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Sum, x: _Integral, axis: _Axes | _PlainCounts, /, *, keepdims: _Flag | bool = ...
) -> tuple[NDArray[np.integer], _NoTangents2]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Sum, x: _Integral, axis: _Axes | _PlainCounts, keepdims: _Flag | bool, /
) -> tuple[NDArray[np.integer], _NoTangents3]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Mean, x: _Integral, /, *, axis: _Axes | _PlainCounts = ..., keepdims: _Flag | bool = ...
) -> tuple[NDArray[np.float64], _NoTangents1]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Mean, x: _Integral, axis: _Axes | _PlainCounts, /, *, keepdims: _Flag | bool = ...
) -> tuple[NDArray[np.float64], _NoTangents2]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Mean, x: _Integral, axis: _Axes | _PlainCounts, keepdims: _Flag | bool, /
) -> tuple[NDArray[np.float64], _NoTangents3]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Pad, x: NDArray[_F], pad_width: _PlainCounts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Pad, x: NDArray[_F], pad_width: _PlainCounts, constant_values: _PadConstant, /
) -> tuple[NDArray[_F], PadConstantPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Pad, x: NDArray[_G], pad_width: _PlainCounts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Pad, x: NDArray[_G], pad_width: _PlainCounts, constant_values: _PadConstant, /
) -> tuple[NDArray[_G], LoosePadConstantPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Split, x: NDArray[_F], indices_or_sections: _AnyCounts, /, *, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_F], ...], SplitStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Split, x: NDArray[_F], indices_or_sections: _AnyCounts, axis: _Axis | int, /
) -> tuple[tuple[NDArray[_F], ...], SplitStaticStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Split, x: NDArray[_F], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_F], ...], SplitPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Split, x: NDArray[_G], indices_or_sections: _AnyCounts, /, *, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_G], ...], LooseSplitStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Split, x: NDArray[_G], indices_or_sections: _AnyCounts, axis: _Axis | int, /
) -> tuple[tuple[NDArray[_G], ...], LooseSplitStaticStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: Split, x: NDArray[_G], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_G], ...], LooseSplitPullback[_G]]: ...

# --- TEMPORARY, hand-written: the indexing family (getindex, take, take_along_axis, index_add)
# --- until its ops are rows of the generated schema. Loose on purpose: one overload per op and
# --- call form; the ops' own __call__ overloads carry the exact result types.
@overload
def rrule(op: Getindex, x: NDArray[_F], index: _Index, /) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(op: Getindex, x: NDArray[_G], index: _Index, /) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Take, x: NDArray[_G], indices: _Indices, /, *, axis: _OptionalAxis | int = ..., unique: _IndexFlag = ..., sorted: _IndexFlag = ..., deterministic: _IndexFlag = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: Take, x: NDArray[_G], indices: _Indices, axis: _OptionalAxis | int, /, *, unique: _IndexFlag = ..., sorted: _IndexFlag = ..., deterministic: _IndexFlag = ...
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
def rrule(op: TakeAlongAxis, x: NDArray[_G], indices: _Indices, /, *, axis: _OptionalAxis | int) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(op: TakeAlongAxis, x: NDArray[_G], indices: _Indices, axis: _OptionalAxis | int, /) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
def rrule(op: IndexAdd, x: NDArray[_G], indices: _Indices, values: object, /, axis: _Axis | int = ...) -> tuple[NDArray[_G], RulePullback]: ...
# --- end of the temporary indexing block

# --- a user-registered function: arguments checked against its own signature
@overload
def rrule(op: Function[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> tuple[_R, RulePullback]: ...


def rrule(op: Callable[..., object], /, *args: object, **kwargs: object) -> tuple[object, RulePullback]:
    """``y, back = rrule(op, *args, **kwargs)``: the primal and its pullback.

    ``back(dy)`` returns a tuple with one tangent per positional argument: an array's
    tangent has its shape and dtype, a sequence of arrays gets a tuple of tangents, a
    non-differentiable argument gets ``NoTangent()``. Typed per op: ``y`` exactly as the op
    returns it, ``back`` a ``Pullback`` of the call's arity. Static arguments are ``Val``s; a
    plain int works as in the op itself (counted as dynamic; its overloads are marked
    deprecated, see ``stablerules._typing``).
    """
    rule = RRULES.lookup(op)
    return cast("tuple[object, RulePullback]", rule(*args, **kwargs))


# ======================================================================================
# pullback
# ======================================================================================

# --- concatenate, stack: ((da, db, ...),), plus NoTangent for an axis given positionally
@overload
def pullback(
    op: Concatenate, arrays: Sequence[NDArray[_F]], /, *, axis: _OptionalAxis = ...
) -> SequencePullback[_F]: ...
@overload
def pullback(
    op: Concatenate, arrays: Sequence[NDArray[_F]], axis: _OptionalAxis, /
) -> SequenceStaticPullback[_F]: ...
@overload
def pullback(
    op: Concatenate, arrays: Sequence[NDArray[_G]], /, *, axis: _OptionalAxis = ...
) -> LooseSequencePullback[_G]: ...
@overload
def pullback(
    op: Concatenate, arrays: Sequence[NDArray[_G]], axis: _OptionalAxis, /
) -> LooseSequenceStaticPullback[_G]: ...
@overload
def pullback(
    op: Stack, arrays: Sequence[NDArray[_F]], /, *, axis: _Axis = ...
) -> SequencePullback[_F]: ...
@overload
def pullback(
    op: Stack, arrays: Sequence[NDArray[_F]], axis: _Axis, /
) -> SequenceStaticPullback[_F]: ...
@overload
def pullback(
    op: Stack, arrays: Sequence[NDArray[_G]], /, *, axis: _Axis = ...
) -> LooseSequencePullback[_G]: ...
@overload
def pullback(
    op: Stack, arrays: Sequence[NDArray[_G]], axis: _Axis, /
) -> LooseSequenceStaticPullback[_G]: ...


# --- hstack, vstack: ((da, db, ...),)
@overload
def pullback(op: Hstack | Vstack, arrays: Sequence[NDArray[_F]], /) -> SequencePullback[_F]: ...
@overload
def pullback(
    op: Hstack | Vstack, arrays: Sequence[NDArray[_G]], /
) -> LooseSequencePullback[_G]: ...


# --- cat: (da, db, ...), one entry per positional argument
@overload
def pullback(op: Cat, a: NDArray[_F], /, *, dims: _Counts) -> ArrayPullback[_F]: ...
@overload
def pullback(
    op: Cat, a: NDArray[_F], b: NDArray[_F], /, *, dims: _Counts
) -> PairPullback[_F]: ...
@overload
def pullback(
    op: Cat, a: NDArray[_F], b: NDArray[_F], c: NDArray[_F], /, *, dims: _Counts
) -> TriplePullback[_F]: ...
@overload
def pullback(
    op: Cat, a: NDArray[_F], b: NDArray[_F], c: NDArray[_F], d: NDArray[_F], /, *, dims: _Counts
) -> QuadruplePullback[_F]: ...
@overload
def pullback(op: Cat, /, *arrays: NDArray[_F], dims: _Counts) -> VariadicPullback[_F]: ...
@overload
def pullback(op: Cat, /, *arrays: NDArray[_G], dims: _Counts) -> LooseVariadicPullback[_G]: ...
@overload
def pullback(
    op: Cat, /, *arrays: _CatInput, dims: _Counts
) -> LooseVariadicPullback[np.generic]: ...


# --- repeat: (dx, NoTangent()[, NoTangent()]) with repeats; (dx,) with inner/outer only
@overload
def pullback(
    op: Repeat, x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(
    op: Repeat, x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> ArrayStaticStaticPullback[_F]: ...
@overload
def pullback(
    op: Repeat, x: NDArray[_F], /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> ArrayPullback[_F]: ...
@overload
def pullback(
    op: Repeat, x: NDArray[_G], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(
    op: Repeat, x: NDArray[_G], repeats: _Repeats, axis: _OptionalAxis, /
) -> LooseArrayStaticStaticPullback[_G]: ...
@overload
def pullback(
    op: Repeat, x: NDArray[_G], /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> LooseArrayPullback[_G]: ...


# --- tile: (dx, NoTangent()), or (dx,) with reps given by keyword
@overload
def pullback(op: Tile, x: NDArray[_F], reps: _Counts, /) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(op: Tile, x: NDArray[_F], /, *, reps: _Counts) -> ArrayPullback[_F]: ...
@overload
def pullback(op: Tile, x: NDArray[_G], reps: _Counts, /) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(op: Tile, x: NDArray[_G], /, *, reps: _Counts) -> LooseArrayPullback[_G]: ...


# --- kron: (da, db); a Python scalar operand's tangent is a 0-d array (or NoTangent for an int)
@overload
def pullback(op: Kron, a: NDArray[_F], b: NDArray[_F], /) -> PairPullback[_F]: ...
@overload
def pullback(op: Kron, a: NDArray[_G], b: NDArray[_G], /) -> LoosePairPullback[_G]: ...
@overload
def pullback(
    op: Kron, a: _KronOperand, b: _KronOperand, /
) -> LoosePairPullback[np.generic]: ...



# --- flip, roll, permute_dims, transpose, reshape, broadcast_to, sum, mean, pad, split: as rrule's
@overload
def pullback(op: Flip, x: NDArray[_F], /, *, axis: _AxisOrAxes | None = ...) -> ArrayPullback[_F]: ...
@overload
def pullback(op: Flip, x: NDArray[_F], axis: _AxisOrAxes | None, /) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(op: Flip, x: NDArray[_G], /, *, axis: _AxisOrAxes | None = ...) -> LooseArrayPullback[_G]: ...
@overload
def pullback(op: Flip, x: NDArray[_G], axis: _AxisOrAxes | None, /) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes, axis: _AxisOrAxes | None, /
) -> ArrayStaticStaticPullback[_F]: ...
@overload
def pullback(
    op: Roll, x: NDArray[_F], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> ArrayPullback[_F]: ...
@overload
def pullback(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes, axis: _AxisOrAxes | None, /
) -> LooseArrayStaticStaticPullback[_G]: ...
@overload
def pullback(
    op: Roll, x: NDArray[_G], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> LooseArrayPullback[_G]: ...
@overload
def pullback(op: PermuteDims | Transpose, x: NDArray[_F], axes: _Permutation, /) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(op: PermuteDims, x: NDArray[_F], /, *, axes: _Permutation) -> ArrayPullback[_F]: ...
@overload
def pullback(op: Transpose, x: NDArray[_F], /, *, axes: _Permutation | None = ...) -> ArrayPullback[_F]: ...
@overload
def pullback(op: PermuteDims | Transpose, x: NDArray[_G], axes: _Permutation, /) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(op: PermuteDims, x: NDArray[_G], /, *, axes: _Permutation) -> LooseArrayPullback[_G]: ...
@overload
def pullback(op: Transpose, x: NDArray[_G], /, *, axes: _Permutation | None = ...) -> LooseArrayPullback[_G]: ...
@overload
def pullback(op: Reshape | BroadcastTo, x: NDArray[_F], shape: _Shape, /) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(op: Reshape | BroadcastTo, x: NDArray[_F], /, *, shape: _Shape) -> ArrayPullback[_F]: ...
@overload
def pullback(op: Reshape | BroadcastTo, x: NDArray[_G], shape: _Shape, /) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(op: Reshape | BroadcastTo, x: NDArray[_G], /, *, shape: _Shape) -> LooseArrayPullback[_G]: ...
@overload
def pullback(op: Sum | Mean, x: NDArray[_F], /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...) -> ArrayPullback[_F]: ...
@overload
def pullback(op: Sum | Mean, x: NDArray[_F], axis: _Axes, /, *, keepdims: _IndexFlag = ...) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(op: Sum | Mean, x: NDArray[_F], axis: _Axes, keepdims: _Flag, /) -> ArrayStaticStaticPullback[_F]: ...
@overload
def pullback(op: Sum | Mean, x: _Integral, /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...) -> _NoTangents1: ...
@overload
def pullback(op: Sum | Mean, x: _Integral, axis: _Axes, /, *, keepdims: _IndexFlag = ...) -> _NoTangents2: ...
@overload
def pullback(op: Sum | Mean, x: _Integral, axis: _Axes, keepdims: _Flag, /) -> _NoTangents3: ...
@overload
def pullback(
    op: Pad, x: NDArray[_F], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> ArrayStaticPullback[_F]: ...
@overload
def pullback(
    op: Pad, x: NDArray[_F], pad_width: _Counts, constant_values: _PadConstant, /
) -> PadConstantPullback[_F]: ...
@overload
def pullback(
    op: Pad, x: NDArray[_G], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(
    op: Pad, x: NDArray[_G], pad_width: _Counts, constant_values: _PadConstant, /
) -> LoosePadConstantPullback[_G]: ...
@overload
def pullback(
    op: Split, x: NDArray[_F], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> SplitStaticPullback[_F]: ...
@overload
def pullback(
    op: Split, x: NDArray[_F], indices_or_sections: _Counts, axis: _Axis, /
) -> SplitStaticStaticPullback[_F]: ...
@overload
def pullback(op: Split, x: NDArray[_F], /, *, indices_or_sections: _Counts, axis: _Axis = ...) -> SplitPullback[_F]: ...
@overload
def pullback(
    op: Split, x: NDArray[_G], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> LooseSplitStaticPullback[_G]: ...
@overload
def pullback(
    op: Split, x: NDArray[_G], indices_or_sections: _Counts, axis: _Axis, /
) -> LooseSplitStaticStaticPullback[_G]: ...
@overload
def pullback(
    op: Split, x: NDArray[_G], /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> LooseSplitPullback[_G]: ...

# --- ArraySpecs where no primal values are needed (every op but kron): loosely typed entries
@overload
def pullback(
    op: Repeat, x: ArraySpec, repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Repeat, x: ArraySpec, repeats: _Repeats, axis: _OptionalAxis, /
) -> LooseArrayStaticStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Repeat, x: ArraySpec, /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(op: Tile, x: ArraySpec, reps: _Counts, /) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(op: Tile, x: ArraySpec, /, *, reps: _Counts) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(
    op: Concatenate, arrays: Sequence[_DenseOrSpec], /, *, axis: _OptionalAxis = ...
) -> LooseSequencePullback[np.generic]: ...
@overload
def pullback(
    op: Concatenate, arrays: Sequence[_DenseOrSpec], axis: _OptionalAxis, /
) -> LooseSequenceStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Stack, arrays: Sequence[_DenseOrSpec], /, *, axis: _Axis = ...
) -> LooseSequencePullback[np.generic]: ...
@overload
def pullback(
    op: Stack, arrays: Sequence[_DenseOrSpec], axis: _Axis, /
) -> LooseSequenceStaticPullback[np.generic]: ...
@overload
def pullback(op: Hstack | Vstack, arrays: Sequence[_DenseOrSpec], /) -> LooseSequencePullback[np.generic]: ...
@overload
def pullback(op: Cat, /, *arrays: _CatInput | ArraySpec, dims: _Counts) -> LooseVariadicPullback[np.generic]: ...

# flip ... split (none reads a primal value)
@overload
def pullback(op: Flip, x: ArraySpec, /, *, axis: _AxisOrAxes | None = ...) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(op: Flip, x: ArraySpec, axis: _AxisOrAxes | None, /) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Roll, x: ArraySpec, shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Roll, x: ArraySpec, shift: _AxisOrAxes, axis: _AxisOrAxes | None, /
) -> LooseArrayStaticStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Roll, x: ArraySpec, /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(
    op: PermuteDims | Transpose, x: ArraySpec, axes: _Permutation, /
) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(op: PermuteDims, x: ArraySpec, /, *, axes: _Permutation) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(op: Transpose, x: ArraySpec, /, *, axes: _Permutation | None = ...) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(op: Reshape | BroadcastTo, x: ArraySpec, shape: _Shape, /) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(op: Reshape | BroadcastTo, x: ArraySpec, /, *, shape: _Shape) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(
    op: Sum | Mean, x: ArraySpec, /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...
) -> LooseArrayPullback[np.generic]: ...
@overload
def pullback(
    op: Sum | Mean, x: ArraySpec, axis: _Axes, /, *, keepdims: _IndexFlag = ...
) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Sum | Mean, x: ArraySpec, axis: _Axes, keepdims: _Flag, /
) -> LooseArrayStaticStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Pad, x: ArraySpec, pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> LooseArrayStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Pad, x: ArraySpec, pad_width: _Counts, constant_values: _PadConstant, /
) -> LoosePadConstantPullback[np.generic]: ...
@overload
def pullback(
    op: Split, x: ArraySpec, indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> LooseSplitStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Split, x: ArraySpec, indices_or_sections: _Counts, axis: _Axis, /
) -> LooseSplitStaticStaticPullback[np.generic]: ...
@overload
def pullback(
    op: Split, x: ArraySpec, /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> LooseSplitPullback[np.generic]: ...


# --- plain ints or tuples as static arguments (see the same block of rrule)
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Concatenate | Stack, arrays: Sequence[NDArray[_F]], /, *, axis: int) -> SequencePullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Concatenate | Stack, arrays: Sequence[NDArray[_F]], axis: int, /) -> SequenceStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Concatenate | Stack, arrays: Sequence[NDArray[_G]], /, *, axis: int) -> LooseSequencePullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Concatenate | Stack, arrays: Sequence[NDArray[_G]], axis: int, /
) -> LooseSequenceStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Cat, /, *arrays: NDArray[_F], dims: _PlainCounts) -> VariadicPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Cat, /, *arrays: NDArray[_G], dims: _PlainCounts) -> LooseVariadicPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Cat, /, *arrays: _CatInput, dims: _PlainCounts) -> LooseVariadicPullback[np.generic]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Repeat, x: NDArray[_F], repeats: _Repeats | int, /, *, axis: _OptionalAxis | int = ...
) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Repeat, x: NDArray[_F], repeats: _Repeats | int, axis: _OptionalAxis | int, /
) -> ArrayStaticStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Repeat, x: NDArray[_F], /, *, inner: _AnyCounts | None = ..., outer: _AnyCounts | None = ...
) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Repeat, x: NDArray[_G], repeats: _Repeats | int, /, *, axis: _OptionalAxis | int = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Repeat, x: NDArray[_G], repeats: _Repeats | int, axis: _OptionalAxis | int, /
) -> LooseArrayStaticStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Repeat, x: NDArray[_G], /, *, inner: _AnyCounts | None = ..., outer: _AnyCounts | None = ...
) -> LooseArrayPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Tile, x: NDArray[_F], reps: _PlainCounts, /) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Tile, x: NDArray[_F], /, *, reps: _PlainCounts) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Tile, x: NDArray[_G], reps: _PlainCounts, /) -> LooseArrayStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Tile, x: NDArray[_G], /, *, reps: _PlainCounts) -> LooseArrayPullback[_G]: ...
# flip ... split: as in rrule's block
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Flip, x: NDArray[_F], /, *, axis: _PlainCounts) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Flip, x: NDArray[_G], /, *, axis: _PlainCounts) -> LooseArrayPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes | _PlainCounts, /, *, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Roll, x: NDArray[_F], shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None, /
) -> ArrayStaticStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Roll, x: NDArray[_F], /, *, shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes | _PlainCounts, /, *, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Roll, x: NDArray[_G], shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None, /
) -> LooseArrayStaticStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Roll, x: NDArray[_G], /, *, shift: _AxisOrAxes | _PlainCounts, axis: _AxisOrAxes | _PlainCounts | None = ...
) -> LooseArrayPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: PermuteDims | Transpose, x: NDArray[_F], axes: tuple[int, ...], /) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: PermuteDims | Transpose, x: NDArray[_F], /, *, axes: tuple[int, ...]) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: PermuteDims | Transpose, x: NDArray[_G], axes: tuple[int, ...], /) -> LooseArrayStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: PermuteDims | Transpose, x: NDArray[_G], /, *, axes: tuple[int, ...]) -> LooseArrayPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Flip | Reshape | BroadcastTo, x: NDArray[_F], shape: _PlainCounts, /) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Reshape | BroadcastTo, x: NDArray[_F], /, *, shape: _PlainCounts) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Flip | Reshape | BroadcastTo, x: NDArray[_G], shape: _PlainCounts, /
) -> LooseArrayStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Reshape | BroadcastTo, x: NDArray[_G], /, *, shape: _PlainCounts) -> LooseArrayPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Sum | Mean, x: NDArray[_F], /, *, axis: _Axes | _PlainCounts = ..., keepdims: _Flag | bool = ...
) -> ArrayPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Sum | Mean, x: NDArray[_F], axis: _Axes | _PlainCounts, /, *, keepdims: _Flag | bool = ...
) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Sum | Mean, x: NDArray[_F], axis: _Axes | _PlainCounts, keepdims: _Flag | bool, /
) -> ArrayStaticStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Sum | Mean, x: _Integral, /, *, axis: _Axes | _PlainCounts = ..., keepdims: _Flag | bool = ...
) -> _NoTangents1: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Sum | Mean, x: _Integral, axis: _Axes | _PlainCounts, /, *, keepdims: _Flag | bool = ...
) -> _NoTangents2: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(op: Sum | Mean, x: _Integral, axis: _Axes | _PlainCounts, keepdims: _Flag | bool, /) -> _NoTangents3: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Pad, x: NDArray[_F], pad_width: _PlainCounts, /, *, constant_values: _PadConstant = ...
) -> ArrayStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Pad, x: NDArray[_F], pad_width: _PlainCounts, constant_values: _PadConstant, /
) -> PadConstantPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Pad, x: NDArray[_G], pad_width: _PlainCounts, /, *, constant_values: _PadConstant = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Pad, x: NDArray[_G], pad_width: _PlainCounts, constant_values: _PadConstant, /
) -> LoosePadConstantPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Split, x: NDArray[_F], indices_or_sections: _AnyCounts, /, *, axis: _Axis | int = ...
) -> SplitStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Split, x: NDArray[_F], indices_or_sections: _AnyCounts, axis: _Axis | int, /
) -> SplitStaticStaticPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Split, x: NDArray[_F], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> SplitPullback[_F]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Split, x: NDArray[_G], indices_or_sections: _AnyCounts, /, *, axis: _Axis | int = ...
) -> LooseSplitStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Split, x: NDArray[_G], indices_or_sections: _AnyCounts, axis: _Axis | int, /
) -> LooseSplitStaticStaticPullback[_G]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def pullback(
    op: Split, x: NDArray[_G], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> LooseSplitPullback[_G]: ...

# --- TEMPORARY, hand-written: the indexing family (getindex, take, take_along_axis, index_add)
# --- until its ops are rows of the generated schema. Loose on purpose: one overload per op and
# --- call form; the ops' own __call__ overloads carry the exact result types.
@overload
def pullback(op: Getindex, x: NDArray[_G] | ArraySpec, index: _Index, /) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(
    op: Take, x: NDArray[_G], indices: _Indices, /, *, axis: _OptionalAxis | int = ..., unique: _IndexFlag = ..., sorted: _IndexFlag = ..., deterministic: _IndexFlag = ...
) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(
    op: Take, x: NDArray[_G], indices: _Indices, axis: _OptionalAxis | int, /, *, unique: _IndexFlag = ..., sorted: _IndexFlag = ..., deterministic: _IndexFlag = ...
) -> LooseArrayStaticStaticPullback[_G]: ...
@overload
def pullback(op: TakeAlongAxis, x: NDArray[_G], indices: _Indices, /, *, axis: _OptionalAxis | int) -> LooseArrayStaticPullback[_G]: ...
@overload
def pullback(op: TakeAlongAxis, x: NDArray[_G], indices: _Indices, axis: _OptionalAxis | int, /) -> LooseArrayStaticStaticPullback[_G]: ...
@overload
def pullback(op: IndexAdd, x: NDArray[_G], indices: _Indices, values: object, /, axis: _Axis | int = ...) -> RulePullback: ...
# --- end of the temporary indexing block

# --- a user-registered function: arguments checked against its own signature
@overload
def pullback(op: Function[_P, object], /, *args: _P.args, **kwargs: _P.kwargs) -> RulePullback: ...


def pullback(op: Callable[..., object], /, *args: object, **kwargs: object) -> RulePullback:
    """``back = pullback(op, *args, **kwargs)``: the pullback ``rrule(op, *args, **kwargs)``
    would return, without computing the primal.

    Where the pullback needs no primal values (every library op but ``kron``), array
    arguments may be ``ArraySpec(shape, dtype, device)``s. Typed like ``rrule``'s pullback.

    Decisions: a function with a pullback builder (``register_rrule(fn, rule,
    pullback=builder)``; the library's ops register theirs) gets ``builder(*args, **kwargs)``.
    Any other function falls back to running its rrule and dropping ``y`` (the forward is
    computed, so its arguments must be arrays: an ``ArraySpec`` there is a ``TypeError``).
    """
    if op in PULLBACKS:
        build = cast("Callable[..., RulePullback]", PULLBACKS.lookup(op))
        return build(*args, **kwargs)
    if op not in RRULES:
        raise TypeError(f"pullback: no rrule is registered for {describe_function(op)}")
    _refuse_specs(op, args, kwargs)
    _, back = cast("tuple[object, RulePullback]", RRULES.lookup(op)(*args, **kwargs))
    return back


def _refuse_specs(op: object, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """``TypeError`` for an ``ArraySpec`` argument where the pullback is the rrule's (it runs
    the forward, which needs the arrays)."""
    named = [(f"argument {index}", value) for index, value in enumerate(args)]
    named += [(f"argument {name!r}", value) for name, value in kwargs.items()]
    for name, value in named:
        items = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(item, ArraySpec) for item in items):
            raise TypeError(
                f"pullback: {name} of {describe_function(op)} is an ArraySpec, but it has no "
                f"pullback builder, so its pullback comes from its rrule, which needs the arrays; "
                f"pass arrays, or register a builder: register_rrule(fn, rule, pullback=builder)"
            )


# ======================================================================================
# frule
# ======================================================================================

# --- concatenate, stack, hstack, vstack: a dense tangent (NoTangent for an integer output)
@overload
def frule(
    op: Concatenate, tangents: tuple[object], arrays: Sequence[NDArray[_F]], /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Concatenate, tangents: tuple[object, object], arrays: Sequence[NDArray[_F]], axis: _OptionalAxis, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Concatenate, tangents: tuple[object], arrays: Sequence[NDArray[_G]], /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
def frule(
    op: Concatenate, tangents: tuple[object, object], arrays: Sequence[NDArray[_G]], axis: _OptionalAxis, /
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
def frule(
    op: Stack, tangents: tuple[object], arrays: Sequence[NDArray[_F]], /, *, axis: _Axis = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Stack, tangents: tuple[object, object], arrays: Sequence[NDArray[_F]], axis: _Axis, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Stack, tangents: tuple[object], arrays: Sequence[NDArray[_G]], /, *, axis: _Axis = ...
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
def frule(
    op: Stack, tangents: tuple[object, object], arrays: Sequence[NDArray[_G]], axis: _Axis, /
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
def frule(
    op: Hstack | Vstack, tangents: tuple[object], arrays: Sequence[NDArray[_F]], /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Hstack | Vstack, tangents: tuple[object], arrays: Sequence[NDArray[_G]], /
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...


# --- cat: a dense tangent; tangents has one entry per positional argument
@overload
def frule(
    op: Cat, tangents: tuple[object], a: NDArray[_F], /, *, dims: _Counts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Cat, tangents: tuple[object, object], a: NDArray[_F], b: NDArray[_F], /, *, dims: _Counts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Cat,
    tangents: tuple[object, object, object],
    a: NDArray[_F],
    b: NDArray[_F],
    c: NDArray[_F],
    /,
    *,
    dims: _Counts,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Cat,
    tangents: tuple[object, object, object, object],
    a: NDArray[_F],
    b: NDArray[_F],
    c: NDArray[_F],
    d: NDArray[_F],
    /,
    *,
    dims: _Counts,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Cat, tangents: tuple[object, ...], /, *arrays: NDArray[_F], dims: _Counts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Cat, tangents: tuple[object, ...], /, *arrays: NDArray[_G], dims: _Counts
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
def frule(
    op: Cat, tangents: tuple[object, ...], /, *arrays: _CatInput, dims: _Counts
) -> tuple[NDArray[np.generic], DenseOrNoTangent[np.generic]]: ...


# --- repeat, tile: the forward map of x's tangent; dense for a dense tangent, else also a
# Fill (for a Fill) or ZeroTangent (for ZeroTangent/NoTangent)
@overload
def frule(
    op: Repeat, tangents: tuple[_Dense, object], x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Repeat, tangents: tuple[_Dense, object, object], x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Repeat,
    tangents: tuple[_Dense],
    x: NDArray[_F],
    /,
    *,
    inner: _Counts | None = ...,
    outer: _Counts | None = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # with the plain-int form below; this one is tried first
    op: Repeat, tangents: tuple[object, object], x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: Repeat, tangents: tuple[object, object, object], x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Repeat,
    tangents: tuple[object],
    x: NDArray[_F],
    /,
    *,
    inner: _Counts | None = ...,
    outer: _Counts | None = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Repeat, tangents: tuple[object, object], x: NDArray[_G], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Repeat, tangents: tuple[object, object, object], x: NDArray[_G], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Repeat,
    tangents: tuple[object],
    x: NDArray[_G],
    /,
    *,
    inner: _Counts | None = ...,
    outer: _Counts | None = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Tile, tangents: tuple[_Dense, object], x: NDArray[_F], reps: _Counts, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Tile, tangents: tuple[_Dense], x: NDArray[_F], /, *, reps: _Counts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Tile, tangents: tuple[object, object], x: NDArray[_F], reps: _Counts, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Tile, tangents: tuple[object], x: NDArray[_F], /, *, reps: _Counts
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Tile, tangents: tuple[object, object], x: NDArray[_G], reps: _Counts, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Tile, tangents: tuple[object], x: NDArray[_G], /, *, reps: _Counts
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...


# --- kron: dense when either tangent is an array, else also ZeroTangent (both terms dropped)
@overload
def frule(
    op: Kron, tangents: tuple[_Dense, object] | tuple[object, _Dense], a: NDArray[_F], b: NDArray[_F], /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Kron, tangents: tuple[object, object], a: NDArray[_F], b: NDArray[_F], /
) -> tuple[NDArray[_F], NDArray[_F] | ZeroTangent]: ...
@overload
def frule(
    op: Kron, tangents: tuple[object, object], a: NDArray[_G], b: NDArray[_G], /
) -> tuple[NDArray[_G], NDArray[_G] | ZeroTangent | NoTangent]: ...
@overload
def frule(
    op: Kron, tangents: tuple[object, object], a: _KronOperand, b: _KronOperand, /
) -> tuple[NDArray[np.generic], NDArray[np.generic] | ZeroTangent | NoTangent]: ...


# --- flip, roll, permute_dims, transpose: the same map of x's tangent; dense for a
# dense tangent, else also a Fill (for a Fill) or ZeroTangent (for ZeroTangent/NoTangent)
@overload
def frule(
    op: Flip, tangents: tuple[_Dense], x: NDArray[_F], /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Flip, tangents: tuple[_Dense, object], x: NDArray[_F], axis: _AxisOrAxes | None, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Flip, tangents: tuple[object], x: NDArray[_F], /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Flip, tangents: tuple[object, object], x: NDArray[_F], axis: _AxisOrAxes | None, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Flip, tangents: tuple[object], x: NDArray[_G], /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Flip, tangents: tuple[object, object], x: NDArray[_G], axis: _AxisOrAxes | None, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Roll, tangents: tuple[_Dense, object], x: NDArray[_F], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Roll,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    shift: _AxisOrAxes,
    axis: _AxisOrAxes | None,
    /,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Roll, tangents: tuple[_Dense], x: NDArray[_F], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # with the plain-int form below; this one is tried first
    op: Roll, tangents: tuple[object, object], x: NDArray[_F], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: Roll,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    shift: _AxisOrAxes,
    axis: _AxisOrAxes | None,
    /,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: Roll, tangents: tuple[object], x: NDArray[_F], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Roll, tangents: tuple[object, object], x: NDArray[_G], shift: _AxisOrAxes, /, *, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Roll,
    tangents: tuple[object, object, object],
    x: NDArray[_G],
    shift: _AxisOrAxes,
    axis: _AxisOrAxes | None,
    /,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Roll, tangents: tuple[object], x: NDArray[_G], /, *, shift: _AxisOrAxes, axis: _AxisOrAxes | None = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: PermuteDims | Transpose, tangents: tuple[_Dense, object], x: NDArray[_F], axes: _Permutation, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: PermuteDims, tangents: tuple[_Dense], x: NDArray[_F], /, *, axes: _Permutation
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Transpose, tangents: tuple[_Dense], x: NDArray[_F], /, *, axes: _Permutation | None = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: PermuteDims | Transpose, tangents: tuple[object, object], x: NDArray[_F], axes: _Permutation, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: PermuteDims, tangents: tuple[object], x: NDArray[_F], /, *, axes: _Permutation
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Transpose, tangents: tuple[object], x: NDArray[_F], /, *, axes: _Permutation | None = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: PermuteDims | Transpose, tangents: tuple[object, object], x: NDArray[_G], axes: _Permutation, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: PermuteDims, tangents: tuple[object], x: NDArray[_G], /, *, axes: _Permutation
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Transpose, tangents: tuple[object], x: NDArray[_G], /, *, axes: _Permutation | None = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
# --- reshape, broadcast_to, sum, mean, pad, split
# The forward map of x's tangent: dense for a dense tangent, else also a Fill or ZeroTangent;
# an integer input's is NoTangent; split's is a tuple of tangents (or ZeroTangent). tangents
# has one entry per positional argument.
@overload
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[_Dense, object], x: NDArray[_F], shape: _Shape, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[_Dense], x: NDArray[_F], /, *, shape: _Shape
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[object, object], x: NDArray[_F], shape: _Shape, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[object], x: NDArray[_F], /, *, shape: _Shape
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[object, object], x: NDArray[_G], shape: _Shape, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[object], x: NDArray[_G], /, *, shape: _Shape
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Sum | Mean, tangents: tuple[_Dense], x: NDArray[_F], /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Sum | Mean, tangents: tuple[_Dense, object], x: NDArray[_F], axis: _Axes, /, *, keepdims: _IndexFlag = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Sum | Mean, tangents: tuple[_Dense, object, object], x: NDArray[_F], axis: _Axes, keepdims: _Flag, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Sum | Mean, tangents: tuple[object], x: NDArray[_F], /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # with the plain-int form below; this one is tried first
    op: Sum | Mean, tangents: tuple[object, object], x: NDArray[_F], axis: _Axes, /, *, keepdims: _IndexFlag = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: Sum | Mean, tangents: tuple[object, object, object], x: NDArray[_F], axis: _Axes, keepdims: _Flag, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Sum, tangents: tuple[object], x: _Integral, /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...
) -> tuple[NDArray[np.integer], NoTangent]: ...
@overload
def frule(
    op: Sum, tangents: tuple[object, object], x: _Integral, axis: _Axes, /, *, keepdims: _IndexFlag = ...
) -> tuple[NDArray[np.integer], NoTangent]: ...
@overload
def frule(
    op: Sum, tangents: tuple[object, object, object], x: _Integral, axis: _Axes, keepdims: _Flag, /
) -> tuple[NDArray[np.integer], NoTangent]: ...
@overload
def frule(
    op: Mean, tangents: tuple[object], x: _Integral, /, *, axis: _Axes = ..., keepdims: _IndexFlag = ...
) -> tuple[NDArray[np.float64], NoTangent]: ...
@overload
def frule(
    op: Mean, tangents: tuple[object, object], x: _Integral, axis: _Axes, /, *, keepdims: _IndexFlag = ...
) -> tuple[NDArray[np.float64], NoTangent]: ...
@overload
def frule(
    op: Mean, tangents: tuple[object, object, object], x: _Integral, axis: _Axes, keepdims: _Flag, /
) -> tuple[NDArray[np.float64], NoTangent]: ...
@overload
def frule(
    op: Pad, tangents: tuple[_Dense, object], x: NDArray[_F], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Pad, tangents: tuple[_Dense, object, object], x: NDArray[_F], pad_width: _Counts, constant_values: _PadConstant, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: Pad, tangents: tuple[object, object], x: NDArray[_F], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Pad, tangents: tuple[object, object, object], x: NDArray[_F], pad_width: _Counts, constant_values: _PadConstant, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: Pad, tangents: tuple[object, object], x: NDArray[_G], pad_width: _Counts, /, *, constant_values: _PadConstant = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Pad, tangents: tuple[object, object, object], x: NDArray[_G], pad_width: _Counts, constant_values: _PadConstant, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Split, tangents: tuple[_Dense, object], x: NDArray[_F], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> tuple[tuple[NDArray[_F], ...], tuple[NDArray[_F], ...]]: ...
@overload
def frule(
    op: Split, tangents: tuple[_Dense, object, object], x: NDArray[_F], indices_or_sections: _Counts, axis: _Axis, /
) -> tuple[tuple[NDArray[_F], ...], tuple[NDArray[_F], ...]]: ...
@overload
def frule(
    op: Split, tangents: tuple[_Dense], x: NDArray[_F], /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> tuple[tuple[NDArray[_F], ...], tuple[NDArray[_F], ...]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # with the plain-int form below; this one is tried first
    op: Split, tangents: tuple[object, object], x: NDArray[_F], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> tuple[tuple[NDArray[_F], ...], SplitTangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: Split, tangents: tuple[object, object, object], x: NDArray[_F], indices_or_sections: _Counts, axis: _Axis, /
) -> tuple[tuple[NDArray[_F], ...], SplitTangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: Split, tangents: tuple[object], x: NDArray[_F], /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> tuple[tuple[NDArray[_F], ...], SplitTangent[_F]]: ...
@overload
def frule(
    op: Split, tangents: tuple[object, object], x: NDArray[_G], indices_or_sections: _Counts, /, *, axis: _Axis = ...
) -> tuple[tuple[NDArray[_G], ...], SplitTangent[_G] | NoTangent]: ...
@overload
def frule(
    op: Split, tangents: tuple[object, object, object], x: NDArray[_G], indices_or_sections: _Counts, axis: _Axis, /
) -> tuple[tuple[NDArray[_G], ...], SplitTangent[_G] | NoTangent]: ...
@overload
def frule(
    op: Split, tangents: tuple[object], x: NDArray[_G], /, *, indices_or_sections: _Counts, axis: _Axis = ...
) -> tuple[tuple[NDArray[_G], ...], SplitTangent[_G] | NoTangent]: ...


# --- plain ints or tuples as static arguments (see the same block of rrule)
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Concatenate | Stack, tangents: tuple[object], arrays: Sequence[NDArray[_F]], /, *, axis: int
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Concatenate | Stack, tangents: tuple[object, object], arrays: Sequence[NDArray[_F]], axis: int, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Concatenate | Stack, tangents: tuple[object], arrays: Sequence[NDArray[_G]], /, *, axis: int
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Concatenate | Stack, tangents: tuple[object, object], arrays: Sequence[NDArray[_G]], axis: int, /
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Cat, tangents: tuple[object, ...], /, *arrays: NDArray[_F], dims: _PlainCounts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Cat, tangents: tuple[object, ...], /, *arrays: NDArray[_G], dims: _PlainCounts
) -> tuple[NDArray[_G], DenseOrNoTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Cat, tangents: tuple[object, ...], /, *arrays: _CatInput, dims: _PlainCounts
) -> tuple[NDArray[np.generic], DenseOrNoTangent[np.generic]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[_Dense, object],
    x: NDArray[_F],
    repeats: _Repeats | int,
    /,
    *,
    axis: _OptionalAxis | int = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    repeats: _Repeats | int,
    axis: _OptionalAxis | int,
    /,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[_Dense],
    x: NDArray[_F],
    /,
    *,
    inner: _AnyCounts | None = ...,
    outer: _AnyCounts | None = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[object, object],
    x: NDArray[_F],
    repeats: _Repeats | int,
    /,
    *,
    axis: _OptionalAxis | int = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    repeats: _Repeats | int,
    axis: _OptionalAxis | int,
    /,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[object],
    x: NDArray[_F],
    /,
    *,
    inner: _AnyCounts | None = ...,
    outer: _AnyCounts | None = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[object, object],
    x: NDArray[_G],
    repeats: _Repeats | int,
    /,
    *,
    axis: _OptionalAxis | int = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[object, object, object],
    x: NDArray[_G],
    repeats: _Repeats | int,
    axis: _OptionalAxis | int,
    /,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Repeat,
    tangents: tuple[object],
    x: NDArray[_G],
    /,
    *,
    inner: _AnyCounts | None = ...,
    outer: _AnyCounts | None = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Tile, tangents: tuple[_Dense, object], x: NDArray[_F], reps: _PlainCounts, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Tile, tangents: tuple[_Dense], x: NDArray[_F], /, *, reps: _PlainCounts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Tile, tangents: tuple[object, object], x: NDArray[_F], reps: _PlainCounts, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Tile, tangents: tuple[object], x: NDArray[_F], /, *, reps: _PlainCounts
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Tile, tangents: tuple[object, object], x: NDArray[_G], reps: _PlainCounts, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Tile, tangents: tuple[object], x: NDArray[_G], /, *, reps: _PlainCounts
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...

# flip ... split: as in rrule's block
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Flip, tangents: tuple[_Dense], x: NDArray[_F], /, *, axis: _PlainCounts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Flip, tangents: tuple[object], x: NDArray[_F], /, *, axis: _PlainCounts
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Flip, tangents: tuple[object], x: NDArray[_G], /, *, axis: _PlainCounts
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[_Dense, object],
    x: NDArray[_F],
    shift: _AxisOrAxes | _PlainCounts,
    /,
    *,
    axis: _AxisOrAxes | _PlainCounts | None = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    shift: _AxisOrAxes | _PlainCounts,
    axis: _AxisOrAxes | _PlainCounts | None,
    /,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[_Dense],
    x: NDArray[_F],
    /,
    *,
    shift: _AxisOrAxes | _PlainCounts,
    axis: _AxisOrAxes | _PlainCounts | None = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[object, object],
    x: NDArray[_F],
    shift: _AxisOrAxes | _PlainCounts,
    /,
    *,
    axis: _AxisOrAxes | _PlainCounts | None = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    shift: _AxisOrAxes | _PlainCounts,
    axis: _AxisOrAxes | _PlainCounts | None,
    /,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[object],
    x: NDArray[_F],
    /,
    *,
    shift: _AxisOrAxes | _PlainCounts,
    axis: _AxisOrAxes | _PlainCounts | None = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[object, object],
    x: NDArray[_G],
    shift: _AxisOrAxes | _PlainCounts,
    /,
    *,
    axis: _AxisOrAxes | _PlainCounts | None = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[object, object, object],
    x: NDArray[_G],
    shift: _AxisOrAxes | _PlainCounts,
    axis: _AxisOrAxes | _PlainCounts | None,
    /,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Roll,
    tangents: tuple[object],
    x: NDArray[_G],
    /,
    *,
    shift: _AxisOrAxes | _PlainCounts,
    axis: _AxisOrAxes | _PlainCounts | None = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: PermuteDims | Transpose, tangents: tuple[_Dense, object], x: NDArray[_F], axes: tuple[int, ...], /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: PermuteDims | Transpose, tangents: tuple[_Dense], x: NDArray[_F], /, *, axes: tuple[int, ...]
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: PermuteDims | Transpose, tangents: tuple[object, object], x: NDArray[_F], axes: tuple[int, ...], /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: PermuteDims | Transpose, tangents: tuple[object], x: NDArray[_F], /, *, axes: tuple[int, ...]
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: PermuteDims | Transpose, tangents: tuple[object, object], x: NDArray[_G], axes: tuple[int, ...], /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: PermuteDims | Transpose, tangents: tuple[object], x: NDArray[_G], /, *, axes: tuple[int, ...]
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Flip | Reshape | BroadcastTo, tangents: tuple[_Dense, object], x: NDArray[_F], shape: _PlainCounts, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[_Dense], x: NDArray[_F], /, *, shape: _PlainCounts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Flip | Reshape | BroadcastTo, tangents: tuple[object, object], x: NDArray[_F], shape: _PlainCounts, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[object], x: NDArray[_F], /, *, shape: _PlainCounts
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Flip | Reshape | BroadcastTo, tangents: tuple[object, object], x: NDArray[_G], shape: _PlainCounts, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Reshape | BroadcastTo, tangents: tuple[object], x: NDArray[_G], /, *, shape: _PlainCounts
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum | Mean,
    tangents: tuple[_Dense],
    x: NDArray[_F],
    /,
    *,
    axis: _Axes | _PlainCounts = ...,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum | Mean,
    tangents: tuple[_Dense, object],
    x: NDArray[_F],
    axis: _Axes | _PlainCounts,
    /,
    *,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum | Mean,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    axis: _Axes | _PlainCounts,
    keepdims: _Flag | bool,
    /,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum | Mean,
    tangents: tuple[object],
    x: NDArray[_F],
    /,
    *,
    axis: _Axes | _PlainCounts = ...,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum | Mean,
    tangents: tuple[object, object],
    x: NDArray[_F],
    axis: _Axes | _PlainCounts,
    /,
    *,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum | Mean,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    axis: _Axes | _PlainCounts,
    keepdims: _Flag | bool,
    /,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum, tangents: tuple[object], x: _Integral, /, *, axis: _Axes | _PlainCounts = ..., keepdims: _Flag | bool = ...
) -> tuple[NDArray[np.integer], NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum,
    tangents: tuple[object, object],
    x: _Integral,
    axis: _Axes | _PlainCounts,
    /,
    *,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[np.integer], NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Sum,
    tangents: tuple[object, object, object],
    x: _Integral,
    axis: _Axes | _PlainCounts,
    keepdims: _Flag | bool,
    /,
) -> tuple[NDArray[np.integer], NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Mean,
    tangents: tuple[object],
    x: _Integral,
    /,
    *,
    axis: _Axes | _PlainCounts = ...,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[np.float64], NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Mean,
    tangents: tuple[object, object],
    x: _Integral,
    axis: _Axes | _PlainCounts,
    /,
    *,
    keepdims: _Flag | bool = ...,
) -> tuple[NDArray[np.float64], NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Mean,
    tangents: tuple[object, object, object],
    x: _Integral,
    axis: _Axes | _PlainCounts,
    keepdims: _Flag | bool,
    /,
) -> tuple[NDArray[np.float64], NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Pad,
    tangents: tuple[_Dense, object],
    x: NDArray[_F],
    pad_width: _PlainCounts,
    /,
    *,
    constant_values: _PadConstant = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Pad,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    pad_width: _PlainCounts,
    constant_values: _PadConstant,
    /,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Pad,
    tangents: tuple[object, object],
    x: NDArray[_F],
    pad_width: _PlainCounts,
    /,
    *,
    constant_values: _PadConstant = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Pad,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    pad_width: _PlainCounts,
    constant_values: _PadConstant,
    /,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Pad,
    tangents: tuple[object, object],
    x: NDArray[_G],
    pad_width: _PlainCounts,
    /,
    *,
    constant_values: _PadConstant = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Pad,
    tangents: tuple[object, object, object],
    x: NDArray[_G],
    pad_width: _PlainCounts,
    constant_values: _PadConstant,
    /,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split,
    tangents: tuple[_Dense, object],
    x: NDArray[_F],
    indices_or_sections: _AnyCounts,
    /,
    *,
    axis: _Axis | int = ...,
) -> tuple[tuple[NDArray[_F], ...], tuple[NDArray[_F], ...]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    indices_or_sections: _AnyCounts,
    axis: _Axis | int,
    /,
) -> tuple[tuple[NDArray[_F], ...], tuple[NDArray[_F], ...]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split, tangents: tuple[_Dense], x: NDArray[_F], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_F], ...], tuple[NDArray[_F], ...]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split,
    tangents: tuple[object, object],
    x: NDArray[_F],
    indices_or_sections: _AnyCounts,
    /,
    *,
    axis: _Axis | int = ...,
) -> tuple[tuple[NDArray[_F], ...], SplitTangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    indices_or_sections: _AnyCounts,
    axis: _Axis | int,
    /,
) -> tuple[tuple[NDArray[_F], ...], SplitTangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split, tangents: tuple[object], x: NDArray[_F], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_F], ...], SplitTangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split,
    tangents: tuple[object, object],
    x: NDArray[_G],
    indices_or_sections: _AnyCounts,
    /,
    *,
    axis: _Axis | int = ...,
) -> tuple[tuple[NDArray[_G], ...], SplitTangent[_G] | NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split,
    tangents: tuple[object, object, object],
    x: NDArray[_G],
    indices_or_sections: _AnyCounts,
    axis: _Axis | int,
    /,
) -> tuple[tuple[NDArray[_G], ...], SplitTangent[_G] | NoTangent]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: Split, tangents: tuple[object], x: NDArray[_G], /, *, indices_or_sections: _AnyCounts, axis: _Axis | int = ...
) -> tuple[tuple[NDArray[_G], ...], SplitTangent[_G] | NoTangent]: ...

# --- TEMPORARY, hand-written: the indexing family (getindex, take, take_along_axis, index_add)
# --- until its ops are rows of the generated schema. Loose on purpose: one overload per op and
# --- call form; the ops' own __call__ overloads carry the exact result types.
@overload
def frule(op: Getindex, tangents: tuple[object, ...], x: NDArray[_G], index: _Index, /) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: Take, tangents: tuple[object, ...], x: NDArray[_G], indices: _Indices, /, axis: _OptionalAxis | int = ..., *,
    unique: _IndexFlag = ..., sorted: _IndexFlag = ..., deterministic: _IndexFlag = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: TakeAlongAxis, tangents: tuple[object, ...], x: NDArray[_G], indices: _Indices, /, axis: _OptionalAxis | int
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: IndexAdd, tangents: tuple[object, ...], x: NDArray[_G], indices: _Indices, values: object, /, axis: _Axis | int = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
# --- end of the temporary indexing block

# --- a user-registered function
@overload
def frule(
    op: Function[_P, _R], tangents: tuple[object, ...], /, *args: _P.args, **kwargs: _P.kwargs
) -> tuple[_R, object]: ...


def frule(
    op: Callable[..., object], tangents: tuple[object, ...], /, *args: object, **kwargs: object
) -> tuple[object, object]:
    """``y, dy = frule(op, tangents, *args, **kwargs)``: the primal and its pushforward.

    ``tangents`` has one entry per positional argument, in the same structure (``NoTangent()``
    for non-differentiable ones, ``ZeroTangent()`` allowed anywhere).
    """
    rule = FRULES.lookup(op)
    return cast("tuple[object, object]", rule(tangents, *args, **kwargs))


# ======================================================================================
# precompile, explain
# ======================================================================================


def precompile(op: Op, *args: object, **kwargs: object) -> tuple[ShapeSignature, ...]:
    """Compile (or load from disk) every kernel of this call's signature without running it.

    Arguments may be arrays or ``ArraySpec(shape, dtype, device)``. Returns the signatures.
    """
    requests = _requests(op, args, kwargs)
    for request in requests:
        request.get()
    return tuple(request.signature for request in requests)


def explain(op: Op, *args: object, **kwargs: object) -> str:
    """The generated source of every kernel this call's signature uses, as one string.

    It returns the text and prints nothing (``print(sr.explain(...))`` to read it), so tools
    and tests can search it; nothing is compiled. Arguments may be arrays or ``ArraySpec``s.
    """
    from ._cache import CACHE

    parts = []
    for request in _requests(op, args, kwargs):
        source = CACHE.source(request.signature, request.render)
        parts.append(f"# --- {request.signature.op} {request.signature.kind} ---\n{source}")
    return "\n".join(parts)


def _requests(op: object, args: tuple[object, ...], kwargs: dict[str, object]) -> list[KernelRequest]:
    if not isinstance(op, Op):
        raise TypeError(f"precompile/explain take one of stablerules' ops, got {op!r}")
    return op.kernel_requests(*args, **kwargs)
