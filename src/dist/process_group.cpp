#include "mpiddp/dist/process_group.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"

namespace mpiddp {

ProcessGroup::ProcessGroup(int* argc, char*** argv) {
  int provided = 0;
  // Only the main thread calls MPI; the loader thread does HDF5 I/O only.
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size");

  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type(shared)");
  check_mpi(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank(node)");
  check_mpi(MPI_Comm_size(node, &local_size_), "MPI_Comm_size(node)");
  MPI_Comm_free(&node);

  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  host_ = name;
  world_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

ProcessGroup::~ProcessGroup() {
  world_.reset();
  MPI_Finalize();
}

void ProcessGroup::abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void report_error(int rank, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "mpiddp: error: rank %d: %s\n", rank, printable(message).c_str());
  std::fflush(stderr);
}

int exit_code_of(const std::exception& e) {
  if (const auto* failed = dynamic_cast<const JobFailed*>(&e)) return failed->exit_code;
  if (dynamic_cast<const InputError*>(&e)) return kExitInputError;
  return kExitRuntimeError;
}

}  // namespace mpiddp
