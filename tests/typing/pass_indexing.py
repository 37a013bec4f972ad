"""The indexing ops' result types: a getindex by slices only keeps the rank (and the dtype);
take_along_axis and index_add keep x's shape type; take, and getindex with ints, None or
``...``, give an array of x's dtype of unknown rank.

Type-checked only (``tests/test_typing.py`` runs mypy on it, with and without our config);
never executed, never collected by pytest.
"""

from __future__ import annotations

from typing import Any, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val
from stablerules.rules.indexing import Basic, Slices

M32 = np.ndarray[tuple[int, int], np.dtype[np.float32]]
T3 = np.ndarray[tuple[int, int, int], np.dtype[np.complex128]]
F32 = npt.NDArray[np.float32]


def indexing(a: M32, z: T3, rows: npt.NDArray[np.int64]) -> None:
    assert_type(sr.ix[1:-1, ::2], sr.StaticIndex[Slices])
    assert_type(sr.ix[..., 0], sr.StaticIndex[Basic])
    assert_type(sr.getindex(a, sr.ix[1:-1, ::2]), M32)
    assert_type(sr.getindex(z, sr.ix[::-1]), T3)
    assert_type(sr.getindex(a, sr.ix[:, None, -1]), F32)
    assert_type(sr.take(a, rows, Val(0)), F32)
    assert_type(sr.take(a, rows), F32)
    assert_type(sr.take_along_axis(a, rows, Val(1)), M32)
    assert_type(sr.take_along_axis(a, rows, None), F32)
    assert_type(sr.index_add(a, rows, a), M32)
    keep: Any = sr.take(a, rows, Val(0), unique=Val(True), sorted=Val(True))
    del keep
