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

Code Numba generates for a kernel is LLVM-optimized exactly as before (the same codegen, the
same ``NUMBA_OPT``); what changes is only which no-op Numba IR passes run first.

A construct outside that list in a future template is not miscompiled silently: type
inference or lowering then fails with Numba's error, which the rule tests see.
"""

from __future__ import annotations

from typing import Any

from numba.core import compiler_machinery
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


_machinery: Any = compiler_machinery  # Numba is untyped


class KernelCompiler(CompilerBase):
    """Numba's nopython pipeline reduced to what a generated kernel needs (see the module)."""

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
        manager.add_pass(NativeLowering, "native lowering")
        manager.add_pass(NoPythonBackend, "nopython mode backend")
        manager.finalize()
        return [manager]
