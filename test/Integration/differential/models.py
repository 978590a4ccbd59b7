"""Small Loom models for the differential tests (run.py).

Every model is a hand-written template rendered once per mesh: one global
program, with the sharding annotations that the mesh can carry. run.py
compiles each rendering with --dtype=f32 for its N-rank mesh and a 1-rank
build (--mesh AXIS=1,...), runs both with one seed, and checks every output
of the N-rank run against the 1-rank run and the 1-rank run against the
reference interpreter (loomc --interpret).

What the models cover, together:

- every built-in op: + - * / with NumPy broadcasting and weak numbers; @
  (plain, batched, batch broadcast, integer and row-parallel); einsum (two
  operands, a one-operand reduction, a letter in all three subscripts, a
  diagonal, a pure permutation); relu, gelu (exact and tanh), silu, tanh,
  sigmoid, exp, log, sqrt, rsqrt, neg and unary minus (log, sqrt and rsqrt
  of positive values); softmax over every dimension, split or not;
  layernorm and rmsnorm over one and two trailing dimensions, split or not;
  sum, mean and max over everything, one or several dimensions, with and
  without keepdim, and dim = []; reshape (splitting and merging split
  dimensions, pieces that do not align), transpose (default and perm),
  concat and split along split and unsplit dimensions, slice, cast (f32 <->
  bf16, which --dtype=f32 makes f32 <-> f32; float <-> int; i32 <-> i64);
  embedding with the vocabulary split over tp and not, the dimension split,
  i32 and i64 ids, ids out of range; attention causal and not, with heads,
  batch, queries or keys and values split; cross_entropy with the
  vocabulary split and not, tokens split over dp, targets split unlike
  their logits;
- shardings: 1-D meshes ([dp: 2], [tp: 2], [tp: 4]) and [dp: 2, tp: 2]
  (LONG_MESHES adds [dp: 2, tp: 4] and [dp: 8]); both axes on one
  dimension in both orders (B:(dp, tp) against B:(tp, dp)); open
  dimensions and priorities on inputs, outputs and block signatures;
  shard() mid-program and inside a repeat (sequence parallelism: [B:dp,
  S:tp, D] and back to [B:dp, S, D:_]); conflicting annotations that force
  reshards; partial values (row-parallel products, reductions over split
  dimensions, over one axis and over both) through linear ops and into
  ops that need the sum first (non-linear functions, softmax, norms, max,
  concat, split, slice, cast, cross_entropy, attention); a program with a
  mesh and no annotation, and one without a mesh;
- parameters with every initialiser (normal, uniform, zeros, ones; f32,
  bf16 and i32), stacked parameters of nested and multi-value repeats,
  integer inputs, several and scalar outputs, a tiny GPT, and an MLP whose
  bias, tanh GELU and residual sum the CUDA backend can compute in its
  GEMMs' epilogues.

A model with `known_bug` reproduces an open compiler bug and runs only with
run.py --all (there are none now). The five regression models at the end
caught bugs that are fixed: a slice from 0 in loom-partition, two ways
propagation did not converge when a result wanted an axis its operands used
for another factor, integer division of a partial sum, and causal attention
with split queries; their `fixed_bug` says which.

Template syntax: `mesh m = [%MESH%]` becomes the mesh, and an annotation
`<axes>` after a dimension becomes `:axes` restricted to the axes the mesh
has (`B<dp,tp>` is `B:(dp, tp)` on a 2-D mesh, `B:dp` on [dp: 2] and `B` on
[tp: 2]); `<_>` is `:_`, `<tp?>` an open dimension, `<dp p1>` a priority.
Dimensions split over dp are multiples of 8 and those split over tp
multiples of 4, so every rendering divides on every mesh of MESHES and
LONG_MESHES.

`python models.py --out DIR [--long]` writes every rendering to DIR.
"""

import argparse
import os
import re
import sys
from dataclasses import dataclass

# (tag, ((axis, size), ...))
MESHES = [
    ("dp2", (("dp", 2),)),
    ("tp2", (("tp", 2),)),
    ("tp4", (("tp", 4),)),
    ("dp2tp2", (("dp", 2), ("tp", 2))),
]
LONG_MESHES = [
    ("dp2tp4", (("dp", 2), ("tp", 4))),
    ("dp8", (("dp", 8),)),
]


@dataclass
class Model:
    name: str
    template: str
    # Axes the model needs all of (e.g. both dp and tp); meshes without them
    # are skipped.
    needs: tuple = ()
    # Failing for a known compiler/runtime bug: kept out of the default list
    # (run.py --all runs it).
    known_bug: str = ""
    # Built as written (bf16) instead of with --dtype=f32, and compared
    # norm-wise (run.py): the random programs of random_models.py.
    bf16: bool = False
    # The float type of a program built as written: bf16, or f16
    # (random_models.py --f16). Only names the cases.
    written_type: str = "bf16"

    def meshes(self, long=False):
        if "%MESH%" not in self.template:
            return [("nomesh", ())]
        ms = MESHES + (LONG_MESHES if long else [])
        return [(t, m) for t, m in ms if all(a in dict(m) for a in self.needs)]


_ANN = re.compile(r"<([^<>]*)>")


def render(template, mesh):
    """The template with the mesh `mesh` (((axis, size), ...)) substituted."""
    names = {a for a, _ in mesh}

    def sub(match):
        words = match.group(1).split()
        if words == ["_"]:
            return ":_"
        spec, rest = words[0], words[1:]
        opened = spec.endswith("?")
        axes = [a for a in spec.rstrip("?").split(",") if a in names]
        if not axes:
            return ""
        text = axes[0] if len(axes) == 1 else "(" + ", ".join(axes) + ")"
        return ":" + text + ("?" if opened else "") + "".join(" " + w for w in rest)

    mesh_text = ", ".join(f"{a}: {n}" for a, n in mesh)
    return _ANN.sub(sub, template.replace("%MESH%", mesh_text))


MODELS = []


def model(name, needs=(), known_bug="", fixed_bug=""):
    del fixed_bug  # documentation only: what the model caught, now fixed
    def add(template):
        MODELS.append(Model(name, template, tuple(needs), known_bug))
    return add


# --- element-wise arithmetic and functions --------------------------------

model("elementwise-broadcast")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
// + - * / with NumPy broadcasting and weak numbers
model EwBroadcast(x: f32[B<dp>, S, D<tp>], y: f32[S, 1], z: f32[B<dp>, 1, D<tp>],
                  w: f32[D<tp>]) -> (a: f32[B<dp>, S, D<tp>], b: f32[B<dp>, S, D], c: f32[S, D<tp>]) {
  a = x + w * 2 - y / (z * z + 1)
  b = (x - z) * y + 0.5
  c = w + y - 1
  return a, b / (w * w + 1), 2 - c / 4
}
""")

model("activations")("""
mesh m = [%MESH%]
const B = 8, D = 8
model Activations(x: f32[B<dp>, D<tp>]) -> (a: f32[B<dp>, D<tp>], b: f32[B<dp>, D<tp>], c: f32[B, D]) {
  a = relu(x) + gelu(x) + gelu(x, approximate = "tanh") + silu(x) + tanh(x)
  p = x * x + 1
  b = sigmoid(x) * exp(x) - log(p) + sqrt(p) * rsqrt(exp(x)) + neg(x)
  c = -a * b + gelu(x, approximate = "none")
  return a, b, c
}
""")

# --- contractions ---------------------------------------------------------

model("matmul-batch")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8, H = 4, E = 4
// batched @ with equal batches, batch broadcast [B, 1, S, D] @ [H, D, E],
// and a one-row slice of a split weight broadcast over the batch
model MatmulBatch(x: f32[B<dp>, S, D], k: f32[B<dp>, D, S], w: f32[H<tp>, D, E],
                  v: f32[B<dp>, 1, S, D]) -> (a: f32[B<dp>, S, S], b: f32[B<dp>, H<tp>, S, E], c: f32[B, S, E]) {
  a = x @ k
  b = v @ w
  c = x @ slice(w, 0, 1, 2)
  return a, b, c
}
""")

