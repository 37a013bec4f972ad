"""CUDA kernels: source generation, launch configuration and availability.

A CUDA kernel here is a *gather*: each output element is computed by the one thread (or, for
:func:`cuda_block_kernel`, the one block) that owns it, summing its own cotangent entries, so
no atomics are needed. Kernels are generated per signature like the CPU ones, compiled once by
numba-cuda with ``cache=True`` (so a fresh process loads them from the same disk cache) and
launched on CuPy arrays through ``__cuda_array_interface__``, on CuPy's current stream, with
no host round trip and no synchronization.

With ``NUMBA_ENABLE_CUDASIM=1`` the same source runs in Numba's simulator on NumPy arrays
(``STABLERULES_DEVICE=cuda`` routes NumPy inputs there); CI tests the kernels that way. On a
real GPU, NumPy arrays given to a CUDA kernel (``STABLERULES_DEVICE=cuda`` without the
simulator) are copied to the device and back by Numba around each launch: correct, slow, and
what the device check uses to run the same test module on hardware.

Scope: one device. A kernel runs on Numba's current device, which must be the device of the
CuPy arrays (CuPy and Numba share the primary context, so device 0 by default).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from . import _config
from ._codegen import SourceWriter
from ._key import Kernel, KernelSource, ShapeSignature
from ._memo import memoized

THREADS_PER_BLOCK = 256
# Grid-stride kernels need no more blocks than the device keeps resident a few times over.
_BLOCKS_PER_MULTIPROCESSOR = 32
# An item that reads at least this many elements is "heavy": spread such items over all
# multiprocessors (smaller blocks) before filling blocks of THREADS_PER_BLOCK.
_HEAVY_ITEM = 32
_MIN_THREADS = 64
# The simulator runs each thread as a Python thread: launches of at most 4 x 64 threads keep
# it fast, and tests with a few hundred elements still exercise the grid-stride loops.
_SIMULATOR_MAX_BLOCKS = 4
_SIMULATOR_MAX_THREADS = 64
_SIMULATOR_MULTIPROCESSORS = 2


def simulator_enabled() -> bool:
    return _config.cuda_simulator()


@memoized(None)
def cuda_available() -> bool:
    """True where CUDA kernels can run: a working GPU, or Numba's simulator."""
    try:
        from numba import cuda  # noqa: PLC0415 - imported only when CUDA is asked for
    except ImportError:
        return False
    # numba.cuda ships no types: this project's mypy reads stubs/, a user's mypy that reads
    # these sources (MYPYPATH) does not, so each call goes through a name typed here.
    is_available: Callable[[], object] = cuda.is_available
    try:
        return bool(is_available())
    except Exception:  # a broken driver install reports through exceptions
        return False


def require_cuda(what: str) -> None:
    """``RuntimeError`` before any CUDA kernel is built where none can run."""
    if not cuda_available():
        raise RuntimeError(
            f"{what}: CUDA kernels were asked for (a CuPy array, or STABLERULES_DEVICE=cuda) but "
            f"no CUDA GPU is usable and Numba's simulator is off (NUMBA_ENABLE_CUDASIM=1 turns it on)"
        )


@memoized(None)
def multiprocessor_count() -> int:
    """The current device's streaming multiprocessors (a small stand-in under the simulator)."""
    if simulator_enabled():
        return _SIMULATOR_MULTIPROCESSORS
    from numba import cuda

    current_device: Callable[[], object] = cuda.get_current_device  # typed here: see cuda_available
    return int(getattr(current_device(), "MULTIPROCESSOR_COUNT"))


def cuda_array_type(dtype: str, ndim: int = 1) -> str:
    """A C-contiguous device-array parameter (CuPy arrays are never read-only)."""
    from ._codegen import numba_scalar

    return f"types.Array({numba_scalar(dtype)}, {ndim}, 'C')"


def _module_text(
    signature: ShapeSignature, parameters: Sequence[tuple[str, str]], description: str, function: str
) -> KernelSource:
    types_text = ",\n    ".join(kind for _, kind in parameters)
    text = (
        f'"""stablerules CUDA kernel: {description}\n\n'
        f"signature: {signature!r}\n"
        f'"""\n'
        f"from numba import cuda, types\n\n"
        f"SIGNATURE = types.void(\n    {types_text},\n)\n\n\n"
        f"@cuda.jit(SIGNATURE, cache={{CACHE}})\n"
        f"{function}"
    )
    return KernelSource(text)


def _indented(body: SourceWriter | None, depth: int) -> str:
    if body is None or not body.text().strip():
        return ""
    prefix = "    " * depth
    return "".join(prefix + line + "\n" if line else "\n" for line in body.text().splitlines())


