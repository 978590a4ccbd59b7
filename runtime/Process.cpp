//===- Process.cpp - A generated program's process, for every backend -----===//
//
// Owns what is not the step itself: the executable's options, the ranks this
// process runs (one under mpirun, every rank of the mesh with --loopback),
// the arena, initial values, safetensors I/O of global tensors, timing, and
// the entry points of the collectives, which name each operation for the
// watchdog's messages and hand it to the transport.
//===----------------------------------------------------------------------===//
#include "loomrt.h"
#include "runtime/Elements.h"
#include "runtime/InitialValues.h"
#include "runtime/Runtime.h"
#include "runtime/Safetensors.h"

// Only MPI's C API: Open MPI's C++ bindings need a library of their own.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <time.h>
#include <tuple>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace loomrt;

#if defined(__SANITIZE_ADDRESS__)
#define LOOMRT_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOMRT_ADDRESS_SANITIZER 1
#endif
#endif
#ifdef LOOMRT_ADDRESS_SANITIZER
#include <sanitizer/common_interface_defs.h>
/// loomc --sanitize: Open MPI keeps thousands of allocations to its exit,
/// which would bury any report of ours, so leaks are not checked unless
/// ASAN_OPTIONS asks for them; a finding stops the program with exit 1.
extern "C" const char *__asan_default_options() { return "detect_leaks=0"; }
#endif

struct loomrt_ctx {
  const loomrt_model *model = nullptr;
  /// The arena the generated code addresses (the device's on a GPU).
  const char *arenaBase = nullptr;
  Transport *transport = nullptr;
  int worldRank = 0, worldSize = 1;
  std::vector<int64_t> coords;
  uint64_t sequence = 0;
  double timeout = 300.0;
  /// LOOMRT_LOGITS_COLUMNS, or 0: the backend's block size.
  int64_t logitsColumns = 0;
  std::vector<float> scratch[3];
  double gemmSeconds = 0.0;
  /// --profile: each kernel's time over the profiled steps, and this step's
  /// (kernel, begin mark, end mark) records.
  bool profiling = false;
  uint64_t openMark = 0;
  std::vector<double> kernelSeconds;
  std::vector<int64_t> kernelRuns;
  struct Record {
    int kernel;
    uint64_t begin, end;
  };
  std::vector<Record> records;
  /// --profile: collectives by kind and axes, in first-seen order.
  struct CollectiveStats {
    std::string label;
    int64_t calls = 0;
    double seconds = 0, bytes = 0;
  };
  std::vector<CollectiveStats> collectives;
  std::vector<Record> collectiveRecords; // kernel = index into collectives
  /// The kernel between loomrt_kernel_begin and _end (-1 outside): for
  /// --profile and the fatal-signal report. The parts of kernels
  /// (ProfiledPart) by kernel and name, in first-seen order.
  int openKernel = -1;
  /// For the fatal-signal report: the last step begun (from 1; 0 before the
  /// first), whether it is still under way, and the collective under way
  /// (its message text), if any.
  long stepNumber = 0;
  bool inStep = false;
  const std::string *openCollective = nullptr;
  struct PartStats {
    int kernel;
    std::string name;
    int64_t calls = 0;
    double seconds = 0;
  };
  std::vector<PartStats> parts;
  std::vector<Record> partRecords; // kernel = index into parts
  /// Started collectives (loomrt_start_begin): the future being issued
  /// (-1: none), the futures not yet waited for, and, on the host, what
  /// each one's wait must still do after its transport's (a combined
  /// collective's unpacking), with the buffers that owns.
  int startedFuture = -1;
  std::set<int> outstanding;
  /// The mesh axes that each outstanding future's collectives communicate
  /// over.
  std::map<int, std::set<int>> startedAxes;
  /// Each outstanding future's first collective as messages name it, and
  /// how many it started: what a fault in its wait was waiting for.
  std::map<int, std::pair<std::string, int>> startedCollectives;
  /// LOOMRT_CHECK_STARTED=1 (StartedChecker): each started collective's
  /// input as it started, its result (kept aside until the wait) and where
  /// both lie in the arena; and whether one is being run at once, as the
  /// checker runs them (startedFuture() then says none is started).
  struct StartedCheck {
    std::string what;
    const char *in;
    std::vector<char> input;
    char *out;
    std::vector<char> result;
  };
  std::map<int, std::vector<StartedCheck>> startedChecks;
  bool runningStartedAtOnce = false;
  std::map<int, std::vector<std::function<void()>>> afterWait;
};

//===----------------------------------------------------------------------===//
// Shared helpers (runtime/Runtime.h)
//===----------------------------------------------------------------------===//

Transport::~Transport() = default;

double loomrt::now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string loomrt::format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buffer[1024];
  vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

const char *loomrt::dtypeText(int dtype) {
  static const char *names[] = {"f32", "bf16", "f16", "i32", "i64"};
  return names[dtype];
}

std::vector<int64_t> loomrt::coordinatesOf(const loomrt_model &m,
                                           int64_t rank) {
  std::vector<int64_t> coords(size_t(m.num_axes));
  for (int a = m.num_axes - 1; a >= 0; --a) {
    coords[size_t(a)] = rank % m.axis_sizes[a];
    rank /= m.axis_sizes[a];
  }
  return coords;
}

std::string loomrt::positionOf(const loomrt_model &m, int64_t rank) {
  std::string out = "rank " + std::to_string(rank);
  if (m.num_axes == 0)
    return out;
  std::vector<int64_t> coords = coordinatesOf(m, rank);
  out += " (";
  for (int a = 0; a < m.num_axes; ++a)
    out += format("%s%s=%lld", a ? ", " : "", m.axis_names[a],
                  (long long)coords[size_t(a)]);
  return out + ")";
}

std::string loomrt::meshPosition(const loomrt_ctx *rt) {
  if (!rt->model || rt->coords.empty())
    return "rank " + std::to_string(rt->worldRank);
  return positionOf(*rt->model, rt->worldRank);
}

std::string loomrt::axesText(const loomrt_ctx *rt, const int *axes,
                             int numAxes) {
  std::string out = "[";
  for (int i = 0; i < numAxes; ++i)
    out += format("%s%s", i ? ", " : "", rt->model->axis_names[axes[i]]);
  return out + "]";
}

namespace {
/// Only the first of several failing threads speaks and ends the process
/// (in loopback mode several ranks may fail at once); the others wait.
void claimFailure() {
  static std::atomic<bool> failing(false);
  if (failing.exchange(true))
    for (;;)
      pause();
}
} // namespace

void loomrt::abortJob(loomrt_ctx *rt, const std::string &message, int code) {
  claimFailure();
  fprintf(stderr, "loom: %s: error: %s\n", meshPosition(rt).c_str(),
          message.c_str());
  fflush(stdout);
  fflush(stderr);
  if (rt->transport)
    rt->transport->abort(rt, code);
  endJob(code);
}

void loomrt::failProcess(const std::string &message, int code) {
  claimFailure();
  fprintf(stderr, "loom: error: %s\n", message.c_str());
  fflush(stdout);
  fflush(stderr);
  endJob(code);
}