model("mlp-column-row")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16
// Megatron MLP twice: column- then row-parallel, bias after the partial sum
block MLP(x: f32[B<dp>, D]) -> f32[B<dp>, D] {
  param w1: f32[D, F<tp>] = normal(0.3)
  param b1: f32[F<tp>] = normal(0.1)
  param w2: f32[F<tp>, D] = normal(0.3)
  param b2: f32[D] = uniform(-0.5, 0.5)
  h = gelu(x @ w1 + b1)
  return h @ w2 + b2
}
model MlpColumnRow(x: f32[B<dp>, D], y: f32[B<dp>, D]) -> (out: f32[B<dp>, D], loss: f32) {
  out = MLP(x) as mlp
  out = MLP(out) as mlp2
  err = out - y
  return out, mean(err * err)
}
""")

model("gemm-epilogues")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8, F = 16
// An MLP with its biases, the tanh GELU and the residual sum, its products
// local on every mesh: the fusion groups that the CUDA backend's GEMM
// epilogues compute (LOOMRT_GEMM_EPILOGUE=1; run.py --cuda-on-cpu)
model GemmEpilogues(x: f32[B<dp>, S, D]) -> (out: f32[B<dp>, S, D]) {
  param w1: f32[D, F] = normal(0.3)
  param b1: f32[F] = normal(0.1)
  param w2: f32[F, D] = normal(0.3)
  param b2: f32[D] = uniform(-0.5, 0.5)
  h = gelu(x @ w1 + b1, approximate = "tanh")
  return x + (h @ w2 + b2)
}
""")

model("einsum")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8, H = 4, E = 2
model Einsum(x: f32[B<dp>, S, D], wq: f32[D, H<tp>, E], wo: f32[H<tp>, E, D], y: f32[D, D<tp>])
    -> (q: f32[B<dp>, H<tp>, S, E], o: f32[B<dp>, S, D], r: f32[B<dp>, D], g: f32[B<dp>, S, S],
        d: f32[D], t: f32[D, B, S], u: f32[B<dp>, S, D<tp>]) {
  q = einsum("bsd,dhe->bhse", x, wq)
  o = einsum("bhse,hed->bsd", q, wo)     // contracts split h and e: partial over tp
  r = einsum("bsd->bd", x)               // one-operand reduction
  g = einsum("bsd,btd->bst", x, o)       // b in all three places
  d = einsum("ii->i", y)                 // diagonal of a split matrix
  t = einsum("bsd->dbs", o)              // permutation only
  u = einsum("bsk,kd->bsd", x, y)
  return q, o, r, g, d, t, u
}
""")

model("einsum-reduce-split")("""
mesh m = [%MESH%]
const B = 8, S = 4, F = 16, D = 4
// one-operand reductions over a split dimension give partial values that
// then meet linear and non-linear ops
model EinsumReduceSplit(x: f32[B<dp>, S, F<tp>], y: f32[B<dp>, S]) -> (a: f32[B<dp>, S], b: f32[B<dp>, S], c: f32[B<dp>], d: f32[B<dp>, F<tp>]) {
  p = einsum("bsf->bs", x)
  a = p * 3 - y
  b = softmax(p)
  c = einsum("bsf->b", x * x)
  d = einsum("bsf,bs->bf", x, y)
  return a, b, c, d
}
""")

# --- normalisations and reductions ----------------------------------------

model("softmax-dims")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
model SoftmaxDims(x: f32[B<dp>, S, D<tp>], t: f32[D<tp>, B<dp>])
    -> (a: f32[B<dp>, S, D<tp>], b: f32[B<dp>, S, D<tp>], c: f32[B<dp>, S, D<tp>], d: f32[B<dp>, S, D], e: f32[D<tp>, B<dp>]) {
  return softmax(x), softmax(x, dim = 0), softmax(x, dim = 1), softmax(x * 3, dim = -3), softmax(t, dim = 0)
}
""")

# Softmax over the last dimension, whole on every rank: the CUDA backend's
# row kernel (a warp per row of up to 256 packs, else a block per row).
model("softmax-rows")("""
mesh m = [%MESH%]
const B = 8, S = 4, N = 40, L = 1100
model SoftmaxRows(x: f32[B<dp>, S<tp>, N], y: f32[B<dp>, L])
    -> (a: f32[B<dp>, S<tp>, N], b: f32[B<dp>, L]) {
  return softmax(x * 4), softmax(y * 4)
}
""")

model("reductions-of-pieces")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 16, R = 8
// sums, means and maxima over the last dimension of pieces split from one
// product, read in place
model ReductionsOfPieces(x: f32[B<dp>, S, D]) -> (a: f32[B<dp>, S], b: f32[B<dp>, S, 1], c: f32[B<dp>, S]) {
  param w: f32[D, 2 * R] = normal(0.25)
  p, q = split(x @ w, [R, R], dim = 2)
  return sum(p, dim = 2), mean(q, dim = -1, keepdim = true) + max(p, dim = -1, keepdim = true), max(q * 2, dim = 2) + sum(q, dim = -1)
}
""")

model("sequence-parallel-fused-heads")("""
mesh m = [%MESH%]
const B = 2, S = 8, D = 16, H = 4, E = 4
// q, k and v split from one projection, the sequence split (over dp here)
// and the heads over tp: gathered along the sequence before their
// transposes (loom-hoist-collectives), v's piece alone copied
// (loom-split-to-slices)
block Attention(x: f32[B, S<dp>, D]) -> f32[B, S<dp>, D] {
  param w_qkv: f32[D, 3, H<tp>, E] = normal(0.25)
  param w_o: f32[H<tp>, E, D] = normal(0.25)
  param g_q: f32[E] = normal(1.0, 0.2)
  param g_k: f32[E] = normal(1.0, 0.2)
  q, k, v = split(einsum("bsd,dche->bsche", x, w_qkv), [1, 1, 1], dim = 2)
  q = rmsnorm(reshape(q, [B, S, H, E]), g_q, eps = 1e-6)
  k = rmsnorm(reshape(k, [B, S, H, E]), g_k, eps = 1e-6)
  o = attention(transpose(q, perm = [0, 2, 1, 3]), transpose(k, perm = [0, 2, 1, 3]),
                transpose(reshape(v, [B, S, H, E]), perm = [0, 2, 1, 3]), causal = true)
  return einsum("bhse,hed->bsd", o, w_o)
}
model SequenceParallelHeads(x: f32[B, S<dp>, D]) -> (y: f32[B, S<dp>, D]) {
  return x + Attention(x)
}
""")

model("norms")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
// layernorm and rmsnorm over one (split) and two trailing dimensions
model Norms(x: f32[B<dp>, S, D<tp>]) -> (a: f32[B<dp>, S, D<tp>], b: f32[B<dp>, S, D], c: f32[B<dp>, S, D<tp>]) {
  param g: f32[D<tp>] = normal(1.0, 0.2)
  param bb: f32[D<tp>] = normal(0.1)
  param g2: f32[S, D] = uniform(0.5, 1.5)
  param b2: f32[S, D] = zeros
  a = layernorm(x, g, bb)
  b = layernorm(x * 2 + 1, g2, b2, eps = 1e-3)
  c = rmsnorm(x, g) + rmsnorm(x, g2, eps = 1e-4)
  return a, b, c
}
""")

