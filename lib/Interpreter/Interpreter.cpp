//===- Interpreter.cpp - Reference interpreter of global programs ---------===//
//
// Part of the Loom project.
//
// Deliberately plain: every op is a loop over global indices written from
// its definition in docs/language.md, in f64 with one rounding to the
// result type, sharing no code with the generated programs or libloomrt's
// kernels (only the initial values and the file format, which define the
// inputs rather than compute anything).
//===----------------------------------------------------------------------===//

#include "loom/Interpreter/Interpreter.h"

#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/StableValueMap.h"
#include "loomrt.h"
#include "runtime/InitialValues.h"
#include "runtime/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <fcntl.h>
#include <unistd.h>

using namespace mlir;
using namespace loom;

namespace {

struct Tensor {
  Type element;
  SmallVector<int64_t> shape;
  std::vector<double> values; // integers are exact up to 2^53
  int64_t size() const { return int64_t(values.size()); }
};

SmallVector<int64_t> unravel(int64_t index, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> out(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    out[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return out;
}

/// Integers are held as doubles, exact within 2^53 (every i32 is). Integer
/// ops compute in int64 with wraparound and wrap to the element's width
/// before the result becomes a double again, so i32 results are exact
/// however far their unwrapped values go; an i64 result that no double
/// holds exactly (beyond 2^53, with more significant bits than a double
/// has) sets `inexactInteger`, which fails the op.
bool inexactInteger = false;

double integerValue(Type element, int64_t x) {
  if (element.isInteger(32))
    return double(int32_t(uint32_t(uint64_t(x))));
  double held = double(x);
  // 2^63 itself is not an int64: the conversion back would be undefined.
  if (held >= 0x1p63 || int64_t(held) != x)
    inexactInteger = true;
  return held;
}

/// Whether floating results keep their f64 value (InterpretOptions::unrounded).
bool keepUnrounded = false;

/// InterpretOptions::perturbRounding: the random stream (0: none) that
/// picks, for each inexact floating result, the nearest value of its type
/// or the one on x's other side; and how many picks it has made.
uint64_t perturbStream = 0, perturbPicks = 0;

/// A random bit of the stream, pick by pick (splitmix64's mixing).
bool perturbBit() {
  uint64_t z = perturbStream * 0x9e3779b97f4a7c15ull + ++perturbPicks;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & 1;
}

/// The value of `element` next to `nearest` (one of its values) on the side
/// of x.
double otherNeighbour(Type element, double nearest, double x) {
  float from = float(nearest);
  if (element.isF32())
    return double(std::nextafter(from, x > nearest ? INFINITY : -INFINITY));
  bool bf16 = element.isBF16();
  uint16_t bits = bf16 ? loomrt_f32_to_bf16(from) : loomrt_f32_to_f16(from);
  uint16_t sign = bits & 0x8000, magnitude = bits & 0x7fff;
  // Away from zero where x is farther from it than `nearest`; past zero
  // to the other sign's smallest value.
  if ((x > nearest) == !sign)
    ++magnitude;
  else if (magnitude)
    --magnitude;
  else
    sign ^= 0x8000, magnitude = 1;
  uint16_t next = uint16_t(sign | magnitude);
  return bf16 ? loomrt_bf16_to_f32(next) : loomrt_f16_to_f32(next);
}

/// Rounds to the element type, as each op does once at its result.
double roundTo(Type element, double x) {
  if (keepUnrounded && isa<FloatType>(element))
    return x;
  double nearest = x;
  if (element.isF32())
    nearest = double(float(x));
  else if (element.isBF16())
    nearest = loomrt_bf16_to_f32(loomrt_f32_to_bf16(float(x)));
  else if (element.isF16())
    nearest = loomrt_f16_to_f32(loomrt_f32_to_f16(float(x)));
  else if (element.isInteger(32))
    return integerValue(element, int64_t(x));
  else
    return x;
  if (perturbStream && nearest != x && std::isfinite(nearest) &&
      std::isfinite(x) && perturbBit())
    return otherNeighbour(element, nearest, x);
  return nearest;
}

int dtypeCode(Type element) {
  if (element.isF32())
    return LOOMRT_F32;
  if (element.isBF16())
    return LOOMRT_BF16;
  if (element.isF16())
    return LOOMRT_F16;
  return element.isInteger(32) ? LOOMRT_I32 : LOOMRT_I64;
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Tensor makeTensor(Value v) {
  Tensor t;
  t.element = elementOf(v);
  t.shape.assign(shapeOf(v).begin(), shapeOf(v).end());
  t.values.assign(size_t(computeProduct(t.shape)), 0.0);
  return t;
}

/// Index of `operand` (right-aligned, broadcasting size-1 dims) for the
/// output index `outIndex`.
int64_t broadcastIndex(ArrayRef<int64_t> outIndex, const Tensor &operand) {
  int64_t offset = int64_t(outIndex.size()) - int64_t(operand.shape.size());
  int64_t linear = 0;
  for (size_t d = 0; d < operand.shape.size(); ++d) {
    int64_t i = operand.shape[d] == 1 ? 0 : outIndex[offset + d];
    linear = linear * operand.shape[d] + i;
  }
  return linear;
}

double unary(Operation *op, double x) {
  if (isa<ReluOp>(op))
    return x < 0 ? 0.0 : x;
  if (isa<SiluOp>(op))
    return x / (1.0 + std::exp(-x));
  if (isa<SigmoidOp>(op))
    return 1.0 / (1.0 + std::exp(-x));
  if (isa<TanhOp>(op))
    return std::tanh(x);
  if (isa<ExpOp>(op))
    return std::exp(x);
  if (isa<LogOp>(op))
    return std::log(x);
  if (isa<SqrtOp>(op))
    return std::sqrt(x);
  if (isa<RsqrtOp>(op))
    return 1.0 / std::sqrt(x);
  if (isa<NegOp>(op))
    return -x;
  auto gelu = cast<GeluOp>(op);
  if (gelu.getApproximate() == GeluApproximation::Tanh)
    return 0.5 * x *
           (1.0 +
            std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double integerProduct(Type element, double a, double b) {
  return integerValue(element,
                      int64_t(uint64_t(int64_t(a)) * uint64_t(int64_t(b))));
}

double integerSum(Type element, double a, double b) {
  return integerValue(element,
                      int64_t(uint64_t(int64_t(a)) + uint64_t(int64_t(b))));
}

double binary(Operation *op, double a, double b, Type element) {
  if (element.isInteger()) {
    int64_t x = int64_t(a), y = int64_t(b);
    if (isa<AddOp>(op))
      return integerSum(element, a, b);
    if (isa<SubOp>(op))
      return integerValue(element, int64_t(uint64_t(x) - uint64_t(y)));
    if (isa<MulOp>(op))
      return integerProduct(element, a, b);
    // The most negative i64 over -1 wraps to itself (x86 traps on it).
    if (y == -1)
      return integerValue(element, int64_t(0 - uint64_t(x)));
    return y == 0 ? 0.0 : integerValue(element, x / y);
  }
  if (isa<AddOp>(op))
    return a + b;
  if (isa<SubOp>(op))
    return a - b;
  if (isa<MulOp>(op))
    return a * b;
  return a / b;
}

class Interpreter {
public:
  Interpreter(func::FuncOp model, const InterpretOptions &options)
      : model(model), options(options) {}

  LogicalResult run(llvm::raw_ostream &os);

private:
  func::FuncOp model;
  const InterpretOptions &options;
  StableValueMap<Tensor> values;

  LogicalResult fail(Operation *op, const Twine &message) {
    return op->emitError() << "--interpret: " << message;
  }
  const Tensor &get(Value v) { return values.find(v)->second; }
  LogicalResult runBlock(Block &block);
  LogicalResult runOp(Operation *op);
  LogicalResult einsum(Operation *op, StringRef spec, ArrayRef<Value> inputs,
                       Value result);
  LogicalResult loadArguments();
  LogicalResult checkMemory();
};

/// The interpreter keeps every value of the model (a repeat body's, its
/// last iteration's) as f64: a model whose values cannot fit this machine's
/// memory is refused up front with the op that makes the largest, rather
/// than ending in an allocation failure midway.
LogicalResult Interpreter::checkMemory() {
  auto bytesOf = [](Value v) -> double {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape()
               ? double(type.getNumElements()) * sizeof(double)
               : 0.0;
  };
  double total = 0.0, largest = 0.0;
  Location largestAt = model.getLoc();
  for (BlockArgument argument : model.getArguments())
    total += bytesOf(argument);
  model.walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      double bytes = bytesOf(result);
      total += bytes;
      if (bytes > largest) {
        largest = bytes;
        largestAt = op->getLoc();
      }
    }
  });
  double memory = double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (memory <= 0.0 || total <= memory)
    return success();
  auto gib = [](double bytes) {
    return llvm::formatv("{0:F1} GiB", bytes / (1024.0 * 1024.0 * 1024.0))
        .str();
  };
  InFlightDiagnostic diagnostic =
      model.emitError()
      << "--interpret: the model's values take " << gib(total)
      << " as the interpreter holds them (f64, every value kept), more than "
         "this machine's "
      << gib(memory)
      << " of memory; run a smaller configuration, or the compiled program";
  diagnostic.attachNote(largestAt)
      << "the largest value, " << gib(largest) << ", is made here";
  return diagnostic;
}

LogicalResult Interpreter::loadArguments() {
  struct Source {
    std::string path;
    loomrt::SafetensorsHeader header;
    int fd = -1;
  };
  // A file's own faults have no place in the source: the error names the
  // file alone (it pointed at the model's line, as if the model were wrong).
  Location noSource = UnknownLoc::get(model.getContext());
  auto open = [&](const std::string &path, Source &source) -> LogicalResult {
    source.path = path;
    std::string error;
    if (!loomrt::readSafetensorsHeader(path, source.header, error))
      return emitError(noSource) << "--interpret: " << error;
    source.fd = ::open(path.c_str(), O_RDONLY);
    if (source.fd < 0)
      return emitError(noSource) << "--interpret: cannot open " << path;
    return success();
  };
  Source params, inputs;
  if (!options.params.empty() && failed(open(options.params, params)))
    return failure();
  if (!options.inputs.empty() && failed(open(options.inputs, inputs)))
    return failure();
  llvm::scope_exit closeAll([&] {
    if (params.fd >= 0)
      close(params.fd);
    if (inputs.fd >= 0)
      close(inputs.fd);
  });
  for (BlockArgument argument : model.getArguments()) {
    DictionaryAttr attrs = model.getArgAttrDict(argument.getArgNumber());
    auto paramName = attrs.getAs<StringAttr>(LoomDialect::kParamAttrName);
    auto inputName = attrs.getAs<StringAttr>(LoomDialect::kInputAttrName);
    std::string name = (paramName ? paramName : inputName).getValue().str();
    Tensor t = makeTensor(argument);
    Source &source = paramName ? params : inputs;
    int dtype = dtypeCode(t.element);
    size_t bytes = t.element.getIntOrFloatBitWidth() / 8;
    std::vector<char> raw(size_t(t.size()) * bytes);
    if (source.fd >= 0) {
      const loomrt::TensorEntry *entry = source.header.find(name);
      // A tensor's faults point at its parameter or input.
      if (!entry)
        return emitError(argument.getLoc()) << "--interpret: " << source.path
                                            << ": no tensor '" << name << "'";
      if (int(entry->dtype) != dtype ||
          ArrayRef<int64_t>(entry->shape) != ArrayRef<int64_t>(t.shape)) {
        auto text = [](int code, ArrayRef<int64_t> shape) {
          static const char *names[] = {"f32", "bf16", "f16", "i32", "i64"};
          return std::string(names[code]) + "[" +
                 llvm::join(
                     llvm::map_range(
                         shape, [](int64_t s) { return std::to_string(s); }),
                     ", ") +
                 "]";
        };
        return emitError(argument.getLoc())
               << "--interpret: " << source.path << ": tensor '" << name
               << "' is " << text(int(entry->dtype), entry->shape)
               << " but the " << (paramName ? "parameter" : "input") << " is "
               << text(dtype, t.shape);
      }
      if (pread(source.fd, raw.data(), raw.size(),
                off_t(source.header.dataStart + entry->begin)) !=
          ssize_t(raw.size()))
        return emitError(argument.getLoc())
               << "--interpret: " << source.path << ": reading '" << name
               << "' failed";
    } else {
      int kind = LOOMRT_INIT_INPUT;
      double a = 0, b = 0;
      if (paramName) {
        auto init = attrs.getAs<InitAttr>(LoomDialect::kInitAttrName);
        kind = init.getKind() == InitKind::Normal    ? LOOMRT_INIT_NORMAL
               : init.getKind() == InitKind::Uniform ? LOOMRT_INIT_UNIFORM
               : init.getKind() == InitKind::Zeros   ? LOOMRT_INIT_ZEROS
                                                     : LOOMRT_INIT_ONES;
        a = init.getA().convertToDouble();
        b = init.getB().convertToDouble();
      }
      int64_t bound =
          !paramName && t.element.isInteger() ? syntheticIdBound(argument) : 0;
      uint64_t hash = loomrt::fnv1a64(name);
      for (int64_t i = 0; i < t.size(); ++i)
        loomrt::storeRounded(dtype,
                             loomrt::initialValue(kind, a, b, bound,
                                                  options.seed, hash,
                                                  uint64_t(i)),
                             raw.data() + size_t(i) * bytes);
    }
    for (int64_t i = 0; i < t.size(); ++i) {
      const char *p = raw.data() + size_t(i) * bytes;
      uint16_t h;
      float f;
      int32_t i32;
      int64_t i64;
      switch (dtype) {
      case LOOMRT_F32:
        memcpy(&f, p, 4);
        t.values[i] = f;
        break;
      case LOOMRT_BF16:
        memcpy(&h, p, 2);
        t.values[i] = loomrt_bf16_to_f32(h);
        break;
      case LOOMRT_F16:
        memcpy(&h, p, 2);
        t.values[i] = loomrt_f16_to_f32(h);
        break;
      case LOOMRT_I32:
        memcpy(&i32, p, 4);
        t.values[i] = i32;
        break;
      default:
        memcpy(&i64, p, 8);
        t.values[i] = integerValue(t.element, i64);
        if (inexactInteger)
          return mlir::emitError(argument.getLoc())
                 << "--interpret: " << name << " holds " << i64
                 << ", which the interpreter (integers held as doubles) "
                    "cannot hold exactly";
      }
    }
    values[argument] = std::move(t);
  }
  return success();
}

LogicalResult Interpreter::einsum(Operation *op, StringRef spec,
                                  ArrayRef<Value> inputs, Value result) {
  auto [in, outLetters] = spec.split("->");
  SmallVector<StringRef> inLetters;
  in.split(inLetters, ',');
  // Every letter's size, then a loop over all letters: out gets the sum of
  // products over the letters it does not keep.
  std::string letters;
  llvm::StringMap<int64_t> sizes;
  for (auto [i, operand] : llvm::enumerate(inputs))
    for (auto [d, c] : llvm::enumerate(inLetters[i])) {
      std::string key(1, c);
      if (!sizes.count(key))
        letters += c;
      sizes[key] = shapeOf(operand)[d];
    }
  SmallVector<int64_t> extents;
  for (char c : letters)
    extents.push_back(sizes[std::string(1, c)]);
  Tensor out = makeTensor(result);
  bool integer = out.element.isInteger();
  std::vector<double> acc(size_t(out.size()), 0.0);
  int64_t total = computeProduct(extents);
  SmallVector<int64_t> outStrides = computeStrides(out.shape);
  for (int64_t n = 0; n < total; ++n) {
    SmallVector<int64_t> index = unravel(n, extents);
    auto at = [&](char c) { return index[letters.find(c)]; };
    double term = 1.0;
    for (auto [i, operand] : llvm::enumerate(inputs)) {
      const Tensor &t = get(operand);
      SmallVector<int64_t> strides = computeStrides(t.shape);
      int64_t linear = 0;
      for (auto [d, c] : llvm::enumerate(inLetters[i]))
        linear += at(c) * strides[d];
      term = integer ? integerProduct(out.element, term, t.values[linear])
                     : term * t.values[linear];
    }
    int64_t o = 0;
    for (auto [d, c] : llvm::enumerate(outLetters))
      o += at(c) * outStrides[d];
    acc[o] = integer ? integerSum(out.element, acc[o], term) : acc[o] + term;
  }
  for (int64_t i = 0; i < out.size(); ++i)
    out.values[i] = roundTo(out.element, acc[i]);
  values[result] = std::move(out);
  (void)op;
  return success();
}

LogicalResult Interpreter::runOp(Operation *op) {
  if (isa<func::ReturnOp, YieldOp>(op))
    return success();
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    Tensor t = makeTensor(constant.getResult());
    auto dense = cast<DenseElementsAttr>(constant.getValue());
    int64_t i = 0;
    if (isa<FloatType>(t.element))
      for (APFloat x : dense.getValues<APFloat>())
        t.values[i++] = x.convertToDouble();
    else
      for (APInt x : dense.getValues<APInt>())
        t.values[i++] = integerValue(t.element, x.getSExtValue());
    values[constant.getResult()] = std::move(t);
    return success();
  }
  if (auto shard = dyn_cast<ShardOp>(op)) {
    values[shard.getResult()] = get(shard.getInput());
    return success();
  }
  if (isa<AddOp, SubOp, MulOp, DivOp>(op)) {
    const Tensor &a = get(op->getOperand(0)), &b = get(op->getOperand(1));
    Tensor out = makeTensor(op->getResult(0));
    for (int64_t i = 0; i < out.size(); ++i) {
      SmallVector<int64_t> index = unravel(i, out.shape);
      out.values[i] = roundTo(
          out.element, binary(op, a.values[broadcastIndex(index, a)],
                              b.values[broadcastIndex(index, b)], out.element));
    }
    values[op->getResult(0)] = std::move(out);
    return success();
  }
  if (isa<ReluOp, SiluOp, TanhOp, SigmoidOp, ExpOp, LogOp, SqrtOp, RsqrtOp,
          NegOp, GeluOp>(op)) {
    const Tensor &x = get(op->getOperand(0));
    Tensor out = makeTensor(op->getResult(0));
    for (int64_t i = 0; i < out.size(); ++i)
      out.values[i] =
          out.element.isInteger()
              ? integerValue(out.element,
                             int64_t(0 - uint64_t(int64_t(x.values[i]))))
              : roundTo(out.element, unary(op, x.values[i]));
    values[op->getResult(0)] = std::move(out);
    return success();
  }
  if (auto cast = dyn_cast<CastOp>(op)) {
    const Tensor &x = get(cast.getInput());
    Tensor out = makeTensor(cast.getResult());
    for (int64_t i = 0; i < out.size(); ++i)
      out.values[i] = out.element.isInteger()
                          ? roundTo(out.element, std::trunc(x.values[i]))
                          : roundTo(out.element, x.values[i]);
    values[cast.getResult()] = std::move(out);
    return success();
  }
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    const Tensor &a = get(matmul.getLhs()), &b = get(matmul.getRhs());
    Tensor out = makeTensor(matmul.getResult());
    int64_t rank = int64_t(out.shape.size());
    int64_t m = out.shape[rank - 2], n = out.shape[rank - 1],
            k = a.shape.back();
    bool integer = out.element.isInteger();
    for (int64_t i = 0; i < out.size(); ++i) {
      SmallVector<int64_t> index = unravel(i, out.shape);
      // Broadcast the batch part of the index to each operand.
      auto element = [&](const Tensor &t, int64_t row, int64_t col) {
        SmallVector<int64_t> full(index);
        full[rank - 2] = row;
        full[rank - 1] = col;
        int64_t offset = rank - int64_t(t.shape.size());
        int64_t linear = 0;
        for (size_t d = 0; d < t.shape.size(); ++d) {
          int64_t j = full[offset + d];
          if (d + 2 < t.shape.size() && t.shape[d] == 1)
            j = 0;
          linear = linear * t.shape[d] + j;
        }
        return t.values[linear];
      };
      double acc = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) {
        double term = integer ? integerProduct(out.element,
                                               element(a, index[rank - 2], kk),
                                               element(b, kk, index[rank - 1]))
                              : element(a, index[rank - 2], kk) *
                                    element(b, kk, index[rank - 1]);
        acc = integer ? integerSum(out.element, acc, term) : acc + term;
      }
      (void)m;
      (void)n;
      out.values[i] = roundTo(out.element, acc);
    }
    values[matmul.getResult()] = std::move(out);
    return success();
  }
  if (auto e = dyn_cast<EinsumOp>(op)) {
    SmallVector<Value> inputs(e.getInputs().begin(), e.getInputs().end());
    return einsum(op, e.getSpec(), inputs, e.getResult());
  }
  if (isa<SumOp, MeanOp, MaxOp>(op)) {
    const Tensor &x = get(op->getOperand(0));
    auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    Tensor out = makeTensor(op->getResult(0));
    bool isMax = isa<MaxOp>(op);
    std::vector<double> acc(size_t(out.size()), isMax ? -INFINITY : 0.0);
    std::vector<bool> seen(size_t(out.size()), false);
    int64_t reduced = 1;
    for (int64_t d : dims)
      reduced *= x.shape[d];
    // The output index keeps the non-reduced dims (in order).
    for (int64_t i = 0; i < x.size(); ++i) {
      SmallVector<int64_t> index = unravel(i, x.shape);
      int64_t o = 0;
      for (size_t d = 0; d < x.shape.size(); ++d)
        if (!llvm::is_contained(dims, int64_t(d)))
          o = o * x.shape[d] + index[d];
      double v = x.values[i];
      if (isMax) {
        acc[o] = !seen[o] || v > acc[o] || std::isnan(v) ? v : acc[o];
        seen[o] = true;
      } else {
        acc[o] += v;
      }
    }
    for (int64_t i = 0; i < out.size(); ++i)
      out.values[i] = roundTo(
          out.element, isa<MeanOp>(op) ? acc[i] / double(reduced) : acc[i]);
    values[op->getResult(0)] = std::move(out);
    return success();
  }
  if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
    const Tensor &x = get(softmax.getInput());
    Tensor out = makeTensor(softmax.getResult());
    int64_t dim = softmax.getDim(), n = x.shape[dim];
    int64_t inner =
        computeProduct(ArrayRef<int64_t>(x.shape).drop_front(dim + 1));
    int64_t outer = computeProduct(ArrayRef<int64_t>(x.shape).take_front(dim));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
        double m = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < n; ++j)
          m = std::max(m, x.values[at(j)]);
        for (int64_t j = 0; j < n; ++j)
          sum += std::exp(x.values[at(j)] - m);
        for (int64_t j = 0; j < n; ++j)
          out.values[at(j)] =
              roundTo(out.element, std::exp(x.values[at(j)] - m) / sum);
      }
    values[softmax.getResult()] = std::move(out);
    return success();
  }
  if (isa<LayerNormOp, RMSNormOp>(op)) {
    bool rms = isa<RMSNormOp>(op);
    const Tensor &x = get(op->getOperand(0)), &scale = get(op->getOperand(1));
    const Tensor *bias = rms ? nullptr : &get(op->getOperand(2));
    double eps = rms ? cast<RMSNormOp>(op).getEps().convertToDouble()
                     : cast<LayerNormOp>(op).getEps().convertToDouble();
    Tensor out = makeTensor(op->getResult(0));
    int64_t n = scale.size(), rows = x.size() / std::max<int64_t>(n, 1);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0.0, squares = 0.0;
      for (int64_t j = 0; j < n; ++j)
        mean += x.values[r * n + j];
      mean = rms ? 0.0 : mean / double(n);
      for (int64_t j = 0; j < n; ++j)
        squares += (x.values[r * n + j] - mean) * (x.values[r * n + j] - mean);
      double inverse = 1.0 / std::sqrt(squares / double(n) + eps);
      for (int64_t j = 0; j < n; ++j)
        out.values[r * n + j] =
            roundTo(out.element,
                    (x.values[r * n + j] - mean) * inverse * scale.values[j] +
                        (bias ? bias->values[j] : 0.0));
    }
    values[op->getResult(0)] = std::move(out);
    return success();
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    const Tensor &q = get(attention.getQuery()), &k = get(attention.getKey()),
                 &v = get(attention.getValue());
    Tensor out = makeTensor(attention.getResult());
    size_t rank = q.shape.size();
    int64_t s = q.shape[rank - 2], e = q.shape[rank - 1], t = k.shape[rank - 2],
            f = v.shape[rank - 1];
    int64_t batch = q.size() / (s * e);
    double scale = attention.getScale().convertToDouble();
    std::vector<double> scores(static_cast<size_t>(t));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < s; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < t; ++j) {
          if (attention.getCausal() && j > i) {
            scores[j] = -INFINITY;
            continue;
          }
          double dot = 0.0;
          for (int64_t c = 0; c < e; ++c)
            dot +=
                q.values[(b * s + i) * e + c] * k.values[(b * t + j) * e + c];
          scores[j] = dot * scale;
          m = std::max(m, scores[j]);
        }
        // Only the keys the mask hides are left out: a score of -inf that
        // the product made is softmax's, so a row of them is NaN (-inf - -inf),
        // as docs/language.md 12.8 and the backends have it, not 0.
        int64_t visible = attention.getCausal() ? std::min(i + 1, t) : t;
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j)
          sum += std::exp(scores[j] - m);
        for (int64_t c = 0; c < f; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < visible; ++j)
            acc +=
                std::exp(scores[j] - m) / sum * v.values[(b * t + j) * f + c];
          out.values[(b * s + i) * f + c] = roundTo(out.element, acc);
        }
      }
    values[attention.getResult()] = std::move(out);
    return success();
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    const Tensor &ids = get(embedding.getIds()),
                 &table = get(embedding.getTable());
    Tensor out = makeTensor(embedding.getResult());
    int64_t rows = table.shape[0], width = table.shape[1];
    for (int64_t i = 0; i < ids.size(); ++i) {
      int64_t id = int64_t(ids.values[i]);
      for (int64_t c = 0; c < width; ++c)
        out.values[i * width + c] =
            id >= 0 && id < rows ? table.values[id * width + c] : 0.0;
    }
    values[embedding.getResult()] = std::move(out);
    return success();
  }
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    const Tensor &logits = get(ce.getLogits()), &targets = get(ce.getTargets());
    int64_t vocab = logits.shape.back(), count = targets.size();
    double total = 0.0;
    for (int64_t i = 0; i < count; ++i) {
      int64_t target = int64_t(targets.values[i]);
      if (target < 0 || target >= vocab)
        return fail(op, "target " + Twine(target) + " at position " + Twine(i) +
                            " is outside [0, " + Twine(vocab) + ")");
      double m = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < vocab; ++j)
        m = std::max(m, logits.values[i * vocab + j]);
      for (int64_t j = 0; j < vocab; ++j)
        sum += std::exp(logits.values[i * vocab + j] - m);
      total += m + std::log(sum) - logits.values[i * vocab + target];
    }
    Tensor out = makeTensor(ce.getResult());
    out.values[0] = roundTo(out.element, total / double(count));
    values[ce.getResult()] = std::move(out);
    return success();
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    Tensor out = get(reshape.getInput());
    ArrayRef<int64_t> shape = shapeOf(reshape.getResult());
    out.shape.assign(shape.begin(), shape.end());
    values[reshape.getResult()] = std::move(out);
    return success();
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    const Tensor &x = get(transpose.getInput());
    Tensor out = makeTensor(transpose.getResult());
    SmallVector<int64_t> inStrides = computeStrides(x.shape);
    ArrayRef<int64_t> perm = transpose.getPerm();
    for (int64_t i = 0; i < out.size(); ++i) {
      SmallVector<int64_t> index = unravel(i, out.shape);
      int64_t linear = 0;
      for (size_t d = 0; d < perm.size(); ++d)
        linear += index[d] * inStrides[perm[d]];
      out.values[i] = x.values[linear];
    }
    values[transpose.getResult()] = std::move(out);
    return success();
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    Tensor out = makeTensor(concat.getResult());
    int64_t dim = concat.getDim();
    for (int64_t i = 0; i < out.size(); ++i) {
      SmallVector<int64_t> index = unravel(i, out.shape);
      for (Value input : concat.getInputs()) {
        const Tensor &t = get(input);
        if (index[dim] < t.shape[dim]) {
          SmallVector<int64_t> strides = computeStrides(t.shape);
          int64_t linear = 0;
          for (size_t d = 0; d < index.size(); ++d)
            linear += index[d] * strides[d];
          out.values[i] = t.values[linear];
          break;
        }
        index[dim] -= t.shape[dim];
      }
    }
    values[concat.getResult()] = std::move(out);
    return success();
  }
  if (isa<SplitOp, SliceOp>(op)) {
    const Tensor &x = get(op->getOperand(0));
    SmallVector<int64_t> inStrides = computeStrides(x.shape);
    int64_t start = 0;
    for (Value result : op->getResults()) {
      Tensor out = makeTensor(result);
      SmallVector<int64_t> begin(x.shape.size(), 0);
      if (auto split = dyn_cast<SplitOp>(op)) {
        begin[split.getDim()] = start;
        start += out.shape[split.getDim()];
      } else {
        ArrayRef<int64_t> s = cast<SliceOp>(op).getStart();
        begin.assign(s.begin(), s.end());
      }
      for (int64_t i = 0; i < out.size(); ++i) {
        SmallVector<int64_t> index = unravel(i, out.shape);
        int64_t linear = 0;
        for (size_t d = 0; d < index.size(); ++d)
          linear += (index[d] + begin[d]) * inStrides[d];
        out.values[i] = x.values[linear];
      }
      values[result] = std::move(out);
    }
    return success();
  }
  if (auto repeat = dyn_cast<RepeatOp>(op)) {
    Block &body = repeat.getBody().front();
    size_t numCarried = repeat.getCarried().size();
    SmallVector<Tensor> carried;
    for (Value v : repeat.getCarried())
      carried.push_back(get(v));
    SmallVector<Tensor> stackedOut;
    for (OpResult result : repeat.getStackedResults())
      stackedOut.push_back(makeTensor(result));
    for (int64_t layer = 0; layer < int64_t(repeat.getCount()); ++layer) {
      for (size_t i = 0; i < numCarried; ++i)
        values[body.getArgument(i)] = carried[i];
      for (auto [i, stacked] : llvm::enumerate(repeat.getStacked())) {
        const Tensor &all = get(stacked);
        BlockArgument argument = body.getArgument(numCarried + i);
        Tensor slice = makeTensor(argument);
        int64_t n = slice.size();
        std::copy(all.values.begin() + layer * n,
                  all.values.begin() + (layer + 1) * n, slice.values.begin());
        values[argument] = std::move(slice);
      }
      if (failed(runBlock(body)))
        return failure();
      auto yield = cast<YieldOp>(body.getTerminator());
      for (auto [i, v] : llvm::enumerate(yield.getValues())) {
        if (i < numCarried) {
          carried[i] = get(v);
          continue;
        }
        Tensor &out = stackedOut[i - numCarried];
        const Tensor &piece = get(v);
        std::copy(piece.values.begin(), piece.values.end(),
                  out.values.begin() + layer * piece.size());
      }
    }
    for (size_t i = 0; i < numCarried; ++i)
      values[repeat.getResult(i)] = carried[i];
    for (auto [i, result] : llvm::enumerate(repeat.getStackedResults()))
      values[result] = stackedOut[i];
    return success();
  }
  return fail(op, "cannot interpret " + op->getName().getStringRef() +
                      " (the interpreter runs global programs, before "
                      "partitioning)");
}

