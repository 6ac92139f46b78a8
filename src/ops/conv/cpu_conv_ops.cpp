// Convolution on the CPU: mpiddp's own kernels for a layer whose choice is own,
// where they take its shape (forward and weight gradient: thin_conv.hpp),
// oneDNN's convolution primitives where train.cpu_kernels resolves to onednn
// (onednn_conv.hpp; Winograd's for a layer whose choice is winograd or winograd_all),
// mpiddp's own Winograd convolutions for a layer whose choice is own_winograd
// (own_winograd.hpp), else im2col + one OpenBLAS matrix product
// (device/cpu_gemm.hpp) per chunk of samples.
// The samples of a chunk share one product ([out_c x K] x [K x samples * positions]),
// which keeps the matrices large enough for BLAS to run near its peak; the
// columns of the forward pass are kept for backward when the batch fits in one
// chunk (the usual case), else backward rebuilds them chunk by chunk.
#include "mpiddp/device/cpu_gemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv_columns.hpp"
#include "conv_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "onednn_conv.hpp"
#include "own_winograd.hpp"
#include "thin_conv.hpp"

namespace mpiddp::cpu {
namespace {

// Column buffers above this many floats are split into chunks of samples.
constexpr std::size_t kColumnBudget = kCpuColumnBudget;  // 64 MiB

struct ConvScratch final : LayerScratch {
  std::vector<float> columns;     // [K][samples * positions] of the chunk
  std::vector<float> product;     // the forward product, [out_c][samples * positions], before NCHW
  std::vector<float> grad_out;    // dy as [out_c][samples * positions]
  std::vector<float> grad_cols;   // dcolumns, same layout as columns
  const float* columns_of = nullptr;  // the input whose whole-batch columns are kept
  const float* grad_out_of = nullptr; // the dy whose whole-batch transpose is kept
  std::unique_ptr<LayerScratch> onednn;  // oneDNN's primitives and operands, made on first use
  std::unique_ptr<LayerScratch> thin;    // the own kernels' columns, made on first use
  std::unique_ptr<LayerScratch> winograd;  // the own Winograd kernels' tiles, made on first use

  LayerScratch& onednn_scratch() {
    if (!onednn) onednn = onednn_conv::make_scratch();
    return *onednn;
  }
  LayerScratch& thin_scratch() {
    if (!thin) thin = thin_conv::make_scratch();
    return *thin;
  }
  LayerScratch& winograd_scratch() {
    if (!winograd) winograd = own_winograd::make_scratch();
    return *winograd;
  }
  // A forward pass elsewhere: the copies kept of an earlier input (im2col's
  // columns, oneDNN's reordered operands) no longer say what x holds.
  void forget_inputs() {
    columns_of = nullptr;
    if (onednn) onednn_conv::forget_inputs(*onednn);
  }
};

class CpuConvOps final : public ConvOps {
 public:
  std::unique_ptr<LayerScratch> make_scratch() override { return std::make_unique<ConvScratch>(); }

  bool takes_blocked(const ConvGeometry& g) const override {
    return onednn_linked() && onednn_convolutions() && !on_own_kernels(g) && !on_own_winograd(g);
  }

  void conv_forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
                    LayerScratch* scratch) override {
    auto& s = static_cast<ConvScratch&>(*scratch);
    if (blocked(g)) return onednn_conv::forward(x, weight, bias, y, g, algorithm(), s.onednn_scratch());
    if (on_own_kernels(g)) return thin_conv::forward(x, weight, bias, y, g, s.thin_scratch());
    if (on_own_winograd(g)) {
      s.forget_inputs();
      return own_winograd::forward(x, weight, bias, y, g, winograd_tile(), s.winograd_scratch());
    }
    if (onednn_convolutions()) return onednn_conv::forward(x, weight, bias, y, g, algorithm(), s.onednn_scratch());
    const Plan p(g);
    for (int first = 0; first < g.n; first += p.per_chunk) {
      const int count = std::min(p.per_chunk, g.n - first);
      const std::size_t width = static_cast<std::size_t>(count) * p.positions;
      fill_columns(x, g, p, first, count, s.columns);
      s.product.resize(static_cast<std::size_t>(g.out_c) * width);
      cpu::sgemm(false, false, g.out_c, static_cast<int>(width), p.rows, 1.0f, weight,
                  p.rows, s.columns.data(), static_cast<int>(width), 0.0f, s.product.data(), static_cast<int>(width));
      // [out_c][samples * positions] -> NCHW, adding the bias.
      for (int i = 0; i < count; ++i)
        for (int oc = 0; oc < g.out_c; ++oc) {
          const float* from = s.product.data() + static_cast<std::size_t>(oc) * width + static_cast<std::size_t>(i) * p.positions;
          float* to = y + (static_cast<std::size_t>(first + i) * g.out_c + oc) * p.positions;
          const float b = bias[oc];
          for (int q = 0; q < p.positions; ++q) to[q] = from[q] + b;
        }
    }
    s.columns_of = p.per_chunk >= g.n ? x : nullptr;
  }

