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
With --relative-l2 BOUND, each float tensor is compared as a whole
instead: its relative L2 distance ||result - reference|| / ||reference||
must be within BOUND (for a whole model's outputs against another
implementation's, which rounds elsewhere: GPT-2 small's final hidden state
in bf16 is about 1e-2 from the same model in f32, and 0.93 from it with
the attention not causal; docs/performance.md).
Pure Python: runs wherever bench/gpu/run runs.
"""
import argparse
import array
import json
import math
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


def floats(bits, dtype):
    """A float tensor's stored elements as Python floats, in bulk (a bf16's
    bits are the upper half of the f32 of the same value)."""
    if dtype == "F32":
        return array.array("f", struct.pack(f"<{len(bits)}I", *bits))
    if dtype == "BF16":
        wide = bytearray(4 * len(bits))
        narrow = array.array("H", bits).tobytes()
        wide[2::4], wide[3::4] = narrow[0::2], narrow[1::2]
        return array.array("f", bytes(wide))
    return [value(b, dtype) for b in bits]


def compare_relative_l2(result, reference, bound):
    """Each float tensor of `reference` against `result`'s of that name and
    shape (any float dtype): (report, ok)."""
    report, ok = {}, True
    for name, (dtype, shape, expected) in sorted(reference.items()):
        if name not in result or result[name][1] != shape or dtype not in SIGN \
                or result[name][0] not in SIGN:
            report[name] = "missing, of another shape, or not a float tensor"
            ok = False
            continue
        got, want = floats(result[name][2], result[name][0]), floats(expected, dtype)
        squares = sum((g - w) * (g - w) for g, w in zip(got, want))
        norm = math.sqrt(sum(w * w for w in want))
        distance = math.sqrt(squares) / norm if norm > 0 else math.sqrt(squares)
        entry = {"elements": len(want), "relative_l2": distance,
                 "max_abs_difference": max((abs(g - w) for g, w in zip(got, want)), default=0.0)}
        # NaN compares false: a NaN anywhere fails.
        entry["ok"] = distance <= bound
        report[name] = entry
        ok = ok and entry["ok"]
    return report, ok


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
    parser.add_argument("--relative-l2", type=float, metavar="BOUND",
                        help="compare each float tensor's relative L2 distance with BOUND instead")
    args = parser.parse_args()
    try:
        result, reference = read(args.result), read(args.reference)
    except (OSError, ValueError, KeyError, struct.error) as error:
        # A run that failed left no file, or a broken one: say so in the
        # JSON line that the table prints.
        print(json.dumps({"result": args.result, "ok": False, "error": str(error)}))
        return 1
    if args.relative_l2 is not None:
        report, ok = compare_relative_l2(result, reference, args.relative_l2)
        print(json.dumps({"result": args.result, "reference": args.reference,
                          "bound": args.relative_l2, "ok": ok, "tensors": report}))
        return 0 if ok else 1
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
