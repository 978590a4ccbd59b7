//===- CudaOnCpu.h - Run a CUDA kernel's source on the host ---*- C++ -*-===//
//
// Part of the Loom project.
//
// Most machines that build Loom have no GPU, and kernels must be right
// before one runs them. This header lets a test compile a kernel's source
// for the host and run it: every CUDA thread of a block is a fiber on the
// calling thread (run in thread order until it reaches a barrier),
// __syncthreads() is a barrier of the block's fibers, __shfl_xor_sync
// exchanges values through a warp's barrier, and each WMMA fragment holds
// its whole 16 x 16 tile in every lane (the kernels only load, multiply and
// store fragments, never read their elements, so the hardware's element
// layout does not matter). Tensor-core products are computed in f32 from
// exactly widened inputs, in order; the hardware adds in another order,
// which a test's tolerance must allow for. Blocks run one after another, so
// one buffer is the dynamic shared memory of every block, and a kernel's
// static __shared__ arrays are static variables.
//
// Only what the project's kernels use is emulated (FusedAttention.cuh,
// RowKernels.cuh, Kernels.cu and the kernels loomc generates); the CUDA
// runtime and the GEMM libraries are CudaRuntimeOnCpu.h's. Include this
// header before the kernels'. Each host thread is a device of its own, as
// the loopback mode runs a rank per thread; the floating-point environment
// is the host thread's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EMULATION_CUDAONCPU_H
#define LOOM_RUNTIME_EMULATION_CUDAONCPU_H

#include "loomrt.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

// LOOM_CUDA_ON_CPU_UCONTEXT takes the ucontext path on x86-64 too, so that
// the path other machines take is built and tested here
// (LoomKernelTestsUcontext).
#if defined(__x86_64__) && !defined(LOOM_CUDA_ON_CPU_UCONTEXT)
#define LOOM_CUDA_ON_CPU_STACK_SWITCH 1
#else
#include <ucontext.h>
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
// A block's static shared arrays: one per kernel and host thread, shared by
// the block's fibers (blocks run one after another).
#define __shared__ static thread_local

