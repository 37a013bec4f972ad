"""The disk cache as an optimization only (SPEC section 16, issue 38): write failures, damaged
files, concurrent clears, stale records, unsafe folders, re-entrant calls, an interrupted
first import. Each case runs in a fresh process, bounded by a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 240

# The child's computation and its NumPy reference; prints "ok" and the warnings it saw.
CHECK = """
import json, sys, warnings
import numpy as np
import stablerules as sr
from stablerules import Val
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    x = np.arange(12.0).reshape(3, 4)
    for count in (2, 3):
        np.testing.assert_array_equal(sr.repeat(x, Val(count), axis=Val(1)), np.repeat(x, count, axis=1))
    np.testing.assert_array_equal(sr.roll(x, Val(1), axis=Val(0)), np.roll(x, 1, axis=0))
messages = [str(w.message) for w in caught if "stablerules" in str(w.message)]
print(json.dumps({"warnings": messages, "info": sr.cache_info()._asdict()}))
"""


def child(script: str, cache: Path, timeout: float = TIMEOUT, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "STABLERULES_CACHE_DIR": str(cache), **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=str(cache.parent),
    )


def report(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stderr[-3000:]
    parsed: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


# --- 1. write failures ----------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, 3000, 20000])
def test_a_file_size_limit_warns_once_and_computes_from_memory(tmp_path: Path, limit: int) -> None:
    """On main: ``OSError: [Errno 27] File too large`` raised to the caller (from Numba's
    cache ``_save_data``), in this process and in every later one."""
    script = (
        "import resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))\n" + CHECK
    )
    for _ in range(2):  # and again in a later process, over what the first left
        out = report(child(script, tmp_path / "cache"))
        warnings = out["warnings"]
        assert isinstance(warnings, list)
        written = [m for m in warnings if "cannot be written" in m]
        assert len(written) <= 1, warnings
        if limit == 0:
            assert len(written) == 1, warnings


def test_no_space_left_warns_once_and_computes_from_memory(tmp_path: Path) -> None:
    """On main: ``OSError: [Errno 28] No space left on device`` raised to the caller."""
    script = (
        "import errno, os\n"
        "def full(*args, **kwargs):  # every rename into place: a full disk\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "os.replace = full\n" + CHECK
    )
    out = report(child(script, tmp_path / "cache"))
    warnings = out["warnings"]
    assert isinstance(warnings, list)
    assert sum("No space left" in m for m in warnings) == 1, warnings


# A read-only file system under the cache, for this child: every write there (a file opened to
# write, a folder made, a file renamed, replaced or deleted) fails with EROFS, as on a
# read-only mount, whoever the user is (permission bits do not stop root).
READ_ONLY = """
import builtins, errno, io, os
_cache = os.path.abspath(os.environ["STABLERULES_CACHE_DIR"])
def _under(path):
    try:
        return os.path.abspath(os.fsdecode(path)).startswith(_cache)
    except TypeError:
        return False
def _refuse(path):
    raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))
_os_open = os.open
def _open(path, flags, mode=0o777, *, dir_fd=None):
    if _under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
        _refuse(path)
    return _os_open(path, flags, mode, dir_fd=dir_fd)
os.open = _open
def _refusing(real):
    def call(path, *args, **kwargs):
        if _under(path):
            if real is _mkdir and os.path.isdir(path):
                raise FileExistsError(errno.EEXIST, "File exists", os.fsdecode(path))
            _refuse(path)
        return real(path, *args, **kwargs)
    return call
_mkdir = os.mkdir
for _name in ("mkdir", "unlink", "remove", "rmdir", "rename", "replace", "chmod"):
    setattr(os, _name, _refusing(getattr(os, _name)))
_builtin_open = builtins.open
def _open_file(file, mode="r", *args, **kwargs):
    if isinstance(file, (str, bytes, os.PathLike)) and _under(file) and any(c in mode for c in "wax+"):
        _refuse(file)
    return _builtin_open(file, mode, *args, **kwargs)
