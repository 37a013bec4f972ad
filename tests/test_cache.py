"""The kernel cache: memory, disk, compile; counters; guards; faults.

Each test builds its own ``KernelCache`` over its own directory, with a kernel whose source
carries a unique salt, so tests never share compiled state with each other or the suite.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import pkgutil
import stat
import subprocess
import sys
import textwrap
import threading
import types as pytypes
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

import stablerules as sr
from stablerules import Val, _memo
from stablerules._cache import (
    CACHE,
    DiskStore,
    KernelCache,
    MemoryStore,
)
from stablerules._key import KernelSource, ShapeSignature
from stablerules._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array, writable_array

REPO = Path(__file__).resolve().parents[1]


def doubling_kernel(salt: str, dtype: str = "float64") -> tuple[ShapeSignature, Callable[[], KernelSource]]:
    """A signature and a renderer of ``out[i] = 2 * x[i]``; ``salt`` makes the source unique."""
    signature = ShapeSignature("double", "forward", (salt,), (dtype,), (1,))

    def render() -> KernelSource:
        body = SourceWriter()
        body.line(f"# salt {salt}")
        with body.block("for i in range(lo, hi):"):
            body.line("out[i] = 2 * x[i]")
        parameters = [("x", readonly_array(dtype)), ("out", writable_array(dtype)), ("lo", INDEX), ("hi", INDEX)]
        return cpu_kernel(signature, parameters, body, "test kernel: out = 2 x")

    return signature, render


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(directory))
    monkeypatch.delenv("STABLERULES_DISK_CACHE", raising=False)
    return directory


def run_kernel(cache: KernelCache, salt: str) -> np.ndarray:
    signature, render = doubling_kernel(salt)
    kernel = cache.get(signature, render)
    x = np.arange(6.0)
    out = np.empty_like(x)
    kernel.function(x, out, 0, x.size)
    return out


def test_compile_then_memory_hit(cache_dir: Path) -> None:
    cache = KernelCache()
    salt = uuid.uuid4().hex
    np.testing.assert_array_equal(run_kernel(cache, salt), 2 * np.arange(6.0))
    assert (cache.compiles, cache.disk_hits, cache.memory_hits) == (1, 0, 0)
    np.testing.assert_array_equal(run_kernel(cache, salt), 2 * np.arange(6.0))
    assert (cache.compiles, cache.disk_hits, cache.memory_hits) == (1, 0, 1)
    info = cache.info()
    assert info.entries == 1 and info.compile_seconds > 0 and info.disk_enabled
    assert info.directory == str(cache_dir)


def test_cache_dir_created_private(cache_dir: Path) -> None:
    run_kernel(KernelCache(), uuid.uuid4().hex)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert list((cache_dir / "kernels").glob("*.py"))


def test_disk_hit_in_fresh_process(cache_dir: Path) -> None:
    salt = uuid.uuid4().hex
    run_kernel(KernelCache(), salt)
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from test_cache import run_kernel
        from stablerules._cache import KernelCache
        cache = KernelCache()
        out = run_kernel(cache, {salt!r})
        print(json.dumps([cache.compiles, cache.disk_hits, out.tolist()]))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=os.environ.copy())
    compiles, disk_hits, out = json.loads(result.stdout.strip().splitlines()[-1])
    assert (compiles, disk_hits) == (0, 1)
    assert out == (2 * np.arange(6.0)).tolist()


def test_signature_is_part_of_the_key(cache_dir: Path) -> None:
    cache = KernelCache()
    salt = uuid.uuid4().hex
    cache.get(*doubling_kernel(salt, "float64"))
    cache.get(*doubling_kernel(salt, "float32"))
    assert cache.compiles == 2 and cache.info().entries == 2


def test_compiled_kernel_refuses_other_types(cache_dir: Path) -> None:
    signature, render = doubling_kernel(uuid.uuid4().hex)
    kernel = KernelCache().get(signature, render)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(TypeError):
        kernel.function(x, np.empty_like(x), 0, 4)


def test_readonly_input_accepted(cache_dir: Path) -> None:
    signature, render = doubling_kernel(uuid.uuid4().hex)
    kernel = KernelCache().get(signature, render)
    x = np.arange(4.0)
    x.setflags(write=False)
    out = np.empty(4)
    kernel.function(x, out, 0, 4)
    np.testing.assert_array_equal(out, 2 * x)


def test_no_compile_raises_on_new_signature_and_is_silent_when_warm(cache_dir: Path) -> None:
    cache = KernelCache()
    warm = uuid.uuid4().hex
    run_kernel(cache, warm)
    with sr.no_compile():
        run_kernel(cache, warm)
        with pytest.raises(sr.RecompileError, match="no_compile"):
            run_kernel(cache, uuid.uuid4().hex)


def test_public_no_compile_guards_the_global_cache() -> None:
    signature, render = doubling_kernel(uuid.uuid4().hex)
    with sr.no_compile(), pytest.raises(sr.RecompileError):
        CACHE.get(signature, render)
    CACHE.get(signature, render)
    with sr.no_compile():
        CACHE.get(signature, render)


def test_no_fallback_flags_dynamic_arguments() -> None:
    """A plain static is counted once per call, whether the call builds its plan or finds
    it, by the scaffold alone (the shared readers count nothing), and refused inside
    ``no_fallback()``."""
    from stablerules._arrays import static_int

    before = sr.cache_info().dynamic_arguments
    assert static_int(3, "axis") == 3 and static_int(sr.Val(3), "axis") == 3
    assert sr.cache_info().dynamic_arguments == before
    x = np.arange(6.0).reshape(2, 3)
    sr.clear_caches()  # the first call below builds its plan, the second finds it
    for call in range(1, 3):
        np.testing.assert_array_equal(sr.flip(x, 1), np.flip(x, 1))
        assert sr.cache_info().dynamic_arguments == before + call
    np.testing.assert_array_equal(sr.flip(x, sr.Val(1)), np.flip(x, 1))
    assert sr.cache_info().dynamic_arguments == before + 2
    with sr.no_fallback():
        sr.flip(x, sr.Val(1))
        with pytest.raises(sr.DynamicFallbackError, match="'axis'"):
            sr.flip(x, 1)
        sr.clear_caches()
        with pytest.raises(sr.DynamicFallbackError, match="'axis'"):
            sr.flip(x, 1)


def test_disabled_disk_cache_is_a_memory_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STABLERULES_DISK_CACHE", "0")
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(tmp_path / "unused"))
    cache = KernelCache()
    np.testing.assert_array_equal(run_kernel(cache, uuid.uuid4().hex), 2 * np.arange(6.0))
    assert isinstance(cache.store, MemoryStore)
    assert not (tmp_path / "unused").exists()
    assert cache.info().disk_enabled is False


def assert_reloads_with_one_warning(salt: str) -> None:
    """In a fresh cache (kernel modules dropped), the damaged entry of ``salt``'s kernel is
    recompiled once, with one "could not be loaded" warning, and still computes right."""
    for name in [name for name in sys.modules if name.startswith("_stablerules_k_")]:
        del sys.modules[name]
    cache = KernelCache()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_kernel(cache, salt)
    np.testing.assert_array_equal(out, 2 * np.arange(6.0))
    messages = [str(w.message) for w in caught if "could not be loaded" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert cache.compiles == 1


@pytest.mark.parametrize("damage", ["garbage", "truncate"])
def test_corrupted_cache_file_recompiles_with_one_warning(cache_dir: Path, damage: str) -> None:
    salt = uuid.uuid4().hex
    run_kernel(KernelCache(), salt)
    numba_files = sorted((cache_dir / "kernels" / "__pycache__").glob("*.nb*"))
    assert numba_files
    for path in numba_files:
        data = path.read_bytes()
        path.write_bytes(b"\x80\x04garbage" * 8 if damage == "garbage" else data[: len(data) // 3])
    assert_reloads_with_one_warning(salt)


def test_corrupted_source_file_is_rewritten(cache_dir: Path) -> None:
    salt = uuid.uuid4().hex
    run_kernel(KernelCache(), salt)
    (source,) = [p for p in (cache_dir / "kernels").glob("*.py")]
    source.write_text("this is not python (")
    for name in [name for name in sys.modules if name.startswith("_stablerules_k_")]:
        del sys.modules[name]
    np.testing.assert_array_equal(run_kernel(KernelCache(), salt), 2 * np.arange(6.0))
    assert "def kernel" in source.read_text()


def test_unwritable_cache_dir_falls_back_to_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(blocker / "cache"))
    cache = KernelCache()
    with pytest.warns(RuntimeWarning, match="not usable"):
        np.testing.assert_array_equal(run_kernel(cache, uuid.uuid4().hex), 2 * np.arange(6.0))
    assert isinstance(cache.store, MemoryStore)


def test_cache_dir_writable_by_others_is_not_loaded_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "shared-cache"
    directory.mkdir()
    directory.chmod(0o777)
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(directory))
    cache = KernelCache()
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        run_kernel(cache, uuid.uuid4().hex)
    assert isinstance(cache.store, MemoryStore)
    assert not (directory / "kernels").exists()


def test_eight_threads_compile_one_signature_once(cache_dir: Path) -> None:
    cache = KernelCache()
    signature, render = doubling_kernel(uuid.uuid4().hex)
    barrier = threading.Barrier(8)
    functions: list[object] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            functions.append(cache.get(signature, render).function)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert cache.compiles == 1 and cache.memory_hits == 7
    assert len({id(function) for function in functions}) == 1


@pytest.mark.slow
def test_four_processes_fill_one_empty_cache_dir(cache_dir: Path) -> None:
    salt = uuid.uuid4().hex
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO / 'tests')!r})
        from test_cache import run_kernel
        from stablerules._cache import KernelCache
        for extra in range(3):
            assert run_kernel(KernelCache(), {salt!r} + str(extra)).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        print("ok")
        """
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        for _ in range(4)
    ]
    for process in processes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        assert stdout.strip().endswith("ok")
    # The filled cache serves a fresh process from disk.
    cache = KernelCache()
    for extra in range(3):
        run_kernel(cache, salt + str(extra))
    assert cache.compiles == 0 and cache.disk_hits == 3


