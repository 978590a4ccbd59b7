//===- SoftmaxStats.h - A row's maximum and sum of exp, online ------------===//
//
// Part of the Loom project.
//
// loom.softmax_stats reads a row once: it keeps the maximum so far and the
// sum of exp(x - maximum) so far, and rescales the sum when the maximum
// grows. Shared by the CPU and CUDA kernels (host and device code). The
// special values come out as the two-pass definition's do: a NaN makes
// both results NaN, a +inf makes the sum NaN (exp(inf - inf)), and a row of
// -inf only has the sum NaN (exp(-inf - -inf)); -inf elements of a row with
// a finite maximum add nothing.
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_SOFTMAXSTATS_H
#define LOOMRT_SOFTMAXSTATS_H

#include "loomrt.h"
#include "runtime/Exp2.h"

#include <math.h>

namespace loomrt {

struct SoftmaxStats {
  float max, sum;
};

LOOMRT_INLINE SoftmaxStats emptyStats() { return {-INFINITY, 0.0f}; }

/// Makes `m` (the maximum of elements about to be added) part of the
/// maximum, rescaling the sum to it.
LOOMRT_INLINE void raiseMax(SoftmaxStats &s, float m) {
  if (isnan(m) || isnan(s.max)) {
    s.max = s.sum = NAN;
  } else if (m > s.max) {
    s.sum = s.max == -INFINITY ? 0.0f : s.sum * expf(s.max - m);
    s.max = m;
  }
}

/// exp(x) for x <= 0, a term of a sum of exps: on a GPU 2^(x log2 e) by
/// loomrt_exp2_flushed (two instructions). Its error is a few ulps plus up
/// to about |x| (the rounding of x log2 e), so a few ulps of the sum, whose
/// terms near x = 0 dominate. Elsewhere expf, as the CPU backend computes
/// it (the emulation runs the CPU's form).
LOOMRT_INLINE float statsExp(float x) {
#ifdef __CUDA_ARCH__
  return loomrt_exp2_flushed(x * 1.4426950408889634f);
#else
  return expf(x);
#endif
}

/// Adds an element no greater than the maximum (raiseMax came first).
LOOMRT_INLINE void addShifted(SoftmaxStats &s, float x) {
  if (s.max != -INFINITY)
    s.sum += statsExp(x - s.max);
}

/// `s` and `other` as the statistics of their elements together.
LOOMRT_INLINE void mergeStats(SoftmaxStats &s, SoftmaxStats other) {
  raiseMax(s, other.max);
  if (!isnan(s.max) && other.max != -INFINITY)
    s.sum += other.sum * expf(other.max - s.max);
}

/// The sum of a row of n elements, once every element is in.
LOOMRT_INLINE float finalSum(SoftmaxStats s, int64_t n) {
  return n > 0 && s.max == -INFINITY ? NAN : s.sum;
}

} // namespace loomrt

#endif // LOOMRT_SOFTMAXSTATS_H
