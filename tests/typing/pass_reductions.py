"""``broadcast_to``, ``sum``, ``mean``, ``pad``, ``split``: the ops' and the rules' exact types.

Dense cotangents give dense tangents of the input's dtype, lazy ones ``sr.Tangent``; static
arguments given positionally get ``NoTangent``; an integer input's sum is an integer array
and its mean float64, with ``NoTangent`` tangents; ``split`` returns a tuple and its pullback
takes a tuple. Type-checked only, never executed.
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
I32 = npt.NDArray[np.int32]
Integers = npt.NDArray[np.integer]
T32: TypeAlias = sr.Tangent[np.float32]
T64: TypeAlias = sr.Tangent[np.float64]


def flags() -> None:
    assert_type(Val(True), Val[bool])
    assert_type(Val(False).value, bool)
    assert_type(Val(3), Val[int])


def broadcast(x: F32, dy: F32, fill: Fill) -> None:
    assert_type(sr.broadcast_to(x, Val((4, 3))), np.ndarray[tuple[int, int], np.dtype[np.float32]])
    assert_type(sr.broadcast_to(x, (4, 3)), F32)  # a plain tuple: the forward's convenience
    y, back = sr.rrule(sr.broadcast_to, x, Val((4, 3)))
    assert_type(y, np.ndarray[tuple[int, int], np.dtype[np.float32]])
    assert_type(back(dy), tuple[F32, NoTangent])
    assert_type(back(fill), tuple[sr.Fill[tuple[Any, ...], np.float32], sr.NoTangent])
    assert_type(sr.rrule(sr.broadcast_to, x, shape=Val((4, 3)))[1](dy), tuple[F32])
    assert_type(sr.frule(sr.broadcast_to, (x, NoTangent()), x, Val((4, 3))), tuple[np.ndarray[tuple[int, int], np.dtype[np.float32]], np.ndarray[tuple[int, int], np.dtype[np.float32]]])
    assert_type(sr.frule(sr.broadcast_to, (ZeroTangent(),), x, shape=Val((4, 3))), tuple[np.ndarray[tuple[int, int], np.dtype[np.float32]], np.ndarray[tuple[int, int], np.dtype[np.float32]] | sr.Fill[tuple[int, int], np.float32] | sr.ZeroTangent])


def sums(x: F64, z: C64, i: I32, dy: F64) -> None:
    assert_type(sr.sum(x), np.ndarray[tuple[()], np.dtype[np.float64]])
    assert_type(sr.sum(z, Val(0), Val(True)), np.ndarray[tuple[int, ...], np.dtype[np.complex64]])
    assert_type(sr.mean(x, axis=Val((0, 1)), keepdims=Val(False)), F64)
    assert_type(sr.sum(i), np.ndarray[tuple[()], np.dtype[np.integer]])
    assert_type(sr.mean(i, Val(1)), F64)
    y, back = sr.rrule(sr.sum, x, Val((0, 1)), Val(True))
    assert_type(y, F64)
    assert_type(back(dy), tuple[F64, NoTangent, NoTangent])
    assert_type(back(ZeroTangent()), tuple[sr.ZeroTangent, sr.NoTangent, sr.NoTangent])
    assert_type(sr.rrule(sr.mean, x, axis=Val(0))[1](dy), tuple[F64])
    assert_type(sr.rrule(sr.mean, x, Val(0), keepdims=Val(True))[1](dy), tuple[F64, NoTangent])
    integer_sum, integer_back = sr.rrule(sr.sum, i)
    assert_type(integer_sum, Integers)
    assert_type(integer_back(dy), tuple[NoTangent])
    assert_type(sr.rrule(sr.mean, i, Val(0))[0], F64)
    assert_type(sr.frule(sr.mean, (x,), x), tuple[np.ndarray[tuple[()], np.dtype[np.float64]], np.ndarray[tuple[()], np.dtype[np.float64]]])
    assert_type(sr.frule(sr.sum, (ZeroTangent(), NoTangent()), x, Val(1)), tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | sr.Fill[tuple[int, ...], np.float64] | sr.ZeroTangent])
    assert_type(sr.frule(sr.sum, (NoTangent(),), i), tuple[Integers, NoTangent])


def pads(x: F32, dy: F32) -> None:
    assert_type(sr.pad(x, Val(1)), F32)
    assert_type(sr.pad(x, Val((1, 0, 2, 2)), 0.5), F32)
    y, back = sr.rrule(sr.pad, x, Val(1))
    assert_type(y, F32)
    assert_type(back(dy), tuple[F32, NoTangent])
    assert_type(sr.rrule(sr.pad, x, Val(1), constant_values=2.0)[1](dy), tuple[F32, NoTangent])
    _, back_constant = sr.rrule(sr.pad, x, Val(1), 2.0)
    assert_type(back_constant(dy), tuple[F32, NoTangent, npt.NDArray[np.inexact] | NoTangent])
    assert_type(sr.frule(sr.pad, (x, NoTangent()), x, Val(1)), tuple[F32, F32])
    assert_type(sr.frule(sr.pad, (ZeroTangent(), NoTangent(), 1.0), x, Val(1), 2.0), tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent])


def splits(x: F32, dy: F32) -> None:
    assert_type(sr.split(x, Val(2)), tuple[F32, ...])
    parts, back = sr.rrule(sr.split, x, Val(2))
    assert_type(parts, tuple[F32, ...])
    assert_type(back((dy, dy)), tuple[F32, NoTangent])
    assert_type(back((dy, ZeroTangent())), tuple[npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent, sr.NoTangent])
    assert_type(back(ZeroTangent()), tuple[sr.ZeroTangent, sr.NoTangent])
    assert_type(sr.rrule(sr.split, x, Val((1, 3)), Val(1))[1]((dy, dy, dy)), tuple[F32, NoTangent, NoTangent])
    assert_type(sr.rrule(sr.split, x, indices_or_sections=Val(2))[1]((dy, dy)), tuple[F32])
    assert_type(sr.frule(sr.split, (x, NoTangent()), x, Val(2)), tuple[tuple[F32, ...], tuple[F32, ...]])
    tangent = sr.frule(sr.split, (Fill(1.0, (4, 3)), NoTangent()), x, Val(2))[1]
    assert_type(tangent, tuple[npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent, ...] | sr.ZeroTangent)
