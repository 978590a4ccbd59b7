//===- PropagateShardings.cpp - Give every value a sharding ---------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// Fixed-point propagation in the manner of Shardy: every op's sharding rule
// ties dimensions of its operands and results through factors; a factor
// takes the axes of its members, and open dimensions of the other members
// take them too. Axes are only ever added to open dimensions, never removed,
// so user annotations (closed dimensions, the axes written on open ones)
// survive. Priorities run in rounds (p0 first, unprioritised last). Two
// annotations that disagree on one factor get an explicit reshard on the
// operand that is cheaper to move, with a remark naming both.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/ShardingRule.h"
#include "dialects/loom/IR/StableValueMap.h"
#include "dialects/loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_LOOMPROPAGATESHARDINGS
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

constexpr int64_t kNoPriority = std::numeric_limits<int64_t>::max();

struct DimState {
  SmallVector<StringAttr, 2> axes;
  bool closed = false;
  int64_t priority = kNoPriority;
  /// The annotation these axes (or this closed dimension) come from.
  LocationAttr origin;
};

/// One dimension of one value.
struct Member {
  Value value;
  int64_t dim;
  /// An operand of the op the group belongs to (one a reshard can move).
  std::optional<unsigned> operandIndex;
};

/// Dimensions that must be sharded alike: one factor of an op's rule, or one
/// dimension tied through `loom.shard` or `loom.repeat`.
struct FactorGroup {
  SmallVector<Member, 4> members;
  /// Summed over (a contracted factor): splitting it leaves the op's result
  /// partial.
  bool linear = false;
};

struct OpGroups {
  Operation *op;
  SmallVector<FactorGroup> groups;
  /// Whether all groups belong to one op instance that must not use an axis
  /// for two factors, and whose disagreeing operands need a reshard (false
  /// for the ties of `loom.repeat` and `loom.shard`, which is a reshard).
  bool exclusiveAxes;
};

bool isPrefix(ArrayRef<StringAttr> prefix, ArrayRef<StringAttr> axes) {
  return prefix.size() <= axes.size() &&
         prefix == axes.take_front(prefix.size());
}

class Propagator {
public:
  Propagator(func::FuncOp function, MeshOp mesh)
      : function(function), mesh(mesh) {}

  LogicalResult run();

private:
  void initialize();
  void buildGroups(Operation *op);
  enum class Outcome { Unchanged, Changed, Rebuilt };
  bool processGroups(size_t opIndex, int64_t round);
  Outcome processGroup(OpGroups &groups, size_t groupIndex, int64_t round);
  void reshardOperand(Operation *op, Member loser, DimState winner,
                      DimState lost, StringRef why);
  void writeBack();

  DimState &dimOf(const Member &member) {
    return states[member.value][member.dim];
  }
  void addValue(Value value, ShardingAttr sharding, LocationAttr origin);

  func::FuncOp function;
  MeshOp mesh;
  StableValueMap<SmallVector<DimState>> states;
  std::vector<OpGroups> opGroups;
  llvm::DenseMap<Operation *, size_t> groupIndex;
  SmallVector<int64_t> rounds;
  SmallVector<Operation *> pendingRebuild;
  /// The operands that propagation has resharded, as (op, operand index).
  llvm::DenseSet<std::pair<Operation *, unsigned>> resharded;
};

} // namespace

void Propagator::addValue(Value value, ShardingAttr sharding,
                          LocationAttr origin) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return;
  SmallVector<DimState> dims(type.getRank());
  if (sharding) {
    for (auto [dim, attr] : llvm::zip(dims, sharding.getDims())) {
      dim.axes.assign(attr.getAxes().begin(), attr.getAxes().end());
      dim.closed = attr.getIsClosed();
      dim.priority = attr.getPriority().value_or(kNoPriority);
      if (!dim.axes.empty() || dim.closed)
        dim.origin = origin;
      if (attr.getPriority())
        rounds.push_back(*attr.getPriority());
    }
  }
  states[value] = std::move(dims);
}

