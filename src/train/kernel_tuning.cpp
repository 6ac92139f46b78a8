#include "mpiddp/train/kernel_tuning.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "mpiddp/common/random.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "ops/conv/thin_conv.hpp"

namespace mpiddp {
namespace {

// A library replaces oneDNN (the default) only when it is this much faster: a
// close call keeps the default, so machine noise rarely flips a choice.
constexpr double kSwitchMargin = 1.10;
constexpr int kMinWarmUpPasses = 2;
constexpr double kWarmUpMs = 30;
constexpr int kTimedPasses = 5;

// In the device's memory, as the layers' own activations are (aligned as they
// are: oneDNN's products are much slower on the 16-byte alignment of a vector).
Matrix filled(Device& device, std::size_t rows, std::size_t cols, std::uint64_t key) {
  std::vector<float> values(rows * cols);
  const CounterRng rng(key);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = rng.uniform(i) - 0.5f;
  Matrix m(&device);
  m.resize(rows, cols);
  device.copy_to_device(m.data(), values.data(), values.size() * sizeof(float));
  return m;
}

// The fastest of kTimedPasses forward + backward passes of `layer` on `library`
// (its input gradient only where training computes one), in milliseconds, after
// warm-up passes. The gradients it writes are overwritten by the first training step.
double time_layer(Layer& layer, const Shape& in, std::size_t samples, bool input_grad, CpuKernels library,
                  ParameterStore& params) {
  Device& device = params.device();
  const Matrix x = filled(device, samples, element_count(in), 1);
  const Matrix dy = filled(device, samples, element_count(layer.output_shape(in)), 2);
  Matrix y(&device), dx(&device);
  const cpu::LibraryScope scope(library);
  ForwardContext ctx;
  ctx.alone = true;
  const auto pass = [&] {
    const auto start = std::chrono::steady_clock::now();
    layer.forward(x, y, ctx);
    layer.backward(x, y, dy, input_grad ? &dx : nullptr, params, false);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  // The first pass builds the library's kernels (about 45 ms for oneDNN), and
  // oneDNN's next passes on a shape still run 3-6x slower than its steady state
  // for about 10 ms on the development machine: warm up for a while after it.
  pass();
  double warmed = 0;
  for (int done = 0; done < kMinWarmUpPasses || warmed < kWarmUpMs; ++done) warmed += pass();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kTimedPasses; ++i) best = std::min(best, pass());
  return best;
}

// Whether a layer named so reads the model's input, whose gradient training never
// computes: the first layer, and the first of each branch inside it, at any depth
// ("layers.0", "layers.0.body.0", "layers.0.shortcut.0.body.0").
bool takes_model_input(const std::string& name) {
  for (std::size_t at = 0; (at = name.find('.', at)) != std::string::npos; ++at) {
    const std::size_t end = name.find('.', at + 1);
    const std::string part = name.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part != "0") return false;
  }
  return true;
}

}  // namespace

std::vector<TunedLayer> tune_cpu_kernels(Sequential& model, std::size_t samples, int threads,
                                         bool winograd_everywhere) {
  std::vector<TunedLayer> tuned;
  if (!cpu::onednn_linked() || !model.device().is_host() || samples == 0) return tuned;
  model.visit_layers([&](const std::string& name, Layer& layer, const Shape& in) {
    if (!layer.has_own_products()) return;
    TunedLayer t{name, layer.kind()};
    const bool input_grad = !takes_model_input(name);
    const auto time_on = [&](CpuKernels library) {
      return time_layer(layer, in, samples, input_grad, library, model.parameters());
    };
    t.onednn_ms = time_on(CpuKernels::onednn);
    t.openblas_ms = time_on(CpuKernels::openblas);
    const bool own = layer.has_own_kernels() && cpu::thin_conv::available();
    if (own) t.own_ms = time_on(CpuKernels::own);
    const bool winograd = winograd_everywhere && layer.has_winograd();
    if (winograd) t.winograd_ms = time_on(CpuKernels::winograd);
    if (winograd && layer.has_winograd_weight_gradient()) t.winograd_all_ms = time_on(CpuKernels::winograd_all);
    if (layer.has_own_winograd()) {
      t.own_winograd_ms = time_on(CpuKernels::own_winograd);
      t.own_winograd4_ms = time_on(CpuKernels::own_winograd4);
    }
    // The default, then whichever beats the best so far by the margin.
    t.chosen = own && layer.own_kernels_suit(threads) ? CpuKernels::own : CpuKernels::onednn;
    const std::pair<CpuKernels, double> timed[] = {{CpuKernels::onednn, t.onednn_ms},
                                                   {CpuKernels::openblas, t.openblas_ms},
                                                   {CpuKernels::own, t.own_ms},
                                                   {CpuKernels::winograd, t.winograd_ms},
                                                   {CpuKernels::winograd_all, t.winograd_all_ms},
                                                   {CpuKernels::own_winograd, t.own_winograd_ms},
                                                   {CpuKernels::own_winograd4, t.own_winograd4_ms}};
    double best = 0;
    for (const auto& [library, ms] : timed)
      if (library == t.chosen) best = ms;
    for (const auto& [library, ms] : timed)
      if (ms >= 0 && library != t.chosen && ms * kSwitchMargin < best) {
        t.chosen = library;
        best = ms;
      }
    layer.set_cpu_kernels(t.chosen);
    tuned.push_back(t);
  });
  return tuned;
}

std::string describe_tuning(const std::vector<TunedLayer>& tuned) {
  std::string text = "CPU kernels timed per layer (train.cpu_kernels = tune; ms for one batch forward and backward, "
                     "oneDNN / OpenBLAS [/ own] [/ winograd] [/ winograd_all] [/ own_winograd / own_winograd4]):\n";
  for (const TunedLayer& t : tuned) {
    char line[480];
    char own[40] = "", winograd[40] = "", winograd_all[48] = "", own_winograd[80] = "";
    if (t.own_ms >= 0) std::snprintf(own, sizeof(own), " / own %.3f", t.own_ms);
    if (t.winograd_ms >= 0) std::snprintf(winograd, sizeof(winograd), " / winograd %.3f", t.winograd_ms);
    if (t.winograd_all_ms >= 0)
      std::snprintf(winograd_all, sizeof(winograd_all), " / winograd_all %.3f", t.winograd_all_ms);
    if (t.own_winograd_ms >= 0)
      std::snprintf(own_winograd, sizeof(own_winograd), " / own_winograd %.3f / own_winograd4 %.3f",
                    t.own_winograd_ms, t.own_winograd4_ms);
    std::snprintf(line, sizeof(line), "  %-24s %-8s %-12s (%.3f / %.3f%s%s%s%s)\n", t.name.c_str(), t.kind.c_str(),
                  name_of(t.chosen), t.onednn_ms, t.openblas_ms, own, winograd, winograd_all, own_winograd);
    text += line;
  }
  return text;
}

}  // namespace mpiddp
