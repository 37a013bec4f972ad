"""A long hand-chained tape: a Kalman-style covariance recursion's loss and gradient with
``sr.rrule(sr.kron, ...)`` per step, against ``np.kron`` and a hand-written kron pullback.

    python bench/tape.py [--steps 200,2000,8000] [--n 2] [--rounds 5] [--json PATH]

Each step propagates a vectorized covariance, ``p <- kron(F_t, F_t) @ p + q`` (``vec(F P F^T)``),
and keeps on the tape what its backward step needs: the kron's pullback (or, for the stock
side, ``F_t``) with ``K_t`` and the previous ``p``. The loss is ``p_T . p_T``; the backward pass
walks the tape in reverse and gives ``dF_t`` for every step. Both sides compute the same
gradient (checked), with Python's garbage collector on, as a user's program runs.

Reported per ``T``: the per-step time (forward + backward, the median of ``--rounds`` runs,
more for shorter tapes so that every ``T`` times as many steps) of each side,
their ratio (``sr / stock``; the goal is at most 0.85 at every ``T``) and the spread of our
per-step time across the ``T``s (goal: within 10%), plus the objects the collector tracks per
step of each tape (``len(gc.get_objects())`` before and after building it).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

import stablerules as sr

Array = npt.NDArray[np.float64]
Tape = list[tuple[Any, Array, Array]]


def _inputs(steps: int, n: int) -> tuple[Array, Array, Array]:
    rng = np.random.default_rng(0)
    # Near-orthogonal transitions scaled below 1, so p stays bounded over 8000 steps.
    F = np.empty((steps, n, n))
    for t in range(steps):
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        F[t] = 0.97 * q
    p0 = rng.standard_normal(n * n)
    q_noise = 0.01 * rng.standard_normal(n * n)
    return F, p0, q_noise


def _forward_sr(F: Array, p: Array, q: Array) -> tuple[Array, Tape]:
    tape: Tape = []
    kron, rrule = sr.kron, sr.rrule
    for t in range(len(F)):
        K, back = rrule(kron, F[t], F[t])
        tape.append((back, K, p))
        p = K @ p + q
    return p, tape


def _backward_sr(p: Array, tape: Tape, n: int) -> Array:
    dF = np.empty((len(tape), n, n))
    dp = 2.0 * p
    for t in range(len(tape) - 1, -1, -1):
        back, K, p_prev = tape[t]
        da, db = back(np.outer(dp, p_prev))
        dF[t] = da + db
        dp = K.T @ dp
    return dF


def _kron_pullback(dK: Array, a: Array, b: Array) -> tuple[Array, Array]:
    """The hand-written pullback of ``np.kron`` for 2-D ``a`` (m, n) and ``b`` (p, q)."""
    m, n = a.shape
    p, q = b.shape
    d4 = dK.reshape(m, p, n, q)
    return np.tensordot(d4, b, axes=([1, 3], [0, 1])), np.tensordot(d4, a, axes=([0, 2], [0, 1]))


def _forward_np(F: Array, p: Array, q: Array) -> tuple[Array, Tape]:
    tape: Tape = []
    kron = np.kron
    for t in range(len(F)):
        K = kron(F[t], F[t])
        tape.append((F[t], K, p))
        p = K @ p + q
    return p, tape


def _backward_np(p: Array, tape: Tape, n: int) -> Array:
    dF = np.empty((len(tape), n, n))
    dp = 2.0 * p
    for t in range(len(tape) - 1, -1, -1):
        F_t, K, p_prev = tape[t]
        da, db = _kron_pullback(np.outer(dp, p_prev), F_t, F_t)
        dF[t] = da + db
        dp = K.T @ dp
    return dF


def _sides(side: str) -> tuple[Callable[[Array, Array, Array], tuple[Array, Tape]], Callable[[Array, Tape, int], Array]]:
    if side == "sr":
        return _forward_sr, _backward_sr
    return _forward_np, _backward_np


def _run(side: str, F: Array, p0: Array, q: Array) -> tuple[float, Array]:
    """One timed loss + gradient: (seconds, dF)."""
    forward, backward = _sides(side)
    gc.collect()
    start = time.perf_counter()
    p, tape = forward(F, p0, q)
    dF = backward(p, tape, F.shape[1])
    seconds = time.perf_counter() - start
    del tape
    return seconds, dF


def _tracked(side: str, F: Array, p0: Array, q: Array) -> int:
    """The objects the collector tracks for one side's whole tape (an untimed run: walking the
    heap between a timed forward and backward would evict the caches the backward reads, a
    fixed cost per run that the short tapes would carry most)."""
    forward, _ = _sides(side)
    gc.collect()
    before = len(gc.get_objects())
    _, tape = forward(F, p0, q)
    tracked = len(gc.get_objects()) - before
    del tape
    return tracked


def measure(steps: list[int], n: int, rounds: int) -> dict[str, Any]:
    assert gc.isenabled()
    rows = []
    for T in steps:
        F, p0, q = _inputs(T, n)
        _run("sr", F[:4], p0, q)  # compile or load the kernels, outside the timings
        times: dict[str, list[float]] = {"sr": [], "np": []}
        grads: dict[str, Array] = {}
        # As many steps timed at every T (short tapes repeat more), so each median is as steady.
        for _ in range(max(rounds, rounds * max(steps) // T)):
            for side in ("sr", "np"):
                seconds, dF = _run(side, F, p0, q)
                times[side].append(seconds)
                grads[side] = dF
        tracked = {side: _tracked(side, F, p0, q) for side in ("sr", "np")}
        np.testing.assert_allclose(grads["sr"], grads["np"], rtol=1e-9, atol=1e-12)
        sr_step = statistics.median(times["sr"]) / T
        np_step = statistics.median(times["np"]) / T
        rows.append(
            {
                "T": T,
                "sr_us_per_step": sr_step * 1e6,
                "np_us_per_step": np_step * 1e6,
                "ratio": sr_step / np_step,
                "sr_tracked_per_step": tracked["sr"] / T,
                "np_tracked_per_step": tracked["np"] / T,
            }
        )
    sr_steps = [row["sr_us_per_step"] for row in rows]
    return {
        "n": n,
        "rows": rows,
        "spread": max(sr_steps) / min(sr_steps) - 1.0,
        "max_ratio": max(row["ratio"] for row in rows),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default="200,2000,8000")
    parser.add_argument("--n", type=int, default=2, help="state size: the krons are n x n by n x n")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    result = measure([int(value) for value in args.steps.split(",")], args.n, args.rounds)
    for row in result["rows"]:
        print(
            f"T={row['T']:<6d} sr {row['sr_us_per_step']:7.2f} us/step  stock {row['np_us_per_step']:7.2f} us/step"
            f"  ratio {row['ratio']:.3f}  tracked/step sr {row['sr_tracked_per_step']:.1f} stock {row['np_tracked_per_step']:.1f}"
        )
    print(
        f"per-step spread over T: {100 * result['spread']:.1f}% (goal <= 10%); "
        f"worst ratio {result['max_ratio']:.3f} (goal <= 0.85)"
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
