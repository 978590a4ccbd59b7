//===- EmitCpu.cpp - The per-rank program as C++ over libloomrt -----------===//
//
// Part of the Loom project.
//
// Emits C++ rather than lowering through MLIR's LLVM dialect: the plan
// (fusion groups, arena offsets) maps one to one onto loops and calls that a
// user can read in `--emit=cpu`, the CUDA backend emits the same structure
// as CUDA C++, and clang vectorises the fused loops (docs/rationale.md).
//
//===----------------------------------------------------------------------===//

#include "loom/Target/Target.h"

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/Transforms/Explain.h"
#include "dialects/loom/Transforms/Views.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

const char *dtypeEnum(Type element) {
  if (element.isF32())
    return "LOOMRT_F32";
  if (element.isBF16())
    return "LOOMRT_BF16";
  if (element.isF16())
    return "LOOMRT_F16";
  if (element.isInteger(32))
    return "LOOMRT_I32";
  return "LOOMRT_I64";
}

const char *storageType(Type element) {
  if (element.isF32())
    return "float";
  if (element.isBF16() || element.isF16())
    return "uint16_t";
  if (element.isInteger(32))
    return "int32_t";
  return "int64_t";
}

bool isFloat(Type element) { return isa<FloatType>(element); }

/// The arena's bytes [begin, end) that `value` occupies over every
/// iteration of the repeats around it (a slice of stacked parameters is
/// addressed in its whole stack's buffer).
std::pair<int64_t, int64_t> arenaRange(Value value) {
  ArenaAddress address = arenaAddress(value);
  return {address.offset, address.offset + address.bufferBytes};
}

bool overlap(Value x, Value y) {
  auto [xBegin, xEnd] = arenaRange(x);
  auto [yBegin, yEnd] = arenaRange(y);
  return xBegin < yEnd && yBegin < xEnd;
}

/// Bytes of one element of `storageType(element)`.
int64_t storageBytes(Type element) {
  if (element.isBF16() || element.isF16())
    return 2;
  return element.isF32() || element.isInteger(32) ? 4 : 8;
}

/// A C string literal of `text`; a control byte as a three-digit octal
/// escape, which no following digit can extend.
std::string quote(StringRef text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      out += {'\\', char('0' + (c >> 6)), char('0' + (c >> 3 & 7)),
              char('0' + (c & 7))};
      continue;
    }
    if (c == '"' || c == '\\')
      out += '\\';
    out += char(c);
  }
  return out + "\"";
}

std::string list(ArrayRef<int64_t> values) {
  return "{" +
         llvm::join(llvm::map_range(
                        values, [](int64_t v) { return std::to_string(v); }),
                    ", ") +
         "}";
}

/// The element stride of a row-major `shape` along each dimension of a
/// `rank`-dimensional iteration space it broadcasts to (numpy rules: aligned
/// at the right; 0 where it has no such dimension or size 1).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape, int rank) {
  SmallVector<int64_t> strides = computeStrides(shape);
  SmallVector<int64_t> perDim(rank, 0);
  for (int d = 0; d < rank; ++d) {
    int dim = d - (rank - int(shape.size()));
    if (dim >= 0 && shape[dim] != 1)
      perDim[d] = strides[dim];
  }
  return perDim;
}

/// An element-wise kernel's operand's element stride along each dimension
/// of its `rank`-dimensional iteration space, as it is stored
/// (stridesInBuffer: a strided piece of another value steps as that
/// value does) and broadcast as broadcastStrides says.
SmallVector<int64_t> operandStrides(Value operand, int rank) {
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(operand.getType()).getShape();
  SmallVector<int64_t> stored = stridesInBuffer(operand);
  SmallVector<int64_t> perDim = broadcastStrides(shape, rank);
  for (int d = 0; d < rank; ++d)
    if (perDim[d] != 0)
      perDim[d] = stored[d - (rank - int(shape.size()))];
  return perDim;
}

/// `i0 * s0 + i1 * s1 + ...` over the dimensions with a nonzero stride (an
/// operand's offset from the loop indices), or `0`.
std::string linearIndex(ArrayRef<int64_t> perDim) {
  std::string text;
  for (auto [d, stride] : llvm::enumerate(perDim))
    if (stride)
      text += (text.empty() ? "" : " + ") + ("i" + Twine(d)).str() +
              (stride == 1 ? "" : " * " + std::to_string(stride));
  return text.empty() ? std::string("0") : text;
}

/// Whether an element-wise input with these per-dimension strides (0 where
/// it broadcasts) moves with the output's last dimension, element for
/// element: in a flat loop, every input but a scalar.
bool isStreamed(ArrayRef<int64_t> perDim, bool flat) {
  if (flat)
    return llvm::any_of(perDim, [](int64_t s) { return s != 0; });
  return !perDim.empty() && perDim.back() == 1;
}

class ProgramEmitter {
public:
  ProgramEmitter(ModuleOp module, func::FuncOp model, MeshOp mesh,
                 StringRef source, Target target)
      : module(module), model(model), mesh(mesh), source(source),
        target(target) {}

  LogicalResult emit(raw_ostream &os);

private:
  ModuleOp module;
  func::FuncOp model;
  MeshOp mesh;
  StringRef source;
  Target target;
  /// File-scope tables (constants, axis lists, contraction descriptors).
  std::string globals;
  llvm::raw_string_ostream globalsOs{globals};
  /// The body of `step`.
  std::string body;
  llvm::raw_string_ostream bodyOs{body};
  int indent = 1;
  unsigned nextId = 0;
  llvm::DenseMap<Operation *, std::string> loopVariables;
  /// Whether a kernel moves packs (the file then defines their helpers).
  bool usesPacks = false;
  llvm::StringMap<std::string> axisTables;
  /// The kernels of --report, in its order: each one's code is bracketed by
  /// loomrt_kernel_begin/end, which time it under --profile.
  std::vector<KernelInfo> kernels;
  llvm::DenseMap<Operation *, int> kernelIndex;
  /// Each loom.start's future number for the runtime (loomrt_start_begin).
  llvm::DenseMap<Operation *, int> futureNumbers;
  /// Fusion groups `gelu(product + bias, approximate = "tanh")` or
  /// `product + bias + residual` whose product asked
  /// loomrt_contract_epilogue to apply them in the GEMM's epilogue: each
  /// group's kernel runs only where that call says it did not (the name of
  /// its flag).
  llvm::DenseMap<Operation *, std::string> epilogueFlags;
  /// The first value the code addressed that has no place in the arena (a
  /// plan that does not cover the program): an internal error, never code
  /// that would address memory before the arena.
  Value unplaced;
  /// The first value the code addressed whose bytes, in some iteration,
  /// would reach past the arena's end: an internal error as well.
  Value pastArena;
  int64_t arenaBytes = 0;

  raw_ostream &line() { return bodyOs.indent(2 * indent); }
  std::string fresh(StringRef prefix) {
    return (prefix + Twine(nextId++)).str();
  }

  /// The loomrt_rows argument of a row kernel (a norm, a softmax) that
  /// reads `input`: "nullptr" for rows one after another, else a table of
  /// a strided piece's rows (Views.h: rowsView); none where its layout has
  /// no such rows.
  std::optional<std::string> rowsArgument(Value input) {
    if (isRowMajorInBuffer(input))
      return std::string("nullptr");
    std::optional<RowsView> view =
        rowsView(tensorType(input).getShape(), stridesInBuffer(input));
    if (!view)
      return std::nullopt;
    std::string table = fresh("kRows");
    globalsOs << "static const loomrt_rows " << table << " = {" << view->group
              << ", " << view->groupStride << ", " << view->rowStride
              << "};\n";
    return "&" + table;
  }

  LogicalResult fail(Operation *op, const Twine &message) {
    return op->emitError() << "cannot generate "
                           << (target == Target::Cuda ? "CUDA" : "CPU")
                           << " code: " << message;
  }

  std::string site(Operation *op) {
    // The partitioner makes loom.pick only out of a cross-entropy (and
    // loom.logits_stats out of a pick): name the op the user wrote.
    StringRef name = isa<PickOp, LogitsStatsOp>(op)
                         ? StringRef("loom.cross_entropy")
                         : op->getName().getStringRef();
    return quote((name + " at " + formatSourceLoc(op->getLoc())).str());
  }

  /// How many ranks a vocabulary split over `axes` is in (1 unsplit).
  int64_t vocabPieces(std::optional<ArrayAttr> axes) {
    int64_t pieces = 1;
    if (axes)
      for (Attribute axis : *axes)
        pieces *= *mesh.getAxisSize(cast<StringAttr>(axis).getValue());
    return pieces;
  }

  int axisIndex(StringRef axis) {
    if (!mesh)
      return -1;
    for (auto [index, name] : llvm::enumerate(mesh.getAxisNames()))
      if (cast<StringAttr>(name).getValue() == axis)
        return int(index);
    return -1;
  }

  /// A file-scope `static const int[]` of mesh axis indices.
  std::string axesTable(ArrayAttr axes) {
    SmallVector<int64_t> indices;
    std::string key;
    for (Attribute axis : axes) {
      indices.push_back(axisIndex(cast<StringAttr>(axis).getValue()));
      key += std::to_string(indices.back()) + ",";
    }
    auto found = axisTables.find(key);
    if (found != axisTables.end())
      return found->second;
    std::string name = fresh("kAxes");
    globalsOs << "static const int " << name << "[] = " << list(indices)
              << ";\n";
    axisTables[key] = name;
    return name;
  }

  std::string int64Table(ArrayRef<int64_t> values) {
    std::string name = fresh("kShape");
    globalsOs << "static const int64_t " << name
              << "[] = " << list(values.empty() ? ArrayRef<int64_t>{0} : values)
              << ";\n";
    return name;
  }

  std::string pointer(Value value) {
    ArenaAddress address = arenaAddress(value);
    if (address.offset < 0 && !unplaced)
      unplaced = value;
    int64_t end = address.offset + tensorBytes(value.getType());
    for (const ArenaStep &step : address.steps)
      end += step.bytes * step.lastIndex();
    if (address.offset >= 0 && end > arenaBytes && !pastArena)
      pastArena = value;
    std::string text = "(arena + " + std::to_string(address.offset) + ")";
    for (const ArenaStep &step : address.steps) {
      if (step.groupAxes) {
        text = "(" + text + " + loomrt_group_rank(rt, " +
               axesTable(step.groupAxes) + ", " +
               std::to_string(step.groupAxes.size()) + ") * " +
               std::to_string(step.bytes) + ")";
        continue;
      }
      std::string iteration = loopVariables.lookup(step.repeat);
      if (iteration == "0")
        continue; // a prefetched collective's first iteration, before its loop
      if (step.parity)
        iteration = "(" + iteration + " & 1)";
      text = "(" + text + " + " + iteration + " * " +
             std::to_string(step.bytes) + ")";
    }
    return text;
  }

  /// The largest power of two, up to the arena's alignment, that
  /// `pointer(value)` is a multiple of.
  int64_t knownAlignment(Value value) {
    auto alignmentOf = [](int64_t bytes) -> int64_t {
      constexpr int64_t kArena = LoomDialect::kArenaAlignment;
      if (bytes < 0)
        return 1; // not planned: assume nothing
      return bytes == 0 ? kArena : std::min<int64_t>(bytes & -bytes, kArena);
    };
    ArenaAddress address = arenaAddress(value);
    int64_t alignment = alignmentOf(address.offset);
    for (const ArenaStep &step : address.steps)
      alignment = std::min(alignment, alignmentOf(step.bytes));
    return alignment;
  }

  std::string typed(Value value, bool isConst) {
    return std::string("((") + (isConst ? "const " : "") +
           storageType(tensorType(value).getElementType()) + " *)" +
           pointer(value) + ")";
  }

