"""``stablerules.torch`` inside torch's distributed modes: DDP, DTensor and FSDP2.

Each test starts two processes (gloo on 127.0.0.1, one thread each, a timeout on every
start) running this file as a script, and compares what they computed against one process's
run of the same model on the whole batch, or against NumPy's unsharded result, in float64
with tight tolerances. The workers write their results to files; the test reads them.

Run one scenario by hand: ``python tests/test_torch_distributed.py ddp OUTDIR`` with
``RANK``, ``WORLD_SIZE`` and ``MASTER_PORT`` set (the tests do this).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

import stablerules.torch as srt
from stablerules import Val

WORLD = 2
SPAWN_TIMEOUT_S = 300  # a first run compiles the model's kernels in each worker
STEPS = 3
BATCH, CHANNELS, SIDE = 4, 3, 4  # per-rank batch: BATCH // WORLD


# --------------------------------------------------------------------------------------------
# the model: our ops around torch's own layers, and the same model on torch's own ops


class Block(nn.Module):
    """conv, channel concatenation, nearest-neighbour upsampling by repeat, a reshape and a
    kron-factored linear layer (both factors parameters)."""

    def __init__(self, native: bool = False) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.native = native
        self.conv = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, dtype=torch.float64)
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(self.conv.weight.shape, generator=generator, dtype=torch.float64) * 0.2)
            assert self.conv.bias is not None
            self.conv.bias.copy_(torch.randn(CHANNELS, generator=generator, dtype=torch.float64) * 0.1)
        features = 2 * CHANNELS * (2 * SIDE) ** 2  # 384
        self.a = nn.Parameter(torch.randn(features // 16, 2, generator=generator, dtype=torch.float64) * 0.3)
        self.b = nn.Parameter(torch.randn(16, 3, generator=generator, dtype=torch.float64) * 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.conv(x))
        if self.native:
            h = torch.cat((h, x), dim=1)
            h = torch.repeat_interleave(torch.repeat_interleave(h, 2, dim=2), 2, dim=3)
            return h.reshape(h.shape[0], -1) @ torch.kron(self.a, self.b)
        h = srt.concatenate((h, x), axis=Val(1))
        h = srt.repeat(srt.repeat(h, Val(2), axis=Val(2)), Val(2), axis=Val(3))
        return srt.reshape(h, Val((-1, h.shape[1] * h.shape[2] * h.shape[3]))) @ srt.kron(self.a, self.b)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, CHANNELS, SIDE, SIDE, generator=generator, dtype=torch.float64)
    y = torch.randn(BATCH, 6, generator=generator, dtype=torch.float64)
    return x, y


def _train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int = STEPS) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()


def _reference() -> dict[str, torch.Tensor]:
    """One process, the whole batch (DDP and FSDP2 average the ranks' mean-loss gradients:
    equal halves, so the same gradients)."""
    model = Block()
    _train(model, *_data())
    return {name: p.detach() for name, p in model.named_parameters()}


# --------------------------------------------------------------------------------------------
# workers


def _shard(rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _data()
    size = BATCH // WORLD
    return x[rank * size : (rank + 1) * size], y[rank * size : (rank + 1) * size]


def _median_step(step: Callable[[], object], repeats: int = 30) -> float:
    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _worker_ddp(rank: int, out: Path) -> None:
    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    model = DistributedDataParallel(Block())
    x, y = _shard(rank)
    _train(model, x, y)
    torch.save({name.removeprefix("module."): p.detach() for name, p in model.named_parameters()}, out / f"ddp-{rank}.pt")
    # A step's time, ours against the same model on torch's ops, alternating (same run).
    timings: dict[str, list[float]] = {"srt": [], "torch": []}
    models = {"srt": DistributedDataParallel(Block()), "torch": DistributedDataParallel(Block(native=True))}
    optimizers = {key: torch.optim.SGD(m.parameters(), lr=0.01) for key, m in models.items()}

    def step(key: str) -> Callable[[], None]:
        def run() -> None:
            optimizers[key].zero_grad()
            ((models[key](x) - y) ** 2).mean().backward()
            optimizers[key].step()

        return run

    for _ in range(3):
        for key in timings:
            timings[key].append(_median_step(step(key)))
    if rank == 0:
        (out / "ddp-times.json").write_text(json.dumps({key: statistics.median(v) for key, v in timings.items()}))


def _worker_fsdp(rank: int, out: Path) -> None:
    from torch.distributed.fsdp import fully_shard  # noqa: PLC0415

    model = Block()
    fully_shard(model)
    x, y = _shard(rank)
    _train(model, x, y)
    full = {name: p.full_tensor().detach() for name, p in model.named_parameters()}  # type: ignore[attr-defined]
    torch.save(full, out / f"fsdp-{rank}.pt")


def _worker_dtensor(rank: int, out: Path) -> None:
    from torch.distributed.device_mesh import init_device_mesh  # noqa: PLC0415
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor  # noqa: PLC0415

    mesh = init_device_mesh("cpu", (WORLD,))
    x = torch.arange(24.0, dtype=torch.float64).reshape(4, 3, 2)
    z = torch.arange(12.0, dtype=torch.float64).reshape(4, 3, 1) - 3.0
    results: dict[str, object] = {}

    def record(name: str, y: torch.Tensor) -> None:
        results[name] = {"placements": [str(p) for p in y.placements], "local": list(y.to_local().shape)}  # type: ignore[attr-defined]
        results[name + ":full"] = y.full_tensor().detach().numpy().tolist()  # type: ignore[attr-defined]

    s0 = distribute_tensor(x, mesh, [Shard(0)])
    record("repeat axis 1 of Shard(0)", srt.repeat(s0, Val(2), axis=Val(1)))
    record("repeat axis 0 of Shard(0)", srt.repeat(s0, Val(2), axis=Val(0)))
    record("repeat inner (1, 2) of Shard(0)", srt.repeat(s0, inner=Val((1, 2))))
    record("tile (1, 2, 1) of Shard(0)", srt.tile(s0, Val((1, 2, 1))))
    record("concatenate axis 1 of Shard(0)", srt.concatenate((s0, distribute_tensor(x, mesh, [Shard(0)])), axis=Val(1)))
    record("concatenate axis 2 of Shard(0), Replicate", srt.concatenate((s0, distribute_tensor(z, mesh, [Replicate()])), axis=Val(2)))
    record("flip axis 2 of Shard(0)", srt.flip(s0, Val(2)))
    record("flip axis 0 of Shard(0)", srt.flip(s0, Val(0)))
    record("roll axis 1 of Shard(0)", srt.roll(s0, Val(1), axis=Val(1)))
    record("permute_dims (2, 0, 1) of Shard(0)", srt.permute_dims(s0, Val((2, 0, 1))))
    record("swapaxes (0, 2) of Shard(0)", srt.swapaxes(s0, Val(0), Val(2)))
    record("sum axis 1 of Shard(0)", srt.sum(s0, Val(1)))
    record("mean axis 0 of Shard(0)", srt.mean(s0, Val(0)))
    record("pad axis 1 of Shard(0)", srt.pad(s0, Val((0, 0, 1, 2, 0, 0)), 0.5))
    record("reshape of Shard(0)", srt.reshape(s0, Val((4, 6))))
    record("kron of Replicate", srt.kron(distribute_tensor(x[:2, :, 0], mesh, [Replicate()]), distribute_tensor(z[:2, :, 0], mesh, [Replicate()])))
    for index, part in enumerate(srt.split(s0, Val(3), axis=Val(1))):
        record(f"split axis 1 of Shard(0) part {index}", part)
    # gradients through the sharded path, against NumPy's
    leaf = distribute_tensor(x, mesh, [Shard(0)]).requires_grad_(True)
    y = srt.repeat(srt.concatenate((leaf, leaf), axis=Val(2)), Val(3), axis=Val(1))
    (y * y).sum().backward()  # type: ignore[no-untyped-call]
    assert leaf.grad is not None
    results["grad placements"] = [str(p) for p in leaf.grad.placements]  # type: ignore[attr-defined]
    results["grad:full"] = leaf.grad.full_tensor().numpy().tolist()  # type: ignore[attr-defined]
    if rank == 0:
        (out / "dtensor.json").write_text(json.dumps(results))


def _worker(scenario: str, out: Path) -> None:
    import torch.distributed as dist  # noqa: PLC0415

    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", rank=rank, world_size=WORLD
    )
    try:
        {"ddp": _worker_ddp, "fsdp": _worker_fsdp, "dtensor": _worker_dtensor}[scenario](rank, out)
        dist.barrier()
    finally:
        dist.destroy_process_group()


# --------------------------------------------------------------------------------------------
# the parent: start two workers, with a timeout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_workers(scenario: str, out: Path, timeout_s: float = SPAWN_TIMEOUT_S) -> float:
    """Run ``scenario`` on two ranks; the wall time in seconds. Fails with both workers'
    output if either fails or the pair outlives ``timeout_s`` (then both are killed)."""
    port = _free_port()
    root = Path(__file__).resolve().parents[1]
    environment = dict(os.environ, WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    environment.update(OMP_NUM_THREADS="1", STABLERULES_NUM_THREADS="1", PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if Path("/sys/class/net/lo").exists():
        environment["GLOO_SOCKET_IFNAME"] = "lo"
    start = time.perf_counter()
    workers = []
    for rank in range(WORLD):
        log = (out / f"{scenario}-{rank}.log").open("w")
        workers.append(
            (
                subprocess.Popen(
                    [sys.executable, __file__, scenario, str(out)],
                    env=dict(environment, RANK=str(rank)),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        )
    deadline = start + timeout_s
    codes: list[int | None] = []
    try:
        for process, _ in workers:
            codes.append(process.wait(timeout=max(deadline - time.perf_counter(), 1.0)))
    except subprocess.TimeoutExpired:
        codes.append(None)
    finally:
        for process, log in workers:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    elapsed = time.perf_counter() - start
    if codes != [0] * WORLD:
        logs = "\n".join(f"--- rank {rank} ---\n{(out / f'{scenario}-{rank}.log').read_text()[-4000:]}" for rank in range(WORLD))
        raise AssertionError(f"{scenario}: workers exited with {codes} after {elapsed:.1f} s (timeout {timeout_s} s)\n{logs}")
    return elapsed


def _assert_parameters_equal(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert set(got) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, rtol=1e-12, atol=1e-13, msg=name)


def test_ddp_trains_as_one_process(tmp_path: Path) -> None:
    elapsed = run_workers("ddp", tmp_path)
    expected = _reference()
    for rank in range(WORLD):
        _assert_parameters_equal(torch.load(tmp_path / f"ddp-{rank}.pt"), expected)
    trained = expected["a"]
    assert not torch.equal(trained, Block().a.detach()), "training changed nothing: the test would prove nothing"
    times = json.loads((tmp_path / "ddp-times.json").read_text())
    print(f"ddp: {elapsed:.1f} s wall; step {times['srt'] * 1e3:.2f} ms with srt ops, {times['torch'] * 1e3:.2f} ms on torch's")


def test_fsdp2_trains_as_one_process(tmp_path: Path) -> None:
    """Before: FSDP2's backward failed with ``RuntimeError: Trying to resize storage that is
    not resizable`` (our forward had viewed the gathered parameters through ``Tensor.numpy``)."""
    elapsed = run_workers("fsdp", tmp_path)
    expected = _reference()
    for rank in range(WORLD):
        _assert_parameters_equal(torch.load(tmp_path / f"fsdp-{rank}.pt"), expected)
    print(f"fsdp2: {elapsed:.1f} s wall")


def _numpy_references() -> dict[str, tuple[np.ndarray, str | None]]:
    """What each DTensor call must equal (NumPy, unsharded) and the placement it must keep
    (as DTensor prints it; ``None``: the rule redistributes, any placement is right)."""
    x = np.arange(24.0).reshape(4, 3, 2)
    z = np.arange(12.0).reshape(4, 3, 1) - 3.0
    parts = np.split(x, 3, axis=1)
    references: dict[str, tuple[np.ndarray, str | None]] = {
        "repeat axis 1 of Shard(0)": (np.repeat(x, 2, axis=1), "S(0)"),
        "repeat axis 0 of Shard(0)": (np.repeat(x, 2, axis=0), None),
        "repeat inner (1, 2) of Shard(0)": (np.repeat(x, 2, axis=1), "S(0)"),
        "tile (1, 2, 1) of Shard(0)": (np.tile(x, (1, 2, 1)), "S(0)"),
        "concatenate axis 1 of Shard(0)": (np.concatenate((x, x), axis=1), "S(0)"),
        "concatenate axis 2 of Shard(0), Replicate": (np.concatenate((x, z), axis=2), None),
        "flip axis 2 of Shard(0)": (np.flip(x, 2), "S(0)"),
        "flip axis 0 of Shard(0)": (np.flip(x, 0), None),
        "roll axis 1 of Shard(0)": (np.roll(x, 1, axis=1), "S(0)"),
        "permute_dims (2, 0, 1) of Shard(0)": (np.transpose(x, (2, 0, 1)), "S(1)"),
        "swapaxes (0, 2) of Shard(0)": (np.swapaxes(x, 0, 2), "S(2)"),
        "sum axis 1 of Shard(0)": (np.sum(x, axis=1), "S(0)"),
        "mean axis 0 of Shard(0)": (np.mean(x, axis=0), None),
        "pad axis 1 of Shard(0)": (np.pad(x, ((0, 0), (1, 2), (0, 0)), constant_values=0.5), "S(0)"),
        "reshape of Shard(0)": (x.reshape(4, 6), None),
        "kron of Replicate": (np.kron(x[:2, :, 0], z[:2, :, 0]), "R"),
    }
    for index, part in enumerate(parts):
        references[f"split axis 1 of Shard(0) part {index}"] = (part, "S(0)")
    return references


def test_dtensors_pass_through_with_sharding_rules(tmp_path: Path) -> None:
    """Before: ``RuntimeError: .numpy() is not supported for tensor subclasses`` (the eager
    path viewed every tensor through ``Tensor.numpy``), and no sharding rule existed."""
    elapsed = run_workers("dtensor", tmp_path)
    results = json.loads((tmp_path / "dtensor.json").read_text())
    for name, (expected, placement) in _numpy_references().items():
        np.testing.assert_array_equal(np.asarray(results[name + ":full"]), expected, err_msg=name)
        placements = results[name]["placements"]
        if placement is not None:
            assert placements == [placement], (name, placements)
        if placements == ["S(0)"]:
            assert results[name]["local"][0] == expected.shape[0] // WORLD, name  # each rank holds its half
    # d/dx sum(repeat(concatenate((x, x), 2), 3, 1) ** 2) = 2 * 3 * 2 * x
    x = np.arange(24.0).reshape(4, 3, 2)
    np.testing.assert_allclose(np.asarray(results["grad:full"]), 12.0 * x, rtol=1e-15)
    assert results["grad placements"] == ["S(0)"]
    print(f"dtensor: {elapsed:.1f} s wall")


if __name__ == "__main__":
    _worker(sys.argv[1], Path(sys.argv[2]))
