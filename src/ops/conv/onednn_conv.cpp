#include "onednn_conv.hpp"

#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "mpiddp/common/error.hpp"

namespace mpiddp::cpu::onednn_conv {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

memory::desc plain(const memory::dims& dims, tag layout) { return {dims, memory::data_type::f32, layout}; }
memory::desc chosen_by_primitive(const memory::dims& dims) { return plain(dims, tag::any); }

// One geometry's primitives and the operand memories they run on, in the layouts
// they chose. A layer sees few geometries (its training batch, the last batch of
// an epoch, evaluation batches), so each is built once and kept; the gradients'
// part only when a backward pass first needs it (evaluation never does).
struct Plan {
  memory::dims src_dims, weight_dims, bias_dims, dst_dims, strides, pad;
  // The user layouts of the same shapes: OIHW, and NCHW or nChw16c (ConvGeometry::blocked_*).
  memory::desc src_user, dst_user, weights_user, bias_user;
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;  // the forward's and the input gradient's
  bool winograd_weight_gradient = false;                             // asked for (Algorithm::winograd_all)
  dnnl::convolution_forward::primitive_desc forward_desc;
  dnnl::convolution_forward forward;
  memory src, weights, bias, dst;
  // The user buffers whose values the memories hold: the forward input and
  // weights (reused by this step's gradients), dy (weight gradient, then input gradient).
  const float* src_of = nullptr;
  const float* weights_of = nullptr;
  const float* diff_dst_of = nullptr;

  bool backward_ready = false;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  memory weights_src, diff_dst, diff_weights, diff_bias;  // weight gradient
  memory data_weights, data_diff_dst, diff_src;           // input gradient

  Plan(const ConvGeometry& g, Algorithm wanted)
      : src_dims{g.n, g.c, g.h, g.w},
        weight_dims{g.out_c, g.c, g.kh, g.kw},
        bias_dims{g.out_c},
        dst_dims{g.n, g.out_c, g.out_h(), g.out_w()},
        strides{g.stride, g.stride},
        pad{g.padding, g.padding},
        src_user(plain(src_dims, g.blocked_in ? tag::nChw16c : tag::nchw)),
        dst_user(plain(dst_dims, g.blocked_out ? tag::nChw16c : tag::nchw)),
        weights_user(plain(weight_dims, tag::oihw)),
        bias_user(plain(bias_dims, tag::x)),
        winograd_weight_gradient(wanted == Algorithm::winograd_all),
        forward_desc(make_forward_desc(wanted)),
        forward(forward_desc),
        src(forward_desc.src_desc(), engine()),
        weights(forward_desc.weights_desc(), engine()),
        bias(bias_user, engine()),
        dst(forward_desc.dst_desc(), engine()) {}

  // The forward pass in the `wanted` algorithm, where oneDNN has it for this geometry (else direct).
  dnnl::convolution_forward::primitive_desc make_forward_desc(Algorithm wanted) {
    if (wanted != Algorithm::direct) {
      try {
        auto desc = forward_in(dnnl::algorithm::convolution_winograd);
        algorithm = dnnl::algorithm::convolution_winograd;
        return desc;
      } catch (const dnnl::error&) {  // not for this geometry: direct, as every run would
      }
    }
    return forward_in(dnnl::algorithm::convolution_direct);
  }
  dnnl::convolution_forward::primitive_desc forward_in(dnnl::algorithm method) const {
    return {{dnnl::prop_kind::forward_training, method, chosen_by_primitive(src_dims),
             chosen_by_primitive(weight_dims), bias_user, chosen_by_primitive(dst_dims), strides, pad, pad},
            engine()};
  }

  // `used`, if given: the algorithm it runs.
  dnnl::convolution_backward_data::primitive_desc input_gradient_desc(dnnl::algorithm* used = nullptr) const {
    const auto in = [&](dnnl::algorithm a, const dnnl::convolution_forward::primitive_desc& hint) {
      return dnnl::convolution_backward_data::primitive_desc(
          {a, chosen_by_primitive(src_dims), chosen_by_primitive(weight_dims), chosen_by_primitive(dst_dims), strides,
           pad, pad},
          engine(), hint);
    };
    if (used) *used = algorithm;
    if (algorithm == dnnl::algorithm::convolution_winograd) {
      try {
        return in(algorithm, forward_desc);
      } catch (const dnnl::error&) {  // as the forward's refusal: direct, the same every run
        if (used) *used = dnnl::algorithm::convolution_direct;
        return in(dnnl::algorithm::convolution_direct, forward_in(dnnl::algorithm::convolution_direct));
      }
    }
    return in(algorithm, forward_desc);
  }

