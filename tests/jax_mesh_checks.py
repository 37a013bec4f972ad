"""Every ``stablerules.jax`` op on a mesh of two CPU devices, in a process of its own.

XLA takes its host device count (``--xla_force_host_platform_device_count``) when JAX starts,
so ``tests/test_jax_distributed.py`` runs this file as a child process rather than changing
the devices of the test process (the other JAX tests run on one device). It prints one JSON
object, which the tests read: for each op case and each kind of mesh (explicit axes, JAX's
default, and auto axes), the largest absolute difference from the unsharded reference of

- ``shard_map`` forward, ``jax.grad`` (default ``check_vma=True``) and ``jax.jit(jax.grad)``,
- a plain ``jax.jit`` over ``NamedSharding`` inputs, forward and gradient,

and, for the kernel-backed ops, what the compiled HLO says: the FFI custom calls' operand
shapes under ``shard_map`` and under plain ``jit``, whether the latter all-gathers first, and
whether any host callback appears.

Each case's op leaves its sharded axis alone (or moves it: ``out_specs`` say where to), so
the ``shard_map`` of the op on the shards equals the op on the whole array, and ``jax.grad``
of a weighted sum equals the unsharded gradient, a replicated operand's included (kron's
``b``, summed over the shards by the transpose of JAX's ``pcast``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import stablerules.jax as srj
from stablerules import Val

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(26)


def rand(*shape: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    return RNG.standard_normal(shape)


@dataclass(frozen=True)
class Case:
    """``op`` on ``inputs`` sharded by ``in_specs`` (over mesh axis ``x``); its result is
    sharded by ``out_specs``. ``kernel``: the op runs our FFI kernels (its HLO is checked).
    ``whole``: the same op on the whole arrays, for ops whose statics name a shape."""

    name: str
    op: Callable[..., Any]
    inputs: tuple[np.ndarray[Any, np.dtype[np.float64]], ...]
    in_specs: tuple[P, ...]
    out_specs: Any
    kernel: bool = False
    whole: Callable[..., Any] | None = None  # the op on whole arrays, where its statics name shapes
    dtype: str = "float64"  # the inputs' (bfloat16, float16: SPEC section 15)


ROW = P("x")
COLUMN = P(None, "x")
CASES = [
    Case("repeat", lambda x: srj.repeat(x, Val(3), axis=Val(1)), (rand(4, 3),), (ROW,), ROW, True),
    Case("repeat inner/outer", lambda x: srj.repeat(x, inner=Val((1, 2)), outer=Val((1, 3))), (rand(4, 3),), (ROW,), ROW, True),
    Case("tile", lambda x: srj.tile(x, Val((1, 2))), (rand(4, 3),), (ROW,), ROW, True),
    # Large enough for our kernel (rules/kron.py: KRON_JAX_BELOW); the small one takes XLA's pullback.
    Case("kron", srj.kron, (rand(4, 3), rand(16, 30)), (ROW, P()), ROW, True),
    Case("kron small", srj.kron, (rand(4, 3), rand(2, 5)), (ROW, P()), ROW),
    Case("concatenate", lambda a, b: srj.concatenate((a, b), axis=Val(1)), (rand(4, 3), rand(4, 2)), (ROW, ROW), ROW),
    Case("stack", lambda a, b: srj.stack((a, b), axis=Val(1)), (rand(4, 3), rand(4, 3)), (ROW, ROW), ROW),
    Case("hstack", lambda a, b: srj.hstack((a, b)), (rand(4, 3), rand(4, 1)), (ROW, ROW), ROW),
    Case("vstack", lambda a, b: srj.vstack((a, b)), (rand(3, 4), rand(2, 4)), (COLUMN, COLUMN), COLUMN),
    Case("cat", lambda a, b: srj.cat(a, b, dims=Val(1)), (rand(4, 3), rand(4, 2)), (ROW, ROW), ROW),
    Case("cat block-diagonal", lambda a, b: srj.cat(a, b, dims=Val((0, 1))), (rand(2, 3, 4), rand(1, 2, 4)), (P(None, None, "x"),) * 2, P(None, None, "x")),
    Case("flip", lambda x: srj.flip(x, Val(1)), (rand(4, 3),), (ROW,), ROW),
    Case("roll", lambda x: srj.roll(x, Val(2), axis=Val(1)), (rand(4, 3),), (ROW,), ROW),
    Case("permute_dims", lambda x: srj.permute_dims(x, Val((1, 2, 0))), (rand(4, 3, 2),), (ROW,), P(None, None, "x")),
    Case("transpose", lambda x: srj.transpose(x), (rand(4, 3),), (ROW,), COLUMN),
    Case("swapaxes", lambda x: srj.swapaxes(x, Val(0), Val(-1)), (rand(4, 3, 2),), (ROW,), P(None, None, "x")),
    Case(
        "reshape",
        lambda x: srj.reshape(x, Val((2, 2, 3))),
        (rand(4, 6),),
        (ROW,),
        ROW,
        whole=lambda x: srj.reshape(x, Val((4, 2, 3))),
    ),
    Case(
        "broadcast_to",
        lambda x: srj.broadcast_to(x, Val((2, 2, 3))),
        (rand(4, 1, 3),),
        (ROW,),
        ROW,
        whole=lambda x: srj.broadcast_to(x, Val((4, 2, 3))),
    ),
    Case("sum", lambda x: srj.sum(x, axis=Val(1)), (rand(4, 3),), (ROW,), ROW),
    Case("mean", lambda x: srj.mean(x, axis=Val(1), keepdims=Val(True)), (rand(4, 3),), (ROW,), ROW),
    Case("pad", lambda x: srj.pad(x, Val((0, 0, 1, 2)), 0.5), (rand(4, 3),), (ROW,), ROW),
    Case("split", lambda x: srj.split(x, Val(2), axis=Val(1)), (rand(4, 6),), (ROW,), (ROW, ROW)),
]


# The 16-bit floats: the kernel ops (our float32 kernels inside the lowering), and a reduction
# whose transpose is made to accumulate in float32 (broadcast_to) and one XLA reduction (sum).
for _dtype in ("bfloat16", "float16"):
    CASES += [
        Case(f"repeat {_dtype}", lambda x: srj.repeat(x, Val(3), axis=Val(1)), (rand(4, 3),), (ROW,), ROW, True, dtype=_dtype),
        Case(f"tile {_dtype}", lambda x: srj.tile(x, Val((1, 2))), (rand(4, 3),), (ROW,), ROW, True, dtype=_dtype),
        Case(f"kron {_dtype}", srj.kron, (rand(4, 3), rand(16, 30)), (ROW, P()), ROW, True, dtype=_dtype),
        Case(
            f"broadcast_to {_dtype}",
            lambda x: srj.broadcast_to(x, Val((2, 2, 3))),
            (rand(4, 1, 3),),
            (ROW,),
            ROW,
            whole=lambda x: srj.broadcast_to(x, Val((4, 2, 3))),
            dtype=_dtype,
        ),
        Case(f"sum {_dtype}", lambda x: srj.sum(x, axis=Val(1)), (rand(4, 3),), (ROW,), ROW, dtype=_dtype),
    ]


def weighted_sum(op: Callable[..., Any], weights: Any) -> Callable[..., Any]:
    """A scalar loss whose gradient is the op's pullback of a dense, non-constant cotangent."""

    def loss(*xs: Any) -> Any:
        leaves = jax.tree_util.tree_leaves(op(*xs))
        return sum(jnp.sum(leaf * weight) for leaf, weight in zip(leaves, weights))

    return loss


