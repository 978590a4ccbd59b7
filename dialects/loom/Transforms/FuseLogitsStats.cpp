//===- FuseLogitsStats.cpp - A cross-entropy's logits, never stored whole -===//
//
// Part of the Loom project.
//
// A language model's logits are its largest tensor, and a cross-entropy
// needs only three numbers per row of them: their maximum, their sum of
// exp(x - max) and the target's logit. loom.logits_stats computes those
// from the product's operands, so that a backend makes the logits a block
// of columns at a time.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMFUSELOGITSSTATS
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct FuseLogitsStatsPass
    : public loom::impl::LoomFuseLogitsStatsBase<FuseLogitsStatsPass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> products;
    getOperation().walk([&](MatmulOp matmul) { products.push_back(matmul); });
    for (MatmulOp matmul : products)
      fuse(matmul);
  }

  /// logits = lhs @ rhs (rhs 2-D, lhs at least 2-D: no broadcast), read
  /// by one loom.softmax_stats and one loom.pick in the same block and by
  /// nothing else.
  void fuse(MatmulOp matmul) {
    Value logits = matmul.getResult();
    auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
    auto rhsType = cast<RankedTensorType>(matmul.getRhs().getType());
    if (lhsType.getRank() < 2 || rhsType.getRank() != 2)
      return;
    SoftmaxStatsOp stats;
    PickOp pick;
    for (Operation *user : logits.getUsers()) {
      if (user->getBlock() != matmul->getBlock())
        return;
      if (auto s = dyn_cast<SoftmaxStatsOp>(user); s && !stats)
        stats = s;
      else if (auto p = dyn_cast<PickOp>(user);
               p && !pick && p.getLogits() == logits)
        pick = p;
      else
        return;
    }
    if (!stats || !pick)
      return;
    // The op takes the place of the earlier of the two, before every user
    // of their results; the targets must be defined there already.
    Operation *first = stats->isBeforeInBlock(pick) ? stats.getOperation()
                                                    : pick.getOperation();
    if (Operation *targets = pick.getTargets().getDefiningOp())
      if (targets->getBlock() == first->getBlock() &&
          !targets->isBeforeInBlock(first))
        return;
    // Its location is the cross-entropy's (the pick's), which errors about
    // targets name.
    OpBuilder builder(first);
    auto fused = LogitsStatsOp::create(
        builder, pick.getLoc(), stats.getMax().getType(),
        stats.getSum().getType(), pick.getType(), matmul.getLhs(),
        matmul.getRhs(), pick.getTargets(),
        TypeAttr::get(
            cast<RankedTensorType>(logits.getType()).getElementType()),
        stats.getPartialAttr(), pick.getMeshAttr(),
        pick.getVocabAxes() ? *pick.getVocabAxes() : ArrayAttr());
    stats.getMax().replaceAllUsesWith(fused.getMax());
    stats.getSum().replaceAllUsesWith(fused.getSum());
    pick.getResult().replaceAllUsesWith(fused.getPicked());
    stats->erase();
    pick->erase();
    matmul->erase();
    ++numFused;
  }
};

} // namespace
