//===- LoomOps.cpp - Loom operations --------------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/TypeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace loom;

//===----------------------------------------------------------------------===//
// Mesh and sharding checks
//===----------------------------------------------------------------------===//

/// Parses `["dp" = 2, "tp" = 4]`.
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &sizes) {
  SmallVector<Attribute> nameList;
  SmallVector<int64_t> sizeList;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    nameList.push_back(parser.getBuilder().getStringAttr(name));
    sizeList.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, parseAxis))
    return failure();
  names = parser.getBuilder().getArrayAttr(nameList);
  sizes = parser.getBuilder().getDenseI64ArrayAttr(sizeList);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, MeshOp, ArrayAttr names,
                          DenseI64ArrayAttr sizes) {
  printer << '[';
  llvm::interleaveComma(
      llvm::zip(names, sizes.asArrayRef()), printer, [&](auto axis) {
        printer << std::get<0>(axis) << " = " << std::get<1>(axis);
      });
  printer << ']';
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getAxisSizes().size())
    return emitOpError("has ") << getAxisNames().size() << " axis names but "
                               << getAxisSizes().size() << " sizes";
  if (getAxisNames().empty())
    return emitOpError("needs at least one axis");
  llvm::SmallSet<StringRef, 8> seen;
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes())) {
    StringRef axis = cast<StringAttr>(name).getValue();
    if (!seen.insert(axis).second)
      return emitOpError("declares axis '") << axis << "' twice";
    if (size < 1)
      return emitOpError("axis '")
             << axis << "' must have a positive size, got " << size;
  }
  std::optional<int64_t> devices = countDevices(getAxisSizes());
  if (!devices || *devices > kMaxMeshDevices)
    return emitOpError("has more than 2^31 - 1 devices");
  for (Attribute manual : getManualAxes())
    if (!getAxisSize(cast<StringAttr>(manual).getValue()))
      return emitOpError("manual axis ")
             << manual << " is not an axis of the mesh";
  return success();
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes()))
    if (cast<StringAttr>(name).getValue() == axis)
      return size;
  return std::nullopt;
}

bool MeshOp::isManualAxis(StringRef axis) {
  return llvm::any_of(getManualAxes(), [&](Attribute manual) {
    return cast<StringAttr>(manual).getValue() == axis;
  });
}

bool loom::isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, ReluOp, SiluOp, TanhOp, SigmoidOp,
             ExpOp, LogOp, SqrtOp, RsqrtOp, NegOp, GeluOp, CastOp>(op);
}

std::optional<int64_t> loom::countDevices(ArrayRef<int64_t> axisSizes) {
  int64_t devices = 1;
  for (int64_t size : axisSizes)
    if (llvm::MulOverflow(devices, size, devices))
      return std::nullopt;
  return devices;
}

int64_t MeshOp::getNumDevices() {
  return *countDevices(getAxisSizes()); // the verifier bounds it
}

MeshOp loom::lookupMesh(Operation *anchor, FlatSymbolRefAttr mesh) {
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(anchor, mesh.getAttr());
}

