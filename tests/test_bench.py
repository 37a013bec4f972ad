"""The main job runs: ``bench/run.py --quick --no-peers --tiny`` exits 0 and writes its JSON and
its plot. One subprocess run is shared by the tests below."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import cast

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
        # Numbers only: the lazy-result goal's value was a JSON boolean before
        assert record["unit"] in {"ratio", "fraction", "seconds", "kernels"}, record
        assert record["value"] is None or type(record["value"]) is float, record
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
    document = _synthetic_document(run)
    figure = run.draw(document)
    try:
        top, top_notes = figure.axes[0], figure.axes[1]
        bars = [patch for patch in top.patches if isinstance(patch, Rectangle)]
        assert len(bars) == 4  # two workloads x the two implementations that ran
        bar_colours = {to_hex(bar.get_facecolor()) for bar in bars}
        goal_colours = {to_hex(run.PASS_COLOR), to_hex(run.MISS_COLOR)}
        assert not bar_colours & goal_colours  # green and red mean a goal's verdict, nothing else
        notes = [text.get_text() for text in top_notes.texts]
        assert notes.count("2.5x") == 1 and any(note.startswith("2.5x  \u00b7  goal \u2265 2x: pass") for note in notes)
        # W2's goal below 1 (a reference that does less): drawn at 0.25 on the ratio axis, and
        # said both ways in its row
        assert any("goal \u2265 0.25x, ours \u2264 4x their time: MISS" in note for note in notes), notes
        ticks = [label.get_text() for label in top.get_yticklabels()]
        assert ticks[0].startswith("W1  repeat(x, Val(2), axis=Val(0))  (10, 3) float32 \u2192 dy (20, 3)")
        assert "vs numpy reference: dy.reshape(...).sum(1)" in ticks and "vs torch autograd" in ticks
        # a peer that did not run has no bar, and a row only where it has a goal, not measured
        assert ticks.count("vs jax jit(vjp)") == 2 and "vs HIPS autograd" in ticks
        assert notes.count("not installed  \u00b7  goal \u2265 8x: not measured") == 4
        goal_ticks = [line for line in top.lines if list(line.get_xdata()) == [0.25, 0.25]]
        assert len(goal_ticks) == 1
        row = [i for i, tick in enumerate(ticks) if tick == "vs numpy reference: dy.reshape(...).sum(1)"][1]  # W2's
        assert min(goal_ticks[0].get_ydata()) < row < max(goal_ticks[0].get_ydata())  # its own row only
        # the engine rows: torch and an engine adapter, each against its own goal
        engine_ticks = [label.get_text() for label in figure.axes[2].get_yticklabels()]
        assert engine_ticks == [
            "torch eager, 2 threads: repeat(x(200, 3, 4), ...), y.backward(dy)",
            "jax: trivial op per call",
        ]
        engine_notes = [text.get_text() for text in figure.axes[3].texts]
        assert engine_notes == [
            "6x  \u00b7  goal \u2265 8x: MISS",
            "0.9x  \u00b7  goal \u2265 0.77x, ours \u2264 1.3x their time: pass",
        ]
        # the per-call panel: each op's rrule as a fraction of its goal, verdict beside it
        percall_ticks = [label.get_text() for label in figure.axes[4].get_yticklabels()]
        assert percall_ticks == [
            "kron: rrule 9.00 us, forward alone 5.00 us",
            "flip: rrule 5.00 us, forward alone 1.00 us",
        ]
        percall_notes = [text.get_text() for text in figure.axes[5].texts]
        assert percall_notes == ["0.75  \u00b7  goal \u2264 1: pass", "1.25  \u00b7  goal \u2264 1: MISS"]
        cache_colours = [to_hex(patch.get_facecolor()) for patch in figure.axes[6].patches if isinstance(patch, Rectangle)]
        assert cache_colours == [to_hex(run.PASS_COLOR), to_hex(run.NO_GOAL_COLOR)]
        _assert_readable(figure)
        _assert_every_goal_drawn(figure, document)
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)


def _synthetic_document(run: ModuleType) -> dict[str, object]:
    """A results document with two workloads, two peers that ran, torch and engine rows."""
    from dataclasses import asdict

    results = []
    for index, (ratio, goal) in enumerate(((2.5, 2.0), (0.2, 0.25))):
        result = run.WorkloadResult(
            id=f"W{index + 1}", issue=3, call=f"repeat(x, Val({index + 2}), axis=Val(0))", shapes=[[10, 3]],
            dtype="float32", dy_shape=[20 + 10 * index, 3], dy_bytes=240, reference="dy.reshape(...).sum(1)",
        )
        result.pullback.times["stablerules"] = run.Measurement("ok", median_s=1e-6)
        for name in run.COMPARED:
            if name in ("numpy", "torch"):
                result.pullback.times[name] = run.Measurement("ok", median_s=ratio * 1e-6)
                numpy = name == "numpy"
                result.pullback.ratios[name] = run.Comparison(
                    name, ratio, goal if numpy else None, (ratio >= goal) if numpy else None
                )
            else:
                result.pullback.times[name] = run.Measurement("not installed")
                result.pullback.ratios[name] = run.Comparison(name, goal=8.0)  # a goal never measured
        results.append(result)
    cache_figure = sys.modules["cache_report"].CacheFigure  # imported by run.py
    cache = run.CacheReport()
    cache.figures["steady_hit"] = cache_figure("steady cache hit", seconds=1e-6, goal_s=3e-6, passed=True)
    cache.figures["import"] = cache_figure("import stablerules", seconds=0.2)
    torch_row = sys.modules.setdefault("engines_torch", importlib.import_module("engines_torch")).TorchRow(
        "W3", "repeat(x(200, 3, 4), ...), y.backward(dy)", "eager", "2", 1e-3, 6e-3, 6.0, 8.0
    )
    engine_row = importlib.import_module("engines").EngineRow("jax", "trivial op per call", 1e-5, 9e-6, 0.9, 1.3, True, False)
    percall = sys.modules.setdefault("percall", importlib.import_module("percall"))
    percall_rows = [
        percall.PerCallRow("kron", 5e-6, 9e-6, 12e-6, 11e-6, 20e-6, 12e-6, True),
        percall.PerCallRow("flip", 1e-6, 5e-6, 6e-6, 6e-6, 3e-6, 4e-6, False),
    ]
    goals = run.collect_goals(results, cache, [torch_row], [engine_row]) + percall.goals(percall_rows)
    labels = {"numpy": "numpy reference", "jax": "jax jit(vjp)", "torch": "torch autograd", "autograd": "HIPS autograd"}
    return {
        "meta": {"labels": labels},
        "title": "a synthetic run",
        "workloads": {result.id: run.compact(asdict(result)) for result in results},
        "cache": cache.as_json(),
        "torch": [asdict(torch_row) | {"threads": int(torch_row.threads), "passed": torch_row.passed}],
        "engines": [asdict(engine_row)],
        "percall": [asdict(row) for row in percall_rows],
        "goals": goals,
        "summary": run.summarize(goals, results),
    }


def _assert_readable(figure: object) -> None:
    """No two texts of the figure overlap (tick labels, notes, titles, legend), and none is
    cut off at the figure's edge."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    assert isinstance(figure, Figure)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = figure.bbox
    candidates: list[Text] = list(figure.texts)
    if figure._suptitle is not None:  # type: ignore[attr-defined]
        candidates.append(figure._suptitle)  # type: ignore[attr-defined]
    for figure_legend in figure.legends:
        candidates += figure_legend.get_texts()
    for axes in figure.axes:
        candidates += [*axes.texts, axes.title, axes._left_title, axes._right_title, axes.xaxis.label, axes.yaxis.label]  # type: ignore[attr-defined]
        for axis in (axes.xaxis, axes.yaxis):
            low, high = sorted(axis.get_view_interval())
            span = (high - low) * 1e-9
            candidates += [tick.label1 for tick in axis.get_major_ticks() if low - span <= tick.get_loc() <= high + span]
        legend = axes.get_legend()
        if legend is not None:
            candidates += legend.get_texts()
    texts = list({id(text): text for text in candidates if text.get_visible() and text.get_text().strip()}.values())
    boxes = [(text, text.get_window_extent(renderer)) for text in texts]
    for text, box in boxes:
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, f"cut off at the edge: {text.get_text()!r}"
        assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, f"cut off at the edge: {text.get_text()!r}"
    for index, (text, box) in enumerate(boxes):
        for other, other_box in boxes[index + 1 :]:
            overlap = min(box.x1, other_box.x1) - max(box.x0, other_box.x0), min(box.y1, other_box.y1) - max(box.y0, other_box.y0)
            assert not (overlap[0] > 0.5 and overlap[1] > 0.5), f"{text.get_text()!r} overlaps {other.get_text()!r}"


