#pragma once
// Collective watchdog: every blocking MPI call is bracketed by a Scope; a
// background thread ends the process when one lasts longer than dist.timeout_s,
// naming the operation and the training step. Under mpirun/srun the launcher then
// ends the other ranks, so a dead or hung peer never leaves the job waiting forever.
#include <atomic>
#include <cstdint>
#include <thread>

namespace mpiddp {

class Watchdog {
 public:
  static Watchdog& instance();
  // Starts the monitor thread (once); timeout_s <= 0 disables it.
  void start(double timeout_s, int rank);
  void stop();
  void set_step(std::int64_t step) { step_.store(step, std::memory_order_relaxed); }

  // Scopes nest: an inner one (a GPU wait inside a teardown, say) is timed on its
  // own, and the outer one's clock runs on when it ends.
  class Scope {
   public:
    explicit Scope(const char* operation);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const char* outer_operation_;
    std::int64_t outer_started_ns_;
  };

 private:
  Watchdog() = default;
  ~Watchdog();
  void run();

  std::atomic<const char*> operation_{nullptr};
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<std::int64_t> step_{-1};
  std::atomic<bool> running_{false};
  double timeout_s_ = 0.0;
  int rank_ = 0;
  std::thread thread_;
};

}  // namespace mpiddp
