#!/usr/bin/env python3
"""bench/compile: how long loomc takes to partition GPT-3-width models, next to JAX.

Compiles examples/gpt.loom with GPT-3 175B width (D = 12288, H = 96,
S = 2048, V = 51200, B = 64) and L = 12, 24, 48, 96 on mesh dp=8, tp=8 to
the SPMD program, and the same model written in JAX (Shardy/GSPMD + XLA) on a
64-device host platform. Then compares the collectives both partitioners emit
for the small examples/gpt.loom. See README.md beside this file.

The parent process never imports JAX: every JAX compile runs in a fresh child
(`run.py --jax-worker CONFIG`), so no compilation cache, traced function or
warmed-up thread pool carries over from one measurement to the next.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tables import table  # noqa: E402  (bench/tables.py)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "gpt.loom"

# GPT-3 175B width (Brown et al. 2020, table 2.1); only L varies.
GPT3 = dict(V=51200, S=2048, D=12288, H=96, B=64)
MESH = dict(dp=8, tp=8)
DEFAULT_LAYERS = "12,24,48,96"
# One host process with 64 CPU "devices" serves every JAX configuration, the
# small example included (which uses the first 4 of them as a 2x2 mesh).
HOST_DEVICES = 64

GOAL_L96_SECONDS = 2.0
# "Independent of L": the L = max config may take at most this much longer
# than the L = min one. loomc runs take tens of milliseconds, so a tighter
# bound would measure scheduler noise.
GOAL_L_RATIO = 1.25


# --------------------------------------------------------------------------
# Running children and measuring them
# --------------------------------------------------------------------------

@dataclass
class Child:
    rc: int
    wall_s: float
    maxrss_kib: int
    stdout: str
    stderr: str


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> Child:
    """Run cmd to completion; wall time and the peak RSS of that process alone.

    os.wait4 returns the rusage of exactly this child, so ru_maxrss is its own
    peak (getrusage(RUSAGE_CHILDREN) would give the max over all children).
    Output goes to files, not pipes: wait4 reaps the child ourselves, and a
    pipe that fills up before that would deadlock.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped
        out.seek(0)
        err.seek(0)
        return Child(proc.returncode, wall, usage.ru_maxrss,  # KiB on Linux
                     out.read().decode(errors="replace"),
                     err.read().decode(errors="replace"))


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def fmt_cmd(cmd: list[str]) -> str:
    return " ".join(cmd)


# --------------------------------------------------------------------------
# The Loom inputs
# --------------------------------------------------------------------------

MESH_LINE = re.compile(r"^mesh m = \[.*\]$", re.M)
CONST_LINE = re.compile(r"^const .*$", re.M)


def loom_source(layers: int) -> str:
    """examples/gpt.loom with only its mesh and constants replaced.

    Substituting two lines of the example, rather than keeping a second copy
    of the model here, keeps the blocks and shardings identical to it by
    construction.
    """
    src = EXAMPLE.read_text()
    consts = (f"const V = {GPT3['V']}, S = {GPT3['S']}, D = {GPT3['D']}, "
              f"H = {GPT3['H']}, E = D / H, F = 4 * D, L = {layers}, "
              f"B = {GPT3['B']}")
    mesh = f"mesh m = [dp: {MESH['dp']}, tp: {MESH['tp']}]"
    src, n_mesh = MESH_LINE.subn(mesh, src)
    src, n_const = CONST_LINE.subn(consts, src)
    if (n_mesh, n_const) != (1, 1):
        sys.exit(f"{EXAMPLE}: expected one 'mesh m = [...]' and one 'const' "
                 f"line, found {n_mesh} and {n_const}")
    return src


def example_config() -> dict[str, int]:
    """The small example's sizes and mesh, read from examples/gpt.loom itself,
    so the JAX twin of it follows the example if it changes."""
    src = EXAMPLE.read_text()
    cfg = {k: int(v) for k, v in
           re.findall(r"\b([VSDHLB]) = (\d+)\b", CONST_LINE.search(src)[0])}
    cfg.update({k: int(v) for k, v in
                re.findall(r"(\w+): (\d+)", MESH_LINE.search(src)[0])})
    missing = {"V", "S", "D", "H", "L", "B", "dp", "tp"} - cfg.keys()
    if missing:
        sys.exit(f"{EXAMPLE}: could not read {sorted(missing)} from its "
                 "const and mesh lines")
    return cfg


