//===- FusedAttentionTest.cpp - The fused CUDA attention, on the host -----===//
//
// Runs the source of the fused attention kernel (runtime/cuda/
// FusedAttention.cuh) on host threads (CudaOnCpu.h) and checks each output
// within one ulp of its type of the exact result rounded once: causal and
// not, whole and padded query and key tiles, full 64-wide heads moved as
// 16-byte packs and narrower ones element by element, q, k and v read as
// head-split views of [b, s, h, e] projections, and the result written in
// [b, s, h, f] order for the out-projection. bf16 multiplies the split
// probabilities on the (emulated) tensor cores; f16 on the CUDA cores.
//
//===----------------------------------------------------------------------===//

#include "runtime/emulation/CudaOnCpu.h"

#include "runtime/cuda/FusedAttention.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace {

using namespace loomrt::attention;

/// A [outer, inner, rows, cols] operand stored in a buffer through strides.
struct Operand {
  int64_t outer, inner, rows, cols;
  loomrt_attention_strides at;
  /// Element (o, i, r, c)'s index in the buffer.
  int64_t index(int64_t o, int64_t i, int64_t r, int64_t c) const {
    return o * at.outer + i * at.inner + r * at.row + c;
  }
  int64_t span() const {
    return index(outer - 1, inner - 1, rows - 1, cols - 1) + 1;
  }
};

/// Row-major [outer, inner, rows, cols].
Operand dense(int64_t outer, int64_t inner, int64_t rows, int64_t cols) {
  return {outer, inner, rows, cols, {inner * rows * cols, rows * cols, cols}};
}

/// The [outer, inner, rows, cols] view of a [outer, rows, inner, cols]
/// buffer (heads split from a projection laid out [b, s, h, e]).
Operand headSplit(int64_t outer, int64_t inner, int64_t rows, int64_t cols) {
  return {outer, inner, rows, cols, {rows * inner * cols, cols, inner * cols}};
}

float widenBits(int dtype, uint16_t bits) {
  return dtype == LOOMRT_BF16 ? loomrt_bf16_to_f32(bits)
                              : loomrt_f16_to_f32(bits);
}
uint16_t roundBits(int dtype, double x) {
  return dtype == LOOMRT_BF16 ? loomrt_f32_to_bf16(float(x))
                              : loomrt_f32_to_f16(float(x));
}

/// Distance in units in the last place between two values of a 16-bit
/// type (sign-magnitude bits as ordered integers).
int ulps(uint16_t a, uint16_t b) {
  auto ordered = [](uint16_t bits) {
    int magnitude = bits & 0x7fff;
    return bits & 0x8000 ? -magnitude : magnitude;
  };
  return std::abs(ordered(a) - ordered(b));
}

struct Case {
  int dtype;
  int64_t outer, inner, s, t, e, f;
  bool causal, headSplitLayouts;
  /// Replaces the random q, k and v (buffers of the operands' spans).
  void (*setInputs)(std::vector<uint16_t> &q, std::vector<uint16_t> &k,
                    std::vector<uint16_t> &v) = nullptr;
  /// The accepted distance beyond 1 ulp, as a fraction of the magnitude.
  double relative = 1.0 / 65536;
  /// bf16 on the WMMA kernel instead of the mma.sync one.
  bool wmma = false;
  /// bf16 on the wgmma kernel (64-wide heads in packs only).
  bool wgmma = false;
};

/// The outputs further than 1 ulp from the exact result rounded once, and
/// of those, the ones further than Case::relative of their terms' magnitude
/// (sum over keys of p |v|, over the row's sum of p). Any order of the f32
/// additions (docs/language.md 11.2) moves an output whose terms nearly
/// cancel by more than 1 of its own ulps, but by f32 roundings of the
/// magnitude; a wrong mask, rescale, stride or rounding moves it by far
/// more. Tighter than the GPU check's 2^-12 (bench/gpu/compare.py): the
/// emulation adds as IEEE f32 does.
struct Outcome {
  int beyondUlp = 0, rejected = 0;
};

