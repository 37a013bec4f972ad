"""``stablerules.autograd`` against HIPS autograd's own composition (issue 17's must-show rows).

W3 (``repeat(x(200,3,4), inner=(7,1,10), outer=(4,1,2))``) and ``kron((30,40),(50,30))``:
``make_vjp`` then the vjp of a dense cotangent, ours (``sra.repeat``, ``sra.kron``) vs the same
op written with ``autograd.numpy`` (goal: at least 2.5x).

Run alone: ``python bench/engines_autograd.py [--quick]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp

import stablerules.autograd as sra
from engines import EngineCase, render, run_cases
from stablerules import Val
from timing import Budget
from workloads import julia_repeat

W3_INNER, W3_OUTER = (7, 1, 10), (4, 1, 2)


def _vjp_step(f: Callable[..., Any], dy: np.ndarray[Any, Any], *xs: np.ndarray[Any, Any]) -> Callable[[], object]:
    def step() -> object:
        def packed(values: tuple[Any, ...]) -> Any:
            return f(*values)

        back, y = make_vjp(packed)(xs)
        return y, back(dy)

    return step


def _check(ours: Callable[[], object], native: Callable[[], object], what: str) -> None:
    ours_result, native_result = ours(), native()
    assert isinstance(ours_result, tuple) and isinstance(native_result, tuple)
    for a, b in zip(ours_result[1], native_result[1]):
        if not np.allclose(a, b, rtol=1e-10, atol=1e-10):
            raise AssertionError(f"{what}: stablerules.autograd and autograd.numpy disagree")


def cases() -> list[EngineCase]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 3, 4))
    dy = rng.standard_normal((5600, 3, 80))
    ours = _vjp_step(lambda x: sra.repeat(x, inner=Val(W3_INNER), outer=Val(W3_OUTER)), dy, x)
    native = _vjp_step(lambda x: julia_repeat(anp, x, W3_INNER, W3_OUTER), dy, x)
    _check(ours, native, "W3")
    a, b = rng.standard_normal((30, 40)), rng.standard_normal((50, 30))
    dk = rng.standard_normal((1500, 1200))
    kron_ours = _vjp_step(sra.kron, dk, a, b)
    kron_native = _vjp_step(anp.kron, dk, a, b)
    _check(kron_ours, kron_native, "kron")
    return [
        EngineCase("autograd", "W3 vjp, dense dy", ours, native, 2.5),
        EngineCase("autograd", "kron((30,40),(50,30)) vjp, dense dy", kron_ours, kron_native, 2.5),
    ]


def main(argv: list[str]) -> int:
    budget = Budget.for_mode("quick" if "--quick" in argv else "full")
    print(render(run_cases(cases(), budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
