//===- PlanMemory.cpp - Static per-rank memory plan -----------------------===//
//
// Part of the Loom project.
//
// The second half of the code generation plan: one arena per rank, with
// every buffer at a static offset chosen by first fit over live ranges, so
// a step allocates nothing and both backends share the same layout.
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/TypeInference.h"
#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/Support/MathExtras.h"

namespace loom {
#define GEN_PASS_DEF_LOOMPLANMEMORY
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

constexpr int64_t kAlignment = LoomDialect::kArenaAlignment;

struct Buffer {
  Value value;
  int64_t bytes = 0, first = 0, last = 0, offset = -1;
};

struct PlanMemoryPass : public loom::impl::LoomPlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    sharedWith.clear();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func->hasAttr(LoomDialect::kModelAttrName) && !func.isExternal()) {
        if (failed(checkSizes(func)))
          return signalPassFailure();
        planSmaller(func);
      }
  }

  /// Every buffer has a size in bytes, and all of them together fit an
  /// int64_t, so that no offset of the plan can overflow.
  LogicalResult checkSizes(func::FuncOp func) {
    int64_t total = 0;
    auto add = [&](Value value, Operation *at) -> LogicalResult {
      if (!isStaticNumericTensor(value.getType()))
        return at->emitError()
               << "loom-plan-memory: cannot place a value of type "
               << value.getType()
               << " in the arena: only statically shaped tensors of integers "
                  "or floats have a size";
      auto tensor = cast<RankedTensorType>(value.getType());
      int64_t bits = tensor.getElementType().getIntOrFloatBitWidth(), bytes;
      if (llvm::MulOverflow(tensor.getNumElements(), (bits + 7) / 8, bytes) ||
          llvm::AddOverflow(total, bytes + kAlignment, total))
        return at->emitError() << "loom-plan-memory: the buffers of this "
                                  "function add up to more than 2^63 - 1 "
                                  "bytes";
      return success();
    };
    for (BlockArgument argument : func.getArguments())
      if (failed(add(argument, func)))
        return failure();
    WalkResult walked = func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op->getParentOp()))
        return WalkResult::skip();
      for (OpResult result : op->getResults())
        if (!viewedValue(result) &&
            (failed(add(result, op)) ||
             (prefetchedStartOf(op) && failed(add(result, op)))))
          return WalkResult::interrupt();
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    return failure(walked.wasInterrupted());
  }

  /// First fit can place the rest worse once a buffer is shared, so the
  /// in-place sharing of shareInPlace and shareElementwiseInPlace is kept only
  /// where the arena does not grow with it. Both together gave the
  /// smallest arena of the four choices for each example and mesh
  /// (GPT-2 small: 321.5 MiB, against 333.5 with the groups' alone, 369.5
  /// with the norms' alone and 381.5 with neither).
  void planSmaller(func::FuncOp func) {
    llvm::DenseMap<Value, Value> before = sharedWith;
    sharedInPlace = false;
    int64_t inPlace = plan(func, /*inPlace=*/true);
    if (!sharedInPlace) { // nothing to compare: the one plan stands
      arenaBytes = std::max<uint64_t>(arenaBytes, uint64_t(inPlace));
      return;
    }
    sharedWith = before;
    int64_t apart = plan(func, /*inPlace=*/false);
    if (inPlace <= apart) {
      sharedWith = before;
      plan(func, /*inPlace=*/true);
    }
    arenaBytes =
        std::max<uint64_t>(arenaBytes, uint64_t(std::min(inPlace, apart)));
  }

  /// Values stored in another value's buffer (see shareCarriedBuffers).
  llvm::DenseMap<Value, Value> sharedWith;
  /// Whether the last shareInPlace shared a buffer.
  bool sharedInPlace = false;

  Value owner(Value value) const {
    for (auto found = sharedWith.find(value); found != sharedWith.end();
         found = sharedWith.find(value))
      value = found->second;
    return value;
  }

  /// Lets a repeat's carried buffer also hold the value that initialises it
  /// and the value each iteration yields into it, so that neither is copied
  /// there: 12.5 MB twice per layer of GPT-2 small. The initial value must
  /// have no other reader; the yielded value must be written after every
  /// read of the carried value in the iteration (the yield's own included),
  /// so that no op reads a buffer it writes. A `loom.wait` result is
  /// written by its collective before the wait, so it never shares.
  void shareCarriedBuffers(func::FuncOp func,
                           llvm::MapVector<Value, Buffer> &buffers,
                           llvm::DenseMap<Operation *, int64_t> &index,
                           llvm::function_ref<Value(Value)> root) {
    auto share = [&](Value member, Value carriedBuffer) {
      Operation *writer = member.getDefiningOp();
      if (!writer || isa<WaitOp>(writer) || !buffers.count(member))
        return;
      Buffer &shared = buffers[owner(carriedBuffer)];
      Buffer &own = buffers[member];
      shared.first = std::min(shared.first, own.first);
      shared.last = std::max(shared.last, own.last);
      buffers.erase(member);
      sharedWith[member] = carriedBuffer;
    };
    func.walk([&](RepeatOp repeat) {
      Block &body = repeat.getBody().front();
      auto yield = cast<YieldOp>(body.getTerminator());
      auto carriedNext =
          yield.getValues().take_front(repeat.getCarried().size());
      for (auto [next, carriedResult] :
           llvm::zip(carriedNext, repeat.getCarriedResults())) {
        Value result = carriedResult, stored = root(next);
        Operation *writer = stored.getDefiningOp();
        if (!writer || writer->getBlock() != &body ||
            llvm::count_if(carriedNext, [&](Value other) {
              return root(other) == stored;
            }) != 1)
          continue;
        bool readAfterWrite = false;
        body.walk([&](Operation *op) {
          Operation *step = op;
          while (step->getBlock() != &body)
            step = step->getParentOp();
          for (Value operand : op->getOperands())
            if (root(operand) == result && index[step] >= index[writer])
              readAfterWrite = true;
        });
        if (!readAfterWrite)
          share(stored, result);
      }
      for (auto [initial, result] :
           llvm::zip(repeat.getCarried(), repeat.getCarriedResults()))
        if (initial.hasOneUse() && initial.getDefiningOp() &&
            initial.getDefiningOp()->getBlock() == repeat->getBlock())
          share(initial, result);
    });
  }

  /// Lets a `loom.add_norm` write its normalised rows into the buffer of
  /// its second addend when this op is that buffer's last reader (a
  /// block's output added to the residual stream). Backends read each row
  /// whole before they write it, so nothing is overwritten early, and the
  /// arena keeps the size it had with the add and the norm apart (GPT-2
  /// small: 12.6 MB).
  void shareInPlace(func::FuncOp func, llvm::MapVector<Value, Buffer> &buffers,
                    llvm::DenseMap<Operation *, int64_t> &index,
                    llvm::function_ref<Value(Value)> root) {
    func.walk([&](AddNormOp op) {
      Value addend = owner(root(op.getRhs())), result = op.getResult();
      auto found = buffers.find(addend);
      if (found == buffers.end() || !buffers.count(result) ||
          isa<BlockArgument>(addend) ||
          addend.getParentBlock() != op->getBlock() ||
          found->second.last != index[op] ||
          found->second.bytes != buffers[result].bytes)
        return;
      int64_t last = buffers[result].last;
      buffers[addend].last = std::max(buffers[addend].last, last);
      buffers.erase(result);
      sharedWith[result] = addend;
      sharedInPlace = true;
    });
  }

  /// Lets a fusion group or an element-wise op write its result over an
  /// input of the result's type, stored row-major like it, whose last
  /// reader it is (a GEMM's product that only its bias and activation
  /// read): every backend's kernel for it reads such an input's element at
  /// the element it writes, before writing it, and a CUDA GEMM epilogue
  /// then writes a group's result where the product would go, never over
  /// the GEMM's operands. A group that ends in a reduction has a result of
  /// another type than its inputs.
  void shareElementwiseInPlace(func::FuncOp func,
                               llvm::MapVector<Value, Buffer> &buffers,
                               llvm::DenseMap<Operation *, int64_t> &index) {
    func.walk([&](Operation *op) {
      if ((!isa<FusedOp>(op) && !isElementwise(op)) ||
          isa<FusedOp>(op->getParentOp()))
        return;
      Value result = op->getResult(0);
      if (!buffers.count(result) || !isRowMajorInBuffer(result))
        return;
      for (Value input : op->getOperands()) {
        auto found = buffers.find(input);
        if (found == buffers.end() || isa<BlockArgument>(input) ||
            input.getParentBlock() != op->getBlock() ||
            input.getType() != result.getType() ||
            found->second.last != index[op] || !isRowMajorInBuffer(input))
          continue;
        found->second.last = std::max(found->second.last, buffers[result].last);
        buffers.erase(result);
        sharedWith[result] = input;
        sharedInPlace = true;
        return;
      }
    });
  }

  /// For carriedMoves: which carried buffer, if any, already holds each
  /// carried value's next value.
  SmallVector<int> carriedSources(RepeatOp repeat,
                                  llvm::function_ref<Value(Value)> root) {
    SmallVector<Value> carriedBuffers;
    for (Value result : repeat.getCarriedResults())
      carriedBuffers.push_back(owner(result));
    auto yield = cast<YieldOp>(repeat.getBody().front().getTerminator());
    SmallVector<int> sources;
    for (Value next : yield.getValues().take_front(carriedBuffers.size())) {
      auto found = llvm::find(carriedBuffers, owner(root(next)));
      sources.push_back(found == carriedBuffers.end()
                            ? CarriedMove::kYieldedValue
                            : int(found - carriedBuffers.begin()));
    }
    return sources;
  }

  /// Plans `func` and returns its arena's bytes.
  int64_t plan(func::FuncOp func, bool inPlace) {
    // A parked value's buffer is decided anew (an earlier plan's may differ).
    func.walk([](RepeatOp repeat) {
      repeat->removeAttr(LoomDialect::kScratchOffsetAttrName);
    });
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
      buffer.bytes = tensorBytes(value.getType());
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
    // A started collective reads its operands until its last wait.
    llvm::DenseMap<Operation *, int64_t> readUntil;
    func.walk([&](WaitOp wait) {
      Operation *start = wait.getFuture().getDefiningOp();
      readUntil[start] = std::max(readUntil.lookup(start), index[wait]);
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
        // at the end of that loop. A collective's result inside a
        // loom.combined or loom.start is the result of that op, made in
        // the op's block.
        Block *defBlock = storage.getParentBlock();
        while (isa<CombinedOp, StartOp>(defBlock->getParentOp()))
          defBlock = defBlock->getParentOp()->getBlock();
        Operation *user = op;
        while (user->getBlock() != defBlock && user->getParentOp() &&
               user->getParentOp() != func.getOperation())
          user = user->getParentOp();
        found->second.last =
            std::max({found->second.last, spanEnd[user],
                      isa<StartOp>(user) ? readUntil.lookup(user) : 0});
      }
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    // A repeat's buffers are written when it starts and read by its body, so
    // they live through its whole span.
    func.walk([&](RepeatOp repeat) {
      for (OpResult result : repeat.getResults())
        buffers[result].last = std::max(buffers[result].last, spanEnd[repeat]);
    });

    // A collective that a loom.prefetch starts one iteration ahead writes
    // one of its two buffers before the loop and another during each
    // iteration but the last, while the iteration reads the other.
    func.walk([&](Operation *op) {
      Operation *start = prefetchedStartOf(op);
      if (!start)
        return;
      Operation *repeat = start->getParentOp();
      for (OpResult result : op->getResults()) {
        auto found = buffers.find(result);
        if (found == buffers.end())
          continue;
        found->second.bytes *= 2;
        found->second.first = std::min(found->second.first, index[repeat]);
        found->second.last = std::max(found->second.last, spanEnd[repeat]);
      }
    });

    shareCarriedBuffers(func, buffers, index, root);
    if (inPlace) {
      shareInPlace(func, buffers, index, root);
      shareElementwiseInPlace(func, buffers, index);
    }

    // A repeat whose carried values trade places parks one of them while
    // its iteration ends (carriedMoves): a buffer alive at the yield only.
    SmallVector<std::pair<RepeatOp, Buffer>> scratches;
    func.walk([&](RepeatOp repeat) {
      if (llvm::none_of(carriedMoves(carriedSources(repeat, root)),
                        [](CarriedMove move) {
                          return move.to == CarriedMove::kScratch;
                        }))
        return;
      Buffer scratch;
      for (Value result : repeat.getCarriedResults())
        scratch.bytes = std::max(scratch.bytes, tensorBytes(result.getType()));
      scratch.first = scratch.last =
          index[repeat.getBody().front().getTerminator()];
      scratches.push_back({repeat, scratch});
    });

    // First fit, in order of first write, among buffers still alive.
    SmallVector<Buffer *> order;
    for (auto &entry : buffers)
      order.push_back(&entry.second);
    for (auto &entry : scratches)
      order.push_back(&entry.second);
    // Shared buffers start at their earliest value; ties keep definition
    // order (scratches last), so the plan does not depend on addresses.
    SmallVector<size_t> positions(order.size());
    for (size_t i = 0; i < positions.size(); ++i)
      positions[i] = i;
    llvm::sort(positions, [&](size_t a, size_t b) {
      return std::make_pair(order[a]->first, a) <
             std::make_pair(order[b]->first, b);
    });
    order = llvm::map_to_vector(positions, [&](size_t i) { return order[i]; });
    SmallVector<Buffer *> live;
    int64_t peak = 0;
    for (Buffer *next : order) {
      Buffer &buffer = *next;
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
          // A loom.combined's results are its members'; a started
          // collective's future and wait, the collective's.
          auto found = buffers.find(owner(isa<CombinedOp, StartOp, WaitOp>(op)
                                              ? root(result)
                                              : Value(result)));
          offsets.push_back(found == buffers.end() ? -1 : found->second.offset);
        }
        op->setAttr(LoomDialect::kOffsetsAttrName,
                    builder.getDenseI64ArrayAttr(offsets));
      }
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
    for (auto &[repeat, scratch] : scratches)
      repeat->setAttr(LoomDialect::kScratchOffsetAttrName,
                      builder.getI64IntegerAttr(scratch.offset));
    func->setAttr(LoomDialect::kArenaBytesAttrName,
                  builder.getI64IntegerAttr(peak));
    return peak;
  }
};

} // namespace
