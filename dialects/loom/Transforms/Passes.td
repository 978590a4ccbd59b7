//===- Passes.td - Loom passes -----------------------------*- tablegen -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PASSES_TD
#define LOOM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomResizeMesh : Pass<"loom-resize-mesh", "mlir::ModuleOp"> {
  let summary = "Override the sizes of mesh axes";
  let description = [{
    Sets the sizes of the named axes of every `loom.mesh` in the module, as
    `loomc --mesh dp=4,tp=2` does for a source file. Shardings are checked
    again afterwards: a dimension that no longer divides evenly over its axes
    is an error that names the padded size.

    ```mlir
    // loom-opt --loom-resize-mesh="axes=dp=4"
    loom.mesh @mesh ["dp" = 2, "tp" = 2]   // becomes ["dp" = 4, "tp" = 2]
    ```
  }];
  let options = [
    Option<"axes", "axes", "std::string", /*default=*/"\"\"",
           "Comma-separated axis=size list, e.g. dp=4,tp=2">,
  ];
  let statistics = [
    Statistic<"numResized", "resized-axes", "Number of mesh axes resized">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomPrintShardingRules : Pass<"loom-print-sharding-rules"> {
  let summary = "Report every op's sharding rule as a remark";
  let description = [{
    For each op that implements `ShardingRuleOpInterface`, checks the rule
    against the op's types and emits it as a remark, so tests (and users)
    can see how each op may be sharded. Factors print as letters; a
    dimension lists its factors major to minor (`a.b`), `1` has none.

    ```mlir
    // loom-opt --loom-print-sharding-rules
    %y = loom.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
    // remark: sharding rule ([a, b], [b, c]) -> ([a, c]) {a=8, b=16 linear, c=32}
    ```
  }];
  let statistics = [
    Statistic<"numRules", "rules", "Number of sharding rules reported">,
  ];
}

def LoomPrintCollectives : Pass<"loom-print-collectives"> {
  let summary = "Report every collective's group and bytes per rank";
  let description = [{
    For each op that implements `CollectiveOpInterface`, emits a remark with
    its mesh axes, group size and the bytes each rank sends by DESIGN.md's
    formulas (the numbers `loomc --explain` will build on).

    ```mlir
    // loom-opt --loom-print-collectives
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<1024xf32>
    // remark: all_reduce over ["tp"] (4 ranks, sum): 6144 bytes per rank
    ```
  }];
  let statistics = [
    Statistic<"numCollectives", "collectives", "Number of collectives reported">,
  ];
}

def LoomPropagateShardings : Pass<"loom-propagate-shardings", "mlir::ModuleOp"> {
  let summary = "Give every value of a model a sharding";
  let description = [{
    Fixed-point propagation over the ops' sharding rules, forward and
    backward, through `loom.shard` constraints and through `loom.repeat`
    (carried values, body arguments, yields and results alike; stacked
    operands without their layer dimension). A factor takes the axes of its
    members and open dimensions of the others take them too, except
    across a non-linear reduction (a softmax's, a norm's or an attention's
    reduced dimension, which the partitioner splits only where the input
    arrives split): closed
    dimensions and the axes users wrote are never changed, and manual axes
    are never assigned. A layer's slice of a stacked parameter holds the
    stack's closed axes from the start. When two factors of an op want one
    axis, the one whose holder is costlier to move keeps it (an operand
    weighs its share among its readers), counting the
    reduction of the product when a contracted factor would take the axis
    from an operand (an FSDP weight is gathered, not the batch moved).
    Annotations with priorities propagate in rounds,
    `p0` first. When two annotations disagree on one factor, a `loom.shard`
    reshard is inserted on the operand that is cheaper to move, with a
    remark naming both annotations' source locations. Results record their
    shardings in `loom.sharding`, `loom.repeat` body arguments in
    `loom.body_shardings`. This is `loomc --emit=sharded`.

    ```mlir
    %x_0 = loom.shard %x as <@m, [{"dp"}, {?} ]> : tensor<16x64xf32>
    %0 = loom.matmul %x_0, %w1 : tensor<16x64xf32>, tensor<64x256xf32> -> tensor<16x256xf32>
    // becomes, with %w1 sharded [{}, {"tp"} ]:
    %0 = loom.matmul %x_0, %w1 {loom.sharding = [#loom.sharding<@m, [{"dp"}, {"tp"} ]> ]} : ...
    ```
  }];
  let statistics = [
    Statistic<"numFunctions", "models", "Number of models propagated">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomPartition : Pass<"loom-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite a sharded model into the program each device runs";
  let description = [{
    Needs every value's sharding (`loom-propagate-shardings`). Walks the
    model in order; for each op it picks the sharding of every factor of its
    rule, reshards operands to match and gives results their per-device
    types. Partial values (a contraction over a sharded factor, a masked
    embedding lookup) stay partial while consumers are linear in them (sums,
    differences of equally partial values, products with one partial
    factor, reductions, reshapes) and are reduced where a consumer needs
    the true value: by `all_reduce`, or by `reduce_scatter` when the
    consumer wants the value split over the partial axes. Reshards, these
    reductions included, are planned by a search over layouts for the
    fewest bytes a rank, by `all_reduce`, `reduce_scatter`,
    `collective_permute`, `all_slice`, `all_to_all` and `all_gather`
    (docs/partitioning.md 3.4); non-linear reductions over a
    sharded factor are split into a local reduction, an `all_reduce` and a
    local finish (max, cross-entropy over a split vocabulary, and a softmax
    or norm whose input arrives split: its rows' statistics are
    all-reduced) or gathered first. Collectives are placed right after the
    value they move (once per value and layout), carry `loom.reason` (the
    two layouts and the ops that met) and are never over a manual axis. The
    function gets `loom.spmd`.
    This is `loomc --emit=spmd`.
  }];
  let options = [
    Option<"searchBudget", "search-budget", "int64_t", /*default=*/"100000",
           "Layouts a reshard's search may visit before it settles for "
           "gathering and slicing (0: never search)">,
  ];
  let statistics = [
    Statistic<"numCollectives", "collectives", "Number of collectives inserted">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomExplainCollectives : Pass<"loom-explain-collectives"> {
  let summary = "Explain each collective of a partitioned model as a remark";
  let description = [{
    For each collective: its kind, mesh axes, per-device shape and dtype,
    bytes per rank by DESIGN.md's formulas (times the iterations of every
    enclosing `loom.repeat`), the layouts that forced it and the source
    lines of the ops that met (from `loom.reason`). `loomc --explain` prints
    the same as a table.

    ```mlir
    %r = loom.all_reduce %5 on @m ["tp"] sum {loom.reason = {...} } : tensor<4x64x128xbf16>
    // remark: all_reduce(sum) over ["tp"] of 4x64x128xbf16: 98304 bytes per rank x 4 iterations; ...
    ```
  }];
  let statistics = [
    Statistic<"numCollectives", "collectives", "Number of collectives explained">,
  ];
}

def LoomWidenFloats : Pass<"loom-widen-floats", "mlir::ModuleOp"> {
  let summary = "Compute every floating value in f32";
  let description = [{
    Rewrites every bf16 and f16 type of the module (arguments, results,
    constants, attributes' element types) to f32, so that a model can be run
    and compared exactly (`loomc --dtype=f32`). Casts between floating types
    become no-ops. Runs on the global program, before sharding.
  }];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomContractionOrder : Pass<"loom-contraction-order", "mlir::func::FuncOp"> {
  let summary = "Lay out the values between einsums and attention in GEMM order";
  let description = [{
    Part of the plan every backend shares; it runs on the per-device
    program (after loom-partition, which has dropped the shardings). An
    einsum of two operands whose result is read only as attention's q, k or v, and whose result letters
    are not in the order a GEMM writes them (batch letters, then the first
    operand's free letters in its order, then the second's in its order), is
    computed in that order and read through a `loom.transpose`, which
    attention reads as a view (no copy; dialects/loom/Transforms/Views.h).
    The head-split projection `bsd,dhe->bhse` becomes `bsd,dhe->bshe`: one
    [b*s, d] x [d, h*e] GEMM instead of one GEMM per batch entry and head
    into a scattered layout, and attention reads q, k and v as
    [b, h, s, e] with a row stride of h*e.

    In the other direction, an attention result read by one two-operand
    einsum whose letters the GEMM reads in another order (batch letters,
    then m and k for the first operand, k and n for the second) is read
    through a `loom.transpose` into that order. The attention result is
    then stored in the transpose's order (attention writes it through
    strides) and the transpose is a view. The out-projection
    `bhse,hed->bsd` becomes `bshe,hed->bsd`: one [b*s, h*e] x [h*e, d]
    GEMM over the attention's output as it lies. The values are unchanged.
  }];
  let statistics = [
    Statistic<"numReordered", "reordered", "Number of einsums computed in GEMM order">,
    Statistic<"numResultsReordered", "results-reordered", "Number of attention results written in the order an einsum reads">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomFuseLogitsStats : Pass<"loom-fuse-logits-stats", "mlir::func::FuncOp"> {
  let summary = "Compute a cross-entropy's statistics without storing its logits";
  let description = [{
    Part of the plan every backend shares. Where a product `lhs @ rhs`
    (`rhs` 2-D: an output projection or a tied embedding table read
    through a transpose) is read by one `loom.softmax_stats` and one
    `loom.pick` in its block and by nothing else, the three become one
    `loom.logits_stats`. Backends compute it a block of vocabulary columns
    at a time (the GEMM into a block the size of a cache, then the row
    statistics and the picks over it), so the logits never take their
    whole size in memory: GPT-2 small's step needs 824 MB less, and on a
    GPU each block is read back while it is still in L2.

    ```mlir
    %l = loom.matmul %h, %w : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
    %m, %s = loom.softmax_stats %l : tensor<4x16xbf16> -> tensor<4xf32>, tensor<4xf32>
    %p = loom.pick %l, %t : tensor<4x16xbf16>, tensor<4xi32> -> tensor<4xf32>
    ```
    becomes
    ```mlir
    %m, %s, %p = loom.logits_stats %h, %w, %t logits bf16 : tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<4xi32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Number of logits never stored whole">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomSplitToSlices : Pass<"loom-split-to-slices", "mlir::func::FuncOp"> {
  let summary = "Make a copied split one slice a piece where some can be views";
  let description = [{
    Part of the plan every backend shares, after the fusion passes (whose
    groups and norms are the pieces' readers the memory plan judges) and
    before `loom-plan-memory`. A `loom.split` that the memory plan would
    copy, because some piece's reader does not take strides (a
    collective, a cross-entropy), becomes one `loom.slice` per piece read,
    where at least one of those slices is then read in place
    (dialects/loom/Transforms/Views.h): each piece is judged alone, and
    only those that need a copy get one. The values are unchanged; so is
    the code of a piece that is copied (one copy a piece either way).

    ```mlir
    %q, %k, %v = loom.split %qkv dim = 2 sizes = [1, 1, 1] : tensor<4x64x3x2x64xf32> -> ...
    // q and k normalised in place, v gathered (a collective): becomes
    %q = loom.slice %qkv [0, 0, 0, 0, 0] to [4, 64, 1, 2, 64] : ...
    %k = loom.slice %qkv [0, 0, 1, 0, 0] to [4, 64, 2, 2, 64] : ...
    %v = loom.slice %qkv [0, 0, 2, 0, 0] to [4, 64, 3, 2, 64] : ...
    ```
  }];
  let statistics = [
    Statistic<"numSplit", "split", "Number of splits made one slice a piece">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomComposeSlices : Pass<"loom-compose-slices", "mlir::func::FuncOp"> {
  let summary = "Read a slice or split of a piece from the piece's own input";
  let description = [{
    Part of the plan every backend shares; the first pass of the kernel
    plan. A `loom.slice` or `loom.split` whose input is a result of another
    slice or split becomes one `loom.slice` per result, of the other's
    input, starting at the sum of both starts; the other is erased when
    nothing else reads it. The values are unchanged. The point is the
    memory plan's: a piece of a row-major value is a view (no copy) where
    it is one contiguous run, or where every op that reads it takes
    strides (dialects/loom/Transforms/Views.h), but a piece that a split
    reads is not, so rotary embeddings' halves of q, where q is a third of
    one projection, cost a copy of q until they are pieces of the
    projection itself.

    ```mlir
    %q, %k = loom.split %qkv dim = 2 sizes = [8, 8] : tensor<4x6x16xf32> -> tensor<4x6x8xf32>, tensor<4x6x8xf32>
    %a, %b = loom.split %q dim = 2 sizes = [4, 4] : tensor<4x6x8xf32> -> tensor<4x6x4xf32>, tensor<4x6x4xf32>
    // becomes (%k's readers unchanged)
    %a = loom.slice %qkv [0, 0, 0] to [4, 6, 4] : tensor<4x6x16xf32> -> tensor<4x6x4xf32>
    %b = loom.slice %qkv [0, 0, 4] to [4, 6, 8] : tensor<4x6x16xf32> -> tensor<4x6x4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numComposed", "composed", "Number of slices and splits of a piece read from the piece's input">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomFuseSoftmaxStats : Pass<"loom-fuse-softmax-stats", "mlir::func::FuncOp"> {
  let summary = "Read a row once for its maximum and its sum of exp(x - max)";
  let description = [{
    Part of the plan every backend shares. A logsumexp written out in a
    model reads its rows twice: once for the row maximum `m = max(x)` and
    once for `sum(exp(x - m))`. Where both reduce the last dimension of the
    same f32 value in one block, and the shifted and exponentiated values
    serve only that sum, they become one `loom.softmax_stats`, which
    backends compute in one pass (an online maximum that rescales the sum
    as it grows). A widening cast of x to f32 is looked through: the op
    reads the bf16 or f16 values and widens them itself. A maximum that a
    collective finishes first is left as it is. (The partitioner's
    cross-entropy makes `loom.softmax_stats` itself.)

    ```mlir
    %m = loom.max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %r = loom.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
    %d = loom.sub %x, %r : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
    %e = loom.exp %d : tensor<4x8xf32>
    %s = loom.sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    // becomes
    %m, %s = loom.softmax_stats %x : tensor<4x8xf32> -> tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Number of max and sum-of-exp pairs made one op">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomFuseElementwise : Pass<"loom-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Group element-wise ops that share an iteration space into loom.fused";
  let description = [{
    Part of the plan every backend shares. An element-wise op whose only user
    is an element-wise op of the same block with a result of the same shape
    joins that op's group, and so does one whose only user is a reduction
    (`sum`, `mean`, `max`) over its shape, which then ends the group; scalar
    constants are copied into the group. Each group of two or more ops
    becomes one `loom.fused` op whose body holds the ops in their original
    order, so that the backends emit one loop nest or one kernel per group
    and its intermediate values never reach memory (`sum(exp(x - m))` reads
    x once and writes one value per row). Collectives, contractions, other
    reductions and data movement stay outside groups.

    A `cast` is recomputed rather than stored: each element-wise or reducing
    user gets its own copy, which then joins that user's group, and a `pick`
    reads the cast's input directly when the cast widens to f32 (a pick
    widens exactly itself). The values are unchanged; the f32 copy of, say,
    a cross-entropy's bf16 logits never reaches memory.

    A group reads at most `max-inputs` distinct values from outside (scalar
    constants do not count): a CUDA kernel takes each as a pointer, and its
    parameters must fit in 32 KB (4,095 pointers). A producer that would
    take a group past the bound stays outside and roots its own group.
  }];
  let options = [
    Option<"maxInputs", "max-inputs", "unsigned", /*default=*/"1024",
           "The most distinct values a group reads from outside">,
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups made">,
    Statistic<"numFusedOps", "fused-ops", "Number of ops moved into groups">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomPlanMemory : Pass<"loom-plan-memory", "mlir::ModuleOp"> {
  let summary = "Place every per-rank tensor at a static offset of one arena";
  let description = [{
    Part of the plan every backend shares. Parameters and inputs get fixed
    places for the whole run; every other value that needs memory gets an
    offset (aligned to 64 bytes) by first fit over its live range, so values
    whose lives do not overlap share bytes. A value used inside a
    `loom.repeat` body but defined outside lives until the loop ends;
    a repeat's carried values live in one buffer for all iterations, which
    also holds the initial value when the repeat is its only reader and
    the yielded value when it is written after the iteration's last read
    of the carried one (so neither is copied). A `loom.add_norm` writes
    its normalised rows over its second addend when it is that addend's
    last reader, and a `loom.fused` group or an element-wise op its result
    over an input of the result's type, stored row-major like it, whose
    last reader it is (a
    GEMM's product that only its bias and activation read: each backend's
    kernel reads an element there before it writes it, and a CUDA GEMM
    epilogue then writes the result where the product would go, never over
    the GEMM's operands). Both only where that does not make the arena
    larger (first fit can place the rest worse; where a buffer can be
    shared so, the plan is made both ways). A repeat whose carried
    values trade places gets `loom.scratch_offset`: a buffer, alive at the
    yield only, through which the moves that end an iteration go round.
    `loom.reshape` results, a repeat body's slices of stacked operands and
    transposes read only by contractions or as attention's q, k and v
    (dialects/loom/Transforms/Views.h) are views into their operand's
    buffer and get no offset of their own.
    Records `loom.offset` on function arguments, `loom.offsets` (one per
    result, -1 for a view) on ops and `loom.arena_bytes` on the function;
    `loomc --report` prints the peak.
  }];
  let statistics = [
    Statistic<"arenaBytes", "arena-bytes", "Bytes of the largest arena">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD

def LoomBatchContractions : Pass<"loom-batch-contractions", "mlir::func::FuncOp"> {
  let summary = "Run neighbouring contractions of one operand as one batched GEMM";
  let description = [{
    Part of the plan every backend shares; runs after `loom-plan-memory` and
    changes no offset. Neighbouring `loom.einsum`s and `loom.matmul`s of a
    block (views between them aside) that contract the same first operand
    with second operands of one type become one `loom.batched_einsum` when,
    in order of their results' offsets, the second operands lie equally
    spaced in the arena (as a repeat's stacked weights of one shape do) and
    so do the results, which overlap neither each other nor any operand,
    and nothing reads a result before the last of them. A layer's Q, K and
    V projections are the case: the backends then run one strided-batched
    GEMM with the first operand at batch stride 0 instead of three GEMMs.

    ```mlir
    %q = loom.einsum "bsd,dhe->bhse" %x, %wq : ...
    %k = loom.einsum "bsd,dhe->bhse" %x, %wk : ...
    // becomes
    %q, %k = loom.batched_einsum "bsd,dhe->bhse" %x, %wq, %wk : ...
    ```
  }];
  let statistics = [
    Statistic<"numBatches", "batches", "Number of batched contractions made">,
    Statistic<"numContractions", "contractions", "Number of contractions batched">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomHoistCollectives : Pass<"loom-hoist-collectives", "mlir::func::FuncOp"> {
  let summary = "Run a collective of a transpose on the transpose's input";
  let description = [{
    Part of the SPMD pipeline, after partitioning and before
    `loom-combine-collectives`. A collective whose input is a transpose
    that nothing else reads runs on the transpose's input instead, its
    dimensions (`dim`, `split_dim`, `concat_dim`) those the transpose took
    them from, and the transpose is moved after it, where its readers
    read it: only where those readers take permuted strides (contractions,
    and attention with the last dimension last), so that the moved
    transpose is a view (dialects/loom/Transforms/Views.h). A transpose
    that only a collective reads is otherwise a copy. Kinds moved:
    `all_gather`, `all_slice`, `reduce_scatter`, `all_to_all`,
    `all_reduce`, `collective_permute`; the values are unchanged, and so
    are the bytes each rank sends.

    ```mlir
    %t = loom.transpose %k perm = [0, 2, 1, 3] : tensor<4x64x2x64xf32> -> tensor<4x2x64x64xf32>
    %g = loom.all_gather %t on @m ["sp"] dim 2 : tensor<4x2x64x64xf32> -> tensor<4x2x128x64xf32>
    // becomes (attention reads %g)
    %h = loom.all_gather %k on @m ["sp"] dim 1 : tensor<4x64x2x64xf32> -> tensor<4x128x2x64xf32>
    %g = loom.transpose %h perm = [0, 2, 1, 3] : tensor<4x128x2x64xf32> -> tensor<4x2x128x64xf32>
    ```
  }];
  let statistics = [
    Statistic<"numHoisted", "hoisted", "Number of collectives moved before a transpose">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomCombineCollectives : Pass<"loom-combine-collectives",
                                   "mlir::func::FuncOp"> {
  let summary = "Run independent collectives of one kind and group as one";
  let description = [{
    The first collective optimisation of the per-device program. In each
    block (a function's body, a `loom.repeat`'s iteration), all_gathers,
    all_reduces and reduce_scatters of the same kind, mesh axes and
    reduction (and element type, for reductions) whose operands are all made before the first reader of
    any of their results become one `loom.combined`, placed just before that
    reader: FSDP's gathers of a layer's weights, or a loss's sums, pay one
    latency instead of one each. A collective that reads or feeds another
    collective directly stays where it is. A group holds at most `max-bytes`
    (its members' larger buffers, input or result, added up): its results
    are alive from the first reader on, so the bound is also the most a
    combination can add to the arena.

    ```mlir
    %a = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
    %b = loom.all_gather %y on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
    // becomes
    %a, %b = loom.combined -> (tensor<8x16xbf16>, tensor<16x4xbf16>) {
      %0 = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
      %1 = loom.all_gather %y on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
      loom.yield %0, %1 : tensor<8x16xbf16>, tensor<16x4xbf16>
    }
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"32 << 20",
           "The most bytes one combined collective holds; 0 combines none">,
  ];
  let statistics = [
    Statistic<"numCombined", "combined", "Number of collectives combined">,
    Statistic<"numGroups", "groups", "Number of loom.combined ops made">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomOverlapCollectives : Pass<"loom-overlap-collectives",
                                   "mlir::func::FuncOp"> {
  let summary = "Start collectives early and wait for them late";
  let description = [{
    In each block (a function's body, a `loom.repeat`'s iteration), an
    all_gather, all_reduce, reduce_scatter or `loom.combined` becomes a
    `loom.start` placed just after the last op that makes one of its
    operands, and a `loom.wait` for each of its results just before the
    first op that reads one (backends complete a started op as a whole),
    so that the kernels in between run while it communicates. A
    `loom.combined` whose members are first read at different places, with
    work between those places, is split first: the members read first stay,
    the others become a collective of their own just after it (a layer's
    MLP weights, gathered with its attention's, then arrive while the
    attention computes). A start never moves before an earlier start, nor
    before a collective over an axis it shares (or an op holding one of
    those): it would wait behind the start, as backends run those in the
    order issued. It passes blocking collectives over other axes, which
    run beside it, and all_slices, which send nothing. A collective with
    no work (kernels, loops) to hide behind stays as it is. The collective
    reads its operands until its last wait, and the memory plan keeps them
    alive until then.

    In a `loom.repeat` of two or more iterations, the collectives that read
    only the iteration's stacked slices and values from outside the loop
    (FSDP's gathers of a layer's weights) are also started one iteration
    ahead: a `loom.prefetch` right after each one's wait starts the next
    iteration's, so the rest of the iteration hides it (the first
    iteration's start before the loop; the memory plan gives their results
    two buffers). It comes after the iteration's started collectives (one
    communication stream) and its collectives over a shared axis (one
    communicator, in order), which would otherwise wait for it; it passes
    blocking collectives over other axes, which backends run beside it.
    Where no work follows that place, the collective stays within its
    iteration.

    ```mlir
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<64x128xbf16> -> tensor<128x128xbf16>
    %h = loom.gelu %x : tensor<8x128xbf16>
    %y = loom.matmul %h, %g : tensor<8x128xbf16>, tensor<128x128xbf16> -> tensor<8x128xbf16>
    // becomes
    %f = loom.start -> !loom.future<tensor<128x128xbf16>> {
      %0 = loom.all_gather %w on @m ["dp"] dim 0 : tensor<64x128xbf16> -> tensor<128x128xbf16>
      loom.yield %0 : tensor<128x128xbf16>
    }
    %h = loom.gelu %x : tensor<8x128xbf16>
    %g = loom.wait %f : !loom.future<tensor<128x128xbf16>>
    %y = loom.matmul %h, %g : tensor<8x128xbf16>, tensor<128x128xbf16> -> tensor<8x128xbf16>
    ```
  }];
  let statistics = [
    Statistic<"numStarted", "started", "Number of collectives started early">,
    Statistic<"numSplit", "split",
              "Number of loom.combined ops split by where their members are "
              "first read">,
    Statistic<"numHidden", "hidden-behind",
              "Number of ops whose work runs while a started collective "
              "communicates (counted once per collective)">,
    Statistic<"numPrefetched", "prefetched",
              "Number of collectives started one iteration ahead "
              "(loom.prefetch)">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}

def LoomFuseAddNorm : Pass<"loom-fuse-add-norm", "mlir::func::FuncOp"> {
  let summary = "Make a residual sum and the norm that reads it one op";
  let description = [{
    Part of the plan every backend shares, after the element-wise groups.
    A `loom.add` left on its own (no broadcast, one type throughout) whose
    sum a `loom.layernorm` or `loom.rmsnorm` of its block normalises
    becomes, with that norm, one `loom.add_norm` in the add's place, when
    the norm's scale and bias exist there, else in the norm's place when
    nothing else reads the sum before the norm. The sum keeps its other readers
    (the residual stream). Backends read the two addends once, write the
    sum and normalise it from registers: a pre-norm transformer layer's
    `x = x + attention(h)` and `layernorm(x)` cost one pass instead of a
    write and a read of x between two launches. A fusion group
    `x + (m + c)`, c a vector over the last dimension (a biased
    projection added to the residual stream), fuses too, as `add_norm`
    with `plus c`.

    A `loom.repeat` whose body begins with a norm of a carried value, whose
    next value is such a sum and whose final value only a norm of the same
    kind and eps reads is rotated first: the first layer's norm moves
    before the loop, each iteration ends with the next layer's norm (its
    gains stacked shifted by one, the final norm's last) and carries its
    result, and the final norm is the loop's. Then each layer's last sum
    and the next layer's first norm fuse, as the final one does.

    ```mlir
    %x = loom.add %r, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    %h = loom.layernorm %x, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
    // becomes
    %x, %h = loom.add_norm %r, %a, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Number of sums normalised as they are made">,
    Statistic<"numRotated", "rotated", "Number of carried values whose norm moved to the end of the loop">,
  ];
  let dependentDialects = ["loom::LoomDialect"];
}
