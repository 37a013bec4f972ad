"""The 16-bit floats' types (SPEC section 15): ``float16`` is an inexact dtype like float32, so
its calls take the exact overloads (a float16 result, float16 tangents); ml_dtypes types its
``bfloat16`` as ``np.generic`` (its own stubs), so a bfloat16 array is at best an ``NDArray[np.generic]``
and gets the loose overloads' types, true for it.

Type-checked only, never executed.
"""

from __future__ import annotations

from typing import assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import NoTangent, Val

F16 = npt.NDArray[np.float16]
G = npt.NDArray[np.generic]


def float16(x: F16, dy: F16, indices: npt.NDArray[np.int64]) -> None:
    assert_type(sr.repeat(x, Val(2), axis=Val(0)), F16)
    assert_type(sr.concatenate((x, x), axis=Val(0)), F16)
    assert_type(sr.kron(x, x), F16)
    assert_type(sr.sum(x, Val(0)), F16)
    assert_type(sr.take(x, indices, axis=Val(0)), F16)
    y, back = sr.rrule(sr.flip, x, Val(0))
    assert_type(y, F16)
    dx, static = back(dy)
    assert_type(dx, F16)
    assert_type(static, NoTangent)
    _, back_join = sr.rrule(sr.concatenate, (x, x), axis=Val(0))
    ((da, db),) = back_join(dy)
    assert_type(da, F16)
    assert_type(db, F16)


def bfloat16(x: G) -> None:
    # ml_dtypes' stubs give NumPy no bfloat16 scalar type: ``np.ones(n, ml_dtypes.bfloat16)``
    # is ``ndarray[Any, Any]``, which a user annotates as ``NDArray[np.generic]``
    assert_type(sr.repeat(x, Val(2), axis=Val(0)), G)
    assert_type(sr.flip(x, Val(0)), G)
