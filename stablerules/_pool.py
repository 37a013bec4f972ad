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
- ``STABLERULES_POOL=0`` (read at import) turns it off: every output is a plain ``np.empty``.
  ``clear()`` (and ``stablerules.clear_caches()``) drops every block the pool holds;
  results still alive keep theirs.
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

from . import _config
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


def _reference_count_when_free() -> int:
    """``sys.getrefcount(blocks[index])`` of a block only its list holds, measured the way
    ``_free_block`` measures it (the list's reference and the call's argument)."""
    probe = [np.empty(0, _UINT8)]
    return sys.getrefcount(probe[0])


_FREE = _reference_count_when_free()


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
        block = np.empty(nbytes, _UINT8)
        _blocks.setdefault(nbytes, []).append(block)
        _blocks.move_to_end(nbytes)
        _held[0] += nbytes
        return block


def empty(shape: int | tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """``np.empty(shape, dtype)``: a view of a free pooled block from ``MIN_BYTES`` up (see
    the module docstring), else NumPy's own."""
    if ENABLED:
        nbytes = (shape if isinstance(shape, int) else math.prod(shape)) * dtype.itemsize
        if nbytes >= MIN_BYTES:
            block = _block(nbytes)
            if block is not None:
                array: npt.NDArray[np.generic] = block.view(dtype).reshape(shape)
                return array
    return np.empty(shape, dtype)


def allocator(nbytes: int) -> Callable[[int | tuple[int, ...], np.dtype[np.generic]], npt.NDArray[np.generic]]:
    """What allocates an output of ``nbytes``, chosen once (a plan's): ``np.empty`` itself
    below ``MIN_BYTES`` (the pool's checks would only add call overhead there), else
    ``empty``."""
    allocate: Callable[[int | tuple[int, ...], np.dtype[np.generic]], npt.NDArray[np.generic]] = (
        empty if nbytes >= MIN_BYTES else np.empty
    )
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

__all__ = ["CAP_BYTES", "ENABLED", "MIN_BYTES", "PER_SIZE", "allocator", "clear", "empty", "held_bytes"]
