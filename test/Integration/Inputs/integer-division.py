"""integer-division.py inputs FILE | check FILE: the inputs of
integer-division.loom, or the check of a run's outputs (prints each output
and whether it is the expected quotient)."""
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

I64_MIN, I32_MIN = np.iinfo(np.int64).min, np.iinfo(np.int32).min
INPUTS = {
    "a": np.array([I64_MIN, 7, -7, 7, I64_MIN, 5], dtype=np.int64),
    "b": np.array([-1, 2, 2, -2, 1, 0], dtype=np.int64),
    "c": np.array([I32_MIN, -9, 9, 3], dtype=np.int32),
    "d": np.array([-1, 4, -4, 0], dtype=np.int32),
}
EXPECTED = {
    "q": [I64_MIN, 3, -3, -3, I64_MIN, 0],
    "r": [I32_MIN, -2, -2, 0],
}

if sys.argv[1] == "inputs":
    save_file(INPUTS, sys.argv[2])
else:
    outputs = load_file(sys.argv[2])
    for name, expected in EXPECTED.items():
        got = outputs[name].tolist()
        print(f"{name}: {got} {'ok' if got == expected else 'WRONG, expected %s' % expected}")
