"""Array facts computed in one place: device, namespace, dtype checks, static arguments, shapes.

CuPy is optional and never imported here unless an argument already is a CuPy array, so
``import stablerules`` stays cheap and works without it.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
import types as pytypes
from collections.abc import Sequence
from typing import TypeAlias, TypeGuard

import numpy as np
import numpy.typing as npt

from . import _config
from ._memo import memoized
from ._private_python import ENVIRON_DATA, environ_key
from ._val import Val

ArrayLike: TypeAlias = npt.NDArray[np.generic]

FLOATING = frozenset({"float16", "bfloat16", "float32", "float64", "complex64", "complex128"})
# Annotated, and the names typed as plain strs: left to inference, this one expression cost
# mypy 0.4 s (NumPy's np.dtype overloads) in every user's type-check.
_SUPPORTED_NAMES: tuple[str, ...] = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
)
_SUPPORTED_DTYPES: frozenset[np.dtype[np.generic]] = frozenset(np.dtype(name) for name in _SUPPORTED_NAMES)


class ArraySpec:
    """An array's shape, dtype and device, standing in for the array in ``precompile``.

    Immutable, compared and hashed by value (a hand-written record: a dataclass would cost
    ``import stablerules`` most of a millisecond to define).
    """

    __slots__ = ("shape", "dtype", "device")

    shape: tuple[int, ...]
    dtype: np.dtype[np.generic]
    device: str

    def __init__(self, shape: Sequence[int] | int, dtype: npt.DTypeLike, device: str = "cpu") -> None:
        if isinstance(shape, int):
            shape = (shape,)
        object.__setattr__(self, "shape", tuple(int(extent) for extent in shape))
        object.__setattr__(self, "dtype", np.dtype(dtype))
        object.__setattr__(self, "device", device)
        if any(extent < 0 for extent in self.shape):
            raise ValueError(f"ArraySpec: shape must be non-negative, got {self.shape}")
        if device != "cpu" and not device.startswith("cuda"):
            raise ValueError(f"ArraySpec: device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ArraySpec is immutable: cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ArraySpec is immutable: cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type[ArraySpec], tuple[tuple[int, ...], np.dtype[np.generic], str]]:
        return (ArraySpec, (self.shape, self.dtype, self.device))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArraySpec):
            return NotImplemented
        return (self.shape, self.dtype, self.device) == (other.shape, other.dtype, other.device)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.device))

    def __repr__(self) -> str:
        return f"ArraySpec(shape={self.shape!r}, dtype={self.dtype!r}, device={self.device!r})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _refused_subclass(value: object) -> str | None:
    """For an ``ndarray`` subclass whose meaning our plain-array results would lose, what to
    say about it; ``None`` for any other value.

    - ``numpy.ma.MaskedArray``: NumPy's functions carry the mask along (``np.repeat``,
      ``np.roll``, ``np.tile`` of a masked array are masked); ours compute on the data and
      return plain arrays, which would expose the masked payloads as values, and a rule has no
      tangent for a mask. Refused, for every op alike (rather than some ops keeping the mask
      and others not): ``x.filled(v)`` or ``np.ma.getdata(x)`` say which data is meant.
    - ``numpy.matrix``: always 2-D, its reductions keep two axes (``np.sum(m, axis=0)`` is a
      1 x n matrix), which contradicts NumPy's array semantics our ops and their rank types
      follow. Refused: ``np.asarray(m)`` is the array.

    Other subclasses (``np.memmap``, a user's) are arrays of data and are read as arrays."""
    if type(value) is np.ndarray or not isinstance(value, np.ndarray):
        return None
    if isinstance(value, np.matrix):
        return "a numpy.matrix, which stablerules does not take (always 2-D; use np.asarray(x) for the array)"
    masked = sys.modules.get("numpy.ma")  # no masked array exists unless numpy.ma is loaded
    if masked is not None and isinstance(value, masked.MaskedArray):
        return (
            "a numpy.ma.MaskedArray, which stablerules does not take: its results would be plain "
            "arrays that expose the masked values (use x.filled(value) or np.ma.getdata(x) for the data)"
        )
    return None


def is_array(value: object) -> TypeGuard[ArrayLike]:
    """True for a NumPy array or a CuPy array (anything with shape, dtype and __array__-ish);
    False for the subclasses refused by :func:`_refused_subclass` (masked arrays, matrices)."""
    if isinstance(value, np.ndarray):
        return type(value) is np.ndarray or _refused_subclass(value) is None
    module = type(value).__module__
    return module.startswith("cupy") and hasattr(value, "shape") and hasattr(value, "dtype")


def _cupy() -> pytypes.ModuleType | None:
    return sys.modules.get("cupy")


def array_namespace(value: object) -> pytypes.ModuleType:
    """``numpy`` or ``cupy``, whichever owns ``value``."""
    if not isinstance(value, np.ndarray):
        cupy = _cupy()
        if cupy is not None and isinstance(value, cupy.ndarray):
            return cupy
    return np


def spec_namespace(spec: ArraySpec) -> pytypes.ModuleType:
    """The namespace the arrays an ``ArraySpec`` stands for live in: ``numpy`` for the CPU;
    for CUDA, ``cupy`` where it is installed, else ``numpy`` (Numba's simulator runs CUDA
    kernels on NumPy arrays)."""
    if not spec.device.startswith("cuda"):
        return np
    try:
        return importlib.import_module("cupy")  # only for a CUDA spec; untyped for a user's mypy
    except ImportError:
        return np


def device_of(value: object) -> str:
    """``"cpu"`` for NumPy arrays, scalars and CPU specs; ``"cuda"`` for CuPy arrays."""
    if isinstance(value, ArraySpec):
        return "cuda" if value.device.startswith("cuda") else "cpu"
    if isinstance(value, np.ndarray):
        return "cpu"
    cupy = _cupy()
    if cupy is not None and isinstance(value, cupy.ndarray):
        return "cuda"
    return "cpu"


def common_device(values: Sequence[object], names: Sequence[str]) -> str:
    """The one device the arrays among ``values`` live on (:func:`joint_device` for values not
    read yet); ``TypeError`` naming them if mixed."""
    return _one_device(
        [(name, device_of(value)) for name, value in zip(names, values) if is_array(value) or isinstance(value, ArraySpec)]
    )


def _one_device(placed: Sequence[tuple[str, str]]) -> str:
    devices = {device for _, device in placed}
    if len(devices) > 1:
        described = ", ".join(f"{name} on {device}" for name, device in placed)
        raise TypeError(f"arrays on mixed devices: {described}; move them to one device first")
    return devices.pop() if devices else "cpu"


# ``kernel_target`` runs on every call and reads the environment each time (tests switch
# STABLERULES_DEVICE within a process). ``os.environ.get`` is slow for an unset variable
# (Mapping.get raises and catches a KeyError), so it reads the dict behind ``os.environ``
# (``_private_python.ENVIRON_DATA``, which setenv and monkeypatch update) where there is one, and
# remembers what each raw value means.
_ENVIRON_DATA = ENVIRON_DATA
_DEVICE_VARIABLE = _config.DEVICE
_DEVICE_KEY: object = environ_key(_DEVICE_VARIABLE)
_TARGETS: dict[object, str] = {}
_target_of = _config.device_target


def kernel_target(device: str) -> str:
    """Which kernel family runs for arrays on ``device``: ``"cpu"`` or ``"cuda"``.

    ``STABLERULES_DEVICE=cuda`` sends NumPy arrays to the CUDA kernels too: with
    ``NUMBA_ENABLE_CUDASIM=1`` that runs them in Numba's simulator (how CI tests them).
    """
    if device == "cuda":
        return "cuda"
    if _ENVIRON_DATA is None:  # pragma: no cover - CPython's os.environ always has its dict
        return _target_of(os.environ.get(_DEVICE_VARIABLE, "cpu"))
    raw = _ENVIRON_DATA.get(_DEVICE_KEY)
    if raw is None:
        return "cpu"
    target = _TARGETS.get(raw)
    if target is None:
        target = _TARGETS.setdefault(raw, _target_of(raw))
    return target


def check_dtype(dtype: np.dtype[np.generic], name: str, *, half: bool = False) -> None:
    """``TypeError`` naming the argument for dtypes no rule handles (object, str, structured,
    datetime, longdouble...). The 16-bit floats are accepted with ``half`` (a cotangent; the
    scaffold gives 16-bit arguments ``_half``'s plans, whose stand-ins are float32 and uint16);
    without it they are refused with the message of the dtypes an op's own plan (and an
    adapter that does not take them) handles."""
    # Non-native byte order is accepted: ``contiguous`` converts it (the kernels compute in
    # native order; a forward result gets NumPy's dtype back, byte order included, and
    # tangents are native).
    if dtype in _SUPPORTED_DTYPES or dtype.newbyteorder("=") in _SUPPORTED_DTYPES:
        return
    if dtype.itemsize == 2 and (dtype.kind == "f" or dtype.type.__name__ == "bfloat16"):  # ml_dtypes' is kind 'V'
        if half:
            return
        raise TypeError(
            f"argument {name!r} has dtype {dtype}, which stablerules does not support; use bool, "
            f"an integer dtype, float32, float64, complex64 or complex128"
        )
    raise TypeError(
        f"argument {name!r} has dtype {dtype}, which stablerules does not support; use bool, "
        f"an integer dtype, float16, bfloat16, float32, float64, complex64 or complex128"
    )


_DTYPE_NAMES: dict[np.dtype[np.generic], str] = {}


def dtype_name(dtype: np.dtype[np.generic]) -> str:
    """``dtype.name``, memoized: NumPy computes it in Python on each access."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def is_differentiable(dtype: np.dtype[np.generic]) -> bool:
    return dtype_name(dtype) in FLOATING


def shape_text(shape: Sequence[int]) -> str:
    return str(tuple(int(extent) for extent in shape))


_PYTHON_SCALARS = (bool, int, float, complex)


def array_like(value: object, name: str, *, weak_scalars: bool = False) -> object:
    """How every op reads an array argument: NumPy's rule for array-likes, in one place.

    - NumPy and CuPy arrays (and ``ArraySpec``s) are taken as they are;
    - lists and tuples (nested, of numbers or NumPy arrays), NumPy scalars and Python scalars
      become NumPy arrays through ``np.asarray``, as NumPy's own functions read them: the
      dtype is NumPy's (``[1, 2]`` is int64, hence not differentiable; ``[1.0]`` float64), a
      scalar is 0-d, and the op's own shape rules then apply (``concatenate`` refuses 0-d
      inputs, as ``np.concatenate`` does);
    - with ``weak_scalars`` (``cat``, as Julia's ``cat`` and NEP 50 read them) Python scalars
      are kept, to be typed weakly by the op (``cat(x32, 1.5, dims=...)`` stays float32);
    - anything else is returned unchanged, for the op's validation to refuse with a
      ``TypeError`` naming the argument.

    A list of CuPy arrays is not converted (``np.asarray`` would copy to the host): it is a
    ``TypeError``. A ragged list is a ``ValueError`` naming the argument.
    """
    if is_array(value) or isinstance(value, ArraySpec):
        return value
    refused = _refused_subclass(value)
    if refused is not None:
        raise TypeError(f"argument {name!r} is {refused}")
    if isinstance(value, np.generic):  # before Python's: np.float64 is a float
        return np.asarray(value)
    if isinstance(value, _PYTHON_SCALARS):
        return value if weak_scalars else np.asarray(value)
    if isinstance(value, (list, tuple)):
        try:
            return np.asarray(value)
        except ValueError as error:
            raise ValueError(f"argument {name!r} is not an array-like of one shape: {error}") from None
        except TypeError as error:
            raise TypeError(f"argument {name!r} cannot be read as a NumPy array: {error}") from None
    return value


def index_data(value: object) -> object:
    """A list or tuple given where integer data goes (``take``'s indices, ``repeat``'s counts),
    read as NumPy reads it there: an empty one (``np.take(x, [])``, ``np.take(x, [[]])``),
    which has no element to take a dtype from (``np.asarray`` says float64), is an empty
    ``intp`` array of its shape. Anything else is returned as it is, for the op's own reading
    (a non-empty list of ints is int64 either way; one of floats keeps our ``TypeError``)."""
    if isinstance(value, (list, tuple)) and _without_elements(value):
        empty: npt.NDArray[np.intp] = np.zeros(np.shape(value), dtype=np.intp)
        return empty
    return value


def _without_elements(value: list[object] | tuple[object, ...]) -> bool:
    """Whether a (nested) list or tuple holds no scalar at all (``[]``, ``[[], []]``)."""
    return all(isinstance(item, (list, tuple)) and _without_elements(item) for item in value)


def as_array(value: object, name: str) -> ArrayLike:
    """An array argument read by :func:`array_like`'s rule, with a supported dtype;
    ``TypeError`` naming it for anything that is not an array-like."""
    converted = array_like(value, name)
    if not is_array(converted):
        raise TypeError(
            f"argument {name!r} must be an array (or a list, tuple or scalar NumPy can read as one), "
            f"got {type(value).__name__}"
        )
    check_dtype(converted.dtype, name)
    return converted


def contiguous(array: ArrayLike) -> ArrayLike:
    """C-contiguous view or, for strided / negative-stride / Fortran inputs, one copy.

    The kernels read flat C-ordered memory; this is the one place a layout is normalized.
    """
    # ascontiguousarray returns at least 1-d: reshape keeps a 0-d array 0-d (a view).
    xp = array_namespace(array)
    if not array.flags.c_contiguous:
        # A broadcast view (np.broadcast_to) can be far larger than memory: refuse it here.
        checked_size(array.shape, array.dtype.itemsize, "a C-ordered copy of an input")
    if array.dtype.isnative:
        result: ArrayLike = xp.ascontiguousarray(array).reshape(array.shape)
    else:
        result = xp.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")).reshape(array.shape)
    return result


def shareable(array: ArrayLike) -> bool:
    """Whether views of ``array`` may be handed out as tangents (the README's "a dense
    cotangent gives dense, writable tangents"): it is writable, and no two of its elements
    share an address (no zero stride on an axis longer than one). A view of such an array
    (flipped, transposed, reshaped, sliced) is such an array too, so a pullback checks its
    cotangent once, not each view.

    The view ops' pullbacks (flip, permute_dims/transpose, reshape, pad, the concatenate
    family, a covering getindex, index_add's ``dx``) return views of ``dy``: zero-copy for a
    writable cotangent, as before. A read-only ``dy`` (a frozen array, a memory-mapped file
    opened read-only) or a stride-0 one (``np.broadcast_to``, an engine's expanded gradient)
    would give tangents that cannot be accumulated into in place (``dx += ...`` raises, or
    writes one element through many), so those two cases cost one copy of each tangent."""
    flags = array.flags
    try:
        if not flags.writeable:
            return False
    except AttributeError:  # CuPy's flags: its arrays are always writable
        pass
    # A C-contiguous array has no zero stride on an axis longer than one: the common case is
    # answered without building the strides tuple.
    return flags.c_contiguous or not any(
        stride == 0 and extent > 1 for stride, extent in zip(array.strides, array.shape)
    )


def writable(array: ArrayLike) -> ArrayLike:
    """``array`` itself where it is :func:`shareable`, else one C-ordered copy."""
    if shareable(array):
        return array
    copied: ArrayLike = array.copy()
    return copied


def static_int(value: object, name: str) -> int:
    """The ``int`` inside a ``Val``; a plain int is accepted (the scaffold counts it as dynamic)."""
    if isinstance(value, Val):
        inner = value.value
        if isinstance(inner, int) and not isinstance(inner, bool):
            return inner
        raise TypeError(f"argument {name!r} must be Val(int), got {value!r}")
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    raise TypeError(f"argument {name!r} must be Val(int), got {type(value).__name__}: {value!r}")


def static_ints(value: object, name: str) -> tuple[int, ...]:
    """The ints inside ``Val(int)`` or ``Val(tuple)``, as a tuple; plain values are accepted (the
    scaffold counts them as dynamic)."""
    if isinstance(value, Val):
        inner = value.value
        if isinstance(inner, bool):
            raise TypeError(f"argument {name!r} must be Val(int) or Val(tuple of ints), got {value!r}")
        return (inner,) if isinstance(inner, int) else tuple(inner)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return (int(value),)
    if isinstance(value, (tuple, list)) and all(
        isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)) for item in value
    ):
        return tuple(int(item) for item in value)
    raise TypeError(
        f"argument {name!r} must be Val(int) or Val(tuple of ints), got "
        f"{type(value).__name__}: {value!r}"
    )


def static_bool(value: object, name: str) -> bool:
    """The ``bool`` inside ``Val(bool)``; a plain ``bool`` is accepted (the scaffold counts it as
    dynamic)."""
    if isinstance(value, Val):
        inner = value.value
        if isinstance(inner, bool):
            return inner
        raise TypeError(f"argument {name!r} must be Val(True) or Val(False), got {value!r}")
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"argument {name!r} must be Val(True) or Val(False), got {type(value).__name__}: {value!r}"
    )


def is_dynamic_static(value: object) -> bool:
    """Whether a static argument is a plain value the readers above accept (an int, a bool, a
    tuple or list of ints, NumPy's too) where a ``Val`` goes: a dynamic argument."""
    if isinstance(value, (int, np.integer, np.bool_)):
        return True
    return isinstance(value, (tuple, list)) and all(
        isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)) for item in value
    )


def normalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name} {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


# NumPy's limit on the number of axes (NPY_MAXDIMS in NumPy 2).
MAX_NDIM = 64


@memoized(None)
def physical_memory_bytes() -> int:
    """Physical memory of this machine (0 when unknown). Read once, without a file: an
    allocation no larger needs no further check (``checked_size``)."""
    try:
        return max(int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")), 0)
    except (AttributeError, ValueError, OSError):
        return 0


@memoized(None)
def host_memory_bytes() -> int:
    """Physical memory plus swap of this machine (0 when unknown): no host allocation can be
    larger. Read once (``/proc/meminfo``: 80-90 us, so only for an allocation larger than
    the physical memory)."""
    total = physical_memory_bytes()
    if not total:
        return 0
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("SwapTotal:"):
                    total += int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(int(total), 0)


def checked_size(shape: Sequence[int], itemsize: int, what: str, *, allocates: bool = True) -> int:
    """The element count of ``shape``, checked before anything is allocated or compiled.

    ``ValueError`` for more than NumPy's 64 axes or a byte size that overflows int64 (indices
    would wrap); ``MemoryError`` for a byte size above this machine's memory plus swap (with
    overcommit on, ``np.empty`` would succeed and the kernel's writes would bring in the OOM
    killer instead). A view (``allocates=False``: ``broadcast_to``'s zero-strided result)
    costs no memory, so only NumPy's own limits apply to it: 64 axes, and ``ValueError`` for a
    byte size of 2**63 or more (NumPy's "array is too big").
    """
    if len(shape) > MAX_NDIM:
        raise ValueError(
            f"{what}: the result would have {len(shape)} dimensions; NumPy arrays have at most "
            f"{MAX_NDIM}"
        )
    size = math.prod(int(extent) for extent in shape)
    nbytes = size * max(itemsize, 1)
    if not allocates:
        if nbytes >= 2**63:
            raise ValueError(
                f"{what}: a view of shape {shape_text(shape)} ({size} elements of {itemsize} bytes) "
                f"is too large for NumPy to describe"
            )
        return size
    if nbytes >= 2**62:
        raise ValueError(
            f"{what}: an array of shape {shape_text(shape)} ({size} elements of {itemsize} bytes) "
            f"is too large to allocate"
        )
    if nbytes <= physical_memory_bytes():
        return size
    memory = host_memory_bytes()
    if memory and nbytes > memory:
        raise MemoryError(
            f"{what}: an array of shape {shape_text(shape)} needs {nbytes} bytes, more than this "
            f"machine's {memory} bytes of memory and swap"
        )
    return size


# Each dtype met (byte order and all, as dtypes compare) and its named, native-order dtype.
_NATIVE: dict[np.dtype[np.generic], np.dtype[np.generic]] = {}
_NATIVE_MAX = 256


class InputFacts:
    """One array argument as a plan sees it, read once by :func:`input_facts`:

    - ``name``: how messages name it (``"x"``, ``"arrays[1]"``);
    - ``array``: the array (``None`` for an ``ArraySpec`` and for a weak Python scalar);
    - ``shape``, ``dtype`` (as given, byte order included), ``native`` (the dtype in native
      byte order, a named singleton: kernels compute in it and tangents have it);
    - ``namespace`` (``numpy`` or ``cupy``), ``device`` (``"cpu"``/``"cuda"``, or ``None`` for
      a value that was no array: a scalar or list lives on any device), ``target`` (the kernel
      family that runs for it);
    - ``scalar``: a weak Python scalar (``cat``'s, NEP 50), kept as ``value``.

    A slotted class: cheaper to build than a frozen dataclass and to read than a named tuple.
    """

    __slots__ = ("name", "array", "shape", "dtype", "native", "namespace", "device", "target", "scalar", "value")

    def __init__(
        self,
        name: str,
        array: ArrayLike | None,
        shape: tuple[int, ...],
        dtype: np.dtype[np.generic],
        namespace: pytypes.ModuleType,
        device: str | None,
        *,
        scalar: bool = False,
        value: object = None,
    ) -> None:
        self.name = name
        self.array = array
        self.shape = shape
        self.dtype = dtype
        # The named dtype (a singleton), so ``dtype is native`` holds on the hot paths. Read
        # through a table: ``dtype.name`` is Python code in NumPy (1.9 us of the 3.5 us an
        # index array's facts took per ``take`` call).
        native = _NATIVE.get(dtype)
        if native is None:
            native = np.dtype(dtype.name)
            if len(_NATIVE) < _NATIVE_MAX:
                _NATIVE[dtype] = native
        self.native: np.dtype[np.generic] = native
        self.namespace = namespace
        self.device = device
        self.target = kernel_target(device or "cpu")
        self.scalar = scalar
        self.value = value

    @property
    def differentiable(self) -> bool:
        return self.native.kind in "fc"

    @property
    def tangent_dtype(self) -> np.dtype[np.generic] | None:
        """The dtype of its tangent (native), or ``None`` for an integer or bool argument."""
        return self.native if self.native.kind in "fc" else None

    def need_array(self, op: str) -> ArrayLike:
        """The array, or a ``TypeError`` for an ``ArraySpec`` (which only describes one)."""
        if self.array is None:
            raise TypeError(
                f"{op}: {self.name} must be an array (an ArraySpec only describes one, for precompile/explain)"
            )
        return self.array


_INT64: np.dtype[np.generic] = np.dtype(np.int64)


def input_facts(x: object, name: str, op: str, *, weak_scalars: bool = False) -> InputFacts:
    """Read one array argument: an array, an ``ArraySpec``, or anything NumPy reads as an array
    (a list, a Python or NumPy scalar: :func:`array_like`'s rule). ``TypeError`` naming ``op``
    and the argument for anything else or an unsupported dtype.

    With ``weak_scalars`` a Python scalar stays a weak scalar (``scalar``, its ``value`` kept):
    an int reads as int64 whatever its value, so a plan is keyed by the scalar's type, and
    the op checks the value against its result dtype."""
    try:
        if isinstance(x, ArraySpec):
            check_dtype(x.dtype, name)
            return InputFacts(name, None, x.shape, x.dtype, spec_namespace(x), device_of(x))
        if weak_scalars and type(x) in _PYTHON_SCALARS:
            dtype = _INT64 if type(x) is int else np.asarray(x).dtype
            return InputFacts(name, None, (), dtype, np, None, scalar=True, value=x)
        placed = is_array(x)
        array = as_array(x, name)
    except TypeError as error:
        raise TypeError(f"{op}: {error}") from None
    return InputFacts(
        name,
        array,
        tuple(int(n) for n in array.shape),
        array.dtype,
        array_namespace(array),
        device_of(array) if placed else None,
    )


def joint_device(inputs: Sequence[InputFacts]) -> str:
    """The one device the array arguments live on (``"cpu"`` when none is placed);
    ``TypeError`` naming them if they are on several."""
    return _one_device([(facts.name, facts.device) for facts in inputs if facts.device is not None])


def joint_namespace(inputs: Sequence[InputFacts]) -> pytypes.ModuleType:
    """The namespace of the arguments' device: the first placed argument's (``numpy`` when
    none is placed). Devices are checked by :func:`joint_device`."""
    for facts in inputs:
        if facts.device is not None:
            return facts.namespace
    return np
