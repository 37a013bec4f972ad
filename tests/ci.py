"""What a test does when a tool it needs is missing: skip on a developer's machine, fail in CI.

CI (``CI=true``, as GitHub Actions and most CI services set it) installs everything the suite
uses, Numba's CUDA simulator included, so a missing or broken tool there is a broken build, not
a reason to skip.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_unless_ci(reason: str) -> NoReturn:
    """``pytest.skip(reason)``, or ``pytest.fail`` when running in CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI={os.environ.get('CI')}: in CI this must run, not skip)", pytrace=False)
    pytest.skip(reason)
