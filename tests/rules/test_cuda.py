"""The CUDA kernels, tested without a GPU.

- ``cuda_cases.py`` runs in a subprocess under Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``
  must be set before numba is imported, and this session has imported it already), with
  ``STABLERULES_DEVICE=cuda`` routing NumPy arrays to the CUDA kernels: forward, pullback and
  pushforward of every op, exactly equal to the CPU kernels and to NumPy.
- Every generated CUDA kernel is compiled to PTX for sm_90 by numba-cuda's real compiler
  (NVVM), which types it as the GPU would: the simulator runs kernels as Python and would not
  notice a typing error. Skipped where NVVM is not installed.

Both skip with a reason where the tools they need are missing, except in CI (``CI=true``),
where the simulator is always installed: there a simulator that cannot be imported or that
makes the cases skip themselves fails the run (``tests/ci.py``). NVVM (the PTX check) is not
part of CI's install and skips everywhere.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stablerules as sr
from stablerules import ArraySpec, Val
from tests.ci import skip_unless_ci

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).with_name("cuda_cases.py")

pytestmark = pytest.mark.cuda


def _simulator_importable() -> bool:
    try:
        return importlib.util.find_spec("numba.cuda") is not None
    except ImportError:
        return False


@pytest.mark.slow  # every CUDA case, in a subprocess under the simulator: ~25 s
def test_cuda_cases_pass_in_the_simulator(tmp_path: Path) -> None:
    if not _simulator_importable():
        skip_unless_ci("numba.cuda (and so its simulator) is not installed")
    environment = dict(os.environ)
    environment.update(
        NUMBA_ENABLE_CUDASIM="1",
        STABLERULES_DEVICE="cuda",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")])),
    )
    environment.setdefault("STABLERULES_CACHE_DIR", str(tmp_path / "cache"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)]
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    report = result.stdout[-6000:] + result.stderr[-3000:]
    # A module-level skip collects nothing: pytest's exit status 5.
    if result.returncode in (0, 5) and " passed" not in result.stdout and " skipped" in result.stdout:
        skip_unless_ci(f"the CUDA cases skipped themselves: {result.stdout.strip().splitlines()[-1]}")
    assert result.returncode == 0, f"the CUDA cases failed under the simulator:\n{report}"
    assert " passed" in result.stdout and " failed" not in result.stdout, report


def test_cuda_sources_render_without_a_gpu() -> None:
    """``explain`` shows a CUDA signature's kernels without compiling anything."""
    compiles = sr.cache_info().compiles
    for op, args, kwargs in (
        (sr.repeat, (cuda_spec((2, 3), "float64"), Val(2)), {"axis": Val(1)}),
        (sr.tile, (cuda_spec((2, 3), "float32"), Val((2, 1))), {}),
        (sr.kron, (cuda_spec((2, 3), "complex64"), cuda_spec((3,), "complex64")), {}),
        (sr.roll, (cuda_spec((2, 3, 4), "float32"), Val((1, -1))), {"axis": Val((0, 2))}),
        (sr.broadcast_to, (cuda_spec((1, 3), "float32"), Val((2, 3))), {}),
        (sr.mean, (cuda_spec((2, 3, 4), "float64"), Val((0, 2))), {}),
    ):
        texts = _kernel_texts(op, *args, **kwargs)
        assert texts and all("@cuda.jit(SIGNATURE, cache=True)" in text for _, text in texts)
    assert sr.cache_info().compiles == compiles


def test_cuda_without_gpu_or_simulator_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules._cuda import cuda_available

    if cuda_available():
        pytest.skip("this session can run CUDA kernels")
    monkeypatch.setenv("STABLERULES_DEVICE", "cuda")
    x = np.ones((2, 3))
    with pytest.raises(RuntimeError, match="NUMBA_ENABLE_CUDASIM"):
        sr.repeat(x, Val(2), axis=Val(0))
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        sr.rrule(sr.kron, x, x)
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        sr.precompile(sr.tile, ArraySpec((2, 3), np.float64, device="cuda"), Val(2))


# --------------------------------------------------------------------------- PTX compiles


