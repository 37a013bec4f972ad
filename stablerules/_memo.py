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
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeVar

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


if TYPE_CHECKING or sys.version_info >= (3, 12):
    from functools import cached_property
else:

    class cached_property(functools.cached_property):  # noqa: N801 - functools' name
        """``functools.cached_property`` as Python 3.12 has it: without a lock (type checkers
        see functools' own, whose interface this keeps).

        Python 3.11's holds one reentrant lock per property, shared by every instance of the
        class, while it computes a value. Ours compute kernels (a plan's launcher: a compile
        or a load from disk), so there that lock would:

        - serialize the first calls of different signatures in different threads (one
          thread's 300 ms compile holding back another's load of a kernel already on disk);
        - hang a process forked while another thread computed one (its child inherits the
          lock held by a thread it does not have, and waits for it at the first call of
          that op; ``tests/test_cache_faults.py``).

        Without it, two threads that compute the same instance's value at once both compute
        it (the kernel cache under it builds the kernel once) and the last one stored is
        kept: the values are equal, so either serves. Once stored, the instance's own
        attribute is found first and this is not called again."""

        def __get__(self, instance, owner=None):
            if instance is None:
                return self
            cache = instance.__dict__
            name = self.attrname
            if name in cache:
                return cache[name]
            value = cache[name] = self.func(instance)
            return value


def registered() -> tuple[RegisteredCache, ...]:
    """Every table registered so far (modules register theirs as they are imported)."""
    return tuple(_REGISTERED)


def clear_registered() -> None:
    for entry in tuple(_REGISTERED):
        entry.clear()


__all__ = ["RegisteredCache", "cached_property", "clear_registered", "memoized", "register", "registered"]
