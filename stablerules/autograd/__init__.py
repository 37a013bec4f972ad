"""stablerules' ops as HIPS autograd primitives: ``import stablerules.autograd as sra``.

Same names and argument forms as ``stablerules`` (statics as ``Val``); on plain arrays each
is the op itself, on autograd's boxes a primitive whose vjp is our pullback, itself a
primitive, so ``autograd.grad`` works to any order. Only re-exports: the implementation (and
its decisions) is ``stablerules.autograd._adapter`` (the ops: ``stablerules.autograd._ops``).
"""

from __future__ import annotations

from ._ops import broadcast_to as broadcast_to
from ._ops import cat as cat
from ._ops import concatenate as concatenate
from ._ops import flip as flip
from ._ops import getindex as getindex
from ._ops import hstack as hstack
from ._ops import index_add as index_add
from ._ops import kron as kron
from ._ops import mean as mean
from ._ops import pad as pad
from ._ops import permute_dims as permute_dims
from ._ops import repeat as repeat
from ._ops import reshape as reshape
from ._ops import roll as roll
from ._ops import split as split
from ._ops import stack as stack
from ._ops import sum as sum
from ._ops import take as take
from ._ops import take_along_axis as take_along_axis
from ._ops import tile as tile
from ._ops import transpose as transpose
from ._ops import vstack as vstack

__all__ = [
    "broadcast_to",
    "cat",
    "concatenate",
    "flip",
    "getindex",
    "hstack",
    "index_add",
    "kron",
    "mean",
    "pad",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "split",
    "stack",
    "sum",
    "take",
    "take_along_axis",
    "tile",
    "transpose",
    "vstack",
]
