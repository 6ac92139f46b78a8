#pragma once
// Every rank must train with the same settings: ranks started with different
// input files or overrides (an MPMD launch, a wrapper script that differs per
// node) would train divergent replicas. Compared at start-up, before anything is
// written.
#include <string>

#include "mpiddp/config/config.hpp"
#include "mpiddp/dist/communicator.hpp"

namespace mpiddp {

// Collective. Compares a digest of the resolved input file and the --resume
// argument with rank 0's; on a difference the lowest differing rank names the
// first differing key with both values, and every rank exits 2.
void check_same_settings(Communicator& comm, const Config& config, const std::string& resume);

}  // namespace mpiddp