  LogicalResult checkPlanned(Operation *op) {
    auto offsets =
        op->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kOffsetsAttrName);
    if (!offsets)
      return fail(op, "the op has no arena offsets (run loom-plan-memory)");
    return success();
  }

  LogicalResult emitBlock(Block &block);
  /// Opens a `{ // where` scope of the step declaring a typed pointer per
  /// input; returns their names (the caller closes the scope).
  SmallVector<std::string> openInputScope(StringRef where, ValueRange inputs);
  LogicalResult emitOp(Operation *op);
  LogicalResult emitConstant(ConstantOp op);
  LogicalResult emitElementwise(Operation *op, ValueRange inputs,
                                Block *fusedBody);
  /// Elements per thread of an element-wise kernel moving its streamed
  /// operands (those not broadcast along the last dimension) in aligned
  /// packs of up to 16 bytes, or 0 when their shapes or alignment forbid.
  int64_t packWidth(ValueRange inputs, Value result,
                    ArrayRef<SmallVector<int64_t>> strides,
                    ArrayRef<int64_t> outStored, bool flat);
  /// The body of such a kernel (its parameters are open already).
  /// `needed`: the dimensions whose indices `inIndex` and `outAt` read.
  void emitPackedLoop(ValueRange inputs, Value result, StringRef outAt,
                      Block *fusedBody,
                      ArrayRef<std::string> inNames,
                      ArrayRef<std::string> inIndex, ArrayRef<bool> needed,
                      ArrayRef<SmallVector<int64_t>> strides, bool flat,
                      int64_t width, StringRef index);
  LogicalResult emitFusedReduction(Operation *op, ValueRange inputs,
                                   Block *fusedBody, Operation *reduction);
  /// Opens a CUDA kernel over `inputs` and `result` in the file-scope text;
  /// returns its name and sets the names of its input parameters.
  std::string beginKernel(ValueRange inputs, Value result, StringRef where,
                          SmallVectorImpl<std::string> &inNames);
  /// Launches `kernel` on the runtime's stream, 256 threads per block.
  void launchKernel(StringRef kernel, int64_t blocks, ValueRange inputs,
                    Value result, StringRef where);
  /// A loomrt_contraction for `spec` over a and b (b may be null) with a
  /// result of this type and strides, as a global; returns its name.
  /// With `group`, the descriptor has one more batch dimension, first: the
  /// group's members, b and out `bStride` and `outStride` elements
  /// apart and a the same for all (loom.batched_einsum).
  struct Group {
    int64_t count, bStride, outStride;
  };
  std::string contractionDescriptor(Value a, Value b, RankedTensorType outType,
                                    ArrayRef<int64_t> outStrides,
                                    StringRef spec,
                                    const Group *group = nullptr);
  LogicalResult emitContraction(Operation *op, Value a, Value b, Value out,
                                StringRef spec);
  LogicalResult emitBatchedContraction(BatchedEinsumOp op);
  LogicalResult emitRepeat(RepeatOp repeat);
  LogicalResult emitCollective(Operation *op);
  LogicalResult emitCombined(CombinedOp op);
  LogicalResult emitStart(StartOp op);
  /// The runtime calls that start `op`'s collective as future `number`.
  LogicalResult emitStartedCollective(StartOp op, int number);
  LogicalResult emitWait(WaitOp op);
  LogicalResult emitPrefetch(PrefetchOp op);
  LogicalResult emitSlice(SliceOp op);
  void emitTables(raw_ostream &os);
};

//===----------------------------------------------------------------------===//
// Element-wise loops
//===----------------------------------------------------------------------===//

/// The C expression of one element-wise op over scalar operands, rounded to
/// its result type (every op rounds once, fused or not). Without
/// `roundFloat`, a bf16 or f16 result is left in f32 for a store that
/// rounds it (storedValue): rounding twice to nearest gives the bits of
/// rounding once.
std::string scalarExpression(Operation *op, ArrayRef<std::string> args,
                             bool roundFloat = true) {
  Type element = tensorType(op->getResult(0)).getElementType();
  bool fp = isFloat(element);
  std::string x = args.empty() ? "" : args[0];
  std::string y = args.size() > 1 ? args[1] : "";
  std::string value;
  auto wrapping = [&](StringRef sign) {
    return ("(int64_t)((uint64_t)(" + x + ") " + sign + " (uint64_t)(" + y +
            "))")
        .str();
  };
  if (isa<AddOp>(op))
    value = fp ? x + " + " + y : wrapping("+");
  else if (isa<SubOp>(op))
    value = fp ? x + " - " + y : wrapping("-");
  else if (isa<MulOp>(op))
    value = fp ? x + " * " + y : wrapping("*");
  else if (isa<DivOp>(op))
    value = fp ? x + " / " + y : "loom_div_int(" + x + ", " + y + ")";
  else if (isa<NegOp>(op))
    value = fp ? "-" + x : "(int64_t)(0 - (uint64_t)(" + x + "))";
  else if (isa<ReluOp>(op))
    value = "(" + x + " < 0.0f ? 0.0f : " + x + ")";
  else if (isa<SiluOp>(op))
    value = x + " / (1.0f + expf(-" + x + "))";
  else if (isa<SigmoidOp>(op))
    value = "1.0f / (1.0f + expf(-" + x + "))";
  else if (isa<TanhOp>(op))
    value = "tanhf(" + x + ")";
  else if (isa<ExpOp>(op))
    value = "expf(" + x + ")";
  else if (isa<LogOp>(op))
    value = "logf(" + x + ")";
  else if (isa<SqrtOp>(op))
    value = "sqrtf(" + x + ")";
  else if (isa<RsqrtOp>(op))
    value = "1.0f / sqrtf(" + x + ")";
  else if (auto gelu = dyn_cast<GeluOp>(op))
    value = gelu.getApproximate() == GeluApproximation::Tanh
                ? "loom_gelu_tanh(" + x + ")"
                : "loom_gelu(" + x + ")";
  else if (auto cast = dyn_cast<CastOp>(op)) {
    bool fromFloat = isFloat(tensorType(cast.getInput()).getElementType());
    if (fp)
      value = fromFloat ? x : "(float)(" + x + ")";
    else
      value = fromFloat ? "(int64_t)(" + x + ")" : x;
  }
  if (element.isBF16() && roundFloat)
    return "loom_round_bf16(" + value + ")";
  if (element.isF16() && roundFloat)
    return "loom_round_f16(" + value + ")";
  if (element.isInteger(32))
    return "loom_wrap32(" + value + ")";
  return value;
}

/// An i64 as a C++ literal. The most negative one cannot be written as
/// `-9223372036854775808LL`: that negates an unsigned literal, which a
/// braced initializer rejects as narrowing.
std::string int64Literal(int64_t value) {
  if (value == std::numeric_limits<int64_t>::min())
    return "(-9223372036854775807LL - 1)";
  return std::to_string(value) + "LL";
}

std::string scalarLiteral(ConstantOp constant) {
  auto value = cast<DenseElementsAttr>(constant.getValue());
  Type element = value.getElementType();
  if (isFloat(element)) {
    APFloat x = *value.value_begin<APFloat>();
    bool losesInfo = false;
    x.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &losesInfo);
    float f = x.convertToFloat();
    if (std::isnan(f))
      return "NAN";
    if (std::isinf(f))
      return f > 0 ? "INFINITY" : "-INFINITY";
    char text[32];
    snprintf(text, sizeof text, "%.9ef", double(f));
    return text;
  }
  return "(int64_t)" +
         int64Literal((*value.value_begin<APInt>()).getSExtValue());
}

/// `value` (f32 or i64) converted to the storage of `element`.
std::string storedValue(Type element, const std::string &value) {
  if (element.isBF16())
    return "loomrt_f32_to_bf16(" + value + ")";
  if (element.isF16())
    return "loomrt_f32_to_f16(" + value + ")";
  if (element.isF32())
    return value;
  return "(" + std::string(storageType(element)) + ")(" + value + ")";
}

/// The statements that compute one element of an element-wise op or fusion
/// group: load each input (widened to f32 or i64), evaluate every op with
/// its rounding, store the result. `inIndex`/`outIndex` are C expressions of
/// the element's offset in each input and in the output.
/// Returns the name of the element's value, for the caller to store
/// (storedValue) unless it stores it into `out` at `outIndex`: a bf16 or
/// f16 result is left unrounded, as the store rounds it. A reduction ending
/// a fusion group is left to the caller: the value returned is its
/// operand's, rounded.
std::string emitElementStatements(raw_ostream &os, int indent, Operation *op,
                                  ValueRange inputs, Block *fusedBody,
                                  ArrayRef<std::string> inNames,
                                  ArrayRef<std::string> inIndex,
                                  const std::string *outIndex,
                                  unsigned &nextId) {
  auto line = [&]() -> raw_ostream & { return os.indent(2 * indent); };
  auto load = [&](unsigned i) {
    Type element = tensorType(inputs[i]).getElementType();
    std::string ref = inNames[i] + "[" + inIndex[i] + "]";
    if (element.isBF16())
      return "loomrt_bf16_to_f32(" + ref + ")";
    if (element.isF16())
      return "loomrt_f16_to_f32(" + ref + ")";
    if (element.isF32())
      return ref;
    return "(int64_t)" + ref;
  };
  llvm::DenseMap<Value, std::string> scalars;
  auto declare = [&](Value value, const std::string &expression) {
    std::string name = "v" + std::to_string(nextId++);
    line() << (isFloat(tensorType(value).getElementType()) ? "float "
                                                           : "int64_t ")
           << name << " = " << expression << ";\n";
    scalars[value] = name;
  };
  Value result = op->getResult(0), yielded = result;
  if (fusedBody) {
    for (auto [i, argument] : llvm::enumerate(fusedBody->getArguments()))
      declare(argument, load(i));
    yielded = cast<YieldOp>(fusedBody->getTerminator()).getValues()[0];
    for (Operation &inner : fusedBody->without_terminator()) {
      if (auto constant = dyn_cast<ConstantOp>(inner)) {
        scalars[constant.getResult()] = scalarLiteral(constant);
        continue;
      }
      if (isa<SumOp, MeanOp, MaxOp>(inner))
        return scalars.lookup(inner.getOperand(0));
      SmallVector<std::string> args;
      for (Value operand : inner.getOperands())
        args.push_back(scalars.lookup(operand));
      // The yielded value is rounded by its store, unless the group also
      // reads it.
      bool stored = inner.getResult(0) == yielded && yielded.hasOneUse();
      declare(inner.getResult(0), scalarExpression(&inner, args, !stored));
    }
  } else {
    SmallVector<std::string> args;
    for (unsigned i = 0; i < inputs.size(); ++i)
      args.push_back(load(i));
    declare(result, scalarExpression(op, args, false));
  }
  std::string value = scalars[yielded];
  if (outIndex)
    line() << "out[" << *outIndex
           << "] = " << storedValue(tensorType(result).getElementType(), value)
           << ";\n";
  return value;
}

std::string ProgramEmitter::beginKernel(ValueRange inputs, Value result,
                                        StringRef where,
                                        SmallVectorImpl<std::string> &inNames) {
  std::string kernel = fresh("loom_kernel");
  // The plan may put the result over an input that the kernel reads at
  // each element before writing it there (loom-plan-memory): neither
  // pointer may then promise that it alone reaches those bytes.
  bool inPlace = false;
  SmallVector<std::string> params;
  for (Value input : inputs) {
    inNames.push_back(fresh("in"));
    bool shared = overlap(input, result);
    inPlace |= shared;
    params.push_back(
        "const " +
        std::string(storageType(tensorType(input).getElementType())) +
        (shared ? " *" : " *__restrict__ ") + inNames.back());
  }
  params.push_back(
      std::string(storageType(tensorType(result).getElementType())) +
      (inPlace ? " *out" : " *__restrict__ out"));
  globalsOs << "// " << where << "\n__global__ void " << kernel << "("
            << llvm::join(params, ", ") << ") {\n";
  return kernel;
}

void ProgramEmitter::launchKernel(StringRef kernel, int64_t blocks,
                                  ValueRange inputs, Value result,
                                  StringRef where) {
  line() << kernel << "<<<" << blocks
         << ", 256, 0, (cudaStream_t)loomrt_stream(rt)>>>(";
  SmallVector<std::string> args;
  for (Value input : inputs)
    args.push_back(typed(input, true));
  args.push_back(typed(result, false));
  bodyOs << llvm::join(args, ", ") << "); // " << where << "\n";
}

/// `index iD = var % size; var /= size;` for the dimensions `pick` selects,
/// innermost first: a linear index back to a multi-index.
void emitUnravel(raw_ostream &os, StringRef indent, StringRef index,
                 StringRef var, ArrayRef<int64_t> shape,
                 llvm::function_ref<bool(int)> pick) {
  for (int d = int(shape.size()) - 1; d >= 0; --d)
    if (pick(d))
      os << indent << index << " i" << d << " = " << var << " % " << shape[d]
         << "; " << var << " /= " << shape[d] << ";\n";
}

/// The indices of the dimensions `needed` selects from `linear`, a linear
/// index into the row-major `shape`, innermost first, as few divisions as
/// that takes: one for the dimensions between two needed ones, and no
/// remainder for dimension 0. Nothing when none is needed.
void emitNeededIndices(raw_ostream &os, StringRef indent, StringRef index,
                       StringRef linear, ArrayRef<int64_t> shape,
                       ArrayRef<bool> needed) {
  int rank = int(shape.size());
  int outermost = 0;
  while (outermost < rank && !needed[outermost])
    ++outermost;
  if (outermost == rank)
    return;
  os << indent << index << " rest = " << linear << ";\n";
  int64_t divisor = 1;
  for (int d = rank - 1; d >= outermost; --d) {
    if (!needed[d]) {
      divisor *= shape[d];
      continue;
    }
    if (divisor != 1)
      os << indent << "rest /= " << divisor << ";\n";
    os << indent << index << " i" << d << " = rest";
    if (d > 0)
      os << " % " << shape[d];
    os << ";\n";
    divisor = shape[d];
  }
}

