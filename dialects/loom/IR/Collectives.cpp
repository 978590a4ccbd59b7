//===- Collectives.cpp - Loom collective ops ------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/TypeInference.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

/// Checks the mesh and axes of a collective; returns the group size n.
static FailureOr<int64_t> verifyGroup(Operation *op, FlatSymbolRefAttr meshRef,
                                      ArrayAttr axes,
                                      SymbolTableCollection &tables,
                                      bool overManualAxis) {
  auto mesh = tables.lookupNearestSymbolFrom<MeshOp>(op, meshRef.getAttr());
  if (!mesh)
    return op->emitOpError("refers to unknown mesh ") << meshRef;
  int64_t size = 1;
  llvm::SmallSet<StringRef, 4> seen;
  for (StringRef axis : axes.getAsValueRange<StringAttr>()) {
    std::optional<int64_t> axisSize = mesh.getAxisSize(axis);
    if (!axisSize)
      return op->emitOpError("runs over axis '")
             << axis << "', which mesh @" << mesh.getSymName()
             << " does not have";
    if (!seen.insert(axis).second)
      return op->emitOpError("lists axis '") << axis << "' twice";
    if (mesh.isManualAxis(axis) != overManualAxis)
      return op->emitOpError(overManualAxis
                                 ? "runs between pipeline stages, over a "
                                   "manual axis, not '"
                                 : "cannot run over the manual axis '")
             << axis << "'";
    size *= *axisSize;
  }
  return size;
}

/// The group size from the mesh, or std::nullopt when it cannot be found.
static std::optional<int64_t>
groupSize(Operation *op, FlatSymbolRefAttr meshRef, ArrayAttr axes) {
  MeshOp mesh = lookupMesh(op, meshRef);
  if (!mesh)
    return std::nullopt;
  int64_t size = 1;
  for (StringRef axis : axes.getAsValueRange<StringAttr>()) {
    std::optional<int64_t> axisSize = mesh.getAxisSize(axis);
    if (!axisSize)
      return std::nullopt;
    size *= *axisSize;
  }
  return size;
}

/// A collective over a group of one is its input.
template <typename OpTy> static OpFoldResult foldGroupOfOne(OpTy op) {
  if (groupSize(op, op.getMeshAttr(), op.getAxes()) == 1)
    return op.getInput();
  return {};
}

static double bytesOf(Type type) {
  return static_cast<double>(tensorBytes(type));
}

/// Checks that `result` has the `expected` shape for a group of `n`.
static LogicalResult verifyResultShape(Operation *op, RankedTensorType input,
                                       RankedTensorType result,
                                       ArrayRef<int64_t> expected, int64_t n) {
  if (result.getShape() == expected)
    return success();
  return op->emitOpError("result must be ")
         << describeType(
                RankedTensorType::get(expected, input.getElementType()))
         << " for a group of " << n << ", got " << describeType(result);
}

/// Checks that `result` is `input` with dimension `dim` scaled: multiplied
/// by n (gather), or divided by n (scatter, slice).
static LogicalResult verifyScaledDim(Operation *op, RankedTensorType input,
                                     RankedTensorType result, int64_t dim,
                                     int64_t n, bool gather) {
  if (failed(verifyDimIndex(op->getLoc(), op->getName().stripDialect(), dim,
                            input.getRank())))
    return failure();
  if (!gather && input.getShape()[dim] % n != 0)
    return op->emitOpError("dimension ")
           << dim << " of " << describeType(input)
           << " is not divisible by the group size " << n;
  SmallVector<int64_t> expected(input.getShape());
  expected[dim] = gather ? expected[dim] * n : expected[dim] / n;
  return verifyResultShape(op, input, result, expected, n);
}

/// The group and shape checks shared by all_gather (gather = true),
/// reduce_scatter and all_slice.
template <typename OpTy>
static LogicalResult
verifyScaledCollective(OpTy op, SymbolTableCollection &tables, bool gather) {
  FailureOr<int64_t> n =
      verifyGroup(op, op.getMeshAttr(), op.getAxes(), tables, false);
  if (failed(n))
    return failure();
  return verifyScaledDim(op, op.getInput().getType(), op.getType(),
                         static_cast<int64_t>(op.getDim()), *n, gather);
}

