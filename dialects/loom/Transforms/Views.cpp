//===- Views.cpp - Values stored in another value's buffer ----------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Views.h"

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

SmallVector<int64_t> loom::transposeStrides(Operation *op) {
  auto transpose = cast<TransposeOp>(op);
  return applyPermutation(stridesInBuffer(transpose.getInput()),
                          transpose.getPerm());
}

SmallVector<int64_t> loom::transposeStrides(ArrayRef<int64_t> inputShape,
                                            ArrayRef<int64_t> perm) {
  return applyPermutation(computeStrides(inputShape), perm);
}

bool loom::attentionView(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                         AttentionView &view) {
  int rank = int(shape.size());
  if (rank < 2 || (strides[rank - 1] != 1 && shape[rank - 1] != 1))
    return false;
  view = AttentionView();
  view.rowStride = strides[rank - 2];
  if (rank >= 3)
    view.innerStride = strides[rank - 3];
  // The outer batch dimensions merge when each steps over the next whole
  // (dimensions of size 1 have no step).
  int64_t expected = -1;
  for (int d = rank - 4; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    if (expected < 0)
      view.outerStride = strides[d];
    else if (strides[d] != expected)
      return false;
    expected = strides[d] * shape[d];
  }
  return true;
}

static bool piecesAreRuns(Operation *op);

/// Whether each operand of `concat` is one contiguous run of its result:
/// every dimension before the joined one has one element.
static bool concatPiecesAreRuns(loom::ConcatOp concat) {
  auto type = cast<RankedTensorType>(concat.getType());
  for (int64_t d = 0; d < int64_t(concat.getDim()); ++d)
    if (type.getDimSize(d) != 1)
      return false;
  return true;
}

/// A transpose's input's strides when stored in the transpose's row-major
/// order (input dimension perm[i] steps as result dimension i).
static SmallVector<int64_t> stridesInOrderOf(loom::TransposeOp transpose) {
  return applyPermutation(
      computeStrides(cast<RankedTensorType>(transpose.getType()).getShape()),
      invertPermutationVector(transpose.getPerm()));
}

bool loom::isRowMajorInBuffer(Value value) {
  return stridesInBuffer(value) ==
         computeStrides(cast<RankedTensorType>(value.getType()).getShape());
}

SmallVector<int64_t> loom::stridesInBuffer(Value value) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  if (Operation *transpose = storageTranspose(value))
    return stridesInOrderOf(cast<TransposeOp>(transpose));
  Operation *owner = value.getDefiningOp();
  if (owner && isTransposeView(owner))
    return transposeStrides(owner);
  // A strided piece steps as its (row-major) input does, and a piece
  // written into a concatenation as the concatenation does.
  if (owner && isPartView(owner) && !piecesAreRuns(owner))
    return computeStrides(
        cast<RankedTensorType>(owner->getOperand(0).getType()).getShape());
  if (Operation *concat = inPlaceConcatOf(value))
    if (!concatPiecesAreRuns(cast<ConcatOp>(concat)))
      return computeStrides(
          cast<RankedTensorType>(concat->getResult(0).getType()).getShape());
  // A reshape of a strided value steps within that value's runs (a strided
  // piece is read through a reshape only where reshapeStrides finds them).
  if (auto reshape = dyn_cast_or_null<ReshapeOp>(owner))
    if (!isRowMajorInBuffer(reshape.getInput()))
      if (std::optional<SmallVector<int64_t>> stepped = reshapeStrides(
              cast<RankedTensorType>(reshape.getInput().getType()).getShape(),
              stridesInBuffer(reshape.getInput()), shape))
        return *stepped;
  return computeStrides(shape);
}

/// Contractions read each operand through its strides (a GEMM's
/// descriptor). loom.batched_einsum counts too: it replaces matmuls and
/// einsums after the memory plan, which must not turn their operands' views
/// back into values that need a buffer of their own.
static bool readsOperandsThroughStrides(Operation *user) {
  return isa<loom::MatmulOp, loom::EinsumOp, loom::BatchedEinsumOp>(user);
}

