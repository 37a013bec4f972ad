"""The main job: stablerules' seed workloads and compile-cache figures against NumPy and peers.

    python bench/run.py [--quick] [--large] [--no-peers] [--tiny] [--engines] [--models] [--out DIR]

For each workload W1-W5, W7, W8, W9, W9s (W6 with ``--large``, a 4.8 GB cotangent), the pullback and the
forward are timed (medians) in this one process: stablerules, the best NumPy formulation,
and, when installed, JAX's jitted vjp, PyTorch autograd (CPU) and HIPS autograd. A ratio is
``peer_time / stablerules_time`` (above 1: stablerules is faster), shown beside the issue's
goal. A read-the-cotangent-once bandwidth bound is measured on the same cotangent. Then the
compile-cache figures (``cache_report.py``). With PyTorch installed, the ``stablerules.torch``
rows (``engines_torch.py``); with ``--engines``, the ``stablerules.jax`` / ``.autograd`` rows
(``engines.py``); with ``--models`` (or ``--engines``), the real models of ``models.py``
(DenseNet-121, a U-Net decoder, an embedding head, a Kalman filter, and DenseNet-121 and the
U-Net under ``torch.autocast`` bfloat16; ours against the engine's own ops), under the JSON's
``models`` key; with ``--engines``, W3 and W10 in bfloat16 against torch's and JAX's bf16
pullbacks (``half.py``, the JSON's ``half`` key; goal: at least as far ahead as in float32). Results: tables on stdout, ``results.json`` and ``results.png`` in ``--out``
(default ``bench/results/``). Every verdict printed is a goal in the JSON and counted in the
summary; the figure is drawn from the JSON (:func:`draw`), every goal in its own row, and
``bench/readme_table.py`` makes the README's results section from the same JSON.

A workload whose op fails (not implemented yet, or wrong) shows "error: ..." in its row; the
run goes on and exits 0. Every result is checked against NumPy before it is timed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, cast

from cache_report import BENCH_DIR, CACHE_STEPS, CacheReport, prepare_main_process, print_report, run_cache_report
from timing import Budget, Timing, format_seconds, measure, table

if TYPE_CHECKING:  # imported for real inside main(), after prepare_main_process()
    from matplotlib.axes import Axes
    from engines import EngineCase, EngineRow
    from matplotlib.figure import Figure
    from peers import Peer
    from workloads import Array, ReferencePullback, Workload

SCHEMA = 1
IMPLEMENTATIONS = ("stablerules", "numpy", "jax", "torch", "autograd")
COMPARED = IMPLEMENTATIONS[1:]


# --- results -----------------------------------------------------------------------------------


@dataclass
class Measurement:
    """One implementation's median time, or why there is none.

    ``status``: "ok", "error", "not installed" or "skipped"; ``detail``: the error, or which
    formulation won (NumPy); ``setup_s``: a peer's first call (JAX: trace and compile).
    """

    status: str
    median_s: float | None = None
    min_s: float | None = None
    p25_s: float | None = None
    p75_s: float | None = None
    samples: int = 0
    loops: int = 0
    detail: str | None = None
    setup_s: float | None = None

    @classmethod
    def of(cls, timing: Timing, detail: str | None = None, setup_s: float | None = None) -> Measurement:
        return cls(
            "ok", timing.median_s, timing.min_s, timing.p25_s, timing.p75_s, timing.samples, timing.loops,
            detail, setup_s,
        )

    @classmethod
    def failed(cls, error: BaseException | str) -> Measurement:
        return cls("error", detail=error if isinstance(error, str) else error_text(error))


@dataclass
class Comparison:
    """``ratio = time of against / time of stablerules``; ``passed`` against ``goal``."""

    against: str
    ratio: float | None = None
    goal: float | None = None
    passed: bool | None = None


@dataclass
class StepResult:
    """The pullback or the forward of one workload, for every implementation."""

    times: dict[str, Measurement] = field(default_factory=dict)
    ratios: dict[str, Comparison] = field(default_factory=dict)


@dataclass
class Bandwidth:
    """The cotangent's bytes over the pullback's time, against a read-it-once bound."""

    dy_bytes: int
    bound_gbps: float
    bound_method: str
    methods_gbps: dict[str, float]
    pullback_gbps: float | None = None
    fraction: float | None = None
    goal: float | None = None
    passed: bool | None = None
    # ``dy.copy()``: dy read once and a fresh array of its size written once, this run (for a
    # pullback that must write a dense tangent as large as dy, as roll's does, the fastest it
    # could be); None above 256 MB.
    fresh_copy_gbps: float | None = None


@dataclass
class Memory:
    """Peak memory of one pullback call beyond its gradients (resident set, this process)."""

    extra_bytes: int | None
    fraction_of_dy: float | None
    goal: float | None = None
    passed: bool | None = None
    method: str = "VmHWM after clear_refs, minus the resident set before and the gradients"


@dataclass
class WorkloadResult:
    id: str
    issue: int
    call: str
    shapes: list[list[int]]
    dtype: str
    dy_shape: list[int]
    dy_bytes: int
    reference: str
    status: str = "ok"
    error: str | None = None
    first_call: dict[str, float | int] | None = None
    guards: str | None = None
    pullback: StepResult = field(default_factory=StepResult)
    forward: StepResult = field(default_factory=StepResult)
    bandwidth: Bandwidth | None = None
    memory: Memory | None = None
    lazy: bool | None = None  # a lazy-goal workload: the pullback returned a Fill


def compact(record: object) -> object:
    """Drop the empty timing fields of measurements that did not run ("skipped", errors)."""
    if isinstance(record, dict):
        if record.get("status") not in (None, "ok") and "median_s" in record:
            return {key: value for key, value in record.items() if value not in (None, 0)}
        return {key: compact(value) for key, value in record.items()}
    if isinstance(record, list):
        return [compact(item) for item in record]
    return record


def error_text(error: BaseException) -> str:
    return "error: " + " ".join(f"{type(error).__name__}: {error}".split())


# --- machine facts ---------------------------------------------------------------------------------


def _proc_field(path: str, key: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def available_bytes() -> int | None:
    value = _proc_field("/proc/meminfo", "MemAvailable")
    return int(value.split()[0]) * 1024 if value else None


def machine() -> dict[str, object]:
    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    total = _proc_field("/proc/meminfo", "MemTotal")
    return {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(int(total.split()[0]) / 2**20, 1) if total else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": installed("numpy"),
        "numba": installed("numba"),
    }


# --- measuring one workload ------------------------------------------------------------------------


def _peak_extra_bytes(call: Callable[[], object]) -> int | None:
    """Peak resident memory of ``call()`` above the resident set before it (Linux only;
    None elsewhere). Counts what Numba allocates too, which tracemalloc would not."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")  # reset the peak (VmHWM) to the current resident set
    except OSError:
        return None
    before = _proc_field("/proc/self/status", "VmRSS")
    call()
    peak = _proc_field("/proc/self/status", "VmHWM")
    if before is None or peak is None:
        return None
    return (int(peak.split()[0]) - int(before.split()[0])) * 1024


