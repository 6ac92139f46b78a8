#include "mpiddp/dist/process_group.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <new>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/host.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/dist/watchdog.hpp"

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

  host_ = host_name();
  set_up_peer_probe();
  world_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  // Last: a constructor that throws runs no destructor to take the probe back.
  Watchdog::instance().set_probe(&probe_);
}

// Every rank learns every rank's probe address. Each rank then checks that the
// next one answers; unless all do, nobody probes: a probe that cannot reach a
// live rank (a firewall, a hostname that does not resolve) would otherwise call it
// lost. Nor where a hostname resolves to loopback and the job spans hosts (the
// address would lead to the prober's own host). Costs one connection per rank.
void ProcessGroup::set_up_peer_probe() {
  const ProbeAddress mine = probe_.own_address(host_, local_size_ == world_size_);
  std::vector<ProbeAddress> table(static_cast<std::size_t>(world_size_));
  check_mpi(MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, table.data(), sizeof(mine), MPI_BYTE, MPI_COMM_WORLD),
            "MPI_Allgather(peer probe addresses)");
  probe_.set_table(std::move(table), rank_);
  int usable = probe_.enabled() && !probe_.loopback_across_hosts() &&
                       (world_size_ == 1 || probe_.answers((rank_ + 1) % world_size_, 5.0))
                   ? 1
                   : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce(peer probe)");
  if (!usable) {
    probe_.disable();
    if (rank_ == 0)
      std::fprintf(stderr,
                   "note: peer probes are off (some rank could not reach the next one at its hostname's address): a "
                   "lost rank ends the job after dist.timeout_s, without being named\n");
  }
}

ProcessGroup::~ProcessGroup() {
  Watchdog::instance().set_probe(nullptr);
  world_.reset();
  MPI_Finalize();
}

void ProcessGroup::abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Also for a failure while MPI starts: MPI_Abort only where MPI is up.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    Watchdog::instance().announce_own_error();  // its peers must not take it for a lost node
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::_Exit(exit_code);
}

void report_error(int rank, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "mpiddp: error: rank %d: %s\n", rank, printable(message).c_str());
  std::fflush(stderr);
}

std::string error_text(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return std::string("out of memory (") + e.what() +
           "): a smaller train.batch_size, data.prefetch or model, or fewer ranks per node, needs less";
  return e.what();
}

int exit_code_of(const std::exception& e) {
  if (const auto* failed = dynamic_cast<const JobFailed*>(&e)) return failed->exit_code;
  if (dynamic_cast<const InputError*>(&e)) return kExitInputError;
  return kExitRuntimeError;
}

}  // namespace mpiddp
