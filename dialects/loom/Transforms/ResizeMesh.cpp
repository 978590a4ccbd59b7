//===- ResizeMesh.cpp - Override mesh axis sizes --------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"

#define DEBUG_TYPE "loom-resize-mesh"

namespace loom {
#define GEN_PASS_DEF_LOOMRESIZEMESH
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

FailureOr<SmallVector<MeshAxisOverride>>
loom::parseMeshOverrides(StringRef text, std::string &error) {
  SmallVector<MeshAxisOverride> overrides;
  SmallVector<StringRef> entries;
  text.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    auto [axis, sizeText] = entry.split('=');
    axis = axis.trim();
    int64_t size;
    if (axis.empty() || sizeText.trim().getAsInteger(10, size) || size < 1) {
      error = ("expected axis=size with a positive size, got '" + entry + "'")
                  .str();
      return failure();
    }
    for (const MeshAxisOverride &previous : overrides)
      if (previous.axis == axis) {
        error = ("axis '" + axis + "' is given twice").str();
        return failure();
      }
    overrides.push_back({axis.str(), size});
  }
  return overrides;
}

namespace {
struct ResizeMeshPass : public loom::impl::LoomResizeMeshBase<ResizeMeshPass> {
  using LoomResizeMeshBase::LoomResizeMeshBase;

  void runOnOperation() override {
    std::string error;
    FailureOr<SmallVector<MeshAxisOverride>> overrides =
        parseMeshOverrides(axes, error);
    if (failed(overrides)) {
      getOperation().emitError("loom-resize-mesh: ") << error;
      return signalPassFailure();
    }
    // A partitioned function's per-device shapes and scales were made for
    // the old sizes; only the global model can take new ones.
    for (auto function : getOperation().getOps<FunctionOpInterface>())
      if (function->hasAttr(LoomDialect::kSpmdAttrName)) {
        function->emitError("loom-resize-mesh: function @")
            << function.getName()
            << " is already partitioned for the mesh's sizes; resize the "
               "global model, before loom-partition";
        return signalPassFailure();
      }
    for (MeshOp mesh : getOperation().getOps<MeshOp>()) {
      SmallVector<int64_t> sizes(mesh.getAxisSizes());
      for (const MeshAxisOverride &entry : *overrides) {
        auto names = mesh.getAxisNames().getAsValueRange<StringAttr>();
        auto it = llvm::find(names, entry.axis);
        if (it == names.end()) {
          mesh.emitError("loom-resize-mesh: mesh @")
              << mesh.getSymName() << " has no axis '" << entry.axis << "'";
          return signalPassFailure();
        }
        sizes[std::distance(names.begin(), it)] = entry.size;
        ++numResized;
      }
      mesh.setAxisSizes(sizes);
    }
    // Shardings that divided the old sizes may not divide the new ones.
    if (failed(verify(getOperation())))
      signalPassFailure();
  }
};
} // namespace
