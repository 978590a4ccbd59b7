//===- NcclOnCpu.h - NCCL's collectives between processes, on the host -*- C++
//-*-===//
//
// Part of the Loom project.
//
// The part of NCCL that libloomrt's NCCL transport (runtime/cuda/Nccl.cpp)
// calls, over MPI point-to-point messages between processes, so that its
// CUDA backend runs a rank per process without GPUs (with CudaRuntimeOnCpu.h;
// runtime/tools/cuda-on-cpu.py puts this header where Nccl.cpp includes
// <nccl.h>). It keeps what the transport relies on:
//
// - communicators over any subset of the processes, made from a unique id
//   that the caller hands to the members (the id names the process that
//   made it, which gathers the members' places);
// - operations run on the stream in its order, after the host has moved on
//   (cuda_on_cpu::enqueueDeferred), so a collective that another rank never
//   joins leaves its event unfinished for the transport's watchdog;
// - sends and receives of one ncclGroupStart/End progress together, and a
//   pair's messages match in the order they were posted, as NCCL's do;
// - sums of bf16 and f16 are rounded to the element type after every
//   addition, as NCCL's rings and trees do (the transport widens groups of
//   more than two ranks to f32 because of that);
// - a communicator's operation issued on one stream while CUDA does not
//   order its last one, issued on another, before it ends the job
//   (checkOrder): real NCCL could pair them differently on each rank;
// - ncclCommAbort ends operations in flight, and a non-blocking
//   communicator reports an error through ncclCommGetAsyncError;
// - faults on request (LOOM_NCCL_ON_CPU_FAULT), to test the transport's
//   error paths.
//
// Every rank reduces in rank order, so all ranks get the same bits; real
// NCCL adds in its own order. Bandwidth, NVLink and kernels are not
// emulated.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EMULATION_NCCLONCPU_H
#define LOOM_RUNTIME_EMULATION_NCCLONCPU_H

#include "CudaRuntimeOnCpu.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
};
enum ncclDataType_t {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9
};
enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 };
struct ncclUniqueId {
  char internal[128];
};
struct ncclConfig_t {
  int blocking;
};
#define NCCL_CONFIG_INITIALIZER                                                \
  { 1 }

namespace nccl_on_cpu {

/// Messages of communicator k carry tag kTagBase + k; making it uses
/// kInitTagBase + k. A communicator's number is its maker's world rank
/// times kPerProcess plus the maker's count.
constexpr int kTagBase = 20000, kInitTagBase = 10000, kPerProcess = 64,
              kMaxRanks = 64;

inline int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// Set by ncclCommAbort (from any thread): operations in flight end.
inline std::atomic<bool> &aborting() {
  static std::atomic<bool> flag{false};
  return flag;
}

struct Comm {
  int rank = 0, size = 1, tag = 0;
  std::vector<int> world; // world rank of each rank of the communicator
  std::atomic<int> error{ncclSuccess};
  std::string lastError;
  /// The stream of its last operation, and that operation's place there.
  cuda_on_cpu::Stream *lastStream = nullptr;
  uint64_t lastPlace = 0;
};

/// NCCL runs a communicator's operations in the order each rank's GPU
/// reaches them. Issued on two streams with nothing ordering them, they
/// may run in one order on one rank and in the other on another, which
/// pairs different operations (a hang or wrong data). The emulation runs
/// them in one order on every rank, so it ends the job here instead: an
/// operation on a stream other than the one of the communicator's last
/// operation, when neither a wait of this stream (directly or through
/// other streams) nor a host synchronisation since orders that operation
/// before it (cuda_on_cpu::ordered). Whether the emulation has already
/// run it does not matter: a GPU might not have.
inline void checkOrder(Comm *comm, cuda_on_cpu::Stream *stream) {
  if (!comm->lastStream || !stream || cuda_on_cpu::captureOf(stream) ||
      cuda_on_cpu::ordered(comm->lastStream, comm->lastPlace, stream))
    return;
  fprintf(stderr,
          "nccl_on_cpu: world rank %d: an operation on a communicator of %d "
          "ranks was issued on one stream while nothing ordered its last "
          "operation, issued on another, before it (no wait of this "
          "stream for it, and no host synchronisation since): NCCL may run "
          "the two in different orders on different ranks\n",
          worldRank(), comm->size);
  MPI_Abort(MPI_COMM_WORLD, 3);
}
inline void noteOperation(Comm *comm, cuda_on_cpu::Stream *stream,
                          uint64_t place) {
  if (cuda_on_cpu::captureOf(stream) || !stream)
    return;
  comm->lastStream = stream;
  comm->lastPlace = place;
}

inline size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

/// x (op) y; a maximum or minimum with a NaN is NaN, as on the CPU.
template <typename T> T reduced(ncclRedOp_t op, T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (op == ncclMax || op == ncclMin)
      if (x != x || y != y)
        return x != x ? x : y;
  switch (op) {
  case ncclSum:
    return x + y;
  case ncclProd:
    return x * y;
  case ncclMax:
    return x < y ? y : x;
  default:
    return y < x ? y : x;
  }
}

template <typename T>
void combineAs(ncclRedOp_t op, void *acc, const void *next, size_t count) {
  T *a = static_cast<T *>(acc);
  const T *b = static_cast<const T *>(next);
  for (size_t i = 0; i < count; ++i)
    a[i] = reduced(op, a[i], b[i]);
}

/// acc = acc (op) next, elementwise, rounded to the type after each step.
inline void combine(ncclDataType_t type, ncclRedOp_t op, void *acc,
                    const void *next, size_t count) {
  switch (type) {
  case ncclFloat32:
    return combineAs<float>(op, acc, next, count);
  case ncclFloat64:
    return combineAs<double>(op, acc, next, count);
  case ncclInt32:
    return combineAs<int32_t>(op, acc, next, count);
  case ncclInt64:
    return combineAs<int64_t>(op, acc, next, count);
  case ncclBfloat16:
  case ncclFloat16: {
    int dtype = type == ncclBfloat16 ? LOOMRT_BF16 : LOOMRT_F16;
    for (size_t i = 0; i < count; ++i)
      loomrt::store(dtype, acc, int64_t(i),
                    reduced(op, loomrt::load(dtype, acc, int64_t(i)),
                            loomrt::load(dtype, next, int64_t(i))));
    return;
  }
  default: // bytes: the transport reduces no other type
    return;
  }
}

/// One operation's messages: posted together, then waited for, polling so
/// that an abort ends the wait.
struct Exchange {
  Comm *comm;
  std::vector<MPI_Request> requests;