model("reductions")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
model Reductions(x: f32[B<dp>, S, D<tp>])
    -> (s0: f32, s1: f32[B<dp>, S], s2: f32[S], s3: f32[B<dp>, S, D<tp>], m1: f32[B<dp>, 1, D<tp>],
        m2: f32[S], m3: f32, x1: f32[B<dp>, S, 1], x2: f32[D], x3: f32, x4: f32[1, 1, D<tp>]) {
  return sum(x), sum(x, dim = -1), sum(x, dim = [0, 2]), sum(x, dim = []),
         mean(x, dim = 1, keepdim = true), mean(x, [2, 0]), mean(x),
         max(x, dim = 2, keepdim = true), max(x, dim = [0, 1]), max(x), max(x, dim = [1, 0], keepdim = true)
}
""")

# --- data movement --------------------------------------------------------

model("reshape-heads")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 16, H = 4, E = 4
// split a tp-split dimension into heads and back; merge a dp-split
// dimension with its neighbour; split it so that the pieces do not align
model ReshapeHeads(x: f32[B<dp>, S, D<tp>])
    -> (a: f32[B<dp>, H<tp>, S, E], b: f32[B<dp>, S, D<tp>], c: f32[32, D], d: f32[B<dp>, S, 2, 8]) {
  h = reshape(x, [B, S, H, E])
  a = transpose(h, [0, 2, 1, 3])
  b = reshape(transpose(a * 2, [0, 2, 1, 3]), [B, S, D])
  c = reshape(x, [B * S, D])
  d = reshape(x + 1, [B, S, 2, 8])
  return a, b, c, d
}
""")

model("reshape-merge-batch")("""
mesh m = [%MESH%]
const B = 8, S = 8, D = 8, F = 16
// [B, S] merged into tokens for the products, then split back
model ReshapeMerge(x: f32[B<dp>, S<tp>, D]) -> (y: f32[B<dp>, S, D], t: f32[64, D]) {
  param w1: f32[D, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D] = normal(0.3)
  t = reshape(x, [B * S, D])
  h = relu(t @ w1) @ w2
  return reshape(h, [B, S, D]) + x, t * 2
}
""")

model("transpose")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
model Transpose(x: f32[B<dp>, S, D<tp>])
    -> (a: f32[B<dp>, D<tp>, S], b: f32[D<tp>, B<dp>, S], c: f32[S, D, B], d: f32[B, S, D<tp>]) {
  y = transpose(x, perm = [2, 0, 1])
  return transpose(x), y, transpose(x, [1, 2, 0]), transpose(y, [1, 2, 0]) * 2
}
""")

model("transpose-views")("""
mesh m = [%MESH%]
const B = 4, S = 6, D = 8, F = 4
// Transposes read only by contractions are views of their input (no copy):
// the right operand of a matmul, the left of a batched one, a 3-D
// permutation into an einsum, one inside a repeat; xt is also read
// element-wise, so it stays a copy.
model TransposeViews(x: f32[B<dp>, S, D], w: f32[F, D<tp>])
    -> (a: f32[B<dp>, S, F], b: f32[B<dp>, D, S], c: f32[S, B<dp>, F], d: f32[B<dp>, D, D], e: f32[B<dp>, S, D]) {
  a = x @ transpose(w)
  xt = transpose(x, [0, 2, 1])
  c = einsum("bds,fd->sbf", xt, w)
  d = transpose(x, [0, 2, 1]) @ x
  e = einsum("sbd,de->bse", transpose(x, [1, 0, 2]), transpose(w) @ w)
  h = x
  h = repeat 2 as steps { relu(h @ transpose(transpose(w) @ w)) }
  return a, xt * 2, c, d, e + 0 * h
}
""")

model("attention-gemm-order")("""
mesh m = [%MESH%]
const B = 4, S = 8, D = 16, H = 4, E = 4, G = 2
// Einsums read only by attention are computed in GEMM order ([b, s, h, e])
// and read through strides (loom-contraction-order): heads after the batch,
// heads before it, and two batch dimensions that do not merge (left as
// they are); heads split over tp.
model AttentionGemmOrder(x: f32[B<dp>, S, D])
    -> (a: f32[B<dp>, H<tp>, S, E], b: f32[H<tp>, B<dp>, S, E], c: f32[B<dp>, G, H, S, E]) {
  param wq: f32[D, H<tp>, E] = normal(0.5)
  param wk: f32[D, H<tp>, E] = normal(0.5)
  param wv: f32[D, H<tp>, E] = normal(0.5)
  param wg: f32[D, G, H, E] = normal(0.5)
  a = attention(einsum("bsd,dhe->bhse", x, wq), einsum("bsd,dhe->bhse", x, wk),
                einsum("bsd,dhe->bhse", x, wv), causal = true)
  b = attention(einsum("bsd,dhe->hbse", x, wq), einsum("bsd,dhe->hbse", x, wk),
                einsum("bsd,dhe->hbse", x, wv))
  g = einsum("bsd,dghe->bghse", x, wg)
  c = attention(g, g, g, causal = true)
  return a, b, c
}
""")

model("attention-out-order")("""
mesh m = [%MESH%]
const B = 8, S = 8, T = 4, D = 16, H = 4, E = 4, F = 8
// Attention results read by one einsum in another order than attention
// writes are stored in that einsum's order (loom-contraction-order): the
// out-projection with heads split over tp (a partial sum), a head mix with
// the result as the second operand, a non-causal out-projection with F != E
// and T != S, and an einsum whose order would move the result's columns
// (left as it is).
model AttentionOutOrder(x: f32[B<dp>, S, D], y: f32[B<dp>, T, D], g: f32[B<dp>, S, H<tp>])
    -> (o: f32[B<dp>, S, D], m: f32[B<dp>, S, E], n: f32[B<dp>, S, D], c: f32[B<dp>, E, D]) {
  param wq: f32[D, H<tp>, E] = normal(0.5)
  param wk: f32[D, H<tp>, E] = normal(0.5)
  param wv: f32[D, H<tp>, F] = normal(0.5)
  param wo: f32[H<tp>, E, D] = normal(0.5)
  param wf: f32[H<tp>, F, D] = normal(0.5)
  param ws: f32[H<tp>, T, D] = normal(0.5)
  q = einsum("bsd,dhe->bhse", x, wq)
  k = einsum("btd,dhe->bhte", y, wk)
  v = einsum("btd,dhf->bhtf", y, wv)
  o = einsum("bhse,hed->bsd", attention(q, q, q, causal = true), wo)
  m = einsum("bsh,bhse->bse", g, attention(q, q, q))
  n = einsum("bhsf,hfd->bsd", attention(q, k, v), wf)
  c = einsum("bhte,htd->bed", attention(k, k, k, causal = true), ws)
  return o, m, n, c
}
""")

model("concat-split")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8, D2 = 16, B2 = 16, S3 = 12
// concat along the split and unsplit dimensions; uneven split pieces
model ConcatSplit(x: f32[B<dp>, S, D<tp>], y: f32[B<dp>, S, D<tp>])
    -> (c0: f32[B<dp>, S, D2<tp>], c1: f32[B2<dp>, S, D<tp>], c2: f32[B<dp>, S3, D<tp>],
        p: f32[B<dp>, S, 3], q: f32[B<dp>, S, 5], r: f32[B<dp>, 1, D], s: f32[B<dp>, 3, D<tp>], u: f32[B<dp>, S, 4]) {
  c0 = concat([x, y], dim = -1)
  c1 = concat([x, y * 2])
  c2 = concat([x, y, x], dim = 1)
  p, q = split(x, [3, 5], dim = 2)
  r, s = split(y + 1, [1, 3], dim = 1)
  a, b = split(c0, [4, 12], dim = 2)
  return c0, c1, c2, p, q, r, s, a * 2
}
""")