def test_clear_caches_empties_memory_and_disk(cache_dir: Path) -> None:
    cache = KernelCache()
    salt = uuid.uuid4().hex
    run_kernel(cache, salt)
    cache.clear()
    assert cache.info().entries == 0
    run_kernel(cache, salt)
    assert cache.disk_hits == 1
    cache.clear(disk=True)
    assert not list((cache_dir / "kernels").glob("*.py"))
    run_kernel(cache, salt)
    assert cache.compiles == 2


def test_shared_source_is_compiled_once_for_two_signatures(cache_dir: Path) -> None:
    cache = KernelCache()
    signature, render = doubling_kernel(uuid.uuid4().hex)
    cache.get(signature, render)
    cache.get(signature._replace(op="double-alias"), render)
    assert cache.compiles == 1 and cache.info().entries == 2


def test_disk_store_type(cache_dir: Path) -> None:
    assert isinstance(KernelCache().store, DiskStore)


_FORCED_COLLECTIONS = """
import gc, sys, uuid
forced = []
collect = gc.collect
gc.collect = lambda *a: forced.append(a) or collect(*a)  # counts the collections code asks for
from stablerules._cache import KernelCache
from tests.test_cache import doubling_kernel, run_kernel
if sys.argv[1] == "started":  # the program compiled a kernel of its own first
    import numba
    numba.njit("int64(int64)")(lambda v: v + 1)(1)
cache = KernelCache()
run_kernel(cache, uuid.uuid4().hex)
first = len(forced)
cache.get(*doubling_kernel(uuid.uuid4().hex, "float32"))
print("FORCED", first, len(forced) - first, cache.compiles)
"""


