//===- EmitProgramTest.cpp - The code generator's own checks --------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// The code generator addresses every value at its arena offset from the
// memory plan. A value the plan left out (a pass that forgot one) must be an
// error at its op, never code that addresses memory before the arena (offset
// -1): that was a wrong product and a corrupted heap once (batched-transposes).
//
// A GEMM epilogue writes its fusion group's result while the GEMM reads its
// operands: the code generator asks for one only where the result shares no
// bytes with them, whatever plan it is given.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomOps.h"
#include "loom/Frontend/Frontend.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Target/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

#include <string>

using namespace mlir;

namespace {

constexpr const char *kModel = R"(mesh m = [tp: 2]
model Tiny(x: f32[4, 8], w: f32[8, 6:tp]) -> (y: f32[4, 6:tp]) {
  p = x @ w
  return p * 2.0
}
)";

constexpr const char *kEpilogueModel = R"(mesh m = [dp: 1]
model Mlp(x: bf16[4, 64], w: bf16[64, 96], b: bf16[96]) -> (y: bf16[4, 96]) {
  return gelu(x @ w + b, approximate = "tanh")
}
)";

/// A loop that loom-fuse-add-norm rotates: the stacked gains from the
/// second row on, then the final norm's, are one concatenation read in
/// place (192 + 64 bytes).
constexpr const char *kRotatedModel = R"(mesh m = [dp: 1]
block L(x: f32[4, 16]) -> f32[4, 16] {
  param g: f32[16] = ones
  param w: f32[16, 16] = normal(0.1)
  h = rmsnorm(x, g)
  return x + h @ w
}
model M(x: f32[4, 16]) -> (y: f32[4, 16]) {
  param gf: f32[16] = ones
  x = repeat 3 as layers { L(x) }
  return rmsnorm(x, gf)
}
)";

constexpr const char *kFsdpModel = R"(mesh m = [dp: 2]
model Fsdp(x: f32[4:dp, 8], w: f32[8:dp, 6]) -> (y: f32[4:dp, 6]) {
  h = gelu(x)
  return h @ w
}
)";

class EmitProgramTest : public ::testing::Test {
protected:
  EmitProgramTest() {
    context.loadDialect<loom::LoomDialect, func::FuncDialect>();
  }

  /// A model (by default kModel), compiled up to code generation (partitioned
  /// and planned), or null with the failure recorded.
  OwningOpRef<ModuleOp> planned(const char *model = kModel,
                                bool overlapCollectives = false) {
    SmallString<128> path;
    int fd;
    if (llvm::sys::fs::createTemporaryFile("emit-program", "loom", fd, path)) {
      ADD_FAILURE() << "cannot create a temporary file";
      return {};
    }
    {
      llvm::raw_fd_ostream file(fd, /*shouldClose=*/true);
      file << model;
    }
    loom::FrontendOptions options;
    FailureOr<loom::Program> program =
        loom::loadProgram(context, sourceMgr, path, options);
    llvm::sys::fs::remove(path);
    if (failed(program)) {
      ADD_FAILURE() << "the model does not parse: " << diagnostics;
      return {};
    }
    OwningOpRef<ModuleOp> module =
        loom::generateModule(context, sourceMgr, *program, options);
    PassManager pm(&context);
    loom::KernelPlanOptions kernelOptions;
    kernelOptions.overlapCollectives = overlapCollectives;
    loom::buildPlanPipeline(pm, {}, kernelOptions);
    if (!module || failed(pm.run(*module))) {
      ADD_FAILURE() << "the model does not compile: " << diagnostics;
      return {};
    }
    return module;
  }

  /// The first matmul or einsum the plan gave offsets.
  static Operation *firstPlannedProduct(ModuleOp module) {
    Operation *product = nullptr;
    module->walk([&](Operation *op) {
      if (!product && (isa<loom::MatmulOp>(op) || isa<loom::EinsumOp>(op)) &&
          op->hasAttr(loom::LoomDialect::kOffsetsAttrName))
        product = op;
    });
    return product;
  }

  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::string diagnostics;
  ScopedDiagnosticHandler collect{&context, [this](Diagnostic &diag) {
                                    llvm::raw_string_ostream os(diagnostics);
                                    os << diag.getLocation() << ": "
                                       << diag.str() << "\n";
                                    return success();
                                  }};
};

