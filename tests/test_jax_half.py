"""``stablerules.jax`` on bfloat16 and float16 (SPEC section 15), inside ``jit``, ``grad``,
``vjp``, ``jvp`` and ``vmap`` (``shard_map``: ``tests/test_jax_distributed.py``).

- Forwards equal ``jnp``'s bit for bit (compared as ``uint16``), dtype included.
- Pullbacks equal a float64 reference (``jax.vjp`` of ``jnp``'s op in float64) rounded once to
  the format (round-to-nearest-even, :func:`round_once`, written here from ``frexp``: ml_dtypes'
  own float64 -> bfloat16 cast goes through float32, a second rounding). On data whose float32
  sums are exact (small multiples of 1/16) that is bit for bit for every op but ``mean``, whose
  pullback is ``jnp``'s ``ct / n`` in float32 then rounded (two roundings: within one ulp). On
  general normal data, within one ulp: the float32 accumulation of the kernels and of XLA's
  float32 scatter-adds and reductions rounds when a sum needs more than 24 bits, and kron's
  kernel rounds its float64 sums to float32 before the format (double rounding).
- A bfloat16 ``jax.jit(jax.grad(loss))`` of a small U-Net-like decoder with ``srj.repeat``
  upsampling has the gradients of the same model with ``jnp.repeat``, within bfloat16's tolerance.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, assert_type

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stablerules as sr
import stablerules.jax as srj
from stablerules import Val

jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]

DTYPES = ["bfloat16", "float16"]
SIGNIFICAND_BITS = {"bfloat16": 8, "float16": 11}

IDX = np.array([2, 0, 2, 1, 2])  # repeated: the scatter-adds add
ALONG = np.array([[1, -1, 1], [0, 0, 3], [2, 2, 2]])
UNIQUE = np.array([2, 0])

# (name, srj call, jnp's own op, shapes of the differentiable arguments). Indices are constants.
CALLS: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[tuple[int, ...], ...]]] = [
    ("repeat", lambda x: srj.repeat(x, Val(3), axis=Val(1)), lambda x: jnp.repeat(x, 3, axis=1), ((3, 4),)),
    ("repeat inner/outer", lambda x: srj.repeat(x, inner=Val((2, 1)), outer=Val((1, 3))),
     lambda x: jnp.tile(jnp.repeat(x, 2, axis=0), (1, 3)), ((3, 4),)),
    ("tile", lambda x: srj.tile(x, Val((2, 3))), lambda x: jnp.tile(x, (2, 3)), ((3, 4),)),
    ("kron", srj.kron, jnp.kron, ((3, 4), (2, 3))),
    ("kron 1-d by 3-d", srj.kron, jnp.kron, ((3,), (2, 2, 3))),
    ("concatenate", lambda a, b: srj.concatenate((a, b), axis=Val(1)), lambda a, b: jnp.concatenate((a, b), axis=1), ((3, 4), (3, 2))),
    ("stack", lambda a, b: srj.stack((a, b), axis=Val(1)), lambda a, b: jnp.stack((a, b), axis=1), ((3, 4), (3, 4))),
    ("hstack", lambda a, b: srj.hstack((a, b)), lambda a, b: jnp.hstack((a, b)), ((3, 4), (3, 1))),
    ("vstack", lambda a, b: srj.vstack((a, b)), lambda a, b: jnp.vstack((a, b)), ((3, 4), (2, 4))),
    ("cat", lambda a, b: srj.cat(a, b, dims=Val(1)), lambda a, b: jnp.concatenate((a, b), axis=1), ((3, 4), (3, 2))),
    ("cat block-diagonal", lambda a, b: srj.cat(a, b, dims=Val((0, 1))),
     lambda a, b: jnp.block([[a, jnp.zeros((3, 2), a.dtype)], [jnp.zeros((2, 4), a.dtype), b]]), ((3, 4), (2, 2))),
    ("flip", lambda x: srj.flip(x, Val(0)), lambda x: jnp.flip(x, 0), ((3, 4),)),
    ("roll", lambda x: srj.roll(x, Val((1, -2)), axis=Val((0, 1))), lambda x: jnp.roll(x, (1, -2), (0, 1)), ((3, 4),)),
    ("permute_dims", lambda x: srj.permute_dims(x, Val((2, 0, 1))), lambda x: jnp.transpose(x, (2, 0, 1)), ((2, 3, 4),)),
    ("transpose", lambda x: srj.transpose(x), lambda x: jnp.transpose(x), ((3, 4),)),
    ("swapaxes", lambda x: srj.swapaxes(x, Val(0), Val(-1)), lambda x: jnp.swapaxes(x, 0, -1), ((2, 3, 4),)),
    ("reshape", lambda x: srj.reshape(x, Val((2, -1))), lambda x: jnp.reshape(x, (2, -1)), ((3, 4),)),
    ("broadcast_to", lambda x: srj.broadcast_to(x, Val((5, 3, 4))), lambda x: jnp.broadcast_to(x, (5, 3, 4)), ((3, 1),)),
    ("sum", lambda x: srj.sum(x, Val(0)), lambda x: jnp.sum(x, 0), ((6, 4),)),
    ("mean", lambda x: srj.mean(x, Val(1), keepdims=Val(True)), lambda x: jnp.mean(x, 1, keepdims=True), ((3, 4),)),
    ("pad", lambda x: srj.pad(x, Val((1, 2, 0, 1)), 0.5), lambda x: jnp.pad(x, ((1, 2), (0, 1)), constant_values=0.5), ((3, 4),)),
    ("pad traced constant", lambda x, c: srj.pad(x, Val((1, 2, 0, 1)), c), lambda x, c: jnp.pad(x, ((1, 2), (0, 1)), constant_values=c), ((3, 4), ())),
    ("split", lambda x: srj.split(x, Val(2), axis=Val(1)), lambda x: tuple(jnp.split(x, 2, axis=1)), ((3, 4),)),
    ("getindex", lambda x: srj.getindex(x, sr.ix[1:, ::-2]), lambda x: x[1:, ::-2], ((3, 4),)),
    ("take", lambda x: srj.take(x, IDX, Val(0)), lambda x: jnp.take(x, IDX, axis=0), ((3, 4),)),
    ("take flat", lambda x: srj.take(x, IDX), lambda x: jnp.take(x, IDX), ((3, 4),)),
    ("take_along_axis", lambda x: srj.take_along_axis(x, ALONG, Val(1)), lambda x: jnp.take_along_axis(x, ALONG % 4, axis=1), ((3, 4),)),
    # index_add's forward adds: bit for bit with jnp's on unique indices (one addition per
    # element); with repeated ones, test_index_add_accumulates_in_float32_and_rounds_once.
    ("index_add", lambda x, v: srj.index_add(x, UNIQUE, v), lambda x, v: x.at[UNIQUE].add(v), ((3, 4), (2, 4))),
]
IDS = [case[0] for case in CALLS]
# Rows whose pullback rounds twice whatever the data (module docstring).
TWICE = {"mean"}


def test_every_op_has_a_row() -> None:
    names = {name.split(" ")[0] for name in IDS}
    assert names == set(srj.__all__) - {"FFIVersionError"}


def bits(value: Any) -> np.ndarray[Any, Any]:
    array = np.asarray(value)
    assert array.dtype.itemsize == 2
    return array.view(np.uint16)


def frexp_round(values: Any, dtype: str) -> np.ndarray[Any, Any]:
    """float64 ``values`` (normal range of ``dtype``: checked) rounded once to ``dtype``, to
    nearest even: the significand scaled to ``p`` bits, rounded by ``np.round`` (half to even)."""
    values = np.asarray(values, np.float64)
    fraction, exponent = np.frexp(values)
    p = SIGNIFICAND_BITS[dtype]
    rounded = np.ldexp(np.round(np.ldexp(fraction, p)), exponent - p)
    nonzero = values[values != 0]
    smallest = 2.0**-14 if dtype == "float16" else 2.0**-126
    assert np.all(np.abs(nonzero) >= smallest) and np.all(np.abs(rounded) < 60000.0), "test data left the normal range"
    out: np.ndarray[Any, Any] = rounded.astype(np.dtype(getattr(jnp, dtype)))  # exact: the value has p bits
    assert np.array_equal(out.astype(np.float64), rounded)
    return out


def round_once(values: Any, dtype: str) -> np.ndarray[Any, Any]:
    """float64 ``values`` rounded once to ``dtype`` (to nearest even): NumPy's own cast for
    float16 (it rounds from the double's bits, subnormals included), :func:`frexp_round` for
    bfloat16 (ml_dtypes casts a double through float32)."""
    if dtype == "float16":
        half: np.ndarray[Any, Any] = np.asarray(values, np.float64).astype(np.float16)
        return half
    return frexp_round(values, dtype)


def test_round_once_is_correct_rounding() -> None:
    # frexp_round agrees with NumPy's float64 -> float16 cast, which rounds once.
    values = np.random.default_rng(3).standard_normal(10000) * 100
    values[:3] = [1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-40]  # ties, and just above one
    np.testing.assert_array_equal(bits(frexp_round(values, "float16")), bits(values.astype(np.float16)))
    # bfloat16: a tie rounds to even, and a value just above a tie rounds up (through float32
    # it would be rounded to the tie first, then to even: down)
    tie, above = 1 + 2.0**-8, 1 + 2.0**-8 + 2.0**-30
    assert float(round_once(np.array([tie]), "bfloat16")[0]) == 1.0
    assert float(round_once(np.array([above]), "bfloat16")[0]) == 1 + 2.0**-7


def ulps(got: Any, want: Any) -> int:
    """The largest distance in units in the last place (same-sign values; zeros allowed)."""
    a, b = bits(got).astype(np.int64), bits(want).astype(np.int64)
    a = np.where(a >= 0x8000, 0x8000 - a, a)  # sign-magnitude to a monotone integer line
    b = np.where(b >= 0x8000, 0x8000 - b, b)
    return int(np.max(np.abs(a - b), initial=0))


def data(shape: tuple[int, ...], dtype: str, rng: np.random.Generator, exact: bool) -> jax.Array:
    """``exact``: multiples of 1/16 in [-4, 4] without 0 (sums of them are exact in float32);
    else standard normal values."""
    if exact:
        values = rng.integers(1, 65, shape) * rng.choice([-1.0, 1.0], shape) / 16
    else:
        values = rng.standard_normal(shape)
    return jnp.asarray(np.asarray(values).astype(np.dtype(getattr(jnp, dtype))))


def leaves(value: Any) -> list[Any]:
    return list(jax.tree_util.tree_leaves(value))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "ours", "theirs", "shapes"), CALLS, ids=IDS)
def test_forward_equals_jnps_bit_for_bit_under_jit_and_vmap(
    name: str, ours: Callable[..., Any], theirs: Callable[..., Any], shapes: tuple[tuple[int, ...], ...], dtype: str
) -> None:
    rng = np.random.default_rng(11)
    args = [data(shape, dtype, rng, exact=False) for shape in shapes]
    args[0] = args[0].at[(0,) * len(shapes[0])].set(jnp.inf) if shapes[0] else args[0]  # infinities move too
    want = leaves(theirs(*args))
    for got in (leaves(ours(*args)), leaves(jax.jit(ours)(*args))):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == jnp.dtype(dtype) and g.shape == w.shape
            np.testing.assert_array_equal(bits(g), bits(w))
    # vmap: one batched call equals the op on each sample, bit for bit
    batch = [jnp.stack([a, -a, 2 * a]) for a in args]
    batched = leaves(jax.jit(jax.vmap(ours))(*batch))
    for part, b in enumerate(batched):
        for i in range(3):
            np.testing.assert_array_equal(bits(b[i]), bits(leaves(ours(*(a[i] for a in batch)))[part]))


def _pullback(fn: Callable[..., Any], args: list[Any], cts: list[Any]) -> list[Any]:
    out, back = jax.vjp(fn, *args)
    structure = jax.tree_util.tree_structure(out)
    return list(back(jax.tree_util.tree_unflatten(structure, cts)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "ours", "theirs", "shapes"), CALLS, ids=IDS)
def test_pullback_equals_the_float64_reference_rounded_once(
    name: str, ours: Callable[..., Any], theirs: Callable[..., Any], shapes: tuple[tuple[int, ...], ...], dtype: str
) -> None:
    rng = np.random.default_rng(12)
    for exact in (True, False):
        args = [data(shape, dtype, rng, exact) for shape in shapes]
        cts = [data(leaf.shape, dtype, rng, exact) for leaf in leaves(theirs(*args))]
        got = jax.jit(lambda a, c: _pullback(ours, a, c))(args, cts)
        wide = _pullback(theirs, [a.astype(jnp.float64) for a in args], [c.astype(jnp.float64) for c in cts])
        for g, w, a in zip(got, wide, args):
            assert g.dtype == a.dtype and g.shape == a.shape
            want = round_once(w, dtype)
            if exact and name not in TWICE:
                np.testing.assert_array_equal(bits(g), bits(want), err_msg=f"{name}: not the once-rounded sum")
            else:
                assert ulps(g, want) <= 1, (name, np.asarray(g, np.float64) - want.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "ours", "theirs", "shapes"), CALLS, ids=IDS)
def test_jvp_equals_jnps(
    name: str, ours: Callable[..., Any], theirs: Callable[..., Any], shapes: tuple[tuple[int, ...], ...], dtype: str
) -> None:
    rng = np.random.default_rng(13)
    args = [data(shape, dtype, rng, exact=False) for shape in shapes]
    tangents = [data(shape, dtype, rng, exact=False) for shape in shapes]
    got = leaves(jax.jit(lambda a, t: jax.jvp(ours, a, t))(args, tangents))
    want = leaves(jax.jvp(theirs, args, tangents))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == jnp.dtype(dtype)
        # kron's tangent is kron(ta, b) + kron(a, tb), each term and the sum rounded as jnp's
        np.testing.assert_array_equal(bits(g), bits(w))


@pytest.mark.parametrize("dtype", DTYPES)
def test_second_order_grad_of_repeat_and_kron(dtype: str) -> None:
    # grad of grad: the pullback primitives transpose into the forwards, in the format.
    rng = np.random.default_rng(14)
    a, b = data((2, 3), dtype, rng, exact=True), data((2, 2), dtype, rng, exact=True)

    def loss(a: Any, b: Any) -> Any:
        return jnp.sum((srj.kron(srj.repeat(a, Val(2), axis=Val(0)), b) ** 2).astype(jnp.float32))

    def reference(a: Any, b: Any) -> Any:
        return jnp.sum(jnp.kron(jnp.repeat(a, 2, axis=0), b) ** 2)

    hessian_vector = jax.jit(jax.grad(lambda a, b: jnp.sum(jax.grad(loss)(a, b).astype(jnp.float32)), (0, 1)))(a, b)
    wide = jax.grad(lambda a, b: jnp.sum(jax.grad(reference)(a, b)), (0, 1))(a.astype(jnp.float64), b.astype(jnp.float64))
    for g, w in zip(hessian_vector, wide):
        assert g.dtype == jnp.dtype(dtype)
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=2.0 ** (3 - SIGNIFICAND_BITS[dtype]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "op",
    [
        ("take", lambda x, n: srj.take(x, np.zeros(n, np.int64))),
        ("take_along_axis", lambda x, n: srj.take_along_axis(x, np.zeros(n, np.int64), Val(0))),
        ("broadcast_to", lambda x, n: srj.broadcast_to(x, Val((n,)))),
        ("repeat", lambda x, n: srj.repeat(x, Val(n))),
        ("kron", lambda x, n: srj.kron(x, jnp.ones((n,), x.dtype))),
        ("pad traced constant", lambda x, n: srj.pad(jnp.zeros((0,), x.dtype), Val((0, n)), x[0])),
    ],
    ids=lambda op: op[0],
)
def test_adding_pullbacks_accumulate_in_float32(op: tuple[str, Callable[..., Any]], dtype: str) -> None:
    # 1 + 4095 * 2**-9 (float64: 8.998...; rounded once: 9): adding in the format itself, as
    # XLA's CPU scatter-add does, stalls (bfloat16 at 1, float16 at 4); a reduction in the
    # format rounds as it goes.
    n = 4096
    ct = np.full(n, 2.0**-9)
    ct[0] = 1.0
    x = jnp.ones((1,), getattr(jnp, dtype))
    _, back = jax.vjp(lambda v: op[1](v, n), x)
    (got,) = jax.jit(back)(jnp.asarray(ct.astype(np.dtype(getattr(jnp, dtype)))))
    np.testing.assert_array_equal(bits(got), bits(round_once([ct.sum()], dtype)))
    assert float(got[0]) == 9.0
    if op[0] == "take":  # what jnp's own gather transposes to, for contrast
        _, theirs = jax.vjp(lambda v: jnp.take(v, np.zeros(n, np.int64)), x)
        assert float(theirs(jnp.asarray(ct.astype(np.dtype(getattr(jnp, dtype)))))[0][0]) < 8.5


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_add_accumulates_in_float32_and_rounds_once(dtype: str) -> None:
    rng = np.random.default_rng(15)
    x = data((3, 4), dtype, rng, exact=False)
    v = data((200, 4), dtype, rng, exact=False)
    index = rng.integers(0, 3, 200)
    got = jax.jit(lambda x, v: srj.index_add(x, index, v))(x, v)
    want = np.asarray(x, np.float64).copy()
    np.add.at(want, index, np.asarray(v, np.float64))
    assert got.dtype == jnp.dtype(dtype)
    assert ulps(got, round_once(want, dtype)) <= 1
    # exact data: the float32 sums are exact, so the one rounding is the reference's
    x, v = data((3, 4), dtype, rng, exact=True), data((200, 4), dtype, rng, exact=True)
    got = srj.index_add(x, index, v)
    want = np.asarray(x, np.float64).copy()
    np.add.at(want, index, np.asarray(v, np.float64))
    np.testing.assert_array_equal(bits(got), bits(round_once(want, dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_adds_are_deterministic(dtype: str) -> None:
    # The same bits on every run, and the same as the float32 scatter-add in index order.
    rng = np.random.default_rng(16)
    x = data((50, 8), dtype, rng, exact=False)
    index = rng.integers(0, 50, 5000)
    ct = data((5000, 8), dtype, rng, exact=False)
    grad = jax.jit(jax.vjp(lambda v: srj.take(v, index, Val(0)), x)[1])
    runs = [bits(grad(ct)[0]).copy() for _ in range(3)]
    assert all(np.array_equal(runs[0], run) for run in runs[1:])
    sequential = np.zeros((50, 8), np.float32)
    np.add.at(sequential, index, np.asarray(ct, np.float32))
    np.testing.assert_array_equal(runs[0], bits(sequential.astype(np.dtype(getattr(jnp, dtype)))))
    added = [bits(jax.jit(lambda v: srj.index_add(jnp.zeros((50, 8), v.dtype), index, v))(ct)) for _ in range(3)]
    assert all(np.array_equal(added[0], run) for run in added[1:])
    np.testing.assert_array_equal(added[0], runs[0])


def _conv(x: Any, w: Any) -> Any:
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))


def _decoder(upsample: Callable[[Any], Any]) -> Callable[..., Any]:
    """A U-Net decoder: two stages of (2x nearest upsampling, concatenation with the skip
    connection, convolution, relu), then a 1x1 head; loss in float32."""

    def loss(params: dict[str, Any], bottom: Any, skips: list[Any], target: Any) -> Any:
        h = bottom
        for stage, skip in enumerate(skips):
            h = srj.concatenate((upsample(h), skip), axis=Val(1))
            h = jax.nn.relu(_conv(h, params[f"w{stage}"]) + params[f"b{stage}"][None, :, None, None])
        out = _conv(h, params["head"])
        return jnp.mean((out.astype(jnp.float32) - target) ** 2)

    return loss


def test_bf16_unet_decoder_grad_under_jit_matches_jnp_repeat() -> None:
    rng = np.random.default_rng(17)
    bf16 = jnp.bfloat16

    def normal(*shape: int, scale: float = 1.0) -> Any:
        return jnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32))

    params32 = {
        "w0": normal(8, 16 + 8, 3, 3, scale=0.1), "b0": normal(8, scale=0.1),
        "w1": normal(4, 8 + 4, 3, 3, scale=0.1), "b1": normal(4, scale=0.1),
        "head": normal(2, 4, 1, 1, scale=0.3),
    }  # fmt: skip
    bottom, skips, target = normal(2, 16, 4, 4), [normal(2, 8, 8, 8), normal(2, 4, 16, 16)], normal(2, 2, 16, 16)

    def ours_up(h: Any) -> Any:
        return srj.repeat(h, inner=Val((1, 1, 2, 2)))

    def jnp_up(h: Any) -> Any:
        return jnp.repeat(jnp.repeat(h, 2, axis=2), 2, axis=3)

    def cast(tree: Any, dtype: Any) -> Any:
        return jax.tree_util.tree_map(lambda v: v.astype(dtype), tree)

    args16 = (cast(params32, bf16), cast(bottom, bf16), cast(skips, bf16), target)
    step = jax.jit(jax.grad(_decoder(ours_up), argnums=(0, 1, 2)))
    ours = step(*args16)
    stock = jax.jit(jax.grad(_decoder(jnp_up), argnums=(0, 1, 2)))(*args16)
    # the float32 model (our ops, same values) as the reference for both
    wide = jax.jit(jax.grad(_decoder(ours_up), argnums=(0, 1, 2)))(
        cast(args16[0], jnp.float32), cast(args16[1], jnp.float32), cast(args16[2], jnp.float32), target
    )
    assert "custom_call @stablerules_" in step.lower(*args16).as_text()  # our repeat pullback runs
    for g, s, w in zip(leaves(ours), leaves(stock), leaves(wide)):
        assert g.dtype == bf16 and g.shape == w.shape
        scale = float(np.max(np.abs(np.asarray(w, np.float64)))) + 1e-30
        ours_error = float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))) / scale
        stock_error = float(np.max(np.abs(np.asarray(s, np.float64) - np.asarray(w, np.float64)))) / scale
        ours_vs_stock = float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(s, np.float64)))) / scale
        # bf16's tolerance between the two models (their bf16 convolutions round alike); and
        # against the float32 model, ours no further than stock's (which the convolutions set)
        assert ours_vs_stock <= 2.0**-5, (ours_error, stock_error, ours_vs_stock)
        assert ours_error <= stock_error + 2.0**-7, (ours_error, stock_error)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vmap_of_the_pullbacks_equals_each_sample(dtype: str) -> None:
    # vmap of grad: our kernel pullbacks batched (repeat's one call, kron's XLA loop) and the
    # custom_jvp transposes, each sample's gradient bit for bit the unbatched one.
    rng = np.random.default_rng(18)
    xs = data((3, 2, 3), dtype, rng, exact=False)
    bs = data((3, 2, 2), dtype, rng, exact=False)

    def loss(x: Any, b: Any) -> Any:
        y = srj.kron(srj.repeat(x, Val(2), axis=Val(1)), b)
        z = srj.take(srj.broadcast_to(y, Val((2,) + y.shape)), np.array([0, 1, 1]), Val(0))
        return jnp.sum((z * z).astype(jnp.float32))

    grad = jax.grad(loss, (0, 1))
    batched = jax.jit(jax.vmap(grad))(xs, bs)
    for i in range(3):
        for got, want in zip(batched, jax.jit(grad)(xs[i], bs[i])):
            assert got.dtype == jnp.dtype(dtype)
            np.testing.assert_array_equal(bits(got[i]), bits(want))


def test_mixed_dtypes_give_jnps_result_dtype() -> None:
    bf16, f16, f32 = (jnp.ones((2, 2), dtype) for dtype in (jnp.bfloat16, jnp.float16, jnp.float32))
    for a, b in ((bf16, f16), (bf16, f32), (f16, f32), (bf16, jnp.ones((2, 2), jnp.int8))):
        want = jnp.result_type(a, b)
        for ours, theirs in ((srj.kron, jnp.kron), (lambda p, q: srj.concatenate((p, q)), lambda p, q: jnp.concatenate((p, q)))):
            got = jax.jit(ours)(a, b)
            assert got.dtype == want
            np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(theirs(a, b), np.float64))
    assert srj.cat(bf16[0], 1.5, dims=Val(0)).dtype == jnp.bfloat16  # a weak Python scalar keeps the format
    # typed as every jax.Array (jax.Array carries no dtype; the signatures restrict none)
    assert_type(srj.repeat(bf16, Val(2), axis=Val(0)), jax.Array)
    assert_type(srj.take(f16, np.array([1, 0]), Val(0)), jax.Array)
    assert_type(srj.split(bf16, Val(2)), tuple[jax.Array, ...])


def test_errors_on_sixteen_bit_inputs_are_the_numpy_ops_word_for_word() -> None:
    # Validation sees a float32 stand-in of a 16-bit input, as the NumPy ops' plans do.
    import ml_dtypes

    calls: list[Callable[[Any, Any], Any]] = [
        lambda m, x: m.pad(x, Val(1), 1j),
        lambda m, x: m.index_add(x, np.array([0]), np.ones((1, 4), np.complex64)),
        lambda m, x: m.repeat(x, Val(-1)),
        lambda m, x: m.concatenate((x, x[0])),
        lambda m, x: m.reshape(x, Val((5, -1))),
    ]
    for dtype, numpy_dtype in ((jnp.bfloat16, ml_dtypes.bfloat16), (jnp.float16, np.float16)):
        for call in calls:
            with pytest.raises((TypeError, ValueError)) as numpy_error:
                call(sr, np.ones((3, 4), numpy_dtype))
            with pytest.raises(type(numpy_error.value)) as jax_error:
                jax.jit(lambda v: call(srj, v))(jnp.ones((3, 4), dtype))
            assert str(jax_error.value) == str(numpy_error.value)
