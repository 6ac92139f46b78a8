#pragma once
// How the reducer moves a ready gradient bucket between ranks. `mpi` works on
// host memory (a GPU model's buckets are staged through the host); `nccl`
// (cuda/nccl_transport) reduces device memory on its own CUDA stream.
#include <cstddef>
#include <memory>
#include <string>

#include "mpiddp/device/device.hpp"
#include "mpiddp/dist/communicator.hpp"
#include "mpiddp/nn/cross_rank.hpp"

namespace mpiddp {

// A transport also carries the layers' own collectives (CrossRank: SyncBatchNorm's
// statistics, DDP's buffer broadcast) on the same device memory.
class GradientTransport : public CrossRank {
 public:
  virtual std::string name() const = 0;
  // Starts the SUM all-reduce of bucket number `bucket` (count floats at data, on
  // the model's device, already pre-divided). `last`: no bucket follows in this
  // step. Returns null when the result is already in place; otherwise the
  // result is in place (in stream order, on a GPU) after wait().
  virtual std::unique_ptr<PendingReduction> start(std::size_t bucket, float* data, std::size_t count, bool last) = 0;
};

std::unique_ptr<GradientTransport> make_mpi_transport(Communicator& comm, Device& device);

}  // namespace mpiddp
