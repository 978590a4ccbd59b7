//===- Sharding.h - Checks of shardings against meshes ----------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_SHARDING_H
#define LOOM_DIALECT_LOOM_IR_SHARDING_H

#include "dialects/loom/IR/LoomAttrs.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"

namespace loom {

class MeshOp;

/// The mesh a sharding refers to, looked up from `anchor`, or null.
MeshOp lookupMesh(mlir::Operation *anchor, mlir::FlatSymbolRefAttr mesh);

/// Checks `sharding` for a value of `type`: one entry per dimension, known
/// axes, each axis once, and every dimension divisible by the product of its
/// axes' sizes.
mlir::LogicalResult
verifySharding(mlir::Operation *anchor, ShardingAttr sharding, mlir::Type type,
               llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The smallest multiple of `multiple` that is at least `size`.
inline int64_t roundUpTo(int64_t size, int64_t multiple) {
  return (size + multiple - 1) / multiple * multiple;
}

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_SHARDING_H
