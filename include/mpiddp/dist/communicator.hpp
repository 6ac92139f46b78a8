#pragma once
// Collectives on host buffers for the control traffic (step agreement, metrics,
// the initial broadcast) and the host-side gradient path; MpiCommunicator
// implements it. Device-memory gradients do not come through here: they go
// through a GradientTransport (ddp/transport.hpp), over NCCL on GPUs. Every call
// is checked and throws RuntimeError with the rank and the operation on failure.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpiddp {

// An all-reduce in flight; wait() returns when the buffer holds the result.
class PendingReduction {
 public:
  virtual ~PendingReduction() = default;
  virtual void wait() = 0;
  // Lets the transfer advance without waiting for it: MPI moves a non-blocking
  // collective only inside MPI calls, so the reducer calls this between layers.
  virtual void progress() {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place element-wise sums over all ranks.
  virtual void allreduce_sum(float* data, std::size_t count) = 0;
  virtual void allreduce_sum(double* data, std::size_t count) = 0;
  virtual std::unique_ptr<PendingReduction> start_allreduce_sum(float* data, std::size_t count) = 0;
  virtual std::int64_t allreduce_max(std::int64_t value) = 0;
  // Element-wise maximum over ranks, in place.
  virtual void allreduce_max(std::int64_t* values, std::size_t count) = 0;
  virtual std::int64_t allreduce_min(std::int64_t value) = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // recv holds size() * bytes: rank r's block at r * bytes.
  virtual void allgather(const void* send, std::size_t bytes, void* recv) = 0;
  virtual void barrier() = 0;

  // ZeRO's collectives (ddp.zero_stage = 1). `counts[r]` floats of data, laid
  // out rank after rank, belong to rank r. Reduce-scatter: SUM over ranks, and
  // afterwards this rank's piece holds the sum (in place, at its own offset);
  // the other pieces hold nothing useful. Non-blocking when started; MPI runs
  // them one at a time in start order (a ring: no temporaries of bucket size).
  virtual std::unique_ptr<PendingReduction> start_reduce_scatter_sum(float* data,
                                                                      const std::vector<std::size_t>& counts) = 0;
  virtual void reduce_scatter_sum(float* data, const std::vector<std::size_t>& counts) = 0;
  // All-gather in place: every rank's piece goes to every rank.
  virtual void allgather_in_place(float* data, const std::vector<std::size_t>& counts) = 0;
  // Point to point, for streaming optimizer shards through rank 0 (checkpoints).
  virtual void send(const void* data, std::size_t bytes, int to) = 0;
  virtual void receive(void* data, std::size_t bytes, int from) = 0;
};

}  // namespace mpiddp
