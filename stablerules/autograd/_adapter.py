"""The machinery behind ``stablerules.autograd``: any of our ops as a HIPS autograd primitive.

Each op of :data:`stablerules._schema.OPS` (the op schema) becomes one
function with the op's name and argument forms (``stablerules.autograd._public``; the call is
split into differentiable leaves and structure by the shared binder, ``stablerules._binding``). Called on plain NumPy arrays it is the op itself. Called with any argument
boxed by autograd, it runs two primitives:

- ``_forward(call, *leaves)``: the op through ``sr.rrule``. autograd builds the node (and so
  calls our vjp maker) right after the primal is computed, in the same thread, so the rrule's
  pullback is handed to the maker through a per-thread slot instead of being rebuilt. A miss
  (the maker of an outer trace level, which sees the inner level's box as ``ans``) rebuilds
  it: correct, one extra forward. The slot keeps the last traced call's pullback (for
  ``kron``, its operands) until the thread's next traced call.
- ``_backward(call, back, g, *leaves)``: the pullback, as a primitive of its own so that
  ``autograd.grad`` of a gradient works: its vjp with respect to ``g`` is the op's
  pushforward, written with ``_forward`` again (for a linear op, the op applied to the
  cotangents; for ``kron``, ``kron(h_a, b) + kron(a, h_b)``), and with respect to a
  multilinear op's arrays it is the pullback at the other arrays (below).
  A linear op's pullback does not read the arrays, so they are not its arguments and autograd
  records no dependence on them. Every order is made of the same two primitives.

Gradients are dense, writable arrays of each leaf's shape and dtype: a ``Fill`` or zero
cotangent from a rule is materialized here (:func:`dense`); a complex cotangent follows
autograd's (transpose) convention (:func:`engine_pullback`). Integer arrays (``repeat``'s counts)
are static.

How an op depends on its arrays (its schema row's ``kind``):

- ``"linear"``: jointly linear in all of them (repeat, tile, the concatenate family, the
  structure ops, the indexing ops in ``x`` and ``values``). Its pushforward is the op applied
  to the tangents and its pullback does not depend on the primal values (but for data it
  reads: take's indices), so the second-order rules are the op and its pullback again.
- ``"multilinear"``: linear in each array separately (``kron``). Its pushforward is
  ``sum_i op(x with x_i := t_i)`` and the derivative of its pullback with respect to ``x_j``
  is ``sum_{i != j} pullback at (x with x_i := h_i), column j``.

An affine op (``pad`` with a nonzero ``constant_values``) is linear jointly in its arrays
*and* its constant. Where the constant is a leaf (a float given positionally) the op is
linear in its leaves as it is; where it is static (a keyword, an integer), the tangent map is
the op with the constant made zero (``Structure.linearized``), the pullback as it is.

Complex numbers. stablerules' pullbacks follow ChainRules (``back(dy)`` is the adjoint
``J^H dy``); HIPS autograd passes cotangents through the *transpose* ``J^T`` (its gradient of
a real function of ``z`` is the conjugate of ChainRules'). So autograd's pullback is
``conj(back(conj(g)))`` (:func:`engine_pullback`); for real arrays, and for any op with real
coefficients (all but ``kron``), the two agree and no conjugate is taken.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import autograd.numpy as anp
import numpy as np
import numpy.typing as npt
from autograd.extend import defvjp_argnums, primitive
from autograd.tracer import getval, isbox

import stablerules as sr

from .._arrays import ArraySpec
from .._binding import Structure, binder, split_leaves
from .._schema import OPS, OpSchema
from .._tangents import Fill, NoTangent, ZeroTangent, unthunk

Array = npt.NDArray[np.generic]
Pullback = Callable[[object], tuple[object, ...]]

# The op is chosen at run time: its rule calls go through these names, so that the type checker
# does not try each of the rules' overloads on every such call (for the same loose result).
_rrule: Callable[..., tuple[object, Pullback]] = sr.rrule
_pullback: Callable[..., Pullback] = sr.pullback


@dataclass(frozen=True, slots=True, eq=False)
class _Call:
    """One call's static part: the op, its schema row, the call's structure and the leaves'
    shapes and dtypes (what a linear op's pullback needs instead of the arrays)."""

    op: Callable[..., object]
    schema: OpSchema
    structure: Structure
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype[np.generic], ...]

    def run(self, leaves: Sequence[object]) -> object:
        args, kwargs = self.structure.rebuild(leaves)
        return self.op(*args, **kwargs)

    def rrule(self, leaves: Sequence[object]) -> tuple[object, Pullback]:
        args, kwargs = self.structure.rebuild(leaves)
        y, back = _rrule(self.op, *args, **kwargs)
        return y, back

    def pullback_at(self, leaves: Sequence[object] | None) -> Pullback:
        """The pullback without a forward pass's stash, through ``sr.pullback`` (no primal
        computed): a linear op's from the leaves' shapes and dtypes alone (``ArraySpec``s: it
        reads no values), a multilinear op's at ``leaves``."""
        if leaves is None and not self.schema.primal_free:  # the op keeps its data: arrays, values unused
            leaves = [np.zeros(shape, dtype) for shape, dtype in zip(self.shapes, self.dtypes)]
        elif leaves is None:
            leaves = [ArraySpec(shape, dtype) for shape, dtype in zip(self.shapes, self.dtypes)]
        args, kwargs = self.structure.rebuild(leaves)
        return _pullback(self.op, *args, **kwargs)

    def tangent_call(self) -> _Call:
        """The call of the op's tangent map: itself, but for an affine op's static constant
        (made zero, ``Structure.linearized``)."""
        if self.schema.constant is None:
            return self
        return _Call(self.op, self.schema, self.structure.linearized(self.schema.constant), self.shapes, self.dtypes)