# --------------------------------------------------------------------------
# loomc
# --------------------------------------------------------------------------

# A row of MLIR's execution time report: "    0.0005 ( 16.4%)  LoomPartition".
TIMING_ROW = re.compile(r"^\s+(\d+\.\d+) \(\s*[\d.]+%\)\s+(\S.*?)\s*$")


def parse_timing(stderr: str) -> dict[str, float]:
    """Pass name -> wall seconds from an --mlir-timing report.

    Analyses ("(A) ...") are nested inside the pass that asked for them and
    already counted there, so they are left out. A pass that runs twice
    (Canonicalizer, CSE) gets '#2' on its second row to keep the order.
    """
    rows: dict[str, float] = {}
    seen: dict[str, int] = defaultdict(int)
    for line in stderr.splitlines():
        m = TIMING_ROW.match(line)
        if not m or m[2].startswith("(A)"):
            continue
        name = m[2]
        seen[name] += 1
        if seen[name] > 1:
            name = f"{name} #{seen[name]}"
        rows[name] = float(m[1])
    return rows


@dataclass
class LoomResult:
    walls: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    passes: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    error: str | None = None


def bench_loomc(loomc: str, path: Path, runs: int) -> LoomResult:
    res = LoomResult()
    cmd = [loomc, str(path), "--emit=spmd", "-o", os.devnull]
    for _ in range(runs):
        c = run_child(cmd)
        if c.rc != 0:
            res.error = f"$ {fmt_cmd(cmd)}\n(exit {c.rc})\n{c.stderr.strip()}"
            return res
        res.walls.append(c.wall_s)
        res.rss_kib.append(c.maxrss_kib)
    # Timed separately: the timers themselves cost a little, and the report
    # is what we want from these runs, not their wall time.
    for _ in range(runs):
        c = run_child(cmd + ["--mlir-timing"])
        if c.rc != 0:
            res.error = (f"$ {fmt_cmd(cmd + ['--mlir-timing'])}\n"
                         f"(exit {c.rc})\n{c.stderr.strip()}")
            return res
        for name, secs in parse_timing(c.stderr).items():
            res.passes[name].append(secs)
    return res


# --------------------------------------------------------------------------
# JAX (runs only inside `run.py --jax-worker`)
# --------------------------------------------------------------------------

