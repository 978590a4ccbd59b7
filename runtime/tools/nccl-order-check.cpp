//===- nccl-order-check.cpp - The emulated NCCL's order check -------------===//
//
// Two all_reduces on one communicator, issued on two streams: the emulated
// NCCL (runtime/emulation/NcclOnCpu.h, checkOrder) must end the job when
// nothing orders the second after the first, since real NCCL could pair
// them differently on different ranks, and must run both when the second
// stream waits for an event recorded after the first (--wait) or the host
// has synchronised with the first stream (--synchronize). Run a process
// per rank under mpirun: `loomrt-nccl-order-check-on-cpu [--wait |
// --synchronize]` prints each rank's sums
// (test/Integration/nccl-on-cpu.test).
//===----------------------------------------------------------------------===//
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "NcclOnCpu.h" // and CudaRuntimeOnCpu.h, mpi.h

#include <cstdio>
#include <cstring>

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "nccl-order-check: %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *order = argc > 1 ? argv[1] : "";
  bool wait = std::strcmp(order, "--wait") == 0,
       synchronize = std::strcmp(order, "--synchronize") == 0;
  if (argc > 2 || (*order && !wait && !synchronize)) {
    fprintf(stderr, "usage: loomrt-nccl-order-check-on-cpu [--wait | "
                    "--synchronize] (a process per rank, under mpirun)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  ncclUniqueId id;
  if (rank == 0)
    check(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  check(ncclCommInitRankConfig(&comm, size, id, rank, &config) == ncclSuccess,
        "ncclCommInitRankConfig");

  // Created in this order, they are streams 0 and 1 of
  // LOOM_CUDA_ON_CPU_STREAMS=lazy:N.
  cudaStream_t first, second;
  for (cudaStream_t *stream : {&first, &second})
    check(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking) ==
              cudaSuccess,
          "cudaStreamCreateWithFlags");
  float values[4];
  for (float &value : values)
    value = float(rank + 1);
  float *buffer = nullptr;
  check(cudaMalloc(&buffer, sizeof values) == cudaSuccess, "cudaMalloc");
  check(cudaMemcpy(buffer, values, sizeof values, cudaMemcpyHostToDevice) ==
            cudaSuccess,
        "cudaMemcpy");

  check(ncclAllReduce(buffer, buffer, 4, ncclFloat32, ncclSum, comm, first) ==
            ncclSuccess,
        "the first ncclAllReduce");
  if (wait) {
    cudaEvent_t done;
    check(cudaEventCreate(&done) == cudaSuccess, "cudaEventCreate");
    check(cudaEventRecord(done, first) == cudaSuccess, "cudaEventRecord");
    check(cudaStreamWaitEvent(second, done, 0) == cudaSuccess,
          "cudaStreamWaitEvent");
  }
  if (synchronize)
    check(cudaStreamSynchronize(first) == cudaSuccess, "cudaStreamSynchronize");
  check(ncclAllReduce(buffer, buffer, 4, ncclFloat32, ncclSum, comm, second) ==
            ncclSuccess,
        "the second ncclAllReduce");
  check(cudaStreamSynchronize(second) == cudaSuccess, "cudaStreamSynchronize");
  check(cudaStreamSynchronize(first) == cudaSuccess, "cudaStreamSynchronize");
  check(cudaMemcpy(values, buffer, sizeof values, cudaMemcpyDeviceToHost) ==
            cudaSuccess,
        "cudaMemcpy");
  printf("nccl-order-check: rank %d of %d: %g %g %g %g\n", rank, size,
         values[0], values[1], values[2], values[3]);
  ncclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
