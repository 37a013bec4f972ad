"""The kernel key and what it names: :class:`ShapeSignature` (everything a compiled kernel is
specialized on), :class:`KernelSource` (its generated module) and :class:`Kernel` (the compiled
result). The bottom of the kernel layers: the cache, code generation, CUDA and the launchers
import it; it imports nothing of stablerules.
"""

from __future__ import annotations

import _thread
from collections.abc import Callable
from typing import NamedTuple


KernelFunction = Callable[..., object]


class ShapeSignature(NamedTuple):
    """Everything a compiled kernel is specialized on; the cache's one key type.

    ``static`` holds the ``Val`` values (and other compile-time constants), ``extents`` only
    the array extents that the kernel bakes in (most kernels take extents as arguments).
    """

    op: str
    kind: str
    static: tuple[object, ...]
    dtypes: tuple[str, ...]
    ndims: tuple[int, ...]
    device: str = "cpu"
    extents: tuple[int, ...] = ()


class KernelSource(NamedTuple):
    """Generated source of one kernel module; ``entry`` names the function to call.

    The text holds the token ``{CACHE}`` where ``cache=True``/``False`` goes, so the hash
    (and the file) does not depend on whether the disk cache is on.
    """

    text: str
    entry: str = "kernel"

    def render(self, cache: bool) -> str:
        return self.text.replace("{CACHE}", "True" if cache else "False")


class Kernel:
    """A compiled kernel: its entry point, the signature it was built for and its source.

    ``entry`` is what calls go through. ``function`` is Numba's dispatcher (what a CUDA launch
    or a caller passing arrays of unchecked layout needs); for a kernel loaded from object
    code it is loaded through Numba on first use, which starts Numba in the process.
    """

    __slots__ = ("signature", "source", "module_name", "entry", "_function", "_load_function")

    def __init__(
        self,
        function: KernelFunction | None,
        signature: ShapeSignature,
        source: KernelSource,
        module_name: str,
        entry: KernelFunction,
        load_function: Callable[[], KernelFunction] | None = None,
    ) -> None:
        if function is None and load_function is None:
            raise ValueError("Kernel: give the function or a way to load it")
        self.signature = signature
        self.source = source
        self.module_name = module_name
        self.entry = entry
        self._function = function
        self._load_function = load_function

    @property
    def function(self) -> KernelFunction:
        function = self._function
        if function is None:
            with _FUNCTION_LOCK:
                function = self._function
                if function is None:
                    assert self._load_function is not None
                    function = self._function = self._load_function()
        return function

    def __repr__(self) -> str:
        return f"Kernel({self.signature!r}, module={self.module_name!r})"

    @staticmethod
    def entry_of(function: KernelFunction) -> KernelFunction:
        """The compiled entry point of a dispatcher's one signature, without Numba's type
        dispatch (a measurable share of a small pullback's call).

        It checks dtypes but not layouts or writability, so callers use it only with arrays
        they made C-contiguous themselves (fresh allocations, ``contiguous``, ``ravel`` of
        those). Anything else (a CUDA kernel, the simulator) gets the function itself.
        """
        overloads = getattr(function, "overloads", None)
        if isinstance(overloads, dict) and len(overloads) == 1:
            compiled = getattr(next(iter(overloads.values())), "entry_point", None)
            if callable(compiled):
                entry: KernelFunction = compiled
                return entry
        return function


# Reentrant: loading one kernel's dispatcher may import a module that loads another (a JAX
# FFI handler's module looks up the kernel it calls), in the same thread.
_FUNCTION_LOCK = _thread.RLock()
