//===- Runtime.h - What libloomrt's files share
//----------------------------===//
//
// The process code (Process.cpp) runs one rank per thread it is given; the
// ranks reach each other through a Transport (MPI between processes, NCCL
// between GPUs, or the loopback mode for every rank in one process) and run
// their step on the memory a DeviceOps describes (the host or a GPU).
// Internal to the runtime: generated code sees only loomrt.h.
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_RUNTIME_H
#define LOOMRT_RUNTIME_H

#include "loomrt.h"

#include <string>
#include <utility>
#include <vector>

namespace loomrt {

class Transport;

/// Operations the loopback mode needs from a backend whose ranks share one
/// address space (runtime/Loopback.cpp). Everything is ordered after the
/// calling rank's earlier work (its stream, on a GPU); a mark is how
/// another rank orders its own work after it.
/// The staging slots of loomrt_combined: the members' packed inputs and
/// the one collective's result (the transports' own use 0 and 1).
constexpr int kCombinedSlots = 2;
/// The first staging slot and mark of outgoing messages (send): each
/// channel, or each send held back for a group (NCCL), has its own, so a
/// message is never overwritten before it is received.
constexpr int kSendSlots = 4;

struct LoopbackOps {
  /// This rank's buffer `slot` (0, 1: collectives; kCombinedSlots and the
  /// next: loomrt_combined; kSendSlots on: one per
  /// outgoing message), grown to at least `bytes`. Growing first waits for
  /// the rank's work, so no peer still reads the old one.
  void *(*staging)(int slot, size_t bytes);
  /// Records this rank's work so far in mark `which` (numbered as the
  /// slots) and returns it; null where work is done when it is issued (the
  /// host).
  void *(*mark)(int which);
  /// Orders this rank's later work after another rank's mark.
  void (*waitFor)(void *mark);
  /// out[r][c] = reduction over p < n of inputs[p][r * inPitch + c], in the
  /// order p = 0, 1, ..., accumulated in f32 for floating types and rounded
  /// once (pitches in elements).
  void (*reduce)(int dtype, int reduction, const void *const *inputs, int n,
                 int64_t rows, int64_t columns, int64_t inPitch, void *out,
                 int64_t outPitch);
  /// A 2-D byte copy: `rows` rows of `width` bytes.
  void (*copy2d)(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                 size_t width, size_t rows);
  void (*zero)(void *dst, size_t bytes);
  /// Waits until this rank's work so far is done.
  void (*synchronize)();
  /// out[i] = in[i] converted from one element type to another (rounded to
  /// nearest even when narrowing); null on the host, where no NCCL runs.
  void (*convert)(int fromDtype, const void *in, int toDtype, void *out,
                  int64_t count);
};

/// Where the step's arena lives. The process (options, initial values, files)
/// works on a host copy; a backend whose memory is elsewhere (CUDA) moves it
/// before the first step and back after the last. Defined by the kernel
/// library an executable links (cpu/Kernels.cpp or cuda/Kernels.cu).
struct DeviceOps {
  const char *name;
  /// Whether the arena is host memory that MPI can move (the CPU backend).
  bool hostMemory;
  /// Binds the calling thread to its device (`localIndex`: the rank's index
  /// among the ranks of its machine; `ranksInProcess`: how many ranks share
  /// this process) before anything else it does.
  void (*bind)(loomrt_ctx *rt, int localIndex, int ranksInProcess);
  /// The arena the step gets; may return `host` itself.
  char *(*allocate)(char *host, size_t bytes);
  void (*upload)(char *device, const char *host, size_t bytes);
  void (*download)(char *host, const char *device, size_t bytes);
  /// Waits until the step's work is done (for timing and before copies).
  void (*synchronize)();
  void (*release)(char *device, char *host);
  /// The loopback mode's operations on this backend's memory.
  const LoopbackOps *loopback;
  /// Runs the step, or replays it (a CUDA graph captured on the first call
  /// with `capture` set); null where steps are plain calls. Returns whether
  /// the step's work went to the device as a CUDA graph.
  bool (*runStep)(loomrt_ctx *rt, const loomrt_model *model, char *arena,
                  bool capture);
  /// Called by each rank after its last step, before the transport
  /// finishes: releases what the steps hold (a captured graph, whose NCCL
  /// work keeps its communicators from being finalized); may be null.
  void (*endSteps)();
  /// Called after every step (synchronised): deferred checks of the step's
  /// results, such as targets outside the vocabulary; may be null.
  void (*afterStep)(loomrt_ctx *rt);
  /// --profile: marks a point of the rank's work (a clock reading, or a
  /// CUDA event); after synchronising, the seconds between two marks; then
  /// every mark of the step is released.
  uint64_t (*profileMark)();
  double (*profileSeconds)(uint64_t from, uint64_t to);
  void (*profileRelease)();
  /// Measures what the roofline compares kernels with: memory bandwidth (a
  /// large copy, bytes read plus written per second) and matrix throughput
  /// (a large GEMM in the backend's fastest type); `how` says what ran.
  void (*measurePeaks)(double *bytesPerSecond, double *flopsPerSecond,
                       std::string *how);
  /// Started collectives on a backend with streams (CUDA): work issued
  /// between beginStarted and endStarted(future) goes to the rank's
  /// communication stream, after the rank's work so far;
  /// waitStarted(future) orders the rank's later work after it. Null on
  /// the host, where collectives run as they are issued.
  void (*beginStarted)();
  void (*endStarted)(int future);
  void (*waitStarted)(int future);
};
const DeviceOps &deviceOps();

/// Runs the model's step on this rank, then its transport's endStep (what
/// DeviceOps::runStep calls, captured or not).
void runModelStep(loomrt_ctx *rt, const loomrt_model *model, char *arena);

/// Where element `position` of a cross-entropy's targets (at `targets`,
/// this rank's) is, for an error: `targets[5, 7]`, the global index in the
/// model input it belongs to (as the inputs file holds it), or, when it is
/// not a model input's, "position P of this rank's targets".
std::string targetPlace(const loomrt_ctx *rt, const void *targets, int dtype,
                        int64_t position);

/// Whether `mine` holds on every rank (all ranks must call it together).
bool everyRank(loomrt_ctx *rt, bool mine, const std::string &what);

/// CUDA: whether the rank's stream is being captured into a graph (work
/// cannot be waited for then).
bool streamIsCapturing();

/// --profile: times a part of the open kernel's work while in scope (the
/// launches of a runtime op made of several, such as loom.logits_stats's
/// GEMMs and row statistics); the profile lists each kernel's parts beneath
/// it, by name. Nothing when not profiling or outside a kernel.
class ProfiledPart {
public:
  ProfiledPart(loomrt_ctx *rt, const char *name);
  ~ProfiledPart();
  ProfiledPart(const ProfiledPart &) = delete;
  ProfiledPart &operator=(const ProfiledPart &) = delete;

private:
  loomrt_ctx *rt;
  size_t part = 0;
  uint64_t begin = 0;
};

/// Reusable f32 buffers for packing GEMM operands (slot 0..2).
std::vector<float> &scratch(loomrt_ctx *rt, int slot);
/// Time spent in GEMMs is accumulated for `--bench`.
double gemmClockStart(loomrt_ctx *rt);
void gemmClockStop(loomrt_ctx *rt, double start);

double now();
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *dtypeText(int dtype);

/// A world rank's mesh coordinates (row-major over the mesh's axes).
std::vector<int64_t> coordinatesOf(const loomrt_model &model, int64_t rank);
/// "rank 3 (dp=1, tp=1)" for any world rank of the model's mesh.
std::string positionOf(const loomrt_model &model, int64_t rank);
/// The same for this rank.
std::string meshPosition(const loomrt_ctx *rt);
/// "[dp, tp]".
std::string axesText(const loomrt_ctx *rt, const int *axes, int numAxes);
/// Prints "loom: <position>: error: <message>" and ends every rank.
[[noreturn]] void abortJob(loomrt_ctx *rt, const std::string &message,
                           int code);
/// The same without a rank at hand (a failed CUDA call deep in a kernel
/// wrapper): "loom: error: <message>", then every rank ends.
[[noreturn]] void failProcess(const std::string &message, int code);
/// Ends the job with `code`: MPI_Abort when other processes must end too; a
/// process alone just exits, without Open MPI's banner about killing the
/// others.
[[noreturn]] void endJob(int code);
/// The rank's mesh coordinates, world rank and size, and its transport.
int worldRank(const loomrt_ctx *rt);
const std::vector<int64_t> &coordinates(const loomrt_ctx *rt);
const loomrt_model &model(const loomrt_ctx *rt);
double collectiveTimeout(const loomrt_ctx *rt);
/// An on/off environment variable (LOOMRT_FAST_KERNELS, LOOMRT_GEMM_TUNE,
/// LOOMRT_PACK_GEMMS): `byDefault` when unset or empty, else whether it is
/// 1 (start-up refuses any value but 0 and 1).
bool envSwitch(const char *name, bool byDefault);
/// Whether an environment variable is set to `value`.
bool envIs(const char *name, const char *value);
/// The columns of a block of logits that LOOMRT_LOGITS_COLUMNS asks for
/// (checked at start-up), or 0: the backend's own.
int64_t logitsColumnsAsked(const loomrt_ctx *rt);
/// Which group over `axes` a rank with `coords` is in: its coordinates on
/// the other axes, row-major (an MPI_Comm_split colour).
int64_t groupColour(const loomrt_model &model,
                    const std::vector<int64_t> &coords, const int *axes,
                    int numAxes);
/// The coordinate on `axis` that is `offset` steps from this rank's,
/// cyclically (its rank in the communicator over that axis).
int axisNeighbour(const loomrt_ctx *rt, int axis, int64_t offset);

/// Of the sends a rank holds, as (axis, offset) in the order made, the
/// index of the oldest that a receive along `axis` from `offset` mirrors
/// (the same axis, offsets summing to 0 modulo the axis's `size`), or -1.
/// In an SPMD program such a send and receive are the pair that every
/// rank's neighbours make at the same point.
inline int mirrorSend(const std::vector<std::pair<int, int64_t>> &sends,
                      int axis, int64_t offset, int64_t size) {
  for (size_t i = 0; i < sends.size(); ++i)
    if (sends[i].first == axis &&
        ((sends[i].second + offset) % size + size) % size == 0)
      return int(i);
  return -1;
}
/// The number of ranks in a group over `axes`.
int64_t groupSize(const loomrt_ctx *rt, const int *axes, int numAxes);
/// The future whose collectives the rank is issuing
/// (loomrt_start_begin/end), or -1 when they are to complete at once.
int startedFuture(const loomrt_ctx *rt);
/// Whether a transport must sum in f32 and round once itself: MPI's and
/// NCCL's reductions round each partial bf16 or f16 sum to the element
/// type, and docs/language.md (11.2) rounds a reduction once (two ranks'
/// sum is rounded once either way; a maximum never rounds).
bool sumsInF32(const loomrt_ctx *rt, const int *axes, int numAxes, int dtype,
               int reduction);

/// all_to_all's pieces: the local [shape] is cut into n pieces along
/// splitDim; group rank p receives piece chunkOf[p] (p when chunkOf is
/// empty), and the piece from group rank p lands at chunk p of concatDim.
/// Packing and unpacking run on the backend's memory (loomrt_extract /
/// loomrt_insert).
struct AllToAll {
  AllToAll(int64_t n, int rank, const int64_t *shape, int splitDim,
           int concatDim, std::vector<int64_t> chunkOf = {});
  /// in -> pieces[n][pieceElements].
  void pack(int dtype, const void *in, void *pieces) const;
  /// The piece from group rank p -> its place in out.
  void unpack(int dtype, const void *piece, int64_t p, void *out) const;
  int64_t n, pieceElements;
  int64_t outer, splitSize, chunk, inner;       // the split
  int64_t concatOuter, concatSize, concatInner; // the concatenation
  std::vector<int64_t> chunkOf;
};

/// How ranks reach each other. One instance per process, shared by the
/// ranks the process runs. `what` names the operation for messages
/// ("collective #4 all_gather over [tp] (loom.all_gather at gpt.loom:50:3)").
/// Collective buffers are the backend's memory; the process-level
/// operations move small host values over the whole world.
class Transport {
public:
  virtual ~Transport();
  virtual const char *name() const = 0;

