"""``stablerules.jax`` against native ``jax.numpy`` (issue 17's must-show rows).

- W3 (``repeat(x(200,3,4), inner=(7,1,10), outer=(4,1,2))``) and ``kron((30,40),(50,30))``:
  ``jit`` of ``(y, vjp(f, *x)[1](dy))`` with a dense cotangent, ours vs the same written in
  ``jnp`` (goal: at least 2.5x).
- a trivial op's per-call overhead: ``jit(repeat(x(8,), Val(2)))`` vs ``jit(jnp.repeat)``,
  both one tiny op inside XLA (goal: ours at most 1.3x native).

Run alone: ``python bench/engines_jax.py [--quick]``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

import stablerules.jax as srj
from engines import EngineCase, render, run_cases
from stablerules import Val
from timing import Budget
from workloads import julia_repeat

jax.config.update("jax_enable_x64", True)

W3_INNER, W3_OUTER = (7, 1, 10), (4, 1, 2)


def _vjp_step(f: Callable[..., jax.Array]) -> Callable[..., object]:
    def step(dy: jax.Array, *xs: jax.Array) -> object:
        y, back = jax.vjp(f, *xs)
        return y, back(dy)

    return jax.jit(step)


def _check(ours: object, native: object, what: str) -> None:
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(native)):
        if not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-10):
            raise AssertionError(f"{what}: stablerules.jax and jnp disagree")


def cases() -> list[EngineCase]:
    rng = np.random.default_rng(0)
    block = jax.block_until_ready
    out: list[EngineCase] = []

    x = jnp.asarray(rng.standard_normal((200, 3, 4)))
    dy = jnp.asarray(rng.standard_normal((5600, 3, 80)))
    ours = _vjp_step(lambda x: srj.repeat(x, inner=Val(W3_INNER), outer=Val(W3_OUTER)))
    native = _vjp_step(lambda x: jnp.asarray(julia_repeat(jnp, x, W3_INNER, W3_OUTER)))
    _check(ours(dy, x), native(dy, x), "W3")
    out.append(
        EngineCase("jax", "W3 jit vjp, dense dy", lambda: block(ours(dy, x)), lambda: block(native(dy, x)), 2.5)
    )

    a = jnp.asarray(rng.standard_normal((30, 40)))
    b = jnp.asarray(rng.standard_normal((50, 30)))
    dk = jnp.asarray(rng.standard_normal((1500, 1200)))
    kron_ours = _vjp_step(srj.kron)
    kron_native = _vjp_step(jnp.kron)
    _check(kron_ours(dk, a, b), kron_native(dk, a, b), "kron")
    out.append(
        EngineCase(
            "jax",
            "kron((30,40),(50,30)) jit vjp, dense dy",
            lambda: block(kron_ours(dk, a, b)),
            lambda: block(kron_native(dk, a, b)),
            2.5,
        )
    )

    small = jnp.asarray(rng.standard_normal(8))
    trivial_ours = jax.jit(lambda x: srj.repeat(x, Val(2)))
    trivial_native = jax.jit(lambda x: jnp.repeat(x, 2))
    _check(trivial_ours(small), trivial_native(small), "trivial")
    out.append(
        EngineCase(
            "jax",
            "trivial op per call: jit(repeat(x(8,), 2))",
            lambda: block(trivial_ours(small)),
            lambda: block(trivial_native(small)),
            1.3,
            higher_is_ours=False,
        )
    )
    return out


def main(argv: list[str]) -> int:
    budget = Budget.for_mode("quick" if "--quick" in argv else "full")
    print(render(run_cases(cases(), budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
