"""Random Loom programs for the differential tests (run.py --random).

`generate(seed)` gives a models.Model whose template (models.py's syntax:
`%MESH%` and `<axes>` annotations) is a random, valid, well-conditioned
program: inputs and parameters with random shardings, then a random
sequence of ops drawn from what the language has (element-wise functions
and arithmetic with broadcasting, `@` and `einsum` against parameters and
between activations, MLPs in the forms of cuBLASLt's epilogues (bias and
tanh GELU, bias and residual), reductions with and without keepdim,
softmax, layer and RMS norms, transpose, reshape, concat, split, slice,
attention, embedding, integer arithmetic and products cast to floats,
shard() mid-program, blocks with random bodies (their inputs are
arguments the callers pass their own inputs for; blocks within blocks;
their results mostly read the body's last value; their parameters often
stored split over dp, as ZeRO-3 stores them), called or repeated), and
one to four outputs (the last value and values
nothing read), sometimes a cross-entropy loss of a value or of its
product with a vocabulary table (a tied output projection). The
annotations often disagree with one another, which is what makes the
partitioner reshard, reduce partial values and move data between axes.
One seed in three gives a bf16 program, the others f32; with `f16`
(--f16), every seed gives an f16 program instead (the same ops and
shapes: the element type is not drawn from the random stream).

The same seed gives the same program wherever the same Python runs (Python's
`random.Random(seed)`, nothing else). Every dimension that carries an
annotation divides by 8 (dp, or several axes together) or by 4 (tp or sp
alone), so every rendering divides on every mesh of models.MESHES and
LONG_MESHES and on [dp: 2, tp: 2, sp: 2], a mesh of three axes that the
random programs run on as well (their annotations name sp, which vanishes
from the renderings for meshes without it).

The programs avoid what would make an f32 comparison meaningless rather
than find bugs: log, sqrt and rsqrt read `v * v + 1`; exp reads a tanh;
a division's divisor is `v * v + 1`; a norm's input has an input of its
own shape added, so that its rows never have a variance near zero; a
parameter of `@` has a standard deviation of 1/sqrt(K), so values stay
near unit size.

With `threes` (--threes) programs are drawn the same way but every size
is three times as large (a reshape may also split by 3 or 6), and the
program runs on THREES_MESHES (axes of 3 ranks) instead: a dimension that
carries several axes divides by 24, one that carries one axis by 12.

`python random_models.py --seed N [--mesh TAG]` prints one program.
"""

import argparse
from dataclasses import dataclass
import math
import re
import random
import sys

import models

# A third axis, for the random programs only: sp appears in their
# annotations and vanishes from the renderings for meshes without it.
THREE_AXES = ("dp2tp2sp2", (("dp", 2), ("tp", 2), ("sp", 2)))
# Meshes with axes of 3 ranks, for the programs of the `threes` variant
# (sizes a multiple of 3 as well): groups of three add their terms in
# another order than pairs do, and a rank's place in its group is not a
# bit of its number.
THREES_MESHES = [
    ("dp3", (("dp", 3),)),
    ("tp3", (("tp", 3),)),
    ("dp3tp2", (("dp", 3), ("tp", 2))),
    ("dp2tp3", (("dp", 2), ("tp", 3))),
    ("dp3sp2", (("dp", 3), ("sp", 2))),
]
# Annotations a dimension may carry, by what its size divides by.
ANY_AXES = ["<dp>", "<tp>", "<dp,tp>", "<tp,dp>", "<_>", "<tp?>", "<dp?>", "<sp>", "<sp,tp>",
            "<dp,sp>", "<tp,dp,sp>", "<sp?>"]
