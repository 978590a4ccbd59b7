//===- FusedAttention.cuh - Flash-style attention kernel -----*- CUDA -*-===//
//
// Part of the Loom project.
//
// The fused attention kernels of runtime/cuda/Kernels.cu, in a header of
// their own so that unittests/FusedAttentionTest.cpp can also compile them
// for the host over an emulation of the CUDA features they use (threads,
// barriers, warp shuffles, WMMA tiles, mma.sync, ldmatrix and wgmma) and check
// them without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CUDA_FUSEDATTENTION_CUH
#define LOOM_RUNTIME_CUDA_FUSEDATTENTION_CUH

#include "loomrt.h"
#include "runtime/Exp2.h"
#include "runtime/SplitBf16.h"
#include "runtime/cuda/Mma.cuh"
#include "runtime/cuda/Packs.cuh"

#include <cstdint>
#include <cstdio>

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
// dimensions up to 64; on by default since an H200 run checked them
// (2026-11-30), off with LOOMRT_FAST_KERNELS=0. Three kernels:
// fusedAttentionKernel (WMMA; the products and the softmax go through
// shared memory) for f16, and for bf16 when LOOMRT_ATTENTION=wmma;
// mmaAttentionKernel (mma.sync; everything but the keys and values in
// registers) for bf16; and wgmmaAttentionKernel (Hopper's warpgroup
// products, the same arrangement) for bf16 when LOOMRT_ATTENTION=wgmma.

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

/// One thread's walk down the rows of a [rows, kHead] matrix, a tile of 64
/// rows a fetch: its packs are rows r + 16 n (n < kPacksPerThread) at
/// columns 8 c .. 8 c + 7, where r = threadIdx.x / 8 and c = threadIdx.x % 8
/// (the order storeTilePacks stores them in). The address advances by a
/// tile a fetch, so the loop over keys does no 64-bit index arithmetic and
/// reads no stride from the parameters.
struct PackWalk {
  const uint16_t *next; // this thread's first pack of the next tile
  int64_t packStride;   // elements from pack n to pack n + 1 (16 rows)
  int64_t rowsLeft;     // rows of the matrix from the next tile's row r on

  __device__ void begin(const uint16_t *matrix, int64_t rows,
                        int64_t rowStride) {
    begin(matrix, rows, rowStride, int(threadIdx.x) / kPacksPerRow,
          int(threadIdx.x) % kPacksPerRow);
  }

  /// The walk down rows r + 16 n at columns 8 c .. 8 c + 7.
  __device__ void begin(const uint16_t *matrix, int64_t rows,
                        int64_t rowStride, int r, int c) {
    next = matrix + r * rowStride + c * 8;
    packStride = rowStride * (kAttentionThreads / kPacksPerRow);
    rowsLeft = rows - r;
  }

  /// The next tile's packs, zero beyond the matrix's rows.
  __device__ void fetch(TilePacks &held) {
    constexpr int kRowsApart = kAttentionThreads / kPacksPerRow;
    if (rowsLeft > (kPacksPerThread - 1) * kRowsApart) {
      // All the thread's rows exist (every tile but a sequence's last).
      for (int n = 0; n < kPacksPerThread; ++n)
        held.pack[n] = load16(next + n * packStride);
    } else {
      for (int n = 0; n < kPacksPerThread; ++n)
        held.pack[n] = n * kRowsApart < rowsLeft ? load16(next + n * packStride)
                                                 : make_uint4(0, 0, 0, 0);
    }
    next += kPacksPerThread * packStride;
    rowsLeft -= kTile;
  }
};

/// This thread's packs of rows first..first+63 of a [rows, kHead] matrix
/// (`rowStride` elements apart), zero beyond `rows`.
__device__ void fetchTilePacks(TilePacks &held, const uint16_t *matrix,
                               int64_t first, int64_t rows, int64_t rowStride) {
  PackWalk walk;
  walk.begin(matrix + first * rowStride, rows - first, rowStride);
  walk.fetch(held);
}

