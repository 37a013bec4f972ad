"""The plan key of a call: the op, each array argument's dtype and shape (a Python scalar's
type), the static values and the kernel target (``kernel_target`` of the arguments' device).
An argument it cannot key (a list, a NumPy integer as a static) gives ``None``: a plan for that
call alone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from ._arrays import ArraySpec, device_of, is_array, kernel_target
from ._val import Val

_UNKEYED = object()
_PYTHON_SCALARS = (bool, int, float, complex)
_NDARRAY = np.ndarray


def static_key(value: object) -> object:
    """A static argument as it enters the key: a ``Val``'s value (a bool tagged, so that
    ``Val(True)`` never finds ``Val(1)``'s plan), a plain int or tuple of plain ints (dynamic),
    ``None``; ``_UNKEYED`` for anything else."""
    value_type = type(value)
    if value_type is Val:
        inner = value.value  # type: ignore[attr-defined]
        # Val(True) == Val(1) as dict keys would be (True == 1): a flag keys apart from a count
        return (bool, inner) if type(inner) is bool else inner
    if value is None or value_type is int:
        return value
    if value_type is tuple and all(type(item) is int for item in value):  # type: ignore[attr-defined]
        return value
    return _UNKEYED


def plan_key(
    op: object,
    arrays: tuple[object, ...],
    statics: tuple[object, ...],
    specs: bool,
    refuse_specs: Callable[[tuple[object, ...]], None],
) -> Hashable | None:
    """The key of ``op``'s plan for this call, or ``None``; an ``ArraySpec`` where ``specs`` is
    false goes to ``refuse_specs`` (which raises)."""
    parts: list[object] = [op]
    device = "cpu"
    for value in arrays:
        value_type = type(value)
        if value_type is _NDARRAY:
            parts.append(value.dtype)  # type: ignore[attr-defined]
            parts.append(value.shape)  # type: ignore[attr-defined]
        elif value_type in _PYTHON_SCALARS:
            parts.append(value_type)
        elif value_type is ArraySpec or is_array(value):
            if value_type is ArraySpec and not specs:
                refuse_specs(arrays)
            spec: ArraySpec = value  # type: ignore[assignment]
            where = device_of(value)
            if where != "cpu":
                device = where
            # A CPU ArraySpec keys as a NumPy array does: precompile warms the call's plan.
            parts.append(spec.dtype if where == "cpu" else (where, spec.dtype))
            parts.append(tuple(spec.shape))
        else:
            return None
    for value in statics:
        static = static_key(value)
        if static is _UNKEYED:
            return None
        parts.append(static)
    parts.append(kernel_target(device))
    return tuple(parts)
