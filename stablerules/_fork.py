"""``os.fork`` while another thread builds a kernel: the child inherits no half-done build.

A child made by ``os.fork`` has only the thread that forked. A lock another thread held at
that moment stays held in the child for ever, and the child's first call that needs it waits
for ever. Before this module, a ``multiprocessing`` pool or a torch ``DataLoader`` (fork start
method) started while another thread of the program built a kernel hung at its first call of
that op, on whichever lock that thread held: the signature's, the import lock of a module it
was importing (``numba``, one of our op families), llvmlite's around each LLVM call, Numba's
compiler lock (``tests/test_cache_faults.py``).

- **Before the fork** (as CPython does with its import lock): a work that takes such locks
  runs inside :func:`busy` (a kernel's build, an op family's first import); the fork waits
  until no other thread is inside one, and holds off new ones until it is done. So the child
  starts from a state where no build is half done. The wait is for the builds under way (a
  cold kernel: a few hundred milliseconds) and is bounded (:data:`WAIT`): a thread that does
  not come out in time (stuck, or waiting for a lock the forking thread holds) is not waited
  for longer, and the fork goes on.
- **Which handler runs first.** CPython runs the ``before`` handlers newest first. One that
  runs before ours and takes a lock a building thread needs makes the two wait for each
  other: ``logging``'s takes the logging lock, and a build's ``import numba`` imports
  ``logging`` (numba logs). So ours is registered (:func:`_register`) at the first work, and
  again just before Numba is first imported (``_cache._import_numba``), after ``logging``
  (:func:`before_numba`); only the newest registration acts. (``logging`` is not imported
  sooner: 4 ms that a process which only loads kernels from disk never needs. A fork whose
  wait sees another thread import it for the first time gets CPython's "Exception ignored
  ... cannot release un-acquired lock" from ``logging``'s handler, which was registered after
  the ``before`` handlers ran; nothing else comes of it.)
- **In the child**, every lock of ours is new (each module that owns one registers its
  renewal: :func:`renewed`), and what a thread that the fork did not wait for left is
  forgotten (``KernelCache.renew_after_fork``).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import time
from collections.abc import Callable, Iterator

WAIT = 10.0
"""The longest a fork waits for the work under way in other threads, in seconds."""

_RENEW: list[Callable[[], None]] = []
_busy: dict[int, int] = {}  # thread -> how deep inside busy() it is
_busy_lock = _thread.allocate_lock()
_held = [False]  # whether the fork under way holds _busy_lock
_generation = [0]  # the newest registration's number


def renewed(renew: Callable[[], None]) -> None:
    """Call ``renew`` in each forked child (in the order of registration): it puts new locks
    in place of the ones it owns."""
    _RENEW.append(renew)


@contextlib.contextmanager
def busy() -> Iterator[None]:
    """A work a fork waits for (see the module)."""
    me = _thread.get_ident()
    if not _generation[0]:
        _register()
    with _busy_lock:
        _busy[me] = _busy.get(me, 0) + 1
    try:
        yield
    finally:
        with _busy_lock:
            depth = _busy.pop(me) - 1
            if depth:
                _busy[me] = depth


def _before(generation: int) -> None:
    if generation != _generation[0]:
        return  # an older registration: the newest acts
    me = _thread.get_ident()
    deadline = time.monotonic() + WAIT
    while _busy_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
        if all(thread == me for thread in _busy):
            _held[0] = True
            return
        _busy_lock.release()
        if time.monotonic() >= deadline:
            return
        time.sleep(0.001)


def _after_in_parent(generation: int) -> None:
    if generation == _generation[0] and _held[0]:
        _held[0] = False
        _busy_lock.release()


def _renew() -> None:
    """In every forked child (registered at import, so before any fork's other handlers of
    ours): new locks, and the work of threads the child does not have forgotten."""
    global _busy_lock
    me = _thread.get_ident()
    _held[0] = False
    _busy_lock = _thread.allocate_lock()
    for thread in [thread for thread in _busy if thread != me]:
        del _busy[thread]
    for renew in _RENEW:
        renew()


def _register() -> None:
    """(Again) register the fork handlers; only the newest registration's act."""
    if not hasattr(os, "register_at_fork"):
        return
    _generation[0] += 1
    generation = _generation[0]
    os.register_at_fork(before=lambda: _before(generation), after_in_parent=lambda: _after_in_parent(generation))


_registered_after_logging = [False]


def before_numba() -> None:
    """Numba is about to be imported: import ``logging`` first (Numba imports it) and register
    once more, so that ours runs before its handler (see the module)."""
    if not _registered_after_logging[0]:
        import logging  # noqa: F401, PLC0415 - Numba's own import, a moment early

        _registered_after_logging[0] = True
        _register()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew)
