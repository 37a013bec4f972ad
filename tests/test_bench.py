"""The main job runs: ``bench/run.py --quick --no-peers --tiny`` exits 0 and writes its JSON and
its plot. One subprocess run is shared by the tests below."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ["W1", "W2", "W3", "W4", "W5"]
CACHE_FIGURES = [
    "import", "cold_first", "cold_later", "fresh_first", "fresh_later", "warm_first", "warm_later", "steady_hit", "steady_rrule",
]


class BenchRun:
    def __init__(self, completed: subprocess.CompletedProcess[str], out: Path) -> None:
        self.completed = completed
        self.out = out

    def document(self) -> dict[str, object]:
        loaded = json.loads((self.out / "results.json").read_text(encoding="utf-8"))
        assert isinstance(loaded, dict)
        return loaded


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    out = tmp_path_factory.mktemp("bench-results")
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "run.py"), "--quick", "--no-peers", "--tiny", "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return BenchRun(completed, out)


def _mapping(value: object) -> dict[str, object]:
    assert isinstance(value, dict), f"expected a JSON object, got {value!r}"
    return value


def test_bench_writes_table_json_and_plot(bench_run: BenchRun) -> None:
    completed = bench_run.completed
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "W1" in completed.stdout and "Compile cache" in completed.stdout
    assert (bench_run.out / "results.png").stat().st_size > 0
    document = bench_run.document()
    assert set(document) >= {"meta", "workloads", "cache", "goals", "summary"}
    meta = _mapping(document["meta"])
    assert meta["mode"] == "tiny"
    assert _mapping(meta["peers"]) == {"jax": "skipped", "torch": "skipped", "autograd": "skipped"}

    workloads = _mapping(document["workloads"])
    assert sorted(workloads) == WORKLOADS
    for name in WORKLOADS:
        workload = _mapping(workloads[name])
        ours = _mapping(_mapping(_mapping(workload["pullback"])["times"])["stablerules"])
        numpy = _mapping(_mapping(_mapping(workload["pullback"])["times"])["numpy"])
        # The NumPy reference always runs; stablerules has a time or says why not.
        assert numpy["status"] == "ok" and isinstance(numpy["median_s"], float)
        if workload["status"] == "ok":
            assert ours["status"] == "ok" and isinstance(ours["median_s"], float)
        else:
            assert isinstance(workload["error"], str) and workload["error"].startswith("error: ")
            assert ours["status"] == "error"
        assert _mapping(workload["bandwidth"])["bound_gbps"]

    cache = _mapping(document["cache"])
    figures = _mapping(cache["figures"])
    assert sorted(figures) == sorted(CACHE_FIGURES)
    for name in CACHE_FIGURES:
        figure = _mapping(figures[name])
        assert isinstance(figure["seconds"], float) or str(figure["detail"]).startswith("error: ")
    assert isinstance(cache["sweep"], list) and len(cache["sweep"]) == 3
    assert isinstance(document["goals"], list) and document["goals"]


def test_bench_every_workload_and_cache_figure_ran(bench_run: BenchRun) -> None:
    """Strict: no workload, cache figure or sweep reported an error (needs every op merged)."""
    assert bench_run.completed.returncode == 0, bench_run.completed.stderr[-3000:]
    document = bench_run.document()
    errors = {
        name: _mapping(workload)["error"]
        for name, workload in _mapping(document["workloads"]).items()
        if _mapping(workload)["status"] != "ok"
    }
    assert not errors, errors
    cache = _mapping(document["cache"])
    figure_errors = {
        name: _mapping(figure)["detail"]
        for name, figure in _mapping(cache["figures"]).items()
        if _mapping(figure)["status"] != "ok"
    }
    assert not figure_errors, figure_errors
    sweeps = cache["sweep"]
    assert isinstance(sweeps, list)
    for sweep in sweeps:
        record = _mapping(sweep)
        assert record["status"] == "ok", record["detail"]
        assert record["kernels_after_first"] == 0, record  # extents are not part of a signature
    # The guards hold on a second call of each workload's signature.
    for name, workload in _mapping(document["workloads"]).items():
        assert str(_mapping(workload)["guards"]).startswith("ok"), (name, _mapping(workload)["guards"])
