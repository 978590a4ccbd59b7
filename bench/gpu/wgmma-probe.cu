//===- wgmma-probe.cu - Which reading of wgmma's descriptors a GPU keeps --===//
//
// Part of the Loom project.
//
// The wgmma attention kernel (runtime/cuda/FusedAttention.cuh) reads its
// keys and values from shared memory through descriptors whose leading and
// stride byte offsets are our reading of the PTX ISA and CUTLASS
// (keysReading, valuesReading), and the host emulation implements the
// same reading, so a misreading would pass every test on the host. This
// program settles it on a GPU in a second: it lays out a tile with the
// kernel's own code (beginCoreMatrixWalk, storeCoreMatrixPacks) and
// multiplies integer-valued bf16 matrices (exact in f32, whatever the
// order of the additions) through the kernel's descriptors, four steps of
// 16, for both of the kernel's products (the scores: B K-major; P V: B
// MN-major, transposed), once with the kernel's offsets and once with the
// two exchanged, and prints which give the exact product. bench/gpu/run
// runs it before it checks the kernel; the exit code is 0 only when the
// kernel's reading is exact for both products. Where it is not, but one
// of the two readings is exact for each product, the probe names the
// build that uses those (LOOM_WGMMA_EXCHANGED: the kernel built with
// LOOMRT_WGMMA_KEYS_EXCHANGED or LOOMRT_WGMMA_VALUES_EXCHANGED) and writes
// that setting to --verdict's file, from which bench/gpu/run rebuilds so
// and probes again before any check. Built for
// sm_90a (nvcc) or, with runtime/tools/cuda-on-cpu.py, on the host, where
// the emulation's reading must pass and the exchanged one fail, and an
// emulated GPU that reads a layout's offsets the other way round
// (LOOM_CUDA_ON_CPU_WGMMA_EXCHANGED) must be named
// (bench-gpu-wgmma-probe.test).
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime.h>

#include "runtime/cuda/FusedAttention.cuh"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace {

constexpr int kSize = 64; // A, B and D are 64 x 64, as the kernel's tiles
/// Shared memory: a bf16 tile and as much again, where misreadings look.
constexpr int kProbeSharedBytes = 2 * kSize * kSize * 2;

uint16_t bf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return uint16_t(bits >> 16); // the probe's values are exact in bf16
}

/// D = A B for one warpgroup: A (row-major, 64 x 64) from registers in
/// mma.sync's layout, B from `tile` (row-major, 64 x 64) stored in shared
/// memory as the wgmma kernel stores keys and values, and read through
/// `reading` (for the scores B[k][n] = tile[n][k]; transposed, B[k][n] =
/// tile[k][n]), K in four steps of 16; D row-major.
template <bool TransposeB>
__global__ void probeKernel(const uint16_t *a, const uint16_t *tile,
                            loomrt::attention::CoreTileReading reading,
                            float *d) {
  LOOMRT_DYNAMIC_SHARED(shared);
  int t = int(threadIdx.x);
#if (defined(__CUDA_ARCH__) && !defined(LOOMRT_HAS_WGMMA)) ||                \
    defined(LOOM_PROBE_WITHOUT_WGMMA)
  // Built without wgmma (for sm_90, not sm_90a; the emulation plays it
  // with LOOM_PROBE_WITHOUT_WGMMA): no product, only NaN, which the host
  // reports as such.
  for (int i = t; i < kSize * kSize; i += int(blockDim.x))
    d[i] = NAN;
#else
  using namespace loomrt::attention;
  int warp = t / 32, lane = t % 32;
  // Zero beyond the tile, where a misreading may look.
  for (int i = t; i < kProbeSharedBytes / 2; i += int(blockDim.x))
    reinterpret_cast<uint16_t *>(shared)[i] = 0;
  __syncthreads();
  PackWalk walk;
  TilePacks held;
  beginCoreMatrixWalk(walk, tile, kSize, kSize);
  walk.fetch(held);
  storeCoreMatrixPacks(reinterpret_cast<uint16_t *>(shared), held);
  loomrt::fenceSharedForWgmma();
  __syncthreads();
  int group = lane / 4, pair = 2 * (lane % 4);
  auto word = [&](int row, int column) {
    const uint16_t *p = a + (16 * warp + row) * kSize + column;
    return uint32_t(p[0]) | uint32_t(p[1]) << 16;
  };
  // Every step's operand before the fence, as the kernel has its queries
  // (registers written between products would need a fence each).
  uint32_t left[kSize / 16][4];
  for (int step = 0; step < kSize / 16; ++step) {
    int k0 = 16 * step;
    left[step][0] = word(group, k0 + pair);
    left[step][1] = word(group + 8, k0 + pair);
    left[step][2] = word(group, k0 + pair + 8);
    left[step][3] = word(group + 8, k0 + pair + 8);
  }
  float out[32] = {};
  loomrt::wgmmaFence();
  for (int step = 0; step < kSize / 16; ++step)
    loomrt::wgmmaBf16<TransposeB>(
        out, left[step],
        coreTileDescriptor(reinterpret_cast<const uint16_t *>(shared), reading,
                           step),
        step > 0);
  loomrt::wgmmaCommit();
  loomrt::wgmmaWaitAll();
  for (int block = 0; block < kSize / 8; ++block)
    for (int half = 0; half < 2; ++half) {
      int row = 16 * warp + group + 8 * half, column = 8 * block + pair;
      d[row * kSize + column] = out[4 * block + 2 * half];
      d[row * kSize + column + 1] = out[4 * block + 2 * half + 1];
    }
#endif
}

