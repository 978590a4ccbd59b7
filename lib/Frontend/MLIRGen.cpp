//===- MLIRGen.cpp - Check a Loom AST and generate Loom IR ----------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// Semantic checks and IR generation are one walk: every expression is typed
// by the same inference functions the ops' verifiers use, so a shape error is
// reported once, at the user's source line. Block calls are inlined; the call
// hierarchy survives in parameter names and CallSiteLocs. `repeat` becomes one
// loom.repeat whose body is generated once, however large its count.
//
//===----------------------------------------------------------------------===//

#include "loom/Frontend/Frontend.h"

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"
#include "dialects/loom/IR/TypeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SaveAndRestore.h"

#include <cmath>

using namespace mlir;
using namespace loom;
using namespace loom::ast;
using llvm::SMLoc;

Location loom::toLocation(MLIRContext &context,
                          const llvm::SourceMgr &sourceMgr, SMLoc loc) {
  if (!loc.isValid())
    return UnknownLoc::get(&context);
  unsigned bufferId = sourceMgr.FindBufferContainingLoc(loc);
  if (!bufferId)
    return UnknownLoc::get(&context);
  auto [line, col] = sourceMgr.getLineAndColumn(loc, bufferId);
  StringRef name = sourceMgr.getMemoryBuffer(bufferId)->getBufferIdentifier();
  return FileLineColLoc::get(&context, name, line, col);
}

/// The built-in ops of the language; blocks may not take these names.
static constexpr StringLiteral kBuiltinOps[] = {
    "relu",          "gelu",   "silu",  "tanh", "sigmoid",   "exp",
    "log",           "sqrt",   "rsqrt", "neg",  "softmax",   "layernorm",
    "rmsnorm",       "sum",    "mean",  "max",  "reshape",   "transpose",
    "concat",        "split",  "slice", "cast", "embedding", "attention",
    "cross_entropy", "einsum", "shard"};

namespace {

/// A compile-time number: constants, literals, and arithmetic on them.
struct Scalar {
  bool isInt = true;
  int64_t i = 0;
  double f = 0;
  double asDouble() const { return isInt ? static_cast<double>(i) : f; }
};

/// What an expression evaluates to.
struct Val {
  enum Kind { Poison, Tensor, Number } kind = Poison;
  Value tensor;
  Scalar number;

  static Val poison() { return Val(); }
  static Val of(Value value) {
    Val v;
    v.kind = value ? Tensor : Poison;
    v.tensor = value;
    return v;
  }
  static Val of(Scalar number) {
    Val v;
    v.kind = Number;
    v.number = number;
    return v;
  }
  bool isPoison() const { return kind == Poison; }
  RankedTensorType type() const {
    return cast<RankedTensorType>(tensor.getType());
  }
};

/// Where an unbound dimension of a written type leaves the choice.
enum class Binding {
  Closed, // parameters, model inputs and outputs: unbound means replicated
  Open,   // block signatures, shard(): unbound means the compiler chooses
};

struct RepeatContext {
  RepeatContext *parent;
  int64_t count;
  Block *body;
  SmallVector<Value> stacked;
};

/// One inlined block body (or the model's).
struct Frame {
  const BlockDecl *block = nullptr;
  std::string prefix;
  /// The call that inlined this body; null for the model.
  std::optional<Location> callSite;
  RepeatContext *repeat = nullptr;
  llvm::StringMap<Val> vars;
  llvm::StringMap<SMLoc> params;
  llvm::StringMap<unsigned> callCounts;
  llvm::StringMap<SMLoc> callNames;
  /// When set, the one unnamed call of a repeat body takes no name of its own.
  bool soleCallIsAnonymous = false;
};

/// Where stage assignment can point: the model's named calls and repeats.
struct StageTarget {
  SMLoc loc;
  std::optional<int64_t> repeatCount;
};

class Generator {
public:
  Generator(MLIRContext &context, llvm::SourceMgr &sourceMgr,
            const FrontendOptions &options)
      : context(context), sourceMgr(sourceMgr), locator(sourceMgr),
        options(options), builder(&context) {}

  OwningOpRef<ModuleOp> run(const Program &program);

private:
  //===--------------------------------------------------------------------===//
  // Diagnostics
  //===--------------------------------------------------------------------===//

  Location fileLoc(SMLoc loc) {
    auto [line, col] = locator.lineAndColumn(loc);
    if (!line)
      return UnknownLoc::get(&context);
    return FileLineColLoc::get(&context, locator.bufferName(loc), line, col);
  }

  /// The location of code at `loc` in the current frame: inside an inlined
  /// block, a call-site location that points at the call too.
  Location loc(SMLoc at) {
    Location location = fileLoc(at);
    if (frame && frame->callSite)
      return CallSiteLoc::get(location, *frame->callSite);
    return location;
  }

  InFlightDiagnostic error(SMLoc at) {
    hadError = true;
    return emitError(loc(at));
  }

  /// Reports `message` at `at`, with a note at `otherLoc`.
  void errorWithNote(SMLoc at, const Twine &message, SMLoc otherLoc,
                     const Twine &note) {
    InFlightDiagnostic diag = error(at) << message;
    diag.attachNote(fileLoc(otherLoc)) << note;
  }

  //===--------------------------------------------------------------------===//
  // Constants and types
  //===--------------------------------------------------------------------===//

  std::optional<Scalar> evalConst(const Expr &expr);
  std::optional<int64_t> evalConstInt(const Expr &expr, StringRef what);
  std::optional<double> evalConstFloat(const Expr &expr, StringRef what);
  std::optional<Scalar> foldBinary(const Expr &expr, Scalar lhs, Scalar rhs);
  Type elementType(const Ident &dtype);
  RankedTensorType tensorType(const ast::TensorType &type);
  ShardingAttr sharding(const ast::TensorType &type, Binding binding,
                        int64_t leadingReplicated = 0);
  ShardingAttr shardingFromDims(ArrayRef<const AxisSpec *> specs,
                                ArrayRef<int64_t> shape,
                                ArrayRef<SMLoc> dimLocs, Binding binding,
                                int64_t leadingReplicated);
  bool hasBoundAxis(const ast::TensorType &type);

  //===--------------------------------------------------------------------===//
  // Declarations
  //===--------------------------------------------------------------------===//

  void collectDecls(const Program &program);
  void checkSignatureNames(const BlockDecl &block);
  void declareMesh();
  void generateModel(const BlockDecl &model);
  void checkUnusedBlock(const BlockDecl &block);
  void generateTrain(const TrainDecl &train);

  //===--------------------------------------------------------------------===//
  // Bodies
  //===--------------------------------------------------------------------===//

  /// Generates `stmts`; on `return`, fills `returned`.
  void generateBody(ArrayRef<StmtPtr> stmts, SmallVectorImpl<Val> *returned,
                    SMLoc *returnLoc);
  void generateParam(const Stmt &stmt);
  void generateRepeat(const Stmt &stmt);
  void bind(const Ident &target, Val value);
  Value materializeParam(RepeatContext *repeat, RankedTensorType type,
                         const std::string &name, InitAttr init,
                         ShardingAttr sharding, SMLoc at, Location argLoc);
  FailureOr<std::string> nextCallName(const Expr &call, StringRef block);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  SmallVector<Val> evalMulti(const Expr &expr);
  Val eval(const Expr &expr);
  Val evalTensor(const Expr &expr, StringRef what);
  Val evalName(const Expr &expr);
  Val evalBinary(const Expr &expr);
  Val evalNeg(const Expr &expr);
  SmallVector<Val> evalCall(const Expr &expr);
  SmallVector<Val> inlineBlock(const BlockDecl &block, const Expr &call);
  SmallVector<Val> evalBuiltin(const Expr &call, bool &handled);
  Value constantLike(Scalar number, Type element, SMLoc at);
  Val named(Val value, StringRef name);

  MLIRContext &context;
  llvm::SourceMgr &sourceMgr;
  /// How often the repeat being generated runs, with those around it.
  int64_t enclosingRuns = 1;
  SourceLocator locator;
  const FrontendOptions &options;
  OpBuilder builder;
  ModuleOp module;
  bool hadError = false;

  llvm::StringMap<Scalar> consts;
  llvm::StringMap<SMLoc> constLocs;
  llvm::StringMap<const BlockDecl *> blocks;
  SmallVector<const BlockDecl *> blockOrder;
  llvm::StringSet<> usedBlocks;
  SmallVector<const TrainDecl *> trains;
  const MeshDecl *meshDecl = nullptr;
  MeshOp mesh;
  FlatSymbolRefAttr meshRef;
  llvm::StringMap<SMLoc> manualAxes;

  Frame *frame = nullptr;
  SmallVector<const BlockDecl *> callStack;
  /// The model being generated.
  func::FuncOp function;
  SmallVector<Attribute> argAttrs;
  llvm::StringMap<SMLoc> paramNames;
  /// Named calls and repeats of the model being generated.
  llvm::StringMap<StageTarget> stageTargets;
  /// The same, per generated model, for the train blocks.
  llvm::StringMap<llvm::StringMap<StageTarget>> stageTargetsByModel;
  llvm::StringMap<func::FuncOp> models;
  llvm::StringMap<SMLoc> trainedModels;
};

} // namespace

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

std::optional<Scalar> Generator::foldBinary(const Expr &expr, Scalar lhs,
                                            Scalar rhs) {
  const std::string &op = expr.text;
  if (op == "@") {
    error(expr.loc()) << "'@' needs tensor operands, not numbers";
    return std::nullopt;
  }
  if (lhs.isInt && rhs.isInt) {
    int64_t result = 0;
    bool overflow = false;
    if (op == "+")
      overflow = llvm::AddOverflow(lhs.i, rhs.i, result);
    else if (op == "-")
      overflow = llvm::SubOverflow(lhs.i, rhs.i, result);
    else if (op == "*")
      overflow = llvm::MulOverflow(lhs.i, rhs.i, result);
    else {
      if (rhs.i == 0) {
        error(expr.loc()) << "division by zero";
        return std::nullopt;
      }
      // The one quotient an i64 cannot hold (and on which x86's division
      // traps, remainder included).
      if (lhs.i == INT64_MIN && rhs.i == -1) {
        error(expr.loc()) << "integer overflow in '" << expr.sourceText()
                          << "'";
        return std::nullopt;
      }
      // Exact integer division stays an integer (D/H); otherwise the
      // quotient is a float.
      if (lhs.i % rhs.i == 0)
        return Scalar{true, lhs.i / rhs.i, 0};
      return Scalar{false, 0, static_cast<double>(lhs.i) / rhs.i};
    }
    if (overflow) {
      error(expr.loc()) << "integer overflow in '" << expr.sourceText() << "'";
      return std::nullopt;
    }
    return Scalar{true, result, 0};
  }
  double a = lhs.asDouble(), b = rhs.asDouble(), result;
  if (op == "+")
    result = a + b;
  else if (op == "-")
    result = a - b;
  else if (op == "*")
    result = a * b;
  else {
    if (b == 0) {
      error(expr.loc()) << "division by zero";
      return std::nullopt;
    }
    result = a / b;
  }
  if (!std::isfinite(result)) {
    error(expr.loc()) << "'" << expr.sourceText() << "' is not a finite number";
    return std::nullopt;
  }
  return Scalar{false, 0, result};
}

std::optional<Scalar> Generator::evalConst(const Expr &expr) {
  switch (expr.kind) {
  case ExprKind::Int:
  case ExprKind::Float:
    if (expr.outOfRange) {
      error(expr.loc()) << "number '" << expr.sourceText()
                        << "' is out of range";
      return std::nullopt;
    }
    if (expr.kind == ExprKind::Int)
      return Scalar{true, expr.intValue, 0};
    return Scalar{false, 0, expr.floatValue};
  case ExprKind::Name: {
    if (frame) {
      auto it = frame->vars.find(expr.text);
      if (it != frame->vars.end()) {
        if (it->second.kind == Val::Number)
          return it->second.number;
        if (it->second.kind == Val::Tensor)
          error(expr.loc())
              << "'" << expr.text << "' is a tensor; a constant is needed here";
        return std::nullopt;
      }
    }
    auto it = consts.find(expr.text);
    if (it == consts.end()) {
      Val v = evalName(expr);
      if (v.kind == Val::Number)
        return v.number;
      return std::nullopt;
    }
    return it->second;
  }
  case ExprKind::Neg: {
    std::optional<Scalar> value = evalConst(*expr.operands[0]);
    if (!value)
      return std::nullopt;
    if (value->isInt) {
      if (value->i == INT64_MIN) {
        error(expr.loc()) << "integer overflow in '" << expr.sourceText()
                          << "'";
        return std::nullopt;
      }
      value->i = -value->i;
    } else {
      value->f = -value->f;
    }
    return value;
  }
  case ExprKind::Binary: {
    std::optional<Scalar> lhs = evalConst(*expr.operands[0]);
    std::optional<Scalar> rhs = evalConst(*expr.operands[1]);
    if (!lhs || !rhs)
      return std::nullopt;
    return foldBinary(expr, *lhs, *rhs);
  }
  default:
    error(expr.loc()) << "expected a constant number, got '"
                      << expr.sourceText() << "'";
    return std::nullopt;
  }
}