@cache
def _ptx_compiler() -> Callable[[str], str] | str:
    """A function compiling a kernel module's text to PTX, or why there is none."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in {"", "0"}:
        return "this session runs Numba's simulator"
    try:
        from numba import cuda, types
    except ImportError:
        return "numba.cuda is not installed"

    def compile_module(text: str) -> str:
        # The module minus its decorator: compile_ptx needs no GPU, the decorator would.
        namespace: dict[str, Any] = {}
        body = "\n".join(line for line in text.splitlines() if not line.startswith("@cuda.jit("))
        exec(compile(body, "<stablerules CUDA kernel>", "exec"), namespace)
        ptx, _ = cuda.compile_ptx(namespace["kernel"], namespace["SIGNATURE"], cc=(9, 0))
        return str(ptx)

    probe = "from numba import cuda, types\nSIGNATURE = types.void(types.intp)\ndef kernel(n):\n    pass\n"
    try:
        compile_module(probe)
    except Exception as error:  # no NVVM: NvvmSupportError, CudaSupportError, OSError...
        return f"NVVM is not usable here ({type(error).__name__}: {str(error)[:200]})"
    del types
    return compile_module


def _kernel_texts(op: object, *args: object, **kwargs: object) -> list[tuple[str, str]]:
    """(title, module text) of every kernel a call with CUDA specs uses."""
    parts = sr.explain(op, *args, **kwargs).split("# --- ")[1:]  # type: ignore[arg-type]
    return [(part.split("\n", 1)[0].rstrip(" -"), part.split("\n", 1)[1]) for part in parts]


def cuda_spec(shape: tuple[int, ...], dtype: str) -> ArraySpec:
    return ArraySpec(shape, np.dtype(dtype), device="cuda")


PTX_CALLS: list[tuple[str, object, tuple[object, ...], dict[str, object]]] = [
    ("repeat-axis", sr.repeat, (cuda_spec((2, 3, 4), "float64"), Val(3)), {"axis": Val(1)}),
    ("repeat-flat-c64", sr.repeat, (cuda_spec((3, 4), "complex64"), Val(2)), {}),
    ("repeat-W3-f32", sr.repeat, (cuda_spec((200, 3, 4), "float32"),), {"inner": Val((7, 1, 10)), "outer": Val((4, 1, 2))}),
    ("repeat-W3-c128", sr.repeat, (cuda_spec((200, 3, 4), "complex128"),), {"inner": Val((7, 1, 10)), "outer": Val((4, 1, 2))}),
    ("repeat-0d", sr.repeat, (cuda_spec((), "float64"), Val(5)), {}),
    ("tile", sr.tile, (cuda_spec((3, 5), "float64"), Val((2, 1, 3))), {}),
    ("roll-W7-f32", sr.roll, (cuda_spec((64, 64, 56, 56), "float32"), Val((3, -5))), {"axis": Val((2, 3))}),
    ("roll-flat-c128", sr.roll, (cuda_spec((3, 5), "complex128"), Val(7)), {}),
    ("roll-first-axis-i8", sr.roll, (cuda_spec((5, 4), "int8"), Val(2)), {"axis": Val(0)}),
    ("repeat-counts", sr.repeat, (cuda_spec((2, 4, 3), "float64"), cuda_spec((4,), "int64")), {"axis": Val(1)}),
    ("repeat-counts-last", sr.repeat, (cuda_spec((3, 4), "complex128"), cuda_spec((4,), "int64")), {"axis": Val(1)}),
    ("repeat-int", sr.repeat, (cuda_spec((3, 4), "int32"), Val(2)), {"axis": Val(0)}),
    ("kron-f64", sr.kron, (cuda_spec((100, 200), "float64"), cuda_spec((300, 100), "float64")), {}),
    ("kron-f32", sr.kron, (cuda_spec((3, 4, 2), "float32"), cuda_spec((2, 2, 2), "float32")), {}),
    ("kron-c64", sr.kron, (cuda_spec((5,), "complex64"), cuda_spec((7,), "complex64")), {}),
    ("kron-f32-c128", sr.kron, (cuda_spec((2, 3), "float32"), cuda_spec((3, 2), "complex128")), {}),
    ("kron-c128-f64", sr.kron, (cuda_spec((2, 3), "complex128"), cuda_spec((3, 2), "float64")), {}),
    ("kron-int-f64", sr.kron, (cuda_spec((2, 3), "int32"), cuda_spec((3, 2), "float64")), {}),
    ("kron-ints", sr.kron, (cuda_spec((2, 3), "int64"), cuda_spec((3, 2), "int8")), {}),
    ("broadcast_to-W8-f32", sr.broadcast_to, (cuda_spec((1, 64, 1, 56), "float32"), Val((32, 64, 56, 56))), {}),
    ("broadcast_to-c64", sr.broadcast_to, (cuda_spec((4, 1), "complex64"), Val((2, 4, 7))), {}),
    ("broadcast_to-full", sr.broadcast_to, (cuda_spec((1,), "float64"), Val((9,))), {}),
    ("sum-W9", sr.sum, (cuda_spec((200, 3, 40), "float64"), Val((0, 2))), {}),
    ("mean-c128", sr.mean, (cuda_spec((4, 5, 6), "complex128"), Val((1, 2))), {}),
    ("mean-f32-keepdims", sr.mean, (cuda_spec((4, 5), "float32"), Val(0), Val(True)), {}),
    ("getindex-W11-f32", sr.getindex, (cuda_spec((2048, 2048), "float32"), sr.ix[1:-1, ::2]), {}),
    ("getindex-c64", sr.getindex, (cuda_spec((3, 4, 5), "complex64"), sr.ix[None, 1, ::-2, 1:4]), {}),
    ("take-W10-f32", sr.take, (cuda_spec((50000, 128), "float32"), cuda_spec((16384,), "int64"), Val(0)), {}),
    ("take-atomic-c128", sr.take, (cuda_spec((6, 3), "complex128"), cuda_spec((4,), "int64"), Val(0)), {"deterministic": Val(False)}),
    ("take-atomic-f32", sr.take, (cuda_spec((6, 3), "float32"), cuda_spec((4,), "int64"), None), {"deterministic": Val(False)}),
    ("take_along_axis-W12-f32", sr.take_along_axis, (cuda_spec((4096, 1024), "float32"), cuda_spec((4096, 8), "int64"), Val(1)), {}),
    ("index_add-f64", sr.index_add, (cuda_spec((5, 3), "float64"), cuda_spec((4,), "int64"), cuda_spec((4, 3), "float64")), {}),
]


@pytest.mark.parametrize(("name", "op", "args", "kwargs"), PTX_CALLS, ids=[call[0] for call in PTX_CALLS])
def test_generated_cuda_kernels_compile_to_ptx(
    name: str, op: object, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    compiler = _ptx_compiler()
    if isinstance(compiler, str):
        pytest.skip(compiler)
    texts = _kernel_texts(op, *args, **kwargs)
    assert texts, f"{name}: no CUDA kernels listed"
    for title, text in texts:
        assert "@cuda.jit(SIGNATURE, cache=True)" in text, title
        ptx = compiler(text)
        assert ".entry" in ptx and ".target sm_90" in ptx, title


# --------------------------------------------------------------------------- CI never skips CUDA

# Two ways the CUDA path breaks, installed into every Python process of a run by a
# sitecustomize module: numba.cuda cannot be found at all, or it is found but fails to import
# (so cuda_available() is False and the cases would skip themselves).
_BREAKAGES = {
    "not-importable": "import sys\nsys.modules['numba.cuda'] = None\n",
    "import-fails": (
        "import builtins\n"
        "_import = builtins.__import__\n"
        "def _broken(name, globals=None, locals=None, fromlist=(), level=0):\n"
        "    if name == 'numba.cuda' or (name == 'numba' and fromlist and 'cuda' in fromlist):\n"
        "        raise ImportError('a broken numba.cuda, on purpose')\n"
        "    return _import(name, globals, locals, fromlist, level)\n"
        "builtins.__import__ = _broken\n"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("ci", [True, False], ids=["CI", "not-CI"])
@pytest.mark.parametrize("breakage", sorted(_BREAKAGES))
def test_a_broken_cuda_path_fails_in_ci_and_skips_elsewhere(tmp_path: Path, breakage: str, ci: bool) -> None:
    (tmp_path / "sitecustomize.py").write_text(_BREAKAGES[breakage])
    environment = {key: value for key, value in os.environ.items() if key != "CI"}
    environment["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO)])
    environment.setdefault("STABLERULES_CACHE_DIR", str(tmp_path / "cache"))
    if ci:
        environment["CI"] = "true"
    test = f"{Path(__file__).relative_to(REPO)}::test_cuda_cases_pass_in_the_simulator"
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test]
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    report = result.stdout[-4000:] + result.stderr[-2000:]
    if ci:
        assert result.returncode == 1 and "1 failed" in result.stdout, report
        assert "in CI this must run" in result.stdout or "CUDA kernels cannot run here" in result.stdout, report
    else:
        assert result.returncode == 0 and "1 skipped" in result.stdout, report
