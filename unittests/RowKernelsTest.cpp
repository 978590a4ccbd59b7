//===- RowKernelsTest.cpp - The 16-byte CUDA row kernels, on the host -----===//
//
// Runs the source of the row kernels with 16-byte loads (runtime/cuda/
// RowKernels.cuh) on host threads (CudaOnCpu.h) and checks them against
// the exact results rounded once: layer norm of bf16 rows with f32 gains
// and biases (a GPT's), RMS norm of f16 rows with f16 gains, f32 rows as
// long as a row held in registers may be, the masked attention softmax, the
// softmax of rows (a warp or a block each), row sums, means and maxima (a
// NaN wins the maximum) and a cross-entropy's losses (a warp or a block a
// row each).
//
//===----------------------------------------------------------------------===//

#include "runtime/emulation/CudaOnCpu.h"
// atomicMin, which the cross-entropy's check of its targets takes.
#include "runtime/emulation/CudaRuntimeOnCpu.h"

#include "runtime/cuda/RowKernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using namespace loomrt::rows;
using loomrt::load;
using loomrt::store;

/// Values of `dtype` in a 16-byte aligned buffer, from exact f32 values.
struct Buffer {
  int dtype;
  std::vector<float> storage; // f32 words hold 2 bf16/f16 elements
  Buffer(int dtype, const std::vector<float> &values)
      : dtype(dtype), storage(values.size()) {
    for (size_t i = 0; i < values.size(); ++i)
      store(dtype, data(), int64_t(i), values[i]);
  }
  void *data() { return storage.data(); }
  float at(int64_t i) { return load(dtype, data(), i); }
};

std::vector<float> randomValues(int dtype, size_t count, float mean,
                                unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(mean, 1.0f);
  std::vector<float> values(count);
  for (float &v : values) {
    // Representable in the type, so that the kernel and the reference
    // start from the same numbers.
    Buffer one(dtype, {normal(random)});
    v = one.at(0);
  }
  return values;
}

/// Distance in units in the last place of `dtype` between the stored
/// result and the exact value rounded once.
int64_t ulps(int dtype, float got, double exact) {
  auto ordered = [&](float x) -> int64_t {
    uint32_t bits;
    if (dtype == LOOMRT_F32) {
      std::memcpy(&bits, &x, 4);
      int64_t magnitude = bits & 0x7fffffffu;
      return bits >> 31 ? -magnitude : magnitude;
    }
    uint16_t half =
        dtype == LOOMRT_BF16 ? loomrt_f32_to_bf16(x) : loomrt_f32_to_f16(x);
    int64_t magnitude = half & 0x7fff;
    return half & 0x8000 ? -magnitude : magnitude;
  };
  Buffer rounded(dtype, {float(exact)});
  return std::llabs(ordered(got) - ordered(rounded.at(0)));
}

