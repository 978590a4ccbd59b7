//===- LoomOps.td - Loom operations ------------------------*- tablegen -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_OPS_TD
#define LOOM_OPS_TD

include "LoomDialect.td"
include "LoomAttrs.td"
include "LoomInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/LoopLikeInterface.td"

def Loom_FloatElement : AnyTypeOf<[F32, BF16, F16]>;
def Loom_IntElement : AnyTypeOf<[I32, I64]>;
// Loom values have static shapes: shardings, divisibility and the memory
// plan are all decided at compile time.
def Loom_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64]>;
def Loom_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def Loom_IntTensor : StaticShapeTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Mesh, constraints, constants
//===----------------------------------------------------------------------===//

def Loom_MeshOp : Loom_Op<"mesh", [Symbol, HasParent<"mlir::ModuleOp">]> {
  let summary = "A named grid of devices";
  let description = [{
    Declares a mesh: named axes with sizes, devices numbered row-major. Axes
    listed in `manual` belong to the pipeline schedule: sharding propagation
    never assigns them and the partitioner emits no collective over them.

    ```mlir
    loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 2] manual ["pp"]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes,
                       DefaultValuedAttr<StrArrayAttr, "{}">:$manual_axes);
  let assemblyFormat = [{
    $sym_name custom<MeshAxes>($axis_names, $axis_sizes)
    (`manual` $manual_axes^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Size of `axis`, or std::nullopt when the mesh has no such axis.
    std::optional<int64_t> getAxisSize(llvm::StringRef axis);
    bool isManualAxis(llvm::StringRef axis);
    /// Number of devices in the mesh.
    int64_t getNumDevices();
  }];
}

def Loom_ShardOp : Loom_Op<"shard", [Pure, SameOperandsAndResultType]> {
  let summary = "Sharding constraint";
  let description = [{
    Returns its operand unchanged and pins the sharding of the result, as
    written by the user (`x = shard(x, [B:dp, S:tp, D])`) or implied by a
    block's signature. Unbound dimensions in the constraint are open.

    ```mlir
    %y = loom.shard %x as <@mesh, [{"dp"}, {"tp"}, {?} ]> : tensor<8x16x32xbf16>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, Loom_ShardingAttr:$sharding);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input `as` $sharding attr-dict `:` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Loom_ConstantOp : Loom_Op<"constant", [Pure, ConstantLike, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "Tensor constant";
  let description = [{
    A constant tensor; scalar literals of the language become rank-0
    constants of the other operand's element type.

    ```mlir
    %c = loom.constant dense<5.000000e-01> : tensor<bf16>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Loom_BinaryOp<string mnemonic, string formula>
    : Loom_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Elementwise " # mnemonic # " with broadcasting";
  let description = [{
    Computes `}] # formula # [{` elementwise. Shapes broadcast as in NumPy
    (trailing dimensions align; a dimension of size 1 stretches). An f32
    operand mixed with a bf16/f16 operand computes and returns f32; integer
    operands must share their type.

    ```mlir
    %z = loom.}] # mnemonic # [{ %x, %y : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$lhs, Loom_Tensor:$rhs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Loom_AddOp : Loom_BinaryOp<"add", "lhs + rhs">;
def Loom_SubOp : Loom_BinaryOp<"sub", "lhs - rhs">;
def Loom_MulOp : Loom_BinaryOp<"mul", "lhs * rhs">;
def Loom_DivOp : Loom_BinaryOp<"div", "lhs / rhs">;

class Loom_UnaryOp<string mnemonic, string formula, Type operandType = Loom_FloatTensor>
    : Loom_Op<mnemonic, [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Elementwise " # mnemonic;
  let description = [{
    Computes `}] # formula # [{` elementwise (in f32 for bf16/f16 inputs,
    rounded to nearest even on the result).

    ```mlir
    %y = loom.}] # mnemonic # [{ %x : tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_ReluOp : Loom_UnaryOp<"relu", "max(x, 0)">;
def Loom_SiluOp : Loom_UnaryOp<"silu", "x * sigmoid(x)">;
def Loom_TanhOp : Loom_UnaryOp<"tanh", "tanh(x)">;
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Loom_ExpOp : Loom_UnaryOp<"exp", "exp(x)">;
def Loom_LogOp : Loom_UnaryOp<"log", "log(x)">;
def Loom_SqrtOp : Loom_UnaryOp<"sqrt", "sqrt(x)">;
def Loom_RsqrtOp : Loom_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Loom_NegOp : Loom_UnaryOp<"neg", "-x", Loom_Tensor>;

def Loom_GeluOp : Loom_Op<"gelu", [Pure, SameOperandsAndResultType, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `none`: x * 0.5 * (1 + erf(x / sqrt(2))). `tanh`: x * 0.5 * (1 +
    tanh(sqrt(2/pi) * (x + 0.044715 x^3))).

    ```mlir
    %y = loom.gelu %x approximate tanh : tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input,
      DefaultValuedAttr<Loom_GeluApproximation,
                        "GeluApproximation::None">:$approximate);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` $approximate^)? attr-dict `:` type($result)
  }];
}

def Loom_CastOp : Loom_Op<"cast", [Pure, SameOperandsAndResultShape, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Element type conversion";
  let description = [{
    Float to float rounds to nearest even; float to integer truncates toward
    zero; integer to float rounds to nearest even.

    ```mlir
    %y = loom.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_Op<"matmul", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Batched matrix product";
  let description = [{
    `[..., M, K] x [..., K, N] -> [..., M, N]`; leading (batch) dimensions
    broadcast as in NumPy, so `[B, S, D] x [D, F] -> [B, S, F]`. Accumulates
    in f32.

    ```mlir
    %y = loom.matmul %x, %w : tensor<8x16x32xbf16>, tensor<32x64xbf16> -> tensor<8x16x64xbf16>
    ```
  }];
  let arguments = (ins Loom_Tensor:$lhs, Loom_Tensor:$rhs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Loom_EinsumOp : Loom_Op<"einsum", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Einstein summation over one or two operands";
  let description = [{
    `spec` is `"in0,in1->out"` with one lower-case letter per dimension; a
    letter missing from the output is summed over. Accumulates in f32.

    ```mlir
    %q = loom.einsum "bsd,dhe->bhse" %x, %w : (tensor<2x4x8xf32>, tensor<8x2x4xf32>) -> tensor<2x2x4x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$spec, Variadic<Loom_Tensor>:$inputs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $spec $inputs attr-dict `:` functional-type($inputs, $result)
  }];
}

//===----------------------------------------------------------------------===//
// Normalisations and reductions
//===----------------------------------------------------------------------===//

def Loom_SoftmaxOp : Loom_Op<"softmax", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Softmax along one dimension";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `dim`, computed in f32.

    ```mlir
    %p = loom.softmax %x dim = 1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Loom_LayerNormOp : Loom_Op<"layernorm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over the trailing `rank(scale)` dimensions:
    `(x - mean) / sqrt(var + eps) * scale + bias`, with the biased variance,
    computed in f32 and rounded to x's element type. `scale` and `bias` have
    the shape of those dimensions and are x's element type or f32.

    ```mlir
    %y = loom.layernorm %x, %g, %b eps = 1.0e-05 : tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$bias, F64Attr:$eps);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `eps` `=` $eps attr-dict `:` type($input) `,`
    type($scale) `,` type($bias) `->` type($result)
  }];
}

def Loom_RMSNormOp : Loom_Op<"rmsnorm", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Root-mean-square normalisation over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2) + eps) * scale` over the trailing `rank(scale)`
    dimensions, computed in f32 and rounded to x's element type.

    ```mlir
    %y = loom.rmsnorm %x, %g eps = 1.0e-06 : tensor<2x8xbf16>, tensor<8xf32> -> tensor<2x8xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$scale,
                       F64Attr:$eps);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `eps` `=` $eps attr-dict `:` type($input) `,`
    type($scale) `->` type($result)
  }];
}

class Loom_ReduceOp<string mnemonic, string what, Type operandType>
    : Loom_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = what # " over dimensions";
  let description = [{
    Reduces over `dims` (sorted, distinct); with `keepdim` the reduced
    dimensions stay with size 1. Float inputs accumulate in f32. A mean divides
    by the global number of reduced elements under any sharding.

    ```mlir
    %s = loom.}] # mnemonic # [{ %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins operandType:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs operandType:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Loom_SumOp : Loom_ReduceOp<"sum", "Sum", Loom_Tensor>;
def Loom_MeanOp : Loom_ReduceOp<"mean", "Mean", Loom_FloatTensor>;
def Loom_MaxOp : Loom_ReduceOp<"max", "Maximum", Loom_Tensor>;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Loom_ReshapeOp : Loom_Op<"reshape", [Pure, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Row-major reshape";
  let description = [{
    Reinterprets the elements in row-major order with a new shape of the same
    element count.

    ```mlir
    %y = loom.reshape %x : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_TransposeOp : Loom_Op<"transpose", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Dimension permutation";
  let description = [{
    Result dimension `i` is input dimension `perm[i]`.

    ```mlir
    %y = loom.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)
  }];
}

