"""Placeholder for the repeat family (replaced by its implementation)."""

from .._registry import Op

class _Repeat(Op):
    name = "repeat"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("repeat is not implemented yet")


repeat = _Repeat()

class _Tile(Op):
    name = "tile"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("tile is not implemented yet")


tile = _Tile()

