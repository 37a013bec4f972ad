"""Every cache in the package registers here, so one ``clear_caches()`` reaches them all.

As JAX's ``util.cache``: a function memoized with :func:`memoized` (``functools.lru_cache``
underneath) registers its table as it is defined, and any other table (per-signature plans,
the output pool) registers itself with :func:`register`; ``stablerules.clear_caches()``
empties every one of them along with the kernel cache. Each entry also says how much it
holds, so a test can fill them, clear, and see every one empty. Memoizing with
``functools.lru_cache`` or ``functools.cache`` directly would put a table out of that reach
(a test scans the package for such tables).

This module imports nothing from the package, so any module can use it, the kernel cache's
own imports (the object-code loader) and the core's array helpers included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple, TypeVar

_T = TypeVar("_T")


class RegisteredCache(NamedTuple):
    """One table that ``clear_caches()`` empties."""

    name: str
    """``module.qualname`` of a memoized function, or the table's own name."""
    clear: Callable[[], None]
    size: Callable[[], int]
    """What it holds now (entries, blocks): 0 after ``clear``."""


_REGISTERED: list[RegisteredCache] = []


def register(name: str, clear: Callable[[], None], size: Callable[[], int]) -> None:
    """Have ``clear_caches()`` call ``clear``; ``size`` tells what the table holds."""
    _REGISTERED.append(RegisteredCache(name, clear, size))


def memoized(maxsize: int | None) -> Callable[[Callable[..., _T]], functools._lru_cache_wrapper[_T]]:
    """``functools.lru_cache(maxsize=maxsize)`` (``None``: unbounded, as ``functools.cache``)
    whose table ``clear_caches()`` empties."""

    def memoize(function: Callable[..., _T]) -> functools._lru_cache_wrapper[_T]:
        table = functools.lru_cache(maxsize=maxsize)(function)
        register(f"{function.__module__}.{function.__qualname__}", table.cache_clear, lambda: table.cache_info().currsize)
        return table

    return memoize


def registered() -> tuple[RegisteredCache, ...]:
    """Every table registered so far (modules register theirs as they are imported)."""
    return tuple(_REGISTERED)


def clear_registered() -> None:
    for entry in tuple(_REGISTERED):
        entry.clear()


__all__ = ["RegisteredCache", "clear_registered", "memoized", "register", "registered"]