/// The most ulps over the rows of a norm against the exact one, each row
/// held by `Lanes` threads with K packs each. With `add`, the kernel's
/// rows are x0 + x1 (loomrt_add_norm): the sum it stores must be their sum
/// rounded once, bit for bit, and the norm is of that sum. With
/// `addendBias`, x1 is x1 + c (a row c), rounded before the sum.
template <int Dtype, int ScaleDtype, int Lanes = kBlockRow, int K = kRowPacks>
int64_t normError(int64_t rows, int64_t n, bool rms, unsigned blocks,
                  bool add = false, bool addendBias = false) {
  std::vector<float> x = randomValues(Dtype, size_t(rows * n), 0.5f, 1),
                     gain = randomValues(ScaleDtype, size_t(n), 1.0f, 2),
                     shift = randomValues(ScaleDtype, size_t(n), 0.0f, 3),
                     addend = randomValues(Dtype, size_t(rows * n), -0.25f, 4),
                     row = randomValues(Dtype, size_t(n), 0.125f, 5);
  Buffer in(Dtype, x), other(Dtype, addend), rowBias(Dtype, row),
      scale(ScaleDtype, gain),
      bias(ScaleDtype, shift),
      out(Dtype, std::vector<float>(size_t(rows * n), 0.0f)),
      sum(Dtype, std::vector<float>(size_t(rows * n), 0.0f));
  const float eps = 1e-5f;
  auto kernel = addendBias ? normVecKernel<Dtype, ScaleDtype, Lanes, K, true>
                           : normVecKernel<Dtype, ScaleDtype, Lanes, K>;
  cuda_on_cpu::launch({blocks, 1, 1}, 256, 0, [&] {
    kernel(in.data(), loomrt_consecutive_rows(rows, n),
           add ? other.data() : nullptr, addendBias ? rowBias.data() : nullptr,
           add ? sum.data() : nullptr, scale.data(),
           rms ? nullptr : bias.data(), out.data(), rows, n, eps, rms);
  });
  if (add)
    for (size_t i = 0; i < x.size(); ++i) {
      if (addendBias) // the addend and its bias, rounded first
        addend[i] = Buffer(Dtype, {addend[i] + row[i % size_t(n)]}).at(0);
      Buffer rounded(Dtype, {x[i] + addend[i]});
      EXPECT_EQ(sum.at(int64_t(i)), rounded.at(0)) << "sum element " << i;
      x[i] = rounded.at(0);
    }
  int64_t worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, squares = 0.0;
    for (int64_t j = 0; j < n; ++j)
      mean += x[size_t(r * n + j)];
    mean = rms ? 0.0 : mean / double(n);
    for (int64_t j = 0; j < n; ++j)
      squares += (x[size_t(r * n + j)] - mean) * (x[size_t(r * n + j)] - mean);
    double inverse = 1.0 / std::sqrt(squares / double(n) + double(eps));
    for (int64_t j = 0; j < n; ++j) {
      double y = (x[size_t(r * n + j)] - mean) * inverse * gain[size_t(j)] +
                 (rms ? 0.0 : shift[size_t(j)]);
      if (Dtype == LOOMRT_F32) // f32: the order of the f32 sums shows
        worst = std::max(
            worst,
            int64_t(std::fabs(out.at(r * n + j) - y) /
                    (1e-6 * (std::fabs(y) + std::fabs(shift[size_t(j)]) + 1))));
      else
        worst = std::max(worst, ulps(Dtype, out.at(r * n + j), y));
    }
  }
  return worst;
}

TEST(RowKernelsTest, LayerNormBf16RowsWithF32Gains) {
  // A GPT's layer norm: 768 bf16 elements, f32 gains and biases; five rows
  // over two blocks (each block loops over rows).
  EXPECT_LE((normError<LOOMRT_BF16, LOOMRT_F32>(5, 768, false, 2)), 1);
}

TEST(RowKernelsTest, LayerNormBf16RowsAWarpEach) {
  // The same rows a warp each (96 packs, 4 a lane, the last lane-pack
  // empty): 19 rows over 2 blocks of 8 warps, so that 3 warps take a
  // second row and the other 13 find none.
  EXPECT_LE(
      (normError<LOOMRT_BF16, LOOMRT_F32, kWarpRow, 4>(19, 768, false, 2)), 1);
  // 256 packs, 8 a lane: the longest row a warp holds.
  EXPECT_LE(
      (normError<LOOMRT_BF16, LOOMRT_BF16, kWarpRow, 8>(3, 2048, true, 1)), 1);
  EXPECT_LE((normError<LOOMRT_F32, LOOMRT_F32, kWarpRow, 1>(9, 128, false, 1)),
            1);
}

TEST(RowKernelsTest, AddThenNormRows) {
  // A GPT's residual sum and the layer norm after it (loom.add_norm): a
  // warp a row, then a block a row; and an RMS norm of f16 sums.
  EXPECT_LE((normError<LOOMRT_BF16, LOOMRT_F32, kWarpRow, 4>(19, 768, false, 2,
                                                             true)),
            1);
  EXPECT_LE((normError<LOOMRT_BF16, LOOMRT_F32>(5, 768, false, 2, true)), 1);
  EXPECT_LE(
      (normError<LOOMRT_F16, LOOMRT_F16, kWarpRow, 2>(7, 512, true, 1, true)),
      1);
}

