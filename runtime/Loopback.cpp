//===- Loopback.cpp - Every rank of the mesh in one process ---------------===//
//
// The loopback mode (DESIGN.md, Runtime): each rank is a thread with its own
// arena (and, on a GPU, its own stream); a collective is a meeting of its
// group's threads, where each posts what it brings (a pointer into its
// memory and a mark of the work that produced it) and then computes its own
// result by reading the others' memory: copies and reductions issued on its
// own stream after the others' marks. A second meeting, with marks of those
// reads, keeps a rank from overwriting what a peer still reads.
//
// The host logic here is the same on the CPU and on a GPU; only LoopbackOps
// differ. Meetings are watched: a rank that never arrives, or ranks that
// arrive at different collectives, end the process with a message.
//===----------------------------------------------------------------------===//
#include "runtime/Elements.h"
#include "runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <unistd.h>

using namespace loomrt;

namespace {

/// What a rank brings to a meeting.
struct Post {
  /// The operation, for messages, and what must agree across the group
  /// (kind, axes, type, sizes).
  std::string what, signature;
  const void *data = nullptr;
  void *mark = nullptr;
  std::vector<double> values;
};

/// The ranks of one group meet here: each posts, and once all have posted
/// every member gets every post, in group order.
class Meeting {
public:
  explicit Meeting(std::vector<int> worldRanks)
      : members(std::move(worldRanks)), posts(members.size()),
        posted(members.size(), false) {}

  int size() const { return int(members.size()); }
  int memberOf(int worldRank) const {
    return int(std::find(members.begin(), members.end(), worldRank) -
               members.begin());
  }

  std::vector<Post> exchange(loomrt_ctx *rt, Post post) {
    int member = memberOf(worldRank(rt));
    std::unique_lock<std::mutex> lock(mutex);
    uint64_t round = generation;
    posts[size_t(member)] = std::move(post);
    posted[size_t(member)] = true;
    if (++arrived == size()) {
      published = posts;
      arrived = 0;
      std::fill(posted.begin(), posted.end(), false);
      ++generation;
      ready.notify_all();
    } else {
      double timeout = collectiveTimeout(rt);
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::duration<double>(timeout);
      while (generation == round)
        if (ready.wait_until(lock, deadline) == std::cv_status::timeout &&
            generation == round) {
          std::string missing;
          for (size_t i = 0; i < members.size(); ++i)
            if (!posted[i])
              missing += (missing.empty() ? "" : ", ") +
                         positionOf(model(rt), members[i]);
          abortJob(rt,
                   format("%s did not complete within %g s "
                          "(--collective-timeout): %s never reached it",
                          posts[size_t(member)].what.c_str(), timeout,
                          missing.c_str()),
                   3);
        }
    }
    std::vector<Post> result = published;
    lock.unlock();
    for (int i = 0; i < size(); ++i)
      if (result[size_t(i)].signature != result[0].signature)
        abortJob(rt,
                 format("ranks ran different collectives: %s ran %s, but %s "
                        "ran %s; every rank must run the same program",
                        positionOf(model(rt), members[0]).c_str(),
                        result[0].what.c_str(),
                        positionOf(model(rt), members[size_t(i)]).c_str(),
                        result[size_t(i)].what.c_str()),
                 3);
    return result;
  }

private:
  std::vector<int> members;
  std::mutex mutex;
  std::condition_variable ready;
  std::vector<Post> posts, published;
  std::vector<bool> posted;
  int arrived = 0;
  uint64_t generation = 0;
};

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

class LoopbackTransport final : public Transport {
public:
  LoopbackTransport(const loomrt_model &model, const LoopbackOps &ops)
      : mesh(model), ops(ops) {
    int64_t ranks = 1;
    for (int a = 0; a < model.num_axes; ++a)
      ranks *= model.axis_sizes[a];
    std::vector<int> everyone;
    for (int r = 0; r < int(ranks); ++r)
      everyone.push_back(r);
    world = std::make_unique<Meeting>(everyone);
  }

  const char *name() const override { return "loopback"; }

