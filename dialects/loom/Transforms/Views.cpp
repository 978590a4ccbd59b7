//===- Views.cpp - Values stored in another value's buffer ----------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Views.h"

#include "dialects/loom/IR/LoomOps.h"

using namespace mlir;

bool loom::isTransposeView(Operation *op) {
  if (!isa<TransposeOp>(op) || op->use_empty())
    return false;
  return llvm::all_of(op->getUsers(), [](Operation *user) {
    return isa<MatmulOp, EinsumOp>(user);
  });
}

Value loom::viewedValue(Value value) {
  if (auto result = dyn_cast<OpResult>(value)) {
    Operation *owner = result.getOwner();
    if (isa<ReshapeOp, ShardOp>(owner) || isTransposeView(owner))
      return owner->getOperand(0);
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
