//===- ComposeSlices.cpp - A piece of a piece as a piece of the whole -----===//
//
// Part of the Loom project.
//
// A slice or split of a piece that a slice or split made reads the first
// input directly: each of its results becomes one loom.slice of that input,
// starting at the sum of both starts. Rotary embeddings split q into
// halves, and q itself is a third of one projection: composed, every piece
// is a piece of the projection, which the memory plan can read in place
// through the projection's strides (a part view), where the middle piece,
// read by a split, would have been copied.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCOMPOSESLICES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct ComposeSlicesPass
    : public loom::impl::LoomComposeSlicesBase<ComposeSlicesPass> {
  void runOnOperation() override {
    // In program order, so that a piece's own op has already been composed
    // and reads the first input when its readers are.
    SmallVector<Operation *> parts;
    getOperation().walk([&](Operation *op) {
      if (isa<SliceOp, SplitOp>(op))
        parts.push_back(op);
    });
    for (Operation *op : parts) {
      auto piece = dyn_cast<OpResult>(op->getOperand(0));
      if (!piece || !isa<SliceOp, SplitOp>(piece.getOwner()))
        continue;
      Operation *outer = piece.getOwner();
      SmallVector<int64_t> base = pieceStart(piece);
      Value whole = outer->getOperand(0);
      OpBuilder builder(op);
      for (OpResult result : op->getResults()) {
        if (result.use_empty())
          continue;
        SmallVector<int64_t> start = pieceStart(result), limit;
        ArrayRef<int64_t> shape =
            cast<RankedTensorType>(result.getType()).getShape();
        for (auto [d, size] : llvm::enumerate(shape)) {
          start[d] += base[d];
          limit.push_back(start[d] + size);
        }
        Value composed = SliceOp::create(builder, op->getLoc(), whole,
                                         builder.getDenseI64ArrayAttr(start),
                                         builder.getDenseI64ArrayAttr(limit));
        result.replaceAllUsesWith(composed);
      }
      op->erase();
      ++numComposed;
      if (outer->use_empty())
        outer->erase();
    }
  }
};

} // namespace
