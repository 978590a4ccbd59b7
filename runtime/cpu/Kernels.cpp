//===- Kernels.cpp - CPU kernels the generated code calls -----------------===//
//
// Everything here widens bf16/f16 to f32, accumulates in f32 and rounds once
// at the result (docs/language.md 11.2). Element-wise work is generated
// inline and fused; these are the ops that need a loop nest of their own.
//===----------------------------------------------------------------------===//
#include "loomrt.h"
#include "runtime/Elements.h"
#include "runtime/GemmPlan.h"
#include "runtime/LogitsStats.h"
#include "runtime/Runtime.h"
#include "runtime/SoftmaxStats.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

using namespace loomrt;

namespace {

int64_t product(const int64_t *sizes, int first, int last) {
  int64_t n = 1;
  for (int i = first; i < last; ++i)
    n *= sizes[i];
  return n;
}

/// Visits every index of dims [first, last) of a view, calling fn(offset)
/// with the element offset sum(index * stride), in row-major order.
template <typename Fn>
void forEachOffset(const loomrt_view &view, int first, int last, int64_t base,
                   Fn &&fn) {
  if (first == last) {
    fn(base);
    return;
  }
  int64_t size = view.size[first], stride = view.stride[first];
  if (first + 1 == last) { // the innermost dimension: a plain loop
    for (int64_t i = 0; i < size; ++i)
      fn(base + i * stride);
    return;
  }
  for (int64_t i = 0; i < size; ++i)
    forEachOffset(view, first + 1, last, base + i * stride, fn);
}

/// Calls fn(from, to) for every index of `shape` in row-major order, `from`
/// and `to` being the index's offsets under `fromStrides` and `toStrides`:
/// an odometer, each step one addition per offset in the common case.
template <typename Fn>
void forEachOffsetPair(int rank, const int64_t *shape,
                       const int64_t *fromStrides, const int64_t *toStrides,
                       Fn &&fn) {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d)
    count *= shape[d];
  int64_t index[LOOMRT_MAX_RANK] = {}, from = 0, to = 0;
  for (int64_t n = 0; n < count; ++n) {
    fn(from, to);
    for (int d = rank - 1; d >= 0; --d) {
      from += fromStrides[d];
      to += toStrides[d];
      if (++index[d] < shape[d])
        break;
      from -= shape[d] * fromStrides[d];
      to -= shape[d] * toStrides[d];
      index[d] = 0;
    }
  }
}

/// True when dims [first, last) of the view are a dense row-major block
/// with innermost stride 1 (so they can be flattened into one dimension).
bool isDense(const loomrt_view &view, int first, int last) {
  int64_t expected = 1;
  for (int d = last - 1; d >= first; --d) {
    if (view.size[d] != 1 && view.stride[d] != expected)
      return false;
    expected *= view.size[d];
  }
  return true;
}

/// Widens `count` elements starting at `offset` to f32 (a plain copy for
/// f32), so the loops that follow see one type and vectorise.
void widen(int dtype, const void *base, int64_t offset, int64_t count,
           float *dst) {
  switch (dtype) {
  case LOOMRT_F32:
    memcpy(dst, static_cast<const float *>(base) + offset, size_t(count) * 4);
    return;
  case LOOMRT_BF16: {
    const uint16_t *src = static_cast<const uint16_t *>(base) + offset;
    for (int64_t j = 0; j < count; ++j)
      dst[j] = loomrt_bf16_to_f32(src[j]);
    return;
  }
  default:
    for (int64_t j = 0; j < count; ++j)
      dst[j] = load(dtype, base, offset + j);
  }
}

/// Stores `count` floats at `offset` of `base`, each rounded to `dtype`:
/// widen's inverse, with the element type chosen once, not per element.
void narrow(int dtype, const float *src, int64_t count, void *base,
            int64_t offset) {
  switch (dtype) {
  case LOOMRT_F32:
    memcpy(static_cast<float *>(base) + offset, src, size_t(count) * 4);
    return;
  case LOOMRT_BF16: {
    uint16_t *dst = static_cast<uint16_t *>(base) + offset;
    for (int64_t j = 0; j < count; ++j)
      dst[j] = loomrt_f32_to_bf16(src[j]);
    return;
  }
  default:
    for (int64_t j = 0; j < count; ++j)
      store(dtype, base, offset + j, src[j]);
  }
}

/// row[j] = row[j] + addend[j], rounded to `dtype`, for j < n.
void addRounded(int dtype, float *row, const float *addend, int64_t n) {
  switch (dtype) {
  case LOOMRT_F32:
    for (int64_t j = 0; j < n; ++j)
      row[j] += addend[j];
    return;
  case LOOMRT_BF16:
    for (int64_t j = 0; j < n; ++j)
      row[j] = loomrt_bf16_to_f32(loomrt_f32_to_bf16(row[j] + addend[j]));
    return;
  default:
    for (int64_t j = 0; j < n; ++j)
      row[j] = roundToType(dtype, row[j] + addend[j]);
  }
}