LogicalResult ProgramEmitter::emitFusedReduction(Operation *op,
                                                 ValueRange inputs,
                                                 Block *fusedBody,
                                                 Operation *reduction) {
  Value result = op->getResult(0);
  ArrayRef<int64_t> space = tensorType(reduction->getOperand(0)).getShape();
  int rank = int(space.size());
  ArrayRef<int64_t> dims =
      reduction->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
  auto reduced = [&](int d) { return llvm::is_contained(dims, int64_t(d)); };
  // Output strides over the kept dimensions (row-major), and counts.
  SmallVector<int64_t> outStride(rank, 0);
  int64_t stride = 1, outCount = 1, reducedCount = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (reduced(d)) {
      reducedCount *= space[d];
      continue;
    }
    outStride[d] = stride;
    stride *= space[d];
    outCount *= space[d];
  }
  SmallVector<std::string> inIndex;
  for (Value input : inputs)
    inIndex.push_back(linearIndex(operandStrides(input, rank)));
  Type element = tensorType(result).getElementType();
  bool integer = !isFloat(element), isMax = isa<MaxOp>(reduction);
  std::string accType = integer ? "int64_t" : "float";
  std::string init = isMax ? (integer ? "INT64_MIN" : "-INFINITY") : "0";
  // `a` combined with `b` into `a`: max (NaN wins) or a wrapping sum.
  auto combine = [&](const std::string &a,
                     const std::string &b) -> std::string {
    if (isMax)
      return integer ? a + " = " + b + " > " + a + " ? " + b + " : " + a + ";"
                     : a + " = (" + b + " > " + a + " || isnan(" + b + ")) ? " +
                           b + " : " + a + ";";
    return integer
               ? a + " = (int64_t)((uint64_t)" + a + " + (uint64_t)" + b + ");"
               : a + " += " + b + ";";
  };
  auto accumulate = [&](const std::string &value) {
    return combine("acc", value);
  };
  std::string finish = "acc";
  if (isa<MeanOp>(reduction))
    finish = "acc * " +
             std::string(llvm::formatv("{0:e9}f", 1.0 / double(reducedCount)));
  if (integer && element.isInteger(32))
    finish = "loom_wrap32(" + finish + ")";
  std::string where =
      (op->getName().getStringRef() + " at " + formatSourceLoc(op->getLoc()))
          .str();
  const char *resultType = storageType(element);

  // A CUDA kernel's accumulation of output element `o` into `acc`: the kept
  // indices from `o`, then a loop over the reduced elements (from `first`,
  // stepping by `step`) computing the group's value at each.
  auto accumulateOutput = [&](const char *index, ArrayRef<std::string> inNames,
                              StringRef first, StringRef step) {
    // A size-1 dimension's index is always 0 and no input reads it: an
    // unread index, or an unread `rest` when no dimension is left to
    // unravel, would draw nvcc's warning #177.
    auto keptIndex = [&](int d) { return !reduced(d) && space[d] != 1; };
    auto reducedIndex = [&](int d) { return reduced(d) && space[d] != 1; };
    auto anyIndex = [&](llvm::function_ref<bool(int)> pick) {
      return llvm::any_of(llvm::seq<int>(0, rank), pick);
    };
    if (anyIndex(keptIndex)) {
      globalsOs << "    " << index << " rest = o;\n";
      emitUnravel(globalsOs, "    ", index, "rest", space, keptIndex);
    }
    globalsOs << "    " << accType << " acc = " << init << ";\n"
              << "    for (" << index << " r = " << first << "; r < "
              << reducedCount << "; " << step << ") {\n";
    if (anyIndex(reducedIndex)) {
      globalsOs << "      " << index << " rr = r;\n";
      emitUnravel(globalsOs, "      ", index, "rr", space, reducedIndex);
    }
    std::string value = emitElementStatements(
        globalsOs, 3, op, inputs, fusedBody, inNames, inIndex, nullptr, nextId);
    globalsOs << "      " << accumulate(value) << "\n    }\n";
  };

  bool trailing = true; // the reduced dims are the innermost ones
  for (int d = 0; d < rank; ++d)
    if (reduced(d) && d < rank - int(dims.size()))
      trailing = false;
  if (target == Target::Cuda && trailing) {
    // One block per output element: its threads stride over the contiguous
    // reduced elements (coalesced) and combine in a fixed tree, so every
    // run adds in the same order.
    const char *index =
        computeProduct(space) < (int64_t(1) << 31) ? "int32_t" : "int64_t";
    SmallVector<std::string> inNames;
    std::string kernel = beginKernel(inputs, result, where, inNames);
    globalsOs << "  __shared__ " << accType << " partial[256];\n"
              << "  for (" << index << " o = blockIdx.x; o < " << outCount
              << "; o += gridDim.x) {\n";
    accumulateOutput(index, inNames, "threadIdx.x", "r += blockDim.x");
    globalsOs << "    partial[threadIdx.x] = acc;\n    __syncthreads();\n"
              << "    for (int half = 128; half > 0; half /= 2) {\n"
              << "      if (threadIdx.x < half) "
              << combine("partial[threadIdx.x]", "partial[threadIdx.x + half]")
              << "\n      __syncthreads();\n    }\n"
              << "    if (threadIdx.x == 0) {\n"
              << "      acc = partial[0];\n"
              << "      out[o] = " << storedValue(element, finish) << ";\n"
              << "    }\n    __syncthreads();\n  }\n}\n\n";
    launchKernel(kernel,
                 std::max<int64_t>(1, std::min<int64_t>(outCount, 65535)),
                 inputs, result, where);
    return success();
  }
  if (target == Target::Cuda) {
    // One thread per output element walks its reduced elements: no atomics,
    // the same order of additions every run.
    const char *index =
        computeProduct(space) < (int64_t(1) << 31) ? "int32_t" : "int64_t";
    SmallVector<std::string> inNames;
    std::string kernel = beginKernel(inputs, result, where, inNames);
    globalsOs << "  for (" << index << " o = blockIdx.x * (" << index
              << ")blockDim.x + threadIdx.x; o < " << outCount << "; o += ("
              << index << ")gridDim.x * blockDim.x) {\n";
    accumulateOutput(index, inNames, "0", "++r");
    globalsOs << "    out[o] = " << storedValue(element, finish) << ";\n"
              << "  }\n}\n\n";
    launchKernel(
        kernel,
        std::max<int64_t>(1, std::min<int64_t>((outCount + 255) / 256, 8192)),
        inputs, result, where);
    return success();
  }

  // CPU: one pass over the iteration space, accumulating per output element.
  std::string accumulators = fresh("kAccumulators");
  // thread_local: in loopback mode every rank runs this code on its thread.
  globalsOs << "static thread_local " << accType << " " << accumulators << "["
            << outCount << "];\n";
  int scopeIndent = indent;
  SmallVector<std::string> inNames = openInputScope(where, inputs);
  line() << resultType << " *out = " << typed(result, false) << ";\n";
  line() << "for (int64_t o = 0; o < " << outCount << "; ++o) " << accumulators
         << "[o] = " << init << ";\n";
  for (int d = 0; d < rank; ++d)
    line().indent(2 * d) << "for (int64_t i" << d << " = 0; i" << d << " < "
                         << space[d] << "; ++i" << d << ")"
                         << (d + 1 == rank ? " {\n" : "\n");
  indent += rank;
  line() << accType << " &acc = " << accumulators << "[" << linearIndex(outStride)
         << "];\n";
  std::string value = emitElementStatements(
      bodyOs, indent, op, inputs, fusedBody, inNames, inIndex, nullptr, nextId);
  line() << accumulate(value) << "\n";
  indent = scopeIndent + rank;
  line() << "}\n";
  indent = scopeIndent + 1;
  line() << "for (int64_t o = 0; o < " << outCount << "; ++o) {\n";
  line() << "  " << accType << " acc = " << accumulators << "[o];\n";
  line() << "  out[o] = " << storedValue(element, finish) << ";\n";
  line() << "}\n";
  indent = scopeIndent;
  line() << "}\n";
  return success();
}

int64_t ProgramEmitter::packWidth(ValueRange inputs, Value result,
                                  ArrayRef<SmallVector<int64_t>> strides,
                                  ArrayRef<int64_t> outStored, bool flat) {
  ArrayRef<int64_t> shape = tensorType(result).getShape();
  if (shape.empty())
    return 0;
  // The widest streamed element sets the width: 16 bytes of it per pack.
  int64_t widest = storageBytes(tensorType(result).getElementType());
  for (auto [input, perDim] : llvm::zip(inputs, strides))
    if (isStreamed(perDim, flat))
      widest =
          std::max(widest, storageBytes(tensorType(input).getElementType()));
  int64_t width = 16 / widest;
  // Every pack starts at a multiple of `width` elements in each streamed
  // operand: whole packs per row (a streamed input's rows are the output's
  // rows, or it is flat), and each base aligned to a whole pack.
  int64_t run = flat ? computeProduct(shape) : shape.back();
  if (width < 2 || run % width != 0)
    return 0;
  auto aligned = [&](Value value) {
    return knownAlignment(value) %
               (width * storageBytes(tensorType(value).getElementType())) ==
           0;
  };
  // Row by row, a strided piece's rows (read, or written into a
  // concatenation) must also start whole packs apart (flat operands are
  // row-major).
  auto packsApart = [&](ArrayRef<int64_t> perDim) {
    return flat || llvm::all_of(perDim.drop_back(), [&](int64_t stride) {
             return stride % width == 0;
           });
  };
  if (!aligned(result) || !packsApart(outStored))
    return 0;
  for (auto [input, perDim] : llvm::zip(inputs, strides))
    if (isStreamed(perDim, flat) && (!aligned(input) || !packsApart(perDim)))
      return 0;
  return width;
}

void ProgramEmitter::emitPackedLoop(ValueRange inputs, Value result,
                                    StringRef outAt, Block *fusedBody,
                                    ArrayRef<std::string> inNames,
                                    ArrayRef<std::string> inIndex,
                                    ArrayRef<bool> needed,
                                    ArrayRef<SmallVector<int64_t>> strides,
                                    bool flat, int64_t width, StringRef index) {
  ArrayRef<int64_t> shape = tensorType(result).getShape();
  int64_t count = computeProduct(shape);
  std::string w = std::to_string(width);
  auto packType = [&](Value value) {
    return "loom_pack<" +
           std::string(storageType(tensorType(value).getElementType())) + ", " +
           w + ">";
  };
  globalsOs << "  // " << w
            << " elements per thread, each operand's in one access.\n"
            << "  for (" << index << " p = blockIdx.x * (" << index
            << ")blockDim.x + threadIdx.x; p < " << count / width << "; p += ("
            << index << ")gridDim.x * blockDim.x) {\n"
            << "    " << index << " i = p * " << w << ";\n";
  emitNeededIndices(globalsOs, "    ", index, "i", shape, needed);
  // Streamed inputs arrive as packs read element by element below; an
  // input broadcast along the last dimension is one element per pack.
  SmallVector<std::string> names(inNames), at(inIndex);
  for (auto [i, perDim] : llvm::enumerate(strides)) {
    if (!isStreamed(perDim, flat))
      continue;
    std::string pack = fresh("pack");
    globalsOs << "    " << packType(inputs[i]) << " " << pack
              << " = loom_load_pack<" << w << ">(" << inNames[i] << " + "
              << inIndex[i] << ");\n";
    names[i] = pack + ".v";
    at[i] = "j";
  }
  globalsOs << "    " << packType(result) << " packed;\n"
            << "#pragma unroll\n"
            << "    for (int j = 0; j < " << w << "; ++j) {\n";
  std::string value =
      emitElementStatements(globalsOs, 3, result.getDefiningOp(), inputs,
                            fusedBody, names, at, nullptr, nextId);
  globalsOs << "      packed.v[j] = "
            << storedValue(tensorType(result).getElementType(), value)
            << ";\n    }\n"
            << "    loom_store_pack<" << w << ">(out + " << outAt
            << ", packed);\n  }\n}\n\n";
  usesPacks = true;
}