def _bandwidth_bound(dy: object, budget: Budget) -> tuple[str, float, dict[str, float]]:
    """Fastest way to read the cotangent once: a sum (one thread, and split over the cores
    when large), and a copy into a preallocated buffer (which also writes; only below
    256 MB, to spare W6 a second 4.8 GB). GB/s of dy."""
    import concurrent.futures

    import numpy as np

    flat = np.ascontiguousarray(dy).reshape(-1)
    nbytes = flat.nbytes
    methods: dict[str, float] = {}
    methods["np.add.reduce"] = measure(lambda: np.add.reduce(flat), budget).median_s
    if nbytes <= 256 * 2**20:
        buffer = np.empty_like(flat)
        methods["np.copyto"] = measure(lambda: np.copyto(buffer, flat), budget).median_s
    threads = os.cpu_count() or 1
    if threads > 1 and flat.size >= 2**18:
        chunks = np.array_split(flat, threads)
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            methods[f"np.add.reduce x{threads} threads"] = measure(
                lambda: list(pool.map(np.add.reduce, chunks)), budget
            ).median_s
    gbps = {name: nbytes / seconds / 1e9 for name, seconds in methods.items()}
    best = max(gbps, key=lambda name: gbps[name])
    return best, gbps[best], gbps


def _best_reference(
    references: dict[str, ReferencePullback], arrays: list[Array], dy: Array, budget: Budget
) -> tuple[str, Timing]:
    """The fastest NumPy formulation of the pullback, and its timing."""
    def timed(formulation: ReferencePullback) -> Timing:
        return measure(lambda: formulation(arrays, dy), budget)

    timings = {name: timed(formulation) for name, formulation in references.items()}
    best = min(timings, key=lambda name: timings[name].median_s)
    return best, timings[best]


def run_workload(w: Workload, peers: dict[str, Peer], budget: Budget, step: Callable[[str], None]) -> WorkloadResult:
    """Measure one workload against every implementation; never raises for an op's fault."""
    import numpy as np

    import stablerules as sr
    from workloads import (
        call_ours_forward,
        call_ours_rrule,
        check_close,
        ours_cotangent,
        reference_forward,
        reference_pullbacks,
        tangent_arrays,
    )

    result = WorkloadResult(
        id=w.id,
        issue=w.issue,
        call=w.spec.describe(),
        shapes=[list(shape) for shape in w.shapes],
        dtype=w.dtype,
        dy_shape=list(w.output_shape()),
        dy_bytes=w.cotangent_bytes(),
        reference=w.reference_text,
    )
    if w.memory_goal is not None:
        result.memory = Memory(None, None, w.memory_goal)
    available = available_bytes()
    if w.large and available is not None and available < 3 * result.dy_bytes:
        # dy, a forward result and one transient copy (NumPy's einsum, autograd) at once.
        result.status = "error"
        result.error = (
            f"error: not run: needs ~{3 * result.dy_bytes / 1e9:.1f} GB of free memory, "
            f"{available / 1e9:.1f} GB available"
        )
        for name in IMPLEMENTATIONS:
            result.pullback.times[name] = result.forward.times[name] = Measurement.failed(result.error)
        for _ in range(3 + len(peers)):
            step(f"{w.id} not run")
        return result
    if w.large:  # seconds per call: fewer samples, one warmup
        budget = replace(budget, min_samples=3, warmup=1)
    arrays, dy = w.make_inputs()
    references = reference_pullbacks(w.spec)
    expected = list(next(iter(references.values()))(arrays, dy))
    expected = [np.array(e) for e in expected]  # own memory, not views of dy
    dy_ours = ours_cotangent(w.spec, dy)  # dy, or its Fill for a lazy-cotangent workload

    # stablerules: first call (counters), checks, guards, then the medians.
    try:
        before = sr.cache_info()
        started = time.perf_counter()
        y, back = call_ours_rrule(w.spec, arrays)
        tangents = back(dy_ours)
        seconds = time.perf_counter() - started
        after = sr.cache_info()
        result.first_call = {
            "seconds": seconds,
            "compiles": after.compiles - before.compiles,
            "disk_hits": after.disk_hits - before.disk_hits,
        }
        problem = check_close("pullback", tangent_arrays(tangents), expected)
        if w.lazy_goal:
            result.lazy = isinstance(tangents, tuple) and all(isinstance(t, (sr.Fill, sr.NoTangent)) for t in tangents)
        if problem is None and not w.large:  # W6's forward is checked by the tests, not here (memory)
            problem = check_close("forward", [np.asarray(y)], [reference_forward(w.spec, arrays)])
        del y, tangents
        if problem is not None:
            raise AssertionError(problem)
        try:
            with sr.no_compile(), sr.no_fallback():
                call_ours_rrule(w.spec, arrays)[1](dy_ours)
            result.guards = "ok: a second call compiles nothing and takes no fallback"
        except Exception as error:
            result.guards = error_text(error)
        extra = _peak_extra_bytes(lambda: back(dy_ours))
        result.pullback.times["stablerules"] = Measurement.of(measure(lambda: back(dy_ours), budget))
        if extra is not None:
            fraction = max(extra - sum(e.nbytes for e in expected), 0) / max(result.dy_bytes, 1)
            result.memory = Memory(extra, fraction, w.memory_goal)
            if w.memory_goal is not None:
                result.memory.passed = fraction <= w.memory_goal
        del back
    except Exception as error:
        result.status, result.error = "error", error_text(error)
        result.pullback.times["stablerules"] = Measurement.failed(error)
    try:  # the forward op on its own (it may work where the rule does not)
        if not w.large:
            problem = check_close("forward", [np.asarray(call_ours_forward(w.spec, arrays))], [reference_forward(w.spec, arrays)])
            if problem is not None:
                raise AssertionError(problem)
        result.forward.times["stablerules"] = Measurement.of(measure(lambda: call_ours_forward(w.spec, arrays), budget))
    except Exception as error:
        result.forward.times["stablerules"] = Measurement.failed(error)
    step(f"{w.id} stablerules")

    # NumPy: every formulation, the fastest counts.
    best_name, best_timing = _best_reference(references, arrays, dy, budget)
    result.pullback.times["numpy"] = Measurement.of(best_timing, detail=best_name)
    result.forward.times["numpy"] = Measurement.of(measure(lambda: reference_forward(w.spec, arrays), budget))
    step(f"{w.id} numpy")

    bound_method, bound_gbps, methods = _bandwidth_bound(dy, budget)
    result.bandwidth = Bandwidth(result.dy_bytes, bound_gbps, bound_method, methods, goal=w.bandwidth_goal)
    if result.dy_bytes <= 256 * 2**20:
        copy_seconds = measure(lambda: dy.copy(), budget).median_s
        result.bandwidth.fresh_copy_gbps = result.dy_bytes / copy_seconds / 1e9
    ours = result.pullback.times["stablerules"]
    if ours.status == "ok" and ours.median_s:
        result.bandwidth.pullback_gbps = result.dy_bytes / ours.median_s / 1e9
        result.bandwidth.fraction = result.bandwidth.pullback_gbps / bound_gbps
        if w.bandwidth_goal is not None:
            result.bandwidth.passed = result.bandwidth.fraction >= w.bandwidth_goal
    step(f"{w.id} bandwidth bound")

    for name in (name for name in COMPARED if name in peers):
        peer = peers[name]
        if peer.status != "ok":
            measurement = Measurement(peer.status) if not peer.status.startswith("error") else Measurement.failed(peer.status)
            result.pullback.times[name] = result.forward.times[name] = measurement
            step(f"{w.id} {name}")
            continue
        available = available_bytes()
        if w.large and available is not None and available < 2 * result.dy_bytes:  # beside dy
            needed = f"needs ~{2 * result.dy_bytes / 1e9:.1f} GB free, {available / 1e9:.1f} GB available"
            skipped = Measurement("skipped", detail=needed)
            result.pullback.times[name] = result.forward.times[name] = skipped
            step(f"{w.id} {name}")
            continue
        try:
            case = peer.case(w.spec, arrays, dy)
            problem = check_close(f"{name} pullback", case.gradients(), expected)
            if problem is not None:
                raise AssertionError(problem)
            result.pullback.times[name] = Measurement.of(measure(case.pullback, budget), setup_s=case.setup_s)
            result.forward.times[name] = Measurement.of(measure(case.forward, budget))
            del case
        except Exception as error:
            result.pullback.times[name] = result.forward.times[name] = Measurement.failed(error)
        step(f"{w.id} {name}")

    for step_result, goals in ((result.pullback, w.goals), (result.forward, {})):
        base = step_result.times["stablerules"]
        for name in COMPARED:
            other = step_result.times.get(name)
            comparison = Comparison(name, goal=goals.get(name))
            if base.status == "ok" and other is not None and other.status == "ok" and base.median_s and other.median_s:
                comparison.ratio = other.median_s / base.median_s
                if comparison.goal is not None:
                    comparison.passed = comparison.ratio >= comparison.goal
            step_result.ratios[name] = comparison
    return result


