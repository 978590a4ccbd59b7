//===- OverlapCollectives.cpp - Start collectives early, wait late --------===//
//
// Part of the Loom project.
//
// A collective waited for where it stands stalls the rank for its whole
// time. Started as soon as its operands exist and waited for only where its
// result is first read, it runs while the kernels in between compute: a
// gather of the output projection's weights behind every layer, a gather
// of the next weights behind this norm.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace loom {
#define GEN_PASS_DEF_LOOMOVERLAPCOLLECTIVES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The kinds a backend can start (StartOp's verifier).
bool isStartable(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, CombinedOp>(op) &&
         !isa<StartOp, CombinedOp>(op->getParentOp());
}

/// Whether `op` issues communication: a collective, or an op holding one
/// (a loop of layers).
bool issuesCollectives(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isa<CollectiveOpInterface>(nested) ? WalkResult::interrupt()
                                                  : WalkResult::advance();
      })
      .wasInterrupted();
}

struct OverlapCollectivesPass
    : public loom::impl::LoomOverlapCollectivesBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      if (!isa<FusedOp, StartOp, CombinedOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    for (Block *block : blocks) {
      overlapIn(*block);
      prefetchIn(*block);
    }
  }

  /// In a loom.repeat's body, the collectives that read only stacked
  /// slices and values from outside the loop (the gathers of FSDP's
  /// weights) are started one iteration ahead: a loom.prefetch goes after
  /// each one's wait, as early as the iteration's other communication
  /// allows (`mustFollow`), so that the rest of the iteration, to the next
  /// iteration's wait, hides it. Where nothing would run after the
  /// prefetch, that collective is left as it is.
  void prefetchIn(Block &block) {
    auto repeat = dyn_cast<RepeatOp>(block.getParentOp());
    if (!repeat || repeat.getCount() < 2)
      return;
    SmallVector<Operation *> prefetched, others;
    for (Operation &op : block) {
      if (!issuesCollectives(&op))
        continue;
      auto start = dyn_cast<StartOp>(op);
      if ((start || isStartable(&op)) &&
          PrefetchOp::readsIterationInvariants(&op, repeat) &&
          (start ? firstWaitOf(block, start) : firstReaderOfAny(block, &op)))
        prefetched.push_back(&op);
      else
        others.push_back(&op);
    }
    for (Operation *op : prefetched) {
      auto start = dyn_cast<StartOp>(op);
      // A bare collective's wait will stand just before its first reader.
      Operation *at = start ? firstWaitOf(block, start)->getNextNode()
                            : firstReaderOfAny(block, op);
      for (Operation *other : others)
        if (mustFollow(other, op) && !other->isBeforeInBlock(at))
          at = other->getNextNode();
      while (isa<WaitOp>(at))
        at = at->getNextNode();
      int64_t hidden = 0;
      for (Operation *after = at; after; after = after->getNextNode())
        hidden += isComputation(after);
      if (hidden == 0)
        continue;
      if (!start)
        start = wrapInStart(op, op, firstReaderOfAny(block, op));
      OpBuilder builder(at);
      PrefetchOp::create(builder, op->getLoc(), start.getFutures().front());
      ++numPrefetched;
      numHidden += hidden;
    }
  }

  /// Whether a start or prefetch of `started` must come after `other`, an
  /// earlier communicating op of the same block that is not prefetched.
  /// Started collectives share one communication stream, where one issued
  /// later waits behind the start, and a communicator runs its operations
  /// in the order they are issued, so a collective over an axis of the
  /// start would wait for it too: the start passes neither. It passes the
  /// blocking collectives over other axes, which run on the compute stream
  /// over other communicators, beside it (a layer's tensor-parallel ones
  /// beside the next layer's FSDP gathers).
  static bool mustFollow(Operation *other, Operation *started) {
    llvm::SmallSetVector<StringRef, 4> axes = axesOf(started);
    return other
        ->walk([&](Operation *nested) {
          if (isa<StartOp>(nested))
            return WalkResult::interrupt();
          // An all_slice keeps a piece of what the rank holds: it sends
          // nothing and uses no communicator.
          auto collective = dyn_cast<CollectiveOpInterface>(nested);
          if (collective && !isa<AllSliceOp>(nested) &&
              llvm::any_of(collective.getGroupAxes(),
                           [&](StringRef axis) { return axes.contains(axis); }))
            return WalkResult::interrupt();
          return WalkResult::advance();
        })
        .wasInterrupted();
  }

  /// The mesh axes that the collectives in `op` communicate over.
  static llvm::SmallSetVector<StringRef, 4> axesOf(Operation *op) {
    llvm::SmallSetVector<StringRef, 4> axes;
    op->walk([&](CollectiveOpInterface collective) {
      for (StringRef axis : collective.getGroupAxes())
        axes.insert(axis);
    });
    return axes;
  }

  /// The first loom.wait of `start`'s futures in the block.
  static Operation *firstWaitOf(Block &block, StartOp start) {
    Operation *first = nullptr;
    for (Value future : start.getFutures()) {
      Operation *reader = firstReaderOf(block, future);
      if (reader && (!first || reader->isBeforeInBlock(first)))
        first = reader;
    }
    return first;
  }

  /// The first op of the block that reads any result of `op` (null: none).
  static Operation *firstReaderOfAny(Block &block, Operation *op) {
    Operation *first = nullptr;
    for (Value result : op->getResults()) {
      Operation *reader = firstReaderOf(block, result);
      if (reader && (!first || reader->isBeforeInBlock(first)))
        first = reader;
    }
    return first;
  }

  void overlapIn(Block &block) {
    SmallVector<Operation *> candidates;
    for (Operation &op : block)
      if (isStartable(&op))
        candidates.push_back(&op);
    for (Operation *op : candidates) {
      auto combined = dyn_cast<CombinedOp>(op);
      for (Operation *part : combined ? splitByNeed(block, combined)
                                      : SmallVector<Operation *>{op})
        startEarly(block, part);
    }
  }

  /// The first op of the block that reads `value` (null: none).
  static Operation *firstReaderOf(Block &block, Value value) {
    Operation *first = nullptr;
    for (Operation *user : value.getUsers()) {
      Operation *inBlock = block.findAncestorOpInBlock(*user);
      if (inBlock && (!first || inBlock->isBeforeInBlock(first)))
        first = inBlock;
    }
    return first;
  }

  /// A loom.combined is waited for as a whole, where its first member is
  /// read. When others are read only later (a layer's MLP weights, gathered
  /// with its attention's), those become a collective of their own just
  /// after it, which can be waited for where the first of them is read;
  /// the members read first stay. Returns what is left, in order.
  SmallVector<Operation *> splitByNeed(Block &block, CombinedOp combined) {
    SmallVector<Operation *> readers;
    Operation *first = nullptr;
    for (Value result : combined.getResults()) {
      readers.push_back(firstReaderOf(block, result));
      if (readers.back() && (!first || readers.back()->isBeforeInBlock(first)))
        first = readers.back();
    }
    SmallVector<unsigned> now, later;
    Operation *firstLater = nullptr;
    for (auto [index, reader] : llvm::enumerate(readers)) {
      (reader && reader != first ? later : now).push_back(index);
      if (reader && reader != first &&
          (!firstLater || reader->isBeforeInBlock(firstLater)))
        firstLater = reader;
    }
    if (!first || later.empty())
      return {combined};
    // A split costs a call; it pays only with work to hide the later
    // members behind.
    bool hides = false;
    for (Operation *at = combined->getNextNode(); at != firstLater;
         at = at->getNextNode())
      hides |= isComputation(at);
    if (!hides)
      return {combined};
    OpBuilder builder(combined);
    Operation *kept = regroup(builder, combined, now);
    Operation *split = regroup(builder, combined, later);
    combined.erase();
    ++numSplit;
    return {kept, split};
  }

  /// The members `which` of `combined` as one op at the builder's place:
  /// the member itself, or a loom.combined of them; their uses follow.
  Operation *regroup(OpBuilder &builder, CombinedOp combined,
                     ArrayRef<unsigned> which) {
    Operation *yield = combined.getBody().front().getTerminator();
    SmallVector<Operation *> members;
    for (unsigned index : which)
      members.push_back(yield->getOperand(index).getDefiningOp());
    if (members.size() == 1) {
      members.front()->moveBefore(builder.getInsertionBlock(),
                                  builder.getInsertionPoint());
      combined.getResult(which.front())
          .replaceAllUsesWith(members.front()->getResult(0));
      return members.front();
    }
    auto group = CombinedOp::wrap(builder, members);
    for (auto [index, result] : llvm::zip(which, group.getResults()))
      combined.getResult(index).replaceAllUsesWith(result);
    return group;
  }

  /// Starts `op` just after the last op of the block that makes one of its
  /// operands, but never before an earlier collective that would then wait
  /// behind it (`mustFollow`), and waits for its results just before the
  /// first op that reads one; leaves it alone when no work would run in
  /// between.
  void startEarly(Block &block, Operation *op) {
    // The op of the block after which the start goes (null: the start of
    // the block).
    Operation *after = nullptr;
    auto later = [&](Operation *candidate) {
      if (candidate && (!after || after->isBeforeInBlock(candidate)))
        after = candidate;
    };
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *writer = operand.getDefiningOp();
        if (writer && !op->isAncestor(writer))
          later(block.findAncestorOpInBlock(*writer));
      }
    });
    for (Operation *earlier = op->getPrevNode(); earlier;
         earlier = earlier->getPrevNode())
      if (mustFollow(earlier, op)) {
        later(earlier);
        break;
      }

    // The first reader of any result in the block: backends complete a
    // started op as a whole, so every result is waited for there.
    Operation *firstReader = firstReaderOfAny(block, op);
    if (!firstReader)
      return; // nothing reads it

    // Work from the start's place to the wait hides the collective.
    Operation *from = after ? after->getNextNode() : &block.front();
    int64_t hidden = 0;
    for (Operation *at = from; at != firstReader; at = at->getNextNode())
      if (at != op && isComputation(at))
        ++hidden;
    if (hidden == 0)
      return;

    wrapInStart(op, from, firstReader);
    numHidden += hidden;
  }

  /// Moves `op` into a loom.start placed before `startAt`, and its results'
  /// readers to loom.waits placed before `firstReader`.
  StartOp wrapInStart(Operation *op, Operation *startAt,
                      Operation *firstReader) {
    OpBuilder builder(startAt);
    SmallVector<Type> futureTypes;
    for (Value result : op->getResults())
      futureTypes.push_back(FutureType::get(
          op->getContext(), cast<RankedTensorType>(result.getType())));
    auto start = StartOp::create(builder, op->getLoc(), futureTypes);
    Block *body = builder.createBlock(&start.getBody());
    op->moveBefore(body, body->end());
    builder.setInsertionPointToEnd(body);
    auto yield = YieldOp::create(builder, op->getLoc(), op->getResults());
    builder.setInsertionPoint(firstReader);
    for (auto [result, future] :
         llvm::zip(op->getResults(), start.getFutures())) {
      auto wait =
          WaitOp::create(builder, op->getLoc(), result.getType(), future);
      result.replaceAllUsesExcept(wait.getResult(), yield);
    }
    ++numStarted;
    return start;
  }
};

} // namespace
