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

constexpr int kTile = 64;      // queries per block and keys per step
constexpr int kHead = 64;      // the largest head dimension (e and f)
constexpr int kSplitTerms = 3; // bf16 terms per probability
// Padded rows, so that the softmax's accesses (each lane four adjacent
// columns of its row: 16-byte score loads and stores, 8-byte term stores)
// spread over all banks: score rows start 288 bytes apart, so the 8 lanes
// (4 rows) of each quarter-warp phase of a 16-byte access hit 8 different
// 16-byte bank groups; term rows 144 bytes apart, so the 16 lanes (8 rows)
// of each half-warp phase of an 8-byte access hit 16 different bank pairs.
constexpr int kScoreStride = 72; // floats per score row
constexpr int kTermStride = 72;  // bf16 per row of a probability term

// Dynamic shared memory, every part a multiple of 32 bytes (WMMA's pointer
// alignment): queries, keys and values (kTile x kHead each), scores (f32,
// later the tile's P·V), the probabilities' bf16 terms, and per-row max,
// sum and rescale factor. 71,424 bytes: over the 48 KB a block gets
// unasked; three blocks still fit an SM of an H100 or H200.
constexpr size_t kTileBytes = kTile * kHead * sizeof(uint16_t);
constexpr size_t kScoreBytes = kTile * kScoreStride * sizeof(float);
constexpr size_t kTermBytes = kTile * kTermStride * sizeof(uint16_t);
constexpr size_t kAttentionSharedBytes = 3 * kTileBytes + kScoreBytes +
                                         kSplitTerms * kTermBytes +
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

template <typename Element>
using LeftFragment = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16,
                                            Element, nvcuda::wmma::row_major>;

/// One warp's 16 x (16 * tiles) block of a product on the tensor cores, in
/// f32, stored row-major at `out` (kScoreStride floats per row): the sum
/// over `Terms` left operands (16 x (16 * steps); `left(step, fragments)`
/// sets the terms' 16 x 16 blocks of a step) times the right operand, whose
/// 16 x 16 block (step, c) is at b + step * stepStride + c * tileStride
/// (`Layout`, `ldb`). Tiles up to 4, loops of constant bound, so the
/// fragments stay in registers. Each block of the right operand is loaded
/// once for all terms (16 loads of V for P V's three terms instead of 48;
/// shared-memory bandwidth bounds this kernel), so the terms' products are
/// summed interleaved, step by step: an order of the f32 additions like
/// any other (docs/language.md 11.2), which moves outputs whose terms
/// nearly cancel by more than 1 ulp, within 2^-12 of the terms' magnitude.
template <typename Element, typename Layout, int Terms, typename Left>
__device__ void warpTileProduct(Left left, int steps, const Element *b, int ldb,
                                int stepStride, int tileStride, int tiles,
                                float *out) {
  using namespace nvcuda;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> tile[4];
  for (int c = 0; c < 4; ++c)
    wmma::fill_fragment(tile[c], 0.0f);
  // A constant bound (steps <= 4: kHead / 16 and kTile / 16), so the loop
  // unrolls and `left` indexes register arrays, not local memory.
  static_assert(kHead == kTile, "four steps of 16 in either product");
#pragma unroll
  for (int step = 0; step < kTile / 16; ++step) {
    if (step >= steps)
      break;
    LeftFragment<Element> terms[Terms];
    left(step, terms);
    for (int c = 0; c < 4; ++c) {
      if (c >= tiles)
        continue;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, Element, Layout> right;
      wmma::load_matrix_sync(right, b + step * stepStride + c * tileStride,
                             ldb);
      for (int term = 0; term < Terms; ++term)
        wmma::mma_sync(tile[c], terms[term], right, tile[c]);
    }
  }
  for (int c = 0; c < 4; ++c)
    if (c < tiles)
      wmma::store_matrix_sync(out + c * 16, tile[c], kScoreStride,
                              wmma::mem_row_major);
}

