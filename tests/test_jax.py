"""``stablerules.jax``: our ops inside JAX, the kernel-backed ones through XLA's FFI.

Gradients are checked by ``jax.test_util.check_grads`` (finite differences, both modes, to
second order) and against ``jnp``'s own composition of the same op; forward values against
NumPy / ``stablerules``' NumPy ops. The FFI handler is also driven directly with call frames
built here from the header's struct layouts (metadata query, refused API versions).
"""

from __future__ import annotations

import ctypes
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, assert_type

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import stablerules as sr
import stablerules.jax as srj
from stablerules import Val
from stablerules.jax import _adapter as _jax
from stablerules.jax import _ffi
from stablerules.jax import _generic as _jax_generic
from stablerules.jax import _ops as _jax_ops
from stablerules import _objectcode
from stablerules._rule import RuleOp
from stablerules._key import ShapeSignature

from .rules import assert_every_op_has_a_row, collect, op_of

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(23)


def rand(*shape: int, dtype: Any = np.float64) -> jax.Array:
    values = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * RNG.standard_normal(shape)
    return jnp.asarray(values.astype(dtype))


def julia(x: Any, inner: tuple[int, ...], outer: tuple[int, ...]) -> Any:
    for axis, count in enumerate(inner):
        x = jnp.repeat(x, count, axis=axis)
    return jnp.tile(x, outer)


# (name, ours, arrays, jnp's own composition or None): each family's jax_cases rows.
CASES: list[tuple[str, Callable[..., Any], tuple[jax.Array, ...], Callable[..., Any] | None]] = collect("jax_cases", rand)

# The structure ops: (name, ours, arrays, NumPy's own op on NumPy arrays), each family's
# jax_structure rows. Gradients are checked by check_grads (finite differences); values
# against NumPy.
STRUCTURE: list[tuple[str, Callable[..., Any], tuple[jax.Array, ...], Callable[..., Any]]] = collect("jax_structure", rand)
STRUCTURE_IDS = [case[0] for case in STRUCTURE]
CASES += [(name, fn, args, None) for name, fn, args, _ in STRUCTURE]
IDS = [case[0] for case in CASES]
WITH_REFERENCE = [case for case in CASES if case[3] is not None]

# Ops without rows in CASES, and why; every other op of the schema must have one.
NO_ROWS = {
    "getindex": "indices are data (or sr.ix): test_indexing_ops_equal_numpy_and_check_grads_to_second_order",
    "take": "indices are data: test_indexing_ops_equal_numpy_and_check_grads_to_second_order",
    "take_along_axis": "indices are data: test_indexing_ops_equal_numpy_and_check_grads_to_second_order",
    "index_add": "indices are data: test_indexing_ops_equal_numpy_and_check_grads_to_second_order",
}


def test_every_op_has_a_row() -> None:
    assert_every_op_has_a_row("jax_cases and jax_structure", (op_of(name) for name in IDS), NO_ROWS)
    assert_every_op_has_a_row("jax_op_calls", OP_CALLS)
    assert len(set(IDS)) == len(IDS), "two rows share an id"


