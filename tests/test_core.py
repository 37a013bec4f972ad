"""Val, tangent types, projection, materialize, cotangent preparation and the rule registry."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import stablerules as sr
from stablerules._tangents import DenseCotangent, prepare_cotangent, project

# Rule calls on user functions of untyped-dtype arrays go through these untyped names, so that
# mypy does not try each of the rules' thousands of overloads on every such call (the result
# would be Any all the same).
_rrule: Callable[..., Any] = sr.rrule
_frule: Callable[..., Any] = sr.frule


# --- Val ---------------------------------------------------------------------------------


def test_val_semantics() -> None:
    assert sr.Val(3) == sr.Val(3)
    assert sr.Val(3) != sr.Val((3,))
    assert sr.Val((1, 2)) == sr.Val((1, 2))
    assert sr.Val(3) != 3
    assert hash(sr.Val(3)) == hash(sr.Val(3))
    assert len({sr.Val(3), sr.Val(3), sr.Val((3,))}) == 2
    assert sr.Val((7, 1, 10)).value == (7, 1, 10)
    from_numpy: object = sr.Val(np.int64(4)).value  # type: ignore[type-var]
    assert from_numpy == 4 and type(from_numpy) is int
    assert repr(sr.Val(2)) == "Val(2)"
    assert pickle.loads(pickle.dumps(sr.Val((1, 2)))) == sr.Val((1, 2))


def test_val_is_frozen() -> None:
    value = sr.Val(1)
    with pytest.raises(AttributeError):
        value._value = 2
    with pytest.raises(AttributeError):
        del value._value


def test_val_holds_a_bool_distinct_from_its_int() -> None:
    assert sr.Val(True).value is True and sr.Val(False).value is False
    assert sr.Val(True) == sr.Val(True) and sr.Val(True) != sr.Val(False)
    assert sr.Val(True) != sr.Val(1) and sr.Val(False) != sr.Val(0)
    assert len({sr.Val(True), sr.Val(1), sr.Val(False), sr.Val(0)}) == 4
    from_numpy: object = sr.Val(np.bool_(True)).value  # type: ignore[type-var]
    assert from_numpy is True
    assert repr(sr.Val(False)) == "Val(False)"
    assert pickle.loads(pickle.dumps(sr.Val(True))) == sr.Val(True)


def test_a_bool_val_is_not_a_count() -> None:
    from stablerules._arrays import static_bool, static_int, static_ints

    with pytest.raises(TypeError, match="'axis' must be Val\\(int\\)"):
        static_int(sr.Val(True), "axis")
    with pytest.raises(TypeError, match="'reps' must be Val\\(int\\) or Val\\(tuple"):
        static_ints(sr.Val(False), "reps")
    with pytest.raises(TypeError, match="'keepdims' must be Val\\(True\\) or Val\\(False\\)"):
        static_bool(sr.Val(1), "keepdims")
    with pytest.raises(TypeError, match="repeats must be Val\\(int\\)"):
        sr.repeat(np.ones(3), sr.Val(True))
    assert static_bool(sr.Val(True), "keepdims") is True


@pytest.mark.parametrize("bad", [1.5, "3", None, (1, 2.0), (1, True), [1, 2], (True,)])
def test_val_rejects_non_integers(bad: object) -> None:
    with pytest.raises(TypeError, match="Val takes an int, a bool or a tuple of ints"):
        sr.Val(bad)  # type: ignore[type-var]


# --- tangent types -----------------------------------------------------------------------


def test_singleton_tangents() -> None:
    assert sr.NoTangent() == sr.NoTangent() and sr.ZeroTangent() == sr.ZeroTangent()
    assert sr.NoTangent() != sr.ZeroTangent()
    assert repr(sr.ZeroTangent()) == "ZeroTangent()"


def test_fill() -> None:
    fill = sr.Fill(2.5, (2, 3), np.float32)
    assert fill.shape == (2, 3) and fill.dtype == np.float32 and fill.size == 6 and fill.ndim == 2
    dense = np.asarray(fill)
    assert dense.dtype == np.float32 and dense.shape == (2, 3) and np.all(dense == 2.5)
    assert sr.Fill(1.0, 3) == sr.Fill(1.0, (3,))
    complex_fill = np.asarray(sr.Fill(1 + 2j, (2,), np.complex128))
    np.testing.assert_array_equal(complex_fill, [1 + 2j, 1 + 2j])
    integer = sr.Fill(7, (2,), np.int64)  # a value (a ufunc's result), not a tangent
    assert integer.value == 7 and np.asarray(integer).dtype == np.int64
    with pytest.raises(TypeError, match="bool, integer, floating or complex"):
        sr.Fill(1, (2,), np.dtype("U3"))
    with pytest.raises(ValueError, match="non-negative"):
        sr.Fill(1.0, (-1,))


def test_thunk_runs_once() -> None:
    calls = []

    def make() -> np.ndarray:
        calls.append(1)
        return np.ones(3)

    thunk = sr.Thunk(make)
    assert sr.unthunk(thunk) is sr.unthunk(thunk)
    assert len(calls) == 1
    assert sr.unthunk(5) == 5
    nested = sr.Thunk(lambda: sr.Thunk(lambda: 7))
    assert sr.unthunk(nested) == 7


def test_materialize() -> None:
    like = np.zeros((2, 2), dtype=np.float32)
    for tangent, expected in [
        (sr.ZeroTangent(), np.zeros((2, 2))),
        (sr.NoTangent(), np.zeros((2, 2))),
        (sr.Fill(3.0, (2, 2)), np.full((2, 2), 3.0)),
        (sr.Thunk(lambda: sr.Fill(1.0, (2, 2))), np.ones((2, 2))),
        (np.full((2, 2), 1 + 5j), np.ones((2, 2))),
    ]:
        dense = sr.materialize(tangent, like)
        assert dense.dtype == np.float32 and dense.shape == (2, 2)
        np.testing.assert_array_equal(dense, expected)
    with pytest.raises(ValueError, match=r"\(3,\)"):
        sr.materialize(sr.Fill(1.0, (3,)), like)


def test_project() -> None:
    z = np.array([1 + 2j, 3 - 1j])
    real = project(z, np.dtype(np.float32))
    assert real.dtype == np.float32
    np.testing.assert_array_equal(real, [1, 3])
    same = np.ones(3)
    assert project(same, np.dtype(np.float64)) is same


def test_prepare_cotangent() -> None:
    shape, dtype = (2, 3), np.dtype(np.float32)
    dense = prepare_cotangent(np.ones((2, 3), dtype=np.float64), shape, dtype)
    assert isinstance(dense, DenseCotangent) and dense.array.dtype == np.float32
    fortran = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    normalized = prepare_cotangent(fortran, shape, np.dtype(np.float64))
    assert isinstance(normalized, DenseCotangent) and normalized.array.flags.c_contiguous
    np.testing.assert_array_equal(normalized.array, fortran)
    integer = prepare_cotangent(np.ones((2, 3), dtype=np.int64), shape, dtype)
    assert isinstance(integer, DenseCotangent) and integer.array.dtype == np.float32
    assert prepare_cotangent(sr.ZeroTangent(), shape, dtype) == sr.ZeroTangent()
    fill = prepare_cotangent(sr.Thunk(lambda: sr.Fill(2 + 1j, shape, np.complex128)), shape, dtype)
    assert fill == sr.Fill(2.0, shape, np.float32)
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        prepare_cotangent(np.ones((3, 2)), shape, dtype)
    with pytest.raises(ValueError, match=r"\(4,\)"):
        prepare_cotangent(sr.Fill(1.0, (4,)), shape, dtype)
    with pytest.raises(TypeError, match="object"):
        prepare_cotangent(np.empty((2, 3), dtype=object), shape, dtype)
    with pytest.raises(TypeError, match="NoTangent"):
        prepare_cotangent(sr.NoTangent(), shape, dtype)


# --- registry ----------------------------------------------------------------------------


def test_register_user_rules_and_refuse_duplicates() -> None:
    def triple(x: np.ndarray) -> np.ndarray:
        return 3 * x

    def triple_rrule(x: np.ndarray) -> tuple[np.ndarray, Callable[[object], tuple[object, ...]]]:
        def triple_pullback(dy: object) -> tuple[object, ...]:
            return (3 * np.asarray(dy),)

        return triple(x), triple_pullback

    def triple_frule(tangents: tuple[object, ...], x: np.ndarray) -> tuple[np.ndarray, object]:
        return triple(x), 3 * np.asarray(tangents[0])

    sr.register_rrule(triple, triple_rrule)
    sr.register_frule(triple, triple_frule)
    y, back = _rrule(triple, np.ones(2))
    np.testing.assert_array_equal(y, [3, 3])
    np.testing.assert_array_equal(back(np.ones(2))[0], [3, 3])
    _, dy = _frule(triple, (np.ones(2),), np.ones(2))
    np.testing.assert_array_equal(dy, [3, 3])
    with pytest.raises(ValueError, match="already has an rrule"):
        sr.register_rrule(triple, triple_rrule)
    sr.register_rrule(triple, triple_rrule, replace=True)


def test_unregistered_function() -> None:
    def nothing(x: np.ndarray) -> np.ndarray:
        return x

    with pytest.raises(TypeError, match="no rrule is registered"):
        _rrule(nothing, np.ones(1))
    with pytest.raises(TypeError, match="no frule is registered"):
        _frule(nothing, (np.ones(1),), np.ones(1))


def test_library_ops_cannot_be_registered_twice() -> None:
    with pytest.raises(ValueError, match="replace=True"):
        sr.register_rrule(sr.concatenate, lambda arrays: (arrays, arrays))


# --- register_rrule's builder keyword -------------------------------------------------------


def _halve(x: object) -> object:
    return np.asarray(x) / 2


def _halve_rrule(x: object) -> tuple[object, Callable[[object], tuple[object, ...]]]:
    def halve_pullback(dy: object) -> tuple[object, ...]:
        return (np.asarray(dy) / 2,)

    return np.asarray(x) / 2, halve_pullback


def _halve_builder(x: object) -> Callable[[object], tuple[object, ...]]:
    def halve_pullback(dy: object) -> tuple[object, ...]:
        return (np.asarray(dy) / 2 + 100.0,)  # tells the builder's pullback from the rrule's

    return halve_pullback


def test_register_rrule_takes_its_builder_as_pullback_builder() -> None:
    from stablerules._registry import PULLBACK_BUILDERS, RRULES

    try:
        sr.register_rrule(_halve, _halve_rrule, pullback_builder=_halve_builder)
        assert _halve in PULLBACK_BUILDERS
        (dx,) = sr.pullback(_halve, sr.ArraySpec((2,), np.float64))(np.ones(2))
        np.testing.assert_array_equal(np.asarray(dx), np.full(2, 100.5))
        with pytest.raises(TypeError, match="register_rrule: pullback_builder must be callable"):
            sr.register_rrule(_halve, _halve_rrule, pullback_builder=3, replace=True)  # type: ignore[arg-type]
    finally:
        RRULES.unregister(_halve)
        PULLBACK_BUILDERS.unregister(_halve)


def test_register_rrule_pullback_keyword_is_deprecated_but_works() -> None:
    from stablerules._registry import PULLBACK_BUILDERS, RRULES

    try:
        with pytest.warns(DeprecationWarning, match="pullback= is deprecated; pass the builder as pullback_builder="):
            sr.register_rrule(_halve, _halve_rrule, pullback=_halve_builder)
        (dx,) = sr.pullback(_halve, np.ones(2))(np.ones(2))
        np.testing.assert_array_equal(np.asarray(dx), np.full(2, 100.5))
        with pytest.raises(TypeError, match="give pullback_builder only"):
            sr.register_rrule(_halve, _halve_rrule, pullback=_halve_builder, pullback_builder=_halve_builder, replace=True)
    finally:
        RRULES.unregister(_halve)
        PULLBACK_BUILDERS.unregister(_halve)


# --- the input layer --------------------------------------------------------------------------


def test_input_facts_reads_every_kind_of_array_argument() -> None:
    from stablerules._arrays import input_facts

    big_endian = input_facts(np.arange(6.0).astype(">f8").reshape(2, 3), "x", "op")
    assert (big_endian.shape, big_endian.dtype, big_endian.native) == ((2, 3), np.dtype(">f8"), np.dtype(np.float64))
    assert big_endian.tangent_dtype == np.dtype(np.float64) and big_endian.device == "cpu" and big_endian.target == "cpu"
    spec = input_facts(sr.ArraySpec((4,), np.int32), "x", "op")
    assert spec.array is None and spec.shape == (4,) and spec.tangent_dtype is None and spec.device == "cpu"
    listed = input_facts([1.0, 2.0], "x", "op")  # NumPy's reading: float64, no device of its own
    assert listed.shape == (2,) and listed.native == np.dtype(np.float64) and listed.device is None
    weak = input_facts(3, "arrays[1]", "cat", weak_scalars=True)
    assert weak.scalar and weak.value == 3 and weak.native == np.dtype(np.int64) and weak.shape == ()
    assert input_facts(2.5, "x", "op").array is not None  # not weak: a 0-d array
    with pytest.raises(TypeError, match=r"^op: argument 'x' has dtype object"):
        input_facts(np.array([None]), "x", "op")
    with pytest.raises(TypeError, match=r"^op: x must be an array \(an ArraySpec only describes one"):
        spec.need_array("op")


def test_joint_device_names_the_arguments_on_each_device() -> None:
    from stablerules._arrays import InputFacts, joint_device, joint_namespace

    def facts(name: str, device: str | None) -> InputFacts:
        return InputFacts(name, None, (2,), np.dtype(np.float64), np, device)

    assert joint_device([facts("a", None), facts("b", "cuda")]) == "cuda"  # a scalar lives anywhere
    assert joint_device([facts("a", None)]) == "cpu" and joint_namespace([facts("a", None)]) is np
    with pytest.raises(TypeError, match=r"arrays on mixed devices: a on cpu, b on cuda; move them to one device first"):
        joint_device([facts("a", "cpu"), facts("b", "cuda")])


# --- configuration: every environment switch, parsed in one place -------------------------

_BAD_VALUES = [
    ("STABLERULES_NUM_THREADS", "abc", "from stablerules import _parallel; _parallel.thread_count()", "an integer number of threads"),
    ("STABLERULES_PARALLEL_THRESHOLD", "1e6", "import stablerules._parallel", "an integer number of elements"),
    ("STABLERULES_POOL", "maybe", "import stablerules._pool", "0, false, no, off"),
    ("STABLERULES_DISK_CACHE", "nope", "from stablerules._cache import CACHE; CACHE.store", "0, false, no, off"),
    ("STABLERULES_DIRECT_LOAD", "2", "from stablerules import _objectcode; _objectcode.enabled()", "0, false, no, off"),
    ("STABLERULES_DEVICE", "gpu", "from stablerules._arrays import kernel_target; kernel_target('cpu')", "cpu .* or cuda"),
]


@pytest.mark.parametrize(("variable", "value", "code", "accepted"), _BAD_VALUES, ids=[row[0] for row in _BAD_VALUES])
def test_a_bad_environment_value_names_the_variable(variable: str, value: str, code: str, accepted: str) -> None:
    import os
    import re
    import subprocess
    import sys

    environment = {**os.environ, variable: value}
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0, result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ValueError: {variable}={value!r}: expected "), result.stderr
    assert re.search(accepted, last), last


def test_environment_switches_read_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules import _config, _parallel

    for value, expected in [("", True), ("1", True), (" On ", True), ("YES", True), ("0", False), ("off", False), ("False", False)]:
        monkeypatch.setenv("STABLERULES_POOL", value)
        assert _config.pool() is expected, value
    monkeypatch.delenv("STABLERULES_POOL")
    assert _config.pool() is True
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "3")
    assert _parallel.thread_count() == 3
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "0")
    assert _parallel.thread_count() == 1  # below 1 reads as 1, as before
    monkeypatch.setenv("STABLERULES_NUM_THREADS", "")
    assert _config.num_threads() is None
    monkeypatch.setenv("STABLERULES_PARALLEL_THRESHOLD", "1000")
    assert _config.parallel_threshold() == 1000
    monkeypatch.delenv("STABLERULES_PARALLEL_THRESHOLD")
    assert _config.parallel_threshold() == 3 << 18
    assert [_config.device_target(raw) for raw in ("cuda", b" CUDA", "cpu", "")] == ["cuda", "cuda", "cpu", "cpu"]
    monkeypatch.setenv("STABLERULES_CACHE_DIR", "~/somewhere")
    assert str(_config.cache_dir()).endswith("somewhere") and "~" not in str(_config.cache_dir())


def test_config_documents_every_variable_it_reads() -> None:
    """The table in ``_config``'s docstring lists every ``STABLERULES_*`` variable, and no other
    module reads the environment for one."""
    import pathlib
    import re

    from stablerules import _config

    names = {value for key, value in vars(_config).items() if key.isupper() and isinstance(value, str) and value.startswith("STABLERULES_")}
    assert len(names) == 7
    doc = _config.__doc__ or ""
    assert all(f"``{name}``" in doc for name in names)
    package = pathlib.Path(_config.__file__).parent
    readers = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "_config.py" and re.search(r"environ(\.get)?\(\s*\"STABLERULES_|getenv\(\s*\"STABLERULES_", path.read_text())
    ]
    assert readers == []



def test_import_stablerules_leaves_the_heavy_standard_modules_for_later() -> None:
    """``import stablerules`` (numpy included) imports neither pathlib (urllib.parse and
    ipaddress come with it: ~4 ms) nor hashlib (OpenSSL: ~3 ms), nor Numba or llvmlite: each
    is imported by the first call that needs it."""
    import subprocess
    import sys

    heavy = "{'pathlib', 'urllib.parse', 'ipaddress', 'hashlib', '_hashlib', 'numba', 'llvmlite'}"
    code = f"import sys, stablerules; print(sorted({heavy} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_schema_checks_each_rank_rule_and_unites_the_parameters_when_it_loads() -> None:
    """``_schema._checked`` (run on every row at import): a rank rule reading the wrong number
    of parameters is a ``ValueError``; ``params`` is the union of the signatures' parameters,
    the data one where a name is data in one signature and static in another."""
    from stablerules import _schema

    repeat = _schema.BY_NAME["repeat"]
    assert [(p.name, p.role) for p in repeat.params] == [
        ("x", "array"), ("repeats", "data"), ("axis", "static"), ("inner", "static"), ("outer", "static"),
    ]
    bad = _schema.Signature((_schema.Param("x", "array"),), _schema.Rank("axis_or_flat", ()))
    with pytest.raises(ValueError, match="'axis_or_flat' reads 1 to 1 parameters"):
        _schema._checked(repeat._replace(signatures=(bad,)))

# --- code generation helpers shared by the families ---------------------------------------


def test_the_nest_limit_is_pythons() -> None:
    from stablerules._codegen import MAX_NESTED_BLOCKS, nest_limit

    def nested(depth: int) -> str:
        return "".join("    " * level + f"for i{level} in range(1):\n" for level in range(depth)) + "    " * depth + "pass\n"

    compile(nested(MAX_NESTED_BLOCKS), "<nest>", "exec")
    with pytest.raises(SyntaxError, match="too many statically nested blocks"):
        compile(nested(MAX_NESTED_BLOCKS + 1), "<nest>", "exec")
    assert (nest_limit(), nest_limit(reserved=2), nest_limit(reserved=4), nest_limit(per_level=2, reserved=2)) == (20, 18, 16, 9)

    from stablerules.rules import broadcast, flip, kron, repeat

    # The families' limits (quoted in their error messages) are unchanged.
    assert (repeat._MAX_NEST_LEVELS, flip._MAX_NEST_LEVELS, broadcast._MAX_GROUPS, kron._MAX_AXES) == (20, 18, 16, 9)


def test_loop_text_helpers() -> None:
    from stablerules._codegen import SourceWriter, emit_copy, plus, tuple_text

    assert tuple_text(["a"]) == "(a,)" and tuple_text(["a", "b"]) == "(a, b)"
    assert plus("0", "k") == "k" and plus("i", "0") == "i" and plus("i", "k") == "i + k" and plus("0", "0") == "0"
    writer = SourceWriter()
    with writer.block("def copy(dst, src, start, at, count):"):
        emit_copy(writer, "at", "start", "count", dst="dst", src="src")
    namespace: dict[str, Any] = {"np": np}
    exec(writer.text(), namespace)
    source, target = np.arange(10.0), np.zeros(10)
    namespace["copy"](target, source, 2, 5, 4)
    np.testing.assert_array_equal(target, [0, 0, 0, 0, 0, 2, 3, 4, 5, 0])


def test_as_units_moves_the_bits() -> None:
    from stablerules._units import UNITS, WIDENED, as_units

    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # strided: copied once, C order
    bits = as_units(x, UNITS[4])
    assert bits.dtype == np.uint32 and bits.shape == (6,)
    np.testing.assert_array_equal(bits.view(np.float32), np.ascontiguousarray(x).ravel())
    assert WIDENED["float32"] == np.float64 and WIDENED["complex64"] == np.complex128
