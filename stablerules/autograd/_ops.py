"""The ops of ``stablerules.autograd``: one per op of the schema's layout table
(``stablerules._layout``), each made by :func:`stablerules.autograd._adapter.adapt`."""

from __future__ import annotations

from collections.abc import Callable

from .._layout import LAYOUTS
from ._adapter import Array, adapt

_LAYOUTS = {layout.name: layout for layout in LAYOUTS}

repeat: Callable[..., Array] = adapt(_LAYOUTS["repeat"])
tile: Callable[..., Array] = adapt(_LAYOUTS["tile"])
concatenate: Callable[..., Array] = adapt(_LAYOUTS["concatenate"])
stack: Callable[..., Array] = adapt(_LAYOUTS["stack"])
hstack: Callable[..., Array] = adapt(_LAYOUTS["hstack"])
vstack: Callable[..., Array] = adapt(_LAYOUTS["vstack"])
cat: Callable[..., Array] = adapt(_LAYOUTS["cat"])
kron: Callable[..., Array] = adapt(_LAYOUTS["kron"])
flip: Callable[..., Array] = adapt(_LAYOUTS["flip"])
roll: Callable[..., Array] = adapt(_LAYOUTS["roll"])
permute_dims: Callable[..., Array] = adapt(_LAYOUTS["permute_dims"])
transpose: Callable[..., Array] = adapt(_LAYOUTS["transpose"])
reshape: Callable[..., Array] = adapt(_LAYOUTS["reshape"])
broadcast_to: Callable[..., Array] = adapt(_LAYOUTS["broadcast_to"])
sum: Callable[..., Array] = adapt(_LAYOUTS["sum"])  # noqa: A001 - NumPy's name
mean: Callable[..., Array] = adapt(_LAYOUTS["mean"])
pad: Callable[..., Array] = adapt(_LAYOUTS["pad"])
split: Callable[..., tuple[Array, ...]] = adapt(_LAYOUTS["split"])  # type: ignore[assignment]
getindex: Callable[..., Array] = adapt(_LAYOUTS["getindex"])
take: Callable[..., Array] = adapt(_LAYOUTS["take"])
take_along_axis: Callable[..., Array] = adapt(_LAYOUTS["take_along_axis"])
index_add: Callable[..., Array] = adapt(_LAYOUTS["index_add"])