def jax_worker(cfg: dict) -> None:
    """Lower and compile the JAX twin of gpt.loom once; print a JSON result.

    Everything is a jax.ShapeDtypeStruct, so no parameter is ever allocated:
    what is measured is tracing, lowering, partitioning and XLA's CPU
    compilation, as for loomc.
    """
    import numpy as np
    import jax
    import jax.numpy as jnp
    import jaxlib
    from jax import lax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    V, S, D, H, L, B = (cfg[k] for k in "VSDHLB")
    E, F = D // H, 4 * D
    dp, tp = cfg["dp"], cfg["tp"]
    bf16, f32, i32 = jnp.bfloat16, jnp.float32, jnp.int32

    # The first dp*tp host devices, in order: for the small example that is a
    # 2x2 sub-mesh of the same 64-device process.
    mesh = Mesh(np.array(jax.devices()[:dp * tp]).reshape(dp, tp), ("dp", "tp"))

    def act(x):
        # Every Loom block takes and returns bf16[B:dp, S, D]; the block
        # signatures are sharding constraints, and so are these.
        return lax.with_sharding_constraint(x, NamedSharding(mesh, P("dp", None, None)))

    def layernorm(x, g, b):
        # loom.layernorm: biased variance, computed in f32 (f32 scale and
        # bias), rounded back to x's type.
        x = act(x)
        xf = x.astype(f32)
        mu = xf.mean(-1, keepdims=True)
        var = jnp.square(xf - mu).mean(-1, keepdims=True)
        return act(((xf - mu) * lax.rsqrt(var + 1e-5) * g + b).astype(x.dtype))

    def attention(x, p):
        x = act(x)
        q = jnp.einsum("bsd,dhe->bhse", x, p["w_q"])
        k = jnp.einsum("bsd,dhe->bhse", x, p["w_k"])
        v = jnp.einsum("bsd,dhe->bhse", x, p["w_v"])
        # loom.attention: softmax(q k^T / sqrt(E), causal) v, softmax in f32.
        s = jnp.einsum("bhqe,bhke->bhqk", q, k, preferred_element_type=f32)
        s = jnp.where(jnp.tril(jnp.ones((S, S), bool)), s / np.sqrt(E), -jnp.inf)
        o = jnp.einsum("bhqk,bhke->bhqe", jax.nn.softmax(s, axis=-1).astype(v.dtype), v)
        return act(jnp.einsum("bhse,hed->bsd", o, p["w_o"]))

    def mlp(x, p):
        x = act(x)
        h = jax.nn.gelu(x @ p["w1"] + p["b1"], approximate=True)
        return act(h @ p["w2"] + p["b2"])

    def layer(x, p):
        x = act(x)
        x = x + attention(layernorm(x, p["ln1_g"], p["ln1_b"]), p)
        x = x + mlp(layernorm(x, p["ln2_g"], p["ln2_b"]), p)
        return act(x), None

    def gpt(tokens, targets, prm):
        # loom.embedding yields zeros for an id outside [0, V).
        x = jnp.take(prm["wte"], tokens, axis=0, mode="fill", fill_value=0)
        x = x + prm["wpe"]
        x, _ = lax.scan(layer, x, prm["layers"])  # `repeat L as layers`
        h = layernorm(x, prm["ln_f_g"], prm["ln_f_b"])
        logits = (h @ prm["wte"].T).astype(f32)  # tied, vocabulary over tp
        target = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
        return (jax.nn.logsumexp(logits, axis=-1) - target).mean()

    # name: (shape, dtype, PartitionSpec), as the parameters of gpt.loom.
    layer_params = {
        "ln1_g": ((L, D), f32, P()),
        "ln1_b": ((L, D), f32, P()),
        "w_q": ((L, D, H, E), bf16, P(None, None, "tp", None)),
        "w_k": ((L, D, H, E), bf16, P(None, None, "tp", None)),
        "w_v": ((L, D, H, E), bf16, P(None, None, "tp", None)),
        "w_o": ((L, H, E, D), bf16, P(None, "tp", None, None)),
        "ln2_g": ((L, D), f32, P()),
        "ln2_b": ((L, D), f32, P()),
        "w1": ((L, D, F), bf16, P(None, None, "tp")),
        "b1": ((L, F), bf16, P(None, "tp")),
        "w2": ((L, F, D), bf16, P(None, "tp", None)),
        "b2": ((L, D), bf16, P()),
    }
    params = {
        "wte": ((V, D), bf16, P("tp", None)),
        "wpe": ((S, D), bf16, P()),
        "layers": layer_params,
        "ln_f_g": ((D,), f32, P()),
        "ln_f_b": ((D,), f32, P()),
    }
    ids = ((B, S), i32, P("dp", None))

    def leaf(t):
        return isinstance(t, tuple)

    def struct(t):
        return jax.ShapeDtypeStruct(t[0], t[1])

    def sharding(t):
        return NamedSharding(mesh, t[2])

    args = (struct(ids), struct(ids), jax.tree.map(struct, params, is_leaf=leaf))
    in_shardings = (sharding(ids), sharding(ids),
                    jax.tree.map(sharding, params, is_leaf=leaf))

    t0 = time.perf_counter()
    lowered = jax.jit(gpt, in_shardings=in_shardings,
                      out_shardings=NamedSharding(mesh, P())).lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()

    shardy = bool(jax.config.jax_use_shardy_partitioner)
    result = {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "lower_s": t1 - t0,
        "compile_s": t2 - t1,
        "partitioner": "Shardy" if shardy else "GSPMD",
        # Cross-check of the flag: Shardy lowers shardings to sdy.* ops.
        "sdy_in_stablehlo": "sdy." in lowered.as_text(),
    }
    if cfg.get("want_hlo"):
        result["hlo"] = compiled.as_text()
    print(json.dumps(result))


