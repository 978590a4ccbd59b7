//===- TypeInference.h - Result types of Loom ops ---------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// The shape and element-type rules of every Loom op, in one place. The ops'
// inferReturnTypes and verifiers call them, and so does the front end before
// it builds an op, so a user's shape error is reported at their source line
// with the same words as a verifier error.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_TYPEINFERENCE_H
#define LOOM_DIALECT_LOOM_IR_TYPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/ArrayRef.h"
#include <optional>

namespace loom {

/// Largest element count of one tensor (2^48); beyond it sizes and byte
/// counts overflow downstream. The front end and type inference refuse
/// larger types.
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

using OptLoc = std::optional<mlir::Location>;

/// Element type of a binary op on `lhs` and `rhs`: equal types, or f32 mixed
/// with bf16/f16 (computing in f32). Anything else is an error.
mlir::FailureOr<mlir::Type> inferPromotedElementType(OptLoc loc,
                                                     llvm::StringRef op,
                                                     mlir::Type lhs,
                                                     mlir::Type rhs);
/// NumPy broadcasting of two shapes.
mlir::FailureOr<llvm::SmallVector<int64_t>>
inferBroadcastShape(OptLoc loc, llvm::StringRef op, llvm::ArrayRef<int64_t> lhs,
                    llvm::ArrayRef<int64_t> rhs);

mlir::FailureOr<mlir::RankedTensorType>
inferElementwiseType(OptLoc loc, llvm::StringRef op, mlir::RankedTensorType lhs,
                     mlir::RankedTensorType rhs);
mlir::FailureOr<mlir::RankedTensorType>
inferMatmulType(OptLoc loc, mlir::RankedTensorType lhs,
                mlir::RankedTensorType rhs);
mlir::FailureOr<mlir::RankedTensorType>
inferEinsumType(OptLoc loc, llvm::StringRef spec,
                llvm::ArrayRef<mlir::RankedTensorType> inputs);
/// Whether `type` is a statically shaped tensor of integers or floats: a
/// model's argument or result, and anything the memory plan places, has a
/// size in bytes only then.
bool isStaticNumericTensor(mlir::Type type);
/// Whether a norm's scale or bias may have element type `element` for an
/// input of element type `input`: the input's own, or f32.
bool isNormAffineElement(mlir::Type element, mlir::Type input);
mlir::FailureOr<mlir::RankedTensorType>
inferNormType(OptLoc loc, llvm::StringRef op, mlir::RankedTensorType input,
              llvm::ArrayRef<mlir::RankedTensorType> affine);
mlir::FailureOr<mlir::RankedTensorType>
inferReduceType(OptLoc loc, llvm::StringRef op, mlir::RankedTensorType input,
                llvm::ArrayRef<int64_t> dims, bool keepdim);
mlir::FailureOr<mlir::RankedTensorType>
inferTransposeType(OptLoc loc, mlir::RankedTensorType input,
                   llvm::ArrayRef<int64_t> perm);
mlir::FailureOr<mlir::RankedTensorType>
inferConcatType(OptLoc loc, llvm::ArrayRef<mlir::RankedTensorType> inputs,
                int64_t dim);
mlir::FailureOr<llvm::SmallVector<mlir::Type>>
inferSplitTypes(OptLoc loc, mlir::RankedTensorType input, int64_t dim,
                llvm::ArrayRef<int64_t> sizes);
mlir::FailureOr<mlir::RankedTensorType>
inferSliceType(OptLoc loc, mlir::RankedTensorType input,
               llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit);
mlir::FailureOr<mlir::RankedTensorType>
inferEmbeddingType(OptLoc loc, mlir::RankedTensorType ids,
                   mlir::RankedTensorType table);
mlir::FailureOr<mlir::RankedTensorType>
inferAttentionType(OptLoc loc, mlir::RankedTensorType q,
                   mlir::RankedTensorType k, mlir::RankedTensorType v);
mlir::FailureOr<mlir::RankedTensorType>
inferCrossEntropyType(OptLoc loc, mlir::RankedTensorType logits,
                      mlir::RankedTensorType targets);
/// Checks that `dim` is a valid dimension of a rank-`rank` value.
mlir::LogicalResult verifyDimIndex(OptLoc loc, llvm::StringRef op, int64_t dim,
                                   int64_t rank);

/// The shortest decimal text that reads back as `value` ("0.02", "1e-05"),
/// so printed IR and listings round-trip exactly.
std::string formatShortestDouble(double value);

/// "bf16[2, 4, 8]": how shapes and types appear in messages.
std::string describeType(mlir::Type type);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_TYPEINFERENCE_H
