"""Kernel source generation: small templates in, readable Python modules out.

A rule family writes the body of a kernel with :class:`SourceWriter`; :func:`cpu_kernel`
wraps it in a module that Numba compiles eagerly for exactly one signature (through the reduced
pipeline of ``_kernel_pipeline``), with compilation disabled afterwards (so a call with other
types is a ``TypeError``, never a silent recompile). The text is what ``sr.explain`` prints.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from types import CodeType, FunctionType

import numpy as np

from . import _fork
from ._guards import allow_template_compile
from ._key import KernelSource, ShapeSignature
from ._memo import memoized
from ._private_python import sha256

_NUMBA_SCALARS = {
    "bool": "types.boolean",
    "int8": "types.int8",
    "int16": "types.int16",
    "int32": "types.int32",
    "int64": "types.int64",
    "uint8": "types.uint8",
    "uint16": "types.uint16",
    "uint32": "types.uint32",
    "uint64": "types.uint64",
    "float32": "types.float32",
    "float64": "types.float64",
    "complex64": "types.complex64",
    "complex128": "types.complex128",
}


def numba_scalar(dtype: np.dtype[np.generic] | str) -> str:
    """Source text of the Numba scalar type for a dtype (``types.float64``)."""
    return _NUMBA_SCALARS[np.dtype(dtype).name]


def readonly_array(dtype: np.dtype[np.generic] | str, ndim: int = 1) -> str:
    """A C-contiguous read-only array parameter; writable arrays convert to it for free."""
    return f"types.Array({numba_scalar(dtype)}, {ndim}, 'C', readonly=True)"


def writable_array(dtype: np.dtype[np.generic] | str, ndim: int = 1) -> str:
    return f"types.Array({numba_scalar(dtype)}, {ndim}, 'C')"


INDEX = "types.intp"


def conj(expression: str, dtype: np.dtype[np.generic] | str) -> str:
    """``expression.conjugate()`` for complex dtypes, the expression itself for real ones."""
    return f"({expression}).conjugate()" if np.dtype(dtype).kind == "c" else expression


class SourceWriter:
    """Lines with indentation, for kernel bodies."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._depth = 0

    def line(self, text: str = "") -> None:
        self._lines.append(("    " * self._depth + text) if text else "")

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


# Loop text shared by the families.

MAX_NESTED_BLOCKS = 20
"""Python refuses source with more than 20 statically nested blocks ("too many statically nested
blocks"): every limit on a kernel's loop nest comes from this one (:func:`nest_limit`)."""


def nest_limit(per_level: int = 1, reserved: int = 0) -> int:
    """The most levels a kernel's loop nest may have when each level opens ``per_level``
    nested blocks and the kernel's own loops and branches around them take ``reserved``."""
    return (MAX_NESTED_BLOCKS - reserved) // per_level


def tuple_text(parts: Sequence[str]) -> str:
    """The source of a tuple of ``parts`` (``(a,)`` for one)."""
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def least(a: str, b: str) -> str:
    """The source of ``min(a, b)`` for two integers, as a conditional expression.

    Numba types a call of the builtin ``min`` or ``max`` by compiling an overload of it, at
    every call site of every kernel: 9-10 ms each, more than half of ``kron``'s type inference
    (four sites, 77 of 137 ms) and a third of ``roll``'s. The conditional types as one
    comparison and lowers to the same ``select`` instruction. ``a`` and ``b`` are evaluated
    twice, so they must be side-effect free integer expressions (LLVM computes each once)."""
    return f"({a} if {a} <= {b} else {b})"


def greatest(a: str, b: str) -> str:
    """The source of ``max(a, b)`` for two integers (see :func:`least`)."""
    return f"({a} if {a} >= {b} else {b})"


def plus(base: str, term: str) -> str:
    """The source of ``base + term``, with a ``"0"`` on either side dropped."""
    if base == "0":
        return term
    return base if term == "0" else f"{base} + {term}"


def emit_copy(writer: SourceWriter, target: str, source: str, count: str, dst: str = "y", src: str = "x") -> None:
    """``dst[target:target + count] = src[source:source + count]`` as a loop with unsigned
    indices: Numba emits no negative-index wraparound for them, so LLVM turns the loop into
    vector copies (faster than slices of the arrays)."""
    writer.line(f"into = np.uintp({target})")
    writer.line(f"fro = np.uintp({source})")
    with writer.block(f"for t in range(np.uintp({count})):"):
        writer.line(f"{dst}[into + t] = {src}[fro + t]")


@memoized(maxsize=None)
def _pipeline_hash() -> str:
    """A digest of the kernel pipeline's source, part of every kernel's text (hence of its
    cache key): Numba's own cache does not see a change to a pipeline class it compiles with.
    Read from the file, not imported: that would start Numba."""
    with open(os.path.join(os.path.dirname(__file__), "_kernel_pipeline.py"), "rb") as handle:
        return sha256(handle.read()).hexdigest()[:16]


