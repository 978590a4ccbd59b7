"""Bytes that loomc's reshards move, against the least any reshard could move.

For every pair of layouts of one tensor on one mesh (each mesh axis on a
dimension, in every order, or on none), the program `y = x * 2.0` with x in
the first layout and y in the second is partitioned by `loomc --explain`,
and the bytes its collectives receive per rank (the report's figure) are
compared with a lower bound: the most elements that any device needs for
its target block and does not hold in its source block. A ratio of 1 is a
reshard that moves nothing it could have kept; the worst pairs are printed
so that the partitioner's next improvement can start from them.
With --execute, each batch's program is also built (`loomc -o`), run with
every rank in one process (`--loopback`) and its outputs compared with the
reference interpreter's (`loomc --interpret`, same seed): bit for bit for
`x * 2.0`, within a relative L2 distance of 1e-6 for the partial sums
(whose f32 additions may come in any order). Cheaper plans are only worth
having if they still put every element where it belongs.
Standard library only."""

import argparse
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ELEMENT_BYTES = 4  # the programs are f32


def parse_mesh(text):
    axes = []
    for part in text.split(","):
        name, _, size = part.partition("=")
        if not name or not size.isdigit() or int(size) < 1:
            raise ValueError(f"--mesh wants name=size,...; not '{part}'")
        axes.append((name.strip(), int(size)))
    return axes


def layouts(mesh, shape):
    """Every layout: each axis on one dimension or none; every order within
    a dimension; only those whose dimensions divide evenly."""
    sizes = dict(mesh)
    names = [name for name, _ in mesh]
    found = []
    for assign in itertools.product(range(len(shape) + 1), repeat=len(names)):
        groups = [[a for a, d in zip(names, assign) if d == dim]
                  for dim in range(len(shape))]
        if any(shape[d] % math.prod(sizes[a] for a in g)
               for d, g in enumerate(groups)):
            continue
        for orders in itertools.product(
                *[itertools.permutations(g) for g in groups]):
            found.append(tuple(tuple(o) for o in orders))
    return found


def spelled(shape, layout):
    dims = []
    for size, axes in zip(shape, layout):
        if not axes:
            dims.append(str(size))
        elif len(axes) == 1:
            dims.append(f"{size}:{axes[0]}")
        else:
            dims.append(f"{size}:(" + ", ".join(axes) + ")")
    return "f32[" + ", ".join(dims) + "]"


def lower_bound(mesh, shape, source, target):
    """Bytes that the neediest device must receive: its target block less
    what its source block already holds."""
    names = [name for name, _ in mesh]
    sizes = dict(mesh)
    worst = 0
    for coords in itertools.product(*[range(s) for _, s in mesh]):
        at = dict(zip(names, coords))
        need = have = 1
        for size, src_axes, dst_axes in zip(shape, source, target):
            def interval(axes):
                count = math.prod(sizes[a] for a in axes)
                index = 0
                for a in axes:
                    index = index * sizes[a] + at[a]
                block = size // count
                return index * block, (index + 1) * block
            s0, s1 = interval(src_axes)
            t0, t1 = interval(dst_axes)
            need *= t1 - t0
            have *= max(0, min(s1, t1) - max(s0, t0))
        worst = max(worst, need - have)
    return worst * ELEMENT_BYTES


COLLECTIVE = re.compile(
    r"^//\s+\d+\. (\w+)(?:\(\w+\))? over .*?, (\d+) bytes per rank")
MADE_BY = re.compile(r"^//\s+made by loom\.(?:mul|sum) at [^:]*:(\d+):")
# A collective on the input itself, before the op: pair i's input is x<i>.
MADE_BY_INPUT = re.compile(r"^//\s+made by %x(\d+)\b")


def source(mesh, shape, layout, partial):
    """The input's type: the layout's, or, for a partial sum over the axes
    `partial`, one more dimension first, split over them, to sum away."""
    if not partial:
        return spelled(shape, layout)
    sizes = dict(mesh)
    leading = math.prod(sizes[a] for a in partial)
    return spelled([leading] + shape, (tuple(partial),) + tuple(layout))