namespace cuda_on_cpu {

struct Dim3 {
  Dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
  unsigned x, y, z;
};

// Per host thread: each is a device of its own (the loopback mode runs a
// rank per thread).
inline thread_local Dim3 threadIdx, blockIdx, blockDim, gridDim;
inline thread_local std::vector<unsigned char> dynamicSharedBytes;
/// The block's dynamic shared memory, 128-byte aligned as the kernels
/// declare it.
inline unsigned char *dynamicShared() {
  uintptr_t base = reinterpret_cast<uintptr_t>(dynamicSharedBytes.data());
  return dynamicSharedBytes.data() + (128 - base % 128) % 128;
}

inline void fiberEntry();
/// A fiber's start: fiberEntry, then back to the scheduler for good.
[[noreturn]] inline void fiberTrampoline();

// ThreadSanitizer follows a switch of stacks only when told, through its
// fiber interface: otherwise it takes one fiber's calls and returns for
// another's, and loses its own stack (a hang or a crash).
#if defined(__SANITIZE_THREAD__)
#define LOOM_CUDA_ON_CPU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOOM_CUDA_ON_CPU_TSAN 1
#endif
#endif
} // namespace cuda_on_cpu
#ifdef LOOM_CUDA_ON_CPU_TSAN
#include <sanitizer/tsan_interface.h>
#endif
namespace cuda_on_cpu {
/// A fiber as ThreadSanitizer knows it, made on first use (nothing in
/// other builds).
class SanitizerFiber {
public:
  SanitizerFiber() = default;
  SanitizerFiber(SanitizerFiber &&other) noexcept
      : fiber(std::exchange(other.fiber, nullptr)) {}
  SanitizerFiber &operator=(SanitizerFiber &&other) noexcept {
    std::swap(fiber, other.fiber);
    return *this;
  }
  ~SanitizerFiber() {
#ifdef LOOM_CUDA_ON_CPU_TSAN
    if (fiber)
      __tsan_destroy_fiber(fiber);
#endif
  }
  void *get() {
#ifdef LOOM_CUDA_ON_CPU_TSAN
    if (!fiber)
      fiber = __tsan_create_fiber(0);
#endif
    return fiber;
  }

private:
  void *fiber = nullptr;
};
/// The calling thread's current fiber for ThreadSanitizer (null in other
/// builds).
inline void *currentSanitizerFiber() {
#ifdef LOOM_CUDA_ON_CPU_TSAN
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}

// Switching fibers: on x86-64 a few instructions (callee-saved registers
// and the stack pointer), as the reductions' barriers switch millions of
// times; elsewhere ucontext, whose every switch is a system call.
#ifdef LOOM_CUDA_ON_CPU_STACK_SWITCH
} // namespace cuda_on_cpu
// Weak: every test that includes this header defines it, once in the end.
asm(".pushsection .text\n"
    ".weak loom_cuda_on_cpu_switch\n"
    ".type loom_cuda_on_cpu_switch, @function\n"
    "loom_cuda_on_cpu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n"
    "  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n"
    "  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".popsection\n");
/// Saves the callee-saved registers and stack pointer in *from, resumes to.
extern "C" void loom_cuda_on_cpu_switch(void **from, void *to);
namespace cuda_on_cpu {
struct Context {
  void *sp = nullptr;
  void *sanitizerFiber = nullptr;
};
inline void switchStacks(Context &from, Context &to) {
  loom_cuda_on_cpu_switch(&from.sp, to.sp);
}
/// A context that starts fiberEntry on `stack`, then switches to `back`.
inline void makeContext(Context &context, std::vector<char> &stack,
                        Context &back) {
  uintptr_t top =
      reinterpret_cast<uintptr_t>(stack.data() + stack.size()) & ~uintptr_t(15);
  void **slots = reinterpret_cast<void **>(top) - 8;
  // Six registers to pop, then the trampoline as the return address; at
  // its entry the stack is aligned as after a call.
  for (int i = 0; i < 6; ++i)
    slots[i] = nullptr;
  slots[6] = reinterpret_cast<void *>(&fiberTrampoline);
  slots[7] = nullptr;
  context.sp = slots;
  (void)back;
}
#else
struct Context {
  ucontext_t context;
  void *sanitizerFiber = nullptr;
};
inline void switchStacks(Context &from, Context &to) {
  swapcontext(&from.context, &to.context);
}
inline void makeContext(Context &context, std::vector<char> &stack,
                        Context &back) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack.data();
  context.context.uc_stack.ss_size = stack.size();
  context.context.uc_link = &back.context;
  makecontext(&context.context, fiberTrampoline, 0);
}
#endif
inline void switchTo(Context &from, Context &to) {
#ifdef LOOM_CUDA_ON_CPU_TSAN
  __tsan_switch_to_fiber(to.sanitizerFiber, 0);
#endif
  switchStacks(from, to);
}

/// One block's threads as fibers on the calling thread: each runs until it
/// reaches a barrier (of the block, or of its warp for a shuffle), and a
/// fiber at a barrier runs on once every member of its group has arrived
/// (the last to arrive too waits for its turn). Deterministic: fibers run in
/// thread order between barriers. Thread 0
/// runs first; when it ends without reaching a barrier, the block's other
/// threads run one after another without fibers (CUDA's barriers are
/// reached by every thread of a block or by none). With
/// LOOM_CUDA_ON_CPU_ORDER=reverse (threadOrder), blocks and threads run
/// in the opposite order.
struct BlockRun {
  struct Fiber {
    Context context;
    SanitizerFiber sanitizer;
    std::vector<char> stack;
    bool done = false;
    int group = -1; // the barrier group it waits at, or -1
    int generation = 0;
  };
  std::vector<Fiber> fibers;
  Context scheduler;
  // Group 0 is the block, group 1 + w warp w.
  std::vector<int> arrived, generation, members;
  /// Each thread's slot for what it passes to its warp (exchangeInWarp).
  struct alignas(8) Slot {
    unsigned char bytes[24];
  };
  std::vector<Slot> exchange;
  /// Each thread's wgmma products not yet waited for: their accumulators
  /// keep their old values until wgmmaWaitAll, as on a GPU.
  struct PendingProduct {
    float *d;
    float value[32];
    bool committed;
  };
  std::vector<std::vector<PendingProduct>> pending;
  const std::function<void()> *kernel = nullptr;
  int current = 0;
  bool inFiber = false;
};
inline thread_local BlockRun *run = nullptr;

inline void fiberEntry() {
  run->kernel->operator()();
  run->fibers[size_t(run->current)].done = true;
}

inline void fiberTrampoline() {
  fiberEntry();
  // Done: back to the scheduler, never to return here.
  switchTo(run->fibers[size_t(run->current)].context, run->scheduler);
  abort();
}

/// Waits at `group`'s barrier.
inline void barrier(int group) {
  BlockRun &r = *run;
  if (!r.inFiber) {
    fprintf(stderr,
            "cuda_on_cpu: thread %u of block (%u, %u) reached a barrier that "
            "thread 0 did not\n",
            threadIdx.x, blockIdx.x, blockIdx.y);
    abort();
  }
  BlockRun::Fiber &fiber = r.fibers[size_t(r.current)];
  fiber.group = group;
  fiber.generation = r.generation[size_t(group)];
  if (++r.arrived[size_t(group)] == r.members[size_t(group)]) {
    // The last to arrive releases the others and waits its turn like them,
    // so that all resume in the block's order (threadOrder): ran on, it
    // would come first in both orders.
    r.arrived[size_t(group)] = 0;
    ++r.generation[size_t(group)];
  }
  switchTo(fiber.context, r.scheduler);
}

inline void startFiber(BlockRun &r, int t) {
  BlockRun::Fiber &fiber = r.fibers[size_t(t)];
  if (fiber.stack.empty())
    fiber.stack.resize(256 * 1024);
  makeContext(fiber.context, fiber.stack, r.scheduler);
  fiber.context.sanitizerFiber = fiber.sanitizer.get();
  fiber.done = false;
  fiber.group = -1;
}

/// Resumes fiber t (thread t) until it waits or ends.
inline void resume(BlockRun &r, int t) {
  r.fibers[size_t(t)].group = -1;
  r.current = t;
  threadIdx = Dim3{unsigned(t), 0, 0};
  r.inFiber = true;
  r.scheduler.sanitizerFiber = currentSanitizerFiber();
  switchTo(r.scheduler, r.fibers[size_t(t)].context);
  r.inFiber = false;
}

/// The order in which blocks, and a block's threads between barriers, run.
/// Thread order hides a missing barrier whenever the thread that reads
/// shared memory comes after the one that writes it (and a kernel that
/// counts on one block running before another); a kernel whose bits
/// change with the order has a race a GPU may show. Tests run kernels both
/// ways (LOOM_CUDA_ON_CPU_ORDER=reverse) and compare.
enum class ThreadOrder { Forward, Reverse };
inline ThreadOrder threadOrder() {
  static const ThreadOrder order = [] {
    const char *text = std::getenv("LOOM_CUDA_ON_CPU_ORDER");
    if (!text || !std::strcmp(text, "forward"))
      return ThreadOrder::Forward;
    if (!std::strcmp(text, "reverse"))
      return ThreadOrder::Reverse;
    fprintf(stderr,
            "cuda_on_cpu: LOOM_CUDA_ON_CPU_ORDER must be forward or reverse, "
            "not '%s'\n",
            text);
    abort();
  }();
  return order;
}

/// Runs one block's threads to their ends (BlockRun), in `order`.
inline void runBlock(BlockRun &r, int threads, ThreadOrder order,
                     const std::function<void()> &kernel) {
  bool reverse = order == ThreadOrder::Reverse;
  r.arrived.assign(r.members.size(), 0);
  r.generation.assign(r.members.size(), 0);
  if (!reverse) {
    startFiber(r, 0);
    resume(r, 0);
    if (r.fibers[0].done) {
      // No barrier: the other threads need no fibers.
      for (int t = 1; t < threads; ++t) {
        threadIdx = Dim3{unsigned(t), 0, 0};
        kernel();
      }
      return;
    }
  }
  for (int t = reverse ? 0 : 1; t < threads; ++t)
    startFiber(r, t);
  for (int left = threads; left > 0;) {
    bool progressed = false;
    left = 0;
    for (int i = 0; i < threads; ++i) {
      int t = reverse ? threads - 1 - i : i;
      BlockRun::Fiber &fiber = r.fibers[size_t(t)];
      if (fiber.done)
        continue;
      if (fiber.group >= 0 &&
          r.generation[size_t(fiber.group)] == fiber.generation) {
        ++left;
        continue;
      }
      resume(r, t);
      progressed = true;
      left += !fiber.done;
    }
    if (left > 0 && !progressed) {
      fprintf(stderr,
              "cuda_on_cpu: block (%u, %u): threads wait at barriers that "
              "can never release\n",
              blockIdx.x, blockIdx.y);
      abort();
    }
  }
  for (const auto &products : r.pending)
    if (!products.empty()) {
      fprintf(stderr,
              "cuda_on_cpu: block (%u, %u): a thread ended with wgmma "
              "products it never waited for\n",
              blockIdx.x, blockIdx.y);
      abort();
    }
}

/// Runs `kernel` (a callable taking no arguments that calls the kernel with
/// its arguments) over `grid` blocks of `block.x` threads, with `shared`
/// bytes of dynamic shared memory, now.
inline void runNow(Dim3 grid, Dim3 block, size_t shared,
                   const std::function<void()> &kernel) {
  int threads = int(block.x * block.y * block.z);
  gridDim = grid;
  blockDim = block;
  // Not zero: the kernel must write before it reads.
  dynamicSharedBytes.assign(shared + 128, 0xcd);
  static thread_local BlockRun state;
  BlockRun &r = state;
  BlockRun *outer = run;
  r.kernel = &kernel;
  r.fibers.resize(size_t(threads));
  int warps = (threads + 31) / 32;
  r.members.assign(size_t(1 + warps), 32);
  r.members[0] = threads;
  if (threads % 32)
    r.members.back() = threads % 32;
  r.exchange.assign(size_t(threads), BlockRun::Slot{});
  r.pending.assign(size_t(threads), {});
  run = &r;
  ThreadOrder order = threadOrder();
  uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  for (uint64_t i = 0; i < blocks; ++i) {
    uint64_t b = order == ThreadOrder::Reverse ? blocks - 1 - i : i;
    blockIdx = Dim3{unsigned(b % grid.x), unsigned(b / grid.x % grid.y),
                    unsigned(b / (uint64_t(grid.x) * grid.y))};
    runBlock(r, threads, order, kernel);
  }
  run = outer;
}

/// When a stream's work runs. Eager (the default): at once, as it is
/// enqueued, except NCCL's (below). Lazy: as late as CUDA allows, when the
/// host synchronises with the stream or with an event recorded on it, or
/// when work of another stream that waits for such an event runs.
/// LOOM_CUDA_ON_CPU_STREAMS=lazy makes every stream lazy; lazy:N[,N...]
/// the N-th a host thread makes (from 0: the runtime's compute stream is
/// 0, its communication stream 1). Eager streams hide a missing wait
/// between streams whenever the work that should come first was enqueued
/// first. A lazy writer and an eager reader show it: the reader runs
/// before the writer's work. Tests run the runtime's streams each way.
struct StreamModes {
  bool allLazy = false;
  std::vector<int> lazy; // by the order a thread makes its streams
};
inline const StreamModes &streamModes() {
  static const StreamModes modes = [] {
    StreamModes m;
    const char *text = std::getenv("LOOM_CUDA_ON_CPU_STREAMS");
    if (!text || !std::strcmp(text, "eager"))
      return m;
    if (!std::strcmp(text, "lazy")) {
      m.allLazy = true;
      return m;
    }
    bool ok = !std::strncmp(text, "lazy:", 5) && text[5];
    for (const char *p = text + 5; ok && *p;) {
      char *end = nullptr;
      long n = std::strtol(p, &end, 10);
      ok = end != p && n >= 0 && n < 64 && (*end == ',' || !*end) &&
           !(*end == ',' && !end[1]);
      m.lazy.push_back(int(n));
      p = *end ? end + 1 : end;
    }
    if (!ok) {
      fprintf(stderr,
              "cuda_on_cpu: LOOM_CUDA_ON_CPU_STREAMS must be eager, lazy or "
              "lazy:N[,N...] (streams by the order a thread makes them, "
              "from 0), not '%s'\n",
              text);
      std::exit(2);
    }
    return m;
  }();
  return modes;
}
inline bool anyLazyStream() {
  return streamModes().allLazy || !streamModes().lazy.empty();
}

/// A stream: its work runs at once, or is recorded while the stream is
/// captured (CudaRuntimeOnCpu.h), to run when the graph is launched. Work
/// that waits for other processes (NCCL's, NcclOnCpu.h) is deferred
/// instead: it runs when the stream's next work is enqueued or the stream
/// is synchronised, so that the host goes on as it would with a GPU (and a
/// watchdog can see the work unfinished), while the stream's order holds.
/// Lazy streams (streamModes) defer all their work.
struct Stream;

/// A piece of a captured graph: work and the stream that issued it, or
/// (without work) that stream's wait for the piece `waitsFor` (an event's
/// record), which a graph replayed onto lazy streams keeps as a wait.
struct Captured {
  Stream *origin = nullptr;
  std::function<void()> work;
  long waitsFor = -1;
};

struct Stream {
  bool lazy = false;
  bool capturing = false;
  /// A launch failed while the stream was captured (as CUDA, the capture
  /// then ends with an error).
  bool captureInvalidated = false;
  std::vector<Captured> recorded;
  /// Deferred work, in order: `issued` items were ever enqueued (deferred,
  /// or run at once on an eager stream), `ran` of them have run, and the
  /// rest are here (an item's place is its number, an event's too).
  std::deque<std::function<void()>> deferred;
  uint64_t issued = 0, ran = 0;
  /// The captured stream whose capture this one joined by waiting for an
  /// event recorded there during it (a fork, as CUDA has it): its work is
  /// recorded there, in order, until that capture ends.
  Stream *joined = nullptr;
  /// Work recorded into a capture this stream joined, and how much of it
  /// the capturing stream has waited for (an event recorded after it): a
  /// capture ends with an error while a fork has work not joined back, as
  /// CUDA's does (cudaErrorStreamCaptureUnjoined).
  uint64_t forkedWork = 0, joinedBack = 0;
  /// For the capturing stream: the streams that joined its capture.
  std::vector<Stream *> forks;
  /// What CUDA promises about this stream's order with others, whatever
  /// the emulation happens to have run (the emulated NCCL's order check):
  /// for each other stream, this stream's waits for it, in order, each
  /// as its place here (it comes before this stream's item `at`) and how
  /// many of the other's items this stream has waited for by then.
  struct Wait {
    uint64_t at, upTo;
  };
  std::vector<std::pair<Stream *, std::vector<Wait>>> waits;
  /// How many of its items the host has waited for (a synchronisation
  /// with the stream or with an event on it; from any host thread).
  std::atomic<uint64_t> observed{0};
};

/// Notes that `stream`'s later work waits for `source`'s first `upTo`
/// items (cudaStreamWaitEvent, or a replayed graph's join).
inline void noteWait(Stream *stream, Stream *source, uint64_t upTo) {
  if (!stream || !source || stream == source)
    return;
  auto known =
      std::find_if(stream->waits.begin(), stream->waits.end(),
                   [&](const auto &each) { return each.first == source; });
  if (known == stream->waits.end())
    known = stream->waits.insert(stream->waits.end(), {source, {}});
  std::vector<Stream::Wait> &list = known->second;
  if (!list.empty() && list.back().upTo >= upTo)
    return; // waited for already
  if (!list.empty() && list.back().at == stream->issued)
    list.back().upTo = upTo;
  else
    list.push_back({stream->issued, upTo});
}

/// Notes that the host has waited for `stream`'s first `count` items.
inline void noteObserved(Stream *stream, uint64_t count) {
  if (!stream)
    return;
  uint64_t seen = stream->observed.load();
  while (seen < count && !stream->observed.compare_exchange_weak(seen, count)) {
  }
}

inline bool isLiveStream(Stream *stream);

/// Notes that the host has waited for all of `stream`'s work so far: its
/// items, and the waits it was given after its last item, which a GPU's
/// stream also completes before a synchronisation with it returns (their
/// sources' items up to the waits are done too). Other waits are found
/// from `observed` when needed (ordered).
inline void noteSynchronized(Stream *stream) {
  if (!stream)
    return;
  noteObserved(stream, stream->issued);
  for (const auto &[source, list] : stream->waits)
    if (!list.empty() && list.back().at == stream->issued &&
        isLiveStream(source))
      noteObserved(source, list.back().upTo);
}

/// Whether `stream`'s items before `limit` wait for `before`'s item at
/// `place`: directly, or through the streams they wait for (each still
/// alive), however long the chain. Each step goes to a wait issued earlier
/// than the last, so the search ends; `searched` holds how far each stream
/// was searched already, so that no stream's waits are read twice for the
/// same items.
inline bool waitsFor(const Stream *stream, uint64_t limit, const Stream *before,
                     uint64_t place,
                     std::vector<std::pair<const Stream *, uint64_t>> &searched) {
  auto known =
      std::find_if(searched.begin(), searched.end(),
                   [&](const auto &each) { return each.first == stream; });
  if (known != searched.end()) {
    if (known->second >= limit)
      return false; // those items were searched, and wait for nothing
    known->second = limit;
  } else {
    searched.push_back({stream, limit});
  }
  for (const auto &[source, list] : stream->waits) {
    if (source != before && !isLiveStream(source))
      continue;
    // Its last wait for `source` that comes before `limit`.
    auto after = std::partition_point(
        list.begin(), list.end(),
        [&](const Stream::Wait &wait) { return wait.at < limit; });
    if (after == list.begin())
      continue;
    uint64_t upTo = std::prev(after)->upTo;
    if (source == before ? upTo > place
                         : waitsFor(source, upTo, before, place, searched))
      return true;
  }
  return false;
}

inline std::vector<Stream *> &streamsOfThread();

/// Whether CUDA orders `before`'s item at `place` before `after`'s next
/// work: the same stream; or `after` waits for the item, directly or
/// through other streams; or the host has waited for it since, directly or
/// by waiting for work on one of its streams that waited for it (the
/// emulated NCCL runs a rank's streams on one host thread).
/// Whether the emulation has run it does not count: an eager stream runs
/// its work when it can, which orders nothing on a GPU.
inline bool ordered(Stream *before, uint64_t place, Stream *after) {
  if (before == after || before->observed.load() > place)
    return true;
  std::vector<std::pair<const Stream *, uint64_t>> searched;
  if (waitsFor(after, UINT64_MAX, before, place, searched))
    return true;
  for (const Stream *synchronized : streamsOfThread())
    if (synchronized != before &&
        waitsFor(synchronized, synchronized->observed.load(), before, place,
                 searched))
      return true;
  return false;
}

/// The stream whose capture records `stream`'s work: itself, or the one
/// it joined; null when its work runs.
inline Stream *captureOf(Stream *stream) {
  if (!stream)
    return nullptr;
  if (stream->capturing)
    return stream;
  if (stream->joined && !stream->joined->capturing)
    stream->joined = nullptr; // that capture has ended
  return stream->joined;
}

/// With lazy streams, a stream's work runs on the host thread that waits
/// for it, which may be another rank's in loopback mode (ranks are threads
/// there, and wait for each other's events). One lock, held while work is
/// enqueued or run and while events are recorded or waited for, orders
/// all of it; without lazy streams each thread runs its own streams' work
/// and none is taken.
inline std::recursive_mutex &streamsMutex() {
  static std::recursive_mutex mutex;
  return mutex;
}
struct StreamsLock {
  std::unique_lock<std::recursive_mutex> lock;
  StreamsLock() {
    if (anyLazyStream())
      lock = std::unique_lock<std::recursive_mutex>(streamsMutex());
  }
};

/// Every stream not yet destroyed, of every thread (a lazy wait reaches
/// the stream of the event's record only while it exists). Its own lock:
/// the loopback mode's ranks make and destroy streams at once, and with
/// eager streams StreamsLock takes none.
class LiveStreams {
public:
  static void add(Stream *stream) {
    std::lock_guard<std::mutex> lock(mutex());
    streams().push_back(stream);
  }
  static void remove(Stream *stream) {
    std::lock_guard<std::mutex> lock(mutex());
    streams().erase(std::remove(streams().begin(), streams().end(), stream),
                    streams().end());
  }
  static bool has(Stream *stream) {
    std::lock_guard<std::mutex> lock(mutex());
    return std::find(streams().begin(), streams().end(), stream) !=
           streams().end();
  }

private:
  static std::mutex &mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<Stream *> &streams() {
    static std::vector<Stream *> all;
    return all;
  }
};
inline bool isLiveStream(Stream *stream) { return LiveStreams::has(stream); }

/// Runs the stream's deferred work, in order, until `count` items have run.
/// An item may settle other streams (a lazy wait for an event), and those
/// this one up to an earlier place.
inline void settleTo(Stream *stream, uint64_t count) {
  if (!stream)
    return;
  StreamsLock lock;
  while (stream->ran < count && !stream->deferred.empty()) {
    std::function<void()> item = std::move(stream->deferred.front());
    stream->deferred.pop_front();
    ++stream->ran;
    item();
  }
}
inline void settle(Stream *stream) { settleTo(stream, UINT64_MAX); }


/// Work that may wait for other processes: after the stream's earlier work
/// and before its later work, but not necessarily before this returns.
/// Returns its place (settleTo(stream, place + 1) runs it).
inline uint64_t enqueueDeferred(Stream *stream, std::function<void()> work) {
  StreamsLock lock;
  if (Stream *capture = captureOf(stream)) {
    if (capture != stream)
      ++stream->forkedWork;
    capture->recorded.push_back({stream, std::move(work)});
  } else if (stream) {
    stream->deferred.push_back(std::move(work));
    return stream->issued++;
  } else {
    work();
  }
  return 0;
}

/// A lazy wait: `stream`'s later work waits for `source`'s first `upTo`
/// items, which run when the stream's work reaches the wait (if `source`
/// still exists then).
inline void deferWaitFor(Stream *stream, Stream *source, uint64_t upTo) {
  enqueueDeferred(stream, [source, upTo] {
    if (LiveStreams::has(source))
      settleTo(source, upTo);
  });
}

/// Work that runs at once on an eager stream (after its deferred work), and
/// is deferred on a lazy one or recorded by a capture.
inline void enqueue(Stream *stream, std::function<void()> work) {
  StreamsLock lock;
  if (captureOf(stream) || (stream && stream->lazy)) {
    enqueueDeferred(stream, std::move(work));
    return;
  }
  settle(stream);
  if (stream) {
    ++stream->issued;
    ++stream->ran;
  }
  work();
}

/// The streams a host thread made (each is a device of its own): CUDA's
/// cudaFree waits for all of a device's work.
inline std::vector<Stream *> &streamsOfThread() {
  static thread_local std::vector<Stream *> streams;
  return streams;
}
inline void settleThread() {
  StreamsLock lock;
  for (Stream *stream : streamsOfThread())
    settle(stream);
}

/// The emulated GPU's compute capability: an H100's or H200's 9.0, or
/// LOOM_CUDA_ON_CPU_CAPABILITY=M.N, another GPU's, for the runtime's checks
/// of it.
inline std::pair<int, int> capability() {
  static const std::pair<int, int> value = [] {
    const char *text = std::getenv("LOOM_CUDA_ON_CPU_CAPABILITY");
    int major = 9, minor = 0;
    if (text && std::sscanf(text, "%d.%d", &major, &minor) != 2) {
      std::fprintf(stderr,
                   "cuda_on_cpu: LOOM_CUDA_ON_CPU_CAPABILITY must be M.N "
                   "(say 8.0), not '%s'\n",
                   text);
      std::abort();
    }
    return std::make_pair(major, minor);
  }();
  return value;
}

/// The last launch's error (cudaError_t's value), which cudaGetLastError
/// reports and clears.
inline thread_local int launchError = 0;

/// Whether the emulated code has machine code for the emulated GPU: it is
/// taken to be built for sm_80 and newer, as libloomrt's and loomc's are,
/// unless LOOM_CUDA_ON_CPU_NO_IMAGE=1 plays code built for another GPU.
inline bool hasImage() {
  static const bool value = [] {
    const char *text = std::getenv("LOOM_CUDA_ON_CPU_NO_IMAGE");
    return capability().first >= 8 && !(text && !std::strcmp(text, "1"));
  }();
  return value;
}

/// `kernel<<<grid, block, shared, stream>>>(...)` as runtime/tools/
/// cuda-on-cpu.py writes it: the lambda holds the arguments by value.
/// Without an image for the GPU (hasImage) the launch fails as CUDA's does
/// (no kernel image for the device; a captured stream's capture fails with
/// it).
inline void launch(Stream *stream, Dim3 grid, Dim3 block, size_t shared,
                   std::function<void()> kernel) {
  if (!hasImage()) {
    launchError = 209; // cudaErrorNoKernelImageForDevice
    if (Stream *capture = captureOf(stream))
      capture->captureInvalidated = true;
    return;
  }
  enqueue(stream, [=] { runNow(grid, block, shared, kernel); });
}

/// For tests calling a kernel directly: `threads` threads per block.
inline void launch(Dim3 grid, int threads, size_t shared,
                   const std::function<void()> &kernel) {
  runNow(grid, Dim3{unsigned(threads), 1, 1}, shared, kernel);
}

/// A `bytes`-byte access must be `bytes`-aligned on a GPU: a misaligned one
/// ends the kernel there, and would pass unnoticed on the host.
inline void checkAligned(const void *p, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    fprintf(stderr,
            "cuda_on_cpu: thread %u of block (%u, %u): a %zu-byte access at "
            "%p, which is not %zu-byte aligned\n",
            threadIdx.x, blockIdx.x, blockIdx.y, bytes, p, bytes);
    abort();
  }
}

