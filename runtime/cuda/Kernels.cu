//===- Kernels.cu - libloomrt's CUDA backend: memory, GEMMs, row kernels --===//
//
// The same ABI as cpu/Kernels.cpp on device pointers: the arena lives in
// one cudaMalloc, every call is enqueued on the rank's stream, GEMMs go
// through cuBLASLt (bf16/f16 inputs, f32 accumulation), attention through
// cuBLAS batched GEMMs around a masked row softmax, and the rest are the
// kernels below. Floating inputs are widened to f32 and each result rounded
// once to its type, as on the CPU (docs/language.md 11.2).
//
// Every rank has its own state (stream, handles, scratch, GEMM plans): one
// per thread, so that the loopback mode can run every rank of a mesh as a
// thread on one GPU. Collectives go through the transport (NCCL between
// processes, runtime/cuda/Nccl.cpp; loopback, runtime/Loopback.cpp, with the
// LoopbackOps at the end of this file). The steady-state step is replayed
// as a CUDA graph.
//===----------------------------------------------------------------------===//
#include "loomrt.h"
#include "runtime/Elements.h"
#include "runtime/GemmPlan.h"
#include "runtime/LogitsStats.h"
#include "runtime/Runtime.h"
#include "runtime/SoftmaxStats.h"
#include "runtime/SplitBf16.h"
#include "runtime/cuda/FusedAttention.cuh"
#include "runtime/cuda/RowKernels.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::attention;
using namespace loomrt::rows;

namespace {

#ifndef LOOMRT_CUDA_LIBRARY_ARCHS
#define LOOMRT_CUDA_LIBRARY_ARCHS "the architectures it was built for"
#endif

/// `bytes` in MiB, for messages.
std::string mib(double bytes) { return format("%.1f MiB", bytes / 1048576.0); }

/// What an error's CUDA message does not say: how much memory the GPU has
/// left, or that the code was built for other GPUs than this one.
std::string hintFor(cudaError_t status) {
  if (status == cudaErrorMemoryAllocation) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess)
      return "";
    return format(" (the GPU has %s free of %s)", mib(double(free)).c_str(),
                  mib(double(total)).c_str());
  }
  if (status != cudaErrorNoKernelImageForDevice)
    return "";
  int device = 0, major = 0, minor = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (major < 8)
    return format(" (this GPU is compute capability %d.%d; Loom's CUDA "
                  "kernels need 8.0 or newer)",
                  major, minor);
  return format(" (this GPU is compute capability %d.%d; libloomrt's CUDA "
                "kernels hold code for " LOOMRT_CUDA_LIBRARY_ARCHS
                ", and a program's own kernels only for the --cuda-arch it "
                "was built with: rebuild it with loomc --target=cuda "
                "--cuda-arch=sm_%d%d%s)",
                major, minor, major, minor, major == 9 ? "a" : "");
}

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    failProcess(format("CUDA: %s: %s%s", what, cudaGetErrorString(status),
                       hintFor(status).c_str()),
                7);
}

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    failProcess(format("cuBLAS: %s: status %d", what, int(status)), 7);
}

struct Device {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = size_t(32) << 20;
  /// Growing scratch buffers, reused by every call (one stream orders them).
  void *scratch[9] = {nullptr};
  size_t scratchBytes[9] = {0};
  /// The collectives' staging buffers and loopback marks, one set per
  /// stream: a collective on the rank's stream runs beside started ones on
  /// the communication stream (over other axes), so they must not share a
  /// buffer; and a mark recorded again on one stream must not stand for a
  /// record on the other, which a peer of the first collective may not
  /// have waited for yet (it would wait for the wrong stream).
  struct Staging {
    std::vector<void *> buffers;
    std::vector<size_t> bytes;
    std::vector<cudaEvent_t> marks;
  } staging, communicationStaging;
  /// Started collectives: the stream they run on, the rank's own stream
  /// while `stream` is that one, the event that forks it from the rank's
  /// work, and each future's end.
  cudaStream_t communication = nullptr, compute = nullptr;
  cudaEvent_t fork = nullptr;
  std::map<int, cudaEvent_t> started;
};

/// The calling rank's device state (a rank is a thread).
Device &device() {
  thread_local Device d;
  if (!d.stream) {
    check(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking),
          "creating a stream");
    check(cublasLtCreate(&d.lt), "creating the cuBLASLt handle");
    check(cublasCreate(&d.blas), "creating the cuBLAS handle");
    check(cublasSetStream(d.blas, d.stream), "setting the cuBLAS stream");
    // Exact f32 products for f32 GEMMs: no TF32.
    check(cublasSetMathMode(d.blas, CUBLAS_DEFAULT_MATH),
          "setting the math mode");
    check(cudaMalloc(&d.workspace, d.workspaceBytes),
          "allocating the cuBLASLt workspace");
  }
  return d;
}

/// Scratch buffer `slot`, grown to at least `bytes`; when the GPU has no
/// room, the run ends with a message naming `what` and adding `advice`.
void *scratch(int slot, size_t bytes, const char *what = "scratch",
              const std::string &advice = "") {
  Device &d = device();
  if (d.scratchBytes[slot] < bytes) {
    size_t grown = std::max(bytes, d.scratchBytes[slot] * 2);
    if (d.scratch[slot]) {
      check(cudaStreamSynchronize(d.stream),
            "synchronising before growing scratch");
      check(cudaFree(d.scratch[slot]), "freeing scratch");
      d.scratch[slot] = nullptr;
      d.scratchBytes[slot] = 0;
    }
    // Doubling only where the GPU has room for it (a failed cudaMalloc
    // would leave its error for the step's launch check).
    size_t free = 0, total = 0;
    if (grown > bytes &&
        (cudaMemGetInfo(&free, &total) != cudaSuccess || free < grown))
      grown = bytes;
    cudaError_t status = cudaMalloc(&d.scratch[slot], grown);
    if (status != cudaSuccess)
      failProcess(format("CUDA: allocating %s of %s: %s%s%s", what,
                         mib(double(grown)).c_str(),
                         cudaGetErrorString(status), hintFor(status).c_str(),
                         advice.c_str()),
                  7);
    d.scratchBytes[slot] = grown;
  }
  return d.scratch[slot];
}

/// Whether the fast kernels run (16-byte row kernels, fused attention,
/// strided GEMM plans, 32-bit gathers): by default, since a GPU run checked
/// them (docs/performance.md, 2026-11-30); LOOMRT_FAST_KERNELS=0 keeps to
/// the plain element-wise kernels, the reference they are tested against.
bool fastKernels() {
  static const bool fast = envSwitch("LOOMRT_FAST_KERNELS", true);
  return fast;
}

/// Whether gelu(x @ w + b, approximate = "tanh") runs as one GEMM with
/// cuBLASLt's GELU_BIAS epilogue (LOOMRT_GEMM_EPILOGUE=1, an experiment:
/// docs/running.md, section 8) instead of a GEMM and a kernel.
bool gemmEpilogue() {
  static const bool on = envSwitch("LOOMRT_GEMM_EPILOGUE", false);
  return on;
}

/// Whether GEMM algorithms are chosen by timing cuBLASLt's candidates on
/// first use (LOOMRT_GEMM_TUNE=1) instead of taking its first choice.
bool tuneGemms() {
  static const bool tune = envSwitch("LOOMRT_GEMM_TUNE", false);
  return tune;
}

/// Whether the mma.sync and wgmma attention multiply V by two of P's three
/// terms (LOOMRT_ATTENTION_TERMS=2, an experiment that rounds P to about
/// 16 bits, against docs/language.md 11.2) instead of all three.
bool twoAttentionTerms() {
  // Its other values are refused when the options are read.
  static const bool two = envIs("LOOMRT_ATTENTION_TERMS", "2");
  return two;
}

/// Whether bf16's fused attention runs on the WMMA kernel instead of the
/// mma.sync one (LOOMRT_ATTENTION=wmma), so that a GPU run can compare them.
bool wmmaAttention() {
  // Its other values are refused when the options are read.
  static const bool wmma = envIs("LOOMRT_ATTENTION", "wmma");
  return wmma;
}

/// Whether bf16's fused attention runs on Hopper's warpgroup products
/// (LOOMRT_ATTENTION=wgmma, an experiment until a GPU has checked it); the
/// device must be a 9.x one, or the run ends here with a message.
bool wgmmaAttention() {
  static const bool wgmma = [] {
    if (!envIs("LOOMRT_ATTENTION", "wgmma"))
      return false;
    int device = 0, major = 0, minor = 0;
    check(cudaGetDevice(&device), "the device");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                 device),
          "the device's compute capability");
    check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                 device),
          "the device's compute capability");
    if (major != 9)
      failProcess(format("LOOMRT_ATTENTION=wgmma needs a GPU of compute "
                         "capability 9.x (Hopper: wgmma); this one is %d.%d",
                         major, minor),
                  7);
    return true;
  }();
  return wgmma;
}

int blocksFor(int64_t count, int threads = 256) {
  return int(std::max<int64_t>(
      1, std::min<int64_t>((count + threads - 1) / threads, 65535)));
}

/// A strided view passed by value to kernels.
struct View {
  int numDims;
  int64_t size[2 * LOOMRT_MAX_RANK];
  int64_t stride[2 * LOOMRT_MAX_RANK];
};

View toView(const loomrt_view &v) {
  View out;
  out.numDims = v.num_dims;
  for (int d = 0; d < v.num_dims; ++d) {
    out.size[d] = v.size[d];
    out.stride[d] = v.stride[d];
  }
  return out;
}

__device__ __forceinline__ int64_t offsetOf(const View &v, int64_t linear) {
  int64_t offset = 0;
  for (int d = v.numDims - 1; d >= 0; --d) {
    offset += (linear % v.size[d]) * v.stride[d];
    linear /= v.size[d];
  }
  return offset;
}

int64_t countOf(const loomrt_view &v) {
  int64_t n = 1;
  for (int d = 0; d < v.num_dims; ++d)
    n *= v.size[d];
  return n;
}

bool isDense(const loomrt_view &v) {
  int64_t expected = 1;
  for (int d = v.num_dims - 1; d >= 0; --d) {
    if (v.size[d] != 1 && v.stride[d] != expected)
      return false;
    expected *= v.size[d];
  }
  return true;
}

/// Gathers a strided view (summing over `sum`) into a dense buffer of
/// `outDtype` (the operand's own type, or f32 when summing or mixing).
__global__ void packKernel(int dtype, const void *in, View view, View sum,
                           int64_t sumCount, int outDtype, void *out,
                           int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t base = offsetOf(view, i);
    float acc = 0.0f;
    for (int64_t s = 0; s < sumCount; ++s)
      acc += load(dtype, in, base + (sum.numDims ? offsetOf(sum, s) : 0));
    if (outDtype == dtype && sumCount == 1) {
      // A plain copy keeps bf16/f16 bits exactly.
      if (elementBytes(dtype) == 2)
        static_cast<uint16_t *>(out)[i] =
            static_cast<const uint16_t *>(in)[base];
      else
        store(outDtype, out, i, acc);
    } else {
      store(outDtype, out, i, acc);
    }
  }
}

/// A view whose every offset and count fits 32 bits: the gather below
/// divides in 32 bits, several times cheaper than 64-bit division.
struct View32 {
  int numDims;
  uint32_t size[2 * LOOMRT_MAX_RANK];
  uint32_t stride[2 * LOOMRT_MAX_RANK];
};

bool toView32(const loomrt_view &v, View32 &out) {
  int64_t last = 0, count = 1;
  out.numDims = v.num_dims;
  for (int d = 0; d < v.num_dims; ++d) {
    if (v.stride[d] < 0)
      return false;
    last += (v.size[d] - 1) * v.stride[d];
    count *= v.size[d];
    out.size[d] = uint32_t(v.size[d]);
    out.stride[d] = uint32_t(v.stride[d]);
  }
  return last < (int64_t(1) << 31) && count < (int64_t(1) << 31);
}

/// out[i] = in[offset of i in the view], bits copied (a pack without
/// widening or sums).
template <typename T>
__global__ void gatherKernel32(const T *in, View32 view, T *out,
                               uint32_t count) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += gridDim.x * blockDim.x) {
    uint32_t linear = i, offset = 0;
    for (int d = view.numDims - 1; d >= 0; --d) {
      uint32_t size = view.size[d];
      offset += (linear % size) * view.stride[d];
      linear /= size;
    }
    out[i] = in[offset];
  }
}

__global__ void scatterKernel(const float *in, int outDtype, void *out,
                              View view, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    store(outDtype, out, offsetOf(view, i), in[i]);
}

