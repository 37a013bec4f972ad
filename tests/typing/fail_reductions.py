"""Must fail: broadcast_to/sum/mean/pad/split with a count for a flag, the wrong arity (plain
statics are accepted, in rules too: pass_plain_ints.py, fail_plain_ints.py)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

Array = npt.NDArray[np.float64]


def statics(x: Array, dy: Array) -> None:
    # a count where a flag goes
    # E: Argument 1 to "Val" has incompatible type "Literal[1]"; expected "Literal[True]"  [arg-type]
    sr.sum(x, keepdims=Val(1))


def arity(x: Array, dy: Array) -> None:
    _, back = sr.rrule(sr.broadcast_to, x, Val((4, 3)))
    # E: Too many values to unpack (1 expected, 2 provided)  [misc]
    (dx,) = back(dy)
    _, back_sum = sr.rrule(sr.sum, x, axis=Val(0))
    # E: Need more than 1 value to unpack (2 expected)  [misc]
    dx, daxis = back_sum(dy)
    parts, back_split = sr.rrule(sr.split, x, Val(2))
    # E: Incompatible types in assignment (expression has type "tuple[ndarray[tuple[Any, ...], dtype[float64]], ...]"  [assignment]
    wrong: Array = parts


def frule_arity(x: Array) -> None:
    # one tangent for two positional arguments (mypy names the closest overload's tangents)
    # E: Argument 2 to "frule" has incompatible type "tuple[ndarray[tuple[Any, ...], dtype[float64]]]"  [arg-type]
    sr.frule(sr.sum, (x,), x, Val(1))
