"""``stablerules.torch``: our ops inside PyTorch (SPEC section 10, issue 16).

References are independent of our rules: forward results against NumPy's own functions,
gradients (reverse and forward mode, first and second order) against torch's finite
differences (``gradcheck``/``gradgradcheck``), batched results against a loop of unbatched
calls, compiled results against eager ones.
"""

from __future__ import annotations

import warnings
import importlib
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, assert_type, cast

import numpy as np
import pytest
import torch
from torch._library.custom_ops import CustomOpDef

import stablerules as sr
import stablerules.torch as srt
from stablerules._rule import RuleOp
from stablerules import Val, _facts
from stablerules.rules.kron import KRON_TORCH_BELOW
from stablerules.torch import _adapter, _call, _native, _ops

from .rules import TorchCase as Case, assert_every_op_has_a_row, collect, op_of

_srt: Any = srt  # untyped, for calls the typed API does not take (a list of counts, a missing argument)
_sr: Any = sr


def _signature_table(op: object) -> dict[tuple[object, ...], _adapter.TorchSignature]:
    """An op's table of bound signatures (the op's public type is its call signature alone)."""
    assert isinstance(op, _adapter.TorchOp)
    return op.signatures


def _parts(value: object) -> tuple[object, ...]:
    """An op's result as a tuple (split returns one; every other op a single array)."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


CASES: list[Case] = collect("torch_cases")
IDS = [case.id for case in CASES]


def _inputs(case: Case, dtype: torch.dtype = torch.float64, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, dtype=dtype, generator=generator, requires_grad=True) for shape in case.shapes]


# --------------------------------------------------------------------------------------------
# forward


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_equals_numpy(case: Case) -> None:
    for dtype in (torch.float64, torch.float32, torch.complex128):
        inputs = _inputs(case, dtype)
        ys = _parts(case.call(*inputs))
        expecteds = _parts(case.reference(*(t.detach().numpy() for t in inputs)))
        assert len(ys) == len(expecteds)
        for y, expected in zip(ys, expecteds):
            assert isinstance(y, torch.Tensor) and y.device.type == "cpu" and isinstance(expected, np.ndarray)
            assert y.dtype == dtype and tuple(y.shape) == expected.shape
            if dtype.is_complex and case.id.startswith("kron"):  # complex products may round differently
                np.testing.assert_allclose(y.detach().numpy(), expected.astype(np.complex128), rtol=1e-14)
            elif case.id.startswith(("sum", "mean")):  # torch's summation order, not NumPy's pairwise one
                np.testing.assert_allclose(y.detach().numpy(), expected, rtol=4 * np.finfo(expected.dtype).eps, atol=0)
            else:
                np.testing.assert_array_equal(y.detach().numpy(), expected)


def test_integer_inputs_are_forwarded_and_not_differentiable() -> None:
    x = torch.arange(6).reshape(2, 3)
    y = srt.repeat(x, Val(2), axis=Val(0))
    assert y.dtype == torch.int64 and not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), np.repeat(x.numpy(), 2, axis=0))


def test_inputs_are_read_in_place_and_results_own_their_memory() -> None:
    x = torch.randn(4, 3, dtype=torch.float64)[:, 1:]  # a strided view
    view = _adapter._array(x)
    assert isinstance(view, np.ndarray) and np.shares_memory(view, x.numpy())
    y = srt.concatenate((x,), axis=Val(0))  # equal to x: must still not alias it
    assert torch.equal(y, x) and y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


# --------------------------------------------------------------------------------------------
# reverse and forward mode, first and second order, against finite differences


@contextmanager
def _our_kernels() -> Iterator[None]:
    """Every kernel op's signatures take our kernel's pullback, those of its ``torch_forms``
    too: the case tables' small shapes then check our kernels."""
    saved = dict(_native.FACTS)
    _adapter._clear_tables()
    try:
        for name, fact in saved.items():
            _native.FACTS[name] = fact._replace(torch_forms=())
        yield
    finally:
        _native.FACTS.update(saved)
        _adapter._clear_tables()


def _bounded(case: Case) -> bool:
    """Whether the case's op has forms whose signatures take torch's pullback (small ones, say)."""
    return bool(_native.FACTS[op_of(case.id)].torch_forms)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradcheck(case: Case) -> None:
    assert torch.autograd.gradcheck(case.call, tuple(_inputs(case)), check_forward_ad=True)
    if _bounded(case):  # the case's shapes are small: our kernel's pullback too
        with _our_kernels():
            inputs = tuple(_inputs(case))
            assert "Forward" in _node(case.call(*inputs))  # our autograd Function
            assert torch.autograd.gradcheck(case.call, inputs, check_forward_ad=True)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradgradcheck(case: Case) -> None:
    assert torch.autograd.gradgradcheck(case.call, tuple(_inputs(case)))
    if _bounded(case):
        with _our_kernels():
            inputs = tuple(_inputs(case))
            assert "Forward" in _node(case.call(*inputs))
            assert torch.autograd.gradgradcheck(case.call, inputs)


def test_complex_kron_to_second_order() -> None:
    case = CASES[IDS.index("kron")]
    inputs = tuple(_inputs(case, torch.complex128))
    assert torch.autograd.gradcheck(srt.kron, inputs, check_forward_ad=True)
    assert torch.autograd.gradgradcheck(srt.kron, inputs)


