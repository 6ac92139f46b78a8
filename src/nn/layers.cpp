#include "mpiddp/nn/layers.hpp"

#include <cmath>
#include <stdexcept>

#include "mpiddp/common/random.hpp"
#include "mpiddp/common/simd.hpp"
#include "mpiddp/tensor/cpu_ops.hpp"

namespace mpiddp {

// ---- Linear ----------------------------------------------------------------

void Linear::declare(ParameterStore& params, const std::string& prefix, std::size_t in) {
  in_ = in;
  weight_ = params.add(prefix + ".weight", {out_, in_});
  bias_ = params.add(prefix + ".bias", {out_});
}

void Linear::initialize(ParameterStore& params, std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  for (std::size_t index : {weight_, bias_}) {
    CounterRng rng(hash_combine(seed, index));
    float* v = params.value(index);
    for (std::size_t i = 0; i < params.list()[index].count; ++i) v[i] = (2.0f * rng.uniform(i) - 1.0f) * bound;
  }
  w_ = params.value(weight_);
  b_ = params.value(bias_);
}

void Linear::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), out_);
  cpu::linear_forward(x.data(), w_, b_, y.data(), static_cast<int>(x.rows()), static_cast<int>(in_),
                      static_cast<int>(out_));
}

void Linear::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                      bool accumulate) {
  const int n = static_cast<int>(x.rows());
  cpu::linear_backward_params(x.data(), dy.data(), params.grad(weight_), params.grad(bias_), n,
                              static_cast<int>(in_), static_cast<int>(out_), accumulate);
  if (dx) {
    dx->resize(x.rows(), in_);
    cpu::linear_backward_input(dy.data(), w_, dx->data(), n, static_cast<int>(in_), static_cast<int>(out_));
  }
}

// ---- Activations -------------------------------------------------------------

ActivationKind parse_activation(const std::string& name) {
  if (name == "relu") return ActivationKind::relu;
  if (name == "gelu") return ActivationKind::gelu;
  if (name == "tanh") return ActivationKind::tanh;
  throw std::invalid_argument("unknown activation " + name);
}

std::string Activation::kind() const {
  switch (kind_) {
    case ActivationKind::relu: return "ReLU";
    case ActivationKind::gelu: return "GELU";
    case ActivationKind::tanh: return "Tanh";
  }
  return "?";
}

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

MPIDDP_VECTOR_CLONES
void activation_forward(ActivationKind kind, const float* __restrict in, float* __restrict out, std::size_t n) {
  switch (kind) {
    case ActivationKind::relu:
      for (std::size_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
      break;
    case ActivationKind::gelu:  // exact (erf) form, PyTorch's default
      for (std::size_t i = 0; i < n; ++i) out[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * kInvSqrt2));
      break;
    case ActivationKind::tanh:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::tanh(in[i]);
      break;
  }
}

MPIDDP_VECTOR_CLONES
void activation_backward(ActivationKind kind, const float* __restrict in, const float* __restrict out,
                         const float* __restrict g, float* __restrict d, std::size_t n) {
  switch (kind) {
    case ActivationKind::relu:
      for (std::size_t i = 0; i < n; ++i) d[i] = in[i] > 0.0f ? g[i] : 0.0f;
      break;
    case ActivationKind::gelu:
      for (std::size_t i = 0; i < n; ++i) {
        const float cdf = 0.5f * (1.0f + std::erf(in[i] * kInvSqrt2));
        const float pdf = kInvSqrt2Pi * std::exp(-0.5f * in[i] * in[i]);
        d[i] = g[i] * (cdf + in[i] * pdf);
      }
      break;
    case ActivationKind::tanh:
      for (std::size_t i = 0; i < n; ++i) d[i] = g[i] * (1.0f - out[i] * out[i]);
      break;
  }
}

}  // namespace

void Activation::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), x.cols());
  activation_forward(kind_, x.data(), y.data(), x.size());
}

void Activation::backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore&, bool) {
  if (!dx) return;
  dx->resize(x.rows(), x.cols());
  activation_backward(kind_, x.data(), y.data(), dy.data(), dx->data(), x.size());
}

// ---- Dropout -----------------------------------------------------------------

void Dropout::forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) {
  y.resize(x.rows(), x.cols());
  const std::size_t n = x.size();
  masked_ = ctx.training && p_ > 0.0;
  if (!masked_) {
    std::copy(x.data(), x.data() + n, y.data());
    return;
  }
  const CounterRng rng(hash_combine(hash_combine(ctx.seed, ctx.stream), hash_combine(ctx.counter, layer_id_)));
  const float keep_scale = static_cast<float>(1.0 / (1.0 - p_));
  const float p = static_cast<float>(p_);
  mask_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    mask_[i] = rng.uniform(i) < p ? 0.0f : keep_scale;
    y.data()[i] = x.data()[i] * mask_[i];
  }
}

void Dropout::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore&, bool) {
  if (!dx) return;
  dx->resize(x.rows(), x.cols());
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) dx->data()[i] = masked_ ? dy.data()[i] * mask_[i] : dy.data()[i];
}

}  // namespace mpiddp
