"""Torch rows (issue 16): our rules through ``stablerules.torch`` against torch's own ops.

    python bench/engines_torch.py [--quick] [--tiny] [--no-compile]

Each row times one training step, forward and backward (``y.backward(dy)``, or a ``sum``
loss), ours and torch's native composition of the same op, in the same process, in three
rounds that alternate the two; the ratio is native time / our time, the median of the three
rounds' ratios (each round's times are medians themselves, ``timing.measure``). Every row runs
with one thread (``torch.set_num_threads(1)``, ``STABLERULES_NUM_THREADS=1``) and with the
default thread counts. Results are checked against each other before they are timed.

Rows and goals: W3 eager with a dense cotangent >= 8x, with a ``sum`` loss >= 2.5x;
``kron((30,40),(50,30))`` eager >= 3x; W3 under ``torch.compile`` (inductor) >= 1.5x the
compiled native composition; an 8-element ``repeat`` costs at most 1.5x the native op (ratio
>= 0.67). The native composition of W3 is the faster of ``repeat_interleave`` per axis and
reshape/expand (both followed by ``Tensor.repeat``). Per call on small arrays: each op's
forward under ``no_grad`` at most torch's own + 8 us (the ratio is (native + 8 us) / ours),
forward + ``sum()`` + backward on a (4, 5, 6) tensor at most 1.3x torch's own. The small CNN
block (``small_cnn``: channel concatenation, nearest-neighbour upsampling by ``repeat``, a
reshape, a ``kron`` layer; batch 8, 16 channels, 16x16 images), one SGD step: eager at least
as fast as torch's own; compiled within 1.25x of torch's compiled and no slower than our eager.
Issue 35's op rows (``_issue35_cases``): a 25-input concatenation and a small kron at most
1.02x torch's own, a repeat upsample faster than ``repeat_interleave``.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

from timing import Budget, format_seconds, measure, table

# torch is optional for the bench and partly untyped: reached through Any, like peers.py.
Tensor = Any
Step = Callable[[], object]


@dataclass(frozen=True)
class TorchRow:
    """One measured row: medians over three rounds, and the median of the rounds' ratios."""

    id: str
    description: str
    engine: str
    threads: str
    ours_s: float
    native_s: float
    ratio: float
    goal: float
    error: str | None = None
    tiny: bool = False  # tiny sizes (a smoke run): the goals do not apply

    @property
    def passed(self) -> bool | None:
        if self.tiny:
            return None
        return self.error is None and self.ratio >= self.goal


@dataclass(frozen=True)
class _Case:
    id: str
    description: str
    engine: str
    goal: float
    ours: Step
    native: Step
    check: Callable[[], None]
    allowance_s: float = 0.0  # a fixed cost ours may add: the ratio is (native + allowance) / ours


def _julia_native_expand(torch: ModuleType, x: Tensor, inner: tuple[int, ...], outer: tuple[int, ...]) -> Tensor:
    shape = tuple(x.shape)
    spread = [v for n in shape for v in (n, 1)]
    widened = [v for pair in zip(shape, inner) for v in pair]
    return x.reshape(spread).expand(widened).reshape([n * c for n, c in zip(shape, inner)]).repeat(*outer)


def _julia_native_interleave(torch: ModuleType, x: Tensor, inner: tuple[int, ...], outer: tuple[int, ...]) -> Tensor:
    y = x
    for axis, count in enumerate(inner):
        if count != 1:
            y = torch.repeat_interleave(y, count, dim=axis)
    return y.repeat(*outer)


