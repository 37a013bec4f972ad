# mypy: enable-error-code="deprecated"
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
    # E: overload def [_DT <: numpy.generic[Any]] (self: stablerules.rules.repeat.Repeat, x: numpy.ndarray[tuple[Any, ...], numpy.dtype[_DT]], repeats: stablerules._val.Val[int] | int | numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.integer[Any]]] | typing.Sequence[int], axis: stablerules._val.Val[int] | int | None =) -> numpy.ndarray[tuple[Any, ...], numpy.dtype[_DT]] of function stablerules.rules.repeat.Repeat.__call__ is deprecated: static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)  [deprecated]
    sr.repeat(a, 3, axis=0)
    # E: overload def [_F <: numpy.inexact[Any, float | complex]] (stablerules.rules.repeat.Repeat, numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], stablerules._val.Val[int] | numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.integer[Any]]] | typing.Sequence[int] | int, *, axis: stablerules._val.Val[int] | None | int =) -> tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], stablerules._typing.Pullback[tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], stablerules._tangents.NoTangent], tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]] | stablerules._tangents.Fill | stablerules._tangents.ZeroTangent, stablerules._tangents.NoTangent]]] of function stablerules._dispatch.rrule is deprecated: static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)  [deprecated]
    sr.rrule(sr.repeat, a, 3, axis=0)
    # E: overload def [_DT <: numpy.generic[Any]] (self: stablerules.rules.concatenate.Concatenate, arrays: typing.Sequence[numpy.ndarray[tuple[Any, ...], numpy.dtype[_DT]]], axis: int) -> numpy.ndarray[tuple[Any, ...], numpy.dtype[_DT]] of function stablerules.rules.concatenate.Concatenate.__call__ is deprecated: static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)  [deprecated]
    sr.concatenate((a, a), axis=0)
    # E: overload def [_F <: numpy.inexact[Any, float | complex]] (stablerules.rules.concatenate.Concatenate | stablerules.rules.concatenate.Stack, typing.Sequence[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]]], *, axis: int) -> tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], stablerules._typing.Pullback[tuple[tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], ...]], tuple[tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]] | stablerules._tangents.Fill | stablerules._tangents.ZeroTangent, ...]]]] of function stablerules._dispatch.rrule is deprecated: static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)  [deprecated]
    sr.rrule(sr.concatenate, (a, a), axis=0)
    # E: overload def [_F <: numpy.inexact[Any, float | complex]] (stablerules.rules.repeat.Tile, tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.generic[Any]]], object], numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], int | tuple[int, ...]) -> tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]], numpy.ndarray[tuple[Any, ...], numpy.dtype[_F]]] of function stablerules._dispatch.frule is deprecated: static arguments are Val: write Val(3), not 3 (a plain int is a dynamic argument)  [deprecated]
    sr.frule(sr.tile, (a, NoTangent()), a, (2, 1))