model("slice")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
model Slice(x: f32[B<dp>, S, D<tp>])
    -> (a: f32[B<dp>, S, 3], b: f32[4, S, D<tp>], c: f32[B<dp>, 2, D<tp>], d: f32[B<dp>, S, 4<tp>], e: f32[B<dp>, S, 4]) {
  return slice(x, 2, 1, 4), slice(x, 0, 2, 6), slice(x, dim = 1, start = 1, end = 3),
         slice(x, 2, 4, 8), slice(slice(x, 2, 1, 7), 2, 1, 5)
}
""")

model("casts")("""
mesh m = [%MESH%]
const B = 8, D = 8
// f32 <-> bf16, float -> int (x * 4 is exact, so truncation is too),
// int -> float, i32 <-> i64
model Casts(x: f32[B<dp>, D<tp>], i: i32[B<dp>, D<tp>])
    -> (a: f32[B<dp>, D<tp>], b: i32[B<dp>, D<tp>], c: i64[B<dp>, D], d: f32[B, D<tp>], e: bf16[B<dp>, D<tp>], f: i32[B, D]) {
  h = cast(x, bf16)
  a = cast(h, f32) + x
  b = cast(x * 4, i32) + i
  c = cast(b, i64) * 3
  d = cast(i, f32) / 2 + cast(c, f32)
  return a, b, c, d, h, cast(c - 7, i32)
}
""")

model("integers")("""
mesh m = [%MESH%]
const B = 8, D = 8
// integer + - * / neg sum max and @ (the product over a split dimension is
// an integer partial sum)
model Integers(i: i32[B<dp>, D<tp>], j: i32[B<dp>, D], k: i32[D<tp>, D])
    -> (a: i32[B<dp>, D<tp>], b: i32[B<dp>, D<tp>], s: i32[B<dp>], m: i32[D<tp>], t: i32[B<dp>, D], u: i32, n: i64[B, D]) {
  a = i * j - neg(i) + 3
  b = (a * 7 - 50) / (j + 1)
  s = sum(a, dim = 1)
  m = max(b - 100, dim = 0)
  t = i @ k
  n = cast(i, i64) * cast(j, i64) - 5
  return a, b, s, m, t, sum(t), n
}
""")

# --- regressions: compiler bugs this suite found, fixed since --------------

model("slice-from-start", fixed_bug="loom-partition gives a slice that starts at 0 "
      "the input's whole extent (compares the limit with the result's size)")("""
mesh m = [%MESH%]
const B = 8, D = 8
model SliceFromStart(x: f32[B<dp>, D<tp>], y: f32[B<dp>, D]) -> (a: f32[B<dp>, 4], b: f32[4, D<tp>]) {
  return slice(y, 1, 0, 4), slice(x, 0, 0, 4)
}
""")

model("contraction-and-result-split", fixed_bug="sharding propagation does not "
      "converge when one axis splits a product's contraction and its columns")("""
mesh m = [%MESH%]
const B = 8, D = 8
model ContractionAndResult(i: i32[B<dp>, D<tp>], k: i32[D, D<tp>], x: f32[B<dp>, D<tp>], w: f32[D, D<tp>])
    -> (t: i32[B<dp>, D<tp>], y: f32[B<dp>, D<tp>]) {
  return i @ k, x @ w
}
""")

model("row-parallel-plus-column-split", fixed_bug="sharding propagation does not "
      "converge: a row-parallel product plus a value split by columns over the same axis")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16
model RowParallelPlusColumnSplit(g: f32[B, F<tp>], y: f32[B, D<tp>]) -> (a: f32[B, D]) {
  param w: f32[F<tp>, D] = normal(0.3)
  return g @ w + y
}
""")

model("integer-partial-division", fixed_bug="loom-partition divides an integer "
      "partial sum before the all_reduce (integer division is not linear)")("""
mesh m = [%MESH%]
const B = 8, D = 8
model IntegerPartialDivision(i: i32[B<dp>, D<tp>], k: i32[D<tp>, D]) -> (a: i32[B<dp>, D], b: i32[B<dp>]) {
  return (i @ k) / 3, sum(i, dim = 1) / 3
}
""")

model("attention-causal-query-split", fixed_bug="causal attention with the "
      "queries split along the sequence masks with each device's local query positions")("""
mesh m = [%MESH%]
const B = 8, H = 2, S = 8, E = 4
model AttentionCausalQuerySplit(q: f32[B<dp>, H, S<tp>, E], k: f32[B<dp>, H, S, E], v: f32[B<dp>, H, S, E])
    -> (a: f32[B<dp>, H, S, E]) {
  return attention(q, k, v, causal = true)
}
""")


# --- embedding, attention, cross-entropy ----------------------------------

model("embedding-vocab-split")("""
mesh m = [%MESH%]
const B = 8, S = 4, V = 16, D = 8
// vocabulary split over tp (ids are in [0, V)); ids + 4 reaches past V and
// gives rows of zeros
model EmbedVocab(ids: i32[B<dp>, S]) -> (e: f32[B<dp>, S, D], f: f32[B<dp>, S, D<tp>], g: f32[B<dp>, S, D]) {
  param wte: f32[V<tp>, D] = normal(1.0)
  e = embedding(ids, wte)
  return e, relu(e) * 2, embedding(ids + 4, wte)
}
""")