Operation *loom::storageTranspose(Value value) {
  if (!value.getDefiningOp<AttentionOp>() || !value.hasOneUse())
    return nullptr;
  auto transpose = dyn_cast<TransposeOp>(*value.getUsers().begin());
  if (!transpose || transpose->use_empty() ||
      !llvm::all_of(transpose->getUsers(), readsOperandsThroughStrides))
    return nullptr;
  // Attention writes its [..., s, f] rows through strides: f must stay
  // last and the outer batch dimensions must merge.
  AttentionView view;
  return attentionView(cast<RankedTensorType>(value.getType()).getShape(),
                       stridesInOrderOf(transpose), view)
             ? transpose.getOperation()
             : nullptr;
}

loom::ContractionLetters loom::contractionLetters(StringRef a, StringRef b,
                                                  StringRef out) {
  ContractionLetters letters;
  std::string seen;
  for (char c : (a + b).str()) {
    if (StringRef(seen).contains(c))
      continue;
    seen += c;
    bool inA = a.contains(c), inB = b.contains(c), inOut = out.contains(c);
    if (inA && inB && inOut)
      letters.batch += c;
    else if (inA && inB)
      letters.k += c;
    else if (inA && inOut)
      letters.m += c;
    else if (inB && inOut)
      letters.n += c;
    else if (inA)
      letters.aSum += c;
    else
      letters.bSum += c;
  }
  return letters;
}

/// The runs of dimensions [0, end) of a value stored at `strides`,
/// innermost first: (elements, innermost stride), each dimension of a run
/// stepping over the ones after it whole. Dimensions of one element step
/// nowhere.
static SmallVector<std::pair<int64_t, int64_t>>
strideRuns(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides, int end) {
  SmallVector<std::pair<int64_t, int64_t>> runs;
  for (int d = end - 1; d >= 0; --d) {
    if (shape[d] == 1)
      continue;
    if (!runs.empty() && strides[d] == runs.back().first * runs.back().second)
      runs.back().first *= shape[d];
    else
      runs.push_back({shape[d], strides[d]});
  }
  return runs;
}

std::optional<loom::RowsView> loom::rowsView(ArrayRef<int64_t> shape,
                                             ArrayRef<int64_t> strides) {
  int rank = int(shape.size());
  if (rank == 0 || (shape.back() != 1 && strides.back() != 1))
    return std::nullopt;
  SmallVector<std::pair<int64_t, int64_t>> runs =
      strideRuns(shape, strides, rank - 1);
  RowsView view;
  if (runs.empty()) {
    view.groupStride = view.rowStride = shape.back();
    return view;
  }
  if (runs.size() > 2)
    return std::nullopt;
  view.group = runs[0].first;
  view.rowStride = runs[0].second;
  view.groupStride =
      runs.size() == 2 ? runs[1].second : runs[0].first * runs[0].second;
  return view;
}

/// The first user of a transpose's `result`, stepping by `strides` in its
/// input's buffer, that does not read it through them, or null where every
/// one does: contractions (and loom.logits_stats's product) by their
/// descriptors, attention where the last dimension stays contiguous and the
/// batch dimensions merge.
static Operation *transposeReaderWithoutStrides(Value result,
                                                ArrayRef<int64_t> strides) {
  for (Operation *user : result.getUsers()) {
    if (readsOperandsThroughStrides(user))
      continue;
    if (auto stats = dyn_cast<loom::LogitsStatsOp>(user)) {
      if (stats.getTargets() != result)
        continue;
      return user;
    }
    loom::AttentionView view;
    if (!isa<loom::AttentionOp>(user) ||
        !loom::attentionView(
            cast<RankedTensorType>(result.getType()).getShape(), strides,
            view))
      return user;
  }
  return nullptr;
}

bool loom::isTransposeView(Operation *op) {
  if (!isa<TransposeOp>(op) || op->use_empty())
    return false;
  return !transposeReaderWithoutStrides(op->getResult(0),
                                        transposeStrides(op));
}

