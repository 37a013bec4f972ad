"""The package as a new user gets it: the README's editable install, then ``mypy --strict``.

A fresh copy of the package (``pyproject.toml``, ``README.md``, ``stablerules/``) is installed
with the README's own ``pip install -e`` options into a throwaway virtual environment, with
build isolation (pip fetches the build backend the way a user's pip does) and ``--no-deps``
(numpy and numba come from the test run's environment through a ``.pth`` file, which is also
where mypy finds NumPy's stubs). A user file in another directory is then type-checked with
``mypy --strict --python-executable <that venv>``: the types must be stablerules' own, not
``Any`` from a module mypy could not find.

A second check reads the sources the way a user with ``MYPYPATH`` does: then stablerules'
modules are the user's code, checked with the user's ``--strict`` and without our ``stubs/``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy
import pytest

REPO = Path(__file__).resolve().parents[1]

USER_FILE = """\
from typing import assert_type

import numpy as np
from numpy.typing import NDArray

import stablerules as sr
from stablerules import Val

x = np.ones((2, 3), dtype=np.float32)
y = sr.repeat(x, Val(3), axis=Val(0))
assert_type(y, np.ndarray[tuple[int, int], np.dtype[np.float32]])  # the rank kept
z, back = sr.rrule(sr.kron, x, x)
(da, db) = back(np.ones(z.shape, dtype=np.float32))
assert_type(da, np.ndarray[tuple[int, int], np.dtype[np.float32]])
g: NDArray[np.float32] = np.ones(4, dtype=np.float32)
assert_type(sr.flip(g), NDArray[np.float32])  # an unknown rank stays unknown
reveal_type(sr.tile)
"""


def _readme_install_options() -> list[str]:
    """The options the README's commands give ``pip install`` (minus ``-q``, ``-e`` and the
    target), the same in each command."""
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"\.venv/bin/pip install ([^&\n]+)", readme)
    assert commands, "README.md gives no pip install command"
    options = {
        tuple(word for word in shlex.split(command) if word not in {"-q", "-e"} and not word.startswith("."))
        for command in commands
    }
    assert len(options) == 1, f"the README's install commands differ in their options: {commands}"
    return list(options.pop())


def _package_copy(destination: Path) -> Path:
    destination.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, destination / name)
    shutil.copytree(REPO / "stablerules", destination / "stablerules", ignore=shutil.ignore_patterns("__pycache__"))
    return destination


def _mypy(arguments: list[str], cwd: Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", *arguments]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)


def _user_project(tmp_path: Path) -> Path:
    user = tmp_path / "user-project"
    user.mkdir()
    (user / "user.py").write_text(USER_FILE)
    return user


def _clean_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "MYPYPATH"}}
    environment["PYTHONNOUSERSITE"] = "1"
    return environment


def test_pyproject_license_is_an_spdx_expression() -> None:
    # setuptools >= 77 deprecates the TOML-table form (a warning on every install).
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert isinstance(pyproject["project"]["license"], str)
    requires = pyproject["build-system"]["requires"]
    assert any(re.fullmatch(r"setuptools>=(\d+)", item) and int(item.split(">=")[1]) >= 77 for item in requires)


@pytest.mark.slow
def test_readme_editable_install_gives_mypy_the_types(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    package = _package_copy(tmp_path / "package")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    # numpy (and numba) from this test run's environment; its own .pth files are not read.
    (Path(site) / "zz_test_runner.pth").write_text(str(Path(numpy.__file__).resolve().parents[1]) + "\n")
    environment = _clean_environment()
    install = [
        sys.executable, "-m", "pip", "--python", str(python), "install", "-v", "--no-deps",
        *_readme_install_options(), "-e", str(package),
    ]
    installed = subprocess.run(install, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600)
    log = installed.stdout + installed.stderr
    assert installed.returncode == 0, log[-5000:]
    assert "DeprecationWarning" not in log, log[-5000:]

    user = _user_project(tmp_path)
    checked = _mypy(
        ["--python-executable", str(python), "--cache-dir", str(tmp_path / "mypy-cache"), "user.py"], user, environment
    )
    output = checked.stdout + checked.stderr
    assert "error" not in output and checked.returncode == 0, output
    assert 'Revealed type is "stablerules._ops.Tile"' in output, output  # the generated stub's class


@pytest.mark.slow
def test_mypy_over_the_sources_reports_no_error_in_stablerules(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    package = _package_copy(tmp_path / "package")
    user = _user_project(tmp_path)
    environment = {**_clean_environment(), "MYPYPATH": str(package)}
    checked = _mypy(["--cache-dir", str(tmp_path / "mypy-cache"), "user.py"], user, environment)
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0 and "error" not in output, output
