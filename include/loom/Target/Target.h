//===- Target.h - Code generation for the CPU and CUDA backends -*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_TARGET_TARGET_H
#define LOOM_TARGET_TARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {

enum class Target { Cpu, Cuda };

/// Writes the per-rank program of the module's model over libloomrt
/// (runtime/include/loomrt.h): the model's description, one `step` function
/// and `main`. For the CPU it is C++ with one loop per fusion group; for
/// CUDA it is CUDA C++ with one kernel per fusion group, launched on the
/// runtime's stream. Everything else (GEMMs, row kernels, collectives,
/// copies) is the same calls on either target. The module must be
/// partitioned and planned (loom.fused groups, loom.offsets): the
/// `loom-plan` pipeline does both. `source` names the .loom file in the
/// program's --help.
mlir::LogicalResult emitProgram(mlir::ModuleOp module, llvm::StringRef source,
                                Target target, llvm::raw_ostream &os);

} // namespace loom

#endif // LOOM_TARGET_TARGET_H