std::optional<int64_t> Generator::evalConstInt(const Expr &expr,
                                               StringRef what) {
  std::optional<Scalar> value = evalConst(expr);
  if (!value)
    return std::nullopt;
  if (!value->isInt) {
    error(expr.loc()) << what << " must be an integer, got "
                      << formatShortestDouble(value->f);
    return std::nullopt;
  }
  return value->i;
}

std::optional<double> Generator::evalConstFloat(const Expr &expr,
                                                StringRef what) {
  std::optional<Scalar> value = evalConst(expr);
  if (!value)
    return std::nullopt;
  return value->asDouble();
}

Type Generator::elementType(const Ident &dtype) {
  return llvm::StringSwitch<Type>(dtype.name)
      .Case("f32", builder.getF32Type())
      .Case("bf16", builder.getBF16Type())
      .Case("f16", builder.getF16Type())
      .Case("i32", builder.getI32Type())
      .Case("i64", builder.getI64Type())
      .Default(Type());
}

RankedTensorType Generator::tensorType(const ast::TensorType &type) {
  // Sizes in a written type name global constants only, never local values
  // of whichever body happens to be calling.
  Frame *savedFrame = frame;
  frame = nullptr;
  llvm::scope_exit restore([&] { frame = savedFrame; });
  SmallVector<int64_t> shape;
  bool ok = true;
  int64_t elements = 1;
  for (const Dim &dim : type.dims) {
    std::optional<int64_t> size = evalConstInt(*dim.size, "a dimension");
    if (!size) {
      ok = false;
      continue;
    }
    if (*size < 1) {
      error(dim.size->loc()) << "dimension '" << dim.size->sourceText()
                             << "' must be positive, got " << *size;
      ok = false;
      continue;
    }
    if (llvm::MulOverflow(elements, *size, elements) ||
        elements > kMaxTensorElements) {
      error(dim.size->loc()) << "tensor has more than 2^48 elements";
      return {};
    }
    shape.push_back(*size);
  }
  if (!ok)
    return {};
  return RankedTensorType::get(shape, elementType(type.dtype));
}

bool Generator::hasBoundAxis(const ast::TensorType &type) {
  return llvm::any_of(type.dims,
                      [](const Dim &dim) { return dim.axes.present; });
}

ShardingAttr Generator::shardingFromDims(ArrayRef<const AxisSpec *> specs,
                                         ArrayRef<int64_t> shape,
                                         ArrayRef<SMLoc> dimLocs,
                                         Binding binding,
                                         int64_t leadingReplicated) {
  bool anyBound =
      llvm::any_of(specs, [](const AxisSpec *s) { return s->present; });
  if (!mesh && meshDecl) {
    // The mesh declaration failed and was reported; say nothing more here.
    if (anyBound)
      hadError = true;
    return {};
  }
  if (!mesh) {
    if (anyBound) {
      for (const AxisSpec *spec : specs)
        if (spec->present) {
          error(spec->loc) << "sharding annotation without a mesh; declare "
                              "one, e.g. mesh m = [dp: 2]";
          break;
        }
      return {};
    }
    return {};
  }
  SmallVector<DimShardingAttr> dims(
      leadingReplicated,
      DimShardingAttr::get(&context, {}, /*isClosed=*/true, std::nullopt));
  llvm::StringMap<SMLoc> used;
  bool ok = true;
  for (auto [index, spec] : llvm::enumerate(specs)) {
    SmallVector<StringAttr> axes;
    int64_t devices = 1;
    std::string product;
    bool dimOk = true;
    for (const Ident &axis : spec->axes) {
      std::optional<int64_t> size = mesh.getAxisSize(axis.name);
      if (!size) {
        std::string known;
        for (Attribute name : mesh.getAxisNames())
          known += (known.empty() ? "" : ", ") +
                   cast<StringAttr>(name).getValue().str();
        error(axis.loc) << "unknown mesh axis '" << axis.name << "'; mesh '"
                        << mesh.getSymName() << "' has " << known;
        dimOk = false;
        continue;
      }
      if (manualAxes.count(axis.name)) {
        errorWithNote(axis.loc,
                      "axis '" + axis.name +
                          "' is the pipeline schedule's (manual) axis; only "
                          "the compiler assigns it, to stages",
                      manualAxes.lookup(axis.name), "made manual here");
        dimOk = false;
        continue;
      }
      auto [it, inserted] = used.try_emplace(axis.name, axis.loc);
      if (!inserted) {
        errorWithNote(axis.loc,
                      "axis '" + axis.name +
                          "' is used twice in one tensor's sharding",
                      it->second, "first used here");
        dimOk = false;
        continue;
      }
      axes.push_back(builder.getStringAttr(axis.name));
      devices *= *size;
      product += (product.empty() ? "" : " x ") + axis.name + "=" +
                 std::to_string(*size);
    }
    ok &= dimOk;
    if (dimOk && index < shape.size() && shape[index] % devices != 0) {
      error(dimLocs[index])
          << "dimension of size " << shape[index] << " is not divisible by "
          << product << " (" << devices << " devices); pad it to "
          << roundUpTo(shape[index], devices);
      ok = false;
    }
    std::optional<int64_t> priority;
    if (spec->priority) {
      StringRef text = spec->priority->name;
      int64_t value;
      if (!text.consume_front("p") || text.getAsInteger(10, value) ||
          value < 0) {
        error(spec->priority->loc)
            << "expected a priority such as p0 or p1 after the axes, got '"
            << spec->priority->name << "'";
        ok = false;
      } else {
        priority = value;
      }
    }
    bool closed = spec->present ? !spec->open : binding == Binding::Closed;
    dims.push_back(DimShardingAttr::get(&context, axes, closed, priority));
  }
  if (!ok)
    return {};
  return ShardingAttr::get(&context, meshRef, dims, {}, ReductionKind::Sum);
}

ShardingAttr Generator::sharding(const ast::TensorType &type, Binding binding,
                                 int64_t leadingReplicated) {
  RankedTensorType tensor = tensorType(type);
  if (!tensor)
    return {};
  SmallVector<const AxisSpec *> specs;
  SmallVector<SMLoc> locs;
  for (const Dim &dim : type.dims) {
    specs.push_back(&dim.axes);
    locs.push_back(dim.size->loc());
  }
  return shardingFromDims(specs, tensor.getShape(), locs, binding,
                          leadingReplicated);
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

void Generator::collectDecls(const Program &program) {
  for (const auto &file : program.files) {
    for (const Decl &decl : file->decls) {
      switch (decl.kind) {
      case Decl::Import:
        break;
      case Decl::Mesh:
        if (meshDecl) {
          errorWithNote(decl.mesh->name.loc,
                        "a program has one mesh; '" + meshDecl->name.name +
                            "' is already declared",
                        meshDecl->name.loc, "first mesh declared here");
          break;
        }
        meshDecl = decl.mesh.get();
        break;
      case Decl::Const: {
        const ConstDecl &constant = *decl.constant;
        if (constLocs.count(constant.name.name)) {
          errorWithNote(
              constant.name.loc,
              "constant '" + constant.name.name + "' is defined twice",
              constLocs.lookup(constant.name.name), "first defined here");
          break;
        }
        if (blocks.count(constant.name.name)) {
          errorWithNote(constant.name.loc,
                        "'" + constant.name.name + "' is already a block",
                        blocks.lookup(constant.name.name)->name.loc,
                        "block defined here");
          break;
        }
        std::optional<Scalar> value = evalConst(*constant.value);
        constLocs[constant.name.name] = constant.name.loc;
        if (value)
          consts[constant.name.name] = *value;
        break;
      }
      case Decl::Block: {
        const BlockDecl &block = *decl.block;
        auto [it, inserted] = blocks.try_emplace(block.name.name, &block);
        if (!inserted) {
          errorWithNote(block.name.loc,
                        std::string(block.isModel ? "model" : "block") + " '" +
                            block.name.name + "' is defined twice",
                        it->second->name.loc, "first defined here");
          break;
        }
        if (constLocs.count(block.name.name)) {
          errorWithNote(
              block.name.loc, "'" + block.name.name + "' is already a constant",
              constLocs.lookup(block.name.name), "constant defined here");
          break;
        }
        if (llvm::is_contained(kBuiltinOps, block.name.name)) {
          error(block.name.loc)
              << "'" << block.name.name << "' is a built-in op; give the "
              << (block.isModel ? "model" : "block") << " another name";
          break;
        }
        blockOrder.push_back(&block);
        checkSignatureNames(block);
        break;
      }
      case Decl::Train:
        trains.push_back(decl.train.get());
        for (const TrainClause &clause : decl.train->clauses)
          if (clause.key.name == "schedule" && clause.over &&
              clause.over->axes.size() == 1)
            manualAxes.try_emplace(clause.over->axes.front().name,
                                   clause.over->axes.front().loc);
        break;
      }
    }
  }
}

void Generator::checkSignatureNames(const BlockDecl &block) {
  llvm::StringMap<SMLoc> args;
  for (const Arg &arg : block.args) {
    auto [it, inserted] = args.try_emplace(arg.name.name, arg.name.loc);
    if (!inserted)
      errorWithNote(arg.name.loc,
                    "argument '" + arg.name.name + "' is declared twice",
                    it->second, "first declared here");
    else if (constLocs.count(arg.name.name))
      errorWithNote(arg.name.loc,
                    "argument '" + arg.name.name +
                        "' has the name of a constant",
                    constLocs.lookup(arg.name.name), "constant defined here");
  }
  llvm::StringMap<SMLoc> results;
  for (auto [index, result] : llvm::enumerate(block.results)) {
    // Unnamed model outputs are called output_<k>; block results are named
    // for documentation only.
    if (!block.isModel && !result.name)
      continue;
    std::string name =
        result.name ? result.name->name : "output_" + std::to_string(index);
    SMLoc loc = result.name ? result.name->loc : result.type.range.Start;
    auto [it, inserted] = results.try_emplace(name, loc);
    if (!inserted)
      errorWithNote(loc, "output name '" + name + "' is used twice", it->second,
                    "first used here");
  }
}

void Generator::declareMesh() {
  if (!meshDecl) {
    if (!options.meshOverrides.empty()) {
      hadError = true;
      emitError(UnknownLoc::get(&context))
          << "--mesh: the program declares no mesh";
    }
    return;
  }
  SmallVector<Attribute> names;
  SmallVector<int64_t> sizes;
  llvm::StringMap<SMLoc> seen;
  bool ok = true;
  for (const auto &[axis, sizeExpr] : meshDecl->axes) {
    auto [it, inserted] = seen.try_emplace(axis.name, axis.loc);
    if (!inserted) {
      errorWithNote(axis.loc, "mesh axis '" + axis.name + "' is declared twice",
                    it->second, "first declared here");
      ok = false;
      continue;
    }
    std::optional<int64_t> size = evalConstInt(*sizeExpr, "a mesh axis size");
    if (!size) {
      ok = false;
      continue;
    }
    if (*size < 1) {
      error(sizeExpr->loc()) << "mesh axis '" << axis.name
                             << "' must have a positive size, got " << *size;
      ok = false;
      continue;
    }
    names.push_back(builder.getStringAttr(axis.name));
    sizes.push_back(*size);
  }
  for (const MeshAxisOverride &override : options.meshOverrides) {
    auto it = llvm::find_if(names, [&](Attribute name) {
      return cast<StringAttr>(name).getValue() == override.axis;
    });
    if (it == names.end()) {
      // Reported, but the mesh is still built so that shardings are checked.
      error(meshDecl->name.loc)
          << "--mesh names axis '" << override.axis << "', which mesh '"
          << meshDecl->name.name << "' does not have";
      continue;
    }
    sizes[std::distance(names.begin(), it)] = override.size;
  }
  // Every device count derived from the mesh (a sharding's, the world's, a
  // microbatch's) then fits an int64_t, and the world an MPI rank (an int).
  std::optional<int64_t> devices = countDevices(sizes);
  if (!devices || *devices > kMaxMeshDevices) {
    std::string product;
    for (auto [name, size] : llvm::zip(names, sizes))
      product += (product.empty() ? "" : " x ") +
                 cast<StringAttr>(name).getValue().str() + "=" +
                 std::to_string(size);
    error(meshDecl->name.loc)
        << "mesh '" << meshDecl->name.name << "' has "
        << (devices ? std::to_string(*devices) : "2^63 or more") << " devices ("
        << product
        << "); a mesh has at most 2^31 - 1 (MPI numbers ranks with an int)";
    ok = false;
  }
  SmallVector<Attribute> manual;
  for (Attribute name : names)
    if (manualAxes.count(cast<StringAttr>(name).getValue()))
      manual.push_back(name);
  // An unknown schedule axis is reported with its train block; it is no axis.
  for (auto it = manualAxes.begin(); it != manualAxes.end();) {
    auto next = std::next(it);
    if (!seen.count(it->getKey()))
      manualAxes.erase(it);
    it = next;
  }
  // Unknown schedule axes are reported with the train block.
  if (!ok)
    return;
  builder.setInsertionPointToEnd(module.getBody());
  mesh = MeshOp::create(builder, fileLoc(meshDecl->name.loc),
                        meshDecl->name.name, builder.getArrayAttr(names),
                        builder.getDenseI64ArrayAttr(sizes),
                        builder.getArrayAttr(manual));
  meshRef = FlatSymbolRefAttr::get(&context, meshDecl->name.name);
}

/// Most runs of a repeat's body, its count times those around it.
static constexpr int64_t kMaxRepeatRuns = 2147483647;

OwningOpRef<ModuleOp> Generator::run(const Program &program) {
  // The module is the file given to loomc: what concerns the whole program
  // (it defines no model) is reported at its start.
  Location fileStart = UnknownLoc::get(&context);
  if (sourceMgr.getNumBuffers() > 0) // the first buffer, loaded before imports
    fileStart = FileLineColLoc::get(
        &context,
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
            ->getBufferIdentifier(),
        1, 1);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileStart);
  module = *owned;
  collectDecls(program);
  declareMesh();
  for (const BlockDecl *block : blockOrder)
    if (block->isModel)
      generateModel(*block);
  for (const BlockDecl *block : blockOrder)
    if (!block->isModel && !usedBlocks.contains(block->name.name))
      checkUnusedBlock(*block);
  for (const TrainDecl *train : trains)
    generateTrain(*train);
  if (hadError)
    return nullptr;
  if (failed(verify(module)))
    return nullptr;
  return owned;
}

