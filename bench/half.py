"""W3 and W10 in bfloat16 (SPEC section 15, issue 36): ours in bf16 against ours in float32 and
against torch's and JAX's bf16 backward, in one run: ``python bench/half.py [--quick | --tiny]``;
``bench/run.py --engines`` runs it too (the JSON's ``half`` key, a goal per workload and peer).

- W3: the pullback of ``repeat(x(200, 3, 4), inner=(7, 1, 10), outer=(4, 1, 2))`` (dense
  ``dy``); torch: ``autograd.grad`` of ``x.repeat_interleave`` per axis then ``tile``; JAX:
  ``jit(vjp)`` of ``jnp.repeat`` per axis then ``jnp.tile``.
- W10: the pullback of ``take(x(50000, 128), idx(16384) zipf(1.2), axis=Val(0))``; torch:
  ``autograd.grad`` of ``index_select`` (the faster of it and ``embedding`` in float32); JAX:
  ``jit(vjp)`` of ``jnp.take``.

One thread for ours and torch (``STABLERULES_NUM_THREADS=1``, ``torch.set_num_threads(1)``,
as ``engines_torch``'s one-thread rows: torch's thread pool beside Numba's on 2 shared cores
makes its timings swing by an order of magnitude); JAX as it comes (XLA's own pool).
Every contender runs in float32 and in bfloat16 (the same values: the bf16 inputs are the
float32 ones rounded). Rounds alternate every contender in this process (each a
``timing.measure`` median); the figures are the medians of the rounds: each contender's time,
``ahead`` = the peer's time over ours in the same dtype and round (above 1: ours faster), and
``ours bf16 / ours float32``. The goal (issue 36): in bfloat16 at least as far ahead of each
peer as in float32 (``ahead bf16 / ahead float32 >= 1``).

Before timing, each gradient is checked against the float64 pullback of the same values:
ours in bf16 within one bf16 unit in the last place (2**-7 relative, elementwise; ours sums in
float32 and rounds once), ours in both dtypes within 2**-6 of the largest entry. The peers'
largest errors (over the largest entry) are kept in the row, not asserted: a peer that
accumulates in bf16 is far off where many terms meet (JAX's bf16 scatter-add of W10's zipf
indices), and that is a finding, not a failed run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import Budget, format_seconds, measure, table  # noqa: E402

Array = npt.NDArray[Any]
DTYPES = ("float32", "bfloat16")
PEERS = ("torch", "jax")
W3_INNER, W3_OUTER = (7, 1, 10), (4, 1, 2)


@dataclass
class HalfRow:
    """One workload: every contender's median (``"ours bfloat16"``, ``"torch float32"``...),
    how far ahead ours is of each peer per dtype, and the goal's verdict per peer."""

    workload: str
    call: str
    times: dict[str, float] = field(default_factory=dict)
    ahead: dict[str, dict[str, float]] = field(default_factory=dict)  # peer -> dtype -> peer / ours
    bf16_over_f32: float | None = None  # ours bfloat16 / ours float32
    goal: dict[str, float | None] = field(default_factory=dict)  # peer -> ahead bf16 / ahead float32
    passed: dict[str, bool | None] = field(default_factory=dict)
    grad_error: dict[str, float] = field(default_factory=dict)  # contender -> max |g - ref| / max |ref|
    not_run: dict[str, str] = field(default_factory=dict)  # peer -> why
    error: str | None = None
    tiny: bool = False


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the test extra
        return None
    return torch


def _jax() -> tuple[Any, Any] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:  # pragma: no cover - jax is in the test extra
        return None
    return jax, jnp


@dataclass
class _Case:
    call: str
    reference: Array  # the float64 pullback of the bf16-rounded values
    contenders: dict[str, tuple[Callable[[], object], Callable[[], Array]]]  # name -> (timed call, gradient)
    not_run: dict[str, str]


def _ours(back: Callable[[object], Any], dy: Array) -> tuple[Callable[[], object], Callable[[], Array]]:
    """Our pullback: the timed call, and the gradient it returns."""
    return (lambda: back(dy)), (lambda: np.asarray(back(dy)[0]))


def _sizes(tiny: bool) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return ((10, 3, 4), (500, 16, 256)) if tiny else ((200, 3, 4), (50000, 128, 16384))


