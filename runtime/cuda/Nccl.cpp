//===- Nccl.cpp - Collectives over NCCL, a GPU per process ----------------===//
//
// Communicators are made lazily, one per ordered subset of mesh axes, like
// MPI's (DESIGN.md, communicators): the group's rank 0 makes the NCCL unique
// id and MPI broadcasts it over the group. Communicators are non-blocking
// (NCCL's `blocking = 0`), so no NCCL call can hang the host: each is polled
// with ncclCommGetAsyncError against --collective-timeout. The work itself
// runs on the rank's stream; a watchdog thread polls an event per collective
// and the communicators' errors, and past the timeout aborts the
// communicators and the job with the collective's rank, kind, axes and
// sequence number. Process-level operations (barriers, sharing small host
// values) stay on MPI.
//===----------------------------------------------------------------------===//
#include "runtime/Elements.h"
#include "runtime/Runtime.h"
#include "runtime/Watchdog.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

using namespace loomrt;

namespace {

ncclDataType_t ncclType(int dtype) {
  switch (dtype) {
  case LOOMRT_F32:
    return ncclFloat32;
  case LOOMRT_BF16:
    return ncclBfloat16;
  case LOOMRT_F16:
    return ncclFloat16;
  case LOOMRT_I32:
    return ncclInt32;
  default:
    return ncclInt64;
  }
}

class NcclTransport final : public Transport {
public:
  const char *name() const override { return "NCCL"; }

  void barrier(loomrt_ctx *rt, const std::string &what) override {
    mpiTransport()->barrier(rt, what);
  }
  void shareLeaderInt(loomrt_ctx *rt, int *value,
                      const std::string &what) override {
    mpiTransport()->shareLeaderInt(rt, value, what);
  }
  void reduceDoubles(loomrt_ctx *rt, double *values, int count, bool maximum,
                     const std::string &what) override {
    mpiTransport()->reduceDoubles(rt, values, count, maximum, what);
  }

  void allReduce(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, int reduction, const void *in,
                 void *out, int64_t count) override {
    ncclComm_t comm = communicator(rt, axes, numAxes, what);
    if (sumsInF32(rt, axes, numAxes, dtype, reduction)) {
      float *wide =
          static_cast<float *>(staging().staging(0, size_t(count) * 4));
      staging().convert(dtype, in, LOOMRT_F32, wide, count);
      issue(rt, comm, what, [&] {
        return ncclAllReduce(wide, wide, size_t(count), ncclFloat32, ncclSum,
                             comm, stream(rt));
      });
      staging().convert(LOOMRT_F32, wide, dtype, out, count);
      return;
    }
    issue(rt, comm, what, [&] {
      return ncclAllReduce(in, out, size_t(count), ncclType(dtype),
                           reduction == LOOMRT_MAX ? ncclMax : ncclSum, comm,
                           stream(rt));
    });
  }

  void allGather(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t outer, int64_t chunk) override {
    ncclComm_t comm = communicator(rt, axes, numAxes, what);
    int64_t n = groupSize(rt, axes, numAxes);
    size_t row = size_t(chunk) * elementBytes(dtype),
           piece = size_t(outer) * row;
    // NCCL gathers [n][outer][chunk]; the layout is [outer][n][chunk].
    void *gathered = outer == 1 ? out : staging().staging(0, piece * size_t(n));
    issue(rt, comm, what, [&] {
      return ncclAllGather(in, gathered, piece / elementBytes(dtype),
                           ncclType(dtype), comm, stream(rt));
    });
    if (gathered != out)
      for (int64_t p = 0; p < n; ++p)
        staging().copy2d(static_cast<char *>(out) + size_t(p) * row,
                         size_t(n) * row,
                         static_cast<char *>(gathered) + size_t(p) * piece, row,
                         row, size_t(outer));
  }

