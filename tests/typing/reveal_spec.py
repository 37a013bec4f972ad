"""SPEC's examples, with the exact types mypy reveals for them (as a user sees them).

Excluded from the project's own mypy run (reveal_type notes would be noise there);
``tests/test_typing.py`` checks each ``# R:`` line, with and without our config.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val


def spec(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32], x: npt.NDArray[np.float64]) -> None:
    y, back = sr.rrule(sr.kron, a, b)
    # R: numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[numpy._typing._nbit_base._32Bit]]]
    reveal_type(y)
    # R: tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[numpy._typing._nbit_base._32Bit]]], numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[numpy._typing._nbit_base._32Bit]]]]
    reveal_type(back(y))
    # R: tuple[stablerules._tangents.ZeroTangent, stablerules._tangents.ZeroTangent]
    reveal_type(back(sr.ZeroTangent()))

    _, back_concatenate = sr.rrule(sr.concatenate, (x, x), axis=Val(1))
    # R: tuple[tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]], numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]]]]
    reveal_type(back_concatenate(x))

    _, back_repeat = sr.rrule(sr.repeat, x, Val(3), axis=Val(0))
    # R: tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]], stablerules._tangents.NoTangent]
    reveal_type(back_repeat(x))

    _, back_inner = sr.rrule(sr.repeat, x, inner=Val((2, 1)))
    # R: tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]]]
    reveal_type(back_inner(x))

    # R: tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]], numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]]]
    reveal_type(sr.frule(sr.concatenate, ((x, x),), (x, x), axis=Val(0)))

    # R: tuple[numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[numpy._typing._nbit_base._32Bit]]], numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[numpy._typing._nbit_base._32Bit]]]]
    reveal_type(sr.pullback(sr.kron, a, b)(a))
    # R: numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[numpy._typing._nbit_base._32Bit]]]
    reveal_type(a + sr.ZeroTangent())
    # R: stablerules._tangents.Fill[tuple[Literal[2]?, Literal[3]?], numpy.float64]
    reveal_type(sr.Fill(1.0, (2, 3)) * 2.0)