@pytest.mark.parametrize("before", ["fresh", "started"])
def test_the_kernel_that_starts_numba_pays_the_gc_debt_of_its_start_up(before: str, tmp_path: Path) -> None:
    """A fresh process: the first kernel compiled through Numba starts it, and pays the full
    collection that start-up owes, once. Where the program had started Numba before (its own
    ``njit``), that debt is the program's: no kernel of ours forces a collection for it, so a
    new kernel's compile time is its compile alone (``bench/compile_time.py``)."""
    env = dict(os.environ, STABLERULES_CACHE_DIR=str(tmp_path), STABLERULES_DISK_CACHE="1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", _FORCED_COLLECTIONS, before], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, later, compiles = (int(n) for n in done.stdout.split("FORCED")[1].split())
    assert compiles == 2  # both kernels went through Numba
    assert (first, later) == ((1, 0) if before == "fresh" else (0, 0))


_START_UP_COLLECTION = """
import gc, sys, weakref
mode, salt = sys.argv[1], sys.argv[2]
calls = []
freeze, unfreeze = gc.freeze, gc.unfreeze
gc.freeze = lambda: calls.append("freeze") or freeze()
gc.unfreeze = lambda: calls.append("unfreeze") or unfreeze()
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
class Node:
    pass
if mode == "program-froze":
    gc.freeze()
    calls.clear()
if mode == "gc-off":
    gc.disable()
frozen_before = gc.get_freeze_count()
from stablerules._cache import DiskStore, KernelCache
from tests.test_cache import run_kernel
def bracket(cls, name, opening, closing):
    method = getattr(cls, name)
    def bracketed(self, *args):
        collections.append(opening)
        try:
            return method(self, *args)
        finally:
            collections.append(closing)
    setattr(cls, name, bracketed)
bracket(KernelCache, "_build", "[", "]")
bracket(DiskStore, "load", "<", ">")
cache = KernelCache()
old = Node(); old.me = old  # a cycle the program dropped before the first kernel, once old:
gone = weakref.ref(old)
gc.collect()  # it survives into the oldest generation, where only a full collection finds it
del old
collections.clear()
run_kernel(cache, salt)
built = collections[collections.index("[") + 1 : collections.index("]")]
loading = built[built.index("<") + 1 : built.index(">")]
print("RESULT", cache.compiles, gc.isenabled(), (gc.get_freeze_count() > 0) == (frozen_before > 0), "|".join(calls) or "-",
      "|".join(map(str, loading)) or "-", built.count(2), gone() is None, end=" ")
gc.collect()
print(gone() is None)
"""