void Propagator::initialize() {
  for (BlockArgument arg : function.getArguments())
    addValue(arg, getRecordedSharding(arg), arg.getLoc());
  function.walk([&](Operation *op) {
    if (op != function)
      for (Region &region : op->getRegions())
        for (BlockArgument arg : region.getArguments())
          addValue(arg, getRecordedSharding(arg), {});
    for (OpResult result : op->getResults()) {
      ShardingAttr sharding = getRecordedSharding(result);
      if (auto shard = dyn_cast<ShardOp>(op))
        sharding = shard.getSharding();
      addValue(result, sharding,
               sharding ? LocationAttr(op->getLoc()) : LocationAttr());
    }
  });
  // A layer's slice of a stacked operand holds the operand's closed axes
  // from the start. The repeat's ties are processed after its body's ops,
  // and an op of the body that weighed its operands before the slice had
  // them (2.3) would give their axis to another factor for good: Megatron's
  // sequence parallelism in a repeat then gathered each layer's weights,
  // not its activations. Pre-order, so that a nested repeat's stack, a
  // slice of its outer repeat's, holds its axes by then; a slice stays open,
  // so `fixed` remembers which of its dimensions a closed stack decided.
  llvm::DenseSet<std::pair<Value, int64_t>> fixed;
  function.walk<WalkOrder::PreOrder>([&](RepeatOp repeat) {
    unsigned numCarried = repeat.getCarried().size();
    for (auto [index, stacked] : llvm::enumerate(repeat.getStacked())) {
      Value arg = repeat.getBody().getArgument(numCarried + index);
      SmallVector<DimState> &slice = states[arg];
      ArrayRef<DimState> stack = states[stacked];
      for (auto [dim, state] : llvm::enumerate(slice)) {
        int64_t stackDim = int64_t(dim) + 1;
        if (!state.axes.empty() || state.closed ||
            !(stack[stackDim].closed || fixed.contains({stacked, stackDim})))
          continue;
        state = stack[stackDim];
        state.closed = false;
        fixed.insert({arg, int64_t(dim)});
      }
    }
  });
}

void Propagator::buildGroups(Operation *op) {
  OpGroups entry{op, {}, true};
  auto tieDims = [&](ArrayRef<std::pair<Value, int64_t>> values, int64_t rank,
                     std::optional<unsigned> operandIndex = std::nullopt) {
    for (int64_t dim = 0; dim < rank; ++dim) {
      FactorGroup group;
      for (auto [index, pair] : llvm::enumerate(values))
        group.members.push_back({pair.first, dim + pair.second,
                                 index == 0 ? operandIndex : std::nullopt});
      entry.groups.push_back(std::move(group));
    }
  };
  if (auto repeat = dyn_cast<RepeatOp>(op)) {
    entry.exclusiveAxes = false;
    Block &body = repeat.getBody().front();
    Operation *yield = body.getTerminator();
    unsigned numCarried = repeat.getCarried().size();
    for (unsigned i = 0; i < numCarried; ++i) {
      int64_t rank =
          cast<RankedTensorType>(body.getArgument(i).getType()).getRank();
      tieDims({{repeat.getCarried()[i], 0},
               {body.getArgument(i), 0},
               {yield->getOperand(i), 0},
               {repeat->getResult(i), 0}},
              rank);
    }
    // Stacked operands and results lose (gain) the leading layer dimension.
    for (auto [index, stacked] : llvm::enumerate(repeat.getStacked())) {
      BlockArgument arg = body.getArgument(numCarried + index);
      tieDims({{arg, 0}, {stacked, 1}},
              cast<RankedTensorType>(arg.getType()).getRank());
    }
    for (unsigned i = numCarried; i < repeat->getNumResults(); ++i) {
      Value yielded = yield->getOperand(i);
      tieDims({{yielded, 0}, {repeat->getResult(i), 1}},
              cast<RankedTensorType>(yielded.getType()).getRank());
    }
  } else if (auto shard = dyn_cast<ShardOp>(op)) {
    entry.exclusiveAxes = false;
    tieDims({{shard.getInput(), 0}, {shard.getResult(), 0}},
            shard.getType().getRank(), /*operandIndex=*/0);
  } else if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) {
    ShardingRule rule = ruled.getShardingRule();
    SmallVector<FactorGroup> groups(rule.factors.size());
    auto addMembers = [&](ValueRange values, ArrayRef<DimFactors> dims,
                          bool isOperand) {
      for (auto [index, value] : llvm::enumerate(values))
        for (auto [dim, factors] : llvm::enumerate(dims[index])) {
          // Only a dimension's major factor carries its axes.
          if (factors.empty())
            continue;
          groups[factors.front()].members.push_back(
              {value, static_cast<int64_t>(dim),
               isOperand ? std::optional<unsigned>(index) : std::nullopt});
        }
    };
    addMembers(op->getOperands(), rule.operands, true);
    addMembers(op->getResults(), rule.results, false);
    for (auto [factor, group] : llvm::zip(rule.factors, groups)) {
      group.linear = factor.kind == FactorKind::LinearReduction;
      // No axis crosses a non-linear reduction (a softmax's, a norm's or an
      // attention's reduced dimension): the partitioner splits one only
      // where its input arrives split, and otherwise computes it whole, so
      // an axis from a consumer would only make the producer split there
      // and the input gathered back, or cost the split's all-reduces where
      // the whole op costs none. (Max and cross-entropy have no such group:
      // their reduced dimension is their input's alone.)
      if (factor.kind != FactorKind::NeedReplication &&
          factor.kind != FactorKind::NonLinearReduction &&
          factor.kind != FactorKind::GatherIndex && group.members.size() > 1)
        entry.groups.push_back(std::move(group));
    }
  } else {
    return;
  }
  auto [it, inserted] = groupIndex.try_emplace(op, opGroups.size());
  if (inserted)
    opGroups.push_back(std::move(entry));
  else
    opGroups[it->second] = std::move(entry);
}

