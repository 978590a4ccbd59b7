//===- InitialValuesTest.cpp - Philox and the initial-value recipe --------===//
#include "runtime/InitialValues.h"
#include "loomrt.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace loomrt;

// Random123's known-answer test for Philox4x32-10 (kat_vectors).
TEST(InitialValues, PhiloxKnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
                                     0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6,
                                     0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420,
                                     0x24126ea1}));
}

TEST(InitialValues, Fnv1a) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(InitialValues, Initialisers) {
  uint64_t h = fnv1a64("layers.attn.w_q");
  EXPECT_EQ(initialValue(LOOMRT_INIT_ZEROS, 0, 0, 0, 7, h, 3), 0.0);
  EXPECT_EQ(initialValue(LOOMRT_INIT_ONES, 0, 0, 0, 7, h, 3), 1.0);
  // Uniform values stay in range; normal values have about the asked moments.
  double sum = 0, squares = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    double u = initialValue(LOOMRT_INIT_UNIFORM, -2, 3, 0, 1, h, uint64_t(i));
    EXPECT_GT(u, -2.0);
    EXPECT_LT(u, 3.0);
    double v = initialValue(LOOMRT_INIT_NORMAL, 1.0, 0.5, 0, 1, h, uint64_t(i));
    sum += v;
    squares += (v - 1.0) * (v - 1.0);
  }
  EXPECT_NEAR(sum / n, 1.0, 0.02);
  EXPECT_NEAR(std::sqrt(squares / n), 0.5, 0.02);
  // Synthetic ids are in [0, bound).
  for (int i = 0; i < 1000; ++i) {
    double id = initialValue(LOOMRT_INIT_INPUT, 0, 0, 10, 3, h, uint64_t(i));
    EXPECT_GE(id, 0.0);
    EXPECT_LT(id, 10.0);
    EXPECT_EQ(id, std::floor(id));
  }
  // Another seed or name gives another value.
  EXPECT_NE(initialValue(LOOMRT_INIT_NORMAL, 0, 1, 0, 1, h, 5),
            initialValue(LOOMRT_INIT_NORMAL, 0, 1, 0, 2, h, 5));
  EXPECT_NE(initialValue(LOOMRT_INIT_NORMAL, 0, 1, 0, 1, h, 5),
            initialValue(LOOMRT_INIT_NORMAL, 0, 1, 0, 1, fnv1a64("w"), 5));
}

TEST(InitialValues, RoundingIsOnceToNearestEven) {
  uint16_t h;
  // 1 + 2^-8 is halfway between two bf16 values: ties to even (1.0).
  storeRounded(LOOMRT_BF16, 1.0 + std::ldexp(1.0, -8), &h);
  EXPECT_EQ(h, 0x3f80);
  // Just above halfway in f64 but not in f32: rounding through f32 first
  // would tie to even and go down; one rounding goes up.
  storeRounded(LOOMRT_BF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
               &h);
  EXPECT_EQ(h, 0x3f81);
  storeRounded(LOOMRT_F16, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
               &h);
  EXPECT_EQ(h, 0x3c01);
  float f;
  storeRounded(LOOMRT_F32, 0.1, &f);
  EXPECT_EQ(f, 0.1f);
}

TEST(InitialValues, HalfConversionsRoundTrip) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = loomrt_f16_to_f32(uint16_t(bits));
    if (std::isnan(f))
      continue;
    EXPECT_EQ(loomrt_f32_to_f16(f), bits);
    float g = loomrt_bf16_to_f32(uint16_t(bits));
    if (!std::isnan(g))
      EXPECT_EQ(loomrt_f32_to_bf16(g), bits);
  }
}
