"""The typing promises of SPEC sections 7 and 11, checked by running mypy and basedpyright on the
files in tests/typing/.

Two mypy runs, each over all the files at once (mypy costs ~10-30 s a run, mostly NumPy's
stubs; the incremental caches live in the repository's git-ignored ``.mypy_cache``):

- the *user* run: the files copied into a fresh directory, checked with a config that says
  ``strict = True`` and nothing else (no ``mypy_path``, no ``stubs/``), stablerules found as an
  installed PEP 561 package (through ``PYTHONPATH``, so its own modules are analyzed but their
  errors are not the user's). This is what someone who installed the package sees.
- the *project* run: the same files with the repository's ``mypy.ini`` (``mypy_path = stubs``).

File kinds, by name prefix (none is a pytest module, none is ever executed):

- ``pass_*.py``: no errors in either run (``assert_type`` everywhere, so "no errors" means
  "exactly these types").
- ``fail_*.py``: exactly the errors written in the file: a ``# E: fragment  [code]`` comment
  line names an error expected on the next line that is not such a comment: one with that
  error code whose message contains the fragment (a short one: the point of the error, not
  mypy's full rendering of an overload set). The same files under basedpyright: an error on
  exactly the lines named (its rule names and messages are its own, so only lines compare).
- ``reveal_*.py``: exactly the ``reveal_type`` notes written as ``# R: type`` comments.
- ``stubs_*.py``: our Numba stubs in use: no errors in the project run, and errors in the user
  run, where the installed numba's own (looser) types apply.

The pass and fail files also go through basedpyright (the ``pyright_run``, standard mode, with
stablerules found as an installed package): pass files without errors, fail files with errors on
exactly the lines their ``# E:`` comments name. Where the two checkers must differ, the typing
file says why at that line (``# pyright: ignore[...]`` or ``# type: ignore[...]``).

The generated stubs are checked for freshness: ``tools/generate.py --check`` must find every
generated file as the schema writes it.

The user run also checks a generated file that reveals every public name's type (functions,
op ``__call__``s, classes' constructors and attributes) and fails on any ``Any`` beyond the
two spellings NumPy's stubs use for "any shape" and "any precision".
"""

from __future__ import annotations

import fnmatch
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import stablerules
import stablerules.testing

from tests.ci import skip_unless_ci

REPO = Path(__file__).resolve().parents[1]
TYPING = REPO / "tests" / "typing"
USER_CONFIG = "[mypy]\nstrict = True\n"
PUBLIC_API_FILE = "public_api.py"

_LINE = re.compile(r"^(?P<file>[^:\s]+\.py):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$")
# Spellings of Any that are not holes of ours: NumPy's "any shape" (tuple[Any, ...]) and "any
# precision / item type" (Any arguments to its scalar types: np.generic is generic[Any]), and
# Callable[..., X]'s "any parameters" (revealed as *Any, **Any; SPEC's own spelling of a
# pullback). numpy.typing.DTypeLike's expansion is revealed in the same run and removed too.
_ALLOWED_ANY = re.compile(
    r"tuple\[Any, \.\.\.\]"
    r"|\b(?:generic|number|integer|signedinteger|unsignedinteger|inexact|floating|complexfloating)"
    r"\[Any(?:, [^\[\]]+)?\]"
    r"|def \(\*Any, \*\*Any\)"
)
_DTYPE_LIKE_PROBE = "dtype_like_probe"
_PUBLIC_DUNDERS = ("__call__", "__enter__", "__exit__", "__array__")


@dataclass(frozen=True)
class MypyRun:
    """mypy's output lines, grouped by file name (no directory)."""

    status: int
    output: str

    def lines(self, name: str, kind: str) -> list[str]:
        found = []
        for line in self.output.splitlines():
            match = _LINE.match(line)
            if match and Path(match["file"]).name == name and match["kind"] == kind:
                found.append(f"{name}:{match['line']}: {kind}: {match['text']}")
        return found


