"""Kernels served from their stored object code, without starting Numba.

When Numba has compiled a CPU kernel of the disk cache (or loaded it from its own cache),
:meth:`ObjectCodeStore.save` keeps beside the kernel's source a file
``kernels/<stem>.<key digest>.native``: the kernel library's object code, as Numba itself caches
it (``serialize_using_object_code``), with what loading it needs (the symbol of Numba's CPython
wrapper, the environment symbols it reads, the external symbols it calls) and the key it was
built for (:func:`host_key`: file format, Numba and llvmlite versions, Python ABI, platform,
target triple, CPU name and features, and the ``NUMBA_*`` settings that change them).

:meth:`ObjectCodeStore.load` serves a later process from that file without importing ``numba``
or LLVM: on x86-64 Linux :mod:`._elf` maps and links the object itself (importing
``llvmlite.binding`` was about 25 ms of a fresh process's first gradient), elsewhere
llvmlite's MCJIT does (``add_object_file``, ``get_function_address``); which one is decided by
the file's header, and a file is stored only if its loader can link it. The host key's CPU
name and features come from a record in the cache (:func:`_host_target`) once LLVM has been
asked on this CPU. The CPython wrapper is made a callable exactly as Numba's cached load
makes it (``_private_numba.make_function`` with a fresh ``Environment``), so the result is the
same object as a dispatcher's ``entry_point``. The runtime it needs (``numba._helperlib``, ``numba._dynfunc`` and the NRT's
``_nrt_python``) is loaded from the installed Numba under the module names Numba gives them,
and its symbols are registered under the names Numba registers, so an ``import numba`` later
in the process shares them (one allocator, one NRT).

Decisions:

- Any mismatch means "not here": the key is part of the file name and is checked again in the
  file, so a kernel built for another Numba, Python, CPU or feature set is never run; the
  caller loads it through Numba instead. A kernel whose external symbols do not all resolve is
  not loaded either (MCJIT aborts the process on an unresolved symbol, so they are checked
  first).
- A file's code must be its kernel's: the header names the module the code was built from,
  checked against the kernel's own (a sound file renamed or swapped under another kernel's
  name is damaged: deleted with one warning, never run for that kernel).
- Trust as for the rest of the cache: a file must be a regular file owned by this user and
  writable by no one else; files are written atomically (mode 0600). A file that fails these
  checks, or whose digest, header or symbols do not match (truncated, damaged, foreign), is
  deleted with one warning and the kernel comes from Numba, which writes it again.
- Only what Numba's own cached load would reproduce exactly is stored: object code, no
  object mode, no lifted loops, no re-run initializers, environments without constants.
  A C callback (``@cfunc``: the JAX adapter's XLA FFI handlers) is stored the same way and
  loads as a :class:`CFunction`, whose ``address`` is the callback's, as Numba's.
  Anything else (CUDA kernels, a non-ELF object) keeps no file and always loads through Numba.
- ``STABLERULES_DIRECT_LOAD=0`` turns the loader off (no file read or written); so do
  ``NUMBA_DISABLE_JIT=1`` and a ``.numba_config.yaml`` in the working directory, whose
  settings only Numba can read.
"""

from __future__ import annotations

# Modules only a load or a save uses are imported there: `import stablerules` stays cheap.
import importlib
import importlib.util
import os
import stat
import sys
import _thread
import types as pytypes
import warnings

from . import _config, _elf, _fork
from ._memo import memoized
from ._private_numba import DYNFUNC, HELPERLIB, NRT_PYTHON, cached_data, make_function
from ._private_python import sha256
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from pathlib import Path  # made at run time from _config.cache_dir()'s paths

KernelFunction = Callable[..., object]
HostKey = tuple[tuple[str, str], ...]

SWITCH = _config.DIRECT_LOAD
FORMAT = "stablerules-native-1"
_MAGIC = FORMAT.encode() + b"\n"
_SUFFIX = ".native"
_DIGEST = 32
# The NUMBA_* settings that change the CPU Numba compiles for (its cache key's magic tuple).
_NUMBA_TARGET_SETTINGS = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "NUMBA_ENABLE_AVX")


