"""Reading XLA's typed-FFI call frame from Numba: the helpers every generated handler uses.

A handler is a ``@cfunc(voidptr(voidptr))``: XLA calls it with a ``XLA_FFI_CallFrame*`` and
takes back an ``XLA_FFI_Error*`` (null for success). The structs are read as arrays of 64-bit
words at the offsets of ``xla/ffi/api/c_api.h`` for FFI API version 0.3 on a 64-bit
little-endian machine (the header ships in ``jax.ffi.include_dir()``; ``tests/test_jax.py``
re-derives the offsets below from it)::

    XLA_FFI_CallFrame  (22 words)  0 struct_size  1 extension_start  2 api  3 ctx  4 stage
                                   5-9 args {struct_size, ext, size, types, args}
                                   10-14 rets {struct_size, ext, size, types, rets}
                                   15-20 attrs  21 future
    XLA_FFI_Buffer                 0 struct_size  1 ext  2 dtype  3 data  4 rank  5 dims
    XLA_FFI_Extension_Base         0 struct_size  1 type (1 = metadata)  2 next; 3 metadata*
    XLA_FFI_Metadata (int32s)      6 api major  7 api minor  8 traits
    XLA_FFI_Api                    words 2-4 api_version {struct_size, ext, major|minor}
                                   6 XLA_FFI_Error_Create
    XLA_FFI_Error_Create_Args      0 struct_size  1 ext  2 message  3 errc

Version policy: a handler answers XLA's metadata query with version 0.3, and at execution it
reads the version of the API that called it (``api->api_version``) and the call frame's
``struct_size``; anything but 0.3 and 168 bytes (the size through ``attrs``, as the header's
``XLA_FFI_DEFINE_STRUCT_TRAITS`` counts it) returns an ``XLA_FFI_Error`` (through the
API's own ``XLA_FFI_Error_Create``) without reading a buffer. ``stablerules.jax`` also checks
the version of the installed headers before it registers any handler.

Only the generated handler modules import this module (and they only when Numba compiles or
loads them: a handler loaded from its object code needs neither this module nor Numba).
"""

from __future__ import annotations

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from llvmlite import ir

from ._adapter import FFI_API_MAJOR, FFI_API_MINOR

API_MAJOR = FFI_API_MAJOR
API_MINOR = FFI_API_MINOR

FRAME_WORDS = 22
# XLA_FFI_CallFrame_STRUCT_SIZE: the header defines a struct's size through a named last field
# (XLA_FFI_DEFINE_STRUCT_TRAITS(XLA_FFI_CallFrame, attrs)), so ``future`` is not counted.
FRAME_BYTES = 21 * 8
STAGE_EXECUTE = 3
METADATA_EXTENSION = 1
# XLA_FFI_Error_Code_FAILED_PRECONDITION (absl's numbering, as in c_api.h).
ERROR_FAILED_PRECONDITION = 9

HANDLER_SIGNATURE = types.voidptr(types.voidptr)


@intrinsic
def address_as_pointer(typingctx, address):  # type: ignore[no-untyped-def]
    """An integer address as a ``void*`` (what ``carray`` takes)."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        return builder.inttoptr(arguments[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


@intrinsic
def call_error_create(typingctx, function, arguments):  # type: ignore[no-untyped-def]
    """``((XLA_FFI_Error* (*)(void*)) function)(arguments)``: the API's error constructor."""

    def codegen(context, builder, signature, values):  # type: ignore[no-untyped-def]
        function_type = ir.FunctionType(cgutils.voidptr_t, [cgutils.voidptr_t])
        pointer = builder.inttoptr(values[0], function_type.as_pointer())
        error = builder.call(pointer, [builder.inttoptr(values[1], cgutils.voidptr_t)])
        return builder.ptrtoint(error, ir.IntType(64))

    return types.int64(types.int64, types.int64), codegen


@njit(inline="always")
def frame_words(frame):  # type: ignore[no-untyped-def]
    return carray(frame, FRAME_WORDS, np.int64)


@njit(inline="always")
def answer_metadata(words):  # type: ignore[no-untyped-def]
    """True (after writing version 0.3 and no traits) when XLA asks for the handler's metadata."""
    extension = words[1]
    while extension != 0:
        base = carray(address_as_pointer(extension), 4, np.int64)
        if (base[1] & 0xFFFFFFFF) == METADATA_EXTENSION:
            metadata = carray(address_as_pointer(base[3]), 10, np.int32)
            metadata[6] = API_MAJOR
            metadata[7] = API_MINOR
            metadata[8] = 0
            return True
        extension = base[2]
    return False


@njit(inline="always")
def version_error(words, message):  # type: ignore[no-untyped-def]
    """0 when the calling API is version 0.3 with a 0.3 call frame, else an ``XLA_FFI_Error*``
    (its address) made by the API from ``message`` (NUL-terminated bytes as a uint8 array)."""
    api = carray(address_as_pointer(words[2]), 8, np.int64)
    version = carray(address_as_pointer(words[2] + 32), 2, np.int32)
    if words[0] == FRAME_BYTES and version[0] == API_MAJOR and version[1] == API_MINOR:
        return 0
    create_args = np.zeros(4, np.int64)
    create_args[0] = 32
    create_args[2] = message.ctypes.data
    create_args[3] = ERROR_FAILED_PRECONDITION
    return call_error_create(api[6], create_args.ctypes.data)


@njit(inline="always")
def argument(words, index):  # type: ignore[no-untyped-def]
    return carray(address_as_pointer(words[9]), words[7], np.int64)[index]


@njit(inline="always")
def result(words, index):  # type: ignore[no-untyped-def]
    return carray(address_as_pointer(words[14]), words[12], np.int64)[index]


@njit(inline="always")
def dims(buffer):  # type: ignore[no-untyped-def]
    fields = carray(address_as_pointer(buffer), 6, np.int64)
    return carray(address_as_pointer(fields[5]), fields[4], np.int64)


@njit(inline="always")
def data(buffer):  # type: ignore[no-untyped-def]
    return carray(address_as_pointer(buffer), 6, np.int64)[3]


@njit(inline="always")
def size(buffer):  # type: ignore[no-untyped-def]
    count = 1
    for extent in dims(buffer):
        count *= extent
    return count
