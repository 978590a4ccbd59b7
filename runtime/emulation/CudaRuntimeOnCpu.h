//===- CudaRuntimeOnCpu.h - CUDA's runtime and cuBLAS(Lt) on the host -*- C++
//-*-===//
//
// Part of the Loom project.
//
// The part of the CUDA runtime, cuBLAS and cuBLASLt that libloomrt's CUDA
// backend (runtime/cuda/Kernels.cu) and generated programs call, on host
// memory, so that runtime/tools/cuda-on-cpu.py's host translation of them
// runs without a GPU (kernels: CudaOnCpu.h). Device memory is host memory;
// streams run their work at once (eager) or only when something waits for
// it (lazy: LOOM_CUDA_ON_CPU_STREAMS, CudaOnCpu.h's streamModes), and while
// captured record it for the graph to run at each launch; events hold a
// time and the place of their record on its stream. GEMMs follow
// cuBLAS's column-major definition (operands widened exactly to f32, f32
// accumulation, the result rounded once), including cuBLASLt's matrix
// layouts with batch counts and strides. What has no effect here
// (alignment preferences, workspaces, math modes, device attributes) is
// accepted and ignored.
//
// This checks the backend's own logic: which kernels and GEMMs it runs on
// which pointers, shapes and strides, and in what order. It cannot check
// that the real libraries read the descriptors as this emulation does.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EMULATION_CUDARUNTIMEONCPU_H
#define LOOM_RUNTIME_EMULATION_CUDARUNTIMEONCPU_H

#include "CudaOnCpu.h"
#include "runtime/Elements.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

//--- Errors -----------------------------------------------------------------

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnjoined = 904,
};
inline const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorNoKernelImageForDevice:
    return "no kernel image is available for execution on the device";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnjoined:
    return "capture was not joined back to the original stream";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  default:
    return "emulated CUDA error";
  }
}
/// A launch's error (cuda_on_cpu::launch), reported once.
inline cudaError_t cudaGetLastError() {
  cudaError_t error = cudaError_t(cuda_on_cpu::launchError);
  cuda_on_cpu::launchError = 0;
  return error;
}

//--- Devices ----------------------------------------------------------------

enum cudaDeviceAttr {
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9
};
enum cudaSharedCarveout { cudaSharedmemCarveoutMaxShared = 100 };
/// One GPU, as the machines that lend one have, or
/// LOOM_CUDA_ON_CPU_GPUS=N (a rank per process needs a GPU each).
inline cudaError_t cudaGetDeviceCount(int *count) {
  const char *gpus = std::getenv("LOOM_CUDA_ON_CPU_GPUS");
  *count = gpus ? std::atoi(gpus) : 1;
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}
inline int &currentDevice() {
  static thread_local int device = 0;
  return device;
}
inline cudaError_t cudaSetDevice(int device) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (device < 0 || device >= count)
    return cudaErrorInvalidDevice;
  currentDevice() = device;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice();
  return cudaSuccess;
}
/// An H100's or H200's: compute capability 9.0 (LOOM_CUDA_ON_CPU_CAPABILITY=
/// M.N plays another GPU's: cuda_on_cpu::capability), 227 KB of opt-in
/// shared memory.
inline cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute,
                                          int) {
  const std::pair<int, int> capability = cuda_on_cpu::capability();
  switch (attribute) {
  case cudaDevAttrComputeCapabilityMajor:
    *value = capability.first;
    break;
  case cudaDevAttrComputeCapabilityMinor:
    *value = capability.second;
    break;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = 227 * 1024;
    break;
  }
  return cudaSuccess;
}
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int) {
  return cudaSuccess;
}

//--- Memory -----------------------------------------------------------------

enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
namespace cuda_on_cpu {
/// The device's memory: an H200's 143,771 MiB, or
/// LOOM_CUDA_ON_CPU_MEMORY_MIB's, for the runtime's handling of a full GPU.
inline size_t deviceMemory() {
  static const size_t bytes = [] {
    const char *text = std::getenv("LOOM_CUDA_ON_CPU_MEMORY_MIB");
    unsigned long long mib = 143771;
    char end = 0;
    if (text && (*text < '0' || *text > '9' ||
                 std::sscanf(text, "%llu%c", &mib, &end) != 1 || mib == 0 ||
                 mib > (1ull << 40))) {
      std::fprintf(stderr,
                   "cuda_on_cpu: LOOM_CUDA_ON_CPU_MEMORY_MIB must be a "
                   "positive number of MiB, not '%s'\n",
                   text);
      std::abort();
    }
    return size_t(mib) << 20;
  }();
  return bytes;
}
/// The bytes of each allocation, and their sum.
struct Allocations {
  std::mutex mutex;
  std::unordered_map<void *, size_t> bytes;
  size_t used = 0;
};
inline Allocations &allocations() {
  static Allocations allocations;
  return allocations;
}
} // namespace cuda_on_cpu

inline cudaError_t cudaMalloc(void **p, size_t bytes) {
  cuda_on_cpu::Allocations &a = cuda_on_cpu::allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  *p = nullptr;
  if (bytes > cuda_on_cpu::deviceMemory() - a.used)
    return cudaErrorMemoryAllocation;
  // Poisoned, as device memory is not cleared.
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!*p)
    return cudaErrorMemoryAllocation;
  std::memset(*p, 0xa5, bytes);
  a.bytes[*p] = bytes;
  a.used += bytes;
  return cudaSuccess;
}
template <typename T> cudaError_t cudaMalloc(T **p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
/// CUDA's cudaFree waits for the device's work, which lazy streams may
/// still hold.
inline cudaError_t cudaFree(void *p) {
  if (!p)
    return cudaSuccess;
  if (cuda_on_cpu::anyLazyStream())
    cuda_on_cpu::settleThread();
  for (cuda_on_cpu::Stream *stream : cuda_on_cpu::streamsOfThread())
    cuda_on_cpu::noteSynchronized(stream);
  cuda_on_cpu::Allocations &a = cuda_on_cpu::allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto found = a.bytes.find(p);
  if (found == a.bytes.end())
    return cudaErrorInvalidValue;
  a.used -= found->second;
  a.bytes.erase(found);
  std::free(p);
  return cudaSuccess;
}
/// The device's memory (cuda_on_cpu::deviceMemory) and what cudaMalloc has
/// not handed out.
inline cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
  cuda_on_cpu::Allocations &a = cuda_on_cpu::allocations();
  std::lock_guard<std::mutex> lock(a.mutex);
  *total = cuda_on_cpu::deviceMemory();
  *free = *total - a.used;
  return cudaSuccess;
}

using cudaStream_t = cuda_on_cpu::Stream *;
using dim3 = cuda_on_cpu::Dim3;
enum { cudaStreamNonBlocking = 1 };

inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                              cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
/// With lazy streams, a copy from host memory reads it at once and a copy
/// to host memory returns once it is done, as CUDA's from and to pageable
/// memory do (the emulation has no pinned memory).
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                   cudaMemcpyKind kind,
                                   cudaStream_t stream = {}) {
  bool lazy = stream && stream->lazy;
  if (lazy && kind == cudaMemcpyHostToDevice &&
      !cuda_on_cpu::captureOf(stream)) {
    auto staged = std::make_shared<std::vector<char>>(
        static_cast<const char *>(src), static_cast<const char *>(src) + bytes);
    cuda_on_cpu::enqueue(stream,
                         [=] { std::memmove(dst, staged->data(), bytes); });
    return cudaSuccess;
  }
  cuda_on_cpu::enqueue(stream, [=] { std::memmove(dst, src, bytes); });
  if (kind == cudaMemcpyDeviceToHost && stream &&
      !cuda_on_cpu::captureOf(stream)) {
    if (lazy)
      cuda_on_cpu::settle(stream);
    cuda_on_cpu::noteSynchronized(stream);
  }
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                                   cudaStream_t stream = {}) {
  cuda_on_cpu::enqueue(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                     size_t spitch, size_t width, size_t height,
                                     cudaMemcpyKind, cudaStream_t stream = {}) {
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidValue;
  cuda_on_cpu::enqueue(stream, [=] {
    for (size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char *>(dst) + row * dpitch,
                   static_cast<const char *>(src) + row * spitch, width);
  });
  return cudaSuccess;
}

//--- Streams, events, graphs ------------------------------------------------

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  cuda_on_cpu::StreamsLock lock;
  *stream = new cuda_on_cpu::Stream;
  std::vector<cuda_on_cpu::Stream *> &streams = cuda_on_cpu::streamsOfThread();
  const cuda_on_cpu::StreamModes &modes = cuda_on_cpu::streamModes();
  (*stream)->lazy =
      modes.allLazy || std::find(modes.lazy.begin(), modes.lazy.end(),
                                 int(streams.size())) != modes.lazy.end();
  streams.push_back(*stream);
  cuda_on_cpu::LiveStreams::add(*stream);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  cuda_on_cpu::StreamsLock lock;
  cuda_on_cpu::settle(stream);
  std::vector<cuda_on_cpu::Stream *> &streams = cuda_on_cpu::streamsOfThread();
  streams.erase(std::remove(streams.begin(), streams.end(), stream),
                streams.end());
  cuda_on_cpu::LiveStreams::remove(stream);
  delete stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cuda_on_cpu::StreamsLock lock;
  cuda_on_cpu::settle(stream);
  cuda_on_cpu::noteSynchronized(stream);
  return cudaSuccess;
}

