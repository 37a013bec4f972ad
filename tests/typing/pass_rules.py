"""``rrule``/``frule`` types: the primal exactly as the op's, the pullback of the call's arity.

A dense cotangent gives dense tangents of each input's dtype; a lazy cotangent (``Fill``,
``ZeroTangent``, ``Thunk``) gives the same entries widened to ``sr.Tangent``; ``Val`` (and
count) arguments get ``NoTangent``. Type-checked only, never executed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast, Any, TypeAlias, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Fill, NoTangent, Val, ZeroTangent

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
C64 = npt.NDArray[np.complex64]
C128 = npt.NDArray[np.complex128]
I64 = npt.NDArray[np.int64]
Generic = npt.NDArray[np.generic]
T32: TypeAlias = sr.Tangent[np.float32]


def kron(a: F32, b: F32, dy: F64, fill: Fill) -> None:
    y, back = sr.rrule(sr.kron, a, b)
    assert_type(y, F32)
    assert_type(back(dy), tuple[F32, F32])
    da, db = back(dy)
    assert_type(da, F32)
    assert_type(db, F32)
    assert_type(back(fill), tuple[sr.Fill[tuple[Any, ...], np.float32], sr.Fill[tuple[Any, ...], np.float32]])
    assert_type(back(ZeroTangent()), tuple[sr.ZeroTangent, sr.ZeroTangent])
    # SPEC section 7's spelling of the same type
    spelled: tuple[F32, Callable[..., tuple[F32, F32]]] = sr.rrule(sr.kron, a, b)
    assert_type(spelled[0], F32)

    y2, dy2 = sr.frule(sr.kron, (a, ZeroTangent()), a, b)
    assert_type(y2, F32)
    assert_type(dy2, npt.NDArray[np.float32] | sr.Fill[tuple[int, ...], np.float32] | sr.ZeroTangent)
    assert_type(sr.frule(sr.kron, (ZeroTangent(), NoTangent()), a, b), tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | sr.Fill[tuple[int, ...], np.float32] | sr.ZeroTangent])


def kron_complex(z: C128, dy: C128) -> None:
    y, back = sr.rrule(sr.kron, z, z)
    assert_type(y, C128)
    assert_type(back(dy), tuple[C128, C128])
    # a Python scalar operand: its tangent is a 0-d array (NoTangent for an int)
    y2, back2 = sr.rrule(sr.kron, 2.0, z)
    assert_type(y2, Generic)
    assert_type(back2(dy), tuple[Generic | NoTangent, Generic | NoTangent])
    assert_type(sr.frule(sr.kron, (1.0, dy), 2.0, z)[0], Generic)


def concatenate(a: F32, b: F32, dy: F32) -> None:
    y, back = sr.rrule(sr.concatenate, (a, b), axis=Val(0))
    assert_type(y, F32)
    (das,) = back(dy)
    assert_type(das, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]])
    assert_type(back(sr.Thunk(lambda: dy)), tuple[tuple[npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent, npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent]])
    # an axis given positionally gets its own NoTangent entry
    assert_type(sr.rrule(sr.concatenate, (a, b), Val(0))[1](dy), tuple[tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]], sr.NoTangent])
    assert_type(sr.rrule(sr.stack, [a, b])[1](dy), tuple[tuple[F32, ...]])
    assert_type(sr.rrule(sr.stack, [a, b], Val(1))[1](dy), tuple[tuple[F32, ...], NoTangent])
    assert_type(sr.rrule(sr.hstack, (a, b))[1](dy), tuple[tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]])
    assert_type(sr.rrule(sr.vstack, (a, b))[1](dy), tuple[tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]])

    assert_type(sr.frule(sr.concatenate, ((a, b),), (a, b), axis=Val(0)), tuple[F32, F32])
    assert_type(sr.frule(sr.concatenate, (ZeroTangent(), NoTangent()), (a, b), Val(0)), tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent])
    assert_type(sr.frule(sr.stack, ((a, b),), (a, b)), tuple[F32, F32])
    assert_type(sr.frule(sr.hstack, ((a, b),), (a, b)), tuple[F32, F32])
    assert_type(sr.frule(sr.vstack, ((a, b),), (a, b)), tuple[F32, F32])


def cat(a: F32, dy: F32, arrays: list[F32]) -> None:
    assert_type(sr.rrule(sr.cat, a, dims=Val(0))[1](dy), tuple[F32])
    assert_type(sr.rrule(sr.cat, a, a, dims=Val(0))[1](dy), tuple[F32, F32])
    assert_type(sr.rrule(sr.cat, a, a, a, dims=Val((0, 1)))[1](dy), tuple[F32, F32, F32])
    assert_type(sr.rrule(sr.cat, a, a, a, a, dims=Val(1))[1](dy), tuple[F32, F32, F32, F32])
    assert_type(sr.rrule(sr.cat, a, a, a, a, a, dims=Val(1))[1](dy), tuple[F32, ...])
    assert_type(sr.rrule(sr.cat, *arrays, dims=Val(0))[1](dy), tuple[F32, ...])
    y, back = sr.rrule(sr.cat, a, 2.0, 1, dims=Val(0))
    assert_type(y, Generic)
    assert_type(back(dy), tuple[Generic | NoTangent, ...])

    assert_type(sr.frule(sr.cat, (a, a), a, a, dims=Val(0)), tuple[F32, F32])
    assert_type(sr.frule(sr.cat, (a, a, a, a, a), a, a, a, a, a, dims=Val(0)), tuple[F32, F32])


def repeat(x: F32, z: C64, dy: F32, dz: C64, counts: I64, fill: Fill) -> None:
    # Val counts: (dx, NoTangent())
    y, back = sr.rrule(sr.repeat, x, Val(3), axis=Val(0))
    assert_type(y, F32)
    dx, dcounts = back(dy)
    assert_type(dx, F32)
    assert_type(dcounts, NoTangent)
    assert_type(back(fill), tuple[sr.Fill[tuple[Any, ...], np.float32], sr.NoTangent])
    # counts array (data), axis positional
    assert_type(sr.rrule(sr.repeat, x, counts, axis=Val(0))[1](dy), tuple[F32, NoTangent])
    # a plain int (a dynamic static argument) only through an op typed as a plain Callable
    dynamic = cast("Callable[..., F32]", sr.repeat)  # cast: pyright narrows an annotated local to the op
    assert_type(sr.rrule(dynamic, x, 3), tuple[F32, Callable[[object], tuple[object, ...]]])
    assert_type(sr.rrule(sr.repeat, z, Val(2), Val(0))[1](dz), tuple[C64, NoTangent, NoTangent])
    # inner/outer by keyword only: one entry
    y2, back2 = sr.rrule(sr.repeat, z, inner=Val((1, 2)), outer=Val(2))
    assert_type(y2, np.ndarray[tuple[int, ...], np.dtype[np.complex64]])
    assert_type(back2(dz), tuple[C64])
    assert_type(sr.rrule(sr.repeat, x, outer=Val(2))[1](dy), tuple[F32])
    # tile: reps positional gets NoTangent, by keyword no entry
    assert_type(sr.rrule(sr.tile, x, Val((2, 1)))[1](dy), tuple[F32, NoTangent])
    assert_type(sr.rrule(sr.tile, x, reps=Val(2))[1](dy), tuple[F32])

    # frule: dense for a dense tangent; a Fill or ZeroTangent tangent may stay lazy
    assert_type(sr.frule(sr.repeat, (x, NoTangent()), x, Val(3)), tuple[np.ndarray[tuple[int], np.dtype[np.float32]], np.ndarray[tuple[int], np.dtype[np.float32]]])
    assert_type(sr.frule(sr.repeat, (x, NoTangent(), NoTangent()), x, Val(3), Val(0)), tuple[F32, F32])
    assert_type(sr.frule(sr.repeat, (fill, NoTangent()), x, Val(3)), tuple[np.ndarray[tuple[int], np.dtype[np.float32]], np.ndarray[tuple[int], np.dtype[np.float32]] | sr.Fill[tuple[int], np.float32] | sr.ZeroTangent])
    assert_type(sr.frule(sr.repeat, (z,), z, inner=Val(2)), tuple[C64, C64])
    assert_type(sr.frule(sr.repeat, (ZeroTangent(),), z, outer=Val(2)), tuple[npt.NDArray[np.complex64], npt.NDArray[np.complex64] | sr.Fill[tuple[int, ...], np.complex64] | sr.ZeroTangent])
    assert_type(sr.frule(sr.tile, (x, NoTangent()), x, Val(2)), tuple[F32, F32])
    assert_type(sr.frule(sr.tile, (x,), x, reps=Val(2)), tuple[F32, F32])


def integer_and_mixed(n: I64, a: F32, b: F64, z: C64, dy: F64) -> None:
    # Integer inputs: the primal is exact; each entry may be NoTangent (it is, at run time).
    y, back = sr.rrule(sr.repeat, n, Val(2))
    assert_type(y, np.ndarray[tuple[int], np.dtype[np.int64]])
    assert_type(back(dy), tuple[I64 | NoTangent, NoTangent])
    assert_type(sr.rrule(sr.kron, n, n)[1](dy), tuple[I64 | NoTangent, I64 | NoTangent])
    assert_type(sr.frule(sr.concatenate, ((n, n),), (n, n)), tuple[npt.NDArray[np.int64], npt.NDArray[np.int64] | sr.Fill[tuple[Any, ...], np.int64] | sr.ZeroTangent | sr.NoTangent])
    # Mixed floating dtypes: mypy's join of the two is the dtype parameter; each tangent has
    # its own input's dtype at run time, a subtype of the join.
    ya, backa = sr.rrule(sr.kron, a, z)
    da, dz = backa(dy)
    assert isinstance(ya, np.ndarray) and isinstance(da, np.ndarray) and isinstance(dz, np.ndarray)
