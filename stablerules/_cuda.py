"""CUDA kernels: source generation, launch configuration and availability.

A CUDA kernel here is a *gather*: one thread per output element (grid-stride loop over
``total`` elements) sums its own cotangent entries, so no atomics are needed wherever the
index map allows. Kernels are generated per signature like the CPU ones, compiled once by
numba-cuda with ``cache=True`` (so a fresh process loads them from the same disk cache) and
launched on CuPy arrays (through ``__cuda_array_interface__``: no host round trip).

With ``NUMBA_ENABLE_CUDASIM=1`` the same source runs in Numba's simulator on NumPy arrays
(``STABLERULES_DEVICE=cuda`` routes NumPy inputs there); CI tests the kernels that way.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from ._cache import Kernel, KernelSource, ShapeSignature
from ._codegen import SourceWriter

THREADS_PER_BLOCK = 256
# The simulator runs each thread as a Python thread: keep launches to about a thousand.
_SIMULATOR_MAX_BLOCKS = 4
_MAX_BLOCKS = 65535


def simulator_enabled() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in {"", "0"}


@functools.cache
def cuda_available() -> bool:
    """True where CUDA kernels can run: a working GPU, or Numba's simulator."""
    try:
        from numba import cuda  # noqa: PLC0415 - imported only when CUDA is asked for
    except ImportError:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install reports through exceptions
        return False


def cuda_array_type(dtype: str, ndim: int = 1) -> str:
    """A C-contiguous device-array parameter (CuPy arrays are never read-only)."""
    from ._codegen import numba_scalar

    return f"types.Array({numba_scalar(dtype)}, {ndim}, 'C')"


def cuda_kernel(
    signature: ShapeSignature,
    parameters: Sequence[tuple[str, str]],
    body: SourceWriter,
    description: str,
    total: str = "total",
    index: str = "t",
) -> KernelSource:
    """A module defining a CUDA ``kernel(*parameters)`` whose ``body`` runs for each
    ``index`` in ``range(total)`` (grid-stride loop); ``total`` must be one of the parameters.
    """
    names = ", ".join(name for name, _ in parameters)
    types_text = ",\n    ".join(kind for _, kind in parameters)
    body_lines = "".join("        " + line + "\n" if line else "\n" for line in body.text().splitlines())
    text = (
        f'"""stablerules CUDA kernel: {description}\n\n'
        f"signature: {signature!r}\n"
        f'"""\n'
        f"from numba import cuda, types\n\n"
        f"SIGNATURE = types.void(\n    {types_text},\n)\n\n\n"
        f"@cuda.jit(SIGNATURE, cache={{CACHE}})\n"
        f"def kernel({names}):\n"
        f"    start = cuda.grid(1)\n"
        f"    stride = cuda.gridsize(1)\n"
        f"    for {index} in range(start, {total}, stride):\n"
        f"{body_lines}"
    )
    return KernelSource(text)


def launch_config(total: int) -> tuple[int, int]:
    """(blocks, threads per block) for ``total`` elements, chosen from the element count."""
    if total <= 0:
        return 1, 1
    if simulator_enabled():
        threads = min(total, 256)
        return min(_SIMULATOR_MAX_BLOCKS, -(-total // threads)), threads
    threads = THREADS_PER_BLOCK
    return min(_MAX_BLOCKS, -(-total // threads)), threads


def launch(kernel: Kernel, total: int, *args: object) -> None:
    """Run a grid-stride CUDA kernel over ``total`` elements (nothing to do for zero)."""
    if total <= 0:
        return
    blocks, threads = launch_config(total)
    kernel.function[blocks, threads](*args)  # type: ignore[index]