bool check(cudaError_t status, const char *what) {
  if (status == cudaSuccess)
    return true;
  std::printf("wgmma probe: %s: %s\n", what, cudaGetErrorString(status));
  return false;
}

/// probe()'s result when the kernel made no product at all (every element
/// NaN): the probe was built without wgmma.
constexpr long kBuiltWithoutWgmma = -2;

/// Runs one reading; returns the number of wrong elements, -1 when the run
/// failed, or kBuiltWithoutWgmma.
template <bool TransposeB>
long probe(const std::vector<uint16_t> &a, const std::vector<uint16_t> &tile,
           const std::vector<float> &expected,
           loomrt::attention::CoreTileReading reading) {
  uint16_t *deviceA = nullptr, *deviceTile = nullptr;
  float *deviceD = nullptr;
  size_t elements = size_t(kSize) * kSize;
  if (!check(cudaMalloc(&deviceA, elements * 2), "cudaMalloc") ||
      !check(cudaMalloc(&deviceTile, elements * 2), "cudaMalloc") ||
      !check(cudaMalloc(&deviceD, elements * 4), "cudaMalloc") ||
      !check(
          cudaMemcpy(deviceA, a.data(), elements * 2, cudaMemcpyHostToDevice),
          "copy") ||
      !check(cudaMemcpy(deviceTile, tile.data(), elements * 2,
                        cudaMemcpyHostToDevice),
             "copy"))
    return -1;
  probeKernel<TransposeB>
      <<<1, loomrt::attention::kAttentionThreads, kProbeSharedBytes>>>(
          deviceA, deviceTile, reading, deviceD);
  std::vector<float> d(elements);
  if (!check(cudaGetLastError(), "launch") ||
      !check(
          cudaMemcpy(d.data(), deviceD, elements * 4, cudaMemcpyDeviceToHost),
          "the product"))
    return -1;
  cudaFree(deviceA);
  cudaFree(deviceTile);
  cudaFree(deviceD);
  long wrong = 0, nans = 0;
  for (size_t i = 0; i < elements; ++i) {
    wrong += d[i] != expected[i];
    nans += std::isnan(d[i]);
  }
  return size_t(nans) == elements ? kBuiltWithoutWgmma : wrong;
}

/// bench/gpu/CMakeLists.txt's LOOM_WGMMA_EXCHANGED for the products whose
/// offsets are exchanged.
const char *exchangedSetting(bool keys, bool values) {
  return keys ? (values ? "keys,values" : "keys")
              : (values ? "values" : "none");
}

/// What one product's two readings gave.
struct Readings {
  bool kernels = false, exchanged = false, withoutWgmma = false;
};