def _assert_every_goal_drawn(figure: object, document: dict[str, object]) -> None:
    """Every goal of the JSON is a text of the figure (named by the goal), with its verdict."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    assert isinstance(figure, Figure)
    by_goal = {text.get_gid(): text.get_text() for text in figure.findobj(Text) if text.get_gid()}
    goals = document["goals"]
    assert isinstance(goals, list) and goals
    for goal in goals:
        record = _mapping(goal)
        shown = by_goal.get(str(record["name"]))
        assert shown is not None, f"goal not in the figure: {record['name']}"
        word = {True: "pass", False: "MISS", None: "not measured"}[cast(bool | None, record["passed"])]
        assert word in shown or (record["passed"] is None and "not measured" in shown), (record["name"], shown)


def test_figure_of_the_run_is_readable_and_draws_every_goal(bench_run: BenchRun) -> None:
    """The figure of the suite's own run, rendered from its results.json as run.py renders it."""
    pytest.importorskip("matplotlib")
    assert bench_run.completed.returncode == 0, bench_run.completed.stderr[-3000:]
    run = _bench_module("bench_run_under_test")
    document = bench_run.document()
    figure = run.draw(document)
    try:
        _assert_readable(figure)
        _assert_every_goal_drawn(figure, document)
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)


def test_every_printed_miss_is_counted_in_the_summary(bench_run: BenchRun) -> None:
    stdout = bench_run.completed.stdout
    document = bench_run.document()
    summary = _mapping(document["summary"])
    goals = [_mapping(goal) for goal in cast(list[object], document["goals"])]
    missed = [str(goal["name"]) for goal in goals if goal["passed"] is False]
    assert summary["missed"] == len(missed) and summary["missed_goals"] == missed
    tables, _, tail = stdout.partition("\nGoals: ")
    assert tail.startswith(f"{summary['passed']} passed, {summary['missed']} missed")
    # every verdict the tables print as missed (MISS, the torch rows' MISSED, the engine rows'
    # FAIL) is a counted goal, and the summary names each
    assert len(re.findall(r"\b(?:MISS|MISSED|FAIL)\b", tables)) == len(missed)
    for name in missed:
        assert f"missed: {name}" in tail


