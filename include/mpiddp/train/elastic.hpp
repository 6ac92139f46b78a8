#pragma once
// Elastic resume: a checkpoint continues at another world size, batch or
// accumulation. The epoch in progress goes on with the rest of its global
// order, split over the new world (sampler.hpp's remaining_share); later epochs
// are the new world's own; the learning-rate schedule follows the position in
// the data, counted in this job's steps; global_step keeps counting the steps
// actually taken. The rules are in docs/resume.md, "Elastic resume".
#include <cstdint>
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/train/session.hpp"

namespace mpiddp {

// The learning-rate schedule's step at a position: completed epochs x this job's
// steps per epoch, plus the whole steps of this job's global batch in the samples
// done of the epoch in progress. In a run that never changed its world size or
// batch this is global_step itself (every step before the last of an epoch takes
// exactly one global batch).
std::int64_t schedule_step(const StepPlan& plan, std::int64_t epoch, std::int64_t samples_done);

// Optimizer steps this job takes for the rest of an epoch at `done` of `length`.
std::int64_t steps_left_in_epoch(const Config& config, std::int64_t length, std::int64_t done, int world);

// A resume that changes the world size or a sample-order setting of its
// checkpoint (batch, accumulation, shuffle, drop_last).
bool geometry_changed(const TrainingState& then, const TrainingState& now);

// Rank 0's lines at such a resume: what changed, what is left of the epoch in
// progress, and where the learning-rate schedule continues.
std::string describe_elastic_resume(const TrainingState& then, const TrainingState& now, const Config& config,
                                    const StepPlan& plan);

}  // namespace mpiddp