/// `done` is set when the work before the event's record has run: at once,
/// or, behind deferred work, when the stream settles (read by other
/// threads, such as a watchdog polling cudaEventQuery).
struct EmulatedEvent {
  std::chrono::steady_clock::time_point when;
  std::atomic<bool> done{true};
  /// Which record it is (an event recorded again before the last record
  /// ran is done only when the new one runs).
  uint64_t records = 0;
  /// What its last record left for the waits and synchronisations that
  /// follow it.
  struct Record {
    /// The last record outside a capture: the stream and its place there.
    cuda_on_cpu::Stream *stream = nullptr;
    uint64_t place = 0;
    /// The capture that recorded it (last), if any: a stream that waits for
    /// it joins that capture.
    cuda_on_cpu::Stream *capture = nullptr;
    /// Recorded during a capture: its record's piece there.
    long capturedAt = -1;
    /// Recorded on a stream that joined a capture: that stream, and its
    /// forked work then (all of it, if the capturing stream waits for this).
    cuda_on_cpu::Stream *fork = nullptr;
    uint64_t forkedWork = 0;
  };
  /// Behind a lock of the event's own: in loopback mode with eager streams
  /// (which take no lock) a rank waits for events that its peers record
  /// again.
  Record lastRecord() {
    std::lock_guard<std::mutex> lock(recordMutex);
    return last;
  }
  template <typename Change> void changeRecord(Change change) {
    std::lock_guard<std::mutex> lock(recordMutex);
    change(last);
  }

private:
  std::mutex recordMutex;
  Record last;
};
using cudaEvent_t = EmulatedEvent *;
enum { cudaEventDefault = 0, cudaEventDisableTiming = 2 };
inline cudaError_t cudaEventCreate(cudaEvent_t *event) {
  *event = new EmulatedEvent;
  return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned) {
  return cudaEventCreate(event);
}
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t event,
                                   cudaStream_t stream = {}) {
  cuda_on_cpu::StreamsLock lock;
  auto record = [=] {
    event->when = std::chrono::steady_clock::now();
    event->done = true;
  };
  cuda_on_cpu::Stream *capture = cuda_on_cpu::captureOf(stream);
  cuda_on_cpu::Stream *fork = capture && capture != stream ? stream : nullptr;
  if (stream && !capture && (stream->lazy || !stream->deferred.empty())) {
    uint64_t which = ++event->records;
    event->done = false;
    uint64_t place = cuda_on_cpu::enqueueDeferred(stream, [event, which] {
      if (event->records != which)
        return; // recorded again since
      event->when = std::chrono::steady_clock::now();
      event->done = true;
    });
    event->changeRecord([&](EmulatedEvent::Record &last) {
      last.stream = stream;
      last.place = place;
      last.capture = last.fork = nullptr;
    });
    return cudaSuccess;
  }
  // Before the work: a peer may wait for it at once.
  event->changeRecord([&](EmulatedEvent::Record &last) {
    last.capture = capture;
    last.fork = fork;
    if (capture) {
      last.capturedAt = long(capture->recorded.size());
    } else if (stream) {
      // Its place, for what a wait for it orders (cuda_on_cpu::ordered).
      last.stream = stream;
      last.place = stream->issued;
    }
  });
  cuda_on_cpu::enqueue(stream, record);
  if (fork)
    event->changeRecord([&](EmulatedEvent::Record &last) {
      last.forkedWork = stream->forkedWork;
    });
  return cudaSuccess;
}
namespace cuda_on_cpu {
/// Runs the work before the event's last record, if it has not run.
inline void settleEvent(cudaEvent_t event) {
  StreamsLock lock;
  if (!event->done) {
    EmulatedEvent::Record last = event->lastRecord();
    settleTo(last.stream, last.place + 1);
  }
}
} // namespace cuda_on_cpu
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  cuda_on_cpu::StreamsLock lock;
  cuda_on_cpu::settleEvent(event);
  EmulatedEvent::Record last = event->lastRecord();
  if (!last.capture)
    cuda_on_cpu::noteObserved(last.stream, last.place + 1);
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event->done ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                        cudaEvent_t stop) {
  *ms = std::chrono::duration<float, std::milli>(stop->when - start->when)
            .count();
  return cudaSuccess;
}
/// For an eager stream the host waits for the event (running the work
/// before it, if lazy, on this thread). A lazy stream's later work waits
/// for the event's work instead: that runs when the stream's work reaches
/// the wait, on whichever thread runs it (the event may be another
/// thread's, as the loopback mode's ranks wait for each other's). Waiting
/// for an event recorded during a capture joins the capture instead.
inline cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                       unsigned = 0) {
  cuda_on_cpu::StreamsLock lock;
  EmulatedEvent::Record last = event->lastRecord();
  if (last.capture && last.capture->capturing) {
    cuda_on_cpu::Stream *capture = last.capture;
    if (stream && stream != capture && !stream->capturing) {
      // A fork: this stream's work is the capture's from now on.
      stream->joined = capture;
      if (std::find(capture->forks.begin(), capture->forks.end(), stream) ==
          capture->forks.end())
        capture->forks.push_back(stream);
    } else if (stream == capture && last.fork &&
               last.fork->forkedWork == last.forkedWork) {
      // A join: the capturing stream waits for all the fork's work so far.
      last.fork->joinedBack = last.forkedWork;
    }
    // Kept for a replay onto lazy streams (cudaGraphLaunch).
    if (stream && (stream == capture || !stream->capturing))
      capture->recorded.push_back({stream, {}, last.capturedAt});
    return cudaSuccess;
  }
  if (stream && stream->lazy && !cuda_on_cpu::captureOf(stream)) {
    if (!last.capture)
      cuda_on_cpu::noteWait(stream, last.stream, last.place + 1);
    if (!event->done && last.stream != stream)
      cuda_on_cpu::deferWaitFor(stream, last.stream, last.place + 1);
    return cudaSuccess;
  }
  // The host runs the work before the event; on a GPU only this stream
  // would wait for it.
  if (!last.capture && !cuda_on_cpu::captureOf(stream))
    cuda_on_cpu::noteWait(stream, last.stream, last.place + 1);
  cuda_on_cpu::settleEvent(event);
  return cudaSuccess;
}

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone,
  cudaStreamCaptureStatusActive
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal,
  cudaStreamCaptureModeThreadLocal,
  cudaStreamCaptureModeRelaxed
};
/// A captured graph: its pieces in the order they were issued, and the
/// stream that captured them (whose pieces run on the stream it is
/// launched on).
struct EmulatedGraph {
  std::vector<cuda_on_cpu::Captured> work;
  cuda_on_cpu::Stream *captured = nullptr;
};
using cudaGraph_t = EmulatedGraph *;
using cudaGraphExec_t = EmulatedGraph *;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                          cudaStreamCaptureMode) {
  if (!stream || stream->capturing)
    return cudaErrorInvalidValue;
  stream->capturing = true;
  stream->recorded.clear();
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t stream,
                                        cudaGraph_t *graph) {
  if (!stream || !stream->capturing)
    return cudaErrorInvalidValue;
  stream->capturing = false;
  bool unjoined = false;
  for (cuda_on_cpu::Stream *fork : stream->forks) {
    unjoined |= fork->forkedWork != fork->joinedBack;
    fork->joined = nullptr;
    fork->forkedWork = fork->joinedBack = 0;
  }
  stream->forks.clear();
  if (unjoined) {
    stream->captureInvalidated = false;
    stream->recorded.clear();
    *graph = nullptr;
    return cudaErrorStreamCaptureUnjoined;
  }
  if (stream->captureInvalidated) {
    stream->captureInvalidated = false;
    stream->recorded.clear();
    *graph = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = new EmulatedGraph{std::move(stream->recorded), stream};
  stream->recorded.clear();
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                         cudaStreamCaptureStatus *status) {
  *status = cuda_on_cpu::captureOf(stream) ? cudaStreamCaptureStatusActive
                                           : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec,
                                        cudaGraph_t graph,
                                        unsigned long long = 0) {
  *exec = new EmulatedGraph(*graph);
  return cudaSuccess;
}
/// The graph runs after the host has moved on, as on a GPU: a graph holding
/// NCCL's work may wait for other processes, and the host must be free to
/// watch it (runtime/cuda/Nccl.cpp's watchdog). With lazy streams its
/// pieces go back onto the streams that issued them (the capturing one's
/// onto `stream`), each stream's waits for another's pieces kept as lazy
/// waits, so that a replay runs as late as a launch anew would; otherwise
/// it runs as one piece of work, in the order it was captured.
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!cuda_on_cpu::anyLazyStream() || !stream) {
    cuda_on_cpu::enqueueDeferred(stream, [exec] {
      for (const cuda_on_cpu::Captured &piece : exec->work)
        if (piece.work)
          piece.work();
    });
    return cudaSuccess;
  }
  cuda_on_cpu::StreamsLock lock;
  // Where each piece went: its stream and its place there.
  std::vector<std::pair<cuda_on_cpu::Stream *, uint64_t>> placed(
      exec->work.size(), {nullptr, 0});
  for (size_t i = 0; i < exec->work.size(); ++i) {
    const cuda_on_cpu::Captured &piece = exec->work[i];
    cuda_on_cpu::Stream *target =
        piece.origin == exec->captured ? stream : piece.origin;
    if (piece.work) {
      placed[i] = {target, cuda_on_cpu::enqueueDeferred(target, piece.work)};
      continue;
    }
    if (piece.waitsFor < 0 || size_t(piece.waitsFor) >= i)
      continue;
    auto [source, place] = placed[size_t(piece.waitsFor)];
    if (!source || source == target)
      continue;
    cuda_on_cpu::noteWait(target, source, place + 1);
    cuda_on_cpu::deferWaitFor(target, source, place + 1);
  }
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