@pytest.mark.parametrize("mode", ["plain", "program-froze", "gc-off", "warm"])
def test_the_start_up_collection_traverses_the_start_ups_own_objects(mode: str, tmp_path: Path) -> None:
    """The build that starts Numba holds the automatic collections off while the start-up
    allocates, and freezes the program's objects for the one full collection after it (which so
    traverses the start-up's objects alone), then unfreezes them: the GC is as the program
    left it (enabled or not, nothing frozen that was not), no collection ran inside the
    start-up, and a cycle the program dropped before it is collected by the program's next
    full collection (not by ours, which did not traverse it). A program that froze objects
    itself keeps its freeze (none of ours); a kernel loaded from object code (``warm``)
    starts nothing: no freeze, no collection."""
    env = dict(os.environ, STABLERULES_CACHE_DIR=str(tmp_path), STABLERULES_DISK_CACHE="1", PYTHONPATH=str(REPO))
    salt = uuid.uuid4().hex

    def run(mode: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", _START_UP_COLLECTION, mode, salt], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.split("RESULT")[1].split()

    if mode == "warm":
        assert run("plain")[0] == "1"  # compiled, and stored as object code
        compiles, enabled, same_freeze, calls, loading, full, collected, later = run("plain")
        assert (compiles, enabled, same_freeze, calls, loading, full, later) == ("0", "True", "True", "-", "-", "0", "True")
        return
    compiles, enabled, same_freeze, calls, loading, full, collected, later = run(mode)
    assert compiles == "1" and same_freeze == "True"
    assert enabled == ("False" if mode == "gc-off" else "True")
    assert (loading, full) == ("-", "1")  # none while the start-up allocated; the full one after it
    if mode == "program-froze":
        assert (calls, collected, later) == ("-", "True", "True")  # a plain full collection
    else:
        assert (calls, collected, later) == ("freeze|unfreeze", "False", "True")


def test_cache_info_tells_the_truth_before_the_first_kernel(cache_dir: Path) -> None:
    info = KernelCache().info()
    assert (info.disk_enabled, info.directory, info.entries) == (True, str(cache_dir), 0)


def test_cache_info_before_the_first_kernel_with_the_disk_cache_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STABLERULES_DISK_CACHE", "0")
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(tmp_path / "unused"))
    info = KernelCache().info()
    assert (info.disk_enabled, info.directory) == (False, None)
    assert not (tmp_path / "unused").exists()


def test_corrupted_numba_index_under_numba_cache_dir_recompiles_with_one_warning(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from numba.core import config

    numba_dir = tmp_path / "numba-cache"
    monkeypatch.setattr(config, "CACHE_DIR", str(numba_dir))  # what NUMBA_CACHE_DIR sets
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(numba_dir))
    monkeypatch.setenv("STABLERULES_DIRECT_LOAD", "0")  # Numba's own load is under test
    salt = uuid.uuid4().hex
    run_kernel(KernelCache(), salt)
    (index,) = numba_dir.rglob("*.nbi")
    assert not list((cache_dir / "kernels").rglob("*.nbi"))
    index.write_bytes(b"\x80\x04garbage" * 8)
    assert_reloads_with_one_warning(salt)
    assert index.read_bytes() != b"\x80\x04garbage" * 8  # written again by the recompile


# --------------------------------------------------------------------------------------------
# no_compile() sees any code generation, not only a kernel compile
# --------------------------------------------------------------------------------------------


def test_no_compile_fires_on_exec_compile_and_eval_of_source() -> None:
    namespace: dict[str, object] = {}
    code = compile("def generated(): return 1", "<generated>", "exec")
    with sr.no_compile():
        with pytest.raises(sr.RecompileError, match="code was generated"):
            exec("def planted(): return 1", namespace)
        with pytest.raises(sr.RecompileError, match="code was generated"):
            compile("x = 1", "<generated>", "exec")
        with pytest.raises(sr.RecompileError, match="code was generated"):
            eval("1 + 1")
        with pytest.raises(sr.RecompileError, match="code was generated"):
            exec(code, namespace)  # generated code run again, though compiled before the block
    assert "planted" not in namespace and "generated" not in namespace
    exec("def planted(): return 1", namespace)  # outside the block: nothing refused
    assert callable(namespace["planted"])


