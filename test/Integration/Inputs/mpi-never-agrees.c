// A process of the job that starts MPI and never comes to the model's first
// agreement, as one that hangs or dies while starting would.
#include <mpi.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  sleep(120);
  MPI_Finalize();
  return 0;
}