model("embedding-dim-split")("""
mesh m = [%MESH%]
const B = 8, S = 4, V = 16, V2 = 32, D = 8
// i64 ids; one table split along D, one replicated with a larger vocabulary
model EmbedDim(ids: i64[B<dp>, S]) -> (e: f32[B<dp>, S, D<tp>], f: f32[B, S, D]) {
  param t1: f32[V, D<tp>] = normal(0.5)
  param t2: f32[V2, D] = uniform(-1, 1)
  e = embedding(ids, t1) + embedding(ids, t2)
  return e, embedding(ids * 2, t2)
}
""")

model("attention-heads")("""
mesh m = [%MESH%]
const B = 8, S = 8, D = 16, H = 4, E = 4
// causal self-attention, heads split over tp, row-parallel output projection
model AttentionHeads(x: f32[B<dp>, S, D]) -> (y: f32[B<dp>, S, D], o: f32[B<dp>, H<tp>, S, E]) {
  param w_q: f32[D, H<tp>, E] = normal(0.3)
  param w_k: f32[D, H<tp>, E] = normal(0.3)
  param w_v: f32[D, H<tp>, E] = normal(0.3)
  param w_o: f32[H<tp>, E, D] = normal(0.3)
  q = einsum("bsd,dhe->bhse", x, w_q)
  k = einsum("bsd,dhe->bhse", x, w_k)
  v = einsum("bsd,dhe->bhse", x, w_v)
  o = attention(q, k, v, causal = true)
  return x + einsum("bhse,hed->bsd", o, w_o), o
}
""")

model("attention-inputs")("""
mesh m = [%MESH%]
const B = 8, H = 4, S = 4, T = 8, E = 4, F = 8
// attention on inputs: S != T, E != F, explicit scale, causal and not
model AttentionInputs(q: f32[B<dp>, H<tp>, S, E], k: f32[B<dp>, H<tp>, T, E], v: f32[B<dp>, H<tp>, T, F])
    -> (a: f32[B<dp>, H<tp>, S, F], b: f32[B<dp>, H, S, F]) {
  return attention(q, k, v), attention(q, k, v, causal = true, scale = 0.5)
}
""")

model("attention-sequence-split")("""
mesh m = [%MESH%]
const B = 8, H = 2, S = 8, E = 4
// queries split along the sequence (not causal: the causal case is
// attention-causal-query-split); keys and values split along theirs,
// causal and not
model AttentionSeq(q: f32[B<dp>, H, S, E], k: f32[B<dp>, H, S, E], v: f32[B<dp>, H, S, E])
    -> (a: f32[B<dp>, H, S<tp>, E], b: f32[B<dp>, H, S, E]) {
  qs = shard(q, [B<dp>, H, S<tp>, E])
  a = attention(qs, k, v, scale = 0.25)
  ks = shard(k, [B<dp>, H, S<tp>, E])
  vs = shard(v, [B<dp>, H, S<tp>, E])
  b = attention(q, ks, vs, causal = true) + attention(q, ks, vs)
  return a, b
}
""")

model("cross-entropy-vocab-split")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8, V = 16
// vocabulary-parallel logits and loss, tokens split over dp
model XentVocab(x: f32[B<dp>, S, D], targets: i32[B<dp>, S]) -> (loss: f32, logits: f32[B<dp>, S, V<tp>]) {
  param w: f32[D, V<tp>] = normal(0.5)
  logits = x @ w
  return cross_entropy(logits, targets), logits
}
""")

model("cross-entropy-replicated")("""
mesh m = [%MESH%]
const B = 8, S = 4, V = 16
// vocabulary not split; rank-2 and rank-3 logits; i64 targets; targets
// split differently from their logits
model XentRep(l2: f32[B<dp>, V], t2: i64[B<dp>], l3: f32[B<dp>, S, V], t3: i32[B, S<tp>])
    -> (a: f32, b: f32, c: f32) {
  return cross_entropy(l2, t2), cross_entropy(l3, t3), cross_entropy(l3 * 2, t3) + cross_entropy(l2, t2)
}
""")

# --- shardings ------------------------------------------------------------

model("sequence-parallel")("""
mesh m = [%MESH%]
const B = 8, S = 8, D = 8, F = 16
// Megatron-SP: norms on [B:dp, S:tp, D], the MLP on [B:dp, S, D:_] with
// F split, the row-parallel partial sum scattered back along S
block Layer(x: f32[B<dp>, S, D]) -> f32[B<dp>, S, D] {
  param g: f32[D] = normal(1.0, 0.1)
  param b: f32[D] = zeros
  param w1: f32[D, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D] = normal(0.3)
  h = shard(x, [B<dp>, S<tp>, D])
  h = layernorm(h, g, b)
  h = shard(h, [B<dp>, S, D<_>])
  a = gelu(h @ w1) @ w2
  a = shard(a, [B<dp>, S<tp>, D])
  return x + a
}
model SeqParallel(x: f32[B<dp>, S, D]) -> (y: f32[B<dp>, S, D], z: f32[B<dp>, S<tp>, D]) {
  y = Layer(x) as l1
  y = Layer(y) as l2
  return shard(y, [B<dp>, S, D<_>]), rmsnorm(shard(y, [B<dp>, S<tp>, D]), reshape(slice(y, 0, 1, 2), [S, D]))
}
""")

model("reshard-conflicts")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 8
// annotations that disagree: the same axis on a product's batch and
// contraction, batch splits over different axes, an axis moving from rows
// to columns, a block argument constraint against its caller's layout
block ByRows(x: f32[B<tp>, D]) -> f32[B<tp>, D] { return x * 2 }
model Conflicts(x: f32[B<dp>, D], w: f32[D<dp>, F], z: f32[B<tp>, D])
    -> (a: f32[B<dp>, F], b: f32[B<dp>, D], c: f32[B, D<tp>], d: f32[B<dp>, D<tp>]) {
  a = x @ w
  b = z + x
  c = z * 3
  d = ByRows(x) + 1
  return a, b, c, d
}
""")

model("axis-order", needs=("dp", "tp"))("""
mesh m = [%MESH%]
const B = 8, D = 8
// B:(dp, tp) and B:(tp, dp) are two layouts of one tensor
model AxisOrder(x: f32[B<dp,tp>, D], y: f32[B<tp,dp>, D])
    -> (a: f32[B<tp,dp>, D], b: f32[B<dp,tp>, D], c: f32[B<dp,tp>, D], d: f32[B<tp,dp>], e: f32) {
  a = x * 2
  b = y + 1
  c = x + y
  return a, b, c, sum(x * y, dim = 1), sum(c)
}
""")

model("axis-order-shard", needs=("dp", "tp"))("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 8
// shard() between the two orders mid-program, products over both
model AxisOrderShard(x: f32[B<dp,tp>, D]) -> (a: f32[B<dp,tp>, F], b: f32[B<tp,dp>, F], c: f32[D, F]) {
  param w: f32[D, F] = normal(0.5)
  s = shard(x, [B<tp,dp>, D])
  a = relu(s @ w)
  b = shard(a * 2, [B<tp,dp>, F])
  t = shard(b, [B<dp,tp>, F])
  return a + t, b, transpose(x) @ t
}
""")

model("block-constraints")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
// block signatures: replicated (_), open (?) and prioritised dimensions
block Blk(x: f32[B<dp>, S, D<_>]) -> f32[B<dp p1>, S<tp?>, D] {
  return x * 2
}
block Free(x: f32[B, S, D]) -> f32[B, S, D] { return tanh(x) }
model BlockConstraints(x: f32[B<dp p0>, S<tp?>, D], y: f32[B<dp>, S, D<tp>]) -> (a: f32[B<dp>, S, D], b: f32[B<dp>, S<tp>, D]) {
  a = Blk(y) + Free(x)
  return a, Blk(a) - Free(y)
}
""")

