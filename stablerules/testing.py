"""Checks for differentiation rules: ``test_rrule`` and ``test_frule``.

``test_rrule(op, *args, **kwargs)`` and ``test_frule(op, *args, **kwargs)`` work the same way
for the library's ops and for rules registered with ``sr.register_rrule`` /
``sr.register_frule``. They raise ``AssertionError`` naming the check, the argument, the shapes
and dtypes and the size of the error; they return ``None`` when every check holds.

Decisions:

* **Argument structure.** A positional argument is one of: a *differentiable leaf* (an array of
  a floating or complex dtype, a NumPy floating scalar, or a Python ``float``/``complex``, which
  is treated as a 0-d value), a *sequence* (a tuple or list holding at least one array or
  floating scalar; its tangent is a tuple, one entry per item), or *non-differentiable*
  (``Val``, ``int``, ``bool``, integer and bool arrays, a tuple of plain ints, ``None``, any
  other object): its tangent must be ``NoTangent()``. A sequence holding no differentiable leaf
  (a tuple of integer arrays) may get ``NoTangent()`` or a tuple of ``NoTangent()``.
* **Accepted tangents.** A differentiable leaf's tangent may be a dense array, a ``Fill``, a
  ``ZeroTangent()`` or a ``Thunk`` of one (a sequence's may also be ``ZeroTangent()`` as a
  whole); arrays and ``Fill`` must have the primal's shape, dtype and device exactly (a float64
  tangent for a float32 primal fails). Types are exact: a list where a tuple belongs, or a
  ``ZeroTangent()`` where ``NoTangent()`` belongs, fails. A Python ``float`` primal has no
  fixed precision (NEP 50 weak scalars), so its tangent may be a 0-d real value of any
  floating precision; a Python ``complex`` needs a complex one.
* **Primal.** The rule's primal must equal ``op(*args, **kwargs)`` exactly: same type, shape,
  dtype and values (NaN equal to NaN): an ``rrule``'s primal is the op's own result.
* **Finite differences** are central differences of ``op`` evaluated with every differentiable
  input promoted to float64/complex128 (so a float32 rule is checked against 64-bit
  derivatives). If ``op`` raises on promoted inputs, or still returns 32-bit outputs, the
  differences are taken in the primal precision instead, with a larger step, and the default
  ``rtol`` is raised to at least ``1e-3`` (an explicit ``rtol`` is used as given).
  The reverse check is the adjoint identity ``Re<dx, v> == Re<dy, J v>`` (``<a, b>`` is
  ``vdot(a, b)``, so one identity covers real and complex arrays).
  ``v`` runs over every real basis direction (and ``i`` times it for complex arguments), which
  compares ``dx`` element by element with a finite-difference gradient (the step is relative
  to each element); an argument with more than 1024 real directions is checked on a random
  sample of its elements plus two random full directions.
* **Tolerances.** An element passes when ``|actual - expected| <= atol + rtol * |expected|``.
  Default ``rtol``: ``1e-2`` when any differentiable input or output is ``bfloat16``, else
  ``1e-3`` when one is ``float16`` (about two units in their last place: the ops accumulate in
  float32 and round once, SPEC 15), ``1e-4`` when one is 32-bit, else ``1e-6``. The finite
  differences of 16-bit arguments are taken in float64 like any other's.
  Default ``atol``: ``rtol`` times the largest magnitude in the two tangents compared (so
  entries that cancel to near zero are judged on the tangent's scale) plus an estimate of
  finite-difference round-off. An explicit ``atol`` is absolute.
* **Errors raised by the rule** (not by ``op``) become ``AssertionError`` naming the call
  (``pullback(Thunk) raised TypeError: ...``).
* **Lazy cotangents.** ``back`` is also called with a ``Fill`` (built only for floating
  outputs), ``ZeroTangent()`` and a ``Thunk``; their tangents must match the dense equivalents'
  (``ZeroTangent()`` must give ``ZeroTangent()`` or exact zeros).
* **Steady state.** With ``check_compile=True`` the rule is run again (``rrule`` and every
  pullback form, or ``frule``) inside ``sr.no_compile()``. ``sr.no_fallback()`` is added when
  the first call noted no dynamic argument (a plain ``int`` where a ``Val`` belongs counts one,
  see ``sr.cache_info().dynamic_arguments``): such calls are dynamic by design and would trip
  it. Either way, a second call that notes a fallback fails. The second results must equal the
  first.
* **Side effects.** The arguments, ``dy`` and the tangents given to ``frule`` must not be
  modified in place.
* **frule tangents** mirror the arguments: a random tangent of each differentiable leaf's dtype,
  a tuple for a sequence, ``NoTangent()`` for the rest. The rule is also called with one
  argument's tangent at a time (the other differentiable arguments ``ZeroTangent()``), with a
  ``Fill`` of a random constant for every array argument (checked against finite differences
  along that constant direction) and with every differentiable argument's tangent
  ``ZeroTangent()``. A rule written with plain arithmetic on its tangents handles all of these
  through the tangent algebra (``ZeroTangent``, ``Fill`` and ``Thunk`` take part in arithmetic).

Options are keyword-only: ``rtol``, ``atol``, ``check_compile``, ``rng`` (a seed or
``numpy.random.Generator``; default a fixed seed so failures reproduce) and ``fkwargs``. Every
other keyword argument is passed to ``op``; a keyword of ``op`` whose name is one of these
options goes in ``fkwargs={"rtol": ...}`` (as in ChainRulesTestUtils).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NoReturn, TypeVar

import numpy as np
import numpy.typing as npt

from ._arrays import array_namespace, is_array
from ._cache import CACHE
from ._guards import no_compile, no_fallback
from ._dispatch import frule, rrule
from ._errors import DynamicFallbackError, RecompileError
from ._tangents import Fill, NoTangent, Thunk, ZeroTangent, unthunk
from ._val import Val

__all__ = ["test_frule", "test_rrule"]

_T = TypeVar("_T")
_Path = tuple[int, ...]
_Values = npt.NDArray[np.complex128]
_LeafForm = Literal["array", "numpy", "python"]

_DEFAULT_SEED = 20240601
# Real directions per argument up to which the reverse check is element by element.
_DENSE_DIRECTIONS = 1024
_RTOL_32 = 1e-4
_RTOL_64 = 1e-6
_RTOL_FD_32 = 1e-3
# The 16-bit formats: about two units of their last place (a result rounded once from a
# float32 accumulation is within half of one).
_RTOL_16 = {"float16": 1e-3, "bfloat16": 1e-2}


# --------------------------------------------------------------------------------------------
# Argument structure


@dataclass(frozen=True)
class _Leaf:
    """One differentiable value inside the arguments (or the output), and where it sits."""

    path: _Path
    label: str
    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]
    form: _LeafForm

    @property
    def is_complex(self) -> bool:
        return self.dtype.kind == "c"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        if self.form == "python":
            return f"Python {'complex' if self.is_complex else 'float'}"
        return f"{self.dtype} {_shape_text(self.shape)}"


def _shape_text(shape: Sequence[int]) -> str:
    return str(tuple(int(extent) for extent in shape))


def _floating_dtype(value: object) -> np.dtype[np.generic] | None:
    """The dtype of a differentiable leaf, ``None`` for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if is_array(value) or isinstance(value, np.generic):
        dtype: np.dtype[np.generic] = value.dtype
        return dtype if dtype.kind in "fc" or dtype.name == "bfloat16" else None
    if isinstance(value, (float, complex)):
        return np.dtype(np.complex128 if isinstance(value, complex) else np.float64)
    return None