inline void syncthreads() { barrier(0); }

/// The one way lanes see each other's values (shuffles, mma.sync,
/// ldmatrix): every lane of the calling warp stores `mine`, the warp meets,
/// `use(lane)` reads any lane's value, and the warp meets again before a
/// lane may store anew.
template <typename T, typename Use>
void exchangeInWarp(const T &mine, Use use) {
  static_assert(std::is_trivially_copyable<T>::value &&
                    sizeof(T) <= sizeof(BlockRun::Slot) &&
                    alignof(T) <= alignof(BlockRun::Slot),
                "a lane's value fits its slot");
  int t = int(threadIdx.x), warp = t / 32;
  new (run->exchange[size_t(t)].bytes) T(mine);
  barrier(1 + warp);
  use([&](int lane) -> const T & {
    return *std::launder(reinterpret_cast<const T *>(
        run->exchange[size_t(warp * 32 + lane)].bytes));
  });
  barrier(1 + warp);
}

inline float shflXor(float value, int offset) {
  float other = 0.0f;
  exchangeInWarp(
      value, [&](auto lane) { other = lane(int(threadIdx.x % 32) ^ offset); });
  return other;
}

/// The bf16 in the low (`which` 0) or high (1) half of a word, widened.
inline float bf16Half(uint32_t word, int which) {
  uint32_t widened = (which ? word >> 16 : word & 0xffffu) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof value);
  return value;
}