@dataclass
class JaxResult:
    compiles: list[float] = field(default_factory=list)  # lower + compile
    lowers: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    proc_walls: list[float] = field(default_factory=list)
    partitioner: str = "?"
    sdy_in_stablehlo: bool | None = None
    versions: str = "?"
    hlo: str | None = None
    error: str | None = None


def jax_env(extra_flags: str = "") -> dict[str, str]:
    env = dict(os.environ)
    flags = f"--xla_force_host_platform_device_count={HOST_DEVICES} {extra_flags}"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
    env["JAX_PLATFORMS"] = "cpu"  # no probing for accelerators
    return env


def bench_jax_once(cfg: dict, res: JaxResult, extra_flags: str = "") -> None:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--jax-worker",
           json.dumps(cfg)]
    c = run_child(cmd, env=jax_env(extra_flags))
    if c.rc != 0:
        res.error = f"$ {fmt_cmd(cmd)}\n(exit {c.rc})\n{c.stderr.strip()[-4000:]}"
        return
    out = json.loads(c.stdout.strip().splitlines()[-1])
    res.compiles.append(out["lower_s"] + out["compile_s"])
    res.lowers.append(out["lower_s"])
    res.rss_kib.append(c.maxrss_kib)
    res.proc_walls.append(c.wall_s)
    res.partitioner = out["partitioner"]
    res.sdy_in_stablehlo = out["sdy_in_stablehlo"]
    res.versions = f"jax {out['jax']}, jaxlib {out['jaxlib']}"
    res.hlo = out.get("hlo", res.hlo)


# --------------------------------------------------------------------------
# Collectives: Loom's SPMD program and XLA's partitioned HLO
# --------------------------------------------------------------------------

DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "i32": 4, "s32": 4,
               "i64": 8, "s64": 8, "i8": 1, "s8": 1, "u8": 1, "i1": 1, "pred": 1,
               "u32": 4}


@dataclass
class Collective:
    kind: str          # all-reduce(sum), all-gather, ...: XLA's spelling
    axes: str          # mesh axes the groups span, e.g. "tp"
    groups: str        # the device groups, decoded: {0,1},{2,3}
    written: str       # the groups as the program writes them
    shapes: list[tuple[list[int], str]]
    trips: int         # times it runs per step (inside a loop of L)
    where: str = ""

    @property
    def nbytes(self) -> int:
        total = 0
        for dims, dtype in self.shapes:
            n = DTYPE_BYTES.get(dtype, 0)
            for d in dims:
                n *= d
            total += n
        return total

    @property
    def shape_text(self) -> str:
        return ", ".join(f"{dt}[{','.join(map(str, d))}]" for d, dt in self.shapes)


LOOM_COLLECTIVE = re.compile(
    r"loom\.(all_reduce|all_gather|reduce_scatter|all_to_all|all_slice|"
    r"collective_permute|send|recv) .*?\bon @\w+ (\[[^\]]*\])(?: (sum|max|min|prod))?")
LOOM_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z]+\d*)>")


def loom_collectives(spmd: str, mesh: dict[str, int]) -> list[Collective]:
    """The collectives of `loomc --emit=spmd` output, with their trip counts.

    A collective in the body of `loom.repeat N` runs N times a step; regions
    are tracked by the lines that open ('{' at the end) and close them.
    """
    found = []
    trips = [1]
    for line in spmd.splitlines():
        s = line.strip()
        if s.startswith("}"):
            trips.pop()
        m = LOOM_COLLECTIVE.search(s)
        if m and not s.startswith("//"):
            kind = m[1].replace("_", "-") + (f"({m[3]})" if m[3] else "")
            axes = json.loads(m[2])
            groups = mesh_groups(list(mesh.values()), [list(mesh).index(a) for a in axes])
            # The result type is the last tensor type on the line.
            dims, dtype = LOOM_TENSOR.findall(s)[-1]
            shape = [int(d) for d in dims.split("x") if d]
            found.append(Collective(kind, ",".join(axes), groups_text(groups),
                                    m[2], [(shape, dtype)], trips[-1]))
        if s.endswith("{"):
            r = re.search(r"loom\.repeat (\d+)", s)
            trips.append(trips[-1] * (int(r[1]) if r else 1))
    return found