builtins.open = io.open = _open_file
"""


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def test_a_read_only_cache_serves_what_it_holds_and_compiles_the_rest_in_memory(tmp_path: Path) -> None:
    """A cache filled where it can be written (a build step's ``sr.precompile``) and read
    where it cannot (a read-only mount). Until round 23 the write probe failed and the whole
    cache was set aside: every kernel it held compiled again, in every process."""
    cache = tmp_path / "cache"
    filled = report(child(CHECK, cache))["info"]
    assert isinstance(filled, dict) and filled["compiles"] >= 2 and filled["disk_hits"] == 0
    before = _files(cache)
    assert any(name.endswith(".native") for name in before)

    out = report(child(READ_ONLY + CHECK, cache))
    info = out["info"]
    assert isinstance(info, dict)
    assert out["warnings"] == []
    assert (info["compiles"], info["disk_hits"], info["disk_enabled"]) == (0, filled["compiles"], True)
    assert _files(cache) == before

    # a signature it does not hold compiles in memory (one warning); a clear leaves it as it is
    extra = CHECK.replace("for count in (2, 3):", "for count in (2, 3, 5):") + "sr.clear_caches(disk=True)\n"
    more = report(child(READ_ONLY + extra, cache))
    info = more["info"]
    assert isinstance(info, dict) and (info["compiles"], info["disk_hits"]) == (1, filled["compiles"])
    warnings = more["warnings"]
    assert isinstance(warnings, list) and len(warnings) == 1, warnings
    assert "cannot be written" in warnings[0] and "Read-only file system" in warnings[0], warnings
    assert _files(cache) == before


def test_after_a_failed_write_the_kernels_on_disk_still_load(tmp_path: Path) -> None:
    """Until round 23 the first failed write set the whole cache aside for the rest of the
    process: every later kernel compiled, those on disk too."""
    cache = tmp_path / "cache"
    filled = report(child(CHECK, cache))["info"]
    assert isinstance(filled, dict) and filled["compiles"] >= 2
    full = (
        "import errno, os\n"
        "def full(*args, **kwargs):  # every rename into place: a full disk\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "os.replace = full\n"
    )
    # a new signature first (its source cannot be written), then the ones the cache holds
    out = report(child(full + CHECK.replace("for count in (2, 3):", "for count in (5, 2, 3):"), cache))
    info, warnings = out["info"], out["warnings"]
    assert isinstance(info, dict) and (info["compiles"], info["disk_hits"]) == (1, filled["compiles"])
    assert isinstance(warnings, list) and sum("No space left" in m for m in warnings) == 1, warnings


def _without_cache_dir(**env: str) -> dict[str, str]:
    """The environment of a child whose cache directory is the default one."""
    environment = {k: v for k, v in os.environ.items() if k not in {"STABLERULES_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}}
    return {**environment, "PYTHONPATH": str(ROOT), **env}


def test_no_home_directory_computes_from_memory_with_one_warning(tmp_path: Path) -> None:
    """On main: ``RuntimeError: Could not determine home directory`` from every op that runs a
    kernel, in a process with no ``HOME`` whose user the password database does not list (a
    container run under an arbitrary uid)."""
    unknown_user = (
        "import os, pwd\n"
        "def unknown(uid):\n"
        "    raise KeyError(f'getpwuid(): uid not found: {uid}')\n"
        "pwd.getpwuid = unknown\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(unknown_user + CHECK)],
        capture_output=True, text=True, timeout=TIMEOUT, env=_without_cache_dir(), cwd=str(tmp_path),
    )
    out = report(result)
    info, warnings = out["info"], out["warnings"]
    assert isinstance(info, dict) and isinstance(warnings, list)
    assert (info["disk_enabled"], info["directory"]) == (False, None)
    assert len(warnings) == 1 and "home directory is unknown" in warnings[0] and "STABLERULES_CACHE_DIR" in warnings[0]


def test_the_default_cache_directory_is_home_dot_cache_even_with_xdg_cache_home(tmp_path: Path) -> None:
    """SPEC section 5: the default is ``~/.cache/stablerules``; ``XDG_CACHE_HOME`` is not read."""
    home = tmp_path / "home"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHECK)],
        capture_output=True, text=True, timeout=TIMEOUT,
        env=_without_cache_dir(HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "xdg")), cwd=str(tmp_path),
    )
    info = report(result)["info"]
    expected = home / ".cache" / "stablerules"
    assert isinstance(info, dict) and info["directory"] == str(expected) and info["disk_enabled"] is True
    assert any(path.suffix == ".native" for path in (expected / "kernels").iterdir())
    assert not (tmp_path / "xdg").exists()


# --- 2. integrity ---------------------------------------------------------------------------


def _flip(path: Path) -> bytes:
    data = bytearray(path.read_bytes())
    for offset in range(len(data) // 3, len(data), max(1, len(data) // 7)):
        data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.parametrize("direct", ["0", "1"])
def test_flipped_bytes_in_cached_files_are_a_miss_and_rewritten(tmp_path: Path, direct: str) -> None:
    """On main: a flipped byte in a ``.nbc`` was loaded and run (segfaults, SIGILL, a hang, or
    a wrong result), in every later process; nothing checked what it loaded."""
    cache = tmp_path / "cache"
    report(child(CHECK, cache, STABLERULES_DIRECT_LOAD=direct))
    files = [p for p in cache.rglob("*") if p.suffix in {".nbc", ".nbi", ".native"}]
    assert any(p.suffix == ".nbc" for p in files)
    flipped = {p: _flip(p) for p in files}
    out = report(child(CHECK, cache, STABLERULES_DIRECT_LOAD=direct))
    info = out["info"]
    assert isinstance(info, dict) and info["compiles"] >= 1
    for path, data in flipped.items():
        assert not path.exists() or path.read_bytes() != data, path
    # Written again: a third process loads every kernel from disk.
    third = report(child(CHECK, cache, STABLERULES_DIRECT_LOAD=direct))
    assert isinstance(third["info"], dict) and third["info"]["compiles"] == 0, third


def test_damaged_numba_files_that_cannot_be_deleted_are_not_loaded(tmp_path: Path) -> None:
    """On main: where deleting a damaged Numba file failed (a folder that stopped letting this
    user delete), the failure was ignored and Numba went on to load the damaged file."""
    cache = tmp_path / "cache"
    report(child(CHECK, cache, STABLERULES_DIRECT_LOAD="0"))
    flipped = {p: _flip(p) for p in cache.rglob("*") if p.suffix in {".nbc", ".nbi"}}
    assert any(p.suffix == ".nbc" for p in flipped)
    undeletable = (
        "import pathlib\n"
        "_unlink = pathlib.Path.unlink\n"
        "def unlink(self, missing_ok=False):\n"
        "    if self.suffix in ('.nbc', '.nbi'):\n"
        "        raise PermissionError(13, 'Permission denied', str(self))\n"
        "    return _unlink(self, missing_ok)\n"
        "pathlib.Path.unlink = unlink\n"
    )
    out = report(child(undeletable + textwrap.dedent(CHECK), cache, STABLERULES_DIRECT_LOAD="0"))
    warnings = out["warnings"]
    assert isinstance(warnings, list) and any("cannot be written" in m and "in memory" in m for m in warnings), warnings
    assert all(path.read_bytes() == data for path, data in flipped.items())  # still there, never loaded


# --- 3. clear_caches(disk=True) against other processes -------------------------------------


def test_clear_disk_while_other_processes_load_and_compile(tmp_path: Path) -> None:
    """On main: the others crashed with ``FileNotFoundError: ...
    kernels/__pycache__/<key>.kernel-23.py311.nbi.tmp.<rand>``."""
    cache = tmp_path / "cache"
    worker = """
    import numpy as np, stablerules as sr, warnings
    from stablerules import Val
    warnings.simplefilter("ignore")
    x = np.arange(6.0)
    for count in range(2, 14):
        np.testing.assert_array_equal(sr.repeat(x, Val(count)), np.repeat(x, count))
        np.testing.assert_array_equal(sr.tile(x, Val((count,))), np.tile(x, count))
    print("ok")
    """
    clearer = """
    import stablerules as sr, time
    for _ in range(40):
        sr.clear_caches(disk=True)
        time.sleep(0.05)
    print("ok")
    """
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "STABLERULES_CACHE_DIR": str(cache)}
    processes = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
        for script in [worker] * 3 + [clearer]
    ]
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=TIMEOUT)
            assert process.returncode == 0 and stdout.strip().endswith("ok"), stderr[-3000:]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


# --- 4. a stale version record --------------------------------------------------------------


def test_a_native_file_naming_another_numba_version_is_replaced(tmp_path: Path) -> None:
    """On main: never replaced (``save`` saw the file exist), so every later process imported
    Numba and the direct load never came back."""
    cache = tmp_path / "cache"
    report(child(CHECK, cache))
    rewrite = """
    import hashlib, json, struct, sys
    from pathlib import Path
    from stablerules import _objectcode as oc
    for path in Path(sys.argv[1]).rglob("*.native"):
        header, obj = oc._parse(path.read_bytes())
        header["key"] = [[k, "0.0.0" if k == "numba" else v] for k, v in header["key"]]
        encoded = json.dumps(header).encode()
        body = struct.pack("<Q", len(encoded)) + encoded + obj
        path.write_bytes(oc._MAGIC + hashlib.sha256(body).digest() + body)
    print("ok")
    """
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", textwrap.dedent(rewrite), str(cache)], check=True, timeout=TIMEOUT, env=environment)
    loads_numba = CHECK + "\nprint(json.dumps({'numba': 'numba.core' in sys.modules}))\n"
    first = child(loads_numba, cache)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout.strip().splitlines()[-1]) == {"numba": True}
    second = child(loads_numba, cache)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {"numba": False}


# --- 5. folders another user could write ----------------------------------------------------

PLANT = """
import os, pickle, sys
from pathlib import Path
marker = Path(sys.argv[1])
class Planted:
    def __reduce__(self):
        return (open, (str(marker), "w"))
payload = pickle.dumps(Planted())
"""


# A stand-in for PyYAML (not a dependency), enough for Numba to read a one-line config file.
YAML_STUB = "def safe_load(stream):\n    return dict(line.split(': ', 1) for line in stream.read().splitlines() if line.strip())\n"


@pytest.mark.parametrize("how", ["chown", "mode", "numba_cache_dir", "numba_config_yaml"])
def test_a_pickle_planted_in_a_folder_others_can_write_is_never_loaded(tmp_path: Path, how: str) -> None:
    """On main: with the top folder private but ``kernels/__pycache__`` (or ``NUMBA_CACHE_DIR``,
    or the ``cache_dir`` of a ``.numba_config.yaml`` in the working directory) writable by
    another user, a Numba index planted there was unpickled and ran, no warning."""
    cache = tmp_path / "cache"
    numba_dir = tmp_path / "numba"
    env = {"STABLERULES_DIRECT_LOAD": "0"}
    if how == "numba_cache_dir":
        env["NUMBA_CACHE_DIR"] = str(numba_dir)
    elif how == "numba_config_yaml":
        (tmp_path / ".numba_config.yaml").write_text(f"cache_dir: {numba_dir}\n")  # the child's cwd
        (tmp_path / "stub").mkdir()
        (tmp_path / "stub" / "yaml.py").write_text(YAML_STUB)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path / "stub")])
    report(child(CHECK, cache, TIMEOUT, **env))
    numba_configured = how in ("numba_cache_dir", "numba_config_yaml")
    indexes = list((numba_dir if numba_configured else cache).rglob("*.nbi"))
    assert indexes
    folder = numba_dir if numba_configured else indexes[0].parent
    marker = tmp_path / "planted-ran"
    namespace: dict[str, object] = {"__name__": "plant"}
    script = PLANT.replace("sys.argv[1]", repr(str(marker)))
    exec(compile(script, "plant", "exec"), namespace)
    payload = namespace["payload"]
    assert isinstance(payload, bytes)
    for index in indexes:
        # Numba unpickles its index's first record as soon as it reads the index.
        index.write_bytes(payload)
    if how == "chown":
        os.chown(folder, 12345, 12345)
    else:
        folder.chmod(0o777)
    out = report(child(CHECK, cache, TIMEOUT, **env))
    assert not marker.exists(), "a planted pickle ran"
    warnings = out["warnings"]
    assert isinstance(warnings, list) and any("not loaded from" in m for m in warnings), warnings


def test_a_symlink_at_the_probe_name_is_not_followed(tmp_path: Path) -> None:
    """On main: ``.probe-<pid>-<tid>`` was opened with ``O_TRUNC`` through a planted symbolic
    link, truncating its target."""
    cache = tmp_path / "cache"
    (cache / "kernels").mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    target = tmp_path / "victim"
    target.write_text("precious")
    script = f"""
    import os, threading, warnings
    from pathlib import Path
    kernels = Path({str(cache / "kernels")!r})
    os.symlink({str(target)!r}, kernels / f".probe-{{os.getpid()}}-{{threading.get_ident()}}")
    import stablerules as sr
    warnings.simplefilter("ignore")
    print(sr.cache_info().disk_enabled)
    """
    result = child(script, cache)
    assert result.returncode == 0, result.stderr[-3000:]
    assert target.read_text() == "precious"


# --- 7. re-entrant calls --------------------------------------------------------------------


def test_an_op_called_from_del_during_the_first_compile_of_its_signature(tmp_path: Path) -> None:
    """On main: a hang (the per-signature lock waited for by the thread holding it)."""
    script = """
    import gc
    import numpy as np, stablerules as sr
    from stablerules import Val
    x = np.arange(6.0)
    seen = []
    class Cycle:
        def __init__(self):
            self.me = self
        def __del__(self):
            seen.append(sr.repeat(x, Val(3)))
    gc.disable()
    Cycle()
    out = sr.repeat(x, Val(3))  # its first compile collects the garbage (a GC point)
    gc.collect()
    assert seen, "the __del__ did not run"
    for result in seen + [out]:
        np.testing.assert_array_equal(result, np.repeat(x, 3))
    print("ok")
    """
    result = child(script, tmp_path / "cache", timeout=120)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_roll_from_del_at_a_gc_point_inside_a_parallel_roll_with_a_pooled_output(tmp_path: Path) -> None:
    """On main: a hang in ``ThreadPoolExecutor.submit``'s own lock (and the pool's). The
    thread pool is ours now: GC points while a launch hands out its chunks and while the
    pool's lock is held (a pool thread being made)."""
    script = """
    import gc
    import numpy as np, stablerules as sr
    from stablerules import Val, _parallel, _pool
    x = np.arange(1 << 20, dtype=np.float64).reshape(1024, 1024)
    expected = np.roll(x, 3, axis=1)
    np.testing.assert_array_equal(sr.roll(x, Val(3), axis=Val(1)), expected)  # compiled
    seen = []
    class Cycle:
        def __init__(self):
            self.me = self
        def __del__(self):
            seen.append(np.array(sr.roll(x, Val(3), axis=Val(1))))
    point = []  # the GC point this round collects at
    def at(name, real):
        def hooked(*args, **kwargs):
            if name in point:
                gc.collect()
            return real(*args, **kwargs)
        return hooked
    # while the output pool holds its lock; while a launch hands out its chunks (some pool
    # threads claimed); while the thread pool's lock is held (a pool thread being made)
    _pool._make_room = at("room", _pool._make_room)
    _parallel._Job.__init__ = at("job", _parallel._Job.__init__)
    _parallel._Worker.__init__ = at("worker", _parallel._Worker.__init__)
    gc.disable()
    for name in ("room", "job", "worker"):
        point[:] = [name]
        _parallel._forget_workers()  # pool threads made again, under the hook
        Cycle()
        _pool.clear()
        out = sr.roll(x, Val(3), axis=Val(1))
        np.testing.assert_array_equal(out, expected)
        assert len(seen) == len(("room", "job", "worker")[: ("room", "job", "worker").index(name) + 1]), (name, seen)
    for result in seen:
        np.testing.assert_array_equal(result, expected)
    print("ok")
    """
    result = child(script, tmp_path / "cache", timeout=120, STABLERULES_NUM_THREADS="4", STABLERULES_PARALLEL_THRESHOLD="1024")
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