/// Packs operand `view` (dims [batch, rows, cols] grouped as given, plus the
/// summed dims of `sum`) into a dense f32 [batch][rows][cols] buffer.
void pack(int dtype, const void *base, const loomrt_view &view,
          const loomrt_view &sum, int numBatch, int numRows, float *out) {
  if (sum.num_dims == 0 && isDense(view, 0, view.num_dims)) {
    widen(dtype, base, 0, product(view.size, 0, view.num_dims), out);
    return;
  }
  int last = view.num_dims - 1;
  if (sum.num_dims == 0 && last >= 0 && view.stride[last] == 1) {
    // Contiguous rows: widen a row at a time.
    int64_t row = view.size[last];
    forEachOffset(view, 0, last, 0, [&](int64_t offset) {
      widen(dtype, base, offset, row, out);
      out += row;
    });
    return;
  }
  int64_t o = 0;
  forEachOffset(view, 0, view.num_dims, 0, [&](int64_t offset) {
    float acc = 0.0f;
    if (sum.num_dims == 0) {
      acc = load(dtype, base, offset);
    } else {
      forEachOffset(sum, 0, sum.num_dims, offset,
                    [&](int64_t s) { acc += load(dtype, base, s); });
    }
    out[o++] = acc;
  });
  (void)numBatch;
  (void)numRows;
}

void contractIntegers(const loomrt_contraction *c, const void *a, const void *b,
                      void *out) {
  // Integer contractions wrap around in their own type; rare and small, so a
  // plain loop over (batch, m, n, k) index tuples.
  int nb = c->num_batch, nm = c->num_m, nn = c->num_n, nk = c->num_k;
  int64_t batch = product(c->a.size, 0, nb),
          m = product(c->a.size, nb, nb + nm),
          k = product(c->a.size, nb + nm, nb + nm + nk),
          n = product(c->b.size, nb + nk, nb + nk + nn);
  std::vector<int64_t> aOff, bOff, oOff;
  forEachOffset(c->a, 0, c->a.num_dims, 0,
                [&](int64_t o) { aOff.push_back(o); });
  forEachOffset(c->b, 0, c->b.num_dims, 0,
                [&](int64_t o) { bOff.push_back(o); });
  forEachOffset(c->out, 0, c->out.num_dims, 0,
                [&](int64_t o) { oOff.push_back(o); });
  auto sumOver = [&](const loomrt_view &sum, int dtype, const void *base,
                     int64_t offset) {
    if (sum.num_dims == 0)
      return loadInt(dtype, base, offset);
    uint64_t acc = 0;
    forEachOffset(sum, 0, sum.num_dims, offset,
                  [&](int64_t s) { acc += uint64_t(loadInt(dtype, base, s)); });
    return int64_t(acc);
  };
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t ni = 0; ni < n; ++ni) {
        uint64_t acc = 0;
        for (int64_t ki = 0; ki < k; ++ki)
          acc += uint64_t(sumOver(c->a_sum, c->a_dtype, a,
                                  aOff[(bi * m + mi) * k + ki])) *
                 uint64_t(sumOver(c->b_sum, c->b_dtype, b,
                                  bOff[(bi * k + ki) * n + ni]));
        int64_t value = int64_t(acc);
        if (c->out_dtype == LOOMRT_I32)
          value = int32_t(uint32_t(acc));
        storeInt(c->out_dtype, out, oOff[(bi * m + mi) * n + ni], value);
      }
}

/// Grows a scratch buffer without ever shrinking it: a vector that shrinks
/// and grows again would zero-fill the regrown part on every call.
void grow(std::vector<float> &buffer, size_t size) {
  if (buffer.size() < size)
    buffer.resize(size);
}

/// Replaces row[j] by exp(row[j] - max) and returns their sum; `maximum` is
/// set to the row's max. Two loops, so that the exp one vectorises
/// (libmvec's expf): the sum cannot without reassociating it.
float expShiftedSum(float *row, int64_t n, float &maximum) {
  maximum = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j)
    maximum = std::max(maximum, row[j]);
  for (int64_t j = 0; j < n; ++j)
    row[j] = std::exp(row[j] - maximum);
  float total = 0.0f;
  for (int64_t j = 0; j < n; ++j)
    total += row[j];
  return total;
}

} // namespace

// Ranks that share a process (loopback mode) get one BLAS thread each, as
// scripts/mpirun-local gives each rank process: the cores are the ranks'.
static void bindHost(loomrt_ctx *, int, int ranksInProcess) {
  if (ranksInProcess > 1)
    openblas_set_num_threads(1);
}