__global__ void integerContractKernel(const void *a, int aDtype, View aView,
                                      const void *b, int bDtype, View bView,
                                      void *out, int outDtype, View outView,
                                      int64_t batch, int64_t m, int64_t n,
                                      int64_t k) {
  int64_t count = batch * m * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t bi = i / (m * n), mi = i / n % m, ni = i % n;
    uint64_t acc = 0;
    for (int64_t ki = 0; ki < k; ++ki)
      acc += uint64_t(
                 loadInt(aDtype, a, offsetOf(aView, (bi * m + mi) * k + ki))) *
             uint64_t(
                 b ? loadInt(bDtype, b, offsetOf(bView, (bi * k + ki) * n + ni))
                   : 1);
    int64_t o = offsetOf(outView, i);
    if (outDtype == LOOMRT_I32)
      static_cast<int32_t *>(out)[o] = int32_t(uint32_t(acc));
    else
      static_cast<int64_t *>(out)[o] = int64_t(acc);
  }
}

cudaDataType_t cudaType(int dtype) {
  return dtype == LOOMRT_BF16  ? CUDA_R_16BF
         : dtype == LOOMRT_F16 ? CUDA_R_16F
                               : CUDA_R_32F;
}

int64_t product(const int64_t *sizes, int first, int last) {
  int64_t n = 1;
  for (int i = first; i < last; ++i)
    n *= sizes[i];
  return n;
}

/// The largest power of two up to 256 that divides every value (addresses
/// and byte strides): the alignment cuBLASLt may assume.
size_t alignmentOf(std::initializer_list<uint64_t> values, size_t sofar) {
  uint64_t all = sofar;
  for (uint64_t v : values)
    all |= v;
  return size_t(all & (~all + 1)); // the lowest set bit
}

/// Sets *differ when two buffers differ anywhere (every writer writes 1).
__global__ void markDifferenceKernel(const uint8_t *a, const uint8_t *b,
                                     size_t bytes, unsigned *differ) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes;
       i += size_t(gridDim.x) * blockDim.x)
    if (a[i] != b[i])
      *differ = 1;
}

/// One GEMM as cuBLASLt runs it, for tuning: descriptors, operands, and
/// the bytes its result spans.
struct GemmCall {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t lx, ly, ld;
  const void *x, *y;
  void *d;
  size_t resultBytes;
};

/// LOOMRT_GEMM_TUNE=1: of cuBLASLt's candidates, the fastest whose result
/// has the same bits as its first choice's, timed on the GEMM's own
/// operands, so that tuning changes no value (an algorithm that splits or
/// reorders the sum is passed over). Runs before the step is captured;
/// reports its choice on stderr.
cublasLtMatmulAlgo_t
fastestIdenticalAlgorithm(const GemmCall &call,
                          const cublasLtMatmulHeuristicResult_t *candidates,
                          int count, const char *shape) {
  Device &d = device();
  constexpr int kTimedRuns = 5;
  float alpha = 1.0f, beta = 0.0f;
  auto run = [&](const cublasLtMatmulAlgo_t &algo) {
    return cublasLtMatmul(d.lt, call.op, &alpha, call.x, call.lx, call.y,
                          call.ly, &beta, call.d, call.ld, call.d, call.ld,
                          &algo, d.workspace, d.workspaceBytes, d.stream);
  };
  void *reference = nullptr;
  unsigned *differ = nullptr;
  check(cudaMalloc(&reference, call.resultBytes), "allocating a GEMM's result");
  check(cudaMalloc(&differ, sizeof *differ), "allocating a flag");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "creating an event");
  check(cudaEventCreate(&stop), "creating an event");
  check(run(candidates[0].algo), "GEMM (cuBLASLt's first choice)");
  check(cudaMemcpyAsync(reference, call.d, call.resultBytes,
                        cudaMemcpyDeviceToDevice, d.stream),
        "keeping a GEMM's result");
  int best = 0, identical = 0;
  float bestMs = 0.0f, firstMs = 0.0f;
  for (int i = 0; i < count; ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS ||
        candidates[i].workspaceSize > d.workspaceBytes ||
        run(candidates[i].algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    unsigned differing = 0;
    check(cudaMemsetAsync(differ, 0, sizeof *differ, d.stream),
          "clearing a flag");
    markDifferenceKernel<<<blocksFor(int64_t(call.resultBytes)), 256, 0,
                           d.stream>>>(static_cast<const uint8_t *>(call.d),
                                       static_cast<const uint8_t *>(reference),
                                       call.resultBytes, differ);
    check(cudaMemcpyAsync(&differing, differ, sizeof differing,
                          cudaMemcpyDeviceToHost, d.stream),
          "reading a flag");
    check(cudaStreamSynchronize(d.stream), "comparing GEMM results");
    if (differing)
      continue;
    ++identical;
    check(cudaEventRecord(start, d.stream), "timing a GEMM");
    for (int r = 0; r < kTimedRuns; ++r)
      check(run(candidates[i].algo), "GEMM (a candidate)");
    check(cudaEventRecord(stop, d.stream), "timing a GEMM");
    check(cudaEventSynchronize(stop), "timing a GEMM");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "timing a GEMM");
    ms /= kTimedRuns;
    if (i == 0)
      firstMs = ms;
    if (i == 0 || ms < bestMs) {
      best = i;
      bestMs = ms;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(reference);
  cudaFree(differ);
  fprintf(stderr,
          "loom: note: GEMM %s: cuBLASLt's candidate %d of %d, %.4f ms (its "
          "first choice %.4f ms); %d of %d give the first choice's bits\n",
          shape, best + 1, count, bestMs, firstMs, identical, count);
  return candidates[best].algo;
}

/// What cuBLASLt adds to a GEMM for loomrt_contract_epilogue: nothing, the
/// bias (D's rows long, of D's type) and its GELU (GELU_BIAS), or the bias
/// and the residual, read as C with D's layout (BIAS, beta = 1).
struct GemmEpilogue {
  int kind = 0; // 0 (none) or LOOMRT_EPILOGUE_*
  const void *bias = nullptr, *residual = nullptr;
};

/// A contraction run over its views as they are (runtime/GemmPlan.h):
/// strided-batched cuBLASLt calls with transposes and leading dimensions
/// from the plan, descriptors and algorithm cached per plan and alignment.
/// With an epilogue, D is rounded after it; returns false, having run
/// nothing, where cuBLASLt has no algorithm for that epilogue.
bool stridedGemm(const StridedGemm &p, int inDtype, int outDtype, const void *a,
                 const void *b, void *out, const GemmEpilogue &epilogue = {}) {
  Device &d = device();
  size_t inBytes = elementBytes(inDtype), outBytes = elementBytes(outDtype);
  size_t alignment = 256;
  for (const std::array<int64_t, 3> &call : p.calls)
    alignment = alignmentOf(
        {uint64_t(reinterpret_cast<uintptr_t>(a)) + uint64_t(call[0]) * inBytes,
         uint64_t(reinterpret_cast<uintptr_t>(b)) + uint64_t(call[1]) * inBytes,
         uint64_t(reinterpret_cast<uintptr_t>(out)) +
             uint64_t(call[2]) * outBytes},
        alignment);
  // cuBLASLt chooses for the bias's and the residual's alignment as well.
  if (epilogue.kind)
    alignment =
        alignmentOf({uint64_t(reinterpret_cast<uintptr_t>(epilogue.bias)),
                     uint64_t(reinterpret_cast<uintptr_t>(epilogue.residual))},
                    alignment);
  // Batch entries start a stride apart; one entry has only its own start.
  if (p.batch > 1)
    alignment = alignmentOf({uint64_t(p.strideX) * inBytes,
                             uint64_t(p.strideY) * inBytes,
                             uint64_t(p.strideD) * outBytes},
                            alignment);
  struct Plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lx, ly, ld;
    cublasLtMatmulAlgo_t algo;
    bool split = false; // no algorithm for the batch: one call per entry
    bool unsupported = false; // no algorithm with the epilogue
  };
  thread_local std::map<std::array<int64_t, 16>, Plan> plans;
  int64_t withEpilogue = epilogue.kind;
  std::array<int64_t, 16> key = {
      inDtype,     outDtype,  p.transX,  p.transY,  p.rows,
      p.cols,      p.depth,   p.ldx,     p.ldy,     p.ldd,
      p.batch,     p.strideX, p.strideY, p.strideD, int64_t(alignment),
      withEpilogue};
  auto setBias = [&](cublasLtMatmulDesc_t op) {
    check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                         &epilogue.bias, sizeof epilogue.bias),
          "the epilogue's bias");
  };
  auto found = plans.find(key);
  if (found == plans.end()) {
    Plan plan;
    check(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "matmul descriptor");
    if (epilogue.kind) {
      cublasLtEpilogue_t kind = epilogue.kind == LOOMRT_EPILOGUE_BIAS_GELU_TANH
                                    ? CUBLASLT_EPILOGUE_GELU_BIAS
                                    : CUBLASLT_EPILOGUE_BIAS;
      check(cublasLtMatmulDescSetAttribute(
                plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof kind),
            "the GEMM's epilogue");
      setBias(plan.op);
    }
    cublasOperation_t tx = p.transX ? CUBLAS_OP_T : CUBLAS_OP_N,
                      ty = p.transY ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &tx, sizeof tx),
          "transpose of X");
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                         &ty, sizeof ty),
          "transpose of Y");
    // Stored shapes: X is rows x depth (depth x rows when transposed), Y is
    // depth x cols (cols x depth), D is rows x cols, all column-major.
    check(cublasLtMatrixLayoutCreate(&plan.lx, cudaType(inDtype),
                                     uint64_t(p.transX ? p.depth : p.rows),
                                     uint64_t(p.transX ? p.rows : p.depth),
                                     p.ldx),
          "layout of X");
    check(cublasLtMatrixLayoutCreate(&plan.ly, cudaType(inDtype),
                                     uint64_t(p.transY ? p.cols : p.depth),
                                     uint64_t(p.transY ? p.depth : p.cols),
                                     p.ldy),
          "layout of Y");
    check(cublasLtMatrixLayoutCreate(&plan.ld, cudaType(outDtype),
                                     uint64_t(p.rows), uint64_t(p.cols), p.ldd),
          "layout of D");
    if (p.batch > 1) {
      int count = int(p.batch);
      int64_t strides[3] = {p.strideX, p.strideY, p.strideD};
      cublasLtMatrixLayout_t layouts[3] = {plan.lx, plan.ly, plan.ld};
      for (int i = 0; i < 3; ++i) {
        check(cublasLtMatrixLayoutSetAttribute(
                  layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                  sizeof count),
              "batch count");
        check(cublasLtMatrixLayoutSetAttribute(
                  layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                  &strides[i], sizeof strides[i]),
              "batch stride");
      }
    }
    cublasLtMatmulPreference_t preference;
    check(cublasLtMatmulPreferenceCreate(&preference), "preference");
    check(cublasLtMatmulPreferenceSetAttribute(
              preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
              &d.workspaceBytes, sizeof d.workspaceBytes),
          "workspace size");
    uint32_t align = uint32_t(alignment);
    for (cublasLtMatmulPreferenceAttributes_t attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align,
                                                 sizeof align),
            "alignment");
    // Tuning runs GEMMs and waits for them, which a captured step cannot.
    constexpr int kCandidates = 8;
    bool tune = tuneGemms() && !streamIsCapturing();
    cublasLtMatmulHeuristicResult_t heuristics[kCandidates];
    int results = 0;
    // cuBLASLt answers "not supported" (or no result) when it has no
    // algorithm for the layouts; anything else is an error.
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        d.lt, plan.op, plan.lx, plan.ly, plan.ld, plan.ld, preference,
        tune ? kCandidates : 1, heuristics, &results);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED)
      results = 0;
    else
      check(status, "choosing an algorithm");
    cublasLtMatmulPreferenceDestroy(preference);
    std::string shape = format(
        "%lldx%lldx%lld (%s, batch %lld)", (long long)p.rows,
        (long long)p.cols, (long long)p.depth,
        inDtype == LOOMRT_BF16 ? "bf16" : inDtype == LOOMRT_F16 ? "f16" : "f32",
        (long long)p.batch);
    const char *what = epilogue.kind == LOOMRT_EPILOGUE_BIAS_GELU_TANH
                           ? "the bias and GELU (tanh) in cuBLASLt's "
                             "GELU_BIAS epilogue"
                           : "the bias and the residual in cuBLASLt's BIAS "
                             "epilogue and C";
    if (results == 0 && epilogue.kind) {
      plan.unsupported = true;
      fprintf(stderr,
              "loom: note: GEMM %s: no algorithm with %s: a GEMM, then a "
              "kernel\n",
              shape.c_str(), what);
    } else if (results == 0 && p.batch > 1) {
      plan.split = true; // say, a batch stride of 0 (loom.batched_einsum)
      fprintf(stderr,
              "loom: note: cuBLASLt has no algorithm for a %s strided GEMM "
              "with batch strides %lld, %lld, %lld: one call per batch "
              "entry\n",
              shape.c_str(), (long long)p.strideX, (long long)p.strideY,
              (long long)p.strideD);
    } else if (results == 0) {
      failProcess("cuBLASLt has no algorithm for a " + shape + " strided GEMM",
                  7);
    } else {
      plan.algo = heuristics[0].algo;
      if (epilogue.kind)
        fprintf(stderr, "loom: note: GEMM %s: %s (LOOMRT_GEMM_EPILOGUE=1)\n",
                shape.c_str(), what);
    }
    // Tuning runs would add a residual read in place more than once.
    if (tune && results > 1 && !p.calls.empty() && !plan.split &&
        !plan.unsupported && !epilogue.residual) {
      const std::array<int64_t, 3> &first = p.calls.front();
      GemmCall call;
      call.op = plan.op;
      call.lx = plan.lx;
      call.ly = plan.ly;
      call.ld = plan.ld;
      call.x = static_cast<const char *>(p.xIsA ? a : b) +
               size_t(first[p.xIsA ? 0 : 1]) * inBytes;
      call.y = static_cast<const char *>(p.xIsA ? b : a) +
               size_t(first[p.xIsA ? 1 : 0]) * inBytes;
      call.d = static_cast<char *>(out) + size_t(first[2]) * outBytes;
      // D is rows x cols, column-major with leading dimension ldd, batch
      // entries strideD apart.
      call.resultBytes = size_t((p.batch - 1) * p.strideD +
                                (p.cols - 1) * p.ldd + p.rows) *
                         outBytes;
      plan.algo = fastestIdenticalAlgorithm(call, heuristics, results,
                                            shape.c_str());
    }
    found = plans.emplace(key, plan).first;
  }
  const Plan &plan = found->second;
  if (plan.unsupported)
    return false;
  if (epilogue.kind)
    setBias(plan.op); // the descriptor is shared by every GEMM of its plan
  if (plan.split) {
    StridedGemm single = p;
    single.batch = 1;
    single.strideX = single.strideY = single.strideD = 0;
    single.calls.clear();
    int64_t strideA = p.xIsA ? p.strideX : p.strideY,
            strideB = p.xIsA ? p.strideY : p.strideX;
    for (const std::array<int64_t, 3> &call : p.calls)
      for (int64_t i = 0; i < p.batch; ++i)
        single.calls.push_back({call[0] + i * strideA, call[1] + i * strideB,
                                call[2] + i * p.strideD});
    return stridedGemm(single, inDtype, outDtype, a, b, out, epilogue);
  }
  float alpha = 1.0f, beta = epilogue.residual ? 1.0f : 0.0f;
  for (const std::array<int64_t, 3> &call : p.calls) {
    const char *x = static_cast<const char *>(p.xIsA ? a : b) +
                    size_t(call[p.xIsA ? 0 : 1]) * inBytes;
    const char *y = static_cast<const char *>(p.xIsA ? b : a) +
                    size_t(call[p.xIsA ? 1 : 0]) * inBytes;
    char *dst = static_cast<char *>(out) + size_t(call[2]) * outBytes;
    // The residual is C, laid out as D (the same pointer where in place).
    const char *c = epilogue.residual
                        ? static_cast<const char *>(epilogue.residual) +
                              size_t(call[2]) * outBytes
                        : dst;
    check(cublasLtMatmul(d.lt, plan.op, &alpha, x, plan.lx, y, plan.ly, &beta,
                         c, plan.ld, dst, plan.ld, &plan.algo, d.workspace,
                         d.workspaceBytes, d.stream),
          "strided GEMM");
  }
  return true;
}

