//===- Frontend.h - From Loom source files to Loom IR ----------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FRONTEND_FRONTEND_H
#define LOOM_FRONTEND_FRONTEND_H

#include "dialects/loom/Transforms/Passes.h"
#include "loom/Frontend/AST.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <string>
#include <vector>

namespace loom {

struct FrontendOptions {
  /// Directories searched for `import "file.loom"` after the importing file's.
  std::vector<std::string> includeDirs;
  /// `--mesh dp=4,tp=2`.
  llvm::SmallVector<MeshAxisOverride> meshOverrides;
};

/// A parsed program: the main file and everything it imports, imports first.
struct Program {
  std::vector<std::unique_ptr<ast::File>> files;
};

/// Parses `path` and, transitively, its imports into `sourceMgr`. Errors go to
/// the context's diagnostic engine; returns failure after any error.
mlir::FailureOr<Program> loadProgram(mlir::MLIRContext &context,
                                     llvm::SourceMgr &sourceMgr,
                                     llvm::StringRef path,
                                     const FrontendOptions &options);

/// Checks `program` and generates its Loom IR. Returns null after reporting
/// every error found.
mlir::OwningOpRef<mlir::ModuleOp>
generateModule(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
               const Program &program, const FrontendOptions &options);

/// The FileLineColLoc of `loc` (UnknownLoc when `loc` is invalid).
mlir::Location toLocation(mlir::MLIRContext &context,
                          const llvm::SourceMgr &sourceMgr, llvm::SMLoc loc);

/// Writes the parameter table of every model in `module`: name, type with
/// sharding, initialiser (`loomc --emit=params`).
void printParams(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace loom

#endif // LOOM_FRONTEND_FRONTEND_H
