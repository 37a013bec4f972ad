"""torch's private names the adapter uses, in one place (a test pins them against the
installed torch: ``tests/test_private.py``), where no public API answers the question.

- ``FUNCTORCH_ACTIVE()``: whether a ``torch.func`` transform is active
  (``torch._C._are_functorch_transforms_active``). Without it every call that requires grad
  would take the ``setup_context`` Function that torch.func needs, several times the cost of
  the plain one.
- ``forward_ad_active()``: whether a forward-mode AD level is open
  (``torch.autograd.forward_ad._current_level``), for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

FUNCTORCH_ACTIVE: Callable[[], bool] = torch._C._are_functorch_transforms_active

_FORWARD_AD = torch.autograd.forward_ad


def forward_ad_active() -> bool:
    """Whether a ``torch.autograd.forward_ad.dual_level()`` is open."""
    return _FORWARD_AD._current_level >= 0


__all__ = ["FUNCTORCH_ACTIVE", "forward_ad_active"]
