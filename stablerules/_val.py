"""``Val``: a static value that becomes part of a kernel's signature."""

from __future__ import annotations

from typing import Generic, TypeVar, final

_T = TypeVar("_T", int, tuple[int, ...])

StaticInt = int
StaticTuple = tuple[int, ...]


@final
class Val(Generic[_T]):
    """A static argument: an ``int`` or a tuple of ``int``s, known when the kernel is built.

    ``Val(3) == Val(3)``; ``Val(3) != Val((3,))``; hashable and immutable. The value is part
    of the kernel cache key, so each distinct value is one compiled kernel.
    """

    __slots__ = ("_value",)
    _value: _T

    def __init__(self, value: _T) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, tuple)):
            raise TypeError(
                f"Val takes an int or a tuple of ints, got {type(value).__name__}: {value!r}"
            )
        if isinstance(value, tuple):
            for item in value:
                if isinstance(item, bool) or not isinstance(item, int):
                    raise TypeError(
                        f"Val takes an int or a tuple of ints, got a tuple holding "
                        f"{type(item).__name__}: {value!r}"
                    )
            value = tuple(int(item) for item in value)  # type: ignore[assignment]
        else:
            value = int(value)  # type: ignore[assignment]
        object.__setattr__(self, "_value", value)

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