  void barrier(loomrt_ctx *rt, const std::string &what) override {
    world->exchange(rt, {what, "barrier", nullptr, nullptr, {}});
  }

  void shareLeaderInt(loomrt_ctx *rt, int *value,
                      const std::string &what) override {
    std::vector<Post> posts = world->exchange(
        rt, {what, "share", nullptr, nullptr, {double(*value)}});
    *value = int(posts[0].values[0]);
  }

  void reduceDoubles(loomrt_ctx *rt, double *values, int count, bool maximum,
                     const std::string &what) override {
    std::vector<Post> posts =
        world->exchange(rt, {what, format("reduce %d", count), nullptr, nullptr,
                             std::vector<double>(values, values + count)});
    for (int i = 0; i < count; ++i) {
      double result = posts[0].values[size_t(i)];
      for (size_t p = 1; p < posts.size(); ++p)
        result = maximum ? std::max(result, posts[p].values[size_t(i)])
                         : result + posts[p].values[size_t(i)];
      values[i] = result;
    }
  }

  void allReduce(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, int reduction, const void *in,
                 void *out, int64_t count) override {
    size_t bytes = size_t(count) * elementBytes(dtype);
    collective(
        rt, what, axes, numAxes,
        format("all_reduce %d %d %lld", dtype, reduction, (long long)count), in,
        bytes, out, bytes, [&](const std::vector<Post> &posts, int) {
          std::vector<const void *> inputs;
          for (const Post &post : posts)
            inputs.push_back(post.data);
          ops.reduce(dtype, reduction, inputs.data(), int(inputs.size()), 1,
                     count, count, out, count);
        });
  }

  void allGather(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t outer, int64_t chunk) override {
    int64_t n = groupSize(rt, axes, numAxes);
    size_t row = size_t(chunk) * elementBytes(dtype);
    collective(rt, what, axes, numAxes,
               format("all_gather %d %lld %lld", dtype, (long long)outer,
                      (long long)chunk),
               in, size_t(outer) * row, out, size_t(outer * n) * row,
               [&](const std::vector<Post> &posts, int) {
                 // out[o][p][:] = piece p's row o
                 for (size_t p = 0; p < posts.size(); ++p)
                   ops.copy2d(static_cast<char *>(out) + p * row,
                              size_t(n) * row, posts[p].data, row, row,
                              size_t(outer));
               });
  }

  void reduceScatter(loomrt_ctx *rt, const std::string &what, const int *axes,
                     int numAxes, int dtype, int reduction, const void *in,
                     void *out, int64_t outer, int64_t chunk) override {
    int64_t n = groupSize(rt, axes, numAxes);
    size_t row = size_t(chunk) * elementBytes(dtype);
    collective(rt, what, axes, numAxes,
               format("reduce_scatter %d %d %lld %lld", dtype, reduction,
                      (long long)outer, (long long)chunk),
               in, size_t(outer * n) * row, out, size_t(outer) * row,
               [&](const std::vector<Post> &posts, int me) {
                 // out[o][:] = reduction over p of in_p[o][me][:]
                 std::vector<const void *> inputs;
                 for (const Post &post : posts)
                   inputs.push_back(static_cast<const char *>(post.data) +
                                    size_t(me) * row);
                 ops.reduce(dtype, reduction, inputs.data(), int(inputs.size()),
                            outer, chunk, n * chunk, out, chunk);
               });
  }

  void allToAll(loomrt_ctx *rt, const std::string &what, const int *axes,
                int numAxes, int dtype, const void *in, void *out,
                const AllToAll &layout) override {
    size_t piece = size_t(layout.pieceElements) * elementBytes(dtype);
    // The pieces are arranged [n][piece] in the staging buffer first.
    void *pieces = ops.staging(1, piece * size_t(layout.n));
    layout.pack(dtype, in, pieces);
    collective(
        rt, what, axes, numAxes,
        format("all_to_all %d %lld", dtype, (long long)layout.pieceElements),
        pieces, 0, out, 0, [&](const std::vector<Post> &posts, int me) {
          for (size_t p = 0; p < posts.size(); ++p)
            layout.unpack(dtype,
                          static_cast<const char *>(posts[p].data) +
                              size_t(me) * piece,
                          int64_t(p), out);
        });
  }

