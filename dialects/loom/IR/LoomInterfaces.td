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

#endif // LOOM_INTERFACES_TD
