"""The ops ``stablerules.jax`` defines itself (:data:`DEFINED`): repeat, tile and kron, as
primitives over our kernels, validated by the NumPy op's own checks; and what validation sees
of an argument. Every other op is ``_generic``'s. The design and its decisions are
``stablerules.jax._adapter``'s docstring.
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from .._arrays import ArraySpec, check_dtype, index_data
from .._half import is_half
from .._key import KernelSource, ShapeSignature
from .._codegen import SourceWriter
from .._facts import EngineFacts
from .._plan import Plan
from .._val import Val
from ..rules import kron as _kron_rules
from ..rules import repeat as _repeat_rules
from . import _signatures
from ._adapter import (
    Array,
    Primitive,
    aval_in,
    bind_varying,
    buffer_view,
    cotangent_sharded_as_primal,
    define_primitive,
    errors_named,
    ffi_lowering,
    ffi_target,
    handler_source,
    kernel_name,
    shaped,
    undefined_aval,
)


# ---------------------------------------------------------------------------------------------
# The 16-bit floats (bfloat16, float16): see the adapter's docstring
# ---------------------------------------------------------------------------------------------

_FLOAT32: np.dtype[np.generic] = np.dtype(np.float32)
_UINT16: np.dtype[np.generic] = np.dtype(np.uint16)


def _stand_in_dtype(dtype: np.dtype[np.generic]) -> np.dtype[np.generic]:
    """The dtype validation sees: float32 for a 16-bit float (the NumPy ops' own plans are
    written for the dtypes the kernels have; their checks are of shapes and dtype kinds, which
    float32 shares with the 16-bit formats), any other dtype as it is."""
    return _FLOAT32 if is_half(dtype) else dtype


def _has_half(*values: object) -> bool:
    return builtins.any(is_half(np.dtype(getattr(value, "dtype"))) for value in values)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _wide_linear(linear: Callable[..., Array], *args: Array) -> Array:
    """``linear(*args)``, an XLA op linear in its 16-bit arguments (the others, indices, are
    held fixed) whose transpose adds (a reduction or a scatter-add): the forward is the op on
    the 16-bit arrays themselves (bits moved, jnp's result), its tangent map the op on
    float32 tangents rounded once to the result's dtype, so that its transpose accumulates in
    float32 and rounds once (XLA's CPU scatter-add and reductions of 16-bit operands round
    to the format as they go)."""
    return linear(*args)


@_wide_linear.defjvp
def _wide_linear_jvp(linear: Callable[..., Array], primals: tuple[Array, ...], tangents: tuple[Array, ...]) -> tuple[Array, Array]:
    out = linear(*primals)
    wide = tuple(t.astype(_FLOAT32) if _has_half(p) else p for p, t in zip(primals, tangents))
    return out, linear(*wide).astype(out.dtype)


def accumulating(linear: Callable[..., Array], *args: Array) -> Array:
    """``linear(*args)``; for 16-bit arrays through :func:`_wide_linear`."""
    if _has_half(*args):
        return _wide_linear(linear, *args)
    return linear(*args)


def _half_ffi(primitive: Primitive, ffi: mlir.LoweringRule, *, bits: bool = False) -> mlir.LoweringRule:
    """A CPU lowering of ``primitive`` whose FFI kernels exist for float32 (and the integer
    dtypes) but not for the 16-bit floats: with a 16-bit operand, the same primitive on the
    operands converted to float32 (exact), its results rounded once to their 16-bit dtype by
    XLA's convert (to nearest even, NaN and infinities kept), all inside this lowering; with
    ``bits`` (pure data movement) on ``uint16`` views of the operands instead, the result
    viewed back (bit-exact). Other dtypes go to ``ffi`` as they are."""

    def rule(ctx: mlir.LoweringRuleContext, *args: object, **params: object) -> Any:
        avals = [aval_in(ctx, index) for index in range(len(ctx.avals_in))]
        if not builtins.any(is_half(np.dtype(aval.dtype)) for aval in avals):
            return ffi(ctx, *args, **params)
        out_dtypes = [getattr(aval, "dtype") for aval in ctx.avals_out]

        def wide(*operands: Array, **kwargs: object) -> Any:
            if bits:
                moved = [jax.lax.bitcast_convert_type(x, _UINT16) if is_half(np.dtype(x.dtype)) else x for x in operands]
                result = primitive.bind(*moved, **kwargs)
                return jax.lax.bitcast_convert_type(result, out_dtypes[0])
            converted = [x.astype(_FLOAT32) if is_half(np.dtype(x.dtype)) else x for x in operands]
            results = primitive.bind(*converted, **kwargs)
            if primitive.multiple_results:
                return [r.astype(dtype) for r, dtype in zip(results, out_dtypes)]
            return results.astype(out_dtypes[0])

        return mlir.lower_fun(wide, multiple_results=primitive.multiple_results)(ctx, *args, **params)

    return cast(mlir.LoweringRule, rule)


# ---------------------------------------------------------------------------------------------
# repeat / tile: validation and kernels, through the rule module's kernel export
# ---------------------------------------------------------------------------------------------


def _repeat_form(op: str, x_shape: tuple[int, ...], dtype: np.dtype[np.generic], *args: object) -> _repeat_rules.JuliaForm:
    """Validate ``repeat(x, repeats, axis, inner, outer)`` or ``tile(x, reps)`` by the NumPy
    op's own checks (on an ``ArraySpec``: no data) and write it in Julia's form."""
    spec = ArraySpec(x_shape, dtype)
    plan: Plan
    if op == "tile":
        with errors_named("tile"):
            plan = _repeat_rules.tile.prepare((spec, args[0]), {})
    else:
        repeats = args[0]
        if repeats is not None and not isinstance(repeats, (Val, int)):
            raise TypeError(
                "stablerules.jax.repeat: repeats must be Val(int) (static); a per-element counts "
                "array is data that sets the output's shape, which jit cannot trace (use "
                "jnp.repeat(x, counts, axis, total_repeat_length=...) for that)"
            )
        with errors_named("repeat"):
            plan = _repeat_rules.repeat.prepare((spec, *args[:2]), {"inner": args[2], "outer": args[3]})
    form = _repeat_rules.export_julia_form(plan, x_shape)
    assert form is not None  # static counts always plan a nest
    return form


def _render_repeat_handler(signature: ShapeSignature) -> KernelSource:
    inner, outer = signature.static[0], signature.static[1]
    assert isinstance(inner, tuple) and isinstance(outer, tuple)
    dtype = np.dtype(signature.dtypes[0])
    pullback = signature.kind == "pullback"
    nest = _repeat_rules.export_nest_kernel(inner, outer, dtype, signature.kind)
    kernel = None if nest.request is None else kernel_name(nest.request)
    writer = SourceWriter()
    source, target = ("dy", "dx") if pullback else ("x", "y")
    writer.line(f"{source}_buffer = argument(words, 0)")
    writer.line(f"{target}_buffer = result(words, 0)")
    writer.line(buffer_view(source, f"{source}_buffer", dtype))
    writer.line(buffer_view(target, f"{target}_buffer", dtype))
    if kernel is None or (pullback and nest.accumulates):
        writer.line(f"{target}[:] = 0")
    if kernel is not None:
        writer.line(f"shape = dims({'dx' if pullback else 'x'}_buffer)")
        extents = []
        for k, group in enumerate(nest.groups):
            writer.line(f"e{k} = {' * '.join(f'word(shape, {axis})' for axis in group) or '1'}")
            extents.append(f"e{k}")
        writer.line(f"KERNEL({source}, {target}, {', '.join(extents)}, 0, e0)")
    what = "dx = repeat pullback(dy)" if pullback else "y = repeat(x)"
    return handler_source(signature, f"{what}, inner={inner}, outer={outer}, {dtype.name}", kernel, writer)


def _repeat_target(inner: tuple[int, ...], outer: tuple[int, ...], dtype: np.dtype[np.generic], kind: str) -> str:
    signature = ShapeSignature("jax-ffi-repeat", kind, (inner, outer), (dtype.name,), (len(inner),))
    return ffi_target(signature, functools.partial(_render_repeat_handler, signature))


# ---------------------------------------------------------------------------------------------
# kron: kernels through the rule module's kernel export
# ---------------------------------------------------------------------------------------------


def _kron_extents(writer: SourceWriter, ndim: int, ranks: tuple[int, int]) -> str:
    """Lines computing ``A0..``, ``B0..`` and ``blocks`` from the operand buffers' dims."""
    names = []
    for operand, rank in zip("AB", ranks):
        writer.line(f"{operand.lower()}_shape = dims({operand.lower()}_buffer)")
        for axis in range(ndim):
            source = axis - (ndim - rank)
            writer.line(f"{operand}{axis} = {f'word({operand.lower()}_shape, {source})' if source >= 0 else '1'}")
            names.append(f"{operand}{axis}")
    writer.line(f"blocks = {'A0 * B0' if ndim > 1 else 'A0'}")
    names.sort(key=lambda name: (name[0], int(name[1:])))
    return ", ".join(names)


def _render_kron_handler(signature: ShapeSignature) -> KernelSource:
    a_ndim, b_ndim = signature.ndims
    dtype = np.dtype(signature.dtypes[0])
    ndim = max(a_ndim, b_ndim, 1)
    kernels = _kron_rules.export_kron_kernels(a_ndim, b_ndim, dtype)
    assert kernels is not None  # kron() binds the primitive only where kernels serve
    writer = SourceWriter()
    if signature.kind == "forward":
        writer.line("a_buffer = argument(words, 0)")
        writer.line("b_buffer = argument(words, 1)")
        writer.line("y_buffer = result(words, 0)")
        for name in ("a", "b", "y"):
            writer.line(buffer_view(name, f"{name}_buffer", dtype))
        extents = _kron_extents(writer, ndim, (a_ndim, b_ndim))
        writer.line(f"KERNEL(y, a, b, {extents}, 0, blocks)")
        kernel, what = kernel_name(kernels.forward), "y = kron(a, b)"
    else:
        writer.line("dy_buffer = argument(words, 0)")
        writer.line("a_buffer = argument(words, 1)")
        writer.line("b_buffer = argument(words, 2)")
        writer.line("da_buffer = result(words, 0)")
        writer.line("db_buffer = result(words, 1)")
        for name in ("dy", "a", "b", "da", "db"):
            writer.line(buffer_view(name, f"{name}_buffer", dtype))
        extents = _kron_extents(writer, ndim, (a_ndim, b_ndim))
        if dtype == np.float64:
            writer.line("# float64: the kernel's float64 accumulators are XLA's output buffers")
            writer.line("da[:] = 0")
            writer.line("db[:] = 0")
            writer.line(f"KERNEL(dy, a, b, da, db, {extents}, 0, blocks)")
        else:
            writer.line("# the kernel accumulates in float64 (see stablerules.rules.kron)")
            writer.line("da_total = float64_zeros(da.size)")
            writer.line("db_total = float64_zeros(db.size)")
            writer.line(f"KERNEL(dy, a, b, da_total, db_total, {extents}, 0, blocks)")
            writer.line("for i in range(da.size):")
            writer.line(f"    da[i] = da_total[i]")
            writer.line("for i in range(db.size):")
            writer.line(f"    db[i] = db_total[i]")
        kernel, what = kernel_name(kernels.pullback), "(da, db) = kron pullback(dy)"
    return handler_source(signature, f"{what}, ndims {a_ndim} and {b_ndim}, {dtype.name}", kernel, writer)


def _kron_target(a_ndim: int, b_ndim: int, dtype: np.dtype[np.generic], kind: str) -> str:
    signature = ShapeSignature("jax-ffi-kron", kind, (), (dtype.name,), (a_ndim, b_ndim))
    return ffi_target(signature, functools.partial(_render_kron_handler, signature))


# ---------------------------------------------------------------------------------------------
# repeat / tile primitives
# ---------------------------------------------------------------------------------------------

repeat_p = define_primitive("repeat")
repeat_pullback_p = define_primitive("repeat_pullback")


def _repeat_out_shape(shape: tuple[int, ...], inner: tuple[int, ...], outer: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(extent * i * o for extent, i, o in zip(shape, inner, outer))


repeat_p.def_abstract_eval(
    lambda x, *, inner, outer: shaped("repeat", _repeat_out_shape(x.shape, inner, outer), x.dtype, x)
)
repeat_pullback_p.def_abstract_eval(
    lambda dy, *, inner, outer, x_shape: shaped("repeat pullback", x_shape, dy.dtype, dy)
)


def _repeat_lowering_target(kind: str) -> Callable[..., str]:
    def target(ctx: mlir.LoweringRuleContext, *, inner: tuple[int, ...], outer: tuple[int, ...], **_: object) -> str:
        return _repeat_target(inner, outer, np.dtype(aval_in(ctx, 0).dtype), kind)

    return target


def _repeat_xla(x: Array, *, inner: tuple[int, ...], outer: tuple[int, ...]) -> Array:
    """Julia's ``repeat(x, inner, outer)`` as XLA's own ops: one broadcast and a reshape.

    Along each axis of extent ``n`` the result is ``outer`` copies of the ``inner``-fold
    repeated axis, index ``o * (n * i) + j * i + r`` holding ``x[j]``: ``x`` viewed as
    ``(1, n, 1)`` per axis, broadcast to ``(o, n, i)`` and flattened. XLA fuses it into its
    consumers; only the pullback (a reduction XLA does less well) runs our kernel."""
    spread = tuple(v for n in x.shape for v in (1, n, 1))
    wide = tuple(v for n, i, o in zip(x.shape, inner, outer) for v in (o, n, i))
    return jnp.reshape(jnp.broadcast_to(jnp.reshape(x, spread), wide), _repeat_out_shape(x.shape, inner, outer))


def _explicitly_sharded(aval: object) -> bool:
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    return spec is not None and any(part is not None for part in spec)


def _forward_lowering(xla: Callable[..., Array], ffi: mlir.LoweringRule) -> mlir.LoweringRule:
    """XLA's own ops for a forward, except on operands sharded over an explicit mesh axis (JAX
    refuses a reshape that merges a sharded axis without an output sharding): there, our
    kernel, as before, whose custom call gathers its operands."""
    own = mlir.lower_fun(xla, multiple_results=False)

    def rule(ctx: mlir.LoweringRuleContext, *args: object, **params: object) -> Any:
        if any(_explicitly_sharded(aval) for aval in ctx.avals_in):
            return ffi(ctx, *args, **params)
        return own(ctx, *args, **params)

    return cast(mlir.LoweringRule, rule)


# The forward is XLA's own (fusable, nothing to compile); the pullback is our kernel (FFI).
# 16-bit floats: the forward kernel moves their bits (uint16), the pullback runs in float32.
mlir.register_lowering(
    repeat_p,
    _forward_lowering(_repeat_xla, _half_ffi(repeat_p, ffi_lowering(_repeat_lowering_target("forward")), bits=True)),
    platform="cpu",
)
mlir.register_lowering(
    repeat_pullback_p, _half_ffi(repeat_pullback_p, ffi_lowering(_repeat_lowering_target("pullback"))), platform="cpu"
)


def _repeat_transpose(ct: Array, x: object, *, inner: tuple[int, ...], outer: tuple[int, ...]) -> list[Array]:
    assert ad.is_undefined_primal(x)
    return [repeat_pullback_p.bind(ct, inner=inner, outer=outer, x_shape=tuple(undefined_aval(x).shape))]


def _repeat_pullback_transpose(
    ct: Array, dy: object, *, inner: tuple[int, ...], outer: tuple[int, ...], x_shape: tuple[int, ...]
) -> list[Array]:
    return [repeat_p.bind(ct, inner=inner, outer=outer)]


ad.deflinear2(repeat_p, cotangent_sharded_as_primal(_repeat_transpose))
ad.deflinear2(repeat_pullback_p, cotangent_sharded_as_primal(_repeat_pullback_transpose))


def _repeat_batch(args: Sequence[Array], dims: Sequence[int | None], *, inner: tuple[int, ...], outer: tuple[int, ...]) -> tuple[Array, int]:
    (x,), (axis,) = args, dims
    x = jnp.moveaxis(x, axis, 0) if axis is not None else x
    return repeat_p.bind(x, inner=(1,) + inner, outer=(1,) + outer), 0


def _repeat_pullback_batch(
    args: Sequence[Array], dims: Sequence[int | None], *, inner: tuple[int, ...], outer: tuple[int, ...], x_shape: tuple[int, ...]
) -> tuple[Array, int]:
    (dy,), (axis,) = args, dims
    dy = jnp.moveaxis(dy, axis, 0) if axis is not None else dy
    batched = (dy.shape[0],) + x_shape
    return repeat_pullback_p.bind(dy, inner=(1,) + inner, outer=(1,) + outer, x_shape=batched), 0


batching.primitive_batchers[repeat_p] = _repeat_batch
batching.primitive_batchers[repeat_pullback_p] = _repeat_pullback_batch


def _repeat_call(op: str, x: object, *args: object) -> Array:
    with errors_named(op):
        spec = array_spec(x, "x")
    array = jnp.asarray(x)
    form = _repeat_form(op, spec.shape, spec.dtype, *args)
    result: Array = repeat_p.bind(jnp.reshape(array, form.shape), inner=form.inner, outer=form.outer)
    return jnp.reshape(result, form.out_shape)


def repeat(
    x: Array,
    repeats: Val[int] | int | None = None,
    axis: Val[int] | int | None = None,
    *,
    inner: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...] | None = None,
    outer: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...] | None = None,
) -> Array:
    """``stablerules.repeat`` on a JAX array, inside ``jit``/``grad``/``vmap``: NumPy's
    ``repeat(x, Val(k), axis=Val(d))`` or Julia's ``repeat(x, inner=Val(...), outer=Val(...))``.
    Counts are static (``Val``); on the CPU the forward is XLA's own (fused with its
    neighbours) and the pullback our compiled kernel inside XLA (FFI)."""
    return _repeat_call("repeat", x, repeats, axis, inner, outer)


