//===- TypeInference.cpp - Result types of Loom ops -----------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/TypeInference.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>

using namespace mlir;

namespace loom {

std::string formatShortestDouble(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  if (text.find_first_of("ni") != std::string::npos)
    return text; // nan, inf
  // MLIR's float syntax needs a '.' in the mantissa: 1e-20 -> 1.0e-20.
  size_t exponent = text.find('e');
  std::string mantissa = text.substr(0, exponent);
  if (mantissa.find('.') == std::string::npos)
    mantissa += ".0";
  return exponent == std::string::npos ? mantissa
                                       : mantissa + text.substr(exponent);
}

static std::string describeShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

static std::string describeElement(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

std::string describeType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return describeElement(type);
  return describeElement(tensor.getElementType()) +
         describeShape(tensor.getShape());
}

FailureOr<Type> inferPromotedElementType(OptLoc loc, StringRef op, Type lhs,
                                         Type rhs) {
  if (lhs == rhs)
    return lhs;
  bool lhsFloat = isa<FloatType>(lhs), rhsFloat = isa<FloatType>(rhs);
  if (lhsFloat && rhsFloat && (lhs.isF32() || rhs.isF32()))
    return Type(Float32Type::get(lhs.getContext()));
  return emitOptionalError(loc, op, ": element types ", describeElement(lhs),
                           " and ", describeElement(rhs),
                           " do not mix; only f32 with bf16/f16 promotes "
                           "implicitly, use cast() for the rest");
}

FailureOr<SmallVector<int64_t>> inferBroadcastShape(OptLoc loc, StringRef op,
                                                    ArrayRef<int64_t> lhs,
                                                    ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l != r && l != 1 && r != 1)
      return emitOptionalError(
          loc, op, ": shapes ", describeShape(lhs), " and ", describeShape(rhs),
          " do not broadcast (dimension ", i, " is ", l, " vs ", r, ")");
    shape[i] = l == 1 ? r : l;
  }
  return shape;
}

FailureOr<RankedTensorType> inferElementwiseType(OptLoc loc, StringRef op,
                                                 RankedTensorType lhs,
                                                 RankedTensorType rhs) {
  FailureOr<Type> element = inferPromotedElementType(
      loc, op, lhs.getElementType(), rhs.getElementType());
  if (failed(element))
    return failure();
  FailureOr<SmallVector<int64_t>> shape =
      inferBroadcastShape(loc, op, lhs.getShape(), rhs.getShape());
  if (failed(shape))
    return failure();
  return RankedTensorType::get(*shape, *element);
}

