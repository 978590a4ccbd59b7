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
include "LoomTypes.td"
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

def Loom_BatchedEinsumOp : Loom_Op<"batched_einsum", [Pure]> {
  let summary = "Contractions of one operand with several others, run as one";
  let description = [{
    Result `i` is `loom.einsum spec lhs, rhs[i]`: the same contraction of
    one first operand with each of the second ones. `loom-batch-contractions`
    makes it, after the memory plan, out of neighbouring einsums and matmuls
    (a matmul as its einsum spec) whose second operands and results lie
    equally spaced in the arena, such as a layer's Q, K and V projections;
    a backend then runs them as one strided-batched GEMM whose first operand
    has batch stride 0. Each result is the einsum's own, to the bit.

    ```mlir
    %q, %k = loom.batched_einsum "bsd,de->bse" %x, %wq, %wk : tensor<2x4x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$spec, Loom_Tensor:$lhs,
                       Variadic<Loom_Tensor>:$rhs);
  let results = (outs Variadic<Loom_Tensor>:$results);
  let assemblyFormat = [{
    $spec $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->`
    type($results)
  }];
  let hasVerifier = 1;
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

def Loom_AddNormOp : Loom_Op<"add_norm", [Pure, AttrSizedOperandSegments]> {
  let summary = "A residual sum and its layer or RMS norm, in one pass";
  let description = [{
    `sum = lhs + rhs` (same shape and type, rounded to it), and `result`
    the `loom.layernorm` of `sum` with `scale`, `bias` and `eps` (with
    `rms`, the `loom.rmsnorm`: no bias). With `plus rhs_bias` (a vector
    over the last dimension, of the addends' element type), the second
    addend is `rhs + rhs_bias`, rounded to the type before the sum, as
    `lhs + (rhs + rhs_bias)` would be: a biased projection added to the
    residual stream. `loom-fuse-add-norm` makes it out of a residual
    connection and the norm that reads it, so that a backend reads the
    addends once and the sum never again: a pre-norm transformer layer's
    `x + attention(h)` and the norm of the MLP, and (rotating a
    `loom.repeat`) `x + mlp(h)` and the next layer's first norm. Both
    results are the ops' own, to the bit. Backends read each row whole
    before they write it, so `loom-plan-memory` may place `result` in
    `rhs`'s buffer when this op is its last reader.

    ```mlir
    %s, %y = loom.add_norm %x, %a, %g, %b eps = 1.0e-05 : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
    %t, %z = loom.add_norm %x, %m plus %c, %g eps = 1.0e-06 rms : tensor<2x4x8xbf16>, tensor<2x4x8xbf16> plus tensor<8xbf16>, tensor<8xf32> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Optional<Loom_FloatTensor>:$rhs_bias,
                       Loom_FloatTensor:$scale,
                       Optional<Loom_FloatTensor>:$bias, F64Attr:$eps,
                       UnitAttr:$rms);
  let results = (outs Loom_FloatTensor:$sum, Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`plus` $rhs_bias^)? `,` $scale (`,` $bias^)? `eps` `=` $eps
    (`rms` $rms^)? attr-dict `:` type($lhs) `,` type($rhs)
    (`plus` type($rhs_bias)^)? `,` type($scale) (`,` type($bias)^)? `->`
    type($sum) `,` type($result)
  }];
  let hasVerifier = 1;
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
    DeclareOpInterfaceMethods<Loom_ShardingRuleOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Table lookup";
  let description = [{
    `result[i..., :] = table[ids[i...], :]`. An id outside `[0, V)` yields
    zeros.

    ```mlir
    %e = loom.embedding %ids, %table : tensor<2x4xi32>, tensor<16x8xbf16> -> tensor<2x4x8xbf16>
    ```
  }];
  let arguments = (ins Loom_IntTensor:$ids, Loom_FloatTensor:$table,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table (`vocab` `on` $mesh^ $vocab_axes)? attr-dict `:`
    type($ids) `,` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_PickOp : Loom_Op<"pick", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "The logit of each target, for a cross-entropy split over its vocabulary";
  let description = [{
    `result[i...] = f32(logits[i..., targets[i...]])`. With `vocab on @m
    [axes]`, `logits` is this device's piece of a vocabulary split over
    `axes` (rank r of the group holds rows `[r*V, (r+1)*V)`); a target
    outside that piece yields 0, so the pieces sum to the true value. The
    partitioner emits it when it splits `loom.cross_entropy`.

    ```mlir
    %p = loom.pick %logits, %t vocab on @m ["tp"] : tensor<2x4x8xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IntTensor:$targets,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs TensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets (`vocab` `on` $mesh^ $vocab_axes)? attr-dict `:`
    type($logits) `,` type($targets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_SoftmaxStatsOp : Loom_Op<"softmax_stats", [Pure]> {
  let summary = "A row's maximum and its sum of exp(x - maximum), in one pass";
  let description = [{
    Over the last dimension of `input`, widened exactly to f32:
    `max = max(x)` and `sum = Σ exp(x - max)`, accumulated in f32 (a NaN
    makes both NaN; a row of -inf only has sum NaN, as `exp(-inf - -inf)`).
    The logsumexp of a row is `max + log(sum)`. A backend reads each row
    once, rescaling the sum when the maximum grows.

    With `partial`, each row is one piece of a longer row whose other
    pieces are on other ranks, and a piece of only -inf has sum 0: the
    partitioner finishes a cross-entropy over a split vocabulary with
    `M = all_reduce(max)` and `all_reduce(sum * exp(max - M))`, which gives
    NaN where every piece is -inf. Without it, `loom-fuse-softmax-stats`
    makes the op from a `loom.max` and a `loom.sum` of `loom.exp` over the
    same row.

    ```mlir
    %m, %s = loom.softmax_stats %x : tensor<8x512xbf16> -> tensor<8xf32>, tensor<8xf32>
    %pm, %ps = loom.softmax_stats %x partial : tensor<8x256xbf16> -> tensor<8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, UnitAttr:$partial);
  let results = (outs TensorOf<[F32]>:$max, TensorOf<[F32]>:$sum);
  let assemblyFormat = [{
    $input (`partial` $partial^)? attr-dict `:` type($input) `->` type($max) `,` type($sum)
  }];
  let hasVerifier = 1;
}

def Loom_LogitsStatsOp : Loom_Op<"logits_stats", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A cross-entropy's statistics of `lhs @ rhs`, never stored whole";
  let description = [{
    With `logits = lhs @ rhs` (`rhs` 2-D, the product rounded to
    `logits_type`): `max` and `sum` are `loom.softmax_stats` of `logits`
    (`partial` as there) and `picked` is `loom.pick` of `logits` and
    `targets` (`vocab on` as there). `loom-fuse-logits-stats` makes it
    from those three ops when nothing else reads the logits, so that a
    backend computes the logits a block of columns at a time and never
    holds them all: a language model's largest tensor (GPT-2 small: 824 MB
    of bf16 per step).

    ```mlir
    %m, %s, %p = loom.logits_stats %h, %w, %t logits bf16 : tensor<2x4x8xbf16>, tensor<8x16xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Loom_IntTensor:$targets, TypeAttr:$logits_type,
                       UnitAttr:$partial,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$vocab_axes);
  let results = (outs TensorOf<[F32]>:$max, TensorOf<[F32]>:$sum,
                      TensorOf<[F32]>:$picked);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $targets `logits` $logits_type (`partial` $partial^)?
    (`vocab` `on` $mesh^ $vocab_axes)? attr-dict `:` type($lhs) `,`
    type($rhs) `,` type($targets) `->` type($max) `,` type($sum) `,`
    type($picked)
  }];
  let hasVerifier = 1;
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
// Collectives (on per-device tensors, after partitioning)
//===----------------------------------------------------------------------===//

class Loom_CollectiveOp<string mnemonic, list<Trait> traits = [],
                        list<string> methods = []>
    : Loom_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<Loom_CollectiveOpInterface,
                                  !listconcat(["getBytesPerRank"], methods)>])> {
  code commonDescription = [{
    Groups are the devices that share their coordinates on every mesh axis
    but `axes`; within a group, ranks are numbered row-major over `axes`,
    in the order listed (major to minor).
  }];
}

def Loom_AllReduceOp : Loom_CollectiveOp<"all_reduce", [Pure,
    SameOperandsAndResultType], ["getReductionKind"]> {
  let summary = "Reduce across each group; every rank gets the result";
  let description = commonDescription # [{
    Each rank sends 2(n-1)/n of its buffer.

    ```mlir
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Loom_ReductionKind:$reduction);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $reduction attr-dict `:` type($result)
  }];
  let hasFolder = 1;
}

def Loom_AllGatherOp : Loom_CollectiveOp<"all_gather", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "Concatenate the group's pieces along one dimension";
  let description = commonDescription # [{
    The result's dimension `dim` is n times the input's; rank r's piece
    lands at position r. Each rank sends (n-1)/n of the gathered result.

    ```mlir
    %r = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xf32> -> tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `dim` $dim attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Loom_ReduceScatterOp : Loom_CollectiveOp<"reduce_scatter", [Pure,
    SameOperandsAndResultElementType], ["getReductionKind"]> {
  let summary = "Reduce across each group and keep one piece per rank";
  let description = commonDescription # [{
    Rank r keeps piece r of dimension `dim` of the reduced value. Each rank
    sends (n-1)/n of its input.

    ```mlir
    %r = loom.reduce_scatter %x on @m ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim,
                       Loom_ReductionKind:$reduction);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `dim` $dim $reduction attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasFolder = 1;
}

def Loom_AllToAllOp : Loom_CollectiveOp<"all_to_all", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "Exchange pieces: split one dimension, concatenate another";
  let description = commonDescription # [{
    Splits `split_dim` into n pieces, sends piece r to rank r, and
    concatenates what it receives along `concat_dim`. Each rank sends (n-1)/n
    of its buffer. With `as`, the same axes in another order number the
    pieces: rank r receives the piece that its coordinates index over
    `split_axes`, so `split_dim` ends with the axes in that order (the
    pieces received are still concatenated in the order of `axes`); an
    all_to_all and a permute that reorders what it split, in one.

    ```mlir
    %r = loom.all_to_all %x on @m ["tp"] split 1 concat 0 : tensor<4x16xf32> -> tensor<8x8xf32>
    %s = loom.all_to_all %x on @m ["a", "b"] as ["b", "a"] split 1 concat 0 : tensor<4x16xf32> -> tensor<16x4xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       OptionalAttr<StrArrayAttr>:$split_axes,
                       I64Attr:$split_dim, I64Attr:$concat_dim);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes (`as` $split_axes^)? `split` $split_dim `concat`
    $concat_dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def Loom_AllSliceOp : Loom_CollectiveOp<"all_slice", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "Keep this rank's piece of a replicated value (no communication)";
  let description = commonDescription # [{
    Rank r keeps piece r of dimension `dim`. Sends nothing.

    ```mlir
    %r = loom.all_slice %x on @m ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `dim` $dim attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Loom_CollectivePermuteOp : Loom_CollectiveOp<"collective_permute", [Pure,
    SameOperandsAndResultType]> {
  let summary = "Send each rank's value to another rank of its group";
  let description = commonDescription # [{
    `pairs` lists (source, target) ranks, flattened; a rank that is no target
    receives zeros. Each sending rank sends its whole buffer.

    ```mlir
    %r = loom.collective_permute %x on @m ["tp"] pairs [0, 1, 1, 0] : tensor<8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$pairs);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `pairs` $pairs attr-dict `:` type($result)
  }];
}

def Loom_BroadcastOp : Loom_CollectiveOp<"broadcast", [Pure,
    SameOperandsAndResultType]> {
  let summary = "Every rank of a group gets the root rank's value";
  let description = commonDescription # [{
    ```mlir
    %r = loom.broadcast %x on @m ["dp"] root 0 : tensor<8xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$root);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `root` $root attr-dict `:` type($result)
  }];
  let hasFolder = 1;
}

def Loom_StartOp : Loom_Op<"start", [
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "Start a collective in the background";
  let description = [{
    Runs the one collective in its body (an all_reduce, all_gather,
    reduce_scatter, or a `loom.combined` of them) asynchronously and returns
    a future for each of its results; `loom.wait` gives a future's value.
    Compute placed between the two overlaps with the communication. The
    collective reads its operands until the last wait of its futures, so
    they stay alive until then. Made by `loom-overlap-collectives`.

    ```mlir
    %f = loom.start -> !loom.future<tensor<8x16xf32>> {
      %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8x16xf32>
      loom.yield %r : tensor<8x16xf32>
    }
    %v = loom.wait %f : !loom.future<tensor<8x16xf32>>
    ```
  }];
  let results = (outs Variadic<Loom_FutureType>:$futures);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`->` qualified(type($futures)) attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The op this op starts: a collective or a loom.combined.
    ::mlir::Operation *getStarted();
    /// The collective this op starts, when it is a single one.
    CollectiveOpInterface getCollective();
    /// The loom.prefetch that starts this op's collective one iteration
    /// ahead, or null.
    PrefetchOp getPrefetch();
  }];
}

def Loom_WaitOp : Loom_Op<"wait", [
    TypesMatchWith<"result is the future's value type", "future", "result",
                   "::llvm::cast<FutureType>($_self).getValueType()">]> {
  let summary = "Wait for a started collective and take its value";
  let description = [{
    ```mlir
    %v = loom.wait %f : !loom.future<tensor<8x16xf32>>
    ```
  }];
  let arguments = (ins Loom_FutureType:$future);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
}

def Loom_PrefetchOp : Loom_Op<"prefetch"> {
  let summary = "Start the next iteration's instance of a started collective";
  let description = [{
    In the body of a `loom.repeat`, starts the collective of the
    `loom.start` that made `future` for the next iteration, while this one
    still computes; the first iteration's is started before the loop, and
    the last iteration starts none. The start's own place then issues
    nothing. This lets an FSDP gather of the next layer's weights run
    behind this layer, where a start within the iteration could hide it
    only behind what comes before its wait. Made by
    `loom-overlap-collectives`.

    It must follow the start's first wait in the same block (the runtime
    completes a future before it starts it again), and the collective may
    read only the iteration's stacked slices and values from outside the
    loop (directly or through views), so that the next iteration's operands
    exist now. The memory plan gives the collective's results two
    buffers, used by even and odd iterations, so the next iteration's
    arrive while this one's are read.

    ```mlir
    loom.repeat 6 carried(%x : tensor<4x64xf32>) stacked(%w : tensor<6x16x64xf32>) -> tensor<4x64xf32> {
    ^bb0(%x_i: tensor<4x64xf32>, %w_i: tensor<16x64xf32>):
      %f = loom.start -> !loom.future<tensor<64x64xf32>> {
        %g = loom.all_gather %w_i on @m ["dp"] dim 0 : tensor<16x64xf32> -> tensor<64x64xf32>
        loom.yield %g : tensor<64x64xf32>
      }
      %v = loom.wait %f : !loom.future<tensor<64x64xf32>>
      loom.prefetch %f : !loom.future<tensor<64x64xf32>>
      %y = loom.matmul %x_i, %v : tensor<4x64xf32>, tensor<64x64xf32> -> tensor<4x64xf32>
      loom.yield %y : tensor<4x64xf32>
    }
    ```
  }];
  let arguments = (ins Loom_FutureType:$future);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future))";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The loom.start whose collective this op starts again.
    StartOp getStart();
    /// Whether `op` (a collective, a loom.combined or a loom.start) reads
    /// only values that name the same bytes in every iteration of
    /// `repeat` up to the iteration's stacked slice: values from outside
    /// the loop, stacked slices, and reshapes or shards of them.
    static bool readsIterationInvariants(::mlir::Operation *op,
                                         RepeatOp repeat);
  }];
}

def Loom_CombinedOp : Loom_Op<"combined", [
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "Several collectives of one kind and group, run as one";
  let description = [{
    Its body holds two or more `loom.all_gather`s, `loom.all_reduce`s or
    `loom.reduce_scatter`s of one kind, over the same mesh axes, with the
    same reduction (and, for reductions, the same element type: gathers
    move bits, so theirs may differ), none reading another's result; it
    yields their results in order. Backends pack the members' buffers into
    one, run one collective over it and unpack the results: one latency
    for all of them, where each small collective would pay its own. Made by
    `loom-combine-collectives`; each member keeps its own explanation.

    ```mlir
    %a, %b = loom.combined -> (tensor<8x16xbf16>, tensor<16x4xbf16>) {
      %0 = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
      %1 = loom.all_gather %y on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
      loom.yield %0, %1 : tensor<8x16xbf16>, tensor<16x4xbf16>
    }
    ```
  }];
  let results = (outs Variadic<Loom_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `->` `(` type($results) `)` attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The collectives it runs, in order (every op of the body but the
    /// yield).
    llvm::SmallVector<CollectiveOpInterface> getMembers();
    /// Moves `members` (collectives of one result each) into a new
    /// loom.combined at the builder's place, yielding their results in
    /// order; their other uses are the caller's to redirect.
    static CombinedOp wrap(::mlir::OpBuilder &builder,
                           ::llvm::ArrayRef<::mlir::Operation *> members);
  }];
}

// Sends and receives must pair up across ranks: neither may be removed,
// merged or reordered against another, so both read and write one resource.
def Loom_CommunicationResource : Resource<"::loom::CommunicationResource">;

def Loom_SendOp : Loom_CollectiveOp<"send", [
    MemoryEffects<[MemRead<Loom_CommunicationResource>,
                   MemWrite<Loom_CommunicationResource>]>]> {
  let summary = "Send to the rank `offset` steps along one axis";
  let description = [{
    Point-to-point, for pipeline stage boundaries: the rank at coordinate c
    of `axes` (one axis) sends to coordinate (c + offset) mod size; the
    matching `loom.recv` has the opposite offset.

    ```mlir
    loom.send %x on @m ["pp"] offset 1 : tensor<8x16xbf16>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$offset);
  let assemblyFormat = [{
    $input `on` $mesh $axes `offset` $offset attr-dict `:` type($input)
  }];
}

