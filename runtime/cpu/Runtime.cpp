//===- Runtime.cpp - libloomrt's CPU backend over MPI ---------------------===//
//
// Owns a generated program's process: MPI, the executable's options, the
// arena, initial values, safetensors I/O of global tensors, timing, and every
// collective with a watchdog so that a stuck or mismatched job ends with a
// message instead of hanging.
//===----------------------------------------------------------------------===//
#include "loomrt.h"
#include "runtime/Elements.h"
#include "runtime/InitialValues.h"
#include "runtime/Safetensors.h"
#include "runtime/cpu/CpuRuntime.h"

// Only MPI's C API: Open MPI's C++ bindings need a library of their own.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <string>
#include <time.h>
#include <unistd.h>
#include <vector>

using namespace loomrt;

struct loomrt_ctx {
  const loomrt_model *model = nullptr;
  int worldRank = 0, worldSize = 1;
  std::vector<int64_t> coords;
  /// One communicator per ordered subset of mesh axes, made on first use.
  std::map<std::vector<int>, MPI_Comm> comms;
  uint64_t sequence = 0;
  double timeout = 300.0;
  std::vector<float> scratch[3];
  double gemmSeconds = 0.0;
  MPI_Op halfSum[2] = {MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op halfMax[2] = {MPI_OP_NULL, MPI_OP_NULL};
};

namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buffer[1024];
  vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

std::string meshPosition(const loomrt_ctx *rt) {
  std::string out = "rank " + std::to_string(rt->worldRank);
  if (!rt->model || rt->coords.empty())
    return out;
  out += " (";
  for (int a = 0; a < rt->model->num_axes; ++a)
    out += format("%s%s=%lld", a ? ", " : "", rt->model->axis_names[a],
                  (long long)rt->coords[a]);
  return out + ")";
}

std::string axesText(const loomrt_ctx *rt, const int *axes, int numAxes) {
  std::string out = "[";
  for (int i = 0; i < numAxes; ++i)
    out += format("%s%s", i ? ", " : "", rt->model->axis_names[axes[i]]);
  return out + "]";
}

[[noreturn]] void abortJob(loomrt_ctx *rt, const std::string &message,
                           int code) {
  fprintf(stderr, "loom: %s: error: %s\n", meshPosition(rt).c_str(),
          message.c_str());
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);
}

void checkMpi(loomrt_ctx *rt, int status, const std::string &what) {
  if (status == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  abortJob(rt, what + ": MPI failed: " + std::string(text, size_t(length)), 4);
}

const char *dtypeText(int dtype) {
  static const char *names[] = {"f32", "bf16", "f16", "i32", "i64"};
  return names[dtype];
}

//--- bf16/f16 reductions accumulate in f32 (DESIGN.md, Numerics) -----------
template <float (*Load)(uint16_t), uint16_t (*Store)(float), bool Max>
void halfReduce(void *in, void *inout, int *length, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = Load(a[i]), y = Load(b[i]);
    b[i] = Store(Max ? (x > y || std::isnan(x) ? x : y) : x + y);
  }
}

MPI_Datatype mpiType(int dtype) {
  switch (dtype) {
  case LOOMRT_F32:
    return MPI_FLOAT;
  case LOOMRT_I32:
    return MPI_INT32_T;
  case LOOMRT_I64:
    return MPI_INT64_T;
  default:
    return MPI_UINT16_T;
  }
}

MPI_Op mpiOp(loomrt_ctx *rt, int dtype, int reduction) {
  if (dtype == LOOMRT_BF16 || dtype == LOOMRT_F16) {
    int half = dtype == LOOMRT_BF16 ? 0 : 1;
    return reduction == LOOMRT_MAX ? rt->halfMax[half] : rt->halfSum[half];
  }
  return reduction == LOOMRT_MAX ? MPI_MAX : MPI_SUM;
}

void await(loomrt_ctx *rt, std::vector<MPI_Request> &requests,
           const std::string &what);

