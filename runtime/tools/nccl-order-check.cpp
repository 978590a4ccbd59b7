//===- nccl-order-check.cpp - The emulated NCCL's order check -------------===//
//
// Two all_reduces on one communicator, issued on two streams: the emulated
// NCCL (runtime/emulation/NcclOnCpu.h, checkOrder) must end the job when
// CUDA does not order the second after the first, since real NCCL could
// pair them differently on different ranks, and must run both when it
// does. `loomrt-nccl-order-check-on-cpu [MODE]`, a process per rank under
// mpirun, prints each rank's sums (test/Integration/nccl-on-cpu.test).
// MODE, what comes between the two:
//   (none)         nothing: refused;
//   --busy         more work on the first stream, which runs the first
//                  all_reduce in the emulation but orders nothing on a
//                  GPU: refused;
//   --early-wait   the second stream waits for an event recorded on the
//                  first before the first all_reduce: refused;
//   --wait         the second stream waits for an event recorded after
//                  the first all_reduce: both run;
//   --chain        a third stream waits for that event, and the second
//                  for one recorded on the third: both run;
//   --long-chain   the same through five streams in turn: both run;
//   --synchronize  the host synchronises with the first stream: both run;
//   --synchronize-third
//                  a third stream waits for the event recorded after the
//                  first all_reduce, and the host synchronises with the
//                  third: both run;
//   --early-synchronize-third
//                  the same with the event recorded before the first
//                  all_reduce: refused.
//===----------------------------------------------------------------------===//
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "NcclOnCpu.h" // and CudaRuntimeOnCpu.h, mpi.h

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>

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
  const char *modes[] = {"",
                         "--busy",
                         "--early-wait",
                         "--wait",
                         "--chain",
                         "--long-chain",
                         "--synchronize",
                         "--synchronize-third",
                         "--early-synchronize-third"};
  std::string mode = argc > 1 ? argv[1] : "";
  if (argc > 2 ||
      std::find(std::begin(modes), std::end(modes), mode) == std::end(modes)) {
    fprintf(stderr,
            "usage: loomrt-nccl-order-check-on-cpu [--busy | --early-wait "
            "| --wait | --chain | --long-chain | --synchronize | "
            "--synchronize-third | --early-synchronize-third] (a process "
            "per rank, under mpirun)\n");
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

  // Created in this order, they are streams 0, 1, 2 and so on of
  // LOOM_CUDA_ON_CPU_STREAMS=lazy:N; the third and the links are the
  // chains' streams.
  cudaStream_t first, second, third, links[4];
  for (cudaStream_t *stream :
       {&first, &second, &third, &links[0], &links[1], &links[2], &links[3]})
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

  cudaEvent_t done, passed;
  check(cudaEventCreate(&done) == cudaSuccess, "cudaEventCreate");
  check(cudaEventCreate(&passed) == cudaSuccess, "cudaEventCreate");
  // `waiting`'s later work waits for `on`'s work so far, through `event`.
  auto follow = [](cudaStream_t waiting, cudaStream_t on, cudaEvent_t event) {
    check(cudaEventRecord(event, on) == cudaSuccess, "cudaEventRecord");
    check(cudaStreamWaitEvent(waiting, event, 0) == cudaSuccess,
          "cudaStreamWaitEvent");
  };
  const bool early =
      mode == "--early-wait" || mode == "--early-synchronize-third";
  if (early)
    check(cudaEventRecord(done, first) == cudaSuccess, "cudaEventRecord");
  check(ncclAllReduce(buffer, buffer, 4, ncclFloat32, ncclSum, comm, first) ==
            ncclSuccess,
        "the first ncclAllReduce");
  if (mode == "--early-wait")
    check(cudaStreamWaitEvent(second, done, 0) == cudaSuccess,
          "cudaStreamWaitEvent");
  float *scratch = nullptr;
  check(cudaMalloc(&scratch, sizeof values) == cudaSuccess, "cudaMalloc");
  if (mode == "--busy")
    check(cudaMemsetAsync(scratch, 0, sizeof values, first) == cudaSuccess,
          "cudaMemsetAsync");
  const bool throughThird = mode == "--chain" || mode == "--long-chain" ||
                            mode == "--synchronize-third";
  if (mode == "--wait" || throughThird)
    follow(mode == "--wait" ? second : third, first, done);
  if (mode == "--early-synchronize-third")
    check(cudaStreamWaitEvent(third, done, 0) == cudaSuccess,
          "cudaStreamWaitEvent");
  // Each link waits for the one before it, the third first.
  cudaStream_t last = third;
  if (mode == "--long-chain")
    for (cudaStream_t link : links) {
      follow(link, last, passed);
      last = link;
    }
  if (mode == "--chain" || mode == "--long-chain")
    follow(second, last, passed);
  if (mode == "--synchronize")
    check(cudaStreamSynchronize(first) == cudaSuccess, "cudaStreamSynchronize");
  if (mode == "--synchronize-third" || mode == "--early-synchronize-third")
    check(cudaStreamSynchronize(third) == cudaSuccess, "cudaStreamSynchronize");
  check(ncclAllReduce(buffer, buffer, 4, ncclFloat32, ncclSum, comm, second) ==
            ncclSuccess,
        "the second ncclAllReduce");
  check(cudaStreamSynchronize(second) == cudaSuccess, "cudaStreamSynchronize");
  check(cudaStreamSynchronize(first) == cudaSuccess, "cudaStreamSynchronize");
  for (cudaStream_t stream : {third, links[0], links[1], links[2], links[3]})
    check(cudaStreamSynchronize(stream) == cudaSuccess,
          "cudaStreamSynchronize");
  check(cudaMemcpy(values, buffer, sizeof values, cudaMemcpyDeviceToHost) ==
            cudaSuccess,
        "cudaMemcpy");
  printf("nccl-order-check: rank %d of %d: %g %g %g %g\n", rank, size,
         values[0], values[1], values[2], values[3]);
  ncclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