FailureOr<RankedTensorType> inferMatmulType(OptLoc loc, RankedTensorType lhs,
                                            RankedTensorType rhs) {
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(
        loc, "matmul needs operands of rank 2 or more, got ", describeType(lhs),
        " @ ", describeType(rhs), "; reshape vectors to matrices first");
  int64_t k = lhs.getShape().back();
  int64_t k2 = rhs.getShape()[rhs.getRank() - 2];
  if (k != k2)
    return emitOptionalError(
        loc, "matmul inner dimensions differ: ", describeType(lhs), " @ ",
        describeType(rhs), " (", k, " vs ", k2, ")");
  FailureOr<Type> element = inferPromotedElementType(
      loc, "matmul", lhs.getElementType(), rhs.getElementType());
  if (failed(element))
    return failure();
  FailureOr<SmallVector<int64_t>> batch = inferBroadcastShape(
      loc, "matmul batch dimensions", lhs.getShape().drop_back(2),
      rhs.getShape().drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> shape = *batch;
  shape.push_back(lhs.getShape()[lhs.getRank() - 2]);
  shape.push_back(rhs.getShape().back());
  return RankedTensorType::get(shape, *element);
}

FailureOr<RankedTensorType> inferEinsumType(OptLoc loc, StringRef spec,
                                            ArrayRef<RankedTensorType> inputs) {
  auto [lhsSpec, outSpec] = spec.split("->");
  if (!spec.contains("->"))
    return emitOptionalError(loc, "einsum spec '", spec,
                             "' needs an explicit output, as in \"ij,jk->ik\"");
  SmallVector<StringRef> operandSpecs;
  lhsSpec.split(operandSpecs, ',');
  if (operandSpecs.size() != inputs.size())
    return emitOptionalError(loc, "einsum spec '", spec, "' names ",
                             operandSpecs.size(), " operand(s) but ",
                             inputs.size(), " were given");
  if (inputs.empty() || inputs.size() > 2)
    return emitOptionalError(loc, "einsum takes one or two operands, got ",
                             inputs.size());
  std::optional<int64_t> sizes[26];
  Type element = inputs.front().getElementType();
  for (auto [index, operandSpec, input] :
       llvm::enumerate(operandSpecs, inputs)) {
    if (index > 0) {
      FailureOr<Type> promoted = inferPromotedElementType(
          loc, "einsum", element, input.getElementType());
      if (failed(promoted))
        return failure();
      element = *promoted;
    }
    if (static_cast<int64_t>(operandSpec.size()) != input.getRank())
      return emitOptionalError(loc, "einsum operand ", index, " has rank ",
                               input.getRank(), " (", describeType(input),
                               ") but its subscripts '", operandSpec, "' name ",
                               operandSpec.size(), " dimension(s)");
    for (auto [dim, letter] : llvm::enumerate(operandSpec)) {
      if (letter < 'a' || letter > 'z')
        return emitOptionalError(loc, "einsum subscript '",
                                 StringRef(&letter, 1),
                                 "' is not a lower-case letter");
      std::optional<int64_t> &size = sizes[letter - 'a'];
      int64_t actual = input.getShape()[dim];
      if (size && *size != actual)
        return emitOptionalError(loc, "einsum subscript '",
                                 StringRef(&letter, 1), "' has size ", *size,
                                 " in one place and ", actual, " in another");
      size = actual;
    }
  }
  SmallVector<int64_t> shape;
  bool seen[26] = {};
  for (char letter : outSpec) {
    if (letter < 'a' || letter > 'z')
      return emitOptionalError(loc, "einsum subscript '", StringRef(&letter, 1),
                               "' is not a lower-case letter");
    if (seen[letter - 'a'])
      return emitOptionalError(loc, "einsum output subscript '",
                               StringRef(&letter, 1), "' appears twice");
    seen[letter - 'a'] = true;
    if (!sizes[letter - 'a'])
      return emitOptionalError(loc, "einsum output subscript '",
                               StringRef(&letter, 1),
                               "' does not appear in any operand");
    shape.push_back(*sizes[letter - 'a']);
  }
  return RankedTensorType::get(shape, element);
}

bool isStaticNumericTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() &&
         isa<FloatType, IntegerType>(tensor.getElementType());
}

bool isNormAffineElement(Type element, Type input) {
  return element == input || element.isF32();
}

FailureOr<RankedTensorType> inferNormType(OptLoc loc, StringRef op,
                                          RankedTensorType input,
                                          ArrayRef<RankedTensorType> affine) {
  for (RankedTensorType param : affine) {
    if (param.getRank() == 0 || param.getRank() > input.getRank() ||
        param.getShape() != input.getShape().take_back(param.getRank()))
      return emitOptionalError(
          loc, op, ": scale/bias ", describeType(param),
          " must match the trailing dimensions of the input ",
          describeType(input));
    if (param.getShape() != affine.front().getShape())
      return emitOptionalError(loc, op, ": scale ",
                               describeType(affine.front()), " and bias ",
                               describeType(param), " have different shapes");
    Type element = param.getElementType();
    if (!isNormAffineElement(element, input.getElementType()))
      return emitOptionalError(loc, op, ": scale/bias element type ",
                               describeType(element), " must be the input's (",
                               describeType(input.getElementType()),
                               ") or f32");
  }
  // The kernels read scale and bias as one type (the front end widens a
  // narrower one to f32).
  if (affine.size() == 2 &&
      affine[0].getElementType() != affine[1].getElementType())
    return emitOptionalError(loc, op, ": scale ", describeType(affine[0]),
                             " and bias ", describeType(affine[1]),
                             " have different element types");
  return input;
}