void loomrt::endJob(int code) {
  int initialized = 0, finalized = 0, processes = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Comm_size(MPI_COMM_WORLD, &processes);
  if (processes > 1)
    MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

int loomrt::worldRank(const loomrt_ctx *rt) { return rt->worldRank; }
const std::vector<int64_t> &loomrt::coordinates(const loomrt_ctx *rt) {
  return rt->coords;
}
const loomrt_model &loomrt::model(const loomrt_ctx *rt) { return *rt->model; }
double loomrt::collectiveTimeout(const loomrt_ctx *rt) { return rt->timeout; }

bool loomrt::envSwitch(const char *name, bool byDefault) {
  const char *value = getenv(name);
  return value && *value ? strcmp(value, "1") == 0 : byDefault;
}
bool loomrt::envIs(const char *name, const char *value) {
  const char *set = getenv(name);
  return set && strcmp(set, value) == 0;
}
int64_t loomrt::logitsColumnsAsked(const loomrt_ctx *rt) {
  return rt->logitsColumns;
}

int64_t loomrt::groupColour(const loomrt_model &m,
                            const std::vector<int64_t> &coords, const int *axes,
                            int numAxes) {
  int64_t colour = 0;
  for (int a = 0; a < m.num_axes; ++a)
    if (std::find(axes, axes + numAxes, a) == axes + numAxes)
      colour = colour * m.axis_sizes[a] + coords[size_t(a)];
  return colour;
}

int loomrt::axisNeighbour(const loomrt_ctx *rt, int axis, int64_t offset) {
  int64_t size = rt->model->axis_sizes[axis];
  return int(((rt->coords[size_t(axis)] + offset) % size + size) % size);
}

/// Whether StartedChecker checks the started collectives (the CPU backend
/// under LOOMRT_CHECK_STARTED=1).
static bool checkingStarted() {
  static const bool on =
      envSwitch("LOOMRT_CHECK_STARTED", false) && deviceOps().hostMemory;
  return on;
}

int loomrt::startedFuture(const loomrt_ctx *rt) {
  return rt->runningStartedAtOnce ? -1 : rt->startedFuture;
}

int64_t loomrt::groupSize(const loomrt_ctx *rt, const int *axes, int numAxes) {
  int64_t n = 1;
  for (int i = 0; i < numAxes; ++i)
    n *= rt->model->axis_sizes[axes[i]];
  return n;
}

bool loomrt::sumsInF32(const loomrt_ctx *rt, const int *axes, int numAxes,
                       int dtype, int reduction) {
  return (dtype == LOOMRT_BF16 || dtype == LOOMRT_F16) &&
         reduction == LOOMRT_SUM && groupSize(rt, axes, numAxes) > 2;
}

std::vector<float> &loomrt::scratch(loomrt_ctx *rt, int slot) {
  return rt->scratch[slot];
}
double loomrt::gemmClockStart(loomrt_ctx *) { return now(); }
void loomrt::gemmClockStop(loomrt_ctx *rt, double start) {
  rt->gemmSeconds += now() - start;
}

//===----------------------------------------------------------------------===//
// Collectives: named, numbered, then handed to the transport
//===----------------------------------------------------------------------===//

namespace {

/// The rank that this thread runs (one per process under mpirun, one per
/// thread with --loopback), for the fatal-signal report.
thread_local loomrt_ctx *runningRank = nullptr;
const char *programName = "model";
/// Whether the step runs in host memory (the CPU backend), read once when
/// the report is installed: a signal handler must not build deviceOps().
bool hostMemoryBackend = true;
/// What the process as a whole is doing, for a fault on a thread that runs
/// no rank: starting (MPI_Init, the ranks' agreement on their options),
/// running its ranks, or finishing (MPI_Finalize).
enum class ProcessPhase { kStarting, kRunning, kFinishing };
std::atomic<ProcessPhase> processPhase{ProcessPhase::kStarting};

/// Text built without allocating, for a signal handler.
struct SignalText {
  char text[2048];
  size_t size = 0;
  SignalText &operator<<(const char *part) {
    while (part && *part && size + 1 < sizeof(text))
      text[size++] = *part++;
    return *this;
  }
  /// `value` in hexadecimal, as 0x1f.
  SignalText &hex(uintptr_t value) {
    char digits[2 * sizeof(value)];
    int n = 0;
    do
      digits[n++] = "0123456789abcdef"[value % 16];
    while ((value /= 16) && n < int(sizeof(digits)));
    *this << "0x";
    while (n && size + 1 < sizeof(text))
      text[size++] = digits[--n];
    return *this;
  }
  SignalText &operator<<(long long value) {
    char digits[24];
    int n = 0;
    unsigned long long magnitude =
        value < 0 ? 0ull - (unsigned long long)value : value;
    do
      digits[n++] = char('0' + magnitude % 10);
    while ((magnitude /= 10) && n < 24);
    if (value < 0)
      *this << "-";
    while (n && size + 1 < sizeof(text))
      text[size++] = digits[--n];
    return *this;
  }
};

struct sigaction previousActions[NSIG];
std::atomic<bool> reported{false};

/// Writes which rank, step and op the program stopped in, and why, once;
/// `address` is where an invalid access faulted, when the kernel says
/// (null otherwise). Async-signal-safe: no allocation, one write.
void writeStopReport(const char *why, bool accessFault,
                     const void *address = nullptr) {
  if (reported.exchange(true))
    return;
  SignalText line;
  line << programName << ": ";
  loomrt_ctx *rt = runningRank;
  if (rt) {
    line << "rank " << (long long)rt->worldRank;
    for (int a = 0; a < rt->model->num_axes; ++a)
      line << (a ? ", " : " (") << rt->model->axis_names[a] << "="
           << (long long)rt->coords[size_t(a)];
    line << (rt->model->num_axes ? "): " : ": ");
  }
  line << why;
  if (address)
    line.hex(reinterpret_cast<uintptr_t>(address)) << ")";
  if (!rt) {
    // A thread that runs no rank: the main thread before or after the
    // ranks, or one of MPI's or the transport's own.
    ProcessPhase phase = processPhase.load();
    line << (phase == ProcessPhase::kStarting
                 ? " as the process started, before its ranks ran"
             : phase == ProcessPhase::kRunning
                 ? " on a thread that runs no rank, as the ranks ran"
                 : " as the process finished, after its ranks ran");
  }
  if (rt) {
    if (rt->stepNumber == 0)
      line << " before the first step";
    else
      line << (rt->inStep ? " in step " : " after step ")
           << (long long)rt->stepNumber;
    if (rt->openCollective)
      line << ", in " << rt->openCollective->c_str();
    else if (rt->openKernel >= 0)
      line << ", in kernel #" << (long long)(rt->openKernel + 1) << " "
           << rt->model->kernels[rt->openKernel].op << " at "
           << rt->model->kernels[rt->openKernel].at;
  }
#ifdef LOOMRT_ADDRESS_SANITIZER
  accessFault = false;
#endif
  if (!accessFault)
    line << "\n";
  else
    line << (hostMemoryBackend
                 ? "; a build with loomc --sanitize -o reports the faulting "
                   "access\n"
                 : "; compute-sanitizer, or the program on the CPU "
                   "(runtime/tools/cuda-on-cpu.py --sanitize), reports the "
                   "faulting access\n");
  ssize_t ignored = write(2, line.text, line.size);
  (void)ignored;
}

/// Reports a fault, then hands the signal to the handler that was there
/// before (Open MPI's prints a backtrace) or to the default action, so the
/// process still ends by it. A fault the kernel raised (an invalid access,
/// a division by zero) is left to happen again as the handler returns, so
/// that the next handler sees the fault itself (its address), not a signal
/// sent by this one.
[[maybe_unused]] void reportFatalSignal(int signal, siginfo_t *info, void *) {
  bool byKernel = info && info->si_code > 0;
  bool access = signal == SIGSEGV || signal == SIGBUS;
  const void *address = byKernel && access ? info->si_addr : nullptr;
  writeStopReport(
      signal == SIGSEGV
          ? (address ? "fatal signal 11 (SIGSEGV, an invalid memory access at "
                     : "fatal signal 11 (SIGSEGV, an invalid memory access)")
      : signal == SIGBUS
          ? (address ? "fatal signal 7 (SIGBUS, an invalid memory access at "
                     : "fatal signal 7 (SIGBUS, an invalid memory access)")
      : signal == SIGFPE ? "fatal signal 8 (SIGFPE, an arithmetic fault)"
      : signal == SIGABRT
          ? "fatal signal 6 (SIGABRT, the program aborted: a failed check)"
          : "fatal signal 4 (SIGILL, an illegal instruction)",
      signal != SIGABRT, address);
  sigaction(signal, &previousActions[signal], nullptr);
  if (!byKernel)
    raise(signal);
}

/// Under loomc --sanitize, the sanitizers catch faults and report the
/// access; the report of where the program was follows theirs.
void installFatalSignalReport(const char *program) {
  programName = program;
  hostMemoryBackend = deviceOps().hostMemory;
#ifdef LOOMRT_ADDRESS_SANITIZER
  __sanitizer_set_death_callback([] {
    writeStopReport("stopped by the sanitizer (its report is above)", false);
  });
#else
  struct sigaction action = {};
  action.sa_sigaction = reportFatalSignal;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(signal, &action, &previousActions[signal]);
#endif
}

/// For testing the report: LOOMRT_TEST_FAULT="RANK:K" makes that rank
/// fault (SIGSEGV) at the start of kernel #K (numbered from 1, as
/// --profile numbers them) of its first step, "RANK:#N"
/// at the start of its collective #N, "RANK:after" after its last step;
/// "PROCESS:start" and "PROCESS:finish" make that process (0 with
/// --loopback) fault before its ranks run and as it finishes, and with
/// --loopback "0:running" makes the main thread fault while the ranks'
/// threads run: each on a thread that runs no rank; ":abort", ":bus", ":fpe" or ":ill" after any of them
/// raises SIGABRT, SIGBUS, SIGFPE or SIGILL instead, and ":access" makes
/// it a real invalid access (a write at 0x1008), where the others are
/// sent by raise(). Read once per process.
struct TestFault {
  enum When {
    kNever,
    kKernel,
    kCollective,
    kWait,
    kClobber,
    kAfterSteps,
    kStart,
    kRunning,
    kFinish
  };
  When when = kNever;
  int rank = -1, signal = SIGSEGV;
  long number = -1; // the kernel's (from 1) or the collective's (from 0)
  bool access = false;
  // For kClobber: which bytes the plan fault writes (LOOMRT_CHECK_STARTED).
  bool result = false, member = false;

  static const TestFault &get() {
    static const TestFault fault = parse(getenv("LOOMRT_TEST_FAULT"));
    return fault;
  }

  static TestFault parse(const char *text) {
    TestFault fault;
    if (!text)
      return fault;
    for (auto [suffix, raised] :
         {std::pair{":abort", SIGABRT}, std::pair{":bus", SIGBUS},
          std::pair{":fpe", SIGFPE}, std::pair{":ill", SIGILL}})
      if (strstr(text, suffix))
        fault.signal = raised;
    fault.access = strstr(text, ":access") != nullptr;
    fault.result = strstr(text, ":result") != nullptr;
    fault.member = strstr(text, ":member") != nullptr;
    char word[8] = {};
    if (sscanf(text, "%d:%7[a-z]", &fault.rank, word) == 2) {
      fault.when = !strcmp(word, "after")     ? kAfterSteps
                   : !strcmp(word, "wait")    ? kWait
                   : !strcmp(word, "clobber") ? kClobber
                   : !strcmp(word, "start")   ? kStart
                   : !strcmp(word, "running") ? kRunning
                   : !strcmp(word, "finish")  ? kFinish
                                              : kNever;
      return fault;
    }
    if (sscanf(text, "%d:#%ld", &fault.rank, &fault.number) == 2)
      fault.when = kCollective;
    else if (sscanf(text, "%d:%ld", &fault.rank, &fault.number) == 2)
      fault.when = kKernel;
    return fault;
  }

  void happen() const {
    if (access)
      *reinterpret_cast<volatile char *>(uintptr_t(0x1008)) = 0;
    else
      raise(signal);
  }
};

/// The test hook's faults in a rank: `kernel` is the kernel's index (from
/// 0), -2 at the end of the steps, or -1 with a collective's number.
void testFault(loomrt_ctx *rt, int kernel, long collective) {
  const TestFault &fault = TestFault::get();
  if (fault.rank != rt->worldRank || (rt->stepNumber > 1 && kernel != -2))
    return;
  if ((fault.when == TestFault::kKernel && kernel >= 0 &&
       kernel + 1 == fault.number) ||
      (fault.when == TestFault::kAfterSteps && kernel == -2) ||
      (fault.when == TestFault::kWait && kernel == -3) ||
      (fault.when == TestFault::kCollective && collective >= 0 &&
       collective == fault.number))
    fault.happen();
}

/// The test hook's faults outside the ranks, in process `processRank`.
void testProcessFault(int processRank, TestFault::When when) {
  const TestFault &fault = TestFault::get();
  if (fault.when == when && fault.rank == processRank)
    fault.happen();
}

} // namespace

namespace {

/// One collective as the runtime sees it: named and numbered for messages
/// ("collective #4 all_gather over [tp] (SITE)"; the sequence number counts
/// this rank's collectives, so ranks that disagree are easy to spot) and,
/// under --profile, timed on the rank's clock (CPU) or stream (CUDA) from
/// call to return, with the bytes this rank puts in.
class Collective {
public:
  Collective(loomrt_ctx *rt, const char *op, const int *axes, int numAxes,
             const char *site, int dtype, int64_t count)
      : rt(rt) {
    // For testing the watchdog: LOOMRT_TEST_STALL="RANK:SECONDS[:N]" holds
    // one rank back before its collective #N (default 0, the first; a later
    // one meets communicators that already exist). Read once per process.
    static const struct Stall {
      int rank = -1;
      double seconds = 0;
      long at = 0;
      Stall() {
        const char *text = getenv("LOOMRT_TEST_STALL");
        if (text && sscanf(text, "%d:%lf:%ld", &rank, &seconds, &at) < 2)
          rank = -1;
      }
    } stall;
    if (stall.rank == rt->worldRank && rt->sequence == uint64_t(stall.at))
      usleep(useconds_t(stall.seconds * 1e6));
    std::string kind = std::string(op) + " over " + axesText(rt, axes, numAxes);
    what = format("collective #%llu %s (%s)", (unsigned long long)rt->sequence,
                  kind.c_str(), site);
    rt->openCollective = &what;
    if (rt->startedFuture >= 0) {
      rt->startedAxes[rt->startedFuture].insert(axes, axes + numAxes);
      auto &[first, count] = rt->startedCollectives[rt->startedFuture];
      if (!count++)
        first = what;
    }
    testFault(rt, -1, long(rt->sequence++));
    if (!rt->profiling)
      return;
    size_t i = 0;
    while (i < rt->collectives.size() && rt->collectives[i].label != kind)
      ++i;
    if (i == rt->collectives.size())
      rt->collectives.push_back({kind});
    index = int(i);
    rt->collectives[i].bytes += double(count) * double(elementBytes(dtype));
    ++rt->collectives[i].calls;
    begin = deviceOps().profileMark();
  }
  ~Collective() {
    rt->openCollective = nullptr;
    if (rt->profiling)
      rt->collectiveRecords.push_back(
          {index, begin, deviceOps().profileMark()});
  }

  std::string what;

private:
  loomrt_ctx *rt;
  int index = 0;
  uint64_t begin = 0;
};

} // namespace

extern "C" int64_t loomrt_group_rank(loomrt_ctx *rt, const int *axes,
                                     int numAxes) {
  int64_t index = 0;
  for (int i = 0; i < numAxes; ++i)
    index = index * rt->model->axis_sizes[axes[i]] + rt->coords[axes[i]];
  return index;
}

extern "C" void loomrt_kernel_begin(loomrt_ctx *rt, int kernel) {
  rt->openKernel = kernel;
  testFault(rt, kernel, -1);
  if (rt->profiling)
    rt->openMark = deviceOps().profileMark();
}

extern "C" void loomrt_kernel_end(loomrt_ctx *rt, int kernel) {
  rt->openKernel = -1;
  if (rt->profiling)
    rt->records.push_back({kernel, rt->openMark, deviceOps().profileMark()});
}

ProfiledPart::ProfiledPart(loomrt_ctx *rt, const char *name)
    : rt(rt->profiling && rt->openKernel >= 0 ? rt : nullptr) {
  if (!this->rt)
    return;
  std::vector<loomrt_ctx::PartStats> &parts = rt->parts;
  while (part < parts.size() &&
         (parts[part].kernel != rt->openKernel || parts[part].name != name))
    ++part;
  if (part == parts.size())
    parts.push_back({rt->openKernel, name});
  begin = deviceOps().profileMark();
}

ProfiledPart::~ProfiledPart() {
  if (rt)
    rt->partRecords.push_back({int(part), begin, deviceOps().profileMark()});
}

void loomrt::runModelStep(loomrt_ctx *rt, const loomrt_model *model,
                          char *arena) {
  model->step(rt, arena);
  if (!rt->outstanding.empty())
    abortJob(rt,
             format("the step ended with future %d started and not waited "
                    "for (loomrt_wait)",
                    *rt->outstanding.begin()),
             5);
  rt->transport->endStep(rt);
}

bool loomrt::everyRank(loomrt_ctx *rt, bool mine, const std::string &what) {
  double failed = mine ? 0.0 : 1.0;
  rt->transport->reduceDoubles(rt, &failed, 1, true, what);
  return failed == 0.0;
}

extern "C" void loomrt_fail(loomrt_ctx *rt, const char *site,
                            const char *message) {
  abortJob(rt, std::string(site) + ": " + message, 5);
}

/// On a backend with streams, a collective issued while started ones over
/// a shared axis are outstanding runs on the communication stream too,
/// behind them (a communicator runs its work in the order issued), and the
/// rank's later work waits for it. Over other axes it runs on the rank's
/// stream, beside them (each stream has its own staging buffers): a
/// layer's tensor-parallel collectives do not wait for the next layer's
/// FSDP gathers.
class InOrderWithStarted {
public:
  InOrderWithStarted(loomrt_ctx *rt, const int *axes, int numAxes)
      : active(rt->startedFuture < 0 && deviceOps().beginStarted &&
               sharesAxisWithOutstanding(rt, axes, numAxes)) {
    if (active)
      deviceOps().beginStarted();
  }
  ~InOrderWithStarted() {
    if (!active)
      return;
    deviceOps().endStarted(kInOrder);
    deviceOps().waitStarted(kInOrder);
  }
  /// The future number such a collective goes by.
  static constexpr int kInOrder = -1;

private:
  static bool sharesAxisWithOutstanding(loomrt_ctx *rt, const int *axes,
                                        int numAxes) {
    for (int future : rt->outstanding) {
      auto started = rt->startedAxes.find(future);
      if (started == rt->startedAxes.end())
        continue;
      for (int i = 0; i < numAxes; ++i)
        if (started->second.count(axes[i]))
          return true;
    }
    return false;
  }

  bool active;
};

extern "C" void loomrt_start_begin(loomrt_ctx *rt, int future) {
  if (future < 0 || rt->startedFuture >= 0 || rt->outstanding.count(future))
    abortJob(rt,
             format("loomrt_start_begin(%d): %s", future,
                    future < 0 ? "futures are numbered from 0"
                    : rt->startedFuture >= 0
                        ? "another future is being started"
                        : "that future is started and not waited for"),
             5);
  rt->startedFuture = future;
  rt->startedAxes[future].clear();
  rt->startedCollectives.erase(future);
  if (deviceOps().beginStarted)
    deviceOps().beginStarted();
}

extern "C" void loomrt_start_end(loomrt_ctx *rt, int future) {
  if (rt->startedFuture != future)
    abortJob(rt,
             format("loomrt_start_end(%d) without loomrt_start_begin(%d)",
                    future, future),
             5);
  if (deviceOps().endStarted)
    deviceOps().endStarted(future);
  rt->startedFuture = -1;
  rt->outstanding.insert(future);
}

extern "C" void loomrt_wait(loomrt_ctx *rt, int future) {
  if (!rt->outstanding.erase(future))
    abortJob(rt, format("loomrt_wait(%d): that future is not started", future),
             5);
  rt->startedAxes.erase(future);
  // Most of a started collective's progress happens here: a fault in it
  // names what it waited for.
  auto &[first, count] = rt->startedCollectives[future];
  std::string waiting =
      "the wait for " +
      (count ? first : std::string("a future without collectives")) +
      (count > 1 ? format(" and %d more", count - 1) : std::string());
  rt->startedCollectives.erase(future);
  rt->openCollective = &waiting;
  testFault(rt, -3, -1);
  rt->transport->waitStarted(rt, future);
  auto after = rt->afterWait.find(future);
  if (after != rt->afterWait.end()) {
    for (std::function<void()> &finish : after->second)
      finish();
    rt->afterWait.erase(after);
  }
  if (deviceOps().waitStarted)
    deviceOps().waitStarted(future);
  rt->openCollective = nullptr;
}

extern "C" void loomrt_all_reduce(loomrt_ctx *rt, const char *site,
                                  const int *axes, int numAxes, int dtype,
                                  int reduction, const void *in, void *out,
                                  int64_t count) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  Collective c(rt,
               reduction == LOOMRT_MAX ? "all_reduce(max)" : "all_reduce(sum)",
               axes, numAxes, site, dtype, count);
  rt->transport->allReduce(rt, c.what, axes, numAxes, dtype, reduction, in, out,
                           count);
}

