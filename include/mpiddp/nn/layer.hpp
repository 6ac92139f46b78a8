#pragma once
// A layer with explicit forward and backward. Layers own no parameter memory:
// they register parameters (and buffers) in a ParameterStore and keep their
// indices. All arithmetic goes through the bound Device, so a layer runs on CPU
// or GPU alike. A batch is a Matrix of rows = samples; each row holds one sample
// in the layer's input Shape (set by declare()).
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpiddp/config/choices.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/device/matrix.hpp"
#include "mpiddp/nn/cross_rank.hpp"
#include "mpiddp/nn/parameters.hpp"
#include "mpiddp/nn/shape.hpp"

namespace mpiddp {

// What a layer can do with the layout of its activations (plan_layouts).
enum class LayoutRole {
  nchw_only,    // input and output NCHW
  preserving,   // its output in its input's layout, whichever (element-wise layers)
  free,         // input and output each in either layout (a oneDNN convolution)
  free_output,  // input NCHW, output in either (a BatchNorm with a fused max pooling)
};

// What a forward pass may depend on besides its input.
struct ForwardContext {
  bool training = true;
  std::uint64_t seed = 0;       // train.seed
  std::uint64_t stream = 0;     // the rank: dropout masks differ per rank, like per-process RNGs
  std::uint64_t counter = 0;    // micro-batch counter: masks differ per micro-batch, resumable
  bool alone = false;           // one layer run by itself (kernel timing): it feeds no SampleConsumer
};

// LayerError (a layer list that cannot work): shape.hpp.

class Layer;
// Called for a layer with its full name ("layers.1.body.0") and input shape.
using LayerVisitor = std::function<void(const std::string& name, Layer& layer, const Shape& in)>;

// A layer inside another (a residual block's), for printing the model.
struct InnerLayer {
  std::string name;  // relative to its container: "body.0"
  const Layer* layer;
  Shape output;
};

// A layer that takes its input one sample at a time as the layer before writes
// it, and writes its input gradient one sample at a time as the layer before
// reads it: BatchNorm after a convolution on mpiddp's own kernels, which runs
// sample by sample, so the moments and the gradient are taken while each sample
// is in cache. The layer before calls these from its own passes.
class SampleConsumer {
 public:
  virtual ~SampleConsumer() = default;
  // Forward, in training: sample i (of n, in order from 0) of the input, written at x_i.
  virtual void input_sample_written(int i, int n, const float* x_i) = 0;
  // Backward: whether the input gradient is still to be written into `into` (the
  // gradient the layer before was handed): left to that layer, which must then
  // ask for it, by sample or all at once.
  virtual bool input_grad_waiting(const float* into) const = 0;
  virtual void write_input_grad_sample(int i, float* dx_i) = 0;
  virtual void write_input_grad() = 0;  // where backward would have written it
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;  // PyTorch's class name: "Conv2d"
  // The device every forward and backward runs on (set by Sequential).
  void bind(Device& device) {
    device_ = &device;
    on_bind();
  }
  // Shape of one output sample for one input sample of shape `in`; throws
  // LayerError when the layer cannot take that input.
  virtual Shape output_shape(const Shape& in) const { return in; }
  // Whether the layer takes only images {C, H, W} (for the message on flat data).
  virtual bool needs_images() const { return false; }
  // Whether its input is token ids (embedding: the first layer of a model on token shards).
  virtual bool takes_tokens() const { return false; }
  // The fewest samples a training batch may have (after declare()): BatchNorm
  // with one value per channel per sample needs 2, to have a variance.
  virtual std::size_t min_training_batch() const { return 1; }
  // Bytes of working memory besides its output for a batch of `samples` inputs of
  // shape `in` (im2col columns, dropout masks, argmax), from above: the memory
  // budget counts it before anything is allocated.
  virtual double scratch_bytes(const Shape& /*in*/, std::size_t /*samples*/) const { return 0; }
  // Floating-point operations of the matrix products in one sample's forward
  // pass (a multiply-add counts 2), for input shape `in`: what throughput is
  // measured against the FMA peak in. Element-wise layers count 0, by the usual
  // convention (they are bound by memory, not arithmetic).
  virtual double forward_flops(const Shape& /*in*/) const { return 0; }
  // Registers parameters and buffers under `prefix` (e.g. "layers.0"), for inputs of shape `in`.
  virtual void declare(ParameterStore&, const std::string& /*prefix*/, const Shape& /*in*/) {}
  // Writes initial values into the host copies (after ParameterStore::allocate).
  virtual void initialize(ParameterStore&, std::uint64_t /*seed*/) {}
  // Arguments as PyTorch prints the module: "1, 32, kernel_size=3, padding=1".
  virtual std::string arguments() const { return ""; }
  // SyncBatchNorm's collectives; layers that need none ignore it.
  virtual void set_cross_rank(CrossRank* /*collectives*/) {}
  virtual void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) = 0;
  // Given dL/dy, accumulates parameter gradients (overwrites them unless
  // accumulate) and writes dL/dx when dx is not null.
  virtual void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                        bool accumulate) = 0;
  // Parameter indices this layer owns (ready for reduction after its backward).
  virtual std::vector<std::size_t> parameter_indices() const { return {}; }
  // The layers it contains, in order (after declare()); none for a plain layer.
  virtual std::vector<InnerLayer> inner_layers() const { return {}; }
  virtual bool is_relu() const { return false; }
  // How its activations may be laid out (nn/layouts.hpp): NCHW only unless it says
  // otherwise; plan_layouts() decides, after bind() and the kernel choices, and
  // tells it with set_layouts(). Blocked = oneDNN's nChw16c, which keeps the
  // bits of every value: only layout changes (reorders) are saved.
  virtual LayoutRole layout_role() const { return LayoutRole::nchw_only; }
  // Whether layers inside it run in the layout it is given (a residual block's
  // branches), so a blocked input or output spares them a layout change.
  virtual bool blocked_inside() const { return false; }
  // Whether its input and its output (and their gradients) are blocked; `allow`:
  // whether the layers inside it (a residual block's) may be.
  virtual void set_layouts(bool blocked_in, bool blocked_out, bool /*allow*/) {
    blocked_in_ = blocked_in;
    blocked_out_ = blocked_out;
  }
  bool blocked_in() const { return blocked_in_; }
  bool blocked_out() const { return blocked_out_; }
  // A max pooling whose windows tile its input (kernel = stride): that window, else 0.
  virtual int tiling_max_pool_window() const { return 0; }
  // Offers the layer after the `taken` ones this layer already took (null: none)
  // to be done inside this one's passes over memory: BatchNorm takes a ReLU, then
  // a max pooling after it (it writes the pooled max(y, 0) and masks its own
  // gradient); a residual block takes a ReLU (it writes relu(sum)). True when it
  // did; the chain then skips that layer and offers the next. Called after every
  // bind() (the device decides what fuses); an offer with taken = 0 starts afresh.
  virtual bool absorb_next(const Layer* /*next*/, int /*taken*/) { return false; }
  // The layer after this one may take this one's output sample by sample as it
  // is written, and give this one its output gradient sample by sample
  // (SampleConsumer); this layer feeds it where its kernels run that way. Set
  // after every bind() by link_sample_consumers (null: none).
  virtual SampleConsumer* sample_consumer() { return nullptr; }
  virtual void feed_samples_to(SampleConsumer* /*next*/) {}
  // Calls `visit` for each layer inside this one, at any depth (after declare());
  // `name` is this layer's own full name.
  virtual void visit_inner(const std::string& /*name*/, const LayerVisitor& /*visit*/) {}
  // Whether it runs matrix products of its own weights (Linear, Conv2d): the
  // layers train.cpu_kernels = tune times and gives a library of their own.
  virtual bool has_own_products() const { return false; }
  // Whether mpiddp has CPU kernels of its own for it (a Conv2d with few input
  // channels: ops/conv/thin_conv.hpp), which train.cpu_kernels = own gives it; and whether auto gives them to it,
  // with `threads` threads per rank (where they run faster than the libraries).
  virtual bool has_own_kernels() const { return false; }
  virtual bool own_kernels_suit(int /*threads*/) const { return false; }
  // Whether oneDNN runs Winograd convolutions for it on this CPU (a 3 x 3, stride-1
  // Conv2d, AVX-512), and whether train.cpu_kernels = winograd gives them to it
  // (where they ran faster than the direct ones: not with few input channels).
  virtual bool has_winograd() const { return false; }
  virtual bool winograd_suits(int /*threads*/) const { return false; }
  // Whether oneDNN runs Winograd's weight gradient for it as well on this CPU
  // (train.cpu_kernels = winograd_all gives it all three), and whether auto does
  // (where it ran faster than the direct weight gradient: small planes, many channels).
  virtual bool has_winograd_weight_gradient() const { return false; }
  virtual bool winograd_weight_gradient_suits(int /*threads*/) const { return false; }
  // Whether mpiddp's own Winograd convolutions take it (ops/conv/own_winograd.hpp:
  // 3 x 3, stride 1, channels in multiples of 8; any CPU): train.cpu_kernels =
  // own_winograd or own_winograd4 gives them, tune times them; and whether auto
  // gives it F(4x4, 3x3) where oneDNN has no Winograd kernels (with one thread per
  // rank: docs/performance.md).
  virtual bool has_own_winograd() const { return false; }
  virtual bool own_winograd_suits(int /*threads*/) const { return false; }
  // That library (CpuKernels::automatic: the process's); the chains run the
  // layer's passes under it (cpu::LibraryScope).
  void set_cpu_kernels(CpuKernels library) { cpu_kernels_ = library; }
  CpuKernels cpu_kernels() const { return cpu_kernels_; }

 protected:
  Device& device() const { return *device_; }
  virtual void on_bind() {}  // e.g. move scratch buffers to the device

 private:
  Device* device_ = &cpu_device();
  CpuKernels cpu_kernels_ = CpuKernels::automatic;
  bool blocked_in_ = false, blocked_out_ = false;
};

// After bind(): which layers of a chain a layer before them takes over
// (absorb_next): each layer is offered the ones after it, left to right, until
// it declines one; a layer that was taken over takes over none.
inline std::vector<bool> absorb_layers(const std::vector<std::unique_ptr<Layer>>& layers) {
  std::vector<bool> absorbed(layers.size(), false);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (absorbed[i]) {
      layers[i]->absorb_next(nullptr, 0);  // keeps nothing from an earlier binding
      continue;
    }
    int taken = 0;
    for (std::size_t j = i + 1;; ++j) {
      const Layer* next = j < layers.size() ? layers[j].get() : nullptr;
      if (!layers[i]->absorb_next(next, taken)) break;
      absorbed[j] = true;
      ++taken;
    }
  }
  return absorbed;
}

// After absorb_layers: each layer that runs by itself feeds the one after it,
// if that one also runs by itself and takes samples one at a time.
inline void link_sample_consumers(const std::vector<std::unique_ptr<Layer>>& layers, const std::vector<bool>& absorbed) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const bool linked = !absorbed[i] && i + 1 < layers.size() && !absorbed[i + 1];
    layers[i]->feed_samples_to(linked ? layers[i + 1]->sample_consumer() : nullptr);
  }
}

}  // namespace mpiddp