/// Row-major C[batch][m][n] = A[batch][m][k] * B[batch][k][n], all dense:
/// in column-major terms C^T = B^T A^T, nothing transposed.
void gemm(int inDtype, const void *a, const void *b, int outDtype, void *c,
          int64_t batch, int64_t m, int64_t n, int64_t k) {
  StridedGemm plan;
  plan.xIsA = false;
  plan.rows = n;
  plan.cols = m;
  plan.depth = k;
  plan.ldx = n;
  plan.ldy = k;
  plan.ldd = n;
  plan.batch = batch;
  plan.strideX = n * k;
  plan.strideY = k * m;
  plan.strideD = n * m;
  plan.calls = {{0, 0, 0}};
  stridedGemm(plan, inDtype, outDtype, a, b, c);
}

} // namespace

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

extern "C" void *loomrt_stream(loomrt_ctx *) { return device().stream; }

extern "C" void loomrt_copy(loomrt_ctx *, void *dst, const void *src,
                            int64_t bytes) {
  if (dst != src)
    check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice,
                          device().stream),
          "copying within the arena");
}

extern "C" void loomrt_upload(loomrt_ctx *, void *dst, const void *src,
                              int64_t bytes) {
  check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyHostToDevice,
                        device().stream),
        "uploading");
  // The source may be reused as soon as this returns.
  check(cudaStreamSynchronize(device().stream), "uploading");
}

/// Constants are the program's static data: each is copied to the device
/// once, and every step copies it from there, device to device, which a
/// CUDA graph can capture (a copy from pageable host memory it cannot).
extern "C" void loomrt_constant(loomrt_ctx *, void *dst, const void *src,
                                int64_t bytes) {
  thread_local std::map<const void *, void *> onDevice;
  void *&copy = onDevice[src];
  if (!copy) {
    check(cudaMalloc(&copy, size_t(bytes ? bytes : 1)),
          "allocating a constant");
    // On the step's stream: a pageable copy on the legacy stream may still
    // be in flight when cudaMemcpy returns, unordered with this stream.
    check(cudaMemcpyAsync(copy, src, size_t(bytes), cudaMemcpyHostToDevice,
                          device().stream),
          "uploading a constant");
  }
  check(cudaMemcpyAsync(dst, copy, size_t(bytes), cudaMemcpyDeviceToDevice,
                        device().stream),
        "copying a constant");
}

extern "C" void loomrt_download(loomrt_ctx *, void *dst, const void *src,
                                int64_t bytes) {
  check(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToHost,
                        device().stream),
        "downloading");
  check(cudaStreamSynchronize(device().stream), "downloading");
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

extern "C" void loomrt_contract(loomrt_ctx *, const loomrt_contraction *c,
                                const void *a, const void *b, void *out) {
  Device &d = device();
  int nb = c->num_batch, nm = c->num_m, nn = c->num_n, nk = c->num_k;
  int64_t batch = product(c->a.size, 0, nb),
          m = product(c->a.size, nb, nb + nm),
          k = product(c->a.size, nb + nm, nb + nm + nk),
          n = product(c->b.size, nb + nk, nb + nk + nn);
  if (c->out_dtype == LOOMRT_I32 || c->out_dtype == LOOMRT_I64) {
    integerContractKernel<<<blocksFor(batch * m * n), 256, 0, d.stream>>>(
        a, c->a_dtype, toView(c->a), b, c->b_dtype, toView(c->b), out,
        c->out_dtype, toView(c->out), batch, m, n, k);
    check(cudaGetLastError(), "integer contraction");
    return;
  }
  // The GEMM's input type: the operands' own when they agree (bf16 stays
  // bf16 for the tensor cores), f32 when they mix or are pre-summed.
  bool one = b == nullptr;
  // Views a GEMM library can read and write as they are need no packing or
  // scattering (one of the fast kernels; LOOMRT_FAST_KERNELS=0 packs).
  StridedGemm plan;
  if (fastKernels() && !one && c->a_dtype == c->b_dtype &&
      (c->out_dtype == c->a_dtype || c->out_dtype == LOOMRT_F32) &&
      planStridedGemm(*c, plan)) {
    stridedGemm(plan, c->a_dtype, c->out_dtype, a, b, out);
    return;
  }
  int inDtype = (!one && c->a_dtype == c->b_dtype && c->a_sum.num_dims == 0 &&
                 c->b_sum.num_dims == 0)
                    ? c->a_dtype
                    : LOOMRT_F32;
  auto operand = [&](int slot, const void *data, int dtype,
                     const loomrt_view &view,
                     const loomrt_view &sum) -> const void * {
    if (dtype == inDtype && sum.num_dims == 0 && isDense(view))
      return data;
    int64_t count = countOf(view), sumCount = countOf(sum);
    void *packed = scratch(slot, size_t(count) * elementBytes(inDtype));
    View32 narrow;
    if (fastKernels() && dtype == inDtype && sum.num_dims == 0 &&
        toView32(view, narrow)) {
      if (elementBytes(dtype) == 2)
        gatherKernel32<<<blocksFor(count), 256, 0, d.stream>>>(
            static_cast<const uint16_t *>(data), narrow,
            static_cast<uint16_t *>(packed), uint32_t(count));
      else
        gatherKernel32<<<blocksFor(count), 256, 0, d.stream>>>(
            static_cast<const uint32_t *>(data), narrow,
            static_cast<uint32_t *>(packed), uint32_t(count));
      check(cudaGetLastError(), "packing a GEMM operand");
      return packed;
    }
    packKernel<<<blocksFor(count), 256, 0, d.stream>>>(
        dtype, data, toView(view), toView(sum), sumCount, inDtype, packed,
        count);
    check(cudaGetLastError(), "packing a GEMM operand");
    return packed;
  };
  const void *aData = operand(0, a, c->a_dtype, c->a, c->a_sum);
  const void *bData;
  if (one) {
    // A one-operand einsum: B is a [1 x 1] one.
    thread_local float *deviceOne = nullptr;
    if (!deviceOne) {
      check(cudaMalloc(&deviceOne, sizeof(float)), "allocating a constant");
      static const float host = 1.0f;
      check(cudaMemcpyAsync(deviceOne, &host, sizeof host,
                            cudaMemcpyHostToDevice, d.stream),
            "a constant");
    }
    bData = deviceOne;
    n = 1;
    k = 1;
  } else {
    bData = operand(1, b, c->b_dtype, c->b, c->b_sum);
  }
  bool outDense = isDense(c->out) &&
                  (c->out_dtype == LOOMRT_F32 || c->out_dtype == inDtype);
  int gemmOut = outDense ? c->out_dtype : LOOMRT_F32;
  void *cData = outDense ? out : scratch(2, size_t(batch * m * n) * 4);
  if (k == 0) {
    check(cudaMemsetAsync(cData, 0,
                          size_t(batch * m * n) * elementBytes(gemmOut),
                          d.stream),
          "an empty contraction");
  } else {
    // cuBLASLt wants A, B and C of one type except for f32 outputs of
    // bf16/f16 inputs, which it supports; f32 inputs give f32 outputs.
    gemm(inDtype, aData, bData, gemmOut, cData, batch, m, n, k);
  }
  if (!outDense) {
    int64_t count = batch * m * n;
    scatterKernel<<<blocksFor(count), 256, 0, d.stream>>>(
        static_cast<const float *>(cData), c->out_dtype, out, toView(c->out),
        count);
    check(cudaGetLastError(), "storing a GEMM result");
  }
}

/// Why a GEMM cannot compute its reader in cuBLASLt's epilogue, or null
/// where it can (cuBLASLt may still have no algorithm: stridedGemm).
static const char *epilogueRefusal(const loomrt_contraction &c,
                                   const StridedGemm &plan, bool planned,
                                   int kind, const void *bias,
                                   int64_t biasCount, const void *residual) {
  if (kind != LOOMRT_EPILOGUE_BIAS_GELU_TANH &&
      kind != LOOMRT_EPILOGUE_BIAS_RESIDUAL)
    return "an epilogue this runtime does not know";
  if (kind == LOOMRT_EPILOGUE_BIAS_RESIDUAL && !residual)
    return "no residual";
  if (c.a_dtype != c.b_dtype || c.out_dtype != c.a_dtype ||
      isInteger(c.out_dtype))
    return "operands and product not of one float type";
  if (reinterpret_cast<uintptr_t>(bias) % 16)
    return "its bias is not 16-byte aligned";
  if (!planned)
    return "its views are not one strided cuBLASLt GEMM";
  // cuBLASLt adds bias[i] to row i of its column-major result D, whose rows
  // have unit stride: the product's last dimension when they hold just it.
  if (plan.rows != biasCount)
    return "the product's last dimension is not its rows in cuBLASLt";
  if (plan.batch > 1 || plan.calls.size() != 1)
    return "it is a batch of GEMMs";
  return nullptr;
}

