"""Tangent types and their algebra, projection and cotangent preparation.

The algebra is ChainRulesCore's zeros and FillArrays' ``Fill``, in NumPy's terms:

- ``ZeroTangent()`` and ``NoTangent()`` are strong zeros: ``t + z`` is ``t`` itself, ``z * a`` is
  ``z`` (also for an ``a`` holding inf or NaN). They take part in NumPy's ufuncs through
  ``__array_ufunc__``, so ``ndarray + z``, ``np.add(x, z)`` and ``x += z`` follow the same rules,
  and they refuse ``np.asarray`` (``TypeError`` naming ``sr.materialize``) rather than become
  object arrays.
- A ``Fill`` computes on one element: every operation runs NumPy's own ufunc, cast or
  reduction on a 0-d array holding the value, so its dtype, value, warnings and errors are
  NumPy's for the same dense operation; shapes come from NumPy too, computed on a broadcast
  view of a dtype with no bytes. With an array operand a ``Fill`` enters NumPy's computation as
  a zero-strided view, never materialized.
- A ``Thunk`` is unthunked by every operation it enters.

Every pullback receives its cotangent through :func:`prepare_cotangent`, which validates the
shape before any kernel runs and turns the many accepted forms (dense array of any floating
dtype, ``Fill``, ``ZeroTangent``, ``Thunk``) into one of three cases the rules handle; it does
not use the algebra (it is on every pullback's hot path, and the rules special-case a ``Fill``
for speed).
"""

from __future__ import annotations

import contextlib
import math
import operator
import _thread
from collections.abc import Callable, Iterator, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, SupportsIndex, TypeAlias, TypeVar, final, overload

import numpy as np
import numpy.typing as npt
from numpy.lib.array_utils import normalize_axis_tuple

from ._arrays import (
    ArrayLike,
    array_namespace,
    check_dtype,
    is_array,
    shape_text,
)

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)
_DT = TypeVar("_DT", bound=np.generic)
_S = TypeVar("_S", bound=np.generic)
_Z = TypeVar("_Z", bound="_Zero")
# Fill's type parameters: its shape's tuple type and its scalar type. Defaults (for a bare
# ``Fill``) are "any shape, any dtype" (``np.generic[object]``: an ``Any`` there would make
# every NumPy call on a bare ``Fill`` ambiguous to mypy); the defaults are the checkers' only.
if TYPE_CHECKING:
    from typing_extensions import TypeVar as _TypeVarWithDefault

    _FS = _TypeVarWithDefault("_FS", bound=tuple[int, ...], covariant=True, default=tuple[int, ...])
    _FT = _TypeVarWithDefault("_FT", bound=np.generic, covariant=True, default=np.generic[object])
else:
    _FS = TypeVar("_FS", bound=tuple, covariant=True)
    _FT = TypeVar("_FT", bound=np.generic, covariant=True)
_NS = TypeVar("_NS", bound=tuple[int, ...])
_NT = TypeVar("_NT", bound=np.generic)
# A tangent's scalar type, which Fill's reductions keep (value-restricted, not bounded: mypy
# would solve a bound against a bare Fill's np.generic[object] and pick those overloads). The
# rank-exact overloads overlap the unknown-rank one by design (first match wins): mypy's
# overlap check is silenced on them, as on __getitem__'s.
_NI = TypeVar("_NI", np.float16, np.float32, np.float64, np.complex64, np.complex128)
_SameScalar: TypeAlias = "bool | int | float"
_Order: TypeAlias = 'Literal["C", "F", "A"]'
# What a zero may meet in `+`/`-` (and hand back as it is): arrays, scalars, Fills, and the
# tuples that are the tangents of sequence arguments.
_Addend = TypeVar("_Addend", bound="npt.NDArray[np.generic] | np.generic | complex | Fill | tuple[object, ...]")
_Factor: TypeAlias = "npt.NDArray[np.generic] | np.generic | complex | Fill | tuple[object, ...] | ZeroTangent | Thunk[object]"
_FillScalar: TypeAlias = "complex | np.number | np.bool_"
_Casting: TypeAlias = 'Literal["no", "equiv", "safe", "same_kind", "unsafe"]'
_BasicIndex: TypeAlias = "slice | EllipsisType | None"
_Axes: TypeAlias = "SupportsIndex | tuple[SupportsIndex, ...] | None"

_MATERIALIZE_HINT = "use sr.materialize(tangent, like) for a dense array of like's shape and dtype"
# Ufuncs under which a zero stays a zero: linear in the zero operand.
_ZERO_PRESERVING = frozenset({np.multiply, np.matmul, np.negative, np.positive, np.conjugate})
# A dtype of itemsize 0: a broadcast view of it has any shape and no bytes, so NumPy's own
# indexing, reshape and transpose compute a Fill's resulting shape (and raise NumPy's errors)
# without allocating anything, even for advanced indices.
_NO_BYTES = np.zeros((), dtype=np.dtype([]))


def _is_number(value: object) -> bool:
    return isinstance(value, (bool, int, float, complex, np.generic))


def _is_operand(value: object) -> bool:
    """What the tangent types' operators accept (anything else: ``NotImplemented``)."""
    return (
        isinstance(value, (_Zero, Fill, Thunk, np.ndarray, list, tuple))
        or _is_number(value)
        or (hasattr(value, "shape") and hasattr(value, "dtype"))
    )


# ======================================================================================
# Zeros
# ======================================================================================


