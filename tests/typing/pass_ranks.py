"""SPEC section 11, rank-exact types: every bullet, under mypy --strict and basedpyright.

``A<r>`` is a float32 array of rank ``r`` as NumPy's own stubs type one (``np.zeros((2, 3),
np.float32)`` is ``ndarray[tuple[int, int], dtype[float32]]``). Results have NumPy's rank for
input ranks 0 to 6; tangents have their primal's shape type exactly. Type-checked only, never
executed. Where the two checkers must differ, the line says why.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypeVar, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Fill, NoTangent, Val, ZeroTangent

F = TypeVar("F", bound=np.inexact)

S0: TypeAlias = tuple[()]
S1: TypeAlias = tuple[int]
S2: TypeAlias = tuple[int, int]
S3: TypeAlias = tuple[int, int, int]
S4: TypeAlias = tuple[int, int, int, int]
S5: TypeAlias = tuple[int, int, int, int, int]
S6: TypeAlias = tuple[int, int, int, int, int, int]
S7: TypeAlias = tuple[int, int, int, int, int, int, int]
A0: TypeAlias = np.ndarray[S0, np.dtype[np.float32]]
A1: TypeAlias = np.ndarray[S1, np.dtype[np.float32]]
A2: TypeAlias = np.ndarray[S2, np.dtype[np.float32]]
A3: TypeAlias = np.ndarray[S3, np.dtype[np.float32]]
A4: TypeAlias = np.ndarray[S4, np.dtype[np.float32]]
A5: TypeAlias = np.ndarray[S5, np.dtype[np.float32]]
A6: TypeAlias = np.ndarray[S6, np.dtype[np.float32]]
A7: TypeAlias = np.ndarray[S7, np.dtype[np.float32]]
F32 = npt.NDArray[np.float32]
Unknown: TypeAlias = tuple[Any, ...]


def statics() -> None:
    assert_type(Val((7, 1, 10)), Val[tuple[Literal[7], Literal[1], Literal[10]]])
    assert_type(Val(3), Val[int])
    assert_type(Val(True), Val[bool])
    shape: Val[tuple[int, int, int]] = Val((7, 1, 10))  # covariant: literals fit ints


def same_shape(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7) -> None:
    # flip, roll: the input's own shape type
    assert_type(sr.flip(a0), A0)
    assert_type(sr.flip(a1), A1)
    assert_type(sr.roll(a1, Val(1), axis=Val(0)), A1)
    assert_type(sr.flip(a2), A2)
    assert_type(sr.roll(a2, Val(1), axis=Val(0)), A2)
    assert_type(sr.flip(a3), A3)
    assert_type(sr.roll(a3, Val(1), axis=Val(0)), A3)
    assert_type(sr.flip(a4), A4)
    assert_type(sr.roll(a4, Val(1), axis=Val(0)), A4)
    assert_type(sr.flip(a5), A5)
    assert_type(sr.roll(a5, Val(1), axis=Val(0)), A5)
    assert_type(sr.flip(a6), A6)
    assert_type(sr.roll(a6, Val(1), axis=Val(0)), A6)
    # same rank, new extents: repeat along an axis, concatenate, pad, permute_dims, transpose, split's parts
    assert_type(sr.repeat(a1, Val(2), axis=Val(0)), A1)
    assert_type(sr.concatenate((a1, a1), axis=Val(0)), A1)
    assert_type(sr.pad(a1, Val(1)), A1)
    assert_type(sr.transpose(a1), A1)
    assert_type(sr.split(a1, Val(2)), tuple[A1, ...])
    assert_type(sr.kron(a1, a1), A1)
    assert_type(sr.repeat(a2, Val(2), axis=Val(0)), A2)
    assert_type(sr.concatenate((a2, a2), axis=Val(0)), A2)
    assert_type(sr.pad(a2, Val(1)), A2)
    assert_type(sr.transpose(a2), A2)
    assert_type(sr.split(a2, Val(2)), tuple[A2, ...])
    assert_type(sr.kron(a2, a2), A2)
    assert_type(sr.repeat(a3, Val(2), axis=Val(0)), A3)
    assert_type(sr.concatenate((a3, a3), axis=Val(0)), A3)
    assert_type(sr.pad(a3, Val(1)), A3)
    assert_type(sr.transpose(a3), A3)
    assert_type(sr.split(a3, Val(2)), tuple[A3, ...])
    assert_type(sr.kron(a3, a3), A3)
    assert_type(sr.repeat(a4, Val(2), axis=Val(0)), A4)
    assert_type(sr.concatenate((a4, a4), axis=Val(0)), A4)
    assert_type(sr.pad(a4, Val(1)), A4)
    assert_type(sr.transpose(a4), A4)
    assert_type(sr.split(a4, Val(2)), tuple[A4, ...])
    assert_type(sr.kron(a4, a4), A4)
    assert_type(sr.repeat(a5, Val(2), axis=Val(0)), A5)
    assert_type(sr.concatenate((a5, a5), axis=Val(0)), A5)
    assert_type(sr.pad(a5, Val(1)), A5)
    assert_type(sr.transpose(a5), A5)
    assert_type(sr.split(a5, Val(2)), tuple[A5, ...])
    assert_type(sr.kron(a5, a5), A5)
    assert_type(sr.repeat(a6, Val(2), axis=Val(0)), A6)
    assert_type(sr.concatenate((a6, a6), axis=Val(0)), A6)
    assert_type(sr.pad(a6, Val(1)), A6)
    assert_type(sr.transpose(a6), A6)
    assert_type(sr.split(a6, Val(2)), tuple[A6, ...])
    assert_type(sr.kron(a6, a6), A6)
    assert_type(sr.permute_dims(a3, Val((2, 0, 1))), A3)


def rank_from_statics(a0: A0, a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, a7: A7, u: F32) -> None:
    # reshape / broadcast_to: the Val tuple's length (extents int: Val((3, -1)) is 2-D); also for an unknown rank
    assert_type(sr.reshape(a3, Val(())), np.ndarray[S0, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val(())), np.ndarray[S0, np.dtype[np.float32]])
    assert_type(sr.reshape(a3, Val((2,))), np.ndarray[S1, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val((2,))), np.ndarray[S1, np.dtype[np.float32]])
    assert_type(sr.reshape(a3, Val((2, 2))), np.ndarray[S2, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val((2, 2))), np.ndarray[S2, np.dtype[np.float32]])
    assert_type(sr.reshape(a3, Val((2, 2, 2))), np.ndarray[S3, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val((2, 2, 2))), np.ndarray[S3, np.dtype[np.float32]])
    assert_type(sr.reshape(a3, Val((2, 2, 2, 2))), np.ndarray[S4, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val((2, 2, 2, 2))), np.ndarray[S4, np.dtype[np.float32]])
    assert_type(sr.reshape(a3, Val((2, 2, 2, 2, 2))), np.ndarray[S5, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val((2, 2, 2, 2, 2))), np.ndarray[S5, np.dtype[np.float32]])
    assert_type(sr.reshape(a3, Val((2, 2, 2, 2, 2, 2))), np.ndarray[S6, np.dtype[np.float32]])
    assert_type(sr.broadcast_to(u, Val((2, 2, 2, 2, 2, 2))), np.ndarray[S6, np.dtype[np.float32]])
    assert_type(sr.reshape(a2, Val((3, -1))), A2)
    assert_type(sr.reshape(a2, Val(-1)), A1)
    # sum / mean: rank minus the reduced axes, 0 for axis=None, the rank itself with keepdims=Val(True)
    assert_type(sr.sum(a0), A0)
    assert_type(sr.mean(a0, keepdims=Val(True)), A0)
    assert_type(sr.sum(a1), A0)
    assert_type(sr.mean(a1, keepdims=Val(True)), A1)
    assert_type(sr.sum(a1, axis=Val(0)), A0)
    assert_type(sr.mean(a1, axis=Val(-1), keepdims=Val(False)), A0)
    assert_type(sr.sum(a2), A0)
    assert_type(sr.mean(a2, keepdims=Val(True)), A2)
    assert_type(sr.sum(a2, axis=Val(0)), A1)
    assert_type(sr.mean(a2, axis=Val(-1), keepdims=Val(False)), A1)
    assert_type(sr.sum(a2, axis=Val((0, 1))), A0)
    assert_type(sr.sum(a3), A0)
    assert_type(sr.mean(a3, keepdims=Val(True)), A3)
    assert_type(sr.sum(a3, axis=Val(0)), A2)
    assert_type(sr.mean(a3, axis=Val(-1), keepdims=Val(False)), A2)
    assert_type(sr.sum(a3, axis=Val((0, 1))), A1)
    assert_type(sr.mean(a3, axis=Val((0, 1, 2))), A0)
    assert_type(sr.sum(a4), A0)
    assert_type(sr.mean(a4, keepdims=Val(True)), A4)
    assert_type(sr.sum(a4, axis=Val(0)), A3)
    assert_type(sr.mean(a4, axis=Val(-1), keepdims=Val(False)), A3)
    assert_type(sr.sum(a4, axis=Val((0, 1))), A2)
    assert_type(sr.mean(a4, axis=Val((0, 1, 2))), A1)
    assert_type(sr.sum(a5), A0)
    assert_type(sr.mean(a5, keepdims=Val(True)), A5)
    assert_type(sr.sum(a5, axis=Val(0)), A4)
    assert_type(sr.mean(a5, axis=Val(-1), keepdims=Val(False)), A4)
    assert_type(sr.sum(a5, axis=Val((0, 1))), A3)
    assert_type(sr.mean(a5, axis=Val((0, 1, 2))), A2)
    assert_type(sr.sum(a6), A0)
    assert_type(sr.mean(a6, keepdims=Val(True)), A6)
    assert_type(sr.sum(a6, axis=Val(0)), A5)
    assert_type(sr.mean(a6, axis=Val(-1), keepdims=Val(False)), A5)
    assert_type(sr.sum(a6, axis=Val((0, 1))), A4)
    assert_type(sr.mean(a6, axis=Val((0, 1, 2))), A3)
    # stack: rank + 1; hstack / vstack: NumPy's atleast_1d / atleast_2d rules
    assert_type(sr.stack((a0, a0)), A1)
    assert_type(sr.stack([a0, a0, a0], axis=Val(0)), A1)
    assert_type(sr.stack((a1, a1)), A2)
    assert_type(sr.stack([a1, a1, a1], axis=Val(0)), A2)
    assert_type(sr.stack((a2, a2)), A3)
    assert_type(sr.stack([a2, a2, a2], axis=Val(0)), A3)
    assert_type(sr.stack((a3, a3)), A4)
    assert_type(sr.stack([a3, a3, a3], axis=Val(0)), A4)
    assert_type(sr.stack((a4, a4)), A5)
    assert_type(sr.stack([a4, a4, a4], axis=Val(0)), A5)
    assert_type(sr.stack((a5, a5)), A6)
    assert_type(sr.stack([a5, a5, a5], axis=Val(0)), A6)
    assert_type(sr.hstack((a0, a0)), A1)
    assert_type(sr.vstack((a0, a0)), A2)
    assert_type(sr.hstack((a1, a1)), A1)
    assert_type(sr.vstack((a1, a1)), A2)
    assert_type(sr.hstack((a2, a2)), A2)
    assert_type(sr.vstack((a2, a2)), A2)
    assert_type(sr.hstack((a3, a3)), A3)
    assert_type(sr.vstack((a3, a3)), A3)
    assert_type(sr.hstack((a4, a4)), A4)
    assert_type(sr.vstack((a4, a4)), A4)
    assert_type(sr.hstack((a5, a5)), A5)
    assert_type(sr.vstack((a5, a5)), A5)
    assert_type(sr.hstack((a6, a6)), A6)
    assert_type(sr.vstack((a6, a6)), A6)
    # repeat with axis=None: 1-D; repeat's inner/outer and tile: the larger of the rank and the counts' length
    assert_type(sr.repeat(a0, Val(2)), A1)
    assert_type(sr.tile(a0, Val(2)), A1)
    assert_type(sr.tile(a0, Val((2, 1, 3))), A3)
    assert_type(sr.repeat(a0, inner=Val((2, 1))), A2)
    assert_type(sr.repeat(a0, outer=Val((1, 1, 1, 2))), A4)
    assert_type(sr.repeat(a1, Val(2)), A1)
    assert_type(sr.tile(a1, Val(2)), A1)
    assert_type(sr.tile(a1, Val((2, 1, 3))), A3)
    assert_type(sr.repeat(a1, inner=Val((2, 1))), A2)
    assert_type(sr.repeat(a1, outer=Val((1, 1, 1, 2))), A4)
    assert_type(sr.repeat(a2, Val(2)), A1)
    assert_type(sr.tile(a2, Val(2)), A2)
    assert_type(sr.tile(a2, Val((2, 1, 3))), A3)
    assert_type(sr.repeat(a2, inner=Val((2, 1))), A2)
    assert_type(sr.repeat(a2, outer=Val((1, 1, 1, 2))), A4)
    assert_type(sr.repeat(a3, Val(2)), A1)
    assert_type(sr.tile(a3, Val(2)), A3)
    assert_type(sr.tile(a3, Val((2, 1, 3))), A3)
    assert_type(sr.repeat(a3, inner=Val((2, 1))), A3)
    assert_type(sr.repeat(a3, outer=Val((1, 1, 1, 2))), A4)
    assert_type(sr.repeat(a4, Val(2)), A1)
    assert_type(sr.tile(a4, Val(2)), A4)
    assert_type(sr.tile(a4, Val((2, 1, 3))), A4)
    assert_type(sr.repeat(a4, inner=Val((2, 1))), A4)
    assert_type(sr.repeat(a4, outer=Val((1, 1, 1, 2))), A4)
    assert_type(sr.repeat(a5, Val(2)), A1)
    assert_type(sr.tile(a5, Val(2)), A5)
    assert_type(sr.tile(a5, Val((2, 1, 3))), A5)
    assert_type(sr.repeat(a5, inner=Val((2, 1))), A5)
    assert_type(sr.repeat(a5, outer=Val((1, 1, 1, 2))), A5)
    assert_type(sr.repeat(a6, Val(2)), A1)
    assert_type(sr.tile(a6, Val(2)), A6)
    assert_type(sr.tile(a6, Val((2, 1, 3))), A6)
    assert_type(sr.repeat(a6, inner=Val((2, 1))), A6)
    assert_type(sr.repeat(a6, outer=Val((1, 1, 1, 2))), A6)
    # kron: the larger rank
    assert_type(sr.kron(a0, a0), A0)
    assert_type(sr.kron(a0, a3), A3)
    assert_type(sr.kron(a0, a6), A6)
    assert_type(sr.kron(a1, a1), A1)
    assert_type(sr.kron(a1, a2), A2)
    assert_type(sr.kron(a1, a5), A5)
    assert_type(sr.kron(a2, a1), A2)
    assert_type(sr.kron(a2, a2), A2)
    assert_type(sr.kron(a2, a4), A4)
    assert_type(sr.kron(a3, a0), A3)
    assert_type(sr.kron(a3, a3), A3)
    assert_type(sr.kron(a3, a6), A6)
    assert_type(sr.kron(a4, a2), A4)
    assert_type(sr.kron(a4, a4), A4)
    assert_type(sr.kron(a4, a5), A5)
    assert_type(sr.kron(a5, a1), A5)
    assert_type(sr.kron(a5, a4), A5)
    assert_type(sr.kron(a5, a5), A5)
    assert_type(sr.kron(a6, a0), A6)
    assert_type(sr.kron(a6, a3), A6)
    assert_type(sr.kron(a6, a6), A6)
    # cat: Julia's rule, max(ndims, k + 1) for dims=Val(k)
    assert_type(sr.cat(a0, a0, dims=Val(0)), A1)
    assert_type(sr.cat(a0, a0, dims=Val(2)), A3)
    assert_type(sr.cat(a0, a0, dims=Val(4)), A5)
    assert_type(sr.cat(a1, a1, dims=Val(0)), A1)
    assert_type(sr.cat(a1, a1, dims=Val(2)), A3)
    assert_type(sr.cat(a1, a1, dims=Val(4)), A5)
    assert_type(sr.cat(a2, a2, dims=Val(0)), A2)
    assert_type(sr.cat(a2, a2, dims=Val(2)), A3)
    assert_type(sr.cat(a2, a2, dims=Val(4)), A5)
    assert_type(sr.cat(a3, a3, dims=Val(0)), A3)
    assert_type(sr.cat(a3, a3, dims=Val(2)), A3)
    assert_type(sr.cat(a3, a3, dims=Val(4)), A5)
    assert_type(sr.cat(a4, a4, dims=Val(0)), A4)
    assert_type(sr.cat(a4, a4, dims=Val(2)), A4)
    assert_type(sr.cat(a4, a4, dims=Val(4)), A5)
    assert_type(sr.cat(a5, a5, dims=Val(0)), A5)
    assert_type(sr.cat(a5, a5, dims=Val(2)), A5)
    assert_type(sr.cat(a5, a5, dims=Val(4)), A5)
    assert_type(sr.cat(a6, a6, dims=Val(0)), A6)
    assert_type(sr.cat(a6, a6, dims=Val(2)), A6)
    # cat block-diagonal (issue 38: the rank was lost): max(ndims, max(i, j) + 1) for dims=Val((i, j))
    assert_type(sr.cat(a2, a2, dims=Val((0, 1))), A2)
    assert_type(sr.cat(a2, a2, dims=Val((1, 0))), A2)
    assert_type(sr.cat(a1, a1, dims=Val((0, 1))), A2)
    assert_type(sr.cat(a0, a0, dims=Val((0, 1))), A2)
    assert_type(sr.cat(a2, a2, dims=Val((0, 2))), A3)
    assert_type(sr.cat(a3, a3, dims=Val((1, 2))), A3)
    assert_type(sr.cat(a4, a4, dims=Val((0, 1))), A4)
    assert_type(sr.cat(a1, a1, dims=Val((2, 2))), A3)
    assert_type(sr.cat(a6, a6, dims=Val(4)), A6)
    # beyond rank 6: tuple[int, ...]
    assert_type(sr.sum(a7, axis=Val(0)), np.ndarray[tuple[int, ...], np.dtype[np.float32]])
    assert_type(sr.stack((a6, a6)), np.ndarray[tuple[int, ...], np.dtype[np.float32]])


def unknown_rank(u: F32, a2: A2, flag: bool) -> None:
    # an unknown rank gives an unknown rank, as NumPy's NDArray does
    assert_type(sr.sum(u, axis=Val(0)), F32)
    assert_type(sr.stack((u, u)), F32)
    assert_type(sr.tile(u, Val((2, 2))), F32)
    assert_type(sr.kron(u, a2), F32)
    assert_type(sr.flip(u), F32)
    # a static whose value the checker cannot see: the rank is unknown
    keep = Val(flag)
    assert_type(sr.sum(a2, axis=Val(0), keepdims=keep), np.ndarray[tuple[int, ...], np.dtype[np.float32]])
    assert_type(sr.sum(a2, axis=Val(0), keepdims=Val(True)), A2)


def tangents(a2: A2, a3: A3, x64: np.ndarray[S3, np.dtype[np.float64]], dy2: A2, dy3: A3) -> None:
    # every tangent has its primal's shape type: dense for a dense dy, Fill[S, F] for a Fill
    # (every op here keeps Fills), ZeroTangent for a zero
    y, back = sr.rrule(sr.repeat, a3, inner=Val((7, 1, 10)))
    assert_type(y, A3)
    assert_type(back(y), tuple[A3])
    assert_type(back(Fill(np.float32(1), y.shape, np.float32)), tuple[Fill[S3, np.float32]])
    assert_type(back(ZeroTangent()), tuple[ZeroTangent])
    t, tback = sr.rrule(sr.permute_dims, x64, Val((2, 0, 1)))
    assert_type(t, np.ndarray[S3, np.dtype[np.float64]])
    assert_type(tback(t), tuple[np.ndarray[S3, np.dtype[np.float64]], NoTangent])
    k, kback = sr.rrule(sr.kron, a2, a3)
    assert_type(k, A3)
    assert_type(kback(k), tuple[A2, A3])
    assert_type(kback(Fill(np.float32(1), k.shape, np.float32)), tuple[Fill[S2, np.float32], Fill[S3, np.float32]])
    # a counts array (data): the pullback of a Fill is dense
    r, rback = sr.rrule(sr.repeat, a2, np.array([1, 2]), axis=Val(0))
    assert_type(rback(Fill(np.float32(1), r.shape, np.float32)), tuple[A2, NoTangent])
    # split: a tuple of cotangents
    parts, sback = sr.rrule(sr.split, a3, Val(2), axis=Val(1))
    assert_type(parts, tuple[A3, ...])
    assert_type(sback(parts), tuple[A3, NoTangent])
    # frule: the output tangent has the result's shape type; pullback as rrule's
    assert_type(sr.frule(sr.sum, (dy3,), a3, axis=Val(0)), tuple[A2, A2])
    assert_type(sr.frule(sr.stack, ((dy2, dy2),), (a2, a2)), tuple[A3, A3])
    assert_type(sr.pullback(sr.reshape, a3, Val((6, -1)))(dy2), tuple[A3, NoTangent])


def full_reduction(a2: A2, a3: A3, d0: A0, d1: A1) -> None:
    # sum/mean over every axis: a 0-d cotangent pulls back to a Fill[S, F]
    s, back = sr.rrule(sr.sum, a3)
    assert_type(s, A0)
    assert_type(back(d0), tuple[Fill[S3, np.float32]])
    m, mback = sr.rrule(sr.mean, a2, axis=Val((0, 1)))
    assert_type(mback(d0), tuple[Fill[S2, np.float32]])
    # any other dense cotangent gives a dense tangent, whatever the extents
    p, pback = sr.rrule(sr.sum, a2, axis=Val(0))
    assert_type(pback(d1), tuple[A2])
    q, qback = sr.rrule(sr.sum, a2, axis=Val(0), keepdims=Val(True))
    assert_type(qback(q), tuple[A2])


def fills(a3: A3, f: Fill[S3, np.float32], g: Fill[S3, np.float32]) -> None:
    # Fill(v, shape, dtype) is Fill[S, F]; its algebra keeps S and F or follows the rank rules
    assert_type(Fill(np.float32(1), a3.shape, np.float32), Fill[S3, np.float32])
    assert_type(f * 2.0, Fill[S3, np.float32])
    assert_type(2.0 * f, Fill[S3, np.float32])
    assert_type(-f, Fill[S3, np.float32])
    assert_type(f + g, Fill[S3, np.float32])
    assert_type(f - 1, Fill[S3, np.float32])
    assert_type(f.conj(), Fill[S3, np.float32])
    assert_type(f.T, Fill[S3, np.float32])
    assert_type(f.reshape(6, -1), Fill[S2, np.float32])
    assert_type(f.reshape((24,)), Fill[S1, np.float32])
    assert_type(f.shape, S3)
    assert_type(np.asarray(f), npt.NDArray[np.bool_ | np.number])


def sequences(a: A4, b: A4, c: A2, u: F32) -> None:
    # sequence arguments keep their arity (1 to 4 arrays), each tangent its own type
    y, back = sr.rrule(sr.concatenate, (a, b), axis=Val(2))
    assert_type(back(y), tuple[tuple[A4, A4]])
    y1, back1 = sr.rrule(sr.concatenate, (c,), axis=None)
    assert_type(y1, A1)
    assert_type(back1(y1), tuple[tuple[A2]])
    y3, back3 = sr.rrule(sr.stack, (c, c, c), Val(0))
    assert_type(y3, A3)
    assert_type(back3(y3), tuple[tuple[A2, A2, A2], NoTangent])
    y4, back4 = sr.rrule(sr.hstack, (c, c, c, c))
    assert_type(back4(y4), tuple[tuple[A2, A2, A2, A2]])
    # mixed ranks keep each array's own type in the tangent
    m, mback = sr.rrule(sr.concatenate, (a, u))
    assert_type(mback(m), tuple[tuple[A4, F32]])
    # longer tuples and lists: homogeneous
    y5, back5 = sr.rrule(sr.concatenate, [c, c, c, c, c])
    assert_type(back5(y5), tuple[tuple[A2, ...]])
    z, zback = sr.rrule(sr.cat, a, b, dims=Val(1))
    assert_type(zback(z), tuple[A4, A4])


def cat_seed(a: np.ndarray[tuple[int, int, int, int], np.dtype[np.float32]], b: np.ndarray[tuple[int, int, int, int], np.dtype[np.float32]]) -> None:
    # the cat seed's case, as SPEC section 11 writes it
    y, back = sr.rrule(sr.concatenate, (a, b), axis=Val(2))
    assert_type(y, np.ndarray[tuple[int, int, int, int], np.dtype[np.float32]])
    assert_type(
        back(sr.Fill(np.float32(1), y.shape, np.float32)),
        tuple[tuple[Fill[tuple[int, int, int, int], np.float32], Fill[tuple[int, int, int, int], np.float32]]],
    )


def generic(x: npt.NDArray[F], z: np.ndarray[S2, np.dtype[F]]) -> None:
    # a user's own TypeVar: back(dy) stays exact inside a generic function
    y, back = sr.rrule(sr.repeat, x, Val(3), axis=Val(0))
    assert_type(back(y), tuple[npt.NDArray[F], NoTangent])
    s, sback = sr.rrule(sr.sum, z, axis=Val(0))
    assert_type(s, np.ndarray[S1, np.dtype[F]])
    assert_type(sback(s), tuple[np.ndarray[S2, np.dtype[F]]])
    c, cback = sr.rrule(sr.concatenate, (z, z), axis=Val(1))
    # The checkers differ here, and no overload order or shape of ours removes it (mypy 2.4):
    # - an argument "contains Any" when a type variable's bound does (mypy's has_any_type
    #   visits bounds), and np.inexact is inexact[Any, Any]: so mypy does not stop at the first
    #   matching overload but collects every match;
    # - the pair (z, z) matches both the 2-tuple overload (formal tuple[A, A]) and the
    #   homogeneous one (formal Sequence[A]: a tuple is a Sequence); the formals differ and so
    #   do the results (a pair of tangents against tuple[T, ...]), so its Any-ambiguity rule
    #   returns Any. Single-array ops escape it because every matching overload's formal infers
    #   to the same type.
    # - the homogeneous overload could only stop matching 1-4-tuples by taking lists and
    #   tuples of 5 or more instead of any Sequence: arguments typed Sequence[...] or
    #   tuple[A, ...] would then no longer type-check, so it stays.
    # pyright takes the first match. A bound without Any is exact under both: see below.
    assert_type(cback(c), tuple[tuple[np.ndarray[S2, np.dtype[F]], np.ndarray[S2, np.dtype[F]]]])  # type: ignore[assert-type]


FR = TypeVar("FR", bound=np.float32 | np.float64)  # a bound without Any


def generic_real(z: np.ndarray[S2, np.dtype[FR]]) -> None:
    # the same sequence op in a generic function whose type variable's bound holds no Any:
    # exact under both checkers
    c, cback = sr.rrule(sr.concatenate, (z, z), axis=Val(1))
    assert_type(c, np.ndarray[S2, np.dtype[FR]])
    assert_type(cback(c), tuple[tuple[np.ndarray[S2, np.dtype[FR]], np.ndarray[S2, np.dtype[FR]]]])
    s, sback = sr.rrule(sr.stack, (z, z, z))
    assert_type(s, np.ndarray[S3, np.dtype[FR]])
    assert_type(
        sback(s),
        tuple[tuple[np.ndarray[S2, np.dtype[FR]], np.ndarray[S2, np.dtype[FR]], np.ndarray[S2, np.dtype[FR]]]],
    )


def model(a: A2, b: A2) -> None:
    """A small model, concatenate -> repeat -> sum, with its gradient chained by hand: every
    intermediate and every tangent has its exact rank and dtype."""
    joined, back_cat = sr.rrule(sr.concatenate, (a, b), axis=Val(1))
    assert_type(joined, A2)
    wide, back_rep = sr.rrule(sr.repeat, joined, inner=Val((2, 1, 3)))
    assert_type(wide, A3)
    total, back_sum = sr.rrule(sr.sum, wide)
    assert_type(total, A0)
    (d_wide,) = back_sum(np.ones_like(total))
    assert_type(d_wide, Fill[S3, np.float32])
    (d_joined,) = back_rep(d_wide)
    assert_type(d_joined, Fill[S2, np.float32])
    ((d_a, d_b),) = back_cat(d_joined)
    assert_type(d_a, Fill[S2, np.float32])
    assert_type(d_b, Fill[S2, np.float32])
    # the same chain with dense cotangents
    (dense_joined,) = back_rep(sr.materialize(d_wide, wide))
    assert_type(back_cat(dense_joined), tuple[tuple[A2, A2]])
