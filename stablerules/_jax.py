"""stablerules' ops inside JAX (``stablerules.jax`` re-exports them).

Decisions:

- **Kernel-backed ops (repeat, tile, kron) are JAX primitives** (``jax.extend.core.Primitive``
  with abstract evaluation, a CPU lowering, jvp, transpose and batching rules), not
  ``custom_vjp`` functions: a ``custom_vjp`` has no forward mode, and a ``custom_jvp`` needs
  its tangent map to be transposable, which an opaque FFI call is not. As primitives, the
  linear ops transpose into each other (``repeat`` <-> its pullback), so every order of
  ``grad``/``jvp``/``vjp`` is made of the same few primitives.
- **CPU lowering: an XLA FFI custom call** into a Numba ``@cfunc`` handler per kernel
  signature, generated from :func:`_handler_source` (printable: :func:`explain_handler`),
  compiled and cached by the kernel cache like any kernel (memory, disk, ``cache_info()``,
  ``no_compile()``). The handler reads XLA's call frame (``stablerules._ffi``), answers the
  metadata query, refuses an FFI API other than 0.3 with an ``XLA_FFI_Error``, and calls our
  generated kernel on XLA's own buffers: no host callback, no copy, no Python on the call
  path. Handlers read extents from the buffers' dims at run time, so a handler serves every
  shape of its kernel's signature. They run our kernels in one call, on XLA's thread: the
  NumPy path's thread split is not used inside XLA. A handler's object code (its kernel
  linked in) is kept in the disk cache like a kernel's, so a later process loads it without
  starting Numba (``stablerules._objectcode``); its source names the kernel by a hash of the
  kernel's source (:func:`_kernel_name`), and only a handler that Numba compiles loads it.
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
  NumPy ops' (bool, integers, float32/64, complex64/128): bfloat16 and float16 inputs get
  our ``TypeError``, also for the ops that are ``jnp``'s underneath, so an op accepts the
  same inputs on either array type.
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
- **kron** of float32/float64 operands (promoted to one dtype) is a primitive over our
  forward and fused pullback kernels; its jvp with both tangents is ``kron_tangent`` (the sum
  of two products), whose transpose is one fused pullback call (``dy`` read once for both
  gradients). Its ``vmap`` with one operand batched is one kernel call (the other operand
  gets a leading axis of 1: ``kron(a(N, ...), b(1, ...))[n] = kron(a[n], b)``); with both
  batched, and for the pullback (each element's own gradients), an XLA loop over the batch
  (``lax.map``, one kernel call per element): a batched handler is not written. Complex and integer operands use ``jnp.kron``
  (a per-dtype choice, documented, not a fallback taken at run time).
- **The concatenate family** (concatenate, stack, hstack, vstack, cat) is written with
  ``jnp`` (``concatenate``, ``stack``; ``cat``'s block-diagonal form as XLA pads of each
  input and selects, which keep an input's sharding): on NumPy arrays our pullback is
  views of ``dy``, and in XLA concatenation and slicing are XLA's own fused ops, so a custom
  call could only add a copy. Statics are ``Val`` as everywhere; errors are ours (above).
- **The structure ops** (flip, roll, permute_dims, transpose, reshape, broadcast_to, sum,
  mean, pad, split) are written with ``jnp``/indexing as well, for the same reason: in XLA a
  view (reverse, transpose, reshape, slice), a broadcast, a reduction and a pad are XLA's own
  ops, fused with their neighbours, and their transposes are XLA's too; a custom call would
  add a copy (and a fusion barrier) to an op that moves no data or one pass of it. Each call
  is first validated by the NumPy op's own checks on an ``ArraySpec`` of ``x``'s shape and
  dtype (:func:`_structure_plan`, as ``_repeat_form`` does), so errors are ours, word for word,
  raised at trace time; the jnp op then takes the validated statics (or the plan's indices:
  flip, permute_dims, transpose, reshape and split apply the plan's own view/indices to the
  traced array). ``pad``'s constant may be a traced scalar (differentiable in JAX whether
  given by position or keyword: JAX's ``argnums`` decide what is differentiated; written
  as a select over a border mask, as JAX 0.10 cannot transpose ``lax.pad`` in its padding
  value); sum's and mean's result dtypes are ``jnp``'s (they follow NumPy's, within JAX's
  x64 setting).
- ``Val`` is registered as a static pytree node (no leaves; the ``Val`` itself, hashable, is
  the node's auxiliary data), so it passes through ``jit`` as a constant.

Complex cotangents follow JAX's convention (the transpose, not the adjoint; see
``stablerules._adapters``); our ops' coefficients are real, so only kron's complex path,
which is ``jnp.kron``, would differ, and JAX handles it.

Re-pointing at a refactor of the rule modules: everything this module needs from
``stablerules.rules`` goes through two functions, :func:`_repeat_form` /
:func:`_repeat_kernel` (validate a repeat/tile call; the kernel of a Julia-form nest, with the
nest's input-axis groups and whether its pullback accumulates) and :func:`_kron_kernels`
(the forward and pullback kernels for two ndims and a real dtype, with their parameter
order); the structure ops use the ops' public ``bind``/``plan`` (:func:`_structure_plan`)
and the plans' ``view``, ``indices`` (split), ``interior``/``out_shape`` (pad) and
``axes``/``keepdims`` (sum, mean).
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import functools
import hashlib
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
# jax.extend.core.Primitive is this class (a test pins it); importing jax.extend costs a fresh
# process ~45 ms (it imports jax.extend.pallas), more than the rest of this module.
from jax._src.core import Primitive
from jax.interpreters.mlir import ir
from jax.interpreters import ad, batching, mlir

from ._arrays import ArraySpec, check_dtype
from ._memo import memoized
from ._cache import CACHE, Kernel, KernelSource, ShapeSignature, source_hash
from ._op import KernelRequest
from ._codegen import SourceWriter
from ._val import Val
from ._rule import Plan, RuleOp
from ._views import ViewPlan
from .rules import broadcast as _broadcast_rules
from .rules import concatenate as _concatenate_rules
from .rules import flip as _flip_rules
from .rules import indexing as _indexing_rules
from .rules import kron as _kron_rules
from .rules import pad as _pad_rules
from .rules import permute as _permute_rules
from .rules import repeat as _repeat_rules

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
def _errors_named(op: str) -> Iterator[None]:
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


# The XLA FFI API version our handlers read (``stablerules._ffi`` reads call frames of it).
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


_REGISTERED: dict[str, Kernel] = {}  # target name -> handler; never freed (XLA keeps the pointer)
_REGISTER_LOCK = threading.Lock()
_HANDLER_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def _target(signature: ShapeSignature, render: Callable[[], KernelSource]) -> str:
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


def _kernel_name(request: KernelRequest) -> str:
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


def _handler_source(
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
        f"frame reader: stablerules._ffi {_FFI_SOURCE_HASH}\n"
        f'"""\n'
        f"import numpy as np\n"
        f"from numba import carray, cfunc\n\n"
        f"from stablerules._ffi import (\n"
        f"    HANDLER_SIGNATURE, STAGE_EXECUTE, address_as_pointer, answer_metadata, argument,\n"
        f"    data, dims, frame_words, result, size, version_error,\n"
        f")\n"
        f"from stablerules._jax import kernel_function\n\n"
        f"{'' if kernel is None else f'KERNEL = kernel_function({kernel!r})'}\n"
        f"MESSAGE = np.frombuffer({(message + chr(0)).encode()!r}, np.uint8)\n\n\n"
        f"@cfunc(HANDLER_SIGNATURE, cache={{CACHE}})\n"
        f"def handler(frame):\n"
        f"    words = frame_words(frame)\n"
        f"    if answer_metadata(words):\n"
        f"        return address_as_pointer(0)\n"
        f"    error = version_error(words, MESSAGE)\n"
        f"    if error != 0:\n"
        f"        return address_as_pointer(error)\n"
        f"    if (words[4] & 0xFFFFFFFF) != STAGE_EXECUTE:\n"
        f"        return address_as_pointer(0)\n"
        f"{body_text}"
        f"    return address_as_pointer(0)\n"
    )
    return KernelSource(text, entry="handler")


