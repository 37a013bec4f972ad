"""Plain ints where a ``Val`` goes: the ops and the rules accept them alike, with the types of
the ``Val`` forms (SPEC's convenience; at run time a counted dynamic argument). mypy's
``deprecated`` error code is off here, as under ``--strict``: see ``fail_plain_ints.py``."""

from __future__ import annotations

from typing import Any, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import NoTangent, Val

Array = npt.NDArray[np.float64]
Tangent = Array | sr.Fill | sr.ZeroTangent


def forward(a: Array) -> None:
    assert_type(sr.repeat(a, 3, axis=0), Array)
    assert_type(sr.repeat(a, inner=(2, 1)), Array)
    assert_type(sr.tile(a, (2, 2)), Array)
    assert_type(sr.concatenate((a, a), axis=1), Array)
    assert_type(sr.stack((a, a), axis=0), Array)
    assert_type(sr.cat(a, a, dims=1), Array)


def reverse(a: Array, dy: Array) -> None:
    y, back = sr.rrule(sr.repeat, a, 3, axis=0)
    y_val, back_val = sr.rrule(sr.repeat, a, Val(3), axis=Val(0))
    assert_type(y, Array)
    assert_type(back(dy), tuple[Array, NoTangent])
    assert_type(back_val(dy), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.repeat, a, 3, 0)[1](dy), tuple[Array, NoTangent, NoTangent])
    assert_type(sr.rrule(sr.repeat, a, inner=(2, 1))[1](dy), tuple[Array])
    assert_type(sr.rrule(sr.tile, a, (2, 1))[1](dy), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.concatenate, (a, a), axis=1)[1](dy), tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]])
    assert_type(sr.rrule(sr.stack, (a, a), 0)[1](dy), tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]], sr.NoTangent])
    assert_type(sr.rrule(sr.cat, a, a, dims=1)[1](dy), tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]])


def forward_mode(a: Array, da: Array) -> None:
    assert_type(sr.frule(sr.repeat, (da, NoTangent()), a, 3, axis=0), tuple[Array, Array])
    assert_type(sr.frule(sr.tile, (da, NoTangent()), a, (2, 1)), tuple[Array, Array])
    assert_type(sr.frule(sr.tile, (sr.ZeroTangent(), NoTangent()), a, (2, 1)), tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | sr.Fill[tuple[int, ...], np.float64] | sr.ZeroTangent])
    assert_type(sr.frule(sr.concatenate, ((da, da),), (a, a), axis=1), tuple[Array, Array])


def pullbacks(a: Array, dy: Array) -> None:
    assert_type(sr.pullback(sr.repeat, a, 3, axis=0)(dy), tuple[Array, NoTangent])
    assert_type(sr.pullback(sr.tile, a, reps=(2, 1))(dy), tuple[Array])
    assert_type(sr.pullback(sr.concatenate, (a, a), 1)(dy), tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]], sr.NoTangent])
    assert_type(sr.pullback(sr.cat, a, a, dims=(0, 1))(dy), tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]])


# The structure ops II: the same, op by op and call form by call form.
Int = npt.NDArray[np.int64]
LooseInt = Int | NoTangent


def forward_ii(a: Array, n: Int) -> None:
    assert_type(sr.flip(a, 0), Array)
    assert_type(sr.roll(a, 1, axis=Val(0)), Array)
    assert_type(sr.permute_dims(a, (1, 0)), Array)
    assert_type(sr.transpose(n, axes=(1, 0)), Int)
    assert_type(sr.reshape(a, -1), Array)
    assert_type(sr.broadcast_to(a, (4, 3)), Array)
    assert_type(sr.sum(a, 0, True), Array)
    assert_type(sr.sum(n, axis=(0, 1)), npt.NDArray[np.integer])
    assert_type(sr.mean(n, keepdims=True), npt.NDArray[np.float64])
    assert_type(sr.pad(a, (1, 0, 0, 1), 2.0), Array)
    assert_type(sr.split(a, 2, axis=1), tuple[Array, ...])


