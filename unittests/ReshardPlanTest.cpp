//===- ReshardPlanTest.cpp - The reshard planner's steps and costs --------===//
//
// Every plan is replayed here: each step must be one the partitioner can
// emit (a gather of a dimension's last axes, a slice of a free axis, an
// all_to_all of a dimension's last axes, a reorder of the same axes), the
// replay must end at the target, and its cost must lie between the least
// any reshard needs and what gathering and slicing would cost.
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/ReshardPlan.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <functional>
#include <random>

using namespace loom;
using llvm::ArrayRef;
using llvm::SmallVector;

namespace {

using Axes = SmallVector<int, 4>;

struct Mesh {
  std::vector<int64_t> sizes;
  SmallVector<bool, 4> forbidden;
};

int64_t group(const Mesh &mesh, ArrayRef<int> axes) {
  int64_t size = 1;
  for (int axis : axes)
    size *= mesh.sizes[size_t(axis)];
  return size;
}

uint64_t localElements(const Mesh &mesh, ArrayRef<int64_t> shape,
                       const AxisLists &layout) {
  uint64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    elements *= uint64_t(shape[d] / group(mesh, layout[d]));
  return elements;
}

bool holds(const AxisLists &layout, int axis) {
  for (const Axes &dim : layout)
    if (std::find(dim.begin(), dim.end(), axis) != dim.end())
      return true;
  return false;
}

/// Replays `steps` from `from` partial over `partial`, checking each;
/// returns the elements received a rank (the cost model of `--explain`).
double replay(const Mesh &mesh, ArrayRef<int64_t> shape, AxisLists layout,
              const AxisLists &to, ArrayRef<ReshardStep> steps,
              Axes partial = {}) {
  double cost = 0;
  for (const ReshardStep &step : steps) {
    double local = double(localElements(mesh, shape, layout));
    if (step.kind == ReshardStep::Kind::AllReduce)
      EXPECT_EQ(step.dim, -1) << "an all_reduce changes no dimension";
    Axes none;
    Axes &dim = step.dim >= 0 ? layout[size_t(step.dim)] : none;
    for (int axis : step.axes)
      if (step.kind != ReshardStep::Kind::Permute)
        EXPECT_FALSE(mesh.forbidden[size_t(axis)]);
    switch (step.kind) {
    case ReshardStep::Kind::Permute: {
      EXPECT_EQ(step.dim, -1) << "a permute names its whole layout";
      if (step.layout.size() != layout.size()) {
        ADD_FAILURE() << "a permute's layout of another rank";
        return -1;
      }
      // Only axes of more than one device index blocks.
      auto sized = [&](ArrayRef<int> axes) {
        Axes kept;
        for (int axis : axes)
          if (mesh.sizes[size_t(axis)] > 1)
            kept.push_back(axis);
        return kept;
      };
      bool moves = false;
      for (size_t d = 0; d < layout.size(); ++d) {
        EXPECT_EQ(group(mesh, layout[d]), group(mesh, step.layout[d]))
            << "a permute keeps the blocks of every dimension";
        if (sized(layout[d]) == sized(step.layout[d]))
          continue;
        moves = true;
        for (int axis : step.layout[d]) {
          EXPECT_FALSE(llvm::is_contained(partial, axis))
              << "no permute over an axis the value is partial over";
          EXPECT_FALSE(mesh.forbidden[size_t(axis)]);
        }
        for (int axis : layout[d])
          EXPECT_FALSE(mesh.forbidden[size_t(axis)]);
      }
      if (moves)
        cost += local;
      layout = step.layout;
      break;
    }
    case ReshardStep::Kind::Gather: {
      if (step.axes.size() > dim.size()) {
        ADD_FAILURE() << "a gather of more axes than the dimension has";
        return -1;
      }
      EXPECT_TRUE(std::equal(step.axes.begin(), step.axes.end(),
                             dim.end() - step.axes.size()))
          << "a gather takes the dimension's last axes";
      dim.resize(dim.size() - step.axes.size());
      cost += double(group(mesh, step.axes) - 1) * local;
      break;
    }
    case ReshardStep::Kind::Slice:
      for (int axis : step.axes) {
        EXPECT_FALSE(holds(layout, axis)) << "a slice takes a free axis";
        EXPECT_FALSE(llvm::is_contained(partial, axis))
            << "no slice over an axis the value is partial over";
        dim.push_back(axis);
      }
      break;
    case ReshardStep::Kind::ReduceScatter:
    case ReshardStep::Kind::AllReduce: {
      for (int axis : step.axes) {
        EXPECT_TRUE(llvm::is_contained(partial, axis))
            << "a reduction over an axis the value is partial over";
        llvm::erase(partial, axis);
      }
      double n = double(group(mesh, step.axes));
      if (step.kind == ReshardStep::Kind::ReduceScatter) {
        dim.append(step.axes.begin(), step.axes.end());
        cost += (n - 1) * local / n;
      } else {
        cost += 2 * (n - 1) * local / n;
      }
      break;
    }
    case ReshardStep::Kind::AllToAll: {
      Axes &source = layout[size_t(step.from)];
      if (step.from == step.dim || step.axes.size() > source.size()) {
        ADD_FAILURE() << "an all_to_all within one dimension or of more axes "
                         "than the giving dimension has";
        return -1;
      }
      EXPECT_TRUE(std::equal(step.axes.begin(), step.axes.end(),
                             source.end() - step.axes.size()))
          << "an all_to_all moves the giving dimension's last axes";
      source.resize(source.size() - step.axes.size());
      const Axes &order = step.order.empty() ? step.axes : step.order;
      Axes sortedOrder = order, sortedAxes = step.axes;
      std::sort(sortedOrder.begin(), sortedOrder.end());
      std::sort(sortedAxes.begin(), sortedAxes.end());
      EXPECT_EQ(sortedOrder, sortedAxes)
          << "an all_to_all's order is of the axes it moves";
      layout[size_t(step.dim)].append(order.begin(), order.end());
      double n = double(group(mesh, step.axes));
      cost += (n - 1) * local / n;
      break;
    }
    }
    for (size_t d = 0; d < shape.size(); ++d)
      EXPECT_EQ(shape[d] % group(mesh, layout[d]), 0)
          << "every layout on the way divides the shape";
  }
  EXPECT_EQ(layout, to);
  EXPECT_TRUE(partial.empty()) << "every partial sum reduced";
  return cost;
}

/// All-reduce the partial sums, gather what each dimension has beyond the
/// common prefix, then slice.
double gatherThenSlice(const Mesh &mesh, ArrayRef<int64_t> shape,
                       AxisLists layout, const AxisLists &to,
                       ArrayRef<int> partial = {}) {
  double cost = 0;
  if (!partial.empty()) {
    double n = double(group(mesh, partial));
    cost += 2 * (n - 1) * double(localElements(mesh, shape, layout)) / n;
  }
  for (size_t d = layout.size(); d-- > 0;) {
    size_t common = 0;
    while (common < layout[d].size() && common < to[d].size() &&
           layout[d][common] == to[d][common])
      ++common;
    Axes rest(layout[d].begin() + common, layout[d].end());
    cost +=
        uint64_t(group(mesh, rest) - 1) * localElements(mesh, shape, layout);
    layout[d].resize(common);
  }
  return cost;
}

/// The most elements that any device needs and does not hold.
uint64_t lowerBound(const Mesh &mesh, ArrayRef<int64_t> shape,
                    const AxisLists &from, const AxisLists &to) {
  size_t axes = mesh.sizes.size();
  std::vector<int64_t> at(axes, 0);
  uint64_t worst = 0;
  std::function<void(size_t)> each = [&](size_t axis) {
    if (axis < axes) {
      for (at[axis] = 0; at[axis] < mesh.sizes[axis]; ++at[axis])
        each(axis + 1);
      return;
    }
    uint64_t need = 1, have = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      auto interval = [&](const Axes &dim) {
        int64_t index = 0;
        for (int a : dim)
          index = index * mesh.sizes[size_t(a)] + at[size_t(a)];
        int64_t block = shape[d] / group(mesh, dim);
        return std::make_pair(index * block, (index + 1) * block);
      };
      auto [s0, s1] = interval(from[d]);
      auto [t0, t1] = interval(to[d]);
      need *= uint64_t(t1 - t0);
      have *=
          uint64_t(std::max<int64_t>(0, std::min(s1, t1) - std::max(s0, t0)));
    }
    worst = std::max(worst, need - have);
  };
  each(0);
  return worst;
}

