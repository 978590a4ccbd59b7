//===- LoomDialect.h - Loom dialect -----------------------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
#define LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/loom/IR/LoomDialect.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