TP_AXES = ["<tp>", "<_>", "<tp?>", "<sp>"]
SIZES = [4, 8, 8, 16]
UNARY = ["relu({})", "gelu({})", 'gelu({}, approximate = "tanh")', "silu({})", "tanh({})",
         "sigmoid({})", "neg({})", "-{}", "exp(tanh({}))", "log({0} * {0} + 1)",
         "sqrt({0} * {0} + 1)", "rsqrt({0} * {0} + 1)"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def axes_of(annotation):
    return set(annotation.strip("<>").split()[0].rstrip("?").split(",")) - {"_", ""} \
        if annotation else set()


@dataclass
class RandomModel(models.Model):
    threes: bool = False

    def meshes(self, long=False):
        """models.py's meshes and [dp: 2, tp: 2, sp: 2]; for the `threes`
        variant, THREES_MESHES."""
        if self.threes:
            return THREES_MESHES
        return models.MESHES + [THREE_AXES] + (models.LONG_MESHES if long else [])


def random_annotation(rng, sizes, plain=0.45, unit=1):
    """One annotation a dimension (possibly empty), no mesh axis twice. A
    dimension divisible by 8 * unit may carry any axes, one divisible by
    4 * unit one axis (unit is 3 for the `threes` variant's meshes)."""
    used, out = set(), []
    for size in sizes:
        choices = ANY_AXES if size % (8 * unit) == 0 else TP_AXES if size % (4 * unit) == 0 else []
        choices = [c for c in choices if not axes_of(c) & used]
        if not choices or rng.random() < plain:
            out.append("")
            continue
        pick = rng.choice(choices)
        used |= axes_of(pick)
        if axes_of(pick) and rng.random() < 0.1:  # a priority: p0 is the strongest
            pick = pick[:-1] + f" p{rng.randint(0, 2)}>"
        out.append(pick)
    return out


def resized(sizes, dim, size):
    """`sizes` with dimension `dim` made `size`."""
    return sizes[:dim] + [size] + sizes[dim + 1:]


def type_text(sizes, annotation, dtype):
    return f"{dtype}[" + ", ".join(f"{s}{a}" for s, a in zip(sizes, annotation)) + "]"


# Values larger than this (elements) are not operands: concat, products and
# embeddings would otherwise grow them past what the interpreter and the
# CUDA emulation run in seconds.
LARGEST = 8192
# The rank an op's operand needs.
NEEDS = {"matmul": 2, "matmul_values": 2, "mlp": 2, "einsum": 2, "reduce": 2, "transpose": 2,
         "attention": 3, "block": 2}


class Program:
    """A body being written: the model's, or a block's (`parent` is the body
    that calls it; the block's inputs are its arguments, which the caller
    passes its own inputs for)."""

    def __init__(self, rng, float_type, parent=None, zero3=None, pre_norm=None,
                 loop_views=None, view_results=None, mixed=None, unit=1,
                 fused_projections=None):
        self.rng = rng
        # Every size drawn is a multiple of `unit` (3 for the `threes`
        # variant, 1 otherwise): SIZES times unit, and so on.
        self.unit = parent.unit if parent else unit
        self.sizes = [size * self.unit for size in SIZES]
        # With --pre-norm, draws whether a block is a pre-norm layer (a norm
        # of x first, x plus a value last, a norm of the repeat's result
        # after it: the form loom-fuse-add-norm rotates); None otherwise, so
        # that the programs without the option stay what they were.
        self.pre_norm = parent.pre_norm if parent else pre_norm
        # Draws whether a block's parameter is stored split over dp on its
        # first dimension (ZeRO-3, FSDP), so that a repeat gathers each
        # layer's slice; a stream of its own, so that the other draws stay
        # what they were.
        self.zero3 = parent.zero3 if parent else zero3
        # With --loop-views, draws whether a repeat's first value is also
        # read through a view (a reshape, or its leading rows) made before
        # the repeat and read after it, which must see the value, not the
        # repeat's result; and (a stream of its own) whether a block returns
        # a view of a temporary. None otherwise, as pre_norm.
        self.loop_views = parent.loop_views if parent else loop_views
        self.view_results = parent.view_results if parent else view_results
        # With --mixed, draws whether a norm's gains, a product's weight or
        # an operand of arithmetic is f32 in a bf16 or f16 program (the
        # promotion of docs/language.md 11.1, as GPT-2's f32 norm gains);
        # None otherwise, as pre_norm.
        self.mixed = parent.mixed if parent else mixed
        # With --fused-projections, draws whether an op is a product made
        # for several pieces (op_fused_projection); None otherwise, as
        # pre_norm.
        self.fused_projections = parent.fused_projections if parent else fused_projections
        self.float = float_type  # every float tensor's element type
        self.parent = parent
        self.depth = parent.depth + 1 if parent else 0
        # (name, type text, sizes, element type): the model's inputs or the
        # block's arguments
        self.inputs = []
        self.blocks = parent.blocks if parent else []  # block definitions (text), shared
        self.lines = []       # the body's statements
        self.values = []      # (name, sizes) the ops may read
        self.counter = 0

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def annotation(self, sizes, plain=0.45):
        return random_annotation(self.rng, sizes, plain, self.unit)

    def add_input(self, sizes, dtype=None):
        """A new input of the model, or a new argument of the block."""
        dtype = dtype or self.float
        name = self.fresh("in" if not self.parent else "arg")
        self.inputs.append((name, type_text(sizes, self.annotation(sizes), dtype),
                            list(sizes), dtype))
        if dtype == self.float:
            self.values.append((name, list(sizes)))
        return name

    def add_param(self, sizes, init, replicated=False, dtype=None):
        name = self.fresh("w")
        ann = ["" for _ in sizes] if replicated else self.annotation(sizes)
        if (not replicated and self.parent and sizes[0] % (4 * self.unit) == 0
                and self.zero3.random() < 0.4
                and not any("dp" in axes_of(a) for a in ann[1:])):
            ann = ["<dp>"] + ann[1:]
        self.lines.append(f"param {name}: {type_text(sizes, ann, dtype or self.float)} = {init}")
        return name

    def mixed_f32(self, probability):
        """With --mixed in a bf16 or f16 program, "f32" with the given
        probability (an operand to promote); None otherwise."""
        if self.mixed and self.float != "f32" and self.mixed.random() < probability:
            return "f32"
        return None

    def assign(self, expr, sizes):
        name = self.fresh("v")
        self.lines.append(f"{name} = {expr}")
        self.values.append((name, list(sizes)))
        return name

    def pick(self, rank_at_least=1, recent=True):
        pool = [v for v in self.values if len(v[1]) >= rank_at_least and math.prod(v[1]) <= LARGEST]
        if not pool:
            return None
        # Mostly one of the last few values, so that ops chain.
        if recent and self.rng.random() < 0.7:
            pool = pool[-3:]
        return self.rng.choice(pool)

    # --- ops: each appends statements and returns True, or False when the
    # values at hand do not allow it.

    def op_unary(self):
        name, sizes = self.pick()
        self.assign(self.rng.choice(UNARY).format(name), sizes)
        return True

    def op_binary(self):
        name, sizes = self.pick()
        # A second operand that broadcasts against the first: one of the
        # values whose shape is a suffix of its shape, or a new input that is.
        others = [v for v in self.values if v[0] != name and len(v[1]) <= len(sizes)
                  and v[1] == sizes[len(sizes) - len(v[1]):]]
        # With --mixed, sometimes a new f32 operand: the result is f32,
        # rounded back to the program's type.
        promoted = self.mixed_f32(0.3)
        if others and not promoted and self.rng.random() < 0.7:
            other = self.rng.choice(others)[0]
        else:
            keep = self.rng.randint(1, len(sizes))
            tail = sizes[len(sizes) - keep:]
            if self.rng.random() < 0.3:  # a stretched dimension of size 1
                tail = [1 if self.rng.random() < 0.5 else s for s in tail]
            other = self.add_input(tail, promoted)
        form = self.rng.choice(["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / ({b} * {b} + 1)",
                                "{b} - {a} * 0.5", "2 * {a} + {b} / 4"])
        expr = form.format(a=name, b=other)
        self.assign(f"cast({expr}, {self.float})" if promoted else expr, sizes)
        return True

    def op_matmul(self):
        name, sizes = self.pick(2)
        k, n = sizes[-1], self.rng.choice(self.sizes)
        weight_type = self.mixed_f32(0.25)
        w = self.add_param([k, n], f"normal({1 / math.sqrt(k):.3f})", dtype=weight_type)
        product = f"{name} @ {w}"
        self.assign(f"cast({product}, {self.float})" if weight_type else product, sizes[:-1] + [n])
        return True

    def op_matmul_values(self):
        # a [..., M, K] @ transpose(b [..., N, K]): two activations.
        name, sizes = self.pick(2)
        others = [v for v in self.values if len(v[1]) == len(sizes) and v[1][:-2] == sizes[:-2]
                  and v[1][-1] == sizes[-1]]
        other, osizes = self.rng.choice(others)
        scale = 1 / sizes[-1]
        self.assign(f"({name} @ transpose({other})) * {scale:.4g}", sizes[:-1] + [osizes[-2]])
        return True

    def op_einsum(self):
        name, sizes = self.pick(2)
        letters = LETTERS[:len(sizes)]
        rng = self.rng
        if rng.random() < 0.3:
            # One operand: reduce one dimension (not all), maybe permute.
            drop = rng.randrange(len(sizes))
            kept = [i for i in range(len(sizes)) if i != drop]
            if rng.random() < 0.5:
                rng.shuffle(kept)
            out = "".join(letters[i] for i in kept)
            self.assign(f'einsum("{letters}->{out}", {name}) * {1 / sizes[drop]:.4g}',
                        [sizes[i] for i in kept])
            return True
        # Contract dimension i with a parameter [sizes[i], N]; the new
        # dimension goes last.
        i = rng.randrange(len(sizes))
        n = rng.choice(self.sizes)
        w = self.add_param([sizes[i], n], f"normal({1 / math.sqrt(sizes[i]):.3f})")
        new = LETTERS[len(sizes)]
        out = "".join(letters[j] for j in range(len(sizes)) if j != i) + new
        self.assign(f'einsum("{letters},{letters[i]}{new}->{out}", {name}, {w})',
                    [sizes[j] for j in range(len(sizes)) if j != i] + [n])
        return True

    def op_mlp(self):
        """A product, its bias and the tanh GELU, then a product, its bias and
        the residual sum: the groups the CUDA backend computes in cuBLASLt's
        epilogues (LOOMRT_GEMM_EPILOGUE=1) where the products are local."""
        name, sizes = self.pick(2)
        d, f = sizes[-1], self.rng.choice(self.sizes)
        up = self.add_param([d, f], f"normal({1 / math.sqrt(d):.3f})")
        up_bias = self.add_param([f], "normal(0.1)")
        down = self.add_param([f, d], f"normal({1 / math.sqrt(f):.3f})")
        down_bias = self.add_param([d], "uniform(-0.5, 0.5)")
        hidden = self.assign(f'gelu({name} @ {up} + {up_bias}, approximate = "tanh")',
                             sizes[:-1] + [f])
        self.assign(f"{name} + ({hidden} @ {down} + {down_bias})", sizes)
        return True

    def op_softmax(self):
        name, sizes = self.pick()
        dim = self.rng.randrange(-len(sizes), len(sizes))
        self.assign(f"softmax({name}, dim = {dim})" if dim != -1 else f"softmax({name})", sizes)
        return True

    def op_norm(self):
        name, sizes = self.pick()
        k = 2 if len(sizes) >= 3 and self.rng.random() < 0.25 else 1
        noise = self.add_input(sizes)
        gain_type = self.mixed_f32(0.6)
        scale = self.add_param(sizes[-k:], "uniform(0.5, 1.5)", dtype=gain_type)
        if self.rng.random() < 0.5:
            bias = self.add_param(sizes[-k:], "normal(0.1)", dtype=gain_type)
            self.assign(f"layernorm({name} + {noise}, {scale}, {bias})", sizes)
        else:
            self.assign(f"rmsnorm({name} + {noise}, {scale})", sizes)
        return True

    def op_reduce(self):
        name, sizes = self.pick(2)
        rng = self.rng
        count = rng.randint(1, len(sizes) - 1)
        dims = sorted(rng.sample(range(len(sizes)), count))
        keep = rng.random() < 0.3
        kind = rng.choice(["sum", "mean", "max"])
        written = [d - len(sizes) if rng.random() < 0.3 else d for d in dims]
        dim_text = str(written[0]) if len(written) == 1 else str(written)
        expr = f"{kind}({name}, dim = {dim_text}" + (", keepdim = true)" if keep else ")")
        if kind == "sum":
            expr = f"{expr} * {1 / math.prod(sizes[d] for d in dims):.4g}"
        out = [1 if i in dims else s for i, s in enumerate(sizes)] if keep else \
            [s for i, s in enumerate(sizes) if i not in dims]
        self.assign(expr, out)
        return True

    def op_transpose(self):
        name, sizes = self.pick(2)
        if self.rng.random() < 0.5:
            self.assign(f"transpose({name})", sizes[:-2] + [sizes[-1], sizes[-2]])
        else:
            perm = list(range(len(sizes)))
            self.rng.shuffle(perm)
            self.assign(f"transpose({name}, perm = {perm})", [sizes[p] for p in perm])
        return True

    def op_reshape(self):
        name, sizes = self.pick()
        rng = self.rng
        if len(sizes) >= 2 and (len(sizes) >= 4 or rng.random() < 0.5):
            i = rng.randrange(len(sizes) - 1)  # merge i and i + 1
            out = sizes[:i] + [sizes[i] * sizes[i + 1]] + sizes[i + 2:]
        else:
            i = rng.randrange(len(sizes))
            factors = [f for f in ((2, 4, 8) if self.unit == 1 else (2, 3, 4, 6, 8))
                       if sizes[i] % f == 0 and sizes[i] > f]
            if not factors:
                return False
            f = rng.choice(factors)
            out = sizes[:i] + [f, sizes[i] // f] + sizes[i + 1:]
        self.assign(f"reshape({name}, {out})", out)
        return True

    def op_concat(self):
        name, sizes = self.pick()
        same = [v[0] for v in self.values if v[1] == sizes]
        other = self.rng.choice(same)
        dim = self.rng.randrange(len(sizes))
        self.assign(f"concat([{name}, {other}], dim = {dim})", resized(sizes, dim, 2 * sizes[dim]))
        return True

    def pick_cut(self):
        """A value and one of its dimensions of size 2 or more, or None."""
        name, sizes = self.pick()
        dims = [i for i, s in enumerate(sizes) if s >= 2]
        return (name, sizes, self.rng.choice(dims)) if dims else None

    def op_slice(self):
        if not (cut := self.pick_cut()):
            return False
        name, sizes, dim = cut
        start = self.rng.randrange(sizes[dim] // 2)
        end = self.rng.randint(start + 1, sizes[dim])
        self.assign(f"slice({name}, {dim}, {start}, {end})", resized(sizes, dim, end - start))
        return True

    def op_split(self):
        if not (cut := self.pick_cut()):
            return False
        name, sizes, dim = cut
        first = self.rng.randint(1, sizes[dim] - 1)
        a, b = self.fresh("v"), self.fresh("v")
        self.lines.append(f"{a}, {b} = split({name}, [{first}, {sizes[dim] - first}], dim = {dim})")
        self.values += [(a, resized(sizes, dim, first)), (b, resized(sizes, dim, sizes[dim] - first))]
        return True

    def op_shard(self):
        name, sizes = self.pick()
        ann = self.annotation(sizes, plain=0.3)
        self.assign(f"shard({name}, [" + ", ".join(f"{s}{a}" for s, a in zip(sizes, ann)) + "])", sizes)
        return True

    def op_attention(self):
        name, sizes = self.pick(3)
        rng = self.rng
        e = sizes[-1]
        wk = self.add_param([e, e], f"normal({1 / math.sqrt(e):.3f})")
        f = rng.choice(self.sizes)
        wv = self.add_param([e, f], f"normal({1 / math.sqrt(e):.3f})")
        k = self.assign(f"{name} @ {wk}", sizes)
        v = self.assign(f"{name} @ {wv}", sizes[:-1] + [f])
        causal = ", causal = true" if rng.random() < 0.5 else ""
        self.assign(f"attention({name}, {k}, {v}{causal})", sizes[:-1] + [f])
        return True

    def op_block(self):
        """A block that keeps its first argument's shape, with a random body
        (which may call blocks of its own), called once or repeated."""
        if self.depth >= 2:
            return False
        name, sizes = self.pick(2)
        rng = self.rng
        if self.pre_norm and self.pre_norm.random() < 0.6:
            return self.pre_norm_block(name, sizes)
        # Sometimes a second value carried through (a second argument and
        # result: a repeat of two values).
        second = self.pick() if rng.random() < 0.3 else None
        body = Program(rng, self.float, parent=self)
        body.values.append(("x", list(sizes)))
        if second:
            body.values.append(("acc", list(second[1])))
        for _ in range(rng.randint(1, 4)):
            body.random_op()
        # The result: x plus a value of its shape, or of its rows projected
        # to x's width; failing both, a column- then row-parallel MLP. In
        # most programs that value is the body's last computed one, so that
        # the body's ops are live (not folded away as unused): as it is when
        # it has x's shape, projected when it has x's rows; of neither, it
        # gives way to another value that fits, or, when none does, its
        # mean is added to every element.
        made = [v for v in body.values if v[0].startswith("v")]
        last = [made[-1]] if made and rng.random() < 0.85 else []
        fits = [v for v in body.values[1:] if v[1] == sizes]
        rows = [v for v in body.values[1:] if v[1][:-1] == sizes[:-1] and math.prod(v[1]) <= LARGEST]
        if last and last[0][1] == sizes:
            fits = last
        elif last and last[0] in rows:
            rows, fits = last, []
        if fits and (fits == last or rng.random() < 0.5):
            result = f"x + tanh({rng.choice(fits)[0]})"
        elif last and not rows:
            # Of no shape the result takes: its mean, added to every element.
            value, vsizes = last[0]
            result = f"x + tanh(mean({value}, dim = {list(range(len(vsizes)))}))"
        elif rows:
            value, vsizes = rng.choice(rows)
            out = body.add_param([vsizes[-1], sizes[-1]], f"normal({1 / math.sqrt(vsizes[-1]):.3f})")
            result = f"x + tanh({value} @ {out})"
        else:
            d, f = sizes[-1], rng.choice(self.sizes)
            up = body.add_param([d, f], f"normal({1 / math.sqrt(d):.3f})")
            bias = body.add_param([f], "normal(0.1)")
            down = body.add_param([f, d], f"normal({1 / math.sqrt(f):.3f})")
            hidden = rng.choice(UNARY[:6]).format(f"x @ {up} + {bias}")
            result = f"x + tanh({hidden} @ {down})"
        if self.view_results and self.view_results.random() < 0.3:
            # The result as a view of a temporary (the second half of a
            # concatenation), which a repeat copies into its carried value.
            result = f"slice(concat([x, {result}], dim = 0), 0, {sizes[0]}, {2 * sizes[0]})"
        index = len(self.blocks) + 1
        signature = type_text(sizes, random_annotation(rng, sizes), self.float)
        arguments, results = [f"x: {signature}"], [signature]
        if second:
            acc_type = type_text(second[1], random_annotation(rng, second[1]), self.float)
            arguments.append(f"acc: {acc_type}")
            results.append(acc_type)
            same = [v for v in body.values[2:] if v[1] == second[1]]
            result += ", " + (f"acc + tanh({rng.choice(same)[0]})" if same else "acc * 0.5 + tanh(acc)")
        arguments += [f"{n}: {t}" for n, t, _, _ in body.inputs]
        result_types = results[0] if len(results) == 1 else "(" + ", ".join(results) + ")"
        self.blocks.append(f"block Blk{index}({', '.join(arguments)}) -> {result_types} {{\n"
                           + "".join(f"  {line}\n" for line in body.lines)
                           + f"  return {result}\n}}")
        # The caller's own inputs (or arguments) for the block's arguments.
        passed = [self.add_input(sizes, dtype) for _, _, sizes, dtype in body.inputs]
        carried = [(name, sizes)] + ([second] if second else [])
        if rng.random() < 0.6:
            viewed = self.view_before_loop(name, sizes)
            names = [self.assign(n, s) for n, s in carried]
            call = f"Blk{index}({', '.join(names + passed)})"
            if second:
                call = f"r1, r2 = {call}; r1, r2"
            self.lines.append(f"{', '.join(names)} = repeat {rng.choice([2, 3])} as layers{index} "
                              f"{{ {call} }}")
            if viewed:
                self.assign(f"tanh({viewed[0]})", viewed[1])
        elif second:
            names = [self.fresh("v"), self.fresh("v")]
            self.lines.append(f"{', '.join(names)} = Blk{index}({', '.join([name, second[0]] + passed)})"
                              f" as blk{index}")
            self.values += [(n, list(s)) for n, (_, s) in zip(names, carried)]
        else:
            self.assign(f"Blk{index}({', '.join([name] + passed)}) as blk{index}", sizes)
        return True

    def view_before_loop(self, name, sizes):
        """With --loop-views, sometimes a view of `name` (flattened, or its
        rows from the second on) written before the repeat that `name`
        begins: (view name, sizes) for the caller to read after the repeat,
        and not offered to other ops."""
        if not self.loop_views or self.loop_views.random() >= 0.5:
            return None
        view = self.fresh("v")
        if sizes[0] >= 2 and self.loop_views.random() < 0.5:
            self.lines.append(f"{view} = slice({name}, 0, 1, {sizes[0]})")
            return view, resized(sizes, 0, sizes[0] - 1)
        self.lines.append(f"{view} = reshape({name}, [{math.prod(sizes)}])")
        return view, [math.prod(sizes)]

    def pre_norm_block(self, name, sizes):
        """A pre-norm layer: h = a norm of x, a random body, and x plus a
        value of x's shape, or plus a projection of one of x's rows with a
        bias (loom.add_norm's `plus`); repeated, its result is normalised by
        a norm of the same kind after the loop. The norms' gains are
        replicated; x's layout is drawn as any value's."""
        rng = self.rng
        body = Program(rng, self.float, parent=self)
        body.values.append(("x", list(sizes)))
        rms = rng.random() < 0.5
        gain_type = self.mixed_f32(0.6)
        gain = body.add_param(sizes[-1:], "uniform(0.5, 1.5)", replicated=True, dtype=gain_type)
        if rms:
            body.lines.append(f"h = rmsnorm(x, {gain})")
        else:
            shift = body.add_param(sizes[-1:], "normal(0.1)", replicated=True, dtype=gain_type)
            body.lines.append(f"h = layernorm(x, {gain}, {shift})")
        body.values.append(("h", list(sizes)))
        # The layer reads h first (a projection), so that the norm is live.
        width = rng.choice(self.sizes)
        project = body.add_param([sizes[-1], width], f"normal({1 / math.sqrt(sizes[-1]):.3f})")
        body.assign(f"h @ {project}", sizes[:-1] + [width])
        for _ in range(rng.randint(0, 3)):
            body.random_op()
        made = [v for v in body.values[2:] if v[0].startswith("v")]
        last = made[-1] if made else ("h", list(sizes))
        if last[1] == sizes:
            result = f"x + {last[0]}"
        else:
            value, vsizes = last if last[1][:-1] == sizes[:-1] else ("h", sizes)
            out = body.add_param([vsizes[-1], sizes[-1]], f"normal({1 / math.sqrt(vsizes[-1]):.3f})")
            bias = body.add_param(sizes[-1:], "normal(0.1)")
            result = f"x + ({value} @ {out} + {bias})"
        index = len(self.blocks) + 1
        signature = type_text(sizes, random_annotation(rng, sizes), self.float)
        arguments = [f"x: {signature}"] + [f"{n}: {t}" for n, t, _, _ in body.inputs]
        self.blocks.append(f"block Blk{index}({', '.join(arguments)}) -> {signature} {{\n"
                           + "".join(f"  {line}\n" for line in body.lines)
                           + f"  return {result}\n}}")
        passed = [self.add_input(s, dtype) for _, _, s, dtype in body.inputs]
        carried = self.assign(name, sizes)
        self.lines.append(f"{carried} = repeat {rng.choice([1, 2, 3])} as layers{index} "
                          f"{{ Blk{index}({', '.join([carried] + passed)}) }}")
        if self.pre_norm.random() < 0.8:
            # Mostly only the final norm reads the layers' result (the loop
            # rotates then); otherwise later ops may read it too.
            self.values.remove((carried, list(sizes)))
        final_gain = self.add_param(sizes[-1:], "uniform(0.5, 1.5)", replicated=True,
                                    dtype=gain_type)
        if rms:
            self.assign(f"rmsnorm({carried}, {final_gain})", sizes)
        else:
            final_shift = self.add_param(sizes[-1:], "normal(0.1)", replicated=True,
                                         dtype=gain_type)
            self.assign(f"layernorm({carried}, {final_gain}, {final_shift})", sizes)
        return True

    def random_op(self):
        """One op of OPS that the values at hand allow (20 tries)."""
        if self.fused_projections and self.fused_projections.random() < 0.35 \
                and self.op_fused_projection():
            return
        kinds, weights = zip(*OPS)
        for _attempt in range(20):
            kind = self.rng.choices(kinds, weights)[0]
            if self.pick(NEEDS.get(kind, 1), recent=False) is None:
                continue
            if getattr(self, "op_" + kind)():
                return

    def op_fused_projection(self):
        """A product made for several pieces, as q, k and v or a gate and an
        up projection are: [..., c * k] split along its last dimension, or
        an einsum to [..., c, k] split along the one before and each piece
        reshaped to [..., k]. Each piece is then normalised, made heads
        (a reshape of its last dimension and a transpose) for a product,
        read element-wise or multiplied; or three pieces are attention's
        q, k and v, q and k sometimes normalised first (qk-norm). Pieces of
        some columns of every row, which readers that take strides read in
        place (docs/running.md, section 3)."""
        rng = self.rng
        picked = self.pick(2)
        if not picked:
            return False
        name, sizes = picked
        lead, width = sizes[:-1], sizes[-1]
        count, k = rng.choice([2, 3]), rng.choice(self.sizes)
        scale = f"normal({1 / math.sqrt(width):.3f})"
        if rng.random() < 0.5:
            weight = self.add_param([width, count * k], scale)
            fused = self.assign(f"{name} @ {weight}", lead + [count * k])
            pieces = [self.fresh("v") for _ in range(count)]
            self.lines.append(f"{', '.join(pieces)} = split({fused}, {[k] * count}, "
                              f"dim = {len(sizes) - 1})")
            self.values += [(piece, lead + [k]) for piece in pieces]
        else:
            weight = self.add_param([width, count, k], scale)
            letters = "pqrstu"[:len(lead)]
            fused = self.assign(f'einsum("{letters}d,dcn->{letters}cn", {name}, {weight})',
                                lead + [count, k])
            parts = [self.fresh("v") for _ in range(count)]
            self.lines.append(f"{', '.join(parts)} = split({fused}, {[1] * count}, "
                              f"dim = {len(lead)})")
            pieces = [self.assign(f"reshape({part}, {lead + [k]})", lead + [k])
                      for part in parts]
        shape = lead + [k]

        def normalised(piece):
            gain = self.add_param([k], "uniform(0.5, 1.5)", dtype=self.mixed_f32(0.6))
            if rng.random() < 0.5:
                return self.assign(f"rmsnorm({piece}, {gain})", shape)
            shift = self.add_param([k], "normal(0.1)")
            return self.assign(f"layernorm({piece}, {gain}, {shift})", shape)

        if count == 3 and len(shape) >= 3 and rng.random() < 0.4:
            q, key, value = pieces
            if rng.random() < 0.5:
                q, key = normalised(q), normalised(key)
            causal = ", causal = true" if rng.random() < 0.5 else ""
            self.assign(f"attention({q}, {key}, {value}{causal})", shape)
            return True
        for piece in pieces:
            form = rng.choice(["norm", "heads", "unary", "product"])
            heads = [f for f in (2, 4) if k % f == 0 and k > f]
            if form == "norm":
                normalised(piece)
            elif form == "heads" and heads and len(lead) >= 1:
                h = rng.choice(heads)
                split_shape = lead + [h, k // h]
                rank = len(split_shape)
                perm = list(range(rank - 3)) + [rank - 2, rank - 3, rank - 1]
                out = rng.choice(self.sizes)
                weight = self.add_param([k // h, out], f"normal({1 / math.sqrt(k // h):.3f})")
                self.assign(f"transpose(reshape({piece}, {split_shape}), perm = {perm}) @ {weight}",
                            [split_shape[p] for p in perm[:-1]] + [out])
            elif form == "product":
                out = rng.choice(self.sizes)
                weight = self.add_param([k, out], f"normal({1 / math.sqrt(k):.3f})")
                self.assign(f"{piece} @ {weight}", lead + [out])
            else:
                self.assign(rng.choice(UNARY).format(piece), shape)
        return True

    def op_integers(self):
        """Integer arithmetic, an integer product or sum, and a cast back:
        exact on every mesh, whatever the order of the sums."""
        name, sizes = self.pick()
        rng = self.rng
        dtype = rng.choice(["i32", "i64"])
        ids = self.add_input(sizes, dtype)
        form = rng.random()
        if form < 0.4 and len(sizes) >= 2:
            n = rng.choice(self.sizes)
            other = self.add_input([sizes[-1], n], dtype)
            # Synthetic integers are uniform in [0, 16): a product of two
            # has mean 56.25 and a standard deviation of about 60, so this
            # is near unit size (logits of a loss far from unit size make
            # the bf16 loss ill-conditioned: it is their small difference).
            k = sizes[-1]
            self.assign(f"cast({ids} @ {other} - {round(56.25 * k)}, {self.float}) * "
                        f"{1 / (60 * math.sqrt(k)):.4g}", sizes[:-1] + [n])
        elif form < 0.7 and len(sizes) >= 2:
            dim = rng.randrange(len(sizes))
            self.assign(f"cast(sum({ids} * 2 - 15, dim = {dim}), {self.float}) * "
                        f"{1 / (9.2 * math.sqrt(sizes[dim])):.4g}", sizes[:dim] + sizes[dim + 1:])
        else:
            self.assign(f"{name} * cast({ids} - 8, {self.float}) * 0.125", sizes)
        return True

    def op_embedding(self):
        rng = self.rng
        unit = self.unit
        lead = [unit * rng.choice([8, 8, 16])] + ([rng.choice(self.sizes)] if rng.random() < 0.6 else [])
        vocab, width = unit * rng.choice([16, 32]), rng.choice(self.sizes)
        ids = self.add_input(lead, rng.choice(["i32", "i64"]))
        table = self.add_param([vocab, width], "normal(1.0)")
        self.assign(f"embedding({ids}, {table})", lead + [width])
        return True


OPS = [("unary", 3), ("binary", 3), ("matmul", 3), ("matmul_values", 1), ("einsum", 2),
       ("softmax", 1), ("norm", 2), ("reduce", 1), ("transpose", 1), ("reshape", 1),
       ("concat", 1), ("slice", 1), ("split", 1), ("shard", 2), ("attention", 1),
       ("block", 2), ("integers", 1), ("mlp", 1)]


# The variants of a seed's program: a keyword of generate() each (the flag
# with _ for -), a word of the program's name, and the help of the flag of
# random_models.py and run.py. Without them a seed's program is what it was.
VARIANTS = [
    ("f16", "make every float of the program f16 (otherwise one seed in three is bf16, "
            "the others f32)"),
    ("mixed", "in a bf16 or f16 program, make some norm gains, product weights and operands "
              "of arithmetic f32 (promoted, the results cast back)"),
    ("pre-norm", "make some blocks pre-norm layers (a norm first, a residual sum last, a norm "
                 "after the repeat), which loom-fuse-add-norm rotates"),
    ("loop-views", "read some repeats' first values through a view (a reshape, or leading "
                   "rows) made before the repeat and read after it, and make some blocks "
                   "return a view of a temporary"),
    ("fused-projections", "make some ops products made for several pieces (q, k and v; a gate "
                          "and an up projection), split, and each piece normalised, made heads "
                          "by a reshape and a transpose, read element-wise or multiplied, or "
                          "three of them attention's q, k and v"),
    ("threes", "make every size drawn a multiple of 3 too, and run on meshes with axes of 3 "
               "ranks (" + ", ".join(f"[{', '.join(f'{a}: {n}' for a, n in axes)}]"
                                    for _, axes in THREES_MESHES) + ")"),
]


def add_variant_arguments(parser):
    for flag, text in VARIANTS:
        parser.add_argument("--" + flag, action="store_true", help=text)


def variant_options(args):
    """The keywords of generate() that parsed arguments ask for."""
    return {flag.replace("-", "_"): getattr(args, flag.replace("-", "_")) for flag, _ in VARIANTS}


def generate(seed, pre_norm=False, loop_views=False, f16=False, mixed=False, threes=False,
             fused_projections=False):
    """The random program of `seed`, as a models.Model named random-SEED
    (with `pre_norm`, random-pre-norm-SEED: some blocks are pre-norm
    layers; with `loop_views`, random-loop-views-SEED or
    random-pre-norm-loop-views-SEED: some repeats' first values are read
    through views after the repeat; with `f16`, random-f16-SEED and so on:
    every float is f16; with `mixed`, random-mixed-SEED and so on: some
    norm gains, weights and operands of a bf16 or f16 program are f32;
    with `threes`, random-threes-SEED: drawn the same way, every size
    three times as large, run on THREES_MESHES; with `fused_projections`,
    random-fused-projections-SEED: some ops are products made for several
    pieces, split and read in the ways op_fused_projection draws)."""
    rng = random.Random(seed)
    # One seed in three is a bf16 program, built as written (run.py compares
    # it norm-wise, as the examples' bf16 builds); the others are f32. With
    # f16 every program is f16, built and compared as the bf16 ones.
    low_precision = f16 or seed % 3 == 0
    float_type = "f16" if f16 else "bf16" if low_precision else "f32"
    program = Program(rng, float_type, zero3=random.Random(f"zero3-{seed}"),
                      pre_norm=random.Random(f"pre-norm-{seed}") if pre_norm else None,
                      loop_views=random.Random(f"loop-views-{seed}") if loop_views else None,
                      view_results=random.Random(f"view-results-{seed}") if loop_views else None,
                      mixed=random.Random(f"mixed-{seed}") if mixed else None,
                      unit=3 if threes else 1,
                      fused_projections=(random.Random(f"fused-projections-{seed}")
                                         if fused_projections else None))
    unit = program.unit
    if rng.random() < 0.25:
        program.op_embedding()
    rank = rng.choice([2, 3, 3, 4])
    program.add_input([unit * rng.choice([8, 8, 16])]
                      + [rng.choice(program.sizes) for _ in range(rank - 1)])
    if program.pre_norm:
        program.pre_norm_block(*(program.pick(2) or program.values[-1]))
        normalised = program.values[-1]  # an output, so that the layers stay
    for _ in range(rng.randint(4, 10)):
        program.random_op()
    # Outputs: the last value and one or two others not yet read, and
    # sometimes a cross-entropy loss of a value as logits.
    read = {word for line in program.lines
            for word in re.findall(r"\b(?:v|in)\d+\b", line.split("=", 1)[-1])}
    unread = [v for v in program.values[:-1] if v[0] not in read and not v[0].startswith("in")]
    finals = [program.values[-1]] + unread[len(unread) - rng.randint(0, min(3, len(unread))):]
    if program.pre_norm and normalised not in finals:
        finals.append(normalised)
    outputs, returned = [], []
    for name, sizes in finals:
        out = program.fresh("out")
        outputs.append(f"{out}: {type_text(sizes, program.annotation(sizes), program.float)}")
        returned.append(name)
    logits = [v for v in program.values if len(v[1]) >= 2]
    if logits and rng.random() < 0.3:
        name, sizes = rng.choice(logits)
        targets = program.add_input(sizes[:-1], "i32")
        if rng.random() < 0.5:
            # Logits made by a product with a (vocabulary, width) table, as
            # a tied output projection: the form loom.logits_stats takes.
            vocab = unit * rng.choice([16, 32, 64])
            table = program.add_param([vocab, sizes[-1]], f"normal({1 / math.sqrt(sizes[-1]):.3f})")
            name = f"{name} @ transpose({table})"
        outputs.append("loss: f32")
        returned.append(f"cross_entropy({name}, {targets})")
    inputs = ", ".join(f"{n}: {t}" for n, t, _, _ in program.inputs)
    text = [f"mesh m = [%MESH%]", f"// random program of seed {seed} (random_models.py)"]
    text += program.blocks
    text.append(f"model Random{seed}({inputs}) -> ({', '.join(outputs)}) {{")
    text += [f"  {line}" for line in program.lines]
    text.append(f"  return {', '.join(returned)}")
    text.append("}")
    chosen = {"f16": f16, "mixed": mixed, "pre-norm": pre_norm, "loop-views": loop_views,
              "fused-projections": fused_projections, "threes": threes}
    name = "random-" + "".join(flag + "-" for flag, _ in VARIANTS if chosen[flag]) + str(seed)
    return RandomModel(name, "\n".join(text) + "\n", bf16=low_precision, written_type=float_type,
                       threes=threes)


def parse_seeds(text):
    """'1-20,25' -> [1, ..., 20, 25]; ValueError for anything else."""
    seeds = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or not (high or low).isdigit() or int(high or low) < int(low):
            raise ValueError(f"'{text}' is not a list of seeds (such as 1-20,25)")
        seeds += range(int(low), int(high or low) + 1)
    return seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", required=True, type=int)
    meshes = dict(models.MESHES + [THREE_AXES] + models.LONG_MESHES + THREES_MESHES)
    parser.add_argument("--mesh", default="dp2tp2",
                        help=f"the mesh to render for: {', '.join(meshes)} (default dp2tp2)")
    add_variant_arguments(parser)
    args = parser.parse_args()
    if args.mesh not in meshes:
        parser.error(f"--mesh must be one of {', '.join(meshes)}")
    sys.stdout.write(models.render(generate(args.seed, **variant_options(args)).template,
                                   meshes[args.mesh]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