//--- Device atomics used by the kernels -------------------------------------

inline unsigned long long atomicMin(unsigned long long *address,
                                    unsigned long long value) {
  unsigned long long old = *address; // fibers of one thread: no race
  if (value < old)
    *address = value;
  return old;
}

//--- cuBLAS and cuBLASLt ------------------------------------------------------

enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
using cudaDataType_t = cudaDataType;
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0 };

namespace cuda_on_cpu {

inline int loomDtype(cudaDataType type) {
  return type == CUDA_R_32F    ? LOOMRT_F32
         : type == CUDA_R_16BF ? LOOMRT_BF16
                               : LOOMRT_F16;
}
inline float loadElement(cudaDataType type, const void *base, int64_t i) {
  return loomrt::load(loomDtype(type), base, i);
}
inline void storeElement(cudaDataType type, void *base, int64_t i,
                         float value) {
  loomrt::store(loomDtype(type), base, i, value);
}

/// D = alpha op(A) op(B) + beta C, column-major, `batch` times at the given
/// element strides; A is stored `aRows` x `aCols` with leading dimension
/// lda, and so on. op(A) is m x k, op(B) k x n.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, cudaDataType aType, const void *a, int64_t lda,
                 int64_t strideA, cudaDataType bType, const void *b,
                 int64_t ldb, int64_t strideB, float beta, cudaDataType cType,
                 const void *c, int64_t ldc, int64_t strideC,
                 cudaDataType dType, void *d, int64_t ldd, int64_t strideD,
                 int64_t batch, bool reversed = false,
                 const void *bias = nullptr, bool gelu = false) {
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int64_t step = 0; step < k; ++step) {
          int64_t l = reversed ? k - 1 - step : step;
          float x = loadElement(
              aType, a, e * strideA + (transA ? i * lda + l : l * lda + i));
          float y = loadElement(
              bType, b, e * strideB + (transB ? l * ldb + j : j * ldb + l));
          acc += x * y;
        }
        float result = alpha * acc;
        if (beta != 0.0f)
          result += beta * loadElement(cType, c, e * strideC + j * ldc + i);
        // BIAS and GELU_BIAS: the bias (D's type) of row i, then the tanh
        // GELU, in f32 before D is rounded.
        if (bias)
          result += loadElement(dType, bias, i);
        if (gelu)
          result = 0.5f * result *
                   (1.0f +
                    std::tanh(0.79788456080286536f *
                              (result + 0.044715f * result * result * result)));
        storeElement(dType, d, e * strideD + j * ldd + i, result);
      }
}

} // namespace cuda_on_cpu

