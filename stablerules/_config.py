"""Every environment switch stablerules reads, parsed in one place.

=================================  ============================  ==========================================
Variable                           Accepted values (default)     Effect, and when it is read
=================================  ============================  ==========================================
``STABLERULES_CACHE_DIR``          a path (``~/.cache/           where compiled kernels are kept on disk;
                                   stablerules``)                read when the kernel cache opens its store
``STABLERULES_DISK_CACHE``         a switch (on)                 off: kernels live in memory only; read
                                                                 when the kernel cache opens its store
``STABLERULES_DIRECT_LOAD``        a switch (on)                 off: kernels load through Numba's own
                                                                 cache, never from our object code; read
                                                                 when the disk store opens
``STABLERULES_POOL``               a switch (on)                 off: large outputs are plain ``np.empty``
                                                                 (no caching pool); read at import
``STABLERULES_NUM_THREADS``        an integer; below 1 reads as  threads a large kernel launch splits
                                   1 (one per available CPU)     across; read when the thread pool starts
                                                                 and at each split
``STABLERULES_PARALLEL_THRESHOLD`` an integer (786432)           elements of work below which a launch
                                                                 runs in one call; read at import
``STABLERULES_DEVICE``             ``cpu`` or ``cuda`` (cpu)     ``cuda`` sends NumPy arrays to the CUDA
                                                                 kernels (with ``NUMBA_ENABLE_CUDASIM=1``,
                                                                 Numba's simulator); read at every call
=================================  ============================  ==========================================

A switch is on for ``1``, ``true``, ``yes``, ``on`` or the empty string, off for ``0``,
``false``, ``no``, ``off`` (any case, surrounding spaces ignored). A value outside what a
variable accepts is a ``ValueError`` that names the variable and the accepted values, raised
where the variable is read.

Numba's own switches that change what stablerules does are read here too:
``NUMBA_ENABLE_CUDASIM`` (CUDA kernels run in the simulator), ``NUMBA_DISABLE_JIT`` (no
object-code loading: kernels are Python code) and ``NUMBA_CACHE_DIR`` (where Numba's cache
of our kernels goes); the CPU settings that key stored object code (``NUMBA_CPU_NAME``,
``NUMBA_CPU_FEATURES``, ``NUMBA_ENABLE_AVX``) are read with that key, in ``_objectcode``.

This module imports nothing of stablerules.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING


if TYPE_CHECKING:  # pathlib at run time only where a path is made: its import (urllib.parse,
    from pathlib import Path  # ipaddress) was ~4 ms of `import stablerules`

CACHE_DIR = "STABLERULES_CACHE_DIR"
DISK_CACHE = "STABLERULES_DISK_CACHE"
DIRECT_LOAD = "STABLERULES_DIRECT_LOAD"
POOL = "STABLERULES_POOL"
NUM_THREADS = "STABLERULES_NUM_THREADS"
PARALLEL_THRESHOLD = "STABLERULES_PARALLEL_THRESHOLD"
DEVICE = "STABLERULES_DEVICE"

_DEFAULT_PARALLEL_THRESHOLD = 3 << 18
_ON = frozenset({"", "1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})


def _switch(name: str) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return True
    value = raw.strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ValueError(f"{name}={raw!r}: expected 1, true, yes, on (the default) or 0, false, no, off")


def _integer(name: str, accepted: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected {accepted}") from None


def _numba_flag(name: str) -> bool:
    # Numba's own reading of its integer switches: unset, empty and "0" are off.
    return os.environ.get(name, "0").strip() not in {"", "0"}


def cache_dir() -> Path:
    """``STABLERULES_CACHE_DIR`` (``~`` expanded; a relative path is anchored at the working
    directory of its first reading, :data:`_ANCHORED`), else ``~/.cache/stablerules`` (SPEC
    section 5: ``XDG_CACHE_HOME`` is not read).

    ``RuntimeError`` when the path needs a home directory and none is known (no ``HOME``, and
    a user the password database does not list: a container run under an arbitrary uid). The
    kernel cache then keeps kernels in memory, with one warning (``_cache._open_store``)."""
    from pathlib import Path  # noqa: PLC0415 - see the import above

    configured = os.environ.get(CACHE_DIR)
    if configured:
        anchored = _ANCHORED.get(configured)
        if anchored is None:
            path = Path(configured).expanduser()
            try:
                anchored = _ANCHORED[configured] = path.absolute()
            except OSError:  # no working directory (deleted): as given, anchored at a later call
                return path
        return anchored
    return Path.home() / ".cache" / "stablerules"


_ANCHORED: dict[str, Path] = {}
"""A relative ``STABLERULES_CACHE_DIR``, made absolute against the working directory of the
first call that reads it, and kept so for the process: a program that then changes directory
(Hydra's runs, a test's ``chdir``) keeps one cache. Left relative, the store opened under the
first directory wrote and imported under the next one, found its folders missing there and
warned that the cache could not be written; Numba's cache, found from each kernel module's
path, was lost the same way. Not a cache to clear (``clear_caches`` leaves it): it says which
folder the configured name meant."""


def disk_cache() -> bool:
    """``STABLERULES_DISK_CACHE``: whether compiled kernels are kept on disk."""
    return _switch(DISK_CACHE)


def direct_load() -> bool:
    """``STABLERULES_DIRECT_LOAD``: whether kernels may load from our stored object code."""
    return _switch(DIRECT_LOAD)


def pool() -> bool:
    """``STABLERULES_POOL``: whether large outputs come from the caching pool."""
    return _switch(POOL)


def num_threads() -> int | None:
    """``STABLERULES_NUM_THREADS`` (at least 1), or ``None`` when unset (one per CPU)."""
    configured = _integer(NUM_THREADS, "an integer number of threads, or unset for one per available CPU")
    return None if configured is None else max(1, configured)


def parallel_threshold() -> int:
    """``STABLERULES_PARALLEL_THRESHOLD``: elements of work below which a launch is one call."""
    configured = _integer(PARALLEL_THRESHOLD, "an integer number of elements of work")
    return _DEFAULT_PARALLEL_THRESHOLD if configured is None else configured


def device_target(raw: object) -> str:
    """The kernel family a raw ``STABLERULES_DEVICE`` value (``str``, or ``bytes`` as the
    environment stores it) sends NumPy arrays to: ``"cpu"`` or ``"cuda"``."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    value = text.strip().lower()
    if value in {"", "cpu"}:
        return "cpu"
    if value == "cuda":
        return "cuda"
    raise ValueError(f"{DEVICE}={text!r}: expected cpu (the default) or cuda")


def cuda_simulator() -> bool:
    """``NUMBA_ENABLE_CUDASIM``: whether CUDA kernels run in Numba's simulator."""
    return _numba_flag("NUMBA_ENABLE_CUDASIM")


def jit_disabled() -> bool:
    """``NUMBA_DISABLE_JIT``: whether Numba runs kernels as Python code."""
    return _numba_flag("NUMBA_DISABLE_JIT")


def numba_cache_dir() -> str | None:
    """``NUMBA_CACHE_DIR``, where Numba keeps its cache of our kernels when it is set."""
    return os.environ.get("NUMBA_CACHE_DIR") or None
