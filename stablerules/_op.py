"""The base of the library's ops and the kernel request type their plans list.

:class:`Op` is what makes an op read as a function to ``help()``, ``inspect.signature`` and
documentation tools (its docstring assembled from its call forms, written once for every op);
:class:`KernelRequest` is a signature and how to render its kernel, which a plan lists for
``precompile`` and ``explain`` and gets its kernel from.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Self

from ._cache import CACHE
from ._key import Kernel, KernelSource, ShapeSignature
from ._schema import BY_NAME, Param, Signature


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
    after it: its call forms are its schema row's signatures (``_schema``, the same rows the
    type checkers' generated overloads come from; no hand-written overloads repeat them), its
    signature the first of them (the main form) and its docstring its class's or
    ``__call__``'s, followed by every call form, written here once for every op.
    """

    name: str = "op"
    _call_signature: inspect.Signature | None = None
    _call_doc: str | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        call = cls.__dict__.get("__call__")
        if call is None:
            return
        schema = BY_NAME.get(cls.name)
        forms = [_schema_form(signature) for signature in schema.signatures] if schema else [_call_signature(call)]
        plain = schema is not None and any(p.role == "static" for p in schema.params)
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


_STATIC_KINDS = {"int": "Val[int]", "ints": "Val[tuple[int, ...]]", "bool": "Val[bool]", "ix": "StaticIndex"}
_ARRAY = "npt.NDArray[_DT]"
_RESULTS = {"same": _ARRAY, "scalars": _ARRAY, "sum": "npt.NDArray[Any]", "mean": "npt.NDArray[Any]"}


def _annotation(param: Param) -> str:
    """A parameter's annotation as the call forms show it, from its schema row."""
    if param.role in ("array", "varargs"):
        return _ARRAY
    if param.role == "arrays":
        return f"Sequence[{_ARRAY}]"
    if param.role == "static":
        text = " | ".join(_STATIC_KINDS[kind] for kind in param.kinds)
    elif param.role == "data":
        text = "npt.NDArray[np.integer]" + (" | int" if "scalar" in param.kinds else "")
    else:  # value, scalar: a Python number
        text = "float"
    return text + (" | None" if param.none else "")


def _schema_form(signature: Signature) -> inspect.Signature:
    """One call form of an op, from its schema row (the one source of its parameters: the
    type checkers' overloads are generated from the same rows, ``_ops.pyi``); the result's
    dtype is the input's, or NumPy's for a sum or mean (``Any`` here)."""
    parameters = []
    for param in signature.params:
        kind: inspect._ParameterKind
        if param.role == "varargs":
            kind = inspect.Parameter.VAR_POSITIONAL
        elif param.keyword_only:
            kind = inspect.Parameter.KEYWORD_ONLY
        else:
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if param.default is None else _Annotation(param.default)
        parameters.append(inspect.Parameter(param.name, kind, default=default, annotation=_Annotation(_annotation(param))))
    result = f"tuple[{_ARRAY}, ...]" if signature.tuple_output else _RESULTS[signature.dtype]
    return inspect.Signature(parameters, return_annotation=_Annotation(result))


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