def tile(x: Array, reps: Val[int] | Val[tuple[int, ...]] | int | tuple[int, ...]) -> Array:
    """``stablerules.tile`` (``np.tile``) on a JAX array; ``reps`` static."""
    return _repeat_call("tile", x, reps)


# ---------------------------------------------------------------------------------------------
# kron primitives
# ---------------------------------------------------------------------------------------------

kron_p = define_primitive("kron")
kron_tangent_p = define_primitive("kron_tangent")  # kron(ta, b) + kron(a, tb)
kron_pullback_p = define_primitive("kron_pullback", multiple_results=True)  # (da, db)


def _kron_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a_shape), len(b_shape))
    a_padded = (1,) * (n - len(a_shape)) + tuple(a_shape)
    b_padded = (1,) * (n - len(b_shape)) + tuple(b_shape)
    return tuple(p * q for p, q in zip(a_padded, b_padded))


kron_p.def_abstract_eval(lambda a, b: shaped("kron", _kron_shape(a.shape, b.shape), a.dtype, a, b))
kron_tangent_p.def_abstract_eval(
    lambda ta, tb, a, b: shaped("kron tangent", _kron_shape(a.shape, b.shape), a.dtype, ta, tb, a, b)
)
kron_pullback_p.def_abstract_eval(
    lambda dy, a, b: [shaped("kron pullback", v.shape, v.dtype, dy, a, b) for v in (a, b)]
)


