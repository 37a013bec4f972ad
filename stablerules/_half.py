"""The 16-bit floats: ``np.float16`` and ``ml_dtypes.bfloat16`` in every op (SPEC section 15).

Numba has no float16 or bfloat16 type on the CPU, so no kernel is generated for them. Instead
an op's plan for a signature with a 16-bit argument is a :class:`HalfPlan` wrapping plans of
dtypes the kernels have, built by the scaffold's ``lookup`` (``_rule._plan_of``) in place of
the op's own (an adapter calling ``op.plan`` itself gets the op's own, which refuses them):

- **Detection.** A 16-bit argument is a ``float16`` array (any byte order) or a 2-byte array
  whose dtype is named ``bfloat16`` (ml_dtypes' type has ``kind == 'V'``, so it is found by its
  name). ``ml_dtypes`` is never imported here: an array of that dtype brings it along, with
  the casts it registers with NumPy (used where the kernels below are not).
- **Results have NumPy's dtypes.** The ops that join their arguments (the concatenate family,
  ``kron``) give ``np.result_type`` of them (``float16`` with ``int8`` is ``float16``, with
  ``int16`` ``float32``, with ``bfloat16`` ``float32``; ``cat``'s weak Python scalar keeps the
  format, ``kron``'s is an array to NumPy, so ``kron`` of ``float16`` and ``2`` is ``float64``);
  every other op gives its first argument's dtype (``np.sum`` and ``np.mean`` of ``float16``
  are ``float16``). Tangents have each primal's dtype.
- **Data movement moves bits.** The forward of every op but ``sum``, ``mean``, ``kron`` and
  ``index_add``, when every data argument has the same 16-bit dtype (index and count arguments
  may be integers), runs that op's own plan on ``uint16`` views of the arguments and views the
  result back: bit-exact, signalling NaNs and NaN payloads included, equal to NumPy's (pad's
  ``constant_values`` is cast to the result's dtype first, as ``np.pad`` casts it). Mixed
  dtypes and ``cat``'s Python scalars go the float32 way below (values exact there too).
- **The adding kernels read and write the 16-bit bits.** Where the float32 plan has one
  (``half_pullback``: take, take_along_axis, repeat/tile, broadcast_to, sum and mean, kron;
  ``half_forward``: index_add onto ``x`` with ``values`` of the same dtype), the CPU kernel
  reads the 16-bit cotangent (or operands) as ``uint16``, widens each element in registers,
  sums in float32 (broadcast_to and kron: float64, as their float32 kernels), and writes the
  result rounded once to the format, round-to-nearest-even, NaN kept (quiet) and infinities
  kept (``_units.half_helpers`` puts the two conversions into the kernel's module). No float32
  copy of the cotangent is made; the sums are the float32 kernels' in their order (the
  scatter-adds: each row's terms in increasing position, from a stable counting sort of the
  positions; repeat: the same pairwise expressions), so the bits are the float32 route's and
  do not depend on the thread count (broadcast_to's reduction is reassociated, as its float32
  kernel is). Where ``dx`` is visited more than once (repeat's accumulating nests) or summed
  in float64 (broadcast_to, kron), a float32 or float64 ``dx`` of ``x``'s size is rounded
  after (float64 through float32, as the float32 route rounds). sum's pullback copies ``dy``'s
  bits; mean's divides each widened element in float32 and rounds it.
- **Everything else runs in float32.** The 16-bit arguments are converted to float32 (exact),
  the op's float32 plan runs, and each result is rounded once to its dtype, to nearest even (NaN
  and infinities kept): the forwards that add (``kron``; ``index_add`` with mixed dtypes), mixed
  dtypes, arrays in other layouts or of other array types, the pullbacks the kernels above do
  not cover (``index_add``'s, a one-element ``sum`` cotangent, the CUDA atomics of
  ``take(deterministic=Val(False))``). So every pullback that adds accumulates at least in
  float32 and rounds once, as deterministically as the float32 kernels are (the same bits for
  every thread count: they fix the order of their sums). The pullbacks of pure data movement are
  exact on every value (a 16-bit value round-trips through float32), a signalling NaN coming
  back quiet. ``kron``'s forward is exact too: the product of two 11-bit (or 8-bit) significands
  fits float32's 24, so the one rounding is the one NumPy and ml_dtypes make (they multiply
  16-bit values in float32 and round the product).
- **The conversions of that route are kernels on the bits** (CPU): float32 to 16-bit rounds
  to nearest even from the float32 bits (overflow to infinity, float16 subnormals by an
  integer shift, a NaN kept with its sign and leading payload, made quiet); bfloat16 to
  float32 is a shift; float16 to float32 reads a 65536-entry table made once with NumPy's own
  cast. Each equals NumPy's (ml_dtypes') cast bit for bit on every non-NaN value and runs
  split across threads like any kernel: NumPy's casts for these formats are scalar loops,
  several times slower. On the CUDA target they are CUDA kernels with the same bit operations
  (``_units.cuda_half_helpers``), one thread per element.
- **CUDA.** The same on the CUDA target: the adding kernels above (take's, take_along_axis's
  and index_add's deterministic scatter-adds, repeat/tile, broadcast_to, sum and mean, kron)
  have CUDA variants that read the 16-bit bits and widen and narrow in registers
  (``_units.cuda_half_helpers``: the CPU kernels' conversions as device functions), each
  result element summed by its own thread (kron: its block's fixed reduction tree) in the
  float32 kernel's order and precision and rounded in the kernel: the float32 route's bits,
  the same on every run. CuPy has ``float16`` but no ``bfloat16`` dtype (v13): bfloat16
  reaches the CUDA kernels only as NumPy (ml_dtypes) arrays under ``STABLERULES_DEVICE=cuda``
  (the simulator in CI; on a GPU Numba copies such arrays to the device and back).
- **sum and mean forwards are NumPy's own** (``xp.sum``/``xp.mean`` on the 16-bit array): a
  static choice per dtype, so the forward equals NumPy's bit for bit. NumPy's own summation of
  these formats rounds to the format at each step across rows (float16 along an outer axis;
  bfloat16, whose additions are ml_dtypes' ufuncs, everywhere), which no single float32
  accumulation reproduces. Their pullbacks (broadcast copies) are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _pool
from ._arrays import ArraySpec, array_like, array_namespace, device_of, is_array, kernel_target
from ._key import Kernel, KernelSource, ShapeSignature
from ._codegen import INDEX, SourceWriter, cpu_kernel, readonly_array, writable_array
from ._launch import cpu_launch, cuda_launch
from ._memo import cached_property, memoized
from ._op import KernelRequest
from ._plan import KernelPullback, Plan
from ._tangents import Cotangent, DenseCotangent, Fill
from ._schema import OPS, OpSchema

_FLOAT32: np.dtype[np.generic] = np.dtype(np.float32)
_UINT16: np.dtype[np.generic] = np.dtype(np.uint16)

def _array_roles(op: OpSchema) -> list[str]:
    """The roles of an op's non-static parameters, in call order (its ``arrays`` tuple)."""
    return [param.role for param in op.params if param.role != "static"]


