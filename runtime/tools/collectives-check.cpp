//===- collectives-check.cpp - Every collective of libloomrt, checked -----===//
//
// A program that links libloomrt like a generated one and, in its step,
// runs every collective kind of loomrt.h over every axis subset of a 2-D
// mesh, in f32, bf16 and i32, and compares each result with what the
// collective means (computed here from the ranks' coordinates). The same
// source builds for the CPU backend (MPI, loopback) and, compiled as CUDA,
// for the CUDA backend (NCCL, loopback on one GPU).
//
//   LOOMRT_CHECK_MESH=XxY (default 2x2) sets the mesh [x: X, y: Y];
//   run it with mpirun -np X*Y, or alone with --loopback.
//   LOOMRT_CHECK_DIVERGE=R makes rank R skip the first collective (to test
//   the messages of a job whose ranks disagree).
//   LOOMRT_CHECK_SEND=R:short|skip|twice|unread makes rank R's first send
//   shorter, left out or made twice; `unread` makes it twice and has its
//   receiver skip the receive (to test the loopback mode's send/recv
//   messages).
//   LOOMRT_CHECK_FUTURE=wait|twice|unwaited misuses the started
//   collectives' calls first thing: waits for a future never started,
//   starts one twice, or ends the step with one outstanding (to test the
//   runtime's messages).
//
// Rank 0 prints one line per check; a wrong result ends the job through
// loomrt_fail, naming the collective, the rank and the first wrong element.
//===----------------------------------------------------------------------===//
#include "loomrt.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int64_t meshSizes[2] = {2, 2};
const char *const axisNames[2] = {"x", "y"};

/// Values every dtype holds exactly, and whose sums over 8 ranks do too.
double valueOf(int64_t rank, int64_t i) {
  return double((rank * 7 + i * 3) % 11) - 5.0;
}

std::vector<int64_t> coordsOf(int64_t rank) {
  return {rank / meshSizes[1], rank % meshSizes[1]};
}

/// The world ranks of `rank`'s group over `axes`, in group order.
std::vector<int64_t> groupOf(int64_t rank, const std::vector<int> &axes) {
  std::vector<int64_t> mine = coordsOf(rank), members;
  int64_t n = 1;
  for (int a : axes)
    n *= meshSizes[a];
  members.resize(size_t(n));
  for (int64_t r = 0; r < meshSizes[0] * meshSizes[1]; ++r) {
    std::vector<int64_t> c = coordsOf(r);
    bool same = true;
    for (int a = 0; a < 2; ++a) {
      bool listed = false;
      for (int b : axes)
        listed |= a == b;
      same &= listed || c[size_t(a)] == mine[size_t(a)];
    }
    if (!same)
      continue;
    int64_t index = 0;
    for (int a : axes)
      index = index * meshSizes[a] + c[size_t(a)];
    members[size_t(index)] = r;
  }
  return members;
}

size_t bytesOf(int dtype) { return dtype == LOOMRT_BF16 ? 2 : 4; }

void storeValue(int dtype, std::vector<char> &buffer, int64_t i, double v) {
  if (dtype == LOOMRT_F32)
    reinterpret_cast<float *>(buffer.data())[i] = float(v);
  else if (dtype == LOOMRT_BF16)
    reinterpret_cast<uint16_t *>(buffer.data())[i] =
        loomrt_f32_to_bf16(float(v));
  else
    reinterpret_cast<int32_t *>(buffer.data())[i] = int32_t(v);
}

double loadValue(int dtype, const std::vector<char> &buffer, int64_t i) {
  if (dtype == LOOMRT_F32)
    return reinterpret_cast<const float *>(buffer.data())[i];
  if (dtype == LOOMRT_BF16)
    return loomrt_bf16_to_f32(
        reinterpret_cast<const uint16_t *>(buffer.data())[i]);
  return reinterpret_cast<const int32_t *>(buffer.data())[i];
}

/// The arena: inputs from 0, outputs from 1 << 16, and from kHeld what
/// Checker::putOnStream copies from.
constexpr int64_t kHeld = 2 << 16;

struct Checker {
  loomrt_ctx *rt;
  char *arena;
  int64_t me;
  int checks = 0;

