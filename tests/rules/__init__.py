"""The op families' test files, and the one way the cross-cutting tests read their rows.

Each ``tests/rules/test_<family>.py`` (one per module of ``stablerules/rules``) ends with its
ops' rows in the tables that the cross-cutting tests run over every op:

=====================  ==============================  ===========================================
table                  read by                         a row
=====================  ==============================  ===========================================
``ROBUSTNESS``         ``tests/test_robustness.py``    a :class:`Case` (call, NumPy reference, shapes)
``HUGE_CALLS``         ``tests/test_robustness.py``    ``label | error | pattern | expression`` lines
``torch_cases``        ``tests/test_torch.py``         a :class:`TorchCase`
``torch_indexing``     ``tests/test_torch.py``         ``(id, (our call, inputs, torch's op))``
``jax_cases``          ``tests/test_jax.py``           ``(id, our call, arrays, jnp's composition)``
``jax_structure``      ``tests/test_jax.py``           ``(id, our call, arrays, NumPy's op)``
``jax_op_calls``       ``tests/test_jax.py``           ``(op name, a call on a (3, 4) array)``
``jax_call_errors``    ``tests/test_jax.py``           ``(call, error type, message)``
``autograd_cases``     ``tests/test_autograd.py``      ``(id, our call, arrays, anp's composition)``
=====================  ==============================  ===========================================

``tests/rules/cuda_cases.py`` runs the ``ROBUSTNESS`` rows on the CUDA kernels too, and
``tests/test_fuzz.py`` names the ops each of its property tests draws.

The engine tables are functions that import their engine when called, so that importing a
family file imports neither torch nor jax (its own tests run without them) while the
cross-cutting file, which imports its engine anyway, calls them with its own array factory.
A new op adds its rows in its family's file; each cross-cutting file fails (through
:func:`assert_every_op_has_a_row`) while one of its tables has no row for a schema op that it
does not exempt by name, with the reason.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy.typing as npt

from stablerules._schema import BY_NAME, OPS

Array = npt.NDArray[Any]
Shape = tuple[int, ...]
Call = tuple[tuple[object, ...], dict[str, object]]

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(op.family for op in OPS))
"""The op families, in the schema's order: ``tests/rules/test_<family>.py`` for each."""


def collect(table: str, *args: object) -> list[Any]:
    """Every family's rows of ``table``, in the families' order. A table that is a function is
    called with ``args`` (the caller's array factory); a family without the table adds none."""
    rows: list[Any] = []
    for family in FAMILIES:
        module = importlib.import_module(f"tests.rules.test_{family}")
        value = getattr(module, table, None)
        if value is None:
            continue
        rows.extend(value(*args) if callable(value) else value)
    return rows


def op_of(row_id: str) -> str:
    """The op a row is about: its id's first word (``"repeat-axis"``, ``"sum keepdims"``),
    the convention every table's ids follow."""
    match = re.match(r"[a-z_]+", row_id)
    assert match and match.group() in BY_NAME, f"row {row_id!r} does not start with an op's name"
    return match.group()


def assert_every_op_has_a_row(table: str, ops: Iterable[str], exempt: dict[str, str] | None = None) -> None:
    """Every op of the schema has a row in ``table`` (``ops``: the rows' ops), or is in
    ``exempt`` with the reason it has none; an exempt op that gained a row must leave it."""
    exempt = exempt or {}
    covered = set(ops)
    missing = sorted(set(BY_NAME) - covered - set(exempt))
    assert not missing, f"{table}: no row for {missing}; add one in the op's tests/rules/test_<family>.py"
    stale = sorted(set(exempt) & covered)
    assert not stale, f"{table}: {stale} have rows now; remove them from the exemptions"
    unknown = sorted(set(exempt) - set(BY_NAME))
    assert not unknown, f"{table}: exemptions {unknown} are not ops"


@dataclass(frozen=True)
class Case:
    """One op and static arguments for ``tests/test_robustness.py``: ``call(xs)`` gives the
    op's positional and keyword arguments for input arrays ``xs``, ``numpy(xs)`` NumPy's result."""

    name: str
    op: object
    call: Callable[[Sequence[Array]], Call]
    numpy: Callable[[Sequence[Array]], Array]
    shapes: tuple[Shape, ...]
    empty_shapes: tuple[Shape, ...]
    scalar_shapes: tuple[Shape, ...] | None = None
    sequence: bool = False  # the op takes one sequence argument: tangents are back(dy)[0]
    bilinear: bool = False  # kron: the reference pullback is not a gather
    # a linear op that is not a gather (sum): its adjoint, from NumPy, given xs and dy
    adjoint: Callable[[Sequence[Array], Array], list[Array]] | None = None

    def tangents(self, result: tuple[object, ...], count: int) -> list[object]:
        return list(cast(Sequence[object], result[0])) if self.sequence else list(result[:count])

    @property
    def op_name(self) -> str:
        return cast(str, getattr(self.op, "name"))

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TorchCase:
    """One call for ``tests/test_torch.py``: ``call`` takes tensors of ``shapes`` (``srt``'s op),
    ``reference`` the same values as NumPy arrays (NumPy's own op)."""

    id: str
    call: Callable[..., Any]
    reference: Callable[..., Any]
    shapes: tuple[Shape, ...]

    def __str__(self) -> str:
        return self.id


ArrayCase = tuple[str, Callable[..., Any], tuple[Any, ...], Callable[..., Any] | None]
"""A row of ``jax_cases``, ``jax_structure`` and ``autograd_cases``: ``(id, our call on the
arrays, the arrays, the engine's own composition of the op or None)``."""
