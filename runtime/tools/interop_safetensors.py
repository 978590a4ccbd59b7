#!/usr/bin/env python3
"""Interoperability of libloomrt's safetensors code with the safetensors
Python package, both ways.

(a) `loomrt-safetensors write` makes a file; the package must load it with
    the expected metadata, dtypes, shapes and exact values.
(b) The package writes a file of every dtype Loom has (BF16 through
    ml_dtypes when it is installed); `loomrt-safetensors check` must accept
    it and `loomrt-safetensors dump` must print the same shapes, sums and
    first elements as computed here from numpy's arrays.

Run with a Python that has numpy and safetensors (the project's .venv).
Prints `interop: ok`, or the first mismatch and exits 1.
"""

import argparse
import os
import subprocess
import sys

import numpy as np
import safetensors
import safetensors.numpy

try:
    import ml_dtypes
except ImportError:  # BF16 is then checked through its raw bits only
    ml_dtypes = None


class Mismatch(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Mismatch(message)


def run(tool, *args):
    proc = subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    expect(proc.returncode == 0, "'%s %s' failed (exit %d): %s" % (
        os.path.basename(tool), " ".join(args), proc.returncode, proc.stderr.strip()))
    return proc.stdout


def raw_tensors(path):
    """{name: (dtype string, shape, bytes)} through the package's own parser,
    which needs no numpy dtype (so BF16 works without ml_dtypes)."""
    with open(path, "rb") as f:
        return {name: (info["dtype"], list(info["shape"]), bytes(info["data"]))
                for name, info in safetensors.deserialize(f.read())}


def check_tool_file(tool, tmp):
    """(a): the file `tool write` makes, read by the package."""
    path = os.path.join(tmp, "loomrt-written.safetensors")
    run(tool, "write", path)
    with safetensors.safe_open(path, framework="numpy") as f:
        expect(f.metadata() == {"format": "pt"}, "metadata is %r, expected {'format': 'pt'}" % f.metadata())
    half = np.array([0.25, -2, 65504, 1e-4], dtype=np.float64).astype(np.float16)
    expected = {
        "a": ("F32", [2, 3], np.array([0.5 * i - 1 for i in range(6)], "<f4").reshape(2, 3).tobytes()),
        # bf16 is the upper half of an f32; these four values are exact.
        "b": ("BF16", [4], (np.array([1, 2, 3, -0.5], "<f4").view("<u4") >> 16).astype("<u2").tobytes()),
        # 1e-4 rounds to nearest even in f16, as numpy's astype does.
        "c": ("F16", [2, 2], half.astype("<f2").tobytes()),
        "d": ("I32", [3], np.array([-1, 0, 7], "<i4").tobytes()),
        "e": ("I64", [2], np.array([1 << 40, -3], "<i8").tobytes()),
    }
    got = raw_tensors(path)
    expect(sorted(got) == sorted(expected), "tensors %s, expected %s" % (sorted(got), sorted(expected)))
    for name, (dtype, shape, data) in expected.items():
        expect(got[name][0] == dtype, "tensor %s: dtype %s, expected %s" % (name, got[name][0], dtype))
        expect(got[name][1] == shape, "tensor %s: shape %s, expected %s" % (name, got[name][1], shape))
        expect(got[name][2] == data, "tensor %s: bytes %s, expected %s" % (name, got[name][2].hex(), data.hex()))
    # The numpy loader too, for every dtype it knows.
    arrays = load_numpy(path)
    expect(arrays["a"].dtype == np.float32 and arrays["a"].tolist() == [[-1, -0.5, 0], [0.5, 1, 1.5]],
           "tensor a: %r" % arrays["a"])
    expect(arrays["c"].dtype == np.float16 and np.array_equal(arrays["c"].ravel(), half), "tensor c: %r" % arrays["c"])
    expect(arrays["d"].dtype == np.int32 and arrays["d"].tolist() == [-1, 0, 7], "tensor d: %r" % arrays["d"])
    expect(arrays["e"].dtype == np.int64 and arrays["e"].tolist() == [1 << 40, -3], "tensor e: %r" % arrays["e"])
    if "b" in arrays:
        expect(arrays["b"].astype(np.float32).tolist() == [1, 2, 3, -0.5], "tensor b: %r" % arrays["b"])


def load_numpy(path):
    """The package's numpy loader; BF16 is left out where numpy cannot
    represent it."""
    try:
        return safetensors.numpy.load_file(path)
    except Exception as error:  # older packages without BF16 for numpy
        print("interop: note: safetensors.numpy cannot load BF16 (%s); checking its raw bits only" % error)
        arrays = {}
        with safetensors.safe_open(path, framework="numpy") as f:
            for name in f.keys():
                try:
                    arrays[name] = f.get_tensor(name)
                except Exception:
                    pass
        return arrays


DTYPE_NAMES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "int32": "I32", "int64": "I64"}