model("open-outputs")("""
mesh m = [%MESH%]
const B = 8, S = 8, D = 8
// open dimensions on inputs and outputs; a model without other annotations
model OpenOutputs(x: f32[B<dp?>, S<tp?>, D], y: f32[B, S, D]) -> (a: f32[B<dp?>, S, D<tp?>], b: f32[B, S, D]) {
  return x * y, softmax(y) + x
}
""")

model("replicated")("""
mesh m = [%MESH%]
const B = 4, D = 8
// a mesh but no annotation at all: every rank computes everything
model Replicated(x: f32[B, D], i: i32[B]) -> (y: f32[B, D], s: f32, j: i32[B]) {
  param w: f32[D, D] = normal(0.5)
  return softmax(x @ w), mean(x), i * 2
}
""")

model("no-mesh")("""
const B = 4, D = 8
// a program without a mesh runs on one rank
model NoMesh(x: f32[B, D]) -> (y: f32[B, D]) {
  param w: f32[D, D] = normal(0.5)
  return relu(x @ w)
}
""")

# --- partial values -------------------------------------------------------

model("partial-values")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16
// a row-parallel product (partial over tp) through linear ops, which may
// stay partial, and non-linear ones, which need the sum first
model Partial(x: f32[B<dp>, F<tp>], y: f32[B<dp>, D])
    -> (a: f32[B<dp>, D], b: f32[B<dp>, D], c: f32[B<dp>], d: f32, e: f32[B<dp>, D], f: f32[B<dp>, D],
        g: f32[B<dp>, D], h: f32[D], k: f32[D, B<dp>], l: f32[B<dp>, 2, 4], n: f32[B<dp>, D]) {
  param w: f32[F<tp>, D] = normal(0.3)
  p = x @ w
  a = p * 2 + p
  b = p - y
  c = sum(p, dim = 1)
  d = mean(p)
  e = relu(p)
  f = p * p
  g = p / (y * y + 1)
  h = max(p, dim = 0)
  k = transpose(p) - 1
  l = reshape(p, [B, 2, 4])
  n = 2 - neg(p) + exp(p * 0.1)
  return a, b, c, d, e, f, g, h, k, l, n
}
""")

model("partial-special-values")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16
// a row-parallel product (partial over tp) divided or multiplied by values
// known only at run time: zeros and an infinity. Reduced first, the sums
// keep the unsharded program's special values: (a + b) / 0 is one
// infinity, where a / 0 + b / 0 is NaN when a and b differ in sign
// (mlp.loom divided by its zero bias gave NaN on 4 ranks until 2026-12-07)
model PartialSpecial(x: f32[B<dp>, F<tp>])
    -> (a: f32[B<dp>, D], b: f32[B<dp>, D], c: f32[B<dp>, D]) {
  param w: f32[F<tp>, D] = normal(0.3)
  param zero: f32[D] = zeros
  param one: f32[D] = ones
  p = x @ w
  infinity = one / zero
  a = p / zero
  b = p * infinity
  c = p * 0.5 + p / (one + one)
  return a, b, c
}
""")

model("partial-movement")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16, D2 = 16
// partial values through concat, split, slice, softmax, layernorm and cast
model PartialMove(x: f32[B<dp>, F<tp>], y: f32[B<dp>, D])
    -> (a: f32[B<dp>, D2], b: f32[B<dp>, 3], c: f32[B<dp>, 5], d: f32[B<dp>, D], e: f32[B<dp>, D], f: f32[B<dp>, 4], g: i32[B<dp>, D]) {
  param w: f32[F<tp>, D] = normal(0.3)
  param s: f32[D] = ones
  param z: f32[D] = zeros
  p = x @ w
  a = concat([p, y], dim = 1)
  b, c = split(p, [3, 5], dim = 1)
  d = softmax(p)
  e = layernorm(p, s, z)
  f = slice(p, 1, 2, 6) + slice(y, 1, 1, 5)
  g = cast(p * 0 + y * 4, i32)
  return a, b, c, d, e, f, g
}
""")

model("partial-2d", needs=("dp", "tp"))("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16
// a product whose contraction is split over both axes: partial over
// (dp, tp), reduced to different layouts
model Partial2D(x: f32[B, F<dp,tp>], w: f32[F<dp,tp>, D], v: f32[F<tp,dp>, D])
    -> (a: f32[B, D], b: f32[B<dp>, D<tp>], c: f32[B<tp,dp>, D], d: f32) {
  p = x @ w
  q = x @ v
  return p, p + q, relu(p) - q, sum(p * q)
}
""")

model("partial-nonlinear")("""
mesh m = [%MESH%]
const B = 8, S = 4, F = 16, V = 8, H = 2, E = 4
// row-parallel products (partial over tp) as inputs of reductions and of
// ops that need whole values: cross_entropy, attention, rmsnorm, max
model PartialNonlinear(x: f32[B<dp>, S, F<tp>], t: i32[B<dp>, S], kv: f32[B<dp>, H, S, E])
    -> (loss: f32, o: f32[B<dp>, H, S, E], r: f32[B<dp>, S, V], mx: f32, mk: f32[B<dp>, 1, V], sm: f32[B<dp>, S, V]) {
  param w: f32[F<tp>, V] = normal(0.3)
  param g: f32[V] = ones
  param wq: f32[F<tp>, H, E] = normal(0.3)
  p = x @ w
  q = einsum("bsf,fhe->bhse", x, wq)
  return cross_entropy(p, t), attention(q, kv, kv, causal = true), rmsnorm(p, g), max(p),
         mean(p, dim = 1, keepdim = true), softmax(p, dim = 0)
}
""")

