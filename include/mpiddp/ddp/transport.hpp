#pragma once
// How the reducer moves a ready gradient bucket between ranks. `mpi` works on
// host memory (a GPU model's buckets are staged through the host); `nccl`
// (cuda/nccl_transport) reduces device memory on its own CUDA stream.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

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

  // ZeRO stage 1 (ddp.zero_stage = 1). Starts the SUM reduce-scatter of bucket
  // number `bucket`: its floats at data, laid out rank after rank, `pieces[r]` of
  // them owned by rank r (the bucket's overlap with r's shard). Afterwards (as
  // for start) this rank's piece holds the sum in place; the rest is stale.
  virtual std::unique_ptr<PendingReduction> start_reduce_scatter(std::size_t bucket, float* data,
                                                                  const std::vector<std::size_t>& pieces,
                                                                  bool last) = 0;
  // All-gather in place of the parameter shards (`counts[r]` floats from rank r,
  // rank after rank at data), in the device's order like the layer collectives.
  virtual void allgather_shards(float* data, const std::vector<std::size_t>& counts) = 0;
};

std::unique_ptr<GradientTransport> make_mpi_transport(Communicator& comm, Device& device);

}  // namespace mpiddp
