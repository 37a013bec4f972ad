"""``rrule`` / ``frule`` dispatch, rule registration, ``precompile`` and ``explain``."""

from __future__ import annotations

from collections.abc import Callable

from ._cache import ShapeSignature
from ._registry import FRULES, RRULES, Op, Pullback


def register_rrule(fn: object, rule: Callable[..., tuple[object, Pullback]], *, replace: bool = False) -> None:
    """Register ``rule(*args, **kwargs) -> (y, pullback)`` as ``fn``'s reverse rule.

    ``pullback(dy)`` returns one tangent per positional argument. A second registration for
    the same ``fn`` is a ``ValueError`` unless ``replace=True``.
    """
    RRULES.register(fn, rule, replace=replace)


def register_frule(fn: object, rule: Callable[..., tuple[object, object]], *, replace: bool = False) -> None:
    """Register ``rule(tangents, *args, **kwargs) -> (y, dy)`` as ``fn``'s forward rule."""
    FRULES.register(fn, rule, replace=replace)


def rrule(op: object, *args: object, **kwargs: object) -> tuple[object, Pullback]:
    """``y, back = rrule(op, *args, **kwargs)``: the primal and its pullback.

    ``back(dy)`` returns a tuple with one tangent per positional argument: an array's
    tangent has its shape and dtype, a sequence of arrays gets a tuple of tangents, a
    non-differentiable argument gets ``NoTangent()``.
    """
    rule = RRULES.lookup(op)
    return rule(*args, **kwargs)  # type: ignore[return-value]


def frule(op: object, tangents: tuple[object, ...], *args: object, **kwargs: object) -> tuple[object, object]:
    """``y, dy = frule(op, tangents, *args, **kwargs)``: the primal and its pushforward."""
    rule = FRULES.lookup(op)
    return rule(tangents, *args, **kwargs)  # type: ignore[return-value]


def precompile(op: Op, *args: object, **kwargs: object) -> tuple[ShapeSignature, ...]:
    """Compile (or load from disk) every kernel of this call's signature without running it.

    Arguments may be arrays or ``ArraySpec(shape, dtype, device)``. Returns the signatures.
    """
    requests = _requests(op, args, kwargs)
    for request in requests:
        request.get()
    return tuple(request.signature for request in requests)


def explain(op: Op, *args: object, **kwargs: object) -> str:
    """The generated source of every kernel this call's signature uses, as readable text."""
    from ._cache import CACHE

    parts = []
    for request in _requests(op, args, kwargs):
        source = CACHE.source(request.signature, request.render)
        parts.append(f"# --- {request.signature.op} {request.signature.kind} ---\n{source}")
    return "\n".join(parts)


def _requests(op: object, args: tuple[object, ...], kwargs: dict[str, object]) -> list:  # type: ignore[type-arg]
    if not isinstance(op, Op):
        raise TypeError(f"precompile/explain take one of stablerules' ops, got {op!r}")
    return op.kernel_requests(*args, **kwargs)