// --profile on the host: a mark is a clock reading.
static std::vector<double> &hostMarks() {
  thread_local std::vector<double> marks;
  return marks;
}
static uint64_t hostMark() {
  hostMarks().push_back(now());
  return hostMarks().size() - 1;
}
static double hostSeconds(uint64_t from, uint64_t to) {
  return hostMarks()[to] - hostMarks()[from];
}

/// Best of three: a 64 MiB copy (read + write) and a 512^3 sgemm on this
/// rank's BLAS threads.
static void hostPeaks(double *bytesPerSecond, double *flopsPerSecond,
                      std::string *how) {
  size_t bytes = size_t(64) << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    double start = now();
    memcpy(to.data(), from.data(), bytes);
    // The copy's destination is never read: keep the compiler from
    // dropping it.
    asm volatile("" : : "r"(to.data()) : "memory");
    best = std::min(best, now() - start);
  }
  *bytesPerSecond = 2.0 * double(bytes) / best;
  const int n = 512;
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 1.0f),
      c(size_t(n) * n, 0.0f);
  best = 1e30;
  for (int i = 0; i < 3; ++i) {
    double start = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, now() - start);
  }
  *flopsPerSecond = 2.0 * n * n * double(n) / best;
  *how = "a 64 MiB memcpy; an f32 512^3 cblas_sgemm";
}

// The CPU runs the step on the host arena itself.
const DeviceOps &loomrt::deviceOps() {
  static const DeviceOps ops = {
      "host", true, bindHost, [](char *host, size_t) { return host; },
      [](char *, const char *, size_t) {}, [](char *, const char *, size_t) {},
      [] {}, [](char *, char *) {}, &hostLoopbackOps(), nullptr, nullptr,
      nullptr, hostMark, hostSeconds, [] { hostMarks().clear(); }, hostPeaks,
      // Collectives run as they are issued.
      nullptr, nullptr, nullptr};
  return ops;
}

extern "C" void loomrt_copy(loomrt_ctx *, void *dst, const void *src,
                            int64_t bytes) {
  memmove(dst, src, size_t(bytes));
}

extern "C" void loomrt_upload(loomrt_ctx *, void *dst, const void *src,
                              int64_t bytes) {
  memcpy(dst, src, size_t(bytes));
}

extern "C" void loomrt_constant(loomrt_ctx *, void *dst, const void *src,
                                int64_t bytes) {
  memcpy(dst, src, size_t(bytes));
}

extern "C" void loomrt_download(loomrt_ctx *, void *dst, const void *src,
                                int64_t bytes) {
  memcpy(dst, src, size_t(bytes));
}

extern "C" void loomrt_slice(int dtype, const void *in, void *out, int rank,
                             const int64_t *in_shape, const int64_t *start,
                             const int64_t *out_shape) {
  size_t bytes = elementBytes(dtype);
  int64_t inStride[LOOMRT_MAX_RANK], stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    inStride[d] = stride;
    stride *= in_shape[d];
  }
  loomrt_view view;
  view.num_dims = rank;
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) {
    view.size[d] = out_shape[d];
    view.stride[d] = inStride[d];
    base += start[d] * inStride[d];
  }
  char *dst = static_cast<char *>(out);
  const char *src = static_cast<const char *>(in);
  forEachOffset(view, 0, rank, base, [&](int64_t offset) {
    memcpy(dst, src + offset * bytes, bytes);
    dst += bytes;
  });
}