def test_no_compile_lets_imports_and_other_threads_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = f"_stablerules_test_import_{uuid.uuid4().hex}"
    # a module that generates code as it is imported (namedtuple, as numpy.testing does)
    (tmp_path / f"{module}.py").write_text(
        "import collections\nPoint = collections.namedtuple('Point', 'x y')\nVALUE = eval('3')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(eval("2 + 2")))
    with sr.no_compile():
        imported = __import__(module)  # an import runs once: not a steady path generating code
        thread.start()
        thread.join(30)
        with pytest.raises(sr.RecompileError, match="code was generated"):
            imported.collections.namedtuple("Again", "a b")  # after the import: generation
    assert imported.VALUE == 3 and imported.Point(1, 2).y == 2
    assert results == [4]  # another thread's guard state is its own


def test_template_functions_compile_once_per_text_and_only_bind_later() -> None:
    from stablerules import _codegen

    text = f"def launch(x):\n    return x + offset  # {uuid.uuid4().hex}\n"
    before = _codegen.template_compiles[0]
    with sr.no_compile():  # the scaffold's one compile of a template is let through
        first = _codegen.template_function(text, "launch", "<stablerules test>", {"offset": 1})
    assert _codegen.template_compiles[0] == before + 1
    with sr.no_compile():
        second = _codegen.template_function(text, "launch", "<stablerules test>", {"offset": 10})
    assert _codegen.template_compiles[0] == before + 1  # bound to new globals, not compiled
    assert first(1) == 2 and second(1) == 11
    assert first.__code__ is second.__code__


def test_loading_a_kernel_may_load_another_in_the_same_thread() -> None:
    """A JAX FFI handler's module looks up the kernel it calls while its own dispatcher is being
    loaded: ``Kernel.function`` must not deadlock on its lock when loads nest (it did with a
    plain lock: a fresh process's handler load hung)."""
    from stablerules._key import Kernel, KernelSource

    signature = sr.ShapeSignature(op="nested", kind="forward", static=(), dtypes=(), ndims=())
    source = KernelSource("def kernel():\n    pass\n")
    inner = Kernel(None, signature, source, "inner", entry=len, load_function=lambda: len)
    outer = Kernel(None, signature, source, "outer", entry=len, load_function=lambda: inner.function)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(outer.function), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert done == [len], "nested kernel loads deadlocked"


# --------------------------------------------------------------------------------------------
# Every cache of the package is reachable from clear_caches()
# --------------------------------------------------------------------------------------------

# Memo tables of modules that register through ``_memo`` once they are converted; until then
# they are listed here, by name, so the scan below still fails on any other.
_NOT_YET_REGISTERED: frozenset[str] = frozenset()
# Tables made inside a function, by file and the module-level function that holds them.
_HIDDEN_NOT_YET_REGISTERED: frozenset[str] = frozenset()


def _package_modules() -> list[pytypes.ModuleType]:
    """Every module of the package (the engine adapters too, where their engine is installed)."""
    import stablerules

    modules = [stablerules]
    for found in pkgutil.walk_packages(stablerules.__path__, "stablerules."):
        try:
            modules.append(importlib.import_module(found.name))
        except ImportError as error:  # an adapter whose engine is missing here
            assert "stablerules" not in str(error), error
    return modules


def _memo_tables(module: pytypes.ModuleType) -> Iterator[tuple[str, functools._lru_cache_wrapper[object]]]:
    """The ``lru_cache`` tables a module defines, at module level or in a class body."""
    for value in list(vars(module).values()):
        owners = [value] if isinstance(value, type) and value.__module__ == module.__name__ else []
        for candidate in [value, *(item for owner in owners for item in vars(owner).values())]:
            if isinstance(candidate, (staticmethod, classmethod)):
                candidate = candidate.__func__
            if isinstance(candidate, functools._lru_cache_wrapper) and candidate.__module__ == module.__name__:
                yield f"{module.__name__}.{candidate.__qualname__}", candidate


def test_every_lru_cache_in_the_package_is_registered() -> None:
    """A ``functools.lru_cache``/``functools.cache`` table is out of ``clear_caches()``'s
    reach unless it registers (``_memo.memoized`` does): none may be missed."""
    tables = {name: table for module in _package_modules() for name, table in _memo_tables(module)}
    registered = {id(getattr(entry.clear, "__self__", None)) for entry in _memo.registered()}
    assert len(tables) >= 15  # the scan sees the tables (the rule modules' layouts and more)
    missing = sorted(name for name, table in tables.items() if id(table) not in registered)
    assert missing == sorted(_NOT_YET_REGISTERED), f"memoize these with stablerules._memo.memoized: {missing}"


def test_no_lru_cache_hides_inside_a_function() -> None:
    """The runtime scan sees module- and class-level tables; one made inside a function (or
    by calling ``lru_cache`` on a function) would escape it, so the source may hold none."""
    makers = {("functools", "lru_cache"), ("functools", "cache"), ("_memo", "memoized")}
    hidden = []
    for path in sorted((REPO / "stablerules").rglob("*.py")):
        if path.name == "_memo.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Bare names bound to a maker by ``from functools import lru_cache`` (or ``_memo``'s).
        bare = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if ((node.module or "").rpartition(".")[2], alias.name) in makers
        }
        allowed: set[int] = set()  # the decorators of module- and class-level functions
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef)):
                for statement in node.body:
                    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        allowed.update(id(part) for decorator in statement.decorator_list for part in ast.walk(decorator))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                uses_maker = isinstance(node.ctx, ast.Load) and node.id in bare
            elif isinstance(node, ast.Attribute):
                uses_maker = isinstance(node.value, ast.Name) and (node.value.id, node.attr) in makers
            else:
                continue
            if uses_maker and id(node) not in allowed:
                holder = next(
                    (
                        statement.name
                        for statement in tree.body
                        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                        and statement.lineno <= node.lineno <= (statement.end_lineno or statement.lineno)
                    ),
                    "<module>",
                )
                hidden.append(f"{path.relative_to(REPO)}:{holder}")
    assert sorted(set(hidden)) == sorted(_HIDDEN_NOT_YET_REGISTERED), hidden