bool loom::readersTakeTransposeOf(Value value, ArrayRef<int64_t> perm) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  SmallVector<int64_t> inputShape(shape.size());
  for (auto [i, from] : llvm::enumerate(perm))
    inputShape[from] = shape[i];
  return !value.use_empty() &&
         !transposeReaderWithoutStrides(value,
                                        transposeStrides(inputShape, perm));
}

std::optional<SmallVector<int64_t>>
loom::reshapeStrides(ArrayRef<int64_t> inShape, ArrayRef<int64_t> inStrides,
                     ArrayRef<int64_t> outShape) {
  SmallVector<std::pair<int64_t, int64_t>> runs =
      strideRuns(inShape, inStrides, int(inShape.size()));
  // Each run must be whole output dimensions, which then step within it.
  SmallVector<int64_t> strides(outShape.size(), 1);
  int d = int(outShape.size()) - 1;
  for (auto [elements, step] : runs) {
    int64_t covered = 1;
    while (covered < elements) {
      if (d < 0)
        return std::nullopt;
      strides[d] = step * covered;
      covered *= outShape[d--];
    }
    // With as many elements on both sides an overshoot would also run out
    // of dimensions later; it is refused where it happens.
    if (covered != elements)
      return std::nullopt;
  }
  for (; d >= 0; --d) {
    if (outShape[d] != 1)
      return std::nullopt;
    if (d + 1 < int(outShape.size()))
      strides[d] = strides[d + 1] * outShape[d + 1];
  }
  return strides;
}

bool loom::isView(Operation *op) {
  if (auto concat = dyn_cast<ConcatOp>(op))
    if (llvm::all_of(concat.getInputs(), [&](Value input) {
          return inPlaceConcatOf(input) == op;
        }))
      return true;
  return (op->getNumResults() == 1 && viewedValue(op->getResult(0))) ||
         isPartView(op);
}

/// Why `piece`, an operand of `concat`, is copied into the concatenation
/// rather than written there by the op that makes it; empty where it is
/// written in place (inPlaceConcatOf).
static StringRef whyPieceCopied(Value piece, loom::ConcatOp concat) {
  auto result = dyn_cast<OpResult>(piece);
  if (!result)
    return "an argument, made by no op";
  if (!piece.hasOneUse())
    return llvm::all_of(piece.getUsers(),
                        [&](Operation *user) { return user == concat; })
               ? "it is more than one of the pieces"
               : "it has other readers";
  Operation *maker = result.getOwner();
  if (concat->getBlock() != maker->getBlock())
    return "it is made in another block";
  if (isa<loom::FusedOp>(maker->getParentOp()))
    return "it is made inside a fusion group";
  if (auto fused = dyn_cast<loom::FusedOp>(maker)) {
    Operation *last = fused.getBody().front().getTerminator()->getPrevNode();
    if (last && isa<loom::SumOp, loom::MeanOp, loom::MaxOp>(last))
      return "its fusion group ends in a reduction, whose loop writes its "
             "result row-major";
  } else if (!loom::isElementwise(maker) &&
             !isa<loom::MatmulOp, loom::EinsumOp, loom::BatchedEinsumOp>(
                 maker)) {
    return "its op writes a buffer of its own, not through strides (only "
           "element-wise ops, fusion groups and contractions do)";
  }
  for (Operation *user : concat->getUsers())
    if (isa<loom::YieldOp, loom::RepeatOp>(user))
      return "a loop yields the concatenation (or starts with it), and a "
             "loop copies its carried values whole";
  return StringRef();
}

Operation *loom::inPlaceConcatOf(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  auto concat = dyn_cast<ConcatOp>(*value.getUsers().begin());
  if (!concat || !whyPieceCopied(value, concat).empty())
    return nullptr;
  return concat;
}

int64_t loom::concatPieceBytes(Value piece) {
  auto concat = cast<ConcatOp>(inPlaceConcatOf(piece));
  auto type = cast<RankedTensorType>(concat.getType());
  int64_t dim = concat.getDim(), start = 0;
  for (Value input : concat.getInputs()) {
    if (input == piece)
      break;
    start += cast<RankedTensorType>(input.getType()).getDimSize(dim);
  }
  return start * computeStrides(type.getShape())[dim] * elementBytes(type);
}

