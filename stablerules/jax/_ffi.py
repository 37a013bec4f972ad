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

Every reader here is an ``@intrinsic`` (a few LLVM loads and stores), and the handler's own
lines (``_adapter._PROLOGUE``) do the rest: Numba compiles a handler as one function with our
kernels' pipeline (``_kernel_pipeline.HandlerCompiler``). Until round 17 these were
``@njit(inline="always")`` functions over ``carray`` views with an ``np.zeros`` for the error's
arguments: the inlining pass, three ``carray`` overloads and ``np.zeros``' made a handler's
compile 555 ms of the JAX U-Net's cold first step; it is 108 ms now (``bench/README.md``).

Only the generated handler modules import this module (and they only when Numba compiles or
loads them: a handler loaded from its object code needs neither this module nor Numba).
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from llvmlite import ir

from ._adapter import FFI_API_MAJOR, FFI_API_MINOR

API_MAJOR = FFI_API_MAJOR
API_MINOR = FFI_API_MINOR

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


_I64 = ir.IntType(64)
_I32 = ir.IntType(32)


def _at(builder: Any, address: Any, index: Any, element: Any) -> Any:
    """A pointer to ``element`` number ``index`` of an array of them at integer ``address``."""
    return builder.gep(builder.inttoptr(address, element.as_pointer()), [index])


@intrinsic
def frame_words(typingctx, frame):  # type: ignore[no-untyped-def]
    """The call frame's address (``word(words, k)`` reads its word ``k``)."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        return builder.ptrtoint(arguments[0], _I64)

    return types.int64(types.voidptr), codegen


@intrinsic
def word(typingctx, address, index):  # type: ignore[no-untyped-def]
    """The 64-bit word ``index`` of the struct or array at ``address``."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        return builder.load(_at(builder, arguments[0], arguments[1], _I64))

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def word32(typingctx, address, index):  # type: ignore[no-untyped-def]
    """The 32-bit word ``index`` at ``address``, sign-extended."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        return builder.sext(builder.load(_at(builder, arguments[0], arguments[1], _I32)), _I64)

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def set_word32(typingctx, address, index, value):  # type: ignore[no-untyped-def]
    """Write the low 32 bits of ``value`` as 32-bit word ``index`` at ``address``."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        builder.store(builder.trunc(arguments[2], _I32), _at(builder, arguments[0], arguments[1], _I32))
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, types.int64), codegen


@intrinsic
def create_error(typingctx, function, message, code):  # type: ignore[no-untyped-def]
    """``XLA_FFI_Error_Create(&args)`` through the API's ``function`` (an address), with
    ``args = {struct_size 32, extension 0, message (a NUL-terminated uint8 array), code}`` on
    the stack; the error's address."""

    def codegen(context, builder, signature, values):  # type: ignore[no-untyped-def]
        text = context.make_array(signature.args[1])(context, builder, values[1])
        arguments = cgutils.alloca_once(builder, _I64, size=4)
        fields = (ir.Constant(_I64, 32), ir.Constant(_I64, 0), builder.ptrtoint(text.data, _I64), values[2])
        for index, field in enumerate(fields):
            builder.store(field, builder.gep(arguments, [ir.Constant(_I64, index)]))
        function_type = ir.FunctionType(cgutils.voidptr_t, [cgutils.voidptr_t])
        pointer = builder.inttoptr(values[0], function_type.as_pointer())
        error = builder.call(pointer, [builder.bitcast(arguments, cgutils.voidptr_t)])
        return builder.ptrtoint(error, _I64)

    return types.int64(types.int64, message, types.int64), codegen


def _buffer_reader(table_word: int, what: str) -> Any:
    """An intrinsic ``(words, index) ->`` the address of the call frame's ``XLA_FFI_Buffer``
    ``index`` in the table at frame word ``table_word`` (``args`` or ``rets``)."""

    def reader(typingctx, words, index):  # type: ignore[no-untyped-def]
        def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
            table = builder.load(_at(builder, arguments[0], ir.Constant(_I64, table_word), _I64))
            return builder.load(_at(builder, table, arguments[1], _I64))

        return types.int64(types.int64, types.int64), codegen

    reader.__name__ = reader.__qualname__ = what
    reader.__doc__ = f"The address of the call's ``XLA_FFI_Buffer`` {what} ``index``."
    return intrinsic(reader)


argument = _buffer_reader(9, "argument")
result = _buffer_reader(14, "result")


@intrinsic
def dims(typingctx, buffer):  # type: ignore[no-untyped-def]
    """The address of a buffer's extents (``word(dims(b), k)`` is extent ``k``)."""

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        return builder.load(_at(builder, arguments[0], ir.Constant(_I64, 5), _I64))

    return types.int64(types.int64), codegen


@intrinsic
def float64_zeros(typingctx, count):  # type: ignore[no-untyped-def]
    """A new float64 C array of ``count`` zeros, owned by Numba's runtime (freed with the
    handler's last reference to it): ``np.zeros``' allocation and fill lowered in place, so no
    ``np.zeros`` overload is compiled with the handler (about 100 ms)."""
    from stablerules import _private_numba  # noqa: PLC0415 - Numba's array allocation, pinned there

    array = types.Array(types.float64, 1, "C")

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        made = _private_numba.empty_array(context, builder, array, [arguments[0]])
        cgutils.memset(builder, made.data, builder.mul(made.nitems, made.itemsize), 0)
        return made._getvalue()

    return array(types.int64), codegen


@intrinsic
def view(typingctx, buffer, dtype):  # type: ignore[no-untyped-def]
    """A buffer's elements as a 1-D C array of ``dtype`` (a NumPy scalar type): its data, and
    the product of its extents as the length."""
    element = dtype.instance_type
    array = types.Array(element, 1, "C")

    def codegen(context, builder, signature, arguments):  # type: ignore[no-untyped-def]
        from numba.np.arrayobj import populate_array  # noqa: PLC0415 - Numba's own array maker

        buffer_address = arguments[0]
        rank = builder.load(_at(builder, buffer_address, ir.Constant(_I64, 4), _I64))
        extents = builder.load(_at(builder, buffer_address, ir.Constant(_I64, 5), _I64))
        count = cgutils.alloca_once_value(builder, ir.Constant(_I64, 1))
        with cgutils.for_range(builder, rank) as loop:
            extent = builder.load(_at(builder, extents, loop.index, _I64))
            builder.store(builder.mul(builder.load(count), extent), count)
        data_type = context.get_data_type(element)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data_type))
        data = builder.inttoptr(builder.load(_at(builder, buffer_address, ir.Constant(_I64, 3), _I64)), data_type.as_pointer())
        made = context.make_array(array)(context, builder)
        populate_array(
            made,
            data=data,
            shape=cgutils.pack_array(builder, [builder.load(count)]),
            strides=cgutils.pack_array(builder, [itemsize]),
            itemsize=itemsize,
            meminfo=None,
        )
        return made._getvalue()

    return array(types.int64, dtype), codegen