# --- 8. an interrupted first import ---------------------------------------------------------


def test_a_keyboard_interrupt_during_numbas_first_import_leaves_the_process_usable(tmp_path: Path) -> None:
    """On main: every later op raised ``AttributeError: module 'numba' has no attribute
    'core'`` until a restart."""
    script = """
    import sys
    import numpy as np, stablerules as sr
    from stablerules import Val

    class Interrupt:
        fired = False
        def find_spec(self, name, path=None, target=None):
            if name == "numba.core.typing" and not Interrupt.fired:
                Interrupt.fired = True
                raise KeyboardInterrupt
            return None
    sys.meta_path.insert(0, Interrupt())
    x = np.arange(6.0)
    try:
        sr.repeat(x, Val(2))
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the import was not interrupted")
    assert Interrupt.fired
    np.testing.assert_array_equal(sr.repeat(x, Val(2)), np.repeat(x, 2))
    np.testing.assert_array_equal(sr.roll(x, Val(2)), np.roll(x, 2))
    print("ok")
    """
    result = child(script, tmp_path / "cache", timeout=180, STABLERULES_DISK_CACHE="0")
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]



# --- 6. memory given back -------------------------------------------------------------------


def test_clear_caches_lets_numbas_dispatchers_and_libraries_go(tmp_path: Path) -> None:
    """On main: every dispatcher and code library stayed alive after ``clear_caches()``
    (Numba's finalizer holds the overloads, which reach the dispatcher through its function's
    globals), so distinct repeat counts added memory that never came back."""
    script = """
    import gc, weakref
    import numpy as np, stablerules as sr
    from stablerules import Val
    from stablerules._cache import CACHE
    x = np.arange(6.0)
    y, kept = sr.rrule(sr.repeat, x, Val(7))  # a pullback made before the clear
    np.testing.assert_array_equal(kept(np.ones_like(y))[0], np.full(6, 7.0))
    held = set(CACHE._entries)
    def fill():
        for count in (2, 3, 4):
            y, back = sr.rrule(sr.repeat, x, Val(count))
            np.testing.assert_array_equal(back(np.ones_like(y))[0], np.full(6, float(count)))
        functions = [k._function for s, k in CACHE._entries.items() if k._function is not None and s not in held]
        libraries = [c.library for f in functions for c in f.overloads.values()]
        return [weakref.ref(o) for o in functions + libraries]
    references = fill()
    assert len(references) >= 6, references
    sr.clear_caches()
    gc.collect()
    alive = [r() for r in references if r() is not None]
    assert not alive, alive
    np.testing.assert_array_equal(kept(np.ones_like(y))[0], np.full(6, 7.0))  # still works
    np.testing.assert_array_equal(sr.repeat(x, Val(2)), np.repeat(x, 2))  # and compiles again
    print("ok")
    """
    result = child(script, tmp_path / "cache", timeout=180, STABLERULES_DISK_CACHE="0")
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


