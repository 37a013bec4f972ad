"""Per-call cost of every op on small arrays: what one step of a user's loop pays.

For each of the 18 ops, in one process and steady state (every signature warm):

- ``forward``: the op's forward alone, ``sr.<op>(...)``;
- ``rrule``: ``sr.rrule(op, ...)`` (forward and pullback closure);
- ``rrule+back``: ``y, back = sr.rrule(...); back(dy)``;
- ``pullback+back``: ``sr.pullback(op, ...)(dy)`` (the builder, no forward);
- ``numpy``: NumPy's forward + a reference pullback written in NumPy (what the same step
  costs without a rule library).

Goal: every op's ``rrule`` at most ``2 * forward + 2 us``. Medians (``timing.py``).

``python bench/percall.py [--quick] [--json PATH]``; ``bench/run.py`` runs it as its per-call
section (``run_percall``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stablerules as sr  # noqa: E402
from stablerules import Val  # noqa: E402
from timing import Budget, measure  # noqa: E402

GOAL_FACTOR = 2.0
GOAL_SLACK_S = 2e-6


@dataclass(frozen=True)
class Case:
    """One op's small call: ``op(*args, **kwargs)``, a cotangent maker and NumPy's step."""

    name: str
    op: Callable[..., object]
    args: tuple[object, ...]
    kwargs: dict[str, object]
    numpy_step: Callable[[object], object]  # dy -> NumPy forward + reference pullback


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape)


def cases() -> list[Case]:
    x = _rand(4, 5)
    a, b = _rand(4, 5), _rand(4, 3)
    c = _rand(4, 5)
    k1, k2 = _rand(8, 8), _rand(8, 8)
    cube = _rand(3, 4, 5)
    row = _rand(1, 5)

    def step(forward: Callable[[], object], pullback: Callable[[Any], object]) -> Callable[[object], object]:
        def run(dy: object) -> object:
            forward()
            return pullback(dy)

        return run

    return [
        Case("repeat", sr.repeat, (x, Val(3)), {"axis": Val(1)},
             step(lambda: np.repeat(x, 3, 1), lambda dy: dy.reshape(4, 5, 3).sum(2))),
        Case("tile", sr.tile, (x, Val((2, 3))), {},
             step(lambda: np.tile(x, (2, 3)), lambda dy: dy.reshape(2, 4, 3, 5).sum((0, 2)))),
        Case("concatenate", sr.concatenate, ((a, b),), {"axis": Val(1)},
             step(lambda: np.concatenate((a, b), 1), lambda dy: (dy[:, :5], dy[:, 5:]))),
        Case("cat", sr.cat, (a, b), {"dims": Val(1)},
             step(lambda: np.concatenate((a, b), 1), lambda dy: (dy[:, :5], dy[:, 5:]))),
        Case("hstack", sr.hstack, ((a, b),), {},
             step(lambda: np.hstack((a, b)), lambda dy: (dy[:, :5], dy[:, 5:]))),
        Case("vstack", sr.vstack, ((a, c),), {},
             step(lambda: np.vstack((a, c)), lambda dy: (dy[:4], dy[4:]))),
        Case("stack", sr.stack, ((a, c),), {"axis": Val(0)},
             step(lambda: np.stack((a, c)), lambda dy: (dy[0], dy[1]))),
        Case("split", sr.split, (x, Val(2)), {"axis": Val(0)},
             step(lambda: np.split(x, 2, 0), lambda dy: np.concatenate(dy))),
        Case("pad", sr.pad, (x, Val((1, 2, 0, 3))), {},
             step(lambda: np.pad(x, ((1, 2), (0, 3))), lambda dy: dy[1:5, 0:5].copy())),
        Case("permute_dims", sr.permute_dims, (cube, Val((2, 0, 1))), {},
             step(lambda: np.permute_dims(cube, (2, 0, 1)), lambda dy: np.permute_dims(dy, (1, 2, 0)))),
        Case("transpose", sr.transpose, (x,), {},
             step(lambda: np.transpose(x), lambda dy: np.transpose(dy))),
        Case("reshape", sr.reshape, (x, Val((5, 4))), {},
             step(lambda: np.reshape(x, (5, 4)), lambda dy: np.reshape(dy, (4, 5)))),
        Case("flip", sr.flip, (x, Val(1)), {},
             step(lambda: np.flip(x, 1), lambda dy: np.flip(dy, 1).copy())),
        Case("roll", sr.roll, (x, Val(2)), {"axis": Val(1)},
             step(lambda: np.roll(x, 2, 1), lambda dy: np.roll(dy, -2, 1))),
        Case("sum", sr.sum, (cube, Val(1)), {},
             step(lambda: np.sum(cube, 1), lambda dy: np.broadcast_to(dy[:, None, :], cube.shape).copy())),
        Case("mean", sr.mean, (cube, Val(1)), {},
             step(lambda: np.mean(cube, 1), lambda dy: np.broadcast_to(dy[:, None, :] / 4, cube.shape).copy())),
        Case("broadcast_to", sr.broadcast_to, (row, Val((4, 5))), {},
             step(lambda: np.broadcast_to(row, (4, 5)), lambda dy: dy.sum(0, keepdims=True))),
        Case("kron", sr.kron, (k1, k2), {},
             step(lambda: np.kron(k1, k2),
                  lambda dy: (np.einsum("ikjl,kl->ij", dy.reshape(8, 8, 8, 8), k2),
                              np.einsum("ikjl,ij->kl", dy.reshape(8, 8, 8, 8), k1)))),
    ]


@dataclass(frozen=True)
class PerCallRow:
    """Medians in seconds, and the goal's verdict."""

    op: str
    forward_s: float
    rrule_s: float
    rrule_back_s: float
    pullback_back_s: float
    numpy_s: float
    goal_s: float
    passed: bool


