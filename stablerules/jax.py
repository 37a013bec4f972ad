"""stablerules' ops inside JAX: ``import stablerules.jax as srj``.

Same names and argument forms as ``stablerules`` (statics as ``Val``, a static pytree node),
taking and returning ``jax.Array``s, inside ``jit``, ``grad``, ``vjp``, ``jvp``, ``vmap`` and to
any order. On the CPU, repeat, tile and kron run our compiled kernels inside XLA through its
FFI; the concatenate family and the structure ops (flip ... split) are XLA's own ops, the
structure ops validated by ours. Only re-exports: the implementation (and its decisions) is
``stablerules._jax``.
"""

from __future__ import annotations

from ._jax import FFIVersionError as FFIVersionError
from ._jax import broadcast_to as broadcast_to
from ._jax import cat as cat
from ._jax import concatenate as concatenate
from ._jax import flip as flip
from ._jax import getindex as getindex
from ._jax import hstack as hstack
from ._jax import index_add as index_add
from ._jax import kron as kron
from ._jax import mean as mean
from ._jax import pad as pad
from ._jax import permute_dims as permute_dims
from ._jax import repeat as repeat
from ._jax import reshape as reshape
from ._jax import roll as roll
from ._jax import split as split
from ._jax import stack as stack
from ._jax import sum as sum
from ._jax import take as take
from ._jax import take_along_axis as take_along_axis
from ._jax import tile as tile
from ._jax import transpose as transpose
from ._jax import vstack as vstack

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
