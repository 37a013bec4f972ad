"""The public face: ``stablerules.__all__`` pinned, and every public name defined in our modules.

As in JAX, the implementation lives in private modules (``stablerules._cache``,
``stablerules.rules.kron``, ...) and ``stablerules/__init__.py`` only re-exports: a name
added to (or dropped from) the public face has to be added here too, on purpose.
"""

from __future__ import annotations

import inspect
import json
import pydoc
import subprocess
import sys
import types
from pathlib import Path

import pytest

import stablerules
import stablerules as sr
import stablerules.testing
from stablerules._op import Op

PUBLIC = [
    "ArraySpec",
    "CacheInfo",
    "DynamicFallbackError",
    "Fill",
    "NoTangent",
    "Pullback",
    "RecompileError",
    "ShapeSignature",
    "StaticIndex",
    "Tangent",
    "Thunk",
    "Val",
    "ZeroTangent",
    "__version__",
    "broadcast_to",
    "cache_info",
    "cat",
    "clear_caches",
    "concatenate",
    "explain",
    "flip",
    "frule",
    "getindex",
    "hstack",
    "index_add",
    "ix",
    "kron",
    "materialize",
    "mean",
    "no_compile",
    "no_fallback",
    "pad",
    "permute_dims",
    "precompile",
    "pullback",
    "record",
    "register_frule",
    "register_rrule",
    "repeat",
    "reshape",
    "roll",
    "rrule",
    "split",
    "stack",
    "sum",
    "swapaxes",
    "take",
    "take_along_axis",
    "tile",
    "transpose",
    "unthunk",
    "vstack",
]
TESTING_PUBLIC = ["test_frule", "test_rrule"]


def _is_implementation(module_name: str) -> bool:
    """``stablerules._x`` or ``stablerules.rules.x``: where the implementation lives."""
    parts = module_name.split(".")
    return parts[0] == "stablerules" and len(parts) > 1 and (parts[1].startswith("_") or parts[1] == "rules")


def _homes(name: str, value: object) -> list[str]:
    """The implementation modules that define ``value`` under ``name``."""
    return [
        module_name
        for module_name, module in list(sys.modules.items())
        if module is not None and _is_implementation(module_name) and vars(module).get(name) is value
    ]


def test_all_is_pinned() -> None:
    assert sorted(stablerules.__all__) == PUBLIC
    assert len(set(stablerules.__all__)) == len(stablerules.__all__)
    assert sorted(stablerules.testing.__all__) == TESTING_PUBLIC


def test_nothing_public_outside_all() -> None:
    # Submodules are reachable as attributes once imported; everything else public is in __all__.
    stray = [
        name
        for name, value in vars(stablerules).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name not in stablerules.__all__
    ]
    assert stray == []


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_lives_in_an_implementation_module(name: str) -> None:
    value = getattr(stablerules, name)
    assert _homes(name, value), f"stablerules.{name} is not defined in an implementation module"
    if isinstance(value, (str, types.UnionType)):
        return  # __version__ and type aliases carry no __module__ of their own
    # Classes, functions and op instances (through their class) name the module they live in.
    module = getattr(value, "__module__", None)
    assert isinstance(module, str) and _is_implementation(module), (name, module)


@pytest.mark.parametrize("name", TESTING_PUBLIC)
def test_testing_names_live_in_testing(name: str) -> None:
    value = getattr(stablerules.testing, name)
    assert value.__module__ == "stablerules.testing"


OPS = [name for name in sr.__all__ if isinstance(getattr(sr, name), Op)]


ALL_OPS = [
    "repeat", "tile", "concatenate", "stack", "hstack", "vstack", "cat", "kron",
    "flip", "roll", "permute_dims", "transpose", "swapaxes", "reshape", "broadcast_to", "sum", "mean", "pad", "split",
    "getindex", "take", "take_along_axis", "index_add",
]
# The ops with a static argument (a Val, or a plain int or tuple counted as dynamic) and its name.
STATIC = {
    "repeat": "repeats", "tile": "reps", "concatenate": "axis", "stack": "axis", "cat": "dims",
    "flip": "axis", "roll": "shift", "permute_dims": "axes", "transpose": "axes", "swapaxes": "axis1", "reshape": "shape",
    "broadcast_to": "shape", "sum": "axis", "mean": "axis", "pad": "pad_width", "split": "indices_or_sections",
    "take": "axis", "take_along_axis": "axis", "index_add": "axis",
}


def test_every_public_op_is_found() -> None:
    assert sorted(OPS) == sorted(ALL_OPS)
    assert set(STATIC) <= set(OPS)


