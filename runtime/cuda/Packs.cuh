//===- Packs.cuh - The kernels' 16-byte loads and stores ------*- CUDA -*-===//
//
// Part of the Loom project.
//
// In one place so that the host emulation (runtime/emulation/CudaOnCpu.h) can
// check that each 16-byte access is aligned, as the GPU requires: a misaligned
// one ends the kernel with an error there, and would pass unnoticed on the
// host.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_PACKS_CUH
#define LOOM_RUNTIME_CUDA_PACKS_CUH

#ifndef LOOMRT_CHECK_ALIGNED
#define LOOMRT_CHECK_ALIGNED(pointer, bytes)
#endif

namespace loomrt {

__device__ __forceinline__ uint4 load16(const void *p) {
  LOOMRT_CHECK_ALIGNED(p, 16);
  return *static_cast<const uint4 *>(p);
}

__device__ __forceinline__ void store16(void *p, uint4 value) {
  LOOMRT_CHECK_ALIGNED(p, 16);
  *static_cast<uint4 *>(p) = value;
}

__device__ __forceinline__ float4 load16(const float *p) {
  LOOMRT_CHECK_ALIGNED(p, 16);
  return *reinterpret_cast<const float4 *>(p);
}

__device__ __forceinline__ void store16(float *p, float4 value) {
  LOOMRT_CHECK_ALIGNED(p, 16);
  *reinterpret_cast<float4 *>(p) = value;
}

__device__ __forceinline__ void store8(void *p, uint2 value) {
  LOOMRT_CHECK_ALIGNED(p, 8);
  *static_cast<uint2 *>(p) = value;
}

} // namespace loomrt

#endif // LOOM_RUNTIME_CUDA_PACKS_CUH