//===----------------------------------------------------------------------===//
// Models and blocks
//===----------------------------------------------------------------------===//

static Location namedLoc(StringRef name, Location location) {
  return NameLoc::get(StringAttr::get(location.getContext(), name), location);
}

Val Generator::named(Val value, StringRef name) {
  if (value.kind != Val::Tensor)
    return value;
  // Name the value after the user's variable so printed IR reads `%q`;
  // block arguments and values defined elsewhere keep their own names.
  Operation *op = value.tensor.getDefiningOp();
  if (op && op->getNumResults() == 1 && !isa<NameLoc>(op->getLoc()))
    op->setLoc(namedLoc(name, op->getLoc()));
  return value;
}

void Generator::generateModel(const BlockDecl &model) {
  // Types first, so the function's signature is known before its body.
  SmallVector<Type> inputTypes;
  argAttrs.clear();
  paramNames.clear();
  stageTargets.clear();
  bool ok = true;
  // A model input or output: its type (a placeholder when it has errors)
  // and its attributes: name and closed sharding.
  auto signature = [&](const auto &typeExpr, StringRef nameAttr, StringRef name,
                       SmallVectorImpl<Type> &types) {
    RankedTensorType type = tensorType(typeExpr);
    ShardingAttr shard = sharding(typeExpr, Binding::Closed);
    if (!type || (mesh && !shard)) {
      ok = false;
      type = RankedTensorType::get({}, builder.getF32Type());
    }
    types.push_back(type);
    NamedAttrList attrs;
    attrs.set(nameAttr, builder.getStringAttr(name));
    if (shard)
      attrs.set(LoomDialect::kShardingAttrName, shard);
    return attrs.getDictionary(&context);
  };
  for (const Arg &arg : model.args)
    argAttrs.push_back(signature(arg.type, LoomDialect::kInputAttrName,
                                 arg.name.name, inputTypes));
  SmallVector<Type> resultTypes;
  SmallVector<Attribute> resultAttrs;
  for (auto [index, result] : llvm::enumerate(model.results))
    resultAttrs.push_back(signature(
        result.type, LoomDialect::kOutputAttrName,
        result.name ? result.name->name : "output_" + std::to_string(index),
        resultTypes));

  builder.setInsertionPointToEnd(module.getBody());
  function =
      func::FuncOp::create(builder, fileLoc(model.name.loc), model.name.name,
                           builder.getFunctionType(inputTypes, resultTypes));
  function->setAttr(LoomDialect::kModelAttrName, builder.getUnitAttr());
  Block *entry = function.addEntryBlock();
  models[model.name.name] = function;

  Frame modelFrame;
  modelFrame.block = &model;
  Frame *savedFrame = frame;
  frame = &modelFrame;
  llvm::scope_exit restore([&] { frame = savedFrame; });
  for (auto [arg, value] : llvm::zip(model.args, entry->getArguments())) {
    value.setLoc(namedLoc(arg.name.name, fileLoc(arg.name.loc)));
    modelFrame.vars[arg.name.name] = ok ? Val::of(value) : Val::poison();
  }
  builder.setInsertionPointToEnd(entry);
  callStack.push_back(&model);
  SmallVector<Val> returned;
  SMLoc returnLoc;
  generateBody(model.body, &returned, &returnLoc);
  callStack.pop_back();

  // The function gains an argument per parameter while its body is built.
  SmallVector<Value> results;
  bool resultsOk = returned.size() == model.results.size();
  if (!returned.empty() && !resultsOk)
    error(returnLoc) << "model '" << model.name.name << "' returns "
                     << returned.size() << " value(s) but declares "
                     << model.results.size();
  for (auto [index, value] : llvm::enumerate(returned)) {
    if (!resultsOk || value.isPoison()) {
      resultsOk = false;
      continue;
    }
    if (value.kind != Val::Tensor) {
      error(returnLoc) << "model outputs must be tensors";
      resultsOk = false;
      continue;
    }
    if (value.type() != resultTypes[index]) {
      error(returnLoc)
          << "model '" << model.name.name << "' returns "
          << describeType(value.type()) << " as output " << index
          << " but declares " << describeType(resultTypes[index])
          << (value.type().getShape() ==
                      cast<RankedTensorType>(resultTypes[index]).getShape()
                  ? "; use cast()"
                  : "");
      resultsOk = false;
      continue;
    }
    results.push_back(value.tensor);
  }
  if (!resultsOk || !ok) {
    hadError = true;
    function.erase();
    return;
  }
  func::ReturnOp::create(builder, fileLoc(returnLoc), results);
  SmallVector<Type> argTypes(entry->getArgumentTypes());
  function.setFunctionType(builder.getFunctionType(argTypes, resultTypes));
  function.setAllArgAttrs(argAttrs);
  function.setAllResultAttrs(resultAttrs);
  stageTargetsByModel[model.name.name] = std::move(stageTargets);
  stageTargets.clear();
}

