"""A test run leaves nothing of ours in the system's temp directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_test_session_leaves_no_stablerules_folder_in_the_temp_dir(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    environment = {key: value for key, value in os.environ.items() if key != "STABLERULES_CACHE_DIR"}
    environment["TMPDIR"] = str(temp)
    # One test that compiles kernels (the session's kernel cache) and one that runs mypy (its cache).
    tests = [
        "tests/rules/test_repeat.py::test_static_forms_share_kernels",
        "tests/test_typing.py::test_public_api_has_no_any",
    ]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    left = sorted(path.name for path in temp.iterdir() if path.name.startswith("stablerules"))
    assert left == [], left
