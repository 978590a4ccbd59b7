//===- CombineCollectives.cpp - Independent collectives as one ------------===//
//
// Part of the Loom project.
//
// A collective's time is a latency plus its bytes over the bandwidth; for
// the small ones of a program (FSDP's gathers of a layer's norms and
// weights, a loss's per-token sums) the latency is most of it. Collectives
// of one kind over one group that do not depend on each other can share
// one: the backend packs their buffers and runs a single collective.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCOMBINECOLLECTIVES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

bool isCombinable(Operation *op) {
  return isa<AllGatherOp, AllReduceOp, ReduceScatterOp>(op) &&
         !isa<StartOp, CombinedOp>(op->getParentOp());
}

/// What members of one loom.combined share.
struct Key {
  OperationName name;
  Attribute mesh, axes;
  std::optional<ReductionKind> reduction;
  Type elementType;
  bool operator==(const Key &other) const {
    return name == other.name && mesh == other.mesh && axes == other.axes &&
           reduction == other.reduction && elementType == other.elementType;
  }
};

Key keyOf(Operation *op) {
  auto collective = cast<CollectiveOpInterface>(op);
  // Gathers move bits: f32 norms and bf16 weights gather together.
  Type elementType = isa<AllGatherOp>(op)
                         ? Type()
                         : getElementTypeOrSelf(op->getOperand(0).getType());
  return {op->getName(), collective.getMeshRef(), op->getAttr("axes"),
          collective.getReductionKind(), elementType};
}

struct Group {
  Key key;
  SmallVector<Operation *> members;
  /// The last op of the block that makes a member's operand (-1: none),
  /// and the first that reads a member's result: the group goes just
  /// before the latter, which must come after the former.
  int64_t ready = -1, firstReader = 0;
  int64_t bytes = 0;
};

struct CombineCollectivesPass
    : public loom::impl::LoomCombineCollectivesBase<CombineCollectivesPass> {
  using LoomCombineCollectivesBase::LoomCombineCollectivesBase;

  void runOnOperation() override {
    if (maxBytes <= 0)
      return;
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      Operation *parent = block->getParentOp();
      if (!isa<FusedOp, StartOp, CombinedOp>(parent))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      combineIn(*block);
  }

  void combineIn(Block &block) {
    llvm::DenseMap<Operation *, int64_t> index;
    SmallVector<Operation *> ops;
    for (Operation &op : block) {
      index[&op] = int64_t(ops.size());
      ops.push_back(&op);
    }
    // Moving a collective that feeds or reads another collective could
    // put one after the other's new place; such pairs stay where they are,
    // so that every op a group is placed by keeps its own place.
    auto feedsOrReadsCollective = [&](Operation *op) {
      Operation *writer = op->getOperand(0).getDefiningOp();
      if (writer && isa<CollectiveOpInterface>(writer))
        return true;
      return llvm::any_of(op->getResult(0).getUsers(), [](Operation *user) {
        return isa<CollectiveOpInterface>(user);
      });
    };

    SmallVector<Group> groups;
    for (Operation *op : ops) {
      if (!isCombinable(op) || op->getResult(0).use_empty() ||
          feedsOrReadsCollective(op))
        continue;
      int64_t ready = -1;
      if (Operation *writer = op->getOperand(0).getDefiningOp())
        if (Operation *inBlock = block.findAncestorOpInBlock(*writer))
          ready = index.lookup(inBlock);
      int64_t firstReader = int64_t(ops.size());
      for (Operation *user : op->getResult(0).getUsers())
        if (Operation *inBlock = block.findAncestorOpInBlock(*user))
          firstReader = std::min(firstReader, index.lookup(inBlock));
      int64_t bytes = std::max(tensorBytes(op->getOperand(0).getType()),
                               tensorBytes(op->getResult(0).getType()));
      Key key = keyOf(op);
      Group *joined = nullptr;
      for (Group &group : groups)
        if (group.key == key &&
            std::max(group.ready, ready) <
                std::min(group.firstReader, firstReader) &&
            group.bytes + bytes <= maxBytes) {
          joined = &group;
          break;
        }
      if (!joined) {
        groups.push_back({key, {}, ready, firstReader, 0});
        joined = &groups.back();
      }
      joined->members.push_back(op);
      joined->ready = std::max(joined->ready, ready);
      joined->firstReader = std::min(joined->firstReader, firstReader);
      joined->bytes += bytes;
    }
    for (Group &group : groups)
      if (group.members.size() > 1 && group.firstReader < int64_t(ops.size()))
        materialize(group, ops[group.firstReader]);
  }

  void materialize(Group &group, Operation *firstReader) {
    OpBuilder builder(firstReader);
    auto combined = CombinedOp::wrap(builder, group.members);
    Operation *yield = combined.getBody().front().getTerminator();
    for (auto [result, member] :
         llvm::zip(combined.getResults(), group.members))
      member->getResult(0).replaceAllUsesExcept(result, yield);
    numCombined += group.members.size();
    ++numGroups;
  }
};

} // namespace
