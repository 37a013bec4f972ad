# mypy: enable-error-code="deprecated"
# pyright: reportDeprecated=error
"""With mypy's ``deprecated`` error code on, a plain int where a ``Val`` goes is one line that
says to write ``Val(3)``, for the ops and the rules alike (and nothing for a ``Val``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import NoTangent, Val

Array = npt.NDArray[np.float64]


def plain_ints(a: Array) -> None:
    sr.repeat(a, Val(3), axis=Val(0))
    sr.rrule(sr.repeat, a, Val(3), axis=Val(0))
    # E: of function stablerules._ops.Repeat.__call__ is deprecated: static arguments are Val  [deprecated]
    sr.repeat(a, 3, axis=0)
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.repeat, a, 3, axis=0)
    # E: of function stablerules._ops.Concatenate.__call__ is deprecated: static arguments are Val  [deprecated]
    sr.concatenate((a, a), axis=0)
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.concatenate, (a, a), axis=0)
    # E: of function stablerules._signatures.frule is deprecated: static arguments are Val  [deprecated]
    sr.frule(sr.tile, (a, NoTangent()), a, (2, 1))


def plain_ints_ii(a: Array) -> None:
    sr.flip(a, Val(0))
    sr.rrule(sr.roll, a, Val(1), axis=Val(0))
    sr.pullback(sr.sum, a, Val(0), keepdims=Val(True))
    # E: of function stablerules._ops.Flip.__call__ is deprecated: static arguments are Val  [deprecated]
    sr.flip(a, 0)
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.flip, a, 0)
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.roll, a, Val(1), axis=0)
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.permute_dims, a, (1, 0))
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.reshape, a, shape=(2, -1))
    # E: of function stablerules._signatures.rrule is deprecated: static arguments are Val  [deprecated]
    sr.rrule(sr.sum, a, 0)
    # E: of function stablerules._signatures.frule is deprecated: static arguments are Val  [deprecated]
    sr.frule(sr.pad, (a, NoTangent()), a, 1)
    # E: of function stablerules._signatures.pullback is deprecated: static arguments are Val  [deprecated]
    sr.pullback(sr.split, a, 2, axis=Val(1))
    # E: of function stablerules._signatures.pullback is deprecated: static arguments are Val  [deprecated]
    sr.pullback(sr.broadcast_to, a, (4, 3))
    # E: of function stablerules._signatures.pullback is deprecated: static arguments are Val  [deprecated]
    sr.pullback(sr.repeat, a, 3)