  void permute(loomrt_ctx *rt, const std::string &what, const int *axes,
               int numAxes, int dtype, const void *in, void *out, int64_t count,
               const int64_t *pairs, int numPairs) override {
    size_t bytes = size_t(count) * elementBytes(dtype);
    collective(rt, what, axes, numAxes,
               format("collective_permute %d %lld %d", dtype, (long long)count,
                      numPairs),
               in, bytes, out, bytes,
               [&](const std::vector<Post> &posts, int me) {
                 for (int p = 0; p < numPairs; ++p)
                   if (pairs[2 * p + 1] == me) {
                     ops.copy2d(out, bytes, posts[size_t(pairs[2 * p])].data,
                                bytes, bytes, 1);
                     return;
                   }
                 ops.zero(out, bytes);
               });
  }

  void broadcast(loomrt_ctx *rt, const std::string &what, const int *axes,
                 int numAxes, int dtype, const void *in, void *out,
                 int64_t count, int64_t root) override {
    size_t bytes = size_t(count) * elementBytes(dtype);
    collective(rt, what, axes, numAxes,
               format("broadcast %d %lld %lld", dtype, (long long)count,
                      (long long)root),
               in, bytes, out, bytes, [&](const std::vector<Post> &posts, int) {
                 if (posts[size_t(root)].data != out)
                   ops.copy2d(out, bytes, posts[size_t(root)].data, bytes,
                              bytes, 1);
               });
  }

  /// A send leaves its message in the channel to the receiver and returns;
  /// the channel holds one message, so the next send on it waits until the
  /// receiver has read this one (a ring of sends then receives works).
  void send(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, const void *in, int64_t count) override {
    size_t bytes = size_t(count) * elementBytes(dtype);
    int to = neighbour(rt, axis, offset);
    std::unique_lock<std::mutex> lock(mailMutex);
    Channel &channel = channels[{axis, worldRank(rt), to}];
    waitForMail(
        rt, lock, [&] { return !channel.full; }, what,
        positionOf(mesh, to) + " never received the previous message");
    if (channel.slot < 0)
      channel.slot = kSendSlots + outgoing[worldRank(rt)]++;
    int slot = channel.slot;
    lock.unlock();
    void *staged = ops.staging(slot, bytes);
    ops.copy2d(staged, bytes, in, bytes, bytes, 1);
    void *mark = ops.mark(slot);
    lock.lock();
    channel.message = {
        what, pointToPointSignature(dtype, count), staged, mark, {}};
    channel.full = channel.unread = true;
    mailChanged.notify_all();
  }

  void recv(loomrt_ctx *rt, const std::string &what, int axis, int64_t offset,
            int dtype, void *out, int64_t count) override {
    size_t bytes = size_t(count) * elementBytes(dtype);
    int from = neighbour(rt, axis, offset);
    std::unique_lock<std::mutex> lock(mailMutex);
    Channel &channel = channels[{axis, from, worldRank(rt)}];
    waitForMail(
        rt, lock, [&] { return channel.unread; }, what,
        positionOf(mesh, from) + " never sent it");
    Post message = channel.message;
    channel.unread = false;
    lock.unlock();
    if (message.signature != pointToPointSignature(dtype, count))
      abortJob(rt,
               format("%s receives %s, but %s sent %s with %s", what.c_str(),
                      pointToPointSignature(dtype, count).c_str(),
                      positionOf(mesh, from).c_str(), message.signature.c_str(),
                      message.what.c_str()),
               3);
    if (message.mark)
      ops.waitFor(message.mark);
    ops.copy2d(out, bytes, message.data, bytes, bytes, 1);
    // The sender's buffer is free once the copy is done. A message to
    // oneself needs no wait (one stream orders both), and must not wait: a
    // one-rank step may be being captured into a CUDA graph.
    if (from != worldRank(rt))
      ops.synchronize();
    lock.lock();
    channel.full = false;
    mailChanged.notify_all();
  }

