//===- CudaOnCpuTest.cpp - The CUDA emulation's own promises -------------===//
//
// The kernels' tests rest on two properties of runtime/emulation/
// CudaOnCpu.h that no kernel result shows by itself: that
// LOOM_CUDA_ON_CPU_ORDER=reverse really runs blocks and threads in the
// other order (else the tests that compare the two orders compare a run
// with itself), and, in the sanitized build (LoomKernelTestsSanitized),
// that a kernel's read past its buffer stops the run (else the sanitized
// tests cannot fail). unittests.test runs this file in both orders.
//
//===----------------------------------------------------------------------===//

#include "runtime/emulation/CudaOnCpu.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace {

using Visit = std::pair<unsigned, unsigned>; // block, thread

std::vector<Visit> beforeBarrier, afterBarrier, withoutBarrier;

void kernelWithBarrier() {
  beforeBarrier.push_back({blockIdx.x, threadIdx.x});
  __syncthreads();
  afterBarrier.push_back({blockIdx.x, threadIdx.x});
}

void kernelWithoutBarrier() {
  withoutBarrier.push_back({blockIdx.x, threadIdx.x});
}

/// Blocks in their order, each block's threads in theirs.
std::vector<Visit> visits(unsigned blocks, unsigned threads, bool reverse) {
  std::vector<Visit> order;
  for (unsigned i = 0; i < blocks; ++i)
    for (unsigned j = 0; j < threads; ++j)
      order.push_back(
          {reverse ? blocks - 1 - i : i, reverse ? threads - 1 - j : j});
  return order;
}

TEST(CudaOnCpuTest, OrderFollowsTheEnvironment) {
  const char *order = std::getenv("LOOM_CUDA_ON_CPU_ORDER");
  bool reverse = order && !std::strcmp(order, "reverse");
  beforeBarrier.clear();
  afterBarrier.clear();
  withoutBarrier.clear();
  cuda_on_cpu::launch({3, 1, 1}, 64, 0, [] { kernelWithBarrier(); });
  cuda_on_cpu::launch({3, 1, 1}, 64, 0, [] { kernelWithoutBarrier(); });
  EXPECT_EQ(beforeBarrier, visits(3, 64, reverse));
  EXPECT_EQ(afterBarrier, visits(3, 64, reverse));
  EXPECT_EQ(withoutBarrier, visits(3, 64, reverse));
}

#if defined(__SANITIZE_ADDRESS__)
/// Thread t reads element t + 1 of 32: thread 31 reads past the end.
void readPastTheEnd() {
  std::vector<float> values(32, 1.0f), out(32);
  const float *in = values.data();
  float *result = out.data();
  cuda_on_cpu::launch({1, 1, 1}, 32, 0,
                      [=] { result[threadIdx.x] = in[threadIdx.x + 1]; });
}

TEST(CudaOnCpuTest, AddressSanitizerStopsAReadPastABuffer) {
  EXPECT_DEATH(readPastTheEnd(), "heap-buffer-overflow");
}
#endif

} // namespace
