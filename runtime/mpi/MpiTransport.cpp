//===- MpiTransport.cpp - Collectives over MPI, on host memory ------------===//
//
// One rank per process. Communicators are made lazily, one per ordered
// subset of mesh axes (DESIGN.md, Runtime). Every operation is
// non-blocking and polled against --collective-timeout, so a stuck or
// mismatched job ends with a message instead of hanging.
//===----------------------------------------------------------------------===//
#include "runtime/Elements.h"
#include "runtime/Runtime.h"

// Only MPI's C API: Open MPI's C++ bindings need a library of their own.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <time.h>
#include <unistd.h>

using namespace loomrt;

namespace {

//--- bf16/f16 reductions accumulate in f32 (DESIGN.md, Numerics) -----------
// MPI rounds each partial result to the element type, so sums over more
// than two ranks go through f32 buffers instead (sumsInF32).
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

class MpiTransport final : public Transport {
public:
  MpiTransport() {
    for (int half = 0; half < 2; ++half) {
      MPI_Op_create(
          half ? halfReduce<loomrt_f16_to_f32, loomrt_f32_to_f16, false>
               : halfReduce<loomrt_bf16_to_f32, loomrt_f32_to_bf16, false>,
          1, &halfSum[half]);
      MPI_Op_create(
          half ? halfReduce<loomrt_f16_to_f32, loomrt_f32_to_f16, true>
               : halfReduce<loomrt_bf16_to_f32, loomrt_f32_to_bf16, true>,
          1, &halfMax[half]);
    }
  }

  const char *name() const override { return "MPI"; }

  void barrier(loomrt_ctx *rt, const std::string &what) override {
    watched(rt, what,
            [&](MPI_Request *r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
  }

  void shareLeaderInt(loomrt_ctx *rt, int *value,
                      const std::string &what) override {
    watched(rt, what, [&](MPI_Request *r) {
      return MPI_Ibcast(value, 1, MPI_INT, 0, MPI_COMM_WORLD, r);
    });
  }

  void reduceDoubles(loomrt_ctx *rt, double *values, int count, bool maximum,
                     const std::string &what) override {
    watched(rt, what, [&](MPI_Request *r) {
      return MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE,
                            maximum ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD, r);
    });
  }

  void allReduce(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, int reduction, const void *in,
                 void *out, int64_t count) override {
    MPI_Comm comm = communicator(rt, axes, numAxes, what);
    if (sumsInF32(rt, axes, numAxes, dtype, reduction)) {
      auto wide =
          std::make_shared<std::vector<float>>(widened(dtype, in, count));
      run(
          rt, what,
          [=](MPI_Request *r) {
            return MPI_Iallreduce(MPI_IN_PLACE, wide->data(), int(count),
                                  MPI_FLOAT, MPI_SUM, comm, r);
          },
          [=] { narrow(*wide, dtype, out); });
      return;
    }
    MPI_Op reduce = op(dtype, reduction);
    run(
        rt, what,
        [=](MPI_Request *r) {
          return MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, int(count),
                                mpiType(dtype), reduce, comm, r);
        },
        [] {});
  }

  void allGather(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t outer, int64_t chunk) override {
    MPI_Comm comm = communicator(rt, axes, numAxes, what);
    int64_t n = groupSize(rt, axes, numAxes);
    size_t bytes = elementBytes(dtype), piece = size_t(outer * chunk) * bytes;
    auto gathered = std::make_shared<std::vector<char>>(piece * size_t(n));
    run(
        rt, what,
        [=](MPI_Request *r) {
          return MPI_Iallgather(in, int(piece), MPI_BYTE, gathered->data(),
                                int(piece), MPI_BYTE, comm, r);
        },
        [=] {
          // [n][outer][chunk] -> [outer][n][chunk]
          size_t row = size_t(chunk) * bytes;
          for (int64_t p = 0; p < n; ++p)
            for (int64_t o = 0; o < outer; ++o)
              memcpy(static_cast<char *>(out) + (o * n + p) * row,
                     gathered->data() + p * piece + o * row, row);
        });
  }

