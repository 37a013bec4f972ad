"""Rows for the engine adapters (``stablerules.jax``, ``stablerules.autograd``): our op through
the adapter against the engine's own composition of the same op, in one process.

Each row is timed round-robin (ours, then the engine's, ``rounds`` times) with
``timing.measure``; a row reports the median of the rounds for each side and their ratio
(``engine / ours``: above 1, ours is faster), next to the goal from issue 17. Gradients are
checked equal before anything is timed.
"""

from __future__ import annotations

import statistics
from importlib import import_module
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from timing import Budget, format_seconds, measure, table


@dataclass(frozen=True)
class EngineCase:
    """One comparison: ``ours`` and ``native`` each run the measured step once (blocking)."""

    engine: str
    name: str
    ours: Callable[[], object]
    native: Callable[[], object]
    goal: float | None = None
    higher_is_ours: bool = True  # False: a ceiling on ours / native (an overhead row)


@dataclass(frozen=True)
class EngineRow:
    engine: str
    name: str
    ours_s: float
    native_s: float
    ratio: float  # native / ours
    goal: float | None
    passed: bool | None
    higher_is_ours: bool


def run_cases(cases: Sequence[EngineCase], budget: Budget, rounds: int = 3) -> list[EngineRow]:
    rows = []
    for case in cases:
        ours, native = [], []
        for _ in range(rounds):
            ours.append(measure(case.ours, budget).median_s)
            native.append(measure(case.native, budget).median_s)
        ours_s, native_s = statistics.median(ours), statistics.median(native)
        ratio = native_s / ours_s
        passed = None
        if case.goal is not None:
            passed = ratio >= case.goal if case.higher_is_ours else ours_s / native_s <= case.goal
        rows.append(EngineRow(case.engine, case.name, ours_s, native_s, ratio, case.goal, passed, case.higher_is_ours))
    return rows


def render(rows: Sequence[EngineRow]) -> str:
    body = []
    for row in rows:
        if row.goal is None:
            goal = "-"
        elif row.higher_is_ours:
            goal = f">= {row.goal:g}x"
        else:
            goal = f"ours/native <= {row.goal:g}"
        verdict = "-" if row.passed is None else ("pass" if row.passed else "FAIL")
        body.append(
            [row.engine, row.name, format_seconds(row.ours_s), format_seconds(row.native_s), f"{row.ratio:.2f}x", goal, verdict]
        )
    return table(["engine", "case", "ours", "native", "native/ours", "goal", ""], body, max_cell=70)


def engine_report(budget: Budget) -> str:
    """The rows of ``engines_jax`` and ``engines_autograd`` as a table (an engine that is
    not installed is named, not timed)."""
    cases: list[EngineCase] = []
    missing = []
    for module_name in ("engines_jax", "engines_autograd"):
        try:
            module = import_module(module_name)
        except ImportError as error:
            missing.append(f"{module_name}: {error}")
            continue
        cases.extend(module.cases())
    text = render(run_cases(cases, budget))
    return text + "".join(f"\nnot run: {line}" for line in missing)