def test_torch_and_engine_rows_are_goals_with_numbers() -> None:
    """Before: two torch rows printed MISSED without being counted, and their JSON said
    "threads": "1" (a string)."""
    pytest.importorskip("matplotlib")
    run = _bench_module("bench_run_under_test")
    document = _synthetic_document(run)
    torch = _mapping(cast(list[object], document["torch"])[0])
    assert torch["threads"] == 2 and type(torch["threads"]) is int
    summary = _mapping(document["summary"])
    assert "torch W3 eager (2 threads) vs torch's own ops" in cast(list[str], summary["missed_goals"])
    names = [str(_mapping(goal)["name"]) for goal in cast(list[object], document["goals"])]
    assert "jax trivial op per call vs jax's own composition" in names
    text = run.summary_text(summary)
    assert f"{summary['missed']} missed" in text and "missed: torch W3 eager (2 threads)" in text
    json.dumps(document)  # all of it is JSON


MODELS = {("kalman tape", "numpy"), ("densenet121", "torch eager"), ("unet", "torch eager"), ("embedding", "torch eager"),
          ("kalman", "torch eager"), ("jax_unet", "jax jit"), ("kalman", "jax jit"),
          ("densenet121 bf16", "torch eager"), ("unet bf16", "torch eager"),
          ("jax_unet bf16", "jax jit")}


