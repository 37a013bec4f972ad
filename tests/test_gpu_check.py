"""``bench/gpu_check.py``: importable without a GPU, and a clean exit with a message where
there is none (it writes ``{"status": "no-gpu"}`` under ``--out``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "gpu_check.py"


def test_gpu_check_is_importable() -> None:
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    assert callable(module.main) and module.NO_GPU_EXIT == 0


def test_gpu_check_exits_cleanly_with_a_message(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if key != "OUT"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    # The simulator must not pass for a GPU: the check turns it off for itself.
    environment["NUMBA_ENABLE_CUDASIM"] = "1"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--probe-only", "--out", str(tmp_path)],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    if "no GPU" in result.stdout:
        report = json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))
        assert report["status"] == "no-gpu" and report["message"].startswith("no GPU")
    else:  # a machine with a GPU: the probe says which
        assert "GPU found" in result.stdout, result.stdout


def test_gpu_check_rejects_bad_arguments() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--size-gb", "0"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and "--size-gb" in result.stderr
