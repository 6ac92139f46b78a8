#pragma once
// The DDP gradient reducer. Gradients live in one flat buffer (see
// ParameterStore); buckets are contiguous ranges of it taken in *reverse*
// registration order (the order backward produces them), the first capped at
// ddp.first_bucket_mb and the rest at ddp.bucket_mb, like PyTorch DDP. When the
// last parameter of a bucket is ready, the bucket is scaled by
// 1/(world * micro-batches) and its SUM all-reduce starts while backward goes on.
// Buckets are launched strictly in order so that every rank issues the same
// sequence of collectives.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mpiddp/ddp/shards.hpp"
#include "mpiddp/ddp/transport.hpp"
#include "mpiddp/dist/communicator.hpp"
#include "mpiddp/nn/parameters.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp {

class Tracer;

struct Bucket {
  std::size_t begin = 0, end = 0;            // range of the flat gradient buffer
  std::vector<std::size_t> parameters;       // indices, in the order they become ready
  std::size_t ready = 0;
  std::unique_ptr<PendingReduction> pending;
  std::int64_t launch_ns = 0;                // when tracing: the launch time (Tracer::tick)
};

class GradientReducer {
 public:
  // `comm` carries the control messages (parameter check and broadcast) over MPI;
  // gradients go through `transport` (MPI on the parameters' device when null).
  GradientReducer(ParameterStore& params, Communicator& comm, std::size_t first_bucket_bytes,
                  std::size_t bucket_bytes, GradientTransport* transport = nullptr);

  // ddp.zero_stage. Stage 1 (ZeRO): each bucket is reduce-scattered onto the
  // owners of the shards it overlaps instead of all-reduced; update() then steps
  // the optimizer over this rank's shard only and all-gathers the parameters.
  // With one rank the shard is everything, which is stage 0.
  void set_zero_stage(int stage);
  int zero_stage() const { return zero_stage_; }
  const ShardLayout& shards() const { return shards_; }
  // The part of the gradient buffer that holds the global mean after finish():
  // all of it at stage 0, this rank's shard at stage 1.
  std::size_t reduced_begin() const { return shards_.begin(); }
  std::size_t reduced_end() const { return shards_.end(); }
  // One verdict for all ranks from each rank's view of its reduced part (the
  // non-finite check): at stage 1 an all-reduce of the flag, else `mine` itself.
  bool all_ranks(bool mine);
  // The optimizer step over the reduced part, then (stage 1) the all-gather of the
  // updated shards, so that every rank holds all parameters before the next forward.
  void update(Optimizer& optimizer, double lr);

  // Reduce even with one rank (to measure the transport's cost in benchmarks).
  void set_reduce_single_rank(bool on) { reduce_single_rank_ = on; }

  // Sets rank 0's parameter values on every rank (DDP's construction-time
  // broadcast) after checking that every rank built the same parameter list.
  void synchronize_parameters();
  // DDP's broadcast_buffers: rank 0's float buffers (BatchNorm running
  // statistics) to every rank, before each training forward. Off with
  // SyncBatchNorm, whose running statistics agree on every rank anyway.
  void set_broadcast_buffers(bool on) { broadcast_buffers_ = on; }
  void broadcast_buffers();

  // Call before each micro-batch's backward. `sync` false = no_sync: gradients
  // only accumulate locally. `micro_batches` is the number of micro-batches
  // whose gradients the step averages.
  void prepare(bool sync, int micro_batches);
  // Called by the model's backward hook with the parameters whose gradients are final.
  void mark_ready(const std::vector<std::size_t>& parameters);
  // Waits for every bucket; afterwards the gradient buffer holds the global mean.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  double communication_wait_s() const { return wait_s_; }

 private:
  void launch_ready_buckets();
  void trace_bucket(Tracer& tracer, std::size_t index, std::int64_t end_ns) const;

  ParameterStore& params_;
  Communicator& comm_;
  std::unique_ptr<GradientTransport> owned_transport_;
  GradientTransport* transport_;
  bool reduce_single_rank_ = false;
  bool broadcast_buffers_ = true;
  int zero_stage_ = 0;
  ShardLayout shards_;  // stage 0: one shard, everything
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // parameter index -> bucket
  std::size_t next_to_launch_ = 0;
  bool sync_ = true;
  float scale_ = 1.0f;
  double wait_s_ = 0.0;
};

// Rank 0's buffers and counters (host copies, over MPI) to every rank: at start
// and after a resume, where rank 0 read them.
void broadcast_model_buffers(ParameterStore& params, Communicator& comm);

}  // namespace mpiddp