/// The walk whose packs, stored in the fetch's order (thread t's pack n at
/// 16 (t + 128 n) bytes), make a tile of wgmma's core matrices
/// (wgmmaAttentionKernel): pack i = t + 128 n is row i % 8 + 8 (i / 64),
/// columns 8 ((i / 8) % 8) .. + 7, so thread t walks rows t % 8 + 8 (t /
/// 64) + 16 n at columns 8 ((t / 8) % 8). A warp reads 8 rows' 64
/// contiguous bytes each: whole 32-byte sectors.
__device__ void beginCoreMatrixWalk(PackWalk &walk, const uint16_t *matrix,
                                    int64_t rows, int64_t rowStride) {
  const int t = int(threadIdx.x);
  walk.begin(matrix, rows, rowStride, t % 8 + 8 * (t / 64), t / 8 % 8);
}

__device__ void storeCoreMatrixPacks(uint16_t *tile, const TilePacks &held) {
  for (int n = 0; n < kPacksPerThread; ++n)
    store16(tile + 8 * (threadIdx.x + n * kAttentionThreads), held.pack[n]);
}

/// Stores the packs into a tile whose rows are `tileStride` elements apart
/// (a multiple of 8).
__device__ void storeTilePacks(uint16_t *tile, const TilePacks &held,
                               int tileStride) {
  for (int n = 0; n < kPacksPerThread; ++n) {
    int i = threadIdx.x + n * kAttentionThreads;
    store16(tile + (i / kPacksPerRow) * tileStride + (i % kPacksPerRow) * 8,
            held.pack[n]);
  }
}

/// Rows first..first+63 of a [rows, width] matrix (`rowStride` elements
/// apart) into a kTile x kHead tile (rows `tileStride` apart), zero beyond
/// `rows` and `width`. Full-width rows (128 bytes) move as eight 16-byte
/// packs when the caller has checked that every row is 16-byte aligned.
__device__ void loadAttentionTile(uint16_t *tile, const uint16_t *matrix,
                                  int64_t first, int64_t rows, int width,
                                  int64_t rowStride, bool packs,
                                  int tileStride) {
  if (packs) {
    TilePacks held;
    fetchTilePacks(held, matrix, first, rows, rowStride);
    storeTilePacks(tile, held, tileStride);
    return;
  }
  for (int i = threadIdx.x; i < kTile * kHead; i += blockDim.x) {
    int64_t row = first + i / kHead;
    int col = i % kHead;
    tile[(i / kHead) * tileStride + col] =
        row < rows && col < width ? matrix[row * rowStride + col] : 0;
  }
}

/// Element strides of attention's q, k, v and out, passed by value.
struct AttentionStrides {
  int64_t outer[4], inner[4], row[4];
};

/// What a block of either attention kernel works on: 64 queries (tile
/// blockIdx.y) of one batch entry (blockIdx.x). Causal: the last queries
/// see the most keys, so their blocks start first, those of every batch
/// entry before any shorter tile (GPUs start blocks in about index order,
/// x fastest), and the short ones fill the end.
struct AttentionBlock {
  int64_t q0, lastKey;
  const uint16_t *q, *k, *v;
  uint16_t *out;
};

__device__ AttentionBlock attentionBlock(const uint16_t *q, const uint16_t *k,
                                         const uint16_t *v, uint16_t *out,
                                         int64_t inner, int64_t t,
                                         const AttentionStrides &at,
                                         int causal) {
  const int64_t b = blockIdx.x, bo = b / inner, bi = b % inner;
  AttentionBlock block;
  block.q0 = int64_t(causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y) * kTile;
  block.lastKey = causal ? min(t, block.q0 + kTile) : t;
  block.q = q + bo * at.outer[0] + bi * at.inner[0];
  block.k = k + bo * at.outer[1] + bi * at.inner[1];
  block.v = v + bo * at.outer[2] + bi * at.inner[2];
  block.out = out + bo * at.outer[3] + bi * at.inner[3];
  return block;
}

