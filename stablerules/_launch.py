"""Launching and the steady-state check: the guards, the counters, the kernel launchers.

Everything that makes "no dynamic fallback" provable lives here:

- the guards ``no_compile()`` and ``no_fallback()`` (per context: a thread or an asyncio
  task) and ``count_launches()``; ``OPEN_GUARDS[0]`` counts the blocks open in any context,
  so a hot path tests one list entry before anything else, and
  :func:`steady_state_checked` says whether this context is inside a guard;
- the counters of what leaves the specialized path (:data:`COUNTERS`: dynamic static
  arguments and fallbacks, shown by ``cache_info()``);
- the launchers every kernel runs through (:func:`cpu_launcher`, :func:`cpu_launch`,
  :func:`cuda_launch`, :func:`cuda_launch_blocks`, :func:`empty_launch`), which count
  launches per kernel signature (:func:`kernel_launches`) and per context
  (:func:`context_launches`) while a guard is open, and cost no counting otherwise;
- :func:`count_unlaunched`: an entry that should have launched a kernel and did not is a
  fallback.

The compile counters (compiles, hits, seconds) stay on the kernel cache, which this module
does not import: the cache asks it whether ``no_compile()`` is open. ``import stablerules``
imports this module, so it loads threads (``_parallel``) and CUDA (``_cuda``) only when a
launch needs them.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import _thread
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ._errors import DynamicFallbackError, RecompileError

if TYPE_CHECKING:
    from ._arrays import ArrayLike
    from ._cache import Kernel, ShapeSignature

# ---------------------------------------------------------------------------------------------
# Guards
# ---------------------------------------------------------------------------------------------

# The guards hold per context (a thread, or an asyncio task): a guard entered in one thread
# neither fires on nor hides another thread's compile. ``OPEN_GUARDS[0]`` counts the guards (and
# ``count_launches()`` blocks) open in any context, so hot paths test one list entry before
# they look up their context's guards or count kernel launches.
NO_COMPILE: contextvars.ContextVar[int] = contextvars.ContextVar("stablerules_no_compile", default=0)
NO_FALLBACK: contextvars.ContextVar[int] = contextvars.ContextVar("stablerules_no_fallback", default=0)
OPEN_GUARDS = [0]
_GUARDS_LOCK = _thread.allocate_lock()


def steady_state_checked() -> bool:
    """Whether this context is inside ``no_compile()`` or ``no_fallback()``."""
    return bool(NO_COMPILE.get() or NO_FALLBACK.get())


# Code generation in a guarded block: every ``compile`` of source and every ``exec`` of code
# that comes from no file (a generated launcher, an ``exec`` of a string, a ``namedtuple``
# made per call) is seen through Python's audit hooks, so ``no_compile()`` refuses a call path
# that generates code, not only a Numba compile. The hook is added the first time a
# ``no_compile()`` block opens (a hook cannot be removed; it returns at once while no guard is
# open anywhere). Imports are not code generation: their code comes from files (or frozen
# modules). The call-path templates' one compile per text and process
# (``_codegen.template_function``) goes through ``allow_template_compile``.
_TEMPLATE_COMPILE: contextvars.ContextVar[int] = contextvars.ContextVar("stablerules_template_compile", default=0)
_AUDIT_HOOK: list[bool] = [False]


def _generated(filename: object) -> bool:
    """Whether code of this file name was generated (not read from a file or frozen module)."""
    if isinstance(filename, bytes):
        filename = filename.decode(errors="replace")
    if not isinstance(filename, str):
        return not isinstance(filename, os.PathLike)
    return filename.startswith("<") and not filename.startswith("<frozen ")


def _audit(event: str, args: tuple[object, ...]) -> None:
    if not OPEN_GUARDS[0]:
        return
    if event == "compile":
        filename = args[1] if len(args) > 1 else None
    elif event == "exec":
        filename = getattr(args[0], "co_filename", None) if args else None
    else:
        return
    if NO_COMPILE.get() and not _TEMPLATE_COMPILE.get() and _generated(filename):
        raise RecompileError(
            f"stablerules: no_compile() is active but code was generated ({event} of {filename}): "
            f"a steady call path must reuse what its signature built once"
        )


@contextlib.contextmanager
def allow_template_compile() -> Iterator[None]:
    """Let the call-path templates' one compile per text through ``no_compile()``."""
    token = _TEMPLATE_COMPILE.set(1)
    try:
        yield
    finally:
        _TEMPLATE_COMPILE.reset(token)