def _cases(torch: ModuleType, tiny: bool, compiled: bool) -> Iterator[_Case]:
    srt = import_module("stablerules.torch")
    val = import_module("stablerules").Val
    generator = torch.Generator().manual_seed(0)
    inner, outer = ((2, 1, 3), (2, 1, 2)) if tiny else ((7, 1, 10), (4, 1, 2))
    x = torch.randn((4, 3, 2) if tiny else (200, 3, 4), dtype=torch.float64, generator=generator, requires_grad=True)

    def ours_w3(x: Tensor) -> Tensor:
        return srt.repeat(x, inner=val(inner), outer=val(outer))

    natives = {
        "expand": lambda x: _julia_native_expand(torch, x, inner, outer),
        "interleave": lambda x: _julia_native_interleave(torch, x, inner, outer),
    }
    y = ours_w3(x)
    dy = torch.randn(y.shape, dtype=torch.float64, generator=generator)

    def gradient(function: Callable[[Tensor], Tensor], loss: str) -> Tensor:
        leaf = x.detach().requires_grad_(True)
        out = function(leaf)
        if loss == "sum":
            out.sum().backward()
        else:
            out.backward(dy)
        return leaf.grad

    def check_w3(loss: str, ours: Callable[[Tensor], Tensor], native: Callable[[Tensor], Tensor]) -> Callable[[], None]:
        def check() -> None:
            assert torch.equal(ours(x), native(x)), "W3 forward differs"
            assert torch.allclose(gradient(ours, loss), gradient(native, loss)), "W3 gradient differs"

        return check

    def step(function: Callable[[Tensor], Tensor], loss: str) -> Step:
        if loss == "sum":
            return lambda: function(x).sum().backward()
        return lambda: function(x).backward(dy)

    def fastest_native(loss: str) -> Callable[[Tensor], Tensor]:
        budget = Budget.for_mode("tiny")
        return min(natives.values(), key=lambda function: measure(step(function, loss), budget).median_s)

    shape = tuple(x.shape)
    dense_native = fastest_native("dense")
    yield _Case("W3", f"repeat(x{shape}, inner={inner}, outer={outer}), y.backward(dy)", "eager", 8.0,
                step(ours_w3, "dense"), step(dense_native, "dense"), check_w3("dense", ours_w3, dense_native))
    sum_native = fastest_native("sum")
    yield _Case("W3 sum", f"repeat(x{shape}, inner={inner}, outer={outer}), sum loss", "eager", 2.5,
                step(ours_w3, "sum"), step(sum_native, "sum"), check_w3("sum", ours_w3, sum_native))
    if compiled:
        ours_c = torch.compile(ours_w3)
        native_c = torch.compile(dense_native)
        yield _Case("W3 compiled", "W3 under torch.compile (inductor), y.backward(dy)", "compiled", 1.5,
                    step(ours_c, "dense"), step(native_c, "dense"), check_w3("dense", ours_c, native_c))

    a_shape, b_shape = ((3, 4), (5, 3)) if tiny else ((30, 40), (50, 30))
    a = torch.randn(a_shape, dtype=torch.float64, generator=generator, requires_grad=True)
    b = torch.randn(b_shape, dtype=torch.float64, generator=generator, requires_grad=True)
    dk = torch.randn(srt.kron(a, b).shape, dtype=torch.float64, generator=generator)

    def check_kron() -> None:
        assert torch.allclose(srt.kron(a, b), torch.kron(a, b)), "kron forward differs"
        ours_grads = torch.autograd.grad(srt.kron(a, b), (a, b), dk)
        native_grads = torch.autograd.grad(torch.kron(a, b), (a, b), dk)
        assert all(torch.allclose(o, n) for o, n in zip(ours_grads, native_grads)), "kron gradient differs"

    yield _Case("kron", f"kron(a{a_shape}, b{b_shape}), y.backward(dy)", "eager", 3.0,
                lambda: srt.kron(a, b).backward(dk), lambda: torch.kron(a, b).backward(dk), check_kron)

    t = torch.randn(8, dtype=torch.float64, generator=generator, requires_grad=True)
    dt = torch.randn(16, dtype=torch.float64, generator=generator)

    def check_tiny() -> None:
        assert torch.equal(srt.repeat(t, val(2), axis=val(0)), torch.repeat_interleave(t, 2))

    yield _Case("tiny", "repeat(x(8,), Val(2), axis=Val(0)) vs repeat_interleave, y.backward(dy)", "eager",
                1 / 1.5, lambda: srt.repeat(t, val(2), axis=val(0)).backward(dt),
                lambda: torch.repeat_interleave(t, 2).backward(dt), check_tiny)
    yield from _call_cases(torch, srt, val)
    yield from _issue35_cases(torch, srt, val, tiny)
    yield from _model_cases(torch, srt, val, tiny, compiled)


