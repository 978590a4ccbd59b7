//===- ShardingRules.cpp - The sharding rule of every Loom op -------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/ShardingRule.h"

#include <numeric>

using namespace mlir;
using namespace loom;

static RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// One pass-through factor per dimension of `result`, shared by every
/// operand in NumPy broadcasting alignment; a broadcast size-1 operand
/// dimension has no factor.
static ShardingRule elementwiseRule(Operation *op) {
  ShardingRule rule;
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> factors;
  DimFactors resultDims;
  for (int64_t size : result.getShape()) {
    factors.push_back(rule.addFactor(size, FactorKind::PassThrough));
    resultDims.push_back({factors.back()});
  }
  for (Value operand : op->getOperands()) {
    RankedTensorType type = tensorOf(operand);
    int64_t offset = result.getRank() - type.getRank();
    DimFactors dims;
    for (int64_t i = 0; i < type.getRank(); ++i) {
      if (type.getShape()[i] == result.getShape()[i + offset])
        dims.push_back({factors[i + offset]});
      else
        dims.push_back({});
    }
    rule.operands.push_back(std::move(dims));
  }
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    rule.results.push_back(resultDims);
  return rule;
}

#define LOOM_ELEMENTWISE_RULE(OP)                                              \
  ShardingRule OP::getShardingRule() { return elementwiseRule(*this); }
LOOM_ELEMENTWISE_RULE(ConstantOp)
LOOM_ELEMENTWISE_RULE(AddOp)
LOOM_ELEMENTWISE_RULE(SubOp)
LOOM_ELEMENTWISE_RULE(MulOp)
LOOM_ELEMENTWISE_RULE(DivOp)
LOOM_ELEMENTWISE_RULE(ReluOp)
LOOM_ELEMENTWISE_RULE(SiluOp)
LOOM_ELEMENTWISE_RULE(TanhOp)
LOOM_ELEMENTWISE_RULE(SigmoidOp)
LOOM_ELEMENTWISE_RULE(ExpOp)
LOOM_ELEMENTWISE_RULE(LogOp)
LOOM_ELEMENTWISE_RULE(SqrtOp)
LOOM_ELEMENTWISE_RULE(RsqrtOp)
LOOM_ELEMENTWISE_RULE(NegOp)
LOOM_ELEMENTWISE_RULE(GeluOp)
LOOM_ELEMENTWISE_RULE(CastOp)
#undef LOOM_ELEMENTWISE_RULE

ShardingRule SoftmaxOp::getShardingRule() {
  ShardingRule rule = elementwiseRule(*this);
  Factor &factor = rule.factors[static_cast<int64_t>(getDim())];
  factor.kind = FactorKind::NonLinearReduction;
  factor.combiners = {ReductionKind::Max, ReductionKind::Sum};
  return rule;
}

/// Layer and RMS norms: leading dimensions pass through; the trailing
/// rank(scale) dimensions are reduced through sums (mean, variance).
static ShardingRule normRule(Operation *op, int64_t normalizedRank) {
  ShardingRule rule;
  RankedTensorType input = tensorOf(op->getOperand(0));
  int64_t leading = input.getRank() - normalizedRank;
  DimFactors inputDims, paramDims;
  for (auto [index, size] : llvm::enumerate(input.getShape())) {
    bool normalized = static_cast<int64_t>(index) >= leading;
    int64_t factor = normalized
                         ? rule.addFactor(size, FactorKind::NonLinearReduction,
                                          {ReductionKind::Sum})
                         : rule.addFactor(size, FactorKind::PassThrough);
    inputDims.push_back({factor});
    if (normalized)
      paramDims.push_back({factor});
  }
  rule.operands.push_back(inputDims);
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    rule.operands.push_back(paramDims);
  rule.results.push_back(inputDims);
  return rule;
}

ShardingRule LayerNormOp::getShardingRule() {
  return normRule(*this, getScale().getType().getRank());
}

ShardingRule RMSNormOp::getShardingRule() {
  return normRule(*this, getScale().getType().getRank());
}