  void reduceScatter(loomrt_ctx *rt, const std::string &what, const int *axes,
                     int numAxes, int dtype, int reduction, const void *in,
                     void *out, int64_t outer, int64_t chunk) override {
    ncclComm_t comm = communicator(rt, axes, numAxes, what);
    int64_t n = groupSize(rt, axes, numAxes);
    size_t row = size_t(chunk) * elementBytes(dtype),
           piece = size_t(outer) * row;
    // [outer][n][chunk] -> [n][outer][chunk], so that piece p is contiguous.
    const void *packed = in;
    if (outer != 1) {
      void *buffer = staging().staging(0, piece * size_t(n));
      for (int64_t p = 0; p < n; ++p)
        staging().copy2d(static_cast<char *>(buffer) + size_t(p) * piece, row,
                         static_cast<const char *>(in) + size_t(p) * row,
                         size_t(n) * row, row, size_t(outer));
      packed = buffer;
    }
    if (sumsInF32(rt, axes, numAxes, dtype, reduction)) {
      size_t mine = size_t(outer * chunk), total = mine * size_t(n);
      float *wide =
          static_cast<float *>(staging().staging(1, (total + mine) * 4));
      staging().convert(dtype, packed, LOOMRT_F32, wide, int64_t(total));
      issue(rt, comm, what, [&] {
        return ncclReduceScatter(wide, wide + total, mine, ncclFloat32, ncclSum,
                                 comm, stream(rt));
      });
      staging().convert(LOOMRT_F32, wide + total, dtype, out, int64_t(mine));
      return;
    }
    issue(rt, comm, what, [&] {
      return ncclReduceScatter(
          packed, out, size_t(outer * chunk), ncclType(dtype),
          reduction == LOOMRT_MAX ? ncclMax : ncclSum, comm, stream(rt));
    });
  }

  void allToAll(loomrt_ctx *rt, const std::string &what, const int *axes,
                int numAxes, int dtype, const void *in, void *out,
                const AllToAll &layout) override {
    ncclComm_t comm = communicator(rt, axes, numAxes, what);
    size_t piece = size_t(layout.pieceElements) * elementBytes(dtype);
    char *send =
        static_cast<char *>(staging().staging(0, piece * size_t(layout.n)));
    char *receive =
        static_cast<char *>(staging().staging(1, piece * size_t(layout.n)));
    layout.pack(dtype, in, send);
    issue(rt, comm, what, [&] {
      ncclResult_t status = ncclGroupStart();
      for (int64_t p = 0; p < layout.n && status == ncclSuccess; ++p) {
        status = ncclSend(send + size_t(p) * piece, piece, ncclUint8, int(p),
                          comm, stream(rt));
        if (status == ncclSuccess || status == ncclInProgress)
          status = ncclRecv(receive + size_t(p) * piece, piece, ncclUint8,
                            int(p), comm, stream(rt));
      }
      ncclResult_t end = ncclGroupEnd();
      return status == ncclSuccess || status == ncclInProgress ? end : status;
    });
    for (int64_t p = 0; p < layout.n; ++p)
      layout.unpack(dtype, receive + size_t(p) * piece, p, out);
  }

  void permute(loomrt_ctx *rt, const std::string &what, const int *axes,
               int numAxes, int dtype, const void *in, void *out, int64_t count,
               const int64_t *pairs, int numPairs) override {
    ncclComm_t comm = communicator(rt, axes, numAxes, what);
    int64_t me = loomrt_group_rank(rt, axes, numAxes);
    size_t bytes = size_t(count) * elementBytes(dtype);
    const void *source = in;
    if (in == out) {
      void *copy = staging().staging(0, bytes);
      staging().copy2d(copy, bytes, in, bytes, bytes, 1);
      source = copy;
    }
    bool received = false;
    for (int p = 0; p < numPairs; ++p)
      received |= pairs[2 * p + 1] == me;
    if (!received)
      staging().zero(out, bytes);
    issue(rt, comm, what, [&] {
      ncclResult_t status = ncclGroupStart();
      for (int p = 0; p < numPairs; ++p) {
        int64_t from = pairs[2 * p], to = pairs[2 * p + 1];
        if (from == me && (status == ncclSuccess || status == ncclInProgress))
          status =
              ncclSend(source, bytes, ncclUint8, int(to), comm, stream(rt));
        if (to == me && (status == ncclSuccess || status == ncclInProgress))
          status = ncclRecv(out, bytes, ncclUint8, int(from), comm, stream(rt));
      }
      ncclResult_t end = ncclGroupEnd();
      return status == ncclSuccess || status == ncclInProgress ? end : status;
    });
  }

