"""How ``tools/generate.py`` spells this engine's types in its ops' signatures
(``_signatures.py``) and where its public module finds the ops (``_public.py``). Data only:
the generator reads it without importing the engine. Every engine package has one, so a new
engine adds nothing outside its package for the generated files (see the generator's
``AdapterTypes`` for each field)."""

IMPORTS = ("import numpy as np", "import numpy.typing as npt", "import torch")
ARRAY = "torch.Tensor"
DATA = "torch.Tensor | npt.NDArray[np.integer[Any]] | Sequence[int]"
COUNTS = None
VALUE = "bool | int | float | complex"
VARARG = "torch.Tensor"
SCALAR_OPERANDS = True
SCALAR_VALUES = False
HOST_ARRAY = None
DEFINITIONS = "_ops"
