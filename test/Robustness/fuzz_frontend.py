#!/usr/bin/env python3
"""Seeded, deterministic robustness run of loomc over mutated inputs.

Feeds loomc variants of the given seed files (byte flips, deleted and
duplicated tokens, truncations, deep nesting, huge numbers, empty input,
binary garbage, invalid UTF-8, and numbers and names replaced by others of
their kind, which often leave a valid program of other shapes, shardings
or dataflow) and fails when any run ends by a signal, an abort, an exit
code other than 0 or 1, an exit code 1 without an `error:` diagnostic, an
internal error (a fault of the compiler whatever the input), or a timeout.
The runs stop at every stage in turn, from the syntax tree to the CPU and
CUDA programs, `--explain` and `--report`, so that an input the front end
accepts also goes through propagation, the partitioner, the memory plan
and both code generators. Failing inputs are copied to --crash-dir so they
can become regression tests.
"""

import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

# Where each run stops, in turn.
STOPS = [["--emit=loom"], ["--emit=ast"], ["--emit=params"], ["--emit=sharded"],
         ["--emit=spmd"], ["--emit=cpu"], ["--target=cuda", "--emit=cuda"],
         ["--emit=cpu", "--overlap-collectives"], ["--explain"], ["--report"]]
SMALL_NUMBERS = [b"1", b"2", b"3", b"4", b"6", b"8", b"12", b"16", b"24", b"32"]
NAME = re.compile(rb"[A-Za-z_][A-Za-z_0-9]*")
TOKEN = re.compile(rb"[A-Za-z_][A-Za-z_0-9]*|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\"[^\"\n]*\"|\S")


def tokens(data):
    return [(m.start(), m.end()) for m in TOKEN.finditer(data)]


def replace_by_kind(rng, seed):
    """`seed` (bytes) with one to three tokens replaced by others of their
    kind: a whole number by a small one, a name by another name of the
    file, an arithmetic operator by another. The result is often a valid
    program of other shapes, shardings or dataflow (run.py --mutants runs
    such programs against the interpreter)."""
    data = seed
    names = sorted({m.group() for m in NAME.finditer(seed)})
    for _ in range(rng.randint(1, 3)):
        start, end = rng.choice(tokens(data))
        token = data[start:end]
        if token.isdigit():
            data = data[:start] + rng.choice(SMALL_NUMBERS) + data[end:]
        elif NAME.fullmatch(token):
            data = data[:start] + rng.choice(names) + data[end:]
        elif token in (b"+", b"-", b"*", b"/"):
            data = data[:start] + rng.choice([b"+", b"-", b"*", b"/"]) + data[end:]
    return data


def mutate(rng, seed):
    """One mutated variant of `seed` (bytes)."""
    kind = rng.randrange(13)
    toks = tokens(seed)
    if kind == 0:  # byte flips
        data = bytearray(seed)
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 1 and toks:  # delete tokens
        data = seed
        for _ in range(rng.randint(1, 4)):
            toks = tokens(data)
            if not toks:
                break
            start, end = toks[rng.randrange(len(toks))]
            data = data[:start] + data[end:]
        return data
    if kind == 2 and toks:  # duplicate tokens
        data = seed
        for _ in range(rng.randint(1, 4)):
            toks = tokens(data)
            start, end = toks[rng.randrange(len(toks))]
            data = data[:end] + b" " + data[start:end] + data[end:]
        return data
    if kind == 3:  # truncate
        return seed[: rng.randrange(len(seed) + 1)]
    if kind == 4 and toks:  # swap two tokens
        (a0, a1), (b0, b1) = sorted(rng.sample(toks, 2)) if len(toks) > 1 else (toks[0], toks[0])
        return seed[:a0] + seed[b0:b1] + seed[a1:b0] + seed[a0:a1] + seed[b1:]
    if kind == 5:  # deep nesting at a random place
        depth = rng.choice([300, 1000, 100000])
        opener = rng.choice([b"(", b"[", b"{", b"-"])
        at = rng.randrange(len(seed) + 1)
        closer = {b"(": b")", b"[": b"]", b"{": b"}", b"-": b""}[opener]
        body = opener * depth + b"x" + closer * rng.choice([0, depth])
        return seed[:at] + body + seed[at:]
    if kind == 6 and toks:  # huge or odd numbers in place of a token
        start, end = toks[rng.randrange(len(toks))]
        number = rng.choice([b"99999999999999999999999", b"1e999", b"-9223372036854775808",
                             b"0", b"-1", b"9223372036854775807", b"4294967296", b"0.0", b"1e-400",
                             b"3.5", b"1" + b"0" * 500])
        return seed[:start] + number + seed[end:]
    if kind == 7:  # empty or whitespace only
        return rng.choice([b"", b" ", b"\n\n", b"// only a comment", b"/* unterminated"])
    if kind == 8:  # binary garbage
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 400)))
    if kind == 9:  # invalid UTF-8 inserted
        at = rng.randrange(len(seed) + 1)
        bad = rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])
        return seed[:at] + bad + seed[at:]
    if kind == 10 and toks:  # replace a token by another token of the file
        start, end = toks[rng.randrange(len(toks))]
        s2, e2 = toks[rng.randrange(len(toks))]
        return seed[:start] + seed[s2:e2] + seed[end:]
    if kind == 11 and toks:
        return replace_by_kind(rng, seed)
    # long flat expression chains
    at = rng.randrange(len(seed) + 1)
    return seed[:at] + b"x" + b" + x" * rng.choice([100, 5000, 50000]) + seed[at:]


