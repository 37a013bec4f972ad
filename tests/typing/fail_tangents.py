"""Must fail: what the tangent algebra refuses at run time is a type error too."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stablerules import Fill, ZeroTangent


def zeros(x: npt.NDArray[np.float32], z: ZeroTangent, f: Fill) -> None:
    # iterating a zero (its __iter__ is None: not an endless loop over __getitem__)
    # E: "None" not callable  [misc]
    for item in z:
        pass
    # E: Argument 1 to "len" has incompatible type "ZeroTangent"; expected "Sized"  [arg-type]
    len(z)
    # dividing by a zero
    # E: No overload variant of "__truediv__" of "ndarray" matches argument type "ZeroTangent"  [operator]
    x / z
    # E: No overload variant of "__truediv__" of "Fill" matches argument type "ZeroTangent"  [operator]
    f / z
    # E: No overload variant of "__add__" of "_Zero" matches argument type "str"  [operator]
    z + "text"
    # E: No overload variant of "Fill" matches argument types "str", "tuple[int, int]"  [call-overload]
    Fill("text", (2, 3))