/// The kinds of op whose results may be views of their first operand:
/// viewedValue asks which of them are, returnedThroughViews follows them
/// without asking. A new kind of view goes here first.
static bool mayViewOperand(Operation *op) {
  return isa<loom::ReshapeOp, loom::ShardOp, loom::TransposeOp, loom::SliceOp,
             loom::SplitOp, loom::AllSliceOp, loom::ConcatOp>(op);
}

/// The input and the result shapes of a slice or a split, or no input.
static Value partsOf(Operation *op, SmallVector<ArrayRef<int64_t>> &parts) {
  if (auto slice = dyn_cast<loom::SliceOp>(op)) {
    parts.push_back(cast<RankedTensorType>(slice.getType()).getShape());
    return slice.getInput();
  }
  if (auto split = dyn_cast<loom::SplitOp>(op)) {
    for (Value result : split.getResults())
      parts.push_back(cast<RankedTensorType>(result.getType()).getShape());
    return split.getInput();
  }
  if (auto slice = dyn_cast<loom::AllSliceOp>(op)) {
    parts.push_back(cast<RankedTensorType>(slice.getType()).getShape());
    return slice.getInput();
  }
  return Value();
}

/// Whether the model returns `value`, directly or through ops that may be
/// views of it. Those ops are taken by kind, not asked whether they are
/// views: asking would ask again whether `value`'s own op is one.
static bool returnedThroughViews(Value value) {
  return llvm::any_of(value.getUsers(), [&](Operation *user) {
    if (isa<func::ReturnOp>(user))
      return true;
    return mayViewOperand(user) &&
           llvm::any_of(user->getResults(), returnedThroughViews);
  });
}

/// Whether every piece of a slice, split or all_slice is one contiguous
/// run of its (row-major) input: every dimension before the last one cut
/// has one element.
static bool piecesAreRuns(Operation *op) {
  SmallVector<ArrayRef<int64_t>> parts;
  Value input = partsOf(op, parts);
  ArrayRef<int64_t> in = cast<RankedTensorType>(input.getType()).getShape();
  return llvm::all_of(parts, [&](ArrayRef<int64_t> out) {
    int64_t cut = int64_t(in.size()) - 1;
    while (cut >= 0 && out[cut] == in[cut])
      --cut;
    for (int64_t d = 0; d < cut; ++d)
      if (out[d] != 1)
        return false;
    return true;
  });
}

