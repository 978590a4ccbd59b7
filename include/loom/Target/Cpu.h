//===- Cpu.h - C++ code generation for the CPU backend ----------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TARGET_CPU_H
#define LOOM_TARGET_CPU_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {

/// Writes the per-rank program of the module's model as C++ over libloomrt
/// (runtime/include/loomrt.h): the model's description, one `step` function
/// and `main`. The module must be partitioned and planned (loom.fused
/// groups, loom.offsets): the `loom-codegen` pipeline does both.
/// `source` names the .loom file in the program's --help.
mlir::LogicalResult emitCpuProgram(mlir::ModuleOp module, llvm::StringRef source,
                                   llvm::raw_ostream &os);

} // namespace loom

#endif // LOOM_TARGET_CPU_H
