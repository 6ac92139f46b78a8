#pragma once
// Option parsing shared by the subcommands other than `train`.
#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace mpiddp {

// Parses `args` against `options` (which must have "help"). Returns false after
// printing the help text when --help was given; throws InputError on a bad option.
bool parse_command_options(const std::vector<std::string>& args,
                           const boost::program_options::options_description& options,
                           boost::program_options::variables_map& values);

}  // namespace mpiddp
