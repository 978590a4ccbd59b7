//===- SplitBf16.h - An f32 as the exact sum of three bf16 values -*- C++
//-*-===//
//
// The fused CUDA attention multiplies its f32 probabilities by bf16 values
// on the tensor cores, which take bf16 operands only. docs/language.md
// (11.2) does not allow rounding the probabilities, so each is split into
// three bf16 terms whose sum is exactly the f32 value: bf16 keeps 8 of f32's
// 24 significand bits and the same exponent range, so three terms hold all
// 24. Each term times a bf16 value is exact in f32 (8 x 8 bits), so what
// is summed is exactly the f32 products; the sums are the tensor cores' f32
// accumulation, as in every bf16 GEMM (in an order the language leaves
// open, and, on NVIDIA's tensor cores, with their own rounding of aligned
// addends).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_SPLITBF16_H
#define LOOM_RUNTIME_SPLITBF16_H

#include "loomrt.h"

#include <string.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#endif

/// Writes terms[0..2] (bf16 bits, largest first) with
/// terms[0] + terms[1] + terms[2] == x exactly for x == 0 and for
/// 2^-110 <= |x| <= 2^127. Below, the last term would need bits under bf16's
/// smallest subnormal (2^-133); above, the first may round to infinity. An
/// infinity or a NaN is the first term, with zeros after it.
LOOMRT_INLINE void loomrt_split_bf16x3(float x, uint16_t terms[3]) {
  float rest = x;
  for (int term = 0; term < 3; ++term) {
    terms[term] = loomrt_f32_to_bf16(rest);
    bool finite = (terms[term] & 0x7f80u) != 0x7f80u;
    // Exact: rest and its rounding share all but the rounded-off bits.
    rest = finite ? rest - loomrt_bf16_to_f32(terms[term]) : 0.0f;
  }
}

/// Two f32 values rounded to bf16 at once (to nearest, ties to even), a's in
/// the low half: on a GPU one cvt.rn.bf16x2.f32, elsewhere
/// loomrt_f32_to_bf16 twice. The same bits for every input but a NaN (a NaN
/// either way).
LOOMRT_INLINE uint32_t loomrt_f32x2_to_bf16x2(float a, float b) {
#if defined(__CUDA_ARCH__)
  __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
  uint32_t bits;
  memcpy(&bits, &pair, 4);
  return bits;
#else
  return loomrt_f32_to_bf16(a) | (uint32_t)loomrt_f32_to_bf16(b) << 16;
#endif
}

/// loomrt_split_bf16x3 of a and b at once: words[i] holds both values' i-th
/// terms, a's in the low half. The same terms for every |x| below bf16's
/// largest finite value (attention's probabilities are at most 1). On a GPU
/// each term of both values is one conversion, two widenings (shifts) and
/// two subtractions, where two loomrt_f32_to_bf16 take two conversions.
LOOMRT_INLINE void loomrt_split_bf16x3_pair(float a, float b,
                                            uint32_t words[3]) {
  for (int term = 0; term < 3; ++term) {
    uint32_t pair = loomrt_f32x2_to_bf16x2(a, b);
    words[term] = pair;
    // Exact: each rest and its rounding share all but the rounded-off bits.
    a -= loomrt_bf16_to_f32((uint16_t)pair);
    b -= loomrt_bf16_to_f32((uint16_t)(pair >> 16));
  }
}

#endif // LOOM_RUNTIME_SPLITBF16_H
