//===- Pipelines.h - Named pass pipelines of Loom ---------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// The pipelines loomc runs for each --emit stop point, registered under the
// same names in loom-opt so that every stage can be reproduced from IR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINES_PIPELINES_H
#define LOOM_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace loom {

/// Cleans up freshly generated Loom IR (`--emit=loom`): folds constraints
/// repeated by nested block signatures, merges identical constants and
/// drops values nothing uses.
void buildFrontendCleanupPipeline(mlir::OpPassManager &pm);

/// `--emit=sharded`: the cleanup, then sharding propagation.
void buildShardingPipeline(mlir::OpPassManager &pm);

/// What the SPMD pipeline's collective optimisation may do.
struct SpmdOptions {
  /// The most bytes one loom.combined holds (loom-combine-collectives'
  /// max-bytes); 0 combines none.
  int64_t combineBytes = 32 << 20;
};

/// `--emit=spmd`: propagation, partitioning into the per-device program,
/// and simplification of its collectives.
void buildSpmdPipeline(mlir::OpPassManager &pm,
                       const SpmdOptions &options = {});

/// What the kernel plan may do.
struct KernelPlanOptions {
  /// Start collectives early and wait for them late, so that kernels run
  /// while they communicate (loom-overlap-collectives; loomc
  /// --overlap-collectives, off by default).
  bool overlapCollectives = false;
};

/// The kernels and the arena of a per-device program, which every backend
/// shares (loom-fuse-softmax-stats, loom-fuse-elementwise,
/// loom-overlap-collectives, loom-plan-memory).
void buildKernelPlanPipeline(mlir::OpPassManager &pm,
                             const KernelPlanOptions &options = {});

/// What code generation starts from: the SPMD pipeline, the contraction
/// order (loom-contraction-order), then the kernel plan.
void buildPlanPipeline(mlir::OpPassManager &pm, const SpmdOptions &options = {},
                       const KernelPlanOptions &kernelOptions = {});

/// Registers every Loom pipeline with the global pass registry.
void registerLoomPipelines();

} // namespace loom

#endif // LOOM_PIPELINES_PIPELINES_H
