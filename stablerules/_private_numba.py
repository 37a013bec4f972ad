"""Numba's private names stablerules uses, in one place (a test pins them against the installed
Numba: ``tests/test_private.py``). Importing this module imports no Numba.

- the cached loader's lookup: the bytes Numba's own cached load of one signature reads
  (``_Cache._cache_file.load(_Cache._index_key(signature, codegen))``), which
  ``_objectcode`` stores as object code;
- the extension modules a compiled wrapper calls into (``numba._helperlib``,
  ``numba._dynfunc``, the NRT's ``numba.core.runtime._nrt_python``), which ``_objectcode``
  loads without importing Numba, and ``_dynfunc.make_function``, which makes a loaded
  wrapper callable exactly as Numba's cached load does;
- whether Numba's CPU compiler has started in this process (its top-level target context,
  ``numba.core.registry.cpu_target._toplevel_target_context``, a lazily set cached property),
  which ``_cache`` reads to know whose start-up a first compile pays;
- the lean refresh of Numba's CPU target context for our kernels' compiles
  (``lean_compile``: the context's ``refresh`` swapped on the instance under Numba's
  ``global_compiler_lock``, installing the registries of :data:`LEAN_MODULES` with
  ``install_registry`` after ``rtsys.initialize``, as ``CPUContext.load_additional_registries``
  does for all of them);
- Numba's allocation of a new array in lowered code (``numba.np.arrayobj._empty_nd_impl``,
  what ``np.empty`` lowers to), which a JAX handler's intrinsic calls for its float64
  accumulators (``empty_array``);
- the lock under Numba's compiler lock (``numba.core.compiler_lock.global_compiler_lock._lock``,
  a ``threading.RLock``), which a forked child renews when another thread of the parent held
  it (``renew_compiler_lock``, called by ``_cache``);
- where Numba keeps a cache under ``NUMBA_CACHE_DIR``
  (``numba.core.caching._CacheLocator.get_suitable_cache_subpath``), which ``_cache`` repeats
  to find Numba's files for a kernel folder.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

HELPERLIB = "numba._helperlib"
DYNFUNC = "numba._dynfunc"
NRT_PYTHON = "numba.core.runtime._nrt_python"
EXTENSIONS = (HELPERLIB, DYNFUNC, NRT_PYTHON)
"""The extension modules a compiled wrapper needs, by the names Numba gives them."""


def cached_data(cache: Any, signature: object, codegen: object) -> Any:
    """What Numba stored for ``signature`` in a dispatcher's ``_cache`` (``None``: nothing):
    the exact tuple its own cached load would unpack."""
    return cache._cache_file.load(cache._index_key(signature, codegen))


def make_function(
    dynfunc: types.ModuleType,
    module: types.ModuleType,
    name: str,
    doc: str,
    wrapper: int,
    environment: object,
    keepalive: object,
) -> Any:
    """A compiled CPython wrapper at address ``wrapper`` made a Python callable, as Numba's
    cached load makes it (``numba._dynfunc.make_function``)."""
    return dynfunc.make_function(module, name, doc, wrapper, environment, keepalive)


def cache_subpath(parent: str) -> str:
    """The folder under ``NUMBA_CACHE_DIR`` where Numba caches the modules of folder ``parent``
    (an absolute path): its name and the SHA-1 of the whole path."""
    import hashlib  # noqa: PLC0415 - here, not at import: hashlib loads OpenSSL (~3 ms)

    return f"{os.path.basename(parent)}_{hashlib.sha1(parent.encode()).hexdigest()}"


REGISTRY = "numba.core.registry"
TARGET_CONTEXT = "_toplevel_target_context"


def compiler_started() -> bool:
    """Whether Numba's CPU compiler has started in this process: its top-level target context
    (made by the first compile or cached load, a ``cached_property`` of ``cpu_target``) exists.
    Imports nothing: ``False`` when Numba's registry is not imported."""
    registry = sys.modules.get(REGISTRY)
    if registry is None:
        return False
    target = getattr(registry, "cpu_target", None)
    return target is not None and TARGET_CONTEXT in vars(target)


LEAN_MODULES = (
    "numba.cpython.builtins",
    "numba.cpython.numbers",
    "numba.cpython.rangeobj",
    "numba.cpython.slicing",
    "numba.cpython.tupleobj",
    "numba.cpython.iterators",
    "numba.np.arrayobj",
    "numba.np.npyimpl",
    "numba.cpython.cmathimpl",
    "numba.cpython.mathimpl",
    "numba.np.unsafe.ndarray",
)
"""The modules of Numba's CPU lowering our kernel templates use (scalars, ranges, tuples,
1-D arrays, ``np.empty``, number constructors, ``math``), in the order Numba's own
``CPUContext.load_additional_registries`` imports them."""

