#!/usr/bin/env python3
"""shift-bf16.py IN MAGNITUDE NAME ULPS {cancelling|plain} OUT: copies the
safetensors file IN to OUT with one bf16 element of tensor NAME moved by ULPS
representable values (away from zero). The element is the one smallest
against its magnitude in MAGNITUDE (`cancelling`: its terms nearly cancel)
or the largest against it (`plain`). For bench-gpu-tools.test's check of
compare.py --magnitude. Pure Python."""
import json
import struct
import sys

source, magnitude_path, name, ulps, pick, out = sys.argv[1:]


def load(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    return data, 8 + length, header[name]


def bf16(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


data, base, entry = load(source)
scale_data, scale_base, scale_entry = load(magnitude_path)
assert entry["dtype"] == scale_entry["dtype"] == "BF16"
count = (entry["data_offsets"][1] - entry["data_offsets"][0]) // 2
begin, scale_begin = base + entry["data_offsets"][0], scale_base + scale_entry["data_offsets"][0]
values = struct.unpack(f"<{count}H", data[begin:begin + 2 * count])
scales = struct.unpack(f"<{count}H", scale_data[scale_begin:scale_begin + 2 * count])
ratios = [(abs(bf16(v)) / bf16(s), i) for i, (v, s) in enumerate(zip(values, scales))
          if bf16(s) > 0 and bf16(v) != 0]
_, index = min(ratios) if pick == "cancelling" else max(ratios)
# Away from zero: the magnitude bits grow, the sign stays.
struct.pack_into("<H", data, begin + 2 * index, values[index] + int(ulps))
with open(out, "wb") as f:
    f.write(data)
print(f"{name}[{index}]: {bf16(values[index])} -> {bf16(values[index] + int(ulps))}, "
      f"magnitude {bf16(scales[index])}")