//===----------------------------------------------------------------------===//
// Verification and bytes
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), tables, false);
}
std::optional<ReductionKind> AllReduceOp::getReductionKind() {
  return getReduction();
}
double AllReduceOp::getBytesPerRank(int64_t n) {
  return 2.0 * (n - 1) * bytesOf(getInput().getType()) / n;
}
OpFoldResult AllReduceOp::fold(FoldAdaptor) { return foldGroupOfOne(*this); }

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyScaledCollective(*this, tables, /*gather=*/true);
}
double AllGatherOp::getBytesPerRank(int64_t n) {
  return static_cast<double>(n - 1) * bytesOf(getType()) / n;
}
/// A group of one, or `op` undoing an `Inverse` of the same axes and
/// dimension (gathering what was sliced, slicing what was gathered), folds
/// to its input.
template <typename Inverse, typename Op>
static OpFoldResult foldRoundTrip(Op op) {
  if (OpFoldResult input = foldGroupOfOne(op))
    return input;
  if (auto inverse = op.getInput().template getDefiningOp<Inverse>())
    if (inverse.getMesh() == op.getMesh() &&
        inverse.getAxes() == op.getAxes() && inverse.getDim() == op.getDim())
      return inverse.getInput();
  return {};
}

OpFoldResult AllGatherOp::fold(FoldAdaptor) {
  return foldRoundTrip<AllSliceOp>(*this);
}

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyScaledCollective(*this, tables, /*gather=*/false);
}
std::optional<ReductionKind> ReduceScatterOp::getReductionKind() {
  return getReduction();
}
double ReduceScatterOp::getBytesPerRank(int64_t n) {
  return static_cast<double>(n - 1) * bytesOf(getInput().getType()) / n;
}
OpFoldResult ReduceScatterOp::fold(FoldAdaptor) {
  return foldGroupOfOne(*this);
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n =
      verifyGroup(*this, getMeshAttr(), getAxes(), tables, false);
  if (failed(n))
    return failure();
  RankedTensorType input = getInput().getType();
  int64_t split = static_cast<int64_t>(getSplitDim());
  int64_t concat = static_cast<int64_t>(getConcatDim());
  if (failed(verifyDimIndex(getLoc(), "all_to_all", split, input.getRank())) ||
      failed(verifyDimIndex(getLoc(), "all_to_all", concat, input.getRank())))
    return failure();
  if (std::optional<ArrayAttr> order = getSplitAxes()) {
    auto sorted = [](ArrayAttr axes) {
      SmallVector<StringRef> names(axes.getAsValueRange<StringAttr>());
      llvm::sort(names);
      return names;
    };
    if (sorted(*order) != sorted(getAxes()))
      return emitOpError("split_axes ")
             << *order << " must be the axes " << getAxes() << " in some order";
  }
  if (input.getShape()[split] % *n != 0)
    return emitOpError("split dimension ")
           << split << " of " << describeType(input)
           << " is not divisible by the group size " << *n;
  SmallVector<int64_t> expected(input.getShape());
  expected[split] /= *n;
  expected[concat] *= *n;
  return verifyResultShape(*this, input, getType(), expected, *n);
}
double AllToAllOp::getBytesPerRank(int64_t n) {
  return static_cast<double>(n - 1) * bytesOf(getInput().getType()) / n;
}
OpFoldResult AllToAllOp::fold(FoldAdaptor) { return foldGroupOfOne(*this); }

LogicalResult AllSliceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyScaledCollective(*this, tables, /*gather=*/false);
}
double AllSliceOp::getBytesPerRank(int64_t) { return 0; }
OpFoldResult AllSliceOp::fold(FoldAdaptor) {
  return foldRoundTrip<AllGatherOp>(*this);
}

LogicalResult
CollectivePermuteOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n =
      verifyGroup(*this, getMeshAttr(), getAxes(), tables, false);
  if (failed(n))
    return failure();
  ArrayRef<int64_t> pairs = getPairs();
  if (pairs.size() % 2 != 0)
    return emitOpError("pairs must list (source, target) ranks, got an odd "
                       "count ")
           << pairs.size();
  llvm::SmallSet<int64_t, 8> sources, targets;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    for (int64_t rank : {pairs[i], pairs[i + 1]})
      if (rank < 0 || rank >= *n)
        return emitOpError("rank ")
               << rank << " is outside the group of " << *n;
    if (!sources.insert(pairs[i]).second)
      return emitOpError("rank ") << pairs[i] << " sends twice";
    if (!targets.insert(pairs[i + 1]).second)
      return emitOpError("rank ") << pairs[i + 1] << " receives twice";
  }
  return success();
}
double CollectivePermuteOp::getBytesPerRank(int64_t) {
  return bytesOf(getInput().getType());
}

