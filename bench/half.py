"""W3 and W10 in bfloat16 (SPEC section 15): ours in bf16 against ours in float32 and against
torch's bf16 backward, in one run: ``python bench/half.py [--quick]``.

- W3: the pullback of ``repeat(x(200, 3, 4), inner=(7, 1, 10), outer=(4, 1, 2))`` (dense
  ``dy``); torch: ``autograd.grad`` of ``x.repeat_interleave`` per axis then ``tile``.
- W10: the pullback of ``take(x(50000, 128), idx(16384) zipf(1.2), axis=Val(0))``; torch:
  ``autograd.grad`` of ``index_select`` (the faster of it and ``embedding`` in float32).

Ours in bf16 is the float32 pullback between two casts (``_half``): the figures show what
the casts cost. Prints a table; a ratio is the other's median over ours in bf16.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

import stablerules as sr
from stablerules import Val

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import Budget, format_seconds, measure, table  # noqa: E402

Array = npt.NDArray[Any]


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the test extra
        return None
    return torch


def _call(back: Callable[[object], object], dy: Array) -> Callable[[], object]:
    return lambda: back(dy)


def _grad(torch: Any, y: Any, x: Any, dy: Any) -> Callable[[], object]:
    return lambda: torch.autograd.grad(y, x, dy, retain_graph=True)


def cases(bf16: np.dtype[Any]) -> dict[str, dict[str, Callable[[], object]]]:
    rng = np.random.default_rng(3)
    x3 = rng.standard_normal((200, 3, 4))
    inner, outer = (7, 1, 10), (4, 1, 2)
    rows, width, count = 50000, 128, 16384
    x10 = rng.standard_normal((rows, width))
    idx = ((rng.zipf(1.2, count) - 1) % rows).astype(np.int64)
    out: dict[str, dict[str, Callable[[], object]]] = {"W3": {}, "W10": {}}
    torch = _torch()
    for name, dtype in (("float32", np.dtype(np.float32)), ("bfloat16", bf16)):
        x = x3.astype(dtype)
        y, back3 = sr.rrule(sr.repeat, x, inner=Val(inner), outer=Val(outer))
        dy3 = rng.standard_normal(y.shape).astype(dtype)
        out["W3"][f"ours {name}"] = _call(back3, dy3)
        xt10 = x10.astype(dtype)
        y, back10 = sr.rrule(sr.take, xt10, idx, Val(0))
        dy10 = rng.standard_normal(y.shape).astype(dtype)
        out["W10"][f"ours {name}"] = _call(back10, dy10)
        if torch is not None:
            tdtype = torch.float32 if name == "float32" else torch.bfloat16
            xt = torch.from_numpy(x3).to(tdtype).requires_grad_()
            z = xt
            for axis, n in enumerate(inner):
                z = z.repeat_interleave(n, dim=axis) if n > 1 else z
            z = z.tile(outer)
            dzt = torch.from_numpy(dy3.astype(np.float32)).to(tdtype)
            out["W3"][f"torch {name}"] = _grad(torch, z, xt, dzt)
            xe = torch.from_numpy(x10).to(tdtype).requires_grad_()
            ye = xe.index_select(0, torch.from_numpy(idx))
            dye = torch.from_numpy(dy10.astype(np.float32)).to(tdtype)
            out["W10"][f"torch {name}"] = _grad(torch, ye, xe, dye)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    arguments = parser.parse_args(argv)
    import ml_dtypes

    budget = Budget.for_mode("quick" if arguments.quick else "full")
    rows = []
    for workload, contenders in cases(np.dtype(ml_dtypes.bfloat16)).items():
        times = {name: measure(fn, budget).median_s for name, fn in contenders.items()}
        ours = times["ours bfloat16"]
        for name, seconds in times.items():
            rows.append([workload, name, format_seconds(seconds), f"{seconds / ours:.2f}x"])
    print(f"load: {os.getloadavg()[0]:.2f}; ratio: the contender's median / ours in bfloat16")
    print(table(["workload", "contender", "median", "ratio"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