def measure(loomc, mesh, shape, pairs, workdir):
    """Bytes a rank per pair, and the collectives' kinds, from one program
    holding all `pairs` (from, to, partial axes): pair i is computed on line
    FIRST + i."""
    header = "mesh m = [" + ", ".join(f"{n}: {s}" for n, s in mesh) + "]\n"
    inputs = ", ".join(f"x{i}: {source(mesh, shape, p[0], p[2])}"
                       for i, p in enumerate(pairs))
    outputs = ", ".join(f"y{i}: {spelled(shape, p[1])}"
                        for i, p in enumerate(pairs))
    lines = [header, f"model M({inputs})\n    -> ({outputs}) {{\n"]
    first = sum(line.count("\n") for line in lines) + 1
    for i, pair in enumerate(pairs):
        lines.append(f"  t{i} = sum(x{i}, dim = 0)\n" if pair[2]
                     else f"  t{i} = x{i} * 2.0\n")
    lines.append("  return " + ", ".join(f"t{i}" for i in range(len(pairs)))
                 + "\n}\n")
    path = os.path.join(workdir, "pairs.loom")
    with open(path, "w") as f:
        f.writelines(lines)
    run = subprocess.run([loomc, path, "--emit=spmd", "--explain"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"bench/reshard: loomc failed on {path}:\n{run.stderr}")
    bytes_of = [0] * len(pairs)
    kinds = [[] for _ in pairs]
    pending = None
    # Collectives without a reason (a canonicalization's) belong to no pair.
    unattributed = 0
    for line in run.stdout.splitlines():
        if m := COLLECTIVE.match(line):
            if pending:
                unattributed += pending[1]
            pending = (m.group(1), int(m.group(2)))
        elif pending and ((m := MADE_BY.match(line)) or
                          (n := MADE_BY_INPUT.match(line))):
            index = int(m.group(1)) - first if m else int(n.group(1))
            bytes_of[index] += pending[1]
            kinds[index].append(pending[0])
            pending = None
    if pending:
        unattributed += pending[1]
    if m := re.search(r"^// total: (\d+) bytes", run.stdout, re.M):
        if int(m.group(1)) != sum(bytes_of) + unattributed:
            sys.exit(f"bench/reshard: {path}: the collectives found add up to "
                     f"{sum(bytes_of) + unattributed} bytes, --explain's "
                     f"total is {m.group(1)}")
    return bytes_of, kinds, unattributed


COMPARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu",
                       "compare.py")


