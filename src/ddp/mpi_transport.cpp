#include <vector>

#include "mpiddp/ddp/transport.hpp"

namespace mpiddp {
namespace {

class MpiTransport final : public GradientTransport {
 public:
  MpiTransport(Communicator& comm, Device& device) : comm_(comm), device_(device) {}
  std::string name() const override { return device_.is_host() ? "mpi" : "mpi (host-staged)"; }
  int size() const override { return comm_.size(); }

  std::unique_ptr<PendingReduction> start(std::size_t bucket, float* data, std::size_t count, bool last) override {
    if (device_.is_host()) {
      if (!last) return comm_.start_allreduce_sum(data, count);
      // Nothing is left to overlap with the last bucket: the blocking all-reduce
      // is faster than the non-blocking one (about half the time in Open MPI).
      comm_.allreduce_sum(data, count);
      return nullptr;
    }
    // Device memory: through a host copy of this bucket.
    if (staging_.size() <= bucket) staging_.resize(bucket + 1);
    std::vector<float>& host = staging_[bucket];
    host.resize(count);
    device_.copy_to_host(host.data(), data, count * sizeof(float));  // waits for the gradients
    if (last) {
      comm_.allreduce_sum(host.data(), count);
      device_.copy_to_device(data, host.data(), count * sizeof(float));
      return nullptr;
    }
    return std::make_unique<Staged>(comm_.start_allreduce_sum(host.data(), count), device_, data, host.data(), count);
  }

  std::unique_ptr<PendingReduction> start_reduce_scatter(std::size_t bucket, float* data,
                                                          const std::vector<std::size_t>& pieces, bool last) override {
    if (device_.is_host()) {
      if (!last) return comm_.start_reduce_scatter_sum(data, pieces);
      comm_.reduce_scatter_sum(data, pieces);  // nothing left to overlap (as for start)
      return nullptr;
    }
    // Device memory: the bucket goes through the host; only this rank's piece comes back.
    std::size_t count = 0, offset = 0;
    for (std::size_t r = 0; r < pieces.size(); ++r) {
      if (static_cast<int>(r) < comm_.rank()) offset += pieces[r];
      count += pieces[r];
    }
    const std::size_t mine = pieces[static_cast<std::size_t>(comm_.rank())];
    if (staging_.size() <= bucket) staging_.resize(bucket + 1);
    std::vector<float>& host = staging_[bucket];
    host.resize(count);
    device_.copy_to_host(host.data(), data, count * sizeof(float));
    if (last) {
      comm_.reduce_scatter_sum(host.data(), pieces);
      device_.copy_to_device(data + offset, host.data() + offset, mine * sizeof(float));
      return nullptr;
    }
    return std::make_unique<Staged>(comm_.start_reduce_scatter_sum(host.data(), pieces), device_, data + offset,
                                    host.data() + offset, mine);
  }

  void allgather_shards(float* data, const std::vector<std::size_t>& counts) override {
    std::size_t total = 0;
    for (std::size_t c : counts) total += c;
    through_host(data, total, [&](float* host) { comm_.allgather_in_place(host, counts); });
  }

  void allgather_now(const float* send, float* recv, std::size_t count) override {
    if (device_.is_host()) return comm_.allgather(send, count * sizeof(float), recv);
    std::vector<float> mine(count), all(count * static_cast<std::size_t>(comm_.size()));
    device_.copy_to_host(mine.data(), send, count * sizeof(float));
    comm_.allgather(mine.data(), count * sizeof(float), all.data());
    device_.copy_to_device(recv, all.data(), all.size() * sizeof(float));
  }
  void allreduce_sum_now(float* data, std::size_t count) override {
    through_host(data, count, [&](float* host) { comm_.allreduce_sum(host, count); });
  }
  void broadcast_now(float* data, std::size_t count, int root) override {
    through_host(data, count, [&](float* host) { comm_.broadcast(host, count * sizeof(float), root); });
  }

 private:
  // Runs `collective` on host memory: `data` itself on the CPU, else a copy.
  template <class Collective>
  void through_host(float* data, std::size_t count, Collective&& collective) {
    if (device_.is_host()) return collective(data);
    std::vector<float> host(count);
    device_.copy_to_host(host.data(), data, count * sizeof(float));
    collective(host.data());
    device_.copy_to_device(data, host.data(), count * sizeof(float));
  }

  // Waits for the host all-reduce, then sends the result back to the device.
  class Staged final : public PendingReduction {
   public:
    // The host buffer, not the vector holding it: staging_ may grow (and move its
    // vectors) while this bucket is in flight; their heap buffers stay put.
    Staged(std::unique_ptr<PendingReduction> mpi, Device& device, float* data, const float* host, std::size_t count)
        : mpi_(std::move(mpi)), device_(device), data_(data), host_(host), count_(count) {}
    void wait() override {
      mpi_->wait();
      device_.copy_to_device(data_, host_, count_ * sizeof(float));
    }
    void progress() override { mpi_->progress(); }

   private:
    std::unique_ptr<PendingReduction> mpi_;
    Device& device_;
    float* data_;
    const float* host_;
    std::size_t count_;
  };

  Communicator& comm_;
  Device& device_;
  std::vector<std::vector<float>> staging_;  // per bucket; kept across steps
};

}  // namespace

std::unique_ptr<GradientTransport> make_mpi_transport(Communicator& comm, Device& device) {
  return std::make_unique<MpiTransport>(comm, device);
}

}  // namespace mpiddp