# Read from the schema (issue 34: no per-op table here), for these facts of each op:
# - joining: the result dtype is the promotion of all its array arguments (a sequence of
#   arrays, or a multilinear op: kron);
_JOINING = frozenset(
    op.name for op in OPS if op.kind == "multilinear" or {"arrays", "varargs"} & set(_array_roles(op))
)
# - a NumPy forward: a reduction (sum, mean: their dtype rules), NumPy's own on 16-bit input;
_NUMPY_FORWARD = frozenset(op.name for op in OPS if any(sig.dtype in ("sum", "mean") for sig in op.signatures))
# - the forward adds (no uint16 bits route): a reduction, a multilinear op, or one that adds
#   array values at integer data (index_add: a data parameter and two arrays);
_ADDING_FORWARD = _NUMPY_FORWARD | frozenset(
    op.name
    for op in OPS
    if op.kind == "multilinear" or ("data" in _array_roles(op) and _array_roles(op).count("array") > 1)
)
# - the positions (in its arrays) of indices or counts (integer data, moved as they are);
_INDEX_POSITIONS: dict[str, frozenset[int]] = {
    op.name: frozenset(i for i, role in enumerate(_array_roles(op)) if role == "data")
    for op in OPS
    if "data" in _array_roles(op)
}
# - the ops whose plans save only their index or count argument (``save`` reads nothing else);
_SAVES_INDICES = frozenset(_INDEX_POSITIONS)
# - the position of a fill value (pad's ``constant_values``): on the bits route it is cast to
#   the result's dtype first, as ``np.pad`` casts it, and moved as bits too.
_CONSTANT_POSITIONS: dict[str, int] = {
    op.name: _array_roles(op).index("value") for op in OPS if "value" in _array_roles(op)
}


