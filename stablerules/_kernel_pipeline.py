"""The Numba pipeline the generated CPU kernels compile with: Numba's own passes, fewer of them.

A kernel module (``_codegen.cpu_kernel``) names :class:`KernelCompiler` as its
``pipeline_class``; nothing else uses it, and only a compile imports this module (it imports
Numba). The kernels are loops over 1-D arrays and integers written by our templates: no
closures, comprehensions, ``with`` blocks, ``literal_unroll``, ``literally``, exceptions,
array expressions, parfors or calls into other jitted functions of ours. So of Numba's default
nopython pipeline it runs the passes that every function needs (bytecode to IR, SSA, type
inference, legalization, lowering) and leaves out the ones that rewrite such constructs
(closure and inlinable-function inlining, constant and branch rewrites, array-expression
fusion, literal unrolling, the with-lifting and feature-validation passes): on our kernels
they find nothing to change and cost a few milliseconds of each compile.

LLVM then optimizes a kernel once instead of three times (:class:`_KernelLibrary`): Numba's
per-function pass and its O0 "cheap" module pass are left out, its full ``NUMBA_OPT`` module
pipeline (loop vectorization, reference-count pruning) and machine code generation are kept.
The loops vectorize as under Numba's default (the tests compare the vector code of each
family's kernels with it); with Numba's legacy reference-count pruning
(``NUMBA_LLVM_REFPRUNE_PASS=0``), which needs the cheap pass's inlining, kernels keep Numba's
own library.

A template may ask for ``noalias`` array arguments (``_codegen.cpu_kernel(noalias=True)``,
which names :class:`NoaliasKernelCompiler`): LLVM then drops its runtime overlap checks and
the second version of each loop they guard. Only the families where that measured faster use
it (``bench/README.md``, round 10: broadcast_to's reduction, take's gather and scatter-add);
elsewhere it made some loops slower. It is a promise of the launchers (every output and
private accumulator freshly allocated, no written buffer overlapping another argument), which
the test session checks on every CPU kernel call (``tests/overlaps.py``).

An XLA FFI handler of the JAX adapter compiles with :class:`HandlerCompiler`: the same passes,
and a library (:class:`_HandlerLibrary`) that optimizes the handler's own code (reading the call
frame, the buffer views, the extents) as it is added, then links the kernels it calls without
optimizing them again. Those kernels come optimized from their own library; until round 23 the
handler's full module pipeline ran over them once more, about half of the handler library's
LLVM time, and rewrote their already vectorized loops (fewer instructions, no measured change
in speed). A handler's compile took 153-165 ms, now 131-139 (the JAX U-Net's, three fresh
processes each; ``bench/README.md``, round 23). The handler calls its kernel either way; the
kernel's machine code is generated again in the handler's object (which so loads alone).

A construct outside that list in a future template is not miscompiled silently: type
inference or lowering then fails with Numba's error, which the rule tests see.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import codegen, compiler_machinery, config
from numba.core.compiler import CompilerBase
from numba.core.typed_passes import (
    AnnotateTypes,
    IRLegalization,
    NativeLowering,
    NoPythonBackend,
    NopythonTypeInference,
    PreLowerStripPhis,
)
from numba.core.untyped_passes import FixupArgs, IRProcessing, ReconstructSSA, TranslateByteCode
from numba.extending import intrinsic


_machinery: Any = compiler_machinery  # Numba is untyped
_config: Any = config
_types: Any = types
_JITCodeLibrary: Any = codegen.JITCodeLibrary
_LoweringPass: Any = compiler_machinery.LoweringPass


LEAN_LIBRARY = True
"""Whether kernels compile with :class:`_KernelLibrary` (the tests compare with Numba's own)."""


class _KernelLibrary(_JITCodeLibrary):  # type: ignore[misc]  # Numba is untyped
    """Numba's JIT code library with one LLVM optimization of the kernel instead of three.

    Numba optimizes each function of a library at ``NUMBA_OPT`` as it is added, then the
    linked module once at O0 (inlining, so its reference-count pruning sees more) and once
    at ``NUMBA_OPT``. The last run is the full pipeline (loop vectorization included), which
    redoes what the first two did: for a kernel (a loop nest and its CPython wrapper) they
    only cost time. So a kernel's library skips them; the full module optimization, the
    reference-count pruning and the machine code generation are Numba's own."""

    def _optimize_functions(self, ll_module: Any) -> None:
        ll_module.data_layout = self._codegen._data_layout

    def _optimize_final_module(self) -> None:
        manager, builder = self._codegen._module_pass_manager()
        with self._recorded_timings.record("Module passes (full optimization)", builder):
            manager.run(self._final_module, builder)


class _HandlerLibrary(_KernelLibrary):
    """An FFI handler's library: each module added (the handler, its C wrapper) runs the full
    module pipeline alone, before anything is linked; the finished module (those and the
    kernels the handler calls, each already optimized by its own library) runs none."""

    def _optimize_functions(self, ll_module: Any) -> None:
        ll_module.data_layout = self._codegen._data_layout
        manager, builder = self._codegen._module_pass_manager()
        with self._recorded_timings.record("Module passes (the handler's own code)", builder):
            manager.run(ll_module, builder)

    def _optimize_final_module(self) -> None:
        pass


@_machinery.register_pass(mutates_CFG=False, analysis_only=False)
class KernelLibrary(_LoweringPass):  # type: ignore[misc]
    """Gives the function a :class:`_KernelLibrary` (``NativeLowering`` uses the state's library
    when there is one, and otherwise makes Numba's default)."""

    _name = "stablerules_kernel_library"
    library: Any = _KernelLibrary

    def __init__(self) -> None:
        _LoweringPass.__init__(self)

    def run_pass(self, state: Any) -> bool:
        if not LEAN_LIBRARY or not _config.LLVM_REFPRUNE_PASS:
            return False  # the legacy pruning needs the O0 inlining: Numba's own library
        if state.library is None:
            state.library = self.library(state.targetctx.codegen(), state.func_id.func_qualname)
            state.library.enable_object_caching()
        return True


@_machinery.register_pass(mutates_CFG=False, analysis_only=False)
class HandlerLibrary(KernelLibrary):
    """Gives the function a :class:`_HandlerLibrary`."""

    _name = "stablerules_handler_library"
    library = _HandlerLibrary


@_machinery.register_pass(mutates_CFG=False, analysis_only=False)
class NoaliasArguments(_LoweringPass):  # type: ignore[misc]
    """Marks the function's pointer arguments ``noalias`` (Numba's ``flags.noalias``, which
    ``NativeLowering`` writes into the function descriptor)."""

    _name = "stablerules_noalias_arguments"

    def __init__(self) -> None:
        _LoweringPass.__init__(self)

    def run_pass(self, state: Any) -> bool:
        state.flags.noalias = True
        return True


class KernelCompiler(CompilerBase):
    """Numba's nopython pipeline reduced to what a generated kernel needs (see the module)."""

    noalias = False
    library: Any = KernelLibrary  # the pass that gives the function its code library

    def define_pipelines(self) -> list[Any]:
        manager = _machinery.PassManager("stablerules_kernel")
        manager.add_pass(TranslateByteCode, "analyzing bytecode")
        manager.add_pass(FixupArgs, "fix up args")
        manager.add_pass(IRProcessing, "processing IR")
        manager.add_pass(ReconstructSSA, "ssa")
        manager.add_pass(NopythonTypeInference, "nopython frontend")
        manager.add_pass(PreLowerStripPhis, "remove phis nodes")
        manager.add_pass(IRLegalization, "ensure IR is legal prior to lowering")
        manager.add_pass(AnnotateTypes, "annotate types")
        manager.add_pass(self.library, "a kernel's code library")
        if self.noalias:
            manager.add_pass(NoaliasArguments, "noalias arguments")
        manager.add_pass(NativeLowering, "native lowering")
        manager.add_pass(NoPythonBackend, "nopython mode backend")
        manager.finalize()
        return [manager]


class HandlerCompiler(KernelCompiler):
    """:class:`KernelCompiler` for an XLA FFI handler: its kernels linked as they come (see the
    module)."""

    library = HandlerLibrary


class NoaliasKernelCompiler(KernelCompiler):
    """:class:`KernelCompiler` with ``noalias`` pointer arguments (see the module)."""

    noalias = True


# --- what kernels call besides NumPy -------------------------------------------------------------


@intrinsic
def prefetch(typingctx: Any, array: Any, index: Any) -> Any:
    """``prefetch(a, i)``: ask the CPU to bring the cache line of ``a[i]`` (``a`` a 1-D C
    array) into every cache level, for a read soon (``llvm.prefetch``: a hint, never a fault,
    whatever the address; nothing on a target without one). The deterministic scatter-adds
    read ``dy``'s rows in bucket order, a random walk the hardware prefetchers do not follow;
    their kernels ask for the rows a few terms ahead."""
    del typingctx

    def codegen(context: Any, builder: Any, signature: Any, arguments: Any) -> Any:
        made = context.make_array(signature.args[0])(context, builder, arguments[0])
        byte = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        module = builder.module
        hint = module.globals.get("llvm.prefetch.p0") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), [byte, int32, int32, int32]), "llvm.prefetch.p0"
        )
        at = builder.bitcast(builder.gep(made.data, [arguments[1]]), byte)
        builder.call(hint, [at, int32(0), int32(3), int32(1)])  # read, keep in all levels, data
        return context.get_dummy_value()

    return _types.none(array, index), codegen
