//===- LoomTypes.h - Loom types ---------------------------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMTYPES_H
#define LOOM_DIALECT_LOOM_IR_LOOMTYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "dialects/loom/IR/LoomTypes.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMTYPES_H
