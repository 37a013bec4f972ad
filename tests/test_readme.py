"""The README's two commands exist, and CI runs the test command exactly as written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stablerules as sr

REPO = Path(__file__).resolve().parents[1]
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test,bench]' --config-settings editable_mode=strict && .venv/bin/python -m pytest"
MAIN_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[bench]' --config-settings editable_mode=strict && .venv/bin/python bench/run.py --quick"


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
