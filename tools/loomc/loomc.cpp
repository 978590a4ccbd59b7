//===- loomc.cpp - The Loom compiler driver -------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// loomc FILE.loom --emit=ast|loom|params|sharded|spmd|cpu [--explain]
//       [--report[=json]] [-o FILE] [--mesh dp=4,tp=2] [-I DIR] [--dtype=f32]
// loomc FILE.loom -o model          an executable (mpirun -np N ./model)
// loomc FILE.loom --interpret ...   the reference interpreter
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/Transforms/Explain.h"
#include "dialects/loom/Transforms/Passes.h"
#include "loom/Config.h"
#include "loom/Frontend/Frontend.h"
#include "loom/Interpreter/Interpreter.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Target/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/thread.h"

#include <set>

using namespace mlir;

namespace {
enum class Emit { AST, Loom, Params, Sharded, Spmd, Cpu, Cuda };
enum class Report { None, Text, Json };
} // namespace

static llvm::cl::OptionCategory loomCategory("loomc options");

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<file.loom>"),
                                            llvm::cl::Required,
                                            llvm::cl::cat(loomCategory));

static llvm::cl::opt<Emit> emitKind(
    "emit", llvm::cl::desc("What to print (default: loom)"),
    llvm::cl::init(Emit::Loom),
    llvm::cl::values(
        clEnumValN(Emit::AST, "ast",
                   "the syntax tree of every file, imports first"),
        clEnumValN(Emit::Loom, "loom",
                   "the global Loom IR, verified, with user shardings"),
        clEnumValN(Emit::Params, "params",
                   "each parameter's name, shape, dtype, sharding and "
                   "initialiser (the checkpoint ABI)"),
        clEnumValN(Emit::Sharded, "sharded",
                   "the global IR after sharding propagation: every value "
                   "has a sharding"),
        clEnumValN(Emit::Cpu, "cpu",
                   "the per-rank program as C++ over libloomrt (what -o "
                   "builds)"),
        clEnumValN(Emit::Cuda, "cuda",
                   "the per-rank program as CUDA C++ over libloomrt (what "
                   "--target=cuda -o builds)"),
        clEnumValN(Emit::Spmd, "spmd",
                   "the per-device program with its collectives")),
    llvm::cl::cat(loomCategory));

static llvm::cl::opt<bool> explain(
    "explain",
    llvm::cl::desc("List each collective of the per-device program: kind, "
                   "axes, shape, bytes per rank, the layouts that forced it "
                   "and the source lines of the ops that met. Alone it "
                   "prints only the list; with --emit=spmd, the IR first "
                   "and the list as // comments. With "
                   "--overlap-collectives, the collectives as the plan "
                   "starts them, and where each starts and is waited for"),
    llvm::cl::cat(loomCategory));

static llvm::cl::opt<Report> report(
    "report",
    llvm::cl::desc("Print per-rank parameter, input and activation bytes, "
                   "the arena (peak memory, from the memory plan) and its "
                   "live bound, FLOPs "
                   "and collective bytes per mesh axis of one forward "
                   "pass of the per-device program. Like --explain, alone "
                   "or with --emit=spmd; --report=json prints only JSON"),
    llvm::cl::ValueOptional, llvm::cl::init(Report::None),
    llvm::cl::values(clEnumValN(Report::Text, "", "as text (the default)"),
                     clEnumValN(Report::Text, "text", "as text"),
                     clEnumValN(Report::Json, "json", "as JSON (alone)")),
    llvm::cl::cat(loomCategory));

static llvm::cl::opt<std::string>
    outputFile("o",
               llvm::cl::desc("Write the output to <file> (default: stdout); "
                              "without --emit, build an executable <file> "
                              "that runs under mpirun -np N, or alone with "
                              "--loopback (<file> --help)"),
               llvm::cl::value_desc("file"), llvm::cl::init("-"),
               llvm::cl::cat(loomCategory));

namespace {
enum class DType { Declared, F32 };
} // namespace
static llvm::cl::opt<loom::Target> target(
    "target", llvm::cl::desc("The backend -o builds for (default: cpu)"),
    llvm::cl::init(loom::Target::Cpu),
    llvm::cl::values(
        clEnumValN(loom::Target::Cpu, "cpu",
                   "C++ over libloomrt, OpenBLAS and Open MPI"),
        clEnumValN(loom::Target::Cuda, "cuda",
                   "CUDA C++ over libloomrt's CUDA backend and cuBLASLt, "
                   "built with nvcc")),
    llvm::cl::cat(loomCategory));