LogicalResult ProgramEmitter::emitElementwise(Operation *op, ValueRange inputs,
                                              Block *fusedBody) {
  Value result = op->getResult(0);
  if (failed(checkPlanned(op)))
    return failure();
  if (fusedBody) {
    Operation *last = fusedBody->getTerminator()->getPrevNode();
    if (last && isa<SumOp, MeanOp, MaxOp>(last))
      return emitFusedReduction(op, inputs, fusedBody, last);
  }
  ArrayRef<int64_t> shape = tensorType(result).getShape();
  int rank = int(shape.size());
  SmallVector<int64_t> outStrides = computeStrides(shape);
  int64_t count = computeProduct(shape);
  // The result's strides where it is stored: a piece written into a
  // concatenation in place steps as the concatenation does.
  SmallVector<int64_t> outStored = operandStrides(result, rank);
  bool outRowMajor = isRowMajorInBuffer(result);

  // Each input's stride per output dimension (0 where it broadcasts). When
  // every input is either the output's shape or a scalar, and the result
  // is stored row-major, one flat index serves all.
  SmallVector<SmallVector<int64_t>> strides;
  bool flat = outRowMajor;
  for (Value input : inputs) {
    ArrayRef<int64_t> inShape = tensorType(input).getShape();
    SmallVector<int64_t> perDim = operandStrides(input, rank);
    bool full = isRowMajorInBuffer(input) &&
                (perDim == ArrayRef<int64_t>(outStrides) ||
                 computeProduct(inShape) == count);
    bool scalar = llvm::all_of(perDim, [](int64_t s) { return s == 0; });
    flat &= full || scalar;
    strides.push_back(perDim);
  }
  auto isScalar = [](ArrayRef<int64_t> perDim) {
    return llvm::all_of(perDim, [](int64_t s) { return s == 0; });
  };
  SmallVector<std::string> inIndex;
  std::string outIndex;
  if (flat) {
    outIndex = "i";
    for (ArrayRef<int64_t> perDim : strides)
      inIndex.push_back(isScalar(perDim) ? "0" : "i");
  } else {
    outIndex = linearIndex(outStored);
    for (ArrayRef<int64_t> perDim : strides)
      inIndex.push_back(linearIndex(perDim));
  }
  std::string where =
      (op->getName().getStringRef() + " at " + formatSourceLoc(op->getLoc()))
          .str();

  if (target == Target::Cuda) {
    // One kernel per group: a grid-stride loop over the output's elements,
    // whose linear index i is the output's offset. An operand that steps
    // along one run of the output's dimensions, laid out as they are, and
    // is broadcast along the others (the output's shape, a bias, a table of
    // positions, a scale per row) is at i divided by the elements after
    // the run, modulo the run's elements. Other operands keep their offset
    // from the indices of the dimensions they step along, unravelled from i
    // (each a division, slow beside an element's work). A size-1 dimension
    // has stride 0 in every operand (broadcastStrides).
    SmallVector<bool> needed(rank, false);
    if (!flat) {
      for (auto [at, dimStrides] : llvm::zip(inIndex, strides)) {
        ArrayRef<int64_t> perDim = dimStrides;
        auto stepping = llvm::make_filter_range(
            llvm::seq(0, rank), [&](int d) { return perDim[d] != 0; });
        if (stepping.empty())
          continue; // a scalar: at is "0"
        int first = *stepping.begin(), last = first;
        for (int d : stepping)
          last = d;
        int64_t after = outStrides[last];
        if (llvm::all_of(llvm::seq(first, last + 1), [&](int d) {
              return shape[d] == 1 || perDim[d] * after == outStrides[d];
            })) {
          at = "i";
          if (after != 1)
            at += " / " + std::to_string(after);
          if (first > 0)
            at += " % " + std::to_string(outStrides[first - 1] / after);
          continue;
        }
        for (int d : stepping)
          needed[d] = true;
      }
    }
    // A result stored through strides is at the offset of its indices.
    std::string outAt = "i";
    if (!outRowMajor) {
      for (int d = 0; d < rank; ++d)
        needed[d] |= outStored[d] != 0;
      outAt = outIndex;
    }
    SmallVector<std::string> inNames;
    std::string kernel = beginKernel(inputs, result, where, inNames);
    // 32-bit index arithmetic when it fits: 64-bit division is slow on GPUs.
    const char *index = count < (int64_t(1) << 31) ? "int32_t" : "int64_t";
    if (int64_t width = packWidth(inputs, result, strides, outStored, flat)) {
      emitPackedLoop(inputs, result, outAt, fusedBody, inNames, inIndex,
                     needed, strides, flat, width, index);
      launchKernel(kernel,
                   std::max<int64_t>(
                       1, std::min<int64_t>((count / width + 255) / 256, 8192)),
                   inputs, result, where);
      return success();
    }
    globalsOs << "  for (" << index << " i = blockIdx.x * (" << index
              << ")blockDim.x + threadIdx.x; i < " << count << "; i += ("
              << index << ")gridDim.x * blockDim.x) {\n";
    emitNeededIndices(globalsOs, "    ", index, "i", shape, needed);
    emitElementStatements(globalsOs, 2, op, inputs, fusedBody, inNames, inIndex,
                          &outAt, nextId);
    globalsOs << "  }\n}\n\n";
    launchKernel(
        kernel,
        std::max<int64_t>(1, std::min<int64_t>((count + 255) / 256, 8192)),
        inputs, result, where);
    return success();
  }

  int scopeIndent = indent;
  SmallVector<std::string> inNames = openInputScope(where, inputs);
  line() << storageType(tensorType(result).getElementType())
         << " *out = " << typed(result, false) << ";\n";
  if (flat) {
    line() << "for (int64_t i = 0; i < " << count << "; ++i) {\n";
  } else {
    for (int d = 0; d < rank; ++d)
      line().indent(2 * d) << "for (int64_t i" << d << " = 0; i" << d << " < "
                           << shape[d] << "; ++i" << d << ")"
                           << (d + 1 == rank ? " {\n" : "\n");
    indent += rank - 1;
  }
  emitElementStatements(bodyOs, indent + 1, op, inputs, fusedBody, inNames,
                        inIndex, &outIndex, nextId);
  line() << "}\n";
  indent = scopeIndent;
  line() << "}\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// What a GEMM's epilogue can do for the fusion group that reads its
/// product (loomrt_contract_epilogue): the group, its kind
/// (LOOMRT_EPILOGUE_*), the bias and, for a residual sum, the residual.
struct EpilogueReader {
  FusedOp group;
  const char *kind = nullptr;
  Value bias, residual;
};

/// The fusion group that is the one reader of `product` when it computes
/// gelu(product + bias, approximate = "tanh") or product + bias + residual,
/// with `bias` a contiguous vector along the product's last dimension, the
/// residual of the product's shape, all of one float type and laid out
/// row-major: what cuBLASLt's GELU_BIAS or BIAS epilogues compute (in f32,
/// rounded once). An empty group otherwise.
static EpilogueReader epilogueReader(Value product) {
  if (!product.hasOneUse())
    return {};
  auto fused = dyn_cast<FusedOp>(*product.getUsers().begin());
  if (!fused || fused->getBlock() != product.getParentBlock())
    return {};
  Block &body = fused.getBody().front();
  auto ops = body.without_terminator();
  if (std::distance(ops.begin(), ops.end()) != 2)
    return {};
  Operation *second = &*std::next(ops.begin());
  auto add = dyn_cast<AddOp>(&*ops.begin());
  if (!add || body.getTerminator()->getOperand(0) != second->getResult(0))
    return {};
  // The input of the group that block argument `v` stands for, where `v` is
  // one; then the product's partner in the first sum is the bias.
  auto input = [&](Value v) -> Value {
    auto argument = dyn_cast<BlockArgument>(v);
    return argument ? fused.getInputs()[argument.getArgNumber()] : Value();
  };
  EpilogueReader reader;
  reader.group = fused;
  if (input(add.getLhs()) == product)
    reader.bias = input(add.getRhs());
  else if (input(add.getRhs()) == product)
    reader.bias = input(add.getLhs());
  if (!reader.bias || reader.bias == product)
    return {};
  if (auto gelu = dyn_cast<GeluOp>(second)) {
    if (gelu.getInput() != add.getResult() ||
        gelu.getApproximate() != GeluApproximation::Tanh)
      return {};
    reader.kind = "LOOMRT_EPILOGUE_BIAS_GELU_TANH";
  } else if (auto sum = dyn_cast<AddOp>(second)) {
    Value other = sum.getLhs() == add.getResult()   ? sum.getRhs()
                  : sum.getRhs() == add.getResult() ? sum.getLhs()
                                                    : Value();
    reader.residual = other ? input(other) : Value();
    if (!reader.residual || reader.residual == product)
      return {};
    reader.kind = "LOOMRT_EPILOGUE_BIAS_RESIDUAL";
  } else {
    return {};
  }
  RankedTensorType productType = tensorType(product),
                   biasType = tensorType(reader.bias),
                   resultType = tensorType(fused.getResult());
  Type element = productType.getElementType();
  if (!isFloat(element) || productType.getRank() < 1 ||
      biasType.getElementType() != element ||
      resultType.getElementType() != element ||
      resultType.getShape() != productType.getShape() ||
      biasType.getRank() != 1 ||
      biasType.getDimSize(0) != productType.getShape().back() ||
      !isRowMajorInBuffer(product) || !isRowMajorInBuffer(reader.bias) ||
      !isRowMajorInBuffer(fused.getResult()))
    return {};
  if (reader.residual && (tensorType(reader.residual) != resultType ||
                          !isRowMajorInBuffer(reader.residual)))
    return {};
  return reader;
}

/// Whether `value` holds its data when `op` runs: every op that makes it or
/// a value it views (a collective, the wait that completes one, a loom.combined)
/// runs before `op` in `op`'s block, or outside that block.
static bool madeBefore(Value value, Operation *op) {
  Block *block = op->getBlock();
  for (Value v = value; v; v = viewedValue(v))
    if (Operation *maker = v.getDefiningOp())
      if (Operation *inBlock = block->findAncestorOpInBlock(*maker))
        if (inBlock == op || !inBlock->isBeforeInBlock(op))
          return false;
  return true;
}

/// Whether the ops strictly between `from` and `to` (one block) are all
/// views, which neither read nor write memory.
static bool onlyViewsBetween(Operation *from, Operation *to) {
  for (Operation *between = from->getNextNode(); between && between != to;
       between = between->getNextNode())
    if (!isView(between))
      return false;
  return true;
}

LogicalResult ProgramEmitter::emitContraction(Operation *op, Value a, Value b,
                                              Value out, StringRef spec) {
  std::string name =
      contractionDescriptor(a, b, tensorType(out), stridesInBuffer(out), spec);
  EpilogueReader reader =
      target == Target::Cuda && b ? epilogueReader(out) : EpilogueReader();
  // The epilogue writes the group's result while the GEMM reads its
  // operands. The plan puts the result over the product where the arena
  // does not grow so (loom-plan-memory); elsewhere it may give the result
  // an operand's place once the operand is dead. A residual the epilogue
  // may read in place, as C.
  Value result = reader.group ? reader.group.getResult() : Value();
  auto samePlace = [](Value x, Value y) {
    ArenaAddress from = arenaAddress(x), to = arenaAddress(y);
    return from.offset == to.offset && from.steps == to.steps;
  };
  bool residualFits = !reader.residual ||
                      !overlap(result, reader.residual) ||
                      samePlace(reader.residual, result);
  // The epilogue runs where the GEMM does, before the ops between it and
  // the group: the bias and the residual must be made by then (not by a
  // collective after the GEMM), and the result's bytes must be free by
  // then: they are the product's, or nothing runs in between.
  if (reader.group && !overlap(result, a) && !overlap(result, b) &&
      !overlap(result, reader.bias) && residualFits &&
      madeBefore(reader.bias, op) &&
      (!reader.residual || madeBefore(reader.residual, op)) &&
      (samePlace(out, result) || onlyViewsBetween(op, reader.group))) {
    // Numbered apart from fresh() names, so that other names stay as they
    // are with or without the epilogue.
    std::string flag = "epilogue" + std::to_string(epilogueFlags.size());
    epilogueFlags[reader.group] = flag;
    line() << "const int " << flag << " = loomrt_contract_epilogue(rt, &"
           << name << ", " << pointer(a) << ", " << pointer(b) << ", "
           << pointer(out) << ", " << reader.kind << ", "
           << pointer(reader.bias) << ", "
           << tensorType(reader.bias).getDimSize(0) << ", "
           << (reader.residual ? pointer(reader.residual) : "nullptr") << ", "
           << pointer(result) << "); // " << op->getName() << " at "
           << formatSourceLoc(op->getLoc()) << ", with "
           << (reader.residual ? "the bias and residual" : "the bias and GELU")
           << " at " << formatSourceLoc(reader.group->getLoc()) << "\n";
    return success();
  }
  line() << "loomrt_contract(rt, &" << name << ", " << pointer(a) << ", "
         << (b ? pointer(b) : "nullptr") << ", " << pointer(out) << "); // "
         << op->getName() << " at " << formatSourceLoc(op->getLoc()) << "\n";
  return success();
}

LogicalResult ProgramEmitter::emitBatchedContraction(BatchedEinsumOp op) {
  // loom-batch-contractions checked that the members are equally spaced.
  auto step = [](Value first, Value second) {
    int64_t bytes = arenaAddress(second).offset - arenaAddress(first).offset;
    return bytes / storageBytes(tensorType(first).getElementType());
  };
  Value b0 = op.getRhs()[0], out0 = op.getResults()[0];
  Group group = {int64_t(op.getRhs().size()), step(b0, op.getRhs()[1]),
                 step(out0, op.getResults()[1])};
  std::string name =
      contractionDescriptor(op.getLhs(), b0, tensorType(out0),
                            stridesInBuffer(out0), op.getSpec(), &group);
  line() << "loomrt_contract(rt, &" << name << ", " << pointer(op.getLhs())
         << ", " << pointer(b0) << ", " << pointer(out0) << "); // "
         << op->getName() << " of " << group.count << " at "
         << formatSourceLocs(op->getLoc()) << "\n";
  return success();
}

std::string ProgramEmitter::contractionDescriptor(Value a, Value b,
                                                  RankedTensorType outType,
                                                  ArrayRef<int64_t> oStrides,
                                                  StringRef spec,
                                                  const Group *group) {
  // Letters: batch (a, b, out), m (a, out), n (b, out), k (a, b), and
  // letters of one operand only, summed before the product.
  StringRef inputs = spec.split("->").first,
            outLetters = spec.split("->").second;
  StringRef aLetters = inputs.split(',').first,
            bLetters = inputs.split(',').second;
  ArrayRef<int64_t> aShape = tensorType(a).getShape();
  SmallVector<int64_t> aStrides = stridesInBuffer(a);
  ArrayRef<int64_t> bShape = b ? tensorType(b).getShape() : ArrayRef<int64_t>();
  SmallVector<int64_t> bStrides =
      b ? stridesInBuffer(b) : SmallVector<int64_t>();
  auto strideOf = [](StringRef letters, ArrayRef<int64_t> strides, char c) {
    int64_t s = 0; // a repeated letter walks the diagonal
    for (auto [i, l] : llvm::enumerate(letters))
      if (l == c)
        s += strides[i];
    return s;
  };
  auto sizeOf = [&](char c) -> int64_t {
    for (auto [i, l] : llvm::enumerate(aLetters))
      if (l == c)
        return aShape[i];
    for (auto [i, l] : llvm::enumerate(bLetters))
      if (l == c)
        return bShape[i];
    return 1;
  };
  auto [batch, m, n, k, aSum, bSum] =
      contractionLetters(aLetters, bLetters, outLetters);
  auto view = [&](std::initializer_list<std::pair<StringRef, bool>> groups,
                  StringRef letters, ArrayRef<int64_t> strides,
                  std::optional<int64_t> groupStride) {
    SmallVector<int64_t> sizes, steps;
    if (group && groupStride) {
      sizes.push_back(group->count);
      steps.push_back(*groupStride);
    }
    for (auto [letterGroup, use] : groups)
      if (use)
        for (char c : letterGroup) {
          sizes.push_back(sizeOf(c));
          steps.push_back(strideOf(letters, strides, c));
        }
    return "{" + std::to_string(sizes.size()) + ", " + list(sizes) + ", " +
           list(steps) + "}";
  };
  std::string name = fresh("kContraction");
  // Out dims follow the letter groups; their strides are the output's.
  globalsOs << "static const loomrt_contraction " << name << " = {"
            << batch.size() + (group ? 1 : 0) << ", " << m.size() << ", "
            << n.size() << ", " << k.size() << ", "
            << dtypeEnum(tensorType(a).getElementType()) << ", "
            << (b ? dtypeEnum(tensorType(b).getElementType()) : "LOOMRT_F32")
            << ", " << dtypeEnum(outType.getElementType()) << ",\n    "
            << view({{batch, true}, {m, true}, {k, true}}, aLetters, aStrides,
                    0)
            << ",\n    "
            << view({{aSum, true}}, aLetters, aStrides, std::nullopt)
            << ",\n    "
            << view({{batch, true}, {k, true}, {n, true}}, bLetters, bStrides,
                    group ? group->bStride : 0)
            << ",\n    "
            << view({{bSum, true}}, bLetters, bStrides, std::nullopt)
            << ",\n    "
            << view({{batch, true}, {m, true}, {n, true}}, outLetters, oStrides,
                    group ? group->outStride : 0)
            << "};\n";
  return name;
}

//===----------------------------------------------------------------------===//
// The rest of the ops
//===----------------------------------------------------------------------===//

LogicalResult ProgramEmitter::emitConstant(ConstantOp op) {
  if (failed(checkPlanned(op)))
    return failure();
  auto value = cast<DenseElementsAttr>(op.getValue());
  Type element = value.getElementType();
  int64_t count = tensorType(op.getResult()).getNumElements();
  if (count > (int64_t(1) << 20))
    return fail(op, "constants of more than 2^20 elements are not supported");
  std::string name = fresh("kConst");
  SmallVector<std::string> items;
  // Splats are written out: constants are small (scalars, masks).
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = value.isSplat() ? 0 : i;
    if (isFloat(element))
      items.push_back(std::to_string((*(value.value_begin<APFloat>() + index))
                                         .bitcastToAPInt()
                                         .getZExtValue()) +
                      "u");
    else
      items.push_back(
          int64Literal((*(value.value_begin<APInt>() + index)).getSExtValue()));
  }
  const char *bitsType = element.isF32() ? "uint32_t"
                         : element.isBF16() || element.isF16()
                             ? "uint16_t"
                             : storageType(element);
  globalsOs << "static const " << bitsType << " " << name << "[] = {"
            << llvm::join(items, ", ") << "};\n";
  line() << "loomrt_constant(rt, " << pointer(op.getResult()) << ", " << name
         << ", sizeof(" << name << "));\n";
  return success();
}