# Numba's cache does not see changes to functions that a cached function inlines from another
# module: the hash of _ffi.py is part of every handler's source, hence of its cache key.
# (Read from the file: importing stablerules._ffi would start Numba, which a process whose
# handlers all come from the disk cache never needs.)
_FFI_SOURCE_HASH = hashlib.sha256(Path(__file__).with_name("_ffi.py").read_bytes()).hexdigest()[:16]


def _view(name: str, buffer: str, dtype: np.dtype[np.generic]) -> str:
    return f"{name} = carray(address_as_pointer(data({buffer})), size({buffer}), np.{dtype.name})"


def explain_handler(target: str) -> str:
    """The generated source of a registered handler (its FFI target name, as in the HLO)."""
    return _REGISTERED[target].source.render(cache=True)


# ---------------------------------------------------------------------------------------------
# repeat / tile: adapter-facing functions (the only coupling to stablerules.rules.repeat)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _RepeatForm:
    """A validated repeat/tile call as Julia's form: ``x`` reshaped to ``shape`` (input axes
    merged or padded, a free reshape), then each axis ``d`` repeated ``inner[d]`` times
    element-wise and tiled ``outer[d]`` times; the result has ``out_shape``."""

    shape: tuple[int, ...]
    inner: tuple[int, ...]
    outer: tuple[int, ...]
    out_shape: tuple[int, ...]


def _repeat_form(op: str, x_shape: tuple[int, ...], dtype: np.dtype[np.generic], *args: object) -> _RepeatForm:
    """Validate ``repeat(x, repeats, axis, inner, outer)`` or ``tile(x, reps)`` by the NumPy
    op's own checks (on an ``ArraySpec``: no data) and write it in Julia's form."""
    spec = ArraySpec(x_shape, dtype)
    plan: object
    if op == "tile":
        with _errors_named("tile"):
            plan = _repeat_rules.tile.plan(*_repeat_rules.tile.bind(spec, args[0]))
    else:
        repeats = args[0]
        if repeats is not None and not isinstance(repeats, (Val, int)):
            raise TypeError(
                "stablerules.jax.repeat: repeats must be Val(int) (static); a per-element counts "
                "array is data that sets the output's shape, which jit cannot trace (use "
                "jnp.repeat(x, counts, axis, total_repeat_length=...) for that)"
            )
        with _errors_named("repeat"):
            plan = _repeat_rules.repeat.plan(*_repeat_rules.repeat.bind(spec, *args[:2], inner=args[2], outer=args[3]))
    assert isinstance(plan, _repeat_rules.NestPlan)  # static counts always plan a nest
    layout = plan.nest.layout
    shape = tuple(math.prod(x_shape[axis] for axis in axes) for axes in layout.axes)
    return _RepeatForm(shape, layout.inner, layout.outer, plan.out_shape)


@dataclass(frozen=True, slots=True)
class _NestKernel:
    """The kernel of a Julia-form repeat nest: ``KERNEL(source, target, *extents, lo, hi)``,
    extent ``k`` being the product of the input's axes ``groups[k]``. ``kernel`` is None when
    a count is 0 (empty output, zero gradient); ``accumulates``: the pullback adds into a
    zeroed ``dx``."""

    kernel: str | None
    groups: tuple[tuple[int, ...], ...]
    accumulates: bool


def _repeat_kernel(inner: tuple[int, ...], outer: tuple[int, ...], dtype: np.dtype[np.generic], kind: str) -> _NestKernel:
    layout = _repeat_rules._julia_layout(len(inner), inner, outer)
    nest = _repeat_rules._nest(layout)
    kernel = None if nest.empty else _kernel_name(_repeat_rules._nest_request(nest, dtype, kind, "cpu"))
    return _NestKernel(kernel, nest.groups, nest.accumulates)


