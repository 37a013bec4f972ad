"""stablerules' ops inside JAX: ``import stablerules.jax as srj``.

Same names and argument forms as ``stablerules`` (statics as ``Val``, a static pytree node),
taking and returning ``jax.Array``s, inside ``jit``, ``grad``, ``vjp``, ``jvp``, ``vmap`` and to
any order. On the CPU, repeat, tile and kron run our compiled kernels inside XLA through its
FFI; every other op is XLA's own ops (its family's forward rule over ``jnp``), validated by
ours. Only re-exports: the implementation (and its decisions) is ``stablerules.jax._adapter``
(the ops: ``stablerules.jax._ops`` for the kernel ops; ``_generic`` for the rest).
"""

from __future__ import annotations

from ._adapter import FFIVersionError as FFIVersionError

from . import _public
from ._public import *  # noqa: F403 - the ops, generated from the op schema (tools/generate.py)

__all__ = ["FFIVersionError"]
__all__ += _public.__all__
