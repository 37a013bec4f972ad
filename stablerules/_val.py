"""``Val``: a static value that becomes part of a kernel's signature."""

from __future__ import annotations

from typing import Generic, TypeVar, final

import numpy as np

# Bound (not constrained) and covariant: ``Val((7, 1, 10))`` is a ``Val`` of a 3-tuple (of
# literal ints, as a checker may show), and a ``Val[tuple[Literal[3], Literal[-1]]]`` is a
# ``Val[tuple[int, int]]`` where one is expected. The price of covariance: ``bool`` subclasses
# ``int``, so a ``Val[bool]`` is a ``Val[int]`` and ``Val(True)`` type-checks where a count is
# expected (run time refuses it: a flag is not a count). An invariant ``Val`` would reject
# ``Val((7, 1, 10))`` where a ``Val[tuple[int, ...]]`` is expected, and a separate flag type
# would break ``Val(True)`` being a ``Val[bool]``.
_T = TypeVar("_T", bound=int | tuple[int, ...], covariant=True)


def _integer(item: object, whole: object) -> int:
    # NumPy integers are accepted (shapes often come as np.int64); bools are not counts.
    if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
        raise TypeError(
            f"Val takes an int, a bool or a tuple of ints, got {type(whole).__name__}: {whole!r}"
        )
    return int(item)


def _static_value(value: object) -> bool | int | tuple[int, ...]:
    if isinstance(value, tuple):
        return tuple(_integer(item, value) for item in value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)  # a flag (keepdims): never equal to Val(0) or Val(1)
    return _integer(value, value)


@final
class Val(Generic[_T]):
    """A static argument: an ``int``, a ``bool`` or a tuple of ``int``s, known when the kernel
    is built.

    ``Val(3) == Val(3)``; ``Val(3) != Val((3,))``; ``Val(True) != Val(1)`` (a flag is not a
    count, though ``True == 1`` in Python); hashable and immutable. A NumPy integer or
    ``np.bool_`` is stored as the Python value. The value is part of the kernel cache key, so
    each distinct value is one compiled kernel.
    """

    __slots__ = ("_value",)
    _value: _T

    def __init__(self, value: _T) -> None:
        # Static arguments are built per call (``f(x, Val(3))``): plain ints and tuples of
        # plain ints skip the general conversion. ``object.__setattr__``, not the slot's own
        # setter (which is faster), because torch.compile can trace
        # it: a Val built inside a compiled function is then a constant of the graph.
        if type(value) is int or (type(value) is tuple and all(type(item) is int for item in value)):  # type: ignore[union-attr]
            object.__setattr__(self, "_value", value)
        else:
            object.__setattr__(self, "_value", _static_value(value))

    @property
    def value(self) -> _T:
        return self._value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Val is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Val is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Val):
            return NotImplemented
        return type(self._value) is type(other._value) and self._value == other._value

    def __hash__(self) -> int:
        return hash((Val, type(self._value), self._value))

    def __repr__(self) -> str:
        return f"Val({self._value!r})"

    def __reduce__(self) -> tuple[type[Val[_T]], tuple[_T]]:
        return (Val, (self._value,))

