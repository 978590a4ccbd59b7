//===- RowKernels.cuh - Row kernels with 16-byte loads -------*- CUDA -*-===//
//
// Part of the Loom project.
//
// Where rows are 16-byte aligned and a whole number of 16-byte packs, the
// row kernels read and write 8 bf16/f16 or 4 f32 elements at a time, and the
// norms, the softmax of a last dimension and the attention softmax keep the
// row in registers, so each element is read once and written once; row
// sums, means and maxima and a cross-entropy's losses stream their rows
// once. A row is a warp's where rows are many, else a block's.
//
// These kernels and the fused attention are the default since an H200 run
// checked them (bench/gpu/run, 2026-11-30; docs/performance.md);
// LOOMRT_FAST_KERNELS=0 keeps to the element-wise kernels of Kernels.cu.
// The rows a warp each came after that run. Their source also runs on the
// host, in unittests/RowKernelsTest.cpp over runtime/emulation/CudaOnCpu.h.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_ROWKERNELS_CUH
#define LOOM_RUNTIME_CUDA_ROWKERNELS_CUH

#include "loomrt.h"
#include "runtime/Elements.h"
#include "runtime/SoftmaxStats.h"
#include "runtime/cuda/Packs.cuh"

#include <cstdint>

namespace loomrt::rows {

/// The maximum as the language defines it: a NaN wins (fmaxf would drop
/// it), as on the CPU.
__device__ __forceinline__ float maxKeepingNaN(float acc, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // One instruction where the comparisons below take three or four (a
  // cross-entropy's statistics take one an element).
  float m;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(acc), "f"(v));
  return m;
#else
  return v > acc || isnan(v) ? v : acc;
#endif
}

/// Block-wide sum or max of one value per thread (blockDim.x a power of 2,
/// at most 1024).
template <bool Max> __device__ float blockReduce(float value, float *shared) {
  int t = threadIdx.x;
  shared[t] = value;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half)
      shared[t] = Max ? maxKeepingNaN(shared[t], shared[t + half])
                      : shared[t] + shared[t + half];
    __syncthreads();
  }
  float result = shared[0];
  __syncthreads();
  return result;
}

template <int Dtype> struct Pack {
  static constexpr int N = Dtype == LOOMRT_F32 ? 4 : 8;
};

/// Elements [element, element + N) of `base`, widened to f32.
template <int Dtype>
__device__ __forceinline__ void loadPack(const void *base, int64_t element,
                                         float *out) {
  constexpr int N = Pack<Dtype>::N;
  const uint4 raw = load16(static_cast<const char *>(base) +
                           element * (Dtype == LOOMRT_F32 ? 4 : 2));
  if constexpr (Dtype == LOOMRT_F32) {
    const float *f = reinterpret_cast<const float *>(&raw);
    for (int i = 0; i < N; ++i)
      out[i] = f[i];
  } else {
    const uint16_t *h = reinterpret_cast<const uint16_t *>(&raw);
    for (int i = 0; i < N; ++i)
      out[i] = Dtype == LOOMRT_BF16 ? loomrt_bf16_to_f32(h[i])
                                    : loomrt_f16_to_f32(h[i]);
  }
}

/// Rounds N values to the element type and stores them at `element`.
template <int Dtype>
__device__ __forceinline__ void storePack(void *base, int64_t element,
                                          const float *in) {
  constexpr int N = Pack<Dtype>::N;
  uint4 raw;
  if constexpr (Dtype == LOOMRT_F32) {
    float *f = reinterpret_cast<float *>(&raw);
    for (int i = 0; i < N; ++i)
      f[i] = in[i];
  } else {
    uint16_t *h = reinterpret_cast<uint16_t *>(&raw);
    for (int i = 0; i < N; ++i)
      h[i] = Dtype == LOOMRT_BF16 ? loomrt_f32_to_bf16(in[i])
                                  : loomrt_f32_to_f16(in[i]);
  }
  store16(static_cast<char *>(base) + element * (Dtype == LOOMRT_F32 ? 4 : 2),
          raw);
}

/// Packs per thread that a register-resident row may need (rows up to
/// 256 * 4 packs: 8192 bf16 or 4096 f32 elements).
constexpr int kRowPacks = 4;

