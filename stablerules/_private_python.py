"""The interpreter's private names stablerules reads, in one place (a test pins them:
``tests/test_private.py``).

- CPython's built-in SHA-256 (``_sha2`` from 3.12, ``_sha256`` before): the digests of
  ``hashlib.sha256`` without ``import hashlib``, which loads OpenSSL (~3 ms of a fresh
  process's first gradient, which hashes a kernel's source and checks its stored object code).
  ``hashlib``'s where the interpreter has neither.
- ``os.environ``'s raw dict (CPython's ``os._Environ._data``, which ``os.environ[...] = ``,
  ``putenv`` through it and ``monkeypatch.setenv`` update) and its key encoder: reading one
  variable on every call through ``os.environ.get`` is slow for an unset variable (Mapping.get
  raises and catches a ``KeyError``). ``None`` where the interpreter has no such dict: callers
  then use ``os.environ.get``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Protocol, cast

ENVIRON_DATA: dict[object, object] | None = getattr(os.environ, "_data", None)
"""The dict behind ``os.environ`` (keys and values encoded as ``environ_key`` encodes them)."""

environ_key: Callable[[str], object] = getattr(os.environ, "encodekey", lambda key: key)
"""A variable's name as ``ENVIRON_DATA`` keys it."""


class Digest(Protocol):
    """What a SHA-256 object does for us (``hashlib``'s and the built-in module's alike)."""

    def update(self, data: bytes, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


SHA256_MODULES = ("_sha2", "_sha256") if sys.version_info >= (3, 12) else ("_sha256", "_sha2")
"""CPython's built-in SHA-256 modules, the running interpreter's first (``_sha2`` from 3.12):
a module that is not there is looked for on every ``sys.path`` entry before the import fails
(0.1 ms of a fresh process's first kernel load)."""

_sha256: Callable[[bytes], Digest] | None = None


def sha256(data: bytes = b"") -> Digest:
    """A SHA-256 object fed ``data`` (module docstring: the same digests as ``hashlib.sha256``)."""
    global _sha256
    if _sha256 is None:
        for name in SHA256_MODULES:
            try:
                _sha256 = cast("Callable[[bytes], Digest]", importlib.import_module(name).sha256)
                break
            except (ImportError, AttributeError):
                continue
        else:
            import hashlib  # noqa: PLC0415 - an interpreter without the built-in modules

            _sha256 = cast("Callable[[bytes], Digest]", hashlib.sha256)
    return _sha256(data)
