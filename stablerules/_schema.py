"""Every op declared once: its parameters and their roles, its rank and dtype rules, its tangents.

``tools/generate.py`` writes from these rows everything that repeats an op's signature: the
typing overloads of the ops (``_ops.pyi``), of ``rrule``, ``frule`` and ``pullback``
(``_signatures.pyi``), the public names of the package (``_public.py``) and the adapters'
typed ops (each a whole generated file; the first line says so). A test regenerates them all
and fails when a committed file is stale. At run time
the binders, the scaffold and the adapters read these rows themselves (:attr:`OpSchema.params`,
:data:`BY_NAME`).

A row (:class:`OpSchema`) says:

- ``name``, ``cls``, ``family``: the public name, the op's class and its module under
  ``stablerules.rules``;
- ``signatures``: one or more :class:`Signature`\\ s (``repeat`` has three: static counts,
  a counts array, ``inner``/``outer``), each a tuple of :class:`Param`\\ s in call order, the
  signature's rank rule (:class:`Rank`), its dtype rule and whether a ``Fill`` cotangent
  pulls back to ``Fill``\\ s (``fill_closed``);
- ``kind``, ``constant``: the adapters' linearity (``"linear"``; ``"multilinear"`` for an op
  linear in each array separately) and an affine op's constant (position, keyword).

Parameter roles (:data:`Role`): ``array`` (a differentiable array), ``arrays`` (a sequence of
arrays: its tangent is a tuple, of the call's arity for 1 to 4 arrays), ``varargs`` (``cat``'s
``*arrays``), ``static`` (a ``Val``; ``kinds`` lists the ``Val`` types it takes: ``"int"``,
``"ints"`` (a tuple), ``"bool"``, ``"ix"`` (``sr.ix[...]``); ``none`` says ``None`` is
accepted), ``data`` (an integer array: no tangent; ``kinds=("scalar",)``: a Python or NumPy
int too) ``value`` (``pad``'s constant: a tangent only when given
positionally) and ``scalar`` (a Python number in an array's place, always positional: an
``int`` gets ``NoTangent``, a ``float`` or ``complex`` a 0-d tangent of NumPy's dtype for it). ``default`` is the default's source text (``None``: required);
``keyword_only`` params are never positional.

Rank rules (:class:`Rank`, its ``kind`` and the parameters it reads; see the generator for
the cases each one writes): ``same`` (the first array's shape type: flip, roll, and every
same-rank op), ``axis_or_flat`` of ``P`` (1-D when static ``P`` is ``None``, else the same
rank), ``static_shape`` of ``P`` (the length of ``P``'s tuple), ``reduce`` (sum/mean over
``axis`` with ``keepdims``), ``stack`` (rank + 1), ``atleast_1d``/``atleast_2d``
(hstack/vstack), ``counts`` of ``P, Q, ...`` (the larger of the rank and the counts' length:
tile's ``reps``, repeat's ``inner``/``outer``), ``kron`` (the larger rank), ``julia_cat``
(``cat``'s ``dims``), ``index`` (getindex: slices and ``...`` keep the shape type; ints and
``None`` give ``ndim(x)`` minus the ints plus the ``None`` entries, for up to three entries),
``take`` of ``I, A`` (``ndim(I)`` for ``A=None``, else ``ndim(x) - 1 + ndim(I)``) and ``any``
(a rank the types do not follow).

Adding an op: one :class:`OpSchema` row here (with an existing rank rule, or a new one in the
generator), ``python tools/generate.py``, and the op's class and its ``ENGINE_FACTS`` entry in
its family module (its forward rule among them); the adapters build the op from these
(``stablerules.torch._ops.ENTRIES``, ``stablerules.jax._generic.DEFINITIONS``).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Role = Literal["array", "arrays", "varargs", "static", "data", "value", "scalar"]
RankKind = Literal[
    "same", "axis_or_flat", "static_shape", "reduce", "stack", "atleast_1d", "atleast_2d", "counts", "kron",
    "julia_cat", "index", "take", "any",
]
_RANK_PARAMS: dict[RankKind, tuple[int, int]] = {
    "axis_or_flat": (1, 1), "static_shape": (1, 1), "counts": (1, 2), "index": (0, 1), "take": (2, 2),
}
"""How many parameters each rank rule reads (at least, at most); the others read none."""
DtypeRule = Literal["same", "sum", "mean", "scalars"]


# NamedTuples, not frozen dataclasses, here and in the records a fresh process's first gradient
# defines: ~0.1 ms to define against ~0.6 ms (Python 3.11 compiles each of a dataclass's
# methods apart; bench/README.md, round 11).
class Param(NamedTuple):
    """One parameter of an op's signature (module docstring)."""

    name: str
    role: Role
    kinds: tuple[str, ...] = ()
    none: bool = False
    default: str | None = None
    keyword_only: bool = False