extern "C" void loomrt_contract(loomrt_ctx *rt, const loomrt_contraction *c,
                                const void *a, const void *b, void *out) {
  static const float one = 1.0f; // the second operand of a one-operand einsum
  bool twoOperands = b != nullptr;
  if (!b)
    b = &one;
  if (isInteger(c->out_dtype)) {
    contractIntegers(c, a, b, out);
    return;
  }
  // f32 views that BLAS can read and write as they are (runtime/GemmPlan.h):
  // no packing, no scattering of the result.
  // LOOMRT_PACK_GEMMS=1 packs every operand as before, for comparisons.
  static const bool packAlways = envSwitch("LOOMRT_PACK_GEMMS", false);
  StridedGemm plan;
  if (!packAlways && twoOperands && c->a_dtype == LOOMRT_F32 &&
      c->b_dtype == LOOMRT_F32 && c->out_dtype == LOOMRT_F32 &&
      planStridedGemm(*c, plan, 1 << 12)) {
    double start = gemmClockStart(rt);
    const float *x = static_cast<const float *>(plan.xIsA ? a : b),
                *y = static_cast<const float *>(plan.xIsA ? b : a);
    float *d = static_cast<float *>(out);
    for (const std::array<int64_t, 3> &call : plan.calls)
      for (int64_t i = 0; i < plan.batch; ++i)
        cblas_sgemm(
            CblasColMajor, plan.transX ? CblasTrans : CblasNoTrans,
            plan.transY ? CblasTrans : CblasNoTrans, int(plan.rows),
            int(plan.cols), int(plan.depth), 1.0f,
            x + call[plan.xIsA ? 0 : 1] + i * plan.strideX, int(plan.ldx),
            y + call[plan.xIsA ? 1 : 0] + i * plan.strideY, int(plan.ldy), 0.0f,
            d + call[2] + i * plan.strideD, int(plan.ldd));
    gemmClockStop(rt, start);
    return;
  }
  int nb = c->num_batch, nm = c->num_m, nn = c->num_n, nk = c->num_k;
  int64_t batch = product(c->a.size, 0, nb),
          m = product(c->a.size, nb, nb + nm),
          k = product(c->a.size, nb + nm, nb + nm + nk),
          n = product(c->b.size, nb + nk, nb + nk + nn);
  double start = gemmClockStart(rt);
  // Operands that are already dense f32 per batch go to BLAS in place
  // (possibly transposed); the rest are packed (widened, gathered, pre-summed).
  auto direct = [&](const loomrt_view &view, const loomrt_view &sum, int dtype,
                    int rows, int cols, bool &transposed, int64_t &ld) {
    if (dtype != LOOMRT_F32 || sum.num_dims != 0)
      return false;
    int r0 = nb, r1 = nb + rows, c1 = r1 + cols;
    if (isDense(view, r0, c1)) {
      transposed = false;
      ld = product(view.size, r1, c1);
      return true;
    }
    // Transposed: columns major, rows minor, both dense.
    loomrt_view swapped = view;
    int w = 0;
    for (int d = r1; d < c1; ++d, ++w) {
      swapped.size[r0 + w] = view.size[d];
      swapped.stride[r0 + w] = view.stride[d];
    }
    for (int d = r0; d < r1; ++d, ++w) {
      swapped.size[r0 + w] = view.size[d];
      swapped.stride[r0 + w] = view.stride[d];
    }
    if (isDense(swapped, r0, c1)) {
      transposed = true;
      ld = product(view.size, r0, r1);
      return true;
    }
    return false;
  };
  bool aTrans = false, bTrans = false;
  int64_t lda = k, ldb = n;
  bool aDirect = direct(c->a, c->a_sum, c->a_dtype, nm, nk, aTrans, lda);
  bool bDirect = direct(c->b, c->b_sum, c->b_dtype, nk, nn, bTrans, ldb);
  std::vector<float> &aPacked = scratch(rt, 0), &bPacked = scratch(rt, 1),
                     &cPacked = scratch(rt, 2);
  if (!aDirect) {
    grow(aPacked, size_t(batch * m * k));
    pack(c->a_dtype, a, c->a, c->a_sum, nb, nm, aPacked.data());
    lda = k;
  }
  if (!bDirect) {
    grow(bPacked, size_t(batch * k * n));
    pack(c->b_dtype, b, c->b, c->b_sum, nb, nk, bPacked.data());
    ldb = n;
  }
  bool outDirect =
      c->out_dtype == LOOMRT_F32 && isDense(c->out, 0, c->out.num_dims);
  float *cData = static_cast<float *>(out);
  if (!outDirect) {
    grow(cPacked, size_t(batch * m * n));
    cData = cPacked.data();
  }
  // Offsets of each batch in the operands (batch dims may broadcast).
  std::vector<int64_t> aBatch, bBatch;
  loomrt_view aBatchView = c->a, bBatchView = c->b;
  forEachOffset(aBatchView, 0, nb, 0, [&](int64_t o) { aBatch.push_back(o); });
  forEachOffset(bBatchView, 0, nb, 0, [&](int64_t o) { bBatch.push_back(o); });
  for (int64_t bi = 0; bi < batch; ++bi) {
    const float *aData = aDirect ? static_cast<const float *>(a) + aBatch[bi]
                                 : aPacked.data() + bi * m * k;
    const float *bData = bDirect ? static_cast<const float *>(b) + bBatch[bi]
                                 : bPacked.data() + bi * k * n;
    if (k == 0) {
      std::fill(cData + bi * m * n, cData + (bi + 1) * m * n, 0.0f);
      continue;
    }
    cblas_sgemm(CblasRowMajor, aTrans ? CblasTrans : CblasNoTrans,
                bTrans ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                1.0f, aData, int(lda), bData, int(ldb), 0.0f,
                cData + bi * m * n, int(n));
  }
  if (!outDirect && c->out_dtype == LOOMRT_BF16 &&
      isDense(c->out, 0, c->out.num_dims)) {
    uint16_t *dst = static_cast<uint16_t *>(out);
    for (int64_t i = 0; i < batch * m * n; ++i)
      dst[i] = loomrt_f32_to_bf16(cData[i]);
  } else if (!outDirect && c->out.num_dims > 0 &&
             c->out.stride[c->out.num_dims - 1] == 1) {
    // Contiguous rows of the result: store a row at a time.
    int last = c->out.num_dims - 1;
    int64_t row = c->out.size[last];
    const float *src = cData;
    forEachOffset(c->out, 0, last, 0, [&](int64_t o) {
      if (c->out_dtype == LOOMRT_F32) {
        memcpy(static_cast<float *>(out) + o, src, size_t(row) * 4);
      } else {
        for (int64_t j = 0; j < row; ++j)
          store(c->out_dtype, out, o + j, src[j]);
      }
      src += row;
    });
  } else if (!outDirect) {
    int64_t i = 0;
    forEachOffset(c->out, 0, c->out.num_dims, 0,
                  [&](int64_t o) { store(c->out_dtype, out, o, cData[i++]); });
  }
  gemmClockStop(rt, start);
}

