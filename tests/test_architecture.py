"""The import contract: layers import only downward, no circle, families never import each
other, the public face only re-exports.

Every module's imports are read with ``ast`` (function-level imports and ``TYPE_CHECKING``
blocks included: a lazy import is still a dependency), and each module has a layer:

====  ==========  ===========================================================================
  0   bottom      errors, configuration, guards and counters, ``Val``, memo, version, schema
  1   key         the kernel key (``ShapeSignature``, ``KernelSource``, ``Kernel``)
  2   values      array facts, dtype units, tangents, typing, registry, binder, thread split, pool,
                  object-code loader and its ELF linker
  3   kernels     cache, code generation, CUDA
  4   launch      the launchers
  5   scaffold    the op base, ``Plan``/``RuleOp``, views, dispatch, recording
  6   families    ``stablerules.rules.*``
  7   face        ``stablerules`` (and its generated ``_public``) and ``stablerules.testing``
  8   adapters    ``stablerules.torch``, ``stablerules.jax``, ``stablerules.autograd``
====  ==========  ===========================================================================

A module may import its own layer or below. ``ALLOWED`` lists the few edges that must stay for
now, each with its reason; a new circle, upward import or family-to-family import fails here.
Run this file directly (``python tests/test_architecture.py [ROOT]``) for the figures of a
checkout.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The engine adapters: the packages that declare their types to the generator (a new engine's
# package takes the adapters' layer without an edit here).
ENGINES = tuple(sorted(path.parent.name for path in (ROOT / "stablerules").glob("*/_adapter_types.py")))

LAYERS: dict[str, int] = {
    **dict.fromkeys(
        ("_errors", "_config", "_guards", "_val", "_memo", "_fork", "_version", "_schema", "_kernel_pipeline", "_renamed", "_private_python", "_private_numba", "_facts"), 0
    ),
    "_key": 1,
    **dict.fromkeys(
        ("_arrays", "_units", "_tangents", "_typing", "_registry", "_binding", "_parallel", "_pool", "_objectcode", "_elf", "_keying", "_results"), 2
    ),
    **dict.fromkeys(("_cache", "_codegen", "_cuda"), 3),
    "_launch": 4,
    **dict.fromkeys(("_op", "_steady", "_plan", "_pullbacks", "_rule", "_half", "_views", "_dispatch", "_record"), 5),
    "rules": 6,
    **dict.fromkeys(("", "_public", "testing"), 7),
    **dict.fromkeys(ENGINES, 8),
}
LAYER_NAMES = ("bottom", "key", "values", "kernels", "launch", "scaffold", "families", "face", "adapters")

# (importer, imported): why the edge stays (none now; a new exception needs its reason here).
ALLOWED: dict[tuple[str, str], str] = {}

# The engines' and the interpreter's private names: only a ``_private`` module may name them
# (``_private_python``, ``_private_numba``, ``jax._private``, ``torch._private``; each pinned by
# tests/test_private.py).
PRIVATE_NAMES = frozenset(
    {
        "_src", "_C", "_dynfunc", "_helperlib", "_nrt_python", "_data", "_cache_file", "_index_key",
        "_CacheLocator", "_are_functorch_transforms_active", "_current_level", "encodekey",
    }
)

# What the public face may bind besides re-exports: PEP 562's lazy op loading.
FACE_NAMES = {"__all__", "_OPS", "__getattr__", "__dir__"}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(root, path): path for path in sorted((root / "stablerules").rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The stablerules modules ``name`` imports anywhere in its text."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            submodules = {f"{target}.{alias.name}" for alias in node.names} & known
            found |= submodules or ({target} & known)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names} & known
    found.discard(name)
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    found = modules(root)
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def layer(name: str) -> int:
    parts = name.split(".")[1:]
    if not parts:
        return LAYERS[""]
    if parts[0] in LAYERS:
        return LAYERS[parts[0]]
    raise KeyError(f"{name}: give it a layer in tests/test_architecture.py's LAYERS")


def family(name: str) -> str | None:
    parts = name.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 and parts[1] == "rules" else None


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((source, target) for source, targets in edges.items() for target in targets if layer(target) > layer(source))


def across_families(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (source, target)
        for source, targets in edges.items()
        for target in targets
        if family(source) and family(target) and family(source) != family(target)
    )


def face_definitions(root: Path = ROOT) -> list[str]:
    """Names the public face binds other than by import (and ``FACE_NAMES``)."""
    tree = ast.parse((root / "stablerules" / "__init__.py").read_text(encoding="utf-8"))
    defined: list[str] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.Delete, ast.Pass)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring, or a constant's
            if isinstance(node, ast.If):
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.extend(ast.unparse(target) for target in targets)
            else:
                defined.append(ast.unparse(node)[:60])

    walk(tree.body)
    return [name for name in defined if name not in FACE_NAMES]


def docstring_ids(tree: ast.Module) -> set[int]:
    """The ``id`` of every docstring node of a module, its classes and functions."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def private_uses(name: str, path: Path) -> list[str]:
    """The private engine or interpreter names ``name`` uses in its code (attributes, names,
    imports, strings other than docstrings; comments and docstrings are prose)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = docstring_ids(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.ImportFrom):
            words = (node.module or "").split(".") + [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            words = [part for alias in node.names for part in alias.name.split(".")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words = node.value.split(".")
        found += [f"{name}:{getattr(node, 'lineno', '?')}: {word}" for word in words if word in PRIVATE_NAMES]
    return found


def _without_allowed(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {source: {target for target in targets if (source, target) not in ALLOWED} for source, targets in edges.items()}


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for name in modules():
        try:
            layer(name)
        except KeyError as error:
            unplaced.append(str(error))
    assert not unplaced, unplaced


def test_the_generator_finds_every_engine_and_names_none() -> None:
    """A new engine costs nothing outside its package for the generated files and the layers:
    ``tools/generate.py`` and ``LAYERS`` find the engines by their ``_adapter_types.py`` (the
    three there are: the check can fail), and the generator's code names no engine."""
    assert ENGINES == ("autograd", "jax", "torch")
    words = {word.lower() for word in _code_words(ROOT / "tools" / "generate.py")}
    assert not words & set(ENGINES), sorted(words & set(ENGINES))