LogicalResult loom::verifySharding(Operation *anchor, ShardingAttr sharding,
                                   Type type,
                                   function_ref<InFlightDiagnostic()> emitError,
                                   bool checkDivisible) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return emitError() << "sharding applies to statically shaped tensors, not "
                       << type;
  MeshOp mesh = lookupMesh(anchor, sharding.getMesh());
  if (!mesh)
    return emitError() << "sharding refers to unknown mesh "
                       << sharding.getMesh();
  if (static_cast<int64_t>(sharding.getDims().size()) != tensor.getRank())
    return emitError() << "sharding has " << sharding.getDims().size()
                       << " dimension(s) but the value " << describeType(tensor)
                       << " has rank " << tensor.getRank();
  for (StringAttr axis : sharding.getAllAxes())
    if (!mesh.getAxisSize(axis))
      return emitError() << "sharding uses axis " << axis << " which mesh @"
                         << mesh.getSymName() << " does not have";
  for (auto [index, dim] : llvm::enumerate(sharding.getDims())) {
    int64_t devices = 1;
    for (StringAttr axis : dim.getAxes())
      devices *= *mesh.getAxisSize(axis);
    int64_t size = tensor.getShape()[index];
    if (checkDivisible && size % devices != 0)
      return emitError() << "dimension " << index << " of size " << size
                         << " is not divisible by " << devices
                         << ", the number of devices it is split over; pad "
                            "it to "
                         << roundUpTo(size, devices);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ShardOp::verify() {
  return verifySharding(getOperation(), getSharding(), getType(),
                        [&] { return emitOpError(); });
}

OpFoldResult ShardOp::fold(FoldAdaptor) {
  // A constraint repeating the one its operand already has is a no-op.
  if (auto previous = getInput().getDefiningOp<ShardOp>())
    if (previous.getSharding() == getSharding())
      return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Type inference
//===----------------------------------------------------------------------===//

/// Appends a successfully inferred type.
template <typename T>
static LogicalResult push(FailureOr<T> type, SmallVectorImpl<Type> &types) {
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

static RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

#define LOOM_BINARY_INFER(OP, NAME)                                            \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &types) {                                          \
    return push(inferElementwiseType(loc, NAME, tensorOf(adaptor.getLhs()),    \
                                     tensorOf(adaptor.getRhs())),              \
                types);                                                        \
  }
LOOM_BINARY_INFER(AddOp, "+")
LOOM_BINARY_INFER(SubOp, "-")
LOOM_BINARY_INFER(MulOp, "*")
LOOM_BINARY_INFER(DivOp, "/")
#undef LOOM_BINARY_INFER

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return push(inferMatmulType(loc, tensorOf(adaptor.getLhs()),
                              tensorOf(adaptor.getRhs())),
              types);
}

static SmallVector<RankedTensorType> tensorsOf(ValueRange values) {
  return llvm::map_to_vector(values, tensorOf);
}

LogicalResult EinsumOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return push(
      inferEinsumType(loc, adaptor.getSpec(), tensorsOf(adaptor.getInputs())),
      types);
}

LogicalResult BatchedEinsumOp::verify() {
  if (getRhs().size() < 2)
    return emitOpError("needs at least two second operands, got ")
           << getRhs().size();
  if (getResults().size() != getRhs().size())
    return emitOpError("has ") << getResults().size() << " results for "
                               << getRhs().size() << " second operands";
  if (!getSpec().contains(','))
    return emitOpError("needs a two-operand spec, got '") << getSpec() << "'";
  for (auto [rhs, result] : llvm::zip(getRhs(), getResults())) {
    FailureOr<RankedTensorType> type = inferEinsumType(
        getLoc(), getSpec(), {tensorOf(getLhs()), tensorOf(rhs)});
    if (failed(type))
      return failure();
    if (*type != result.getType())
      return emitOpError("result ")
             << describeType(result.getType()) << " is not the einsum's "
             << describeType(*type);
  }
  return success();
}

LogicalResult AddNormOp::verify() {
  RankedTensorType lhs = getLhs().getType();
  for (Type type : {Type(getRhs().getType()), Type(getSum().getType()),
                    Type(getResult().getType())})
    if (type != lhs)
      return emitOpError("needs addends, sum and result of one type, got ")
             << describeType(lhs) << " and " << describeType(type);
  if (Value rhsBias = getRhsBias()) {
    auto vector = cast<RankedTensorType>(rhsBias.getType());
    if (vector.getRank() != 1 || lhs.getRank() == 0 ||
        vector.getDimSize(0) != lhs.getShape().back() ||
        vector.getElementType() != lhs.getElementType())
      return emitOpError("needs `plus` a vector of the addends' element type "
                         "over their last dimension, got ")
             << describeType(vector) << " for addends "
             << describeType(lhs);
  }
  if (getRms() == bool(getBias()))
    return emitOpError(getRms() ? "with `rms` takes no bias"
                                : "needs a bias (or `rms`)");
  SmallVector<RankedTensorType> affine = {getScale().getType()};
  if (getBias())
    affine.push_back(getBias().getType());
  return inferNormType(getLoc(), getRms() ? "rmsnorm" : "layernorm", lhs,
                       affine);
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return push(inferNormType(
                  loc, "layernorm", tensorOf(adaptor.getInput()),
                  {tensorOf(adaptor.getScale()), tensorOf(adaptor.getBias())}),
              types);
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return push(inferNormType(loc, "rmsnorm", tensorOf(adaptor.getInput()),
                            {tensorOf(adaptor.getScale())}),
              types);
}

#define LOOM_REDUCE_INFER(OP, NAME)                                            \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &types) {                                          \
    return push(inferReduceType(loc, NAME, tensorOf(adaptor.getInput()),       \
                                adaptor.getDims(), adaptor.getKeepdim()),      \
                types);                                                        \
  }