class Rank(NamedTuple):
    """A signature's rank rule: its kind and the parameters it reads, by name (module docstring;
    :func:`_checked` checks every row's when the module loads)."""

    kind: RankKind
    params: tuple[str, ...] = ()


class Signature(NamedTuple):
    """One call signature of an op: parameters, rank rule, dtype rule, Fill closure."""

    params: tuple[Param, ...]
    rank: Rank
    dtype: DtypeRule = "same"
    fill_closed: bool | None = True  # None: a Fill cotangent may give Fills or dense tangents
    tuple_output: bool = False  # the result is a tuple of arrays (split), its pullback takes a tuple


class OpSchema(NamedTuple):
    """One op (module docstring). ``params``: the union of its signatures' parameters, in
    call order, for the binders and the adapters (a parameter that is data in one signature
    and static in another is the data one; otherwise the first signature's), filled in by
    :func:`_checked` when the module loads."""

    name: str
    cls: str
    family: str
    signatures: tuple[Signature, ...]
    kind: Literal["linear", "multilinear"] = "linear"
    constant: tuple[int, str] | None = None
    primal_free: bool = True  # its pullback needs no primal values (ArraySpec arguments allowed)
    doc: str = ""
    params: tuple[Param, ...] = ()


def _checked(op: OpSchema) -> OpSchema:
    """``op`` with its ``params`` filled in, after checking that each rank rule reads as many
    parameters as its kind takes (``ValueError`` otherwise)."""
    params: dict[str, Param] = {}
    for sig in op.signatures:
        low, high = _RANK_PARAMS.get(sig.rank.kind, (0, 0))
        if not low <= len(sig.rank.params) <= high:
            raise ValueError(f"rank rule {sig.rank.kind!r} reads {low} to {high} parameters, got {sig.rank.params!r}")
        for p in sig.params:
            if p.name not in params or p.role == "data":
                params[p.name] = p
    return op._replace(params=tuple(params.values()))


_X = Param("x", "array")
_ARRAYS = Param("arrays", "arrays")
_INT = ("int",)
_INTS = ("ints",)
_COUNTS = ("int", "ints")


def _reduction(name: Literal["sum", "mean"], cls: str) -> OpSchema:
    """``sum`` and ``mean``: one signature, their dtype rule named as the op."""
    params = (
        _X,
        Param("axis", "static", _COUNTS, none=True, default="None"),
        Param("keepdims", "static", ("bool",), default="Val(False)"),
    )
    return OpSchema(name, cls, "broadcast", (Signature(params, Rank("reduce"), dtype=name),))


