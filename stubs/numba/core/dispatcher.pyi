from collections import Counter
from typing import Generic, NamedTuple, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

class CompileStats(NamedTuple):
    cache_path: str
    cache_hits: Counter[object]
    cache_misses: Counter[object]

class Dispatcher(Generic[_P, _R]):
    @property
    def stats(self) -> CompileStats: ...
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def disable_compile(self, val: bool = ...) -> None: ...
