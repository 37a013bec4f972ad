"""stablerules' ops inside JAX: ``import stablerules.jax as srj``.

Same names and argument forms as ``stablerules`` (statics as ``Val``, a static pytree node),
taking and returning ``jax.Array``s, inside ``jit``, ``grad``, ``vjp``, ``jvp``, ``vmap`` and to
any order. On the CPU, repeat, tile and kron run our compiled kernels inside XLA through its
FFI. Only re-exports: the implementation (and its decisions) is ``stablerules._jax``.
"""

from __future__ import annotations

from ._jax import FFIVersionError as FFIVersionError
from ._jax import cat as cat
from ._jax import concatenate as concatenate
from ._jax import hstack as hstack
from ._jax import kron as kron
from ._jax import repeat as repeat
from ._jax import stack as stack
from ._jax import tile as tile
from ._jax import vstack as vstack

__all__ = ["FFIVersionError", "cat", "concatenate", "hstack", "kron", "repeat", "stack", "tile", "vstack"]
