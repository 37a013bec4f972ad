"""Every public op's result type is exact: ``NDArray[DT]`` in, ``NDArray[DT]`` out.

Type-checked only (``tests/test_typing.py`` runs mypy on it, with and without our config);
never executed, never collected by pytest.
"""

from __future__ import annotations

from typing import assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
C64 = npt.NDArray[np.complex64]
C128 = npt.NDArray[np.complex128]
I64 = npt.NDArray[np.int64]
Generic = npt.NDArray[np.generic]


def ops(a: F32, b: F32, z: C128, n: I64, counts: I64) -> None:
    # concatenate family, Val and plain-int (dynamic) static arguments alike
    assert_type(sr.concatenate((a, b)), F32)
    assert_type(sr.concatenate([a, b], axis=Val(1)), F32)
    assert_type(sr.concatenate((a, b), axis=None), np.ndarray[tuple[int], np.dtype[np.float32]])
    assert_type(sr.concatenate((z, z), axis=-1), C128)
    assert_type(sr.concatenate((n, n)), I64)
    assert_type(sr.stack((a, b), axis=Val(0)), F32)
    assert_type(sr.stack([z, z]), C128)
    assert_type(sr.hstack((a, b)), F32)
    assert_type(sr.vstack((z, z)), C128)
    assert_type(sr.cat(a, b, dims=Val(0)), F32)
    assert_type(sr.cat(a, b, a, dims=Val((0, 1))), F32)
    assert_type(sr.cat(z, dims=2), C128)
    # Python scalars (weak) and NumPy scalars: the dtype is decided at run time
    assert_type(sr.cat(a, 1.0, dims=Val(0)), Generic)

    # repeat, both forms; tile
    assert_type(sr.repeat(a, Val(3)), np.ndarray[tuple[int], np.dtype[np.float32]])
    assert_type(sr.repeat(a, Val(3), axis=Val(0)), F32)
    assert_type(sr.repeat(z, Val(2), Val(1)), C128)
    assert_type(sr.repeat(a, counts, axis=Val(0)), F32)
    assert_type(sr.repeat(a, 2), F32)
    assert_type(sr.repeat(a, inner=Val((2, 1))), F32)
    assert_type(sr.repeat(z, inner=Val(2), outer=Val((1, 3))), np.ndarray[tuple[int, ...], np.dtype[np.complex128]])
    assert_type(sr.repeat(n, outer=Val(2)), I64)
    assert_type(sr.tile(a, Val((2, 2))), F32)
    assert_type(sr.tile(z, Val(3)), C128)

    # kron
    assert_type(sr.kron(a, b), F32)
    assert_type(sr.kron(z, z), C128)
    assert_type(sr.kron(n, n), I64)
