// A stand-in for a GPU on machines without one (tests only: debug.emulate_device
// and MPIDDP_TEST_DEVICE=emulated). It is a CPU device (the same op families, so
// the same arithmetic) that keeps its own memory, reached only through explicit
// copies, and it is not a host device: everything the GPU path adds around the
// arithmetic (host/device copies of parameters and optimizer state, checkpoint
// pulls, batch staging and prefetch, host-staged MPI all-reduce) runs exactly as
// on a GPU. Fresh memory is filled with NaN, so reading what was never copied in
// shows up at once.
#include <algorithm>
#include <limits>
#include <vector>

#include "mpiddp/device/allocation_tracker.hpp"
#include "mpiddp/device/batch.hpp"
#include "mpiddp/device/cpu_device.hpp"
#include "mpiddp/device/matrix.hpp"

namespace mpiddp {
namespace {

class EmulatedDevice final : public CpuDevice {
 public:
  EmulatedDevice() {
    for (Slot& s : slots_) {
      s.features = Matrix(this);
      s.targets = Matrix(this);
    }
  }
  DeviceKind kind() const override { return DeviceKind::emulated; }
  std::string describe() const override { return "emulated GPU (CPU arithmetic, separate memory; tests only)"; }

  void* allocate(std::size_t bytes) override {
    auto* data = static_cast<float*>(CpuDevice::allocate(bytes));
    std::fill(data, data + bytes / sizeof(float), std::numeric_limits<float>::quiet_NaN());
    allocations_.added(data, bytes);
    return data;
  }
  void release(void* data) override {
    allocations_.removed(data);
    CpuDevice::release(data);
  }
  std::uint64_t peak_allocated_bytes() const override { return allocations_.peak(); }

  // Copies into the slot's own memory, like the CUDA device's pinned slots.
  StagedBatch stage(const Batch& batch, int slot) override {
    Slot& s = slots_[slot];
    s.features.resize(batch.features.rows(), batch.features.cols());
    copy_to_device(s.features.data(), batch.features.data(), batch.features.size() * sizeof(float));
    s.labels = batch.class_ids;
    s.targets.resize(batch.targets.rows(), batch.targets.cols());
    copy_to_device(s.targets.data(), batch.targets.data(), batch.targets.size() * sizeof(float));
    StagedBatch staged;
    staged.features = &s.features;
    staged.labels = s.labels.empty() ? nullptr : s.labels.data();
    staged.targets = batch.targets.size() ? s.targets.data() : nullptr;
    return staged;
  }

 private:
  AllocationTracker allocations_;
  struct Slot {
    Matrix features, targets;
    std::vector<std::int32_t> labels;
  };
  Slot slots_[2];
};

}  // namespace

std::unique_ptr<Device> make_emulated_device() { return std::make_unique<EmulatedDevice>(); }

}  // namespace mpiddp
