"""``bench/indexing.py``'s bound and verdicts: the one-step bound reads ``dy`` and writes ``dx``
in one step, and a peer goal above what the bound allows is marked unreachable."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def indexing() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("indexing")
    finally:
        sys.path.remove(str(BENCH))


def test_one_step_bounds_run_a_read_then_a_write_each(indexing: ModuleType) -> None:
    calls: list[str] = []
    names = ("np.max", "compiled", "compiled split")
    bounds = {part: {name: (lambda part=part, name=name: calls.append(f"{part} {name}")) for name in names} for part in ("read", "write")}
    times = {"read": {"np.max": 1.0, "compiled": 2.0, "compiled split": 3.0}, "write": {"np.max": 3.0, "compiled": 2.0, "compiled split": 1.0}}
    steps = indexing.one_step_bounds(bounds, times)
    # the fastest read with the fastest write, and each way on one thread and split
    assert len(steps) == 3
    seen = set()
    for step in steps:
        calls.clear()
        step()
        assert len(calls) == 2 and calls[0].startswith("read ") and calls[1].startswith("write ")
        seen.add((calls[0][5:], calls[1][6:]))
    assert seen == {("np.max", "compiled split"), ("compiled", "compiled"), ("compiled split", "compiled split")}


def test_verdicts_pass_miss_and_unreachable(indexing: ModuleType) -> None:
    per_round = {
        "ours": [1.0, 1.0, 1.0],
        "torch: a": [2.5, 3.0, 1.5],  # median of the best per round over ours: 2.5
        "torch: b": [2.6, 2.6, 2.6],
        "jax: jit": [1.2, 1.2, 1.2],
        "numpy: np.add.at": [20.0, 20.0, 20.0],
        "bound": [0.8, 0.8, 0.8],
    }
    assert indexing.verdict("torch", 2.0, per_round) == "torch 2.50 (goal >= 2: pass)"
    # jax / bound = 1.5 < 2: no pullback can be twice as fast as this JAX run
    assert indexing.verdict("jax", 2.0, per_round) == (
        "jax 1.20 (goal >= 2: MISS; unreachable here: the bound itself is only 1.50x faster)"
    )
    assert indexing.verdict("np.add.at", 3.0, per_round) == "np.add.at 20.00 (goal >= 3: pass)"
    assert indexing.verdict("bound", 0.7, per_round) == "bound 0.80 (goal >= 0.7: pass)"
    assert indexing.verdict("bound", 0.9, per_round) == "bound 0.80 (goal >= 0.9: MISS)"
    # a peer goal that is reachable but missed says only MISS
    per_round["jax: jit"] = [1.9, 1.9, 1.9]
    assert indexing.verdict("jax", 2.0, per_round) == "jax 1.90 (goal >= 2: MISS)"
    # the ceiling takes the lower of the one-step bound and the parts timed alone
    per_round["jax: jit"] = [1.2, 1.2, 1.2]
    per_round[indexing.ALONE] = [0.6, 0.6, 0.6]
    assert indexing.verdict("jax", 2.0, per_round) == "jax 1.20 (goal >= 2: MISS)"
    per_round[indexing.ALONE] = [0.7, 0.7, 0.7]
    assert indexing.verdict("jax", 2.0, per_round) == (
        "jax 1.20 (goal >= 2: MISS; unreachable here: the bound itself is only 1.71x faster)"
    )
    assert indexing.verdict("torch", 2.0, {"ours": [1.0], "bound": [0.5]}) == "torch: not measured"
