"""A new signature's compile time, per op: rrule + pullback in a warm process.

    python bench/compile_time.py [--rounds N] [--ops sum,roll,...] [--split]

Each measurement is one fresh process with its own cache directory (never the user's),
holding the kernels of another signature of the same op on disk already. That process
imports stablerules and Numba, compiles a trivial kernel (Numba's one-time start-up, paid by
any process that has compiled before), calls the warm-up signature's rrule + pullback (from
disk: the op's module and its Python-side set-up are warm), and then times the *new*
signature's first ``rrule`` + pullback: another dtype, so every kernel it needs compiles.

Reported per op: the median over ``--rounds`` processes of the thread CPU time of that call
(Numba compiles in the calling thread, so the other jobs on a shared machine count less than
in wall time), its wall time, and the kernels it compiled. The figure the goal reads is the
median over the ops that compile kernels (goal <= 100 ms). ``--split`` also reports Numba's
own pass timers (LLVM, lowering, type inference, the rest) as shares of the compile.

``--warm``: the other end, a fresh process whose kernels are all on disk already (a cache
warmed by an earlier run, or by ``sr.precompile(path)``). Per op: ``import stablerules`` (NumPy
imported before the clock starts), the op's module on first use, the first ``rrule`` +
pullback (its kernels loaded from disk: llvmlite's import and start-up included), and a
further signature's (another dtype, its kernels on disk too); whether Numba was imported.

The children are this file run with ``--child OP`` (``--warm-child OP``); each prints one line
``BENCH-RESULT {json}``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
MARKER = "BENCH-RESULT "
GOAL_S = 0.100

# The ops whose rrule + pullback compile kernels (the view ops, concatenate and flip compile
# none); each one's call is in ``_call``, made at the warm-up dtype and then the new one.
OPS = ("sum", "broadcast_to", "mean", "roll", "repeat", "tile", "kron")


def _call(op: str, dtype: str) -> Callable[[], tuple[Any, Callable[[Any], object]]]:
    import numpy as np

    import stablerules as sr
    from stablerules import Val

    rng = np.random.default_rng(0)

    def array(*shape: int) -> Any:
        return rng.standard_normal(shape).astype(dtype)

    if op == "sum":
        x = array(6, 7, 8)
        return lambda: sr.rrule(sr.sum, x, axis=Val((0, 2)))
    if op == "mean":
        x = array(6, 7, 8)
        return lambda: sr.rrule(sr.mean, x, axis=Val((0, 2)))
    if op == "broadcast_to":
        x = array(1, 7, 1, 5)
        return lambda: sr.rrule(sr.broadcast_to, x, Val((4, 7, 6, 5)))
    if op == "roll":
        x = array(6, 7, 8)
        return lambda: sr.rrule(sr.roll, x, Val((1, 2)), axis=Val((0, 2)))
    if op == "repeat":
        x = array(6, 7, 8)
        return lambda: sr.rrule(sr.repeat, x, Val(3), axis=Val(1))
    if op == "tile":
        x = array(6, 7)
        return lambda: sr.rrule(sr.tile, x, Val((2, 3)))
    if op == "kron":
        a, b = array(4, 5), array(3, 2)
        return lambda: sr.rrule(sr.kron, a, b)
    raise SystemExit(f"unknown op {op!r}")


def _rrule_and_pullback(make: Callable[[], tuple[Any, Callable[[Any], object]]]) -> None:
    import numpy as np

    y, back = make()
    dy = np.ones_like(y)
    back(dy)


def _pass_timers(split: bool) -> dict[str, float]:
    """Numba's own pass timers (wall time, per pass) summed over this process's dispatchers."""
    if not split:
        return {}
    import gc

    totals: dict[str, float] = {}
    for obj in gc.get_objects():
        if type(obj).__name__ != "CPUDispatcher":
            continue
        for cres in obj.overloads.values():
            md = getattr(cres, "metadata", None) or {}
            for pipeline in (md.get("pipeline_times") or {}).values():
                for name, timing in pipeline.items():
                    key = name.split("_", 1)[-1]
                    totals[key] = totals.get(key, 0.0) + timing.run
            for name, value in (md.get("timers") or {}).items():
                totals["timer:" + name] = totals.get("timer:" + name, 0.0) + value
    return totals


def _child(op: str, split: bool) -> dict[str, Any]:
    import numpy as np

    import stablerules as sr

    numba: Any = importlib.import_module("numba")

    def fill(x: Any) -> None:
        for i in range(x.shape[0]):
            x[i] = i

    numba.njit(numba.types.void(numba.types.float64[::1]))(fill)(np.zeros(3))
    _rrule_and_pullback(_call(op, "float64"))  # the warm-up signature, from disk
    make = _call(op, "float32")
    before = sr.cache_info()
    timers_before = _pass_timers(split)
    cpu, wall = time.thread_time(), time.perf_counter()
    _rrule_and_pullback(make)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    after = sr.cache_info()
    timers_after = _pass_timers(split)
    timers = {k: v - timers_before.get(k, 0.0) for k, v in timers_after.items() if v - timers_before.get(k, 0.0) > 0}
    return {"cpu_s": cpu, "wall_s": wall, "compiles": after.compiles - before.compiles, "timers": timers}


def _warm_child(op: str) -> dict[str, Any]:
    """A fresh process, every kernel on disk: where its first gradients' time goes."""
    import numpy as np  # excluded: a NumPy program has imported it already

    del np
    began = time.perf_counter()
    import stablerules as sr

    imported = time.perf_counter()
    getattr(sr, op)
    op_module = time.perf_counter()
    first = _call(op, "float64")
    _rrule_and_pullback(first)
    first_done = time.perf_counter()
    llvmlite = "llvmlite.binding" in sys.modules
    further = _call(op, "float32")
    start_further = time.perf_counter()
    _rrule_and_pullback(further)
    further_done = time.perf_counter()
    info = sr.cache_info()
    return {
        "import_s": imported - began,
        "op_module_s": op_module - imported,
        "first_gradient_s": first_done - op_module,
        "total_first_s": first_done - began,
        "further_signature_s": further_done - start_further,
        "compiles": info.compiles,
        "llvmlite": llvmlite,
        "numba": "numba" in sys.modules,
    }


