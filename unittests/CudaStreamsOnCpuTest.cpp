//===- CudaStreamsOnCpuTest.cpp - The emulation's streams and events -----===//
//
// runtime/emulation/CudaRuntimeOnCpu.h runs a stream's work eagerly (as it
// is enqueued) or lazily (as late as CUDA allows), as
// LOOM_CUDA_ON_CPU_STREAMS says for each stream. The runtime's checks of
// its two streams rest on lazy streams keeping CUDA's promises and no
// more: work runs when the host or another stream waits for it, not
// before; a wait runs exactly the work before the event; copies from and
// to host memory behave as CUDA's from and to pageable memory.
// unittests.test runs this file with every stream eager, every stream
// lazy, and one of the two lazy.
//
//===----------------------------------------------------------------------===//

#include "runtime/emulation/CudaRuntimeOnCpu.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

/// Two streams made first by this thread (the runtime's compute and
/// communication streams are made in that order), and device words.
class CudaStreamsOnCpuTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking),
              cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking),
              cudaSuccess);
  }
  void SetUp() override {
    ASSERT_EQ(cudaMalloc(&words, 4 * sizeof(uint32_t)), cudaSuccess);
    uint32_t zeros[4] = {0, 0, 0, 0};
    cudaMemcpy(words, zeros, sizeof zeros, cudaMemcpyHostToDevice);
  }
  void TearDown() override {
    cudaStreamSynchronize(first);
    cudaStreamSynchronize(second);
    cudaFree(words);
  }
  /// Word i as the host reads it now (a copy on no stream).
  uint32_t word(int i) {
    uint32_t value = 0;
    cudaMemcpy(&value, words + i, sizeof value, cudaMemcpyDeviceToHost);
    return value;
  }
  void set(cudaStream_t stream, int i, uint8_t byte) {
    cudaMemsetAsync(words + i, byte, sizeof(uint32_t), stream);
  }
  void copy(cudaStream_t stream, int to, int from) {
    cudaMemcpyAsync(words + to, words + from, sizeof(uint32_t),
                    cudaMemcpyDeviceToDevice, stream);
  }

  static cudaStream_t first, second;
  uint32_t *words = nullptr;
};
cudaStream_t CudaStreamsOnCpuTest::first = nullptr;
cudaStream_t CudaStreamsOnCpuTest::second = nullptr;

TEST_F(CudaStreamsOnCpuTest, ModesFollowTheEnvironment) {
  const char *text = std::getenv("LOOM_CUDA_ON_CPU_STREAMS");
  std::string mode = text ? text : "eager";
  EXPECT_EQ(first->lazy, mode == "lazy" || mode == "lazy:0");
  EXPECT_EQ(second->lazy, mode == "lazy" || mode == "lazy:1");
}

// Without a wait, the second stream reads word 0 before the first stream
// wrote it exactly when the first stream is lazy: its work runs only when
// something waits for it, which the second stream does not.
TEST_F(CudaStreamsOnCpuTest, AnUnorderedReadSeesALazyWriteLate) {
  set(first, 0, 0x11);
  copy(second, 1, 0);
  cudaStreamSynchronize(second);
  EXPECT_EQ(word(1), first->lazy ? 0u : 0x11111111u);
  EXPECT_EQ(word(0), first->lazy ? 0u : 0x11111111u); // not waited for yet
  cudaStreamSynchronize(first);
  EXPECT_EQ(word(0), 0x11111111u);
}

// A wait for an event runs the work before the event, and only that.
TEST_F(CudaStreamsOnCpuTest, AWaitRunsTheWorkBeforeTheEvent) {
  cudaEvent_t event;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  set(first, 0, 0x22);
  cudaEventRecord(event, first);
  set(first, 2, 0x33);
  EXPECT_EQ(cudaEventQuery(event) == cudaSuccess, !first->lazy);
  cudaStreamWaitEvent(second, event, 0);
  copy(second, 1, 0);
  cudaStreamSynchronize(second);
  EXPECT_EQ(word(1), 0x22222222u);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(word(2), first->lazy ? 0u : 0x33333333u);
  cudaStreamSynchronize(first);
  EXPECT_EQ(word(2), 0x33333333u);
  cudaEventDestroy(event);
}

// An event recorded again before its first record ran is done when the
// second record has run, not the first (a wait for the first record runs
// only the work before it).
TEST_F(CudaStreamsOnCpuTest, AnEventRecordedAgainWaitsForTheLaterRecord) {
  cudaEvent_t event;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  cudaEventRecord(event, first);
  cudaStreamWaitEvent(second, event, 0);
  set(first, 0, 0x44);
  cudaEventRecord(event, first);
  set(first, 1, 0x55);
  cudaStreamSynchronize(second);
  EXPECT_EQ(cudaEventQuery(event) == cudaSuccess, !first->lazy);
  EXPECT_EQ(word(0), first->lazy ? 0u : 0x44444444u);
  cudaEventSynchronize(event);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(word(0), 0x44444444u);
  EXPECT_EQ(word(1), first->lazy ? 0u : 0x55555555u);
  cudaEventDestroy(event);
}

