#!/usr/bin/env python3
"""bench/gpu/compare.py RESULT REFERENCE [--ulps N]: compares two safetensors
files tensor by tensor, in units in the last place of the stored type.

For bf16, f16 and f32 tensors the distance of two values is the number of
representable values between them (adjacent values are 1 apart), so a result
rounded once from a nearly exact f32 sum is at most 1 from the reference
rounded once from the exact value. Integers must be equal. Prints one JSON
line and exits 1 when a tensor is missing or further than --ulps (default 1).
Pure Python: runs wherever bench/gpu/run runs.
"""
import argparse
import json
import struct
import sys

WIDTH = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8}
SIGN = {"BF16": 0x8000, "F16": 0x8000, "F32": 0x80000000}
NAN_ABOVE = {"BF16": 0x7F80, "F16": 0x7C00, "F32": 0x7F800000}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = entry["dtype"]
        begin, end = entry["data_offsets"]
        raw = data[8 + length + begin:8 + length + end]
        code = {2: "H", 4: "I", 8: "q"}[WIDTH[dtype]]
        if dtype in ("I32",):
            code = "i"
        tensors[name] = (dtype, entry["shape"], struct.unpack(f"<{len(raw) // WIDTH[dtype]}{code}", raw))
    return tensors


def ordered(bits, dtype):
    """Maps float bits to integers in the order of their values (+0 == -0)."""
    sign = SIGN[dtype]
    return -(bits & (sign - 1)) if bits & sign else bits


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result")
    parser.add_argument("reference")
    parser.add_argument("--ulps", type=int, default=1)
    args = parser.parse_args()
    result, reference = read(args.result), read(args.reference)
    report, ok = {}, True
    for name, (dtype, shape, expected) in sorted(reference.items()):
        if name not in result or result[name][:2] != (dtype, shape):
            report[name] = "missing or of another dtype or shape"
            ok = False
            continue
        got = result[name][2]
        if dtype in SIGN:
            nan = lambda b: (b & (SIGN[dtype] - 1)) > NAN_ABOVE[dtype]
            bad_nan = sum(1 for g, e in zip(got, expected) if nan(g) != nan(e))
            distances = [abs(ordered(g, dtype) - ordered(e, dtype))
                         for g, e in zip(got, expected) if not nan(g) and not nan(e)]
        else:
            bad_nan = 0
            distances = [0 if g == e else float("inf") for g, e in zip(got, expected)]
        worst = max(distances, default=0)
        report[name] = {"elements": len(expected), "equal": distances.count(0),
                        "max_ulps": worst, "nan_mismatches": bad_nan}
        ok = ok and worst <= args.ulps and bad_nan == 0
    print(json.dumps({"result": args.result, "ok": ok, "tensors": report}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
