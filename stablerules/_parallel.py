"""Split a ``nogil`` kernel over disjoint ranges of its partition loop, on a small pool.

``parallel=True`` in Numba costs 1.5-2 s of compile per kernel (measured on the target
machine), which breaks the cold-compile goal; serial ``nogil`` kernels that take a
``[lo, hi)`` range of their outermost owned loop, run from a thread pool, cost nothing to
compile and give the same scaling on memory-bound work.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import _config

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

# Below this many elements of work a pool round trip (tens of microseconds) costs more than it saves.
PARALLEL_THRESHOLD = _config.parallel_threshold()

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
# Set while this thread submits to the pool: the executor's ``submit`` holds a lock of its own
# (not reentrant), and a garbage collection inside it may run a ``__del__`` that calls an op.
# Such a nested call runs its chunks in this thread instead of waiting for that lock forever.
_submitting = threading.local()


def _submit_all(submit: Callable[..., Future[object]], calls: Sequence[tuple[object, ...]]) -> list[Future[object]] | None:
    """``[submit(*call) for call in calls]``, or ``None`` when re-entered from a submit."""
    if getattr(_submitting, "active", False):
        return None
    _submitting.active = True
    try:
        return [submit(*call) for call in calls]
    finally:
        _submitting.active = False


class _EngineThreads(threading.local):
    """The thread budget of the engine whose pullback this thread is running (torch:
    ``torch.get_num_threads()``), set by its adapter for the duration of the call; 0 when none
    is set. Per thread, so that another thread's call (or a plain NumPy call beside it) keeps
    its own count."""

    count = 0


ENGINE_THREADS = _EngineThreads()


def thread_count() -> int:
    configured = _config.num_threads()
    if configured is not None:
        return configured
    engine = ENGINE_THREADS.count
    if engine:
        return engine
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        # Imported on first use, so that `import stablerules` does not pay for it (and logging).
        from concurrent.futures import ThreadPoolExecutor

        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=thread_count(), thread_name_prefix="stablerules")
    return _pool


def chunk_bounds(extent: int, work: int) -> list[tuple[int, int]]:
    """Ranges ``[lo, hi)`` covering ``[0, extent)``: one for small work, else one per thread."""
    if work < PARALLEL_THRESHOLD or extent < 2:
        return [(0, extent)]
    threads = thread_count()
    if threads == 1:
        return [(0, extent)]
    parts = min(threads, extent)
    step, extra = divmod(extent, parts)
    bounds = []
    lo = 0
    for part in range(parts):
        hi = lo + step + (1 if part < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def run_chunks(
    kernel: Callable[..., object],
    chunk_args: Sequence[tuple[object, ...]],
) -> None:
    """Call ``kernel(*args)`` for each argument tuple; in parallel when there is more than one.

    A chunk that no pool thread has started by the time the calling thread is done with its
    own runs in the calling thread: on a machine whose cores are busy (another process,
    PyTorch's OpenMP threads still spinning after their last op) waiting for the scheduler
    to give a pool thread a core costs more than running the chunk here."""
    if len(chunk_args) == 1:
        kernel(*chunk_args[0])
        return
    futures = _submit_all(_executor().submit, [(kernel, *args) for args in chunk_args[1:]])
    if futures is None:
        for args in chunk_args:
            kernel(*args)
        return
    kernel(*chunk_args[0])
    for future, args in zip(futures, chunk_args[1:]):
        if future.cancel():
            kernel(*args)
        else:
            future.result()


# A reduction into private accumulators takes this many chunks per thread, so that a thread
# left without a core (a busy machine) holds back at most a small part of the work.
CHUNKS_PER_THREAD = 2


def reduction_bounds(extent: int, work: int) -> list[tuple[int, int]]:
    """Ranges ``[lo, hi)`` covering ``[0, extent)`` for a reduction whose chunks each add into
    their own accumulator: one for small work, else ``CHUNKS_PER_THREAD`` per thread (at most
    ``extent``). They depend on ``extent``, ``work`` and the thread count only, never on which
    thread runs what, so the chunks' partial sums, added in chunk order, are the same bits
    every run."""
    if work < PARALLEL_THRESHOLD or extent < 2:
        return [(0, extent)]
    threads = thread_count()
    if threads == 1:
        return [(0, extent)]
    parts = min(threads * CHUNKS_PER_THREAD, extent)
    step, extra = divmod(extent, parts)
    bounds = []
    lo = 0
    for part in range(parts):
        hi = lo + step + (1 if part < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def run_shared(kernel: Callable[..., object], chunk_args: Sequence[tuple[object, ...]]) -> None:
    """Call ``kernel(*args)`` for each argument tuple, the calling thread and up to
    ``thread_count() - 1`` pool threads each taking the next chunk not yet taken, until none
    is left. Which thread runs a chunk varies from run to run; what a chunk computes must not
    depend on it (each writes its own output). A pool thread that has not started by the time
    the chunks are all taken is cancelled, not waited for."""
    count = len(chunk_args)
    if count == 1:
        kernel(*chunk_args[0])
        return
    tickets = itertools.count()  # next() on it is atomic under the GIL

    def take_chunks() -> None:
        for index in tickets:
            if index >= count:
                return
            kernel(*chunk_args[index])

    helpers = min(thread_count(), count) - 1
    futures = _submit_all(_executor().submit, [(take_chunks,)] * helpers)
    take_chunks()
    if futures is None:
        return
    for future in futures:
        if not future.cancel():
            future.result()


def run_partitioned(kernel: Callable[..., object], args: tuple[object, ...], extent: int, work: int) -> None:
    """``kernel(*args, lo, hi)`` over ``[0, extent)``, split across threads for large work."""
    run_chunks(kernel, [(*args, lo, hi) for lo, hi in chunk_bounds(extent, work)])
