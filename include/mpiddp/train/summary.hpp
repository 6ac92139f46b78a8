#pragma once
// The end of a run (rank 0): summary.json in run.dir, and the closing line.
#include "mpiddp/train/run_output.hpp"
#include "mpiddp/train/session.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp {

// Collective: the memory figures of summary.json (every rank's peaks gathered).
void record_memory(TrainSummary& summary, const TrainingSession& session);

void write_summary(const TrainSummary& summary, bool classification, RunOutput& output);

}  // namespace mpiddp
