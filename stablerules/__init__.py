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

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._arrays import ArraySpec as ArraySpec
from ._cache import CacheInfo as CacheInfo
from ._cache import ShapeSignature as ShapeSignature
from ._cache import cache_info as cache_info
from ._cache import clear_caches as clear_caches
from ._cache import no_compile as no_compile
from ._cache import no_fallback as no_fallback
from ._dispatch import explain as explain
from ._dispatch import frule as frule
from ._dispatch import precompile as precompile
from ._dispatch import pullback as pullback
from ._dispatch import register_frule as register_frule
from ._dispatch import register_rrule as register_rrule
from ._dispatch import rrule as rrule
from ._errors import DynamicFallbackError as DynamicFallbackError
from ._errors import RecompileError as RecompileError
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

if _TYPE_CHECKING:  # the ops, imported on first use at run time (``__getattr__`` below)
    from .rules.broadcast import broadcast_to as broadcast_to
    from .rules.broadcast import mean as mean
    from .rules.broadcast import sum as sum
    from .rules.concatenate import cat as cat
    from .rules.concatenate import concatenate as concatenate
    from .rules.concatenate import hstack as hstack
    from .rules.concatenate import stack as stack
    from .rules.concatenate import vstack as vstack
    from .rules.flip import flip as flip
    from .rules.flip import roll as roll
    from .rules.indexing import StaticIndex as StaticIndex
    from .rules.indexing import getindex as getindex
    from .rules.indexing import index_add as index_add
    from .rules.indexing import ix as ix
    from .rules.indexing import take as take
    from .rules.indexing import take_along_axis as take_along_axis
    from .rules.kron import kron as kron
    from .rules.permute import permute_dims as permute_dims
    from .rules.permute import reshape as reshape
    from .rules.permute import transpose as transpose
    from .rules.pad import pad as pad
    from .rules.pad import split as split
    from .rules.repeat import repeat as repeat
    from .rules.repeat import tile as tile

_OPS = {
    "broadcast_to": "broadcast",
    "mean": "broadcast",
    "sum": "broadcast",
    "cat": "concatenate",
    "concatenate": "concatenate",
    "hstack": "concatenate",
    "stack": "concatenate",
    "vstack": "concatenate",
    "flip": "flip",
    "roll": "flip",
    "StaticIndex": "indexing",
    "getindex": "indexing",
    "index_add": "indexing",
    "ix": "indexing",
    "take": "indexing",
    "take_along_axis": "indexing",
    "kron": "kron",
    "permute_dims": "permute",
    "reshape": "permute",
    "transpose": "permute",
    "pad": "pad",
    "split": "pad",
    "repeat": "repeat",
    "tile": "repeat",
}
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
    "StaticIndex",
    "Tangent",
    "Thunk",
    "Val",
    "ZeroTangent",
    "__version__",
    "broadcast_to",
    "cache_info",
    "cat",
    "clear_caches",
    "concatenate",
    "explain",
    "flip",
    "frule",
    "getindex",
    "hstack",
    "index_add",
    "ix",
    "kron",
    "materialize",
    "mean",
    "no_compile",
    "no_fallback",
    "pad",
    "permute_dims",
    "precompile",
    "pullback",
    "register_frule",
    "register_rrule",
    "repeat",
    "reshape",
    "roll",
    "rrule",
    "split",
    "stack",
    "sum",
    "take",
    "take_along_axis",
    "tile",
    "transpose",
    "unthunk",
    "vstack",
]


def __getattr__(name: str) -> object:
    family = _OPS.get(name)
    if family is None:
        raise AttributeError(f"module 'stablerules' has no attribute {name!r}")
    import importlib  # noqa: PLC0415 - only on an op's first use

    op = getattr(importlib.import_module(f"stablerules.rules.{family}"), name)
    globals()[name] = op  # later look-ups are plain module attributes
    return op


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
