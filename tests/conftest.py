"""Test-session setup: a throwaway kernel cache directory unless one is given, removed when the
session ends (subprocesses of the run inherit it through the environment)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_CREATED: str | None = None
if "STABLERULES_CACHE_DIR" not in os.environ:
    _CREATED = tempfile.mkdtemp(prefix="stablerules-test-cache-")
    os.environ["STABLERULES_CACHE_DIR"] = _CREATED


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CREATED is not None:
        shutil.rmtree(_CREATED, ignore_errors=True)