def difference(ours: Any, reference: Any) -> float:
    pairs = zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(reference), strict=True)
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0)) for a, b in pairs)


CUSTOM_CALL = re.compile(r"=\s*(.+?)\s+custom-call\(.*custom_call_target=\"(stablerules_\w+)\"")
OPERANDS = re.compile(r"operand_layout_constraints=\{((?:\w+\[[\d,]*\]\{[\d,]*\}(?:, )?)+)\}")
ARRAY_TYPE = re.compile(r"\w+\[[\d,]*\]")
CALLBACK = re.compile(r"callback", re.IGNORECASE)


def custom_calls(compiled_text: str) -> list[dict[str, Any]]:
    """Our FFI custom calls in compiled HLO: result and operand types (layouts dropped) and
    target name."""
    found = []
    for line in compiled_text.splitlines():
        match = CUSTOM_CALL.search(line)
        operands = OPERANDS.search(line)
        if match and operands:
            found.append(
                {
                    "results": ARRAY_TYPE.findall(match.group(1)),
                    "operands": ARRAY_TYPE.findall(operands.group(1)),
                    "target": match.group(2),
                }
            )
    return found


def hlo(function: Any, *inputs: Any) -> str:
    """The compiled (partitioned, optimized) HLO of ``function`` for ``inputs``."""
    text = function.lower(*inputs).compile().as_text()
    assert isinstance(text, str)
    return text


