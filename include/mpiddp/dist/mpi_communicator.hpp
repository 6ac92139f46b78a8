#pragma once
// Communicator over an MPI communicator with host buffers.
#include <mpi.h>

#include <memory>

#include "mpiddp/dist/communicator.hpp"

namespace mpiddp {

class RingReduceScatter;

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `comm` so our traffic never mixes with anyone else's; errors are
  // returned (not fatal) so that they can be reported with context.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(float* data, std::size_t count) override;
  void allreduce_sum(double* data, std::size_t count) override;
  std::unique_ptr<PendingReduction> start_allreduce_sum(float* data, std::size_t count) override;
  std::int64_t allreduce_max(std::int64_t value) override;
  void allreduce_max(std::int64_t* values, std::size_t count) override;
  std::int64_t allreduce_min(std::int64_t value) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void allgather(const void* send, std::size_t bytes, void* recv) override;
  void barrier() override;
  std::unique_ptr<PendingReduction> start_reduce_scatter_sum(float* data,
                                                              const std::vector<std::size_t>& counts) override;
  void reduce_scatter_sum(float* data, const std::vector<std::size_t>& counts) override;
  void allgather_in_place(float* data, const std::vector<std::size_t>& counts) override;
  void send(const void* data, std::size_t bytes, int to) override;
  void receive(void* data, std::size_t bytes, int from) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  // ZeRO's reduce-scatters, one at a time in launch order (mpi_shard_collectives.cpp).
  std::shared_ptr<RingReduceScatter> reduce_scatters_;
  int rank_ = 0;
  int size_ = 1;
};

// Throws RuntimeError("rank R: OP failed: <MPI's message>") when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* op);

}  // namespace mpiddp
