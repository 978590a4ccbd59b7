//===- Sharding.h - Checks of shardings against meshes ----------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_SHARDING_H
#define LOOM_DIALECT_LOOM_IR_SHARDING_H

#include "dialects/loom/IR/LoomAttrs.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"

#include <string>

namespace loom {

class MeshOp;

/// The mesh a sharding refers to, looked up from `anchor`, or null.
MeshOp lookupMesh(mlir::Operation *anchor, mlir::FlatSymbolRefAttr mesh);

/// Checks `sharding` for a value of `type`: one entry per dimension, known
/// axes, each axis once, and every dimension divisible by the product of its
/// axes' sizes.
mlir::LogicalResult
verifySharding(mlir::Operation *anchor, ShardingAttr sharding, mlir::Type type,
               llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
               bool checkDivisible = true);

/// The smallest multiple of `multiple` that is at least `size`.
inline int64_t roundUpTo(int64_t size, int64_t multiple) {
  return (size + multiple - 1) / multiple * multiple;
}

/// The sharding recorded for `value` (a function argument's
/// `loom.sharding`, an op result's entry in its op's `loom.sharding`, a
/// `loom.repeat` body argument's entry in `loom.body_shardings`), or null.
ShardingAttr getRecordedSharding(mlir::Value value);

/// Records `sharding` for `value` where getRecordedSharding reads it; the
/// other results of its op get open, replicated shardings if they had none.
void setRecordedSharding(mlir::Value value, ShardingAttr sharding);

/// Number of devices `axes` split a dimension over; manual axes count only
/// when `countManual` is set.
int64_t countDevices(MeshOp mesh, llvm::ArrayRef<mlir::StringAttr> axes,
                     bool countManual = true);

/// The per-device type of a value of global type `type` laid out by
/// `sharding`. Manual (pipeline) axes do not divide: the pipeline pass cuts
/// them.
mlir::RankedTensorType getLocalType(mlir::RankedTensorType type,
                                    ShardingAttr sharding, MeshOp mesh);

/// The bound of the synthetic values of an integer model input: the
/// smallest embedding table or cross-entropy vocabulary (global, also when
/// a vocabulary is split over `loom.pick`'s axes) it indexes, through views;
/// 16 when it indexes none. The executables and `loomc --interpret` must
/// agree on it, for the global program and the per-device one alike.
int64_t syntheticIdBound(mlir::Value input);

/// The one model of `module` for a tool that runs one (`runner`: "an
/// executable", "--interpret"); an error at the module when there is none,
/// and at the second model, with a note at the first, when there are more.
mlir::FailureOr<mlir::Operation *> findSingleModel(mlir::ModuleOp module,
                                                   llvm::StringRef runner);

/// `[{"dp"}, {}, {"tp"}]` with `partial = sum("tp")` when partial: the
/// sharding without its mesh, for messages.
std::string formatDims(ShardingAttr sharding);

/// `text` with each unprintable byte, `\` and `"` written as LLVM escapes
/// them (`\0A` for a newline): a file name goes into messages and into the
/// `//` comments of generated code, which a newline would end.
std::string printableText(llvm::StringRef text);

/// `file:line:col` of the innermost source position in `loc` (inside a
/// block, where the op is written), or `<unknown>`; the file name as
/// printableText.
std::string formatSourceLoc(mlir::Location loc);
/// Each part of a fused location as formatSourceLoc, comma-separated, the
/// file named once while it stays the same (`a.loom:3:7, 4:7`): the ops
/// that became one (the members of a `loom.batched_einsum`).
std::string formatSourceLocs(mlir::Location loc);

/// The user's name for `value` (`%h`), from its NameLoc, or a description
/// of where it comes from.
std::string describeValue(mlir::Value value);
/// An op and where the model writes it, as reasons name it: `loom.layernorm
/// at model.loom:12:7` (a loom.shard is `the sharding constraint`; an op
/// made of several names each place, formatSourceLocs).
std::string describeOp(mlir::Operation *op);
/// What made `value`: its op (describeOp), or the argument it is and where.
std::string describeProducer(mlir::Value value);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_SHARDING_H
