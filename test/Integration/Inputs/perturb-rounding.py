"""Checks loomc --interpret --perturb-rounding (perturb-rounding.test): each
inexact result of x / 3 is the nearest value of its type or the one on the
exact quotient's other side, never anything else; some are the other one;
two streams differ and one stream repeats itself."""
import json
import struct
import subprocess
import sys

import numpy as np

loomc, workdir = sys.argv[1], sys.argv[2]


def load_file(path):
    """A safetensors file's tensors, bf16 ones as their 16-bit words (numpy
    has no bf16)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    types = {"F32": np.float32, "BF16": np.uint16}
    return {name: np.frombuffer(data[start:end], types[entry["dtype"]])
            for name, entry in header.items() if name != "__metadata__"
            for start, end in [entry["data_offsets"]]}


def run(dtype, *flags):
    source = f"{workdir}/thirds-{dtype}.loom"
    with open(source, "w") as f:
        f.write(f"model M(x: {dtype}[256]) -> (x1: {dtype}[256], y: {dtype}[256]) {{\n"
                "  return x * 1.0, x / 3.0\n}\n")
    out = f"{workdir}/{dtype}{''.join(flags)}.safetensors".replace("=", "")
    subprocess.run([loomc, source, "--interpret", "--seed", "5", *flags, "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    outputs = load_file(out)
    return outputs["x1"], outputs["y"]


def as_f64(values, dtype):
    if dtype == "bf16":  # 16-bit words
        return (values.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.astype(np.float64)


def step(values, dtype, upward):
    """Each value's neighbour of its type, up or down."""
    if dtype == "f32":
        return np.nextafter(values.astype(np.float32), np.where(upward, np.inf, -np.inf).astype(np.float32)).astype(np.float64)
    bits = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    away = upward == (values >= 0)
    bits = np.where(away, bits + 1, bits - 1)
    return ((bits.astype(np.uint32) << 16).view(np.float32)).astype(np.float64)


for dtype in ("f32", "bf16"):
    x, y = run(dtype)
    rounded, exact = as_f64(y, dtype), as_f64(x, dtype) / 3.0
    one = as_f64(run(dtype, "--perturb-rounding=1")[1], dtype)
    again = as_f64(run(dtype, "--perturb-rounding=1")[1], dtype)
    two = as_f64(run(dtype, "--perturb-rounding=2")[1], dtype)
    other = step(rounded, dtype, exact > rounded)
    inexact = rounded != exact
    for name, got in (("stream 1", one), ("stream 2", two)):
        allowed = (got == rounded) | (inexact & (got == other))
        print(f"{dtype} {name}: {np.count_nonzero(~allowed)} outside the two neighbours, "
              f"{np.count_nonzero(got != rounded)} of {np.count_nonzero(inexact)} inexact "
              f"results on the other side, "
              f"{'some' if np.count_nonzero(got != rounded) > 0 else 'none'} moved")
    print(f"{dtype}: streams 1 and 2 {'differ' if np.any(one != two) else 'agree'}, "
          f"stream 1 {'repeats' if np.array_equal(one, again) else 'does not repeat'}")
