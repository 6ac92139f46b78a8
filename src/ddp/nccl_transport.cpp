// NCCL all-reduce of gradient buckets. The unique id travels from rank 0 over
// MPI; each bucket's all-reduce runs on a dedicated stream, ordered after the
// compute stream's "gradients ready" event, so it overlaps the rest of backward;
// the compute stream (the optimizer) waits on the bucket's "reduced" event.
#include <nccl.h>

#include <cstdio>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/cuda_device.hpp"
#include "cuda/teardown.hpp"
#include "cuda/vector_kernels.hpp"
#include "mpiddp/ddp/nccl.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/dist/watchdog.hpp"

namespace mpiddp {

bool built_with_nccl() { return true; }

namespace {

void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw RuntimeError(std::string("NCCL: ") + what + ": " + ncclGetErrorString(status));
}

class NcclTransport final : public GradientTransport {
 public:
  NcclTransport(Communicator& control, cuda::CudaDevice& device, bool bf16, double timeout_s)
      : device_(device), bf16_(bf16), timeout_s_(timeout_s), rank_(control.rank()), size_(control.size()) {
    // Rank 0's id and whether it got one travel together (MPI_Bcast), so a
    // failure there fails every rank instead of leaving them waiting.
    struct {
      ncclUniqueId id;
      int status;
    } root{};
    if (rank_ == 0) root.status = static_cast<int>(ncclGetUniqueId(&root.id));
    control.broadcast(&root, sizeof(root), 0);
    check_nccl(static_cast<ncclResult_t>(root.status), "ncclGetUniqueId on rank 0");
    const ncclUniqueId& id = root.id;
    cuda::check(cudaSetDevice(device.ordinal()), "cudaSetDevice");
    {
      // A peer that never arrives would block here forever: the watchdog ends the job.
      Watchdog::Scope scope("ncclCommInitRank");
      check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    }
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (communication)");
    device.set_wait_check([this](double waited) { check_health(waited); });
  }

  ~NcclTransport() override {
    device_.set_wait_check(nullptr);
    // The error path (an exception unwinds through here before its line is
    // printed): the context may hold a sticky error or a peer may be stuck, so
    // finalising could wait forever. Abort the communicator; the process is ending.
    if (cuda::unwinding()) {
      ncclCommAbort(comm_);
      return;
    }
    // The normal end, under the watchdog (run_training stops it only afterwards).
    if (device_.drain(stream_, "waiting for the last all-reduce") != cudaSuccess) {
      ncclCommAbort(comm_);
      return;
    }
    {
      Watchdog::Scope scope("ncclCommFinalize");
      ncclCommFinalize(comm_);
      ncclCommDestroy(comm_);
    }
    for (cudaEvent_t e : {layer_ready_, layer_done_})
      if (e) cudaEventDestroy(e);
    for (auto& b : buckets_) {
      if (b.ready) cudaEventDestroy(b.ready);
      if (b.done) cudaEventDestroy(b.done);
      cuda::free_device(b.bf16);
    }
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return bf16_ ? "nccl (bf16 buckets)" : "nccl"; }
  int size() const override { return size_; }

  std::unique_ptr<PendingReduction> start(std::size_t bucket, float* data, std::size_t count, bool) override {
    BucketState& b = state_of(bucket, count);
    cuda::check(cudaEventRecord(b.ready, device_.compute_stream()), "cudaEventRecord (bucket ready)");
    cuda::check(cudaStreamWaitEvent(stream_, b.ready, 0), "cudaStreamWaitEvent (bucket ready)");
    // Enqueuing does not wait for the GPU, but the first call sets up the
    // connections between the ranks on the host and waits for every peer.
    Watchdog::Scope scope("ncclAllReduce (the first one connects the ranks)");
    if (bf16_) {
      // Already divided by the world size (like PyTorch's bf16 compression hook), so the sum cannot overflow.
      cuda::to_bf16(data, b.bf16, count, stream_);
      check_nccl(ncclAllReduce(b.bf16, b.bf16, count, ncclBfloat16, ncclSum, comm_, stream_), "ncclAllReduce (bf16)");
      cuda::from_bf16(b.bf16, data, count, stream_);
    } else {
      check_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
    }
    cuda::check(cudaEventRecord(b.done, stream_), "cudaEventRecord (bucket reduced)");
    return std::make_unique<Reduced>(device_.compute_stream(), b.done);
  }

