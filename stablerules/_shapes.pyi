"""Type variables and aliases of the generated stubs (``_signatures.pyi``, ``_ops.pyi``).

Shape variables: ``_S`` (any shape), ``_S2``-``_S4`` (the other arrays of a sequence), ``_SU`` /
``_SU2`` (an unknown rank: only ``tuple[Any, ...]`` fits ``tuple[Never, *tuple[Never, ...]]``),
``_R<r>`` (exactly rank ``r``), ``_Rge<r>`` (at least ``r``), ``_Rle<r>`` (at most ``r``), and the
``_Q`` copies of ``_R<r>``/``_Rle<r>`` for kron's second operand (one type variable per parameter).
"""

from collections.abc import Sequence
from typing import Any, Never, ParamSpec, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

_SA = TypeVar("_SA", bound=tuple[Any, ...])
_TA = TypeVar("_TA", bound=np.generic)
_A: TypeAlias = np.ndarray[_SA, np.dtype[_TA]]
"""``_A[S, T]``: an array of shape type ``S`` and scalar type ``T``."""

_F = TypeVar("_F", bound=np.inexact)
_F2 = TypeVar("_F2", bound=np.inexact)  # the other arrays' of a mixed-dtype concatenate
_F3 = TypeVar("_F3", bound=np.inexact)
_F4 = TypeVar("_F4", bound=np.inexact)
_G = TypeVar("_G", bound=np.generic)
_DT = TypeVar("_DT", bound=np.generic)
_P = ParamSpec("_P")
_R = TypeVar("_R")

_Unknown: TypeAlias = tuple[Never, *tuple[Never, ...]]
_S = TypeVar("_S", bound=tuple[int, ...])
_S2 = TypeVar("_S2", bound=tuple[int, ...])
_S3 = TypeVar("_S3", bound=tuple[int, ...])
_S4 = TypeVar("_S4", bound=tuple[int, ...])
_SU = TypeVar("_SU", bound=_Unknown)
_SU2 = TypeVar("_SU2", bound=_Unknown)
_R0 = TypeVar("_R0", bound=tuple[()])
_R1 = TypeVar("_R1", bound=tuple[int])
_R2 = TypeVar("_R2", bound=tuple[int, int])
_R3 = TypeVar("_R3", bound=tuple[int, int, int])
_R4 = TypeVar("_R4", bound=tuple[int, int, int, int])
_R5 = TypeVar("_R5", bound=tuple[int, int, int, int, int])
_R6 = TypeVar("_R6", bound=tuple[int, int, int, int, int, int])
_Q0 = TypeVar("_Q0", bound=tuple[()])
_Q1 = TypeVar("_Q1", bound=tuple[int])
_Q2 = TypeVar("_Q2", bound=tuple[int, int])
_Q3 = TypeVar("_Q3", bound=tuple[int, int, int])
_Q4 = TypeVar("_Q4", bound=tuple[int, int, int, int])
_Q5 = TypeVar("_Q5", bound=tuple[int, int, int, int, int])
_Q6 = TypeVar("_Q6", bound=tuple[int, int, int, int, int, int])
_Rge1 = TypeVar("_Rge1", bound=tuple[int, *tuple[int, ...]])
_Rge2 = TypeVar("_Rge2", bound=tuple[int, int, *tuple[int, ...]])
_Rge3 = TypeVar("_Rge3", bound=tuple[int, int, int, *tuple[int, ...]])
_Rge4 = TypeVar("_Rge4", bound=tuple[int, int, int, int, *tuple[int, ...]])
_Rge5 = TypeVar("_Rge5", bound=tuple[int, int, int, int, int, *tuple[int, ...]])
_Rge6 = TypeVar("_Rge6", bound=tuple[int, int, int, int, int, int, *tuple[int, ...]])
_Rle0 = TypeVar("_Rle0", bound=tuple[()])
_Rle1 = TypeVar("_Rle1", bound=tuple[()] | tuple[int])
_Rle2 = TypeVar("_Rle2", bound=tuple[()] | tuple[int] | tuple[int, int])
_Rle3 = TypeVar("_Rle3", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int])
_Rle4 = TypeVar("_Rle4", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int])
_Rle5 = TypeVar("_Rle5", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int] | tuple[int, int, int, int, int])
_Qle1 = TypeVar("_Qle1", bound=tuple[()] | tuple[int])
_Qle2 = TypeVar("_Qle2", bound=tuple[()] | tuple[int] | tuple[int, int])
_Qle3 = TypeVar("_Qle3", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int])
_Qle4 = TypeVar("_Qle4", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int])
_Qle5 = TypeVar("_Qle5", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int] | tuple[int, int, int, int, int])
_Qle6 = TypeVar("_Qle6", bound=tuple[()] | tuple[int] | tuple[int, int] | tuple[int, int, int] | tuple[int, int, int, int] | tuple[int, int, int, int, int] | tuple[int, int, int, int, int, int])

_AnyArray: TypeAlias = npt.NDArray[np.generic]
_Integral: TypeAlias = np.bool_ | np.integer
_CountsArray: TypeAlias = npt.NDArray[np.integer] | Sequence[int]
"""Per-element repeat counts: data (an integer array, or a list of ints), not static."""
_CatInput: TypeAlias = npt.NDArray[np.generic] | np.generic | bool | int | float | complex
_KronOperand: TypeAlias = npt.NDArray[np.generic] | bool | int | float | complex
_PadConstant: TypeAlias = bool | int | float | complex | np.generic | npt.NDArray[np.generic]
