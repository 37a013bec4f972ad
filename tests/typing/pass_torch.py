"""A typed user model on ``stablerules.torch``: every op returns ``torch.Tensor``.

Type-checked only (``tests/test_typing.py`` runs mypy on it, with and without our config);
never executed, never collected by pytest.
"""

from __future__ import annotations

from typing import assert_type

import torch

import stablerules as sr
import stablerules.torch as srt
from stablerules import Val


class Upsample(torch.nn.Module):
    """Nearest-neighbour upsampling and a Kronecker mix, through our rules."""

    def __init__(self, factor: int) -> None:
        super().__init__()
        self.factor = factor
        self.mix = torch.nn.Parameter(torch.ones(2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = srt.repeat(x, inner=Val((1, self.factor, self.factor)))
        assert_type(up, torch.Tensor)
        tiled = srt.tile(up, Val((1, 2, 1)))
        joined = srt.concatenate((up, tiled[:, : up.shape[1]]), axis=Val(0))
        stacked = srt.stack([joined, joined], axis=Val(1))
        flat = srt.hstack((stacked.flatten(), srt.vstack((x.flatten(),)).flatten()))
        assert_type(srt.cat(x, x, dims=Val((0, 1))), torch.Tensor)
        return srt.kron(self.mix, flat.reshape(-1, 1)).sum()


def train_step(model: Upsample, x: torch.Tensor) -> float:
    loss: torch.Tensor = model(x)  # nn.Module.__call__ is untyped in torch's stubs
    gradients = torch.autograd.grad(loss, list(model.parameters()))
    assert_type(gradients, tuple[torch.Tensor, ...])
    (grad,) = torch.autograd.grad(srt.repeat(x, Val(2), axis=Val(0)).sum(), x)
    assert_type(grad, torch.Tensor)
    assert_type(sr.explain(srt.kron, model.mix, x), str)  # which implementation a signature runs
    return float(loss.item())
