//===- Driver.cpp - Loading Loom programs and listing parameters ----------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "loom/Frontend/Frontend.h"
#include "loom/Frontend/Parser.h"

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/TypeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace loom;

namespace {

/// Loads a file and its imports depth-first, so every file comes after the
/// files it imports, and each file once however often it is imported.
class Loader {
public:
  Loader(MLIRContext &context, llvm::SourceMgr &sourceMgr,
         const FrontendOptions &options)
      : context(context), sourceMgr(sourceMgr), options(options) {}

  bool loadMain(StringRef path) {
    auto buffer = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
    if (std::error_code ec = buffer.getError()) {
      emitError(UnknownLoc::get(&context))
          << "cannot open '" << path << "': " << ec.message();
      return false;
    }
    SmallString<256> real;
    if (llvm::sys::fs::real_path(path, real))
      real = path;
    return loadBuffer(std::move(*buffer), real.str().str(), llvm::SMLoc());
  }

  Program takeProgram() { return std::move(program); }

private:
  bool loadBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                  const std::string &realPath, llvm::SMLoc importLoc) {
    std::string directory =
        llvm::sys::path::parent_path(buffer->getBufferIdentifier()).str();
    unsigned bufferId =
        sourceMgr.AddNewSourceBuffer(std::move(buffer), importLoc);
    bool ok = true;
    std::unique_ptr<ast::File> file = parseFile(
        sourceMgr, bufferId, [&](llvm::SMLoc loc, const std::string &message) {
          emitError(toLocation(context, sourceMgr, loc)) << message;
          ok = false;
        });
    if (!file)
      return false;
    stack.push_back({realPath, importLoc});
    for (const ast::Decl &decl : file->decls)
      if (decl.kind == ast::Decl::Import)
        ok &= loadImport(*decl.importDecl, directory);
    stack.pop_back();
    done.insert(realPath);
    program.files.push_back(std::move(file));
    return ok;
  }

  bool loadImport(const ast::ImportDecl &import, StringRef directory) {
    SmallVector<std::string> searched;
    std::string found;
    auto consider = [&](StringRef dir) {
      SmallString<256> candidate(dir);
      llvm::sys::path::append(candidate, import.path);
      searched.push_back(dir.empty() ? "." : dir.str());
      if (found.empty() && llvm::sys::fs::is_regular_file(candidate))
        found = candidate.str().str();
    };
    if (llvm::sys::path::is_absolute(import.path)) {
      if (llvm::sys::fs::is_regular_file(import.path))
        found = import.path;
    } else {
      consider(directory);
      for (const std::string &dir : options.includeDirs)
        consider(dir);
    }
    Location location = toLocation(context, sourceMgr, import.loc);
    if (found.empty()) {
      InFlightDiagnostic diag = emitError(location)
                                << "cannot find imported file '" << import.path
                                << "'";
      if (!searched.empty()) {
        std::string dirs;
        for (const std::string &dir : searched)
          dirs += (dirs.empty() ? "" : ", ") + dir;
        diag << " (searched " << dirs << "; add directories with -I)";
      }
      return false;
    }
    SmallString<256> real;
    if (llvm::sys::fs::real_path(found, real))
      real = found;
    std::string key = real.str().str();
    for (auto [index, entry] : llvm::enumerate(stack)) {
      if (entry.first != key)
        continue;
      std::string chain;
      for (size_t i = index; i < stack.size(); ++i)
        chain += llvm::sys::path::filename(stack[i].first).str() + " -> ";
      chain += llvm::sys::path::filename(key).str();
      InFlightDiagnostic diag = emitError(location)
                                << "import cycle: " << chain;
      if (entry.second.isValid())
        diag.attachNote(toLocation(context, sourceMgr, entry.second))
            << "'" << llvm::sys::path::filename(key) << "' is imported here";
      return false;
    }
    if (done.contains(key))
      return true;
    auto buffer = llvm::MemoryBuffer::getFile(found, /*IsText=*/true);
    if (std::error_code ec = buffer.getError()) {
      emitError(location) << "cannot read imported file '" << found
                          << "': " << ec.message();
      return false;
    }
    return loadBuffer(std::move(*buffer), key, import.loc);
  }

