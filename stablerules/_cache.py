"""The kernel cache: one object, one key type, memory -> disk -> compile.

A rule hands the cache a :class:`ShapeSignature` and a function that renders the kernel's
source; it gets back a :class:`Kernel`. The cache knows no op.

Disk layout (``$STABLERULES_CACHE_DIR``, default ``~/.cache/stablerules``, mode 0700)::

    kernels/<hash>.py            generated source, written atomically, imported as
                                 module ``_stablerules_k_<hash>``
    kernels/__pycache__/...      Numba's own cache (index + object code) for that module
                                 (or under ``$NUMBA_CACHE_DIR`` when that is set)
    kernels/<hash>.<key>.native  the kernel's object code, loaded without Numba in later
                                 processes (see ``_objectcode``; ``STABLERULES_DIRECT_LOAD=0``
                                 turns that off)

Numba can only cache a function that lives in a real, importable file and is always imported
under the same module name, hence one file per kernel named by a hash of its source, of
stablerules' version and of numba's version (Numba's index adds the CPU name and features).

A process whose kernels all come from object code never imports Numba: Numba starts only when
something must compile, or when a kernel's ``function`` (the dispatcher) is asked for.

Faults (the disk is an optimization only, SPEC section 16):

- A cache entry that fails to load, or whose Numba files do not match the SHA-256 digests
  recorded in ``kernels/<hash>.digests`` when they were written, is deleted and recompiled
  with one warning; it is never loaded. (The ``.native`` files carry their own digest.)
- A write that fails (a full disk, a file-size limit, permissions, a folder another process's
  ``clear_caches(disk=True)`` moved away) warns once per process; the process then writes
  nothing more and keeps new kernels in memory.
- A cache folder that other users can write or do not own (the top one, ``kernels``, Numba's
  ``__pycache__``, ``NUMBA_CACHE_DIR`` and its folder for us) is not used: a Numba cache file
  is a pickle, so loading one runs code. Kernels then live in memory only, with one warning.
- A cache this process cannot write to (a read-only file system, a folder without write
  permission, a full disk: a cache that ``sr.precompile`` filled in a build step and a
  deployment mounts read-only), whose folders are otherwise safe, is read: the kernels it holds
  as object code load from it, and any other compiles in this process's memory, with one
  warning. A write that fails later does the same from then on. Until round 23 such a cache
  was set aside (every kernel it held compiled again), and so was the cache after a failed
  write.
- ``clear(disk=True)`` renames each folder aside before removing it, so other processes
  reading or writing it at that moment see a miss or a failed write, never a half-removed
  folder.
- No lock is held while running code that can re-enter (a ``__del__`` run by a garbage
  collection may call an op): a call re-entering the build of its own signature builds the
  kernel again in memory instead of waiting for itself.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib.util
import os
import stat
import sys
import _thread
import time
import types as pytypes
import warnings
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeVar

from . import _config, _fork, _memo, _private_numba
from ._errors import RecompileError
from ._guards import COUNTERS, NO_COMPILE
from ._key import Kernel, KernelFunction, KernelSource, ShapeSignature
from ._private_numba import cache_subpath
from ._private_python import sha256
from ._version import __version__


if TYPE_CHECKING:
    from pathlib import Path  # the cache's paths come from _config.cache_dir(), made there


class CacheInfo(NamedTuple):
    """A snapshot of the cache counters (``sr.cache_info()``): a frozen record (a named tuple,
    so ``_asdict()`` and ``_replace()`` work; cheaper to define at import than a dataclass).

    ``memory_hits`` counts kernel lookups served from memory; ``plan_hits`` counts calls that
    found their signature's plan (see :class:`PlanCache`) and so looked up no kernel at all.
    """

    compiles: int
    memory_hits: int
    disk_hits: int
    entries: int
    compile_seconds: float
    load_seconds: float
    dynamic_arguments: int
    fallbacks: int
    disk_enabled: bool
    directory: str | None
    plan_hits: int = 0


def default_cache_dir() -> Path:
    return _config.cache_dir()


def _numba_version() -> str:
    # The installed version, read once and without importing numba.
    from . import _objectcode  # noqa: PLC0415 - the stored object code's module loads with the first kernel

    return _objectcode.numba_version()


def source_hash(source: KernelSource) -> str:
    digest = sha256()
    for part in (__version__, _numba_version(), source.entry, source.text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def _dispatcher_disk_hits(function: object) -> int:
    stats = getattr(function, "stats", None)
    hits = getattr(stats, "cache_hits", None)
    if hits is None:
        # A ``numba.cfunc`` (the JAX adapter's FFI handlers) counts its one signature's hits
        # itself, as an int.
        cfunc_hits = getattr(function, "cache_hits", None)
        return cfunc_hits if isinstance(cfunc_hits, int) else 0
    return int(sum(hits.values()))


_WARNED: set[str] = set()


def _warn_once(topic: str, message: str) -> None:
    """One warning per process and topic (a full disk warns once, not at every kernel)."""
    if topic in _WARNED:
        return
    _WARNED.add(topic)
    warnings.warn(message, RuntimeWarning, stacklevel=5)


def _not_ours(info: os.stat_result) -> bool:
    """Whether a cache folder's ``stat`` says another user owns it or others may write it."""
    return info.st_uid != os.getuid() or bool(info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _unsafe_folder(folder: Path) -> str | None:
    """Why ``folder`` is not one to load code from (a symbolic link, not a folder, another
    user's, writable by others), or ``None`` when it is safe: the check the top folder has
    always had, for every folder on the path of what is loaded."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return None  # made by us (mode 0700) when first written
    except OSError as error:
        return f"{folder} cannot be inspected ({error.strerror})"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder (a symbolic link or a file)"
    if _not_ours(info):
        return (
            f"{folder} is writable by other users or not owned by this user "
            f"(mode {stat.filemode(info.st_mode)})"
        )
    return None


_START_UP: ContextVar[list[bool] | None] = ContextVar("stablerules_numba_start_up", default=None)
"""Set by the build whose kernel starts Numba (``KernelCache._build``): ``[]`` until its load
takes Numba's path (``_import_numba``), which freezes the objects there before it
(``gc.freeze``) and records it (``[True]``); the build unfreezes them after its collection."""


def _import_numba() -> None:
    """Import Numba (the compiler, imported on first use). An interruption part-way
    (``KeyboardInterrupt`` while its modules load) leaves half-initialized ``numba.*``
    modules behind, which every later import would find as they are (``module 'numba' has no
    attribute 'core'``): those are removed again, so the next call imports Numba afresh.
    Inside the build that starts Numba (:data:`_START_UP`), the program's objects are frozen
    first, so that the collection after the start-up traverses the start-up's own."""
    window = _START_UP.get()
    if window is not None and not window and gc.get_freeze_count() == 0:
        gc.freeze()
        window.append(True)
    numba = sys.modules.get("numba")
    if numba is not None and getattr(numba, "njit", None) is not None and "numba.core.caching" in sys.modules:
        return
    before = set(sys.modules)
    _fork.before_numba()
    try:
        importlib.import_module("numba")
        importlib.import_module("numba.core.caching")
    except BaseException:
        for name in set(sys.modules) - before:
            if name.split(".")[0] in {"numba", "llvmlite"}:
                del sys.modules[name]
        partial = sys.modules.get("numba")
        if partial is not None and getattr(partial, "njit", None) is None:
            del sys.modules["numba"]
        raise


class LoadedKernel(NamedTuple):
    """What a store hands back: the entry point, Numba's dispatcher (``None`` when the kernel
    came from object code without Numba) and whether it came from disk."""

    entry: KernelFunction
    function: KernelFunction | None
    from_disk: bool


class KernelStore(Protocol):
    """Where kernel modules come from: files on disk, or memory only."""

    directory: Path | None

    def load(self, name: str, source: KernelSource) -> LoadedKernel:
        """Load or compile the kernel; say whether it came from disk."""
        ...

    def dispatcher(self, name: str, source: KernelSource) -> tuple[KernelFunction, bool]:
        """Numba's dispatcher of a kernel ``load`` served from object code, and whether Numba
        compiled it just now (its own cache entry was missing or damaged)."""
        ...

    def clear(self) -> None: ...


class MemoryStore:
    """The disabled disk cache: modules are executed from memory and compiled each process."""

    directory: Path | None = None

    def load(self, name: str, source: KernelSource) -> LoadedKernel:
        _import_numba()
        code = compile(source.render(cache=False), f"<stablerules kernel {name}>", "exec")

        def build() -> pytypes.ModuleType:
            module = pytypes.ModuleType(name)
            exec(code, module.__dict__)
            return module

        module = _private_numba.lean_compile(build)
        function: KernelFunction = getattr(module, source.entry)
        return LoadedKernel(Kernel.entry_of(function), function, False)

    def dispatcher(self, name: str, source: KernelSource) -> tuple[KernelFunction, bool]:
        function = self.load(name, source).function
        assert function is not None
        return function, True

    def clear(self) -> None:
        return None


class DiskStore:
    """Kernel modules as files under ``directory/kernels``, cached by Numba beside them.

    The disk is an optimization only. A write that fails (a full disk, a file-size limit,
    permissions, a folder removed by another process's ``clear_caches(disk=True)``) warns once
    per process, and this store then serves every kernel from memory (:class:`MemoryStore`).
    Numba's files of a kernel (its index, a pickle, and its object code) are loaded only when
    they match the SHA-256 digests recorded in ``kernels/<hash>.digests`` after Numba wrote
    them; any other file is a miss (deleted, the kernel recompiled), never a load.
    """

    def __init__(self, directory: Path, unwritable: OSError | None = None) -> None:
        self.directory: Path | None = directory
        self._kernels = directory / "kernels"
        from . import _objectcode  # noqa: PLC0415 - loaded with the first kernel, not with stablerules

        self._object_code = _objectcode.ObjectCodeStore(self._kernels) if _objectcode.enabled() else None
        # Once a write has failed (``unwritable``: at the store's opening, a read-only file
        # system say; or later, ``_give_up_disk``), the store writes nothing more: it loads the
        # object code it holds, and every other kernel compiles in memory (``_in_memory``).
        self.read_only = unwritable is not None
        self._unwritable = unwritable
        self._compiled_here: MemoryStore | None = None

    def _in_memory(self) -> MemoryStore:
        """Where an unwritable store's missing kernels compile: this process's memory (one
        warning a process, when the first one does)."""
        if self._compiled_here is None:
            error = self._unwritable
            reason = "" if error is None else f" ({type(error).__name__}: {error})"
            _warn_once(
                "write",
                f"stablerules: the kernel cache under {self.directory} cannot be written{reason}; "
                f"the kernels stored there are loaded from it, and this process keeps the others "
                f"in memory (fill a read-only cache where it can be written: sr.precompile)",
            )
            self._compiled_here = MemoryStore()
        return self._compiled_here

    def _write_atomically(self, path: Path, data: str | bytes) -> None:
        import tempfile  # only a compile writes; a process that loads never pays its import

        fd, temporary = tempfile.mkstemp(dir=self._kernels, prefix=".tmp-", suffix=path.suffix)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def _ensure_source(self, path: Path, text: str) -> None:
        # Rewriting a file changes its mtime, which invalidates Numba's index: write only
        # when the file is missing or differs (a truncated or corrupted file).
        try:
            if path.read_text(encoding="utf-8") == text:
                return
        except (OSError, UnicodeDecodeError):
            pass
        self._write_atomically(path, text)

    def numba_folders(self) -> list[Path]:
        """Where Numba keeps this store's files: beside the modules, or under
        ``NUMBA_CACHE_DIR`` in a folder named after theirs
        (``_private_numba.cache_subpath``)."""
        numba_config = sys.modules.get("numba.core.config")
        if numba_config is None and os.path.exists(".numba_config.yaml"):
            # Numba reads a cache_dir from this file when it starts; the folder checked must
            # be the one it will use. (With the file there, every kernel goes through Numba.)
            numba_config = importlib.import_module("numba.core.config")
        configured = getattr(numba_config, "CACHE_DIR", None) or _config.numba_cache_dir()
        if not configured:
            return [self._kernels / "__pycache__"]
        from pathlib import Path  # noqa: PLC0415 - pathlib is not imported with stablerules

        return [Path(configured), Path(configured) / cache_subpath(os.path.abspath(self._kernels))]

    def _numba_files(self, stem: str) -> list[Path]:
        folder = self.numba_folders()[-1]
        return sorted(
            path
            for path in folder.glob(f"{stem}.*")
            if path.suffix in {".nbi", ".nbc"} and ".tmp" not in path.name
        )

    def _digests(self, stem: str) -> dict[str, str]:
        return {path.name: sha256(path.read_bytes()).hexdigest() for path in self._numba_files(stem)}

    def _recorded(self, stem: str) -> dict[str, str] | None:
        import json

        try:
            with open(self._kernels / f"{stem}.digests", "rb") as handle:
                record = json.loads(handle.read())
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or not all(isinstance(v, str) for v in record.values()):
            return None
        return record

    def _check_numba_files(self, stem: str, path: Path) -> None:
        """Delete Numba's files of ``stem`` unless each matches the digest recorded when it
        was written (a file without a record is a miss too): Numba then recompiles."""
        try:
            found = self._digests(stem)
        except OSError:
            found = {"unreadable": ""}
        if not found:
            return
        recorded = self._recorded(stem)
        if recorded is not None and all(recorded.get(name) == digest for name, digest in found.items()):
            return
        if recorded is not None:
            warnings.warn(
                f"stablerules: cache entry {path.name} could not be loaded (Numba's cache files "
                f"do not match the digests recorded when they were written); recompiling it",
                RuntimeWarning,
                stacklevel=6,
            )
        self._drop_numba_files(stem, path)

    def _record_numba_files(self, stem: str) -> None:
        import json

        digests = self._digests(stem)
        if digests and digests != self._recorded(stem):
            self._write_atomically(self._kernels / f"{stem}.digests", json.dumps(digests, sort_keys=True))

    def _drop_numba_files(self, stem: str, path: Path) -> None:
        """Delete Numba's files of ``stem``; ``OSError`` where one is left (a folder that no
        longer lets us delete): Numba would load it, so the store gives up the disk."""
        folders = [self._kernels / "__pycache__", self.numba_folders()[-1]]
        for folder in folders:
            for leftover in folder.glob(f"{stem}.*"):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _import(self, name: str, path: Path) -> pytypes.ModuleType:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has one
            raise ImportError(f"cannot import kernel module from {path}")
        from . import _objectcode  # noqa: PLC0415 - loaded with the first kernel

        module: pytypes.ModuleType = _private_numba.lean_compile(lambda: _objectcode.import_from_spec(name, spec))
        return module

    def _give_up_disk(self, error: OSError) -> MemoryStore:
        """After a failed write (a full disk, a file-size limit, permissions, a folder another
        process's ``clear_caches(disk=True)`` moved away): warn once per process and write
        nothing more; what the cache holds still loads, the rest is kept in memory."""
        if not self.read_only:
            self.read_only, self._unwritable = True, error
        return self._in_memory()

    def _make_folders(self) -> None:
        # Made again when another process's clear_caches(disk=True) has moved them away.
        self._kernels.mkdir(mode=0o700, exist_ok=True)
        for folder in self.numba_folders():
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def load(self, name: str, source: KernelSource) -> LoadedKernel:
        stem = name.removeprefix("_stablerules_k_")
        if self._object_code is not None:
            entry = self._object_code.load(stem, name)
            if entry is not None:
                return LoadedKernel(entry, None, True)
        if self.read_only:
            return self._in_memory().load(name, source)
        for attempt in (1, 2):
            try:
                self._make_folders()
                function = self._load_through_numba(name, source)
                break
            except FileNotFoundError as error:
                if attempt == 2:
                    return self._give_up_disk(error).load(name, source)
            except OSError as error:
                return self._give_up_disk(error).load(name, source)
        from_disk = _dispatcher_disk_hits(function) > 0
        try:
            self._record_numba_files(stem)
            if self._object_code is not None:
                self._object_code.save(stem, function)
        except OSError as error:
            self._give_up_disk(error)
        return LoadedKernel(Kernel.entry_of(function), function, from_disk)

    def dispatcher(self, name: str, source: KernelSource) -> tuple[KernelFunction, bool]:
        module = sys.modules.get(name)
        if module is not None:
            function: KernelFunction = getattr(module, source.entry)
            return function, False
        if self.read_only:
            return self._in_memory().dispatcher(name, source)
        try:
            self._make_folders()
            function = self._load_through_numba(name, source)
        except OSError as error:
            return self._give_up_disk(error).dispatcher(name, source)
        try:
            self._record_numba_files(name.removeprefix("_stablerules_k_"))
        except OSError as error:
            self._give_up_disk(error)
        return function, _dispatcher_disk_hits(function) == 0

    def _load_through_numba(self, name: str, source: KernelSource) -> KernelFunction:
        _import_numba()
        text = source.render(cache=True)
        stem = name.removeprefix("_stablerules_k_")
        path = self._kernels / f"{stem}.py"
        self._ensure_source(path, text)
        self._check_numba_files(stem, path)
        try:
            module = self._import(name, path)
        except (RecompileError, KeyboardInterrupt, OSError):
            raise
        except SyntaxError:
            # _ensure_source has just made the file ``text``: the rendered source itself is
            # invalid (a rule's bug, e.g. deeper nesting than Python allows), not a damaged
            # cache entry. Raise it as it is; keep no file of it.
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        except Exception as error:
            warnings.warn(
                f"stablerules: cache entry {path.name} could not be loaded "
                f"({type(error).__name__}: {error}); recompiling it",
                RuntimeWarning,
                stacklevel=5,
            )
            self._drop_numba_files(stem, path)
            self._write_atomically(path, text)
            module = self._import(name, path)
        function: KernelFunction = getattr(module, source.entry)
        return function

    def clear(self) -> None:
        """Delete the disk cache, safely while other processes read and write it: each folder
        is first renamed aside (one atomic step: a reader then finds no file, a writer's
        rename into place fails and it goes on from memory), then removed. A folder some
        process is still writing into may survive its removal; the next ``clear`` removes it."""
        import secrets
        import shutil

        assert self.directory is not None
        folders = [self._kernels]
        configured = self.numba_folders()
        if len(configured) > 1:
            folders.append(configured[-1])
        for folder in folders:
            aside = folder.with_name(f"{folder.name}.cleared-{os.getpid()}-{secrets.token_hex(4)}")
            with contextlib.suppress(OSError):
                os.rename(folder, aside)
            for leftover in folder.parent.glob(f"{folder.name}.cleared-*"):
                shutil.rmtree(leftover, ignore_errors=True)


def _open_store() -> KernelStore:
    if not _config.disk_cache():
        return MemoryStore()
    try:
        directory = default_cache_dir()
    except RuntimeError:  # the default (or a "~" path) needs a home directory none knows
        warnings.warn(
            "stablerules: no kernel cache directory: the home directory is unknown (no HOME, and "
            "this user is not in the password database); set STABLERULES_CACHE_DIR to keep "
            "kernels on disk. Kernels are kept in memory only",
            RuntimeWarning,
            stacklevel=4,
        )
        return MemoryStore()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        if _not_ours(info):
            warnings.warn(
                f"stablerules: cache directory {directory} is writable by other users or not "
                f"owned by this user (mode {stat.filemode(info.st_mode)}); a cache file is a "
                f"pickle, so it is not loaded from: kernels are kept in memory only",
                RuntimeWarning,
                stacklevel=4,
            )
            return MemoryStore()
        store = DiskStore(directory)
        # Every folder below, and Numba's (NUMBA_CACHE_DIR), is checked as the top one is.
        for folder in [directory / "kernels", *store.numba_folders()]:
            reason = _unsafe_folder(folder)
            if reason is None:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                reason = _unsafe_folder(folder)
            if reason is not None:
                warnings.warn(
                    f"stablerules: cache folder {reason}; a cache file is a pickle, so it is "
                    f"not loaded from: kernels are kept in memory only",
                    RuntimeWarning,
                    stacklevel=4,
                )
                return MemoryStore()
        # A fresh name, never followed through a symbolic link someone planted there.
        probe = directory / "kernels" / f".probe-{os.getpid()}-{_thread.get_ident()}-{os.urandom(4).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        os.close(os.open(probe, flags, 0o600))
        probe.unlink()
    except OSError as error:
        unwritable = _unwritable_store(directory, error)
        if unwritable is not None:
            return unwritable
        warnings.warn(
            f"stablerules: cache directory {directory} is not usable ({error}); "
            f"kernels are kept in memory only",
            RuntimeWarning,
            stacklevel=4,
        )
        return MemoryStore()
    return store


_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})