/// A random layout: each axis on a random dimension or none, shuffled.
AxisLists randomLayout(std::mt19937 &random, const Mesh &mesh,
                       ArrayRef<int64_t> shape) {
  for (;;) {
    AxisLists layout(shape.size());
    std::vector<int> order(mesh.sizes.size());
    for (size_t a = 0; a < order.size(); ++a)
      order[a] = int(a);
    std::shuffle(order.begin(), order.end(), random);
    for (int axis : order) {
      size_t dim = random() % (shape.size() + 1);
      if (dim < shape.size())
        layout[dim].push_back(axis);
    }
    bool divides = true;
    for (size_t d = 0; d < shape.size(); ++d)
      divides &= shape[d] % group(mesh, layout[d]) == 0;
    if (divides)
      return layout;
  }
}

TEST(ReshardPlan, SameLayoutNeedsNothing) {
  Mesh mesh{{2, 2}, {false, false}};
  std::vector<int64_t> shape{8, 12};
  AxisLists layout{{0}, {1}};
  auto plan = planReshard({shape, mesh.sizes, {}, layout, layout, {}});
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->empty());
}

TEST(ReshardPlan, MovesAnAxisByOneAllToAll) {
  // [8, 12:a] to [8:a, 12]: one all_to_all, half a block.
  Mesh mesh{{2}, {false}};
  std::vector<int64_t> shape{8, 12};
  AxisLists from{{}, {0}}, to{{0}, {}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].kind, ReshardStep::Kind::AllToAll);
  EXPECT_EQ((*plan)[0].dim, 0);
  EXPECT_EQ((*plan)[0].from, 1);
  EXPECT_EQ(replay(mesh, shape, from, to, *plan), 24u);
}

