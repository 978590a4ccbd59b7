//===- Report.cpp - Static per-rank costs of a partitioned model ----------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// Counts what one rank holds and does in one forward pass of the per-device
// program: parameter bytes, activation bytes (every value a compute op
// produces, which is what a backward pass would keep), FLOPs, and the bytes
// each rank sends per group of mesh axes. Work inside `loom.repeat` counts
// once per iteration.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Explain.h"
#include "dialects/loom/Transforms/Views.h"

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/Sharding.h"
#include "runtime/LogitsStats.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace loom;

/// A value that is not a tensor (a future, a token) holds no bytes here.
static int64_t bytesOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? tensorBytes(tensor) : 0;
}

static int64_t elementsOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

/// Two per point of an einsum's iteration space (every distinct letter).
static double einsumFlops(StringRef spec, ValueRange operands) {
  auto [inputs, output] = spec.split("->");
  int64_t sizes[26] = {};
  SmallVector<StringRef> specs;
  inputs.split(specs, ',');
  for (auto [letters, operand] : llvm::zip(specs, operands))
    for (auto [dim, letter] : llvm::enumerate(letters))
      sizes[letter - 'a'] =
          cast<RankedTensorType>(operand.getType()).getShape()[dim];
  double points = 1;
  for (int64_t size : sizes)
    if (size)
      points *= size;
  return 2.0 * points;
}

/// Floating-point operations of one execution of `op` (multiply-adds count
/// two; transcendental functions one).
static double flopsOf(Operation *op) {
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return 2.0 * elementsOf(matmul.getResult()) *
           matmul.getLhs().getType().getShape().back();
  if (auto einsum = dyn_cast<EinsumOp>(op))
    return einsumFlops(einsum.getSpec(), einsum.getInputs());
  if (auto batched = dyn_cast<BatchedEinsumOp>(op))
    return double(batched.getRhs().size()) *
           einsumFlops(batched.getSpec(),
                       {batched.getLhs(), batched.getRhs().front()});
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    // q k^T and p v over the scores a query sees (with `causal`, query i
    // sees keys j <= i: about half), 2 * E and 2 * F each; the softmax 5.
    ArrayRef<int64_t> q = attention.getQuery().getType().getShape();
    ArrayRef<int64_t> k = attention.getKey().getType().getShape();
    int64_t f = attention.getValue().getType().getShape().back();
    int64_t s = q[q.size() - 2], t = k[k.size() - 2];
    double perBatch = double(s) * double(t);
    if (attention.getCausal()) {
      int64_t full = std::max<int64_t>(0, s - t); // queries that see every key
      int64_t ramp = s - full;                    // query i sees i + 1 keys
      perBatch = double(ramp) * double(ramp + 1) / 2 + double(full) * t;
    }
    double scores = perBatch;
    for (int64_t size : q.drop_back(2))
      scores *= size;
    return scores * (2.0 * q.back() + 2.0 * f + 5.0);
  }
  if (isa<LayerNormOp, RMSNormOp>(op))
    return 8.0 * elementsOf(op->getOperand(0));
  if (auto addNorm = dyn_cast<AddNormOp>(op)) // the sums, then the norm
    return (addNorm.getRhsBias() ? 10.0 : 9.0) * elementsOf(op->getOperand(0));
  if (isa<SoftmaxOp>(op))
    return 5.0 * elementsOf(op->getOperand(0));
  if (isa<CrossEntropyOp>(op))
    return 5.0 * elementsOf(op->getOperand(0));
  if (isa<SoftmaxStatsOp>(op)) // max, subtract, exp, add
    return 4.0 * elementsOf(op->getOperand(0));
  if (auto stats = dyn_cast<LogitsStatsOp>(op)) {
    // The product, then softmax_stats over the logits and one pick a row.
    auto rhs = cast<RankedTensorType>(stats.getRhs().getType());
    double rows = elementsOf(stats.getTargets());
    double logits = rows * double(rhs.getDimSize(1));
    return 2.0 * logits * double(rhs.getDimSize(0)) + 4.0 * logits + rows;
  }
  if (isa<SumOp, MeanOp, MaxOp>(op))
    return elementsOf(op->getOperand(0));
  if (isa<GeluOp>(op))
    return 8.0 * elementsOf(op->getResult(0));
  if (isa<AddOp, SubOp, MulOp, DivOp, ReluOp, SiluOp, TanhOp, SigmoidOp, ExpOp,
          LogOp, SqrtOp, RsqrtOp, NegOp, PickOp>(op))
    return elementsOf(op->getResult(0));
  return 0;
}