/// The CPU's GEMMs have no epilogue: the generated code applies the rest,
/// rounding at each op as the interpreter does.
extern "C" int loomrt_contract_epilogue(loomrt_ctx *rt,
                                        const loomrt_contraction *c,
                                        const void *a, const void *b,
                                        void *product, int, const void *,
                                        int64_t, const void *, void *) {
  loomrt_contract(rt, c, a, b, product);
  return 0;
}

extern "C" void loomrt_reduce(int dtype, int reduction, const void *in,
                              void *out, int rank, const int64_t *shape,
                              uint32_t mask, double scale,
                              const loomrt_rows *inRows) {
  // Output index of each input element: strides of the kept dimensions.
  int64_t inStride[LOOMRT_MAX_RANK], outStride[LOOMRT_MAX_RANK];
  int64_t stride = 1, inCount = 1, outCount = 1;
  for (int d = rank - 1; d >= 0; --d) {
    inStride[d] = inCount;
    inCount *= shape[d];
    if (mask & (1u << d)) {
      outStride[d] = 0;
    } else {
      outStride[d] = stride;
      stride *= shape[d];
      outCount *= shape[d];
    }
  }
  // The common case, reducing the trailing dimensions: one pass per row.
  int firstReduced = rank;
  while (firstReduced > 0 && (mask & (1u << (firstReduced - 1))))
    --firstReduced;
  if (!isInteger(dtype) && firstReduced < rank &&
      (mask & ((1u << firstReduced) - 1)) == 0) {
    int64_t rows = product(shape, 0, firstReduced),
            n = product(shape, firstReduced, rank);
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      widen(dtype, in, inRows ? loomrt_row_start(*inRows, r) : r * n, n,
            row.data());
      float acc = reduction == LOOMRT_MAX
                      ? -std::numeric_limits<float>::infinity()
                      : 0.0f;
      if (reduction == LOOMRT_MAX) {
        for (int64_t j = 0; j < n; ++j)
          acc = (row[j] > acc || std::isnan(row[j])) ? row[j] : acc;
      } else {
        for (int64_t j = 0; j < n; ++j)
          acc += row[j];
      }
      store(dtype, out, r, reduction == LOOMRT_MAX ? acc : float(acc * scale));
    }
    return;
  }
  // Rows where in_rows says are a last dimension's, which the loop above
  // reduces; the emitter passes them for nothing else.
  if (inRows)
    failProcess("loomrt_reduce: rows of a strided input for a reduction "
                "other than of a float's last dimension",
                5);
  // The input in its (row-major) order, each element's output index `o`
  // following it.
  if (isInteger(dtype)) {
    std::vector<int64_t> acc(
        size_t(outCount),
        reduction == LOOMRT_MAX ? std::numeric_limits<int64_t>::min() : 0);
    forEachOffsetPair(rank, shape, inStride, outStride, [&](int64_t i,
                                                            int64_t o) {
      int64_t v = loadInt(dtype, in, i);
      acc[o] = reduction == LOOMRT_MAX
                   ? std::max(acc[o], v)
                   : int64_t(uint64_t(acc[o]) + uint64_t(v));
    });
    for (int64_t j = 0; j < outCount; ++j)
      storeInt(dtype, out, j, acc[j]);
    return;
  }
  std::vector<float> acc(
      size_t(outCount),
      reduction == LOOMRT_MAX ? -std::numeric_limits<float>::infinity() : 0.0f);
  forEachOffsetPair(rank, shape, inStride, outStride, [&](int64_t i,
                                                          int64_t o) {
    float v = load(dtype, in, i);
    if (reduction == LOOMRT_MAX)
      acc[o] = (v > acc[o] || std::isnan(v)) ? v : acc[o];
    else
      acc[o] += v;
  });
  for (int64_t j = 0; j < outCount; ++j)
    store(dtype, out, j,
          reduction == LOOMRT_MAX ? acc[j] : float(acc[j] * scale));
}

