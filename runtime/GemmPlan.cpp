//===- GemmPlan.cpp - Strided contractions as strided-batched GEMMs -------===//
#include "runtime/GemmPlan.h"

#include <algorithm>

using namespace loomrt;

namespace {

enum Role { Batch, M, N, K };

/// One dimension of the contraction with its stride in a, b and out (0
/// where the tensor does not have it).
struct Dim {
  Role role;
  int64_t size;
  int64_t stride[3];
};

bool hasRole(Role role, int tensor) {
  switch (role) {
  case Batch:
    return true;
  case M:
    return tensor != 1;
  case N:
    return tensor != 0;
  default:
    return tensor != 2;
  }
}

/// Merges neighbouring dimensions of one role (outer first) that every
/// tensor having the role stores as one: stride(outer) = size(inner) *
/// stride(inner).
std::vector<Dim> collapse(const std::vector<Dim> &dims) {
  std::vector<Dim> merged;
  for (const Dim &dim : dims) {
    if (!merged.empty()) {
      Dim &outer = merged.back();
      bool one = true;
      for (int t = 0; t < 3; ++t)
        if (hasRole(dim.role, t))
          one &= outer.stride[t] == dim.size * dim.stride[t];
      if (one) {
        outer.size *= dim.size;
        std::copy(dim.stride, dim.stride + 3, outer.stride);
        continue;
      }
    }
    merged.push_back(dim);
  }
  return merged;
}

/// A rows x cols matrix with element strides (sr, sc) as a column-major
/// layout: as stored when sr is the unit stride (ld = sc), transposed when
/// sc is (ld = sr). A dimension of size 1 fits either way.
bool fit(int64_t rows, int64_t cols, int64_t sr, int64_t sc, bool &trans,
         int64_t &ld) {
  if (rows == 1 || sr == 1) {
    trans = false;
    ld = cols == 1 ? rows : sc;
    return ld >= rows;
  }
  if (cols == 1 || sc == 1) {
    trans = true;
    ld = rows == 1 ? cols : sr;
    return ld >= cols;
  }
  return false;
}

} // namespace

bool loomrt::planStridedGemm(const loomrt_contraction &c, StridedGemm &plan,
                             int maxCalls) {
  if (c.a_sum.num_dims || c.b_sum.num_dims)
    return false;
  int nb = c.num_batch, nm = c.num_m, nn = c.num_n, nk = c.num_k;
  std::vector<Dim> groups[4];
  auto add = [&](Role role, int64_t size, int64_t sa, int64_t sb, int64_t sc) {
    groups[role].push_back({role, size, {sa, sb, sc}});
  };
  for (int i = 0; i < nb; ++i)
    add(Batch, c.out.size[i], c.a.stride[i], c.b.stride[i], c.out.stride[i]);
  for (int j = 0; j < nm; ++j)
    add(M, c.a.size[nb + j], c.a.stride[nb + j], 0, c.out.stride[nb + j]);
  for (int j = 0; j < nn; ++j)
    add(N, c.b.size[nb + nk + j], 0, c.b.stride[nb + nk + j],
        c.out.stride[nb + nm + j]);
  for (int j = 0; j < nk; ++j)
    add(K, c.a.size[nb + nm + j], c.a.stride[nb + nm + j], c.b.stride[nb + j],
        0);
  for (std::vector<Dim> &group : groups) {
    for (const Dim &dim : group)
      if (dim.size == 0)
        return false; // empty: nothing for a GEMM library to do
    group.erase(std::remove_if(group.begin(), group.end(),
                               [](const Dim &d) { return d.size == 1; }),
                group.end());
    group = collapse(group);
  }
  if (groups[K].size() != 1)
    return false;
  const Dim unitM = {M, 1, {0, 0, 0}}, unitN = {N, 1, {0, 0, 0}};
  Dim k = groups[K][0];
  Dim m = groups[M].empty() ? unitM : groups[M].back();
  Dim n = groups[N].empty() ? unitN : groups[N].back();
  std::vector<Dim> extras = groups[Batch];
  if (!groups[M].empty())
    extras.insert(extras.end(), groups[M].begin(), groups[M].end() - 1);
  if (!groups[N].empty())
    extras.insert(extras.end(), groups[N].begin(), groups[N].end() - 1);

  // D = C^T = B^T A^T when C's n stride is the unit one, else D = C = A B.
  StridedGemm p;
  int64_t rowsStrideX = 0, depthStrideX = 0, depthStrideY = 0, colsStrideY = 0,
          colsStrideD = 0;
  // D's rows are `rows` (read from operand x), its columns `cols` (from y).
  auto orient = [&](const Dim &rows, const Dim &cols, int x, int y) {
    p.xIsA = x == 0;
    p.rows = rows.size;
    p.cols = cols.size;
    rowsStrideX = rows.stride[x];
    depthStrideX = k.stride[x];
    depthStrideY = k.stride[y];
    colsStrideY = cols.stride[y];
    colsStrideD = cols.stride[2];
  };
  if (n.size == 1 || n.stride[2] == 1)
    orient(n, m, 1, 0);
  else if (m.size == 1 || m.stride[2] == 1)
    orient(m, n, 0, 1);
  else
    return false;
  p.depth = k.size;
  bool transD = false;
  if (!fit(p.rows, p.depth, rowsStrideX, depthStrideX, p.transX, p.ldx) ||
      !fit(p.depth, p.cols, depthStrideY, colsStrideY, p.transY, p.ldy) ||
      !fit(p.rows, p.cols, 1, colsStrideD, transD, p.ldd) || transD)
    return false;

  // The largest remaining dimension is the library's batch; the others are
  // separate calls. Results must not overlap.
  auto xOf = [&](const Dim &d) { return d.stride[p.xIsA ? 0 : 1]; };
  auto yOf = [&](const Dim &d) { return d.stride[p.xIsA ? 1 : 0]; };
  // Largest first, ties in their order: an insertion sort of a few
  // dimensions (libstdc++ 12's std::stable_sort calls get_temporary_buffer,
  // which C++17 deprecates and clang 22 warns about in every build).
  for (size_t i = 1; i < extras.size(); ++i)
    for (size_t j = i; j > 0 && extras[j - 1].size < extras[j].size; --j)
      std::swap(extras[j - 1], extras[j]);
  int64_t calls = 1;
  for (size_t i = 0; i < extras.size(); ++i) {
    if (extras[i].stride[2] == 0)
      return false;
    if (i > 0)
      calls *= extras[i].size;
  }
  if (calls > maxCalls)
    return false;
  if (!extras.empty()) {
    p.batch = extras[0].size;
    p.strideX = xOf(extras[0]);
    p.strideY = yOf(extras[0]);
    p.strideD = extras[0].stride[2];
  }
  // Every combination of the loop dimensions, as offsets into a, b, out.
  std::vector<Dim> loops(extras.size() > 1 ? extras.begin() + 1 : extras.end(),
                         extras.end());
  std::vector<int64_t> index(loops.size(), 0);
  for (;;) {
    std::array<int64_t, 3> offset = {0, 0, 0};
    for (size_t l = 0; l < loops.size(); ++l)
      for (int t = 0; t < 3; ++t)
        offset[size_t(t)] += index[l] * loops[l].stride[t];
    p.calls.push_back(offset);
    size_t l = loops.size();
    while (l > 0 && ++index[l - 1] == loops[l - 1].size)
      index[--l] = 0;
    if (l == 0)
      break;
  }
  plan = std::move(p);
  return true;
}