extern "C" void loomrt_all_gather(loomrt_ctx *rt, const char *site,
                                  const int *axes, int numAxes, int dtype,
                                  const void *in, void *out, int64_t outer,
                                  int64_t chunk) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  Collective c(rt, "all_gather", axes, numAxes, site, dtype, outer * chunk);
  rt->transport->allGather(rt, c.what, axes, numAxes, dtype, in, out, outer,
                           chunk);
}

extern "C" void loomrt_reduce_scatter(loomrt_ctx *rt, const char *site,
                                      const int *axes, int numAxes, int dtype,
                                      int reduction, const void *in, void *out,
                                      int64_t outer, int64_t chunk) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  Collective c(rt, "reduce_scatter", axes, numAxes, site, dtype,
               outer * chunk * groupSize(rt, axes, numAxes));
  rt->transport->reduceScatter(rt, c.what, axes, numAxes, dtype, reduction, in,
                               out, outer, chunk);
}

extern "C" void loomrt_combined(loomrt_ctx *rt, const char *site, int kind,
                                const int *axes, int numAxes, int reduction,
                                const loomrt_member *members, int numMembers) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  int64_t n = groupSize(rt, axes, numAxes);
  // A reduction adds elements of one type. A gather moves bits, so its
  // members may differ in type: it moves units of the smallest element
  // size among them, which divides every member's bytes.
  int dtype = members[0].dtype;
  for (int i = 1; i < numMembers; ++i) {
    if (kind != LOOMRT_ALL_GATHER && members[i].dtype != dtype)
      loomrt_fail(rt, site,
                  "the members of a combined reduction differ in type");
    if (elementBytes(members[i].dtype) < elementBytes(dtype))
      dtype = members[i].dtype;
  }
  size_t unit = elementBytes(dtype);
  // Each member's bytes a rank in the packed buffer: its input, or for
  // reduce_scatter one of its n pieces (the buffer is [n][total], so that
  // piece p of every member is contiguous).
  std::vector<size_t> start(size_t(numMembers) + 1, 0);
  for (int i = 0; i < numMembers; ++i)
    start[size_t(i) + 1] =
        start[size_t(i)] + size_t(members[i].outer * members[i].chunk) *
                               elementBytes(members[i].dtype);
  size_t total = start[size_t(numMembers)];
  const LoopbackOps &ops = *deviceOps().loopback;
  size_t packedBytes = total * size_t(kind == LOOMRT_REDUCE_SCATTER ? n : 1),
         resultBytes = total * size_t(kind == LOOMRT_ALL_GATHER ? n : 1);
  // Started on the host, the transport may complete it at the wait, after
  // other combined collectives have used the staging slots: it gets
  // buffers of its own, which its unpacking keeps alive. (Streams order
  // the staging slots' uses on a GPU.)
  bool deferred = rt->startedFuture >= 0 && deviceOps().hostMemory;
  std::shared_ptr<std::vector<char>> owned;
  if (deferred)
    owned = std::make_shared<std::vector<char>>(
        packedBytes + (kind == LOOMRT_ALL_REDUCE ? 0 : resultBytes));
  char *packed =
      deferred ? owned->data()
               : static_cast<char *>(ops.staging(kCombinedSlots, packedBytes));
  char *result =
      kind == LOOMRT_ALL_REDUCE ? packed // reduced in place
      : deferred
          ? owned->data() + packedBytes
          : static_cast<char *>(ops.staging(kCombinedSlots + 1, resultBytes));
  for (int i = 0; i < numMembers; ++i) {
    const loomrt_member &m = members[i];
    size_t row = size_t(m.chunk) * elementBytes(m.dtype),
           piece = size_t(m.outer) * row;
    if (kind == LOOMRT_REDUCE_SCATTER) // [outer][n][chunk] -> [n][total]
      for (int64_t p = 0; p < n; ++p)
        ops.copy2d(packed + size_t(p) * total + start[size_t(i)], row,
                   static_cast<const char *>(m.in) + size_t(p) * row,
                   size_t(n) * row, row, size_t(m.outer));
    else
      ops.copy2d(packed + start[size_t(i)], piece, m.in, piece, piece, 1);
  }
  std::string name =
      kind == LOOMRT_ALL_GATHER ? "all_gather"
      : kind == LOOMRT_ALL_REDUCE
          ? (reduction == LOOMRT_MAX ? "all_reduce(max)" : "all_reduce(sum)")
          : "reduce_scatter";
  std::string text = format("combined %s of %d", name.c_str(), numMembers);
  int64_t units = int64_t(total / unit);
  Collective c(rt, text.c_str(), axes, numAxes, site, dtype,
               units * (kind == LOOMRT_REDUCE_SCATTER ? n : 1));
  if (kind == LOOMRT_ALL_GATHER)
    rt->transport->allGather(rt, c.what, axes, numAxes, dtype, packed, result,
                             1, units);
  else if (kind == LOOMRT_ALL_REDUCE)
    rt->transport->allReduce(rt, c.what, axes, numAxes, dtype, reduction,
                             packed, result, units);
  else
    rt->transport->reduceScatter(rt, c.what, axes, numAxes, dtype, reduction,
                                 packed, result, 1, units);
  std::vector<loomrt_member> table(members, members + numMembers);
  auto memberBytes = [kind, n](const loomrt_member &m) {
    return size_t(m.outer * m.chunk) * elementBytes(m.dtype) *
           size_t(kind == LOOMRT_ALL_GATHER ? n : 1);
  };
  // LOOMRT_CHECK_STARTED (StartedChecker): the members' results, which the
  // wait writes, hold 0xff until then, and the wait checks that they do.
  bool poisoned = deferred && checkingStarted();
  if (poisoned)
    for (const loomrt_member &m : table)
      memset(m.out, 0xff, memberBytes(m));
  // The test hook's plan fault ":member": member 0's result written after
  // the start of the rank's combined collectives of step 1.
  const TestFault &fault = TestFault::get();
  if (poisoned && fault.when == TestFault::kClobber && fault.member &&
      fault.rank == rt->worldRank && rt->stepNumber == 1 &&
      memberBytes(table[0]))
    static_cast<char *>(table[0].out)[0] = 0;
  auto unpack = [&ops, kind, n, total, table, start, result, owned, poisoned,
                 memberBytes, rt, what = c.what] {
    for (size_t i = 0; i < table.size(); ++i) {
      const loomrt_member &m = table[i];
      size_t row = size_t(m.chunk) * elementBytes(m.dtype),
             piece = size_t(m.outer) * row;
      const char *place = static_cast<const char *>(m.out);
      if (poisoned && std::any_of(place, place + memberBytes(m),
                                  [](char b) { return b != char(0xff); }))
        abortJob(rt,
                 format("%s: the result of its member %zu changed between "
                        "its start and its wait (LOOMRT_CHECK_STARTED): an "
                        "op the plan runs in between wrote it",
                        what.c_str(), i),
                 5);
      if (kind == LOOMRT_ALL_GATHER) // [n][total] -> [outer][n][chunk]
        for (int64_t p = 0; p < n; ++p)
          ops.copy2d(static_cast<char *>(m.out) + size_t(p) * row,
                     size_t(n) * row, result + size_t(p) * total + start[i],
                     row, row, size_t(m.outer));
      else
        ops.copy2d(m.out, piece, result + start[i], piece, piece, 1);
    }
  };
  if (deferred)
    rt->afterWait[rt->startedFuture].push_back(unpack);
  else
    unpack();
}

extern "C" void loomrt_all_slice(loomrt_ctx *rt, const int *axes, int numAxes,
                                 int dtype, const void *in, void *out,
                                 int64_t outer, int64_t chunk) {
  // Local: every rank keeps its own piece of [outer][n][chunk].
  int64_t n = groupSize(rt, axes, numAxes),
          r = loomrt_group_rank(rt, axes, numAxes);
  loomrt_extract(dtype, in, out, outer, n * chunk, chunk, r * chunk, 1);
}

