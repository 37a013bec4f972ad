"""A small caching pool for large NumPy outputs (as PyTorch's and XLA's caching allocators).

A fresh multi-megabyte ``np.empty`` is new memory from the OS: the first write to each page
faults and the kernel zeroes it, a whole extra write pass over the output (for a copy-bound
pullback of tens of megabytes, more time than its copy kernel). In a
steady loop the previous call's output has usually been dropped by then; this pool hands its
memory out again.

- ``empty(shape, dtype)`` is ``np.empty(shape, dtype)``. From ``MIN_BYTES`` (1 MiB) up, the
  array is a view of a pooled block, a 1-D ``uint8`` array: ``block.view(dtype).reshape(shape)``,
  so every view, memoryview, DLPack or ``torch.from_numpy`` export of it holds ``block``
  (through ``.base``, or the array the export holds). A block is handed out again only when
  ``sys.getrefcount`` shows the pool's own reference alone: nothing anywhere can still read or
  write it. Its contents are whatever the last user left, as ``np.empty``'s may be.
- Bounds: at most ``PER_SIZE`` (2) blocks of one byte size and ``CAP_BYTES`` (256 MiB) held
  in all. A request that finds no free block of its size makes a new one if that fits the
  bounds, after dropping free blocks of other sizes, least recently used first; otherwise it
  is a plain ``np.empty`` (never pooled). So a loop that keeps several results alive, or
  outputs larger than the cap, behave as without the pool.
- ``STABLERULES_POOL=0`` (read at import) turns it off: every output is new memory (``np.empty``, or the engine's below).
  ``clear()`` (and ``stablerules.clear_caches()``) drops every block the pool holds;
  results still alive keep theirs.
- Whose memory: NumPy's, unless the engine whose pullback this thread runs set
  ``ENGINE_MEMORY.make`` for the call (the torch adapter: torch's CPU allocator). From
  ``MIN_BYTES`` up, a new block and an output the pool does not hold (``empty``, ``zeros``)
  are then the engine's memory, so a result handed to the engine is allocated as the engine
  allocates its own (see :class:`_EngineMemory`).
- Thread-safe: one (reentrant) lock around finding or making a block. Only the pool can hand out a
  reference to a block it holds, so a block seen free under the lock stays free.

The costs, decided here: up to 256 MiB stays mapped after the results are gone (what the
caching allocators of the frameworks do too; turn it off where memory is tight), and a result
is not ``flags.owndata`` (its ``base`` is the block). Memory reached only through a raw
address (``arr.ctypes.data`` kept past the array's life) is reused instead of freed: such
code reads freed memory without the pool as well. CuPy outputs do not come here (CuPy pools
device memory itself).
"""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from . import _config, _fork
from ._memo import register

MIN_BYTES = 1 << 20
PER_SIZE = 2
CAP_BYTES = 256 << 20
ENABLED = _config.pool()

_UINT8 = np.dtype(np.uint8)
# Blocks by byte size, the least recently handed out size first.
_blocks: OrderedDict[int, list[npt.NDArray[np.uint8]]] = OrderedDict()
_held = [0]  # bytes held in all blocks
# Reentrant: making a block allocates (a list), where a garbage collection may run a
# ``__del__`` that calls an op whose output comes from this pool, in the same thread. A block
# the outer call has found is referenced by it, so the inner call never takes it.
_lock = threading.RLock()


def _new_lock() -> None:
    global _lock
    _lock = threading.RLock()


_fork.renewed(_new_lock)


def _reference_count_when_free() -> int:
    """``sys.getrefcount(blocks[index])`` of a block only its list holds, measured the way
    ``_free_block`` measures it (the list's reference and the call's argument)."""
    probe = [np.empty(0, _UINT8)]
    return sys.getrefcount(probe[0])


_FREE = _reference_count_when_free()


class _EngineMemory(threading.local):
    """The allocator of the engine whose pullback this thread is running, set by its adapter
    for the duration of the call (``None``: NumPy's). ``make(nbytes, zeroed)`` returns a 1-D
    ``uint8`` array of ``nbytes`` (all zero bytes when ``zeroed``) whose memory the engine
    allocated (its ``base`` keeps that memory alive), or ``None`` where the engine cannot
    give plain memory now: NumPy's then.

    Why the engine's: NumPy asks the kernel for transparent huge pages on every array of 4 MB
    or more (``madvise``), and where the kernel's ``defrag`` setting is ``madvise`` (the
    default of many distributions, this machine's) a first touch of such memory that finds no
    free 2 MB page waits for memory to be compacted: 100-350 ms of system time in some fresh
    processes for the embedding head's 25.6 MB gradient (``bench/README.md``, rounds 19 and
    20). torch's allocator asks for no huge pages, so torch's own ops never wait so; nor,
    with this, do our results in torch. The memory is also aligned as torch aligns its own
    (64 bytes; NumPy's large blocks sit 16 bytes past a page). Per thread, as
    ``_parallel.ENGINE_THREADS``: another thread's NumPy call keeps NumPy's memory."""

    make: Callable[[int, bool], npt.NDArray[np.uint8] | None] | None = None