/// Elements [element, element + N) of `base` for N a whole number of
/// Dtype's packs.
template <int Dtype, int N>
__device__ __forceinline__ void loadPacks(const void *base, int64_t element,
                                          float *out) {
  static_assert(N % Pack<Dtype>::N == 0, "whole packs only");
  for (int i = 0; i < N; i += Pack<Dtype>::N)
    loadPack<Dtype>(base, element + i, out + i);
}

/// Whether normVecKernel takes a scale and bias of ScaleDtype for rows of
/// Dtype: the same type, or f32 for bf16/f16 rows (a GPT's gains).
constexpr bool normVecScales(int dtype, int scaleDtype) {
  return scaleDtype == dtype ||
         (scaleDtype == LOOMRT_F32 && dtype != LOOMRT_F32);
}

/// The threads that share a row: a warp (32), or the whole block (256).
/// A warp per row needs no barrier and keeps 8 rows in flight per block,
/// so short rows (a GPT's 768 elements: 96 packs) are not left to 96 of a
/// block's 256 threads and 16 barriers each.
constexpr int kWarpRow = 32, kBlockRow = 256;

/// A warp per row once there are rows enough to fill the GPU with warps
/// (132 SMs x 8); fewer, long rows get a block each.
inline bool warpPerRow(int64_t rows) { return rows >= 1024; }

/// Sum or maximum (a NaN wins) over the `Lanes` threads sharing a row, in
/// each of them: by shuffles within a warp, or blockReduce over the block.
template <bool Max, int Lanes>
__device__ __forceinline__ float rowReduce(float value, float *shared) {
  if constexpr (Lanes == kWarpRow) {
    for (int offset = 16; offset > 0; offset /= 2) {
      float other = __shfl_xor_sync(0xffffffffu, value, offset);
      value = Max ? maxKeepingNaN(value, other) : value + other;
    }
    return value;
  } else {
    return blockReduce<Max>(value, shared);
  }
}

/// The rows of a thread whose row `Lanes` threads share (a warp, or the
/// block): the first, then every `step` on; `lane` is its place in the row.
template <int Lanes> struct RowsOfThread {
  int lane = int(threadIdx.x) % Lanes;
  int64_t perBlock = blockDim.x / Lanes;
  int64_t first = blockIdx.x * perBlock + threadIdx.x / Lanes;
  int64_t step = gridDim.x * perBlock;
};

/// `value` rounded to Dtype (and widened back).
template <int Dtype> __device__ __forceinline__ float roundTo(float value) {
  if constexpr (Dtype == LOOMRT_BF16)
    return loomrt_bf16_to_f32(loomrt_f32_to_bf16(value));
  else if constexpr (Dtype == LOOMRT_F16)
    return loomrt_f16_to_f32(loomrt_f32_to_f16(value));
  else
    return value;
}