def is_half(dtype: np.dtype[Any]) -> bool:
    """``float16`` (any byte order) or ml_dtypes' ``bfloat16``. Its scalar type's name, not
    ``dtype.name`` (0.57 us for ml_dtypes' type, which NumPy builds a string for each time;
    0.05 us): every 16-bit pullback asks several times."""
    return dtype.itemsize == 2 and (dtype.kind == "f" or dtype.type.__name__ == "bfloat16")


def _dtype_of(value: object) -> np.dtype[Any] | None:
    if isinstance(value, ArraySpec) or is_array(value):
        dtype: np.dtype[Any] = value.dtype
        return dtype
    return None


def half_arguments(arrays: tuple[object, ...]) -> tuple[object, ...] | None:
    """``arrays`` with 16-bit array-likes read as arrays, or ``None`` when none is 16-bit (the
    op's own plan then runs). Called only when a plan is built."""
    found = False
    read: list[object] = []
    for index, value in enumerate(arrays):
        if isinstance(value, (np.generic, list, tuple)):
            try:
                converted = array_like(value, f"arrays[{index}]")
            except (TypeError, ValueError):
                converted = value
            if is_array(converted) and is_half(converted.dtype):
                value = converted
        dtype = _dtype_of(value)
        if dtype is not None and is_half(dtype):
            found = True
        read.append(value)
    return tuple(read) if found else None


def _spec(value: object, dtype: np.dtype[Any]) -> ArraySpec:
    shape = tuple(value.shape)  # type: ignore[attr-defined]
    where = value.device if isinstance(value, ArraySpec) else device_of(value)
    return ArraySpec(shape, dtype, where)


