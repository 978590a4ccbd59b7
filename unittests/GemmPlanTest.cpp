//===- GemmPlanTest.cpp - Strided-batched GEMM plans, checked on the CPU --===//
//
// Each plan is executed here by a reference of what the GEMM library does
// (column-major, optional transposes, leading dimensions, batch strides,
// one call per offset) and compared, element by element, with the
// contraction evaluated directly over its views. Elements outside the
// result's view must stay untouched.
//===----------------------------------------------------------------------===//
#include "runtime/GemmPlan.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <vector>

using namespace loomrt;

namespace {

loomrt_view view(std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  loomrt_view v = {};
  v.num_dims = int(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    v.size[d] = sizes[d];
    v.stride[d] = strides[d];
  }
  return v;
}

/// Row-major strides of `sizes`.
std::vector<int64_t> dense(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

/// Calls fn(index) for every index of `sizes`.
void forEachIndex(const std::vector<int64_t> &sizes,
                  const std::function<void(const std::vector<int64_t> &)> &fn) {
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t s : sizes)
    if (s == 0)
      return;
  for (;;) {
    fn(index);
    size_t d = sizes.size();
    while (d > 0 && ++index[d - 1] == sizes[d - 1])
      index[--d] = 0;
    if (d == 0)
      return;
  }
}

int64_t offsetOf(const loomrt_view &v, const std::vector<int64_t> &index) {
  int64_t offset = 0;
  for (int d = 0; d < v.num_dims; ++d)
    offset += index[size_t(d)] * v.stride[d];
  return offset;
}

/// out[batch, m, n] = sum over k of a[batch, m, k] * b[batch, k, n].
void direct(const loomrt_contraction &c, const std::vector<float> &a,
            const std::vector<float> &b, std::vector<float> &out) {
  int nb = c.num_batch, nm = c.num_m, nn = c.num_n, nk = c.num_k;
  std::vector<int64_t> outSizes(c.out.size, c.out.size + c.out.num_dims);
  std::vector<int64_t> kSizes(c.a.size + nb + nm, c.a.size + nb + nm + nk);
  forEachIndex(outSizes, [&](const std::vector<int64_t> &o) {
    float sum = 0;
    forEachIndex(kSizes, [&](const std::vector<int64_t> &k) {
      std::vector<int64_t> ai(o.begin(), o.begin() + nb + nm),
          bi(o.begin(), o.begin() + nb);
      ai.insert(ai.end(), k.begin(), k.end());
      bi.insert(bi.end(), k.begin(), k.end());
      bi.insert(bi.end(), o.begin() + nb + nm, o.begin() + nb + nm + nn);
      sum += a[size_t(offsetOf(c.a, ai))] * b[size_t(offsetOf(c.b, bi))];
    });
    out[size_t(offsetOf(c.out, o))] = sum;
  });
}

/// What a column-major strided-batched GEMM library does with the plan.
void execute(const StridedGemm &p, const std::vector<float> &a,
             const std::vector<float> &b, std::vector<float> &out) {
  for (const std::array<int64_t, 3> &call : p.calls) {
    const float *x = (p.xIsA ? a.data() : b.data()) + call[p.xIsA ? 0 : 1];
    const float *y = (p.xIsA ? b.data() : a.data()) + call[p.xIsA ? 1 : 0];
    float *d = out.data() + call[2];
    for (int64_t i = 0; i < p.batch; ++i)
      for (int64_t r = 0; r < p.rows; ++r)
        for (int64_t s = 0; s < p.cols; ++s) {
          float sum = 0;
          for (int64_t k = 0; k < p.depth; ++k) {
            float xv = p.transX ? x[i * p.strideX + k + r * p.ldx]
                                : x[i * p.strideX + r + k * p.ldx];
            float yv = p.transY ? y[i * p.strideY + s + k * p.ldy]
                                : y[i * p.strideY + k + s * p.ldy];
            sum += xv * yv;
          }
          d[i * p.strideD + r + s * p.ldd] = sum;
        }
  }
}

int64_t extent(const loomrt_view &v) {
  int64_t last = 0;
  for (int d = 0; d < v.num_dims; ++d)
    last += (v.size[d] - 1) * v.stride[d];
  return last + 1;
}

/// Plans `c` and checks the plan's result against the direct one.
void expectSame(const loomrt_contraction &c, int64_t expectedCalls = -1) {
  StridedGemm plan;
  ASSERT_TRUE(planStridedGemm(c, plan));
  if (expectedCalls >= 0)
    EXPECT_EQ(int64_t(plan.calls.size()), expectedCalls);
  std::vector<float> a(size_t(extent(c.a))), b(size_t(extent(c.b)));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(int(i * 7 % 11) - 5);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float(int(i * 5 % 13) - 6);
  std::vector<float> want(size_t(extent(c.out)), NAN), got = want;
  direct(c, a, b, want);
  execute(plan, a, b, got);
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i]))
          << "element " << i << " written outside the view";
    else
      EXPECT_EQ(got[i], want[i]) << "element " << i;
  }
}

