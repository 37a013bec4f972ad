"""Public type aliases: the named pullback type and the tangent unions the rules return.

``y, back = sr.rrule(op, *args)`` is typed per op (the overloads are in the generated
``_signatures.pyi``, written from ``_schema.py`` by ``tools/generate.py``): ``y``
is exactly what ``op(*args)`` returns (``NDArray[DT]`` for inputs of one dtype ``DT``) and
``back`` is a :class:`Pullback` whose result is a tuple with one entry per positional argument
(fixed arity: unpacking it into the wrong number of names is a type error).

Decisions
---------
Exact where it is true, a union where it is not. A pullback's entry depends on the *cotangent*
it is given, not only on the primal: a dense ``dy`` gives dense tangents, but a ``Fill``
cotangent gives ``Fill`` tangents (repeat, tile, concatenate, kron) and a ``ZeroTangent``
gives ``ZeroTangent``s. So :class:`Pullback` is overloaded on ``dy``:

- ``back(dy)`` with ``dy`` an ``NDArray`` (the common case) returns the *dense* tuple, e.g.
  ``tuple[NDArray[np.float32], NDArray[np.float32]]`` for ``kron`` of two float32 arrays;
- ``back(dy)`` with anything else (``Fill``, ``ZeroTangent``, ``Thunk``, a value typed
  ``object``) returns the *lazy* tuple, each array entry widened to :data:`Tangent` (``NDArray
  | Fill | ZeroTangent``). That union is honest for every op, and exact types for lazy
  cotangents would need a third overload per op for little gain.

A ``Val`` argument, a counts array or list, and a keyword argument get exactly ``NoTangent``
(keywords get no entry at all). Passing an axis or count positionally adds a ``NoTangent``
entry, so ``rrule(sr.concatenate, arrays, Val(1))`` has two entries and
``rrule(sr.concatenate, arrays, axis=Val(1))`` one.

Dtypes. The exact overloads take arrays of one *inexact* dtype ``F`` (float32, float64,
complex64, complex128; anything below ``np.inexact``): their tangents are ``NDArray[F]``.
Arrays of other dtypes (integer, bool) or of mixed dtypes fall to a looser overload: the primal
is still ``NDArray[DT]`` with ``DT`` mypy's join of the input dtypes, and each entry is
``NDArray[DT] | NoTangent`` (dense cotangent) or :data:`LooseTangent` (any cotangent), because
an integer input gets ``NoTangent()`` and the types cannot tell which input is which. Mixed
floating inputs stay on the exact overload with the join as ``F`` (float32 with complex64 is
``inexact[_32Bit]``, float32 with float64 is ``inexact[Any]``): each tangent has its *own*
input's dtype, a subtype of the join, so the type is true but less precise than the value.
Python scalars (``cat``'s inputs, ``kron``'s operands) make the result's dtype a run-time fact
(NEP 50): those calls are typed ``NDArray[np.generic]``, with loose entries.

Plain ints. The ops accept a plain ``int`` (or tuple) wherever a ``Val`` goes, as a convenience
that ``no_fallback()`` reports as a dynamic argument (and that compiles once per *value*). The
ops, ``rrule``, ``frule`` and ``pullback`` all type-check such calls the same way, for every
op: ``sr.repeat(x, 3, axis=0)`` and ``sr.rrule(sr.repeat, x, 3, axis=0)`` both pass, with the
types of their ``Val`` forms (an ``axis`` may still be ``None``; repeat's per-element counts
are data: an integer array or a list of ints). The plain-int forms are separate overloads
marked ``@deprecated("... use Val ...")``: a user who turns on mypy's ``deprecated`` error code
(``enable_error_code = deprecated``; ``--strict`` leaves it off) gets one line saying to write
``Val(3)``, the static counterpart of ``no_fallback()``; nothing changes at run time.
``pullback``'s ``ArraySpec`` forms are typed for ``Val`` statics only (a plain int there works
at run time but is a type error, to keep the overload count down). Type errors: a ``Val`` of
the wrong kind (``Val((0, 1))`` as ``concatenate``'s axis, ``Val(1.5)``) and the wrong number
of positional arguments.

User-registered functions. ``rrule(fn, *args, **kwargs)`` for a function ``fn`` registered with
``sr.register_rrule`` is typed from ``fn``'s own signature (``ParamSpec``): the arguments are
checked against it and ``y`` has ``fn``'s return type; the pullback is :data:`RulePullback`
(``(object) -> tuple[object, ...]``), since a user rule's tangents are whatever it returns.
That last overload takes a :class:`Function` (a callable with a ``__name__``), which the ops
are not, so an op call that no op overload accepts is an error (e.g. ``frule(sr.kron, (da,),
a, b)``, one tangent for two arguments) rather than a loosely typed success. Code that handles
ops generically types them as ``Callable[..., R]``, which takes that last overload.

``frule``'s ``tangents`` is typed as a tuple of the call's positional arity (entries
``object``: an array, ``Fill``, ``ZeroTangent``, ``NoTangent`` or ``Thunk``); the output
tangent is what the op's rule returns: always a dense array for the concatenate family, a dense
array or ``ZeroTangent`` for ``kron``, a dense array, ``Fill`` or ``ZeroTangent`` for ``repeat``
and ``tile``, and exactly a dense array when the array arguments' tangents are typed as arrays.

Structure ops II. ``sum``/``mean`` of an integer or bool array are typed by their NumPy result
(``NDArray[np.integer]``, ``NDArray[np.float64]``) with ``NoTangent`` entries exactly. ``pad``'s
constant given positionally gets a :data:`ScalarTangent` entry (a 0-d floating array, or
``NoTangent`` for an integer constant: the types see the constant's type only as a union).
``split`` returns ``tuple[NDArray[DT], ...]``; its pullback is a :class:`TuplePullback`, dense
for a tuple of arrays and lazy otherwise (a tuple holding a ``ZeroTangent``, ``ZeroTangent()``
as a whole); its pushforward is :data:`SplitTangent`.

Nothing here, nor any public signature, mentions Numba's or CuPy's types, so a user's mypy
sees these same types without our ``stubs/`` (tests/test_typing.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeAlias, TypeVar, overload

import numpy as np
import numpy.typing as npt

from ._tangents import Fill, NoTangent, ZeroTangent

_DenseT = TypeVar("_DenseT", covariant=True)
_LazyT = TypeVar("_LazyT", covariant=True)
if TYPE_CHECKING:  # defaults for the checkers only: ``Pullback[D, L]`` is ``Pullback[D, L, L, L]``
    from typing_extensions import TypeVar as _TypeVarWithDefault

    _FillT = _TypeVarWithDefault("_FillT", covariant=True, default=_LazyT)
    _ZeroT = _TypeVarWithDefault("_ZeroT", covariant=True, default=_LazyT)
else:
    _FillT = TypeVar("_FillT", covariant=True)
    _ZeroT = TypeVar("_ZeroT", covariant=True)
_S = TypeVar("_S", bound=np.generic)
_P = ParamSpec("_P")
# A pullback's cotangent, as type variables (each overload's parameter is then the argument's
# own type once inferred): mypy's Any-ambiguity rule, which would otherwise widen ``back(dy)``
# to ``tuple[Any, ...]`` for a ``dy`` typed with a user's ``F = TypeVar(bound=np.inexact)``
# (whose bound holds an ``Any``), sees one parameter type and takes the first match.
_DenseDy = TypeVar("_DenseDy", bound="npt.NDArray[np.generic]")
_FillDy = TypeVar("_FillDy", bound="Fill")
_OtherDy = TypeVar("_OtherDy")
_DenseDys = TypeVar("_DenseDys", bound="tuple[npt.NDArray[np.generic], ...]")
_FillDys = TypeVar("_FillDys", bound="tuple[Fill, ...]")
_R_co = TypeVar("_R_co", covariant=True)
_T = TypeVar("_T")

if TYPE_CHECKING:
    from typing_extensions import deprecated as deprecated
else:

    def deprecated(message: str) -> Callable[[_T], _T]:
        """A marker for the type checker only (``typing_extensions.deprecated`` to mypy):
        the plain-int forms it marks stay accepted at run time, without a warning, so
        ``typing_extensions`` is not a run-time dependency."""
        def mark(function: _T) -> _T:
            function.__deprecated__ = message  # as typing_extensions marks it: help() skips these forms
            return function

        return mark


class Pullback(Protocol[_DenseT, _LazyT, _FillT, _ZeroT]):
    """The pullback ``back`` of ``y, back = sr.rrule(op, *args)``.

    ``back(dy)`` returns, one entry per positional argument: ``_DenseT`` for an array ``dy``
    (each array's tangent of its primal's exact type ``ndarray[S, dtype[F]]``; a ``Fill`` for
    a full reduction's 0-d cotangent), ``_FillT`` for a ``Fill`` (``Fill[S, F]`` where the
    op's pullback keeps ``Fill``s), ``_ZeroT`` for a ``ZeroTangent`` and ``_LazyT`` (the
    union of those) for anything else (a ``Thunk``, a value typed ``object``). ``_FillT`` and
    ``_ZeroT`` default to ``_LazyT``. Assignable to ``Callable[..., _DenseT]``, the form of a
    pullback in the rules' docstrings.
    """

    @overload
    def __call__(self, dy: _DenseDy, /) -> _DenseT: ...

    @overload
    def __call__(self, dy: _FillDy, /) -> _FillT: ...

    @overload
    def __call__(self, dy: ZeroTangent, /) -> _ZeroT: ...

    @overload
    def __call__(self, dy: _OtherDy, /) -> _LazyT: ...


class Function(Protocol[_P, _R_co]):
    """A function (anything with a ``__name__``), as ``rrule``'s last overload takes it.

    The ``__name__`` is what keeps the library's ops (instances, without one) out of that
    overload: a call of an op that none of its own overloads accepts is then a type error,
    not a loosely typed success. Functions, lambdas, methods and values typed ``Callable``
    all have one; a callable *object* without one (``functools.partial``) can be given as a
    value typed ``Callable[..., R]``.
    """

    __name__: str

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...


class TuplePullback(Protocol[_DenseT, _LazyT, _FillT, _ZeroT]):
    """The pullback of an op whose output is a tuple of arrays (``split``).

    ``back(dys)`` returns ``_DenseT`` (dense tangents) for a tuple of arrays, one per output,
    ``_FillT`` for a tuple of ``Fill``s, ``_ZeroT`` for ``ZeroTangent()`` as a whole, and
    ``_LazyT`` (entries widened to :data:`Tangent`) for anything else: a tuple mixing them or
    holding a ``Thunk``, a value typed ``object``.
    """

    @overload
    def __call__(self, dy: _DenseDys, /) -> _DenseT: ...

    @overload
    def __call__(self, dy: _FillDys, /) -> _FillT: ...

    @overload
    def __call__(self, dy: ZeroTangent, /) -> _ZeroT: ...

    @overload
    def __call__(self, dy: _OtherDy, /) -> _LazyT: ...


Tangent: TypeAlias = npt.NDArray[_S] | Fill | ZeroTangent
"""A floating array's tangent for any cotangent: dense, a lazy constant, or a hard zero."""

RulePullback: TypeAlias = Callable[[object], tuple[object, ...]]
"""The pullback of a user-registered rule: one entry per positional argument, of any type."""

CountsArray: TypeAlias = npt.NDArray[np.integer] | Sequence[int]
"""Per-element repeat counts: data (an integer array, or a list of ints), not static."""

ScalarTangent: TypeAlias = npt.NDArray[np.inexact] | ZeroTangent | NoTangent
"""The tangent of ``pad``'s constant given positionally: a 0-d array (float64 or complex128 for
a Python float/complex, its own dtype for a NumPy one), or ``NoTangent`` for an int."""


__all__ = [
    "CountsArray",
    "Function",
    "Pullback",
    "RulePullback",
    "ScalarTangent",
    "Tangent",
    "TuplePullback",
    "deprecated",
]
