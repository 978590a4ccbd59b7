//===- InitialValues.h - Deterministic, sharding-invariant values ---------===//
//
// docs/language.md 8.2: a value depends only on the seed, the tensor's full
// name and the element's global row-major index, so every mesh, sharding and
// backend computes bit-identical global tensors. Shared by libloomrt and by
// `loomc --interpret`.
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_INITIALVALUES_H
#define LOOMRT_INITIALVALUES_H

#include <array>
#include <cstdint>
#include <string_view>

namespace loomrt {

/// 64-bit FNV-1a of the bytes of `text`.
uint64_t fnv1a64(std::string_view text);

/// Philox4x32-10 (Salmon et al., Random123).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);

/// The f64 value of element `index` before rounding to the tensor's dtype:
/// kind is LOOMRT_INIT_* (loomrt.h). LOOMRT_INIT_INPUT gives a standard
/// normal for float inputs and, with intBound > 0, an integer uniform in
/// [0, intBound).
double initialValue(int kind, double a, double b, int64_t intBound,
                    uint64_t seed, uint64_t nameHash, uint64_t index);

/// Stores `value` rounded to nearest even as `dtype` (LOOMRT_*) at `out`.
void storeRounded(int dtype, double value, void *out);

} // namespace loomrt

#endif // LOOMRT_INITIALVALUES_H
