"""tensors-equal.py A B NAME...: for each named tensor, whether files A and B
hold it with the same type, shape and bits ("NAME: equal" or "NAME:
differs"). Reads the safetensors layout itself, as numpy has no bf16."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {name: (info["dtype"], info["shape"], body[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
for name in sys.argv[3:]:
    print(f"{name}: {'equal' if a[name] == b[name] else 'differs'}")
