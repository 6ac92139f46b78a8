#include "mpiddp/cli/options.hpp"

#include <iostream>

#include "mpiddp/common/error.hpp"

namespace po = boost::program_options;

namespace mpiddp {

bool parse_command_options(const std::vector<std::string>& args, const po::options_description& options,
                           po::variables_map& values) {
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

}  // namespace mpiddp
