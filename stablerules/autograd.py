"""stablerules' ops as HIPS autograd primitives: ``import stablerules.autograd as sra``.

Same names and argument forms as ``stablerules`` (statics as ``Val``); on plain arrays each
is the op itself, on autograd's boxes a primitive whose vjp is our pullback, itself a
primitive, so ``autograd.grad`` works to any order. Only re-exports: the implementation is
``stablerules._autograd``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast as _cast

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
flip: Callable[..., _Array] = _ADAPTED["flip"]
roll: Callable[..., _Array] = _ADAPTED["roll"]
permute_dims: Callable[..., _Array] = _ADAPTED["permute_dims"]
transpose: Callable[..., _Array] = _ADAPTED["transpose"]
reshape: Callable[..., _Array] = _ADAPTED["reshape"]
broadcast_to: Callable[..., _Array] = _ADAPTED["broadcast_to"]
sum: Callable[..., _Array] = _ADAPTED["sum"]  # noqa: A001 - NumPy's name
mean: Callable[..., _Array] = _ADAPTED["mean"]
pad: Callable[..., _Array] = _ADAPTED["pad"]
split: Callable[..., tuple[_Array, ...]] = _cast("Callable[..., tuple[_Array, ...]]", _ADAPTED["split"])
getindex: Callable[..., _Array] = _ADAPTED["getindex"]
take: Callable[..., _Array] = _ADAPTED["take"]
take_along_axis: Callable[..., _Array] = _ADAPTED["take_along_axis"]
index_add: Callable[..., _Array] = _ADAPTED["index_add"]

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