def test_models_tiny_rows_match_gradients_and_render(tmp_path: Path) -> None:
    """``bench/models.py --tiny``: every real model ran, ours against the engine's own ops, with
    gradients that agree (checked in the run against stock's; a mismatch would be a row's
    error), and the README renders its table; a run without models renders none."""
    out = tmp_path / "models.json"
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "models.py"), "--tiny", "--json", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    section = json.loads(out.read_text(encoding="utf-8"))
    rows = [_mapping(row) for row in cast(list[object], section["rows"])]
    assert {(str(row["model"]), str(row["engine"])) for row in rows} == MODELS
    for row in rows:
        assert row["error"] is None, row
        assert row["tiny"] is True
        for key in ("ours_s", "stock_s", "ratio"):
            assert isinstance(row[key], float) and cast(float, row[key]) > 0, (key, row)
        if row["engine"] != "numpy":
            assert isinstance(row["grad_max_abs_diff"], float) and row["grad_max_abs_diff"] < 1e-4, row
        if row["model"] in ("unet", "embedding", "kalman", "unet bf16") and not str(row["note"]).startswith("A/A"):
            assert isinstance(row["op_ours_s"], float) and isinstance(row["op_stock_s"], float), row
    noise = [(row["model"], row["engine"]) for row in rows if str(row["note"]).startswith("A/A")]
    assert noise == [("densenet121", "torch eager"), ("unet", "torch eager")]  # stock against a copy of stock
    tape = _mapping(section["tape"])
    assert [_mapping(r)["T"] for r in cast(list[object], tape["rows"])] == [20, 40]
    for model, engine in MODELS:
        assert model in completed.stdout and engine in completed.stdout
    bench = str(REPO_ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    readme_table = importlib.import_module("readme_table")
    kept = json.loads((REPO_ROOT / "bench" / "readme_results.json").read_text(encoding="utf-8"))
    without = readme_table.render({key: value for key, value in kept.items() if key != "models"})
    assert "Real models" not in without
    with_models = readme_table.render(kept | {"models": section})
    assert "Real models" in with_models
    for model, engine in MODELS:
        assert f"| {model}" in with_models and f"| {engine} |" in with_models


def test_half_rows_are_checked_goals_drawn_and_rendered() -> None:
    """``bench/half.py`` (W3 and W10 in bfloat16, run by ``--engines``): ours and both peers ran
    in both dtypes with ours' bf16 gradient within one bf16 ulp of the float64 pullback; a
    measured row's goal (lead in bf16 over lead in float32 >= 1) is a goal of the run, drawn in
    the figure and rendered in the README's table; tiny rows are not measured."""
    pytest.importorskip("matplotlib")
    run = _bench_module("bench_run_under_test")
    half = importlib.import_module("half")
    rows = half.run_half("tiny")
    assert [row.workload for row in rows] == ["W3", "W10"]
    for row in rows:
        assert row.error is None, row
        assert set(row.times) == {f"{who} {dtype}" for who in ("ours", "torch", "jax") for dtype in ("float32", "bfloat16")}
        assert row.grad_error["ours bfloat16"] <= 2.0**-7 and row.passed == {"torch": None, "jax": None}
    measured = half.HalfRow("W3", "repeat(...)", times={"ours float32": 1e-4, "ours bfloat16": 2e-4},
                            ahead={"torch": {"float32": 10.0, "bfloat16": 12.0}, "jax": {"float32": 8.0, "bfloat16": 2.0}},
                            goal={"torch": 1.2, "jax": 0.25}, passed={"torch": True, "jax": False})
    goals = run.collect_goals([], run.CacheReport(), (), (), [*rows, measured])
    by_name = {str(goal["name"]): goal for goal in goals}
    assert by_name[run.half_goal_name("W3", "torch")]["passed"] is True
    assert by_name[run.half_goal_name("W3", "jax")]["passed"] is False
    assert sum(1 for goal in goals if goal["passed"] is None) == 4  # the tiny rows
    kept = json.loads((REPO_ROOT / "bench" / "readme_results.json").read_text(encoding="utf-8"))
    # the kept results' own half goals are replaced by this test's measured row's
    kept_goals = [goal for goal in kept["goals"] if goal.get("kind") != "half"]
    document = kept | {"half": half.as_json([measured]), "goals": kept_goals + goals[4:]}
    figure = run.draw(document)
    try:
        _assert_every_goal_drawn(figure, document)
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
    text = importlib.import_module("readme_table").render(document)
    assert "| W3 | torch |" in text and "1.20 [>= 1: pass]" in text and "0.25 [>= 1: **MISS**]" in text


def test_importing_the_workloads_loads_no_op_module() -> None:
    """``cache_report``'s fresh processes import ``bench/workloads.py`` before their clock
    starts and time the first call: the op's module must load inside that call, as a user's
    first call pays it, not when the workloads are imported."""
    code = (
        "import sys; import workloads; "
        "print(sorted(name for name in sys.modules if name.startswith('stablerules.rules.')))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "bench")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT, env=env)
    assert done.stdout.strip() == "[]", done.stdout