extern "C" void loomrt_all_to_all(loomrt_ctx *rt, const char *site,
                                  const int *axes, int numAxes, int dtype,
                                  const void *in, void *out, int rank,
                                  const int64_t *shape, int splitDim,
                                  int concatDim, const int *splitAxes) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  // Group rank q's piece: the index of its coordinates over splitAxes.
  std::vector<int64_t> chunkOf;
  int64_t n = groupSize(rt, axes, numAxes);
  if (splitAxes && !std::equal(axes, axes + numAxes, splitAxes)) {
    const int64_t *sizes = rt->model->axis_sizes;
    for (int64_t q = 0; q < n; ++q) {
      std::vector<int64_t> coordinate(static_cast<size_t>(numAxes));
      int64_t rest = q;
      for (int i = numAxes; i-- > 0;) {
        coordinate[size_t(i)] = rest % sizes[axes[i]];
        rest /= sizes[axes[i]];
      }
      int64_t chunk = 0;
      for (int j = 0; j < numAxes; ++j) {
        int at = int(std::find(axes, axes + numAxes, splitAxes[j]) - axes);
        chunk = chunk * sizes[splitAxes[j]] + coordinate[size_t(at)];
      }
      chunkOf.push_back(chunk);
    }
  }
  AllToAll layout(n, rank, shape, splitDim, concatDim, std::move(chunkOf));
  Collective c(rt, "all_to_all", axes, numAxes, site, dtype,
               layout.pieceElements * layout.n);
  rt->transport->allToAll(rt, c.what, axes, numAxes, dtype, in, out, layout);
}

extern "C" void loomrt_collective_permute(loomrt_ctx *rt, const char *site,
                                          const int *axes, int numAxes,
                                          int dtype, const void *in, void *out,
                                          int64_t count, const int64_t *pairs,
                                          int numPairs) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  Collective c(rt, "collective_permute", axes, numAxes, site, dtype, count);
  rt->transport->permute(rt, c.what, axes, numAxes, dtype, in, out, count,
                         pairs, numPairs);
}

extern "C" void loomrt_broadcast(loomrt_ctx *rt, const char *site,
                                 const int *axes, int numAxes, int dtype,
                                 const void *in, void *out, int64_t count,
                                 int64_t root) {
  InOrderWithStarted inOrder(rt, axes, numAxes);
  Collective c(rt, "broadcast", axes, numAxes, site, dtype, count);
  rt->transport->broadcast(rt, c.what, axes, numAxes, dtype, in, out, count,
                           root);
}

extern "C" void loomrt_send(loomrt_ctx *rt, const char *site, int axis,
                            int64_t offset, int dtype, const void *in,
                            int64_t count) {
  InOrderWithStarted inOrder(rt, &axis, 1);
  Collective c(rt, "send", &axis, 1, site, dtype, count);
  rt->transport->send(rt, c.what, axis, offset, dtype, in, count);
}

extern "C" void loomrt_recv(loomrt_ctx *rt, const char *site, int axis,
                            int64_t offset, int dtype, void *out,
                            int64_t count) {
  InOrderWithStarted inOrder(rt, &axis, 1);
  Collective c(rt, "recv", &axis, 1, site, dtype, count);
  rt->transport->recv(rt, c.what, axis, offset, dtype, out, count);
}

AllToAll::AllToAll(int64_t n, int rank, const int64_t *shape, int splitDim,
                   int concatDim, std::vector<int64_t> chunkOf)
    : n(n), chunkOf(std::move(chunkOf)) {
  int64_t total = 1;
  outer = inner = concatOuter = concatInner = 1;
  for (int d = 0; d < rank; ++d) {
    total *= shape[d];
    int64_t pieceSize = d == splitDim ? shape[d] / n : shape[d];
    if (d < splitDim)
      outer *= shape[d];
    if (d > splitDim)
      inner *= shape[d];
    if (d < concatDim)
      concatOuter *= pieceSize;
    if (d > concatDim)
      concatInner *= pieceSize;
  }
  pieceElements = total / n;
  splitSize = shape[splitDim];
  chunk = splitSize / n;
  concatSize = splitDim == concatDim ? chunk : shape[concatDim];
}

void AllToAll::pack(int dtype, const void *in, void *pieces) const {
  size_t bytes = elementBytes(dtype);
  for (int64_t p = 0; p < n; ++p)
    loomrt_extract(dtype, in,
                   static_cast<char *>(pieces) +
                       size_t(p * pieceElements) * bytes,
                   outer, splitSize, chunk,
                   (chunkOf.empty() ? p : chunkOf[size_t(p)]) * chunk, inner);
}

void AllToAll::unpack(int dtype, const void *piece, int64_t p,
                      void *out) const {
  loomrt_insert(dtype, piece, out, concatOuter, concatSize, concatSize * n,
                p * concatSize, concatInner);
}

//===----------------------------------------------------------------------===//
// Global tensors: where each local element lives in the global tensor
//===----------------------------------------------------------------------===//

namespace {

/// Calls fn(localElement, globalElement, length) for each run of elements
/// contiguous in both the local piece and the global tensor.
template <typename Fn>
void forEachRun(const loomrt_ctx *rt, const loomrt_tensor &t, Fn &&fn) {
  int64_t start[LOOMRT_MAX_RANK], globalStride[LOOMRT_MAX_RANK];
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    globalStride[d] = stride;
    stride *= t.global_shape[d];
  }
  for (int d = 0; d < t.rank; ++d) {
    int64_t block = 0;
    for (int i = 0; i < t.num_dim_axes[d]; ++i) {
      int axis = t.dim_axes[d][i];
      block = block * rt->model->axis_sizes[axis] + rt->coords[axis];
    }
    start[d] = block * t.local_shape[d];
  }
  if (t.rank == 0) {
    fn(int64_t(0), int64_t(0), int64_t(1));
    return;
  }
  int64_t localCount = 1;
  for (int d = 0; d < t.rank; ++d)
    localCount *= t.local_shape[d];
  if (localCount == 0)
    return;
  int64_t runLength = t.local_shape[t.rank - 1];
  int64_t index[LOOMRT_MAX_RANK] = {0};
  for (int64_t local = 0; local < localCount; local += runLength) {
    int64_t global = 0;
    for (int d = 0; d < t.rank; ++d)
      global += (start[d] + index[d]) * globalStride[d];
    fn(local, global, runLength);
    for (int d = t.rank - 2; d >= 0; --d) {
      if (++index[d] < t.local_shape[d])
        break;
      index[d] = 0;
    }
  }
}

/// A rank writes a tensor's piece when it is coordinate 0 on every mesh axis
/// that does not split the tensor, so each element is written exactly once.
bool isWriter(const loomrt_ctx *rt, const loomrt_tensor &t) {
  for (int a = 0; a < rt->model->num_axes; ++a) {
    bool splits = false;
    for (int d = 0; d < t.rank; ++d)
      for (int i = 0; i < t.num_dim_axes[d]; ++i)
        splits |= t.dim_axes[d][i] == a;
    if (!splits && rt->coords[a] != 0)
      return false;
  }
  return true;
}

std::string shapeText(int rank, const int64_t *shape) {
  std::string out = "[";
  for (int d = 0; d < rank; ++d)
    out += format("%s%lld", d ? ", " : "", (long long)shape[d]);
  return out + "]";
}

std::string typeText(const loomrt_tensor &t) {
  return std::string(dtypeText(t.dtype)) + shapeText(t.rank, t.global_shape);
}

/// --steps at most 2^31 - 1; --collective-timeout at most a billion
/// seconds.
constexpr double kMaxSteps = 2147483647.0, kMaxTimeoutSeconds = 1e9;

struct Options {
  uint64_t seed = 0;
  std::string inputs, params, out, saveParams;
  long steps = 1;
  bool bench = false, help = false, stepsGiven = false, loopback = false,
       graph = true, profile = false;
  double timeout = 300.0;
  /// --profile's peaks from LOOMRT_PEAKS (bytes/s, FLOP/s), or 0: measured.
  double peakBytes = 0, peakFlops = 0;
  /// LOOMRT_LOGITS_COLUMNS, or 0.
  int64_t logitsColumns = 0;
};

/// The options that every rank must share, as text (for the check that they
/// do, and its message).
std::string optionsText(const Options &options) {
  return format("--seed %llu --steps %ld%s%s%s --collective-timeout %g%s%s%s%s",
                (unsigned long long)options.seed, options.steps,
                options.bench ? " --bench" : "",
                options.profile ? " --profile" : "",
                options.graph ? "" : " --no-graph", options.timeout,
                options.inputs.empty() ? "" : " --inputs",
                options.params.empty() ? "" : " --params",
                options.out.empty() ? "" : " --out",
                options.saveParams.empty() ? "" : " --save-params");
}

const char *kUsage =
    "usage: mpirun -np N %s [options]\n"
    "       %s --loopback [options]\n"
    "\n"
    "Runs model %s (compiled by loomc from %s) on a mesh of %lld rank(s):\n"
    "one process per rank under mpirun, or every rank as a thread of one\n"
    "process with --loopback.\n"
    "\n"
    "options:\n"
    "  --seed N                 seed of the initial values and synthetic "
    "inputs (default 0;\n"
    "                           decimal, or 0x... hexadecimal)\n"
    "  --inputs FILE            model inputs from a safetensors file (global "
    "tensors);\n"
    "                           otherwise synthetic inputs derived from the "
    "seed\n"
    "  --params FILE            parameters from a safetensors file; otherwise "
    "the\n"
    "                           deterministic initialisers of the model\n"
    "  --out FILE               write the model's outputs (global tensors) as "
    "safetensors\n"
    "  --save-params FILE       write the parameters (global tensors) as "
    "safetensors\n"
    "  --steps N                run N steps (default 1; 10 with --bench or "
    "--profile)\n"
    "  --bench                  time the steps: median per rank and the share "
    "in GEMMs\n"
    "  --collective-timeout S   end the job when a collective (or a step "
    "replayed\n"
    "                           as a CUDA graph) waits S seconds (default "
    "300)\n"
    "  --profile                time every kernel of the step (as --bench "
    "does the step)\n"
    "                           and print each one's share of the step and "
    "the fraction\n"
    "                           of this device's measured bandwidth or "
    "matrix throughput\n"
    "                           it achieves (loomc --report lists the same "
    "kernels)\n"
    "  --loopback               run every rank of the mesh in this process, a "
    "thread\n"
    "                           each, with collectives as copies between their "
    "arenas\n"
    "                           (N ranks on one GPU, or on one CPU without "
    "MPI)\n"
    "  --no-graph               CUDA: launch every step's kernels anew instead "
    "of\n"
    "                           replaying the step as a CUDA graph\n"
    "  -h, --help               print this help\n"
    "\n"
    "environment:\n"
    "  LOOMRT_TRANSPORT=nccl    CUDA: use NCCL even for one rank (1-rank "
    "communicators)\n"
    "  LOOMRT_FAST_KERNELS=0    CUDA: only the plain element-wise kernels, "
    "the reference\n"
    "                           (no 16-byte row kernels, fused attention, "
    "strided GEMM\n"
    "                           plans or 32-bit operand gathers)\n"
    "  LOOMRT_ATTENTION=wmma    CUDA: bf16's fused "
    "attention\n"
    "                           on its WMMA kernel instead of the mma.sync one "
    "(mma)\n"
    "  LOOMRT_ATTENTION=wgmma   CUDA, an experiment: bf16's fused attention "
    "on Hopper's\n"
    "                           warpgroup products (wgmma; sm_90a, 64-wide "
    "heads)\n"
    "  LOOMRT_ATTENTION_TERMS=2 CUDA, an experiment: the mma.sync and wgmma "
    "attention\n"
    "                           multiply V by two of P's three exact bf16 "
    "terms, P to\n"
    "                           about 16 bits (against docs/language.md 11.2; "
    "default 3)\n"
    "  LOOMRT_GEMM_TUNE=1       CUDA: time cuBLASLt's candidate algorithms "
    "for each GEMM\n"
    "                           on first use and keep the fastest that gives "
    "its first\n"
    "                           choice's bits (a note on stderr per GEMM)\n"
    "  LOOMRT_GEMM_EPILOGUE=1   CUDA, an experiment: gelu(x @ w + b, "
    "approximate =\n"
    "                           \"tanh\") and r + (x @ w + b) as one "
    "cuBLASLt GEMM with an\n"
    "                           epilogue (in f32, rounded once; a note on "
    "stderr per\n"
    "                           GEMM) instead of a GEMM and a kernel\n"
    "  LOOMRT_LOGITS_COLUMNS=N  the vocabulary columns of each block of a "
    "cross-entropy's\n"
    "                           logits (default: 32 MiB of them on a CPU; on "
    "a GPU 1/64\n"
    "                           of its memory, at least 96 MiB)\n"
    "  LOOMRT_PACK_GEMMS=1      CPU: pack every GEMM operand instead of "
    "strided plans\n"
    "  LOOMRT_CHECK_STARTED=1   CPU: check that nothing writes a collective "
    "started early\n"
    "                           (--overlap-collectives) or its result before "
    "its wait;\n"
    "                           each runs at once, its result NaN until the "
    "wait (a CUDA\n"
    "                           program refuses it)\n"
    "  LOOMRT_PEAKS=GBPS,TFLOPS --profile's peaks, e.g. a datasheet's "
    "(4800,989), instead\n"
    "                           of measuring them\n";

