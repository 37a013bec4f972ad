"""The main job: stablerules' seed workloads and compile-cache figures against NumPy and peers.

    python bench/run.py [--quick] [--large] [--no-peers] [--tiny] [--engines] [--out DIR]

For each workload W1-W5, W7, W8, W9, W9s (W6 with ``--large``, a 4.8 GB cotangent), the pullback and the
forward are timed (medians) in this one process: stablerules, the best NumPy formulation,
and, when installed, JAX's jitted vjp, PyTorch autograd (CPU) and HIPS autograd. A ratio is
``peer_time / stablerules_time`` (above 1: stablerules is faster), shown beside the issue's
goal. A read-the-cotangent-once bandwidth bound is measured on the same cotangent. Then the
compile-cache figures (``cache_report.py``). Results: a table on stdout, ``results.json`` and
``results.png`` in ``--out`` (default ``bench/results/``).

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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from cache_report import BENCH_DIR, CACHE_STEPS, CacheReport, prepare_main_process, print_report, run_cache_report
from timing import Budget, Timing, format_seconds, measure, table

if TYPE_CHECKING:  # imported for real inside main(), after prepare_main_process()
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


def collect_goals(results: list[WorkloadResult], cache: CacheReport) -> list[dict[str, object]]:
    """Every goal from the issues with its measured value and verdict (None: not measured).

    ``target`` is the goal's number, ``comparison`` how ``value`` must relate to it (">=" or
    "<="), and ``unit`` what both are in: "ratio" (the other's time / stablerules' time),
    "fraction" (of a bound or of the cotangent's bytes, named in ``name``), "seconds" or
    "kernels".
    """
    goals: list[dict[str, object]] = []

    def add(name: str, text: str, target: float, comparison: str, unit: str, value: float | None, passed: bool | None) -> None:
        goals.append({
            "name": name, "goal": text, "target": target, "comparison": comparison, "unit": unit,
            "value": value, "passed": passed,
        })

    for result in results:
        for name, comparison in result.pullback.ratios.items():
            if comparison.goal is not None:
                reference = f" ({result.reference})" if name == "numpy" else ""
                add(
                    f"{result.id} pullback vs {name}{reference}",
                    f">= {comparison.goal:g} ({ratio_goal_text(comparison.goal)})",
                    comparison.goal, ">=", "ratio", comparison.ratio, comparison.passed,
                )
        if result.bandwidth is not None and result.bandwidth.goal is not None:
            add(
                f"{result.id} pullback bandwidth / read-once bound", f">= {result.bandwidth.goal:g}",
                result.bandwidth.goal, ">=", "fraction", result.bandwidth.fraction, result.bandwidth.passed,
            )
        if result.lazy is not None:
            add(
                f"{result.id} pullback of a Fill cotangent is a Fill (O(1))", "a Fill",
                1, "==", "boolean", result.lazy, result.lazy,
            )
        if result.memory is not None and result.memory.goal is not None:
            add(
                f"{result.id} pullback peak extra memory / cotangent bytes", f"<= {result.memory.goal:g}",
                result.memory.goal, "<=", "fraction", result.memory.fraction_of_dy, result.memory.passed,
            )
    for key, figure in cache.figures.items():
        if figure.goal_s is not None:
            add(
                f"cache {key}",
                f"<= {format_seconds(figure.goal_s)}" + (" with 0 compiles" if key.startswith(("warm", "fresh")) else ""),
                figure.goal_s, "<=", "seconds", figure.seconds, figure.passed,
            )
    for sweep in cache.sweep:
        add(
            f"cache sweep {sweep.op}: kernels after the first extent", "0", 0, "<=", "kernels",
            sweep.kernels_after_first if sweep.status == "ok" else None, sweep.passed,
        )
    return goals


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


def plot(path: Path, results: list[WorkloadResult], cache: CacheReport, title: str, labels: dict[str, str]) -> None:
    """Draw the figure (:func:`draw`) and save it as a PNG."""
    import matplotlib.pyplot as plt

    figure = draw(results, cache, title, labels)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def draw(results: list[WorkloadResult], cache: CacheReport, title: str, labels: dict[str, str]) -> Figure:
    """Two panels: the pullback's speed against each implementation that ran (log axis, value
    on each bar, the issue's goal as a tick with its verdict), and the compile-cache times.
    Colours: one per implementation in the top panel; green / red / gray mean goal met /
    missed / no goal everywhere (goal verdict texts, cache bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shown = [name for name in COMPARED if ran(results, name)]
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(14, 12), gridspec_kw={"height_ratios": [3, 2]}, layout="constrained"
    )
    width = min(0.8 / max(len(shown), 1), 0.3)
    values: list[float] = []
    for index, result in enumerate(results):
        for offset, name in enumerate(shown):
            x = index + width * (offset - (len(shown) - 1) / 2)
            comparison = result.pullback.ratios.get(name)
            ratio = comparison.ratio if comparison else None
            if ratio is not None:
                top.bar(x, ratio, width * 0.9, color=color_of(name))
                top.text(x, ratio, _ratio_text(ratio), ha="center", va="bottom", fontsize=8, fontweight="bold")
                values.append(ratio)
            if comparison is not None and comparison.goal is not None and ratio is not None:
                top.plot([x - width / 2, x + width / 2], [comparison.goal] * 2, color="black", linewidth=2.5)
                words = f"goal {_ratio_text(comparison.goal)}" if comparison.goal >= 1 else f"goal: within {1 / comparison.goal:g}x"
                top.text(
                    x, comparison.goal * 0.97, f"{words}: {verdict(comparison.passed)}", ha="center", va="top",
                    fontsize=7, fontweight="bold", color=PASS_COLOR if comparison.passed else MISS_COLOR,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1},
                )
                values.append(comparison.goal)
        if result.status != "ok":
            top.text(index, 1.0, "stablerules: error", ha="center", va="bottom", color=MISS_COLOR, rotation=90)
    top.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    top.set_yscale("log")
    low, high = (min(values), max(values)) if values else (1.0, 1.0)
    top.set_ylim(min(low, 0.5) / 3, max(high, 2.0) * 3)
    top.set_xlim(-0.6, len(results) - 0.4)
    top.set_xticks(
        range(len(results)),
        [
            f"{r.id}: {textwrap.fill(r.call, 32)}\n" + inputs_text(r).replace(" -> ", "\n")
            + f"\nNumPy: {textwrap.fill(r.reference, 32)}"
            for r in results
        ],
        fontsize=7.5,
    )
    top.set_ylabel("their time / stablerules' time (log scale)\nabove 1: stablerules is faster")
    top.set_title("Pullback (reverse-mode) speed of stablerules against each implementation, medians", fontsize=11)
    handles: list[Artist] = [Patch(color=color_of(name), label=labels[name]) for name in shown]
    handles.append(Line2D([], [], color="black", linewidth=2.5, label="goal from the issues (text: green met, red missed)"))
    top.legend(handles=handles, fontsize=8, loc="upper left")
    missing = [labels[name] for name in COMPARED if name not in shown]
    if missing:
        top.text(
            0.99, 0.98, "not installed or skipped: " + ", ".join(missing), transform=top.transAxes,
            ha="right", va="top", fontsize=8, color="dimgray",
        )

    names = list(cache.figures)
    seconds = [cache.figures[name].seconds for name in names]
    for row, name in enumerate(names):
        item = cache.figures[name]
        if item.seconds is not None:
            color = {True: PASS_COLOR, False: MISS_COLOR, None: NO_GOAL_COLOR}[item.passed]
            bottom.barh(row, item.seconds, color=color)
            note = "" if item.goal_s is None else f"  (goal <= {format_seconds(item.goal_s)}: {verdict(item.passed)})"
            bottom.text(
                item.seconds * 1.15, row, format_seconds(item.seconds) + note, va="center", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1},
            )
        else:
            bottom.text(1e-6, row, " " + (item.detail or item.status), va="center", fontsize=8, color=MISS_COLOR)
        if item.goal_s is not None:
            bottom.plot([item.goal_s] * 2, [row - 0.4, row + 0.4], color="black", linewidth=2.5)
    bottom.set_xscale("log")
    known = [s for s in seconds if s is not None] + [f.goal_s for f in cache.figures.values() if f.goal_s]
    bottom.set_xlim(min(known + [1e-6]) / 3, max(known + [1.0]) * 30)
    bottom.set_yticks(range(len(names)), [cache.figures[name].label for name in names], fontsize=8)
    bottom.invert_yaxis()
    bottom.set_xlabel("seconds (log scale)")
    bottom.set_title("Compile cache: time to a first result, and a warm call (fresh processes)", fontsize=11)
    bottom.legend(
        handles=[
            Patch(color=PASS_COLOR, label="goal met"), Patch(color=MISS_COLOR, label="goal missed"),
            Patch(color=NO_GOAL_COLOR, label="no goal"), Line2D([], [], color="black", linewidth=2.5, label="goal"),
        ],
        fontsize=8, loc="lower right",
    )
    figure.suptitle(textwrap.fill(title, 160), fontsize=9)
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
    parser.add_argument("--engines", action="store_true", help="add the stablerules.jax / stablerules.autograd rows (bench/engines.py)")
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
    goals = collect_goals(results, cache)
    # issue 16: stablerules.torch against torch's own ops (bench/engines_torch.py)
    torch_rows = import_module("engines_torch").run_torch_rows(mode) if peers["torch"].status == "ok" else []
    info = machine()
    meta: dict[str, object] = {
        "schema": SCHEMA,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "stablerules": sr.__version__,
        "machine": info,
        "peers": {name: (peer.version if peer.status == "ok" else peer.status) for name, peer in peers.items()},
        "mode": mode,
        "args": {"quick": args.quick, "large": args.large, "no_peers": args.no_peers, "tiny": args.tiny},
        "seconds": round(time.perf_counter() - started, 1),
    }
    document = {
        "meta": meta,
        "workloads": {result.id: compact(asdict(result)) for result in results},
        "cache": cache.as_json(),
        "torch": [asdict(row) | {"passed": row.passed} for row in torch_rows],
        "goals": goals,
        "summary": {
            "passed": sum(1 for goal in goals if goal["passed"] is True),
            "missed": sum(1 for goal in goals if goal["passed"] is False),
            "not_measured": sum(1 for goal in goals if goal["passed"] is None),
            "errors": sorted(result.id for result in results if result.status != "ok"),
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    peer_text = ", ".join(f"{name} {peer.version if peer.status == 'ok' else peer.status}" for name, peer in peers.items())
    title = (
        f"stablerules {sr.__version__} · {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB · "
        f"numpy {info['numpy']}, numba {info['numba']} · {peer_text} · {mode} mode"
    )
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
    print("\nCompile cache (fresh processes, throwaway cache dirs):\n")
    print_report(cache)
    summary = document["summary"]
    assert isinstance(summary, dict)
    print(
        f"\nGoals: {summary['passed']} passed, {summary['missed']} missed, {summary['not_measured']} not measured"
        + (f"; workloads with errors: {', '.join(summary['errors'])}" if summary["errors"] else "")
    )
    if args.engines:
        from engines import engine_report

        print("\nEngine adapters, ours vs the engine's own composition (medians of 3 rounds):\n")
        print(engine_report(budget))
    if args.indexing:
        from indexing import run as indexing_run

        print("\nIndexing pullbacks W10-W12 (bench/indexing.py), medians of 3 same-run ratios:\n")
        print(indexing_run(args.quick or args.tiny, 3, not args.no_peers))
    try:
        plot(args.out / "results.png", results, cache, title, labels)
    except ImportError as error:
        print(f"no plot: {error} (pip install 'stablerules[bench]')", file=sys.stderr)
        return 1
    print(f"\nWrote {args.out / 'results.json'} and {args.out / 'results.png'} ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