extern "C" int loomrt_contract_epilogue(loomrt_ctx *rt,
                                        const loomrt_contraction *c,
                                        const void *a, const void *b,
                                        void *product, int kind,
                                        const void *bias, int64_t biasCount,
                                        const void *residual, void *out) {
  if (!gemmEpilogue() || !fastKernels() || !b) {
    loomrt_contract(rt, c, a, b, product);
    return 0;
  }
  StridedGemm plan;
  bool planned = planStridedGemm(*c, plan);
  if (const char *refusal =
          epilogueRefusal(*c, plan, planned, kind, bias, biasCount, residual)) {
    // Once per GEMM of the program and reason: a repeat's iterations share
    // the descriptor, and their biases may differ in alignment.
    thread_local std::set<std::pair<const loomrt_contraction *, std::string>>
        said;
    if (said.insert({c, refusal}).second) {
      std::string sizes;
      for (int i = 0; i < c->out.num_dims; ++i)
        sizes += (i ? ", " : "") + std::to_string(c->out.size[i]);
      fprintf(stderr,
              "loom: note: the GEMM of a [%s] product: not in cuBLASLt's "
              "epilogue (LOOMRT_GEMM_EPILOGUE=1): %s; a GEMM, then a "
              "kernel\n",
              sizes.c_str(), refusal);
    }
    loomrt_contract(rt, c, a, b, product);
    return 0;
  }
  GemmEpilogue epilogue;
  epilogue.kind = kind;
  epilogue.bias = bias;
  epilogue.residual =
      kind == LOOMRT_EPILOGUE_BIAS_RESIDUAL ? residual : nullptr;
  if (stridedGemm(plan, c->a_dtype, c->out_dtype, a, b, out, epilogue))
    return 1;
  loomrt_contract(rt, c, a, b, product);
  return 0;
}

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

namespace {

__global__ void rowReduceKernel(int dtype, int reduction, const void *in,
                                loomrt_rows inRows, void *out, int64_t rows,
                                int64_t n, float scale) {
  __shared__ float shared[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float acc = reduction == LOOMRT_MAX ? -INFINITY : 0.0f;
    int64_t start = loomrt_row_start(inRows, r);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      float x = load(dtype, in, start + j);
      acc = reduction == LOOMRT_MAX ? maxKeepingNaN(acc, x) : acc + x;
    }
    float total = reduction == LOOMRT_MAX ? blockReduce<true>(acc, shared)
                                          : blockReduce<false>(acc, shared);
    if (threadIdx.x == 0)
      store(dtype, out, r, reduction == LOOMRT_MAX ? total : total * scale);
  }
}

struct Shape {
  int rank;
  int64_t size[LOOMRT_MAX_RANK];
};

/// Any reduction: one thread per output element walks its reduced elements.
__global__ void reduceKernel(int dtype, int reduction, const void *in,
                             void *out, Shape shape, uint32_t mask,
                             int64_t outCount, int64_t reducedCount,
                             float scale) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < outCount;
       o += int64_t(gridDim.x) * blockDim.x) {
    // Index of the kept dimensions, from o.
    int64_t kept[LOOMRT_MAX_RANK] = {0}, rest = o;
    for (int d = shape.rank - 1; d >= 0; --d)
      if (!(mask & (1u << d))) {
        kept[d] = rest % shape.size[d];
        rest /= shape.size[d];
      }
    bool isInt = isInteger(dtype);
    float acc = reduction == LOOMRT_MAX ? -INFINITY : 0.0f;
    int64_t iacc = reduction == LOOMRT_MAX ? INT64_MIN : 0;
    for (int64_t r = 0; r < reducedCount; ++r) {
      int64_t index[LOOMRT_MAX_RANK], rr = r;
      for (int d = shape.rank - 1; d >= 0; --d) {
        if (mask & (1u << d)) {
          index[d] = rr % shape.size[d];
          rr /= shape.size[d];
        } else {
          index[d] = kept[d];
        }
      }
      int64_t linear = 0;
      for (int d = 0; d < shape.rank; ++d)
        linear = linear * shape.size[d] + index[d];
      if (isInt) {
        int64_t x = loadInt(dtype, in, linear);
        iacc = reduction == LOOMRT_MAX ? (x > iacc ? x : iacc)
                                       : int64_t(uint64_t(iacc) + uint64_t(x));
      } else {
        float x = load(dtype, in, linear);
        acc = reduction == LOOMRT_MAX ? maxKeepingNaN(acc, x) : acc + x;
      }
    }
    if (dtype == LOOMRT_I32)
      static_cast<int32_t *>(out)[o] = int32_t(uint32_t(uint64_t(iacc)));
    else if (dtype == LOOMRT_I64)
      static_cast<int64_t *>(out)[o] = iacc;
    else
      store(dtype, out, o, reduction == LOOMRT_MAX ? acc : acc * scale);
  }
}

/// With inner 1, in's rows are where inRows says.
__global__ void softmaxKernel(int dtype, const void *in, void *out,
                              int64_t outer, int64_t n, int64_t inner,
                              loomrt_rows inRows) {
  int64_t rows = outer * inner;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    int64_t base = (r / inner) * n * inner + r % inner;
    int64_t from = inner == 1 ? loomrt_row_start(inRows, r) : base;
    float maximum = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      maximum = fmaxf(maximum, load(dtype, in, from + j * inner));
    float total = 0.0f;
    for (int64_t j = 0; j < n; ++j)
      total += expf(load(dtype, in, from + j * inner) - maximum);
    for (int64_t j = 0; j < n; ++j)
      store(dtype, out, base + j * inner,
            expf(load(dtype, in, from + j * inner) - maximum) / total);
  }
}

__global__ void normKernel(int dtype, const void *x, loomrt_rows xRows,
                           int scaleDtype, const void *scale, const void *bias,
                           void *out, int64_t rows, int64_t n, float eps,
                           int rms) {
  __shared__ float shared[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t at = loomrt_row_start(xRows, r);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += load(dtype, x, at + j);
    float mean = rms ? 0.0f : blockReduce<false>(sum, shared) / float(n);
    float squares = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      float centred = load(dtype, x, at + j) - mean;
      squares += centred * centred;
    }
    float inverse =
        rsqrtf(blockReduce<false>(squares, shared) / float(n) + eps);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      float y = (load(dtype, x, at + j) - mean) * inverse *
                load(scaleDtype, scale, j);
      if (bias)
        y += load(scaleDtype, bias, j);
      store(dtype, out, r * n + j, y);
    }
  }
}

/// Scores of one attention row: mask (causal), max-subtracted softmax, in
/// place, in f32.
__global__ void attentionSoftmaxKernel(float *scores, int64_t rows, int64_t s,
                                       int64_t t, int causal) {
  __shared__ float shared[256];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float *row = scores + r * t;
    int64_t i = r % s, visible = causal ? min(t, i + 1) : t;
    float maximum = -INFINITY;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x)
      maximum = fmaxf(maximum, row[j]);
    maximum = blockReduce<true>(maximum, shared);
    float total = 0.0f;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x)
      total += expf(row[j] - maximum);
    total = blockReduce<false>(total, shared);
    for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
      row[j] = j < visible ? expf(row[j] - maximum) / total : 0.0f;
  }
}

//--- Row kernels with 16-byte loads (runtime/cuda/RowKernels.cuh) ----------

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

/// Launches Kernel<Dtype> for a floating dtype.
template <template <int> class Launch, typename... Args>
void forFloatType(int dtype, Args... args) {
  if (dtype == LOOMRT_F32)
    Launch<LOOMRT_F32>::run(args...);
  else if (dtype == LOOMRT_BF16)
    Launch<LOOMRT_BF16>::run(args...);
  else
    Launch<LOOMRT_F16>::run(args...);
}

/// The operands of a norm (and of the sum before it, when `addend` is set:
/// loomrt_add_norm, whose x's rows are consecutive).
struct NormArgs {
  const void *x;
  loomrt_rows xRows;
  const void *addend, *addendBias;
  void *sum;
  const void *scale, *bias;
  void *out;
  int64_t rows, n;
  float eps;
  int rms;
};

template <int Dtype, int ScaleDtype, int Lanes, int K>
void launchNormRows(const NormArgs &a) {
  auto kernel = a.addendBias ? normVecKernel<Dtype, ScaleDtype, Lanes, K, true>
                             : normVecKernel<Dtype, ScaleDtype, Lanes, K>;
  kernel<<<blocksFor(a.rows, kBlockRow / Lanes), kBlockRow, 0,
           device().stream>>>(a.x, a.xRows, a.addend, a.addendBias, a.sum,
                              a.scale, a.bias, a.out, a.rows, a.n, a.eps,
                              a.rms);
}

/// A warp per row while a row's packs fit 8 per lane, else a block per row.
template <int Dtype, int ScaleDtype> void launchNorm(const NormArgs &a) {
  int64_t packs = a.n / Pack<Dtype>::N;
  if (packs <= kWarpRow)
    launchNormRows<Dtype, ScaleDtype, kWarpRow, 1>(a);
  else if (packs <= 2 * kWarpRow)
    launchNormRows<Dtype, ScaleDtype, kWarpRow, 2>(a);
  else if (packs <= 4 * kWarpRow)
    launchNormRows<Dtype, ScaleDtype, kWarpRow, 4>(a);
  else if (packs <= 8 * kWarpRow)
    launchNormRows<Dtype, ScaleDtype, kWarpRow, 8>(a);
  else
    launchNormRows<Dtype, ScaleDtype, kBlockRow, kRowPacks>(a);
}

template <int Dtype> struct LaunchNorm {
  static void run(int scaleDtype, const NormArgs &a) {
    if (scaleDtype == Dtype)
      launchNorm<Dtype, Dtype>(a);
    else if constexpr (Dtype != LOOMRT_F32) // an f32 scale (normVecScales)
      launchNorm<Dtype, LOOMRT_F32>(a);
  }
};

/// Launches `warpKernel(args...)` over `rows` rows, a warp a row, where
/// there are rows enough (warpPerRow), else `blockKernel(args...)`, a block
/// a row: the two instances of one row kernel.
template <typename... Params, typename... Args>
void launchRows(int64_t rows, void (*warpKernel)(Params...),
                void (*blockKernel)(Params...), Args... args) {
  if (warpPerRow(rows))
    warpKernel<<<blocksFor(rows, kBlockRow / kWarpRow), kBlockRow, 0,
                 device().stream>>>(args...);
  else
    blockKernel<<<blocksFor(rows, 1), kBlockRow, 0, device().stream>>>(
        args...);
}

template <int Dtype> struct LaunchRowReduce {
  static void run(int reduction, const void *in, loomrt_rows inRows, void *out,
                  int64_t rows, int64_t n, float scale) {
    launchRows(rows, rowReduceVecKernel<Dtype, kWarpRow>,
               rowReduceVecKernel<Dtype, kBlockRow>, reduction, in, inRows,
               out, rows, n, scale);
  }
};

/// Whether rows that start where `rows` says keep 16-byte packs aligned
/// (a pack being 4 f32 or 8 bf16/f16 elements).
bool rowsKeepPacks(int dtype, const loomrt_rows &rows) {
  int64_t perPack = dtype == LOOMRT_F32 ? 4 : 8;
  return rows.row_stride % perPack == 0 && rows.group_stride % perPack == 0;
}

/// Whether a row kernel over rows of n elements of `dtype` at these
/// pointers can use 16-byte packs (with rows held in registers when
/// `resident`).
bool packable(int dtype, int64_t n, bool resident,
              std::initializer_list<const void *> pointers) {
  if (!fastKernels() || isInteger(dtype))
    return false;
  int per = dtype == LOOMRT_F32 ? 4 : 8;
  if (n % per != 0 || (resident && n / per > kBlockRow * kRowPacks))
    return false;
  for (const void *p : pointers)
    if (p && !aligned16(p))
      return false;
  return true;
}

__global__ void convertKernel(int fromDtype, const void *in, int toDtype,
                              void *out, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    store(toDtype, out, i, load(fromDtype, in, i));
}