  /// Process level: a barrier, rank 0's `*value` to every rank, and
  /// element-wise sums or maxima of `values` over every rank, delivered to
  /// every rank.
  virtual void barrier(loomrt_ctx *rt, const std::string &what) = 0;
  virtual void shareLeaderInt(loomrt_ctx *rt, int *value,
                              const std::string &what) = 0;
  virtual void reduceDoubles(loomrt_ctx *rt, double *values, int count,
                             bool maximum, const std::string &what) = 0;

  /// The collectives of loomrt.h, with their layouts.
  virtual void allReduce(loomrt_ctx *rt, const std::string &what,
                         const int *axes, int numAxes, int dtype, int reduction,
                         const void *in, void *out, int64_t count) = 0;
  virtual void allGather(loomrt_ctx *rt, const std::string &what,
                         const int *axes, int numAxes, int dtype,
                         const void *in, void *out, int64_t outer,
                         int64_t chunk) = 0;
  virtual void reduceScatter(loomrt_ctx *rt, const std::string &what,
                             const int *axes, int numAxes, int dtype,
                             int reduction, const void *in, void *out,
                             int64_t outer, int64_t chunk) = 0;
  virtual void allToAll(loomrt_ctx *rt, const std::string &what,
                        const int *axes, int numAxes, int dtype, const void *in,
                        void *out, const AllToAll &layout) = 0;
  virtual void permute(loomrt_ctx *rt, const std::string &what, const int *axes,
                       int numAxes, int dtype, const void *in, void *out,
                       int64_t count, const int64_t *pairs, int numPairs) = 0;
  virtual void broadcast(loomrt_ctx *rt, const std::string &what,
                         const int *axes, int numAxes, int dtype,
                         const void *in, void *out, int64_t count,
                         int64_t root) = 0;
  /// Point to point along one axis: to / from the rank `offset` steps away.
  virtual void send(loomrt_ctx *rt, const std::string &what, int axis,
                    int64_t offset, int dtype, const void *in,
                    int64_t count) = 0;
  virtual void recv(loomrt_ctx *rt, const std::string &what, int axis,
                    int64_t offset, int dtype, void *out, int64_t count) = 0;

