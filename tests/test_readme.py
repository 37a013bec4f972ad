"""The README as a newcomer reads it: its two commands exist (CI runs the test command exactly
as written), its Python examples run as written, its results section is what
``bench/readme_table.py`` generates from the run it keeps, and the behaviours it states hold."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import stablerules as sr

REPO = Path(__file__).resolve().parents[1]
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,bench]' --config-settings editable_mode=strict && .venv/bin/python -m pytest"
MAIN_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[bench,jax,torch,autograd]' --config-settings "
    "editable_mode=strict && .venv/bin/python bench/run.py --quick --engines"
)


def test_readme_commands_and_ci_agree() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert TEST_COMMAND in readme
    assert MAIN_COMMAND in readme
    assert TEST_COMMAND in ci.splitlines()


def test_readme_example_runs() -> None:
    readme = (REPO / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(example, "README.md example", "exec"), namespace)
    lazy = namespace["lazy"]
    assert isinstance(lazy, sr.Fill) and lazy.value == 560.0  # 7*10 copies, tiled 4*2 times


def test_readme_says_what_explain_does(capsys: pytest.CaptureFixture[str]) -> None:
    # explain returns the kernel source and prints nothing; the README says so and shows print().
    readme = (REPO / "README.md").read_text()
    assert "`sr.explain(op, *args)` prints" not in readme
    call = readme.split("`print(", 1)[1].split(")`", 1)[0]  # sr.explain(...), as the README writes it
    assert call.startswith("sr.explain(")
    namespace: dict[str, object] = {"sr": sr, "Val": sr.Val, "x": np.ones((2, 3))}
    text = eval(call, namespace)
    assert isinstance(text, str) and "def kernel(" in text
    assert capsys.readouterr().out == ""


SCRIPT_MARK = "# run as a script"


def _python_examples(readme: str) -> list[str]:
    """The examples run in this process (a script's example, marked on its first line, runs in
    its own: ``test_every_script_example_runs_as_a_script``)."""
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    return [block for block in blocks if not block.startswith(SCRIPT_MARK)]


@pytest.mark.slow
def test_every_script_example_runs_as_a_script(tmp_path: Path) -> None:
    """The distributed examples (JAX on two CPU devices, PyTorch on two gloo processes) run as
    written, each in a fresh interpreter with a time limit."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    scripts = [block for block in re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL) if block.startswith(SCRIPT_MARK)]
    assert len(scripts) == 2
    for index, script in enumerate(scripts):
        path = tmp_path / f"example_{index}.py"
        path.write_text(script, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},
        )
        assert done.returncode == 0, f"README script {index}:\n{done.stdout}\n{done.stderr}"


def test_every_python_example_runs_as_written() -> None:
    readme = (REPO / "README.md").read_text()
    examples = _python_examples(readme)
    assert len(examples) >= 3  # the first example, the behaviours, PyTorch
    for index, example in enumerate(examples):
        namespace: dict[str, object] = {}
        exec(compile(example, f"README.md python example {index}", "exec"), namespace)


def test_the_behaviours_the_readme_states_hold() -> None:
    readme = (REPO / "README.md").read_text()
    behaviours = _python_examples(readme)[1]
    namespace: dict[str, object] = {}
    exec(compile(behaviours, "README.md behaviours", "exec"), namespace)
    d, dense, dx, y = (namespace[name] for name in ("d", "dense", "dx", "y"))
    assert isinstance(d, sr.Fill) and isinstance(dense, np.ndarray) and dense.flags.writeable
    assert isinstance(dx, np.ndarray)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.tolist() == [1.0, 1.0, 1.0, 1.5]
    with pytest.raises(TypeError, match=r"sr\.materialize"):
        np.add(d, 1.0, out=d)  # type: ignore[call-overload]
    # sr.explain is "" for the ops without kernels the README lists
    x = np.ones((2, 3))
    assert sr.explain(sr.concatenate, (x, x)) == "" and sr.explain(sr.sum, x) == ""
    assert sr.explain(sr.sum, x, sr.Val(0)) != ""
    # cat's example needs a 1-D x32
    with pytest.raises(ValueError, match="cat: "):
        sr.cat(np.ones((2, 2), dtype=np.float32), 1.5, dims=sr.Val(0))
    for claim in ("--enable-error-code deprecated", "`sr.explain` returns `\"\"`", "1-D `x32`", "6.4 GB", "15 minutes"):
        assert claim in readme, claim


def test_plain_int_statics_are_flagged_only_with_the_deprecated_error_code(tmp_path: Path) -> None:
    program = tmp_path / "plain_int.py"
    program.write_text("import numpy as np\nimport stablerules as sr\n\nsr.sum(np.ones((2, 3)), axis=0)\n")

    def mypy(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), *flags, str(program)],
            capture_output=True, text=True, timeout=600, cwd=REPO,
        )

    assert mypy().returncode == 0
    flagged = mypy("--enable-error-code", "deprecated")
    assert flagged.returncode == 1 and "[deprecated]" in flagged.stdout, flagged.stdout


def _readme_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_table", REPO / "bench" / "readme_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_section_is_generated_from_the_kept_run() -> None:
    """The README's results are one run of the main job, regenerated here from its JSON: the
    command, the date, the machine and its load come with the numbers."""
    table = _readme_table()
    document = json.loads((REPO / "bench" / "readme_results.json").read_text(encoding="utf-8"))
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index(table.BEGIN) : readme.index(table.END) + len(table.END)]
    assert section == table.render(document)
    meta = document["meta"]
    assert meta["mode"] == "quick" and meta["command"] == "python bench/run.py --quick --engines"
    assert all(version not in ("skipped", "not installed") for version in meta["peers"].values())
    assert meta["date"][:10] in section and "load average" in section
    assert "Results (a real run of the main job)" not in readme  # the old, round-narrating section
