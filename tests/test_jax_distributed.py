"""``stablerules.jax`` inside JAX's distributed modes, on two CPU devices.

- ``jax.shard_map`` over a ``Mesh`` (explicit axes, JAX's default, and auto axes): every
  ``srj`` op's forward, ``jax.grad`` (``check_vma=True``, the default) and ``jax.jit`` equal
  the unsharded results (float64, to rounding), our FFI kernels running on shard-sized
  buffers (read from the compiled HLO), with no host callback anywhere.
- A plain ``jax.jit`` over ``NamedSharding`` inputs: correct; XLA all-gathers the input of
  our custom call first (it has no partitioning rule) and every device computes the whole
  result, which is replicated. Under ``shard_map`` nothing is gathered.
- JAX's persistent compilation cache hits, in a second process, for a jitted ``grad``
  through ``srj`` ops (a host callback or ``custom_partitioning`` would prevent that).

The mesh checks run in a child process (``tests/jax_mesh_checks.py``): XLA fixes its host
device count when JAX starts, and the other JAX tests of this session run on one device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-12  # float64; the references are the same ops on one device
MESHES = ("explicit", "auto")
KERNEL_CASES = ("repeat", "repeat inner/outer", "tile", "kron")
OTHER_CASES = (
    "concatenate", "stack", "hstack", "vstack", "cat", "cat block-diagonal", "flip", "roll",
    "permute_dims", "transpose", "swapaxes", "reshape", "broadcast_to", "sum", "mean", "pad", "split",
)  # fmt: skip
HALF_DTYPES = ("bfloat16", "float16")
HALF_CASES = tuple(f"{case} {dtype}" for dtype in HALF_DTYPES for case in ("repeat", "tile", "kron", "broadcast_to", "sum"))
# 16-bit results against the unsharded ones in the same format: a replicated operand's
# gradient (kron's b) is the sum of the shards' gradients, each rounded to the format once
# and then added in it, where the unsharded one rounds once: a few units in the last place.
HALF_TOLERANCE = {"bfloat16": 2.0**-6, "float16": 2.0**-9}  # relative to the largest value
# The custom calls of the 16-bit kernel cases: our float32 kernels on the shards (the format
# converted around them inside the lowering); the plain-jit forward on an explicit mesh moves
# repeat's and tile's bits as uint16 and computes kron's products in float32.
HALF_PLAIN_JIT = {"repeat": "u16", "tile": "u16", "kron": "f32"}
QUANTITIES = ("forward", "jit forward", "grad", "jit grad", "plain jit forward", "plain jit grad")

# (operand types, result types) of each kernel op's custom calls in the compiled HLO of
# ``jit(shard_map(op))`` and ``jit(grad(... shard_map(op) ...))``: the pullback (the forward is
# XLA's own ops), on shards of 2 rows of the 4-row inputs (kron's second operand is replicated, 16 x 30).
SHARD_CALLS: dict[str, set[tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "repeat": {(("f64[2,9]",), ("f64[2,3]",))},
    "repeat inner/outer": {(("f64[2,18]",), ("f64[2,3]",))},
    "tile": {(("f64[2,6]",), ("f64[2,3]",))},
    "kron": {(("f64[32,90]", "f64[2,3]", "f64[16,30]"), ("f64[2,3]", "f64[16,30]"))},
}
# The forwards under a plain jit of inputs sharded over an explicit mesh axis: one call of our
# forward kernel on the gathered (whole) arrays.
PLAIN_JIT_CALLS: dict[str, set[tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "repeat": {(("f64[4,3]",), ("f64[4,9]",))},
    "repeat inner/outer": {(("f64[4,3]",), ("f64[4,18]",))},
    "tile": {(("f64[4,3]",), ("f64[4,6]",))},
    "kron": {(("f64[4,3]", "f64[16,30]"), ("f64[64,90]",))},
}


def _child_environment(**extra: str) -> dict[str, str]:
    environment = {**os.environ, "JAX_PLATFORMS": "cpu", "OMP_NUM_THREADS": "1", **extra}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    return environment


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(HERE / "jax_mesh_checks.py")],
        capture_output=True,
        text=True,
        env=_child_environment(),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _calls(entry: list[dict[str, Any]]) -> set[tuple[tuple[str, ...], tuple[str, ...]]]:
    return {(tuple(call["operands"]), tuple(call["results"])) for call in entry}


def test_the_default_mesh_has_explicit_axes(report: dict[str, Any]) -> None:
    # What jax.make_mesh gives a user who names no axis types; the "explicit" runs are it.
    assert report["default axis types"] == ["AxisType.Explicit"]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("case", KERNEL_CASES + OTHER_CASES)
def test_sharded_results_equal_the_unsharded_ones(report: dict[str, Any], mesh: str, case: str) -> None:
    entry = report[f"{mesh}: {case}"]
    assert "error" not in entry, entry.get("error")
    differences = {quantity: entry[quantity] for quantity in QUANTITIES}
    assert max(differences.values()) <= TOLERANCE, differences
    assert entry["shard shape"] != entry["input shape"]  # the first input really is split
    assert not entry["callbacks"]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_our_kernels_run_on_each_shard_under_shard_map(report: dict[str, Any], mesh: str, case: str) -> None:
    entry = report[f"{mesh}: {case}"]
    assert _calls(entry["shard_map calls"]) == SHARD_CALLS[case]
    assert all(call["target"].startswith("stablerules_") for call in entry["shard_map calls"])


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_a_plain_jit_of_sharded_inputs_gathers_them_first(report: dict[str, Any], mesh: str, case: str) -> None:
    entry = report[f"{mesh}: {case}"]
    if mesh == "explicit":  # an explicitly sharded operand: the forward is our kernel, gathered
        assert _calls(entry["plain jit calls"]) == PLAIN_JIT_CALLS[case]
        assert entry["plain jit all-gathers"]
    else:  # the forward is XLA's own ops, which XLA partitions itself: no custom call, no gather
        assert entry["plain jit calls"] == [] and not entry["plain jit all-gathers"]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("case", HALF_CASES)
def test_sixteen_bit_floats_under_shard_map(report: dict[str, Any], mesh: str, case: str) -> None:
    entry = report[f"{mesh}: {case}"]
    assert "error" not in entry, entry.get("error")
    op, dtype = case.rsplit(" ", 1)
    assert entry["dtypes"] == [dtype]  # gradients have the primals' dtype
    differences = {quantity: entry[quantity] for quantity in QUANTITIES}
    assert max(differences.values()) <= HALF_TOLERANCE[dtype] * entry["scale"], differences
    if op != "kron":  # no sum over shards: each shard's values are the unsharded ones, bit for bit
        assert max(differences.values()) == 0.0, differences
    assert entry["shard shape"] != entry["input shape"] and not entry["callbacks"]
    if op in KERNEL_CASES:
        wide = {
            (tuple(t.replace("f64", "f32") for t in operands), tuple(t.replace("f64", "f32") for t in results))
            for operands, results in SHARD_CALLS[op]
        }
        assert _calls(entry["shard_map calls"]) == wide
        if mesh == "explicit":
            moved = HALF_PLAIN_JIT[op]
            plain = {
                (tuple(t.replace("f64", moved) for t in operands), tuple(t.replace("f64", moved) for t in results))
                for operands, results in PLAIN_JIT_CALLS[op]
            }
            assert _calls(entry["plain jit calls"]) == plain
    else:
        assert entry["shard_map calls"] == [] and entry["plain jit calls"] == []


@pytest.mark.parametrize("mesh", MESHES)
def test_a_small_kron_takes_xlas_pullback_on_each_shard(report: dict[str, Any], mesh: str) -> None:
    """A kron below ``KRON_JAX_BELOW`` (rules/kron.py) is XLA's own ops on each shard, its
    pullback JAX's autodiff of them: no custom call under ``shard_map``; under a plain ``jit``
    of operands sharded over an explicit axis, our kernels, as for the other kernel ops."""
    entry = report[f"{mesh}: kron small"]
    assert "error" not in entry, entry.get("error")
    differences = {quantity: entry[quantity] for quantity in QUANTITIES}
    assert max(differences.values()) <= TOLERANCE, differences
    assert entry["shard_map calls"] == []
    if mesh == "explicit":
        assert _calls(entry["plain jit calls"]) == {(("f64[4,3]", "f64[2,5]"), ("f64[8,15]",))}
    else:
        assert entry["plain jit calls"] == []


@pytest.mark.parametrize("case", OTHER_CASES)
def test_the_other_ops_are_xlas_own(report: dict[str, Any], case: str) -> None:
    for mesh in MESHES:
        entry = report[f"{mesh}: {case}"]
        assert entry["shard_map calls"] == [] and entry["plain jit calls"] == []


_CACHED_PROCESS = r"""
import json, os, sys
import jax, jax.numpy as jnp
import jax.monitoring
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
events = []
jax.monitoring.register_event_listener(lambda name, **_: events.append(name))
import stablerules.jax as srj
from stablerules import Val

