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