def _form(value: object) -> _LeafForm:
    if is_array(value):
        return "array"
    return "numpy" if isinstance(value, np.generic) else "python"


def _holds_data(value: object) -> bool:
    if is_array(value) or _floating_dtype(value) is not None:
        return True
    return isinstance(value, (tuple, list)) and any(_holds_data(item) for item in value)


def _is_sequence(value: object) -> bool:
    """A tuple or list of arrays (its tangent is a tuple); a tuple of ints is static."""
    return isinstance(value, (tuple, list)) and any(_holds_data(item) for item in value)


def _has_leaf(value: object) -> bool:
    if _floating_dtype(value) is not None:
        return True
    return _is_sequence(value) and any(_has_leaf(item) for item in value)  # type: ignore[attr-defined]


def _collect_leaves(value: object, path: _Path, label: str, out: list[_Leaf]) -> None:
    dtype = _floating_dtype(value)
    if dtype is not None:
        shape = tuple(int(extent) for extent in getattr(value, "shape", ()))
        out.append(_Leaf(path, label, shape, dtype, _form(value)))
    elif _is_sequence(value):
        assert isinstance(value, (tuple, list))
        for index, item in enumerate(value):
            _collect_leaves(item, (*path, index), f"{label}[{index}]", out)


def _argument_leaves(args: Sequence[object]) -> list[_Leaf]:
    leaves: list[_Leaf] = []
    for index, arg in enumerate(args):
        _collect_leaves(arg, (index,), f"argument {index}", leaves)
    return leaves


def _output_leaves(output: object) -> list[_Leaf]:
    leaves: list[_Leaf] = []
    _collect_leaves(output, (), "output", leaves)
    return leaves


def _get(root: object, path: _Path) -> object:
    for index in path:
        root = root[index]  # type: ignore[index]
    return root


def _replace(value: object, path: _Path, replacements: Mapping[_Path, object]) -> object:
    """``value`` with the leaves at ``replacements``' paths swapped, containers rebuilt."""
    if path in replacements:
        return replacements[path]
    if not _is_sequence(value):
        return value
    assert isinstance(value, (tuple, list))
    items = [_replace(item, (*path, index), replacements) for index, item in enumerate(value)]
    if isinstance(value, list):
        return items
    if hasattr(value, "_fields"):  # a NamedTuple
        named: Callable[..., object] = type(value)
        return named(*items)
    return tuple(items)


def _replace_arguments(args: Sequence[object], replacements: Mapping[_Path, object]) -> tuple[object, ...]:
    return tuple(_replace(arg, (index,), replacements) for index, arg in enumerate(args))


def _to_numpy(value: object) -> npt.NDArray[np.generic]:
    if type(value).__module__.startswith("cupy"):
        host: npt.NDArray[np.generic] = getattr(value, "get")()
        return host
    return np.asarray(value)


def _values(value: object) -> _Values:
    return np.array(_to_numpy(value), dtype=np.complex128)


def _make_leaf(template: object, values: _Values, dtype: np.dtype[np.generic]) -> object:
    """A value of ``template``'s form (array on its device, NumPy or Python scalar) holding
    ``values`` in ``dtype``."""
    data = values.real if dtype.kind != "c" else values
    form = _form(template)
    if form == "array":
        return array_namespace(template).asarray(data.astype(dtype))
    if form == "numpy":
        return dtype.type(data.reshape(())[()])
    if dtype.kind == "c":
        return complex(data.reshape(())[()])
    return float(data.reshape(())[()].real)


def _promote(dtype: np.dtype[np.generic]) -> np.dtype[np.generic]:
    return np.dtype(np.complex128 if dtype.kind == "c" else np.float64)


def _describe(value: object) -> str:
    if isinstance(value, (NoTangent, ZeroTangent, Val, Fill)):
        return repr(value)
    if isinstance(value, Thunk):
        return "Thunk"
    if is_array(value):
        return f"{type(value).__name__} {value.dtype} {_shape_text(value.shape)}"
    if isinstance(value, np.generic):
        return f"{type(value).__name__} scalar {value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of {len(value)}"
    if isinstance(value, (bool, int, float, complex)):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


