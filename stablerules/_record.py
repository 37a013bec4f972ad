"""Ahead-of-time warming: record the signatures a block uses, compile them in another process.

``with sr.record(path): step()`` notes every signature the block's op calls look up (the plan
key: the op, each array argument's shape, dtype and device, a Python scalar's type, the
statics) and, when the block ends, writes them to ``path`` as JSON; ``sr.precompile(path)``
compiles (or loads from the disk cache) every kernel of every recorded signature, in any
process: a build step, the deployment machine's start-up, a warm-up job. A program run after
it finds each kernel of those signatures on disk, so its first step compiles nothing.

The file::

    {"format": "stablerules-signatures", "version": 1, "stablerules": "<version>",
     "signatures": [{"op": "kron",
                     "arrays": [{"shape": [2, 2], "dtype": "float64", "device": "cpu"}, ...],
                     "statics": [null, {"val": [0, 2]}, ...]}, ...]}

An array argument is ``{"shape", "dtype", "device"}`` (replayed as an ``ArraySpec``), a Python
scalar ``{"scalar": "float"}`` (replayed as ``0.0``: a plan reads a scalar's type, not its
value); a static is ``null`` or ``{"val": v}`` with ``v`` a bool, an int or a list of ints
(replayed as ``Val(v)``, a list as a tuple: the same plan as the call's own ``Val`` or plain
int). Signatures appear once each, in first-use order.

Decisions where nothing else decides:

- ``record`` replaces the file (one recorded program, one file); written atomically (a
  temporary file in the same folder, then renamed), also when the block raises (what it used
  until then is still worth warming). Records nest: every open one notes each signature.
- A call whose plan has no key (a list where an array goes, a NumPy integer as a static) is not
  recorded; ``Recording.unkeyed`` counts them.
- A recording notes the calls of every thread while it is open (a data loader's threads run the
  program's ops too). It sees what goes through the plan cache: the NumPy ops and the PyTorch
  adapter's calls; the JAX adapter plans inside its trace, outside the cache, and is not
  recorded.
- ``precompile(path)``: a file that is not a signatures file, or of a newer format version, is a
  ``ValueError`` naming the path; a signature the running library cannot replay (an op it does
  not have, a dtype NumPy does not know, an invalid call) is a ``ValueError`` naming its entry.
  A file recorded by another stablerules version is replayed all the same: the kernels are
  keyed by their source, so a signature whose kernels changed compiles the new ones.
- The kernels warmed are the disk cache's: valid in every process and on every machine of the
  same CPU (name and features), refused and recompiled on another (``_objectcode.host_key``,
  and Numba's own index for its cache).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

from ._arrays import ArraySpec, device_of, is_array
from ._schema import BY_NAME
from ._val import Val
from ._version import __version__

if TYPE_CHECKING:
    from ._key import ShapeSignature
    from ._op import KernelRequest


class _Plan(Protocol):
    def requests(self) -> list[KernelRequest]: ...


class RecordedOp(Protocol):
    """What recording and replaying need of an op (a ``RuleOp``): its name and its plan lookup."""

    @property
    def name(self) -> str: ...

    def lookup(self, arrays: tuple[object, ...], statics: tuple[object, ...], *, specs: bool = False) -> _Plan: ...

FORMAT = "stablerules-signatures"
VERSION = 1
_SCALARS: dict[str, type] = {"bool": bool, "int": int, "float": float, "complex": complex}

RECORDINGS: list[Recording] = []
"""The open recordings; the plan lookup notes each keyed call while it is non-empty."""


class Recording:
    """The signatures one ``record`` block has used so far (``signatures``: the entries as
    the file will hold them) and the calls it could not record (``unkeyed``)."""

    __slots__ = ("path", "signatures", "unkeyed", "_seen")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.signatures: list[dict[str, Any]] = []
        self.unkeyed = 0
        self._seen: set[Hashable] = set()

    def note(self, op: RecordedOp, key: Hashable | None, arrays: tuple[object, ...], statics: tuple[object, ...]) -> None:
        if key is None:
            self.unkeyed += 1
            return
        if key in self._seen:
            return
        entry = _encode(op, arrays, statics)
        if entry is None:
            self.unkeyed += 1
            return
        self._seen.add(key)
        self.signatures.append(entry)

    def document(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "stablerules": __version__, "signatures": self.signatures}

    def write(self) -> None:
        """Write the file atomically: a temporary file beside it, then renamed over it."""
        import json  # noqa: PLC0415 - only a recording's end writes
        import tempfile  # noqa: PLC0415

        folder = os.path.dirname(os.path.abspath(self.path))
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.document(), handle, indent=1)
                handle.write("\n")
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def note(op: RecordedOp, key: Hashable | None, arrays: tuple[object, ...], statics: tuple[object, ...]) -> None:
    """Note one plan lookup in every open recording (called only while one is open)."""
    for recording in RECORDINGS:
        recording.note(op, key, arrays, statics)


@contextlib.contextmanager
def record(path: str | os.PathLike[str]) -> Iterator[Recording]:
    """``with sr.record(path): step()``: write the signatures the block's op calls use to
    ``path`` (JSON), for ``sr.precompile(path)`` to compile ahead of time, in this process or
    another one (a build step, a deployment's start-up) on a machine of the same CPU.

    The file is replaced, atomically, when the block ends (also when it raises). Yields the
    :class:`Recording` (its ``signatures`` and ``unkeyed`` count). The folder must exist: a
    missing one is a ``FileNotFoundError`` here, before the block runs.
    """
    recording = Recording(path)
    folder = os.path.dirname(os.path.abspath(recording.path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"record: the folder of {recording.path!r} does not exist")
    RECORDINGS.append(recording)
    try:
        yield recording
    finally:
        RECORDINGS.remove(recording)
        recording.write()


def _encode_array(value: object) -> dict[str, Any] | None:
    if type(value) in _SCALARS.values():
        return {"scalar": type(value).__name__}
    if isinstance(value, ArraySpec):
        return {"shape": list(value.shape), "dtype": value.dtype.name, "device": value.device}
    if is_array(value):
        import numpy as np  # noqa: PLC0415 - numpy is imported by the caller already

        dtype = np.dtype(value.dtype)
        shape = [int(extent) for extent in value.shape]
        return {"shape": shape, "dtype": dtype.name, "device": device_of(value)}
    return None


def _encode_static(value: object) -> object:
    inner = value.value if isinstance(value, Val) else value
    if inner is None:
        return None
    if type(inner) in (bool, int):
        return {"val": inner}
    if type(inner) is tuple and all(type(item) is int for item in inner):
        return {"val": list(inner)}
    raise TypeError


def _encode(op: RecordedOp, arrays: tuple[object, ...], statics: tuple[object, ...]) -> dict[str, Any] | None:
    try:
        encoded = [_encode_array(value) for value in arrays]
    except (TypeError, ValueError, AttributeError):  # an array whose dtype NumPy cannot name
        return None
    if any(entry is None for entry in encoded):
        return None
    try:
        static_entries = [_encode_static(value) for value in statics]
    except TypeError:
        return None
    return {"op": op.name, "arrays": encoded, "statics": static_entries}


def _op(name: str) -> RecordedOp | None:
    """The op ``name`` of the schema, its family loaded by the schema's family name (the op
    families are found by name at run time, as the package's lazy loader finds them; no
    module below them imports one)."""
    import importlib  # noqa: PLC0415 - only a replay loads families

    schema = BY_NAME.get(name)
    if schema is None:
        return None
    return cast("RecordedOp", getattr(importlib.import_module(f"stablerules.rules.{schema.family}"), name))


def _decode(entry: object, where: str) -> tuple[RecordedOp, tuple[object, ...], tuple[object, ...]]:
    import numpy as np  # noqa: PLC0415

    if not isinstance(entry, dict) or not isinstance(entry.get("op"), str):
        raise ValueError(f"{where}: not a recorded signature: {entry!r}")
    op = _op(entry["op"])
    if op is None or op.name != entry["op"]:
        raise ValueError(f"{where}: this stablerules has no op {entry['op']!r}")
    for field in ("arrays", "statics"):
        if not isinstance(entry.get(field, []), list):
            raise ValueError(f"{where}: {field!r} must be a list, got {entry[field]!r}")
    arrays: list[object] = []
    for value in entry.get("arrays", ()):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: an array argument must be an object, got {value!r}")
        if "scalar" in value:
            if not isinstance(value["scalar"], str) or value["scalar"] not in _SCALARS:
                raise ValueError(f"{where}: unknown scalar type {value['scalar']!r}")
            arrays.append(_SCALARS[value["scalar"]](0))
            continue
        try:
            arrays.append(ArraySpec(tuple(value["shape"]), np.dtype(value["dtype"]), value.get("device", "cpu")))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"{where}: cannot read the array argument {value!r} ({error})") from None
    statics: list[object] = []
    for value in entry.get("statics", ()):
        if value is None:
            statics.append(None)
        elif isinstance(value, dict) and "val" in value:
            inner = value["val"]
            try:
                statics.append(Val(tuple(inner) if isinstance(inner, list) else inner))
            except (TypeError, ValueError) as error:
                raise ValueError(f"{where}: cannot read the static argument {value!r} ({error})") from None
        else:
            raise ValueError(f"{where}: cannot read the static argument {value!r}")
    return op, tuple(arrays), tuple(statics)


def read(path: str | os.PathLike[str]) -> list[Any]:
    """The recorded signatures of a file ``record`` wrote (``ValueError`` naming the path for
    anything else)."""
    import json  # noqa: PLC0415 - only precompile reads

    name = os.fspath(path)
    with open(name, encoding="utf-8") as handle:
        try:
            document = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"precompile: {name!r} is not a signatures file ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"precompile: {name!r} is not a signatures file (no format {FORMAT!r})")
    version = document.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ValueError(
            f"precompile: {name!r} has format version {version!r}; this stablerules reads up to {VERSION}"
        )
    signatures = document.get("signatures")
    if not isinstance(signatures, list):
        raise ValueError(f"precompile: {name!r} has no list of signatures")
    return signatures


def precompile_file(path: str | os.PathLike[str]) -> tuple[ShapeSignature, ...]:
    """Compile (or load) every kernel of every signature recorded in ``path``; returns the
    kernels' signatures, each once, in recorded order."""
    name = os.fspath(path)
    done: dict[ShapeSignature, None] = {}
    for index, entry in enumerate(read(name)):
        where = f"precompile: {name!r}, signature {index}"
        op, arrays, statics = _decode(entry, where)
        try:
            requests = op.lookup(arrays, statics, specs=True).requests()
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, RuntimeError) as error:
            # a signature no call could have made (too few arguments, an index array of
            # floats), or one this machine cannot compile (a CUDA one without a device)
            raise ValueError(f"{where} ({op.name}): {type(error).__name__}: {error}") from None
        for request in requests:
            if request.signature not in done:
                request.get()
                done[request.signature] = None
    return tuple(done)


__all__ = ["FORMAT", "RECORDINGS", "Recording", "VERSION", "note", "precompile_file", "read", "record"]