  /// After the run's last barrier every send has been made, so a message
  /// still unread was sent to a rank that never received it (MPI would
  /// leave it pending and say nothing).
  void finish(loomrt_ctx *rt) override {
    std::lock_guard<std::mutex> lock(mailMutex);
    for (const auto &[key, channel] : channels)
      if (std::get<2>(key) == worldRank(rt) && channel.unread)
        abortJob(rt,
                 format("%s: %s sent a message (%s) that %s never received",
                        channel.message.what.c_str(),
                        positionOf(mesh, std::get<1>(key)).c_str(),
                        channel.message.signature.c_str(),
                        positionOf(mesh, std::get<2>(key)).c_str()),
                 3);
  }

  [[noreturn]] void abort(loomrt_ctx *, int code) override { _exit(code); }

private:
  /// The meeting of the group over `axes` that this rank belongs to.
  Meeting &group(loomrt_ctx *rt, const int *axes, int numAxes) {
    std::vector<int> key(axes, axes + numAxes);
    const std::vector<int64_t> &coords = coordinates(rt);
    // The group: every rank with this rank's coordinates on the other axes,
    // in row-major order over `axes` as listed (DESIGN.md, communicators).
    auto colourOf = [&](const std::vector<int64_t> &c) {
      return groupColour(mesh, c, axes, numAxes);
    };
    int64_t colour = colourOf(coords);
    std::lock_guard<std::mutex> lock(groupsMutex);
    std::unique_ptr<Meeting> &meeting = groups[{key, colour}];
    if (!meeting) {
      int64_t n = groupSize(rt, axes, numAxes), ranks = 1;
      for (int a = 0; a < mesh.num_axes; ++a)
        ranks *= mesh.axis_sizes[a];
      std::vector<int> members(static_cast<size_t>(n), 0);
      for (int r = 0; r < int(ranks); ++r) {
        std::vector<int64_t> c = coordinatesOf(mesh, r);
        if (colourOf(c) != colour)
          continue;
        int64_t index = 0;
        for (int a : key)
          index = index * mesh.axis_sizes[a] + c[size_t(a)];
        members[size_t(index)] = r;
      }
      meeting = std::make_unique<Meeting>(members);
    }
    return *meeting;
  }

  static std::string pointToPointSignature(int dtype, int64_t count) {
    return format("%lld %s", (long long)count, dtypeText(dtype));
  }

  /// Waits on the mailbox (its lock held) until `ready`, ending the job
  /// after --collective-timeout with `what` and `why`.
  template <typename Ready>
  void waitForMail(loomrt_ctx *rt, std::unique_lock<std::mutex> &lock,
                   Ready ready, const std::string &what,
                   const std::string &why) {
    double timeout = collectiveTimeout(rt);
    if (!mailChanged.wait_for(lock, std::chrono::duration<double>(timeout),
                              ready))
      abortJob(rt,
               format("%s did not complete within %g s "
                      "(--collective-timeout): %s",
                      what.c_str(), timeout, why.c_str()),
               3);
  }

  /// The world rank `offset` steps along `axis` (cyclically).
  int neighbour(loomrt_ctx *rt, int axis, int64_t offset) {
    std::vector<int64_t> coords = coordinates(rt);
    coords[size_t(axis)] = axisNeighbour(rt, axis, offset);
    int64_t rank = 0;
    for (int a = 0; a < mesh.num_axes; ++a)
      rank = rank * mesh.axis_sizes[a] + coords[size_t(a)];
    return int(rank);
  }