def _render_repeat_handler(signature: ShapeSignature) -> KernelSource:
    inner, outer = signature.static[0], signature.static[1]
    assert isinstance(inner, tuple) and isinstance(outer, tuple)
    dtype = np.dtype(signature.dtypes[0])
    pullback = signature.kind == "pullback"
    nest = _repeat_kernel(inner, outer, dtype, signature.kind)
    writer = SourceWriter()
    source, target = ("dy", "dx") if pullback else ("x", "y")
    writer.line(f"{source}_buffer = argument(words, 0)")
    writer.line(f"{target}_buffer = result(words, 0)")
    writer.line(_view(source, f"{source}_buffer", dtype))
    writer.line(_view(target, f"{target}_buffer", dtype))
    if nest.kernel is None or (pullback and nest.accumulates):
        writer.line(f"{target}[:] = 0")
    if nest.kernel is not None:
        writer.line(f"shape = dims({'dx' if pullback else 'x'}_buffer)")
        extents = []
        for k, group in enumerate(nest.groups):
            writer.line(f"e{k} = {' * '.join(f'shape[{axis}]' for axis in group) or '1'}")
            extents.append(f"e{k}")
        writer.line(f"KERNEL({source}, {target}, {', '.join(extents)}, 0, e0)")
    what = "dx = repeat pullback(dy)" if pullback else "y = repeat(x)"
    return _handler_source(signature, f"{what}, inner={inner}, outer={outer}, {dtype.name}", nest.kernel, writer)


def _repeat_target(inner: tuple[int, ...], outer: tuple[int, ...], dtype: np.dtype[np.generic], kind: str) -> str:
    signature = ShapeSignature("jax-ffi-repeat", kind, (inner, outer), (dtype.name,), (len(inner),))
    return _target(signature, functools.partial(_render_repeat_handler, signature))


# ---------------------------------------------------------------------------------------------
# kron: adapter-facing function (the only coupling to stablerules.rules.kron)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _KronKernels:
    """For ``n = max(a.ndim, b.ndim, 1)`` axis pairs and a real dtype: ``forward(y, a, b,
    A0..A{n-1}, B0..B{n-1}, lo, hi)`` and ``pullback(dy, a, b, da, db, A.., B.., lo, hi)``
    (``da``/``db`` float64 accumulators, added into), both over ``blocks`` = ``A0 * B0``
    (``A0`` when ``n == 1``) block ranges."""

    forward: str
    pullback: str


def _kron_kernels(a_ndim: int, b_ndim: int, dtype: np.dtype[np.generic]) -> _KronKernels:
    layout = _kron_rules._layout((1,) * a_ndim, dtype, (1,) * b_ndim, dtype)
    return _KronKernels(
        _kernel_name(_kron_rules._product_request(layout)), _kernel_name(_kron_rules._pullback_request(layout))
    )


def _kron_extents(writer: SourceWriter, ndim: int, ranks: tuple[int, int]) -> str:
    """Lines computing ``A0..``, ``B0..`` and ``blocks`` from the operand buffers' dims."""
    names = []
    for operand, rank in zip("AB", ranks):
        writer.line(f"{operand.lower()}_shape = dims({operand.lower()}_buffer)")
        for axis in range(ndim):
            source = axis - (ndim - rank)
            writer.line(f"{operand}{axis} = {f'{operand.lower()}_shape[{source}]' if source >= 0 else '1'}")
            names.append(f"{operand}{axis}")
    writer.line(f"blocks = {'A0 * B0' if ndim > 1 else 'A0'}")
    names.sort(key=lambda name: (name[0], int(name[1:])))
    return ", ".join(names)


def _render_kron_handler(signature: ShapeSignature) -> KernelSource:
    a_ndim, b_ndim = signature.ndims
    dtype = np.dtype(signature.dtypes[0])
    ndim = max(a_ndim, b_ndim, 1)
    kernels = _kron_kernels(a_ndim, b_ndim, dtype)
    writer = SourceWriter()
    if signature.kind == "forward":
        writer.line("a_buffer = argument(words, 0)")
        writer.line("b_buffer = argument(words, 1)")
        writer.line("y_buffer = result(words, 0)")
        for name in ("a", "b", "y"):
            writer.line(_view(name, f"{name}_buffer", dtype))
        extents = _kron_extents(writer, ndim, (a_ndim, b_ndim))
        writer.line(f"KERNEL(y, a, b, {extents}, 0, blocks)")
        kernel, what = kernels.forward, "y = kron(a, b)"
    else:
        writer.line("dy_buffer = argument(words, 0)")
        writer.line("a_buffer = argument(words, 1)")
        writer.line("b_buffer = argument(words, 2)")
        writer.line("da_buffer = result(words, 0)")
        writer.line("db_buffer = result(words, 1)")
        for name in ("dy", "a", "b", "da", "db"):
            writer.line(_view(name, f"{name}_buffer", dtype))
        extents = _kron_extents(writer, ndim, (a_ndim, b_ndim))
        if dtype == np.float64:
            writer.line("# float64: the kernel's float64 accumulators are XLA's output buffers")
            writer.line("da[:] = 0")
            writer.line("db[:] = 0")
            writer.line(f"KERNEL(dy, a, b, da, db, {extents}, 0, blocks)")
        else:
            writer.line("# the kernel accumulates in float64 (see stablerules.rules.kron)")
            writer.line("da_total = np.zeros(da.size, np.float64)")
            writer.line("db_total = np.zeros(db.size, np.float64)")
            writer.line(f"KERNEL(dy, a, b, da_total, db_total, {extents}, 0, blocks)")
            writer.line("for i in range(da.size):")
            writer.line(f"    da[i] = da_total[i]")
            writer.line("for i in range(db.size):")
            writer.line(f"    db[i] = db_total[i]")
        kernel, what = kernels.pullback, "(da, db) = kron pullback(dy)"
    return _handler_source(signature, f"{what}, ndims {a_ndim} and {b_ndim}, {dtype.name}", kernel, writer)


def _kron_target(a_ndim: int, b_ndim: int, dtype: np.dtype[np.generic], kind: str) -> str:
    signature = ShapeSignature("jax-ffi-kron", kind, (), (dtype.name,), (a_ndim, b_ndim))
    return _target(signature, functools.partial(_render_kron_handler, signature))


# ---------------------------------------------------------------------------------------------
# Primitives: shared plumbing
# ---------------------------------------------------------------------------------------------