model("reshape-2d-axes", needs=("dp", "tp"))("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
// a dimension split over (dp, tp) reshaped, reduced and normalised across
model Reshape2D(x: f32[B<dp,tp>, S, D])
    -> (a: f32[32, D], b: f32[2, 4, S, D], c: f32[B<dp,tp>, S, D], d: f32[S, D], e: f32[B<tp,dp>, S, D]) {
  return reshape(x, [B * S, D]), reshape(x, [2, 4, S, D]), softmax(x, dim = 0), sum(x, dim = 0),
         transpose(reshape(transpose(x, [1, 0, 2]), [S, B, D]), [1, 0, 2])
}
""")

model("vocab-conflicts")("""
mesh m = [%MESH%]
const B = 8, S = 8, V = 16, D = 8
// tp on both the ids' sequence and the table's vocabulary; on both the
// targets' sequence and the logits' vocabulary
model VocabConflicts(ids: i32[B<dp>, S<tp>], targets: i32[B<dp>, S<tp>], x: f32[B<dp>, S, D])
    -> (e: f32[B<dp>, S<tp>, D], loss: f32) {
  param wte: f32[V<tp>, D] = normal(1.0)
  param w: f32[D, V<tp>] = normal(0.5)
  return embedding(ids, wte), cross_entropy(x @ w, targets)
}
""")

model("repeat-sequence-parallel")("""
mesh m = [%MESH%]
const B = 8, S = 8, D = 8, F = 16, L = 3
// shard() constraints inside a repeat body: the carried value changes
// layout within each iteration
block Layer(x: f32[B<dp>, S<tp>, D]) -> f32[B<dp>, S<tp>, D] {
  param g: f32[D] = normal(1.0, 0.1)
  param w1: f32[D, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D] = normal(0.3)
  h = shard(rmsnorm(x, g), [B<dp>, S, D<_>])
  return x + shard(silu(h @ w1) @ w2, [B<dp>, S<tp>, D])
}
model RepeatSP(x: f32[B<dp>, S, D]) -> (y: f32[B<dp>, S, D]) {
  x = repeat L as layers { Layer(x) }
  return x
}
""")


model("repeat-sequence-parallel-implicit", fixed_bug="inside a repeat, sharding "
      "propagation gave tp to the sequence before a layer's weight slice had "
      "its stack's axes, and gathered every layer's weights")("""
mesh m = [%MESH%]
const B = 4, S = 8, D = 8, F = 64, L = 3
// only the layer's input is constrained to the sequence split: the
// activation is gathered before the column-parallel products and the
// row-parallel sum reduce-scattered back (test/SPMD/sequence-parallel-repeat.loom)
block Layer(x: f32[B<dp>, S, D]) -> f32[B<dp>, S, D] {
  x = shard(x, [B<dp>, S<tp>, D])
  param g: f32[D] = normal(1.0, 0.1)
  param w1: f32[D, F<tp>] = normal(0.3)
  param w3: f32[D, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D] = normal(0.1)
  h = rmsnorm(x, g)
  return x + (silu(h @ w1) * (h @ w3)) @ w2
}
model RepeatSPImplicit(x: f32[B<dp>, S, D]) -> (y: f32[B<dp>, S, D]) {
  x = repeat L as layers { Layer(x) }
  return x
}
""")


model("fsdp-tensor-parallel", fixed_bug="a weight split over dp for storage "
      "outweighed the dp-split batch of an activation in the contention for "
      "dp: the activation moved and products were all-reduced over dp")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 16, H = 4, E = D / H, F = 32
// weights split over dp along their model dimension (ZeRO-3, FSDP) and
// over tp as Megatron splits them (test/SPMD/fsdp-tensor-parallel.loom)
block Layer(x: f32[B<dp>, S, D]) -> f32[B<dp>, S, D] {
  param g: f32[D] = normal(1.0, 0.1)
  param w_qkv: f32[3, D<dp>, H<tp>, E] = normal(0.3)
  param w_o: f32[H<tp>, E, D<dp>] = normal(0.3)
  param w1: f32[D<dp>, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D<dp>] = normal(0.2)
  h = rmsnorm(x, g)
  qkv = einsum("bsd,cdhe->cbhse", h, w_qkv)
  q, k, v = split(qkv, [1, 1, 1], dim = 0)
  o = attention(reshape(q, [B, H, S, E]), reshape(k, [B, H, S, E]),
                reshape(v, [B, H, S, E]), causal = true)
  x = x + einsum("bhse,hed->bsd", o, w_o)
  return x + silu(rmsnorm(x, g) @ w1) @ w2
}
model FsdpTp(x: f32[B<dp>, S, D]) -> (y: f32[B<dp>, S, D]) {
  return Layer(Layer(x) as l0) as l1
}
""")

model("combined-collectives")("""
mesh m = [%MESH%]
const L = 2, B = 8, S = 8, D = 8, F = 16
// collectives that loom-combine-collectives runs as one: a layer's
// weights gathered over dp along different dimensions (FSDP), sums of
// independent row-parallel products (f32 and bf16), and scatters of
// such sums along different dimensions
block Layer(x: f32[B<dp>, S, D]) -> f32[B<dp>, S, D] {
  param g: f32[D<dp>] = normal(1.0, 0.1)
  param w1: f32[D<dp>, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D<dp>] = normal(0.3)
  param w3: f32[D, F<dp,tp>] = normal(0.3)
  h = rmsnorm(x, g)
  return x + silu(h @ w1) @ w2 + 0.1 * relu(h @ w3) @ transpose(w1)
}
model Combined(x: f32[B<dp>, S, D], u: f32[B, S, F<tp>], wa: f32[F<tp>, D],
               wb: f32[F<tp>, D], c: bf16[B, S, F<tp>], wc: bf16[F<tp>, D],
               wd: bf16[F<tp>, D], gm: f32[D<dp>], wm: bf16[D<dp>, F],
               ids: i32[B<tp>, S], h: f16[F<tp>, D])
    -> (y: f32[B<dp>, S, D], p: f32[B, S<tp>, D], q: f32[B, S, D<tp>],
        r: f32[B, S, D], s: f32[B, S, D], t: bf16[B, S, D], v: bf16[B, S, D],
        g2: f32[D], w2: bf16[D, F], e: f32[B, S, D], h2: f16[F, D]) {
  param table: f32[12<tp>, D] = normal(1.0)
  y = x
  y = repeat L as layers { Layer(y) }
  // gathers of two element types (f32 and bf16) in one; token ids gathered
  // with f16 values for a vocabulary-split embedding (the synthetic ids'
  // bound is found through the loom.combined)
  hh = h * h
  e = embedding(ids, table)
  return y, u @ wa, exp(u) @ wb, tanh(u) @ wa, u @ wb, c @ wc, c @ wd,
         gm * 2.0, wm * wm, e, hh
}
""")

model("normalisations-split-rows")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 16
// softmax, layer and RMS norms over dimensions split across devices: the
// rows' statistics are all-reduced (docs/partitioning.md 3.5); the norm
// over [S, D] has both dimensions split
model NormsSplit(x: f32[B, S<dp>, D<tp>], g: f32[D<tp>], b: f32[D<tp>], g2: f32[S<dp>, D<tp>])
    -> (y: f32[B<dp>, S, D<tp>], z: f32[B, S<dp>, D<tp>], p: f32[B<dp>, S, D<tp>], q: f32[B, S<dp>, D<tp>], w: f32[B, S<dp>, D<tp>], v: bf16[B, S<dp>, D<tp>]) {
  y = layernorm(x, g, b, eps = 1e-3)
  z = rmsnorm(x * 3, g)
  p = softmax(x * 4, dim = 2)
  q = softmax(x, dim = 1)
  w = layernorm(x, g2, g2, eps = 1e-2) + rmsnorm(x, g2)
  h = cast(x, bf16)
  v = layernorm(h, g, b) + rmsnorm(h, g) + softmax(h, dim = 2)
  return y, z, p, q, w, v
}
""")

model("mixture-of-experts", fixed_bug="axes crossed the gate softmax's "
      "reduced dimension: its logits were made split over the experts' axis "
      "and gathered back")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 16, X = 4, F = 8
// a dense-gated mixture of experts, experts split over tp, twice in a
// repeat (test/SPMD/expert-parallel.loom)
block MoE(x: f32[B<dp>, S, D]) -> f32[B<dp>, S, D] {
  param g: f32[D] = normal(1.0, 0.1)
  param w_gate: f32[D, X] = normal(0.3)
  param w1: f32[X<tp>, D, F] = normal(0.3)
  param w2: f32[X<tp>, F, D] = normal(0.3)
  h = rmsnorm(x, g)
  gate = softmax(h @ w_gate, dim = 2)
  y = einsum("bsxf,xfd->bsxd", gelu(einsum("bsd,xdf->bsxf", h, w1)), w2)
  return x + einsum("bsxd,bsx->bsd", y, gate)
}
model Moe(x: f32[B<dp>, S, D]) -> (y: f32[B<dp>, S, D]) {
  x = repeat 2 { MoE(x) }
  return x
}
""")