  void broadcast(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t count, int64_t root) override {
    ncclComm_t comm = communicator(rt, axes, numAxes, what);
    issue(rt, comm, what, [&] {
      return ncclBroadcast(in, out, size_t(count) * elementBytes(dtype),
                           ncclUint8, int(root), comm, stream(rt));
    });
  }

  /// A send is held back, its data staged, until this rank's mirror
  /// receive (the same axis, the opposite offset), and goes in one NCCL
  /// group with it. NCCL progresses sends and receives together only within
  /// a group, so a ring of sends then receives, or a message to oneself,
  /// would otherwise wait forever; and in an SPMD program every rank's k-th
  /// such group holds the operations matching its neighbours' k-th, so no
  /// group waits for a later one. Sends still held at the end of the step
  /// go then, by themselves (docs/running.md: what a program may send).
  void send(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, const void *in, int64_t count) override {
    ncclComm_t comm = communicator(rt, &axis, 1, what);
    size_t bytes = size_t(count) * elementBytes(dtype);
    void *staged = staging().staging(kSendSlots + sendsThisStep++, bytes);
    staging().copy2d(staged, bytes, in, bytes, bytes, 1);
    held.push_back(
        {comm, axis, offset, axisNeighbour(rt, axis, offset), staged, bytes});
  }

  void recv(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, void *out, int64_t count) override {
    ncclComm_t comm = communicator(rt, &axis, 1, what);
    int from = axisNeighbour(rt, axis, offset);
    std::vector<std::pair<int, int64_t>> heldAt;
    for (const HeldSend &send : held)
      heldAt.push_back({send.axis, send.offset});
    std::vector<HeldSend> sends;
    int mirror = mirrorSend(heldAt, axis, offset, groupSize(rt, &axis, 1));
    if (mirror >= 0) {
      sends.push_back(held[size_t(mirror)]);
      held.erase(held.begin() + mirror);
    }
    issueGroup(
        rt, what, sends,
        [&](ncclResult_t status) {
          if (status == ncclSuccess || status == ncclInProgress)
            status = ncclRecv(out, size_t(count) * elementBytes(dtype),
                              ncclUint8, from, comm, stream(rt));
          return status;
        },
        comm);
  }

  void watchStep(loomrt_ctx *rt, const std::string &what) override {
    watch(rt, what);
  }

  void endStep(loomrt_ctx *rt) override {
    issueHeldSends(rt);
    sendsThisStep = 0;
  }

  /// Stops the watchdog (the step was synchronised: nothing is pending)
  /// and finalises the communicators, polling as for every NCCL call.
  void finish(loomrt_ctx *rt) override {
    issueHeldSends(rt);
    watchdog.reset();
    std::map<std::vector<int>, ncclComm_t> finished;
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished.swap(comms);
    }
    for (auto &entry : finished) {
      settle(rt, entry.second, ncclCommFinalize(entry.second),
             "finishing the NCCL communicator over " +
                 axesText(rt, entry.first.data(), int(entry.first.size())));
      ncclCommDestroy(entry.second);
    }
  }