def _typing_files(prefix: str) -> list[Path]:
    return sorted(TYPING.glob(f"{prefix}_*.py"))


def _all_typing_files() -> list[Path]:
    return [path for prefix in ("pass", "fail", "reveal", "stubs") for path in _typing_files(prefix)]


def _cache_dir(kind: str) -> str:
    # mypy's own place for its cache (.mypy_cache, git-ignored), so runs stay incremental and
    # nothing is left in the system's temp directory.
    return str(REPO / ".mypy_cache" / f"typing-{kind}")


def _expected(path: Path, marker: str, kind: str, template: str) -> list[str]:
    """``path``'s ``# marker`` comments as mypy lines about the next non-marker line."""
    expected: list[str] = []
    pending: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(f"# {marker}: "):
            pending.append(stripped[len(marker) + 4 :])
            continue
        expected.extend(f"{path.name}:{number}: {kind}: {template.format(text)}" for text in pending)
        pending = []
    assert not pending, f"{path.name}: '# {marker}:' comment at the end of the file"
    return expected


_CODED = re.compile(r"^(?P<where>[^:]+:\d+: error: )(?P<text>.*?)  \[(?P<code>[a-z-]+)\]$")


def _matching(actual: list[str], expected: list[str]) -> list[str]:
    """``actual``, each line replaced by the expected line it fulfils (same place and code,
    the expected fragment inside its message), so a test compares whole lists."""
    remaining = list(expected)
    out = []
    for line in actual:
        match = _CODED.match(line)
        for wanted in remaining:
            want = _CODED.match(wanted)
            if (
                match and want and match["where"] == want["where"] and match["code"] == want["code"]
                and want["text"] in match["text"]
            ):
                remaining.remove(wanted)
                out.append(wanted)
                break
        else:
            out.append(line)
    return out


def _stray_any(revealed: str, allowed: str = "") -> str | None:
    """What is left of a revealed type after removing the allowed spellings, if it has Any."""
    rest = revealed.replace(allowed, "") if allowed else revealed
    rest = _ALLOWED_ANY.sub("", rest)
    return rest if re.search(r"\bAny\b", rest) else None


# --------------------------------------------------------------------------------------------
# The generated public-API file


def _type_arguments(cls: type) -> str:
    """``[...]`` for a generic class: each parameter's first constraint, else ``object``."""
    parameters = getattr(cls, "__parameters__", ())
    if not parameters:
        return ""
    names = [_type_argument(parameter) for parameter in parameters]
    return "[" + ", ".join(names) + "]"


def _type_argument(parameter: object) -> str:
    """A type within ``parameter``'s bound (a TypeVar's): a shape for a tuple bound
    (``Fill``'s), a scalar type for a NumPy one, ``int`` for ``Val``'s."""
    bound = getattr(parameter, "__bound__", None)
    if bound is tuple:
        return "tuple[int, ...]"
    if isinstance(bound, type) and bound.__module__ == "numpy":
        return "numpy.float64"
    if bound is not None and int in getattr(bound, "__args__", ()):
        return "int"
    return "object"


