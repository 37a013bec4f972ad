"""Median timing with warmup and adaptive repeat counts, on ``time.perf_counter_ns``.

A measurement is ``samples`` timed samples of ``loops`` back-to-back calls each; the reported
time is the median (and minimum) of the per-call times. ``loops`` grows until one sample is
long enough that the timer's own cost is negligible; ``samples`` is then as many as fit the
budget, clamped to ``[min_samples, max_samples]`` (so a slow call still gets ``min_samples``).
The garbage collector is off while timing, as in ``timeit``.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """How long one measurement may take and how many samples it needs."""

    seconds: float
    min_samples: int
    max_samples: int
    warmup: int
    sample_seconds: float

    @classmethod
    def for_mode(cls, mode: str) -> Budget:
        """``"full"``, ``"quick"`` or ``"tiny"`` (the test's mode)."""
        if mode == "full":
            return cls(seconds=1.0, min_samples=7, max_samples=2000, warmup=3, sample_seconds=2e-4)
        if mode == "quick":
            return cls(seconds=0.15, min_samples=5, max_samples=500, warmup=2, sample_seconds=1e-4)
        if mode == "tiny":
            return cls(seconds=0.01, min_samples=3, max_samples=50, warmup=1, sample_seconds=2e-5)
        raise ValueError(f"unknown timing mode {mode!r}: expected 'full', 'quick' or 'tiny'")


@dataclass(frozen=True)
class Timing:
    """Per-call times of one measurement, in seconds."""

    median_s: float
    min_s: float
    p25_s: float
    p75_s: float
    samples: int
    loops: int


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _sample_ns(fn: Callable[[], object], loops: int) -> int:
    clock = time.perf_counter_ns
    started = clock()
    for _ in range(loops):
        fn()
    return clock() - started


def measure(fn: Callable[[], object], budget: Budget) -> Timing:
    """Time ``fn()``: warm up, pick ``loops`` and ``samples`` adaptively, return medians."""
    for _ in range(max(budget.warmup, 1)):
        fn()
    target_ns = budget.sample_seconds * 1e9
    with gc_paused():
        loops = 1
        elapsed = _sample_ns(fn, loops)
        # Grow the loop count (at most x10 per step) until one sample reaches the target.
        while elapsed < target_ns and loops < 1_000_000:
            grow = 10 if elapsed <= 0 else min(10, max(2, math.ceil(target_ns / elapsed)))
            loops *= grow
            elapsed = _sample_ns(fn, loops)
        per_sample_s = elapsed / 1e9
        wanted = int(budget.seconds / per_sample_s) if per_sample_s > 0 else budget.max_samples
        samples = min(max(wanted, budget.min_samples), budget.max_samples)
        per_call = [_sample_ns(fn, loops) / loops / 1e9 for _ in range(samples)]
    quartiles = statistics.quantiles(per_call, n=4) if len(per_call) >= 2 else per_call * 3
    return Timing(
        median_s=statistics.median(per_call),
        min_s=min(per_call),
        p25_s=quartiles[0],
        p75_s=quartiles[2],
        samples=samples,
        loops=loops,
    )


def time_once(fn: Callable[[], object]) -> float:
    """Seconds taken by one call of ``fn`` (a first call: compile, load, trace)."""
    started = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - started) / 1e9


def format_seconds(seconds: float | None) -> str:
    """``0.52 us``, ``12.1 ms``, ``1.20 s``: three significant digits, a readable unit."""
    if seconds is None or math.isnan(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{seconds:.3g} s"  # pragma: no cover - the loop always returns


def table(headers: list[str], rows: list[list[str]], max_cell: int | None = 60) -> str:
    """A plain-text table: left-aligned columns, long cells cut at ``max_cell`` characters
    (``None``: never cut)."""
    cut = [
        [cell if max_cell is None or len(cell) <= max_cell else cell[: max_cell - 3] + "..." for cell in row]
        for row in rows
    ]
    widths = [max([len(headers[i])] + [len(row[i]) for row in cut if i < len(row)]) for i in range(len(headers))]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * width for width in widths))
    for row in cut:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return "\n".join(lines)
