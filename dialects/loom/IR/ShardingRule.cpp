//===- ShardingRule.cpp - How an op's dimensions may be sharded -----------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/ShardingRule.h"
#include "dialects/loom/IR/LoomOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace loom;

#include "dialects/loom/IR/LoomInterfaces.cpp.inc"

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind,
                                ArrayRef<ReductionKind> combiners) {
  factors.push_back(Factor{size, kind, llvm::to_vector<2>(combiners)});
  return factors.size() - 1;
}

/// Checks one side (operands or results) against the op's values.
static LogicalResult verifySide(Operation *op, const ShardingRule &rule,
                                ArrayRef<DimFactors> side, TypeRange types,
                                StringRef what) {
  if (side.size() != types.size())
    return op->emitOpError("sharding rule describes ")
           << side.size() << " " << what << "(s), the op has " << types.size();
  for (auto [index, dims, type] : llvm::enumerate(side, types)) {
    auto tensor = cast<RankedTensorType>(type);
    if (static_cast<int64_t>(dims.size()) != tensor.getRank())
      return op->emitOpError("sharding rule gives ")
             << what << " " << index << " " << dims.size()
             << " dimension(s), it has " << tensor.getRank();
    for (auto [dim, factors] : llvm::enumerate(dims)) {
      int64_t product = 1;
      for (int64_t factor : factors) {
        if (factor < 0 || factor >= static_cast<int64_t>(rule.factors.size()))
          return op->emitOpError("sharding rule names unknown factor ")
                 << factor;
        product *= rule.factors[factor].size;
      }
      if (product != tensor.getShape()[dim])
        return op->emitOpError("sharding rule: the factors of ")
               << what << " " << index << " dimension " << dim
               << " multiply to " << product << ", not "
               << tensor.getShape()[dim];
    }
  }
  return success();
}

LogicalResult ShardingRule::verify(Operation *op) const {
  if (failed(verifySide(op, *this, operands, op->getOperandTypes(), "operand")))
    return failure();
  return verifySide(op, *this, results, op->getResultTypes(), "result");
}

/// a, b, ..., z, f26, f27, ...: short names for factors in printed rules.
static std::string factorName(int64_t index) {
  if (index < 26)
    return std::string(1, static_cast<char>('a' + index));
  return "f" + std::to_string(index);
}

static void printSide(llvm::raw_ostream &os, ArrayRef<DimFactors> side) {
  os << '(';
  llvm::interleaveComma(side, os, [&](const DimFactors &dims) {
    os << '[';
    llvm::interleaveComma(dims, os, [&](ArrayRef<int64_t> factors) {
      if (factors.empty()) {
        os << '1';
        return;
      }
      llvm::interleave(
          factors, os, [&](int64_t factor) { os << factorName(factor); }, ".");
    });
    os << ']';
  });
  os << ')';
}

void ShardingRule::print(llvm::raw_ostream &os) const {
  printSide(os, operands);
  os << " -> ";
  printSide(os, results);
  os << " {";
  llvm::interleaveComma(llvm::enumerate(factors), os, [&](auto entry) {
    const Factor &factor = entry.value();
    os << factorName(entry.index()) << '=' << factor.size;
    switch (factor.kind) {
    case FactorKind::PassThrough:
      break;
    case FactorKind::LinearReduction:
      os << " linear";
      break;
    case FactorKind::NonLinearReduction:
      os << " nonlinear(";
      llvm::interleaveComma(factor.combiners, os, [&](ReductionKind kind) {
        os << stringifyReductionKind(kind);
      });
      os << ')';
      break;
    case FactorKind::GatherIndex:
      os << " gather";
      break;
    case FactorKind::NeedReplication:
      os << " replicated";
      break;
    }
  });
  os << '}';
}