  void conv_backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                            bool accumulate, LayerScratch* scratch) override {
    auto& s = static_cast<ConvScratch&>(*scratch);
    if (blocked(g))
      return onednn_conv::backward_params(x, dy, dweight, dbias, g, accumulate, algorithm(), s.onednn_scratch());
    if (on_own_kernels(g)) return thin_conv::backward_params(x, dy, dweight, dbias, g, accumulate, s.thin_scratch());
    if (on_own_winograd(g))
      return own_winograd::backward_params(x, dy, dweight, dbias, g, accumulate, winograd_tile(),
                                             s.winograd_scratch());
    if (onednn_convolutions())
      return onednn_conv::backward_params(x, dy, dweight, dbias, g, accumulate, algorithm(), s.onednn_scratch());
    const Plan p(g);
    bias_gradient(dy, g, dbias, accumulate);
    for (int first = 0; first < g.n; first += p.per_chunk) {
      const int count = std::min(p.per_chunk, g.n - first);
      const std::size_t width = static_cast<std::size_t>(count) * p.positions;
      if (s.columns_of != x) fill_columns(x, g, p, first, count, s.columns);
      gather_grad_out(dy, g, p, first, count, s.grad_out);
      const bool add = accumulate || first > 0;
      cpu::sgemm(false, true, g.out_c, p.rows, static_cast<int>(width), 1.0f,
                  s.grad_out.data(), static_cast<int>(width), s.columns.data(), static_cast<int>(width),
                  add ? 1.0f : 0.0f, dweight, p.rows);
    }
    s.grad_out_of = p.per_chunk >= g.n ? dy : nullptr;
  }

  bool conv_forward_by_sample(const float* x, const float* weight, const float* bias, float* y,
                              const ConvGeometry& g, LayerScratch* scratch,
                              const SampleWritten& after_sample) override {
    if (blocked(g) || !on_own_kernels(g)) return false;
    thin_conv::forward(x, weight, bias, y, g, static_cast<ConvScratch&>(*scratch).thin_scratch(), &after_sample);
    return true;
  }

  bool conv_backward_params_by_sample(const float* x, const SampleGradient& dy_of, float* dweight, float* dbias,
                                      const ConvGeometry& g, bool accumulate, LayerScratch* scratch) override {
    if (blocked(g) || !on_own_kernels(g)) return false;
    thin_conv::backward_params(x, dy_of, dweight, dbias, g, accumulate,
                               static_cast<ConvScratch&>(*scratch).thin_scratch());
    return true;
  }

