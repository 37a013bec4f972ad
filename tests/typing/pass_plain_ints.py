"""Plain ints where a ``Val`` goes: the ops and the rules accept them alike, with the types of
the ``Val`` forms (SPEC's convenience; at run time a counted dynamic argument). mypy's
``deprecated`` error code is off here, as under ``--strict``: see ``fail_plain_ints.py``."""

from __future__ import annotations

from typing import assert_type

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
    assert_type(sr.rrule(sr.concatenate, (a, a), axis=1)[1](dy), tuple[tuple[Array, ...]])
    assert_type(sr.rrule(sr.stack, (a, a), 0)[1](dy), tuple[tuple[Array, ...], NoTangent])
    assert_type(sr.rrule(sr.cat, a, a, dims=1)[1](dy), tuple[Array, ...])


def forward_mode(a: Array, da: Array) -> None:
    assert_type(sr.frule(sr.repeat, (da, NoTangent()), a, 3, axis=0), tuple[Array, Array])
    assert_type(sr.frule(sr.tile, (da, NoTangent()), a, (2, 1)), tuple[Array, Array])
    assert_type(sr.frule(sr.tile, (sr.ZeroTangent(), NoTangent()), a, (2, 1)), tuple[Array, Tangent])
    assert_type(sr.frule(sr.concatenate, ((da, da),), (a, a), axis=1), tuple[Array, Array])
