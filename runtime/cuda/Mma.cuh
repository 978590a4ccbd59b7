//===- Mma.cuh - The tensor cores' products for bf16 ----------*- CUDA -*-===//
//
// Part of the Loom project.
//
// One warp-wide product of PTX `mma.sync.aligned.m16n8k16.row.col` with bf16
// operands and f32 accumulation, and Hopper's warpgroup-wide
// `wgmma.mma_async` m64n64k16 (left operand in registers, right operand in
// shared memory). Their register layouts are documented by the PTX ISA
// (unlike WMMA's fragments), so a kernel can keep a product's result in
// registers and use it as the next product's operand. The host emulation
// (runtime/emulation/CudaOnCpu.h) provides the same functions over the same
// layouts.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_MMA_CUH
#define LOOM_RUNTIME_CUDA_MMA_CUH

#include "runtime/cuda/Packs.cuh"

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

/// The shared-memory address (in the block's shared window) of `p`.
__device__ __forceinline__ uint32_t sharedAddress(const void *p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// wgmma (sm_90a only: elsewhere these compile to nothing, and the kernel
// that uses them refuses to run).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LOOMRT_HAS_WGMMA 1
#define LOOMRT_WGMMA_ASM(text) asm volatile(text ::: "memory")
#else
#define LOOMRT_WGMMA_ASM(text)
#endif

/// Orders the registers' ordinary writes before the wgmma products that
/// read them (operands and accumulators): before a warpgroup's first
/// product after such writes.
__device__ __forceinline__ void wgmmaFence() {
  LOOMRT_WGMMA_ASM("wgmma.fence.sync.aligned;\n");
}

/// Ends the group of products issued since the last commit.
__device__ __forceinline__ void wgmmaCommit() {
  LOOMRT_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n");
}

/// Waits until every committed product is done: then their accumulators
/// may be read and their operands written.
__device__ __forceinline__ void wgmmaWaitAll() {
  LOOMRT_WGMMA_ASM("wgmma.wait_group.sync.aligned 0;\n");
}

/// Makes this thread's ordinary shared-memory stores visible to the async
/// proxy that wgmma reads shared memory through (then a barrier, for the
/// other threads' products).
__device__ __forceinline__ void fenceSharedForWgmma() {
  LOOMRT_WGMMA_ASM("fence.proxy.async.shared::cta;\n");
}

/// d (64 x 64, f32) = A B + (accumulate ? d : 0) for the warpgroup (128
/// threads; warp w of it holds rows 16 w .. 16 w + 15). A (64 x 16) in
/// registers, each warp's 16 rows in mmaBf16's layout of A; d in registers,
/// block j of 8 columns in d[4 j .. 4 j + 3] in mmaBf16's layout of D. B
/// (16 x 64) in shared memory by its descriptor (matrixDescriptor): with
/// TransposeB false, B's columns are contiguous runs of k ("K-major": B[k][n]
/// is row n, column k of a row-major matrix); with TransposeB, B's rows are
/// (B[k][n] is row k, column n: "MN-major").
template <bool TransposeB>
__device__ __forceinline__ void wgmmaBf16(float d[32], const uint32_t a[4],
                                          uint64_t b, bool accumulate) {
#ifdef LOOMRT_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "
      "%29, %30, %31}, {%32, %33, %34, %35}, %36, accumulate, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
        "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
        "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
        "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b),
        "r"(int(accumulate)), "n"(int(TransposeB)));
#else
  (void)d, (void)a, (void)b, (void)accumulate;
#endif
}
#else
using cuda_on_cpu::fenceSharedForWgmma;
using cuda_on_cpu::loadMatrices;
using cuda_on_cpu::mmaBf16;
using cuda_on_cpu::sharedAddress;
using cuda_on_cpu::wgmmaBf16;
using cuda_on_cpu::wgmmaCommit;
using cuda_on_cpu::wgmmaFence;
using cuda_on_cpu::wgmmaWaitAll;
#define LOOMRT_HAS_WGMMA 1
#endif

/// wgmma's descriptor of an operand in shared memory without swizzling:
/// 8 x 8 core matrices of 16-bit elements, each 128 contiguous bytes (8
/// rows of 16 bytes), `leadingBytes` apart along K and `strideBytes` apart
/// along M or N, whichever way the operand is stored (as CUTLASS's
/// make_gmma_desc reads the interleaved layouts; PTX ISA, "Matrix
/// Descriptor Format": start address, leading and stride byte offsets in
/// 16-byte units at bits 0, 16 and 32; base offset 0; layout type 0).
__device__ __forceinline__ uint64_t matrixDescriptor(const void *start,
                                                     uint32_t leadingBytes,
                                                     uint32_t strideBytes) {
  LOOMRT_CHECK_ALIGNED(start, 16);
  return uint64_t((sharedAddress(start) & 0x3ffffu) >> 4) |
         uint64_t((leadingBytes >> 4) & 0x3fffu) << 16 |
         uint64_t((strideBytes >> 4) & 0x3fffu) << 32;
}

} // namespace loomrt

#endif // LOOM_RUNTIME_CUDA_MMA_CUH
