"""The indexing ops' result types (SPEC sections 11 and 12): a getindex by slices only keeps
x's shape type, ints and None give NumPy's rank (``ndim(x)`` minus the ints plus the Nones, for
indices of up to three entries; longer ones an untracked rank); take's is ``ndim(indices)`` for
``axis=None`` and ``ndim(x) - 1 + ndim(indices)`` along an axis; take_along_axis and index_add
keep x's shape type. An unknown-rank argument gives an unknown-rank result.

Type-checked only (``tests/test_typing.py`` runs mypy and basedpyright on it); never
executed, never collected by pytest.
"""

from __future__ import annotations

from types import EllipsisType
from typing import Any, TypeAlias, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import NoTangent, Val
from stablerules.rules.indexing import Basic, Slices

f32: TypeAlias = np.float32
A0: TypeAlias = np.ndarray[tuple[()], np.dtype[f32]]
A1: TypeAlias = np.ndarray[tuple[int], np.dtype[f32]]
A2: TypeAlias = np.ndarray[tuple[int, int], np.dtype[f32]]
A3: TypeAlias = np.ndarray[tuple[int, int, int], np.dtype[f32]]
A4: TypeAlias = np.ndarray[tuple[int, int, int, int], np.dtype[f32]]
A5: TypeAlias = np.ndarray[tuple[int, int, int, int, int], np.dtype[f32]]
A6: TypeAlias = np.ndarray[tuple[int, int, int, int, int, int], np.dtype[f32]]
T3 = np.ndarray[tuple[int, int, int], np.dtype[np.complex128]]
AnyRank32 = np.ndarray[tuple[int, ...], np.dtype[f32]]  # a rank the types do not follow
I0: TypeAlias = np.ndarray[tuple[()], np.dtype[np.int64]]
I1: TypeAlias = np.ndarray[tuple[int], np.dtype[np.int64]]
I2: TypeAlias = np.ndarray[tuple[int, int], np.dtype[np.int64]]
I3: TypeAlias = np.ndarray[tuple[int, int, int], np.dtype[np.int64]]


def getindex(a: A2, a6: A6, z: T3, u: npt.NDArray[f32]) -> None:
    # slices (and ...) only: x's shape type
    kept: sr.StaticIndex[Slices] = sr.ix[1:-1, ::2]  # the public kinds still annotate
    basic: sr.StaticIndex[Basic] = sr.ix[..., 0]
    del kept, basic
    assert_type(sr.ix[...], sr.StaticIndex[EllipsisType])
    assert_type(sr.getindex(a, sr.ix[1:-1, ::2]), A2)
    assert_type(sr.getindex(z, sr.ix[::-1]), T3)
    assert_type(sr.getindex(a, sr.ix[...]), A2)
    assert_type(sr.getindex(a, sr.ix[()]), A2)
    assert_type(sr.getindex(u, sr.ix[1:]), npt.NDArray[f32])
    # ints and None: ndim(x) - ints + Nones
    assert_type(sr.getindex(a, sr.ix[:, None, -1]), A2)
    assert_type(sr.getindex(a, sr.ix[0]), A1)
    assert_type(sr.getindex(a, sr.ix[0, 1]), A0)
    assert_type(sr.getindex(a, sr.ix[None]), A3)
    assert_type(sr.getindex(a, sr.ix[..., None]), A3)
    assert_type(sr.getindex(a, sr.ix[None, None, None]), A5)
    assert_type(sr.getindex(a, sr.ix[1, None, None]), A3)
    assert_type(sr.getindex(z, sr.ix[..., 0]), np.ndarray[tuple[int, int], np.dtype[np.complex128]])
    assert_type(sr.getindex(z, sr.ix[0, 1, 2]), np.ndarray[tuple[()], np.dtype[np.complex128]])
    assert_type(sr.getindex(a6, sr.ix[0, None]), A6)
    assert_type(sr.getindex(a6, sr.ix[None]), AnyRank32)  # past rank 6
    assert_type(sr.getindex(a, sr.ix[0, :, None, :]), AnyRank32)  # past three entries
    assert_type(sr.getindex(u, sr.ix[0, None]), npt.NDArray[f32])  # an unknown rank stays unknown
    y3, back3 = sr.rrule(sr.getindex, a6, sr.ix[0, 1, 2])
    assert_type(y3, A3)
    assert_type(back3(y3), tuple[A6, NoTangent])
    y, back = sr.rrule(sr.getindex, a, sr.ix[1:, ::2])
    assert_type(y, A2)
    assert_type(back(y), tuple[A2, NoTangent])  # a dense cotangent: a dense tangent
    assert_type(back(sr.Fill(f32(1), y.shape, f32)), tuple[A2 | sr.Fill[tuple[int, int], f32], NoTangent])