# --- goals, table, plot ----------------------------------------------------------------------------

# One colour per implementation, never green or red: those mean "goal met" / "goal missed" in
# the figure. An engine added to COMPARED takes the next spare colour.
COLORS = {"stablerules": "black", "numpy": "tab:blue", "jax": "tab:orange", "torch": "tab:purple", "autograd": "tab:brown"}
_SPARE_COLORS = ("tab:pink", "tab:olive", "tab:cyan", "tab:gray")
PASS_COLOR, MISS_COLOR, NO_GOAL_COLOR = "tab:green", "tab:red", "tab:gray"


def color_of(name: str) -> str:
    if name not in COLORS:
        spare = [color for color in _SPARE_COLORS if color not in COLORS.values()]
        COLORS[name] = spare[0] if spare else "tab:gray"
    return COLORS[name]


def ratio_goal_text(goal: float) -> str:
    """A pullback goal in words: a ratio goal below 1 is a slowdown allowed against a
    reference that does less (W4's two bare slices), not a speedup."""
    return f"within {1 / goal:g}x of its time" if goal < 1 else f">= {goal:g}x faster"


def verdict(passed: bool | None) -> str:
    return {True: "pass", False: "MISS", None: "not measured"}[passed]


def ran(results: list[WorkloadResult], name: str) -> bool:
    """Whether an implementation has a time in any workload (a peer not installed has none)."""
    return any(
        (step.times.get(name) or Measurement("-")).status == "ok"
        for result in results for step in (result.pullback, result.forward)
    )


def inputs_text(result: WorkloadResult) -> str:
    """``(100,) float64 -> dy (700,)``: the input shapes, dtype and the cotangent's shape."""
    shapes = " & ".join(str(tuple(shape)) for shape in result.shapes)
    return f"{shapes} {result.dtype} -> dy {tuple(result.dy_shape)} ({_bytes(result.dy_bytes)})"


def ratio_goal_name(workload: str, against: str, reference: str) -> str:
    """The name of a pullback ratio goal, the same in the JSON, the figure and the summary."""
    return f"{workload} pullback vs {against}" + (f" ({reference})" if against == "numpy" else "")


def torch_goal_name(row: object) -> str:
    """A ``stablerules.torch`` row's goal name (``engines_torch.TorchRow``)."""
    threads = int(getattr(row, "threads"))
    return (
        f"torch {getattr(row, 'id')} {getattr(row, 'engine')} ({threads} thread{'' if threads == 1 else 's'})"
        " vs torch's own ops"
    )


def engine_goal_name(row: object) -> str:
    """An engine adapter row's goal name (``engines.EngineRow``)."""
    return f"{getattr(row, 'engine')} {getattr(row, 'name')} vs {getattr(row, 'engine')}'s own composition"


