//===- loom-opt.cpp - Loom optimizer driver -------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the Loom dialect and every Loom pass registered, for testing
// passes one at a time.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/Transforms/Passes.h"
#include "loom/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<loom::LoomDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  loom::registerLoomPasses();
  loom::registerLoomPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
