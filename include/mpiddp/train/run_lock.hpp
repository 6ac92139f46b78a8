#pragma once
// One job per run directory: rank 0 holds an advisory lock (flock) on the
// run.dir directory itself for the job's life. The kernel drops it when the
// process ends, however it ends, so a killed job never blocks its own requeue.
// Locking writes nothing, so a job that is refused leaves every file as it was;
// the holder's name (host, pid, Slurm job) goes to run.dir/.lock only once the
// job starts writing its outputs, and a refused job quotes it.
#include <string>

namespace mpiddp {

class RunLock {
 public:
  RunLock() = default;
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Takes the lock on the existing directory `run_dir`; throws InputError naming
  // the holder when another process holds it. Where the file system cannot lock
  // (some NFS mounts), prints one warning and holds nothing.
  void acquire(const std::string& run_dir);
  bool tried() const { return tried_; }
  // Writes this process's name to run.dir/.lock (atomically).
  void record_holder() const;

 private:
  std::string dir_;
  int fd_ = -1;
  bool tried_ = false;
};

}  // namespace mpiddp
