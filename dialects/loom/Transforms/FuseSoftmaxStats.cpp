//===- FuseSoftmaxStats.cpp - One pass for a row's max and sum of exp ----===//
//
// Part of the Loom project.
//
// A logsumexp written out reads its rows twice, for the row maximum and
// for the sum of exp(x - max). loom.softmax_stats computes both in one read
// (the partitioner's cross-entropy makes the op itself).
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMFUSESOFTMAXSTATS
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The only user of `value`, if it has exactly one use.
Operation *soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

/// Whether `op` reduces the last dimension of its input, dropping it.
bool reducesLastDim(Operation *op) {
  auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
  int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  return dims && dims.size() == 1 && dims[0] == rank - 1 &&
         !op->hasAttr("keepdim");
}

bool isF32Tensor(Value value) {
  return getElementTypeOrSelf(value.getType()).isF32();
}

struct FuseSoftmaxStatsPass
    : public loom::impl::LoomFuseSoftmaxStatsBase<FuseSoftmaxStatsPass> {
  void runOnOperation() override {
    SmallVector<MaxOp> maxima;
    getOperation().walk([&](MaxOp max) { maxima.push_back(max); });
    for (MaxOp max : maxima)
      fuse(max);
  }

  /// max(x) -> reshape [..., 1] -> sub(x, ·) -> exp -> sum over the last
  /// dimension, all in one block, the chain after the reshape used by
  /// nothing else; the maximum may have other users (a logsumexp's add).
  void fuse(MaxOp max) {
    Value x = max.getInput();
    if (!reducesLastDim(max) || !isF32Tensor(x) || !isF32Tensor(max))
      return;
    // The maximum with a trailing 1, broadcast along the reduced dimension.
    SmallVector<int64_t> keptShape(max.getType().getShape());
    keptShape.push_back(1);
    ReshapeOp kept;
    for (Operation *user : max->getUsers())
      if (auto reshape = dyn_cast<ReshapeOp>(user))
        if (reshape->getBlock() == max->getBlock() &&
            reshape.getType().getShape() == ArrayRef<int64_t>(keptShape))
          kept = reshape;
    if (!kept)
      return;
    auto shifted = dyn_cast_or_null<SubOp>(soleUser(kept.getResult()));
    if (!shifted || shifted.getLhs() != x || shifted.getRhs() != kept ||
        shifted.getType() != x.getType())
      return;
    auto exps = dyn_cast_or_null<ExpOp>(soleUser(shifted.getResult()));
    if (!exps)
      return;
    auto sum = dyn_cast_or_null<SumOp>(soleUser(exps.getResult()));
    if (!sum || !reducesLastDim(sum) || !isF32Tensor(sum) ||
        sum->getBlock() != max->getBlock())
      return;

    // A widening cast is exact, so the op may read what it widens.
    Value input = x;
    if (auto cast = x.getDefiningOp<CastOp>())
      if (isa<FloatType>(getElementTypeOrSelf(cast.getInput().getType())))
        input = cast.getInput();

    OpBuilder builder(max);
    auto stats = SoftmaxStatsOp::create(builder, max.getLoc(), max.getType(),
                                        sum.getType(), input);
    sum.getResult().replaceAllUsesWith(stats.getSum());
    sum->erase();
    exps->erase();
    shifted->erase();
    kept->erase();
    max.getResult().replaceAllUsesWith(stats.getMax());
    max->erase();
    if (auto cast = x.getDefiningOp<CastOp>())
      if (cast->use_empty())
        cast->erase();
    ++numFused;
  }
};

} // namespace
