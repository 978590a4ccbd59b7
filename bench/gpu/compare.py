#!/usr/bin/env python3
"""bench/gpu/compare.py RESULT REFERENCE [--ulps N] [--magnitude FILE
[--relative R]]: compares two safetensors files tensor by tensor, in units in
the last place of the stored type.

For bf16, f16 and f32 tensors the distance of two values is the number of
representable values between them (adjacent values are 1 apart), so a result
rounded once from a nearly exact f32 sum is at most 1 from the reference
rounded once from the exact value. Integers must be equal. Prints one JSON
line and exits 1 when a tensor is missing or an element is further than
--ulps (default 1) and not excused by --magnitude; a tensor with such
elements also reports where they are (see where_rejected).

A sum's f32 additions may come in any order (docs/language.md 11.2), and
each order moves the sum by a few f32 roundings of the terms' magnitudes,
not of the sum's. Where the terms nearly cancel, that is many ulps of the
small result with nothing wrong. --magnitude FILE gives, under the same
tensor names, the sum of the terms' magnitudes for each element (for
attention, the same attention with |v|); an element further than --ulps is
then still accepted if it is within --relative (default 2^-12, a sixteenth
of a bf16 ulp) of its magnitude. A wrong mask, a lost rescale or a dropped
term moves a result by a good part of its magnitude and is still caught.
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


def value(bits, dtype):
    """The float that a stored element's bits hold."""
    if dtype == "BF16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    if dtype == "F16":
        return struct.unpack("<e", struct.pack("<H", bits))[0]
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def ordered(bits, dtype):
    """Maps float bits to integers in the order of their values (+0 == -0)."""
    sign = SIGN[dtype]
    return -(bits & (sign - 1)) if bits & sign else bits


def where_rejected(far, pairs, shape, dtype):
    """Where the rejected elements are, so that one run on a GPU can tell a
    layout error (a pattern in the rows or columns of 16 x 16 tiles) from a
    numerical one: their count, the first five with their multi-index, and
    how many fall on each row and column of a 16 x 16 tile."""
    def multi_index(flat):
        index = []
        for size in reversed(shape):
            index.append(flat % size)
            flat //= size
        return index[::-1]
    rows, columns = [0] * 16, [0] * 16
    for i in far:
        index = multi_index(pairs[i][0])
        columns[index[-1] % 16] += 1
        if len(index) > 1:
            rows[index[-2] % 16] += 1
    first = [{"index": multi_index(pairs[i][0]), "got": value(pairs[i][1], dtype),
              "expected": value(pairs[i][2], dtype)} for i in far[:5]]
    return {"rejected": len(far), "first_rejected": first,
            "rejected_by_row_mod_16": rows, "rejected_by_column_mod_16": columns}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("result")
    parser.add_argument("reference")
    parser.add_argument("--ulps", type=int, default=1)
    parser.add_argument("--magnitude", help="safetensors file: each element's sum of term magnitudes")
    parser.add_argument("--relative", type=float, default=2.0 ** -12,
                        help="with --magnitude: accepted distance as a fraction of the magnitude")
    args = parser.parse_args()
    result, reference = read(args.result), read(args.reference)
    magnitudes = read(args.magnitude) if args.magnitude else {}
    report, ok = {}, True
    for name, (dtype, shape, expected) in sorted(reference.items()):
        if name not in result or result[name][:2] != (dtype, shape):
            report[name] = "missing or of another dtype or shape"
            ok = False
            continue
        got = result[name][2]
        if name in magnitudes and magnitudes[name][1] != shape:
            report[name] = "its magnitude has another shape"
            ok = False
            continue
        entry = {"elements": len(expected)}
        if dtype in SIGN:
            nan = lambda b: (b & (SIGN[dtype] - 1)) > NAN_ABOVE[dtype]
            pairs = [(i, g, e) for i, (g, e) in enumerate(zip(got, expected)) if not nan(g) and not nan(e)]
            bad_nan = sum(1 for g, e in zip(got, expected) if nan(g) != nan(e))
            distances = [abs(ordered(g, dtype) - ordered(e, dtype)) for _, g, e in pairs]
        else:
            pairs, bad_nan = [], 0
            distances = [0 if g == e else float("inf") for g, e in zip(got, expected)]
        entry["equal"] = distances.count(0)
        entry["max_ulps"] = max(distances, default=0)
        far = [i for i, d in enumerate(distances) if d > args.ulps]
        if far and name in magnitudes and dtype in SIGN:
            scale_dtype, _, scale = magnitudes[name]
            # Each far element's distance as a fraction of its magnitude.
            fractions = []
            for i in far:
                index, g, e = pairs[i]
                size = abs(value(scale[index], scale_dtype))
                gap = abs(value(g, dtype) - value(e, dtype))
                fractions.append(gap / size if size > 0 else float("inf"))
            entry["beyond_ulps"] = len(far)
            entry["max_relative_to_magnitude"] = max(fractions)
            far = [i for i, f in zip(far, fractions) if f > args.relative]
        entry["nan_mismatches"] = bad_nan
        if far and dtype in SIGN:
            entry.update(where_rejected(far, pairs, shape, dtype))
        report[name] = entry
        ok = ok and not far and bad_nan == 0
    print(json.dumps({"result": args.result, "ok": ok, "tensors": report}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
