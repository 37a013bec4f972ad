"""Functions and classes renamed for tracebacks: the scaffold's rules and pullbacks read as
``repeat_rrule``, ``kron_pullback``, not as the closures they are made from.

A code object's name is what a traceback shows, so the code is renamed too
(``CodeType.replace``), once per (code, name): a pullback made per call only rebinds it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FunctionType
from typing import TypeVar

_Function = TypeVar("_Function", bound=Callable[..., object])
_Class = TypeVar("_Class", bound=type)

_RENAMED: dict[tuple[CodeType, str], CodeType] = {}
_SUBCLASSES: dict[tuple[type, str], type] = {}


def named(function: _Function, name: str) -> _Function:
    """``function`` renamed (its code too, which is what tracebacks show). The renamed code is
    made once per (code, name): a pullback made per call (``saves_primals``) only rebinds it."""
    code = function.__code__
    renamed = _RENAMED.get((code, name))
    if renamed is None:
        renamed = _RENAMED.setdefault((code, name), code.replace(co_name=name, co_qualname=name))
    function.__code__ = renamed
    function.__name__ = name
    function.__qualname__ = name
    return function


def named_subclass(base: _Class, name: str) -> _Class:
    """The subclass of ``base`` called ``name`` whose ``__call__``'s code carries that name (no
    slots of its own), made once per (base, name)."""
    kind = _SUBCLASSES.get((base, name))
    if kind is None:
        call = base.__call__
        renamed = FunctionType(call.__code__.replace(co_name=name, co_qualname=name), call.__globals__, name)
        namespace = {"__slots__": (), "__call__": renamed, "__name__": name, "__qualname__": name}
        kind = _SUBCLASSES.setdefault((base, name), type(name, (base,), namespace))
    return kind  # type: ignore[return-value]
