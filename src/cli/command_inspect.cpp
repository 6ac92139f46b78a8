#include <boost/program_options.hpp>
#include <cstdio>
#include <utility>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/memory.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/device/cuda.hpp"

namespace po = boost::program_options;

namespace mpiddp {

namespace {
int inspect_sampler(const std::vector<std::string>& args) {
  SamplerOptions o;
  po::options_description options("mpiddp inspect sampler");
  options.add_options()("help,h", "show this help")
      ("size", po::value(&o.size)->required(), "data set size N")
      ("world", po::value(&o.world)->default_value(1), "number of ranks")
      ("rank", po::value(&o.rank)->default_value(0), "rank to print")
      ("seed", po::value(&o.seed)->default_value(0), "train.seed")
      ("epoch", po::value(&o.epoch)->default_value(0), "epoch (0-based)")
      ("drop-last", po::bool_switch(&o.drop_last), "drop the tail instead of padding")
      ("no-shuffle", "keep the natural order");
  po::variables_map values;
  if (!parse_command_options(args, options, values)) return kExitOk;
  o.shuffle = values.count("no-shuffle") == 0;
  if (o.size < 1) throw InputError("--size must be at least 1");
  if (o.world < 1) throw InputError("--world must be at least 1");
  if (o.rank < 0 || o.rank >= o.world) throw InputError("--rank must be in [0, world)");
  // The permutation of all N samples and this rank's share are held in memory.
  const double need = (static_cast<double>(o.size) + static_cast<double>(samples_per_rank(o.size, o.world, o.drop_last))) *
                      sizeof(std::int64_t);
  if (const double memory = static_cast<double>(physical_memory_bytes()); memory > 0 && need > memory)
    throw InputError("--size " + std::to_string(o.size) + ": the sampler would need " + bytes_text(need) +
                     ", more than this machine's " + bytes_text(memory) + " of memory");
  const auto indices = distributed_sampler_indices(o);
  for (std::size_t i = 0; i < indices.size(); ++i) std::printf(i ? " %lld" : "%lld", static_cast<long long>(indices[i]));
  std::printf("\n");
  return kExitOk;
}
// What train.device = auto would find, for job scripts and for the gpu tests.
int inspect_devices() {
  std::printf("mpiddp %s: CUDA %s, NCCL %s\n", MPIDDP_VERSION, built_with_cuda() ? "yes" : "no",
              built_with_nccl() ? "yes" : "no");
  if (built_with_cuda()) {
    // Whether this process can run products and conv2d on a GPU (cuBLAS and cuDNN
    // are opened at run time).
    for (const auto& [name, library] : {std::pair{"cuBLAS", &cublas_info()}, std::pair{"cuDNN", &cudnn_info()}}) {
      if (library->loaded) std::printf("%s yes: %s (%s)\n", name, library->version.c_str(), library->library.c_str());
      else std::printf("%s no - %s\n", name, library->problem.c_str());
    }
  }
  const CudaProbe probe = probe_cuda();
  std::printf("usable GPUs: %d%s%s\n", probe.count, probe.problem.empty() ? "" : " - ", probe.problem.c_str());
  for (int i = 0; i < probe.count; ++i) {
    const CudaDeviceInfo info = cuda_device_info(i);
    std::printf("GPU %d: %s, PCI %s, %.1f GiB\n", i, info.name.c_str(), info.pci_bus_id.c_str(), info.memory_gib);
  }
  return kExitOk;
}
}  // namespace

int command_inspect(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: mpiddp inspect sampler --size N [--world W --rank R --seed S --epoch E --drop-last --no-shuffle]\n"
                "       mpiddp inspect devices\n"
                "       mpiddp inspect checkpoint FILE.h5\n"
                "       mpiddp inspect layers [--list 'LAYER LIST' --classes N] [--json]\n");
    return args.empty() ? kExitInputError : kExitOk;
  }
  if (args[0] == "sampler") return inspect_sampler({args.begin() + 1, args.end()});
  if (args[0] == "devices") return inspect_devices();
  if (args[0] == "layers") return inspect_layers({args.begin() + 1, args.end()});
  if (args[0] == "checkpoint") {
    if (args.size() != 2) throw InputError("usage: mpiddp inspect checkpoint FILE.h5");
    return inspect_checkpoint(args[1]);
  }
  throw InputError("unknown inspect target '" + args[0] + "' (known: sampler, devices, checkpoint, layers)");
}

}  // namespace mpiddp
