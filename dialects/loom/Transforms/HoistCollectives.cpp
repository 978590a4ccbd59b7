//===- HoistCollectives.cpp - Collectives of a transpose's input ----------===//
//
// Part of the Loom project.
//
// A collective reads and writes whole buffers, so a transpose that only a
// collective reads is a copy: the memory plan makes a transpose a view
// only where its readers take permuted strides (contractions, attention).
// Sequence parallelism meets this at every layer: q, k and v, made
// [b, s, h, e] by their projection and transposed to [b, h, s, e], are
// gathered along s for attention. Moving the collective before the
// transpose gathers [b, s, h, e] as it lies, and the transpose after it is
// read by attention through strides: no copy at all.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"
#include "dialects/loom/IR/Sharding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_LOOMHOISTCOLLECTIVES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The names of a collective's attributes that are dimensions of its
/// input: each moves to the input dimension it reads through `perm`. Kinds
/// that copy values element for element to another place of the same
/// shape list none; kinds not listed are left alone.
std::optional<SmallVector<StringRef>> dimensionAttributes(Operation *op) {
  if (isa<AllGatherOp, AllSliceOp, ReduceScatterOp>(op))
    return SmallVector<StringRef>{"dim"};
  if (isa<AllToAllOp>(op))
    return SmallVector<StringRef>{"split_dim", "concat_dim"};
  if (isa<AllReduceOp, CollectivePermuteOp>(op))
    return SmallVector<StringRef>{};
  return std::nullopt;
}

/// `reason` (loom.reason: the reshard the partitioner made the collective
/// for) as of the transpose's input: its layouts' dimensions in the
/// input's order, the value named as that input and its maker as the
/// op that made it.
DictionaryAttr reasonBeforeTranspose(DictionaryAttr reason,
                                     TransposeOp transpose) {
  MLIRContext *context = transpose.getContext();
  ArrayRef<int64_t> perm = transpose.getPerm();
  NamedAttrList entries(reason);
  for (StringRef key : {"from", "to"}) {
    auto layout = dyn_cast_or_null<ShardingAttr>(reason.get(key));
    if (!layout || layout.getDims().size() != perm.size())
      continue;
    SmallVector<DimShardingAttr> dims(layout.getDims());
    for (auto [i, from] : llvm::enumerate(perm))
      dims[from] = layout.getDims()[i];
    entries.set(key, ShardingAttr::get(context, layout.getMesh(), dims,
                                       layout.getPartialAxes(),
                                       layout.getPartialKind()));
  }
  entries.set("value",
              StringAttr::get(context, "the input of loom.transpose at " +
                                           formatSourceLoc(transpose.getLoc())));
  entries.set("producer", StringAttr::get(context, describeProducer(
                                                   transpose.getInput())));
  return entries.getDictionary(context);
}

struct HoistCollectivesPass
    : public loom::impl::LoomHoistCollectivesBase<HoistCollectivesPass> {
  void runOnOperation() override {
    SmallVector<Operation *> collectives;
    getOperation().walk([&](Operation *op) {
      if (dimensionAttributes(op) &&
          !isa<StartOp, CombinedOp>(op->getParentOp()))
        collectives.push_back(op);
    });
    for (Operation *collective : collectives) {
      auto transpose = collective->getOperand(0).getDefiningOp<TransposeOp>();
      // A transpose with other readers is made anyway; gathering its input
      // too would only add a collective.
      if (!transpose || !transpose->hasOneUse())
        continue;
      ArrayRef<int64_t> perm = transpose.getPerm();
      // The moved transpose must be a view, or it would copy the
      // collective's result, which an all_gather makes n times larger.
      auto type = cast<RankedTensorType>(collective->getResult(0).getType());
      SmallVector<int64_t> shape(type.getRank());
      for (auto [i, from] : llvm::enumerate(perm))
        shape[from] = type.getDimSize(i);
      if (!readersTakeTransposeOf(collective->getResult(0), perm))
        continue;
      OpBuilder builder(collective);
      IRMapping inputOf;
      inputOf.map(transpose.getResult(), transpose.getInput());
      Operation *moved = builder.clone(*collective, inputOf);
      SmallVector<StringRef> dimensions = *dimensionAttributes(collective);
      for (StringRef name : dimensions) {
        int64_t dim = collective->getAttrOfType<IntegerAttr>(name).getInt();
        moved->setAttr(name, builder.getI64IntegerAttr(perm[dim]));
      }
      moved->getResult(0).setType(type.clone(shape));
      if (auto reason = moved->getAttrOfType<DictionaryAttr>(
              LoomDialect::kReasonAttrName))
        moved->setAttr(LoomDialect::kReasonAttrName,
                       reasonBeforeTranspose(reason, transpose));
      // The transpose, a view, goes just before its first reader, so that
      // loom-combine-collectives sees the collective's result first read
      // there, as it was, and can still join it with others.
      Operation *firstReader = nullptr;
      for (Operation *user : collective->getResult(0).getUsers())
        if (Operation *inBlock =
                collective->getBlock()->findAncestorOpInBlock(*user))
          if (!firstReader || inBlock->isBeforeInBlock(firstReader))
            firstReader = inBlock;
      if (firstReader)
        builder.setInsertionPoint(firstReader);
      Value after = TransposeOp::create(builder, transpose.getLoc(), type,
                                        moved->getResult(0), perm);
      collective->getResult(0).replaceAllUsesWith(after);
      collective->erase();
      transpose->erase();
      ++numHoisted;
    }
  }
};

} // namespace
