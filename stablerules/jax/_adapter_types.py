"""How ``tools/generate.py`` spells this engine's types in its ops' signatures
(``_signatures.py``) and where its public module finds the ops (``_public.py``). Data only:
the generator reads it without importing the engine. Every engine package has one, so a new
engine adds nothing outside its package for the generated files (see the generator's
``AdapterTypes`` for each field)."""

IMPORTS = ("import jax", "import numpy as np", "import numpy.typing as npt")
ARRAY = "jax.Array"
DATA = "jax.Array | npt.NDArray[np.integer[Any]]"
COUNTS = None
VALUE = "bool | int | float | complex | jax.Array"
VARARG = "jax.Array | float"
SCALAR_OPERANDS = False
SCALAR_VALUES = True
HOST_ARRAY = "jax.Array | npt.NDArray[Any]"
DEFINITIONS = "_generic"
