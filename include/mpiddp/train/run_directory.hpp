#pragma once
// What a start may find in run.dir, checked on rank 0 before anything in it is
// written (a refused start leaves every file as it was):
// - run.dir is a directory or can be created; checkpoints/ is a directory, and
//   config.ini, metrics.jsonl, summary.json, checkpoints/latest are files, where present;
// - a fresh start (no --resume) refuses a run.dir that already holds a run's
//   outputs (config.ini, metrics.jsonl, summary.json, anything in checkpoints/):
//   continue it with --resume auto, or choose another run.dir;
// - --resume auto with no checkpoint to continue from starts fresh only where no
//   finished run (summary.json) would be overwritten.
#include <string>

namespace mpiddp {

// `resume`: "", "auto" or a checkpoint path; `has_checkpoints`: --resume auto
// found a candidate in checkpoints/. Throws InputError naming run.dir.
void check_run_dir(const std::string& dir, const std::string& resume, bool has_checkpoints);

}  // namespace mpiddp