/// Reductions over `dims`: kept dimensions pass through; reduced ones are
/// `kind`, present in the result only with keepdim (as a size-1 dimension).
static ShardingRule reduceRule(Operation *op, ArrayRef<int64_t> reduced,
                               bool keepdim, FactorKind kind,
                               ArrayRef<ReductionKind> combiners) {
  ShardingRule rule;
  RankedTensorType input = tensorOf(op->getOperand(0));
  DimFactors inputDims, resultDims;
  for (auto [index, size] : llvm::enumerate(input.getShape())) {
    bool isReduced = llvm::is_contained(reduced, static_cast<int64_t>(index));
    int64_t factor = isReduced ? rule.addFactor(size, kind, combiners)
                               : rule.addFactor(size, FactorKind::PassThrough);
    inputDims.push_back({factor});
    if (!isReduced)
      resultDims.push_back({factor});
    else if (keepdim)
      resultDims.push_back({});
  }
  rule.operands.push_back(inputDims);
  rule.results.push_back(resultDims);
  return rule;
}

ShardingRule SumOp::getShardingRule() {
  return reduceRule(*this, getDims(), getKeepdim(), FactorKind::LinearReduction,
                    {});
}

ShardingRule MeanOp::getShardingRule() {
  // A mean divides by the global count, so partial means add up.
  return reduceRule(*this, getDims(), getKeepdim(), FactorKind::LinearReduction,
                    {});
}

ShardingRule MaxOp::getShardingRule() {
  return reduceRule(*this, getDims(), getKeepdim(),
                    FactorKind::NonLinearReduction, {ReductionKind::Max});
}

ShardingRule MatmulOp::getShardingRule() {
  ShardingRule rule;
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  RankedTensorType result = getType();
  int64_t batchRank = result.getRank() - 2;
  SmallVector<int64_t> batch;
  DimFactors resultDims;
  for (int64_t i = 0; i < batchRank; ++i) {
    batch.push_back(
        rule.addFactor(result.getShape()[i], FactorKind::PassThrough));
    resultDims.push_back({batch.back()});
  }
  int64_t m = rule.addFactor(lhs.getShape()[lhs.getRank() - 2],
                             FactorKind::PassThrough);
  int64_t k =
      rule.addFactor(lhs.getShape().back(), FactorKind::LinearReduction);
  int64_t n = rule.addFactor(rhs.getShape().back(), FactorKind::PassThrough);
  resultDims.push_back({m});
  resultDims.push_back({n});
  auto batchDims = [&](RankedTensorType type) {
    DimFactors dims;
    int64_t rank = type.getRank() - 2, offset = batchRank - rank;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back(type.getShape()[i] == result.getShape()[i + offset]
                         ? SmallVector<int64_t, 2>{batch[i + offset]}
                         : SmallVector<int64_t, 2>{});
    return dims;
  };
  DimFactors lhsDims = batchDims(lhs), rhsDims = batchDims(rhs);
  lhsDims.push_back({m});
  lhsDims.push_back({k});
  rhsDims.push_back({k});
  rhsDims.push_back({n});
  rule.operands = {lhsDims, rhsDims};
  rule.results = {resultDims};
  return rule;
}

ShardingRule EinsumOp::getShardingRule() {
  ShardingRule rule;
  auto [inputs, output] = getSpec().split("->");
  SmallVector<StringRef> operandSpecs;
  inputs.split(operandSpecs, ',');
  // One factor per letter; letters absent from the output are summed over.
  // A letter twice in one operand (`ii`, a diagonal) pairs two dimensions
  // that a device's piece could not hold alike: its factor is replicated.
  bool repeated[26] = {};
  for (StringRef spec : operandSpecs)
    for (char letter : spec)
      if (spec.count(letter) > 1)
        repeated[letter - 'a'] = true;
  std::optional<int64_t> factorOf[26];
  for (auto [spec, operand] : llvm::zip(operandSpecs, getInputs())) {
    DimFactors dims;
    for (auto [dim, letter] : llvm::enumerate(spec)) {
      std::optional<int64_t> &factor = factorOf[letter - 'a'];
      if (!factor)
        factor = rule.addFactor(
            tensorOf(operand).getShape()[dim],
            repeated[letter - 'a']    ? FactorKind::NeedReplication
            : output.contains(letter) ? FactorKind::PassThrough
                                      : FactorKind::LinearReduction);
      dims.push_back({*factor});
    }
    rule.operands.push_back(dims);
  }
  DimFactors resultDims;
  for (char letter : output)
    resultDims.push_back({*factorOf[letter - 'a']});
  rule.results.push_back(resultDims);
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  DimFactors inputDims;
  for (int64_t size : getInput().getType().getShape())
    inputDims.push_back({rule.addFactor(size, FactorKind::PassThrough)});
  DimFactors resultDims;
  for (int64_t source : getPerm())
    resultDims.push_back(inputDims[source]);
  rule.operands.push_back(inputDims);
  rule.results.push_back(resultDims);
  return rule;
}

