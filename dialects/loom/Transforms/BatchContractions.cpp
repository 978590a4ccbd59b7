//===- BatchContractions.cpp - Sibling contractions as one batched GEMM ---===//
//
// Part of the Loom project.
//
// A layer's Q, K and V projections read the same activations with three
// weights of one shape. Three GEMMs of GPT-2 small's 8192x768x768 fill an
// H200's 132 SMs for about one and a half waves of tiles each; one
// strided-batched GEMM over the three (the activations at batch stride 0)
// fills four and a half. The weights of a repeat's layers are stacked
// parameters laid out one after another, and the plan places the three
// results side by side, so the batch strides are already there: this pass
// only checks them, after the memory plan, and changes no offset.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace loom {
#define GEN_PASS_DEF_LOOMBATCHCONTRACTIONS
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// A two-operand contraction of the plan: its einsum spec and operands.
struct Contraction {
  Operation *op = nullptr;
  std::string spec;
  Value lhs, rhs, result;
  ArenaAddress rhsAddress, resultAddress;
};

std::optional<Contraction> asContraction(Operation *op) {
  Contraction c;
  c.op = op;
  if (auto einsum = dyn_cast<EinsumOp>(op)) {
    if (einsum.getInputs().size() != 2)
      return std::nullopt;
    c.spec = einsum.getSpec().str();
    c.lhs = einsum.getInputs()[0];
    c.rhs = einsum.getInputs()[1];
  } else if (auto matmul = dyn_cast<MatmulOp>(op)) {
    auto shape = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getShape();
    };
    c.spec = matmulSpec(shape(matmul.getLhs()), shape(matmul.getRhs()),
                        shape(matmul.getResult()));
    c.lhs = matmul.getLhs();
    c.rhs = matmul.getRhs();
  } else {
    return std::nullopt;
  }
  // Letters of one operand only are summed before the product: the
  // batched descriptor has no room for that.
  auto [inputs, output] = StringRef(c.spec).split("->");
  ContractionLetters letters = contractionLetters(
      inputs.split(',').first, inputs.split(',').second, output);
  if (!letters.aSum.empty() || !letters.bSum.empty())
    return std::nullopt;
  c.result = op->getResult(0);
  c.rhsAddress = arenaAddress(c.rhs);
  c.resultAddress = arenaAddress(c.result);
  if (c.rhsAddress.offset < 0 || c.resultAddress.offset < 0)
    return std::nullopt; // not planned
  return c;
}

/// Whether `b` can join a batch that `a` is in: the same contraction of the
/// same first operand, with second operands stored alike.
bool sameShape(const Contraction &a, const Contraction &b) {
  return a.spec == b.spec && a.lhs == b.lhs &&
         a.rhs.getType() == b.rhs.getType() &&
         a.result.getType() == b.result.getType() &&
         stridesInBuffer(a.rhs) == stridesInBuffer(b.rhs) &&
         a.rhsAddress.steps == b.rhsAddress.steps &&
         stridesInBuffer(a.result) == stridesInBuffer(b.result);
}

bool overlaps(int64_t begin, int64_t bytes, const ArenaAddress &buffer) {
  return begin < buffer.offset + buffer.bufferBytes &&
         buffer.offset < begin + bytes;
}