def test_third_order_of_kron() -> None:
    # f(x) = sum(kron(x, x)^2) = (sum x^2)^2 for a vector: f''' along e0 at x is 24 x0.
    x = torch.tensor([1.5, -0.5], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(srt.kron(x, x).pow(2).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g[0], x, create_graph=True)
    (t,) = torch.autograd.grad(h[0], x)
    assert torch.allclose(t[0], torch.tensor(24 * 1.5, dtype=torch.float64))


def test_inplace_modification_after_forward_is_caught() -> None:
    # b large enough for our kernel's pullback (a small kron is torch's own, KRON_TORCH_BELOW)
    a, b = torch.randn(2, 2, dtype=torch.float64, requires_grad=True), torch.randn(80, 80, dtype=torch.float64)
    leaf = a * 1.0
    y = srt.kron(leaf, b)
    with torch.no_grad():
        leaf.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(y.sum(), a)


def test_stride0_cotangent_reaches_the_rule_as_a_fill() -> None:
    x = torch.randn(50, 30, dtype=torch.float64, requires_grad=True)
    y = srt.repeat(x, inner=Val((2, 3)))
    assert y.numel() >= srt.FILL_THRESHOLD
    (g,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
    assert g.stride() == (0, 0), "a Fill result comes back as an expanded tensor"
    assert torch.equal(g, torch.full((50, 30), 6.0, dtype=torch.float64))
    (g_mean,) = torch.autograd.grad(y.mean(), x)
    assert torch.allclose(g_mean, torch.full((50, 30), 6.0 / y.numel(), dtype=torch.float64))


# --------------------------------------------------------------------------------------------
# torch.func


def test_func_grad_vjp_jvp_against_finite_differences() -> None:
    x = torch.randn(3, 2, dtype=torch.float64)
    b = torch.randn(2, 2, dtype=torch.float64)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return srt.kron(srt.repeat(x, inner=Val((1, 2))), b).sin().sum()

    grad = torch.func.grad(loss)(x)
    direction = torch.randn_like(x)
    step = 1e-6
    numeric = (loss(x + step * direction) - loss(x - step * direction)) / (2 * step)
    assert torch.allclose((grad * direction).sum(), numeric, atol=1e-6)
    tangent = torch.func.jvp(loss, (x,), (direction,))[1]
    assert torch.allclose(tangent, numeric, atol=1e-6)
    vjp = torch.func.vjp(lambda x: srt.tile(x, Val(2)), x)[1]
    (pulled,) = vjp(torch.ones(3, 4, dtype=torch.float64))
    assert torch.equal(pulled, torch.full((3, 2), 2.0, dtype=torch.float64))
    hessian_diag = torch.func.grad(lambda x: torch.func.grad(loss)(x)[0, 0])(x)
    numeric_second = (torch.func.grad(loss)(x + step * direction) - torch.func.grad(loss)(x - step * direction)) / (2 * step)
    assert torch.allclose((hessian_diag * direction).sum(), numeric_second[0, 0], atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_uses_the_batching_rule(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name, entry in _ops.ENTRIES.items():
        original = entry.batch

        def counted(*args: object, _original: Callable[..., object] = original, _name: str = name) -> object:
            calls.append(_name)
            return _original(*args)

        monkeypatch.setattr(entry, "batch", counted)
    size = 3
    generator = torch.Generator().manual_seed(1)
    batched = [torch.randn((size, *shape), dtype=torch.float64, generator=generator) for shape in case.shapes]
    in_dims_options: list[tuple[int | None, ...]] = [(0,) * len(batched)]
    if len(batched) > 1:
        in_dims_options.append((0,) + (None,) * (len(batched) - 1))
        in_dims_options.append((None,) + (0,) * (len(batched) - 1))
    for in_dims in in_dims_options:
        arguments = [t if d is not None else t[0] for t, d in zip(batched, in_dims)]
        got = _parts(torch.vmap(case.call, in_dims=in_dims)(*arguments))
        samples = [_parts(case.call(*(t[i] if d is not None else t for t, d in zip(arguments, in_dims)))) for i in range(size)]
        assert len(got) == len(samples[0])
        for part, batched_part in enumerate(got):
            expected = torch.stack([cast("torch.Tensor", sample[part]) for sample in samples])
            assert torch.allclose(cast("torch.Tensor", batched_part), expected), in_dims
    facts = _native.FACTS[op_of(case.id)]
    if facts.pullback == "kernel" and not facts.torch_forms:
        assert calls, "vmap did not go through the op's batching rule"
    elif facts.pullback == "kernel":  # small: torch's own op (a per-signature choice); ours checked here
        calls.clear()
        with _our_kernels():
            got = _parts(torch.vmap(case.call)(*batched))
            samples = [_parts(case.call(*(t[i] for t in batched))) for i in range(size)]
            for part, batched_part in enumerate(got):
                expected = torch.stack([cast("torch.Tensor", sample[part]) for sample in samples])
                assert torch.allclose(cast("torch.Tensor", batched_part), expected)
        assert calls, "vmap did not go through the op's batching rule"
    else:  # plain torch code: torch's own batching rules, none of ours
        assert not calls


def test_vmap_of_a_large_kron_uses_its_batching_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = _ops.ENTRIES["kron"].batch

    def counted(*args: object) -> object:
        calls.append(1)
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_ops.ENTRIES["kron"], "batch", counted)
    generator = torch.Generator().manual_seed(4)
    a = torch.randn(3, 2, 3, dtype=torch.float64, generator=generator)
    b = torch.randn(3, 60, 60, dtype=torch.float64, generator=generator)
    assert a[0].numel() * b[0].numel() >= KRON_TORCH_BELOW
    for in_dims in ((0, 0), (0, None), (None, 0)):
        args = [t if d is not None else t[0] for t, d in zip((a, b), in_dims)]
        got = torch.vmap(srt.kron, in_dims=in_dims)(*args)
        expected = torch.stack([torch.kron(*(t[i] if d is not None else t for t, d in zip(args, in_dims))) for i in range(3)])
        assert torch.allclose(got, expected)
    assert len(calls) == 3


@pytest.mark.parametrize("case", [CASES[IDS.index(name)] for name in ("repeat-inner-outer", "concatenate", "kron")], ids=str)
def test_jacrev_and_jacfwd_equal_the_looped_jacobian(case: Case) -> None:
    # jacrev vmaps the pullback, jacfwd the pushforward; the reference loops plain backward
    # calls (checked against finite differences by test_gradcheck).
    inputs = tuple(t.detach() for t in _inputs(case))
    argnums = tuple(range(len(inputs)))
    expected = torch.autograd.functional.jacobian(case.call, inputs)  # type: ignore[no-untyped-call]
    for transform in (torch.func.jacrev, torch.func.jacfwd):
        got = transform(case.call, argnums=argnums)(*inputs)
        for g, e in zip(got, expected):
            assert torch.allclose(g, e), transform


def test_vmap_with_batch_axis_not_in_front() -> None:
    x = torch.randn(4, 3, 2, dtype=torch.float64)
    got = torch.vmap(lambda s: srt.repeat(s, Val(2), axis=None), in_dims=1)(x)
    expected = torch.stack([torch.from_numpy(np.repeat(x[:, i].numpy(), 2)) for i in range(3)])
    assert torch.equal(got, expected)


# --------------------------------------------------------------------------------------------
# torch.compile and the custom ops


def _check_vjp_op(entry: _call.Entry, args: tuple[tuple[object, ...], dict[str, object]]) -> None:
    """``torch.library.opcheck`` of the op's ``stablerules::<name>_vjp`` custom op (what
    ``torch.compile`` calls for a kernel op's pullback): schema, fake implementation,
    autograd registration and dynamic shapes, on a real call's arguments."""
    call, tensors = _adapter.bind(entry, *args)
    ys = _native.FORWARDS[entry.name](call, tensors)
    cotangents = [torch.randn_like(y) for y in ys]
    saved = [t for t, keep in zip(tensors, _adapter._needed(call)) if keep]
    shapes = [n for t in tensors for n in t.shape]
    ndims = [t.ndim for t in tensors]
    dtypes = ",".join(str(t.dtype).removeprefix("torch.") for t in tensors)
    op = _adapter._VJPS[entry.name]
    result = torch.library.opcheck(cast("CustomOpDef", op), (cotangents, saved, shapes, ndims, _adapter.encode(call), dtypes))
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("entry", [_ops.ENTRIES["repeat"], _ops.ENTRIES["tile"], _ops.ENTRIES["kron"], _ops.ENTRIES["broadcast_to"]], ids=lambda e: e.name)
def test_opcheck(entry: _call.Entry) -> None:
    generator = torch.Generator().manual_seed(2)
    a = torch.randn(2, 3, dtype=torch.float64, generator=generator)
    b = torch.randn(3, 2, dtype=torch.float64, generator=generator)
    args: dict[str, tuple[tuple[object, ...], dict[str, object]]] = {
        "repeat": ((a,), {"inner": Val((2, 1)), "outer": Val(2)}),
        "tile": ((a, Val((2, 1))), {}),
        "kron": ((a, b), {}),
        "broadcast_to": ((a[:1], Val((4, 3))), {}),
    }
    _check_vjp_op(entry, args[entry.name])


def test_the_compiled_pullbacks_placeholders_are_made_once_and_real() -> None:
    """The vjp op's kernel stands stride-0 zeros for the tensors its pullback does not read
    (``take``'s table); they are made once per shape and shared, as an eager signature's are,
    and only real tensors are kept (tracing runs the fake implementation, never the table)."""
    torch._dynamo.reset()
    _adapter._PLACEHOLDERS.clear()
    generator = torch.Generator().manual_seed(6)
    table = torch.randn(64, 8, dtype=torch.float64, generator=generator, requires_grad=True)
    ids = torch.tensor([3, 1, 3, 60, 0, 3])
    compiled = torch.compile(lambda t, i: srt.take(t, i, axis=Val(0)).sin().sum(), backend="aot_eager", fullgraph=True)
    expected = torch.zeros(64, 8, dtype=torch.float64).index_add_(0, ids, table.detach()[ids].cos())
    kept: list[torch.Tensor] = []
    for _ in range(3):
        (grad,) = torch.autograd.grad(compiled(table, ids), table)
        torch.testing.assert_close(grad, expected)
        assert len(_adapter._PLACEHOLDERS) == 1, _adapter._PLACEHOLDERS.keys()
        (placeholder,) = _adapter._PLACEHOLDERS.values()
        kept.append(placeholder)
    assert type(kept[0]) is torch.Tensor and kept[0].shape == (64, 8) and not any(kept[0].stride())
    assert kept[1] is kept[0] and kept[2] is kept[0]


def test_compile_fullgraph_forward_and_backward_equal_eager() -> None:
    torch._dynamo.reset()

    def model(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = srt.repeat(x, inner=Val((2, 1)), outer=Val((1, 2)))
        z = srt.concatenate((y, y * 2), axis=Val(1))
        return z.sin().sum() + srt.kron(a, b).pow(2).mean()

    inputs = [torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in ((3, 2), (2, 3), (3, 2))]
    compiled = torch.compile(model, fullgraph=True)
    got = compiled(*inputs)
    got_grads = torch.autograd.grad(got, inputs)
    expected = model(*inputs)
    expected_grads = torch.autograd.grad(expected, inputs)
    assert torch.allclose(got, expected)
    for g, e in zip(got_grads, expected_grads):
        assert torch.allclose(g, e)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compile_fullgraph_under_no_grad_equals_eager(case: Case) -> None:
    """Inference under ``torch.compile``: inputs that need no gradient (before, a kernel op's
    autograd Function was traced anyway, and kron's raised ``torch._dynamo.exc.Unsupported:
    Observed exception`` (``'Call' object has no attribute 'call'``))."""
    torch._dynamo.reset()
    inputs = [t.detach() for t in _inputs(case)]
    compiled = torch.compile(case.call, fullgraph=True)
    with torch.no_grad():
        got, expected = _parts(compiled(*inputs)), _parts(case.call(*inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert isinstance(g, torch.Tensor) and isinstance(e, torch.Tensor)
        assert g.shape == e.shape and g.dtype == e.dtype
        assert torch.allclose(g, e)


def test_compile_fullgraph_structure_ops_equal_eager() -> None:
    torch._dynamo.reset()

    def model(x: torch.Tensor) -> torch.Tensor:
        top, bottom = srt.split(srt.pad(x, Val((1, 1, 0, 2)), 0.5), Val(2))
        moved = srt.permute_dims(srt.flip(top, Val(1)) * bottom.sin(), Val((1, 0)))
        return srt.sum(srt.reshape(moved, Val(-1)) ** 2) + srt.mean(srt.broadcast_to(x, Val((3, 2, 3))))

    x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    got = torch.compile(model, fullgraph=True)(x)
    (got_grad,) = torch.autograd.grad(got, x)
    expected = model(x)
    (expected_grad,) = torch.autograd.grad(expected, x)
    assert torch.allclose(got, expected) and torch.allclose(got_grad, expected_grad)


# --------------------------------------------------------------------------------------------
# errors and isolation


def test_bad_arguments_are_clear_type_errors() -> None:
    x = torch.randn(2, 3)
    with pytest.raises(TypeError, match="argument 'x' must be a torch.Tensor"):
        srt.repeat(np.zeros(3), Val(2))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="'repeats' is static"):
        srt.repeat(x, torch.tensor([1, 2]), axis=Val(0))  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unexpected or repeated argument 'axes'"):
        srt.stack((x, x), axes=Val(0))  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"arrays\[1\] must be a torch.Tensor"):
        srt.concatenate((x, 1.0))  # type: ignore[arg-type]
    assert srt.tile(torch.empty(2, device="meta"), Val(2)).shape == (4,)  # meta: shapes, no data
    with pytest.raises(ValueError):  # our own validation, before any kernel
        srt.concatenate((x, torch.randn(2, 4)), axis=Val(0))


def test_import_stablerules_does_not_import_torch() -> None:
    code = "import sys, stablerules; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names() -> None:
    names: Sequence[str] = srt.__all__
    assert {"repeat", "tile", "concatenate", "stack", "hstack", "vstack", "cat", "kron"} <= set(names)
    for name in names:
        assert getattr(srt, name) is not None


# Ops not adapted yet (none now). Listed here so that adding an op is a visible change.
NOT_YET_ADAPTED: set[str] = set()


def test_every_op_of_stablerules_is_adapted() -> None:
    ops = {name for name in sr.__all__ if isinstance(getattr(sr, name), RuleOp)}
    adapted = {name for name in srt.__all__ if isinstance(getattr(srt, name), srt.TorchOp)}
    assert ops - NOT_YET_ADAPTED == adapted and not NOT_YET_ADAPTED & adapted
    for name in adapted:
        assert getattr(srt, name).entry.op is getattr(sr, name)


def test_bench_rows_run_and_agree_with_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    # bench/engines_torch.py checks ours against torch's own ops before timing each row.
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    engines_torch = importlib.import_module("engines_torch")
    rows = engines_torch.run_torch_rows("tiny", compiled=False)
    calls = {f"call {name}" for name in ("repeat", "concatenate", "kron", "flip", "sum", "reshape")}
    grads = {f"grad {name}" for name in ("repeat", "concatenate", "kron", "flip", "sum")}
    issue35 = {"concat25", "upsample", "kron small"}
    assert {row.id for row in rows} == {"W3", "W3 sum", "kron", "tiny", "cnn"} | calls | grads | issue35
    assert [row.error for row in rows] == [None] * len(rows)
    assert "tiny sizes: no goal" in engines_torch.torch_table(rows)


# --------------------------------------------------------------------------------------------
# the call path: signatures settled once, tensors reached through DLPack


def test_a_signature_is_bound_once_and_reused() -> None:
    # A kernel op's signatures are keyed by statics, dtypes and shapes.
    x = torch.randn(3, 4, dtype=torch.float64)
    _signature_table(srt.tile).clear()
    first = srt.tile(x, Val(2))
    assert len(_signature_table(srt.tile)) == 1
    second = srt.tile(torch.randn(3, 4, dtype=torch.float64), Val(2))
    assert len(_signature_table(srt.tile)) == 1, "same statics, dtypes and shapes: one signature"
    assert torch.equal(first, torch.from_numpy(np.tile(x.numpy(), 2))) and second.shape == (3, 8)
    srt.tile(x, Val(3))
    srt.tile(x.float(), Val(2))
    srt.tile(torch.randn(2, 4, dtype=torch.float64), Val(2))
    assert len(_signature_table(srt.tile)) == 4
    # A view op's by statics, dtypes and ranks (torch's op checks each call's extents).
    _signature_table(srt.flip).clear()
    srt.flip(x, Val(1))
    srt.flip(torch.randn(2, 4, dtype=torch.float64), Val(1))
    assert len(_signature_table(srt.flip)) == 1, "other extents alone: one signature"
    srt.flip(x.float(), Val(1))
    srt.flip(torch.randn(2, 4, 5, dtype=torch.float64), Val(1))
    assert len(_signature_table(srt.flip)) == 3
    srt.flip(x, Val(0))
    assert len(_signature_table(srt.flip)) == 4
    # Val(True) and Val(1), 1 and 1.0 and True: equal in Python, distinct signatures here.
    s = torch.randn(2, 3, dtype=torch.float32)
    assert srt.sum(s, Val(1), Val(True)).shape == (2, 1) and srt.sum(s, Val(1), Val(False)).shape == (2,)
    assert srt.kron(s, 2).dtype == torch.float64 == torch.from_numpy(np.kron(s.numpy(), 2)).dtype
    assert srt.kron(s, True).dtype == torch.from_numpy(np.kron(s.numpy(), True)).dtype
    assert srt.kron(s, 2j).dtype == torch.from_numpy(np.kron(s.numpy(), 2j)).dtype


def test_a_view_ops_signature_still_gives_the_cores_errors_for_new_shapes() -> None:
    """A view op's signature is keyed without shapes: inputs that torch's op would take but
    the core refuses still get the core's error (the same as on a first call)."""
    x = torch.randn(2, 6, dtype=torch.float64)
    assert len(srt.split(x, Val(3), axis=Val(1))) == 3
    with pytest.raises(ValueError, match=r"split") as later:
        srt.split(torch.randn(2, 7, dtype=torch.float64), Val(3), axis=Val(1))
    _signature_table(srt.split).clear()
    with pytest.raises(ValueError, match=r"split") as first:
        srt.split(torch.randn(2, 7, dtype=torch.float64), Val(3), axis=Val(1))
    assert str(later.value) == str(first.value)
    assert srt.pad(x, Val((1, 0, 2, 1))).shape == (3, 9)
    with pytest.raises(ValueError, match=r"pad: pad_width must be"):
        srt.pad(torch.randn(2, 3, 4, dtype=torch.float64), Val((1, 0, 2, 1)))
    assert srt.concatenate((x, x), axis=Val(0)).shape == (4, 6)
    with pytest.raises(ValueError, match=r"concatenate: arrays\[0\] has shape \(2, 6\) and arrays\[1\] has shape \(2, 5\)"):
        srt.concatenate((x, torch.randn(2, 5, dtype=torch.float64)), axis=Val(0))


def test_keyword_tensors_bind_in_parameter_order() -> None:
    a, b = torch.randn(2, 3, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    for _ in range(2):  # the second call takes the cached signature's order
        got = srt.kron(b=b, a=a)
        assert torch.equal(got, torch.from_numpy(np.kron(a.numpy(), b.numpy())))
    for _ in range(2):
        assert torch.equal(srt.kron(b=a, a=b), torch.from_numpy(np.kron(b.numpy(), a.numpy())))


def test_no_grad_calls_build_no_graph_and_linear_calls_save_no_tensors() -> None:
    x = torch.randn(30, 40, dtype=torch.float64, requires_grad=True)  # above repeat's small-size bound
    with torch.no_grad():
        assert srt.repeat(x, Val(2), axis=Val(0)).grad_fn is None
    y = srt.repeat(x, Val(2), axis=Val(0))
    assert y.grad_fn is not None and getattr(y.grad_fn, "saved_tensors") == ()
    with torch.no_grad():
        x.add_(1.0)  # a linear op's backward reads no primal: modifying x is no error
    (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(g, torch.full((30, 40), 2.0, dtype=torch.float64))


def test_a_known_signature_of_torchs_own_op_runs_it_straight_with_the_same_results_and_graph() -> None:
    """The flat paths of ``TorchOp.__call__``: a known signature of two positional plain CPU
    tensors (``op.pairs``) and a known direct signature of any form (a 25-input concatenation
    with ``axis`` by keyword) go straight to torch's op. Their results and gradients are
    torch's own op's (the reference here: ``torch.kron``, ``torch.cat``, same autograd graph);
    a ``Parameter`` shares a plain tensor's entry; a new signature takes the full path (its
    dtype check included) and then has its own entry; ``no_grad`` views come back detached; a
    view op's key leaves dtypes out, so NumPy's promotion (float32 with int64: float64, where
    ``torch.cat`` gives float32) is still applied on every call."""
    _adapter._clear_tables()
    kron, concatenate = _ops.DEFINITIONS["kron"], _ops.DEFINITIONS["concatenate"]
    generator = torch.Generator().manual_seed(13)
    a = torch.randn(4, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    b = torch.nn.Parameter(torch.randn(3, 3, dtype=torch.float64, generator=generator))
    dy = torch.randn(12, 12, dtype=torch.float64, generator=generator)
    for call in range(3):  # the first call settles the signature, the later ones take the pair path
        y = srt.kron(a, b)
        assert type(y.grad_fn).__name__ == type(torch.kron(a, b).grad_fn).__name__  # torch's own node
        got = torch.autograd.grad(y, (a, b), dy)
        expected = torch.autograd.grad(torch.kron(a, b), (a, b), dy)
        assert torch.equal(y, torch.kron(a, b)) and all(torch.equal(g, e) for g, e in zip(got, expected))
        assert list(kron.pairs) == [(torch.float64, a.shape, torch.float64, b.shape)]
    assert list(kron.pairs.values())[0].direct
    with torch.no_grad():
        assert srt.kron(a, b).grad_fn is None and not srt.kron(a, b).requires_grad
    c = torch.randn(2, 5, dtype=torch.float32, generator=generator)  # a new signature: full path, then its own entry
    assert torch.equal(srt.kron(c, c), torch.kron(c, c)) and len(kron.pairs) == 2
    with pytest.raises(TypeError, match="argument 'a' has dtype float8_e4m3fn"):  # the full path's check, not torch's
        srt.kron(torch.zeros(2, 2, dtype=torch.float8_e4m3fn), torch.zeros(2, 2, dtype=torch.float8_e4m3fn))

    xs = [torch.randn(2, 3, 4, 4, generator=generator, requires_grad=True) for _ in range(25)]
    dz = torch.randn(2, 75, 4, 4, generator=generator)
    for call in range(3):
        z = srt.concatenate(xs, axis=Val(1))
        assert torch.equal(z, torch.cat(xs, 1))
        got = torch.autograd.grad(z, xs, dz)
        expected = torch.autograd.grad(torch.cat(xs, 1), xs, dz)
        assert all(torch.equal(g, e) for g, e in zip(got, expected))
    assert [s.direct for s in concatenate.signatures.values()] == [True]
    with torch.no_grad():  # a view made under no_grad: torch keeps requires_grad, ours does not
        v = srt.reshape(a, Val((16,)))
        v = srt.reshape(a, Val((16,)))
    assert not v.requires_grad and torch.equal(v, a.detach().reshape(16))
    mixed = [xs[0], xs[1].detach().to(torch.int64)]  # NumPy's promotion, checked on every call of a view op
    for _ in range(2):
        assert srt.concatenate(mixed, axis=Val(1)).dtype == torch.float64


def _outcome(call: Callable[[], object]) -> object:
    """A call's result (as NumPy arrays, dtypes kept) or its error's type and message."""
    try:
        result = call()
    except (TypeError, ValueError, IndexError, RuntimeError) as error:
        return type(error).__name__, str(error)
    return [(t.dtype, t.detach().numpy().tobytes()) for t in cast("tuple[torch.Tensor, ...]", _parts(result))]


# A first call, then a second one of the same op and statics whose tensors differ in dtype or
# rank only (or a scalar only in its sign or NaN): the second must go as it would go fresh.
_WARM_THEN: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
    ("pad: a complex constant, a complex then a real x",
     lambda: srt.pad(torch.zeros(2, dtype=torch.complex128), Val(1), constant_values=1 + 2j),
     lambda: srt.pad(torch.zeros(2, dtype=torch.float64), Val(1), constant_values=1 + 2j)),
    ("concatenate: torch's legacy (0,) tensor",
     lambda: srt.concatenate((torch.ones(2, 3), torch.ones(2, 3)), axis=Val(0)),
     lambda: srt.concatenate((torch.ones(2, 3), torch.empty(0)), axis=Val(0))),
    ("hstack: torch's legacy (0,) tensor",
     lambda: srt.hstack((torch.ones(2, 3), torch.ones(2, 3))),
     lambda: srt.hstack((torch.ones(2, 3), torch.empty(0)))),
    ("flip: a 0-d tensor", lambda: srt.flip(torch.ones(2, 3), axis=Val(0)), lambda: srt.flip(torch.tensor(5.0), axis=Val(0))),
    ("sum: a 0-d tensor", lambda: srt.sum(torch.ones(2, 3), axis=Val(0)), lambda: srt.sum(torch.tensor(5.0), axis=Val(0))),
    ("flip: a dtype we do not take", lambda: srt.flip(torch.ones(2, 3), axis=Val(0)),
     lambda: srt.flip(torch.ones(2, 3, dtype=torch.uint16), axis=Val(0))),
    ("reshape: a dtype we do not take", lambda: srt.reshape(torch.ones(2, 3), Val((3, 2))),
     lambda: srt.reshape(torch.ones(2, 3, dtype=torch.uint32), Val((3, 2)))),
    ("concatenate: one dtype, then mixed", lambda: srt.concatenate((torch.ones(2), torch.ones(2))),
     lambda: srt.concatenate((torch.ones(2), torch.ones(2, dtype=torch.int64)))),
    ("kron: 0.0, then -0.0", lambda: srt.kron(torch.ones(2, dtype=torch.float64), 0.0),
     lambda: srt.kron(torch.ones(2, dtype=torch.float64), -0.0)),
    ("pad: 0.0, then -0.0", lambda: srt.pad(torch.ones(2, dtype=torch.float64), Val(1), constant_values=0.0),
     lambda: srt.pad(torch.ones(2, dtype=torch.float64), Val(1), constant_values=-0.0)),
    ("kron: 0j, then -0-0j", lambda: srt.kron(torch.ones(2, dtype=torch.float64), 0j),
     lambda: srt.kron(torch.ones(2, dtype=torch.float64), complex(-0.0, -0.0))),
]


@pytest.mark.parametrize(("first", "second"), [(f, s) for _, f, s in _WARM_THEN], ids=[name for name, _, _ in _WARM_THEN])
def test_a_known_signature_is_never_reused_for_a_call_whose_dtypes_ranks_or_scalars_differ(
    first: Callable[[], object], second: Callable[[], object]
) -> None:
    """On main: a view op's signature was keyed without dtypes and ranks, and a float scalar
    by its value (0.0 == -0.0), so the second call reused the first's checks and forward:
    a complex pad of a real tensor, torch.cat skipping a (0,) tensor, a flip of a 0-d tensor,
    a uint16 tensor accepted, the zero's sign lost."""
    sr.clear_caches()
    fresh = _outcome(second)
    sr.clear_caches()
    first()
    assert _outcome(second) == fresh


def test_mixed_dtypes_with_bfloat16_give_numpys_result_dtype() -> None:
    """On main: torch's promotion (bfloat16 with int64 is bfloat16; NumPy's is float64)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    numpy_of = {torch.bfloat16: np.dtype(ml_dtypes.bfloat16), **_native._NUMPY}
    bf16 = torch.ones(2, 2, dtype=torch.bfloat16)
    for other, numpy_dtype in numpy_of.items():
        expected = np.result_type(numpy_of[torch.bfloat16], numpy_dtype)
        assert _native._PAIRS[torch.bfloat16, other] == _native._PAIRS[other, torch.bfloat16]
        assert np.dtype(_native._NUMPY.get(_native._PAIRS[torch.bfloat16, other], expected)) == expected, other
        if other in (torch.uint16, torch.uint32, torch.uint64):
            continue  # dtypes the adapter does not take: the table alone
        y = srt.concatenate((bf16, torch.ones(2, 2, dtype=other)))
        assert (np.dtype(ml_dtypes.bfloat16) if y.dtype == torch.bfloat16 else _native._NUMPY[y.dtype]) == expected, other
    for scalar in (True, 2, 2.0, 2j):
        expected = np.kron(np.ones(2, ml_dtypes.bfloat16), scalar).dtype
        y = srt.kron(torch.ones(2, dtype=torch.bfloat16), scalar)
        assert (np.dtype(ml_dtypes.bfloat16) if y.dtype == torch.bfloat16 else _native._NUMPY[y.dtype]) == expected, scalar


@pytest.mark.parametrize("op", ["concatenate", "stack"])
@pytest.mark.parametrize(
    ("first", "second", "direct"),
    [(torch.bfloat16, torch.float32, True), (torch.float16, torch.float64, True), (torch.float32, torch.float64, True),
     (torch.bfloat16, torch.float16, True), (torch.int64, torch.float32, False)],
)
def test_a_mixed_join_is_one_torch_op_where_torch_promotes_as_numpy(op: str, first: torch.dtype, second: torch.dtype, direct: bool) -> None:
    """An autocast model's skip connection joins bfloat16 and float32 tensors: where torch's
    promotion of the two is NumPy's, ``torch.cat``/``torch.stack`` take them as they are (its
    node's inputs are the leaves: no conversion of each input first); where it is not
    (int64 with float32: float64 in NumPy), the inputs are converted first. Values and
    gradients are the same either way: NumPy's concatenation of the promoted values, and
    each input's slice of ``dy`` rounded once to its dtype."""
    ml_dtypes = importlib.import_module("ml_dtypes")
    numpy_of = {torch.bfloat16: np.dtype(ml_dtypes.bfloat16), **_native._NUMPY}
    generator = torch.Generator().manual_seed(0)
    a = (torch.randn(2, 3, 4, generator=generator) * 10).to(first).requires_grad_(first.is_floating_point)
    b = (torch.randn(2, 3, 4, generator=generator) * 10).to(second).requires_grad_()
    parts = (a, b, a, b)
    y = srt.concatenate(parts, axis=Val(1)) if op == "concatenate" else srt.stack(parts, axis=Val(1))
    as_numpy = [p.detach().float().numpy().astype(np.float64).astype(numpy_of[p.dtype]) if p.dtype == torch.bfloat16
                else p.detach().numpy() for p in parts]
    expected = np.concatenate(as_numpy, axis=1) if op == "concatenate" else np.stack(as_numpy, axis=1)
    assert numpy_of[y.dtype] == expected.dtype
    got = y.detach().float().numpy() if y.dtype == torch.bfloat16 else y.detach().numpy()
    np.testing.assert_array_equal(got, expected.astype(got.dtype))
    inputs = [type(f[0]).__name__ for f in cast(Any, y.grad_fn).next_functions if f[0] is not None]
    assert ("ToCopyBackward0" not in inputs) is direct, inputs
    dy = torch.randn(y.shape, generator=generator, dtype=torch.float64).to(y.dtype)
    torch.autograd.backward(y, dy)
    pieces = torch.split(dy, 3, dim=1) if op == "concatenate" else dy.unbind(1)
    for tensor, index in ((a, 0), (b, 1)):
        if tensor.requires_grad:
            assert tensor.grad is not None
            expected_grad = pieces[index].to(tensor.dtype) + pieces[index + 2].to(tensor.dtype)
            assert torch.equal(tensor.grad, expected_grad), (op, first, second)


def test_kron_of_transposed_operands_as_numpys() -> None:
    """On main: torch 2.14's kron refuses a transposed operand ("view size is not compatible")."""
    a = torch.randn(3, 2, dtype=torch.float64).T.requires_grad_()
    b = torch.randn(2, 2, dtype=torch.float64)
    big = torch.randn(50, 40, dtype=torch.float64).T.requires_grad_()
    for x, y in ((a, b), (b, a), (big, b), (b, b.T)):
        got = srt.kron(x, y)
        np.testing.assert_array_equal(got.detach().numpy(), np.kron(x.detach().numpy(), y.detach().numpy()))
    assert torch.autograd.gradcheck(lambda x: srt.kron(x, b), (a,))


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(torch.uint8, -1), (torch.uint8, -1.5), (torch.int32, 2.7), (torch.float32, 1e40), (torch.float16, 1e6),
     (torch.int64, 2**63 - 1), (torch.int8, 300), (torch.bool, 2), (torch.bfloat16, 1.00390625)],
)
def test_pad_sets_the_constant_as_numpy_casts_it(dtype: torch.dtype, value: float) -> None:
    """On main: F.pad refused any constant out of the dtype's range (uint8 and -1: NumPy's 255)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    numpy_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == torch.bfloat16 else _native._NUMPY[dtype]
    x = torch.zeros(2, 3, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's overflow warning, the same on both sides
        try:
            expected = np.pad(np.zeros((2, 3), numpy_dtype), 1, constant_values=value)
        except OverflowError as error:
            with pytest.raises(OverflowError, match=str(error)):
                srt.pad(x, Val(1), constant_values=value)
            return
        got = srt.pad(x, Val(1), constant_values=value)
    as_numpy = got.float().numpy().astype(numpy_dtype) if dtype == torch.bfloat16 else got.numpy()
    assert as_numpy.dtype == expected.dtype and as_numpy.tobytes() == expected.tobytes()


def test_inputs_keep_their_storage_resizable() -> None:
    # FSDP2 frees a gathered parameter by resizing its storage to 0; ``Tensor.numpy()`` marks a
    # storage never resizable, so before this change FSDP2's backward failed with
    # "RuntimeError: Trying to resize storage that is not resizable".
    w = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    torch.autograd.grad(srt.kron(w, b).sum(), (w, b))
    torch.autograd.grad(srt.repeat(w, Val(2), axis=Val(1)).sum(), w)
    for tensor in (w, b):
        storage = tensor.untyped_storage()
        assert storage.resizable()
        size = storage.nbytes()
        storage.resize_(0)
        storage.resize_(size)


def test_conjugate_and_negative_views_are_resolved() -> None:
    z = torch.randn(2, 3, dtype=torch.complex128)
    assert z.conj().is_conj()
    assert torch.equal(srt.flip(z.conj(), Val(1)), torch.from_numpy(np.flip(np.conj(z.numpy()), 1).copy()))
    negative = z.conj().imag  # a real view with the negative bit
    assert negative.is_neg()
    assert torch.equal(srt.flip(negative, Val(0)), torch.from_numpy(np.flip(-z.numpy().imag, 0).copy()))


def test_private_torch_apis_we_rely_on_still_behave() -> None:
    """Two private torch names stay (no public equivalent answers the question): whether a
    torch.func transform is active, and the forward-mode AD level. If a torch version moves
    them, this fails here rather than in every op call."""
    assert not _adapter._FUNCTORCH_ACTIVE() and _adapter._FORWARD_AD._current_level == -1
    seen: list[bool] = []

    def probe(x: torch.Tensor) -> torch.Tensor:
        seen.append(bool(_adapter._FUNCTORCH_ACTIVE()))
        return x.sum()

    torch.func.grad(probe)(torch.ones(2))
    with torch.autograd.forward_ad.dual_level():
        level = _adapter._FORWARD_AD._current_level
    assert seen == [True] and level >= 0


# --------------------------------------------------------------------------------------------
# what a new user hit: dtypes, scalars


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_forwards_and_float32_pullbacks(dtype: torch.dtype) -> None:
    """Before: ``TypeError: stablerules.torch.repeat: argument 'x' has dtype bfloat16, which
    stablerules does not support``. Now torch's own forward, and our pullbacks accumulate in
    float32 and round once: equal to stock torch's gradients within the dtype's tolerance."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(6, 5, generator=generator).to(dtype).requires_grad_()
    b = torch.randn(3, 2, generator=generator).to(dtype).requires_grad_()
    index = torch.tensor([0, 4, -1, 2, 2, 0])
    pairs: list[tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]] = [
        (lambda: srt.repeat(x, Val(3), axis=Val(1)), lambda: x.repeat_interleave(3, dim=1)),
        (lambda: srt.concatenate((x, x * 2), axis=Val(0)), lambda: torch.cat((x, x * 2))),
        (lambda: srt.take(x, index, axis=Val(1)), lambda: x.index_select(1, index % 5)),
        (lambda: srt.kron(x, b), lambda: torch.kron(x, b)),
    ]
    tolerance = 1e-2 if dtype == torch.bfloat16 else 2e-3
    for ours, stock in pairs:
        with torch.autocast("cpu", dtype=dtype):
            got, expected = ours(), stock()
        assert got.dtype == expected.dtype == dtype and torch.equal(got, expected)
        weights = torch.randn(got.shape, generator=generator).to(dtype)
        got_grads = torch.autograd.grad((got * weights).sum(), (x, b), allow_unused=True)
        expected_grads = torch.autograd.grad((expected * weights).sum(), (x, b), allow_unused=True)
        for g, e in zip(got_grads, expected_grads):
            assert (g is None) == (e is None)
            if g is not None and e is not None:
                assert g.dtype == dtype
                # stock torch's gradient, both compared in float64
                torch.testing.assert_close(g.double(), e.double(), rtol=tolerance, atol=tolerance)
    torch._dynamo.reset()  # compiled: the vjp custom op's float32 pullback, rounded once
    compiled = torch.compile(lambda t: srt.tile(t, Val(2)).float().pow(2).sum(), backend="aot_eager", fullgraph=True)
    (got_grad,) = torch.autograd.grad(compiled(x), x)
    (stock_grad,) = torch.autograd.grad(x.tile(2).float().pow(2).sum(), x)
    assert got_grad.dtype == dtype
    torch.testing.assert_close(got_grad.double(), stock_grad.double(), rtol=tolerance, atol=tolerance)


def _with_float64_references(
    ours: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    stock: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    leaves: tuple[torch.Tensor, ...],
    b: torch.Tensor,
    generator: torch.Generator,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``ours(a, b)`` (``a = leaves[0]``) differentiated at a random cotangent of its dtype, for
    each of ``leaves``: pairs of our gradient and the float64 one of torch's own ``stock`` on
    the same values, with the same cotangent."""
    a = leaves[0]
    y = ours(a, b)
    dy = torch.randn(y.shape, generator=generator).to(y.dtype)
    grads = torch.autograd.grad(y, leaves, dy)
    wide = (a.detach().double().requires_grad_(), b.detach().double().requires_grad_())
    references = torch.autograd.grad(stock(*wide), wide[: len(leaves)], dy.double())
    return list(zip(grads, references, strict=True))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_pullbacks_are_the_float64_gradient_rounded_once(dtype: torch.dtype) -> None:
    """On the CPU a 16-bit tensor reaches the core's 16-bit kernels as it is (bfloat16 as
    ml_dtypes' bits over the same memory): each adding pullback is the float64 gradient of the
    same 16-bit inputs rounded once to the dtype, within one unit in the last place (a float32
    sum of more than 2^24 in range may round differently); the reference is torch's own ops in
    float64."""
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(40, 33, generator=generator).to(dtype).requires_grad_()
    b = torch.randn(7, 5, generator=generator).to(dtype).requires_grad_()
    index = torch.randint(0, 33, (300,), generator=generator)
    Op = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    cases: list[tuple[Op, Op, int]] = [  # (ours, torch's own for the float64 reference, how many of x, b)
        (lambda t, _: srt.repeat(t, Val(24), axis=Val(1)), lambda t, _: t.repeat_interleave(24, dim=1), 1),
        (lambda t, _: srt.tile(t, Val((3, 8))), lambda t, _: t.tile((3, 8)), 1),
        (lambda t, _: srt.take(t, index, axis=Val(1)), lambda t, _: t.index_select(1, index), 1),
        (lambda t, _: srt.broadcast_to(t[:1], Val((64, 33))), lambda t, _: t[:1].expand(64, 33), 1),
        (lambda t, u: srt.kron(t, u), lambda t, u: torch.kron(t, u), 2),
    ]
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    for ours, stock, count in cases:
        for got, reference in _with_float64_references(ours, stock, (x, b)[:count], b, generator):
            assert got.dtype == dtype
            rounded = reference.to(dtype).double()
            scale = torch.clamp(rounded.abs(), min=torch.finfo(dtype).tiny)
            assert ((got.double() - rounded).abs() <= ulp * scale).all(), (ours, (got.double() - rounded).abs().max())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_small_signatures_round_once(dtype: torch.dtype) -> None:
    """Small signatures take torch's own backward (``TorchFacts.torch_forms``); for a 16-bit
    gradient it must still be the float64 gradient rounded once, within one unit in the last
    place. Before: ``srt.tile`` of a (3, 3) input by ``(2, 2, 2)`` summed its new leading axis
    apart and rounded after each sum (848 units of bfloat16 off where the sum cancels), and a
    small ``srt.kron`` rounded each product to the format before summing them (28-780 units),
    and under ``torch.compile`` repeat's forward of inner counts on two axes (two
    ``repeat_interleave``, or a pass before the broadcast) rounded after each one's sum (40
    and 1848 units with the aot_eager backend); now the tile adds no axis in torch's op, a
    16-bit kron takes our kernel, eager and compiled, and a recorded 16-bit repeat is one
    broadcast (``Namespace.single_sum``). The reference is torch's own ops in float64 on the same 16-bit values; each
    case runs over several draws, so a sum that cancels is among them."""
    generator = torch.Generator().manual_seed(5)
    Op = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    kron_small = torch.compile(lambda t, u: srt.kron(t, u), backend="aot_eager", fullgraph=True)

    def compiled(op: Callable[[torch.Tensor], torch.Tensor]) -> Op:
        traced = torch.compile(op, backend="aot_eager", fullgraph=True)
        return lambda t, _: traced(t)

    cases: list[tuple[str, Op, Op, tuple[int, ...], tuple[int, ...], int]] = [
        ("tile, new leading axes", lambda t, _: srt.tile(t, Val((2, 2, 2))), lambda t, _: t.tile((2, 2, 2)), (3, 3), (1,), 1),
        ("tile, same axes", lambda t, _: srt.tile(t, Val((3, 2))), lambda t, _: t.tile((3, 2)), (3, 3), (1,), 1),
        ("repeat of one axis", lambda t, _: srt.repeat(t, Val(3), axis=Val(0)), lambda t, _: t.repeat_interleave(3, 0), (3, 3), (1,), 1),
        ("kron", lambda t, u: srt.kron(t, u), lambda t, u: torch.kron(t, u), (3, 2), (2, 4), 2),
        ("kron, 1-D by 2-D", lambda t, u: srt.kron(t, u), lambda t, u: torch.kron(t, u), (3,), (2, 4), 2),
        ("kron, compiled", kron_small, lambda t, u: torch.kron(t, u), (3, 2), (2, 4), 2),
        # compiled below the compiled bound: torch's autograd of our forward (aot_eager, which
        # computes in the format as eager does; inductor computes in float32)
        ("upsample, compiled", compiled(lambda t: srt.repeat(t, inner=Val((1, 1, 2, 2)))),
         lambda t, _: t.repeat_interleave(2, 2).repeat_interleave(2, 3), (1, 2, 3, 3), (1,), 1),
        ("inner and outer, compiled", compiled(lambda t: srt.repeat(t, inner=Val((1, 4)), outer=Val((2, 2)))),
         lambda t, _: t.repeat_interleave(4, 1).tile((2, 2)), (40, 40), (1,), 1),
    ]
    for words, ours, stock, a_shape, b_shape, count in cases:
        worst = 0.0
        for _ in range(40):
            a = torch.randn(a_shape, generator=generator).to(dtype).requires_grad_()
            b = torch.randn(b_shape, generator=generator).to(dtype).requires_grad_()
            for got, reference in _with_float64_references(ours, stock, (a, b)[:count], b, generator):
                assert got.dtype == dtype
                rounded = reference.to(dtype)
                # one unit in the last place of the rounded reference (its spacing to the next
                # value away from zero; the smallest subnormal at zero)
                spacing = (torch.nextafter(rounded.abs(), torch.tensor(float("inf"), dtype=dtype)) - rounded.abs()).double()
                worst = max(worst, float(((got.double() - rounded.double()).abs() / spacing).max()))
        assert worst <= 1, (words, worst)
    text = sr.explain(srt.kron, torch.ones(3, 2, dtype=dtype), torch.ones(2, 4, dtype=dtype))
    assert "pullback: our compiled kernel\n" in text and "a 16-bit float input takes it at every size" in text
    assert "pullback: torch's autograd\n" in sr.explain(srt.kron, torch.ones(3, 2), torch.ones(2, 4))  # float32


def test_kron_takes_python_scalars_as_numpy_does() -> None:
    """Before: ``stablerules.torch.kron: argument 'b' must be a torch.Tensor (or a sequence of
    them), got float``, although ``sr.kron`` and ``np.kron`` take scalars."""
    t = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    for scalar in (2.5, -3, True, 1.5 - 2j):
        for got, expected in ((srt.kron(t, scalar), np.kron(t.detach().numpy(), scalar)),
                              (srt.kron(scalar, t), np.kron(scalar, t.detach().numpy()))):
            assert got.dtype == torch.from_numpy(expected).dtype and tuple(got.shape) == expected.shape
            np.testing.assert_array_equal(got.detach().numpy(), expected)
    assert torch.autograd.gradcheck(lambda t: srt.kron(t, 2.5), (t,), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(lambda t: srt.kron(-1.5, t), (t,))
    batch = torch.randn(4, 2, 3, dtype=torch.float64)
    assert torch.equal(torch.vmap(lambda s: srt.kron(s, 3.0))(batch), batch * 3.0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: srt.kron(t, 2.0).sum(), fullgraph=True)
    (g,) = torch.autograd.grad(compiled(t), t)
    assert torch.equal(g, torch.full((2, 3), 2.0, dtype=torch.float64))
    with pytest.raises(TypeError, match="stablerules.torch.kron: argument 'b' must be a torch.Tensor .or a Python scalar., got str"):
        srt.kron(t, "2")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# the indexing ops: integer indices as tensor data, sr.ix as a static

_IX = sr.ix[1:, ::-2]


def _x(*shape: int, seed: int = 3) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=generator, requires_grad=True)


# Repeated and negative indices throughout: their pullbacks are scatter-adds.
_TAKE_I = torch.tensor([0, -1, 2, 0, 3, -1])
_ALONG_I = torch.tensor([[0, 1, -1, 2, 0], [4, 4, -5, 0, 1], [1, 1, 1, 1, 1], [-1, 0, 3, 3, 2]])
_ADD_I = torch.tensor([0, 1, 1, -1, 0])

# (our call on the differentiable inputs, those inputs, torch's own op as reference), by id:
# each family's torch_indexing rows.
INDEXING: dict[str, tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...], Callable[..., torch.Tensor]]] = dict(
    collect("torch_indexing", _x)
)


def test_every_op_has_a_row() -> None:
    rows = [case.id for case in CASES] + list(INDEXING)
    assert_every_op_has_a_row("torch_cases and torch_indexing", map(op_of, rows))
    assert len(set(IDS)) == len(IDS), "two rows share an id"


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing_forward_equals_torch(name: str) -> None:
    ours, inputs, reference = INDEXING[name]
    with torch.no_grad():
        assert torch.equal(ours(*inputs), reference(*inputs))


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing_gradcheck_and_gradgradcheck(name: str) -> None:
    ours, inputs, _ = INDEXING[name]
    assert torch.autograd.gradcheck(ours, inputs)
    assert torch.autograd.gradgradcheck(ours, inputs)


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing_under_no_grad_builds_no_graph(name: str) -> None:
    ours, inputs, reference = INDEXING[name]
    with torch.no_grad():
        y = ours(*inputs)
    assert y.grad_fn is None and not y.requires_grad
    assert torch.equal(y, reference(*(t.detach() for t in inputs)))


def test_indices_are_data_not_statics() -> None:
    # New index values of the same shape and dtype: the same signature, the new values used.
    x = _x(4, 5)
    _signature_table(srt.take).clear()
    first = srt.take(x, torch.tensor([0, 1, 2]), axis=Val(1))
    second = srt.take(x, torch.tensor([4, -1, 4]), axis=Val(1))
    assert len(_signature_table(srt.take)) == 1
    assert torch.equal(first, x[:, [0, 1, 2]]) and torch.equal(second, x[:, [4, 4, 4]])
    # Gradients follow each call's own indices (no pullback shared between calls).
    (g,) = torch.autograd.grad(second.sum(), x)
    assert torch.equal(g, torch.zeros(4, 5, dtype=torch.float64).index_fill(1, torch.tensor([4]), 3.0))
    # NumPy arrays and lists are taken as tensors are.
    assert torch.equal(srt.take(x, np.array([4, -1, 4]), axis=Val(1)), second)
    assert torch.equal(srt.take(x, [4, -1, 4], axis=Val(1)), second)
    assert torch.equal(srt.take(x, indices=[4, -1, 4], axis=Val(1)), second)
    # The indices get no gradient; the values of index_add do.
    v = _x(5, 5, seed=5)
    y = srt.index_add(x, _ADD_I, v, Val(0))
    gx, gv = torch.autograd.grad(y.pow(2).sum(), (x, v))
    ex, ev = torch.autograd.grad(torch.index_add(x, 0, _ADD_I % 4, v).pow(2).sum(), (x, v))
    assert torch.allclose(gx, ex) and torch.allclose(gv, ev)


# Plain indices, as NumPy takes them (and sr.getindex does): each is a dynamic argument.
_PLAIN_INDICES: list[Any] = [(slice(None), 0), (slice(1, None), slice(None, None, -2)), slice(1, 3), 2, (Ellipsis, 0), (None, slice(None), -1)]


@pytest.mark.parametrize("index", _PLAIN_INDICES, ids=repr)
def test_getindex_takes_a_plain_index_as_numpy_does(index: Any) -> None:
    """Until round 23: ``AttributeError: 'tuple' object has no attribute 'entries'`` for any
    index not written ``sr.ix[...]``, though the op's signature and NumPy's op take them."""
    x = _x(4, 5, 6)
    reference = x.detach().numpy()[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        y = srt.getindex(x, index)
        assert np.array_equal(y.detach().numpy(), reference)
        (g,) = torch.autograd.grad(y.sum(), x)
        expected = np.zeros((4, 5, 6))
        expected[index] = 1
        assert np.array_equal(g.numpy(), expected)
        assert torch.autograd.gradcheck(lambda t: srt.getindex(t, index), (x,))
        compiled = torch.compile(lambda t: srt.getindex(t, index), fullgraph=True, backend="eager")
        assert np.array_equal(compiled(x.detach()).numpy(), reference)


def test_a_new_signatures_first_call_counts_its_plain_statics_once() -> None:
    """Until round 23 the call that made a signature counted its plain statics twice: once
    validating it, once running it."""
    x = torch.rand(3, 7, 5, dtype=torch.float64)  # a shape no other test rolls
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        counts = []
        for _ in range(3):
            before = sr.cache_info().dynamic_arguments
            srt.roll(x, 2, axis=1)  # two plain ints
            counts.append(sr.cache_info().dynamic_arguments - before)
        assert counts == [2, 2, 2]
        with pytest.raises(sr.DynamicFallbackError, match="'shift' was given as a plain int"), sr.no_fallback():
            srt.roll(x, 3, axis=1)  # a new signature refused before torch's op runs
        before = sr.cache_info().dynamic_arguments
        srt.getindex(x, (slice(None), 0))
        assert sr.cache_info().dynamic_arguments == before + 1


@pytest.mark.parametrize("name", ["take", "take_along_axis", "index_add"])
def test_an_indexing_pullback_keeps_only_the_indices(name: str) -> None:
    """The pullbacks of take, take_along_axis and index_add read only the indices, so only the
    indices are saved, as torch's own indexing saves its indices: ``x`` updated in place after
    the call does not fail the backward (until round 23: torch's "modified by an inplace
    operation"), and the gradients are those of the unmodified call, torch's own ops'."""
    generator = torch.Generator().manual_seed(3)
    base = torch.rand(50, 64, dtype=torch.float64, generator=generator)
    source = torch.rand(40, 64, dtype=torch.float64, generator=generator)
    take_i = torch.randint(-50, 50, (4000,), generator=generator)
    along_i = torch.randint(0, 50, (30, 64), generator=generator)
    add_i = torch.randint(0, 50, (40,), generator=generator)
    ours, theirs = {
        "take": (lambda x, v: srt.take(x, take_i, axis=Val(0)), lambda x, v: x[take_i % 50]),
        "take_along_axis": (lambda x, v: srt.take_along_axis(x, along_i, axis=Val(0)), lambda x, v: torch.take_along_dim(x, along_i, 0)),
        "index_add": (lambda x, v: srt.index_add(x, add_i, v, axis=Val(0)), lambda x, v: x.index_add(0, add_i, v)),
    }[name]
    grads = []
    for f, update in ((ours, True), (theirs, False)):
        x, v = base.clone().requires_grad_(True), source.clone().requires_grad_(True)
        x2, v2 = x * 1, v * 1
        y = f(x2, v2)
        if update:
            x2.mul_(2)
            v2.add_(1)
        weight = torch.rand(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
        grads.append(torch.autograd.grad((y * weight).sum(), (x, v), allow_unused=True))
    for got, expected in zip(*grads):
        assert (got is None) == (expected is None)
        assert got is None or expected is None or torch.allclose(got, expected)


def test_bad_indices_are_clear_errors() -> None:
    x = _x(4, 5)
    with pytest.raises(TypeError, match=r"take: argument 'indices' is integer data"):
        srt.take(x, torch.tensor([0.0, 1.0], requires_grad=True))
    with pytest.raises(TypeError, match=r"take: argument 'indices' must be an integer"):
        srt.take(x, "0")  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match=r"take"):
        srt.take(x, torch.tensor([0.0, 1.0]))
    with pytest.raises(IndexError, match=r"take: index 5 is out of bounds for axis 1 with size 5"):
        srt.take(x, torch.tensor([0, 5]), axis=Val(1))
    with pytest.raises(IndexError, match=r"take: index -6 is out of bounds"):
        torch.vmap(lambda i: srt.take(x.detach(), i, axis=Val(1)))(torch.tensor([[0, 1], [-6, 0]]))


def _looped(f: Callable[..., torch.Tensor], args: Sequence[torch.Tensor], in_dims: Sequence[int | None], size: int) -> torch.Tensor:
    return torch.stack([f(*(a[i] if d is not None else a for a, d in zip(args, in_dims))) for i in range(size)])


def test_vmap_of_the_indexing_ops_equals_a_loop() -> None:
    """Before: ``NotImplementedError: stablerules.torch.take: vmap (and other batching
    transforms) is not supported yet``. Indices and arrays batched, alone or together."""
    generator = torch.Generator().manual_seed(11)
    xs = torch.randn(3, 4, 5, dtype=torch.float64, generator=generator)
    take_is = torch.tensor([[0, -1, 2], [4, 4, 0], [-5, 1, 3]])
    take_is0 = torch.tensor([[0, -1, 2], [3, 3, 0], [-4, 1, 3]])
    along_is = torch.randint(-5, 5, (3, 4, 2), generator=generator)
    add_is = torch.tensor([[0, -1], [3, 3], [1, 0]])
    vs = torch.randn(3, 2, 5, dtype=torch.float64, generator=generator)
    rows: list[tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...], list[tuple[int | None, ...]]]] = [
        (lambda x, i: srt.take(x, i, axis=Val(0)), (xs, take_is0), [(0, 0), (0, None), (None, 0)]),
        (lambda x, i: srt.take(x, i, axis=Val(-1)), (xs, take_is), [(0, 0), (None, 0)]),
        (lambda x, i: srt.take(x, i), (xs, take_is), [(0, 0), (0, None), (None, 0)]),
        (lambda x, i: srt.take_along_axis(x, i, Val(1)), (xs, along_is), [(0, 0), (0, None), (None, 0)]),
        (lambda x, i, v: srt.index_add(x, i, v, Val(0)), (xs, add_is, vs), [(0, 0, 0), (0, None, 0), (None, 0, 0), (0, 0, None)]),
    ]
    for f, args, options in rows:
        for in_dims in options:
            arguments = [a if d is not None else a[0] for a, d in zip(args, in_dims)]
            got = torch.vmap(f, in_dims=in_dims)(*arguments)
            assert torch.equal(got, _looped(f, arguments, in_dims, 3)), in_dims
    # gradients through the batched call, against the loop's
    x = xs.clone().requires_grad_()
    got_grad = torch.autograd.grad(torch.vmap(lambda x, i: srt.take(x, i, axis=Val(0)))(x, take_is0).pow(2).sum(), x)[0]
    expected_grad = torch.autograd.grad(_looped(lambda x, i: srt.take(x, i, axis=Val(0)), (x, take_is0), (0, 0), 3).pow(2).sum(), x)[0]
    assert torch.allclose(got_grad, expected_grad)


def test_indexing_compile_fullgraph_equals_eager_without_recompiling() -> None:
    torch._dynamo.reset()
    from torch._dynamo.testing import CompileCounter

    def model(x: torch.Tensor, v: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        y = srt.take(x, i, axis=Val(1)).sin()
        z = srt.index_add(x, j, v, Val(0))
        w = srt.take_along_axis(x, _ALONG_I, Val(1))
        return y.sum() + z.pow(2).sum() + (w * srt.getindex(x, _IX)[:1].sum()).sum()

    x, v = _x(4, 5), _x(5, 5, seed=6)
    counter = CompileCounter()
    for i, j in ((_TAKE_I, _ADD_I), (torch.tensor([4, 4, 0, 1, 2, -2]), torch.tensor([3, 3, 3, 0, -4]))):
        for compiled in (torch.compile(model, fullgraph=True), torch.compile(model, backend=counter, fullgraph=True)):
            got = compiled(x, v, i, j)
            got_grads = torch.autograd.grad(got, (x, v))
            expected = model(x, v, i, j)
            expected_grads = torch.autograd.grad(expected, (x, v))
            assert torch.allclose(got, expected)
            assert all(torch.allclose(g, e) for g, e in zip(got_grads, expected_grads))
    assert counter.frame_count == 1, "new index values: no recompilation"


@pytest.mark.parametrize("entry", [_ops.ENTRIES["take"], _ops.ENTRIES["take_along_axis"], _ops.ENTRIES["index_add"]], ids=lambda e: e.name)
def test_indexing_opcheck(entry: _call.Entry) -> None:
    x = torch.randn(4, 5, dtype=torch.float64)
    args: dict[str, tuple[tuple[object, ...], dict[str, object]]] = {
        "take": ((x, _TAKE_I), {"axis": Val(1)}),
        "take_along_axis": ((x, _ALONG_I, Val(1)), {}),
        "index_add": ((x[:, :3], _ADD_I, torch.randn(5, 3, dtype=torch.float64)), {}),
    }
    _check_vjp_op(entry, args[entry.name])


def test_indexing_on_dtensors_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Real DTensors need a process group (tests/test_torch_distributed.py); the check itself
    # only asks is_dtensor, so a tensor subclass that it recognizes stands in for one.
    class Sharded(torch.Tensor):
        pass

    monkeypatch.setattr(_adapter, "is_dtensor", lambda t: type(t) is Sharded)
    x = torch.randn(4, 5, dtype=torch.float64).as_subclass(Sharded)
    _signature_table(srt.take).clear()
    with pytest.raises(TypeError, match=r"take: DTensor inputs are not supported yet"):
        srt.take(x, _TAKE_I)
    # getindex is torch's own indexing: a DTensor takes it natively.
    assert torch.equal(srt.getindex(x, _IX).as_subclass(torch.Tensor), x.as_subclass(torch.Tensor)[1:, [4, 2, 0]])


def test_clear_caches_empties_the_adapters_tables_and_calls_work_after() -> None:
    x = torch.rand(2, 3, dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(srt.flip(x, Val(0)).sum(), x)
    assert _adapter._tables_size() > 0
    sr.clear_caches()
    assert _adapter._tables_size() == 0
    (second,) = torch.autograd.grad(srt.flip(x, Val(0)).sum(), x)
    assert torch.equal(first, torch.ones_like(x)) and torch.equal(second, first)
    assert _adapter._tables_size() > 0


def test_the_ops_are_typed_from_the_schema() -> None:
    """mypy checks these (tests are in its files): tensors in and out, split a tuple."""
    x = torch.ones(2, 3)
    assert_type(srt.repeat(x, Val(2), axis=Val(0)), torch.Tensor)
    assert_type(srt.concatenate([x, x], axis=Val(1)), torch.Tensor)
    assert_type(srt.kron(x, 2.0), torch.Tensor)
    parts = assert_type(srt.split(x, Val(3), axis=Val(1)), tuple[torch.Tensor, ...])
    assert len(parts) == 3 and all(type(part) is torch.Tensor for part in parts)


def test_steady_calls_compile_nothing_and_plain_ints_are_still_dynamic() -> None:
    """A signature's later calls run its plan directly; the guards still see every call."""
    x = torch.rand(4, 5, 6, dtype=torch.float64)
    for _ in range(2):  # the second call of each takes the signature's planned path
        srt.sum(x, Val(1))
        srt.concatenate((x, x), axis=Val(0))
        srt.kron(x, x)
    with sr.no_compile(), sr.no_fallback():
        total = srt.sum(x, Val(1))
        joined = srt.concatenate((x, x), axis=Val(0))
        product = srt.kron(x, x)
    assert torch.allclose(total, x.sum(1)) and torch.equal(joined, torch.cat((x, x)))
    assert torch.allclose(product, torch.kron(x, x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for _ in range(2):
            srt.sum(x, 1)  # a plain int: a dynamic argument, counted on every call
        before = sr.cache_info().dynamic_arguments
        srt.sum(x, 1)
        assert sr.cache_info().dynamic_arguments == before + 1
        with pytest.raises(sr.DynamicFallbackError), sr.no_fallback():
            srt.sum(x, 1)


# --------------------------------------------------------------------------------------------
# issue 35: torch's own forwards, our pullbacks as custom ops with symbolic shapes


def _batch_rows() -> dict[str, tuple[Callable[..., object], tuple[int, ...], Callable[[int], tuple[torch.Tensor, ...]]]]:
    """Per op: a call whose first dimension (the batch, named by no ``Val``) varies, the shape
    of ``x`` after the batch, and the call's other arguments for a batch size."""
    # No other extent equals the first batch size (2): dynamo's duck sizing would tie them.
    b = torch.randn(4, 5, dtype=torch.float64)
    return {
        "repeat": (lambda x: srt.repeat(x, Val(2), axis=Val(1)), (3,), lambda n: ()),
        "tile": (lambda x: srt.tile(x, Val((1, 2))), (3,), lambda n: ()),
        "concatenate": (lambda x: srt.concatenate((x, x * 2), axis=Val(1)), (3,), lambda n: ()),
        "stack": (lambda x: srt.stack((x, x), axis=Val(1)), (3,), lambda n: ()),
        "hstack": (lambda x: srt.hstack((x, x)), (3,), lambda n: ()),
        "vstack": (lambda x: srt.vstack((x, x)), (3,), lambda n: ()),
        "cat": (lambda x: srt.cat(x, x, dims=Val(1)), (3,), lambda n: ()),
        "kron": (lambda x, b: srt.kron(x, b), (3,), lambda n: (b,)),
        "flip": (lambda x: srt.flip(x, Val(1)), (3,), lambda n: ()),
        "roll": (lambda x: srt.roll(x, Val(1), axis=Val(1)), (3,), lambda n: ()),
        "permute_dims": (lambda x: srt.permute_dims(x, Val((1, 0))), (3,), lambda n: ()),
        "transpose": (lambda x: srt.transpose(x), (3,), lambda n: ()),
        "swapaxes": (lambda x: srt.swapaxes(x, Val(0), Val(1)), (3,), lambda n: ()),
        "reshape": (lambda x: srt.reshape(x, Val((-1,))), (3,), lambda n: ()),
        "broadcast_to": (lambda x: srt.broadcast_to(x, Val((2, 1, 3))), (3,), lambda n: ()),
        "sum": (lambda x: srt.sum(x, Val(1)), (3,), lambda n: ()),
        "mean": (lambda x: srt.mean(x, Val(1)), (3,), lambda n: ()),
        "pad": (lambda x: srt.pad(x, Val((0, 0, 1, 2))), (3,), lambda n: ()),
        "split": (lambda x: srt.split(x, Val(3), axis=Val(1))[1], (6,), lambda n: ()),
        "getindex": (lambda x: srt.getindex(x, sr.ix[:, 1:]), (3,), lambda n: ()),
        "take": (lambda x, i: srt.take(x, i, axis=Val(1)), (3,), lambda n: (torch.tensor([0, 2, -1, 2]),)),
        "take_along_axis": (
            lambda x, i: srt.take_along_axis(x, i, Val(1)),
            (3,),
            lambda n: (torch.arange(4 * n).reshape(n, 4) % 3,),
        ),
        "index_add": (
            lambda x, i, v: srt.index_add(x, i, v, Val(1)),
            (3,),
            lambda n: (torch.tensor([2, 0, 1, 2]), torch.ones(n, 4, dtype=torch.float64)),
        ),
    }


# broadcast_to's Val names every dimension of its result: no dimension of its input can vary
# without a new Val, so its row keeps one shape, (1, 3) (one graph, trivially).
BATCH_SIZES = tuple(range(2, 13))


def test_every_op_gives_one_graph_for_eleven_batch_sizes() -> None:
    """Before: batch sizes 2, 3, 5, 7, 11 gave 5 graphs with ``srt.repeat`` or
    ``srt.concatenate`` under ``dynamic=True`` (the fake implementation specialized sizes)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    rows = _batch_rows()
    assert set(rows) == set(srt.__all__) - {"FILL_THRESHOLD", "TorchOp"}
    counts: dict[str, int] = {}
    for name, (call, tail, extra) in rows.items():
        torch._dynamo.reset()
        counter = CompileCounterWithBackend("aot_eager")
        compiled = torch.compile(call, backend=counter, dynamic=True, fullgraph=True)
        for size in BATCH_SIZES:
            shape = (1, 3) if name == "broadcast_to" else (size, *tail)
            x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
            args = extra(size)
            got = cast("torch.Tensor", compiled(x, *args))
            expected = cast("torch.Tensor", call(x, *args))
            weights = torch.randn_like(expected)
            (got_grad,) = torch.autograd.grad((got * weights).sum(), x)
            (expected_grad,) = torch.autograd.grad((expected * weights).sum(), x)
            assert torch.allclose(got, expected) and torch.allclose(got_grad, expected_grad), (name, size)
        counts[name] = counter.frame_count
    assert counts == dict.fromkeys(rows, 1), counts


def test_take_with_nine_index_lengths_never_recompiles() -> None:
    """Before: ``FailOnRecompileLimitHit`` under ``dynamic=True, fullgraph=True``."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(lambda x, i: srt.take(x, i, axis=Val(1)).sin().sum(), backend=counter, dynamic=True, fullgraph=True)
    for length in range(2, 11):
        i = torch.arange(length) % 7
        (got,) = torch.autograd.grad(compiled(x, i), x)
        (expected,) = torch.autograd.grad(x.index_select(1, i).sin().sum(), x)
        assert torch.allclose(got, expected)
    assert counter.frame_count == 1


def test_meta_and_fake_tensors_go_through_every_op() -> None:
    """Before: ``TypeError: stablerules.torch.tile: argument 'x' is on meta, which is not
    supported``. Shapes and dtypes as on real tensors, forward and backward, no data."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    for name, (call, tail, extra) in _batch_rows().items():
        shape = (1, 3) if name == "broadcast_to" else (5, *tail)
        real = torch.randn(shape, dtype=torch.float32, requires_grad=True)
        expected = cast("torch.Tensor", call(real, *extra(5)))
        meta = torch.empty(shape, dtype=torch.float32, device="meta", requires_grad=True)
        got = cast("torch.Tensor", call(meta, *(a.to("meta") for a in extra(5))))
        assert got.device.type == "meta" and got.shape == expected.shape and got.dtype == expected.dtype, name
        (grad,) = torch.autograd.grad(got.sum(), meta)
        assert grad.device.type == "meta" and grad.shape == meta.shape and grad.dtype == meta.dtype, name
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = mode.from_tensor(real.detach()).requires_grad_()
            faked = cast("torch.Tensor", call(fake, *(mode.from_tensor(a) for a in extra(5))))
            assert faked.shape == expected.shape and faked.dtype == expected.dtype, name
            (fake_grad,) = torch.autograd.grad(faked.sum(), fake)
            assert fake_grad.shape == fake.shape, name


def test_view_ops_are_plain_torch_code_and_kernel_ops_run_our_pullback() -> None:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert type(srt.concatenate((x, x)).grad_fn).__name__ == "CatBackward0"
    assert type(srt.flip(x, Val(0)).grad_fn).__name__ == "FlipBackward0"
    y = srt.repeat(x.detach().repeat(10, 10).requires_grad_(), Val(2), axis=Val(0))  # above the small-size bound
    assert "_PlainForward" in type(y.grad_fn).__name__
    for name, facts in _native.FACTS.items():
        assert facts.pullback in ("torch", "kernel") and name in _native.FORWARDS


def test_our_kernels_follow_torchs_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from stablerules import _parallel

    seen: list[int] = []
    original = _adapter._run_pullback

    elsewhere: list[int] = []

    def spy(*args: object) -> object:
        seen.append(_parallel.thread_count())
        # another thread, meanwhile, keeps its own count (the engine's budget is per thread)
        other = threading.Thread(target=lambda: elsewhere.append(_parallel.ENGINE_THREADS.count))
        other.start()
        other.join()
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_adapter, "_run_pullback", spy)
    monkeypatch.delenv("STABLERULES_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    x = torch.randn(30, 40, dtype=torch.float64, requires_grad=True)  # above repeat's small-size bound
    try:
        torch.set_num_threads(1)
        torch.autograd.grad(srt.repeat(x, Val(2), axis=Val(0)).sum(), x)
        monkeypatch.setenv("STABLERULES_NUM_THREADS", "3")
        torch.autograd.grad(srt.repeat(x, Val(2), axis=Val(0)).sum(), x)
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 3] and _parallel.ENGINE_THREADS.count == 0
    assert elsewhere == [0, 0]


def test_our_large_gradients_are_torchs_memory() -> None:
    """A gradient of 1 MiB or more that our kernel writes (take's scatter-add, repeat's sum)
    is allocated by torch's CPU allocator, as torch's own gradients are: torch's memory
    profiler counts it, it is aligned as torch aligns, and it holds the right values (against
    ``index_add_`` and a reshape-sum); NumPy's memory (until round 20) was invisible to the
    profiler and asked for transparent huge pages (a first touch could wait 100-350 ms for the
    kernel to compact memory). The hook is set for the pullback only."""
    from torch.profiler import ProfilerActivity, profile

    from stablerules import _pool

    generator = torch.Generator().manual_seed(3)
    table = torch.randn(3000, 128, generator=generator, requires_grad=True)  # 1.5 MB of float32
    ids = torch.randint(0, 3000, (64,), generator=generator)
    dy = torch.randn(64, 128, generator=generator)
    x = torch.randn(4, 16, 64, 64, generator=generator, requires_grad=True)  # its gradient: 1 MiB
    dz = torch.randn(4, 16, 128, 128, generator=generator)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiled:
        torch.autograd.backward(srt.take(table, ids, axis=Val(0)), dy)
        torch.autograd.backward(srt.repeat(x, inner=Val((1, 1, 2, 2))), dz)
    allocated = [event.cpu_memory_usage for event in profiled.events()]
    for grad in (table.grad, x.grad):
        assert grad is not None and grad.data_ptr() % 64 == 0
        assert grad.numel() * grad.element_size() in allocated
    assert table.grad is not None and x.grad is not None
    torch.testing.assert_close(table.grad, torch.zeros(3000, 128).index_add_(0, ids, dy), rtol=0, atol=1e-5)
    torch.testing.assert_close(x.grad, dz.reshape(4, 16, 64, 2, 64, 2).sum((3, 5)), rtol=0, atol=1e-5)
    assert _pool.ENGINE_MEMORY.make is None


# --------------------------------------------------------------------------------------------
# which implementation a signature runs (SPEC section 14): sr.explain and the counters


def test_explain_names_the_implementation_each_signature_runs_and_the_graph_agrees() -> None:
    """``sr.explain(srt.<op>, ...)`` names torch's forward op, whose pullback runs (torch's
    autograd or our kernel, with kron's per-signature size choice) and why; what it says is
    what a call does: the autograd node of the result is torch's own or our Function's."""
    generator = torch.Generator().manual_seed(11)

    def leaf(*shape: int) -> torch.Tensor:
        return torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)

    parts = [leaf(2, 3), leaf(2, 4)]
    text = sr.explain(srt.concatenate, parts, axis=Val(1))
    assert "forward: torch.cat (torch's own op)" in text and "pullback: torch's autograd" in text
    assert _native.FACTS["concatenate"].why in text and "def kernel" not in text
    assert "Cat" in _node(srt.concatenate(parts, axis=Val(1)))

    small_a, small_b = leaf(4, 4), leaf(3, 3)
    text = sr.explain(srt.kron, small_a, small_b)
    assert "forward: torch.kron" in text
    assert "pullback: torch's autograd\n" in text  # under torch.compile too (static shapes, small)
    assert f"144 elements, below kron's bound of {KRON_TORCH_BELOW}" in text
    assert f"under torch.compile, torch's autograd below {_facts.COMPILED_BELOW}" in text
    node = _node(srt.kron(small_a, small_b))
    assert "Forward" not in node, node  # torch's own nodes (kron is a composite op in torch)

    big_a, big_b = leaf(30, 40), leaf(50, 30)
    text = sr.explain(srt.kron, big_a, big_b)
    assert "pullback: our compiled kernel\n" in text and "torch.ops.stablerules.kron_vjp" in text
    assert _native.FACTS["kron"].why in text and "1800000" in text
    assert "# --- kron pullback ---" in text and "def kernel(" in text  # the kernel it runs
    node = _node(srt.kron(big_a, big_b))
    assert "Forward" in node, node  # our autograd Function

    x = leaf(40, 50)  # above repeat's small-size bound (stablerules.rules.repeat.REPEAT_TORCH_BELOW)
    text = sr.explain(srt.repeat, x, Val(2), axis=Val(0))
    assert "forward: Tensor.repeat_interleave" in text
    assert "pullback: our compiled kernel in eager mode; under torch.compile torch's autograd" in text
    assert "# --- repeat pullback ---" in text

    # the counters: each op's signatures by implementation
    srt.kron(leaf(2, 2), leaf(2, 2))
    counts = _signature_counts(srt.kron)
    assert counts.get("forward torch.kron; pullback torch's autograd", 0) >= 2  # (4,4)x(3,3), (2,2)x(2,2)
    assert counts.get("forward torch.kron; pullback our compiled kernel", 0) >= 1
    assert set(_signature_counts(srt.concatenate)) == {"forward torch.cat; pullback torch's autograd"}

    # the core's explain of a core op is unchanged; a bad call's error is the call's own
    assert sr.explain(sr.concatenate, [np.ones(2), np.ones(3)]) == ""
    with pytest.raises(ValueError) as called:
        srt.concatenate([leaf(2, 3), leaf(3, 3)], axis=Val(1))
    with pytest.raises(ValueError) as explained:
        sr.explain(srt.concatenate, [leaf(2, 3), leaf(3, 3)], axis=Val(1))
    assert str(explained.value) == str(called.value)


def _node(tensor: torch.Tensor) -> str:
    """The name of the autograd node that made ``tensor``."""
    assert tensor.grad_fn is not None
    return str(tensor.grad_fn.name())


def _signature_counts(op: object) -> dict[str, int]:
    assert isinstance(op, _adapter.TorchOp)
    return op.implementations()


@pytest.mark.parametrize(
    ("name", "small", "large"),
    [
        ("repeat", lambda x: srt.repeat(x, Val(2), axis=Val(1)), (4, 5, 6)),
        ("repeat", lambda x: srt.repeat(x, inner=Val((1, 2, 1))), (4, 5, 6)),
        ("tile", lambda x: srt.tile(x, Val((2, 1, 2))), (4, 5, 6)),
    ],
    ids=["repeat-axis", "repeat-inner", "tile"],
)
def test_a_small_repeat_or_tile_runs_torchs_pullback_and_a_large_one_ours(
    name: str, small: Callable[[torch.Tensor], torch.Tensor], large: tuple[int, ...]
) -> None:
    """Issue 35: below the op's size bound a signature of its small form runs torch's
    own pullback in eager mode (the Implementation record, the autograd node and the gradient
    agree), above it our kernel; under ``torch.compile``, static or dynamic shapes, both are
    below the compiled bound (``_facts.COMPILED_BELOW``): torch's autograd, which inductor
    fuses, and no ``<name>_vjp`` custom op in the graphs."""
    generator = torch.Generator().manual_seed(35)
    bound = [form.below for form in _native.FACTS[name].torch_forms if form.below is not None][-1]
    x = torch.randn(large, dtype=torch.float64, generator=generator, requires_grad=True)
    big = torch.randn(tuple(4 * n for n in large), dtype=torch.float64, generator=generator, requires_grad=True)
    assert small(x).numel() < bound <= small(big).numel()
    op = getattr(srt, name)
    _adapter._clear_tables()
    for tensor, pullback, node in ((x, "torch", "Backward0"), (big, "kernel", "Forward")):
        before = list(_signature_table(op).values())
        y = small(tensor)
        (signature,) = [s for s in _signature_table(op).values() if s not in before]
        assert signature.implementation.pullback == pullback
        assert signature.implementation.compiled_pullback == "torch"  # below _facts.COMPILED_BELOW
        assert node in _node(y) and ("Forward" in _node(y)) == (pullback == "kernel"), _node(y)
        if pullback == "torch":
            assert f"below {name}'s bound of {bound}" in signature.implementation.why
        else:
            assert signature.implementation.why.startswith(_native.FACTS[name].why)
        dy = torch.randn(y.shape, dtype=torch.float64, generator=generator)
        (got,) = torch.autograd.grad(y, tensor, dy)
        # an independent reference: the adjoint of the forward's linear map, by torch's own autograd
        # of NumPy's result computed as a gather (indices of the flattened input)
        index = torch.arange(tensor.numel(), dtype=torch.float64).reshape(tensor.shape)
        gathered = small(index.detach()).long().reshape(-1)
        expected = torch.zeros(tensor.numel(), dtype=torch.float64).index_add_(0, gathered, dy.reshape(-1))
        assert torch.allclose(got, expected.reshape(tensor.shape))
    assert _signature_counts(op) == {
        f"forward {_native.FACTS[name].forward}; pullback torch's autograd": 1,
        f"forward {_native.FACTS[name].forward}; pullback our compiled kernel": 1,
    }

    # under torch.compile, below the compiled bound: torch's autograd (no custom op in the graphs)
    for dynamic in (False, True):
        for tensor in (x, big):
            graphs = _aot_graphs(lambda t: small(t).sin().sum(), tensor, dynamic)
            assert not any(f"stablerules.{name}_vjp" in code for code in graphs), graphs


_UPSAMPLES = [
    # (shape, inner): Julia's inner counts on the trailing axes of an (N, C, ...) input
    ((2, 3, 8), (1, 1, 2)),
    ((2, 3, 5, 7), (1, 1, 2, 4)),
    ((2, 3, 5, 7), (1, 1, 2)),  # counts shorter than the rank: the rest are 1
    ((1, 2, 3, 4, 5), (1, 1, 8, 1, 2)),
]
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def _repeated_bits(x: torch.Tensor, inner: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """NumPy's ``repeat`` per axis of ``x``'s bits (an independent reference of the values)."""
    expected = x.detach().view(_BITS[x.dtype]).numpy()
    for axis, count in enumerate(inner):
        expected = np.repeat(expected, count, axis)
    return expected


@pytest.mark.parametrize("dtype", list(_BITS), ids=lambda dtype: str(dtype).removeprefix("torch."))
@pytest.mark.parametrize(("shape", "inner"), _UPSAMPLES, ids=[f"{len(s)}d-{'x'.join(map(str, i))}" for s, i in _UPSAMPLES])
def test_a_small_nearest_upsample_runs_torchs_interpolate(shape: tuple[int, ...], inner: tuple[int, ...], dtype: torch.dtype) -> None:
    """Issue 35: a nearest-neighbour upsample (repeat's form in ``_facts``) below
    ``UPSAMPLE_TORCH_BELOW`` runs ``F.interpolate``, forward and backward, in eager mode: the
    Implementation says so, the autograd node is torch's, the values are NumPy's repeat of the
    bits, and the gradient is the adjoint of that gather (torch's ``index_add``)."""
    from stablerules.rules.repeat import UPSAMPLE_TORCH_BELOW

    generator = torch.Generator().manual_seed(35)
    x = torch.randn(shape, generator=generator).to(dtype).requires_grad_()
    _adapter._clear_tables()
    y = srt.repeat(x, inner=Val(inner))
    (signature,) = _signature_table(srt.repeat).values()
    assert y.numel() < UPSAMPLE_TORCH_BELOW
    assert signature.implementation.pullback == "torch"
    assert signature.implementation.forward.startswith("F.interpolate"), signature.implementation
    assert f"below repeat's bound of {UPSAMPLE_TORCH_BELOW}" in signature.implementation.why
    assert "UpsampleNearest" in _node(y), _node(y)
    assert y.dtype == dtype and np.array_equal(y.detach().view(_BITS[dtype]).numpy(), _repeated_bits(x, inner))
    dy = torch.randn(y.shape, generator=generator, dtype=torch.float64)
    (got,) = torch.autograd.grad(y, x, dy.to(dtype))
    index = torch.arange(x.numel(), dtype=torch.float64).reshape(shape)
    gathered = torch.from_numpy(_repeated_bits(index, inner)).view(torch.float64).long().reshape(-1)
    expected = torch.zeros(x.numel(), dtype=torch.float64).index_add_(0, gathered, dy.to(dtype).double().reshape(-1))
    # each entry sums at most 8 * 2 terms: within a few units of the format's last place
    tolerance = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2.0**-5, torch.float16: 2.0**-8}[dtype]
    assert torch.allclose(got.double(), expected.reshape(shape), rtol=tolerance, atol=tolerance * float(expected.abs().max()))


def test_a_nearest_upsample_outside_interpolates_reach_repeats_per_axis() -> None:
    """What ``F.interpolate`` cannot do exactly or at all keeps the per-axis repeat: a
    signature at or above the bound (our kernel's pullback, our autograd Function), integer
    and complex inputs of the form (torch's ``repeat_interleave``), a count of 3 (not the
    form: our kernel)."""
    from stablerules.rules.repeat import UPSAMPLE_TORCH_BELOW

    generator = torch.Generator().manual_seed(36)
    _adapter._clear_tables()
    big = torch.randn(4, 32, 16, 16, generator=generator, requires_grad=True)
    y = srt.repeat(big, inner=Val((1, 1, 2, 2)))
    assert y.numel() == UPSAMPLE_TORCH_BELOW and "Forward" in _node(y), _node(y)
    assert np.array_equal(y.detach().numpy(), _repeated_bits(big, (1, 1, 2, 2)).view(np.float32))
    whole = torch.randint(-9, 9, (2, 3, 4, 4), generator=generator)
    assert np.array_equal(srt.repeat(whole, inner=Val((1, 1, 2, 2))).numpy(), np.repeat(np.repeat(whole.numpy(), 2, 2), 2, 3))
    pair = torch.randn(2, 3, 4, 4, dtype=torch.complex64, generator=generator, requires_grad=True)
    z = srt.repeat(pair, inner=Val((1, 1, 2, 2)))
    assert "Upsample" not in _node(z)
    assert np.array_equal(z.detach().numpy(), np.repeat(np.repeat(pair.detach().numpy(), 2, 2), 2, 3))
    thrice = torch.randn(2, 3, 4, 4, generator=generator, requires_grad=True)
    w = srt.repeat(thrice, inner=Val((1, 1, 3, 3)))
    assert "Forward" in _node(w), _node(w)


_DOUBLING_CASES = [
    # (shape, axis, dtype, layout): the runs along the axis of at most _native.DOUBLED_RUN elements
    ((4, 32, 16, 16), 3, torch.float32, "contiguous"),
    ((4, 32, 16, 16), 2, torch.bfloat16, "contiguous"),
    ((4, 32, 16, 16), -1, torch.float16, "channels_last"),
    ((4, 32, 16, 16), -2, torch.float64, "transposed"),
    ((8192,), 0, torch.int64, "contiguous"),
    ((128, 64), 1, torch.complex64, "conjugated"),
    ((512, 16), 0, torch.float32, "contiguous"),
]


def _laid_out(x: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "channels_last":
        return x.to(memory_format=torch.channels_last)
    if layout == "transposed":  # the same shape, read through a transpose of a (..., w, h) tensor
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "conjugated":
        return x.conj()  # the conjugate bit set: a copy must resolve it
    return x


@pytest.mark.parametrize(("shape", "axis", "dtype", "layout"), _DOUBLING_CASES, ids=[f"{c[2]}-{c[3]}-axis{c[1]}" for c in _DOUBLING_CASES])
def test_a_doubling_repeat_of_short_runs_is_two_copies_with_repeat_interleaves_result(
    shape: tuple[int, ...], axis: int, dtype: torch.dtype, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel signature's eager forward of ``repeat(x, 2, axis)`` over runs of at most 16
    elements and 8192 elements or more is ``_native._doubled`` (two strided copies: 1.5-3x
    faster than ``repeat_interleave``'s broadcast copy on the U-Net's upsamples): bit for bit
    ``repeat_interleave``'s result (every dtype, layout, the conjugate bit resolved), contiguous
    as it is, never aliasing ``x``; its gradient is our kernel's, checked against the adjoint
    of the forward's gather."""
    calls: list[tuple[int, ...]] = []
    doubled = _native._doubled

    def counted(x: torch.Tensor, axis: int) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return doubled(x, axis)

    monkeypatch.setattr(_native, "_doubled", counted)
    _adapter._clear_tables()
    generator = torch.Generator().manual_seed(36)
    base = torch.randn(shape, dtype=torch.float64, generator=generator)
    if dtype.is_complex:
        base = torch.complex(base, torch.randn(shape, dtype=torch.float64, generator=generator))
    x = _laid_out((100 * base).to(dtype), layout)
    expected = torch.repeat_interleave(x, 2, dim=axis)
    with torch.no_grad():
        got = srt.repeat(x, Val(2), axis=Val(axis))
    assert calls == [tuple(shape)]
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.is_contiguous()
    assert torch.equal(got.resolve_conj(), expected.resolve_conj()) and got.data_ptr() != x.data_ptr()
    if dtype.is_floating_point or dtype.is_complex:
        leaf = x.detach().clone().requires_grad_()
        y = srt.repeat(leaf, Val(2), axis=Val(axis))
        assert "Forward" in _node(y) and len(calls) == 2
        dy = torch.randn(y.shape, dtype=torch.float64, generator=generator).to(dtype)
        (grad,) = torch.autograd.grad(y, leaf, dy)
        index = torch.arange(leaf.numel(), dtype=torch.float64).reshape(leaf.shape)
        gathered = torch.repeat_interleave(index, 2, dim=axis).long().reshape(-1)
        reference = torch.zeros(leaf.numel(), dtype=torch.float64 if not dtype.is_complex else torch.complex128)
        reference.index_add_(0, gathered, dy.reshape(-1).to(reference.dtype))
        torch.testing.assert_close(grad, reference.reshape(leaf.shape).to(dtype))


@pytest.mark.parametrize(
    ("shape", "repeats", "axis", "why"),
    [
        ((8, 1024), 2, 0, "runs of 1024 elements: repeat_interleave copies whole rows"),
        ((64, 64), 2, 1, "4096 elements: below DOUBLED_FROM"),
        ((128, 64), 3, 1, "a count of 3"),
        ((4, 4), 2, 1, "a small signature: torch's pullback, its forward recorded by autograd"),
    ],
)
def test_a_repeat_outside_the_doubling_form_is_repeat_interleave(
    shape: tuple[int, ...], repeats: int, axis: int, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The doubling form is a static choice of the signature (count, shape, device, and a
    pullback of ours: the forward runs unrecorded); every other signature's forward is
    ``repeat_interleave`` (and a small one's is recorded by torch's autograd)."""
    monkeypatch.setattr(_native, "_doubled", lambda x, axis: pytest.fail(f"_doubled called: {why}"))
    _adapter._clear_tables()
    x = torch.randn(shape, dtype=torch.float32, requires_grad=True)
    y = srt.repeat(x, Val(repeats), axis=Val(axis))
    assert torch.equal(y, torch.repeat_interleave(x, repeats, dim=axis))
    small = y.numel() < 1024
    assert ("Forward" in _node(y)) != small, (_node(y), why)


def _aot_graphs(function: Callable[[torch.Tensor], torch.Tensor], tensor: torch.Tensor, dynamic: bool) -> list[str]:
    """The code of the forward and backward graphs ``torch.compile`` (AOT autograd, no inductor)
    makes of ``function``, after checking its gradient against the eager one."""
    from torch._functorch._aot_autograd.utils import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs: list[str] = []

    def capture(gm: torch.fx.GraphModule, example_inputs: object) -> object:
        graphs.append(gm.code)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=capture, bw_compiler=capture)
    compiled = torch.compile(function, backend=backend, fullgraph=True, dynamic=dynamic)
    (got,) = torch.autograd.grad(compiled(tensor), tensor)
    (expected,) = torch.autograd.grad(function(tensor), tensor)
    assert torch.allclose(got, expected)
    return graphs


@pytest.mark.parametrize("name", ["repeat", "kron", "broadcast_to"])
def test_under_compile_a_result_past_the_compiled_bound_runs_our_kernel(name: str) -> None:
    """Issue 35: under ``torch.compile``, static or dynamic shapes, a signature whose result has
    ``_facts.COMPILED_BELOW`` elements or more keeps our ``<name>_vjp`` custom op in the
    backward graph (W3's size, where ours beats inductor's fused backward), and one just below
    takes torch's autograd."""
    generator = torch.Generator().manual_seed(36)
    bound = _native.FACTS[name].compiled_below
    assert bound is not None
    other = torch.randn(2, 2, dtype=torch.float64, generator=generator)

    def call_for(shape: tuple[int, ...]) -> Callable[[torch.Tensor], torch.Tensor]:
        if name == "repeat":
            return lambda t: srt.repeat(t, Val(2), axis=Val(0)).sin().sum()
        if name == "kron":
            return lambda t: srt.kron(t, other).sin().sum()
        target = Val((4, *shape))  # broadcast_to's Val names its result's shape
        return lambda t: srt.broadcast_to(t, target).sin().sum()

    per_element = {"repeat": 2, "kron": 4, "broadcast_to": 4}[name]
    # results of the bound and of the bound less one input row's worth
    shapes = ((bound // per_element, 1), (bound // per_element - 1, 1))
    # broadcast_to's Val names its result's shape, so its two shapes need two Vals: under
    # dynamic=True dynamo makes the Val's changed ints symbolic, and the adapter pins them
    for dynamic in (False, True):
        for shape, ours in zip(shapes, (True, False)):
            tensor = torch.randn(shape, dtype=torch.float64, generator=generator, requires_grad=True)
            graphs = _aot_graphs(call_for(shape), tensor, dynamic)
            assert any(f"stablerules.{name}_vjp" in code for code in graphs) == ours, (dynamic, shape, graphs)
    assert not _native.compiled_by_torch(name, bound) and _native.compiled_by_torch(name, bound - 1)
    assert not _native.compiled_by_torch(name, None)  # a size unknown: our kernel


@pytest.mark.parametrize("name", ["repeat", "tile"])
def test_a_val_passed_into_a_dynamic_compiled_function_is_a_constant_of_each_graph(name: str) -> None:
    """A ``Val`` given as an argument of ``torch.compile(dynamic=True, fullgraph=True)``:
    dynamo makes its ints symbolic, which crashed the backward's trace (``tp_repr_impl``, as
    the vjp custom op's statics are text). The adapter pins each one (a guard on its value):
    every value is one graph, as it is one kernel in eager mode, and the results and gradients
    are torch's own (a result past ``compiled_below``, so our kernel runs the pullback)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    if name == "repeat":
        ours = torch.compile(lambda t, v: srt.repeat(t, v, axis=Val(0)), backend=counter, dynamic=True, fullgraph=True)
        stock: Callable[[torch.Tensor, int], torch.Tensor] = lambda t, n: t.repeat_interleave(n, dim=0)
        values: list[object] = [2, 3, 2]
    else:
        ours = torch.compile(lambda t, v: srt.tile(t, v), backend=counter, dynamic=True, fullgraph=True)
        stock = lambda t, n: t.tile(n)  # noqa: E731
        values = [(2, 1), (3, 2), (2, 1)]
    generator = torch.Generator().manual_seed(40)
    tensor = torch.randn(300_000, 2, dtype=torch.float64, generator=generator, requires_grad=True)
    assert not _native.compiled_by_torch(name, 2 * tensor.numel())  # past the bound: our kernel's vjp
    for value in values:
        got = ours(tensor, Val(value))
        dy = torch.randn(got.shape, dtype=torch.float64, generator=generator)
        (grad,) = torch.autograd.grad(got, tensor, dy)
        expected = stock(tensor, value)  # type: ignore[arg-type]
        (expected_grad,) = torch.autograd.grad(expected, tensor, dy)
        assert torch.equal(got, expected) and torch.allclose(grad, expected_grad, rtol=1e-12, atol=1e-12)
    assert counter.frame_count == 2  # one graph per value, the repeated value reused its graph


@pytest.mark.parametrize(
    ("name", "form", "other"),
    [
        ("tile", lambda x: srt.tile(x, Val((3,))), lambda x: srt.tile(x.reshape(-1, 8), Val((3, 1)))),
        ("broadcast_to", lambda x: srt.broadcast_to(x, Val((3, 2, x.numel()))), lambda x: srt.broadcast_to(x.reshape(-1, 1), Val((x.numel(), 3)))),
    ],
    ids=["tile-one-axis", "broadcast_to-leading"],
)
def test_forms_torch_does_faster_at_every_size_take_torchs_pullback(
    name: str, form: Callable[[torch.Tensor], torch.Tensor], other: Callable[[torch.Tensor], torch.Tensor]
) -> None:
    """Issue 35: a 1-axis tile and a broadcast by new leading axes are one sum over a view in
    torch, faster than our kernel at every size measured: such a signature runs torch's own
    pullback however large (eager mode), while the op's other forms of the same size run ours."""
    generator = torch.Generator().manual_seed(36)
    x = torch.randn(40000, dtype=torch.float64, generator=generator, requires_grad=True)
    _adapter._clear_tables()
    for call, pullback in ((form, "torch"), (other, "kernel")):
        op = getattr(srt, name)
        before = list(_signature_table(op).values())
        y = call(x)
        assert y.numel() >= 100000  # above every size bound
        (signature,) = [s for s in _signature_table(op).values() if s not in before]
        assert signature.implementation.pullback == pullback, signature.implementation.why
        assert ("Forward" in _node(y)) == (pullback == "kernel"), _node(y)
        if pullback == "torch":
            assert "at every size measured" in signature.implementation.why
        dy = torch.randn(y.shape, dtype=torch.float64, generator=generator)
        (got,) = torch.autograd.grad(y, x, dy)
        # independent reference: the adjoint of the forward as a gather of x's flat indices
        index = torch.arange(x.numel(), dtype=torch.float64)
        gathered = call(index).long().reshape(-1)
        expected = torch.zeros(x.numel(), dtype=torch.float64).index_add_(0, gathered, dy.reshape(-1))
        assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize(("repeats", "axis"), [([0, 1], 0), ([2, 1, 3], Val(1)), ([2], None), ((1, 2, 0, 1, 1, 1), None)], ids=str)
def test_repeat_with_per_element_counts_as_a_list(repeats: list[int] | tuple[int, ...], axis: object, dtype: torch.dtype) -> None:
    """``_srt.repeat(t, [counts], axis)``, as ``np.repeat`` takes a list (found by
    ``tools/behaviour.py``: torch's ``repeat_interleave`` wants a tensor of counts): the result
    is NumPy's, the gradient the sum over each element's copies, and torch's gradcheck
    (finite differences) agrees."""
    x = (torch.arange(6, dtype=torch.float64) - 2.5).to(dtype).reshape(2, 3).requires_grad_()
    y = _srt.repeat(x, repeats, axis)
    expected = np.repeat(x.detach().numpy(), repeats, axis=cast("int | None", getattr(axis, "value", axis)))
    np.testing.assert_array_equal(y.detach().numpy(), expected)
    assert torch.autograd.gradcheck(lambda t: _srt.repeat(t, repeats, axis), (x,))


@pytest.mark.parametrize(
    ("name", "ours", "numpy"),
    [
        ("roll-shifts-flattened", lambda x: _srt.roll(x, Val((1, 0, 2)), None), lambda a: np.roll(a, (1, 0, 2))),
        ("roll-shifts-one-axis", lambda x: _srt.roll(x, Val((2, 3)), Val(1)), lambda a: np.roll(a, (2, 3), 1)),
        ("pad-0d-one-width", lambda x: _srt.pad(x[0, 0], Val((6,))), lambda a: np.pad(a[0, 0], 6)),
        ("pad-one-width-tuple", lambda x: _srt.pad(x, Val((1,))), lambda a: np.pad(a, 1)),
        (
            "index_add-broadcast-values",
            lambda x: _srt.index_add(x, torch.tensor([2, 2, 0]), x[0], Val(1)),
            lambda a: _numpy_index_add(a, np.array([2, 2, 0]), np.broadcast_to(a[0], (2, 3)), 1),
        ),
        (
            "index_add-empty-x",
            lambda x: _srt.index_add(x[:0], torch.tensor([2, 2, 2]), x[0], Val(1)),
            lambda a: a[:0].copy(),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_forwards_follow_numpy_where_torch_differs(
    name: str, ours: Callable[[torch.Tensor], torch.Tensor], numpy: Callable[[np.ndarray], np.ndarray]
) -> None:
    """Calls NumPy takes and torch's own op does not, as its forward gives them (found by
    ``tools/behaviour.py``; each was a torch ``RuntimeError`` or an ``AssertionError``):
    NumPy's result, and torch's gradcheck (finite differences) of our gradient."""
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3).requires_grad_()
    np.testing.assert_array_equal(ours(x).detach().numpy(), numpy(x.detach().numpy()))
    assert torch.autograd.gradcheck(ours, (x,))


def _numpy_index_add(x: np.ndarray, indices: np.ndarray, values: np.ndarray, axis: int) -> np.ndarray:
    out = np.moveaxis(x.copy(), axis, 0)
    np.add.at(out, indices, np.moveaxis(values, axis, 0))
    return np.moveaxis(out, 0, axis)


def test_a_missing_argument_is_named_as_numpy_names_it() -> None:
    """A call that leaves out a required argument: Python's own wording for the op's call, as
    the NumPy op gives it (``kron(t)`` was a ``KeyError: 'b'``)."""
    x = torch.ones(2, 3)
    calls: list[tuple[Callable[[], object], Callable[[], object]]] = [
        (lambda: _srt.kron(x), lambda: _sr.kron(x.numpy())),
        (lambda: _srt.tile(x), lambda: _sr.tile(x.numpy())),
        (lambda: _srt.take_along_axis(x, torch.zeros(2, 3, dtype=torch.int64)), lambda: _sr.take_along_axis(x.numpy(), np.zeros((2, 3), np.int64))),
        (lambda: _srt.index_add(x), lambda: _sr.index_add(x.numpy())),
    ]
    for call, numpy_call in calls:
        with pytest.raises(TypeError) as ours:
            call()
        with pytest.raises(TypeError) as theirs:
            numpy_call()
        assert str(ours.value) == str(theirs.value)
        assert "missing" in str(ours.value)


def test_index_add_has_x_dtype_as_numpys() -> None:
    """``index_add`` adds into a copy of ``x`` (``np.add.at``): the result has ``x``'s dtype,
    as the NumPy op gives it, for values of a wider float (the forward once promoted both)."""
    x = np.ones((3, 2), np.float32)
    values: np.ndarray[Any, Any] = np.full((2, 2), 0.1, np.float64)  # a wider float than x's
    indices = np.array([0, 2])
    expected = sr.index_add(x, indices, values)
    got = srt.index_add(torch.from_numpy(x), torch.from_numpy(indices), torch.from_numpy(values))
    assert expected.dtype == np.float32 and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), expected)


def test_block_diagonal_cat_keeps_negative_zeros() -> None:
    """Julia's block-diagonal ``cat`` moves values (padding with zeros and concatenating), as
    the NumPy op does: a ``-0.0`` stays one (adding the blocks, as the forward once did, gave
    ``+0.0``)."""
    a = np.array([[-0.0, 1.0]])
    b = np.array([[2.0], [-0.0]])
    expected = sr.cat(a, b, dims=Val((0, 1)))
    got = srt.cat(torch.from_numpy(a), torch.from_numpy(b), dims=Val((0, 1))).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    assert np.signbit(got).sum() == 2
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("indices", [[], [[]]], ids=["[]", "[[]]"])
def test_take_and_index_add_of_an_empty_index_list(indices: Any) -> None:  # a list, nested
    """An empty list of indices is an empty take, as ``np.take`` reads it (it was refused as
    float indices: ``np.asarray([])`` is float64), eager and compiled, with its gradient."""
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    y = srt.take(x, indices, axis=Val(0))
    assert y.shape == np.take(x.detach().numpy(), indices, axis=0).shape
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(grad, torch.zeros_like(x))
    compiled = torch.compile(lambda t: srt.take(t, indices, axis=Val(0)), fullgraph=True)
    assert compiled(x).shape == y.shape
    added = srt.index_add(x, [], torch.ones(0, 5, dtype=torch.float64))
    assert torch.equal(added, x)


_IDX = torch.tensor([0, 2, 2])
_SECOND_ORDER: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor], tuple[int, int]]] = {
    # sizes where the pullback is our kernel (small repeats, tiles and krons are torch's own)
    "repeat": (lambda x: srt.repeat(x, Val(3), Val(1)), lambda x: torch.repeat_interleave(x, 3, 1), (256, 256)),
    "tile": (lambda x: srt.tile(x, Val((2, 2))), lambda x: x.repeat(2, 2), (256, 256)),
    "kron": (lambda x: srt.kron(x[:8, :8] * 2, x), lambda x: torch.kron(x[:8, :8] * 2, x), (64, 64)),
    "sum": (lambda x: srt.sum(x * x, Val(0)), lambda x: (x * x).sum(0), (512, 512)),
    "broadcast_to": (lambda x: srt.broadcast_to(x[:1] * x[1:2], Val((5, 3, 4))), lambda x: (x[:1] * x[1:2]).expand(5, 3, 4), (3, 4)),
    "take": (lambda x: srt.take(x, _IDX, Val(0)), lambda x: x.index_select(0, _IDX), (3, 4)),
    "take_along_axis": (
        lambda x: srt.take_along_axis(x, torch.tensor([[0], [3], [3]]), Val(1)),
        lambda x: torch.take_along_dim(x, torch.tensor([[0], [3], [3]]), 1),
        (3, 4),
    ),
    "index_add": (lambda x: srt.index_add(x, _IDX[:2], x[:2] ** 2), lambda x: x.index_add(0, _IDX[:2], x[:2] ** 2), (3, 4)),
}


@pytest.mark.parametrize("name", sorted(_SECOND_ORDER))
def test_forward_over_reverse_through_our_pullbacks(name: str) -> None:
    """``torch.func.hessian`` (``jacfwd(jacrev(f))``) and a Hessian-vector product
    (``jvp(grad(f))``) of a loss through an op whose pullback is our kernel, against the same
    loss on torch's own ops. Until round 24 each raised torch's "You must implement the jvp
    function" (our pullback's Function had none)."""
    ours, stock, shape = _SECOND_ORDER[name]
    x = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    v = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(8))

    def loss(op: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda t: torch.sin(op(t)).sum()

    def hvp(op: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return cast("torch.Tensor", torch.func.jvp(torch.func.grad(loss(op)), (x,), (v,))[1])

    torch.testing.assert_close(hvp(ours), hvp(stock), rtol=1e-10, atol=1e-10)
    if x.numel() <= 16:
        torch.testing.assert_close(torch.func.hessian(loss(ours))(x), torch.func.hessian(loss(stock))(x), rtol=1e-10, atol=1e-10)