def loss(x, b):
    y = srj.kron(srj.repeat(x, Val(2), axis=Val(1)), b)
    return jnp.sum(srj.tile(y, Val((1, 2))) ** 2)

x = jnp.arange(6.0).reshape(2, 3)
b = jnp.arange(4.0).reshape(2, 2) / 3
step = jax.jit(jax.grad(loss, (0, 1)))
before = (events.count("/jax/compilation_cache/cache_hits"), events.count("/jax/compilation_cache/cache_misses"))
grads = jax.block_until_ready(step(x, b))
hits = events.count("/jax/compilation_cache/cache_hits") - before[0]
misses = events.count("/jax/compilation_cache/cache_misses") - before[1]
text = step.lower(x, b).as_text()
print(json.dumps({"hits": hits, "misses": misses, "grads": [g.tolist() for g in grads],
                  "custom_calls": text.count("stablerules_"), "callback": "callback" in text}))
"""


@pytest.mark.slow
def test_jaxs_persistent_compilation_cache_hits_in_a_second_process(tmp_path: Path) -> None:
    cache = tmp_path / "jax-cache"

    def run() -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", _CACHED_PROCESS, str(cache)],
            capture_output=True,
            text=True,
            env=_child_environment(STABLERULES_CACHE_DIR=str(tmp_path / "stablerules")),
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    first, second = run(), run()
    assert first["custom_calls"] > 0 and not first["callback"]
    assert first["misses"] == 1 and first["hits"] == 0
    assert second["hits"] == 1 and second["misses"] == 0
    assert first["grads"] == second["grads"]