def measure_warm(ops: list[str], rounds: int) -> dict[str, Any]:
    """``--warm``: per op, one cache directory warmed by a first process, then ``rounds`` fresh
    processes timing their first gradients (bytecode cached, as an installed package has it)."""
    rows: dict[str, Any] = {}
    for op in ops:
        directory = Path(tempfile.mkdtemp(prefix=f"stablerules-bench-warm-{op}-"))
        try:
            env = _environment(directory, REPO_ROOT)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as an installed package has it
            env["PYTHONPYCACHEPREFIX"] = str(directory / "pyc")
            code = f"import compile_time as c\nfor d in ('float64', 'float32'):\n    c._rrule_and_pullback(c._call({op!r}, d))\n"
            subprocess.run([sys.executable, "-c", code], env=env, cwd=BENCH_DIR, check=True, timeout=600)
            runs = []
            for _ in range(rounds):
                argv = [sys.executable, str(Path(__file__).resolve()), "--warm-child", op]
                done = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=True)
                line = next(line for line in reversed(done.stdout.splitlines()) if line.startswith(MARKER))
                runs.append(json.loads(line[len(MARKER) :]))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        keys = ("import_s", "op_module_s", "first_gradient_s", "total_first_s", "further_signature_s")
        row = {key: statistics.median(float(run[key]) for run in runs) for key in keys}
        row.update(compiles=max(int(run["compiles"]) for run in runs), numba=any(run["numba"] for run in runs))
        rows[op] = row
        print(
            f"{op:14s} import {row['import_s'] * 1e3:5.1f} ms  op module {row['op_module_s'] * 1e3:5.1f} ms  "
            f"first rrule+pullback {row['first_gradient_s'] * 1e3:5.1f} ms  = first gradient "
            f"{row['total_first_s'] * 1e3:5.1f} ms;  further signature {row['further_signature_s'] * 1e3:5.1f} ms  "
            f"(compiles {row['compiles']}, numba imported {row['numba']})"
        )
    firsts = [row["total_first_s"] for row in rows.values()]
    furthers = [row["further_signature_s"] for row in rows.values()]
    print(
        f"median over {len(rows)} ops: first gradient {statistics.median(firsts) * 1e3:.1f} ms (goal <= 25 ms), "
        f"further signature {statistics.median(furthers) * 1e3:.1f} ms (goal <= 3 ms)"
    )
    return {"ops": rows}


def _environment(cache_dir: Path, root: Path) -> dict[str, str]:
    """This environment with its own cache dir and ``root``'s stablerules importable first."""
    env = dict(os.environ)
    env["STABLERULES_CACHE_DIR"] = str(cache_dir)
    env["STABLERULES_DISK_CACHE"] = "1"
    others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO_ROOT]
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(BENCH_DIR)] + others)
    return env


def _run_child(op: str, cache_dir: Path, split: bool, root: Path = REPO_ROOT) -> dict[str, Any]:
    env = _environment(cache_dir, root)
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", op] + (["--split"] if split else [])
    done = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARKER):
            result: dict[str, Any] = json.loads(line[len(MARKER) :])
            return result
    raise RuntimeError(f"child {op} exited {done.returncode}: {done.stderr.strip()[-2000:]}")


