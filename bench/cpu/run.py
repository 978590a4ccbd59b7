#!/usr/bin/env python3
"""bench/cpu: step time of examples/gpt.loom on the CPU runtime, and its GEMM bound.

Builds examples/gpt.loom with loomc (bf16 as written, and --dtype=f32) for
1 rank (mesh dp=1,tp=1), 2 ranks (dp=2,tp=1 and dp=1,tp=2) and 4 ranks
(dp=2,tp=2), runs each with `--bench`, and reports the per-rank median step
time and the share of it spent in loomrt_contract. The 1-rank step is then
set against its lower bound: the same cblas_sgemm calls with f32 operands
already in place (gemm_bound.c), derived from `loomc --emit=cpu` by the rules
of loomrt_contract and loomrt_attention (runtime/cpu/Kernels.cpp). See
README.md beside this file. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tables import table  # noqa: E402  (bench/tables.py)

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXAMPLE = REPO / "examples" / "gpt.loom"
MPIRUN = REPO / "scripts" / "mpirun-local"

# (dp, tp); ranks = dp * tp.
MESHES = [(1, 1), (2, 1), (1, 2), (2, 2)]
DTYPES = ["bf16", "f32"]  # bf16: the example as written; f32: --dtype=f32
GOAL_RATIO = 1.5  # 1-rank step time / GEMM lower bound


# --------------------------------------------------------------------------
# The sgemm calls of one step, from `loomc --emit=cpu`
# --------------------------------------------------------------------------

@dataclass
class View:
    size: list[int]
    stride: list[int]


@dataclass
class Contraction:
    nb: int
    nm: int
    nn: int
    nk: int
    dtypes: list[str]  # a, b, out
    a: View
    a_sum: View
    b: View
    b_sum: View
    out: View


@dataclass
class Gemm:
    """One call site of cblas_sgemm in the step, run `reps` times."""
    kind: str  # contract | attention
    label: str
    reps: int
    loops: list[tuple[str, int, int]]  # enclosing loops: (var, count, line)
    batch: int
    m: int = 0
    n: int = 0
    k: int = 0
    ta: str = "N"
    tb: str = "N"
    lda: int = 0
    ldb: int = 0
    a_per_rep: bool = False
    b_per_rep: bool = False
    packed: list[str] = field(default_factory=list)  # what loomrt_contract packs
    s: int = 0
    t: int = 0
    e: int = 0
    f: int = 0
    scale: float = 1.0

    def gflop(self) -> float:
        if self.kind == "contract":
            return 2e-9 * self.reps * self.batch * self.m * self.n * self.k
        return 2e-9 * self.reps * self.batch * (self.s * self.t * self.e +
                                                self.s * self.f * self.t)

    def calls(self) -> int:
        return self.reps * self.batch * (2 if self.kind == "attention" else 1)

    def spec(self) -> str:
        """The line gemm_bound reads."""
        if self.kind == "contract":
            return (f"contract {self.label} {self.batch} {self.ta} {self.tb} {self.m} "
                    f"{self.n} {self.k} {self.lda} {self.ldb} {int(self.a_per_rep)} "
                    f"{int(self.b_per_rep)}")
        return (f"attention {self.label} {self.batch} {self.s} {self.t} {self.e} "
                f"{self.f} {self.scale!r}")

    def sgemms(self) -> str:
        """Per repetition: batch x sgemm(transA transB, MxNxK, lda/ldb/ldc)."""
        if self.kind == "contract":
            return (f"{self.batch} x {self.ta}{self.tb} {self.m}x{self.n}x{self.k} "
                    f"ld {self.lda}/{self.ldb}/{self.n}")
        return (f"{self.batch} x (NT {self.s}x{self.t}x{self.e} ld {self.e}/{self.e}/{self.t}, "
                f"NN {self.s}x{self.f}x{self.t} ld {self.t}/{self.f}/{self.f})")


def product(xs: list[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def is_dense(v: View, first: int, last: int) -> bool:
    """Kernels.cpp isDense: dims [first, last) dense row-major, innermost stride 1."""
    expected = 1
    for d in range(last - 1, first - 1, -1):
        if v.size[d] != 1 and v.stride[d] != expected:
            return False
        expected *= v.size[d]
    return True


def direct(v: View, s: View, dtype: str, nb: int, rows: int, cols: int):
    """Kernels.cpp loomrt_contract's `direct`: (transposed, ld), or None if packed."""
    if dtype != "F32" or s.size:
        return None
    r0, r1, c1 = nb, nb + rows, nb + rows + cols
    if is_dense(v, r0, c1):
        return False, product(v.size[r1:c1])
    swapped = View(v.size[:r0] + v.size[r1:c1] + v.size[r0:r1] + v.size[c1:],
                   v.stride[:r0] + v.stride[r1:c1] + v.stride[r0:r1] + v.stride[c1:])
    if is_dense(swapped, r0, c1):
        return True, product(v.size[r0:r1])
    return None


