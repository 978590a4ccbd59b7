"""Differential tests: N-rank runs against 1-rank runs against the interpreter.

For every model of models.py and every mesh (1-D and 2-D meshes up to 4
ranks; with --long or LOOM_LONG=1 also 8 ranks), and for the three examples
(or, with --random SEEDS, for the random programs of random_models.py
instead, one in three of which is bf16 and built and compared as the
examples' bf16 builds below; with --f16, every one is f16, built and
compared so; with --threes, every size is also a multiple of 3 and the
meshes have axes of 3 ranks; or, with --mutants COUNT, for programs made from the examples
by replacing numbers, names and operators by others of their kind, those
that loomc accepts for 2 to 8 ranks):

  1. compile with --dtype=f32 for the N-rank mesh and for the all-ones mesh
     (--mesh AXIS=1,...), run both with one --seed and --out;
  2. run the reference interpreter (loomc --interpret --dtype=f32);
  3. the N-rank program also in loopback mode (--loopback: every rank a
     thread of one process), whose outputs must equal the MPI run's bit for
     bit, or where they do not (MPI adds groups of more than two ranks in
     its own order) match them within the tolerance below;
  4. per output tensor, the N-rank run against the 1-rank run and the
     1-rank run against the interpreter: max|a - b| <= 1e-5 * max|b| + 1e-6
     (b is the reference side), integers exactly.

The examples are also built without --dtype (bf16) and compared the same
way, norm-wise: ||a - b|| / ||b|| <= 2e-2.

A fixed tolerance between two results fails an ill-conditioned output
that both compute equally well (independent rounding errors of size e
differ by about 1.4 e). So an output that misses only its tolerance (not
a NaN elsewhere, not an integer) is still accepted where, against a more
exact reference, its error is at most 2x the reference side's: the
interpreter's outputs with --unrounded (the same parameters and inputs,
f64 arithmetic with no op's result rounded to its type). That holds for
N ranks against 1 rank and for 1 rank against the interpreter (which
rounds each op's result); the case's line then says so, with both
errors.

With --cuda-on-cpu OBJ_DIR, each model runs on the mesh of its rendering
with the most axes (the examples on [dp: 2, tp: 2]) as its CUDA program:
loomc --target=cuda --emit=cuda, turned into host C++ by
runtime/tools/cuda-on-cpu.py and linked with libloomrt's CUDA backend
compiled the same way (OBJ_DIR/lib/libloomrt_cuda_on_cpu.a, over
runtime/emulation/CudaRuntimeOnCpu.h), run in loopback mode with the plain
kernels (LOOMRT_FAST_KERNELS=0) and the default fast ones (and, where the
code asks for GEMM epilogues, with LOOMRT_GEMM_EPILOGUE=1), and (N > 1 ranks) as N processes
under mpirun over the NCCL transport (OBJ_DIR/lib/
libloomrt_cuda_on_cpu_nccl.a, over runtime/emulation/NcclOnCpu.h), each compared
with the 1-rank CPU build as above; the NCCL run must give the loopback
run's bits. With --long, the fast kernels also run with the emulation's
blocks and threads in reverse order (LOOM_CUDA_ON_CPU_ORDER=reverse), which
must give their bits. With --nvcc, each CUDA program is also built for
the GPU (loomc --target=cuda -o, which runs nvcc), not run. With
--lazy-streams (a lazy stream's work runs only when something waits for
it), the loopback run of the fast kernels is repeated with every stream
lazy (LOOM_CUDA_ON_CPU_STREAMS=lazy), and the NCCL run with each rank's
compute stream lazy, then its communication stream (lazy:0, lazy:1,
steps launched anew); each must give the bits of the run it repeats.

With --check-started, the CPU programs run with LOOMRT_CHECK_STARTED=1:
each collective started early (--loomc-flags=--overlap-collectives) runs
at once and its result's bytes hold NaN until its wait, which ends the
program if an op in between wrote its input or its result
(docs/running.md); an op that read the result early shows in the outputs.

With --sanitize, the CPU programs (N-rank and 1-rank) are built with
loomc --sanitize, and with --cuda-on-cpu the CUDA programs with
cuda-on-cpu.py --sanitize: AddressSanitizer and UBSan stop a program at its
first finding, which fails the case; the outputs are compared as above (the
sanitized builds compute the same bits).

A model's renderings for different meshes differ only in their
annotations, not in what they compute, so one 1-rank build and one
interpreter run (of the rendering with the most axes) serve every mesh of a
model. Models marked as known compiler bugs in models.py run only with
--all. One line per case, `ok   NAME MESH ...` or `FAIL NAME MESH: REASON`,
then `differential: N cases, F failures`; the exit status is 1 on any
failure.
"""

import argparse
import concurrent.futures
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for safetensors)
import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import random_models  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "Robustness"))
import fuzz_frontend  # noqa: E402

