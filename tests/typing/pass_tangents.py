"""The tangent algebra's types (SPEC section 8) and sr.pullback's.

Type-checked only, never executed.
"""

from __future__ import annotations

from typing import assert_type

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import ArraySpec, Fill, NoTangent, Thunk, Val, ZeroTangent

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
C64 = npt.NDArray[np.complex64]


def zeros(x: F32, c: C64, f: Fill, z: ZeroTangent, n: NoTangent) -> None:
    # t + z and z + t are t, arrays on either side
    assert_type(x + z, F32)
    assert_type(z + x, F32)
    assert_type(c + n, C64)
    assert_type(x - z, F32)
    assert_type(z - x, F32)
    assert_type(np.float32(1.0) + z, np.float32)
    assert_type(2.5 + z, float)
    assert_type(z + f, Fill)
    assert_type(f + z, Fill)
    assert_type(z + (x, z), tuple[F32, ZeroTangent])
    assert_type(z + Thunk(lambda: x), F32)
    # between zeros: ZeroTangent stays, NoTangent wins
    assert_type(z + z, ZeroTangent)
    assert_type(n + z, NoTangent)
    assert_type(z + n, NoTangent)
    # products, quotients, linear maps: the zero itself
    assert_type(z * x, ZeroTangent)
    assert_type(x * z, ZeroTangent)
    assert_type(2.0 * n, NoTangent)
    assert_type(z / 3.0, ZeroTangent)
    assert_type(x @ z, ZeroTangent)
    assert_type(z * n, NoTangent)
    assert_type(f * z, ZeroTangent)
    assert_type(-z, ZeroTangent)
    assert_type(z[1:, None], ZeroTangent)
    assert_type(z.reshape(2, 3), ZeroTangent)
    assert_type(z.T, ZeroTangent)
    assert_type(z.conj(), ZeroTangent)
    assert_type(z.real, ZeroTangent)
    assert_type(n.sum(axis=0), NoTangent)


def fills(f: Fill, x: F32, i: int) -> None:
    assert_type(f * 2.0, Fill)
    assert_type(2.0 * f, Fill)
    assert_type(f / 2, Fill)
    assert_type(f + f, Fill)
    assert_type(f - 1j, Fill)
    assert_type(1 - f, Fill)
    assert_type(f * np.float32(2.0), Fill)
    assert_type(f**2, Fill)
    assert_type(-f, Fill)
    assert_type(abs(f), Fill)
    assert_type(f * x, npt.NDArray[np.generic])
    assert_type(f.conj(), Fill)
    assert_type(f.real, Fill)
    assert_type(f.imag, Fill)
    assert_type(f.astype(np.float32), Fill)
    assert_type(f[1:], Fill)
    assert_type(f[:, None, ...], Fill)
    assert_type(f[i], Fill | np.generic)
    assert_type(f.reshape(2, -1), Fill[tuple[int, int]])
    assert_type(f.reshape((6,)), sr.Fill[tuple[int], np.generic[object]])
    assert_type(f.transpose(1, 0), Fill)
    assert_type(f.T, Fill)
    # A bare Fill's scalar type is np.generic[object]: mypy carries it through the reductions'
    # scalar-keeping overloads (issue 38), pyright takes NumPy's fallback (generic[Any]).
    assert_type(f.sum(), np.generic[object])  # pyright: ignore[reportAssertTypeFailure]
    assert_type(f.sum(axis=0), Fill | np.generic[object])  # pyright: ignore[reportAssertTypeFailure]
    assert_type(f.sum(axis=0, keepdims=True), Fill)
    assert_type(f.mean(), np.generic[object])  # pyright: ignore[reportAssertTypeFailure]
    assert_type(f.mean(axis=(0, 1), keepdims=True), Fill)
    assert_type(f.sum(0, None, x), F32)
    assert_type(len(f), int)
    assert_type(f.ndim, int)
    assert_type(f.size, int)
    assert_type(f.value, complex)
    assert_type(np.asarray(f), npt.NDArray[np.bool_ | np.number])
    for row in f:
        assert_type(row, Fill | np.generic)


def exact_fill_reductions(
    f2: Fill[tuple[int, int], np.float64], f3: Fill[tuple[int, int, int], np.float32], c1: Fill[tuple[int], np.complex64],
    i2: Fill[tuple[int, int], np.int32], b2: Fill[tuple[int, int], np.bool_], u2: Fill[tuple[int, int], np.uint8],
) -> None:
    # SPEC 11 (issue 38: these were Fill[tuple[int, ...], generic[object]] | generic[Any]): an
    # int axis drops one axis, a full reduction is a scalar of NumPy's reduction dtype
    assert_type(f2.reshape(6, -1), Fill[tuple[int, int], np.float64])
    assert_type(f3.reshape(6, -1), Fill[tuple[int, int], np.float32])
    assert_type(f3.reshape(-1), Fill[tuple[int], np.float32])
    assert_type(f2.sum(axis=1), Fill[tuple[int], np.float64])
    assert_type(f2.sum(0), Fill[tuple[int], np.float64])
    assert_type(f2.sum(), np.float64)
    assert_type(f3.sum(axis=-1), Fill[tuple[int, int], np.float32])
    assert_type(f3.mean(axis=0), Fill[tuple[int, int], np.float32])
    assert_type(f3.mean(), np.float32)
    assert_type(f3.sum(axis=1, keepdims=True), Fill[tuple[int, int, int], np.float32])
    assert_type(f3.sum(axis=(0, 1)), Fill[tuple[int, ...], np.float32] | np.float32)
    assert_type(c1.sum(axis=0), np.complex64)
    assert_type(c1.mean(), np.complex64)
    assert_type(i2.sum(), np.int64)
    assert_type(b2.sum(), np.int64)
    assert_type(u2.sum(), np.uint64)
    assert_type(i2.mean(), np.float64)


def thunks(x: F32) -> None:
    thunk = Thunk(lambda: x)
    assert_type(thunk.unthunk(), F32)
    assert_type(thunk * 2.0, object)
    covariant: Thunk[object] = thunk
    # pyright narrows a declared type to the assigned value's (Thunk[F32]); mypy keeps the declaration
    assert_type(covariant, Thunk[object])  # pyright: ignore[reportAssertTypeFailure]


def pullbacks(a: F32, b: F32, x: F64) -> None:
    assert_type(sr.pullback(sr.kron, a, b)(a), tuple[F32, F32])
    assert_type(sr.pullback(sr.repeat, x, Val(3), axis=Val(0))(x), tuple[F64, NoTangent])
    assert_type(sr.pullback(sr.concatenate, (x, x), axis=Val(1))(x), tuple[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]])
    spec = ArraySpec((3, 4), np.float32)
    assert_type(
        sr.pullback(sr.repeat, spec, Val(2))(a),
        tuple[npt.NDArray[np.generic] | NoTangent, NoTangent],
    )
    assert_type(
        sr.pullback(sr.tile, spec, reps=Val((2, 1)))(a),
        tuple[npt.NDArray[np.generic] | NoTangent],
    )
    assert_type(
        sr.pullback(sr.concatenate, (spec, a), axis=Val(0))(a),
        tuple[tuple[npt.NDArray[np.generic] | NoTangent, ...]],
    )


def user_pullback(x: F64) -> None:
    def double(values: F64) -> F64:
        return 2.0 * values

    assert_type(sr.pullback(double, x)(x), tuple[object, ...])
    sr.register_rrule(double, lambda values: (double(values), lambda dy: (dy,)), pullback=lambda values: lambda dy: (dy,))
