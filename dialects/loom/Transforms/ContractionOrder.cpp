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

/// The result letters of `a,b` in the order a GEMM writes them: batch,
/// then the first operand's free letters, then the second's.
std::string gemmOrder(StringRef a, StringRef b, StringRef out) {
  ContractionLetters letters = contractionLetters(a, b, out);
  return letters.batch + letters.m + letters.n;
}

/// The letters of operand `index` of `a,b` in the order a GEMM reads them:
/// batch, then m and k for the first, k and n for the second.
std::string gemmOperandOrder(StringRef a, StringRef b, StringRef out,
                             unsigned index) {
  ContractionLetters letters = contractionLetters(a, b, out);
  return index == 0 ? letters.batch + letters.m + letters.k
                    : letters.batch + letters.k + letters.n;
}

/// The permutation taking `from`'s letters to `to`'s (result dimension i is
/// `from` dimension perm[i]).
SmallVector<int64_t> permutation(StringRef from, StringRef to) {
  SmallVector<int64_t> perm;
  for (char c : to)
    perm.push_back(int64_t(from.find(c)));
  return perm;
}

struct ContractionOrderPass
    : public loom::impl::LoomContractionOrderBase<ContractionOrderPass> {
  void runOnOperation() override {
    SmallVector<EinsumOp> einsums;
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](Operation *op) {
      if (auto einsum = dyn_cast<EinsumOp>(op))
        einsums.push_back(einsum);
      if (auto attention = dyn_cast<AttentionOp>(op))
        attentions.push_back(attention);
    });
    for (EinsumOp einsum : einsums)
      reorder(einsum);
    for (AttentionOp attention : attentions)
      reorderResult(attention);
  }

  /// An attention result read by one einsum as an operand whose letters
  /// the GEMM reads in another order: the einsum reads it through a
  /// transpose into that order, which attention writes directly
  /// (Views.h storageTranspose).
  void reorderResult(AttentionOp attention) {
    Value result = attention.getResult();
    if (!result.hasOneUse())
      return;
    OpOperand &use = *result.getUses().begin();
    auto einsum = dyn_cast<EinsumOp>(use.getOwner());
    if (!einsum || einsum.getInputs().size() != 2 ||
        einsum.getInputs()[0] == einsum.getInputs()[1])
      return;
    unsigned index = use.getOperandNumber();
    auto [inputs, out] = einsum.getSpec().split("->");
    auto [a, b] = inputs.split(',');
    StringRef letters = index == 0 ? a : b;
    std::string natural = gemmOperandOrder(a, b, out, index);
    // A repeated letter, a letter summed alone, or already in order.
    if (natural.size() != letters.size() || natural == letters)
      return;
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> perm = permutation(letters, natural), shape;
    for (int64_t dim : perm)
      shape.push_back(type.getShape()[dim]);

    OpBuilder builder(einsum);
    auto transpose =
        TransposeOp::create(builder, attention.getLoc(), type.clone(shape),
                            result, builder.getDenseI64ArrayAttr(perm));
    einsum->setOperand(index, transpose.getResult());
    // Only where attention can write that order.
    if (!storageTranspose(result)) {
      einsum->setOperand(index, result);
      transpose.erase();
      return;
    }
    std::string spec = ((index == 0 ? natural : a.str()) + "," +
                        (index == 1 ? natural : b.str()) + "->" + out)
                           .str();
    einsum.setSpecAttr(builder.getStringAttr(spec));
    ++numResultsReordered;
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
    SmallVector<int64_t> perm = permutation(natural, out), shape;
    for (char c : natural)
      shape.push_back(type.getShape()[out.find(c)]);
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