LogicalResult Interpreter::runBlock(Block &block) {
  for (Operation &op : block) {
    if (failed(runOp(&op)))
      return failure();
    if (inexactInteger)
      return fail(&op, "an i64 result that the interpreter (integers held as "
                       "doubles) cannot hold exactly: beyond 2^53 in "
                       "magnitude, with more significant bits than a double "
                       "has; the compiled program computes it");
  }
  return success();
}

LogicalResult Interpreter::run(llvm::raw_ostream &os) {
  inexactInteger = false; // not an earlier run's
  if (failed(checkMemory()) || failed(loadArguments()) ||
      failed(runBlock(model.getBody().front())))
    return failure();
  auto returnOp = cast<func::ReturnOp>(model.getBody().front().getTerminator());
  std::vector<loomrt::TensorEntry> entries;
  std::vector<std::string> payloads;
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    DictionaryAttr attrs = model.getResultAttrDict(index);
    auto nameAttr = attrs
                        ? attrs.getAs<StringAttr>(LoomDialect::kOutputAttrName)
                        : StringAttr();
    std::string name = nameAttr ? nameAttr.getValue().str()
                                : "output_" + std::to_string(index);
    const Tensor &t = get(value);
    double sum = 0.0, largest = 0.0;
    // Unrounded bf16 and f16 results would lose most of their digits to
    // their own type: written as f32.
    bool widened = options.unrounded && isa<FloatType>(t.element);
    int dtype = widened ? LOOMRT_F32 : dtypeCode(t.element);
    size_t bytes = widened ? 4 : t.element.getIntOrFloatBitWidth() / 8;
    std::string payload(size_t(t.size()) * bytes, '\0');
    for (int64_t i = 0; i < t.size(); ++i) {
      sum += t.values[i];
      largest = std::max(largest, std::fabs(t.values[i]));
      loomrt::storeRounded(dtype, t.values[i],
                           payload.data() + size_t(i) * bytes);
    }
    if (t.shape.empty()) {
      os << name << " = " << llvm::format("%.9g", sum) << "\n";
    } else {
      static const char *names[] = {"f32", "bf16", "f16", "i32", "i64"};
      os << name << ": " << names[dtype] << "["
         << llvm::join(
                llvm::map_range(t.shape,
                                [](int64_t s) { return std::to_string(s); }),
                ", ")
         << "] sum = " << llvm::format("%.9g", sum)
         << ", max|x| = " << llvm::format("%.9g", largest) << "\n";
    }
    loomrt::TensorEntry entry;
    entry.name = name;
    entry.dtype = loomrt::DType(dtype);
    entry.shape.assign(t.shape.begin(), t.shape.end());
    entries.push_back(entry);
    payloads.push_back(std::move(payload));
  }
  if (options.out.empty())
    return success();
  uint64_t dataStart = 0;
  std::string head = loomrt::buildSafetensorsHeader(
      entries, {{"format", "pt"}, {"model", model.getSymName().str()}},
      dataStart);
  // As the executables: only a regular file (a FIFO would block the write
  // until something reads it; a device would take the data and lose it).
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(options.out, status) &&
      status.type() != llvm::sys::fs::file_type::regular_file)
    return model.emitError() << "--interpret: cannot write " << options.out
                             << ": not a regular file";
  std::error_code error;
  llvm::raw_fd_ostream file(options.out, error);
  if (error)
    return model.emitError() << "--interpret: cannot write " << options.out
                             << ": " << error.message();
  file << head;
  for (const std::string &payload : payloads)
    file << payload;
  // A failed write (a full disk) is an error here, not a fatal one when the
  // stream is destroyed.
  file.close();
  if (file.has_error()) {
    std::string message = file.error().message();
    file.clear_error();
    return model.emitError()
           << "--interpret: cannot write " << options.out << ": " << message;
  }
  return success();
}

} // namespace

LogicalResult loom::interpretModel(ModuleOp module,
                                   const InterpretOptions &options,
                                   llvm::raw_ostream &os) {
  FailureOr<Operation *> model = findSingleModel(module, "--interpret");
  if (failed(model))
    return failure();
  keepUnrounded = options.unrounded;
  perturbStream = options.perturbRounding;
  perturbPicks = 0;
  Interpreter interpreter(cast<func::FuncOp>(*model), options);
  return interpreter.run(os);
}
