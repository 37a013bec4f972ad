"""``mypy --strict`` over the package, the tests and the benchmarks, as part of the test run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a full, non-incremental mypy --strict run: minutes
def test_mypy_strict_passes_on_package_tests_and_bench() -> None:
    api = pytest.importorskip("mypy.api")
    previous = os.getcwd()
    os.chdir(REPO)
    try:
        stdout, stderr, status = api.run(["--config-file", "mypy.ini", "--no-incremental"])
    finally:
        os.chdir(previous)
    assert status == 0, f"mypy --strict failed:\n{stdout}\n{stderr}"
