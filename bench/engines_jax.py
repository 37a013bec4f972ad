"""``stablerules.jax`` against native ``jax.numpy`` (issue 17's must-show rows).

- W3 (``repeat(x(200,3,4), inner=(7,1,10), outer=(4,1,2))``) and ``kron((30,40),(50,30))``:
  ``jit`` of ``(y, vjp(f, *x)[1](dy))`` with a dense cotangent, ours vs the same written in
  ``jnp`` (goal: at least 2.5x).
- a trivial op's per-call overhead: ``jit(repeat(x(8,), Val(2)))`` vs ``jit(jnp.repeat)``,
  both one tiny op inside XLA (goal: ours at most 1.3x native).
- a small CNN block trained under ``jax.jit`` (:func:`cnn_cases`): a 3x3 convolution, a 2x2
  mean pool written as a reshape, a nearest-neighbour upsample by ``repeat``, a channel
  concatenation and a channel-mixing layer whose weight is a ``kron`` of two factors; batch
  8, 16-96 channels, 16x16 images; one SGD step per call, ours against the same model on
  ``jnp`` ops (goal: at least as fast), with XLA given one CPU and two (``--threads``: a
  child process per count, as XLA sizes its thread pool when it starts).
- a fresh process with a warm kernel cache (:func:`fresh_process_rows`): import and first
  ``jit(grad)`` through ``srj`` ops, against the same function on ``jnp`` ops in another
  fresh process, alternating; medians (goal: ours at most 1.2x), and whether Numba was
  imported (it must not be: the FFI handlers load from their object code).

Run alone: ``python bench/engines_jax.py [--quick] [--cnn | --threads N | --fresh]``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if __name__ == "__main__" and "--threads" in sys.argv and hasattr(os, "sched_setaffinity"):
    # Before JAX starts: XLA sizes its CPU thread pool by the CPUs this process may use.
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: int(sys.argv[sys.argv.index("--threads") + 1])])

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
    # The CNN block with the CPUs this process has (``--cnn`` runs it on one and on two).
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    out.extend(cnn_cases(cpus))
    return out


# ---------------------------------------------------------------------------------------------
# A small CNN block, trained
# ---------------------------------------------------------------------------------------------

CNN_BATCH, CNN_CHANNELS, CNN_HIDDEN, CNN_SIZE = 8, 16, 32, 16
KRON_A, KRON_B = (8, 8), (8, 10)  # kron weight: (64, 80) over the 16 + 32 + 32 concatenated channels


def _cnn_loss(ops: str) -> Callable[..., jax.Array]:
    """The block on ``srj`` ops (``ops="ours"``) or the same on ``jnp`` ops (``"native"``)."""
    n, c, h, s = CNN_BATCH, CNN_CHANNELS, CNN_HIDDEN, CNN_SIZE

    def loss(params: dict[str, jax.Array], x: jax.Array, target: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(
            jax.lax.conv_general_dilated(x, params["conv"], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        )
        if ops == "ours":
            pooled = jnp.mean(srj.reshape(hidden, Val((n, h, s // 2, 2, s // 2, 2))), axis=(3, 5))
            upsampled = srj.repeat(pooled, inner=Val((1, 1, 2, 2)))
            joined = srj.concatenate((x, hidden, upsampled), axis=Val(1))
            weight = srj.kron(params["a"], params["b"])
        else:
            pooled = jnp.mean(jnp.reshape(hidden, (n, h, s // 2, 2, s // 2, 2)), axis=(3, 5))
            upsampled = jnp.repeat(jnp.repeat(pooled, 2, axis=2), 2, axis=3)
            joined = jnp.concatenate((x, hidden, upsampled), axis=1)
            weight = jnp.kron(params["a"], params["b"])
        out = jnp.einsum("oc,nchw->nohw", weight, joined)
        return jnp.mean((out - target) ** 2)

    return loss


def _cnn_step(ops: str) -> Callable[..., tuple[dict[str, jax.Array], jax.Array]]:
    loss = _cnn_loss(ops)

    def step(params: dict[str, jax.Array], x: jax.Array, target: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x, target)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), value

    return jax.jit(step)


def cnn_cases(threads: int) -> list[EngineCase]:
    rng = np.random.default_rng(1)
    params = {
        "conv": jnp.asarray(rng.standard_normal((CNN_HIDDEN, CNN_CHANNELS, 3, 3)) / 12),
        "a": jnp.asarray(rng.standard_normal(KRON_A) / 3),
        "b": jnp.asarray(rng.standard_normal(KRON_B) / 3),
    }
    x = jnp.asarray(rng.standard_normal((CNN_BATCH, CNN_CHANNELS, CNN_SIZE, CNN_SIZE)))
    out_channels = KRON_A[0] * KRON_B[0]
    target = jnp.asarray(rng.standard_normal((CNN_BATCH, out_channels, CNN_SIZE, CNN_SIZE)))
    ours, native = _cnn_step("ours"), _cnn_step("native")
    # A few steps of training: the same parameters and losses, step by step.
    p_ours, p_native = params, params
    for _ in range(3):
        p_ours, l_ours = ours(p_ours, x, target)
        p_native, l_native = native(p_native, x, target)
        _check((p_ours, l_ours), (p_native, l_native), "CNN block training step")
    block = jax.block_until_ready
    return [
        EngineCase(
            "jax",
            f"CNN block SGD step under jit, {threads} thread{'s' if threads > 1 else ''}",
            lambda: block(ours(params, x, target)),
            lambda: block(native(params, x, target)),
            1.0,
        )
    ]


# ---------------------------------------------------------------------------------------------
# A fresh process with a warm cache: import and first jit(grad)
# ---------------------------------------------------------------------------------------------

_FRESH = r"""
import os, sys, time
began = time.perf_counter()
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
if sys.argv[1] == "ours":
    import stablerules.jax as srj
    from stablerules import Val
    def loss(x, b):
        y = srj.kron(srj.repeat(x, Val(2), axis=Val(1)), b)
        return jnp.sum(srj.tile(y, Val((1, 2))) ** 2)
