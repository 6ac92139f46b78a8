#include "mpiddp/nn/residual.hpp"

#include <algorithm>

#include "mpiddp/common/trace.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/layouts.hpp"
#include "ops/pointwise/pointwise_ops.hpp"

namespace mpiddp {
namespace {

// "body layer 2 (body.1)": how errors name a layer inside a residual branch.
std::string branch_position(const std::string& name, std::size_t j) {
  return name + " layer " + std::to_string(j + 1) + " (" + name + "." + std::to_string(j) + ")";
}

}  // namespace

Shape LayerChain::output_shape(const Shape& in, const std::string& name) const {
  Shape shape = in;
  for (std::size_t j = 0; j < layers_.size(); ++j) {
    try {
      shape = layers_[j]->output_shape(shape);
    } catch (const LayerError& e) {
      throw LayerError(branch_position(name, j) + " " + layers_[j]->kind() + ": " + e.what());
    }
  }
  return shape;
}

void LayerChain::declare(ParameterStore& params, const std::string& prefix, const std::string& name,
                         const Shape& in) {
  shapes_ = {in};
  spans_.clear();
  for (std::size_t j = 0; j < layers_.size(); ++j) {
    const std::string path = prefix + "." + name + "." + std::to_string(j);
    spans_.push_back(
        {trace_label("forward " + path), trace_label("backward " + path), trace_label(layers_[j]->kind())});
    try {
      shapes_.push_back(layers_[j]->output_shape(shapes_.back()));
      layers_[j]->declare(params, path, shapes_[j]);
    } catch (const LayerError& e) {
      throw LayerError(branch_position(name, j) + " " + layers_[j]->kind() + ": " + e.what());
    }
  }
}

void LayerChain::bind(Device& device) {
  outputs_.clear();
  for (std::size_t j = 0; j < layers_.size(); ++j) outputs_.emplace_back(&device);
  grad_a_ = Matrix(&device);
  grad_b_ = Matrix(&device);
  for (auto& layer : layers_) layer->bind(device);
  absorbed_ = absorb_layers(layers_);
  link_sample_consumers(layers_, absorbed_);
  passed_.assign(layers_.size(), nullptr);
}

const Matrix& LayerChain::forward(const Matrix& x, const ForwardContext& ctx) {
  const Matrix* input = &x;
  for (std::size_t j = 0; j < layers_.size(); ++j) {
    passed_[j] = input;  // a layer done inside the one before passes its output on
    if (absorbed_[j]) continue;
    TraceSpan span(spans_[j].forward, -1, spans_[j].kind);
    const cpu::LibraryScope library(layers_[j]->cpu_kernels());
    layers_[j]->forward(*input, outputs_[j], ctx);
    input = passed_[j] = &outputs_[j];
  }
  return *input;
}

void LayerChain::backward(const Matrix& x, const Matrix& dy, Matrix* dx, ParameterStore& params, bool accumulate) {
  const Matrix* grad = &dy;
  for (std::size_t j = layers_.size(); j-- > 0;) {
    if (absorbed_[j]) continue;  // its gradient is taken inside the layer before
    TraceSpan span(spans_[j].backward, -1, spans_[j].kind);
    const Matrix& input = j == 0 ? x : *passed_[j - 1];
    Matrix* grad_input = j == 0 ? dx : grad == &grad_a_ ? &grad_b_ : &grad_a_;
    const cpu::LibraryScope library(layers_[j]->cpu_kernels());
    layers_[j]->backward(input, *passed_[j], *grad, grad_input, params, accumulate);
    grad = grad_input;
  }
}

void LayerChain::visit(const std::string& path, const LayerVisitor& visit) {
  for (std::size_t j = 0; j < layers_.size() && j < shapes_.size(); ++j) {
    const std::string name = path + "." + std::to_string(j);
    visit(name, *layers_[j], shapes_[j]);
    layers_[j]->visit_inner(name, visit);
  }
}

bool LayerChain::can_run_blocked() const {
  return plan_chain_layouts(layers_, absorbed_, shapes_, true, true, true).has_value();
}

void LayerChain::set_layouts(bool in_blocked, bool out_blocked, bool allow) {
  apply_chain_layouts(layers_, absorbed_, shapes_, in_blocked, out_blocked, allow);
}

void LayerChain::list_inner(const std::string& name, std::vector<InnerLayer>& out) const {
  for (std::size_t j = 0; j < layers_.size() && j + 1 < shapes_.size(); ++j)
    out.push_back({name + "." + std::to_string(j), layers_[j].get(), shapes_[j + 1]});
}

double LayerChain::scratch_bytes(const Shape& in, std::size_t samples) const {
  double bytes = 0;
  Shape shape = in;
  for (const auto& layer : layers_) {
    bytes += layer->scratch_bytes(shape, samples);
    shape = layer->output_shape(shape);
    // Its output is kept for backward; the two gradient buffers are as large as the widest.
    bytes += 3.0 * static_cast<double>(samples) * static_cast<double>(element_count(shape)) * sizeof(float);
  }
  return bytes;
}

double LayerChain::forward_flops(const Shape& in) const {
  double flops = 0;
  Shape shape = in;
  for (const auto& layer : layers_) {
    flops += layer->forward_flops(shape);
    shape = layer->output_shape(shape);
  }
  return flops;
}

Shape Residual::output_shape(const Shape& in) const {
  const Shape body = body_.output_shape(in, "body");
  const Shape shortcut = shortcut_.empty() ? in : shortcut_.output_shape(in, "shortcut");
  if (body != shortcut)
    throw LayerError("its body gives " + shape_text(body) + " but its " +
                     (shortcut_.empty() ? "input (the identity shortcut) is " : "shortcut gives ") +
                     shape_text(shortcut) + ": the two are added, so they must agree" +
                     (shortcut_.empty() ? " (give a shortcut: residual(BODY ; SHORTCUT))" : ""));
  return body;
}

std::vector<const Layer*> Residual::inner() const {
  std::vector<const Layer*> all;
  for (const LayerChain* chain : {&body_, &shortcut_})
    for (const auto& layer : chain->layers()) all.push_back(layer.get());
  return all;
}

bool Residual::needs_images() const {
  const auto all = inner();
  return std::any_of(all.begin(), all.end(), [](const Layer* layer) { return layer->needs_images(); });
}

std::size_t Residual::min_training_batch() const {
  std::size_t fewest = 1;
  for (const Layer* layer : inner()) fewest = std::max(fewest, layer->min_training_batch());
  return fewest;
}

double Residual::scratch_bytes(const Shape& in, std::size_t samples) const {
  // Besides the branches' own: the shortcut's input gradient, added into dx, and
  // with a ReLU taken in the gradient through it (the ReLU's output, which the
  // chain counts, is then not kept: the estimate stays an upper bound).
  const auto bytes = [&](const Shape& shape) {
    return static_cast<double>(samples) * static_cast<double>(element_count(shape)) * sizeof(float);
  };
  return body_.scratch_bytes(in, samples) + shortcut_.scratch_bytes(in, samples) +
         (shortcut_.empty() ? 0.0 : bytes(in)) + (relu_after_ ? bytes(output_shape(in)) : 0.0);
}

double Residual::forward_flops(const Shape& in) const {
  return body_.forward_flops(in) + shortcut_.forward_flops(in);
}

void Residual::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  body_.declare(params, prefix, "body", in);
  shortcut_.declare(params, prefix, "shortcut", in);
}

