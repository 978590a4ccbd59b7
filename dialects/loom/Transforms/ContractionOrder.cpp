//===- ContractionOrder.cpp - Einsums in the order a GEMM writes ----------===//
//
// Part of the Loom project.
//
// Part of the code generation plan: an einsum read only by attention is
// computed in the order a GEMM writes it and read through a transpose view,
// so that a head-split projection is one plain GEMM.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCONTRACTIONORDER
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The result letters of `a,b` in the order a GEMM writes them: batch
/// letters (in both operands and the result), then the first operand's
/// free letters, then the second's, each in order of appearance (the
/// emitters' grouping of a contraction's dimensions).
std::string gemmOrder(StringRef a, StringRef b, StringRef out) {
  std::string batch, m, n;
  for (char c : (a + b).str()) {
    if (!out.contains(c) || StringRef(batch + m + n).contains(c))
      continue;
    if (a.contains(c) && b.contains(c))
      batch += c;
    else if (a.contains(c))
      m += c;
    else
      n += c;
  }
  return batch + m + n;
}

struct ContractionOrderPass
    : public loom::impl::LoomContractionOrderBase<ContractionOrderPass> {
  void runOnOperation() override {
    SmallVector<EinsumOp> einsums;
    getOperation().walk([&](EinsumOp einsum) { einsums.push_back(einsum); });
    for (EinsumOp einsum : einsums)
      reorder(einsum);
  }

  void reorder(EinsumOp einsum) {
    if (einsum.getInputs().size() != 2 || einsum->use_empty())
      return;
    for (OpOperand &use : einsum->getUses())
      if (!isa<AttentionOp>(use.getOwner()) || use.getOperandNumber() > 2)
        return;
    auto [inputs, out] = einsum.getSpec().split("->");
    auto [a, b] = inputs.split(',');
    std::string natural = gemmOrder(a, b, out);
    // A repeated result letter or one the gemm order misses: leave it.
    if (natural.size() != out.size() || natural == out)
      return;
    auto type = cast<RankedTensorType>(einsum.getType());
    SmallVector<int64_t> perm, shape;
    for (char c : natural)
      shape.push_back(type.getShape()[out.find(c)]);
    for (char c : out)
      perm.push_back(int64_t(StringRef(natural).find(c)));
    // Only where attention reads the transpose as it is.
    AttentionView view;
    if (!attentionView(type.getShape(), transposeStrides(shape, perm), view))
      return;

    OpBuilder builder(einsum);
    auto gemm =
        EinsumOp::create(builder, einsum.getLoc(), type.clone(shape),
                         builder.getStringAttr((inputs + "->" + natural).str()),
                         einsum.getInputs());
    auto transpose =
        TransposeOp::create(builder, einsum.getLoc(), type, gemm.getResult(),
                            builder.getDenseI64ArrayAttr(perm));
    einsum.replaceAllUsesWith(transpose.getResult());
    einsum.erase();
    ++numReordered;
  }
};

} // namespace