def Loom_RecvOp : Loom_CollectiveOp<"recv", [
    MemoryEffects<[MemRead<Loom_CommunicationResource>,
                   MemWrite<Loom_CommunicationResource>]>]> {
  let summary = "Receive from the rank `offset` steps along one axis";
  let description = [{
    ```mlir
    %x = loom.recv on @m ["pp"] offset -1 : tensor<8x16xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$offset);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    `on` $mesh $axes `offset` $offset attr-dict `:` type($result)
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

def Loom_YieldOp : Loom_Op<"yield", [Pure, Terminator,
    ParentOneOf<["RepeatOp", "StartOp", "FusedOp", "CombinedOp"]>,
    DeclareOpInterfaceMethods<RegionBranchTerminatorOpInterface,
        ["getMutableSuccessorOperands"]>]> {
  let summary = "Ends one iteration of loom.repeat, or a loom.start, loom.fused or loom.combined body";
  let description = [{
    In `loom.repeat`, yields the next carried values, then the per-iteration
    outputs; in `loom.start`, the collective's result; in `loom.combined`,
    its collectives' results.

    ```mlir
    loom.yield %y : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$values);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, mlir::ValueRange()); }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Fusion groups (the code generation plan)
//===----------------------------------------------------------------------===//

def Loom_FusedOp : Loom_Op<"fused", [IsolatedFromAbove, Pure,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "Element-wise ops over one iteration space, generated as one loop";
  let description = [{
    A fusion group: its body holds element-wise ops (arithmetic, functions,
    casts and scalar constants) whose results all have the shape of the
    group's iteration space, each evaluated once per element of it, and
    optionally one reduction (`sum`, `mean`, `max`) at the end over that
    space. The iteration space is the result's shape, or the reduction's
    input shape. Inputs broadcast to it as in `loom.add`. Every op in the
    body still rounds its result to its own type and the reduction
    accumulates in f32, so fusing changes no value. Made by
    `loom-fuse-elementwise`; every backend emits one loop nest (CPU) or one
    kernel (CUDA) per group.

    ```mlir
    %g = loom.fused(%x, %b : tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<8x16xbf16> {
    ^bb0(%xi: tensor<8x16xbf16>, %bi: tensor<16xbf16>):
      %0 = loom.add %xi, %bi : tensor<8x16xbf16>, tensor<16xbf16> -> tensor<8x16xbf16>
      %1 = loom.gelu %0 approximate tanh : tensor<8x16xbf16>
      loom.yield %1 : tensor<8x16xbf16>
    }
    ```
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs);
  let results = (outs Loom_Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` ($inputs^ `:` type($inputs))? `)` `->` type($result)
    attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
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
