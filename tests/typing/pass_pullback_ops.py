"""``sr.pullback`` for flip, roll, permute_dims, transpose, reshape, broadcast_to, sum, mean,
pad and split: the pullback ``rrule`` would return, with the same types (arity of the call's
positional arguments, dense for a dense cotangent, loose for integer inputs), and loosely
typed entries for ``ArraySpec`` arguments. Type-checked only, never executed.
"""

from __future__ import annotations

from typing import Any, TypeAlias, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import ArraySpec, Fill, NoTangent, Val, ZeroTangent

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
C64 = npt.NDArray[np.complex64]
I64 = npt.NDArray[np.int64]
T32: TypeAlias = sr.Tangent[np.float32]
Loose = npt.NDArray[np.generic] | NoTangent
LooseI64: TypeAlias = I64 | Fill | ZeroTangent | NoTangent
ScalarTangent: TypeAlias = npt.NDArray[np.inexact] | ZeroTangent | NoTangent


def views(x: F32, dy: F32, z: C64, dz: C64, n: I64, dn: F64) -> None:
    assert_type(sr.pullback(sr.flip, x)(dy), tuple[F32])
    assert_type(sr.pullback(sr.flip, x, Val(0))(dy), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.flip, x, axis=Val((0, 1)))(Fill(1.0, (2, 3))), tuple[sr.Fill[tuple[Any, ...], np.float32]])
    assert_type(sr.pullback(sr.flip, n, None)(dn), tuple[I64 | NoTangent, NoTangent])
    assert_type(sr.pullback(sr.roll, z, Val(1))(dz), tuple[C64, NoTangent])
    assert_type(sr.pullback(sr.roll, z, Val(1), Val(0))(dz), tuple[C64, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.roll, x, shift=Val((1, 2)), axis=Val((0, 1)))(dy), tuple[F32])
    assert_type(sr.pullback(sr.roll, n, Val(1))(ZeroTangent()), tuple[sr.ZeroTangent | sr.NoTangent, sr.NoTangent])
    assert_type(sr.pullback(sr.permute_dims, x, Val((1, 0)))(dy), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.permute_dims, x, axes=Val((1, 0)))(dy), tuple[F32])
    assert_type(sr.pullback(sr.transpose, x)(dy), tuple[F32])
    assert_type(sr.pullback(sr.transpose, n, Val((1, 0)))(dn), tuple[I64 | NoTangent, NoTangent])
    assert_type(sr.pullback(sr.reshape, x, Val((2, -1)))(dy), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.reshape, x, shape=Val(6))(ZeroTangent()), tuple[sr.ZeroTangent])
    assert_type(sr.pullback(sr.reshape, n, shape=Val(6))(dn), tuple[I64 | NoTangent])


def reductions(x: F32, dy: F32, n: I64, dn: F64) -> None:
    assert_type(sr.pullback(sr.broadcast_to, x, Val((4, 3)))(dy), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.broadcast_to, x, shape=Val((4, 3)))(dy), tuple[F32])
    assert_type(sr.pullback(sr.broadcast_to, n, Val((4, 3)))(dn), tuple[I64 | NoTangent, NoTangent])
    assert_type(sr.pullback(sr.sum, x)(dy), tuple[sr.Fill[tuple[Any, ...], np.float32]])
    assert_type(sr.pullback(sr.sum, x, Val(0))(dy), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.mean, x, Val(0), Val(True))(dy), tuple[F32, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.mean, x, axis=Val((0, 1)), keepdims=Val(False))(Fill(1.0, ())), tuple[sr.Fill[tuple[Any, ...], np.float32]])
    # an integer input's sum and mean are not differentiable: NoTangent exactly
    assert_type(sr.pullback(sr.sum, n)(dn), tuple[NoTangent])
    assert_type(sr.pullback(sr.mean, n, None)(dn), tuple[NoTangent, NoTangent])
    assert_type(sr.pullback(sr.sum, n, Val(0), Val(True))(dn), tuple[NoTangent, NoTangent, NoTangent])


def pad_split(x: F32, dy: F32, n: I64, dn: F64) -> None:
    assert_type(sr.pullback(sr.pad, x, Val(1))(dy), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.pad, x, Val(1), constant_values=2.0)(dy), tuple[F32, NoTangent])
    assert_type(
        sr.pullback(sr.pad, x, Val((1, 0, 0, 2)), 2.0)(dy),
        tuple[F32, NoTangent, npt.NDArray[np.inexact] | NoTangent],
    )
    assert_type(sr.pullback(sr.pad, x, Val(1), 2.0)(ZeroTangent()), tuple[sr.ZeroTangent, sr.NoTangent, npt.NDArray[np.inexact] | sr.ZeroTangent | sr.NoTangent])
    assert_type(sr.pullback(sr.pad, n, Val(1))(dn), tuple[I64 | NoTangent, NoTangent])
    assert_type(sr.pullback(sr.split, x, Val(2))((dy, dy)), tuple[F32, NoTangent])
    assert_type(sr.pullback(sr.split, x, Val((1, 3)), Val(1))((dy, dy, dy)), tuple[F32, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.split, x, indices_or_sections=Val(2))((dy, ZeroTangent())), tuple[npt.NDArray[np.float32] | sr.Fill[tuple[Any, ...], np.float32] | sr.ZeroTangent])
    assert_type(sr.pullback(sr.split, n, Val(2), axis=Val(0))((dn, dn)), tuple[I64 | NoTangent, NoTangent])


def specs(a: F32) -> None:
    spec = ArraySpec((4, 6), np.float32)
    assert_type(sr.pullback(sr.flip, spec)(a), tuple[Loose])
    assert_type(sr.pullback(sr.flip, spec, Val(0))(a), tuple[Loose, NoTangent])
    assert_type(sr.pullback(sr.roll, spec, Val(1))(a), tuple[Loose, NoTangent])
    assert_type(sr.pullback(sr.roll, spec, Val(1), Val(0))(a), tuple[Loose, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.roll, spec, shift=Val(1))(a), tuple[Loose])
    assert_type(sr.pullback(sr.permute_dims, spec, Val((1, 0)))(a), tuple[Loose, NoTangent])
    assert_type(sr.pullback(sr.permute_dims, spec, axes=Val((1, 0)))(a), tuple[Loose])
    assert_type(sr.pullback(sr.transpose, spec)(a), tuple[Loose])
    assert_type(sr.pullback(sr.reshape, spec, Val(24))(a), tuple[Loose, NoTangent])
    assert_type(sr.pullback(sr.broadcast_to, spec, shape=Val((2, 4, 6)))(a), tuple[Loose])
    assert_type(sr.pullback(sr.sum, spec)(a), tuple[Loose])
    assert_type(sr.pullback(sr.mean, spec, Val(0))(a), tuple[Loose, NoTangent])
    assert_type(sr.pullback(sr.sum, spec, Val(0), Val(True))(a), tuple[Loose, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.pad, spec, Val(1))(a), tuple[Loose, NoTangent])
    assert_type(
        sr.pullback(sr.pad, spec, Val(1), 0.5)(a), tuple[Loose, NoTangent, npt.NDArray[np.inexact] | NoTangent]
    )
    assert_type(sr.pullback(sr.split, spec, Val(2))((a, a)), tuple[Loose, NoTangent])
    assert_type(sr.pullback(sr.split, spec, Val(2), Val(1))((a, a)), tuple[Loose, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.split, spec, indices_or_sections=Val(2))((a, a)), tuple[Loose])