def _kron_lowering_target(kind: str) -> Callable[..., str]:
    def target(ctx: mlir.LoweringRuleContext) -> str:
        first = 0 if kind == "forward" else 1
        a, b = aval_in(ctx, first), aval_in(ctx, first + 1)
        return _kron_target(len(a.shape), len(b.shape), np.dtype(a.dtype), kind)

    return target


def _kron_xla(a: Array, b: Array) -> Array:
    """``kron(a, b)`` as XLA's own ops: both padded to one rank, ``a`` viewed as
    ``(m, 1, n, 1, ...)`` times ``b`` as ``(1, p, 1, q, ...)``, flattened to ``(m p, n q, ...)``;
    each element is one product ``a[i] * b[j]``, so exactly our kernel's values."""
    shape = _kron_shape(a.shape, b.shape)
    rank = len(shape)
    a_full = (1,) * (rank - a.ndim) + tuple(a.shape)
    b_full = (1,) * (rank - b.ndim) + tuple(b.shape)
    left = jnp.reshape(a, tuple(v for m in a_full for v in (m, 1)))
    right = jnp.reshape(b, tuple(v for p in b_full for v in (1, p)))
    return jnp.reshape(left * right, shape)


# The forward is XLA's own (fusable, nothing to compile); the pullback is our kernel (FFI).
# 16-bit floats: both kernels run in float32 (a product of two 16-bit values is exact there).
mlir.register_lowering(
    kron_p, _forward_lowering(_kron_xla, _half_ffi(kron_p, ffi_lowering(_kron_lowering_target("forward")))), platform="cpu"
)
mlir.register_lowering(
    kron_pullback_p, _half_ffi(kron_pullback_p, ffi_lowering(_kron_lowering_target("pullback"))), platform="cpu"
)
mlir.register_lowering(
    kron_tangent_p,
    mlir.lower_fun(lambda ta, tb, a, b: bind_varying(kron_p, ta, b) + bind_varying(kron_p, a, tb), multiple_results=False),
    platform="cpu",
)