def Loom_ConcatOp : Loom_Op<"concat", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Concatenation along one dimension";
  let description = [{
    ```mlir
    %y = loom.concat %a, %b dim = 1 : (tensor<4x2xf32>, tensor<4x6xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, $result)
  }];
}

def Loom_SplitOp : Loom_Op<"split", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Split into consecutive pieces along one dimension";
  let description = [{
    ```mlir
    %a, %b = loom.split %x dim = 1 sizes = [2, 6] : tensor<4x8xf32> -> tensor<4x2xf32>, tensor<4x6xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, I64Attr:$dim,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let assemblyFormat = [{
    $input `dim` `=` $dim `sizes` `=` $sizes attr-dict `:` type($input) `->`
    type($results)
  }];
}

def Loom_SliceOp : Loom_Op<"slice", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Contiguous slice";
  let description = [{
    Takes `[start[i], limit[i])` of every dimension `i`.

    ```mlir
    %y = loom.slice %x [0, 2] to [4, 6] : tensor<4x8xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input $start `to` $limit attr-dict `:` type($input) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Model-level ops
//===----------------------------------------------------------------------===//

def Loom_EmbeddingOp : Loom_Op<"embedding", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Table lookup";
  let description = [{
    `result[i..., :] = table[ids[i...], :]`. An id outside `[0, V)` yields
    zeros.

    ```mlir
    %e = loom.embedding %ids, %table : tensor<2x4xi32>, tensor<16x8xbf16> -> tensor<2x4x8xbf16>
    ```
  }];
  let arguments = (ins Loom_IntTensor:$ids, Loom_FloatTensor:$table);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` type($ids) `,` type($table) `->` type($result)
  }];
}