def _issue35_cases(torch: ModuleType, srt: ModuleType, val: Any, tiny: bool) -> Iterator[_Case]:
    """Issue 35's op-level rows, forward + backward (``y.backward(dy)``): one 25-input channel
    concatenation (DenseNet-121's largest; torch's own pullback: goal never slower, 1.02x);
    a U-Net nearest upsample by ``repeat`` (our pullback: goal faster than
    ``repeat_interleave``); a Kalman filter's small ``kron`` (torch's pullback below
    ``stablerules.rules.kron.KRON_TORCH_BELOW`` result elements: goal 1.02x)."""
    generator = torch.Generator().manual_seed(5)

    def leaf(*shape: int, dtype: Any = torch.float32) -> Tensor:
        return torch.randn(shape, dtype=dtype, generator=generator, requires_grad=True)

    side = 4 if tiny else 8
    parts = [leaf(2, 32, side, side) for _ in range(25)]
    d_cat = torch.randn(2, 800, side, side, generator=generator)
    image = leaf(4, 32, side * 4, side * 4)
    d_up = torch.randn(4, 32, side * 8, side * 8, generator=generator)
    a, b = leaf(4, 4, dtype=torch.float64), leaf(3, 3, dtype=torch.float64)
    d_kron = torch.randn(12, 12, dtype=torch.float64, generator=generator)
    rows: list[tuple[str, str, float, Callable[[], Tensor], Callable[[], Tensor], Tensor, tuple[Tensor, ...]]] = [
        ("concat25", f"concatenate 25 x (2, 32, {side}, {side}) on axis 1 vs torch.cat", 1 / 1.02,
         lambda: srt.concatenate(parts, axis=val(1)), lambda: torch.cat(parts, 1), d_cat, tuple(parts)),
        ("upsample", f"repeat (4, 32, {4 * side}, {4 * side}) inner (1, 1, 2, 2) vs repeat_interleave", 1.0,
         lambda: srt.repeat(image, inner=val((1, 1, 2, 2))),
         lambda: image.repeat_interleave(2, 2).repeat_interleave(2, 3), d_up, (image,)),
        ("kron small", "kron((4, 4), (3, 3)) float64 vs torch.kron", 1 / 1.02,
         lambda: srt.kron(a, b), lambda: torch.kron(a, b), d_kron, (a, b)),
    ]
    for name, description, goal, ours, native, dy, leaves in rows:

        def check(ours: Callable[[], Tensor] = ours, native: Callable[[], Tensor] = native, dy: Tensor = dy,
                  leaves: tuple[Tensor, ...] = leaves) -> None:
            assert torch.equal(ours(), native()), "forward differs"
            got = torch.autograd.grad(ours(), leaves, dy)
            expected = torch.autograd.grad(native(), leaves, dy)
            assert all(torch.allclose(g, e) for g, e in zip(got, expected)), "gradient differs"

        def step(function: Callable[[], Tensor], dy: Tensor = dy) -> Step:
            return lambda: function().backward(dy)

        yield _Case(name, description + ", y.backward(dy)", "eager", goal, step(ours), step(native), check)


