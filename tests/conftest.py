"""Test-session setup: a throwaway kernel cache directory unless one is given."""

from __future__ import annotations

import os
import tempfile

if "STABLERULES_CACHE_DIR" not in os.environ:
    os.environ["STABLERULES_CACHE_DIR"] = tempfile.mkdtemp(prefix="stablerules-test-cache-")
