// The CPU device: memory is host memory, copies are memmove, and input batches
// are used where the loader left them.
#include "mpiddp/device/cpu_device.hpp"

#include <cstring>
#include <stdexcept>

#include "mpiddp/common/error.hpp"
#include "mpiddp/device/batch.hpp"

namespace mpiddp {

// The emulated device derives from this one and computes with the same families.
CpuDevice::CpuDevice() { provide_registered(DeviceKind::cpu); }

void CpuDevice::set_precision(Precision p) {
  // setup_compute refuses other precisions on the CPU (config/rules.cpp) before this.
  if (p != Precision::fp32) throw std::logic_error(std::string("cpu device asked for ") + name_of(p));
}

void* CpuDevice::allocate(std::size_t bytes) { return ::operator new(bytes); }
void CpuDevice::release(void* data) { ::operator delete(data); }
void CpuDevice::copy_to_host(void* host, const void* device, std::size_t bytes) { copy_within(host, device, bytes); }
void CpuDevice::copy_to_device(void* device, const void* host, std::size_t bytes) {
  copy_within(device, host, bytes);
}
void CpuDevice::copy_within(void* to, const void* from, std::size_t bytes) {
  if (bytes && to != from) std::memmove(to, from, bytes);
}

StagedBatch CpuDevice::stage(const Batch& batch, int) {
  StagedBatch s;
  s.features = &batch.features;
  s.labels = batch.class_ids.empty() ? nullptr : batch.class_ids.data();
  s.targets = batch.targets.size() ? batch.targets.data() : nullptr;
  return s;
}

Device& cpu_device() {
  static CpuDevice device;
  return device;
}

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::cuda: return "cuda";
    case DeviceKind::emulated: return "emulated";
  }
  return "?";
}

}  // namespace mpiddp
