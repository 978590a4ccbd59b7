//===- StableValueMap.h - A map from values whose entries stay put -*- C++
//-*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_STABLEVALUEMAP_H
#define LOOM_DIALECT_LOOM_IR_STABLEVALUEMAP_H

#include "mlir/IR/Value.h"

#include <unordered_map>

namespace loom {

struct ValueHash {
  size_t operator()(mlir::Value value) const { return mlir::hash_value(value); }
};

/// A map from values whose entries keep their addresses while others are
/// inserted, unlike llvm::DenseMap's: code that holds a reference to one
/// value's entry (`map[b] = map[a]`, an operand's tensor while a result's is
/// stored) reads freed memory with a DenseMap once the map grows.
template <typename T>
using StableValueMap = std::unordered_map<mlir::Value, T, ValueHash>;

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_STABLEVALUEMAP_H