class DamagedObjectFile(Exception):
    """A stored object file that is truncated, damaged or not this user's: never loaded."""


class Unloadable(Exception):
    """A sound object file that this process cannot load (an external symbol is missing)."""


def enabled() -> bool:
    """Whether kernels may be loaded from (and saved as) object code in this process."""
    if not _config.direct_load():
        return False
    if _config.jit_disabled():
        return False  # the user asked for kernels as Python code
    return sys.implementation.name == "cpython" and not os.path.exists(".numba_config.yaml")


@memoized(maxsize=None)
def _numba_root() -> Path:
    """The installed Numba's package folder (found once: each search walks ``sys.path``)."""
    spec = importlib.util.find_spec("numba")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("numba is not installed")
    from pathlib import Path  # noqa: PLC0415 - pathlib is not imported with stablerules

    return Path(next(iter(spec.submodule_search_locations)))


def _quoted_after(text: str, marker: str) -> str | None:
    """The quoted string (either quote) right after ``marker`` in ``text``, a versioneer
    ``_version.py``; ``None`` where there is none. A string search: compiling a pattern cost
    ~0.2 ms of a fresh process's first call."""
    _, found, rest = text.partition(marker)
    value = rest.lstrip()
    if found and value[:1] in ("'", '"') and value[0] in value[1:]:
        return value[1 : value.index(value[0], 1)]
    return None