def _public_api_source() -> tuple[str, int]:
    """A file revealing every public callable and attribute, as a user would reach it."""
    header = ['"""Generated by tests/test_typing.py: every public name\'s type."""', ""]
    header += ["import numpy.typing", "import stablerules", "import stablerules.testing", ""]
    # First: how this mypy spells numpy.typing.DTypeLike (NumPy's own alias, full of Any).
    header += [f"def {_DTYPE_LIKE_PROBE}(value: numpy.typing.DTypeLike) -> None: ...", ""]
    body: list[str] = [f"reveal_type({_DTYPE_LIKE_PROBE})"]
    count = 1
    for module in (stablerules, stablerules.testing):
        for name in module.__all__:
            value = getattr(module, name)
            expression = f"{module.__name__}.{name}"
            if isinstance(value, (types.UnionType, types.GenericAlias)):
                continue  # a type alias, not a value: its parts are revealed where it is used
            if isinstance(value, type):
                body.append(f"reveal_type({expression})")  # the constructor
                body.append(f"def check_{name}(value: {expression}{_type_arguments(value)}) -> None:")
                count += 1
                attributes = list(vars(value)) + list(getattr(value, "__annotations__", {}))
                for attribute in dict.fromkeys(attributes):
                    if not attribute.startswith("_") or attribute in _PUBLIC_DUNDERS:
                        body.append(f"    reveal_type(value.{attribute})")
                        count += 1
                body.append("    return None")
            elif callable(value) and not inspect.isfunction(value):
                # an op: an instance of its own class, with a typed __call__
                body.append(f"reveal_type({expression}.__call__)")
                body.append(f"reveal_type({expression}.kernel_requests)")
                count += 2
            else:
                body.append(f"reveal_type({expression})")
                count += 1
    return "\n".join(header + body) + "\n", count


# --------------------------------------------------------------------------------------------
# The two runs


@pytest.fixture(scope="module")
def user_run(tmp_path_factory: pytest.TempPathFactory) -> MypyRun:
    pytest.importorskip("mypy")
    project = tmp_path_factory.mktemp("user-project")
    site = project / "site"
    site.mkdir()
    # stablerules as an installed package would be: found on sys.path, py.typed inside it.
    os.symlink(REPO / "stablerules", site / "stablerules", target_is_directory=True)
    files = []
    for path in _all_typing_files():
        shutil.copy(path, project / path.name)
        files.append(path.name)
    source, _ = _public_api_source()
    (project / PUBLIC_API_FILE).write_text(source)
    files.append(PUBLIC_API_FILE)
    (project / "user.ini").write_text(USER_CONFIG)
    # A subprocess, so mypy reads this PYTHONPATH for its package search path (an in-process
    # run reuses the first search path it computed); its current directory holds no stablerules.
    environment = {**os.environ, "PYTHONPATH": str(site)}
    command = [sys.executable, "-m", "mypy", "--config-file", "user.ini", "--cache-dir", _cache_dir("user"), *files]
    completed = subprocess.run(command, cwd=project, env=environment, capture_output=True, text=True, timeout=600)
    return MypyRun(completed.returncode, completed.stdout + completed.stderr)


@pytest.fixture(scope="module")
def project_run() -> MypyRun:
    api = pytest.importorskip("mypy.api")
    files = [str(path.relative_to(REPO)) for path in _all_typing_files()]
    previous = os.getcwd()
    os.chdir(REPO)
    try:
        stdout, stderr, status = api.run(
            ["--config-file", "mypy.ini", "--cache-dir", _cache_dir("project"), *files]
        )
    finally:
        os.chdir(previous)
    return MypyRun(status, stdout + stderr)


PYRIGHT_CONFIG = {
    "typeCheckingMode": "standard",
    "pythonVersion": "3.11",
    "reportUnnecessaryTypeIgnoreComment": False,
    "reportMissingModuleSource": False,
}


@dataclass(frozen=True)
class PyrightRun:
    """basedpyright's errors as (file name, line) pairs, with its messages for failures."""

    errors: tuple[tuple[str, int, str], ...]

    def lines(self, name: str) -> list[int]:
        return sorted(line for file, line, _ in self.errors if file == name)

    def messages(self, name: str) -> str:
        return "\n".join(f"{file}:{line}: {text}" for file, line, text in self.errors if file == name)


