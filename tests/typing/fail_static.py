"""Must fail: the wrong kind of static argument, and calls no op signature accepts.

Plain ints where a ``Val`` goes are *accepted* (SPEC: a counted dynamic argument; see
``stablerules/_typing.py``), so they are not here.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

Array = npt.NDArray[np.float64]


def static(a: Array) -> None:
    # E: Value of type variable "_T" of "Val" cannot be "float"  [type-var]
    Val(1.5)
    # E: Argument 1 to "Val" has incompatible type "tuple[int, int]"; expected "int"  [arg-type]
    sr.concatenate((a, a), axis=Val((0, 1)))


def rules(a: Array) -> None:
    # E: No overload variant of "rrule" matches argument types "_Kron", "ndarray[tuple[Any, ...], dtype[float64]]", "ndarray[tuple[Any, ...], dtype[float64]]", "ndarray[tuple[Any, ...], dtype[float64]]"  [call-overload]
    sr.rrule(sr.kron, a, a, a)
    # E: No overload variant of "frule" matches argument types "_Kron", "tuple[ndarray[tuple[Any, ...], dtype[float64]]]", "ndarray[tuple[Any, ...], dtype[float64]]", "ndarray[tuple[Any, ...], dtype[float64]]"  [call-overload]
    sr.frule(sr.kron, (a,), a, a)
