//===- Sharding.cpp - Shardings of values --------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace loom;

ShardingAttr loom::getRecordedSharding(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    Operation *owner = arg.getOwner()->getParentOp();
    if (auto function = dyn_cast_or_null<FunctionOpInterface>(owner))
      return function.getArgAttrOfType<ShardingAttr>(
          arg.getArgNumber(), LoomDialect::kShardingAttrName);
    if (auto repeat = dyn_cast_or_null<RepeatOp>(owner))
      if (auto shardings = repeat->getAttrOfType<ArrayAttr>(
              LoomDialect::kBodyShardingsAttrName))
        return dyn_cast<ShardingAttr>(shardings[arg.getArgNumber()]);
    return {};
  }
  Operation *op = value.getDefiningOp();
  auto shardings = op->getAttrOfType<ArrayAttr>(LoomDialect::kShardingAttrName);
  if (!shardings || shardings.size() <= cast<OpResult>(value).getResultNumber())
    return {};
  return dyn_cast<ShardingAttr>(
      shardings[cast<OpResult>(value).getResultNumber()]);
}

/// Replaces entry `index` of the sharding list `name` of `op`, which has
/// `values`; entries not yet set become open and replicated.
static void setListEntry(Operation *op, StringRef name, ValueRange values,
                         unsigned index, ShardingAttr sharding) {
  SmallVector<Attribute> entries;
  if (auto existing = op->getAttrOfType<ArrayAttr>(name))
    entries.assign(existing.begin(), existing.end());
  if (entries.size() != values.size()) {
    entries.clear();
    for (Value value : values)
      entries.push_back(ShardingAttr::getReplicated(
          op->getContext(), sharding.getMesh(),
          cast<RankedTensorType>(value.getType()).getRank(),
          /*closed=*/false));
  }
  entries[index] = sharding;
  op->setAttr(name, ArrayAttr::get(op->getContext(), entries));
}

void loom::setRecordedSharding(Value value, ShardingAttr sharding) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    Operation *owner = arg.getOwner()->getParentOp();
    if (auto function = dyn_cast<FunctionOpInterface>(owner)) {
      function.setArgAttr(arg.getArgNumber(), LoomDialect::kShardingAttrName,
                          sharding);
      return;
    }
    setListEntry(owner, LoomDialect::kBodyShardingsAttrName,
                 arg.getOwner()->getArguments(), arg.getArgNumber(), sharding);
    return;
  }
  Operation *op = value.getDefiningOp();
  setListEntry(op, LoomDialect::kShardingAttrName, op->getResults(),
               cast<OpResult>(value).getResultNumber(), sharding);
}

int64_t loom::countDevices(MeshOp mesh, ArrayRef<StringAttr> axes,
                           bool countManual) {
  int64_t devices = 1;
  for (StringAttr axis : axes)
    if (countManual || !mesh.isManualAxis(axis))
      devices *= mesh.getAxisSize(axis).value_or(1);
  return devices;
}

RankedTensorType loom::getLocalType(RankedTensorType type,
                                    ShardingAttr sharding, MeshOp mesh) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [size, dim] : llvm::zip(shape, sharding.getDims()))
    size /= countDevices(mesh, dim.getAxes(), /*countManual=*/false);
  return type.clone(shape);
}

std::string loom::formatDims(ShardingAttr sharding) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto printAxes = [&](ArrayRef<StringAttr> axes) {
    llvm::interleaveComma(axes, os, [&](StringAttr axis) {
      os << '"' << axis.getValue() << '"';
    });
  };
  os << '[';
  llvm::interleaveComma(sharding.getDims(), os, [&](DimShardingAttr dim) {
    os << '{';
    printAxes(dim.getAxes());
    os << '}';
  });
  os << ']';
  if (!sharding.getPartialAxes().empty()) {
    os << " partial " << stringifyReductionKind(sharding.getPartialKind())
       << '(';
    printAxes(sharding.getPartialAxes());
    os << ')';
  }
  return text;
}

/// The innermost file position of `loc`: the callee of call sites, the
/// child of names, the first of fused locations.
static std::optional<FileLineColLoc> innermostFileLoc(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return file;
  if (auto name = dyn_cast<NameLoc>(loc))
    return innermostFileLoc(name.getChildLoc());
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return innermostFileLoc(callSite.getCallee());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (auto file = innermostFileLoc(part))
        return file;
  return std::nullopt;
}

std::string loom::printableText(StringRef text) {
  std::string out;
  llvm::raw_string_ostream os(out);
  llvm::printEscapedString(text, os);
  return out;
}