/// Probes one product with the kernel's reading and with its offsets
/// exchanged.
template <bool TransposeB>
Readings probeProduct(const char *name,
                      loomrt::attention::CoreTileReading kernels) {
  std::vector<uint16_t> a(kSize * kSize), tile(kSize * kSize);
  std::vector<float> expected(kSize * kSize, 0.0f);
  // Small integers, different in every row and column of both operands, so
  // that any element or core matrix read from the wrong place shows.
  for (int r = 0; r < kSize; ++r)
    for (int c = 0; c < kSize; ++c) {
      a[r * kSize + c] = bf16Bits(float((r * 7 + c * 3) % 11 - 5));
      tile[r * kSize + c] = bf16Bits(float((r * 5 + c * 13 + r * c) % 9 - 4));
    }
  auto value = [](uint16_t bits) {
    uint32_t widened = uint32_t(bits) << 16;
    float v;
    std::memcpy(&v, &widened, sizeof v);
    return v;
  };
  for (int m = 0; m < kSize; ++m)
    for (int n = 0; n < kSize; ++n)
      for (int k = 0; k < kSize; ++k)
        expected[m * kSize + n] +=
            value(a[m * kSize + k]) *
            value(tile[TransposeB ? k * kSize + n : n * kSize + k]);
  Readings readings;
  for (int exchanged = 0; exchanged < 2; ++exchanged) {
    loomrt::attention::CoreTileReading reading = kernels;
    if (exchanged)
      std::swap(reading.leadingBytes, reading.strideBytes);
    long wrong = probe<TransposeB>(a, tile, expected, reading);
    std::printf("wgmma probe: %s, leading byte offset %u, stride byte offset "
                "%u (%s): ",
                name, reading.leadingBytes, reading.strideBytes,
                exchanged ? "exchanged" : "the kernel's");
    if (wrong == kBuiltWithoutWgmma)
      std::printf("no product: the probe was built without wgmma\n");
    else if (wrong < 0)
      std::printf("the run failed\n");
    else if (wrong > 0)
      std::printf("%ld of %d elements wrong\n", wrong, kSize * kSize);
    else
      std::printf("exact\n");
    (exchanged ? readings.exchanged : readings.kernels) = wrong == 0;
    readings.withoutWgmma |= wrong == kBuiltWithoutWgmma;
  }
  return readings;
}

} // namespace

/// wgmma-probe [--verdict FILE]: with --verdict, the rebuild's setting
/// (LOOM_WGMMA_EXCHANGED) also goes to FILE when the probe advises one.
int main(int argc, char **argv) {
  const char *verdictPath = nullptr;
  if (argc == 3 && !std::strcmp(argv[1], "--verdict")) {
    verdictPath = argv[2];
  } else if (argc != 1) {
    std::printf("usage: wgmma-probe [--verdict FILE]\n");
    return 2;
  }
  int devices = 0, device = 0, major = 0, minor = 0;
  if (!check(cudaGetDeviceCount(&devices), "no GPU that CUDA can use") ||
      !check(cudaGetDevice(&device), "no GPU that CUDA can use") ||
      !check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                    device),
             "compute capability") ||
      !check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                    device),
             "compute capability"))
    return 2;
  if (major != 9) {
    std::printf("wgmma probe: needs a GPU of compute capability 9.x; this one "
                "is %d.%d\n",
                major, minor);
    return 2;
  }
  std::printf("wgmma probe: built with LOOM_WGMMA_EXCHANGED=%s\n",
              exchangedSetting(loomrt::attention::kKeysOffsetsExchanged,
                               loomrt::attention::kValuesOffsetsExchanged));
  Readings scores = probeProduct<false>("scores (B K-major)",
                                        loomrt::attention::keysReading());
  Readings values = probeProduct<true>("P V (B MN-major, tnspB)",
                                       loomrt::attention::valuesReading());
  if (scores.withoutWgmma || values.withoutWgmma) {
    // Nothing was multiplied, so nothing is known of the reading.
    std::printf("wgmma probe: built without wgmma (for sm_90, not sm_90a): "
                "build it for sm_90a (LOOM_CUDA_ARCH=sm_90a bench/gpu/run)\n");
    return 2;
  }
  bool exact = scores.kernels && values.kernels;
  if (exact) {
    std::printf("wgmma probe: the kernel's offsets give exact products on "
                "this device\n");
    return 0;
  }
  std::printf("wgmma probe: the kernel's offsets do NOT give exact products "
              "on this device (exchanged, they are exact for the scores: "
              "%s; for P V: %s): fix FusedAttention.cuh's descriptors and "
              "the emulation's reading of them (where neither reading is "
              "exact, suspect the registers' layouts of A and D)\n",
              scores.exchanged ? "yes" : "no", values.exchanged ? "yes" : "no");
  // Where one of the two readings is exact for each product, the build
  // that uses it (bench/gpu/run rebuilds so and probes again).
  if ((scores.kernels || scores.exchanged) &&
      (values.kernels || values.exchanged)) {
    bool keysExchanged =
             scores.kernels == loomrt::attention::kKeysOffsetsExchanged,
         valuesExchanged =
             values.kernels == loomrt::attention::kValuesOffsetsExchanged;
    const char *setting = exchangedSetting(keysExchanged, valuesExchanged);
    std::printf("wgmma probe: rebuild with LOOM_WGMMA_EXCHANGED=%s\n", setting);
    // For bench/gpu/run, which rebuilds with exactly this.
    if (verdictPath) {
      FILE *verdict = std::fopen(verdictPath, "w");
      if (!verdict || std::fprintf(verdict, "%s\n", setting) < 0 ||
          std::fclose(verdict) != 0) {
        std::printf("wgmma probe: cannot write %s\n", verdictPath);
        return 2;
      }
    }
  }
  return 1;
}