def _zeros_like_aval(value: object) -> Array:
    """Zeros shaped as a primal, which may be a transpose rule's undefined argument."""
    if ad.is_undefined_primal(value):
        aval = undefined_aval(value)
        return jnp.zeros(aval.shape, aval.dtype)
    array = jnp.asarray(value)
    return jnp.zeros(array.shape, array.dtype)


def _kron_jvp(primals: Sequence[Array], tangents: Sequence[object]) -> tuple[Array, Array]:
    a, b = primals
    ta, tb = tangents
    y = bind_varying(kron_p, a, b)
    if type(ta) is ad.Zero:
        return y, bind_varying(kron_p, a, tb)
    if type(tb) is ad.Zero:
        return y, bind_varying(kron_p, ta, b)
    return y, bind_varying(kron_tangent_p, ta, tb, a, b)


def _kron_transpose(ct: object, a: object, b: object) -> list[object]:
    # One operand is undefined (kron_p appears in a linear position only with one tangent).
    if type(ct) is ad.Zero:
        return [ad.Zero(undefined_aval(v)) if ad.is_undefined_primal(v) else None for v in (a, b)]
    if ad.is_undefined_primal(a):
        return [bind_varying(kron_pullback_p, ct, _zeros_like_aval(a), b)[0], None]
    return [None, bind_varying(kron_pullback_p, ct, a, _zeros_like_aval(b))[1]]


