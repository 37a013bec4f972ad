"""stablerules' ops on PyTorch tensors: ``import stablerules.torch as srt``.

Same names and argument forms as ``stablerules`` (statics as ``Val``), ``torch.Tensor`` in and
out on the input's device. Each op's forward is torch's own op (``torch.cat``,
``repeat_interleave``, ``torch.kron``, ...; ``_native.FACTS`` names it); its pullback is torch's
autograd where torch is at the memory bound (the view ops) and our compiled kernel where it
wins (repeat/tile, kron, broadcast_to, take/take_along_axis/index_add). Differentiable with
``.backward()``, ``torch.autograd.grad`` (to any order), ``torch.func.grad``/``vjp``/``jvp``,
``torch.vmap`` (batching rules) and ``torch.compile(fullgraph=True, dynamic=True)`` (one graph
for every batch size; our pullbacks are the ``torch.library`` custom ops
``torch.ops.stablerules.<name>_vjp``); meta and fake tensors give shapes and dtypes.
This module only re-exports; ``stablerules.torch._adapter`` explains the design.
"""

from ._adapter import FILL_THRESHOLD as FILL_THRESHOLD
from ._adapter import TorchOp as TorchOp

from . import _public
from ._public import *  # noqa: F403 - the ops, generated from the op schema (tools/generate.py)

__all__ = ["FILL_THRESHOLD", "TorchOp"]
__all__ += _public.__all__