@pytest.mark.parametrize(("name", "fn", "args", "reference"), CASES, ids=IDS)
def test_check_grads_second_order_both_modes(
    name: str, fn: Callable[..., Any], args: tuple[jax.Array, ...], reference: Callable[..., Any] | None
) -> None:
    check_grads(fn, args, order=2, modes=("fwd", "rev"))
    if name not in STRUCTURE_IDS:  # jnp compositions: jit changes nothing of ours (and costs ~1 s a case)
        check_grads(jax.jit(fn), args, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize(("name", "fn", "args", "reference"), WITH_REFERENCE, ids=[c[0] for c in WITH_REFERENCE])
def test_values_and_gradients_equal_jnps_composition(
    name: str, fn: Callable[..., Any], args: tuple[jax.Array, ...], reference: Callable[..., Any]
) -> None:
    expected = reference(*args)
    np.testing.assert_allclose(jax.jit(fn)(*args), expected, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(fn(*args), expected, rtol=1e-15, atol=1e-15)
    weights = rand(*expected.shape, dtype=expected.dtype)
    argnums = tuple(range(len(args)))

    def loss(f: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *xs: jnp.real(jnp.sum(f(*xs) * weights))

    ours = jax.jit(jax.grad(loss(fn), argnums))(*args)
    theirs = jax.grad(loss(reference), argnums)(*args)
    for g, h, x in zip(ours, theirs, args):
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12)
        assert g.dtype == x.dtype and g.shape == x.shape


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@pytest.mark.parametrize(("name", "fn", "args", "numpy_op"), STRUCTURE, ids=STRUCTURE_IDS)
def test_structure_ops_equal_numpys_and_vmap(
    name: str, fn: Callable[..., Any], args: tuple[jax.Array, ...], numpy_op: Callable[..., Any]
) -> None:
    expected = _tuple(numpy_op(*(np.asarray(a) for a in args)))
    for got in (_tuple(fn(*args)), _tuple(jax.jit(fn)(*args))):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == np.shape(e) and g.dtype == np.asarray(e).dtype
            np.testing.assert_allclose(g, e, rtol=1e-14, atol=0)
    # vmap: our validation sees each sample's shape; results equal a loop over the samples
    batch = tuple(jnp.stack([a, 2 * a + 1]) for a in args)
    batched = _tuple(jax.vmap(fn)(*batch))
    for part, b in enumerate(batched):
        np.testing.assert_allclose(b, jnp.stack([_tuple(fn(*(a[i] for a in batch)))[part] for i in range(2)]), rtol=1e-14)


def test_structure_errors_are_ours() -> None:
    # validated by the NumPy op's own checks at trace time: the same message, word for word,
    # with the op's name in front where the NumPy op's message lacks it
    x = rand(3, 4)
    calls: list[tuple[str, Callable[[Any, Any], Any], type[Exception]]] = [
        ("reshape", lambda m, a: m.reshape(a, Val((5, -1))), ValueError),
        ("flip", lambda m, a: m.flip(a, Val((0, 0))), ValueError),
        ("roll", lambda m, a: m.roll(a, Val((1, 2, 3)), axis=Val((0, 1))), ValueError),
        ("permute_dims", lambda m, a: m.permute_dims(a, Val((0, 0))), ValueError),
        ("pad", lambda m, a: m.pad(a, Val(1), 1j), TypeError),
        ("pad", lambda m, a: m.pad(a, Val((1, 2, 3)), 0), ValueError),
        ("split", lambda m, a: m.split(a, Val(3), axis=Val(1)), ValueError),
        ("sum", lambda m, a: m.sum(a, Val(2)), ValueError),
        ("mean", lambda m, a: m.mean(a, keepdims=Val(3)), TypeError),
        ("broadcast_to", lambda m, a: m.broadcast_to(a, Val((4, 5))), ValueError),
    ]
    for op, call, error in calls:
        with pytest.raises(error) as numpy_error:
            call(sr, np.asarray(x))
        with pytest.raises(error) as jax_error:
            jax.jit(lambda a: call(srj, a))(x)
        numpy_message = str(numpy_error.value)
        expected = numpy_message if numpy_message.startswith(f"{op}:") else f"{op}: {numpy_message}"
        assert str(jax_error.value) == expected


# Each srj op called as a new user would, on one or two arrays ``x`` (3, 4) of a dtype: each
# family's jax_op_calls rows.
OP_CALLS: dict[str, Callable[[Any], Any]] = dict(collect("jax_op_calls"))


def test_op_calls_cover_every_op() -> None:
    assert set(OP_CALLS) == set(srj.__all__) - {"FFIVersionError"}
    for call in OP_CALLS.values():
        call(rand(3, 4))  # valid as written


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", sorted(OP_CALLS))
def test_half_precision_inputs_are_taken(op: str, dtype: str) -> None:
    # Before: every op refused them with our TypeError (SPEC section 15 now takes them); the
    # values are checked in tests/test_jax_half.py.
    x = jnp.ones((3, 4), getattr(jnp, dtype))
    for run in (OP_CALLS[op], jax.jit(OP_CALLS[op])):
        leaves = jax.tree_util.tree_leaves(run(x))
        assert leaves and all(leaf.dtype == jnp.dtype(dtype) for leaf in leaves)


# Verbatim, as a new user meets them (each family's jax_call_errors rows): before, each was
# jnp's message (no op, or another wording) or JAX's conversion error.
CALL_ERRORS: list[tuple[Callable[[], Any], type[Exception], str]] = collect("jax_call_errors", rand)


@pytest.mark.parametrize(("call", "error", "message"), CALL_ERRORS, ids=[message.split(";")[0][:48] for _, _, message in CALL_ERRORS])
def test_errors_name_the_op_the_argument_and_the_shapes(call: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value) == message


def test_the_primitive_class_is_jaxs_public_one() -> None:
    # stablerules.jax takes Primitive from jax._src.core: jax.extend.core.Primitive is the same
    # class, but importing jax.extend costs a fresh process ~45 ms. A jax that moves or
    # replaces it fails here first.
    import jax.extend.core

    for primitive in (_jax_ops.repeat_p, _jax_ops.repeat_pullback_p, _jax_ops.kron_p, _jax_ops.kron_tangent_p, _jax_ops.kron_pullback_p):
        assert type(primitive) is jax.extend.core.Primitive


def test_every_op_of_stablerules_is_adapted() -> None:
    ops = {name for name in sr.__all__ if isinstance(getattr(sr, name), RuleOp)}
    assert ops == set(srj.__all__) - {"FFIVersionError"}


def test_forward_equals_the_numpy_ops() -> None:
    x = np.asarray(rand(4, 3, 2))
    got = jax.jit(lambda x: srj.repeat(x, inner=Val((7, 1, 10)), outer=Val((4, 1, 2))))(x)
    np.testing.assert_array_equal(got, sr.repeat(x, inner=Val((7, 1, 10)), outer=Val((4, 1, 2))))
    a, b = np.asarray(rand(3, 4)), np.asarray(rand(5, 2))
    np.testing.assert_array_equal(jax.jit(srj.kron)(a, b), sr.kron(a, b))
    np.testing.assert_array_equal(srj.tile(jnp.asarray(x), Val((2, 1))), np.tile(x, (2, 1)))


def test_float32_stays_float32_and_accumulates_wide() -> None:
    a, b = rand(3, 4, dtype=np.float32), rand(40, 50, dtype=np.float32)
    dy = rand(120, 200, dtype=np.float32)
    y, back = jax.vjp(srj.kron, a, b)
    da, db = jax.jit(back)(dy)
    assert y.dtype == da.dtype == db.dtype == jnp.float32
    a64, b64, dy64 = (np.asarray(v, np.float64) for v in (a, b, dy))
    view = dy64.reshape(3, 40, 4, 50)
    np.testing.assert_allclose(da, np.einsum("ikjl,kl->ij", view, b64), rtol=1e-6)
    np.testing.assert_allclose(db, np.einsum("ikjl,ij->kl", view, a64), rtol=1e-6)


def test_mixed_dtypes_promote_as_numpy() -> None:
    a, b = rand(2, 2, dtype=np.float32), rand(2, 3)
    y = srj.kron(a, b)
    assert y.dtype == jnp.float64
    np.testing.assert_allclose(y, np.kron(np.asarray(a), np.asarray(b)), rtol=1e-15)


def _count(jaxpr: Any, name: str) -> int:
    return sum(1 for eqn in jaxpr.eqns if eqn.primitive.name == name) + sum(
        _count(sub.jaxpr if hasattr(sub, "jaxpr") else sub, name) for eqn in jaxpr.eqns for sub in jax.extend.core.jaxprs_in_params(eqn.params)
    )


def test_vmap_is_one_kernel_call_per_batch() -> None:
    xs = rand(5, 4, 3)

    def f(x: jax.Array) -> jax.Array:
        return srj.repeat(x, inner=Val((2, 3)), outer=Val((2, 1)))

    batched = jax.vmap(f)
    jaxpr = jax.make_jaxpr(batched)(xs).jaxpr
    assert _count(jaxpr, "stablerules_repeat") == 1
    np.testing.assert_array_equal(jax.jit(batched)(xs), jnp.stack([f(x) for x in xs]))
    # the pullback batches too: vmap of a vjp is one pullback call
    dys = rand(5, 16, 9)
    grads = jax.vmap(lambda x, dy: jax.vjp(f, x)[1](dy)[0])(xs, dys)
    loop = jnp.stack([jax.vjp(f, x)[1](dy)[0] for x, dy in zip(xs, dys)])
    np.testing.assert_allclose(grads, loop, rtol=1e-12, atol=1e-13)  # sums reassociated
    vjp_jaxpr = jax.make_jaxpr(jax.vmap(lambda x, dy: jax.vjp(f, x)[1](dy)[0]))(xs, dys).jaxpr
    assert _count(vjp_jaxpr, "stablerules_repeat_pullback") == 1


def test_vmap_kron_and_its_gradients_over_either_operand() -> None:
    a_batch, b = rand(4, 2, 3), rand(3, 2)
    got = jax.jit(jax.vmap(srj.kron, in_axes=(0, None)))(a_batch, b)
    np.testing.assert_allclose(got, jnp.stack([jnp.kron(a, b) for a in a_batch]), rtol=1e-15)
    grads = jax.vmap(jax.grad(lambda a, b: jnp.sum(srj.kron(a, b) ** 2), (0, 1)), in_axes=(0, None))(a_batch, b)
    native = jax.vmap(jax.grad(lambda a, b: jnp.sum(jnp.kron(a, b) ** 2), (0, 1)), in_axes=(0, None))(a_batch, b)
    for g, h in zip(grads, native):
        np.testing.assert_allclose(g, h, rtol=1e-12)


def test_jit_jvp_grad_combinations() -> None:
    x = rand(3, 4)

    def f(x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(srj.tile(srj.repeat(x, Val(2), axis=Val(0)), Val((1, 3)))))

    def native(x: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(jnp.tile(jnp.repeat(x, 2, axis=0), (1, 3))))

    v = rand(3, 4)
    for transform in (
        lambda g: jax.jit(jax.grad(g)),
        lambda g: jax.grad(jax.jit(g)),
        lambda g: jax.jit(jax.hessian(g)),
        lambda g: jax.jit(lambda x: jax.jvp(jax.grad(g), (x,), (v,))[1]),
        lambda g: jax.jit(lambda x: jax.jvp(g, (x,), (v,))),
        lambda g: jax.jit(jax.jacfwd(jax.grad(g))),
    ):
        ours, theirs = transform(f)(x), transform(native)(x)
        for p, q in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            np.testing.assert_allclose(p, q, rtol=1e-12, atol=1e-12)


def test_kron_hessian_and_third_order() -> None:
    b = rand(2, 3)

    def f(a: jax.Array) -> jax.Array:
        return jnp.sum(srj.kron(a, b) ** 3)

    a = rand(2, 2)
    np.testing.assert_allclose(jax.jit(jax.hessian(f))(a), jax.hessian(lambda a: jnp.sum(jnp.kron(a, b) ** 3))(a), rtol=1e-12)
    third = jax.grad(jax.grad(jax.grad(lambda s: f(jnp.reshape(s, (1, 1))))))(0.7)
    np.testing.assert_allclose(third, 6 * jnp.sum(b**3), rtol=1e-12)


def test_no_recompile_across_calls_and_shapes() -> None:
    def f(x: jax.Array) -> jax.Array:
        return jnp.sum(srj.repeat(x, inner=Val((3, 2)), outer=Val((2, 2))) ** 2)

    step = jax.jit(jax.value_and_grad(f))
    step(rand(4, 5))
    kron_step = jax.jit(jax.grad(lambda a, b: jnp.sum(srj.kron(a, b) ** 2), (0, 1)))
    kron_step(rand(2, 3), rand(3, 4))
    before = sr.cache_info()
    with sr.no_compile():
        for _ in range(3):
            step(rand(4, 5))
            kron_step(rand(2, 3), rand(3, 4))
        # new shapes: JAX traces again, but the handlers read extents at run time, so the same
        # compiled handlers and kernels serve them
        value, grad = jax.jit(jax.value_and_grad(f))(rand(7, 2))
        kron_grads = jax.jit(jax.grad(lambda a, b: jnp.sum(srj.kron(a, b) ** 2), (0, 1)))(rand(5, 1), rand(2, 6))
    after = sr.cache_info()
    assert after.compiles == before.compiles and after.disk_hits == before.disk_hits
    x = rand(7, 2)
    np.testing.assert_allclose(jax.grad(f)(x), jax.grad(lambda x: jnp.sum(julia(x, (3, 2), (2, 2)) ** 2))(x), rtol=1e-12)
    assert grad.shape == (7, 2) and kron_grads[0].shape == (5, 1)


def test_val_is_a_static_pytree_node() -> None:
    assert jax.tree_util.tree_leaves(Val((2, 3))) == []
    x = rand(3)

    @jax.jit
    def f(x: jax.Array, counts: Val[int]) -> jax.Array:
        return srj.repeat(x, counts)

    np.testing.assert_array_equal(f(x, Val(2)), jnp.repeat(x, 2))
    np.testing.assert_array_equal(f(x, Val(3)), jnp.repeat(x, 3))


def test_bad_arguments_raise_before_any_kernel() -> None:
    x = rand(3, 4)
    with pytest.raises(TypeError, match="counts array is data"):
        srj.repeat(x, np.array([1, 2, 3]), axis=Val(0))  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="negative"):
        srj.repeat(x, inner=Val((-1, 1)))
    with pytest.raises(ValueError, match="axis"):
        srj.repeat(x, Val(2), axis=Val(5))


def test_other_platforms_are_refused_with_a_clear_error() -> None:
    traced = jax.jit(lambda x: srj.repeat(x, Val(2))).trace(rand(3))
    with pytest.raises(NotImplementedError, match=r"stablerules\.jax\.repeat: no lowering for platform cuda.*CPU"):
        traced.lower(lowering_platforms=("cuda",))


# ---------------------------------------------------------------------------------------------
# The FFI API version: the installed headers, and the handler's own check of its caller
# ---------------------------------------------------------------------------------------------

HEADER = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"


def _struct(name: str, text: str) -> type[ctypes.Structure]:
    """A ctypes mirror of ``struct name`` from the header (pointers, ints, enums, structs)."""
    body = re.search(rf"struct {name} \{{(.*?)\n\}};", text, re.S)
    assert body is not None, name
    fields: list[tuple[str, Any]] = []
    for line in body.group(1).splitlines():
        line = line.split("//")[0].strip()
        api_field = re.match(r"_XLA_FFI_API_STRUCT_FIELD\((\w+)\);", line)
        if api_field:  # a function pointer
            fields.append((api_field.group(1), ctypes.c_void_p))
            continue
        match = re.match(r"(?:const )?(?:struct )?(\w+)\s*(\**)\s*(\w+);", line)
        if not match:
            continue
        kind, stars, field = match.groups()
        if stars:
            ctype: Any = ctypes.c_void_p
        elif kind in ("size_t", "int64_t"):
            ctype = ctypes.c_int64
        elif kind == "int":
            ctype = ctypes.c_int
        elif f"struct {kind} {{" in text:
            ctype = _struct(kind, text)
        else:  # an enum
            ctype = ctypes.c_int
        fields.append((field, ctype))
    return type(name, (ctypes.Structure,), {"_fields_": fields})


def test_frame_offsets_match_the_installed_header() -> None:
    text = HEADER.read_text()
    frame = _struct("XLA_FFI_CallFrame", text)
    args = _struct("XLA_FFI_Args", text)
    buffer = _struct("XLA_FFI_Buffer", text)
    api = _struct("XLA_FFI_Api", text)
    word = 8
    assert getattr(frame, "api").offset == 2 * word and getattr(frame, "stage").offset == 4 * word
    assert getattr(frame, "args").offset + getattr(args, "size").offset == 7 * word
    assert getattr(frame, "args").offset + getattr(args, "args").offset == 9 * word
    assert getattr(frame, "rets").offset == 10 * word
    assert getattr(frame, "rets").offset + getattr(args, "args").offset == 14 * word
    assert getattr(frame, "attrs").offset + ctypes.sizeof(_struct("XLA_FFI_Attrs", text)) == _ffi.FRAME_BYTES
    assert [getattr(buffer, f).offset for f in ("dtype", "data", "rank", "dims")] == [16, 24, 32, 40]
    version = _struct("XLA_FFI_Api_Version", text)
    assert getattr(api, "api_version").offset + getattr(version, "major_version").offset == 32
    assert getattr(api, "XLA_FFI_Error_Create").offset == 6 * word
    assert _jax.installed_api_version() == (_ffi.API_MAJOR, _ffi.API_MINOR)


def test_an_unknown_installed_api_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(_jax.FFIVersionError, match="FFI API version 0.4.*0.3 only"):
        _jax.check_api_version((0, 4))
    monkeypatch.setattr(_jax, "installed_api_version", lambda: (1, 0))
    # a signature no other test uses, so its handler is registered here, after the check (the
    # pullback's: repeat's forward is XLA's own op and registers no handler)
    fn = jax.jit(jax.grad(lambda x: jnp.sum(srj.repeat(x, inner=Val((5, 7, 1, 3))))))
    with pytest.raises(srj.FFIVersionError, match="version 1.0"):
        fn(rand(1, 1, 1, 1))


_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def _handler_address(target: str, loaded_from: str) -> int:
    """The address of a registered handler as Numba built it, or as a later process loads it
    from its stored object code (without Numba)."""
    kernel = _jax._REGISTERED[target]
    if loaded_from == "numba":
        address: int = getattr(kernel.function, "address")
        return address
    store = getattr(sr._cache.CACHE.store, "_object_code", None)
    assert store is not None, "the test session's cache keeps object code"
    loaded = store.load(kernel.module_name.removeprefix("_stablerules_k_"), kernel.module_name)
    assert isinstance(loaded, _objectcode.CFunction)
    _LOADED.append(loaded)  # its code lives as long as it does
    return loaded.address


_LOADED: list[object] = []


def _call_handler(
    major: int, minor: int, frame_bytes: int, metadata: bool = False, loaded_from: str = "numba"
) -> tuple[int, list[str], Any]:
    """Call a compiled handler with a call frame built here; returns (its result, the error
    messages it asked the API to create, the metadata struct)."""
    text = HEADER.read_text()
    frame_type, api_type = _struct("XLA_FFI_CallFrame", text), _struct("XLA_FFI_Api", text)
    metadata_type = _struct("XLA_FFI_Metadata", text)
    messages: list[str] = []

    def create(arguments: int) -> int:
        words = (ctypes.c_int64 * 4).from_address(arguments)
        messages.append(ctypes.string_at(words[2]).decode())
        return 0xE0E0

    callback = _CREATE(create)
    api = api_type()
    getattr(api, "api_version").major_version = major
    getattr(api, "api_version").minor_version = minor
    api.XLA_FFI_Error_Create = ctypes.cast(callback, ctypes.c_void_p)
    frame = frame_type()
    frame.struct_size = frame_bytes
    frame.api = ctypes.addressof(api)
    frame.stage = _ffi.STAGE_EXECUTE
    meta = metadata_type()
    extension = (ctypes.c_int64 * 4)(32, 1, 0, ctypes.addressof(meta))
    if metadata:
        frame.extension_start = ctypes.addressof(extension)
    target = _jax_ops._repeat_target((2,), (1,), np.dtype(np.float64), "forward")
    handler = _CREATE(_handler_address(target, loaded_from))
    return handler(ctypes.addressof(frame)) or 0, messages, meta


@pytest.mark.parametrize("loaded_from", ["numba", "object code"])
def test_the_handler_answers_the_metadata_query_with_its_version(loaded_from: str) -> None:
    result, messages, meta = _call_handler(9, 9, 0, metadata=True, loaded_from=loaded_from)
    assert result == 0 and messages == []
    assert (getattr(meta, "api_version").major_version, getattr(meta, "api_version").minor_version) == (0, 3)


@pytest.mark.parametrize("loaded_from", ["numba", "object code"])
@pytest.mark.parametrize(("major", "minor", "size"), [(0, 4, _ffi.FRAME_BYTES), (1, 3, _ffi.FRAME_BYTES), (0, 3, 200)])
def test_the_handler_refuses_a_caller_of_another_version(major: int, minor: int, size: int, loaded_from: str) -> None:
    # no buffer is read: the frame here has none (a misread would crash, not fail)
    result, messages, _ = _call_handler(major, minor, size, loaded_from=loaded_from)
    assert result == 0xE0E0
    assert len(messages) == 1 and "reads XLA FFI API 0.3 call frames" in messages[0]


def _compiled_handler(text: str) -> Any:
    """The ``handler`` C callback of the handler module ``text`` (rendered), compiled now by Numba
    under a fresh module name (no disk cache)."""
    import types as pytypes
    import uuid

    module = pytypes.ModuleType(f"_stablerules_k_test_{uuid.uuid4().hex}")
    exec(compile(text.replace("{CACHE}", "False"), f"<{module.__name__}>", "exec"), module.__dict__)
    return module.handler


def test_a_handler_links_its_kernel_as_the_kernels_own_library_optimized_it() -> None:
    """A handler's library optimizes the handler's own code and links the kernel it calls as
    that kernel's library left it: the kernel's function in the handler's module is the
    kernel's own optimized IR, instruction for instruction (LLVM's linker renumbers values and
    materializes one constant as a ``bitcast``), and the handler calls it. With the kernels'
    pipeline (the handler's until round 23) the finished module is optimized once more, and
    the kernel's code with it: the same loops, rewritten (fewer instructions)."""
    from collections import Counter

    def instructions(function: object) -> Counter[str]:
        """How many instructions of each opcode ``function`` has (``bitcast`` left out)."""
        found = re.findall(r"^\s+(?:%[\w.]+ = )?(?:tail )?(\w+)", str(function), re.MULTILINE)
        return Counter(opcode for opcode in found if opcode != "bitcast")

    signature = ShapeSignature("jax-ffi-repeat", "pullback", ((1, 2, 3), (2, 1, 1)), ("float64",), (3,))
    text = _jax_ops._render_repeat_handler(signature).text
    assert "pipeline_class=HandlerCompiler" in text
    (kernel_name,) = re.findall(r"KERNEL = kernel_function\('(kernel_\w+)'\)", text)
    dispatcher: Any = _jax.kernel_function(kernel_name)
    (compiled,) = dispatcher.overloads.values()
    symbol = compiled.fndesc.mangled_name
    own = instructions(compiled.library._get_module_for_linking().get_function(symbol))
    assert own["getelementptr"] > 10 and sum(own.values()) > 100

    library = _compiled_handler(text)._library
    assert type(library).__name__ == "_HandlerLibrary"
    module = library._final_module
    assert instructions(module.get_function(symbol)) == own
    assert any(f"@{symbol}(" in str(f) for f in module.functions if not f.is_declaration and f.name != symbol)

    # the kernels' pipeline, for contrast: the finished module, the kernel's code in it, optimized again
    again = _compiled_handler(text.replace("HandlerCompiler", "KernelCompiler"))._library._final_module
    assert instructions(again.get_function(symbol)) != own


def test_public_names_are_pinned_and_live_in_the_implementation() -> None:
    names = sorted(
        ["FFIVersionError", "cat", "concatenate", "hstack", "kron", "repeat", "stack", "tile", "vstack"]
        + ["broadcast_to", "flip", "mean", "pad", "permute_dims", "reshape", "roll", "split", "sum", "swapaxes", "transpose"]
        + ["getindex", "index_add", "take", "take_along_axis"]
    )
    assert sorted(srj.__all__) == names
    for name in names:
        if name == "FFIVersionError":
            assert srj.FFIVersionError.__module__ == "stablerules.jax._adapter"
        else:  # the adapter's own definition, or the generic one from the family's forward rule
            assert getattr(srj, name) is _jax_generic.DEFINITIONS[name]
            expected = "stablerules.jax._ops" if name in _jax_ops.DEFINED else "stablerules.jax._generic"
            assert getattr(srj, name).__module__ == expected, name


def test_vmap_kron_over_one_operand_is_one_kernel_call() -> None:
    # Sizes above KRON_JAX_BELOW: the kron primitive, not XLA's own ops (a small kron's form)
    a_batch, b = rand(4, 20, 30), rand(60)
    jaxpr = jax.make_jaxpr(jax.vmap(srj.kron, in_axes=(0, None)))(a_batch, b).jaxpr
    assert _count(jaxpr, "stablerules_kron") == 1 and _count(jaxpr, "while") == 0
    np.testing.assert_allclose(
        jax.vmap(srj.kron, in_axes=(None, 1))(b, a_batch), jnp.stack([jnp.kron(b, a) for a in jnp.moveaxis(a_batch, 1, 0)]), rtol=1e-15
    )
    c_batch = rand(4, 50)
    both = jax.vmap(srj.kron)(a_batch, c_batch)
    np.testing.assert_allclose(both, jnp.stack([jnp.kron(a, c) for a, c in zip(a_batch, c_batch)]), rtol=1e-15)
    # jvp under vmap, with the tangent batched and the primals not (and the reverse)
    t = rand(4, 20, 30)
    a = a_batch[0]
    got = jax.vmap(lambda t: jax.jvp(srj.kron, (a, b), (t, jnp.zeros_like(b)))[1])(t)
    np.testing.assert_allclose(got, jnp.stack([jnp.kron(x, b) for x in t]), rtol=1e-15)
    s = rand(4, 60)
    got = jax.vmap(lambda t, s: jax.jvp(srj.kron, (a, b), (t, s))[1])(t, s)
    np.testing.assert_allclose(got, jnp.stack([jnp.kron(x, b) + jnp.kron(a, y) for x, y in zip(t, s)]), rtol=1e-14)


_FRESH_PROCESS = """
import os
os.environ["JAX_PLATFORMS"] = "cpu"
import sys
import jax, jax.numpy as jnp
import stablerules as sr, stablerules.jax as srj
from stablerules import Val
x = jnp.arange(6.0).reshape(2, 3)
g = jax.jit(jax.grad(lambda x: jnp.sum(srj.repeat(x, inner=Val((2, 3)), outer=Val((3, 1))) ** 2)))(x)
w = jnp.arange(600.0).reshape(20, 30)  # a kron above KRON_JAX_BELOW: our pullback kernel
k = jax.jit(jax.grad(lambda a: jnp.sum(srj.kron(a, w) ** 2)))(x)
info = sr.cache_info()
print(info.compiles, info.disk_hits, "numba" in sys.modules, float(g.sum()), float(k.sum()))
"""


@pytest.mark.slow
def test_a_fresh_process_loads_handlers_from_disk(tmp_path: Path) -> None:
    import subprocess
    import sys

    def run(**env: str) -> list[str]:
        environment = {**os.environ, "STABLERULES_CACHE_DIR": str(tmp_path), **env}
        done = subprocess.run(
            [sys.executable, "-c", _FRESH_PROCESS], capture_output=True, text=True, env=environment, check=True
        )
        return done.stdout.split()

    first, second = run(), run()
    # repeat: the pullback's kernel and handler; kron: the pullback's kernel and handler (the
    # forwards are XLA's own ops: nothing compiled for them)
    assert int(first[0]) == 4 and int(first[1]) == 0 and first[2] == "True"
    # A warm process loads the 2 handlers from their object code (each has its kernel linked
    # in, so no kernel is loaded on its own) and never starts Numba.
    assert int(second[0]) == 0 and int(second[1]) == 2 and second[2] == "False"
    memory_only = run(STABLERULES_DISK_CACHE="0")
    assert int(memory_only[0]) == 4 and int(memory_only[1]) == 0
    # Without object code (turned off), the handlers load through Numba's cache, kernels too.
    through_numba = run(STABLERULES_DIRECT_LOAD="0")
    assert int(through_numba[0]) == 0 and int(through_numba[1]) == 4 and through_numba[2] == "True"
    assert first[3:] == second[3:] == memory_only[3:] == through_numba[3:]


_HANDLER_COMPILES = """
import json, os
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, jax.numpy as jnp
from numba.core import compiler
import stablerules.jax as srj
from stablerules import Val
compiled = []
original = compiler.compile_extra
def counted(typingctx, targetctx, func, *args, **kwargs):
    compiled.append(func.__qualname__)
    return original(typingctx, targetctx, func, *args, **kwargs)
compiler.compile_extra = counted
x = jnp.arange(24.0).reshape(2, 3, 4)
g = jax.jit(jax.grad(lambda x: jnp.sum(srj.repeat(x, inner=Val((1, 2, 2))) ** 2)))(x)
print(json.dumps([compiled, float(g.sum())]))
"""


def test_a_handler_compiles_as_one_function(tmp_path: Path) -> None:
    """A cold handler is one Numba compile beside its kernel's: its frame readers are
    intrinsics, so no jitted helper, ``carray`` or ``np.zeros`` overload is compiled with it
    (they made a handler's compile 555 ms; bench/README.md, round 17)."""
    import json
    import subprocess
    import sys

    environment = {**os.environ, "STABLERULES_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _HANDLER_COMPILES], capture_output=True, text=True, env=environment,
                          check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    compiled, total = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(compiled) == ["handler", "kernel"], compiled
    assert total == float(np.sum(2 * 4 * np.arange(24.0)))  # each x[i] repeated 4 times: d/dx sum(y**2) = 8 x


# --- the indexing family: XLA's gather and scatter-add, validated by our plans ---------------


@pytest.mark.parametrize("index", [(slice(None), 0), (slice(1, None), slice(None, None, -2)), slice(1, 3), 2, (Ellipsis, 0), (None, slice(None), -1)], ids=repr)
def test_getindex_takes_a_plain_index_as_numpy_does(index: Any) -> None:
    """Until round 23: ``AttributeError: 'tuple' object has no attribute 'entries'`` for any
    index not written ``sr.ix[...]``."""
    x = rand(4, 5, 6)
    expected = np.zeros((4, 5, 6))
    expected[index] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert np.array_equal(np.asarray(srj.getindex(x, index)), np.asarray(x)[index])
        assert np.array_equal(np.asarray(jax.jit(lambda a: srj.getindex(a, index))(x)), np.asarray(x)[index])
        grad = jax.grad(lambda a: jnp.sum(srj.getindex(a, index)))(x)
    assert np.array_equal(np.asarray(grad), expected)


def test_indexing_ops_equal_numpy_and_check_grads_to_second_order() -> None:
    x = np.asarray(rand(5, 4))
    rows = np.array([4, 0, 4, -1, 2])
    along = np.array([[1, 1, -1]] * 5)
    np.testing.assert_array_equal(jax.jit(lambda v: srj.getindex(v, sr.ix[1:, ::-2]))(x), x[1:, ::-2])
    np.testing.assert_array_equal(jax.jit(lambda v: srj.take(v, rows, Val(0)))(x), np.take(x, rows, axis=0))
    np.testing.assert_array_equal(srj.take(x, rows), np.take(x, rows))
    np.testing.assert_array_equal(jax.jit(lambda v: srj.take_along_axis(v, along, Val(1)))(x), np.take_along_axis(x, along, axis=1))
    values = np.asarray(rand(5, 4))
    expected = x.copy()
    np.add.at(expected, rows, values)
    np.testing.assert_allclose(jax.jit(lambda v, w: srj.index_add(v, rows, w))(x, values), expected, rtol=1e-12)
    for fn, args in (
        (lambda v: srj.getindex(v, sr.ix[1:, ::-2]), (x,)),
        (lambda v: srj.take(v, rows, Val(0)), (x,)),
        (lambda v: srj.take_along_axis(v, along, Val(1)), (x,)),
        (lambda v, w: srj.index_add(v, rows, w), (x, values)),
    ):
        check_grads(fn, args, order=2, modes=("fwd", "rev"))


def test_indexing_ops_vmap_and_gradients_equal_the_scatter_add() -> None:
    x = np.asarray(rand(3, 6, 2))
    rows = np.array([5, 0, 5, 5])
    batched = jax.vmap(lambda v: srj.take(v, rows, Val(0)))(x)
    np.testing.assert_array_equal(batched, np.take(x, rows, axis=1))
    grad = jax.grad(lambda v: jnp.sum(srj.take(v, rows, Val(0)) ** 2))(x[0])
    expected = np.zeros((6, 2))
    np.add.at(expected, rows, 2 * np.take(x[0], rows, axis=0))
    np.testing.assert_allclose(grad, expected, rtol=1e-12)


def test_indexing_bad_inputs_are_our_errors() -> None:
    x = np.asarray(rand(5, 4))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        srj.take(x, np.array([5]), Val(0))
    with pytest.raises(TypeError, match="bool"):
        srj.take(x, np.array([True]), Val(0))
    with pytest.raises(ValueError, match="sorted=Val"):
        srj.take(x, np.array([3, 1]), Val(0), sorted=Val(True))
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 4"):
        srj.getindex(x, sr.ix[:, 4])


def test_the_ops_are_typed_from_the_schema() -> None:
    """mypy checks these (tests are in its files), and each op against its generated signature."""
    x = jnp.ones((2, 3))
    assert_type(srj.repeat(x, Val(2), axis=Val(0)), jax.Array)
    assert_type(srj.concatenate([x, x], axis=Val(1)), jax.Array)
    parts = assert_type(srj.split(x, Val(3), axis=Val(1)), tuple[jax.Array, ...])
    assert len(parts) == 3 and all(isinstance(part, jax.Array) for part in parts)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "complex64", "bool", "bfloat16", "float16"])
