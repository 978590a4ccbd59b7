//===- CudaOnCpu.h - Run a CUDA kernel's source on the host ---*- C++ -*-===//
//
// Part of the Loom project.
//
// Most machines that build Loom have no GPU, and kernels must be right
// before one runs them. This header lets a test compile a kernel's source
// for the host and run it: every CUDA thread of a block is a fiber on the
// calling thread (run in thread order until it reaches a barrier),
// __syncthreads() is a barrier of the block's fibers, __shfl_xor_sync
// exchanges values through a warp's barrier, and each WMMA fragment holds
// its whole 16 x 16 tile in every lane (the kernels only load, multiply and
// store fragments, never read their elements, so the hardware's element
// layout does not matter). Tensor-core products are computed in f32 from
// exactly widened inputs, in order; the hardware adds in another order,
// which a test's tolerance must allow for. Blocks run one after another, so
// one buffer is the dynamic shared memory of every block, and a kernel's
// static __shared__ arrays are static variables.
//
// Only what FusedAttention.cuh and RowKernels.cuh use is emulated. Include
// this header before the kernels'.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_UNITTESTS_CUDAONCPU_H
#define LOOM_UNITTESTS_CUDAONCPU_H

#include "loomrt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include <ucontext.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(threads)
// A block's static shared arrays: one per kernel and host thread, shared by
// the block's fibers (blocks run one after another).
#define __shared__ static thread_local

namespace cuda_on_cpu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Per host thread: each is a device of its own (the loopback mode runs a
// rank per thread).
inline thread_local Dim3 threadIdx, blockIdx, blockDim, gridDim;
inline thread_local std::vector<unsigned char> dynamicShared;

/// One block's threads as fibers on the calling thread: each runs until it
/// reaches a barrier (of the block, or of its warp for a shuffle), and a
/// fiber at a barrier runs on once every member of its group has arrived.
/// Deterministic: fibers run in thread order between barriers.
struct BlockRun {
  struct Fiber {
    ucontext_t context;
    std::vector<char> stack;
    bool done = false;
    int group = -1; // the barrier group it waits at, or -1
    int generation = 0;
  };
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  // Group 0 is the block, group 1 + w warp w.
  std::vector<int> arrived, generation, members;
  std::vector<float> exchange;
  const std::function<void()> *kernel = nullptr;
  int current = 0;
};
inline thread_local BlockRun *run = nullptr;

inline void fiberEntry() {
  run->kernel->operator()();
  run->fibers[size_t(run->current)].done = true;
}

/// Waits at `group`'s barrier.
inline void barrier(int group) {
  BlockRun &r = *run;
  if (++r.arrived[size_t(group)] == r.members[size_t(group)]) {
    r.arrived[size_t(group)] = 0;
    ++r.generation[size_t(group)];
    return;
  }
  BlockRun::Fiber &fiber = r.fibers[size_t(r.current)];
  fiber.group = group;
  fiber.generation = r.generation[size_t(group)];
  swapcontext(&fiber.context, &r.scheduler);
}

/// Runs `kernel` (a callable taking no arguments that calls the kernel with
/// its arguments) over `grid` blocks of `threads` threads, with `shared`
/// bytes of dynamic shared memory. A kernel without barriers or shuffles
/// (`barriers` false) runs its threads one after another, without fibers.
inline void launch(Dim3 grid, int threads, size_t shared,
                   const std::function<void()> &kernel, bool barriers = true) {
  gridDim = grid;
  blockDim = Dim3{unsigned(threads), 1, 1};
  dynamicShared.assign(shared, 0xcd); // not zero: the kernel must write first
  static thread_local BlockRun state;
  BlockRun &r = state;
  r.kernel = &kernel;
  r.fibers.resize(size_t(threads));
  int warps = (threads + 31) / 32;
  r.members.assign(size_t(1 + warps), 32);
  r.members[0] = threads;
  if (threads % 32)
    r.members.back() = threads % 32;
  r.exchange.assign(size_t(threads), 0.0f);
  run = &r;
  for (unsigned y = 0; y < grid.y; ++y)
    for (unsigned x = 0; x < grid.x; ++x) {
      blockIdx = Dim3{x, y, 0};
      if (!barriers) {
        for (int t = 0; t < threads; ++t) {
          threadIdx = Dim3{unsigned(t), 0, 0};
          kernel();
        }
        continue;
      }
      r.arrived.assign(r.members.size(), 0);
      r.generation.assign(r.members.size(), 0);
      for (BlockRun::Fiber &fiber : r.fibers) {
        fiber.stack.resize(256 * 1024);
        getcontext(&fiber.context);
        fiber.context.uc_stack.ss_sp = fiber.stack.data();
        fiber.context.uc_stack.ss_size = fiber.stack.size();
        fiber.context.uc_link = &r.scheduler;
        makecontext(&fiber.context, fiberEntry, 0);
        fiber.done = false;
        fiber.group = -1;
      }
      for (int left = threads; left > 0;) {
        bool progressed = false;
        for (int t = 0; t < threads; ++t) {
          BlockRun::Fiber &fiber = r.fibers[size_t(t)];
          if (fiber.done ||
              (fiber.group >= 0 &&
               r.generation[size_t(fiber.group)] == fiber.generation))
            continue;
          fiber.group = -1;
          r.current = t;
          threadIdx = Dim3{unsigned(t), 0, 0};
          swapcontext(&r.scheduler, &fiber.context);
          progressed = true;
          left -= fiber.done;
        }
        if (!progressed) {
          fprintf(stderr,
                  "cuda_on_cpu: block (%u, %u): threads wait at "
                  "barriers that can never release\n",
                  x, y);
          abort();
        }
      }
    }
}

inline void syncthreads() { barrier(0); }

inline float shflXor(float value, int offset) {
  int t = int(threadIdx.x), warp = t / 32;
  run->exchange[size_t(t)] = value;
  barrier(1 + warp);
  float other = run->exchange[size_t(warp * 32 + ((t % 32) ^ offset))];
  barrier(1 + warp); // no lane overwrites its slot before every lane has read
  return other;
}

} // namespace cuda_on_cpu