ShardingRule ReshapeOp::getShardingRule() {
  // Factor both shapes into common pieces, major to minor: [4, 6] -> [8, 3]
  // is (4)(2.3) -> (4.2)(3). Pieces that do not line up (coprime sizes)
  // must be replicated.
  ShardingRule rule;
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getType().getShape();
  DimFactors inDims(in.size()), outDims(out.size());
  // No elements (a dimension of 0, which the verifier allows): nothing to
  // split, and no common pieces to find (gcd(0, 0) is 0).
  if (llvm::is_contained(in, 0) || llvm::is_contained(out, 0)) {
    for (auto [dims, shape] :
         {std::pair(&inDims, in), std::pair(&outDims, out)})
      for (auto [dim, size] : llvm::enumerate(shape))
        (*dims)[dim].push_back(
            rule.addFactor(size, FactorKind::NeedReplication));
    rule.operands.push_back(inDims);
    rule.results.push_back(outDims);
    return rule;
  }
  size_t i = 0, o = 0;
  int64_t inLeft = in.empty() ? 1 : in[0], outLeft = out.empty() ? 1 : out[0];
  while (i < in.size() && o < out.size()) {
    if (inLeft == 1) {
      if (++i < in.size())
        inLeft = in[i];
      continue;
    }
    if (outLeft == 1) {
      if (++o < out.size())
        outLeft = out[o];
      continue;
    }
    int64_t piece = std::gcd(inLeft, outLeft);
    if (piece == 1) {
      // The remaining dimensions do not factor alike: replicate them whole.
      for (; i < in.size(); ++i, inLeft = i < in.size() ? in[i] : 1)
        inDims[i].push_back(
            rule.addFactor(inLeft, FactorKind::NeedReplication));
      for (; o < out.size(); ++o, outLeft = o < out.size() ? out[o] : 1)
        outDims[o].push_back(
            rule.addFactor(outLeft, FactorKind::NeedReplication));
      break;
    }
    int64_t factor = rule.addFactor(piece, FactorKind::PassThrough);
    inDims[i].push_back(factor);
    outDims[o].push_back(factor);
    inLeft /= piece;
    outLeft /= piece;
  }
  rule.operands.push_back(inDims);
  rule.results.push_back(outDims);
  return rule;
}

/// Dimension `special` of every operand and result gets its own
/// need-replication factor; the others pass through.
static ShardingRule replicateDimRule(Operation *op, int64_t special) {
  ShardingRule rule;
  auto first = cast<RankedTensorType>(op->getOperand(0).getType());
  SmallVector<int64_t> shared;
  for (auto [index, size] : llvm::enumerate(first.getShape()))
    shared.push_back(static_cast<int64_t>(index) == special
                         ? -1
                         : rule.addFactor(size, FactorKind::PassThrough));
  auto dimsOf = [&](Type type) {
    DimFactors dims;
    for (auto [index, size] :
         llvm::enumerate(cast<RankedTensorType>(type).getShape()))
      dims.push_back({shared[index] >= 0
                          ? shared[index]
                          : rule.addFactor(size, FactorKind::NeedReplication)});
    return dims;
  };
  for (Type type : op->getOperandTypes())
    rule.operands.push_back(dimsOf(type));
  for (Type type : op->getResultTypes())
    rule.results.push_back(dimsOf(type));
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  return replicateDimRule(*this, static_cast<int64_t>(getDim()));
}