void Generator::checkUnusedBlock(const BlockDecl &block) {
  // A block no model calls is still checked, against its own signature, in a
  // function that is thrown away.
  SmallVector<Type> types;
  for (const Arg &arg : block.args) {
    RankedTensorType type = tensorType(arg.type);
    sharding(arg.type, Binding::Open);
    if (!type)
      return;
    types.push_back(type);
  }
  OpBuilder::InsertionGuard guard(builder);
  // Its parameter names live in their own namespace, not the last model's.
  llvm::StringMap<SMLoc> savedParamNames = std::move(paramNames);
  paramNames.clear();
  llvm::scope_exit restoreNames(
      [&] { paramNames = std::move(savedParamNames); });
  builder.setInsertionPointToEnd(module.getBody());
  auto scratch = func::FuncOp::create(builder, fileLoc(block.name.loc),
                                      "__check_" + block.name.name,
                                      builder.getFunctionType(types, {}));
  Block *entry = scratch.addEntryBlock();
  builder.setInsertionPointToEnd(entry);
  function = scratch;
  argAttrs.assign(types.size(), builder.getDictionaryAttr({}));
  Frame blockFrame;
  blockFrame.block = &block;
  Frame *savedFrame = frame;
  frame = &blockFrame;
  for (auto [arg, value] : llvm::zip(block.args, entry->getArguments()))
    blockFrame.vars[arg.name.name] = Val::of(value);
  callStack.push_back(&block);
  SmallVector<Val> returned;
  SMLoc returnLoc;
  generateBody(block.body, &returned, &returnLoc);
  callStack.pop_back();
  frame = savedFrame;
  for (auto [index, value] : llvm::enumerate(returned)) {
    if (index >= block.results.size() || value.kind != Val::Tensor)
      continue;
    RankedTensorType declared = tensorType(block.results[index].type);
    if (declared && value.type() != declared)
      error(returnLoc) << "block '" << block.name.name << "' returns "
                       << describeType(value.type()) << " as result " << index
                       << " but declares " << describeType(declared);
  }
  if (!returned.empty() && returned.size() != block.results.size())
    error(returnLoc) << "block '" << block.name.name << "' returns "
                     << returned.size() << " value(s) but declares "
                     << block.results.size();
  scratch.erase();
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

void Generator::bind(const Ident &target, Val value) {
  if (consts.count(target.name) || constLocs.count(target.name)) {
    errorWithNote(target.loc,
                  "cannot assign to '" + target.name + "', a constant",
                  constLocs.lookup(target.name), "constant defined here");
    return;
  }
  if (frame->params.count(target.name)) {
    errorWithNote(target.loc,
                  "cannot assign to '" + target.name + "', a parameter",
                  frame->params.lookup(target.name), "parameter declared here");
    return;
  }
  frame->vars[target.name] = named(value, target.name);
}

void Generator::generateBody(ArrayRef<StmtPtr> stmts,
                             SmallVectorImpl<Val> *returned, SMLoc *returnLoc) {
  bool sawReturn = false;
  for (const StmtPtr &stmtPtr : stmts) {
    const Stmt &stmt = *stmtPtr;
    if (sawReturn) {
      error(stmt.range.Start) << "statement after 'return' is never run";
      return;
    }
    switch (stmt.kind) {
    case StmtKind::Param:
      generateParam(stmt);
      break;
    case StmtKind::Repeat:
      generateRepeat(stmt);
      break;
    case StmtKind::Assign: {
      SmallVector<Val> values = evalMulti(*stmt.values.front());
      if (values.size() != stmt.targets.size()) {
        if (!(values.size() == 1 && values.front().isPoison()))
          error(stmt.targets.front().loc)
              << "'" << stmt.values.front()->sourceText() << "' gives "
              << values.size() << " value(s) but " << stmt.targets.size()
              << " name(s) are assigned";
        for (const Ident &target : stmt.targets)
          frame->vars[target.name] = Val::poison();
        break;
      }
      for (auto [target, value] : llvm::zip(stmt.targets, values))
        bind(target, value);
      break;
    }
    case StmtKind::Return:
      if (!returned) {
        error(stmt.range.Start)
            << "'return' is not allowed in a repeat body; its last "
               "expression is the next carried value";
        return;
      }
      sawReturn = true;
      *returnLoc = stmt.range.Start;
      for (const ExprPtr &value : stmt.values)
        returned->push_back(eval(*value));
      break;
    }
  }
  if (returned && !sawReturn) {
    hadError = true;
    emitError(fileLoc(frame->block->end))
        << (frame->block->isModel ? "model '" : "block '")
        << frame->block->name.name << "' ends without 'return'";
  }
}

static InitAttr makeInit(MLIRContext *context, InitKind kind, double a,
                         double b) {
  return InitAttr::get(context, kind, llvm::APFloat(a), llvm::APFloat(b));
}

void Generator::generateParam(const Stmt &stmt) {
  const std::string &name = stmt.paramName.name;
  auto [it, inserted] = frame->params.try_emplace(name, stmt.paramName.loc);
  if (!inserted) {
    errorWithNote(stmt.paramName.loc,
                  "parameter '" + name + "' is declared twice in '" +
                      frame->block->name.name + "'",
                  it->second, "first declared here");
    return;
  }
  if (frame->vars.count(name)) {
    error(stmt.paramName.loc)
        << "parameter '" << name << "' shadows a value of the same name";
    return;
  }
  frame->vars[name] = Val::poison();
  RankedTensorType type = tensorType(stmt.paramType);
  ShardingAttr shard = sharding(stmt.paramType, Binding::Closed);
  if (!type || (mesh && !shard))
    return;
  // Initialiser.
  const std::string &initName = stmt.initName.name;
  SmallVector<double> args;
  for (const ExprPtr &arg : stmt.initArgs) {
    std::optional<double> value =
        evalConstFloat(*arg, "an initialiser argument");
    if (!value)
      return;
    args.push_back(*value);
  }
  InitAttr init;
  bool isFloat = isa<FloatType>(type.getElementType());
  if (initName == "normal") {
    if (args.size() != 1 && args.size() != 2) {
      error(stmt.initName.loc) << "normal takes (std) or (mean, std), got "
                               << args.size() << " argument(s)";
      return;
    }
    double mean = args.size() == 2 ? args[0] : 0.0, std = args.back();
    if (!(std > 0)) {
      error(stmt.initArgs.back()->loc())
          << "normal: the standard deviation must be positive, got "
          << formatShortestDouble(std);
      return;
    }
    init = makeInit(&context, InitKind::Normal, mean, std);
  } else if (initName == "uniform") {
    if (args.size() != 2) {
      error(stmt.initName.loc)
          << "uniform takes (low, high), got " << args.size() << " argument(s)";
      return;
    }
    if (!(args[0] < args[1])) {
      error(stmt.initArgs[0]->loc())
          << "uniform: low (" << formatShortestDouble(args[0])
          << ") must be below high (" << formatShortestDouble(args[1]) << ")";
      return;
    }
    init = makeInit(&context, InitKind::Uniform, args[0], args[1]);
  } else if (initName == "zeros" || initName == "ones") {
    if (!args.empty()) {
      error(stmt.initName.loc) << initName << " takes no arguments";
      return;
    }
    init = makeInit(
        &context, initName == "zeros" ? InitKind::Zeros : InitKind::Ones, 0, 0);
  } else {
    error(stmt.initName.loc) << "unknown initialiser '" << initName
                             << "'; expected normal(std), uniform(low, high), "
                                "zeros or ones";
    return;
  }
  if (!isFloat && (initName == "normal" || initName == "uniform")) {
    error(stmt.initName.loc)
        << initName << " initialises float parameters only, not "
        << describeType(type.getElementType());
    return;
  }
  std::string fullName = frame->prefix + name;
  auto [prev, fresh] = paramNames.try_emplace(fullName, stmt.paramName.loc);
  if (!fresh) {
    errorWithNote(stmt.paramName.loc,
                  "parameter name '" + fullName + "' is used twice",
                  prev->second, "first used here");
    return;
  }
  Value value = materializeParam(frame->repeat, type, fullName, init, shard,
                                 stmt.paramName.loc,
                                 namedLoc(fullName, loc(stmt.paramName.loc)));
  frame->vars[name] = value ? Val::of(value) : Val::poison();
}

Value Generator::materializeParam(RepeatContext *repeat, RankedTensorType type,
                                  const std::string &name, InitAttr init,
                                  ShardingAttr shard, SMLoc at,
                                  Location argLoc) {
  if (!repeat) {
    Value arg = function.getBody().front().addArgument(type, argLoc);
    NamedAttrList attrs;
    attrs.set(LoomDialect::kParamAttrName, builder.getStringAttr(name));
    attrs.set(LoomDialect::kInitAttrName, init);
    if (shard)
      attrs.set(LoomDialect::kShardingAttrName, shard);
    argAttrs.push_back(attrs.getDictionary(&context));
    return arg;
  }
  // Inside a repeat, the parameter is stacked along a new leading dimension
  // and the body sees one slice per iteration.
  SmallVector<int64_t> shape{repeat->count};
  llvm::append_range(shape, type.getShape());
  int64_t elements;
  if (llvm::MulOverflow(type.getNumElements(), repeat->count, elements) ||
      elements > kMaxTensorElements) {
    error(at) << "stacked over its repeat's " << repeat->count
              << " layers, this parameter has more than 2^48 elements";
    return {};
  }
  auto stackedType = RankedTensorType::get(shape, type.getElementType());
  ShardingAttr stackedShard;
  if (shard) {
    SmallVector<DimShardingAttr> dims{
        DimShardingAttr::get(&context, {}, /*isClosed=*/true, std::nullopt)};
    llvm::append_range(dims, shard.getDims());
    stackedShard = ShardingAttr::get(&context, shard.getMesh(), dims, {},
                                     ReductionKind::Sum);
  }
  Value outer = materializeParam(repeat->parent, stackedType, name, init,
                                 stackedShard, at, argLoc);
  if (!outer)
    return {};
  repeat->stacked.push_back(outer);
  return repeat->body->addArgument(type, argLoc);
}

void Generator::generateRepeat(const Stmt &stmt) {
  std::optional<int64_t> count = evalConstInt(*stmt.count, "a repeat count");
  auto poisonTargets = [&] {
    for (const Ident &target : stmt.targets)
      frame->vars[target.name] = Val::poison();
  };
  if (!count) {
    poisonTargets();
    return;
  }
  if (*count < 1) {
    error(stmt.count->loc())
        << "repeat count must be a positive constant, got " << *count;
    poisonTargets();
    return;
  }
  // Counts of nested repeats (here or in the blocks they call) multiply
  // into the runs of every op in the body, which --report and the memory
  // plan count in int64_t.
  int64_t runs = 0;
  bool overflow = llvm::MulOverflow(enclosingRuns, *count, runs);
  if (overflow || runs > kMaxRepeatRuns) {
    error(stmt.count->loc())
        << "repeat: with the repeats around it, this body would run "
        << (overflow ? "2^63 or more" : std::to_string(runs))
        << " times; at most 2^31 - 1";
    poisonTargets();
    return;
  }
  llvm::SaveAndRestore<int64_t> nested(enclosingRuns, runs);
  if (stmt.values.size() != stmt.targets.size()) {
    error(stmt.range.Start)
        << "repeat body gives " << stmt.values.size() << " value(s) for "
        << stmt.targets.size() << " carried name(s)";
    poisonTargets();
    return;
  }
  // Carried values: the targets' values before the loop.
  SmallVector<Value> carried;
  for (const Ident &target : stmt.targets) {
    auto it = frame->vars.find(target.name);
    if (it == frame->vars.end()) {
      error(target.loc) << "'" << target.name
                        << "' must have a value before the repeat, which "
                           "carries it from one iteration to the next";
      poisonTargets();
      return;
    }
    if (it->second.isPoison()) {
      poisonTargets();
      return;
    }
    if (it->second.kind != Val::Tensor) {
      error(target.loc) << "a repeat carries tensors; '" << target.name
                        << "' is a number";
      poisonTargets();
      return;
    }
    carried.push_back(it->second.tensor);
  }

  // Name for the parameters created inside.
  std::string name;
  if (stmt.repeatName) {
    name = stmt.repeatName->name;
    auto [it, inserted] =
        frame->callNames.try_emplace(name, stmt.repeatName->loc);
    if (!inserted) {
      errorWithNote(stmt.repeatName->loc,
                    "call name '" + name + "' is used twice in '" +
                        frame->block->name.name + "'",
                    it->second, "first used here");
      poisonTargets();
      return;
    }
  } else {
    name = "repeat_" + std::to_string(frame->callCounts["repeat"]++);
    auto [it, inserted] = frame->callNames.try_emplace(name, stmt.range.Start);
    if (!inserted) {
      errorWithNote(stmt.range.Start,
                    "this repeat's automatic name '" + name +
                        "' is already used; name it with 'as'",
                    it->second, "'" + name + "' used here");
      poisonTargets();
      return;
    }
  }
  if (frame->block && frame->block->isModel && !frame->repeat)
    stageTargets[name] = StageTarget{stmt.range.Start, *count};

  RepeatContext repeat{frame->repeat, *count, new Block(), {}};
  std::unique_ptr<Block> body(repeat.body);
  Location repeatLoc = loc(stmt.range.Start);
  for (auto [target, value] : llvm::zip(stmt.targets, carried))
    body->addArgument(value.getType(), namedLoc(target.name, loc(target.loc)));

  // The body shares the enclosing frame's names but has its own variables.
  Frame bodyFrame;
  bodyFrame.block = frame->block;
  bodyFrame.prefix = frame->prefix + name + ".";
  bodyFrame.callSite = frame->callSite;
  bodyFrame.repeat = &repeat;
  for (const auto &entry : frame->vars)
    bodyFrame.vars[entry.getKey()] = entry.getValue();
  for (auto [target, arg] : llvm::zip(stmt.targets, body->getArguments()))
    bodyFrame.vars[target.name] = Val::of(arg);
  unsigned calls = 0;
  std::function<void(const Expr &)> countCalls = [&](const Expr &e) {
    if (e.kind == ExprKind::Call && blocks.count(e.text))
      ++calls;
    for (const ExprPtr &operand : e.operands)
      countCalls(*operand);
  };
  for (const StmtPtr &inner : stmt.body)
    for (const ExprPtr &value : inner->values)
      countCalls(*value);
  for (const ExprPtr &value : stmt.values)
    countCalls(*value);
  bodyFrame.soleCallIsAnonymous = calls == 1;

  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(body.get());
    Frame *outerFrame = frame;
    frame = &bodyFrame;
    for (const StmtPtr &inner : stmt.body)
      if (inner->kind == StmtKind::Param) {
        error(inner->range.Start)
            << "declare parameters in a block and call it inside the repeat";
        frame = outerFrame;
        poisonTargets();
        return;
      }
    generateBody(stmt.body, nullptr, nullptr);
    SmallVector<Value> yielded;
    bool ok = true;
    for (auto [index, value] : llvm::enumerate(stmt.values)) {
      Val next = eval(*value);
      if (next.isPoison()) {
        ok = false;
        continue;
      }
      if (next.kind != Val::Tensor ||
          next.tensor.getType() != carried[index].getType()) {
        error(value->loc())
            << "repeat body must give back '" << stmt.targets[index].name
            << "' with its type " << describeType(carried[index].getType())
            << ", got "
            << (next.kind == Val::Tensor ? describeType(next.tensor.getType())
                                         : std::string("a number"));
        ok = false;
        continue;
      }
      yielded.push_back(next.tensor);
    }
    frame = outerFrame;
    if (!ok) {
      poisonTargets();
      return;
    }
    YieldOp::create(builder, repeatLoc, yielded);
  }
  SmallVector<Type> resultTypes;
  for (Value value : carried)
    resultTypes.push_back(value.getType());
  auto op = RepeatOp::create(builder, repeatLoc, resultTypes,
                             builder.getI64IntegerAttr(*count), carried,
                             repeat.stacked);
  op.getBody().push_back(body.release());
  for (auto [target, result] : llvm::zip(stmt.targets, op.getResults())) {
    if (stmt.targets.size() == 1)
      op->setLoc(namedLoc(target.name, repeatLoc));
    frame->vars[target.name] = Val::of(result);
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Val Generator::eval(const Expr &expr) {
  SmallVector<Val> values = evalMulti(expr);
  if (values.size() == 1)
    return values.front();
  if (!values.empty())
    error(expr.loc()) << "'" << expr.sourceText() << "' gives " << values.size()
                      << " values; assign them to as many names";
  return Val::poison();
}

Val Generator::evalTensor(const Expr &expr, StringRef what) {
  Val value = eval(expr);
  if (value.kind == Val::Number) {
    error(expr.loc()) << what << " must be a tensor, got the number '"
                      << expr.sourceText() << "'";
    return Val::poison();
  }
  return value;
}

SmallVector<Val> Generator::evalMulti(const Expr &expr) {
  switch (expr.kind) {
  case ExprKind::Int:
  case ExprKind::Float: {
    std::optional<Scalar> value = evalConst(expr);
    return {value ? Val::of(*value) : Val::poison()};
  }
  case ExprKind::Name:
    return {evalName(expr)};
  case ExprKind::Neg:
    return {evalNeg(expr)};
  case ExprKind::Binary:
    return {evalBinary(expr)};
  case ExprKind::Call:
    return evalCall(expr);
  case ExprKind::String:
  case ExprKind::Bool:
  case ExprKind::DType:
  case ExprKind::Tuple:
  case ExprKind::List:
    error(expr.loc()) << "'" << expr.sourceText()
                      << "' is not a value here; it can only be an argument "
                         "of a built-in op";
    return {Val::poison()};
  }
  llvm_unreachable("unknown expression kind");
}

/// The known name closest to `name`, for "did you mean" hints.
static std::string closestName(StringRef name, ArrayRef<StringRef> candidates) {
  std::string best;
  unsigned bestDistance = 3;
  for (StringRef candidate : candidates) {
    unsigned distance = name.edit_distance(candidate, true, bestDistance);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = candidate.str();
    }
  }
  return best;
}

Val Generator::evalName(const Expr &expr) {
  if (frame) {
    auto it = frame->vars.find(expr.text);
    if (it != frame->vars.end())
      return it->second;
  }
  auto it = consts.find(expr.text);
  if (it != consts.end())
    return Val::of(it->second);
  if (constLocs.count(expr.text))
    return Val::poison(); // its definition already failed
  if (blocks.count(expr.text)) {
    error(expr.loc()) << "'" << expr.text << "' is a block; call it as "
                      << expr.text << "(...)";
    return Val::poison();
  }
  SmallVector<StringRef> candidates;
  if (frame)
    for (const auto &entry : frame->vars)
      candidates.push_back(entry.getKey());
  for (const auto &entry : consts)
    candidates.push_back(entry.getKey());
  llvm::sort(candidates);
  std::string hint = closestName(expr.text, candidates);
  InFlightDiagnostic diag = error(expr.loc())
                            << "unknown name '" << expr.text << "'";
  if (!hint.empty())
    diag << "; did you mean '" << hint << "'?";
  return Val::poison();
}

Value Generator::constantLike(Scalar number, Type element, SMLoc at) {
  auto type = RankedTensorType::get({}, element);
  Attribute value;
  if (auto floatType = dyn_cast<FloatType>(element)) {
    llvm::APFloat converted(number.asDouble());
    bool lost;
    llvm::APFloat::opStatus status =
        converted.convert(floatType.getFloatSemantics(),
                          llvm::APFloat::rmNearestTiesToEven, &lost);
    if (status & llvm::APFloat::opOverflow) {
      error(at) << "the number " << formatShortestDouble(number.asDouble())
                << " is out of range for " << describeType(element);
      return {};
    }
    value = DenseElementsAttr::get(type, converted);
  } else {
    if (!number.isInt) {
      error(at) << "the number " << formatShortestDouble(number.f)
                << " cannot combine with an integer tensor; use cast()";
      return {};
    }
    unsigned width = element.getIntOrFloatBitWidth();
    if (width < 64 && (number.i < -(int64_t(1) << (width - 1)) ||
                       number.i >= (int64_t(1) << (width - 1)))) {
      error(at) << "the number " << number.i << " is out of range for "
                << describeType(element);
      return {};
    }
    value = DenseElementsAttr::get(
        type, llvm::APInt(width, number.i, /*isSigned=*/true));
  }
  return ConstantOp::create(builder, loc(at), type, cast<ElementsAttr>(value));
}

Val Generator::evalNeg(const Expr &expr) {
  Val operand = eval(*expr.operands[0]);
  if (operand.isPoison())
    return operand;
  if (operand.kind == Val::Number)
    return evalConst(expr) ? Val::of(*evalConst(expr)) : Val::poison();
  return Val::of(
      NegOp::create(builder, loc(expr.loc()), operand.type(), operand.tensor)
          .getResult());
}

Val Generator::evalBinary(const Expr &expr) {
  Val lhs = eval(*expr.operands[0]);
  Val rhs = eval(*expr.operands[1]);
  if (lhs.isPoison() || rhs.isPoison())
    return Val::poison();
  if (lhs.kind == Val::Number && rhs.kind == Val::Number) {
    std::optional<Scalar> folded = foldBinary(expr, lhs.number, rhs.number);
    return folded ? Val::of(*folded) : Val::poison();
  }
  const std::string &op = expr.text;
  Location location = loc(expr.loc());
  if (op == "@") {
    if (lhs.kind != Val::Tensor || rhs.kind != Val::Tensor) {
      error(expr.loc()) << "'@' needs tensor operands";
      return Val::poison();
    }
    FailureOr<RankedTensorType> type =
        inferMatmulType(location, lhs.type(), rhs.type());
    if (failed(type)) {
      hadError = true;
      return Val::poison();
    }
    return Val::of(
        MatmulOp::create(builder, location, *type, lhs.tensor, rhs.tensor)
            .getResult());
  }
  // A number takes the element type of the tensor it meets (weak typing).
  if (lhs.kind == Val::Number)
    lhs = Val::of(constantLike(lhs.number, rhs.type().getElementType(),
                               expr.operands[0]->loc()));
  if (rhs.kind == Val::Number)
    rhs = Val::of(constantLike(rhs.number, lhs.type().getElementType(),
                               expr.operands[1]->loc()));
  if (lhs.isPoison() || rhs.isPoison())
    return Val::poison();
  FailureOr<RankedTensorType> type =
      inferElementwiseType(location, op, lhs.type(), rhs.type());
  if (failed(type)) {
    hadError = true;
    return Val::poison();
  }
  Value result;
  if (op == "+")
    result = AddOp::create(builder, location, *type, lhs.tensor, rhs.tensor);
  else if (op == "-")
    result = SubOp::create(builder, location, *type, lhs.tensor, rhs.tensor);
  else if (op == "*")
    result = MulOp::create(builder, location, *type, lhs.tensor, rhs.tensor);
  else
    result = DivOp::create(builder, location, *type, lhs.tensor, rhs.tensor);
  return Val::of(result);
}

FailureOr<std::string> Generator::nextCallName(const Expr &call,
                                               StringRef block) {
  if (call.callName) {
    const Ident &name = *call.callName;
    auto [it, inserted] = frame->callNames.try_emplace(name.name, name.loc);
    if (!inserted) {
      errorWithNote(name.loc,
                    "call name '" + name.name + "' is used twice in '" +
                        frame->block->name.name + "'",
                    it->second, "first used here");
      return failure();
    }
    return name.name;
  }
  if (frame->soleCallIsAnonymous)
    return std::string();
  std::string name = (block + "_" + Twine(frame->callCounts[block]++)).str();
  auto [it, inserted] = frame->callNames.try_emplace(name, call.loc());
  if (!inserted) {
    errorWithNote(call.loc(),
                  "this call's automatic name '" + name +
                      "' is already used; name it with 'as'",
                  it->second, "'" + name + "' used here");
    return failure();
  }
  return name;
}

SmallVector<Val> Generator::evalCall(const Expr &call) {
  auto blockIt = blocks.find(call.text);
  if (blockIt != blocks.end()) {
    const BlockDecl &block = *blockIt->second;
    if (block.isModel) {
      error(call.loc()) << "'" << call.text
                        << "' is a model; only blocks can be called";
      return {Val::poison()};
    }
    return inlineBlock(block, call);
  }
  if (call.callName) {
    error(call.callName->loc) << "only block calls can be named with 'as'";
    return {Val::poison()};
  }
  bool handled = false;
  SmallVector<Val> values = evalBuiltin(call, handled);
  if (handled)
    return values;
  SmallVector<StringRef> candidates(std::begin(kBuiltinOps),
                                    std::end(kBuiltinOps));
  for (const BlockDecl *block : blockOrder)
    candidates.push_back(block->name.name);
  std::string hint = closestName(call.text, candidates);
  InFlightDiagnostic diag = error(call.loc())
                            << "unknown block or op '" << call.text << "'";
  if (!hint.empty())
    diag << "; did you mean '" << hint << "'?";
  return {Val::poison()};
}

SmallVector<Val> Generator::inlineBlock(const BlockDecl &block,
                                        const Expr &call) {
  auto poison = [&] {
    return SmallVector<Val>(std::max<size_t>(block.results.size(), 1),
                            Val::poison());
  };
  if (llvm::is_contained(callStack, &block)) {
    std::string chain;
    for (const BlockDecl *caller : callStack)
      chain += caller->name.name + " -> ";
    errorWithNote(call.loc(),
                  "block '" + block.name.name + "' calls itself (" + chain +
                      block.name.name + "); blocks cannot be recursive",
                  block.name.loc, "'" + block.name.name + "' defined here");
    return poison();
  }
  usedBlocks.insert(block.name.name);
  for (const Ident &keyword : call.argNames)
    if (!keyword.name.empty()) {
      error(keyword.loc) << "block '" << block.name.name
                         << "' takes positional arguments only";
      return poison();
    }
  if (call.operands.size() != block.args.size()) {
    errorWithNote(call.loc(),
                  "block '" + block.name.name + "' takes " +
                      Twine(block.args.size()).str() + " argument(s), got " +
                      Twine(call.operands.size()).str(),
                  block.name.loc, "'" + block.name.name + "' defined here");
    return poison();
  }
  FailureOr<std::string> maybeCallName = nextCallName(call, block.name.name);
  if (failed(maybeCallName))
    return poison();
  std::string callName = *maybeCallName;
  SmallVector<Val> args;
  bool ok = true;
  for (auto [index, operand] : llvm::enumerate(call.operands)) {
    Val arg = evalTensor(*operand, "a block argument");
    if (arg.isPoison()) {
      ok = false;
      continue;
    }
    RankedTensorType declared = tensorType(block.args[index].type);
    if (!declared) {
      ok = false;
      continue;
    }
    if (arg.type() != declared) {
      errorWithNote(operand->loc(),
                    "argument " + Twine(index + 1).str() + " of '" +
                        block.name.name + "' must be " +
                        describeType(declared) + ", got " +
                        describeType(arg.type()),
                    block.args[index].name.loc, "parameter declared here");
      ok = false;
      continue;
    }
    args.push_back(arg);
  }
  if (!ok)
    return poison();

  Frame callee;
  callee.block = &block;
  callee.prefix =
      callName.empty() ? frame->prefix : frame->prefix + callName + ".";
  Location callLoc = loc(call.loc());
  callee.callSite = callLoc;
  callee.repeat = frame->repeat;
  Frame *caller = frame;
  // A block's signature constrains the shardings at its boundary.
  for (auto [arg, value] : llvm::zip(block.args, args)) {
    Val bound = value;
    if (mesh && hasBoundAxis(arg.type)) {
      frame = &callee;
      ShardingAttr shard = sharding(arg.type, Binding::Open);
      frame = caller;
      if (!shard)
        return poison();
      bound = Val::of(
          ShardOp::create(
              builder,
              namedLoc(arg.name.name,
                       CallSiteLoc::get(fileLoc(arg.name.loc), callLoc)),
              value.type(), value.tensor, shard)
              .getResult());
    }
    callee.vars[arg.name.name] = bound;
  }
  frame = &callee;
  callStack.push_back(&block);
  SmallVector<Val> returned;
  SMLoc returnLoc;
  generateBody(block.body, &returned, &returnLoc);
  callStack.pop_back();
  frame = caller;
  if (caller->block && caller->block->isModel && !caller->repeat &&
      !callName.empty())
    stageTargets[callName] = StageTarget{call.loc(), std::nullopt};

  if (returned.size() != block.results.size()) {
    if (!returned.empty())
      error(returnLoc) << "block '" << block.name.name << "' returns "
                       << returned.size() << " value(s) but declares "
                       << block.results.size();
    return poison();
  }
  SmallVector<Val> results;
  for (auto [index, value] : llvm::enumerate(returned)) {
    const Result &declaredResult = block.results[index];
    if (value.isPoison())
      return poison();
    if (value.kind != Val::Tensor) {
      error(returnLoc) << "block results must be tensors";
      return poison();
    }
    RankedTensorType declared = tensorType(declaredResult.type);
    if (!declared)
      return poison();
    if (value.type() != declared) {
      Frame *saved = frame;
      frame = &callee;
      error(returnLoc) << "block '" << block.name.name << "' returns "
                       << describeType(value.type()) << " as result " << index
                       << " but declares " << describeType(declared)
                       << (value.type().getShape() == declared.getShape()
                               ? "; use cast()"
                               : "");
      frame = saved;
      return poison();
    }
    Val result = value;
    if (mesh && hasBoundAxis(declaredResult.type)) {
      frame = &callee;
      ShardingAttr shard = sharding(declaredResult.type, Binding::Open);
      Location resultLoc = loc(declaredResult.type.range.Start);
      frame = caller;
      if (!shard)
        return poison();
      result = Val::of(
          ShardOp::create(builder, resultLoc, value.type(), value.tensor, shard)
              .getResult());
    }
    results.push_back(result);
  }
  return results;
}

//===----------------------------------------------------------------------===//
// Built-in ops
//===----------------------------------------------------------------------===//

namespace {
/// How a built-in op takes its arguments: parameter names in positional
/// order, of which the first `required` must be given.
struct BuiltinSignature {
  ArrayRef<StringRef> params;
  unsigned required;
};
} // namespace

/// Binds the arguments of `call` to `sig`'s parameters; null slots are
/// defaults. Reports arity and keyword errors.
static bool bindArguments(const Expr &call, const BuiltinSignature &sig,
                          SmallVectorImpl<const Expr *> &slots,
                          function_ref<InFlightDiagnostic(SMLoc)> error) {
  slots.assign(sig.params.size(), nullptr);
  auto usage = [&] {
    std::string text = call.text + "(";
    for (auto [i, param] : llvm::enumerate(sig.params))
      text += (i ? ", " : "") + param.str() + (i < sig.required ? "" : "=...");
    return text + ")";
  };
  bool sawKeyword = false;
  for (auto [index, operand] : llvm::enumerate(call.operands)) {
    const Ident &keyword = call.argNames[index];
    size_t slot;
    if (keyword.name.empty()) {
      if (sawKeyword) {
        error(operand->loc()) << "positional argument after a keyword "
                                 "argument";
        return false;
      }
      if (index >= sig.params.size()) {
        error(operand->loc())
            << call.text << " takes at most " << sig.params.size()
            << " argument(s): " << usage();
        return false;
      }
      slot = index;
    } else {
      sawKeyword = true;
      auto it = llvm::find(sig.params, keyword.name);
      if (it == sig.params.end()) {
        error(keyword.loc) << "unknown keyword argument '" << keyword.name
                           << "' for " << call.text << "; expected " << usage();
        return false;
      }
      slot = std::distance(sig.params.begin(), it);
      if (slots[slot]) {
        error(keyword.loc) << "argument '" << keyword.name
                           << "' is given twice";
        return false;
      }
    }
    slots[slot] = operand.get();
  }
  for (unsigned i = 0; i < sig.required; ++i)
    if (!slots[i]) {
      error(call.loc()) << call.text << " is missing argument '"
                        << sig.params[i] << "': " << usage();
      return false;
    }
  return true;
}

/// Builds one elementwise unary op of type `type`.
template <typename OpTy>
static Value createUnary(OpBuilder &builder, Location loc, Type type,
                         Value input) {
  return OpTy::create(builder, loc, type, input);
}

SmallVector<Val> Generator::evalBuiltin(const Expr &call, bool &handled) {
  static constexpr StringRef kX[] = {"x"};
  static constexpr StringRef kGelu[] = {"x", "approximate"};
  static constexpr StringRef kSoftmax[] = {"x", "dim"};
  static constexpr StringRef kLayerNorm[] = {"x", "scale", "bias", "eps"};
  static constexpr StringRef kRMSNorm[] = {"x", "scale", "eps"};
  static constexpr StringRef kReduce[] = {"x", "dim", "keepdim"};
  static constexpr StringRef kReshape[] = {"x", "shape"};
  static constexpr StringRef kTranspose[] = {"x", "perm"};
  static constexpr StringRef kConcat[] = {"tensors", "dim"};
  static constexpr StringRef kSplit[] = {"x", "sizes", "dim"};
  static constexpr StringRef kSlice[] = {"x", "dim", "start", "end"};
  static constexpr StringRef kCast[] = {"x", "dtype"};
  static constexpr StringRef kEmbedding[] = {"ids", "table"};
  static constexpr StringRef kAttention[] = {"q", "k", "v", "causal", "scale"};
  static constexpr StringRef kCrossEntropy[] = {"logits", "targets"};
  static constexpr StringRef kEinsum[] = {"spec", "a", "b"};
  static constexpr StringRef kShard[] = {"x", "sharding"};

  StringRef name = call.text;
  BuiltinSignature sig;
  bool isUnary = llvm::is_contained(
      {"relu", "silu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "neg"},
      name);
  if (isUnary)
    sig = {kX, 1};
  else if (name == "gelu")
    sig = {kGelu, 1};
  else if (name == "softmax")
    sig = {kSoftmax, 1};
  else if (name == "layernorm")
    sig = {kLayerNorm, 3};
  else if (name == "rmsnorm")
    sig = {kRMSNorm, 2};
  else if (name == "sum" || name == "mean" || name == "max")
    sig = {kReduce, 1};
  else if (name == "reshape")
    sig = {kReshape, 2};
  else if (name == "transpose")
    sig = {kTranspose, 1};
  else if (name == "concat")
    sig = {kConcat, 1};
  else if (name == "split")
    sig = {kSplit, 2};
  else if (name == "slice")
    sig = {kSlice, 4};
  else if (name == "cast")
    sig = {kCast, 2};
  else if (name == "embedding")
    sig = {kEmbedding, 2};
  else if (name == "attention")
    sig = {kAttention, 3};
  else if (name == "cross_entropy")
    sig = {kCrossEntropy, 2};
  else if (name == "einsum")
    sig = {kEinsum, 2};
  else if (name == "shard")
    sig = {kShard, 2};
  else
    return {};
  handled = true;

  SmallVector<const Expr *> slots;
  if (!bindArguments(call, sig, slots, [&](SMLoc at) { return error(at); }))
    return {Val::poison()};
  Location location = loc(call.loc());
  auto fail = [&]() -> SmallVector<Val> {
    hadError = true;
    return {Val::poison()};
  };
  // Tensor operand `i`, or poison (already reported).
  auto tensorArg = [&](unsigned i) { return evalTensor(*slots[i], call.text); };
  auto floatTensorArg = [&](unsigned i) -> Val {
    Val value = tensorArg(i);
    if (value.kind == Val::Tensor &&
        !isa<FloatType>(value.type().getElementType())) {
      error(slots[i]->loc()) << call.text << " needs a float tensor, got "
                             << describeType(value.type());
      return Val::poison();
    }
    return value;
  };
  // A dimension index in [-rank, rank), normalised to [0, rank).
  auto dimArg = [&](const Expr *expr, int64_t rank,
                    int64_t fallback) -> std::optional<int64_t> {
    if (!expr)
      return fallback;
    std::optional<int64_t> dim = evalConstInt(*expr, "a dimension index");
    if (!dim)
      return std::nullopt;
    if (*dim < -rank || *dim >= rank) {
      error(expr->loc()) << "dimension " << *dim
                         << " is out of range for a rank-" << rank << " tensor";
      return std::nullopt;
    }
    return *dim < 0 ? *dim + rank : *dim;
  };
  auto intList = [&](const Expr *expr,
                     StringRef what) -> std::optional<SmallVector<int64_t>> {
    if (expr->kind != ExprKind::List) {
      error(expr->loc()) << what << " is a list, as in [2, 4]";
      return std::nullopt;
    }
    SmallVector<int64_t> values;
    for (const ExprPtr &item : expr->operands) {
      if (item->axes.present) {
        error(item->axes.loc) << what << " takes no mesh axes";
        return std::nullopt;
      }
      std::optional<int64_t> value = evalConstInt(*item, what);
      if (!value)
        return std::nullopt;
      values.push_back(*value);
    }
    return values;
  };
  auto boolArg = [&](const Expr *expr, bool fallback) -> std::optional<bool> {
    if (!expr)
      return fallback;
    if (expr->kind != ExprKind::Bool) {
      error(expr->loc()) << "expected true or false";
      return std::nullopt;
    }
    return expr->intValue != 0;
  };
  auto one = [](Value value) -> SmallVector<Val> { return {Val::of(value)}; };

  if (isUnary || name == "gelu") {
    Val x = name == "neg" ? tensorArg(0) : floatTensorArg(0);
    if (x.isPoison())
      return {x};
    RankedTensorType type = x.type();
    if (name == "gelu") {
      GeluApproximation approx = GeluApproximation::None;
      if (const Expr *mode = slots[1]) {
        if (mode->kind != ExprKind::String ||
            (mode->text != "none" && mode->text != "tanh")) {
          error(mode->loc()) << "approximate is \"none\" or \"tanh\"";
          return fail();
        }
        approx = mode->text == "tanh" ? GeluApproximation::Tanh
                                      : GeluApproximation::None;
      }
      return one(GeluOp::create(builder, location, type, x.tensor,
                                GeluApproximationAttr::get(&context, approx)));
    }
    using UnaryBuilder = Value (*)(OpBuilder &, Location, Type, Value);
    UnaryBuilder build = llvm::StringSwitch<UnaryBuilder>(name)
                             .Case("relu", createUnary<ReluOp>)
                             .Case("silu", createUnary<SiluOp>)
                             .Case("tanh", createUnary<TanhOp>)
                             .Case("sigmoid", createUnary<SigmoidOp>)
                             .Case("exp", createUnary<ExpOp>)
                             .Case("log", createUnary<LogOp>)
                             .Case("sqrt", createUnary<SqrtOp>)
                             .Case("rsqrt", createUnary<RsqrtOp>)
                             .Default(createUnary<NegOp>);
    return one(build(builder, location, type, x.tensor));
  }
  if (name == "softmax") {
    Val x = floatTensorArg(0);
    if (x.isPoison())
      return {x};
    std::optional<int64_t> dim =
        dimArg(slots[1], x.type().getRank(), x.type().getRank() - 1);
    if (!dim)
      return fail();
    return one(SoftmaxOp::create(builder, location, x.type(), x.tensor,
                                 builder.getI64IntegerAttr(*dim)));
  }
  if (name == "layernorm" || name == "rmsnorm") {
    bool isLayerNorm = name == "layernorm";
    Val x = floatTensorArg(0), scale = floatTensorArg(1);
    Val bias = isLayerNorm ? floatTensorArg(2) : Val::of(x.tensor);
    if (x.isPoison() || scale.isPoison() || bias.isPoison())
      return fail();
    const Expr *epsExpr = slots[isLayerNorm ? 3 : 2];
    double eps = isLayerNorm ? 1e-5 : 1e-6;
    if (epsExpr) {
      std::optional<double> value = evalConstFloat(*epsExpr, "eps");
      if (!value)
        return fail();
      if (!(*value > 0)) {
        error(epsExpr->loc())
            << "eps must be positive, got " << formatShortestDouble(*value);
        return fail();
      }
      eps = *value;
    }
    // Scale and bias may each be x's type or f32, but a norm takes one
    // type for both: widen the other to f32, which is exact since the
    // norm computes in f32 either way.
    Type scaleElement = scale.type().getElementType(),
         biasElement = bias.type().getElementType();
    Type inputElement = x.type().getElementType();
    if (isLayerNorm && scaleElement != biasElement &&
        isNormAffineElement(scaleElement, inputElement) &&
        isNormAffineElement(biasElement, inputElement)) {
      Val &narrow = scaleElement.isF32() ? bias : scale;
      auto wide =
          RankedTensorType::get(narrow.type().getShape(), builder.getF32Type());
      narrow = Val::of(CastOp::create(builder, location, wide, narrow.tensor));
    }
    SmallVector<RankedTensorType> affine{scale.type()};
    if (isLayerNorm)
      affine.push_back(bias.type());
    FailureOr<RankedTensorType> type =
        inferNormType(location, name, x.type(), affine);
    if (failed(type))
      return fail();
    if (isLayerNorm)
      return one(LayerNormOp::create(builder, location, *type, x.tensor,
                                     scale.tensor, bias.tensor,
                                     builder.getF64FloatAttr(eps)));
    return one(RMSNormOp::create(builder, location, *type, x.tensor,
                                 scale.tensor, builder.getF64FloatAttr(eps)));
  }
  if (name == "sum" || name == "mean" || name == "max") {
    Val x = name == "mean" ? floatTensorArg(0) : tensorArg(0);
    if (x.isPoison())
      return {x};
    int64_t rank = x.type().getRank();
    SmallVector<int64_t> dims;
    if (!slots[1]) {
      for (int64_t i = 0; i < rank; ++i)
        dims.push_back(i);
    } else if (slots[1]->kind == ExprKind::List) {
      for (const ExprPtr &item : slots[1]->operands) {
        std::optional<int64_t> dim = dimArg(item.get(), rank, 0);
        if (!dim)
          return fail();
        dims.push_back(*dim);
      }
      llvm::sort(dims);
      if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) {
        error(slots[1]->loc()) << "a dimension is listed twice";
        return fail();
      }
    } else {
      std::optional<int64_t> dim = dimArg(slots[1], rank, 0);
      if (!dim)
        return fail();
      dims.push_back(*dim);
    }
    std::optional<bool> keepdim = boolArg(slots[2], false);
    if (!keepdim)
      return fail();
    FailureOr<RankedTensorType> type =
        inferReduceType(location, name, x.type(), dims, *keepdim);
    if (failed(type))
      return fail();
    auto dimsAttr = builder.getDenseI64ArrayAttr(dims);
    UnitAttr keep = *keepdim ? builder.getUnitAttr() : UnitAttr();
    if (name == "sum")
      return one(
          SumOp::create(builder, location, *type, x.tensor, dimsAttr, keep));
    if (name == "mean")
      return one(
          MeanOp::create(builder, location, *type, x.tensor, dimsAttr, keep));
    return one(
        MaxOp::create(builder, location, *type, x.tensor, dimsAttr, keep));
  }
  if (name == "reshape") {
    Val x = tensorArg(0);
    std::optional<SmallVector<int64_t>> shape = intList(slots[1], "shape");
    if (x.isPoison() || !shape)
      return fail();
    int64_t elements = 1;
    for (int64_t size : *shape) {
      if (size < 1) {
        error(slots[1]->loc())
            << "reshape sizes must be positive, got " << size;
        return fail();
      }
      if (llvm::MulOverflow(elements, size, elements) ||
          elements > kMaxTensorElements) {
        error(slots[1]->loc()) << "reshape target has too many elements";
        return fail();
      }
    }
    auto type = RankedTensorType::get(*shape, x.type().getElementType());
    if (type.getNumElements() != x.type().getNumElements()) {
      error(slots[1]->loc())
          << "cannot reshape " << describeType(x.type()) << " ("
          << x.type().getNumElements() << " elements) to " << describeType(type)
          << " (" << type.getNumElements() << " elements)";
      return fail();
    }
    return one(ReshapeOp::create(builder, location, type, x.tensor));
  }
  if (name == "transpose") {
    Val x = tensorArg(0);
    if (x.isPoison())
      return {x};
    int64_t rank = x.type().getRank();
    SmallVector<int64_t> perm;
    if (slots[1]) {
      std::optional<SmallVector<int64_t>> list = intList(slots[1], "perm");
      if (!list)
        return fail();
      perm = *list;
    } else {
      if (rank < 2) {
        error(call.loc()) << "transpose without perm swaps the last two "
                             "dimensions; "
                          << describeType(x.type()) << " has fewer";
        return fail();
      }
      for (int64_t i = 0; i < rank; ++i)
        perm.push_back(i);
      std::swap(perm[rank - 2], perm[rank - 1]);
    }
    FailureOr<RankedTensorType> type =
        inferTransposeType(location, x.type(), perm);
    if (failed(type))
      return fail();
    return one(TransposeOp::create(builder, location, *type, x.tensor,
                                   builder.getDenseI64ArrayAttr(perm)));
  }
  if (name == "concat") {
    if (slots[0]->kind != ExprKind::List || slots[0]->operands.empty()) {
      error(slots[0]->loc()) << "concat takes a list of tensors, as in "
                                "concat([a, b], dim=1)";
      return fail();
    }
    SmallVector<Value> inputs;
    SmallVector<RankedTensorType> types;
    for (const ExprPtr &item : slots[0]->operands) {
      Val value = evalTensor(*item, "concat");
      if (value.isPoison())
        return fail();
      inputs.push_back(value.tensor);
      types.push_back(value.type());
    }
    std::optional<int64_t> dim = dimArg(slots[1], types.front().getRank(), 0);
    if (!dim)
      return fail();
    FailureOr<RankedTensorType> type = inferConcatType(location, types, *dim);
    if (failed(type))
      return fail();
    return one(ConcatOp::create(builder, location, *type, inputs,
                                builder.getI64IntegerAttr(*dim)));
  }
  if (name == "split") {
    Val x = tensorArg(0);
    std::optional<SmallVector<int64_t>> sizes = intList(slots[1], "sizes");
    if (x.isPoison() || !sizes)
      return fail();
    std::optional<int64_t> dim = dimArg(slots[2], x.type().getRank(), 0);
    if (!dim)
      return fail();
    FailureOr<SmallVector<Type>> types =
        inferSplitTypes(location, x.type(), *dim, *sizes);
    if (failed(types))
      return fail();
    auto op = SplitOp::create(builder, location, *types, x.tensor,
                              builder.getI64IntegerAttr(*dim),
                              builder.getDenseI64ArrayAttr(*sizes));
    SmallVector<Val> results;
    for (Value result : op.getResults())
      results.push_back(Val::of(result));
    return results;
  }
  if (name == "slice") {
    Val x = tensorArg(0);
    if (x.isPoison())
      return {x};
    std::optional<int64_t> dim = dimArg(slots[1], x.type().getRank(), 0);
    std::optional<int64_t> start = evalConstInt(*slots[2], "a slice start");
    std::optional<int64_t> end = evalConstInt(*slots[3], "a slice end");
    if (!dim || !start || !end)
      return fail();
    SmallVector<int64_t> starts(x.type().getRank(), 0);
    SmallVector<int64_t> limits(x.type().getShape());
    starts[*dim] = *start;
    limits[*dim] = *end;
    FailureOr<RankedTensorType> type =
        inferSliceType(location, x.type(), starts, limits);
    if (failed(type))
      return fail();
    return one(SliceOp::create(builder, location, *type, x.tensor,
                               builder.getDenseI64ArrayAttr(starts),
                               builder.getDenseI64ArrayAttr(limits)));
  }
  if (name == "cast") {
    Val x = tensorArg(0);
    if (x.isPoison())
      return {x};
    if (slots[1]->kind != ExprKind::DType) {
      error(slots[1]->loc()) << "cast needs an element type: f32, bf16, f16, "
                                "i32 or i64";
      return fail();
    }
    Type element = elementType(Ident{slots[1]->text, slots[1]->loc()});
    auto type = RankedTensorType::get(x.type().getShape(), element);
    return one(CastOp::create(builder, location, type, x.tensor));
  }
  if (name == "embedding") {
    Val ids = tensorArg(0), table = tensorArg(1);
    if (ids.isPoison() || table.isPoison())
      return fail();
    FailureOr<RankedTensorType> type =
        inferEmbeddingType(location, ids.type(), table.type());
    if (failed(type))
      return fail();
    if (!isa<FloatType>(table.type().getElementType())) {
      error(slots[1]->loc()) << "embedding table must be a float tensor";
      return fail();
    }
    return one(EmbeddingOp::create(builder, location, *type, ids.tensor,
                                   table.tensor, FlatSymbolRefAttr(),
                                   ArrayAttr()));
  }
  if (name == "attention") {
    Val q = floatTensorArg(0), k = floatTensorArg(1), v = floatTensorArg(2);
    if (q.isPoison() || k.isPoison() || v.isPoison())
      return fail();
    std::optional<bool> causal = boolArg(slots[3], false);
    if (!causal)
      return fail();
    FailureOr<RankedTensorType> type =
        inferAttentionType(location, q.type(), k.type(), v.type());
    if (failed(type))
      return fail();
    double scale =
        1.0 / std::sqrt(static_cast<double>(q.type().getShape().back()));
    if (slots[4]) {
      std::optional<double> value = evalConstFloat(*slots[4], "scale");
      if (!value)
        return fail();
      scale = *value;
    }
    return one(AttentionOp::create(builder, location, *type, q.tensor, k.tensor,
                                   v.tensor,
                                   *causal ? builder.getUnitAttr() : UnitAttr(),
                                   builder.getF64FloatAttr(scale)));
  }
  if (name == "cross_entropy") {
    Val logits = tensorArg(0), targets = tensorArg(1);
    if (logits.isPoison() || targets.isPoison())
      return fail();
    FailureOr<RankedTensorType> type =
        inferCrossEntropyType(location, logits.type(), targets.type());
    if (failed(type))
      return fail();
    return one(CrossEntropyOp::create(builder, location, *type, logits.tensor,
                                      targets.tensor));
  }
  if (name == "einsum") {
    if (slots[0]->kind != ExprKind::String) {
      error(slots[0]->loc()) << "einsum's first argument is its spec, as in "
                                "\"bsd,df->bsf\"";
      return fail();
    }
    SmallVector<Value> inputs;
    SmallVector<RankedTensorType> types;
    for (unsigned i = 1; i < 3; ++i) {
      if (!slots[i])
        continue;
      Val value = tensorArg(i);
      if (value.isPoison())
        return fail();
      inputs.push_back(value.tensor);
      types.push_back(value.type());
    }
    FailureOr<RankedTensorType> type =
        inferEinsumType(location, slots[0]->text, types);
    if (failed(type))
      return fail();
    return one(EinsumOp::create(builder, location, *type,
                                builder.getStringAttr(slots[0]->text), inputs));
  }
  // shard(x, [B:dp, S:tp, D])
  Val x = tensorArg(0);
  if (x.isPoison())
    return {x};
  const Expr *spec = slots[1];
  if (spec->kind != ExprKind::List) {
    error(spec->loc()) << "shard takes the sharded shape as a list, as in "
                          "[B:dp, S:tp, D]";
    return fail();
  }
  RankedTensorType type = x.type();
  if (static_cast<int64_t>(spec->operands.size()) != type.getRank()) {
    error(spec->loc()) << "sharding lists " << spec->operands.size()
                       << " dimension(s) for " << describeType(type);
    return fail();
  }
  SmallVector<const AxisSpec *> specs;
  SmallVector<SMLoc> locs;
  for (auto [index, item] : llvm::enumerate(spec->operands)) {
    std::optional<int64_t> size = evalConstInt(*item, "a dimension");
    if (!size)
      return fail();
    if (*size != type.getShape()[index]) {
      error(item->loc()) << "dimension " << index << " of "
                         << describeType(type) << " is "
                         << type.getShape()[index] << ", not " << *size;
      return fail();
    }
    specs.push_back(&item->axes);
    locs.push_back(item->loc());
  }
  if (!mesh) {
    if (!meshDecl)
      error(call.loc()) << "shard() needs a mesh; declare one, e.g. mesh m = "
                           "[dp: 2]";
    return fail();
  }
  ShardingAttr attr =
      shardingFromDims(specs, type.getShape(), locs, Binding::Open, 0);
  if (!attr)
    return fail();
  return one(ShardOp::create(builder, location, type, x.tensor, attr));
}

//===----------------------------------------------------------------------===//
// Train specification
//===----------------------------------------------------------------------===//

void Generator::generateTrain(const TrainDecl &train) {
  auto modelIt = models.find(train.model.name);
  if (modelIt == models.end()) {
    auto blockIt = blocks.find(train.model.name);
    if (blockIt == blocks.end())
      error(train.model.loc) << "unknown model '" << train.model.name << "'";
    else if (!blockIt->second->isModel)
      error(train.model.loc)
          << "'" << train.model.name << "' is a block; train names a model";
    return; // a model that failed to generate was already reported
  }
  func::FuncOp model = modelIt->second;
  const BlockDecl &modelDecl = *blocks.lookup(train.model.name);
  auto [previousTrain, firstTrain] =
      trainedModels.try_emplace(train.model.name, train.model.loc);
  if (!firstTrain) {
    errorWithNote(train.model.loc,
                  "model '" + train.model.name + "' has two train blocks",
                  previousTrain->second, "first train block here");
    return;
  }
  const llvm::StringMap<StageTarget> &targets =
      stageTargetsByModel[train.model.name];
  const TrainClause *balancedClause = nullptr, *stageClause = nullptr;
  const TrainClause *highestStage = nullptr;
  int64_t highestStageIndex = -1;
  static constexpr StringLiteral kKeys[] = {
      "optimizer",    "precision", "master", "zero",
      "microbatches", "schedule",  "stages", "stage"};
  llvm::StringMap<SMLoc> seen;
  StringRef optimizer;
  NamedAttrList hyper;
  NamedAttrList attrs;
  SmallVector<Attribute> stages;
  const TrainClause *microbatchClause = nullptr;
  int64_t microbatches = 0;

  auto axesOf =
      [&](const AxisSpec &spec) -> std::optional<SmallVector<Attribute>> {
    SmallVector<Attribute> axes;
    for (const Ident &axis : spec.axes) {
      if (!mesh || !mesh.getAxisSize(axis.name)) {
        std::string known;
        if (mesh)
          for (Attribute name : mesh.getAxisNames())
            known += (known.empty() ? "" : ", ") +
                     cast<StringAttr>(name).getValue().str();
        InFlightDiagnostic diag = error(axis.loc)
                                  << "unknown mesh axis '" << axis.name << "'";
        if (!known.empty())
          diag << "; mesh '" << mesh.getSymName() << "' has " << known;
        return std::nullopt;
      }
      axes.push_back(builder.getStringAttr(axis.name));
    }
    return axes;
  };

  for (const TrainClause &clause : train.clauses) {
    const std::string &key = clause.key.name;
    if (!llvm::is_contained(kKeys, key)) {
      error(clause.key.loc) << "unknown training setting '" << key
                            << "'; expected optimizer, precision, master, "
                               "zero, microbatches, schedule, stages or stage";
      continue;
    }
    if (key != "stage") {
      auto [it, inserted] = seen.try_emplace(key, clause.key.loc);
      if (!inserted) {
        errorWithNote(clause.key.loc, "'" + key + "' is given twice",
                      it->second, "first given here");
        continue;
      }
    }
    if (clause.over && key != "zero" && key != "schedule") {
      error(clause.over->loc) << "'" << key << "' takes no 'over' axes";
      continue;
    }
    if (!clause.value && key != "stages") {
      error(clause.key.loc) << "'" << key << "' needs a value";
      continue;
    }
    if (key == "optimizer") {
      const Expr &value = *clause.value;
      if (value.kind != ExprKind::Call && value.kind != ExprKind::Name) {
        error(value.loc()) << "expected an optimizer: sgd(...) or adamw(...)";
        continue;
      }
      optimizer = value.text;
      ArrayRef<StringLiteral> known;
      static constexpr StringLiteral kSgd[] = {"lr", "momentum", "weight_decay",
                                               "nesterov"};
      static constexpr StringLiteral kAdamw[] = {"lr", "betas", "eps",
                                                 "weight_decay"};
      if (optimizer == "sgd")
        known = kSgd;
      else if (optimizer == "adamw")
        known = kAdamw;
      else {
        error(value.loc()) << "unknown optimizer '" << optimizer
                           << "'; expected sgd or adamw";
        continue;
      }
      for (auto [keyword, arg] : llvm::zip(value.argNames, value.operands)) {
        if (keyword.name.empty()) {
          error(arg->loc()) << "optimizer settings are named, as in "
                            << optimizer << "(lr = 3e-4)";
          continue;
        }
        if (!llvm::is_contained(known, keyword.name)) {
          std::string list;
          for (StringRef k : known)
            list += (list.empty() ? "" : ", ") + k.str();
          error(keyword.loc) << "unknown " << optimizer << " setting '"
                             << keyword.name << "'; expected " << list;
          continue;
        }
        if (hyper.get(keyword.name)) {
          error(keyword.loc) << "'" << keyword.name << "' is given twice";
          continue;
        }
        if (keyword.name == "betas") {
          if (arg->kind != ExprKind::Tuple || arg->operands.size() != 2) {
            error(arg->loc()) << "betas is a pair, as in (0.9, 0.95)";
            continue;
          }
          std::optional<double> b1 = evalConstFloat(*arg->operands[0], "beta1");
          std::optional<double> b2 = evalConstFloat(*arg->operands[1], "beta2");
          if (!b1 || !b2)
            continue;
          hyper.set(keyword.name, builder.getF64ArrayAttr({*b1, *b2}));
        } else if (keyword.name == "nesterov") {
          if (arg->kind != ExprKind::Bool) {
            error(arg->loc()) << "nesterov is true or false";
            continue;
          }
          hyper.set(keyword.name, builder.getBoolAttr(arg->intValue));
        } else {
          std::optional<double> number =
              evalConstFloat(*arg, "an optimizer setting");
          if (!number)
            continue;
          if (*number < 0) {
            error(arg->loc()) << keyword.name << " must not be negative";
            continue;
          }
          hyper.set(keyword.name, builder.getF64FloatAttr(*number));
        }
      }
    } else if (key == "precision" || key == "master") {
      if (clause.value->kind != ExprKind::DType ||
          (key == "master" && clause.value->text != "f32") ||
          clause.value->text[0] == 'i') {
        error(clause.value->loc())
            << (key == "master" ? "master weights are f32"
                                : "precision is bf16, f16 or f32");
        continue;
      }
      Type type = elementType(Ident{clause.value->text, clause.value->loc()});
      attrs.set(key == "precision" ? "compute_type" : "master_type",
                TypeAttr::get(type));
    } else if (key == "zero") {
      std::optional<int64_t> stage =
          evalConstInt(*clause.value, "a ZeRO stage");
      if (!stage)
        continue;
      if (*stage < 0 || *stage > 3) {
        error(clause.value->loc())
            << "ZeRO stage must be 0, 1, 2 or 3, got " << *stage;
        continue;
      }
      if (!clause.over) {
        error(clause.key.loc) << "zero needs the axes it shards over, as in "
                                 "'zero 1 over dp'";
        continue;
      }
      std::optional<SmallVector<Attribute>> axes = axesOf(*clause.over);
      if (!axes)
        continue;
      bool manual = false;
      for (const Ident &axis : clause.over->axes)
        if (manualAxes.count(axis.name)) {
          errorWithNote(axis.loc,
                        "ZeRO cannot shard over '" + axis.name +
                            "', the pipeline schedule's axis",
                        manualAxes.lookup(axis.name), "made manual here");
          manual = true;
        }
      if (manual)
        continue;
      attrs.set("zero_stage", builder.getI64IntegerAttr(*stage));
      attrs.set("zero_axes", builder.getArrayAttr(*axes));
    } else if (key == "microbatches") {
      std::optional<int64_t> count =
          evalConstInt(*clause.value, "the number of microbatches");
      if (!count)
        continue;
      if (*count < 1) {
        error(clause.value->loc())
            << "microbatches must be positive, got " << *count;
        continue;
      }
      microbatches = *count;
      microbatchClause = &clause;
      attrs.set("microbatches", builder.getI64IntegerAttr(*count));
    } else if (key == "schedule") {
      std::string name;
      for (char c : clause.value->sourceText())
        if (!isspace(static_cast<unsigned char>(c)))
          name += c;
      static constexpr StringLiteral kSchedules[] = {
          "gpipe", "1f1b", "interleaved", "zero-bubble"};
      if (!llvm::is_contained(kSchedules, name)) {
        error(clause.value->loc()) << "unknown pipeline schedule '" << name
                                   << "'; expected gpipe, 1f1b, interleaved "
                                      "or zero-bubble";
        continue;
      }
      if (!clause.over || clause.over->axes.size() != 1) {
        error(clause.key.loc) << "schedule needs the one mesh axis it runs "
                                 "over, as in 'schedule 1f1b over pp'";
        continue;
      }
      std::optional<SmallVector<Attribute>> axes = axesOf(*clause.over);
      if (!axes)
        continue;
      attrs.set("schedule", builder.getStringAttr(name));
      attrs.set("schedule_axis", axes->front());
    } else if (key == "stages") {
      if (!clause.value || clause.value->kind != ExprKind::Name ||
          clause.value->text != "balanced") {
        error(clause.key.loc) << "expected 'stages balanced' or explicit "
                                 "'stage N: [...]' lines";
        continue;
      }
      balancedClause = &clause;
      stages.push_back(builder.getStringAttr("balanced"));
    } else { // stage N: [refs]
      if (!stageClause)
        stageClause = &clause;
      std::optional<int64_t> index =
          evalConstInt(*clause.value, "a stage index");
      if (!index)
        continue;
      if (*index < 0) {
        error(clause.value->loc()) << "stage index must not be negative";
        continue;
      }
      if (*index > highestStageIndex) {
        highestStageIndex = *index;
        highestStage = &clause;
      }
      for (const StageRef &ref : clause.stageRefs) {
        auto target = targets.find(ref.name.name);
        if (target == targets.end()) {
          error(ref.name.loc) << "'" << ref.name.name
                              << "' is not a named call or repeat of model '"
                              << train.model.name << "'";
          continue;
        }
        std::string text = std::to_string(*index) + ":" + ref.name.name;
        if (ref.begin) {
          if (!target->second.repeatCount) {
            error(ref.name.loc) << "'" << ref.name.name
                                << "' is not a repeat; only repeats take a "
                                   "layer range";
            continue;
          }
          std::optional<int64_t> begin =
              evalConstInt(*ref.begin, "a layer index");
          std::optional<int64_t> end = evalConstInt(*ref.end, "a layer index");
          if (!begin || !end)
            continue;
          if (*begin >= *end) {
            error(ref.begin->loc())
                << "layer range [" << *begin << ":" << *end << "] is empty";
            continue;
          }
          if (*begin < 0 || *end > *target->second.repeatCount) {
            error(ref.begin->loc())
                << "layer range [" << *begin << ":" << *end
                << "] is not inside 0.." << *target->second.repeatCount;
            continue;
          }
          text +=
              "[" + std::to_string(*begin) + ":" + std::to_string(*end) + "]";
        }
        stages.push_back(builder.getStringAttr(text));
      }
    }
  }
  // Each pipeline stage runs on one coordinate of the schedule's axis
  // (interleaved schedules place several stages per coordinate).
  if (highestStage && attrs.get("schedule_axis") &&
      attrs.get("schedule") != builder.getStringAttr("interleaved")) {
    StringRef axis = cast<StringAttr>(attrs.get("schedule_axis")).getValue();
    int64_t size = mesh ? mesh.getAxisSize(axis).value_or(0) : 0;
    if (size && highestStageIndex >= size)
      error(highestStage->value->loc())
          << "stage " << highestStageIndex << " does not exist: the schedule's "
          << "axis '" << axis << "' has " << size << " stage(s), 0.."
          << size - 1;
  }
  if (balancedClause && stageClause)
    errorWithNote(stageClause->key.loc,
                  "explicit stages and 'stages balanced' exclude each other",
                  balancedClause->key.loc, "'stages balanced' given here");
  // m microbatches, each split over the data axes, must divide the batch.
  if (microbatchClause && !modelDecl.args.empty()) {
    const Arg &first = modelDecl.args.front();
    RankedTensorType type = tensorType(first.type);
    if (type && type.getRank() > 0) {
      int64_t devices = 1;
      std::string axesText;
      for (const Ident &axis : first.type.dims.front().axes.axes)
        if (mesh && mesh.getAxisSize(axis.name)) {
          devices *= *mesh.getAxisSize(axis.name);
          axesText += " x " + axis.name + "=" +
                      std::to_string(*mesh.getAxisSize(axis.name));
        }
      int64_t batch = type.getShape().front(), perBatch = 0;
      bool overflow = llvm::MulOverflow(microbatches, devices, perBatch);
      if (overflow || batch % perBatch != 0)
        errorWithNote(
            microbatchClause->value->loc(),
            Twine(microbatches) + " microbatches" + axesText + " = " +
                (overflow ? "2^63 or more" : std::to_string(perBatch)) +
                " does not divide the batch " + Twine(batch) + " of '" +
                first.name.name + "'",
            first.type.dims.front().size->loc(), "batch dimension here");
    }
  }
  if (optimizer.empty()) {
    if (!seen.count("optimizer"))
      error(train.model.loc) << "train '" << train.model.name
                             << "' needs an optimizer, e.g. 'optimizer "
                                "adamw(lr = 3e-4)'";
    return;
  }
  if (hadError)
    return;
  builder.setInsertionPointToEnd(module.getBody());
  auto op = TrainOp::create(
      builder, fileLoc(train.model.loc),
      FlatSymbolRefAttr::get(model.getSymNameAttr()),
      builder.getStringAttr(optimizer), hyper.getDictionary(&context), nullptr,
      nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  for (NamedAttribute attr : attrs)
    op->setAttr(attr.getName(), attr.getValue());
  if (!stages.empty())
    op.setStagesAttr(builder.getArrayAttr(stages));
}

OwningOpRef<ModuleOp> loom::generateModule(MLIRContext &context,
                                           llvm::SourceMgr &sourceMgr,
                                           const Program &program,
                                           const FrontendOptions &options) {
  context.loadDialect<LoomDialect, func::FuncDialect>();
  Generator generator(context, sourceMgr, options);
  return generator.run(program);
}
