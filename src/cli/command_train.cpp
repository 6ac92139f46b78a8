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
      std::printf("usage: mpiddp train CONFIG.ini [--section.key value ...]\n\n%s", config_reference().c_str());
    return kExitOk;
  }
  std::string path;
  std::vector<std::string> overrides = args;
  if (!args.empty() && args[0].rfind("--", 0) != 0) {
    path = args[0];
    overrides.erase(overrides.begin());
  }
  Config config;
  // Every rank parses the same file, so every rank fails alike: rank 0 speaks.
  agree_or_fail(group.world(), [&] { config = load_config(path, overrides); });
  run_training(config, group);
  return kExitOk;
}

}  // namespace mpiddp
