//===- MirrorSendTest.cpp - Which held send a receive goes with -----------===//
//
// The NCCL transport holds sends until their mirror receive and issues the
// pair in one group (runtime/cuda/Nccl.cpp); which send is the mirror is
// host logic, tested here without a GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/Runtime.h"

#include <gtest/gtest.h>

using loomrt::mirrorSend;

namespace {

TEST(MirrorSend, RingOfFour) {
  // Sent to +1: the receive from -1 is its mirror, the one from +1 is not.
  EXPECT_EQ(mirrorSend({{0, 1}}, 0, -1, 4), 0);
  EXPECT_EQ(mirrorSend({{0, 1}}, 0, 1, 4), -1);
  EXPECT_EQ(mirrorSend({}, 0, -1, 4), -1);
}

TEST(MirrorSend, TwoSendsThenTwoReceives) {
  // Sent to +1 then -1: the receive from -1 takes the first, the receive
  // from +1 the second.
  EXPECT_EQ(mirrorSend({{0, 1}, {0, -1}}, 0, -1, 3), 0);
  EXPECT_EQ(mirrorSend({{0, 1}, {0, -1}}, 0, 1, 3), 1);
}

TEST(MirrorSend, OldestFirstWhereOffsetsCoincide) {
  // On two ranks +1 and -1 are the same neighbour: the oldest goes first,
  // as NCCL matches a pair's messages in order.
  EXPECT_EQ(mirrorSend({{0, 1}, {0, -1}}, 0, -1, 2), 0);
  EXPECT_EQ(mirrorSend({{0, -1}}, 0, 1, 2), 0);
  // Alone on an axis, every message is to oneself.
  EXPECT_EQ(mirrorSend({{0, 1}}, 0, 5, 1), 0);
}

TEST(MirrorSend, AxesAndOffsetsBeyondTheSize) {
  EXPECT_EQ(mirrorSend({{1, 1}}, 0, -1, 4), -1);
  EXPECT_EQ(mirrorSend({{0, 1}, {1, 1}}, 1, -1, 3), 1);
  EXPECT_EQ(mirrorSend({{0, 5}}, 0, -1, 4), 0);
  EXPECT_EQ(mirrorSend({{0, 5}}, 0, -5, 4), 0);
  EXPECT_EQ(mirrorSend({{0, 5}}, 0, -2, 4), -1);
}

} // namespace