@memoized(maxsize=None)
def numba_version() -> str:
    """The installed Numba's version, read without importing Numba or, where the
    ``_version.py`` that versioneer generates says it, ``importlib.metadata`` (a noticeable
    share of a fresh process's first call); else from the metadata."""
    try:
        found = _quoted_after((_numba_root() / "_version.py").read_text(encoding="utf-8"), '"version":')
        if found is not None:
            return found
    except (ImportError, OSError, UnicodeDecodeError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:  # pragma: no cover - numba is a hard dependency
        return "unknown"


def import_from_spec(name: str, spec: ModuleSpec) -> pytypes.ModuleType:
    """Import the module ``spec`` describes as ``sys.modules[name]`` (removed again if it fails)."""
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


@memoized(maxsize=None)
def llvmlite_version() -> str:
    """The installed llvmlite's version, read from the ``_version.py`` that versioneer
    generates (``version_version = '0.50.0'``) without importing llvmlite (0.2-0.8 ms of a
    fresh process's first kernel from disk); else from the imported package."""
    spec = importlib.util.find_spec("llvmlite")  # the package's folder, nothing imported
    if spec is not None and spec.submodule_search_locations:
        try:
            with open(os.path.join(next(iter(spec.submodule_search_locations)), "_version.py"), encoding="utf-8") as handle:
                found = _quoted_after(handle.read(), "version_version = ")
            if found is not None:
                return found
        except (OSError, UnicodeDecodeError):
            pass
    return str(importlib.import_module("llvmlite").__version__)


@memoized(maxsize=None)
def host_key() -> HostKey:
    """What a stored kernel must have been built for to run here. CPU name and features are
    computed as Numba computes its cache key's (``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``
    override the host's); ``save`` checks them against the key of the code Numba built."""
    version = llvmlite_version()
    triple, host_cpu, host_features = _host_target(version)
    cpu = os.environ.get("NUMBA_CPU_NAME") or host_cpu
    features = os.environ.get("NUMBA_CPU_FEATURES") or host_features
    settings = ";".join(f"{name}={os.environ.get(name, '')}" for name in _NUMBA_TARGET_SETTINGS)
    return (
        ("format", FORMAT),
        ("numba", numba_version()),
        ("llvmlite", version),
        ("python", f"{sys.implementation.cache_tag}{sys.abiflags}"),
        ("platform", sys.platform),
        ("triple", triple),
        ("cpu", cpu),
        ("features", features),
        ("settings", settings),
    )


# --- the host's target, as LLVM names it, remembered per CPU -----------------------------------

# The fields of /proc/cpuinfo that say which CPU this is and what it can do (x86, then ARM).
_CPU_FIELDS = frozenset(
    {"vendor_id", "cpu family", "model", "model name", "stepping", "flags",
     "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision", "Features"}
)
_TARGET_SUFFIX = ".target"


def _cpu_identity(llvmlite_version: str) -> str | None:
    """Which CPU and LLVM this process has, read without LLVM: the first processor's
    identifying fields in ``/proc/cpuinfo`` (Linux; ``None`` elsewhere or when unreadable),
    the machine, and the llvmlite version (its LLVM names the CPU and its features)."""
    if not sys.platform.startswith("linux"):
        return None
    fields: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    if fields:
                        break  # the first processor's entry is enough
                    continue
                name, _, value = line.partition(":")
                if name.strip() in _CPU_FIELDS:
                    fields.append(f"{name.strip()}={' '.join(value.split())}")
    except OSError:
        return None
    if not fields:
        return None
    return "\n".join([*fields, f"machine={os.uname().machine}", f"llvmlite={llvmlite_version}"])


def _llvm_target() -> tuple[str, str, str]:
    """The process's target triple and host CPU name and features, from LLVM itself."""
    llvm = importlib.import_module("llvmlite.binding")
    return str(llvm.get_process_triple()), str(llvm.get_host_cpu_name()), str(llvm.get_host_cpu_features().flatten())


@memoized(maxsize=None)
def _host_target(llvmlite_version: str) -> tuple[str, str, str]:
    """The target triple and host CPU name and features as LLVM gives them.

    Importing LLVM's library to ask costs a fresh process about 25 ms, so on Linux the answer
    is remembered in the cache (``kernels/host-<digest>.target``, private like the kernels),
    under a digest of :func:`_cpu_identity`. A process on the same CPU with the same llvmlite
    reads it back; another CPU (other model, stepping or flags), another machine or llvmlite
    has another identity and asks LLVM. A record that is absent, damaged, not this user's or
    for another identity is never used (and is written again). Trusting it is trusting the
    cache's own files: a wrong record could only name kernels this user's cache already holds.
    """
    identity = _cpu_identity(llvmlite_version)
    if identity is None:
        return _llvm_target()
    import json

    try:
        kernels = _config.cache_dir() / "kernels"
    except RuntimeError:  # no home directory to find the cache in: no record either
        return _llvm_target()
    path = kernels / f"host-{sha256(identity.encode()).hexdigest()[:16]}{_TARGET_SUFFIX}"
    try:
        record = json.loads(_read_private(path))
        if isinstance(record, dict) and record.get("identity") == identity:
            target = record.get("triple"), record.get("cpu"), record.get("features")
            if all(isinstance(part, str) and part for part in target):
                read = (str(target[0]), str(target[1]), str(target[2]))
                _record_read[:] = [(path, read)]
                return read
    except (OSError, DamagedObjectFile, ValueError):
        pass
    triple, cpu, features = _llvm_target()
    _unwritten[:] = [(path, json.dumps({"identity": identity, "triple": triple, "cpu": cpu, "features": features}).encode())]
    if kernels.is_dir():
        write_host_record()
    return triple, cpu, features


# The host's record while it is not written (the cache's folder did not exist yet), and the
# record this process's target was read from.
_unwritten: list[tuple[Path, bytes]] = []
_record_read: list[tuple[Path, tuple[str, str, str]]] = []


def forget_host_record() -> None:
    """The record this process read disagrees with the target Numba compiles for (LLVM's own
    answer): remove it, and ask LLVM from now on. Such a record can only cost speed (no stored
    kernel matches the key it gives, so every kernel compiles); this ends that."""
    for path, _ in _record_read:
        try:
            path.unlink()
        except OSError:
            pass
    _record_read.clear()
    _host_target.cache_clear()
    getattr(host_key, "cache_clear", lambda: None)()  # (a test may have replaced host_key)


def write_host_record() -> None:
    """Write the record :func:`_host_target` had to ask LLVM for, if any is waiting; a failure
    leaves it to a later process (the record is an optimization)."""
    if _unwritten:
        path, data = _unwritten.pop()
        try:
            _write_private(path.parent, path, data)
        except OSError:
            pass


def _read_private(path: Path) -> bytes:
    """The bytes of ``path`` when it is a regular file of this user's that no one else may
    write; ``FileNotFoundError`` when absent, :class:`DamagedObjectFile` (why) otherwise."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:  # a symbolic link (O_NOFOLLOW), unreadable, ...
        raise DamagedObjectFile(f"cannot be opened: {error.strerror}") from error
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise DamagedObjectFile("not a private file of this user")
        return handle.read()


def _write_private(folder: Path, path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` in one step (mode 0600); a failed write (full disk, folder
    gone) raises ``OSError`` and leaves nothing behind."""
    import tempfile

    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _key_digest(key: HostKey) -> str:
    import json

    return sha256(json.dumps(key).encode()).hexdigest()[:16]


# --- ELF: the external symbols an object file needs ---------------------------------------------

_SHT_SYMTAB = 2
_SHN_UNDEF = 0
_STB_LOCAL = 0


def undefined_symbols(obj: bytes) -> list[str]:
    """The global symbols a 64-bit little-endian ELF relocatable object uses but does not
    define; ``ValueError`` for anything else."""
    import struct

    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF object")
    try:
        (section_offset,) = struct.unpack_from("<Q", obj, 0x28)
        section_size, section_count = struct.unpack_from("<HH", obj, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQIIQQ", obj, section_offset + index * section_size)
            for index in range(section_count)
        ]
        names: list[str] = []
        for _, kind, _, _, offset, size, link, _, _, entry_size in sections:
            if kind != _SHT_SYMTAB:
                continue
            strings = sections[link][4]
            for start in range(offset, offset + size, entry_size or 24):
                name, info, _, index, _, _ = struct.unpack_from("<IBBHQQ", obj, start)
                if index == _SHN_UNDEF and info >> 4 != _STB_LOCAL and name:
                    end = obj.index(b"\0", strings + name)
                    names.append(obj[strings + name : end].decode())
        return sorted(set(names))
    except (struct.error, IndexError, UnicodeDecodeError) as error:
        raise ValueError(f"malformed ELF object ({error})") from error


# --- the runtime Numba's wrappers call ---------------------------------------------------------


def _extension(name: str) -> pytypes.ModuleType:
    """Numba's extension module ``name`` (``_private_numba.DYNFUNC``), from the installed package and
    under that name, so that Numba, if imported later, finds it in ``sys.modules``."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    import importlib.machinery

    base = _numba_root().joinpath(*name.split(".")[1:])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = base.with_name(base.name + suffix)
        if path.is_file():
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:  # pragma: no cover - an extension path has one
                break
            return import_from_spec(name, spec)
    raise ImportError(f"Numba's extension module {name} was not found under {base.parent}")


class _Runtime:
    """Numba's C runtime, set up once per process as Numba sets it up, and the symbols Numba
    registers with LLVM for its kernels (same names, same addresses, so Numba registering them
    again later changes nothing). x86-64 objects are linked by :mod:`._elf` against them;
    others go through llvmlite's MCJIT, set up on first use."""

    def __init__(self) -> None:
        import builtins

        self.dynfunc = _extension(DYNFUNC)
        nrt = _extension(NRT_PYTHON)
        if "numba.core.runtime.nrt" not in sys.modules:
            nrt.memsys_use_cpython_allocator()  # what importing numba.core.runtime.nrt does
        # numba.core.base._load_global_helpers and the NRT's initialize register these: the
        # exceptions as the objects themselves (how Numba's code reads them), not C's pointers.
        symbols = {"_Py_NoneStruct": id(None)}
        for name, address in self.dynfunc.c_helpers.items():
            symbols[f"numba_{name}"] = address
        for value in vars(builtins).values():
            if isinstance(value, type) and issubclass(value, BaseException):
                symbols[f"PyExc_{value.__name__}"] = id(value)
        for name, address in nrt.c_helpers.items():
            symbols[name if name.startswith("_") else f"NRT_{name}"] = address
        self.symbols: dict[str, int] = symbols
        self._helpers = False
        self._llvm: pytypes.ModuleType | None = None

    def _add_helpers(self) -> None:
        """``numba._helperlib``'s symbols, loaded on first need: the kernels' wrappers name
        none of them (argument unboxing is the NRT's, errors the C API's), and loading it was
        ~0.5 ms of a fresh process's first gradient."""
        if not self._helpers:
            for name, address in _extension(HELPERLIB).c_helpers.items():
                self.symbols.setdefault(f"numba_{name}", address)
            self._helpers = True

    def resolve(self, name: str) -> int:
        """An undefined symbol's address as MCJIT finds it: Numba's registered symbols first,
        then the process's own (the C API, the C library); 0 when neither has it."""
        address = self.symbols.get(name)
        if address is None and name.startswith("numba_") and not self._helpers:
            self._add_helpers()
            address = self.symbols.get(name)
        return address if address is not None else _elf.process_symbol(name)

    def _mcjit(self) -> pytypes.ModuleType:
        if self._llvm is None:
            llvm = importlib.import_module("llvmlite.binding")
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            self._add_helpers()  # MCJIT resolves from what is registered: all of Numba's symbols
            for name, address in self.symbols.items():
                llvm.add_symbol(name, address)
            self._llvm = llvm
        return self._llvm

    def _link(self, header: dict[str, object], obj: bytes) -> tuple[Callable[[str], int], Callable[[str], int], object]:
        """Load ``obj``: (function address of, global variable address of, what keeps it)."""
        if _elf.native(obj):
            image = _elf.load(obj, self.resolve)
            return image.address, image.address, image
        llvm = self._mcjit()
        machine = llvm.Target.from_default_triple().create_target_machine(jit=True)
        # Creating an engine also makes the process's own symbols (the C API) searchable.
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
        undefined = header["undefined"]
        assert isinstance(undefined, list)
        for symbol in undefined:
            if not llvm.address_of_symbol(str(symbol)):
                raise Unloadable(f"symbol {symbol} is not available in this process")
        object_file = llvm.ObjectFileRef.from_data(obj)
        engine.add_object_file(object_file)
        engine.finalize_object()
        return engine.get_function_address, engine.get_global_value_address, (engine, object_file)

    def load(self, header: dict[str, object], obj: bytes) -> KernelFunction:
        import ctypes

        try:
            function_address, variable_address, keep = self._link(header, obj)
        except _elf.Unsupported as error:
            raise Unloadable(str(error)) from error
        wrapper = function_address(str(header["wrapper"]))
        if not wrapper:
            raise DamagedObjectFile(f"the object defines no symbol {header['wrapper']}")
        cfunc = header.get("kind") == "cfunc"
        environments = []
        pairs = header["environments"]
        assert isinstance(pairs, list)
        for env_name, module_name in pairs:
            address = variable_address(str(env_name))
            if not address:
                if cfunc:
                    continue  # a C callback's code may use no environment (Numba's set_env skips it too)
                raise DamagedObjectFile(f"the object defines no environment {env_name}")
            environment = self.dynfunc.Environment({"__name__": str(module_name)})
            ctypes.c_void_p.from_address(address).value = id(environment)
            environments.append(environment)
        if cfunc:
            return CFunction(wrapper, (keep, tuple(environments)))
        module = pytypes.ModuleType(str(header["module"]))
        name = str(header["name"])
        function: KernelFunction = make_function(
            self.dynfunc,
            module,
            name,
            f"compiled wrapper for {name!r}",
            wrapper,
            environments[0],
            (keep, tuple(environments)),
        )
        return function


class CFunction:
    """A C callback (Numba's ``@cfunc``) loaded from object code: its ``address``, as
    ``numba.cfunc(...).address`` gives it, callable through ctypes as ``void* f(void*)``
    (the one C signature stored C callbacks have here: XLA FFI handlers). It keeps its
    JIT engine alive: the code lives as long as this object."""

    __slots__ = ("address", "_keep", "_call")

    def __init__(self, address: int, keep: object) -> None:
        import ctypes

        self.address = address
        self._keep = keep
        self._call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address)

    def __call__(self, *args: object) -> object:
        result: object = self._call(*args)
        return result

    def __repr__(self) -> str:
        return f"<stablerules C callback at {self.address:#x}>"