/// The communicator over `axes`, made on first use. Splitting blocks until
/// every rank arrives, so a watched barrier goes first: a rank that never
/// comes ends the job with `what` (the collective that needed it).
MPI_Comm communicator(loomrt_ctx *rt, const int *axes, int numAxes,
                      const std::string &what) {
  std::vector<int> key(axes, axes + numAxes);
  auto found = rt->comms.find(key);
  if (found != rt->comms.end())
    return found->second;
  std::vector<MPI_Request> request(1);
  checkMpi(rt, MPI_Ibarrier(MPI_COMM_WORLD, &request[0]), what);
  await(rt, request, what);
  // Colour: this rank's coordinates on the other axes; key: its row-major
  // index over `axes` in the order given (so (dp,tp) and (tp,dp) differ).
  const loomrt_model *m = rt->model;
  int64_t colour = 0, order = 0;
  for (int a = 0; a < m->num_axes; ++a)
    if (std::find(key.begin(), key.end(), a) == key.end())
      colour = colour * m->axis_sizes[a] + rt->coords[a];
  for (int a : key)
    order = order * m->axis_sizes[a] + rt->coords[a];
  MPI_Comm comm;
  checkMpi(rt, MPI_Comm_split(MPI_COMM_WORLD, int(colour), int(order), &comm),
           "creating the communicator over " + axesText(rt, axes, numAxes));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  rt->comms.emplace(key, comm);
  return comm;
}

/// Waits for `requests`, ending the job when the watchdog's time runs out.
void await(loomrt_ctx *rt, std::vector<MPI_Request> &requests,
           const std::string &what) {
  double start = now();
  for (long spins = 0;; ++spins) {
    int done = 0;
    checkMpi(rt,
             MPI_Testall(int(requests.size()), requests.data(), &done,
                         MPI_STATUSES_IGNORE),
             what);
    if (done)
      return;
    if (spins > 2000) {
      // Yield the core: ranks are often oversubscribed on small machines.
      timespec pause = {0, spins > 200000 ? 1000000 : 20000};
      nanosleep(&pause, nullptr);
    }
    if (now() - start > rt->timeout)
      abortJob(
          rt,
          format("%s did not complete within %g s (--collective-timeout); "
                 "another rank failed, stopped or runs a different program",
                 what.c_str(), rt->timeout),
          3);
  }
}

/// Runs one non-blocking MPI operation under the watchdog.
template <typename Start>
void watched(loomrt_ctx *rt, const std::string &what, Start start) {
  std::vector<MPI_Request> request(1);
  checkMpi(rt, start(&request[0]), what);
  await(rt, request, what);
}

/// A barrier under the watchdog: a rank that never arrives ends the job.
void barrier(loomrt_ctx *rt, const char *what) {
  watched(rt, std::string("the barrier ") + what,
          [&](MPI_Request *r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
}

std::string describe(loomrt_ctx *rt, const char *op, const int *axes,
                     int numAxes, const char *site) {
  // The collectives here move host memory over MPI; a device backend's
  // arena needs NCCL or the loopback mode, which are not built yet.
  if (!deviceOps().hostMemory)
    abortJob(rt,
             format("%s over %s (%s): the %s backend runs one rank and has no "
                    "collectives yet; compile for a mesh of one device",
                    op, axesText(rt, axes, numAxes).c_str(), site,
                    deviceOps().name),
             8);
  // For testing the watchdog: LOOMRT_TEST_STALL="RANK:SECONDS" holds one
  // rank back before its first collective.
  if (rt->sequence == 0)
    if (const char *stall = getenv("LOOMRT_TEST_STALL")) {
      int stallRank = -1;
      double seconds = 0;
      if (sscanf(stall, "%d:%lf", &stallRank, &seconds) == 2 &&
          stallRank == rt->worldRank)
        usleep(useconds_t(seconds * 1e6));
    }
  return format("collective #%llu %s over %s (%s)",
                (unsigned long long)rt->sequence++, op,
                axesText(rt, axes, numAxes).c_str(), site);
}

} // namespace

//===----------------------------------------------------------------------===//
// Internal API for the kernels
//===----------------------------------------------------------------------===//

std::vector<float> &loomrt::scratch(loomrt_ctx *rt, int slot) {
  return rt->scratch[slot];
}
double loomrt::gemmClockStart(loomrt_ctx *) { return now(); }
void loomrt::gemmClockStop(loomrt_ctx *rt, double start) {
  rt->gemmSeconds += now() - start;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

extern "C" int64_t loomrt_group_rank(loomrt_ctx *rt, const int *axes,
                                     int numAxes) {
  int64_t index = 0;
  for (int i = 0; i < numAxes; ++i)
    index = index * rt->model->axis_sizes[axes[i]] + rt->coords[axes[i]];
  return index;
}

static int64_t groupSize(loomrt_ctx *rt, const int *axes, int numAxes) {
  int64_t n = 1;
  for (int i = 0; i < numAxes; ++i)
    n *= rt->model->axis_sizes[axes[i]];
  return n;
}

extern "C" void loomrt_fail(loomrt_ctx *rt, const char *site,
                            const char *message) {
  abortJob(rt, std::string(site) + ": " + message, 5);
}

extern "C" void loomrt_all_reduce(loomrt_ctx *rt, const char *site,
                                  const int *axes, int numAxes, int dtype,
                                  int reduction, const void *in, void *out,
                                  int64_t count) {
  std::string what = describe(
      rt, reduction == LOOMRT_MAX ? "all_reduce(max)" : "all_reduce(sum)", axes,
      numAxes, site);
  MPI_Comm comm = communicator(rt, axes, numAxes, what);
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, int(count),
                          mpiType(dtype), mpiOp(rt, dtype, reduction), comm,
                          &request[0]),
           what);
  await(rt, request, what);
}