def cases(tiny: bool = False) -> dict[str, _Case]:
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(3)
    (s0, s1, s2), (rows, width, count) = _sizes(tiny)
    # the values are bf16's: float32 and bf16 runs differ in the arithmetic only
    x3 = rng.standard_normal((s0, s1, s2)).astype(bf16).astype(np.float64)
    y3 = np.tile(np.repeat(np.repeat(x3, W3_INNER[0], 0), W3_INNER[2], 2), W3_OUTER)
    dy3 = rng.standard_normal(y3.shape).astype(bf16).astype(np.float64)
    x10 = rng.standard_normal((rows, width)).astype(bf16).astype(np.float64)
    idx = ((rng.zipf(1.2, count) - 1) % rows).astype(np.int64)
    dy10 = rng.standard_normal((count, width)).astype(bf16).astype(np.float64)
    ref3 = dy3.reshape(W3_OUTER[0], s0, W3_INNER[0], s1, W3_OUTER[2], s2, W3_INNER[2]).sum(axis=(0, 2, 4, 6))
    ref10 = np.zeros_like(x10)
    np.add.at(ref10, idx, dy10)
    out = {
        "W3": _Case(f"repeat(x{(s0, s1, s2)}, inner={W3_INNER}, outer={W3_OUTER})", ref3, {}, {}),
        "W10": _Case(f"take(x{(rows, width)}, idx({count}) zipf(1.2), axis=Val(0))", ref10, {}, {}),
    }
    torch, jx = _torch(), _jax()
    for name in DTYPES:
        dtype = np.dtype(np.float32) if name == "float32" else bf16
        _, back3 = sr.rrule(sr.repeat, x3.astype(dtype), inner=Val(W3_INNER), outer=Val(W3_OUTER))
        out["W3"].contenders[f"ours {name}"] = _ours(back3, dy3.astype(dtype))
        _, back10 = sr.rrule(sr.take, x10.astype(dtype), idx, Val(0))
        out["W10"].contenders[f"ours {name}"] = _ours(back10, dy10.astype(dtype))
        if torch is None:
            for case in out.values():
                case.not_run["torch"] = "torch is not installed"
        else:
            tdtype = torch.float32 if name == "float32" else torch.bfloat16
            xt = torch.from_numpy(x3).to(tdtype).requires_grad_()
            z = xt
            for axis, n in enumerate(W3_INNER):
                z = z.repeat_interleave(n, dim=axis) if n > 1 else z
            z = z.tile(W3_OUTER)
            dzt = torch.from_numpy(dy3).to(tdtype)
            xe = torch.from_numpy(x10).to(tdtype).requires_grad_()
            ye = xe.index_select(0, torch.from_numpy(idx))
            dye = torch.from_numpy(dy10).to(tdtype)
            for key, (y, x, dy) in (("W3", (z, xt, dzt)), ("W10", (ye, xe, dye))):
                def grad(y: Any = y, x: Any = x, dy: Any = dy) -> object:
                    return torch.autograd.grad(y, x, dy, retain_graph=True)

                out[key].contenders[f"torch {name}"] = (
                    grad, lambda g=grad: np.asarray(g()[0].double().numpy()))  # type: ignore[misc]
        if jx is None:
            for case in out.values():
                case.not_run["jax"] = "jax is not installed"
        else:
            jax, jnp = jx
            jdtype = jnp.float32 if name == "float32" else jnp.bfloat16

            def w3(x: Any) -> Any:
                for axis, n in enumerate(W3_INNER):
                    x = jnp.repeat(x, n, axis=axis) if n > 1 else x
                return jnp.tile(x, W3_OUTER)

            ij = jnp.asarray(idx)
            for key, fn, x, dy in (("W3", w3, x3, dy3), ("W10", lambda v: jnp.take(v, ij, axis=0), x10, dy10)):
                vjp = jax.jit(lambda x_, dy_, fn=fn: jax.vjp(fn, x_)[1](dy_))
                xj, dyj = jnp.asarray(x, dtype=jdtype), jnp.asarray(dy, dtype=jdtype)

                def call(v: Any = vjp, xj: Any = xj, dyj: Any = dyj) -> object:
                    return jax.block_until_ready(v(xj, dyj))

                out[key].contenders[f"jax {name}"] = (
                    call, lambda c=call: np.asarray(c()[0]).astype(np.float64))  # type: ignore[misc]
    return out


def _check(case: _Case, row: HalfRow) -> None:
    """Every contender's gradient against the float64 reference (the module docstring's bounds)."""
    ref = case.reference
    scale = float(np.max(np.abs(ref))) or 1.0
    for name, (_, gradient) in case.contenders.items():
        got = gradient().astype(np.float64)
        if got.shape != ref.shape:
            raise AssertionError(f"{row.workload} {name}: gradient shape {got.shape}, expected {ref.shape}")
        error = float(np.max(np.abs(got - ref)))
        row.grad_error[name] = error / scale
        if name == "ours bfloat16" and not np.all(np.abs(got - ref) <= 2.0**-7 * np.abs(ref)):
            raise AssertionError(f"{row.workload} ours bfloat16: more than one bf16 ulp from the float64 pullback")
        if name.startswith("ours") and error > 2.0**-6 * scale:
            raise AssertionError(f"{row.workload} {name}: gradient {error:.3g} from the float64 pullback (scale {scale:.3g})")


