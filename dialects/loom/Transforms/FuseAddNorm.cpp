//===- FuseAddNorm.cpp - A residual sum and the norm that reads it --------===//
//
// Part of the Loom project.
//
// A pre-norm transformer layer adds a block's output to the residual
// stream and normalises the sum at once: `x = x + attention(h)` then
// `layernorm(x)`. As two kernels the sum is written and read straight
// back (GPT-2 small: 12.6 MB a layer) and the norm waits for a launch of
// its own; loom.add_norm reads the addends once and writes both results.
//
// A layer's last sum, `x + mlp(h)`, is normalised by the next layer's first
// norm, across the loom.repeat's iterations. The repeat is rotated so that
// each iteration ends with that norm (the next layer's gains, stacked
// shifted by one, and the final norm's in the last iteration) and carries
// its result, which the next iteration reads in place of its first norm.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_LOOMFUSEADDNORM
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The addends of a sum that loom.add_norm can make: `lhs + rhs`, or
/// `lhs + (rhs + rhsBias)` with rhsBias a vector over the last dimension.
struct Addends {
  Value lhs, rhs, rhsBias;
  Operation *producer = nullptr; // the add, or the fusion group of both
};

bool isFloatTensorOf(Value value, Type type) {
  return value.getType() == type &&
         isa<FloatType>(cast<RankedTensorType>(type).getElementType());
}

/// `sum` as a loom.add of two operands of its type, or as the fusion group
/// `%t = add %m, %c; %s = add %x, %t; yield %s` (operands in that order,
/// so that the fused op adds in the same order, to the bit) with %c a
/// vector of the sum's element type over its last dimension.
std::optional<Addends> addendsOf(Value sum) {
  Type type = sum.getType();
  if (auto add = sum.getDefiningOp<AddOp>()) {
    if (isFloatTensorOf(add.getLhs(), type) &&
        isFloatTensorOf(add.getRhs(), type))
      return Addends{add.getLhs(), add.getRhs(), Value(), add};
    return std::nullopt;
  }
  auto group = sum.getDefiningOp<FusedOp>();
  if (!group)
    return std::nullopt;
  Block &body = group.getBody().front();
  if (body.getOperations().size() != 3)
    return std::nullopt;
  auto biased = dyn_cast<AddOp>(&body.front());
  auto outer = dyn_cast<AddOp>(body.front().getNextNode());
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!biased || !outer || !yield || yield.getValues().size() != 1 ||
      yield.getValues().front() != outer.getResult() ||
      outer.getRhs() != biased.getResult() || !biased->hasOneUse())
    return std::nullopt;
  // Each operand of the two adds an input of the group, by block argument.
  auto input = [&](Value inner) -> Value {
    auto argument = dyn_cast<BlockArgument>(inner);
    if (!argument || argument.getOwner() != &body)
      return Value();
    return group.getInputs()[argument.getArgNumber()];
  };
  Value lhs = input(outer.getLhs()), rhs = input(biased.getLhs()),
        rhsBias = input(biased.getRhs());
  if (!lhs || !rhs || !rhsBias || !isFloatTensorOf(lhs, type) ||
      !isFloatTensorOf(rhs, type) || biased.getResult().getType() != type)
    return std::nullopt;
  auto tensor = cast<RankedTensorType>(type);
  auto vector = dyn_cast<RankedTensorType>(rhsBias.getType());
  if (!vector || vector.getRank() != 1 || tensor.getRank() == 0 ||
      vector.getDimSize(0) != tensor.getShape().back() ||
      vector.getElementType() != tensor.getElementType())
    return std::nullopt;
  return Addends{lhs, rhs, rhsBias, group};
}

bool isNorm(Operation *op) { return isa<LayerNormOp, RMSNormOp>(op); }

double epsOf(Operation *norm) {
  if (auto layer = dyn_cast<LayerNormOp>(norm))
    return layer.getEps().convertToDouble();
  return cast<RMSNormOp>(norm).getEps().convertToDouble();
}

/// The one norm that reads `value` as its input in `block`, if exactly one
/// does.
Operation *soleNormOf(Value value, Block *block) {
  Operation *found = nullptr;
  for (Operation *user : value.getUsers())
    if (isNorm(user) && user->getOperand(0) == value &&
        user->getBlock() == block) {
      if (found && found != user)
        return nullptr;
      found = user;
    }
  return found;
}

