//===- LoomTypes.h - Loom types ---------------------------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMTYPES_H
#define LOOM_DIALECT_LOOM_IR_LOOMTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "dialects/loom/IR/LoomTypes.h.inc"

namespace loom {
/// The bytes of one element of an integer or float type as stored: a whole
/// number of bytes.
int64_t elementBytes(mlir::Type element);
/// The same of a tensor's elements.
inline int64_t elementBytes(mlir::RankedTensorType type) {
  return elementBytes(type.getElementType());
}
/// The bytes of a tensor's elements, each a whole number of bytes. Bytes
/// per element first: elements times bits could overflow where the bytes
/// do not (loom-plan-memory bounds the product).
int64_t tensorBytes(mlir::RankedTensorType type);
/// The same of a value's type, which must be a ranked tensor.
inline int64_t tensorBytes(mlir::Type type) {
  return tensorBytes(mlir::cast<mlir::RankedTensorType>(type));
}
} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_LOOMTYPES_H
