//===- Partition.cpp - The program each device runs ----------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// Rewrites a sharded model in place, op by op in program order. Every value
// has a *layout*: the axes each dimension is split over plus the axes over
// which it is still partial (a ShardingAttr with closed dimensions). For
// each op the partitioner picks the axes of every factor of its rule (from
// the result's recorded sharding, then from the operands for factors that
// only operands have), reshards the operands to the layouts those axes
// imply, and gives the results per-device types. Collectives go right after
// the value they move and are shared by every consumer that needs the same
// layout, so a value used inside a `loom.repeat` body but defined outside
// is moved once, and a per-layer slice is moved inside the body.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/ShardingRule.h"
#include "dialects/loom/IR/StableValueMap.h"
#include "dialects/loom/Transforms/Passes.h"
#include "dialects/loom/Transforms/ReshardPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace loom {
#define GEN_PASS_DEF_LOOMPARTITION
#include "dialects/loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

using Axes = SmallVector<StringAttr, 2>;

/// How a partial operand may flow into an op.
enum class Linearity {
  /// Not linear: partial operands are reduced first.
  None,
  /// Linear in each operand alike (add, sub): equally partial operands
  /// give an equally partial result.
  Sum,
  /// Linear in one operand when the others are not partial (mul, matmul,
  /// einsum; div in its numerator).
  Product,
  /// One operand, linear (neg, transpose, reshape, sum, mean).
  Unary,
};

Linearity linearityOf(Operation *op) {
  // Integer division truncates: (a + b) / 3 is not a / 3 + b / 3.
  if (isa<DivOp>(op) &&
      isa<IntegerType>(getElementTypeOrSelf(op->getResult(0).getType())))
    return Linearity::None;
  if (isa<AddOp, SubOp>(op))
    return Linearity::Sum;
  if (isa<MulOp, MatmulOp, EinsumOp, DivOp>(op))
    return Linearity::Product;
  if (isa<NegOp, TransposeOp, ReshapeOp, SumOp, MeanOp>(op))
    return Linearity::Unary;
  return Linearity::None;
}

/// Whether a partial sum's terms may each be multiplied (or, with
/// `divisor`, divided) by `factor` instead of the sum: IEEE arithmetic does
/// not distribute over a sum where the factor is infinite or NaN, or a
/// divisor is zero ((a + b) / 0 is one infinity, a / 0 + b / 0 may be NaN),
/// so only a constant whose every element is finite (and not zero, as a
/// divisor) qualifies; a product by any other value reduces the sum first
/// (docs/partitioning.md 3.3). The terms' last bits may still differ, as
/// they do when a sum's terms are added in another order. Integer products
/// wrap, and wrapping arithmetic distributes exactly.
bool distributesOver(Value factor, bool divisor) {
  if (isa<IntegerType>(getElementTypeOrSelf(factor.getType())))
    return true;
  auto constant = factor.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!elements || !isa<FloatType>(elements.getElementType()))
    return false;
  return llvm::all_of(elements.getValues<APFloat>(), [&](const APFloat &x) {
    return x.isFinite() && !(divisor && x.isZero());
  });
}

/// A softmax or a norm: split along a reduced dimension, it all-reduces its
/// rows' statistics (Partitioner::splitNormalization).
bool normalisesRows(Operation *op) {
  return isa<SoftmaxOp, LayerNormOp, RMSNormOp>(op);
}

/// Whether the partitioner can split `op` along a factor of `kind`; it
/// replicates the others.
bool canSplit(Operation *op, FactorKind kind) {
  switch (kind) {
  case FactorKind::PassThrough:
  case FactorKind::LinearReduction:
    return !isa<ConstantOp>(op);
  case FactorKind::NonLinearReduction:
    return isa<MaxOp, CrossEntropyOp>(op) || normalisesRows(op);
  case FactorKind::GatherIndex:
    return isa<EmbeddingOp>(op);
  case FactorKind::NeedReplication:
    return false;
  }
  llvm_unreachable("unknown factor kind");
}

struct Layout {
  SmallVector<Axes> dims;
  Axes partial;
  ReductionKind partialKind = ReductionKind::Sum;
};

class Partitioner {
public:
  Partitioner(func::FuncOp function, MeshOp mesh, size_t searchBudget)
      : function(function), mesh(mesh),
        meshRef(FlatSymbolRefAttr::get(mesh.getSymNameAttr())),
        searchBudget(searchBudget) {}

  LogicalResult run();

private:
  LogicalResult partitionBlock(Block &block);
  LogicalResult partitionOp(Operation *op);
  LogicalResult partitionRepeat(RepeatOp repeat);
  LogicalResult partitionRuled(Operation *op, const ShardingRule &rule);
  LogicalResult splitCrossEntropy(CrossEntropyOp op, const Axes &vocab,
                                  const Axes &batch);
  LogicalResult splitNormalization(Operation *op, const Axes &axes);

  /// `value` (already per device) moved to layout `target`, or failure when
  /// that needs a collective over a manual axis.
  FailureOr<Value> reshard(Value value, const Layout &target,
                           Operation *consumer);

