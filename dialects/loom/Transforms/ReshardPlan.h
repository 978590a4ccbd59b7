//===- ReshardPlan.h - The cheapest collectives between two layouts -------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// A reshard moves a value from one layout (the mesh axes each dimension is
// split over, in order, and the axes it is a partial sum over) to another
// by a sequence of collectives, each of which changes one or two
// dimensions' axes or reduces partial sums. The planner searches that
// sequence (Dijkstra over layouts) for the fewest bytes received a rank, as
// `--explain` counts them, then the fewest collectives. It knows no MLIR:
// axes are indices, and the partitioner turns the steps into ops.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_RESHARDPLAN_H
#define LOOM_TRANSFORMS_RESHARDPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace loom {

/// Per tensor dimension, the indices of the mesh axes it is split over,
/// outermost first.
using AxisLists = llvm::SmallVector<llvm::SmallVector<int, 4>, 4>;

struct ReshardStep {
  enum class Kind {
    /// The layout `layout`, with as many blocks on each dimension as now
    /// (a dimension's axes reordered, axes of one size exchanged between
    /// dimensions, or a held axis exchanged for a free one of its size):
    /// each rank receives one other rank's block.
    Permute,
    /// `axes`, the last ones of `dim`, are gathered.
    Gather,
    /// `axes`, held by no dimension, are appended to `dim`: local.
    Slice,
    /// `axes`, the last ones of `from`, move to the end of `dim`, in the
    /// order `order` (empty: as they were).
    AllToAll,
    /// The partial sums over `axes` are reduced, each rank keeping the
    /// block of `dim` that `axes` then index.
    ReduceScatter,
    /// The partial sums over `axes` are reduced on every rank.
    AllReduce,
  };
  Kind kind;
  /// -1 for AllReduce and Permute.
  int64_t dim;
  int64_t from = -1;
  llvm::SmallVector<int, 4> axes;
  /// Permute's layout after the step.
  AxisLists layout = {};
  /// AllToAll's order of `axes` at the end of `dim`.
  llvm::SmallVector<int, 4> order = {};
};

struct ReshardProblem {
  /// The value's global shape.
  llvm::ArrayRef<int64_t> shape;
  /// Size of each mesh axis, by index.
  llvm::ArrayRef<int64_t> axisSizes;
  /// Axes no collective may be over (the pipeline's manual axes).
  llvm::ArrayRef<bool> forbidden;
  AxisLists from, to;
  /// Axes the value is partial over now and must not be at the end.
  llvm::SmallVector<int, 4> reduce;
};

/// The steps from `from` to `to` that receive the fewest elements a rank,
/// then the fewest steps. A search that meets more than `budget` layouts
/// gives up; then one that slices free axes only onto their target
/// dimension runs, then one that trusts its estimate four times over (a
/// plan within 4 times the cheapest). None when all three give up or `to`
/// cannot be reached without a forbidden axis.
std::optional<llvm::SmallVector<ReshardStep>>
planReshard(const ReshardProblem &problem, size_t budget = 100000);

/// The plan of the plain rules, for when the search gives up: one
/// reduce_scatter into a dimension that the target extends by partial axes
/// alone and an all_reduce of the rest; then, per dimension, the common
/// prefix of the two layouts stays, the rest is gathered (last dimension
/// first) and the target's remaining axes are sliced in, an axis group
/// gathered from one dimension and sliced into another being one
/// all_to_all. It may use forbidden axes: the caller reports those.
llvm::SmallVector<ReshardStep>
gatherAndSlicePlan(const ReshardProblem &problem);

} // namespace loom

#endif // LOOM_TRANSFORMS_RESHARDPLAN_H
