"""The kernel launchers and the steady-state check of a launch.

- the launchers every kernel runs through (:func:`cpu_launcher`, :func:`cpu_launch`,
  :func:`cuda_launch`, :func:`cuda_launch_blocks`, :func:`empty_launch`), which count
  launches per kernel signature (:func:`kernel_launches`) and per context
  (:func:`context_launches`) while a guard (``_guards``) is open, and cost no counting
  otherwise;
- :func:`count_unlaunched`: an entry that should have launched a kernel and did not is a
  fallback.

The guards and the counters of what leaves the specialized path live below, in ``_guards``;
the compile counters (compiles, hits, seconds) on the kernel cache. ``import stablerules``
imports this module, so it loads threads (``_parallel``) and CUDA (``_cuda``) only when a
launch needs them.
"""

from __future__ import annotations

import contextvars
import _thread
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ._codegen import template_function
from ._guards import COUNTERS, OPEN_GUARDS
from ._key import Kernel, ShapeSignature

if TYPE_CHECKING:
    from ._arrays import ArrayLike

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