  /// Puts values (element i = value(i)) at arena offset `at`.
  template <typename Fn>
  void put(int dtype, int64_t at, int64_t count, Fn value) {
    std::vector<char> host(size_t(count) * bytesOf(dtype));
    for (int64_t i = 0; i < count; ++i)
      storeValue(dtype, host, i, value(i));
    loomrt_upload(rt, arena + at, host.data(), int64_t(host.size()));
  }

  /// As put, but the values reach `at` by a copy on the rank's stream that
  /// is still in flight when this returns (from `at` in the held region,
  /// kHeld on): a collective started next must wait for it.
  template <typename Fn>
  void putOnStream(int dtype, int64_t at, int64_t count, Fn value) {
    put(dtype, kHeld + at, count, value);
    loomrt_copy(rt, arena + at, arena + kHeld + at,
                count * int64_t(bytesOf(dtype)));
  }

  /// Compares `count` elements at `at` with expected(i).
  template <typename Fn>
  void expect(const std::string &what, int dtype, int64_t at, int64_t count,
              Fn expected) {
    std::vector<char> host(size_t(count) * bytesOf(dtype));
    loomrt_download(rt, host.data(), arena + at, int64_t(host.size()));
    for (int64_t i = 0; i < count; ++i) {
      double got = loadValue(dtype, host, i), want = expected(i);
      if (got != want) {
        std::string message = what + ": element " + std::to_string(i) + " is " +
                              std::to_string(got) + ", not " +
                              std::to_string(want);
        loomrt_fail(rt, "collectives-check", message.c_str());
      }
    }
    ++checks;
    if (me == 0)
      printf("ok %s\n", what.c_str());
  }
};

const char *dtypeName(int dtype) {
  return dtype == LOOMRT_F32 ? "f32" : dtype == LOOMRT_BF16 ? "bf16" : "i32";
}

/// What the checks' collectives give element i of, over the world ranks
/// `group` (in group order): the sum of every rank's value i; an
/// all_gather of [2][3] pieces into [2][n][3]; and a reduce_scatter of
/// [2][n][3] into [2][3], the piece of group rank `self` summed.
double summed(const std::vector<int64_t> &group, int64_t i) {
  double acc = 0;
  for (int64_t rank : group)
    acc += valueOf(rank, i);
  return acc;
}
double gathered(const std::vector<int64_t> &group, int64_t i) {
  int64_t n = int64_t(group.size());
  int64_t o = i / (n * 3), p = i / 3 % n, j = i % 3;
  return valueOf(group[size_t(p)], o * 3 + j);
}
double scattered(const std::vector<int64_t> &group, int64_t self, int64_t i) {
  int64_t n = int64_t(group.size());
  return summed(group, (i / 3 * n + self) * 3 + i % 3);
}