  ShardingAttr toAttr(const Layout &layout);
  Layout fromAttr(ShardingAttr sharding);
  /// The layout propagation recorded for `value`, or an error at `at`.
  FailureOr<Layout> recordedLayout(Value value, Operation *at);
  void setLayout(Value value, RankedTensorType global, Layout layout) {
    globalTypes[value] = global;
    layouts[value] = std::move(layout);
    value.setType(getLocalType(global, toAttr(layouts[value]), mesh));
  }
  RankedTensorType localType(Value value, const Layout &layout) {
    return getLocalType(globalTypes[value], toAttr(layout), mesh);
  }
  DictionaryAttr reasonFor(Value value, const Layout &from, const Layout &to,
                           Operation *consumer);
  ArrayAttr axesAttr(ArrayRef<StringAttr> axes) {
    SmallVector<Attribute> attrs(axes.begin(), axes.end());
    return ArrayAttr::get(function.getContext(), attrs);
  }
  Value scale(OpBuilder &builder, Location loc, Value value, double factor);
  /// Records `collective` (the partitioner's own): why it exists, and its
  /// result's global type and layout. Returns the result.
  Value record(Operation *collective, DictionaryAttr reason,
               RankedTensorType global, const Layout &layout);
  /// Finishes a reduction split over `axes`: all-reduces the local `piece`
  /// with `kind` into a value laid out as `whole`. `source` is the operand
  /// of `op` whose split forced it; `what` names the value.
  Value finishSplit(OpBuilder &builder, Value piece, Value source,
                    const Layout &whole, ArrayRef<StringAttr> axes,
                    ReductionKind kind, Operation *op, StringRef what);
  /// The global shape of a per-device `type` laid out as `layout`.
  SmallVector<int64_t> getGlobalShape(RankedTensorType type,
                                      const Layout &layout) {
    SmallVector<int64_t> shape(type.getShape());
    for (auto [size, axes] : llvm::zip(shape, layout.dims))
      size *= countDevices(mesh, axes, /*countManual=*/false);
    return shape;
  }

  func::FuncOp function;
  MeshOp mesh;
  FlatSymbolRefAttr meshRef;
  StableValueMap<Layout> layouts;
  StableValueMap<RankedTensorType> globalTypes;
  /// Every op's sharding rule, read from the global program.
  llvm::DenseMap<Operation *, ShardingRule> rules;
  /// Names for values the partitioner makes, for `loom.reason`.
  llvm::DenseMap<Value, std::string> valueNames;
  llvm::DenseMap<std::pair<Value, Attribute>, Value> reshardCache;
  /// Plans by problem (shape, layouts, manual axes): the layers of a model
  /// ask for the same reshards many times, and a large search is slow.
  llvm::StringMap<SmallVector<ReshardStep>> plans;
  size_t searchBudget;
  int64_t numCollectives = 0;

public:
  int64_t getNumCollectives() const { return numCollectives; }
};

} // namespace

ShardingAttr Partitioner::toAttr(const Layout &layout) {
  MLIRContext *context = function.getContext();
  SmallVector<DimShardingAttr> dims;
  for (const Axes &axes : layout.dims)
    dims.push_back(DimShardingAttr::get(context, axes, true, std::nullopt));
  return ShardingAttr::get(context, meshRef, dims, layout.partial,
                           layout.partialKind);
}

FailureOr<Layout> Partitioner::recordedLayout(Value value, Operation *at) {
  if (ShardingAttr sharding = getRecordedSharding(value))
    return fromAttr(sharding);
  return at->emitError() << describeValue(value)
                         << " has no sharding; run loom-propagate-shardings "
                            "first";
}

Layout Partitioner::fromAttr(ShardingAttr sharding) {
  Layout layout;
  for (DimShardingAttr dim : sharding.getDims())
    layout.dims.emplace_back(dim.getAxes().begin(), dim.getAxes().end());
  layout.partial.assign(sharding.getPartialAxes().begin(),
                        sharding.getPartialAxes().end());
  return layout;
}

/// `loc` without the user's variable name, for ops the partitioner adds:
/// a collective in front of `%x = ...` does not compute `%x`.
static Location unnamed(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getChildLoc();
  return loc;
}

DictionaryAttr Partitioner::reasonFor(Value value, const Layout &from,
                                      const Layout &to, Operation *consumer) {
  MLIRContext *context = function.getContext();
  auto str = [&](StringRef text) { return StringAttr::get(context, text); };
  std::string name = valueNames.lookup(value);
  if (name.empty())
    name = describeValue(value);
  std::string producer = describeProducer(value);
  SmallVector<NamedAttribute> entries = {
      {str("value"), str(name)},
      {str("from"), toAttr(from)},
      {str("to"), toAttr(to)},
      {str("producer"), str(producer)},
      {str("consumer"), str(describeOp(consumer))}};
  if (auto reason =
          consumer->getAttrOfType<DictionaryAttr>(LoomDialect::kReasonAttrName))
    if (Attribute conflict = reason.get("conflict"))
      entries.push_back({str("conflict"), conflict});
  return DictionaryAttr::get(context, entries);
}

