#pragma once
// The end of a run (rank 0): summary.json in run.dir, and the closing line.
#include "mpiddp/train/run_output.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp {

void write_summary(const TrainSummary& summary, bool classification, RunOutput& output);

}  // namespace mpiddp