def _unwritable_store(directory: Path, error: OSError) -> DiskStore | None:
    """A store that reads a cache this process cannot write (``error``: a read-only file
    system, no write permission, a full disk or quota), or ``None`` where the cache is not one
    to read: another error, or its top folder or ``kernels`` missing, a symbolic link, another
    user's or writable by others (the checks a writable cache has). The caller then keeps
    kernels in memory.

    Only its object code is read (``_objectcode``: private files of this user, each with its
    digest and host key); Numba's own cache files are not (Numba checks them by writing beside
    them). So a cache filled by ``sr.precompile`` on the same kind of machine serves every
    kernel it holds, and one built for another CPU or Numba serves none: those compile."""
    if error.errno not in _UNWRITABLE:
        return None
    try:
        top = os.stat(directory)  # as _open_store checks it: through a symbolic link
    except OSError:
        return None
    if not stat.S_ISDIR(top.st_mode) or _not_ours(top):
        return None
    kernels = directory / "kernels"
    if not os.path.isdir(kernels) or _unsafe_folder(kernels) is not None:
        return None
    return DiskStore(directory, unwritable=error)


def _forget_in_numba(function: object) -> None:
    """Let a dropped kernel's dispatcher, compile result and code library be collected.

    Numba never frees a dispatcher whose function's globals refer to it (every kernel module's
    do): the finalizer it registers holds its overloads, which reach the function, its
    module's globals and so the dispatcher itself; its target context also keeps each entry
    point. So, as that finalizer would: the entry points are removed from the target context
    and the overloads dropped (a caller still holding the dispatcher compiles again on its
    next call; an entry point still held keeps working: its machine code stays in Numba's
    one LLVM execution engine, which offers no safe way to remove it, see README "Compile
    cache")."""
    overloads = getattr(function, "overloads", None)
    reset = getattr(function, "_reset_overloads", None)
    if not isinstance(overloads, dict) or not callable(reset):
        return
    remove = getattr(getattr(function, "targetctx", None), "remove_user_function", None)
    for compiled in list(overloads.values()):
        if callable(remove):
            with contextlib.suppress(KeyError):
                remove(compiled.entry_point)
    reset()