loomrt_contraction contraction(int nb, int nm, int nn, int nk, loomrt_view a,
                               loomrt_view b, loomrt_view out) {
  loomrt_contraction c = {};
  c.num_batch = nb;
  c.num_m = nm;
  c.num_n = nn;
  c.num_k = nk;
  c.a_dtype = c.b_dtype = c.out_dtype = LOOMRT_F32;
  c.a = a;
  c.b = b;
  c.out = out;
  return c;
}

} // namespace

TEST(GemmPlan, DenseMatmulIsOneCallAsBefore) {
  auto c = contraction(0, 1, 1, 1, view({4, 3}, {3, 1}), view({3, 5}, {5, 1}),
                       view({4, 5}, {5, 1}));
  StridedGemm plan;
  ASSERT_TRUE(planStridedGemm(c, plan));
  // C^T = B^T A^T with nothing transposed: the layout the dense path used.
  EXPECT_FALSE(plan.xIsA);
  EXPECT_FALSE(plan.transX);
  EXPECT_FALSE(plan.transY);
  EXPECT_EQ(plan.rows, 5);
  EXPECT_EQ(plan.cols, 4);
  EXPECT_EQ(plan.depth, 3);
  EXPECT_EQ(plan.ldx, 5);
  EXPECT_EQ(plan.ldy, 3);
  EXPECT_EQ(plan.ldd, 5);
  EXPECT_EQ(plan.batch, 1);
  expectSame(c, 1);
}

TEST(GemmPlan, BatchedDense) {
  expectSame(contraction(1, 1, 1, 1, view({2, 4, 3}, {12, 3, 1}),
                         view({2, 3, 5}, {15, 5, 1}),
                         view({2, 4, 5}, {20, 5, 1})),
             1);
}

TEST(GemmPlan, HeadSplitProjectionNeedsNoScatter) {
  // bsd,dhe->bhse: out viewed as [b, s | h, e] with strides of [b][h][s][e].
  int64_t B = 2, S = 4, D = 6, H = 3, E = 2;
  auto c = contraction(0, 2, 2, 1, view({B, S, D}, dense({B, S, D})),
                       view({D, H, E}, dense({D, H, E})),
                       view({B, S, H, E}, {H * S * E, E, S * E, 1}));
  StridedGemm plan;
  ASSERT_TRUE(planStridedGemm(c, plan));
  EXPECT_EQ(plan.batch, H); // the heads are the library's batch
  expectSame(c, B);         // one call per batch entry
}

TEST(GemmPlan, HeadMergeProjectionDoesNotFit) {
  // bhse,hed->bsd read as [b, s | h, e]: the contraction dimensions (h, e)
  // are not one stride apart, so the operand must be packed.
  int64_t B = 2, S = 4, D = 6, H = 3, E = 2;
  auto c = contraction(0, 2, 1, 2, view({B, S, H, E}, {H * S * E, E, S * E, 1}),
                       view({H, E, D}, dense({H, E, D})),
                       view({B, S, D}, dense({B, S, D})));
  StridedGemm plan;
  EXPECT_FALSE(planStridedGemm(c, plan));
}

TEST(GemmPlan, TransposedOperandsAndColumnMajorResult) {
  // a is stored [k][m], b is [n][k], out is [n][m].
  int64_t M = 4, N = 5, K = 3;
  expectSame(contraction(0, 1, 1, 1, view({M, K}, {1, M}), view({K, N}, {1, K}),
                         view({M, N}, {1, M})),
             1);
  expectSame(contraction(0, 1, 1, 1, view({M, K}, {K, 1}), view({K, N}, {1, K}),
                         view({M, N}, {N, 1})),
             1);
}

TEST(GemmPlan, BroadcastBatchOperand) {
  // The same b for every batch entry (stride 0).
  expectSame(contraction(1, 1, 1, 1, view({3, 4, 2}, {8, 2, 1}),
                         view({3, 2, 5}, {0, 5, 1}),
                         view({3, 4, 5}, {20, 5, 1})),
             1);
}

TEST(GemmPlan, BatchedProjectionsShareTheirInput) {
  // loom.batched_einsum of three bsd,dhe->bshe projections: a first batch
  // dimension with x at stride 0, the weights a stack apart (here with a
  // gap after each) and the results side by side: one call of batch 3.
  int64_t B = 2, S = 4, D = 6, H = 3, E = 2, gap = 5;
  auto c = contraction(
      1, 2, 2, 1, view({3, B, S, D}, {0, S * D, D, 1}),
      view({3, D, H, E}, {D * H * E + gap, H * E, E, 1}),
      view({3, B, S, H, E}, {B * S * H * E, S * H * E, H * E, E, 1}));
  StridedGemm plan;
  ASSERT_TRUE(planStridedGemm(c, plan));
  EXPECT_EQ(plan.batch, 3);
  EXPECT_EQ(plan.xIsA ? plan.strideX : plan.strideY, 0);
  expectSame(c, 1);
}

