// `mpiddp bench gemm`: the speed limit set by the MLP's matrix products alone
// (forward, weight gradients and input gradients, as a training step runs
// them), on one core. scripts/bench.sh compares the trainer against it.
#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "bench_harness.hpp"
#include "bench_reference.hpp"

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/device/cpu_blas.hpp"
#include "mpiddp/device/cpu_gemm.hpp"

namespace po = boost::program_options;

namespace mpiddp {

namespace {

// The MLP's matrix products as a training step runs them: forward, then per
// layer (last first) the weight gradient and, but for the first layer, the
// input gradient. Random operands (zeros would be fast and prove nothing).
class GemmMlp {
 public:
  GemmMlp(const std::vector<int>& widths, int batch) : widths_(widths), batch_(batch) {
    const std::size_t layers = widths.size() - 1;
    for (std::size_t l = 0; l < layers; ++l) {
      const auto weights = static_cast<std::size_t>(widths[l + 1]) * widths[l];
      w_.push_back(bench::random_values(weights, 10 + l));
      b_.push_back(bench::random_values(widths[l + 1], 20 + l));
      dw_.emplace_back(weights);
      db_.emplace_back(widths[l + 1]);
    }
    for (std::size_t l = 0; l <= layers; ++l) {
      act_.push_back(bench::random_values(static_cast<std::size_t>(batch) * widths[l], 30 + l));
      grad_.push_back(bench::random_values(static_cast<std::size_t>(batch) * widths[l], 40 + l));
    }
  }

  void step() {
    const std::size_t layers = w_.size();
    for (std::size_t l = 0; l < layers; ++l)
      cpu::linear_forward(act_[l].data(), w_[l].data(), b_[l].data(), act_[l + 1].data(), batch_, widths_[l],
                          widths_[l + 1]);
    for (std::size_t l = layers; l-- > 0;) {
      cpu::linear_backward_params(act_[l].data(), grad_[l + 1].data(), dw_[l].data(), db_[l].data(), batch_,
                                  widths_[l], widths_[l + 1], false);
      if (l > 0)
        cpu::linear_backward_input(grad_[l + 1].data(), w_[l].data(), grad_[l].data(), batch_, widths_[l],
                                   widths_[l + 1]);
    }
  }

  // Every product of the last step against the plain loops, from the same operands.
  std::size_t check(std::size_t& checked) const {
    std::size_t wrong = 0;
    checked = 0;
    for (std::size_t l = 0; l < w_.size(); ++l) {
      const int in = widths_[l], out = widths_[l + 1];
      const double tolerance = 4.0 * (std::max(in, batch_) + 1) * 1.2e-7;  // float sums of that many terms
      const auto compare = [&](const float* got, const std::vector<float>& want) {
        wrong += bench::count_wrong(got, want.data(), want.size(), tolerance);
        checked += want.size();
      };
      compare(act_[l + 1].data(), bench::linear_forward(act_[l].data(), w_[l].data(), b_[l].data(), batch_, in, out));
      std::vector<float> params(dw_[l]);
      params.insert(params.end(), db_[l].begin(), db_[l].end());
      const auto want = bench::linear_params_grad(act_[l].data(), grad_[l + 1].data(), batch_, in, out);
      wrong += bench::count_wrong(params.data(), want.data(), want.size(), tolerance);
      checked += want.size();
      if (l > 0) compare(grad_[l].data(), bench::linear_input_grad(grad_[l + 1].data(), w_[l].data(), batch_, in, out));
    }
    return wrong;
  }

  double flops_per_step() const {
    double flops = 0.0;
    for (std::size_t l = 0; l + 1 < widths_.size(); ++l)  // no input gradient for layer 0
      flops += 2.0 * batch_ * widths_[l] * widths_[l + 1] * (l == 0 ? 2 : 3);
    return flops;
  }

