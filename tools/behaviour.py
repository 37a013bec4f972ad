"""What a set of good and bad calls does, one line per call: to diff two trees' behaviour.

A refactor that moves code between modules (issue 34) must leave every external behaviour
as it was: results, gradients, and each error's type and message byte for byte. This script
makes a fixed, seeded set of calls of every op (a grid of good arguments and of bad ones:
wrong ranks, axes out of range, plain ints for statics, mismatched shapes, wrong dtypes,
indices out of range, strings for arrays) through the NumPy face (the op and its
``rrule`` + pullback), ``stablerules.torch`` and ``stablerules.jax`` (where installed), and
prints for each its outcome: the result's shapes, dtypes and a rounded checksum, or the
exception's type and message, and any warning's text.

It uses only the public API, so it runs on an older tree too::

    PYTHONPATH=/path/to/old/tree python tools/behaviour.py > old.txt
    python tools/behaviour.py > new.txt
    diff old.txt new.txt     # no output: the same behaviour

``--engines numpy`` limits the engines; ``--calls N`` the calls per op (default 60).
"""

from __future__ import annotations

import argparse
import random
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

import stablerules as sr
from stablerules import Val

# Each op's parameters (name, role) in call order; keyword-only ones as ``*name``.
PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "repeat": (("x", "array"), ("repeats", "data"), ("axis", "axis"), ("*inner", "counts"), ("*outer", "counts")),
    "tile": (("x", "array"), ("reps", "counts")),
    "concatenate": (("arrays", "arrays"), ("axis", "axis")),
    "stack": (("arrays", "arrays"), ("axis", "axis")),
    "hstack": (("arrays", "arrays"),),
    "vstack": (("arrays", "arrays"),),
    "kron": (("a", "array"), ("b", "array")),
    "flip": (("x", "array"), ("axis", "axes")),
    "roll": (("x", "array"), ("shift", "counts"), ("axis", "axes")),
    "permute_dims": (("x", "array"), ("axes", "counts")),
    "transpose": (("x", "array"), ("axes", "counts")),
    "swapaxes": (("x", "array"), ("axis1", "axis"), ("axis2", "axis")),
    "reshape": (("x", "array"), ("shape", "counts")),
    "broadcast_to": (("x", "array"), ("shape", "counts")),
    "sum": (("x", "array"), ("axis", "axes"), ("keepdims", "bool")),
    "mean": (("x", "array"), ("axis", "axes"), ("keepdims", "bool")),
    "pad": (("x", "array"), ("pad_width", "counts"), ("constant_values", "value")),
    "split": (("x", "array"), ("indices_or_sections", "counts"), ("axis", "axis")),
    "take": (("x", "array"), ("indices", "data"), ("axis", "axis")),
    "take_along_axis": (("x", "array"), ("indices", "data"), ("axis", "axis")),
    "index_add": (("x", "array"), ("indices", "data"), ("values", "array"), ("axis", "axis")),
}
CAT_DIMS = ("dims", "axes")

_RNG = np.random.default_rng(7)


def _array(shape: tuple[int, ...], dtype: str = "float64") -> np.ndarray:
    return np.asarray(_RNG.standard_normal(shape) * 3).astype(dtype)


