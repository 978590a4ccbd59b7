//===- LoomOps.h - Loom operations ------------------------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_H
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_H

#include "dialects/loom/IR/LoomAttrs.h"
#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomTypes.h"
#include "dialects/loom/IR/ShardingRule.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/loom/IR/LoomInterfaces.h.inc"

namespace loom {
/// What point-to-point sends and receives touch, so that no transformation
/// drops, merges or reorders one of a matched pair.
struct CommunicationResource
    : public mlir::SideEffects::Resource::Base<CommunicationResource> {
  llvm::StringRef getName() override { return "loom.communication"; }
};

/// Most devices of a mesh: MPI numbers ranks with an int. Every device
/// count derived from a valid mesh (a sharding's, the world's, a
/// microbatch's) then fits an int64_t.
constexpr int64_t kMaxMeshDevices = 2147483647;
/// The product of a mesh's axis sizes, or nothing if it overflows int64_t.
std::optional<int64_t> countDevices(llvm::ArrayRef<int64_t> axisSizes);

/// Whether `op` computes each element of its result from its operands'
/// elements at that index (broadcast): the ops that loom-fuse-elementwise
/// groups and that the code generators run as one loop or kernel.
bool isElementwise(mlir::Operation *op);
} // namespace loom

#define GET_OP_CLASSES
#include "dialects/loom/IR/LoomOps.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_H