# --- parameters and repeats -----------------------------------------------

model("params-init")("""
mesh m = [%MESH%]
const D = 8, F = 16
// every initialiser, split and replicated, f32 bf16 and i32
model ParamsInit(x: f32[D]) -> (a: f32[F<tp>, D], b: f32[D], c: bf16[D, F<tp>], d: f32[F, D], i: i32[D<tp>], y: f32[D]) {
  param p1: f32[F<tp>, D] = normal(0.02)
  param p2: f32[D] = normal(1.0, 0.5)
  param p3: bf16[D, F<tp>] = uniform(-1 / D, 1 / D)
  param p4: f32[F<dp>, D] = uniform(2, 3)
  param p5: f32[D] = zeros
  param p6: f32[D<tp>] = ones
  param p7: i32[D<tp>] = ones
  param p8: i32[D] = zeros
  y = x * p2 + p5 + p6 + cast(p7 + p8, f32)
  return p1, p2, p3, p4 * 1, p7 * 3, y
}
""")

model("repeat-stacked")("""
mesh m = [%MESH%]
const B = 8, D = 8, F = 16, L = 3
// stacked split parameters; a repeat carrying two values; nested repeats
block Layer(x: f32[B<dp>, D]) -> f32[B<dp>, D] {
  param w1: f32[D, F<tp>] = normal(0.3)
  param w2: f32[F<tp>, D] = normal(0.3)
  param g: f32[D] = normal(1.0, 0.1)
  return x + rmsnorm(relu(x @ w1) @ w2, g)
}
block Step(x: f32[B<dp>, D], acc: f32[B<dp>, D]) -> (f32[B<dp>, D], f32[B<dp>, D]) {
  param w: f32[D, D<tp>] = normal(0.3)
  y = tanh(x @ w)
  return y, acc + y
}
block Group(x: f32[B<dp>, D]) -> f32[B<dp>, D] {
  x = repeat 2 as inner { Layer(x) }
  return x
}
model RepeatStacked(x: f32[B<dp>, D]) -> (y: f32[B<dp>, D], total: f32[B<dp>, D]) {
  x = repeat L as layers { Layer(x) }
  acc = x * 0
  x, acc = repeat 2 as steps {
    y, s = Step(x, acc)
    y, s * 0.5
  }
  x = repeat 2 as outer { Group(x) }
  return x, acc
}
""")

model("repeat-moves", fixed_bug="a carried value yielded into another "
      "was read after the first move overwrote it")("""
mesh m = [%MESH%]
const B = 8, D = 8
// The moves that end an iteration: carried values that trade places (a
// cycle of three), one yielded as the next value of another while its own
// next value is computed (read after that write), a residual add that
// reads the carried value it replaces, and an initial value read again
// after the loop
model RepeatMoves(x: f32[B<dp>, D<tp>], y: f32[B<dp>, D<tp>]) -> (a: f32[B<dp>, D<tp>], b: f32[B<dp>, D<tp>], c: f32[B<dp>, D<tp>]) {
  p = x * 1
  q = y * 2
  r = x - y
  p, q, r = repeat 4 { q, r, p }
  u = tanh(x)
  v = y * 0.5
  u, v = repeat 3 { u + 1, u }
  w = relu(y)
  w = repeat 2 { tanh(w) + w }
  return p + q * r, u * v, w + relu(y)
}
""")

model("mixed-precision")("""
mesh m = [%MESH%]
const B = 8, S = 4, D = 8
// bf16 inputs and parameters with f32 scales and promotion (all f32 under
// --dtype=f32); bf16 outputs
model Mixed(x: bf16[B<dp>, S, D<tp>], y: f32[B<dp>, S, D]) -> (a: bf16[B<dp>, S, D<tp>], b: f32[B<dp>, S, D], c: bf16[B<dp>, S, D]) {
  param g: f32[D<tp>] = normal(1.0, 0.1)
  param z: f32[D<tp>] = zeros
  param w: bf16[D<tp>, D] = normal(0.3)
  a = layernorm(x, g, z)
  b = x + y
  c = cast(x @ w, bf16)
  return a, b, c
}
""")

model("transformer")("""
mesh m = [%MESH%]
const V = 32, S = 8, D = 16, H = 4, E = 4, F = 32, L = 2, B = 8
// a tiny GPT in f32: vocabulary-parallel tied embedding, heads, MLP,
// norms, a repeat and the loss; and the logits
block Layer(x: f32[B<dp>, S, D]) -> f32[B<dp>, S, D] {
  param g1: f32[D] = ones
  param b1: f32[D] = zeros
  param w_qkv: f32[D, 3, H<tp>, E] = normal(0.2)
  param w_o: f32[H<tp>, E, D] = normal(0.2)
  param g2: f32[D] = ones
  param w1: f32[D, F<tp>] = normal(0.2)
  param w2: f32[F<tp>, D] = normal(0.2)
  h = layernorm(x, g1, b1)
  qkv = einsum("bsd,dthe->tbhse", h, w_qkv)
  q, k, v = split(qkv, [1, 1, 1], dim = 0)
  o = attention(reshape(q, [B, H, S, E]), reshape(k, [B, H, S, E]), reshape(v, [B, H, S, E]), causal = true)
  x = x + einsum("bhse,hed->bsd", o, w_o)
  return x + gelu(rmsnorm(x, g2) @ w1, approximate = "tanh") @ w2
}
model Transformer(tokens: i32[B<dp>, S], targets: i32[B<dp>, S]) -> (loss: f32, logits: f32[B<dp>, S, V<tp>]) {
  param wte: f32[V<tp>, D] = normal(0.5)
  param wpe: f32[S, D] = normal(0.1)
  x = embedding(tokens, wte) + wpe
  x = repeat L as layers { Layer(x) }
  logits = x @ transpose(wte)
  return cross_entropy(logits, targets), logits
}
""")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for the .loom files")
    parser.add_argument("--long", action="store_true", help="also the 8-rank meshes")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for m in MODELS:
        for tag, mesh in m.meshes(args.long):
            path = os.path.join(args.out, f"{m.name}.{tag}.loom")
            with open(path, "w") as f:
                f.write(render(m.template, mesh))
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