/// Whether an axis of `axes` is used by a dimension of `value` other than
/// `dim`.
static bool usedElsewhere(ArrayRef<DimState> dims, int64_t dim,
                          StringAttr axis) {
  for (auto [index, other] : llvm::enumerate(dims))
    if (static_cast<int64_t>(index) != dim &&
        llvm::is_contained(other.axes, axis))
      return true;
  return false;
}

Propagator::Outcome Propagator::processGroup(OpGroups &groups,
                                             size_t groupIndex, int64_t round) {
  FactorGroup &group = groups.groups[groupIndex];
  // Candidates in order: highest priority first, closed before open.
  SmallVector<unsigned> order;
  for (auto [index, member] : llvm::enumerate(group.members)) {
    DimState &dim = dimOf(member);
    if ((!dim.axes.empty() || dim.closed) && dim.priority <= round)
      order.push_back(index);
  }
  if (order.empty())
    return Outcome::Unchanged;
  // Ties keep the members' order: the index decides last, so llvm::sort
  // is as stable as llvm::stable_sort, without the deprecation warning
  // that libstdc++ 12's version (get_temporary_buffer) gives under clang.
  llvm::sort(order, [&](unsigned a, unsigned b) {
    DimState &da = dimOf(group.members[a]), &db = dimOf(group.members[b]);
    if (da.priority != db.priority)
      return da.priority < db.priority;
    if (da.closed != db.closed)
      return da.closed;
    return a < b;
  });

  DimState target = dimOf(group.members[order.front()]);
  unsigned targetIndex = order.front();
  for (unsigned index : llvm::drop_begin(order)) {
    DimState &candidate = dimOf(group.members[index]);
    if (candidate.axes == target.axes) {
      target.closed |= candidate.closed;
      continue;
    }
    // Axes that extend others move no data when the member with fewer axes
    // uses the extra ones nowhere else: it keeps its piece by a local slice.
    // The longer wins unless a closed annotation of higher priority says
    // otherwise.
    auto slicesFreely = [&](unsigned member, ArrayRef<StringAttr> longer) {
      const Member &shorter = group.members[member];
      return llvm::none_of(longer, [&](StringAttr axis) {
        return usedElsewhere(states[shorter.value], shorter.dim, axis);
      });
    };
    if (isPrefix(target.axes, candidate.axes) &&
        (!target.closed || (target.priority == candidate.priority &&
                            slicesFreely(targetIndex, candidate.axes)))) {
      target = candidate;
      targetIndex = index;
      continue;
    }
    if (isPrefix(candidate.axes, target.axes) &&
        (!candidate.closed || slicesFreely(index, target.axes)))
      continue;
    // Two annotations disagree: reshard the operand that is cheaper to move.
    if (!target.origin || !candidate.origin || !groups.exclusiveAxes)
      continue;
    const Member &a = group.members[targetIndex];
    const Member &b = group.members[index];
    auto bytes = [](Value value) { return tensorBytes(value.getType()); };
    // A result annotation asking for an axis that the operand uses for
    // another factor of the op is met after the op, by resharding the result
    // (a reduce_scatter of a row-parallel product): moving the operand would
    // only move the clash to that other factor, and back again.
    auto claimedElsewhere = [&](const Member &operand,
                                ArrayRef<StringAttr> axes) {
      return llvm::any_of(axes, [&](StringAttr axis) {
        return usedElsewhere(states[operand.value], operand.dim, axis);
      });
    };
    if ((a.operandIndex && !b.operandIndex &&
         claimedElsewhere(a, candidate.axes)) ||
        (b.operandIndex && !a.operandIndex && claimedElsewhere(b, target.axes)))
      continue;
    // An operand is resharded at most once for its op: moving it again
    // could only swing it between two sides that each keep their axes (a
    // result given others by a later op, and another operand), forever.
    // The partitioner then moves what the op's layout needs.
    auto movedBefore = [&](const Member &member) {
      return resharded.contains({groups.op, *member.operandIndex});
    };
    bool moveA = a.operandIndex &&
                 (!b.operandIndex || (target.priority == candidate.priority &&
                                      bytes(a.value) < bytes(b.value)));
    std::string why = !a.operandIndex || !b.operandIndex
                          ? "the other is the op's result"
                      : target.priority != candidate.priority
                          ? "the other annotation has the higher priority"
                      : bytes(a.value) == bytes(b.value)
                          ? "both cost the same; the later operand moves"
                          : "it costs fewer bytes";
    if (moveA ? movedBefore(a) : b.operandIndex && movedBefore(b))
      continue;
    if (moveA)
      reshardOperand(groups.op, a, candidate, target, why);
    else if (b.operandIndex)
      reshardOperand(groups.op, b, target, candidate, why);
    else
      continue;
    return Outcome::Rebuilt;
  }

  // One axis never serves two factors of an op. When factors contend for
  // an axis, the one whose holder is bigger per device keeps it: resharding
  // the smaller moves fewer bytes (Megatron's sequence parallelism gathers
  // the activation, not the weight).
  // A value's bytes a device, were it split over its axes but `axis`.
  auto bytesBesides = [&](Value value, StringAttr axis) {
    double bytes = static_cast<double>(tensorBytes(value.getType()));
    for (const DimState &dim : states[value])
      for (StringAttr other : dim.axes)
        if (other != axis)
          bytes /= mesh.getAxisSize(other.getValue()).value_or(1);
    return bytes;
  };
  // An operand that several ops read is moved once for all of them (the
  // partitioner reshards a value once per layout), so each of its readers
  // weighs its share: Q, K and V projections of one sequence-split
  // activation gather it once rather than each its own weight.
  auto weight = [&](const FactorGroup &contender, StringAttr axis) {
    double best = 0;
    for (const Member &member : contender.members) {
      if (!llvm::is_contained(states[member.value][member.dim].axes, axis))
        continue;
      double bytes = bytesBesides(member.value, axis);
      if (member.operandIndex) {
        // Readers, not uses: `x @ x` reads x once.
        llvm::SmallPtrSet<Operation *, 4> readers(
            member.value.getUsers().begin(), member.value.getUsers().end());
        bytes /= std::max<size_t>(1, readers.size());
      }
      best = std::max(best, bytes);
    }
    return best;
  };
  // A contracted factor that keeps the axis from an operand of the other
  // factor (say a dp-split activation's batch) moves that operand and leaves
  // the op's result partial over the axis, and reducing it moves about the
  // result's bytes a device. Without counting that, a weight split over dp
  // for storage (ZeRO-3, FSDP) outweighed the activation and the batch gave
  // up dp: every product was all-reduced over dp, where gathering the weight
  // moves fewer bytes. (Where only the result holds the axis, as a
  // row-parallel product's requested split does, the reduction is the
  // reshard the result needs anyway: the plain weights decide.)
  auto heldByOperand = [&](const FactorGroup &contender, StringAttr axis) {
    return llvm::any_of(contender.members, [&](const Member &member) {
      return member.operandIndex &&
             llvm::is_contained(states[member.value][member.dim].axes, axis);
    });
  };
  auto reductionBytes = [&](StringAttr axis) {
    double best = 0;
    for (Value result : groups.op->getResults())
      if (isa<RankedTensorType>(result.getType()))
        best = std::max(best, bytesBesides(result, axis));
    return best;
  };
  auto lostContest = [&](StringAttr axis) {
    if (!groups.exclusiveAxes)
      return false;
    double own = weight(group, axis);
    for (auto [index, other] : llvm::enumerate(groups.groups)) {
      if (index == groupIndex)
        continue;
      double theirs = weight(other, axis);
      const FactorGroup &uncontracted = group.linear ? other : group;
      if (theirs == 0 || group.linear == other.linear ||
          !heldByOperand(uncontracted, axis)) {
        if (theirs > own || (theirs > 0 && theirs == own && index < groupIndex))
          return true;
        continue;
      }
      // What each side's losing costs: its holder moved, plus the
      // reduction of the result when the contracted side wins.
      double ownLoses = own + (other.linear ? reductionBytes(axis) : 0);
      double theirsLose = theirs + (group.linear ? reductionBytes(axis) : 0);
      if (ownLoses < theirsLose ||
          (ownLoses == theirsLose && index < groupIndex))
        return true;
    }
    return false;
  };

  // Keep the axes that fit: not manual, not used by another factor or by
  // another dimension of a member, and dividing every member.
  SmallVector<StringAttr, 2> axes;
  int64_t devices = 1;
  for (StringAttr axis : target.axes) {
    if (mesh.isManualAxis(axis.getValue()) || lostContest(axis))
      break;
    bool fits = true;
    int64_t next = devices * mesh.getAxisSize(axis.getValue()).value_or(1);
    for (const Member &member : group.members) {
      auto type = cast<RankedTensorType>(member.value.getType());
      if (type.getShape()[member.dim] % next != 0 ||
          usedElsewhere(states[member.value], member.dim, axis))
        fits = false;
    }
    if (!fits)
      break;
    axes.push_back(axis);
    devices = next;
  }

  bool changed = false;
  for (const Member &member : group.members) {
    DimState &dim = dimOf(member);
    if (dim.closed || dim.axes.size() >= axes.size() ||
        !isPrefix(dim.axes, axes))
      continue;
    dim.axes = axes;
    dim.priority = std::min(dim.priority, target.priority);
    dim.origin = target.origin;
    changed = true;
  }
  return changed ? Outcome::Changed : Outcome::Unchanged;
}