def parse_contractions(code: str) -> dict[str, Contraction]:
    out = {}
    for name, body in re.findall(
            r"static const loomrt_contraction (\w+) = \{(.*?)\};", code, re.S):
        head = re.match(r"\s*(\d+), (\d+), (\d+), (\d+), LOOMRT_(\w+), LOOMRT_(\w+), "
                        r"LOOMRT_(\w+),", body)
        views = [View([int(x) for x in sz.split(",") if x.strip()],
                      [int(x) for x in st.split(",") if x.strip()])
                 for _, sz, st in re.findall(r"\{(\d+), \{([^}]*)\}, \{([^}]*)\}\}", body)]
        if not head or len(views) != 5:
            sys.exit(f"bench/cpu: cannot read {name} in the generated code")
        nb, nm, nn, nk = (int(head.group(i)) for i in range(1, 5))
        out[name] = Contraction(nb, nm, nn, nk, [head.group(i) for i in (5, 6, 7)], *views)
    return out


def split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call."""
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        cur += ch
    return args + [cur.strip()]


def derive_gemms(code: str) -> list[Gemm]:
    """Every cblas_sgemm call site of the step function, in program order.

    Loops are tracked by braces; a loop is `for (int64_t v = 0; v < N; ++v) {`
    (the repeat bodies are `layer0 < L`). Element-wise loop nests contain no
    runtime calls, so their brace-less outer loops do not matter.
    """
    contractions = parse_contractions(code)
    start = code.find("static void step(loomrt_ctx *rt, char *arena) {")
    if start < 0:
        sys.exit("bench/cpu: no step function in the generated code")
    gemms: list[Gemm] = []
    loops: list[tuple[str, int, int, int]] = []  # var, count, line, depth outside
    depth = 0
    for number, line in enumerate(code[start:].splitlines(), 1):
        text, _, comment = line.partition("//")
        at = comment.strip().split(" at ")[-1] if " at " in comment else f"line{number}"
        op = comment.strip().split(" ")[0].removeprefix("loom.") if comment else "?"
        label = f"{op}@{Path(at).name}"
        loop = re.search(r"for \(int64_t (\w+) = 0; \1 < (\d+); \+\+\1\) \{", text)
        if loop:
            loops.append((loop.group(1), int(loop.group(2)), number, depth))
        enclosing = [(v, c, n) for v, c, n, _ in loops]
        reps = product([c for _, c, _ in enclosing])
        loop_vars = [v for v, _, _ in enclosing]
        uses_loop = lambda arg: any(re.search(rf"\b{v}\b", arg) for v in loop_vars)
        call = re.search(r"loomrt_contract\(rt, &(\w+), (.*)\);", text)
        if call:
            c = contractions[call.group(1)]
            a, b, _ = split_args(call.group(2))
            g = Gemm("contract", label, reps, enclosing,
                     batch=product(c.a.size[:c.nb]),
                     m=product(c.a.size[c.nb:c.nb + c.nm]),
                     k=product(c.a.size[c.nb + c.nm:c.nb + c.nm + c.nk]),
                     n=product(c.b.size[c.nb + c.nk:c.nb + c.nk + c.nn]),
                     a_per_rep=uses_loop(a), b_per_rep=uses_loop(b))
            da = direct(c.a, c.a_sum, c.dtypes[0], c.nb, c.nm, c.nk)
            db = direct(c.b, c.b_sum, c.dtypes[1], c.nb, c.nk, c.nn)
            g.ta, g.lda = ("T" if da[0] else "N", da[1]) if da else ("N", g.k)
            g.tb, g.ldb = ("T" if db[0] else "N", db[1]) if db else ("N", g.n)
            # What loomrt_contract does around the sgemm: widen (bf16/f16 to
            # f32), gather (strided layout), sum (pre-summed dims), round
            # (f32 result to bf16/f16), scatter (strided result layout).
            for name, d, dtype, s in (("A", da, c.dtypes[0], c.a_sum),
                                      ("B", db, c.dtypes[1], c.b_sum)):
                if d is None:
                    g.packed.append(f"{name} " + ("widen" if dtype != "F32" else
                                                  "sum" if s.size else "gather"))
            out_dense = is_dense(c.out, 0, len(c.out.size))
            if not (c.dtypes[2] == "F32" and out_dense):
                g.packed.append("C " + "+".join(
                    (["round"] if c.dtypes[2] != "F32" else []) +
                    ([] if out_dense else ["scatter"])))
            gemms.append(g)
        call = re.search(r"loomrt_attention\((.*)\);", text)
        if call:
            args = split_args(call.group(1))
            # (dtype, q, k, v, out, outer, inner, s, t, e, f, strides, causal, scale)
            outer, inner, s, t, e, f = (int(x) for x in args[5:11])
            g = Gemm("attention", label, reps, enclosing, batch=outer * inner, s=s, t=t,
                     e=e, f=f, scale=float(args[13]))
            # loomrt_attention copies q, k, v per batch into f32 buffers
            # (widening them unless f32) and stores the result (rounding it).
            wide = args[0] != "LOOMRT_F32"
            g.packed += ["qkv widen" if wide else "qkv copy",
                         "out round" if wide else "out copy", "softmax"]
            gemms.append(g)
        depth += text.count("{") - text.count("}")
        while loops and depth <= loops[-1][3]:
            loops.pop()
        if depth <= 0 and number > 1:
            break  # end of step
    return gemms


def gemm_list_spec(gemms: list[Gemm]) -> str:
    """The input of gemm_bound: the ops in program order inside their repeats."""
    lines: list[str] = []
    open_loops: list[tuple[str, int, int]] = []
    for g in gemms:
        common = 0
        while (common < min(len(open_loops), len(g.loops)) and
               open_loops[common] == g.loops[common]):
            common += 1
        for loop in reversed(open_loops[common:]):
            lines.append("  " * (open_loops.index(loop)) + "end")
        open_loops = open_loops[:common]
        for loop in g.loops[common:]:
            lines.append("  " * len(open_loops) + f"repeat {loop[1]}")
            open_loops.append(loop)
        lines.append("  " * len(open_loops) + g.spec())
    for depth in range(len(open_loops) - 1, -1, -1):
        lines.append("  " * depth + "end")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------

def run(cmd: list[str], env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        sys.exit(f"bench/cpu: failed ({p.returncode}): {' '.join(map(str, cmd))}\n"
                 f"{p.stdout}{p.stderr}")
    return p


def one_thread_env() -> dict[str, str]:
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


BENCH_RE = re.compile(r"bench: (\d+) steps on (\d+) ranks: median step ([\d.]+) ms "
                      r"\(slowest rank\), GEMMs ([\d.]+)% of step time")


@dataclass
class Config:
    dp: int
    tp: int
    dtype: str
    exe: Path
    steps_ms: list[float] = field(default_factory=list)
    shares: list[float] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        return self.dp * self.tp

    def bench(self, steps: int) -> None:
        cmd = [str(self.exe), "--bench", "--steps", str(steps)]
        if self.ranks > 1:
            cmd = [str(MPIRUN), "-np", str(self.ranks)] + cmd
        p = run(cmd, env=one_thread_env())
        m = BENCH_RE.search(p.stdout)
        if not m:
            sys.exit(f"bench/cpu: no bench line from {' '.join(cmd)}:\n{p.stdout}{p.stderr}")
        self.steps_ms.append(float(m.group(3)))
        self.shares.append(float(m.group(4)))


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def cpu_model() -> str:
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    name = fields.get("model name", "unknown")
    if "cpu family" in fields:
        name += f" (family {fields['cpu family']}, model {fields.get('model', '?')})"
    return name


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20,
                    help="steps per run (model --bench --steps N; default 20)")
    ap.add_argument("--runs", type=int, default=5,
                    help="runs per configuration, interleaved; the median of the "
                         "runs' medians is reported, and the best (default 5)")
    ap.add_argument("--loomc", default=os.environ.get("LOOMC", str(REPO / "build" / "bin" / "loomc")),
                    help="the loomc binary (default $LOOMC, else build/bin/loomc)")
    ap.add_argument("--keep", metavar="DIR",
                    help="build into DIR and keep it (models, generated C++, GEMM list)")
    args = ap.parse_args()
    if args.steps < 1 or args.runs < 1:
        sys.exit("bench/cpu: --steps and --runs need at least 1")
    if not os.access(args.loomc, os.X_OK):
        sys.exit(f"bench/cpu: loomc not found at {args.loomc} (build it, or pass --loomc)")
    started = time.perf_counter()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return bench(args, work, started)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def bench(args: argparse.Namespace, work: Path, started: float) -> int:
    cores = os.cpu_count() or 1
    load_before = loadavg()

    # ---- Build ------------------------------------------------------------
    configs: list[Config] = []
    gemms: dict[str, list[Gemm]] = {}
    for dtype in DTYPES:
        flags = [] if dtype == "bf16" else [f"--dtype={dtype}"]
        for dp, tp in MESHES:
            exe = work / f"gpt_{dtype}_dp{dp}_tp{tp}"
            mesh = ["--mesh", f"dp={dp},tp={tp}"]
            run([args.loomc, str(EXAMPLE), "-o", str(exe)] + mesh + flags)
            configs.append(Config(dp, tp, dtype, exe))
            if (dp, tp) == (1, 1):
                code = run([args.loomc, str(EXAMPLE), "--emit=cpu"] + mesh + flags).stdout
                (work / f"gpt_{dtype}_dp1_tp1.cpp").write_text(code)
                gemms[dtype] = derive_gemms(code)
                found = sum(g.kind == "contract" for g in gemms[dtype])
                if not gemms[dtype] or found != code.count("loomrt_contract(rt,"):
                    sys.exit(f"bench/cpu: read {found} of the "
                             f"{code.count('loomrt_contract(rt,')} loomrt_contract calls in "
                             f"the {dtype} code; has --emit=cpu changed its form?")

    cc = os.environ.get("CC", "cc")
    bound_exe = work / "gemm_bound"
    run([cc, "-O2", "-std=c11", str(HERE / "gemm_bound.c"), "-o", str(bound_exe),
         "-lopenblas"])

    # ---- Measure: runs interleaved over the configurations and the bound, so
    # that load from elsewhere on the machine spreads over all of them ---------
    specs = {dtype: gemm_list_spec(gemms[dtype]) for dtype in DTYPES}
    distinct = list(dict.fromkeys(specs.values()))  # bf16 and f32 share one if equal
    spec_paths = []
    for i, spec in enumerate(distinct):
        spec_paths.append(work / f"gemms{i}.txt")
        spec_paths[-1].write_text(spec)
    bound_runs: list[list[tuple]] = [[] for _ in distinct]
    for _ in range(args.runs):
        for c in configs:
            c.bench(args.steps)
        for i, path in enumerate(spec_paths):
            out = run([str(bound_exe), "--steps", str(args.steps), str(path)],
                      env=one_thread_env()).stdout
            m = re.search(r"bound: contractions ([\d.]+) ms .* attention ([\d.]+) ms .* "
                          r"total ([\d.]+) ms", out)
            steps_m = re.search(r"steps: median ([\d.]+) ms", out)
            if not m or not steps_m:
                sys.exit(f"bench/cpu: no bound line from gemm_bound:\n{out}")
            bound_runs[i].append(dict(total=float(m.group(3)), contract=float(m.group(1)),
                                      attention=float(m.group(2)),
                                      step=float(steps_m.group(1)), out=out))
    # The bound is what the sgemms take when nothing preempts them: the least
    # run (other load only ever adds time).
    bounds = {dtype: min(bound_runs[distinct.index(specs[dtype])], key=lambda b: b["total"])
              for dtype in DTYPES}
    load_after = loadavg()

    # ---- Report -----------------------------------------------------------
    openblas = re.search(r"openblas: (.*)", bounds[DTYPES[0]]["out"])
    mpi = run(["mpirun", "--version"], check=False).stdout.splitlines()
    print("bench/cpu: examples/gpt.loom on the CPU runtime")
    print(f"machine: {cpu_model()}, {cores} cores (os.cpu_count); "
          f"{openblas.group(1) if openblas else 'OpenBLAS ?'}; "
          f"{mpi[0] if mpi else 'mpirun ?'}")
    print(f"load average (1, 5, 15 min): {load_before} before, {load_after} after")
    print(f"loomc: {args.loomc}; {args.steps} steps per run, {args.runs} runs per "
          f"configuration (interleaved), median of the runs' medians")
    print()

    print("== sgemm calls of one step, 1 rank (mesh dp=1,tp=1) ==")
    print("From `loomc --emit=cpu`, by the rules of runtime/cpu/Kernels.cpp. per rep: "
          "batch x sgemm(transA transB")
    print("MxNxK, lda/ldb/ldc). packed: what the runtime does around the sgemm (not in "
          "the bound): widen bf16")
    print("to f32, gather/scatter a strided operand/result, round the result to bf16.")
    rows = []
    for i, g in enumerate(gemms["f32"]):
        g16 = gemms["bf16"][i] if i < len(gemms["bf16"]) else None
        rows.append([g.label, g.kind, str(g.reps), g.sgemms(), str(g.calls()),
                     f"{g.gflop():.4f}", ", ".join(g.packed) or "-",
                     ", ".join(g16.packed) if g16 else "?"])
    print(table(["op", "runtime call", "reps", "per rep", "sgemms/step", "GFLOP/step",
                 "packed (f32)", "packed (bf16)"], rows))
    for dtype in DTYPES[1:]:
        if specs[dtype] != specs[DTYPES[0]]:
            print(f"  note: the {dtype} step calls sgemm differently (transposes or "
                  "leading dimensions); it has its own bound below")
    print()
    print("gemm_bound list (bench/cpu/gemm_bound.c input):")
    print(specs["f32"], end="")
    print()
    print(f"gemm_bound, the least of its {args.runs} runs (each {args.steps} steps):")
    print(bounds["f32"]["out"], end="")
    print()

    print("== Step time per rank ==")
    one = {c.dtype: median(c.steps_ms) for c in configs if c.ranks == 1}
    rows = []
    for c in sorted(configs, key=lambda c: (c.ranks, -c.dp, c.dtype)):
        note = (f"oversubscribed ({c.ranks} ranks > {cores} cores)"
                if c.ranks > cores else "")
        step = median(c.steps_ms)
        rows.append([str(c.ranks), f"dp={c.dp},tp={c.tp}", c.dtype, f"{step:.2f}",
                     f"{min(c.steps_ms):.2f}", " ".join(f"{x:.1f}" for x in c.steps_ms),
                     f"{median(c.shares):.1f}%", f"{one[c.dtype] / step:.2f}x", note])
    print(table(["ranks", "mesh", "dtype", "step ms", "best", "runs ms", "GEMMs",
                 "1-rank/this", "note"], rows))
    print("  step ms: the runtime's median step of the slowest rank (--bench), median "
          "over the runs; best: the")
    print("  least run. GEMMs: time in loomrt_contract (sgemm and the packing around "
          "it; attention not included),")
    print("  mean over ranks, median over runs. 1-rank/this: the 1-rank step over this "
          "per-rank step.")
    print()

    print("== 1 rank against the GEMM lower bound ==")
    rows = []
    ratios: dict[str, tuple[float, float]] = {}  # dtype: (step/bound, best/bound)
    for c in configs:
        if c.ranks != 1:
            continue
        b = bounds[c.dtype]
        step, best = median(c.steps_ms), min(c.steps_ms)
        contract_ms = step * median(c.shares) / 100
        ratios[c.dtype] = (step / b["total"], best / b["total"])
        rows.append([c.dtype, f"{step:.2f}", f"{best:.2f}", f"{b['contract']:.2f}",
                     f"{b['attention']:.2f}", f"{b['total']:.2f}",
                     f"{step / b['total']:.2f}x", f"{best / b['total']:.2f}x",
                     f"{contract_ms:.2f}", f"{contract_ms / b['contract']:.2f}x",
                     f"{step - contract_ms - b['attention']:.2f}"])
    print(table(["dtype", "step ms", "best", "bound: contract", "attention", "total",
                 "step/bound", "best/bound", "in contract ms", "/contract",
                 "other ms"], rows))
    print("  bound: gemm_bound's sums of its ops' medians, the least of its runs; "
          "step, best: as above.")
    print("  in contract ms: step x GEMM share (loomrt_contract: sgemm and packing); "
          "/contract: that over")
    print("  the contraction bound; other: step - in contract - the attention GEMM "
          "bound (softmax, attention")
    print("  copies, layernorm, element-wise loops, cross-entropy, transpose, "
          "embedding).")
    for dtype, (ratio, best) in ratios.items():
        verdict = lambda r: "met" if r <= GOAL_RATIO else "not met"
        print(f"  goal {dtype}: step/bound <= {GOAL_RATIO}x: {verdict(ratio)} "
              f"({ratio:.3f}x; best run {best:.3f}x: {verdict(best)})")
    print()
    print(f"bench/cpu: {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
