// Catch2 main for tests that run under mpirun: MPI is initialised once around
// the whole session, and the exit code is non-zero if any rank failed.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  if (rank != 0) session.configData().showDurations = Catch::ShowDurations::Never;
  int failed = session.run(argc, argv);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed ? 1 : 0;
}