/// Runs the kernel on random q, k, v and compares every output with the
/// exact result; `packs` reports the path.
Outcome runCase(const Case &c, bool &packs) {
  Operand q = c.headSplitLayouts ? headSplit(c.outer, c.inner, c.s, c.e)
                                 : dense(c.outer, c.inner, c.s, c.e);
  Operand k = c.headSplitLayouts ? headSplit(c.outer, c.inner, c.t, c.e)
                                 : dense(c.outer, c.inner, c.t, c.e);
  Operand v = c.headSplitLayouts ? headSplit(c.outer, c.inner, c.t, c.f)
                                 : dense(c.outer, c.inner, c.t, c.f);
  Operand out = headSplit(c.outer, c.inner, c.s, c.f);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](const Operand &operand) {
    std::vector<uint16_t> data(size_t(operand.span()));
    for (uint16_t &x : data)
      x = roundBits(c.dtype, normal(random));
    return data;
  };
  // 16-byte aligned, as cudaMalloc'd buffers are.
  std::vector<uint16_t> qData = fill(q), kData = fill(k), vData = fill(v);
  if (c.setInputs)
    c.setInputs(qData, kData, vData);
  std::vector<uint16_t> outData(size_t(out.span()), 0xffff);
  double scale = 1.0 / std::sqrt(double(c.e));

  AttentionStrides at;
  const Operand *operands[4] = {&q, &k, &v, &out};
  for (int i = 0; i < 4; ++i) {
    at.outer[i] = operands[i]->at.outer;
    at.inner[i] = operands[i]->at.inner;
    at.row[i] = operands[i]->at.row;
  }
  const void *bases[4] = {qData.data(), kData.data(), vData.data(),
                          outData.data()};
  packs = fusedAttentionPacks(bases, at, c.e, c.f);
  cuda_on_cpu::Dim3 grid{unsigned(c.outer * c.inner),
                         unsigned((c.s + kTile - 1) / kTile), 1};
  bool mma = c.dtype == LOOMRT_BF16 && !c.wmma;
  if (c.wgmma && !packs) {
    ADD_FAILURE() << "the wgmma kernel takes 64-wide heads in packs only";
    return {};
  }
  cuda_on_cpu::launch(
      grid, kAttentionThreads,
      c.wgmma ? kWgmmaSharedBytes
      : mma   ? kMmaSharedBytes
              : kAttentionSharedBytes,
      [&] {
        if (c.wgmma)
          wgmmaAttentionKernel(qData.data(), kData.data(), vData.data(),
                               outData.data(), c.inner, c.s, c.t, int(c.e),
                               int(c.f), at, c.causal, log2Scale(scale));
        else if (mma)
          mmaAttentionKernel(qData.data(), kData.data(), vData.data(),
                             outData.data(), c.inner, c.s, c.t, int(c.e),
                             int(c.f), at, c.causal, log2Scale(scale), packs);
        else if (c.dtype == LOOMRT_BF16)
          fusedAttentionKernel<LOOMRT_BF16>(
              qData.data(), kData.data(), vData.data(), outData.data(), c.inner,
              c.s, c.t, int(c.e), int(c.f), at, c.causal, float(scale), packs);
        else
          fusedAttentionKernel<LOOMRT_F16>(
              qData.data(), kData.data(), vData.data(), outData.data(), c.inner,
              c.s, c.t, int(c.e), int(c.f), at, c.causal, float(scale), packs);
      });

  Outcome outcome;
  std::vector<double> scores(size_t(c.t));
  for (int64_t o = 0; o < c.outer; ++o)
    for (int64_t i = 0; i < c.inner; ++i)
      for (int64_t r = 0; r < c.s; ++r) {
        int64_t visible = c.causal ? std::min(c.t, r + 1) : c.t;
        double maximum = -INFINITY, total = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < c.e; ++d)
            dot +=
                double(widenBits(c.dtype, qData[size_t(q.index(o, i, r, d))])) *
                widenBits(c.dtype, kData[size_t(k.index(o, i, j, d))]);
          scores[size_t(j)] = dot * scale;
          maximum = std::max(maximum, scores[size_t(j)]);
        }
        for (int64_t j = 0; j < visible; ++j)
          total += scores[size_t(j)] = std::exp(scores[size_t(j)] - maximum);
        for (int64_t col = 0; col < c.f; ++col) {
          double sum = 0.0, magnitude = 0.0;
          for (int64_t j = 0; j < visible; ++j) {
            double value =
                widenBits(c.dtype, vData[size_t(v.index(o, i, j, col))]);
            sum += scores[size_t(j)] * value;
            magnitude += scores[size_t(j)] * std::abs(value);
          }
          uint16_t got = outData[size_t(out.index(o, i, r, col))];
          if (ulps(roundBits(c.dtype, sum / total), got) <= 1)
            continue;
          ++outcome.beyondUlp;
          // Written so that a NaN is rejected too.
          if (!(std::abs(widenBits(c.dtype, got) - sum / total) <=
                c.relative * magnitude / total))
            ++outcome.rejected;
        }
      }
  return outcome;
}