F32_RTOL, F32_ATOL = 1e-5, 1e-6
BF16_NORM_TOL = 2e-2
# How much less accurate than the reference side an output that misses the
# tolerance may be, against a more exact reference (excuse()).
ACCURACY_FACTOR = 2.0
# How much further apart than the interpreter's outputs move when its
# roundings go either way at random (--perturb-rounding) two sides that miss
# the tolerance may be (excuse()), and how many such runs measure that.
NOISE_FACTOR = 2.0
NOISE_RUNS = 3
RUN_TIMEOUT, INTERPRET_TIMEOUT = 120, 300
# Seconds for one loomc run (--compile-timeout); a hang is a fault whatever
# the input.
DEFAULT_COMPILE_TIMEOUT = 120
# Meshes of the examples, whose own mesh is [dp: 2, tp: 2]: --mesh overrides.
EXAMPLE_AXES = ("dp", "tp")
# The examples and the most dp ranks each allows (the GPT's 2 microbatches
# times dp must divide its batch of 8).
EXAMPLES = (("gpt", 4), ("mlp", 16), ("llama", 8))


class Failure(Exception):
    pass


def run_command(argv, timeout, cwd, extra_env=None):
    """Runs argv in its own process group, with one BLAS thread (as
    mpirun-local gives each rank); returns its output; raises Failure with
    the command's output on a non-zero exit or a timeout."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **(extra_env or {}))
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, text=True, errors="replace", env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise Failure(f"`{' '.join(argv)}` timed out after {timeout:g} s; output:\n{tail(out)}")
    if proc.returncode != 0:
        raise Failure(f"`{' '.join(argv)}` exited with {proc.returncode}; output:\n{tail(out)}")
    return out


def tail(text, lines=12):
    kept = text.strip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept)


def load(path):
    try:
        return load_file(path)
    except Exception as error:  # a missing or malformed --out file
        raise Failure(f"cannot read {path}: {error}")


def numeric_error(a, b, norm_wise):
    """a's error against b where both are finite: ||a - b|| / ||b||
    norm-wise, max|a - b| otherwise."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = np.where(finite, a, 0.0), np.where(finite, b, 0.0)
    if not b.size:
        return 0.0
    if norm_wise:
        norm = np.linalg.norm(b)
        err = np.linalg.norm(a - b)
        return err / norm if norm > 0 else err
    return np.abs(a - b).max()


def compare(got, ref, norm_wise):
    """Checks the outputs `got` against `ref`; returns (problems, worst):
    problems maps an output's name (or "" for the set of outputs) to
    (text, whether only the tolerance was missed), worst is the largest
    error / tolerance ratio seen."""
    problems, worst = {}, 0.0
    if sorted(got) != sorted(ref):
        return {"": (f"outputs {sorted(got)} vs {sorted(ref)}", False)}, float("inf")
    for name in sorted(ref):
        a, b = got[name], ref[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            problems[name] = (f"{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}", False)
            continue
        if np.issubdtype(b.dtype, np.integer):
            wrong = np.count_nonzero(a != b)
            if wrong:
                diff = np.abs(a.astype(np.int64) - b.astype(np.int64)).max()
                problems[name] = (f"{name}: {wrong} of {b.size} integers differ (max|a-b| = {diff})",
                                  False)
                worst = float("inf")
            continue
        a, b = a.astype(np.float64), b.astype(np.float64)
        if not (np.array_equal(np.isnan(a), np.isnan(b))
                and np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0))):
            problems[name] = (f"{name}: NaN/inf at different places "
                              f"({np.count_nonzero(~np.isfinite(a))} vs "
                              f"{np.count_nonzero(~np.isfinite(b))} non-finite)", False)
            worst = float("inf")
            continue
        err = numeric_error(a, b, norm_wise)
        if norm_wise:
            ratio = err / BF16_NORM_TOL
            if ratio > 1:
                problems[name] = (f"{name}: ||a-b||/||b|| = {err:.3g} > {BF16_NORM_TOL}", True)
        else:
            finite = np.isfinite(b)
            scale = np.abs(np.where(finite, b, 0.0)).max() if b.size else 0.0
            tol = F32_RTOL * scale + F32_ATOL
            ratio = err / tol
            if ratio > 1:
                diff = np.where(finite, np.abs(a - b), 0.0)
                where = np.unravel_index(np.argmax(diff), b.shape)
                problems[name] = (f"{name}: max|a-b| = {err:.3g} > {tol:.3g} (max|ref| = {scale:.3g}) "
                                  f"at {list(map(int, where))}", True)
        worst = max(worst, ratio)
    return problems, worst


