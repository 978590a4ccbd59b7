//===- ShardingRule.h - How an op's dimensions may be sharded ---*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// An op describes itself by factors (after Shardy's OpShardingRule): each
// dimension of each operand and result is a product of factors, major to
// minor, and each factor has a kind that says what sharding it costs.
// Propagation and partitioning both read these rules, so adding an op means
// writing its rule once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_SHARDINGRULE_H
#define LOOM_DIALECT_LOOM_IR_SHARDINGRULE_H

#include "dialects/loom/IR/LoomAttrs.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {

enum class FactorKind {
  /// Operands and results split alike; no communication.
  PassThrough,
  /// Summed over (matmul's contracted factor, sum, mean): sharding it leaves
  /// each device a partial sum of the result.
  LinearReduction,
  /// Reduced non-linearly (max, softmax, norms, cross-entropy): a sharded
  /// factor needs a local reduction, an all-reduce with `combiners`, and a
  /// local finish; or replication.
  NonLinearReduction,
  /// Indexed by the other operand (an embedding's vocabulary): sharding it is
  /// a masked local lookup whose result is partial (sum) over its axes.
  GatherIndex,
  /// Must be replicated (a concatenated, split or sliced dimension).
  NeedReplication,
};

struct Factor {
  int64_t size;
  FactorKind kind;
  /// For NonLinearReduction: the all-reduces its decomposition needs, in
  /// order (softmax: max, then sum).
  llvm::SmallVector<ReductionKind, 2> combiners;
};

/// The factors of every dimension of one operand or result, major to minor.
/// A dimension with no factors has size 1 (a broadcast dimension).
using DimFactors = llvm::SmallVector<llvm::SmallVector<int64_t, 2>, 4>;

class ShardingRule {
public:
  /// Adds a factor and returns its index.
  int64_t addFactor(int64_t size, FactorKind kind,
                    llvm::ArrayRef<ReductionKind> combiners = {});

  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<DimFactors> operands;
  llvm::SmallVector<DimFactors> results;

  /// Checks that the rule fits `op`: one entry per operand and result, one
  /// per dimension, and each dimension the product of its factors' sizes.
  mlir::LogicalResult verify(mlir::Operation *op) const;

  /// `([a, b], [b, c]) -> ([a, c]) {a=8, b=16 linear, c=32}`.
  void print(llvm::raw_ostream &os) const;
};

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_SHARDINGRULE_H