static llvm::cl::opt<std::string> cudaArch(
    "cuda-arch",
    llvm::cl::desc(
        "GPU architecture of the generated kernels of --target=cuda -o, as "
        "nvcc names it: sm_80 or newer (default: " LOOM_CUDA_ARCH
        "; libloomrt's own kernels hold code for " LOOM_CUDA_LIBRARY_ARCHS
        " and, through PTX, newer GPUs)"),
    llvm::cl::init(LOOM_CUDA_ARCH), llvm::cl::value_desc("sm_XX"),
    llvm::cl::cat(loomCategory));
enum class Sanitizer { None, Address, Thread };
static llvm::cl::opt<Sanitizer> sanitize(
    "sanitize",
    llvm::cl::desc("With -o and --target=cpu: build the executable and "
                   "libloomrt under a sanitizer, which reports what it finds "
                   "(slower; for finding faults)"),
    llvm::cl::ValueOptional, llvm::cl::init(Sanitizer::None),
    llvm::cl::values(
        clEnumValN(Sanitizer::Address, "",
                   "(--sanitize alone) AddressSanitizer and UBSan: an access "
                   "past a buffer or undefined behaviour stops the program"),
        clEnumValN(Sanitizer::Address, "address", "the same"),
        clEnumValN(Sanitizer::Thread, "thread",
                   "ThreadSanitizer: two threads' accesses that nothing "
                   "orders (a data race; the loopback mode's ranks are "
                   "threads), and the program exits with status 66")),
    llvm::cl::cat(loomCategory));
static llvm::cl::opt<DType> dtypeOverride(
    "dtype", llvm::cl::desc("Widen the model's floating types"),
    llvm::cl::init(DType::Declared),
    llvm::cl::values(clEnumValN(DType::F32, "f32",
                                "compute and store every bf16/f16 value as f32 "
                                "(for exact comparisons)")),
    llvm::cl::cat(loomCategory));

static llvm::cl::OptionCategory
    interpretCategory("reference interpreter options (--interpret)");

static llvm::cl::opt<bool> interpret(
    "interpret",
    llvm::cl::desc("Run the global (unsharded) program with a plain "
                   "interpreter, the reference the compiled programs are "
                   "checked against; prints each output"),
    llvm::cl::cat(interpretCategory));

/// Parsed by parseSeed, as the executables parse theirs (LLVM's integer
/// parser would read a leading 0 as octal).
static llvm::cl::opt<std::string>
    interpretSeed("seed",
                  llvm::cl::desc("Seed of the initial values and synthetic "
                                 "inputs (as the executable's --seed: "
                                 "decimal, or 0x... hexadecimal)"),
                  llvm::cl::value_desc("N"), llvm::cl::init("0"),
                  llvm::cl::cat(interpretCategory));

/// A seed as the executables read it: decimal (010 is ten) or 0x
/// hexadecimal, digits only.
static std::optional<uint64_t> parseSeed(StringRef text) {
  uint64_t value;
  unsigned radix = text.consume_front_insensitive("0x") ? 16 : 10;
  if (text.empty() || text.getAsInteger(radix, value))
    return std::nullopt;
  return value;
}

