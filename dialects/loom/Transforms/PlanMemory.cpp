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

#include <deque>

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
  /// Op indices within [first, last] where no value of the buffer is
  /// alive (a carried buffer between its last read and its next write in
  /// the loop's body); empty when holeFirst > holeLast.
  int64_t holeFirst = 0, holeLast = -1;
};

/// Whether two buffers are alive at a common op index: their spans meet
/// somewhere outside both holes.
bool aliveTogether(const Buffer &a, const Buffer &b) {
  SmallVector<std::pair<int64_t, int64_t>> common = {
      {std::max(a.first, b.first), std::min(a.last, b.last)}};
  for (const Buffer *holed : {&a, &b}) {
    if (holed->holeFirst > holed->holeLast)
      continue; // no hole
    SmallVector<std::pair<int64_t, int64_t>> outside;
    for (auto [lo, hi] : common) {
      outside.push_back({lo, std::min(hi, holed->holeFirst - 1)});
      outside.push_back({std::max(lo, holed->holeLast + 1), hi});
    }
    common = outside;
  }
  return llvm::any_of(common,
                      [](auto range) { return range.first <= range.second; });
}

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
  /// Where a piece written into a concatenation in place starts in the
  /// concatenation's buffer (its owner there), in bytes.
  llvm::DenseMap<Value, int64_t> pieceOffsets;
  /// Whether the last shareInPlace shared a buffer.
  bool sharedInPlace = false;

  Value owner(Value value) const {
    for (auto found = sharedWith.find(value); found != sharedWith.end();
         found = sharedWith.find(value))
      value = found->second;
    return value;
  }

  /// When `value`'s bytes are first written: by its op, or, for a
  /// concatenation whose pieces are written into it in place, by the first
  /// of those (its buffer's first op). Every rule that lends a buffer to
  /// another asks this, not the op that makes the value.
  static int64_t firstWrite(Value value,
                            llvm::MapVector<Value, Buffer> &buffers,
                            llvm::DenseMap<Operation *, int64_t> &index) {
    int64_t written = index[value.getDefiningOp()];
    if (auto found = buffers.find(value); found != buffers.end())
      written = std::min(written, found->second.first);
    return written;
  }

  /// Lets a repeat's carried buffer also hold the value that initialises it
  /// and the value each iteration yields into it, so that neither is copied
  /// there: 12.5 MB twice per layer of GPT-2 small. The initial value must
  /// have no other reader, directly or through a view, after the loop
  /// starts (a rotated loop's first norm reads it before:
  /// loom-fuse-add-norm); when it is a `loom.wait`'s,
  /// the buffer shared is its collective's. The yielded value must be
  /// written (from its first write: a concatenation's pieces written in
  /// place come before it) after every read of the carried value in the
  /// iteration (the yield's own included), so that no op reads a buffer it
  /// writes; a
  /// yielded `loom.wait` result is written by its collective before the
  /// wait, so it never shares.
  void shareCarriedBuffers(func::FuncOp func,
                           llvm::MapVector<Value, Buffer> &buffers,
                           llvm::DenseMap<Operation *, int64_t> &index,
                           llvm::DenseMap<Operation *, int64_t> &readUntil,
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
        if (!writer || writer->getBlock() != &body || !viewsWholeBuffer(next) ||
            llvm::count_if(carriedNext, [&](Value other) {
              return root(other) == stored;
            }) != 1)
          continue;
        int64_t written = firstWrite(stored, buffers, index);
        bool readAfterWrite = false;
        body.walk([&](Operation *op) {
          Operation *step = op;
          while (step->getBlock() != &body)
            step = step->getParentOp();
          for (Value operand : op->getOperands())
            if (root(operand) == result && index[step] >= written)
              readAfterWrite = true;
        });
        if (!readAfterWrite)
          share(stored, result);
      }
      for (auto [initial, result] :
           llvm::zip(repeat.getCarried(), repeat.getCarriedResults())) {
        if (!initial.getDefiningOp() ||
            initial.getDefiningOp()->getBlock() != repeat->getBlock() ||
            !lastReaderIs(initial, repeat, index, readUntil))
          continue;
        // A collective started early and waited for before the loop wrote
        // the buffer before the loop too; its wait is its one reader.
        auto wait = initial.getDefiningOp<WaitOp>();
        if (wait && wait.getFuture().hasOneUse())
          share(root(initial), result);
        else
          share(initial, result);
      }
    });
  }

  /// Lets a `loom.add_norm` write its normalised rows into the buffer of
  /// its second addend when this op is that buffer's last reader (a
  /// block's output added to the residual stream). Backends read each row
  /// whole before they write it, so nothing is overwritten early, and the
  /// arena keeps the size it had with the add and the norm apart (GPT-2
  /// small: 12.6 MB). Where the result goes to a loop's carried buffer (a
  /// rotated loop's norm: loom-fuse-add-norm), the addend goes there too
  /// if the iteration reads the carried value only before the addend is
  /// written (GPT-2 small: the normalised rows, read by the first
  /// projections, and the MLP's product then share 12.6 MB).
  void shareInPlace(func::FuncOp func, llvm::MapVector<Value, Buffer> &buffers,
                    llvm::DenseMap<Operation *, int64_t> &index,
                    llvm::function_ref<Value(Value)> root) {
    func.walk([&](AddNormOp op) {
      Value addend = owner(root(op.getRhs())), result = op.getResult();
      auto found = buffers.find(addend);
      if (found == buffers.end() || isa<BlockArgument>(addend) ||
          !viewsWholeBuffer(op.getRhs()) ||
          addend.getParentBlock() != op->getBlock() ||
          found->second.last != index[op] ||
          found->second.bytes != tensorBytes(result.getType()))
        return;
      if (!buffers.count(result)) {
        shareIntoCarried(op, addend, owner(result), buffers, index, root);
        return;
      }
      int64_t last = buffers[result].last;
      buffers[addend].last = std::max(buffers[addend].last, last);
      buffers.erase(result);
      sharedWith[result] = addend;
      sharedInPlace = true;
    });
  }

  /// Runs of neighbouring two-operand contractions (views between them do
  /// not count) of one first operand whose results have one type: a
  /// layer's Q, K and V projections, which loom-batch-contractions makes
  /// one strided-batched GEMM when their results lie equally spaced.
  static SmallVector<SmallVector<Value>>
  siblingContractionResults(func::FuncOp func) {
    auto firstOperand = [](Operation *op) -> Value {
      if (auto einsum = dyn_cast<EinsumOp>(op))
        return einsum.getInputs().size() == 2 ? einsum.getInputs()[0]
                                              : Value();
      if (auto matmul = dyn_cast<MatmulOp>(op))
        return matmul.getLhs();
      return Value();
    };
    SmallVector<SmallVector<Value>> runs;
    func.walk([&](Block *block) {
      SmallVector<Operation *> run;
      auto flush = [&] {
        if (run.size() >= 2)
          runs.push_back(llvm::map_to_vector(
              run, [](Operation *op) { return Value(op->getResult(0)); }));
        run.clear();
      };
      for (Operation &op : *block) {
        if (isView(&op))
          continue;
        Value lhs = firstOperand(&op);
        if (lhs && !run.empty() && firstOperand(run.front()) == lhs &&
            run.front()->getResult(0).getType() == op.getResult(0).getType() &&
            op.getName() == run.front()->getName()) {
          run.push_back(&op);
          continue;
        }
        flush();
        if (lhs)
          run.push_back(&op);
      }
      flush();
    });
    return runs;
  }

  /// Each carried buffer's hole: in the loop's body, the ops after the last
  /// read of the carried value (a started collective reads until its
  /// wait, a nested loop until its end) and before the first write of a
  /// value stored there (the next value, or a temporary that
  /// shareIntoCarried placed there). The body's other buffers may use
  /// those bytes then, in every iteration.
  void findCarriedHoles(func::FuncOp func,
                        llvm::MapVector<Value, Buffer> &buffers,
                        llvm::DenseMap<Operation *, int64_t> &index,
                        llvm::DenseMap<Operation *, int64_t> &spanEnd,
                        llvm::DenseMap<Operation *, int64_t> &readUntil,
                        llvm::function_ref<Value(Value)> root) {
    func.walk([&](RepeatOp repeat) {
      Block &body = repeat.getBody().front();
      for (Value carried : repeat.getCarriedResults()) {
        auto found = buffers.find(carried);
        if (found == buffers.end())
          continue;
        int64_t firstWrite = std::numeric_limits<int64_t>::max();
        body.walk([&](Operation *op) {
          for (Value result : op->getResults())
            if (!viewedValue(result) && owner(result) == carried)
              firstWrite = std::min(
                  firstWrite, index[body.findAncestorOpInBlock(*op)]);
        });
        int64_t lastRead = index[repeat];
        bool readAtWrite = false;
        body.walk([&](Operation *op) {
          Operation *step = body.findAncestorOpInBlock(*op);
          for (Value operand : op->getOperands()) {
            if (owner(root(operand)) != carried)
              continue;
            int64_t until = std::max(spanEnd[step], readUntil.lookup(step));
            if (index[step] < firstWrite)
              lastRead = std::max(lastRead, until);
            readAtWrite |= index[step] < firstWrite && until >= firstWrite;
          }
        });
        if (firstWrite == std::numeric_limits<int64_t>::max() || readAtWrite ||
            lastRead + 1 > firstWrite - 1)
          continue;
        found->second.holeFirst = lastRead + 1;
        found->second.holeLast = firstWrite - 1;
      }
    });
  }

  /// shareInPlace's addend into the carried buffer that `op`'s result
  /// already shares, when no op of the iteration reads a value of that
  /// buffer from the addend's write until `op`.
  void shareIntoCarried(AddNormOp op, Value addend, Value carried,
                        llvm::MapVector<Value, Buffer> &buffers,
                        llvm::DenseMap<Operation *, int64_t> &index,
                        llvm::function_ref<Value(Value)> root) {
    auto carriedResult = dyn_cast<OpResult>(carried);
    auto repeat = carriedResult
                      ? dyn_cast<RepeatOp>(carriedResult.getOwner())
                      : RepeatOp();
    Operation *writer = addend.getDefiningOp();
    if (!repeat || !buffers.count(carried) || !writer || isa<WaitOp>(writer) ||
        carriedResult.getResultNumber() >= repeat.getCarried().size())
      return;
    Block &body = repeat.getBody().front();
    if (op->getBlock() != &body)
      return;
    int64_t written = firstWrite(addend, buffers, index);
    bool readMeanwhile = false;
    body.walk([&](Operation *reader) {
      Operation *step = body.findAncestorOpInBlock(*reader);
      if (step == op.getOperation() || index[step] < written ||
          index[step] > index[op])
        return;
      for (Value operand : reader->getOperands())
        if (owner(root(operand)) == carried)
          readMeanwhile = true;
    });
    if (readMeanwhile)
      return;
    buffers.erase(addend);
    sharedWith[addend] = carried;
    sharedInPlace = true;
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

  /// Whether `op` reads `value` once and every other read of its bytes,
  /// directly or through a view of it, is done before `op` (in its block;
  /// a started collective reads until its last wait).
  static bool lastReaderIs(Value value, Operation *op,
                           llvm::DenseMap<Operation *, int64_t> &index,
                           llvm::DenseMap<Operation *, int64_t> &readUntil) {
    int uses = 0;
    SmallVector<Value> viewsOfValue{value};
    while (!viewsOfValue.empty()) {
      Value viewed = viewsOfValue.pop_back_val();
      for (OpOperand &use : viewed.getUses()) {
        Operation *user = use.getOwner();
        if (isView(user) && viewedValue(user->getResult(0)) == viewed) {
          llvm::append_range(viewsOfValue, user->getResults());
          continue;
        }
        Operation *reader = op->getBlock()->findAncestorOpInBlock(*user);
        if (reader == op && viewed == value)
          ++uses;
        else if (!reader || index[reader] >= index[op] ||
                 readUntil.lookup(reader) >= index[op])
          return false;
      }
    }
    return uses == 1;
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
      auto found = viewsWholeBuffer(next)
                       ? llvm::find(carriedBuffers, owner(root(next)))
                       : carriedBuffers.end();
      sources.push_back(found == carriedBuffers.end()
                            ? CarriedMove::kYieldedValue
                            : int(found - carriedBuffers.begin()));
    }
    return sources;
  }

  static int64_t alignedBytes(const Buffer &buffer) {
    return (buffer.bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  /// Gives each buffer the lowest offset where it overlaps none of
  /// `placed` that is alive with it, and returns the arena's bytes.
  static int64_t place(ArrayRef<Buffer *> order) {
    SmallVector<Buffer *> placed;
    int64_t peak = 0;
    for (Buffer *buffer : order) {
      SmallVector<Buffer *> alive;
      for (Buffer *other : placed)
        if (aliveTogether(*buffer, *other))
          alive.push_back(other);
      llvm::sort(alive,
                 [](Buffer *a, Buffer *b) { return a->offset < b->offset; });
      int64_t size = alignedBytes(*buffer), offset = 0;
      for (Buffer *other : alive) {
        if (offset + size <= other->offset)
          break;
        offset = std::max(offset, other->offset + alignedBytes(*other));
      }
      buffer->offset = offset;
      peak = std::max(peak, offset + size);
      placed.push_back(buffer);
    }
    return peak;
  }

  /// The bytes of `buffers` alive at each op index where that can rise
  /// (where a span starts or a hole ends), as (index, bytes).
  static SmallVector<std::pair<int64_t, int64_t>>
  liveBytes(ArrayRef<Buffer *> buffers) {
    SmallVector<std::pair<int64_t, int64_t>> profile;
    auto add = [&](int64_t point) {
      int64_t live = 0;
      for (Buffer *other : buffers)
        if (aliveAt(*other, point))
          live += alignedBytes(*other);
      profile.push_back({point, live});
    };
    for (Buffer *starting : buffers) {
      add(starting->first);
      if (starting->holeFirst <= starting->holeLast)
        add(starting->holeLast + 1);
    }
    return profile;
  }

  static bool aliveAt(const Buffer &buffer, int64_t point) {
    return buffer.first <= point && point <= buffer.last &&
           !(buffer.holeFirst <= point && point <= buffer.holeLast);
  }

  /// Places the buffers (given in definition order, scratches last; their
  /// liveBytes `profile`) four ways and keeps the smallest arena, the
  /// earlier way on a tie:
  /// - in order of first write;
  /// - largest first (large buffers low, the rest fitted around them),
  ///   which can win where carried buffers live through a loop whose
  ///   temporaries first fit splits around them (GPT-2 small rotated by
  ///   loom-fuse-add-norm, before carried buffers had holes: 345.5 MiB in
  ///   order of first write, 333.5 largest first);
  /// - longest-lived first, so that short-lived buffers share the space
  ///   above the long ones (examples/gpt.loom on [dp: 2, tp: 2]: 1,144,896
  ///   bytes, the bound, against 1,177,664 in order of first write);
  /// - by the most bytes alive at any op of their span, largest first
  ///   (ties: larger buffers first), so that the buffers alive where memory
  ///   peaks are packed first, with no gaps between them (GPT-2 small:
  ///   309.5 MiB, its bound, against 321.5 largest first).
  /// Ties within an order keep definition order, so the plan does not
  /// depend on addresses.
  static int64_t
  placeSmaller(ArrayRef<Buffer *> buffers,
               ArrayRef<std::pair<int64_t, int64_t>> profile) {
    auto sorted = [&](auto key) {
      SmallVector<size_t> positions(buffers.size());
      for (size_t i = 0; i < positions.size(); ++i)
        positions[i] = i;
      // Every key ends with its position, so the order is total: sort
      // needs no stability (and libstdc++ 12's stable_sort warns under
      // clang).
      llvm::sort(positions,
                 [&](size_t a, size_t b) { return key(a) < key(b); });
      return llvm::map_to_vector(positions,
                                 [&](size_t i) { return buffers[i]; });
    };
    SmallVector<Buffer *> byFirstWrite = sorted(
        [&](size_t i) { return std::make_pair(buffers[i]->first, i); });
    SmallVector<Buffer *> bySize = sorted([&](size_t i) {
      return std::make_tuple(-alignedBytes(*buffers[i]), buffers[i]->first, i);
    });
    SmallVector<Buffer *> byLifetime = sorted([&](size_t i) {
      return std::make_tuple(buffers[i]->first - buffers[i]->last,
                             -alignedBytes(*buffers[i]), i);
    });
    SmallVector<int64_t> highestLoad =
        llvm::map_to_vector(buffers, [&](Buffer *buffer) {
          int64_t most = 0;
          for (auto [point, bytes] : profile)
            if (aliveAt(*buffer, point))
              most = std::max(most, bytes);
          return most;
        });
    SmallVector<Buffer *> byLoad = sorted([&](size_t i) {
      return std::make_tuple(-highestLoad[i], -alignedBytes(*buffers[i]), i);
    });
    int64_t best = INT64_MAX;
    SmallVector<int64_t> bestOffsets;
    for (ArrayRef<Buffer *> order :
         {ArrayRef<Buffer *>(byFirstWrite), ArrayRef<Buffer *>(bySize),
          ArrayRef<Buffer *>(byLifetime), ArrayRef<Buffer *>(byLoad)}) {
      int64_t peak = place(order);
      if (peak < best) {
        best = peak;
        bestOffsets =
            llvm::map_to_vector(buffers, [](Buffer *b) { return b->offset; });
      }
    }
    for (auto [buffer, offset] : llvm::zip(buffers, bestOffsets))
      buffer->offset = offset;
    return best;
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

    // A piece written into a concatenation in place is stored in the
    // concatenation's buffer, which then lives from the first such write.
    pieceOffsets.clear();
    func.walk([&](ConcatOp concat) {
      for (Value input : concat.getInputs()) {
        if (inPlaceConcatOf(input) != concat.getOperation())
          continue;
        Buffer &whole = buffers[concat.getResult()];
        whole.first = std::min(whole.first, buffers[input].first);
        buffers.erase(input);
        sharedWith[input] = concat.getResult();
        pieceOffsets[input] = concatPieceBytes(input);
      }
    });

    shareCarriedBuffers(func, buffers, index, readUntil, root);
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

    findCarriedHoles(func, buffers, index, spanEnd, readUntil, root);
    // Sibling contractions' results are placed as one buffer, side by
    // side, whichever order places the rest.
    std::deque<Buffer> groups;
    llvm::DenseMap<Buffer *, std::pair<Buffer *, int64_t>> memberOf;
    for (SmallVector<Value> &siblings : siblingContractionResults(func)) {
      SmallVector<Buffer *> members;
      for (Value result : siblings) {
        auto found = buffers.find(result);
        if (found == buffers.end() || memberOf.count(&found->second))
          break;
        members.push_back(&found->second);
      }
      if (members.size() != siblings.size())
        continue;
      Buffer &group = groups.emplace_back();
      group.first = members.front()->first;
      group.last = members.front()->last;
      for (auto [i, member] : llvm::enumerate(members)) {
        memberOf[member] = {&group, int64_t(i) * alignedBytes(*member)};
        group.first = std::min(group.first, member->first);
        group.last = std::max(group.last, member->last);
        group.bytes += alignedBytes(*member);
      }
    }
    // The arguments a concat view reads are placed side by side, in its
    // order.
    func.walk([&](ConcatOp concat) {
      SmallVector<BlockArgument> arguments = concatViewArguments(concat);
      if (arguments.empty())
        return;
      Buffer &group = groups.emplace_back();
      group.first = -1;
      group.last = end;
      for (BlockArgument argument : arguments) {
        Buffer *member = &buffers[argument];
        memberOf[member] = {&group, group.bytes};
        group.bytes += alignedBytes(*member);
      }
    });
    SmallVector<Buffer *> all;
    for (auto &entry : buffers) {
      auto found = memberOf.find(&entry.second);
      if (found == memberOf.end())
        all.push_back(&entry.second);
      else if (found->second.second == 0)
        all.push_back(found->second.first); // the group, at its first
    }
    for (auto &entry : scratches)
      all.push_back(&entry.second);
    // The most bytes alive at one op: no placement of these buffers fits
    // in less (loom.arena_bound, --report's live bound).
    SmallVector<std::pair<int64_t, int64_t>> profile = liveBytes(all);
    int64_t bound = 0;
    for (auto [point, bytes] : profile)
      bound = std::max(bound, bytes);
    int64_t peak = placeSmaller(all, profile);
    for (auto &[member, place] : memberOf)
      member->offset = place.first->offset + place.second;

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
          offsets.push_back(found == buffers.end()
                                ? -1
                                : found->second.offset +
                                      pieceOffsets.lookup(result));
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
    func->setAttr(LoomDialect::kArenaBoundAttrName,
                  builder.getI64IntegerAttr(bound));
    return peak;
  }
};

} // namespace