def _warm_directory(op: str, root: Path) -> Path:
    """A cache directory holding the warm-up signature's kernels (filled by one process)."""
    directory = Path(tempfile.mkdtemp(prefix=f"stablerules-bench-compile-{op}-"))
    code = "import compile_time as c\nc._rrule_and_pullback(c._call({!r}, 'float64'))\n".format(op)
    env = _environment(directory, root)
    subprocess.run([sys.executable, "-c", code], env=env, cwd=BENCH_DIR, check=True, timeout=600)
    return directory


def measure(ops: list[str], rounds: int, split: bool, roots: list[Path]) -> dict[Path, dict[str, list[dict[str, Any]]]]:
    """``rounds`` fresh processes per op and checkout, interleaved (load drifts over minutes)."""
    results: dict[Path, dict[str, list[dict[str, Any]]]] = {root: {op: [] for op in ops} for root in roots}
    bases = {(root, op): _warm_directory(op, root) for root in roots for op in ops}
    try:
        for _ in range(rounds):
            for op in ops:
                for root in roots:
                    directory = Path(tempfile.mkdtemp(prefix=f"stablerules-bench-compile-{op}-run-"))
                    try:
                        shutil.copytree(bases[root, op], directory, dirs_exist_ok=True)
                        results[root][op].append(_run_child(op, directory, split, root))
                    finally:
                        shutil.rmtree(directory, ignore_errors=True)
    finally:
        for directory in bases.values():
            shutil.rmtree(directory, ignore_errors=True)
    return results


def report(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Print one line per op (medians over its processes) and the median over the ops."""
    rows: dict[str, dict[str, Any]] = {}
    for op, runs in results.items():
        cpu = statistics.median(float(r["cpu_s"]) for r in runs)
        wall = statistics.median(float(r["wall_s"]) for r in runs)
        compiles = max(int(r["compiles"]) for r in runs)
        rows[op] = {"cpu_s": cpu, "wall_s": wall, "compiles": compiles, "cpu_runs": [float(r["cpu_s"]) for r in runs]}
        each = " ".join(f"{float(r['cpu_s']) * 1e3:.0f}" for r in runs)
        print(f"{op:14s} {compiles} kernels  cpu {cpu * 1e3:7.1f} ms  wall {wall * 1e3:7.1f} ms  runs {each}")
        timers: dict[str, list[float]] = {}
        for r in runs:
            for name, value in dict(r.get("timers") or {}).items():
                timers.setdefault(name, []).append(float(value))
        if timers:
            top = sorted(((statistics.median(v), k) for k, v in timers.items()), reverse=True)[:8]
            print("    " + ", ".join(f"{k} {v * 1e3:.0f}" for v, k in top))
    compiling = [float(row["cpu_s"]) for row in rows.values() if row["compiles"]]
    median = statistics.median(compiling) if compiling else None
    if median is not None:
        verdict = "pass" if median <= GOAL_S else "MISS"
        print(f"median over {len(compiling)} ops that compile: {median * 1e3:.1f} ms (goal <= {GOAL_S * 1e3:.0f} ms) {verdict}")
    return {"ops": rows, "median_s": median, "goal_s": GOAL_S}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--split", action="store_true", help="also Numba's pass timers")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--against", action="append", default=[], type=Path,
        help="another checkout's root: its processes are interleaved with this one's, and reported after",
    )
    parser.add_argument("--warm", action="store_true", help="a fresh process with every kernel on disk: its first gradients")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--warm-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(MARKER + json.dumps(_child(args.child, args.split)), flush=True)
        return 0
    if args.warm_child:
        print(MARKER + json.dumps(_warm_child(args.warm_child)), flush=True)
        return 0
    if args.warm:
        warm = measure_warm(args.ops.split(","), args.rounds)
        if args.json:
            Path(args.json).write_text(json.dumps(warm, indent=1))
        return 0
    roots = [REPO_ROOT] + [root.resolve() for root in args.against]
    results = measure(args.ops.split(","), args.rounds, args.split, roots)
    summary: dict[str, dict[str, Any]] = {}
    for root in roots:
        print(f"--- {root}")
        summary[str(root)] = report(results[root])
    if len(roots) > 1:
        ours = summary[str(REPO_ROOT)]["ops"]
        for root in roots[1:]:
            theirs = summary[str(root)]["ops"]
            ratios = ", ".join(f"{op} {ours[op]['cpu_s'] / theirs[op]['cpu_s']:.2f}" for op in ours)
            print(f"this checkout / {root.name}: {ratios}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