  // The weight gradient: Winograd's where asked for (winograd_all) and the forward
  // runs Winograd and oneDNN has it for this geometry, else direct, with a direct
  // forward as its hint. `used`, if given: the algorithm it runs.
  dnnl::convolution_backward_weights::primitive_desc weight_gradient_desc(dnnl::algorithm* used = nullptr) const {
    const auto in = [&](dnnl::algorithm a, const dnnl::convolution_forward::primitive_desc& hint) {
      return dnnl::convolution_backward_weights::primitive_desc(
          {a, chosen_by_primitive(src_dims), chosen_by_primitive(weight_dims), bias_user,
           chosen_by_primitive(dst_dims), strides, pad, pad},
          engine(), hint);
    };
    const bool winograd = algorithm == dnnl::algorithm::convolution_winograd;
    if (winograd && winograd_weight_gradient) {
      try {
        if (used) *used = algorithm;
        return in(algorithm, forward_desc);
      } catch (const dnnl::error&) {  // direct, the same every run
      }
    }
    if (used) *used = dnnl::algorithm::convolution_direct;
    return in(dnnl::algorithm::convolution_direct,
              winograd ? forward_in(dnnl::algorithm::convolution_direct) : forward_desc);
  }

  void prepare_backward() {
    if (backward_ready) return;
    // The input gradient in the forward's algorithm (direct where oneDNN refuses
    // Winograd's for this geometry), the weight gradient as weight_gradient_desc says.
    const dnnl::convolution_backward_data::primitive_desc data = input_gradient_desc();
    const dnnl::convolution_backward_weights::primitive_desc grads = weight_gradient_desc();
    backward_data = dnnl::convolution_backward_data(data);
    backward_weights = dnnl::convolution_backward_weights(grads);
    // Where a gradient reads an operand in the forward's layout, it reads the forward's copy.
    weights_src = grads.src_desc() == forward_desc.src_desc() ? src : memory(grads.src_desc(), engine());
    diff_dst = memory(grads.diff_dst_desc(), engine());
    diff_weights = memory(grads.diff_weights_desc(), engine());
    diff_bias = memory(bias_user, engine());
    data_weights =
        data.weights_desc() == forward_desc.weights_desc() ? weights : memory(data.weights_desc(), engine());
    data_diff_dst = data.diff_dst_desc() == grads.diff_dst_desc() ? diff_dst : memory(data.diff_dst_desc(), engine());
    diff_src = memory(data.diff_src_desc(), engine());
    backward_ready = true;
  }
};

// A layer's geometry and algorithm: train.cpu_kernels = tune times both algorithms on one layer.
using GeometryKey = std::tuple<int, int, int, int, int, int, int, int, int, bool, bool, Algorithm>;
GeometryKey key_of(const ConvGeometry& g, Algorithm algorithm) {
  return {g.n, g.c, g.h, g.w, g.out_c, g.kh, g.kw, g.stride, g.padding, g.blocked_in, g.blocked_out, algorithm};
}

struct Scratch final : LayerScratch {
  std::map<GeometryKey, std::unique_ptr<Plan>> plans;
  dnnl::stream stream{engine()};
  std::vector<float> gradient;  // a weight gradient in OIHW, to add onto an accumulated one

  Plan& plan(const ConvGeometry& g, Algorithm algorithm) {
    std::unique_ptr<Plan>& p = plans[key_of(g, algorithm)];
    if (!p) p = std::make_unique<Plan>(g, algorithm);
    return *p;
  }
  // Gives `to` the user data (layout `from`) at `data`: the user's buffer itself
  // where the layouts agree (a blocked activation), else a copy in to's layout.
  void reorder_in(const memory::desc& from, const float* data, memory& to) {
    if (from == to.get_desc()) return to.set_data_handle(const_cast<float*>(data));
    memory user(from, engine(), const_cast<float*>(data));
    dnnl::reorder(user, to).execute(stream, user, to);
  }
  // Where `from` will hold a result for the user buffer `data` (layout `to`):
  // the primitive writes into the user's buffer where the layouts agree.
  void aim_out(memory& from, const memory::desc& to, float* data) {
    if (from.get_desc() == to) from.set_data_handle(data);
  }
  // Copies `from` into the user buffer `data` (layout `to`), unless the primitive
  // wrote there itself (aim_out). A result in the user's layout but in oneDNN's
  // own buffer (a weight gradient in OIHW) is still copied.
  void reorder_out(memory& from, const memory::desc& to, float* data) {
    if (from.get_data_handle() == data) return;
    memory user(to, engine(), data);
    dnnl::reorder(from, user).execute(stream, from, user);
  }
};

// oneDNN reports failures (no implementation for a shape, out of memory) as
// dnnl::error; they leave here as one line that says where.
template <class Work>
void run(const char* what, const ConvGeometry& g, Work&& work) {
  try {
    work();
  } catch (const dnnl::error& e) {
    throw RuntimeError(std::string("oneDNN convolution ") + what + " failed for a batch of " + std::to_string(g.n) +
                       " x " + std::to_string(g.c) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) + " -> " +
                       std::to_string(g.out_c) + " channels, kernel " + std::to_string(g.kh) + ": " + e.what() +
                       " (train.cpu_kernels = openblas avoids oneDNN)");
  }
}

}  // namespace