/// Whether `user` reads `value`, stored at these element strides in
/// another value's buffer, through them: element-wise loops and fusion
/// groups index each operand by its own strides, contractions (and
/// loom.logits_stats's product) by their descriptors, a concatenation
/// copies it through them, attention reads q, k and v whose rows keep
/// their columns contiguous (attentionView), a norm reads rows of
/// contiguous elements in up to two runs (rowsView), and a transpose or
/// reshape that such readers read is a view with strides of its own.
/// Returns null where it does, else the op that does not: `user`, or a
/// reader of the transpose or reshape `user` is.
static Operation *readerWithoutStrides(Operation *user, Value value,
                                       ArrayRef<int64_t> strides) {
  auto refusedUnless = [&](bool reads) { return reads ? nullptr : user; };
  // A concatenation copies such a piece with loomrt_copy_strided.
  if (loom::isElementwise(user) || isa<loom::FusedOp, loom::ConcatOp>(user) ||
      readsOperandsThroughStrides(user))
    return nullptr;
  if (auto stats = dyn_cast<loom::LogitsStatsOp>(user))
    return refusedUnless(stats.getTargets() != value);
  ArrayRef<int64_t> shape = cast<RankedTensorType>(value.getType()).getShape();
  // A norm reads its input's rows where loomrt_rows says; its gains and
  // biases whole.
  if (isa<loom::LayerNormOp, loom::RMSNormOp>(user))
    return refusedUnless(user->getOperand(0) == value &&
                         llvm::count(user->getOperands(), value) == 1 &&
                         loom::rowsView(shape, strides));
  // So does a softmax over the last dimension, and a float's sum, mean or
  // maximum over it alone.
  if (auto softmax = dyn_cast<loom::SoftmaxOp>(user))
    return refusedUnless(int64_t(softmax.getDim()) + 1 ==
                             int64_t(shape.size()) &&
                         loom::rowsView(shape, strides));
  if (isa<loom::SumOp, loom::MeanOp, loom::MaxOp>(user)) {
    ArrayRef<int64_t> dims =
        user->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    return refusedUnless(
        dims.size() == 1 && dims[0] + 1 == int64_t(shape.size()) &&
        isa<FloatType>(
            cast<RankedTensorType>(value.getType()).getElementType()) &&
        loom::rowsView(shape, strides));
  }
  if (isa<loom::AttentionOp>(user)) {
    loom::AttentionView view;
    return refusedUnless(loom::attentionView(shape, strides, view));
  }
  // A transpose or a reshape of it is a view as well, stepping by strides
  // of its own, where every reader of that view takes them.
  if (auto transpose = dyn_cast<loom::TransposeOp>(user)) {
    if (transpose->use_empty())
      return user;
    return transposeReaderWithoutStrides(
        transpose.getResult(), applyPermutation(strides, transpose.getPerm()));
  }
  if (auto reshape = dyn_cast<loom::ReshapeOp>(user)) {
    std::optional<SmallVector<int64_t>> stepped =
        loom::reshapeStrides(shape, strides, reshape.getType().getShape());
    if (!stepped || reshape->use_empty())
      return user;
    for (Operation *reader : reshape->getUsers())
      if (Operation *refusing =
              readerWithoutStrides(reader, reshape.getResult(), *stepped))
        return refusing;
    return nullptr;
  }
  return user;
}

/// whyPartCopied, and where a strided piece's reader does not take its
/// strides, that reader (the first found) in `refusing`.
static StringRef partCopyReason(Operation *op, Operation **refusing) {
  SmallVector<ArrayRef<int64_t>> parts;
  Value input = partsOf(op, parts);
  if (!input)
    return "it is not a slice, split or all_slice";
  // A fusion group's ops compute element by element; they have no buffers.
  if (isa_and_nonnull<loom::FusedOp>(op->getParentOp()))
    return "it is computed in a fusion group";
  if (!loom::isRowMajorInBuffer(input))
    return "its input is stored in another order than row-major";
  // A loop's carried value is overwritten as its iteration ends, by copies
  // that know whole buffers only (carriedMoves): a part of one stays a
  // value of its own.
  for (Value stored = input; stored; stored = loom::viewedValue(stored))
    if (auto argument = dyn_cast<BlockArgument>(stored))
      if (auto repeat = dyn_cast<loom::RepeatOp>(argument.getOwner()->getParentOp()))
        if (argument.getArgNumber() < repeat.getCarried().size())
          return "its input is a loop's carried value, which the "
                 "iteration's end overwrites";
  // Where a rank's piece starts is known only as the program runs, and the
  // runtime's table of outputs holds fixed offsets.
  if (isa<loom::AllSliceOp>(op) && returnedThroughViews(op->getResult(0)))
    return "the model returns it, and the table of outputs holds fixed "
           "offsets";
  if (piecesAreRuns(op))
    return StringRef();
  // Other pieces are strided windows of the input: read in place only by
  // kernels that take each operand's strides.
  ArrayRef<int64_t> inputShape =
      cast<RankedTensorType>(input.getType()).getShape();
  for (Value piece : op->getResults())
    for (Operation *user : piece.getUsers())
      if (Operation *reader = readerWithoutStrides(
              user, piece, computeStrides(inputShape))) {
        if (refusing)
          *refusing = reader;
        return "its pieces are not contiguous runs of the input, and not "
               "every reader takes strides (element-wise ops, contractions, "
               "concatenations, attention, and norms, softmaxes and float "
               "reductions over the last dimension do, and reshapes and "
               "transposes that only they read)";
      }
  return StringRef();
}

StringRef loom::whyPartCopied(Operation *op) {
  return partCopyReason(op, nullptr);
}