struct EmulatedBlas {
  cudaStream_t stream = nullptr;
};
using cublasHandle_t = EmulatedBlas *;
inline cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  *handle = new EmulatedBlas;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t handle,
                                      cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *a, cudaDataType aType,
    int lda, long long strideA, const void *b, cudaDataType bType, int ldb,
    long long strideB, const void *beta, void *c, cudaDataType cType, int ldc,
    long long strideC, int batch, cublasComputeType_t, cublasGemmAlgo_t) {
  float alphaValue = *static_cast<const float *>(alpha),
        betaValue = *static_cast<const float *>(beta);
  cuda_on_cpu::enqueue(handle->stream, [=] {
    cuda_on_cpu::gemm(transa == CUBLAS_OP_T, transb == CUBLAS_OP_T, m, n, k,
                      alphaValue, aType, a, lda, strideA, bType, b, ldb,
                      strideB, betaValue, cType, c, ldc, strideC, cType, c, ldc,
                      strideC, batch);
  });
  return CUBLAS_STATUS_SUCCESS;
}

struct EmulatedLt {};
using cublasLtHandle_t = EmulatedLt *;
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new EmulatedLt;
  return CUBLAS_STATUS_SUCCESS;
}

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8
};
/// The epilogues the emulation runs: none, BIAS (the bias, D's type and
/// D's rows long, added to each row of alpha A B + beta C) and GELU_BIAS
/// (then the tanh GELU).
enum cublasLtEpilogue_t : uint32_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4
};
struct EmulatedMatmulDesc {
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
};
using cublasLtMatmulDesc_t = EmulatedMatmulDesc *;
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                               cublasComputeType_t,
                                               cudaDataType) {
  *desc = new EmulatedMatmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *value, size_t bytes) {
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
  case CUBLASLT_MATMUL_DESC_TRANSB:
    if (bytes != sizeof(cublasOperation_t))
      return CUBLAS_STATUS_INVALID_VALUE;
    (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? desc->transA : desc->transB) =
        *static_cast<const cublasOperation_t *>(value);
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_EPILOGUE: {
    uint32_t epilogue;
    if (bytes != sizeof epilogue)
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&epilogue, value, bytes);
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
        epilogue != CUBLASLT_EPILOGUE_BIAS &&
        epilogue != CUBLASLT_EPILOGUE_GELU_BIAS)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    desc->epilogue = cublasLtEpilogue_t(epilogue);
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    if (bytes != sizeof(const void *))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&desc->bias, value, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

