"""Must fail: the cache record is frozen, Val is immutable, user functions keep their signature."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val


def records() -> None:
    info = sr.cache_info()
    # E: Property "compiles" defined in "CacheInfo" is read-only  [misc]
    info.compiles = 0
    # E: Property "value" defined in "Val" is read-only  [misc]
    Val(3).value = 4


def scale(x: npt.NDArray[np.float64], k: Val[int]) -> npt.NDArray[np.float64]:
    return x * k.value


def user_function(x: npt.NDArray[np.float64]) -> None:
    # E: No overload variant of "rrule"  [call-overload]
    sr.rrule(scale, x, Val((2, 3)))
    # E: No overload variant of "rrule"  [call-overload]
    sr.rrule(scale, x)
