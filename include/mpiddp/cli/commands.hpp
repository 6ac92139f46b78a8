#pragma once
// Subcommands. Each takes the arguments after its name and returns an exit code.
#include <string>
#include <vector>

namespace mpiddp {

class ProcessGroup;

int command_train(const std::vector<std::string>& args, ProcessGroup& group);
int command_shard(const std::vector<std::string>& args);
int command_generate(const std::vector<std::string>& args);  // `generate CKPT --prompt TEXT`
int command_inspect(const std::vector<std::string>& args);
int inspect_checkpoint(const std::string& path);  // `inspect checkpoint FILE`
int inspect_layers(const std::vector<std::string>& args);  // `inspect layers [--list L] [--json]`
int command_bench(const std::vector<std::string>& args);
int command_bench_conv(const std::vector<std::string>& args);
int command_bench_peak(const std::vector<std::string>& args);  // one core's FP32 FMA peak
int command_bench_mlp(const std::vector<std::string>& args, ProcessGroup& group);

}  // namespace mpiddp
