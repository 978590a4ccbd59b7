//===- Exp2.h - 2^x as a GPU's special function unit computes it -*- C++ -*-===//
//
// Part of the Loom project.
//
// The fused attention's probabilities and the row statistics' exps are
// ex2.approx.ftz on a GPU: one instruction, a few ulps from exact, where
// exp2f adds a rescaling for subnormal results and expf about ten
// instructions. Both sum their terms into a total that is at least 1 (a
// row's maximum contributes exp(0)), so a term below 2^-126 that the
// instruction flushes to zero is below 2^-126 of the total.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXP2_H
#define LOOM_RUNTIME_EXP2_H

#include "loomrt.h"

#include <float.h>
#include <math.h>

/// 2^x, results below 2^-126 flushed to zero: on a GPU `ex2.approx.ftz.f32`;
/// on the host (the CUDA emulation) exp2f with the same flush.
LOOMRT_INLINE float loomrt_exp2_flushed(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  float y = exp2f(x);
  return y < FLT_MIN ? 0.0f : y;
#endif
}

#endif // LOOM_RUNTIME_EXP2_H
