//===- CpuRuntime.h - State shared by the CPU backend's files -------------===//
#ifndef LOOMRT_CPU_CPURUNTIME_H
#define LOOMRT_CPU_CPURUNTIME_H

#include "loomrt.h"

#include <string>
#include <vector>

namespace loomrt {

/// Reusable f32 buffers for packing GEMM operands (slot 0..2).
std::vector<float> &scratch(loomrt_ctx *rt, int slot);
/// Time spent in GEMMs is accumulated for `--bench`.
double gemmClockStart(loomrt_ctx *rt);
void gemmClockStop(loomrt_ctx *rt, double start);

} // namespace loomrt

#endif // LOOMRT_CPU_CPURUNTIME_H