/// Layer or RMS norm of rows of n elements, each row held in the registers
/// of the `Lanes` threads that share it (K packs each, so rows of up to
/// Lanes * K packs), 256 threads a block. With an `addend`, each row is
/// x + addend, rounded to Dtype and stored in `sum` first
/// (loomrt_add_norm); with `Biased`, the addend is addend + addendBias (a
/// row of Dtype), rounded to Dtype before the sum. `Biased` is a template
/// parameter so that the other norms keep their registers (70 where the
/// run-time test took 94, for GPT-2 small's layer norm). x's rows are
/// where xRows says (consecutive with an addend), 16-byte aligned.
template <int Dtype, int ScaleDtype, int Lanes, int K, bool Biased = false>
__global__ void normVecKernel(const void *x, loomrt_rows xRows,
                              const void *addend, const void *addendBias,
                              void *sum, const void *scale, const void *bias,
                              void *out, int64_t rows, int64_t n, float eps,
                              int rms) {
  constexpr int N = Pack<Dtype>::N;
  __shared__ float shared[Lanes == kWarpRow ? 1 : kBlockRow];
  const RowsOfThread<Lanes> mine;
  const int lane = mine.lane;
  int64_t packs = n / N;
  for (int64_t r = mine.first; r < rows; r += mine.step) {
    int64_t at = loomrt_row_start(xRows, r);
    float v[K][N];
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t p = lane + int64_t(k) * Lanes;
      if (p < packs) {
        loadPack<Dtype>(x, at + p * N, v[k]);
        if (addend) {
          float w[N];
          loadPack<Dtype>(addend, r * n + p * N, w);
          if constexpr (Biased) {
            float c[N];
            loadPack<Dtype>(addendBias, p * N, c);
            for (int i = 0; i < N; ++i)
              w[i] = roundTo<Dtype>(w[i] + c[i]);
          }
          for (int i = 0; i < N; ++i)
            v[k][i] = roundTo<Dtype>(v[k][i] + w[i]);
          storePack<Dtype>(sum, r * n + p * N, v[k]);
        }
        for (int i = 0; i < N; ++i)
          total += v[k][i];
      }
    }
    float mean =
        rms ? 0.0f : rowReduce<false, Lanes>(total, shared) / float(n);
    float squares = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (lane + int64_t(k) * Lanes < packs)
        for (int i = 0; i < N; ++i) {
          float centred = v[k][i] - mean;
          squares += centred * centred;
        }
    float inverse =
        rsqrtf(rowReduce<false, Lanes>(squares, shared) / float(n) + eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t p = lane + int64_t(k) * Lanes;
      if (p >= packs)
        continue;
      float weight[N], shift[N], y[N];
      loadPacks<ScaleDtype, N>(scale, p * N, weight);
      if (bias)
        loadPacks<ScaleDtype, N>(bias, p * N, shift);
      for (int i = 0; i < N; ++i) {
        y[i] = (v[k][i] - mean) * inverse * weight[i];
        if (bias)
          y[i] += shift[i];
      }
      storePack<Dtype>(out, r * n + p * N, y);
    }
  }
}

/// loomrt_softmax over the last dimension: rows of n elements (in's where
/// inRows says, 16-byte aligned), each held in the registers of the
/// `Lanes` threads that share it (K packs each), so that it is read once
/// and written once, where softmaxKernel reads it three times with a
/// thread per row. A NaN in the row wins its maximum (softmaxKernel's
/// fmaxf drops it, but its exp then makes the sum NaN): every output of
/// the row is NaN either way.
template <int Dtype, int Lanes, int K>
__global__ void softmaxVecKernel(const void *in, loomrt_rows inRows, void *out,
                                 int64_t rows, int64_t n) {
  constexpr int N = Pack<Dtype>::N;
  __shared__ float shared[Lanes == kWarpRow ? 1 : kBlockRow];
  const RowsOfThread<Lanes> mine;
  const int lane = mine.lane;
  int64_t packs = n / N;
  for (int64_t r = mine.first; r < rows; r += mine.step) {
    int64_t at = loomrt_row_start(inRows, r);
    float v[K][N];
    float maximum = -INFINITY;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t p = lane + int64_t(k) * Lanes;
      if (p < packs) {
        loadPack<Dtype>(in, at + p * N, v[k]);
        for (int i = 0; i < N; ++i)
          maximum = maxKeepingNaN(maximum, v[k][i]);
      }
    }
    maximum = rowReduce<true, Lanes>(maximum, shared);
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (lane + int64_t(k) * Lanes < packs)
        for (int i = 0; i < N; ++i) {
          v[k][i] = expf(v[k][i] - maximum);
          total += v[k][i];
        }
    total = rowReduce<false, Lanes>(total, shared);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t p = lane + int64_t(k) * Lanes;
      if (p >= packs)
        continue;
      float y[N];
      for (int i = 0; i < N; ++i)
        y[i] = v[k][i] / total;
      storePack<Dtype>(out, r * n + p * N, y);
    }
  }
}

