#include "ring_reduce_scatter.hpp"

#include <algorithm>
#include <climits>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/dist/watchdog.hpp"

namespace mpiddp {
namespace {
constexpr int kRingTag = 7302;  // the gradient ring (the checkpoint's shards use 7301)
}

class RingReduceScatter::Handle final : public PendingReduction {
 public:
  Handle(std::shared_ptr<RingReduceScatter> ring, std::uint64_t id) : ring_(std::move(ring)), id_(id) {}
  void wait() override {
    if (ring_->done(id_)) return;
    Watchdog::Scope watch("gradient reduce-scatter (ring)");
    ring_->advance(true, id_);
  }
  void progress() override {
    if (!ring_->done(id_)) ring_->advance(false, 0);
  }
  ~Handle() override {
    // A reduction abandoned by an exception must not be left in flight, nor wait
    // forever for peers that abandoned it too: the watchdog bounds it.
    try {
      if (ring_->done(id_)) return;
      Watchdog::Scope watch("gradient reduce-scatter (ring, abandoned)");
      ring_->advance(true, id_);
    } catch (...) {
    }
  }

 private:
  std::shared_ptr<RingReduceScatter> ring_;
  std::uint64_t id_;
};

RingReduceScatter::~RingReduceScatter() {
  for (MPI_Request& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Cancel(&r), MPI_Request_free(&r);
}

std::unique_ptr<PendingReduction> RingReduceScatter::start(float* data, const std::vector<std::size_t>& counts) {
  if (static_cast<int>(counts.size()) != size_) throw RuntimeError("reduce-scatter: one count per rank expected");
  Op op{data, counts, std::vector<std::size_t>(counts.size()), next_id_++};
  std::size_t offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    op.offsets[r] = offset;
    offset += counts[r];
  }
  queue_.push_back(std::move(op));
  auto handle = std::make_unique<Handle>(shared_from_this(), queue_.back().id);
  advance(false, 0);
  return handle;
}

void RingReduceScatter::post_step() {
  const Op& op = queue_.front();
  const auto piece = [&](int shift) { return static_cast<std::size_t>(((rank_ - step_ - shift) % size_ + size_) % size_); };
  const std::size_t send = piece(1), receive = piece(2);
  const int next = (rank_ + 1) % size_, previous = (rank_ + size_ - 1) % size_;
  if (received_.size() < op.counts[receive]) received_.resize(op.counts[receive]);
  check_mpi(MPI_Irecv(received_.data(), static_cast<int>(op.counts[receive]), MPI_FLOAT, previous, kRingTag, comm_,
                      &requests_[0]),
            "MPI_Irecv(gradient reduce-scatter)");
  check_mpi(MPI_Isend(op.data + op.offsets[send], static_cast<int>(op.counts[send]), MPI_FLOAT, next, kRingTag, comm_,
                      &requests_[1]),
            "MPI_Isend(gradient reduce-scatter)");
}

void RingReduceScatter::finish_step() {
  const Op& op = queue_.front();
  const std::size_t receive = static_cast<std::size_t>(((rank_ - step_ - 2) % size_ + size_) % size_);
  float* to = op.data + op.offsets[receive];
  const float* from = received_.data();
  // The received partial sum first, then ours: at two ranks a + b either way (IEEE addition commutes).
  for (std::size_t k = 0; k < op.counts[receive]; ++k) to[k] = from[k] + to[k];
}

void RingReduceScatter::advance(bool block, std::uint64_t until) {
  while (!queue_.empty()) {
    if (step_ < 0) {
      step_ = 0;
      post_step();
    }
    int complete = 0;
    if (block) {
      check_mpi(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), "MPI_Waitall(gradient reduce-scatter)");
      complete = 1;
    } else {
      check_mpi(MPI_Testall(2, requests_, &complete, MPI_STATUSES_IGNORE), "MPI_Testall(gradient reduce-scatter)");
    }
    if (!complete) return;
    finish_step();
    if (++step_ < size_ - 1) {
      post_step();
      continue;
    }
    queue_.pop_front();
    step_ = -1;
    ++next_done_;
    if (block && done(until)) return;
  }
}

}  // namespace mpiddp