TEST(RowKernelsTest, AddBiasedAddendThenNormRows) {
  // x + (m + c) and its norm, c a row (loom.add_norm with `plus`): a GPT's
  // MLP output with its bias added to the residual stream, normalised by
  // the next layer; a warp a row and a block a row.
  EXPECT_LE((normError<LOOMRT_BF16, LOOMRT_F32, kWarpRow, 4>(19, 768, false, 2,
                                                             true, true)),
            1);
  EXPECT_LE((normError<LOOMRT_BF16, LOOMRT_F32>(5, 768, false, 2, true, true)),
            1);
  EXPECT_LE((normError<LOOMRT_F16, LOOMRT_F16, kWarpRow, 2>(7, 512, true, 1,
                                                            true, true)),
            1);
}

TEST(RowKernelsTest, RmsNormF16RowsWithF16Gains) {
  EXPECT_LE((normError<LOOMRT_F16, LOOMRT_F16>(3, 256, true, 3)), 1);
}

TEST(RowKernelsTest, LayerNormF32RowsAsLongAsRegistersHold) {
  // 256 threads x 4 packs x 4 floats: the longest row kept in registers.
  // f32 results: within 1e-6 of the terms' size (the f32 sums' order).
  EXPECT_LE((normError<LOOMRT_F32, LOOMRT_F32>(2, 4096, false, 1)), 1);
}

TEST(RowKernelsTest, AttentionSoftmaxMasksAndNormalises) {
  const int64_t s = 6, t = 100, batch = 2, rows = batch * s;
  std::vector<float> scores = randomValues(LOOMRT_F32, size_t(rows * t), 0, 4);
  std::vector<float> original = scores;
  for (int causal = 0; causal < 2; ++causal) {
    scores = original;
    cuda_on_cpu::launch({4, 1, 1}, 256, 0, [&] {
      attentionSoftmaxVecKernel(scores.data(), rows, s, t, causal);
    });
    for (int64_t r = 0; r < rows; ++r) {
      int64_t visible = causal ? std::min(t, r % s + 1) : t;
      double maximum = -INFINITY, total = 0.0;
      for (int64_t j = 0; j < visible; ++j)
        maximum = std::max(maximum, double(original[size_t(r * t + j)]));
      for (int64_t j = 0; j < visible; ++j)
        total += std::exp(original[size_t(r * t + j)] - maximum);
      for (int64_t j = 0; j < t; ++j) {
        double p = j < visible
                       ? std::exp(original[size_t(r * t + j)] - maximum) / total
                       : 0.0;
        EXPECT_NEAR(scores[size_t(r * t + j)], p, 1e-6 * (p + 1e-3))
            << "row " << r << ", column " << j << ", causal " << causal;
      }
    }
  }
}

/// The most ulps of softmaxVecKernel<Dtype, Lanes, K> over `rows` rows of
/// n elements against the exact softmax rounded once; row 1 holds a NaN,
/// which must make its every output NaN and leave the other rows alone.
template <int Dtype, int Lanes, int K>
int64_t softmaxError(int64_t rows, int64_t n, unsigned blocks) {
  std::vector<float> x = randomValues(Dtype, size_t(rows * n), 0.0f, 6);
  for (float &v : x)
    v = Buffer(Dtype, {4.0f * v}).at(0); // scores spread over e^±12
  x[size_t(n + 3)] = std::numeric_limits<float>::quiet_NaN();
  Buffer in(Dtype, x), out(Dtype, std::vector<float>(size_t(rows * n), -1.0f));
  cuda_on_cpu::launch({blocks, 1, 1}, 256, 0, [&] {
    softmaxVecKernel<Dtype, Lanes, K>(
        in.data(), loomrt_consecutive_rows(rows, n), out.data(), rows, n);
  });
  int64_t worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 1) {
      for (int64_t j = 0; j < n; ++j)
        EXPECT_TRUE(std::isnan(out.at(r * n + j))) << "column " << j;
      continue;
    }
    double maximum = -INFINITY, total = 0.0;
    for (int64_t j = 0; j < n; ++j)
      maximum = std::max(maximum, double(x[size_t(r * n + j)]));
    for (int64_t j = 0; j < n; ++j)
      total += std::exp(double(x[size_t(r * n + j)]) - maximum);
    for (int64_t j = 0; j < n; ++j) {
      double p = std::exp(double(x[size_t(r * n + j)]) - maximum) / total;
      if (Dtype == LOOMRT_F32) // f32: expf and the sums' order show
        worst = std::max(worst, int64_t(std::fabs(out.at(r * n + j) - p) /
                                        (1e-6 * p + 1e-9)));
      else
        worst = std::max(worst, ulps(Dtype, out.at(r * n + j), p));
    }
  }
  return worst;
}

