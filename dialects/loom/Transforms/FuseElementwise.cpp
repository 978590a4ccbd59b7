//===- FuseElementwise.cpp - Fusion groups of element-wise ops ------------===//
//
// Part of the Loom project.
//
// The first half of the code generation plan: element-wise chains become
// one loom.fused op, so every backend emits one loop (one kernel) for them
// and their intermediate values never reach memory.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

bool isScalarConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant &&
         cast<RankedTensorType>(constant.getType()).getNumElements() == 1;
}

/// All uses are by one op (`x * x` uses x twice but has one user).
bool hasOneUser(Value value) {
  Operation *user = nullptr;
  for (Operation *candidate : value.getUsers()) {
    if (user && candidate != user)
      return false;
    user = candidate;
  }
  return user != nullptr;
}

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

struct FuseElementwisePass
    : public loom::impl::LoomFuseElementwiseBase<FuseElementwisePass> {
  using LoomFuseElementwiseBase::LoomFuseElementwiseBase;

  void runOnOperation() override {
    if (maxInputs < 1) {
      getOperation().emitError("loom-fuse-elementwise: max-inputs must be at "
                               "least 1");
      return signalPassFailure();
    }
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) {
      if (!isa<FusedOp>(block->getParentOp()))
        blocks.push_back(block);
    });
    for (Block *block : blocks)
      fuseBlock(*block);
    // Scalar constants copied into groups may have no use left outside.
    getOperation().walk([](ConstantOp constant) {
      if (constant->use_empty() && !isa<FusedOp>(constant->getParentOp()))
        constant->erase();
    });
  }

  /// A cast costs one instruction per element; storing its result costs a
  /// pass over memory. A cast with several users is therefore recomputed:
  /// each element-wise or reducing user of its shape gets its own copy (which
  /// fusion then pulls into that user's group), and a pick reads the cast's
  /// input directly when the cast widens to f32 (pick widens exactly itself).
  /// The values are the same; only the copy in memory goes.
  void splitCasts(Block &block) {
    SmallVector<CastOp> casts;
    for (Operation &op : block)
      if (auto cast = dyn_cast<CastOp>(op))
        casts.push_back(cast);
    for (CastOp cast : casts) {
      Value result = cast.getResult();
      bool widensToF32 =
          getElementTypeOrSelf(result.getType()).isF32() &&
          isa<FloatType>(getElementTypeOrSelf(cast.getInput().getType()));
      for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
        Operation *user = use.getOwner();
        if (user->getBlock() != &block)
          continue;
        if (auto pick = dyn_cast<PickOp>(user)) {
          if (widensToF32 && use.getOperandNumber() == 0)
            use.set(cast.getInput());
          continue;
        }
        bool fusable =
            isElementwise(user) ||
            (isa<SumOp, MeanOp, MaxOp>(user) && use.getOperandNumber() == 0);
        if (!fusable)
          continue;
        OpBuilder builder(user);
        use.set(builder.clone(*cast)->getResult(0));
      }
      if (cast->use_empty())
        cast->erase();
    }
  }

  /// Walks the block backwards: each element-wise op not yet in a group
  /// roots a group and pulls in producers whose only user is in the group.
  void fuseBlock(Block &block) {
    splitCasts(block);
    SmallVector<Operation *> roots;
    for (Operation &op : llvm::reverse(block))
      if (isElementwise(&op) || isa<SumOp, MeanOp, MaxOp>(op))
        roots.push_back(&op);
    llvm::DenseSet<Operation *> taken;
    for (Operation *root : roots) {
      if (taken.contains(root))
        continue;
      llvm::SetVector<Operation *> group;
      // The values the group reads from outside so far.
      llvm::DenseSet<Value> inputs;
      SmallVector<Operation *> work{root};
      // A reduction ends a group over its input's iteration space.
      bool reduction = isa<SumOp, MeanOp, MaxOp>(root);
      if (reduction && shapeOf(root->getOperand(0)).empty())
        continue;
      ArrayRef<int64_t> space =
          shapeOf(reduction ? root->getOperand(0) : root->getResult(0));
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (group.contains(op))
          continue;
        // Joining turns op's result from an input into an inner value and
        // adds op's own operands; the root always joins.
        llvm::SmallDenseSet<Value> added;
        for (Value operand : op->getOperands())
          if (!isScalarConstant(operand) && !inputs.contains(operand))
            added.insert(operand);
        if (op != root && inputs.size() - 1 + added.size() > maxInputs)
          continue;
        group.insert(op);
        inputs.erase(op->getResult(0));
        inputs.insert(added.begin(), added.end());
        for (Value operand : op->getOperands()) {
          Operation *producer = operand.getDefiningOp();
          if (!producer || producer->getBlock() != &block ||
              !isElementwise(producer) || taken.contains(producer) ||
              !hasOneUser(producer->getResult(0)) ||
              shapeOf(producer->getResult(0)) != space)
            continue;
          work.push_back(producer);
        }
      }
      if (group.size() < 2)
        continue;
      for (Operation *op : group)
        taken.insert(op);
      makeFused(group.takeVector(), root);
    }
  }

  void makeFused(SmallVector<Operation *> group, Operation *root) {
    llvm::sort(group, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    llvm::DenseSet<Operation *> members(group.begin(), group.end());
    llvm::SetVector<Value> inputs;
    for (Operation *op : group)
      for (Value operand : op->getOperands())
        if (!members.contains(operand.getDefiningOp()) &&
            !isScalarConstant(operand))
          inputs.insert(operand);

    OpBuilder builder(root);
    auto fused =
        FusedOp::create(builder, root->getLoc(), root->getResult(0).getType(),
                        inputs.getArrayRef());
    Block *body = builder.createBlock(&fused.getBody());
    IRMapping mapping;
    for (Value input : inputs)
      mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
    for (Operation *op : group) {
      for (Value operand : op->getOperands())
        if (!mapping.contains(operand) && isScalarConstant(operand))
          mapping.map(operand,
                      builder.clone(*operand.getDefiningOp())->getResult(0));
      builder.clone(*op, mapping);
    }
    YieldOp::create(builder, root->getLoc(),
                    mapping.lookup(root->getResult(0)));
    root->getResult(0).replaceAllUsesWith(fused.getResult());
    for (Operation *op : llvm::reverse(group))
      op->erase();
    ++numGroups;
    numFusedOps += group.size();
  }
};

} // namespace