/// The attention softmax of attentionSoftmaxKernel, the row in registers.
__global__ void attentionSoftmaxVecKernel(float *scores, int64_t rows,
                                          int64_t s, int64_t t, int causal) {
  __shared__ float shared[256];
  int64_t packs = t / 4;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float *row = scores + r * t;
    int64_t i = r % s, visible = causal ? min(t, i + 1) : t;
    float v[kRowPacks][4];
    float maximum = -INFINITY;
#pragma unroll
    for (int k = 0; k < kRowPacks; ++k) {
      int64_t p = threadIdx.x + int64_t(k) * blockDim.x;
      if (p < packs) {
        loadPack<LOOMRT_F32>(row, p * 4, v[k]);
        for (int e = 0; e < 4; ++e)
          if (p * 4 + e < visible)
            maximum = fmaxf(maximum, v[k][e]);
      }
    }
    maximum = blockReduce<true>(maximum, shared);
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kRowPacks; ++k) {
      int64_t p = threadIdx.x + int64_t(k) * blockDim.x;
      if (p < packs)
        for (int e = 0; e < 4; ++e)
          if (p * 4 + e < visible) {
            v[k][e] = expf(v[k][e] - maximum);
            total += v[k][e];
          }
    }
    total = blockReduce<false>(total, shared);
#pragma unroll
    for (int k = 0; k < kRowPacks; ++k) {
      int64_t p = threadIdx.x + int64_t(k) * blockDim.x;
      if (p >= packs)
        continue;
      float y[4];
      for (int e = 0; e < 4; ++e)
        y[e] = p * 4 + e < visible ? v[k][e] / total : 0.0f;
      storePack<LOOMRT_F32>(row, p * 4, y);
    }
  }
}

/// rowReduceKernel streaming 16-byte packs, each row's packs over the
/// `Lanes` threads that share it (rows of any length; where `inRows` says,
/// so that a strided piece is read in place).
template <int Dtype, int Lanes>
__global__ void rowReduceVecKernel(int reduction, const void *in,
                                   loomrt_rows inRows, void *out, int64_t rows,
                                   int64_t n, float scale) {
  constexpr int N = Pack<Dtype>::N;
  __shared__ float shared[kBlockRow];
  const int64_t packs = n / N;
  RowsOfThread<Lanes> thread;
  for (int64_t r = thread.first; r < rows; r += thread.step) {
    float acc = reduction == LOOMRT_MAX ? -INFINITY : 0.0f;
    const int64_t start = loomrt_row_start(inRows, r);
    for (int64_t p = thread.lane; p < packs; p += Lanes) {
      float v[N];
      loadPack<Dtype>(in, start + p * N, v);
      for (int i = 0; i < N; ++i)
        acc = reduction == LOOMRT_MAX ? maxKeepingNaN(acc, v[i]) : acc + v[i];
    }
    float total = reduction == LOOMRT_MAX ? rowReduce<true, Lanes>(acc, shared)
                                          : rowReduce<false, Lanes>(acc, shared);
    if (thread.lane == 0)
      store(Dtype, out, r, reduction == LOOMRT_MAX ? total : total * scale);
  }
}

/// The statistics of the whole block, merged in a tree (blockDim.x a power
/// of 2, at most 256), in every thread.
__device__ SoftmaxStats blockStats(SoftmaxStats stats, float *sharedMax,
                                   float *sharedSum) {
  int t = threadIdx.x;
  sharedMax[t] = stats.max;
  sharedSum[t] = stats.sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) {
      SoftmaxStats mine = {sharedMax[t], sharedSum[t]};
      mergeStats(mine, {sharedMax[t + half], sharedSum[t + half]});
      sharedMax[t] = mine.max;
      sharedSum[t] = mine.sum;
    }
    __syncthreads();
  }
  SoftmaxStats block = {sharedMax[0], sharedSum[0]};
  __syncthreads();
  return block;
}

/// This thread's share of the row of n elements at `start`, shared by
/// `lanes` threads of which it is `lane`: every lanes-th element, loaded
/// one at a time.
__device__ SoftmaxStats threadRowStats(int dtype, const void *base,
                                       int64_t start, int64_t n, int lane,
                                       int lanes) {
  SoftmaxStats stats = emptyStats();
  for (int64_t j = lane; j < n; j += lanes) {
    float x = load(dtype, base, start + j);
    raiseMax(stats, x);
    addShifted(stats, x);
  }
  return stats;
}