def _watch_code_generation() -> None:
    if not _AUDIT_HOOK[0]:
        with _GUARDS_LOCK:
            if not _AUDIT_HOOK[0]:
                sys.addaudithook(_audit)
                _AUDIT_HOOK[0] = True


@contextlib.contextmanager
def _guard(depth: contextvars.ContextVar[int]) -> Iterator[None]:
    if depth is NO_COMPILE:
        _watch_code_generation()
    token = depth.set(depth.get() + 1)
    with _GUARDS_LOCK:
        OPEN_GUARDS[0] += 1
    try:
        yield
    finally:
        with _GUARDS_LOCK:
            OPEN_GUARDS[0] -= 1
        depth.reset(token)


_COUNTING: contextvars.ContextVar[int] = contextvars.ContextVar("stablerules_count_launches", default=0)


def count_launches() -> contextlib.AbstractContextManager[None]:
    """Count kernel launches (:func:`kernel_launches`) in the block, as inside the guards,
    without refusing anything."""
    return _guard(_COUNTING)


def no_compile() -> contextlib.AbstractContextManager[None]:
    """Raise ``RecompileError`` if any code is generated in the block: a kernel compiled or
    loaded from disk, or Python source compiled or generated code executed (``compile``,
    ``exec`` or ``eval`` of a string, a launcher built from source), seen through Python's
    audit hooks. Imports are not code generation. In this thread or context; other threads
    are not affected."""
    return _guard(NO_COMPILE)


def no_fallback() -> contextlib.AbstractContextManager[None]:
    """Raise ``DynamicFallbackError`` if a call in the block takes any path other than its
    signature's specialized implementation, or gets a non-``Val`` static argument (in this
    thread or context; other threads are not affected)."""
    return _guard(NO_FALLBACK)


# ---------------------------------------------------------------------------------------------
# Counters of what leaves the specialized path
# ---------------------------------------------------------------------------------------------


class Counters:
    """Dynamic static arguments (a plain ``int`` or tuple where a ``Val`` goes) and fallbacks
    (an entry that ran no compiled kernel of its signature), counted in every context; inside
    ``no_fallback()`` either is a ``DynamicFallbackError``. ``cache_info()`` shows them."""

    __slots__ = ("dynamic_arguments", "fallbacks")

    def __init__(self) -> None:
        self.dynamic_arguments = 0
        self.fallbacks = 0

    def note_dynamic_argument(self, name: str, value: object) -> None:
        self.dynamic_arguments += 1
        if NO_FALLBACK.get():
            raise DynamicFallbackError(
                f"stablerules: argument {name!r} was given as a plain {type(value).__name__} "
                f"({value!r}); inside no_fallback() static arguments must be Val(...)"
            )

    def note_fallback(self, reason: str) -> None:
        self.fallbacks += 1
        if NO_FALLBACK.get():
            raise DynamicFallbackError(f"stablerules: fallback path taken: {reason}")


COUNTERS = Counters()


# ---------------------------------------------------------------------------------------------
# Kernel launches: counted per kernel signature (process-wide) and per context, while a guard
# or count_launches() is open (in any thread): outside them a launch costs no counting at all
# ---------------------------------------------------------------------------------------------

_LAUNCHES: list[int] = []
_SLOTS: dict[ShapeSignature, int] = {}
# Launches seen by this context while a guard was open anywhere: [count]. A pool thread that
# runs a chunk does not count; the launching thread counted the launch before splitting it.
_CONTEXT_LAUNCHES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "stablerules_launches", default=None
)
_SLOTS_LOCK = _thread.allocate_lock()