extern "C" void loomrt_all_gather(loomrt_ctx *rt, const char *site,
                                  const int *axes, int numAxes, int dtype,
                                  const void *in, void *out, int64_t outer,
                                  int64_t chunk) {
  std::string what = describe(rt, "all_gather", axes, numAxes, site);
  MPI_Comm comm = communicator(rt, axes, numAxes, what);
  int64_t n = groupSize(rt, axes, numAxes);
  size_t bytes = elementBytes(dtype), piece = size_t(outer * chunk) * bytes;
  std::vector<char> gathered(piece * size_t(n));
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Iallgather(in, int(piece), MPI_BYTE, gathered.data(), int(piece),
                          MPI_BYTE, comm, &request[0]),
           what);
  await(rt, request, what);
  // [n][outer][chunk] -> [outer][n][chunk]
  size_t row = size_t(chunk) * bytes;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < outer; ++o)
      memcpy(static_cast<char *>(out) + (o * n + r) * row,
             gathered.data() + r * piece + o * row, row);
}

extern "C" void loomrt_reduce_scatter(loomrt_ctx *rt, const char *site,
                                      const int *axes, int numAxes, int dtype,
                                      int reduction, const void *in, void *out,
                                      int64_t outer, int64_t chunk) {
  std::string what = describe(rt, "reduce_scatter", axes, numAxes, site);
  MPI_Comm comm = communicator(rt, axes, numAxes, what);
  int64_t n = groupSize(rt, axes, numAxes);
  size_t bytes = elementBytes(dtype), row = size_t(chunk) * bytes;
  // [outer][n][chunk] -> [n][outer][chunk], so that piece r is contiguous.
  std::vector<char> packed(size_t(outer * n) * row);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < n; ++r)
      memcpy(packed.data() + (r * outer + o) * row,
             static_cast<const char *>(in) + (o * n + r) * row, row);
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Ireduce_scatter_block(
               packed.data(), out, int(outer * chunk), mpiType(dtype),
               mpiOp(rt, dtype, reduction), comm, &request[0]),
           what);
  await(rt, request, what);
}

extern "C" void loomrt_all_slice(loomrt_ctx *rt, const int *axes, int numAxes,
                                 int dtype, const void *in, void *out,
                                 int64_t outer, int64_t chunk) {
  int64_t n = groupSize(rt, axes, numAxes),
          r = loomrt_group_rank(rt, axes, numAxes);
  size_t row = size_t(chunk) * elementBytes(dtype);
  for (int64_t o = 0; o < outer; ++o)
    memcpy(static_cast<char *>(out) + o * row,
           static_cast<const char *>(in) + (o * n + r) * row, row);
}