ENGINE_MEMORY = _EngineMemory()


def _new(nbytes: int, zeroed: bool = False) -> npt.NDArray[np.uint8]:
    make = ENGINE_MEMORY.make
    block = None if make is None else make(nbytes, zeroed)
    if block is not None:
        return block
    return np.zeros(nbytes, _UINT8) if zeroed else np.empty(nbytes, _UINT8)


def _free_block(blocks: list[npt.NDArray[np.uint8]]) -> npt.NDArray[np.uint8] | None:
    for index in range(len(blocks)):
        if sys.getrefcount(blocks[index]) == _FREE:
            return blocks[index]
    return None


def _make_room(nbytes: int) -> bool:
    """Drop free blocks of other sizes, least recently used first, until ``nbytes`` more fit
    under ``CAP_BYTES``; whether they do."""
    for size in list(_blocks):
        if _held[0] + nbytes <= CAP_BYTES:
            break
        blocks = _blocks[size]
        index = 0
        while index < len(blocks) and _held[0] + nbytes > CAP_BYTES:
            if sys.getrefcount(blocks[index]) == _FREE:
                del blocks[index]
                _held[0] -= size
            else:
                index += 1
        if not blocks:
            del _blocks[size]
    return _held[0] + nbytes <= CAP_BYTES


def _block(nbytes: int) -> npt.NDArray[np.uint8] | None:
    with _lock:
        blocks = _blocks.get(nbytes)
        if blocks is not None:
            _blocks.move_to_end(nbytes)
            block = _free_block(blocks)
            if block is not None:
                return block
            if len(blocks) >= PER_SIZE:
                return None
        if nbytes > CAP_BYTES or not _make_room(nbytes):
            return None
        block = _new(nbytes)
        _blocks.setdefault(nbytes, []).append(block)
        _blocks.move_to_end(nbytes)
        _held[0] += nbytes
        return block


def empty(shape: int | tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """``np.empty(shape, dtype)``: a view of a free pooled block from ``MIN_BYTES`` up (see
    the module docstring), else new memory (the engine's, where one is set)."""
    nbytes = (shape if isinstance(shape, int) else math.prod(shape)) * dtype.itemsize
    if nbytes >= MIN_BYTES:
        block = _block(nbytes) if ENABLED else None
        if block is None and ENGINE_MEMORY.make is not None:
            block = _new(nbytes)
        if block is not None:
            array: npt.NDArray[np.generic] = block.view(dtype).reshape(shape)
            return array
    return np.empty(shape, dtype)


def zeros(shape: int | tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """``np.zeros(shape, dtype)``, from ``MIN_BYTES`` up in the engine's memory where one is
    set (never pooled: a pooled block holds what its last user left)."""
    if ENGINE_MEMORY.make is not None:
        nbytes = (shape if isinstance(shape, int) else math.prod(shape)) * dtype.itemsize
        if nbytes >= MIN_BYTES:
            array: npt.NDArray[np.generic] = _new(nbytes, True).view(dtype).reshape(shape)
            return array
    return np.zeros(shape, dtype)


def allocator(
    nbytes: int, zeroed: bool = False
) -> Callable[[int | tuple[int, ...], np.dtype[np.generic]], npt.NDArray[np.generic]]:
    """What allocates an output of ``nbytes`` (all zeros where ``zeroed``), chosen once (a
    plan's): NumPy's ``np.empty`` or ``np.zeros`` itself below ``MIN_BYTES`` (the pool's
    checks would only add call overhead there), else ``empty`` or ``zeros``."""
    allocate: Callable[[int | tuple[int, ...], np.dtype[np.generic]], npt.NDArray[np.generic]]
    if nbytes < MIN_BYTES:
        allocate = np.zeros if zeroed else np.empty
    else:
        allocate = zeros if zeroed else empty
    return allocate


def held_bytes() -> int:
    """Bytes the pool holds (in use or free)."""
    return _held[0]


def clear() -> None:
    """Drop every block; results still alive keep theirs (they hold the block)."""
    with _lock:
        _blocks.clear()
        _held[0] = 0


register(f"{__name__}.blocks", clear, lambda: sum(len(blocks) for blocks in _blocks.values()))

__all__ = [
    "CAP_BYTES", "ENABLED", "ENGINE_MEMORY", "MIN_BYTES", "PER_SIZE", "allocator", "clear", "empty", "held_bytes", "zeros",
]
