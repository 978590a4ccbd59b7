//===- PrintCollectives.cpp - Report collectives and their bytes ----------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/Transforms/Passes.h"

#include "dialects/loom/IR/TypeInference.h"

#include <cmath>

#define DEBUG_TYPE "loom-print-collectives"

namespace loom {
#define GEN_PASS_DEF_LOOMPRINTCOLLECTIVES
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

/// Whole byte counts print as integers ("6144"), others in shortest form.
static std::string formatBytes(double bytes) {
  if (bytes == std::floor(bytes) && bytes < 9.0e15)
    return std::to_string(static_cast<int64_t>(bytes));
  return formatShortestDouble(bytes);
}

namespace {
struct PrintCollectivesPass
    : public loom::impl::LoomPrintCollectivesBase<PrintCollectivesPass> {
  using LoomPrintCollectivesBase::LoomPrintCollectivesBase;

  void runOnOperation() override {
    getOperation()->walk([&](CollectiveOpInterface op) {
      MeshOp mesh = lookupMesh(op, op.getMeshRef());
      if (!mesh)
        return;
      int64_t groupSize = 1;
      SmallVector<StringRef> axes = op.getGroupAxes();
      for (StringRef axis : axes)
        groupSize *= mesh.getAxisSize(axis).value_or(1);
      InFlightDiagnostic remark = op->emitRemark()
                                  << op->getName().stripDialect() << " over [";
      llvm::interleaveComma(
          axes, remark, [&](StringRef axis) { remark << '"' << axis << '"'; });
      remark << "] (" << groupSize << (groupSize == 1 ? " rank" : " ranks");
      if (std::optional<ReductionKind> kind = op.getReductionKind())
        remark << ", " << stringifyReductionKind(*kind);
      remark << "): " << formatBytes(op.getBytesPerRank(groupSize))
             << " bytes per rank";
      ++numCollectives;
    });
  }
};
} // namespace