/// The block's keys and values, 64 rows at a time into shared tiles (rows
/// `tileStride` apart). With packs, each tile's rows are fetched into
/// registers during the previous tile's work: `start` fetches the first,
/// `put` stores the rows fetched (without packs: loads them) and fetches
/// the following ones, and `next` is `put` between two barriers, for one
/// pair of shared tiles.
/// CoreMatrices: the tiles are wgmma's core matrices (packs only;
/// `tileStride` unused).
template <bool CoreMatrices = false> struct KeyValueTiles {
  TilePacks keys, values;
  PackWalk keyWalk, valueWalk;

  __device__ void start(const AttentionBlock &block, int64_t t,
                        const AttentionStrides &at, bool packs) {
    if (packs && block.lastKey > 0) {
      if (CoreMatrices) {
        beginCoreMatrixWalk(keyWalk, block.k, t, at.row[1]);
        beginCoreMatrixWalk(valueWalk, block.v, t, at.row[2]);
      } else {
        keyWalk.begin(block.k, t, at.row[1]);
        valueWalk.begin(block.v, t, at.row[2]);
      }
      keyWalk.fetch(keys);
      valueWalk.fetch(values);
    }
  }

  /// The first keys and values are fetched (into registers) while the
  /// block's queries load into `queries` (rows `queryStride` apart), then
  /// stored into keyTile and valueTile.
  __device__ void startWithQueries(uint16_t *queries, int queryStride,
                                   uint16_t *keyTile, uint16_t *valueTile,
                                   const AttentionBlock &block, int64_t s,
                                   int64_t t, int e, int f,
                                   const AttentionStrides &at, bool packs,
                                   int tileStride) {
    start(block, t, at, packs);
    loadAttentionTile(queries, block.q, block.q0, s, e, at.row[0], packs,
                      queryStride);
    if (block.lastKey > 0)
      put(keyTile, valueTile, 0, block, t, e, f, at, packs, tileStride);
  }

  /// Tile k0 into keyTile and valueTile, which no warp may be reading.
  __device__ void put(uint16_t *keyTile, uint16_t *valueTile, int64_t k0,
                      const AttentionBlock &block, int64_t t, int e, int f,
                      const AttentionStrides &at, bool packs, int tileStride) {
    if (packs) {
      if (CoreMatrices) {
        storeCoreMatrixPacks(keyTile, keys);
        storeCoreMatrixPacks(valueTile, values);
      } else {
        storeTilePacks(keyTile, keys, tileStride);
        storeTilePacks(valueTile, values, tileStride);
      }
      if (k0 + kTile < block.lastKey) {
        keyWalk.fetch(keys);
        valueWalk.fetch(values);
      }
    } else {
      loadAttentionTile(keyTile, block.k, k0, t, e, at.row[1], false,
                        tileStride);
      loadAttentionTile(valueTile, block.v, k0, t, f, at.row[2], false,
                        tileStride);
    }
  }

  __device__ void next(uint16_t *keyTile, uint16_t *valueTile, int64_t k0,
                       const AttentionBlock &block, int64_t t, int e, int f,
                       const AttentionStrides &at, bool packs, int tileStride) {
    __syncthreads(); // every warp is done with the previous keys and values
    put(keyTile, valueTile, k0, block, t, e, f, at, packs, tileStride);
    __syncthreads();
  }
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

  const AttentionBlock block =
      attentionBlock(q, k, v, out, inner, t, at, causal);
  const int64_t q0 = block.q0;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // This block's queries, zero beyond s and beyond e.
  loadAttentionTile(queries, block.q, q0, s, e, at.row[0], packs, kHead);
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

  KeyValueTiles<> tiles;
  tiles.start(block, t, at, packs);
  for (int64_t k0 = 0; k0 < block.lastKey; k0 += kTile) {
    tiles.next(keys, values, k0, block, t, e, f, at, packs, kHead);
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
          // Split at once into the exact bf16 terms that P V multiplies,
          // two columns at a time (the terms of columns 0-1 and 2-3).
          uint32_t low[kSplitTerms], high[kSplitTerms];
          loomrt_split_bf16x3_pair(p[0], p[1], low);
          loomrt_split_bf16x3_pair(p[2], p[3], high);
          for (int term = 0; term < kSplitTerms; ++term)
            store8(terms + term * kTile * kTermStride + r * kTermStride + first,
                   make_uint2(low[term], high[term]));
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
    uint16_t *outRow = block.out + query * at.row[3];
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

// The bf16 kernel with its products in registers (mma.sync, whose layouts
// the PTX ISA documents): each warp keeps its 16 rows of queries, their
// scores, probabilities and outputs in registers, and only the block's
// keys and values pass through shared memory. A score's accumulator
// element is, for the next product, the matching element of P as a left
// operand, so P never leaves the registers. Rows of the shared tiles are
// 72 elements (144 bytes) apart, so that the 8 rows each phase of an
// ldmatrix reads, and the queries' words, spread over all 32 banks.
constexpr int kMmaStride = 72;
/// The queries' tile and two pairs of key and value tiles (46,080 bytes,
/// within the 48 KB a block gets unasked): the next keys and values are
/// stored into one pair while the warps still read the other, so a tile
/// of keys costs one barrier instead of two.
constexpr size_t kMmaTileElements = size_t(kTile) * kMmaStride;
constexpr size_t kMmaSharedBytes = 5 * kMmaTileElements * sizeof(uint16_t);

__device__ __forceinline__ uint32_t sharedWord(const uint16_t *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}
__device__ __forceinline__ uint32_t pairOf(uint16_t low, uint16_t high) {
  return low | uint32_t(high) << 16;
}

/// mmaAttentionKernel's scale: the scores' scale times log2(e), so that
/// exp(x * scale - max) is exp2 of the scores so scaled, one instruction
/// (ex2) where expf takes about nine.
inline float log2Scale(double scale) {
  return float(scale * 1.4426950408889634);
}

/// A warp's online softmax (FlashAttention-2's) over its 16 rows of
/// queries, row[h] = 16 * warp + group + 8 * h, in the layout of mmaBf16's
/// (and wgmmaBf16's) results: score[n][i] is the score of key k0 + 8 n + 2
/// quad + i % 2 for row[i / 2], output[c][i] the output at column 8 c + 2
/// quad + i % 2 of row[i / 2].
struct WarpSoftmax {
  int quad;           // lane % 4
  int row[2];         // the lane's rows of the block
  int64_t query[2];   // their queries
  float rowMax[2] = {-INFINITY, -INFINITY}, rowSum[2] = {0.0f, 0.0f};

  __device__ explicit WarpSoftmax(const AttentionBlock &block) {
    const int warp = threadIdx.x / 32, group = threadIdx.x % 32 / 4;
    quad = threadIdx.x % 4;
    for (int h = 0; h < 2; ++h) {
      row[h] = warp * 16 + group + 8 * h;
      query[h] = block.q0 + row[h];
    }
  }

  /// Makes the tile's scores its probabilities (unnormalised, base 2:
  /// log2Scale), adds them to the rows' sums and rescales the outputs to
  /// the rows' new maxima.
  __device__ void tile(float (&score)[kTile / 8][4],
                       float (&output)[kHead / 8][4], int64_t k0,
                       const AttentionBlock &block, int64_t s, int64_t t,
                       int causal, float scaleLog2) {
    // The scaled score is rounded before the subtraction (never fused into
    // one FMA): the row's maximum itself must give exp2(0) = 1. A masked
    // score (a key beyond t or, causal, after the query; or a padding row)
    // becomes -inf, so it adds nothing; only tiles on the diagonal or at an
    // end have any, so the others skip the test (most of a long causal
    // sequence's tiles).
    const bool wholeTile = k0 + kTile <= t && block.q0 + kTile <= s &&
                           (!causal || k0 + kTile - 1 <= block.q0);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
      for (int i = 0; i < 4; ++i)
        score[n][i] = __fmul_rn(score[n][i], scaleLog2);
    if (!wholeTile) {
      // Row h sees the tile's keys k0 + j for j < visible[h]: keys before
      // t and, causal, not after the query; none for a padding row. So the
      // test per score is one 32-bit comparison (64-bit ones took about 10
      // instructions a score).
      int visible[2];
      for (int h = 0; h < 2; ++h) {
        int64_t limit = t - k0;
        if (causal && query[h] - k0 + 1 < limit)
          limit = query[h] - k0 + 1;
        if (query[h] >= s || limit < 0)
          limit = 0;
        visible[h] = limit < kTile ? int(limit) : kTile;
      }
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n)
        for (int i = 0; i < 4; ++i)
          if (n * 8 + 2 * quad + i % 2 >= visible[i / 2])
            score[n][i] = -INFINITY;
    }
    float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
      for (int i = 0; i < 4; ++i)
        tileMax[i / 2] = fmaxf(tileMax[i / 2], score[n][i]);
    float factor[2];
    for (int h = 0; h < 2; ++h) {
      tileMax[h] =
          fmaxf(tileMax[h], __shfl_xor_sync(0xffffffffu, tileMax[h], 1));
      tileMax[h] =
          fmaxf(tileMax[h], __shfl_xor_sync(0xffffffffu, tileMax[h], 2));
      float newMax = fmaxf(rowMax[h], tileMax[h]);
      // Nothing visible yet: nothing to rescale. (Only a padding row, whose
      // values are never stored, stays so past its first tile of keys.)
      factor[h] = newMax == -INFINITY ? 1.0f
                                      : loomrt_exp2_flushed(rowMax[h] - newMax);
      rowMax[h] = newMax;
    }
    float partial[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
      for (int i = 0; i < 4; ++i) {
        score[n][i] = loomrt_exp2_flushed(score[n][i] - rowMax[i / 2]);
        partial[i / 2] += score[n][i];
      }
    for (int h = 0; h < 2; ++h) {
      partial[h] += __shfl_xor_sync(0xffffffffu, partial[h], 1);
      partial[h] += __shfl_xor_sync(0xffffffffu, partial[h], 2);
      rowSum[h] = rowSum[h] * factor[h] + partial[h];
    }
    // Once a row's maximum settles (most tiles of a long row), its factor
    // is 1: the warp skips the multiplications when all its rows' are.
    if (__any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f)) {
#pragma unroll
      for (int c = 0; c < kHead / 8; ++c)
        for (int i = 0; i < 4; ++i)
          output[c][i] *= factor[i / 2];
    }
  }

  /// The outputs divided by the rows' sums, rounded once, into `block.out`
  /// (rows `rowStride` apart, `f` columns; packs: all 64, 4-byte aligned).
  __device__ void store(const float (&output)[kHead / 8][4],
                        const AttentionBlock &block, int64_t s, int f,
                        int64_t rowStride, bool packs) const {
    for (int h = 0; h < 2; ++h) {
      if (query[h] >= s)
        continue;
      uint16_t *outRow = block.out + query[h] * rowStride;
      for (int c = 0; c < kHead / 8; ++c) {
        int col = c * 8 + 2 * quad;
        uint16_t y[2] = {loomrt_f32_to_bf16(output[c][2 * h] / rowSum[h]),
                         loomrt_f32_to_bf16(output[c][2 * h + 1] / rowSum[h])};
        if (packs) {
          *reinterpret_cast<uint32_t *>(outRow + col) = pairOf(y[0], y[1]);
          continue;
        }
        for (int j = 0; j < 2; ++j)
          if (col + j < f)
            outRow[col + j] = y[j];
      }
    }
  }
};

/// P's left operand words for keys 16 step .. 16 step + 15 (score blocks 2
/// step and 2 step + 1) in mmaBf16's layout of A, each probability split
/// exactly into three bf16 terms, whose products with V are exact: word i
/// is row group + 8 (i % 2), keys of score block 2 step + i / 2.
__device__ __forceinline__ void
splitProbabilities(const float (&score)[kTile / 8][4], int step,
                   uint32_t (&terms)[kSplitTerms][4]) {
  for (int i = 0; i < 4; ++i) {
    const float *pair = &score[2 * step + i / 2][2 * (i % 2)];
    uint32_t words[kSplitTerms];
    loomrt_split_bf16x3_pair(pair[0], pair[1], words);
    for (int term = 0; term < kSplitTerms; ++term)
      terms[term][i] = words[term];
  }
}

/// The warp's queries as left operands, one per 16 columns of e, from the
/// queries' tile (rows kMmaStride apart).
__device__ __forceinline__ void
loadQueryOperands(uint32_t (&queryRows)[kHead / 16][4], const uint16_t *queries,
                  const int row[2], int quad) {
#pragma unroll
  for (int step = 0; step < kHead / 16; ++step)
    for (int i = 0; i < 4; ++i)
      queryRows[step][i] = sharedWord(queries + row[i % 2] * kMmaStride +
                                      step * 16 + 8 * (i / 2) + 2 * quad);
}

// Three blocks per SM (twelve warps, three for each scheduler to hide the
// products' latency; shared memory holds three): ptxas fits the kernel in
// 168 registers without spilling (it took 212 when allowed; the two-term
// experiment spills 4 bytes). `Terms` of P's split multiply V: 3, exact
// (the language's rule); 2 only as the experiment LOOMRT_ATTENTION_TERMS=2
// (P to about 16 bits; docs/running.md).
template <int Terms = kSplitTerms>
__global__ void __launch_bounds__(kAttentionThreads, 3)
    mmaAttentionKernel(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                       uint16_t *out, int64_t inner, int64_t s, int64_t t,
                       int e, int f, AttentionStrides at, int causal,
                       float scaleLog2, bool packs) {
  static_assert(Terms >= 1 && Terms <= kSplitTerms, "a split's terms");
  LOOMRT_DYNAMIC_SHARED(attentionShared);
  uint16_t *queries = reinterpret_cast<uint16_t *>(attentionShared);
  const AttentionBlock block =
      attentionBlock(q, k, v, out, inner, t, at, causal);
  const int lane = threadIdx.x % 32;

  // The queries, and the first keys and values in pair 0.
  KeyValueTiles<> tiles;
  tiles.startWithQueries(queries, kMmaStride, queries + kMmaTileElements,
                         queries + 2 * kMmaTileElements, block, s, t, e, f, at,
                         packs, kMmaStride);
  __syncthreads();
  // The warp's rows, their statistics (the lanes of a quad hold the same)
  // and outputs (f columns in blocks of 8).
  WarpSoftmax softmax(block);
  uint32_t queryRows[kHead / 16][4];
  loadQueryOperands(queryRows, queries, softmax.row, softmax.quad);
  float output[kHead / 8][4] = {};

  for (int64_t k0 = 0, pair = 0; k0 < block.lastKey; k0 += kTile, pair ^= 1) {
    const uint16_t *keys = queries + (1 + 2 * pair) * kMmaTileElements;
    const uint16_t *values = keys + kMmaTileElements;
    // Scores of keys k0 + 8n + 2 * quad + (i % 2) for row[i / 2].
    float score[kTile / 8][4] = {};
    // All 64 columns of e, also beyond a narrower head: the tiles hold
    // zeros there, whose products add nothing, and a loop without exits
    // lets the compiler interleave the products.
#pragma unroll
    for (int step = 0; step < kHead / 16; ++step) {
#pragma unroll
      for (int n = 0; n < kTile / 8; n += 2) {
        // Two blocks of 8 keys per ldmatrix: matrix j = lane / 8 is keys
        // 8 (n + j / 2) .. + 7 at columns 16 * step + 8 * (j % 2) .. + 7.
        uint32_t right[4];
        loadMatrices(right,
                     keys + ((n + lane / 16) * 8 + lane % 8) * kMmaStride +
                         step * 16 + 8 * (lane / 8 % 2),
                     false);
        mmaBf16(score[n], queryRows[step], right);
        mmaBf16(score[n + 1], queryRows[step], right + 2);
      }
    }
    softmax.tile(score, output, k0, block, s, t, causal, scaleLog2);
#pragma unroll
    for (int step = 0; step < kTile / 16; ++step) {
      uint32_t terms[kSplitTerms][4];
      splitProbabilities(score, step, terms);
      // Two blocks of 8 columns of V per transposing ldmatrix: matrix
      // j = lane / 8 is keys 16 * step + 8 * (j % 2) .. + 7 at columns
      // 8 (c + j / 2) .. + 7; blocks beyond f read the tile's zeros (their
      // outputs are never stored). All of V's blocks first, then the terms
      // one after another over them: the products of one term are
      // independent of each other, and each output block still takes
      // terms 0, 1 and 2 in that order.
      uint32_t right[kHead / 8][2];
#pragma unroll
      for (int c = 0; c < kHead / 8; c += 2)
        loadMatrices(
            &right[c][0],
            values + (step * 16 + 8 * (lane / 8 % 2) + lane % 8) * kMmaStride +
                (c + lane / 16) * 8,
            true);
#pragma unroll
      for (int term = 0; term < Terms; ++term)
#pragma unroll
        for (int c = 0; c < kHead / 8; ++c)
          mmaBf16(output[c], terms[term], right[c]);
    }
    // The next keys and values into the other pair, which every warp
    // finished reading before the last barrier; this barrier makes them
    // visible and keeps the pair just read until every warp is done.
    if (k0 + kTile < block.lastKey)
      tiles.put(queries + (3 - 2 * pair) * kMmaTileElements,
                queries + (4 - 2 * pair) * kMmaTileElements, k0 + kTile,
                block, t, e, f, at, packs, kMmaStride);
    __syncthreads();
  }
  softmax.store(output, block, s, f, at.row[3], packs);
}

// The bf16 kernel on Hopper's warpgroup products (wgmma, sm_90a): the
// mma.sync kernel's arrangement (each warp's 16 rows of queries, scores,
// probabilities and outputs in registers, in the same layouts), but the
// block's four warps multiply as one warpgroup, reading the keys and
// values straight from shared memory: a tile of keys is 4 products for
// the scores and 12 for P V where mma.sync took 128 and 32 ldmatrix a warp.
// The key and value tiles are stored as wgmma's 8 x 8 core matrices
// (matrixDescriptor, no swizzling): row r, columns 8 c .. 8 c + 7 of a
// 64-wide tile at bytes 1024 (r / 8) + 128 c + 16 (r % 8), which the
// fetch's packs fill in order (KeyValueTiles<true>): 16-byte stores of
// consecutive threads to consecutive addresses, free of bank conflicts.
// Full-width rows only (packs); the host falls back to mmaAttentionKernel
// otherwise. An experiment until a GPU has checked it (LOOMRT_ATTENTION=
// wgmma): its layouts are read from the PTX ISA and CUTLASS, and the
// emulation implements the same reading.
constexpr size_t kCoreTileElements = size_t(kTile) * kHead;
constexpr uint32_t kCoreMatrixBytes = 128;                // 8 rows of 16 bytes
constexpr uint32_t kCoreRowsBytes = kHead / 8 * kCoreMatrixBytes; // 8 rows
/// How wgmma reads one of those tiles as B (matrixDescriptor's offsets) and
/// how far each product's 16 rows of K move its start.
struct CoreTileReading {
  uint32_t leadingBytes, strideBytes, stepBytes;
};
/// Whether this build reads a product's tiles with the leading and stride
/// byte offsets exchanged: bench/gpu/run builds so (LOOMRT_WGMMA_KEYS_
/// EXCHANGED, LOOMRT_WGMMA_VALUES_EXCHANGED) when bench/gpu/wgmma-probe.cu
/// finds a GPU that takes the two the other way round from the PTX ISA's
/// reading, so that one GPU run checks and times the kernel either way.
#ifdef LOOMRT_WGMMA_KEYS_EXCHANGED
constexpr bool kKeysOffsetsExchanged = true;
#else
constexpr bool kKeysOffsetsExchanged = false;
#endif
#ifdef LOOMRT_WGMMA_VALUES_EXCHANGED
constexpr bool kValuesOffsetsExchanged = true;
#else
constexpr bool kValuesOffsetsExchanged = false;
#endif
/// `reading`, with its offsets exchanged if `exchanged`: the same tile.
__host__ __device__ constexpr CoreTileReading
builtReading(CoreTileReading reading, bool exchanged) {
  return exchanged ? CoreTileReading{reading.strideBytes, reading.leadingBytes,
                                     reading.stepBytes}
                   : reading;
}
/// The keys for the scores (B[k][n] is key n's column k, K-major): the next
/// 8 columns are the next core matrix, the next 8 keys the next 8 rows of
/// them; the k-th 16 columns are core matrices 2 k and 2 k + 1.
__host__ __device__ constexpr CoreTileReading keysReading() {
  return builtReading({kCoreMatrixBytes, kCoreRowsBytes, 2 * kCoreMatrixBytes},
                      kKeysOffsetsExchanged);
}
/// The values for P V (B[k][n] is key k's column n, MN-major): along K the
/// next 8 keys, along N the next core matrix; the k-th 16 keys are two rows
/// of core matrices.
__host__ __device__ constexpr CoreTileReading valuesReading() {
  return builtReading({kCoreRowsBytes, kCoreMatrixBytes, 2 * kCoreRowsBytes},
                      kValuesOffsetsExchanged);
}

/// The descriptor of a core-matrix tile's `step`-th 16 rows of K.
__device__ __forceinline__ uint64_t
coreTileDescriptor(const uint16_t *tile, CoreTileReading reading, int step) {
  return matrixDescriptor(tile + step * reading.stepBytes / sizeof(uint16_t),
                          reading.leadingBytes, reading.strideBytes);
}

/// The queries' tile (rows kMmaStride apart) and two pairs of key and value
/// tiles in core matrices: 41,984 bytes.
constexpr size_t kWgmmaSharedBytes =
    (kMmaTileElements + 4 * kCoreTileElements) * sizeof(uint16_t);

template <int Terms = kSplitTerms>
__global__ void __launch_bounds__(kAttentionThreads, 3)
    wgmmaAttentionKernel(const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, uint16_t *out, int64_t inner,
                         int64_t s, int64_t t, int e, int f, AttentionStrides at,
                         int causal, float scaleLog2) {
  static_assert(Terms >= 1 && Terms <= kSplitTerms, "a split's terms");
#ifdef LOOMRT_HAS_WGMMA
  LOOMRT_DYNAMIC_SHARED(attentionShared);
  uint16_t *queries = reinterpret_cast<uint16_t *>(attentionShared);
  uint16_t *keyValues = queries + kMmaTileElements;
  const AttentionBlock block =
      attentionBlock(q, k, v, out, inner, t, at, causal);

  KeyValueTiles<true> tiles;
  tiles.startWithQueries(queries, kMmaStride, keyValues,
                         keyValues + kCoreTileElements, block, s, t, e, f, at,
                         true, 0);
  fenceSharedForWgmma();
  __syncthreads();
  WarpSoftmax softmax(block);
  uint32_t queryRows[kHead / 16][4];
  loadQueryOperands(queryRows, queries, softmax.row, softmax.quad);
  float output[kHead / 8][4] = {};
  for (int64_t k0 = 0, pair = 0; k0 < block.lastKey; k0 += kTile, pair ^= 1) {
    const uint16_t *keys = keyValues + 2 * pair * kCoreTileElements;
    const uint16_t *values = keys + kCoreTileElements;
    // S = Q K^T (keysReading).
    float score[kTile / 8][4];
    wgmmaFence();
#pragma unroll
    for (int step = 0; step < kHead / 16; ++step)
      wgmmaBf16<false>(&score[0][0], queryRows[step],
                       coreTileDescriptor(keys, keysReading(), step), step > 0);
    wgmmaCommit();
    wgmmaWaitAll();
    softmax.tile(score, output, k0, block, s, t, causal, scaleLog2);
    // O += P V (valuesReading). Each step's products are issued as soon as
    // its terms are split, so the next step's split runs while they do
    // (each step its own registers: a product reads them until the wait).
    uint32_t terms[kTile / 16][kSplitTerms][4];
#pragma unroll
    for (int step = 0; step < kTile / 16; ++step) {
      splitProbabilities(score, step, terms[step]);
      wgmmaFence();
#pragma unroll
      for (int term = 0; term < Terms; ++term)
        wgmmaBf16<true>(&output[0][0], terms[step][term],
                        coreTileDescriptor(values, valuesReading(), step),
                        true);
    }
    wgmmaCommit();
    wgmmaWaitAll();
    // The products that read the other pair ended before the last barrier.
    if (k0 + kTile < block.lastKey)
      tiles.put(keyValues + (2 - 2 * pair) * kCoreTileElements,
                keyValues + (3 - 2 * pair) * kCoreTileElements, k0 + kTile,
                block, t, e, f, at, true, 0);
    fenceSharedForWgmma();
    __syncthreads();
  }
  softmax.store(output, block, s, f, at.row[3], true);
#else
  // Built for a GPU without wgmma: the host chose this kernel only for a
  // 9.x device, so the program was built for sm_90, not sm_90a.
  if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0)
    printf("loomrt: LOOMRT_ATTENTION=wgmma needs the program built for "
           "sm_90a (--cuda-arch=sm_90a)\n");
  __trap();
#endif
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
