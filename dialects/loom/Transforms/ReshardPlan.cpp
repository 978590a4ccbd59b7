//===- ReshardPlan.cpp - The cheapest collectives between two layouts -----===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// A* over layouts and the partial sums still to reduce. From a layout, a
// step may reduce partial sums over some of the pending axes (all_reduce:
// 2 (n - 1) / n of a block; reduce_scatter onto the end of a dimension:
// (n - 1) / n), reorder one dimension's axes (collective_permute: each rank
// receives its whole block, unless only axes of size 1 move), gather a
// dimension's last axes (all_gather: n - 1 blocks), slice a free axis of
// the target onto the end of a dimension (all_slice: nothing), or move a
// dimension's last axes to the end of another, in their order or in the
// target's (all_to_all: (n - 1) / n of a block). A permute may also
// exchange an axis for another of the same size, held by another
// dimension or by none (each rank receives its whole block). These are
// the costs `--explain` reports; every layout on the
// way must divide the shape evenly. Only axes of the two layouts take
// part, so the search stays small: with four axes on three dimensions
// there are 685 layouts.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/ReshardPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>

using namespace loom;
using llvm::ArrayRef;
using llvm::SmallVector;

namespace {

using Axes = SmallVector<int, 4>;

/// Elements received a rank, then collectives: compared in that order.
struct Cost {
  uint64_t elements = 0;
  uint64_t steps = 0;
  bool operator<(const Cost &other) const {
    return elements != other.elements ? elements < other.elements
                                      : steps < other.steps;
  }
};

struct Node {
  AxisLists layout;
  /// Bit i: the value is still a partial sum over axis i.
  uint32_t pending = 0;
  Cost cost;
  int parent = -1;
  ReshardStep step{ReshardStep::Kind::Slice, 0, -1, {}};
  bool settled = false;
};

class Search {
public:
  /// `narrow`: free axes are sliced only onto the dimension the target
  /// puts them on, which leaves far fewer layouts to visit. `weight` > 1
  /// trusts the estimate of what remains that many times over: far fewer
  /// layouts again, and a plan at most `weight` times the cheapest.
  Search(const ReshardProblem &problem, size_t budget, bool narrow,
         uint64_t weight = 1)
      : problem(problem), budget(budget), narrow(narrow), weight(weight) {
    for (auto [dim, axes] : llvm::enumerate(problem.to))
      for (int axis : axes)
        wanted.push_back({axis, int64_t(dim)});
    // Costs in elements times every axis size, so that (n - 1) / n of a
    // block is a whole number for any group.
    for (int64_t size : problem.axisSizes)
      scale *= uint64_t(size);
    // Every device's coordinates, and the target block it needs.
    size_t axisCount = problem.axisSizes.size();
    SmallVector<int64_t, 8> at(axisCount, 0);
    for (;;) {
      devices.push_back(at);
      targets.push_back(blockOf(problem.to, at));
      size_t axis = axisCount;
      while (axis > 0 && ++at[axis - 1] == problem.axisSizes[axis - 1])
        at[--axis] = 0;
      if (axis == 0)
        break;
    }
  }