def pools() -> dict[str, list[tuple[str, object]]]:
    """Each role's candidate arguments, with a stable description of each."""
    arrays = [
        (f"{dtype}{shape}", _array(shape, dtype))
        for shape, dtype in [((), "float64"), ((3,), "float64"), ((2, 3), "float64"), ((2, 3, 4), "float64"),
                             ((2, 3), "float32"), ((2, 3), "int64"), ((0, 3), "float64"), ((2, 3), "complex128")]
    ]
    return {
        "array": arrays + [("list[[1,2],[3,4]]", [[1.0, 2.0], [3.0, 4.0]]), ("'x'", "x"), ("None", None)],
        "arrays": [
            ("[f(2,3),f(2,3)]", [arrays[2][1], arrays[2][1]]),
            ("[f(2,3),f(3,)]", [arrays[2][1], arrays[1][1]]),
            ("[f(2,3),f32(2,3)]", [arrays[2][1], arrays[4][1]]),
            ("[f(3,),f(3,)]", [arrays[1][1], arrays[1][1]]),
            ("[]", []),
            ("'x'", "x"),
        ],
        "data": [
            ("i[0,1]", np.array([0, 1])), ("i[5]", np.array([5])), ("i[-1,0]", np.array([-1, 0])),
            ("f[0.5]", np.array([0.5])), ("list[0,1]", [0, 1]), ("i[[0,1],[1,0]]", np.array([[0, 1], [1, 0]])),
            ("i2", np.array([2, 2, 2])),
        ],
        "axis": [("Val(0)", Val(0)), ("Val(1)", Val(1)), ("Val(-1)", Val(-1)), ("Val(5)", Val(5)), ("0", 0),
                 ("None", None), ("1.5", 1.5), ("Val((0,1))", Val((0, 1)))],
        "axes": [("Val(0)", Val(0)), ("Val((0,1))", Val((0, 1))), ("Val((1,1))", Val((1, 1))), ("Val(7)", Val(7)),
                 ("None", None), ("1", 1), ("'a'", "a")],
        "counts": [("Val(2)", Val(2)), ("Val((2,1))", Val((2, 1))), ("Val((1,0,2))", Val((1, 0, 2))),
                   ("Val((3,2))", Val((3, 2))), ("Val(-1)", Val(-1)), ("2", 2), ("Val((6,))", Val((6,))),
                   ("Val((2,3))", Val((2, 3))), ("Val((1,2,3,4))", Val((1, 2, 3, 4)))],
        "bool": [("Val(True)", Val(True)), ("Val(False)", Val(False)), ("True", True)],
        "value": [("0.0", 0.0), ("1.5", 1.5), ("'a'", "a")],
    }


def _flat(value: object) -> list[object]:
    """Nested tuples and lists (a tuple of tangents for a sequence argument) as a flat list."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def _summary(value: object) -> str:
    out = []
    for part in _flat(value):
        got = np.asarray(part.detach() if hasattr(part, "detach") else part)
        total = complex(np.sum(got.astype(np.complex128))) if got.size else 0j
        out.append(f"{got.dtype}{tuple(got.shape)} sum={total.real:.6g}{total.imag:+.6g}j")
    return "; ".join(out)


def _tangent(g: object) -> object:
    if isinstance(g, (tuple, list)):
        return tuple(_tangent(item) for item in g)
    return np.zeros(()) if isinstance(g, sr.NoTangent) else np.asarray(sr.unthunk(g))


def _outcome(run: Callable[[], object]) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = run()
            text = "not run (no tensor argument)" if got is None else "ok " + _summary(got)
        except Exception as error:  # noqa: BLE001 - the outcome is what we print
            text = f"{type(error).__name__}: {error}"
    return text + "".join(f" [warn {w.category.__name__}: {w.message}]" for w in caught)


def _convert(value: object, to: Callable[[np.ndarray], object]) -> object:
    if isinstance(value, np.ndarray):
        return to(value)
    if isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
        return [to(v) for v in value]
    return value


def calls(count: int) -> list[tuple[str, str, tuple[object, ...], dict[str, object]]]:
    """``count`` seeded calls per op (and some of ``cat`` and ``getindex``)."""
    rng = random.Random(34)
    pool = pools()
    made: list[tuple[str, str, tuple[object, ...], dict[str, object]]] = []
    for name, params in PARAMS.items():
        for _ in range(count):
            args: list[object] = []
            kwargs: dict[str, object] = {}
            words: list[str] = []
            for index, (param, role) in enumerate(params):
                if index > 0 and rng.random() < (0.5 if param.startswith("*") else 0.2):
                    continue  # left out (its default, or a missing argument)
                text, value = rng.choice(pool[role])
                if param.startswith("*") or (args and len(args) < index):
                    kwargs[param.lstrip("*")] = value
                    words.append(f"{param.lstrip('*')}={text}")
                else:
                    args.append(value)
                    words.append(text)
            made.append((name, ", ".join(words), tuple(args), kwargs))
    for text, dims in [("Val(0)", Val(0)), ("Val((0,1))", Val((0, 1))), ("Val(3)", Val(3)), ("0", 0)]:
        for arrays_text, arrays in pool["arrays"][:4]:
            made.append(("cat", f"*{arrays_text}, dims={text}", tuple(cast("list[object]", arrays)), {"dims": dims}))
    x = _array((3, 4, 5))
    for text, key in [("ix[0]", sr.ix[0]), ("ix[1:3, ::2]", sr.ix[1:3, ::2]), ("ix[::-1, None]", sr.ix[::-1, None]),
                        ("ix[9]", sr.ix[9]), ("ix[..., 0, 0, 0, 0]", sr.ix[..., 0, 0, 0, 0])]:
        made.append(("getindex", f"f(3,4,5), {text}", (x, key), {}))
    return made


def engines(names: Sequence[str]) -> dict[str, tuple[object, Callable[[np.ndarray], object]]]:
    """Each engine's op namespace and its array conversion."""
    found: dict[str, tuple[object, Callable[[np.ndarray], object]]] = {}
    if "torch" in names:
        try:
            import torch

            import stablerules.torch as srt
        except ImportError:
            pass
        else:
            found["torch"] = (srt, lambda a: torch.from_numpy(np.array(a)))
    if "jax" in names:
        try:
            import jax

            jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]
            import jax.numpy as jnp

            import stablerules.jax as srj
        except ImportError:
            pass
        else:
            found["jax"] = (srj, lambda a: jnp.asarray(a))
    return found