def _slot(signature: ShapeSignature) -> int:
    slot = _SLOTS.get(signature)
    if slot is None:
        with _SLOTS_LOCK:
            slot = _SLOTS.setdefault(signature, len(_SLOTS))
            while len(_LAUNCHES) <= slot:
                _LAUNCHES.append(0)
    return slot


def kernel_launches(
    signature: ShapeSignature | None = None, *, op: str | None = None, kind: str | None = None, device: str | None = None
) -> int:
    """Launches counted by the launchers below in this process (while a guard or
    ``count_launches()`` was open): of the kernel of ``signature``, or of every kernel whose
    op, kind (a prefix: ``"forward"`` takes in ``"forward-counts"``) and device match those
    given. What tests assert to show that a rule ran its kernel."""
    if signature is not None:
        slot = _SLOTS.get(signature)
        return 0 if slot is None else _LAUNCHES[slot]
    return sum(
        _LAUNCHES[slot]
        for known, slot in list(_SLOTS.items())
        if (op is None or known.op == op)
        and (kind is None or known.kind.startswith(kind))
        and (device is None or known.device == device)
    )


def _note_launch() -> None:
    record = _CONTEXT_LAUNCHES.get()
    if record is None:
        record = [0]
        _CONTEXT_LAUNCHES.set(record)
    record[0] += 1


def context_launches() -> int:
    """Launches counted in this context while a guard was open (the steady-state check)."""
    record = _CONTEXT_LAUNCHES.get()
    return 0 if record is None else record[0]


# A launcher is generated per arity (a fixed parameter list calls faster than *args).
# The split path is a call, not a comprehension in the launcher: a comprehension would make
# the arrays cell variables, which slows every call (the common one-call path too).
_LAUNCHER_TEMPLATE = """
def launch({arrays}):
    if open_guards[0]:
        launches[slot] += 1
        note()
    if work < parallel.PARALLEL_THRESHOLD:
        entry({arrays}, {trailing}0, extent)
    else:
        {split}
"""
_SPLIT = "parallel.run_partitioned(entry, ({arrays}, {trailing}), extent, work)"
_PRIVATE_SPLIT = "run_private(entry, ({shared}), ({owned}, ), ({trailing}), extent, work)"


def _run_private(
    entry: Callable[..., object],
    shared: tuple[object, ...],
    owned: tuple[ArrayLike, ...],
    trailing: tuple[object, ...],
    extent: int,
    work: int,
) -> None:
    """A private-accumulator launch split across threads: a few chunks per thread
    (``_parallel.reduction_bounds``), taken by whichever thread is free; every chunk after the
    first gets zeroed copies of ``owned``, added into ``owned`` in chunk order at the end (so
    the result's bits do not depend on which thread ran which chunk)."""
    from . import _parallel  # noqa: PLC0415 - threads load on the first split launch

    bounds = _parallel.reduction_bounds(extent, work)
    parts = [owned] + [tuple(np.zeros_like(array) for array in owned) for _ in bounds[1:]]
    _parallel.run_shared(entry, [(*shared, *part, *trailing, lo, hi) for part, (lo, hi) in zip(parts, bounds)])
    for part in parts[1:]:
        for total, partial in zip(owned, part):
            np.add(total, partial, out=total)


