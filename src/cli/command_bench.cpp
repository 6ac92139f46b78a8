// `mpiddp bench gemm`: the speed limit set by the MLP's matrix products alone
// (forward, weight gradients and input gradients, as a training step runs
// them), on one core. scripts/bench.sh compares the trainer against it.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <optional>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/device/cpu_blas.hpp"
#include "mpiddp/device/matrix.hpp"

namespace po = boost::program_options;

namespace mpiddp {

namespace {
void check_seconds(double seconds) {
  if (!(seconds > 0.0 && seconds <= 3600.0)) throw InputError("--seconds must be in (0, 3600], got " + std::to_string(seconds));
}

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
  check_seconds(seconds);
  const double tflops = cuda_matmul_tflops(device, *kind, size, seconds);
  std::printf("matmul %dx%dx%d %s on %s: %.1f TFLOP/s\n", size, size, size, precision.c_str(),
              cuda_device_info(device).name.c_str(), tflops);
  return kExitOk;
}
}  // namespace

int command_bench(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "matmul") return bench_matmul({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "conv") return command_bench_conv({args.begin() + 1, args.end()});
  std::string hidden = "256,128";
  int inputs = 784, outputs = 10, batch = 64, threads = 1;
  double seconds = 2.0;
  po::options_description options("mpiddp bench gemm");
  options.add_options()("help,h", "show this help")
      ("hidden", po::value(&hidden)->default_value(hidden), "hidden widths")
      ("inputs", po::value(&inputs)->default_value(inputs), "input features")
      ("outputs", po::value(&outputs)->default_value(outputs), "outputs")
      ("batch", po::value(&batch)->default_value(batch), "samples per step")
      ("threads", po::value(&threads)->default_value(threads), "BLAS threads")
      ("seconds", po::value(&seconds)->default_value(seconds), "measuring time");
  if (args.empty() || args[0] != "gemm")
    throw InputError("usage: mpiddp bench gemm|conv|matmul|mlp [options] (see --help)");
  po::variables_map values;
  if (!parse_command_options({args.begin() + 1, args.end()}, options, values)) return kExitOk;
  if (batch < 1) throw InputError("--batch must be at least 1, got " + std::to_string(batch));
  // The input-file parser checks the width list.
  const Config config =
      load_config("", {"--data.train", "x", "--model.hidden", hidden, "--train.batch_size", std::to_string(batch)});
  check_bench_sizes("bench gemm", config, inputs, outputs, 1);
  check_seconds(seconds);
  std::vector<int> widths = {inputs};
  for (int w : config.model.hidden_sizes) widths.push_back(w);
  widths.push_back(outputs);
  cpu::set_blas_threads(threads);

  const std::size_t layers = widths.size() - 1;
  std::vector<Matrix> w(layers), dw(layers), act(layers + 1), grad(layers + 1);
  std::vector<std::vector<float>> b(layers), db(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    w[l] = Matrix(widths[l + 1], widths[l]);
    dw[l] = Matrix(widths[l + 1], widths[l]);
    b[l].assign(widths[l + 1], 0.0f);
    db[l].assign(widths[l + 1], 0.0f);
  }
  for (std::size_t l = 0; l <= layers; ++l) {
    act[l] = Matrix(batch, widths[l]);
    grad[l] = Matrix(batch, widths[l]);
  }
  double flops_per_step = 0.0;
  for (std::size_t l = 0; l < layers; ++l)
    flops_per_step += 2.0 * batch * widths[l] * widths[l + 1] * (l == 0 ? 2 : 3);  // no input gradient for layer 0

  auto step = [&] {
    for (std::size_t l = 0; l < layers; ++l)
      cpu::linear_forward(act[l].data(), w[l].data(), b[l].data(), act[l + 1].data(), batch, widths[l], widths[l + 1]);
    for (std::size_t l = layers; l-- > 0;) {
      cpu::linear_backward_params(act[l].data(), grad[l + 1].data(), dw[l].data(), db[l].data(), batch, widths[l],
                                  widths[l + 1], false);
      if (l > 0) cpu::linear_backward_input(grad[l + 1].data(), w[l].data(), grad[l].data(), batch, widths[l], widths[l + 1]);
    }
  };
  for (int i = 0; i < 20; ++i) step();
  const auto start = std::chrono::steady_clock::now();
  long steps = 0;
  double elapsed = 0.0;
  while (elapsed < seconds) {
    for (int i = 0; i < 20; ++i) step();
    steps += 20;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("gemm-only MLP %s batch %d threads %d: %.0f samples/s, %.1f GFLOP/s\n", hidden.c_str(), batch, threads,
              static_cast<double>(steps) * batch / elapsed, flops_per_step * steps / elapsed / 1e9);
  return kExitOk;
}

}  // namespace mpiddp