def _native(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def half_plan(op: Any, plan: Callable[..., Plan], arrays: tuple[object, ...], statics: tuple[object, ...]) -> Plan:
    """The plan of a signature with a 16-bit argument (``arrays`` from :func:`half_arguments`):
    the op's ``plan`` (unwrapped) built for float32 stand-ins, wrapped."""
    halves = tuple(_dtype_of(value) is not None and is_half(_dtype_of(value)) for value in arrays)  # type: ignore[arg-type]
    wide = tuple(_spec(value, _FLOAT32) if half else value for value, half in zip(arrays, halves))
    inner = plan(op, wide, statics)
    name = op.name
    originals = tuple(
        _native(_dtype_of(value)) if half else None  # type: ignore[arg-type]
        for value, half in zip(arrays, halves)
    )
    # The result dtype: NumPy's for these arguments.
    out_dtype = inner.out_dtype
    if inner.out_dtype.kind in "fc" and inner.out_dtype.itemsize <= 8:
        if name in _JOINING:
            # np.kron reads a Python scalar as an array (``asanyarray``: an int is int64, not
            # weak), so kron of float16 and 2 is float64 there, as kron of float32 and 2 is
            joined = [
                _dtype_of(value) if _dtype_of(value) is not None
                else np.asarray(value).dtype if name == "kron" and type(value) in (bool, int, float, complex)
                else value
                for value in arrays
                if value is not None
            ]
            out_dtype = _native(np.result_type(*joined))  # type: ignore[arg-type]
        elif halves and halves[0]:
            out_dtype = originals[0]  # type: ignore[assignment]
    # The bits route: every data argument of one 16-bit dtype, the others integer indices.
    index_positions = _INDEX_POSITIONS.get(name, frozenset())
    first = next(dtype for dtype in originals if dtype is not None)
    bits = name not in _ADDING_FORWARD and out_dtype == first
    constant = _CONSTANT_POSITIONS.get(name)
    for position, (value, half) in enumerate(zip(arrays, halves)):
        if value is None or half and originals[position] == first or position == constant:
            continue
        dtype = _dtype_of(value)
        if position in index_positions and dtype is not None and dtype.kind in "biu":
            continue
        bits = False
    bit_specs = None
    if bits:
        bit_specs = tuple(
            _spec(value, _UINT16 if value.dtype.isnative else _UINT16.newbyteorder())  # type: ignore[attr-defined]
            if half
            else ArraySpec(np.shape(value), _UINT16)  # type: ignore[call-overload]
            if position == constant and value is not None
            else value
            for position, (value, half) in enumerate(zip(arrays, halves))
        )
    cls = HalfSavingPlan if inner.saves_primals else HalfPlan
    return cls(op, plan, statics, inner, halves, originals, out_dtype, bit_specs)


# --- the conversions: CPU kernels on the bits (module docstring) ---------------------------

_NARROW_BODY = {
    "bfloat16": [
        "base = np.uintp(lo)",
        "for t in range(np.uintp(hi - lo)):",
        "    i = base + t",
        "    b = x[i]",
        "    if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):",
        "        y[i] = np.uint16((b >> np.uint32(16)) | np.uint32(0x40))",
        "    else:",
        "        y[i] = np.uint16((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))",
    ],
    "float16": [
        "base = np.uintp(lo)",
        "for t in range(np.uintp(hi - lo)):",
        "    i = base + t",
        "    b = x[i]",
        "    sign = np.uint32((b >> np.uint32(16)) & np.uint32(0x8000))",
        "    a = b & np.uint32(0x7FFFFFFF)",
        "    if a > np.uint32(0x7F800000):  # NaN: quiet, sign and leading payload kept",
        "        o = np.uint32(0x7E00) | ((a >> np.uint32(13)) & np.uint32(0x3FF))",
        "    elif a >= np.uint32(0x477FF000):  # rounds past 65504: infinity",
        "        o = np.uint32(0x7C00)",
        "    elif a >= np.uint32(0x38800000):  # a normal float16: add the exponent bias, round",
        "        o = (a - np.uint32(0x38000000) + np.uint32(0xFFF) + ((a >> np.uint32(13)) & np.uint32(1))) >> np.uint32(13)",
        "    else:  # subnormal (or zero): the significand shifted by 126 - exponent, rounded",
        "        e = np.int64(a >> np.uint32(23))",
        "        shift = 126 - e",
        "        if shift > 24 or e == 0:",
        "            o = np.uint32(0)",
        "        else:",
        "            m = np.uint32((a & np.uint32(0x7FFFFF)) | np.uint32(0x800000))",
        "            q = m >> np.uint32(shift)",
        "            r = m & ((np.uint32(1) << np.uint32(shift)) - np.uint32(1))",
        "            half = np.uint32(1) << np.uint32(shift - 1)",
        "            if r > half or (r == half and (q & np.uint32(1)) != np.uint32(0)):",
        "                q += np.uint32(1)",
        "            o = q",
        "    y[i] = np.uint16(o | sign)",
    ],
}


def _render_narrow(signature: ShapeSignature, format: str) -> KernelSource:
    writer = SourceWriter()
    writer.line(f"# y[lo:hi] = x[lo:hi] (float32 bits) rounded to {format} bits, to nearest even")
    for line in _NARROW_BODY[format]:
        writer.line(line)
    parameters = [("x", readonly_array("uint32")), ("y", writable_array("uint16")), ("lo", INDEX), ("hi", INDEX)]
    return cpu_kernel(signature, parameters, writer, f"float32 -> {format}, round to nearest even", numpy=True)


def _render_widen(signature: ShapeSignature, format: str) -> KernelSource:
    writer = SourceWriter()
    if format == "bfloat16":
        writer.line("# y[lo:hi] = x[lo:hi] (bfloat16 bits) as float32 bits: the upper half")
        writer.line("base = np.uintp(lo)  # unsigned indices: no wraparound check, a vector loop")
        with writer.block("for t in range(np.uintp(hi - lo)):"):
            writer.line("y[base + t] = np.uint32(x[base + t]) << np.uint32(16)")
        parameters = [("x", readonly_array("uint16")), ("y", writable_array("uint32")), ("table", readonly_array("float32"))]
    else:
        writer.line("# y[lo:hi] = x[lo:hi] (float16 bits) as float32, read from NumPy's conversion table")
        writer.line("base = np.uintp(lo)")
        with writer.block("for t in range(np.uintp(hi - lo)):"):
            writer.line("y[base + t] = table[x[base + t]]")
        parameters = [("x", readonly_array("uint16")), ("y", writable_array("float32")), ("table", readonly_array("float32"))]
    parameters += [("lo", INDEX), ("hi", INDEX)]
    return cpu_kernel(signature, parameters, writer, f"{format} -> float32", numpy=True)


def _render_cuda(signature: ShapeSignature, format: str) -> KernelSource:
    """The CUDA conversion (``signature.kind``: ``widen`` or ``narrow``), one thread per
    element, with ``_units.cuda_half_helpers``' device functions (the CPU kernels' bit
    operations)."""
    from ._cuda import cuda_array_type, cuda_kernel  # noqa: PLC0415 - only a CUDA plan renders these
    from ._units import cuda_half_helpers  # noqa: PLC0415

    writer = SourceWriter()
    if signature.kind == "widen":
        writer.line(f"y[t] = widen(x[t])  # {format} bits -> float32, exact")
        parameters = [("x", cuda_array_type("uint16")), ("y", cuda_array_type("float32"))]
    else:
        writer.line(f"y[t] = narrow(x[t])  # float32 -> {format} bits, round to nearest even")
        parameters = [("x", cuda_array_type("float32")), ("y", cuda_array_type("uint16"))]
    parameters.append(("total", INDEX))
    source = cuda_kernel(signature, parameters, writer, f"{signature.kind} {format} on the bits")
    return KernelSource(cuda_half_helpers(source.text, format), source.entry)


def _request(kind: str, format: str, target: str = "cpu") -> KernelRequest:
    signature = ShapeSignature("half", kind, (), (format,), (1,), target)
    if target == "cuda":
        return KernelRequest(signature, lambda: _render_cuda(signature, format))
    render = _render_narrow if kind == "narrow" else _render_widen
    return KernelRequest(signature, lambda: render(signature, format))


@memoized(maxsize=None)
def _table() -> npt.NDArray[np.float32]:
    """Every float16 value as float32 (NumPy's cast), indexed by its bits."""
    table: npt.NDArray[np.float32] = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    return table


@memoized(maxsize=None)
def _kernel(kind: str, format: str, target: str = "cpu") -> Kernel:
    return _request(kind, format, target).get()


# Where a conversion runs: True (a CPU kernel for a NumPy array), "cuda" (a CUDA kernel: CuPy
# arrays, or NumPy ones under STABLERULES_DEVICE=cuda), False (``astype``).
Kernels = bool | str


def _cuda_ready(array: Any) -> bool:
    return is_array(array) and array.dtype.isnative and array.size > 0


def _widen_cuda(array: Any) -> Any:
    if not array.flags.c_contiguous:
        array = array_namespace(array).ascontiguousarray(array)
    out = array_namespace(array).empty(array.shape, dtype=_FLOAT32)
    size = array.size
    cuda_launch(_kernel("widen", array.dtype.name, "cuda"), size, array.reshape(-1).view(_UINT16), out.reshape(-1), size)
    return out


def _narrow_cuda(array: Any, dtype: np.dtype[Any]) -> Any:
    if not array.flags.c_contiguous:
        array = array_namespace(array).ascontiguousarray(array)
    out = array_namespace(array).empty(array.shape, dtype=dtype)
    size = array.size
    cuda_launch(_kernel("narrow", dtype.name, "cuda"), size, array.reshape(-1), out.reshape(-1).view(_UINT16), size)
    return out


def _cpu_ready(array: Any) -> bool:
    return type(array) is np.ndarray and array.dtype.isnative and array.size > 0


def widen(array: Any, kernels: Kernels = True) -> Any:
    """A 16-bit array as float32 (exact); a C-ordered NumPy array through a kernel when
    ``kernels`` (the plan's target is the CPU), any array through a CUDA kernel when
    ``kernels == "cuda"``."""
    if kernels == "cuda":
        return _widen_cuda(array) if _cuda_ready(array) and is_half(array.dtype) else array.astype(_FLOAT32)
    if not kernels or not _cpu_ready(array) or not array.flags.c_contiguous:
        return array.astype(_FLOAT32)
    format = array.dtype.type.__name__  # dtype.name, without its 0.57 us (is_half)
    out = _pool.empty(array.shape, _FLOAT32)
    size = array.size
    target = out.reshape(-1).view(np.uint32) if format == "bfloat16" else out.reshape(-1)
    cpu_launch(_kernel("widen", format), array.reshape(-1).view(np.uint16), target, _table(), extent=size, work=size)
    return out


def narrow(array: Any, dtype: np.dtype[Any], kernels: Kernels = True) -> Any:
    """A float32 array rounded once to the 16-bit ``dtype`` (nearest even); through a CUDA
    kernel when ``kernels == "cuda"``."""
    if kernels == "cuda":
        ready = _cuda_ready(array) and array.dtype == _FLOAT32 and is_half(dtype) and dtype.isnative
        return _narrow_cuda(array, dtype) if ready else array.astype(dtype)
    if not kernels or not _cpu_ready(array) or array.dtype != _FLOAT32 or not is_half(dtype) or not dtype.isnative:
        return array.astype(dtype)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    out = _pool.empty(array.shape, dtype)
    size = array.size
    # one launch with this call's arrays (a launcher is built for a plan's repeated calls)
    cpu_launch(_kernel("narrow", dtype.type.__name__), array.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16), extent=size, work=size)
    return out