/// The directory a file of `path` would be made in.
std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "."
         : slash == 0               ? "/"
                                    : path.substr(0, slash);
}

bool parseOptions(int argc, char **argv, Options &options, std::string &error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    size_t equals = arg.find('=');
    bool inlineValue = equals != std::string::npos && arg.rfind("--", 0) == 0;
    std::string name = inlineValue ? arg.substr(0, equals) : arg;
    auto takeValue = [&]() {
      if (inlineValue) {
        value = arg.substr(equals + 1);
        return true;
      }
      // `--out --loopback` is a forgotten value, not a file: a file of that
      // name can be given as `--out=--loopback` or `./--loopback`.
      if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
        error = name + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    // A number in [low, high]: NaN and infinities fail the comparisons,
    // and a count past the bound would wrap when converted.
    auto number = [&](double &out, bool integer, double low, double high,
                      const char *what) {
      char *end = nullptr;
      errno = 0;
      out = strtod(value.c_str(), &end);
      if (value.empty() || *end || errno ||
          (integer && out != std::floor(out)) || !(out >= low) ||
          !(out <= high)) {
        error = name + " needs " + what + ", not '" + value + "'";
        return false;
      }
      return true;
    };
    // A switch takes no value: `--bench=0` must not turn it on.
    auto flag = [&](bool &out, bool on) {
      if (inlineValue) {
        error = name + " takes no value, not '" + arg.substr(equals + 1) + "'";
        return false;
      }
      out = on;
      return true;
    };
    double n = 0;
    if (name == "--help" || name == "-h") {
      if (!flag(options.help, true))
        return false;
    } else if (name == "--bench") {
      if (!flag(options.bench, true))
        return false;
    } else if (name == "--profile") {
      if (!flag(options.profile, true))
        return false;
    } else if (name == "--loopback") {
      if (!flag(options.loopback, true))
        return false;
    } else if (name == "--no-graph") {
      if (!flag(options.graph, false))
        return false;
    } else if (name == "--seed") {
      if (!takeValue())
        return false;
      // Decimal (a leading 0 too: 010 is ten) or 0x hexadecimal, digits
      // only: strtoull alone would take a sign, spaces and octal.
      bool hex = value.size() > 2 && value[0] == '0' &&
                 (value[1] == 'x' || value[1] == 'X');
      std::string digits = hex ? value.substr(2) : value;
      char *end = nullptr;
      errno = 0;
      if (!digits.empty() &&
          digits.find_first_not_of(hex ? "0123456789abcdefABCDEF"
                                       : "0123456789") == std::string::npos)
        options.seed = strtoull(digits.c_str(), &end, hex ? 16 : 10);
      if (!end || *end || errno) {
        error = "--seed needs an integer from 0 to 2^64 - 1 (decimal, or "
                "0x... hexadecimal), not '" +
                value + "'";
        return false;
      }
    } else if (name == "--steps") {
      if (!takeValue() ||
          !number(n, true, 1, kMaxSteps, "an integer from 1 to 2147483647"))
        return false;
      options.steps = long(n);
      options.stepsGiven = true;
    } else if (name == "--collective-timeout") {
      // Past about 292 years a deadline overflows the clock and the wait
      // never ends; a billion seconds is 31 years.
      const char *what = "a number of seconds above 0 and at most 1e9";
      if (!takeValue() || !number(n, false, 0, kMaxTimeoutSeconds, what))
        return false;
      if (n == 0) {
        error = name + " needs " + what + ", not '" + value + "'";
        return false;
      }
      options.timeout = n;
    } else if (name == "--inputs" || name == "--params" || name == "--out" ||
               name == "--save-params") {
      if (!takeValue())
        return false;
      if (value.empty()) {
        error = name + " needs a file name";
        return false;
      }
      (name == "--inputs"   ? options.inputs
       : name == "--params" ? options.params
       : name == "--out"    ? options.out
                            : options.saveParams) = value;
    } else {
      error = "unknown option '" + arg + "' (--help lists the options)";
      return false;
    }
  }
  // A file that cannot be written is found now, not after a long run.
  for (auto [option, path] :
       {std::pair<const char *, const std::string *>{"--out", &options.out},
        {"--save-params", &options.saveParams}}) {
    if (path->empty())
      continue;
    struct stat info;
    std::string problem;
    if (stat(path->c_str(), &info) == 0) {
      if (!S_ISREG(info.st_mode))
        problem = "not a regular file";
      else if (access(path->c_str(), W_OK) != 0)
        problem = strerror(errno);
    } else if (errno == ENOENT) {
      if (access(directoryOf(*path).c_str(), W_OK | X_OK) != 0)
        problem = strerror(errno);
    } else {
      problem = strerror(errno);
    }
    if (!problem.empty()) {
      error = std::string(option) + ": cannot write " + *path + ": " + problem;
      return false;
    }
  }
  // One file by any name (`x`, `./x`, a link): the existing file's identity,
  // or for a new one its directory's and its own name.
  auto fileIdentity = [](const std::string &path) {
    struct stat info;
    if (stat(path.c_str(), &info) == 0)
      return std::make_tuple(info.st_dev, info.st_ino, std::string());
    size_t slash = path.rfind('/');
    std::string name =
        slash == std::string::npos ? path : path.substr(slash + 1);
    if (stat(directoryOf(path).c_str(), &info) != 0)
      return std::make_tuple(dev_t(0), ino_t(0), path);
    return std::make_tuple(info.st_dev, info.st_ino, name);
  };
  if (!options.out.empty() && !options.saveParams.empty() &&
      (options.out == options.saveParams ||
       fileIdentity(options.out) == fileIdentity(options.saveParams))) {
    error = options.out == options.saveParams
                ? "--out and --save-params both name " + options.out +
                      ": the parameters would replace the outputs"
                : "--out " + options.out + " and --save-params " +
                      options.saveParams +
                      " are the same file: the parameters would replace the "
                      "outputs";
    return false;
  }
  if ((options.bench || options.profile) && !options.stepsGiven)
    options.steps = 10;
  const char *peaks = getenv("LOOMRT_PEAKS");
  if (peaks && *peaks) {
    char *end = nullptr;
    double bandwidth = strtod(peaks, &end), throughput = 0;
    if (end != peaks && *end == ',') {
      const char *second = end + 1;
      throughput = strtod(second, &end);
      if (end == second || *end)
        throughput = 0;
    }
    if (!(bandwidth > 0) || !(throughput > 0) || !std::isfinite(bandwidth) ||
        !std::isfinite(throughput)) {
      error = std::string("LOOMRT_PEAKS must be GB/s,TFLOP/s (two positive "
                          "numbers, as 4800,989), not '") +
              peaks + "'";
      return false;
    }
    options.peakBytes = bandwidth * 1e9;
    options.peakFlops = throughput * 1e12;
  }
  const char *columns = getenv("LOOMRT_LOGITS_COLUMNS");
  if (columns && *columns) {
    char *end = nullptr;
    errno = 0;
    long long value = strtoll(columns, &end, 10);
    if (*end || errno || value <= 0) {
      error = std::string("LOOMRT_LOGITS_COLUMNS must be a positive number "
                          "of columns, not '") +
              columns + "'";
      return false;
    }
    options.logitsColumns = value;
  }
  // On/off switches take 0 or 1 only, so that "false" or "off" is never
  // taken for on (nor, before, LOOMRT_PACK_GEMMS=0 for on).
  for (const char *name :
       {"LOOMRT_FAST_KERNELS", "LOOMRT_GEMM_TUNE", "LOOMRT_PACK_GEMMS",
        "LOOMRT_GEMM_EPILOGUE", "LOOMRT_CHECK_STARTED"}) {
    const char *value = getenv(name);
    if (value && *value && strcmp(value, "0") != 0 && strcmp(value, "1") != 0) {
      error = std::string(name) + " must be 0 or 1, not '" + value + "'";
      return false;
    }
  }
  // The checker runs started collectives at once into host buffers of its
  // own; a CUDA program's buffers are the device's, so asking it to check
  // one must not pass for a check that found nothing.
  if (envSwitch("LOOMRT_CHECK_STARTED", false) && !deviceOps().hostMemory) {
    error = "LOOMRT_CHECK_STARTED=1 checks the CPU backend only, and this "
            "program was built for CUDA: build it with --target=cpu to check "
            "its plan";
    return false;
  }
  const char *attention = getenv("LOOMRT_ATTENTION");
  if (attention && *attention && strcmp(attention, "mma") != 0 &&
      strcmp(attention, "wmma") != 0 && strcmp(attention, "wgmma") != 0) {
    error = std::string("LOOMRT_ATTENTION must be mma, wmma or wgmma, not '") +
            attention + "'";
    return false;
  }
  const char *transport = getenv("LOOMRT_TRANSPORT");
  if (transport && *transport && strcmp(transport, "nccl") != 0) {
    error = std::string("LOOMRT_TRANSPORT must be nccl (or unset), not '") +
            transport + "'";
    return false;
  }
  const char *terms = getenv("LOOMRT_ATTENTION_TERMS");
  if (terms && *terms && strcmp(terms, "2") != 0 && strcmp(terms, "3") != 0) {
    error = std::string("LOOMRT_ATTENTION_TERMS must be 2 or 3, not '") +
            terms + "'";
    return false;
  }
  return true;
}

/// The error of the first rank that failed where the ranks agreed to stop:
/// rank 0's reads as a plain error (all ranks usually fail alike), another
/// rank's is named.
void printFirstFailure(const char *program, int rank,
                       const std::string &error) {
  fprintf(stderr, "%s: %serror: %s\n", program,
          rank ? format("rank %d: ", rank).c_str() : "", error.c_str());
}

/// Fills a tensor's local piece from its initialiser.
void initialise(loomrt_ctx *rt, const loomrt_tensor &t, char *arena,
                uint64_t seed) {
  uint64_t hash = fnv1a64(t.name);
  size_t bytes = elementBytes(t.dtype);
  char *base = arena + t.arena_offset;
  forEachRun(rt, t, [&](int64_t local, int64_t global, int64_t length) {
    for (int64_t i = 0; i < length; ++i)
      storeRounded(t.dtype,
                   initialValue(t.init, t.init_a, t.init_b, t.int_bound, seed,
                                hash, uint64_t(global + i)),
                   base + size_t(local + i) * bytes);
  });
}

