"""The steady-state check of one entry (forward, dense pullback, pushforward): inside
``no_compile()`` or ``no_fallback()`` an entry listed in a plan's ``kernel_entries`` must
launch at least one compiled kernel; one that does not is a fallback (``count_unlaunched``).

Callers test ``OPEN_GUARDS[0]`` themselves first: outside the guards this costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ._guards import OPEN_GUARDS, steady_state_checked
from ._launch import context_launches, count_unlaunched

_Result = TypeVar("_Result")


def checked(entries: frozenset[str], entry: str) -> bool:
    """Whether ``entry`` of a plan with these ``kernel_entries`` is checked now."""
    return bool(OPEN_GUARDS[0]) and entry in entries and steady_state_checked()


def counted(name: str, entry: str, call: Callable[[], _Result]) -> _Result:
    """``call()``, its launches counted: a fallback when it launched no kernel."""
    before = context_launches()
    result = call()
    count_unlaunched(name, entry, before)
    return result