@pytest.fixture(scope="module")
def pyright_run(tmp_path_factory: pytest.TempPathFactory) -> PyrightRun:
    executable = shutil.which("basedpyright", path=str(Path(sys.executable).parent)) or shutil.which("basedpyright")
    if executable is None:
        skip_unless_ci("basedpyright is not installed (pip install -e '.[test]')")
    project = tmp_path_factory.mktemp("pyright-project")
    site = project / "site"
    site.mkdir()
    os.symlink(REPO / "stablerules", site / "stablerules", target_is_directory=True)
    files = []
    for path in _typing_files("pass") + _typing_files("fail"):
        shutil.copy(path, project / path.name)
        files.append(path.name)
    (project / "pyrightconfig.json").write_text(json.dumps({**PYRIGHT_CONFIG, "extraPaths": [str(site)]}))
    command = [executable, "--outputjson", "--pythonpath", sys.executable, "-p", "pyrightconfig.json", *files]
    completed = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)
    report = json.loads(completed.stdout)
    errors = tuple(
        (Path(item["file"]).name, item["range"]["start"]["line"] + 1, f"{item['message']} ({item.get('rule', '')})")
        for item in report["generalDiagnostics"]
        if item["severity"] == "error"
    )
    return PyrightRun(errors)


RUNS = ["user_run", "project_run"]


def _run(request: pytest.FixtureRequest, name: str) -> MypyRun:
    run = request.getfixturevalue(name)
    assert isinstance(run, MypyRun)
    assert "Found" in run.output or "Success" in run.output, f"mypy did not run:\n{run.output}"
    return run


# --------------------------------------------------------------------------------------------
# Tests


def test_typing_files_exist_and_are_not_pytest_modules() -> None:
    assert _typing_files("pass") and _typing_files("fail") and _typing_files("reveal")
    assert _typing_files("stubs")
    for path in TYPING.glob("*.py"):
        assert path.name.split("_")[0] in {"pass", "fail", "reveal", "stubs"}, path.name
        assert not fnmatch.fnmatch(path.name, "test_*.py") and not fnmatch.fnmatch(path.name, "*_test.py")
    assert not (TYPING / "__init__.py").exists()
    assert (REPO / "stablerules" / "py.typed").is_file()


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("path", _typing_files("pass"), ids=lambda path: path.name)
def test_pass_file_has_no_errors(request: pytest.FixtureRequest, run_name: str, path: Path) -> None:
    run = _run(request, run_name)
    assert run.lines(path.name, "error") == []


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("path", _typing_files("fail"), ids=lambda path: path.name)
def test_fail_file_has_exactly_the_named_errors(request: pytest.FixtureRequest, run_name: str, path: Path) -> None:
    run = _run(request, run_name)
    expected = _expected(path, "E", "error", "{}")
    assert expected, f"{path.name} names no expected error"
    assert _matching(run.lines(path.name, "error"), expected) == expected


@pytest.mark.parametrize("run_name", RUNS)
@pytest.mark.parametrize("path", _typing_files("reveal"), ids=lambda path: path.name)
def test_reveal_file_has_exactly_the_named_types(request: pytest.FixtureRequest, run_name: str, path: Path) -> None:
    run = _run(request, run_name)
    assert run.lines(path.name, "error") == []
    expected = _expected(path, "R", "note", 'Revealed type is "{}"')
    assert expected and run.lines(path.name, "note") == expected


@pytest.mark.parametrize("path", _typing_files("pass"), ids=lambda path: path.name)
def test_pass_file_has_no_errors_under_pyright(pyright_run: PyrightRun, path: Path) -> None:
    assert pyright_run.lines(path.name) == [], pyright_run.messages(path.name)


@pytest.mark.parametrize("path", _typing_files("fail"), ids=lambda path: path.name)
def test_fail_file_has_errors_on_the_named_lines_under_pyright(pyright_run: PyrightRun, path: Path) -> None:
    expected = sorted({int(line.split(":")[1]) for line in _expected(path, "E", "error", "{}")})
    assert sorted(set(pyright_run.lines(path.name))) == expected, pyright_run.messages(path.name)


