//===- WidenFloats.cpp - Compute every floating value in f32 --------------===//
//
// Part of the Loom project.
//
// `loomc --dtype=f32`: the same model with bf16/f16 storage widened to f32,
// so that runs on different meshes can be compared to 1e-5 rather than to
// bf16's 1e-2.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace loom {
#define GEN_PASS_DEF_LOOMWIDENFLOATS
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

Type widen(Type type) {
  // A collective in flight delivers its value's type.
  if (auto future = dyn_cast<FutureType>(type))
    return FutureType::get(type.getContext(), cast<RankedTensorType>(widen(
                                                  future.getValueType())));
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !isa<BFloat16Type, Float16Type>(tensor.getElementType()))
    return type;
  return tensor.clone(Float32Type::get(type.getContext()));
}

struct WidenFloatsPass
    : public loom::impl::LoomWidenFloatsBase<WidenFloatsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    module.walk([](func::FuncOp func) {
      FunctionType type = func.getFunctionType();
      SmallVector<Type> inputs, results;
      for (Type t : type.getInputs())
        inputs.push_back(widen(t));
      for (Type t : type.getResults())
        results.push_back(widen(t));
      func.setFunctionType(
          FunctionType::get(func.getContext(), inputs, results));
    });
    module.walk([](Block *block) {
      for (BlockArgument argument : block->getArguments())
        argument.setType(widen(argument.getType()));
    });
    SmallVector<CastOp> identities;
    module.walk([&](Operation *op) {
      for (OpResult result : op->getResults())
        result.setType(widen(result.getType()));
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto value = cast<DenseElementsAttr>(constant.getValue());
        if (isa<BFloat16Type, Float16Type>(value.getElementType())) {
          auto f32 = Float32Type::get(op->getContext());
          constant.setValueAttr(value.mapValues(f32, [&](const APFloat &x) {
            APFloat wide = x;
            bool losesInfo = false;
            wide.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven,
                         &losesInfo);
            return wide.bitcastToAPInt();
          }));
        }
      }
      if (auto cast = dyn_cast<CastOp>(op))
        if (cast.getInput().getType() == cast.getResult().getType())
          identities.push_back(cast);
    });
    for (CastOp cast : identities) {
      cast.getResult().replaceAllUsesWith(cast.getInput());
      cast.erase();
    }
  }
};

} // namespace
