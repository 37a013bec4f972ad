"""Device check for a machine with an NVIDIA GPU (issue 8), one run of a few minutes.

    python bench/gpu_check.py [--size-gb 4] [--repeats 10] [--skip-tests] [--probe-only] [--out DIR]

Uses what is installed there (numba-cuda, CuPy):

1. The CUDA test module on real hardware: ``tests/rules/cuda_cases.py`` with
   ``STABLERULES_DEVICE=cuda`` and without the simulator (NumPy arrays, copied in and out by
   Numba around each launch, and CuPy arrays), exact agreement with the CPU kernels.
2. W3 (``repeat(x, inner=(7,1,10), outer=(4,1,2))``) and W6 (``kron(a(100,200), b(B0,100))``)
   on CuPy arrays, scaled so the cotangent is ``--size-gb`` (default 4 GB): device times
   (CUDA events, medians) of our forward and pullback, of CuPy's references (reshape + sum for
   W3; ``einsum`` for W6's pullback; ``cupy.repeat``/``cupy.kron`` forwards), and of a
   device-to-device copy of the cotangent measured in the same run. Results are checked
   against the references before they are timed.

Bandwidth convention (as CUDA's bandwidthTest): a copy of N bytes moves 2N (read + write), so
``copy GB/s = 2 N / t``. A kernel's GB/s counts the bytes it must move at the least: each
input read once and each output written once (W3's pullback: dy + dx; W6's: dy + a + b + da +
db; forwards: input(s) + y). The issue's goal: pullback GB/s >= 0.8 of the copy's.

Output: a table on stdout and, with ``--out DIR`` or ``$OUT`` set, ``gpu_check.json`` there.

Exit status: 0 when the check ran (performance goals are reported, not enforced) and also when
there is no GPU (it says "no GPU: ..." and writes ``{"status": "no-gpu"}``); 1 when the test
module failed or a result disagreed with its reference; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cupy
    import numpy as np

    DeviceArray = cupy.ndarray[np.generic]

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "rules" / "cuda_cases.py"
GOAL = 0.8
NO_GPU_EXIT = 0


@dataclass
class Measurement:
    """One timed call: median device seconds and the bytes it must move at the least."""

    name: str
    seconds: float
    bytes_moved: int
    note: str = ""

    @property
    def gbps(self) -> float:
        return self.bytes_moved / self.seconds / 1e9 if self.seconds > 0 else float("nan")


@dataclass
class WorkloadResult:
    id: str
    call: str
    shapes: dict[str, list[int]]
    cotangent_bytes: int
    measurements: list[Measurement] = field(default_factory=list)
    pullback_ratio_to_copy: float | None = None
    goal_met: bool | None = None
    error: str | None = None


@dataclass
class Report:
    status: str
    message: str
    device: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    tests: dict[str, object] = field(default_factory=dict)
    copy_gbps: float | None = None
    workloads: list[WorkloadResult] = field(default_factory=list)


# --- probing ------------------------------------------------------------------------------------


def probe() -> tuple[bool, str]:
    """Whether a real CUDA GPU is usable from Numba, and a line saying what was found."""
    # The check is for hardware: the simulator would "find" a GPU everywhere.
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    numba = sys.modules.get("numba")
    if numba is not None and getattr(getattr(numba, "config", None), "ENABLE_CUDASIM", False):
        return False, "no GPU: numba was imported with the simulator on in this process"
    try:
        from numba import cuda
    except ImportError as error:
        return False, f"no GPU: numba-cuda is not installed ({error})"
    try:
        if not cuda.is_available():
            return False, "no GPU: numba-cuda finds no usable CUDA device or driver"
        device = cuda.get_current_device()
    except Exception as error:  # driver problems report through exceptions
        return False, f"no GPU: CUDA is not usable ({type(error).__name__}: {error})"
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    return True, f"GPU found: {name}, {device.MULTIPROCESSOR_COUNT} multiprocessors"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in ("numpy", "numba", "numba-cuda", "cupy-cuda12x", "cupy-cuda13x", "cupy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            pass
    return found


# --- the test module on hardware ----------------------------------------------------------------


def run_tests(timeout: float) -> dict[str, object]:
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    environment["STABLERULES_DEVICE"] = "cuda"
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)]
    started = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"passed": False, "seconds": timeout, "summary": f"timed out after {timeout:.0f} s"}
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else result.stderr.strip()[-300:]
    return {
        "passed": result.returncode == 0 and " passed" in result.stdout,
        "returncode": result.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "summary": summary,
        "tail": (result.stdout[-3000:] + result.stderr[-2000:]) if result.returncode else "",
    }


# --- timing -------------------------------------------------------------------------------------


def device_seconds(function: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median device time of ``function`` between two CUDA events on CuPy's current stream."""
    import cupy

    for _ in range(warmup):
        function()
    cupy.cuda.Device().synchronize()
    times: list[float] = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        function()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