def Loom_AttentionOp : Loom_Op<"attention", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Scaled dot-product attention";
  let description = [{
    `softmax(q k^T * scale + mask) v` over `[..., S, E]` operands, with
    `scale = 1/sqrt(E)` unless given and, when `causal`, query `i` seeing keys
    `j <= i`. The softmax is computed in f32.

    ```mlir
    %o = loom.attention %q, %k, %v causal scale = 0.5 : tensor<2x2x4x4xbf16>, tensor<2x2x4x4xbf16>, tensor<2x2x4x4xbf16> -> tensor<2x2x4x4xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, UnitAttr:$causal,
                       F64Attr:$scale);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`causal` $causal^)? `scale` `=` $scale attr-dict
    `:` type($query) `,` type($key) `,` type($value) `->` type($result)
  }];
}

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>]> {
  let summary = "Mean softmax cross-entropy over all tokens";
  let description = [{
    `mean over all (global) positions of logsumexp(logits) - logits[target]`,
    computed in f32; the result is an f32 scalar. Targets outside `[0, V)` are
    an error at run time.

    ```mlir
    %l = loom.cross_entropy %logits, %t : tensor<2x4x16xbf16>, tensor<2x4xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IntTensor:$targets);
  let results = (outs TensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->`
    type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Repetition
//===----------------------------------------------------------------------===//

def Loom_RepeatOp : Loom_Op<"repeat", [
    AttrSizedOperandSegments, RecursiveMemoryEffects,
    SingleBlockImplicitTerminator<"YieldOp">,
    DeclareOpInterfaceMethods<LoopLikeOpInterface, ["getLoopRegions"]>,
    DeclareOpInterfaceMethods<RegionBranchOpInterface,
        ["getEntrySuccessorOperands"]>]> {
  let summary = "A layer applied `count` times, over stacked parameters";
  let description = [{
    Runs its body `count` times, like JAX's `scan`. `carried` values flow from
    one iteration to the next; each `stacked` operand has a leading dimension
    of size `count` and the body sees one slice `[i]` of it per iteration.
    The body's entry block takes the carried values and then the slices; it
    yields the next carried values and then per-iteration outputs, which the
    op returns stacked along a new leading dimension.

    ```mlir
    %x1 = loom.repeat 4 carried(%x0 : tensor<8x16xf32>)
        stacked(%w : tensor<4x16x16xf32>) -> tensor<8x16xf32> {
    ^bb0(%x: tensor<8x16xf32>, %wi: tensor<16x16xf32>):
      %y = loom.matmul %x, %wi : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
      loom.yield %y : tensor<8x16xf32>
    }
    ```
  }];
  let arguments = (ins I64Attr:$count, Variadic<Loom_Tensor>:$carried,
                       Variadic<Loom_Tensor>:$stacked);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $count (`carried` `(` $carried^ `:` type($carried) `)`)?
    (`stacked` `(` $stacked^ `:` type($stacked) `)`)?
    (`->` type($results)^)? attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Results that carry the loop state (the rest are stacked outputs).
    mlir::ResultRange getCarriedResults() {
      return getResults().take_front(getCarried().size());
    }
    mlir::ResultRange getStackedResults() {
      return getResults().drop_front(getCarried().size());
    }
  }];
}

def Loom_YieldOp : Loom_Op<"yield", [Pure, Terminator, HasParent<"RepeatOp">,
    DeclareOpInterfaceMethods<RegionBranchTerminatorOpInterface,
        ["getMutableSuccessorOperands"]>]> {
  let summary = "Ends one iteration of loom.repeat";
  let description = [{
    Yields the next carried values, then the per-iteration outputs.

    ```mlir
    loom.yield %y : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$values);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, mlir::ValueRange()); }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Training specification
//===----------------------------------------------------------------------===//

def Loom_TrainOp : Loom_Op<"train", [HasParent<"mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "How a model is trained";
  let description = [{
    Keeps the `train` block of a Loom file for the training-step passes:
    optimizer and hyper-parameters, precision, ZeRO stage and axes,
    microbatches, pipeline schedule and axis, and stage assignment.

    ```mlir
    loom.train @GPT optimizer = "adamw" {hyper = {lr = 3.0e-04 : f64}}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$model, StrAttr:$optimizer,
      DefaultValuedAttr<DictionaryAttr, "{}">:$hyper,
      OptionalAttr<TypeAttr>:$compute_type,
      OptionalAttr<TypeAttr>:$master_type,
      OptionalAttr<I64Attr>:$zero_stage,
      OptionalAttr<StrArrayAttr>:$zero_axes,
      OptionalAttr<I64Attr>:$microbatches,
      OptionalAttr<StrAttr>:$schedule,
      OptionalAttr<StrAttr>:$schedule_axis,
      OptionalAttr<ArrayAttr>:$stages);
  let assemblyFormat = "$model `optimizer` `=` $optimizer attr-dict";
  let hasVerifier = 1;
}

#endif // LOOM_OPS_TD
