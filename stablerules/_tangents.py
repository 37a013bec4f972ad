"""Tangent types, projection and cotangent preparation (SPEC section 4).

Every pullback receives its cotangent through :func:`prepare_cotangent`, which validates the
shape before any kernel runs and turns the many accepted forms (dense array of any floating
dtype, ``Fill``, ``ZeroTangent``, ``Thunk``) into one of three cases the rules handle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, final

import numpy as np
import numpy.typing as npt

from ._arrays import (
    ArrayLike,
    array_namespace,
    check_dtype,
    is_array,
    shape_text,
)

_T = TypeVar("_T")
_DT = TypeVar("_DT", bound=np.generic)


@final
class NoTangent:
    """The tangent of a non-differentiable argument (a ``Val``, an integer array)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoTangent)

    def __hash__(self) -> int:
        return hash(NoTangent)

    def __repr__(self) -> str:
        return "NoTangent()"


@final
class ZeroTangent:
    """A hard zero of any shape: rules skip the work it would feed."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZeroTangent)

    def __hash__(self) -> int:
        return hash(ZeroTangent)

    def __repr__(self) -> str:
        return "ZeroTangent()"


@final
class Fill:
    """A lazy constant array: ``shape`` entries all equal to ``value``, of ``dtype``.

    This is what the pullback of ``sum`` produces. ``np.asarray(fill)`` materializes it; the
    rules avoid that wherever the math allows (the pullback of ``repeat`` of a ``Fill`` is a
    ``Fill``; a slice of a ``Fill`` is a ``Fill``).
    """

    __slots__ = ("value", "shape", "dtype")
    value: complex
    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]

    def __init__(
        self, value: complex, shape: tuple[int, ...] | int, dtype: npt.DTypeLike = np.float64
    ) -> None:
        resolved = np.dtype(dtype)
        if resolved.kind not in "fc":
            raise TypeError(f"Fill: dtype must be a floating or complex dtype, got {resolved}")
        if isinstance(shape, int):
            shape = (shape,)
        shape = tuple(int(extent) for extent in shape)
        if any(extent < 0 for extent in shape):
            raise ValueError(f"Fill: shape must be non-negative, got {shape}")
        # Round the value to the dtype's precision so Fill(v) equals its dense equivalent.
        # (a real dtype takes the real part first: casting complex to real raises ComplexWarning)
        exact = complex(value) if resolved.kind == "c" else complex(value).real
        rounded = complex(np.asarray(exact).astype(resolved).item())
        object.__setattr__(self, "value", rounded if resolved.kind == "c" else rounded.real)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", resolved)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Fill is immutable")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[np.generic]:
        return np.full(self.shape, self.value, dtype=self.dtype if dtype is None else dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fill):
            return NotImplemented
        return (self.value, self.shape, self.dtype) == (other.value, other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((Fill, self.value, self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"Fill({self.value!r}, {self.shape}, {self.dtype})"


@final
class Thunk(Generic[_T]):
    """A lazy tangent: ``fn`` runs at most once, when a rule (or ``unthunk``) needs it."""

    __slots__ = ("_fn", "_value", "_done", "_lock")

    def __init__(self, fn: Callable[[], _T]) -> None:
        self._fn = fn
        self._value: _T | None = None
        self._done = False
        self._lock = threading.Lock()

    def unthunk(self) -> _T:
        if not self._done:
            with self._lock:
                if not self._done:
                    self._value = self._fn()
                    self._done = True
        return self._value  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Thunk({self._fn!r})"


def unthunk(tangent: object) -> object:
    """Evaluate a ``Thunk`` (repeatedly, for nested thunks); return anything else as it is."""
    while isinstance(tangent, Thunk):
        tangent = tangent.unthunk()
    return tangent


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


@dataclass(frozen=True, slots=True)
class DenseCotangent:
    """A cotangent as a C-contiguous array of the rule's compute dtype."""

    array: ArrayLike


Cotangent = DenseCotangent | Fill | ZeroTangent


def prepare_cotangent(
    dy: object, shape: tuple[int, ...], dtype: np.dtype[np.generic], like: ArrayLike | None = None
) -> Cotangent:
    """Validate a pullback's cotangent against the output's ``shape`` and normalize it.

    Accepts a dense array of ``shape`` (any numeric dtype: projected onto ``dtype``, then made
    C-contiguous with at most one copy), a ``Fill`` of ``shape``, a ``ZeroTangent``, or a
    ``Thunk`` of any of those. Raises ``ValueError`` naming both shapes before any kernel runs.
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
    if isinstance(dy, NoTangent):
        raise TypeError("pullback: got NoTangent() as a cotangent; use ZeroTangent() for a zero")
    return _normalize(dy, shape, dtype, like, "pullback: cotangent dy", "the output", "dy")


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
    if isinstance(value, (int, float, complex, np.number)) and not isinstance(value, bool) and shape == ():
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
    check_dtype(value.dtype, dtype_name)
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
