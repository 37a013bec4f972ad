"""Must fail: a float32 result is not a float64 array (the dtype parameter is exact)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val


def joined(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    # The return type is the context that solves the dtype parameter, so mypy names the argument.
    # E: Argument 1 to "__call__" of "Concatenate"  [arg-type]
    return sr.concatenate((a, b), axis=Val(0))


def primal(a: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    y, _ = sr.rrule(sr.stack, (a, a), axis=Val(1))
    # E: Incompatible return value type (got "ndarray[tuple[Any, ...], dtype[floating[_32Bit]]]"  [return-value]
    return y


def tangent(a: npt.NDArray[np.float32], dy: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    _, back = sr.rrule(sr.cat, a, a, dims=Val(0))
    da, _ = back(dy)
    # E: Incompatible return value type (got "ndarray[tuple[Any, ...], dtype[floating[_32Bit]]]"  [return-value]
    return da


def kron(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    y, back = sr.rrule(sr.kron, a, b)
    da, db = back(y)
    # E: Incompatible types in assignment (expression has type "ndarray[tuple[Any, ...], dtype[floating[_32Bit]]]"  [assignment]
    wide: npt.NDArray[np.float64] = db
    # E: Incompatible return value type (got "ndarray[tuple[Any, ...], dtype[floating[_32Bit]]]"  [return-value]
    return y
