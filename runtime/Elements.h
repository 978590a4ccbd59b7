//===- Elements.h - Loading and storing tensor elements by dtype ----------===//
//
// Shared by the CPU and CUDA kernels (host and device code): every floating
// element widens exactly to f32 and every result rounds once to its type.
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_ELEMENTS_H
#define LOOMRT_ELEMENTS_H

#include "loomrt.h"

#include <stddef.h>

namespace loomrt {

LOOMRT_INLINE size_t elementBytes(int dtype) {
  return (dtype == LOOMRT_F32 || dtype == LOOMRT_I32) ? 4
         : dtype == LOOMRT_I64                        ? 8
                                                      : 2;
}

LOOMRT_INLINE bool isInteger(int dtype) {
  return dtype == LOOMRT_I32 || dtype == LOOMRT_I64;
}

/// Element `i` of `base`, widened to f32.
LOOMRT_INLINE float load(int dtype, const void *base, int64_t i) {
  switch (dtype) {
  case LOOMRT_F32:
    return static_cast<const float *>(base)[i];
  case LOOMRT_BF16:
    return loomrt_bf16_to_f32(static_cast<const uint16_t *>(base)[i]);
  case LOOMRT_F16:
    return loomrt_f16_to_f32(static_cast<const uint16_t *>(base)[i]);
  case LOOMRT_I32:
    return float(static_cast<const int32_t *>(base)[i]);
  default:
    return float(static_cast<const int64_t *>(base)[i]);
  }
}

/// Stores `value` rounded to the element type (integers truncate).
LOOMRT_INLINE void store(int dtype, void *base, int64_t i, float value) {
  switch (dtype) {
  case LOOMRT_F32:
    static_cast<float *>(base)[i] = value;
    return;
  case LOOMRT_BF16:
    static_cast<uint16_t *>(base)[i] = loomrt_f32_to_bf16(value);
    return;
  case LOOMRT_F16:
    static_cast<uint16_t *>(base)[i] = loomrt_f32_to_f16(value);
    return;
  case LOOMRT_I32:
    static_cast<int32_t *>(base)[i] = int32_t(value);
    return;
  default:
    static_cast<int64_t *>(base)[i] = int64_t(value);
  }
}

/// `value` rounded to a floating element type and widened back.
LOOMRT_INLINE float roundToType(int dtype, float value) {
  if (dtype == LOOMRT_BF16)
    return loomrt_bf16_to_f32(loomrt_f32_to_bf16(value));
  if (dtype == LOOMRT_F16)
    return loomrt_f16_to_f32(loomrt_f32_to_f16(value));
  return value;
}

LOOMRT_INLINE int64_t loadInt(int dtype, const void *base, int64_t i) {
  return dtype == LOOMRT_I32 ? static_cast<const int32_t *>(base)[i]
                             : static_cast<const int64_t *>(base)[i];
}

/// Stores an integer; i32 keeps the low 32 bits (wrap-around).
LOOMRT_INLINE void storeInt(int dtype, void *base, int64_t i, int64_t value) {
  if (dtype == LOOMRT_I32)
    static_cast<int32_t *>(base)[i] = int32_t(uint32_t(uint64_t(value)));
  else
    static_cast<int64_t *>(base)[i] = value;
}

} // namespace loomrt

#endif // LOOMRT_ELEMENTS_H
