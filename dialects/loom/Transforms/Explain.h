//===- Explain.h - Collectives and costs of a partitioned model -*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// What `loomc --explain` and `loomc --report` print, shared with the
// `loom-explain-collectives` pass so that remarks and tables agree.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_TRANSFORMS_EXPLAIN_H
#define LOOM_DIALECT_LOOM_TRANSFORMS_EXPLAIN_H

#include "dialects/loom/IR/LoomOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

#include <string>

namespace loom {

/// One collective of a per-device program and why it is there.
struct CollectiveInfo {
  mlir::Operation *op;
  /// `all_reduce(sum)`, `all_gather`, ...
  std::string kind;
  llvm::SmallVector<llvm::StringRef> axes;
  int64_t groupSize;
  /// The per-device input, `4x64x128xbf16`.
  std::string shape;
  double bytesPerRank;
  /// Iterations of the enclosing `loom.repeat`s.
  int64_t iterations;
  /// From `loom.reason`: the value, its layout and the one needed, the ops
  /// that met, and conflicting annotations (empty when not recorded).
  std::string value, from, to, producer, consumer, conflict;
  /// Where a collective started early (loom-overlap-collectives) starts and
  /// is first waited for, and the computations that run in between; empty
  /// when it is not started.
  std::string startedAfter, waitedBefore;
  int64_t computationsBetween = 0;
  /// Started one iteration ahead (loom.prefetch): startedAfter names the op
  /// of the iteration before.
  bool prefetched = false;
};

std::vector<CollectiveInfo> collectCollectives(mlir::Operation *root);

/// One line: kind, axes, shape, bytes per rank, iterations and reason.
std::string describeCollective(const CollectiveInfo &info);

/// The `loomc --explain` table. Of a planned program (after
/// loom-overlap-collectives), it also says where each started collective
/// starts and is waited for.
void printCollectiveTable(mlir::ModuleOp module, llvm::raw_ostream &os);

/// The `loomc --report` summary, as text or as JSON.
/// `planned`, when given, is the same program after the code generation plan
/// (loom-fuse-elementwise, loom-plan-memory): the report then adds the
/// arena (the peak bytes one rank holds) and, per generated kernel, the bytes
/// it must move and its FLOPs.
void printReport(mlir::ModuleOp module, llvm::raw_ostream &os, bool json,
                 mlir::ModuleOp planned = nullptr);

/// One kernel (or library call) of a planned program (after
/// loom-fuse-elementwise and loom-plan-memory): what it must read and write
/// at least once, and its arithmetic, per run. `--report` lists them and
/// generated programs carry them for `--profile`.
struct KernelInfo {
  mlir::Operation *op = nullptr;
  std::string name, at;
  int64_t runs = 1;
  double bytes = 0, flops = 0;
  /// For a kernel that only moves bytes (a slice, split, transpose or
  /// concatenation), why it is not read in place (whyCopied).
  std::string copiedBecause;
};

/// The kernels of the planned program in program order: fusion groups and
/// the ops that are not views, constants, control flow or collectives.
std::vector<KernelInfo> collectKernels(mlir::ModuleOp planned);

/// Product of the counts of the `loom.repeat`s around `op`.
int64_t countIterations(mlir::Operation *op);

/// `4x64x128xbf16`.
std::string formatShape(mlir::Type type);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_TRANSFORMS_EXPLAIN_H