  /// ncclCommAbort frees kernels stuck in a collective, but it may itself
  /// wait (for a captured graph that still holds the communicator), so it
  /// gets a few seconds on a thread of its own; the job ends regardless.
  [[noreturn]] void abort(loomrt_ctx *, int code) override {
    auto aborted = std::make_shared<std::atomic<bool>>(false);
    std::thread([this, aborted] {
      abortCommunicators();
      *aborted = true;
    }).detach();
    for (int waited = 0; waited < 50 && !*aborted; ++waited)
      usleep(100000);
    endJob(code);
  }

private:
  /// A send waiting for its mirror receive (see send()).
  struct HeldSend {
    ncclComm_t comm;
    int axis;
    int64_t offset;
    int peer;
    void *data;
    size_t bytes;
  };
  std::vector<HeldSend> held;
  /// The k-th send of a step stages in slot kSendSlots + k: never reused
  /// within the step (so never grown while NCCL may still read it), and
  /// in later steps by the same send, at the same size.
  int sendsThisStep = 0;

  static const LoopbackOps &staging() { return *deviceOps().loopback; }
  static cudaStream_t stream(loomrt_ctx *rt) {
    return static_cast<cudaStream_t>(loomrt_stream(rt));
  }

  /// Waits (polling, under the timeout) until the communicator has taken
  /// the last call; ends the job on an NCCL error.
  void settle(loomrt_ctx *rt, ncclComm_t comm, ncclResult_t status,
              const std::string &what) {
    double start = now(), timeout = collectiveTimeout(rt);
    while (status == ncclInProgress) {
      if (now() - start > timeout)
        abortJob(rt,
                 format("%s: NCCL did not take the call within %g s "
                        "(--collective-timeout)",
                        what.c_str(), timeout),
                 3);
      usleep(50);
      ncclCommGetAsyncError(comm, &status);
    }
    if (status != ncclSuccess)
      abortJob(rt,
               format("%s: NCCL failed: %s (%s)", what.c_str(),
                      ncclGetErrorString(status), ncclGetLastError(comm)),
               4);
  }

  /// Issues one NCCL operation and hands its completion to the watchdog.
  /// While the step is captured into a CUDA graph there is no event to
  /// poll: the eager steps before the capture are watched collective by
  /// collective, and in replays the watchdog still sees NCCL's errors.
  template <typename Call>
  void issue(loomrt_ctx *rt, ncclComm_t comm, const std::string &what,
             Call call) {
    settle(rt, comm, call(), what);
    if (streamIsCapturing())
      return;
    watch(rt, what);
  }

  /// `sends`, then `more` (given the status so far), in one NCCL group;
  /// waits until every communicator involved has taken it.
  template <typename More>
  void issueGroup(loomrt_ctx *rt, const std::string &what,
                  const std::vector<HeldSend> &sends, More more,
                  ncclComm_t moreComm) {
    std::vector<ncclComm_t> involved;
    if (moreComm)
      involved.push_back(moreComm);
    ncclResult_t status = ncclGroupStart();
    for (const HeldSend &send : sends) {
      if (status == ncclSuccess || status == ncclInProgress)
        status = ncclSend(send.data, send.bytes, ncclUint8, send.peer,
                          send.comm, stream(rt));
      if (std::find(involved.begin(), involved.end(), send.comm) ==
          involved.end())
        involved.push_back(send.comm);
    }
    status = more(status);
    ncclResult_t end = ncclGroupEnd();
    if (status == ncclSuccess || status == ncclInProgress)
      status = end;
    if (involved.empty())
      return;
    // In progress: each communicator says when it has taken its part.
    for (ncclComm_t comm : involved)
      settle(rt, comm, status, what);
    if (!streamIsCapturing())
      watch(rt, what);
  }

  void issueHeldSends(loomrt_ctx *rt) {
    if (held.empty())
      return;
    std::vector<HeldSend> sends;
    sends.swap(held);
    issueGroup(
        rt, "the sends held back for a receive that did not come", sends,
        [](ncclResult_t status) { return status; }, nullptr);
  }

