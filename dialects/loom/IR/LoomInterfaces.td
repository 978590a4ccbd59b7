//===- LoomInterfaces.td - Loom op interfaces --------------*- tablegen -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INTERFACES_TD
#define LOOM_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Loom_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    Describes how an op's operand and result dimensions may be sharded, as
    factors of kinds pass-through, linear reduction, non-linear reduction,
    gather-index or need-replication (see ShardingRule.h). Every compute op
    implements it; `loom-opt --loom-print-sharding-rules` shows the rules.
  }];
  let methods = [
    InterfaceMethod<[{
        Returns the op's sharding rule for its current operand and result
        types.
      }],
      "::loom::ShardingRule", "getShardingRule", (ins)>,
  ];
}

def Loom_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    A collective over some axes of a mesh, on per-device (local) tensors.
    Says which mesh and axes it runs over, how it reduces (if it does), and
    how many bytes each rank sends, by DESIGN.md's formulas with S measured
    within the axis group: all-reduce 2(n-1)/n S (S the per-rank buffer),
    all-gather (n-1)/n S (S the gathered output), reduce-scatter (n-1)/n S
    (S the input), all-to-all (n-1)/n S (S the per-rank buffer), broadcast,
    send, recv and collective-permute S, all-slice 0.
  }];
  let methods = [
    InterfaceMethod<"The mesh the collective runs on.",
      "::mlir::FlatSymbolRefAttr", "getMeshRef", (ins),
      [{ return $_op.getMeshAttr(); }]>,
    InterfaceMethod<"The mesh axes of its groups, major to minor.",
      "::llvm::SmallVector<::llvm::StringRef>", "getGroupAxes", (ins),
      [{
        return llvm::to_vector(
            $_op.getAxes().template getAsValueRange<::mlir::StringAttr>());
      }]>,
    InterfaceMethod<"How it reduces, for reducing collectives.",
      "std::optional<::loom::ReductionKind>", "getReductionKind", (ins),
      /*methodBody=*/[{}], /*defaultImplementation=*/[{ return std::nullopt; }]>,
    InterfaceMethod<[{
        Bytes each rank sends, given the number of ranks n in a group.
      }],
      "double", "getBytesPerRank", (ins "int64_t":$groupSize)>,
  ];
}

#endif // LOOM_INTERFACES_TD
