#include "mpiddp/train/batch_source.hpp"

#include <utility>

namespace mpiddp {

BatchSource::BatchSource(ShardedDataset& data, std::size_t batch_size, std::size_t loader_prefetch, Device& device,
                         bool prefetching, const Augmenter* augmenter, bool loader_thread)
    : data_(data),
      batch_size_(batch_size),
      loader_prefetch_(loader_prefetch),
      device_(device),
      prefetching_(prefetching),
      augmenter_(augmenter),
      loader_thread_(loader_thread) {}

void BatchSource::start_epoch(std::vector<std::int64_t> order, std::uint64_t epoch) {
  next_batch_.reset();
  next_staged_.reset();
  current_staged_.reset();
  next_error_ = nullptr;
  loader_.reset();  // the old loader's thread ends before the new one starts
  loader_ = std::make_unique<BatchLoader>(data_, std::move(order), batch_size_, loader_prefetch_, augmenter_, epoch,
                                          loader_thread_);
}

void BatchSource::next_step(std::vector<Batch>& micro, int count) {
  micro.clear();
  current_staged_ = std::exchange(next_staged_, std::nullopt);
  if (next_error_) std::rethrow_exception(std::exchange(next_error_, nullptr));
  if (next_batch_) {
    micro.push_back(std::move(*next_batch_));
    next_batch_.reset();
  }
  while (static_cast<int>(micro.size()) < count) {
    auto batch = loader_->next();
    if (!batch) break;
    micro.push_back(std::move(*batch));
  }
}

void BatchSource::prefetch(std::uint64_t next_micro_batch) {
  if (!prefetching_) return;
  try {
    auto batch = loader_->next();
    if (!batch) return;
    next_batch_ = std::move(*batch);
    next_staged_ = device_.stage(*next_batch_, staging_slot(next_micro_batch));
  } catch (...) {
    next_error_ = std::current_exception();
    next_batch_.reset();
    next_staged_.reset();
  }
}

}  // namespace mpiddp