std::string loom::whyCopied(Operation *op) {
  if (isa<SliceOp, SplitOp, AllSliceOp>(op)) {
    Operation *refusing = nullptr;
    std::string why = partCopyReason(op, &refusing).str();
    if (refusing)
      why += "; " + describeOp(refusing) + " does not";
    return why;
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    if (isTransposeView(op) || op->use_empty())
      return std::string();
    Operation *refusing = transposeReaderWithoutStrides(
        transpose.getResult(), transposeStrides(op));
    return "not every reader takes permuted strides (contractions do, and "
           "attention where the last dimension stays last); " +
           describeOp(refusing) + " does not";
  }
  auto concat = dyn_cast<ConcatOp>(op);
  if (!concat || isView(op))
    return std::string();
  SmallVector<std::string> pieces;
  for (auto [index, input] : llvm::enumerate(concat.getInputs())) {
    StringRef why = whyPieceCopied(input, concat);
    if (why.empty())
      continue;
    Operation *maker = input.getDefiningOp();
    // A view's op writes nothing: its piece is copied through its strides.
    if (maker && why.starts_with("its op") && isView(maker))
      why = "it is a view of another value's buffer";
    std::string piece = "piece " + std::to_string(index + 1);
    pieces.push_back(maker ? piece + " (" + describeOp(maker) + "): " + why.str()
                           : piece + ": " + why.str());
  }
  return llvm::join(pieces, "; ");
}

bool loom::isPartView(Operation *op) { return whyPartCopied(op).empty(); }

SmallVector<int64_t> loom::pieceStart(OpResult part) {
  Operation *op = part.getOwner();
  if (auto slice = dyn_cast<SliceOp>(op))
    return SmallVector<int64_t>(slice.getStart());
  auto split = cast<SplitOp>(op);
  SmallVector<int64_t> start(
      cast<RankedTensorType>(part.getType()).getRank(), 0);
  for (int64_t size : split.getSizes().take_front(part.getResultNumber()))
    start[split.getDim()] += size;
  return start;
}

int64_t loom::partViewBytes(OpResult part) {
  Operation *op = part.getOwner();
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  SmallVector<int64_t> strides = computeStrides(input.getShape());
  if (isa<AllSliceOp>(op))
    return 0; // the rank's piece: an ArenaStep
  int64_t elements = 0;
  for (auto [start, stride] : llvm::zip(pieceStart(part), strides))
    elements += start * stride;
  return elements * elementBytes(input);
}

bool loom::viewsWholeBuffer(Value value) {
  for (; value; value = viewedValue(value)) {
    if (inPlaceConcatOf(value))
      return false;
    if (auto result = dyn_cast<OpResult>(value))
      if (isPartView(result.getOwner()) || isConcatView(result.getOwner()))
        return false;
  }
  return true;
}

/// The model's argument that `value` is stored in through reshapes, shards
/// and part views (none of them in a loop's body, where a stacked
/// argument's address steps), and where it starts there in bytes; a null
/// argument otherwise.
static std::pair<BlockArgument, int64_t> argumentPiece(Value value) {
  int64_t start = 0;
  while (auto result = dyn_cast<OpResult>(value)) {
    Operation *owner = result.getOwner();
    // An all_slice's piece starts where the rank's index says.
    // A strided piece is not one run of the argument's bytes.
    if (isa<loom::RepeatOp>(owner->getParentOp()) ||
        isa<loom::AllSliceOp>(owner) ||
        !(isa<loom::ReshapeOp, loom::ShardOp>(owner) ||
          (loom::isPartView(owner) && piecesAreRuns(owner))))
      return {};
    if (loom::isPartView(owner))
      start += loom::partViewBytes(result);
    value = owner->getOperand(0);
  }
  auto argument = dyn_cast<BlockArgument>(value);
  if (!argument || !isa<func::FuncOp>(argument.getOwner()->getParentOp()))
    return {};
  return {argument, start};
}