FailureOr<Value> Partitioner::reshard(Value value, const Layout &target,
                                      Operation *consumer) {
  const Layout &actual = layouts[value];
  if (actual.dims == target.dims && actual.partial == target.partial)
    return value;
  ShardingAttr targetAttr = toAttr(target);
  auto key = std::make_pair(value, Attribute(targetAttr));
  if (auto it = reshardCache.find(key); it != reshardCache.end())
    return it->second;

  for (const Axes &axes : target.dims)
    for (StringAttr axis : axes)
      if (mesh.isManualAxis(axis.getValue()))
        return consumer->emitError()
               << "cannot move " << describeValue(value)
               << " to a layout split over the manual axis '" << axis.getValue()
               << "'; only the pipeline schedule uses it";

  OpBuilder builder(function.getContext());
  if (Operation *def = value.getDefiningOp())
    builder.setInsertionPointAfter(def);
  else
    builder.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
  Location loc = unnamed(consumer->getLoc());
  DictionaryAttr reason = reasonFor(value, actual, target, consumer);
  RankedTensorType global = globalTypes[value];
  Layout current = actual;
  Value result = value;
  auto emit = [&](Operation *collective) -> LogicalResult {
    auto interface = cast<CollectiveOpInterface>(collective);
    for (StringRef axis : interface.getGroupAxes())
      if (mesh.isManualAxis(axis)) {
        collective->erase();
        return consumer->emitError()
               << "moving " << describeValue(value) << " from "
               << formatDims(toAttr(actual)) << " to " << formatDims(targetAttr)
               << " needs a collective over the manual axis '" << axis
               << "', which only the pipeline schedule may use";
      }
    result = record(collective, reason, global, current);
    return success();
  };

  // Partial axes the target does not keep.
  Axes reduce;
  for (StringAttr axis : current.partial)
    if (!llvm::is_contained(target.partial, axis))
      reduce.push_back(axis);
  ReductionKindAttr partialKind =
      ReductionKindAttr::get(builder.getContext(), current.partialKind);

  // A layout with as many blocks on each dimension as the current one:
  // each device takes the block that its coordinates index in `layout`,
  // from the device whose coordinates index that block now. The group is
  // the axes of the dimensions that change; an axis free before (or after)
  // takes the coordinates of those free after (or before).
  auto permute = [&](ArrayRef<Axes> layout) -> LogicalResult {
    auto sizeOf = [&](StringAttr axis) {
      return mesh.getAxisSize(axis.getValue()).value_or(1);
    };
    // Axes of size 1 index no block.
    auto sized = [&](ArrayRef<StringAttr> axes) {
      Axes kept;
      for (StringAttr axis : axes)
        if (sizeOf(axis) > 1)
          kept.push_back(axis);
      return kept;
    };
    Axes group, heldBefore, heldAfter;
    SmallVector<int64_t> changed;
    for (auto [dim, axes] : llvm::enumerate(layout))
      if (sized(current.dims[dim]) != sized(axes))
        changed.push_back(int64_t(dim));
    for (int64_t dim : changed) {
      llvm::append_range(heldBefore, sized(current.dims[dim]));
      llvm::append_range(heldAfter, sized(layout[dim]));
    }
    group = heldBefore;
    for (StringAttr axis : heldAfter)
      if (!llvm::is_contained(group, axis))
        group.push_back(axis);
    Axes freeBefore, freeAfter;
    for (StringAttr axis : group) {
      if (!llvm::is_contained(heldBefore, axis))
        freeBefore.push_back(axis);
      if (!llvm::is_contained(heldAfter, axis))
        freeAfter.push_back(axis);
    }
    // Row-major index over `axes` of `coordinate`, and the reverse.
    using Coordinates = llvm::DenseMap<StringAttr, int64_t>;
    auto indexOver = [&](ArrayRef<StringAttr> axes, Coordinates &coordinate) {
      int64_t index = 0;
      for (StringAttr axis : axes)
        index = index * sizeOf(axis) + coordinate[axis];
      return index;
    };
    auto setOver = [&](ArrayRef<StringAttr> axes, int64_t index,
                       Coordinates &coordinate) {
      for (size_t i = axes.size(); i-- > 0;) {
        coordinate[axes[i]] = index % sizeOf(axes[i]);
        index /= sizeOf(axes[i]);
      }
    };
    SmallVector<int64_t> pairs;
    bool stays = true;
    for (int64_t rank = 0, size = countDevices(mesh, group); rank < size;
         ++rank) {
      Coordinates at, source;
      setOver(group, rank, at);
      for (int64_t dim : changed)
        setOver(sized(current.dims[dim]), indexOver(sized(layout[dim]), at),
                source);
      setOver(freeBefore, indexOver(freeAfter, at), source);
      pairs.push_back(indexOver(group, source));
      pairs.push_back(rank);
      stays &= pairs[pairs.size() - 2] == rank;
    }
    for (auto [dim, axes] : llvm::enumerate(layout))
      current.dims[dim] = axes;
    if (stays)
      return success();
    return emit(CollectivePermuteOp::create(
        builder, loc, localType(value, current), result, meshRef,
        axesAttr(group), builder.getDenseI64ArrayAttr(pairs)));
  };
  // The last axes of `from` to the end of `to`, in the order `order`.
  auto handOver = [&](int64_t from, int64_t to, const Axes &order) {
    Axes &source = current.dims[from];
    Axes moved(source.end() - order.size(), source.end());
    source.resize(source.size() - order.size());
    current.dims[to].append(order.begin(), order.end());
    ArrayAttr splitAxes = order == moved ? ArrayAttr() : axesAttr(order);
    return emit(AllToAllOp::create(builder, loc, localType(value, current),
                                   result, meshRef, axesAttr(moved), splitAxes,
                                   builder.getI64IntegerAttr(to),
                                   builder.getI64IntegerAttr(from)));
  };
  // The cheapest collectives to the target (ReshardPlan.h), as ops.
  SmallVector<StringAttr> axisNames;
  auto indexOf = [&](StringAttr axis) {
    auto *found = llvm::find(axisNames, axis);
    if (found != axisNames.end())
      return int(found - axisNames.begin());
    axisNames.push_back(axis);
    return int(axisNames.size() - 1);
  };
  AxisLists from, to;
  for (const Axes &axes : current.dims)
    from.emplace_back(llvm::map_range(axes, indexOf));
  for (const Axes &axes : target.dims)
    to.emplace_back(llvm::map_range(axes, indexOf));
  SmallVector<int, 4> reduceIndices(llvm::map_range(reduce, indexOf));
  SmallVector<int64_t> axisSizes;
  SmallVector<bool> manual;
  for (StringAttr axis : axisNames) {
    axisSizes.push_back(mesh.getAxisSize(axis.getValue()).value_or(1));
    manual.push_back(mesh.isManualAxis(axis.getValue()));
  }
  std::string problemKey;
  {
    llvm::raw_string_ostream os(problemKey);
    llvm::interleaveComma(global.getShape(), os);
    for (const AxisLists *layout : {&from, &to})
      for (const auto &axes : *layout) {
        os << "|";
        llvm::interleaveComma(axes, os);
      }
    for (auto [size, isManual] : llvm::zip(axisSizes, manual))
      os << "|" << size << (isManual ? "m" : "");
    os << "|partial ";
    llvm::interleaveComma(reduceIndices, os);
  }
  auto [cached, isNew] = plans.try_emplace(problemKey);
  if (isNew) {
    // Beyond the search's budget (many axes on many dimensions), or with no
    // way around a manual axis, the plain rules; emit() then reports a
    // collective over a manual axis.
    ReshardProblem problem{global.getShape(), axisSizes,     manual,
                           std::move(from),   std::move(to), reduceIndices};
    std::optional<SmallVector<ReshardStep>> searched =
        planReshard(problem, searchBudget);
    cached->second =
        searched ? std::move(*searched) : gatherAndSlicePlan(problem);
  }
  auto names = [&](ArrayRef<int> axes) {
    return Axes(llvm::map_range(
        axes, [&](int axis) { return axisNames[size_t(axis)]; }));
  };
  for (const ReshardStep &step : cached->second) {
    Axes axes = names(step.axes);
    // The dimension the step changes (none for an all_reduce).
    auto have = [&]() -> Axes & { return current.dims[step.dim]; };
    LogicalResult emitted = success();
    switch (step.kind) {
    case ReshardStep::Kind::Permute: {
      SmallVector<Axes> layout(llvm::map_range(step.layout, names));
      emitted = permute(layout);
      break;
    }
    case ReshardStep::Kind::Gather:
      have().resize(have().size() - axes.size());
      emitted = emit(AllGatherOp::create(
          builder, loc, localType(value, current), result, meshRef,
          axesAttr(axes), builder.getI64IntegerAttr(step.dim)));
      break;
    case ReshardStep::Kind::Slice:
      have().append(axes.begin(), axes.end());
      emitted = emit(AllSliceOp::create(builder, loc, localType(value, current),
                                        result, meshRef, axesAttr(axes),
                                        builder.getI64IntegerAttr(step.dim)));
      break;
    case ReshardStep::Kind::AllToAll:
      emitted = handOver(step.from, step.dim,
                         step.order.empty() ? axes : names(step.order));
      break;
    case ReshardStep::Kind::ReduceScatter:
      have().append(axes.begin(), axes.end());
      llvm::erase_if(current.partial, [&](StringAttr axis) {
        return llvm::is_contained(axes, axis);
      });
      emitted = emit(ReduceScatterOp::create(
          builder, loc, localType(value, current), result, meshRef,
          axesAttr(axes), builder.getI64IntegerAttr(step.dim), partialKind));
      break;
    case ReshardStep::Kind::AllReduce:
      llvm::erase_if(current.partial, [&](StringAttr axis) {
        return llvm::is_contained(axes, axis);
      });
      emitted = emit(AllReduceOp::create(builder, loc,
                                         localType(value, current), result,
                                         meshRef, axesAttr(axes), partialKind));
      break;
    }
    if (failed(emitted))
      return failure();
  }
  reshardCache[key] = result;
  return result;
}