def _instantiate(value: object, like: object) -> Array:
    if type(value) is ad.Zero:
        return _zeros_like_aval(like)
    return value  # type: ignore[return-value]


def _kron_tangent_jvp(primals: Sequence[Array], tangents: Sequence[object]) -> tuple[Array, Array]:
    ta, tb, a, b = primals
    dta, dtb, da, db = (_instantiate(t, p) for t, p in zip(tangents, primals))
    y = bind_varying(kron_tangent_p, ta, tb, a, b)
    return y, bind_varying(kron_tangent_p, dta, dtb, a, b) + bind_varying(kron_tangent_p, ta, tb, da, db)


def _kron_tangent_transpose(ct: object, ta: object, tb: object, a: object, b: object) -> list[object]:
    # Linear in (ta, tb) with (a, b) known, or in (a, b) with (ta, tb) known: kron_tangent is
    # symmetric under swapping the pairs, and either transpose is one fused pullback.
    tangents_undefined = ad.is_undefined_primal(ta) or ad.is_undefined_primal(tb)
    if type(ct) is ad.Zero:
        return [ad.Zero(undefined_aval(v)) if ad.is_undefined_primal(v) else None for v in (ta, tb, a, b)]
    if tangents_undefined:
        da, db = bind_varying(kron_pullback_p, ct, a, b)
        return [da if ad.is_undefined_primal(ta) else None, db if ad.is_undefined_primal(tb) else None, None, None]
    da, db = bind_varying(kron_pullback_p, ct, ta, tb)
    return [None, None, da if ad.is_undefined_primal(a) else None, db if ad.is_undefined_primal(b) else None]