__global__ void embeddingKernel(int idsDtype, const void *ids, int64_t count,
                                int dtype, const void *table, int64_t rows,
                                int64_t width, int64_t vocabStart, void *out) {
  int64_t total = count * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = loadInt(idsDtype, ids, i / width) - vocabStart,
            column = i % width;
    bool mine = row >= 0 && row < rows;
    if (dtype == LOOMRT_F32)
      static_cast<float *>(out)[i] =
          mine ? static_cast<const float *>(table)[row * width + column] : 0.0f;
    else
      static_cast<uint16_t *>(out)[i] =
          mine ? static_cast<const uint16_t *>(table)[row * width + column]
               : uint16_t(0);
  }
}

/// embeddingKernel a 16-byte pack a thread, for rows a whole number of
/// packs, with 32-bit index arithmetic: with a 64-bit division per element
/// GPT-2 small's embedding ran at 14% of an H200's bandwidth.
__global__ void embeddingPackKernel(int idsDtype, const void *ids,
                                    int32_t packs, int32_t packsPerRow,
                                    const uint4 *table, int64_t rows,
                                    int64_t vocabStart, uint4 *out) {
  for (int32_t p = int32_t(blockIdx.x * blockDim.x + threadIdx.x); p < packs;
       p += int32_t(gridDim.x * blockDim.x)) {
    int32_t token = p / packsPerRow, column = p % packsPerRow;
    int64_t row = loadInt(idsDtype, ids, token) - vocabStart;
    store16(out + p, row >= 0 && row < rows
                         ? load16(table + row * packsPerRow + column)
                         : make_uint4(0, 0, 0, 0));
  }
}

/// Each row's maximum and sum of exp(x - max) (loom.softmax_stats): each
/// row's threads take its elements online (whole 16-byte packs at a time
/// with `packs`), then merge their statistics.
template <int Dtype, int Lanes>
__global__ void softmaxStatsKernel(const void *in, float *max, float *sum,
                                   int64_t rows, int64_t n, bool packs,
                                   bool partial) {
  forEachRowStats<Dtype, Lanes>(in, rows, n, packs,
                                [&](int64_t r, SoftmaxStats stats) {
                                  max[r] = stats.max;
                                  sum[r] = partial ? stats.sum
                                                   : finalSum(stats, n);
                                });
}

__global__ void pickKernel(int dtype, const void *logits, int64_t count,
                           int64_t vocab, int targetsDtype, const void *targets,
                           int64_t vocabStart, int64_t vocabTotal, float *out,
                           unsigned long long *bad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t target = loadInt(targetsDtype, targets, i);
    if (target < 0 || target >= vocabTotal)
      atomicMin(bad, (unsigned long long)(i + 1));
    int64_t column = target - vocabStart;
    out[i] = column >= 0 && column < vocab
                 ? load(dtype, logits, i * vocab + column)
                 : 0.0f;
  }
}

__global__ void transposeKernel(size_t bytes, const char *in, char *out,
                                Shape inShape, Shape perm, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t inStride[LOOMRT_MAX_RANK], stride = 1;
    for (int d = inShape.rank - 1; d >= 0; --d) {
      inStride[d] = stride;
      stride *= inShape.size[d];
    }
    int64_t rest = i, offset = 0;
    for (int d = inShape.rank - 1; d >= 0; --d) {
      int64_t source = perm.size[d];
      offset += (rest % inShape.size[source]) * inStride[source];
      rest /= inShape.size[source];
    }
    for (size_t b = 0; b < bytes; ++b)
      out[i * bytes + b] = in[offset * bytes + b];
  }
}

__global__ void blockCopyKernel(size_t bytes, const char *in, char *out,
                                int64_t outer, int64_t inRow, int64_t outRow,
                                int64_t inStart, int64_t outStart,
                                int64_t length) {
  int64_t count = outer * length;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = i / length, j = i % length;
    for (size_t b = 0; b < bytes; ++b)
      out[(o * outRow + outStart + j) * bytes + b] =
          in[(o * inRow + inStart + j) * bytes + b];
  }
}

/// Element i (row-major over the views' common sizes) from `from`'s offset
/// in `in` to `to`'s in `out`.
__global__ void stridedCopyKernel(size_t bytes, const char *in, View from,
                                  char *out, View to, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t source = offsetOf(from, i), target = offsetOf(to, i);
    for (size_t b = 0; b < bytes; ++b)
      out[target * bytes + b] = in[source * bytes + b];
  }
}

Shape toShape(int rank, const int64_t *sizes) {
  Shape shape;
  shape.rank = rank;
  for (int d = 0; d < rank; ++d)
    shape.size[d] = sizes[d];
  return shape;
}

/// Targets outside the vocabulary are flagged on the device and checked
/// after the step (a check inside would stop the stream, and a CUDA graph
/// cannot contain one). Each pick or cross-entropy of the step has its own
/// flag, in the order the step issues them, so a replayed graph finds its
/// flags where the captured step left them.
struct TargetCheck {
  unsigned long long *flag;
  std::string site;
  const void *targets;
  int targetsDtype;
  int64_t vocab;
};
struct StepChecks {
  std::vector<unsigned long long *> flags;
  std::vector<TargetCheck> pending;
};
StepChecks &stepChecks() {
  thread_local StepChecks checks;
  return checks;
}

/// A cleared flag for the next check of this step.
unsigned long long *badFlag() {
  StepChecks &checks = stepChecks();
  size_t next = checks.pending.size();
  if (next == checks.flags.size()) {
    unsigned long long *flag = nullptr;
    check(cudaMalloc(&flag, sizeof *flag), "allocating a flag");
    checks.flags.push_back(flag);
  }
  unsigned long long *flag = checks.flags[next];
  check(cudaMemsetAsync(flag, 0xff, sizeof *flag, device().stream),
        "clearing a flag");
  return flag;
}

void checkTargets(loomrt_ctx *, const char *site, unsigned long long *flag,
                  const void *targets, int targetsDtype, int64_t vocab) {
  stepChecks().pending.push_back({flag, site, targets, targetsDtype, vocab});
}

/// After a step: ends the job when a kernel flagged a target outside the
/// vocabulary.
void checkStepTargets(loomrt_ctx *rt) {
  for (const TargetCheck &pending : stepChecks().pending) {
    unsigned long long position = 0;
    check(cudaMemcpy(&position, pending.flag, sizeof position,
                     cudaMemcpyDeviceToHost),
          "reading a flag");
    if (position == ~0ull)
      continue;
    int64_t index = int64_t(position) - 1, target = 0;
    size_t bytes = elementBytes(pending.targetsDtype);
    check(cudaMemcpy(&target,
                     static_cast<const char *>(pending.targets) + index * bytes,
                     bytes, cudaMemcpyDeviceToHost),
          "reading a target");
    if (pending.targetsDtype == LOOMRT_I32)
      target = int32_t(target);
    std::string message =
        "target " + std::to_string(target) + " at " +
        targetPlace(rt, pending.targets, pending.targetsDtype, index) +
        " is outside [0, " + std::to_string(pending.vocab) + ")";
    loomrt_fail(rt, pending.site.c_str(), message.c_str());
  }
}

} // namespace

extern "C" void loomrt_reduce(int dtype, int reduction, const void *in,
                              void *out, int rank, const int64_t *shape,
                              uint32_t mask, double scale,
                              const loomrt_rows *inRows) {
  cudaStream_t stream = device().stream;
  int firstReduced = rank;
  while (firstReduced > 0 && (mask & (1u << (firstReduced - 1))))
    --firstReduced;
  bool isInt = isInteger(dtype);
  int64_t outCount = 1, reducedCount = 1;
  for (int d = 0; d < rank; ++d)
    (mask & (1u << d) ? reducedCount : outCount) *= shape[d];
  if (!isInt && firstReduced < rank &&
      (mask & ((1u << firstReduced) - 1)) == 0) {
    loomrt_rows rows =
        inRows ? *inRows : loomrt_consecutive_rows(outCount, reducedCount);
    if (rowsKeepPacks(dtype, rows) &&
        packable(dtype, reducedCount, false, {in}))
      forFloatType<LaunchRowReduce>(dtype, reduction, in, rows, out, outCount,
                                    reducedCount, float(scale));
    else
      rowReduceKernel<<<blocksFor(outCount, 1), 256, 0, stream>>>(
          dtype, reduction, in, rows, out, outCount, reducedCount,
          float(scale));
  } else {
    // The emitter passes rows for a last dimension's float reduction only.
    if (inRows)
      failProcess("loomrt_reduce: rows of a strided input for a reduction "
                  "other than of a float's last dimension",
                  5);
    reduceKernel<<<blocksFor(outCount), 256, 0, stream>>>(
        dtype, reduction, in, out, toShape(rank, shape), mask, outCount,
        reducedCount, float(scale));
  }
  check(cudaGetLastError(), "reduction");
}

template <int Dtype, int Lanes, int K>
void launchSoftmaxRows(const void *in, loomrt_rows inRows, void *out,
                       int64_t rows, int64_t n) {
  softmaxVecKernel<Dtype, Lanes, K>
      <<<blocksFor(rows, kBlockRow / Lanes), kBlockRow, 0, device().stream>>>(
          in, inRows, out, rows, n);
}

/// A warp per row while a row's packs fit 8 per lane, else a block per row
/// (as the norms: launchNorm).
template <int Dtype> struct LaunchSoftmax {
  static void run(const void *in, loomrt_rows inRows, void *out, int64_t rows,
                  int64_t n) {
    int64_t packs = n / Pack<Dtype>::N;
    if (packs <= kWarpRow)
      launchSoftmaxRows<Dtype, kWarpRow, 1>(in, inRows, out, rows, n);
    else if (packs <= 2 * kWarpRow)
      launchSoftmaxRows<Dtype, kWarpRow, 2>(in, inRows, out, rows, n);
    else if (packs <= 4 * kWarpRow)
      launchSoftmaxRows<Dtype, kWarpRow, 4>(in, inRows, out, rows, n);
    else if (packs <= 8 * kWarpRow)
      launchSoftmaxRows<Dtype, kWarpRow, 8>(in, inRows, out, rows, n);
    else
      launchSoftmaxRows<Dtype, kBlockRow, kRowPacks>(in, inRows, out, rows, n);
  }
};

extern "C" void loomrt_softmax(int dtype, const void *in, void *out,
                               int64_t outer, int64_t n, int64_t inner,
                               const loomrt_rows *inRows) {
  loomrt_rows rows = inRows ? *inRows : loomrt_consecutive_rows(outer, n);
  // Over the last dimension, rows of whole packs: each row read once, in
  // registers. Otherwise (another dimension, or rows of other lengths or
  // longer than the registers hold) a thread per row.
  if (inner == 1 && rowsKeepPacks(dtype, rows) &&
      packable(dtype, n, true, {in, out}))
    forFloatType<LaunchSoftmax>(dtype, in, rows, out, outer, n);
  else
    softmaxKernel<<<blocksFor(outer * inner), 256, 0, device().stream>>>(
        dtype, in, out, outer, n, inner, rows);
  check(cudaGetLastError(), "softmax");
}

template <int Dtype> struct LaunchSoftmaxStats {
  static void run(const void *in, void *max, void *sum, int64_t rows, int64_t n,
                  bool packs, bool partial) {
    float *maxes = static_cast<float *>(max), *sums = static_cast<float *>(sum);
    launchRows(rows, softmaxStatsKernel<Dtype, kWarpRow>,
               softmaxStatsKernel<Dtype, kBlockRow>, in, maxes, sums, rows, n,
               packs, partial);
  }
};

extern "C" void loomrt_softmax_stats(int dtype, const void *in, void *max,
                                     void *sum, int64_t rows, int64_t n,
                                     int partial) {
  forFloatType<LaunchSoftmaxStats>(dtype, in, max, sum, rows, n,
                                   packable(dtype, n, false, {in}),
                                   partial != 0);
  check(cudaGetLastError(), "softmax statistics");
}

/// sum = a + b, rounded to dtype, where b is b + bBias[i % n] rounded to
/// dtype first if bBias is set: the plain kernels' first step of
/// loomrt_add_norm.
__global__ void addKernel(int dtype, const void *a, const void *b,
                          const void *bBias, void *sum, int64_t count,
                          int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float addend = load(dtype, b, i);
    if (bBias)
      addend = roundToType(dtype, addend + load(dtype, bBias, i % n));
    store(dtype, sum, i, load(dtype, a, i) + addend);
  }
}

