"""Torch rows (issue 16): our rules through ``stablerules.torch`` against torch's own ops.

    python bench/engines_torch.py [--quick] [--tiny] [--no-compile]

Each row times one training step, forward and backward (``y.backward(dy)``, or a ``sum``
loss), ours and torch's native composition of the same op, in the same process, in three
rounds that alternate the two; the ratio is native time / our time, the median of the three
rounds' ratios (each round's times are medians themselves, ``timing.measure``). Every row runs
with one thread (``torch.set_num_threads(1)``, ``STABLERULES_NUM_THREADS=1``) and with the
default thread counts. Results are checked against each other before they are timed.

Rows and goals (issue 16): W3 eager with a dense cotangent >= 8x, with a ``sum`` loss >= 2.5x;
``kron((30,40),(50,30))`` eager >= 3x; W3 under ``torch.compile`` (inductor) >= 1.5x the
compiled native composition; an 8-element ``repeat`` costs at most 1.5x the native op (ratio
>= 0.67). The native composition of W3 is the faster of ``repeat_interleave`` per axis and
reshape/expand (both followed by ``Tensor.repeat``).
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
    ratio = statistics.median(n / o for n, o in zip(native, ours))
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
