"""Drives differential/run.py's compare() and excuse() with made-up outputs
(differential-tolerance.test): which misses of the tolerance a more exact
reference excuses, and which it does not; and which the interpreter's
own move under random roundings (--perturb-rounding) excuses."""
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
import run  # noqa: E402

rng = np.random.default_rng(7)
exact = {"y": rng.standard_normal(64), "n": np.arange(4, dtype=np.int32)}


def case(title, got, base, norm_wise=False, noise=None):
    found, _ = run.compare(got, base, norm_wise)
    standing, notes = run.excuse(found, got, base, exact, norm_wise, noise)
    print(f"{title}: problems {len(found)}" + (f", after excuse {len(standing)}" if found else ""))
    for note in notes:
        print(f"note: {note}")


def with_y(y):
    return {"y": y, "n": exact["n"].copy()}


case("equal", with_y(exact["y"].copy()), with_y(exact["y"].copy()))
# Independent errors of 2e-5 on each side: they differ by more than the
# tolerance (1e-5 of the largest value), each equally close to exact.
off_a = exact["y"] + 2e-5 * rng.choice([-1.0, 1.0], 64)
off_b = exact["y"] + 2e-5 * rng.choice([-1.0, 1.0], 64)
case("f32, both rounded alike off the exact values", with_y(off_a), with_y(off_b))
case("f32, one side exact and the other off",
     with_y(exact["y"] + 2 * (off_a - exact["y"])), with_y(exact["y"].copy()))
case("f32, got 3x further off than the reference side",
     with_y(exact["y"] + 3 * (off_a - exact["y"])), with_y(off_b))
bf_a = exact["y"] * (1 + 0.015 * rng.standard_normal(64))
bf_b = exact["y"] * (1 + 0.015 * rng.standard_normal(64))
case("bf16, both rounded alike off the exact values", with_y(bf_a), with_y(bf_b), True)
wrong = bf_a.copy()
wrong[5] = -wrong[5] + 3
case("bf16, a wrong element", with_y(wrong), with_y(bf_b), True)
nan = off_a.copy()
nan[3] = np.nan
case("NaN in another place", with_y(nan), with_y(off_b))
case("integers", {"y": off_b, "n": exact["n"] + 1}, with_y(off_b))
# Where the accuracy rule does not excuse it: an output that moves by more
# under the interpreter's random roundings than the two sides differ (an
# ill-conditioned one), and one that moves by less.
far = exact["y"] + 3 * (off_a - exact["y"])
case("f32, 3x further off, the output moving by 1e-4 under random roundings",
     with_y(far), with_y(off_b), noise=lambda name: 1e-4)
case("f32, 3x further off, the output moving by 1e-5 under random roundings",
     with_y(far), with_y(off_b), noise=lambda name: 1e-5)
case("f32, 3x further off, no perturbed run of the output",
     with_y(far), with_y(off_b), noise=lambda name: None)
case("NaN in another place, however the output moves",
     with_y(nan), with_y(off_b), noise=lambda name: 1.0)