void Residual::initialize(ParameterStore& params, std::uint64_t seed) {
  for (LayerChain* chain : {&body_, &shortcut_})
    for (const auto& layer : chain->layers()) layer->initialize(params, seed);
}

std::string Residual::arguments() const {
  return shortcut_.empty() ? "identity shortcut" : "projection shortcut";
}

void Residual::set_cross_rank(CrossRank* collectives) {
  for (LayerChain* chain : {&body_, &shortcut_})
    for (const auto& layer : chain->layers()) layer->set_cross_rank(collectives);
}

void Residual::on_bind() {
  body_.bind(device());
  shortcut_.bind(device());
  shortcut_grad_ = Matrix(&device());
  relu_grad_ = Matrix(&device());
}

bool Residual::absorb_next(const Layer* next, int taken) {
  if (taken == 0) relu_after_ = next && next->is_relu();
  return taken == 0 && relu_after_;
}

void Residual::forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) {
  const Matrix& f = body_.forward(x, ctx);
  const Matrix& g = shortcut_.empty() ? x : shortcut_.forward(x, ctx);
  y.resize(f.rows(), f.cols());
  PointwiseOps& ops = device().ops<PointwiseOps>();
  if (relu_after_)
    ops.add_relu(f.data(), g.data(), y.data(), y.size());
  else
    ops.add(f.data(), g.data(), y.data(), y.size());
}

void Residual::backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                        bool accumulate) {
  const Matrix* grad = &dy;
  if (relu_after_) {
    // The ReLU's own backward masks by its input, the sum; y = relu(sum) is <= 0
    // exactly where the sum is (NaN passing both), so the mask is the same.
    relu_grad_.resize(dy.rows(), dy.cols());
    device().ops<PointwiseOps>().activation_backward(ActivationKind::relu, y.data(), y.data(), dy.data(),
                                                     relu_grad_.data(), dy.size());
    grad = &relu_grad_;
  }
  // The gradient reaches both branches unchanged; their input gradients add up.
  if (dx) dx->resize(x.rows(), x.cols());
  if (!shortcut_.empty()) shortcut_.backward(x, *grad, dx ? &shortcut_grad_ : nullptr, params, accumulate);
  body_.backward(x, *grad, dx, params, accumulate);
  if (!dx) return;
  const Matrix& through = shortcut_.empty() ? *grad : shortcut_grad_;
  device().ops<PointwiseOps>().add(dx->data(), through.data(), dx->data(), dx->size());
}

LayoutRole Residual::layout_role() const {
  if (role_pass_ != layout_planning_pass()) {
    role_ = body_.can_run_blocked() && shortcut_.can_run_blocked() ? LayoutRole::preserving : LayoutRole::nchw_only;
    role_pass_ = layout_planning_pass();
  }
  return role_;
}

void Residual::set_layouts(bool blocked_in, bool blocked_out, bool allow) {
  Layer::set_layouts(blocked_in, blocked_out, allow);
  body_.set_layouts(blocked_in, blocked_out, allow);
  shortcut_.set_layouts(blocked_in, blocked_out, allow);
}

std::vector<InnerLayer> Residual::inner_layers() const {
  std::vector<InnerLayer> all;
  body_.list_inner("body", all);
  shortcut_.list_inner("shortcut", all);
  return all;
}

void Residual::visit_inner(const std::string& name, const LayerVisitor& visit) {
  body_.visit(name + ".body", visit);
  shortcut_.visit(name + ".shortcut", visit);
}

std::vector<std::size_t> Residual::parameter_indices() const {
  std::vector<std::size_t> all;
  for (const Layer* layer : inner())
    for (std::size_t index : layer->parameter_indices()) all.push_back(index);
  return all;
}

}  // namespace mpiddp
