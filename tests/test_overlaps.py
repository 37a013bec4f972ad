"""The session's check behind ``noalias`` kernels (``tests/overlaps.py``): it is installed,
it reads which arguments a kernel writes, and it refuses a call whose written buffer overlaps
another argument, so that a launcher passing such buffers fails the test that made it; and
the families that ask for ``noalias`` get it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import stablerules as sr
from stablerules import Val
from stablerules._cache import KernelCache
from tests.overlaps import written_arguments
from tests.test_cache import doubling_kernel


def test_the_signature_says_which_arguments_are_written() -> None:
    _, render = doubling_kernel("overlaps")
    assert written_arguments(render().text) == (False, True, False, False)  # x, out, lo, hi
    assert written_arguments("def handler(frame):\n    pass\n") is None


def test_every_cpu_kernel_call_of_the_session_is_checked() -> None:
    kernel = KernelCache().get(*doubling_kernel(uuid.uuid4().hex))
    buffer = np.arange(8.0)
    out = np.empty(4)
    kernel.entry(buffer[:4], out, 0, 4)  # apart: runs
    np.testing.assert_array_equal(out, 2 * np.arange(4.0))
    with pytest.raises(AssertionError, match="arguments 0 and 1 overlap"):
        kernel.entry(buffer[:4], buffer[3:7], 0, 4)  # the output's first element is the input's last
    np.testing.assert_array_equal(buffer, np.arange(8.0))  # refused before the kernel ran


@pytest.mark.parametrize(
    ("call", "noalias"),
    [
        (lambda: sr.broadcast_to.kernel_requests(np.empty((1, 4, 1, 5), np.float32), Val((3, 4, 6, 5))), True),
        (lambda: sr.take.kernel_requests(np.empty((10, 3)), np.arange(4), axis=Val(0)), True),
        (lambda: sr.sum.kernel_requests(np.empty((3, 4)), axis=Val(0)), False),
        (lambda: sr.roll.kernel_requests(np.empty((4, 6)), Val(1), axis=Val(1)), False),
    ],
    ids=["broadcast_to", "take", "sum", "roll"],
)
def test_noalias_is_asked_for_where_it_measured_faster(call: Callable[[], list[Any]], noalias: bool) -> None:
    """broadcast_to's reduction and take's gather and scatter-add compile ``noalias`` (faster
    there); sum's expansion and roll's copies do not (slower with it: bench/README.md)."""
    texts = [request.render().text for request in call() if request.signature.device == "cpu"]
    assert texts
    pipelines = {("pipeline_class=NoaliasKernelCompiler" in text) for text in texts if "pipeline_class=" in text}
    assert (True in pipelines) == noalias, pipelines