ShardingRule SplitOp::getShardingRule() {
  return replicateDimRule(*this, static_cast<int64_t>(getDim()));
}

ShardingRule SliceOp::getShardingRule() {
  // Dimensions taken whole pass through; sliced ones are replicated.
  ShardingRule rule;
  RankedTensorType input = getInput().getType();
  DimFactors inputDims, resultDims;
  for (auto [index, size] : llvm::enumerate(input.getShape())) {
    if (getStart()[index] == 0 && getLimit()[index] == size) {
      int64_t factor = rule.addFactor(size, FactorKind::PassThrough);
      inputDims.push_back({factor});
      resultDims.push_back({factor});
      continue;
    }
    inputDims.push_back({rule.addFactor(size, FactorKind::NeedReplication)});
    resultDims.push_back({rule.addFactor(getLimit()[index] - getStart()[index],
                                         FactorKind::NeedReplication)});
  }
  rule.operands.push_back(inputDims);
  rule.results.push_back(resultDims);
  return rule;
}

ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule rule;
  DimFactors idsDims, resultDims;
  for (int64_t size : getIds().getType().getShape()) {
    idsDims.push_back({rule.addFactor(size, FactorKind::PassThrough)});
    resultDims.push_back(idsDims.back());
  }
  ArrayRef<int64_t> table = getTable().getType().getShape();
  int64_t vocab = rule.addFactor(table[0], FactorKind::GatherIndex);
  int64_t width = rule.addFactor(table[1], FactorKind::PassThrough);
  resultDims.push_back({width});
  rule.operands = {idsDims, DimFactors{{vocab}, {width}}};
  rule.results = {resultDims};
  return rule;
}

ShardingRule AttentionOp::getShardingRule() {
  // [..., Sq, E] x [..., Sk, E] x [..., Sk, Ev] -> [..., Sq, Ev]: the key
  // sequence is a softmax reduction (max, then sum); the head dimension E is
  // contracted inside the softmax, so it is replicated.
  ShardingRule rule;
  ArrayRef<int64_t> q = getQuery().getType().getShape();
  ArrayRef<int64_t> k = getKey().getType().getShape();
  ArrayRef<int64_t> v = getValue().getType().getShape();
  int64_t rank = q.size();
  DimFactors batch;
  for (int64_t i = 0; i < rank - 2; ++i)
    batch.push_back({rule.addFactor(q[i], FactorKind::PassThrough)});
  // With a causal mask a query's row depends on its global position, which
  // a device holding a piece of the queries does not know: keep them whole.
  int64_t sq = rule.addFactor(q[rank - 2], getCausal()
                                               ? FactorKind::NeedReplication
                                               : FactorKind::PassThrough);
  int64_t e = rule.addFactor(q[rank - 1], FactorKind::NeedReplication);
  int64_t sk = rule.addFactor(k[rank - 2], FactorKind::NonLinearReduction,
                              {ReductionKind::Max, ReductionKind::Sum});
  int64_t ev = rule.addFactor(v[rank - 1], FactorKind::PassThrough);
  auto with = [&](int64_t a, int64_t b) {
    DimFactors dims = batch;
    dims.push_back({a});
    dims.push_back({b});
    return dims;
  };
  rule.operands = {with(sq, e), with(sk, e), with(sk, ev)};
  rule.results = {with(sq, ev)};
  return rule;
}

ShardingRule CrossEntropyOp::getShardingRule() {
  // The mean over all tokens is linear in the per-token losses; the
  // vocabulary is a logsumexp (max, then sum) plus a masked target lookup.
  ShardingRule rule;
  DimFactors logitsDims, targetDims;
  ArrayRef<int64_t> logits = getLogits().getType().getShape();
  for (int64_t size : logits.drop_back()) {
    targetDims.push_back({rule.addFactor(size, FactorKind::LinearReduction)});
    logitsDims.push_back(targetDims.back());
  }
  logitsDims.push_back(
      {rule.addFactor(logits.back(), FactorKind::NonLinearReduction,
                      {ReductionKind::Max, ReductionKind::Sum})});
  rule.operands = {logitsDims, targetDims};
  rule.results = {DimFactors{}};
  return rule;
}