// A captured graph's replay: with any stream lazy, its pieces go back onto
// the streams that issued them, the fork and the join kept as waits, so
// synchronising the forked stream runs its pieces and the capturing
// stream's pieces before the fork, and no more. Otherwise the replay is
// one piece of the launching stream's work, in captured order.
TEST_F(CudaStreamsOnCpuTest, AReplayedGraphKeepsItsStreamsAndWaits) {
  cudaEvent_t fork, join;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  ASSERT_EQ(cudaStreamBeginCapture(first, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  set(first, 0, 0x66);
  cudaEventRecord(fork, first);
  cudaStreamWaitEvent(second, fork, 0);
  copy(second, 1, 0);
  cudaEventRecord(join, second);
  cudaStreamWaitEvent(first, join, 0);
  set(first, 2, 0x77);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(first, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(word(0), 0u); // a capture runs nothing
  ASSERT_EQ(cudaGraphLaunch(exec, first), cudaSuccess);
  cudaStreamSynchronize(second);
  bool split = cuda_on_cpu::anyLazyStream();
  EXPECT_EQ(word(0), split ? 0x66666666u : 0u);
  EXPECT_EQ(word(1), split ? 0x66666666u : 0u);
  EXPECT_EQ(word(2), 0u);
  cudaStreamSynchronize(first);
  EXPECT_EQ(word(1), 0x66666666u);
  EXPECT_EQ(word(2), 0x77777777u);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

// A copy from host memory reads it when called; one to host memory has
// ended when it returns (CUDA's copies from and to pageable memory).
TEST_F(CudaStreamsOnCpuTest, HostCopiesBehaveAsPageableOnes) {
  uint32_t host = 0x66666666u;
  cudaMemcpyAsync(words, &host, sizeof host, cudaMemcpyHostToDevice, first);
  host = 0x77777777u;
  uint32_t back = 0;
  cudaMemcpyAsync(&back, words, sizeof back, cudaMemcpyDeviceToHost, first);
  EXPECT_EQ(back, 0x66666666u);
}

// cudaFree waits for the device's work, as CUDA's does.
TEST_F(CudaStreamsOnCpuTest, FreeingWaitsForEveryStream) {
  void *other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, 64), cudaSuccess);
  set(first, 0, 0x12);
  set(second, 1, 0x34);
  cudaFree(other);
  EXPECT_EQ(word(0), 0x12121212u);
  EXPECT_EQ(word(1), 0x34343434u);
}

// What orders one stream's item before another stream's next work, as the
// emulated NCCL's order check asks (cuda_on_cpu::ordered): waits, through
// any number of streams, or the host's synchronisation with the item's
// stream or with one that waited for it; never the emulation's having run
// the item.
TEST_F(CudaStreamsOnCpuTest, OrderFollowsWaitsAndSynchronisations) {
  cudaStream_t made[10];
  for (cudaStream_t &stream : made)
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              cudaSuccess);
  cudaEvent_t event;
  cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  auto wait = [&](cudaStream_t stream, cudaStream_t on) {
    cudaEventRecord(event, on);
    cudaStreamWaitEvent(stream, event, 0);
  };

  // A chain of six streams from the first stream's item to the second.
  uint64_t place = first->issued;
  set(first, 0, 0x01);
  cudaStream_t last = first;
  for (int i = 0; i < 6; ++i) {
    wait(made[i], last);
    last = made[i];
  }
  EXPECT_FALSE(cuda_on_cpu::ordered(first, place, second));
  wait(second, last);
  EXPECT_TRUE(cuda_on_cpu::ordered(first, place, second));

  // Two routes through one stream, made[6]: through made[7] it reaches
  // only its wait for an event before the item, through made[8] (searched
  // after made[7]) its later wait for the item too.
  cudaStream_t target = made[9];
  cudaEventRecord(event, first);
  place = first->issued;
  set(first, 0, 0x02);
  cudaStreamWaitEvent(made[6], event, 0);
  wait(made[7], made[6]);
  wait(made[6], first);
  wait(made[8], made[6]);
  wait(target, made[7]);
  EXPECT_FALSE(cuda_on_cpu::ordered(first, place, target));
  wait(target, made[8]);
  EXPECT_TRUE(cuda_on_cpu::ordered(first, place, target));

  // The host synchronised with a stream that waited for the item (its wait
  // the last of its work when eager, an item of its own when lazy).
  place = first->issued;
  set(first, 0, 0x03);
  wait(made[0], first);
  EXPECT_FALSE(cuda_on_cpu::ordered(first, place, second));
  cudaStreamSynchronize(made[0]);
  EXPECT_TRUE(cuda_on_cpu::ordered(first, place, second));

  // ... but not when that stream waited only for work before the item.
  cudaEventRecord(event, first);
  place = first->issued;
  set(first, 0, 0x04);
  cudaStreamWaitEvent(made[1], event, 0);
  cudaStreamSynchronize(made[1]);
  EXPECT_FALSE(cuda_on_cpu::ordered(first, place, second));

  cudaEventDestroy(event);
  for (cudaStream_t stream : made) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
}

} // namespace