def _expected_text(value: object) -> str:
    """What the tangent of a positional argument should look like, for messages."""
    dtype = _floating_dtype(value)
    if dtype is not None:
        if _form(value) == "python":
            return f"tangent of a Python {type(value).__name__}"
        return f"tangent of {dtype} {_shape_text(getattr(value, 'shape', ()))}"
    if _is_sequence(value):
        assert isinstance(value, (tuple, list))
        return "(" + ", ".join(_expected_text(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    return "NoTangent()"


def _fail(where: str, message: str) -> NoReturn:
    raise AssertionError(f"{where}: {message}")


def _op_name(op: object) -> str:
    for attribute in ("__name__", "name"):
        name = getattr(op, attribute, None)
        if isinstance(name, str):
            return name
    return repr(op)


# --------------------------------------------------------------------------------------------
# Primal and tangent validation


def _assert_same_primal(actual: object, expected: object, label: str, where: str) -> None:
    if is_array(expected):
        if not is_array(actual) or array_namespace(actual) is not array_namespace(expected):
            _fail(where, f"the rule's primal {label} is {_describe(actual)} but op returned {_describe(expected)}")
        if tuple(actual.shape) != tuple(expected.shape) or actual.dtype != expected.dtype:
            _fail(
                where,
                f"the rule's primal {label} is {_describe(actual)} but op returned {_describe(expected)} "
                f"(shape and dtype must match)",
            )
        got, want = _to_numpy(actual), _to_numpy(expected)
        if not np.array_equal(got, want, equal_nan=got.dtype.kind in "fc"):
            _fail(where, f"the rule's primal {label} differs from op's: {_difference_text(got, want)}")
        return
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or type(actual) is not type(expected) or len(actual) != len(expected):
            _fail(where, f"the rule's primal {label} is {_describe(actual)} but op returned {_describe(expected)}")
        for index, (got_item, want_item) in enumerate(zip(actual, expected)):
            _assert_same_primal(got_item, want_item, f"{label}[{index}]", where)
        return
    same = type(actual) is type(expected) and (
        actual == expected or (_floating_dtype(expected) is not None and bool(np.isnan(actual)) and bool(np.isnan(expected)))  # type: ignore[call-overload]
    )
    if not same:
        _fail(where, f"the rule's primal {label} is {actual!r} but op returned {expected!r}")


def _difference_text(got: npt.NDArray[np.generic], want: npt.NDArray[np.generic]) -> str:
    if got.dtype.kind in "biufc" and want.dtype.kind in "biufc":
        difference = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
        difference = np.where(np.isnan(difference), np.inf, difference)
        flat = int(np.argmax(difference))
        index = np.unravel_index(flat, got.shape) if got.ndim else ()
        return (
            f"max abs difference {float(difference.max()):.3g} at index {tuple(int(i) for i in index)} "
            f"(rule {got.reshape(-1)[flat]!r}, op {want.reshape(-1)[flat]!r}); "
            f"{int(np.count_nonzero(difference))} of {got.size} elements differ"
        )
    return "values differ"


def _check_leaf_tangent(actual: object, primal: object, dtype: np.dtype[np.generic], label: str, where: str) -> _Values:
    """The tangent of one differentiable leaf as complex values, after checking its type,
    shape, dtype and device."""
    form = _form(primal)
    shape = tuple(int(extent) for extent in getattr(primal, "shape", ()))
    primal_text = f"{dtype} {_shape_text(shape)}" if form != "python" else f"Python {type(primal).__name__}"
    if isinstance(actual, ZeroTangent):
        return np.zeros(shape, dtype=np.complex128)
    if isinstance(actual, NoTangent):
        _fail(where, f"{label} ({primal_text}) is differentiable but its tangent is NoTangent()")
    if isinstance(actual, Fill) or is_array(actual) or isinstance(actual, np.generic):
        # A Fill has an array's shape and dtype (and np.asarray): checked as one.
        tangent_shape = tuple(int(extent) for extent in actual.shape)
        tangent_dtype = actual.dtype
        if form == "array" and is_array(actual) and array_namespace(actual) is not array_namespace(primal):
            _fail(where, f"{label}'s tangent is {_describe(actual)} but the primal is {_describe(primal)}: another device")
    elif form != "array" and isinstance(actual, (float, complex)):
        # A Python scalar is float64/complex128: fine for a Python or a matching NumPy scalar.
        tangent_shape, tangent_dtype = (), np.dtype(np.complex128 if isinstance(actual, complex) else np.float64)
    else:
        _fail(
            where,
            f"{label} ({primal_text}) got a tangent of type {type(actual).__name__}; expected an array "
            f"of shape {_shape_text(shape)} and dtype {dtype}, a Fill, ZeroTangent() or a Thunk",
        )
    if tangent_shape != shape:
        _fail(
            where,
            f"{label}'s tangent has shape {_shape_text(tangent_shape)} but the primal has shape "
            f"{_shape_text(shape)} ({primal_text})",
        )
    if form == "python":
        wanted_kind = "c" if dtype.kind == "c" else "f"
        if tangent_dtype.kind != wanted_kind:
            _fail(
                where,
                f"{label}'s tangent has dtype {tangent_dtype} but the primal is a {primal_text}: "
                f"expected a {'complex' if wanted_kind == 'c' else 'real floating'} tangent",
            )
    elif tangent_dtype != dtype:
        _fail(
            where,
            f"{label}'s tangent has dtype {tangent_dtype} but the primal has dtype {dtype} "
            f"(shape {_shape_text(shape)}); a tangent has its primal's dtype",
        )
    return _values(actual)


def _collect_tangents(
    actual: object,
    primal: object,
    path: _Path,
    label: str,
    where: str,
    out: dict[_Path, _Values],
    *,
    zero_for_static: bool,
) -> None:
    """Check ``actual`` against ``primal``'s structure; store each leaf's tangent in ``out``.

    ``zero_for_static`` also accepts ``ZeroTangent()`` for a non-differentiable value (an
    integer output of an frule); arguments' tangents must be ``NoTangent()`` exactly.
    """
    actual = unthunk(actual)
    dtype = _floating_dtype(primal)
    if dtype is not None:
        out[path] = _check_leaf_tangent(actual, primal, dtype, label, where)
        return
    if _is_sequence(primal):
        assert isinstance(primal, (tuple, list))
        if isinstance(actual, ZeroTangent) and _has_leaf(primal):
            for leaf in _leaves_under(primal, path, label):
                out[leaf.path] = np.zeros(leaf.shape, dtype=np.complex128)
            return
        if isinstance(actual, NoTangent) and not _has_leaf(primal):
            return
        if not isinstance(actual, tuple):
            _fail(
                where,
                f"{label} is a sequence of {len(primal)}, so its tangent must be a tuple "
                f"{_expected_text(primal)}; got {_describe(actual)}",
            )
        if len(actual) != len(primal):
            _fail(
                where,
                f"{label} is a sequence of {len(primal)} but its tangent has {len(actual)} entries; "
                f"expected {_expected_text(primal)}",
            )
        for index, (tangent, item) in enumerate(zip(actual, primal)):
            _collect_tangents(tangent, item, (*path, index), f"{label}[{index}]", where, out, zero_for_static=zero_for_static)
        return
    if isinstance(actual, NoTangent) or (zero_for_static and isinstance(actual, ZeroTangent)):
        return
    _fail(where, f"{label} ({_describe(primal)}) is not differentiable, so its tangent must be NoTangent(); got {_describe(actual)}")


def _leaves_under(value: object, path: _Path, label: str) -> list[_Leaf]:
    leaves: list[_Leaf] = []
    _collect_leaves(value, path, label, leaves)
    return leaves


def _collect_pullback(result: object, args: Sequence[object], where: str) -> dict[_Path, _Values]:
    expected = "(" + ", ".join(_expected_text(arg) for arg in args) + ("," if len(args) == 1 else "") + ")"
    if not isinstance(result, tuple):
        _fail(
            where,
            f"the pullback returned {_describe(result)}; it must return a tuple with one entry per "
            f"positional argument: {expected}",
        )
    if len(result) != len(args):
        _fail(
            where,
            f"the pullback returned {len(result)} entries for {len(args)} positional arguments; "
            f"expected one per positional argument: {expected}",
        )
    out: dict[_Path, _Values] = {}
    for index, (tangent, arg) in enumerate(zip(result, args)):
        _collect_tangents(tangent, arg, (index,), f"argument {index}", where, out, zero_for_static=False)
    return out


def _collect_output_tangent(result: object, output: object, where: str) -> dict[_Path, _Values]:
    out: dict[_Path, _Values] = {}
    _collect_tangents(result, output, (), "output", where, out, zero_for_static=True)
    return out


# --------------------------------------------------------------------------------------------
# Comparisons


def _format(value: complex, is_complex: bool) -> str:
    return f"{value.real:.6g}{value.imag:+.6g}j" if is_complex else f"{value.real:.6g}"


@dataclass(frozen=True)
class _Tolerance:
    rtol: float
    atol: float | None  # None: rtol times the tangent's scale, plus round-off noise

    def absolute(self, scale: float, noise: float) -> float:
        return self.atol if self.atol is not None else self.rtol * scale + noise


def _compare(
    actual: _Values,
    expected: _Values,
    *,
    tolerance: _Tolerance,
    noise: float,
    what: str,
    leaf: _Leaf,
    flat_indices: npt.NDArray[np.intp] | None = None,
) -> None:
    """Element-wise ``|actual - expected| <= atol + rtol * |expected|``; an error names the
    worst element."""
    actual = actual.reshape(-1)
    expected = expected.reshape(-1)
    if actual.size == 0:
        return
    both_nan = np.isnan(actual) & np.isnan(expected)
    error = np.abs(actual - expected)
    error = np.where(both_nan, 0.0, np.where(np.isnan(error), np.inf, error))
    magnitude = np.abs(expected)
    finite_scale = [float(np.max(np.abs(part[np.isfinite(part)]), initial=0.0)) for part in (actual, expected)]
    atol = tolerance.absolute(max(finite_scale), noise)
    bad = error > atol + tolerance.rtol * magnitude
    if not bad.any():
        return
    worst = int(np.argmax(np.where(bad, error, -1.0)))
    flat = int(flat_indices[worst]) if flat_indices is not None else worst
    index = tuple(int(i) for i in np.unravel_index(flat, leaf.shape)) if leaf.shape else ()
    relative = error / np.maximum(magnitude, np.finfo(np.float64).tiny)
    raise AssertionError(
        f"{what}: {leaf.label} ({leaf.describe()}): {int(np.count_nonzero(bad))} of {actual.size} "
        f"checked elements differ; max abs error {float(error.max()):.3g}, max rel error "
        f"{float(relative.max()):.3g}; worst at index {index}: got "
        f"{_format(complex(actual[worst]), leaf.is_complex)}, expected "
        f"{_format(complex(expected[worst]), leaf.is_complex)} "
        f"(tolerance atol={atol:.3g} + rtol={tolerance.rtol:.3g} * |expected|)"
    )


def _assert_zero(values: Mapping[_Path, _Values], leaves: Sequence[_Leaf], what: str) -> None:
    for leaf in leaves:
        tangent = values[leaf.path]
        if tangent.size and np.any(tangent != 0):
            _fail(
                what,
                f"{leaf.label} ({leaf.describe()}) got a nonzero tangent (max |value| "
                f"{float(np.max(np.abs(tangent))):.3g}); expected ZeroTangent() or zeros",
            )


def _epsilon(dtype: np.dtype[np.generic]) -> float:
    # typed step by step: written as one expression, mypy spent seconds on NumPy's np.finfo
    # and np.dtype overloads here, in every type-check that imports this module
    if dtype.name == "bfloat16":  # ml_dtypes' (np.finfo does not know it): 8-bit significand
        return 2.0**-7
    char: str = dtype.char
    info: np.finfo[np.floating] = np.finfo(np.dtype(char))
    return float(info.eps)


def _default_rtol(leaves: Sequence[_Leaf]) -> float:
    half = [_RTOL_16[leaf.dtype.name] for leaf in leaves if leaf.dtype.name in _RTOL_16]
    if half:
        return max(half)
    low_precision = any(leaf.dtype.itemsize < (16 if leaf.is_complex else 8) for leaf in leaves)
    return _RTOL_32 if low_precision else _RTOL_64


# --------------------------------------------------------------------------------------------
# Finite differences


class _FiniteDifferences:
    """Central differences of ``op`` at the arguments, in 64-bit where ``op`` allows it."""

    def __init__(
        self,
        op: Callable[..., object],
        args: Sequence[object],
        kwargs: Mapping[str, object],
        leaves: Sequence[_Leaf],
        output: object,
        output_leaves: Sequence[_Leaf],
    ) -> None:
        self.op = op
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.leaves = list(leaves)
        self.output_leaves = list(output_leaves)
        self.base = {leaf.path: _values(_get(self.args, leaf.path)) for leaf in self.leaves}
        self.compute = {leaf.path: leaf.dtype for leaf in self.leaves}
        output_dtypes = [leaf.dtype for leaf in self.output_leaves]
        promoted = {leaf.path: _promote(leaf.dtype) for leaf in self.leaves}
        refused: str | None = None
        if promoted != self.compute:
            try:
                result = self._call(promoted, {})
            except Exception as error:  # op refuses promotion: stay in the primal precision
                refused = f"op raised {type(error).__name__} on float64/complex128 inputs: {error}"
            else:
                promoted_outputs = _output_leaves(result)
                if [leaf.path for leaf in promoted_outputs] == [leaf.path for leaf in self.output_leaves]:
                    self.compute = promoted
                    output_dtypes = [leaf.dtype for leaf in promoted_outputs]
                else:
                    refused = "op returned another output structure for float64/complex128 inputs"
        float64_epsilon = float(np.finfo(np.float64).eps)
        self.epsilon = max(
            [float64_epsilon] + [_epsilon(dtype) for dtype in (*self.compute.values(), *output_dtypes)]
        )
        self.low_precision = self.epsilon > float64_epsilon
        if not self.low_precision:
            self.note = "in 64-bit precision"
        elif refused is not None:
            self.note = f"in the primal precision, because {refused}"
        else:
            self.note = "in 32-bit precision, because op returns 32-bit outputs for 64-bit inputs"
        self._unshifted = {
            leaf.path: _make_leaf(_get(self.args, leaf.path), self.base[leaf.path], self.compute[leaf.path])
            for leaf in self.leaves
        }
        self.step: float = self.epsilon ** (1.0 / 3.0)
        self.x_scale = max(
            [1.0] + [float(np.max(np.abs(values), initial=0.0)) for values in self.base.values() if np.isfinite(values).all()]
        )
        y_scale = max(
            [1.0]
            + [float(np.max(np.abs(_values(_get(output, leaf.path))), initial=0.0)) for leaf in self.output_leaves]
        )
        # Round-off of one central difference: about eps * |f| / h, for the smallest h used.
        noise = 8.0 * self.epsilon * y_scale / self.step
        self.noise = noise if math.isfinite(noise) else 0.0

    def _call(self, dtypes: Mapping[_Path, np.dtype[np.generic]], shifts: Mapping[_Path, _Values]) -> object:
        replacements: dict[_Path, object] = {}
        for leaf in self.leaves:
            shift = shifts.get(leaf.path)
            template = _get(self.args, leaf.path)
            if shift is not None:
                replacements[leaf.path] = _make_leaf(template, self.base[leaf.path] + shift, dtypes[leaf.path])
            elif dtypes is self.compute:
                replacements[leaf.path] = self._unshifted[leaf.path]
            else:
                replacements[leaf.path] = _make_leaf(template, self.base[leaf.path], dtypes[leaf.path])
        return self.op(*_replace_arguments(self.args, replacements), **self.kwargs)

    def _outputs(self, result: object) -> dict[_Path, _Values]:
        leaves = _output_leaves(result)
        if [(leaf.path, leaf.shape) for leaf in leaves] != [(leaf.path, leaf.shape) for leaf in self.output_leaves]:
            raise AssertionError(
                f"finite differences: op returned {_describe(result)} at perturbed inputs, a different "
                f"structure or shape than at the primal point"
            )
        return {leaf.path: _values(_get(result, leaf.path)) for leaf in leaves}

    def step_for(self, direction: Mapping[_Path, _Values]) -> float:
        largest = max([1.0] + [float(np.max(np.abs(v), initial=0.0)) for v in direction.values()])
        return self.step * self.x_scale / largest

    def jvp(self, direction: Mapping[_Path, _Values], h: float | None = None) -> dict[_Path, _Values]:
        """``J v`` for a direction given per leaf path (leaves not named do not move), with step
        ``h`` (default: relative to the largest input and direction entries)."""
        if h is None:
            h = self.step_for(direction)
        plus = self._outputs(self._call(self.compute, {path: h * v for path, v in direction.items()}))
        minus = self._outputs(self._call(self.compute, {path: -h * v for path, v in direction.items()}))
        return {path: (plus[path] - minus[path]) / (2.0 * h) for path in plus}


def _central_jvp(
    op: Callable[..., object],
    args: Sequence[object],
    directions: Sequence[object],
    *,
    h: float | None = None,
    **kwargs: object,
) -> npt.NDArray[np.generic]:
    """``J v`` of ``op`` (one array or NumPy scalar output) at ``args`` by the checkers' own central
    differences: ``directions`` has one entry per argument (``None``: it does not move), ``h``
    is the step (default: relative to the largest input and direction entries). The result is
    an array of the output's dtype (the differences are taken in 64-bit where ``op`` allows it)."""
    output = op(*args, **kwargs)
    output_leaves = _output_leaves(output)
    if [leaf.path for leaf in output_leaves] != [()] or output_leaves[0].form == "python":
        raise TypeError(f"_central_jvp: op must return one floating array, got {_describe(output)}")
    differences = _FiniteDifferences(op, args, kwargs, _argument_leaves(args), output, output_leaves)
    moved: dict[_Path, _Values] = {(index,): _values(direction) for index, direction in enumerate(directions) if direction is not None}
    jv = differences.jvp(moved, h)[()]
    dtype = output_leaves[0].dtype
    return np.asarray(jv if dtype.kind == "c" else jv.real, dtype=dtype)


def _inner(dy: Mapping[_Path, _Values], jv: Mapping[_Path, _Values]) -> float:
    """``Re<dy, J v>`` summed over the output leaves."""
    return float(sum(np.vdot(dy[path], jv[path]).real for path in jv))


def _random_values(rng: np.random.Generator, leaf: _Leaf) -> _Values:
    """Random normal values, exactly representable in the leaf's dtype."""
    real = rng.standard_normal(leaf.shape)
    if not leaf.is_complex:
        return np.asarray(real.astype(leaf.dtype), dtype=np.complex128)
    values = real + 1j * rng.standard_normal(leaf.shape)
    return np.asarray(values.astype(leaf.dtype), dtype=np.complex128)


def _build_tangent(value: object, path: _Path, values: Mapping[_Path, _Values], *, static: object) -> object:
    """A tangent mirroring ``value``: leaves from ``values`` (``ZeroTangent()`` where missing),
    tuples for sequences, ``static`` for non-differentiable values."""
    dtype = _floating_dtype(value)
    if dtype is not None:
        leaf_values = values.get(path)
        return ZeroTangent() if leaf_values is None else _make_leaf(value, leaf_values, dtype)
    if _is_sequence(value):
        assert isinstance(value, (tuple, list))
        active = any(other[: len(path)] == path for other in values)
        if _has_leaf(value) and not active:
            return ZeroTangent()
        return tuple(_build_tangent(item, (*path, index), values, static=static) for index, item in enumerate(value))
    return static


def _fill_tangents(leaves: Sequence[_Leaf], generator: np.random.Generator) -> dict[_Path, Fill]:
    """A ``Fill`` of a random constant for each array leaf (a constant direction)."""
    fills: dict[_Path, Fill] = {}
    for leaf in leaves:
        if leaf.form == "array":
            value = complex(generator.standard_normal(), generator.standard_normal() if leaf.is_complex else 0.0)
            fills[leaf.path] = Fill(value, leaf.shape, leaf.dtype)
    return fills


def _build_argument_tangents(args: Sequence[object], values: Mapping[_Path, _Values]) -> tuple[object, ...]:
    return tuple(_build_tangent(arg, (index,), values, static=NoTangent()) for index, arg in enumerate(args))


def _snapshot(args: Sequence[object]) -> dict[_Path, npt.NDArray[np.generic]]:
    copies: dict[_Path, npt.NDArray[np.generic]] = {}

    def visit(value: object, path: _Path) -> None:
        if is_array(value):
            copies[path] = _to_numpy(value).copy()
        elif isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                visit(item, (*path, index))

    for index, arg in enumerate(args):
        visit(arg, (index,))
    return copies


def _assert_unchanged(
    values: Sequence[object],
    snapshot: Mapping[_Path, npt.NDArray[np.generic]],
    where: str,
    what: str,
    *,
    name: Callable[[int], str] = lambda index: f"argument {index}",
) -> None:
    for path, before in snapshot.items():
        after = _to_numpy(_get(values, path))
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=before.dtype.kind in "fc"):
            label = name(path[0]) + "".join(f"[{index}]" for index in path[1:])
            _fail(where, f"{label} was modified in place by {what}")


def _resolve_kwargs(kwargs: Mapping[str, object], fkwargs: Mapping[str, object] | None) -> dict[str, object]:
    merged = dict(kwargs)
    for name, value in (fkwargs or {}).items():
        if name in merged:
            raise TypeError(f"keyword argument {name!r} given both directly and in fkwargs")
        merged[name] = value
    return merged


def _resolve_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(_DEFAULT_SEED if rng is None else rng)


def _run(where: str, call: Callable[[], _T]) -> _T:
    """Call a rule or pullback; an exception it raises becomes an ``AssertionError`` saying which
    call raised (the cache guards' errors pass through to :func:`_steady_state`)."""
    try:
        return call()
    except (RecompileError, DynamicFallbackError):
        raise
    except Exception as error:
        raise AssertionError(f"{where} raised {type(error).__name__}: {error}") from error


def _pair(result: object) -> tuple[object, object]:
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(f"frule must return (y, dy); got {_describe(result)}")
    return result[0], result[1]


@contextlib.contextmanager
def _steady_state(where: str, *, strict_fallback: bool) -> Iterator[None]:
    """The second call: nothing may compile, load from disk, or fall back."""
    fallbacks = CACHE.fallbacks
    guard = no_fallback() if strict_fallback else contextlib.nullcontext()
    try:
        with no_compile(), guard:
            yield
    except RecompileError as error:
        raise AssertionError(
            f"{where}: a second call of the same signature compiled (or loaded from disk) a kernel: {error}"
        ) from error
    except DynamicFallbackError as error:
        raise AssertionError(
            f"{where}: a second call of the same signature left its specialized path: {error}"
        ) from error
    if CACHE.fallbacks > fallbacks:
        raise AssertionError(
            f"{where}: a second call of the same signature took a fallback path "
            f"({CACHE.fallbacks - fallbacks} noted)"
        )


# --------------------------------------------------------------------------------------------
# test_rrule


def test_rrule(
    op: Callable[..., object],
    /,
    *args: object,
    rtol: float | None = None,
    atol: float | None = None,
    check_compile: bool = True,
    rng: np.random.Generator | int | None = None,
    fkwargs: Mapping[str, object] | None = None,
    **kwargs: object,
) -> None:
    """Check ``sr.rrule(op, *args, **kwargs)`` and its pullback; ``AssertionError`` if wrong.

    Checks, in order: the primal equals ``op(*args, **kwargs)`` exactly; the pullback returns a
    tuple with one entry per positional argument, ``NoTangent()`` exactly where the argument is
    not differentiable and a tuple for a sequence of arrays; each tangent has its primal's
    shape, dtype and device; the adjoint identity ``Re<dx, v> == Re<dy, J v>`` against central
    finite differences of ``op`` in 64-bit precision; ``Fill``, ``ZeroTangent()`` and ``Thunk``
    cotangents give the dense equivalents' tangents; a second call compiles nothing and takes
    no fallback (``check_compile``); nothing is modified in place.

    ``rtol``/``atol`` default per dtype (see the module docstring); ``rng`` seeds the random
    cotangent and directions; ``fkwargs`` passes ``op`` keywords that clash with these options.
    """
    op_kwargs = _resolve_kwargs(kwargs, fkwargs)
    generator = _resolve_rng(rng)
    where = f"test_rrule({_op_name(op)})"
    snapshot = _snapshot(args)

    dynamic_before = CACHE.dynamic_arguments
    expected = op(*args, **op_kwargs)
    result = _run(f"{where}, rrule", lambda: rrule(op, *args, **op_kwargs))
    dynamic = CACHE.dynamic_arguments > dynamic_before
    if not isinstance(result, tuple) or len(result) != 2 or not callable(result[1]):
        _fail(where, f"rrule must return (y, pullback); got {_describe(result)}")
    primal, back = result
    _assert_same_primal(primal, expected, "output", f"{where}, primal")

    leaves = _argument_leaves(args)
    output_leaves = _output_leaves(primal)
    tolerance = _Tolerance(rtol if rtol is not None else _default_rtol([*leaves, *output_leaves]), atol)

    # Dense cotangent: structure, dtypes, then finite differences.
    dy_values = {leaf.path: _random_values(generator, leaf) for leaf in output_leaves}
    dy = _build_tangent(primal, (), dy_values, static=ZeroTangent())
    dy_snapshot = _snapshot((dy,))
    dense = _collect_pullback(_run(f"{where}, pullback(dense dy)", lambda: back(dy)), args, f"{where}, pullback(dense dy)")
    _assert_unchanged((dy,), dy_snapshot, where, "the pullback", name=lambda _: "the cotangent dy")
    _assert_unchanged(args, snapshot, where, "rrule or its pullback")

    if leaves:
        differences = _FiniteDifferences(op, args, op_kwargs, leaves, expected, output_leaves)
        if differences.low_precision and rtol is None:
            tolerance = _Tolerance(max(tolerance.rtol, _RTOL_FD_32), atol)
        _check_adjoint(differences, leaves, dense, dy_values, tolerance, generator, where)

    pullbacks = _rrule_lazy_cotangents(where, back, args, primal, output_leaves, leaves, dy, dense, generator, tolerance)
    if check_compile:
        _rrule_second_call(where, op, args, op_kwargs, expected, pullbacks, leaves, tolerance, dynamic)
    _assert_unchanged(args, snapshot, where, "rrule or its pullback")


_Pulled = list[tuple[str, object, dict[_Path, _Values]]]


def _rrule_lazy_cotangents(
    where: str,
    back: Callable[[object], object],
    args: tuple[object, ...],
    primal: object,
    output_leaves: list[_Leaf],
    leaves: list[_Leaf],
    dy: object,
    dense: dict[_Path, _Values],
    generator: np.random.Generator,
    tolerance: _Tolerance,
) -> _Pulled:
    """Lazy cotangents (``Fill``, ``ZeroTangent()``, ``Thunk``) give what their dense
    equivalents give; every cotangent pulled back, the dense one first, with its tangents."""
    pullbacks: _Pulled = [("dense dy", dy, dense)]
    for name, lazy, equivalent in _lazy_cotangents(primal, output_leaves, dy, generator):
        call = f"{where}, pullback({name})"
        got = _collect_pullback(_run(call, lambda: back(lazy)), args, call)
        pullbacks.append((name, lazy, got))
        if equivalent is None:
            _assert_zero(got, leaves, call)
            continue
        if equivalent is dy:
            want = dense
        else:
            call = f"{where}, pullback(dense equivalent of {name})"
            want = _collect_pullback(_run(call, lambda: back(equivalent)), args, call)
        for leaf in leaves:
            _compare(got[leaf.path], want[leaf.path], tolerance=tolerance, noise=0.0,
                     what=f"{where}, pullback({name}) vs its dense equivalent", leaf=leaf)
    return pullbacks


def _rrule_second_call(
    where: str,
    op: Callable[..., object],
    args: tuple[object, ...],
    op_kwargs: dict[str, object],
    expected: object,
    pullbacks: _Pulled,
    leaves: list[_Leaf],
    tolerance: _Tolerance,
    dynamic: bool,
) -> None:
    """The same signature again: nothing compiles, nothing falls back, same results."""
    again: list[dict[_Path, _Values]] = []
    with _steady_state(f"{where}, second call", strict_fallback=not dynamic):
        second_primal, second_back = _run(f"{where}, second call of rrule", lambda: rrule(op, *args, **op_kwargs))
        for name, cotangent, _ in pullbacks:
            call = f"{where}, second call's pullback({name})"
            again.append(_collect_pullback(_run(call, lambda: second_back(cotangent)), args, call))
    _assert_same_primal(second_primal, expected, "output", f"{where}, second call")
    for (name, _, first), second in zip(pullbacks, again):
        for leaf in leaves:
            _compare(second[leaf.path], first[leaf.path], tolerance=tolerance, noise=0.0,
                     what=f"{where}, second call's pullback({name}) vs the first call's", leaf=leaf)


setattr(test_rrule, "__test__", False)  # a library function, not a pytest test


def _check_adjoint(
    differences: _FiniteDifferences,
    leaves: Sequence[_Leaf],
    dense: Mapping[_Path, _Values],
    dy_values: Mapping[_Path, _Values],
    tolerance: _Tolerance,
    generator: np.random.Generator,
    where: str,
) -> None:
    dy_norm = math.sqrt(sum(float(np.vdot(v, v).real) for v in dy_values.values()))
    noise = differences.noise * max(dy_norm, 1.0)
    what = f"{where}, finite differences ({differences.note}) of the adjoint identity Re<dx, v> = Re<dy, J v>"
    for leaf in leaves:
        parts: tuple[complex, ...] = (1.0, 1j) if leaf.is_complex else (1.0,)
        if leaf.size * len(parts) <= _DENSE_DIRECTIONS:
            indices = np.arange(leaf.size, dtype=np.intp)
        else:
            chosen = generator.choice(leaf.size, size=_DENSE_DIRECTIONS // len(parts), replace=False)
            indices = np.sort(chosen).astype(np.intp)
        gradient = np.zeros(indices.size, dtype=np.complex128)
        base = differences.base[leaf.path].reshape(-1)
        for position, flat in enumerate(indices):
            for part in parts:
                direction = np.zeros(leaf.size, dtype=np.complex128)
                direction[flat] = part
                # A step relative to this element, not the whole argument: a nonlinear op is
                # then checked as well at small entries as at large ones.
                h = differences.step * max(1.0, float(abs(base[flat])) if np.isfinite(base[flat]) else 1.0)
                value = _inner(dy_values, differences.jvp({leaf.path: direction.reshape(leaf.shape)}, h))
                gradient[position] += value if part == 1.0 else 1j * value
        actual = dense[leaf.path].reshape(-1)[indices]
        _compare(actual, gradient, tolerance=tolerance, noise=noise, what=what, leaf=leaf,
                 flat_indices=indices if indices.size < leaf.size else None)
        if indices.size < leaf.size:
            _check_random_directions(differences, leaf, dense[leaf.path], dy_values, tolerance, noise, generator, what)


def _check_random_directions(
    differences: _FiniteDifferences,
    leaf: _Leaf,
    tangent: _Values,
    dy_values: Mapping[_Path, _Values],
    tolerance: _Tolerance,
    noise: float,
    generator: np.random.Generator,
    what: str,
) -> None:
    """Two random full directions, for arguments too large to check element by element."""
    for _ in range(2):
        direction = _random_values(generator, _Leaf(leaf.path, leaf.label, leaf.shape, _promote(leaf.dtype), leaf.form))
        left = float(np.vdot(tangent, direction).real)
        right = _inner(dy_values, differences.jvp({leaf.path: direction}))
        norm = math.sqrt(float(np.vdot(tangent, tangent).real) * float(np.vdot(direction, direction).real))
        allowed = tolerance.rtol * norm + (tolerance.atol or 0.0) * float(np.abs(direction).sum()) + noise
        if not abs(left - right) <= allowed:
            raise AssertionError(
                f"{what}: {leaf.label} ({leaf.describe()}) along a random direction v: "
                f"Re<dx, v> = {left:.6g} but Re<dy, J v> = {right:.6g}; abs error "
                f"{abs(left - right):.3g} > allowed {allowed:.3g}"
            )


def _lazy_cotangents(
    primal: object, output_leaves: Sequence[_Leaf], dy: object, generator: np.random.Generator
) -> list[tuple[str, object, object | None]]:
    """(name, lazy cotangent, dense equivalent or None for 'must give zeros')."""
    calls: list[tuple[str, object, object | None]] = [("ZeroTangent()", ZeroTangent(), None)]
    fills: dict[_Path, object] = {}
    dense: dict[_Path, object] = {}
    for leaf in output_leaves:
        if leaf.form != "array":
            continue
        value = complex(generator.standard_normal(), generator.standard_normal() if leaf.is_complex else 0.0)
        fill = Fill(value if leaf.is_complex else value.real, leaf.shape, leaf.dtype)
        fills[leaf.path] = fill
        dense[leaf.path] = array_namespace(_get(primal, leaf.path)).asarray(np.asarray(fill))
    if fills:
        def rebuild(replacements: Mapping[_Path, object]) -> object:
            if () in replacements:
                return replacements[()]
            return _replace(dy, (), replacements)

        shape_text = ", ".join(f"{_shape_text(fill.shape)}" for fill in fills.values() if isinstance(fill, Fill))
        calls.append((f"Fill of shape {shape_text}", rebuild(fills), rebuild(dense)))
    calls.append(("Thunk", Thunk(lambda: dy), dy))
    return calls


# --------------------------------------------------------------------------------------------
# test_frule


def test_frule(
    op: Callable[..., object],
    /,
    *args: object,
    rtol: float | None = None,
    atol: float | None = None,
    check_compile: bool = True,
    rng: np.random.Generator | int | None = None,
    fkwargs: Mapping[str, object] | None = None,
    **kwargs: object,
) -> None:
    """Check ``sr.frule(op, tangents, *args, **kwargs)``; ``AssertionError`` if wrong.

    ``tangents`` are random, in the arguments' structure (``NoTangent()`` for
    non-differentiable ones). Checks: the primal equals ``op(*args, **kwargs)`` exactly; the
    output tangent has the output's structure, shape and dtype; it equals central finite
    differences ``J v`` of ``op`` in 64-bit precision; so does the result with one argument's
    tangent at a time (others ``ZeroTangent()``) and with ``Fill`` tangents (a constant
    direction); all-``ZeroTangent()`` tangents give zeros; a
    second call compiles nothing and takes no fallback (``check_compile``); nothing is
    modified in place. Options as for :func:`test_rrule`.
    """
    op_kwargs = _resolve_kwargs(kwargs, fkwargs)
    generator = _resolve_rng(rng)
    where = f"test_frule({_op_name(op)})"
    snapshot = _snapshot(args)
    leaves = _argument_leaves(args)

    values = {leaf.path: _random_values(generator, leaf) for leaf in leaves}
    tangents = _build_argument_tangents(args, values)

    tangents_snapshot = _snapshot(tangents)
    dynamic_before = CACHE.dynamic_arguments
    expected = op(*args, **op_kwargs)
    result = _run(f"{where}, frule", lambda: frule(op, tangents, *args, **op_kwargs))
    dynamic = CACHE.dynamic_arguments > dynamic_before
    _assert_unchanged(tangents, tangents_snapshot, where, "frule", name=lambda index: f"the tangent of argument {index}")
    _assert_unchanged(args, snapshot, where, "frule")
    if not isinstance(result, tuple) or len(result) != 2:
        _fail(where, f"frule must return (y, dy); got {_describe(result)}")
    primal, pushed = result
    _assert_same_primal(primal, expected, "output", f"{where}, primal")
    output_leaves = _output_leaves(primal)
    tolerance = _Tolerance(rtol if rtol is not None else _default_rtol([*leaves, *output_leaves]), atol)

    full = _collect_output_tangent(pushed, primal, f"{where}, pushforward")
    variants: list[tuple[str, tuple[object, ...], dict[_Path, _Values]]] = [("random tangents", tangents, full)]
    if leaves:
        differences = _FiniteDifferences(op, args, op_kwargs, leaves, expected, output_leaves)
        if differences.low_precision and rtol is None:
            tolerance = _Tolerance(max(tolerance.rtol, _RTOL_FD_32), atol)
        what = f"{where}, pushforward vs finite differences ({differences.note}) J v"
        _check_pushforward(differences, values, full, output_leaves, tolerance, f"{what}, random tangents")
        variants += _frule_variants(where, what, op, args, op_kwargs, primal, values, leaves, output_leaves, differences, tolerance, generator)
    zero_tangents = _build_argument_tangents(args, {})
    zero_name = "every differentiable tangent ZeroTangent()"
    _, zero_pushed = _pair(_run(f"{where}, frule with {zero_name}", lambda: frule(op, zero_tangents, *args, **op_kwargs)))
    zero = _collect_output_tangent(zero_pushed, primal, f"{where}, pushforward with {zero_name}")
    _assert_zero(zero, output_leaves, f"{where}, pushforward with {zero_name}")
    variants.append((zero_name, zero_tangents, zero))

    if check_compile:
        _frule_second_call(where, op, args, op_kwargs, expected, primal, variants, output_leaves, tolerance, dynamic)
    _assert_unchanged(args, snapshot, where, "frule")


_Pushed = list[tuple[str, tuple[object, ...], dict[_Path, _Values]]]


def _frule_variants(
    where: str,
    what: str,
    op: Callable[..., object],
    args: tuple[object, ...],
    op_kwargs: dict[str, object],
    primal: object,
    values: dict[_Path, _Values],
    leaves: list[_Leaf],
    output_leaves: list[_Leaf],
    differences: _FiniteDifferences,
    tolerance: _Tolerance,
    generator: np.random.Generator,
) -> _Pushed:
    """One argument's tangent at a time (the others ``ZeroTangent()``) and ``Fill`` tangents,
    each against the finite differences; every variant pushed forward, with its result."""
    variants: _Pushed = []
    if len(leaves) > 1:
        for leaf in leaves:
            single = {leaf.path: values[leaf.path]}
            single_tangents = _build_argument_tangents(args, single)
            name = f"only {leaf.label}'s tangent, others ZeroTangent()"
            _, single_pushed = _pair(_run(f"{where}, frule with {name}", lambda: frule(op, single_tangents, *args, **op_kwargs)))
            got = _collect_output_tangent(single_pushed, primal, f"{where}, pushforward with {name}")
            _check_pushforward(differences, single, got, output_leaves, tolerance, f"{what}, {name}")
            variants.append((name, single_tangents, got))
    fills = _fill_tangents(leaves, generator)
    if fills:
        fill_tangents = _replace_arguments(
            _build_argument_tangents(args, {path: _values(fill) for path, fill in fills.items()}), fills
        )
        fill_values = {path: _values(fill) for path, fill in fills.items()}
        name = "Fill tangents" + (", others ZeroTangent()" if len(fills) < len(leaves) else "")
        _, fill_pushed = _pair(_run(f"{where}, frule with {name}", lambda: frule(op, fill_tangents, *args, **op_kwargs)))
        got = _collect_output_tangent(fill_pushed, primal, f"{where}, pushforward with {name}")
        _check_pushforward(differences, fill_values, got, output_leaves, tolerance, f"{what}, {name}")
        variants.append((name, fill_tangents, got))
    return variants


def _frule_second_call(
    where: str,
    op: Callable[..., object],
    args: tuple[object, ...],
    op_kwargs: dict[str, object],
    expected: object,
    primal: object,
    variants: _Pushed,
    output_leaves: list[_Leaf],
    tolerance: _Tolerance,
    dynamic: bool,
) -> None:
    """Every variant again: nothing compiles, nothing falls back, same results."""
    again: list[tuple[object, object]] = []
    with _steady_state(f"{where}, second call", strict_fallback=not dynamic):
        for name, variant_tangents, _ in variants:
            again.append(_pair(_run(f"{where}, second call of frule with {name}", lambda: frule(op, variant_tangents, *args, **op_kwargs))))
    for (name, _, first), (second_primal, second_pushed) in zip(variants, again):
        _assert_same_primal(second_primal, expected, "output", f"{where}, second call")
        got = _collect_output_tangent(second_pushed, primal, f"{where}, second call with {name}")
        for leaf in output_leaves:
            _compare(got[leaf.path], first[leaf.path], tolerance=tolerance, noise=0.0,
                     what=f"{where}, second call with {name} vs the first call", leaf=leaf)


setattr(test_frule, "__test__", False)  # a library function, not a pytest test


def _check_pushforward(
    differences: _FiniteDifferences,
    direction: Mapping[_Path, _Values],
    actual: Mapping[_Path, _Values],
    output_leaves: Sequence[_Leaf],
    tolerance: _Tolerance,
    what: str,
) -> None:
    expected = differences.jvp(direction)
    for leaf in output_leaves:
        _compare(actual[leaf.path], expected[leaf.path], tolerance=tolerance, noise=differences.noise, what=what, leaf=leaf)