TEST(GemmPlan, SizeOneDimensionsAndVectors) {
  expectSame(contraction(1, 1, 1, 1, view({1, 4, 3}, {12, 3, 1}),
                         view({1, 3, 1}, {3, 1, 1}),
                         view({1, 4, 1}, {4, 1, 1})));
  expectSame(contraction(0, 1, 1, 1, view({1, 3}, {3, 1}), view({3, 5}, {5, 1}),
                         view({1, 5}, {5, 1})));
}

TEST(GemmPlan, AttentionShapedBatches) {
  // bhse,bhte->bhst with both batch dimensions merged into one.
  int64_t B = 2, H = 3, S = 4, T = 5, E = 2;
  expectSame(contraction(2, 1, 1, 1, view({B, H, S, E}, dense({B, H, S, E})),
                         view({B, H, E, T}, {H * T * E, T * E, 1, E}),
                         view({B, H, S, T}, dense({B, H, S, T}))),
             1);
}

TEST(GemmPlan, RefusesWhatALibraryCannotRead) {
  StridedGemm plan;
  // A broadcast inside a matrix (m stride 0).
  EXPECT_FALSE(
      planStridedGemm(contraction(0, 1, 1, 1, view({4, 3}, {0, 1}),
                                  view({3, 5}, {5, 1}), view({4, 5}, {5, 1})),
                      plan));
  // No unit stride in the result.
  EXPECT_FALSE(
      planStridedGemm(contraction(0, 1, 1, 1, view({4, 3}, {3, 1}),
                                  view({3, 5}, {5, 1}), view({4, 5}, {10, 2})),
                      plan));
  // Too many separate calls: 9 x 9 m blocks that do not merge, one the
  // batch, 9 calls.
  auto many = contraction(0, 3, 1, 1, view({9, 9, 2, 3}, {216, 12, 3, 1}),
                          view({3, 5}, {5, 1}),
                          view({9, 9, 2, 5}, dense({9, 9, 2, 5})));
  EXPECT_FALSE(planStridedGemm(many, plan, 8));
  ASSERT_TRUE(planStridedGemm(many, plan, 9));
  expectSame(many, 9);
}

TEST(GemmPlan, RandomLayoutsAgreeWhereverPlanned) {
  // Every tensor stored densely in a random order of its dimensions: where
  // a plan exists it must compute exactly the contraction.
  uint64_t state = 12345;
  auto next = [&](int bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int((state >> 33) % uint64_t(bound));
  };
  auto stored = [&](const std::vector<int64_t> &sizes) {
    std::vector<int> order(sizes.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = int(i);
    for (size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[size_t(next(int(i)))]);
    // order[0] is outermost in memory.
    std::vector<int64_t> strides(sizes.size());
    int64_t stride = 1;
    for (size_t i = order.size(); i-- > 0;) {
      strides[size_t(order[i])] = stride;
      stride *= sizes[size_t(order[i])];
    }
    return view(sizes, strides);
  };
  int planned = 0, cases = 400;
  for (int i = 0; i < cases; ++i) {
    int nb = next(2), nm = 1 + next(2), nn = 1 + next(2), nk = 1 + next(2);
    std::vector<int64_t> batch, m, n, k;
    for (int j = 0; j < nb; ++j)
      batch.push_back(1 + next(3));
    for (int j = 0; j < nm; ++j)
      m.push_back(1 + next(4));
    for (int j = 0; j < nn; ++j)
      n.push_back(1 + next(4));
    for (int j = 0; j < nk; ++j)
      k.push_back(1 + next(4));
    auto join = [](std::vector<int64_t> x, const std::vector<int64_t> &y,
                   const std::vector<int64_t> &z) {
      x.insert(x.end(), y.begin(), y.end());
      x.insert(x.end(), z.begin(), z.end());
      return x;
    };
    auto c = contraction(nb, nm, nn, nk, stored(join(batch, m, k)),
                         stored(join(batch, k, n)), stored(join(batch, m, n)));
    StridedGemm plan;
    if (!planStridedGemm(c, plan))
      continue;
    ++planned;
    SCOPED_TRACE("case " + std::to_string(i));
    expectSame(c);
  }
  // Most random layouts fit (a dimension order that splits the contraction
  // dimensions is what does not).
  EXPECT_GT(planned, cases / 4);
}
