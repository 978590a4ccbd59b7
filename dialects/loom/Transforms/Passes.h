//===- Passes.h - Loom passes -----------------------------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_TRANSFORMS_PASSES_H
#define LOOM_DIALECT_LOOM_TRANSFORMS_PASSES_H

#include "dialects/loom/IR/LoomOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <string>
#include <utility>

namespace loom {

#define GEN_PASS_DECL
#include "dialects/loom/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/loom/Transforms/Passes.h.inc"

/// One `axis=size` entry of a mesh override such as "dp=4,tp=2".
/// Runs `fn` on every global (not yet partitioned) model function of
/// `module` with the module's one mesh; `what` names the step in the error
/// when the module has no mesh or several.
mlir::LogicalResult forEachGlobalModel(
    mlir::ModuleOp module, llvm::StringRef what,
    llvm::function_ref<mlir::LogicalResult(mlir::Operation *, MeshOp)> fn);

struct MeshAxisOverride {
  std::string axis;
  int64_t size;
};

/// Parses "dp=4,tp=2"; on failure `error` says what is wrong.
mlir::FailureOr<llvm::SmallVector<MeshAxisOverride>>
parseMeshOverrides(llvm::StringRef text, std::string &error);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_TRANSFORMS_PASSES_H