LogicalResult ProgramEmitter::emitSlice(SliceOp op) {
  std::string inShape = int64Table(tensorType(op.getInput()).getShape());
  std::string start = int64Table(op.getStart());
  std::string outShape = int64Table(tensorType(op.getResult()).getShape());
  line() << "loomrt_slice("
         << dtypeEnum(tensorType(op.getInput()).getElementType()) << ", "
         << pointer(op.getInput()) << ", " << pointer(op.getResult()) << ", "
         << tensorType(op.getInput()).getRank() << ", " << inShape << ", "
         << start << ", " << outShape << "); // loom.slice at "
         << formatSourceLoc(op.getLoc()) << "\n";
  return success();
}

/// The runtime's name for a reduction (it reduces by sum or max only).
static FailureOr<const char *> runtimeReduction(ReductionKind kind) {
  if (kind == ReductionKind::Sum)
    return "LOOMRT_SUM";
  if (kind == ReductionKind::Max)
    return "LOOMRT_MAX";
  return failure();
}

/// "outer, chunk" of a piece of `shape` cut along `dim` (loomrt.h).
static std::string outerAndChunk(ArrayRef<int64_t> shape, int64_t dim) {
  return std::to_string(computeProduct(shape.take_front(dim))) + ", " +
         std::to_string(computeProduct(shape.drop_front(dim)));
}

LogicalResult ProgramEmitter::emitCollective(Operation *op) {
  if (failed(checkPlanned(op)))
    return failure();
  auto dtype = [](Value v) {
    return dtypeEnum(tensorType(v).getElementType());
  };
  std::string where = site(op);
  if (auto ar = dyn_cast<AllReduceOp>(op)) {
    FailureOr<const char *> kind = runtimeReduction(ar.getReduction());
    if (failed(kind))
      return fail(op, "the runtime reduces by sum or max only");
    std::string axes = axesTable(ar.getAxes());
    line() << "loomrt_all_reduce(rt, " << where << ", " << axes << ", "
           << ar.getAxes().size() << ", " << dtype(ar.getInput()) << ", "
           << *kind << ", " << pointer(ar.getInput()) << ", "
           << pointer(ar.getResult()) << ", "
           << tensorType(ar.getInput()).getNumElements() << ");\n";
    return success();
  }
  if (auto ag = dyn_cast<AllGatherOp>(op)) {
    std::string axes = axesTable(ag.getAxes());
    line() << "loomrt_all_gather(rt, " << where << ", " << axes << ", "
           << ag.getAxes().size() << ", " << dtype(ag.getInput()) << ", "
           << pointer(ag.getInput()) << ", " << pointer(ag.getResult()) << ", "
           << outerAndChunk(tensorType(ag.getInput()).getShape(), ag.getDim())
           << ");\n";
    return success();
  }
  if (auto rs = dyn_cast<ReduceScatterOp>(op)) {
    FailureOr<const char *> kind = runtimeReduction(rs.getReduction());
    if (failed(kind))
      return fail(op, "the runtime reduces by sum or max only");
    std::string axes = axesTable(rs.getAxes());
    line() << "loomrt_reduce_scatter(rt, " << where << ", " << axes << ", "
           << rs.getAxes().size() << ", " << dtype(rs.getInput()) << ", "
           << *kind << ", " << pointer(rs.getInput()) << ", "
           << pointer(rs.getResult()) << ", "
           << outerAndChunk(tensorType(rs.getResult()).getShape(), rs.getDim())
           << ");\n";
    return success();
  }
  if (auto slice = dyn_cast<AllSliceOp>(op)) {
    std::string axes = axesTable(slice.getAxes());
    line() << "loomrt_all_slice(rt, " << axes << ", " << slice.getAxes().size()
           << ", " << dtype(slice.getInput()) << ", "
           << pointer(slice.getInput()) << ", " << pointer(slice.getResult())
           << ", "
           << outerAndChunk(tensorType(slice.getResult()).getShape(),
                            slice.getDim())
           << ");\n";
    return success();
  }
  if (auto a2a = dyn_cast<AllToAllOp>(op)) {
    std::string axes = axesTable(a2a.getAxes());
    ArrayRef<int64_t> shape = tensorType(a2a.getInput()).getShape();
    std::string shapeTable = int64Table(shape);
    std::string splitAxes = a2a.getSplitAxes() ? axesTable(*a2a.getSplitAxes())
                                               : std::string("nullptr");
    line() << "loomrt_all_to_all(rt, " << where << ", " << axes << ", "
           << a2a.getAxes().size() << ", " << dtype(a2a.getInput()) << ", "
           << pointer(a2a.getInput()) << ", " << pointer(a2a.getResult())
           << ", " << shape.size() << ", " << shapeTable << ", "
           << a2a.getSplitDim() << ", " << a2a.getConcatDim() << ", "
           << splitAxes << ");\n";
    return success();
  }
  if (auto permute = dyn_cast<CollectivePermuteOp>(op)) {
    std::string axes = axesTable(permute.getAxes());
    std::string pairs = int64Table(permute.getPairs());
    line() << "loomrt_collective_permute(rt, " << where << ", " << axes << ", "
           << permute.getAxes().size() << ", " << dtype(permute.getInput())
           << ", " << pointer(permute.getInput()) << ", "
           << pointer(permute.getResult()) << ", "
           << tensorType(permute.getInput()).getNumElements() << ", " << pairs
           << ", " << permute.getPairs().size() / 2 << ");\n";
    return success();
  }
  if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
    std::string axes = axesTable(broadcast.getAxes());
    line() << "loomrt_broadcast(rt, " << where << ", " << axes << ", "
           << broadcast.getAxes().size() << ", " << dtype(broadcast.getInput())
           << ", " << pointer(broadcast.getInput()) << ", "
           << pointer(broadcast.getResult()) << ", "
           << tensorType(broadcast.getInput()).getNumElements() << ", "
           << broadcast.getRoot() << ");\n";
    return success();
  }
  if (auto send = dyn_cast<SendOp>(op)) {
    line() << "loomrt_send(rt, " << where << ", "
           << axisIndex(cast<StringAttr>(send.getAxes()[0]).getValue()) << ", "
           << send.getOffset() << ", " << dtype(send.getInput()) << ", "
           << pointer(send.getInput()) << ", "
           << tensorType(send.getInput()).getNumElements() << ");\n";
    return success();
  }
  if (auto recv = dyn_cast<RecvOp>(op)) {
    line() << "loomrt_recv(rt, " << where << ", "
           << axisIndex(cast<StringAttr>(recv.getAxes()[0]).getValue()) << ", "
           << recv.getOffset() << ", " << dtype(recv.getResult()) << ", "
           << pointer(recv.getResult()) << ", "
           << tensorType(recv.getResult()).getNumElements() << ");\n";
    return success();
  }
  return fail(op, "unknown collective");
}

