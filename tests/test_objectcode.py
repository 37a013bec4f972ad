"""Kernels loaded from their stored object code without Numba (issue 19).

Each test fills its own cache directory through Numba, then loads from it the way a fresh
process does: through a new ``DiskStore`` in this process (Numba is imported here, so these
check the loader's decisions), or in a subprocess that must not import Numba at all.
Results are checked against NumPy, never against another kernel.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from stablerules import _objectcode
from stablerules._cache import DiskStore, KernelCache, LoadedKernel
from stablerules._key import KernelSource, ShapeSignature
from stablerules._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array, writable_array

REPO = Path(__file__).resolve().parents[1]
X86_64_LINUX = sys.platform.startswith("linux") and os.uname().machine == "x86_64"


def scaled_sum_kernel(salt: str) -> tuple[ShapeSignature, Callable[[], KernelSource]]:
    """``out[i] = 3 * x[i] + sum(x)``, the sum kept in a scratch array the kernel allocates
    (so the NRT's allocator is called); ``salt`` makes the source unique."""
    signature = ShapeSignature("scaled-sum", "forward", (salt,), ("float64",), (1,))

    def render() -> KernelSource:
        body = SourceWriter()
        body.line(f"# salt {salt}")
        body.line("total = np.zeros(1)")
        with body.block("for i in range(x.size):"):
            body.line("total[0] += x[i]")
        with body.block("for i in range(lo, hi):"):
            body.line("out[i] = 3 * x[i] + total[0]")
        parameters = [("x", readonly_array("float64")), ("out", writable_array("float64")), ("lo", INDEX), ("hi", INDEX)]
        return cpu_kernel(signature, parameters, body, "test kernel: out = 3 x + sum(x)", numpy=True)

    return signature, render


def expected(x: np.ndarray) -> np.ndarray:
    result: np.ndarray = 3 * x + x.sum()
    return result


def run_entry(loaded: LoadedKernel | Callable[..., object], x: np.ndarray) -> np.ndarray:
    entry = loaded.entry if isinstance(loaded, LoadedKernel) else loaded
    out: np.ndarray = np.empty_like(x)
    entry(x, out, 0, x.size)
    return out


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("STABLERULES_CACHE_DIR", str(directory))
    monkeypatch.delenv("STABLERULES_DISK_CACHE", raising=False)
    monkeypatch.delenv(_objectcode.SWITCH, raising=False)
    return directory


def filled(cache_dir: Path) -> tuple[str, KernelSource, Path]:
    """Compile a fresh kernel through Numba into ``cache_dir``; its module name, source and
    object file."""
    signature, render = scaled_sum_kernel(uuid.uuid4().hex)
    cache = KernelCache()
    kernel = cache.get(signature, render)
    assert cache.compiles == 1
    np.testing.assert_allclose(run_entry(kernel.entry, np.arange(5.0)), expected(np.arange(5.0)))
    name = kernel.module_name
    stem = name.removeprefix("_stablerules_k_")
    (native,) = (cache_dir / "kernels").glob(f"{stem}.*.native")
    assert native == _objectcode.ObjectCodeStore(cache_dir / "kernels").path(stem, _objectcode.host_key())
    return name, render(), native


def changed_key(field: str, value: str) -> _objectcode.HostKey:
    return tuple((name, value if name == field else old) for name, old in _objectcode.host_key())


def test_object_code_is_stored_private_and_loaded_without_numba_dispatch(cache_dir: Path) -> None:
    name, source, native = filled(cache_dir)
    assert native.stat().st_mode & 0o077 == 0
    loaded = DiskStore(cache_dir).load(name, source)
    assert loaded.function is None and loaded.from_disk  # served from object code
    x = np.linspace(-1.0, 2.0, 37)
    np.testing.assert_allclose(run_entry(loaded, x), expected(x))


def test_kernel_cache_counts_a_direct_load_as_a_disk_hit_and_loads_the_dispatcher_lazily(cache_dir: Path) -> None:
    signature, render = scaled_sum_kernel(uuid.uuid4().hex)
    KernelCache().get(signature, render)
    cache = KernelCache()
    kernel = cache.get(signature, render)
    assert (cache.compiles, cache.disk_hits) == (0, 1)
    x = np.arange(9.0)
    np.testing.assert_allclose(run_entry(kernel.entry, x), expected(x))
    function = kernel.function  # Numba's dispatcher, loaded on demand
    assert hasattr(function, "overloads")
    np.testing.assert_allclose(run_entry(function, x), expected(x))
    assert (cache.compiles, cache.disk_hits) == (0, 1)


@pytest.mark.parametrize(
    ("field", "value"),
    [("numba", "0.0.1"), ("features", "+sse2,-avx2"), ("cpu", "generic"), ("python", "cpython-399")],
)
def test_a_key_mismatch_falls_back_to_numba(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    name, source, native = filled(cache_dir)
    other = changed_key(field, value)
    monkeypatch.setattr(_objectcode, "host_key", lambda: other)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = DiskStore(cache_dir).load(name, source)
    assert loaded.function is not None  # through Numba
    x = np.arange(11.0)
    np.testing.assert_allclose(run_entry(loaded, x), expected(x))
    assert native.exists()  # the file of the other key is left alone


def test_a_file_whose_stored_key_differs_is_never_run(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, source, native = filled(cache_dir)
    other = changed_key("features", "+sse2")
    stem = name.removeprefix("_stablerules_k_")
    impostor = _objectcode.ObjectCodeStore(cache_dir / "kernels").path(stem, other)
    impostor.write_bytes(native.read_bytes())  # right name for this host, key of another
    impostor.chmod(0o600)
    monkeypatch.setattr(_objectcode, "host_key", lambda: other)
    monkeypatch.setattr(_objectcode._Runtime, "load", lambda *args: pytest.fail("a mismatched kernel was loaded"))
    loaded = DiskStore(cache_dir).load(name, source)
    assert loaded.function is not None
    np.testing.assert_allclose(run_entry(loaded, np.arange(4.0)), expected(np.arange(4.0)))


def test_another_kernels_sound_file_under_this_kernels_name_is_deleted_never_run(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first kernel's file (sound: its digest, owner and host key all check) swapped in
    # under the second's name: its code is never linked for the second kernel.
    name, _, native = filled(cache_dir)
    other_name, other_source, other_native = filled(cache_dir)
    data = native.read_bytes()
    other_native.write_bytes(data)
    with monkeypatch.context() as patched, warnings.catch_warnings(record=True) as caught:
        patched.setattr(_objectcode._Runtime, "load", lambda *args: pytest.fail("another kernel's code was loaded"))
        warnings.simplefilter("always")
        loaded = DiskStore(cache_dir).load(other_name, other_source)
    messages = [str(w.message) for w in caught if "could not be loaded" in str(w.message)]
    assert len(messages) == 1 and name in messages[0] and other_native.name in messages[0], messages
    assert loaded.function is not None  # through Numba: the second kernel's own code
    np.testing.assert_allclose(run_entry(loaded, np.arange(6.0)), expected(np.arange(6.0)))
    assert other_native.read_bytes() != data  # rebuilt with its own code
    assert DiskStore(cache_dir).load(other_name, other_source).function is None  # and served directly again


@pytest.mark.parametrize("damage", ["truncate", "flip", "header", "empty"])
def test_a_damaged_object_file_is_deleted_rebuilt_and_warned_once(cache_dir: Path, damage: str) -> None:
    name, source, native = filled(cache_dir)
    data = native.read_bytes()
    if damage == "truncate":
        native.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        native.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "header":
        native.write_bytes(b"not a stablerules file" + data[22:])
    else:
        native.write_bytes(b"")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = DiskStore(cache_dir).load(name, source)
    messages = [str(w.message) for w in caught if "could not be loaded" in str(w.message)]
    assert len(messages) == 1 and native.name in messages[0], [str(w.message) for w in caught]
    assert loaded.function is not None
    x = np.arange(7.0)
    np.testing.assert_allclose(run_entry(loaded, x), expected(x))
    assert native.read_bytes() == data  # rebuilt from Numba's cache, identical
    assert DiskStore(cache_dir).load(name, source).function is None  # and served directly again


def test_a_file_not_owned_by_the_user_is_not_loaded(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, source, native = filled(cache_dir)
    store = DiskStore(cache_dir)  # opened (and its directory checked) as this user
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)  # the check reads os.getuid()
    monkeypatch.setattr(_objectcode._Runtime, "load", lambda *args: pytest.fail("a foreign file was loaded"))
    with pytest.warns(RuntimeWarning, match="not a private file of this user"):
        loaded = store.load(name, source)
    assert loaded.function is not None
    np.testing.assert_allclose(run_entry(loaded, np.arange(3.0)), expected(np.arange(3.0)))


def test_a_file_writable_by_others_is_not_loaded(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, source, native = filled(cache_dir)
    native.chmod(0o666)
    monkeypatch.setattr(_objectcode._Runtime, "load", lambda *args: pytest.fail("a shared file was loaded"))
    with pytest.warns(RuntimeWarning, match="not a private file of this user"):
        loaded = DiskStore(cache_dir).load(name, source)
    assert loaded.function is not None


def test_a_symbolic_link_is_not_followed(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, source, native = filled(cache_dir)
    moved = native.with_name("elsewhere.bin")
    native.rename(moved)
    native.symlink_to(moved)
    monkeypatch.setattr(_objectcode._Runtime, "load", lambda *args: pytest.fail("a link was followed"))
    with pytest.warns(RuntimeWarning, match="could not be loaded"):
        loaded = DiskStore(cache_dir).load(name, source)
    assert loaded.function is not None


def test_an_unresolvable_symbol_falls_back_without_loading(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, source, native = filled(cache_dir)
    header, obj = _objectcode._parse(native.read_bytes())
    undefined = header["undefined"]
    assert isinstance(undefined, list) and "NRT_MemInfo_alloc_aligned" in undefined
    resolve = _objectcode._Runtime.resolve
    monkeypatch.setattr(
        _objectcode._Runtime, "resolve", lambda self, symbol: 0 if symbol.startswith("NRT_") else resolve(self, symbol)
    )
    loaded = DiskStore(cache_dir).load(name, source)
    assert loaded.function is not None
    np.testing.assert_allclose(run_entry(loaded, np.arange(3.0)), expected(np.arange(3.0)))


def relocations_of(obj: bytes) -> list[int]:
    """The file offsets of the ``r_info`` words of ``obj``'s code relocations."""
    import struct

    (section_offset,) = struct.unpack_from("<Q", obj, 0x28)
    size, count = struct.unpack_from("<HH", obj, 0x3A)
    places: list[int] = []
    for index in range(count):
        _, kind, _, _, offset, length, _, target, _, _ = struct.unpack_from("<IIQQQQIIQQ", obj, section_offset + index * size)
        if kind != 4:
            continue
        _, _, flags = struct.unpack_from("<IIQ", obj, section_offset + target * size)
        if flags & 0x4:  # RELA for a code section
            places.extend(range(offset + 8, offset + length, 24))
    return places


@pytest.mark.skipif(not X86_64_LINUX, reason="the ELF loader serves x86-64 Linux; elsewhere MCJIT loads")
def test_the_elf_loader_refuses_what_it_cannot_link_before_mapping(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import struct

    from stablerules import _elf

    name, source, native = filled(cache_dir)
    header, obj = _objectcode._parse(native.read_bytes())
    assert _elf.native(obj) and _elf.loadable(obj)
    places = relocations_of(obj)
    assert places
    # A GOT-relative relocation (R_X86_64_GOTPCREL, 9): unknown to the loader, refused.
    got = bytearray(obj)
    (info,) = struct.unpack_from("<Q", got, places[0])
    struct.pack_into("<Q", got, places[0], (info & ~0xFFFFFFFF) | 9)
    assert not _elf.loadable(bytes(got))
    mapped: list[bool] = []

    def no_mapping() -> object:
        mapped.append(True)
        pytest.fail("the loader mapped memory for an object it refuses")

    monkeypatch.setattr(_elf, "_get_libc", no_mapping)
    with pytest.raises(_elf.Unsupported, match="relocation kind 9"):
        _elf.load(bytes(got), lambda symbol: 1)
    # A symbol the process does not have: refused before anything is mapped.
    with pytest.raises(_elf.Unsupported, match="not available"):
        _elf.load(obj, lambda symbol: 0)
    # Another machine (aarch64, 183) is not this loader's.
    other = bytearray(obj)
    struct.pack_into("<H", other, 0x12, 183)
    assert not _elf.native(bytes(other)) and not _elf.loadable(bytes(other))
    assert mapped == []


@pytest.mark.skipif(not X86_64_LINUX, reason="the ELF loader serves x86-64 Linux; elsewhere MCJIT loads")
def test_the_elf_loader_links_as_mcjit_does(cache_dir: Path) -> None:
    """The same object linked by the ELF loader and by MCJIT: the same code bytes at each
    function once relocated (each against its own addresses), the same results."""
    import ctypes

    import llvmlite.binding as llvm

    from stablerules import _elf

    name, source, native = filled(cache_dir)
    header, obj = _objectcode._parse(native.read_bytes())
    runtime = _objectcode._get_runtime()
    image = _elf.load(obj, runtime.resolve)
    wrapper = image.address(str(header["wrapper"]))
    assert wrapper and image.address("no such symbol") == 0
    llvm_module = runtime._mcjit()
    machine = llvm_module.Target.from_default_triple().create_target_machine(jit=True)
    engine = llvm_module.create_mcjit_compiler(llvm_module.parse_assembly(""), machine)
    engine.add_object_file(llvm_module.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    theirs = engine.get_function_address(str(header["wrapper"]))
    assert theirs
    # The wrapper's machine code agrees byte for byte outside the addresses each linker wrote.
    parsed = _elf._Object(obj)
    (symbol,) = [symbol for symbol in parsed.symbols if symbol.name == header["wrapper"]]
    relocated = {
        place
        for target, entries in parsed.relocations
        if target == symbol.section
        for offset, _, _, _ in entries
        for place in range(offset, offset + 8)
    }
    ours_code, their_code = ctypes.string_at(wrapper, symbol.size), ctypes.string_at(theirs, symbol.size)
    differing = {index + symbol.value for index in range(symbol.size) if ours_code[index] != their_code[index]}
    assert symbol.size > 100 and differing <= relocated
    loaded = runtime.load(header, obj)
    x = np.linspace(-3.0, 1.0, 11)
    np.testing.assert_allclose(run_entry(loaded, x), expected(x))


@pytest.mark.skipif(not X86_64_LINUX, reason="the host's record is read from Linux's /proc/cpuinfo")
def test_the_host_record_is_used_only_for_this_cpu_and_when_private(cache_dir: Path) -> None:
    import hashlib

    version = "test-" + uuid.uuid4().hex  # a version no other test memoized
    (cache_dir / "kernels").mkdir(parents=True)
    compute = _objectcode._host_target.__wrapped__
    llvm_answer = _objectcode._llvm_target()
    assert compute(version) == llvm_answer  # asked LLVM, wrote the record
    identity = _objectcode._cpu_identity(version)
    assert identity is not None and f"llvmlite={version}" in identity
    (record,) = (cache_dir / "kernels").glob(f"host-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.target")
    assert record.stat().st_mode & 0o077 == 0
    saved = json.loads(record.read_text())
    assert saved["identity"] == identity and [saved["triple"], saved["cpu"], saved["features"]] == list(llvm_answer)
    # Read back: a record of this identity is what a later process uses (a marked one shows it).
    record.write_text(json.dumps(dict(saved, cpu="marked-cpu")))
    record.chmod(0o600)
    assert compute(version)[1] == "marked-cpu"
    # Another CPU's record under this name, a damaged one, one others may write: never used.
    for text, mode in (
        (json.dumps(dict(saved, identity=identity + "x", cpu="marked-cpu")), 0o600),
        ('{"identity": ', 0o600),
        (json.dumps(dict(saved, cpu="marked-cpu")), 0o622),
    ):
        record.write_text(text)
        record.chmod(mode)
        assert compute(version) == llvm_answer
        assert json.loads(record.read_text())["cpu"] == llvm_answer[1]  # written again, sound
        assert record.stat().st_mode & 0o077 == 0


@pytest.mark.skipif(not X86_64_LINUX, reason="the host's record is read from Linux's /proc/cpuinfo")
def test_a_wrong_host_record_costs_one_compile_and_is_removed(cache_dir: Path) -> None:
    """A record of this CPU that names the wrong target (hand-edited, or written by a broken
    llvmlite) gives keys no stored kernel has: kernels compile. The first save sees Numba's
    own target disagree, removes the record and asks LLVM; from then on kernels are stored
    under the right key."""
    import hashlib

    import llvmlite

    identity = _objectcode._cpu_identity(str(llvmlite.__version__))
    assert identity is not None
    kernels = cache_dir / "kernels"
    kernels.mkdir(parents=True)
    record = kernels / f"host-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.target"
    triple, cpu, features = _objectcode._llvm_target()
    record.write_text(json.dumps({"identity": identity, "triple": triple, "cpu": "marked-cpu", "features": features}))
    record.chmod(0o600)
    _objectcode.host_key.cache_clear()
    _objectcode._host_target.cache_clear()
    try:
        assert dict(_objectcode.host_key())["cpu"] == "marked-cpu"
        signature, render = scaled_sum_kernel(uuid.uuid4().hex)
        cache = KernelCache()
        kernel = cache.get(signature, render)
        assert cache.compiles == 1
        np.testing.assert_allclose(run_entry(kernel.entry, np.arange(4.0)), expected(np.arange(4.0)))
        assert not record.exists()  # removed by the save that found it wrong
        assert dict(_objectcode.host_key())["cpu"] == cpu
        again = KernelCache()
        kernel = again.get(signature, render)
        assert (again.compiles, again.disk_hits) == (0, 1)
        np.testing.assert_allclose(run_entry(kernel.entry, np.arange(4.0)), expected(np.arange(4.0)))
        stem = kernel.module_name.removeprefix("_stablerules_k_")
        assert _objectcode.ObjectCodeStore(kernels).path(stem, _objectcode.host_key()).is_file()
    finally:
        _objectcode.host_key.cache_clear()
        _objectcode._host_target.cache_clear()


def test_the_switch_turns_the_loader_off(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_objectcode.SWITCH, "0")
    signature, render = scaled_sum_kernel(uuid.uuid4().hex)
    KernelCache().get(signature, render)
    assert not list((cache_dir / "kernels").glob("*.native"))
    cache = KernelCache()
    kernel = cache.get(signature, render)
    assert cache.disk_hits == 1 and kernel._function is not None


def test_a_direct_load_forces_no_garbage_collection(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    signature, render = scaled_sum_kernel(uuid.uuid4().hex)
    KernelCache().get(signature, render)
    collections: list[tuple[object, ...]] = []

    def counting_collect(*args: object) -> int:
        collections.append(args)
        return 0

    monkeypatch.setattr(gc, "collect", counting_collect)
    cache = KernelCache()
    cache.get(signature, render)
    assert cache.disk_hits == 1 and collections == []  # Numba never started: no debt to pay
    # A compile: Numba had started in this process already (the first get compiled), so its
    # debt is not this kernel's (a fresh process's first compile pays it: tests/test_cache.py)
    cache.get(*scaled_sum_kernel(uuid.uuid4().hex))
    assert cache.compiles == 1 and collections == []


def test_numba_disable_jit_turns_the_loader_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_objectcode.SWITCH, raising=False)
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    assert _objectcode.enabled()
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    assert not _objectcode.enabled()


def test_undefined_symbols_of_a_non_elf_object_are_refused() -> None:
    with pytest.raises(ValueError, match="ELF"):
        _objectcode.undefined_symbols(b"\xcf\xfa\xed\xfe" + bytes(60))  # a Mach-O header


def test_numba_version_is_read_without_importing_numba() -> None:
    script = "import sys; from stablerules import _objectcode as o; v = o.numba_version(); print(v, 'numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    version, imported = result.stdout.split()
    import numba

    assert (version, imported) == (numba.__version__, "False")


def test_the_host_key_reads_llvmlites_version_without_importing_it(cache_dir: Path) -> None:
    """``host_key`` needs llvmlite's version only, read from its ``_version.py`` (importing the
    package cost 0.2-0.8 ms of a fresh process's first kernel from disk): a process that finds
    the host's record (the first one wrote it, asking LLVM) imports no llvmlite at all."""
    script = (
        "import sys; from stablerules import _objectcode as o; key = dict(o.host_key()); "
        "print(key['llvmlite'], o.llvmlite_version(), 'llvmlite' in sys.modules)"
    )
    env = {**os.environ, "STABLERULES_CACHE_DIR": str(cache_dir)}
    import llvmlite

    version = llvmlite.__version__
    (cache_dir / "kernels").mkdir(mode=0o700, parents=True)  # the record is written where kernels are
    for imported in ("True", "False"):  # the first process asks LLVM and writes the record
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO, env=env)
        assert result.stdout.split() == [version, version, imported]


FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import stablerules as sr

    report = {"info_before": [sr.cache_info().disk_enabled, sr.cache_info().directory]}
    x = np.random.default_rng(0).random((3, 4))
    y, pullback = sr.rrule(sr.repeat, x, inner=sr.Val((2, 3)))
    dy = np.arange(y.size, dtype=float).reshape(y.shape)
    (dx,) = pullback(dy)
    ok = np.array_equal(y, np.repeat(np.repeat(x, 2, 0), 3, 1))
    ok &= np.allclose(sr.materialize(dx, x), dy.reshape(3, 2, 4, 3).sum(axis=(1, 3)))
    big = np.random.default_rng(1).random((600, 700))  # above the thread threshold: pool threads
    y, pullback = sr.rrule(sr.repeat, big, inner=sr.Val((2, 3)))
    (dx,) = pullback(np.ones(y.shape))
    ok &= np.array_equal(y, np.repeat(np.repeat(big, 2, 0), 3, 1)) and np.allclose(sr.materialize(dx, big), 6.0)
    a, b = np.arange(6.0).reshape(2, 3), np.arange(4.0).reshape(2, 2) - 1
    y, pullback = sr.rrule(sr.kron, a, b)
    dy = np.random.default_rng(2).random(y.shape)
    da, db = pullback(dy)
    ok &= np.allclose(y, np.kron(a, b))
    ok &= np.allclose(da, np.einsum("ikjl,kl->ij", dy.reshape(2, 2, 3, 2), b))
    ok &= np.allclose(db, np.einsum("ikjl,ij->kl", dy.reshape(2, 2, 3, 2), a))
    info = sr.cache_info()
    report.update(ok=bool(ok), numba=("numba" in sys.modules), compiles=info.compiles, disk_hits=info.disk_hits)
    report.update(llvm=("llvmlite.binding" in sys.modules), helperlib=("numba._helperlib" in sys.modules))
    # Numba started afterwards shares the runtime the direct loads set up, and both kinds of
    # kernel keep working side by side.
    import numba
    from numba.core.runtime import nrt

    @numba.njit
    def allocate(n):
        return np.arange(n) * 2.0

    ok2 = np.array_equal(allocate(5), np.arange(5) * 2.0)
    y, pullback = sr.rrule(sr.repeat, x, inner=sr.Val((2, 3)))
    ok2 &= np.array_equal(y, np.repeat(np.repeat(x, 2, 0), 3, 1))
    report.update(ok2=bool(ok2), shared=nrt._nrt is sys.modules["numba.core.runtime._nrt_python"])
    print(json.dumps(report))
    """
)


@pytest.mark.slow
def test_fresh_process_first_gradient_without_numba(tmp_path: Path) -> None:
    env = dict(os.environ, STABLERULES_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    env.pop(_objectcode.SWITCH, None)
    env.pop("STABLERULES_DISK_CACHE", None)
    runs = []
    for _ in range(2):  # the first fills the cache through Numba, the second loads it
        result = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["ok"] and cold["compiles"] > 0 and cold["numba"]
    assert warm["ok"] and warm["ok2"] and warm["shared"]
    assert warm["info_before"] == [True, str(tmp_path / "cache")]
    assert (warm["compiles"], warm["disk_hits"], warm["numba"]) == (0, cold["compiles"], False)
    if X86_64_LINUX:  # the host's record and the ELF loader: no LLVM, no helper library either
        assert not warm["llvm"] and not warm["helperlib"]


def test_the_runtime_loads_numbas_helper_library_for_the_first_symbol_that_needs_it() -> None:
    """``numba._helperlib`` is left out of the runtime until a kernel names one of its
    symbols; then each resolves to the address Numba registers for it."""
    runtime = _objectcode._Runtime()
    helpers: dict[str, int] = importlib.import_module("numba._helperlib").c_helpers
    dynfunc: dict[str, int] = importlib.import_module("numba._dynfunc").c_helpers
    own = sorted(name for name in helpers if name not in dynfunc)
    assert own and not any(f"numba_{name}" in runtime.symbols for name in own)
    assert [runtime.resolve(f"numba_{name}") for name in own] == [helpers[name] for name in own]
    assert all(runtime.symbols[f"numba_{name}"] == address for name, address in dynfunc.items())

