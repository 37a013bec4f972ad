"""Compile-cache figures (issue 2, issue 10), measured in fresh subprocesses.

Run alone to print the issue-2 figures::

    python bench/cache_report.py [--quick]

Figures (medians):

- ``import``: ``import stablerules`` in a fresh interpreter (numpy's import included, as a
  user pays it, with Python's bytecode caches on even where this environment turned them
  off: a user's installed packages have theirs); goal <= 60 ms. The ops' modules load on
  first use, so this is the core's import; ``fresh_first`` includes the op's module.
- ``cold_first``: the first signature (``repeat(arange(100.), Val(7), axis=Val(0))``, rrule +
  pullback) in a fresh process with an empty cache directory: Numba's start-up and the
  compiles.
- ``cold_later``: further new signatures in that same process (another dtype or ndim each);
  goal <= 400 ms for rrule + pullback.
- ``warm_first``: a signature's first call in a fresh process whose disk cache was filled by
  the cold process, timed after ``import stablerules, numba``: the process's first kernel
  (served from object code; with ``STABLERULES_DIRECT_LOAD=0`` Numba's one-time start-up,
  ~0.25 s, is included); no goal. ``warm_later``: a second
  signature's first call in that process (a warm process meeting a signature for the first
  time), also from disk; goal <= 15 ms with 0 compiles.
- ``fresh_first``: the first gradient of a fresh process whose disk cache was filled by the
  cold process, as its user pays it: ``import stablerules`` (NumPy imported before the clock)
  plus the first signature's rrule + pullback, with everything the call imports or loads (the
  op's module among them: the bench's ``workloads`` loads no op before its first call);
  kernels served from their stored object code, neither Numba nor LLVM imported (issues 19
  and 37), bytecode caches on as in an installed package; goal <= 25 ms with 0 compiles.
  ``fresh_later``: each further signature's first call in those processes; goal <= 3 ms.
- ``steady_hit``: the pullback of the 700-element cotangent once everything is cached
  (in this process); goal <= 3 us.
- ``sweep``: 8 leading extents with the same static arguments, per op: kernels compiled or
  loaded at each extent (goal: only at the first), with JAX's per-shape compile beside it.

Every subprocess gets its own temporary ``STABLERULES_CACHE_DIR``; the user's cache is never
read or written. The children are this file run with ``--child MODE``; they print one line
``BENCH-RESULT {json}``. This module imports neither numpy nor stablerules at the top, so a
child can time those imports itself.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from timing import Budget, format_seconds, measure, table

if TYPE_CHECKING:
    from peers import Peer
    from workloads import Workload

Json: TypeAlias = "None | bool | int | float | str | list[Json] | dict[str, Json]"

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
MARKER = "BENCH-RESULT "

WARM_GOAL_S = 0.015
IMPORT_GOAL_S = 0.060
FRESH_GOAL_S = 0.025  # issue 37's (issue 19's was 50 ms)
FRESH_LATER_GOAL_S = 0.003
LATER_COLD_GOAL_S = 0.400
STEADY_GOAL_S = 3e-6
SWEEP_EXTENTS = (1, 2, 3, 5, 8, 13, 21, 34)
WARM_FIRST = "fresh process, first kernel from disk"
WARM_LATER = "warm process, new signature from disk"
FRESH_FIRST = "fresh process, first gradient (no numba)"
FRESH_LATER = "fresh process, each further signature"


# --- results ---------------------------------------------------------------------------------


@dataclass
class CacheFigure:
    """One compile-cache figure: a median over ``runs`` (seconds), its goal and counters."""

    label: str
    status: str = "ok"
    seconds: float | None = None
    runs: list[float] = field(default_factory=list)
    goal_s: float | None = None
    passed: bool | None = None
    compiles: int | None = None
    disk_hits: int | None = None
    detail: str | None = None
    gc_seconds: float | None = None  # median time Python's cyclic GC ran inside the timed call


@dataclass
class SweepResult:
    """Kernels compiled (or loaded from disk) at each of 8 leading extents of one signature."""

    op: str
    call: str
    extents: list[int]
    status: str = "ok"
    detail: str | None = None
    compiles: list[int] = field(default_factory=list)
    disk_hits: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    passed: bool | None = None
    jax_status: str = "skipped"
    jax_seconds: list[float] = field(default_factory=list)

    @property
    def kernels_after_first(self) -> int:
        return sum(self.compiles[1:]) + sum(self.disk_hits[1:])


@dataclass
class CacheReport:
    figures: dict[str, CacheFigure] = field(default_factory=dict)
    sweep: list[SweepResult] = field(default_factory=list)
    disk_bytes_per_kernel: float | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "figures": {name: asdict(figure) for name, figure in self.figures.items()},
            "sweep": [dict(asdict(result), kernels_after_first=result.kernels_after_first) for result in self.sweep],
            "disk_bytes_per_kernel": self.disk_bytes_per_kernel,
        }


def _error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return "error: " + " ".join(text.split())


# --- the signatures the figures use ------------------------------------------------------------


def first_signature() -> Workload:
    """The 700-element signature of issue 2 (W1's call)."""
    from workloads import RepeatAxis, Workload

    return Workload("cache-first", 3, RepeatAxis(7, 0), ((100,),), "float64", "", arange_input=True)


def later_signatures() -> list[Workload]:
    """New signatures for the cold-later figure, each needing kernels of its own: another
    dtype, or another static loop nest (repeating a middle axis puts the count between two
    extents). Repeating the last axis of a (20, 5) array would not do: it flattens to the
    first signature's nest and shares its kernels."""
    from workloads import RepeatAxis, Workload

    return [
        Workload("cache-later-1", 3, RepeatAxis(7, 0), ((100,),), "float32", ""),
        Workload("cache-later-2", 3, RepeatAxis(5, 0), ((20, 5),), "float64", ""),
        Workload("cache-later-3", 3, RepeatAxis(3, 0), ((20, 5),), "float32", ""),
    ]


def sweep_workloads(extent: int) -> list[Workload]:
    """One call per op family at leading extent ``extent``, static arguments fixed."""
    from workloads import Concatenate, Kron, RepeatInnerOuter, Workload

    return [
        Workload("sweep-repeat", 3, RepeatInnerOuter((7, 1, 10)), ((extent, 3, 4),), "float64", ""),
        Workload("sweep-concatenate", 4, Concatenate(1), ((extent, 8, 7, 7), (extent, 8, 7, 7)), "float32", ""),
        Workload("sweep-kron", 5, Kron(), ((extent, 20), (30, 10)), "float64", ""),
    ]


# --- children ----------------------------------------------------------------------------------


def _first_call(workload: Workload) -> dict[str, Json]:
    """rrule + pullback of a signature's first call, with the cache counters it moved."""
    import stablerules as sr
    from workloads import call_ours_rrule

    arrays, dy = workload.make_inputs()
    collections: list[float] = []
    clock: list[float] = []

    def on_collection(phase: str, info: dict[str, int]) -> None:
        # Python's cyclic GC runs when enough objects survive; loading a kernel adds many
        # (Numba's heap is large), so a full collection often lands in a first call.
        if phase == "start":
            clock.append(time.perf_counter())
        elif clock:
            collections.append(time.perf_counter() - clock.pop())

    gc.callbacks.append(on_collection)
    try:
        before = sr.cache_info()
        started = time.perf_counter()
        _, back = call_ours_rrule(workload.spec, arrays)
        middle = time.perf_counter()
        back(dy)
        finished = time.perf_counter()
        after = sr.cache_info()
    except Exception as error:
        return {"error": _error_text(error)}
    finally:
        gc.callbacks.remove(on_collection)
    return {
        "gc_s": sum(collections),
        "seconds": finished - started,
        "rrule_s": middle - started,
        "pullback_s": finished - middle,
        "compiles": after.compiles - before.compiles,
        "disk_hits": after.disk_hits - before.disk_hits,
        "compile_s": after.compile_seconds - before.compile_seconds,
    }


def _child_cold(later: int) -> dict[str, Json]:
    started = time.perf_counter()
    import stablerules  # noqa: F401  (timed: the first thing a user does)

    import_s = time.perf_counter() - started
    first = _first_call(first_signature())
    return {"import_s": import_s, "first": first, "later": [_first_call(w) for w in later_signatures()[:later]]}


def _child_warm() -> dict[str, Json]:
    started = time.perf_counter()
    import numba  # noqa: F401
    import numpy  # noqa: F401

    import stablerules  # noqa: F401

    import_s = time.perf_counter() - started
    return {"import_s": import_s, "first": _first_call(first_signature()), "later": _first_call(later_signatures()[0])}


def _child_fresh(later: int) -> dict[str, Json]:
    import numpy  # noqa: F401  (NumPy's own import is not the library's)

    started = time.perf_counter()
    import stablerules  # noqa: F401

    import_s = time.perf_counter() - started
    first = _first_call(first_signature())
    call_s = first.get("seconds")
    if isinstance(call_s, float):  # the first gradient as the user pays it: import + first call
        first.update(call_s=call_s, import_s=import_s, seconds=import_s + call_s)
    further: list[Json] = [_first_call(w) for w in later_signatures()[:later]]
    return {"import_s": import_s, "first": first, "later": further, "numba": "numba" in sys.modules}


def _child_sweep() -> dict[str, Json]:
    import stablerules  # noqa: F401

    results: dict[str, Json] = {}
    for position in range(len(sweep_workloads(1))):
        calls: list[Json] = []
        for extent in SWEEP_EXTENTS:
            call = _first_call(sweep_workloads(extent)[position])
            calls.append(call)
            if "error" in call:
                break
        results[sweep_workloads(1)[position].id] = calls
    return results


def _child_main(mode: str, later: int) -> None:
    if mode == "cold":
        result = _child_cold(later)
    elif mode == "warm":
        result = _child_warm()
    elif mode == "fresh":
        result = _child_fresh(later)
    elif mode == "sweep":
        result = _child_sweep()
    else:
        raise SystemExit(f"unknown child mode {mode!r}")
    print(MARKER + json.dumps(result), flush=True)


# --- the parent side -----------------------------------------------------------------------------


def child_environment(cache_dir: Path) -> dict[str, str]:
    """This environment with its own cache dir, the disk cache on, and the checkout importable."""
    env = dict(os.environ)
    env["STABLERULES_CACHE_DIR"] = str(cache_dir)
    env["STABLERULES_DISK_CACHE"] = "1"
    paths = [str(REPO_ROOT), str(BENCH_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _run_child(
    argv: Sequence[str], cache_dir: Path, timeout: float = 600.0, *, bytecode: bool = False
) -> dict[str, Json]:
    env = child_environment(cache_dir)
    if bytecode:
        # As a user's interpreter runs: reading (and writing) ``__pycache__``, which this
        # environment may have switched off.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    completed = subprocess.run(
        [sys.executable, *argv],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(MARKER):
            parsed = json.loads(line[len(MARKER) :])
            if isinstance(parsed, dict):
                return parsed
    tail = " | ".join((completed.stderr or completed.stdout).strip().splitlines()[-3:])
    raise RuntimeError(f"child {' '.join(argv[-2:])} exited {completed.returncode}: {tail}")


def _child(mode: str, cache_dir: Path, *extra: str, bytecode: bool = False) -> dict[str, Json]:
    return _run_child([str(Path(__file__).resolve()), "--child", mode, *extra], cache_dir, bytecode=bytecode)


def _number(record: Json, key: str) -> float | None:
    if isinstance(record, dict):
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _count(record: Json, key: str) -> int | None:
    value = _number(record, key)
    return None if value is None else int(value)


def _record_error(record: Json) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("error"), str):
        return str(record["error"])
    return None


def _median_figure(label: str, records: Sequence[Json], goal_s: float | None = None) -> CacheFigure:
    """A figure from several first-call records (one per process or signature)."""
    errors = [error for error in map(_record_error, records) if error is not None]
    if errors or not records:
        return CacheFigure(label, status="error", detail=errors[0] if errors else "error: no runs")
    runs = [_number(record, "seconds") or 0.0 for record in records]
    compiles = [count for count in (_count(record, "compiles") for record in records) if count is not None]
    disk_hits = [count for count in (_count(record, "disk_hits") for record in records) if count is not None]
    collections = [_number(record, "gc_s") or 0.0 for record in records]
    return CacheFigure(
        label,
        seconds=statistics.median(runs),
        runs=runs,
        goal_s=goal_s,
        compiles=max(compiles) if compiles else None,
        disk_hits=max(disk_hits) if disk_hits else None,
        gc_seconds=statistics.median(collections),
    )


def measure_import(runs: int) -> CacheFigure:
    """Median seconds of ``import stablerules`` in a fresh interpreter (numpy included), with
    bytecode caches on (Python's default) after one uncounted run."""
    code = (
        "import time, sys, json\n"
        "s = time.perf_counter()\n"
        "import stablerules\n"
        "e = time.perf_counter()\n"
        f"print({MARKER!r} + json.dumps({{'seconds': e - s, 'numba': 'numba' in sys.modules}}))\n"
    )
    with tempfile.TemporaryDirectory(prefix="stablerules-bench-import-") as directory:
        try:
            # One run first, not counted: it writes the bytecode caches a fresh install's
            # ``pip install`` (or a first import) leaves, so the timed runs import as a user's do.
            _run_child(["-c", code], Path(directory), bytecode=True)
            records = [_run_child(["-c", code], Path(directory), bytecode=True) for _ in range(runs)]
        except Exception as error:
            return CacheFigure("import stablerules", status="error", detail=_error_text(error))
    figure = _median_figure("import stablerules", records, IMPORT_GOAL_S)
    if figure.seconds is not None:
        figure.passed = figure.seconds <= IMPORT_GOAL_S
    numba_loaded = any(isinstance(r, dict) and r.get("numba") is True for r in records)
    figure.detail = "numpy included; numba imported too" if numba_loaded else "numpy included; numba not imported"
    return figure


def _directory_stats(directory: Path) -> tuple[int, int]:
    """(bytes under ``directory``, number of kernel source files)."""
    total = sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())
    kernels = sum(1 for path in directory.rglob("*.py") if not path.name.startswith("."))
    return total, kernels


def measure_fresh(report: CacheReport, directory: Path, runs: int, later: int) -> None:
    """fresh_first and fresh_later in ``runs`` fresh processes on a filled cache directory."""
    firsts: list[Json] = []
    laters: list[Json] = []
    numba_imported = False
    try:
        # Bytecode caches on, as a user's installed package has them (the first call loads the
        # op's module); one run first, not counted, writes them where this environment had not.
        _child("fresh", directory, "--later", str(later), bytecode=True)
        for _ in range(runs):
            fresh = _child("fresh", directory, "--later", str(later), bytecode=True)
            firsts.append(fresh.get("first"))
            records = fresh.get("later")
            laters.extend(records if isinstance(records, list) else [])
            numba_imported |= fresh.get("numba") is True
    except Exception as failure:
        text = _error_text(failure)
        report.figures["fresh_first"] = CacheFigure(FRESH_FIRST, status="error", detail=text)
        report.figures["fresh_later"] = CacheFigure(FRESH_LATER, status="error", detail=text)
        return
    numba_note = "numba imported" if numba_imported else "numba not imported"
    for name, label, records, goal, note in (
        ("fresh_first", FRESH_FIRST, firsts, FRESH_GOAL_S, f"{runs} fresh processes, import stablerules + first call; {numba_note}"),
        ("fresh_later", FRESH_LATER, laters, FRESH_LATER_GOAL_S, f"{len(laters)} signatures in {runs} fresh processes"),
    ):
        figure = _median_figure(label, records, goal)
        if figure.status == "ok" and figure.seconds is not None:
            figure.passed = figure.seconds <= goal and figure.compiles == 0
            figure.detail = note
        report.figures[name] = figure


def measure_cold_and_warm(
    report: CacheReport, warm_runs: int, later: int, step: Callable[[str], None], fresh_runs: int = 0
) -> None:
    """cold_first and cold_later in one fresh process on an empty cache dir, then warm_first
    (and warm_later) in ``warm_runs`` fresh processes on the directory it filled, and the
    fresh-process figures in ``fresh_runs`` more."""
    directory = Path(tempfile.mkdtemp(prefix="stablerules-bench-cache-"))
    try:
        cold: dict[str, Json] = {}
        try:
            cold = _child("cold", directory, "--later", str(later))
        except Exception as failure:
            text = _error_text(failure)
            for name, label in (("cold_first", "cold first signature"), ("cold_later", "later cold signature")):
                report.figures[name] = CacheFigure(label, status="error", detail=text)
        step("cache: cold process")
        if cold:
            first = cold.get("first")
            report.figures["cold_first"] = _median_figure("cold first signature", [first])
            later_records = cold.get("later")
            records: list[Json] = later_records if isinstance(later_records, list) else []
            figure = _median_figure("later cold signature", records, LATER_COLD_GOAL_S)
            if figure.status == "ok" and figure.seconds is not None:
                compiled = all((_count(r, "compiles") or 0) > 0 for r in records)
                figure.passed = figure.seconds <= LATER_COLD_GOAL_S and compiled
                figure.detail = f"{len(records)} new signatures in the cold process" + (
                    "" if compiled else "; one compiled nothing (not a cold figure)"
                )
            report.figures["cold_later"] = figure
            size, kernels = _directory_stats(directory)
            report.disk_bytes_per_kernel = size / kernels if kernels else None

        firsts: list[Json] = []
        laters: list[Json] = []
        warm_error: str | None = None if cold else "error: not run: the cold process failed"
        for _ in range(warm_runs if cold else 0):
            try:
                warm = _child("warm", directory)
                firsts.append(warm.get("first"))
                laters.append(warm.get("later"))
            except Exception as failure:
                warm_error = _error_text(failure)
                break
        step("cache: warm processes")
        if cold and fresh_runs:
            measure_fresh(report, directory, fresh_runs, later)
        if warm_error is not None:
            report.figures["warm_first"] = CacheFigure(WARM_FIRST, status="error", detail=warm_error)
            report.figures["warm_later"] = CacheFigure(WARM_LATER, status="error", detail=warm_error)
            return
        # The goal is for a warm process (Numba imported) meeting a signature first; the
        # process's very first kernel also pays any one-time start-up (Numba's, ~0.25 s,
        # when the direct loader is off), reported beside it without a goal.
        for name, label, records, note, goal in (
            ("warm_first", WARM_FIRST, firsts, "the process's first kernel", None),
            ("warm_later", WARM_LATER, laters, "a second signature, first call, from disk", WARM_GOAL_S),
        ):
            figure = _median_figure(label, records, goal)
            if figure.status == "ok" and figure.seconds is not None:
                figure.passed = None if goal is None else (figure.seconds <= goal and figure.compiles == 0)
                collected = "" if not figure.gc_seconds else f"; of which Python's cyclic GC {format_seconds(figure.gc_seconds)} (median)"
                figure.detail = f"{len(records)} fresh processes after import stablerules, numba; {note}{collected}"
            report.figures[name] = figure
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def measure_steady_hit(budget: Budget) -> tuple[CacheFigure, CacheFigure]:
    """The 700-element pullback and a whole rrule + pullback, once everything is cached."""
    import stablerules as sr
    from workloads import call_ours_rrule

    workload = first_signature()
    arrays, dy = workload.make_inputs()
    try:
        _, back = call_ours_rrule(workload.spec, arrays)
        back(dy)
        with sr.no_compile():
            _, back = call_ours_rrule(workload.spec, arrays)
            back(dy)
        pullback = measure(lambda: back(dy), budget)
        whole = measure(lambda: call_ours_rrule(workload.spec, arrays)[1](dy), budget)
    except Exception as error:
        text = _error_text(error)
        return (
            CacheFigure("steady cache hit (pullback, 700 elements)", status="error", detail=text),
            CacheFigure("steady rrule + pullback", status="error", detail=text),
        )
    hit = CacheFigure(
        "steady cache hit (pullback, 700 elements)",
        seconds=pullback.median_s,
        goal_s=STEADY_GOAL_S,
        passed=pullback.median_s <= STEADY_GOAL_S,
        compiles=0,
        detail=f"median of {pullback.samples} samples x {pullback.loops} calls",
    )
    rule = CacheFigure(
        "steady rrule + pullback",
        seconds=whole.median_s,
        compiles=0,
        detail=f"median of {whole.samples} samples x {whole.loops} calls",
    )
    return hit, rule


def measure_sweep(report: CacheReport, jax: Peer | None, step: Callable[[str], None]) -> None:
    """Compiles over 8 leading extents per op (fresh process, empty cache dir), and JAX's
    per-shape compile for the same calls in this process."""
    from peers import jax_shape_sweep

    directory = Path(tempfile.mkdtemp(prefix="stablerules-bench-sweep-"))
    try:
        child: dict[str, Json] = {}
        child_error: str | None = None
        try:
            child = _child("sweep", directory)
        except Exception as error:
            child_error = _error_text(error)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    step("cache: extent sweep")
    for position, template in enumerate(sweep_workloads(SWEEP_EXTENTS[0])):
        result = SweepResult(
            op=template.id.removeprefix("sweep-"),
            call=f"{template.spec.describe()} {template.dtype}, leading extent in {list(SWEEP_EXTENTS)}",
            extents=list(SWEEP_EXTENTS),
        )
        records = child.get(template.id)
        if child_error is not None or not isinstance(records, list):
            result.status, result.detail = "error", child_error or "error: no result from the sweep process"
        elif any(_record_error(record) is not None for record in records):
            result.status = "error"
            result.detail = next(e for e in map(_record_error, records) if e is not None)
        else:
            result.compiles = [_count(record, "compiles") or 0 for record in records]
            result.disk_hits = [_count(record, "disk_hits") or 0 for record in records]
            result.seconds = [_number(record, "seconds") or 0.0 for record in records]
            result.passed = result.kernels_after_first == 0
        if jax is None or jax.status != "ok":
            result.jax_status = "skipped" if jax is None else jax.status
        else:
            try:
                cases = [w.make_inputs() for w in (sweep_workloads(e)[position] for e in SWEEP_EXTENTS)]
                result.jax_seconds = jax_shape_sweep(jax, template.spec, cases)
                result.jax_status = "ok"
            except Exception as error:
                result.jax_status = _error_text(error)
        report.sweep.append(result)
        step(f"cache: sweep {result.op}")


def run_cache_report(
    mode: str, jax: Peer | None, step: Callable[[str], None] = lambda name: None
) -> CacheReport:
    """Every compile-cache figure. ``mode`` is "full", "quick" or "tiny" (fewer processes)."""
    runs = {"full": 7, "quick": 3, "tiny": 2}[mode]
    warm_runs = {"full": 5, "quick": 3, "tiny": 1}[mode]
    later = {"full": 3, "quick": 2, "tiny": 1}[mode]
    fresh_runs = {"full": 10, "quick": 5, "tiny": 2}[mode]
    report = CacheReport()
    report.figures["import"] = measure_import(max(runs, fresh_runs))
    step("cache: import")
    measure_cold_and_warm(report, warm_runs, later, step, fresh_runs)
    report.figures["steady_hit"], report.figures["steady_rrule"] = measure_steady_hit(Budget.for_mode(mode))
    step("cache: steady hit")
    measure_sweep(report, jax, step)
    return report


CACHE_STEPS = 8  # steps run_cache_report reports: import, cold, warm, steady, sweep process, 3 ops


FIGURE_HEADERS = ["figure", "median", "goal", "", "counters", "notes"]
SWEEP_HEADERS = ["8 leading extents", "kernels", "goal", "", "kernels per extent", "first call, then median", "jax per shape"]


def figure_rows(report: CacheReport) -> list[list[str]]:
    """Table rows for the timed figures (``FIGURE_HEADERS``)."""
    rows = []
    for figure in report.figures.values():
        if figure.status != "ok":
            rows.append([figure.label, "error", "", "", "", figure.detail or ""])
            continue
        goal = "" if figure.goal_s is None else f"<= {format_seconds(figure.goal_s)}"
        verdict = "" if figure.passed is None else ("pass" if figure.passed else "MISS")
        counters = []
        if figure.compiles is not None:
            counters.append(f"{figure.compiles} compiles")
        if figure.disk_hits:
            counters.append(f"{figure.disk_hits} disk hits")
        rows.append([figure.label, format_seconds(figure.seconds), goal, verdict, ", ".join(counters), figure.detail or ""])
    return rows


def sweep_rows(report: CacheReport) -> list[list[str]]:
    """Table rows for the extent sweeps (``SWEEP_HEADERS``)."""
    rows = []
    for result in report.sweep:
        if result.jax_seconds:
            jax = (
                f"median {format_seconds(statistics.median(result.jax_seconds))}, "
                f"{format_seconds(sum(result.jax_seconds))} for {len(result.jax_seconds)} shapes"
            )
        else:
            jax = result.jax_status
        if result.status != "ok":
            rows.append([result.op, "error", "", "", "", result.detail or "", jax])
            continue
        rows.append(
            [
                result.op,
                str(sum(result.compiles) + sum(result.disk_hits)),
                "first extent only",
                "pass" if result.passed else "MISS",
                str(result.compiles),
                f"{format_seconds(result.seconds[0])}, then "
                f"{format_seconds(statistics.median(result.seconds[1:] or result.seconds))}",
                jax,
            ]
        )
    return rows


def print_report(report: CacheReport) -> None:
    print(table(FIGURE_HEADERS, figure_rows(report), max_cell=100))
    print()
    print(table(SWEEP_HEADERS, sweep_rows(report), max_cell=100))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer processes and repeats")
    parser.add_argument("--no-peers", action="store_true", help="skip JAX's per-shape compile times")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--later", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child_main(args.child, args.later)
        return 0
    prepare_main_process()
    from peers import load_peers

    peers = load_peers(not args.no_peers)
    report = run_cache_report("quick" if args.quick else "full", peers["jax"])
    print_report(report)
    return 0


def prepare_main_process() -> None:
    """Point this process at the checkout and at a throwaway cache dir (unless one is set),
    before stablerules is imported."""
    if (REPO_ROOT / "stablerules" / "__init__.py").is_file() and str(REPO_ROOT) not in sys.path:
        sys.path.insert(1, str(REPO_ROOT))
    if "STABLERULES_CACHE_DIR" not in os.environ:
        directory = tempfile.mkdtemp(prefix="stablerules-bench-main-")
        os.environ["STABLERULES_CACHE_DIR"] = directory
        atexit.register(shutil.rmtree, directory, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