  void conv_backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                           LayerScratch* scratch) override {
    auto& s = static_cast<ConvScratch&>(*scratch);
    if (blocked(g)) return onednn_conv::backward_input(dy, weight, dx, g, algorithm(), s.onednn_scratch());
    if (on_own_winograd(g)) return own_winograd::backward_input(dy, weight, dx, g, winograd_tile(), s.winograd_scratch());
    if (onednn_convolutions())
      return onednn_conv::backward_input(dy, weight, dx, g, algorithm(), s.onednn_scratch());
    const Plan p(g);
    std::fill(dx, dx + static_cast<std::size_t>(g.n) * g.c * g.h * g.w, 0.0f);
    for (int first = 0; first < g.n; first += p.per_chunk) {
      const int count = std::min(p.per_chunk, g.n - first);
      const std::size_t width = static_cast<std::size_t>(count) * p.positions;
      if (s.grad_out_of != dy) gather_grad_out(dy, g, p, first, count, s.grad_out);
      s.grad_cols.resize(static_cast<std::size_t>(p.rows) * width);
      cpu::sgemm(true, false, p.rows, static_cast<int>(width), g.out_c, 1.0f, weight,
                  p.rows, s.grad_out.data(), static_cast<int>(width), 0.0f, s.grad_cols.data(),
                  static_cast<int>(width));
      const std::size_t image = static_cast<std::size_t>(g.c) * g.h * g.w;
      for (int i = 0; i < count; ++i)
        columns_to_image(s.grad_cols.data(), width, static_cast<std::size_t>(i) * p.positions, g,
                         dx + static_cast<std::size_t>(first + i) * image);
    }
    s.grad_out_of = nullptr;
  }

 private:
  // A blocked operand: the layer planned its layouts on oneDNN's kernels (takes_blocked).
  static bool blocked(const ConvGeometry& g) { return g.blocked_in || g.blocked_out; }
  // The layer's choice is own and the own kernels take this shape (else the library runs it).
  static bool on_own_kernels(const ConvGeometry& g) { return own_kernels() && thin_conv::supports(g); }
  // The layer's choice is own_winograd and the kernels take this shape (else the library runs it).
  static bool on_own_winograd(const ConvGeometry& g) {
    return own_winograd_convolutions() && own_winograd::supports(g);
  }
  static own_winograd::Tile winograd_tile() {
    return library_in_effect() == CpuKernels::own_winograd4 ? own_winograd::Tile::f4 : own_winograd::Tile::f2;
  }
  // oneDNN's algorithm: Winograd where the layer's choice is winograd (winograd_all).
  static onednn_conv::Algorithm algorithm() {
    if (winograd_weight_gradients()) return onednn_conv::Algorithm::winograd_all;
    return winograd_convolutions() ? onednn_conv::Algorithm::winograd : onednn_conv::Algorithm::direct;
  }

  struct Plan {
    int positions, rows, per_chunk;
    explicit Plan(const ConvGeometry& g) : positions(g.out_h() * g.out_w()), rows(g.c * g.kh * g.kw) {
      const std::size_t per_sample = std::max<std::size_t>(static_cast<std::size_t>(rows) * positions, 1);
      per_chunk = static_cast<int>(
          std::clamp<std::size_t>(kColumnBudget / per_sample, 1, static_cast<std::size_t>(std::max(g.n, 1))));
    }
  };

  static void fill_columns(const float* x, const ConvGeometry& g, const Plan& p, int first, int count,
                           std::vector<float>& cols) {
    const std::size_t width = static_cast<std::size_t>(count) * p.positions;
    cols.resize(static_cast<std::size_t>(p.rows) * width);
    const std::size_t image = static_cast<std::size_t>(g.c) * g.h * g.w;
    for (int i = 0; i < count; ++i)
      image_to_columns(x + static_cast<std::size_t>(first + i) * image, g, cols.data(), width,
                       static_cast<std::size_t>(i) * p.positions);
  }

  // dy (NCHW) -> [out_c][samples * positions] for the chunk.
  static void gather_grad_out(const float* dy, const ConvGeometry& g, const Plan& p, int first, int count,
                              std::vector<float>& out) {
    const std::size_t width = static_cast<std::size_t>(count) * p.positions;
    out.resize(static_cast<std::size_t>(g.out_c) * width);
    for (int i = 0; i < count; ++i)
      for (int oc = 0; oc < g.out_c; ++oc)
        std::memcpy(out.data() + static_cast<std::size_t>(oc) * width + static_cast<std::size_t>(i) * p.positions,
                    dy + (static_cast<std::size_t>(first + i) * g.out_c + oc) * p.positions,
                    static_cast<std::size_t>(p.positions) * sizeof(float));
  }
};

std::unique_ptr<ConvOps> make_cpu_conv_ops(Device&) { return std::make_unique<CpuConvOps>(); }
const bool registered = register_ops<ConvOps>(DeviceKind::cpu, make_cpu_conv_ops);

}  // namespace

}  // namespace mpiddp::cpu
