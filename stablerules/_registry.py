"""The rule registry: one typed dict per rule kind, refusing duplicates.

Built-in ops register (through ``stablerules._rule.RuleOp``) with the same ``register`` call
that users reach through ``sr.register_rrule`` / ``sr.register_frule``, so user rules and
library rules dispatch, and are tested, the same way. ``PULLBACK_BUILDERS`` holds, per op, a
builder of its pullback that runs no forward (``sr.pullback``).
"""

from __future__ import annotations

import _thread
from collections.abc import Callable
from typing import Generic, TypeAlias, TypeVar

from ._typing import RulePullback

RRule: TypeAlias = Callable[..., tuple[object, RulePullback]]
"""``rule(*args, **kwargs) -> (y, pullback)``."""
FRule: TypeAlias = Callable[..., tuple[object, object]]
"""``rule(tangents, *args, **kwargs) -> (y, dy)``."""
PullbackBuilder: TypeAlias = Callable[..., RulePullback]
"""``builder(*args, **kwargs) -> pullback``: the rrule's pullback, without the forward."""

_Rule = TypeVar("_Rule", bound=Callable[..., object])


class RuleRegistry(Generic[_Rule]):
    """Rules of one kind, keyed by the function they differentiate. ``name`` says which in
    messages (``"rrule"``); ``registrar`` is the public call that registers them."""

    def __init__(self, name: str, registrar: str | None = None) -> None:
        self.name = name
        self.registrar = registrar or f"register_{name}"
        self._rules: dict[object, _Rule] = {}
        self._lock = _thread.allocate_lock()

    def register(self, fn: object, rule: _Rule, *, replace: bool = False) -> None:
        if not callable(fn):
            raise TypeError(f"{self.registrar}: fn must be callable, got {type(fn).__name__}")
        if not callable(rule):
            raise TypeError(f"{self.registrar}: rule must be callable, got {type(rule).__name__}")
        with self._lock:
            if fn in self._rules and not replace:
                raise ValueError(
                    f"{self.registrar}: {describe_function(fn)} already has an {self.name}; "
                    f"pass replace=True to replace it"
                )
            self._rules[fn] = rule

    def lookup(self, fn: object) -> _Rule:
        rule = self._rules.get(fn)
        if rule is None:
            raise TypeError(f"{self.name}: no {self.name} is registered for {describe_function(fn)}")
        return rule

    def unregister(self, fn: object) -> None:
        with self._lock:
            self._rules.pop(fn, None)

    def __contains__(self, fn: object) -> bool:
        return fn in self._rules


def describe_function(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else str(name)


RRULES: RuleRegistry[RRule] = RuleRegistry("rrule")
FRULES: RuleRegistry[FRule] = RuleRegistry("frule")
PULLBACK_BUILDERS: RuleRegistry[PullbackBuilder] = RuleRegistry("pullback builder", "register_rrule")
