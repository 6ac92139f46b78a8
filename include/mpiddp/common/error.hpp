#pragma once
// Error kinds and process exit codes shared by every module.
#include <stdexcept>
#include <string>

namespace mpiddp {

// Something the user gave us is wrong: an input-file key, a value, a data file.
// The message already names the file/key; the top level adds the rank.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A library call or a peer failed (MPI, HDF5, I/O).
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown on every rank after the ranks agreed that the job fails; the rank that
// owned the error has already printed it, so the top level prints nothing more.
struct JobFailed : std::runtime_error {
  int exit_code;
  explicit JobFailed(int code) : std::runtime_error("job failed"), exit_code(code) {}
};

enum ExitCode : int {
  kExitOk = 0,
  kExitRuntimeError = 1,
  kExitInputError = 2,
  // Stopped by SIGTERM/SIGUSR1 after writing a checkpoint: resubmit/requeue with
  // --resume auto (sysexits.h EX_TEMPFAIL: "try again later").
  kExitPreempted = 75,
  // A collective stalled because some ranks' processes no longer answer (a node
  // died): the job may be requeued and resume from its newest checkpoint
  // (scripts/mpiddp.sbatch does).
  kExitRanksLost = 76,
};

}  // namespace mpiddp