_runtime: _Runtime | None = None
_runtime_lock = _thread.RLock()  # reentrant: a load may run a GC, a `__del__`, an op that loads


def _new_runtime_lock() -> None:
    global _runtime_lock
    _runtime_lock = _thread.RLock()


_fork.renewed(_new_runtime_lock)


def _get_runtime() -> _Runtime:
    global _runtime
    if _runtime is None:
        _runtime = _Runtime()
    return _runtime


# --- the store -------------------------------------------------------------------------------


def _parse(data: bytes) -> tuple[dict[str, object], bytes]:
    import json
    import struct

    if not data.startswith(_MAGIC):
        raise DamagedObjectFile("no stablerules object-file header")
    body = data[len(_MAGIC) + _DIGEST :]
    if len(data) < len(_MAGIC) + _DIGEST + 8 or sha256(body).digest() != data[len(_MAGIC) : len(_MAGIC) + _DIGEST]:
        raise DamagedObjectFile("checksum mismatch (truncated or damaged)")
    (length,) = struct.unpack_from("<Q", body)
    try:
        header = json.loads(body[8 : 8 + length])
    except ValueError as error:
        raise DamagedObjectFile(f"unreadable header ({error})") from error
    if not isinstance(header, dict):
        raise DamagedObjectFile("unreadable header")
    return header, body[8 + length :]


