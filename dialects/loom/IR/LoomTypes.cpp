//===- LoomTypes.cpp - Loom types -----------------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomTypes.h"
#include "dialects/loom/IR/LoomDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;

#define GET_TYPEDEF_CLASSES
#include "dialects/loom/IR/LoomTypes.cpp.inc"

int64_t loom::elementBytes(Type element) {
  return (element.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t loom::tensorBytes(RankedTensorType type) {
  return type.getNumElements() * elementBytes(type);
}

void LoomDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/loom/IR/LoomTypes.cpp.inc"
      >();
}