/// The statistics of the row of n elements at `start`, over the `Lanes`
/// threads that share it: each thread's elements online
/// (whole 16-byte packs at a time with `packs`), then merged by shuffles
/// within a warp or in a tree over the block.
template <int Dtype, int Lanes>
__device__ SoftmaxStats rowStats(const void *in, int64_t start, int64_t n,
                                 bool packs, float *sharedMax,
                                 float *sharedSum) {
  constexpr int N = Pack<Dtype>::N;
  const int lane = int(threadIdx.x) % Lanes;
  SoftmaxStats stats = emptyStats();
  if (packs) {
    // As the CPU's chunks (loomrt_softmax_stats): a pack's maximum, one
    // rescale, then its exps. A cross-entropy's logits pass through here
    // (GPT-2 small: 412 million a step), so the exps are the special
    // function unit's (statsExp) and the tests sit outside the loop over
    // the pack: about 11 SASS instructions an element where expf and a test
    // per element took about 24 (bench/gpu/sass).
    for (int64_t p = lane; p < n / N; p += Lanes) {
      float v[N];
      loadPack<Dtype>(in, start + p * N, v);
      float packMax = v[0];
      for (int i = 1; i < N; ++i)
        packMax = maxKeepingNaN(packMax, v[i]);
      raiseMax(stats, packMax);
      if (isnan(stats.max) || stats.max == -INFINITY)
        continue; // NaN stays; only -inf so far adds nothing
      float packSum = 0.0f;
      for (int i = 0; i < N; ++i)
        packSum += statsExp(v[i] - stats.max);
      stats.sum += packSum;
    }
  } else {
    stats = threadRowStats(Dtype, in, start, n, lane, Lanes);
  }
  if constexpr (Lanes == kWarpRow) {
    for (int offset = 16; offset > 0; offset /= 2)
      mergeStats(stats, {__shfl_xor_sync(0xffffffffu, stats.max, offset),
                         __shfl_xor_sync(0xffffffffu, stats.sum, offset)});
    return stats;
  } else {
    return blockStats(stats, sharedMax, sharedSum);
  }
}

/// For each of this thread's rows of n elements of `in`, the row's
/// statistics over the `Lanes` threads that share it (rowStats), then
/// `use(row, stats)` in the row's first thread: the loop of the kernels of
/// softmax statistics (loom.softmax_stats, a cross-entropy's losses, the
/// logits' blocks).
template <int Dtype, int Lanes, typename Use>
__device__ __forceinline__ void forEachRowStats(const void *in, int64_t rows,
                                                int64_t n, bool packs,
                                                Use use) {
  constexpr int kShared = Lanes == kWarpRow ? 1 : kBlockRow;
  __shared__ float sharedMax[kShared], sharedSum[kShared];
  RowsOfThread<Lanes> thread;
  for (int64_t r = thread.first; r < rows; r += thread.step) {
    SoftmaxStats stats =
        rowStats<Dtype, Lanes>(in, r * n, n, packs, sharedMax, sharedSum);
    if (thread.lane == 0)
      use(r, stats);
  }
}

/// Each row's loss (loom.cross_entropy before its mean): the logsumexp of
/// the row's `vocab` logits less its target's logit, the row read once by
/// the `Lanes` threads that share it. A target outside the vocabulary
/// lowers *bad to its row + 1 and leaves a loss of 0.
template <int Dtype, int Lanes>
__global__ void crossEntropyRowsKernel(const void *logits, int64_t rows,
                                       int64_t vocab, bool packs,
                                       int targetsDtype, const void *targets,
                                       float *losses,
                                       unsigned long long *bad) {
  forEachRowStats<Dtype, Lanes>(
      logits, rows, vocab, packs, [&](int64_t r, SoftmaxStats stats) {
        int64_t target = loadInt(targetsDtype, targets, r);
        if (target < 0 || target >= vocab) {
          atomicMin(bad, (unsigned long long)(r + 1));
          losses[r] = 0.0f;
        } else {
          losses[r] = stats.max + logf(finalSum(stats, vocab)) -
                      load(Dtype, logits, r * vocab + target);
        }
      });
}

} // namespace loomrt::rows

#endif // LOOM_RUNTIME_CUDA_ROWKERNELS_CUH