  // ZeRO stage 1: one ncclReduce per owner of a piece of the bucket, grouped so
  // that NCCL runs them as one collective. Buckets do not line up with the
  // shards, so the pieces differ in size and ncclReduceScatter (equal counts)
  // would need buckets padded to shard boundaries; the grouped reduces move the
  // same bytes without padding. Ordered on the communication stream like start().
  std::unique_ptr<PendingReduction> start_reduce_scatter(std::size_t bucket, float* data,
                                                          const std::vector<std::size_t>& pieces, bool) override {
    std::size_t count = 0;
    for (std::size_t n : pieces) count += n;
    BucketState& b = state_of(bucket, count);
    cuda::check(cudaEventRecord(b.ready, device_.compute_stream()), "cudaEventRecord (bucket ready)");
    cuda::check(cudaStreamWaitEvent(stream_, b.ready, 0), "cudaStreamWaitEvent (bucket ready)");
    Watchdog::Scope scope("ncclReduce group (the first one connects the ranks)");
    if (bf16_) cuda::to_bf16(data, b.bf16, count, stream_);
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    std::size_t offset = 0, mine_offset = 0;
    for (std::size_t r = 0; r < pieces.size(); ++r) {
      if (static_cast<int>(r) == rank_) mine_offset = offset;
      if (pieces[r] == 0) continue;
      const int root = static_cast<int>(r);
      ncclResult_t status = bf16_ ? ncclReduce(b.bf16 + offset, b.bf16 + offset, pieces[r], ncclBfloat16, ncclSum,
                                               root, comm_, stream_)
                                  : ncclReduce(data + offset, data + offset, pieces[r], ncclFloat32, ncclSum, root,
                                               comm_, stream_);
      if (status != ncclSuccess) {
        ncclGroupEnd();
        check_nccl(status, "ncclReduce (bucket piece)");
      }
      offset += pieces[r];
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd (bucket reduce-scatter)");
    const std::size_t mine = pieces[static_cast<std::size_t>(rank_)];
    if (bf16_ && mine) cuda::from_bf16(b.bf16 + mine_offset, data + mine_offset, mine, stream_);
    cuda::check(cudaEventRecord(b.done, stream_), "cudaEventRecord (bucket reduced)");
    return std::make_unique<Reduced>(device_.compute_stream(), b.done);
  }

  // The updated shards to every rank: one ncclBroadcast per owner, grouped (the
  // last shards are shorter than the others, and ncclAllGather needs equal
  // counts: it would need the flat buffer padded to world x shard).
  void allgather_shards(float* data, const std::vector<std::size_t>& counts) override {
    in_stream_order("ncclBroadcast group (parameter shards)", [&] {
      ncclResult_t status = ncclGroupStart();
      if (status != ncclSuccess) return status;
      std::size_t offset = 0;
      for (std::size_t r = 0; r < counts.size(); ++r) {
        if (counts[r] == 0) continue;
        status = ncclBroadcast(data + offset, data + offset, counts[r], ncclFloat32, static_cast<int>(r), comm_, stream_);
        if (status != ncclSuccess) {
          ncclGroupEnd();
          return status;
        }
        offset += counts[r];
      }
      return ncclGroupEnd();
    });
  }

  // The layers' collectives (SyncBatchNorm statistics, the buffer broadcast): on
  // the communication stream too, so they keep their place among the buckets'
  // all-reduces on the one communicator, with the compute stream ordered around them.
  void allgather_now(const float* send, float* recv, std::size_t count) override {
    in_stream_order("ncclAllGather", [&] { return ncclAllGather(send, recv, count, ncclFloat32, comm_, stream_); });
  }
  void allreduce_sum_now(float* data, std::size_t count) override {
    in_stream_order("ncclAllReduce (layer)",
                    [&] { return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_); });
  }
  void broadcast_now(float* data, std::size_t count, int root) override {
    in_stream_order("ncclBroadcast", [&] { return ncclBroadcast(data, data, count, ncclFloat32, root, comm_, stream_); });
  }