def run_one(loomc, path, timeout, extra):
    """Returns (problem or None, whether loomc accepted the input, seconds)."""
    start = time.monotonic()
    problem, returncode = check_one(loomc, path, timeout, extra)
    return problem, problem is None and returncode == 0, time.monotonic() - start


def check_one(loomc, path, timeout, extra):
    """(problem or None, loomc's exit code or None)."""
    try:
        proc = subprocess.run([loomc, path, *extra], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout after %d s" % timeout, None
    except OSError as error:
        return "could not run loomc: %s" % error, None
    code = proc.returncode
    if code < 0:
        return "killed by signal %d" % -code, code
    if code not in (0, 1):
        return "exit code %d" % code, code
    if code == 1 and b"error:" not in proc.stderr:
        return "exit code 1 without an error diagnostic", code
    if b"internal parser error" in proc.stderr or b"internal error" in proc.stderr:
        return "internal error: " + proc.stderr.decode(errors="replace")[:300], code
    return None, code


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loomc", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--timeout", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--crash-dir", default=None)
    parser.add_argument("seeds", nargs="+")
    args = parser.parse_args()
    if os.environ.get("LOOM_LONG") == "1":
        args.count *= 10

    seeds = [open(path, "rb").read() for path in args.seeds]
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="loom-fuzz-")
    cases = []
    for index in range(args.count):
        seed = seeds[index % len(seeds)]
        data = mutate(rng, seed)
        path = os.path.join(work, "case%05d.loom" % index)
        with open(path, "wb") as f:
            f.write(data)
        extra = STOPS[index % len(STOPS)]
        cases.append((path, extra))

    failures = []
    accepted = {}  # stop -> inputs loomc accepted there
    slowest = (0.0, "")
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(lambda case: (case, run_one(args.loomc, case[0], args.timeout, case[1])), cases)
        for (path, extra), (problem, ok, seconds) in results:
            if problem:
                failures.append((path, extra, problem))
            stop = " ".join(extra)
            accepted[stop] = accepted.get(stop, 0) + ok
            slowest = max(slowest, (seconds, os.path.basename(path)))

    for path, extra, problem in failures:
        print("FAIL %s %s: %s" % (path, " ".join(extra), problem))
        if args.crash_dir:
            os.makedirs(args.crash_dir, exist_ok=True)
            shutil.copy(path, args.crash_dir)
    # Timings are information only; only crashes, aborts and timeouts fail.
    print("fuzz: %d inputs, %d failures" % (len(cases), len(failures)))
    print("fuzz: slowest input %s took %.2f s" % (slowest[1], slowest[0]))
    # How deep the inputs went: those accepted at each stop (information).
    print("fuzz: accepted, by stop: " + ", ".join("%s %d" % item for item in accepted.items()))
    if not failures:
        shutil.rmtree(work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
