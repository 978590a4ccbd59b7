//===- Pipelines.cpp - Named pass pipelines of Loom -----------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "loom/Pipelines/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void loom::buildFrontendCleanupPipeline(mlir::OpPassManager &pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}

void loom::registerLoomPipelines() {
  mlir::PassPipelineRegistration<>(
      "loom-frontend-cleanup",
      "Clean up Loom IR fresh from the front end (what --emit=loom shows)",
      buildFrontendCleanupPipeline);
}
