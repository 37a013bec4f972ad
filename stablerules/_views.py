"""Plans of ops whose result is a view of their input and whose pullback is a view of the
cotangent: ``flip``, ``permute_dims``, ``transpose``, ``reshape``.

Such an op is a pair of index maps fixed by its signature: ``view`` (``x`` to ``y``) and its
adjoint ``unview`` (``dy`` to ``dx``), each an O(1) re-striding of an array (NumPy's or
CuPy's). No kernel is compiled: the plan is the signature's specialized implementation
(``kernel_entries`` is empty). A ``Fill`` cotangent (or tangent) maps to a ``Fill`` of the
other shape, since a constant re-indexed is the same constant; ``ZeroTangent`` stays.

Decisions: the forward returns the op's view of ``x`` itself (its dtype, byte order
included, as NumPy's); tangents have the native-order dtype (``out_dtype`` of the plan,
which is what cotangents are projected onto). A dense cotangent of that dtype is viewed in
whatever layout it comes (``any_layout``), so the tangent is a view of it; one of another
dtype is projected first (one copy). A read-only or stride-0 (``np.broadcast_to``) ``dy``
gives a copy instead of a view (``_arrays.shareable``): tangents are always dense and
writable, as the README promises, where NumPy's own view would be read-only.
"""

from __future__ import annotations

from ._arrays import ArrayLike, InputFacts, input_facts, shareable
from ._plan import DensePullback, Plan
from ._tangents import Cotangent, DenseCotangent, Fill


class ViewPlan(Plan):
    """A view op of one signature: subclasses give ``view`` and ``unview``."""

    def __init__(self, op: str, facts: InputFacts, out_shape: tuple[int, ...]) -> None:
        # The plan outlives the call: it keeps the facts, never the array.
        super().__init__(op, (facts,), out_shape=out_shape, any_layout=True)
        self.in_shape = facts.shape

    def view(self, array: ArrayLike) -> ArrayLike:
        """``y`` from an array of the input's shape."""
        raise NotImplementedError

    def unview(self, array: ArrayLike) -> ArrayLike:
        """``dx`` from an array of the output's shape (the adjoint map)."""
        raise NotImplementedError

    def forward(self, arrays: tuple[object, ...]) -> object:
        (x,) = arrays
        if type(x) is not type(self.like):  # a Python scalar (a 0-d array), or an ArraySpec (an error)
            x = input_facts(x, "x", self.op).need_array(self.op)
        return self.view(x)

    def pullback(self, saved: object) -> DensePullback:
        unview = self.unview

        def dense(dy: ArrayLike) -> tuple[object, ...]:
            dx = unview(dy)
            return (dx,) if shareable(dy) else (dx.copy(),)

        return dense

    def fill_pullback(self, saved: object, dense: DensePullback, fill: Fill) -> tuple[object, ...]:
        return (Fill(fill.value, self.in_shape, self.out_dtype),)

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        (tangent,) = tangents
        if isinstance(tangent, DenseCotangent):
            return self.view(tangent.array)
        if isinstance(tangent, Fill):
            return Fill(tangent.value, self.out_shape, self.out_dtype)
        return tangent


__all__ = ["ViewPlan"]
