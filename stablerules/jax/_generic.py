"""Every ``srj`` op that the JAX adapter does not define itself, generically: the op's schema
row gives its Python signature, the NumPy op's own plan validates the call on ``ArraySpec``s,
and the family's forward rule (``ENGINE_FACTS[name].forward``) runs over :data:`JNP`, JAX's
array functions under NumPy's names (``stablerules._facts.Namespace``). The pullback is
JAX's own autodiff of those ``jnp`` ops, which XLA fuses and shards.

A new op composed of the ``Namespace`` functions therefore costs the JAX adapter nothing.
The adapter defines an op itself (``_ops.DEFINED``) only where JAX needs more than its own
ops: our kernels as primitives (repeat, tile, kron). What JAX needs beyond NumPy's semantics
is in :class:`JaxNamespace` (float32 accumulation of 16-bit floats in the transposes that add,
JAX's modes for traced indices, pad's traced constant), for every op that uses it.

Decisions where the spec is silent:
- Validation sees what the hand-written ops saw: an array argument as an ``ArraySpec`` of its
  shape and dtype (a 16-bit float as float32, whose checks it shares), or our ``TypeError``
  naming the argument when ``jnp`` cannot read it; a sequence's elements as specs (anything
  else as itself, for the op's checks to name); an op with integer data (take) reads every
  array as NumPy does, and range-checks indices known on the host (a NumPy array, a concrete
  ``jax.Array``); traced ones wrap negative entries and give JAX's fill for one out of range.
- Results have JAX's dtypes (``jnp.result_type``; without x64 no 64-bit types), as ``jnp``'s
  own ops give them.
- The function's binding errors are Python's own: each op is a real function with its
  schema's parameters (``flip() missing 1 required positional argument: 'x'``).
- An affine op's constant (pad's ``constant_values``) is a static when given as a Python
  scalar and an array (differentiable, perhaps traced) when given as one: the family's
  forward reads it from its arrays then, as torch's never passes it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from .. import _facts
from .._arrays import index_data
from .._plan import Plan
from .._rule import RuleOp
from .._schema import OPS, OpSchema
from .._val import Val
from .._half import is_half
from ._adapter import Array, errors_named
from ._ops import DEFINED, accumulating, array_spec, indexing_spec, sequence_spec


class JaxCall(NamedTuple):
    """A bound call as the family's forward reads it (``_facts.OpCall``): the op's name and
    its statics by name, as given (lists as tuples, NumPy integers as Python ints)."""

    name: str
    statics: dict[str, object]

    def static(self, name: str, default: object = None) -> object:
        return self.statics.get(name, default)

    def replace(self, **statics: object) -> JaxCall:
        return JaxCall(self.name, {**self.statics, **statics})


class JaxNamespace:
    """JAX's array functions for the ops' forwards (``stablerules._facts.Namespace``): ``jnp``
    under NumPy's names; the ops whose transpose adds (broadcast_to, take, take_along_axis)
    accumulate 16-bit floats in float32 and round once."""

    def shape(self, x: Array) -> tuple[int, ...]:
        return tuple(x.shape)

    def promoted(self, arrays: tuple[Array, ...]) -> tuple[Array, ...]:
        first = arrays[0].dtype
        if all(a.dtype == first for a in arrays):  # the common case, without JAX's promotion
            return arrays
        dtype = jnp.result_type(*arrays)
        if all(a.dtype == dtype for a in arrays):
            return arrays
        return tuple(a.astype(dtype) for a in arrays)

    def joins_promoting(self, arrays: tuple[Array, ...]) -> bool:
        return False  # jnp's promotion has its own rules (weak types, x64): promoted first

    def reshape(self, x: Array, shape: Sequence[int]) -> Array:
        """``jnp.reshape``; host data (NumPy indices) reshaped on the host."""
        held: object = x  # the namespace's arrays are JAX's, host indices among them
        if isinstance(held, np.ndarray):
            return cast("Array", held.reshape(tuple(shape)))
        return jnp.reshape(x, tuple(shape))

    def broadcast_to(self, x: Array, shape: Sequence[int]) -> Array:
        offset = len(shape) - x.ndim
        target = tuple(x.shape[axis - offset] if extent == -1 else extent for axis, extent in enumerate(shape))
        return accumulating(lambda v: jnp.broadcast_to(v, target), x)

    def permute_dims(self, x: Array, axes: tuple[int, ...]) -> Array:
        return jnp.permute_dims(x, axes)

    def flip(self, x: Array, axes: tuple[int, ...]) -> Array:
        return jnp.flip(x, axes)

    def roll(self, x: Array, shifts: int | tuple[int, ...], axes: tuple[int, ...] | None = None) -> Array:
        return jnp.roll(x, shifts, axes)

    def concatenate(self, arrays: list[Array] | tuple[Array, ...], axis: int) -> Array:
        return jnp.concatenate(arrays, axis=axis)

    def stack(self, arrays: list[Array] | tuple[Array, ...], axis: int) -> Array:
        return jnp.stack(arrays, axis=axis)

    def hstack(self, arrays: list[Array] | tuple[Array, ...]) -> Array:
        return jnp.hstack(arrays)

    def vstack(self, arrays: list[Array] | tuple[Array, ...]) -> Array:
        return jnp.vstack(arrays)

    def repeat(self, x: Array, repeats: int | tuple[int, ...], axis: int) -> Array:
        return jnp.repeat(x, np.asarray(repeats) if isinstance(repeats, tuple) else repeats, axis=axis)

    def tile(self, x: Array, reps: tuple[int, ...]) -> Array:
        return jnp.tile(x, reps)

    def upsampler(self, x: Array, counts: tuple[int, ...]) -> Callable[[Array], Array] | None:
        return None  # jnp.repeat per axis: XLA fuses the repeats into one copy

    def fresh(self, y: Array, x: Array) -> Array:
        return y  # JAX arrays are immutable: sharing memory is never seen

    def single_sum(self, x: Array) -> bool:
        return False  # the adding ops' pullbacks are our primitives' (repeat, tile, kron)

    def kron(self, a: Array, b: Array) -> Array:
        return jnp.kron(a, b)

    def scale(self, x: Array, scalar: complex) -> Array:
        return jnp.kron(x, scalar)

    def add(self, a: Array, b: Array) -> Array:
        return a + b

    def pad(self, x: Array, widths: tuple[tuple[int, int], ...], value: object) -> Array:
        """XLA's pad. An array constant, perhaps traced: XLA's pad of ``x`` by zero, the border
        set by a (constant-folded) mask; not ``lax.pad``'s own padding value, as JAX 0.10's
        transpose of ``lax.pad`` with respect to its padding value fails (``reduce_sum`` of
        ``None``), so ``grad`` by the constant would. The constant's gradient sums the border:
        in float32 for the 16-bit formats."""
        if not isinstance(value, jax.Array):
            return jnp.pad(x, widths, constant_values=cast("complex", value))
        lax_widths = [(before, after, 0) for before, after in widths]
        border = np.pad(np.zeros(x.shape, bool), widths, constant_values=True)  # a constant

        def padded(v: Array, constant: Array) -> Array:
            return jnp.where(border, constant, jax.lax.pad(v, jnp.zeros((), v.dtype), lax_widths))

        return accumulating(padded, x, value.astype(x.dtype))

    def copy(self, x: Array) -> Array:
        return jnp.array(x, copy=True)

    def split(self, x: Array, sections: int | tuple[int, ...], axis: int) -> tuple[Array, ...]:
        """Slices between the cuts, as NumPy's ``array_split`` takes them (Python's slice
        rules: a cut past the end or before the previous one gives an empty part)."""
        n = x.shape[axis]
        if isinstance(sections, int):
            each, extra = divmod(n, sections)
            cuts = [0]
            for part in range(sections):
                cuts.append(cuts[-1] + each + (1 if part < extra else 0))
        else:
            cuts = [0, *sections, n]
        lead = (slice(None),) * (axis % x.ndim)
        return tuple(x[(*lead, slice(start, stop))] for start, stop in zip(cuts[:-1], cuts[1:]))

    def getitem(self, x: Array, index: tuple[object, ...]) -> Array:
        result: Array = x[index]
        return result

    def sum(self, x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
        return jnp.sum(x, axis=axes, keepdims=keepdims)

    def mean(self, x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
        return jnp.mean(x, axis=axes, keepdims=keepdims)

    def wrapped(self, call: _facts.OpCall, indices: Array, n: int, axis: int | None) -> Array:
        """Negative entries wrapped (the range check ran on the host where the indices are
        known, and host indices are wrapped there; a traced one out of range gives JAX's fill)."""
        held: object = indices
        if isinstance(held, np.ndarray):
            return cast("Array", np.where(held < 0, held + n, held))
        return jnp.where(indices < 0, indices + n, indices)

    def take(self, x: Array, indices: Array, axis: int) -> Array:
        return accumulating(lambda v, i: jnp.take(v, i, axis=axis, mode="fill"), x, indices)

    def gather(self, x: Array, indices: Array, axis: int) -> Array:
        return accumulating(lambda v, i: jnp.take_along_axis(v, i, axis=axis, mode="fill"), x, indices)

    def index_add(self, x: Array, indices: Array, values: Array, axis: int) -> Array:
        """XLA's scatter-add, dropping a traced index out of range; for 16-bit floats in
        float32 (the values cast to ``x``'s dtype first), rounded once."""
        where = (slice(None),) * axis + (indices,)
        update = values.astype(x.dtype)
        if is_half(np.dtype(x.dtype)):
            return x.astype(_FLOAT32).at[where].add(update.astype(_FLOAT32), mode="drop").astype(x.dtype)
        return x.at[where].add(update, mode="drop")


JNP = JaxNamespace()
_FLOAT32: np.dtype[np.generic] = np.dtype(np.float32)


def _plain(value: object) -> object:
    """A static as the forwards read it: a list as a tuple, NumPy integers as Python ints."""
    if isinstance(value, (list, tuple)):
        return tuple(int(v) if isinstance(v, np.integer) else v for v in value)
    return int(value) if isinstance(value, np.integer) else value


class _Generic:
    """One op's generic JAX definition: validation by the NumPy op's plan, then the family's
    forward over :data:`JNP` (module docstring)."""

    def __init__(self, schema: OpSchema) -> None:
        self.name = schema.name
        family = importlib.import_module(f"stablerules.rules.{schema.family}")
        self.op = cast("RuleOp", getattr(family, schema.name))
        self.forward = family.ENGINE_FACTS[schema.name].forward
        self.params = schema.params
        self.data = any(param.role == "data" for param in schema.params)
        self.tuple_result = any(signature.tuple_output for signature in schema.signatures)

    def __call__(self, values: tuple[object, ...]) -> object:
        if self.data:
            self._plan(values)
        else:
            with errors_named(self.name):
                self._plan(values)
        arrays: list[Array] = []
        statics: dict[str, object] = {}
        for param, value in zip(self.params, values):
            if param.role == "static":
                statics[param.name] = _plain(value)
            elif param.role in ("arrays", "varargs"):
                arrays.extend(jnp.asarray(item) for item in cast("Sequence[object]", value))
            elif param.role == "data" and isinstance(value, np.ndarray):
                arrays.append(cast("Array", value))  # host indices stay on the host until the gather
            elif param.role == "data" and isinstance(value, (list, tuple)):
                arrays.append(jnp.asarray(index_data(value)))  # an empty list: intp, as NumPy reads it
            elif param.role == "value" and not isinstance(value, (jax.Array, np.ndarray)):
                statics[param.name] = value  # an affine op's constant given as a Python scalar
            else:
                arrays.append(jnp.asarray(value))
        outputs = self.forward(JNP, JaxCall(self.name, statics), tuple(arrays))
        return outputs if self.tuple_result else outputs[0]

    def _plan(self, values: tuple[object, ...]) -> Plan:
        """The NumPy op's checks on specs of the arrays (its errors); with integer data, the
        range check of indices known on the host."""
        args: list[object] = []
        kwargs: dict[str, object] = {}
        for param, value in zip(self.params, values):
            spec: object = value
            if param.role in ("arrays", "varargs"):
                specs = [sequence_spec(item) for item in value] if isinstance(value, (list, tuple)) else value
                if param.role == "varargs":
                    args.extend(cast("list[object]", specs))
                    continue
                spec = specs
            elif param.role == "value":  # an array constant by its shape and dtype, a scalar as itself
                spec = array_spec(value, param.name) if isinstance(value, (jax.Array, np.ndarray)) else value
            elif param.role != "static":
                spec = indexing_spec(value) if self.data else array_spec(value, param.name)
            if param.keyword_only:
                kwargs[param.name] = spec
            else:
                args.append(spec)
        known: dict[int, object] | None = None
        if self.data and not isinstance(values[1], jax.core.Tracer):
            known = {1: np.asarray(values[1])}
        return self.op.prepare(tuple(args), kwargs, known)


def _function(schema: OpSchema) -> Callable[..., object]:
    """The op as a Python function of its schema's parameters (Python binds the call and
    words its errors), calling its :class:`_Generic`."""
    params: list[str] = []
    names: list[str] = []
    keyword = False
    for param in schema.params:
        if param.role == "varargs":
            params.append(f"*{param.name}")
            keyword = True
        else:
            if param.keyword_only and not keyword:
                params.append("*")
                keyword = True
            params.append(param.name if param.default is None else f"{param.name}={param.default}")
        names.append(param.name)
    source = f"def {schema.name}({', '.join(params)}):\n    return _run(({''.join(f'{n}, ' for n in names)}))\n"
    namespace: dict[str, object] = {"Val": Val, "_run": _Generic(schema)}
    exec(compile(source, f"<stablerules.jax.{schema.name}>", "exec"), namespace)
    function = cast("Callable[..., object]", namespace[schema.name])
    function.__module__ = __name__
    function.__doc__ = f"``stablerules.{schema.name}`` on JAX arrays, as JAX's own ops (``stablerules.jax._generic``)."
    return function


DEFINITIONS: dict[str, Any] = {
    schema.name: DEFINED.get(schema.name) or _function(schema) for schema in OPS
}
"""Every op of ``stablerules.jax``: the adapter's own definition (``_ops.DEFINED``) or the
generic one."""
