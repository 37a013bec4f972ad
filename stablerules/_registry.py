"""The rule registry: one typed dict per rule kind, refusing duplicates.

Built-in ops register through the same ``register`` call that users reach through
``sr.register_rrule`` / ``sr.register_frule``, so user rules and library rules dispatch, and
are tested, the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

from ._cache import CACHE, Kernel, KernelSource, ShapeSignature

Pullback = Callable[[object], tuple[object, ...]]
ReverseRule = Callable[..., tuple[object, Pullback]]
ForwardRule = Callable[..., tuple[object, object]]


class RuleRegistry:
    """Rules of one kind (``"rrule"`` or ``"frule"``), keyed by the function they differentiate."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._rules: dict[object, Callable[..., object]] = {}
        self._lock = threading.Lock()

    def register(self, fn: object, rule: Callable[..., object], *, replace: bool = False) -> None:
        if not callable(fn):
            raise TypeError(f"register_{self.kind}: fn must be callable, got {type(fn).__name__}")
        if not callable(rule):
            raise TypeError(f"register_{self.kind}: rule must be callable, got {type(rule).__name__}")
        with self._lock:
            if fn in self._rules and not replace:
                raise ValueError(
                    f"register_{self.kind}: {_describe(fn)} already has an {self.kind}; "
                    f"pass replace=True to replace it"
                )
            self._rules[fn] = rule

    def lookup(self, fn: object) -> Callable[..., object]:
        rule = self._rules.get(fn)
        if rule is None:
            raise TypeError(f"{self.kind}: no {self.kind} is registered for {_describe(fn)}")
        return rule

    def unregister(self, fn: object) -> None:
        with self._lock:
            self._rules.pop(fn, None)

    def __contains__(self, fn: object) -> bool:
        return fn in self._rules


def _describe(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else str(name)


RRULES = RuleRegistry("rrule")
FRULES = RuleRegistry("frule")
PULLBACKS = RuleRegistry("pullback")


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

    Ops are instances (one class per op) so ``rrule``'s overloads can tell them apart.
    """

    name: str = "op"

    def kernel_requests(self, *args: object, **kwargs: object) -> list[KernelRequest]:
        """Every kernel (forward, pullback, pushforward) this call's signature uses."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<stablerules op {self.name}>"


def rrule_rule(op: object) -> Callable[[ReverseRule], ReverseRule]:
    """Decorator: register the function below as ``op``'s reverse rule."""

    def register(rule: ReverseRule) -> ReverseRule:
        RRULES.register(op, rule)
        return rule

    return register


def frule_rule(op: object) -> Callable[[ForwardRule], ForwardRule]:
    """Decorator: register the function below as ``op``'s forward rule."""

    def register(rule: ForwardRule) -> ForwardRule:
        FRULES.register(op, rule)
        return rule

    return register
