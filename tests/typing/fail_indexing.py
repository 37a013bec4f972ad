"""Rank mistakes with the indexing ops are type errors: each draws an error on its line.
Type-checked only, never executed."""

from __future__ import annotations

from typing import TypeAlias

import numpy as np

import stablerules as sr
from stablerules import Val
from stablerules.rules.indexing import Slices

A1: TypeAlias = np.ndarray[tuple[int], np.dtype[np.float32]]
A2: TypeAlias = np.ndarray[tuple[int, int], np.dtype[np.float32]]
A3: TypeAlias = np.ndarray[tuple[int, int, int], np.dtype[np.float32]]
I1: TypeAlias = np.ndarray[tuple[int], np.dtype[np.int64]]
I2: TypeAlias = np.ndarray[tuple[int, int], np.dtype[np.int64]]


def getindex(a: A2) -> None:
    # E: Invalid index type "tuple[int, slice[None, None, None]]"  [index]
    kept: sr.StaticIndex[Slices] = sr.ix[0, :]
    y, back = sr.rrule(sr.getindex, a, sr.ix[1:, ::2])
    # E: Incompatible types in assignment  [assignment]
    dx: A3 = back(y)[0]
    # E: Incompatible types in assignment  [assignment]
    dropped: A2 = sr.getindex(a, sr.ix[0])
    # E: Incompatible types in assignment  [assignment]
    added: A2 = sr.getindex(a, sr.ix[:, None])
    z, back_z = sr.rrule(sr.getindex, a, sr.ix[0, 1])
    # E: Incompatible types in assignment  [assignment]
    scalar: A1 = z
    del kept, dx, dropped, added, back_z, scalar


def take(a: A2, i1: I1, i2: I2) -> None:
    # E: Incompatible types in assignment  [assignment]
    along: A2 = sr.take(a, i2, Val(1))
    # E: Incompatible types in assignment  [assignment]
    flat: A2 = sr.take(a, i1)
    y, back = sr.rrule(sr.take, a, i2, Val(0))
    # E: Incompatible types in assignment  [assignment]
    dx: A3 = back(y)[0]
    del along, flat, dx


def index_add(a: A2, i1: I1) -> None:
    y, back = sr.rrule(sr.index_add, a, i1, 1.0)
    # E: Too many values to unpack (2 expected, 3 provided)  [misc]
    dx, dvalues = back(y)
    # E: Incompatible types in assignment  [assignment]
    d1: A1 = back(y)[2]
    del dx, dvalues, d1
