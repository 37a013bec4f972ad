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


# --- 16-bit floats in the kernels: conversions to and from float32 on the bits -------------

HALF_FORMATS = ("bfloat16", "float16")
"""The 16-bit float formats whose adding kernels read and write them as ``uint16`` bits."""

_WIDEN_SOURCE = {
    "bfloat16": '''
@njit(nogil=True, error_model='numpy')
def widen(b):
    """bfloat16 bits as float32: the upper half of its bits (exact)."""
    return np.uint32(np.uint32(b) << np.uint32(16)).view(np.float32)


@njit(nogil=True, error_model='numpy')
def widen_low(word):
    """The first of two bfloat16 values read as one little-endian uint32, as float32."""
    return np.uint32(word << np.uint32(16)).view(np.float32)


@njit(nogil=True, error_model='numpy')
def widen_high(word):
    """The second of two bfloat16 values read as one little-endian uint32, as float32."""
    return np.uint32(word & np.uint32(0xFFFF0000)).view(np.float32)
''',
    "float16": '''
@njit(nogil=True, error_model='numpy')
def widen(b):
    """float16 bits as float32 (exact; NaN payloads kept, as NumPy's cast keeps them)."""
    h = np.uint32(b)
    sign = np.uint32((h & np.uint32(0x8000)) << np.uint32(16))
    e = np.uint32((h >> np.uint32(10)) & np.uint32(0x1F))
    m = np.uint32(h & np.uint32(0x3FF))
    if e == np.uint32(0x1F):
        inf_nan = np.uint32(sign | np.uint32(0x7F800000) | np.uint32(m << np.uint32(13)))
        return inf_nan.view(np.float32)
    if e != np.uint32(0):
        normal = np.uint32(sign | np.uint32((e + np.uint32(112)) << np.uint32(23)) | np.uint32(m << np.uint32(13)))
        return normal.view(np.float32)
    # zero or subnormal: m * 2**-24, exact in float32
    magnitude = np.float32(np.float32(m) * np.float32(5.9604644775390625e-08))
    small = np.uint32(sign | magnitude.view(np.uint32))
    return small.view(np.float32)
''',
}

_NARROW_SOURCE = {
    "bfloat16": '''
@njit(nogil=True, error_model='numpy')
def narrow(v):
    """float32 rounded to bfloat16 bits, to nearest even (NaN quieted, sign kept)."""
    b = np.float32(v).view(np.uint32)
    if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((b >> np.uint32(16)) | np.uint32(0x40))
    return np.uint16((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
''',
    "float16": '''
@njit(nogil=True, error_model='numpy')
def narrow(v):
    """float32 rounded to float16 bits, to nearest even (overflow to infinity, subnormals by
    an integer shift, NaN quieted with its sign and leading payload)."""
    b = np.float32(v).view(np.uint32)
    sign = np.uint32((b >> np.uint32(16)) & np.uint32(0x8000))
    a = np.uint32(b & np.uint32(0x7FFFFFFF))
    if a > np.uint32(0x7F800000):
        o = np.uint32(0x7E00) | ((a >> np.uint32(13)) & np.uint32(0x3FF))
    elif a >= np.uint32(0x477FF000):
        o = np.uint32(0x7C00)
    elif a >= np.uint32(0x38800000):
        o = np.uint32((a - np.uint32(0x38000000) + np.uint32(0xFFF) + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13))
    else:
        e = np.int64(a >> np.uint32(23))
        shift = 126 - e
        if shift > 24 or e == 0:
            o = np.uint32(0)
        else:
            m = np.uint32((a & np.uint32(0x7FFFFF)) | np.uint32(0x800000))
            q = np.uint32(m >> np.uint32(shift))
            r = np.uint32(m & ((np.uint32(1) << np.uint32(shift)) - np.uint32(1)))
            half = np.uint32(np.uint32(1) << np.uint32(shift - 1))
            if r > half or (r == half and (q & np.uint32(1)) != np.uint32(0)):
                q = np.uint32(q + np.uint32(1))
            o = q
    return np.uint16(o | sign)
''',
}

_HELPERS_AT = "from numba import njit, types\n"


def half_helpers(text: str, format: str) -> str:
    """A kernel module's source (``cpu_kernel``'s, which imports NumPy) with ``widen(bits)``
    (16-bit bits to float32, exact) and ``narrow(value)`` (float32 to 16-bit bits, rounded to
    nearest even; NaN kept and quieted, infinities kept) of ``format`` defined before the
    kernel, for its body to call: the conversions then happen in registers, element by element,
    in the kernel that reads or writes the 16-bit array."""
    if format not in HALF_FORMATS:
        raise ValueError(f"half_helpers: format must be one of {HALF_FORMATS}, got {format!r}")
    if "import numpy as np" not in text or _HELPERS_AT not in text:
        raise ValueError("half_helpers: the kernel source must import NumPy (cpu_kernel(..., numpy=True))")
    return text.replace(_HELPERS_AT, _HELPERS_AT + _WIDEN_SOURCE[format] + _NARROW_SOURCE[format], 1)


# --- the same conversions as CUDA device functions ------------------------------------------

_NJIT_DECORATOR = "@njit(nogil=True, error_model='numpy')"
_CUDA_DECORATOR = "@cuda.jit(device=True)"
_CUDA_HELPERS_AT = "from numba import cuda, types\n"


def cuda_half_helpers(text: str, format: str) -> str:
    """A CUDA kernel module's source (``_cuda.cuda_kernel``'s) with ``widen(bits)`` and
    ``narrow(value)`` of ``format`` (:func:`half_helpers`' conversions, the same source) as CUDA
    device functions defined before the kernel: integer operations on ``uint16``/``uint32``
    and one bit reinterpretation between ``uint32`` and ``float32`` (a scalar ``view``, which
    Numba lowers to a register bitcast on every target and the simulator runs as NumPy's
    scalar ``view``). NumPy is imported for the scalar types."""
    if format not in HALF_FORMATS:
        raise ValueError(f"cuda_half_helpers: format must be one of {HALF_FORMATS}, got {format!r}")
    if _CUDA_HELPERS_AT not in text:
        raise ValueError("cuda_half_helpers: the source must be a CUDA kernel module (_cuda.cuda_kernel)")
    helpers = (_WIDEN_SOURCE[format] + _NARROW_SOURCE[format]).replace(_NJIT_DECORATOR, _CUDA_DECORATOR)
    return text.replace(_CUDA_HELPERS_AT, "import numpy as np\n" + _CUDA_HELPERS_AT + helpers, 1)