class KernelCache:
    """Memory, then disk, then compile; counts each. One instance per process (``CACHE``)."""

    def __init__(self) -> None:
        self._entries: dict[ShapeSignature, Kernel] = {}
        self._by_module: dict[str, Kernel] = {}
        self._locks: dict[ShapeSignature, _thread.LockType] = {}
        self._building: dict[ShapeSignature, int] = {}  # signature -> thread building it
        self._guard = _thread.allocate_lock()
        self._store: KernelStore | None = None
        self.compiles = 0
        self.memory_hits = 0
        self.disk_hits = 0
        self.compile_seconds = 0.0
        self.load_seconds = 0.0
        self.plan_hits = 0
        self._paid_numba_start_up = False
        # (thread, its start-up window: [True] once frozen) while a build holds the
        # collector off for Numba's start-up
        self._start_up: tuple[int, list[bool]] | None = None

    @property
    def store(self) -> KernelStore:
        store = self._store
        if store is None:
            # Opened outside the guard: opening runs Python code (warnings, file I/O), where a
            # garbage collection may run a ``__del__`` that calls an op and so comes back here.
            opened = _open_store()
            with self._guard:
                store = self._store
                if store is None:
                    store = self._store = opened
        return store

    def get(self, signature: ShapeSignature, render: Callable[[], KernelSource]) -> Kernel:
        kernel = self._entries.get(signature)
        if kernel is not None:
            self.memory_hits += 1
            return kernel
        with self._guard:
            lock = self._locks.setdefault(signature, _thread.allocate_lock())
            building = self._building.get(signature)
        if building == _thread.get_ident():
            # Re-entered from this thread while it builds this very signature (a ``__del__``
            # run by a garbage collection inside the compile calls the same op): waiting for
            # the lock would wait for ourselves. Built again apart, in memory, not kept.
            return self._build_apart(signature, render())
        with lock:
            kernel = self._entries.get(signature)
            if kernel is not None:
                self.memory_hits += 1
                return kernel
            self._building[signature] = _thread.get_ident()
            try:
                with _fork.busy():  # a fork waits for it (its child inherits no half-done build)
                    kernel = self._build(signature, render())
            finally:
                self._building.pop(signature, None)
            self._entries[signature] = kernel
            return kernel

    def renew_after_fork(self) -> None:
        """In a forked child (``_fork``): new locks (one held by another thread of the parent
        would stay held for ever); the builds other threads had under way are forgotten (a
        signature among them is built again when called), and if one of them held off the
        garbage collector for Numba's start-up (``_build``), it is given back."""
        me = _thread.get_ident()
        self._guard = _thread.allocate_lock()
        self._locks = {}
        self._building = {signature: thread for signature, thread in self._building.items() if thread == me}
        start_up = self._start_up
        if start_up is not None and start_up[0] != me:
            self._start_up = None
            if start_up[1]:
                gc.unfreeze()
            gc.enable()
        _private_numba.renew_compiler_lock()

    def _build_apart(self, signature: ShapeSignature, source: KernelSource) -> Kernel:
        if NO_COMPILE.get():
            raise RecompileError(
                f"stablerules: no_compile() is active but signature {signature} is not compiled "
                f"in this process (it would be compiled or loaded from disk)"
            )
        name = f"_stablerules_k_{source_hash(source)}"
        started = time.perf_counter()
        loaded = MemoryStore().load(name, source)
        self.compiles += 1
        self.compile_seconds += time.perf_counter() - started
        return Kernel(loaded.function, signature, source, name, loaded.entry)

    def source(self, signature: ShapeSignature, render: Callable[[], KernelSource]) -> str:
        kernel = self._entries.get(signature)
        return (kernel.source if kernel is not None else render()).render(cache=True)

    def _build(self, signature: ShapeSignature, source: KernelSource) -> Kernel:
        name = f"_stablerules_k_{source_hash(source)}"
        shared = self._by_module.get(name)
        if shared is not None:
            # Another signature rendered the same source: reuse its compiled function.
            self.memory_hits += 1
            return Kernel(shared._function, signature, source, name, shared.entry, shared._load_function)
        if NO_COMPILE.get():
            raise RecompileError(
                f"stablerules: no_compile() is active but signature {signature} is not compiled "
                f"in this process (it would be compiled or loaded from disk)"
            )
        started = time.perf_counter()
        store = self.store
        ours_to_start = not self._paid_numba_start_up and not _private_numba.compiler_started()
        # The first kernel that goes through Numba starts it up, which roughly doubles the
        # number of objects the cyclic GC tracks. Left alone, that debt is paid by a full
        # collection (30-80 ms, more beside torch's objects) at some later, unrelated first
        # call; paying it here keeps it inside the one-time start-up it comes from. Only a
        # start-up this call caused owes it: where Numba had started before (the program's
        # own ``njit``, another library's), the debt is that start-up's, and a collection here
        # would charge a new kernel for it. A kernel loaded from object code starts nothing
        # and owes nothing. What the start-up owes is the collection of what it allocated,
        # not a pass over the whole program's heap:
        # - the automatic collections are held off while it allocates (a full one fell
        #   inside it: 57 ms of a torch U-Net's cold first step, traversing what the
        #   collection after it traverses again);
        # - the objects that were there before it are frozen (``gc.freeze``, as the load
        #   takes Numba's path: ``_import_numba``) for the collection after it, which so
        #   traverses the start-up's objects alone (20-23 ms against 80 beside torch's), and
        #   put back in the oldest generation after (``gc.unfreeze``). Garbage among them
        #   waits for the next full collection (the young among them would have gone with
        #   the next young one), and until that collection the collector counts the
        #   start-up's survivors as all its long-lived objects, so it comes somewhat sooner
        #   than it would have. Not done where the program froze objects itself
        #   (``gc.get_freeze_count()``): unfreezing would undo its freeze.
        deferred = ours_to_start and gc.isenabled()
        window: list[bool] = []
        token = _START_UP.set(window) if ours_to_start else None
        if deferred:
            gc.disable()
            self._start_up = (_thread.get_ident(), window)
        try:
            loaded = store.load(name, source)
            if loaded.function is not None and ours_to_start:
                self._paid_numba_start_up = True
                gc.collect()
        finally:
            if window:
                gc.unfreeze()
            if token is not None:
                _START_UP.reset(token)
            if deferred:
                self._start_up = None
                gc.enable()
        elapsed = time.perf_counter() - started
        if loaded.from_disk:
            self.disk_hits += 1
            self.load_seconds += elapsed
        else:
            self.compiles += 1
            self.compile_seconds += elapsed

        def load_dispatcher() -> KernelFunction:
            began = time.perf_counter()
            function, compiled = store.dispatcher(name, source)
            if compiled:
                self.compiles += 1
                self.compile_seconds += time.perf_counter() - began
            return function

        kernel = Kernel(loaded.function, signature, source, name, loaded.entry, load_dispatcher)
        self._by_module[name] = kernel
        return kernel

    def info(self) -> CacheInfo:
        store = self.store  # opened now if need be: the answer is the store kernels will use
        return CacheInfo(
            compiles=self.compiles,
            memory_hits=self.memory_hits,
            disk_hits=self.disk_hits,
            entries=len(self._entries),
            compile_seconds=self.compile_seconds,
            load_seconds=self.load_seconds,
            dynamic_arguments=COUNTERS.dynamic_arguments,
            fallbacks=COUNTERS.fallbacks,
            disk_enabled=isinstance(store, DiskStore),
            directory=None if store.directory is None else str(store.directory),
            plan_hits=self.plan_hits,
        )

    def clear(self, disk: bool = False) -> None:
        # The tables are swapped out under the guard and emptied outside it: dropping a
        # kernel may run a ``__del__`` (a garbage collection) that calls an op.
        with self._guard:
            dropped = (self._entries, self._by_module, self._locks)
            self._entries, self._by_module, self._locks = {}, {}, {}
            modules = [sys.modules.pop(name) for name in [name for name in sys.modules if name.startswith("_stablerules_k_")]]
        for kernel in dropped[1].values():
            _forget_in_numba(kernel._function)
        for table in dropped:
            table.clear()
        del dropped, modules
        if disk:
            self.store.clear()

    # The steady-state counters live with the guards (``_guards.COUNTERS``); the cache shows
    # them.
    @property
    def dynamic_arguments(self) -> int:
        return COUNTERS.dynamic_arguments

    @property
    def fallbacks(self) -> int:
        return COUNTERS.fallbacks