static llvm::cl::opt<std::string> interpretInputs(
    "inputs", llvm::cl::desc("Model inputs from a safetensors file"),
    llvm::cl::value_desc("file"), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> interpretParams(
    "params", llvm::cl::desc("Parameters from a safetensors file"),
    llvm::cl::value_desc("file"), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<bool> interpretUnrounded(
    "unrounded",
    llvm::cl::desc("Hold every floating result in f64 instead of rounding it "
                   "to its type (parameters and inputs keep their type; "
                   "floating outputs are written as f32): the program's "
                   "arithmetic without its roundings"),
    llvm::cl::cat(interpretCategory));

static llvm::cl::opt<unsigned> interpretPerturbRounding(
    "perturb-rounding",
    llvm::cl::desc("Round each inexact floating result to the nearest value "
                   "of its type or to the one on its other side, at random "
                   "(stream N, from 1): as exact a run as the rounded one, "
                   "whose distance from it shows how far roundings can move "
                   "each output"),
    llvm::cl::value_desc("N"), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> interpretOut(
    "out", llvm::cl::desc("Write the outputs to a safetensors file"),
    llvm::cl::value_desc("file"), llvm::cl::cat(interpretCategory));

static llvm::cl::opt<std::string> meshOverride(
    "mesh", llvm::cl::desc("Override mesh axis sizes, e.g. --mesh dp=4,tp=2"),
    llvm::cl::value_desc("axis=size,..."), llvm::cl::cat(loomCategory));

static llvm::cl::opt<int64_t> combineBytes(
    "combine-bytes",
    llvm::cl::desc("The most bytes one loom.combined holds: independent "
                   "all_gathers, all_reduces or reduce_scatters of one kind "
                   "and group run as one collective, up to this size "
                   "(default 33554432, 32 MiB; docs/partitioning.md 3.10); "
                   "0 combines none"),
    llvm::cl::value_desc("bytes"), llvm::cl::init(32 << 20),
    llvm::cl::cat(loomCategory));

static llvm::cl::opt<bool> overlapCollectives(
    "overlap-collectives",
    llvm::cl::desc("Start each all_gather, all_reduce, reduce_scatter or "
                   "loom.combined as soon as its operands exist (but after "
                   "the collectives started before it and those over an "
                   "axis it shares) and wait "
                   "for it where its result is first read, so that the "
                   "kernels in between run while it communicates; in a "
                   "repeat, gathers of the layer's weights are started "
                   "one layer ahead, in a second buffer "
                   "(loom-overlap-collectives; docs/partitioning.md 3.11). "
                   "Off by default: on the CPU it measured slower, and no "
                   "GPU has timed it yet"),
    llvm::cl::init(false), llvm::cl::cat(loomCategory));

static llvm::cl::list<std::string>
    includeDirs("I", llvm::cl::desc("Add <dir> to the import search path"),
                llvm::cl::value_desc("dir"), llvm::cl::Prefix,
                llvm::cl::cat(loomCategory));

/// The front end recurses over expressions; a large stack keeps long (but
/// bounded) inputs from overflowing it.
static constexpr unsigned kFrontendStackBytes = 256u << 20;

/// Errors reported per run before loomc stops listing them.
static constexpr unsigned kMaxErrors = 50;

/// Checks --cuda-arch: a GPU architecture as nvcc names it (sm_80, sm_90a,
/// sm_100f) of a GPU that Loom's kernels run on (compute capability 8.0 or
/// newer: bf16 mma.sync). Whether nvcc knows it is nvcc's to say.
static bool checkCudaArch(StringRef arch) {
  StringRef digits = arch;
  bool named = digits.consume_front("sm_");
  // Architecture-specific (a) and family (f) features.
  if (named && (digits.ends_with("a") || digits.ends_with("f")))
    digits = digits.drop_back();
  unsigned number = 0;
  if (!named || digits.empty() || digits.getAsInteger(10, number)) {
    llvm::errs() << "loomc: error: --cuda-arch must name a GPU architecture "
                    "as nvcc does (sm_80, sm_90a, ...), not '"
                 << arch << "'\n";
    return false;
  }
  if (number < 80) {
    llvm::errs() << "loomc: error: --cuda-arch=" << arch
                 << ": Loom's CUDA kernels need a GPU of compute capability "
                    "8.0 or newer (sm_80 and up)\n";
    return false;
  }
  return true;
}

/// Generates the C++ program, then compiles and links it with libloomrt by
/// running the compiler directly (argument vectors, no shell).
static int buildProgram(ModuleOp module) {
  bool cuda = target == loom::Target::Cuda;
  if (cuda && !LOOM_HAVE_CUDA) {
    llvm::errs() << "loomc: error: --target=cuda needs the CUDA backend of "
                    "libloomrt, which was not built (no nvcc or g++-12 when "
                    "Loom was configured); --emit=cuda still prints the code\n";
    return 1;
  }
  // Training is specified but not built yet: say so rather than hand back a
  // program that silently does less than the file asks.
  module.walk([](loom::TrainOp train) {
    train.emitWarning()
        << "the train block is checked but not built yet: the program "
           "runs the model's forward pass (and loss) each step, with no "
           "backward pass, optimizer, ZeRO or microbatches (docs/language.md "
           "section 13)";
    return WalkResult::interrupt();
  });
  SmallString<128> source;
  int fd = -1;
  if (std::error_code error = llvm::sys::fs::createTemporaryFile(
          "loom-" + llvm::sys::path::stem(inputFile), cuda ? "cu" : "cpp", fd,
          source)) {
    llvm::errs() << "loomc: error: cannot create a temporary file: "
                 << error.message() << "\n";
    return 1;
  }
  llvm::FileRemover removeSource(source);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    if (failed(loom::emitProgram(module, inputFile, target, os)))
      return 1;
  }
  SmallVector<std::string> args;
  if (cuda) {
    args = {LOOM_NVCC, "-ccbin", LOOM_CUDA_HOST_CXX, "-std=c++17", "-O2",
            "-arch=" + cudaArch,
            // Helpers a program does not use are not worth a warning.
            "-diag-suppress=177", "-I", LOOM_RUNTIME_INCLUDE_DIR,
            std::string(source)};
    for (const char *library : {LOOM_CUDA_LINK_LIBRARIES})
      args.push_back(library);
  } else {
    args = {LOOM_GENERATED_CXX, "-std=c++17", "-O2", "-march=native",
            // One rounding per op, the same in every build of a model, so
            // 1-rank and N-rank programs compute each element alike.
            "-ffp-contract=off", "-fno-math-errno", "-w",
            // Vector exp/log/tanh from glibc's libmvec for the fused loops.
            "-fveclib=libmvec", "-I", LOOM_RUNTIME_INCLUDE_DIR};
    if (sanitize == Sanitizer::Address)
      for (const char *flag : {LOOM_SANITIZE_FLAGS, "-g"})
        args.push_back(flag);
    if (sanitize == Sanitizer::Thread)
      for (const char *flag : {LOOM_THREAD_SANITIZE_FLAGS, "-g"})
        args.push_back(flag);
    for (const char *input : {"-x", "c++", source.c_str(), "-x", "none"})
      args.push_back(input);
    if (sanitize == Sanitizer::Address)
      for (const char *library : {LOOM_SANITIZED_LINK_LIBRARIES})
        args.push_back(library);
    else if (sanitize == Sanitizer::Thread)
      for (const char *library : {LOOM_THREAD_SANITIZED_LINK_LIBRARIES})
        args.push_back(library);
    else
      for (const char *library : {LOOM_RUNTIME_LINK_LIBRARIES})
        args.push_back(library);
    args.push_back("-lmvec");
  }
  for (const char *extra : {"-lm", "-lpthread", "-o"})
    args.push_back(extra);
  args.push_back(outputFile);
  SmallVector<StringRef> argv(args.begin(), args.end());
  std::string errorMessage;
  int status = llvm::sys::ExecuteAndWait(argv[0], argv, /*Env=*/std::nullopt,
                                         /*Redirects=*/{}, /*SecondsToWait=*/0,
                                         /*MemoryLimit=*/0, &errorMessage);
  if (status != 0) {
    llvm::errs() << "loomc: error: building " << outputFile << " with "
                 << argv[0] << " failed"
                 << (errorMessage.empty() ? "" : ": " + errorMessage)
                 << " (exit " << status
                 << "); the generated code is what --emit="
                 << (cuda ? "cuda" : "cpu") << " prints\n";
    return 1;
  }
  return 0;
}

/// Why `path` cannot be written, or "" when it can: it is a directory (or,
/// with `regularOnly`, anything but a regular file), or a new file whose
/// directory is missing or not writable.
static std::string whyNotWritable(StringRef path, bool regularOnly) {
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status)) {
    if (regularOnly && status.type() != llvm::sys::fs::file_type::regular_file)
      return "not a regular file";
    if (status.type() == llvm::sys::fs::file_type::directory_file)
      return "it is a directory";
    return "";
  }
  StringRef directory = llvm::sys::path::parent_path(path);
  if (directory.empty())
    directory = ".";
  if (!llvm::sys::fs::is_directory(directory))
    return ("no directory " + directory).str();
  if (llvm::sys::fs::access(directory, llvm::sys::fs::AccessMode::Write))
    return ("cannot write in " + directory).str();
  return "";
}