/// loomrt_norm, and loomrt_add_norm with an addend: the row kernel in
/// registers where the packs allow, else the plain kernels (the sum made
/// first, then normalised).
void normOrAddNorm(int dtype, int scaleDtype, const NormArgs &a) {
  if (normVecScales(dtype, scaleDtype) && rowsKeepPacks(dtype, a.xRows) &&
      packable(dtype, a.n, true,
               {a.x, a.addend, a.addendBias, a.sum, a.scale, a.bias, a.out})) {
    forFloatType<LaunchNorm>(dtype, scaleDtype, a);
  } else {
    const void *x = a.x;
    if (a.addend) {
      addKernel<<<blocksFor(a.rows * a.n), 256, 0, device().stream>>>(
          dtype, a.x, a.addend, a.addendBias, a.sum, a.rows * a.n, a.n);
      x = a.sum;
    }
    normKernel<<<blocksFor(a.rows, 1), 256, 0, device().stream>>>(
        dtype, x, a.addend ? loomrt_consecutive_rows(a.rows, a.n) : a.xRows,
        scaleDtype, a.scale, a.bias, a.out, a.rows, a.n, a.eps, a.rms);
  }
  check(cudaGetLastError(), a.addend ? "add and norm" : "norm");
}

extern "C" void loomrt_norm(int dtype, const void *x, int scaleDtype,
                            const void *scale, const void *bias, void *out,
                            int64_t rows, int64_t n, double eps, int rms,
                            const loomrt_rows *xRows) {
  normOrAddNorm(dtype, scaleDtype,
                {x, xRows ? *xRows : loomrt_consecutive_rows(rows, n), nullptr,
                 nullptr, nullptr, scale, bias, out, rows, n, float(eps), rms});
}

extern "C" void loomrt_add_norm(int dtype, const void *a, const void *b,
                                const void *bBias, void *sum, int scaleDtype,
                                const void *scale, const void *bias, void *out,
                                int64_t rows, int64_t n, double eps, int rms) {
  normOrAddNorm(dtype, scaleDtype,
                {a, loomrt_consecutive_rows(rows, n), b, bBias, sum, scale,
                 bias, out, rows, n, float(eps), rms});
}

//--- Fused attention (runtime/cuda/FusedAttention.cuh) ---------------------
/// Whether this device gives a block the fused attention's shared memory,
/// asking for it once per kernel (the first call runs before any capture).
template <int Dtype> bool fusedAttentionFits() {
  static const bool fits = [] {
    int device = 0, optIn = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                               device) != cudaSuccess ||
        size_t(optIn) < kAttentionSharedBytes)
      return false;
    check(cudaFuncSetAttribute(fusedAttentionKernel<Dtype>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(kAttentionSharedBytes)),
          "fused attention's shared memory");
    return true;
  }();
  return fits;
}

/// The mma.sync kernel is built for three blocks an SM (its launch bounds);
/// they need 138,240 bytes of shared memory, so the SM's split between L1
/// and shared memory is asked, once per kernel, to favour shared memory
/// (left to itself the driver may configure too little and run two).
/// So is the wgmma kernel (three blocks need 125,952 bytes).
template <auto Kernel> void preferSharedMemory() {
  static const bool asked = [] {
    check(cudaFuncSetAttribute(Kernel,
                               cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared)),
          "fused attention's shared memory carveout");
    return true;
  }();
  (void)asked;
}

template <int Dtype>
bool launchFusedAttention(Device &d, const void *q, const void *k,
                          const void *v, void *out, int64_t outer,
                          int64_t inner, int64_t s, int64_t t, int64_t e,
                          int64_t f, const AttentionStrides &at, int causal,
                          double scale) {
  const void *bases[4] = {q, k, v, out};
  bool packs = fusedAttentionPacks(bases, at, e, f);
  dim3 grid(unsigned(outer * inner), unsigned((s + kTile - 1) / kTile));
  bool twoTerms = twoAttentionTerms();
  if (Dtype == LOOMRT_BF16 && wgmmaAttention() && !packs) {
    static bool told = false;
    if (!told)
      fprintf(stderr,
              "loom: note: LOOMRT_ATTENTION=wgmma takes 64-wide heads in "
              "16-byte aligned rows; attention with heads of %lld and %lld "
              "runs on the mma.sync kernel\n",
              (long long)e, (long long)f);
    told = true;
  }
  if (Dtype == LOOMRT_BF16 && packs && wgmmaAttention()) {
    static bool told = false;
    if (!told)
      fprintf(stderr, "loom: note: bf16 attention on Hopper's warpgroup "
                      "products (LOOMRT_ATTENTION=wgmma, an experiment)\n");
    told = true;
    // 41,984 bytes of shared memory: within what a block gets unasked.
    auto kernel =
        twoTerms ? wgmmaAttentionKernel<2> : wgmmaAttentionKernel<kSplitTerms>;
    if (twoTerms)
      preferSharedMemory<wgmmaAttentionKernel<2>>();
    else
      preferSharedMemory<wgmmaAttentionKernel<kSplitTerms>>();
    kernel<<<grid, kAttentionThreads, kWgmmaSharedBytes, d.stream>>>(
        static_cast<const uint16_t *>(q), static_cast<const uint16_t *>(k),
        static_cast<const uint16_t *>(v), static_cast<uint16_t *>(out), inner,
        s, t, int(e), int(f), at, causal, log2Scale(scale));
    check(cudaGetLastError(), "fused attention");
    return true;
  }
  if (Dtype == LOOMRT_BF16 && !wmmaAttention()) {
    // 46,080 bytes of shared memory: within what a block gets unasked.
    // (Also LOOMRT_ATTENTION=wgmma's kernel for heads it does not take.)
    auto kernel =
        twoTerms ? mmaAttentionKernel<2> : mmaAttentionKernel<kSplitTerms>;
    if (twoTerms)
      preferSharedMemory<mmaAttentionKernel<2>>();
    else
      preferSharedMemory<mmaAttentionKernel<kSplitTerms>>();
    kernel<<<grid, kAttentionThreads, kMmaSharedBytes, d.stream>>>(
        static_cast<const uint16_t *>(q), static_cast<const uint16_t *>(k),
        static_cast<const uint16_t *>(v), static_cast<uint16_t *>(out), inner,
        s, t, int(e), int(f), at, causal, log2Scale(scale), packs);
    check(cudaGetLastError(), "fused attention");
    return true;
  }
  if (!fusedAttentionFits<Dtype>())
    return false;
  fusedAttentionKernel<Dtype>
      <<<grid, kAttentionThreads, kAttentionSharedBytes, d.stream>>>(
          static_cast<const uint16_t *>(q), static_cast<const uint16_t *>(k),
          static_cast<const uint16_t *>(v), static_cast<uint16_t *>(out), inner,
          s, t, int(e), int(f), at, causal, float(scale), packs);
  check(cudaGetLastError(), "fused attention");
  return true;
}

/// Whether a strided attention operand is contiguous [outer, inner, rows,
/// cols] already.
bool denseAttention(const loomrt_attention_strides &at, int64_t outer,
                    int64_t inner, int64_t rows, int64_t cols) {
  return at.row == cols && (inner == 1 || at.inner == rows * cols) &&
         (outer == 1 || at.outer == inner * rows * cols);
}

/// A strided attention operand as a contiguous [outer, inner, rows, cols]
/// copy in scratch `slot` (in its own type), or the operand itself when it
/// is contiguous already.
const void *denseAttentionOperand(int dtype, const void *data,
                                  const loomrt_attention_strides &at,
                                  int64_t outer, int64_t inner, int64_t rows,
                                  int64_t cols, int slot) {
  if (denseAttention(at, outer, inner, rows, cols))
    return data;
  loomrt_view view = {
      4, {outer, inner, rows, cols}, {at.outer, at.inner, at.row, 1}};
  loomrt_view none = {0, {}, {}};
  int64_t count = outer * inner * rows * cols;
  void *dense = scratch(slot, size_t(count) * elementBytes(dtype));
  packKernel<<<blocksFor(count), 256, 0, device().stream>>>(
      dtype, data, toView(view), toView(none), 1, dtype, dense, count);
  check(cudaGetLastError(), "packing an attention operand");
  return dense;
}

extern "C" void loomrt_attention(int dtype, const void *q, const void *k,
                                 const void *v, void *out, int64_t outer,
                                 int64_t inner, int64_t s, int64_t t, int64_t e,
                                 int64_t f,
                                 const loomrt_attention_strides strides[4],
                                 int causal, double scale) {
  Device &d = device();
  int64_t batch = outer * inner;
  AttentionStrides at;
  for (int i = 0; i < 4; ++i) {
    at.outer[i] = strides[i].outer;
    at.inner[i] = strides[i].inner;
    at.row[i] = strides[i].row;
  }
  const int64_t queryTiles = (s + kTile - 1) / kTile;
  if (fastKernels() && e <= kHead && f <= kHead && queryTiles <= 65535 &&
      batch < (int64_t(1) << 31) && s > 0 &&
      t > 0) {
    if (dtype == LOOMRT_BF16 &&
        launchFusedAttention<LOOMRT_BF16>(d, q, k, v, out, outer, inner, s, t,
                                          e, f, at, causal, scale))
      return;
    if (dtype == LOOMRT_F16 &&
        launchFusedAttention<LOOMRT_F16>(d, q, k, v, out, outer, inner, s, t, e,
                                         f, at, causal, scale))
      return;
  }
  // The batched GEMMs below read contiguous operands.
  q = denseAttentionOperand(dtype, q, strides[0], outer, inner, s, e, 6);
  k = denseAttentionOperand(dtype, k, strides[1], outer, inner, t, e, 7);
  v = denseAttentionOperand(dtype, v, strides[2], outer, inner, t, f, 8);
  // scores[b] = scale * q[b] k[b]^T in f32 (row-major S x T): in cuBLAS's
  // column-major terms, scores^T = k q^T.
  float *scores = static_cast<float *>(scratch(3, size_t(batch * s * t) * 4));
  float alpha = float(scale), beta = 0.0f;
  check(cublasGemmStridedBatchedEx(
            d.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(t), int(s), int(e), &alpha, k,
            cudaType(dtype), int(e), t * e, q, cudaType(dtype), int(e), s * e,
            &beta, scores, CUDA_R_32F, int(t), s * t, int(batch),
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "attention scores");
  if (packable(LOOMRT_F32, t, true, {scores}))
    attentionSoftmaxVecKernel<<<blocksFor(batch * s, 1), 256, 0, d.stream>>>(
        scores, batch * s, s, t, causal);
  else
    attentionSoftmaxKernel<<<blocksFor(batch * s, 1), 256, 0, d.stream>>>(
        scores, batch * s, s, t, causal);
  check(cudaGetLastError(), "attention softmax");
  // out = p v in f32 (v widened so the probabilities keep f32), rounded once.
  const float *values = static_cast<const float *>(v);
  if (dtype != LOOMRT_F32) {
    float *wide = static_cast<float *>(scratch(4, size_t(batch * t * f) * 4));
    convertKernel<<<blocksFor(batch * t * f), 256, 0, d.stream>>>(
        dtype, v, LOOMRT_F32, wide, batch * t * f);
    values = wide;
  }
  // The result in f32, contiguous, then rounded once into out's layout.
  const loomrt_attention_strides &o = strides[3];
  bool outDense = denseAttention(o, outer, inner, s, f);
  float *result =
      dtype == LOOMRT_F32 && outDense
          ? static_cast<float *>(out)
          : static_cast<float *>(scratch(5, size_t(batch * s * f) * 4));
  alpha = 1.0f;
  check(cublasGemmStridedBatchedEx(
            d.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(f), int(s), int(t), &alpha,
            values, CUDA_R_32F, int(f), t * f, scores, CUDA_R_32F, int(t),
            s * t, &beta, result, CUDA_R_32F, int(f), s * f, int(batch),
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "attention values");
  if (!outDense) {
    loomrt_view view = {4, {outer, inner, s, f}, {o.outer, o.inner, o.row, 1}};
    scatterKernel<<<blocksFor(batch * s * f), 256, 0, d.stream>>>(
        result, dtype, out, toView(view), batch * s * f);
    check(cudaGetLastError(), "attention output");
  } else if (dtype != LOOMRT_F32) {
    convertKernel<<<blocksFor(batch * s * f), 256, 0, d.stream>>>(
        LOOMRT_F32, result, dtype, out, batch * s * f);
    check(cudaGetLastError(), "attention output");
  }
}

extern "C" void loomrt_embedding(int idsDtype, const void *ids, int64_t count,
                                 int dtype, const void *table, int64_t rows,
                                 int64_t width, int64_t vocabStart, void *out) {
  const int64_t rowBytes = width * elementBytes(dtype),
                packs = count * (rowBytes / 16);
  if (fastKernels() && rowBytes % 16 == 0 && aligned16(table) &&
      aligned16(out) && packs < (int64_t(1) << 31))
    embeddingPackKernel<<<blocksFor(packs), 256, 0, device().stream>>>(
        idsDtype, ids, int32_t(packs), int32_t(rowBytes / 16),
        static_cast<const uint4 *>(table), rows, vocabStart,
        static_cast<uint4 *>(out));
  else
    embeddingKernel<<<blocksFor(count * width), 256, 0, device().stream>>>(
        idsDtype, ids, count, dtype, table, rows, width, vocabStart, out);
  check(cudaGetLastError(), "embedding");
}

extern "C" void loomrt_pick(loomrt_ctx *rt, const char *site, int dtype,
                            const void *logits, int64_t count, int64_t vocab,
                            int targetsDtype, const void *targets,
                            int64_t vocabStart, int64_t vocabTotal,
                            float *out) {
  unsigned long long *flag = badFlag();
  pickKernel<<<blocksFor(count), 256, 0, device().stream>>>(
      dtype, logits, count, vocab, targetsDtype, targets, vocabStart,
      vocabTotal, out, flag);
  check(cudaGetLastError(), "pick");
  checkTargets(rt, site, flag, targets, targetsDtype, vocabTotal);
}

/// One block of a cross-entropy's logits ([rows, count], columns from
/// `start` of this rank's piece), each row by a warp or a block
/// (warpPerRow): the row's statistics over the block (as
/// softmaxStatsKernel with `partial`) and its target's logit, merged into
/// the row's running ones (mergeLogitsBlock), so that a block costs its
/// GEMM and this one launch. A target outside the vocabulary sets *bad to
/// its position + 1 (checked after the step).
template <int Dtype, int Lanes>
__global__ void logitsBlockKernel(const void *logits, int64_t rows,
                                  int64_t count, bool packs, int64_t start,
                                  int targetsDtype, const void *targets,
                                  int64_t vocabStart, int64_t vocabTotal,
                                  float *max, float *sum, float *picked,
                                  unsigned long long *bad) {
  forEachRowStats<Dtype, Lanes>(
      logits, rows, count, packs, [&](int64_t r, SoftmaxStats stats) {
        int64_t target = loadInt(targetsDtype, targets, r);
        if (start == 0 && (target < 0 || target >= vocabTotal))
          atomicMin(bad, (unsigned long long)(r + 1));
        int64_t column = target - vocabStart - start;
        float mine = column >= 0 && column < count
                         ? load(Dtype, logits, r * count + column)
                         : 0.0f;
        mergeLogitsBlock(&max[r], &sum[r], &picked[r], stats.max, stats.sum,
                         mine, start == 0);
      });
}

template <int Dtype> struct LaunchLogitsBlock {
  static void run(const void *logits, int64_t rows, int64_t count,
                  bool packs, int64_t start, int targetsDtype,
                  const void *targets, int64_t vocabStart,
                  int64_t vocabTotal, float *max, float *sum, float *picked,
                  unsigned long long *bad) {
    launchRows(rows, logitsBlockKernel<Dtype, kWarpRow>,
               logitsBlockKernel<Dtype, kBlockRow>, logits, rows, count, packs,
               start, targetsDtype, targets, vocabStart, vocabTotal, max, sum,
               picked, bad);
  }
};

__global__ void finishLogitsSumKernel(const float *max, float *sum,
                                      int64_t rows, int64_t vocab) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x)
    sum[r] = finalSum(SoftmaxStats{max[r], sum[r]}, vocab);
}