def test_generated_files_are_fresh() -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "tools" / "generate.py"), "--check"], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def _generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("_stablerules_generate", REPO / "tools" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_generated_files_cover_the_adapters_per_op_lines() -> None:
    """The freshness check covers each adapter's per-op lines (the public ops, ``__all__``):
    they are whole generated files (first line says so), which the adapter's hand-written
    ``__init__.py`` star-imports, and a hand edit inside one of them (an op's line dropped) is
    stale."""
    generate = _generator()
    outputs = generate.outputs()
    whole = [
        ("autograd/_public.py", 'flip: _signatures.Flip = DEFINITIONS["flip"]\n'),
        ("torch/_public.py", 'flip: _signatures.Flip = DEFINITIONS["flip"]\n'),
        ("jax/_public.py", 'flip: _signatures.Flip = DEFINITIONS["flip"]\n'),
        ("torch/_public.py", '    "flip",\n'),
        ("autograd/_signatures.py", "class Flip(Protocol):\n"),
    ]
    for relative, line in whole:
        text = (REPO / "stablerules" / relative).read_text()
        assert text.startswith(generate.HEADER), relative
        edited = text.replace(line, "", 1)
        assert edited != text, relative
        assert outputs[REPO / "stablerules" / relative] == text != edited, relative
    for package, public in (("torch", "_public"), ("jax", "_public"), ("autograd", "_public")):
        init = (REPO / "stablerules" / package / "__init__.py").read_text()
        assert "do not edit by hand" not in init and REPO / "stablerules" / package / "__init__.py" not in outputs
        assert f"from .{public} import *" in init and f"__all__ += {public}.__all__\n" in init, package


def test_stubs_are_what_types_numba(request: pytest.FixtureRequest) -> None:
    project, user = _run(request, "project_run"), _run(request, "user_run")
    for path in _typing_files("stubs"):
        assert project.lines(path.name, "error") == []
        # Without stubs/, numba's own types apply: bare @njit no longer keeps the signature.
        line = next(
            number for number, text in enumerate(path.read_text().splitlines(), start=1)
            if text.startswith("assert_type(scale,")
        )
        assert any(error.startswith(f"{path.name}:{line}: error:") for error in user.lines(path.name, "error"))


def test_user_and_project_configs_give_the_same_types(request: pytest.FixtureRequest) -> None:
    project, user = _run(request, "project_run"), _run(request, "user_run")
    for path in _typing_files("pass") + _typing_files("fail") + _typing_files("reveal"):
        for kind in ("error", "note"):
            assert project.lines(path.name, kind) == user.lines(path.name, kind), path.name


def test_public_api_has_no_any(request: pytest.FixtureRequest) -> None:
    run = _run(request, "user_run")
    _, count = _public_api_source()
    assert run.lines(PUBLIC_API_FILE, "error") == []
    prefix = "Revealed type is "
    revealed = [
        note.split(prefix, 1)[1] for note in run.lines(PUBLIC_API_FILE, "note") if prefix in note
    ]
    assert len(revealed) == count
    probe = revealed[0]
    assert probe.startswith('"def (value: ') and probe.endswith(')"'), probe
    dtype_like = probe[len('"def (value: ') : -len(')"')]
    offending = [text for text in revealed[1:] if _stray_any(text, dtype_like)]
    assert offending == [], "Any in public signatures:\n" + "\n".join(offending)


@pytest.mark.parametrize(
    ("revealed", "stray"),
    [
        ('def (x: numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.generic[Any]]]) -> builtins.int', False),
        ('def [F <: numpy.inexact[Any, builtins.float | builtins.complex]] (x: F) -> F', False),
        ('def (x: numpy.ndarray[tuple[Any, ...], numpy.dtype[Any]]) -> builtins.int', True),
        ("def (x: builtins.object) -> Any", True),
        ("def (*args: Any, **kwargs: Any) -> builtins.object", True),
        ("builtins.dict[builtins.str, Any]", True),
        ("def (rule: def (*Any, **Any) -> builtins.object)", False),
        ("def (rule: def (*args: Any) -> builtins.object)", True),
    ],
)
def test_any_check_catches_our_any_and_allows_numpy_spellings(revealed: str, stray: bool) -> None:
    assert (_stray_any(revealed) is not None) == stray
