#include "mpiddp/cli/options.hpp"

#include <iostream>

#include "mpiddp/common/error.hpp"
#include "mpiddp/train/memory_budget.hpp"

namespace po = boost::program_options;

namespace mpiddp {

bool parse_command_options(const std::vector<std::string>& args, const po::options_description& options,
                           po::variables_map& values) {
  refuse_control_characters(args, "--prompt");  // generate's prompt is text of any lines
  try {
    po::store(po::command_line_parser(args).options(options).run(), values);
    if (values.count("help")) {
      std::cout << options;
      return false;
    }
    po::notify(values);
  } catch (const po::error& e) {
    throw InputError(e.what());
  }
  return true;
}

void check_bench_sizes(const std::string& bench, const Config& config, int inputs, int outputs, int ranks_on_node) {
  if (inputs < 1) throw InputError("--inputs must be at least 1, got " + std::to_string(inputs));
  if (outputs < 1) throw InputError("--outputs must be at least 1, got " + std::to_string(outputs));
  check_memory_budget(config,
                      {0, static_cast<std::size_t>(inputs), static_cast<std::size_t>(outputs), ranks_on_node, bench});
}

}  // namespace mpiddp