# --- os.fork while another thread builds ------------------------------------------------------

# The child forks while the thread ``builder`` is at ``WHERE`` of its build (a first kernel: the
# signature's lock held, ``import numba`` and the compile ahead or under way); its child then
# calls the op with the same signature and a new one, bounded by ``faulthandler``'s exit.
FORK = """
import faulthandler, gc, os, sys, threading, time
import numpy as np
import stablerules as sr
from stablerules import Val, _cache, _private_numba
WHERE = {where!r}
x = np.arange(35.0).reshape(7, 5)
reached = threading.Event()
if WHERE == "build":
    real = _cache.KernelCache._build
    def build(self, *args):
        reached.set()
        time.sleep(0.01)  # the fork comes while this thread holds the signature's lock
        return real(self, *args)
    _cache.KernelCache._build = build
else:
    real = _private_numba.lean_compile
    def lean_compile(build):
        reached.set()
        time.sleep(0.01)  # inside Numba's compiler lock
        return real(build)
    _private_numba.lean_compile = lean_compile
def work():
    y, back = sr.rrule(sr.repeat, x, Val(3), Val(0))
    back(np.ones_like(y))
builder = threading.Thread(target=work)
builder.start()
assert reached.wait(60)
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(60, exit=True)  # a hang: exit 1 with the stacks
    y, back = sr.rrule(sr.repeat, x, Val(3), Val(0))
    np.testing.assert_array_equal(y, np.repeat(x, 3, axis=0))
    np.testing.assert_array_equal(back(np.ones_like(y))[0], np.full((7, 5), 3.0))
    np.testing.assert_array_equal(sr.tile(x, Val((2, 1))), np.tile(x, (2, 1)))
    assert gc.isenabled() and gc.get_freeze_count() == 0
    os._exit(0)
builder.join()
_, status = os.waitpid(pid, 0)
print("ok" if status == 0 else f"child status {{status}}")
"""


