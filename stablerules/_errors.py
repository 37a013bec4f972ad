"""The library's own exception types."""


class RecompileError(RuntimeError):
    """Raised inside ``no_compile()`` when a kernel would be compiled or loaded from disk."""


class DynamicFallbackError(RuntimeError):
    """Raised inside ``no_fallback()`` when a call leaves its signature's specialized path
    (for example, a static argument given as a plain ``int`` instead of a ``Val``)."""
