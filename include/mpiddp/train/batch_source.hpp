#pragma once
// Where the trainer's batches come from: the epoch's loader, and on a GPU the
// next step's first batch, read and copied to the device while the current step
// computes. It owns the two staging slots' rule (staging_slot) together with
// forward_backward, and keeps a read error of the prefetch for the next step,
// whose agreement then ends every rank with that error.
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "mpiddp/data/loader.hpp"
#include "mpiddp/device/device.hpp"

namespace mpiddp {

// Batches alternate between the two staging slots by micro-batch number (also
// across steps), so the next batch's copy need not wait for the current one.
inline int staging_slot(std::uint64_t micro_batch_number) { return static_cast<int>(micro_batch_number % 2); }

class BatchSource {
 public:
  // `prefetching`: stage the next step's first batch during the current step.
  // `augmenter` (null: none) transforms every training sample as it is read;
  // `loader_thread`: read on a loader thread, else inline (data.loader).
  BatchSource(ShardedDataset& data, std::size_t batch_size, std::size_t loader_prefetch, Device& device,
              bool prefetching, const Augmenter* augmenter, bool loader_thread);

  // This rank's indices of epoch `epoch` still to be read, in order.
  void start_epoch(std::vector<std::int64_t> order, std::uint64_t epoch);
  // The step's micro-batches (up to `count`; fewer at the end of the epoch),
  // beginning with the prefetched one. Rethrows a prefetch's read error.
  void next_step(std::vector<Batch>& micro, int count);
  // The step's first micro-batch, already on the device; null: stage it now.
  const StagedBatch* staged_first() const { return current_staged_ ? &*current_staged_ : nullptr; }
  // While the device runs the current step: read the next step's first batch and
  // start its copy into the slot of micro-batch `next_micro_batch`.
  void prefetch(std::uint64_t next_micro_batch);
  // Seconds the loader kept the trainer waiting this epoch.
  double wait_s() const { return loader_ ? loader_->wait_s() : 0.0; }

 private:
  ShardedDataset& data_;
  std::size_t batch_size_, loader_prefetch_;
  Device& device_;
  bool prefetching_;
  const Augmenter* augmenter_;
  bool loader_thread_;
  std::unique_ptr<BatchLoader> loader_;
  std::optional<Batch> next_batch_;
  std::optional<StagedBatch> next_staged_, current_staged_;
  std::exception_ptr next_error_;
};

}  // namespace mpiddp