  std::optional<SmallVector<ReshardStep>> run();
  bool gaveUp() const { return overBudget; }

private:
  int64_t groupSize(ArrayRef<int> axes) const {
    int64_t size = 1;
    for (int axis : axes)
      size *= problem.axisSizes[size_t(axis)];
    return size;
  }
  bool anyForbidden(ArrayRef<int> axes) const {
    return llvm::any_of(axes, [&](int axis) {
      return size_t(axis) < problem.forbidden.size() &&
             problem.forbidden[size_t(axis)];
    });
  }
  /// Elements of a rank's block, or none if `layout` does not divide the
  /// shape evenly.
  std::optional<uint64_t> localElements(const AxisLists &layout) const {
    uint64_t elements = 1;
    for (auto [size, axes] : llvm::zip(problem.shape, layout)) {
      int64_t group = groupSize(axes);
      if (size % group != 0)
        return std::nullopt;
      elements *= uint64_t(size / group);
    }
    return elements;
  }
  /// The dimension the target puts `axis` on, or -1.
  int64_t wantedOn(int axis) const {
    for (const auto &[wantedAxis, home] : wanted)
      if (wantedAxis == axis)
        return home;
    return -1;
  }
  /// Whether reordering `before` to `after` moves any block: axes of size 1
  /// index nothing.
  bool movesBlocks(ArrayRef<int> before, ArrayRef<int> after) const {
    auto sized = [&](ArrayRef<int> axes) {
      Axes kept;
      for (int axis : axes)
        if (problem.axisSizes[size_t(axis)] > 1)
          kept.push_back(axis);
      return kept;
    };
    return sized(before) != sized(after);
  }
  using Block = SmallVector<std::pair<int64_t, int64_t>, 4>;
  /// The rows of each dimension that the device at `at` holds in `layout`.
  Block blockOf(const AxisLists &layout, ArrayRef<int64_t> at) const {
    Block block;
    for (auto [size, axes] : llvm::zip(problem.shape, layout)) {
      int64_t index = 0;
      for (int axis : axes)
        index = index * problem.axisSizes[size_t(axis)] + at[size_t(axis)];
      int64_t rows = size / groupSize(axes);
      block.push_back({index * rows, (index + 1) * rows});
    }
    return block;
  }
  /// The most elements that a device needs for its target block and does
  /// not hold in `layout`: every plan from `layout` receives at least as
  /// many a rank, and a step lowers it by no more than it costs, so the
  /// search (A*) stays exact.
  uint64_t stillMissing(const AxisLists &layout) const {
    uint64_t most = 0;
    for (auto [at, target] : llvm::zip(devices, targets)) {
      Block held = blockOf(layout, at);
      uint64_t need = 1, have = 1;
      for (auto [t, h] : llvm::zip(target, held)) {
        need *= uint64_t(t.second - t.first);
        have *= uint64_t(std::max<int64_t>(0, std::min(t.second, h.second) -
                                                  std::max(t.first, h.first)));
      }
      most = std::max(most, need - have);
    }
    return most;
  }
  static std::string keyOf(const AxisLists &layout, uint32_t pending) {
    std::string key = std::to_string(pending) + ":";
    for (const Axes &dim : layout) {
      for (int axis : dim)
        key += std::to_string(axis) + ",";
      key += "|";
    }
    return key;
  }
  /// Offers `layout` with partial sums over `pending`, reached from node
  /// `from` by `step` at `cost`.
  void offer(int from, AxisLists layout, uint32_t pending, ReshardStep step,
             Cost cost);

