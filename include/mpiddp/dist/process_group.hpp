#pragma once
// The MPI process: initialisation, world rank and size, and the node-local rank
// derived from an MPI shared-memory split (correct under mpirun, srun, and
// mpirun inside a Slurm allocation, where SLURM_PROCID is 0 on every rank).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/dist/communicator.hpp"
#include "mpiddp/dist/peer_probe.hpp"

namespace mpiddp {

class ProcessGroup {
 public:
  ProcessGroup(int* argc, char*** argv);
  ~ProcessGroup();  // MPI_Finalize
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }

  // The world communicator of the chosen backend.
  Communicator& world() { return *world_; }

  // Ends every rank at once (used when one rank cannot continue and the others
  // may be blocked in a collective).
  [[noreturn]] static void abort_job(int exit_code);

 private:
  void set_up_peer_probe();

  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  PeerProbe probe_;
  std::unique_ptr<Communicator> world_;
};

// Runs `step` on every rank; if it throws on any rank, the lowest failing rank
// prints its one-line error and every rank throws JobFailed with the exit code of
// that error. This turns a failure seen by some ranks into a clean exit of all.
template <class Fn>
void agree_or_fail(Communicator& comm, Fn&& step);
// The same, and in the same single all-reduce the element-wise maximum over
// ranks of `flags` (stop requests, checkpoint decisions): returned on success.
template <class Fn>
std::vector<std::int64_t> agree_step(Communicator& comm, Fn&& step, const std::vector<std::int64_t>& flags);

void report_error(int rank, const std::string& message);
int exit_code_of(const std::exception& e);
// What an exception says to the user: its text, and for an allocation that
// failed where nothing named it, what ran out and what helps (never a bare
// "std::bad_alloc").
std::string error_text(const std::exception& e);

}  // namespace mpiddp

#include "mpiddp/dist/agree.inl"