TEST_F(EmitProgramTest, AValueWithoutAPlaceIsAnInternalErrorAtItsOp) {
  for (loom::Target target : {loom::Target::Cpu, loom::Target::Cuda}) {
    OwningOpRef<ModuleOp> module = planned();
    ASSERT_TRUE(module);
    std::string code;
    llvm::raw_string_ostream os(code);
    // The plan as made is emitted, and the product is addressed in it.
    ASSERT_TRUE(succeeded(loom::emitProgram(*module, "tiny.loom", target, os)))
        << diagnostics;
    EXPECT_EQ(code.find("arena + -"), std::string::npos);

    // With the product marked as the plan marks a view (offset -1, no
    // buffer of its own) though its readers cannot read it in place, the
    // emitter refuses the program.
    Operation *product = firstPlannedProduct(*module);
    ASSERT_NE(product, nullptr);
    product->setAttr(loom::LoomDialect::kOffsetsAttrName,
                     DenseI64ArrayAttr::get(&context, {-1}));
    code.clear();
    diagnostics.clear();
    EXPECT_TRUE(failed(loom::emitProgram(*module, "tiny.loom", target, os)));
    EXPECT_EQ(code, "") << "no code for a program the plan does not cover";
    std::string expected =
        std::string("cannot generate ") +
        (target == loom::Target::Cuda ? "CUDA" : "CPU") +
        " code: internal error: a value the code reads or writes has no "
        "place in the memory plan";
    EXPECT_NE(diagnostics.find(expected), std::string::npos) << diagnostics;
    // At the product's line in the source (`p = x @ w`).
    EXPECT_NE(diagnostics.find(":3:"), std::string::npos) << diagnostics;
  }
}

TEST_F(EmitProgramTest, AValuePastTheArenaIsAnInternalErrorAtItsOp) {
  for (loom::Target target : {loom::Target::Cpu, loom::Target::Cuda}) {
    OwningOpRef<ModuleOp> module = planned();
    ASSERT_TRUE(module);
    std::string code;
    llvm::raw_string_ostream os(code);
    ASSERT_TRUE(succeeded(loom::emitProgram(*module, "tiny.loom", target, os)))
        << diagnostics;

    // With the product placed where its last byte is the arena's last but
    // one, it would run past the arena: the emitter refuses the program.
    Operation *product = firstPlannedProduct(*module);
    ASSERT_NE(product, nullptr);
    auto func = product->getParentOfType<func::FuncOp>();
    int64_t arena =
        func->getAttrOfType<IntegerAttr>(loom::LoomDialect::kArenaBytesAttrName)
            .getInt();
    int64_t bytes = loom::tensorBytes(product->getResult(0).getType());
    product->setAttr(loom::LoomDialect::kOffsetsAttrName,
                     DenseI64ArrayAttr::get(&context, {arena - bytes + 1}));
    code.clear();
    diagnostics.clear();
    EXPECT_TRUE(failed(loom::emitProgram(*module, "tiny.loom", target, os)));
    EXPECT_EQ(code, "");
    std::string expected =
        "internal error: a value the code reads or writes reaches past the "
        "end of the memory plan's arena (" +
        std::to_string(arena) + " bytes)";
    EXPECT_NE(diagnostics.find(expected), std::string::npos) << diagnostics;
    EXPECT_NE(diagnostics.find(":3:"), std::string::npos) << diagnostics;

    // Ending exactly at the arena's end is in it.
    product->setAttr(loom::LoomDialect::kOffsetsAttrName,
                     DenseI64ArrayAttr::get(&context, {arena - bytes}));
    diagnostics.clear();
    EXPECT_TRUE(succeeded(loom::emitProgram(*module, "tiny.loom", target, os)))
        << diagnostics;
  }
}

TEST_F(EmitProgramTest, AConcatenationReadInPlaceNeedsItsPiecesSideBySide) {
  for (loom::Target target : {loom::Target::Cpu, loom::Target::Cuda}) {
    OwningOpRef<ModuleOp> module = planned(kRotatedModel);
    ASSERT_TRUE(module);
    std::string code;
    llvm::raw_string_ostream os(code);
    ASSERT_TRUE(succeeded(loom::emitProgram(*module, "rotated.loom", target, os)))
        << diagnostics;
    EXPECT_EQ(code.find("loomrt_insert"), std::string::npos)
        << "the concatenation is read in place";

    // With the final gains moved one alignment unit on, the pieces no
    // longer meet: the emitter refuses the program.
    func::FuncOp model;
    module->walk([&](func::FuncOp func) {
      if (func->hasAttr(loom::LoomDialect::kModelAttrName))
        model = func;
    });
    ASSERT_TRUE(model);
    bool moved = false;
    for (BlockArgument argument : model.getArguments()) {
      auto name = model.getArgAttrOfType<StringAttr>(
          argument.getArgNumber(), loom::LoomDialect::kParamAttrName);
      if (!name || name.getValue() != "gf")
        continue;
      auto offset = model.getArgAttrOfType<IntegerAttr>(
          argument.getArgNumber(), loom::LoomDialect::kOffsetAttrName);
      model.setArgAttr(argument.getArgNumber(),
                       loom::LoomDialect::kOffsetAttrName,
                       IntegerAttr::get(offset.getType(), offset.getInt() + 64));
      moved = true;
    }
    ASSERT_TRUE(moved);
    code.clear();
    diagnostics.clear();
    EXPECT_TRUE(failed(loom::emitProgram(*module, "rotated.loom", target, os)));
    EXPECT_EQ(code, "");
    EXPECT_NE(diagnostics.find("internal error: the memory plan did not place "
                               "the pieces of a concatenation read in place "
                               "side by side"),
              std::string::npos)
        << diagnostics;
  }
}