struct FuseAddNormPass
    : public loom::impl::LoomFuseAddNormBase<FuseAddNormPass> {
  void runOnOperation() override {
    SmallVector<RepeatOp> repeats;
    getOperation().walk([&](RepeatOp repeat) { repeats.push_back(repeat); });
    for (RepeatOp repeat : repeats)
      rotate(repeat);
    SmallVector<Operation *> sums;
    getOperation().walk([&](Operation *op) {
      if (isa<AddOp, FusedOp>(op) && !isa<FusedOp>(op->getParentOp()))
        sums.push_back(op);
    });
    DominanceInfo dominance(getOperation());
    for (Operation *sum : sums)
      fuse(sum->getResult(0), dominance);
  }

  /// A sum made as addendsOf says, normalised by a layernorm or rmsnorm of
  /// its block (of its type) whose scale and bias exist where the sum is
  /// made, or where the norm is when nothing else reads the sum before it.
  void fuse(Value sum, DominanceInfo &dominance) {
    std::optional<Addends> addends = addendsOf(sum);
    if (!addends)
      return;
    Operation *producer = addends->producer;
    Operation *norm = nullptr;
    for (Operation *user : sum.getUsers())
      if (isNorm(user) && user->getOperand(0) == sum &&
          user->getBlock() == producer->getBlock() &&
          user->getResult(0).getType() == sum.getType()) {
        norm = user;
        break;
      }
    if (!norm)
      return;
    // The fused op goes where the sum was made, or, where a gain or bias is
    // made after it (a gather of the norm's gains placed just before the
    // norm), where the norm was: only if no other reader of the sum comes
    // before the norm, as all of them will read the fused op's sum.
    Operation *place = producer;
    if (llvm::any_of(norm->getOperands().drop_front(), [&](Value operand) {
          return !dominance.properlyDominates(operand, producer);
        })) {
      for (Operation *user : sum.getUsers()) {
        Operation *inBlock = norm->getBlock()->findAncestorOpInBlock(*user);
        if (user != norm && (!inBlock || !norm->isBeforeInBlock(inBlock)))
          return;
      }
      place = norm;
    }
    bool rms = isa<RMSNormOp>(norm);
    OpBuilder builder(place);
    Type type = sum.getType();
    auto fused = AddNormOp::create(
        builder, builder.getFusedLoc({producer->getLoc(), norm->getLoc()}),
        type, type, addends->lhs, addends->rhs, addends->rhsBias,
        norm->getOperand(1), rms ? Value() : norm->getOperand(2),
        builder.getF64FloatAttr(epsOf(norm)),
        rms ? builder.getUnitAttr() : UnitAttr());
    sum.replaceAllUsesWith(fused.getSum());
    norm->getResult(0).replaceAllUsesWith(fused.getResult());
    norm->erase();
    producer->erase();
    ++numFused;
  }

  /// Rotates `repeat` for each carried value x whose body starts with a norm
  /// of x, whose next value is a sum that loom.add_norm can make, and whose
  /// final value only a norm of the same kind and eps reads:
  ///
  ///   h0 = norm(x0; gains[0])
  ///   repeat carried(x, h) stacked(..., gains shifted: [1..L) then final) {
  ///     ... h in place of norm(x) ...;  x' = sum;  h' = norm(x'; next gains)
  ///   }
  ///   the final norm's result is the repeat's h.
  ///
  /// Every value is computed as before, by the same ops, so the results are
  /// the same to the bit; the sum and the norm after it then fuse.
  void rotate(RepeatOp repeat) {
    for (unsigned k = 0; k < repeat.getCarried().size(); ++k)
      if (RepeatOp rotated = rotateCarried(repeat, k)) {
        repeat = rotated;
        ++numRotated;
      }
  }

  RepeatOp rotateCarried(RepeatOp repeat, unsigned k) {
    Block &body = repeat.getBody().front();
    auto yield = cast<YieldOp>(body.getTerminator());
    unsigned numCarried = repeat.getCarried().size();
    BlockArgument x = body.getArgument(k);
    Value next = yield.getValues()[k], result = repeat.getResult(k);
    Operation *norm = soleNormOf(x, &body);
    std::optional<Addends> sum = addendsOf(next);
    if (!norm || !result.hasOneUse() || !sum ||
        sum->producer->getBlock() != &body)
      return RepeatOp();
    Operation *final = *result.getUsers().begin();
    if (final->getName() != norm->getName() || final->getOperand(0) != result ||
        final->getBlock() != repeat->getBlock() || epsOf(final) != epsOf(norm) ||
        final->getResult(0).getType() != norm->getResult(0).getType())
      return RepeatOp();
    // Each gain or bias of the norm: a stacked slice, or a value from outside
    // that the final norm reads too.
    DominanceInfo dominance(repeat->getParentOp());
    int64_t count = repeat.getCount();
    if (count < 1)
      return RepeatOp();
    SmallVector<int> stackedIndex; // per affine operand; -1 when invariant
    for (auto [inner, outer] : llvm::zip(norm->getOperands().drop_front(),
                                         final->getOperands().drop_front())) {
      auto argument = dyn_cast<BlockArgument>(inner);
      if (argument && argument.getOwner() == &body &&
          argument.getArgNumber() >= numCarried) {
        if (outer.getType() != inner.getType() ||
            !dominance.properlyDominates(outer, repeat))
          return RepeatOp();
        stackedIndex.push_back(int(argument.getArgNumber() - numCarried));
        continue;
      }
      if (inner != outer || !dominance.properlyDominates(inner, repeat))
        return RepeatOp();
      stackedIndex.push_back(-1);
    }

    // Before the loop: the first layer's norm, and the next layers' gains.
    OpBuilder builder(repeat);
    Location loc = norm->getLoc();
    SmallVector<Value> firstAffine, nextStacked;
    for (auto [index, outer] :
         llvm::zip(stackedIndex, final->getOperands().drop_front())) {
      if (index < 0) {
        firstAffine.push_back(outer);
        continue;
      }
      Value stacked = repeat.getStacked()[index];
      auto stackedType = cast<RankedTensorType>(stacked.getType());
      auto slice = cast<RankedTensorType>(outer.getType());
      SmallVector<int64_t> start(stackedType.getRank(), 0),
          limit(stackedType.getShape());
      limit[0] = 1;
      auto oneType = stackedType.clone(ArrayRef<int64_t>(limit));
      Value first =
          SliceOp::create(builder, loc, stacked, builder.getDenseI64ArrayAttr(start),
                          builder.getDenseI64ArrayAttr(limit));
      firstAffine.push_back(ReshapeOp::create(builder, loc, slice, first));
      Value last = ReshapeOp::create(builder, loc, oneType, outer);
      if (count == 1) {
        nextStacked.push_back(last);
        continue;
      }
      start[0] = 1;
      limit[0] = count;
      Value rest = SliceOp::create(builder, loc, stacked,
                                   builder.getDenseI64ArrayAttr(start),
                                   builder.getDenseI64ArrayAttr(limit));
      nextStacked.push_back(ConcatOp::create(builder, loc, ValueRange{rest, last},
                                             builder.getI64IntegerAttr(0)));
    }
    IRMapping firstMapping;
    firstMapping.map(x, repeat.getCarried()[k]);
    for (auto [inner, outer] :
         llvm::zip(norm->getOperands().drop_front(), firstAffine))
      firstMapping.map(inner, outer);
    Value h0 = builder.clone(*norm, firstMapping)->getResult(0);

    // The rotated loop: carries h after the existing carried values, and
    // takes the next layers' gains after the existing stacked operands.
    SmallVector<Value> carried(repeat.getCarried());
    carried.push_back(h0);
    SmallVector<Value> stacked(repeat.getStacked());
    llvm::append_range(stacked, nextStacked);
    SmallVector<Type> resultTypes(repeat.getCarried().getTypes());
    resultTypes.push_back(h0.getType());
    llvm::append_range(resultTypes, repeat.getStackedResults().getTypes());
    auto rotated = RepeatOp::create(builder, repeat.getLoc(), resultTypes,
                                    repeat.getCountAttr(), carried, stacked);
    rotated->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
    rotated.getBody().takeBody(repeat.getBody());
    BlockArgument h = body.insertArgument(numCarried, h0.getType(), loc);
    IRMapping nextMapping;
    nextMapping.map(x, next);
    for (auto [inner, index, outer] :
         llvm::zip(norm->getOperands().drop_front(), stackedIndex,
                   final->getOperands().drop_front()))
      nextMapping.map(inner, index < 0 ? outer
                                       : Value(body.addArgument(
                                             outer.getType(), loc)));
    builder.setInsertionPoint(yield);
    Value hNext = builder.clone(*norm, nextMapping)->getResult(0);
    yield->insertOperands(numCarried, hNext);
    norm->getResult(0).replaceAllUsesWith(h);
    norm->erase();

    for (unsigned i = 0; i < numCarried; ++i)
      repeat.getResult(i).replaceAllUsesWith(rotated.getResult(i));
    for (auto [old, now] :
         llvm::zip(repeat.getStackedResults(), rotated.getStackedResults()))
      old.replaceAllUsesWith(now);
    final->getResult(0).replaceAllUsesWith(rotated.getResult(numCarried));
    final->erase();
    repeat->erase();
    dropUnusedStacked(rotated);
    return rotated;
  }

  /// Stacked operands that no op of the body reads any more (the first
  /// norm's gains, once rotated) are left out.
  void dropUnusedStacked(RepeatOp &repeat) {
    Block &body = repeat.getBody().front();
    unsigned numCarried = repeat.getCarried().size();
    SmallVector<Value> stacked;
    llvm::BitVector unused(body.getNumArguments());
    for (auto [index, operand] : llvm::enumerate(repeat.getStacked())) {
      if (body.getArgument(numCarried + index).use_empty())
        unused.set(numCarried + index);
      else
        stacked.push_back(operand);
    }
    if (unused.none())
      return;
    OpBuilder builder(repeat);
    auto kept = RepeatOp::create(builder, repeat.getLoc(),
                                 repeat.getResultTypes(), repeat.getCountAttr(),
                                 repeat.getCarried(), stacked);
    kept->setDiscardableAttrs(repeat->getDiscardableAttrDictionary());
    kept.getBody().takeBody(repeat.getBody());
    kept.getBody().front().eraseArguments(unused);
    repeat->replaceAllUsesWith(kept);
    repeat->erase();
    repeat = kept;
  }
};

} // namespace
