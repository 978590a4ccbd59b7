//===- CpuRuntime.h - State shared by the CPU backend's files -------------===//
#ifndef LOOMRT_CPU_CPURUNTIME_H
#define LOOMRT_CPU_CPURUNTIME_H

#include "loomrt.h"

#include <string>
#include <vector>

namespace loomrt {

/// Where the step's arena lives. The process (options, initial values, files)
/// works on a host copy; a backend whose memory is elsewhere (CUDA) moves it
/// before the first step and back after the last. Defined by the kernel
/// library an executable links (cpu/Kernels.cpp or cuda/Kernels.cu).
struct DeviceOps {
  const char *name;
  /// Whether the arena is host memory that MPI can move (the CPU backend).
  bool hostMemory;
  /// The arena the step gets; may return `host` itself.
  char *(*allocate)(char *host, size_t bytes);
  void (*upload)(char *device, const char *host, size_t bytes);
  void (*download)(char *host, const char *device, size_t bytes);
  /// Waits until the step's work is done (for timing and before copies).
  void (*synchronize)();
  void (*release)(char *device, char *host);
};
const DeviceOps &deviceOps();

/// Reusable f32 buffers for packing GEMM operands (slot 0..2).
std::vector<float> &scratch(loomrt_ctx *rt, int slot);
/// Time spent in GEMMs is accumulated for `--bench`.
double gemmClockStart(loomrt_ctx *rt);
void gemmClockStop(loomrt_ctx *rt, double start);

} // namespace loomrt

#endif // LOOMRT_CPU_CPURUNTIME_H