Value Partitioner::record(Operation *collective, DictionaryAttr reason,
                          RankedTensorType global, const Layout &layout) {
  collective->setAttr(LoomDialect::kReasonAttrName, reason);
  Value result = collective->getResult(0);
  globalTypes[result] = global;
  layouts[result] = layout;
  ++numCollectives;
  return result;
}

Value Partitioner::finishSplit(OpBuilder &builder, Value piece, Value source,
                               const Layout &whole, ArrayRef<StringAttr> axes,
                               ReductionKind kind, Operation *op,
                               StringRef what) {
  auto reduce = AllReduceOp::create(
      builder, unnamed(op->getLoc()), piece.getType(), piece, meshRef,
      axesAttr(axes), ReductionKindAttr::get(builder.getContext(), kind));
  Layout pieces = whole;
  pieces.partial.assign(axes.begin(), axes.end());
  pieces.partialKind = kind;
  NamedAttrList reason(reasonFor(source, pieces, whole, op));
  reason.set("value", builder.getStringAttr(what));
  RankedTensorType global = RankedTensorType::get(
      getGlobalShape(cast<RankedTensorType>(piece.getType()), whole),
      cast<RankedTensorType>(piece.getType()).getElementType());
  return record(reduce, reason.getDictionary(builder.getContext()), global,
                whole);
}

/// A rank-0 float constant of type `elementType`.
static Value scalarConstant(OpBuilder &builder, Location loc, Type elementType,
                            double value) {
  auto scalarType = RankedTensorType::get({}, elementType);
  return ConstantOp::create(
      builder, loc, scalarType,
      DenseElementsAttr::get(
          scalarType, builder.getFloatAttr(elementType, value).getValue()));
}

Value Partitioner::scale(OpBuilder &builder, Location loc, Value value,
                         double factor) {
  auto type = cast<RankedTensorType>(value.getType());
  return MulOp::create(
      builder, loc, type, value,
      scalarConstant(builder, loc, type.getElementType(), factor));
}