LOOM_REDUCE_INFER(SumOp, "sum")
LOOM_REDUCE_INFER(MeanOp, "mean")
LOOM_REDUCE_INFER(MaxOp, "max")
#undef LOOM_REDUCE_INFER

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return push(
      inferTransposeType(loc, tensorOf(adaptor.getInput()), adaptor.getPerm()),
      types);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return push(inferConcatType(loc, tensorsOf(adaptor.getInputs()),
                              static_cast<int64_t>(adaptor.getDim())),
              types);
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  FailureOr<SmallVector<Type>> pieces = inferSplitTypes(
      loc, tensorOf(adaptor.getInput()), static_cast<int64_t>(adaptor.getDim()),
      adaptor.getSizes());
  if (failed(pieces))
    return failure();
  llvm::append_range(types, *pieces);
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  return push(inferSliceType(loc, tensorOf(adaptor.getInput()),
                             adaptor.getStart(), adaptor.getLimit()),
              types);
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return push(inferEmbeddingType(loc, tensorOf(adaptor.getIds()),
                                 tensorOf(adaptor.getTable())),
              types);
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return push(inferAttentionType(loc, tensorOf(adaptor.getQuery()),
                                 tensorOf(adaptor.getKey()),
                                 tensorOf(adaptor.getValue())),
              types);
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  return push(inferCrossEntropyType(loc, tensorOf(adaptor.getLogits()),
                                    tensorOf(adaptor.getTargets())),
              types);
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

/// `vocab on @mesh [axes]` names both or neither, and at least one axis.
static LogicalResult verifyVocabAxes(Operation *op, FlatSymbolRefAttr mesh,
                                     std::optional<ArrayAttr> axes) {
  if (static_cast<bool>(mesh) != axes.has_value())
    return op->emitOpError("needs both a mesh and vocabulary axes, or neither");
  if (axes && axes->empty())
    return op->emitOpError("vocabulary axes must not be empty");
  return success();
}

LogicalResult EmbeddingOp::verify() {
  return verifyVocabAxes(*this, getMeshAttr(), getVocabAxes());
}

LogicalResult PickOp::verify() {
  RankedTensorType logits = getLogits().getType();
  RankedTensorType targets = getTargets().getType();
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != targets.getShape())
    return emitOpError("targets ")
           << describeType(targets) << " must have the shape of logits "
           << describeType(logits) << " without its last dimension";
  if (getType().getShape() != targets.getShape())
    return emitOpError("result must have the shape of the targets");
  return verifyVocabAxes(*this, getMeshAttr(), getVocabAxes());
}

LogicalResult SoftmaxStatsOp::verify() {
  RankedTensorType input = getInput().getType();
  if (input.getRank() < 1)
    return emitOpError("needs an input with a dimension to reduce");
  for (Value result : {getMax(), getSum()})
    if (cast<RankedTensorType>(result.getType()).getShape() !=
        input.getShape().drop_back())
      return emitOpError("results must have the input's shape ")
             << describeType(input) << " without its last dimension";
  return success();
}

LogicalResult LogitsStatsOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  RankedTensorType targets = getTargets().getType();
  if (lhs.getRank() < 2 || rhs.getRank() != 2 ||
      lhs.getShape().back() != rhs.getShape().front())
    return emitOpError("needs lhs [..., K] and rhs [K, V], got ")
           << describeType(lhs) << " and " << describeType(rhs);
  if (targets.getShape() != lhs.getShape().drop_back())
    return emitOpError("targets ")
           << describeType(targets) << " must have the shape of lhs "
           << describeType(lhs) << " without its last dimension";
  for (Value result : {getMax(), getSum(), getPicked()})
    if (cast<RankedTensorType>(result.getType()).getShape() !=
        targets.getShape())
      return emitOpError("results must have the shape of the targets");
  if (!isa<FloatType>(getLogitsType()))
    return emitOpError("logits must have a floating type, not ")
           << getLogitsType();
  return verifyVocabAxes(*this, getMeshAttr(), getVocabAxes());
}

LogicalResult SoftmaxOp::verify() {
  return verifyDimIndex(getLoc(), "softmax", static_cast<int64_t>(getDim()),
                        getInput().getType().getRank());
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType input = getInput().getType(), result = getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type from ")
           << describeType(input.getElementType()) << " to "
           << describeType(result.getElementType()) << "; use loom.cast";
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape ")
           << describeType(input) << " (" << input.getNumElements()
           << " elements) to " << describeType(result) << " ("
           << result.getNumElements() << " elements)";
  return success();
}