LogicalResult verifyDimIndex(OptLoc loc, StringRef op, int64_t dim,
                             int64_t rank) {
  if (dim < 0 || dim >= rank)
    return emitOptionalError(loc, op, ": dimension ", dim,
                             " is out of range for a rank-", rank, " value");
  return success();
}

FailureOr<RankedTensorType> inferReduceType(OptLoc loc, StringRef op,
                                            RankedTensorType input,
                                            ArrayRef<int64_t> dims,
                                            bool keepdim) {
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (failed(verifyDimIndex(loc, op, dim, input.getRank())))
      return failure();
    if (i > 0 && dims[i - 1] >= dim)
      return emitOptionalError(loc, op,
                               ": reduced dimensions must be sorted and "
                               "distinct");
  }
  SmallVector<int64_t> shape;
  for (auto [i, size] : llvm::enumerate(input.getShape())) {
    bool reduced = llvm::is_contained(dims, static_cast<int64_t>(i));
    if (!reduced)
      shape.push_back(size);
    else if (keepdim)
      shape.push_back(1);
  }
  return RankedTensorType::get(shape, input.getElementType());
}

FailureOr<RankedTensorType>
inferTransposeType(OptLoc loc, RankedTensorType input, ArrayRef<int64_t> perm) {
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return emitOptionalError(loc, "transpose: permutation has ", perm.size(),
                             " entries for a rank-", input.getRank(), " value");
  SmallVector<bool> used(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || used[p])
      return emitOptionalError(
          loc, "transpose: [", describeShape(perm).substr(1),
          " is not a permutation of 0..", input.getRank() - 1);
    used[p] = true;
    shape.push_back(input.getShape()[p]);
  }
  return RankedTensorType::get(shape, input.getElementType());
}

