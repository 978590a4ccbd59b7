"""logsumexp.py inputs OUT | compare GOT REF | split-inputs OUT_FINITE OUT_NAN | loss GOT REF

Inputs for logsumexp.loom whose rows hold the special cases of an online
maximum and sum of exp(x - max), and the comparison of a run's outputs with
the interpreter's: NaN where it has NaN, infinities equal, finite values
within N * 2^-24 relative (recursive f32 summation's bound over a row).

split-inputs writes logits and targets for ce-split.loom (8 classes split
over 2 ranks): in the first file, some rows have one rank's half all -inf
(that half must add nothing); in the second, a row is -inf everywhere (the
loss is NaN). `loss` compares the loss with the interpreter's likewise."""
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

R, N = 1032, 600


def inputs(path):
    rng = np.random.default_rng(7)
    x = rng.normal(0, 3, (R, N)).astype(np.float32)
    x[1] = np.linspace(-50, 80, N)  # the maximum grows at every element
    x[2, 17] = np.nan               # a NaN: both results NaN
    x[3, 300] = np.inf              # +inf: the sum is NaN (exp(inf - inf))
    x[4] = -np.inf                  # a row of -inf: the sum is NaN
    x[5, :400] = -np.inf            # -inf before the finite values
    x[6] = np.linspace(80, -50, N)  # the maximum comes first
    x[7] = 1e30
    x[7, 599] = 3e38                # huge values, the largest last
    save_file({"x": x}, path)


def compare(got_path, ref_path):
    got, ref = load_file(got_path), load_file(ref_path)
    bad = []
    for name in ("m", "s"):
        a, b = got[name].astype(np.float64), ref[name].astype(np.float64)
        for r in range(R):
            # N * 2^-24: recursive f32 summation's bound over a row.
            same = (np.isnan(a[r]) and np.isnan(b[r])) or a[r] == b[r] or (
                np.isfinite(b[r]) and abs(a[r] - b[r]) <= N * 2.0**-24 * abs(b[r]))
            if not same:
                bad.append(f"{name}[{r}] = {a[r]!r}, not {b[r]!r}")
    print("\n".join(bad) if bad else "logsumexp: every row as the interpreter's")
    return 1 if bad else 0


def split_inputs(finite_path, nan_path):
    logits = np.random.default_rng(3).normal(0, 2, (4, 8)).astype(np.float32)
    logits[0, :4] = -np.inf  # rank 0's half of row 0
    logits[1, 4:] = -np.inf  # rank 1's half of row 1
    logits[2, 1:] = -np.inf  # all but one logit
    targets = np.array([5, 2, 0, 7], np.int32)
    save_file({"logits": logits, "t": targets}, finite_path)
    logits[3] = -np.inf
    save_file({"logits": logits, "t": targets}, nan_path)


def loss(got_path, ref_path):
    a = float(load_file(got_path)["output_0"])
    b = float(load_file(ref_path)["output_0"])
    same = (np.isnan(a) and np.isnan(b)) or (np.isfinite(b) and abs(a - b) <= 2e-6 * abs(b))
    print(f"loss {a!r} {'as' if same else 'differs from'} the interpreter's {b!r}")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "split-inputs":
        split_inputs(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "loss":
        sys.exit(loss(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "inputs":
        inputs(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
