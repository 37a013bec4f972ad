"""The output pool (``stablerules._pool``): a block is handed out again only when nothing
references it, and never beyond its bounds.

Each reuse test first shows that the pool *does* reuse a dropped block (same address), then
that a block kept alive by a result, a view, a memoryview or an export is not reused: the
second case writes through the new array and checks that the old holder's values survive.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import stablerules as sr
from stablerules import Val, _pool

Array = npt.NDArray[Any]
F64 = np.dtype(np.float64)
BIG = (1 << 17) + 3  # float64s: just over 1 MiB
ROOT = Path(__file__).resolve().parents[1]  # where `python -c` imports this checkout's stablerules


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_pool, "ENABLED", True)
    _pool.clear()
    yield
    _pool.clear()


def address(array: Array) -> int:
    data: int = array.__array_interface__["data"][0]
    return data


def test_a_dropped_output_is_reused_and_small_ones_are_numpys() -> None:
    a = _pool.empty(BIG, F64)
    assert a.shape == (BIG,) and a.dtype == F64 and a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    first = address(a)
    del a
    b = _pool.empty((BIG,), F64)
    assert address(b) == first  # the pool works: a dropped block comes back
    small = _pool.empty((100,), F64)
    assert small.base is None and small.flags.owndata
    c = _pool.empty((3, 5, 7), np.dtype(">c16"))  # a shape and a non-native dtype, below MIN_BYTES
    assert c.shape == (3, 5, 7) and c.dtype == np.dtype(">c16")


def holders(array: Array) -> list[tuple[str, Callable[[Array], object], Callable[[object], Array]]]:
    """Ways to keep ``array``'s memory alive without keeping ``array``: each makes a holder and
    reads the values back out of it."""
    del array

    def read_view(holder: object) -> Array:
        assert isinstance(holder, np.ndarray)
        return holder.copy()

    def read_memoryview(holder: object) -> Array:
        assert isinstance(holder, memoryview)
        return np.frombuffer(holder, dtype=np.float64).copy()

    return [
        ("the result itself", lambda a: a, read_view),
        ("a slice view", lambda a: a[1::2], read_view),
        ("a reshaped view", lambda a: a.reshape(-1, 1)[:, 0], read_view),
        ("a dtype view", lambda a: a.view(np.uint8), read_view),
        ("a memoryview", lambda a: memoryview(a.data), read_memoryview),
        ("a DLPack export (as torch.from_dlpack holds one)", lambda a: np.from_dlpack(a), read_view),
        ("np.frombuffer of it", lambda a: np.frombuffer(a, dtype=np.float64), read_view),
    ]


@pytest.mark.parametrize("index", range(7))
def test_a_referenced_block_is_never_reused(index: int) -> None:
    a = _pool.empty(BIG, F64)
    a[:] = np.arange(BIG, dtype=np.float64)
    name, hold, read = holders(a)[index]
    holder = hold(a)
    expected = read(holder)
    del a
    gc.collect()
    for _ in range(3):  # new outputs of the same size, written all over
        b = _pool.empty(BIG, F64)
        b[:] = -1.0
        np.testing.assert_array_equal(read(holder), expected, err_msg=name)
        del b
    del holder
    gc.collect()


def test_two_live_outputs_of_one_size_never_share_and_a_third_is_numpys() -> None:
    a, b, c = (_pool.empty(BIG, F64) for _ in range(3))
    assert not np.shares_memory(a, b) and not np.shares_memory(b, c) and not np.shares_memory(a, c)
    assert c.base is None  # PER_SIZE blocks of one size: the third is not pooled
    assert _pool.held_bytes() == 2 * BIG * 8


def test_the_cap_is_respected_and_free_blocks_of_other_sizes_make_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pool, "CAP_BYTES", (3 * BIG + 6) * 8)  # the first three, or the last three
    sizes = [BIG, BIG + 1, BIG + 2, BIG + 3]
    live = [_pool.empty(size, F64) for size in sizes]
    assert _pool.held_bytes() <= _pool.CAP_BYTES
    assert [array.base is not None for array in live] == [True, True, True, False]  # no room for the fourth
    del live[0]  # the least recently used block is free now
    d = _pool.empty(BIG + 3, F64)
    assert d.base is not None and _pool.held_bytes() <= _pool.CAP_BYTES
    for array in live:
        assert not np.shares_memory(d, array)
    too_big = _pool.empty(4 * BIG, F64)
    assert too_big.base is None


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pool, "ENABLED", False)
    a = _pool.empty(BIG, F64)
    assert a.base is None and a.flags.owndata and _pool.held_bytes() == 0
    code = "import stablerules._pool as p, numpy as np; a = p.empty(1 << 20, np.dtype('f8')); print(p.ENABLED, a.base is None)"
    for value, expected in (("0", "False True"), ("1", "True False")):
        env = {"STABLERULES_POOL": value, "PATH": ""}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=ROOT
        )
        assert result.stdout.split() == expected.split()


def test_clear_caches_empties_the_pool() -> None:
    a = _pool.empty(BIG, F64)
    del a
    assert _pool.held_bytes() > 0
    sr.clear_caches()
    assert _pool.held_bytes() == 0


def test_threads_never_get_a_block_in_use() -> None:
    """Threads allocate, fill with their own number, yield, check, and drop, many times: a
    block handed to two live owners would show another thread's number."""
    errors: list[str] = []
    barrier = threading.Barrier(4)

    def work(number: int) -> None:
        barrier.wait()
        for round_ in range(200):
            size = BIG + (round_ % 2)
            a = _pool.empty(size, F64)
            a[:] = number
            b = _pool.empty(size, F64)
            b[:] = -number
            if not (a == number).all() or not (b == -number).all():
                errors.append(f"thread {number} round {round_}")
            del a, b

    threads = [threading.Thread(target=work, args=(number,)) for number in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _pool.held_bytes() <= 2 * 2 * (BIG + 1) * 8


def test_rule_outputs_come_from_the_pool_and_live_results_keep_their_values() -> None:
    """roll's pullback (and its forward) and sum's KernelPullback: a result kept across calls
    keeps its values; a dropped one is reused."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 128, 130))
    y, back = sr.rrule(sr.roll, x, Val((3, -5)), axis=Val((1, 2)))
    np.testing.assert_array_equal(y, np.roll(x, (3, -5), axis=(1, 2)))
    dy1, dy2 = rng.standard_normal(y.shape), rng.standard_normal(y.shape)
    (dx1, _) = back(dy1)
    (dx2, _) = back(dy2)
    np.testing.assert_array_equal(dx1, np.roll(dy1, (-3, 5), axis=(1, 2)))
    np.testing.assert_array_equal(dx2, np.roll(dy2, (-3, 5), axis=(1, 2)))
    assert isinstance(dx1, np.ndarray) and dx1.base is not None and not np.shares_memory(dx1, dx2)
    first = address(dx1)
    del dx1, dx2
    (dx3, _) = back(dy1)
    assert isinstance(dx3, np.ndarray) and address(dx3) == first
    s = rng.standard_normal((300, 3, 400))
    _, back_sum = sr.rrule(sr.sum, s, axis=Val((0, 2)))
    (ds1,) = back_sum(np.array([1.0, 2.0, 3.0]))
    (ds2,) = back_sum(np.array([4.0, 5.0, 6.0]))
    assert isinstance(ds1, np.ndarray) and ds1.base is not None and not np.shares_memory(ds1, ds2)
    np.testing.assert_array_equal(ds1, np.broadcast_to(np.array([1.0, 2.0, 3.0])[None, :, None], s.shape))
    np.testing.assert_array_equal(ds2, np.broadcast_to(np.array([4.0, 5.0, 6.0])[None, :, None], s.shape))


def test_a_block_exported_to_torch_is_never_reused() -> None:
    """``torch.from_numpy`` (what ``stablerules.torch`` hands back) keeps the block alive."""
    import torch

    a = _pool.empty(BIG, F64)
    a[:] = 7.0
    tensor = torch.from_numpy(a)
    del a
    gc.collect()
    b = _pool.empty(BIG, F64)
    b[:] = -1.0
    assert bool((tensor == 7.0).all())
    del tensor, b
    c = _pool.empty(BIG, F64)
    d = _pool.empty(BIG, F64)
    assert c.base is not None and d.base is not None  # both blocks free again once the tensor is gone


def test_an_engines_memory_backs_large_outputs_in_its_thread_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ENGINE_MEMORY.make`` (what the torch adapter sets around a pullback): from
    ``MIN_BYTES`` up a new block, an unpooled output and a zeroed one are its memory (all zero
    where asked), below it NumPy's; another thread, and this one once it is unset, get
    NumPy's; a block it made is pooled and handed out again like any other."""
    made: list[tuple[int, bool]] = []

    def make(nbytes: int, zeroed: bool) -> npt.NDArray[np.uint8]:
        made.append((nbytes, zeroed))
        block = np.full(nbytes + 64, 0 if zeroed else 0xAB, np.uint8)
        return block[64:]  # a view: its own allocation, told apart by its base

    def ours(array: Array) -> bool:
        root = array
        while isinstance(root.base, np.ndarray):
            root = root.base
        return root.nbytes == array.nbytes + 64

    monkeypatch.setattr(_pool.ENGINE_MEMORY, "make", make)
    a = _pool.empty(BIG, F64)
    z = _pool.zeros((BIG,), F64)
    small, small_zeros = _pool.empty(100, F64), _pool.zeros(100, F64)
    assert made == [(BIG * 8, False), (BIG * 8, True)]
    assert ours(a) and ours(z) and not (z != 0).any() and a.shape == z.shape == (BIG,)
    assert small.base is None and small_zeros.base is None and not small_zeros.any()
    first = address(a)
    del a
    assert address(_pool.empty(BIG, F64)) == first and len(made) == 2  # pooled and reused
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(ours(_pool.empty(BIG + 1, F64))))
    thread.start()
    thread.join()
    assert seen == [False] and len(made) == 2
    monkeypatch.setattr(_pool, "ENABLED", False)
    assert ours(_pool.empty(BIG, F64)) and made[-1] == (BIG * 8, False)  # unpooled: still the engine's
    allocate, allocate_zeros = _pool.allocator(BIG * 8), _pool.allocator(BIG * 8, True)
    assert allocate is _pool.empty and allocate_zeros is _pool.zeros
    assert _pool.allocator(800) is np.empty and _pool.allocator(800, True) is np.zeros
    monkeypatch.setattr(_pool.ENGINE_MEMORY, "make", lambda nbytes, zeroed: None)  # the engine cannot now
    declined = _pool.zeros((BIG,), F64)
    assert not ours(declined) and not declined.any() and not ours(_pool.empty(BIG, F64))
    monkeypatch.setattr(_pool.ENGINE_MEMORY, "make", None)
    assert not ours(_pool.zeros((BIG,), F64)) and not ours(_pool.empty(BIG, F64))