/// Reads each tensor's local piece from a safetensors file; every rank checks
/// the same header, so a bad file ends every rank with the same message.
bool load(loomrt_ctx *rt, const std::string &path, const loomrt_tensor *tensors,
          int count, const char *what, char *arena, std::string &error) {
  SafetensorsHeader header;
  if (!readSafetensorsHeader(path, header, error))
    return false;
  for (int i = 0; i < count; ++i) {
    const loomrt_tensor &t = tensors[i];
    const TensorEntry *entry = header.find(t.name);
    if (!entry) {
      error = path + ": no tensor '" + t.name + "' (the " + what + " " +
              t.name + " is " + typeText(t) + ")";
      return false;
    }
    bool sameShape =
        int(entry->shape.size()) == t.rank &&
        std::equal(entry->shape.begin(), entry->shape.end(), t.global_shape);
    if (int(entry->dtype) != t.dtype || !sameShape) {
      std::string found =
          dtypeText(int(entry->dtype)) +
          shapeText(int(entry->shape.size()), entry->shape.data());
      error = path + ": tensor '" + t.name + "' is " + found + " but the " +
              what + " is " + typeText(t);
      return false;
    }
  }
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    error = path + ": cannot open: " + strerror(errno);
    return false;
  }
  for (int i = 0; i < count; ++i) {
    const loomrt_tensor &t = tensors[i];
    const TensorEntry *entry = header.find(t.name);
    size_t bytes = elementBytes(t.dtype);
    bool ok = true;
    forEachRun(rt, t, [&](int64_t local, int64_t global, int64_t length) {
      size_t size = size_t(length) * bytes;
      off_t offset =
          off_t(header.dataStart + entry->begin + size_t(global) * bytes);
      if (ok && pread(fd, arena + t.arena_offset + size_t(local) * bytes, size,
                      offset) != ssize_t(size))
        ok = false;
    });
    if (!ok) {
      error =
          path + ": reading tensor '" + t.name + "' failed: " + strerror(errno);
      close(fd);
      return false;
    }
  }
  close(fd);
  return true;
}

/// Writes global tensors: rank 0 writes the header and sizes the file, then
/// each element is written once by its writer with positioned writes, then
/// a barrier. Returns false (with the same decision on every rank) on error.
bool save(loomrt_ctx *rt, const std::string &path, const loomrt_tensor *tensors,
          int count, const char *const *data) {
  std::vector<TensorEntry> entries;
  for (int i = 0; i < count; ++i) {
    TensorEntry entry;
    entry.name = tensors[i].name;
    entry.dtype = DType(tensors[i].dtype);
    entry.shape.assign(tensors[i].global_shape,
                       tensors[i].global_shape + tensors[i].rank);
    entries.push_back(entry);
  }
  uint64_t dataStart = 0;
  std::string head = buildSafetensorsHeader(
      entries, {{"format", "pt"}, {"model", rt->model->name}}, dataStart);
  // errno, or kNotRegular: a FIFO, a device or anything else that the
  // ranks cannot each write their part of at an offset.
  constexpr int kNotRegular = -1;
  int status = 0;
  // A mark that rank 0 puts where the data starts (a writer overwrites it):
  // a rank that does not read it back has opened another file of that name
  // (a stale one on its own machine's disk), and its part would be lost.
  uint64_t total = dataStart + (entries.empty() ? 0 : entries.back().end);
  bool marked = total - dataStart >= sizeof(int32_t) && rt->worldSize > 1;
  int32_t mark = 0;
  if (rt->worldRank == 0) {
    // Non-blocking: a FIFO without a reader fails at once (ENXIO) instead of
    // waiting for one.
    errno = 0;
    int fd =
        open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, 0644);
    struct stat info;
    if (fd < 0 && errno == ENXIO) // a FIFO without a reader
      status = kNotRegular;
    else if (fd < 0 || fstat(fd, &info) != 0)
      status = errno ? errno : EIO;
    else if (!S_ISREG(info.st_mode))
      status = kNotRegular;
    else if (write(fd, head.data(), head.size()) != ssize_t(head.size()) ||
             ftruncate(fd, off_t(total)) != 0)
      status = errno ? errno : EIO;
    if (status == 0 && marked) {
      mark = int32_t(std::random_device()() | 1u);
      if (pwrite(fd, &mark, sizeof(mark), off_t(dataStart)) !=
          ssize_t(sizeof(mark)))
        status = errno ? errno : EIO;
    }
    if (fd >= 0)
      close(fd);
  }
  rt->transport->shareLeaderInt(
      rt, &status, "sharing whether " + path + " could be created");
  if (status != 0) {
    if (rt->worldRank == 0)
      fprintf(stderr, "loom: error: cannot write %s: %s\n", path.c_str(),
              status == kNotRegular ? "not a regular file" : strerror(status));
    return false;
  }
  int fd = open(path.c_str(), marked ? O_RDWR : O_WRONLY);
  int failed = fd < 0 ? errno : 0;
  if (marked) {
    int32_t shared = mark, seen = 0;
    rt->transport->shareLeaderInt(rt, &shared, "sharing the mark of " + path);
    if (fd >= 0 && (pread(fd, &seen, sizeof(seen), off_t(dataStart)) !=
                        ssize_t(sizeof(seen)) ||
                    seen != shared)) {
      fprintf(stderr,
              "loom: rank %d: error: %s is not the file that rank 0 created "
              "(another file of that name, on another machine?); every rank "
              "must write to the same file\n",
              rt->worldRank, path.c_str());
      failed = EXDEV;
    } else if (failed) {
      fprintf(stderr, "loom: rank %d: error: cannot open %s: %s\n",
              rt->worldRank, path.c_str(), strerror(failed));
    }
    // Nothing is written before every rank has read the mark.
    if (!everyRank(rt, failed == 0,
                   "sharing whether every rank can write " + path)) {
      if (fd >= 0)
        close(fd);
      return false;
    }
  }
  for (int i = 0; i < count && !failed; ++i) {
    const loomrt_tensor &t = tensors[i];
    if (!isWriter(rt, t))
      continue;
    size_t bytes = elementBytes(t.dtype);
    forEachRun(rt, t, [&](int64_t local, int64_t global, int64_t length) {
      size_t size = size_t(length) * bytes;
      off_t offset =
          off_t(dataStart + entries[i].begin + size_t(global) * bytes);
      if (!failed && pwrite(fd, data[i] + size_t(local) * bytes, size,
                            offset) != ssize_t(size))
        failed = errno ? errno : EIO;
    });
  }
  if (fd >= 0)
    close(fd);
  double anyFailed = failed;
  rt->transport->reduceDoubles(rt, &anyFailed, 1, true,
                               "sharing whether " + path + " was written");
  if (anyFailed) {
    if (failed)
      fprintf(stderr, "loom: rank %d: error: writing %s failed: %s\n",
              rt->worldRank, path.c_str(), strerror(failed));
    return false;
  }
  return true;
}

/// Prints each output on rank 0: a scalar's value, or a tensor's sum and
/// largest magnitude over its global elements.
void report(loomrt_ctx *rt, char *arena) {
  const loomrt_model *m = rt->model;
  for (int i = 0; i < m->num_outputs; ++i) {
    const loomrt_tensor &t = m->outputs[i];
    double local[2] = {0.0, 0.0};
    if (isWriter(rt, t)) {
      const char *base = arena + t.arena_offset;
      forEachRun(rt, t, [&](int64_t start, int64_t, int64_t length) {
        for (int64_t e = start; e < start + length; ++e) {
          double v = isInteger(t.dtype)
                         ? double(loadInt(t.dtype, base, e))
                         : double(loomrt::load(t.dtype, base, e));
          local[0] += v;
          local[1] = std::max(local[1], std::fabs(v));
        }
      });
    }
    rt->transport->reduceDoubles(rt, &local[0], 1, false,
                                 "summing the outputs");
    rt->transport->reduceDoubles(rt, &local[1], 1, true, "summing the outputs");
    double sum = local[0], largest = local[1];
    if (rt->worldRank != 0)
      continue;
    if (t.rank == 0)
      printf("%s = %.9g\n", t.name, sum);
    else
      printf("%s: %s sum = %.9g, max|x| = %.9g\n", t.name, typeText(t).c_str(),
             sum, largest);
  }
  fflush(stdout);
}

} // namespace

//===----------------------------------------------------------------------===//
// The process
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_HAVE_NCCL
Transport *loomrt::ncclTransport() { return nullptr; }
#endif

namespace {

/// --profile's table: rank 0's kernels in program order, each with its time
/// per run, its share of the step, and what it achieves against the
/// device's measured peaks (the bound being memory when its FLOPs per byte
/// are below the peaks' ratio, compute otherwise).
void printProfile(loomrt_ctx *rt, const std::vector<double> &stepSeconds,
                  const Options &options) {
  if (rt->worldRank != 0)
    return;
  const DeviceOps &device = deviceOps();
  double peakBytes = options.peakBytes, peakFlops = options.peakFlops;
  std::string source = "given by LOOMRT_PEAKS";
  if (!(peakBytes > 0)) {
    std::string how;
    device.measurePeaks(&peakBytes, &peakFlops, &how);
    source = "measured now (" + how + ")";
  }
  std::vector<double> sorted = stepSeconds;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2], stepsTotal = 0, kernelTotal = 0;
  for (double s : stepSeconds)
    stepsTotal += s;
  const loomrt_model *m = rt->model;
  printf("profile: %zu steps on %s; %s peaks, %s: memory "
         "%.1f GB/s, matrix %.2f TFLOP/s\n",
         stepSeconds.size(), meshPosition(rt).c_str(), device.name,
         source.c_str(), peakBytes * 1e-9, peakFlops * 1e-12);
  // `op` and `at` are as wide as their longest entries (a fusion group
  // names its ops; a batched einsum each of its contractions), so that no
  // name is cut and it reads as loomc --report prints it.
  int opWidth = 32, atWidth = 22;
  for (int k = 0; k < m->num_kernels; ++k) {
    opWidth = std::max(opWidth, int(strlen(m->kernels[k].op)));
    atWidth = std::max(atWidth, int(strlen(m->kernels[k].at)));
  }
  printf("%4s  %-*s %-*s %5s %10s %6s %9s %9s %-7s %7s\n", "#", opWidth, "op",
         atWidth, "at", "runs", "us/run", "share", "GB/s", "TFLOP/s", "bound",
         "of peak");
  double ridge = peakBytes > 0 ? peakFlops / peakBytes : 0;
  for (int k = 0; k < m->num_kernels; ++k) {
    const loomrt_kernel &kernel = m->kernels[k];
    int64_t runs = rt->kernelRuns[size_t(k)];
    double seconds = rt->kernelSeconds[size_t(k)];
    kernelTotal += seconds;
    if (runs == 0) {
      printf("%4d  %-*s %-*s %5s\n", k + 1, opWidth, kernel.op, atWidth,
             kernel.at, "-");
      continue;
    }
    double perRun = seconds / double(runs);
    double bandwidth = perRun > 0 ? kernel.bytes / perRun : 0,
           throughput = perRun > 0 ? kernel.flops / perRun : 0;
    bool compute = kernel.bytes > 0 && kernel.flops / kernel.bytes > ridge;
    double fraction = compute ? throughput / peakFlops : bandwidth / peakBytes;
    printf("%4d  %-*s %-*s %5lld %10.2f %5.1f%% %9.2f %9.4f %-7s "
           "%6.1f%%\n",
           k + 1, opWidth, kernel.op, atWidth, kernel.at,
           (long long)(runs / int64_t(stepSeconds.size())), perRun * 1e6,
           stepsTotal > 0 ? 100.0 * seconds / stepsTotal : 0.0,
           bandwidth * 1e-9, throughput * 1e-12, compute ? "compute" : "memory",
           100.0 * fraction);
    // Its parts (ProfiledPart): launches per step, time per launch, share.
    for (const loomrt_ctx::PartStats &part : rt->parts)
      if (part.kernel == k && part.calls > 0)
        printf("%4s  %-*s %-*s %5lld %10.2f %5.1f%%\n", "", opWidth,
               ("  part: " + part.name).c_str(), atWidth, "",
               (long long)(part.calls / int64_t(stepSeconds.size())),
               1e6 * part.seconds / double(part.calls),
               stepsTotal > 0 ? 100.0 * part.seconds / stepsTotal : 0.0);
  }
  double collectiveTotal = 0;
  for (const loomrt_ctx::CollectiveStats &c : rt->collectives)
    collectiveTotal += c.seconds;
  if (!rt->collectives.empty()) {
    printf("profile: collectives on this rank, from call to return (waiting "
           "for the other ranks included):\n");
    printf("%-44s %10s %10s %6s %12s\n", "  collective", "calls/step",
           "us/call", "share", "bytes/call");
    double steps = double(stepSeconds.size());
    for (const loomrt_ctx::CollectiveStats &c : rt->collectives)
      printf("  %-42.42s %10.0f %10.2f %5.1f%% %12.0f\n", c.label.c_str(),
             double(c.calls) / steps, c.calls ? 1e6 * c.seconds / c.calls : 0,
             stepsTotal > 0 ? 100.0 * c.seconds / stepsTotal : 0.0,
             c.calls ? c.bytes / double(c.calls) : 0.0);
  }
  printf("profile: the kernels take %.1f%% of the step and the collectives "
         "%.1f%% (median step %.3f ms); the rest is copies, launches and "
         "the host\n",
         stepsTotal > 0 ? 100.0 * kernelTotal / stepsTotal : 0.0,
         stepsTotal > 0 ? 100.0 * collectiveTotal / stepsTotal : 0.0,
         median * 1e3);
  fflush(stdout);
}

