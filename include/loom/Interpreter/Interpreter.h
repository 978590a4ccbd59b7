//===- Interpreter.h - Reference interpreter of global programs -*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_INTERPRETER_INTERPRETER_H
#define LOOM_INTERPRETER_INTERPRETER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace loom {

struct InterpretOptions {
  uint64_t seed = 0;
  std::string inputs, params, out;
  /// Hold every floating result in f64 instead of rounding it to its type
  /// (parameters and inputs keep their type; floating outputs are written
  /// as f32): the program's arithmetic without its roundings, a more exact
  /// reference than the rounded run.
  bool unrounded = false;
  /// Nonzero: round each inexact floating result to the nearest value of
  /// its type or to the one on the value's other side, at random (this
  /// stream of choices); a run as exact as the rounded one, whose distance
  /// from it shows how far the program's roundings can move each output.
  uint64_t perturbRounding = 0;
};

/// Runs the module's model as written (the global program, before sharding)
/// with plain loops in f64, rounding each op's result to its type: the
/// reference that compiled programs are checked against. Parameters and
/// inputs come from safetensors files or from the same deterministic
/// initialisers as libloomrt. Prints each output as the executables do and
/// optionally writes them to `options.out`.
mlir::LogicalResult interpretModel(mlir::ModuleOp module,
                                   const InterpretOptions &options,
                                   llvm::raw_ostream &os);

} // namespace loom

#endif // LOOM_INTERPRETER_INTERPRETER_H