  const ReshardProblem &problem;
  size_t budget;
  bool narrow;
  uint64_t weight;
  uint64_t scale = 1;
  /// The target's axes, each with its dimension there.
  SmallVector<std::pair<int, int64_t>> wanted;
  std::vector<Node> nodes;
  std::unordered_map<std::string, int> index;
  SmallVector<SmallVector<int64_t, 8>> devices;
  SmallVector<Block> targets;
  /// A node to visit: its cost so far plus what it still misses, the node,
  /// and its cost so far (older entries for a node are skipped).
  struct Entry {
    Cost priority;
    int node;
    Cost cost;
  };
  struct Later {
    bool operator()(const Entry &a, const Entry &b) const {
      return b.priority < a.priority;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> queue;
  bool overBudget = false;
};

void Search::offer(int from, AxisLists layout, uint32_t pending,
                   ReshardStep step, Cost cost) {
  std::string key = keyOf(layout, pending);
  auto [it, inserted] = index.try_emplace(key, int(nodes.size()));
  if (inserted) {
    if (nodes.size() >= budget) {
      overBudget = true;
      index.erase(it);
      return;
    }
    nodes.push_back(
        Node{std::move(layout), pending, cost, from, std::move(step)});
  } else {
    Node &node = nodes[size_t(it->second)];
    if (node.settled || !(cost < node.cost))
      return;
    node.cost = cost;
    node.parent = from;
    node.step = std::move(step);
  }
  Cost priority = cost;
  priority.elements +=
      weight * scale * stillMissing(nodes[size_t(it->second)].layout);
  queue.push({priority, it->second, cost});
}

std::optional<SmallVector<ReshardStep>> Search::run() {
  if (!localElements(problem.from) || !localElements(problem.to))
    return std::nullopt;
  if (problem.axisSizes.size() > 32)
    return std::nullopt;
  uint32_t partial = 0;
  for (int axis : problem.reduce)
    partial |= 1u << axis;
  std::string goal = keyOf(problem.to, 0);
  nodes.push_back(Node{problem.from, partial, Cost{}, -1, {}});
  index[keyOf(problem.from, partial)] = 0;
  queue.push({Cost{weight * scale * stillMissing(problem.from), 0}, 0, Cost{}});
  while (!queue.empty() && !overBudget) {
    Cost cost = queue.top().cost;
    int current = queue.top().node;
    queue.pop();
    if (nodes[size_t(current)].settled || nodes[size_t(current)].cost < cost)
      continue;
    nodes[size_t(current)].settled = true;
    const AxisLists here = nodes[size_t(current)].layout;
    uint32_t pending = nodes[size_t(current)].pending;
    if (keyOf(here, pending) == goal) {
      SmallVector<ReshardStep> steps;
      for (int at = current; nodes[size_t(at)].parent >= 0;
           at = nodes[size_t(at)].parent)
        steps.push_back(nodes[size_t(at)].step);
      std::reverse(steps.begin(), steps.end());
      // Slices one after another onto one dimension are one all_slice;
      // permutes one after another, one collective_permute.
      SmallVector<ReshardStep> merged;
      for (ReshardStep &step : steps) {
        if (!merged.empty() && step.kind == ReshardStep::Kind::Permute &&
            merged.back().kind == ReshardStep::Kind::Permute) {
          merged.back().layout = std::move(step.layout);
          continue;
        }
        if (!merged.empty() && step.kind == ReshardStep::Kind::Slice &&
            merged.back().kind == ReshardStep::Kind::Slice &&
            merged.back().dim == step.dim) {
          merged.back().axes.append(step.axes.begin(), step.axes.end());
          continue;
        }
        merged.push_back(std::move(step));
      }
      return merged;
    }
    uint64_t local = *localElements(here) * scale;
    auto after = [&](uint64_t elements, bool collective) {
      return Cost{cost.elements + elements, cost.steps + (collective ? 1 : 0)};
    };
    // Partial sums reduced: any subset of the pending axes, on every rank
    // or scattered onto the end of a dimension, its axes in any order.
    for (uint32_t subset = pending; subset != 0;
         subset = (subset - 1) & pending) {
      Axes axes;
      for (int axis = 0; axis < 32; ++axis)
        if (subset & (1u << axis))
          axes.push_back(axis);
      if (anyForbidden(axes))
        continue;
      uint64_t n = uint64_t(groupSize(axes));
      offer(current, here, pending & ~subset,
            ReshardStep{ReshardStep::Kind::AllReduce, -1, -1, axes},
            after(2 * (n - 1) * local / n, true));
      do {
        for (int64_t dim = 0; dim < int64_t(here.size()); ++dim) {
          AxisLists next = here;
          next[size_t(dim)].append(axes.begin(), axes.end());
          if (!localElements(next))
            continue;
          offer(current, std::move(next), pending & ~subset,
                ReshardStep{ReshardStep::Kind::ReduceScatter, dim, -1, axes},
                after((n - 1) * local / n, true));
        }
      } while (std::next_permutation(axes.begin(), axes.end()));
    }
    int64_t rank = int64_t(here.size());
    for (int64_t dim = 0; dim < rank; ++dim) {
      const Axes &axes = here[size_t(dim)];
      // Reorders of this dimension.
      if (axes.size() > 1) {
        Axes order = axes;
        std::sort(order.begin(), order.end());
        do {
          if (order == axes)
            continue;
          bool moves = movesBlocks(axes, order);
          if (moves && anyForbidden(axes))
            continue;
          AxisLists next = here;
          next[size_t(dim)] = order;
          offer(current, next, pending,
                ReshardStep{ReshardStep::Kind::Permute, -1, -1, {}, next},
                after(moves ? local : 0, moves));
        } while (std::next_permutation(order.begin(), order.end()));
      }
      // One of its axes exchanged for another of the same size: held by a
      // later dimension, or free. A collective_permute moves each block
      // once, where a gather and a slice would move the axis's group. Only
      // exchanges that put an axis on the dimension the target puts it on:
      // any other would multiply the layouts the search meets.
      for (size_t at = 0; at < axes.size(); ++at) {
        int axis = axes[at];
        int64_t size = problem.axisSizes[size_t(axis)];
        if (size == 1 || anyForbidden(axes))
          continue;
        for (int other = 0; other < int(problem.axisSizes.size()); ++other) {
          if (other == axis || problem.axisSizes[size_t(other)] != size ||
              (pending & (1u << other)))
            continue;
          AxisLists next = here;
          int64_t otherDim = -1;
          for (int64_t d = 0; d < rank; ++d)
            if (llvm::is_contained(here[size_t(d)], other))
              otherDim = d;
          bool placesOther = wantedOn(other) == dim;
          if (otherDim >= 0) {
            if (otherDim <= dim || anyForbidden(here[size_t(otherDim)]))
              continue; // within a dimension, a reorder; earlier, offered
            if (!placesOther && wantedOn(axis) != otherDim)
              continue;
            *llvm::find(next[size_t(otherDim)], other) = axis;
          } else if (!placesOther || anyForbidden(ArrayRef<int>(other))) {
            continue;
          }
          next[size_t(dim)][at] = other;
          offer(current, next, pending,
                ReshardStep{ReshardStep::Kind::Permute, -1, -1, {}, next},
                after(local, true));
        }
      }
      // Its last axes gathered, or moved to another dimension.
      for (size_t count = 1; count <= axes.size(); ++count) {
        Axes moved(axes.end() - count, axes.end());
        if (anyForbidden(moved))
          break; // longer suffixes hold the same axis
        uint64_t n = uint64_t(groupSize(moved));
        AxisLists gathered = here;
        gathered[size_t(dim)].resize(axes.size() - count);
        offer(current, gathered, pending,
              ReshardStep{ReshardStep::Kind::Gather, dim, -1, moved},
              after((n - 1) * local, true));
        for (int64_t to = 0; to < rank; ++to) {
          if (to == dim)
            continue;
          AxisLists next = gathered;
          next[size_t(to)].append(moved.begin(), moved.end());
          if (!localElements(next))
            continue;
          offer(current, next, pending,
                ReshardStep{ReshardStep::Kind::AllToAll, to, dim, moved},
                after((n - 1) * local / n, true));
          // Or in the order the target puts them in on `to`, at the same
          // cost (the pieces numbered in that order).
          Axes order;
          for (int axis : problem.to[size_t(to)])
            if (llvm::is_contained(moved, axis))
              order.push_back(axis);
          if (order.size() != moved.size() || order == moved)
            continue;
          next[size_t(to)].resize(next[size_t(to)].size() - moved.size());
          next[size_t(to)].append(order.begin(), order.end());
          offer(current, std::move(next), pending,
                ReshardStep{
                    ReshardStep::Kind::AllToAll, to, dim, moved, {}, order},
                after((n - 1) * local / n, true));
        }
      }
      // A free axis of the target sliced onto its end.
      for (const auto &[axis, home] : wanted) {
        int free = axis;
        if ((narrow && home != dim) || (pending & (1u << free)) ||
            anyForbidden(ArrayRef<int>(free)) ||
            llvm::any_of(here, [&](const Axes &held) {
              return llvm::is_contained(held, free);
            }))
          continue;
        AxisLists next = here;
        next[size_t(dim)].push_back(free);
        if (!localElements(next))
          continue;
        offer(current, std::move(next), pending,
              ReshardStep{ReshardStep::Kind::Slice, dim, -1, {free}},
              after(0, true));
      }
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<SmallVector<ReshardStep>>
loom::planReshard(const ReshardProblem &problem, size_t budget) {
  if (budget == 0 || problem.from.size() != problem.to.size() ||
      problem.from.size() != problem.shape.size())
    return std::nullopt;
  // Slicing an axis onto another dimension first can pay (the blocks that
  // move are smaller), but with many axes the free slices multiply the
  // layouts; then the narrower search, then one that trusts its estimate
  // more (a plan within 4 times the cheapest of its steps, where the plain
  // rules can be tens of times).
  Search wide(problem, budget, /*narrow=*/false);
  if (auto plan = wide.run(); plan || !wide.gaveUp())
    return plan;
  Search narrow(problem, budget, /*narrow=*/true);
  if (auto plan = narrow.run(); plan || !narrow.gaveUp())
    return plan;
  return Search(problem, budget, /*narrow=*/true, /*weight=*/4).run();
}

SmallVector<ReshardStep>
loom::gatherAndSlicePlan(const ReshardProblem &problem) {
  using Kind = ReshardStep::Kind;
  SmallVector<ReshardStep> steps;
  AxisLists current = problem.from;
  const AxisLists &target = problem.to;
  int64_t rank = int64_t(target.size());
  auto inUse = [&](ArrayRef<int> axes) {
    return llvm::any_of(current, [&](const Axes &dim) {
      return llvm::any_of(
          axes, [&](int axis) { return llvm::is_contained(dim, axis); });
    });
  };

  // Partial axes: a reduce_scatter into the first dimension that the target
  // extends by some of them alone, an all_reduce of the rest.
  Axes reduce(problem.reduce.begin(), problem.reduce.end());
  for (int64_t dim = 0; dim < rank && !reduce.empty(); ++dim) {
    ArrayRef<int> want = target[size_t(dim)];
    Axes &have = current[size_t(dim)];
    if (want.size() <= have.size() ||
        want.take_front(have.size()) != ArrayRef<int>(have))
      continue;
    ArrayRef<int> added = want.drop_front(have.size());
    if (!llvm::all_of(
            added, [&](int axis) { return llvm::is_contained(reduce, axis); }))
      continue;
    have.append(added.begin(), added.end());
    llvm::erase_if(reduce,
                   [&](int axis) { return llvm::is_contained(added, axis); });
    steps.push_back({Kind::ReduceScatter, dim, -1, Axes(added)});
    break;
  }
  if (!reduce.empty())
    steps.push_back({Kind::AllReduce, -1, -1, reduce});

  struct Move {
    int64_t dim;
    Axes axes;
  };
  SmallVector<Move> gathers, slices;
  for (int64_t dim = 0; dim < rank; ++dim) {
    const Axes &have = current[size_t(dim)], &want = target[size_t(dim)];
    size_t common = 0;
    while (common < have.size() && common < want.size() &&
           have[common] == want[common])
      ++common;
    if (common < have.size())
      gathers.push_back({dim, Axes(have.begin() + common, have.end())});
    if (common < want.size())
      slices.push_back({dim, Axes(want.begin() + common, want.end())});
  }
  for (Move &gather : gathers) {
    auto *slice = llvm::find_if(slices, [&](const Move &slice) {
      return slice.axes == gather.axes && slice.dim != gather.dim &&
             current[size_t(slice.dim)].size() + gather.axes.size() ==
                 target[size_t(slice.dim)].size();
    });
    if (slice == slices.end())
      continue;
    Axes &from = current[size_t(gather.dim)];
    from.resize(from.size() - gather.axes.size());
    current[size_t(slice->dim)].append(slice->axes.begin(), slice->axes.end());
    steps.push_back({Kind::AllToAll, slice->dim, gather.dim, gather.axes});
    gather.axes.clear();
    slices.erase(slice);
  }
  auto sliceIn = [&](Move &slice) {
    current[size_t(slice.dim)].append(slice.axes.begin(), slice.axes.end());
    steps.push_back({Kind::Slice, slice.dim, -1, slice.axes});
    slice.axes.clear();
  };
  // Slicing first leaves less to gather, when the axes are free.
  auto gathersDim = [&](int64_t dim) {
    return llvm::any_of(gathers, [&](const Move &gather) {
      return gather.dim == dim && !gather.axes.empty();
    });
  };
  for (Move &slice : slices)
    if (!inUse(slice.axes) && !gathersDim(slice.dim))
      sliceIn(slice);
  for (Move &gather : llvm::reverse(gathers)) {
    if (gather.axes.empty())
      continue;
    Axes &from = current[size_t(gather.dim)];
    from.resize(from.size() - gather.axes.size());
    steps.push_back({Kind::Gather, gather.dim, -1, gather.axes});
  }
  for (Move &slice : slices)
    if (!slice.axes.empty())
      sliceIn(slice);
  return steps;
}