LogicalResult TrainOp::verify() {
  static constexpr StringLiteral kOptimizers[] = {"sgd", "adamw"};
  if (!llvm::is_contained(kOptimizers, getOptimizer()))
    return emitOpError("unknown optimizer '")
           << getOptimizer() << "', expected sgd or adamw";
  // Read as signed: the generated getters return the unsigned value.
  if (IntegerAttr stage = getZeroStageAttr();
      stage && (stage.getInt() < 0 || stage.getInt() > 3))
    return emitOpError("ZeRO stage must be 0, 1, 2 or 3, got ")
           << stage.getInt();
  if (IntegerAttr count = getMicrobatchesAttr(); count && count.getInt() < 1)
    return emitOpError("microbatches must be positive, got ") << count.getInt();
  auto isNumber = [](Attribute value) {
    return isa<FloatAttr, IntegerAttr>(value);
  };
  for (NamedAttribute entry : getHyper()) {
    auto list = dyn_cast<ArrayAttr>(entry.getValue());
    if (!isNumber(entry.getValue()) && !(list && llvm::all_of(list, isNumber)))
      return emitOpError("hyper-parameter '")
             << entry.getName().getValue()
             << "' must be a number or a list of numbers, not "
             << entry.getValue();
  }
  for (auto [name, type] :
       {std::pair(StringRef("compute_type"), getComputeTypeAttr()),
        std::pair(StringRef("master_type"), getMasterTypeAttr())})
    if (type && !isa<FloatType>(type.getValue()))
      return emitOpError() << name << " must be a float type, not "
                           << type.getValue();
  return success();
}

LogicalResult TrainOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *model =
      symbolTable.lookupNearestSymbolFrom(getOperation(), getModelAttr());
  if (!model || !model->hasAttr(LoomDialect::kModelAttrName))
    return emitOpError("refers to ")
           << getModelAttr() << ", which is not a Loom model";
  // The axes it names are a mesh's.
  auto meshes = getOperation()->getParentOfType<ModuleOp>().getOps<MeshOp>();
  SmallVector<StringRef> axes;
  if (std::optional<ArrayAttr> zero = getZeroAxes())
    for (Attribute axis : *zero)
      axes.push_back(cast<StringAttr>(axis).getValue());
  if (std::optional<StringRef> scheduleAxis = getScheduleAxis())
    axes.push_back(*scheduleAxis);
  for (StringRef axis : axes)
    if (llvm::none_of(meshes, [&](MeshOp mesh) {
          return mesh.getAxisSize(axis).has_value();
        }))
      return emitOpError("names the mesh axis '")
             << axis << "', which no loom.mesh of the module has";
  return success();
}

//===----------------------------------------------------------------------===//
// FusedOp
//===----------------------------------------------------------------------===//

LogicalResult FusedOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << body.getNumArguments() << " argument(s) for "
           << getInputs().size() << " input(s)";
  for (auto [index, input] : llvm::enumerate(getInputs()))
    if (body.getArgument(index).getType() != input.getType())
      return emitOpError("body argument ")
             << index << " has type " << body.getArgument(index).getType()
             << ", expected the input's type " << input.getType();
  auto resultType = cast<RankedTensorType>(getResult().getType());
  // The iteration space: the result's shape, or the input shape of a
  // reduction that ends the group.
  ArrayRef<int64_t> space = resultType.getShape();
  Operation *last = body.getTerminator()->getPrevNode();
  bool endsInReduction = last && isa<SumOp, MeanOp, MaxOp>(last);
  if (endsInReduction)
    space = cast<RankedTensorType>(last->getOperand(0).getType()).getShape();
  for (Operation &op : body.without_terminator()) {
    bool elementwise = isElementwise(&op);
    bool scalarConstant =
        isa<ConstantOp>(op) &&
        cast<RankedTensorType>(op.getResult(0).getType()).getNumElements() == 1;
    if (&op == last && endsInReduction)
      continue;
    if (!elementwise && !scalarConstant)
      return op.emitOpError("cannot be part of a fusion group: only "
                            "element-wise ops and scalar constants can, and "
                            "one reduction at its end");
    auto type = cast<RankedTensorType>(op.getResult(0).getType());
    if (elementwise && type.getShape() != space)
      return op.emitOpError("result shape ")
             << type << " differs from the fusion group's iteration space "
             << RankedTensorType::get(space, type.getElementType());
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != resultType)
    return emitOpError("body must yield one value of the result type ")
           << resultType;
  return success();
}