/// Element (row, k) of a warp's 16 x 16 left operand in mma.sync's layout
/// (mmaBf16), from `lane(l)`, lane l's operands (their `a[4]`).
template <typename Lane> float leftOperand(Lane lane, int row, int k) {
  return bf16Half(lane(4 * (row % 8) + (k % 8) / 2).a[row / 8 + 2 * (k / 8)],
                  k % 2);
}

/// PTX `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` for the calling
/// lane: d += A B over the warp's fragments, in the register layouts the
/// PTX ISA documents (lane = 4 * group + t): A (16 x 16, row-major) a[0] =
/// A[group][2t, 2t+1], a[1] = A[group + 8][2t, 2t+1], a[2] = A[group][2t+8,
/// 2t+9], a[3] = A[group + 8][2t+8, 2t+9]; B (16 x 8, column-major) b[0] =
/// B[2t, 2t+1][group], b[1] = B[2t+8, 2t+9][group]; C and D (16 x 8, f32)
/// d[0..1] = D[group][2t, 2t+1], d[2..3] = D[group + 8][2t, 2t+1]. Each
/// word holds two bf16, the lower column or row in its low half. The
/// products are exact in f32 and added to c in k order (the hardware's
/// order is its own).
inline void mmaBf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  struct Operands {
    uint32_t a[4], b[2];
  } mine = {{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  exchangeInWarp(mine, [&](auto lane) {
    auto aAt = [&](int row, int k) { return leftOperand(lane, row, k); };
    auto bAt = [&](int k, int col) {
      return bf16Half(lane(4 * col + (k % 8) / 2).b[k / 8], k % 2);
    };
    int group = int(threadIdx.x % 32) / 4, tq = int(threadIdx.x % 4);
    for (int i = 0; i < 4; ++i) {
      int row = group + 8 * (i / 2), col = 2 * tq + i % 2;
      float acc = d[i];
      for (int k = 0; k < 16; ++k)
        acc += aAt(row, k) * bAt(k, col);
      d[i] = acc;
    }
  });
}

/// PTX `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` for the calling
/// lane: lanes 8j..8j+7 give the addresses of rows 0..7 of 8 x 8 matrix j
/// (16 bytes each, 16-byte aligned); r[j] receives matrix j's elements
/// (lane / 4, 2 * (lane % 4)) and (lane / 4, 2 * (lane % 4) + 1), or with
/// `trans` its elements (2 * (lane % 4), lane / 4) and (2 * (lane % 4) + 1,
/// lane / 4), the first in the low half.
inline void loadMatrices(uint32_t r[4], const uint16_t *row, bool trans) {
  checkAligned(row, 16);
  exchangeInWarp(row, [&](auto lane) {
    auto element = [&](int matrix, int i, int j) {
      return lane(8 * matrix + i)[j];
    };
    int a = int(threadIdx.x % 32) / 4, b = 2 * int(threadIdx.x % 4);
    for (int matrix = 0; matrix < 4; ++matrix) {
      uint16_t low = trans ? element(matrix, b, a) : element(matrix, a, b);
      uint16_t high =
          trans ? element(matrix, b + 1, a) : element(matrix, a, b + 1);
      r[matrix] = low | uint32_t(high) << 16;
    }
  });
}

/// The shared-memory address of `p`: its offset in the block's dynamic
/// shared memory (the kernels that take addresses have no static shared
/// arrays).
inline uint32_t sharedAddress(const void *p) {
  const unsigned char *byte = static_cast<const unsigned char *>(p);
  if (byte < dynamicShared() ||
      byte >= dynamicSharedBytes.data() + dynamicSharedBytes.size()) {
    fprintf(stderr,
            "cuda_on_cpu: thread %u: a shared-memory address of %p, which is "
            "not in the block's dynamic shared memory\n",
            threadIdx.x, p);
    abort();
  }
  return uint32_t(byte - dynamicShared());
}

// Products run when issued, in order, so the fences have nothing to order.
inline void wgmmaFence() {}
inline void fenceSharedForWgmma() {}

/// Commits the thread's products issued since the last commit.
inline void wgmmaCommit() {
  for (BlockRun::PendingProduct &product : run->pending[threadIdx.x])
    product.committed = true;
}

/// The committed products' accumulators take their values (a product not
/// committed is not waited for: its accumulator stays as it was).
inline void wgmmaWaitAll() {
  std::vector<BlockRun::PendingProduct> &products = run->pending[threadIdx.x];
  std::vector<BlockRun::PendingProduct> uncommitted;
  for (BlockRun::PendingProduct &product : products) {
    if (product.committed)
      std::memcpy(product.d, product.value, sizeof product.value);
    else
      uncommitted.push_back(product);
  }
  products.swap(uncommitted);
}

/// Which of wgmma's B layouts the emulated GPU reads with the leading and
/// stride byte offsets exchanged (LOOM_CUDA_ON_CPU_WGMMA_EXCHANGED=k-major,
/// mn-major or k-major,mn-major; none by default): a GPU that took the
/// offsets the other way round from our reading of the PTX ISA, for
/// testing bench/gpu/wgmma-probe.cu's verdict and the kernel built to
/// follow it (LOOMRT_WGMMA_KEYS_EXCHANGED, LOOMRT_WGMMA_VALUES_EXCHANGED).
struct WgmmaExchanged {
  bool kMajor = false, mnMajor = false;
};
inline WgmmaExchanged wgmmaExchanged() {
  static const WgmmaExchanged exchanged = [] {
    const char *text = std::getenv("LOOM_CUDA_ON_CPU_WGMMA_EXCHANGED");
    WgmmaExchanged result;
    if (!text || !*text)
      return result;
    if (!std::strcmp(text, "k-major"))
      result.kMajor = true;
    else if (!std::strcmp(text, "mn-major"))
      result.mnMajor = true;
    else if (!std::strcmp(text, "k-major,mn-major"))
      result.kMajor = result.mnMajor = true;
    else {
      fprintf(stderr,
              "cuda_on_cpu: LOOM_CUDA_ON_CPU_WGMMA_EXCHANGED must be k-major, "
              "mn-major or k-major,mn-major, not '%s'\n",
              text);
      abort();
    }
    return result;
  }();
  return exchanged;
}

/// PTX `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16` with A in
/// registers and B in shared memory, for the calling thread: d = A B (+ d
/// if `accumulate`) over the warpgroup, where warp w % 4 holds rows 16 (w %
/// 4) .. + 15, in mmaBf16's layouts per warp (A: a[0..3]; D: columns 8 j ..
/// 8 j + 7 in d[4 j .. 4 j + 3]). B is read through its descriptor as the
/// PTX ISA lays out operands without swizzling: 8 x 8 core matrices of 16
/// bytes a row, B[k][n] at k % 8 * 2 + n % 8 * 16 bytes of core matrix (k /
/// 8, n / 8) K-major, at n % 8 * 2 + k % 8 * 16 transposed (MN-major); core
/// matrices are the leading byte offset apart along K and the stride byte
/// offset apart along N, in both (CUTLASS's make_gmma_desc reads the
/// interleaved layouts so: cute/atom/mma_traits_sm90_gmma.hpp). Only the
/// layout without swizzling and base offset 0 is emulated. The result
/// reaches d at wgmmaWaitAll, after wgmmaCommit; chained products on one
/// accumulator see the earlier ones' results.
template <bool TransposeB>
void wgmmaBf16(float d[32], const uint32_t a[4], uint64_t b, bool accumulate) {
  if (blockDim.x % 128 != 0 || blockDim.y != 1 || blockDim.z != 1) {
    fprintf(stderr,
            "cuda_on_cpu: wgmma in a block of %u threads, which is "
            "no whole number of warpgroups (128)\n",
            blockDim.x * blockDim.y * blockDim.z);
    abort();
  }
  const uint32_t start = uint32_t(b & 0x3fffu) << 4;
  uint32_t leading = uint32_t(b >> 16 & 0x3fffu) << 4,
           stride = uint32_t(b >> 32 & 0x3fffu) << 4;
  if (TransposeB ? wgmmaExchanged().mnMajor : wgmmaExchanged().kMajor)
    std::swap(leading, stride);
  if ((b >> 49 & 7u) != 0 || (b >> 62) != 0 || (b >> 14 & 3u) != 0 ||
      (b >> 30 & 3u) != 0 || (b >> 46 & 7u) != 0 || (b >> 52 & 0x3ffu) != 0) {
    fprintf(stderr,
            "cuda_on_cpu: wgmma descriptor 0x%016llx: only the layout "
            "without swizzling, base offset 0, is emulated\n",
            static_cast<unsigned long long>(b));
    abort();
  }
  const size_t sharedBytes = size_t(
      dynamicSharedBytes.data() + dynamicSharedBytes.size() - dynamicShared());
  auto bAt = [&](int k, int n) {
    size_t offset =
        size_t(k / 8) * leading + size_t(n / 8) * stride +
        (TransposeB ? k % 8 * 16 + n % 8 * 2 : n % 8 * 16 + k % 8 * 2);
    if (start + offset + 2 > sharedBytes) {
      fprintf(stderr,
              "cuda_on_cpu: wgmma reads B[%d][%d] at byte %zu, "
              "beyond the block's %zu bytes of shared memory\n",
              k, n, start + offset, sharedBytes);
      abort();
    }
    uint16_t bits;
    std::memcpy(&bits, dynamicShared() + start + offset, sizeof bits);
    return bf16Half(bits, 0);
  };
  std::vector<BlockRun::PendingProduct> &products = run->pending[threadIdx.x];
  BlockRun::PendingProduct *product = nullptr;
  for (BlockRun::PendingProduct &earlier : products)
    if (earlier.d == d)
      product = &earlier;
  float before[32];
  std::memcpy(before, product ? product->value : d, sizeof before);
  if (!product) {
    products.push_back(BlockRun::PendingProduct{d, {}, false});
    product = &products.back();
  }
  product->committed = false;
  struct Operands {
    uint32_t a[4];
  } mine = {{a[0], a[1], a[2], a[3]}};
  exchangeInWarp(mine, [&](auto lane) {
    int group = int(threadIdx.x % 32) / 4, tq = int(threadIdx.x % 4);
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 4; ++i) {
        int row = group + 8 * (i / 2), col = 8 * j + 2 * tq + i % 2;
        float acc = accumulate ? before[4 * j + i] : 0.0f;
        for (int k = 0; k < 16; ++k)
          acc += leftOperand(lane, row, k) * bAt(k, col);
        product->value[4 * j + i] = acc;
      }
  });
}

} // namespace cuda_on_cpu