def excuse(problems, got, base, exact, norm_wise, noise=None):
    """Of `problems` (compare(got, base)), those that stand: an output that
    missed only the tolerance is accepted where, against `exact`, a more
    exact reference, its error is at most ACCURACY_FACTOR times `base`'s.
    Two results with independent rounding errors of size e differ by about
    1.4 e, so an ill-conditioned output can miss a fixed tolerance between
    them while each is as accurate as the other. Failing that, where
    `noise(name)` (the most the interpreter's output moves when its
    roundings go either way at random) is given, an output is accepted
    whose distance from `base` is at most NOISE_FACTOR times that: an
    output that cancels, then is scaled up, moves by more than either
    side's own error under any other order of roundings. Returns (the
    problems that stand, a note per accepted output)."""
    standing, notes = {}, []
    for name, (text, tolerance_only) in problems.items():
        if tolerance_only and name in exact:
            got_error = numeric_error(got[name], exact[name], norm_wise)
            base_error = numeric_error(base[name], exact[name], norm_wise)
            if got_error <= ACCURACY_FACTOR * base_error:
                notes.append(f"{name} misses the tolerance ({text.split(': ', 1)[1]}) but its error "
                             f"against the more exact reference, {got_error:.3g}, is within "
                             f"{ACCURACY_FACTOR:g}x the reference side's, {base_error:.3g}")
                continue
        if tolerance_only and noise is not None:
            spread = noise(name)
            distance = numeric_error(got[name], base[name], norm_wise)
            if spread is not None and distance <= NOISE_FACTOR * spread:
                notes.append(f"{name} misses the tolerance ({text.split(': ', 1)[1]}) but its "
                             f"distance from the reference side, {distance:.3g}, is within "
                             f"{NOISE_FACTOR:g}x the interpreter's own move when its roundings go "
                             f"either way at random, {spread:.3g}")
                continue
        standing[name] = (text, tolerance_only)
    return standing, notes


def texts(problems):
    return [text for text, _ in problems.values()]


def exact_differences(got, ref):
    """The outputs of `got` that are not bit for bit those of `ref`."""
    if sorted(got) != sorted(ref):
        return [f"outputs {sorted(got)} vs {sorted(ref)}"]
    problems = []
    for name in sorted(ref):
        a, b = got[name], ref[name]
        if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
            problems.append(f"{name} differs")
    return problems


class Memo:
    """Computes each key once, whichever worker asks first; the others wait."""

    def __init__(self):
        self.lock = threading.Lock()
        self.entries = {}

    def get(self, key, compute, label):
        """compute()'s value; its Failure for the first caller, a pointer to
        that caller's report for the others."""
        with self.lock:
            entry = self.entries.setdefault(key, {"lock": threading.Lock()})
        with entry["lock"]:
            if "value" not in entry:
                try:
                    entry["value"] = (compute(), None, label)
                except Failure as failure:
                    entry["value"] = (None, failure, label)
                    raise
            value, failure, first = entry["value"]
        if failure:
            raise Failure(f"its 1-rank or interpreter run failed (see {first})")
        return value


class Case:
    """One model on one mesh. `source` and `ref_source` are ("examples",
    FILE) or (FILE NAME, TEXT): the N-rank program, and the program that the
    1-rank build (with `one_flags`) and the interpreter run, shared by every
    case with the same `ref_key`."""

    def __init__(self, name, mesh_tag, ranks, source, n_flags, ref_source, one_flags, ref_key,
                 bf16=False, written_type="bf16"):
        self.name, self.mesh_tag, self.ranks = name, mesh_tag, ranks
        self.source, self.n_flags = source, n_flags
        self.ref_source, self.one_flags = ref_source, one_flags
        self.ref_key, self.bf16, self.written_type = ref_key, bf16, written_type

    @property
    def label(self):
        return f"{self.name} {self.mesh_tag}" + (f" {self.written_type}" if self.bf16 else "")


def mesh_flag(axes_sizes):
    return ["--mesh", ",".join(f"{a}={n}" for a, n in axes_sizes)] if axes_sizes else []


