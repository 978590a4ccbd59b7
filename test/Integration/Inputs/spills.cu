// A kernel held to 32 registers a thread (1024 threads, two blocks an SM)
// that keeps 64 values live: ptxas has to spill some to local memory.
__global__ void __launch_bounds__(1024, 2) spillingKernel(const float *in, float *out, int n) {
  float v[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    v[i] = in[threadIdx.x * 64 + i];
  float total = 0.0f;
  for (int round = 0; round < n; ++round) {
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      v[i] = v[i] * v[(i + 1) % 64] + float(round);
      total += v[i];
    }
  }
  out[threadIdx.x] = total;
}