/// Everything one rank does, on the thread that runs it; returns its exit
/// code (the same on every rank: decisions that could differ are shared).
namespace {

/// LOOMRT_CHECK_STARTED=1 on the CPU: a transport around the real one that
/// checks the memory plan's promise for collectives started early
/// (--overlap-collectives): from its start to its wait, no op writes a
/// started collective's input, and none reads or writes its result. Each
/// one runs at once, into a buffer of its own; its result's bytes in the
/// arena hold 0xff (NaN in every float type) until the wait, which ends
/// the job if its input or those bytes changed and only then moves the
/// result in. An op that read the result early computes with NaNs, which
/// a comparison of outputs shows.
class StartedChecker final : public Transport {
public:
  explicit StartedChecker(Transport &inner) : inner(inner) {}

  const char *name() const override { return inner.name(); }
  void barrier(loomrt_ctx *rt, const std::string &what) override {
    inner.barrier(rt, what);
  }
  void shareLeaderInt(loomrt_ctx *rt, int *value,
                      const std::string &what) override {
    inner.shareLeaderInt(rt, value, what);
  }
  void reduceDoubles(loomrt_ctx *rt, double *values, int count, bool maximum,
                     const std::string &what) override {
    inner.reduceDoubles(rt, values, count, maximum, what);
  }

  void allReduce(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, int reduction, const void *in,
                 void *out, int64_t count) override {
    size_t bytes = size_t(count) * elementBytes(dtype);
    run(rt, what, in, bytes, out, bytes, [&](void *result) {
      inner.allReduce(rt, what, axes, numAxes, dtype, reduction, in, result,
                      count);
    });
  }
  void allGather(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t outer, int64_t chunk) override {
    size_t piece = size_t(outer * chunk) * elementBytes(dtype);
    run(rt, what, in, piece, out, piece * size_t(groupSize(rt, axes, numAxes)),
        [&](void *result) {
          inner.allGather(rt, what, axes, numAxes, dtype, in, result, outer,
                          chunk);
        });
  }
  void reduceScatter(loomrt_ctx *rt, const std::string &what, const int *axes,
                     int numAxes, int dtype, int reduction, const void *in,
                     void *out, int64_t outer, int64_t chunk) override {
    size_t piece = size_t(outer * chunk) * elementBytes(dtype);
    run(rt, what, in, piece * size_t(groupSize(rt, axes, numAxes)), out, piece,
        [&](void *result) {
          inner.reduceScatter(rt, what, axes, numAxes, dtype, reduction, in,
                              result, outer, chunk);
        });
  }

  void allToAll(loomrt_ctx *rt, const std::string &what, const int *axes,
                int numAxes, int dtype, const void *in, void *out,
                const AllToAll &layout) override {
    inner.allToAll(rt, what, axes, numAxes, dtype, in, out, layout);
  }
  void permute(loomrt_ctx *rt, const std::string &what, const int *axes,
               int numAxes, int dtype, const void *in, void *out, int64_t count,
               const int64_t *pairs, int numPairs) override {
    inner.permute(rt, what, axes, numAxes, dtype, in, out, count, pairs,
                  numPairs);
  }
  void broadcast(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t count, int64_t root) override {
    inner.broadcast(rt, what, axes, numAxes, dtype, in, out, count, root);
  }
  void send(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, const void *in, int64_t count) override {
    inner.send(rt, what, axis, offset, dtype, in, count);
  }
  void recv(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, void *out, int64_t count) override {
    inner.recv(rt, what, axis, offset, dtype, out, count);
  }

  void waitStarted(loomrt_ctx *rt, int future) override {
    inner.waitStarted(rt, future);
    auto found = rt->startedChecks.find(future);
    if (found == rt->startedChecks.end())
      return;
    for (loomrt_ctx::StartedCheck &check : found->second) {
      size_t inBytes = check.input.size(), outBytes = check.result.size();
      // An all_reduce in place: its input is its result's place.
      bool shared =
          check.in < check.out + outBytes && check.out < check.in + inBytes;
      if (!shared && memcmp(check.in, check.input.data(), inBytes) != 0)
        abortJob(rt,
                 check.what +
                     ": its input changed between its start and its wait "
                     "(LOOMRT_CHECK_STARTED): an op the plan runs in between "
                     "wrote it, while a transport may still read it",
                 5);
      if (std::any_of(check.out, check.out + outBytes,
                      [](char byte) { return byte != char(0xff); }))
        abortJob(rt,
                 check.what +
                     ": its result's place changed between its start and "
                     "its wait (LOOMRT_CHECK_STARTED): an op the plan runs in "
                     "between wrote it, while a transport may still write it",
                 5);
      memcpy(check.out, check.result.data(), outBytes);
    }
    rt->startedChecks.erase(found);
  }

  void endStep(loomrt_ctx *rt) override { inner.endStep(rt); }
  void watchStep(loomrt_ctx *rt, const std::string &what) override {
    inner.watchStep(rt, what);
  }
  void finish(loomrt_ctx *rt) override { inner.finish(rt); }
  [[noreturn]] void abort(loomrt_ctx *rt, int code) override {
    inner.abort(rt, code);
  }

private:
  /// Runs a collective of `in` into `out` through `collective(result)`: at
  /// once into the check's own result where a future is being started.
  template <typename Collective>
  void run(loomrt_ctx *rt, const std::string &what, const void *in,
           size_t inBytes, void *out, size_t outBytes, Collective collective) {
    int future = rt->startedFuture;
    if (future < 0) {
      collective(out);
      return;
    }
    const char *input = static_cast<const char *>(in);
    loomrt_ctx::StartedCheck check{
        what, input, std::vector<char>(input, input + inBytes),
        static_cast<char *>(out), std::vector<char>(outBytes)};
    rt->runningStartedAtOnce = true;
    collective(check.result.data());
    rt->runningStartedAtOnce = false;
    memset(out, 0xff, outBytes);
    // The test hook's plan fault: the input (or with ":result" the result's
    // place) of the rank's first started collective of step 1 written after
    // its start.
    const TestFault &fault = TestFault::get();
    if (fault.when == TestFault::kClobber && !fault.member &&
        fault.rank == rt->worldRank && rt->stepNumber == 1 &&
        rt->startedChecks.empty()) {
      if (fault.result && outBytes)
        check.out[0] = 0;
      else if (!fault.result && inBytes &&
               !(input < check.out + outBytes && check.out < input + inBytes))
        const_cast<char *>(input)[0] ^= 1;
    }
    rt->startedChecks[future].push_back(std::move(check));
  }

  Transport &inner;
};

/// `transport`, or the checker around it under LOOMRT_CHECK_STARTED=1 on
/// the CPU (the CUDA backend's started collectives run on its streams).
Transport *checkedIfAsked(Transport *transport) {
  if (!transport || !checkingStarted())
    return transport;
  return new StartedChecker(*transport); // lives as long as the process
}

} // namespace

int runRank(const loomrt_model *model, Transport *transport, int rank, int size,
            int localIndex, const Options &options, const char *program) {
  loomrt_ctx context;
  loomrt_ctx *rt = &context;
  rt->model = model;
  rt->transport = transport;
  rt->worldRank = rank;
  rt->worldSize = size;
  rt->timeout = options.timeout;
  rt->logitsColumns = options.logitsColumns;
  rt->coords = coordinatesOf(*model, rank);
  struct Running {
    explicit Running(loomrt_ctx *rt) { runningRank = rt; }
    ~Running() { runningRank = nullptr; }
  } running(rt);
  bool leader = rank == 0;
  const DeviceOps &device = deviceOps();
  device.bind(rt, localIndex, options.loopback ? size : 1);

  // 64: loom-plan-memory's alignment (LoomDialect::kArenaAlignment), on
  // which generated code relies.
  size_t arenaBytes = size_t((model->arena_bytes + 63) / 64 * 64);
  char *arena =
      static_cast<char *>(aligned_alloc(64, arenaBytes ? arenaBytes : 64));
  if (!arena)
    abortJob(rt, format("cannot allocate the arena of %zu bytes", arenaBytes),
             6);
  memset(arena, 0, arenaBytes);

  // Parameters and inputs: from files, or from the seed.
  std::string error;
  auto fill = [&](const std::string &path, const loomrt_tensor *tensors,
                  int count, const char *what) {
    if (path.empty()) {
      for (int i = 0; i < count; ++i)
        initialise(rt, tensors[i], arena, options.seed);
      return true;
    }
    return load(rt, path, tensors, count, what, arena, error);
  };
  bool filled =
      fill(options.params, model->params, model->num_params, "parameter") &&
      fill(options.inputs, model->inputs, model->num_inputs, "input");
  // A file can be bad on some ranks only (another machine's copy): the
  // ranks agree, so that none waits for one that gave up, and the first
  // that failed says why.
  double firstFailed = filled ? -double(size) : -double(rank);
  transport->reduceDoubles(rt, &firstFailed, 1, true,
                           "sharing whether the parameters and inputs were "
                           "read");
  if (firstFailed > -double(size)) {
    if (!filled && rank == int(-firstFailed))
      printFirstFailure(program, rank, error);
    free(arena);
    return 1;
  }
  char *deviceArena = device.allocate(arena, arenaBytes);
  rt->arenaBase = deviceArena;
  if (!deviceArena)
    abortJob(rt,
             format("cannot allocate the %s arena of %zu bytes", device.name,
                    arenaBytes),
             6);
  if (deviceArena != arena)
    device.upload(deviceArena, arena, arenaBytes);

  // A CUDA graph replays the steady-state step: captured on the step after
  // the first (which sizes scratch buffers, plans GEMMs and makes
  // communicators), never in loopback mode, where ranks wait on each
  // other's streams through the host.
  bool graphs =
      options.graph && !options.loopback && !options.profile && device.runStep;
  long eagerSteps = 0;
  uint64_t capturedFirst = 0, capturedEnd = 0; // the captured collectives
  auto step = [&] {
    ++rt->stepNumber;
    rt->inStep = true;
    uint64_t first = rt->sequence;
    bool graphStep = false;
    if (device.runStep)
      graphStep =
          device.runStep(rt, model, deviceArena, graphs && eagerSteps > 0);
    else
      runModelStep(rt, model, deviceArena);
    ++eagerSteps;
    if (graphStep) {
      bool capturing = rt->sequence != first;
      if (capturing) {
        capturedFirst = first;
        capturedEnd = rt->sequence;
      }
      if (capturedEnd > capturedFirst) {
        std::string collectives =
            capturedEnd - capturedFirst == 1
                ? format("collective #%llu", (unsigned long long)capturedFirst)
                : format("collectives #%llu to #%llu",
                         (unsigned long long)capturedFirst,
                         (unsigned long long)(capturedEnd - 1));
        transport->watchStep(
            rt, format("step %ld, %s as a CUDA graph (%s%s)", eagerSteps,
                       capturing ? "captured" : "replayed", collectives.c_str(),
                       capturing ? "" : " as captured"));
      }
    }
    device.synchronize();
    if (device.afterStep)
      device.afterStep(rt);
    rt->inStep = false;
    for (const loomrt_ctx::Record &record : rt->records) {
      rt->kernelSeconds[size_t(record.kernel)] +=
          device.profileSeconds(record.begin, record.end);
      ++rt->kernelRuns[size_t(record.kernel)];
    }
    rt->records.clear();
    for (const loomrt_ctx::Record &record : rt->collectiveRecords)
      rt->collectives[size_t(record.kernel)].seconds +=
          device.profileSeconds(record.begin, record.end);
    rt->collectiveRecords.clear();
    for (const loomrt_ctx::Record &record : rt->partRecords) {
      loomrt_ctx::PartStats &part = rt->parts[size_t(record.kernel)];
      part.seconds += device.profileSeconds(record.begin, record.end);
      ++part.calls;
    }
    rt->partRecords.clear();
    if (rt->profiling)
      device.profileRelease();
  };
  std::vector<double> stepSeconds;
  double gemmTotal = 0.0;
  if (options.bench || options.profile)
    step(); // warm-up: page faults, BLAS buffers, communicators
  rt->kernelSeconds.assign(size_t(model->num_kernels), 0.0);
  rt->kernelRuns.assign(size_t(model->num_kernels), 0);
  rt->profiling = options.profile;
  for (long s = 0; s < options.steps; ++s) {
    transport->barrier(rt, "the barrier before a step");
    rt->gemmSeconds = 0.0;
    double start = now();
    step();
    stepSeconds.push_back(now() - start);
    gemmTotal += rt->gemmSeconds;
  }
  testFault(rt, -2, -1);
  if (device.endSteps)
    device.endSteps();
  if (deviceArena != arena)
    device.download(arena, deviceArena, arenaBytes);

  report(rt, arena);
  if (options.profile) {
    // The peaks are measured while the other ranks wait (in loopback mode
    // they share the device).
    transport->barrier(rt, "the barrier before measuring the peaks");
    printProfile(rt, stepSeconds, options);
    transport->barrier(rt, "the barrier after measuring the peaks");
  }
  if (options.bench) {
    std::vector<double> sorted = stepSeconds;
    std::sort(sorted.begin(), sorted.end());
    double total = 0.0;
    for (double s : stepSeconds)
      total += s;
    double slowestMedian = sorted[sorted.size() / 2],
           share = total > 0 ? gemmTotal / total : 0.0;
    transport->reduceDoubles(rt, &slowestMedian, 1, true,
                             "collecting step times");
    transport->reduceDoubles(rt, &share, 1, false, "collecting step times");
    // Only the CPU backend times its GEMMs (on the host clock); a GPU's
    // run asynchronously, so there --profile's events give their share.
    if (leader && device.hostMemory)
      printf(
          "bench: %ld steps on %d ranks: median step %.3f ms (slowest rank), "
          "GEMMs %.1f%% of step time (mean over ranks)\n",
          options.steps, size, slowestMedian * 1e3, 100.0 * share / size);
    else if (leader)
      printf("bench: %ld steps on %d ranks: median step %.3f ms (slowest "
             "rank); each kernel's share: --profile\n",
             options.steps, size, slowestMedian * 1e3);
    fflush(stdout);
  }

  bool saved = true;
  if (!options.out.empty()) {
    std::vector<const char *> data;
    for (int i = 0; i < model->num_outputs; ++i)
      data.push_back(arena + model->outputs[i].arena_offset);
    saved =
        save(rt, options.out, model->outputs, model->num_outputs, data.data());
  }
  if (saved && !options.saveParams.empty()) {
    std::vector<const char *> data;
    for (int i = 0; i < model->num_params; ++i)
      data.push_back(arena + model->params[i].arena_offset);
    saved = save(rt, options.saveParams, model->params, model->num_params,
                 data.data());
  }
  if (saved)
    transport->barrier(rt, "the barrier at the end of the run");
  transport->finish(rt);
  device.release(deviceArena, arena);
  free(arena);
  return saved ? 0 : 1;
}