FailureOr<RankedTensorType>
inferConcatType(OptLoc loc, ArrayRef<RankedTensorType> inputs, int64_t dim) {
  if (inputs.empty())
    return emitOptionalError(loc, "concat needs at least one operand");
  RankedTensorType first = inputs.front();
  if (failed(verifyDimIndex(loc, "concat", dim, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (RankedTensorType input : inputs.drop_front()) {
    if (input.getElementType() != first.getElementType())
      return emitOptionalError(loc, "concat: operands have element types ",
                               describeType(first.getElementType()), " and ",
                               describeType(input.getElementType()));
    bool compatible = input.getRank() == first.getRank();
    for (int64_t i = 0; compatible && i < first.getRank(); ++i)
      compatible = i == dim || input.getShape()[i] == first.getShape()[i];
    if (!compatible)
      return emitOptionalError(loc, "concat: ", describeType(first), " and ",
                               describeType(input),
                               " differ outside dimension ", dim);
    shape[dim] += input.getShape()[dim]; // each at most 2^48: no overflow
    int64_t elements = 1; // at most 2^48 before this operand, 2^49 after
    for (int64_t size : shape)
      elements *= size;
    if (elements > kMaxTensorElements)
      return emitOptionalError(loc, "concat: the result has more than 2^48 "
                                    "elements");
  }
  return RankedTensorType::get(shape, first.getElementType());
}

FailureOr<SmallVector<Type>> inferSplitTypes(OptLoc loc, RankedTensorType input,
                                             int64_t dim,
                                             ArrayRef<int64_t> sizes) {
  if (failed(verifyDimIndex(loc, "split", dim, input.getRank())))
    return failure();
  int64_t total = 0;
  SmallVector<Type> types;
  for (int64_t size : sizes) {
    if (size <= 0)
      return emitOptionalError(loc, "split: piece sizes must be positive, got ",
                               size);
    // A sum that wrapped around could equal the dimension's size.
    if (llvm::AddOverflow(total, size, total))
      return emitOptionalError(
          loc, "split: piece sizes add up to more than 2^63 - 1 but dimension ",
          dim, " of ", describeType(input), " is ", input.getShape()[dim]);
    SmallVector<int64_t> shape(input.getShape());
    shape[dim] = size;
    types.push_back(RankedTensorType::get(shape, input.getElementType()));
  }
  if (total != input.getShape()[dim])
    return emitOptionalError(
        loc, "split: piece sizes add up to ", total, " but dimension ", dim,
        " of ", describeType(input), " is ", input.getShape()[dim]);
  return types;
}

FailureOr<RankedTensorType> inferSliceType(OptLoc loc, RankedTensorType input,
                                           ArrayRef<int64_t> start,
                                           ArrayRef<int64_t> limit) {
  if (static_cast<int64_t>(start.size()) != input.getRank() ||
      static_cast<int64_t>(limit.size()) != input.getRank())
    return emitOptionalError(loc,
                             "slice: bounds must have one entry per "
                             "dimension of ",
                             describeType(input));
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < input.getRank(); ++i) {
    if (start[i] < 0 || start[i] >= limit[i] || limit[i] > input.getShape()[i])
      return emitOptionalError(loc, "slice: [", start[i], ", ", limit[i],
                               ") is not a non-empty range inside dimension ",
                               i, " of size ", input.getShape()[i]);
    shape.push_back(limit[i] - start[i]);
  }
  return RankedTensorType::get(shape, input.getElementType());
}

FailureOr<RankedTensorType> inferEmbeddingType(OptLoc loc, RankedTensorType ids,
                                               RankedTensorType table) {
  if (!isa<IntegerType>(ids.getElementType()))
    return emitOptionalError(loc, "embedding: ids must be i32 or i64, got ",
                             describeType(ids));
  if (table.getRank() != 2)
    return emitOptionalError(loc, "embedding: the table must be [V, D], got ",
                             describeType(table));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getShape()[1]);
  return RankedTensorType::get(shape, table.getElementType());
}

FailureOr<RankedTensorType> inferAttentionType(OptLoc loc, RankedTensorType q,
                                               RankedTensorType k,
                                               RankedTensorType v) {
  if (q.getRank() < 2 || k.getRank() != q.getRank() ||
      v.getRank() != q.getRank())
    return emitOptionalError(loc,
                             "attention: q, k and v must have the same "
                             "rank (2 or more), got ",
                             describeType(q), ", ", describeType(k), ", ",
                             describeType(v));
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOptionalError(loc,
                             "attention: q, k and v must share an element "
                             "type, got ",
                             describeType(q), ", ", describeType(k), ", ",
                             describeType(v));
  int64_t rank = q.getRank();
  if (q.getShape().drop_back(2) != k.getShape().drop_back(2) ||
      q.getShape().drop_back(2) != v.getShape().drop_back(2))
    return emitOptionalError(
        loc, "attention: batch dimensions differ: ", describeType(q), ", ",
        describeType(k), ", ", describeType(v));
  if (q.getShape()[rank - 1] != k.getShape()[rank - 1])
    return emitOptionalError(loc, "attention: q and k head dimensions differ: ",
                             describeType(q), " vs ", describeType(k));
  if (k.getShape()[rank - 2] != v.getShape()[rank - 2])
    return emitOptionalError(loc,
                             "attention: k and v sequence lengths "
                             "differ: ",
                             describeType(k), " vs ", describeType(v));
  SmallVector<int64_t> shape(q.getShape());
  shape.back() = v.getShape().back();
  return RankedTensorType::get(shape, q.getElementType());
}

FailureOr<RankedTensorType> inferCrossEntropyType(OptLoc loc,
                                                  RankedTensorType logits,
                                                  RankedTensorType targets) {
  if (!isa<FloatType>(logits.getElementType()) || logits.getRank() < 1)
    return emitOptionalError(loc,
                             "cross_entropy: logits must be a float "
                             "tensor [..., V], got ",
                             describeType(logits));
  if (!isa<IntegerType>(targets.getElementType()))
    return emitOptionalError(loc,
                             "cross_entropy: targets must be i32 or i64, "
                             "got ",
                             describeType(targets));
  if (logits.getShape().drop_back() != targets.getShape())
    return emitOptionalError(
        loc, "cross_entropy: targets ", describeType(targets),
        " must have the shape of logits ", describeType(logits),
        " without its last "
        "dimension");
  return RankedTensorType::get({}, Float32Type::get(logits.getContext()));
}

} // namespace loom
