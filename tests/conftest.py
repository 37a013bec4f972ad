"""Test-session setup: a throwaway kernel cache directory unless one is given, removed when the
session ends (subprocesses of the run inherit it through the environment); the ``slow`` mark
on the tests listed in :data:`SLOW`; and the check that no CPU kernel call passes a written
buffer overlapping another argument (``tests/overlaps.py``), the promise ``noalias`` kernels
are compiled on."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.overlaps import install_overlap_check

_CREATED: str | None = None
if "STABLERULES_CACHE_DIR" not in os.environ:
    _CREATED = tempfile.mkdtemp(prefix="stablerules-test-cache-")
    os.environ["STABLERULES_CACHE_DIR"] = _CREATED

SLOW: dict[str, str] = {
    "tests/test_jax_distributed.py": "its tests share one run of tests/jax_mesh_checks.py in a child process (~35 s of CPU)",
    "tests/test_torch_distributed.py::test_ddp_trains_as_one_process": "two gloo worker processes (~11 s of CPU)",
    "tests/test_torch_distributed.py::test_fsdp2_trains_as_one_process": "two gloo worker processes (~10 s of CPU)",
    "tests/test_torch_distributed.py::test_dtensors_pass_through_with_sharding_rules": "two gloo worker processes (~10 s of CPU)",
    "tests/test_typing.py::test_pass_file_has_no_errors_under_pyright": "shares one pyright run (~20 s of CPU, ~45 s of wall time)",
    "tests/test_typing.py::test_fail_file_has_errors_on_the_named_lines_under_pyright": "shares the same pyright run",
}
"""Tests that take more than about 10 s alone, by file or by test (parameters left off), and
why: ``pytest -m "not slow"`` leaves them out of the inner loop; CI runs them. The other slow
tests carry ``@pytest.mark.slow`` where they are defined. An entry that names no collected
test fails the run (a renamed test must not silently lose its mark)."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    matched: set[str] = set()
    for item in items:
        path, _, rest = item.nodeid.partition("::")
        test = f"{path}::{rest.split('[')[0]}"
        for entry in (path, test):
            if entry in SLOW:
                item.add_marker(pytest.mark.slow)
                matched.add(entry)
    if any("::" in str(arg) for arg in config.args):
        return  # single tests were asked for: the others are not collected
    files = {item.nodeid.partition("::")[0] for item in items}
    stale = sorted(entry for entry in SLOW if entry.partition("::")[0] in files and entry not in matched)
    if stale:
        raise pytest.UsageError(f"tests/conftest.py SLOW names tests that do not exist: {stale}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a kernel of ours needed Numba's full target refresh: every template
    must compile on the lean one (``_private_numba.lean_compile``), or the cold start it
    saves is lost without a word."""
    from stablerules import _private_numba

    if _private_numba.lean_retries:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nstablerules: {_private_numba.lean_retries} kernel build(s) failed on the lean Numba refresh "
              "and compiled only after the full one (see _private_numba.LEAN_MODULES)")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CREATED is not None:
        shutil.rmtree(_CREATED, ignore_errors=True)


install_overlap_check()