CACHE = KernelCache()
_fork.renewed(CACHE.renew_after_fork)


_Plan = TypeVar("_Plan")


class PlanCache(Generic[_Plan]):
    """Per-signature plans: what a rule computes from a call's signature alone (validated
    shapes, the kernels it got from the kernel cache, launch arguments), built once and found
    again by a key the rule makes from the static arguments, dtypes, shapes and target.

    A plan must be immutable and must not depend on data (a counts array's values are never
    part of a key). The dict is bounded: it is emptied when it holds ``limit`` plans (a plan
    costs microseconds to rebuild), and ``clear_caches()`` empties it with the kernel cache,
    so no plan outlives the kernels it holds. Concurrent callers at worst build one plan twice.
    A hit counts in ``cache_info().plan_hits`` (and, having looked up no kernel, not in
    ``memory_hits``).
    """

    def __init__(self, limit: int = 4096, cache: KernelCache = CACHE) -> None:
        self._plans: dict[Hashable, _Plan] = {}
        self._limit = limit
        self._cache = cache
        _memo.register(f"{__name__}.PlanCache", self._plans.clear, self.__len__)

    def get(self, key: Hashable) -> _Plan | None:
        plan = self._plans.get(key)
        if plan is not None:
            self._cache.plan_hits += 1
        return plan

    def remember(self, key: Hashable, plan: _Plan) -> _Plan:
        plans = self._plans
        if len(plans) >= self._limit:
            plans.clear()  # atomic under concurrent callers
        plans[key] = plan
        return plan

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans.clear()


def cache_info() -> CacheInfo:
    """The compile-cache counters: compiles, memory and disk hits, entries, seconds spent."""
    return CACHE.info()


def clear_caches(disk: bool = False) -> None:
    """Empty the in-memory kernel cache and every other cache of the package (per-signature
    plans, memoized layouts, the output pool); with ``disk=True`` also delete the disk cache."""
    # Plans hold kernels: they go first, so none outlives the kernels it holds.
    _memo.clear_registered()
    CACHE.clear(disk=disk)
