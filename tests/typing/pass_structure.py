"""flip, roll, permute_dims, transpose, reshape: exact types for the ops and their rules.

The ops take ``Val`` statics or plain ints (dynamic); ``rrule``/``frule`` take ``Val`` only. A
dense cotangent gives dense tangents of ``x``'s dtype, a lazy one ``sr.Tangent``; each static
given positionally adds a ``NoTangent`` entry. Type-checked only, never executed.
"""

from __future__ import annotations

from typing import Any, TypeAlias, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Fill, NoTangent, Val, ZeroTangent

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
C64 = npt.NDArray[np.complex64]
I64 = npt.NDArray[np.int64]
T32: TypeAlias = sr.Tangent[np.float32]
LooseI64: TypeAlias = I64 | Fill | ZeroTangent | NoTangent


def ops(a: F32, z: C64, n: I64) -> None:
    assert_type(sr.flip(a), F32)
    assert_type(sr.flip(z, Val(0)), C64)
    assert_type(sr.flip(n, axis=Val((0, 1))), I64)
    assert_type(sr.flip(a, 1), F32)
    assert_type(sr.roll(a, Val(2)), F32)
    assert_type(sr.roll(z, Val((1, -1)), axis=Val((0, 1))), C64)
    assert_type(sr.roll(n, 3, 0), I64)
    assert_type(sr.permute_dims(a, Val((1, 0))), F32)
    assert_type(sr.permute_dims(n, (1, 0)), I64)
    assert_type(sr.transpose(z), C64)
    assert_type(sr.transpose(a, Val((1, 0))), F32)
    assert_type(sr.swapaxes(z, Val(0), Val(-1)), C64)
    assert_type(sr.swapaxes(n, 1, 0), I64)
    assert_type(sr.reshape(a, Val((2, -1))), np.ndarray[tuple[int, int], np.dtype[np.float32]])
    assert_type(sr.reshape(z, Val(6)), np.ndarray[tuple[int], np.dtype[np.complex64]])
    assert_type(sr.reshape(n, (3, 2)), I64)


def flip(x: F32, dy: F64, fill: Fill) -> None:
    y, back = sr.rrule(sr.flip, x)
    assert_type(y, F32)
    (dx,) = back(dy)
    assert_type(dx, F32)
    assert_type(back(fill), tuple[sr.Fill[tuple[Any, ...], np.float32]])
    assert_type(sr.rrule(sr.flip, x, axis=Val(0))[1](dy), tuple[F32])
    assert_type(sr.rrule(sr.flip, x, Val((0, 1)))[1](dy), tuple[F32, NoTangent])
    assert_type(sr.rrule(sr.flip, x, None)[1](ZeroTangent()), tuple[sr.ZeroTangent, sr.NoTangent])
    assert_type(sr.frule(sr.flip, (x,), x), tuple[F32, F32])
    assert_type(sr.frule(sr.flip, (x, NoTangent()), x, Val(1)), tuple[F32, F32])
    assert_type(sr.frule(sr.flip, (fill,), x, axis=Val(1)), tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent])


def roll(x: F32, z: C64, dy: F32, dz: C64) -> None:
    y, back = sr.rrule(sr.roll, x, Val(2))
    assert_type(y, F32)
    dx, dshift = back(dy)
    assert_type(dx, F32)
    assert_type(dshift, NoTangent)
    assert_type(sr.rrule(sr.roll, z, Val((1, 2)), axis=Val((0, 1)))[1](dz), tuple[C64, NoTangent])
    assert_type(sr.rrule(sr.roll, z, Val(1), Val(0))[1](dz), tuple[C64, NoTangent, NoTangent])
    assert_type(sr.rrule(sr.roll, x, shift=Val(1), axis=None)[1](dy), tuple[F32])
    assert_type(sr.rrule(sr.roll, x, Val(1))[1](ZeroTangent()), tuple[sr.ZeroTangent, sr.NoTangent])
    assert_type(sr.frule(sr.roll, (x, NoTangent()), x, Val(1)), tuple[F32, F32])
    assert_type(sr.frule(sr.roll, (x, NoTangent(), NoTangent()), x, Val(1), Val(0)), tuple[F32, F32])
    assert_type(sr.frule(sr.roll, (ZeroTangent(),), x, shift=Val(1)), tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent])


def permutations(x: F32, dy: F32) -> None:
    y, back = sr.rrule(sr.permute_dims, x, Val((1, 0)))
    assert_type(y, F32)
    assert_type(back(dy), tuple[F32, NoTangent])
    assert_type(sr.rrule(sr.permute_dims, x, axes=Val((1, 0)))[1](dy), tuple[F32])
    assert_type(sr.rrule(sr.transpose, x)[1](dy), tuple[F32])
    assert_type(sr.rrule(sr.transpose, x, Val((1, 0)))[1](dy), tuple[F32, NoTangent])
    assert_type(sr.rrule(sr.transpose, x, axes=None)[1](Fill(1.0, (2, 2))), tuple[sr.Fill[tuple[Any, ...], np.float32]])
    assert_type(sr.frule(sr.permute_dims, (x, NoTangent()), x, Val((1, 0))), tuple[F32, F32])
    assert_type(sr.frule(sr.transpose, (x,), x), tuple[F32, F32])
    assert_type(sr.frule(sr.transpose, (ZeroTangent(), NoTangent()), x, Val((1, 0))), tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent])


def reshape(x: F32, dy: F32, n: I64, dn: F64) -> None:
    y, back = sr.rrule(sr.reshape, x, Val((2, -1)))
    assert_type(y, np.ndarray[tuple[int, int], np.dtype[np.float32]])
    assert_type(back(dy), tuple[F32, NoTangent])
    assert_type(sr.rrule(sr.reshape, x, shape=Val(6))[1](dy), tuple[F32])
    assert_type(sr.frule(sr.reshape, (x, NoTangent()), x, Val(6)), tuple[np.ndarray[tuple[int], np.dtype[np.float32]], np.ndarray[tuple[int], np.dtype[np.float32]]])
    assert_type(sr.frule(sr.reshape, (Fill(1.0, 6),), x, shape=Val(6)), tuple[np.ndarray[tuple[int], np.dtype[np.float32]], np.ndarray[tuple[int], np.dtype[np.float32]] | sr.Fill[tuple[int], np.float32] | sr.ZeroTangent])
    # integer inputs: NoTangent is possible, so the entries are loose
    y_int, back_int = sr.rrule(sr.reshape, n, Val(6))
    assert_type(y_int, I64)
    assert_type(back_int(dn), tuple[I64 | NoTangent, NoTangent])
    assert_type(sr.rrule(sr.flip, n)[1](ZeroTangent()), tuple[sr.ZeroTangent | sr.NoTangent])
    assert_type(sr.frule(sr.roll, (n, NoTangent()), n, Val(1))[1], npt.NDArray[np.int64] | sr.Fill[tuple[Any, ...], np.int64] | sr.ZeroTangent | sr.NoTangent)