// Shared memory allows three blocks per SM, so registers may go up to 168
// per thread at no cost in occupancy; without that bound, ptxas held the
// bf16 kernel to 128 and spilled.
template <int Dtype>
__global__ void __launch_bounds__(kAttentionThreads, 3)
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
      reinterpret_cast<float *>(terms + kSplitTerms * kTile * kTermStride);
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
  // Each warp's 16 rows of queries stay in registers for every tile of
  // keys (2 KB of shared-memory reads per warp and tile saved).
  __syncthreads();
  const int eSteps = (e + 15) / 16, fTiles = (f + 15) / 16;
  LeftFragment<Element> queryRows[kHead / 16];
  for (int step = 0; step < kHead / 16; ++step)
    if (step < eSteps)
      nvcuda::wmma::load_matrix_sync(
          queryRows[step],
          reinterpret_cast<const Element *>(queries) + warp * 16 * kHead +
              step * 16,
          kHead);
  // Each thread owns 4 rows x 8 columns of the output, in f32: columns
  // 4g..4g+3 and 32+4g..32+4g+3 for its column group g, so that the eight
  // threads of a row read each half of it (128 bytes of f32) in one
  // conflict-free phase of 16-byte accesses.
  static_assert(kAttentionThreads == 128 && kTile == 64 && kHead == 64,
                "16 groups of 4 rows by 8 groups of 8 columns");
  const int rowGroup = tid / 8, colGroup = tid % 8;
  auto outColumn = [&](int c) { return (c / 4) * 32 + colGroup * 4 + c % 4; };
  float acc[4][8];
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 8; ++c)
      acc[i][c] = 0.0f;

  int64_t lastKey = causal ? min(t, q0 + kTile) : t;
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
        [&](int step, LeftFragment<Element> *terms) {
          terms[0] = queryRows[step];
        },
        eSteps, reinterpret_cast<const Element *>(keys), kHead, 16, 16 * kHead,
        4, scores + warp * 16 * kScoreStride);
    __syncwarp();
    // Online softmax: two lanes per row of the warp's 16 (lanes 2i and
    // 2i + 1 take row 16w + i), so that each of the row's reductions is one
    // shuffle. Each lane takes groups of four adjacent columns (group g,
    // columns 4g..4g+3, for g = 2j + the lane's half), read in one 16-byte
    // access and written (as each bf16 term, or as f32) in one.
    {
      const int r = warp * 16 + lane / 2, half = lane % 2;
      const int64_t query = q0 + r;
      float *row = scores + r * kScoreStride;
      auto visible = [&](int col) {
        int64_t key = k0 + col;
        return query < s && key < t && (!causal || key <= query);
      };
      // The scaled score is rounded before the subtraction (never fused
      // into one FMA): the row's maximum itself must give exp(0) = 1.
      auto group = [&](int j, float scaled[4]) {
        float4 x = load16(row + 4 * (2 * j + half));
        scaled[0] = __fmul_rn(x.x, scale);
        scaled[1] = __fmul_rn(x.y, scale);
        scaled[2] = __fmul_rn(x.z, scale);
        scaled[3] = __fmul_rn(x.w, scale);
      };
      float tileMax = -INFINITY;
      for (int j = 0; j < kTile / 8; ++j) {
        float scaled[4];
        group(j, scaled);
        for (int c = 0; c < 4; ++c)
          if (visible(4 * (2 * j + half) + c))
            tileMax = fmaxf(tileMax, scaled[c]);
      }
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
      float oldMax = rowMax[r], newMax = fmaxf(oldMax, tileMax);
      float partial = 0.0f;
      // Unrolled a little: fully, the f16 kernel took 252 registers.
#pragma unroll 2
      for (int j = 0; j < kTile / 8; ++j) {
        const int first = 4 * (2 * j + half);
        float scaled[4], p[4];
        group(j, scaled);
        for (int c = 0; c < 4; ++c) {
          p[c] = visible(first + c) ? expf(scaled[c] - newMax) : 0.0f;
          partial += p[c];
        }
        if constexpr (Dtype == LOOMRT_BF16) {
          // Split at once into the exact bf16 terms that P V multiplies.
          // words[term][h]: the term's bf16 of columns 2h and 2h + 1.
          unsigned words[kSplitTerms][2] = {};
          for (int c = 0; c < 4; ++c) {
            uint16_t split[kSplitTerms];
            loomrt_split_bf16x3(p[c], split);
            for (int term = 0; term < kSplitTerms; ++term)
              words[term][c / 2] |= unsigned(split[term]) << (16 * (c % 2));
          }
          for (int term = 0; term < kSplitTerms; ++term)
            store8(terms + term * kTile * kTermStride + r * kTermStride + first,
                   make_uint2(words[term][0], words[term][1]));
        } else {
          store16(row + first, make_float4(p[0], p[1], p[2], p[3]));
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
      const Element *warpTerms =
          reinterpret_cast<const Element *>(terms) + warp * 16 * kTermStride;
      warpTileProduct<Element, nvcuda::wmma::row_major, kSplitTerms>(
          [&](int step, LeftFragment<Element> *split) {
            for (int term = 0; term < kSplitTerms; ++term)
              nvcuda::wmma::load_matrix_sync(
                  split[term],
                  warpTerms + term * kTile * kTermStride + step * 16,
                  kTermStride);
          },
          kTile / 16, reinterpret_cast<const Element *>(values), kHead,
          16 * kHead, 16, fTiles, scores + warp * 16 * kScoreStride);
      __syncwarp();
      // The product covers fTiles * 16 columns, a multiple of 16: each of
      // this thread's groups of four columns is in it whole or not at all.
      for (int i = 0; i < 4; ++i)
        for (int half = 0; half < 2; ++half) {
          if (outColumn(4 * half) >= fTiles * 16)
            continue;
          float4 product = load16(scores + (rowGroup * 4 + i) * kScoreStride +
                                  outColumn(4 * half));
          acc[i][4 * half + 0] += product.x;
          acc[i][4 * half + 1] += product.y;
          acc[i][4 * half + 2] += product.z;
          acc[i][4 * half + 3] += product.w;
        }
    } else {
      for (int j = 0; j < kTile; ++j) {
        float value[8], p[4];
        for (int c = 0; c < 8; ++c)
          value[c] = loomrt_f16_to_f32(values[j * kHead + outColumn(c)]);
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
    uint16_t y[8];
    for (int c = 0; c < 8; ++c) {
      float value = acc[i][c] / total;
      y[c] = Dtype == LOOMRT_BF16 ? loomrt_f32_to_bf16(value)
                                  : loomrt_f32_to_f16(value);
    }
    uint16_t *outRow = ob + query * at.row[3];
    if (packs) {
      // Full-width rows: each group of four columns in one access, the
      // eight threads of a row writing each half of it whole.
      for (int half = 0; half < 2; ++half)
        store8(outRow + outColumn(4 * half),
               make_uint2(y[4 * half] | unsigned(y[4 * half + 1]) << 16,
                          y[4 * half + 2] | unsigned(y[4 * half + 3]) << 16));
      continue;
    }
    for (int c = 0; c < 8; ++c)
      if (outColumn(c) < f)
        outRow[outColumn(c)] = y[c];
  }
}

/// Whether the kernel may move full 64-wide rows of q, k, v and out as
/// 16-byte packs: full-width heads whose every row starts 16-byte aligned.
inline bool fusedAttentionPacks(const void *const bases[4],
                                const AttentionStrides &at, int64_t e,
                                int64_t f) {
  bool packs = e == kHead && f == kHead;
  for (int i = 0; i < 4; ++i)
    packs = packs && reinterpret_cast<uintptr_t>(bases[i]) % 16 == 0 &&
            at.outer[i] % 8 == 0 && at.inner[i] % 8 == 0 && at.row[i] % 8 == 0;
  return packs;
}

} // namespace loomrt::attention

#endif // LOOM_RUNTIME_CUDA_FUSEDATTENTION_CUH