namespace {
struct AxisTraffic {
  /// Collectives run, and calls that run them (a loom.combined's members
  /// are one call).
  int64_t count = 0, calls = 0;
  double bytes = 0;
};
} // namespace

std::vector<KernelInfo> loom::collectKernels(ModuleOp planned) {
  std::vector<KernelInfo> kernels;
  for (auto function : planned.getOps<func::FuncOp>()) {
    if (!function->hasAttr(LoomDialect::kModelAttrName))
      continue;
    function.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<FusedOp>(op->getParentOp()))
        return WalkResult::skip();
      if (isa<CollectiveOpInterface, CombinedOp, StartOp, WaitOp, PrefetchOp, RepeatOp,
              YieldOp, func::ReturnOp, ConstantOp, func::FuncOp>(op) ||
          isView(op))
        return WalkResult::advance();
      KernelInfo info;
      info.op = op;
      info.name = op->getName().getStringRef().str();
      // Ops made of several name each of them.
      info.at = isa<BatchedEinsumOp, AddNormOp>(op)
                    ? formatSourceLocs(op->getLoc())
                    : formatSourceLoc(op->getLoc());
      info.runs = countIterations(op);
      info.copiedBecause = whyCopied(op);
      for (Value value : op->getOperands())
        info.bytes += bytesOf(value.getType());
      for (Value value : op->getResults())
        info.bytes += bytesOf(value.getType());
      // Gathers read only the rows or elements they pick, not their table.
      if (auto embedding = dyn_cast<EmbeddingOp>(op))
        info.bytes += bytesOf(embedding.getResult().getType()) -
                      bytesOf(embedding.getTable().getType());
      // A slice reads only its piece.
      if (isa<SliceOp>(op))
        info.bytes = 2 * bytesOf(op->getResult(0).getType());
      // A concatenation copies only the pieces not written in place.
      if (auto concat = dyn_cast<ConcatOp>(op)) {
        info.bytes = 0;
        for (Value input : concat.getInputs())
          if (!inPlaceConcatOf(input))
            info.bytes += 2 * bytesOf(input.getType());
      }
      if (auto pick = dyn_cast<PickOp>(op))
        info.bytes +=
            elementsOf(pick.getTargets()) *
                elementBytes(cast<RankedTensorType>(pick.getLogits().getType())) -
            bytesOf(pick.getLogits().getType());
      if (auto fused = dyn_cast<FusedOp>(op)) {
        SmallVector<std::string> names;
        for (Operation &inner : fused.getBody().front().without_terminator()) {
          if (isa<ConstantOp>(inner))
            continue;
          names.push_back(inner.getName().stripDialect().str());
          info.flops += flopsOf(&inner);
        }
        info.name = "fused(" + llvm::join(names, ",") + ")";
      } else {
        info.flops = flopsOf(op);
      }
      kernels.push_back(info);
      return isa<FusedOp>(op) ? WalkResult::skip() : WalkResult::advance();
    });
  }
  return kernels;
}

