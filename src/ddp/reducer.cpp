#include "mpiddp/ddp/reducer.hpp"

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/trace.hpp"
#include "ops/pointwise/pointwise_ops.hpp"

namespace mpiddp {

GradientReducer::GradientReducer(ParameterStore& params, Communicator& comm, std::size_t first_bucket_bytes,
                                 std::size_t bucket_bytes, GradientTransport* transport)
    : params_(params),
      comm_(comm),
      owned_transport_(transport ? nullptr : make_mpi_transport(comm, params.device())),
      transport_(transport ? transport : owned_transport_.get()),
      shards_(ShardLayout::of(params.total(), 1, 0)),
      bucket_of_(params.list().size()) {
  const auto& list = params.list();
  std::size_t cap = first_bucket_bytes;
  Bucket current;
  std::size_t bytes = 0;
  // Reverse registration order = the flat buffer walked backwards, so a bucket
  // is always one contiguous range ending where the previous one began.
  for (std::size_t i = list.size(); i-- > 0;) {
    if (current.parameters.empty()) current.end = list[i].offset + list[i].count;
    current.parameters.push_back(i);
    current.begin = list[i].offset;
    bucket_of_[i] = buckets_.size();
    bytes += list[i].count * sizeof(float);
    if (bytes >= cap) {
      buckets_.push_back(std::move(current));
      current = Bucket();
      bytes = 0;
      cap = bucket_bytes;
    }
  }
  if (!current.parameters.empty()) buckets_.push_back(std::move(current));
}

void GradientReducer::set_zero_stage(int stage) {
  if (stage < 0 || stage > 1) throw InputError("ddp.zero_stage must be 0 or 1, got " + std::to_string(stage));
  zero_stage_ = stage;
  const bool sharded = stage == 1 && transport_->size() > 1;
  shards_ = sharded ? ShardLayout::of(params_.total(), transport_->size(), comm_.rank())
                    : ShardLayout::of(params_.total(), 1, 0);
}

bool GradientReducer::all_ranks(bool mine) {
  if (shards_.world == 1) return mine;
  return comm_.allreduce_min(mine ? 1 : 0) == 1;
}

void GradientReducer::update(Optimizer& optimizer, double lr) {
  const std::size_t begin = shards_.begin();
  {
    TraceSpan span("optimizer");
    optimizer.step(params_.values() + begin, params_.grads() + begin, shards_.count(), lr);
  }
  if (shards_.world == 1) return;
  TraceSpan span("parameter all-gather");
  transport_->allgather_shards(params_.values(), shards_.counts());
}

void GradientReducer::synchronize_parameters() {
  // Compare every rank's parameter list with rank 0's before touching values.
  std::string mine = params_.signature();
  std::uint64_t length = mine.size();
  comm_.broadcast(&length, sizeof(length), 0);
  std::string root(length, '\0');
  if (comm_.rank() == 0) root = mine;
  comm_.broadcast(root.data(), root.size(), 0);
  const std::int64_t mismatches = comm_.allreduce_max(root == mine ? 0 : 1);
  if (mismatches != 0)
    throw RuntimeError("model parameters differ across ranks (rank " + std::to_string(comm_.rank()) +
                       (root == mine ? " matches rank 0" : " differs from rank 0") + ")");
  params_.pull_values();
  comm_.broadcast(params_.host_values(), params_.total() * sizeof(float), 0);
  params_.push_values();
  broadcast_model_buffers(params_, comm_);
}

void broadcast_model_buffers(ParameterStore& params, Communicator& comm) {
  if (params.buffer_total() > 0) {
    params.pull_buffers();
    comm.broadcast(params.host_buffers(), params.buffer_total() * sizeof(float), 0);
    params.push_buffers();
  }
  for (std::size_t i = 0; i < params.counter_names().size(); ++i)
    comm.broadcast(&params.counter(i), sizeof(std::int64_t), 0);
}

void GradientReducer::broadcast_buffers() {
  if (!broadcast_buffers_ || transport_->size() < 2 || params_.buffer_total() == 0) return;
  transport_->broadcast_now(params_.buffers(), params_.buffer_total(), 0);
}

void GradientReducer::prepare(bool sync, int micro_batches) {
  sync_ = sync;
  scale_ = 1.0f / static_cast<float>(transport_->size() * micro_batches);
  for (auto& b : buckets_) b.ready = 0;
  next_to_launch_ = 0;
}

void GradientReducer::mark_ready(const std::vector<std::size_t>& parameters) {
  if (!sync_) return;
  for (std::size_t p : parameters) ++buckets_[bucket_of_[p]].ready;
  launch_ready_buckets();
  for (std::size_t i = 0; i < next_to_launch_; ++i)
    if (buckets_[i].pending) buckets_[i].pending->progress();
}

void GradientReducer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size()) {
    Bucket& b = buckets_[next_to_launch_];
    if (b.ready < b.parameters.size()) return;
    float* data = params_.grads() + b.begin;
    const std::size_t count = b.end - b.begin;
    // Pre-divide, then SUM: the result is the mean over ranks and micro-batches.
    if (scale_ != 1.0f) params_.device().ops<PointwiseOps>().scale(data, count, scale_);
    const std::size_t index = next_to_launch_++;
    if (transport_->size() == 1 && !reduce_single_rank_) continue;
    const bool last = next_to_launch_ == buckets_.size();
    const auto start = std::chrono::steady_clock::now();
    Tracer* tracer = active_tracer();
    if (tracer) b.launch_ns = tracer->tick();
    b.pending = shards_.world > 1 ? transport_->start_reduce_scatter(index, data, shards_.pieces(b.begin, b.end), last)
                                  : transport_->start(index, data, count, last);
    // A blocking transfer returns no pending reduction: it completed just now.
    if (tracer && !b.pending) trace_bucket(*tracer, index, tracer->tick());
    // A blocking transfer (the last bucket over MPI) is time spent waiting.
    if (last) wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
}

void GradientReducer::trace_bucket(Tracer& tracer, std::size_t index, std::int64_t end_ns) const {
  const int i = static_cast<int>(index);
  tracer.complete("allreduce bucket", i, kTraceBucketTrack + i, buckets_[index].launch_ns, end_ns);
}

void GradientReducer::finish() {
  if (!sync_) return;
  if (next_to_launch_ != buckets_.size())
    throw RuntimeError("gradient reducer: backward finished with " +
                       std::to_string(buckets_.size() - next_to_launch_) + " bucket(s) never ready");
  const auto start = std::chrono::steady_clock::now();
  TraceSpan span("gradient wait");
  Tracer* tracer = active_tracer();
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (!b.pending) continue;
    b.pending->wait();
    b.pending.reset();
    // Completion is when this wait observes it: the buckets are waited for in
    // launch order, so a bucket done early shows as done when its turn comes.
    if (tracer) trace_bucket(*tracer, i, tracer->tick());
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mpiddp