HLO_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$")
HLO_COLLECTIVE = re.compile(
    r"^\s*(?:ROOT )?%?[\w.\-]+ = (.+?) (all-reduce|all-gather|reduce-scatter|"
    r"all-to-all|collective-permute)(?:-start)?\(")
HLO_SHAPE = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")
HLO_ROOT_OP = re.compile(r"^\s*ROOT %?[\w.\-]+ = \S+ ([\w\-]+)\(")
REDUCTION = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod"}


def mesh_groups(sizes: list[int], over: list[int]) -> list[list[int]]:
    """Device groups of a collective over mesh dimensions `over`: devices are
    numbered row-major over the mesh, a group varies only along `over`."""
    import numpy as np  # numpy is a pinned requirement; JAX is not needed here

    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    rest = [i for i in range(len(sizes)) if i not in over]
    size = int(np.prod([sizes[i] for i in over]))
    return ids.transpose(rest + over).reshape(-1, size).tolist()


def groups_text(groups: list[list[int]] | None) -> str:
    if groups is None:
        return "?"
    return ",".join("{" + ",".join(map(str, g)) + "}" for g in groups)


def hlo_groups(attrs: str) -> list[list[int]] | None:
    """Decode replica_groups (explicit, iota or mesh form) or
    source_target_pairs into lists of logical device ids."""
    import numpy as np  # only for decoding; numpy is a pinned requirement

    m = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", attrs)
    if m:  # iota: reshape(iota(prod(dims)), dims), transpose, reshape(groups)
        shape = [int(x) for x in m[1].split(",")]
        dims = [int(x) for x in m[2].split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if m[3]:
            ids = ids.transpose([int(x) for x in m[3].split(",")])
        return ids.reshape(shape).tolist()
    m = re.search(r"replica_groups=mesh\[([^\]]*)\] \{([^}]*)\}", attrs)
    if m:  # mesh: devices in mesh order; a group spans the named axes
        axes = re.findall(r"'(\w+)'=(\d+)", m[1])
        names = [a for a, _ in axes]
        return mesh_groups([int(n) for _, n in axes],
                           [names.index(a) for a in re.findall(r"'(\w+)'", m[2])])
    m = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", attrs)
    if m:
        return [[int(x) for x in g.split(",") if x]
                for g in re.findall(r"\{([\d,]*)\}", m[1])]
    m = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", attrs)
    if m:
        return [[int(a), int(b)] for a, b in re.findall(r"\{(\d+),(\d+)\}", m[1])]
    return None


def group_axes(groups: list[list[int]] | None, mesh: dict[str, int]) -> str:
    """The mesh axes along which the members of each group differ.

    With use_global_device_ids the ids are positions in the device assignment,
    which is the mesh's devices in row-major order.
    """
    if groups is None:
        return "?"
    if groups == [[]]:  # "replica_groups={}": every device
        return ",".join(mesh)
    names, sizes = list(mesh), list(mesh.values())

    def coords(i):
        c = []
        for s in reversed(sizes):
            c.append(i % s)
            i //= s
        return c[::-1]

    varying = set()
    for g in groups:
        cs = [coords(i) for i in g]
        varying |= {names[a] for a in range(len(names)) if len({c[a] for c in cs}) > 1}
    return ",".join(n for n in names if n in varying) or "(none)"


def xla_collectives(hlo: str, mesh: dict[str, int], loop_trips: int) -> list[Collective]:
    """The collectives of an HLO module, with their trip counts.

    A while body runs known_trip_count times where XLA has annotated it, else
    `loop_trips` times (right after partitioning nothing is annotated yet; the
    only loop in this model is the scan over the L layers).
    """
    # First pass: which computations are while bodies (and their trip counts)
    # and what each reduction computation computes.
    body_trips: dict[str, int] = {}
    for line in hlo.splitlines():
        b = re.search(r" while\(.*\bbody=%?([\w.\-]+)", line)
        if b:
            n = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
            body_trips[b[1]] = int(n[1]) if n else loop_trips
    roots: dict[str, str] = {}
    comp = ""
    for line in hlo.splitlines():
        c = HLO_COMPUTATION.match(line)
        if c:
            comp = c[1]
        r = HLO_ROOT_OP.match(line)
        if r:
            roots[comp] = r[1]

    found = []
    comp = ""
    for line in hlo.splitlines():
        c = HLO_COMPUTATION.match(line)
        if c:
            comp = c[1]
            continue
        m = HLO_COLLECTIVE.match(line)
        if not m:
            continue
        kind = m[2]
        attrs = line[m.end():]
        if kind in ("all-reduce", "reduce-scatter"):
            fn = re.search(r"to_apply=%?([\w.\-]+)", attrs)
            kind += f"({REDUCTION.get(roots.get(fn[1] if fn else ''), '?')})"
        groups = hlo_groups(attrs)
        raw = re.search(r"replica_groups=(\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?"
                        r"|mesh\[[^\]]*\] \{[^}]*\}|\{(?:\{[\d,]*\},?)*\})"
                        r"|source_target_pairs=(\{(?:\{\d+,\d+\},?)*\})", attrs)
        shapes = [([int(d) for d in dims.split(",") if d], dt)
                  for dt, dims in HLO_SHAPE.findall(m[1])]
        found.append(Collective(kind, group_axes(groups, mesh), groups_text(groups),
                                (raw[1] or raw[2]) if raw else "?", shapes,
                                body_trips.get(comp, 1), comp))
    return found


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def mib(kib: float) -> str:
    return f"{kib / 1024:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5,
                    help="runs per configuration; the median is reported (default 5)")
    ap.add_argument("--jax-runs", type=int, default=None,
                    help="runs per configuration for JAX (default: --runs, "
                         "fewer if --jax-budget would be exceeded)")
    ap.add_argument("--jax-budget", type=float, default=420.0,
                    help="seconds all JAX compiles together may take (default 420; "
                         "keeps the whole benchmark under 10 minutes)")
    ap.add_argument("--layers", default=DEFAULT_LAYERS,
                    help=f"comma-separated L values (default {DEFAULT_LAYERS})")
    ap.add_argument("--loomc", default=os.environ.get("LOOMC", str(REPO / "build" / "bin" / "loomc")),
                    help="the loomc binary (default $LOOMC, else build/bin/loomc)")
    ap.add_argument("--no-jax", action="store_true", help="measure loomc only")
    ap.add_argument("--keep", metavar="DIR",
                    help="write the generated .loom files to DIR and keep them")
    ap.add_argument("--jax-worker", metavar="CONFIG", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.jax_worker:
        jax_worker(json.loads(args.jax_worker))
        return 0

    started = time.perf_counter()
    layers = [int(x) for x in args.layers.split(",")]
    jax_runs = args.jax_runs or args.runs
    if not os.access(args.loomc, os.X_OK):
        sys.exit(f"loomc not found at {args.loomc} (build it, or pass --loomc / set LOOMC)")

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-compile-"))
    workdir.mkdir(parents=True, exist_ok=True)

    print(f"bench/compile: GPT-3 width (D={GPT3['D']}, H={GPT3['H']}, S={GPT3['S']}, "
          f"V={GPT3['V']}, B={GPT3['B']}), mesh dp={MESH['dp']} x tp={MESH['tp']}, "
          f"L = {', '.join(map(str, layers))}")
    print(f"loomc: {args.loomc}; {args.runs} runs per config (median), whole process")

    # ---- loomc ----------------------------------------------------------
    # MLIR's timer starts after loomc's front end (parse, IR generation), so
    # the front end is estimated as what the whole-process wall leaves after
    # the timed part and the start-up that any run pays (`loomc --version`:
    # exec and loading the MLIR/LLVM shared libraries).
    startup = median([run_child([args.loomc, "--version"]).wall_s
                      for _ in range(args.runs)])
    loom: dict[int, LoomResult] = {}
    for L in layers:
        path = workdir / f"gpt3_L{L}.loom"
        path.write_text(loom_source(L))
        loom[L] = bench_loomc(args.loomc, path, args.runs)

    # ---- JAX --------------------------------------------------------------
    jax_res: dict[int, JaxResult] = {}
    small_jax: JaxResult | None = None
    if not args.no_jax:
        print(f"JAX: fresh process per compile, {HOST_DEVICES} host devices; "
              f"timed: jit(...).lower(...).compile()")
        jax_started = time.perf_counter()
        for i, L in enumerate(layers):
            res = jax_res[L] = JaxResult()
            cfg = dict(GPT3, L=L, **MESH)
            left = args.jax_budget - (time.perf_counter() - jax_started)
            bench_jax_once(cfg, res)
            if res.error:
                continue
            # The first run tells what one costs (whole worker process); the
            # budget left is shared fairly with the configs still to go and
            # the small example (the +1).
            share = left / (len(layers) - i + 1)
            n = max(1, min(jax_runs, int(share // res.proc_walls[0])))
            while not res.error and len(res.compiles) < n:
                bench_jax_once(cfg, res)
        # The small example also dumps the module right after XLA's SPMD
        # partitioner: compiled.as_text() shows it after the CPU backend's own
        # passes too, which change collectives (promotion, combining).
        small_jax = JaxResult()
        dump_dir = workdir / "xla-dump"
        bench_jax_once(dict(example_config(), want_hlo=True), small_jax,
                       f"--xla_dump_to={dump_dir} --xla_dump_hlo_pass_re=spmd-partitioning")

    # ---- Results: wall time and memory -----------------------------------
    print()
    print("== Compile time per L ==")
    rows = []
    for L in layers:
        lr = loom[L]
        jr = jax_res.get(L)
        lw = median(lr.walls)
        row = [str(L)]
        if lr.error:
            row += ["FAILED", "-"]
        else:
            row += [f"{lw:.3f}", mib(median(lr.rss_kib))]
        if jr is None:
            row += ["-", "-", "-", "-", "-"]
        elif jr.error:
            row += ["FAILED", "-", "-", "-", "-"]
        else:
            jw = median(jr.compiles)
            row += [f"{jw:.3f}", mib(median(jr.rss_kib)),
                    f"{jw / lw:.1f}x" if not lr.error else "-",
                    str(len(jr.compiles)), jr.partitioner]
        rows.append(row)
    print(table(["L", "loomc wall s", "loomc RSS MiB", "JAX compile s",
                 "JAX RSS MiB", "JAX/loomc", "JAX runs", "JAX partitioner"], rows))
    print("  loomc wall: whole process (start-up, parse, passes, printing), median;"
          " RSS: peak of that process.")
    print("  JAX compile: lower + compile inside the worker (import and start-up"
          " not counted), median; RSS: peak of the whole worker process.")
    if not args.no_jax:
        any_jax = next((r for r in jax_res.values() if not r.error), None)
        if any_jax:
            print(f"  {any_jax.versions}; jax_use_shardy_partitioner -> "
                  f"{any_jax.partitioner}; sdy ops in the StableHLO: "
                  f"{any_jax.sdy_in_stablehlo}")

    for L in layers:
        for name, r in (("loomc", loom[L]), ("JAX", jax_res.get(L))):
            if r is not None and r.error:
                print(f"\n{name} failed for L = {L}:\n{r.error}")

    # ---- Results: passes ---------------------------------------------------
    ok = [L for L in layers if not loom[L].error]
    if ok:
        print()
        print("== loomc time per pass (ms, median of --mlir-timing runs) ==")
        names: list[str] = []
        for L in ok:
            names += [n for n in loom[L].passes if n not in names and n != "Total"]
        rows = [[n] + [f"{median(loom[L].passes.get(n, [])) * 1e3:.2f}" for L in ok]
                for n in names]
        rows.append(["Total (timed by MLIR)"] +
                    [f"{median(loom[L].passes.get('Total', [])) * 1e3:.2f}" for L in ok])
        rows.append(["start-up (loomc --version)"] + [f"{startup * 1e3:.2f}" for L in ok])
        rows.append(["front end (estimate)"] + [
            f"{(median(loom[L].walls) - startup - median(loom[L].passes.get('Total', []))) * 1e3:.2f}"
            for L in ok])
        rows.append(["whole process wall"] + [f"{median(loom[L].walls) * 1e3:.2f}" for L in ok])
        print(table(["pass"] + [f"L={L}" for L in ok], rows))
        print("  MLIR's timer covers the pass pipeline and printing; 'Rest' is its time "
              "outside the passes (verification, printing the IR). Front end (parse, "
              "IR generation) = whole process - start-up - MLIR total, an estimate "
              "from medians of different runs.")

        print()
        print("== Goals ==")
        if max(ok) == 96:
            w96 = median(loom[96].walls)
            print(f"  L = 96 under {GOAL_L96_SECONDS:.0f} s: "
                  f"{'yes' if w96 < GOAL_L96_SECONDS else 'NO'} ({w96:.3f} s)")
        lo, hi = median(loom[min(ok)].walls), median(loom[max(ok)].walls)
        print(f"  time independent of L: {'yes' if hi / lo <= GOAL_L_RATIO else 'NO'} "
              f"(L={max(ok)} / L={min(ok)} = {hi / lo:.2f}, bound {GOAL_L_RATIO})")

    # ---- Results: collectives of the small example -----------------------
    small = example_config()
    small_mesh = {"dp": small["dp"], "tp": small["tp"]}
    print()
    print(f"== Collectives of examples/gpt.loom (mesh dp={small['dp']} x tp={small['tp']}, "
          f"L={small['L']}; JAX on devices 0-{small['dp'] * small['tp'] - 1} "
          f"of the {HOST_DEVICES}) ==")
    cmd = [args.loomc, str(EXAMPLE), "--emit=spmd"]
    c = run_child(cmd)
    sides: dict[str, tuple[str, list[Collective]]] = {}
    if c.rc != 0:
        print(f"loomc failed:\n$ {fmt_cmd(cmd)}\n{c.stderr.strip()}")
    else:
        sides["Loom"] = ("loomc --emit=spmd", loom_collectives(c.stdout, small_mesh))
    if small_jax is not None:
        if small_jax.error or small_jax.hlo is None:
            print(f"JAX failed on the small example:\n{small_jax.error}")
        else:
            sides["XLA"] = (f"compiled.as_text(), {small_jax.partitioner} + XLA SPMD "
                            "+ XLA:CPU passes",
                            xla_collectives(small_jax.hlo, small_mesh, small["L"]))
            dumps = sorted(dump_dir.glob("*jit_gpt*after_spmd-partitioning*.txt"))
            if dumps:
                sides["XLA-SPMD"] = ("the HLO right after XLA's spmd-partitioning pass",
                                     xla_collectives(dumps[-1].read_text(), small_mesh,
                                                     small["L"]))
            else:
                print(f"(no spmd-partitioning dump found in {dump_dir})")
    for side, (src, colls) in sides.items():
        print()
        print(f"{side} ({src}): {len(colls)} collectives")
        rows = [[str(i + 1), k.kind, k.axes, k.groups, k.written, k.shape_text,
                 str(k.nbytes), str(k.trips), str(k.nbytes * k.trips)]
                for i, k in enumerate(colls)]
        print(table(["#", "kind", "axes", "device groups", "as written", "shape",
                     "bytes", "runs/step", "bytes/step"], rows))
    if "Loom" in sides and len(sides) > 1:
        # Per kind and axes, side by side: XLA merges and reorders collectives
        # (e.g. two all-reduces into one of a tuple), so op-by-op would mislead.
        print()
        print("Side by side, per kind and axes (runs per step / bytes per step):")
        names = list(sides)
        agg: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(
            lambda: {n: [0, 0] for n in names})
        for side, (_, colls) in sides.items():
            for k in colls:
                a = agg[(k.kind, k.axes)][side]
                a[0] += k.trips
                a[1] += k.nbytes * k.trips
        agg[("total", "")] = {n: [sum(v[n][0] for v in agg.values()),
                                  sum(v[n][1] for v in agg.values())] for n in names}
        others = names[1:]
        rows = [[kind, axes] + [f"{v[n][0]} / {v[n][1]}" for n in names] +
                ["same" if v[o] == v["Loom"] else "differs" for o in others]
                for (kind, axes), v in agg.items()]
        print(table(["kind", "axes"] + names + [f"{o} vs Loom" for o in others], rows))
        print("  bytes: the size of the collective's result on one device "
              "(loomc --explain instead counts ring traffic, 2(n-1)/n of that "
              "for an all-reduce).")

    if not args.keep:
        shutil.rmtree(workdir)
    print()
    print(f"total benchmark time: {time.perf_counter() - started:.1f} s")
    return 0 if all(not loom[L].error for L in layers) else 1


if __name__ == "__main__":
    sys.exit(main())
