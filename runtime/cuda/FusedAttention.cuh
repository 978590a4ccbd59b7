//===- FusedAttention.cuh - Flash-style attention kernel -----*- CUDA -*-===//
//
// Part of the Loom project.
//
// The fused attention of runtime/cuda/Kernels.cu, in a header of its own so
// that unittests/FusedAttentionTest.cpp can also compile it for
// the host over an emulation of the CUDA features it uses (threads,
// barriers, warp shuffles, WMMA tiles) and check it without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_FUSEDATTENTION_CUH
#define LOOM_RUNTIME_CUDA_FUSEDATTENTION_CUH

#include "loomrt.h"
#include "runtime/SplitBf16.h"
#include "runtime/cuda/Packs.cuh"

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

/// The kernel's dynamic shared memory (an emulation defines its own).
#ifndef LOOMRT_DYNAMIC_SHARED
#define LOOMRT_DYNAMIC_SHARED(name)                                            \
  extern __shared__ __align__(128) unsigned char name[]
#endif

namespace loomrt::attention {

// One block per 64 queries of one batch entry: scores of a 64 x 64 tile on
// the tensor cores (bf16/f16 products, f32 accumulation, as cuBLAS computes
// them), an online softmax in f32, then the probabilities times V. Scores
// never reach global memory, and the probabilities are never rounded
// (docs/language.md 11.2): for bf16, each is split exactly into three bf16
// terms (runtime/SplitBf16.h), whose products with V on the tensor cores are
// exact and summed in f32; f16's range cannot hold such a split, so f16
// multiplies in f32 on the CUDA cores. The result is rounded once. Head
// dimensions up to 64; opt-in with LOOMRT_FAST_KERNELS=1 until a GPU has
// checked it.

constexpr int kTile = 64;        // queries per block and keys per step
constexpr int kHead = 64;        // the largest head dimension (e and f)
constexpr int kScoreStride = 68; // floats per score row (fewer bank conflicts)
constexpr int kSplitTerms = 3;   // bf16 terms per probability

// Dynamic shared memory, every part a multiple of 32 bytes (WMMA's pointer
// alignment): queries, keys and values (kTile x kHead each), scores (f32,
// later the tile's P·V), the probabilities' bf16 terms, and per-row max,
// sum and rescale factor. 67,328 bytes: over the 48 KB a block gets unasked.
constexpr size_t kTileBytes = kTile * kHead * sizeof(uint16_t);
constexpr size_t kScoreBytes = kTile * kScoreStride * sizeof(float);
constexpr size_t kAttentionSharedBytes = 3 * kTileBytes + kScoreBytes +
                                         kSplitTerms * kTileBytes +
                                         3 * kTile * sizeof(float);

template <int Dtype> struct WmmaType;
template <> struct WmmaType<LOOMRT_BF16> { using type = __nv_bfloat16; };
template <> struct WmmaType<LOOMRT_F16> { using type = __half; };

constexpr int kAttentionThreads = 128; // per block: four warps of 16 query rows
constexpr int kPacksPerRow = kHead / 8;
constexpr int kPacksPerThread = kTile * kPacksPerRow / kAttentionThreads;

/// One thread's share of a tile of full-width rows (128 bytes, 16-byte
/// aligned), held in registers between its loads from global memory and
/// its stores to shared memory: the next keys and values load while the
/// block computes on the current ones.
struct TilePacks {
  uint4 pack[kPacksPerThread];
};

/// This thread's packs of rows first..first+63 of a [rows, kHead] matrix
/// (`rowStride` elements apart), zero beyond `rows`.
__device__ void fetchTilePacks(TilePacks &held, const uint16_t *matrix,
                               int64_t first, int64_t rows, int64_t rowStride) {
  for (int n = 0; n < kPacksPerThread; ++n) {
    int i = threadIdx.x + n * kAttentionThreads;
    int64_t row = first + i / kPacksPerRow;
    held.pack[n] =
        row < rows ? load16(matrix + row * rowStride + (i % kPacksPerRow) * 8)
                   : make_uint4(0, 0, 0, 0);
  }
}

__device__ void storeTilePacks(uint16_t *tile, const TilePacks &held) {
  for (int n = 0; n < kPacksPerThread; ++n)
    store16(tile + (threadIdx.x + n * kAttentionThreads) * 8, held.pack[n]);
}

/// Rows first..first+63 of a [rows, width] matrix (`rowStride` elements
/// apart) into a kTile x kHead tile, zero beyond `rows` and `width`.
/// Full-width rows (128 bytes) move as eight 16-byte packs when the caller
/// has checked that every row is 16-byte aligned.
__device__ void loadAttentionTile(uint16_t *tile, const uint16_t *matrix,
                                  int64_t first, int64_t rows, int width,
                                  int64_t rowStride, bool packs) {
  if (packs) {
    TilePacks held;
    fetchTilePacks(held, matrix, first, rows, rowStride);
    storeTilePacks(tile, held);
    return;
  }
  for (int i = threadIdx.x; i < kTile * kHead; i += blockDim.x) {
    int64_t row = first + i / kHead;
    int col = i % kHead;
    tile[i] = row < rows && col < width ? matrix[row * rowStride + col] : 0;
  }
}

/// Element strides of attention's q, k, v and out, passed by value.
struct AttentionStrides {
  int64_t outer[4], inner[4], row[4];
};

/// One warp's 16 x (16 * tiles) block of a product on the tensor cores, in
/// f32, stored row-major at `out` (kScoreStride floats per row): the sum
/// over `Terms` left operands (row-major 16 x (16 * steps) at
/// a + term * termStride, `lda` per row) times the right operand, whose
/// 16 x 16 block (step, c) is at b + step * stepStride + c * tileStride
/// (`Layout`, `ldb`). Tiles up to 4, loops of constant bound, so the
/// fragments stay in registers. The terms are summed one after another
/// (all of the first term's products, then the second's...): interleaving
/// them per 16 keys moved a few sums that nearly cancel by up to 3 bf16
/// ulps in the CUDA emulation (bench/gpu/attention.loom).
template <typename Element, typename Layout, int Terms>
__device__ void warpTileProduct(const Element *a, int lda, int steps,
                                const Element *b, int ldb, int stepStride,
                                int tileStride, int tiles, int termStride,
                                float *out) {
  using namespace nvcuda;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> tile[4];
  for (int c = 0; c < 4; ++c)
    wmma::fill_fragment(tile[c], 0.0f);
  for (int term = 0; term < Terms; ++term)
    for (int step = 0; step < steps; ++step) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, Element, wmma::row_major> left;
      wmma::load_matrix_sync(left, a + term * termStride + step * 16, lda);
      for (int c = 0; c < 4; ++c) {
        if (c >= tiles)
          continue;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, Element, Layout> right;
        wmma::load_matrix_sync(right, b + step * stepStride + c * tileStride,
                               ldb);
        wmma::mma_sync(tile[c], left, right, tile[c]);
      }
    }
  for (int c = 0; c < 4; ++c)
    if (c < tiles)
      wmma::store_matrix_sync(out + c * 16, tile[c], kScoreStride,
                              wmma::mem_row_major);
}