def run_half(mode: str, rounds: int | None = None) -> list[HalfRow]:
    """The rows (``mode``: "full", "quick" or "tiny"; tiny shrinks the sizes, its goals are
    not measured). Never raises for a contender's fault: the row carries the error."""
    torch = _torch()
    previous_torch = torch.get_num_threads() if torch is not None else None
    previous_ours = os.environ.get("STABLERULES_NUM_THREADS")
    os.environ["STABLERULES_NUM_THREADS"] = "1"
    if torch is not None:
        torch.set_num_threads(1)
    try:
        return _run_half(mode, rounds)
    finally:
        if torch is not None and previous_torch is not None:
            torch.set_num_threads(previous_torch)
        if previous_ours is None:
            os.environ.pop("STABLERULES_NUM_THREADS", None)
        else:
            os.environ["STABLERULES_NUM_THREADS"] = previous_ours


def _run_half(mode: str, rounds: int | None) -> list[HalfRow]:
    budget = Budget.for_mode(mode)
    rounds = rounds if rounds is not None else 5 if mode == "full" else 3
    tiny = mode == "tiny"
    rows: list[HalfRow] = []
    try:
        built = cases(tiny)
    except Exception as error:  # noqa: BLE001 - the row shows it, the run goes on
        return [HalfRow(key, "", error=f"{type(error).__name__}: {error}"[:300], tiny=tiny) for key in ("W3", "W10")]
    for key, case in built.items():
        row = HalfRow(key, case.call, not_run=dict(case.not_run), tiny=tiny)
        rows.append(row)
        try:
            _check(case, row)
            samples: dict[str, list[float]] = {name: [] for name in case.contenders}
            for _ in range(rounds):
                for name, (call, _) in case.contenders.items():
                    samples[name].append(measure(call, budget).median_s)
        except Exception as error:  # noqa: BLE001
            row.error = f"{type(error).__name__}: {error}"[:300]
            continue
        row.times = {name: statistics.median(values) for name, values in samples.items()}
        row.bf16_over_f32 = statistics.median(
            b / f for b, f in zip(samples["ours bfloat16"], samples["ours float32"]))
        for peer in PEERS:
            if f"{peer} float32" not in samples:
                row.goal[peer], row.passed[peer] = None, None
                continue
            row.ahead[peer] = {
                dtype: statistics.median(p / o for p, o in zip(samples[f"{peer} {dtype}"], samples[f"ours {dtype}"]))
                for dtype in DTYPES
            }
            value = row.ahead[peer]["bfloat16"] / row.ahead[peer]["float32"]
            row.goal[peer] = None if tiny else value
            row.passed[peer] = None if tiny else value >= 1.0
    return rows


def render(rows: list[HalfRow]) -> str:
    body = []
    for row in rows:
        if row.error:
            body.append([row.workload, "error: " + row.error] + [""] * 7)
            continue
        ours32, ours16 = row.times.get("ours float32"), row.times.get("ours bfloat16")
        body.append([row.workload, "ours", format_seconds(ours32), format_seconds(ours16),
                     f"{row.bf16_over_f32:.2f}x" if row.bf16_over_f32 else "-", "", "", "", ""])
        for peer in PEERS:
            if peer not in row.ahead:
                body.append([row.workload, peer, row.not_run.get(peer, "not run")] + [""] * 6)
                continue
            verdict = "tiny sizes, not measured" if row.tiny else "pass" if row.passed[peer] else "MISS"
            body.append([
                row.workload, peer, format_seconds(row.times[f"{peer} float32"]), format_seconds(row.times[f"{peer} bfloat16"]),
                f"{row.times[f'{peer} bfloat16'] / row.times[f'{peer} float32']:.2f}x",
                f"{row.ahead[peer]['float32']:.2f}x", f"{row.ahead[peer]['bfloat16']:.2f}x",
                f"{row.ahead[peer]['bfloat16'] / row.ahead[peer]['float32']:.2f}",
                f"{verdict} (grad err {row.grad_error.get(f'{peer} bfloat16', float('nan')):.1e})",
            ])
    headers = ["workload", "who", "float32", "bfloat16", "bf16/f32", "ahead f32", "ahead bf16", "bf16/f32 ahead",
               "goal >= 1"]
    return table(headers, body, max_cell=80)


def as_json(rows: list[HalfRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    arguments = parser.parse_args(argv)
    mode = "tiny" if arguments.tiny else "quick" if arguments.quick else "full"
    rows = run_half(mode)
    print(f"load: {os.getloadavg()[0]:.2f}; ahead: the peer's median / ours in the same dtype (same-run rounds)")
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
