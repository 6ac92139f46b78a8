#include "mpiddp/data/loader.hpp"

#include <algorithm>
#include <chrono>

namespace mpiddp {

BatchLoader::BatchLoader(ShardedDataset& dataset, std::vector<std::int64_t> indices, std::size_t batch_size,
                         std::size_t prefetch, const Augmenter* augmenter, std::uint64_t epoch, bool background)
    : dataset_(dataset),
      indices_(std::move(indices)),
      batch_size_(batch_size),
      prefetch_(prefetch),
      refill_at_(prefetch / 2),
      batch_count_((indices_.size() + batch_size - 1) / batch_size),
      augmenter_(augmenter),
      epoch_(epoch) {
  if (background) thread_ = std::thread([this] { run(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Batch BatchLoader::read_batch(std::size_t b) const {
  const std::size_t begin = b * batch_size_;
  const std::size_t end = std::min(indices_.size(), begin + batch_size_);
  const std::vector<std::int64_t> wanted(indices_.begin() + begin, indices_.begin() + end);
  Batch batch;
  dataset_.read(wanted, batch);
  if (augmenter_) augmenter_->apply(epoch_, wanted, batch.features);
  return batch;
}

void BatchLoader::run() {
  try {
    for (std::size_t b = 0; b < batch_count_; ++b) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (ready_.size() >= prefetch_) changed_.wait(lock, [this] { return stop_ || ready_.size() <= refill_at_; });
        if (stop_) return;
      }
      Batch batch = read_batch(b);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(batch));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

std::optional<Batch> BatchLoader::next() {
  if (consumed_ == batch_count_) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  const auto count_wait = [&] {
    wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (!thread_.joinable()) {
    // Like the thread, a failed read stays failed: every later call gets the same error.
    if (error_) std::rethrow_exception(error_);
    try {
      Batch batch = read_batch(consumed_);
      ++consumed_;
      count_wait();
      return batch;
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty() || error_; });
  count_wait();
  if (ready_.empty()) std::rethrow_exception(error_);
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  ++consumed_;
  // Only this thread takes batches, so the count passes through refill_at_:
  // the loader, asleep since the queue was full, is woken there and no sooner.
  const bool wake_loader = ready_.size() == refill_at_;
  lock.unlock();
  if (wake_loader) changed_.notify_all();
  return batch;
}

}  // namespace mpiddp
