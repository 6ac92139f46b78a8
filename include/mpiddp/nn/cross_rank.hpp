#pragma once
// The collectives a layer may need on its device's memory (SyncBatchNorm's
// statistics). nn knows nothing about MPI or NCCL: the trainer hands the model
// an implementation (the gradient transport). Calls complete in the device's
// order: work issued after them sees their result.
#include <cstddef>

namespace mpiddp {

class CrossRank {
 public:
  virtual ~CrossRank() = default;
  virtual int size() const = 0;
  // recv[size() * count]: rank r's `count` floats at r * count, in rank order.
  virtual void allgather_now(const float* send, float* recv, std::size_t count) = 0;
  virtual void allreduce_sum_now(float* data, std::size_t count) = 0;
  virtual void broadcast_now(float* data, std::size_t count, int root) = 0;
};

}  // namespace mpiddp
