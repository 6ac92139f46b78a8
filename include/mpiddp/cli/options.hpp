#pragma once
// Option parsing shared by the subcommands other than `train`.
#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"

namespace mpiddp {

// Parses `args` against `options` (which must have "help"). Returns false after
// printing the help text when --help was given; throws InputError on a bad option.
bool parse_command_options(const std::vector<std::string>& args,
                           const boost::program_options::options_description& options,
                           boost::program_options::variables_map& values);

// A synthetic benchmark's sizes (--batch as config.train.batch_size, --hidden as
// model.hidden, --inputs, --outputs), checked like a training job's before
// anything is allocated: at least 1, and within this node's memory. Throws InputError.
void check_bench_sizes(const std::string& bench, const Config& config, int inputs, int outputs, int ranks_on_node);

}  // namespace mpiddp