OPS: tuple[OpSchema, ...] = (
    OpSchema(
        "repeat",
        "Repeat",
        "repeat",
        (
            Signature(
                (_X, Param("repeats", "static", _INT), Param("axis", "static", _INT, none=True, default="None")),
                Rank("axis_or_flat", ("axis",)),
            ),
            Signature(
                (_X, Param("repeats", "data"), Param("axis", "static", _INT, none=True, default="None")),
                Rank("axis_or_flat", ("axis",)),
                fill_closed=False,
            ),
            Signature(
                (
                    _X,
                    Param("inner", "static", _COUNTS, none=True, default="None", keyword_only=True),
                    Param("outer", "static", _COUNTS, none=True, default="None", keyword_only=True),
                ),
                Rank("counts", ("inner", "outer")),
            ),
        ),
    ),
    OpSchema("tile", "Tile", "repeat", (Signature((_X, Param("reps", "static", _COUNTS)), Rank("counts", ("reps",))),)),
    OpSchema(
        "concatenate",
        "Concatenate",
        "concatenate",
        (Signature((_ARRAYS, Param("axis", "static", _INT, none=True, default="Val(0)")), Rank("axis_or_flat", ("axis",))),),
    ),
    OpSchema("stack", "Stack", "concatenate", (Signature((_ARRAYS, Param("axis", "static", _INT, default="Val(0)")), Rank("stack")),)),
    OpSchema("hstack", "Hstack", "concatenate", (Signature((_ARRAYS,), Rank("atleast_1d")),)),
    OpSchema("vstack", "Vstack", "concatenate", (Signature((_ARRAYS,), Rank("atleast_2d")),)),
    OpSchema(
        "cat",
        "Cat",
        "concatenate",
        (Signature((Param("arrays", "varargs"), Param("dims", "static", _COUNTS, keyword_only=True)), Rank("julia_cat")),),
    ),
    OpSchema(
        "kron",
        "Kron",
        "kron",
        (Signature((Param("a", "array"), Param("b", "array")), Rank("kron")),),
        kind="multilinear",
        primal_free=False,
    ),
    OpSchema("flip", "Flip", "flip", (Signature((_X, Param("axis", "static", _COUNTS, none=True, default="None")), Rank("same")),)),
    OpSchema(
        "roll",
        "Roll",
        "flip",
        (Signature((_X, Param("shift", "static", _COUNTS), Param("axis", "static", _COUNTS, none=True, default="None")), Rank("same")),),
    ),
    OpSchema("permute_dims", "PermuteDims", "permute", (Signature((_X, Param("axes", "static", _INTS)), Rank("same")),)),
    OpSchema(
        "transpose", "Transpose", "permute", (Signature((_X, Param("axes", "static", _INTS, none=True, default="None")), Rank("same")),)
    ),
    OpSchema(
        "swapaxes",
        "Swapaxes",
        "permute",
        (Signature((_X, Param("axis1", "static", _INT), Param("axis2", "static", _INT)), Rank("same")),),
    ),
    OpSchema("reshape", "Reshape", "permute", (Signature((_X, Param("shape", "static", _COUNTS)), Rank("static_shape", ("shape",))),)),
    OpSchema(
        "broadcast_to", "BroadcastTo", "broadcast", (Signature((_X, Param("shape", "static", _COUNTS)), Rank("static_shape", ("shape",))),)
    ),
    _reduction("sum", "Sum"),
    _reduction("mean", "Mean"),
    OpSchema(
        "pad",
        "Pad",
        "pad",
        (Signature((_X, Param("pad_width", "static", _COUNTS), Param("constant_values", "value", default="0")), Rank("same")),),
        constant=(2, "constant_values"),
    ),
    OpSchema(
        "split",
        "Split",
        "pad",
        (Signature((_X, Param("indices_or_sections", "static", _COUNTS), Param("axis", "static", _INT, default="Val(0)")), Rank("same"), tuple_output=True),),
    ),
    OpSchema(
        "getindex",
        "Getindex",
        "indexing",
        (Signature((_X, Param("index", "static", ("ix",))), Rank("index"), fill_closed=None),),
    ),
    OpSchema(
        "take",
        "Take",
        "indexing",
        (
            Signature(
                (
                    _X,
                    Param("indices", "data", ("scalar",)),
                    Param("axis", "static", _INT, none=True, default="None"),
                    Param("unique", "static", ("bool",), default="Val(False)", keyword_only=True),
                    Param("sorted", "static", ("bool",), default="Val(False)", keyword_only=True),
                    Param("deterministic", "static", ("bool",), default="Val(True)", keyword_only=True),
                ),
                Rank("take", ("indices", "axis")),
                fill_closed=False,
            ),
        ),
        primal_free=False,
    ),
    OpSchema(
        "take_along_axis",
        "TakeAlongAxis",
        "indexing",
        (Signature((_X, Param("indices", "data"), Param("axis", "static", _INT, none=True)), Rank("axis_or_flat", ("axis",)), fill_closed=False),),
        primal_free=False,
    ),
    OpSchema(
        "index_add",
        "IndexAdd",
        "indexing",
        (
            Signature(
                (_X, Param("indices", "data"), Param("values", "array"), Param("axis", "static", _INT, default="Val(0)")),
                Rank("same"),
            ),
            Signature(
                (_X, Param("indices", "data"), Param("values", "scalar"), Param("axis", "static", _INT, default="Val(0)")),
                Rank("same"),
            ),
        ),
        primal_free=False,
    ),

)
OPS = tuple(_checked(op) for op in OPS)
"""The ops, in the order of the public lists' families."""

LAZY_NAMES: tuple[tuple[str, str], ...] = (("StaticIndex", "indexing"), ("ix", "indexing"))
"""Public names that are not ops but live in an op family's module (loaded on first use)."""

BY_NAME: dict[str, OpSchema] = {op.name: op for op in OPS}
