//===- CudaOnCpu.h - Run a CUDA kernel's source on host threads -*- C++ -*-===//
//
// Part of the Loom project.
//
// Most machines that build Loom have no GPU, and the fused attention kernel
// (runtime/cuda/FusedAttention.cuh) must be right before one runs it. This
// header lets a unit test compile that kernel's source for the host and run
// it: every CUDA thread of a block is a host thread, __syncthreads() is a
// barrier of the block's threads, __shfl_xor_sync exchanges values through
// a warp's barrier, and each WMMA fragment holds its whole 16 x 16 tile in
// every lane (the kernel only loads, multiplies and stores fragments, never
// reads their elements, so the hardware's element layout does not matter).
// Tensor-core products are computed in f32 from exactly widened inputs, in
// order; the hardware adds in another order, which a test's tolerance must
// allow for. Blocks run one after another, so one buffer is the dynamic
// shared memory of every block.
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
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
// A block's static shared arrays: one per kernel, shared by the block's
// threads (blocks run one after another).
#define __shared__ static

namespace cuda_on_cpu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// A reusable barrier of `count` threads.
class Barrier {
public:
  explicit Barrier(int count) : count(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    int generation = this->generation;
    if (++arrived == count) {
      arrived = 0;
      ++this->generation;
      released.notify_all();
      return;
    }
    released.wait(lock, [&] { return generation != this->generation; });
  }

private:
  std::mutex mutex;
  std::condition_variable released;
  int count, arrived = 0, generation = 0;
};

/// One running block: its barrier, its warps' barriers and exchange slots.
struct Block {
  explicit Block(int threads) : barrier(threads), exchange(size_t(threads)) {
    for (int w = 0; w < (threads + 31) / 32; ++w)
      warps.emplace_back(new Barrier(std::min(32, threads - 32 * w)));
  }
  Barrier barrier;
  std::vector<std::unique_ptr<Barrier>> warps;
  std::vector<float> exchange;
};

inline thread_local Dim3 threadIdx, blockIdx;
inline thread_local Block *currentBlock = nullptr;
inline Dim3 blockDim, gridDim;
inline std::vector<unsigned char> dynamicShared;

/// Runs `kernel` (a callable taking no arguments that calls the kernel with
/// its arguments) over `grid` blocks of `threads` threads, with `shared`
/// bytes of dynamic shared memory.
inline void launch(Dim3 grid, int threads, size_t shared,
                   const std::function<void()> &kernel) {
  gridDim = grid;
  blockDim = Dim3{unsigned(threads), 1, 1};
  dynamicShared.assign(shared, 0xcd); // not zero: the kernel must write first
  for (unsigned y = 0; y < grid.y; ++y)
    for (unsigned x = 0; x < grid.x; ++x) {
      Block block(threads);
      std::vector<std::thread> team;
      for (int t = 0; t < threads; ++t)
        team.emplace_back([&, t] {
          threadIdx = Dim3{unsigned(t), 0, 0};
          blockIdx = Dim3{x, y, 0};
          currentBlock = &block;
          kernel();
        });
      for (std::thread &thread : team)
        thread.join();
    }
}

inline void syncthreads() { currentBlock->barrier.wait(); }

inline float shflXor(float value, int offset) {
  int t = int(threadIdx.x), warp = t / 32;
  Barrier &barrier = *currentBlock->warps[size_t(warp)];
  currentBlock->exchange[size_t(t)] = value;
  barrier.wait();
  float other = currentBlock->exchange[size_t(warp * 32 + ((t % 32) ^ offset))];
  barrier.wait(); // no lane overwrites its slot before every lane has read
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
