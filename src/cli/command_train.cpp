#include <cstdio>

#include "mpiddp/cli/commands.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp {

int command_train(const std::vector<std::string>& args, ProcessGroup& group) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    if (group.rank() == 0)
      std::printf("usage: mpiddp train CONFIG.ini [--resume auto|CHECKPOINT] [--section.key value ...]\n\n%s",
                  config_reference().c_str());
    return kExitOk;
  }
  std::string path, resume;
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume" || args[i].rfind("--resume=", 0) == 0) {
      // Not an input-file key: how to start, not what to train.
      if (args[i] == "--resume" && i + 1 == args.size()) {
        if (group.rank() == 0) report_error(0, "command line: --resume needs 'auto' or a checkpoint path");
        return kExitInputError;
      }
      resume = args[i] == "--resume" ? args[++i] : args[i].substr(9);
    } else if (i == 0 && args[i].rfind("--", 0) != 0) {
      path = args[i];
    } else {
      overrides.push_back(args[i]);
    }
  }
  Config config;
  // Every rank parses the same file, so every rank fails alike: rank 0 speaks.
  agree_or_fail(group.world(), [&] { config = load_config(path, overrides); });
  const TrainSummary summary = run_training(config, group, resume);
  return summary.preempted ? kExitPreempted : kExitOk;
}

}  // namespace mpiddp
