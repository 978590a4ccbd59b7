//===- LogitsStatsTest.cpp - The logits' block sizes ----------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "runtime/LogitsStats.h"

#include <gtest/gtest.h>

namespace {

using loomrt::gpuLogitsBlockBytes;
using loomrt::logitsBlockColumns;

constexpr int64_t kMiB = int64_t(1) << 20;

TEST(LogitsStatsTest, GpuBlocksAreASixtyFourthOfTheDeviceAndAtLeast96MiB) {
  // An H200 (143,771 MiB): 2246 MiB, so GPT-2 small's 786 MiB of logits
  // (8192 rows of 50304 bf16) are one block.
  int64_t h200 = gpuLogitsBlockBytes(143771 * kMiB);
  EXPECT_EQ(h200, 143771 * kMiB / 64);
  EXPECT_EQ(logitsBlockColumns(8192, 50304, 2, h200, 0), 50304);
  // An 80 GB A100 or H100: 1280 MiB, one block too.
  EXPECT_EQ(logitsBlockColumns(8192, 50304, 2, gpuLogitsBlockBytes(81920 * kMiB),
                               0),
            50304);
  // A 24 GB GPU: 384 MiB blocks of 24576 columns (3 blocks).
  EXPECT_EQ(logitsBlockColumns(8192, 50304, 2, gpuLogitsBlockBytes(24576 * kMiB),
                               0),
            24576);
  // Below 6 GiB, 96 MiB: GPT-2 small in blocks of 6144 columns.
  EXPECT_EQ(gpuLogitsBlockBytes(4096 * kMiB), 96 * kMiB);
  EXPECT_EQ(logitsBlockColumns(8192, 50304, 2, gpuLogitsBlockBytes(0), 0),
            6144);
}

TEST(LogitsStatsTest, BlockColumnsAreWholeTilesUnlessAsked) {
  // Multiples of 128 columns, at least 128, at most the vocabulary.
  EXPECT_EQ(logitsBlockColumns(1000, 50304, 4, 1 << 20, 0), 256);
  EXPECT_EQ(logitsBlockColumns(10000, 50304, 4, 1 << 20, 0), 128);
  EXPECT_EQ(logitsBlockColumns(100, 50304, 2, 1 << 20, 0), 5120);
  EXPECT_EQ(logitsBlockColumns(8, 512, 2, 1 << 20, 0), 512);
  // LOOMRT_LOGITS_COLUMNS's count is taken as it is.
  EXPECT_EQ(logitsBlockColumns(8192, 50304, 2, 96 * kMiB, 100), 100);
  EXPECT_EQ(logitsBlockColumns(8192, 512, 2, 96 * kMiB, 1000), 512);
}

} // namespace
