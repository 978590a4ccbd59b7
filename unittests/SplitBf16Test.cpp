//===- SplitBf16Test.cpp - f32 as three bf16 terms, exactly ---------------===//
//
// The fused CUDA attention's P·V relies on loomrt_split_bf16x3 being exact
// (runtime/SplitBf16.h); the same inline function runs on the GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/SplitBf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace {

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double sumOfTerms(float x) {
  uint16_t terms[3];
  loomrt_split_bf16x3(x, terms);
  return double(loomrt_bf16_to_f32(terms[0])) +
         double(loomrt_bf16_to_f32(terms[1])) +
         double(loomrt_bf16_to_f32(terms[2]));
}

TEST(SplitBf16, EdgeValuesAreExact) {
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, fromBits(0x3f7fffffu) /* rounds
       up to 1 */, fromBits(0x3f800001u), std::ldexp(1.0f, -110),
                  std::ldexp(1.0f, 127), std::ldexp(1.5f, -110),
                  fromBits(0x3eaaaaabu) /* 1/3 */, fromBits(0x7f000000u)})
    EXPECT_EQ(sumOfTerms(x), double(x)) << x;
}

TEST(SplitBf16, RandomValuesInRangeAreExact) {
  std::mt19937 random(7);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  std::uniform_int_distribution<int> exponent(-110, 126);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t sign = (i & 1) << 31;
    uint32_t bits =
        sign | uint32_t(exponent(random) + 127) << 23 | mantissa(random);
    float x = fromBits(bits);
    ASSERT_EQ(sumOfTerms(x), double(x)) << std::hexfloat << x;
  }
}

TEST(SplitBf16, TermsTimesBf16AreExactProducts) {
  // Each term has 8 significant bits, so its product with a bf16 value fits
  // in f32's 24: what the tensor cores add is exactly p * v.
  std::mt19937 random(11);
  std::uniform_real_distribution<float> probability(0.0f, 1.0f);
  std::uniform_int_distribution<uint32_t> anyBf16(0, 0xffff);
  for (int i = 0; i < 200000; ++i) {
    float p = probability(random);
    uint16_t v = anyBf16(random);
    float value = loomrt_bf16_to_f32(v);
    if (!std::isfinite(value) || std::fabs(value) < 1e-30f ||
        std::fabs(value) > 1e30f)
      continue;
    uint16_t terms[3];
    loomrt_split_bf16x3(p, terms);
    double products = 0;
    for (uint16_t term : terms) {
      float product = loomrt_bf16_to_f32(term) * value;
      ASSERT_EQ(double(product),
                double(loomrt_bf16_to_f32(term)) * double(value));
      products += product;
    }
    ASSERT_EQ(products, double(p) * double(value));
  }
}

TEST(SplitBf16, PairsGiveTheSameTerms) {
  // loomrt_split_bf16x3_pair (the fused attention's, one conversion for two
  // values on a GPU) against the scalar split, over f32's whole range below
  // bf16's largest finite value, subnormals and zeros included.
  std::mt19937 random(13);
  std::uniform_int_distribution<uint32_t> anyBits(0, 0x7f7effffu);
  for (int i = 0; i < 200000; ++i) {
    float a = fromBits(anyBits(random) | (i & 1) << 31);
    float b = i % 7 == 0 ? 0.0f : fromBits(anyBits(random) | (i & 2) << 30);
    uint16_t low[3], high[3];
    loomrt_split_bf16x3(a, low);
    loomrt_split_bf16x3(b, high);
    uint32_t words[3];
    loomrt_split_bf16x3_pair(a, b, words);
    for (int term = 0; term < 3; ++term)
      ASSERT_EQ(words[term], low[term] | uint32_t(high[term]) << 16)
          << std::hexfloat << a << " " << b << " term " << term;
  }
}

TEST(SplitBf16, OutsideTheRange) {
  // Just below 2^-110 the last bit is under bf16's smallest subnormal: the
  // documented bound is the real one.
  float tiny = fromBits((16u << 23) | 1u); // 2^-111 * (1 + 2^-23)
  EXPECT_NE(sumOfTerms(tiny), double(tiny));
  float infinity = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sumOfTerms(infinity), double(infinity));
  EXPECT_EQ(sumOfTerms(-infinity), -double(infinity));
  EXPECT_TRUE(std::isnan(sumOfTerms(std::numeric_limits<float>::quiet_NaN())));
}

} // namespace