/// Whether the lanes of a warp's access, `bytes` each at `address(lane)`,
/// fall in different shared-memory banks (32 of 4 bytes) within each phase:
/// a 16-byte access goes in four phases of 8 lanes, an 8-byte one in two of
/// 16, smaller ones in one. Two lanes of a phase in one bank at different
/// words wait for each other (lanes reading the same word do not); the
/// emulation cannot show that, so the layout is checked here.
template <typename Address> bool conflictFree(int bytes, Address address) {
  int lanesPerPhase = std::min(32, 128 / bytes);
  for (int first = 0; first < 32; first += lanesPerPhase) {
    std::map<int64_t, int64_t> wordOfBank;
    for (int lane = first; lane < first + lanesPerPhase; ++lane)
      for (int64_t word = address(lane) / 4;
           word < (address(lane) + bytes + 3) / 4; ++word) {
        auto [it, inserted] = wordOfBank.emplace(word % 32, word);
        if (!inserted && it->second != word)
          return false;
      }
  }
  return true;
}

TEST(FusedAttentionTest, SharedAccessesFreeOfBankConflicts) {
  for (int warp = 0; warp < kAttentionThreads / 32; ++warp) {
    // The softmax: lanes 2i and 2i + 1 on row 16 * warp + i, group g of
    // four columns for g = 2j + (lane % 2): 16-byte score loads and stores,
    // 8-byte stores of each bf16 term.
    for (int j = 0; j < kTile / 8; ++j) {
      auto row = [&](int lane) { return int64_t(warp * 16 + lane / 2); };
      auto column = [&](int lane) { return int64_t(4 * (2 * j + lane % 2)); };
      EXPECT_TRUE(
          conflictFree(16,
                       [&](int lane) {
                         return (row(lane) * kScoreStride + column(lane)) * 4;
                       }))
          << "scores, warp " << warp << ", step " << j;
      EXPECT_TRUE(
          conflictFree(8,
                       [&](int lane) {
                         return (row(lane) * kTermStride + column(lane)) * 2;
                       }))
          << "terms, warp " << warp << ", step " << j;
      // Unpadded term rows (128 bytes) would put a phase's 8 rows in the
      // same banks.
      EXPECT_FALSE(conflictFree(
          8, [&](int lane) { return (row(lane) * kTile + column(lane)) * 2; }));
    }
    // The tile's P V read back: thread t on rows 4 * (t / 8) + i, columns
    // 32 * half + 4 * (t % 8) .. + 3, 16-byte loads.
    for (int i = 0; i < 4; ++i)
      for (int half = 0; half < 2; ++half)
        EXPECT_TRUE(conflictFree(16,
                                 [&](int lane) {
                                   int tid = warp * 32 + lane;
                                   return (int64_t(tid / 8 * 4 + i) *
                                               kScoreStride +
                                           32 * half + 4 * (tid % 8)) *
                                          4;
                                 }))
            << "P V, warp " << warp << ", row " << i << ", half " << half;
  }
}

