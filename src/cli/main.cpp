// mpiddp: one binary, subcommands. MPI is initialised only for `train` and
// `bench mlp`, so `shard`, `inspect` and the other benchmarks run anywhere
// without a launcher.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/train/signals.hpp"

namespace {

const char* kUsage =
    "usage: mpiddp <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  train CONFIG.ini [--section.key value ...]   data-parallel training (launch with mpirun/srun)\n"
    "  shard --format idx|csv|bytes|llmc ... --out DIR  convert a data set into HDF5 shards\n"
    "  generate CKPT --prompt TEXT [--tokens N]       continue a text with a byte-level model\n"
    "  inspect sampler --size N --world W --rank R    print a rank's DistributedSampler indices\n"
    "  inspect devices                                the GPUs this process can use\n"
    "  bench gemm [--batch B --hidden W,...]          speed limit of the MLP's matrix products (CPU)\n"
    "  bench peak [--seconds S]                       one core's FP32 FMA peak per vector ISA\n"
    "  bench matmul [--precision bf16 --size N]       a large GPU matrix product's TFLOP/s\n"
    "  bench mlp [--device cuda --comm both ...]      training-step speed on synthetic data (mpirun/srun)\n"
    "  version                                        print the version\n"
    "\n"
    "`mpiddp COMMAND --help` describes a command's arguments.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace mpiddp;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitInputError;
  }
  // Before anything starts CUDA (MPI might): see device/cuda.hpp for why.
  prefer_eager_cuda_module_loading();
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (command == "version" || command == "--version") {
    std::printf("mpiddp %s\n", MPIDDP_VERSION);
    return kExitOk;
  }
  const bool mpi_bench = command == "bench" && !args.empty() && args[0] == "mlp";
  if (command == "shard" || command == "inspect" || command == "generate" || (command == "bench" && !mpi_bench)) {
    try {
      if (command == "bench") return command_bench(args);
      if (command == "generate") return command_generate(args);
      return command == "shard" ? command_shard(args) : command_inspect(args);
    } catch (const std::exception& e) {
      // The same prefix as `train`'s errors: scripts grep for "mpiddp: error:".
      std::fprintf(stderr, "mpiddp: error: %s\n", printable(error_text(e)).c_str());
      return exit_code_of(e);
    }
  }
  if (command != "train" && !mpi_bench) {
    std::fprintf(stderr, "mpiddp: error: unknown command '%s'\n%s", printable(command).c_str(), kUsage);
    return kExitInputError;
  }

  int exit_code = kExitOk;
  // Before MPI starts: a pre-emption signal during start-up must not kill the rank.
  install_stop_signal_handlers();
  {
    std::optional<ProcessGroup> started;
    try {
      started.emplace(&argc, &argv);
    } catch (const std::exception& e) {
      // MPI did not start (or its start-up checks failed): no rank is known yet.
      std::fprintf(stderr, "mpiddp: error: starting MPI: %s\n", printable(error_text(e)).c_str());
      ProcessGroup::abort_job(exit_code_of(e));
    }
    ProcessGroup& group = *started;
    try {
      exit_code = mpi_bench ? command_bench_mlp({args.begin() + 1, args.end()}, group) : command_train(args, group);
    } catch (const JobFailed& failed) {
      // Every rank agreed on the failure and the owner printed it: finish cleanly.
      exit_code = failed.exit_code;
    } catch (const std::exception& e) {
      // Only this rank knows: the others may be inside a collective, so end them all.
      report_error(group.rank(), error_text(e));
      ProcessGroup::abort_job(exit_code_of(e));
    }
  }
  return exit_code;
}
