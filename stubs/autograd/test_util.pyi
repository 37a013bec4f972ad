from collections.abc import Callable
from typing import Any

def check_grads(fun: Callable[..., Any], modes: list[str] = ..., order: int = ...) -> Callable[..., None]: ...
