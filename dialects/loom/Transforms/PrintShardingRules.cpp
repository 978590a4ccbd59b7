//===- PrintShardingRules.cpp - Report each op's sharding rule ------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "loom-print-sharding-rules"

namespace loom {
#define GEN_PASS_DEF_LOOMPRINTSHARDINGRULES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
struct PrintShardingRulesPass
    : public loom::impl::LoomPrintShardingRulesBase<PrintShardingRulesPass> {
  using LoomPrintShardingRulesBase::LoomPrintShardingRulesBase;

  void runOnOperation() override {
    WalkResult result =
        getOperation()->walk([&](ShardingRuleOpInterface op) -> WalkResult {
          ShardingRule rule = op.getShardingRule();
          if (failed(rule.verify(op)))
            return WalkResult::interrupt();
          std::string text;
          llvm::raw_string_ostream os(text);
          rule.print(os);
          op->emitRemark("sharding rule ") << text;
          ++numRules;
          return WalkResult::advance();
        });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
