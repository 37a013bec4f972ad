"""The interpreter's private names stablerules reads, in one place (a test pins them:
``tests/test_private.py``).

- ``os.environ``'s raw dict (CPython's ``os._Environ._data``, which ``os.environ[...] = ``,
  ``putenv`` through it and ``monkeypatch.setenv`` update) and its key encoder: reading one
  variable on every call through ``os.environ.get`` is slow for an unset variable (Mapping.get
  raises and catches a ``KeyError``). ``None`` where the interpreter has no such dict: callers
  then use ``os.environ.get``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

ENVIRON_DATA: dict[object, object] | None = getattr(os.environ, "_data", None)
"""The dict behind ``os.environ`` (keys and values encoded as ``environ_key`` encodes them)."""

environ_key: Callable[[str], object] = getattr(os.environ, "encodekey", lambda key: key)
"""A variable's name as ``ENVIRON_DATA`` keys it."""