def cuda_kernel(
    signature: ShapeSignature,
    parameters: Sequence[tuple[str, str]],
    body: SourceWriter,
    description: str,
    total: str = "total",
    index: str = "t",
    setup: SourceWriter | None = None,
) -> KernelSource:
    """A module defining a CUDA ``kernel(*parameters)`` whose ``body`` runs for each
    ``index`` in ``range(total)`` (grid-stride loop, one thread per index); ``total`` must be
    one of the parameters. ``setup`` runs once per thread before the loop (values that do not
    depend on the index: steps, strides).
    """
    names = ", ".join(name for name, _ in parameters)
    function = (
        f"def kernel({names}):\n"
        + _indented(setup, 1)
        + "    start = cuda.grid(1)\n"
        "    stride = cuda.gridsize(1)\n"
        f"    for {index} in range(start, {total}, stride):\n"
        + _indented(body, 2)
    )
    return _module_text(signature, parameters, description, function)


def cuda_block_kernel(
    signature: ShapeSignature,
    parameters: Sequence[tuple[str, str]],
    body: SourceWriter,
    description: str,
    units: str = "units",
    index: str = "unit",
    setup: SourceWriter | None = None,
) -> KernelSource:
    """A module defining a CUDA ``kernel(*parameters)`` whose ``body`` runs, cooperatively by
    all threads of one block, for each ``index`` in ``range(units)`` (block-stride loop).

    ``body`` may use ``cuda.syncthreads()``: every thread of a block runs the same number of
    iterations, so none is left waiting. ``lane = cuda.threadIdx.x`` is defined.
    """
    names = ", ".join(name for name, _ in parameters)
    function = (
        f"def kernel({names}):\n"
        "    lane = cuda.threadIdx.x\n"
        + _indented(setup, 1)
        + f"    for {index} in range(cuda.blockIdx.x, {units}, cuda.gridDim.x):\n"
        + _indented(body, 2)
    )
    return _module_text(signature, parameters, description, function)


def launch_config(total: int, work: int = 1) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride kernel over ``total`` items, each
    reading about ``work`` elements.

    Light items (copies) fill blocks of 256 threads. Heavy items (a pullback entry summing
    hundreds of cotangent entries) when there are few of them get smaller blocks, down to
    64 threads, so that they land on every multiprocessor rather than on a few. The grid is
    capped at a few resident waves; the grid-stride loop covers the rest.
    """
    if total <= 0:
        return 1, 1
    if simulator_enabled():
        threads = min(total, _SIMULATOR_MAX_THREADS)
        return min(_SIMULATOR_MAX_BLOCKS, -(-total // threads)), threads
    multiprocessors = multiprocessor_count()
    threads = THREADS_PER_BLOCK
    if work >= _HEAVY_ITEM:
        while threads > _MIN_THREADS and -(-total // threads) < 2 * multiprocessors:
            threads //= 2
    return min(_BLOCKS_PER_MULTIPROCESSOR * multiprocessors, -(-total // threads)), threads


def block_launch_config(units: int, threads: int) -> tuple[int, int]:
    """(blocks, threads) for a block-stride kernel over ``units`` with a fixed block size."""
    if units <= 0:
        return 1, threads
    if simulator_enabled():
        return min(2, units), threads
    return min(_BLOCKS_PER_MULTIPROCESSOR * multiprocessor_count(), units), threads


_STREAMS: dict[int, object] = {}


def _current_stream() -> object:
    """Numba's handle on CuPy's current stream (0, the legacy default stream, if CuPy uses it),
    so kernels are ordered with the CuPy operations around them without synchronizing."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return 0
    pointer = int(cupy.cuda.get_current_stream().ptr)
    if pointer == 0:
        return 0
    stream = _STREAMS.get(pointer)
    if stream is None:
        from numba import cuda

        stream = _STREAMS[pointer] = cuda.external_stream(pointer)
    return stream


def _device_arguments(arguments: Sequence[object]) -> tuple[tuple[object, ...], object]:
    """Arguments ready for a launch, and the stream to launch on.

    Numba imports a ``__cuda_array_interface__`` argument by synchronizing on the stream it
    names (``CUDA_ARRAY_INTERFACE_SYNC``): a host stall per launch. Importing the arrays here
    without that sync and launching on the same stream keeps the order and skips the stall.
    """
    if simulator_enabled() or not any(hasattr(argument, "__cuda_array_interface__") for argument in arguments):
        return tuple(arguments), 0
    from numba import cuda

    as_cuda_array: Callable[..., object] = cuda.as_cuda_array  # typed here: see cuda_available
    converted = tuple(
        as_cuda_array(argument, sync=False) if hasattr(argument, "__cuda_array_interface__") else argument
        for argument in arguments
    )
    return converted, _current_stream()


def launch(kernel: Kernel, total: int, *args: object, work: int = 1) -> None:
    """Run a grid-stride CUDA kernel over ``total`` items (nothing to do for zero)."""
    if total <= 0:
        return
    blocks, threads = launch_config(total, work)
    arguments, stream = _device_arguments(args)
    kernel.function[blocks, threads, stream](*arguments)  # type: ignore[index]


def launch_blocks(kernel: Kernel, units: int, threads: int, *args: object) -> None:
    """Run a block-stride CUDA kernel (:func:`cuda_block_kernel`) over ``units``."""
    if units <= 0:
        return
    blocks, threads = block_launch_config(units, threads)
    arguments, stream = _device_arguments(args)
    kernel.function[blocks, threads, stream](*arguments)  # type: ignore[index]