bool Propagator::processGroups(size_t opIndex, int64_t round) {
  bool changed = false;
  for (size_t i = 0; i < opGroups[opIndex].groups.size();) {
    Outcome outcome = processGroup(opGroups[opIndex], i++, round);
    if (outcome == Outcome::Rebuilt) {
      // The op has a new operand: rebuild its groups and its reshard's, and
      // go over the op again before the sweep moves on, so that its results
      // take the agreed axes before a later op can push others back into
      // them.
      for (Operation *op : llvm::make_early_inc_range(pendingRebuild))
        buildGroups(op);
      pendingRebuild.clear();
      changed = true;
      i = 0;
      continue;
    }
    changed |= outcome == Outcome::Changed;
  }
  return changed;
}

void Propagator::reshardOperand(Operation *op, Member loser, DimState winner,
                                DimState lost, StringRef why) {
  Value value = loser.value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<DimState> dims = states[value];
  DimState &dim = dims[loser.dim];
  dim = winner;
  dim.closed = true;
  MLIRContext *context = op->getContext();
  SmallVector<DimShardingAttr> attrs;
  for (auto [index, other] : llvm::enumerate(dims)) {
    if (static_cast<int64_t>(index) != loser.dim)
      llvm::erase_if(other.axes, [&](StringAttr axis) {
        return llvm::is_contained(winner.axes, axis);
      });
    other.closed = true;
    attrs.push_back(
        DimShardingAttr::get(context, other.axes, true, std::nullopt));
  }
  auto sharding =
      ShardingAttr::get(context, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                        attrs, {}, ReductionKind::Sum);

  OpBuilder builder(op);
  auto shard = ShardOp::create(builder, op->getLoc(), value, sharding);
  auto formatAxes = [](ArrayRef<StringAttr> axes) {
    std::string text = "{";
    for (auto [index, axis] : llvm::enumerate(axes))
      text += (index ? ", \"" : "\"") + axis.getValue().str() + "\"";
    return text + "}";
  };
  std::string winnerLoc = formatSourceLoc(cast<Location>(winner.origin));
  std::string loserLoc = formatSourceLoc(cast<Location>(lost.origin));
  shard->setAttr(
      LoomDialect::kReasonAttrName,
      DictionaryAttr::get(
          context, {NamedAttribute(StringAttr::get(context, "conflict"),
                                   StringAttr::get(context, winnerLoc + " vs " +
                                                                loserLoc))}));
  shard->emitRemark() << "reshard of " << describeValue(value) << " for "
                      << op->getName() << ": its dimension " << loser.dim
                      << " is " << formatAxes(lost.axes)
                      << " by the annotation at " << loserLoc << " but "
                      << formatAxes(winner.axes) << " by the annotation at "
                      << winnerLoc << "; moving " << describeValue(value)
                      << " (" << type.getNumElements() << " elements): " << why;
  op->setOperand(*loser.operandIndex, shard.getResult());
  resharded.insert({op, *loser.operandIndex});
  states[shard.getResult()] = dims;
  for (DimState &state : states[shard.getResult()])
    state.origin = op->getLoc();
  states[shard.getResult()][loser.dim].origin = winner.origin;
  pendingRebuild.push_back(shard);
  pendingRebuild.push_back(op);
}

