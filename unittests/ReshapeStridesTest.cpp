//===- ReshapeStridesTest.cpp - A reshape of a strided value --------------===//
//
// loom::reshapeStrides gives the strides by which a reshape of a value
// stored at some strides steps through the same buffer, or none. Checked
// against the definition: element i of the reshape, in row-major order,
// is element i of the input, so the two must name the same addresses; and
// where the input's addresses, taken in the reshape's row-major order,
// are an affine function of the reshape's indices, strides must be found.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Views.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using llvm::ArrayRef;
using llvm::SmallVector;

/// The address of each element of a [shape] value stored at `strides`, in
/// row-major order.
SmallVector<int64_t> addresses(ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> strides) {
  SmallVector<int64_t> result;
  int64_t count = mlir::computeProduct(shape);
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t address = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      address += index[d] * strides[d];
    result.push_back(address);
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return result;
}

/// Strides under which `shape`'s elements in row-major order land at
/// `wanted`, if any: each dimension's stride is the step of its first
/// index, and they must then hold everywhere.
std::optional<SmallVector<int64_t>> affineStrides(ArrayRef<int64_t> shape,
                                                  ArrayRef<int64_t> wanted) {
  SmallVector<int64_t> rowMajor = mlir::computeStrides(shape);
  SmallVector<int64_t> strides(shape.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1)
      strides[d] = wanted[rowMajor[d]] - wanted[0];
  SmallVector<int64_t> got = addresses(shape, strides);
  for (auto &address : got)
    address += wanted[0];
  if (got != SmallVector<int64_t>(wanted))
    return std::nullopt;
  return strides;
}

/// Sizes whose product is `count`, drawn at random, with some 1s.
SmallVector<int64_t> randomFactors(int64_t count, std::mt19937 &random) {
  SmallVector<int64_t> sizes;
  while (count > 1) {
    SmallVector<int64_t> divisors;
    for (int64_t d = 2; d <= count; ++d)
      if (count % d == 0)
        divisors.push_back(d);
    int64_t size = divisors[random() % divisors.size()];
    sizes.push_back(size);
    count /= size;
    if (random() % 4 == 0)
      sizes.push_back(1);
  }
  if (sizes.empty())
    sizes.push_back(1);
  return sizes;
}

TEST(ReshapeStrides, RowMajorInputGivesRowMajorStrides) {
  auto strides = loom::reshapeStrides({4, 6}, {6, 1}, {2, 3, 4});
  ASSERT_TRUE(strides);
  EXPECT_EQ(*strides, SmallVector<int64_t>({12, 4, 1}));
}

TEST(ReshapeStrides, HeadsOfAFusedProjectionsPiece) {
  // q of a [b, s, 3, h, e] = [2, 16, 3, 4, 8] projection, as [b, s, h, e].
  auto strides = loom::reshapeStrides({2, 16, 1, 4, 8}, {1536, 96, 32, 8, 1},
                                      {2, 16, 4, 8});
  ASSERT_TRUE(strides);
  EXPECT_EQ(*strides, SmallVector<int64_t>({1536, 96, 8, 1}));
  // Merging the heads with the sequence crosses from one run to another.
  EXPECT_FALSE(
      loom::reshapeStrides({2, 16, 1, 4, 8}, {1536, 96, 32, 8, 1}, {2, 64, 8}));
}

TEST(ReshapeStrides, ColumnsOfRowsDoNotRegroup) {
  // Three of every four columns of two rows, as three rows of two.
  EXPECT_FALSE(loom::reshapeStrides({2, 3}, {4, 1}, {3, 2}));
  auto strides = loom::reshapeStrides({2, 3}, {4, 1}, {2, 1, 3});
  ASSERT_TRUE(strides);
  EXPECT_EQ((*strides)[0], 4);
  EXPECT_EQ((*strides)[2], 1);
}

TEST(ReshapeStrides, AgreesWithTheDefinitionOnRandomWindows) {
  std::mt19937 random(7);
  int found = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // A window of a row-major buffer: a random shape inside a larger one.
    SmallVector<int64_t> shape = randomFactors(1 << (random() % 7), random);
    SmallVector<int64_t> outer(shape);
    for (int64_t &size : outer)
      size += random() % 3;
    SmallVector<int64_t> strides = mlir::computeStrides(outer);
    int64_t count = mlir::computeProduct(shape);
    SmallVector<int64_t> reshaped = randomFactors(count, random);
    SmallVector<int64_t> wanted = addresses(shape, strides);
    std::optional<SmallVector<int64_t>> got =
        loom::reshapeStrides(shape, strides, reshaped);
    std::optional<SmallVector<int64_t>> exists =
        affineStrides(reshaped, wanted);
    if (got) {
      ++found;
      EXPECT_EQ(addresses(reshaped, *got), wanted)
          << "trial " << trial << ": wrong strides";
    } else {
      ++refused;
      EXPECT_FALSE(exists) << "trial " << trial
                           << ": refused a reshape that has strides";
    }
  }
  // Both outcomes are drawn often enough to mean something.
  EXPECT_GT(found, 500);
  EXPECT_GT(refused, 500);
}

} // namespace
