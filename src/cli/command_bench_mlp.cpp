// `mpiddp bench mlp`: training-step speed of an MLP on synthetic data through
// the real code path (device, reducer, transport, optimizer), run under
// mpirun/srun. --layers takes a model.layers list instead (a CNN, say, with
// --input-shape C,H,W); its FLOPs are counted from the layers' geometry. With --comm both it times each step with the gradient all-reduce
// and with none at all, so the exposed communication cost is the difference.
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_harness.hpp"

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/random.hpp"
#include "mpiddp/train/compute_setup.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/dist/watchdog.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/train/step.hpp"

namespace po = boost::program_options;

namespace mpiddp {
namespace {

// Lets the reducer skip communication entirely (the "no communication" baseline).
class NoTransport final : public GradientTransport {
 public:
  std::string name() const override { return "none"; }
  int size() const override { return 1; }
  std::unique_ptr<PendingReduction> start(std::size_t, float*, std::size_t, bool) override { return nullptr; }
  std::unique_ptr<PendingReduction> start_reduce_scatter(std::size_t, float*, const std::vector<std::size_t>&,
                                                          bool) override {
    return nullptr;
  }
  void allgather_shards(float*, const std::vector<std::size_t>&) override {}
  // One rank: every collective leaves the data as it is.
  void allgather_now(const float*, float*, std::size_t) override {
    throw std::logic_error("bench mlp has no layer that gathers across ranks");
  }
  void allreduce_sum_now(float*, std::size_t) override {}
  void broadcast_now(float*, std::size_t, int) override {}
};

// FLOPs of one training step on `batch` samples: each Linear and Conv2d layer
// does weight-count x output-positions multiply-adds per sample forward, as many
// for its weight gradient and, except as the first layer (no input gradient),
// for its input gradient. The weight is the layer's first parameter.
double training_flops(const Sequential& model, int batch) {
  double flops = 0.0;
  Shape shape = model.input_shape();
  for (std::size_t l = 0; l < model.layers().size(); ++l) {
    const Layer& layer = *model.layers()[l];
    const Shape out = layer.output_shape(shape);
    const std::string kind = layer.kind();
    if ((kind == "Linear" || kind == "Conv2d") && !layer.parameter_indices().empty()) {
      const double weights = static_cast<double>(model.parameters().list()[layer.parameter_indices()[0]].count);
      const double positions = static_cast<double>(element_count(out)) / static_cast<double>(out[0]);
      flops += 2.0 * batch * weights * positions * (l == 0 ? 2 : 3);
    }
    shape = out;
  }
  return flops;
}

// The bench's own check, as nccl-tests checks its collectives: after steps with
// the gradient all-reduce every rank must hold rank 0's parameters bit for bit
// (and all finite). Collective; returns the count of values that are not so on
// any rank, and the count checked in `checked`.
std::size_t parameters_off_rank0(ParameterStore& params, Communicator& comm, std::size_t& checked) {
  params.pull_values();
  const std::size_t count = params.total();
  std::vector<float> mine(params.host_values(), params.host_values() + count), root(mine);
  comm.broadcast(root.data(), count * sizeof(float), 0);
  double wrong = 0.0;  // exact as a double up to 2^53
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(mine[i]) || std::memcmp(&mine[i], &root[i], sizeof(float)) != 0) wrong += 1.0;
  comm.allreduce_sum(&wrong, 1);
  checked = count * static_cast<std::size_t>(comm.size());
  return static_cast<std::size_t>(wrong);
}

}  // namespace