def _record_of(dispatcher: object) -> tuple[dict[str, object], bytes] | None:
    """The header and object code Numba cached for a CPU dispatcher's one signature (or a
    ``@cfunc``'s), or ``None`` when the kernel is not one a direct load reproduces exactly."""
    from numba.core.ccallback import CFunc
    from numba.core.registry import CPUDispatcher

    cache = getattr(dispatcher, "_cache", None)
    if isinstance(dispatcher, CFunc):
        flavour = "cfunc"
        library = getattr(dispatcher, "_library", None)
        if library is None or cache is None:
            return None
        signature, codegen = getattr(dispatcher, "_sig"), library.codegen
    elif isinstance(dispatcher, CPUDispatcher):
        flavour = "cpython"
        overloads = getattr(dispatcher, "overloads", {})
        if len(overloads) != 1 or cache is None:
            return None
        (compiled,) = overloads.values()
        signature, codegen = compiled.signature, compiled.library.codegen
    else:
        return None
    # What Numba stored for this signature: the exact bytes its own cached load would use.
    data = cached_data(cache, signature, codegen)
    if data is None:
        return None
    libdata, fndesc, environment, _, objectmode, lifted, _, reload_init, referenced = data
    _, kind, payload = libdata
    if kind != "object" or objectmode or lifted or reload_init:
        return None
    environments = [environment] + [env for env in referenced if env.env_name != fndesc.env_name]
    if any(env.consts for env in environments):
        return None
    obj = payload[0]
    header: dict[str, object] = {
        "kind": flavour,
        "wrapper": fndesc.llvm_cfunc_wrapper_name if flavour == "cfunc" else fndesc.llvm_cpython_wrapper_name,
        "environments": [[fndesc.env_name, fndesc.modname]]
        + [[env.env_name, env.globals.get("__name__", "")] for env in environments[1:]],
        "name": fndesc.qualname.split(".")[-1],
        "module": fndesc.modname,
        "undefined": undefined_symbols(obj),
        "magic": [str(part) for part in codegen.magic_tuple()],
    }
    return header, obj