@pytest.mark.parametrize("where", ["build", "compile"])
def test_a_child_forked_while_another_thread_builds_a_kernel_computes(tmp_path: Path, where: str) -> None:
    """On main: the child hung at its first call of the op, on the lock the building thread
    held at the fork (Python 3.11's ``functools.cached_property`` lock, the signature's, a
    module's import lock in ``import numba``, llvmlite's, Numba's compiler lock)."""
    result = child(FORK.format(where=where), tmp_path / "cache", timeout=200)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), (result.stdout, result.stderr[-3000:])


def test_cached_properties_of_different_plans_compute_at_once_in_two_threads() -> None:
    """Python 3.11's ``functools.cached_property`` holds one lock per property across every
    instance: a thread computing one plan's launcher (a compile) held back every other
    thread's first call of that op. Ours holds none: here each computation waits for the
    other to have started, which under one shared lock never happens."""
    import threading

    from stablerules._memo import cached_property

    started = [threading.Event(), threading.Event()]

    class Plan:
        def __init__(self, index: int) -> None:
            self.index = index

        @cached_property
        def launcher(self) -> int:
            started[self.index].set()
            assert started[1 - self.index].wait(10), "the other thread's computation never started"
            return self.index

    results: list[int] = []
    threads = [threading.Thread(target=lambda p=Plan(i): results.append(p.launcher)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == [0, 1]


def test_a_relative_cache_directory_stays_where_it_was_after_a_chdir(tmp_path: Path) -> None:
    """On main: after the program changed directory (as Hydra's runs do), the store wrote
    under the new one, found no folders there and warned that the cache could not be
    written; the kernels compiled after it were lost to the next process."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = f"""
    import json, os, warnings
    import numpy as np, stablerules as sr
    from stablerules import Val
    warnings.simplefilter("error")  # no warning at all
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(sr.repeat(x, Val(2), axis=Val(0)), np.repeat(x, 2, axis=0))
    os.chdir({str(elsewhere)!r})
    np.testing.assert_array_equal(sr.tile(x, Val((2, 1))), np.tile(x, (2, 1)))
    print(json.dumps({{"info": sr.cache_info()._asdict()}}))
    """
    first = report(child(script, tmp_path / "cache", timeout=120, STABLERULES_CACHE_DIR="relative"))
    info = first["info"]
    assert isinstance(info, dict) and info["directory"] == str(tmp_path / "relative") and info["compiles"] == 2
    assert not any(elsewhere.iterdir())
    second = report(child(script, tmp_path / "cache", timeout=120, STABLERULES_CACHE_DIR="relative"))
    info = second["info"]
    assert isinstance(info, dict) and info["compiles"] == 0 and info["disk_hits"] == 2, info
