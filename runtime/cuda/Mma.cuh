//===- Mma.cuh - The tensor cores' mma.sync for bf16 ---------*- CUDA -*-===//
//
// Part of the Loom project.
//
// One warp-wide product of PTX `mma.sync.aligned.m16n8k16.row.col` with bf16
// operands and f32 accumulation. Its register layouts are documented by the
// PTX ISA (unlike WMMA's fragments), so a kernel can keep a product's result
// in registers and use it as the next product's operand. The host emulation
// (runtime/emulation/CudaOnCpu.h) provides the same function over the same
// layouts.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_MMA_CUH
#define LOOM_RUNTIME_CUDA_MMA_CUH

#include <cstdint>

namespace loomrt {

#ifdef __CUDACC__
/// d += A B for the calling lane (lane = 4 * group + t): a[0] = A[group][2t,
/// 2t+1], a[1] = A[group+8][2t, 2t+1], a[2] = A[group][2t+8, 2t+9], a[3] =
/// A[group+8][2t+8, 2t+9]; b[0] = B[2t, 2t+1][group], b[1] = B[2t+8,
/// 2t+9][group]; d[0..1] = D[group][2t, 2t+1], d[2..3] = D[group+8][2t,
/// 2t+1]. A word holds two bf16, the lower index in its low half.
__device__ __forceinline__ void mmaBf16(float d[4], const uint32_t a[4],
                                        const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}

/// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8j..8j+7 give
/// rows 0..7 of 8 x 8 matrix j (16-byte aligned); r[j] receives matrix j's
/// elements (lane / 4, 2 * (lane % 4)) and (.., + 1), or with `trans`
/// (2 * (lane % 4), lane / 4) and (+ 1, ..), the first in the low half.
__device__ __forceinline__ void loadMatrices(uint32_t r[4],
                                             const uint16_t *row, bool trans) {
  unsigned address = unsigned(__cvta_generic_to_shared(row));
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}
#else
using cuda_on_cpu::loadMatrices;
using cuda_on_cpu::mmaBf16;
#endif

} // namespace loomrt

#endif // LOOM_RUNTIME_CUDA_MMA_CUH