def test_clear_caches_empties_every_registered_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fill every registered table through the calls that use it, clear, and see each empty."""
    from stablerules import _arrays, _cuda, _pool
    from stablerules.rules import kron as kron_rules

    _package_modules()  # every module imported: every table registered
    x, m = np.ones((2, 3)), np.ones((2, 3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # plain ints where Val is wanted
        calls: list[tuple[object, tuple[object, ...], dict[str, object]]] = [
            (sr.flip, (x, Val(0)), {}),
            (sr.roll, (x, Val(1)), {"axis": Val(1)}),
            (sr.repeat, (x, Val(2)), {"axis": Val(0)}),
            (sr.repeat, (x,), {"inner": Val((1, 2))}),
            (sr.tile, (x, Val((2, 1))), {}),
            (sr.permute_dims, (m, Val((2, 0, 1))), {}),
            (sr.reshape, (m, Val((6, -1))), {}),
            (sr.broadcast_to, (np.ones(3), Val((2, 3))), {}),
            (sr.sum, (m,), {"axis": Val(1)}),
            (sr.kron, (x, x), {}),
        ]
        for op, args, kwargs in calls:
            rule = cast(Any, op)
            rule.lookup(*rule.bind(*args, **kwargs))  # plans only: nothing compiles
    sr.cat(np.ones(2), 1, dims=Val(0))  # a Python int's range is checked on each call (no kernel)
    # the 16-bit conversion kernels (kron's forward converts; repeat's pullback reads the bits)
    _, kron_back = sr.rrule(sr.kron, np.ones(2, np.float16), np.ones(2, np.float16))
    kron_back(np.ones(4, np.float16))
    _, half_back = sr.rrule(sr.repeat, np.ones(2, np.float16), Val(2))
    half_back(np.ones(4, np.float16))
    kron_rules._cuda_kernels(kron_rules._layout((2, 3), x.dtype, (2, 3), x.dtype))
    _cuda.cuda_available()
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # the simulator's count, no device asked
    _cuda.multiprocessor_count()
    _arrays.host_memory_bytes()
    held = _pool.empty((_pool.MIN_BYTES // 8,), np.dtype(np.float64))
    del held
    from stablerules import _objectcode
    from stablerules.jax import _adapter as jax_adapter

    _objectcode.numba_version()
    _objectcode.host_key()
    jax_adapter.installed_api_version()
    import jax.numpy as jnp
    import stablerules.jax as srj

    import jax

    # repeat's forward is XLA's own; its pullback is our FFI kernel (a kernel name registered)
    jax.grad(lambda v: srj.repeat(v, Val(2), axis=Val(0)).sum())(jnp.ones(2))
    import torch
    import stablerules.torch as srt

    leaf = torch.ones(2, 3, requires_grad=True)
    torch.autograd.grad(srt.flip(leaf, Val(0)).sum(), leaf)  # signatures, a pullback
    for op, args, kwargs in [
        (sr.getindex, (x, sr.ix[1:, ::2]), {}),
        (sr.take, (x, np.array([1, 0, 1]), Val(1)), {}),
    ]:
        rule = cast(Any, op)
        rule.lookup(*rule.bind(*args, **kwargs))
    try:
        entries = _memo.registered()
        names = {entry.name for entry in entries}
        assert {"stablerules._cache.PlanCache", "stablerules._pool.blocks", "stablerules.rules.repeat._nest"} <= names
        unfilled = [entry.name for entry in entries if entry.size() == 0]
        if not _pool.ENABLED:
            unfilled.remove("stablerules._pool.blocks")  # STABLERULES_POOL=0: the pool holds nothing
        assert unfilled == [], f"the calls above leave these empty: extend them to fill {unfilled}"
    finally:
        sr.clear_caches()
    assert {entry.name: entry.size() for entry in _memo.registered() if entry.size()} == {}


# --- the kernels' Numba pipeline -----------------------------------------------------------------


def _compiled_overload(text: str) -> Any:
    """Numba's one compile result of the module ``text`` (a rendered kernel), compiled now."""
    module = pytypes.ModuleType(f"_stablerules_k_test_{uuid.uuid4().hex}")
    exec(compile(text.replace("{CACHE}", "False"), f"<{module.__name__}>", "exec"), module.__dict__)
    (result,) = module.kernel.overloads.values()
    return result