TEST_F(EmitProgramTest, AnEpilogueNeverWritesOverTheGemmsOperands) {
  OwningOpRef<ModuleOp> module = planned(kEpilogueModel);
  ASSERT_TRUE(module);
  auto emit = [&] {
    std::string code;
    llvm::raw_string_ostream os(code);
    EXPECT_TRUE(succeeded(
        loom::emitProgram(*module, "mlp.loom", loom::Target::Cuda, os)))
        << diagnostics;
    return code;
  };
  // The plan puts the group's result over the product, which is the GEMM's
  // own output: the epilogue is asked for.
  std::string asked = "loomrt_contract_epilogue(";
  EXPECT_NE(emit().find(asked), std::string::npos);

  loom::FusedOp group;
  module->walk([&](loom::FusedOp op) { group = op; });
  ASSERT_TRUE(group);
  auto func = group->getParentOfType<func::FuncOp>();
  // Over x, w or b (as a plan that shared their bytes would be): the GEMM
  // and the group's kernel instead.
  for (unsigned argument = 0; argument < 3; ++argument) {
    auto offset = func.getArgAttrOfType<IntegerAttr>(
        argument, loom::LoomDialect::kOffsetAttrName);
    ASSERT_TRUE(offset);
    group->setAttr(loom::LoomDialect::kOffsetsAttrName,
                   DenseI64ArrayAttr::get(&context, {offset.getInt()}));
    EXPECT_EQ(emit().find(asked), std::string::npos)
        << "an epilogue over argument " << argument;
  }
}

} // namespace

// The weight's gather is started before the GELU and waited for before the
// product (loom-overlap-collectives); the runtime's calls bracket it. A
// start whose wait is not in its block (hand-written IR) is refused at the
// start, never emitted as a future the step leaves outstanding.
TEST_F(EmitProgramTest, AStartedCollectiveIsWaitedForInItsBlock) {
  OwningOpRef<ModuleOp> module =
      planned(kFsdpModel, /*overlapCollectives=*/true);
  ASSERT_TRUE(module);
  std::string code;
  llvm::raw_string_ostream os(code);
  ASSERT_TRUE(
      succeeded(loom::emitProgram(*module, "fsdp.loom", loom::Target::Cpu, os)))
      << diagnostics;
  size_t begin = code.find("loomrt_start_begin(rt, 0);"),
         gather = code.find("loomrt_all_gather(", begin),
         end = code.find("loomrt_start_end(rt, 0);", gather),
         gelu = code.find("loom.gelu", end),
         wait = code.find("loomrt_wait(rt, 0);", gelu),
         product = code.find("loomrt_contract(", wait);
  EXPECT_NE(begin, std::string::npos) << code;
  EXPECT_NE(gather, std::string::npos) << code;
  EXPECT_NE(end, std::string::npos) << code;
  EXPECT_NE(gelu, std::string::npos) << code;
  EXPECT_NE(wait, std::string::npos) << code;
  EXPECT_NE(product, std::string::npos) << code;

  loom::WaitOp waitOp;
  module->walk([&](loom::WaitOp op) { waitOp = op; });
  ASSERT_TRUE(waitOp);
  // One more wait for the future, inside a loop of one layer.
  OpBuilder builder(waitOp);
  auto repeat = loom::RepeatOp::create(builder, waitOp.getLoc(), TypeRange{},
                                       builder.getI64IntegerAttr(1),
                                       ValueRange{}, ValueRange{});
  Block *body = builder.createBlock(&repeat.getBody());
  builder.setInsertionPointToEnd(body);
  loom::WaitOp::create(builder, waitOp.getLoc(), waitOp.getType(),
                       waitOp.getFuture());
  loom::YieldOp::create(builder, waitOp.getLoc(), ValueRange{});
  code.clear();
  diagnostics.clear();
  EXPECT_TRUE(
      failed(loom::emitProgram(*module, "fsdp.loom", loom::Target::Cpu, os)));
  EXPECT_NE(diagnostics.find("a started collective must be waited for, by "
                             "loom.wait ops in its own block"),
            std::string::npos)
      << diagnostics;
  // At the start's place in the source: the product that needs the
  // gathered weight (`return h @ w`, line 4, column 12).
  EXPECT_NE(diagnostics.find(".loom\":4:12)"), std::string::npos)
      << diagnostics;
}
