//===- PlanMemory.cpp - Static per-rank memory plan -----------------------===//
//
// Part of the Loom project.
//
// The second half of the code generation plan: one arena per rank, with
// every buffer at a static offset chosen by first fit over live ranges, so
// a step allocates nothing and both backends share the same layout.
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace loom {
#define GEN_PASS_DEF_LOOMPLANMEMORY
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

constexpr int64_t kAlignment = LoomDialect::kArenaAlignment;

int64_t bytesOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * bits / 8;
}

struct Buffer {
  Value value;
  int64_t bytes = 0, first = 0, last = 0, offset = -1;
};

struct PlanMemoryPass : public loom::impl::LoomPlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func->hasAttr(LoomDialect::kModelAttrName) && !func.isExternal())
        plan(func);
  }

  void plan(func::FuncOp func) {
    // Number the ops in program order; an op's span ends at its last nested
    // op, so a use by a loop keeps the value alive through every iteration.
    llvm::DenseMap<Operation *, int64_t> index, spanEnd;
    int64_t counter = 0;
    std::function<void(Block &)> number = [&](Block &block) {
      for (Operation &op : block) {
        index[&op] = counter++;
        if (!isa<FusedOp>(op))
          for (Region &region : op.getRegions())
            for (Block &inner : region)
              number(inner);
        spanEnd[&op] = counter - 1;
      }
    };
    number(func.getBody().front());
    int64_t end = counter;

    auto root = [](Value value) {
      while (Value viewed = viewedValue(value))
        value = viewed;
      return value;
    };
    // The buffers, in order of definition.
    llvm::MapVector<Value, Buffer> buffers;
    auto defineBuffer = [&](Value value, int64_t first) {
      Buffer &buffer = buffers[value];
      buffer.value = value;
      buffer.bytes = bytesOf(value.getType());
      buffer.first = buffer.last = first;
    };
    for (BlockArgument argument : func.getArguments()) {
      defineBuffer(argument, -1);
      buffers[argument].last = end; // parameters and inputs live throughout
    }
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op->getParentOp()))
        return WalkResult::skip();
      for (OpResult result : op->getResults())
        if (!viewedValue(result))
          defineBuffer(result, index[op]);
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    // Extend each buffer to its last use through views. A use by an op nested
    // deeper than the value's definition counts at the end of the outermost
    // such ancestor (the loop around the use).
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op->getParentOp()))
        return WalkResult::skip();
      for (Value operand : op->getOperands()) {
        Value storage = root(operand);
        auto found = buffers.find(storage);
        if (found == buffers.end())
          continue;
        // Uses inside a loop that the storage is defined outside of count
        // at the end of that loop.
        Block *defBlock = storage.getParentBlock();
        Operation *user = op;
        while (user->getBlock() != defBlock && user->getParentOp() &&
               user->getParentOp() != func.getOperation())
          user = user->getParentOp();
        found->second.last = std::max(found->second.last, spanEnd[user]);
      }
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    // A repeat's buffers are written when it starts and read by its body, so
    // they live through its whole span.
    func.walk([&](RepeatOp repeat) {
      for (OpResult result : repeat.getResults())
        buffers[result].last = std::max(buffers[result].last, spanEnd[repeat]);
    });

    // First fit, in order of definition, among buffers still alive.
    SmallVector<Buffer *> live;
    int64_t peak = 0;
    for (auto &entry : buffers) {
      Buffer &buffer = entry.second;
      llvm::erase_if(live,
                     [&](Buffer *other) { return other->last < buffer.first; });
      llvm::sort(live,
                 [](Buffer *a, Buffer *b) { return a->offset < b->offset; });
      int64_t size = (buffer.bytes + kAlignment - 1) / kAlignment * kAlignment;
      int64_t offset = 0;
      for (Buffer *other : live) {
        int64_t otherEnd = other->offset + (other->bytes + kAlignment - 1) /
                                               kAlignment * kAlignment;
        if (offset + size <= other->offset)
          break;
        offset = std::max(offset, otherEnd);
      }
      buffer.offset = offset;
      peak = std::max(peak, offset + size);
      live.push_back(&buffer);
    }

    Builder builder(func.getContext());
    for (BlockArgument argument : func.getArguments())
      func.setArgAttr(argument.getArgNumber(), LoomDialect::kOffsetAttrName,
                      builder.getI64IntegerAttr(buffers[argument].offset));
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op->getParentOp()))
        return WalkResult::skip();
      if (op->getNumResults()) {
        SmallVector<int64_t> offsets;
        for (OpResult result : op->getResults()) {
          auto found = buffers.find(result);
          offsets.push_back(found == buffers.end() ? -1 : found->second.offset);
        }
        op->setAttr(LoomDialect::kOffsetsAttrName,
                    builder.getDenseI64ArrayAttr(offsets));
      }
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    func->setAttr(LoomDialect::kArenaBytesAttrName,
                  builder.getI64IntegerAttr(peak));
    arenaBytes = std::max<uint64_t>(arenaBytes, uint64_t(peak));
  }
};

} // namespace
