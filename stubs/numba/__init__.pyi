# Stubs for the part of numba that stablerules uses. numba ships py.typed, but its public
# decorators are untyped; these stubs replace the whole package for our own checks.
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar, overload

from numba.core.dispatcher import Dispatcher

__version__: str

_P = ParamSpec("_P")
_R = TypeVar("_R")

@overload
def njit(function: Callable[_P, _R], /) -> Dispatcher[_P, _R]: ...
@overload
def njit(
    signature: str | Sequence[str] | None = ...,
    /,
    *,
    cache: bool = ...,
    nogil: bool = ...,
    parallel: bool = ...,
    fastmath: bool = ...,
    boundscheck: bool | None = ...,
    error_model: str = ...,
) -> Callable[[Callable[_P, _R]], Dispatcher[_P, _R]]: ...
def prange(start: int, stop: int = ..., step: int = ..., /) -> range: ...