def cpu_kernel(
    signature: ShapeSignature,
    parameters: Sequence[tuple[str, str]],
    body: SourceWriter,
    description: str,
    *,
    reassociate: bool = False,
    numpy: bool = False,
    noalias: bool = False,
    prefetch: bool = False,
) -> KernelSource:
    """A module defining ``kernel(*parameters)`` compiled by Numba for that one signature.

    ``parameters`` pairs each name with its Numba type's source text. The kernel returns
    nothing: outputs are written into arrays the caller allocated. ``reassociate=True`` lets
    LLVM reorder and fuse floating-point sums (``fastmath={'reassoc', 'contract'}``, nothing
    else: NaN, inf and signed zeros keep their meaning), which is what lets a reduction loop
    vectorize; only kernels whose results need not be bit-exact should ask for it.
    ``numpy=True`` imports NumPy as ``np`` for the body (``np.empty`` of a scratch buffer).
    ``noalias=True`` compiles the array arguments ``noalias`` (``NoaliasKernelCompiler``): only
    for a kernel whose launches never pass a written buffer overlapping another argument, and
    where it measured faster (``_kernel_pipeline``). ``prefetch=True`` imports
    ``_kernel_pipeline.prefetch`` (a cache-line hint) for the body.

    The kernel compiles with ``stablerules._kernel_pipeline.KernelCompiler`` (Numba's nopython
    passes minus those that find nothing to rewrite in our templates; the optimized code is
    the default pipeline's) and without Numba's C-callback wrapper (``no_cfunc_wrapper``: it
    serves only a dispatcher passed as a first-class function into other jitted code, which
    no caller does; calls go through the CPython wrapper, or from other compiled code, the
    function itself). Both make a new signature's compile cheaper.
    """
    names = ", ".join(name for name, _ in parameters)
    types_text = ",\n    ".join(kind for _, kind in parameters)
    body_text = "".join("    " + line + "\n" if line else "\n" for line in body.text().splitlines())
    fastmath = ", fastmath={'reassoc', 'contract'}" if reassociate else ""
    imports = "import numpy as np\n" if numpy else ""
    compiler = "NoaliasKernelCompiler" if noalias else "KernelCompiler"
    text = (
        f'"""stablerules kernel: {description}\n\n'
        f"signature: {signature!r}\n"
        f"pipeline: stablerules._kernel_pipeline {_pipeline_hash()}\n"
        f'"""\n'
        f"{imports}"
        f"from numba import njit, types\n\n"
        f"from stablerules._kernel_pipeline import {compiler}{', prefetch' if prefetch else ''}\n\n"
        f"SIGNATURE = types.void(\n    {types_text},\n)\n\n\n"
        f"@njit(\n"
        f"    SIGNATURE, cache={{CACHE}}, nogil=True, boundscheck=False, error_model='numpy'{fastmath},\n"
        f"    no_cfunc_wrapper=True, pipeline_class={compiler},\n"
        f")\n"
        f"def kernel({names}):\n"
        f"{body_text}"
    )
    return KernelSource(text)


# ---------------------------------------------------------------------------------------------
# Call-path templates: small Python functions (launchers, one-function pullbacks) generated from
# a template whose text depends only on arities, compiled once per text per process
# ---------------------------------------------------------------------------------------------

_TEMPLATE_CODE: dict[tuple[str, str], CodeType] = {}
_TEMPLATE_LOCK = threading.Lock()


def _new_template_lock() -> None:
    global _TEMPLATE_LOCK
    _TEMPLATE_LOCK = threading.Lock()


_fork.renewed(_new_template_lock)
template_compiles = [0]
"""How many call-path templates this process has compiled (each text once): what the tests
assert on to show that a steady state compiles none."""


def template_function(text: str, name: str, filename: str, namespace: dict[str, object]) -> Callable[..., object]:
    """The function ``name`` that ``text`` defines, with ``namespace`` as its globals.

    ``text`` is compiled once per process (kept by its text); every later call with the same
    text only binds the cached code to the new ``namespace``, which is no code generation: a
    signature's plan builds its launchers this way, however many plans share a template.
    The one compile of a text is the scaffold's own, and ``no_compile()`` lets it through
    (see ``_guards.allow_template_compile``): it makes no kernel and is shared by every
    signature of that arity.
    """
    key = (text, name)
    code = _TEMPLATE_CODE.get(key)
    if code is None:
        with _TEMPLATE_LOCK:
            code = _TEMPLATE_CODE.get(key)
            if code is None:
                with allow_template_compile():
                    module = compile(text, filename, "exec")
                code = next(
                    constant for constant in module.co_consts if isinstance(constant, CodeType) and constant.co_name == name
                )
                _TEMPLATE_CODE[key] = code
                template_compiles[0] += 1
    function: Callable[..., object] = FunctionType(code, namespace, name)
    return function