TEST(FusedAttentionTest, MmaKernelFragmentLoadsFreeOfBankConflicts) {
  // ldmatrix reads its four 8 x 8 matrices in four phases, each of 8 rows
  // of 16 bytes whose addresses lanes 8j..8j+7 give: of keys, rows
  // 8 (n + lane / 16) + lane % 8 at column 16 * step + 8 * (lane / 8 % 2);
  // of values, rows 16 * step + 8 * (lane / 8 % 2) + lane % 8 at column
  // 8 (c + lane / 16). The queries' fragments (loaded once) are words at
  // rows 16 * warp + lane / 4 (+ 8), columns 16 * step + 2 * (lane % 4)
  // (+ 8).
  for (int step = 0; step < 4; ++step)
    for (int n = 0; n < 8; n += 2) {
      EXPECT_TRUE(conflictFree(
          16,
          [&](int lane) {
            return int64_t(((n + lane / 16) * 8 + lane % 8) * kMmaStride +
                           step * 16 + 8 * (lane / 8 % 2)) *
                   2;
          }))
          << "keys, step " << step << ", blocks " << n;
      EXPECT_TRUE(conflictFree(
          16,
          [&](int lane) {
            return int64_t((step * 16 + 8 * (lane / 8 % 2) + lane % 8) *
                               kMmaStride +
                           (n + lane / 16) * 8) *
                   2;
          }))
          << "values, step " << step << ", blocks " << n;
      // Unpadded rows (128 bytes) would put a matrix's 8 rows in the same
      // banks.
      EXPECT_FALSE(conflictFree(16, [&](int lane) {
        return int64_t(((n + lane / 16) * 8 + lane % 8) * kTile + step * 16 +
                       8 * (lane / 8 % 2)) *
               2;
      }));
    }
  for (int warp = 0; warp < 4; ++warp)
    for (int step = 0; step < 4; ++step)
      for (int rowHalf = 0; rowHalf < 2; ++rowHalf)
        for (int high = 0; high < 2; ++high)
          EXPECT_TRUE(conflictFree(
              4,
              [&](int lane) {
                return int64_t((warp * 16 + lane / 4 + 8 * rowHalf) *
                                   kMmaStride +
                               step * 16 + 8 * high + 2 * (lane % 4)) *
                       2;
              }))
              << "queries, warp " << warp << ", step " << step;
}

/// Runs a case: every output must be accepted, on the path (16-byte packs
/// or element loads) that `packs` names.
void expectAccepted(const Case &c, bool packs) {
  bool used = !packs;
  EXPECT_EQ(runCase(c, used).rejected, 0);
  EXPECT_EQ(used, packs);
}

TEST(FusedAttentionTest, Bf16CausalFullHeadsInPacks) {
  // Two query tiles, the second padded; keys up to the diagonal.
  expectAccepted({LOOMRT_BF16, 1, 2, 80, 80, 64, 64, true, true}, true);
}

TEST(FusedAttentionTest, Bf16CausalWholeTiles) {
  // Three query tiles: the last sees two whole tiles of keys (no mask
  // tested) and the diagonal one.
  expectAccepted({LOOMRT_BF16, 1, 2, 192, 192, 64, 64, true, true}, true);
}

TEST(FusedAttentionTest, Bf16NarrowHeadsPaddedEverywhere) {
  // e, f, s and t none a multiple of the tile: padding in every dimension;
  // two outer batch entries; fewer keys than queries.
  expectAccepted({LOOMRT_BF16, 2, 3, 70, 50, 40, 24, false, true}, false);
}

TEST(FusedAttentionTest, Bf16DenseOperands) {
  expectAccepted({LOOMRT_BF16, 1, 1, 64, 130, 64, 64, false, false}, true);
}

TEST(FusedAttentionTest, Bf16KeysEndingInsideATile) {
  // 120 keys: the second tile has 56 rows, so in its fetch the threads
  // whose four rows exist take the unchecked loads and the others test
  // each row (runtime/cuda/FusedAttention.cuh, PackWalk).
  expectAccepted({LOOMRT_BF16, 1, 1, 64, 120, 64, 64, false, false}, true);
}

