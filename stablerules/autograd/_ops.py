"""The ops of ``stablerules.autograd``: one per op of the schema's layout table
(``stablerules._layout``), each made by :func:`stablerules.autograd._adapter.adapt`."""

from __future__ import annotations

from typing import cast

from .._layout import BY_NAME as _LAYOUTS
from . import _signatures
from ._adapter import adapt

repeat: _signatures.Repeat = adapt(_LAYOUTS["repeat"])
tile: _signatures.Tile = adapt(_LAYOUTS["tile"])
concatenate: _signatures.Concatenate = adapt(_LAYOUTS["concatenate"])
stack: _signatures.Stack = adapt(_LAYOUTS["stack"])
hstack: _signatures.Hstack = adapt(_LAYOUTS["hstack"])
vstack: _signatures.Vstack = adapt(_LAYOUTS["vstack"])
cat: _signatures.Cat = adapt(_LAYOUTS["cat"])
kron: _signatures.Kron = adapt(_LAYOUTS["kron"])
flip: _signatures.Flip = adapt(_LAYOUTS["flip"])
roll: _signatures.Roll = adapt(_LAYOUTS["roll"])
permute_dims: _signatures.PermuteDims = adapt(_LAYOUTS["permute_dims"])
transpose: _signatures.Transpose = adapt(_LAYOUTS["transpose"])
reshape: _signatures.Reshape = adapt(_LAYOUTS["reshape"])
broadcast_to: _signatures.BroadcastTo = adapt(_LAYOUTS["broadcast_to"])
sum: _signatures.Sum = adapt(_LAYOUTS["sum"])  # noqa: A001 - NumPy's name
mean: _signatures.Mean = adapt(_LAYOUTS["mean"])
pad: _signatures.Pad = adapt(_LAYOUTS["pad"])
split = cast("_signatures.Split", adapt(_LAYOUTS["split"]))  # the op returns a tuple of arrays
getindex: _signatures.Getindex = adapt(_LAYOUTS["getindex"])
take: _signatures.Take = adapt(_LAYOUTS["take"])
take_along_axis: _signatures.TakeAlongAxis = adapt(_LAYOUTS["take_along_axis"])
index_add: _signatures.IndexAdd = adapt(_LAYOUTS["index_add"])