def take(a: A2, a5: A5, i0: I0, i1: I1, i2: I2, i3: I3, rows: npt.NDArray[np.int64], u: npt.NDArray[f32]) -> None:
    # along an axis: ndim(x) - 1 + ndim(indices)
    assert_type(sr.take(a, i1, Val(0)), A2)
    assert_type(sr.take(a, i2, Val(1)), A3)
    assert_type(sr.take(a, i3, Val(0)), A4)
    assert_type(sr.take(a, i0, Val(0)), A1)
    assert_type(sr.take(a, 3, Val(1)), A1)  # a Python int is a 0-d index
    assert_type(sr.take(a, np.int64(3), Val(1)), A1)
    assert_type(sr.take(a, [0, 2, 2], Val(0)), A2)  # a list of ints is 1-D
    assert_type(sr.take(a5, i2, Val(4)), A6)
    assert_type(sr.take(a5, i3, Val(4)), AnyRank32)  # past rank 6
    # flattened (axis=None): ndim(indices)
    assert_type(sr.take(a, i2), A2)
    assert_type(sr.take(a5, i1), A1)
    assert_type(sr.take(a, 0), A0)
    assert_type(sr.take(a, i3, None), A3)
    # unknown ranks stay unknown
    assert_type(sr.take(a, rows, Val(0)), npt.NDArray[f32])
    assert_type(sr.take(a, rows), npt.NDArray[f32])
    assert_type(sr.take(u, i1, Val(0)), npt.NDArray[f32])
    keep: Any = sr.take(a, rows, Val(0), unique=Val(True), sorted=Val(True))
    del keep
    assert_type(sr.take(a, i2, Val(0), unique=Val(True), sorted=Val(True)), A3)


def take_rules(a: A3, i2: I2) -> None:
    y, back = sr.rrule(sr.take, a, i2, Val(1))
    assert_type(y, A4)
    assert_type(back(y), tuple[A3, NoTangent, NoTangent])
    y1, back1 = sr.rrule(sr.take, a, i2)
    assert_type(y1, A2)
    assert_type(back1(y1), tuple[A3, NoTangent])
    assert_type(sr.pullback(sr.take, a, 1, Val(0))(np.zeros((3, 3), f32)), tuple[A3, NoTangent, NoTangent])
    y2, ydot = sr.frule(sr.take, (a, NoTangent(), NoTangent()), a, i2, Val(2))
    assert_type(y2, A4)
    assert_type(ydot, A4)


def others(a: A2, rows: npt.NDArray[np.int64]) -> None:
    assert_type(sr.take_along_axis(a, rows, Val(1)), A2)
    assert_type(sr.take_along_axis(a, rows, None), A1)
    assert_type(sr.index_add(a, rows, a), A2)


def index_add_scalars(a: A2, z: T3, rows: I1) -> None:
    # a Python number as values: x's type; its tangent is 0-d of NumPy's dtype for it
    assert_type(sr.index_add(a, rows, 1.0), A2)
    assert_type(sr.index_add(a, rows, 2, Val(1)), A2)
    y, back = sr.rrule(sr.index_add, a, rows, 1.0)
    assert_type(y, A2)
    assert_type(back(y), tuple[A2, NoTangent, np.ndarray[tuple[()], np.dtype[np.float64]]])
    assert_type(back(sr.ZeroTangent()), tuple[sr.ZeroTangent, NoTangent, sr.ZeroTangent])
    yi, back_int = sr.rrule(sr.index_add, a, rows, 3)  # an int is not differentiable
    assert_type(back_int(yi), tuple[A2, NoTangent, NoTangent])
    yz, back_z = sr.rrule(sr.index_add, z, rows, 1j, Val(2))
    assert_type(back_z(yz), tuple[T3, NoTangent, np.ndarray[tuple[()], np.dtype[np.complex128]], NoTangent])
    y2, ydot = sr.frule(sr.index_add, (a, NoTangent(), 1.0), a, rows, 1.0)
    assert_type(ydot, A2)
