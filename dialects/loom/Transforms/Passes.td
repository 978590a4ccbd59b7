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

#endif // LOOM_TRANSFORMS_PASSES_TD