def _unsupported_platform(name: str) -> mlir.LoweringRule:
    def lowering(ctx: mlir.LoweringRuleContext, *args: object, **params: object) -> NoReturn:
        platforms = getattr(ctx.module_context, "platforms", ("this platform",))
        raise NotImplementedError(
            f"stablerules.jax.{name}: no lowering for platform {', '.join(platforms)}; its kernels "
            f"run inside XLA on the CPU only. Put the arrays on the CPU "
            f"(jax.device_put(x, jax.devices('cpu')[0])) or use jnp's own op on this device"
        )

    return lowering


def _primitive(name: str, multiple_results: bool = False) -> Primitive:
    primitive = Primitive(f"stablerules_{name}")
    primitive.multiple_results = multiple_results

    # Eager calls run the primitive as a one-op jit computation, as JAX's own primitives do
    # (there through a private dispatch helper; here through jax.jit, as fast per call).
    @functools.cache
    def computation(params: tuple[tuple[str, object], ...]) -> Callable[..., object]:
        return jax.jit(functools.partial(primitive.bind, **dict(params)))

    def eager(*args: object, **params: object) -> object:
        return computation(tuple(params.items()))(*args)

    CACHE.register_dependent(computation.cache_clear)
    primitive.def_impl(eager)
    mlir.register_lowering(primitive, _unsupported_platform(name.removesuffix("_pullback").removesuffix("_tangent")))
    return primitive


def _ffi_lowering(target: Callable[..., str]) -> mlir.LoweringRule:
    """A CPU lowering: an FFI custom call to the handler ``target(ctx, **params)`` names."""

    def lowering(ctx: mlir.LoweringRuleContext, *args: ir.Value, **params: object) -> Sequence[ir.Value | Sequence[ir.Value]]:  # type: ignore[type-arg]
        name = target(ctx, **params)
        return jax.ffi.ffi_lowering(name)(ctx, *args)

    return lowering


def _aval_in(ctx: mlir.LoweringRuleContext, index: int) -> jax.core.ShapedArray:
    aval = ctx.avals_in[index]
    assert isinstance(aval, jax.core.ShapedArray)
    return aval


def _undefined_aval(value: object) -> jax.core.ShapedArray:
    """The abstract value of a transpose rule's undefined (linear) argument."""
    aval = getattr(value, "aval")
    assert isinstance(aval, jax.core.ShapedArray)
    return aval


def _shaped(name: str, shape: Sequence[int], dtype: np.dtype[np.generic], *inputs: jax.core.ShapedArray) -> jax.core.ShapedArray:
    """The abstract value of a result of primitive ``name``: ``shape`` and ``dtype``, replicated
    over the mesh in context (a kernel sees whole arrays or, under ``shard_map``, one shard),
    and varying over the manual mesh axes its inputs vary over (``shard_map``'s ``check_vma``:
    a result that dropped them would not match its cotangent). :func:`_bind` gives every
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


def _bind(primitive: Primitive, *args: object) -> Any:
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


def _cotangent_sharded_as_primal(rule: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """A transpose rule whose cotangents are sharded as their primals are on a mesh with
    explicit axes (``jax.sharding.reshard``). Our results are replicated (:func:`_shaped`);
    JAX checks that a cotangent has its primal's type, sharding included."""

    def transpose(ct: object, *primals: object, **params: object) -> list[Any]:
        results = rule(ct, *primals, **params)
        for index, (result, primal) in enumerate(zip(results, primals)):
            if result is None or type(result) is ad.Zero or not ad.is_undefined_primal(primal):
                continue
            target = _undefined_aval(primal).sharding
            explicit = jax.sharding.AxisType.Explicit in getattr(target.mesh, "axis_types", ())
            if explicit and jax.typeof(result).sharding.spec != target.spec:
                results[index] = jax.sharding.reshard(result, target.spec)
        return results

    return transpose


# ---------------------------------------------------------------------------------------------
# repeat / tile primitives
# ---------------------------------------------------------------------------------------------

repeat_p = _primitive("repeat")
repeat_pullback_p = _primitive("repeat_pullback")


def _repeat_out_shape(shape: tuple[int, ...], inner: tuple[int, ...], outer: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(extent * i * o for extent, i, o in zip(shape, inner, outer))


repeat_p.def_abstract_eval(
    lambda x, *, inner, outer: _shaped("repeat", _repeat_out_shape(x.shape, inner, outer), x.dtype, x)
)
repeat_pullback_p.def_abstract_eval(
    lambda dy, *, inner, outer, x_shape: _shaped("repeat pullback", x_shape, dy.dtype, dy)
)


def _repeat_lowering_target(kind: str) -> Callable[..., str]:
    def target(ctx: mlir.LoweringRuleContext, *, inner: tuple[int, ...], outer: tuple[int, ...], **_: object) -> str:
        return _repeat_target(inner, outer, np.dtype(_aval_in(ctx, 0).dtype), kind)

    return target


mlir.register_lowering(repeat_p, _ffi_lowering(_repeat_lowering_target("forward")), platform="cpu")
mlir.register_lowering(repeat_pullback_p, _ffi_lowering(_repeat_lowering_target("pullback")), platform="cpu")


def _repeat_transpose(ct: Array, x: object, *, inner: tuple[int, ...], outer: tuple[int, ...]) -> list[Array]:
    assert ad.is_undefined_primal(x)
    return [repeat_pullback_p.bind(ct, inner=inner, outer=outer, x_shape=tuple(_undefined_aval(x).shape))]


def _repeat_pullback_transpose(
    ct: Array, dy: object, *, inner: tuple[int, ...], outer: tuple[int, ...], x_shape: tuple[int, ...]
) -> list[Array]:
    return [repeat_p.bind(ct, inner=inner, outer=outer)]


ad.deflinear2(repeat_p, _cotangent_sharded_as_primal(_repeat_transpose))
ad.deflinear2(repeat_pullback_p, _cotangent_sharded_as_primal(_repeat_pullback_transpose))


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
    with _errors_named(op):
        spec = _array_spec(x, "x")
    array = jnp.asarray(x)
    form = _repeat_form(op, spec.shape, spec.dtype, *args)
    result: Array = repeat_p.bind(jnp.reshape(array, form.shape), inner=form.inner, outer=form.outer)
    return jnp.reshape(result, form.out_shape)


def repeat(
    x: Array,
    repeats: Val[int] | int | None = None,
    axis: Val[int] | int | None = None,
    *,
    inner: Val[int] | Val[tuple[int, ...]] | None = None,
    outer: Val[int] | Val[tuple[int, ...]] | None = None,
) -> Array:
    """``stablerules.repeat`` on a JAX array, inside ``jit``/``grad``/``vmap``: NumPy's
    ``repeat(x, Val(k), axis=Val(d))`` or Julia's ``repeat(x, inner=Val(...), outer=Val(...))``.
    Counts are static (``Val``); on the CPU our compiled kernels run inside XLA (FFI)."""
    return _repeat_call("repeat", x, repeats, axis, inner, outer)


def tile(x: Array, reps: Val[int] | Val[tuple[int, ...]]) -> Array:
    """``stablerules.tile`` (``np.tile``) on a JAX array; ``reps`` static."""
    return _repeat_call("tile", x, reps)


# ---------------------------------------------------------------------------------------------
# kron primitives
# ---------------------------------------------------------------------------------------------

kron_p = _primitive("kron")
kron_tangent_p = _primitive("kron_tangent")  # kron(ta, b) + kron(a, tb)
kron_pullback_p = _primitive("kron_pullback", multiple_results=True)  # (da, db)


def _kron_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a_shape), len(b_shape))
    a_padded = (1,) * (n - len(a_shape)) + tuple(a_shape)
    b_padded = (1,) * (n - len(b_shape)) + tuple(b_shape)
    return tuple(p * q for p, q in zip(a_padded, b_padded))