def _round(value: object, dtype: np.dtype[Any], kernels: Kernels) -> object:
    """A float32 result rounded once to ``dtype`` (an array, a ``Fill``, a tuple of them)."""
    if isinstance(value, (tuple, list)):
        return type(value)(_round(item, dtype, kernels) for item in value)
    if isinstance(value, Fill):
        return Fill(value.value, value.shape, dtype)
    if is_array(value):
        if value.dtype == dtype:
            return value
        return narrow(value, dtype, kernels) if is_half(dtype) else value.astype(dtype)
    return value


def _view(value: object, dtype: np.dtype[Any]) -> object:
    """A uint16 result (or a tuple of them) seen as ``dtype``, byte order kept."""
    if isinstance(value, (tuple, list)):
        return type(value)(_view(item, dtype) for item in value)
    if is_array(value):
        return value.view(dtype if value.dtype.isnative else dtype.newbyteorder())
    return value


def _widened(array: Any, dtype: np.dtype[Any], kernels: Kernels) -> Any:
    if array.dtype == dtype:
        return array
    return widen(array, kernels) if dtype == _FLOAT32 and is_half(array.dtype) else array.astype(dtype)


def _widen(cotangent: Cotangent, dtype: np.dtype[Any], kernels: Kernels) -> Cotangent:
    """A prepared 16-bit cotangent or tangent in the float32 plan's ``dtype``."""
    if isinstance(cotangent, DenseCotangent):
        return DenseCotangent(_widened(cotangent.array, dtype, kernels))
    if isinstance(cotangent, Fill):
        return Fill(cotangent.value, cotangent.shape, dtype)
    return cotangent


