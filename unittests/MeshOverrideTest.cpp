//===- MeshOverrideTest.cpp - Parsing --mesh overrides --------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Passes.h"

#include "gtest/gtest.h"

using namespace loom;

namespace {

TEST(MeshOverrideTest, ParsesAxisSizePairs) {
  std::string error;
  auto overrides = parseMeshOverrides("dp=4, tp = 2", error);
  ASSERT_TRUE(mlir::succeeded(overrides)) << error;
  ASSERT_EQ(overrides->size(), 2u);
  EXPECT_EQ((*overrides)[0].axis, "dp");
  EXPECT_EQ((*overrides)[0].size, 4);
  EXPECT_EQ((*overrides)[1].axis, "tp");
  EXPECT_EQ((*overrides)[1].size, 2);
}

TEST(MeshOverrideTest, RejectsMalformedEntries) {
  for (const char *text :
       {"dp", "dp=", "dp=0", "dp=-2", "=4", "dp=x", "dp=2,dp=4"}) {
    std::string error;
    EXPECT_TRUE(mlir::failed(parseMeshOverrides(text, error))) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

TEST(MeshOverrideTest, EmptyTextOverridesNothing) {
  std::string error;
  auto overrides = parseMeshOverrides("", error);
  ASSERT_TRUE(mlir::succeeded(overrides));
  EXPECT_TRUE(overrides->empty());
}

} // namespace
