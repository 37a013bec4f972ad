"""Must fail: plain ints as statics in rules, the wrong kind of Val, the wrong arity."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

Array = npt.NDArray[np.float64]


def statics(a: Array) -> None:
    sr.roll(a, 1, axis=0)  # the forward op's convenience: accepted
    # E: No overload variant of "rrule" matches argument types "Roll", "ndarray[tuple[Any, ...], dtype[float64]]", "int"  [call-overload]
    sr.rrule(sr.roll, a, 1)
    # E: No overload variant of "rrule" matches argument types "Flip", "ndarray[tuple[Any, ...], dtype[float64]]", "int"  [call-overload]
    sr.rrule(sr.flip, a, 0)
    # E: Argument 1 to "Val" has incompatible type "int"; expected "tuple[int, ...]"  [arg-type]
    sr.permute_dims(a, Val(0))
    # E: Argument 1 to "Val" has incompatible type "int"; expected "tuple[int, ...]"  [arg-type]
    sr.rrule(sr.transpose, a, Val(0))
    # E: No overload variant of "frule" matches argument types "Reshape", "tuple[ndarray[tuple[Any, ...], dtype[float64]]]", "ndarray[tuple[Any, ...], dtype[float64]]", "tuple[int, int]"  [call-overload]
    sr.frule(sr.reshape, (a,), a, (2, 3))


def arity(a: Array, dy: Array) -> None:
    _, back = sr.rrule(sr.roll, a, Val(1), Val(0))
    # E: Too many values to unpack (2 expected, 3 provided)  [misc]
    dx, dshift = back(dy)
    _, back_flip = sr.rrule(sr.flip, a)
    # E: Need more than 1 value to unpack (2 expected)  [misc]
    dx, daxis = back_flip(dy)