def execute(loomc, path, partial, workdir):
    """Builds the program at `path`, runs it in loopback mode and compares
    its outputs with the interpreter's; returns None, or what went wrong
    (the outputs that differ, by pair, or the failed command's output)."""
    program = os.path.join(workdir, "pairs")
    got = os.path.join(workdir, "got.safetensors")
    want = os.path.join(workdir, "want.safetensors")
    steps = [[loomc, path, "-o", program],
             [program, "--loopback", "--seed", "3", "--out", got],
             [loomc, path, "--interpret", "--seed", "3", "--out", want],
             [sys.executable, COMPARE, got, want] +
             (["--relative-l2", "1e-6"] if partial else ["--ulps", "0"])]
    for command in steps:
        run = subprocess.run(command, capture_output=True, text=True)
        if command[0] == sys.executable and run.returncode == 1:
            try:
                tensors = json.loads(run.stdout)["tensors"]

                def differs(t):  # compare.py's entry for one output
                    if isinstance(t, str):
                        return True
                    if "ok" in t:
                        return not t["ok"]
                    return bool(t.get("rejected") or t["nan_mismatches"])

                return sorted(int(name[1:]) for name, t in tensors.items()
                              if differs(t))
            except (ValueError, KeyError):
                pass
        if run.returncode != 0:
            return (f"{' '.join(command)} exited {run.returncode}:\n"
                    f"{(run.stdout + run.stderr)[-3000:]}")
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loomc", default="loomc",
                        help="the compiler (default: loomc on the PATH)")
    parser.add_argument("--mesh", default="a=2,b=3,c=2",
                        help="mesh axes as name=size,... (default a=2,b=3,c=2)")
    parser.add_argument("--shape", default="24,36",
                        help="the tensor's shape (default 24,36)")
    parser.add_argument("--batch", type=int, default=60,
                        help="pairs per compiled program (default 60)")
    parser.add_argument("--worst", type=int, default=12,
                        help="how many of the worst pairs to list (default 12)")
    parser.add_argument("--partial", action="store_true",
                        help="sources that are partial sums: for every "
                        "nonempty set of axes, the sum of a tensor split over "
                        "them on a leading dimension, in every layout of the "
                        "other axes (the bound then ignores the sums)")
    parser.add_argument("--pairs", metavar="FILE",
                        help="also write every pair's figures to FILE (tab-"
                        "separated: from, to, bytes a rank, bound), to compare "
                        "two compilers")
    parser.add_argument("--execute", action="store_true",
                        help="also build and run each batch's program in "
                        "loopback mode and compare its outputs with the "
                        "reference interpreter's (exits 1 on a difference)")
    args = parser.parse_args()
    try:
        mesh = parse_mesh(args.mesh)
        shape = [int(s) for s in args.shape.split(",")]
    except ValueError as error:
        parser.error(str(error))
    if args.batch < 1:
        parser.error("--batch must be at least 1")

    every = layouts(mesh, shape)
    if args.partial:
        names = [name for name, _ in mesh]
        pairs = [(s, t, partial)
                 for count in range(1, len(names) + 1)
                 for partial in itertools.combinations(names, count)
                 for s in every if not any(a in partial for d in s for a in d)
                 for t in every]
    else:
        pairs = [(s, t, ()) for s in every for t in every if s != t]
    print(f"mesh [{args.mesh}], f32{shape}: {len(every)} layouts, "
          f"{len(pairs)} reshards{' of partial sums' if args.partial else ''}",
          flush=True)
    started = time.time()
    results = []
    unattributed = 0
    executed = 0
    with tempfile.TemporaryDirectory() as workdir:
        for start in range(0, len(pairs), args.batch):
            chunk = pairs[start:start + args.batch]
            measured, kinds, lost = measure(args.loomc, mesh, shape, chunk,
                                            workdir)
            unattributed += lost
            if args.execute:
                wrong = execute(args.loomc, os.path.join(workdir, "pairs.loom"),
                                args.partial, workdir)
                if wrong:
                    kept = os.path.join(tempfile.gettempdir(),
                                        f"reshard-wrong-{os.getpid()}.loom")
                    shutil.copy(os.path.join(workdir, "pairs.loom"), kept)
                    if isinstance(wrong, list):
                        wrong = "outputs differ from the interpreter's:\n" + \
                            "\n".join(
                                f"  y{i}: {source(mesh, shape, chunk[i][0], chunk[i][2])}"
                                f" -> {spelled(shape, chunk[i][1])}"
                                for i in wrong)
                    sys.exit(f"bench/reshard: the program of pairs {start} to "
                             f"{start + len(chunk) - 1} (kept as {kept}): "
                             f"{wrong}")
                executed += len(chunk)
            for pair, got, kind in zip(chunk, measured, kinds):
                results.append((pair, got,
                                lower_bound(mesh, shape, pair[0], pair[1]),
                                kind))
            done = start + len(chunk)
            if done % (args.batch * 20) < args.batch or done == len(pairs):
                print(f"  {done} of {len(pairs)} ({time.time() - started:.0f} s)",
                      file=sys.stderr, flush=True)

    if args.pairs:
        with open(args.pairs, "w") as f:
            for (s, t, partial), got, low, _ in results:
                f.write(f"{source(mesh, shape, s, partial)}\t"
                        f"{spelled(shape, t)}\t{got}\t{low}\n")
    total = sum(r[1] for r in results)
    bound = sum(r[2] for r in results)
    at_bound = sum(1 for r in results if r[1] <= r[2])
    over = [r for r in results if r[1] > r[2]]
    ratio = lambda r: r[1] / r[2] if r[2] else math.inf
    print(f"bytes a rank, all reshards: {total:,} (lower bound {bound:,}; "
          f"{total / bound:.3f}x)")
    print(f"collectives, all reshards: {sum(len(r[3]) for r in results):,} "
          f"({sum(1 for r in results for k in r[3] if k != 'all_slice'):,} "
          "that communicate)")
    if unattributed:
        print(f"and {unattributed:,} bytes a rank in collectives without a "
              "reason (made by a canonicalization), in no pair's figure")
    print(f"at the bound: {at_bound} of {len(results)}; above it: {len(over)}")
    if args.execute:
        print(f"executed in loopback mode: {executed} of {len(results)}, every "
              "output equal to the interpreter's"
              + (" (relative L2 within 1e-6)" if args.partial else ""))
    for limit in (1.5, 2, 4):
        print(f"  more than {limit}x the bound: "
              f"{sum(1 for r in over if ratio(r) > limit)}")
    below = [r for r in results if r[1] < r[2]]
    if below:
        # The bound is a bound: fewer bytes would mean a wrong answer or a
        # report that undercounts.
        print(f"BELOW THE BOUND (a report or a bound is wrong): {len(below)}")
        for (s, t, partial), got, low, _ in below[:args.worst]:
            print(f"  {source(mesh, shape, s, partial)} -> "
                  f"{spelled(shape, t)}: {got} < {low}")
    print(f"worst {min(args.worst, len(over))} (by bytes above the bound):")
    print("| from | to | bytes a rank | bound | collectives |")
    print("|---|---|---|---|---|")
    for (s, t, partial), got, low, kind in sorted(
            over, key=lambda r: (r[2] - r[1], r[0]))[:args.worst]:
        print(f"| `{source(mesh, shape, s, partial)}` | `{spelled(shape, t)}` | {got:,} | "
              f"{low:,} | {', '.join(kind)} |")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