class ObjectCodeStore:
    """Kernels' object code under ``kernels``, one file per kernel and host key."""

    def __init__(self, kernels: Path) -> None:
        self._kernels = kernels
        # Files found to record another host key (another Numba or llvmlite, say) under this
        # host's name: ``save`` replaces them.
        self._stale: set[Path] = set()

    def path(self, stem: str, key: HostKey) -> Path:
        return self._kernels / f"{stem}.{_key_digest(key)}{_SUFFIX}"

    def load(self, stem: str, module: str) -> KernelFunction | None:
        """The entry point of kernel module ``module`` (stored as ``stem``) from its object code,
        or ``None`` (absent, built for another host, damaged: the caller then loads it through
        Numba). A sound file whose code is another module's (a file renamed or swapped under
        this kernel's name) is damaged: deleted, never run for this kernel."""
        try:
            key = host_key()
        except Exception:
            return None
        path = self.path(stem, key)
        try:
            data = _read_private(path)
        except FileNotFoundError:
            return None
        except DamagedObjectFile as error:
            self._discard(path, str(error))
            return None
        try:
            header, obj = _parse(data)
            if header.get("module") != module:
                raise DamagedObjectFile(f"it holds the code of {header.get('module')!r}, not of {module!r}")
            if header.get("key") != [list(part) for part in key]:
                self._stale.add(path)  # another host's kernel under this name: replaced by save
                return None
            with _runtime_lock:
                return _get_runtime().load(header, obj)
        except DamagedObjectFile as error:
            self._discard(path, str(error))
        except (Unloadable, ImportError, OSError, RuntimeError, KeyError, TypeError, ValueError, AssertionError):
            pass  # this process cannot load it; Numba can
        return None

    def save(self, stem: str, dispatcher: object) -> None:
        """Store the object code Numba built for ``dispatcher`` (after a compile or a load from
        Numba's cache), unless a file for this host exists or the kernel is not eligible."""
        try:
            key = host_key()
            path = self.path(stem, key)
            if path.exists() and path not in self._stale:
                return
            record = _record_of(dispatcher)
        except Exception:
            return
        if record is None:
            return
        import json
        import struct

        header, obj = record
        if _elf.native(obj) and not _elf.loadable(obj):
            return  # an object only MCJIT could link: Numba's own cache serves it
        keyed = dict(key)
        if header["magic"] != [keyed["triple"], keyed["cpu"], keyed["features"]]:
            # Numba built for another target than this process would check against: with no
            # NUMBA_* target setting, the host's record was wrong (it is removed, LLVM asked).
            if (
                _record_read
                and not any(os.environ.get(name) for name in _NUMBA_TARGET_SETTINGS)
                and list(_record_read[0][1]) != header["magic"]
            ):
                forget_host_record()
            return
        header["key"] = [list(part) for part in key]
        encoded = json.dumps(header).encode()
        body = struct.pack("<Q", len(encoded)) + encoded + obj
        self._write_atomically(path, _MAGIC + sha256(body).digest() + body)
        self._stale.discard(path)
        write_host_record()

    def _write_atomically(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` in one step; a failed write (full disk, folder gone)
        raises ``OSError`` to the store, which warns once and goes on from memory."""
        _write_private(self._kernels, path, data)

    def _discard(self, path: Path, reason: str) -> None:
        warnings.warn(
            f"stablerules: cache entry {path.name} could not be loaded ({reason}); "
            f"deleting it and loading the kernel through Numba",
            RuntimeWarning,
            stacklevel=6,
        )
        try:
            path.unlink()
        except OSError:
            pass
