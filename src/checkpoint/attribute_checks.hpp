#pragma once
// A checkpoint's attributes are input like any file: each is range-checked on
// its own and against the others before anything is loaded (private to the
// checkpoint module).
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"

namespace mpiddp {

// Each attribute on its own (and the step in the file name). Throws InputError
// naming `path` and the first attribute out of range.
void check_attributes(const TrainingState& state, const std::string& path);
// The counters against the position (run after the caller placed the position
// in its step plan): skipped steps, the optimizer's steps, the progress window.
void check_counters(const TrainingState& state, const std::string& path);

}  // namespace mpiddp