static int compile(MLIRContext &context, llvm::SourceMgr &sourceMgr) {
  loom::FrontendOptions options;
  options.includeDirs.assign(includeDirs.begin(), includeDirs.end());
  if (meshOverride.getNumOccurrences()) {
    std::string error;
    auto overrides = loom::parseMeshOverrides(meshOverride, error);
    // The library reads "" as no override; on the command line it is a
    // mistake (a shell variable left empty).
    if (succeeded(overrides) && overrides->empty()) {
      error = "expected axis=size,... (e.g. dp=4,tp=2), got an empty list";
      overrides = failure();
    }
    if (failed(overrides)) {
      llvm::errs() << "loomc: error: --mesh: " << error << "\n";
      return 1;
    }
    options.meshOverrides = *overrides;
  }

  FailureOr<loom::Program> program =
      loom::loadProgram(context, sourceMgr, inputFile, options);
  if (failed(program))
    return 1;

  // The output file is opened only once there is something to write, so a
  // failed compilation leaves an existing file as it was.
  std::string errorMessage;
  auto openOutput = [&]() -> std::unique_ptr<llvm::ToolOutputFile> {
    std::unique_ptr<llvm::ToolOutputFile> output =
        openOutputFile(outputFile, &errorMessage);
    if (!output)
      llvm::errs() << "loomc: error: " << errorMessage << "\n";
    return output;
  };

  if (emitKind == Emit::AST) {
    std::unique_ptr<llvm::ToolOutputFile> output = openOutput();
    if (!output)
      return 1;
    for (const auto &file : program->files)
      loom::ast::printAST(*file, sourceMgr, output->os());
    output->keep();
    return 0;
  }

  OwningOpRef<ModuleOp> module =
      loom::generateModule(context, sourceMgr, *program, options);
  if (!module)
    return 1;

  bool analyse = explain || report != Report::None;
  // JSON is for tools: mixing IR or the text table into it would break them.
  if (report == Report::Json && (explain || emitKind.getNumOccurrences())) {
    llvm::errs() << "loomc: error: --report=json prints only JSON; use it "
                    "without --emit and --explain\n";
    return 1;
  }
  if (analyse && emitKind.getNumOccurrences() && emitKind != Emit::Spmd) {
    llvm::errs() << "loomc: error: --explain and --report describe the "
                    "per-device program; use them alone or with --emit=spmd\n";
    return 1;
  }
  bool buildExecutable = !emitKind.getNumOccurrences() && !analyse &&
                         !interpret && outputFile != "-";
  if (interpret &&
      (emitKind.getNumOccurrences() || analyse || outputFile != "-")) {
    llvm::errs() << "loomc: error: --interpret runs the model and prints its "
                    "outputs; use --out FILE to save them, not --emit, "
                    "--explain, --report or -o\n";
    return 1;
  }
  if (!interpret &&
      (interpretInputs.getNumOccurrences() ||
       interpretParams.getNumOccurrences() ||
       interpretOut.getNumOccurrences() || interpretSeed.getNumOccurrences() ||
       interpretUnrounded.getNumOccurrences() ||
       interpretPerturbRounding.getNumOccurrences())) {
    llvm::errs() << "loomc: error: --seed, --inputs, --params, --out, "
                    "--unrounded and --perturb-rounding are options of "
                    "--interpret (a compiled model takes the first four when "
                    "it runs)\n";
    return 1;
  }
  if (interpretPerturbRounding.getNumOccurrences() &&
      interpretPerturbRounding == 0) {
    llvm::errs() << "loomc: error: --perturb-rounding needs a stream from 1 "
                    "on, not 0\n";
    return 1;
  }
  if (interpretPerturbRounding.getNumOccurrences() && interpretUnrounded) {
    llvm::errs() << "loomc: error: --perturb-rounding rounds what --unrounded "
                    "keeps unrounded: give one of them\n";
    return 1;
  }
  if (!parseSeed(interpretSeed)) {
    llvm::errs() << "loomc: error: --seed needs an integer from 0 to 2^64 - 1 "
                    "(decimal, or 0x... hexadecimal), not '"
                 << interpretSeed << "'\n";
    return 1;
  }
  if (cudaArch.getNumOccurrences() && target != loom::Target::Cuda) {
    llvm::errs() << "loomc: error: --cuda-arch is the GPU of --target=cuda "
                    "programs; add --target=cuda\n";
    return 1;
  }
  if (sanitize != Sanitizer::None && !buildExecutable) {
    llvm::errs() << "loomc: error: --sanitize is for the executable that -o "
                    "FILE builds, not for --emit, --explain, --report or "
                    "--interpret\n";
    return 1;
  }
  if (sanitize != Sanitizer::None && target == loom::Target::Cuda) {
    llvm::errs() << "loomc: error: --sanitize builds CPU programs only; on a "
                    "GPU run the program under compute-sanitizer, or the "
                    "CUDA backend on the CPU with runtime/tools/cuda-on-cpu.py "
                    "--sanitize or --sanitize=thread\n";
    return 1;
  }
  if (target == loom::Target::Cuda && !checkCudaArch(cudaArch))
    return 1;
  // --interpret --out is checked before the (maybe long) run, as the
  // executables check theirs.
  // Output files are checked before the (maybe long) work, so that a typo
  // is named as such rather than as the linker's or a late write's failure;
  // --interpret --out, as the executables' files, must be a regular file.
  if (interpret && !interpretOut.empty()) {
    std::string problem = whyNotWritable(interpretOut, /*regularOnly=*/true);
    if (!problem.empty()) {
      llvm::errs() << "loomc: error: --out: cannot write " << interpretOut
                   << ": " << problem << "\n";
      return 1;
    }
  }
  if (buildExecutable) {
    std::string problem = whyNotWritable(outputFile, /*regularOnly=*/false);
    if (!problem.empty()) {
      llvm::errs() << "loomc: error: cannot write the executable '"
                   << outputFile << "': " << problem << "\n";
      return 1;
    }
  }
  if (combineBytes < 0) {
    llvm::errs() << "loomc: error: --combine-bytes=" << combineBytes
                 << ": a size in bytes is 0 or more (0 combines none)\n";
    return 1;
  }
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return 1;
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope timingScope = timing.getRootScope();
  pm.enableTiming(timingScope);
  if (dtypeOverride == DType::F32)
    pm.addPass(loom::createLoomWidenFloats());
  bool hasMesh = !module->getOps<loom::MeshOp>().empty();
  loom::SpmdOptions spmdOptions;
  spmdOptions.combineBytes = combineBytes;
  loom::KernelPlanOptions kernelOptions;
  kernelOptions.overlapCollectives = overlapCollectives;
  bool generate =
      buildExecutable || emitKind == Emit::Cpu || emitKind == Emit::Cuda;
  if (generate && !hasMesh) {
    // Without a mesh the program runs on one rank as written.
    loom::buildFrontendCleanupPipeline(pm);
    loom::buildKernelPlanPipeline(pm, kernelOptions);
  } else if (generate)
    loom::buildPlanPipeline(pm, spmdOptions, kernelOptions);
  else if (analyse || emitKind == Emit::Spmd)
    loom::buildSpmdPipeline(pm, spmdOptions);
  else if (emitKind == Emit::Sharded)
    loom::buildShardingPipeline(pm);
  else
    loom::buildFrontendCleanupPipeline(pm);
  if (failed(pm.run(*module)))
    return 1;

  if (interpret) {
    loom::InterpretOptions options;
    options.seed = *parseSeed(interpretSeed);
    options.inputs = interpretInputs;
    options.params = interpretParams;
    options.out = interpretOut;
    options.unrounded = interpretUnrounded;
    options.perturbRounding = interpretPerturbRounding;
    return failed(loom::interpretModel(*module, options, llvm::outs())) ? 1 : 0;
  }
  if (buildExecutable)
    return buildProgram(*module);

  std::unique_ptr<llvm::ToolOutputFile> output = openOutput();
  if (!output)
    return 1;
  llvm::raw_ostream &os = output->os();
  // The report's peak memory comes from the memory plan, made on a copy so
  // that --emit=spmd still prints the program before fusion.
  // With --overlap-collectives, --explain lists the collectives as the
  // plan starts them (split, started early), not as partitioning left them.
  bool explainPlanned = explain && overlapCollectives;
  OwningOpRef<ModuleOp> planned;
  if (report != Report::None || explainPlanned) {
    planned = module->clone();
    PassManager planPm(&context);
    loom::buildKernelPlanPipeline(planPm, kernelOptions);
    if (failed(planPm.run(*planned)))
      return 1;
  }
  if (report == Report::Json) {
    loom::printReport(*module, os, /*json=*/true, *planned);
    output->keep();
    return 0;
  }
  bool printIR = !analyse || emitKind.getNumOccurrences();
  if (emitKind == Emit::Cpu || emitKind == Emit::Cuda) {
    if (failed(loom::emitProgram(*module, inputFile,
                                 emitKind == Emit::Cuda ? loom::Target::Cuda
                                                        : loom::Target::Cpu,
                                 os)))
      return 1;
  } else if (emitKind == Emit::Params) {
    loom::printParams(*module, os);
  } else if (printIR) {
    OpPrintingFlags flags;
    flags.printNameLocAsPrefix();
    module->print(os, flags);
  }
  // After IR, the analyses print as comments so the output still parses.
  auto printAnalysis = [&](llvm::function_ref<void(llvm::raw_ostream &)> fn) {
    std::string text;
    llvm::raw_string_ostream textOs(text);
    fn(textOs);
    if (!printIR) {
      os << text;
      return;
    }
    StringRef rest = text;
    while (!rest.empty()) {
      auto [line, tail] = rest.split('\n');
      os << "// " << line << "\n";
      rest = tail;
    }
  };
  if (explain)
    printAnalysis([&](llvm::raw_ostream &out) {
      loom::printCollectiveTable(explainPlanned ? *planned : *module, out);
    });
  if (report == Report::Text)
    printAnalysis([&](llvm::raw_ostream &out) {
      loom::printReport(*module, out, /*json=*/false, *planned);
    });
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // --mlir-print-ir-{before,after}=PASS look PASS up among the registered
  // passes when their option is made: register every pass loomc runs first.
  registerCanonicalizerPass();
  registerCSEPass();
  loom::registerLoomPasses();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  // Show the MLIR options users reach for with loomc; hide the hundreds of
  // others that libLLVM and libMLIR register.
  static llvm::cl::OptionCategory mlirCategory("MLIR options");
  auto &registered = llvm::cl::getRegisteredOptions();
  for (StringRef name : {"mlir-print-debuginfo", "mlir-pretty-debuginfo",
                         "mlir-print-ir-after-all", "mlir-print-ir-before-all",
                         "mlir-print-ir-after", "mlir-print-ir-before",
                         "mlir-print-ir-after-change", "mlir-print-local-scope",
                         "mlir-print-op-generic", "mlir-timing",
                         "mlir-elide-elementsattrs-if-larger"})
    if (llvm::cl::Option *option = registered.lookup(name)) {
      option->setHiddenFlag(llvm::cl::NotHidden);
      option->addCategory(mlirCategory);
    }
  llvm::cl::HideUnrelatedOptions({&loomCategory, &interpretCategory,
                                  &mlirCategory, &llvm::getColorCategory()});
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "loomc: the Loom compiler\n\n"
      "Compiles a Loom model (mesh, shardings, blocks, model, training spec)\n"
      "and prints it at the chosen stage. Errors are reported as\n"
      "file:line:col with the source line; the exit code is 1 on any error.\n"
      "Of MLIR's options, those listed under 'MLIR options' are supported.\n");

  MLIRContext context;
  // Remarks and errors point at source lines; the op text would repeat them.
  context.printOpOnDiagnostic(false);
  context.loadDialect<loom::LoomDialect, func::FuncDialect>();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler sourceMgrHandler(sourceMgr, &context);
  // Errors inside a block body would repeat once per call: report each once.
  // After kMaxErrors, stop: hostile input can produce thousands, each with a
  // long source line.
  std::set<std::pair<const void *, std::string>> reported;
  unsigned errorCount = 0;
  ScopedDiagnosticHandler filter(&context, [&](Diagnostic &diag) {
    Location key = diag.getLocation();
    while (auto callSite = dyn_cast<CallSiteLoc>(key))
      key = callSite.getCallee();
    if (!reported.insert({key.getAsOpaquePointer(), diag.str()}).second)
      return success();
    if (diag.getSeverity() == DiagnosticSeverity::Error &&
        ++errorCount > kMaxErrors) {
      if (errorCount == kMaxErrors + 1)
        llvm::errs() << "loomc: error: too many errors; stopping after "
                     << kMaxErrors << "\n";
      return success();
    }
    if (isa<UnknownLoc>(diag.getLocation())) {
      // Not tied to a source line (a command-line or file-system problem).
      llvm::errs() << "loomc: "
                   << (diag.getSeverity() == DiagnosticSeverity::Error
                           ? "error: "
                           : "note: ")
                   << diag.str() << "\n";
      return success();
    }
    return failure(); // on to the source-manager handler
  });

  int exitCode = 1;
  llvm::thread frontend(std::optional<unsigned>(kFrontendStackBytes),
                        [&] { exitCode = compile(context, sourceMgr); });
  frontend.join();
  return exitCode;
}