def _kron_pullback_jvp(primals: Sequence[Array], tangents: Sequence[object]) -> tuple[list[Array], list[Array]]:
    dy, a, b = primals
    tdy, ta, tb = (_instantiate(t, p) for t, p in zip(tangents, primals))
    da, db = bind_varying(kron_pullback_p, dy, a, b)
    first = bind_varying(kron_pullback_p, tdy, a, b)
    second = bind_varying(kron_pullback_p, dy, ta, tb)
    return [da, db], [first[0] + second[0], first[1] + second[1]]


def _kron_pullback_transpose(cts: Sequence[object], dy: object, a: object, b: object) -> list[object]:
    ha, hb = (_instantiate(ct, v) for ct, v in zip(cts, (a, b)))
    if ad.is_undefined_primal(dy):
        return [bind_varying(kron_tangent_p, ha, hb, a, b), None, None]
    da_bar, db_bar = bind_varying(kron_pullback_p, dy, ha, hb)
    return [None, da_bar if ad.is_undefined_primal(a) else None, db_bar if ad.is_undefined_primal(b) else None]


ad.primitive_jvps[kron_p] = _kron_jvp
ad.primitive_transposes[kron_p] = cotangent_sharded_as_primal(_kron_transpose)
ad.primitive_jvps[kron_tangent_p] = _kron_tangent_jvp
ad.primitive_transposes[kron_tangent_p] = cotangent_sharded_as_primal(_kron_tangent_transpose)
ad.primitive_jvps[kron_pullback_p] = _kron_pullback_jvp
ad.primitive_transposes[kron_pullback_p] = cotangent_sharded_as_primal(_kron_pullback_transpose)