LogicalResult BroadcastOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> n =
      verifyGroup(*this, getMeshAttr(), getAxes(), tables, false);
  if (failed(n))
    return failure();
  int64_t root = static_cast<int64_t>(getRootAttr().getInt());
  if (root < 0 || root >= *n)
    return emitOpError("root ") << root << " is outside the group of " << *n;
  return success();
}
double BroadcastOp::getBytesPerRank(int64_t) {
  return bytesOf(getInput().getType());
}
OpFoldResult BroadcastOp::fold(FoldAdaptor) { return foldGroupOfOne(*this); }

/// Send and receive run along one pipeline axis, to a different stage.
static LogicalResult verifyPointToPoint(Operation *op, FlatSymbolRefAttr mesh,
                                        ArrayAttr axes, IntegerAttr offset,
                                        SymbolTableCollection &tables) {
  if (axes.size() != 1)
    return op->emitOpError("runs along exactly one axis, got ") << axes.size();
  FailureOr<int64_t> n = verifyGroup(op, mesh, axes, tables, true);
  if (failed(n))
    return failure();
  if (offset.getInt() % *n == 0)
    return op->emitOpError("offset ")
           << offset.getInt() << " reaches the rank itself (axis "
           << "size " << *n << ")";
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPointToPoint(*this, getMeshAttr(), getAxes(), getOffsetAttr(),
                            tables);
}
double SendOp::getBytesPerRank(int64_t) {
  return bytesOf(getInput().getType());
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPointToPoint(*this, getMeshAttr(), getAxes(), getOffsetAttr(),
                            tables);
}
double RecvOp::getBytesPerRank(int64_t) { return bytesOf(getType()); }

//===----------------------------------------------------------------------===//
// Asynchronous form
//===----------------------------------------------------------------------===//

Operation *StartOp::getStarted() {
  Block &body = getBody().front();
  return body.empty() ? nullptr : &body.front();
}

CollectiveOpInterface StartOp::getCollective() {
  return dyn_cast_or_null<CollectiveOpInterface>(getStarted());
}

LogicalResult StartOp::verifyRegions() {
  Block &body = getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  // Exactly one collective (or loom.combined) with results, and the yield
  // of its results. Backends start these kinds only.
  Operation *started = getStarted();
  if (body.getOperations().size() != 2 ||
      !isa<AllReduceOp, AllGatherOp, ReduceScatterOp, CombinedOp>(started))
    return emitOpError("body must hold exactly one all_reduce, all_gather, "
                       "reduce_scatter or loom.combined, then loom.yield");
  if (getNumResults() != started->getNumResults())
    return emitOpError("returns ")
           << getNumResults() << " futures for a collective of "
           << started->getNumResults() << " results";
  if (!llvm::equal(yield.getValues(), started->getResults()))
    return emitOpError("body must yield its collective's results");
  for (auto [future, value] : llvm::zip(getFutures(), started->getResults()))
    if (cast<FutureType>(future.getType()).getValueType() != value.getType())
      return emitOpError("returns ")
             << future.getType() << " for a collective of type "
             << value.getType();
  return success();
}

PrefetchOp StartOp::getPrefetch() {
  PrefetchOp first;
  for (Value future : getFutures())
    for (Operation *user : future.getUsers())
      if (auto prefetch = dyn_cast<PrefetchOp>(user))
        if (!first || (prefetch->getBlock() == first->getBlock() &&
                       prefetch->isBeforeInBlock(first)))
          first = prefetch;
  return first;
}

StartOp PrefetchOp::getStart() {
  return getFuture().getDefiningOp<StartOp>();
}

/// Whether `value` exists before the first iteration of `repeat` and names
/// the same bytes in every iteration, up to the iteration's slice: a value
/// from outside the loop, a stacked slice, or a reshape or shard (views) of
/// one.
static bool isIterationInvariantAddress(Value value, RepeatOp repeat) {
  Region &body = repeat.getBody();
  if (!body.isAncestor(value.getParentRegion()))
    return true;
  if (auto argument = dyn_cast<BlockArgument>(value))
    return argument.getOwner() == &body.front() &&
           argument.getArgNumber() >= repeat.getCarried().size();
  Operation *op = value.getDefiningOp();
  return isa<ReshapeOp, ShardOp>(op) &&
         isIterationInvariantAddress(op->getOperand(0), repeat);
}

