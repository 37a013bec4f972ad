"""How ``tools/generate.py`` spells this engine's types in its ops' signatures
(``_signatures.py``) and where its public module finds the ops (``_public.py``). Data only:
the generator reads it without importing the engine. Every engine package has one, so a new
engine adds nothing outside its package for the generated files (see the generator's
``AdapterTypes`` for each field)."""

IMPORTS = ("import numpy as np", "import numpy.typing as npt")
ARRAY = "npt.NDArray[Any]"
DATA = "npt.NDArray[np.integer[Any]] | Sequence[int]"
COUNTS = "npt.NDArray[np.integer[Any]] | Sequence[int]"
VALUE = "bool | int | float | complex | npt.NDArray[Any]"
VARARG = "npt.NDArray[Any] | float"
SCALAR_OPERANDS = False
SCALAR_VALUES = True
HOST_ARRAY = None
DEFINITIONS = "_adapter"