//===----------------------------------------------------------------------===//
// RepeatOp
//===----------------------------------------------------------------------===//

LogicalResult RepeatOp::verify() {
  // A plain verifier, not a region verifier: it runs before the region-branch
  // interface checks, so a count mismatch is reported in these words.
  int64_t count = static_cast<int64_t>(getCount());
  if (count < 1)
    return emitOpError("count must be positive, got ") << count;
  Block &body = getBody().front();
  size_t numCarried = getCarried().size();
  size_t numStacked = getStacked().size();
  if (body.getNumArguments() != numCarried + numStacked)
    return emitOpError("body takes ")
           << body.getNumArguments() << " argument(s), expected " << numCarried
           << " carried + " << numStacked << " stacked";
  for (auto [index, carried] : llvm::enumerate(getCarried()))
    if (body.getArgument(index).getType() != carried.getType())
      return emitOpError("body argument ")
             << index << " has type " << body.getArgument(index).getType()
             << ", expected the carried type " << carried.getType();
  for (auto [index, stacked] : llvm::enumerate(getStacked())) {
    auto type = cast<RankedTensorType>(stacked.getType());
    if (type.getRank() < 1 || type.getShape()[0] != count)
      return emitOpError("stacked operand ")
             << index << " of type " << type
             << " must have a leading dimension of size " << count;
    auto slice = RankedTensorType::get(type.getShape().drop_front(),
                                       type.getElementType());
    Type argType = body.getArgument(numCarried + index).getType();
    if (argType != slice)
      return emitOpError("body argument ")
             << numCarried + index << " has type " << argType
             << ", expected the slice type " << slice;
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getNumResults())
    return emitOpError("body yields ")
           << yield.getValues().size() << " value(s) for " << getNumResults()
           << " result(s)";
  if (getNumResults() < numCarried)
    return emitOpError("has fewer results than carried values");
  for (auto [index, value, result] :
       llvm::enumerate(yield.getValues(), getResults())) {
    if (index < numCarried) {
      if (value.getType() != getCarried()[index].getType() ||
          result.getType() != value.getType())
        return emitOpError("carried value ")
               << index << " changes type across iterations: "
               << getCarried()[index].getType() << " in, " << value.getType()
               << " yielded, " << result.getType() << " returned";
      continue;
    }
    auto perIteration = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape{count};
    llvm::append_range(shape, perIteration.getShape());
    auto stackedType =
        RankedTensorType::get(shape, perIteration.getElementType());
    if (result.getType() != stackedType)
      return emitOpError("stacked result ")
             << index << " has type " << result.getType() << ", expected "
             << stackedType;
  }
  return success();
}

SmallVector<Region *> RepeatOp::getLoopRegions() { return {&getBody()}; }

OperandRange RepeatOp::getEntrySuccessorOperands(RegionSuccessor) {
  return getCarried();
}

void RepeatOp::getSuccessorRegions(RegionBranchPoint point,
                                   SmallVectorImpl<RegionSuccessor> &regions) {
  // The count is at least one, so entering always runs the body; only the
  // carried block arguments are forwarded (the slices are not).
  // Clamped to what exists: the interface verifier runs before this op's own
  // checks and must see a malformed op without reading out of bounds.
  size_t numCarried = getCarried().size();
  Block::BlockArgListType carriedArgs = getBody().getArguments().take_front(
      std::min<size_t>(numCarried, getBody().getNumArguments()));
  regions.push_back(RegionSuccessor(&getBody(), carriedArgs));
  if (!point.isParent())
    regions.push_back(RegionSuccessor(
        getOperation(), getResults().take_front(
                            std::min<size_t>(numCarried, getNumResults()))));
}

MutableOperandRange YieldOp::getMutableSuccessorOperands(RegionSuccessor) {
  auto repeat = dyn_cast<RepeatOp>((*this)->getParentOp());
  if (!repeat) // loom.start: the collective's value
    return MutableOperandRange(getOperation());
  return MutableOperandRange(
      getOperation(), 0,
      std::min<unsigned>(repeat.getCarried().size(), getNumOperands()));
}

#define GET_OP_CLASSES
#include "dialects/loom/IR/LoomOps.cpp.inc"
