"""A user's hypothesis property test over our ops passes under hypothesis' default 200 ms
deadline, in a process with an empty kernel cache, once the compiler has started.

The property test runs in a fresh process with its own empty cache directory: one unrelated
kernel is compiled first (Numba's one-time start-up, as a conftest that warms the compiler
pays), then hypothesis draws dtypes, ranks, shapes and statics, so that most examples are a
new signature whose kernels compile inside the example's timing. Every example checks the
primal against NumPy and the pullback against the adjoint identity ``<dy, J dx> = <J^T dy,
dx>`` computed with NumPy's own op.

The ops drawn are the reductions (``sum``, ``mean``: one kernel a signature) and the view and
copy ops that compile none (``flip``, ``permute_dims``, ``concatenate``). The ops whose new
signature compiles a larger kernel or two (``broadcast_to``, ``roll``, ``repeat``, ``tile``,
``kron``: 215-575 ms on a quiet machine, ``bench/compile_time.py``) do not fit the default
deadline yet; ``STABLERULES_DEADLINE_OPS=all`` runs the same test over them too, to measure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROPERTY_TEST = textwrap.dedent(
    """
    import json, sys, time
    from datetime import timedelta

    import numpy as np
    from hypothesis import given, settings, strategies as st

    import stablerules as sr
    from stablerules import ArraySpec, Val

    OPS = sys.argv[1].split(",")
    MEASURE = len(sys.argv) > 2  # bench: no deadline, every example's time reported
    # The profile a user's run gets off CI (hypothesis loads a "ci" profile without a deadline
    # when CI is set): its deadline is the default, 200 ms.
    settings.load_profile("default")
    assert settings.default.deadline == timedelta(milliseconds=200), settings.default.deadline

    # The compiler has started: one kernel no example uses, compiled before the test.
    sr.precompile(sr.kron, ArraySpec((2,), np.int64), ArraySpec((3,), np.int64))
    start = sr.cache_info()

    def axes_of(draw, ndim):
        return tuple(sorted(draw(st.lists(st.integers(0, ndim - 1), unique=True, min_size=1, max_size=ndim))))

    @st.composite
    def cases(draw):
        op = draw(st.sampled_from(OPS))
        dtype = np.dtype(draw(st.sampled_from(["float32", "float64"])))
        ndim = draw(st.integers(1, 4))
        shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        x = rng.standard_normal(shape).astype(dtype)
        if op in ("sum", "mean"):
            axis = axes_of(draw, ndim)
            keep = draw(st.booleans())
            reference = getattr(np, op)
            return op, (x, Val(axis), Val(keep)), lambda v: reference(v, axis=axis, keepdims=keep)
        if op == "flip":
            axis = axes_of(draw, ndim)
            return op, (x, Val(axis)), lambda v: np.flip(v, axis=axis)
        if op == "permute_dims":
            order = tuple(draw(st.permutations(range(ndim))))
            return op, (x, Val(order)), lambda v: np.transpose(v, order)
        if op == "concatenate":
            axis = draw(st.integers(0, ndim - 1))
            other = list(shape)
            other[axis] = draw(st.integers(1, 3))
            y = rng.standard_normal(other).astype(dtype)
            return op, ((x, y), Val(axis)), None
        if op == "broadcast_to":
            target = tuple(draw(st.sampled_from([1, 3])) if n == 1 else n for n in shape)
            target = (draw(st.integers(1, 3)),) + target
            return op, (x, Val(target)), lambda v: np.broadcast_to(v, target)
        if op == "roll":
            axis = axes_of(draw, ndim)
            shift = tuple(draw(st.integers(-3, 3)) for _ in axis)
            return op, (x, Val(shift), Val(axis)), lambda v: np.roll(v, shift, axis=axis)
        if op == "repeat":
            axis = draw(st.integers(0, ndim - 1))
            count = draw(st.integers(1, 3))
            return op, (x, Val(count), Val(axis)), lambda v: np.repeat(v, count, axis=axis)
        if op == "tile":
            reps = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
            return op, (x, Val(reps)), lambda v: np.tile(v, reps)
        if op == "kron":
            other = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
            b = rng.standard_normal(other).astype(dtype)
            return op, (x, b), None
        raise AssertionError(op)

    def inner(a, b):
        return float(np.vdot(np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()))

    TIMES = []

    @settings(max_examples=200, database=None, derandomize=True, **({"deadline": None} if MEASURE else {}))
    @given(cases())
    def test_rules_of_new_signatures(case):
        began = time.perf_counter()
        before = sr.cache_info().compiles
        op, args, reference = case
        fn = getattr(sr, op)
        y, back = sr.rrule(fn, *args)
        rng = np.random.default_rng(1)
        dy = rng.standard_normal(np.shape(y)).astype(y.dtype)
        grads = back(dy)
        TIMES.append((time.perf_counter() - began, op, before != sr.cache_info().compiles))
        tol = 1e-4 if y.dtype == np.float32 else 1e-10
        if op == "concatenate":
            (a, b), axis = args[0], args[1].value
            np.testing.assert_array_equal(y, np.concatenate((a, b), axis=axis))
            da, db = grads[0]
            dx = (rng.standard_normal(a.shape), rng.standard_normal(b.shape))
            lhs = inner(dy, np.concatenate(dx, axis=axis))
            rhs = inner(da, dx[0]) + inner(db, dx[1])
        elif op == "kron":
            a, b = args
            np.testing.assert_allclose(y, np.kron(a, b), rtol=tol)
            da, db = grads
            dx = (rng.standard_normal(a.shape), rng.standard_normal(b.shape))
            lhs = inner(dy, np.kron(dx[0], b) + np.kron(a, dx[1]))
            rhs = inner(da, dx[0]) + inner(db, dx[1])
        else:
            x = args[0]
            np.testing.assert_allclose(y, reference(x), rtol=tol, atol=tol)
            dx = rng.standard_normal(x.shape)
            lhs = inner(dy, reference(dx))
            rhs = inner(grads[0], dx)
        assert abs(lhs - rhs) <= 1e-3 * max(1.0, abs(lhs)), (op, lhs, rhs)

    test_rules_of_new_signatures()
    info = sr.cache_info()
    compiled = sorted(1e3 * seconds for seconds, _, new in TIMES if new)
    per_op = {}
    for seconds, op, new in TIMES:
        if new:
            per_op.setdefault(op, []).append(round(1e3 * seconds, 1))
    print(json.dumps({
        "compiles": info.compiles - start.compiles,
        "examples": len(TIMES),
        "examples_that_compiled": len(compiled),
        "median_compiling_ms": compiled[len(compiled) // 2] if compiled else None,
        "max_ms": 1e3 * max(seconds for seconds, _, _ in TIMES),
        "per_op_compiling_ms": per_op,
    }))
    """
)

DEFAULT_OPS = "sum,mean,flip,permute_dims,concatenate"
ALL_OPS = DEFAULT_OPS + ",broadcast_to,roll,repeat,tile,kron"


def test_a_property_test_of_new_signatures_meets_the_default_deadline(tmp_path: Path) -> None:
    ops = os.environ.get("STABLERULES_DEADLINE_OPS", DEFAULT_OPS)
    ops = ALL_OPS if ops == "all" else ops
    environment = os.environ.copy()
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    environment["STABLERULES_CACHE_DIR"] = str(tmp_path / "cache")  # empty
    script = tmp_path / "property_test.py"
    script.write_text(PROPERTY_TEST)
    result = subprocess.run(
        [sys.executable, str(script), ops], capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=900
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    # Examples were new signatures whose kernels compiled inside them, under the deadline (the
    # reductions share a kernel across shapes and ranks where the reduced pattern agrees, so
    # fewer examples compile than are new plans).
    assert figures["compiles"] >= 5 and figures["examples_that_compiled"] >= 5, figures
