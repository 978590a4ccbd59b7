//===- Pipelines.cpp - Named pass pipelines of Loom -----------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "loom/Pipelines/Pipelines.h"

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void loom::buildFrontendCleanupPipeline(mlir::OpPassManager &pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}

void loom::buildShardingPipeline(mlir::OpPassManager &pm) {
  buildFrontendCleanupPipeline(pm);
  pm.addPass(createLoomPropagateShardings());
}

void loom::buildSpmdPipeline(mlir::OpPassManager &pm,
                             const SpmdOptions &options) {
  buildShardingPipeline(pm);
  pm.addPass(createLoomPartition());
  // Drops collectives over groups of one, merges reshard chains and
  // identical collectives.
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomHoistCollectives());
  LoomCombineCollectivesOptions combine;
  combine.maxBytes = options.combineBytes;
  pm.addNestedPass<mlir::func::FuncOp>(createLoomCombineCollectives(combine));
}

void loom::buildKernelPlanPipeline(mlir::OpPassManager &pm,
                                   const KernelPlanOptions &options) {
  pm.addNestedPass<mlir::func::FuncOp>(createLoomComposeSlices());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomFuseSoftmaxStats());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomFuseElementwise());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomFuseLogitsStats());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomFuseAddNorm());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomSplitToSlices());
  // After fusion, which would not move ops across a wait, and before the
  // plan, which keeps a started collective's buffers alive to its wait.
  if (options.overlapCollectives)
    pm.addNestedPass<mlir::func::FuncOp>(createLoomOverlapCollectives());
  pm.addPass(createLoomPlanMemory());
  pm.addNestedPass<mlir::func::FuncOp>(createLoomBatchContractions());
}

void loom::buildPlanPipeline(mlir::OpPassManager &pm,
                             const SpmdOptions &options,
                             const KernelPlanOptions &kernelOptions) {
  buildSpmdPipeline(pm, options);
  pm.addNestedPass<mlir::func::FuncOp>(createLoomContractionOrder());
  buildKernelPlanPipeline(pm, kernelOptions);
}

void loom::registerLoomPipelines() {
  mlir::PassPipelineRegistration<>(
      "loom-plan",
      "Partition, then make the plan every backend shares: fusion groups "
      "and the arena (what --emit=cpu generates code from)",
      [](mlir::OpPassManager &pm) { buildPlanPipeline(pm); });
  mlir::PassPipelineRegistration<>(
      "loom-sharding",
      "Clean up and propagate shardings (what --emit=sharded shows)",
      buildShardingPipeline);
  mlir::PassPipelineRegistration<>(
      "loom-spmd",
      "Propagate, partition and simplify collectives (what --emit=spmd shows)",
      [](mlir::OpPassManager &pm) { buildSpmdPipeline(pm); });
  mlir::PassPipelineRegistration<>(
      "loom-frontend-cleanup",
      "Clean up Loom IR fresh from the front end (what --emit=loom shows)",
      buildFrontendCleanupPipeline);
}
