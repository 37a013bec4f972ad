"""Our ``stubs/`` replace Numba's (untyped) decorators: bare ``@njit`` keeps the signature.

Checked with the project's ``mypy.ini`` only (``mypy_path = stubs``); without the stubs the
installed numba's ``njit`` is untyped and ``--strict`` rejects both decorators below, which
``tests/test_typing.py`` also checks.
"""

from __future__ import annotations

from typing import assert_type

import numba
from numba import cuda, njit, prange
from numba.core.dispatcher import Dispatcher


@njit
def scale(x: float, k: int, /) -> float:
    return x * k


@numba.njit("float64(float64)", cache=True, nogil=True, boundscheck=False)
def half(x: float, /) -> float:
    total = 0.0
    for _ in prange(2):
        total += x / 4
    return total


assert_type(scale, Dispatcher[[float, int], float])
assert_type(scale(1.0, 2), float)
assert_type(half, Dispatcher[[float], float])
assert_type(cuda.is_available(), bool)