extern "C" void loomrt_all_to_all(loomrt_ctx *rt, const char *site,
                                  const int *axes, int numAxes, int dtype,
                                  const void *in, void *out, int rank,
                                  const int64_t *shape, int splitDim,
                                  int concatDim) {
  std::string what = describe(rt, "all_to_all", axes, numAxes, site);
  MPI_Comm comm = communicator(rt, axes, numAxes, what);
  int64_t n = groupSize(rt, axes, numAxes);
  size_t bytes = elementBytes(dtype);
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  int64_t pieceElems = total / n;
  // Send buffer: piece r = the input with dimension splitDim restricted to
  // its r-th chunk.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < splitDim; ++d)
    outer *= shape[d];
  for (int d = splitDim + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t chunk = shape[splitDim] / n;
  std::vector<char> send(size_t(total) * bytes), receive(size_t(total) * bytes);
  for (int64_t r = 0; r < n; ++r)
    loomrt_extract(dtype, in, send.data() + size_t(r * pieceElems) * bytes,
                   outer, shape[splitDim], chunk, r * chunk, inner);
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Ialltoall(send.data(), int(size_t(pieceElems) * bytes), MPI_BYTE,
                         receive.data(), int(size_t(pieceElems) * bytes),
                         MPI_BYTE, comm, &request[0]),
           what);
  await(rt, request, what);
  // Piece from rank r lands at chunk r of concatDim.
  int64_t pieceShape[LOOMRT_MAX_RANK];
  for (int d = 0; d < rank; ++d)
    pieceShape[d] = shape[d];
  pieceShape[splitDim] = chunk;
  int64_t cOuter = 1, cInner = 1;
  for (int d = 0; d < concatDim; ++d)
    cOuter *= pieceShape[d];
  for (int d = concatDim + 1; d < rank; ++d)
    cInner *= pieceShape[d];
  for (int64_t r = 0; r < n; ++r)
    loomrt_insert(dtype, receive.data() + size_t(r * pieceElems) * bytes, out,
                  cOuter, pieceShape[concatDim], pieceShape[concatDim] * n,
                  r * pieceShape[concatDim], cInner);
}

extern "C" void loomrt_collective_permute(loomrt_ctx *rt, const char *site,
                                          const int *axes, int numAxes,
                                          int dtype, const void *in, void *out,
                                          int64_t count, const int64_t *pairs,
                                          int numPairs) {
  std::string what = describe(rt, "collective_permute", axes, numAxes, site);
  MPI_Comm comm = communicator(rt, axes, numAxes, what);
  int64_t me = loomrt_group_rank(rt, axes, numAxes);
  size_t bytes = size_t(count) * elementBytes(dtype);
  std::vector<char> copy(static_cast<const char *>(in),
                         static_cast<const char *>(in) + bytes);
  std::vector<MPI_Request> requests;
  bool received = false;
  for (int p = 0; p < numPairs; ++p) {
    int64_t source = pairs[2 * p], target = pairs[2 * p + 1];
    if (source == me) {
      requests.emplace_back();
      checkMpi(rt,
               MPI_Isend(copy.data(), int(bytes), MPI_BYTE, int(target), 7,
                         comm, &requests.back()),
               what);
    }
    if (target == me) {
      received = true;
      requests.emplace_back();
      checkMpi(rt,
               MPI_Irecv(out, int(bytes), MPI_BYTE, int(source), 7, comm,
                         &requests.back()),
               what);
    }
  }
  if (!received)
    memset(out, 0, bytes);
  await(rt, requests, what);
}

extern "C" void loomrt_broadcast(loomrt_ctx *rt, const char *site,
                                 const int *axes, int numAxes, int dtype,
                                 const void *in, void *out, int64_t count,
                                 int64_t root) {
  std::string what = describe(rt, "broadcast", axes, numAxes, site);
  MPI_Comm comm = communicator(rt, axes, numAxes, what);
  size_t bytes = size_t(count) * elementBytes(dtype);
  if (in != out)
    memcpy(out, in, bytes);
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Ibcast(out, int(bytes), MPI_BYTE, int(root), comm, &request[0]),
           what);
  await(rt, request, what);
}