def reverse_ii(a: Array, dy: Array, n: Int, dn: Array) -> None:
    y, back = sr.rrule(sr.flip, a, 0)
    assert_type(y, Array)
    assert_type(back(dy), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.flip, n, axis=(0, 1))[1](dn), tuple[LooseInt])
    assert_type(sr.rrule(sr.roll, a, 1)[1](dy), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.roll, a, Val(1), 0)[1](dy), tuple[Array, NoTangent, NoTangent])
    assert_type(sr.rrule(sr.roll, n, shift=1, axis=Val(0))[1](dn), tuple[LooseInt])
    assert_type(sr.rrule(sr.permute_dims, a, (1, 0))[1](dy), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.transpose, a, axes=(1, 0))[1](dy), tuple[Array])
    assert_type(sr.rrule(sr.reshape, a, (2, -1))[1](dy), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.broadcast_to, n, shape=(4, 3))[1](dn), tuple[LooseInt])
    assert_type(sr.rrule(sr.sum, a, 0)[1](dy), tuple[npt.NDArray[np.float64] | sr.Fill[tuple[Any, ...], np.float64], sr.NoTangent])
    assert_type(sr.rrule(sr.mean, a, Val(0), True)[1](dy), tuple[npt.NDArray[np.float64] | sr.Fill[tuple[Any, ...], np.float64], sr.NoTangent, sr.NoTangent])
    y_int, back_int = sr.rrule(sr.sum, n, axis=0)
    assert_type(y_int, npt.NDArray[np.integer])
    assert_type(back_int(dn), tuple[NoTangent])
    assert_type(sr.rrule(sr.mean, n, 0, True)[0], npt.NDArray[np.float64])
    assert_type(sr.rrule(sr.pad, a, 1)[1](dy), tuple[Array, NoTangent])
    assert_type(
        sr.rrule(sr.pad, a, (1, 1, 0, 0), 2.0)[1](dy),
        tuple[Array, NoTangent, npt.NDArray[np.inexact] | NoTangent],
    )
    parts, back_split = sr.rrule(sr.split, a, 2, axis=1)
    assert_type(parts, tuple[Array, ...])
    assert_type(back_split((dy, dy)), tuple[Array, NoTangent])
    assert_type(sr.rrule(sr.split, a, (1, 2), 0)[1]((dy, dy, dy)), tuple[Array, NoTangent, NoTangent])


def forward_mode_ii(a: Array, da: Array, n: Int) -> None:
    assert_type(sr.frule(sr.flip, (da, NoTangent()), a, 0), tuple[Array, Array])
    assert_type(sr.frule(sr.flip, (sr.ZeroTangent(),), a, axis=(0, 1)), tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | sr.Fill[tuple[Any, ...], np.float64] | sr.ZeroTangent])
    assert_type(sr.frule(sr.roll, (da, NoTangent(), NoTangent()), a, 1, 0), tuple[Array, Array])
    assert_type(sr.frule(sr.roll, (da,), a, shift=Val(1), axis=0), tuple[Array, Array])
    assert_type(sr.frule(sr.transpose, (da, NoTangent()), a, (1, 0)), tuple[Array, Array])
    assert_type(sr.frule(sr.permute_dims, (da,), a, axes=(1, 0)), tuple[Array, Array])
    assert_type(sr.frule(sr.reshape, (da, NoTangent()), a, (6,)), tuple[Array, Array])
    assert_type(sr.frule(sr.broadcast_to, (sr.Fill(1.0, (3,)),), a, shape=(4, 3)), tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | sr.Fill[tuple[int, ...], np.float64] | sr.ZeroTangent])
    assert_type(sr.frule(sr.sum, (da, NoTangent()), a, 0), tuple[Array, Array])
    assert_type(sr.frule(sr.mean, (da,), a, keepdims=True), tuple[Array, Array])
    assert_type(sr.frule(sr.sum, (n, NoTangent()), n, 0), tuple[npt.NDArray[np.integer], NoTangent])
    assert_type(sr.frule(sr.pad, (da, NoTangent()), a, 1), tuple[Array, Array])
    assert_type(sr.frule(sr.pad, (da, NoTangent(), NoTangent()), a, 1, 0.0), tuple[Array, Array])
    assert_type(sr.frule(sr.split, (da, NoTangent()), a, 2), tuple[tuple[Array, ...], tuple[Array, ...]])
    assert_type(
        sr.frule(sr.split, (sr.ZeroTangent(),), n, indices_or_sections=2),
        tuple[tuple[npt.NDArray[np.int64], ...], tuple[npt.NDArray[np.int64] | sr.Fill[tuple[Any, ...], np.int64] | sr.ZeroTangent, ...] | sr.ZeroTangent | sr.NoTangent],
    )


def pullbacks_ii(a: Array, dy: Array, n: Int) -> None:
    assert_type(sr.pullback(sr.flip, a, (0, 1))(dy), tuple[Array, NoTangent])
    assert_type(sr.pullback(sr.roll, a, 1, axis=0)(dy), tuple[Array, NoTangent])
    assert_type(sr.pullback(sr.transpose, a, (1, 0))(dy), tuple[Array, NoTangent])
    assert_type(sr.pullback(sr.reshape, a, shape=-1)(dy), tuple[Array])
    assert_type(sr.pullback(sr.broadcast_to, a, (4, 3))(dy), tuple[Array, NoTangent])
    assert_type(sr.pullback(sr.mean, a, 0, keepdims=True)(dy), tuple[npt.NDArray[np.float64] | sr.Fill[tuple[Any, ...], np.float64], sr.NoTangent])
    assert_type(sr.pullback(sr.pad, a, 1, 0.0)(dy), tuple[Array, NoTangent, npt.NDArray[np.inexact] | NoTangent])
    assert_type(sr.pullback(sr.split, a, 2, 1)((dy, dy)), tuple[Array, NoTangent, NoTangent])
    assert_type(sr.pullback(sr.mean, n, 0)(dy), tuple[NoTangent, NoTangent])
    assert_type(sr.pullback(sr.sum, n, axis=(0, 1), keepdims=True)(dy), tuple[NoTangent])