  void send(const void *data, size_t bytes, int peer) {
    requests.emplace_back();
    MPI_Isend(data, int(bytes), MPI_BYTE, comm->world[size_t(peer)], comm->tag,
              MPI_COMM_WORLD, &requests.back());
  }
  void receive(void *data, size_t bytes, int peer) {
    requests.emplace_back();
    MPI_Irecv(data, int(bytes), MPI_BYTE, comm->world[size_t(peer)], comm->tag,
              MPI_COMM_WORLD, &requests.back());
  }
  /// False when aborted (the messages are left to the ending process).
  bool wait() {
    for (;;) {
      int done = 0;
      if (MPI_Testall(int(requests.size()), requests.data(), &done,
                      MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
        comm->lastError = "an MPI message of the emulated NCCL failed";
        comm->error = ncclSystemError;
        return false;
      }
      if (done)
        return true;
      if (aborting()) {
        comm->error = ncclRemoteError;
        return false;
      }
      usleep(20);
    }
  }
};

/// Sends and receives of the open group (or of one call outside a group).
struct PointToPoint {
  Comm *comm;
  bool sending;
  void *data;
  size_t bytes;
  int peer;
  cuda_on_cpu::Stream *stream;
};
struct Group {
  int depth = 0;
  std::vector<PointToPoint> operations;
};
inline Group &group() {
  static thread_local Group open;
  return open;
}

/// Runs the operations as one exchange on their stream's order.
inline void issue(std::vector<PointToPoint> operations) {
  if (operations.empty())
    return;
  cuda_on_cpu::Stream *stream = operations.front().stream;
  for (const PointToPoint &op : operations)
    checkOrder(op.comm, stream);
  uint64_t place = cuda_on_cpu::enqueueDeferred(stream, [operations] {
    std::vector<Exchange> exchanges;
    for (const PointToPoint &op : operations) {
      auto found =
          std::find_if(exchanges.begin(), exchanges.end(),
                       [&](const Exchange &e) { return e.comm == op.comm; });
      if (found == exchanges.end())
        found = exchanges.insert(exchanges.end(), Exchange{op.comm, {}});
      if (op.sending)
        found->send(op.data, op.bytes, op.peer);
      else
        found->receive(op.data, op.bytes, op.peer);
    }
    for (Exchange &exchange : exchanges)
      if (!exchange.wait())
        return;
  });
  for (const PointToPoint &op : operations)
    noteOperation(op.comm, stream, place);
}

inline ncclResult_t checkComm(Comm *comm) {
  if (!comm)
    return ncclInvalidArgument;
  if (comm->error != ncclSuccess && comm->error != ncclInProgress)
    return ncclResult_t(comm->error.load());
  if (group().depth)
    return ncclInvalidUsage; // the transport groups only sends and receives
  return ncclSuccess;
}

/// LOOM_NCCL_ON_CPU_FAULT=RANK:N[:MODE[:RUN]] fails the N-th collective
/// call (0-based) of world rank RANK, so that the transport's error paths
/// run. MODE `error` (the default) as a network fault does, after the call
/// returned: the communicator reports ncclSystemError through
/// ncclCommGetAsyncError and the operation never ends, until
/// ncclCommAbort. `call`: the call itself returns ncclSystemError. `hang`:
/// the operation never ends and nothing reports an error (a peer that
/// stopped answering). RUN (from 1, the default): with `error` or `hang`,
/// the operation runs as it should until the stream runs it for the RUN-th
/// time (a CUDA graph runs it again at every replay).
struct Fault {
  enum Mode { Error, Call, Hang };
  int rank = -1;
  long at = -1;
  Mode mode = Error;
  long run = 1;
};
inline const Fault &fault() {
  static const Fault parsed = [] {
    Fault f;
    const char *text = getenv("LOOM_NCCL_ON_CPU_FAULT");
    if (!text || !*text)
      return f;
    char mode[16] = "error";
    int fields =
        sscanf(text, "%d:%ld:%15[^:]:%ld", &f.rank, &f.at, mode, &f.run);
    bool known = strcmp(mode, "error") == 0 || strcmp(mode, "call") == 0 ||
                 strcmp(mode, "hang") == 0;
    if (fields < 2 || f.rank < 0 || f.at < 0 || !known || f.run < 1) {
      fprintf(stderr,
              "nccl_on_cpu: LOOM_NCCL_ON_CPU_FAULT=%s is not "
              "RANK:N[:error|call|hang[:RUN]]\n",
              text);
      exit(2);
    }
    f.mode = mode[0] == 'e'   ? Fault::Error
             : mode[0] == 'c' ? Fault::Call
                              : Fault::Hang;
    return f;
  }();
  return parsed;
}

/// `work`, one collective call's operation, as its stream is to run it:
/// with the injected fault in its place from the fault's run on, if this
/// call is the one. Empty, with `status` set, when the call itself fails.
inline std::function<void()> withFault(Comm *comm, std::function<void()> work,
                                       ncclResult_t &status) {
  static std::atomic<long> calls{0};
  status = ncclSuccess;
  const Fault &f = fault();
  if (f.at < 0 || worldRank() != f.rank || calls++ != f.at)
    return work;
  static const char *const kInjected =
      "a fault injected by LOOM_NCCL_ON_CPU_FAULT";
  if (f.mode == Fault::Call) {
    comm->lastError = kInjected;
    status = ncclSystemError;
    return {};
  }
  auto runs = std::make_shared<long>(0);
  bool reports = f.mode == Fault::Error;
  long faultyRun = f.run;
  return [=] {
    if (++*runs < faultyRun) {
      work();
      return;
    }
    if (reports) {
      comm->lastError = kInjected; // before the error that publishes it
      comm->error = ncclSystemError;
    }
    while (!aborting())
      usleep(1000);
  };
}

/// Puts one collective call's operation on its stream, or fails the call
/// (LOOM_NCCL_ON_CPU_FAULT).
inline ncclResult_t enqueueCollective(Comm *comm, cudaStream_t stream,
                                      std::function<void()> work) {
  ncclResult_t status;
  std::function<void()> run = withFault(comm, std::move(work), status);
  if (run) {
    checkOrder(comm, stream);
    noteOperation(comm, stream,
                  cuda_on_cpu::enqueueDeferred(stream, std::move(run)));
  }
  return status;
}

/// `count` elements from every rank, reduced in rank order into `out`.
inline void reduceInRankOrder(ncclDataType_t type, ncclRedOp_t op,
                              const std::vector<std::vector<char>> &pieces,
                              void *out, size_t count) {
  std::vector<char> acc = pieces[0];
  for (size_t p = 1; p < pieces.size(); ++p)
    combine(type, op, acc.data(), pieces[p].data(), count);
  std::memcpy(out, acc.data(), acc.size());
}

} // namespace nccl_on_cpu

using ncclComm_t = nccl_on_cpu::Comm *;

inline const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclSystemError:
    return "unhandled system error (emulated)";
  case ncclInvalidArgument:
    return "invalid argument (emulated)";
  case ncclInvalidUsage:
    return "invalid usage (emulated)";
  case ncclRemoteError:
    return "remote process exited or there was a network error (emulated)";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "internal error (emulated)";
  }
}
inline const char *ncclGetLastError(ncclComm_t comm) {
  return comm ? comm->lastError.c_str() : "";
}