 private:
  template <class Enqueue>
  void in_stream_order(const char* what, Enqueue&& enqueue) {
    if (!layer_ready_) {
      cuda::check(cudaEventCreateWithFlags(&layer_ready_, cudaEventDisableTiming), "cudaEventCreate");
      cuda::check(cudaEventCreateWithFlags(&layer_done_, cudaEventDisableTiming), "cudaEventCreate");
    }
    cuda::check(cudaEventRecord(layer_ready_, device_.compute_stream()), "cudaEventRecord (layer collective)");
    cuda::check(cudaStreamWaitEvent(stream_, layer_ready_, 0), "cudaStreamWaitEvent (layer collective)");
    {
      Watchdog::Scope scope(what);
      check_nccl(enqueue(), what);
    }
    cuda::check(cudaEventRecord(layer_done_, stream_), "cudaEventRecord (layer collective done)");
    cuda::check(cudaStreamWaitEvent(device_.compute_stream(), layer_done_, 0), "cudaStreamWaitEvent (layer collective)");
  }

  struct BucketState {
    cudaEvent_t ready = nullptr, done = nullptr;
    __nv_bfloat16* bf16 = nullptr;
    std::size_t bf16_count = 0;
  };

  // wait() does not block the host: the compute stream waits for the bucket.
  class Reduced final : public PendingReduction {
   public:
    Reduced(cudaStream_t compute, cudaEvent_t done) : compute_(compute), done_(done) {}
    void wait() override { cuda::check(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent (bucket reduced)"); }

   private:
    cudaStream_t compute_;
    cudaEvent_t done_;
  };

  BucketState& state_of(std::size_t bucket, std::size_t count) {
    if (buckets_.size() <= bucket) buckets_.resize(bucket + 1);
    BucketState& b = buckets_[bucket];
    if (!b.ready) {
      cuda::check(cudaEventCreateWithFlags(&b.ready, cudaEventDisableTiming), "cudaEventCreate");
      cuda::check(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate");
    }
    if (bf16_ && b.bf16_count < count) {  // sized by the largest use of this bucket number
      if (b.bf16) {
        // Polled with the health check: a stuck all-reduce ends the job with one line.
        device_.wait_for(stream_, "waiting for an all-reduce before growing its bf16 bucket");
        cuda::free_device(b.bf16);
        b.bf16 = nullptr;
      }
      cuda::check(cudaMalloc(reinterpret_cast<void**>(&b.bf16), count * sizeof(__nv_bfloat16)), "cudaMalloc");
      b.bf16_count = count;
    }
    return b;
  }

  // Called while the host waits for the GPU: an NCCL failure, or a wait past
  // dist.timeout_s (a peer died or hangs), aborts NCCL and the whole job.
  void check_health(double waited) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comm_, &async);
    std::string problem;
    if (status != ncclSuccess) problem = std::string("ncclCommGetAsyncError failed: ") + ncclGetErrorString(status);
    else if (async != ncclSuccess && async != ncclInProgress)
      problem = std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async);
    else if (timeout_s_ > 0.0 && waited > timeout_s_)
      problem = "GPU work (NCCL all-reduce or compute) did not complete within dist.timeout_s = " +
                std::to_string(timeout_s_) + " s (another rank died, hung or is far behind)";
    if (problem.empty()) return;
    report_error(rank_, problem + "; aborting NCCL and ending the job");
    ncclCommAbort(comm_);
    ProcessGroup::abort_job(kExitRuntimeError);
  }

  cuda::CudaDevice& device_;
  bool bf16_;
  double timeout_s_;
  int rank_, size_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t layer_ready_ = nullptr, layer_done_ = nullptr;
  std::vector<BucketState> buckets_;
};

}  // namespace

std::unique_ptr<GradientTransport> make_nccl_transport(Communicator& control, Device& device, bool bf16,
                                                       double timeout_s) {
  auto* cuda_device = dynamic_cast<cuda::CudaDevice*>(&device);
  if (!cuda_device) throw InputError("dist.backend = nccl needs train.device = cuda");
  return std::make_unique<NcclTransport>(control, *cuda_device, bf16, timeout_s);
}

}  // namespace mpiddp
