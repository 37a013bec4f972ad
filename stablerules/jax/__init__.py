"""stablerules' ops inside JAX: ``import stablerules.jax as srj``.

Same names and argument forms as ``stablerules`` (statics as ``Val``, a static pytree node),
taking and returning ``jax.Array``s, inside ``jit``, ``grad``, ``vjp``, ``jvp``, ``vmap`` and to
any order. On the CPU, repeat, tile and kron run our compiled kernels inside XLA through its
FFI; the concatenate family and the structure ops (flip ... split) are XLA's own ops, the
structure ops validated by ours. Only re-exports: the implementation (and its decisions) is
``stablerules.jax._adapter`` (the ops: ``stablerules.jax._ops``).
"""

from __future__ import annotations

from ._adapter import FFIVersionError as FFIVersionError
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
    "FFIVersionError",
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
