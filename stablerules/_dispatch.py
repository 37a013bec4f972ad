"""``rrule`` / ``pullback`` / ``frule`` dispatch, rule registration, ``precompile`` and ``explain``.

At run time ``rrule`` and ``frule`` are one dict lookup (the registry) and a call, typed here
simply. The type checkers read their per-op overloads from ``_signatures.pyi``, generated from
the op schema (``tools/generate.py``; ``_typing.py`` explains the decisions): the primal is
exact, rank included, and the pullback's tuple has the call's positional arity; the last
overload types a user-registered function from its own signature. At run time the core knows
no op.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ._arrays import ArraySpec
from ._key import ShapeSignature
from ._op import KernelRequest, Op
from ._registry import FRULES, PULLBACK_BUILDERS, RRULES, describe_function
from ._typing import RulePullback



def register_rrule(
    fn: object,
    rule: Callable[..., tuple[object, RulePullback]],
    *,
    pullback_builder: Callable[..., RulePullback] | None = None,
    replace: bool = False,
    pullback: Callable[..., RulePullback] | None = None,
) -> None:
    """Register ``rule(*args, **kwargs) -> (y, pullback)`` as ``fn``'s reverse rule.

    ``pullback(dy)`` returns one tangent per positional argument. A second registration for
    the same ``fn`` is a ``ValueError`` unless ``replace=True``.

    ``pullback_builder``, optional: ``builder(*args, **kwargs) -> back`` giving the same
    ``back`` as ``rule`` without the forward, for ``sr.pullback(fn, ...)``; it may accept
    ``ArraySpec``s where ``back`` needs no primal values. Without one, ``sr.pullback`` runs
    ``rule`` and drops ``y``. Replacing a rule without a builder drops the old builder (it
    would disagree with the new rule). ``pullback=`` is the builder's former keyword: it
    still works, with a ``DeprecationWarning`` (it names a builder, not a pullback).
    """
    keyword = "pullback_builder"
    if pullback is not None:
        keyword = "pullback"
        if pullback_builder is not None:
            raise TypeError("register_rrule: give pullback_builder only (pullback= is its deprecated name)")
        import warnings  # noqa: PLC0415 - only the deprecated keyword needs it

        warnings.warn(
            "register_rrule: pullback= is deprecated; pass the builder as pullback_builder=",
            DeprecationWarning,
            stacklevel=2,
        )
        pullback_builder = pullback
    if pullback_builder is not None and not callable(pullback_builder):
        raise TypeError(f"register_rrule: {keyword} must be callable, got {type(pullback_builder).__name__}")
    RRULES.register(fn, rule, replace=replace)
    if pullback_builder is None:
        PULLBACK_BUILDERS.unregister(fn)
    else:
        PULLBACK_BUILDERS.register(fn, pullback_builder, replace=True)


def register_frule(fn: object, rule: Callable[..., tuple[object, object]], *, replace: bool = False) -> None:
    """Register ``rule(tangents, *args, **kwargs) -> (y, dy)`` as ``fn``'s forward rule."""
    FRULES.register(fn, rule, replace=replace)


# ======================================================================================
# rrule, pullback, frule
# ======================================================================================

def rrule(op: Callable[..., object], /, *args: object, **kwargs: object) -> tuple[object, RulePullback]:
    """``y, back = rrule(op, *args, **kwargs)``: the primal and its pullback.

    ``back(dy)`` returns a tuple with one tangent per positional argument: an array's
    tangent has its shape and dtype, a sequence of arrays gets a tuple of tangents, a
    non-differentiable argument gets ``NoTangent()``. Typed per op: ``y`` exactly as the op
    returns it, ``back`` a ``Pullback`` of the call's arity. Static arguments are ``Val``s; a
    plain int works as in the op itself (counted as dynamic; its overloads are marked
    deprecated, see ``stablerules._typing``).
    """
    return RRULES.lookup(op)(*args, **kwargs)


