"""``rrule`` / ``frule`` dispatch, rule registration, ``precompile`` and ``explain``.

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

from ._cache import ShapeSignature
from ._registry import FRULES, RRULES, KernelRequest, Op
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
    LoosePairPullback,
    LooseSequencePullback,
    LooseSequenceStaticPullback,
    LooseTangent,
    LooseVariadicPullback,
    PairPullback,
    QuadruplePullback,
    RulePullback,
    SequencePullback,
    SequenceStaticPullback,
    Tangent,
    TriplePullback,
    VariadicPullback,
    deprecated,
)
from ._val import Val

if TYPE_CHECKING:
    from .rules.concatenate import Cat, Concatenate, Hstack, Stack, Vstack
    from .rules.kron import _Kron
    from .rules.repeat import _Repeat, _Tile

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


def register_rrule(fn: object, rule: Callable[..., tuple[object, RulePullback]], *, replace: bool = False) -> None:
    """Register ``rule(*args, **kwargs) -> (y, pullback)`` as ``fn``'s reverse rule.

    ``pullback(dy)`` returns one tangent per positional argument. A second registration for
    the same ``fn`` is a ``ValueError`` unless ``replace=True``.
    """
    RRULES.register(fn, rule, replace=replace)


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
    op: _Repeat, x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(
    op: _Repeat, x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
def rrule(
    op: _Repeat, x: NDArray[_F], /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(
    op: _Repeat, x: NDArray[_G], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(
    op: _Repeat, x: NDArray[_G], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
def rrule(
    op: _Repeat, x: NDArray[_G], /, *, inner: _Counts | None = ..., outer: _Counts | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...


# --- tile: (dx, NoTangent()), or (dx,) with reps given by keyword
@overload
def rrule(op: _Tile, x: NDArray[_F], reps: _Counts, /) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
def rrule(op: _Tile, x: NDArray[_F], /, *, reps: _Counts) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
def rrule(op: _Tile, x: NDArray[_G], reps: _Counts, /) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
def rrule(op: _Tile, x: NDArray[_G], /, *, reps: _Counts) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...


# --- kron: (da, db); a Python scalar operand's tangent is a 0-d array (or NoTangent for an int)
@overload
def rrule(op: _Kron, a: NDArray[_F], b: NDArray[_F], /) -> tuple[NDArray[_F], PairPullback[_F]]: ...
@overload
def rrule(op: _Kron, a: NDArray[_G], b: NDArray[_G], /) -> tuple[NDArray[_G], LoosePairPullback[_G]]: ...
@overload
def rrule(
    op: _Kron, a: _KronOperand, b: _KronOperand, /
) -> tuple[NDArray[np.generic], LoosePairPullback[np.generic]]: ...


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
    op: _Repeat, x: NDArray[_F], repeats: _Repeats | int, /, *, axis: _OptionalAxis | int = ...
) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: _Repeat, x: NDArray[_F], repeats: _Repeats | int, axis: _OptionalAxis | int, /
) -> tuple[NDArray[_F], ArrayStaticStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: _Repeat, x: NDArray[_F], /, *, inner: _AnyCounts | None = ..., outer: _AnyCounts | None = ...
) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: _Repeat, x: NDArray[_G], repeats: _Repeats | int, /, *, axis: _OptionalAxis | int = ...
) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: _Repeat, x: NDArray[_G], repeats: _Repeats | int, axis: _OptionalAxis | int, /
) -> tuple[NDArray[_G], LooseArrayStaticStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(
    op: _Repeat, x: NDArray[_G], /, *, inner: _AnyCounts | None = ..., outer: _AnyCounts | None = ...
) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: _Tile, x: NDArray[_F], reps: _PlainCounts, /) -> tuple[NDArray[_F], ArrayStaticPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: _Tile, x: NDArray[_F], /, *, reps: _PlainCounts) -> tuple[NDArray[_F], ArrayPullback[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: _Tile, x: NDArray[_G], reps: _PlainCounts, /) -> tuple[NDArray[_G], LooseArrayStaticPullback[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def rrule(op: _Tile, x: NDArray[_G], /, *, reps: _PlainCounts) -> tuple[NDArray[_G], LooseArrayPullback[_G]]: ...


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
    op: _Repeat, tangents: tuple[_Dense, object], x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: _Repeat, tangents: tuple[_Dense, object, object], x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: _Repeat,
    tangents: tuple[_Dense],
    x: NDArray[_F],
    /,
    *,
    inner: _Counts | None = ...,
    outer: _Counts | None = ...,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # with the plain-int form below; this one is tried first
    op: _Repeat, tangents: tuple[object, object], x: NDArray[_F], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(  # type: ignore[overload-overlap]  # as above
    op: _Repeat, tangents: tuple[object, object, object], x: NDArray[_F], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: _Repeat,
    tangents: tuple[object],
    x: NDArray[_F],
    /,
    *,
    inner: _Counts | None = ...,
    outer: _Counts | None = ...,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: _Repeat, tangents: tuple[object, object], x: NDArray[_G], repeats: _Repeats, /, *, axis: _OptionalAxis = ...
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: _Repeat, tangents: tuple[object, object, object], x: NDArray[_G], repeats: _Repeats, axis: _OptionalAxis, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: _Repeat,
    tangents: tuple[object],
    x: NDArray[_G],
    /,
    *,
    inner: _Counts | None = ...,
    outer: _Counts | None = ...,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: _Tile, tangents: tuple[_Dense, object], x: NDArray[_F], reps: _Counts, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: _Tile, tangents: tuple[_Dense], x: NDArray[_F], /, *, reps: _Counts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: _Tile, tangents: tuple[object, object], x: NDArray[_F], reps: _Counts, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: _Tile, tangents: tuple[object], x: NDArray[_F], /, *, reps: _Counts
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
def frule(
    op: _Tile, tangents: tuple[object, object], x: NDArray[_G], reps: _Counts, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
def frule(
    op: _Tile, tangents: tuple[object], x: NDArray[_G], /, *, reps: _Counts
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...


# --- kron: dense when either tangent is an array, else also ZeroTangent (both terms dropped)
@overload
def frule(
    op: _Kron, tangents: tuple[_Dense, object] | tuple[object, _Dense], a: NDArray[_F], b: NDArray[_F], /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
def frule(
    op: _Kron, tangents: tuple[object, object], a: NDArray[_F], b: NDArray[_F], /
) -> tuple[NDArray[_F], NDArray[_F] | ZeroTangent]: ...
@overload
def frule(
    op: _Kron, tangents: tuple[object, object], a: NDArray[_G], b: NDArray[_G], /
) -> tuple[NDArray[_G], NDArray[_G] | ZeroTangent | NoTangent]: ...
@overload
def frule(
    op: _Kron, tangents: tuple[object, object], a: _KronOperand, b: _KronOperand, /
) -> tuple[NDArray[np.generic], NDArray[np.generic] | ZeroTangent | NoTangent]: ...


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
    op: _Repeat,
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
    op: _Repeat,
    tangents: tuple[_Dense, object, object],
    x: NDArray[_F],
    repeats: _Repeats | int,
    axis: _OptionalAxis | int,
    /,
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Repeat,
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
    op: _Repeat,
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
    op: _Repeat,
    tangents: tuple[object, object, object],
    x: NDArray[_F],
    repeats: _Repeats | int,
    axis: _OptionalAxis | int,
    /,
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Repeat,
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
    op: _Repeat,
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
    op: _Repeat,
    tangents: tuple[object, object, object],
    x: NDArray[_G],
    repeats: _Repeats | int,
    axis: _OptionalAxis | int,
    /,
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Repeat,
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
    op: _Tile, tangents: tuple[_Dense, object], x: NDArray[_F], reps: _PlainCounts, /
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Tile, tangents: tuple[_Dense], x: NDArray[_F], /, *, reps: _PlainCounts
) -> tuple[NDArray[_F], NDArray[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Tile, tangents: tuple[object, object], x: NDArray[_F], reps: _PlainCounts, /
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Tile, tangents: tuple[object], x: NDArray[_F], /, *, reps: _PlainCounts
) -> tuple[NDArray[_F], Tangent[_F]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Tile, tangents: tuple[object, object], x: NDArray[_G], reps: _PlainCounts, /
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...
@overload
@deprecated("static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)")
def frule(
    op: _Tile, tangents: tuple[object], x: NDArray[_G], /, *, reps: _PlainCounts
) -> tuple[NDArray[_G], LooseTangent[_G]]: ...


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