LEAN_REGISTRIES = ("numba.cpython.cmathimpl", "numba.cpython.mathimpl", "numba.np.npyimpl")
"""Of :data:`LEAN_MODULES`, those whose ``registry`` Numba installs by name; the others add
their implementations to ``numba.core.imputils.builtin_registry`` as they are imported."""


def _lean_refresh(context: Any) -> None:
    import importlib  # noqa: PLC0415 - only a compile gets here

    from numba.core.imputils import builtin_registry  # noqa: PLC0415
    from numba.core.runtime.nrt import rtsys  # noqa: PLC0415

    rtsys.initialize(context)
    for name in LEAN_MODULES:
        importlib.import_module(name)
    for name in LEAN_REGISTRIES:
        context.install_registry(sys.modules[name].registry)
    context.install_registry(builtin_registry)
    context.typing_context.refresh()


def lean_compile(build: Any) -> Any:
    """``build()`` (the import of a kernel module, which compiles it) with Numba's CPU target
    context refreshed with only :data:`LEAN_MODULES`, under Numba's compiler lock.

    Numba's first compile in a process refreshes its CPU target context with every lowering
    registry it has (``CPUContext.load_additional_registries``): ``numba.np.arraymath``,
    linear algebra, random numbers, typed containers, jitclasses and the rest. Where SciPy is
    installed (JAX brings it), ``numba.np.arraymath``'s BLAS probe imports ``scipy.linalg``
    too. That refresh took 230 ms of a cold process's first kernel on this machine (scipy's
    import 140 ms of it); our templates use none of it. The refresh is incremental
    (``install_registry`` adds what a registry gained since it was last installed), so the
    lean one leaves the full one to whichever compile next asks for it: the user's own
    ``njit`` code refreshes as it always does, and finds everything.

    The context's ``refresh`` is swapped on the instance for the length of ``build``, under
    Numba's (re-entrant) global compiler lock, so no other thread compiles meanwhile. Were a
    template ever to lower something outside the list, Numba's lookup misses and the compile
    fails with a ``NumbaError`` (a typing or lowering error): then the context is refreshed in full and ``build`` runs once more, the same
    kernel from the same source (the tests compile every family, so that is a slow path of a
    future template, never a different result). Once Numba's own refresh has run in this
    process, its ``numba.np.arraymath`` is loaded and ``build`` simply runs."""
    from numba.core.compiler_lock import global_compiler_lock  # noqa: PLC0415
    from numba.core.errors import NumbaError  # noqa: PLC0415
    from numba.core.registry import cpu_target  # noqa: PLC0415

    with global_compiler_lock:
        context = cpu_target.target_context
        if "numba.np.arraymath" in sys.modules or "refresh" in vars(context):
            # Refreshed in full already, or inside an outer lean build (a JAX handler's module
            # loads its kernel as it is imported): that one swaps back and retries.
            return build()
        context.refresh = types.MethodType(_lean_refresh, context)
        try:
            return build()
        except NumbaError:  # typing or lowering found no implementation (other errors are the build's own)
            del context.refresh
            context.refresh()
        finally:
            vars(context).pop("refresh", None)
        global lean_retries
        lean_retries += 1
        return build()


def renew_compiler_lock() -> bool:
    """In a forked child: a new lock under Numba's compiler lock when another thread of the
    parent held it (that thread is gone, and every compile would wait for it); ``True`` when
    renewed. Nothing when Numba's compiler is not imported."""
    module = sys.modules.get("numba.core.compiler_lock")
    held = getattr(getattr(module, "global_compiler_lock", None), "_lock", None)
    if held is None:
        return False
    if held.acquire(blocking=False):  # free, or this thread's own (the fork came inside a compile)
        held.release()
        return False
    import threading  # noqa: PLC0415 - only a forked child gets here

    module.global_compiler_lock._lock = threading.RLock()  # type: ignore[union-attr]  # found above
    return True


lean_retries = 0
"""How many ``lean_compile`` builds failed on the lean refresh and ran again after the full
one (the test session fails if one of ours ever does)."""


def empty_array(context: Any, builder: Any, array_type: Any, shape: list[Any]) -> Any:
    """A new array of ``array_type`` and ``shape`` (lowered sizes) allocated by Numba's runtime
    in lowered code, as ``np.empty`` lowers (``numba.np.arrayobj._empty_nd_impl``): the array's
    struct proxy, its reference new."""
    from numba.np import arrayobj  # noqa: PLC0415 - only a handler's compile gets here

    allocate: Any = arrayobj._empty_nd_impl  # Numba is untyped
    return allocate(context, builder, array_type, shape)