using cuda_on_cpu::blockDim;
using cuda_on_cpu::blockIdx;
using cuda_on_cpu::gridDim;
using cuda_on_cpu::threadIdx;
using std::isnan;
using std::min;
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

#define LOOMRT_DYNAMIC_SHARED(name)                                            \
  unsigned char *name = cuda_on_cpu::dynamicShared.data()

inline void __syncthreads() { cuda_on_cpu::syncthreads(); }
inline float __shfl_xor_sync(unsigned, float value, int offset) {
  return cuda_on_cpu::shflXor(value, offset);
}

struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}

/// Storage types as the kernel names them; WMMA widens them exactly.
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
inline float widen(__nv_bfloat16 x) { return loomrt_bf16_to_f32(x.bits); }
inline float widen(__half x) { return loomrt_f16_to_f32(x.bits); }

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/// Every lane holds the whole tile, row-major, in f32.
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "16 x 16 x 16 tiles only");
  float tile[16][16];
};

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float value) {
  for (auto &row : f.tile)
    for (float &x : row)
      x = value;
}

/// (i, j) of an operand tile: row-major at p[i * ld + j], column-major at
/// p[j * ld + i].
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ld) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      f.tile[i][j] = widen(std::is_same<Layout, col_major>::value
                               ? p[size_t(j) * ld + size_t(i)]
                               : p[size_t(i) * ld + size_t(j)]);
}

template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  float result[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = c.tile[i][j];
      for (int k = 0; k < 16; ++k)
        acc += a.tile[i][k] * b.tile[k][j];
      result[i][j] = acc;
    }
  std::copy(&result[0][0], &result[0][0] + 256, &d.tile[0][0]);
}

/// Lane 0 stores (every lane holds the same tile); the kernel synchronises
/// its threads before anyone reads the stored tile.
inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ld, layout_t layout) {
  if (threadIdx.x % 32 != 0)
    return;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      (layout == mem_row_major ? p[size_t(i) * ld + size_t(j)]
                               : p[size_t(j) * ld + size_t(i)]) = f.tile[i][j];
}

} // namespace nvcuda::wmma

#endif // LOOM_UNITTESTS_CUDAONCPU_H