void loom::printReport(ModuleOp module, llvm::raw_ostream &os, bool json,
                       ModuleOp planned) {
  std::optional<int64_t> arenaBytes, arenaBound;
  // The largest cross-entropy's logits that loom.logits_stats makes a block
  // at a time in the runtime's scratch, outside the arena.
  int64_t logitsBytes = 0;
  std::vector<KernelInfo> kernels;
  // The most bytes any one loop holds in second buffers for the
  // collectives it starts one iteration ahead (loom.prefetch).
  int64_t prefetchBytes = 0;
  if (planned) {
    planned.walk([&](RepeatOp repeat) {
      int64_t bytes = 0;
      for (StartOp start : repeat.getBody().front().getOps<StartOp>())
        if (start.getPrefetch())
          for (Type type : start->getResultTypes())
            bytes += bytesOf(cast<FutureType>(type).getValueType());
      prefetchBytes = std::max(prefetchBytes, bytes);
    });
    for (auto function : planned.getOps<func::FuncOp>())
      for (auto [attrName, largest] :
           {std::pair{LoomDialect::kArenaBytesAttrName, &arenaBytes},
            std::pair{LoomDialect::kArenaBoundAttrName, &arenaBound}})
        if (auto bytes = function->getAttrOfType<IntegerAttr>(attrName))
          *largest = std::max<int64_t>(largest->value_or(0), bytes.getInt());
    kernels = collectKernels(planned);
    planned.walk([&](LogitsStatsOp op) {
      auto rhs = cast<ShapedType>(op.getRhs().getType());
      auto rows = cast<ShapedType>(op.getMax().getType());
      logitsBytes = std::max<int64_t>(
          logitsBytes, rows.getNumElements() * rhs.getShape().back() *
                           op.getLogitsType().getIntOrFloatBitWidth() / 8);
    });
  }
  // Byte counts add in double, like the activations: a sum of 2^48-element
  // tensors (a block called many times) can pass 2^63.
  int64_t numParams = 0;
  double paramBytes = 0, inputBytes = 0, activationBytes = 0, flops = 0;
  std::string meshText;
  for (MeshOp mesh : module.getOps<MeshOp>()) {
    llvm::raw_string_ostream meshOs(meshText);
    meshOs << mesh.getSymName() << " [";
    for (auto [index, pair] :
         llvm::enumerate(llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())))
      meshOs << (index ? ", " : "")
             << cast<StringAttr>(std::get<0>(pair)).getValue() << "="
             << std::get<1>(pair);
    meshOs << "]";
  }
  for (auto function : module.getOps<func::FuncOp>()) {
    if (!function->hasAttr(LoomDialect::kModelAttrName))
      continue;
    for (BlockArgument arg : function.getArguments()) {
      if (function.getArgAttr(arg.getArgNumber(),
                              LoomDialect::kParamAttrName)) {
        paramBytes += bytesOf(arg.getType());
        ++numParams;
      } else {
        inputBytes += bytesOf(arg.getType());
      }
    }
    function.walk([&](Operation *op) {
      if (isa<CollectiveOpInterface, CombinedOp, StartOp, WaitOp, PrefetchOp, RepeatOp,
              ShardOp, YieldOp, func::ReturnOp, ConstantOp>(op))
        return;
      int64_t iterations = countIterations(op);
      flops += flopsOf(op) * iterations;
      for (Value result : op->getResults())
        activationBytes +=
            static_cast<double>(bytesOf(result.getType())) * iterations;
    });
  }
  std::vector<CollectiveInfo> collectives = collectCollectives(module);
  llvm::StringMap<AxisTraffic> traffic;
  std::vector<std::string> order;
  for (const CollectiveInfo &info : collectives) {
    std::string key = llvm::join(info.axes.begin(), info.axes.end(), ",");
    if (!traffic.count(key))
      order.push_back(key);
    AxisTraffic &entry = traffic[key];
    entry.count += info.iterations;
    auto combined = dyn_cast<CombinedOp>(info.op->getParentOp());
    if (!combined || combined.getMembers().front() == info.op)
      entry.calls += info.iterations;
    entry.bytes += info.bytesPerRank * info.iterations;
  }

  if (json) {
    llvm::json::OStream out(os, 2);
    out.object([&] {
      out.attribute("mesh", meshText);
      out.attribute("parameters", numParams);
      out.attribute("parameter_bytes_per_rank", paramBytes);
      out.attribute("input_bytes_per_rank", inputBytes);
      out.attribute("activation_bytes_per_rank", activationBytes);
      out.attribute("flops_per_rank", flops);
      if (arenaBytes)
        out.attribute("arena_bytes_per_rank", *arenaBytes);
      if (arenaBound)
        out.attribute("arena_bound_bytes_per_rank", *arenaBound);
      if (prefetchBytes)
        out.attribute("prefetch_buffer_bytes_per_rank", prefetchBytes);
      if (logitsBytes)
        out.attribute("logits_bytes_per_rank", logitsBytes);
      out.attributeArray("collectives", [&] {
        for (const std::string &key : order) {
          out.object([&] {
            out.attribute("axes", key);
            out.attribute("count", traffic[key].count);
            out.attribute("calls", traffic[key].calls);
            out.attribute("bytes_per_rank", traffic[key].bytes);
          });
        }
      });
      if (planned)
        out.attributeArray("kernels", [&] {
          for (const KernelInfo &kernel : kernels)
            out.object([&] {
              out.attribute("op", kernel.name);
              out.attribute("at", kernel.at);
              out.attribute("runs", kernel.runs);
              out.attribute("bytes_per_run", kernel.bytes);
              out.attribute("flops_per_run", kernel.flops);
              if (!kernel.copiedBecause.empty())
                out.attribute("copied_because", kernel.copiedBecause);
            });
        });
    });
    os << "\n";
    return;
  }
  auto mib = [](double bytes) { return bytes / (1024.0 * 1024.0); };
  os << "per-rank report (one forward pass) on mesh " << meshText << "\n";
  os << llvm::format("  parameters:   %lld tensors, %.0f bytes (%.2f MiB)\n",
                     static_cast<long long>(numParams), paramBytes,
                     mib(paramBytes));
  os << llvm::format("  inputs:       %.0f bytes\n", inputBytes);
  os << llvm::format("  activations:  %.0f bytes (%.2f MiB)\n", activationBytes,
                     mib(activationBytes));
  os << llvm::format("  flops:        %.4g\n", flops);
  if (arenaBytes)
    os << llvm::format("  arena:        %lld bytes (%.2f MiB): peak memory, "
                       "from the memory plan\n",
                       static_cast<long long>(*arenaBytes),
                       mib(double(*arenaBytes)));
  if (arenaBound)
    os << llvm::format("  live bound:   %lld bytes (%.2f MiB): the most the "
                       "plan's buffers hold at one time, below which no "
                       "placement of them fits\n",
                       static_cast<long long>(*arenaBound),
                       mib(double(*arenaBound)));
  if (prefetchBytes)
    os << llvm::format("  prefetch:     %lld bytes (%.2f MiB) of the arena, at "
                       "most, hold a loop's next-iteration buffers of the "
                       "collectives it starts one iteration ahead "
                       "(--overlap-collectives)\n",
                       static_cast<long long>(prefetchBytes),
                       mib(double(prefetchBytes)));
  if (logitsBytes)
    os << llvm::format(
        "  logits:       %lld bytes (%.2f MiB) of a cross-entropy's logits, "
        "made beside the arena a block of columns at a time (%.0f MiB of them "
        "on a CPU; on a GPU 1/%lld of its memory, at least %.0f MiB)\n",
        static_cast<long long>(logitsBytes), mib(double(logitsBytes)),
        mib(double(loomrt::kCpuLogitsBlockBytes)),
        static_cast<long long>(loomrt::kGpuLogitsMemoryShare),
        mib(double(loomrt::kGpuLogitsLeastBytes)));
  os << "  collectives by mesh axes:\n";
  if (order.empty())
    os << "    none\n";
  for (const std::string &key : order) {
    const AxisTraffic &entry = traffic[key];
    os << llvm::format("    %-10s %6lld collectives, ",
                       ("[" + key + "]").c_str(),
                       static_cast<long long>(entry.count));
    if (entry.calls != entry.count)
      os << "run as " << entry.calls << " (loom.combined), ";
    os << llvm::format("%.0f bytes sent per rank\n", entry.bytes);
  }
  if (!planned)
    return;
  // The roofline inputs: what each kernel must move at least once, and its
  // arithmetic; a benchmark divides them by the kernel's measured time.
  os << "  kernels of the generated program (per run: bytes read and written "
        "at least once, FLOPs):\n";
  // The `at` column is as wide as its longest entry (a batched einsum
  // names each of its contractions).
  int atWidth = 22;
  for (const KernelInfo &kernel : kernels)
    atWidth = std::max(atWidth, int(kernel.at.size()));
  os << llvm::format("    %3s  %-36s %-*s %5s %14s %14s %8s\n", "#", "op",
                     atWidth, "at", "runs", "bytes", "flops", "flop/B");
  for (auto [index, kernel] : llvm::enumerate(kernels))
    os << llvm::format("    %3zu  %-36s %-*s %5lld %14.0f %14.0f %8.2f\n",
                       index + 1, kernel.name.substr(0, 36).c_str(), atWidth,
                       kernel.at.c_str(), static_cast<long long>(kernel.runs),
                       kernel.bytes, kernel.flops,
                       kernel.bytes > 0 ? kernel.flops / kernel.bytes : 0.0);
  // Kernels that only move bytes cost bandwidth and a launch each; why
  // each is not a view says what would make it one.
  bool anyCopy = llvm::any_of(kernels, [](const KernelInfo &kernel) {
    return !kernel.copiedBecause.empty();
  });
  if (!anyCopy)
    return;
  os << "  copies (kernels that only move bytes, and why each is not read "
        "in place):\n";
  for (auto [index, kernel] : llvm::enumerate(kernels))
    if (!kernel.copiedBecause.empty())
      os << llvm::format("    %3zu  ", index + 1) << kernel.name << " at "
         << kernel.at << ": " << kernel.copiedBecause << "\n";
}