LogicalResult ProgramEmitter::emitCombined(CombinedOp op) {
  SmallVector<CollectiveOpInterface> members = op.getMembers();
  SmallVector<std::string> rows;
  for (CollectiveOpInterface member : members) {
    if (failed(checkPlanned(member)))
      return failure();
    Value in = member->getOperand(0), out = member->getResult(0);
    // The piece each rank holds, as the member's own call would take it.
    std::string layout =
        "1, " + std::to_string(tensorType(in).getNumElements());
    if (auto gather = dyn_cast<AllGatherOp>(*member))
      layout = outerAndChunk(tensorType(in).getShape(), gather.getDim());
    else if (auto scatter = dyn_cast<ReduceScatterOp>(*member))
      layout = outerAndChunk(tensorType(out).getShape(), scatter.getDim());
    rows.push_back("{" + pointer(in) + ", " + pointer(out) + ", " +
                   dtypeEnum(tensorType(in).getElementType()) + ", " + layout +
                   "}");
  }
  CollectiveOpInterface first = members.front();
  const char *kind = isa<AllGatherOp>(*first)   ? "LOOMRT_ALL_GATHER"
                     : isa<AllReduceOp>(*first) ? "LOOMRT_ALL_REDUCE"
                                                : "LOOMRT_REDUCE_SCATTER";
  // A gather's value is unused; the call takes one.
  FailureOr<const char *> reduction =
      runtimeReduction(first.getReductionKind().value_or(ReductionKind::Sum));
  if (failed(reduction))
    return fail(op, "the runtime reduces by sum or max only");
  std::string name = fresh("members");
  line() << "{ // loom.combined: " << members.size() << " "
         << first->getName().getStringRef() << "s\n";
  ++indent;
  line() << "const loomrt_member " << name << "[] = {" << llvm::join(rows, ", ")
         << "};\n";
  ArrayAttr axes = cast<ArrayAttr>(first->getAttr("axes"));
  line() << "loomrt_combined(rt, "
         << quote(("loom.combined of " + first->getName().getStringRef() +
                   " at " + formatSourceLocs(op->getLoc()))
                      .str())
         << ", " << kind << ", " << axesTable(axes) << ", " << axes.size()
         << ", " << *reduction << ", " << name << ", " << members.size()
         << ");\n";
  --indent;
  line() << "}\n";
  return success();
}

/// The wait of `start` that comes first in its block, which is where the
/// runtime waits for all of its futures; null when one of them is read by
/// anything but a wait (or the prefetch) in that block.
static WaitOp firstWait(StartOp start) {
  WaitOp first;
  for (Value future : start.getFutures())
    for (Operation *user : future.getUsers()) {
      if (isa<PrefetchOp>(user))
        continue;
      auto wait = dyn_cast<WaitOp>(user);
      if (!wait || wait->getBlock() != start->getBlock())
        return nullptr;
      if (!first || wait->isBeforeInBlock(first))
        first = wait;
    }
  return first;
}

LogicalResult ProgramEmitter::emitStart(StartOp op) {
  if (!firstWait(op))
    return fail(op, "a started collective must be waited for, by loom.wait "
                    "ops in its own block");
  if (op.getPrefetch())
    return success(); // started before the loop, then one iteration ahead
  int number = int(futureNumbers.size());
  futureNumbers[op] = number;
  return emitStartedCollective(op, number);
}

