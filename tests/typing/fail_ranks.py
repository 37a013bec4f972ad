"""Rank mistakes are type errors (SPEC section 11): each draws an error on its line.
Type-checked only, never executed."""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

import stablerules as sr
from stablerules import Fill, Val

A2: TypeAlias = np.ndarray[tuple[int, int], np.dtype[np.float32]]
A3: TypeAlias = np.ndarray[tuple[int, int, int], np.dtype[np.float32]]
A4: TypeAlias = np.ndarray[tuple[int, int, int, int], np.dtype[np.float32]]


def results(a3: A3, a2: A2) -> None:
    # E: Incompatible types in assignment  [assignment]
    y4: A4 = sr.sum(a3, axis=Val(0))
    # E: Incompatible types in assignment  [assignment]
    r: A3 = sr.reshape(a3, Val((6, -1)))
    # E: Incompatible types in assignment  [assignment]
    s: A2 = sr.stack((a2, a2))
    # E: Incompatible types in assignment  [assignment]
    k: A2 = sr.kron(a2, a3)
    del y4, r, s, k


def pullbacks(a3: A3, a2: A2) -> None:
    y, back = sr.rrule(sr.concatenate, (a3, a3), axis=Val(2))
    # E: Need more than 1 value to unpack (2 expected)  [misc]
    (_, _), _ = back(y)
    y2, back2 = sr.rrule(sr.kron, a2, a3)
    # E: Too many values to unpack (1 expected, 2 provided)  [misc]
    (only,) = back2(y2)
    # E: Incompatible types in assignment  [assignment]
    dx: A3 = back2(y2)[0]
    del only, dx


def fills(a3: A3) -> None:
    y, back = sr.rrule(sr.flip, a3)
    # a Fill of the wrong rank where a tangent of a known rank is declared
    # E: Incompatible types in assignment  [assignment]
    tangent: Fill[tuple[int, int], np.float32] = back(Fill(np.float32(1), y.shape, np.float32))[0]
    del tangent
