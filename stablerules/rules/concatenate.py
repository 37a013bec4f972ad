"""Placeholder for the concatenate family (replaced by its implementation)."""

from .._registry import Op

class _Concatenate(Op):
    name = "concatenate"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("concatenate is not implemented yet")


concatenate = _Concatenate()

class _Stack(Op):
    name = "stack"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("stack is not implemented yet")


stack = _Stack()

class _Hstack(Op):
    name = "hstack"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("hstack is not implemented yet")


hstack = _Hstack()

class _Vstack(Op):
    name = "vstack"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("vstack is not implemented yet")


vstack = _Vstack()

class _Cat(Op):
    name = "cat"

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("cat is not implemented yet")


cat = _Cat()