@pytest.mark.parametrize("name", OPS)
def test_help_shows_an_op_as_a_function_with_its_signature_and_docstring(name: str) -> None:
    op = getattr(sr, name)
    text = pydoc.plain(pydoc.render_doc(op))
    assert f"\n{name}(" in text, text[:500]  # documented as a function named after the op
    assert ": object" not in text and "'object'" not in text, text[:800]
    assert "Call forms" in text and "NDArray" in text
    signature = inspect.signature(op)
    first = next(iter(signature.parameters))
    assert first in {"x", "arrays", "a"}, signature
    doc = inspect.getdoc(op) or ""
    assert len(doc.split("Call forms")[0].strip()) > 40, doc  # the op's own words come first


def test_help_lists_every_call_form_of_repeat() -> None:
    text = pydoc.plain(pydoc.render_doc(sr.repeat))
    # one form per signature of repeat's schema row
    assert "repeat(x: npt.NDArray[_DT], repeats: Val[int], axis: Val[int] | None = None) -> npt.NDArray[_DT]" in text
    assert "repeat(x: npt.NDArray[_DT], repeats: npt.NDArray[np.integer], axis: Val[int] | None = None)" in text
    counts = "Val[int] | Val[tuple[int, ...]] | None = None"
    assert f"repeat(x: npt.NDArray[_DT], *, inner: {counts}, outer: {counts}) -> npt.NDArray[_DT]" in text
    assert "Repeat elements of an array" in text
    assert "a plain int or tuple where a ``Val`` goes is accepted too" in text


@pytest.mark.parametrize("name", sorted(STATIC))
def test_help_shows_the_val_forms_and_mentions_plain_ints(name: str) -> None:
    # The plain-int overloads (marked deprecated for mypy) are not call forms of their own: help
    # shows the Val forms and says once that a plain int or tuple is accepted too.
    text = pydoc.plain(pydoc.render_doc(getattr(sr, name)))
    forms = text.split("Call forms", 1)[1]
    assert forms.startswith(" (a plain int or tuple where a ``Val`` goes is accepted too"), forms[:200]
    static = STATIC[name]
    lines = [line for line in forms.splitlines() if line.strip().startswith(f"{name}(")]
    assert lines, forms
    shown = [line for line in lines if f"{static}: " in line]
    # every form's static is a Val (repeat's counts array form: its counts are data, not a static)
    counts_array = "repeats: npt.NDArray[np.integer]" if name == "repeat" else "-"
    assert shown and all(f"{static}: Val[" in line or counts_array in line for line in shown), shown
    signature = inspect.signature(getattr(sr, name))
    assert str(signature.parameters[static].annotation).startswith(("Val[", "_Val")), signature


def test_help_lists_the_call_forms_of_the_structure_ops() -> None:
    flip = pydoc.plain(pydoc.render_doc(sr.flip))
    assert "flip(x: npt.NDArray[_DT], axis: Val[int] | Val[tuple[int, ...]] | None = None) -> npt.NDArray[_DT]" in flip
    assert "Reverse the order of elements" in flip
    sum_text = pydoc.plain(pydoc.render_doc(sr.sum))
    assert "keepdims: Val[bool] = Val(False)) -> npt.NDArray[Any]" in sum_text
    split = pydoc.plain(pydoc.render_doc(sr.split))
    assert "axis: Val[int] = Val(0)) -> tuple[npt.NDArray[_DT], ...]" in split


def test_import_loads_no_op_family_until_an_op_is_used() -> None:
    # `import stablerules` pays only for the core; an op's family loads (and registers its
    # rules) the first time the op is reached through the package.
    code = (
        "import json, sys, stablerules as sr\n"
        "def families(): return sorted(m for m in sys.modules if m.startswith('stablerules.rules.'))\n"
        "before = families()\n"
        "op = sr.roll\n"
        "from stablerules import kron\n"
        "print(json.dumps([before, families(), 'roll' in dir(sr), op is sr.roll, kron is sr.kron]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, listed, same_roll, same_kron = json.loads(result.stdout)
    assert before == []
    assert after == ["stablerules.rules.flip", "stablerules.rules.kron"]
    assert listed and same_roll and same_kron


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'rol'"):
        getattr(stablerules, "rol")


def test_no_rule_module_hand_writes_an_ops_call_overloads() -> None:
    """An op's call forms live in one place, its schema row: the type checkers read the
    overloads generated from it (``_ops.pyi``), ``help()`` the forms ``Op`` builds from it; a
    hand-written ``@overload`` of an op's ``__call__`` would shadow them (issue 34)."""
    import ast

    rules = Path(sr.__file__).parent / "rules"
    found = []
    for path in sorted(rules.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "__call__":
                names = [ast.unparse(d) for d in node.decorator_list]
                if any(name.endswith("overload") for name in names):
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, found
