"""stablerules' ops as HIPS autograd primitives: ``import stablerules.autograd as sra``.

Same names and argument forms as ``stablerules`` (statics as ``Val``); on plain arrays each
is the op itself, on autograd's boxes a primitive whose vjp is our pullback, itself a
primitive, so ``autograd.grad`` works to any order. Only re-exports: the implementation (and
its decisions) is ``stablerules.autograd._adapter`` (the ops: ``stablerules.autograd._public``).
"""

from __future__ import annotations

from . import _public
from ._public import *  # noqa: F403 - the ops, generated from the op schema (tools/generate.py)

__all__: list[str] = []
__all__ += _public.__all__