 private:
  std::vector<int> widths_;
  int batch_;
  std::vector<std::vector<float>> w_, b_, dw_, db_, act_, grad_;
};

int bench_matmul(const std::vector<std::string>& args) {
  std::string precision = "bf16";
  int size = 8192, device = 0;
  double seconds = 2.0;
  po::options_description options("mpiddp bench matmul");
  options.add_options()("help,h", "show this help")
      ("precision", po::value(&precision)->default_value(precision), choice_list<Precision>().c_str())
      ("size", po::value(&size)->default_value(size), "m = n = k")
      ("device", po::value(&device)->default_value(device), "GPU ordinal")
      ("seconds", po::value(&seconds)->default_value(seconds), "measuring time");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  const CudaProbe probe = probe_cuda();
  if (probe.count == 0) throw InputError("bench matmul needs a GPU: " + probe.problem);
  const std::optional<Precision> kind = parse_choice<Precision>(precision);
  if (!kind) throw InputError("--precision: '" + precision + "' is not one of " + choice_list<Precision>());
  if (size < 1 || size > 65536) throw InputError("--size must be in [1, 65536], got " + std::to_string(size));
  bench::check_seconds(seconds);
  const MatmulResult result = cuda_matmul(device, *kind, size, seconds);
  std::printf("matmul %dx%dx%d %s on %s: %.1f TFLOP/s; wrong %zu of %zu\n", size, size, size, precision.c_str(),
              cuda_device_info(device).name.c_str(), result.tflops, result.wrong, result.checked);
  bench::require_right("bench matmul", result.wrong, result.checked);
  return kExitOk;
}
}  // namespace

int command_bench(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "matmul") return bench_matmul({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "conv") return command_bench_conv({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "peak") return command_bench_peak({args.begin() + 1, args.end()});
  std::string hidden = "256,128", kernels = "auto";
  int inputs = 784, outputs = 10, batch = 64, threads = 1;
  double seconds = 2.0;
  po::options_description options("mpiddp bench gemm");
  options.add_options()("help,h", "show this help")
      ("hidden", po::value(&hidden)->default_value(hidden), "hidden widths")
      ("inputs", po::value(&inputs)->default_value(inputs), "input features")
      ("outputs", po::value(&outputs)->default_value(outputs), "outputs")
      ("batch", po::value(&batch)->default_value(batch), "samples per step")
      ("threads", po::value(&threads)->default_value(threads), "BLAS threads")
      ("kernels", po::value(&kernels)->default_value(kernels), "auto, onednn or openblas (train.cpu_kernels)")
      ("seconds", po::value(&seconds)->default_value(seconds), "measuring time");
  if (args.empty() || args[0] != "gemm")
    throw InputError("usage: mpiddp bench gemm|conv|peak|matmul|mlp [options] (see --help)");
  po::variables_map values;
  if (!parse_command_options({args.begin() + 1, args.end()}, options, values)) return kExitOk;
  if (batch < 1) throw InputError("--batch must be at least 1, got " + std::to_string(batch));
  // The input-file parser checks the width list.
  const Config config = load_config("", {"--data.train", "x", "--model.hidden", hidden, "--train.batch_size",
                                         std::to_string(batch), "--train.cpu_kernels", kernels});
  check_bench_sizes("bench gemm", config, inputs, outputs, 1);
  bench::check_seconds(seconds);
  std::vector<int> widths = {inputs};
  for (int w : config.model.hidden) widths.push_back(w);
  widths.push_back(outputs);
  cpu::set_blas_threads(threads);
  cpu::use_gemm_library(config.train.cpu_kernels);
  GemmMlp mlp(widths, batch);
  bench::Times times = bench::time_calls([&] { mlp.step(); }, seconds, 20);
  std::size_t checked = 0;
  const std::size_t wrong = mlp.check(checked);
  bench::print_line("gemm-only MLP " + hidden + " batch " + std::to_string(batch) + " threads " +
                        std::to_string(threads) + " (one step)",
                    times, mlp.flops_per_step(), wrong, checked);
  std::printf("gemm-only MLP %s batch %d threads %d %s: %.0f samples/s, %.1f GFLOP/s (median step)\n", hidden.c_str(),
              batch, threads, name_of(cpu::gemm_library()), batch / times.median_s,
              mlp.flops_per_step() / times.median_s / 1e9);
  bench::require_right("bench gemm", wrong, checked);
  return kExitOk;
}

}  // namespace mpiddp