/// The ranks of this process, all on its one GPU (the loopback mode's), as
/// DeviceOps::bind was told.
std::atomic<int> ranksOnDevice{1};

/// A rank's bytes of logits a block (gpuLogitsBlockBytes of its share of
/// the device's memory: 1/64 of it). 24 MiB blocks, still in L2 when the
/// row statistics read them, lost on an H200: fewer, wider GEMMs and row
/// kernels count for more.
int64_t logitsBlockBytes() {
  static const int64_t bytes = [] {
    size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "the device's memory");
    return gpuLogitsBlockBytes(int64_t(total) / ranksOnDevice.load());
  }();
  return bytes;
}

extern "C" void loomrt_logits_stats(loomrt_ctx *rt, const char *site,
                                    const loomrt_contraction *c, const void *a,
                                    const void *b, int targetsDtype,
                                    const void *targets, int64_t vocabStart,
                                    int64_t vocabTotal, int partial,
                                    float *max, float *sum, float *picked) {
  LogitsBlocks blocks(*c, logitsBlockBytes(), logitsColumnsAsked(rt));
  int64_t rows = blocks.rows;
  cudaStream_t stream = device().stream;
  void *block = scratch(
      6,
      size_t(std::max<int64_t>(blocks.blockElements(), 1)) *
          elementBytes(c->out_dtype),
      "a block of logits",
      format("; LOOMRT_LOGITS_COLUMNS=N makes blocks of N columns (these "
             "are %lld of %lld)",
             (long long)blocks.columns, (long long)blocks.vocab));
  unsigned long long *bad = badFlag();
  blocks.forEach(*c, b, [&](const loomrt_contraction &part, const void *bPart,
                            int64_t start, int64_t count) {
    {
      ProfiledPart gemms(rt, "GEMMs");
      loomrt_contract(rt, &part, a, bPart, block);
    }
    ProfiledPart statistics(rt, "row statistics");
    forFloatType<LaunchLogitsBlock>(
        c->out_dtype, block, rows, count,
        packable(c->out_dtype, count, false, {block}), start, targetsDtype,
        targets, vocabStart, vocabTotal, max, sum, picked, bad);
    check(cudaGetLastError(), "logits statistics");
  });
  checkTargets(rt, site, bad, targets, targetsDtype, vocabTotal);
  if (!partial) {
    finishLogitsSumKernel<<<blocksFor(rows), 256, 0, stream>>>(max, sum, rows,
                                                               blocks.vocab);
    check(cudaGetLastError(), "logits statistics");
  }
}

template <int Dtype> struct LaunchCrossEntropy {
  static void run(const void *logits, int64_t rows, int64_t vocab, bool packs,
                  int targetsDtype, const void *targets, float *losses,
                  unsigned long long *bad) {
    launchRows(rows, crossEntropyRowsKernel<Dtype, kWarpRow>,
               crossEntropyRowsKernel<Dtype, kBlockRow>, logits, rows, vocab,
               packs, targetsDtype, targets, losses, bad);
  }
};

extern "C" void loomrt_cross_entropy(loomrt_ctx *rt, const char *site,
                                     int dtype, const void *logits,
                                     int64_t count, int64_t vocab,
                                     int targetsDtype, const void *targets,
                                     float *out) {
  cudaStream_t stream = device().stream;
  float *losses =
      static_cast<float *>(scratch(3, size_t(std::max<int64_t>(count, 1)) * 4));
  unsigned long long *flag = badFlag();
  forFloatType<LaunchCrossEntropy>(dtype, logits, count, vocab,
                                   packable(dtype, vocab, false, {logits}),
                                   targetsDtype, targets, losses, flag);
  check(cudaGetLastError(), "cross-entropy");
  checkTargets(rt, site, flag, targets, targetsDtype, vocab);
  // The mean over rows: one block sums the per-row losses.
  rowReduceKernel<<<1, 256, 0, stream>>>(
      LOOMRT_F32, LOOMRT_SUM, losses, loomrt_consecutive_rows(1, count), out, 1,
      count, count ? 1.0f / float(count) : NAN);
  check(cudaGetLastError(), "cross-entropy mean");
}

extern "C" void loomrt_transpose(int dtype, const void *in, void *out, int rank,
                                 const int64_t *shape, const int *perm) {
  int64_t permuted[LOOMRT_MAX_RANK], count = 1;
  for (int d = 0; d < rank; ++d) {
    permuted[d] = perm[d];
    count *= shape[d];
  }
  transposeKernel<<<blocksFor(count), 256, 0, device().stream>>>(
      elementBytes(dtype), static_cast<const char *>(in),
      static_cast<char *>(out), toShape(rank, shape), toShape(rank, permuted),
      count);
  check(cudaGetLastError(), "transpose");
}

extern "C" void loomrt_slice(int dtype, const void *in, void *out, int rank,
                             const int64_t *inShape, const int64_t *start,
                             const int64_t *outShape) {
  // A slice is a pack of a strided view.
  loomrt_view view;
  view.num_dims = rank;
  int64_t stride = 1, base = 0, count = 1;
  for (int d = rank - 1; d >= 0; --d) {
    view.size[d] = outShape[d];
    view.stride[d] = stride;
    base += start[d] * stride;
    stride *= inShape[d];
    count *= outShape[d];
  }
  loomrt_view none;
  none.num_dims = 0;
  size_t bytes = elementBytes(dtype);
  packKernel<<<blocksFor(count), 256, 0, device().stream>>>(
      dtype, static_cast<const char *>(in) + base * bytes, toView(view),
      toView(none), 1, dtype, out, count);
  check(cudaGetLastError(), "slice");
}

extern "C" void loomrt_extract(int dtype, const void *in, void *out,
                               int64_t outer, int64_t inDim, int64_t outDim,
                               int64_t start, int64_t inner) {
  blockCopyKernel<<<blocksFor(outer * outDim * inner), 256, 0,
                    device().stream>>>(
      elementBytes(dtype), static_cast<const char *>(in),
      static_cast<char *>(out), outer, inDim * inner, outDim * inner,
      start * inner, 0, outDim * inner);
  check(cudaGetLastError(), "extract");
}

extern "C" void loomrt_insert(int dtype, const void *in, void *out,
                              int64_t outer, int64_t inDim, int64_t outDim,
                              int64_t start, int64_t inner) {
  blockCopyKernel<<<blocksFor(outer * inDim * inner), 256, 0,
                    device().stream>>>(
      elementBytes(dtype), static_cast<const char *>(in),
      static_cast<char *>(out), outer, inDim * inner, outDim * inner, 0,
      start * inner, inDim * inner);
  check(cudaGetLastError(), "insert");
}

extern "C" void loomrt_copy_strided(int dtype, const void *in, void *out,
                                    int rank, const int64_t *shape,
                                    const int64_t *inStrides,
                                    const int64_t *outStrides) {
  loomrt_view from, to;
  from.num_dims = to.num_dims = rank;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    from.size[d] = to.size[d] = shape[d];
    from.stride[d] = inStrides[d];
    to.stride[d] = outStrides[d];
    count *= shape[d];
  }
  stridedCopyKernel<<<blocksFor(count), 256, 0, device().stream>>>(
      elementBytes(dtype), static_cast<const char *>(in), toView(from),
      static_cast<char *>(out), toView(to), count);
  check(cudaGetLastError(), "strided copy");
}

//===----------------------------------------------------------------------===//
// The loopback mode's operations: ranks are threads on one GPU
//===----------------------------------------------------------------------===//

namespace {

constexpr int kMaxLoopbackGroup = 64;
struct Inputs {
  const void *data[kMaxLoopbackGroup];
};

/// out[r][c] = reduction over p of inputs[p][r * inPitch + c], in rank order,
/// accumulated in f32 (int64 for integers) and rounded once.
__global__ void loopbackReduceKernel(int dtype, int reduction, Inputs inputs,
                                     int n, int64_t rows, int64_t columns,
                                     int64_t inPitch, void *out,
                                     int64_t outPitch) {
  int64_t count = rows * columns;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / columns, c = i % columns, in = r * inPitch + c,
            o = r * outPitch + c;
    if (isInteger(dtype)) {
      int64_t acc = loadInt(dtype, inputs.data[0], in);
      for (int p = 1; p < n; ++p) {
        int64_t x = loadInt(dtype, inputs.data[p], in);
        acc = reduction == LOOMRT_MAX ? (x > acc ? x : acc) : acc + x;
      }
      storeInt(dtype, out, o, acc);
    } else {
      float acc = load(dtype, inputs.data[0], in);
      for (int p = 1; p < n; ++p) {
        float x = load(dtype, inputs.data[p], in);
        acc = reduction == LOOMRT_MAX ? (acc > x || acc != acc ? acc : x)
                                      : acc + x;
      }
      store(dtype, out, o, acc);
    }
  }
}

/// The staging and marks of the stream the rank issues on now.
Device::Staging &stagingOfStream(Device &d) {
  return d.communication && d.stream == d.communication ? d.communicationStaging
                                                        : d.staging;
}