  void reduceScatter(loomrt_ctx *rt, const std::string &what, const int *axes,
                     int numAxes, int dtype, int reduction, const void *in,
                     void *out, int64_t outer, int64_t chunk) override {
    MPI_Comm comm = communicator(rt, axes, numAxes, what);
    int64_t n = groupSize(rt, axes, numAxes);
    size_t row = size_t(chunk) * elementBytes(dtype);
    // [outer][n][chunk] -> [n][outer][chunk], so that piece p is contiguous.
    auto packed = std::make_shared<std::vector<char>>(size_t(outer * n) * row);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < n; ++p)
        memcpy(packed->data() + (p * outer + o) * row,
               static_cast<const char *>(in) + (o * n + p) * row, row);
    if (sumsInF32(rt, axes, numAxes, dtype, reduction)) {
      auto wide = std::make_shared<std::vector<float>>(
          widened(dtype, packed->data(), outer * n * chunk));
      auto mine = std::make_shared<std::vector<float>>(size_t(outer * chunk));
      run(
          rt, what,
          [=](MPI_Request *r) {
            return MPI_Ireduce_scatter_block(wide->data(), mine->data(),
                                             int(outer * chunk), MPI_FLOAT,
                                             MPI_SUM, comm, r);
          },
          // Holds `wide` too, which MPI reads until then.
          [wide, mine, dtype, out] { narrow(*mine, dtype, out); });
      return;
    }
    MPI_Op reduce = op(dtype, reduction);
    run(
        rt, what,
        [=](MPI_Request *r) {
          return MPI_Ireduce_scatter_block(packed->data(), out,
                                           int(outer * chunk), mpiType(dtype),
                                           reduce, comm, r);
        },
        [packed] {}); // keeps `packed` alive until MPI is done with it
  }

  void waitStarted(loomrt_ctx *rt, int future) override {
    auto found = pending.find(future);
    if (found == pending.end())
      return;
    std::vector<Pending> started = std::move(found->second);
    pending.erase(found);
    for (Pending &p : started) {
      std::vector<MPI_Request> request{p.request};
      await(rt, request, p.what);
      p.finish();
    }
  }

  void allToAll(loomrt_ctx *rt, const std::string &what, const int *axes,
                int numAxes, int dtype, const void *in, void *out,
                const AllToAll &layout) override {
    MPI_Comm comm = communicator(rt, axes, numAxes, what);
    size_t piece = size_t(layout.pieceElements) * elementBytes(dtype);
    std::vector<char> send(piece * size_t(layout.n)),
        receive(piece * size_t(layout.n));
    layout.pack(dtype, in, send.data());
    watched(rt, what, [&](MPI_Request *r) {
      return MPI_Ialltoall(send.data(), int(piece), MPI_BYTE, receive.data(),
                           int(piece), MPI_BYTE, comm, r);
    });
    for (int64_t p = 0; p < layout.n; ++p)
      layout.unpack(dtype, receive.data() + size_t(p) * piece, p, out);
  }

  void permute(loomrt_ctx *rt, const std::string &what, const int *axes,
               int numAxes, int dtype, const void *in, void *out, int64_t count,
               const int64_t *pairs, int numPairs) override {
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
        check(rt,
              MPI_Isend(copy.data(), int(bytes), MPI_BYTE, int(target), 7, comm,
                        &requests.back()),
              what);
      }
      if (target == me) {
        received = true;
        requests.emplace_back();
        check(rt,
              MPI_Irecv(out, int(bytes), MPI_BYTE, int(source), 7, comm,
                        &requests.back()),
              what);
      }
    }
    if (!received)
      memset(out, 0, bytes);
    await(rt, requests, what);
  }

  void broadcast(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t count, int64_t root) override {
    MPI_Comm comm = communicator(rt, axes, numAxes, what);
    size_t bytes = size_t(count) * elementBytes(dtype);
    if (in != out)
      memcpy(out, in, bytes);
    watched(rt, what, [&](MPI_Request *r) {
      return MPI_Ibcast(out, int(bytes), MPI_BYTE, int(root), comm, r);
    });
  }

  void send(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, const void *in, int64_t count) override {
    MPI_Comm comm = communicator(rt, &axis, 1, what);
    watched(rt, what, [&](MPI_Request *r) {
      return MPI_Isend(in, int(size_t(count) * elementBytes(dtype)), MPI_BYTE,
                       axisNeighbour(rt, axis, offset), 9, comm, r);
    });
  }

  void recv(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, void *out, int64_t count) override {
    MPI_Comm comm = communicator(rt, &axis, 1, what);
    watched(rt, what, [&](MPI_Request *r) {
      return MPI_Irecv(out, int(size_t(count) * elementBytes(dtype)), MPI_BYTE,
                       axisNeighbour(rt, axis, offset), 9, comm, r);
    });
  }

  [[noreturn]] void abort(loomrt_ctx *, int code) override { endJob(code); }

