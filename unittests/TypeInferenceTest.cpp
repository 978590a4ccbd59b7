//===- TypeInferenceTest.cpp - Shape rules of Loom ops --------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/TypeInference.h"
#include "dialects/loom/IR/LoomOps.h"
#include "dialects/loom/IR/Sharding.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace loom;

namespace {

class TypeInferenceTest : public ::testing::Test {
protected:
  TypeInferenceTest() { context.loadDialect<LoomDialect>(); }
  RankedTensorType tensor(ArrayRef<int64_t> shape, Type element = {}) {
    return RankedTensorType::get(shape, element ? element
                                                : Float32Type::get(&context));
  }
  MLIRContext context;
};

TEST_F(TypeInferenceTest, BroadcastAlignsTrailingDimensions) {
  auto shape = inferBroadcastShape(std::nullopt, "+", {4, 1, 8}, {3, 1});
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (SmallVector<int64_t>{4, 3, 8}));
  EXPECT_TRUE(failed(inferBroadcastShape(std::nullopt, "+", {4, 8}, {3})));
}

TEST_F(TypeInferenceTest, PromotionMixesOnlyF32WithHalfTypes) {
  Type f32 = Float32Type::get(&context), bf16 = BFloat16Type::get(&context);
  Type f16 = Float16Type::get(&context), i32 = IntegerType::get(&context, 32);
  EXPECT_EQ(*inferPromotedElementType(std::nullopt, "+", bf16, f32), f32);
  EXPECT_EQ(*inferPromotedElementType(std::nullopt, "+", f16, f16), f16);
  EXPECT_TRUE(failed(inferPromotedElementType(std::nullopt, "+", bf16, f16)));
  EXPECT_TRUE(failed(inferPromotedElementType(std::nullopt, "+", i32, f32)));
}

TEST_F(TypeInferenceTest, MatmulBroadcastsBatchDimensions) {
  auto type =
      inferMatmulType(std::nullopt, tensor({8, 16, 32}), tensor({32, 64}));
  ASSERT_TRUE(succeeded(type));
  EXPECT_EQ(type->getShape(), (ArrayRef<int64_t>{8, 16, 64}));
  EXPECT_TRUE(
      failed(inferMatmulType(std::nullopt, tensor({8, 16}), tensor({8, 4}))));
}

TEST_F(TypeInferenceTest, EinsumFollowsItsSpec) {
  auto type = inferEinsumType(std::nullopt, "bsd,dhe->bhse",
                              {tensor({2, 4, 8}), tensor({8, 3, 5})});
  ASSERT_TRUE(succeeded(type));
  EXPECT_EQ(type->getShape(), (ArrayRef<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE(failed(inferEinsumType(std::nullopt, "ij,jk",
                                     {tensor({2, 3}), tensor({3, 4})})));
  EXPECT_TRUE(failed(inferEinsumType(std::nullopt, "ij,jk->ik",
                                     {tensor({2, 3}), tensor({4, 4})})));
}

TEST_F(TypeInferenceTest, CrossEntropyIsAnF32Scalar) {
  auto type =
      inferCrossEntropyType(std::nullopt, tensor({2, 4, 16}),
                            tensor({2, 4}, IntegerType::get(&context, 32)));
  ASSERT_TRUE(succeeded(type));
  EXPECT_EQ(type->getRank(), 0);
  EXPECT_TRUE(type->getElementType().isF32());
}

TEST(FormatTest, ShortestDoubleRoundTripsInMLIRSyntax) {
  EXPECT_EQ(formatShortestDouble(0.02), "0.02");
  EXPECT_EQ(formatShortestDouble(1.0), "1.0");
  EXPECT_EQ(formatShortestDouble(-3.0), "-3.0");
  EXPECT_EQ(formatShortestDouble(1e-20), "1.0e-20");
  EXPECT_EQ(formatShortestDouble(2.5e-05), "2.5e-05");
}

TEST(FormatTest, RoundUpToMultiple) {
  EXPECT_EQ(roundUpTo(12, 8), 16);
  EXPECT_EQ(roundUpTo(16, 8), 16);
  EXPECT_EQ(roundUpTo(1, 3), 3);
}

} // namespace
