"""Split a ``nogil`` kernel over disjoint ranges of its partition loop, on a small pool.

``parallel=True`` in Numba costs 1.5-2 s of compile per kernel (measured on the target
machine), which breaks the cold-compile goal; serial ``nogil`` kernels that take a
``[lo, hi)`` range of their outermost owned loop, run from a thread pool, cost nothing to
compile and give the same scaling on memory-bound work.

The pool is ours, not ``concurrent.futures``: each pool thread waits on a lock of its own
and takes one job at a time. A split launch pays two hand-offs between threads (the pool
thread woken, then the caller woken when it is done); on a VM each costs tens of
microseconds (an idle virtual CPU woken by an interrupt). Measured on a 2-core Xeon VM
(``bench/README.md``, round 15), ``ThreadPoolExecutor.submit`` took 27-32 us inside a launch
and the caller resumed 37-76 us after the pool thread's chunk ended: a 270,000-element
pullback took 150 us split against 86 us in one call. So:

- a hand-off is a lock released, not a future, a queue and a semaphore;
- the calling thread's chunk is larger by ``HANDOFF_WORK`` elements per other thread, the
  work it does while a pool thread wakes and while it waits for it at the end (the ranges
  still depend on the extent, the work and the thread count only);
- a launch splits from ``PARALLEL_THRESHOLD`` elements of work (``_config``), where the
  split pays for its hand-offs.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence

from . import _config

# Below this many elements of work a split costs more than it saves.
PARALLEL_THRESHOLD = _config.parallel_threshold()
# Elements of work the calling thread does in the time a pool thread takes to start its
# chunk and to hand it back (measured: see the module docstring).
HANDOFF_WORK = 3 << 16


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


class _Job:
    """One call ``function(*args)``, run by whichever thread takes it first: the pool thread
    it was handed to, or the caller, when it finds the job not yet started after its own part
    (a pool thread left without a core, on a busy machine, then holds nothing back)."""

    __slots__ = ("function", "args", "taken", "done", "error")

    def __init__(self, function: Callable[..., object], args: tuple[object, ...]) -> None:
        self.function = function
        self.args = args
        self.taken = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()
        self.error: BaseException | None = None

    def run(self) -> bool:
        """Run the job unless another thread has taken it; whether this thread ran it."""
        if not self.taken.acquire(blocking=False):
            return False
        try:
            self.function(*self.args)
        except BaseException as error:  # handed to the caller, which raises it
            self.error = error
        finally:
            self.done.release()
        return True

    def finish(self) -> None:
        """Run the job here if no pool thread has started it, else wait until it is done."""
        if not self.run():
            self.done.acquire()


class _Worker:
    """A pool thread. ``busy`` is held from the moment a caller claims it (a non-blocking
    acquire: a caller never waits for a pool thread to be free) until the thread has finished
    with the job; ``wake`` is held while it has none."""

    __slots__ = ("busy", "wake", "job")

    def __init__(self, index: int) -> None:
        self.busy = threading.Lock()
        self.busy.acquire()  # claimed by the caller that starts it
        self.wake = threading.Lock()
        self.wake.acquire()
        self.job: _Job | None = None
        threading.Thread(target=self._serve, name=f"stablerules-{index}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self.wake.acquire()
            job, self.job = self.job, None
            try:
                if job is not None:
                    job.run()
            finally:
                self.busy.release()


_workers: list[_Worker] = []
_workers_lock = threading.Lock()


def _forget_workers() -> None:
    """In a forked child the pool threads do not exist (and their locks may be held)."""
    global _workers, _workers_lock
    _workers = []
    _workers_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def _claim(limit: int) -> _Worker | None:
    """A free pool thread among the first ``limit``, claimed; ``None`` when all are busy (or
    a new one cannot be started: the caller then runs the job itself). Never blocks: a
    garbage collection here may run a ``__del__`` that calls an op, which claims as this call
    does (a blocking wait could be on this very thread)."""
    for worker in _workers[:limit]:
        if worker.busy.acquire(blocking=False):
            return worker
    if len(_workers) < limit and _workers_lock.acquire(blocking=False):
        try:
            if len(_workers) < limit:
                try:
                    worker = _Worker(len(_workers))
                except RuntimeError:  # no new thread now (interpreter shutdown, a thread limit)
                    return None
                _workers.append(worker)
                return worker
        finally:
            _workers_lock.release()
    return None


def _start(function: Callable[..., object], calls: Sequence[tuple[object, ...]]) -> list[_Job]:
    """A job per argument tuple, each handed to a free pool thread (at most
    ``thread_count() - 1`` of them); a job that finds none is left for the caller."""
    limit = thread_count() - 1
    jobs = []
    for args in calls:
        job = _Job(function, args)
        worker = _claim(limit)
        if worker is not None:
            worker.job = job
            worker.wake.release()
        jobs.append(job)
    return jobs


def _finish(jobs: Sequence[_Job]) -> None:
    """Each job run here or waited for; then the first error any of them raised."""
    for job in jobs:
        job.finish()
    for job in jobs:
        if job.error is not None:
            raise job.error


def chunk_bounds(extent: int, work: int) -> list[tuple[int, int]]:
    """Ranges ``[lo, hi)`` covering ``[0, extent)``: one for small work, else one per thread,
    the first (the calling thread's) larger by ``HANDOFF_WORK`` elements of work per other
    range. Each range keeps at least one index."""
    if work < PARALLEL_THRESHOLD or extent < 2:
        return [(0, extent)]
    threads = thread_count()
    if threads == 1:
        return [(0, extent)]
    parts = min(threads, extent)
    others = parts - 1
    # The first range: an even share plus the hand-offs' work, in indices of the extent.
    first = (2 * extent * (work + others * HANDOFF_WORK) + parts * work) // (2 * parts * work)  # rounded
    first = max(1, min(first, extent - others))
    step, extra = divmod(extent - first, others)
    bounds = [(0, first)]
    lo = first
    for part in range(others):
        hi = lo + step + (1 if part < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def run_chunks(
    kernel: Callable[..., object],
    chunk_args: Sequence[tuple[object, ...]],
) -> None:
    """Call ``kernel(*args)`` for each argument tuple; in parallel when there is more than one:
    the first in the calling thread, the others on pool threads.

    A chunk that no pool thread has started by the time the calling thread is done with its
    own runs in the calling thread: on a machine whose cores are busy (another process,
    PyTorch's OpenMP threads still spinning after their last op) waiting for the scheduler
    to give a pool thread a core costs more than running the chunk here. So does a chunk for
    which every pool thread was busy (another thread's launch)."""
    if len(chunk_args) == 1:
        kernel(*chunk_args[0])
        return
    jobs = _start(kernel, chunk_args[1:])
    try:
        kernel(*chunk_args[0])
    finally:
        _finish(jobs)


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
    the chunks are all taken is not waited for."""
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

    jobs = _start(take_chunks, [()] * (min(thread_count(), count) - 1))
    try:
        take_chunks()
    finally:
        _finish(jobs)


def run_partitioned(kernel: Callable[..., object], args: tuple[object, ...], extent: int, work: int) -> None:
    """``kernel(*args, lo, hi)`` over ``[0, extent)``, split across threads for large work."""
    run_chunks(kernel, [(*args, lo, hi) for lo, hi in chunk_bounds(extent, work)])
