"""Must fail: a pullback's tuple has the call's positional arity, and a Val is not a tangent."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val


def kron(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], dy: npt.NDArray[np.float64]) -> None:
    _, back = sr.rrule(sr.kron, a, b)
    # E: Need more than 2 values to unpack (3 expected)  [misc]
    da, db, dc = back(dy)


def repeat(x: npt.NDArray[np.float64], dy: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    _, back = sr.rrule(sr.repeat, x, Val(2), axis=Val(0))
    # E: Too many values to unpack (1 expected, 2 provided)  [misc]
    (dx,) = back(dy)
    _, dcounts = back(dy)
    # E: Incompatible return value type (got "NoTangent", expected "ndarray[tuple[Any, ...], dtype[float64]]"  [return-value]
    return dcounts


def concatenate(a: npt.NDArray[np.float64], dy: npt.NDArray[np.float64]) -> None:
    _, back = sr.rrule(sr.concatenate, (a, a))
    # E: Need more than 1 value to unpack (2 expected)  [misc]
    da, db = back(dy)