class HalfPlan(Plan):
    """A signature with a 16-bit argument: the op's float32 plan (and, for data movement, its
    uint16 plan) behind the scaffold's fields of the 16-bit signature (module docstring)."""

    def __init__(
        self,
        op: Any,
        plan: Callable[..., Plan],
        statics: tuple[object, ...],
        inner: Plan,
        halves: tuple[bool, ...],
        originals: tuple[np.dtype[Any] | None, ...],
        out_dtype: np.dtype[Any],
        bit_specs: tuple[object, ...] | None,
    ) -> None:
        # Plan's fields from the float32 plan's (no InputFacts of a 16-bit dtype exist: the
        # constructor gets none, every field it would read from them is given).
        super().__init__(
            inner.op,
            (),
            out_shape=inner.out_shape,
            out_dtype=out_dtype,
            output_shapes=inner.output_shapes,
            differentiable=inner.differentiable,
            input_tangents=inner.input_tangents,
            input_dtypes=tuple(
                original if original is not None else dtype for original, dtype in zip(originals, inner.input_dtypes)
            ),
            namespace=inner.namespace,
            kernel_entries=inner.kernel_entries - {"forward"} if op.name in _NUMPY_FORWARD else inner.kernel_entries,
        )
        self.input_shapes = inner.input_shapes
        # The pullback reads what the float32 plan's reads (take's indices, not x): the same
        # ArraySpecs are allowed in sr.pullback.
        self.saved_inputs = inner.saved_inputs
        self.inner = inner
        self.halves = halves
        self._op = op
        self._plan = plan
        self._statics = statics
        self._bit_specs = bit_specs
        self._numpy_forward = op.name in _NUMPY_FORWARD
        self._constant = _CONSTANT_POSITIONS.get(op.name)
        # The conversions run as CPU kernels where the float32 plan runs on the CPU.
        self.kernels = self.namespace is np and kernel_target("cpu") == "cpu"
        # The float32 plan's target is CUDA (CuPy arrays, or NumPy ones under
        # STABLERULES_DEVICE=cuda): its ``half_pullback`` where it has one reads the bits in a
        # CUDA kernel, and the conversions around it are CUDA kernels.
        self.cuda = kernel_target("cpu" if self.namespace is np else "cuda") == "cuda"
        # The conversions around the float32 plan: CPU kernels, CUDA kernels, or astype.
        self.converts: Kernels = True if self.kernels else "cuda" if self.cuda else False

    @cached_property
    def fused_forward(self) -> Callable[[tuple[object, ...], bool], tuple[Any, Any]] | None:
        """The float32 plan's own 16-bit forward (``half_forward``: index_add's accumulation
        on the bits, summing in float32), where every data argument has the result's 16-bit
        dtype and the float32 plan runs on the CPU or CUDA."""
        fused = getattr(self.inner, "half_forward", None)
        dtype = self.out_dtype
        if fused is None or not (self.kernels or self.cuda) or not dtype.isnative:
            return None
        if any(half and original != dtype for half, original in zip(self.halves, self.input_dtypes)):
            return None
        if sum(self.halves) != len(self.halves) - 1:  # x and values 16-bit, the indices not
            return None
        made: Callable[[tuple[object, ...], bool], tuple[Any, Any]] | None = fused(dtype)
        return made

    def _fused_ready(self, arrays: tuple[object, ...]) -> bool:
        ready = _cuda_ready if self.cuda else _cpu_ready
        return all(ready(value) or not half for value, half in zip(arrays, self.halves))

    @cached_property
    def bits(self) -> Plan | None:
        """The op's plan for uint16 views (data movement), built on first use."""
        if self._bit_specs is None:
            return None
        return self._plan(self._op, self._bit_specs, self._statics)

    def requests(self) -> list[Any]:
        bits = self.bits
        converts = []
        if self.converts:
            formats = sorted({dtype.name for dtype in (*self.input_dtypes, self.out_dtype) if is_half(dtype)})
            target = "cuda" if self.converts == "cuda" else "cpu"
            converts = [_request(kind, format, target) for format in formats for kind in ("widen", "narrow")]
        fused = []
        if (self.kernels or self.cuda) and self.differentiable and self.output_shapes is None and self.halves[0]:
            half_requests = getattr(self.inner, "half_requests", None)
            if half_requests is not None and self.input_dtypes[0] == self.out_dtype and self.out_dtype.isnative:
                fused = half_requests(self.out_dtype)
        forward_requests = getattr(self.inner, "half_forward_requests", None)
        if (self.kernels or self.cuda) and forward_requests is not None and self.fused_forward is not None:
            fused = fused + forward_requests(self.out_dtype)
        return self.inner.requests() + (bits.requests() if bits is not None else []) + converts + fused

    def _wide(self, arrays: tuple[object, ...]) -> tuple[object, ...]:
        kernels = self.converts
        return tuple(widen(value, kernels) if half else value for value, half in zip(arrays, self.halves))

    def forward(self, arrays: tuple[object, ...]) -> object:
        bits = self.bits
        if bits is not None:
            constant, out_dtype = self._constant, self.out_dtype
            views = tuple(
                value.view(_UINT16 if value.dtype.isnative else _UINT16.newbyteorder())  # type: ignore[attr-defined]
                if half
                else self.namespace.asarray(value).astype(out_dtype).view(_UINT16)
                if position == constant and value is not None
                else value
                for position, (value, half) in enumerate(zip(arrays, self.halves))
            )
            return _view(bits.forward(views), self.out_dtype)
        fused = self.fused_forward
        if fused is not None and self._fused_ready(arrays):
            return fused(arrays, False)[0]
        if self._numpy_forward:
            x: Any = arrays[0]
            function = self.namespace.mean if self.op == "mean" else self.namespace.sum
            return function(x, axis=self.inner.axes, keepdims=self.inner.keepdims)  # type: ignore[attr-defined]
        return _round(self.inner.forward(self._wide(arrays)), self.out_dtype, self.converts)

    def save(self, arrays: tuple[object, ...]) -> object:
        if self.op in _SAVES_INDICES:  # they keep the indices or counts: no float32 copy of x
            return self.inner.save(arrays)
        return self.inner.save(self._wide(arrays))

    def forward_and_save(self, arrays: tuple[object, ...]) -> tuple[object, object]:
        if self.bits is not None:
            return self.forward(arrays), self.save(arrays)
        fused = self.fused_forward
        if fused is not None and self._fused_ready(arrays):
            return fused(arrays, True)
        y, saved = self.inner.forward_and_save(self._wide(arrays))
        return _round(y, self.out_dtype, self.converts), saved

    def cotangent_shape(self, saved: object) -> tuple[int, ...]:
        return self.inner.cotangent_shape(saved)

    def _back(self, tangents: Sequence[object]) -> tuple[object, ...]:
        return tuple(
            _round(tangent, dtype, self.converts) if half else tangent
            for tangent, half, dtype in zip(tangents, self.halves, self.input_dtypes)
        )

    def _fused(self, saved: object) -> Callable[[Any], tuple[object, ...]] | None:
        """The float32 plan's own 16-bit pullback (``half_pullback``: kernels that read the
        16-bit cotangent's bits, sum in float32 and round once), where it has one for this
        signature: the one-argument ops whose cotangent and tangent share the 16-bit dtype."""
        fused = getattr(self.inner, "half_pullback", None)
        if fused is None or not (self.kernels or self.cuda) or self.output_shapes is not None or not self.halves[0]:
            return None
        dtype = self.input_dtypes[0]
        if dtype != self.out_dtype or not dtype.isnative:
            return None
        made: Callable[[Any], tuple[object, ...]] | None = fused(saved, dtype)
        return made

    def pullback(self, saved: object) -> Callable[[Any], tuple[object, ...]]:
        made = self.inner.pullback(saved)
        inner = made.dense() if isinstance(made, KernelPullback) else made
        wide, kernels = self.inner.out_dtype, self.converts
        back = self._back
        fused = self._fused(saved)
        if self.output_shapes is not None:

            def dense(dy: Any) -> tuple[object, ...]:
                return back(inner(tuple(_widen(cotangent, wide, kernels) for cotangent in dy)))

        elif fused is not None:
            dtype, array_type = self.out_dtype, self.namespace.ndarray

            def dense(dy: Any) -> tuple[object, ...]:
                if type(dy) is array_type and dy.dtype == dtype and dy.flags.c_contiguous:
                    return fused(dy)
                return back(inner(_widened(dy, wide, kernels)))

        else:

            def dense(dy: Any) -> tuple[object, ...]:
                return back(inner(_widened(dy, wide, kernels)))

        dense.inner = inner  # type: ignore[attr-defined]
        return dense

    def fill_pullback(self, saved: object, dense: Callable[[Any], tuple[object, ...]], fill: Fill) -> tuple[object, ...]:
        inner = getattr(dense, "inner", None)
        if inner is None:  # pragma: no cover - dense always comes from pullback above
            return super().fill_pullback(saved, dense, fill)
        wide = Fill(fill.value, fill.shape, self.inner.out_dtype)
        return self._back(self.inner.fill_pullback(saved, inner, wide))

    def pushforward(self, arrays: tuple[object, ...], tangents: tuple[Cotangent, ...]) -> object:
        wide = tuple(
            _widen(tangent, _FLOAT32, self.converts) if half else tangent for tangent, half in zip(tangents, self.halves)
        )
        return _round(self.inner.pushforward(self._wide(arrays), wide), self.out_dtype, self.converts)


class HalfSavingPlan(HalfPlan):
    """A :class:`HalfPlan` whose float32 plan reads the primals in its pullback."""

    saves_primals = True


__all__ = ["HalfPlan", "HalfSavingPlan", "half_arguments", "half_plan", "is_half"]