def check(case: Case, mesh: jax.sharding.Mesh) -> dict[str, Any]:
    inputs = tuple(
        jax.device_put(jnp.asarray(x, case.dtype), NamedSharding(mesh, spec)) for x, spec in zip(case.inputs, case.in_specs)
    )
    plain = tuple(jnp.asarray(x, case.dtype) for x in case.inputs)
    whole = case.whole or case.op
    expected = whole(*plain)
    weights = [jnp.asarray(RNG.standard_normal(leaf.shape)) for leaf in jax.tree_util.tree_leaves(expected)]
    argnums = tuple(range(len(inputs)))
    expected_grad = jax.grad(weighted_sum(whole, weights), argnums)(*plain)

    sharded = jax.shard_map(case.op, mesh=mesh, in_specs=case.in_specs, out_specs=case.out_specs)
    loss = weighted_sum(sharded, weights)
    result: dict[str, Any] = {
        "forward": difference(sharded(*inputs), expected),
        "jit forward": difference(jax.jit(sharded)(*inputs), expected),
        "grad": difference(jax.grad(loss, argnums)(*inputs), expected_grad),
        "jit grad": difference(jax.jit(jax.grad(loss, argnums))(*inputs), expected_grad),
        "plain jit forward": difference(jax.jit(whole)(*inputs), expected),
        "plain jit grad": difference(jax.jit(jax.grad(weighted_sum(whole, weights), argnums))(*inputs), expected_grad),
    }
    compiled = "\n".join(
        hlo(jax.jit(function), *inputs) for function in (sharded, jax.grad(loss, argnums))
    )
    plain_compiled = hlo(jax.jit(whole), *inputs)
    result["shard_map calls"] = custom_calls(compiled)
    result["plain jit calls"] = custom_calls(plain_compiled)
    result["plain jit all-gathers"] = "all-gather" in plain_compiled
    result["callbacks"] = bool(CALLBACK.search(compiled) or CALLBACK.search(plain_compiled))
    result["scale"] = max(
        float(np.max(np.abs(np.asarray(leaf, np.float64)), initial=0.0))
        for leaf in jax.tree_util.tree_leaves((expected, expected_grad))
    )
    result["dtypes"] = sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(jax.jit(jax.grad(loss, argnums))(*inputs))})
    result["shard shape"] = list(inputs[0].addressable_shards[0].data.shape)
    result["input shape"] = list(inputs[0].shape)
    return result


def main() -> int:
    if jax.device_count() != 2:
        print(json.dumps({"error": f"expected 2 CPU devices, got {jax.devices()}"}))
        return 1
    meshes = {
        "explicit": jax.make_mesh((2,), ("x",), axis_types=(AxisType.Explicit,)),
        "auto": jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,)),
    }
    report: dict[str, Any] = {"default axis types": [str(t) for t in jax.make_mesh((2,), ("x",)).axis_types]}
    for kind, mesh in meshes.items():
        with jax.set_mesh(mesh):
            for case in CASES:
                try:
                    report[f"{kind}: {case.name}"] = check(case, mesh)
                except Exception as error:  # reported per case, so one failure names its op
                    report[f"{kind}: {case.name}"] = {"error": f"{type(error).__name__}: {error}"[:2000]}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
