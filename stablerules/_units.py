"""Dtype units shared by the kernel families: the unsigned integer a copy moves an element's
bits as (:data:`UNITS`, :func:`as_units`), and the wide dtype a sum accumulates in
(:data:`WIDENED`)."""

from __future__ import annotations

import numpy as np

from ._arrays import ArrayLike, checked_size

DType = np.dtype[np.generic]

UNITS: dict[int, DType] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
"""By item size (at most 8: a wider element moves as several 8-byte units), the unsigned integer
dtype a copy moves an element's bits as."""

# Accumulation precision: float32 / complex64 sums run in float64 / complex128.
WIDENED: dict[str, DType] = {
    "float32": np.dtype(np.float64),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex128),
    "complex128": np.dtype(np.complex128),
}
"""By floating dtype name, the dtype its sums accumulate in."""


def as_units(array: ArrayLike, unit: DType) -> ArrayLike:
    """The C-ordered bits of ``array`` as a flat array of ``unit`` (one copy when strided)."""
    if not array.flags.c_contiguous:
        # A broadcast view can be far larger than memory: refuse it before copying.
        checked_size(array.shape, array.dtype.itemsize, "a C-ordered copy of an input")
        array = array.copy(order="C")  # keeps the dtype's byte order: the bits are copied as they are
    flat: ArrayLike = array.reshape(-1).view(unit)
    return flat