def _call_cases(torch: ModuleType, srt: ModuleType, val: Any) -> Iterator[_Case]:
    """Per call, small arrays: each op's forward under ``no_grad`` (goal: at most torch's own
    op + 8 us) and forward + ``sum()`` + backward on a (4, 5, 6) float64 tensor (goal: at
    most 1.3x torch's own)."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, 6, dtype=torch.float64, generator=generator)
    a = torch.randn(3, 3, dtype=torch.float64, generator=generator)
    b = torch.randn(2, 2, dtype=torch.float64, generator=generator)
    xg, ag, bg = (t.clone().requires_grad_(True) for t in (x, a, b))
    pairs: dict[str, tuple[Callable[..., Tensor], Callable[..., Tensor], tuple[Tensor, ...]]] = {
        "repeat": (lambda x: srt.repeat(x, val(2), axis=val(1)), lambda x: torch.repeat_interleave(x, 2, dim=1), (x,)),
        "concatenate": (lambda x: srt.concatenate((x, x), axis=val(0)), lambda x: torch.cat((x, x), 0), (x,)),
        "kron": (lambda a, b: srt.kron(a, b), lambda a, b: torch.kron(a, b), (a, b)),
        "flip": (lambda x: srt.flip(x, val(1)), lambda x: torch.flip(x, (1,)), (x,)),
        "sum": (lambda x: srt.sum(x, val(1)), lambda x: torch.sum(x, 1), (x,)),
        "reshape": (lambda x: srt.reshape(x, val((20, 6))), lambda x: x.reshape(20, 6), (x,)),
    }
    graded = {id(x): xg, id(a): ag, id(b): bg}
    for name, (ours, native, inputs) in pairs.items():

        def check(ours: Callable[..., Tensor] = ours, native: Callable[..., Tensor] = native,
                  inputs: tuple[Tensor, ...] = inputs) -> None:
            assert torch.allclose(ours(*inputs), native(*inputs)), "forward differs"

        def no_grad(function: Callable[..., Tensor], inputs: tuple[Tensor, ...] = inputs) -> Step:
            def run() -> object:
                with torch.no_grad():
                    return function(*inputs)

            return run

        yield _Case(f"call {name}", f"{name} on small arrays under no_grad (goal: ours <= torch's + 8 us)", "eager",
                    1.0, no_grad(ours), no_grad(native), check, allowance_s=8e-6)
        leaves = tuple(graded[id(t)] for t in inputs)
        if name == "reshape":
            continue

        def backward(function: Callable[..., Tensor], leaves: tuple[Tensor, ...] = leaves) -> Step:
            return lambda: function(*leaves).sum().backward()

        yield _Case(f"grad {name}", f"{name} forward + sum() + backward, (4, 5, 6) float64 (goal: <= 1.3x torch's)",
                    "eager", 1 / 1.3, backward(ours), backward(native), check)


def small_cnn(torch: ModuleType, srt: ModuleType, val: Any, native: bool, channels: int, side: int) -> Any:
    """A small CNN block: conv, channel concatenation, nearest-neighbour upsampling by
    ``repeat`` (x2 along both image axes), conv (stride 2), a reshape and a linear layer whose
    weight is ``kron`` of two parameter factors; on our ops or on torch's own."""
    nn = torch.nn
    features = channels * side * side

    class Block(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            generator = torch.Generator().manual_seed(0)
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
            self.conv2 = nn.Conv2d(2 * channels, channels, 3, stride=2, padding=1)
            self.a = nn.Parameter(torch.randn(features // 16, 4, generator=generator) * 0.05)
            self.b = nn.Parameter(torch.randn(16, 4, generator=generator) * 0.05)

        def forward(self, x: Tensor) -> Tensor:
            h = torch.relu(self.conv1(x))
            if native:
                h = torch.cat((h, x), dim=1)
                h = torch.repeat_interleave(torch.repeat_interleave(h, 2, dim=2), 2, dim=3)
                h = torch.relu(self.conv2(h))
                return h.reshape(h.shape[0], -1) @ torch.kron(self.a, self.b)
            h = srt.concatenate((h, x), axis=val(1))
            h = srt.repeat(srt.repeat(h, val(2), axis=val(2)), val(2), axis=val(3))
            h = torch.relu(self.conv2(h))
            return srt.reshape(h, val((h.shape[0], -1))) @ srt.kron(self.a, self.b)

    return Block()


def _model_cases(torch: ModuleType, srt: ModuleType, val: Any, tiny: bool, compiled: bool) -> Iterator[_Case]:
    """The small CNN block (batch 8, 16 channels, 16x16 images) trained by SGD, a step
    measured: ours in eager mode against torch's own ops (goal: at least as fast); compiled
    (``torch.compile(fullgraph=True)``) against torch's own compiled (goal: within 1.25x) and
    against our own eager step (goal: no slower)."""
    batch, channels, side = (2, 4, 4) if tiny else (8, 16, 16)
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(batch, channels, side, side, generator=generator)
    target = torch.randn(batch, 16, generator=generator)
    def models() -> tuple[Any, Any]:  # a fresh pair per row (a row's steps train its models)
        ours, native = small_cnn(torch, srt, val, False, channels, side), small_cnn(torch, srt, val, True, channels, side)
        native.load_state_dict(ours.state_dict())
        return ours, native

    ours_model, native_model = models()

    def step(model: Any) -> Step:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

        def run() -> None:
            optimizer.zero_grad(set_to_none=True)
            ((model(x) - target) ** 2).mean().backward()
            optimizer.step()

        return run

    def check(ours: Any, native: Any) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                assert torch.allclose(ours(x), native(x), rtol=1e-4, atol=1e-5), "the two models differ"

        return run

    shape = f"x({batch}, {channels}, {side}, {side})"
    ours_eager = step(ours_model)
    yield _Case("cnn", f"small CNN block, {shape}, a training step", "eager", 1.0, ours_eager, step(native_model),
                check(ours_model, native_model))
    if compiled:
        # Each model pair is new code to dynamo (forward closes over ``native``): start afresh,
        # so that the rounds of both thread counts stay under its recompile limit.
        torch.compiler.reset()
        ours_fresh, native_fresh = models()
        ours_compiled = torch.compile(ours_fresh, fullgraph=True)
        native_compiled = torch.compile(native_fresh, fullgraph=True)
        yield _Case("cnn compiled", f"small CNN block, {shape}, compiled, vs torch's compiled", "compiled", 1 / 1.25,
                    step(ours_compiled), step(native_compiled), check(ours_compiled, native_compiled))
        ours_again = torch.compile(ours_model, fullgraph=True)
        yield _Case("cnn compiled/eager", "small CNN block compiled, vs our own eager step", "compiled", 1.0,
                    step(ours_again), ours_eager, check(ours_again, ours_model))


@contextmanager
def _threads(torch: ModuleType, one: bool) -> Iterator[None]:
    previous_torch = torch.get_num_threads()
    previous_ours = os.environ.get("STABLERULES_NUM_THREADS")
    if one:
        torch.set_num_threads(1)
        os.environ["STABLERULES_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        torch.set_num_threads(previous_torch)
        if previous_ours is None:
            os.environ.pop("STABLERULES_NUM_THREADS", None)
        else:
            os.environ["STABLERULES_NUM_THREADS"] = previous_ours


def _measure_case(case: _Case, budget: Budget, threads: str, tiny: bool) -> TorchRow:
    try:
        case.check()
        ours: list[float] = []
        native: list[float] = []
        for _ in range(3):  # alternate, so load changes hit both sides alike
            ours.append(measure(case.ours, budget).median_s)
            native.append(measure(case.native, budget).median_s)
    except Exception as error:  # a row's failure is reported in its row, the others still run
        return TorchRow(case.id, case.description, case.engine, threads, float("nan"), float("nan"), float("nan"),
                        case.goal, f"{type(error).__name__}: {error}", tiny)
    ratio = statistics.median((n + case.allowance_s) / o for n, o in zip(native, ours))
    return TorchRow(case.id, case.description, case.engine, threads, statistics.median(ours),
                    statistics.median(native), ratio, case.goal, None, tiny)


def run_torch_rows(mode: str, compiled: bool = True) -> list[TorchRow]:
    """Every row, with one thread and with the default thread counts."""
    torch = import_module("torch")
    budget = Budget.for_mode(mode)
    rows: list[TorchRow] = []
    for one in (True, False):
        with _threads(torch, one):
            threads = "1" if one else str(torch.get_num_threads())
            for case in _cases(torch, tiny=mode == "tiny", compiled=compiled):
                rows.append(_measure_case(case, budget, threads, tiny=mode == "tiny"))
    return rows


def torch_table(rows: list[TorchRow]) -> str:
    headers = ["row", "engine", "threads", "stablerules.torch", "torch native", "ratio", "goal", ""]
    body = [
        [row.id, row.engine, row.threads, format_seconds(row.ours_s), format_seconds(row.native_s),
         f"{row.ratio:.2f}x", f">= {row.goal:.2f}x",
         row.error or {True: "ok", False: "MISSED", None: "tiny sizes: no goal"}[row.passed]]
        for row in rows
    ]
    return table(headers, body, max_cell=80)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, few repeats (a smoke run)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile row (slow to compile)")
    args = parser.parse_args(argv)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    rows = run_torch_rows(mode, compiled=not args.no_compile)
    print(torch_table(rows))
    return 0 if all(row.error is None for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
