//===- LoomDialect.cpp - Loom dialect -------------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/TypeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace loom;

#include "dialects/loom/IR/LoomDialect.cpp.inc"

void LoomDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "dialects/loom/IR/LoomOps.cpp.inc"
      >();
}

/// Checks a discardable attribute that names a value (`loom.param`,
/// `loom.input`, `loom.output`).
static LogicalResult verifyNameAttr(Operation *op, NamedAttribute attr) {
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitError() << "'" << attr.getName().getValue()
                           << "' must be a non-empty string";
  return success();
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kShardingAttrName) {
    auto shardings = dyn_cast<ArrayAttr>(attr.getValue());
    if (!shardings || shardings.size() != op->getNumResults())
      return op->emitError() << "'" << kShardingAttrName
                             << "' must list one #loom.sharding per result ("
                             << op->getNumResults() << ")";
    for (auto [sharding, result] : llvm::zip(shardings, op->getResults())) {
      auto typed = dyn_cast<ShardingAttr>(sharding);
      if (!typed)
        return op->emitError() << "'" << kShardingAttrName
                               << "' must list #loom.sharding attributes";
      if (failed(verifySharding(op, typed, result.getType(),
                                [&] { return op->emitError(); })))
        return failure();
    }
    return success();
  }
  if (attr.getName() == kBodyShardingsAttrName) {
    auto repeat = dyn_cast<RepeatOp>(op);
    auto shardings = dyn_cast<ArrayAttr>(attr.getValue());
    if (!repeat || !shardings ||
        shardings.size() != repeat.getBody().getNumArguments())
      return op->emitError() << "'" << kBodyShardingsAttrName
                             << "' must list one #loom.sharding per body "
                                "argument of a loom.repeat";
    for (auto [sharding, arg] :
         llvm::zip(shardings, repeat.getBody().getArguments())) {
      auto typed = dyn_cast<ShardingAttr>(sharding);
      if (!typed)
        return op->emitError() << "'" << kBodyShardingsAttrName
                               << "' must list #loom.sharding attributes";
      if (failed(verifySharding(op, typed, arg.getType(),
                                [&] { return op->emitError(); })))
        return failure();
    }
    return success();
  }
  if (attr.getName() == kReasonAttrName) {
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kReasonAttrName << "' must be a dictionary";
    return success();
  }
  if (attr.getName() == kSpmdAttrName) {
    if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kSpmdAttrName << "' is a unit attribute of functions";
    return success();
  }
  if (attr.getName() == kOffsetsAttrName) {
    auto offsets = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!offsets || offsets.size() != int64_t(op->getNumResults()))
      return op->emitError() << "'" << kOffsetsAttrName
                             << "' must list one arena offset per result ("
                             << op->getNumResults() << ")";
    for (int64_t offset : offsets.asArrayRef())
      if (offset < -1)
        return op->emitError() << "'" << kOffsetsAttrName
                               << "' holds offsets >= 0, or -1 for a view";
    return success();
  }
  if (attr.getName() == kScratchOffsetAttrName) {
    auto offset = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<RepeatOp>(op) || !offset || offset.getInt() < 0)
      return op->emitError() << "'" << kScratchOffsetAttrName
                             << "' is a non-negative integer on a loom.repeat";
    return success();
  }
  if (attr.getName() == kArenaBytesAttrName ||
      attr.getName() == kArenaBoundAttrName) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !bytes || bytes.getInt() < 0)
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' is a non-negative integer on a function";
    return success();
  }
  if (attr.getName() == kModelAttrName) {
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!function)
      return op->emitError()
             << "'" << kModelAttrName << "' only applies to functions";
    // The passes partition, plan and run one straight-line body over
    // static tensors.
    if (function.isExternal())
      return op->emitError()
             << "a '" << kModelAttrName << "' function needs a body";
    if (!function.getFunctionBody().hasOneBlock())
      return op->emitError()
             << "a '" << kModelAttrName << "' function has one block, not "
             << llvm::range_size(function.getFunctionBody());
    auto checkTypes = [&](ArrayRef<Type> types,
                          StringRef what) -> LogicalResult {
      for (auto [index, type] : llvm::enumerate(types)) {
        if (!isStaticNumericTensor(type))
          return op->emitError()
                 << "a '" << kModelAttrName << "' function's " << what << " "
                 << index << " must be a statically shaped tensor of integers "
                 << "or floats, not " << type;
      }
      return success();
    };
    return failure(
        failed(checkTypes(function.getArgumentTypes(), "argument")) ||
        failed(checkTypes(function.getResultTypes(), "result")));
  }
  return op->emitError() << "unknown Loom attribute '"
                         << attr.getName().getValue() << "'";
}

/// Checks the Loom attributes of one function argument or result.
static LogicalResult verifyValueAttr(Operation *op, Type type,
                                     NamedAttribute attr, bool isResult) {
  StringRef name = attr.getName().getValue();
  if (name == LoomDialect::kShardingAttrName) {
    auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
    if (!sharding)
      return op->emitError() << "'" << name << "' must be a #loom.sharding";
    // A partitioned model's types are per device: only the axes are checked.
    return verifySharding(op, sharding, type, [&] { return op->emitError(); },
                          /*checkDivisible=*/!op->hasAttr(
                              LoomDialect::kSpmdAttrName));
  }
  if (name == LoomDialect::kInitAttrName) {
    if (isResult || !isa<InitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a #loom.init on an argument";
    return success();
  }
  if ((name == LoomDialect::kParamAttrName ||
       name == LoomDialect::kInputAttrName) &&
      !isResult)
    return verifyNameAttr(op, attr);
  if (name == LoomDialect::kOutputAttrName && isResult)
    return verifyNameAttr(op, attr);
  if (name == LoomDialect::kOffsetAttrName && !isResult) {
    auto offset = dyn_cast<IntegerAttr>(attr.getValue());
    if (!offset || offset.getInt() < 0)
      return op->emitError() << "'" << name
                             << "' must be a non-negative arena offset";
    return success();
  }
  return op->emitError() << "unknown Loom "
                         << (isResult ? "result" : "argument") << " attribute '"
                         << name << "'";
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError() << "Loom argument attributes only apply to "
                              "functions";
  return verifyValueAttr(op, function.getArgumentTypes()[argIndex], attr,
                         /*isResult=*/false);
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return op->emitError() << "Loom result attributes only apply to "
                              "functions";
  return verifyValueAttr(op, function.getResultTypes()[resultIndex], attr,
                         /*isResult=*/true);
}