def _is_leaf(value: object) -> bool:
    if isbox(value):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fc"
    return isinstance(value, (float, complex, np.floating, np.complexfloating))


class _Stash(threading.local):
    """The last forward's ``(y, pullback)``, for the vjp maker that autograd calls next."""

    y: object = None
    back: Pullback | None = None


_STASH = _Stash()


@primitive
def _forward(call: _Call, *leaves: object) -> object:
    y, back = call.rrule(leaves)
    _STASH.y, _STASH.back = y, back
    return y


@primitive
def _backward(call: _Call, back: Pullback | None, g: object, *leaves: object) -> tuple[Array, ...]:
    if back is None:
        back = call.pullback_at(leaves if leaves else None)
    tangents = call.structure.per_leaf(engine_pullback(back, g), NoTangent())
    return tuple(dense(t, shape, dtype) for t, shape, dtype in zip(tangents, call.shapes, call.dtypes))


def _apply(call: _Call, leaves: Sequence[object]) -> object:
    """The op on ``leaves``: traced through ``_forward`` when any is boxed, else plainly."""
    if any(isbox(leaf) for leaf in leaves):
        return _forward(call, *leaves)
    return call.run(leaves)


def _forward_vjp(argnums: tuple[int, ...], ans: object, args: tuple[object, ...], kwargs: dict[str, object]) -> Callable[[object], tuple[object, ...]]:
    call = args[0]
    assert isinstance(call, _Call)
    leaves = args[1:]
    back = _STASH.back if _STASH.y is not None and _STASH.y is getval(ans) else None
    multilinear = call.schema.kind == "multilinear"

    def forward_vjp(g: object) -> tuple[object, ...]:
        grads = _backward(call, back, g, *leaves) if multilinear else _backward(call, back, g)
        return tuple(grads[argnum - 1] for argnum in argnums)

    return forward_vjp


def _backward_vjp(argnums: tuple[int, ...], ans: object, args: tuple[object, ...], kwargs: dict[str, object]) -> Callable[[object], tuple[object, ...]]:
    call, _, g = args[0], args[1], args[2]
    assert isinstance(call, _Call)
    leaves = list(args[3:])

    def backward_vjp(h: object) -> tuple[object, ...]:
        cotangents = list(h)  # type: ignore[call-overload]
        out: list[object] = []
        for argnum in argnums:
            if argnum == 2:  # with respect to g: the pushforward of h
                if not leaves:
                    out.append(_apply(call.tangent_call(), cotangents))
                    continue
                total: object = None
                for i in range(len(leaves)):
                    term = _apply(call, leaves[:i] + [cotangents[i]] + leaves[i + 1 :])
                    total = term if total is None else anp.add(total, term)
                out.append(total)
            else:  # with respect to leaf j of a multilinear op
                j = argnum - 3
                total = None
                for i in range(len(leaves)):
                    if i == j:
                        continue
                    swapped = leaves[:i] + [cotangents[i]] + leaves[i + 1 :]
                    term = _backward(call, None, g, *swapped)[j]
                    total = term if total is None else anp.add(total, term)
                out.append(total if total is not None else np.zeros(call.shapes[j], call.dtypes[j]))
        return tuple(out)

    return backward_vjp