class _Zero:
    """What ``ZeroTangent`` and ``NoTangent`` share: a strong zero of any shape and dtype.

    ``t + z`` and ``z + t`` are ``t`` itself, ``z - t`` is ``-t``; products, quotients
    ``z / a``, indexing, reshapes, transposes, conjugates, real and imaginary parts and
    reductions of a zero are the zero itself (strong: ``z * inf`` is ``z``). Between two zeros
    ``NoTangent`` wins. In NumPy ufuncs (``np.add(x, z)``, ``x += z``, ``ndarray + z``) the
    same rules hold; a ufunc that would not give a zero (``np.exp(z)``), ``a / z`` and
    ``np.asarray(z)`` raise ``TypeError``. Iterating a zero is a ``TypeError`` too.
    """

    __slots__ = ()
    __array_priority__ = 1000.0
    # Without this, Python would iterate through __getitem__, which returns the zero forever.
    __iter__ = None

    # Hidden from type checkers: NumPy's stubs would take a zero for an array and type `x * z`
    # as an array; with it hidden, `x * z` reaches __rmul__ and is typed as the zero it is.
    if not TYPE_CHECKING:

        def __array__(self, dtype=None, copy=None):
            raise TypeError(f"np.asarray({self!r}): a zero tangent has no shape or dtype; {_MATERIALIZE_HINT}")

        def __setitem__(self, index, value):
            raise TypeError(f"{self!r} has no elements to assign (item assignment); {_MATERIALIZE_HINT}, then assign into that")

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: object, **kwargs: object) -> object:
        return _tangent_ufunc(ufunc, method, inputs, kwargs)

    @overload
    def __add__(self, other: ZeroTangent, /) -> Self: ...
    @overload
    def __add__(self, other: NoTangent, /) -> NoTangent: ...
    @overload
    def __add__(self, other: Thunk[_T], /) -> _T: ...
    @overload
    def __add__(self, other: _Addend, /) -> _Addend: ...
    def __add__(self, other: object, /) -> object:
        return _binary(np.add, self, other)

    @overload
    def __radd__(self, other: Thunk[_T], /) -> _T: ...
    @overload
    def __radd__(self, other: _Addend, /) -> _Addend: ...
    def __radd__(self, other: object, /) -> object:
        return _binary(np.add, other, self)

    @overload
    def __sub__(self, other: ZeroTangent, /) -> Self: ...
    @overload
    def __sub__(self, other: NoTangent, /) -> NoTangent: ...
    @overload
    def __sub__(self, other: Thunk[_T], /) -> _T: ...
    @overload
    def __sub__(self, other: _Addend, /) -> _Addend: ...
    def __sub__(self, other: object, /) -> object:
        return _binary(np.subtract, self, other)

    @overload
    def __rsub__(self, other: Thunk[_T], /) -> _T: ...
    @overload
    def __rsub__(self, other: _Addend, /) -> _Addend: ...
    def __rsub__(self, other: object, /) -> object:
        return _binary(np.subtract, other, self)

    @overload
    def __mul__(self, other: NoTangent, /) -> NoTangent: ...
    @overload
    def __mul__(self, other: _Factor, /) -> Self: ...
    def __mul__(self, other: object, /) -> object:
        return _binary(np.multiply, self, other)

    def __rmul__(self, other: _Factor, /) -> Self:
        return _binary(np.multiply, other, self)  # type: ignore[return-value]

    @overload
    def __matmul__(self, other: NoTangent, /) -> NoTangent: ...
    @overload
    def __matmul__(self, other: _Factor, /) -> Self: ...
    def __matmul__(self, other: object, /) -> object:
        return _binary(np.matmul, self, other)

    def __rmatmul__(self, other: _Factor, /) -> Self:
        return _binary(np.matmul, other, self)  # type: ignore[return-value]

    def __truediv__(self, other: _Factor, /) -> Self:
        return _binary(np.true_divide, self, other)  # type: ignore[return-value]

    def __neg__(self) -> Self:
        return self

    def __pos__(self) -> Self:
        return self

    def __getitem__(self, index: object, /) -> Self:
        return self

    def reshape(self, *shape: object, **kwargs: object) -> Self:
        return self

    def transpose(self, *axes: object) -> Self:
        return self

    @property
    def T(self) -> Self:
        return self

    def conj(self) -> Self:
        return self

    def conjugate(self) -> Self:
        return self

    @property
    def real(self) -> Self:
        return self

    @property
    def imag(self) -> Self:
        return self

    def astype(self, dtype: object, *args: object, **kwargs: object) -> Self:
        return self

    def sum(self, *args: object, **kwargs: object) -> Self:
        return self

    def mean(self, *args: object, **kwargs: object) -> Self:
        return self

    def copy(self) -> Self:
        return self


@final
class NoTangent(_Zero):
    """The tangent of a non-differentiable argument (a ``Val``, an integer array).

    A zero in the tangent algebra (see ``ZeroTangent``); it absorbs ``ZeroTangent()``:
    ``NoTangent() + ZeroTangent()`` is ``NoTangent()``.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoTangent)

    def __hash__(self) -> int:
        return hash(NoTangent)

    def __repr__(self) -> str:
        return "NoTangent()"


@final
class ZeroTangent(_Zero):
    """A hard zero of any shape: rules skip the work it would feed.

    ``t + z`` is ``t``; ``z * a``, ``z / a``, ``z[idx]``, ``z.reshape(...)``, ``z.T``,
    ``z.conj()``, ``z.real``, ``z.sum(...)`` are ``z``; ``z - t`` is ``-t``; NumPy arrays on the
    left defer to it (``x + z``, ``np.add(x, z)``, ``x += z``). ``np.asarray(z)`` raises
    ``TypeError``: ``sr.materialize(z, like)`` gives dense zeros.

    Since ``z + t`` is ``t`` itself, an accumulator that starts as a zero becomes the first
    tangent added to it: accumulate with ``acc = acc + t``, or copy before ``acc += t``, so no
    tangent a rule still owns is written into.

    Typing: ``x + z`` is typed as ``x``'s type and ``x * z`` as ``ZeroTangent``; NumPy's own
    stubs reject ``np.add(x, z)`` and ``x += z`` (they work at run time).
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZeroTangent)

    def __hash__(self) -> int:
        return hash(ZeroTangent)

    def __repr__(self) -> str:
        return "ZeroTangent()"


def _zero_call(ufunc: np.ufunc, inputs: tuple[object, ...], out: tuple[object, ...] | None) -> object:
    """``ufunc(*inputs)`` where an input is a zero (thunks already unthunked)."""
    zeros = [value for value in inputs if isinstance(value, _Zero)]
    zero = next((value for value in zeros if isinstance(value, NoTangent)), zeros[0])
    others = [value for value in inputs if not isinstance(value, _Zero)]
    result: object
    if ufunc is np.add and len(inputs) == 2:
        result = others[0] if others else zero
    elif ufunc is np.subtract and len(inputs) == 2:
        left, right = inputs
        if isinstance(right, _Zero):
            result = zero if isinstance(left, _Zero) else left
        else:
            result = -right  # type: ignore[operator]
    elif ufunc in _ZERO_PRESERVING or (ufunc is np.true_divide and isinstance(inputs[0], _Zero)):
        if ufunc is np.true_divide and isinstance(inputs[1], _Zero):
            raise TypeError(f"{inputs[0]!r} / {inputs[1]!r}: division by a zero tangent")
        result = zero
    elif ufunc is np.true_divide:
        raise TypeError(f"division by {zero!r}: a zero tangent is not a divisor; {_MATERIALIZE_HINT}")
    else:
        raise TypeError(
            f"np.{ufunc.__name__} of {zero!r} is not a zero tangent; {_MATERIALIZE_HINT} first"
        )
    if out is None:
        return result
    if len(out) != 1:
        raise TypeError(f"np.{ufunc.__name__} with {zero!r}: expected one output, got {len(out)}")
    target = out[0]
    if isinstance(result, _Zero):
        target[...] = 0  # type: ignore[index]
    elif result is not target:
        target[...] = result  # type: ignore[index]
    return target


