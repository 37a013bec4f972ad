"""stablerules' ops inside JAX (``stablerules.jax`` re-exports them).

Decisions:

- **Kernel-backed ops (repeat, tile, kron) are JAX primitives** (``jax.extend.core.Primitive``
  with abstract evaluation, a CPU lowering, jvp, transpose and batching rules), not
  ``custom_vjp`` functions: a ``custom_vjp`` has no forward mode, and a ``custom_jvp`` needs
  its tangent map to be transposable, which an opaque FFI call is not. As primitives, the
  linear ops transpose into each other (``repeat`` <-> its pullback), so every order of
  ``grad``/``jvp``/``vjp`` is made of the same few primitives.
- **CPU lowering: an XLA FFI custom call** into a Numba ``@cfunc`` handler per kernel
  signature, generated from :func:`handler_source` (printable: :func:`explain_handler`),
  compiled and cached by the kernel cache like any kernel (memory, disk, ``cache_info()``,
  ``no_compile()``). The handler reads XLA's call frame (``stablerules.jax._ffi``), answers the
  metadata query, refuses an FFI API other than 0.3 with an ``XLA_FFI_Error``, and calls our
  generated kernel on XLA's own buffers: no host callback, no copy, no Python on the call
  path. Handlers read extents from the buffers' dims at run time, so a handler serves every
  shape of its kernel's signature. They run our kernels in one call, on XLA's thread: the
  NumPy path's thread split is not used inside XLA. A handler's object code (its kernel
  linked in) is kept in the disk cache like a kernel's, so a later process loads it without
  starting Numba (``stablerules._objectcode``); its source names the kernel by a hash of the
  kernel's source (:func:`kernel_name`), and only a handler that Numba compiles loads it.
- **Distributed modes.** Under ``jax.shard_map`` a primitive's result varies over the
  manual mesh axes its inputs vary over (``check_vma``: a gradient's cotangent must match),
  and operands of a two-operand kernel are first made to vary over the same axes
  (``jax.lax.pcast``, as JAX's binary ops do; its transpose sums a replicated operand's
  gradient over the shards): our kernels then run on each shard's buffers. Outside
  ``shard_map``, a custom call has no partitioning rule: under a plain ``jit`` of sharded
  inputs XLA gathers them first and every device computes the whole, replicated result
  (correct; ``shard_map`` is the way to run per shard). On a mesh with explicit axes a
  gradient is resharded to its primal's sharding (``jax.sharding.reshard``). No
  ``custom_partitioning`` and no host callback: JAX's persistent compilation cache keeps
  working.
- **Eager calls** run a primitive as a one-op ``jax.jit`` computation per set of static
  parameters (cached; emptied by ``clear_caches()``), as JAX's own primitives do.
- **Errors** are ours, raised at trace time before XLA sees the call: every op is validated
  by the NumPy op's own checks on an ``ArraySpec`` (shape and dtype, no data) and every
  message starts with the op's name, then names the argument and the shapes. Dtypes are the
  NumPy ops' (bool, integers, float16, bfloat16, float32/64, complex64/128), so an op
  accepts the same inputs on either array type; a 16-bit float is validated as a float32
  stand-in of its shape (the checks are of shapes and dtype kinds).
- **bfloat16 and float16** (``jnp.bfloat16``, ``jnp.float16``; SPEC section 15) in every op,
  under every transform, results with ``jnp``'s dtypes. Forwards that are XLA's own ops take
  them as they are, so they equal ``jnp``'s bit for bit (data movement moves bits; kron's
  product is XLA's, one rounding of a product exact in float32). Pullbacks that add
  accumulate in float32 and round once (to nearest even, XLA's convert):

  - *our FFI kernels* (repeat/tile and kron pullbacks; the forwards' kernels on explicitly
    sharded operands): no 16-bit kernels; the lowering (``_ops._half_ffi``) converts the
    operands to float32 (exact), binds the float32 kernel and converts the results back,
    all inside one lowering, so the primitive keeps the 16-bit type to ``jit``, ``grad``,
    ``vmap`` and ``shard_map`` alike. A repeat/tile forward kernel moves the bits as
    ``uint16`` instead. Chosen over 16-bit handlers reading the formats' bits: two XLA
    converts (fused with their neighbours) against a second set of handlers and kernels.
    kron's pullback kernel sums in float64 and rounds to float32 before the format: on rare
    sums that is a double rounding, within one unit in the last place of the once-rounded sum.
  - *XLA's own adding transposes* (broadcast_to's reduction, the scatter-adds of take and
    take_along_axis, the sum over pad's border for a traced constant): XLA's CPU backend
    adds 16-bit operands in the format as it goes (a scatter-add of 1 + 4095 * 2**-9 in
    bfloat16 stays at 1). These ops are a ``jax.custom_jvp`` (``_ops._wide_linear``) whose
    forward is the op on the 16-bit arrays and whose tangent map is the op on float32
    tangents, rounded once: its transpose, which JAX derives, accumulates in float32 and
    rounds once, and forward mode stays exact. ``index_add``'s forward (a scatter-add) runs
    in float32 and rounds once (``values`` cast to ``x``'s dtype first, as for every dtype),
    as NumPy's ``stablerules.index_add`` does; where no index repeats it is ``jnp``'s, bit
    for bit. The scatter-adds are XLA's sequential CPU loops: deterministic.
  - sum and mean are ``jnp``'s (which reduce 16-bit inputs in float32); their pullbacks are
    broadcasts (mean's of ``ct / n`` in float32, rounded: exact for a power-of-two ``n``,
    else within one unit in the last place).
- **Other platforms**: no lowering; a ``NotImplementedError`` names the op, the platform and
  the CPU alternative (``jax.device_put(x, jax.devices("cpu")[0])``). Nothing is copied to
  the host behind the user's back.
- **repeat and tile** are one primitive pair: every static form (NumPy's ``repeat``, Julia's
  ``inner``/``outer``, ``tile``) is validated by the NumPy op's own checks, then written as a
  reshape of ``x`` (free in XLA) and Julia's ``repeat(x, inner, outer)`` with one count per
  axis (``_repeat_form``). ``vmap`` prepends a count of 1: one kernel call for the batch.
  A per-element counts array is data whose values set the output's shape, which ``jit``
  cannot trace: a ``TypeError`` (use ``Val`` counts, or ``jnp.repeat`` with
  ``total_repeat_length``).
- **kron** of float32/float64 operands (promoted to one dtype; bfloat16/float16: above) is a
  primitive over our forward and fused pullback kernels; its jvp with both tangents is
  ``kron_tangent`` (the sum of two products), whose transpose is one fused pullback call (``dy`` read once for both
  gradients). Its ``vmap`` with one operand batched is one kernel call (the other operand
  gets a leading axis of 1: ``kron(a(N, ...), b(1, ...))[n] = kron(a[n], b)``); with both
  batched, and for the pullback (each element's own gradients), an XLA loop over the batch
  (``lax.map``, one kernel call per element): a batched handler is not written. Complex and integer operands use ``jnp.kron``
  (a per-dtype choice, documented, not a fallback taken at run time).
- **Every other op is JAX's own ops, generically** (``stablerules.jax._generic``): the
  concatenate family, the structure ops (flip, roll, permute_dims, transpose, reshape,
  broadcast_to, sum, mean, pad, split), getindex and the indexing ops run their family's forward
  rule (``ENGINE_FACTS[name].forward``) over ``jnp`` under NumPy's names
  (``_generic.JNP``); JAX differentiates, batches and shards them. In XLA a view (reverse,
  transpose, reshape, slice), a concatenation, a broadcast, a reduction, a pad and a gather
  are XLA's own ops, fused with their neighbours, and their transposes are XLA's too; a
  custom call would add a copy (and a fusion barrier) to an op that moves no data or one
  pass of it. Each call is first validated by the NumPy op's own checks on ``ArraySpec``s
  (errors ours, word for word, raised at trace time). ``cat``'s block-diagonal form is pads
  along the other dims and one concatenation (which keep an input's sharding); ``pad``'s
  constant may be a traced scalar (differentiable in JAX whether given by position or
  keyword: JAX's ``argnums`` decide what is differentiated; written as a select over a
  border mask, as JAX 0.10 cannot transpose ``lax.pad`` in its padding value). sum's and
  mean's result dtypes are ``jnp``'s (they follow NumPy's, within JAX's x64 setting).
- ``Val`` is registered as a static pytree node (no leaves; the ``Val`` itself, hashable, is
  the node's auxiliary data), so it passes through ``jit`` as a constant.

Complex cotangents follow JAX's convention (the transpose, not the adjoint); our ops'
coefficients are real, so only kron's complex path, which is ``jnp.kron``, would differ, and
JAX handles it.

What the ops need of the rule modules is their kernel export, one documented block at the
end of a rule module: ``repeat.export_julia_form`` and ``repeat.export_nest_kernel`` (a
validated repeat/tile call in Julia's form; the CPU kernel of a Julia-form nest, its
input-axis groups and whether its pullback accumulates) and ``kron.export_kron_kernels``
(the forward and pullback kernels for two ranks and a real dtype, with their calling
convention; ``kron.EXPORT_MAX_AXES`` says which ranks they serve). Validation uses the ops'
``prepare`` (the NumPy op's checks on specs) and, for pad, the plan's
``interior``/``out_shape``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

import jax
import numpy as np
from jax.interpreters.mlir import ir
from jax.interpreters import ad, mlir

from .._cache import CACHE, source_hash
from .._key import Kernel, KernelSource, ShapeSignature
from .._codegen import SourceWriter
from .._memo import memoized, register
from ._private import Primitive as Primitive
from .._op import KernelRequest
from .._val import Val

Array: TypeAlias = jax.Array

# ---------------------------------------------------------------------------------------------
# Val as a static pytree node
# ---------------------------------------------------------------------------------------------

try:
    jax.tree_util.register_static(Val)
except ValueError:  # already registered (a reloaded module)
    pass


# ---------------------------------------------------------------------------------------------
# Errors: ours, naming the op
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def errors_named(op: str) -> Iterator[None]:
    """Validation errors of ``op`` (our ``TypeError``/``ValueError``) start with the op's name:
    a shared check (an argument's dtype, say) names only the argument and its shape."""
    try:
        yield
    except (TypeError, ValueError) as error:
        message = str(error)
        if message.startswith((f"{op}:", "stablerules")):
            raise
        raise type(error)(f"{op}: {message}") from None


# ---------------------------------------------------------------------------------------------
# The FFI API version and the registration of handlers with XLA
# ---------------------------------------------------------------------------------------------


# The XLA FFI API version our handlers read (``stablerules.jax._ffi`` reads call frames of it).
FFI_API_MAJOR = 0
FFI_API_MINOR = 3


class FFIVersionError(RuntimeError):
    """The installed jaxlib's XLA FFI API is not the version our handlers read (0.3)."""


@memoized(maxsize=None)
def installed_api_version() -> tuple[int, int]:
    """``(major, minor)`` of the XLA FFI API in the installed jaxlib, from its header."""
    header = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"
    text = header.read_text(encoding="utf-8")
    found = [re.search(rf"#define XLA_FFI_API_{part} (\d+)", text) for part in ("MAJOR", "MINOR")]
    if found[0] is None or found[1] is None:
        raise FFIVersionError(f"stablerules.jax: cannot read the XLA FFI API version from {header}")
    return int(found[0].group(1)), int(found[1].group(1))


def check_api_version(version: tuple[int, int] | None = None) -> None:
    """Refuse (``FFIVersionError``) an FFI API other than the one our handlers were written for."""
    major, minor = installed_api_version() if version is None else version
    if (major, minor) != (FFI_API_MAJOR, FFI_API_MINOR):
        raise FFIVersionError(
            f"stablerules.jax: the installed jaxlib {jax.__version__} has XLA FFI API version "
            f"{major}.{minor}; stablerules' handlers read call frames of version "
            f"{FFI_API_MAJOR}.{FFI_API_MINOR} only, so no kernel is registered with it. Use "
            f"a jax/jaxlib with FFI API {FFI_API_MAJOR}.{FFI_API_MINOR} (jax 0.10.x), or the "
            f"NumPy ops (stablerules.repeat, ...) on host arrays"
        )


# Target name -> handler: a registry, not a cache (XLA keeps the pointer; clear_caches() leaves it).
_REGISTERED: dict[str, Kernel] = {}
_REGISTER_LOCK = threading.Lock()
_HANDLER_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def ffi_target(signature: ShapeSignature, render: Callable[[], KernelSource]) -> str:
    """The FFI target name of a handler, compiled (or loaded) and registered on first use."""
    handler = CACHE.get(signature, render)
    name = f"stablerules_{handler.module_name.removeprefix('_stablerules_k_')}"
    if name not in _REGISTERED:
        with _REGISTER_LOCK:
            if name not in _REGISTERED:
                check_api_version()
                address = getattr(handler.entry, "address")  # Numba's cfunc, or its object code
                capsule = jax.ffi.pycapsule(ctypes.cast(address, _HANDLER_TYPE))
                jax.ffi.register_ffi_target(name, capsule, platform="cpu", api_version=1)
                _REGISTERED[name] = handler
    return name


_KERNELS: dict[str, KernelRequest] = {}  # a kernel's name in handler sources -> its request
# Refilled as handler sources are rendered (each lowering renders its handler's source to key
# it); a handler registered with XLA already holds its kernel.
register("stablerules.jax._adapter.kernel names", _KERNELS.clear, lambda: len(_KERNELS))


def kernel_name(request: KernelRequest) -> str:
    """The name a handler's source gives the kernel it calls: a hash of the kernel's source
    (so a changed kernel changes the handler's source, hence its cache key), found by
    :func:`kernel_function`. The kernel is not loaded here: a handler loaded from its object
    code has the kernel linked in, and only a handler that Numba compiles (or loads from
    its own cache) looks it up."""
    name = f"kernel_{source_hash(request.render())}"
    _KERNELS.setdefault(name, request)
    return name


def kernel_function(name: str) -> object:
    """The compiled kernel a handler's source names (what a handler module calls)."""
    return _KERNELS[name].get().function


# ---------------------------------------------------------------------------------------------
# Handler templates
# ---------------------------------------------------------------------------------------------


_PROLOGUE = """\
    words = frame_words(frame)
    extension = word(words, 1)
    while extension != 0:
        if (word(extension, 1) & 0xFFFFFFFF) == METADATA_EXTENSION:
            metadata = word(extension, 3)
            set_word32(metadata, 6, API_MAJOR)
            set_word32(metadata, 7, API_MINOR)
            set_word32(metadata, 8, 0)
            return address_as_pointer(0)
        extension = word(extension, 2)
    api = word(words, 2)
    if word(words, 0) != FRAME_BYTES or word32(api, 8) != API_MAJOR or word32(api, 9) != API_MINOR:
        return address_as_pointer(create_error(word(api, 6), MESSAGE, ERROR_FAILED_PRECONDITION))
    if (word(words, 4) & 0xFFFFFFFF) != STAGE_EXECUTE:
        return address_as_pointer(0)
"""
"""Every handler's first lines: answer XLA's metadata query (version 0.3, no traits, when the
frame carries the metadata extension), refuse another API version or frame size with an
``XLA_FFI_Error``, and return at once at a stage other than execution. Written into each
handler's source with the words read by ``stablerules.jax._ffi``'s intrinsics: nothing a handler calls is a
jitted function of its own, so Numba compiles one function per handler (no inlining pass, no
``carray`` or ``np.zeros`` overloads compiled along with it)."""

_FFI_NAMES = (
    "API_MAJOR, API_MINOR, ERROR_FAILED_PRECONDITION, FRAME_BYTES, HANDLER_SIGNATURE, METADATA_EXTENSION, "
    "STAGE_EXECUTE, address_as_pointer, argument, create_error, dims, float64_zeros, frame_words, result, set_word32, view, "
    "word, word32"
)
"""What a handler module imports from ``stablerules.jax._ffi``."""


def handler_source(
    signature: ShapeSignature, description: str, kernel: str | None, body: SourceWriter
) -> KernelSource:
    """A module defining ``handler``, a ``@cfunc`` XLA FFI handler whose execute stage is
    ``body`` (which sees ``words``, the call frame, and ``KERNEL``, our kernel)."""
    message = (
        f"stablerules: the FFI handler for {signature.op} {signature.kind} reads XLA FFI API "
        f"{FFI_API_MAJOR}.{FFI_API_MINOR} call frames; the calling XLA has another version"
    )
    body_text = "".join("    " + line + "\n" if line else "\n" for line in body.text().splitlines())
    text = (
        f'"""stablerules XLA FFI handler: {description}\n\n'
        f"signature: {signature!r}\n"
        f"kernel: {'none' if kernel is None else kernel}\n"
        f"frame reader: stablerules.jax._ffi {_FFI_SOURCE_HASH}\n"
        f'"""\n'
        f"import numpy as np\n"
        f"from numba import cfunc\n\n"
        f"from stablerules._kernel_pipeline import HandlerCompiler\n"
        f"from stablerules.jax._ffi import (\n"
        f"    {_FFI_NAMES},\n"
        f")\n"
        f"from stablerules.jax._adapter import kernel_function\n\n"
        f"{'' if kernel is None else f'KERNEL = kernel_function({kernel!r})'}\n"
        f"MESSAGE = np.frombuffer({(message + chr(0)).encode()!r}, np.uint8)\n\n\n"
        f"@cfunc(HANDLER_SIGNATURE, cache={{CACHE}}, pipeline_class=HandlerCompiler)\n"
        f"def handler(frame):\n"
        f"{_PROLOGUE}"
        f"{body_text}"
        f"    return address_as_pointer(0)\n"
    )
    return KernelSource(text, entry="handler")


# Numba's cache does not see changes to functions that a cached function inlines from another
# module: the hash of _ffi.py is part of every handler's source, hence of its cache key.
# (Read from the file: importing stablerules.jax._ffi would start Numba, which a process whose
# handlers all come from the disk cache never needs.)
_FFI_SOURCE_HASH = hashlib.sha256(Path(__file__).with_name("_ffi.py").read_bytes()).hexdigest()[:16]


def buffer_view(name: str, buffer: str, dtype: np.dtype[np.generic]) -> str:
    return f"{name} = view({buffer}, np.{dtype.name})"


def explain_handler(target: str) -> str:
    """The generated source of a registered handler (its FFI target name, as in the HLO)."""
    return _REGISTERED[target].source.render(cache=True)


# ---------------------------------------------------------------------------------------------
# Primitives: shared plumbing
# ---------------------------------------------------------------------------------------------


def unsupported_platform(name: str) -> mlir.LoweringRule:
    def lowering(ctx: mlir.LoweringRuleContext, *args: object, **params: object) -> NoReturn:
        platforms = getattr(ctx.module_context, "platforms", ("this platform",))
        raise NotImplementedError(
            f"stablerules.jax.{name}: no lowering for platform {', '.join(platforms)}; its kernels "
            f"run inside XLA on the CPU only. Put the arrays on the CPU "
            f"(jax.device_put(x, jax.devices('cpu')[0])) or use jnp's own op on this device"
        )

    return lowering


# Eager calls run a primitive as a one-op jit computation per set of static parameters, as
# JAX's own primitives do (there through a private dispatch helper; here through jax.jit, as
# fast per call).
_EAGER_COMPUTATIONS: dict[tuple[Primitive, tuple[tuple[str, object], ...]], Callable[..., object]] = {}
register("stablerules.jax._adapter.eager computations", _EAGER_COMPUTATIONS.clear, lambda: len(_EAGER_COMPUTATIONS))


def define_primitive(name: str, multiple_results: bool = False) -> Primitive:
    """A primitive ``stablerules_<name>`` that runs eagerly as a one-op ``jax.jit`` computation
    and has no lowering but on the platforms registered later (the CPU: :func:`ffi_lowering`)."""
    primitive = Primitive(f"stablerules_{name}")
    primitive.multiple_results = multiple_results

    def eager(*args: object, **params: object) -> object:
        key = (primitive, tuple(params.items()))
        computation = _EAGER_COMPUTATIONS.get(key)
        if computation is None:
            computation = _EAGER_COMPUTATIONS[key] = jax.jit(functools.partial(primitive.bind, **params))
        return computation(*args)

    primitive.def_impl(eager)
    mlir.register_lowering(primitive, unsupported_platform(name.removesuffix("_pullback").removesuffix("_tangent")))
    return primitive


def ffi_lowering(target: Callable[..., str]) -> mlir.LoweringRule:
    """A CPU lowering: an FFI custom call to the handler ``target(ctx, **params)`` names."""

    def lowering(ctx: mlir.LoweringRuleContext, *args: ir.Value, **params: object) -> Sequence[ir.Value | Sequence[ir.Value]]:  # type: ignore[type-arg]
        name = target(ctx, **params)
        return jax.ffi.ffi_lowering(name)(ctx, *args)

    return lowering


def aval_in(ctx: mlir.LoweringRuleContext, index: int) -> jax.core.ShapedArray:
    aval = ctx.avals_in[index]
    assert isinstance(aval, jax.core.ShapedArray)
    return aval


def undefined_aval(value: object) -> jax.core.ShapedArray:
    """The abstract value of a transpose rule's undefined (linear) argument."""
    aval = getattr(value, "aval")
    assert isinstance(aval, jax.core.ShapedArray)
    return aval


def shaped(name: str, shape: Sequence[int], dtype: np.dtype[np.generic], *inputs: jax.core.ShapedArray) -> jax.core.ShapedArray:
    """The abstract value of a result of primitive ``name``: ``shape`` and ``dtype``, replicated
    over the mesh in context (a kernel sees whole arrays or, under ``shard_map``, one shard),
    and varying over the manual mesh axes its inputs vary over (``shard_map``'s ``check_vma``:
    a result that dropped them would not match its cotangent). :func:`bind_varying` gives every
    input the same axes."""
    varying = {aval.manual_axis_type.varying for aval in inputs}
    if len(varying) > 1:
        raise ValueError(
            f"stablerules.jax: the inputs of {name} vary over different manual mesh axes "
            f"{sorted(sorted(map(str, axes)) for axes in varying)}"
        )
    first = inputs[0]
    sharding = jax.sharding.NamedSharding(first.sharding.mesh, jax.sharding.PartitionSpec(*([None] * len(shape))))
    return jax.core.ShapedArray(tuple(shape), dtype, sharding=sharding, manual_axis_type=first.manual_axis_type)


def bind_varying(primitive: Primitive, *args: object) -> Any:
    """``primitive.bind(*args)`` with every argument varying over the manual mesh axes any of
    them varies over (``jax.lax.pcast(..., to="varying")``, as JAX's own binary ops do under
    ``shard_map``): the transpose of that cast sums a replicated operand's gradient over the
    shards."""
    varying = [jax.typeof(arg).manual_axis_type.varying for arg in args]
    union = frozenset().union(*varying)
    if any(axes != union for axes in varying):
        args = tuple(
            arg if axes == union else jax.lax.pcast(arg, tuple(union - axes), to="varying")
            for arg, axes in zip(args, varying)
        )
    return primitive.bind(*args)


def cotangent_sharded_as_primal(rule: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """A transpose rule whose cotangents are sharded as their primals are on a mesh with
    explicit axes (``jax.sharding.reshard``). Our results are replicated (:func:`shaped`);
    JAX checks that a cotangent has its primal's type, sharding included."""

    def transpose(ct: object, *primals: object, **params: object) -> list[Any]:
        results = rule(ct, *primals, **params)
        for index, (result, primal) in enumerate(zip(results, primals)):
            if result is None or type(result) is ad.Zero or not ad.is_undefined_primal(primal):
                continue
            target = undefined_aval(primal).sharding
            explicit = jax.sharding.AxisType.Explicit in getattr(target.mesh, "axis_types", ())
            if explicit and jax.typeof(result).sharding.spec != target.spec:
                results[index] = jax.sharding.reshard(result, target.spec)
        return results

    return transpose
