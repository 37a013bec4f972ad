"""Training steps under ``torch.autocast("cpu", dtype=torch.bfloat16)`` through ``srt`` ops
(issue 36): a DenseNet-style block whose dense layers join their inputs with
``srt.concatenate`` and a U-Net-style block that upsamples with ``srt.repeat`` and joins its skip
with ``srt.concatenate``, against the same blocks on torch's own ops under the same autocast.

The forwards are torch's own ops on both sides (the adapter's choice), so the losses are equal
bit for bit. The gradients (the parameters', float32) may differ where our pullback rounds
differently from torch's bf16 one (repeat's: a float32 sum rounded once), and that difference
passes through the bf16 convolution pullbacks that follow, which round their own sums to 8
significant bits: so each parameter's gradient is compared within ``2**-6`` (two bf16 eps;
torch.testing's own bf16 rtol is 1.6e-2) of that tensor's largest stock entry, and
elementwise within the same relative bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch

import stablerules.torch as srt
from stablerules import Val

BF16_TOL = 2.0**-6
Join = Callable[[tuple[torch.Tensor, ...]], torch.Tensor]
Up = Callable[[torch.Tensor], torch.Tensor]


def _ours_join(parts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return srt.concatenate(parts, axis=Val(1))


def _stock_join(parts: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return torch.cat(parts, dim=1)


def _ours_up(h: torch.Tensor) -> torch.Tensor:
    return srt.repeat(srt.repeat(h, Val(2), axis=Val(2)), Val(2), axis=Val(3))


def _stock_up(h: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.interpolate(h, scale_factor=2, mode="nearest")


class DenseBlock(torch.nn.Module):
    """A stem convolution, then three dense layers (BN, ReLU, 3x3 conv) each reading the join of
    every earlier feature map, and a 1x1 head over the join of all of them."""

    def __init__(self, join: Join, channels: int = 4, growth: int = 3, layers: int = 3) -> None:
        super().__init__()
        self.join = join
        self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.norms = torch.nn.ModuleList()
        self.convs = torch.nn.ModuleList()
        width = channels
        for _ in range(layers):
            self.norms.append(torch.nn.BatchNorm2d(width))
            self.convs.append(torch.nn.Conv2d(width, growth, 3, padding=1))
            width += growth
        self.head = torch.nn.Conv2d(width, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [self.stem(x)]
        for norm, conv in zip(self.norms, self.convs):
            features.append(conv(torch.relu(norm(self.join(tuple(features))))))
        out: torch.Tensor = self.head(self.join(tuple(features)))
        return out


class UpBlock(torch.nn.Module):
    """A conv, a nearest x2 upsample, the join with a float32 skip (autocast's ``cat`` promotes
    to float32: so must ours), two convs and a 1x1 head."""

    def __init__(self, up: Up, join: Join, channels: int = 4) -> None:
        super().__init__()
        self.up, self.join = up, join
        self.c0 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.c1 = torch.nn.Conv2d(2 * channels, channels, 3, padding=1)
        self.c2 = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.head = torch.nn.Conv2d(channels, 1, 1)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        h = self.up(torch.relu(self.c0(x)))
        h = self.join((h, skip))
        out: torch.Tensor = self.head(torch.relu(self.c2(torch.relu(self.c1(h)))))
        return out


def _step(model: torch.nn.Module, loss: Callable[[torch.nn.Module], torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One training step: the loss under autocast bf16, the backward outside it (torch's AMP
    recipe), then an SGD update; the loss and the gradients the update used."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = loss(model)
    value.backward()  # type: ignore[no-untyped-call]
    grads = [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]
    optimizer.step()
    return value.detach(), grads


def _assert_bf16_close(name: str, ours: list[torch.Tensor], stock: list[torch.Tensor]) -> None:
    assert len(ours) == len(stock) > 0
    for index, (a, b) in enumerate(zip(ours, stock)):
        assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape, (name, index)
        assert bool(torch.isfinite(a).all()) and float(b.abs().max()) > 0, (name, index)
        scale = float(b.abs().max())
        torch.testing.assert_close(a, b, rtol=BF16_TOL, atol=BF16_TOL * scale,
                                   msg=lambda m: f"{name}: gradient {index} differs from stock's: {m}")


def test_dense_block_trains_under_autocast_bf16_as_torch_cat() -> None:
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    target = torch.randn(2, 2, 8, 8, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(2)
    ours = DenseBlock(_ours_join)
    stock = DenseBlock(_stock_join)
    stock.load_state_dict(ours.state_dict())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = ours(x), stock(x)
    assert got.dtype == expected.dtype == torch.bfloat16 and torch.equal(got, expected)
    before = [p.detach().clone() for p in ours.parameters()]
    loss_ours, grads_ours = _step(ours, lambda m: torch.nn.functional.mse_loss(m(x), target))
    loss_stock, grads_stock = _step(stock, lambda m: torch.nn.functional.mse_loss(m(x), target))
    assert torch.equal(loss_ours, loss_stock)
    _assert_bf16_close("dense block", grads_ours, grads_stock)
    # the step trained: every parameter moved, as stock's did
    for p, q, r in zip(before, ours.parameters(), stock.parameters()):
        assert not torch.equal(p, q.detach())
        torch.testing.assert_close(q.detach(), r.detach(), rtol=BF16_TOL, atol=BF16_TOL * float(p.abs().max()))


def test_up_block_trains_under_autocast_bf16_as_interpolate() -> None:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 8, 8, generator=generator)
    skip = torch.randn(2, 4, 16, 16, generator=generator)
    target = torch.randn(2, 1, 16, 16, generator=generator)
    torch.manual_seed(4)
    ours = UpBlock(_ours_up, _ours_join)
    stock = UpBlock(_stock_up, _stock_join)
    stock.load_state_dict(ours.state_dict())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = torch.relu(ours.c0(x))
        assert h.dtype == torch.bfloat16
        up_ours, up_stock = _ours_up(h), _stock_up(h)
        joined_ours, joined_stock = _ours_join((up_ours, skip)), _stock_join((up_stock, skip))
    assert up_ours.dtype == torch.bfloat16 and torch.equal(up_ours, up_stock)
    assert joined_ours.dtype == joined_stock.dtype == torch.float32 and torch.equal(joined_ours, joined_stock)

    def loss(m: torch.nn.Module) -> torch.Tensor:
        return torch.nn.functional.mse_loss(m(x, skip), target)

    loss_ours, grads_ours = _step(ours, loss)
    loss_stock, grads_stock = _step(stock, loss)
    assert torch.equal(loss_ours, loss_stock)
    _assert_bf16_close("up block", grads_ours, grads_stock)

    # compiled (aot_eager: the custom op's float32 pullback, rounded once), one graph
    torch._dynamo.reset()
    torch.manual_seed(4)
    fresh_ours, fresh_stock = UpBlock(_ours_up, _ours_join), UpBlock(_stock_up, _stock_join)
    fresh_stock.load_state_dict(fresh_ours.state_dict())
    compiled = cast(torch.nn.Module, torch.compile(fresh_ours, backend="aot_eager", fullgraph=True))
    _, grads_compiled = _step(compiled, loss)
    _, grads_fresh_stock = _step(fresh_stock, loss)
    _assert_bf16_close("up block compiled", grads_compiled, grads_fresh_stock)
