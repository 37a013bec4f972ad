"""stablerules: type-stable, shape-specialized, compiled differentiation rules.

This module only re-exports; the implementation lives in private modules.

The ops (``repeat``, ``concatenate``, ``kron``, ...) are loaded on first use (PEP 562): each
op family's module registers its rules when it is imported, and that takes a few milliseconds
a family, so ``import stablerules`` pays only for the core (dispatch, tangents, caches) and
``sr.repeat`` (or ``from stablerules import repeat``) imports ``stablerules.rules.repeat`` the
first time. An op must be reached through its name before a rule can be looked up for it, so
every rule an op has is registered by the time it is called. ``dir(stablerules)`` and
``from stablerules import *`` list the ops as if they were imported eagerly.
"""

from typing import TYPE_CHECKING

from ._arrays import ArraySpec as ArraySpec
from ._cache import CacheInfo as CacheInfo
from ._key import ShapeSignature as ShapeSignature
from ._cache import cache_info as cache_info
from ._cache import clear_caches as clear_caches
from ._dispatch import explain as explain
from ._dispatch import precompile as precompile
from ._dispatch import register_frule as register_frule
from ._dispatch import register_rrule as register_rrule
from ._errors import DynamicFallbackError as DynamicFallbackError
from ._errors import RecompileError as RecompileError
from ._guards import no_compile as no_compile
from ._guards import no_fallback as no_fallback
from ._record import record as record
from ._tangents import Fill as Fill
from ._tangents import NoTangent as NoTangent
from ._tangents import Thunk as Thunk
from ._tangents import ZeroTangent as ZeroTangent
from ._tangents import materialize as materialize
from ._tangents import unthunk as unthunk
from ._typing import Pullback as Pullback
from ._typing import Tangent as Tangent
from ._val import Val as Val
from ._version import __version__ as __version__

from . import _fork, _public

# The ops and the rules: the type checkers read them from the generated stubs through
# ``_public`` (generated from the op schema); at run time the rules come from ``_dispatch`` and
# each op is imported on first use (``__getattr__`` below).
if TYPE_CHECKING:
    from ._public import *  # noqa: F403
else:
    from ._dispatch import frule as frule
    from ._dispatch import pullback as pullback
    from ._dispatch import rrule as rrule

_OPS = _public.FAMILIES
"""Each op's name and the module under ``stablerules.rules`` that defines it."""

__all__ = [
    "ArraySpec",
    "CacheInfo",
    "DynamicFallbackError",
    "Fill",
    "NoTangent",
    "Pullback",
    "RecompileError",
    "ShapeSignature",
    "Tangent",
    "Thunk",
    "Val",
    "ZeroTangent",
    "__version__",
    "cache_info",
    "clear_caches",
    "explain",
    "materialize",
    "no_compile",
    "no_fallback",
    "precompile",
    "record",
    "register_frule",
    "register_rrule",
    "unthunk",
]
__all__ += _public.__all__


del TYPE_CHECKING


def __getattr__(name: str) -> object:
    family = _OPS.get(name)
    if family is None:
        raise AttributeError(f"module 'stablerules' has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - only on an op's first use

    with _fork.busy():  # a fork waits for the import (its child inherits no module half imported)
        op = getattr(importlib.import_module(f"stablerules.rules.{family}"), name)
    globals()[name] = op  # later look-ups are plain module attributes
    return op


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