std::string loom::formatSourceLoc(Location loc) {
  std::optional<FileLineColLoc> file = innermostFileLoc(loc);
  if (!file)
    return "<unknown>";
  return (printableText(
              llvm::sys::path::filename(file->getFilename().getValue())) +
          ":" + Twine(file->getLine()) + ":" + Twine(file->getColumn()))
      .str();
}

std::string loom::formatSourceLocs(Location loc) {
  auto fused = dyn_cast<FusedLoc>(loc);
  if (!fused)
    return formatSourceLoc(loc);
  // The file is named once while it stays the same: `a.loom:3:7, 4:7`.
  std::string text, file;
  for (Location part : fused.getLocations()) {
    std::string site = formatSourceLoc(part);
    StringRef name = StringRef(site).rsplit(':').first.rsplit(':').first;
    if (!text.empty())
      text += ", ";
    text += name == file ? site.substr(name.size() + 1) : site;
    file = name.str();
  }
  return text;
}

std::string loom::describeValue(Value value) {
  Location loc = value.getLoc();
  if (auto name = dyn_cast<NameLoc>(loc))
    return ("%" + name.getName().getValue()).str();
  if (auto arg = dyn_cast<BlockArgument>(value))
    return ("argument " + Twine(arg.getArgNumber())).str();
  return ("the result of " + value.getDefiningOp()->getName().getStringRef())
      .str();
}

std::string loom::describeOp(Operation *op) {
  StringRef what = isa<ShardOp>(op) ? StringRef("the sharding constraint")
                                    : op->getName().getStringRef();
  return (what + " at " + formatSourceLocs(op->getLoc())).str();
}

std::string loom::describeProducer(Value value) {
  if (Operation *maker = value.getDefiningOp())
    return describeOp(maker);
  return describeValue(value) + " at " + formatSourceLoc(value.getLoc());
}

int64_t loom::syntheticIdBound(Value input) {
  auto groupSize = [](Operation *op, std::optional<ArrayAttr> axes,
                      FlatSymbolRefAttr meshRef) -> int64_t {
    if (!axes || axes->empty())
      return 1;
    MeshOp mesh = lookupMesh(op, meshRef);
    if (!mesh)
      return 1;
    SmallVector<StringAttr> names;
    for (Attribute axis : *axes)
      names.push_back(cast<StringAttr>(axis));
    return countDevices(mesh, names, /*countManual=*/false);
  };
  auto lastDim = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getShape().back();
  };
  int64_t bound = std::numeric_limits<int64_t>::max();
  SmallVector<Value> work{input};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (auto embedding = dyn_cast<EmbeddingOp>(user))
        bound = std::min(bound, embedding.getTable().getType().getShape()[0] *
                                    groupSize(user, embedding.getVocabAxes(),
                                              embedding.getMeshAttr()));
      else if (auto pick = dyn_cast<PickOp>(user))
        bound = std::min(bound, lastDim(pick.getLogits()) *
                                    groupSize(user, pick.getVocabAxes(),
                                              pick.getMeshAttr()));
      else if (auto stats = dyn_cast<LogitsStatsOp>(user);
               stats && stats.getTargets() == value)
        bound = std::min(bound, lastDim(stats.getRhs()) *
                                    groupSize(user, stats.getVocabAxes(),
                                              stats.getMeshAttr()));
      else if (auto ce = dyn_cast<CrossEntropyOp>(user))
        bound = std::min(bound, lastDim(ce.getLogits()));
      else if (isa<ReshapeOp, ShardOp, AllSliceOp, AllGatherOp, AllToAllOp,
                   CollectivePermuteOp, TransposeOp, SliceOp, WaitOp>(user))
        for (Value result : user->getResults())
          work.push_back(result);
      else if (isa<YieldOp>(user) &&
               isa<CombinedOp, StartOp>(user->getParentOp())) {
        // A member's gathered value, or a started gather's future.
        for (OpOperand &use : value.getUses())
          if (use.getOwner() == user)
            work.push_back(
                user->getParentOp()->getResult(use.getOperandNumber()));
      }
    }
  }
  return bound == std::numeric_limits<int64_t>::max() ? 16 : bound;
}

FailureOr<Operation *> loom::findSingleModel(ModuleOp module,
                                             StringRef runner) {
  SmallVector<Operation *> models;
  for (Operation &op : module.getBody()->getOperations())
    if (op.hasAttr(LoomDialect::kModelAttrName))
      models.push_back(&op);
  if (models.empty())
    return module.emitError()
           << runner << " runs one model; the file defines none";
  if (models.size() > 1) {
    InFlightDiagnostic error = models[1]->emitError()
                               << runner << " runs one model, but this file "
                               << "defines " << models.size()
                               << "; keep one per file";
    error.attachNote(models[0]->getLoc()) << "the first model is here";
    return error;
  }
  return models[0];
}
