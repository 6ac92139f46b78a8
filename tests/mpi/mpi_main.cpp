// Catch2 main for tests that run under mpirun: MPI is initialised once around
// the whole session, and the exit code is non-zero if any rank failed. With
// MPIDDP_TEST_DEVICE=cuda the models run on the GPU; without a usable GPU the
// run is skipped with exit code 77 (ctest SKIP_RETURN_CODE) and the reason.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mpiddp/device/cuda.hpp"

int main(int argc, char** argv) {
  mpiddp::prefer_eager_cuda_module_loading();  // as mpiddp itself does (device/cuda.hpp)
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* device = std::getenv("MPIDDP_TEST_DEVICE");
  if (device && std::string(device) == "cuda") {
    const mpiddp::CudaProbe probe = mpiddp::probe_cuda();
    if (probe.count == 0) {
      if (rank == 0) std::printf("SKIPPED: no usable GPU: %s\n", probe.problem.c_str());
      MPI_Finalize();
      return 77;
    }
  }
  Catch::Session session;
  if (rank != 0) session.configData().showDurations = Catch::ShowDurations::Never;
  int failed = session.run(argc, argv);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed ? 1 : 0;
}