TEST(RowKernelsTest, SoftmaxRowsAWarpOrABlockEach) {
  // bf16 rows of 200 packs: a warp each, 8 packs a lane (7 rows, fewer
  // blocks than rows so that blocks take several); within 1 ulp of the
  // exact softmax rounded once.
  EXPECT_LE((softmaxError<LOOMRT_BF16, kWarpRow, 8>(7, 1600, 1)), 1);
  // A warp each, one pack a lane, rows shorter than the warp.
  EXPECT_LE((softmaxError<LOOMRT_BF16, kWarpRow, 1>(9, 96, 1)), 1);
  // f32 rows as long as registers hold, a block each: within 1e-6 of each
  // probability (plus 1e-9).
  EXPECT_LE((softmaxError<LOOMRT_F32, kBlockRow, kRowPacks>(3, 4096, 2)), 4);
}

/// Checks rowReduceVecKernel<LOOMRT_BF16, Lanes> on `rows` rows of 1000
/// elements (125 packs of 8 bf16) over `blocks` blocks: sums, means and
/// maxima within 1 ulp of the exact ones rounded once; row 2 holds a NaN.
/// With `gap` > 0 the rows are a strided piece, `gap` elements apart
/// (loomrt_rows), and the gaps hold NaNs that a read past a row would take.
template <int Lanes>
void checkRowReductions(int64_t rows, unsigned blocks, int64_t gap = 0) {
  const int64_t n = 1000, stride = n + gap;
  std::vector<float> x = randomValues(LOOMRT_BF16, size_t(rows * stride), 0, 5);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = n; j < stride; ++j)
      x[size_t(r * stride + j)] = std::numeric_limits<float>::quiet_NaN();
  x[size_t(2 * stride + 17)] = std::numeric_limits<float>::quiet_NaN();
  Buffer in(LOOMRT_BF16, x);
  for (int reduction : {LOOMRT_SUM, LOOMRT_MAX}) {
    Buffer out(LOOMRT_BF16, std::vector<float>(size_t(rows), -1.0f));
    float scale = reduction == LOOMRT_SUM ? 1.0f / float(n) : 1.0f; // a mean
    cuda_on_cpu::launch({blocks, 1, 1}, 256, 0, [&] {
      rowReduceVecKernel<LOOMRT_BF16, Lanes>(reduction, in.data(),
                                             loomrt_rows{rows, 0, stride},
                                             out.data(), rows, n, scale);
    });
    for (int64_t r = 0; r < rows; ++r) {
      double exact = reduction == LOOMRT_SUM ? 0.0 : -INFINITY;
      bool nan = false;
      for (int64_t j = 0; j < n; ++j) {
        float v = x[size_t(r * stride + j)];
        nan = nan || std::isnan(v);
        exact =
            reduction == LOOMRT_SUM ? exact + v : std::max(exact, double(v));
      }
      if (nan) {
        EXPECT_TRUE(std::isnan(out.at(r)))
            << "row " << r << ", reduction " << reduction;
        continue;
      }
      EXPECT_LE(ulps(LOOMRT_BF16, out.at(r), exact * scale), 1)
          << "row " << r << ", reduction " << reduction << ", lanes " << Lanes
          << ", gap " << gap;
    }
  }
}