enum cublasLtMatrixLayoutAttribute_t {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
};
struct EmulatedLayout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int batch = 1;
  int64_t batchStride = 0;
};
using cublasLtMatrixLayout_t = EmulatedLayout *;
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                 cudaDataType type,
                                                 uint64_t rows, uint64_t cols,
                                                 int64_t ld) {
  // cuBLASLt's rule for column-major layouts.
  if (ld < int64_t(rows))
    return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new EmulatedLayout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *value, size_t bytes) {
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && bytes == sizeof(int))
    layout->batch = *static_cast<const int *>(value);
  else if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET &&
           bytes == sizeof(int64_t))
    layout->batchStride = *static_cast<const int64_t *>(value);
  else
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
};
struct EmulatedPreference {};
using cublasLtMatmulPreference_t = EmulatedPreference *;
inline cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  *preference = new EmulatedPreference;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                     cublasLtMatmulPreferenceAttributes_t,
                                     const void *, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
/// The emulation's algorithms, so that GEMM tuning (LOOMRT_GEMM_TUNE) has
/// candidates to choose among: two that sum in order (the same bits) and
/// one that sums the depth from its end, as a split or reordered kernel
/// would (other bits, in general).
enum EmulatedAlgorithm : uint64_t {
  kEmulatedInOrder,
  kEmulatedInOrderAgain,
  kEmulatedReversed,
  kEmulatedAlgorithms
};