def expected_dump_line(name, array):
    """What `loomrt-safetensors dump` must print for `array`: the sum in
    float64, left to right as the tool adds, and the first element."""
    values = array.ravel()
    total = 0.0
    for value in values.astype(np.float64).tolist():
        total += value
    if values.size == 0:
        first = "none"
    elif array.dtype.kind == "i":
        first = str(int(values[0]))
    else:
        first = "%.9g" % float(values[0])
    return "%s %s [%s] sum=%.9g first=%s" % (name, DTYPE_NAMES[array.dtype.name], ", ".join(map(str, array.shape)),
                                             total, first)


def check_package_file(tool, tmp):
    """(b): a file the package writes, read by the tool."""
    rng = np.random.default_rng(7)
    tensors = {
        "w.f32": rng.standard_normal((3, 5)).astype(np.float32),
        "w.f16": (rng.standard_normal((4, 2)) * 100).astype(np.float16),
        "h.tiny": np.array([6e-8, 1e-5, -3e-7, 6.1e-5], np.float16),  # f16 subnormals
        "h.max": np.array([65504, -0.0, 1.5], np.float16),
        "i.32": rng.integers(-2**31, 2**31, (7,), dtype=np.int32),
        "i.64": np.array([2**62, -2**40, 3], np.int64),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    if ml_dtypes is not None:
        tensors["w.bf16"] = rng.standard_normal((2, 3, 2)).astype(ml_dtypes.bfloat16)
    else:
        print("interop: note: ml_dtypes is not installed; skipping the BF16 tensor of part (b)")
    path = os.path.join(tmp, "package-written.safetensors")
    try:
        safetensors.numpy.save_file(tensors, path, metadata={"format": "np", "source": "interop"})
    except Exception as error:
        if "w.bf16" not in tensors:
            raise
        print("interop: note: safetensors.numpy cannot save BF16 (%s); skipping it" % error)
        del tensors["w.bf16"]
        safetensors.numpy.save_file(tensors, path, metadata={"format": "np", "source": "interop"})

    out = run(tool, "check", path)
    expect(out == "ok: %d tensors\n" % len(tensors), "check printed %r for %d tensors" % (out, len(tensors)))
    expected = [expected_dump_line(name, tensors[name]) for name in sorted(tensors)]
    got = run(tool, "dump", path).splitlines()
    for want, have in zip(expected, got):
        expect(want == have, "dump line differs:\n  expected: %s\n  got:      %s" % (want, have))
    expect(len(got) == len(expected), "dump printed %d lines, expected %d" % (len(got), len(expected)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", required=True, help="the loomrt-safetensors binary")
    parser.add_argument("--tmp", required=True, help="a directory for the files")
    args = parser.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    try:
        check_tool_file(args.tool, args.tmp)
        check_package_file(args.tool, args.tmp)
    except Mismatch as mismatch:
        print("interop: FAIL: %s" % mismatch)
        return 1
    print("interop: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