def _with_numbas_default_pipeline(text: str) -> str:
    """A rendered kernel's text as it would read without our pipeline and options: Numba's
    default nopython pipeline, with its C-callback wrapper."""
    lines = [line for line in text.splitlines(keepends=True) if "_kernel_pipeline" not in line]
    changed = "".join(lines).replace("\n    no_cfunc_wrapper=True, pipeline_class=KernelCompiler,\n", "\n")
    assert "KernelCompiler" not in changed and "no_cfunc_wrapper" not in changed
    return changed


def _optimized_kernel_ir(result: Any) -> str:
    """The LLVM IR of the kernel function itself after Numba's optimization, its names
    (which carry the module's name) replaced."""
    import re

    function = result.library._final_module.get_function(result.fndesc.mangled_name)
    return re.sub(r"\w*_stablerules_k_test_\w+", "K", str(function))


def test_cpu_kernels_compile_with_the_kernel_pipeline_and_no_c_callback_wrapper() -> None:
    signature, render = doubling_kernel(uuid.uuid4().hex)
    text = render().text
    result = _compiled_overload(text)
    assert list(result.metadata["pipeline_times"]) == ["stablerules_kernel"]
    assert type(result.library).__name__ == "_KernelLibrary"  # one LLVM optimization
    names = [function.name for function in result.library._final_module.functions if not function.is_declaration]
    assert any(name.startswith("_ZN7cpython") for name in names)  # what calls go through
    assert not any(name.startswith("cfunc.") for name in names), names
    out = np.zeros(5)
    result.entry_point(np.arange(5.0), out, 0, 5)
    np.testing.assert_array_equal(out, 2 * np.arange(5.0))
    # Numba's default pipeline, for contrast, runs its full pass list and adds the wrapper.
    default = _compiled_overload(_with_numbas_default_pipeline(text))
    assert list(default.metadata["pipeline_times"]) == ["nopython"]
    assert any(f.name.startswith("cfunc.") for f in default.library._final_module.functions)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: sr.repeat.kernel_requests(np.empty((200, 3, 4)), inner=Val((7, 1, 10)), outer=Val((4, 1, 2))), id="repeat"),
        pytest.param(lambda: sr.roll.kernel_requests(np.empty((4, 4, 6, 7), np.float32), Val((3, -5)), axis=Val((2, 3))), id="roll"),
        pytest.param(lambda: sr.broadcast_to.kernel_requests(np.empty((1, 4, 1, 5), np.float32), Val((3, 4, 6, 5))), id="broadcast_to"),
        pytest.param(lambda: sr.kron.kernel_requests(np.empty((10, 20)), np.empty((30, 10))), id="kron"),
    ],
)
def test_the_kernel_pipeline_gives_the_code_numbas_default_pipeline_gives(
    call: Callable[[], list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Numba passes the kernel pipeline leaves out change nothing in our kernels: with
    Numba's own code library, each rule kernel's optimized LLVM IR is the default pipeline's,
    text for text. The kernel library (one LLVM optimization instead of three) keeps the
    loops vectorized as the default does: the same vector loops and vector operations."""
    import re

    from stablerules import _kernel_pipeline

    def vector_code(ir: str) -> tuple[int, int]:
        return ir.count("vector.body:"), len(re.findall(r"<\d+ x (?:double|float|i\d+)>", ir))

    kernels = [request for request in call() if request.signature.kind != "pushforward"]
    assert kernels
    for request in kernels[:2]:
        text = request.render().text
        if "pipeline_class=NoaliasKernelCompiler" in text:  # broadcast_to's reduction
            # noalias changes the code by design (no overlap checks, no second loop version):
            # its own compile has the attribute, and without it the code is the default's
            noalias = _optimized_kernel_ir(_compiled_overload(text))
            assert "ptr noalias" in noalias and "K" in noalias
            text = text.replace("NoaliasKernelCompiler", "KernelCompiler")
        lean = _optimized_kernel_ir(_compiled_overload(text))
        default = _optimized_kernel_ir(_compiled_overload(_with_numbas_default_pipeline(text)))
        assert "K" in lean and len(lean) > 200
        assert vector_code(lean) == vector_code(default), request.signature
        with monkeypatch.context() as patch:
            patch.setattr(_kernel_pipeline, "LEAN_LIBRARY", False)
            ours = _optimized_kernel_ir(_compiled_overload(text))
        assert ours == default, request.signature


def test_the_kernel_pipelines_source_is_part_of_every_kernels_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Numba's own cache does not see a change to the pipeline class a kernel names, so the
    pipeline's source digest is in every kernel's text, hence in its hash and file name."""
    import hashlib

    from stablerules import _codegen
    from stablerules._cache import source_hash

    digest = hashlib.sha256((REPO / "stablerules" / "_kernel_pipeline.py").read_bytes()).hexdigest()[:16]
    _, render = doubling_kernel("pipeline-key")
    before = render()
    assert f"pipeline: stablerules._kernel_pipeline {digest}\n" in before.text
    monkeypatch.setattr(_codegen, "_pipeline_hash", lambda: "0" * 16)
    assert source_hash(render()) != source_hash(before)


LEAN_SCRIPT = """
import json, sys
import numpy as np
import stablerules as sr
from stablerules import Val, _private_numba

def grads():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    out = []
    y, back = sr.rrule(sr.repeat, x, inner=Val((2, 3)))
    out.append(back(np.ones_like(y))[0])
    y, back = sr.rrule(sr.take, x, np.array([0, 2, 2, 1]), axis=Val(0))
    out.append(back(np.ones_like(y))[0])
    y, back = sr.rrule(sr.kron, x, x[:2])
    out.append(back(np.ones_like(y))[0])
    y, back = sr.rrule(sr.sum, x.astype(np.float16), axis=Val(1))
    out.append(back(np.ones_like(y))[0])
    for y, back in (
        sr.rrule(sr.roll, x, Val(1), axis=Val(0)),
        sr.rrule(sr.tile, x, Val((2, 1))),
        sr.rrule(sr.broadcast_to, x[:1], Val((5, 4))),
        sr.rrule(sr.mean, x, axis=Val(0)),
        sr.rrule(sr.take_along_axis, x, np.array([[0, 1, 1, 0]]), axis=Val(0)),
        sr.rrule(sr.index_add, x, np.array([0, 0, 2]), np.ones((3, 4), np.float32), axis=Val(0)),
        sr.rrule(sr.repeat, x.astype(np.float16), inner=Val((1, 2))),
    ):
        out.append(back(np.ones_like(y))[0])
    return [g.tolist() if hasattr(g, "tolist") else np.asarray(g).tolist() for g in out]

lean = grads()
loaded = sorted(m for m in ("numba.np.arraymath", "scipy.linalg", "numba.np.linalg") if m in sys.modules)
retries = _private_numba.lean_retries

import numba

@numba.njit
def users(a):
    return np.sum(a) + np.dot(a, a)

user = users(np.arange(3.0))
sr.clear_caches(disk=True)
compiled = sr.cache_info().compiles
full = grads()

print(json.dumps([loaded, retries, user, lean == full, "numba.np.arraymath" in sys.modules, compiled, sr.cache_info().compiles]))
"""


def test_kernels_compile_on_numbas_lean_refresh(cache_dir: Path) -> None:
    """A cold process's kernels of ours load none of Numba's CPU registries they do not use
    (``numba.np.arraymath`` and, through its BLAS probe, SciPy's linear algebra); the user's
    own ``njit`` code compiled after them still finds all of Numba (``np.sum``, ``np.dot``),
    and our kernels compiled after that full refresh give the same results."""
    done = subprocess.run([sys.executable, "-c", LEAN_SCRIPT], capture_output=True, text=True, env=os.environ.copy(),
                          cwd=REPO, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    loaded, retries, user, same, arraymath_after, lean_compiles, compiles = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == [] and retries == 0
    assert lean_compiles >= 5 and compiles == 2 * lean_compiles, "the second round compiles every kernel again" 
    assert user == 8.0 and arraymath_after
    assert same


def test_a_build_outside_the_lean_registries_compiles_after_the_full_refresh() -> None:
    """What a template outside ``LEAN_MODULES`` would meet: the lean compile fails, the
    context is refreshed in full and the build runs again (counted)."""
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        import numba
        from stablerules import _private_numba

        def build():
            @numba.njit
            def f(a):
                return np.cumsum(a)[-1] + np.dot(a, a)
            return f(np.arange(4.0))

        print(json.dumps([_private_numba.lean_compile(build), _private_numba.lean_retries]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [6.0 + 14.0, 1]