/// This process's index among the processes of its machine (which GPU it
/// takes).
int localIndex() {
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &local) != MPI_SUCCESS)
    return 0;
  int index = 0;
  MPI_Comm_rank(local, &index);
  MPI_Comm_free(&local);
  return index;
}

/// The smallest `value` of all processes, waited for like a collective: a
/// process that never arrives (it died starting) ends the job after
/// `timeout` seconds instead of hanging it.
int minOverProcesses(int value, double timeout, const char *program) {
  int result = value;
  MPI_Request request;
  if (MPI_Iallreduce(&value, &result, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD,
                     &request) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 4);
  double start = now();
  for (long spins = 0;; ++spins) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      MPI_Abort(MPI_COMM_WORLD, 4);
    if (done)
      return result;
    if (spins > 2000) {
      timespec pause = {0, 1000000};
      nanosleep(&pause, nullptr);
    }
    if (now() - start > timeout) {
      fprintf(stderr,
              "%s: error: the processes of this job did not all start within "
              "%g s (--collective-timeout)\n",
              program, timeout);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
}

/// Whether an MPI launcher (mpirun, srun) started this process: Open MPI,
/// PMIx and MPICH's Hydra say so in the environment.
bool launchedByMpi() {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
         getenv("PMI_SIZE");
}

} // namespace

extern "C" int loomrt_main(int argc, char **argv, const loomrt_model *model) {
  Options options;
  std::string error;
  bool parsed = parseOptions(argc, argv, options, error);
  // Alone, with --loopback or a bad command line, the process needs no MPI.
  // MPI_Init would start a singleton's daemon, which can fail when many
  // start at once ("Unable to start a daemon on the local node"); under a
  // launcher MPI is initialised, so that the job's size can be checked
  // below.
  bool alone = !launchedByMpi() && (!parsed || options.loopback);
  int processRank = 0, processes = 1;
  if (!alone) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &processRank);
    MPI_Comm_size(MPI_COMM_WORLD, &processes);
  }
  installFatalSignalReport(argv[0]);
  testProcessFault(processRank, TestFault::kStart);
  // A closed pipe on standard output is then a failed write that the
  // finish below reports, not a silent death by SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  bool leader = processRank == 0;
  auto finish = [&](int code) {
    processPhase = ProcessPhase::kFinishing;
    testProcessFault(processRank, TestFault::kFinish);
    if (!alone)
      MPI_Finalize();
    // The results went to standard output: a full disk or a closed pipe
    // lost them, and the exit code says so.
    errno = 0;
    if (leader && (fflush(stdout) != 0 || ferror(stdout))) {
      fprintf(stderr, "%s: error: cannot write to standard output%s%s\n",
              argv[0], errno ? ": " : "", errno ? strerror(errno) : "");
      return code ? code : 1;
    }
    return code;
  };
  // Ranks can see different options (an environment variable that the
  // launcher did not forward to another machine): they agree before any of
  // them goes on to wait for the others, and the first that failed says
  // why.
  int firstFailed = parsed ? processes : processRank;
  if (!alone)
    firstFailed = minOverProcesses(firstFailed, options.timeout, argv[0]);
  if (firstFailed < processes) {
    if (processRank == firstFailed)
      printFirstFailure(argv[0], processRank, error);
    return finish(2);
  }
  // Valid options that differ between ranks (an MPMD launch, a wrapper
  // adding a flag on some machines) would mix seeds or wait for steps that
  // never come: the ranks compare a digest of them first.
  if (!alone) {
    int digest = int(fnv1a64(optionsText(options)) & 0x3fffffff);
    int lowest = minOverProcesses(digest, options.timeout, argv[0]);
    int firstDiffering = minOverProcesses(
        digest != lowest ? processRank : processes, options.timeout, argv[0]);
    if (firstDiffering < processes) {
      int firstLowest = minOverProcesses(
          digest == lowest ? processRank : processes, options.timeout, argv[0]);
      // The two ranks that differ each say what they have.
      if (processRank == firstDiffering || processRank == firstLowest)
        fprintf(stderr,
                "%s: rank %d: error: the ranks were started with different "
                "options (every rank must get the same): rank %d has %s\n",
                argv[0], processRank, processRank,
                optionsText(options).c_str());
      return finish(2);
    }
  }

  int64_t meshRanks = 1;
  std::string meshText;
  for (int a = 0; a < model->num_axes; ++a) {
    meshRanks *= model->axis_sizes[a];
    meshText += format("%s%s=%lld", a ? ", " : "", model->axis_names[a],
                       (long long)model->axis_sizes[a]);
  }
  if (options.help) {
    if (leader)
      printf(kUsage, argv[0], argv[0], model->name, model->source,
             (long long)meshRanks);
    return finish(0);
  }
  const DeviceOps &device = deviceOps();
  auto refuse = [&](const std::string &message) {
    if (leader)
      fprintf(stderr, "%s: error: %s\n", argv[0], message.c_str());
    return finish(2);
  };

  if (options.loopback) {
    if (processes != 1)
      return refuse(format("--loopback runs all %lld ranks in one process, "
                           "but this job has %d processes; run it without "
                           "mpirun",
                           (long long)meshRanks, processes));
    Transport *transport =
        checkedIfAsked(loopbackTransport(*model, *device.loopback));
    std::vector<int> codes(size_t(meshRanks), 0);
    std::vector<std::thread> threads;
    processPhase = ProcessPhase::kRunning;
    for (int r = 0; r < int(meshRanks); ++r)
      threads.emplace_back([&, r] {
        codes[size_t(r)] =
            runRank(model, transport, r, int(meshRanks), 0, options, argv[0]);
      });
    testProcessFault(0, TestFault::kRunning);
    for (std::thread &thread : threads)
      thread.join();
    return finish(*std::max_element(codes.begin(), codes.end()));
  }

  if (processes != meshRanks) {
    if (model->num_axes == 0)
      return refuse(format("model %s declares no mesh and runs on 1 rank, but "
                           "this job has %d; run it alone or with mpirun -np 1",
                           model->name, processes));
    if (meshRanks == 1)
      return refuse(format(
          "model %s was compiled for the mesh [%s] of 1 rank, but this job "
          "has %d; run it alone or with mpirun -np 1, or recompile with "
          "loomc --mesh for a mesh of %d",
          model->name, meshText.c_str(), processes, processes));
    return refuse(format(
        "model %s was compiled for the mesh [%s] of %lld rank%s, but this job "
        "has %d; run it with mpirun -np %lld or with --loopback, or recompile "
        "with loomc --mesh for a mesh of %d",
        model->name, meshText.c_str(), (long long)meshRanks,
        meshRanks == 1 ? "" : "s", processes, (long long)meshRanks, processes));
  }
  // The transport: MPI for host memory. A device's memory needs NCCL between
  // processes; one rank alone needs none (LOOMRT_TRANSPORT=nccl asks for it
  // anyway, to exercise NCCL with 1-rank communicators).
  Transport *transport = mpiTransport();
  if (!device.hostMemory) {
    const char *wanted = getenv("LOOMRT_TRANSPORT");
    bool wantNccl = processes > 1 || (wanted && !strcmp(wanted, "nccl"));
    transport = wantNccl ? ncclTransport()
                         : loopbackTransport(*model, *device.loopback);
    if (!transport && processes == 1)
      return refuse(format("LOOMRT_TRANSPORT=nccl asks for NCCL, but this %s "
                           "build of libloomrt has none; unset it to run "
                           "without NCCL",
                           device.name));
    if (!transport)
      return refuse(format(
          "this %s build of libloomrt has no NCCL, so its ranks cannot run as "
          "separate processes; run all %lld ranks on one GPU with --loopback",
          device.name, (long long)meshRanks));
  }
  transport = checkedIfAsked(transport);
  // Before the phase turns: a fault in its MPI calls is the start's.
  int local = localIndex();
  processPhase = ProcessPhase::kRunning;
  return finish(runRank(model, transport, processRank, processes, local,
                        options, argv[0]));
}

std::string loomrt::targetPlace(const loomrt_ctx *rt, const void *targets,
                                int dtype, int64_t position) {
  const loomrt_model *m = rt->model;
  const char *here = static_cast<const char *>(targets);
  size_t bytes = elementBytes(dtype);
  for (int k = 0; m && rt->arenaBase && k < m->num_inputs; ++k) {
    const loomrt_tensor &t = m->inputs[k];
    int64_t count = 1;
    for (int d = 0; d < t.rank; ++d)
      count *= t.local_shape[d];
    const char *base = rt->arenaBase + t.arena_offset;
    if (t.dtype != dtype || here < base || here >= base + count * bytes)
      continue;
    int64_t local = (here - base) / int64_t(bytes) + position, global = -1;
    forEachRun(rt, t, [&](int64_t from, int64_t to, int64_t length) {
      if (local >= from && local < from + length)
        global = to + (local - from);
    });
    if (global < 0)
      continue;
    std::string index;
    for (int d = t.rank - 1; d >= 0; --d) {
      index = std::to_string(global % t.global_shape[d]) +
              (index.empty() ? "" : ", ") + index;
      global /= t.global_shape[d];
    }
    return std::string(t.name) + "[" + index + "]";
  }
  return "position " + std::to_string(position) + " of this rank's targets";
}