kron_p.def_abstract_eval(lambda a, b: _shaped("kron", _kron_shape(a.shape, b.shape), a.dtype, a, b))
kron_tangent_p.def_abstract_eval(
    lambda ta, tb, a, b: _shaped("kron tangent", _kron_shape(a.shape, b.shape), a.dtype, ta, tb, a, b)
)
kron_pullback_p.def_abstract_eval(
    lambda dy, a, b: [_shaped("kron pullback", v.shape, v.dtype, dy, a, b) for v in (a, b)]
)


def _kron_lowering_target(kind: str) -> Callable[..., str]:
    def target(ctx: mlir.LoweringRuleContext) -> str:
        first = 0 if kind == "forward" else 1
        a, b = _aval_in(ctx, first), _aval_in(ctx, first + 1)
        return _kron_target(len(a.shape), len(b.shape), np.dtype(a.dtype), kind)

    return target


mlir.register_lowering(kron_p, _ffi_lowering(_kron_lowering_target("forward")), platform="cpu")
mlir.register_lowering(kron_pullback_p, _ffi_lowering(_kron_lowering_target("pullback")), platform="cpu")
mlir.register_lowering(
    kron_tangent_p,
    mlir.lower_fun(lambda ta, tb, a, b: _bind(kron_p, ta, b) + _bind(kron_p, a, tb), multiple_results=False),
    platform="cpu",
)


def _zeros_like_aval(value: object) -> Array:
    """Zeros shaped as a primal, which may be a transpose rule's undefined argument."""
    if ad.is_undefined_primal(value):
        aval = _undefined_aval(value)
        return jnp.zeros(aval.shape, aval.dtype)
    array = jnp.asarray(value)
    return jnp.zeros(array.shape, array.dtype)


def _kron_jvp(primals: Sequence[Array], tangents: Sequence[object]) -> tuple[Array, Array]:
    a, b = primals
    ta, tb = tangents
    y = _bind(kron_p, a, b)
    if type(ta) is ad.Zero:
        return y, _bind(kron_p, a, tb)
    if type(tb) is ad.Zero:
        return y, _bind(kron_p, ta, b)
    return y, _bind(kron_tangent_p, ta, tb, a, b)


def _kron_transpose(ct: object, a: object, b: object) -> list[object]:
    # One operand is undefined (kron_p appears in a linear position only with one tangent).
    if type(ct) is ad.Zero:
        return [ad.Zero(_undefined_aval(v)) if ad.is_undefined_primal(v) else None for v in (a, b)]
    if ad.is_undefined_primal(a):
        return [_bind(kron_pullback_p, ct, _zeros_like_aval(a), b)[0], None]
    return [None, _bind(kron_pullback_p, ct, a, _zeros_like_aval(b))[1]]


def _instantiate(value: object, like: object) -> Array:
    if type(value) is ad.Zero:
        return _zeros_like_aval(like)
    return value  # type: ignore[return-value]


def _kron_tangent_jvp(primals: Sequence[Array], tangents: Sequence[object]) -> tuple[Array, Array]:
    ta, tb, a, b = primals
    dta, dtb, da, db = (_instantiate(t, p) for t, p in zip(tangents, primals))
    y = _bind(kron_tangent_p, ta, tb, a, b)
    return y, _bind(kron_tangent_p, dta, dtb, a, b) + _bind(kron_tangent_p, ta, tb, da, db)


def _kron_tangent_transpose(ct: object, ta: object, tb: object, a: object, b: object) -> list[object]:
    # Linear in (ta, tb) with (a, b) known, or in (a, b) with (ta, tb) known: kron_tangent is
    # symmetric under swapping the pairs, and either transpose is one fused pullback.
    tangents_undefined = ad.is_undefined_primal(ta) or ad.is_undefined_primal(tb)
    if type(ct) is ad.Zero:
        return [ad.Zero(_undefined_aval(v)) if ad.is_undefined_primal(v) else None for v in (ta, tb, a, b)]
    if tangents_undefined:
        da, db = _bind(kron_pullback_p, ct, a, b)
        return [da if ad.is_undefined_primal(ta) else None, db if ad.is_undefined_primal(tb) else None, None, None]
    da, db = _bind(kron_pullback_p, ct, ta, tb)
    return [None, None, da if ad.is_undefined_primal(a) else None, db if ad.is_undefined_primal(b) else None]


def _kron_pullback_jvp(primals: Sequence[Array], tangents: Sequence[object]) -> tuple[list[Array], list[Array]]:
    dy, a, b = primals
    tdy, ta, tb = (_instantiate(t, p) for t, p in zip(tangents, primals))
    da, db = _bind(kron_pullback_p, dy, a, b)
    first = _bind(kron_pullback_p, tdy, a, b)
    second = _bind(kron_pullback_p, dy, ta, tb)
    return [da, db], [first[0] + second[0], first[1] + second[1]]


