"""The core's public types: Val, tangents, the cache record, context managers, user rules.

Type-checked only, never executed.
"""

from __future__ import annotations

from typing import Literal, assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Fill, NoTangent, Thunk, Val, ZeroTangent

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


def values() -> None:
    assert_type(Val(3), Val[int])
    # The tuple's length and its literal values (mypy shows them as ``Literal[2]?``); a
    # ``Val[tuple[int, int]]`` is expected and accepted where one is declared (covariant).
    assert_type(Val((2, 3)), Val[tuple[Literal[2], Literal[3]]])
    assert_type(Val((2, 3)).value, tuple[Literal[2], Literal[3]])
    pair: Val[tuple[int, int]] = Val((2, 3))
    assert_type(Val(3).value, int)
    assert_type(Val(3) == Val((3,)), bool)


def tangents(x: F32) -> None:
    assert_type(Fill(1.0, (2, 3), np.float32).value, complex)
    assert_type(Fill(1.0, 3).shape, tuple[int])
    assert_type(np.asarray(Fill(1.0, 3)), npt.NDArray[np.bool_ | np.number])
    assert_type(Thunk(lambda: x).unthunk(), F32)
    assert_type(sr.unthunk(Thunk(lambda: x)), object)
    assert_type(sr.materialize(ZeroTangent(), x), F32)
    assert_type(sr.materialize(Fill(2.0, x.shape), x), F32)
    assert_type(NoTangent() == ZeroTangent(), bool)


def cache() -> None:
    info = sr.cache_info()
    assert_type(info, sr.CacheInfo)
    assert_type(info.compiles, int)
    assert_type(info.memory_hits, int)
    assert_type(info.disk_hits, int)
    assert_type(info.entries, int)
    assert_type(info.compile_seconds, float)
    assert_type(info.dynamic_arguments, int)
    sr.clear_caches(disk=False)
    with sr.no_compile() as nothing, sr.no_fallback() as also_nothing:
        assert_type(nothing, None)
        assert_type(also_nothing, None)


def precompile(x: F32) -> None:
    assert_type(sr.precompile(sr.repeat, sr.ArraySpec((3, 4), np.float32), Val(2)), tuple[sr.ShapeSignature, ...])
    assert_type(sr.precompile(sr.kron, x, x), tuple[sr.ShapeSignature, ...])
    with sr.record("signatures.json") as recording:
        assert_type(recording.unkeyed, int)
    assert_type(sr.precompile("signatures.json"), tuple[sr.ShapeSignature, ...])
    assert_type(sr.explain(sr.tile, x, Val(2)), str)
    assert_type(sr.ArraySpec((3,), "float32").shape, tuple[int, ...])


def scale(x: F64, k: Val[int]) -> F64:
    return x * k.value


def scale_rrule(x: F64, k: Val[int]) -> tuple[F64, sr.Pullback[tuple[F64, NoTangent], tuple[object, NoTangent]]]:
    factor = k.value

    def scale_pullback(dy: object) -> tuple[F64, NoTangent]:
        return np.asarray(dy, dtype=np.float64) * factor, NoTangent()

    return scale(x, k), scale_pullback  # a plain function is a Pullback


def user_rules(x: F64, dy: F64) -> None:
    sr.register_rrule(scale, scale_rrule)
    # A user function: arguments checked against its own signature, y its return type, and
    # the pullback as loose as any user rule's.
    y, back = sr.rrule(scale, x, Val(2))
    assert_type(y, F64)
    assert_type(back(dy), tuple[object, ...])
    y2, dy2 = sr.frule(scale, (x, NoTangent()), x, Val(2))
    assert_type(y2, F64)
    assert_type(dy2, object)
