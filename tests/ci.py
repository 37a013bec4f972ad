"""What a test does when a tool it needs is missing: skip on a developer's machine, fail in CI.

CI (``CI=true``, as GitHub Actions and most CI services set it) installs everything the suite
uses, Numba's CUDA simulator included, so a missing or broken tool there is a broken build, not
a reason to skip.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_unless_ci(reason: str) -> NoReturn:
    """``pytest.skip(reason)``, or ``pytest.fail`` when running in CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI={os.environ.get('CI')}: in CI this must run, not skip)", pytrace=False)
    pytest.skip(reason)


REPO = Path(__file__).resolve().parents[1]


def run_in_cuda_simulator(script: str, tmp_path: Path) -> str:
    """Run ``script`` in a child process under Numba's CUDA simulator with
    ``STABLERULES_DEVICE=cuda`` (a kernel cache under ``tmp_path`` unless one is set); assert it
    exits 0 and its last line is ``ok``; return its standard output."""
    try:
        found = importlib.util.find_spec("numba.cuda") is not None
    except ImportError:
        found = False
    if not found:
        skip_unless_ci("numba.cuda (and so its simulator) is not installed")
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", STABLERULES_DEVICE="cuda")
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    environment.setdefault("STABLERULES_CACHE_DIR", str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "ok", result.stdout[-2000:]
    return result.stdout
