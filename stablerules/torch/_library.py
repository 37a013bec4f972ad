"""The one door of ``stablerules.torch`` into ``torch.library``: :func:`define` makes a custom
op ``stablerules::<name>`` from its kernel, its fake (meta) implementation and, for a
differentiable one, its autograd rule. The pullback ops (``<name>_vjp``, the adapter) and the
DTensor ops (``<name>_output``, ``<name>_gradient``, ``_sharding``) are made here; each op is
defined once per process (a second definition of a name is torch's error)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch

Backward = Callable[..., object]
Setup = Callable[..., None]


def define(
    name: str,
    schema: str,
    kernel: Callable[..., object],
    fake: Callable[..., object],
    autograd: tuple[Backward, Setup] | None = None,
) -> Callable[..., object]:
    """``stablerules::<name>`` with ``schema`` (no argument mutated): ``kernel`` runs it,
    ``fake`` gives its results' shapes, dtypes and devices under ``torch.compile`` and DTensor
    propagation, and ``autograd`` (``(backward, setup_context)``) differentiates it."""
    op = torch.library.custom_op(f"stablerules::{name}", kernel, mutates_args=(), schema=schema)
    op.register_fake(fake)
    if autograd is not None:
        backward, setup = autograd
        op.register_autograd(backward, setup_context=setup)
    return cast("Callable[..., object]", op)
