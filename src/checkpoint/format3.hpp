#pragma once
// Checkpoint format 3 (before typed settings) kept only the resolved input file
// for the settings a resume compares; this reads them from that text.
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"

namespace mpiddp {

// Fills batch_size, accumulate, shuffle and drop_last from state.config_ini.
void read_format3_sample_order(TrainingState& state, const std::string& path);

}  // namespace mpiddp