TEST(ReshardPlan, SlicesBeforeMovingWhenThatIsCheaper) {
  // {c, b} to {a, b} on a 2x3x4 mesh: slicing a in first makes every later
  // block smaller than gathering c first would.
  Mesh mesh{{2, 3, 4}, {false, false, false}};
  std::vector<int64_t> shape{48, 12};
  AxisLists from{{2, 1}, {}}, to{{0, 1}, {}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {}});
  ASSERT_TRUE(plan);
  ASSERT_FALSE(plan->empty());
  EXPECT_EQ(plan->front().kind, ReshardStep::Kind::Slice);
  EXPECT_EQ(replay(mesh, shape, from, to, *plan), 96u);
  EXPECT_EQ(gatherThenSlice(mesh, shape, from, to), 528u);
  // With c of a's size, c is exchanged for a: one block.
  Mesh same{{2, 3, 2}, {false, false, false}};
  std::vector<int64_t> small{24, 12};
  plan = planReshard({small, same.sizes, {}, from, to, {}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ(plan->front().kind, ReshardStep::Kind::Permute);
  EXPECT_EQ(replay(same, small, from, to, *plan), 48u);
  EXPECT_EQ(gatherThenSlice(same, small, from, to), 240u);
}

TEST(ReshardPlan, ReorderingAxesOfSizeOneIsFree) {
  Mesh mesh{{1, 2}, {false, false}};
  std::vector<int64_t> shape{8};
  AxisLists from{{0, 1}}, to{{1, 0}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].kind, ReshardStep::Kind::Permute);
  EXPECT_EQ(replay(mesh, shape, from, to, *plan), 0u);
}

TEST(ReshardPlan, ExchangesAxesBetweenDimensionsInOnePermute) {
  // [8:a, 12:b] to [8:b, 12:a]: device (x, y) needs the block that device
  // (y, x) holds, one collective_permute of a block, where three
  // all_to_alls received 1.75 blocks.
  Mesh mesh{{2, 2}, {false, false}};
  std::vector<int64_t> shape{8, 12};
  AxisLists from{{0}, {1}}, to{{1}, {0}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].kind, ReshardStep::Kind::Permute);
  EXPECT_EQ(replay(mesh, shape, from, to, *plan), 24u);
  // An axis for a free one of its size: [8:a, 12] to [8:b, 12], one block,
  // where a gather and a slice take two collectives for the same bytes.
  AxisLists held{{0}, {}}, free{{1}, {}};
  plan = planReshard({shape, mesh.sizes, {}, held, free, {}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].kind, ReshardStep::Kind::Permute);
  EXPECT_EQ(replay(mesh, shape, held, free, *plan), 48u);
  // Not over an axis the value is still partial over.
  plan = planReshard({shape, mesh.sizes, {}, held, free, {1}});
  ASSERT_TRUE(plan);
  replay(mesh, shape, held, free, *plan, {1});
}

TEST(ReshardPlan, MovesAxesByOneAllToAllInTheTargetsOrder) {
  // [16:(a, b, c, d), 48] to [16, 48:(a, b, d, c)]: one all_to_all whose
  // pieces are numbered in the target's order (15/16 of a block), where
  // one in the source's order and a permute received a block more.
  Mesh mesh{{2, 2, 2, 2}, {false, false, false, false}};
  std::vector<int64_t> shape{16, 48};
  AxisLists from{{0, 1, 2, 3}, {}}, to{{}, {0, 1, 3, 2}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].kind, ReshardStep::Kind::AllToAll);
  EXPECT_EQ((*plan)[0].axes, (Axes{0, 1, 2, 3}));
  EXPECT_EQ((*plan)[0].order, (Axes{0, 1, 3, 2}));
  EXPECT_EQ(replay(mesh, shape, from, to, *plan), 45u);
}