/// How many concatenations read `argument`, directly or through views.
static int concatenationsOf(BlockArgument argument) {
  int count = 0;
  SmallVector<Value> pending{argument};
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (isa<loom::ConcatOp>(user))
        ++count;
      else if (isa<loom::ReshapeOp, loom::ShardOp>(user) ||
               loom::isPartView(user))
        llvm::append_range(pending, user->getResults());
    }
  }
  return count;
}

SmallVector<BlockArgument> loom::concatViewArguments(Operation *op) {
  auto concat = dyn_cast<ConcatOp>(op);
  if (!concat || concat.getInputs().size() < 2 ||
      isa<FusedOp, RepeatOp>(op->getParentOp()))
    return {};
  auto type = cast<RankedTensorType>(concat.getType());
  if (concat.getDim() < 0)
    return {};
  for (uint64_t d = 0; d < concat.getDim(); ++d)
    if (type.getDimSize(d) != 1)
      return {};
  SmallVector<BlockArgument> arguments;
  size_t last = concat.getInputs().size() - 1;
  for (auto [i, input] : llvm::enumerate(concat.getInputs())) {
    auto [argument, start] = argumentPiece(input);
    if (!argument || llvm::is_contained(arguments, argument) ||
        concatenationsOf(argument) != 1)
      return {};
    int64_t whole = tensorBytes(argument.getType());
    // The first piece runs to its argument's end; the others are whole;
    // all but the last fill whole units of the plan's alignment, so that
    // the next argument starts where the piece ends.
    if ((i > 0 && start != 0) ||
        start + tensorBytes(input.getType()) != whole ||
        (i < last && whole % LoomDialect::kArenaAlignment != 0))
      return {};
    arguments.push_back(argument);
  }
  return arguments;
}

bool loom::isConcatView(Operation *op) {
  return !concatViewArguments(op).empty();
}

bool loom::isComputation(Operation *op) {
  return !isa<CollectiveOpInterface, CombinedOp, StartOp, WaitOp, PrefetchOp,
              ConstantOp>(op) &&
         !isView(op) && !op->hasTrait<OpTrait::IsTerminator>();
}

Value loom::viewedValue(Value value) {
  if (auto result = dyn_cast<OpResult>(value)) {
    Operation *owner = result.getOwner();
    if (mayViewOperand(owner) &&
        (isa<ReshapeOp, ShardOp>(owner) || isTransposeView(owner) ||
         isPartView(owner) || isConcatView(owner)))
      return owner->getOperand(0);
    // A combined op's results are its members' buffers; a started
    // collective writes its result's buffer, which the future names and
    // the wait gives.
    if (isa<CombinedOp, StartOp>(owner))
      return owner->getRegion(0).front().getTerminator()->getOperand(
          result.getResultNumber());
    if (auto wait = dyn_cast<WaitOp>(owner))
      return wait.getFuture();
    return nullptr;
  }
  auto argument = cast<BlockArgument>(value);
  auto repeat = dyn_cast<RepeatOp>(argument.getOwner()->getParentOp());
  if (!repeat)
    return nullptr;
  unsigned index = argument.getArgNumber();
  if (index < repeat.getCarried().size())
    return repeat.getResult(index);
  return repeat.getStacked()[index - repeat.getCarried().size()];
}

SmallVector<loom::CarriedMove> loom::carriedMoves(ArrayRef<int> sources) {
  SmallVector<int> from(sources);
  SmallVector<int> pending;
  for (auto [to, source] : llvm::enumerate(sources))
    if (source != int(to))
      pending.push_back(to);
  SmallVector<CarriedMove> moves;
  while (!pending.empty()) {
    auto readByOther = [&](int to) {
      return llvm::any_of(
          pending, [&](int other) { return other != to && from[other] == to; });
    };
    auto ready =
        llvm::find_if(pending, [&](int to) { return !readByOther(to); });
    if (ready == pending.end()) {
      // Only cycles are left: park one buffer's value, which frees it.
      int parked = pending.front();
      moves.push_back({CarriedMove::kScratch, parked});
      for (int other : pending)
        if (from[other] == parked)
          from[other] = CarriedMove::kScratch;
      continue;
    }
    moves.push_back({*ready, from[*ready]});
    pending.erase(ready);
  }
  return moves;
}