TEST(FusedAttentionTest, Bf16ThirdTermCounts) {
  // One query, three keys: key 0 scores 0 (p = 1, v = 0); keys 1 and 2
  // score -1/4 and -1/4 - 2^-14 (p = exp of that, v = +1 and -1 in column
  // 0), so that column's output, (p1 - p2) / (1 + p1 + p2), is about 2e-5
  // from terms of about 0.6. Their difference is exact in f32, so only the
  // probabilities' third bf16 terms can make the output wrong: without
  // them it is off by many of its ulps and by |p1's - p2's third term| /
  // sum, checked below to be 2^-20 of the magnitude or more. The random
  // cases cannot show that: their bound must allow any order of the f32
  // additions.
  auto setInputs = [](std::vector<uint16_t> &q, std::vector<uint16_t> &k,
                      std::vector<uint16_t> &v) {
    std::fill(q.begin(), q.end(), 0);
    std::fill(k.begin(), k.end(), 0);
    std::fill(v.begin(), v.end(), 0);
    q[0] = q[1] = loomrt_f32_to_bf16(1.0f);    // e = 16: scale 1/4
    k[16] = k[32] = loomrt_f32_to_bf16(-1.0f); // keys 1 and 2
    k[33] = loomrt_f32_to_bf16(-1.0f / 4096);  // key 2: 2^-12 more
    v[16] = loomrt_f32_to_bf16(1.0f);          // key 1, column 0
    v[32] = loomrt_f32_to_bf16(-1.0f);         // key 2, column 0
  };
  float p1 = std::exp(-0.25f), p2 = std::exp(-0.25f - 1.0f / 16384);
  uint16_t terms1[3], terms2[3];
  loomrt_split_bf16x3(p1, terms1);
  loomrt_split_bf16x3(p2, terms2);
  double thirdTerms = std::abs(double(loomrt_bf16_to_f32(terms1[2])) -
                               loomrt_bf16_to_f32(terms2[2]));
  ASSERT_GE(thirdTerms / (p1 + p2), 1.0 / (1 << 20));
  Case c{LOOMRT_BF16, 1, 1, 1, 3, 16, 16, false, false};
  c.setInputs = setInputs;
  c.relative = 1.0 / (1 << 22);
  expectAccepted(c, false);
}

TEST(FusedAttentionTest, Bf16OnTheWmmaKernel) {
  // LOOMRT_ATTENTION=wmma: bf16 on the WMMA kernel, packed and padded.
  Case packed{LOOMRT_BF16, 1, 2, 80, 80, 64, 64, true, true};
  Case padded{LOOMRT_BF16, 2, 3, 70, 50, 40, 24, false, true};
  packed.wmma = padded.wmma = true;
  expectAccepted(packed, true);
  expectAccepted(padded, false);
}

TEST(FusedAttentionTest, Bf16OnTheWgmmaKernel) {
  // LOOMRT_ATTENTION=wgmma: causal with a padded query tile; causal over
  // whole tiles (the unmasked path); keys ending inside a tile (the fetch's
  // row tests, zero rows in the core matrices); dense operands over three
  // tiles of keys, not causal.
  Case cases[] = {{LOOMRT_BF16, 1, 2, 80, 80, 64, 64, true, true},
                  {LOOMRT_BF16, 1, 2, 192, 192, 64, 64, true, true},
                  {LOOMRT_BF16, 1, 1, 64, 120, 64, 64, false, false},
                  {LOOMRT_BF16, 2, 1, 64, 130, 64, 64, false, false}};
  for (Case &c : cases) {
    c.wgmma = true;
    expectAccepted(c, true);
  }
}

TEST(FusedAttentionTest, F16CausalOnTheCudaCores) {
  expectAccepted({LOOMRT_F16, 1, 2, 96, 96, 32, 32, true, true}, false);
}

} // namespace
