// MpiCommunicator's ZeRO collectives: the reduce-scatter of gradient buckets
// (a ring of our own, ring_reduce_scatter.cpp), the all-gather of parameter
// shards in place, and the point-to-point transfers of optimizer shards.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/dist/watchdog.hpp"
#include "ring_reduce_scatter.hpp"

namespace mpiddp {
namespace {

constexpr int kShardTag = 7301;  // point-to-point shard traffic (checkpoints)
constexpr std::size_t kMaxSlice = std::size_t{1} << 30;

// MPI counts are int: a piece of one rank over INT_MAX floats (8 GiB) is refused.
std::vector<int> int_counts(const std::vector<std::size_t>& counts, const char* op) {
  std::vector<int> out;
  out.reserve(counts.size());
  for (std::size_t c : counts) {
    if (c > static_cast<std::size_t>(INT_MAX))
      throw RuntimeError(std::string(op) + ": one rank's piece is over 2^31 floats (lower ddp.bucket_mb)");
    out.push_back(static_cast<int>(c));
  }
  return out;
}

}  // namespace

std::unique_ptr<PendingReduction> MpiCommunicator::start_reduce_scatter_sum(float* data,
                                                                             const std::vector<std::size_t>& counts) {
  int_counts(counts, "reduce-scatter");  // the same limit as MPI's counts
  if (!reduce_scatters_) reduce_scatters_ = std::make_shared<RingReduceScatter>(comm_, rank_, size_);
  return reduce_scatters_->start(data, counts);
}

void MpiCommunicator::reduce_scatter_sum(float* data, const std::vector<std::size_t>& counts) {
  start_reduce_scatter_sum(data, counts)->wait();
}

void MpiCommunicator::allgather_in_place(float* data, const std::vector<std::size_t>& counts) {
  const std::vector<int> n = int_counts(counts, "MPI_Allgatherv");
  std::vector<int> displacements(n.size());
  std::size_t offset = 0;
  for (std::size_t r = 0; r < n.size(); ++r) {
    if (offset > static_cast<std::size_t>(INT_MAX))
      throw RuntimeError("MPI_Allgatherv: parameters over 2^31 floats are not supported with ddp.zero_stage = 1");
    displacements[r] = static_cast<int>(offset);
    offset += counts[r];
  }
  Watchdog::Scope watch("MPI_Allgatherv(parameter shards)");
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, n.data(), displacements.data(), MPI_FLOAT, comm_),
            "MPI_Allgatherv(parameter shards)");
}

void MpiCommunicator::send(const void* data, std::size_t bytes, int to) {
  const auto* p = static_cast<const char*>(data);
  for (std::size_t done = 0; done < bytes || done == 0; done += kMaxSlice) {
    const int n = static_cast<int>(std::min(kMaxSlice, bytes - done));
    Watchdog::Scope watch("MPI_Send(optimizer shard)");
    check_mpi(MPI_Send(p + done, n, MPI_BYTE, to, kShardTag, comm_), "MPI_Send(optimizer shard)");
    if (bytes == 0) break;
  }
}

void MpiCommunicator::receive(void* data, std::size_t bytes, int from) {
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes || done == 0; done += kMaxSlice) {
    const int n = static_cast<int>(std::min(kMaxSlice, bytes - done));
    Watchdog::Scope watch("MPI_Recv(optimizer shard)");
    check_mpi(MPI_Recv(p + done, n, MPI_BYTE, from, kShardTag, comm_, MPI_STATUS_IGNORE), "MPI_Recv(optimizer shard)");
    if (bytes == 0) break;
  }
}

}  // namespace mpiddp