def test_repeat_tile_kron_forwards_are_xla_ops_and_pullbacks_our_kernels(dtype: str) -> None:
    """The forwards of repeat, tile and kron lower to XLA's own ops (no custom call: XLA fuses
    them, and a cold program compiles no kernel for them) with exactly jnp's values and dtype;
    their gradients still run our kernels (a custom call in the lowered ``grad``)."""
    rng = np.random.default_rng(7)
    dtype_ = np.dtype(getattr(jnp, dtype))  # bfloat16: ml_dtypes' (NumPy's references take it)
    x = jnp.asarray((rng.standard_normal((3, 2, 4)) * 4).astype(dtype_))
    a = jnp.asarray((rng.standard_normal((2, 3)) * 4).astype(dtype_))
    b = jnp.asarray((rng.standard_normal((3, 1, 2)) * 4).astype(dtype_))
    cases: list[tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]] = [
        (lambda v: srj.repeat(v, Val(3), axis=Val(1)), lambda v: v.repeat(3, axis=1), (x,)),
        (lambda v: srj.repeat(v, inner=Val((2, 1, 3)), outer=Val((1, 2, 2))),
         lambda v: np.tile(v.repeat(2, axis=0).repeat(3, axis=2), (1, 2, 2)), (x,)),
        (lambda v: srj.tile(v, Val((2, 1, 1, 3))), lambda v: np.tile(v, (2, 1, 1, 3)), (x,)),
        (srj.kron, np.kron, (a, b)),
        (srj.kron, np.kron, (b, a)),
    ]
    if dtype == "bool":
        del cases[3:]  # srj.kron of non-float dtypes is jnp.kron, which refuses bool
    for ours, reference, args in cases:
        got, want = jax.jit(ours)(*args), reference(*(np.asarray(v) for v in args))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert "custom_call" not in jax.jit(ours).lower(*args).as_text()
        if dtype in ("bfloat16", "float16"):  # the pullback: our float32 kernel (tests/test_jax_half.py checks its values)
            grad = jax.grad(lambda *vs: jnp.sum(ours(*vs).astype(jnp.float32)), argnums=tuple(range(len(args))))
            assert re.search(r"custom_call @stablerules_\w+.*: \(tensor<[0-9x]*f32>", jax.jit(grad).lower(*args).as_text())
        elif dtype.startswith("float"):
            grad = jax.grad(lambda *vs: jnp.sum(jnp.sin(ours(*vs))), argnums=tuple(range(len(args))))
            assert "custom_call" in jax.jit(grad).lower(*args).as_text()
            numbers = [np.asarray(v, np.float64) for v in args]
            for index, g in enumerate(jax.jit(grad)(*args)):  # against central differences
                probe = rng.standard_normal(numbers[index].shape)
                step = 1e-3
                moved = [[v + sign * step * probe if k == index else v for k, v in enumerate(numbers)] for sign in (1, -1)]
                slope = (np.sum(np.sin(reference(*moved[0]))) - np.sum(np.sin(reference(*moved[1])))) / (2 * step)
                np.testing.assert_allclose(np.sum(np.asarray(g, np.float64) * probe), slope, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_a_small_two_axis_kron_takes_xlas_pullback(dtype: str) -> None:
    """kron's ``jax_forms`` (rules/kron.py): below ``KRON_JAX_BELOW`` result elements, with
    operands of at most 2 axes, the gradient is JAX's autodiff of XLA's own ops (no custom
    call: XLA fuses it into a Kalman filter's scan); at and above the bound, or with a third
    axis, our kernel; 16-bit floats keep our float32 kernel at every size. Gradients against
    ``np.kron``'s by central differences (a finite-difference check of the XLA path)."""
    from stablerules.rules.kron import KRON_JAX_BELOW

    rng = np.random.default_rng(11)
    dtype_ = np.dtype(getattr(jnp, dtype))
    cases = [((2, 2), (2, 2), True), ((4, 8), (4, 7), True), ((8, 8), (8, 8), False), ((2, 2, 1), (2, 2), False)]
    assert 4 * 8 * 4 * 7 < KRON_JAX_BELOW <= 8 * 8 * 8 * 8
    for a_shape, b_shape, small in cases:
        a = jnp.asarray(rng.standard_normal(a_shape).astype(dtype_))
        b = jnp.asarray(rng.standard_normal(b_shape).astype(dtype_))
        grad = jax.jit(jax.grad(lambda u, v: jnp.sum(jnp.sin(srj.kron(u, v).astype(jnp.float32))), argnums=(0, 1)))
        has_call = "custom_call" in grad.lower(a, b).as_text()
        assert has_call == (not small or dtype == "bfloat16"), (a_shape, b_shape, dtype)
        np.testing.assert_array_equal(np.asarray(jax.jit(srj.kron)(a, b)), np.kron(np.asarray(a), np.asarray(b)))
        if dtype == "bfloat16":
            continue
        numbers = [np.asarray(a, np.float64), np.asarray(b, np.float64)]
        for index, g in enumerate(grad(a, b)):
            probe = rng.standard_normal(numbers[index].shape)
            moved = [[v + sign * 1e-3 * probe if k == index else v for k, v in enumerate(numbers)] for sign in (1, -1)]
            slope = (np.sum(np.sin(np.kron(*moved[0]))) - np.sum(np.sin(np.kron(*moved[1])))) / 2e-3
            np.testing.assert_allclose(np.sum(np.asarray(g, np.float64) * probe), slope, rtol=1e-3, atol=1e-3)
    batched = jax.vmap(srj.kron)(jnp.ones((3, 2, 2)), jnp.arange(12.0).reshape(3, 2, 2))  # vmap of the XLA path
    np.testing.assert_array_equal(np.asarray(batched[1]), np.kron(np.ones((2, 2)), np.arange(4.0, 8.0).reshape(2, 2)))


def test_cat_takes_a_plain_int_dims_as_numpy_and_torch_do() -> None:
    """``cat``'s ``dims`` as a plain int (its signature's ``int``), as the NumPy op and the torch
    adapter take it: the JAX adapter once refused it (``dims must be Val``)."""
    a, b = rand(2, 3), rand(2, 3)
    expected = sr.cat(np.asarray(a), np.asarray(b), dims=0)
    np.testing.assert_array_equal(np.asarray(srj.cat(a, b, dims=0)), expected)
    with pytest.raises(ValueError, match="cat: arrays\\[0\\] has shape \\(2, 3\\) and arrays\\[1\\] has shape \\(3,\\)"):
        srj.cat(a, rand(3), dims=0)


def test_generic_ops_are_built_from_the_family_forward_rules() -> None:
    """Every op the adapter does not define itself (``_ops.DEFINED``) is ``_generic``'s: a
    function with its schema's parameters (Python's binding errors) whose forward is its
    family's rule over ``jnp``; the check can fail (an op left out of both would raise)."""
    from stablerules._schema import OPS

    generic = [op.name for op in OPS if op.name not in _jax_ops.DEFINED]
    assert len(generic) == len(OPS) - len(_jax_ops.DEFINED) >= 15
    for name in generic:
        assert getattr(srj, name).__module__ == "stablerules.jax._generic", name
    with pytest.raises(TypeError, match=r"^flip\(\) missing 1 required positional argument: 'x'$"):
        srj.flip()  # type: ignore[call-arg]
    x = rand(2, 3)
    np.testing.assert_array_equal(np.asarray(srj.flip(x, Val(1))), np.flip(np.asarray(x), 1))


@pytest.mark.parametrize("indices", [[], [[]]], ids=["[]", "[[]]"])
def test_take_and_index_add_of_an_empty_index_list(indices: Any) -> None:  # a list, nested
    """An empty list of indices is an empty take, as ``np.take`` reads it (it was refused as
    float indices: ``np.asarray([])`` is float64), eager, jitted and differentiated."""
    x = jnp.arange(20.0).reshape(4, 5)
    y = srj.take(x, indices, axis=Val(0))
    assert y.shape == np.take(np.asarray(x), indices, axis=0).shape
    gradient = jax.grad(lambda a: srj.take(a, indices, axis=Val(0)).sum())(x)
    np.testing.assert_array_equal(np.asarray(gradient), np.zeros((4, 5)))
    assert jax.jit(lambda a: srj.take(a, indices, axis=Val(0)))(x).shape == y.shape
    empty: Any = []  # (the typed signature takes arrays; a list works as NumPy reads it)
    np.testing.assert_array_equal(np.asarray(srj.index_add(x, empty, jnp.ones((0, 5)))), np.asarray(x))