  /// The all_reduces, all_gathers and reduce_scatters issued while
  /// startedFuture(rt) is `future` may complete here instead of before
  /// they return (the MPI transport's do); this waits for them and writes
  /// their outputs. A transport that completes every collective at once,
  /// or orders them on the backend's streams, has nothing to do.
  virtual void waitStarted(loomrt_ctx *rt, int future) {}

  /// Called by each rank at the end of every step's work, before the step
  /// is synchronised (inside a CUDA graph capture too): issues what the
  /// transport held back.
  virtual void endStep(loomrt_ctx *rt) {}

  /// Called after a step's work was enqueued as a CUDA graph (captured this
  /// step, or replayed): its collectives were not watched one by one, so
  /// a transport whose collectives can hang watches the whole step as
  /// `what`.
  virtual void watchStep(loomrt_ctx *rt, const std::string &what) {}

  /// Called by each rank after its last collective of the run.
  virtual void finish(loomrt_ctx *rt) {}

  /// Ends every rank after a message has been printed.
  [[noreturn]] virtual void abort(loomrt_ctx *rt, int code) = 0;
};

/// The transports a process can use. MPI moves host memory between
/// processes; the loopback mode runs every rank of the mesh as a thread of
/// this process over the backend's LoopbackOps; NCCL (CUDA builds with
/// NCCL) moves device memory between processes, one GPU each.
Transport *mpiTransport();
Transport *loopbackTransport(const loomrt_model &model, const LoopbackOps &ops);
/// Null when this build has no NCCL.
Transport *ncclTransport();
/// LoopbackOps on host memory (the CPU backend's).
const LoopbackOps &hostLoopbackOps();

} // namespace loomrt

#endif // LOOMRT_RUNTIME_H
