//===- Views.h - Values stored in another value's buffer ------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// The memory plan (loom-plan-memory), the report's kernel list and the
// emitters must agree on which values are views: they get no buffer and no
// kernel, and keep the buffer they view alive as long as they are used.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_TRANSFORMS_VIEWS_H
#define LOOM_DIALECT_LOOM_TRANSFORMS_VIEWS_H

#include "mlir/IR/Value.h"

namespace loom {

/// Whether `op` is a transpose read only by contractions (matmul, einsum):
/// they read its input through permuted strides, so it needs no buffer and
/// no kernel. The tied output projection `h @ transpose(wte)` reads the
/// embedding table as it is instead of a transposed copy.
bool isTransposeView(mlir::Operation *op);

/// The value whose buffer `value` uses (reshape and shard results, a
/// repeat's carried and stacked arguments, transposes read only by
/// contractions), or null when it has a buffer of its own.
mlir::Value viewedValue(mlir::Value value);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_TRANSFORMS_VIEWS_H
