//===- LoomAttrs.h - Loom attributes ----------------------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMATTRS_H
#define LOOM_DIALECT_LOOM_IR_LOOMATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

#include "dialects/loom/IR/LoomEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/loom/IR/LoomAttrs.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMATTRS_H