def _kron_pullback_transpose(cts: Sequence[object], dy: object, a: object, b: object) -> list[object]:
    ha, hb = (_instantiate(ct, v) for ct, v in zip(cts, (a, b)))
    if ad.is_undefined_primal(dy):
        return [_bind(kron_tangent_p, ha, hb, a, b), None, None]
    da_bar, db_bar = _bind(kron_pullback_p, dy, ha, hb)
    return [None, da_bar if ad.is_undefined_primal(a) else None, db_bar if ad.is_undefined_primal(b) else None]


ad.primitive_jvps[kron_p] = _kron_jvp
ad.primitive_transposes[kron_p] = _cotangent_sharded_as_primal(_kron_transpose)
ad.primitive_jvps[kron_tangent_p] = _kron_tangent_jvp
ad.primitive_transposes[kron_tangent_p] = _cotangent_sharded_as_primal(_kron_tangent_transpose)
ad.primitive_jvps[kron_pullback_p] = _kron_pullback_jvp
ad.primitive_transposes[kron_pullback_p] = _cotangent_sharded_as_primal(_kron_pullback_transpose)


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
        return _bind(kron_p, a, b), None
    if a_dim is not None and b_dim is not None:
        pairs = (jnp.moveaxis(a, a_dim, 0), jnp.moveaxis(b, b_dim, 0))
        return jax.lax.map(lambda ab: _bind(kron_p, *ab), pairs), 0
    a = a if a_dim is None else jnp.moveaxis(a, a_dim, 0)
    b = b if b_dim is None else jnp.moveaxis(b, b_dim, 0)
    rank = max(a.ndim - (a_dim is not None), b.ndim - (b_dim is not None))
    return _bind(kron_p, _padded_item(a, a_dim is not None, rank), _padded_item(b, b_dim is not None, rank)), 0


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


_KERNEL_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def kron(a: Array, b: Array) -> Array:
    """``stablerules.kron`` (``np.kron``) on JAX arrays, inside ``jit``/``grad``/``vmap``.

    float32/float64 operands (promoted to one dtype) run our forward and fused pullback
    kernels inside XLA; complex and integer operands use ``jnp.kron``."""
    with _errors_named("kron"):
        for operand, name in ((a, "a"), (b, "b")):
            check_dtype(_array_spec(operand, name).dtype, name)
    a_array, b_array = jnp.asarray(a), jnp.asarray(b)
    dtype = np.dtype(jnp.result_type(a_array, b_array))
    if dtype not in _KERNEL_DTYPES or max(a_array.ndim, b_array.ndim) > _kron_rules._MAX_AXES:
        return jnp.kron(a_array, b_array)
    result: Array = _bind(kron_p, a_array.astype(dtype), b_array.astype(dtype))
    return result


# ---------------------------------------------------------------------------------------------
# The concatenate family, in jnp (module docstring)
# ---------------------------------------------------------------------------------------------


def _spec(value: object) -> object:
    """What validation sees of an input: a ``jax.Array`` (or tracer) or NumPy array as an
    ``ArraySpec`` of its shape and dtype; a Python scalar as itself (weak, as NumPy's);
    anything else as itself, for the op's checks to name."""
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        return ArraySpec(tuple(value.shape), np.dtype(value.dtype))
    return value


def _sequence_plan(op: RuleOp, arrays: object, *statics: object) -> Plan:
    """Validate a call of a sequence-taking op (concatenate, stack, hstack, vstack) by the
    NumPy op's own checks, on ``ArraySpec``s: its ``TypeError``/``ValueError`` (the op, the
    argument and the shapes), before ``jnp`` sees the call."""
    specs = [_spec(a) for a in arrays] if isinstance(arrays, (list, tuple)) else arrays
    with _errors_named(op.name):
        return op.plan(*op.bind(specs, *statics))


def concatenate(arrays: Sequence[Array], axis: Val[int] | int | None = Val(0)) -> Array:
    """``np.concatenate`` on JAX arrays (``axis``: ``Val(int)`` or ``None``), as ``jnp.concatenate``."""
    plan = _sequence_plan(_concatenate_rules.concatenate, arrays, axis)
    flat = getattr(plan, "flatten")
    return jnp.concatenate([jnp.asarray(a) for a in arrays], axis=None if flat else getattr(plan, "forward_axis"))


def stack(arrays: Sequence[Array], axis: Val[int] | int = Val(0)) -> Array:
    """``np.stack`` on JAX arrays (``axis``: ``Val(int)``)."""
    _sequence_plan(_concatenate_rules.stack, arrays, axis)
    index = _static_value(axis)
    assert isinstance(index, int)
    return jnp.stack([jnp.asarray(a) for a in arrays], axis=index)


def hstack(arrays: Sequence[Array]) -> Array:
    """``np.hstack`` on JAX arrays."""
    _sequence_plan(_concatenate_rules.hstack, arrays)
    return jnp.hstack([jnp.asarray(a) for a in arrays])


def vstack(arrays: Sequence[Array]) -> Array:
    """``np.vstack`` on JAX arrays."""
    _sequence_plan(_concatenate_rules.vstack, arrays)
    return jnp.vstack([jnp.asarray(a) for a in arrays])


