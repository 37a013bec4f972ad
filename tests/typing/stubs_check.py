"""Our ``stubs/`` replace Numba's and CuPy's types: bare ``@njit`` keeps the signature.

Checked with the project's ``mypy.ini`` only (``mypy_path = stubs``). Without the stubs the
installed numba's ``njit`` returns a loosely typed wrapper (and cupy is not importable here),
so ``--strict`` rejects these lines, which ``tests/test_typing.py`` also checks: that is how
we know the stubs are the ones in use.
"""

from __future__ import annotations

from typing import assert_type

import cupy
import numba
import numpy as np
import numpy.typing as npt
from numba import cuda, njit, prange
from numba.core.dispatcher import Dispatcher

F64 = npt.NDArray[np.float64]


@njit
def scale(x: float, k: int, /) -> float:
    return x * k


@numba.njit("float64(float64)", cache=True, nogil=True, boundscheck=False)
def half(x: float, /) -> float:
    total = 0.0
    for _ in prange(2):
        total += x / 4
    return total


@cuda.jit("void(float64[:])", cache=True)
def fill(out: F64, /) -> None:
    start = cuda.grid(1)
    for index in range(start, out.size, cuda.gridsize(1)):
        out[index] = 1.0


assert_type(scale, Dispatcher[[float, int], float])
assert_type(scale(1.0, 2), float)
assert_type(half, Dispatcher[[float], float])
assert_type(half.stats.cache_hits[object()], int)
assert_type(fill, cuda.CUDAKernel[[F64]])
assert_type(fill[4, 256](np.zeros(8)), None)
assert_type(cuda.is_available(), bool)
assert_type(cupy.asarray(np.zeros(3)), cupy.ndarray[np.generic])
assert_type(cupy.asarray(np.zeros(3)).get(), npt.NDArray[np.generic])
assert_type(cupy.asnumpy(cupy.zeros(3)), npt.NDArray[np.generic])