  /// The shape of every collective: post this rank's input (staged first
  /// when the result would overwrite it), compute the result from every
  /// post after their marks, then meet again so that no rank overwrites
  /// what another still reads.
  template <typename Compute>
  void collective(loomrt_ctx *rt, const std::string &what, const int *axes,
                  int numAxes, const std::string &signature, const void *in,
                  size_t inBytes, void *out, size_t outBytes, Compute compute) {
    Meeting &meeting = group(rt, axes, numAxes);
    const void *posted = in;
    if (inBytes && overlaps(in, inBytes, out, outBytes)) {
      void *staged = ops.staging(0, inBytes);
      ops.copy2d(staged, inBytes, in, inBytes, inBytes, 1);
      posted = staged;
    }
    std::string full = signature + " over " + axesText(rt, axes, numAxes);
    std::vector<Post> posts =
        meeting.exchange(rt, {what, full, posted, ops.mark(0), {}});
    int me = meeting.memberOf(worldRank(rt));
    for (int p = 0; p < int(posts.size()); ++p)
      if (p != me && posts[size_t(p)].mark)
        ops.waitFor(posts[size_t(p)].mark);
    compute(posts, me);
    std::vector<Post> done =
        meeting.exchange(rt, {what, full + " read", nullptr, ops.mark(1), {}});
    for (int p = 0; p < int(done.size()); ++p)
      if (p != me && done[size_t(p)].mark)
        ops.waitFor(done[size_t(p)].mark);
  }

  const loomrt_model &mesh;
  const LoopbackOps &ops;
  std::unique_ptr<Meeting> world;
  std::mutex groupsMutex;
  std::map<std::pair<std::vector<int>, int64_t>, std::unique_ptr<Meeting>>
      groups;
  /// Point to point: one channel per (axis, sender, receiver).
  struct Channel {
    Post message;
    bool full = false, unread = false;
    /// The sender's staging slot and mark for this channel.
    int slot = -1;
  };
  /// Per sender: how many channels have a slot.
  std::map<int, int> outgoing;
  std::mutex mailMutex;
  std::condition_variable mailChanged;
  std::map<std::tuple<int, int, int>, Channel> channels;
};

//--- The host's LoopbackOps: the work is done when it is issued -----------

thread_local std::map<int, std::vector<char>> hostStaging;

template <typename T> T combine(int reduction, T a, T b) {
  if (reduction == LOOMRT_MAX)
    return (a > b || a != a) ? a : b; // NaN wins, as in a max
  return a + b;
}

void hostReduce(int dtype, int reduction, const void *const *inputs, int n,
                int64_t rows, int64_t columns, int64_t inPitch, void *out,
                int64_t outPitch) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c) {
      int64_t i = r * inPitch + c, o = r * outPitch + c;
      if (isInteger(dtype)) {
        int64_t acc = loadInt(dtype, inputs[0], i);
        for (int p = 1; p < n; ++p)
          acc = combine<int64_t>(reduction, acc, loadInt(dtype, inputs[p], i));
        storeInt(dtype, out, o, acc);
      } else {
        float acc = load(dtype, inputs[0], i);
        for (int p = 1; p < n; ++p)
          acc = combine<float>(reduction, acc, load(dtype, inputs[p], i));
        store(dtype, out, o, acc);
      }
    }
}

} // namespace

Transport *loomrt::loopbackTransport(const loomrt_model &model,
                                     const LoopbackOps &ops) {
  // One per process: the process runs one model.
  static LoopbackTransport *transport = new LoopbackTransport(model, ops);
  return transport;
}

const LoopbackOps &loomrt::hostLoopbackOps() {
  static const LoopbackOps ops = {
      [](int slot, size_t bytes) -> void * {
        std::vector<char> &buffer = hostStaging[slot];
        if (buffer.size() < bytes)
          buffer.resize(bytes);
        return buffer.data();
      },
      [](int) -> void * { return nullptr; },
      [](void *) {},
      hostReduce,
      [](void *dst, size_t dstPitch, const void *src, size_t srcPitch,
         size_t width, size_t rows) {
        for (size_t r = 0; r < rows; ++r)
          memmove(static_cast<char *>(dst) + r * dstPitch,
                  static_cast<const char *>(src) + r * srcPitch, width);
      },
      [](void *dst, size_t bytes) { memset(dst, 0, bytes); },
      [] {},
      nullptr}; // convert: only the NCCL transport uses it
  return ops;
}