def cat(*arrays: Array | float, dims: Val[int] | Val[tuple[int, ...]]) -> Array:
    """Julia's ``cat`` with 0-based axes on JAX arrays: ``dims=Val(k)`` concatenates along
    ``k`` (inputs padded with trailing size-1 axes when ``k >= ndim``); ``dims=Val((i, j))``
    places the inputs block-diagonally, zeros elsewhere. Scalars count as 0-d arrays."""
    if not isinstance(dims, Val):
        raise TypeError(f"cat: dims must be Val(int) or Val(tuple), got {type(dims).__name__}")
    value = dims.value
    axes = (value,) if isinstance(value, int) else tuple(value)
    if not arrays:
        raise ValueError("cat: needs at least one array")
    with _errors_named("cat"):
        _concatenate_rules.cat.plan(*_concatenate_rules.cat.bind(*(_spec(a) for a in arrays), dims=dims))
    parts = [jnp.asarray(a) for a in arrays]
    ndim = max(max(p.ndim for p in parts), max(axes) + 1)
    parts = [jnp.reshape(p, p.shape + (1,) * (ndim - p.ndim)) for p in parts]
    dtype = jnp.result_type(*parts)
    if len(axes) == 1:
        return jnp.concatenate([p.astype(dtype) for p in parts], axis=axes[0])
    shape = []
    for axis in range(ndim):
        if axis in axes:
            shape.append(builtins.sum(p.shape[axis] for p in parts))  # this module defines sum
            continue
        extents = {p.shape[axis] for p in parts}
        if len(extents) != 1:
            raise ValueError(
                f"cat: the inputs' shapes {[tuple(p.shape) for p in parts]} differ along axis {axis}, "
                f"which is not in dims={value}"
            )
        shape.append(extents.pop())
    # Each input padded with zeros to the result's extent (XLA's pad: exact, and sharded as
    # the input is along the axes it leaves alone), its block selected by a constant mask:
    # a zeros array updated in place would be replicated, which JAX refuses to combine
    # with an input sharded over a mesh with explicit axes.
    out: Array | None = None
    offsets = [0] * ndim
    for p in parts:
        widths = [
            (offsets[axis], shape[axis] - offsets[axis] - p.shape[axis], 0) if axis in axes else (0, 0, 0)
            for axis in range(ndim)
        ]
        padded = jax.lax.pad(p.astype(dtype), jnp.zeros((), dtype), widths)
        if out is None:
            out = padded
        else:
            block = jax.lax.pad(np.ones(p.shape, bool), np.zeros((), bool), widths)
            out = jnp.where(block, padded, out)
        for axis in axes:
            offsets[axis] += p.shape[axis]
    assert out is not None
    return out


# ---------------------------------------------------------------------------------------------
# The structure ops, in jnp (module docstring)
# ---------------------------------------------------------------------------------------------


def _array_spec(value: object, name: str) -> ArraySpec:
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
    return ArraySpec(tuple(getattr(value, "shape")), np.dtype(getattr(value, "dtype")))


def _structure_plan(op: RuleOp, x: object, *args: object, **kwargs: object) -> Plan:
    """Validate a call of ``op`` by its own checks, on an ``ArraySpec`` of ``x`` (no data),
    and return the plan: our ``TypeError``/``ValueError``, before XLA sees the op."""
    with _errors_named(op.name):
        arrays, statics = op.bind(_array_spec(x, "x"), *args, **kwargs)
        return op.plan(arrays, statics)


def _static_value(value: object) -> object:
    return value.value if isinstance(value, Val) else value


def _viewed(op: RuleOp, x: Array, *args: object) -> Array:
    """A view op (flip, permute_dims, transpose, reshape): the plan's own view of ``x``,
    which is indexing, ``transpose`` or ``reshape``, methods a ``jax.Array`` has too."""
    plan = _structure_plan(op, x, *args)
    assert isinstance(plan, ViewPlan)
    result: Array = plan.view(jnp.asarray(x))  # type: ignore[arg-type, assignment]
    return result


def flip(x: Array, axis: Val[int] | Val[tuple[int, ...]] | None = None) -> Array:
    """``stablerules.flip`` (``np.flip``) on JAX arrays: XLA's reverse."""
    return _viewed(_flip_rules.flip, x, axis)


def roll(x: Array, shift: Val[int] | Val[tuple[int, ...]], axis: Val[int] | Val[tuple[int, ...]] | None = None) -> Array:
    """``stablerules.roll`` (``np.roll``) on JAX arrays, as ``jnp.roll`` (slices and a
    concatenation in XLA)."""
    _structure_plan(_flip_rules.roll, x, shift, axis)
    return jnp.roll(jnp.asarray(x), _static_value(shift), _static_value(axis))  # type: ignore[arg-type]


def permute_dims(x: Array, axes: Val[tuple[int, ...]]) -> Array:
    """``stablerules.permute_dims`` (``np.permute_dims``) on JAX arrays: XLA's transpose."""
    return _viewed(_permute_rules.permute_dims, x, axes)


def transpose(x: Array, axes: Val[tuple[int, ...]] | None = None) -> Array:
    """``stablerules.transpose`` (``np.transpose``) on JAX arrays: XLA's transpose."""
    return _viewed(_permute_rules.transpose, x, axes)


def reshape(x: Array, shape: Val[tuple[int, ...]] | Val[int]) -> Array:
    """``stablerules.reshape`` (``np.reshape``, C order) on JAX arrays: XLA's reshape."""
    return _viewed(_permute_rules.reshape, x, shape)


def broadcast_to(x: Array, shape: Val[tuple[int, ...]]) -> Array:
    """``stablerules.broadcast_to`` (``np.broadcast_to``) on JAX arrays: XLA's broadcast
    (its transpose a reduction)."""
    plan = _structure_plan(_broadcast_rules.broadcast_to, x, shape)
    return jnp.broadcast_to(jnp.asarray(x), getattr(plan, "out_shape"))


def _reduction(op: RuleOp, reduce: Callable[..., Array], x: Array, axis: object, keepdims: object) -> Array:
    plan = _structure_plan(op, x, axis, keepdims)
    assert isinstance(plan, _broadcast_rules.SumPlan)
    return reduce(jnp.asarray(x), axis=plan.axes, keepdims=plan.keepdims)


def sum(  # noqa: A001 - NumPy's name, as stablerules.sum has it
    x: Array, axis: Val[int] | Val[tuple[int, ...]] | None = None, keepdims: Val[bool] = Val(False)
) -> Array:
    """``stablerules.sum`` (``np.sum``) on JAX arrays: XLA's reduction."""
    return _reduction(_broadcast_rules.sum, jnp.sum, x, axis, keepdims)


def mean(x: Array, axis: Val[int] | Val[tuple[int, ...]] | None = None, keepdims: Val[bool] = Val(False)) -> Array:
    """``stablerules.mean`` (``np.mean``) on JAX arrays: XLA's reduction, scaled."""
    return _reduction(_broadcast_rules.mean, jnp.mean, x, axis, keepdims)


