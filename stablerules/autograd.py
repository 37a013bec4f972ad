"""stablerules' ops as HIPS autograd primitives: ``import stablerules.autograd as sra``.

Same names and argument forms as ``stablerules`` (statics as ``Val``); on plain arrays each
is the op itself, on autograd's boxes a primitive whose vjp is our pullback, itself a
primitive, so ``autograd.grad`` works to any order. Only re-exports: the implementation is
``stablerules._autograd``.
"""

from __future__ import annotations

from collections.abc import Callable

from ._autograd import ADAPTED as _ADAPTED
from ._autograd import Array as _Array

repeat: Callable[..., _Array] = _ADAPTED["repeat"]
tile: Callable[..., _Array] = _ADAPTED["tile"]
concatenate: Callable[..., _Array] = _ADAPTED["concatenate"]
stack: Callable[..., _Array] = _ADAPTED["stack"]
hstack: Callable[..., _Array] = _ADAPTED["hstack"]
vstack: Callable[..., _Array] = _ADAPTED["vstack"]
cat: Callable[..., _Array] = _ADAPTED["cat"]
kron: Callable[..., _Array] = _ADAPTED["kron"]

__all__ = ["cat", "concatenate", "hstack", "kron", "repeat", "stack", "tile", "vstack"]
