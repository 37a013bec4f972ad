"""JAX's private names the adapter uses, in one place (a test pins them against the installed
JAX: ``tests/test_private.py``).

- ``Primitive``: ``jax.extend.core.Primitive`` is this class, but importing ``jax.extend``
  costs a fresh process more than a tenth of this package's own import (it imports
  ``jax.extend.pallas``), so it is taken from where it is defined.

The XLA FFI call frame's word offsets are the C ABI of ``xla/ffi/api/c_api.h``, not a Python
name; they live with the handlers that read them (``stablerules.jax._ffi``).
"""

from __future__ import annotations

from jax._src.core import Primitive as Primitive

__all__ = ["Primitive"]