# ======================================================================================
# Fill
# ======================================================================================


@final
class Fill(Generic[_FS, _FT]):
    """A lazy constant array: ``shape`` entries all equal to ``value``, of ``dtype``.

    This is what the pullback of ``sum`` produces; ``np.asarray(fill)`` (or
    ``np.asarray(fill, dtype)``) is its dense equivalent ``np.full(shape, value, dtype)``.

    It computes like that dense array, in O(1): with scalars, zeros and other ``Fill``s (shapes
    broadcast) arithmetic and any elementwise NumPy ufunc (``np.exp(f)``) give a ``Fill``; basic
    and advanced indexing, ``reshape``, ``transpose``/``.T``, ``ravel`` give ``Fill``s of NumPy's
    resulting shape (indexing every axis with an int gives a NumPy scalar); ``sum`` and ``mean``
    over any axes give a ``Fill``, or a NumPy scalar for a full reduction; ``conj``, ``real``,
    ``imag``, ``astype`` give ``Fill``s. With an array operand the result is NumPy's dense result.

    Decisions: every result's dtype, value, warnings and errors are NumPy's, because each is
    computed by NumPy on a 0-d array holding ``value`` (so Python scalars are weak, NEP 50). A
    bool or integer ``Fill`` is allowed (a ufunc's result, e.g. ``np.isfinite(f)``): it is a
    value, not a tangent. ``sum`` is ``value * count`` rounded once in NumPy's reduction dtype,
    which may differ in the last bits from NumPy's pairwise sum of the dense array. ``==``
    compares two ``Fill``s structurally (value, shape, dtype) and returns a ``bool``
    (``np.equal(f, g)`` is the elementwise one). A ``Fill`` is immutable: ``copy()`` is itself.
    A real dtype keeps the real part of a complex ``value``.
    """

    __slots__ = ("value", "shape", "dtype")
    __array_priority__ = 1000.0
    value: complex
    shape: _FS
    dtype: np.dtype[np.generic]

    # Typing: ``Fill(v, shape, dtype)`` is ``Fill[S, T]`` with ``S`` the shape's tuple type
    # (``x.shape``'s, or ``tuple[int, int]`` for ``(3, 4)``) and ``T`` the scalar type; an int
    # shape is 1-D; a dtype given as a string or ``np.dtype`` of unknown scalar type gives
    # ``np.generic``. Arithmetic with Python numbers, zeros and ``Fill``s of the same type,
    # ``-f``, ``conj``, ``copy``, ``transpose``/``T`` keep ``S`` and ``T``; ``reshape`` to a
    # tuple takes that tuple's type; indexing keeps ``T`` (its rank is NumPy's, unknown here);
    # ``sum``/``mean`` of a floating or complex ``Fill`` keep ``T`` and drop one axis per int
    # ``axis`` (ranks 1 to 6; a full reduction is a ``T`` scalar, ``keepdims=True`` keeps ``S``),
    # and a full reduction of a bool or integer ``Fill`` has NumPy's dtype (int64, uint64;
    # float64 for ``mean``).
    @overload
    def __init__(self: Fill[_NS, np.float64], value: _FillScalar, shape: _NS) -> None: ...
    @overload
    def __init__(self: Fill[_NS, _NT], value: _FillScalar, shape: _NS, dtype: type[_NT] | np.dtype[_NT]) -> None: ...
    @overload
    def __init__(self: Fill[tuple[int], np.float64], value: _FillScalar, shape: SupportsIndex) -> None: ...
    @overload
    def __init__(
        self: Fill[tuple[int], _NT], value: _FillScalar, shape: SupportsIndex, dtype: type[_NT] | np.dtype[_NT]
    ) -> None: ...
    @overload
    def __init__(
        self: Fill[tuple[int, ...], np.generic],
        value: _FillScalar,
        shape: Sequence[SupportsIndex] | SupportsIndex,
        dtype: npt.DTypeLike = np.float64,
    ) -> None: ...
    def __init__(
        self, value: _FillScalar, shape: Sequence[SupportsIndex] | SupportsIndex, dtype: npt.DTypeLike = np.float64
    ) -> None:
        resolved = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        kind = "f" if resolved.type.__name__ == "bfloat16" else resolved.kind  # ml_dtypes' kind is 'V'
        if kind not in "biufc":
            raise TypeError(
                f"Fill: dtype must be a bool, integer, floating or complex dtype, got {resolved}"
            )
        extents = (shape,) if isinstance(shape, (int, np.integer)) else shape
        try:
            normalized = tuple(map(operator.index, extents))  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"Fill: shape must be an int or a sequence of ints, got {shape!r}") from None
        if normalized and min(normalized) < 0:
            raise ValueError(f"Fill: shape must be non-negative, got {normalized}")
        if kind != "c" and isinstance(value, (complex, np.complexfloating)):
            value = value.real  # casting complex to real would warn (ComplexWarning)
        # np.full's own cast, so Fill(v, shape, dtype) equals its dense equivalent exactly; the
        # scalar type's constructor is that cast for a Python number into a floating dtype, at
        # half the cost (rules build Fills on every lazy pullback).
        if kind in "fc" and type(value) in (float, int, complex):
            stored = resolved.type(value).item()  # type: ignore[arg-type]
        else:
            stored = np.full((), value, dtype=resolved).item()
        object.__setattr__(self, "value", stored)
        object.__setattr__(self, "shape", normalized)
        object.__setattr__(self, "dtype", resolved)

    @classmethod
    def _of(cls, result: object, shape: tuple[int, ...]) -> Fill[Any, Any]:
        """The ``Fill`` of ``shape`` holding a NumPy scalar or 0-d array ``result`` (already of
        its dtype: no second cast)."""
        array = np.asarray(result)
        fill = object.__new__(cls)
        object.__setattr__(fill, "value", array.item())
        object.__setattr__(fill, "shape", shape)
        object.__setattr__(fill, "dtype", array.dtype)
        if array.dtype.kind not in "biufc" and array.dtype.name != "bfloat16":
            raise TypeError(f"Fill: the result has dtype {array.dtype}, which a Fill cannot hold")
        return fill

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Fill is immutable")

    # Pickled as its constructor's arguments (the default would set the slots one by one,
    # which ``__setattr__`` refuses: pickling, ``copy.copy`` and ``copy.deepcopy`` of a
    # gradient that held a Fill raised "Fill is immutable"); the value, a Python scalar of the
    # dtype, converts back exactly. A copy is the Fill itself, as ``copy()`` is.
    def __reduce__(self) -> tuple[type[Fill[Any, Any]], tuple[object, tuple[int, ...], np.dtype[Any]]]:
        return (type(self), (self.value, self.shape, self.dtype))

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Self:
        return self

    def _probe(self) -> npt.NDArray[np.generic]:
        """The value as a 0-d array of ``dtype``: every computation runs NumPy on it."""
        return np.full((), self.value, dtype=self.dtype)

    def _layout(self) -> npt.NDArray[np.void]:
        """A broadcast view of ``shape`` with no bytes at all, for NumPy to compute shapes on."""
        return np.broadcast_to(_NO_BYTES, self.shape)

    def _dense_view(self, like: object = None) -> npt.NDArray[np.generic]:
        """The dense equivalent as a read-only zero-strided view (nothing of ``size``
        allocated), on ``like``'s device."""
        xp = array_namespace(like)
        view: npt.NDArray[np.generic] = xp.broadcast_to(xp.asarray(self._probe()), self.shape)
        return view

    # --- array facts -------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[Fill | np.generic]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[index] for index in range(self.shape[0]))

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[np.bool_ | np.number]:
        if copy is False:
            raise ValueError("np.asarray(fill, copy=False): a Fill has no memory to share; its dense equivalent is a new array")
        return np.full(self.shape, self.value, dtype=self.dtype if dtype is None else dtype)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: object, **kwargs: object) -> object:
        return _tangent_ufunc(ufunc, method, inputs, kwargs)

    # Hidden from type checkers, so that ``fill[i] = v`` stays a type error there; at run time
    # it says what to do instead.
    if not TYPE_CHECKING:

        def __setitem__(self, index, value):
            raise TypeError(f"a Fill is immutable (item assignment); {_MATERIALIZE_HINT}, then assign into that")

    # --- arithmetic: O(1) with scalars, zeros and Fills; NumPy's dense result with arrays --

    @overload
    def __add__(self, other: _Zero | Fill[_FS, _FT] | _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __add__(self, other: Fill | _FillScalar, /) -> Fill: ...
    @overload
    def __add__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __add__(self, other: object, /) -> object:
        return _binary(np.add, self, other)

    @overload
    def __radd__(self, other: _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __radd__(self, other: _FillScalar, /) -> Fill: ...
    @overload
    def __radd__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __radd__(self, other: object, /) -> object:
        return _binary(np.add, other, self)

    @overload
    def __sub__(self, other: _Zero | Fill[_FS, _FT] | _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __sub__(self, other: Fill | _FillScalar, /) -> Fill: ...
    @overload
    def __sub__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __sub__(self, other: object, /) -> object:
        return _binary(np.subtract, self, other)

    @overload
    def __rsub__(self, other: _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __rsub__(self, other: _FillScalar, /) -> Fill: ...
    @overload
    def __rsub__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __rsub__(self, other: object, /) -> object:
        return _binary(np.subtract, other, self)

    @overload
    def __mul__(self, other: _Z, /) -> _Z: ...
    @overload
    def __mul__(self, other: Fill[_FS, _FT] | _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __mul__(self, other: Fill | _FillScalar, /) -> Fill: ...
    @overload
    def __mul__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __mul__(self, other: object, /) -> object:
        return _binary(np.multiply, self, other)

    @overload
    def __rmul__(self, other: _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __rmul__(self, other: _FillScalar, /) -> Fill: ...
    @overload
    def __rmul__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __rmul__(self, other: object, /) -> object:
        return _binary(np.multiply, other, self)

    @overload
    def __truediv__(self, other: Fill[_FS, _FT] | _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __truediv__(self, other: Fill | _FillScalar, /) -> Fill: ...
    @overload
    def __truediv__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __truediv__(self, other: object, /) -> object:
        return _binary(np.true_divide, self, other)

    @overload
    def __rtruediv__(self, other: _SameScalar, /) -> Fill[_FS, _FT]: ...
    @overload
    def __rtruediv__(self, other: _FillScalar, /) -> Fill: ...
    @overload
    def __rtruediv__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __rtruediv__(self, other: object, /) -> object:
        return _binary(np.true_divide, other, self)

    @overload
    def __pow__(self, other: Fill | _FillScalar, /) -> Fill: ...
    @overload
    def __pow__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __pow__(self, other: object, /) -> object:
        return _power(self, other)

    @overload
    def __rpow__(self, other: _FillScalar, /) -> Fill: ...
    @overload
    def __rpow__(self, other: npt.NDArray[np.generic], /) -> npt.NDArray[np.generic]: ...
    def __rpow__(self, other: object, /) -> object:
        return _power(other, self)

    def __neg__(self) -> Fill[_FS, _FT]:
        return Fill._of(np.negative(self._probe()), self.shape)

    def __pos__(self) -> Fill[_FS, _FT]:
        return Fill._of(np.positive(self._probe()), self.shape)

    def __abs__(self) -> Fill[_FS]:
        return Fill._of(np.absolute(self._probe()), self.shape)

    def conj(self) -> Fill[_FS, _FT]:
        return Fill._of(self._probe().conj(), self.shape)

    def conjugate(self) -> Fill[_FS, _FT]:
        return Fill._of(self._probe().conjugate(), self.shape)

    @property
    def real(self) -> Fill[_FS]:
        return Fill._of(self._probe().real, self.shape)

    @property
    def imag(self) -> Fill[_FS]:
        return Fill._of(self._probe().imag, self.shape)

    def astype(self, dtype: npt.DTypeLike, order: str = "K", casting: _Casting = "unsafe", subok: bool = True, copy: bool = True) -> Fill[_FS]:
        """The values cast to ``dtype`` (NumPy's cast, warnings and casting checks)."""
        return Fill._of(self._probe().astype(dtype, casting=casting), self.shape)

    def copy(self) -> Fill[_FS, _FT]:
        return self

    # --- shapes: NumPy's own shape rules, computed on a view of no bytes ------------------

    @overload
    def __getitem__(self, index: tuple[()], /) -> Fill | np.generic: ...  # type: ignore[overload-overlap]
    @overload
    def __getitem__(self, index: _BasicIndex | tuple[_BasicIndex, ...], /) -> Fill[tuple[int, ...], _FT]: ...
    @overload
    def __getitem__(self, index: object, /) -> Fill | np.generic: ...
    def __getitem__(self, index: object, /) -> Fill | np.generic:
        selected: object = self._layout()[index]  # type: ignore[call-overload]
        if isinstance(selected, np.ndarray):
            return Fill._of(self._probe(), selected.shape)
        scalar: np.generic = self._probe().reshape(1)[0]
        return scalar

    @overload
    def reshape(self, shape: tuple[()], /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[()], _FT]: ...
    @overload
    def reshape(self, shape: tuple[SupportsIndex], /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int], _FT]: ...
    @overload
    def reshape(self, shape: tuple[SupportsIndex, SupportsIndex], /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int, int], _FT]: ...
    @overload
    def reshape(self, shape: tuple[SupportsIndex, SupportsIndex, SupportsIndex], /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int, int, int], _FT]: ...
    @overload
    def reshape(self, shape: tuple[SupportsIndex, SupportsIndex, SupportsIndex, SupportsIndex], /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int, int, int, int], _FT]: ...
    @overload
    def reshape(self, d0: SupportsIndex, /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int], _FT]: ...
    @overload
    def reshape(self, d0: SupportsIndex, d1: SupportsIndex, /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int, int], _FT]: ...
    @overload
    def reshape(self, d0: SupportsIndex, d1: SupportsIndex, d2: SupportsIndex, /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int, int, int], _FT]: ...
    @overload
    def reshape(self, d0: SupportsIndex, d1: SupportsIndex, d2: SupportsIndex, d3: SupportsIndex, /, *, order: _Order = "C", copy: bool | None = None) -> Fill[tuple[int, int, int, int], _FT]: ...
    @overload
    def reshape(
        self, *shape: SupportsIndex | Sequence[SupportsIndex], order: Literal["C", "F", "A"] = "C", copy: bool | None = None
    ) -> Fill[tuple[int, ...], _FT]: ...
    def reshape(
        self, *shape: SupportsIndex | Sequence[SupportsIndex], order: Literal["C", "F", "A"] = "C", copy: bool | None = None
    ) -> Fill[tuple[int, ...], _FT]:
        """A ``Fill`` of the new shape (one ``-1`` allowed; NumPy's errors). ``order`` and
        ``copy`` are accepted for NumPy's signature and change nothing for a constant."""
        new_shape = shape[0] if len(shape) == 1 else shape
        reshaped = self._layout().reshape(new_shape, order=order, copy=False)  # type: ignore[arg-type]
        return Fill._of(self._probe(), reshaped.shape)

    def ravel(self, order: Literal["C", "F", "A", "K"] = "C") -> Fill:
        return Fill._of(self._probe(), (self.size,))

    def transpose(self, *axes: SupportsIndex | Sequence[SupportsIndex] | None) -> Fill[_FS, _FT]:
        permutation = axes[0] if len(axes) == 1 else (axes or None)
        return Fill._of(self._probe(), self._layout().transpose(permutation).shape)  # type: ignore[arg-type]

    @property
    def T(self) -> Fill[_FS, _FT]:
        return Fill._of(self._probe(), self.shape[::-1])

    # --- reductions: O(1) --------------------------------------------------------------

    def _reduced_shape(self, axis: _Axes, keepdims: bool) -> tuple[int, tuple[int, ...]]:
        """(how many elements each result element reduces, the result's shape)."""
        axes = range(self.ndim) if axis is None else normalize_axis_tuple(axis, self.ndim)  # type: ignore[arg-type]
        count = math.prod(self.shape[index] for index in axes)
        if keepdims:
            return count, tuple(1 if index in axes else extent for index, extent in enumerate(self.shape))
        return count, tuple(extent for index, extent in enumerate(self.shape) if index not in axes)

    def _reduction_result(
        self, value: npt.NDArray[np.generic], shape: tuple[int, ...], keepdims: bool, out: npt.NDArray[_S] | None
    ) -> Fill | np.generic | npt.NDArray[_S]:
        if out is not None:
            out[...] = value
            return out
        if not shape and not keepdims:
            scalar: np.generic = value.reshape(1)[0]
            return scalar
        return Fill._of(value, shape)

    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, ...], _NI], axis: None = None, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> _NI: ...
    @overload
    def sum(
        self: Fill[tuple[int, ...], np.bool | np.int8 | np.int16 | np.int32 | np.int64], axis: None = None, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> np.int64: ...
    @overload
    def sum(
        self: Fill[tuple[int, ...], np.uint8 | np.uint16 | np.uint32 | np.uint64], axis: None = None, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> np.uint64: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> _NI: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> Fill[tuple[int], _NI]: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> Fill[tuple[int, int], _NI]: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> Fill[tuple[int, int, int], _NI]: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> Fill[tuple[int, int, int, int], _NI]: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int, int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> Fill[tuple[int, int, int, int, int], _NI]: ...
    @overload
    def sum(  # type: ignore[overload-overlap]
        self: Fill[_NS, _NI], axis: _Axes = None, dtype: None = None, out: None = None, *, keepdims: Literal[True], initial: _FillScalar = 0
    ) -> Fill[_NS, _NI]: ...
    @overload
    def sum(
        self: Fill[tuple[int, ...], _NI], axis: _Axes = None, dtype: None = None, out: None = None, keepdims: bool = False, initial: _FillScalar = 0
    ) -> Fill[tuple[int, ...], _NI] | _NI: ...
    @overload
    def sum(
        self, axis: None = None, dtype: npt.DTypeLike | None = None, out: None = None, keepdims: Literal[False] = False, initial: _FillScalar = 0
    ) -> np.generic: ...
    @overload
    def sum(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, out: None = None, *, keepdims: Literal[True], initial: _FillScalar = 0
    ) -> Fill: ...
    @overload
    def sum(
        self, axis: _Axes, dtype: npt.DTypeLike | None, out: npt.NDArray[_S], keepdims: bool = False, initial: _FillScalar = 0
    ) -> npt.NDArray[_S]: ...
    @overload
    def sum(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, *, out: npt.NDArray[_S], keepdims: bool = False, initial: _FillScalar = 0
    ) -> npt.NDArray[_S]: ...
    @overload
    def sum(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, out: None = None, keepdims: bool = False, initial: _FillScalar = 0
    ) -> Fill | np.generic: ...
    def sum(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, out: npt.NDArray[_S] | None = None, keepdims: bool = False, initial: _FillScalar = 0
    ) -> Fill | np.generic | npt.NDArray[_S]:
        """``np.sum`` of the dense equivalent in O(1): ``value * count`` (plus ``initial``) in
        NumPy's reduction dtype (int64 for bool and small integers); a NumPy scalar for a full
        reduction without ``keepdims``, else a ``Fill`` (or ``out``, filled)."""
        result_dtype = np.zeros(1, self.dtype).sum(dtype=dtype).dtype
        count, shape = self._reduced_shape(axis, keepdims)
        total = self._probe().astype(result_dtype) * count if count else np.zeros((), result_dtype)
        if initial:
            total = total + np.full((), initial, dtype=result_dtype)
        total = np.asarray(total, dtype=result_dtype)
        return self._reduction_result(total, shape, keepdims, out)

    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, ...], _NI], axis: None = None, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> _NI: ...
    @overload
    def mean(
        self: Fill[tuple[int, ...], np.bool | np.int8 | np.int16 | np.int32 | np.int64 | np.uint8 | np.uint16 | np.uint32 | np.uint64], axis: None = None, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> np.float64: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> _NI: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> Fill[tuple[int], _NI]: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> Fill[tuple[int, int], _NI]: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> Fill[tuple[int, int, int], _NI]: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> Fill[tuple[int, int, int, int], _NI]: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[tuple[int, int, int, int, int, int], _NI], axis: SupportsIndex, dtype: None = None, out: None = None, keepdims: Literal[False] = False
    ) -> Fill[tuple[int, int, int, int, int], _NI]: ...
    @overload
    def mean(  # type: ignore[overload-overlap]
        self: Fill[_NS, _NI], axis: _Axes = None, dtype: None = None, out: None = None, *, keepdims: Literal[True]
    ) -> Fill[_NS, _NI]: ...
    @overload
    def mean(
        self: Fill[tuple[int, ...], _NI], axis: _Axes = None, dtype: None = None, out: None = None, keepdims: bool = False
    ) -> Fill[tuple[int, ...], _NI] | _NI: ...
    @overload
    def mean(
        self, axis: None = None, dtype: npt.DTypeLike | None = None, out: None = None, keepdims: Literal[False] = False
    ) -> np.generic: ...
    @overload
    def mean(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, out: None = None, *, keepdims: Literal[True]
    ) -> Fill: ...
    @overload
    def mean(
        self, axis: _Axes, dtype: npt.DTypeLike | None, out: npt.NDArray[_S], keepdims: bool = False
    ) -> npt.NDArray[_S]: ...
    @overload
    def mean(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, *, out: npt.NDArray[_S], keepdims: bool = False
    ) -> npt.NDArray[_S]: ...
    @overload
    def mean(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, out: None = None, keepdims: bool = False
    ) -> Fill | np.generic: ...
    def mean(
        self, axis: _Axes = None, dtype: npt.DTypeLike | None = None, out: npt.NDArray[_S] | None = None, keepdims: bool = False
    ) -> Fill | np.generic | npt.NDArray[_S]:
        """``np.mean`` of the dense equivalent in O(1): ``value`` in NumPy's mean dtype
        (float64 for bool and integers); NaN with NumPy's warning for an empty reduction."""
        result_dtype = np.zeros(1, self.dtype).mean(dtype=dtype).dtype
        count, shape = self._reduced_shape(axis, keepdims)
        if count or not math.prod(shape):
            average = self._probe().astype(result_dtype)
        else:  # NumPy's NaN and "Mean of empty slice" warning
            average = np.asarray(np.mean(np.zeros(0, self.dtype), dtype=dtype))
        return self._reduction_result(average, shape, keepdims, out)

    # --- identity ----------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fill):
            return NotImplemented
        return (self.value, self.shape, self.dtype) == (other.value, other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((Fill, self.value, self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"Fill({self.value!r}, {self.shape}, {self.dtype})"


# ======================================================================================
# Thunk
# ======================================================================================


@final
class Thunk(Generic[_T_co]):
    """A lazy tangent: ``fn`` runs at most once, when a rule (or ``unthunk``) needs it.

    Arithmetic, indexing, ufuncs and ``np.asarray`` unthunk it first, so a rule written with
    plain arithmetic on its tangents takes a ``Thunk`` as it takes the value.
    """

    __slots__ = ("_fn", "_value", "_done", "_lock")
    __array_priority__ = 1000.0

    def __init__(self, fn: Callable[[], _T_co]) -> None:
        self._fn = fn
        self._value: _T_co | None = None
        self._done = False
        self._lock = _thread.allocate_lock()

    def unthunk(self) -> _T_co:
        if not self._done:
            with self._lock:
                if not self._done:
                    self._value = self._fn()
                    self._done = True
        return self._value  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Thunk({self._fn!r})"

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> npt.NDArray[np.generic]:
        dense: npt.NDArray[np.generic] = np.asarray(unthunk(self), dtype=dtype, copy=copy)
        return dense

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: object, **kwargs: object) -> object:
        return _tangent_ufunc(ufunc, method, inputs, kwargs)

    def __add__(self, other: object, /) -> object:
        return unthunk(self) + other  # type: ignore[operator]

    def __radd__(self, other: object, /) -> object:
        return other + unthunk(self)  # type: ignore[operator]

    def __sub__(self, other: object, /) -> object:
        return unthunk(self) - other  # type: ignore[operator]

    def __rsub__(self, other: object, /) -> object:
        return other - unthunk(self)  # type: ignore[operator]

    def __mul__(self, other: object, /) -> object:
        return unthunk(self) * other  # type: ignore[operator]

    def __rmul__(self, other: object, /) -> object:
        return other * unthunk(self)  # type: ignore[operator]

    def __truediv__(self, other: object, /) -> object:
        return unthunk(self) / other  # type: ignore[operator]

    def __rtruediv__(self, other: object, /) -> object:
        return other / unthunk(self)  # type: ignore[operator]

    def __matmul__(self, other: object, /) -> object:
        return unthunk(self) @ other  # type: ignore[operator]

    def __rmatmul__(self, other: object, /) -> object:
        return other @ unthunk(self)  # type: ignore[operator]

    def __neg__(self) -> object:
        return -unthunk(self)  # type: ignore[operator]

    def __getitem__(self, index: object, /) -> object:
        return unthunk(self)[index]  # type: ignore[index]

    # Hidden from type checkers, as Fill's: a Thunk is read, never written into.
    if not TYPE_CHECKING:

        def __setitem__(self, index, value):
            raise TypeError(
                f"a Thunk is a lazy tangent, not written into (item assignment); {_MATERIALIZE_HINT}, then assign into that"
            )


def unthunk(tangent: object) -> object:
    """Evaluate a ``Thunk`` (repeatedly, for nested thunks); return anything else as it is."""
    while isinstance(tangent, Thunk):
        tangent = tangent.unthunk()
    return tangent


# ======================================================================================
# Ufuncs and operators of the tangent types
# ======================================================================================


def _binary(ufunc: np.ufunc, left: object, right: object) -> object:
    """An operator's ``left op right`` (one side a tangent type), or ``NotImplemented`` for an
    operand type the tangent types do not know (the other side's reflected operator may)."""
    if not (_is_operand(left) and _is_operand(right)):
        return NotImplemented
    return _tangent_ufunc(ufunc, "__call__", (left, right), {})


def _power(base: object, exponent: object) -> object:
    """``base ** exponent`` with a ``Fill`` operand: ndarray's ``**``, not ``np.power``, since
    its fast paths (``x ** 2`` is ``np.square(x)``) have dtypes of their own for bool inputs."""
    if not (_is_operand(base) and _is_operand(exponent)):
        return NotImplemented
    base, exponent = unthunk(base), unthunk(exponent)
    if isinstance(base, _Zero) or isinstance(exponent, _Zero):
        return _tangent_ufunc(np.power, "__call__", (base, exponent), {})
    fills = [value.shape for value in (base, exponent) if isinstance(value, Fill)]
    if all(isinstance(value, Fill) or _is_number(value) for value in (base, exponent)):
        shape = np.broadcast_shapes(*fills)
        with np.errstate(all="ignore") if 0 in shape else contextlib.nullcontext():
            result = _probe_of(base) ** _probe_of(exponent)  # type: ignore[operator]
        return Fill._of(result, shape)
    like = base if is_array(base) else exponent
    return _dense_of(base, like) ** _dense_of(exponent, like)  # type: ignore[operator]


def _probe_of(value: object) -> object:
    return value._probe() if isinstance(value, Fill) else value


def _dense_of(value: object, like: object) -> object:
    return value._dense_view(like) if isinstance(value, Fill) else value


_TANGENT_TYPES = (_Zero, Fill, Thunk)


def _refuse_tangent_targets(
    ufunc: np.ufunc, method: str, inputs: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    """``TypeError`` naming ``sr.materialize`` for a tangent type where a ufunc would write.

    A ``Fill`` has no memory and a zero no shape, and a ``Thunk``'s value may be a tangent a
    rule still owns: none is an output (``out=``), nor the operand that ``ufunc.at`` updates
    in place. Handing them on to NumPy would bring NumPy straight back here (their
    ``__array_ufunc__``), without end.
    """
    out = kwargs.get("out")
    targets = out if isinstance(out, tuple) else () if out is None else (out,)
    if method == "at" and inputs:
        targets = (*targets, inputs[0])
    for target in targets:
        if isinstance(target, _TANGENT_TYPES):
            kind = type(target).__name__
            where = f"np.{ufunc.__name__}.at's operand" if method == "at" and target is inputs[0] else "out="
            raise TypeError(
                f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method}: a {kind} cannot be "
                f"written into ({where}); it is a lazy or zero tangent, with no memory of its own; "
                f"{_MATERIALIZE_HINT}, then write into that"
            )


def _tangent_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """A ufunc (or operator) with a zero, ``Fill`` or ``Thunk`` among its inputs.

    Thunks are unthunked; a zero follows the zero rules; ``Fill``s with scalars give a
    ``Fill`` computed on 0-d arrays; anything else is NumPy's dense computation with each
    ``Fill`` as a zero-strided view.
    """
    _refuse_tangent_targets(ufunc, method, inputs, kwargs)
    inputs = tuple(unthunk(value) for value in inputs)
    mask = unthunk(kwargs.get("where"))
    if isinstance(mask, _Zero):
        raise TypeError(f"np.{ufunc.__name__}(..., where={mask!r}): a zero tangent is not a mask; {_MATERIALIZE_HINT}")
    if isinstance(mask, Fill):  # NumPy dispatches on where= too: hand it a dense (zero-strided) view
        kwargs = {**kwargs, "where": mask._dense_view(next((value for value in inputs if is_array(value)), None))}
    elif mask is not kwargs.get("where"):  # a Thunk's value
        kwargs = {**kwargs, "where": mask}
    if any(isinstance(value, _Zero) for value in inputs):
        if method != "__call__":
            raise TypeError(f"np.{ufunc.__name__}.{method} of a zero tangent; {_MATERIALIZE_HINT} first")
        out = kwargs.pop("out", None)
        if kwargs:
            raise TypeError(
                f"np.{ufunc.__name__} with a zero tangent takes no keyword arguments but out, got "
                f"{sorted(kwargs)}; {_MATERIALIZE_HINT} first"
            )
        return _zero_call(ufunc, inputs, out)  # type: ignore[arg-type]
    fills = [value for value in inputs if isinstance(value, Fill)]
    if (
        method == "__call__"
        and ufunc.signature is None
        and "out" not in kwargs
        and "where" not in kwargs
        and fills
        and all(isinstance(value, Fill) or _is_number(value) for value in inputs)
    ):
        shape = np.broadcast_shapes(*(fill.shape for fill in fills))
        probes = [value._probe() if isinstance(value, Fill) else value for value in inputs]
        with np.errstate(all="ignore") if 0 in shape else contextlib.nullcontext():
            result = ufunc(*probes, **kwargs)
        if ufunc.nout == 1:
            return Fill._of(result, shape)
        return tuple(Fill._of(part, shape) for part in result)
    like = next((value for value in inputs if is_array(value)), None)
    dense = [value._dense_view(like) if isinstance(value, Fill) else value for value in inputs]
    return getattr(ufunc, method)(*dense, **kwargs)


def project(tangent: ArrayLike, dtype: np.dtype[np.generic]) -> ArrayLike:
    """A tangent projected onto a primal's dtype: the real part for a real primal, then cast.

    Returns the input itself when nothing changes (no copy).
    """
    if tangent.dtype.kind == "c" and dtype.kind != "c":
        tangent = tangent.real
    if tangent.dtype != dtype:
        tangent = tangent.astype(dtype)
    return tangent


def materialize(tangent: object, like: npt.NDArray[_DT]) -> npt.NDArray[_DT]:
    """A dense array of ``like``'s shape, dtype and device for any tangent.

    ``ZeroTangent``/``NoTangent`` give zeros, a ``Fill`` its constant, a ``Thunk`` its value;
    a dense tangent is projected onto ``like``'s dtype (the real part for a real ``like``).
    """
    xp = array_namespace(like)
    tangent = unthunk(tangent)
    result: npt.NDArray[_DT]
    if isinstance(tangent, (ZeroTangent, NoTangent)):
        result = xp.zeros(like.shape, dtype=like.dtype)
        return result
    if isinstance(tangent, Fill):
        value: complex = tangent.value
        if like.dtype.kind != "c":
            value = complex(value).real
        if tangent.shape != tuple(like.shape):
            raise ValueError(
                f"materialize: Fill of shape {shape_text(tangent.shape)} does not match "
                f"the primal's shape {shape_text(like.shape)}"
            )
        result = xp.full(like.shape, value, dtype=like.dtype)
        return result
    dense: ArrayLike = xp.asarray(tangent)
    if tuple(dense.shape) != tuple(like.shape):
        dense = xp.broadcast_to(dense, like.shape)
    result = xp.array(project(dense, like.dtype), copy=True)
    return result


class DenseCotangent:
    """A cotangent as a C-contiguous array of the rule's compute dtype."""

    __slots__ = ("array",)

    def __init__(self, array: ArrayLike) -> None:
        self.array = array

    def __repr__(self) -> str:
        return f"DenseCotangent(shape={self.array.shape}, dtype={self.array.dtype})"


Cotangent = DenseCotangent | Fill | ZeroTangent


def prepare_cotangent(
    dy: object,
    shape: tuple[int, ...],
    dtype: np.dtype[np.generic],
    like: ArrayLike | None = None,
    op: str = "",
    which: str = "dy",
) -> Cotangent:
    """Validate a pullback's cotangent against the output's ``shape`` and normalize it.

    Accepts a dense array of ``shape`` (any numeric dtype: projected onto ``dtype``, then made
    C-contiguous with at most one copy), a ``Fill`` of ``shape``, a ``ZeroTangent``, or a
    ``Thunk`` of any of those. Raises ``ValueError`` naming both shapes before any kernel runs;
    messages start with ``"{op} pullback:"`` and call the cotangent ``which`` (``"dy[1]"`` for
    one output of several).
    """
    # The steady-state case (a dense C-contiguous cotangent of the right shape and dtype) is
    # answered first: it is on every pullback's hot path.
    if (
        type(dy) is np.ndarray
        and dy.dtype == dtype
        and dy.shape == shape
        and dy.flags.c_contiguous
        and (like is None or type(like) is np.ndarray)
    ):
        return DenseCotangent(dy)
    dy = unthunk(dy)
    if isinstance(dy, ZeroTangent):
        return dy
    where = f"{op} pullback" if op else "pullback"
    if isinstance(dy, NoTangent):
        raise TypeError(f"{where}: got NoTangent() as the cotangent {which}; use ZeroTangent() for a zero")
    owner = "the output" if which == "dy" else f"the output {which.replace('dy', 'y', 1)}"
    return _normalize(dy, shape, dtype, like, f"{where}: the cotangent {which}", owner, which)


def prepare_tangent(
    tangent: object,
    shape: tuple[int, ...],
    dtype: np.dtype[np.generic],
    like: ArrayLike | None,
    where: str,
) -> Cotangent:
    """Validate an frule's input tangent against its primal's ``shape``, like
    :func:`prepare_cotangent`; ``NoTangent`` counts as a hard zero here. ``where`` names the
    tangent in messages (``"kron frule: the tangent of 'a'"``)."""
    tangent = unthunk(tangent)
    if isinstance(tangent, (ZeroTangent, NoTangent)):
        return ZeroTangent()
    return _normalize(tangent, shape, dtype, like, where, "its primal", where.rsplit(": ", 1)[-1])


def _normalize(
    value: object,
    shape: tuple[int, ...],
    dtype: np.dtype[np.generic],
    like: ArrayLike | None,
    subject: str,
    owner: str,
    dtype_name: str,
) -> Cotangent:
    """The checks and the one normalizing copy shared by cotangents and tangents: a ``Fill``
    keeps its laziness (value projected), anything dense becomes C-contiguous ``dtype``."""
    if isinstance(value, Fill):
        if value.shape != shape:
            raise ValueError(
                f"{subject} has shape {shape_text(value.shape)} but {owner} has shape {shape_text(shape)}"
            )
        projected = value.value if dtype.kind == "c" else complex(value.value).real
        return Fill(projected, shape, dtype)
    if shape == () and (isinstance(value, (int, float, complex, np.number)) or type(value).__name__ == "bfloat16") and not isinstance(value, bool):
        value = np.asarray(value) if like is None else array_namespace(like).asarray(value)
    if not is_array(value):
        raise TypeError(
            f"{subject} must be an array, Fill, ZeroTangent or Thunk, got {type(value).__name__}"
        )
    if like is not None and array_namespace(value) is not array_namespace(like):
        raise TypeError(
            f"{subject} lives on {type(value).__module__.split('.')[0]} but {owner} on "
            f"{type(like).__module__.split('.')[0]}: mixed devices"
        )
    if tuple(value.shape) != shape:
        raise ValueError(
            f"{subject} has shape {shape_text(tuple(value.shape))} but {owner} has shape "
            f"{shape_text(shape)}"
        )
    try:
        check_dtype(value.dtype, dtype_name, half=True)
    except TypeError as error:
        raise TypeError(f"{subject.rsplit(': ', 1)[0]}: {error}") from None
    xp = array_namespace(value)
    if value.dtype.kind == "c" and dtype.kind != "c":
        value = value.real
    # ascontiguousarray returns at least 1-d: reshape keeps a 0-d array 0-d (a view).
    dense: ArrayLike = xp.ascontiguousarray(value, dtype=dtype).reshape(shape)
    return DenseCotangent(dense)


__all__ = [
    "Cotangent",
    "DenseCotangent",
    "Fill",
    "NoTangent",
    "Thunk",
    "ZeroTangent",
    "materialize",
    "prepare_cotangent",
    "prepare_tangent",
    "project",
    "unthunk",
]