LogicalResult ProgramEmitter::emitStartedCollective(StartOp op, int number) {
  line() << "loomrt_start_begin(rt, " << number << "); // loom.start at "
         << formatSourceLocs(op->getLoc()) << "\n";
  if (failed(emitOp(op.getStarted())))
    return failure();
  line() << "loomrt_start_end(rt, " << number << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitPrefetch(PrefetchOp op) {
  StartOp start = op.getStart();
  auto repeat = cast<RepeatOp>(op->getParentOp());
  std::string var = loopVariables.lookup(repeat);
  line() << "if (" << var << " + 1 < " << repeat.getCount()
         << ") { // loom.prefetch at " << formatSourceLoc(op->getLoc())
         << ": the next iteration's\n";
  ++indent;
  loopVariables[repeat] = "(" + var + " + 1)";
  LogicalResult emitted =
      emitStartedCollective(start, futureNumbers.lookup(start));
  loopVariables[repeat] = var;
  --indent;
  line() << "}\n";
  return emitted;
}

LogicalResult ProgramEmitter::emitWait(WaitOp op) {
  auto start = cast<StartOp>(op.getFuture().getDefiningOp());
  if (firstWait(start) != op)
    return success(); // the first wait waited for every future
  line() << "loomrt_wait(rt, " << futureNumbers.lookup(start)
         << "); // loom.wait at " << formatSourceLoc(op->getLoc()) << "\n";
  return success();
}

LogicalResult ProgramEmitter::emitRepeat(RepeatOp repeat) {
  if (failed(checkPlanned(repeat)))
    return failure();
  std::string var = "layer" + std::to_string(loopVariables.size());
  loopVariables[repeat] = var;
  line() << "// loom.repeat at " << formatSourceLoc(repeat.getLoc()) << "\n";
  // The memory plan may have placed a carried value in its loop's buffer
  // already (loom-plan-memory), and then there is nothing to copy.
  for (auto [carried, result] :
       llvm::zip(repeat.getCarried(), repeat.getCarriedResults()))
    if (pointer(result) != pointer(carried))
      line() << "loomrt_copy(rt, " << pointer(result) << ", "
             << pointer(carried) << ", " << tensorBytes(result.getType()) << ");\n";
  Block &body = repeat.getBody().front();
  // The first iteration's instances of the collectives that each iteration
  // starts for the next (loom.prefetch).
  loopVariables[repeat] = "0";
  for (StartOp start : body.getOps<StartOp>())
    if (start.getPrefetch()) {
      int number = int(futureNumbers.size());
      futureNumbers[start] = number;
      if (failed(emitStartedCollective(start, number)))
        return failure();
    }
  loopVariables[repeat] = var;
  line() << "for (int64_t " << var << " = 0; " << var << " < "
         << repeat.getCount() << "; ++" << var << ") {\n";
  ++indent;
  if (failed(emitBlock(body)))
    return failure();
  auto yield = cast<YieldOp>(body.getTerminator());
  size_t numCarried = repeat.getCarried().size();
  // Per-iteration outputs first: they may read a carried buffer that the
  // moves below overwrite.
  for (auto [index, value] :
       llvm::enumerate(yield.getValues().drop_front(numCarried))) {
    Value result = repeat.getResult(numCarried + index);
    line() << "loomrt_copy(rt, (" << pointer(result) << " + " << var << " * "
           << tensorBytes(value.getType()) << "), " << pointer(value) << ", "
           << tensorBytes(value.getType()) << ");\n";
  }
  SmallVector<int> sources;
  for (Value next : yield.getValues().take_front(numCarried)) {
    auto carried = repeat.getCarriedResults();
    auto found = llvm::find_if(carried, [&](Value result) {
      return pointer(result) == pointer(next);
    });
    sources.push_back(found == carried.end()
                          ? CarriedMove::kYieldedValue
                          : int(std::distance(carried.begin(), found)));
  }
  auto scratch =
      repeat->getAttrOfType<IntegerAttr>(LoomDialect::kScratchOffsetAttrName);
  for (CarriedMove move : carriedMoves(sources)) {
    auto place = [&](int slot, int carried) -> std::string {
      if (slot == CarriedMove::kYieldedValue)
        return pointer(yield.getValues()[carried]);
      if (slot == CarriedMove::kScratch)
        return "(arena + " + std::to_string(scratch.getInt()) + ")";
      return pointer(repeat.getResult(slot));
    };
    if (!scratch && (move.to == CarriedMove::kScratch ||
                     move.from == CarriedMove::kScratch))
      return fail(repeat, "carried values trade places but the memory plan "
                          "reserved no scratch buffer (run loom-plan-memory)");
    int moved = move.to == CarriedMove::kScratch ? move.from : move.to;
    line() << "loomrt_copy(rt, " << place(move.to, moved) << ", "
           << place(move.from, moved) << ", "
           << tensorBytes(repeat.getResult(moved).getType()) << ");\n";
  }
  --indent;
  line() << "}\n";
  return success();
}

LogicalResult ProgramEmitter::emitOp(Operation *op) {
  auto dtype = [](Value v) {
    return dtypeEnum(tensorType(v).getElementType());
  };
  auto shape = [](Value v) { return tensorType(v).getShape(); };
  auto where = [&]() { return formatSourceLoc(op->getLoc()); };
  if (auto start = dyn_cast<StartOp>(op))
    return emitStart(start);
  if (auto wait = dyn_cast<WaitOp>(op))
    return emitWait(wait);
  if (auto prefetch = dyn_cast<PrefetchOp>(op))
    return emitPrefetch(prefetch);
  if (isConcatView(op)) {
    // Read in place only if the plan put its arguments side by side.
    SmallVector<BlockArgument> arguments = concatViewArguments(op);
    for (size_t i = 0; i + 1 < arguments.size(); ++i)
      if (arenaAddress(arguments[i]).offset +
              tensorBytes(arguments[i].getType()) !=
          arenaAddress(arguments[i + 1]).offset)
        return fail(op, "internal error: the memory plan did not place the "
                        "pieces of a concatenation read in place side by "
                        "side");
  }
  if (isa<YieldOp, func::ReturnOp>(op) || isView(op))
    return success(); // views, and terminators handled by their parents
  if (auto constant = dyn_cast<ConstantOp>(op))
    return emitConstant(constant);
  if (auto fused = dyn_cast<FusedOp>(op))
    return emitElementwise(op, fused.getInputs(), &fused.getBody().front());
  if (isElementwise(op))
    return emitElementwise(op, op->getOperands(), nullptr);
  if (failed(checkPlanned(op)))
    return failure();
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    std::string spec = matmulSpec(tensorType(matmul.getLhs()).getShape(),
                                  tensorType(matmul.getRhs()).getShape(),
                                  tensorType(matmul.getResult()).getShape());
    return emitContraction(op, matmul.getLhs(), matmul.getRhs(),
                           matmul.getResult(), spec);
  }
  if (auto einsum = dyn_cast<EinsumOp>(op)) {
    StringRef spec = einsum.getSpec();
    Value b = einsum.getInputs().size() > 1 ? einsum.getInputs()[1] : Value();
    std::string full = spec.str();
    if (!b) // one operand: contract with the scalar 1
      full = (spec.split("->").first + ",->" + spec.split("->").second).str();
    return emitContraction(op, einsum.getInputs()[0], b, einsum.getResult(),
                           full);
  }
  if (auto batched = dyn_cast<BatchedEinsumOp>(op))
    return emitBatchedContraction(batched);
  if (isa<SumOp, MeanOp, MaxOp>(op)) {
    Value input = op->getOperand(0);
    auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
    uint32_t mask = 0;
    int64_t reduced = 1;
    for (int64_t d : dims.asArrayRef()) {
      mask |= 1u << d;
      reduced *= shape(input)[d];
    }
    double scale = isa<MeanOp>(op) ? 1.0 / double(reduced) : 1.0;
    // A strided piece only in a float's reduction of its last dimension
    // (Views.cpp).
    std::optional<std::string> inputRows;
    if (isRowMajorInBuffer(input) ||
        (mask == 1u << (shape(input).size() - 1) &&
         isa<FloatType>(tensorType(input).getElementType())))
      inputRows = rowsArgument(input);
    if (!inputRows)
      return fail(op, "a reduction cannot read this operand's layout");
    std::string shapeTable = int64Table(shape(input));
    line() << "loomrt_reduce(" << dtype(input) << ", "
           << (isa<MaxOp>(op) ? "LOOMRT_MAX" : "LOOMRT_SUM") << ", "
           << pointer(input) << ", " << pointer(op->getResult(0)) << ", "
           << shape(input).size() << ", " << shapeTable << ", " << mask << "u, "
           << llvm::format("%.17g", scale) << ", " << *inputRows << "); // "
           << op->getName() << " at " << where() << "\n";
    return success();
  }
  if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
    Value input = softmax.getInput();
    ArrayRef<int64_t> s = shape(input);
    int64_t dim = softmax.getDim();
    // A strided piece only over its last dimension (Views.cpp).
    std::optional<std::string> inputRows;
    if (isRowMajorInBuffer(input) || dim + 1 == int64_t(s.size()))
      inputRows = rowsArgument(input);
    if (!inputRows)
      return fail(op, "a softmax cannot read this operand's layout");
    line() << "loomrt_softmax(" << dtype(input) << ", " << pointer(input)
           << ", " << pointer(softmax.getResult()) << ", "
           << computeProduct(s.take_front(dim)) << ", " << s[dim] << ", "
           << computeProduct(s.drop_front(dim + 1)) << ", " << *inputRows
           << "); // loom.softmax at " << where() << "\n";
    return success();
  }
  if (auto stats = dyn_cast<SoftmaxStatsOp>(op)) {
    ArrayRef<int64_t> s = shape(stats.getInput());
    line() << "loomrt_softmax_stats(" << dtype(stats.getInput()) << ", "
           << pointer(stats.getInput()) << ", " << pointer(stats.getMax())
           << ", " << pointer(stats.getSum()) << ", "
           << computeProduct(s.drop_back()) << ", " << s.back() << ", "
           << (stats.getPartial() ? 1 : 0) << "); // loom.softmax_stats at "
           << where() << "\n";
    return success();
  }
  if (isa<LayerNormOp, RMSNormOp>(op)) {
    Value input = op->getOperand(0), scale = op->getOperand(1);
    bool rms = isa<RMSNormOp>(op);
    int64_t n = tensorType(scale).getNumElements();
    int64_t rows = tensorType(input).getNumElements() / std::max<int64_t>(n, 1);
    double eps = rms ? cast<RMSNormOp>(op).getEps().convertToDouble()
                     : cast<LayerNormOp>(op).getEps().convertToDouble();
    std::optional<std::string> inputRows = rowsArgument(input);
    if (!inputRows)
      return fail(op, "a norm cannot read this operand's layout");
    line() << "loomrt_norm(" << dtype(input) << ", " << pointer(input) << ", "
           << dtype(scale) << ", " << pointer(scale) << ", "
           << (rms ? std::string("nullptr") : pointer(op->getOperand(2)))
           << ", " << pointer(op->getResult(0)) << ", " << rows << ", " << n
           << ", " << llvm::format("%.17g", eps) << ", " << (rms ? 1 : 0)
           << ", " << *inputRows << "); // " << op->getName() << " at "
           << where() << "\n";
    return success();
  }
  if (auto addNorm = dyn_cast<AddNormOp>(op)) {
    Value scale = addNorm.getScale();
    int64_t n = tensorType(scale).getNumElements();
    int64_t rows =
        tensorType(addNorm.getLhs()).getNumElements() / std::max<int64_t>(n, 1);
    auto optional = [&](Value value) {
      return value ? pointer(value) : std::string("nullptr");
    };
    line() << "loomrt_add_norm(" << dtype(addNorm.getLhs()) << ", "
           << pointer(addNorm.getLhs()) << ", " << pointer(addNorm.getRhs())
           << ", " << optional(addNorm.getRhsBias()) << ", "
           << pointer(addNorm.getSum()) << ", " << dtype(scale) << ", "
           << pointer(scale) << ", " << optional(addNorm.getBias())
           << ", " << pointer(addNorm.getResult()) << ", " << rows << ", " << n
           << ", " << llvm::format("%.17g", addNorm.getEps().convertToDouble())
           << ", " << (addNorm.getRms() ? 1 : 0) << "); // " << op->getName()
           << " at " << formatSourceLocs(op->getLoc()) << "\n";
    return success();
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    ArrayRef<int64_t> q = shape(attention.getQuery()),
                      k = shape(attention.getKey()),
                      v = shape(attention.getValue());
    int64_t rank = int64_t(q.size());
    // q, k, v and the result are where they are, through their strides
    // (Views.h): head-split projections laid out [b, s, h, e] are read,
    // and a result laid out so for the out-projection is written, as
    // [b, h, s, e].
    SmallVector<std::string> pointers, strides;
    for (Value operand : {attention.getQuery(), attention.getKey(),
                          attention.getValue(), attention.getResult()}) {
      SmallVector<int64_t> steps = stridesInBuffer(operand);
      AttentionView view;
      if (!attentionView(shape(operand), steps, view))
        return fail(op, "attention cannot access this operand's layout");
      pointers.push_back(pointer(operand));
      strides.push_back(llvm::formatv("{{{0}, {1}, {2}}", view.outerStride,
                                      view.innerStride, view.rowStride));
    }
    std::string table = fresh("kAttention");
    globalsOs << "static const loomrt_attention_strides " << table << "[4] = {"
              << llvm::join(strides, ", ") << "};\n";
    int64_t inner = rank >= 3 ? q[rank - 3] : 1,
            outer = rank >= 3 ? computeProduct(q.drop_back(3)) : 1;
    line() << "loomrt_attention(" << dtype(attention.getQuery()) << ", "
           << llvm::join(pointers, ", ") << ", " << outer << ", " << inner
           << ", " << q[rank - 2] << ", " << k[rank - 2] << ", " << q[rank - 1]
           << ", " << v[rank - 1] << ", " << table << ", "
           << (attention.getCausal() ? 1 : 0) << ", "
           << llvm::format("%.17g", attention.getScale().convertToDouble())
           << "); // loom.attention at " << where() << "\n";
    return success();
  }
  auto vocabStart = [&](std::optional<ArrayAttr> axes, int64_t rows) {
    if (!axes || axes->empty())
      return std::string("0");
    std::string table = axesTable(*axes);
    return "loomrt_group_rank(rt, " + table + ", " +
           std::to_string(axes->size()) + ") * " + std::to_string(rows);
  };
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    ArrayRef<int64_t> table = shape(embedding.getTable());
    line() << "loomrt_embedding(" << dtype(embedding.getIds()) << ", "
           << pointer(embedding.getIds()) << ", "
           << tensorType(embedding.getIds()).getNumElements() << ", "
           << dtype(embedding.getTable()) << ", "
           << pointer(embedding.getTable()) << ", " << table[0] << ", "
           << table[1] << ", " << vocabStart(embedding.getVocabAxes(), table[0])
           << ", " << pointer(embedding.getResult())
           << "); // loom.embedding at " << where() << "\n";
    return success();
  }
  if (auto pick = dyn_cast<PickOp>(op)) {
    int64_t vocab = shape(pick.getLogits()).back();
    int64_t pieces = vocabPieces(pick.getVocabAxes());
    // The site names the cross-entropy the pick came from (same location).
    line() << "loomrt_pick(rt, " << site(op) << ", " << dtype(pick.getLogits())
           << ", " << pointer(pick.getLogits()) << ", "
           << tensorType(pick.getTargets()).getNumElements() << ", " << vocab
           << ", " << dtype(pick.getTargets()) << ", "
           << pointer(pick.getTargets()) << ", "
           << vocabStart(pick.getVocabAxes(), vocab) << ", " << vocab * pieces
           << ", (float *)" << pointer(pick.getResult()) << ");\n";
    return success();
  }
  if (auto stats = dyn_cast<LogitsStatsOp>(op)) {
    // The product as `rows..., y` times `y, z`, the logits row-major.
    int64_t rank = tensorType(stats.getLhs()).getRank();
    std::string rows =
        std::string("abcdefghijklmnopqrstuvwx").substr(0, rank - 1);
    ArrayRef<int64_t> rhs = shape(stats.getRhs());
    SmallVector<int64_t> logitsShape(shape(stats.getTargets()));
    logitsShape.push_back(rhs[1]);
    auto logitsType = RankedTensorType::get(logitsShape, stats.getLogitsType());
    std::string product = contractionDescriptor(
        stats.getLhs(), stats.getRhs(), logitsType, computeStrides(logitsShape),
        rows + "y,yz->" + rows + "z");
    int64_t pieces = vocabPieces(stats.getVocabAxes());
    line() << "loomrt_logits_stats(rt, " << site(op) << ", &" << product << ", "
           << pointer(stats.getLhs()) << ", " << pointer(stats.getRhs()) << ", "
           << dtype(stats.getTargets()) << ", " << pointer(stats.getTargets())
           << ", " << vocabStart(stats.getVocabAxes(), rhs[1]) << ", "
           << rhs[1] * pieces << ", " << (stats.getPartial() ? 1 : 0)
           << ", (float *)" << pointer(stats.getMax()) << ", (float *)"
           << pointer(stats.getSum()) << ", (float *)"
           << pointer(stats.getPicked()) << "); // loom.logits_stats at "
           << where() << "\n";
    return success();
  }
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    int64_t vocab = shape(ce.getLogits()).back();
    line() << "loomrt_cross_entropy(rt, " << site(op) << ", "
           << dtype(ce.getLogits()) << ", " << pointer(ce.getLogits()) << ", "
           << tensorType(ce.getTargets()).getNumElements() << ", " << vocab
           << ", " << dtype(ce.getTargets()) << ", " << pointer(ce.getTargets())
           << ", (float *)" << pointer(ce.getResult()) << ");\n";
    return success();
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    std::string shapeTable = int64Table(shape(transpose.getInput()));
    std::string perm = fresh("kPerm");
    globalsOs << "static const int " << perm
              << "[] = " << list(transpose.getPerm()) << ";\n";
    line() << "loomrt_transpose(" << dtype(transpose.getInput()) << ", "
           << pointer(transpose.getInput()) << ", "
           << pointer(transpose.getResult()) << ", "
           << shape(transpose.getInput()).size() << ", " << shapeTable << ", "
           << perm << "); // loom.transpose at " << where() << "\n";
    return success();
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    int64_t dim = concat.getDim();
    ArrayRef<int64_t> out = shape(concat.getResult());
    int64_t start = 0;
    for (Value input : concat.getInputs()) {
      int64_t size = shape(input)[dim];
      // A piece written in place by its own kernel is there already.
      if (inPlaceConcatOf(input)) {
        start += size;
        continue;
      }
      // A strided piece of another value is copied through its strides
      // into its place, a window of the result's rows.
      if (!isRowMajorInBuffer(input)) {
        SmallVector<int64_t> into = computeStrides(out);
        int64_t at = start * into[dim] *
                     storageBytes(tensorType(input).getElementType());
        std::string shapeTable = int64Table(shape(input));
        std::string fromTable = int64Table(stridesInBuffer(input));
        std::string intoTable = int64Table(into);
        line() << "loomrt_copy_strided(" << dtype(input) << ", "
               << pointer(input) << ", " << pointer(concat.getResult())
               << " + " << at << ", " << out.size() << ", " << shapeTable
               << ", " << fromTable << ", " << intoTable
               << "); // loom.concat at " << where() << "\n";
        start += size;
        continue;
      }
      line() << "loomrt_insert(" << dtype(input) << ", " << pointer(input)
             << ", " << pointer(concat.getResult()) << ", "
             << computeProduct(out.take_front(dim)) << ", " << size << ", "
             << out[dim] << ", " << start << ", "
             << computeProduct(out.drop_front(dim + 1))
             << "); // loom.concat at " << where() << "\n";
      start += size;
    }
    return success();
  }
  if (auto split = dyn_cast<SplitOp>(op)) {
    int64_t dim = split.getDim();
    ArrayRef<int64_t> in = shape(split.getInput());
    int64_t start = 0;
    for (Value result : split.getResults()) {
      int64_t size = shape(result)[dim];
      line() << "loomrt_extract(" << dtype(result) << ", "
             << pointer(split.getInput()) << ", " << pointer(result) << ", "
             << computeProduct(in.take_front(dim)) << ", " << in[dim] << ", "
             << size << ", " << start << ", "
             << computeProduct(in.drop_front(dim + 1)) << "); // loom.split at "
             << where() << "\n";
      start += size;
    }
    return success();
  }
  if (auto slice = dyn_cast<SliceOp>(op))
    return emitSlice(slice);
  if (auto repeat = dyn_cast<RepeatOp>(op))
    return emitRepeat(repeat);
  if (auto combined = dyn_cast<CombinedOp>(op))
    return emitCombined(combined);
  if (isa<AllReduceOp, AllGatherOp, ReduceScatterOp, AllSliceOp, AllToAllOp,
          CollectivePermuteOp, BroadcastOp, SendOp, RecvOp>(op))
    return emitCollective(op);
  return fail(op, "the backend does not support " +
                      op->getName().getStringRef() + " yet");
}

SmallVector<std::string> ProgramEmitter::openInputScope(StringRef where,
                                                        ValueRange inputs) {
  line() << "{ // " << where << "\n";
  ++indent;
  SmallVector<std::string> names;
  for (Value input : inputs) {
    std::string name = fresh("in");
    line() << "const " << storageType(tensorType(input).getElementType())
           << " *" << name << " = " << typed(input, true) << ";\n";
    names.push_back(name);
  }
  return names;
}