def collect_goals(
    results: list[WorkloadResult],
    cache: CacheReport,
    torch_rows: Sequence[object] = (),
    engine_rows: Sequence[object] = (),
    half_rows: Sequence[object] = (),
) -> list[dict[str, object]]:
    """Every goal from the issues with its measured value and verdict (None: not measured).

    ``target`` is the goal's number, ``comparison`` how ``value`` must relate to it (">=" or
    "<="), and ``unit`` what both are in: "ratio" (the other's time / stablerules' time),
    "fraction" (of a bound, of the cotangent's bytes, or of the tangents that are lazy, named
    in ``name``), "seconds" or "kernels". ``kind`` says which figure row draws it ("ratio",
    "bandwidth", "memory", "lazy", "cache", "sweep", "torch", "engine", "half"), ``workload`` and
    ``against`` (the peer, for "ratio") where it belongs. Every printed verdict (pass / MISS,
    the torch rows' and the engine rows' too) is one of these goals, so the summary counts
    every MISS the run prints.
    """
    goals: list[dict[str, object]] = []

    def add(
        name: str, text: str, target: float, comparison: str, unit: str, value: float | None, passed: bool | None,
        kind: str, workload: str | None = None, against: str | None = None,
    ) -> None:
        goals.append({
            "name": name, "goal": text, "target": target, "comparison": comparison, "unit": unit,
            "value": None if value is None else float(value), "passed": passed, "kind": kind,
            "workload": workload, "against": against,
        })

    for result in results:
        for name, comparison in result.pullback.ratios.items():
            if comparison.goal is not None:
                add(
                    ratio_goal_name(result.id, name, result.reference),
                    f">= {comparison.goal:g} ({ratio_goal_text(comparison.goal)})",
                    comparison.goal, ">=", "ratio", comparison.ratio, comparison.passed, "ratio", result.id, name,
                )
        if result.bandwidth is not None and result.bandwidth.goal is not None:
            add(
                f"{result.id} pullback bandwidth / read-once bound", f">= {result.bandwidth.goal:g}",
                result.bandwidth.goal, ">=", "fraction", result.bandwidth.fraction, result.bandwidth.passed,
                "bandwidth", result.id,
            )
        if result.lazy is not None:
            add(
                f"{result.id} pullback of a Fill cotangent is a Fill (O(1)): fraction of lazy tangents", ">= 1",
                1.0, ">=", "fraction", 1.0 if result.lazy else 0.0, result.lazy, "lazy", result.id,
            )
        if result.memory is not None and result.memory.goal is not None:
            add(
                f"{result.id} pullback peak extra memory / cotangent bytes", f"<= {result.memory.goal:g}",
                result.memory.goal, "<=", "fraction", result.memory.fraction_of_dy, result.memory.passed,
                "memory", result.id,
            )
    for key, figure in cache.figures.items():
        if figure.goal_s is not None:
            add(
                f"cache {key}",
                f"<= {format_seconds(figure.goal_s)}" + (" with 0 compiles" if key.startswith(("warm", "fresh")) else ""),
                figure.goal_s, "<=", "seconds", figure.seconds, figure.passed, "cache", against=key,
            )
    for sweep in cache.sweep:
        add(
            f"cache sweep {sweep.op}: kernels after the first extent", "0", 0, "<=", "kernels",
            sweep.kernels_after_first if sweep.status == "ok" else None, sweep.passed, "sweep", against=sweep.op,
        )
    for row in torch_rows:
        goal = float(getattr(row, "goal"))
        measured = getattr(row, "error") is None and not getattr(row, "tiny")
        add(
            torch_goal_name(row), f">= {goal:g} (>= {goal:g}x the speed of torch's own ops)" if goal >= 1
            else f">= {goal:g} (at most {1 / goal:.2g}x the time of torch's own op)",
            goal, ">=", "ratio", getattr(row, "ratio") if measured else None, getattr(row, "passed"), "torch",
            against=str(getattr(row, "id")),
        )
    for row in engine_rows:
        if getattr(row, "goal") is None:
            continue
        goal = float(getattr(row, "goal"))
        higher = bool(getattr(row, "higher_is_ours"))
        target = goal if higher else 1 / goal  # a ceiling on ours/native is a floor on native/ours
        text = f">= {goal:g} (>= {goal:g}x faster)" if higher else f">= {target:.3g} (ours at most {goal:g}x the native time)"
        add(
            engine_goal_name(row), text, target, ">=", "ratio", getattr(row, "ratio"), getattr(row, "passed"), "engine",
            against=str(getattr(row, "name")),
        )
    for row in half_rows:  # half.HalfRow: ahead of the peer in bf16 over ahead in float32, same run
        workload = str(getattr(row, "workload"))
        for peer, value in cast(dict[str, object], getattr(row, "goal")).items():
            if peer in cast(dict[str, str], getattr(row, "not_run")):
                continue  # the peer is not installed: no goal to count
            measured = getattr(row, "error") is None and isinstance(value, float)
            add(
                half_goal_name(workload, peer),
                ">= 1 (ours ahead of the peer in bfloat16 by at least its lead in float32, same run)",
                1.0, ">=", "ratio", cast(float, value) if measured else None,
                cast("dict[str, bool | None]", getattr(row, "passed")).get(peer) if measured else None, "half",
                workload, peer,
            )
    return goals


def half_goal_name(workload: str, peer: str) -> str:
    """A bf16 row's goal name (``half.goal_name``; kept here so the figure needs no torch)."""
    return f"{workload} bf16 vs {peer} bf16: at least as far ahead as in float32"


def summarize(goals: list[dict[str, object]], results: list[WorkloadResult]) -> dict[str, object]:
    """The counts of the JSON's ``summary``, and the names of the goals missed."""
    return {
        "passed": sum(1 for goal in goals if goal["passed"] is True),
        "missed": sum(1 for goal in goals if goal["passed"] is False),
        "not_measured": sum(1 for goal in goals if goal["passed"] is None),
        "missed_goals": [str(goal["name"]) for goal in goals if goal["passed"] is False],
        "errors": sorted(result.id for result in results if result.status != "ok"),
    }


def summary_text(summary: dict[str, object]) -> str:
    """The summary as printed: the counts, then every missed goal by name."""
    errors = cast(list[str], summary["errors"])
    missed = cast(list[str], summary["missed_goals"])
    text = (
        f"Goals: {summary['passed']} passed, {summary['missed']} missed, {summary['not_measured']} not measured"
        + (f"; workloads with errors: {', '.join(errors)}" if errors else "")
    )
    return text + "".join(f"\n  missed: {name}" for name in missed)


def _cell(measurement: Measurement | None, comparison: Comparison | None) -> str:
    if measurement is None:
        return "-"
    if measurement.status == "error":
        return measurement.detail or "error"
    if measurement.status != "ok":
        return measurement.status + (f" ({measurement.detail})" if measurement.detail else "")
    text = format_seconds(measurement.median_s)
    if comparison is not None and comparison.ratio is not None:
        text += f" {comparison.ratio:.3g}x" if comparison.ratio < 1000 else f" {comparison.ratio:.0f}x"
        if comparison.goal is not None:
            text += f" (goal {ratio_goal_text(comparison.goal)}: {verdict(comparison.passed)})"
    elif comparison is not None and comparison.goal is not None:
        text += f" (goal {ratio_goal_text(comparison.goal)})"
    return text


