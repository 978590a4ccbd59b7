//===- LoomDialect.td - Loom dialect definition ------------*- tablegen -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_TD
#define LOOM_DIALECT_TD

include "mlir/IR/OpBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::loom";
  let summary = "Global tensor programs with device meshes and shardings";
  let description = [{
    The Loom dialect holds one global (unpartitioned) tensor program per
    model. Types are static-shape tensors with global shapes; how a value is
    laid out over the devices of a mesh is a `#loom.sharding` attribute on
    the value's defining op (`loom.sharding`, one entry per result) or on the
    function argument/result (`loom.sharding`). Compute ops are pure and have
    value semantics. Parameters are arguments of the model function carrying
    `loom.param` (their checkpoint name) and `loom.init`.

    ```mlir
    loom.mesh @mesh ["dp" = 2, "tp" = 4]
    func.func @MLP(%x: tensor<8x16xf32> {loom.input = "x", loom.sharding =
                   #loom.sharding<@mesh, [{"dp"}, {"tp"} ]> }) -> tensor<8x16xf32>
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Discardable attribute names used on ops and function arguments.
    static constexpr llvm::StringLiteral kShardingAttrName = "loom.sharding";
    static constexpr llvm::StringLiteral kParamAttrName = "loom.param";
    static constexpr llvm::StringLiteral kInitAttrName = "loom.init";
    static constexpr llvm::StringLiteral kInputAttrName = "loom.input";
    static constexpr llvm::StringLiteral kOutputAttrName = "loom.output";
    static constexpr llvm::StringLiteral kModelAttrName = "loom.model";
    /// The memory plan (loom-plan-memory): arena offsets of function
    /// arguments and op results (-1 for views), and the arena's size.
    static constexpr llvm::StringLiteral kOffsetAttrName = "loom.offset";
    static constexpr llvm::StringLiteral kOffsetsAttrName = "loom.offsets";
    static constexpr llvm::StringLiteral kArenaBytesAttrName = "loom.arena_bytes";
    /// On a planned function: the most bytes of its buffers alive at one op
    /// (each aligned), which no placement of them can go below.
    static constexpr llvm::StringLiteral kArenaBoundAttrName = "loom.arena_bound";
    /// On `loom.repeat`: where the moves that end an iteration park one
    /// carried value when carried values trade places (carriedMoves).
    static constexpr llvm::StringLiteral kScratchOffsetAttrName =
        "loom.scratch_offset";
    /// Every planned offset is a multiple of this, and libloomrt's arenas
    /// start at least this aligned, so generated code may rely on it.
    static constexpr int64_t kArenaAlignment = 64;
    /// On `loom.repeat`: the sharding of each body argument.
    static constexpr llvm::StringLiteral kBodyShardingsAttrName =
        "loom.body_shardings";
    /// On inserted collectives and reshards: why they exist.
    static constexpr llvm::StringLiteral kReasonAttrName = "loom.reason";
    /// On a partitioned model: types are per device, and argument and result
    /// shardings say which piece of the global value each device holds.
    static constexpr llvm::StringLiteral kSpmdAttrName = "loom.spmd";

  private:
    void registerAttributes();
    void registerTypes();
  public:
  }];
}

class Loom_Op<string mnemonic, list<Trait> traits = []>
    : Op<Loom_Dialect, mnemonic, traits>;

#endif // LOOM_DIALECT_TD