def _sequential_batch(primitive: Primitive) -> Callable[..., tuple[object, object]]:
    """A batching rule as an XLA loop over the batch: one kernel call per element."""

    def batch(args: Sequence[Array], dims: Sequence[int | None], **params: object) -> tuple[object, object]:
        size = next(arg.shape[dim] for arg, dim in zip(args, dims) if dim is not None)
        moved = [
            jnp.moveaxis(arg, dim, 0) if dim is not None else jnp.broadcast_to(arg, (size,) + arg.shape)
            for arg, dim in zip(args, dims)
        ]
        out = jax.lax.map(lambda xs: primitive.bind(*xs, **params), tuple(moved))
        return (out, [0] * len(out)) if primitive.multiple_results else (out, 0)

    return batch


def _padded_item(x: Array, batched: bool, rank: int) -> Array:
    """A kron operand as ``(batch or 1,) + its item shape padded to ``rank`` axes``."""
    item = x.shape[1:] if batched else x.shape
    lead = (x.shape[0],) if batched else (1,)
    return jnp.reshape(x, lead + (1,) * (rank - len(item)) + tuple(item))


def _batched_kron(a: Array, a_dim: int | None, b: Array, b_dim: int | None) -> tuple[Array, int | None]:
    """``kron`` per batch element. With one operand batched it is one kron call: the other
    gets a leading axis of 1, and ``kron(a(N, ...), b(1, ...))[n] = kron(a[n], b)``. With both
    batched it is an XLA loop over the batch (one kernel call per element)."""
    if a_dim is None and b_dim is None:
        return bind_varying(kron_p, a, b), None
    if a_dim is not None and b_dim is not None:
        pairs = (jnp.moveaxis(a, a_dim, 0), jnp.moveaxis(b, b_dim, 0))
        return jax.lax.map(lambda ab: bind_varying(kron_p, *ab), pairs), 0
    a = a if a_dim is None else jnp.moveaxis(a, a_dim, 0)
    b = b if b_dim is None else jnp.moveaxis(b, b_dim, 0)
    rank = max(a.ndim - (a_dim is not None), b.ndim - (b_dim is not None))
    return bind_varying(kron_p, _padded_item(a, a_dim is not None, rank), _padded_item(b, b_dim is not None, rank)), 0


def _kron_batch(args: Sequence[Array], dims: Sequence[int | None]) -> tuple[Array, int | None]:
    return _batched_kron(args[0], dims[0], args[1], dims[1])


def _kron_tangent_batch(args: Sequence[Array], dims: Sequence[int | None]) -> tuple[Array, int | None]:
    ta, tb, a, b = args
    first, first_dim = _batched_kron(ta, dims[0], b, dims[3])
    second, second_dim = _batched_kron(a, dims[2], tb, dims[1])
    size = next(arg.shape[dim] for arg, dim in zip(args, dims) if dim is not None)
    first = first if first_dim is not None else jnp.broadcast_to(first, (size,) + first.shape)
    second = second if second_dim is not None else jnp.broadcast_to(second, (size,) + second.shape)
    return first + second, 0


batching.primitive_batchers[kron_p] = _kron_batch
batching.primitive_batchers[kron_tangent_p] = _kron_tangent_batch
# The pullback gives each batch element its own gradients of both operands (a shared operand's
# gradient is not summed over the batch here), which one kron pullback cannot: an XLA loop.
batching.primitive_batchers[kron_pullback_p] = _sequential_batch(kron_pullback_p)


# The 16-bit floats' kernels are the float32 ones (``_half_ffi``).
_KERNEL_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64), np.dtype(jnp.bfloat16), np.dtype(jnp.float16)})