LogicalResult Partitioner::partitionRuled(Operation *op,
                                          const ShardingRule &rule) {
  size_t numFactors = rule.factors.size();
  SmallVector<Axes> assigned(numFactors);
  SmallVector<bool> blocked(numFactors, false);
  for (auto [index, factor] : llvm::enumerate(rule.factors))
    blocked[index] = !canSplit(op, factor.kind);
  // Only a dimension's major factor is split: the minor ones replicate.
  auto blockMinor = [&](ArrayRef<DimFactors> side) {
    for (const DimFactors &dims : side)
      for (const auto &factors : dims)
        for (size_t i = 1; i < factors.size(); ++i)
          blocked[factors[i]] = true;
  };
  blockMinor(rule.operands);
  blockMinor(rule.results);

  llvm::SmallDenseSet<StringAttr> used;
  auto take = [&](int64_t factor, ArrayRef<StringAttr> axes) {
    if (blocked[factor] || !assigned[factor].empty())
      return;
    int64_t devices = 1;
    for (StringAttr axis : axes) {
      int64_t next = devices * mesh.getAxisSize(axis.getValue()).value_or(1);
      if (used.contains(axis) || mesh.isManualAxis(axis.getValue()) ||
          rule.factors[factor].size % next != 0)
        break;
      assigned[factor].push_back(axis);
      devices = next;
    }
    for (StringAttr axis : assigned[factor])
      used.insert(axis);
  };
  // A softmax or a norm splits its reduced dimensions only where its input
  // arrives split there and its consumers want the result split alike, and
  // where all-reducing its rows' statistics (two floats a row, one for an
  // RMS norm) moves less than gathering the input. Otherwise it is
  // computed whole: a whole input costs nothing, a result wanted whole
  // would be gathered anyway, and a scale split only for storage is
  // gathered rather than the input sliced.
  if (normalisesRows(op)) {
    Value input = op->getOperand(0);
    ShardingAttr recorded = getRecordedSharding(op->getResult(0));
    auto inputType = cast<RankedTensorType>(input.getType());
    SmallVector<std::pair<int64_t, int64_t>> reducedDims;
    int64_t rowLength = 1, devices = 1;
    bool split = false, wanted = static_cast<bool>(recorded);
    for (auto [dim, factors] : llvm::enumerate(rule.operands[0])) {
      if (factors.empty() ||
          rule.factors[factors.front()].kind != FactorKind::NonLinearReduction)
        continue;
      reducedDims.push_back({dim, factors.front()});
      const Axes &axes = layouts[input].dims[dim];
      rowLength *= inputType.getDimSize(dim);
      devices *= countDevices(mesh, axes);
      split |= !axes.empty();
      wanted = wanted && llvm::equal(axes, recorded.getDims()[dim].getAxes());
    }
    // An input sliced here from a whole value is whole again for free (the
    // gather folds into the slice).
    auto slice = input.getDefiningOp<AllSliceOp>();
    bool wholeIsFree =
        slice && llvm::is_contained(llvm::make_first_range(reducedDims),
                                    static_cast<int64_t>(slice.getDim()));
    int64_t allReduces = isa<RMSNormOp>(op) ? 1 : 2;
    bool splitRows =
        split && wanted && !wholeIsFree && 2 * allReduces < devices * rowLength;
    for (auto [dim, factor] : reducedDims) {
      if (splitRows)
        take(factor, layouts[input].dims[dim]);
      else
        blocked[factor] = true;
    }
  }
  // A reduced factor that every operand already splits alike stays split:
  // the result is partial, and reducing it (or reduce-scattering it into
  // the layout a consumer wants) moves less than gathering the operands.
  for (auto [factor, info] : llvm::enumerate(rule.factors)) {
    if (info.kind == FactorKind::PassThrough || blocked[factor])
      continue;
    std::optional<Axes> common;
    bool agree = true;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      for (auto [dim, factors] : llvm::enumerate(rule.operands[index])) {
        if (factors.empty() || factors.front() != static_cast<int64_t>(factor))
          continue;
        const Axes &axes = layouts[operand].dims[dim];
        if (!common)
          common = axes;
        agree &= *common == axes;
      }
    if (agree && common && !common->empty())
      take(factor, *common);
  }
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    if (ShardingAttr recorded = getRecordedSharding(result))
      for (auto [dim, factors] : llvm::enumerate(rule.results[index]))
        if (!factors.empty())
          take(factors.front(), recorded.getDims()[dim].getAxes());
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    for (auto [dim, factors] : llvm::enumerate(rule.operands[index]))
      if (!factors.empty() &&
          rule.factors[factors.front()].kind != FactorKind::PassThrough)
        take(factors.front(), layouts[operand].dims[dim]);

  auto layoutOf = [&](const DimFactors &dims) {
    Layout layout;
    for (const auto &factors : dims)
      layout.dims.push_back(factors.empty() || blocked[factors.front()]
                                ? Axes()
                                : assigned[factors.front()]);
    return layout;
  };

  // Which operands stay partial.
  SmallVector<Axes> partials;
  for (Value operand : op->getOperands())
    partials.push_back(layouts[operand].partial);
  auto clashes = [&](ArrayRef<StringAttr> partial) {
    return llvm::any_of(partial,
                        [&](StringAttr axis) { return used.contains(axis); });
  };
  SmallVector<bool> keep(op->getNumOperands(), false);
  unsigned numPartial = llvm::count_if(
      partials, [](const Axes &partial) { return !partial.empty(); });
  switch (linearityOf(op)) {
  case Linearity::None:
    break;
  case Linearity::Sum:
    if (numPartial == op->getNumOperands() && llvm::all_equal(partials) &&
        !clashes(partials.front()))
      keep.assign(op->getNumOperands(), true);
    break;
  case Linearity::Product:
    if (numPartial == 1) {
      unsigned index =
          llvm::find_if(partials,
                        [](const Axes &partial) { return !partial.empty(); }) -
          partials.begin();
      bool divides = isa<DivOp>(op);
      keep[index] =
          !clashes(partials[index]) && !(divides && index) &&
          llvm::all_of(llvm::enumerate(op->getOperands()), [&](auto other) {
            return other.index() == index ||
                   distributesOver(other.value(), divides);
          });
    }
    break;
  case Linearity::Unary:
    keep[0] = !partials.front().empty() && !clashes(partials.front());
    break;
  }

  Axes resultPartial;
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    Layout target = layoutOf(rule.operands[index]);
    if (keep[index]) {
      target.partial = partials[index];
      for (StringAttr axis : partials[index])
        if (!llvm::is_contained(resultPartial, axis))
          resultPartial.push_back(axis);
    }
    FailureOr<Value> moved = reshard(operand, target, op);
    if (failed(moved))
      return failure();
    op->setOperand(index, *moved);
  }
  Axes reduced, vocab, linear;
  for (auto [index, factor] : llvm::enumerate(rule.factors)) {
    Axes &axes = assigned[index];
    if (factor.kind == FactorKind::LinearReduction)
      linear.append(axes.begin(), axes.end());
    else if (factor.kind == FactorKind::GatherIndex ||
             factor.kind == FactorKind::NonLinearReduction)
      vocab.append(axes.begin(), axes.end());
  }

  if (auto crossEntropy = dyn_cast<CrossEntropyOp>(op)) {
    if (!vocab.empty() || !linear.empty())
      return splitCrossEntropy(crossEntropy, vocab, linear);
  }
  if (normalisesRows(op) && !vocab.empty())
    return splitNormalization(op, vocab);

  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    Layout layout = layoutOf(rule.results[index]);
    layout.partial = resultPartial;
    if (!isa<MaxOp>(op))
      layout.partial.append(linear.begin(), linear.end());
    if (isa<EmbeddingOp>(op))
      layout.partial.append(vocab.begin(), vocab.end());
    setLayout(result, cast<RankedTensorType>(result.getType()), layout);
  }

  OpBuilder builder(op->getContext());
  builder.setInsertionPointAfter(op);
  if (auto slice = dyn_cast<SliceOp>(op)) {
    // Dimensions taken whole keep their (now per-device) whole extent.
    SmallVector<int64_t> limit(slice.getLimit());
    for (auto [index, size] :
         llvm::enumerate(slice.getInput().getType().getShape()))
      if (slice.getStart()[index] == 0 &&
          limit[index] == globalTypes[slice.getInput()].getShape()[index])
        limit[index] = size;
    slice.setLimit(limit);
  } else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    if (!vocab.empty()) {
      embedding.setMeshAttr(meshRef);
      embedding.setVocabAxesAttr(axesAttr(vocab));
    }
  } else if (auto mean = dyn_cast<MeanOp>(op)) {
    // Each device's mean is over its piece: scale to a share of the global
    // mean, so the pieces add up.
    int64_t devices = countDevices(mesh, linear);
    if (devices > 1) {
      Value result = mean.getResult();
      Value scaled = scale(builder, op->getLoc(), result, 1.0 / devices);
      result.replaceAllUsesExcept(scaled, scaled.getDefiningOp());
      valueNames[scaled] = "this device's share of the mean";
      globalTypes[scaled] = globalTypes[result];
      layouts[scaled] = layouts[result];
    }
  } else if (auto max = dyn_cast<MaxOp>(op)) {
    if (!vocab.empty()) {
      Value result = max.getResult();
      Value reduced =
          finishSplit(builder, result, max.getInput(), layouts[result], vocab,
                      ReductionKind::Max, op, describeValue(result));
      result.replaceAllUsesExcept(reduced, reduced.getDefiningOp());
    }
  }
  return success();
}

