#!/usr/bin/env python3
"""bench/versus: one model built by two compilers, timed interleaved.

Builds MODEL with `loomc MODEL -o` for its mesh (or --mesh) once with each
compiler (--loomc, and --baseline when given), runs every build under
scripts/mpirun-local with `--bench --steps N`, --runs times, interleaving the
builds so that a busy machine slows both alike, and prints for each build its
collectives' bytes a rank per step (`loomc --explain`), the median step of
each run and the median of those. With two builds it also runs each once
with `--seed 1 --out` and prints the largest difference between their
outputs, so that a faster program that computes something else shows. See
README.md beside this file. Needs the repository's virtualenv (numpy,
safetensors, ml_dtypes: scripts/setup).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tables import table  # noqa: E402  (bench/tables.py)

import ml_dtypes  # noqa: E402,F401  (registers bfloat16 with numpy for safetensors)
import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MPIRUN = REPO / "scripts" / "mpirun-local"
DEFAULT_MODEL = HERE / "normalisation-split-rows.loom"


def run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench/versus: `{' '.join(cmd)}` exited with "
                 f"{done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def ranks_of(loomc: str, model: Path, mesh: list[str]) -> int:
    # The mesh after --mesh, as the per-device program's loom.mesh lists it.
    text = run([loomc, str(model), *mesh, "--emit=spmd"])
    found = re.search(r'loom\.mesh @\w+ \[([^\]]*)\]', text)
    if not found:
        sys.exit("bench/versus: no loom.mesh in the program")
    ranks = 1
    for size in re.findall(r'= (\d+)', found.group(1)):
        ranks *= int(size)
    return ranks


def explain(loomc: list[str], model: Path, mesh: list[str]) -> list[str]:
    """Bytes a rank per step, and the collectives (as how many calls)."""
    text = run([loomc[0], str(model), *mesh, *loomc[1:], "--explain"])
    found = re.search(r'^total: ([0-9.]+) bytes per rank per step', text,
                      re.MULTILINE)
    count = re.search(r'^collectives of the per-device program: ([0-9]+)'
                      r'(?:, run as ([0-9]+))?', text, re.MULTILINE)
    calls = "0"
    if count:
        calls = count.group(1)
        if count.group(2):
            calls += f" (as {count.group(2)})"
    return [f"{float(found.group(1)):,.0f}" if found else "0", calls]


def launcher(ranks: int) -> list[str]:
    return [str(MPIRUN), "-np", str(ranks)] if ranks > 1 else []


def median_step(binary: Path, ranks: int, steps: int) -> float:
    text = run([*launcher(ranks), str(binary), "--bench", "--steps",
                str(steps)])
    found = re.search(r'median step ([0-9.]+) ms', text)
    if not found:
        sys.exit(f"bench/versus: no median step in the output of {binary}:\n"
                 f"{text}")
    return float(found.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Time one model built by two compilers, interleaved.")
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL),
                    help="the .loom file (default: %(default)s)")
    ap.add_argument("--loomc", default=os.environ.get(
        "LOOMC", str(REPO / "build" / "bin" / "loomc")),
        help="the compiler (default $LOOMC, else build/bin/loomc)")
    ap.add_argument("--baseline", metavar="LOOMC",
                    help="a second compiler to compare with (an older build)")
    ap.add_argument("--baseline-flags", default="", metavar="FLAGS",
                    help="loomc flags of the baseline build only, such as "
                    "--combine-bytes=0; without --baseline, the baseline is "
                    "--loomc with these flags")
    ap.add_argument("--loomc-flags", default="", metavar="FLAGS",
                    help="loomc flags of the --loomc build only, such as "
                    "--overlap-collectives")
    ap.add_argument("--mesh", help="mesh sizes, as loomc --mesh takes them")
    ap.add_argument("--steps", type=int, default=20,
                    help="steps a run (default %(default)s)")
    ap.add_argument("--runs", type=int, default=5,
                    help="runs a build, interleaved (default %(default)s)")
    args = ap.parse_args()
    if args.steps < 1 or args.runs < 1:
        ap.error("--steps and --runs must be at least 1")

    model = Path(args.model).resolve()
    if not model.is_file():
        ap.error(f"no such model: {model}")
    mesh = ["--mesh", args.mesh] if args.mesh else []
    compilers = [("loomc", args.loomc, shlex.split(args.loomc_flags))]
    if args.baseline or args.baseline_flags or args.loomc_flags:
        compilers.insert(0, ("baseline", args.baseline or args.loomc,
                             shlex.split(args.baseline_flags)))
    ranks = ranks_of(args.loomc, model, mesh)

    with tempfile.TemporaryDirectory(prefix="loom-versus-") as work:
        work = Path(work)
        builds = []
        for name, loomc, flags in compilers:
            binary = work / name
            print(f"building {model.name} with {' '.join([loomc, *flags])}",
                  flush=True)
            run([loomc, str(model), *mesh, *flags, "-o", str(binary)])
            builds.append((name, [loomc, *flags], binary))
        times = {name: [] for name, _, _ in builds}
        for index in range(args.runs):
            for name, _, binary in builds:
                times[name].append(median_step(binary, ranks, args.steps))
            print(f"run {index + 1} of {args.runs}: " + ", ".join(
                f"{name} {times[name][-1]:.3f} ms" for name, _, _ in builds),
                flush=True)
        rows = []
        for name, loomc, _ in builds:
            rows.append([name, *explain(loomc, model, mesh),
                         " ".join(f"{t:.3f}" for t in times[name]),
                         f"{statistics.median(times[name]):.3f}"])
        print()
        print(f"{model.name}, {ranks} rank(s), {args.steps} steps a run, "
              f"{args.runs} runs a build (median step of the slowest rank)")
        print(table(["build", "bytes a rank per step", "collectives",
                     "median step a run (ms)", "median (ms)"], rows))
        if len(builds) == 2:
            for name, _, binary in builds:
                run([*launcher(ranks), str(binary), "--seed", "1", "--out",
                     str(work / f"{name}.safetensors")])
            first = load_file(str(work / "baseline.safetensors"))
            second = load_file(str(work / "loomc.safetensors"))
            if first.keys() != second.keys():
                sys.exit("bench/versus: the two builds have different outputs")
            worst = 0.0
            for key in first:
                a = first[key].astype(np.float64)
                b = second[key].astype(np.float64)
                if a.size == 0:
                    continue
                scale = np.abs(a).max() or 1.0
                worst = max(worst, float(np.abs(a - b).max()) / scale)
            speedup = (statistics.median(times["baseline"]) /
                       statistics.median(times["loomc"]))
            print(f"the baseline's median step takes {speedup:.2f}x loomc's; "
                  f"their outputs differ by at most {worst:.3g} of their "
                  f"largest magnitude (--seed 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