def workload_legend(results: list[WorkloadResult]) -> str:
    """One line per workload: the call, shapes and dtype, and the NumPy reference (never cut)."""
    lines = []
    for result in results:
        lines.append(f"{result.id}  {result.call}")
        lines.append(f"    inputs {inputs_text(result)}; NumPy reference: {result.reference}")
    return "\n".join(lines)


def workload_table(results: list[WorkloadResult], labels: dict[str, str]) -> str:
    """Medians per workload and step; a column per implementation that ran (the others are
    named under the table)."""
    shown = [name for name in COMPARED if ran(results, name)]
    headers = ["workload", "step", "stablerules"] + [labels[name] for name in shown]
    rows = []
    for result in results:
        for kind, step_result in (("pullback", result.pullback), ("forward", result.forward)):
            row = [result.id if kind == "pullback" else "", kind, _cell(step_result.times.get("stablerules"), None)]
            row += [_cell(step_result.times.get(name), step_result.ratios.get(name)) for name in shown]
            rows.append(row)
    text = table(headers, rows, max_cell=None)
    missing = [name for name in COMPARED if name not in shown]
    if missing:
        reasons = []
        for name in missing:
            measurement = next(iter(result.pullback.times.get(name) for result in results), None)
            reasons.append(f"{labels[name]} ({measurement.status if measurement else 'not run'})")
        text += "\nNot measured: " + ", ".join(reasons) + "; their goals count as not measured."
    return text


def bandwidth_table(results: list[WorkloadResult]) -> str:
    rows = []
    for result in results:
        band, memory = result.bandwidth, result.memory
        if band is None:
            continue
        fraction = "-" if band.fraction is None else f"{band.fraction:.2f}"
        if band.goal is not None:
            fraction += f" (>={band.goal:g} {'pass' if band.passed else 'MISS' if band.passed is False else 'n/a'})"
        extra = "-"
        if memory is not None and memory.extra_bytes is not None and memory.fraction_of_dy is not None:
            extra = f"{memory.extra_bytes / 1e6:.1f} MB ({100 * memory.fraction_of_dy:.2f}% of dy)"
            if memory.goal is not None:
                extra += f" (<{100 * memory.goal:g}% {'pass' if memory.passed else 'MISS'})"
        ours = "-" if band.pullback_gbps is None else f"{band.pullback_gbps:.3g}"
        copy = "-" if band.fresh_copy_gbps is None else f"{band.fresh_copy_gbps:.3g} ({band.fresh_copy_gbps / band.bound_gbps:.2f})"
        rows.append([
            result.id, _bytes(band.dy_bytes), ours, f"{band.bound_gbps:.3g} ({band.bound_method})", fraction, copy, extra,
        ])
    text = table(
        ["workload", "dy", "pullback GB/s", "read-once bound GB/s", "fraction", "dy.copy() GB/s (fraction)", "pullback peak extra memory"],
        rows,
    )
    if any(isinstance(result.bandwidth, Bandwidth) and result.call.startswith("concatenate") for result in results):
        text += "\n(concatenate's pullback returns views of dy: it reads nothing, so its GB/s is not a read rate.)"
    text += (
        "\n(dy.copy(): dy read once into a fresh array, the least a pullback that writes a tangent as large as dy"
        " (roll's) must do; its fraction is that pullback's ceiling on this machine.)"
    )
    return text