LogicalResult PrefetchOp::verify() {
  StartOp start = getStart();
  if (!start)
    return emitOpError("future must be made by a loom.start");
  auto repeat = dyn_cast<RepeatOp>((*this)->getParentOp());
  if (!repeat || start->getBlock() != (*this)->getBlock())
    return emitOpError("must be in the body of a loom.repeat, in the block "
                       "of its loom.start");
  if (start.getPrefetch() != *this)
    return emitOpError("is the second prefetch of its loom.start");
  bool waited = false;
  for (Value future : start.getFutures())
    for (Operation *user : future.getUsers())
      waited |= isa<WaitOp>(user) && user->getBlock() == (*this)->getBlock() &&
                user->isBeforeInBlock(*this);
  if (!waited)
    return emitOpError("must follow a loom.wait of its loom.start: the "
                       "iteration's collective completes before the next "
                       "one's starts");
  if (!readsIterationInvariants(start, repeat))
    return emitOpError("starts a collective that reads a value made in the "
                       "iteration (not a stacked slice, a value from outside "
                       "the loop, or a view of one): the next iteration's "
                       "does not exist yet");
  return success();
}

bool PrefetchOp::readsIterationInvariants(Operation *op, RepeatOp repeat) {
  return !op
              ->walk([&](Operation *nested) {
                for (Value operand : nested->getOperands())
                  if (!op->isAncestor(operand.getParentRegion()->getParentOp()) &&
                      !isIterationInvariantAddress(operand, repeat))
                    return WalkResult::interrupt();
                return WalkResult::advance();
              })
              .wasInterrupted();
}

CombinedOp CombinedOp::wrap(OpBuilder &builder, ArrayRef<Operation *> members) {
  SmallVector<Type> types;
  SmallVector<Location> locations;
  for (Operation *member : members) {
    types.push_back(member->getResult(0).getType());
    locations.push_back(member->getLoc());
  }
  auto combined =
      CombinedOp::create(builder, builder.getFusedLoc(locations), types);
  OpBuilder inside(builder.getContext());
  Block *body = inside.createBlock(&combined.getBody());
  SmallVector<Value> results;
  for (Operation *member : members) {
    member->moveBefore(body, body->end());
    results.push_back(member->getResult(0));
  }
  YieldOp::create(inside, combined.getLoc(), results);
  return combined;
}

SmallVector<CollectiveOpInterface> CombinedOp::getMembers() {
  SmallVector<CollectiveOpInterface> members;
  for (Operation &op : getBody().front().without_terminator())
    if (auto member = dyn_cast<CollectiveOpInterface>(op))
      members.push_back(member);
  return members;
}