LogicalResult Partitioner::splitNormalization(Operation *op, const Axes &axes) {
  // The op in f32 over the local piece of each row, its rows' statistics
  // all-reduced over `axes`: a softmax's max and sum of exp, a layer norm's
  // sum and sum of squared deviations, an RMS norm's sum of squares. The
  // formulas are docs/language.md's; only the sums' order differs.
  OpBuilder builder(op);
  Location loc = op->getLoc();
  Type f32 = builder.getF32Type();
  Value input = op->getOperand(0);
  auto type = cast<RankedTensorType>(input.getType());
  auto wide = type.clone(f32);
  auto widen = [&](Value value) -> Value {
    auto valueType = cast<RankedTensorType>(value.getType());
    if (valueType.getElementType() == f32)
      return value;
    return CastOp::create(builder, loc, valueType.clone(f32), value);
  };
  SmallVector<int64_t> reduced;
  if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
    reduced.push_back(softmax.getDim());
  } else {
    int64_t normalized =
        cast<RankedTensorType>(op->getOperand(1).getType()).getRank();
    for (int64_t dim = type.getRank() - normalized; dim < type.getRank(); ++dim)
      reduced.push_back(dim);
  }
  SmallVector<int64_t> statShape(type.getShape());
  int64_t count = 1;
  Layout rows = layouts[input];
  for (int64_t dim : reduced) {
    statShape[dim] = 1;
    count *= globalTypes[input].getShape()[dim];
    rows.dims[dim].clear();
  }
  auto statType = RankedTensorType::get(statShape, f32);
  DenseI64ArrayAttr dims = builder.getDenseI64ArrayAttr(reduced);
  auto rowSum = [&](Value value, StringRef what) {
    Value piece = SumOp::create(builder, loc, statType, value, dims,
                                /*keepdim=*/true);
    return finishSplit(builder, piece, input, rows, axes, ReductionKind::Sum,
                       op, what);
  };

  Value x = widen(input), result;
  if (isa<SoftmaxOp>(op)) {
    Value pieceMax =
        MaxOp::create(builder, loc, statType, x, dims, /*keepdim=*/true);
    Value max = finishSplit(builder, pieceMax, input, rows, axes,
                            ReductionKind::Max, op, "the softmax's row maxima");
    Value shifted = SubOp::create(builder, loc, wide, x, max);
    Value exps = ExpOp::create(builder, loc, wide, shifted);
    Value sum = rowSum(exps, "the softmax's row sums of exp");
    result = DivOp::create(builder, loc, wide, exps, sum);
  } else {
    double eps = isa<LayerNormOp>(op)
                     ? cast<LayerNormOp>(op).getEps().convertToDouble()
                     : cast<RMSNormOp>(op).getEps().convertToDouble();
    Value centred = x;
    if (isa<LayerNormOp>(op)) {
      Value mean = scale(builder, loc, rowSum(x, "the layer norm's row sums"),
                         1.0 / count);
      centred = SubOp::create(builder, loc, wide, x, mean);
    }
    Value squares = MulOp::create(builder, loc, wide, centred, centred);
    Value variance = scale(
        builder, loc,
        rowSum(squares, isa<LayerNormOp>(op)
                            ? "the layer norm's row sums of squared deviations"
                            : "the RMS norm's row sums of squares"),
        1.0 / count);
    Value shiftedVariance =
        AddOp::create(builder, loc, statType, variance,
                      scalarConstant(builder, loc, f32, eps));
    Value deviation = SqrtOp::create(builder, loc, statType, shiftedVariance);
    result = DivOp::create(builder, loc, wide, centred, deviation);
    result =
        MulOp::create(builder, loc, wide, result, widen(op->getOperand(1)));
    if (auto layerNorm = dyn_cast<LayerNormOp>(op))
      result =
          AddOp::create(builder, loc, wide, result, widen(layerNorm.getBias()));
  }
  if (type.getElementType() != f32)
    result = CastOp::create(builder, loc, type, result);

  Layout layout = layouts[input];
  layout.partial.clear();
  RankedTensorType global = globalTypes[input];
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
  setLayout(result, global, layout);
  return success();
}

