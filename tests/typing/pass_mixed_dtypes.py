"""Issue 38's typing points. concatenate of arrays of different floating dtypes (NumPy promotes; issue 38: this was an
``arg-type`` error): each tangent has its own input's type, the result's dtype is one of the
inputs' (their union; one dtype when they agree). sr.pullback of take, take_along_axis and
index_add takes ArraySpecs for x and values (their pullbacks read only the indices' values).
Type-checked only, never executed.
"""

from __future__ import annotations

from typing import TypeAlias, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import ArraySpec, Fill, NoTangent, Val

S2: TypeAlias = tuple[int, int]
A32: TypeAlias = np.ndarray[S2, np.dtype[np.float32]]
A64: TypeAlias = np.ndarray[S2, np.dtype[np.float64]]
C64: TypeAlias = np.ndarray[S2, np.dtype[np.complex64]]


def mixed(x32: A32, x64: A64, c64: C64) -> None:
    y, back = sr.rrule(sr.concatenate, (x32, x64), axis=Val(0))
    assert_type(y, np.ndarray[S2, np.dtype[np.float32 | np.float64]])
    assert_type(back(np.ones((4, 3))), tuple[tuple[A32, A64]])
    assert_type(back(Fill(1.0, (4, 3), np.float64)), tuple[tuple[Fill[S2, np.float32], Fill[S2, np.float64]]])
    ((d32, d64),) = back(np.ones((4, 3)))
    assert_type(d32, A32)
    assert_type(d64, A64)
    _, back3 = sr.rrule(sr.concatenate, (x32, x64, c64), Val(1))
    assert_type(back3(np.ones((2, 9))), tuple[tuple[A32, A64, C64], NoTangent])
    assert_type(sr.pullback(sr.concatenate, (x64, x32))(np.ones((4, 3))), tuple[tuple[A64, A32]])
    # one dtype: the result keeps it exactly, as before
    same, back_same = sr.rrule(sr.concatenate, (x64, x64), axis=Val(1))
    assert_type(same, A64)
    assert_type(back_same(same), tuple[tuple[A64, A64]])


def indexing_pullbacks_take_specs(indices: npt.NDArray[np.intp], dy: A64) -> None:
    spec = ArraySpec((5, 3), np.float64)
    assert_type(
        sr.pullback(sr.take, spec, indices, Val(0))(dy),
        tuple[npt.NDArray[np.generic] | NoTangent, NoTangent, NoTangent],
    )
    assert_type(
        sr.pullback(sr.take_along_axis, spec, indices, Val(1))(dy),
        tuple[npt.NDArray[np.generic] | NoTangent, NoTangent, NoTangent],
    )
    assert_type(
        sr.pullback(sr.index_add, spec, indices, ArraySpec((2, 3), np.float64))(dy),
        tuple[npt.NDArray[np.generic] | NoTangent, NoTangent, npt.NDArray[np.generic] | NoTangent],
    )