LogicalResult CombinedOp::verifyRegions() {
  Block &body = getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<CollectiveOpInterface> members = getMembers();
  if (members.size() < 2 ||
      members.size() != size_t(llvm::range_size(body.without_terminator())) ||
      !llvm::all_of(members, [](CollectiveOpInterface member) {
        return isa<AllGatherOp, AllReduceOp, ReduceScatterOp>(member);
      }))
    return emitOpError("body must hold two or more all_gathers, all_reduces "
                       "or reduce_scatters, then loom.yield");
  CollectiveOpInterface first = members.front();
  Type elementType = getElementTypeOrSelf(first->getOperand(0).getType());
  for (CollectiveOpInterface member : members) {
    if (member->getName() != first->getName() ||
        member.getMeshRef() != first.getMeshRef() ||
        member.getGroupAxes() != first.getGroupAxes() ||
        member.getReductionKind() != first.getReductionKind())
      return emitOpError("members must be of one kind, over the same mesh "
                         "axes, with the same reduction");
    // A gather moves bits; a reduction adds elements of one type.
    if (!isa<AllGatherOp>(*member) &&
        getElementTypeOrSelf(member->getOperand(0).getType()) != elementType)
      return emitOpError("reducing members must have one element type");
    Operation *writer = member->getOperand(0).getDefiningOp();
    if (writer && writer->getBlock() == &body)
      return emitOpError("a member reads another member's result: they run "
                         "at once");
  }
  if (yield.getValues().size() != members.size() ||
      !llvm::all_of(llvm::zip(yield.getValues(), members), [](auto pair) {
        return std::get<0>(pair) == std::get<1>(pair)->getResult(0);
      }))
    return emitOpError("body must yield its members' results, in order");
  if (getResultTypes() != yield.getValues().getTypes())
    return emitOpError("result types must be the members' result types");
  return success();
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

/// `a` followed by `b`, as one axis list.
static ArrayAttr concatAxes(ArrayAttr a, ArrayAttr b) {
  SmallVector<Attribute> axes(a.begin(), a.end());
  axes.append(b.begin(), b.end());
  return ArrayAttr::get(a.getContext(), axes);
}

static bool disjoint(ArrayAttr a, ArrayAttr b) {
  return llvm::none_of(a, [&](Attribute axis) {
    return llvm::is_contained(b.getValue(), axis);
  });
}

/// The reason the partitioner recorded on `first` or else on `second`,
/// for the one collective that canonicalization makes of them
/// (`--explain` reads it); read before the rewrite erases either.
static Attribute reasonOf(Operation *first, Operation *second) {
  if (Attribute reason = first->getAttr(LoomDialect::kReasonAttrName))
    return reason;
  return second->getAttr(LoomDialect::kReasonAttrName);
}

/// Sets `reason` (if any) on `merged`.
static void keepReason(Operation *merged, Attribute reason) {
  if (reason)
    merged->setAttr(LoomDialect::kReasonAttrName, reason);
}

namespace {
/// all_slice(all_reduce(x)) over the same axes is a reduce_scatter, when
/// nothing else needs the full reduction.
struct AllSliceOfAllReduce : public OpRewritePattern<AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto reduce = slice.getInput().getDefiningOp<AllReduceOp>();
    if (!reduce || !reduce->hasOneUse() ||
        reduce.getMesh() != slice.getMesh() ||
        reduce.getAxes() != slice.getAxes())
      return failure();
    Attribute reason = reasonOf(reduce, slice);
    auto scatter = rewriter.replaceOpWithNewOp<ReduceScatterOp>(
        slice, slice.getType(), reduce.getInput(), slice.getMeshAttr(),
        slice.getAxes(), slice.getDimAttr(), reduce.getReductionAttr());
    keepReason(scatter, reason);
    return success();
  }
};

/// Two slices, or two gathers, of one dimension are one over both axis
/// lists: slicing by A, then the piece by B, is slicing by A then B (minor);
/// gathering over B, then over A, is gathering over A then B. A gather
/// merges only when nothing else needs its inner half.
template <typename OpTy, bool isGather>
struct MergeOnSameDim : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy outer,
                                PatternRewriter &rewriter) const override {
    auto inner = outer.getInput().template getDefiningOp<OpTy>();
    if (!inner || (isGather && !inner->hasOneUse()) ||
        inner.getMesh() != outer.getMesh() ||
        inner.getDim() != outer.getDim() ||
        !disjoint(inner.getAxes(), outer.getAxes()))
      return failure();
    ArrayAttr axes = isGather ? concatAxes(outer.getAxes(), inner.getAxes())
                              : concatAxes(inner.getAxes(), outer.getAxes());
    Attribute reason = reasonOf(inner, outer);
    auto merged = rewriter.replaceOpWithNewOp<OpTy>(
        outer, outer.getType(), inner.getInput(), outer.getMeshAttr(), axes,
        outer.getDimAttr());
    keepReason(merged, reason);
    return success();
  }
};
} // namespace

void AllSliceOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                             MLIRContext *context) {
  patterns.add<AllSliceOfAllReduce, MergeOnSameDim<AllSliceOp, false>>(context);
}

void AllGatherOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<MergeOnSameDim<AllGatherOp, true>>(context);
}

//===----------------------------------------------------------------------===//
// Ops over a vocabulary split across a group (per-device, like collectives)
//===----------------------------------------------------------------------===//

/// `vocab on @mesh [axes]` names a mesh that has those axes, none manual.
static LogicalResult verifyVocabGroup(Operation *op, FlatSymbolRefAttr mesh,
                                      std::optional<ArrayAttr> axes,
                                      SymbolTableCollection &tables) {
  if (!mesh || !axes)
    return success();
  return verifyGroup(op, mesh, *axes, tables, /*overManualAxis=*/false);
}

LogicalResult EmbeddingOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyVocabGroup(*this, getMeshAttr(), getVocabAxes(), tables);
}

LogicalResult PickOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyVocabGroup(*this, getMeshAttr(), getVocabAxes(), tables);
}

LogicalResult LogitsStatsOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyVocabGroup(*this, getMeshAttr(), getVocabAxes(), tables);
}
