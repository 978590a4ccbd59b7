//===- CarriedMovesTest.cpp - The copies that end a repeat's iteration ----===//
//
// loom::carriedMoves orders the copies into a repeat's carried buffers so
// that they give the same result as assigning all next values at once;
// both emitters make exactly these copies.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/Transforms/Views.h"

#include <gtest/gtest.h>

namespace {

using loom::CarriedMove;

/// Every vector of sources for `n` carried values: each is a carried index
/// or the yielded value's own buffer.
void forEachSources(int n, llvm::function_ref<void(llvm::ArrayRef<int>)> fn) {
  llvm::SmallVector<int> sources(n, CarriedMove::kYieldedValue);
  while (true) {
    fn(sources);
    int i = 0;
    while (i < n && sources[i] == n - 1)
      sources[i++] = CarriedMove::kYieldedValue;
    if (i == n)
      return;
    sources[i] = sources[i] == CarriedMove::kYieldedValue ? 0 : sources[i] + 1;
  }
}

/// Whether the sources form a cycle of two or more carried buffers.
bool hasCycle(llvm::ArrayRef<int> sources) {
  for (int start = 0; start < int(sources.size()); ++start) {
    int at = start;
    for (size_t steps = 0; steps <= sources.size(); ++steps) {
      int next = sources[at];
      if (next < 0 || next == at)
        break;
      at = next;
      if (at == start)
        return true;
    }
  }
  return false;
}

TEST(CarriedMovesTest, SameAsAssigningAllAtOnce) {
  int cases = 0, withScratch = 0;
  for (int n = 1; n <= 5; ++n)
    forEachSources(n, [&](llvm::ArrayRef<int> sources) {
      // Buffer i starts holding 100 + i; yielded value i is 200 + i.
      llvm::SmallVector<int> buffers, expected;
      for (int i = 0; i < n; ++i) {
        buffers.push_back(100 + i);
        int source = sources[i];
        expected.push_back(source == CarriedMove::kYieldedValue ? 200 + i
                                                                : 100 + source);
      }
      int scratch = -1;
      bool usedScratch = false;
      for (CarriedMove move : loom::carriedMoves(sources)) {
        ASSERT_NE(move.to, CarriedMove::kYieldedValue);
        int value = move.from == CarriedMove::kYieldedValue ? 200 + move.to
                    : move.from == CarriedMove::kScratch    ? scratch
                                                            : buffers[move.from];
        if (move.to == CarriedMove::kScratch) {
          scratch = value;
          usedScratch = true;
        } else {
          ASSERT_NE(move.from, move.to);
          buffers[move.to] = value;
        }
      }
      EXPECT_EQ(buffers, expected);
      EXPECT_EQ(usedScratch, hasCycle(sources));
      ++cases;
      withScratch += usedScratch;
    });
  EXPECT_EQ(cases, 2 + 9 + 64 + 625 + 7776);
  EXPECT_GT(withScratch, 0);
}

TEST(CarriedMovesTest, NothingToCopyWhenInPlace) {
  EXPECT_TRUE(loom::carriedMoves({0, 1, 2}).empty());
}

TEST(CarriedMovesTest, ASwapGoesRoundThroughTheScratch) {
  auto moves = loom::carriedMoves({1, 0});
  ASSERT_EQ(moves.size(), 3u);
  EXPECT_EQ(moves[0].to, CarriedMove::kScratch);
}

} // namespace