def pullback(op: Callable[..., object], /, *args: object, **kwargs: object) -> RulePullback:
    """``back = pullback(op, *args, **kwargs)``: the pullback ``rrule(op, *args, **kwargs)``
    would return, without computing the primal.

    Where the pullback needs no primal values (every library op but ``kron``), array
    arguments may be ``ArraySpec(shape, dtype, device)``s. Typed like ``rrule``'s pullback.

    Decisions: a function with a pullback builder (``register_rrule(fn, rule,
    pullback_builder=builder)``; the library's ops register theirs) gets ``builder(*args, **kwargs)``.
    Any other function falls back to running its rrule and dropping ``y`` (the forward is
    computed, so its arguments must be arrays: an ``ArraySpec`` there is a ``TypeError``).
    """
    if op in PULLBACK_BUILDERS:
        return PULLBACK_BUILDERS.lookup(op)(*args, **kwargs)
    if op not in RRULES:
        raise TypeError(f"pullback: no rrule is registered for {describe_function(op)}")
    _refuse_specs(op, args, kwargs)
    _, back = RRULES.lookup(op)(*args, **kwargs)
    return back


def _refuse_specs(op: object, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """``TypeError`` for an ``ArraySpec`` argument where the pullback is the rrule's (it runs
    the forward, which needs the arrays)."""
    named = [(f"argument {index}", value) for index, value in enumerate(args)]
    named += [(f"argument {name!r}", value) for name, value in kwargs.items()]
    for name, value in named:
        items = value if isinstance(value, (tuple, list)) else (value,)
        if any(isinstance(item, ArraySpec) for item in items):
            raise TypeError(
                f"pullback: {name} of {describe_function(op)} is an ArraySpec, but it has no "
                f"pullback builder, so its pullback comes from its rrule, which needs the arrays; "
                f"pass arrays, or register a builder: register_rrule(fn, rule, pullback_builder=builder)"
            )


def frule(
    op: Callable[..., object], tangents: tuple[object, ...], /, *args: object, **kwargs: object
) -> tuple[object, object]:
    """``y, dy = frule(op, tangents, *args, **kwargs)``: the primal and its pushforward.

    ``tangents`` has one entry per positional argument, in the same structure (``NoTangent()``
    for non-differentiable ones, ``ZeroTangent()`` allowed anywhere).
    """
    return FRULES.lookup(op)(tangents, *args, **kwargs)


# ======================================================================================
# precompile, explain
# ======================================================================================


def precompile(op: Op | str | os.PathLike[str], *args: object, **kwargs: object) -> tuple[ShapeSignature, ...]:
    """Compile (or load from disk) every kernel of this call's signature without running it.

    Arguments may be arrays or ``ArraySpec(shape, dtype, device)``. Returns the signatures.

    ``precompile(path)`` (a ``str`` or ``os.PathLike``, no other argument): every kernel of
    every signature a ``with sr.record(path):`` block wrote there, each once (see
    ``stablerules._record``): run it in a build step or at a deployment's start-up, on a
    machine of the same CPU, and the recorded program's first step compiles nothing.
    """
    if isinstance(op, (str, os.PathLike)):
        if args or kwargs:
            raise TypeError("precompile(path) takes the signatures file alone, no further arguments")
        from ._record import precompile_file  # noqa: PLC0415

        return precompile_file(op)
    requests = _requests(op, args, kwargs)
    for request in requests:
        request.get()
    return tuple(request.signature for request in requests)


def explain(op: Op | Callable[..., object], *args: object, **kwargs: object) -> str:
    """The generated source of every kernel this call's signature uses, as one string.

    It returns the text and prints nothing (``print(sr.explain(...))`` to read it), so tools
    and tests can search it; nothing is compiled. Arguments may be arrays or ``ArraySpec``s.

    An engine adapter's op (``stablerules.torch``'s, with its tensors) answers for itself:
    which implementation the call's signature runs in that engine (the forward: the engine's
    op; the pullback: the engine's or our kernel, and the per-signature size choice) and why,
    then the source of the kernels it runs.
    """
    if not isinstance(op, Op):
        engine_explain = getattr(op, "explain", None)
        if callable(engine_explain):
            return str(engine_explain(*args, **kwargs))
    from ._cache import CACHE

    parts = []
    for request in _requests(op, args, kwargs):
        source = CACHE.source(request.signature, request.render)
        parts.append(f"# --- {request.signature.op} {request.signature.kind} ---\n{source}")
    return "\n".join(parts)


def _requests(op: object, args: tuple[object, ...], kwargs: dict[str, object]) -> list[KernelRequest]:
    if not isinstance(op, Op):
        raise TypeError(f"precompile/explain take one of stablerules' ops, got {op!r}")
    return op.kernel_requests(*args, **kwargs)
