#pragma once
// Collective watchdog: every blocking MPI call is bracketed by a Scope; a
// background thread ends the process when one lasts longer than dist.timeout_s,
// naming the operation and the training step. Under mpirun/srun the launcher then
// ends the other ranks, so a dead or hung peer never leaves the job waiting forever.
// With a peer probe (ProcessGroup sets one), a call that has waited 5 s asks every
// other rank whether its process still lives (again every 5 s); when some do not
// (a node died), it ends the process at once with a line naming those ranks and
// their hosts, without waiting for dist.timeout_s, and exit code 76 (kExitRanksLost).
// A call that fails instead of waiting (check_mpi) asks the same question, at the same time.
// A rank that ends after an error of its own announces it to the others first
// (announce_own_error): a peer gone after such a notice is named as ended by its
// error (exit 1), so a slow launcher does not turn one rank's error into a node
// loss (unless some other peer is gone without a notice: then exit 76).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace mpiddp {

class PeerProbe;

class Watchdog {
 public:
  static Watchdog& instance();
  // Starts the monitor thread (once); timeout_s <= 0 disables it.
  void start(double timeout_s, int rank);
  void stop();
  void set_step(std::int64_t step) { step_.store(step, std::memory_order_relaxed); }
  // The probe that names lost ranks (nullptr: none). Once set_probe returns, the
  // watchdog no longer uses the previous one (its owner may destroy it).
  void set_probe(const PeerProbe* probe);
  // For a blocking call that failed (`what`: "MPI_Allreduce(...) failed: text"):
  // when some peers' processes no longer answer, ends this process as a stall
  // would, with the line naming them (exit 76, or 1 when all of them announced an
  // error of their own); otherwise returns, and the caller
  // reports the failure itself. A write to a dead node's rank fails (EPIPE) long
  // before dist.timeout_s, and must still be told as the lost ranks it is. It
  // decides when a rank waiting in the same call would (5 s after the call began,
  // probing again then), so that the survivors end alike: the first survivor's
  // exit makes the launcher kill the others, and one killed before its own exit 76
  // leaves the job with another exit code (no requeue for the lost node).
  void end_if_peers_lost(const std::string& what, int rank);
  // Before this process ends after an error of its own (MPI_Abort next): tells
  // every other rank, so that one still waiting names this rank as ended by its
  // error, not as lost, if the launcher is slow to end the job (exit 1, not 76).
  void announce_own_error();

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
  // Ranks whose processes no longer answer: "lost" (described, "" if none), and
  // "erred", those that announced an error of their own before they went.
  struct GonePeers {
    std::string lost, erred;
    bool empty() const { return lost.empty() && erred.empty(); }
  };
  GonePeers gone_peers();
  // Ends this process when some peers are gone: lost (exit 76) or erred (exit 1);
  // `then`: what waits for them, "... ; ending the job".
  void end_if_gone(const GonePeers& gone, const std::string& then, int rank);
  void drain_probe();
  void announce();  // announce_own_error, also while this process is ending
  // Answers probes for `seconds` (others probing a moment later must find this rank alive).
  void linger(double seconds);
  // "MPI_Allreduce(float sum) at step 12", or without the step before the first.
  std::string at_step(const std::string& operation) const;
  [[noreturn]] void end_process(const std::string& message, int exit_code, int rank);

  std::atomic<const char*> operation_{nullptr};
  std::atomic<std::int64_t> started_ns_{0};
  std::atomic<std::int64_t> step_{-1};
  std::atomic<bool> running_{false};
  std::atomic<bool> ending_{false};
  std::mutex probe_mutex_;  // guards probe_ while the thread uses it
  const PeerProbe* probe_ = nullptr;
  double timeout_s_ = 0.0;
  int rank_ = 0;
  std::thread thread_;
};

}  // namespace mpiddp