struct BatchContractionsPass
    : public loom::impl::LoomBatchContractionsBase<BatchContractionsPass> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      batchBlock(*block);
  }

  /// Runs of neighbouring contractions (views between them do not count)
  /// that share their first operand.
  void batchBlock(Block &block) {
    SmallVector<Contraction> run;
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (isView(op))
        continue;
      std::optional<Contraction> c = asContraction(op);
      if (c && !run.empty() && sameShape(run.front(), *c)) {
        run.push_back(*c);
        continue;
      }
      batchRun(run);
      run.clear();
      if (c)
        run.push_back(*c);
    }
    batchRun(run);
  }

  /// Splits a run, in order of result offset, into chains whose second
  /// operands and results are equally spaced, and batches each chain.
  void batchRun(SmallVector<Contraction> run) {
    if (run.size() < 2)
      return;
    llvm::sort(run, [](const Contraction &a, const Contraction &b) {
      return a.resultAddress.offset < b.resultAddress.offset;
    });
    size_t begin = 0;
    while (begin + 1 < run.size()) {
      int64_t rhsStep =
          run[begin + 1].rhsAddress.offset - run[begin].rhsAddress.offset;
      int64_t resultStep =
          run[begin + 1].resultAddress.offset - run[begin].resultAddress.offset;
      size_t end = begin + 2;
      while (end < run.size() &&
             run[end].rhsAddress.offset - run[end - 1].rhsAddress.offset ==
                 rhsStep &&
             run[end].resultAddress.offset -
                     run[end - 1].resultAddress.offset ==
                 resultStep)
        ++end;
      if (!batch(ArrayRef(run).slice(begin, end - begin), rhsStep, resultStep))
        end = begin + 1; // try again from the next one
      begin = end;
    }
  }

  /// One loom.batched_einsum in place of `chain`, when the batch strides
  /// are positive, the results do not overlap each other or any operand,
  /// and no result is read before the chain's last op.
  bool batch(ArrayRef<Contraction> chain, int64_t rhsStep, int64_t resultStep) {
    const Contraction &first = chain.front();
    int64_t resultBytes = first.resultAddress.bufferBytes;
    if (rhsStep <= 0 || resultStep < resultBytes)
      return false;
    int64_t resultsBegin = first.resultAddress.offset;
    int64_t resultsBytes = resultStep * int64_t(chain.size() - 1) + resultBytes;
    if (overlaps(resultsBegin, resultsBytes, arenaAddress(first.lhs)))
      return false;
    for (const Contraction &c : chain)
      if (overlaps(resultsBegin, resultsBytes, c.rhsAddress))
        return false;
    Operation *last = chain.front().op;
    for (const Contraction &c : chain)
      if (last->isBeforeInBlock(c.op))
        last = c.op;
    // Views of a result (attention's head-split q, k, v) may come before
    // `last`: they move after it, as they are not kernels. Anything else
    // that reads a result there keeps the chain apart.
    llvm::SetVector<Operation *> moved;
    SmallVector<Value> read;
    for (const Contraction &c : chain)
      read.push_back(c.result);
    while (!read.empty()) {
      Value value = read.pop_back_val();
      for (Operation *user : value.getUsers()) {
        Operation *inBlock = last->getBlock()->findAncestorOpInBlock(*user);
        if (!inBlock || last->isBeforeInBlock(inBlock))
          continue;
        if (inBlock == last || !isView(inBlock))
          return false;
        if (moved.insert(inBlock))
          read.append(inBlock->result_begin(), inBlock->result_end());
      }
    }

    OpBuilder builder(last);
    SmallVector<Value> rhs;
    SmallVector<Type> types;
    SmallVector<Location> locs;
    SmallVector<int64_t> offsets;
    for (const Contraction &c : chain) {
      rhs.push_back(c.rhs);
      types.push_back(c.result.getType());
      locs.push_back(c.op->getLoc());
      offsets.push_back(c.resultAddress.offset);
    }
    auto batched = BatchedEinsumOp::create(
        builder, builder.getFusedLoc(locs), types,
        builder.getStringAttr(first.spec), first.lhs, rhs);
    batched->setAttr(LoomDialect::kOffsetsAttrName,
                     builder.getDenseI64ArrayAttr(offsets));
    SmallVector<Operation *> views = moved.takeVector();
    llvm::sort(views, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (Operation *view : llvm::reverse(views))
      view->moveAfter(batched);
    for (auto [index, c] : llvm::enumerate(chain)) {
      c.op->getResult(0).replaceAllUsesWith(batched.getResult(index));
      c.op->erase();
    }
    ++numBatches;
    numContractions += chain.size();
    return true;
  }
};

} // namespace