def build_cases(long, include_bugs, cuda_on_cpu=False, random_seeds=None, variants=None):
    """The cases to run; `variants` are random_models.generate()'s keywords."""
    cases = []
    for tag, mesh in [] if random_seeds else models.MESHES + (models.LONG_MESHES if long else []):
        if cuda_on_cpu and tag != "dp2tp2":
            continue
        sizes = dict(mesh)
        over = [(a, sizes.get(a, 1)) for a in EXAMPLE_AXES]
        ranks = int(np.prod([n for _, n in over]))
        for example, most_dp in EXAMPLES:
            if sizes.get("dp", 1) > most_dp:
                continue
            for bf16 in (False, True):
                source = ("examples", f"{example}.loom")
                cases.append(Case(f"example-{example}", tag, ranks, source, mesh_flag(over),
                                  source, mesh_flag([(a, 1) for a in EXAMPLE_AXES]),
                                  f"example-{example}-{'bf16' if bf16 else 'f32'}", bf16))
    chosen = ([random_models.generate(seed, **(variants or {})) for seed in random_seeds]
              if random_seeds
              else models.MODELS)
    for m in chosen:
        if m.known_bug and not include_bugs:
            continue
        # The 1-rank build and the interpreter run the rendering with the
        # most axes (the same global program as every other rendering).
        ref_tag, ref_mesh = max(m.meshes(False), key=lambda tm: len(tm[1]))
        ref_source = (f"{m.name}.{ref_tag}.loom", models.render(m.template, ref_mesh))
        one_flags = mesh_flag([(a, 1) for a, _ in ref_mesh])
        for tag, mesh in m.meshes(long):
            if cuda_on_cpu and tag != ref_tag:
                continue
            ranks = int(np.prod([n for _, n in mesh])) if mesh else 1
            source = (f"{m.name}.{tag}.loom", models.render(m.template, mesh))
            cases.append(Case(m.name, tag, ranks, source, [], ref_source, one_flags, m.name, m.bf16,
                              m.written_type))
    # The GPT example's interpreter runs are the longest: start them first.
    cases.sort(key=lambda c: not c.name.startswith("example-gpt"))
    return cases