inline ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static int made = 0;
  if (made == nccl_on_cpu::kPerProcess)
    return ncclInternalError;
  std::memset(id, 0, sizeof *id);
  int place[2] = {nccl_on_cpu::worldRank(), made++};
  std::memcpy(id->internal, place, sizeof place);
  return ncclSuccess;
}

/// The maker of the id gathers each member's world rank and sends back the
/// whole list (blocking: every member calls this at about the same time).
inline ncclResult_t ncclCommInitRankConfig(ncclComm_t *result, int size,
                                           ncclUniqueId id, int rank,
                                           ncclConfig_t *) {
  int place[2];
  std::memcpy(place, id.internal, sizeof place);
  int worlds = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &worlds);
  if (size < 1 || size > nccl_on_cpu::kMaxRanks || rank < 0 || rank >= size ||
      place[0] < 0 || place[0] >= worlds)
    return ncclInvalidArgument;
  auto *comm = new nccl_on_cpu::Comm;
  comm->rank = rank;
  comm->size = size;
  int number = place[0] * nccl_on_cpu::kPerProcess + place[1];
  comm->tag = nccl_on_cpu::kTagBase + number;
  int initTag = nccl_on_cpu::kInitTagBase + number;
  comm->world.assign(size_t(size), -1);
  int me = nccl_on_cpu::worldRank();
  comm->world[size_t(rank)] = me;
  if (size > 1) {
    if (me == place[0]) {
      for (int received = 1; received < size; ++received) {
        int member[2];
        MPI_Recv(member, 2, MPI_INT, MPI_ANY_SOURCE, initTag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        if (member[0] < 0 || member[0] >= size ||
            comm->world[size_t(member[0])] != -1)
          return ncclInvalidUsage;
        comm->world[size_t(member[0])] = member[1];
      }
      for (int p = 0; p < size; ++p)
        if (p != rank)
          MPI_Send(comm->world.data(), size, MPI_INT, comm->world[size_t(p)],
                   initTag, MPI_COMM_WORLD);
    } else {
      int member[2] = {rank, me};
      MPI_Send(member, 2, MPI_INT, place[0], initTag, MPI_COMM_WORLD);
      MPI_Recv(comm->world.data(), size, MPI_INT, place[0], initTag,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  *result = comm;
  return ncclSuccess;
}

inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm,
                                          ncclResult_t *state) {
  *state = comm ? ncclResult_t(comm->error.load()) : ncclInvalidArgument;
  return ncclSuccess;
}
inline ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm ? ncclSuccess : ncclInvalidArgument;
}
inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
inline ncclResult_t ncclCommAbort(ncclComm_t comm) {
  nccl_on_cpu::aborting() = true;
  if (comm)
    comm->error = ncclRemoteError;
  return ncclSuccess;
}

inline ncclResult_t ncclGroupStart() {
  ++nccl_on_cpu::group().depth;
  return ncclSuccess;
}
inline ncclResult_t ncclGroupEnd() {
  nccl_on_cpu::Group &open = nccl_on_cpu::group();
  if (open.depth == 0)
    return ncclInvalidUsage;
  if (--open.depth == 0) {
    std::vector<nccl_on_cpu::PointToPoint> operations;
    operations.swap(open.operations);
    nccl_on_cpu::issue(std::move(operations));
  }
  return ncclSuccess;
}

namespace nccl_on_cpu {
inline ncclResult_t pointToPoint(bool sending, const void *data, size_t count,
                                 ncclDataType_t type, int peer, Comm *comm,
                                 cudaStream_t stream) {
  if (!comm)
    return ncclInvalidArgument;
  if (peer < 0 || peer >= comm->size)
    return ncclInvalidArgument;
  PointToPoint op{
      comm, sending, const_cast<void *>(data), count * typeBytes(type),
      peer, stream};
  if (group().depth) {
    if (!group().operations.empty() && group().operations[0].stream != stream)
      return ncclInvalidUsage;
    group().operations.push_back(op);
  } else {
    issue({op});
  }
  return ncclSuccess;
}
} // namespace nccl_on_cpu

inline ncclResult_t ncclSend(const void *data, size_t count,
                             ncclDataType_t type, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  return nccl_on_cpu::pointToPoint(true, data, count, type, peer, comm, stream);
}
inline ncclResult_t ncclRecv(void *data, size_t count, ncclDataType_t type,
                             int peer, ncclComm_t comm, cudaStream_t stream) {
  return nccl_on_cpu::pointToPoint(false, data, count, type, peer, comm,
                                   stream);
}

namespace nccl_on_cpu {
/// Rank p receives piece p of every rank's input and reduces them in rank
/// order: with `scatter` the pieces are consecutive blocks of `count`
/// elements (reduce-scatter), without it each is the whole input
/// (all-reduce).
inline ncclResult_t reduceEverywhere(bool scatter, const void *in, void *out,
                                     size_t count, ncclDataType_t type,
                                     ncclRedOp_t op, Comm *comm,
                                     cudaStream_t stream) {
  if (ncclResult_t status = checkComm(comm))
    return status;
  return enqueueCollective(comm, stream, [=] {
    size_t bytes = count * typeBytes(type);
    auto piece = [&](int p) {
      return static_cast<const char *>(in) + (scatter ? size_t(p) * bytes : 0);
    };
    std::vector<std::vector<char>> pieces(size_t(comm->size),
                                          std::vector<char>(bytes));
    std::memcpy(pieces[size_t(comm->rank)].data(), piece(comm->rank), bytes);
    Exchange exchange{comm, {}};
    for (int p = 0; p < comm->size; ++p)
      if (p != comm->rank) {
        // The whole input from this rank's copy: `out` may be `in`.
        exchange.send(scatter ? piece(p) : pieces[size_t(comm->rank)].data(),
                      bytes, p);
        exchange.receive(pieces[size_t(p)].data(), bytes, p);
      }
    if (exchange.wait())
      reduceInRankOrder(type, op, pieces, out, count);
  });
}
} // namespace nccl_on_cpu

inline ncclResult_t ncclAllReduce(const void *in, void *out, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream) {
  return nccl_on_cpu::reduceEverywhere(false, in, out, count, type, op, comm,
                                       stream);
}

inline ncclResult_t ncclReduceScatter(const void *in, void *out, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op,
                                      ncclComm_t comm, cudaStream_t stream) {
  return nccl_on_cpu::reduceEverywhere(true, in, out, count, type, op, comm,
                                       stream);
}

inline ncclResult_t ncclAllGather(const void *in, void *out, size_t count,
                                  ncclDataType_t type, ncclComm_t comm,
                                  cudaStream_t stream) {
  if (ncclResult_t status = nccl_on_cpu::checkComm(comm))
    return status;
  return nccl_on_cpu::enqueueCollective(comm, stream, [=] {
    size_t bytes = count * nccl_on_cpu::typeBytes(type);
    std::vector<char> mine(static_cast<const char *>(in),
                           static_cast<const char *>(in) + bytes);
    char *output = static_cast<char *>(out);
    nccl_on_cpu::Exchange exchange{comm, {}};
    for (int p = 0; p < comm->size; ++p)
      if (p != comm->rank) {
        exchange.send(mine.data(), bytes, p);
        exchange.receive(output + size_t(p) * bytes, bytes, p);
      }
    if (exchange.wait())
      std::memcpy(output + size_t(comm->rank) * bytes, mine.data(), bytes);
  });
}

inline ncclResult_t ncclBroadcast(const void *in, void *out, size_t count,
                                  ncclDataType_t type, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t status = nccl_on_cpu::checkComm(comm))
    return status;
  if (root < 0 || root >= comm->size)
    return ncclInvalidArgument;
  return nccl_on_cpu::enqueueCollective(comm, stream, [=] {
    size_t bytes = count * nccl_on_cpu::typeBytes(type);
    nccl_on_cpu::Exchange exchange{comm, {}};
    if (comm->rank == root) {
      for (int p = 0; p < comm->size; ++p)
        if (p != root)
          exchange.send(in, bytes, p);
      if (exchange.wait())
        std::memmove(out, in, bytes);
    } else {
      exchange.receive(out, bytes, root);
      exchange.wait();
    }
  });
}

#endif // LOOM_RUNTIME_EMULATION_NCCLONCPU_H