def _torch_grads(op: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """The gradients of the outputs' sum (weighted by position) for every float tensor input."""
    import torch

    inputs: list[torch.Tensor] = []

    def leaf(a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.array(a))
        if t.is_floating_point() or t.is_complex():
            t.requires_grad_(True)
            inputs.append(t)
        return t

    converted = tuple(_convert(a, leaf) for a in args)
    out = op(*converted, **{k: _convert(v, leaf) for k, v in kwargs.items()})
    parts = out if isinstance(out, tuple) else (out,)
    total = sum(
        (p * torch.arange(1, p.numel() + 1, dtype=torch.float64).to(p.dtype).reshape(p.shape)).sum().real
        for p in parts
        if p.requires_grad
    )
    if not isinstance(total, torch.Tensor):
        return None
    return torch.autograd.grad(total, inputs, allow_unused=True, materialize_grads=True)


def _torch_vmap(op: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """The op under ``torch.vmap`` over a batch of 2 (each array and twice it) of every array."""
    import torch

    def batch(a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.array(a))
        return torch.stack([t, t * 2 if t.dtype != torch.bool else t])

    converted = tuple(_convert(a, batch) for a in args)
    converted_kwargs = {k: _convert(v, batch) for k, v in kwargs.items()}
    tensors = [k for k, v in enumerate(converted) if isinstance(v, (torch.Tensor, list))]
    if not tensors:
        return None
    in_dims = tuple(0 if isinstance(v, (torch.Tensor, list)) else None for v in converted)
    return torch.vmap(lambda *xs: op(*xs, **converted_kwargs), in_dims=in_dims)(*converted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=60, help="calls per op")
    parser.add_argument("--engines", nargs="*", default=["numpy", "torch", "jax"])
    args = parser.parse_args(argv)
    others = engines(args.engines)
    for name, words, call_args, kwargs in calls(args.calls):
        op = getattr(sr, name)
        line = f"{name}({words})"
        if "numpy" in args.engines:
            print(f"{line} numpy: {_outcome(lambda: op(*call_args, **kwargs))}")

            def grads() -> object:
                y, back = sr.rrule(op, *call_args, **kwargs)
                dy = tuple(np.ones_like(np.asarray(part)) for part in y) if isinstance(y, tuple) else np.ones_like(np.asarray(y))
                return tuple(_tangent(g) for g in back(dy))

            print(f"{line} rrule: {_outcome(grads)}")
        for engine, (module, to) in others.items():
            converted = tuple(_convert(a, to) for a in call_args)
            converted_kwargs = {k: _convert(v, to) for k, v in kwargs.items()}
            print(f"{line} {engine}: {_outcome(lambda: getattr(module, name)(*converted, **converted_kwargs))}")
            if engine == "torch":
                print(f"{line} torch-grad: {_outcome(lambda: _torch_grads(getattr(module, name), call_args, kwargs))}")
                print(f"{line} torch-vmap: {_outcome(lambda: _torch_vmap(getattr(module, name), call_args, kwargs))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
