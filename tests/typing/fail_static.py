"""Must fail: plain ints or the wrong kind of Val as static arguments, calls no op accepts.

Plain ints where a ``Val`` goes are accepted, by the ops and the rules alike (see
``pass_plain_ints.py`` and ``fail_plain_ints.py``).
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
    # E: No overload variant of "rrule" matches argument types "Kron"  [call-overload]
    sr.rrule(sr.kron, a, a, a)
    # one tangent for two positional arguments (mypy names the closest overload's tangents)
    # E: Argument 2 to "frule" has incompatible type "tuple[ndarray[tuple[Any, ...], dtype[float64]]]"  [arg-type]
    sr.frule(sr.kron, (a,), a, a)
