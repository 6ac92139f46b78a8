#pragma once
// What a start may find in run.dir, checked on rank 0 before anything in it is
// written (a refused start leaves every file as it was):
// - run.dir is a directory or can be created; checkpoints/ is a directory, and
//   config.ini, metrics.jsonl, summary.json, checkpoints/latest are files, where present;
// - a fresh start (no --resume) refuses a run.dir that already holds a run's
//   outputs (config.ini, metrics.jsonl, summary.json, anything in checkpoints/):
//   continue it with --resume auto, or choose another run.dir;
// - --resume auto with no checkpoint to continue from starts fresh only where no
//   finished run (summary.json) would be overwritten;
// - --resume PATH into a run.dir that holds a run needs PATH to be a checkpoint
//   of that run, or that run's metrics would be cut back to another run's step.
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"

namespace mpiddp {

// `resume`: "", "auto" or a checkpoint path; `has_checkpoints`: --resume auto
// found a candidate in checkpoints/. Throws InputError naming run.dir.
void check_run_dir(const std::string& dir, const std::string& resume, bool has_checkpoints);

// --resume PATH: refuses (IncompatibleCheckpoint) a run.dir holding a run that
// PATH is not part of: PATH is neither in its checkpoints/ nor carries the run_id
// of one of its checkpoints.
void check_resume_into(const std::string& dir, const CheckpointDirectory& checkpoints, const std::string& path);

}  // namespace mpiddp
