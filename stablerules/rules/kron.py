"""Placeholder for the kron family (replaced by its implementation)."""

from .._registry import Op

class _Kron(Op):
    name = "kron"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("kron is not implemented yet")


kron = _Kron()