else:
    def loss(x, b):
        y = jnp.kron(jnp.repeat(x, 2, axis=1), b)
        return jnp.sum(jnp.tile(y, (1, 2)) ** 2)
imported = time.perf_counter()
x = jnp.arange(6.0).reshape(2, 3)
b = jnp.arange(4.0).reshape(2, 2)
jax.block_until_ready(jax.jit(jax.grad(loss, (0, 1)))(x, b))
done = time.perf_counter()
print(done - began, done - imported, "numba" in sys.modules)
"""


def fresh_process_rows(rounds: int) -> str:
    """Alternating fresh processes (ours, then jnp's), the kernel cache warmed by a first
    run; bytecode cached as an installed package has it. Medians of ``rounds`` pairs."""
    import statistics
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="srj-fresh-") as scratch:
        environment = {
            key: value for key, value in os.environ.items() if key not in {"PYTHONDONTWRITEBYTECODE", "STABLERULES_CACHE_DIR"}
        }
        environment.update(JAX_PLATFORMS="cpu", STABLERULES_CACHE_DIR=f"{scratch}/cache", PYTHONPYCACHEPREFIX=f"{scratch}/pyc")

        def run(which: str) -> tuple[float, float, bool]:
            done = subprocess.run(
                [sys.executable, "-c", _FRESH, which], capture_output=True, text=True, env=environment, check=True, timeout=300
            )
            total, call, numba = done.stdout.split()
            return float(total), float(call), numba == "True"

        run("ours"), run("native")  # warm the kernel cache and the bytecode
        samples: dict[str, list[tuple[float, float, bool]]] = {"ours": [], "native": []}
        for _ in range(rounds):
            for which in ("ours", "native"):
                samples[which].append(run(which))
    medians = {
        which: (statistics.median(t for t, _, _ in rows), statistics.median(c for _, c, _ in rows))
        for which, rows in samples.items()
    }
    numba = any(n for _, _, n in samples["ours"])
    (ours_total, ours_call), (native_total, native_call) = medians["ours"], medians["native"]
    ratio = ours_total / native_total
    return (
        f"fresh process, warm cache, {rounds} alternating pairs (medians): import + first jit(grad) "
        f"{ours_total:.3f} s ours vs {native_total:.3f} s jnp (ours/jnp {ratio:.2f}, goal <= 1.2: "
        f"{'pass' if ratio <= 1.2 else 'FAIL'}); the first jit(grad) alone {ours_call:.3f} s vs "
        f"{native_call:.3f} s ({ours_call / native_call:.2f}); numba imported: {numba}"
    )


def cnn_report(quick: bool) -> str:
    """The CNN rows with XLA on one CPU and on two, each in a child process."""
    import subprocess

    tables = []
    for threads in (1, 2):
        command = [sys.executable, __file__, "--threads", str(threads)] + (["--quick"] if quick else [])
        tables.append(subprocess.run(command, capture_output=True, text=True, check=True, timeout=900).stdout.strip())
    return "\n".join(tables)


def _threads_argument(argv: list[str]) -> int | None:
    if "--threads" not in argv:
        return None
    return int(argv[argv.index("--threads") + 1])


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    budget = Budget.for_mode("quick" if quick else "full")
    threads = _threads_argument(argv)
    if threads is not None:  # a child: XLA given `threads` CPUs before it starts
        print(render(run_cases(cnn_cases(threads), budget)))
        return 0
    if "--fresh" in argv:
        print(fresh_process_rows(3 if quick else 7))
        return 0
    if "--cnn" in argv:
        print(cnn_report(quick))
        return 0
    print(render(run_cases(cases(), budget)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