def pad(
    x: Array,
    pad_width: Val[int] | Val[tuple[int, ...]],
    constant_values: bool | int | float | complex | Array = 0,
) -> Array:
    """``stablerules.pad`` (``np.pad``, constant mode) on JAX arrays: XLA's pad. The constant
    may be a (traced) scalar array; it is then differentiable."""
    stand_in: object = constant_values
    if isinstance(constant_values, (jax.Array, np.ndarray)):  # a tracer too: checked by shape and dtype
        stand_in = ArraySpec(tuple(constant_values.shape), np.dtype(constant_values.dtype))
    plan = _structure_plan(_pad_rules.pad, x, pad_width, stand_in)
    assert isinstance(plan, _pad_rules.PadPlan)
    array = jnp.asarray(x)
    if array.ndim == 0:
        return array
    pairs = [(index.start, extent - index.stop) for index, extent in zip(plan.interior, plan.out_shape)]  # type: ignore[union-attr]
    if not isinstance(stand_in, ArraySpec):
        return jnp.pad(array, pairs, constant_values=constant_values)
    # An array constant, perhaps traced: XLA's pad of x by zero, the border set by a (constant-
    # folded) mask. Not lax.pad's own padding value: JAX 0.10's transpose of lax.pad with
    # respect to its padding value fails (reduce_sum of None), so grad by the constant would.
    widths = [(before, after, 0) for before, after in pairs]
    padded = jax.lax.pad(array, jnp.zeros((), array.dtype), widths)
    border = jax.lax.pad(jnp.zeros(array.shape, bool), jnp.ones((), bool), widths)
    return jnp.where(border, jnp.asarray(constant_values).astype(array.dtype), padded)


def split(
    x: Array, indices_or_sections: Val[int] | Val[tuple[int, ...]], axis: Val[int] = Val(0)
) -> tuple[Array, ...]:
    """``stablerules.split`` (``np.split``) on JAX arrays: a tuple of XLA slices, cut where
    the NumPy op cuts (the plan's indices)."""
    plan = _structure_plan(_pad_rules.split, x, indices_or_sections, axis)
    assert isinstance(plan, _pad_rules.SplitPlan)
    array = jnp.asarray(x)
    return tuple(array[index] for index in plan.indices)


# --- the indexing family ------------------------------------------------------------------------
# XLA's own gather and scatter-add (jnp.take, jnp.take_along_axis, .at[].add), validated by our
# plans on ArraySpecs: JAX's gather transposes to a scatter-add that XLA runs deterministically
# on the CPU, and an FFI kernel for it would not run under vmap or on sharded inputs without
# more work. Indices known on the host (NumPy arrays, concrete jax arrays) are range-checked
# as our ops check them (an IndexError naming the index); traced indices cannot be: negative
# ones wrap, and one out of range gives JAX's fill (NaN for a gather, a dropped update for
# index_add), JAX's own modes "fill" and "drop".


_Input: TypeAlias = "Array | np.ndarray[tuple[int, ...], np.dtype[np.generic]]"
"""A JAX array, or a NumPy one (data known on the host: indices are range-checked)."""


def _indexing_spec(value: object) -> ArraySpec:
    array = value if isinstance(value, (jax.Array, np.ndarray)) else np.asarray(value)
    return ArraySpec(tuple(array.shape), np.dtype(array.dtype))


def _indexing_plan(op: RuleOp, arrays: tuple[object, ...], *statics: object, **kwargs: object) -> Plan:
    """Our checks on specs of the arrays (no data), then the range check where the indices
    are known."""
    bound_arrays, bound_statics = op.bind(*(_indexing_spec(a) for a in arrays), *statics, **kwargs)
    plan = op.plan(bound_arrays, bound_statics)
    if len(arrays) > 1 and not isinstance(arrays[1], jax.core.Tracer):
        plan.save(tuple(np.asarray(a) if i == 1 else s for i, (a, s) in enumerate(zip(arrays, bound_arrays))))
    return plan


def getindex(x: _Input, index: object) -> Array:
    """``stablerules.getindex`` (``x[index]`` for ``sr.ix[...]``) on JAX arrays: XLA's slice."""
    plan = _structure_plan(_indexing_rules.getindex, x, index)
    assert isinstance(plan, _indexing_rules.GetindexPlan)
    result: Array = jnp.asarray(x)[plan.view_index]
    return result


def take(
    x: _Input,
    indices: _Input,
    axis: Val[int] | None = None,
    *,
    unique: Val[bool] = Val(False),
    sorted: Val[bool] = Val(False),  # noqa: A002 - the op's name for it
    deterministic: Val[bool] = Val(True),
) -> Array:
    """``stablerules.take`` (``np.take``) on JAX arrays: XLA's gather (its transpose a scatter-add)."""
    plan = _indexing_plan(_indexing_rules.take, (x, indices), axis, unique=unique, sorted=sorted, deterministic=deterministic)
    assert isinstance(plan, _indexing_rules.TakePlan)
    return jnp.take(jnp.asarray(x), jnp.asarray(indices), axis=plan.axis, mode="fill")


def take_along_axis(x: _Input, indices: _Input, axis: Val[int] | None) -> Array:
    """``stablerules.take_along_axis`` on JAX arrays: XLA's gather."""
    plan = _indexing_plan(_indexing_rules.take_along_axis, (x, indices), axis)
    assert isinstance(plan, _indexing_rules.TakeAlongAxisPlan)
    array = jnp.asarray(x)
    if plan.axis is None:
        array = jnp.reshape(array, (-1,))
    index = jnp.asarray(indices)
    index = jnp.where(index < 0, index + plan.n, index)
    return jnp.take_along_axis(array, index, axis=0 if plan.axis is None else plan.axis, mode="fill")


def index_add(x: _Input, indices: _Input, values: _Input, axis: Val[int] = Val(0)) -> Array:
    """``stablerules.index_add`` on JAX arrays: ``x.at[..., indices, ...].add(values)``, XLA's
    scatter-add."""
    plan = _indexing_plan(_indexing_rules.index_add, (x, indices, values), axis)
    assert isinstance(plan, _indexing_rules.IndexAddPlan)
    where = (slice(None),) * plan.axis + (jnp.asarray(indices),)
    array = jnp.asarray(x)
    return array.at[where].add(jnp.asarray(values).astype(array.dtype), mode="drop")
