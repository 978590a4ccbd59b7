//===- SplitToSlices.cpp - A split's pieces, each read in place or not ----===//
//
// Part of the Loom project.
//
// The memory plan reads a split in place only where every piece can be
// (Views.h): one piece that a collective or a cross-entropy reads makes it
// copy them all. q, k and v split from one projection under sequence
// parallelism are such a split: q and k normalised in place, v gathered
// along the sequence. As one slice each, the pieces are judged one by one,
// and only v is copied. The code is the same either way, one copy a piece
// (loomrt_extract for a split's, loomrt_slice for a slice's), so nothing
// is lost where the slices are copies too.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMSPLITTOSLICES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct SplitToSlicesPass
    : public loom::impl::LoomSplitToSlicesBase<SplitToSlicesPass> {
  void runOnOperation() override {
    SmallVector<SplitOp> splits;
    getOperation().walk([&](SplitOp split) { splits.push_back(split); });
    for (SplitOp split : splits) {
      if (isPartView(split))
        continue;
      OpBuilder builder(split);
      SmallVector<std::pair<OpResult, SliceOp>> pieces;
      for (OpResult piece : split->getResults()) {
        if (piece.use_empty())
          continue;
        SmallVector<int64_t> start = pieceStart(piece), limit;
        for (auto [from, size] : llvm::zip(
                 start, cast<RankedTensorType>(piece.getType()).getShape()))
          limit.push_back(from + size);
        auto slice = SliceOp::create(builder, split.getLoc(), split.getInput(),
                                     builder.getDenseI64ArrayAttr(start),
                                     builder.getDenseI64ArrayAttr(limit));
        piece.replaceAllUsesWith(slice.getResult());
        pieces.push_back({piece, slice});
      }
      // Where no piece gains, the split stays as it was.
      if (llvm::none_of(pieces, [](auto &pair) {
            return isPartView(pair.second);
          })) {
        for (auto [piece, slice] : pieces) {
          slice.getResult().replaceAllUsesWith(piece);
          slice->erase();
        }
        continue;
      }
      split->erase();
      ++numSplit;
    }
  }
};

} // namespace