void *loopbackStaging(int slot, size_t bytes) {
  Device &d = device();
  Device::Staging &set = stagingOfStream(d);
  if (set.buffers.size() <= size_t(slot)) {
    set.buffers.resize(size_t(slot) + 1, nullptr);
    set.bytes.resize(size_t(slot) + 1, 0);
  }
  if (set.bytes[slot] < bytes) {
    // This rank's stream waited for every peer's reads of the old buffer
    // (the second meeting of each collective): finishing it is enough.
    if (set.buffers[slot]) {
      check(cudaStreamSynchronize(d.stream), "waiting to grow staging");
      check(cudaFree(set.buffers[slot]), "freeing staging");
    }
    size_t grown = std::max(bytes, set.bytes[slot] * 2);
    check(cudaMalloc(&set.buffers[slot], grown), "allocating staging");
    set.bytes[slot] = grown;
  }
  return set.buffers[slot];
}

void *loopbackMark(int which) {
  Device &d = device();
  std::vector<cudaEvent_t> &marks = stagingOfStream(d).marks;
  if (marks.size() <= size_t(which))
    marks.resize(size_t(which) + 1, nullptr);
  if (!marks[which])
    check(cudaEventCreateWithFlags(&marks[which], cudaEventDisableTiming),
          "creating an event");
  check(cudaEventRecord(marks[which], d.stream), "recording an event");
  return marks[which];
}

void loopbackReduce(int dtype, int reduction, const void *const *inputs, int n,
                    int64_t rows, int64_t columns, int64_t inPitch, void *out,
                    int64_t outPitch) {
  if (n > kMaxLoopbackGroup)
    failProcess(format("loopback mode reduces over at most %d ranks, not %d",
                       kMaxLoopbackGroup, n),
                7);
  Inputs pointers;
  for (int p = 0; p < n; ++p)
    pointers.data[p] = inputs[p];
  loopbackReduceKernel<<<blocksFor(rows * columns), 256, 0, device().stream>>>(
      dtype, reduction, pointers, n, rows, columns, inPitch, out, outPitch);
  check(cudaGetLastError(), "a loopback reduction");
}

/// Started collectives run on the rank's communication stream: `stream`
/// is that stream from beginStarted to endStarted, so that every launch,
/// copy and NCCL call a collective makes goes there.
void beginStarted() {
  Device &d = device();
  if (!d.communication) {
    check(cudaStreamCreateWithFlags(&d.communication, cudaStreamNonBlocking),
          "creating the communication stream");
    check(cudaEventCreateWithFlags(&d.fork, cudaEventDisableTiming),
          "creating an event");
  }
  check(cudaEventRecord(d.fork, d.stream), "starting a collective");
  check(cudaStreamWaitEvent(d.communication, d.fork, 0),
        "starting a collective");
  d.compute = d.stream;
  d.stream = d.communication;
}

void endStarted(int future) {
  Device &d = device();
  cudaEvent_t &done = d.started[future];
  if (!done)
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
          "creating an event");
  check(cudaEventRecord(done, d.stream), "starting a collective");
  d.stream = d.compute;
}

void waitStarted(int future) {
  Device &d = device();
  check(cudaStreamWaitEvent(d.stream, d.started.at(future), 0),
        "waiting for a started collective");
}

const LoopbackOps kLoopbackOps = {
    loopbackStaging,
    loopbackMark,
    [](void *mark) {
      check(cudaStreamWaitEvent(device().stream, static_cast<cudaEvent_t>(mark),
                                0),
            "waiting for another rank");
    },
    loopbackReduce,
    [](void *dst, size_t dstPitch, const void *src, size_t srcPitch,
       size_t width, size_t rows) {
      // One block of bytes as a plain copy: cudaMemcpy2DAsync refuses
      // pitches over the device's limit (2 GiB), whatever the rows.
      if (rows == 1 || (dstPitch == width && srcPitch == width))
        check(cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDeviceToDevice,
                              device().stream),
              "copying between ranks");
      else
        check(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, rows,
                                cudaMemcpyDeviceToDevice, device().stream),
              "copying between ranks");
    },
    [](void *dst, size_t bytes) {
      check(cudaMemsetAsync(dst, 0, bytes, device().stream), "clearing");
    },
    [] { check(cudaStreamSynchronize(device().stream), "synchronising"); },
    [](int fromDtype, const void *in, int toDtype, void *out, int64_t count) {
      convertKernel<<<blocksFor(count), 256, 0, device().stream>>>(
          fromDtype, in, toDtype, out, count);
      check(cudaGetLastError(), "converting");
    }};

//===----------------------------------------------------------------------===//
// Steps: eager, or captured once and replayed as a CUDA graph
//===----------------------------------------------------------------------===//

struct StepGraph {
  cudaGraphExec_t exec = nullptr;
  bool failed = false;
};
StepGraph &stepGraph() {
  thread_local StepGraph graph;
  return graph;
}

/// NCCL work captured in a graph holds a reference on its communicator
/// until the graph is destroyed, and finalizing the communicator waits for
/// that, so the graph goes first (NCCL's CUDA graph notes).
void endSteps() {
  StepGraph &graph = stepGraph();
  if (!graph.exec)
    return;
  check(cudaStreamSynchronize(device().stream), "finishing the last step");
  check(cudaGraphExecDestroy(graph.exec), "releasing the step's graph");
  graph.exec = nullptr;
}

bool runStep(loomrt_ctx *rt, const loomrt_model *model, char *arena,
             bool useGraph) {
  StepGraph &graph = stepGraph();
  Device &d = device();
  if (useGraph && graph.exec) {
    check(cudaGraphLaunch(graph.exec, d.stream), "replaying the step");
    return true;
  }
  stepChecks().pending.clear();
  if (!useGraph || graph.failed) {
    runModelStep(rt, model, arena);
    // The program's own launches report their errors here (the runtime's
    // check theirs), so that a kernel that never ran cannot go unnoticed.
    check(cudaGetLastError(), "launching the step's kernels");
    return false;
  }
  // Capture: the step's host code runs once, its kernels, GEMMs and
  // collectives become the graph. Nothing in a step waits on the host (the
  // target checks are deferred), so capture fails only on a CUDA limit;
  // then the step runs as it is, now and from then on.
  check(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal),
        "capturing the step");
  runModelStep(rt, model, arena);
  cudaGraph_t captured = nullptr;
  cudaError_t status = cudaStreamEndCapture(d.stream, &captured);
  if (status == cudaSuccess)
    status = cudaGraphInstantiate(&graph.exec, captured, 0);
  if (captured)
    cudaGraphDestroy(captured);
  // NCCL needs every rank of a communicator to replay or every rank to
  // launch anew: one rank's failed capture makes them all run eagerly.
  bool everyoneCaptured =
      everyRank(rt, status == cudaSuccess, "agreeing on the captured step");
  if (status != cudaSuccess || !everyoneCaptured) {
    // An error of the capture (a call it does not take) is not the step's;
    // a launch that failed fails again below, and is reported then.
    cudaGetLastError();
    if (status != cudaSuccess)
      fprintf(stderr,
              "loom: note: the step could not be captured as a CUDA graph "
              "(%s); it runs without one\n",
              cudaGetErrorString(status));
    if (graph.exec)
      cudaGraphExecDestroy(graph.exec);
    graph.failed = true;
    graph.exec = nullptr;
    stepChecks().pending.clear();
    runModelStep(rt, model, arena);
    check(cudaGetLastError(), "launching the step's kernels");
    return false;
  }
  check(cudaGraphLaunch(graph.exec, d.stream), "running the captured step");
  return true;
}

//===----------------------------------------------------------------------===//
// --profile: events around kernels, and the device's peaks
//===----------------------------------------------------------------------===//

struct ProfileMarks {
  std::vector<cudaEvent_t> events;
  size_t used = 0;
};
ProfileMarks &profileMarks() {
  thread_local ProfileMarks marks;
  return marks;
}

uint64_t profileMark() {
  ProfileMarks &marks = profileMarks();
  if (marks.used == marks.events.size()) {
    cudaEvent_t event;
    check(cudaEventCreate(&event), "creating a profile event");
    marks.events.push_back(event);
  }
  check(cudaEventRecord(marks.events[marks.used], device().stream),
        "recording a profile event");
  return marks.used++;
}

double profileSeconds(uint64_t from, uint64_t to) {
  ProfileMarks &marks = profileMarks();
  float ms = 0;
  check(cudaEventElapsedTime(&ms, marks.events[from], marks.events[to]),
        "reading a profile event");
  return double(ms) * 1e-3;
}

/// Best of five: a 1 GiB device-to-device copy and an 8192^3 bf16 GEMM with
/// f32 accumulation (the tensor cores' rate for the programs' GEMMs).
void measurePeaks(double *bytesPerSecond, double *flopsPerSecond,
                  std::string *how) {
  Device &d = device();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "creating an event");
  check(cudaEventCreate(&stop), "creating an event");
  auto best = [&](auto &&work) {
    float fastest = 1e30f;
    for (int i = 0; i < 6; ++i) { // the first run warms up
      check(cudaEventRecord(start, d.stream), "timing");
      work();
      check(cudaEventRecord(stop, d.stream), "timing");
      check(cudaEventSynchronize(stop), "timing");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start, stop), "timing");
      if (i > 0)
        fastest = std::min(fastest, ms);
    }
    return double(fastest) * 1e-3;
  };
  size_t bytes = size_t(1) << 30;
  void *from = nullptr, *to = nullptr;
  check(cudaMalloc(&from, bytes), "allocating for the bandwidth test");
  check(cudaMalloc(&to, bytes), "allocating for the bandwidth test");
  double copy = best([&] {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, d.stream),
          "the bandwidth test");
  });
  *bytesPerSecond = 2.0 * double(bytes) / copy;
  const int64_t n = 8192;
  check(cudaMemsetAsync(from, 0, size_t(n * n * 4), d.stream), "clearing");
  char *base = static_cast<char *>(from);
  double product = best([&] {
    gemm(LOOMRT_BF16, base, base + n * n * 2, LOOMRT_BF16, to, 1, n, n, n);
  });
  *flopsPerSecond = 2.0 * double(n) * double(n) * double(n) / product;
  cudaFree(from);
  cudaFree(to);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *how = "a 1 GiB device-to-device copy; a bf16 8192^3 cuBLASLt GEMM";
}

} // namespace

bool loomrt::streamIsCapturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(device().stream, &status),
        "asking whether the stream is captured");
  return status != cudaStreamCaptureStatusNone;
}

const DeviceOps &loomrt::deviceOps() {
  static const DeviceOps ops = {
      "CUDA",
      false,
      [](loomrt_ctx *rt, int localIndex, int ranksInProcess) {
        ranksOnDevice = ranksInProcess;
        int devices = 0;
        cudaError_t counted = cudaGetDeviceCount(&devices);
        if (counted == cudaErrorNoDevice ||
            counted == cudaErrorInsufficientDriver ||
            (counted == cudaSuccess && devices == 0))
          failProcess(
              format("this machine has no GPU that CUDA can use (counting "
                     "GPUs: %s); the program was built by loomc "
                     "--target=cuda, and without that option it runs on the "
                     "CPU",
                     counted == cudaSuccess ? "none found"
                                            : cudaGetErrorString(counted)),
              7);
        check(counted, "counting GPUs");
        if (localIndex >= devices)
          abortJob(rt,
                   format("this machine has %d GPU(s), too few for a process "
                          "per rank (NCCL needs a GPU per rank); run every "
                          "rank on one GPU with --loopback",
                          devices),
                   2);
        check(cudaSetDevice(localIndex), "choosing the GPU");
      },
      [](char *, size_t bytes) -> char * {
        void *p = nullptr;
        check(cudaMalloc(&p, bytes ? bytes : 64),
              format("allocating the arena of %s (loomc --report's peak "
                     "memory)",
                     mib(double(bytes)).c_str())
                  .c_str());
        // On the step's stream, which the upload that follows is ordered
        // after (the legacy stream's work would not be).
        check(cudaMemsetAsync(p, 0, bytes ? bytes : 64, device().stream),
              "clearing the arena");
        return static_cast<char *>(p);
      },
      [](char *dst, const char *src, size_t bytes) {
        // On the step's stream, finished before the first step (a pageable
        // cudaMemcpy may return before its DMA is done).
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                              device().stream),
              "copying the arena in");
        check(cudaStreamSynchronize(device().stream), "copying the arena in");
      },
      [](char *dst, const char *src, size_t bytes) {
        check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost),
              "copying the arena out");
      },
      [] { check(cudaStreamSynchronize(device().stream), "running the step"); },
      [](char *deviceArena, char *) { cudaFree(deviceArena); },
      &kLoopbackOps,
      runStep,
      endSteps,
      checkStepTargets,
      profileMark,
      profileSeconds,
      [] { profileMarks().used = 0; },
      measurePeaks,
      beginStarted,
      endStarted,
      waitStarted};
  return ops;
}