def _bytes(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def _ratio_text(ratio: float) -> str:
    return f"{ratio:.2g}x" if ratio < 10 else f"{ratio:.0f}x"


def plot(path: Path, document: dict[str, object]) -> None:
    """Draw the figure of a results document (:func:`draw`) and save it as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = draw(document)
    figure.savefig(path, dpi=100)
    plt.close(figure)


@dataclass
class _Row:
    """One row of a figure panel: a label on the left, a bar (or none), and a text on the
    right (the value and, for a goal, its verdict), named by the goal's name (``gid``)."""

    label: str
    value: float | None = None
    color: str = "tab:gray"
    text: str = ""
    text_color: str = "black"
    goal_at: float | None = None
    gid: str | None = None
    header: bool = False


def _verdict_color(passed: object, none: str = "dimgray") -> str:
    """Green for a goal met, red for one missed, ``none`` for no verdict."""
    return PASS_COLOR if passed is True else MISS_COLOR if passed is False else none


def _goal_words(goal: dict[str, object]) -> str:
    """``goal >= 8x: pass``: the goal as its row draws it, and the verdict."""
    target = float(cast(float, goal["target"]))
    unit, comparison = goal["unit"], str(goal["comparison"]).replace(">=", "\u2265").replace("<=", "\u2264")
    if unit == "ratio":
        words = f"goal {comparison} {_ratio_text(target)}"
        if target < 1:
            words += f", ours \u2264 {1 / target:.2g}x their time"
    elif unit == "seconds":
        words = f"goal {comparison} {format_seconds(target)}"
    else:
        words = f"goal {comparison} {target:g}"
    return f"{words}: {verdict(cast('bool | None', goal['passed']))}"


def _mapping(value: object) -> dict[str, object]:
    return cast(dict[str, object], value) if isinstance(value, dict) else {}


def _workload_rows(document: dict[str, object], goals: list[dict[str, object]], drawn: set[str]) -> list[_Row]:
    """The pullback panel: per workload a header row, a row per implementation that ran
    (bar: their time / ours), and a row for each goal of another unit (bandwidth, memory,
    a lazy result)."""
    labels = cast(dict[str, str], _mapping(document["meta"]).get("labels", {}))
    workloads = _mapping(document["workloads"])
    shown = [
        name for name in COMPARED
        if any(_mapping(_mapping(_mapping(_mapping(w).get("pullback")).get("times")).get(name)).get("status") == "ok"
               for w in workloads.values())
    ]
    rows: list[_Row] = []
    for key, record in workloads.items():
        workload = _mapping(record)
        shapes = " & ".join(str(tuple(shape)) for shape in cast(list[list[int]], workload["shapes"]))
        header = f"{key}  {workload['call']}  {shapes} {workload['dtype']} \u2192 dy {tuple(cast(list[int], workload['dy_shape']))}"
        ok = workload.get("status") == "ok"
        rows.append(_Row(header, header=True, text="" if ok else "stablerules: error", text_color=MISS_COLOR))
        pullback = _mapping(workload["pullback"])
        times, ratios = _mapping(pullback["times"]), _mapping(pullback["ratios"])
        goal_peers = {g["against"] for g in goals if g["kind"] == "ratio" and g["workload"] == key}
        for name in (name for name in COMPARED if name in shown or name in goal_peers):
            measurement, comparison = _mapping(times.get(name)), _mapping(ratios.get(name))
            label = f"vs {labels.get(name, name)}"
            if name == "numpy":
                label += f": {workload['reference']}"
            ratio = comparison.get("ratio")
            goal = next((g for g in goals if g["kind"] == "ratio" and g["workload"] == key and g["against"] == name), None)
            row = _Row(label, color=color_of(name))
            if isinstance(ratio, float):
                row.value, row.text = ratio, _ratio_text(ratio)
            else:
                row.text = str(measurement.get("status", "not run"))
                row.text_color = "dimgray"
            if goal is not None:
                row.goal_at = float(cast(float, goal["target"]))
                row.text += ("  \u00b7  " if row.text else "") + _goal_words(goal)
                row.text_color, row.gid = _verdict_color(goal["passed"]), str(goal["name"])
                drawn.add(row.gid)
            rows.append(row)
        for goal in goals:
            if goal["workload"] == key and goal["kind"] not in ("ratio", "half"):  # "half": the engines panel
                what = {
                    "bandwidth": "pullback GB/s, as a fraction of a read-once bound",
                    "memory": "pullback peak extra memory, as a fraction of dy",
                    "lazy": "a Fill cotangent's tangents that are lazy (Fill)",
                }[str(goal["kind"])]
                value = goal["value"]
                shown_value = "-" if value is None else f"{float(cast(float, value)):.2g}"
                rows.append(_Row(
                    what, text=f"{shown_value}  \u00b7  {_goal_words(goal)}", text_color=_verdict_color(goal["passed"]),
                    gid=str(goal["name"]),
                ))
                drawn.add(str(goal["name"]))
    return rows


def _engine_rows(document: dict[str, object], goals: list[dict[str, object]], drawn: set[str]) -> list[_Row]:
    """The adapters panel: ``stablerules.torch`` / ``.jax`` / ``.autograd`` against the
    engine's own ops (bar: native time / ours)."""
    rows: list[_Row] = []
    by_name = {str(goal["name"]): goal for goal in goals}
    for record in cast(list[dict[str, object]], document.get("torch", [])):
        threads = int(cast(int, record["threads"]))
        row = _Row(
            f"torch {record['engine']}, {threads} thread{'' if threads == 1 else 's'}: {record['description']}",
            color=color_of("torch"),
        )
        name = torch_goal_name(_Record(record))
        _fill_engine_row(row, record, by_name.get(name), drawn)
        rows.append(row)
    for record in cast(list[dict[str, object]], document.get("engines", [])):
        row = _Row(f"{record['engine']}: {record['name']}", color=color_of(str(record["engine"])))
        _fill_engine_row(row, record, by_name.get(engine_goal_name(_Record(record))), drawn)
        rows.append(row)
    for record in cast(list[dict[str, object]], document.get("half", [])):
        workload = str(record["workload"])
        for peer in cast(dict[str, object], record.get("goal", {})):
            goal = by_name.get(half_goal_name(workload, peer))
            if goal is None:
                continue
            ahead = _mapping(_mapping(record.get("ahead")).get(peer))
            label = f"{peer} bf16 vs ours bf16, {workload}: lead in bf16 / lead in float32"
            if ahead:
                label += f" ({float(cast(float, ahead['bfloat16'])):.2g}x / {float(cast(float, ahead['float32'])):.2g}x)"
            row = _Row(label, color=color_of(peer))
            _fill_engine_row(row, {"ratio": goal["value"], "error": record.get("error"), "tiny": record.get("tiny")}, goal, drawn)
            rows.append(row)
    return rows


class _Record:
    """Attribute access to a JSON row, for the goal-name functions."""

    def __init__(self, record: dict[str, object]) -> None:
        self.__dict__.update(record)


def _fill_engine_row(row: _Row, record: dict[str, object], goal: dict[str, object] | None, drawn: set[str]) -> None:
    ratio = record.get("ratio")
    if record.get("error"):
        row.text, row.text_color = str(record["error"]), MISS_COLOR
        return
    if isinstance(ratio, (int, float)):
        row.value, row.text = float(ratio), _ratio_text(float(ratio))
    if goal is None:
        return
    row.goal_at = float(cast(float, goal["target"]))
    if goal["passed"] is None and record.get("tiny"):
        row.text += f"  \u00b7  goal \u2265 {_ratio_text(row.goal_at)}: tiny sizes, not measured"
        row.text_color = "dimgray"
    else:
        row.text += f"  \u00b7  {_goal_words(goal)}"
        row.text_color = _verdict_color(goal["passed"])
    row.gid = str(goal["name"])
    drawn.add(row.gid)


def _cache_rows(document: dict[str, object], goals: list[dict[str, object]], drawn: set[str]) -> list[_Row]:
    """The compile-cache panel: seconds to a first result and of a warm call (bar), and the
    extent sweeps (kernels compiled after the first extent: text only)."""
    cache = _mapping(document["cache"])
    rows: list[_Row] = []
    for key, record in _mapping(cache.get("figures")).items():
        figure = _mapping(record)
        goal = next((g for g in goals if g["kind"] == "cache" and g["against"] == key), None)
        seconds = figure.get("seconds")
        row = _Row(str(figure["label"]))
        if isinstance(seconds, float):
            row.value, row.text = seconds, format_seconds(seconds)
            row.color = _verdict_color(figure.get("passed"), NO_GOAL_COLOR)
        else:
            row.text, row.text_color = str(figure.get("detail") or figure.get("status")), MISS_COLOR
        if goal is not None:
            row.goal_at = float(cast(float, goal["target"]))
            row.text += f"  \u00b7  {_goal_words(goal)}"
            row.text_color, row.gid = _verdict_color(goal["passed"]), str(goal["name"])
            drawn.add(row.gid)
        rows.append(row)
    for goal in goals:
        if goal["kind"] == "sweep":
            value = goal["value"]
            rows.append(_Row(
                f"{goal['against']}: kernels compiled after the first of 8 leading extents",
                text=f"{'-' if value is None else f'{float(cast(float, value)):g}'}  \u00b7  {_goal_words(goal)}",
                text_color=_verdict_color(goal["passed"]), gid=str(goal["name"]),
            ))
            drawn.add(str(goal["name"]))
    return rows


def _percall_rows(document: dict[str, object], goals: list[dict[str, object]], drawn: set[str]) -> list[_Row]:
    """The per-call panel: each op's steady ``rrule`` on small arrays as a fraction of its
    goal (twice the forward alone plus 2 us; left of 1 meets it)."""
    rows: list[_Row] = []
    by_op = {str(goal["against"]): goal for goal in goals if goal["kind"] == "percall"}
    for record in cast(list[dict[str, object]], document.get("percall", [])):
        op = str(record["op"])
        rrule_s, forward_s = float(cast(float, record["rrule_s"])), float(cast(float, record["forward_s"]))
        row = _Row(f"{op}: rrule {rrule_s * 1e6:.2f} us, forward alone {forward_s * 1e6:.2f} us", color=NO_GOAL_COLOR)
        goal = by_op.get(op)
        if goal is not None and goal["value"] is not None:
            row.value = float(cast(float, goal["value"]))
            row.goal_at = float(cast(float, goal["target"]))
            row.text = f"{row.value:.2f}  \u00b7  {_goal_words(goal)}"
            row.text_color, row.gid = _verdict_color(goal["passed"]), str(goal["name"])
            row.color = _verdict_color(goal["passed"], NO_GOAL_COLOR)
            drawn.add(row.gid)
        rows.append(row)
    return rows


def _draw_panel(bars: Axes, notes: Axes, rows: list[_Row], title: str, xlabel: str, reference: float | None) -> None:
    """Horizontal bars (log axis) with one label per row on the left and each row's value and
    verdict in the notes column on the right: nothing is written over a bar or another text."""
    positions = list(range(len(rows)))
    for y, row in zip(positions, rows):
        if row.value is not None and row.value > 0:
            bars.barh(y, row.value, height=0.7, color=row.color)
        if row.goal_at is not None:
            bars.plot([row.goal_at] * 2, [y - 0.45, y + 0.45], color="black", linewidth=2.5, solid_capstyle="butt")
        if row.text:
            text = notes.text(0.0, y, row.text, va="center", ha="left", fontsize=8.5, color=row.text_color,
                              fontweight="bold" if row.gid else "normal")
            if row.gid:
                text.set_gid(row.gid)
    values = [v for row in rows for v in (row.value, row.goal_at) if v is not None and v > 0]
    low, high = (min(values), max(values)) if values else (0.5, 2.0)
    if reference is not None:
        low, high = min(low, reference), max(high, reference)
        bars.axvline(reference, color="gray", linewidth=0.8, linestyle="--")
    bars.set_xscale("log")
    bars.set_xlim(low / 2, high * 2)
    bars.set_ylim(len(rows) - 0.5, -0.5)
    bars.set_yticks(positions, [row.label for row in rows], fontsize=8.5)
    for tick, row in zip(bars.get_yticklabels(), rows):
        if row.header:
            tick.set_fontweight("bold")
    bars.set_xlabel(xlabel, fontsize=9)
    bars.set_title(title, fontsize=11, loc="left")
    bars.grid(axis="x", color="0.9", linewidth=0.6)
    bars.set_axisbelow(True)
    notes.set_xlim(0, 1)
    notes.axis("off")


def draw(document: dict[str, object]) -> Figure:
    """The figure of a results document (``results.json``): three panels of horizontal bars,
    the pullback's speed against each implementation that ran (their time / ours, per
    workload), the engine adapters against each engine's own ops, and the compile cache's
    times. Every goal is drawn in its own row (a black tick at the goal, against that row's
    peer) and named, with its verdict, in the column on the right; a row label is one line.
    Colours: one per implementation in the bars; green / red mean goal met / missed (the
    verdicts, and the cache's bars), gray no goal. Every goal of the document is drawn (an
    ``AssertionError`` otherwise)."""
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    goals = cast(list[dict[str, object]], document["goals"])
    drawn: set[str] = set()
    panels = [
        (_workload_rows(document, goals, drawn), "Pullback speed: how many times faster stablerules' pullback is than each implementation (medians, same run)",
         "their time / stablerules' time (log scale; right of the dashed line at 1: stablerules is faster)", 1.0),
        (_engine_rows(document, goals, drawn), "Inside the engines: stablerules' ops through stablerules.torch / .jax / .autograd, against each engine's own ops",
         "the engine's own time / ours (log scale; right of 1: ours is faster)", 1.0),
        (_percall_rows(document, goals, drawn), "Per call: a steady rrule of each op on small arrays, as a fraction of its goal (2x the forward alone + 2 us)",
         "rrule time / goal (log scale; left of the dashed line at 1: the goal is met)", 1.0),
        (_cache_rows(document, goals, drawn), "Compile cache: time to a first result (fresh processes) and of a warm call",
         "seconds (log scale)", None),
    ]
    missing = {str(goal["name"]) for goal in goals} - drawn
    assert not missing, f"goals not drawn: {sorted(missing)}"
    if not panels[1][0]:
        panels[1] = ([_Row("not measured: PyTorch not installed, and no --engines run for JAX / HIPS autograd")], *panels[1][1:])
    heights = [len(rows) + 3 for rows, *_ in panels]
    figure = plt.figure(figsize=(18, 0.25 * sum(heights) + 1.5), layout="constrained")
    grid = figure.add_gridspec(len(panels), 2, height_ratios=heights, width_ratios=[2.0, 1])
    labels = cast(dict[str, str], _mapping(document["meta"]).get("labels", {}))
    for index, (rows, title, xlabel, reference) in enumerate(panels):
        bars = figure.add_subplot(grid[index, 0])
        notes = figure.add_subplot(grid[index, 1], sharey=bars)
        _draw_panel(bars, notes, rows, title, xlabel, reference)
    shown = {row.color for rows, *_ in panels[:2] for row in rows if row.value is not None}
    handles: list[Artist] = [
        Patch(color=color_of(name), label=labels.get(name, name)) for name in COMPARED if color_of(name) in shown
    ]
    handles += [
        Line2D([], [], color="black", linewidth=2.5, label="goal of that row"),
        Patch(color=PASS_COLOR, label="goal met"), Patch(color=MISS_COLOR, label="goal missed"),
        Patch(color=NO_GOAL_COLOR, label="no goal"),
    ]
    figure.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9, frameon=False)
    summary = _mapping(document["summary"])
    figure.suptitle(
        f"{document['title']}\nGoals: {summary.get('passed')} passed, {summary.get('missed')} missed, "
        f"{summary.get('not_measured')} not measured (every verdict is a row on the right)",
        fontsize=10,
    )
    return figure


