"""The engines' and the interpreter's private names stablerules uses (the ``_private`` modules),
pinned against the installed versions: each check names the API and the version, so an engine
that moves one fails here first, loudly, not somewhere inside a kernel load or a vmap.

The supported versions are pyproject.toml's pins; a version outside them fails too.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from tests.ci import skip_unless_ci

ROOT = Path(__file__).resolve().parent.parent


def require(package: str) -> None:
    try:
        importlib.import_module(package)
    except ImportError:
        skip_unless_ci(f"{package} is not installed")


def _pins(package: str) -> list[str]:
    """pyproject.toml's version bounds of ``package`` (every extra and dependency naming it)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.findall(rf'"{re.escape(package)}((?:[<>=!]=?[^",]+,?)+)"', text)
    return sorted({bound for spec in found for bound in spec.split(",") if bound})


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def _check_pinned(package: str) -> str:
    version = importlib.metadata.version(package)
    pins = _pins(package)
    assert pins, f"pyproject.toml pins no version of {package}"
    have = _version_tuple(version)
    for bound in pins:
        operator, wanted = re.match(r"([<>=!]=?)(.*)", bound).groups()  # type: ignore[union-attr]
        target = _version_tuple(wanted)
        ok = {
            ">=": have >= target, ">": have > target, "<": have < target, "<=": have <= target,
            "==": have[: len(target)] == target, "!=": have[: len(target)] != target,
        }[operator]
        assert ok, f"{package} {version} is outside pyproject.toml's pin {bound}"
    return version


def _moved(api: str, package: str, version: str) -> str:
    return f"{package} {version} moved {api}: update the _private module that names it"


def test_python_environ_data() -> None:
    from stablerules import _private_python

    api = "os.environ._data / os.environ.encodekey"
    assert _private_python.ENVIRON_DATA is not None, _moved(api, "CPython", sys.version)
    key = _private_python.environ_key("STABLERULES_TEST_PRIVATE")
    os.environ["STABLERULES_TEST_PRIVATE"] = "1"
    try:
        assert key in _private_python.ENVIRON_DATA, _moved(api, "CPython", sys.version)
    finally:
        del os.environ["STABLERULES_TEST_PRIVATE"]
    assert key not in _private_python.ENVIRON_DATA



def test_python_builtin_sha256() -> None:
    """CPython's built-in SHA-256 module of this version exists, named first (we use it to stay
    off OpenSSL), and gives ``hashlib``'s digests, whole and fed in parts."""
    import hashlib

    from stablerules import _private_python

    found = []
    for name in _private_python.SHA256_MODULES:
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    assert found, _moved("the built-in SHA-256 module", "CPython", sys.version)
    # the running interpreter's module is named first (a missing one costs a sys.path search)
    assert found[0].__name__ == _private_python.SHA256_MODULES[0], _moved("the built-in SHA-256 module", "CPython", sys.version)
    for data in (b"", b"stablerules", bytes(range(256)) * 300):
        assert _private_python.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
        assert found[0].sha256(data).digest() == hashlib.sha256(data).digest()
    parts = _private_python.sha256()
    parts.update(b"stable")
    parts.update(b"rules")
    assert parts.digest() == hashlib.sha256(b"stablerules").digest()