int64_t loom::ArenaStep::lastIndex() const {
  if (groupAxes)
    return groupSize - 1;
  return parity ? 1 : cast<RepeatOp>(repeat).getCount() - 1;
}

loom::ArenaAddress loom::arenaAddress(Value value) {
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    Operation *parent = argument.getOwner()->getParentOp();
    if (auto func = dyn_cast<func::FuncOp>(parent)) {
      auto offset = func.getArgAttrOfType<IntegerAttr>(
          argument.getArgNumber(), LoomDialect::kOffsetAttrName);
      return {offset ? offset.getInt() : -1, tensorBytes(value.getType()), {}};
    }
    auto repeat = cast<RepeatOp>(parent);
    unsigned index = argument.getArgNumber();
    if (index < repeat.getCarried().size())
      return arenaAddress(repeat.getResult(index));
    Value stacked = repeat.getStacked()[index - repeat.getCarried().size()];
    ArenaAddress address = arenaAddress(stacked);
    address.steps.push_back({repeat, tensorBytes(argument.getType())});
    return address;
  }
  Operation *op = value.getDefiningOp();
  // A view is read through its strides from its input (a part view from
  // an offset on); a combined or started collective's results live in its
  // members' buffers.
  if (Value viewed = viewedValue(value)) {
    ArenaAddress address = arenaAddress(viewed);
    if (auto slice = dyn_cast<AllSliceOp>(op)) {
      // Rank r of the group keeps piece r, which starts r pieces' extent
      // along the cut dimension in (its bytes, when pieces are runs). The
      // address still spans the whole input, as any rank's piece may.
      auto in = cast<RankedTensorType>(slice.getInput().getType());
      auto out = cast<RankedTensorType>(slice.getType());
      int64_t dim = slice.getDim();
      int64_t pieces = in.getDimSize(dim) / out.getDimSize(dim);
      int64_t step = out.getDimSize(dim) *
                     computeStrides(in.getShape())[dim] * elementBytes(in);
      address.steps.push_back(
          {nullptr, step, false, slice.getAxes(), pieces});
    } else if (isPartView(op) && address.offset >= 0) {
      int64_t start = partViewBytes(cast<OpResult>(value));
      address.offset += start;
      address.bufferBytes -= start;
    }
    return address;
  }
  auto offsets =
      op->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kOffsetsAttrName);
  ArenaAddress address{
      offsets ? offsets[cast<OpResult>(value).getResultNumber()] : -1,
      tensorBytes(value.getType()),
      {}};
  if (Operation *start = prefetchedStartOf(op)) {
    address.steps.push_back(
        {start->getParentOp(), address.bufferBytes, /*parity=*/true});
    address.bufferBytes *= 2;
  }
  return address;
}

Operation *loom::prefetchedStartOf(Operation *op) {
  Operation *parent = op->getParentOp();
  if (isa_and_nonnull<CombinedOp>(parent))
    parent = parent->getParentOp();
  auto start = dyn_cast_or_null<StartOp>(parent);
  return start && start.getPrefetch() ? start.getOperation() : nullptr;
}

std::string loom::matmulSpec(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                             ArrayRef<int64_t> result) {
  int64_t outRank = int64_t(result.size());
  std::string out, lhsSpec, rhsSpec;
  char next = 'a';
  for (int64_t d = 0; d < outRank - 2; ++d)
    out += next++;
  auto batchSpec = [&](ArrayRef<int64_t> shape, std::string &spec) {
    int64_t rank = int64_t(shape.size());
    for (int64_t d = 0; d < rank - 2; ++d) {
      int64_t outDim = d + (outRank - rank);
      spec += shape[d] == result[outDim] ? out[outDim] : next++;
    }
  };
  batchSpec(lhs, lhsSpec);
  batchSpec(rhs, rhsSpec);
  char mLetter = next++, kLetter = next++, nLetter = next++;
  lhsSpec += {mLetter, kLetter};
  rhsSpec += {kLetter, nLetter};
  out += {mLetter, nLetter};
  return lhsSpec + "," + rhsSpec + "->" + out;
}