class _Progress:
    """tqdm on stderr when installed (shown on a terminal), else a silent counter."""

    def __init__(self, total: int) -> None:
        self._bar: object | None = None
        try:
            tqdm: ModuleType = import_module("tqdm")
            self._bar = tqdm.tqdm(total=total, file=sys.stderr, disable=None, desc="bench", unit="step")
        except ImportError:
            self._bar = None

    def step(self, name: str) -> None:
        if self._bar is not None:
            getattr(self._bar, "set_postfix_str")(name)
            getattr(self._bar, "update")(1)

    def close(self) -> None:
        if self._bar is not None:
            getattr(self._bar, "close")()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (under 2 minutes on 2 cores)")
    parser.add_argument("--large", action="store_true", help="add W6: kron(100x200, 300x100), a 4.8 GB cotangent")
    parser.add_argument("--no-peers", action="store_true", help="skip JAX, PyTorch and HIPS autograd")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes and few repeats (for the test)")
    parser.add_argument("--engines", action="store_true", help="add the stablerules.jax / stablerules.autograd rows (bench/engines.py) and W3/W10 in bfloat16 (bench/half.py)")
    parser.add_argument("--models", action="store_true", help="add the real models (bench/models.py); --engines runs them too")
    parser.add_argument("--indexing", action="store_true", help="add W10-W12, the indexing pullbacks (bench/indexing.py)")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results", help="output folder (default bench/results)")
    args = parser.parse_args(argv)

    prepare_main_process()
    import stablerules as sr
    from peers import load_peers
    from workloads import workloads

    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    budget = Budget.for_mode(mode)
    started = time.perf_counter()
    peers = load_peers(not args.no_peers)
    labels = {"numpy": "numpy reference"} | {name: peer.label for name, peer in peers.items()}
    chosen = workloads(tiny=args.tiny, large=args.large)
    progress = _Progress(total=len(chosen) * (3 + len(peers)) + CACHE_STEPS)
    try:
        results = [run_workload(w, peers, budget, progress.step) for w in chosen]
        cache = run_cache_report(mode, peers["jax"], progress.step)
    finally:
        progress.close()
    percall = import_module("percall")  # steady rrule + pullback of every op on small arrays
    percall_rows = percall.run_percall(mode)
    # stablerules.torch against torch's own ops (bench/engines_torch.py), and with --engines
    # the stablerules.jax / stablerules.autograd rows (bench/engines.py): their goals are
    # counted with the others
    torch_rows = import_module("engines_torch").run_torch_rows(mode) if peers["torch"].status == "ok" else []
    engine_rows, engines_missing = run_engine_rows(budget) if args.engines else ([], [])
    models = import_module("models").run_models(mode) if args.models or args.engines else None
    half = import_module("half") if args.engines else None  # W3 and W10 in bfloat16
    half_rows = half.run_half(mode) if half is not None else []
    goals = collect_goals(results, cache, torch_rows, engine_rows, half_rows) + percall.goals(percall_rows)
    info = machine()
    meta: dict[str, object] = {
        "schema": SCHEMA,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "stablerules": sr.__version__,
        "machine": info,
        "load_average": load_average(),
        "peers": {name: (peer.version if peer.status == "ok" else peer.status) for name, peer in peers.items()},
        "labels": labels,
        "mode": mode,
        "command": "python bench/run.py" + "".join(f" {arg}" for arg in (argv if argv is not None else sys.argv[1:])),
        "args": {"quick": args.quick, "large": args.large, "no_peers": args.no_peers, "tiny": args.tiny, "engines": args.engines,
                 "models": args.models},
        "seconds": round(time.perf_counter() - started, 1),
    }
    peer_text = ", ".join(f"{name} {peer.version if peer.status == 'ok' else peer.status}" for name, peer in peers.items())
    title = (
        f"stablerules {sr.__version__} · {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB · "
        f"numpy {info['numpy']}, numba {info['numba']} · {peer_text} · {mode} mode · {meta['date']}"
    )
    document: dict[str, object] = {
        "meta": meta,
        "title": title,
        "workloads": {result.id: compact(asdict(result)) for result in results},
        "cache": cache.as_json(),
        "torch": [asdict(row) | {"threads": int(row.threads), "passed": row.passed} for row in torch_rows],
        "engines": [asdict(row) for row in engine_rows],
        "percall": [asdict(row) for row in percall_rows],
        **({"models": models} if models is not None else {}),
        **({"half": half.as_json(half_rows)} if half is not None else {}),
        "goals": goals,
        "summary": summarize(goals, results),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    print(title)
    print("\nWorkloads:\n")
    print(workload_legend(results))
    print("\nMedians; ratio = their time / stablerules' time, above 1: stablerules is faster (goals from the issues).\n")
    print(workload_table(results, labels))
    print("\nRead-the-cotangent-once bound, same cotangent, same run:\n")
    print(bandwidth_table(results))
    if torch_rows:
        print("\nstablerules.torch vs torch's own ops, fwd+bwd, median of 3 same-run ratios:\n")
        print(import_module("engines_torch").torch_table(torch_rows))
    print("\nPer call, small arrays, steady state (medians, same run):\n")
    print(percall.table(percall_rows))
    if args.engines:
        from engines import render

        print("\nEngine adapters, ours vs the engine's own composition (medians of 3 rounds):\n")
        print(render(engine_rows) + "".join(f"\nnot run: {line}" for line in engines_missing))
    if half is not None:
        print("\nW3 and W10 in bfloat16 (bench/half.py), 1 thread, medians of same-run rounds; ahead = the peer's time / ours, "
              "same dtype; goal: ahead in bf16 / ahead in float32 >= 1:\n")
        print(half.render(half_rows))
    if models is not None:
        print("\nReal models, ours / stock (below 1: ours faster), median of same-run rounds (bench/models.py):\n")
        print(import_module("models").render(models))
    if args.indexing:
        from indexing import run as indexing_run

        print("\nIndexing pullbacks W10-W12 (bench/indexing.py), medians of 3 same-run ratios:\n")
        print(indexing_run(args.quick or args.tiny, 3, not args.no_peers))
    print("\nCompile cache (fresh processes, throwaway cache dirs):\n")
    print_report(cache)
    print("\n" + summary_text(cast(dict[str, object], document["summary"])))
    try:
        plot(args.out / "results.png", document)
    except ImportError as error:
        print(f"no plot: {error} (pip install 'stablerules[bench]')", file=sys.stderr)
        return 1
    print(f"\nWrote {args.out / 'results.json'} and {args.out / 'results.png'} ({meta['seconds']} s)")
    return 0


def run_engine_rows(budget: Budget) -> tuple[list[EngineRow], list[str]]:
    """The ``stablerules.jax`` / ``stablerules.autograd`` rows (``engines.run_cases``), and
    the engines that could not be imported."""
    from engines import run_cases

    cases: list[EngineCase] = []
    missing: list[str] = []
    for module_name in ("engines_jax", "engines_autograd"):
        try:
            module = import_module(module_name)
        except ImportError as error:
            missing.append(f"{module_name}: {error}")
            continue
        cases.extend(module.cases())
    return run_cases(cases, budget), missing


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages when the run ended (None where unknown): how busy
    the machine was besides this run."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