using cuda_on_cpu::blockDim;
using cuda_on_cpu::blockIdx;
using cuda_on_cpu::gridDim;
using cuda_on_cpu::threadIdx;
using std::isnan;
using std::min;
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// Host code is built with -ffp-contract=off: every product is rounded.
inline float __fmul_rn(float a, float b) { return a * b; }
// The hardware's approximate exp and division, here the host's exact ones.
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float a, float b) { return a / b; }

inline bool __any_sync(unsigned, int predicate) {
  bool any = false;
  cuda_on_cpu::exchangeInWarp(predicate != 0, [&](auto lane) {
    for (int other = 0; other < 32; ++other)
      any = any || lane(other);
  });
  return any;
}

// Every wide access must be aligned, as on a GPU: runtime/cuda/Packs.cuh's
// 16-byte ones and the generated kernels' packs (lib/Target/EmitProgram.cpp).
#define LOOMRT_CHECK_ALIGNED(pointer, bytes)                                   \
  cuda_on_cpu::checkAligned(pointer, bytes)

#define LOOMRT_DYNAMIC_SHARED(name)                                            \
  unsigned char *name = cuda_on_cpu::dynamicShared()

inline void __syncthreads() { cuda_on_cpu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  cuda_on_cpu::barrier(1 + int(cuda_on_cpu::threadIdx.x) / 32);
}
inline float __shfl_xor_sync(unsigned, float value, int offset) {
  return cuda_on_cpu::shflXor(value, offset);
}

struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}

/// Storage types as the kernel names them; WMMA widens them exactly.
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
inline float widen(__nv_bfloat16 x) { return loomrt_bf16_to_f32(x.bits); }
inline float widen(__half x) { return loomrt_f16_to_f32(x.bits); }

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

/// What the CUDA Programming Guide requires of a WMMA load or store: a
/// 256-bit aligned pointer and a leading dimension that is a multiple of
/// 16 bytes. The hardware's result is undefined otherwise; here the test
/// stops.
inline void checkContract(const void *p, unsigned ld, size_t elementBytes,
                          const char *what) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 ||
      (ld * elementBytes) % 16 != 0) {
    fprintf(stderr,
            "cuda_on_cpu: %s with a pointer %p (must be 32-byte aligned) and "
            "a leading dimension of %u elements of %zu bytes (must be a "
            "multiple of 16 bytes)\n",
            what, p, ld, elementBytes);
    abort();
  }
}

/// Every lane holds the whole tile, row-major, in f32.
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "16 x 16 x 16 tiles only");
  float tile[16][16];
};

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float value) {
  for (auto &row : f.tile)
    for (float &x : row)
      x = value;
}

/// (i, j) of an operand tile: row-major at p[i * ld + j], column-major at
/// p[j * ld + i].
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ld) {
  checkContract(p, ld, sizeof(T), "load_matrix_sync");
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      f.tile[i][j] = widen(std::is_same<Layout, col_major>::value
                               ? p[size_t(j) * ld + size_t(i)]
                               : p[size_t(i) * ld + size_t(j)]);
}

template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  float result[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float acc = c.tile[i][j];
      for (int k = 0; k < 16; ++k)
        acc += a.tile[i][k] * b.tile[k][j];
      result[i][j] = acc;
    }
  std::copy(&result[0][0], &result[0][0] + 256, &d.tile[0][0]);
}

/// Lane 0 stores (every lane holds the same tile); the kernel synchronises
/// the warp (or the block) before anyone reads the stored tile.
inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ld, layout_t layout) {
  checkContract(p, ld, sizeof(float), "store_matrix_sync");
  if (threadIdx.x % 32 != 0)
    return;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      (layout == mem_row_major ? p[size_t(i) * ld + size_t(j)]
                               : p[size_t(j) * ld + size_t(i)]) = f.tile[i][j];
}

} // namespace nvcuda::wmma

#endif // LOOM_RUNTIME_EMULATION_CUDAONCPU_H