void Propagator::writeBack() {
  MLIRContext *context = function.getContext();
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  auto toAttr = [&](ArrayRef<DimState> dims) {
    SmallVector<DimShardingAttr> attrs;
    for (const DimState &dim : dims)
      attrs.push_back(
          DimShardingAttr::get(context, dim.axes, true, std::nullopt));
    return ShardingAttr::get(context, meshRef, attrs, {}, ReductionKind::Sum);
  };
  function.walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (BlockArgument arg : region.getArguments())
        if (states.count(arg))
          setRecordedSharding(arg, toAttr(states[arg]));
    for (OpResult result : op->getResults())
      if (states.count(result))
        setRecordedSharding(result, toAttr(states[result]));
  });
}

LogicalResult Propagator::run() {
  // Fusion groups belong to the per-device plan: their bodies have no
  // sharding of their own (the only region with one is a loom.repeat's).
  WalkResult planned = function.walk([](FusedOp fused) {
    fused.emitError("loom-propagate-shardings runs on the global model, "
                    "before loom-fuse-elementwise makes loom.fused groups");
    return WalkResult::interrupt();
  });
  if (planned.wasInterrupted())
    return failure();
  initialize();
  // Model outputs are closed annotations: make them constraints on the
  // returned values so they propagate backwards.
  auto returnOp =
      cast<func::ReturnOp>(function.getBody().front().getTerminator());
  for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
    auto sharding = function.getResultAttrOfType<ShardingAttr>(
        index, LoomDialect::kShardingAttrName);
    if (!sharding || llvm::all_of(sharding.getDims(), [](DimShardingAttr dim) {
          return dim.getAxes().empty();
        }))
      continue;
    OpBuilder builder(returnOp);
    auto shard = ShardOp::create(builder, returnOp.getLoc(), operand, sharding);
    returnOp->setOperand(index, shard.getResult());
    addValue(shard.getResult(), sharding, returnOp.getLoc());
  }

  function.walk([&](Operation *op) { buildGroups(op); });
  llvm::sort(rounds);
  rounds.erase(llvm::unique(rounds), rounds.end());
  rounds.push_back(kNoPriority);
  constexpr int kMaxSweeps = 64;
  for (int64_t round : rounds) {
    for (int sweep = 0;; ++sweep) {
      if (sweep == kMaxSweeps)
        return function.emitError("sharding propagation did not converge in ")
               << kMaxSweeps << " sweeps";
      bool changed = false;
      for (size_t i = 0; i < opGroups.size(); ++i)
        changed |= processGroups(i, round);
      for (size_t i = opGroups.size(); i-- > 0;)
        changed |= processGroups(i, round);
      if (!changed)
        break;
    }
  }
  writeBack();
  return success();
}

namespace {
struct PropagateShardingsPass
    : public loom::impl::LoomPropagateShardingsBase<PropagateShardingsPass> {
  using LoomPropagateShardingsBase::LoomPropagateShardingsBase;

  void runOnOperation() override {
    LogicalResult result = forEachGlobalModel(
        getOperation(), "sharding propagation",
        [&](Operation *function, MeshOp mesh) {
          ++numFunctions;
          return Propagator(cast<func::FuncOp>(function), mesh).run();
        });
    if (failed(result))
      signalPassFailure();
  }
};
} // namespace