extern "C" void loomrt_softmax(int dtype, const void *in, void *out,
                               int64_t outer, int64_t n, int64_t inner,
                               const loomrt_rows *inRows) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      int64_t from = inRows ? loomrt_row_start(*inRows, o) : base;
      for (int64_t j = 0; j < n; ++j)
        row[j] = load(dtype, in, from + j * inner);
      float maximum;
      float total = expShiftedSum(row.data(), n, maximum);
      for (int64_t j = 0; j < n; ++j)
        store(dtype, out, base + j * inner, row[j] / total);
    }
}

/// Chunks of a row: each chunk's maximum first, then its exps in a loop that
/// vectorises (libmvec's expf), then their sum in order; the row's
/// statistics rescale when a chunk raises the maximum.
extern "C" void loomrt_softmax_stats(int dtype, const void *in, void *max,
                                     void *sum, int64_t rows, int64_t n,
                                     int partial) {
  constexpr int64_t kChunk = 256;
  float x[kChunk], exps[kChunk];
  for (int64_t r = 0; r < rows; ++r) {
    SoftmaxStats stats = emptyStats();
    for (int64_t start = 0; start < n; start += kChunk) {
      int64_t count = std::min(kChunk, n - start);
      widen(dtype, in, r * n + start, count, x);
      float chunkMax = -std::numeric_limits<float>::infinity();
      bool nan = false;
      for (int64_t j = 0; j < count; ++j) {
        chunkMax = std::max(chunkMax, x[j]);
        nan |= std::isnan(x[j]);
      }
      raiseMax(stats, nan ? NAN : chunkMax);
      if (std::isnan(stats.max))
        break;
      if (stats.max == -std::numeric_limits<float>::infinity())
        continue; // only -inf so far
      float shift = stats.max;
      for (int64_t j = 0; j < count; ++j)
        exps[j] = std::exp(x[j] - shift);
      for (int64_t j = 0; j < count; ++j)
        stats.sum += exps[j];
    }
    static_cast<float *>(max)[r] = stats.max;
    static_cast<float *>(sum)[r] = partial ? stats.sum : finalSum(stats, n);
  }
}

