"""Must fail: the wrong kind of Val, the wrong arity (plain ints as statics are accepted, in
rules too: pass_plain_ints.py, fail_plain_ints.py)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import ArraySpec, Val

Array = npt.NDArray[np.float64]


def statics(a: Array) -> None:
    # E: Argument 1 to "Val" has incompatible type "int"; expected "tuple[int, ...]"  [arg-type]
    sr.permute_dims(a, Val(0))
    # E: Argument 1 to "Val" has incompatible type "int"; expected "tuple[int, ...]"  [arg-type]
    sr.rrule(sr.transpose, a, Val(0))
    # E: Argument 2 to "frule" has incompatible type "tuple[ndarray[tuple[Any, ...], dtype[float64]]]"  [arg-type]
    sr.frule(sr.reshape, (a,), a, (2, 3))


def arity(a: Array, dy: Array) -> None:
    _, back = sr.rrule(sr.roll, a, Val(1), Val(0))
    # E: Too many values to unpack (2 expected, 3 provided)  [misc]
    dx, dshift = back(dy)
    _, back_flip = sr.rrule(sr.flip, a)
    # E: Need more than 1 value to unpack (2 expected)  [misc]
    dx, daxis = back_flip(dy)


def pullback_arity(a: Array, dy: Array) -> None:
    # E: Too many values to unpack (2 expected, 3 provided)  [misc]
    dx, dshift = sr.pullback(sr.roll, a, Val(1), Val(0))(dy)
    # E: Need more than 2 values to unpack (3 expected)  [misc]
    dx, dshift, daxis = sr.pullback(sr.transpose, a, Val((1, 0)))(dy)
    spec = ArraySpec((2, 3), np.float64)
    # kron's pullback reads the primal values: no ArraySpec form
    # E: No overload variant of "pullback" matches argument types "Kron", "ArraySpec", "ArraySpec"  [call-overload]
    sr.pullback(sr.kron, spec, spec)
    # take's pullback reads the indices' values: an ArraySpec for x, not for them
    # E: No overload variant of "pullback" matches argument types "Take", "ArraySpec", "ArraySpec"  [call-overload]
    sr.pullback(sr.take, spec, ArraySpec((2,), np.intp))
