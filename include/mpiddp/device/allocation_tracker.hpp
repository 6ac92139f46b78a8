#pragma once
// Counts a device's live allocations to report the most it held at once
// (summary.json's peak_device_bytes). Memory that libraries take on their own
// (cuBLAS workspaces, NCCL's buffers, the CUDA context) is not counted.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace mpiddp {

class AllocationTracker {
 public:
  void added(const void* data, std::size_t bytes) {
    if (!data) return;
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[data] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  void removed(const void* data) {
    if (!data) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(data);
    if (it == sizes_.end()) return;
    live_ -= it->second;
    sizes_.erase(it);
  }
  std::uint64_t peak() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const void*, std::size_t> sizes_;
  std::uint64_t live_ = 0, peak_ = 0;
};

}  // namespace mpiddp