namespace {
/// loomrt_norm, and with `b` loomrt_add_norm: each row of x is x + b
/// (b + bBias first, rounded, where bBias is set), rounded to dtype and
/// stored in `sum` before it is normalised. x's rows are where xRows says.
void normRows(int dtype, const void *x, const loomrt_rows &xRows, const void *b,
              const void *bBias, void *sumOut, int scaleDtype,
              const void *scale, const void *bias, void *out, int64_t rows,
              int64_t n, double eps, int rms) {
  std::vector<float> row(static_cast<size_t>(n)), gain(static_cast<size_t>(n)),
      shift(static_cast<size_t>(n), 0.0f), addend, addendBias;
  widen(scaleDtype, scale, 0, n, gain.data());
  if (bias)
    widen(scaleDtype, bias, 0, n, shift.data());
  if (b)
    addend.resize(static_cast<size_t>(n));
  if (bBias) {
    addendBias.resize(static_cast<size_t>(n));
    widen(dtype, bBias, 0, n, addendBias.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    widen(dtype, x, loomrt_row_start(xRows, r), n, row.data());
    if (b) {
      widen(dtype, b, r * n, n, addend.data());
      if (bBias)
        addRounded(dtype, addend.data(), addendBias.data(), n);
      addRounded(dtype, row.data(), addend.data(), n); // the rounded sum
      narrow(dtype, row.data(), n, sumOut, r * n);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j)
      sum += row[j];
    float mean = rms ? 0.0f : sum / float(n), squares = 0.0f;
    for (int64_t j = 0; j < n; ++j)
      squares += (row[j] - mean) * (row[j] - mean);
    float inverse = 1.0f / std::sqrt(squares / float(n) + float(eps));
    for (int64_t j = 0; j < n; ++j)
      row[j] = (row[j] - mean) * inverse * gain[j] + shift[j];
    narrow(dtype, row.data(), n, out, r * n);
  }
}
} // namespace

extern "C" void loomrt_norm(int dtype, const void *x, int scaleDtype,
                            const void *scale, const void *bias, void *out,
                            int64_t rows, int64_t n, double eps, int rms,
                            const loomrt_rows *xRows) {
  normRows(dtype, x, xRows ? *xRows : loomrt_consecutive_rows(rows, n), nullptr,
           nullptr, nullptr, scaleDtype, scale, bias, out, rows, n, eps, rms);
}

extern "C" void loomrt_add_norm(int dtype, const void *a, const void *b,
                                const void *bBias, void *sum, int scaleDtype,
                                const void *scale, const void *bias, void *out,
                                int64_t rows, int64_t n, double eps, int rms) {
  normRows(dtype, a, loomrt_consecutive_rows(rows, n), b, bBias, sum,
           scaleDtype, scale, bias, out, rows, n, eps, rms);
}

extern "C" void loomrt_attention(int dtype, const void *q, const void *k,
                                 const void *v, void *out, int64_t outer,
                                 int64_t inner, int64_t s, int64_t t, int64_t e,
                                 int64_t f,
                                 const loomrt_attention_strides strides[4],
                                 int causal, double scale) {
  // Per batch: scores = q k^T (one GEMM), masked row softmax, then p v (one
  // GEMM); everything in f32, rounded once at the end.
  std::vector<float> qData(static_cast<size_t>(s * e)),
      kData(static_cast<size_t>(t * e)), vData(static_cast<size_t>(t * f)),
      scores(static_cast<size_t>(s * t)), result(static_cast<size_t>(s * f));
  // Rows of one batch entry of a strided operand, widened and packed.
  auto widenRows = [&](const void *in, const loomrt_attention_strides &at,
                       int64_t o, int64_t i, int64_t rows, int64_t cols,
                       float *dst) {
    int64_t base = o * at.outer + i * at.inner;
    for (int64_t r = 0; r < rows; ++r)
      widen(dtype, in, base + r * at.row, cols, dst + r * cols);
  };
  for (int64_t b = 0; b < outer * inner; ++b) {
    int64_t bo = b / inner, bi = b % inner;
    widenRows(q, strides[0], bo, bi, s, e, qData.data());
    widenRows(k, strides[1], bo, bi, t, e, kData.data());
    widenRows(v, strides[2], bo, bi, t, f, vData.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(s), int(t), int(e),
                float(scale), qData.data(), int(e), kData.data(), int(e), 0.0f,
                scores.data(), int(t));
    for (int64_t i = 0; i < s; ++i) {
      float *row = scores.data() + i * t;
      int64_t visible = causal ? std::min(t, i + 1) : t;
      float maximum;
      float total = expShiftedSum(row, visible, maximum);
      for (int64_t j = 0; j < visible; ++j)
        row[j] /= total;
      for (int64_t j = visible; j < t; ++j)
        row[j] = 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s), int(f),
                int(t), 1.0f, scores.data(), int(t), vData.data(), int(f), 0.0f,
                result.data(), int(f));
    const loomrt_attention_strides &at = strides[3];
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < f; ++j)
        store(dtype, out, bo * at.outer + bi * at.inner + i * at.row + j,
              result[i * f + j]);
  }
}

extern "C" void loomrt_embedding(int idsDtype, const void *ids, int64_t count,
                                 int dtype, const void *table, int64_t rows,
                                 int64_t width, int64_t vocabStart, void *out) {
  size_t bytes = dtype == LOOMRT_F32 ? 4 : 2;
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = loadInt(idsDtype, ids, i) - vocabStart;
    char *dst = static_cast<char *>(out) + i * width * bytes;
    if (row >= 0 && row < rows)
      memcpy(dst, static_cast<const char *>(table) + row * width * bytes,
             size_t(width) * bytes);
    else
      memset(dst, 0, size_t(width) * bytes);
  }
}

static void failTarget(loomrt_ctx *rt, const char *site, int64_t target,
                       int targetsDtype, const void *targets, int64_t position,
                       int64_t vocab) {
  std::string message = "target " + std::to_string(target) + " at " +
                        targetPlace(rt, targets, targetsDtype, position) +
                        " is outside [0, " + std::to_string(vocab) + ")";
  loomrt_fail(rt, site, message.c_str());
}

extern "C" void loomrt_pick(loomrt_ctx *rt, const char *site, int dtype,
                            const void *logits, int64_t count, int64_t vocab,
                            int targetsDtype, const void *targets,
                            int64_t vocabStart, int64_t vocabTotal,
                            float *out) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t target = loadInt(targetsDtype, targets, i);
    if (target < 0 || target >= vocabTotal)
      failTarget(rt, site, target, targetsDtype, targets, i, vocabTotal);
    int64_t column = target - vocabStart;
    out[i] = column >= 0 && column < vocab
                 ? load(dtype, logits, i * vocab + column)
                 : 0.0f;
  }
}