def mutant_cases(count, mutation_seed, loomc, workdir, compile_timeout):
    """Programs made from the examples by replacing one to three numbers,
    names or operators by others of their kind (fuzz_frontend.py's
    replace_by_kind), kept where loomc accepts them for a mesh of 2 to 8
    ranks: other shapes, shardings and dataflow than any test wrote, such as
    a division by a parameter of zeros. Returns (cases, how many were
    made, a failure line for each mutant that loomc did not finish
    compiling in compile_timeout seconds)."""
    rng = random.Random(mutation_seed)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples")
    sources = [open(os.path.join(root, f"{name}.loom"), "rb").read() for name, _ in EXAMPLES]
    os.makedirs(os.path.join(workdir, "mutants"), exist_ok=True)
    cases, hung = [], []
    for index in range(count):
        text = fuzz_frontend.replace_by_kind(rng, sources[index % len(sources)])
        text = text.decode("utf-8", errors="replace")
        mesh = re.search(r"^mesh\s+\w+\s*=\s*\[([^\]]*)\]", text, re.MULTILINE)
        axes = re.findall(r"(\w+)\s*:\s*(\d+)", mesh.group(1)) if mesh else []
        ranks = int(np.prod([int(n) for _, n in axes])) if axes else 0
        if not 2 <= ranks <= 8:
            continue
        name = f"mutant-{mutation_seed}-{index}"
        path = os.path.join(workdir, "mutants", f"{name}.loom")
        with open(path, "w") as f:
            f.write(text)
        try:
            accepted = subprocess.run([loomc, path, "--dtype=f32", "--emit=cpu"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      timeout=compile_timeout).returncode == 0
        except subprocess.TimeoutExpired:
            hung.append(f"FAIL {name}: loomc --emit=cpu ran past {compile_timeout:g} s "
                        f"(the program: {path})")
            continue
        if accepted:
            source = (f"{name}.loom", text)
            cases.append(Case(name, "mesh", ranks, source, [], source,
                              mesh_flag([(a, 1) for a, _ in axes]), name))
    return cases, count, hung


class Runner:
    def __init__(self, args):
        self.args = args
        self.refs = Memo()
        self.exact_refs = Memo()
        self.perturbed_refs = Memo()
        self.retried = []  # runs that ended abnormally once (see execute)
        self.sanitize = ["--sanitize"] if args.sanitize else []
        self.loomc_flags = shlex.split(args.loomc_flags)
        self.src_root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))

    def source_path(self, source, directory):
        kind, rest = source
        if kind == "examples":
            return os.path.join(self.src_root, "examples", rest)
        path = os.path.join(directory, kind)
        with open(path, "w") as f:
            f.write(rest)
        return path

    def dtype_flags(self, case):
        return [] if case.bf16 else ["--dtype=f32"]

    def execute(self, exe, ranks, out, directory, extra_env=None, extra_args=()):
        argv = [exe, "--seed", str(self.args.seed), "--out", out, "--collective-timeout", "60",
                *extra_args]
        if ranks > 1:
            argv = [self.args.mpirun, "-np", str(ranks)] + argv
        try:
            run_command(argv, RUN_TIMEOUT, directory, extra_env)
        except Failure as first:
            # A job that ends abnormally is run once more (a numerical
            # mismatch is never retried: runs are deterministic). Once, under
            # a full parallel test run, a job failed without a trace; the
            # retry's report keeps such a failure visible instead of silent.
            self.retried.append(f"{' '.join(argv)} in {directory}: {first}")
            print(f"retrying once after: {first}", file=sys.stderr, flush=True)
            run_command(argv, RUN_TIMEOUT, directory, extra_env)
        return load(os.path.join(directory, out))

    def cuda_on_cpu(self, case, src, directory):
        """The model's CUDA program and libloomrt's CUDA backend built for the
        host, run in loopback mode with the plain kernels
        (LOOMRT_FAST_KERNELS=0) and the default fast ones, and on N > 1 ranks also a process per rank
        over NCCL; the outputs of each."""
        obj = self.args.cuda_on_cpu
        run_command([self.args.loomc, src, *self.dtype_flags(case), *case.n_flags, *self.loomc_flags,
                     "--target=cuda",
                     "--emit=cuda", "-o", "model.cu"], self.args.compile_timeout, directory)
        if self.args.nvcc:
            # The same program built for the GPU by nvcc (nothing runs it):
            # what the emulation's host compiler takes, nvcc must take too.
            run_command([self.args.loomc, src, *self.dtype_flags(case), *case.n_flags,
                         *self.loomc_flags, "--target=cuda", "-o", "model-gpu"],
                        self.args.compile_timeout, directory)
        run_command([sys.executable, os.path.join(self.src_root, "runtime", "tools", "cuda-on-cpu.py"),
                     "--build", obj, "--cxx", self.args.cxx, "--nccl", *self.sanitize, "model.cu", "model"],
                    self.args.compile_timeout, directory)
        outputs = {}
        variants = [("plain", {"LOOMRT_FAST_KERNELS": "0"}), ("fast", {})]
        # Where the code asks for GEMM epilogues (LOOMRT_GEMM_EPILOGUE=1, the
        # emulation's cuBLASLt runs them), also with them: within the
        # tolerance of the 1-rank CPU build, like the other kernels.
        with open(os.path.join(directory, "model.cu")) as f:
            if "loomrt_contract_epilogue(" in f.read():
                variants.append(("epilogue", {"LOOMRT_GEMM_EPILOGUE": "1"}))
        for kernels, env in variants:
            out = f"out-{kernels}.safetensors"
            run_command(["./model", "--loopback", "--seed", str(self.args.seed), "--out", out,
                         "--collective-timeout", "60"], RUN_TIMEOUT, directory, env)
            outputs[kernels] = load(os.path.join(directory, out))
        if self.args.long:
            # The emulation's blocks and threads in reverse order, which
            # must give the fast run's bits: thread order hides a barrier
            # missing between a lower thread's write and a higher one's read.
            run_command(["./model", "--loopback", "--seed", str(self.args.seed), "--out",
                         "out-reverse.safetensors", "--collective-timeout", "60"], RUN_TIMEOUT,
                        directory, {"LOOM_CUDA_ON_CPU_ORDER": "reverse"})
            outputs["reverse"] = load(os.path.join(directory, "out-reverse.safetensors"))
        if self.args.lazy_streams:
            # Every stream lazy, in loopback mode: a rank's work runs on
            # the thread of whichever rank waits for it first.
            run_command(["./model", "--loopback", "--seed", str(self.args.seed), "--out",
                         "out-lazy.safetensors", "--collective-timeout", "60"], RUN_TIMEOUT,
                        directory, {"LOOM_CUDA_ON_CPU_STREAMS": "lazy"})
            outputs["lazy"] = load(os.path.join(directory, "out-lazy.safetensors"))
        if case.ranks > 1:
            outputs["nccl"] = self.execute("./model", case.ranks, "out-nccl.safetensors", directory,
                                           {"LOOM_CUDA_ON_CPU_GPUS": str(case.ranks)})
            if self.args.lazy_streams:
                # Each of a rank's two streams lazy in turn (its work runs
                # only when waited for), steps launched anew: work that
                # reads the other stream's results without waiting for
                # them runs before them.
                for stream in ("0", "1"):
                    outputs["lazy" + stream] = self.execute(
                        "./model", case.ranks, f"out-lazy{stream}.safetensors", directory,
                        {"LOOM_CUDA_ON_CPU_GPUS": str(case.ranks),
                         "LOOM_CUDA_ON_CPU_STREAMS": "lazy:" + stream}, ["--no-graph"])
        return outputs

    def reference(self, case):
        """The 1-rank outputs, the interpreter's, and their comparison."""
        directory = os.path.join(self.args.workdir, "ref", case.ref_key)
        os.makedirs(directory, exist_ok=True)
        src = self.source_path(case.ref_source, directory)
        loomc = self.args.loomc
        run_command([loomc, src, *self.dtype_flags(case), *case.one_flags, *self.sanitize, "-o", "one"],
                    self.args.compile_timeout, directory)
        one = self.execute("./one", 1, "one.safetensors", directory)
        run_command([loomc, src, *self.dtype_flags(case), "--interpret", "--seed", str(self.args.seed),
                     "--out", "interp.safetensors"], INTERPRET_TIMEOUT, directory)
        interp = load(os.path.join(directory, "interp.safetensors"))
        problems, worst = compare(one, interp, case.bf16)
        notes = []
        if problems:
            problems, notes = excuse(problems, one, interp, self.exact(case), case.bf16,
                                     self.noise(case, interp))
        return one, interp, (problems, worst, notes)

    def exact(self, case):
        """The outputs of the case's model by the interpreter with
        --unrounded (f64 arithmetic, no op's result rounded to its type;
        the same parameters and inputs), run once a model, where an output
        first misses its tolerance."""
        def run():
            directory = os.path.join(self.args.workdir, "ref", case.ref_key)
            src = self.source_path(case.ref_source, directory)
            run_command([self.args.loomc, src, *self.dtype_flags(case), "--interpret", "--unrounded",
                         "--seed", str(self.args.seed), "--out", "interp-unrounded.safetensors"],
                        INTERPRET_TIMEOUT, directory)
            return load(os.path.join(directory, "interp-unrounded.safetensors"))
        return self.exact_refs.get(case.ref_key, run, case.label)

    def noise(self, case, interp):
        """For an output's name, the most it moves from `interp`, the
        interpreter's outputs, in NOISE_RUNS runs whose roundings go either
        way at random (--perturb-rounding 1, 2, ...; run once a model, where
        an output first needs them); None for an output they lack."""
        def run():
            directory = os.path.join(self.args.workdir, "ref", case.ref_key)
            src = self.source_path(case.ref_source, directory)
            runs = []
            for stream in range(1, NOISE_RUNS + 1):
                out = f"interp-perturbed-{stream}.safetensors"
                run_command([self.args.loomc, src, *self.dtype_flags(case), "--interpret",
                             f"--perturb-rounding={stream}", "--seed", str(self.args.seed),
                             "--out", out], INTERPRET_TIMEOUT, directory)
                runs.append(load(os.path.join(directory, out)))
            return runs

        def spread(name):
            runs = self.perturbed_refs.get(case.ref_key, run, case.label)
            if name not in interp or any(name not in r for r in runs):
                return None
            return max(numeric_error(r[name], interp[name], case.bf16) for r in runs)
        return spread

    def reproduce(self, case):
        """For a random program, how to print it again; for a mutant, where
        it is."""
        if case.name.startswith("mutant-"):
            return f" (the program: {self.args.workdir}/mutants/{case.name}.loom)"
        if not case.name.startswith("random-"):
            return ""
        seed, flags = case.name[len("random-"):], ""
        for variant, _ in random_models.VARIANTS:
            if seed.startswith(variant + "-"):
                seed, flags = seed[len(variant) + 1:], flags + " --" + variant
        return (f" (the program: test/Integration/differential/random_models.py "
                f"--seed {seed}{flags} --mesh {case.mesh_tag})")

    def run_case(self, case):
        start = time.monotonic()
        loopback = ""
        try:
            one, interp, (ref_problems, ref_worst, ref_notes) = self.refs.get(
                case.ref_key, lambda: self.reference(case), case.label)
            # Each note once, after the runs it holds for (the CUDA
            # program's variants often give the same bits).
            accepted = {n: ["1 rank against the interpreter"] for n in ref_notes}

            def check(got, base, what):
                """got against base: the problems that stand, as text."""
                found, ratio = compare(got, base, case.bf16)
                if found:
                    found, notes = excuse(found, got, base, self.exact(case), case.bf16,
                                          self.noise(case, interp))
                    for note in notes:
                        accepted.setdefault(note, []).append(what)
                return texts(found), ratio

            directory = os.path.join(self.args.workdir, case.name, case.mesh_tag + ("-bf16" if case.bf16 else ""))
            os.makedirs(directory, exist_ok=True)
            src = self.source_path(case.source, directory)
            if self.args.cuda_on_cpu:
                problems, worst = [], 0.0
                outputs = self.cuda_on_cpu(case, src, directory)
                for kernels, got in outputs.items():
                    what = {"nccl": "NCCL, a process per rank",
                            "lazy": "loopback mode, every stream lazy",
                            "lazy0": "NCCL, the compute stream lazy",
                            "lazy1": "NCCL, the communication stream lazy",
                            "reverse": "fast kernels in reverse order",
                            "epilogue": "GEMM epilogues"}.get(kernels, f"{kernels} kernels")
                    found, ratio = check(got, one, what)
                    problems += [f"{what}: {p}" for p in found]
                    worst = max(worst, ratio)
                if "nccl" in outputs:
                    # The emulated NCCL adds in rank order, and the transport
                    # widens sums that NCCL would round more than once, so it
                    # must give the loopback mode's bits.
                    problems += [f"NCCL against loopback: {p}"
                                 for p in exact_differences(outputs["nccl"], outputs["fast"])]
                    loopback = "NCCL = loopback exactly; "
                if "lazy" in outputs:
                    problems += [f"lazy streams in loopback mode against eager: {p}"
                                 for p in exact_differences(outputs["lazy"], outputs["fast"])]
                    loopback += "lazy streams in loopback mode = eager exactly; "
                for stream, name in (("lazy0", "compute"), ("lazy1", "communication")):
                    if stream in outputs:
                        problems += [f"lazy {name} stream against NCCL: {p}"
                                     for p in exact_differences(outputs[stream], outputs["nccl"])]
                        loopback += f"lazy {name} stream = NCCL exactly; "
                if "reverse" in outputs:
                    problems += [f"reverse order against thread order: {p}"
                                 for p in exact_differences(outputs["reverse"], outputs["fast"])]
                    loopback += "reverse order = thread order exactly; "
                if "epilogue" in outputs:
                    loopback += "GEMM epilogues within tolerance; "
                if self.args.nvcc:
                    loopback += "nvcc builds it; "
            else:
                run_command([self.args.loomc, src, *self.dtype_flags(case), *case.n_flags,
                             *self.loomc_flags, *self.sanitize,
                             "-o", "model"],
                            self.args.compile_timeout, directory)
                got = self.execute("./model", case.ranks, "out.safetensors", directory)
                problems, worst = check(got, one, "against 1 rank")
            if case.ranks > 1 and not self.args.cuda_on_cpu:
                # The loopback mode (every rank a thread of one process)
                # must give the MPI run's outputs exactly.
                run_command(["./model", "--loopback", "--seed", str(self.args.seed), "--out",
                             "loopback.safetensors", "--collective-timeout", "60"],
                            RUN_TIMEOUT, directory)
                looped = load(os.path.join(directory, "loopback.safetensors"))
                # Bit for bit unless MPI sums a group of more than two ranks
                # in another order than the loopback mode's rank order.
                if exact_differences(looped, got):
                    loop_problems, loop_worst = check(looped, got, "loopback against MPI")
                    problems += [f"loopback against MPI: {p}" for p in loop_problems]
                    loopback = f"loopback against MPI: error/tolerance {loop_worst:.2g}; "
                else:
                    loopback = "loopback = MPI exactly; "
        except Failure as failure:
            return False, f"FAIL {case.label}: {failure}" + self.reproduce(case)
        seconds = time.monotonic() - start
        ranks = f"{case.ranks} rank" + ("s" if case.ranks > 1 else "")
        if self.args.cuda_on_cpu:
            ranks = f"CUDA on the CPU, {ranks}"
        reasons = [f"{ranks} against 1 rank: {p}" for p in problems]
        reasons += [f"1 rank against the interpreter: {p}" for p in texts(ref_problems)]
        if reasons:
            return False, f"FAIL {case.label}: " + "; ".join(reasons) + self.reproduce(case)
        os.remove(os.path.join(directory, "model"))  # kept only where a case fails
        within = "".join(f"; {', '.join(whats)}: {note}" for note, whats in accepted.items())
        return True, (f"ok   {case.label} ({ranks}; {loopback}error/tolerance {worst:.2g} against 1 rank, "
                      f"{ref_worst:.2g} 1 rank against the interpreter{within}; {seconds:.1f} s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loomc", default="loomc")
    parser.add_argument("--mpirun", required=True, help="scripts/mpirun-local")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--long", action="store_true", help="also 8-rank meshes (as LOOM_LONG=1)")
    parser.add_argument("--filter", default="", help="only cases whose 'NAME MESH' contains this")
    parser.add_argument("--all", action="store_true", help="also the models marked as known bugs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--random", metavar="SEEDS",
                        help="the random programs of random_models.py for these seeds ('1-20,25') "
                             "instead of the examples and models.py's models")
    parser.add_argument("--mutants", type=int, metavar="COUNT",
                        help="instead of the models, COUNT programs made from the examples by "
                             "replacing numbers, names and operators by others of their kind, "
                             "each that loomc accepts for 2 to 8 ranks run as a case (kept in "
                             "WORKDIR/mutants)")
    parser.add_argument("--mutation-seed", type=int, default=1,
                        help="the seed of --mutants' replacements (default 1)")
    parser.add_argument("--compile-timeout", type=float, default=DEFAULT_COMPILE_TIMEOUT,
                        metavar="SECONDS",
                        help="the longest one loomc run may take before it counts as a hang "
                             f"and fails its case (default {DEFAULT_COMPILE_TIMEOUT})")
    parser.add_argument("--cuda-on-cpu", metavar="OBJ_DIR",
                        help="run each model's CUDA program on the CPU instead (see above); "
                             "OBJ_DIR is the build directory with lib/libloomrt_cuda_on_cpu.a")
    parser.add_argument("--cxx", default="clang++", help="the C++ compiler of --cuda-on-cpu")
    parser.add_argument("--nvcc", action="store_true",
                        help="with --cuda-on-cpu, also build each CUDA program for the GPU "
                             "(loomc --target=cuda -o: nvcc), without running it")
    parser.add_argument("--loomc-flags", default="", metavar="FLAGS",
                        help="more loomc options for the N-rank builds (CPU and CUDA), such as "
                             "'--overlap-collectives'; the 1-rank build and the interpreter "
                             "run without them")
    parser.add_argument("--lazy-streams", action="store_true",
                        help="with --cuda-on-cpu, also run each program in loopback mode with "
                             "every stream lazy (LOOM_CUDA_ON_CPU_STREAMS=lazy), which must give "
                             "the fast kernels' bits, and each N-rank NCCL program with its "
                             "compute stream lazy, then its communication stream (lazy:0, lazy:1; "
                             "steps launched anew), which must give the NCCL run's bits")
    random_models.add_variant_arguments(parser.add_argument_group(
        "variants of the random programs (with --random; random_models.py has the same flags)"))
    parser.add_argument("--sanitize", action="store_true",
                        help="build the CPU programs with loomc --sanitize (AddressSanitizer and "
                             "UBSan: any finding fails the case)")
    parser.add_argument("--check-started", action="store_true",
                        help="run the CPU programs with LOOMRT_CHECK_STARTED=1 (the runtime checks "
                             "that nothing touches a started collective's buffers before its wait)")
    args = parser.parse_args()
    long = args.long = args.long or os.environ.get("LOOM_LONG") == "1"
    args.mpirun = os.path.abspath(args.mpirun) if os.path.sep in args.mpirun else args.mpirun
    args.loomc = os.path.abspath(args.loomc) if os.path.sep in args.loomc else args.loomc
    args.workdir = os.path.abspath(args.workdir)
    os.makedirs(args.workdir, exist_ok=True)

    if args.compile_timeout <= 0:
        parser.error("--compile-timeout: give a number of seconds above 0")
    if args.check_started:
        # Inherited by every program and, through mpirun, by every rank.
        os.environ["LOOMRT_CHECK_STARTED"] = "1"
    if args.nvcc and not args.cuda_on_cpu:
        parser.error("--nvcc goes with --cuda-on-cpu")
    if args.lazy_streams and not args.cuda_on_cpu:
        parser.error("--lazy-streams goes with --cuda-on-cpu")
    if args.cuda_on_cpu:
        args.cuda_on_cpu = os.path.abspath(args.cuda_on_cpu)
        if args.sanitize:
            # The emulation's fibers switch stacks, which AddressSanitizer's
            # fake stacks do not follow.
            options = os.environ.get("ASAN_OPTIONS", "")
            os.environ["ASAN_OPTIONS"] = ":".join(
                o for o in (options, "detect_stack_use_after_return=0") if o)
    try:
        seeds = random_models.parse_seeds(args.random) if args.random else None
    except ValueError as error:
        parser.error(f"--random: {error}")
    variants = random_models.variant_options(args)
    for flag, _ in random_models.VARIANTS:
        if variants[flag.replace("-", "_")] and not seeds:
            parser.error(f"--{flag} goes with --random")
    if args.mutants is not None and seeds:
        parser.error("--mutants and --random are two sources of programs: give one")
    hung = []
    if args.mutants is not None:
        cases, count, hung = mutant_cases(args.mutants, args.mutation_seed, args.loomc,
                                          args.workdir, args.compile_timeout)
        if args.cuda_on_cpu:  # as the models: the CUDA programs run on one mesh
            cases = [c for c in cases if c.ranks == 4]
        cases = [c for c in cases if args.filter in c.label]
        print(f"mutants: {count} made, {len(cases)} accepted by loomc for 2 to 8 ranks",
              flush=True)
        for line in hung:
            print(line, flush=True)
            print(line, file=sys.stderr, flush=True)
    else:
        cases = [c for c in build_cases(long, args.all, bool(args.cuda_on_cpu), seeds, variants)
                 if args.filter in c.label]
    if args.list:
        for case in cases:
            print(case.label)
        return 0
    runner = Runner(args)
    failures = len(hung)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for ok, line in pool.map(runner.run_case, cases):
            failures += not ok
            print(line, flush=True)
            if not ok:  # also on stderr, which lit shows in full on failure
                print(line, file=sys.stderr, flush=True)
    retried = f", {len(runner.retried)} run(s) retried" if runner.retried else ""
    print(f"differential: {len(cases)} cases, {failures} failures{retried} "
          f"({time.monotonic() - start:.0f} s)", flush=True)
    for text in runner.retried:
        print(f"retried: {text}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
