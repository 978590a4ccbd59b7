"""tensors-equal.py A B NAME...: for each named tensor, whether files A and B
hold it with the same type, shape and bits ("NAME: equal" or "NAME:
differs"), read by bench/gpu/compare.py's reader (numpy has no bf16)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "..", "bench", "gpu"))
from compare import read  # noqa: E402

a, b = read(sys.argv[1]), read(sys.argv[2])
for name in sys.argv[3:]:
    print(f"{name}: {'equal' if a[name] == b[name] else 'differs'}")
