#pragma once
// Where a model computes: the CPU (BLAS + vectorised loops) or a CUDA GPU
// (cuBLAS + kernels). Layers, losses, optimizers and the DDP reducer call only
// this interface, on pointers into memory the same Device allocated; the
// training code above it is the same for both.
//
// Work may run asynchronously (on the GPU, everything is ordered on one compute
// stream): only the calls documented as waiting return results to the host.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mpiddp/config/choices.hpp"  // Precision, ActivationKind
#include "mpiddp/device/elementwise.hpp"
#include "mpiddp/nn/loss.hpp"

namespace mpiddp {

struct Batch;
class Matrix;

enum class DeviceKind { cpu, cuda, emulated };
const char* device_kind_name(DeviceKind kind);

// What a device may keep for one layer between its forward and its backward
// (the CUDA device keeps the bf16 copies of the layer's input and weights that
// the forward made, so backward does not convert them again). Owned by the layer.
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

class Device {
 public:
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
  virtual void copy_to_device(void* device, const void* host, std::size_t bytes) = 0;
  virtual void copy_within(void* to, const void* from, std::size_t bytes) = 0;
  // Waits until all work issued so far is done.
  virtual void synchronize() = 0;

  // ---- input batches ----
  // Makes `batch` available to the device. `slot` (0 or 1) names the staging
  // buffers: a batch staged into one slot may be copied while the other slot's
  // batch is still being computed on. done_with_stage(slot) marks the end of its use.
  virtual StagedBatch stage(const Batch& batch, int slot) = 0;
  virtual void done_with_stage(int slot) = 0;

  // ---- Linear layer, PyTorch layout: x[n, in], w[out, in], b[out], y[n, out] ----
  // `scratch` (may be null) is the layer's own, from make_layer_scratch(); the
  // backward calls of a layer then reuse what its last forward prepared.
  virtual std::unique_ptr<LayerScratch> make_layer_scratch() { return nullptr; }
  virtual void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                              LayerScratch* scratch) = 0;
  // dw (+)= dy^T x; db (+)= column sums of dy (overwritten unless accumulate).
  virtual void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                                      bool accumulate, LayerScratch* scratch) = 0;
  // dx = dy w
  virtual void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                                     LayerScratch* scratch) = 0;

  // ---- element-wise ----
  virtual void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) = 0;
  virtual void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                                   std::size_t n) = 0;
  // y = x * mask with mask from ew::dropout_mask(key, i, ...); the mask is kept for backward.
  virtual void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                               float keep_scale) = 0;
  virtual void multiply(const float* a, const float* b, float* out, std::size_t n) = 0;
  virtual void scale(float* data, std::size_t n, float factor) = 0;

  // ---- losses: accumulate sum and correct count on the device ----
  // grad (may be null) receives d(mean loss)/d(output) over these n rows.
  virtual void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c) = 0;
  virtual void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) = 0;
  // Queues a NaN/Inf check of data; take_loss() reports it (one wait for both).
  virtual void check_finite(const float* data, std::size_t n) = 0;
  // Waits, returns what the losses accumulated since the last call (and whether
  // the data of the last check_finite, if any, was finite), and resets both.
  virtual LossResult take_loss() = 0;

  // ---- optimizer steps over flat buffers, and the finite check (waits) ----
  virtual void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                          const ew::SgdCoefficients& k) = 0;
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                            const ew::AdamWCoefficients& k) = 0;
  virtual bool all_finite(const float* data, std::size_t n) = 0;
};

// The process-wide CPU device.
Device& cpu_device();

// Tests only: a non-host device with its own memory that computes with the CPU's
// code, so the GPU path's host-side logic runs (and is tested) without a GPU.
std::unique_ptr<Device> make_emulated_device();

}  // namespace mpiddp
