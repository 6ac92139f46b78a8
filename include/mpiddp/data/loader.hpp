#pragma once
// Reads batches on a background thread so that the next batch is ready when
// the current step ends, or, inline, in the thread that asks for them (where no
// CPU is free to run a loader thread beside the compute: data.loader). Errors on
// the loader thread are re-thrown by next(). Training batches are augmented
// right after they are read (data.augment), on the same thread.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/dataset.hpp"

namespace mpiddp {

class BatchLoader {
 public:
  // Cuts `indices` into batches of `batch_size` (the last may be smaller). With
  // `background`, a thread keeps up to `prefetch` of them ready; without, next()
  // reads each. With `augmenter`, every sample is transformed as sample `index`
  // of `epoch` (the augmenter outlives the loader). Either way gives the same batches.
  BatchLoader(ShardedDataset& dataset, std::vector<std::int64_t> indices, std::size_t batch_size,
              std::size_t prefetch, const Augmenter* augmenter = nullptr, std::uint64_t epoch = 0,
              bool background = true);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  std::size_t batch_count() const { return batch_count_; }
  // The next batch in order, or nullopt after the last. Blocks while the loader
  // is behind (or reads the batch, inline); that time is counted in wait_s().
  std::optional<Batch> next();
  double wait_s() const { return wait_s_; }

 private:
  void run();
  Batch read_batch(std::size_t b) const;  // batch b, read and augmented

  ShardedDataset& dataset_;
  std::vector<std::int64_t> indices_;
  std::size_t batch_size_, prefetch_;
  // A full queue puts the loader to sleep until only this many batches are left,
  // then it refills it: one wake-up per prefetch - refill_at_ batches, not one per
  // batch (a wake-up is a system call, tens of microseconds on virtual machines).
  std::size_t refill_at_;
  std::size_t batch_count_;
  const Augmenter* augmenter_;
  std::uint64_t epoch_;
  std::size_t consumed_ = 0;
  std::deque<Batch> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
  double wait_s_ = 0.0;
};

}  // namespace mpiddp