static int neighbour(loomrt_ctx *rt, int axis, int64_t offset) {
  int64_t size = rt->model->axis_sizes[axis];
  return int(((rt->coords[axis] + offset) % size + size) % size);
}

extern "C" void loomrt_send(loomrt_ctx *rt, const char *site, int axis,
                            int64_t offset, int dtype, const void *in,
                            int64_t count) {
  std::string what = describe(rt, "send", &axis, 1, site);
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Isend(in, int(size_t(count) * elementBytes(dtype)), MPI_BYTE,
                     neighbour(rt, axis, offset), 9,
                     communicator(rt, &axis, 1, what), &request[0]),
           what);
  await(rt, request, what);
}

extern "C" void loomrt_recv(loomrt_ctx *rt, const char *site, int axis,
                            int64_t offset, int dtype, void *out,
                            int64_t count) {
  std::string what = describe(rt, "recv", &axis, 1, site);
  std::vector<MPI_Request> request(1);
  checkMpi(rt,
           MPI_Irecv(out, int(size_t(count) * elementBytes(dtype)), MPI_BYTE,
                     neighbour(rt, axis, offset), 9,
                     communicator(rt, &axis, 1, what), &request[0]),
           what);
  await(rt, request, what);
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

struct Options {
  uint64_t seed = 0;
  std::string inputs, params, out, saveParams;
  long steps = 1;
  bool bench = false, help = false, stepsGiven = false;
  double timeout = 300.0;
};

const char *kUsage =
    "usage: mpirun -np N %s [options]\n"
    "\n"
    "Runs model %s (compiled by loomc from %s) on a mesh of %lld rank(s).\n"
    "\n"
    "options:\n"
    "  --seed N                 seed of the initial values and synthetic "
    "inputs (default 0)\n"
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
    "  --steps N                run N steps (default 1; 10 with --bench)\n"
    "  --bench                  time the steps: median per rank and the share "
    "in GEMMs\n"
    "  --collective-timeout S   end the job when a collective waits S seconds "
    "(default 300)\n"
    "  --help                   print this help\n";

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
      if (i + 1 >= argc) {
        error = name + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    auto number = [&](double &out, bool integer) {
      char *end = nullptr;
      errno = 0;
      out = strtod(value.c_str(), &end);
      if (value.empty() || *end || errno ||
          (integer && out != std::floor(out)) || out < 0) {
        error = name + " needs a non-negative " +
                (integer ? "integer" : "number") + ", not '" + value + "'";
        return false;
      }
      return true;
    };
    double n = 0;
    if (name == "--help" || name == "-h") {
      options.help = true;
    } else if (name == "--bench") {
      options.bench = true;
    } else if (name == "--seed") {
      if (!takeValue())
        return false;
      char *end = nullptr;
      errno = 0;
      options.seed = strtoull(value.c_str(), &end, 0);
      if (value.empty() || *end || errno || value[0] == '-') {
        error = "--seed needs a non-negative integer, not '" + value + "'";
        return false;
      }
    } else if (name == "--steps") {
      if (!takeValue() || !number(n, true))
        return false;
      if (n < 1) {
        error = "--steps needs at least 1";
        return false;
      }
      options.steps = long(n);
      options.stepsGiven = true;
    } else if (name == "--collective-timeout") {
      if (!takeValue() || !number(n, false))
        return false;
      if (n <= 0) {
        error = "--collective-timeout needs a positive number of seconds";
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
  if (options.bench && !options.stepsGiven)
    options.steps = 10;
  return true;
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
void save(loomrt_ctx *rt, const std::string &path, const loomrt_tensor *tensors,
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
  int status = 0;
  if (rt->worldRank == 0) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint64_t total = dataStart + (entries.empty() ? 0 : entries.back().end);
    if (fd < 0 || write(fd, head.data(), head.size()) != ssize_t(head.size()) ||
        ftruncate(fd, off_t(total)) != 0)
      status = errno ? errno : EIO;
    if (fd >= 0)
      close(fd);
  }
  watched(rt, "sharing whether " + path + " could be created",
          [&](MPI_Request *r) {
            return MPI_Ibcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD, r);
          });
  if (status != 0) {
    if (rt->worldRank == 0)
      fprintf(stderr, "loom: error: cannot write %s: %s\n", path.c_str(),
              strerror(status));
    MPI_Finalize();
    exit(1);
  }
  int fd = open(path.c_str(), O_WRONLY);
  int failed = fd < 0 ? errno : 0;
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
  int anyFailed = 0;
  watched(rt, "sharing whether " + path + " was written", [&](MPI_Request *r) {
    return MPI_Iallreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX,
                          MPI_COMM_WORLD, r);
  });
  if (anyFailed) {
    if (failed)
      fprintf(stderr, "loom: rank %d: error: writing %s failed: %s\n",
              rt->worldRank, path.c_str(), strerror(failed));
    MPI_Finalize();
    exit(1);
  }
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
      size_t bytes = elementBytes(t.dtype);
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
    double sum = 0.0, largest = 0.0;
    watched(rt, "summing the outputs", [&](MPI_Request *r) {
      return MPI_Ireduce(&local[0], &sum, 1, MPI_DOUBLE, MPI_SUM, 0,
                         MPI_COMM_WORLD, r);
    });
    watched(rt, "summing the outputs", [&](MPI_Request *r) {
      return MPI_Ireduce(&local[1], &largest, 1, MPI_DOUBLE, MPI_MAX, 0,
                         MPI_COMM_WORLD, r);
    });
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

extern "C" int loomrt_main(int argc, char **argv, const loomrt_model *model) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  loomrt_ctx context;
  loomrt_ctx *rt = &context;
  rt->model = model;
  MPI_Comm_rank(MPI_COMM_WORLD, &rt->worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &rt->worldSize);
  bool leader = rt->worldRank == 0;

  int64_t meshRanks = 1;
  std::string meshText;
  for (int a = 0; a < model->num_axes; ++a) {
    meshRanks *= model->axis_sizes[a];
    meshText += format("%s%s=%lld", a ? ", " : "", model->axis_names[a],
                       (long long)model->axis_sizes[a]);
  }
  auto finish = [&](int code) {
    MPI_Finalize();
    return code;
  };

  Options options;
  std::string error;
  if (!parseOptions(argc, argv, options, error)) {
    if (leader)
      fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
    return finish(2);
  }
  if (options.help) {
    if (leader)
      printf(kUsage, argv[0], model->name, model->source, (long long)meshRanks);
    return finish(0);
  }
  if (rt->worldSize != meshRanks && model->num_axes == 0) {
    if (leader)
      fprintf(
          stderr,
          "%s: error: model %s declares no mesh and runs on 1 rank, but this "
          "job has %d; run it alone or with mpirun -np 1\n",
          argv[0], model->name, rt->worldSize);
    return finish(2);
  }
  if (rt->worldSize != meshRanks) {
    if (leader)
      fprintf(stderr,
              "%s: error: model %s was compiled for the mesh [%s] of %lld "
              "rank%s, but "
              "this job has %d; run it with mpirun -np %lld, or recompile with "
              "loomc "
              "--mesh for a mesh of %d\n",
              argv[0], model->name, meshText.c_str(), (long long)meshRanks,
              meshRanks == 1 ? "" : "s", rt->worldSize, (long long)meshRanks,
              rt->worldSize);
    return finish(2);
  }
  rt->timeout = options.timeout;
  rt->coords.resize(size_t(model->num_axes));
  int64_t rest = rt->worldRank;
  for (int a = model->num_axes - 1; a >= 0; --a) {
    rt->coords[a] = rest % model->axis_sizes[a];
    rest /= model->axis_sizes[a];
  }
  for (int half = 0; half < 2; ++half) {
    MPI_Op_create(
        half ? halfReduce<loomrt_f16_to_f32, loomrt_f32_to_f16, false>
             : halfReduce<loomrt_bf16_to_f32, loomrt_f32_to_bf16, false>,
        1, &rt->halfSum[half]);
    MPI_Op_create(
        half ? halfReduce<loomrt_f16_to_f32, loomrt_f32_to_f16, true>
             : halfReduce<loomrt_bf16_to_f32, loomrt_f32_to_bf16, true>,
        1, &rt->halfMax[half]);
  }

  size_t arenaBytes = size_t((model->arena_bytes + 63) / 64 * 64);
  char *arena =
      static_cast<char *>(aligned_alloc(64, arenaBytes ? arenaBytes : 64));
  if (!arena)
    abortJob(rt, format("cannot allocate the arena of %zu bytes", arenaBytes),
             6);
  memset(arena, 0, arenaBytes);

  // Parameters and inputs: from files, or from the seed.
  auto fill = [&](const std::string &path, const loomrt_tensor *tensors,
                  int count, const char *what) {
    if (path.empty()) {
      for (int i = 0; i < count; ++i)
        initialise(rt, tensors[i], arena, options.seed);
      return true;
    }
    if (load(rt, path, tensors, count, what, arena, error))
      return true;
    if (leader)
      fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
    return false;
  };
  if (!fill(options.params, model->params, model->num_params, "parameter") ||
      !fill(options.inputs, model->inputs, model->num_inputs, "input")) {
    free(arena);
    return finish(1);
  }
  const DeviceOps &device = deviceOps();
  char *deviceArena = device.allocate(arena, arenaBytes);
  if (!deviceArena)
    abortJob(rt,
             format("cannot allocate the %s arena of %zu bytes", device.name,
                    arenaBytes),
             6);
  if (deviceArena != arena)
    device.upload(deviceArena, arena, arenaBytes);

  std::vector<double> stepSeconds;
  double gemmTotal = 0.0;
  if (options.bench) {
    model->step(
        rt, deviceArena); // warm-up: page faults, BLAS buffers, communicators
    device.synchronize();
  }
  for (long s = 0; s < options.steps; ++s) {
    barrier(rt, "before a step");
    rt->gemmSeconds = 0.0;
    double start = now();
    model->step(rt, deviceArena);
    device.synchronize();
    stepSeconds.push_back(now() - start);
    gemmTotal += rt->gemmSeconds;
  }
  if (deviceArena != arena)
    device.download(arena, deviceArena, arenaBytes);

  report(rt, arena);
  if (options.bench) {
    std::vector<double> sorted = stepSeconds;
    std::sort(sorted.begin(), sorted.end());
    double median = sorted[sorted.size() / 2], total = 0.0;
    for (double s : stepSeconds)
      total += s;
    double share = total > 0 ? gemmTotal / total : 0.0;
    double maxMedian = 0.0, sumShare = 0.0;
    watched(rt, "collecting step times", [&](MPI_Request *r) {
      return MPI_Ireduce(&median, &maxMedian, 1, MPI_DOUBLE, MPI_MAX, 0,
                         MPI_COMM_WORLD, r);
    });
    watched(rt, "collecting step times", [&](MPI_Request *r) {
      return MPI_Ireduce(&share, &sumShare, 1, MPI_DOUBLE, MPI_SUM, 0,
                         MPI_COMM_WORLD, r);
    });
    if (leader)
      printf(
          "bench: %ld steps on %d ranks: median step %.3f ms (slowest rank), "
          "GEMMs %.1f%% of step time (mean over ranks)\n",
          options.steps, rt->worldSize, maxMedian * 1e3,
          100.0 * sumShare / rt->worldSize);
    fflush(stdout);
  }

  if (!options.out.empty()) {
    std::vector<const char *> data;
    for (int i = 0; i < model->num_outputs; ++i)
      data.push_back(arena + model->outputs[i].arena_offset);
    save(rt, options.out, model->outputs, model->num_outputs, data.data());
  }
  if (!options.saveParams.empty()) {
    std::vector<const char *> data;
    for (int i = 0; i < model->num_params; ++i)
      data.push_back(arena + model->params[i].arena_offset);
    save(rt, options.saveParams, model->params, model->num_params, data.data());
  }
  barrier(rt, "at the end of the run");
  device.release(deviceArena, arena);
  free(arena);
  return finish(0);
}
