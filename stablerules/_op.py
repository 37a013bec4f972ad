"""The base of the library's ops and the kernel request type their plans list.

:class:`Op` is what makes an op read as a function to ``help()``, ``inspect.signature`` and
documentation tools (its docstring assembled from its call forms, written once for every op);
:class:`KernelRequest` is a signature and how to render its kernel, which a plan lists for
``precompile`` and ``explain`` and gets its kernel from.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Self

from ._cache import CACHE
from ._key import Kernel, KernelSource, ShapeSignature


class KernelRequest(NamedTuple):
    """A signature and how to render its kernel, for ``precompile`` and ``explain``."""

    signature: ShapeSignature
    render: Callable[[], KernelSource]

    def get(self) -> Kernel:
        if self.signature.device == "cuda":
            from ._cuda import require_cuda  # noqa: PLC0415 - only CUDA signatures need it

            require_cuda(self.signature.op)  # before a module whose import would need a GPU
        return CACHE.get(self.signature, self.render)


class Op:
    """Base of the library's ops: a named callable that can list its kernels for a signature.

    Ops are instances (one class per op) so ``rrule``'s overloads can tell them apart. To
    ``help()``, ``inspect.signature`` and documentation tools an op reads as a function named
    after it: its signature is its ``__call__``'s first overload (the main form) and its
    docstring its class's or ``__call__``'s, followed by every call form (the overloads minus
    the plain-int conveniences marked deprecated), written here once for every op.
    """

    name: str = "op"
    _call_signature: inspect.Signature | None = None
    _call_doc: str | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        call = cls.__dict__.get("__call__")
        if call is None:
            return
        overloads = typing.get_overloads(call)
        forms = [_call_signature(form) for form in overloads if not hasattr(form, "__deprecated__")]
        forms = forms or [_call_signature(call)]
        plain = any(hasattr(form, "__deprecated__") for form in overloads)
        text = inspect.cleandoc(cls.__dict__.get("__doc__") or call.__doc__ or "")
        lines = "\n".join(f"    {cls.name}{form}" for form in forms)
        cls._call_signature = forms[0]
        cls._call_doc = (
            f"{text}\n\nCall forms"
            + (" (a plain int or tuple where a ``Val`` goes is accepted too, counted as dynamic)" if plain else "")
            + f":\n{lines}"
        ).lstrip()

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        op = super().__new__(cls)
        # The op's own docstring (help() shows an instance's __doc__ only where it differs from
        # its class's): the class's or __call__'s text and the call forms.
        op.__doc__ = cls._call_doc
        return op

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """Every kernel (forward, pullback, pushforward) this call's signature uses."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<stablerules op {self.name}>"

    if not TYPE_CHECKING:  # run time only: to mypy an op has no __name__ (see _typing.Function)

        def __getattr__(self, attribute):
            if attribute in ("__name__", "__qualname__"):
                return self.name
            if attribute == "__signature__":
                return type(self)._call_signature
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attribute!r}")

        def __get__(self, instance, owner=None):
            # A (non-binding) descriptor: inspect.isroutine() is then true, so help() documents
            # an op as a function, with its signature and docstring, not as an instance.
            return self


class _Annotation:
    """An annotation written as in the source (``from __future__ import annotations`` keeps
    them as strings), shown without quotes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _call_signature(function: Callable[..., object]) -> inspect.Signature:
    """``function``'s signature minus ``self``, annotations shown as written."""
    signature = inspect.signature(function)

    def shown(annotation: object) -> object:
        return _Annotation(annotation) if isinstance(annotation, str) else annotation

    parameters = [
        parameter.replace(annotation=shown(parameter.annotation))
        for parameter in list(signature.parameters.values())[1:]
    ]
    return signature.replace(parameters=parameters, return_annotation=shown(signature.return_annotation))