TEST(RowKernelsTest, RowSumsMeansAndMaxima) {
  checkRowReductions<kBlockRow>(3, 2); // a block a row, blocks taking two
  checkRowReductions<kWarpRow>(11, 1); // a warp a row, 8 warps for 11 rows
  // Rows of a strided piece (a pack's gap between rows), read in place.
  checkRowReductions<kBlockRow>(3, 2, 8);
  checkRowReductions<kWarpRow>(11, 1, 16);
}

/// The worst error of crossEntropyRowsKernel<Dtype, Lanes> over `rows`
/// rows of `vocab` logits against the exact losses, in millionths of
/// (|loss| + 1). Row 1 holds a NaN, whose loss must be NaN; row 2's target
/// is outside the vocabulary, which must leave its loss 0 and set the
/// kernel's flag to 3 (its row + 1), the first bad row.
template <int Dtype, int Lanes>
int64_t crossEntropyError(int64_t rows, int64_t vocab, bool packs,
                          unsigned blocks) {
  std::vector<float> x = randomValues(Dtype, size_t(rows * vocab), 0.0f, 7);
  for (float &v : x)
    v = Buffer(Dtype, {3.0f * v}).at(0);
  x[size_t(vocab + 5)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    targets[size_t(r)] = int32_t((r * 7919 + 13) % vocab);
  targets[2] = int32_t(vocab);
  Buffer in(Dtype, x);
  std::vector<float> losses(size_t(rows), -1.0f);
  unsigned long long bad = ~0ull;
  cuda_on_cpu::launch({blocks, 1, 1}, 256, 0, [&] {
    crossEntropyRowsKernel<Dtype, Lanes>(in.data(), rows, vocab, packs,
                                         LOOMRT_I32, targets.data(),
                                         losses.data(), &bad);
  });
  EXPECT_EQ(bad, 3u);
  int64_t worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 1) {
      EXPECT_TRUE(std::isnan(losses[size_t(r)]));
      continue;
    }
    if (r == 2) {
      EXPECT_EQ(losses[size_t(r)], 0.0f);
      continue;
    }
    double maximum = -INFINITY, total = 0.0;
    for (int64_t j = 0; j < vocab; ++j)
      maximum = std::max(maximum, double(x[size_t(r * vocab + j)]));
    for (int64_t j = 0; j < vocab; ++j)
      total += std::exp(double(x[size_t(r * vocab + j)]) - maximum);
    double loss =
        maximum + std::log(total) - x[size_t(r * vocab + targets[size_t(r)])];
    worst = std::max(worst, int64_t(std::fabs(losses[size_t(r)] - loss) /
                                    (1e-6 * (std::fabs(loss) + 1))));
  }
  return worst;
}

TEST(RowKernelsTest, CrossEntropyRowsAWarpOrABlockEach) {
  // bf16 rows of 125 packs, a warp each (11 rows for one block's 8 warps);
  // f16 rows of 12 packs, fewer than a warp's lanes; f32 rows that are not
  // whole packs, read an element at a time, a block each. Within 4
  // millionths of |loss| + 1 (f32 sums, the exps' last bits).
  EXPECT_LE((crossEntropyError<LOOMRT_BF16, kWarpRow>(11, 1000, true, 1)), 4);
  EXPECT_LE((crossEntropyError<LOOMRT_F16, kWarpRow>(4, 96, true, 1)), 4);
  EXPECT_LE((crossEntropyError<LOOMRT_F32, kBlockRow>(5, 1001, false, 2)), 4);
}

TEST(RowKernelsTest, MisalignedPacksStopTheEmulation) {
  // A GPU ends a kernel whose 16-byte access is misaligned; the emulation
  // stops too, so a run that passes here made only aligned accesses.
  Buffer in(LOOMRT_F32, std::vector<float>(64, 1.0f));
  std::vector<float> out(8, 0.0f);
  EXPECT_DEATH(cuda_on_cpu::launch({1, 1, 1}, 256, 0,
                                   [&] {
                                     rowReduceVecKernel<LOOMRT_F32, kBlockRow>(
                                         LOOMRT_SUM,
                                         static_cast<float *>(in.data()) + 1,
                                         loomrt_consecutive_rows(2, 8),
                                         out.data(), 2, 8, 1.0f);
                                   }),
               "not 16-byte aligned");
}

} // namespace
