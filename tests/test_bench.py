"""The main job runs: ``bench/run.py --quick --no-peers --tiny`` exits 0 and writes its JSON and
its plot. One subprocess run is shared by the tests below."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W7", "W8", "W9", "W9s"]
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


# --- what a reader who has not read the issues sees ------------------------------------------


def _workload_section(stdout: str) -> str:
    return stdout.split("Workloads:", 1)[1].split("Read-the-cotangent-once", 1)[0]


def test_bench_table_names_calls_in_full_and_only_peers_that_ran(bench_run: BenchRun) -> None:
    section = _workload_section(bench_run.completed.stdout)
    assert "W3  repeat(x, inner=Val((2, 1, 3)), outer=Val((2, 1, 2)))" in section  # never cut
    assert "inputs (4, 3, 2) float64 -> dy (16, 3, 12)" in section  # shapes and dtype
    assert not any(cell.endswith("...") for line in section.splitlines() for cell in line.split("  "))
    header = next(line for line in section.splitlines() if line.startswith("workload"))
    assert "numpy reference" in header
    assert "jax" not in header and "torch" not in header and "HIPS" not in header  # skipped peers
    assert "Not measured: jax jit(vjp) (skipped)" in section
    w4 = next(line for line in section.splitlines() if line.startswith("W4 ") and "pullback" in line)
    assert "goal within 4x of its time" in w4 and ">=0.25" not in w4


def test_bench_goals_carry_their_unit(bench_run: BenchRun) -> None:
    goals = bench_run.document()["goals"]
    assert isinstance(goals, list) and goals
    units = set()
    for goal in goals:
        record = _mapping(goal)
        assert record["unit"] in {"ratio", "fraction", "seconds", "kernels", "boolean"}, record
        assert record["comparison"] in {">=", "<=", "=="} and isinstance(record["target"], (int, float)), record
        units.add(record["unit"])
        value = record["value"]
        if record["unit"] == "ratio" and isinstance(value, float):
            assert record["passed"] == (value >= float(record["target"])), record
    assert {"ratio", "seconds", "kernels"} <= units  # "fraction": W6 only (--large)
    w4 = next(_mapping(goal) for goal in goals if str(_mapping(goal)["name"]).startswith("W4 pullback vs numpy"))
    assert "two bare slices" in str(w4["name"]) and "within 4x" in str(w4["goal"])


def _bench_module(name: str) -> ModuleType:
    bench = str(REPO_ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_figure_shows_only_what_ran_with_values_and_one_meaning_per_colour() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    run = _bench_module("bench_run_under_test")
    results = []
    for index, (ratio, goal) in enumerate(((2.5, 2.0), (0.9, 0.25))):
        result = run.WorkloadResult(
            id=f"W{index + 1}", issue=3, call=f"repeat(x, Val({index + 2}), axis=Val(0))", shapes=[[10, 3]],
            dtype="float32", dy_shape=[20 + 10 * index, 3], dy_bytes=240, reference="dy.reshape(...).sum(1)",
        )
        result.pullback.times["stablerules"] = run.Measurement("ok", median_s=1e-6)
        for name in run.COMPARED:
            if name in ("numpy", "torch"):
                result.pullback.times[name] = run.Measurement("ok", median_s=ratio * 1e-6)
                passed = ratio >= goal if name == "numpy" else None
                result.pullback.ratios[name] = run.Comparison(
                    name, ratio, goal if name == "numpy" else None, passed
                )
            else:
                result.pullback.times[name] = run.Measurement("not installed")
                result.pullback.ratios[name] = run.Comparison(name, goal=8.0)  # a goal never measured
        results.append(result)
    cache_figure = sys.modules["cache_report"].CacheFigure  # imported by run.py
    cache = run.CacheReport()
    cache.figures["steady_hit"] = cache_figure("steady cache hit", seconds=1e-6, goal_s=3e-6, passed=True)
    cache.figures["import"] = cache_figure("import stablerules", seconds=0.2)
    labels = {"numpy": "numpy reference", "jax": "jax jit(vjp)", "torch": "torch autograd", "autograd": "HIPS autograd"}
    labels |= {name: name for name in run.COMPARED if name not in labels}
    figure = run.draw(results, cache, "title", labels)
    top, bottom = figure.axes
    legend = [text.get_text() for text in top.get_legend().get_texts()]
    assert legend[:2] == ["numpy reference", "torch autograd"] and len(legend) == 3 and legend[2].startswith("goal")
    bars = [patch for patch in top.patches if isinstance(patch, Rectangle)]
    assert len(bars) == 4  # two workloads x the two implementations that ran
    bar_colours = {to_hex(bar.get_facecolor()) for bar in bars}
    goal_colours = {to_hex(run.PASS_COLOR), to_hex(run.MISS_COLOR)}
    assert not bar_colours & goal_colours  # green and red mean a goal's verdict, nothing else
    texts = [text.get_text() for text in top.texts]
    assert texts.count("2.5x") == 2 and texts.count("0.9x") == 2  # a value on every bar
    assert "goal 2x: pass" in texts and "goal: within 4x: pass" in texts
    assert sum("8x" in text for text in texts) == 0  # the unmeasured peers' goals are not drawn
    ticks = [label.get_text() for label in top.get_xticklabels()]
    assert "(10, 3) float32" in ticks[0] and "dy (20, 3)" in ticks[0]
    cache_colours = [to_hex(patch.get_facecolor()) for patch in bottom.patches if isinstance(patch, Rectangle)]
    assert cache_colours[:2] == [to_hex(run.PASS_COLOR), to_hex(run.NO_GOAL_COLOR)]
    import matplotlib.pyplot as plt

    plt.close(figure)