  /// The watchdog gets an event recorded after the work on the stream.
  void watch(loomrt_ctx *rt, const std::string &what) {
    cudaEvent_t event = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!freeEvents.empty()) {
        event = freeEvents.back();
        freeEvents.pop_back();
      }
    }
    if (!event &&
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess)
      abortJob(rt, what + ": cannot create a CUDA event", 7);
    if (cudaEventRecord(event, stream(rt)) != cudaSuccess)
      abortJob(rt, what + ": cannot record a CUDA event", 7);
    if (!watchdog) {
      int device = 0;
      cudaGetDevice(&device);
      watchdog = std::make_unique<Watchdog>(
          collectiveTimeout(rt),
          [this, device] {
            static thread_local bool bound = false;
            if (!bound)
              bound = cudaSetDevice(device) == cudaSuccess;
            return communicatorError();
          },
          [rt](const std::string &message) {
            // The main thread may be blocked in a synchronisation that
            // never ends: this thread ends the job.
            abortJob(rt, message, 3);
          });
    }
    watchdog->watch(what, [this, event] {
      cudaError_t state = cudaEventQuery(event);
      if (state == cudaErrorNotReady)
        return false;
      std::lock_guard<std::mutex> lock(mutex);
      freeEvents.push_back(event);
      return true;
    });
  }

  /// The first communicator's asynchronous error, as text ("" when none).
  std::string communicatorError() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &entry : comms) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(entry.second, &state);
      if (state != ncclSuccess && state != ncclInProgress)
        return format("NCCL reports an error on a communicator: %s (%s)",
                      ncclGetErrorString(state),
                      ncclGetLastError(entry.second));
    }
    return "";
  }

  void abortCommunicators() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &entry : comms)
      ncclCommAbort(entry.second);
    comms.clear();
  }

  /// The communicator over `axes`, made on first use (every rank of the
  /// world makes it at the same collective, so MPI meets them all).
  ncclComm_t communicator(loomrt_ctx *rt, const int *axes, int numAxes,
                          const std::string &what) {
    std::vector<int> key(axes, axes + numAxes);
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto found = comms.find(key);
      if (found != comms.end())
        return found->second;
    }
    int groupRank = int(loomrt_group_rank(rt, axes, numAxes)),
        n = int(groupSize(rt, axes, numAxes));
    MPI_Comm group;
    mpiTransport()->barrier(rt, what);
    if (MPI_Comm_split(
            MPI_COMM_WORLD,
            int(groupColour(model(rt), coordinates(rt), axes, numAxes)),
            groupRank, &group) != MPI_SUCCESS)
      abortJob(rt, what + ": MPI could not split the world for NCCL", 4);
    ncclUniqueId id;
    if (groupRank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
      abortJob(rt, what + ": NCCL could not make a unique id", 4);
    MPI_Request request;
    MPI_Ibcast(&id, int(sizeof id), MPI_BYTE, 0, group, &request);
    double start = now();
    for (int done = 0; !done;) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (!done && now() - start > collectiveTimeout(rt))
        abortJob(rt, what + ": the NCCL id never arrived", 3);
      if (!done)
        usleep(100);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t status =
        ncclCommInitRankConfig(&comm, n, id, groupRank, &config);
    settle(rt, comm, status,
           what + ": creating the NCCL communicator over " +
               axesText(rt, axes, numAxes));
    std::lock_guard<std::mutex> lock(mutex);
    comms.emplace(key, comm);
    return comm;
  }

  std::mutex mutex;
  std::map<std::vector<int>, ncclComm_t> comms;
  std::vector<cudaEvent_t> freeEvents;
  std::unique_ptr<Watchdog> watchdog;
};

} // namespace

Transport *loomrt::ncclTransport() {
  static NcclTransport *transport = new NcclTransport();
  return transport;
}
