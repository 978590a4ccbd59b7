//===- InitialValues.cpp - Philox4x32-10 initial values -------------------===//
#include "runtime/InitialValues.h"
#include "loomrt.h"

#include <cmath>

namespace loomrt {

uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * counter[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * counter[2];
    counter = {uint32_t(p1 >> 32) ^ counter[1] ^ key[0], uint32_t(p1),
               uint32_t(p0 >> 32) ^ counter[3] ^ key[1], uint32_t(p0)};
    key[0] += 0x9E3779B9u;
    key[1] += 0xBB67AE85u;
  }
  return counter;
}

double initialValue(int kind, double a, double b, int64_t intBound,
                    uint64_t seed, uint64_t nameHash, uint64_t index) {
  if (kind == LOOMRT_INIT_ZEROS)
    return 0.0;
  if (kind == LOOMRT_INIT_ONES)
    return 1.0;
  std::array<uint32_t, 4> r =
      philox4x32_10({uint32_t(index), uint32_t(index >> 32), uint32_t(nameHash),
                     uint32_t(nameHash >> 32)},
                    {uint32_t(seed), uint32_t(seed >> 32)});
  double u0 = (double(r[0]) + 0.5) / 4294967296.0;
  double u1 = (double(r[1]) + 0.5) / 4294967296.0;
  if (kind == LOOMRT_INIT_UNIFORM)
    return a + (b - a) * u0;
  if (kind == LOOMRT_INIT_INPUT && intBound > 0)
    return std::floor(u0 * double(intBound));
  if (kind == LOOMRT_INIT_INPUT) {
    a = 0.0;
    b = 1.0;
  }
  return a + b * std::sqrt(-2.0 * std::log(u0)) * std::cos(2.0 * M_PI * u1);
}

/// `value` rounded to f32 "to odd" (truncated, with the last bit set when
/// inexact). Rounding that to bf16 or f16, which keep fewer bits, gives the
/// correctly rounded result of `value`; rounding to f32 to nearest first
/// would round twice.
static float roundToOddF32(double value) {
  float f = float(value);
  if (std::isfinite(f) && double(f) != value) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (std::fabs(double(f)) > std::fabs(value))
      --bits; // rounded away from zero: step back toward it
    bits |= 1;
    memcpy(&f, &bits, 4);
  }
  return f;
}

void storeRounded(int dtype, double value, void *out) {
  switch (dtype) {
  case LOOMRT_F32: {
    float f = float(value);
    memcpy(out, &f, 4);
    return;
  }
  case LOOMRT_BF16: {
    uint16_t h = loomrt_f32_to_bf16(roundToOddF32(value));
    memcpy(out, &h, 2);
    return;
  }
  case LOOMRT_F16: {
    uint16_t h = loomrt_f32_to_f16(roundToOddF32(value));
    memcpy(out, &h, 2);
    return;
  }
  case LOOMRT_I32: {
    int32_t i = int32_t(value);
    memcpy(out, &i, 4);
    return;
  }
  case LOOMRT_I64: {
    int64_t i = int64_t(value);
    memcpy(out, &i, 8);
    return;
  }
  }
}

} // namespace loomrt
