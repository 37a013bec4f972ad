"""Ahead-of-time warming: ``sr.record(path)`` writes the signatures a block uses,
``sr.precompile(path)`` compiles them in another process, and a third process's first step
then compiles nothing; a process whose CPU differs recompiles instead of loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stablerules as sr
from stablerules import ArraySpec, Val

REPO = Path(__file__).resolve().parents[1]

# One program's step: several ops, statics as Val and plain ints, a Python scalar, a static
# index, rrules and their pullbacks (so forward and pullback kernels are both used). The
# float32 and the odd shapes keep it clear of the signatures other tests compile.
STEP = textwrap.dedent(
    """
    import numpy as np
    import stablerules as sr
    from stablerules import Val

    def step():
        rng = np.random.default_rng(0)
        a = rng.standard_normal((3, 2)).astype(np.float32)
        b = rng.standard_normal((2, 5)).astype(np.float32)
        x = rng.standard_normal((3, 7, 5)).astype(np.float32)
        results = {}
        y, back = sr.rrule(sr.kron, a, b)
        da, db = back(np.ones_like(y))
        results["kron"] = bool(np.allclose(y, np.kron(a, b)) and np.allclose(da, np.ones((3, 2)) * b.sum()))
        y, back = sr.rrule(sr.sum, x, axis=Val((0, 2)))
        (dx,) = back(np.ones_like(y))
        results["sum"] = bool(np.allclose(y, x.sum(axis=(0, 2)), rtol=1e-5) and np.allclose(dx, 1.0))
        y, back = sr.rrule(sr.roll, x, 2, axis=1)  # a plain int shift: a dynamic static
        dx = back(np.ones_like(y))[0]
        results["roll"] = bool(np.array_equal(y, np.roll(x, 2, axis=1)) and np.allclose(dx, 1.0))
        y, back = sr.rrule(sr.repeat, x, Val(2), axis=Val(2))
        results["repeat"] = bool(np.array_equal(y, np.repeat(x, 2, axis=2)))
        back(np.ones_like(y))
        y, back = sr.rrule(sr.pad, x, Val((0, 0, 1, 2, 0, 1)), constant_values=1.5)
        results["pad"] = bool(np.array_equal(y, np.pad(x, ((0, 0), (1, 2), (0, 1)), constant_values=1.5)))
        back(np.ones_like(y))
        y, back = sr.rrule(sr.getindex, x, sr.ix[1:, ::2])
        results["getindex"] = bool(np.array_equal(y, x[1:, ::2]))
        back(np.ones_like(y))
        return results
    """
)


def _python(script: str, tmp_path: Path, cache: Path | None, **env: str) -> dict[str, Any]:
    """Run ``script`` (after ``STEP``) in a fresh process with the kernel cache ``cache``
    (``None``: memory only); it prints one JSON line last."""
    environment = os.environ.copy()
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")])
    if cache is None:
        environment["STABLERULES_DISK_CACHE"] = "0"
    else:
        environment["STABLERULES_CACHE_DIR"] = str(cache)
    environment.update(env)
    program = tmp_path / "program.py"
    program.write_text(STEP + textwrap.dedent(script))
    result = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=600
    )
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


RUN_STEP = """
import json
before = sr.cache_info()
results = step()
info = sr.cache_info()
print(json.dumps({"results": results, "compiles": info.compiles - before.compiles, "disk_hits": info.disk_hits}))
"""


def test_recorded_signatures_precompiled_in_another_process_leave_nothing_to_compile(tmp_path: Path) -> None:
    signatures = tmp_path / "signatures.json"
    cache = tmp_path / "cache"
    # 1. Record, in a process without a disk cache (nothing it compiles reaches `cache`).
    recorded = _python(
        f"""
        import json
        with sr.record({str(signatures)!r}) as recording:
            results = step()
        print(json.dumps({{"results": results, "count": len(recording.signatures), "unkeyed": recording.unkeyed}}))
        """,
        tmp_path,
        None,
    )
    assert all(recorded["results"].values()), recorded
    assert recorded["count"] == 6 and recorded["unkeyed"] == 0, recorded
    document = json.loads(signatures.read_text())
    assert document["format"] == "stablerules-signatures" and document["version"] == 1
    assert [entry["op"] for entry in document["signatures"]] == ["kron", "sum", "roll", "repeat", "pad", "getindex"]
    # 2. Precompile from the file, in a second process with an empty cache.
    warmed = _python(
        f"""
        import json
        kernels = sr.precompile({str(signatures)!r})
        print(json.dumps({{"kernels": len(kernels), "compiles": sr.cache_info().compiles}}))
        """,
        tmp_path,
        cache,
    )
    assert warmed["kernels"] >= 6 and warmed["compiles"] == warmed["kernels"], warmed
    # 3. The program's step in a third process: every kernel from disk, none compiled.
    third = _python(RUN_STEP, tmp_path, cache)
    assert all(third["results"].values()), third
    # (the step loads the kernels it uses: all but kron's pushforward, which precompile warms too)
    assert third["compiles"] == 0 and 0 < third["disk_hits"] <= warmed["kernels"], third
    # 4. The same cache on a machine whose CPU differs (Numba's CPU identity overridden as
    # Numba itself reads it): every kernel recompiles, none is loaded.
    other = _python(RUN_STEP, tmp_path, cache, NUMBA_CPU_NAME="generic")
    assert all(other["results"].values()), other
    assert other["compiles"] == third["disk_hits"] and other["disk_hits"] == 0, other
    # ... and the host's own entries are still there for the host.
    again = _python(RUN_STEP, tmp_path, cache)
    assert again["compiles"] == 0, again


def test_record_notes_each_signature_once_in_first_use_order(tmp_path: Path) -> None:
    path = tmp_path / "sig.json"
    x = np.ones((2, 3))
    with sr.record(path) as recording:
        sr.flip(x, axis=Val(0))
        sr.flip(x, axis=Val(0))  # the same signature again
        sr.flip(x, axis=1)  # a plain int keys as its Val does
        sr.flip(x, axis=Val(1))
        sr.kron(x, 2.0)  # a Python scalar: its type
        sr.concatenate([x, x], axis=Val(0))  # a list of arrays: the plan's arrays
        sr.precompile(sr.tile, ArraySpec((4,), np.float32), Val((2,)))
    document = json.loads(path.read_text())
    entries = document["signatures"]
    assert entries == recording.signatures
    assert [entry["op"] for entry in entries] == ["flip", "flip", "kron", "concatenate", "tile"]
    assert entries[0]["arrays"] == [{"shape": [2, 3], "dtype": "float64", "device": "cpu"}]
    assert entries[0]["statics"] == [{"val": 0}]
    assert entries[2]["arrays"][1] == {"scalar": "float"}
    assert len(entries[3]["arrays"]) == 2
    assert entries[4]["arrays"] == [{"shape": [4], "dtype": "float32", "device": "cpu"}]
    assert entries[4]["statics"][0] == {"val": [2]}
    # Replaying gives the same kernels as the calls' own precompile.
    expected = set(sr.precompile(sr.kron, x, 2.0)) | set(sr.precompile(sr.tile, ArraySpec((4,), np.float32), Val((2,))))
    assert expected <= set(sr.precompile(path))
    assert sr.precompile(str(path)) == sr.precompile(path)


def test_record_writes_the_file_when_the_block_raises_and_nests(tmp_path: Path) -> None:
    outer_path, inner_path = tmp_path / "outer.json", tmp_path / "inner.json"
    x = np.ones((5,))
    with sr.record(outer_path):
        with pytest.raises(RuntimeError, match="boom"):
            with sr.record(inner_path):
                sr.flip(x, axis=Val(0))
                raise RuntimeError("boom")
        sr.roll(x, Val(1))
    inner = json.loads(inner_path.read_text())["signatures"]
    outer = json.loads(outer_path.read_text())["signatures"]
    assert [entry["op"] for entry in inner] == ["flip"]
    assert [entry["op"] for entry in outer] == ["flip", "roll"]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]


def test_precompile_of_a_path_refuses_bad_files_and_arguments(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        with sr.record(tmp_path / "missing" / "sig.json"):
            pass
    path = tmp_path / "sig.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a signatures file"):
        sr.precompile(path)
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a signatures file"):
        sr.precompile(path)
    path.write_text(json.dumps({"format": "stablerules-signatures", "version": 99, "signatures": []}))
    with pytest.raises(ValueError, match="version 99"):
        sr.precompile(path)
    good = {"format": "stablerules-signatures", "version": 1}
    path.write_text(json.dumps({**good, "signatures": [{"op": "nonesuch", "arrays": [], "statics": []}]}))
    with pytest.raises(ValueError, match=r"signature 0.*no op 'nonesuch'"):
        sr.precompile(path)
    entry = {"op": "flip", "arrays": [{"shape": [2, 3], "dtype": "float64", "device": "cpu"}], "statics": [{"val": 5}]}
    path.write_text(json.dumps({**good, "signatures": [entry]}))
    with pytest.raises(ValueError, match=r"signature 0 \(flip\).*axis"):
        sr.precompile(path)
    with pytest.raises(TypeError, match="no further arguments"):
        sr.precompile(path, 1)
    path.write_text(json.dumps({**good, "signatures": []}))
    assert sr.precompile(path) == ()


VALID_FLIP = {"op": "flip", "arrays": [{"shape": [2, 3], "dtype": "float64", "device": "cpu"}], "statics": [{"val": 0}]}


@pytest.mark.parametrize(
    "change",
    [
        {"arrays": 5},
        {"statics": 5},
        {"statics": [None, None, {"val": [2.0, 1]}, None]},
        {"statics": [None, None, {"val": None}, None]},
        {"arrays": [{"scalar": ["int"]}]},
        {"arrays": [{"shape": [3, 4], "dtype": "float64", "device": 5}]},
        {"arrays": []},
        {"op": "index_add", "statics": [{"val": 0}], "arrays": [
            {"shape": [5, 3], "dtype": "float64"}, {"shape": [2], "dtype": "float64"}, {"shape": [2, 3], "dtype": "float64"}]},
    ],
)
def test_precompile_names_the_entry_of_a_file_no_program_could_have_written(tmp_path: Path, change: dict[str, object]) -> None:
    """On main: these entries raised TypeError, AttributeError or IndexError, naming neither
    the file nor the entry."""
    entry = {"op": "repeat", "arrays": [{"shape": [3, 4], "dtype": "float64", "device": "cpu"}],
             "statics": [None, None, {"val": [2, 1]}, None], **change}
    path = tmp_path / "sig.json"
    path.write_text(json.dumps({"format": "stablerules-signatures", "version": 1, "signatures": [VALID_FLIP, entry]}))
    with pytest.raises(ValueError, match=r"sig.json'?, signature 1"):
        sr.precompile(path)


def test_record_sees_the_torch_adapters_calls(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import stablerules.torch as srt

    path = tmp_path / "torch.json"
    # repeat's pullback is our kernel in torch (a small kron's is torch's own: no signature of
    # ours would run, so none would be recorded)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    # a signature the program used before the block opened is recorded too (the adapter's own
    # signature cache skips the core's lookup on a known signature; an open recording does not)
    torch.autograd.grad(srt.repeat(x, Val(2), axis=Val(0)).sum(), x)
    with sr.record(path) as recording:
        y = srt.repeat(x, Val(2), axis=Val(0))
        (gradient,) = torch.autograd.grad((y * y).sum(), x)
    assert recording.unkeyed == 0
    np.testing.assert_allclose(gradient.numpy(), 4 * x.detach().numpy())  # d sum(repeat(x, 2)**2) / dx
    assert recording.signatures == [
        {
            "op": "repeat",
            "arrays": [{"shape": [3, 4], "dtype": "float64", "device": "cpu"}],
            "statics": [{"val": 2}, {"val": 0}, None, None],
        }
    ]
    kernels = sr.precompile(path)
    assert {signature.kind for signature in kernels} >= {"forward", "pullback"}
    assert all(signature.op == "repeat" for signature in kernels)


def test_record_notes_the_torch_adapters_16_bit_calls_with_their_own_dtypes(tmp_path: Path) -> None:
    """A bfloat16 or float16 tensor's signature is validated and recorded with its own dtype,
    not a float32 stand-in: precompiling the file compiles the 16-bit pullback the program's
    backward runs (``pullback-half``), and nothing of a float32 call the program never made."""
    torch = pytest.importorskip("torch")
    import stablerules.torch as srt

    for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        path = tmp_path / f"{name}.json"
        x = torch.randn(40, 50, dtype=dtype, requires_grad=True)
        with sr.record(path) as recording:
            y = srt.repeat(x, Val(2), axis=Val(1))  # above repeat's small-size bound: our pullback
            (gradient,) = torch.autograd.grad(y.float().sum(), x)
        assert gradient.dtype == dtype and torch.equal(gradient, torch.full_like(x, 2))
        assert recording.signatures == [
            {
                "op": "repeat",
                "arrays": [{"shape": [40, 50], "dtype": name, "device": "cpu"}],
                "statics": [{"val": 2}, {"val": 1}, None, None],
            }
        ]
        kinds = {(signature.op, signature.kind) for signature in sr.precompile(path)}
        assert ("repeat", "pullback-half") in kinds, kinds
