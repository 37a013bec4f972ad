"""Independent NumPy references shared by the test modules (never the rules' own formulas)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


def kron_pullback(a: Array, b: Array, dy: Array) -> tuple[Array, Array]:
    """``(da, db)`` of ``np.kron(a, b)`` for cotangent ``dy``, by two einsums over dy's blocks:
    ``da = sum dy * conj(b)``, ``db = sum dy * conj(a)`` (the complex convention of SPEC 4)."""
    n = max(a.ndim, b.ndim)
    a_ = a.reshape((1,) * (n - a.ndim) + a.shape)
    b_ = b.reshape((1,) * (n - b.ndim) + b.shape)
    blocks = dy.reshape(tuple(extent for pair in zip(a_.shape, b_.shape) for extent in pair))
    letters = "abcdefghijklmnopqrst"
    a_axes = "".join(letters[2 * d] for d in range(n))
    b_axes = "".join(letters[2 * d + 1] for d in range(n))
    pairs = "".join(letters[2 * d] + letters[2 * d + 1] for d in range(n))
    da = np.einsum(f"{pairs},{b_axes}->{a_axes}", blocks, np.conj(b_)).reshape(a.shape)
    db = np.einsum(f"{pairs},{a_axes}->{b_axes}", blocks, np.conj(a_)).reshape(b.shape)
    return da, db
