// MpiCommunicator's ZeRO collectives: variable-count reduce-scatter and
// all-gather in place, and the point-to-point transfers of optimizer shards.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/dist/watchdog.hpp"

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

std::size_t offset_of(const std::vector<std::size_t>& counts, int rank) {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
  return offset;
}

// MPI_IN_PLACE reduce-scatter leaves this rank's result at the start of the
// buffer; it belongs at the rank's own offset (where stage 0's all-reduce puts it).
void move_to_offset(float* data, const std::vector<std::size_t>& counts, int rank) {
  const std::size_t offset = offset_of(counts, rank), n = counts[static_cast<std::size_t>(rank)];
  if (offset != 0 && n != 0) std::memmove(data + offset, data, n * sizeof(float));
}

class ReduceScatterInFlight final : public PendingReduction {
 public:
  ReduceScatterInFlight(float* data, std::vector<std::size_t> counts, std::vector<int> int_counts, int rank)
      : data_(data), counts_(std::move(counts)), int_counts_(std::move(int_counts)), rank_(rank) {}
  MPI_Request* request() { return &request_; }
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    Watchdog::Scope watch("MPI_Wait(gradient reduce-scatter)");
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait(reduce-scatter)");
    move_to_offset(data_, counts_, rank_);
  }
  ~ReduceScatterInFlight() override {
    // An abandoned reduction must not be left in flight.
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }

 private:
  float* data_;
  std::vector<std::size_t> counts_;
  std::vector<int> int_counts_;  // MPI reads them until completion
  int rank_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace

std::unique_ptr<PendingReduction> MpiCommunicator::start_reduce_scatter_sum(float* data,
                                                                             const std::vector<std::size_t>& counts) {
  std::vector<int> n = int_counts(counts, "MPI_Ireduce_scatter");
  const int* ints = n.data();  // the vector's buffer moves with it into the pending object
  auto pending = std::make_unique<ReduceScatterInFlight>(data, counts, std::move(n), rank_);
  check_mpi(MPI_Ireduce_scatter(MPI_IN_PLACE, data, ints, MPI_FLOAT, MPI_SUM, comm_, pending->request()),
            "MPI_Ireduce_scatter(gradient bucket)");
  return pending;
}

void MpiCommunicator::reduce_scatter_sum(float* data, const std::vector<std::size_t>& counts) {
  const std::vector<int> n = int_counts(counts, "MPI_Reduce_scatter");
  {
    Watchdog::Scope watch("MPI_Reduce_scatter(gradient bucket)");
    check_mpi(MPI_Reduce_scatter(MPI_IN_PLACE, data, n.data(), MPI_FLOAT, MPI_SUM, comm_),
              "MPI_Reduce_scatter(gradient bucket)");
  }
  move_to_offset(data, counts, rank_);
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