LogicalResult ProgramEmitter::emitBlock(Block &block) {
  for (Operation &op : block) {
    // (A copy: emitting the op may add flags and move the map's entries.)
    std::string flag = epilogueFlags.lookup(&op);
    if (!flag.empty()) {
      line() << "if (!" << flag << ") { // not in the GEMM's epilogue\n";
      ++indent;
    }
    auto kernel = kernelIndex.find(&op);
    if (kernel != kernelIndex.end())
      line() << "loomrt_kernel_begin(rt, " << kernel->second << ");\n";
    if (failed(emitOp(&op)))
      return failure();
    if (kernel != kernelIndex.end())
      line() << "loomrt_kernel_end(rt, " << kernel->second << ");\n";
    if (!flag.empty()) {
      --indent;
      line() << "}\n";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The model's description
//===----------------------------------------------------------------------===//

void ProgramEmitter::emitTables(raw_ostream &os) {
  auto describe = [&](raw_ostream &out, StringRef name, Type localType,
                      ShardingAttr sharding, int64_t offset, InitAttr init,
                      int64_t bound) {
    auto type = cast<RankedTensorType>(localType);
    SmallVector<int64_t> global, local(type.getShape()), counts;
    SmallVector<std::string> dimAxes;
    for (auto [d, size] : llvm::enumerate(type.getShape())) {
      SmallVector<int64_t> axes;
      int64_t factor = 1;
      if (sharding && d < sharding.getDims().size())
        for (StringAttr axis : sharding.getDims()[d].getAxes()) {
          if (mesh.isManualAxis(axis.getValue()))
            continue; // manual axes do not divide (the pipeline cuts them)
          axes.push_back(axisIndex(axis.getValue()));
          factor *= *mesh.getAxisSize(axis.getValue());
        }
      global.push_back(size * factor);
      counts.push_back(int64_t(axes.size()));
      dimAxes.push_back(list(axes.empty() ? ArrayRef<int64_t>{0} : axes));
    }
    const char *initKind = "LOOMRT_INIT_INPUT";
    double a = 0, b = 0;
    if (init) {
      switch (init.getKind()) {
      case InitKind::Normal:
        initKind = "LOOMRT_INIT_NORMAL";
        break;
      case InitKind::Uniform:
        initKind = "LOOMRT_INIT_UNIFORM";
        break;
      case InitKind::Zeros:
        initKind = "LOOMRT_INIT_ZEROS";
        break;
      case InitKind::Ones:
        initKind = "LOOMRT_INIT_ONES";
        break;
      }
      a = init.getA().convertToDouble();
      b = init.getB().convertToDouble();
    }
    auto orZero = [](ArrayRef<int64_t> v) {
      return list(v.empty() ? ArrayRef<int64_t>{0} : v);
    };
    out << "    {" << quote(name) << ", " << dtypeEnum(type.getElementType())
        << ", " << type.getRank() << ", " << orZero(global) << ", "
        << orZero(local) << ", " << orZero(counts) << ", {"
        << (dimAxes.empty() ? std::string("{0}") : llvm::join(dimAxes, ", "))
        << "}, " << offset << ", " << initKind << ", "
        << llvm::format("%.17g", a) << ", " << llvm::format("%.17g", b) << ", "
        << bound << "},\n";
  };
  auto shardingOf = [&](DictionaryAttr attrs) {
    return attrs ? attrs.getAs<ShardingAttr>(LoomDialect::kShardingAttrName)
                 : ShardingAttr();
  };
  std::string params, inputs, outputs;
  llvm::raw_string_ostream paramsOs(params), inputsOs(inputs),
      outputsOs(outputs);
  unsigned numParams = 0, numInputs = 0, numOutputs = 0;
  for (BlockArgument argument : model.getArguments()) {
    unsigned index = argument.getArgNumber();
    DictionaryAttr attrs = model.getArgAttrDict(index);
    int64_t offset =
        model.getArgAttrOfType<IntegerAttr>(index, LoomDialect::kOffsetAttrName)
            .getInt();
    if (auto name = attrs.getAs<StringAttr>(LoomDialect::kParamAttrName)) {
      describe(paramsOs, name.getValue(), argument.getType(), shardingOf(attrs),
               offset, attrs.getAs<InitAttr>(LoomDialect::kInitAttrName), 0);
      ++numParams;
    } else {
      auto input = attrs.getAs<StringAttr>(LoomDialect::kInputAttrName);
      bool isInt = !isFloat(tensorType(argument).getElementType());
      describe(inputsOs, input ? input.getValue() : StringRef("input"),
               argument.getType(), shardingOf(attrs), offset, InitAttr(),
               isInt ? syntheticIdBound(argument) : 0);
      ++numInputs;
    }
  }
  auto returnOp = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    DictionaryAttr attrs = model.getResultAttrDict(index);
    auto name = attrs ? attrs.getAs<StringAttr>(LoomDialect::kOutputAttrName)
                      : StringAttr();
    // emit() refuses an output whose address steps with a loop or a rank,
    // so the offset is the whole address.
    int64_t offset = arenaAddress(value).offset;
    describe(outputsOs,
             name ? name.getValue()
                  : StringRef("output_" + std::to_string(index)),
             value.getType(), shardingOf(attrs), offset, InitAttr(), 0);
    ++numOutputs;
  }
  auto table = [&](StringRef name, const std::string &rows, unsigned count) {
    if (!count) {
      os << "static const loomrt_tensor *const " << name << " = nullptr;\n";
      return;
    }
    os << "static const loomrt_tensor " << name << "[] = {\n" << rows << "};\n";
  };
  table("kParams", params, numParams);
  table("kInputs", inputs, numInputs);
  table("kOutputs", outputs, numOutputs);
  SmallVector<std::string> names;
  if (mesh)
    for (Attribute axis : mesh.getAxisNames())
      names.push_back(quote(cast<StringAttr>(axis).getValue()));
  if (names.empty()) { // no mesh: one rank
    os << "static const char *const *const kAxisNames = nullptr;\n"
       << "static const int64_t *const kAxisSizes = nullptr;\n\n";
  } else {
    os << "static const char *const kAxisNames[] = {" << llvm::join(names, ", ")
       << "};\n";
    os << "static const int64_t kAxisSizes[] = " << list(mesh.getAxisSizes())
       << ";\n\n";
  }
  // The kernels and their roofline inputs, for --profile.
  os << "static const loomrt_kernel kKernels[] = {\n";
  for (const KernelInfo &kernel : kernels)
    os << "    {" << quote(kernel.name) << ", " << quote(kernel.at) << ", "
       << llvm::format("%.17g", kernel.bytes) << ", "
       << llvm::format("%.17g", kernel.flops) << "},\n";
  if (kernels.empty())
    os << "    {\"\", \"\", 0, 0},\n";
  os << "};\n\n";
  os << "static void step(loomrt_ctx *rt, char *arena);\n\n";
  os << "static const loomrt_model kModel = {\n"
     << "    " << quote(model.getSymName()) << ", " << quote(source) << ",\n"
     << "    " << names.size() << ", kAxisNames, kAxisSizes,\n"
     << "    " << numParams << ", kParams, " << numInputs << ", kInputs, "
     << numOutputs << ", kOutputs,\n"
     << "    "
     << model->getAttrOfType<IntegerAttr>(LoomDialect::kArenaBytesAttrName)
            .getInt()
     << ", step, " << kernels.size() << ", kKernels};\n\n";
}

LogicalResult ProgramEmitter::emit(raw_ostream &os) {
  if (!model->getAttrOfType<IntegerAttr>(LoomDialect::kArenaBytesAttrName))
    return fail(model, "the model has no memory plan (run loom-plan-memory)");
  for (BlockArgument argument : model.getArguments())
    if (!model.getArgAttrOfType<IntegerAttr>(argument.getArgNumber(),
                                             LoomDialect::kOffsetAttrName))
      return fail(model, "an argument has no arena offset");
  kernels = collectKernels(module);
  for (auto [index, kernel] : llvm::enumerate(kernels))
    kernelIndex[kernel.op] = int(index);
  arenaBytes =
      model->getAttrOfType<IntegerAttr>(LoomDialect::kArenaBytesAttrName)
          .getInt();
  if (failed(emitBlock(model.getBody().front())))
    return failure();
  if (unplaced) {
    Operation *owner = unplaced.getDefiningOp();
    return fail(owner ? owner : model.getOperation(),
                "internal error: a value the code reads or writes has no "
                "place in the memory plan");
  }
  if (pastArena) {
    Operation *owner = pastArena.getDefiningOp();
    return fail(owner ? owner : model.getOperation(),
                "internal error: a value the code reads or writes reaches "
                "past the end of the memory plan's arena (" +
                    Twine(arenaBytes) + " bytes)");
  }
  // The runtime's table of outputs holds one fixed offset each: an output
  // whose place steps with a loop or a rank (isPartView keeps such an
  // all_slice a copy) cannot be described there.
  auto returnOp = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  for (Value value : returnOp.getOperands())
    if (!arenaAddress(value).steps.empty())
      return fail(returnOp,
                  "internal error: a model output's place in the arena "
                  "depends on the rank or the iteration, and the table of "
                  "outputs holds fixed offsets");

  // A newline in the path would end these comments.
  std::string printableSource = printableText(source);
  os << "// Generated by loomc from " << printableSource
     << ": the per-rank program of "
     << "model " << model.getSymName() << "\n"
     << "// on the mesh [";
  if (mesh)
    for (auto [i, name, size] :
         llvm::enumerate(mesh.getAxisNames(), mesh.getAxisSizes()))
      os << (i ? ", " : "") << cast<StringAttr>(name).getValue() << "=" << size;
  os << "]. Build: loomc " << printableSource
     << (target == Target::Cuda ? " --target=cuda" : "")
     << " -o model; run: mpirun -np " << (mesh ? mesh.getNumDevices() : 1)
     << " ./model\n\n"
     << "#include \"loomrt.h\"\n\n";
  bool cuda = target == Target::Cuda;
  if (cuda)
    os << "#include <cuda_runtime.h>\n";
  os << "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n"
     << "// Every op rounds its result once to its type (docs/language.md "
        "11.2).\n";
  // A program uses some of these helpers only; nvcc warns about an unused
  // static function, where C++ compilers do not for an inline one.
  const char *fn = cuda ? "[[maybe_unused]] static __device__ __forceinline__"
                        : "static inline";
  os << fn << " float loom_round_bf16(float x) {\n"
     << "  return loomrt_bf16_to_f32(loomrt_f32_to_bf16(x));\n}\n"
     << fn << " float loom_round_f16(float x) {\n"
     << "  return loomrt_f16_to_f32(loomrt_f32_to_f16(x));\n}\n"
     << fn << " int64_t loom_wrap32(int64_t x) {\n"
     << "  return (int32_t)(uint32_t)(uint64_t)x;\n}\n"
     // Integer division wraps like the rest (the most negative i64 over
     // -1 is itself) and gives 0 for a zero divisor (undefined in the
     // language, 0 in the interpreter), where the hardware traps on both.
     << fn << " int64_t loom_div_int(int64_t x, int64_t y) {\n"
     << "  return y == -1 ? (int64_t)(0 - (uint64_t)x) : y == 0 ? 0 : x / y;"
        "\n}\n"
     << fn << " float loom_gelu(float x) {\n"
     << "  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));\n}\n"
     // 0.5 (1 + tanh(u)) = sigmoid(2u): one exp instead of tanhf. On a
     // GPU the exp and the division are the hardware's approximate ones
     // (a few f32 ulps, far below the bf16/f16 rounding that follows):
     // expf and an IEEE division made GPT-2 small's GELU kernel bound by
     // instructions, not memory (57 us, 41% of an H200's bandwidth).
     << fn << " float loom_gelu_tanh(float x) {\n"
     << "  float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);\n"
     << (cuda ? "  return __fdividef(x, 1.0f + __expf(-2.0f * u));\n}\n\n"
              : "  return x / (1.0f + expf(-2.0f * u));\n}\n\n");
  if (usesPacks)
    os << "// Element-wise kernels move packs of elements in one access "
          "(16 bytes or\n// fewer), which a GPU requires to be aligned to "
          "its size.\n"
       << "#ifndef LOOMRT_CHECK_ALIGNED\n"
       << "#define LOOMRT_CHECK_ALIGNED(pointer, bytes)\n#endif\n"
       << "template <typename T, int W> struct alignas(sizeof(T) * W) "
          "loom_pack { T v[W]; };\n"
       << "template <int Bytes> struct loom_word;\n"
       << "template <> struct loom_word<16> { typedef uint4 type; };\n"
       << "template <> struct loom_word<8> { typedef uint2 type; };\n"
       << "template <> struct loom_word<4> { typedef uint32_t type; };\n"
       << "template <int W, typename T>\n"
       << fn << " loom_pack<T, W> loom_load_pack(const T *p) {\n"
       << "  typedef typename loom_word<sizeof(T) * W>::type Word;\n"
       << "  LOOMRT_CHECK_ALIGNED(p, sizeof(Word));\n"
       << "  Word word = *(const Word *)p;\n"
       << "  loom_pack<T, W> pack;\n"
       << "  memcpy(&pack, &word, sizeof word);\n"
       << "  return pack;\n}\n"
       << "template <int W, typename T>\n"
       << fn << " void loom_store_pack(T *p, const loom_pack<T, W> &pack) {\n"
       << "  typedef typename loom_word<sizeof(T) * W>::type Word;\n"
       << "  LOOMRT_CHECK_ALIGNED(p, sizeof(Word));\n"
       << "  Word word;\n"
       << "  memcpy(&word, &pack, sizeof word);\n"
       << "  *(Word *)p = word;\n}\n\n";
  os << globals << "\n";
  emitTables(os);
  os << "static void step(loomrt_ctx *rt, char *arena) {\n"
     << "  (void)rt;\n"
     << body << "}\n\n"
     << "int main(int argc, char **argv) { return loomrt_main(argc, argv, "
        "&kModel); }\n";
  return success();
}

} // namespace

LogicalResult loom::emitProgram(ModuleOp module, StringRef source,
                                Target target, raw_ostream &os) {
  FailureOr<Operation *> model = findSingleModel(module, "an executable");
  if (failed(model))
    return failure();
  SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
  if (meshes.size() > 1)
    return module.emitError() << "an executable runs on one mesh; the file "
                                 "declares "
                              << meshes.size();
  ProgramEmitter emitter(module, cast<func::FuncOp>(*model),
                         meshes.empty() ? MeshOp() : meshes[0], source, target);
  return emitter.emit(os);
}
