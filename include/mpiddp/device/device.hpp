#pragma once
// Where a model computes: the CPU (BLAS + vectorised loops) or a CUDA GPU
// (cuBLAS + kernels). A Device owns memory, copies and input staging; the math
// comes in op families (src/ops/<family>/) that each device implements. Layers,
// losses, optimizers and the DDP reducer use only these, on pointers into memory
// the same Device allocated; the training code above is the same for both.
//
// Work may run asynchronously (on the GPU, everything is ordered on one compute
// stream): only the calls documented as waiting return results to the host.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "mpiddp/config/choices.hpp"  // Precision

namespace mpiddp {

struct Batch;
class Matrix;

enum class DeviceKind { cpu, cuda, emulated };
const char* device_kind_name(DeviceKind kind);

// What a device may keep for one layer between its forward and its backward
// (the CUDA device keeps the bf16 copies of the layer's input and weights that
// the forward made, so backward does not convert them again). Owned by the layer,
// made by the op family the layer uses.
class LayerScratch {
 public:
  virtual ~LayerScratch() = default;
};

// A batch as the device sees it: features (and labels or targets) in device memory.
struct StagedBatch {
  const Matrix* features = nullptr;
  const std::int32_t* labels = nullptr;  // classification
  const float* targets = nullptr;        // regression, rows x target width
};

// A family of operations a device provides (dense products, element-wise math,
// losses, optimizer updates, convolution, pooling, normalisation). Each family is
// one folder, src/ops/<family>/: its interface, its CPU implementation and its
// CUDA one, which register themselves (op_registry.hpp); a device makes every
// family registered for its kind when it is built, so a new layer family adds a
// folder without widening Device.
class OpFamily {
 public:
  virtual ~OpFamily() = default;
};

class Device {
 public:
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  bool is_host() const { return kind() == DeviceKind::cpu; }
  virtual std::string describe() const = 0;  // "cpu" or "cuda:0 (NVIDIA H200, PCI 0000:1b:00.0)"
  virtual void set_precision(Precision p) = 0;
  virtual Precision precision() const = 0;

  // ---- memory ----
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* data) = 0;
  virtual void copy_to_host(void* host, const void* device, std::size_t bytes) = 0;  // waits
  // Returns when `host` may be freed or reused (the CUDA device waits for the copy).
  virtual void copy_to_device(void* device, const void* host, std::size_t bytes) = 0;
  virtual void copy_within(void* to, const void* from, std::size_t bytes) = 0;
  // The most device memory held at once through allocate() (summary.json's
  // peak_device_bytes); 0 on the CPU, whose memory is the process's (VmHWM).
  virtual std::uint64_t peak_allocated_bytes() const { return 0; }
  // Waits until all work issued so far is done.
  virtual void synchronize() = 0;

  // ---- input batches ----
  // Makes `batch` available to the device. `slot` (0 or 1) names the staging
  // buffers: a batch staged into one slot may be copied while the other slot's
  // batch is still being computed on. done_with_stage(slot) marks the end of its use.
  virtual StagedBatch stage(const Batch& batch, int slot) = 0;
  virtual void done_with_stage(int slot) = 0;

  // ---- operations ----
  // This device's implementation of the family `Family` (see src/ops/).
  // Throws when the device has none; callers on hot paths keep the reference.
  template <class Family>
  Family& ops() const {
    return static_cast<Family&>(find_ops(typeid(Family)));
  }

 protected:
  // Makes this device's implementation of every family registered for `kind`
  // (op_registry.hpp); called once by the device's constructor.
  void provide_registered(DeviceKind kind);
  // Destroys the families now: a device whose families hold handles on its own
  // streams (cuDNN's, on the compute stream) calls this in its destructor before
  // it destroys those streams; the base class would destroy them only afterwards.
  void release_families() { families_.clear(); }

 private:
  OpFamily& find_ops(const std::type_info& family) const;
  std::vector<std::pair<std::type_index, std::unique_ptr<OpFamily>>> families_;
};

// The process-wide CPU device (the default of layers and buffers made without
// one). Other CPU devices can be made (cpu_device.hpp); each has its own state.
Device& cpu_device();

// Tests only: a non-host device with its own memory that computes with the CPU's
// code, so the GPU path's host-side logic runs (and is tested) without a GPU.
std::unique_ptr<Device> make_emulated_device();

}  // namespace mpiddp