LogicalResult Partitioner::splitCrossEntropy(CrossEntropyOp op,
                                             const Axes &vocab,
                                             const Axes &batch) {
  // logsumexp over the local vocabulary piece in one read of the logits
  // (loom.softmax_stats: the piece's max m and sum s of exp(x - m)),
  // finished by M = all_reduce(max) of m and all_reduce(sum) of
  // s * exp(m - M) over the vocabulary axes; the target logit by a masked
  // lookup summed over them; the mean by a local sum scaled by the global
  // token count, partial over the batch axes.
  OpBuilder builder(op);
  Location loc = op.getLoc();
  Type f32 = builder.getF32Type();
  Value logits = op.getLogits(), targets = op.getTargets();
  auto logitsType = cast<RankedTensorType>(logits.getType());
  int64_t rank = logitsType.getRank();
  auto tokensType =
      RankedTensorType::get(logitsType.getShape().drop_back(), f32);
  int64_t globalTokens = 1;
  for (int64_t size : globalTypes[op.getTargets()].getShape())
    globalTokens *= size;

  if (!vocab.empty()) {
    Value x = logits;
    if (logitsType.getElementType() != f32)
      x = CastOp::create(builder, loc, logitsType.clone(f32), logits);
    // Per-token values keep the targets' layout.
    Layout whole = layouts[targets];
    auto reduceOver = [&](Value value, ReductionKind kind, StringRef what) {
      return finishSplit(builder, value, logits, whole, vocab, kind, op, what);
    };
    // The op widens the logits itself; a piece of only -inf sums to 0, so
    // that the rescaled sums below give NaN only where every piece is -inf
    // (as exp(-inf - -inf) does over the whole row).
    auto stats = SoftmaxStatsOp::create(builder, loc, tokensType, tokensType,
                                        logits, /*partial=*/true);
    Value max = reduceOver(stats.getMax(), ReductionKind::Max,
                           "the max logit per token");
    Value shift = SubOp::create(builder, loc, tokensType, stats.getMax(), max);
    Value rescale = ExpOp::create(builder, loc, tokensType, shift);
    Value rescaled =
        MulOp::create(builder, loc, tokensType, stats.getSum(), rescale);
    Value sum =
        reduceOver(rescaled, ReductionKind::Sum, "the sum of exp per token");
    Value picked = PickOp::create(builder, loc, tokensType, x, targets, meshRef,
                                  axesAttr(vocab));
    picked = reduceOver(picked, ReductionKind::Sum, "the target logit");
    Value logSum = LogOp::create(builder, loc, tokensType, sum);
    Value lse = AddOp::create(builder, loc, tokensType, logSum, max);
    Value losses = SubOp::create(builder, loc, tokensType, lse, picked);
    SmallVector<int64_t> all;
    for (int64_t dim = 0; dim < rank - 1; ++dim)
      all.push_back(dim);
    auto scalarType = RankedTensorType::get({}, f32);
    Value total = SumOp::create(builder, loc, scalarType, losses,
                                builder.getDenseI64ArrayAttr(all), false);
    Value loss = scale(builder, loc, total, 1.0 / globalTokens);
    valueNames[loss] = "this device's share of the cross-entropy";
    Layout layout;
    layout.partial = batch;
    RankedTensorType global = cast<RankedTensorType>(op.getType());
    op.getResult().replaceAllUsesWith(loss);
    op.erase();
    setLayout(loss, global, layout);
    return success();
  }

  // Only tokens are split: each device's mean, scaled to its share.
  Layout layout;
  layout.partial = batch;
  auto global = cast<RankedTensorType>(op.getType());
  setLayout(op.getResult(), global, layout);
  builder.setInsertionPointAfter(op);
  Value loss =
      scale(builder, loc, op.getResult(), 1.0 / countDevices(mesh, batch));
  op.getResult().replaceAllUsesExcept(loss, loss.getDefiningOp());
  valueNames[loss] = "this device's share of the cross-entropy";
  globalTypes[loss] = global;
  layouts[loss] = layout;
  return success();
}

LogicalResult Partitioner::partitionRepeat(RepeatOp repeat) {
  Block &body = repeat.getBody().front();
  auto bodyShardings =
      repeat->getAttrOfType<ArrayAttr>(LoomDialect::kBodyShardingsAttrName);
  if (!bodyShardings)
    return repeat.emitError("loom.repeat has no body shardings; run "
                            "loom-propagate-shardings first");
  unsigned numCarried = repeat.getCarried().size();
  for (unsigned i = 0; i < numCarried; ++i) {
    Layout layout = fromAttr(cast<ShardingAttr>(bodyShardings[i]));
    FailureOr<Value> moved = reshard(repeat->getOperand(i), layout, repeat);
    if (failed(moved))
      return failure();
    repeat->setOperand(i, *moved);
    BlockArgument arg = body.getArgument(i);
    setLayout(arg, cast<RankedTensorType>(arg.getType()), layout);
  }
  for (auto [index, stacked] : llvm::enumerate(repeat.getStacked())) {
    // The layer dimension stays whole (or on the pipeline's manual axis):
    // each iteration's slice keeps the stack's layout of the other
    // dimensions, and is resharded inside the body if a use needs it.
    Layout layout = layouts[stacked];
    for (StringAttr axis : layout.dims.front())
      if (!mesh.isManualAxis(axis.getValue()))
        return repeat.emitError()
               << "the layer dimension of stacked operand "
               << describeValue(stacked) << " is split over '"
               << axis.getValue()
               << "'; only the pipeline schedule's manual axis may split it";
    if (!layout.partial.empty()) {
      Layout whole = layout;
      whole.partial.clear();
      FailureOr<Value> moved = reshard(stacked, whole, repeat);
      if (failed(moved))
        return failure();
      repeat->setOperand(numCarried + index, *moved);
      layout = whole;
    }
    Layout slice;
    slice.dims.assign(layout.dims.begin() + 1, layout.dims.end());
    BlockArgument arg = body.getArgument(numCarried + index);
    setLayout(arg, cast<RankedTensorType>(arg.getType()), slice);
  }

  if (failed(partitionBlock(body)))
    return failure();

  Operation *yield = body.getTerminator();
  for (unsigned i = 0; i < repeat->getNumResults(); ++i) {
    OpResult result = repeat->getResult(i);
    auto global = cast<RankedTensorType>(result.getType());
    Layout layout;
    if (i < numCarried) {
      layout = layouts[body.getArgument(i)];
    } else {
      FailureOr<Layout> recorded = recordedLayout(result, repeat);
      if (failed(recorded))
        return failure();
      layout = *recorded;
    }
    Layout perIteration = layout;
    if (i >= numCarried)
      perIteration.dims.erase(perIteration.dims.begin());
    FailureOr<Value> moved = reshard(yield->getOperand(i), perIteration, yield);
    if (failed(moved))
      return failure();
    yield->setOperand(i, *moved);
    setLayout(result, global, layout);
  }
  return success();
}