def cpu_launcher(
    kernel: Kernel,
    arrays: int,
    trailing: Sequence[object] = (),
    *,
    extent: int,
    work: int,
    private: int = 0,
) -> Callable[..., None]:
    """``launch(*arrays)`` runs ``kernel(*arrays, *trailing, lo, hi)`` over ``[lo, hi) =
    [0, extent)`` of its partition loop: in one call below ``_parallel.PARALLEL_THRESHOLD``
    elements of ``work`` (read at each call), else split across threads (``_parallel``).
    ``extent < 2`` never splits. The last ``private`` arrays are accumulators that the chunks
    must not share: the range is cut into a few chunks per thread, taken by whichever thread
    is free, and every chunk after the first gets zeroed copies, added in chunk order at the
    end (see ``_run_private``).

    The launcher is bound from code compiled once per template text (its arities), so building
    one generates no code after the first of its shape in the process.

    Each launch counts once (``kernel_launches``), in the launching thread. The kernel's
    compiled entry point is called directly, so the arrays must be C-contiguous.
    """
    from . import _parallel  # noqa: PLC0415 - see the module docstring
    from ._codegen import template_function  # noqa: PLC0415 - _codegen imports this module

    names = [f"array{index}" for index in range(arrays)]
    trailing_names = [f"value{index}" for index in range(len(trailing))]
    namespace: dict[str, object] = dict(zip(trailing_names, trailing))
    namespace.update(
        launches=_LAUNCHES,
        slot=_slot(kernel.signature),
        open_guards=OPEN_GUARDS,
        note=_note_launch,
        parallel=_parallel,
        entry=kernel.entry,
        extent=extent,
        work=work if extent >= 2 else -1,
        run_private=_run_private,
    )
    fields = {
        "arrays": ", ".join(names),
        "trailing": "".join(f"{name}, " for name in trailing_names),
        "owned": ", ".join(names[arrays - private :]),
        "shared": "".join(f"{name}, " for name in names[: arrays - private]),
    }
    split = (_PRIVATE_SPLIT if private else _SPLIT).format(**fields)
    text = _LAUNCHER_TEMPLATE.format(split=split, **fields)
    launch: Callable[..., None] = template_function(text, "launch", "<stablerules launcher>", namespace)  # type: ignore[assignment]
    return launch


def cpu_launch(kernel: Kernel, *args: object, extent: int, work: int) -> None:
    """One launch with per-call arguments (data-dependent offsets, say): ``kernel(*args, lo,
    hi)`` over ``[0, extent)``, split as :func:`cpu_launcher` splits. Counted."""
    if OPEN_GUARDS[0]:
        _LAUNCHES[_slot(kernel.signature)] += 1
        _note_launch()
    from . import _parallel  # noqa: PLC0415 - see the module docstring

    _parallel.run_partitioned(kernel.entry, args, extent, work if extent >= 2 else -1)


def empty_launch() -> None:
    """Say that an entry's work is empty for this call's data (a CUDA grid of no threads): it
    took its signature's own path though no kernel had anything to do."""
    if OPEN_GUARDS[0]:
        _note_launch()


def cuda_launch(kernel: Kernel, total: int, *args: object, work: int = 1) -> None:
    """``_cuda.launch`` (a grid-stride kernel over ``total`` items), counted."""
    if OPEN_GUARDS[0]:
        _LAUNCHES[_slot(kernel.signature)] += 1
        _note_launch()
    from . import _cuda  # noqa: PLC0415 - only a CUDA launch needs it

    _cuda.launch(kernel, total, *args, work=work)


def cuda_launch_blocks(kernel: Kernel, units: int, threads: int, *args: object) -> None:
    """``_cuda.launch_blocks`` (a block-stride kernel over ``units``), counted."""
    if OPEN_GUARDS[0]:
        _LAUNCHES[_slot(kernel.signature)] += 1
        _note_launch()
    from . import _cuda  # noqa: PLC0415 - only a CUDA launch needs it

    _cuda.launch_blocks(kernel, units, threads, *args)




def count_unlaunched(op: str, rule_part: str, before: int) -> None:
    """The steady-state check: a rule part (``"forward"``, ``"pullback"``, ``"pushforward"``)
    that should have run a kernel and did not (no launch
    in this context since ``before = context_launches()``) is a fallback."""
    if context_launches() == before:
        COUNTERS.note_fallback(f"{op} {rule_part}: no compiled kernel of its signature ran")
