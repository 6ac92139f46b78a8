#pragma once
// SIGTERM and SIGUSR1 (Slurm's --signal=USR1@T before the time limit, or scancel)
// only set a flag; the trainer turns it into an agreed stop at the next step
// boundary, a checkpoint, and exit code kExitPreempted. SIGXFSZ and SIGPIPE are
// ignored: a write past a size limit or to a dead peer fails instead of killing.
namespace mpiddp {

void install_stop_signal_handlers();
bool stop_requested();

}  // namespace mpiddp