// Both passes that would run it: a forward pass on Winograd with a direct input gradient helps little.
bool winograd_available(const ConvGeometry& g, bool weight_gradient_too) {
  if (g.kh != 3 || g.kw != 3 || g.stride != 1 || g.n < 1) return false;
  try {
    const Plan plan(g, weight_gradient_too ? Algorithm::winograd_all : Algorithm::winograd);
    if (plan.algorithm != dnnl::algorithm::convolution_winograd) return false;
    dnnl::algorithm input_gradient = dnnl::algorithm::undef, weight_gradient = dnnl::algorithm::undef;
    plan.input_gradient_desc(&input_gradient);
    if (weight_gradient_too) plan.weight_gradient_desc(&weight_gradient);
    return input_gradient == dnnl::algorithm::convolution_winograd &&
           (!weight_gradient_too || weight_gradient == dnnl::algorithm::convolution_winograd);
  } catch (const dnnl::error&) {
    return false;
  }
}

bool winograd_runs() {
  static const bool runs = winograd_available({1, 16, 8, 8, 16, 3, 3, 1, 1});
  return runs;
}

std::unique_ptr<LayerScratch> make_scratch() { return std::make_unique<Scratch>(); }

void forget_inputs(LayerScratch& scratch) {
  for (auto& [key, plan] : static_cast<Scratch&>(scratch).plans) {
    plan->src_of = nullptr;
    plan->weights_of = nullptr;
    plan->diff_dst_of = nullptr;
  }
}

void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             Algorithm algorithm, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  run("forward", g, [&] {
    Plan& p = s.plan(g, algorithm);
    s.reorder_in(p.src_user, x, p.src);
    s.reorder_in(p.weights_user, weight, p.weights);
    s.reorder_in(p.bias_user, bias, p.bias);
    s.aim_out(p.dst, p.dst_user, y);
    p.forward.execute(s.stream, {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_BIAS, p.bias},
                                 {DNNL_ARG_DST, p.dst}});
    s.reorder_out(p.dst, p.dst_user, y);
    s.stream.wait();
    p.src_of = x;
    p.weights_of = weight;
  });
}

void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, Algorithm algorithm, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  run("weight gradient", g, [&] {
    Plan& p = s.plan(g, algorithm);
    p.prepare_backward();
    // The forward input is still in the plan's memory unless another input came since.
    const bool shares_forward_copy = p.weights_src.get_data_handle() == p.src.get_data_handle();
    if (p.src_of != x || !shares_forward_copy) {
      s.reorder_in(p.src_user, x, p.weights_src);
      if (shares_forward_copy) p.src_of = x;  // what the forward's copy now holds
    }
    s.reorder_in(p.dst_user, dy, p.diff_dst);
    p.backward_weights.execute(s.stream, {{DNNL_ARG_SRC, p.weights_src}, {DNNL_ARG_DIFF_DST, p.diff_dst},
                                          {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights}, {DNNL_ARG_DIFF_BIAS, p.diff_bias}});
    const std::size_t weights = static_cast<std::size_t>(g.out_c) * g.c * g.kh * g.kw;
    const float* db = static_cast<const float*>(p.diff_bias.get_data_handle());
    if (!accumulate) {
      s.reorder_out(p.diff_weights, p.weights_user, dweight);
      s.stream.wait();
      std::memcpy(dbias, db, static_cast<std::size_t>(g.out_c) * sizeof(float));
    } else {
      s.gradient.resize(weights);
      s.reorder_out(p.diff_weights, p.weights_user, s.gradient.data());
      s.stream.wait();
      for (std::size_t i = 0; i < weights; ++i) dweight[i] += s.gradient[i];
      for (int oc = 0; oc < g.out_c; ++oc) dbias[oc] += db[oc];
    }
    p.diff_dst_of = dy;
  });
}

void backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g, Algorithm algorithm,
                    LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  run("input gradient", g, [&] {
    Plan& p = s.plan(g, algorithm);
    p.prepare_backward();
    // The weights and dy are in the plan's memory from this step's forward and weight gradient.
    if (p.diff_dst_of != dy || p.data_diff_dst.get_data_handle() != p.diff_dst.get_data_handle())
      s.reorder_in(p.dst_user, dy, p.data_diff_dst);
    if (p.weights_of != weight || p.data_weights.get_data_handle() != p.weights.get_data_handle())
      s.reorder_in(p.weights_user, weight, p.data_weights);
    s.aim_out(p.diff_src, p.src_user, dx);
    p.backward_data.execute(s.stream, {{DNNL_ARG_DIFF_DST, p.data_diff_dst}, {DNNL_ARG_WEIGHTS, p.data_weights},
                                       {DNNL_ARG_DIFF_SRC, p.diff_src}});
    s.reorder_out(p.diff_src, p.src_user, dx);
    s.stream.wait();
    // Next step's dy and weights may sit in the same buffers with new values.
    p.diff_dst_of = nullptr;
    p.weights_of = nullptr;
  });
}

}  // namespace mpiddp::cpu::onednn_conv