defvjp_argnums(_forward, _forward_vjp)
defvjp_argnums(_backward, _backward_vjp)


def adapt(schema: OpSchema) -> Callable[..., Array]:
    """The op of ``schema`` as a function of autograd's boxes (plain arrays: the op itself)."""
    op: Callable[..., object] = getattr(sr, schema.name)
    bind = binder(schema.name).bind
    owner = "stablerules.autograd."

    def adapted(*args: object, **kwargs: object) -> Array:
        leaves, structure = split_leaves(bind(args, kwargs, owner), _is_leaf)
        if not any(isbox(leaf) for leaf in leaves):
            return op(*args, **kwargs)  # type: ignore[return-value]
        values = [np.asarray(getval(leaf)) for leaf in leaves]
        call = _Call(
            op,
            schema,
            structure,
            tuple(value.shape for value in values),
            tuple(value.dtype for value in values),
        )
        return _forward(call, *leaves)  # type: ignore[return-value]

    adapted.__name__ = adapted.__qualname__ = schema.name
    adapted.__module__ = "stablerules.autograd._public"
    adapted.__doc__ = (
        f"``stablerules.{schema.name}`` as a HIPS autograd primitive: same arguments (statics as "
        f"``Val``), differentiable to any order with ``autograd.grad``; gradients are dense "
        f"writable arrays.\n\n{getattr(op, '__call__').__doc__ or ''}"
    )
    return adapted


# ---------------------------------------------------------------------------------------------
# Tangents as autograd wants them
# ---------------------------------------------------------------------------------------------


def dense(tangent: object, shape: tuple[int, ...], dtype: np.dtype[np.generic]) -> npt.NDArray[np.generic]:
    """A rule's tangent as a writable array of ``shape`` and ``dtype``: a ``Fill`` or a zero
    is materialized (never a read-only broadcast view), a read-only array is copied. An
    integer or bool primal's ``NoTangent`` becomes float zeros (what autograd expects of
    an argument it was asked to differentiate anyway)."""
    tangent = unthunk(tangent)
    if isinstance(tangent, np.ndarray):
        if tangent.flags.writeable and tangent.shape == shape:
            return tangent
        return np.array(np.broadcast_to(tangent, shape), copy=True)
    if not np.issubdtype(dtype, np.inexact):
        dtype = np.dtype(np.float64)
    if isinstance(tangent, Fill):
        value: complex = tangent.value if dtype.kind == "c" else complex(tangent.value).real
        return np.full(shape, value, dtype)
    if isinstance(tangent, (ZeroTangent, NoTangent)):
        return np.zeros(shape, dtype)
    return np.array(np.broadcast_to(np.asarray(tangent), shape), dtype=dtype, copy=True)


def conjugate_tree(value: object) -> object:
    """``conj`` of an array or of a tuple/list of arrays; real arrays and lazy tangents as they are."""
    if isinstance(value, np.ndarray):
        return np.conj(value) if value.dtype.kind == "c" else value
    if isinstance(value, (tuple, list)):
        return type(value)(conjugate_tree(item) for item in value)
    return value


def engine_pullback(back: Callable[[object], tuple[object, ...]], g: object) -> tuple[object, ...]:
    """``back`` (ChainRules' adjoint) applied in autograd's transpose convention:
    ``conj(back(conj(g)))``; no conjugate (and no copy) is taken of real arrays."""
    return tuple(conjugate_tree(item) for item in back(conjugate_tree(g)))


DEFINITIONS: dict[str, Any] = {schema.name: adapt(schema) for schema in OPS}
"""Every op of ``stablerules.autograd``, adapted from its schema row (``_public`` types each
with its Protocol)."""
