//===- FuseAddNorm.cpp - A residual sum and the norm that reads it --------===//
//
// Part of the Loom project.
//
// A pre-norm transformer layer adds a block's output to the residual
// stream and normalises the sum at once: `x = x + attention(h)` then
// `layernorm(x)`. As two kernels the sum is written and read straight
// back (GPT-2 small: 12.6 MB a layer) and the norm waits for a launch of
// its own; loom.add_norm reads the addends once and writes both results.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace loom {
#define GEN_PASS_DEF_LOOMFUSEADDNORM
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct FuseAddNormPass
    : public loom::impl::LoomFuseAddNormBase<FuseAddNormPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    DominanceInfo dominance(getOperation());
    for (AddOp add : adds)
      fuse(add, dominance);
  }

  /// sum = lhs + rhs with one type and shape throughout (no broadcast, no
  /// promotion), normalised by a layernorm or rmsnorm of its block whose
  /// scale and bias exist where the sum is made.
  void fuse(AddOp add, DominanceInfo &dominance) {
    Value sum = add.getResult();
    Type type = sum.getType();
    if (add.getLhs().getType() != type || add.getRhs().getType() != type ||
        !isa<FloatType>(cast<RankedTensorType>(type).getElementType()))
      return;
    Operation *norm = nullptr;
    for (Operation *user : sum.getUsers())
      if (isa<LayerNormOp, RMSNormOp>(user) && user->getOperand(0) == sum &&
          user->getBlock() == add->getBlock() &&
          user->getResult(0).getType() == type) {
        norm = user;
        break;
      }
    if (!norm)
      return;
    for (Value operand : norm->getOperands().drop_front())
      if (!dominance.properlyDominates(operand, add))
        return;
    bool rms = isa<RMSNormOp>(norm);
    FloatAttr eps = rms ? cast<RMSNormOp>(norm).getEpsAttr()
                        : cast<LayerNormOp>(norm).getEpsAttr();
    OpBuilder builder(add);
    auto fused = AddNormOp::create(
        builder, builder.getFusedLoc({add.getLoc(), norm->getLoc()}), type,
        type, add.getLhs(), add.getRhs(), norm->getOperand(1),
        rms ? Value() : norm->getOperand(2), eps,
        rms ? builder.getUnitAttr() : UnitAttr());
    sum.replaceAllUsesWith(fused.getSum());
    norm->getResult(0).replaceAllUsesWith(fused.getResult());
    norm->erase();
    add->erase();
    ++numFused;
  }
};

} // namespace
