"""The promise behind ``noalias`` kernels, checked on every CPU kernel call of a test session.

Some kernels compile with ``noalias`` array arguments (``_codegen.cpu_kernel(noalias=True)``):
no launch may pass them a written buffer that overlaps another argument. ``tests/conftest.py``
calls :func:`install_overlap_check` before any kernel is made, so every CPU kernel's entry
point (``noalias`` or not: the launchers are shared) checks its arguments in every test, and
an overlap fails the test that made it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import numpy as np

_SIGNATURE = re.compile(r"^SIGNATURE = types\.void\(\n(.*?)\n\)", re.S | re.M)


def written_arguments(source: str) -> tuple[bool, ...] | None:
    """Per parameter of a CPU kernel's source, whether it is an array the kernel may write
    (``types.Array`` without ``readonly=True``); ``None`` for a source without that signature."""
    found = _SIGNATURE.search(source)
    if found is None:
        return None
    kinds = [line.strip().rstrip(",") for line in found.group(1).splitlines() if line.strip()]
    return tuple(kind.startswith("types.Array(") and "readonly=True" not in kind for kind in kinds)


def _span(array: np.ndarray) -> tuple[int, int]:
    low, high = np.lib.array_utils.byte_bounds(array)
    return int(low), int(high)


def check_overlaps(entry: Callable[..., object], written: tuple[bool, ...], name: str) -> Callable[..., object]:
    """``entry``, checking before each call that no written array argument shares a byte with
    another array argument (two read-only ones may)."""

    @functools.wraps(entry)
    def checked(*args: object) -> object:
        arrays = [(index, arg) for index, arg in enumerate(args) if isinstance(arg, np.ndarray) and arg.size]
        for position, (i, a) in enumerate(arrays):
            for j, b in arrays[position + 1 :]:
                if (i < len(written) and written[i]) or (j < len(written) and written[j]):
                    (a_low, a_high), (b_low, b_high) = _span(a), _span(b)
                    if a_low < b_high and b_low < a_high:
                        raise AssertionError(f"kernel {name}: arguments {i} and {j} overlap and one is written")
        return entry(*args)

    return checked


def install_overlap_check() -> None:
    """Wrap the entry point of every CPU kernel made from now on (``stablerules`` is imported
    here, after the conftest has set the cache directory)."""
    from stablerules import _key

    made = _key.Kernel.__init__

    def init(self: _key.Kernel, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.signature.device != "cpu" or not callable(self.entry) or hasattr(self.entry, "address"):
            return  # CUDA kernels, and C callbacks (XLA FFI handlers), are not called from Python
        written = written_arguments(self.source.text)
        if written is not None:
            self.entry = check_overlaps(self.entry, written, self.module_name)

    _key.Kernel.__init__ = init  # type: ignore[method-assign]