def kron(a: Array, b: Array) -> Array:
    """``stablerules.kron`` (``np.kron``) on JAX arrays, inside ``jit``/``grad``/``vmap``.

    float32/float64 operands (promoted to one dtype): the forward is XLA's own ops, the fused
    pullback our kernel inside XLA, except for the small signatures of ``ENGINE_FACTS``'
    ``jax_forms`` (2-axis operands, fewer than ``KRON_JAX_BELOW`` result elements), whose
    pullback is JAX's autodiff of those XLA ops; complex and integer operands use ``jnp.kron``. bfloat16
    and float16 (jnp's promotion: two different 16-bit formats give float32): the forward
    is XLA's product in the format, the pullback our float32 kernel (``_half_ffi``), rounded
    once; beyond the kernels' ranks, ``jnp.kron`` of float32 conversions, rounded once."""
    with errors_named("kron"):
        for operand, name in ((a, "a"), (b, "b")):
            check_dtype(array_spec(operand, name).dtype, name)
    a_array, b_array = jnp.asarray(a), jnp.asarray(b)
    dtype = np.dtype(jnp.result_type(a_array, b_array))
    if dtype not in _KERNEL_DTYPES or max(a_array.ndim, b_array.ndim) > _kron_rules.EXPORT_MAX_AXES:
        if is_half(dtype):  # each product exact in float32, rounded once; the pullback's sums too
            return jnp.kron(a_array.astype(_FLOAT32), b_array.astype(_FLOAT32)).astype(dtype)
        return jnp.kron(a_array, b_array)
    a_array, b_array = a_array.astype(dtype), b_array.astype(dtype)
    if _xla_pullback(_kron_rules.ENGINE_FACTS["kron"], (a_array, b_array), _kron_shape(a_array.shape, b_array.shape)):
        return _kron_xla(a_array, b_array)  # JAX's autodiff of XLA's own ops gives the pullback
    result: Array = bind_varying(kron_p, a_array, b_array)
    return result


def _no_statics(name: str, default: object = None) -> object:
    return default


def _xla_pullback(facts: EngineFacts, arrays: Sequence[Array], out_shape: tuple[int, ...]) -> bool:
    """Whether a signature takes JAX's own pullback: one of the op's ``jax_forms`` covers it
    (shapes are static at trace time: the choice is made once per signature, under ``jit``
    too). 16-bit floats keep our kernel, which accumulates in float32 (SPEC section 15), and
    so do operands sharded over an explicit mesh axis, whose XLA forward JAX refuses (see
    :func:`_forward_lowering`)."""
    if any(is_half(np.dtype(array.dtype)) or _explicitly_sharded(jax.typeof(array)) for array in arrays):
        return False
    shapes = tuple(tuple(array.shape) for array in arrays)
    return any(form.covers(_no_statics, shapes, math.prod(out_shape)) for form in facts.jax_forms)


# ---------------------------------------------------------------------------------------------
# What validation sees of an argument (here and in ``_generic``)
# ---------------------------------------------------------------------------------------------


def sequence_spec(value: object) -> object:
    """An element of a sequence (or of ``cat``'s arrays): a ``jax.Array`` (or tracer) or
    NumPy array as an ``ArraySpec`` of its shape and dtype; a Python scalar as itself (weak,
    as NumPy's); anything else as itself, for the op's checks to name."""
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        return ArraySpec(tuple(value.shape), _stand_in_dtype(np.dtype(value.dtype)))
    return value


def array_spec(value: object, name: str) -> ArraySpec:
    """An input array's shape and dtype (a tracer's too), or our ``TypeError`` naming the
    argument when ``jnp`` cannot read it as an array."""
    if not isinstance(value, (jax.Array, np.ndarray, np.generic)):
        try:
            value = jnp.asarray(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"argument {name!r} must be an array (a jax.Array, or what jnp.asarray reads as one), "
                f"got {type(value).__name__}"
            ) from None
    return ArraySpec(tuple(getattr(value, "shape")), _stand_in_dtype(np.dtype(getattr(value, "dtype"))))


def indexing_spec(value: object) -> ArraySpec:
    """An array of an op with integer data, read as NumPy reads it (``np.asarray``)."""
    array = value if isinstance(value, (jax.Array, np.ndarray)) else np.asarray(index_data(value))
    return ArraySpec(tuple(array.shape), _stand_in_dtype(np.dtype(array.dtype)))


DEFINED: dict[str, Callable[..., object]] = {
    "repeat": repeat,
    "tile": tile,
    "kron": kron,
}
"""The ops this adapter defines itself (the module docstring of ``_generic`` says why each);
every other op is ``_generic``'s, from its family's forward rule."""

# mypy checks each of them against its op's Protocol (the generated call signatures).
_TYPED: tuple[_signatures.Repeat, _signatures.Tile, _signatures.Kron] = (repeat, tile, kron)