int command_bench_mlp(const std::vector<std::string>& args, ProcessGroup& group) {
  std::string hidden = "256,128", device = "auto", precision = "fp32", backend = "auto", comm_mode = "both";
  std::string allreduce_dtype = "fp32", data_mode = "resident", layers, input_shape;
  int inputs = 784, outputs = 10, batch = 64, steps = 50, warmup = 5;
  po::options_description options("mpiddp bench mlp (run under mpirun/srun)");
  options.add_options()("help,h", "show this help")
      ("hidden", po::value(&hidden)->default_value(hidden), "hidden widths")
      ("inputs", po::value(&inputs)->default_value(inputs), "input features")
      ("outputs", po::value(&outputs)->default_value(outputs), "classes")
      ("layers", po::value(&layers), "a model.layers list instead of the MLP of --hidden (e.g. a CNN)")
      ("input-shape", po::value(&input_shape), "with --layers: one sample's shape C,H,W (default: --inputs features)")
      ("batch", po::value(&batch)->default_value(batch), "samples per rank per step")
      ("steps", po::value(&steps)->default_value(steps), "timed steps")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed steps first")
      ("device", po::value(&device)->default_value(device), "train.device")
      ("precision", po::value(&precision)->default_value(precision), "train.precision")
      ("backend", po::value(&backend)->default_value(backend), "dist.backend")
      ("allreduce-dtype", po::value(&allreduce_dtype)->default_value(allreduce_dtype), "ddp.allreduce_dtype")
      ("data", po::value(&data_mode)->default_value(data_mode),
       "resident (the batch stays on the device: compute only) | staged (copied from the host every step)")
      ("comm", po::value(&comm_mode)->default_value(comm_mode),
       "on (all-reduce every step, even on 1 rank) | none | both");
  po::variables_map values;
  bool run = false;
  agree_or_fail(group.world(), [&] {
    run = parse_command_options(args, options, values);
    if (comm_mode != "on" && comm_mode != "none" && comm_mode != "both")
      throw InputError("--comm must be on, none or both");
    if (data_mode != "resident" && data_mode != "staged") throw InputError("--data must be resident or staged");
    if (steps < 1 || warmup < 0) throw InputError("--steps must be at least 1 and --warmup at least 0");
    if (batch < 1) throw InputError("--batch must be at least 1, got " + std::to_string(batch));
  });
  if (!run) return kExitOk;
  Config config;
  agree_or_fail(group.world(), [&] {
    std::vector<std::string> settings = {
        "--data.train", "synthetic", "--model.hidden", hidden, "--train.device", device, "--train.precision",
        precision, "--dist.backend", backend, "--ddp.allreduce_dtype", allreduce_dtype, "--optim.name", "adamw",
        "--train.batch_size", std::to_string(batch)};
    if (!layers.empty()) settings.insert(settings.end(), {"--model.layers", layers});
    if (!input_shape.empty()) {
      if (layers.empty()) throw InputError("--input-shape goes with --layers");
      settings.insert(settings.end(), {"--model.input_shape", input_shape});
    }
    config = load_config("", settings);
    if (!config.model.input_shape.empty()) inputs = static_cast<int>(element_count(config.model.input_shape));
    check_bench_sizes("bench mlp", config, inputs, outputs, group.local_size());
  });
  Communicator& comm = group.world();
  // As in training: a hung collective, GPU wait or NCCL teardown ends the job
  // with one line after dist.timeout_s (it stays on until the process ends).
  Watchdog::instance().start(config.dist.timeout_s, comm.rank());
  ComputeSetup compute = setup_compute(config, group);
  const Shape sample = config.model.input_shape.empty() ? Shape{static_cast<std::size_t>(inputs)}
                                                       : Shape(config.model.input_shape.begin(), config.model.input_shape.end());
  auto model = build_model(config.model, sample, static_cast<std::size_t>(outputs), 1, compute.device);
  auto optimizer = make_optimizer(config.optim, compute.device);

  // One synthetic batch per rank, staged every step like real data.
  std::vector<Batch> micro(1);
  micro[0].features.resize(static_cast<std::size_t>(batch), static_cast<std::size_t>(inputs));
  micro[0].class_ids.resize(static_cast<std::size_t>(batch));
  CounterRng rng(static_cast<std::uint64_t>(comm.rank()) + 11);
  for (std::size_t i = 0; i < micro[0].features.size(); ++i) micro[0].features.data()[i] = rng.uniform(i) - 0.5f;
  for (int i = 0; i < batch; ++i) micro[0].class_ids[i] = static_cast<std::int32_t>(rng.bits(i) % outputs);

  const double flops = training_flops(*model, batch);  // per rank per step

  // Resident: staged once into slot 0 and reused by every step.
  const StagedBatch resident = compute.device->stage(micro[0], 0);
  NoTransport none;
  auto time_steps = [&](bool communicate) {
    GradientReducer reducer(model->parameters(), comm, 1 << 20, 25 << 20,
                            communicate ? compute.transport.get() : &none);
    reducer.set_reduce_single_rank(communicate);
    StepInputs in;
    in.micro_batches = &micro;
    in.lr = 1e-4;
    if (data_mode == "resident") in.resident = &resident;
    auto one_step = [&] {
      if (forward_backward(*model, reducer, in).finite)
        optimizer->step(model->parameters().values(), model->parameters().grads(), model->parameters().total(), in.lr);
    };
    for (int i = 0; i < warmup; ++i) one_step();
    compute.device->synchronize();
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) one_step();
    compute.device->synchronize();
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The slowest rank sets the pace.
    const double slowest = static_cast<double>(comm.allreduce_max(static_cast<std::int64_t>(local * 1e9))) / 1e9;
    return slowest / steps;  // seconds per step
  };

  double with = 0.0, without = 0.0;  // seconds per step
  std::size_t wrong = 0, checked = 0;
  if (comm_mode != "none") {
    with = time_steps(true);
    wrong = parameters_off_rank0(model->parameters(), comm, checked);
  }
  if (comm_mode != "on") without = time_steps(false);
  if (comm.rank() == 0) {
    const std::string shape =
        layers.empty() ? std::to_string(inputs) + "-" + hidden + "-" + std::to_string(outputs)
                       : shape_text(sample) + " -> " + layers + " -> " + std::to_string(outputs) + " (" +
                             std::to_string(model->parameters().total()) + " parameters, " +
                             std::to_string(static_cast<long long>(flops / batch / 1e6)) + " MFLOP per sample)";
    std::printf("bench mlp: %s, batch %d per rank, %d rank(s), device %s, precision %s, gradients over %s, "
                "data %s\n",
                shape.c_str(), batch, comm.size(), compute.device->describe().c_str(),
                name_of(compute.device->precision()), compute.transport->name().c_str(), data_mode.c_str());
    std::printf("%-22s %12s %14s %12s\n", "mode", "step ms", "samples/s", "TFLOP/s");
    auto row = [&](const char* mode, double step_s) {
      std::printf("%-22s %12.3f %14.0f %12.2f\n", mode, step_s * 1e3, batch * comm.size() / step_s,
                  flops * comm.size() / step_s / 1e12);
    };
    if (comm_mode != "none") row("with all-reduce", with);
    if (comm_mode != "on") row("no communication", without);
    if (comm_mode == "both")
      std::printf("exposed communication: %.1f%% of the step\n",
                  100.0 * std::max(0.0, with - without) / with);
    if (comm_mode != "none")
      std::printf("check: wrong %zu of %zu (every rank's parameters after the all-reduced steps are rank 0's, "
                  "finite)\n", wrong, checked);
    std::fflush(stdout);
  }
  bench::require_right("bench mlp", wrong, checked);
  return kExitOk;
}

}  // namespace mpiddp