def _cotangent(y: object) -> object:
    if isinstance(y, (tuple, list)):
        return tuple(np.ones_like(part) for part in y)
    return np.ones_like(y)


def measure_case(case: Case, budget: Budget) -> PerCallRow:
    op, args, kwargs = case.op, case.args, case.kwargs
    # Untyped names: the op is chosen at run time, and mypy would otherwise try each of the
    # rules' thousands of overloads on every call below (local names time no attribute lookup).
    rrule: Callable[..., Any] = sr.rrule
    pullback: Callable[..., Any] = sr.pullback
    y, back = rrule(op, *args, **kwargs)
    dy = _cotangent(y)
    back(dy)
    pullback(op, *args, **kwargs)(dy)

    def rrule_back() -> object:
        _, back = rrule(op, *args, **kwargs)
        return back(dy)

    forward = measure(lambda: op(*args, **kwargs), budget).median_s
    rrule_s = measure(lambda: rrule(op, *args, **kwargs), budget).median_s
    rrule_back_s = measure(rrule_back, budget).median_s
    pullback_back_s = measure(lambda: pullback(op, *args, **kwargs)(dy), budget).median_s
    numpy_s = measure(lambda: case.numpy_step(dy), budget).median_s
    goal = GOAL_FACTOR * forward + GOAL_SLACK_S
    return PerCallRow(case.name, forward, rrule_s, rrule_back_s, pullback_back_s, numpy_s, goal, rrule_s <= goal)


def run_percall(mode: str = "quick", only: list[str] | None = None) -> list[PerCallRow]:
    """Measure every case (or those named in ``only``) in this process."""
    budget = Budget.for_mode(mode)
    return [measure_case(case, budget) for case in cases() if only is None or case.name in only]


def goals(rows: list[PerCallRow]) -> list[dict[str, object]]:
    """The per-call goals, one per op, in ``run.collect_goals``' form."""
    return [
        {
            "name": f"per call {row.op}: rrule / (2 x forward + 2 us)",
            "goal": "<= 1 (rrule at most 2x the forward alone plus 2 us)",
            "target": 1.0,
            "comparison": "<=",
            "unit": "fraction",
            "value": row.rrule_s / row.goal_s,
            "passed": row.passed,
            "kind": "percall",
            "workload": None,
            "against": row.op,
        }
        for row in rows
    ]


def table(rows: list[PerCallRow]) -> str:
    lines = [
        "| op | forward | rrule | goal (2x fwd + 2 us) | rrule + back | pullback + back | NumPy fwd + ref pullback | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        us = [f"{value * 1e6:.2f} us" for value in (row.forward_s, row.rrule_s, row.goal_s, row.rrule_back_s, row.pullback_back_s, row.numpy_s)]
        lines.append(f"| {row.op} | " + " | ".join(us) + f" | {'met' if row.passed else 'MISSED'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--tiny", action="store_true", help="few repeats (for tests)")
    parser.add_argument("--only", nargs="*", help="op names to measure")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    options = parser.parse_args(argv)
    mode = "tiny" if options.tiny else "quick" if options.quick else "full"
    rows = run_percall(mode, options.only)
    print(table(rows))
    if options.json is not None:
        options.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