def test_no_import_circle() -> None:
    assert circles(_without_allowed(graph())) == []


def test_no_upward_import() -> None:
    assert upward(_without_allowed(graph())) == []


def test_no_family_imports_another() -> None:
    assert across_families(graph()) == []


def test_public_face_only_re_exports() -> None:
    assert face_definitions() == []


def test_allowed_edges_still_exist() -> None:
    """An allow-list entry whose edge is gone must go too."""
    edges = graph()
    stale = [edge for edge in ALLOWED if edge[1] not in edges.get(edge[0], set())]
    assert stale == []


def test_private_engine_names_only_in_private_modules() -> None:
    """Numba's, JAX's, torch's and CPython's private names appear only in the ``_private``
    modules, so an engine that moves one breaks one module (and tests/test_private.py)."""
    used = [
        use
        for name, path in modules().items()
        if not name.split(".")[-1].startswith("_private")
        for use in private_uses(name, path)
    ]
    assert used == []


def test_the_private_name_checker_sees_them(tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    path.write_text(
        '''"""Docstrings may say torch._C."""\nimport os\nfrom jax._src.core import Primitive\n'''
        '''data = getattr(os.environ, "_data", None)\nx = torch._C.f  # a comment on _dynfunc\n'''
    )
    assert [use.split(": ")[1] for use in private_uses("module", path)] == ["_src", "_data", "_C"]


def test_the_checker_sees_what_it_must(tmp_path: Path) -> None:
    """A circle through a function-level import, an upward import and a family importing
    another are all found (so the tests above can fail)."""
    package = tmp_path / "stablerules"
    (package / "rules").mkdir(parents=True)
    (package / "__init__.py").write_text("from ._guards import no_compile as no_compile\n")
    (package / "_guards.py").write_text("def f():\n    from ._launch import cpu_launch\n")
    (package / "_launch.py").write_text("from . import _guards\n")
    (package / "rules" / "__init__.py").write_text("")
    (package / "rules" / "flip.py").write_text("from .repeat import X\n")
    (package / "rules" / "repeat.py").write_text("X = 1\n")
    edges = graph(tmp_path)
    assert circles(edges) == [["stablerules._guards", "stablerules._launch"]]
    assert upward(edges) == [("stablerules._guards", "stablerules._launch")]
    assert across_families(edges) == [("stablerules.rules.flip", "stablerules.rules.repeat")]
    assert face_definitions(tmp_path) == []
    (package / "__init__.py").write_text("def helper():\n    return 1\n")
    assert face_definitions(tmp_path) == ["helper"]


def figures(root: Path) -> str:
    edges = graph(root)
    lines = [f"{root}: {len(edges)} modules, {sum(map(len, edges.values()))} import edges"]
    found = circles(edges)
    lines.append(f"import circles: {len(found)}")
    lines += [f"  {' <-> '.join(component)}" for component in found]
    try:
        ups = upward(edges)
    except KeyError as error:
        lines.append(f"upward imports: unknown ({error})")
    else:
        lines.append(f"upward imports: {len(ups)}")
        lines += [f"  {source} ({LAYER_NAMES[layer(source)]}) -> {target} ({LAYER_NAMES[layer(target)]})" for source, target in ups]
    lines.append(f"family-to-family imports: {len(across_families(edges))}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(figures(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT))


def test_each_family_declares_its_ops_engine_facts() -> None:
    """Issue 34 step 5: an op's engine facts (its torch implementation choice and forms, its
    shard rule) stand beside its rules, in its family's ``ENGINE_FACTS``, for exactly the
    family's ops; the adapters read them (``torch._native.FACTS``, ``torch._sharding``)."""
    import importlib

    from stablerules._facts import EngineFacts
    from stablerules._schema import OPS

    families: dict[str, set[str]] = {}
    for op in OPS:
        families.setdefault(op.family, set()).add(op.name)
    for family, names in families.items():
        facts = importlib.import_module(f"stablerules.rules.{family}").ENGINE_FACTS
        assert set(facts) == names, (family, sorted(facts), sorted(names))
        assert all(isinstance(value, EngineFacts) for value in facts.values())
        for name, value in facts.items():
            assert value.torch.pullback == "kernel" or not value.torch.torch_forms, name  # forms only for kernel ops


def _code_words(path: Path, attributes: bool = True) -> set[str]:
    """The names and string constants of a module's code (docstrings left out); attribute
    names too unless ``attributes`` is false (an engine's own ``torch.cat`` is not our op)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = docstring_ids(tree)
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.add(node.value)
        elif isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute) and attributes:
            words.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            words.add(node.name)
    return {part for word in words for part in (word, word.strip("_").upper(), word.strip("_").lower())}


def test_the_torch_op_table_names_no_op() -> None:
    """Issue 34 step 5: ``torch/_ops.py`` builds every op's entry from its schema row and its
    family's facts (the batching rule among them): no op's name (nor an ``_batch_<op>``
    rule or a ``KRON = ...`` constant) appears in its code, so a new op adds nothing there.
    The engine's array operations that batching rules use (``ArrayOps``: ``reshape``, ...)
    are not op names here. The check can fail: the table as it was (a line and a rule per
    op) names every op."""
    from stablerules._facts import ArrayOps
    from stablerules._schema import OPS

    array_ops = {name for name in vars(ArrayOps) if not name.startswith("_")}  # the engine's reshape, ...
    words = {word for word in _code_words(ROOT / "stablerules" / "torch" / "_ops.py") if word.lower() not in array_ops}
    named = sorted(
        op.name for op in OPS if any(op.name in (word.lower(), word.lower().removeprefix("batch_")) for word in words)
    )
    assert not named, f"torch/_ops.py names these ops in its code: {named}"
    batch_rules = [word for word in words if word.lower().startswith("batch_")]
    assert not batch_rules, batch_rules


@pytest.mark.parametrize("module", ["torch/_native.py", "jax/_generic.py"])
def test_the_engines_forwards_name_no_op(module: str) -> None:
    """Issue 34 step 5: each op's forward is written once, in its family, against the
    engine's array functions (``_facts.Namespace``); ``torch/_native.py`` lends torch's ops
    under those functions' names and ``jax/_generic.py`` JAX's, and neither names an op (no
    per-op forward, no per-op fast path, no table keyed by op names), so a new op composed
    of them adds nothing to either engine. An engine's own functions (``torch.cat``) are not
    our ops. The check can fail: ``torch/_native.py`` as it was (``_take_along_axis``,
    ``"transpose": _permute_dims``, ``_prepare_kron``) names every op."""
    from stablerules._facts import Namespace
    from stablerules._schema import OPS

    functions = {name for name in vars(Namespace) if not name.startswith("_")}  # repeat, flip, ...
    words = {
        word.lower()
        for word in _code_words(ROOT / "stablerules" / module, attributes=False)
        if word.lower() not in functions
    }
    named = sorted(op.name for op in OPS if any(op.name in (word, word.removeprefix("prepare_")) for word in words))
    assert not named, f"{module} names these ops in its code: {named}"
    assert {op.name for op in OPS} - functions, "the check would see no op: every op is a Namespace function"


def test_the_behaviour_probe_runs_good_and_bad_calls(capsys: pytest.CaptureFixture[str]) -> None:
    """``tools/behaviour.py`` (the before/after diff of a refactor's external behaviour) makes
    good and bad calls of every op and prints each outcome; a few of them here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("behaviour", ROOT / "tools" / "behaviour.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--calls", "3", "--engines", "numpy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ops = {line.split("(", 1)[0] for line in lines}
    assert ops == set(module.PARAMS) | {"cat", "getindex"}, ops
    assert any(" numpy: ok " in line for line in lines) and any(" rrule: ok " in line for line in lines)
    assert any(" numpy: TypeError: " in line for line in lines) and any(" numpy: ValueError: " in line for line in lines)