void step(loomrt_ctx *rt, char *arena) {
  const int64_t in = 0, out = 1 << 16;
  int x = 0, y = 1;
  int64_t me = loomrt_group_rank(rt, &x, 1) * meshSizes[1] +
               loomrt_group_rank(rt, &y, 1);
  Checker c{rt, arena, me};
  // For testing the loopback mode's mismatch message: this rank skips the
  // first collective, so it meets the others at a different one.
  if (const char *misuse = getenv("LOOMRT_CHECK_FUTURE")) {
    std::string how = misuse;
    if (how == "wait")
      loomrt_wait(rt, 7);
    loomrt_start_begin(rt, 7);
    loomrt_start_end(rt, 7);
    if (how == "twice")
      loomrt_start_begin(rt, 7);
    return; // "unwaited": the step ends with future 7 outstanding
  }
  const char *diverge = getenv("LOOMRT_CHECK_DIVERGE");
  bool skipFirst = diverge && atoll(diverge) == me;
  const std::vector<std::vector<int>> subsets = {{0}, {1}, {0, 1}, {1, 0}};
  for (const std::vector<int> &axes : subsets) {
    std::vector<int64_t> group = groupOf(me, axes);
    int64_t n = int64_t(group.size()),
            self = loomrt_group_rank(rt, axes.data(), int(axes.size()));
    std::string over = " over [";
    for (size_t i = 0; i < axes.size(); ++i)
      over += std::string(i ? ", " : "") + axisNames[axes[i]];
    over += "]";
    for (int dtype : {LOOMRT_F32, LOOMRT_BF16, LOOMRT_I32}) {
      std::string suffix = std::string(" ") + dtypeName(dtype) + over;
      const int count = 24;
      auto mine = [&](int64_t i) { return valueOf(me, i); };
      for (int reduction : {LOOMRT_SUM, LOOMRT_MAX}) {
        auto reduced = [&](int64_t i) {
          double acc = valueOf(group[0], i);
          for (int64_t p = 1; p < n; ++p)
            acc = reduction == LOOMRT_MAX
                      ? std::fmax(acc, valueOf(group[size_t(p)], i))
                      : acc + valueOf(group[size_t(p)], i);
          return acc;
        };
        const char *name =
            reduction == LOOMRT_MAX ? "all_reduce(max)" : "all_reduce(sum)";
        c.put(dtype, in, count, mine);
        if (skipFirst) {
          skipFirst = false;
          continue;
        }
        loomrt_all_reduce(rt, name, axes.data(), int(axes.size()), dtype,
                          reduction, arena + in, arena + out, count);
        c.expect(std::string(name) + suffix, dtype, out, count, reduced);
        // In place.
        loomrt_all_reduce(rt, name, axes.data(), int(axes.size()), dtype,
                          reduction, arena + in, arena + in, count);
        c.expect(std::string(name) + " in place" + suffix, dtype, in, count,
                 reduced);
      }
      // A bf16 sum is rounded once (docs/language.md 11.2): 1 and n - 1
      // halves of its last bit give 1 + (n - 1) / 256 rounded, where
      // rounding after each addition would give 1 again.
      if (dtype == LOOMRT_BF16) {
        auto ones = [&](int64_t) { return self == 0 ? 1.0 : 1.0 / 256; };
        auto once = [&](int64_t) {
          return double(loomrt_bf16_to_f32(
              loomrt_f32_to_bf16(float(1.0 + double(n - 1) / 256))));
        };
        c.put(dtype, in, count, ones);
        loomrt_all_reduce(rt, "all_reduce(sum)", axes.data(), int(axes.size()),
                          dtype, LOOMRT_SUM, arena + in, arena + out, count);
        c.expect("all_reduce(sum) rounded once" + suffix, dtype, out, count,
                 once);
        c.put(dtype, in, 2 * n * 3, ones);
        loomrt_reduce_scatter(rt, "reduce_scatter", axes.data(),
                              int(axes.size()), dtype, LOOMRT_SUM, arena + in,
                              arena + out, 2, 3);
        c.expect("reduce_scatter rounded once" + suffix, dtype, out, 6, once);
      }
      // all_gather: [2][3] pieces -> [2][n][3].
      c.put(dtype, in, 6, mine);
      loomrt_all_gather(rt, "all_gather", axes.data(), int(axes.size()), dtype,
                        arena + in, arena + out, 2, 3);
      c.expect("all_gather" + suffix, dtype, out, 2 * n * 3,
               [&](int64_t i) { return gathered(group, i); });
      // reduce_scatter: [2][n][3] -> [2][3], piece `self` summed.
      c.put(dtype, in, 2 * n * 3, mine);
      loomrt_reduce_scatter(rt, "reduce_scatter", axes.data(), int(axes.size()),
                            dtype, LOOMRT_SUM, arena + in, arena + out, 2, 3);
      c.expect("reduce_scatter" + suffix, dtype, out, 6,
               [&](int64_t i) { return scattered(group, self, i); });
      // loomrt_combined: members of different layouts as one collective,
      // each result what its own call gives. Member k holds values offset
      // by 100 k.
      {
        const int64_t at[3] = {0, 8192, 16384};
        auto memberValue = [&](int64_t rank, int k, int64_t i) {
          return valueOf(rank, i + 100 * k);
        };
        // all_gathers of [2][3], [1][5] and [3][1] pieces, of `types`.
        auto gatherThree = [&](const int types[3], const std::string &what) {
          const int64_t outer[3] = {2, 1, 3}, chunk[3] = {3, 5, 1};
          loomrt_member gathers[3];
          for (int k = 0; k < 3; ++k) {
            c.put(types[k], in + at[k], outer[k] * chunk[k],
                  [&](int64_t i) { return memberValue(me, k, i); });
            gathers[k] = {arena + in + at[k], arena + out + at[k], types[k],
                          outer[k], chunk[k]};
          }
          loomrt_combined(rt, "combined all_gather", LOOMRT_ALL_GATHER,
                          axes.data(), int(axes.size()), LOOMRT_SUM, gathers,
                          3);
          for (int k = 0; k < 3; ++k) {
            int64_t width = chunk[k];
            c.expect(what + std::to_string(k) +
                         (types[0] == types[2]
                              ? std::string(" ") + dtypeName(types[k])
                              : std::string(" (") + dtypeName(types[k]) + ")") +
                         over,
                     types[k], out + at[k], outer[k] * n * width,
                     [&](int64_t i) {
                       int64_t o = i / (n * width), p = i / width % n,
                               j = i % width;
                       return memberValue(group[size_t(p)], k, o * width + j);
                     });
          }
        };
        const int sameType[3] = {dtype, dtype, dtype};
        gatherThree(sameType, "combined all_gather, member ");
        // Gathers move bits, so members may differ in type: once, with
        // bf16 first.
        if (dtype == LOOMRT_BF16) {
          const int threeTypes[3] = {LOOMRT_BF16, LOOMRT_F32, LOOMRT_I32};
          gatherThree(threeTypes, "combined all_gather of three types, member ");
        }
        // all_reduces, sum and max, of 24 and 7 elements.
        for (int reduction : {LOOMRT_SUM, LOOMRT_MAX}) {
          const int64_t counts[2] = {24, 7};
          loomrt_member sums[2];
          for (int k = 0; k < 2; ++k) {
            c.put(dtype, in + at[k], counts[k],
                  [&](int64_t i) { return memberValue(me, k, i); });
            sums[k] = {arena + in + at[k], arena + out + at[k], dtype, 1,
                       counts[k]};
          }
          loomrt_combined(rt, "combined all_reduce", LOOMRT_ALL_REDUCE,
                          axes.data(), int(axes.size()), reduction, sums, 2);
          for (int k = 0; k < 2; ++k)
            c.expect(std::string("combined ") +
                         (reduction == LOOMRT_MAX ? "all_reduce(max)"
                                                  : "all_reduce(sum)") +
                         ", member " + std::to_string(k) + suffix,
                     dtype, out + at[k], counts[k], [&](int64_t i) {
                       double acc = memberValue(group[0], k, i);
                       for (int64_t p = 1; p < n; ++p) {
                         double v = memberValue(group[size_t(p)], k, i);
                         acc = reduction == LOOMRT_MAX ? std::fmax(acc, v)
                                                       : acc + v;
                       }
                       return acc;
                     });
        }
        // reduce_scatters: [2][n][3] and [1][n][4] to their piece `self`.
        const int64_t sOuter[2] = {2, 1}, sChunk[2] = {3, 4};
        loomrt_member scatters[2];
        for (int k = 0; k < 2; ++k) {
          c.put(dtype, in + at[k], sOuter[k] * n * sChunk[k],
                [&](int64_t i) { return memberValue(me, k, i); });
          scatters[k] = {arena + in + at[k], arena + out + at[k], dtype,
                         sOuter[k], sChunk[k]};
        }
        loomrt_combined(rt, "combined reduce_scatter", LOOMRT_REDUCE_SCATTER,
                        axes.data(), int(axes.size()), LOOMRT_SUM, scatters, 2);
        for (int k = 0; k < 2; ++k) {
          int64_t chunk = sChunk[k];
          c.expect("combined reduce_scatter, member " + std::to_string(k) +
                       suffix,
                   dtype, out + at[k], sOuter[k] * chunk, [&](int64_t i) {
                     int64_t o = i / chunk, j = i % chunk;
                     double acc = 0;
                     for (int64_t p = 0; p < n; ++p)
                       acc += memberValue(group[size_t(p)], k,
                                          (o * n + self) * chunk + j);
                     return acc;
                   });
        }
      }
      // Started collectives (loomrt_start_begin/_end, loomrt_wait): four
      // outstanding at once (an all_gather, an all_reduce, a
      // reduce_scatter and a combined all_gather), one run at once among
      // them, then waited for in the other order; each result what its own
      // call gives. Their inputs are written on the rank's stream just
      // before, so each must wait for that (on a GPU, the started ones run
      // on a stream of their own).
      {
        const int64_t at[4] = {24576, 32768, 40960, 49152}, second = 4096;
        const int *ax = axes.data();
        int numAxes = int(axes.size());
        c.putOnStream(dtype, in + at[0], 6, mine);
        loomrt_start_begin(rt, 0);
        loomrt_all_gather(rt, "started all_gather", ax, numAxes, dtype,
                          arena + in + at[0], arena + out + at[0], 2, 3);
        loomrt_start_end(rt, 0);
        c.putOnStream(dtype, in + at[1], count, mine);
        loomrt_start_begin(rt, 1);
        loomrt_all_reduce(rt, "started all_reduce(sum)", ax, numAxes, dtype,
                          LOOMRT_SUM, arena + in + at[1], arena + out + at[1],
                          count);
        loomrt_start_end(rt, 1);
        c.putOnStream(dtype, in + at[2], 2 * n * 3, mine);
        loomrt_start_begin(rt, 2);
        loomrt_reduce_scatter(rt, "started reduce_scatter", ax, numAxes, dtype,
                              LOOMRT_SUM, arena + in + at[2],
                              arena + out + at[2], 2, 3);
        loomrt_start_end(rt, 2);
        c.putOnStream(dtype, in + at[3], 5, mine);
        c.putOnStream(dtype, in + at[3] + second, 3,
                      [&](int64_t i) { return valueOf(me, i + 100); });
        const loomrt_member gathers[2] = {
            {arena + in + at[3], arena + out + at[3], dtype, 1, 5},
            {arena + in + at[3] + second, arena + out + at[3] + second, dtype,
             3, 1}};
        loomrt_start_begin(rt, 3);
        loomrt_combined(rt, "started combined all_gather", LOOMRT_ALL_GATHER,
                        ax, numAxes, LOOMRT_SUM, gathers, 2);
        loomrt_start_end(rt, 3);
        c.putOnStream(dtype, in, count, mine);
        loomrt_all_reduce(rt, "all_reduce(max)", ax, numAxes, dtype, LOOMRT_MAX,
                          arena + in, arena + out, count);
        c.expect("all_reduce(max) while four are started" + suffix, dtype, out,
                 count, [&](int64_t i) {
                   double acc = valueOf(group[0], i);
                   for (int64_t p = 1; p < n; ++p)
                     acc = std::fmax(acc, valueOf(group[size_t(p)], i));
                   return acc;
                 });
        // Over the other axis, a collective does not wait behind the
        // started ones: on a GPU it runs on the rank's stream beside them,
        // with staging buffers of its own (a reduction's pieces, a gather
        // of several rows).
        // A fifth, started last, is still in flight there under NCCL (its
        // reduction reads its packed pieces from a staging buffer).
        if (axes.size() == 1) {
          const int other[1] = {1 - axes[0]};
          std::vector<int64_t> otherGroup =
              groupOf(me, std::vector<int>(other, other + 1));
          int64_t m = int64_t(otherGroup.size());
          const int64_t beside = 57344, fifth = 61440;
          c.putOnStream(dtype, in + fifth, 2 * n * 3, mine);
          loomrt_start_begin(rt, 4);
          loomrt_reduce_scatter(rt, "started reduce_scatter", ax, numAxes,
                                dtype, LOOMRT_SUM, arena + in + fifth,
                                arena + out + fifth, 2, 3);
          loomrt_start_end(rt, 4);
          c.putOnStream(dtype, in + beside, count, mine);
          loomrt_all_reduce(rt, "all_reduce(sum) over the other axis", other,
                            1, dtype, LOOMRT_SUM, arena + in + beside,
                            arena + out + beside, count);
          c.expect("all_reduce(sum) over the other axis while four are "
                   "started" + suffix,
                   dtype, out + beside, count,
                   [&](int64_t i) { return summed(otherGroup, i); });
          c.putOnStream(dtype, in + beside, 6, mine);
          loomrt_all_gather(rt, "all_gather over the other axis", other, 1,
                            dtype, arena + in + beside, arena + out + beside,
                            2, 3);
          c.expect("all_gather over the other axis while four are started" +
                       suffix,
                   dtype, out + beside, 2 * m * 3,
                   [&](int64_t i) { return gathered(otherGroup, i); });
          loomrt_wait(rt, 4);
          c.expect("started reduce_scatter beside them" + suffix, dtype,
                   out + fifth, 6,
                   [&](int64_t i) { return scattered(group, self, i); });
        }
        for (int future = 3; future >= 0; --future)
          loomrt_wait(rt, future);
        c.expect("started all_gather" + suffix, dtype, out + at[0], 2 * n * 3,
                 [&](int64_t i) { return gathered(group, i); });
        c.expect("started all_reduce(sum)" + suffix, dtype, out + at[1], count,
                 [&](int64_t i) { return summed(group, i); });
        c.expect("started reduce_scatter" + suffix, dtype, out + at[2], 6,
                 [&](int64_t i) { return scattered(group, self, i); });
        c.expect("started combined all_gather, member 0" + suffix, dtype,
                 out + at[3], n * 5, [&](int64_t i) {
                   return valueOf(group[size_t(i / 5)], i % 5);
                 });
        c.expect("started combined all_gather, member 1" + suffix, dtype,
                 out + at[3] + second, 3 * n, [&](int64_t i) {
                   int64_t o = i / n, p = i % n;
                   return valueOf(group[size_t(p)], o + 100);
                 });
      }
      // all_to_all: [2n][3] split along 0, concatenated along 1: [2][3n].
      int64_t shape[2] = {2 * n, 3};
      c.put(dtype, in, 6 * n, mine);
      loomrt_all_to_all(rt, "all_to_all", axes.data(), int(axes.size()), dtype,
                        arena + in, arena + out, 2, shape, 0, 1, nullptr);
      c.expect("all_to_all" + suffix, dtype, out, 6 * n, [&](int64_t i) {
        int64_t a = i / (3 * n), p = i % (3 * n) / 3, b = i % 3;
        return valueOf(group[size_t(p)], (self * 2 + a) * 3 + b);
      });
      // The same with the pieces numbered over the axes reversed: each
      // rank receives the rows that its coordinates index in that order.
      if (axes.size() == 2) {
        std::vector<int> reversed(axes.rbegin(), axes.rend());
        int64_t inner = meshSizes[axes[1]];
        int64_t piece = self % inner * meshSizes[axes[0]] + self / inner;
        c.put(dtype, in, 6 * n, mine);
        loomrt_all_to_all(rt, "all_to_all", axes.data(), int(axes.size()),
                          dtype, arena + in, arena + out, 2, shape, 0, 1,
                          reversed.data());
        c.expect("all_to_all, pieces in the other order" + suffix, dtype, out,
                 6 * n, [&](int64_t i) {
                   int64_t a = i / (3 * n), p = i % (3 * n) / 3, b = i % 3;
                   return valueOf(group[size_t(p)], (piece * 2 + a) * 3 + b);
                 });
      }
      // collective_permute: p -> p + 1 (group rank 0 gets zeros).
      std::vector<int64_t> pairs;
      for (int64_t p = 0; p + 1 < n; ++p) {
        pairs.push_back(p);
        pairs.push_back(p + 1);
      }
      c.put(dtype, in, count, mine);
      loomrt_collective_permute(
          rt, "collective_permute", axes.data(), int(axes.size()), dtype,
          arena + in, arena + out, count, pairs.data(), int(pairs.size() / 2));
      c.expect("collective_permute" + suffix, dtype, out, count,
               [&](int64_t i) {
                 return self == 0 ? 0.0 : valueOf(group[size_t(self - 1)], i);
               });
      // broadcast from the last group rank.
      c.put(dtype, in, count, mine);
      loomrt_broadcast(rt, "broadcast", axes.data(), int(axes.size()), dtype,
                       arena + in, arena + out, count, n - 1);
      c.expect("broadcast" + suffix, dtype, out, count,
               [&](int64_t i) { return valueOf(group[size_t(n - 1)], i); });
      // all_slice (local): piece `self` of [2][n][3].
      c.put(dtype, in, 2 * n * 3, mine);
      loomrt_all_slice(rt, axes.data(), int(axes.size()), dtype, arena + in,
                       arena + out, 2, 3);
      c.expect("all_slice" + suffix, dtype, out, 6, [&](int64_t i) {
        return valueOf(me, (i / 3 * n + self) * 3 + i % 3);
      });
    }
  }
  // send / recv around each axis as a ring: every rank sends, then receives.
  std::string faultKind, sendFault;
  int64_t faultyRank = -1;
  if (const char *fault = getenv("LOOMRT_CHECK_SEND"))
    if (const char *colon = strchr(fault, ':')) {
      faultyRank = atoll(fault);
      faultKind = colon + 1;
      sendFault = faultyRank == me ? faultKind : "";
    }
  for (int axis = 0; axis < 2; ++axis)
    for (int64_t offset : {int64_t(1), int64_t(-1)}) {
      std::vector<int64_t> coords = coordsOf(me);
      int64_t size = meshSizes[axis];
      coords[size_t(axis)] =
          ((coords[size_t(axis)] - offset) % size + size) % size;
      int64_t from = coords[0] * meshSizes[1] + coords[1];
      c.put(LOOMRT_F32, in, 24, [&](int64_t i) { return valueOf(me, i); });
      bool first = axis == 0 && offset == 1;
      if (!(first && sendFault == "skip"))
        loomrt_send(rt, "send", axis, offset, LOOMRT_F32, arena + in,
                    first && sendFault == "short" ? 23 : 24);
      if (first && (sendFault == "twice" || sendFault == "unread"))
        loomrt_send(rt, "send", axis, offset, LOOMRT_F32, arena + in, 24);
      if (first && from == faultyRank && faultKind == "unread")
        continue;
      loomrt_recv(rt, "recv", axis, -offset, LOOMRT_F32, arena + out, 24);
      c.expect(std::string("send/recv offset ") + std::to_string(offset) +
                   " along " + axisNames[axis],
               LOOMRT_F32, out, 24,
               [&](int64_t i) { return valueOf(from, i); });
    }
  // Two messages out before either comes in, to different ranks (axes of
  // three or more): each must arrive intact, whatever the other one does
  // to staging buffers.
  for (int axis = 0; axis < 2; ++axis) {
    int64_t size = meshSizes[axis];
    if (size < 3)
      continue;
    auto neighbour = [&](int64_t offset) {
      std::vector<int64_t> coords = coordsOf(me);
      coords[size_t(axis)] =
          ((coords[size_t(axis)] + offset) % size + size) % size;
      return coords[0] * meshSizes[1] + coords[1];
    };
    const int64_t second = 4096;
    c.put(LOOMRT_F32, in, 24, [&](int64_t i) { return valueOf(me, i); });
    c.put(LOOMRT_F32, in + second, 24,
          [&](int64_t i) { return valueOf(me, i + 24); });
    loomrt_send(rt, "send", axis, 1, LOOMRT_F32, arena + in, 24);
    loomrt_send(rt, "send", axis, -1, LOOMRT_F32, arena + in + second, 24);
    loomrt_recv(rt, "recv", axis, -1, LOOMRT_F32, arena + out, 24);
    loomrt_recv(rt, "recv", axis, 1, LOOMRT_F32, arena + out + second, 24);
    int64_t before = neighbour(-1), after = neighbour(1);
    c.expect(
        std::string("two sends then two receives along ") + axisNames[axis],
        LOOMRT_F32, out, 24, [&](int64_t i) { return valueOf(before, i); });
    c.expect(std::string("two sends then two receives along ") +
                 axisNames[axis] + " (second)",
             LOOMRT_F32, out + second, 24,
             [&](int64_t i) { return valueOf(after, i + 24); });
  }
  if (me == 0)
    printf("collectives-check: %d checks passed on each of %lld ranks\n",
           c.checks, (long long)(meshSizes[0] * meshSizes[1]));
  fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  if (const char *mesh = getenv("LOOMRT_CHECK_MESH")) {
    long long a = 0, b = 0;
    if (sscanf(mesh, "%lldx%lld", &a, &b) != 2 || a < 1 || b < 1) {
      fprintf(stderr, "%s: error: LOOMRT_CHECK_MESH must be XxY, not '%s'\n",
              argv[0], mesh);
      return 2;
    }
    meshSizes[0] = a;
    meshSizes[1] = b;
  }
  loomrt_model model = {};
  model.name = "CollectivesCheck";
  model.source = "runtime/tools/collectives-check.cpp";
  model.num_axes = 2;
  model.axis_names = axisNames;
  model.axis_sizes = meshSizes;
  model.arena_bytes = 3 << 16;
  model.step = step;
  return loomrt_main(argc, argv, &model);
}
