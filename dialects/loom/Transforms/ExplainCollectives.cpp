//===- ExplainCollectives.cpp - Why each collective exists ----------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Explain.h"

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/TypeInference.h"
#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <cmath>

namespace loom {
#define GEN_PASS_DEF_LOOMEXPLAINCOLLECTIVES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

int64_t loom::countIterations(Operation *op) {
  int64_t iterations = 1;
  for (auto repeat = op->getParentOfType<RepeatOp>(); repeat;
       repeat = repeat->getParentOfType<RepeatOp>())
    iterations *= repeat.getCount();
  return iterations;
}

std::string loom::formatShape(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  std::string text;
  llvm::raw_string_ostream os(text);
  for (int64_t size : tensor.getShape())
    os << size << 'x';
  os << tensor.getElementType();
  return text;
}

/// Where the loom.start holding `collective` (directly or in a
/// loom.combined) starts it and is first waited for.
static void describeStart(Operation *collective, CollectiveInfo &info) {
  Operation *parent = collective->getParentOp();
  if (isa<CombinedOp>(parent))
    parent = parent->getParentOp();
  auto start = dyn_cast<StartOp>(parent);
  if (!start)
    return;
  Operation *before = start->getPrevNode();
  if (PrefetchOp prefetch = start.getPrefetch()) {
    // Started where the prefetch stands in the iteration before: the work
    // after it there and before the wait here hides it.
    info.prefetched = true;
    Operation *previous = prefetch->getPrevNode();
    while (isa_and_nonnull<PrefetchOp>(previous))
      previous = previous->getPrevNode();
    Operation *next = prefetch->getNextNode();
    while (isa_and_nonnull<PrefetchOp, WaitOp>(next))
      next = next->getNextNode();
    // Right after waits (its own, mostly), the computation they precede
    // says where.
    std::string place =
        isa_and_nonnull<WaitOp>(previous) && next
            ? "the waits before " + describeOp(next)
        : previous ? describeOp(previous)
                   : std::string("the start");
    info.startedAfter = place + " in the iteration before (the first "
                                "iteration's before its loom.repeat)";
    for (Operation *at = prefetch->getNextNode(); at; at = at->getNextNode())
      info.computationsBetween += isComputation(at);
    for (Operation &at : *start->getBlock()) {
      if (&at == start)
        break;
      info.computationsBetween += isComputation(&at);
    }
  } else if (before)
    info.startedAfter = describeOp(before);
  else if (isa<RepeatOp>(start->getParentOp()))
    info.startedAfter = "the start of its loom.repeat's iteration";
  else
    info.startedAfter = "the start of its function";
  Operation *firstWait = nullptr;
  for (Operation *user : start->getUsers())
    if (isa<WaitOp>(user) && user->getBlock() == start->getBlock() &&
        (!firstWait || user->isBeforeInBlock(firstWait)))
      firstWait = user;
  if (!firstWait)
    return;
  Operation *reader = firstWait;
  while (reader && isa<WaitOp, PrefetchOp>(reader))
    reader = reader->getNextNode();
  info.waitedBefore = reader ? describeOp(reader) : describeOp(firstWait);
  for (Operation *at = start->getNextNode(); at != firstWait;
       at = at->getNextNode())
    info.computationsBetween += isComputation(at);
}

std::vector<CollectiveInfo> loom::collectCollectives(Operation *root) {
  std::vector<CollectiveInfo> infos;
  root->walk([&](CollectiveOpInterface collective) {
    Operation *op = collective;
    CollectiveInfo info;
    info.op = op;
    info.kind = op->getName().stripDialect().str();
    if (std::optional<ReductionKind> kind = collective.getReductionKind())
      info.kind += ("(" + stringifyReductionKind(*kind) + ")").str();
    info.axes = collective.getGroupAxes();
    MeshOp mesh = lookupMesh(op, collective.getMeshRef());
    info.groupSize = 1;
    for (StringRef axis : info.axes)
      info.groupSize *= mesh ? mesh.getAxisSize(axis).value_or(1) : 1;
    Type shaped = op->getNumOperands() ? op->getOperand(0).getType()
                                       : op->getResult(0).getType();
    info.shape = formatShape(shaped);
    info.bytesPerRank = collective.getBytesPerRank(info.groupSize);
    info.iterations = countIterations(op);
    if (auto reason =
            op->getAttrOfType<DictionaryAttr>(LoomDialect::kReasonAttrName)) {
      auto text = [&](StringRef key) {
        if (auto value = reason.getAs<StringAttr>(key))
          return value.getValue().str();
        if (auto sharding = reason.getAs<ShardingAttr>(key))
          return formatDims(sharding);
        return std::string();
      };
      info.value = text("value");
      info.from = text("from");
      info.to = text("to");
      info.producer = text("producer");
      info.consumer = text("consumer");
      info.conflict = text("conflict");
    }
    describeStart(op, info);
    infos.push_back(std::move(info));
  });
  return infos;
}

/// Whole numbers print as integers, others in shortest form.
static std::string formatNumber(double value) {
  if (value == std::floor(value) && std::fabs(value) < 9.0e15)
    return std::to_string(static_cast<int64_t>(value));
  return formatShortestDouble(value);
}

static std::string computationsBetween(const CollectiveInfo &info) {
  int64_t count = info.computationsBetween;
  return std::to_string(count) +
         (count == 1 ? " computation between" : " computations between");
}

static std::string formatAxes(ArrayRef<StringRef> axes) {
  std::string text = "[";
  for (auto [index, axis] : llvm::enumerate(axes))
    text += (index ? ", \"" : "\"") + axis.str() + "\"";
  return text + "]";
}

std::string loom::describeCollective(const CollectiveInfo &info) {
  std::string text = info.kind + " over " + formatAxes(info.axes) + " of " +
                     info.shape + ": " + formatNumber(info.bytesPerRank) +
                     " bytes per rank";
  if (info.iterations > 1)
    text += " x " + std::to_string(info.iterations) + " iterations";
  if (!info.value.empty())
    text += "; " + info.value + " is " + info.from + " from " + info.producer +
            ", needed as " + info.to + " by " + info.consumer;
  if (!info.conflict.empty())
    text += "; conflicting annotations at " + info.conflict;
  if (!info.startedAfter.empty())
    text += "; started after " + info.startedAfter + ", waited for before " +
            info.waitedBefore + ", " + computationsBetween(info);
  if (auto combined = dyn_cast<CombinedOp>(info.op->getParentOp())) {
    size_t others = combined.getMembers().size() - 1;
    text += others == 1 ? "; run as one with the other member of its "
                          "loom.combined"
                        : "; run as one with the " + std::to_string(others) +
                              " other members of its loom.combined";
  }
  return text;
}

void loom::printCollectiveTable(ModuleOp module, llvm::raw_ostream &os) {
  std::vector<CollectiveInfo> infos = collectCollectives(module);
  // Members of one loom.combined run as one collective: their numbers.
  llvm::MapVector<Operation *, SmallVector<size_t>> combined;
  for (auto [index, info] : llvm::enumerate(infos))
    if (isa<CombinedOp>(info.op->getParentOp()))
      combined[info.op->getParentOp()].push_back(index + 1);
  size_t started = llvm::count_if(infos, [](const CollectiveInfo &info) {
    return !info.startedAfter.empty();
  });
  os << "collectives of the per-device program: " << infos.size();
  if (!combined.empty()) {
    size_t members = 0;
    for (auto &entry : combined)
      members += entry.second.size();
    os << ", run as " << infos.size() - members + combined.size()
       << " (loom.combined runs " << members << " as " << combined.size()
       << ")";
  }
  size_t prefetched = llvm::count_if(
      infos, [](const CollectiveInfo &info) { return info.prefetched; });
  if (started)
    os << "; " << started << " of them started early (--overlap-collectives)";
  if (prefetched)
    os << ", " << prefetched << " one iteration ahead";
  os << "\n";
  double total = 0;
  for (auto [index, info] : llvm::enumerate(infos)) {
    double bytes = info.bytesPerRank * info.iterations;
    total += bytes;
    os << llvm::format("%3zu. ", index + 1) << info.kind << " over "
       << formatAxes(info.axes) << " (" << info.groupSize << " ranks), "
       << info.shape << ", " << formatNumber(info.bytesPerRank)
       << " bytes per rank";
    if (info.iterations > 1)
      os << " x " << info.iterations << " iterations = " << formatNumber(bytes);
    os << "\n";
    if (!info.value.empty()) {
      os << "     " << info.value << ": " << info.from << " -> " << info.to
         << "\n";
      os << "     made by " << info.producer << "\n";
      os << "     needed by " << info.consumer << "\n";
    }
    if (!info.conflict.empty())
      os << "     conflicting annotations at " << info.conflict << "\n";
    if (!info.startedAfter.empty())
      os << "     started after " << info.startedAfter
         << "\n     waited for before " << info.waitedBefore << " ("
         << computationsBetween(info) << ")\n";
    if (isa<CombinedOp>(info.op->getParentOp())) {
      SmallVector<std::string> others;
      for (size_t number : combined[info.op->getParentOp()])
        if (number != index + 1)
          others.push_back(std::to_string(number));
      os << "     run as one with " << llvm::join(others, ", ")
         << " (loom.combined)\n";
    }
    // An all_slice sends nothing; what it costs is a copy, unless the
    // code reads its piece in place.
    if (isa<AllSliceOp>(info.op)) {
      std::string why = whyCopied(info.op);
      os << "     "
         << (why.empty() ? "read in place: a view of its input, no copy"
                         : "copied: " + why)
         << "\n";
    }
  }
  os << "total: " << formatNumber(total) << " bytes per rank per step\n";
}

namespace {
struct ExplainCollectivesPass
    : public loom::impl::LoomExplainCollectivesBase<ExplainCollectivesPass> {
  using LoomExplainCollectivesBase::LoomExplainCollectivesBase;

  void runOnOperation() override {
    for (const CollectiveInfo &info : collectCollectives(getOperation())) {
      info.op->emitRemark() << describeCollective(info);
      ++numCollectives;
    }
  }
};
} // namespace