TEST(ReshardPlan, NoCollectiveOverAForbiddenAxis) {
  // Axis 0 is manual: the value stays split over it on dimension 0 and the
  // other axis moves around it.
  Mesh mesh{{2, 2}, {true, false}};
  std::vector<int64_t> shape{8, 12};
  AxisLists from{{0, 1}, {}}, to{{0}, {1}};
  auto plan = planReshard({shape, mesh.sizes, mesh.forbidden, from, to, {}});
  ASSERT_TRUE(plan);
  replay(mesh, shape, from, to, *plan);
  // Gathering the manual axis is the only way: no plan.
  AxisLists unsplit{{}, {1}};
  EXPECT_FALSE(
      planReshard({shape, mesh.sizes, mesh.forbidden, from, unsplit, {}}));
}

TEST(ReshardPlan, GivesUpBeyondItsBudget) {
  Mesh mesh{{2, 3, 2}, {false, false, false}};
  std::vector<int64_t> shape{24, 36};
  AxisLists from{{0}, {1, 2}}, to{{1}, {0, 2}};
  EXPECT_FALSE(planReshard({shape, mesh.sizes, {}, from, to, {}}, 3));
  EXPECT_TRUE(planReshard({shape, mesh.sizes, {}, from, to, {}}));
}

TEST(ReshardPlan, TrustsItsEstimateWhereTheExactSearchesGiveUp) {
  // Six axes of 2 on four dimensions, every one moving: with 100,000
  // layouts the search finds the cheapest plan (917,504 elements a rank);
  // with 50,000 both exact searches give up and the weighted one finds a
  // plan within 4 times that, where the plain rules receive 16,515,072.
  Mesh mesh{{2, 2, 2, 2, 2, 2}, {false, false, false, false, false, false}};
  std::vector<int64_t> shape{64, 64, 64, 64};
  AxisLists from{{0, 1}, {2}, {3, 4}, {5}}, to{{5}, {4, 3}, {2}, {1, 0}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {}}, 50000);
  ASSERT_TRUE(plan);
  double cost = replay(mesh, shape, from, to, *plan);
  EXPECT_GT(cost, 917504.0);
  EXPECT_LE(cost, 4 * 917504.0);
  EXPECT_EQ(replay(mesh, shape, from, to,
                   gatherAndSlicePlan({shape, mesh.sizes, {}, from, to, {}})),
            16515072.0);
}

TEST(ReshardPlan, ReducesOntoADimensionInAnotherOrder) {
  // [8:b, 12] partial over a to [8:(a, b), 12]: reduce_scatter a onto the
  // end of dimension 0 and permute (24 + 24 floats), where an all_reduce, a
  // slice and a permute would receive 48 + 24.
  Mesh mesh{{2, 2}, {false, false}};
  std::vector<int64_t> shape{8, 12};
  AxisLists from{{1}, {}}, to{{0, 1}, {}};
  auto plan = planReshard({shape, mesh.sizes, {}, from, to, {0}});
  ASSERT_TRUE(plan);
  ASSERT_FALSE(plan->empty());
  EXPECT_EQ(plan->front().kind, ReshardStep::Kind::ReduceScatter);
  EXPECT_EQ(replay(mesh, shape, from, to, *plan, {0}), 48);
}

TEST(ReshardPlan, RandomLayoutsReplayWithinTheirBounds) {
  std::mt19937 random(20261201);
  std::vector<Mesh> meshes{{{2, 2}, {false, false}},
                           {{2, 3, 2}, {false, false, false}},
                           {{2, 1, 2}, {false, false, false}},
                           {{2, 2, 2, 2}, {false, false, false, false}}};
  std::vector<std::vector<int64_t>> shapes{{24, 36}, {48}, {12, 12, 8}};
  int planned = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Mesh &mesh = meshes[size_t(trial) % meshes.size()];
    const std::vector<int64_t> &shape =
        shapes[size_t(trial / 4) % shapes.size()];
    AxisLists from = randomLayout(random, mesh, shape);
    AxisLists to = randomLayout(random, mesh, shape);
    // Half the values are partial sums over some axes they are not split
    // over.
    Axes partial;
    for (int axis = 0; axis < int(mesh.sizes.size()); ++axis)
      if (trial % 2 && !holds(from, axis) && random() % 5 < 2)
        partial.push_back(axis);
    auto plan = planReshard({shape, mesh.sizes, {}, from, to, partial});
    ASSERT_TRUE(plan);
    double cost = replay(mesh, shape, from, to, *plan, partial);
    EXPECT_GE(cost, double(lowerBound(mesh, shape, from, to)));
    EXPECT_LE(cost, gatherThenSlice(mesh, shape, from, to, partial));
    // The plain rules' plan, used when the search gives up, is valid too,
    // and never cheaper than the search's.
    SmallVector<ReshardStep> plain =
        gatherAndSlicePlan({shape, mesh.sizes, {}, from, to, partial});
    EXPECT_GE(replay(mesh, shape, from, to, plain, partial), cost);
    ++planned;
  }
  EXPECT_EQ(planned, 400);
}

} // namespace