def copy_gbps(nbytes: int, repeats: int) -> float:
    """Device-to-device copy bandwidth, 2 * bytes / time (read and write)."""
    import cupy

    source = cupy.empty(nbytes // 8, dtype="float64")
    target = cupy.empty_like(source)

    def copy() -> None:
        cupy.copyto(target, source)

    seconds = device_seconds(copy, repeats)
    del source, target
    cupy.get_default_memory_pool().free_all_blocks()
    return 2 * nbytes / seconds / 1e9


def check(name: str, got: Sequence[DeviceArray], expected: Sequence[DeviceArray]) -> None:
    import cupy

    for index, (value, reference) in enumerate(zip(got, expected, strict=True)):
        if tuple(value.shape) != tuple(reference.shape) or value.dtype != reference.dtype:
            raise AssertionError(
                f"{name}[{index}]: shape {value.shape} {value.dtype}, expected {reference.shape} {reference.dtype}"
            )
        if not bool(cupy.allclose(value, reference, rtol=1e-9, atol=1e-6)):
            raise AssertionError(f"{name}[{index}]: differs from CuPy's reference")


# --- workloads ----------------------------------------------------------------------------------


def w3(size_bytes: int, repeats: int, copy: float) -> WorkloadResult:
    import cupy

    import stablerules as sr
    from stablerules import Val

    # Held as plain callables: the typed overloads take NumPy arrays only.
    repeat: Callable[..., object] = sr.repeat
    rrule: Callable[..., tuple[object, Callable[[object], tuple[object, ...]]]] = sr.rrule
    inner, outer = (7, 1, 10), (4, 1, 2)
    copies = math.prod(inner) * math.prod(outer)
    leading = max(1, size_bytes // (3 * 4 * copies * 8))
    shape = (leading, 3, 4)
    result = WorkloadResult(
        "W3", f"repeat(x, inner=Val({inner}), outer=Val({outer}))", {"x": list(shape)}, leading * 12 * copies * 8
    )
    x = cupy.random.standard_normal(shape, dtype="float64")
    y, back = rrule(sr.repeat, x, inner=Val(inner), outer=Val(outer))
    assert isinstance(y, cupy.ndarray)
    dy = cupy.random.standard_normal(tuple(y.shape), dtype="float64")

    def reference_pullback() -> DeviceArray:
        # dy's axes: (outer0, x0, inner0, x1, outer2, x2, inner2); sum the count axes.
        return dy.reshape(4, leading, 7, 3, 2, 4, 10).sum(axis=(0, 2, 4, 6))

    def reference_forward() -> DeviceArray:
        repeated = cupy.repeat(cupy.repeat(x, 7, axis=0), 10, axis=2)
        return cupy.tile(repeated, (4, 1, 2))

    check("W3 forward", [y], [reference_forward()])
    dx = back(dy)[0]
    assert isinstance(dx, cupy.ndarray)
    check("W3 pullback", [dx], [reference_pullback()])
    del dx
    x_bytes, y_bytes = x.nbytes, y.nbytes
    del y
    cupy.get_default_memory_pool().free_all_blocks()
    measurements = [
        Measurement("pullback", device_seconds(lambda: back(dy), repeats), y_bytes + x_bytes),
        Measurement("pullback, CuPy reshape+sum", device_seconds(reference_pullback, repeats), y_bytes + x_bytes),
        Measurement(
            "forward", device_seconds(lambda: repeat(x, inner=Val(inner), outer=Val(outer)), repeats),
            x_bytes + y_bytes,
        ),
        Measurement("forward, CuPy repeat+tile", device_seconds(reference_forward, repeats), x_bytes + y_bytes),
    ]
    result.measurements = measurements
    result.pullback_ratio_to_copy = measurements[0].gbps / copy
    result.goal_met = result.pullback_ratio_to_copy >= GOAL
    return result


def w6(size_bytes: int, repeats: int, copy: float) -> WorkloadResult:
    import cupy

    import stablerules as sr

    # Held as plain callables: the typed overloads take NumPy arrays only.
    kron: Callable[..., object] = sr.kron
    rrule: Callable[..., tuple[object, Callable[[object], tuple[object, ...]]]] = sr.rrule
    a_shape = (100, 200)
    rows = max(1, size_bytes // (100 * 200 * 100 * 8))
    b_shape = (rows, 100)
    dy_bytes = math.prod(a_shape) * math.prod(b_shape) * 8
    result = WorkloadResult("W6", "kron(a, b)", {"a": list(a_shape), "b": list(b_shape)}, dy_bytes)
    a = cupy.random.standard_normal(a_shape, dtype="float64")
    b = cupy.random.standard_normal(b_shape, dtype="float64")
    y, back = rrule(sr.kron, a, b)
    assert isinstance(y, cupy.ndarray)
    check("W6 forward", [y], [cupy.kron(a, b)])
    del y
    cupy.get_default_memory_pool().free_all_blocks()
    dy = cupy.random.standard_normal((a_shape[0] * b_shape[0], a_shape[1] * b_shape[1]), dtype="float64")
    view = dy.reshape(a_shape[0], b_shape[0], a_shape[1], b_shape[1])

    def reference_pullback() -> tuple[DeviceArray, DeviceArray]:
        return cupy.einsum("ikjl,kl->ij", view, b.conj()), cupy.einsum("ikjl,ij->kl", view, a.conj())

    tangents = back(dy)
    da, db = tangents[0], tangents[1]
    assert isinstance(da, cupy.ndarray) and isinstance(db, cupy.ndarray)
    check("W6 pullback", [da, db], list(reference_pullback()))
    del da, db, tangents
    small = a.nbytes + b.nbytes
    measurements = [
        Measurement("pullback", device_seconds(lambda: back(dy), repeats), dy_bytes + 2 * small),
        Measurement("pullback, CuPy einsum x2", device_seconds(reference_pullback, repeats), dy_bytes + 2 * small),
    ]
    del dy, view
    cupy.get_default_memory_pool().free_all_blocks()
    measurements += [
        Measurement("forward", device_seconds(lambda: kron(a, b), repeats), dy_bytes + small),
        Measurement("forward, CuPy kron", device_seconds(lambda: cupy.kron(a, b), repeats), dy_bytes + small),
    ]
    result.measurements = measurements
    result.pullback_ratio_to_copy = measurements[0].gbps / copy
    result.goal_met = result.pullback_ratio_to_copy >= GOAL
    return result


def run_workload(function: Callable[[int, int, float], WorkloadResult], name: str, *args: object) -> WorkloadResult:
    import cupy

    try:
        return function(*args)  # type: ignore[arg-type]
    except AssertionError as error:
        return WorkloadResult(name, "", {}, 0, error=f"wrong result: {error}")
    except Exception as error:  # an op not there yet, out of memory...: reported in its row
        return WorkloadResult(name, "", {}, 0, error=f"{type(error).__name__}: {error}")
    finally:
        cupy.get_default_memory_pool().free_all_blocks()


# --- output -------------------------------------------------------------------------------------


def print_report(report: Report) -> None:
    print(f"gpu_check: {report.message}")
    if report.device:
        print(f"  versions: {', '.join(f'{key} {value}' for key, value in report.versions.items())}")
    if report.tests:
        state = "passed" if report.tests.get("passed") else "FAILED"
        print(f"  CUDA test module on hardware: {state} ({report.tests.get('summary')}, {report.tests.get('seconds')} s)")
        if report.tests.get("tail"):
            print(str(report.tests["tail"]))
    if report.copy_gbps is not None:
        print(f"  device-to-device copy: {report.copy_gbps:.0f} GB/s (2 x bytes / time)")
    for workload in report.workloads:
        if workload.error:
            print(f"  {workload.id}: error: {workload.error}")
            continue
        print(f"  {workload.id} {workload.call} {workload.shapes}, cotangent {workload.cotangent_bytes / 1e9:.2f} GB")
        for measurement in workload.measurements:
            print(f"    {measurement.name:<32} {measurement.seconds * 1e3:9.3f} ms {measurement.gbps:8.0f} GB/s")
        if workload.pullback_ratio_to_copy is not None:
            verdict = "met" if workload.goal_met else "NOT met"
            print(f"    pullback / copy bandwidth: {workload.pullback_ratio_to_copy:.2f} (goal >= {GOAL}: {verdict})")


def write_report(report: Report, out: str | None) -> None:
    if not out:
        return
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gpu_check.json").write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--size-gb", type=float, default=4.0, help="cotangent size of W3 and W6 (default 4)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per measurement (default 10)")
    parser.add_argument("--skip-tests", action="store_true", help="skip the CUDA test module")
    parser.add_argument("--probe-only", action="store_true", help="only say whether a GPU is usable")
    parser.add_argument("--test-timeout", type=float, default=300.0, help="seconds for the test module")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="directory for gpu_check.json (default $OUT)")
    options = parser.parse_args(argv)
    if options.size_gb <= 0 or options.repeats < 1:
        parser.error("--size-gb must be positive and --repeats at least 1")

    found, message = probe()
    if not found:
        report = Report("no-gpu", message)
        print_report(report)
        write_report(report, options.out)
        return NO_GPU_EXIT
    report = Report("ok", message, device=message.removeprefix("GPU found: "), versions=versions())
    if options.probe_only:
        print_report(report)
        return 0
    failed = False
    if not options.skip_tests:
        report.tests = run_tests(options.test_timeout)
        failed = not report.tests["passed"]
    try:
        import cupy  # noqa: F401 - the bandwidth part needs it
    except ImportError:
        report.message += "; CuPy is not installed: bandwidth figures skipped"
    else:
        size = int(options.size_gb * 1e9)
        report.copy_gbps = copy_gbps(size, options.repeats)
        for name, function in (("W3", w3), ("W6", w6)):
            result = run_workload(function, name, size, options.repeats, report.copy_gbps)
            report.workloads.append(result)
            failed |= bool(result.error and result.error.startswith("wrong result"))
    if failed:
        report.status = "failed"
    print_report(report)
    write_report(report, options.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