LogicalResult Partitioner::partitionOp(Operation *op) {
  if (auto shard = dyn_cast<ShardOp>(op)) {
    FailureOr<Layout> recorded = recordedLayout(shard.getResult(), op);
    if (failed(recorded))
      return failure();
    Layout target = *recorded;
    target.partial.assign(shard.getSharding().getPartialAxes().begin(),
                          shard.getSharding().getPartialAxes().end());
    FailureOr<Value> moved = reshard(shard.getInput(), target, op);
    if (failed(moved))
      return failure();
    shard.getResult().replaceAllUsesWith(*moved);
    op->erase();
    return success();
  }
  if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
    for (auto [index, operand] : llvm::enumerate(returnOp.getOperands())) {
      auto sharding = function.getResultAttrOfType<ShardingAttr>(
          index, LoomDialect::kShardingAttrName);
      Layout target;
      if (sharding)
        target = fromAttr(sharding);
      else
        target.dims.assign(cast<RankedTensorType>(operand.getType()).getRank(),
                           Axes());
      FailureOr<Value> moved = reshard(operand, target, op);
      if (failed(moved))
        return failure();
      returnOp->setOperand(index, *moved);
    }
    return success();
  }
  if (isa<YieldOp>(op))
    return success(); // the enclosing repeat reshards what is yielded
  if (auto repeat = dyn_cast<RepeatOp>(op))
    return partitionRepeat(repeat);
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    Layout layout;
    layout.dims.assign(constant.getType().getRank(), Axes());
    setLayout(constant.getResult(), constant.getType(), layout);
    return success();
  }
  if (auto it = rules.find(op); it != rules.end())
    return partitionRuled(op, it->second);
  return op->emitError("the partitioner does not know how to split this op");
}

LogicalResult
loom::forEachGlobalModel(ModuleOp module, StringRef what,
                         function_ref<LogicalResult(Operation *, MeshOp)> fn) {
  SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
  for (auto function : module.getOps<func::FuncOp>()) {
    if (!function->hasAttr(LoomDialect::kModelAttrName) ||
        function->hasAttr(LoomDialect::kSpmdAttrName))
      continue;
    if (meshes.size() != 1)
      return function.emitError()
             << what << " needs exactly one loom.mesh in the module, found "
             << meshes.size();
    if (failed(fn(function, meshes.front())))
      return failure();
  }
  return success();
}

LogicalResult Partitioner::partitionBlock(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block))
    if (failed(partitionOp(&op)))
      return failure();
  return success();
}

LogicalResult Partitioner::run() {
  Block &entry = function.getBody().front();
  // Rules describe global shapes: read them all before any type changes.
  function.walk([&](ShardingRuleOpInterface op) {
    rules.try_emplace(op, op.getShardingRule());
  });
  // The verifier of loom.model makes every argument a static tensor.
  for (BlockArgument arg : entry.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    Layout layout;
    if (ShardingAttr sharding = getRecordedSharding(arg))
      layout = fromAttr(sharding);
    else
      layout.dims.assign(type.getRank(), Axes());
    setLayout(arg, type, layout);
  }
  if (failed(partitionBlock(entry)))
    return failure();

  // The ops' global shardings were the partitioner's input; what remains
  // is the per-device program, whose ABI is the arguments' and results'.
  function.walk([](Operation *op) {
    op->removeAttr(LoomDialect::kShardingAttrName);
    op->removeAttr(LoomDialect::kBodyShardingsAttrName);
  });
  function.setType(FunctionType::get(function.getContext(),
                                     entry.getArgumentTypes(),
                                     entry.getTerminator()->getOperandTypes()));
  function->setAttr(LoomDialect::kSpmdAttrName,
                    UnitAttr::get(function.getContext()));
  return success();
}

namespace {
struct PartitionPass : public loom::impl::LoomPartitionBase<PartitionPass> {
  using LoomPartitionBase::LoomPartitionBase;

  void runOnOperation() override {
    LogicalResult result = forEachGlobalModel(
        getOperation(), "partitioning", [&](Operation *function, MeshOp mesh) {
          if (searchBudget < 0) {
            function->emitError() << "--loom-partition: search-budget must be "
                                     "0 or more, not "
                                  << static_cast<int64_t>(searchBudget);
            return failure();
          }
          Partitioner partitioner(cast<func::FuncOp>(function), mesh,
                                  size_t(searchBudget));
          LogicalResult partitioned = partitioner.run();
          numCollectives += partitioner.getNumCollectives();
          return partitioned;
        });
    if (failed(result))
      signalPassFailure();
  }
};
} // namespace