def test_numba_private_names() -> None:
    require("numba")
    version = _check_pinned("numba")
    numba = importlib.import_module("numba")
    from stablerules import _private_numba

    for name in _private_numba.EXTENSIONS:
        module = importlib.import_module(name)
        assert isinstance(getattr(module, "c_helpers", None), dict), _moved(f"{name}.c_helpers", "numba", version)
    assert callable(getattr(importlib.import_module(_private_numba.DYNFUNC), "make_function", None)), _moved(
        "numba._dynfunc.make_function", "numba", version
    )
    assert callable(getattr(importlib.import_module(_private_numba.NRT_PYTHON), "memsys_use_cpython_allocator", None)), (
        _moved("numba.core.runtime._nrt_python.memsys_use_cpython_allocator", "numba", version)
    )
    caching = importlib.import_module("numba.core.caching")
    locator = getattr(caching, "_CacheLocator", None)
    api = "numba.core.caching._CacheLocator.get_suitable_cache_subpath"
    assert locator is not None and hasattr(locator, "get_suitable_cache_subpath"), _moved(api, "numba", version)
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernels", "module.py")
        parent = os.path.dirname(source)
        assert _private_numba.cache_subpath(parent) == locator.get_suitable_cache_subpath(source), _moved(api, "numba", version)

    # The cached loader: a cached dispatcher's _cache has _index_key and _cache_file.load, and
    # they give the tuple _objectcode unpacks (for a signature compiled eagerly, as kernels are).
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "private_probe.py"
        path.write_text(
            "import numba\nfrom numba import types\n\n"
            "@numba.njit(types.int64(types.int64), cache=True)\ndef probe(x):\n    return x + 1\n"
        )
        spec = importlib.util.spec_from_file_location("private_probe", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert module.probe(1) == 2
        assert not module.probe._can_compile, "the probe is compiled eagerly, as kernels are"
        dispatcher = module.probe
        (compiled,) = dispatcher.overloads.values()
        api = "Dispatcher._cache._cache_file.load(_cache._index_key(signature, codegen))"
        data = _private_numba.cached_data(dispatcher._cache, compiled.signature, compiled.library.codegen)
        assert isinstance(data, tuple) and len(data) == 9, _moved(api, "numba", version)
        assert numba.__version__ == version

    # The lean refresh: each module it imports is one Numba's own CPU refresh imports, the
    # registries it installs exist, and the hooks it swaps and takes are where it expects them.
    import inspect

    cpu = importlib.import_module("numba.core.cpu")
    full = inspect.getsource(cpu.CPUContext.load_additional_registries)
    for name in _private_numba.LEAN_MODULES:
        module = importlib.import_module(name)
        assert name.rsplit(".", 1)[-1] in full, _moved(f"CPUContext.load_additional_registries ({name})", "numba", version)
    for name in _private_numba.LEAN_REGISTRIES:
        assert hasattr(importlib.import_module(name), "registry"), _moved(f"{name}.registry", "numba", version)
    assert "load_additional_registries" in inspect.getsource(cpu.CPUContext.refresh), _moved("CPUContext.refresh", "numba", version)
    assert hasattr(importlib.import_module("numba.core.imputils"), "builtin_registry"), _moved("imputils.builtin_registry", "numba", version)
    compiler_lock = importlib.import_module("numba.core.compiler_lock")
    assert hasattr(compiler_lock, "global_compiler_lock"), _moved("global_compiler_lock", "numba", version)
    # what a forked child renews (``renew_compiler_lock``): the RLock every compile takes
    held = getattr(compiler_lock.global_compiler_lock, "_lock", None)
    api = "numba.core.compiler_lock.global_compiler_lock._lock"
    assert held is not None and type(held) is type(threading.RLock()), _moved(api, "numba", version)
    with compiler_lock.global_compiler_lock:  # the lock it takes is this one: another thread cannot
        other: list[bool] = []
        thread = threading.Thread(target=lambda: other.append(held.acquire(blocking=False)))
        thread.start()
        thread.join()
        assert other == [False], _moved(api, "numba", version)
    assert not _private_numba.renew_compiler_lock()  # free here: left as it is
    assert compiler_lock.global_compiler_lock._lock is held
    assert callable(getattr(importlib.import_module("numba.np.arrayobj"), "_empty_nd_impl", None)), (
        _moved("numba.np.arrayobj._empty_nd_impl", "numba", version)
    )
    errors = importlib.import_module("numba.core.errors")
    assert issubclass(errors.TypingError, errors.NumbaError) and issubclass(errors.LoweringError, errors.NumbaError), (
        _moved("numba.core.errors.NumbaError", "numba", version)
    )
    assert callable(importlib.import_module("numba.core.runtime.nrt").rtsys.initialize), _moved("numba.core.runtime.nrt.rtsys.initialize", "numba", version)

    # Whether the compiler has started: the probe compiled, so the top-level target context is
    # set, as the cached property's name in cpu_target's __dict__ (a fresh process: not yet).
    registry = importlib.import_module(_private_numba.REGISTRY)
    api = "numba.core.registry.cpu_target._toplevel_target_context"
    assert _private_numba.TARGET_CONTEXT in vars(registry.cpu_target), _moved(api, "numba", version)
    assert _private_numba.compiler_started(), _moved(api, "numba", version)
    fresh = "import numba\nfrom stablerules import _private_numba as p\nprint(p.compiler_started())"
    done = subprocess.run([sys.executable, "-c", fresh], capture_output=True, text=True, check=True, timeout=120, cwd=ROOT)
    assert done.stdout.strip() == "False", _moved(api, "numba", version)


def test_jax_private_names() -> None:
    require("jax")
    version = _check_pinned("jax")
    import jax.extend.core

    from stablerules.jax import _private

    assert _private.Primitive is jax.extend.core.Primitive, _moved("jax._src.core.Primitive", "jax", version)


def test_torch_private_names() -> None:
    require("torch")
    version = _check_pinned("torch")
    import torch

    from stablerules.torch import _private

    api = "torch._C._are_functorch_transforms_active"
    assert _private.FUNCTORCH_ACTIVE() is False, _moved(api, "torch", version)
    seen: list[bool] = []

    def probe(x: torch.Tensor) -> torch.Tensor:
        seen.append(_private.FUNCTORCH_ACTIVE())
        return x * 2

    torch.func.vmap(probe)(torch.ones(3))
    assert seen == [True], _moved(api, "torch", version)

    api = "torch.autograd.forward_ad._current_level"
    assert _private.forward_ad_active() is False, _moved(api, "torch", version)
    with torch.autograd.forward_ad.dual_level():
        assert _private.forward_ad_active() is True, _moved(api, "torch", version)
    assert _private.forward_ad_active() is False, _moved(api, "torch", version)


def test_version_pins_are_read() -> None:
    """The pin reader finds the bounds pyproject.toml states (so the checks above can fail)."""
    assert ">=0.10" in _pins("jax") and "<0.11" in _pins("jax")
    with pytest.raises(AssertionError, match="outside pyproject.toml's pin"):
        original = importlib.metadata.version
        try:
            importlib.metadata.version = lambda package: "0.9.0"  # type: ignore[assignment]
            _check_pinned("jax")
        finally:
            importlib.metadata.version = original
