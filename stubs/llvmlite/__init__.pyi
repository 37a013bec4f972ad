# Stubs for the part of llvmlite that stablerules uses (llvmlite ships no type information).
__version__: str