/// Checks what cuBLASLt requires of a matmul's layouts: op(A) m x k, op(B)
/// k x n, C and D m x n, all of one batch count.
inline bool layoutsAgree(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                         cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                         cublasLtMatrixLayout_t d) {
  uint64_t m = op->transA == CUBLAS_OP_T ? a->cols : a->rows,
           k = op->transA == CUBLAS_OP_T ? a->rows : a->cols,
           kb = op->transB == CUBLAS_OP_T ? b->cols : b->rows,
           n = op->transB == CUBLAS_OP_T ? b->rows : b->cols;
  // The emulation's epilogues take one bias for one matrix, as the
  // runtime asks it (no bias batch stride).
  bool epilogueFits =
      op->epilogue == CUBLASLT_EPILOGUE_DEFAULT || (op->bias && d->batch == 1);
  return k == kb && c->rows == m && c->cols == n && d->rows == m &&
         d->cols == n && a->batch == d->batch && b->batch == d->batch &&
         c->batch == d->batch && epilogueFits;
}

inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *count) {
  // LOOM_CUBLASLT_ON_CPU_NO_BROADCAST=1 plays a cuBLASLt without an
  // algorithm for a batch at stride 0, so tests reach the runtime's
  // fallback (a call per batch entry).
  static const bool noBroadcast = [] {
    const char *text = std::getenv("LOOM_CUBLASLT_ON_CPU_NO_BROADCAST");
    return text && std::strcmp(text, "1") == 0;
  }();
  bool broadcast = false;
  for (cublasLtMatrixLayout_t layout : {a, b})
    broadcast |= layout->batch > 1 && layout->batchStride == 0;
  *count = layoutsAgree(op, a, b, c, d) && !(noBroadcast && broadcast)
               ? std::min(requested, int(kEmulatedAlgorithms))
               : 0;
  for (int i = 0; i < *count; ++i) {
    results[i] = cublasLtMatmulHeuristicResult_t{};
    results[i].algo.data[0] = uint64_t(i);
    results[i].state = CUBLAS_STATUS_SUCCESS;
  }
  return *count ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

inline cublasStatus_t
cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t op, const void *alpha,
               const void *a, cublasLtMatrixLayout_t aLayout, const void *b,
               cublasLtMatrixLayout_t bLayout, const void *beta, const void *c,
               cublasLtMatrixLayout_t cLayout, void *d,
               cublasLtMatrixLayout_t dLayout, const cublasLtMatmulAlgo_t *algo,
               void *, size_t, cudaStream_t stream) {
  if (!layoutsAgree(op, aLayout, bLayout, cLayout, dLayout) ||
      (algo && algo->data[0] >= kEmulatedAlgorithms))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool reversed = algo && algo->data[0] == kEmulatedReversed;
  EmulatedMatmulDesc o = *op;
  EmulatedLayout la = *aLayout, lb = *bLayout, lc = *cLayout, ld = *dLayout;
  float alphaValue = *static_cast<const float *>(alpha),
        betaValue = *static_cast<const float *>(beta);
  cuda_on_cpu::enqueue(stream, [=] {
    int64_t k = int64_t(o.transA == CUBLAS_OP_T ? la.rows : la.cols);
    cuda_on_cpu::gemm(
        o.transA == CUBLAS_OP_T, o.transB == CUBLAS_OP_T, int64_t(ld.rows),
        int64_t(ld.cols), k, alphaValue, la.type, a, la.ld, la.batchStride,
        lb.type, b, lb.ld, lb.batchStride, betaValue, lc.type, c, lc.ld,
        lc.batchStride, ld.type, d, ld.ld, ld.batchStride, ld.batch, reversed,
        o.epilogue == CUBLASLT_EPILOGUE_DEFAULT ? nullptr : o.bias,
        o.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS);
  });
  return CUBLAS_STATUS_SUCCESS;
}

#endif // LOOM_RUNTIME_EMULATION_CUDARUNTIMEONCPU_H