private:
  MPI_Op op(int dtype, int reduction) const {
    if (dtype == LOOMRT_BF16 || dtype == LOOMRT_F16) {
      int half = dtype == LOOMRT_BF16 ? 0 : 1;
      return reduction == LOOMRT_MAX ? halfMax[half] : halfSum[half];
    }
    return reduction == LOOMRT_MAX ? MPI_MAX : MPI_SUM;
  }

  /// bf16 or f16 elements widened exactly to f32, and back, rounded once.
  static std::vector<float> widened(int dtype, const void *in, int64_t count) {
    std::vector<float> wide(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      wide[size_t(i)] = load(dtype, in, i);
    return wide;
  }
  static void narrow(const std::vector<float> &wide, int dtype, void *out) {
    for (size_t i = 0; i < wide.size(); ++i)
      store(dtype, out, int64_t(i), wide[i]);
  }

  static void check(loomrt_ctx *rt, int status, const std::string &what) {
    if (status == MPI_SUCCESS)
      return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(status, text, &length);
    abortJob(rt, what + ": MPI failed: " + std::string(text, size_t(length)),
             4);
  }

  /// Waits for `requests`, ending the job when the watchdog's time runs out.
  static void await(loomrt_ctx *rt, std::vector<MPI_Request> &requests,
                    const std::string &what) {
    double start = now(), timeout = collectiveTimeout(rt);
    for (long spins = 0;; ++spins) {
      int done = 0;
      check(rt,
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
      if (now() - start > timeout)
        abortJob(rt,
                 format("%s did not complete within %g s "
                        "(--collective-timeout); another rank failed, stopped "
                        "or runs a different program",
                        what.c_str(), timeout),
                 3);
    }
  }

  /// Runs one non-blocking MPI operation under the watchdog.
  template <typename Start>
  static void watched(loomrt_ctx *rt, const std::string &what, Start start) {
    std::vector<MPI_Request> request(1);
    check(rt, start(&request[0]), what);
    await(rt, request, what);
  }

  /// A collective issued while a future is being started
  /// (loomrt_start_begin): its request, and what completes it once done
  /// (the copies out of buffers it owns, which it keeps alive till then).
  struct Pending {
    MPI_Request request;
    std::string what;
    std::function<void()> finish;
  };
  std::map<int, std::vector<Pending>> pending;

  /// Runs one non-blocking MPI operation, then `finish`: at once under the
  /// watchdog, or, while a future is being started, at its loomrt_wait.
  template <typename Start, typename Finish>
  void run(loomrt_ctx *rt, const std::string &what, Start start,
           Finish finish) {
    int future = startedFuture(rt);
    if (future < 0) {
      watched(rt, what, start);
      finish();
      return;
    }
    MPI_Request request = MPI_REQUEST_NULL;
    check(rt, start(&request), what);
    pending[future].push_back({request, what, finish});
  }

  /// The communicator over `axes`, made on first use. Splitting blocks until
  /// every rank arrives, so a watched barrier goes first: a rank that never
  /// comes ends the job with `what` (the collective that needed it).
  MPI_Comm communicator(loomrt_ctx *rt, const int *axes, int numAxes,
                        const std::string &what) {
    std::vector<int> key(axes, axes + numAxes);
    auto found = comms.find(key);
    if (found != comms.end())
      return found->second;
    barrier(rt, what);
    // Colour: this rank's coordinates on the other axes; key: its row-major
    // index over `axes` in the order given (so (dp,tp) and (tp,dp) differ).
    int64_t colour = groupColour(model(rt), coordinates(rt), axes, numAxes);
    MPI_Comm comm;
    check(rt,
          MPI_Comm_split(MPI_COMM_WORLD, int(colour),
                         int(loomrt_group_rank(rt, axes, numAxes)), &comm),
          "creating the communicator over " + axesText(rt, axes, numAxes));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    comms.emplace(key, comm);
    return comm;
  }

  std::map<std::vector<int>, MPI_Comm> comms;
  MPI_Op halfSum[2] = {MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op halfMax[2] = {MPI_OP_NULL, MPI_OP_NULL};
};

} // namespace

Transport *loomrt::mpiTransport() {
  static MpiTransport *transport = new MpiTransport();
  return transport;
}