  MLIRContext &context;
  llvm::SourceMgr &sourceMgr;
  const FrontendOptions &options;
  Program program;
  SmallVector<std::pair<std::string, llvm::SMLoc>> stack;
  llvm::StringSet<> done;
};

} // namespace

FailureOr<Program> loom::loadProgram(MLIRContext &context,
                                     llvm::SourceMgr &sourceMgr, StringRef path,
                                     const FrontendOptions &options) {
  Loader loader(context, sourceMgr, options);
  if (!loader.loadMain(path))
    return failure();
  return loader.takeProgram();
}

/// `bf16[1024:tp, 256]`: a type as written in Loom, with its sharding.
static std::string formatShardedType(RankedTensorType type,
                                     ShardingAttr sharding) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.getElementType().print(os);
  os << '[';
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (i)
      os << ", ";
    os << type.getShape()[i];
    if (!sharding)
      continue;
    ArrayRef<StringAttr> axes = sharding.getDims()[i].getAxes();
    if (axes.size() == 1)
      os << ':' << axes.front().getValue();
    else if (axes.size() > 1) {
      os << ":(";
      llvm::interleaveComma(axes, os,
                            [&](StringAttr axis) { os << axis.getValue(); });
      os << ')';
    }
  }
  os << ']';
  return text;
}

/// `normal(0.0, 0.02)`, `zeros`: an initialiser as written in Loom.
static std::string formatInit(InitAttr init) {
  if (!init)
    return "";
  std::string text = stringifyInitKind(init.getKind()).str();
  if (init.getKind() == InitKind::Normal || init.getKind() == InitKind::Uniform)
    text += "(" + formatShortestDouble(init.getA().convertToDouble()) + ", " +
            formatShortestDouble(init.getB().convertToDouble()) + ")";
  return text;
}

void loom::printParams(ModuleOp module, llvm::raw_ostream &os) {
  if (llvm::none_of(module.getOps<func::FuncOp>(), [](func::FuncOp function) {
        return function->hasAttr(LoomDialect::kModelAttrName);
      }))
    os << "# the file defines no model, so no parameters\n";
  for (auto function : module.getOps<func::FuncOp>()) {
    if (!function->hasAttr(LoomDialect::kModelAttrName))
      continue;
    // Parameters that feed a repeat as stacked operands carry one leading
    // dimension per enclosing repeat.
    llvm::DenseSet<Value> stacked;
    function.walk([&](RepeatOp repeat) {
      for (Value operand : repeat.getStacked())
        stacked.insert(operand);
    });
    os << "# parameters of model " << function.getSymName()
       << " (name, type with sharding, initialiser)\n";
    int64_t count = 0, totalBytes = 0;
    bool totalOverflows = false;
    for (BlockArgument arg : function.getArguments()) {
      unsigned index = arg.getArgNumber();
      auto name = function.getArgAttrOfType<StringAttr>(
          index, LoomDialect::kParamAttrName);
      if (!name)
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      auto sharding = function.getArgAttrOfType<ShardingAttr>(
          index, LoomDialect::kShardingAttrName);
      auto init = function.getArgAttrOfType<InitAttr>(
          index, LoomDialect::kInitAttrName);
      int64_t bytes = tensorBytes(type);
      ++count;
      totalOverflows |= llvm::AddOverflow(totalBytes, bytes, totalBytes);
      os << llvm::formatv("{0,-36} {1,-30} {2}{3}\n", name.getValue(),
                          formatShardedType(type, sharding), formatInit(init),
                          stacked.contains(arg) ? "  (stacked over layers)"
                                                : "");
    }
    os << "# " << count << " parameter tensors, "
       << (totalOverflows ? "more than 2^63 - 1" : std::to_string(totalBytes))
       << " bytes in all\n";
  }
}