template <int Dtype>
__global__ void __launch_bounds__(kAttentionThreads)
    fusedAttentionKernel(const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, uint16_t *out, int64_t inner,
                         int64_t s, int64_t t, int e, int f,
                         AttentionStrides at, int causal, float scale,
                         bool packs) {
  using namespace nvcuda;
  using Element = typename WmmaType<Dtype>::type;
  LOOMRT_DYNAMIC_SHARED(attentionShared);
  uint16_t *queries = reinterpret_cast<uint16_t *>(attentionShared);
  uint16_t *keys = queries + kTile * kHead;
  uint16_t *values = keys + kTile * kHead;
  float *scores = reinterpret_cast<float *>(values + kTile * kHead);
  uint16_t *terms = reinterpret_cast<uint16_t *>(scores + kTile * kScoreStride);
  float *rowMax =
      reinterpret_cast<float *>(terms + kSplitTerms * kTile * kTile);
  float *rowSum = rowMax + kTile, *rowScale = rowSum + kTile;

  // Causal: the last queries see the most keys, so their blocks start
  // first (GPUs start blocks in about index order) and the short ones
  // fill the end.
  const int64_t b = blockIdx.y,
                q0 = int64_t(causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) *
                     kTile;
  const int64_t bo = b / inner, bi = b % inner;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const uint16_t *qb = q + bo * at.outer[0] + bi * at.inner[0],
                 *kb = k + bo * at.outer[1] + bi * at.inner[1],
                 *vb = v + bo * at.outer[2] + bi * at.inner[2];
  uint16_t *ob = out + bo * at.outer[3] + bi * at.inner[3];

  // This block's queries, zero beyond s and beyond e.
  loadAttentionTile(queries, qb, q0, s, e, at.row[0], packs);
  if (tid < kTile) {
    rowMax[tid] = -INFINITY;
    rowSum[tid] = 0.0f;
  }
  // Each thread owns 4 rows x 8 columns of the output, in f32.
  static_assert(kAttentionThreads == 128 && kTile == 64 && kHead == 64,
                "16 groups of 4 rows by 8 groups of 8 columns");
  const int rowGroup = tid / 8, colGroup = tid % 8;
  float acc[4][8];
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 8; ++c)
      acc[i][c] = 0.0f;

  int64_t lastKey = causal ? min(t, q0 + kTile) : t;
  const int eSteps = (e + 15) / 16, fTiles = (f + 15) / 16;
  // With packs, each tile's keys and values are fetched into registers
  // during the previous tile's work.
  TilePacks nextKeys, nextValues;
  if (packs && lastKey > 0) {
    fetchTilePacks(nextKeys, kb, 0, t, at.row[1]);
    fetchTilePacks(nextValues, vb, 0, t, at.row[2]);
  }
  for (int64_t k0 = 0; k0 < lastKey; k0 += kTile) {
    __syncthreads(); // every warp is done with the previous keys and values
    if (packs) {
      storeTilePacks(keys, nextKeys);
      storeTilePacks(values, nextValues);
    } else {
      loadAttentionTile(keys, kb, k0, t, e, at.row[1], false);
      loadAttentionTile(values, vb, k0, t, f, at.row[2], false);
    }
    __syncthreads();
    if (packs && k0 + kTile < lastKey) {
      fetchTilePacks(nextKeys, kb, k0 + kTile, t, at.row[1]);
      fetchTilePacks(nextValues, vb, k0 + kTile, t, at.row[2]);
    }
    // From here to the next tile, warp w works on rows 16w..16w+15 alone:
    // their scores, probability terms, statistics and (in its threads'
    // registers) outputs. So the warp synchronises only itself, and one
    // warp's softmax overlaps another's products.
    // Scores: K^T in column-major order is K in row-major order.
    warpTileProduct<Element, nvcuda::wmma::col_major, 1>(
        reinterpret_cast<const Element *>(queries) + warp * 16 * kHead, kHead,
        eSteps, reinterpret_cast<const Element *>(keys), kHead, 16, 16 * kHead,
        4, 0, scores + warp * 16 * kScoreStride);
    __syncwarp();
    // Online softmax: two lanes per row of the warp's 16 (lanes 2i and
    // 2i + 1 take row 16w + i, on alternate columns), so that each of the
    // row's reductions is one shuffle. Each lane walks its 32 columns from
    // a different start (its row's number), which keeps the lanes of one
    // access in different shared-memory banks.
    {
      const int r = warp * 16 + lane / 2, half = lane % 2;
      const int64_t query = q0 + r;
      auto column = [&](int j) { return half + 2 * ((j + r) % (kTile / 2)); };
      auto visible = [&](int col) {
        int64_t key = k0 + col;
        return query < s && key < t && (!causal || key <= query);
      };
      // The scaled score is rounded before the subtraction (never fused
      // into one FMA): the row's maximum itself must give exp(0) = 1.
      auto scaled = [&](int col) {
        return __fmul_rn(scores[r * kScoreStride + col], scale);
      };
      float tileMax = -INFINITY;
      // Unrolled a little: fully, the f16 kernel took 252 registers.
#pragma unroll 4
      for (int j = 0; j < kTile / 2; ++j) {
        int col = column(j);
        if (visible(col))
          tileMax = fmaxf(tileMax, scaled(col));
      }
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
      float oldMax = rowMax[r], newMax = fmaxf(oldMax, tileMax);
      float partial = 0.0f;
#pragma unroll 4
      for (int j = 0; j < kTile / 2; ++j) {
        int col = column(j);
        float p = visible(col) ? expf(scaled(col) - newMax) : 0.0f;
        partial += p;
        if constexpr (Dtype == LOOMRT_BF16) {
          // Split at once into the exact bf16 terms that P V multiplies.
          uint16_t split[kSplitTerms];
          loomrt_split_bf16x3(p, split);
          for (int term = 0; term < kSplitTerms; ++term)
            terms[term * kTile * kTile + r * kTile + col] = split[term];
        } else {
          scores[r * kScoreStride + col] = p;
        }
      }
      // The shuffle also orders both lanes' reads of rowMax before the write.
      partial += __shfl_xor_sync(0xffffffffu, partial, 1);
      if (half == 0) {
        // Nothing visible yet (a padding row): nothing to rescale.
        float factor = newMax == -INFINITY ? 1.0f : expf(oldMax - newMax);
        rowScale[r] = factor;
        rowSum[r] = rowSum[r] * factor + partial;
        rowMax[r] = newMax;
      }
    }
    __syncwarp();
    // acc = acc * rescale + P V, in f32.
    for (int i = 0; i < 4; ++i) {
      float factor = rowScale[rowGroup * 4 + i];
      for (int c = 0; c < 8; ++c)
        acc[i][c] *= factor;
    }
    if constexpr (Dtype == LOOMRT_BF16) {
      // This tile's P V for the warp's rows, over all three terms.
      warpTileProduct<Element, nvcuda::wmma::row_major, kSplitTerms>(
          reinterpret_cast<const Element *>(terms) + warp * 16 * kTile, kTile,
          kTile / 16, reinterpret_cast<const Element *>(values), kHead,
          16 * kHead, 16, fTiles, kTile * kTile,
          scores + warp * 16 * kScoreStride);
      __syncwarp();
      for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 8; ++c)
          if (colGroup * 8 + c < fTiles * 16)
            acc[i][c] +=
                scores[(rowGroup * 4 + i) * kScoreStride + colGroup * 8 + c];
    } else {
      for (int j = 0; j < kTile; ++j) {
        float value[8], p[4];
        for (int c = 0; c < 8; ++c)
          value[c] = loomrt_f16_to_f32(values[j * kHead + colGroup * 8 + c]);
        for (int i = 0; i < 4; ++i)
          p[i] = scores[(rowGroup * 4 + i) * kScoreStride + j];
        for (int i = 0; i < 4; ++i)
          for (int c = 0; c < 8; ++c)
            acc[i][c] += p[i] * value[c];
      }
    }
  }
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    int r = rowGroup * 4 + i;
    int64_t query = q0 + r;
    if (query >= s)
      continue;
    float total = rowSum[r];
    for (int c = 0; c < 8; ++c) {
      int col = colGroup * 8 + c;
      if (col >= f)
        continue;
      float y = acc[i][c] / total;
      ob[query * at.row[3] + col] =
          Dtype == LOOMRT_BF16 ? loomrt_f32_to_bf16(y) : loomrt_f32_to_f16(y);
    }
  }
}

/// Whether the kernel may move full 64-wide rows of q, k and v as 16-byte
/// packs: full-width heads whose every row starts 16-byte aligned.
inline bool fusedAttentionPacks(const void *const bases[3],
                                const AttentionStrides &at, int64_t e,
                                int64_t f) {
  bool packs = e == kHead && f == kHead;
  for (int i = 0; i < 3; ++i)
    packs = packs && reinterpret_cast<uintptr_t>(bases[i]) % 16 == 0 &&
            at.outer[i] % 8 == 0 && at.inner[i] % 8 == 0 && at.row[i] % 8 == 0;
  return packs;
}

} // namespace loomrt::attention

#endif // LOOM_RUNTIME_CUDA_FUSEDATTENTION_CUH
