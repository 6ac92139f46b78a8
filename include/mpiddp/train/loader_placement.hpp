#pragma once
// data.loader: whether a rank reads its batches on a loader thread or inline, in
// the training thread when the step needs the batch. A loader thread hides the reads
// only when it has a CPU to run on: where the compute already fills every CPU
// the rank may use, the thread runs whenever the training thread blocks, and the
// ranks then stall one another in turn (a rank waiting for its loader holds the
// others in the next collective). Inline, every rank reads at the same point of
// its step. Both read the same batches: the choice changes speed, never results.
#include <string>

#include "mpiddp/config/choices.hpp"

namespace mpiddp {

struct LoaderPlacementChoice {
  bool background = true;  // a loader thread
  std::string reason;      // for the banner: what decided it
};

// `gpu`: the rank trains on a GPU, or the emulated one (its CPU mostly waits for
// the device); `compute_threads`: the rank's BLAS threads as resolved (train.threads,
// or SLURM_CPUS_PER_TASK, or cores / local ranks); `usable_cpus`: CPUs it may run on.
LoaderPlacementChoice place_loader(LoaderPlacement setting, bool gpu, int compute_threads, int usable_cpus);

// The CPUs this process may run on (its affinity mask, as mpirun's or srun's
// binding left it); the machine's count where the mask cannot be read (more
// than 1024 CPUs). A cgroup's CPU quota does not show in the mask.
int usable_cpus();

}  // namespace mpiddp