/// Blocks of kCpuLogitsBlockBytes.
extern "C" void loomrt_logits_stats(loomrt_ctx *rt, const char *site,
                                    const loomrt_contraction *c, const void *a,
                                    const void *b, int targetsDtype,
                                    const void *targets, int64_t vocabStart,
                                    int64_t vocabTotal, int partial,
                                    float *max, float *sum, float *picked) {
  LogitsBlocks blocks(*c, kCpuLogitsBlockBytes, logitsColumnsAsked(rt));
  int64_t rows = blocks.rows;
  thread_local std::vector<char> block;
  thread_local std::vector<float> blockStats;
  block.resize(size_t(blocks.blockElements()) * elementBytes(c->out_dtype));
  blockStats.resize(size_t(3 * rows));
  float *blockMax = blockStats.data(), *blockSum = blockMax + rows,
        *blockPicked = blockSum + rows;
  blocks.forEach(*c, b,
                 [&](const loomrt_contraction &part, const void *bPart,
                     int64_t start, int64_t count) {
                   {
                     ProfiledPart gemms(rt, "GEMMs");
                     loomrt_contract(rt, &part, a, bPart, block.data());
                   }
                   ProfiledPart statistics(rt, "row statistics");
                   loomrt_softmax_stats(c->out_dtype, block.data(), blockMax,
                                        blockSum, rows, count, /*partial=*/1);
                   loomrt_pick(rt, site, c->out_dtype, block.data(), rows,
                               count, targetsDtype, targets, vocabStart + start,
                               vocabTotal, blockPicked);
                   for (int64_t r = 0; r < rows; ++r)
                     mergeLogitsBlock(&max[r], &sum[r], &picked[r], blockMax[r],
                                      blockSum[r], blockPicked[r], start == 0);
                 });
  if (!partial)
    for (int64_t r = 0; r < rows; ++r)
      sum[r] = finalSum(SoftmaxStats{max[r], sum[r]}, blocks.vocab);
}

extern "C" void loomrt_cross_entropy(loomrt_ctx *rt, const char *site,
                                     int dtype, const void *logits,
                                     int64_t count, int64_t vocab,
                                     int targetsDtype, const void *targets,
                                     float *out) {
  std::vector<float> row(static_cast<size_t>(vocab));
  float total = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    int64_t target = loadInt(targetsDtype, targets, i);
    if (target < 0 || target >= vocab)
      failTarget(rt, site, target, targetsDtype, targets, i, vocab);
    widen(dtype, logits, i * vocab, vocab, row.data());
    float maximum;
    float sum = expShiftedSum(row.data(), vocab, maximum);
    total += maximum + std::log(sum) - load(dtype, logits, i * vocab + target);
  }
  *out = count ? total / float(count) : NAN;
}

extern "C" void loomrt_transpose(int dtype, const void *in, void *out, int rank,
                                 const int64_t *shape, const int *perm) {
  size_t bytes = elementBytes(dtype);
  int64_t inStride[LOOMRT_MAX_RANK], stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    inStride[d] = stride;
    stride *= shape[d];
  }
  loomrt_view view;
  view.num_dims = rank;
  for (int d = 0; d < rank; ++d) {
    view.size[d] = shape[perm[d]];
    view.stride[d] = inStride[perm[d]];
  }
  char *dst = static_cast<char *>(out);
  const char *src = static_cast<const char *>(in);
  forEachOffset(view, 0, rank, 0, [&](int64_t offset) {
    memcpy(dst, src + offset * bytes, bytes);
    dst += bytes;
  });
}

extern "C" void loomrt_extract(int dtype, const void *in, void *out,
                               int64_t outer, int64_t inDim, int64_t outDim,
                               int64_t start, int64_t inner) {
  size_t row = size_t(outDim * inner) * elementBytes(dtype);
  for (int64_t o = 0; o < outer; ++o)
    memcpy(static_cast<char *>(out) + o * row,
           static_cast<const char *>(in) +
               size_t((o * inDim + start) * inner) * elementBytes(dtype),
           row);
}

extern "C" void loomrt_insert(int dtype, const void *in, void *out,
                              int64_t outer, int64_t inDim, int64_t outDim,
                              int64_t start, int64_t inner) {
  size_t row = size_t(inDim * inner) * elementBytes(dtype);
  for (int64_t o = 0; o < outer; ++o)
    memcpy(static_cast<char *>(out) +
               size_t((o * outDim + start) * inner) * elementBytes(dtype),
           static_cast<const char *>(in) + o * row, row);
}

extern "C" void loomrt_copy_strided(int dtype, const void *in, void *out,
                                    int rank, const int64_t *shape,
                                    const int64_t *inStrides,
                                    const int64_t *outStrides) {
  size_t bytes = elementBytes(dtype);
  forEachOffsetPair(rank, shape, inStrides, outStrides,
                    [&](int64_t from, int64_t to) {
                      memcpy(static_cast<char *>(out) + to * bytes,
                             static_cast<const char *>(in) + from * bytes,
                             bytes);
                    });
}
