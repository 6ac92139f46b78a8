#include "mpiddp/dist/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/peer_probe.hpp"

namespace mpiddp {
namespace {
// A wait this long asks the peers whether they live (and again as often); each
// probe takes at most kProbeAnswerS (a dead host's connection never answers; a dead
// process's is refused at once).
constexpr double kProbeAfterS = 5.0;
constexpr double kProbeAnswerS = 2.0;
// A rank that found lost peers stays (answering probes) this long before it exits:
// other survivors probe a moment later, and must not count it among the lost.
constexpr double kLingerS = 2.0;
// A rank that ends after an error tells the others within this long
// (PeerProbe::announce_own_error): longer than one lost SYN's retry (1 s).
constexpr double kAnnounceS = 3.0;
// Before naming a rank lost, notices still on their way get this long to arrive.
constexpr double kNoticeWaitS = 0.5;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Watchdog& Watchdog::instance() {
  static Watchdog watchdog;
  return watchdog;
}

Watchdog::~Watchdog() {
  stop();
}

void Watchdog::start(double timeout_s, int rank) {
  if (timeout_s <= 0.0 || running_.exchange(true)) return;
  timeout_s_ = timeout_s;
  rank_ = rank;
  thread_ = std::thread([this] { run(); });
}

void Watchdog::stop() {
  if (!running_.exchange(false)) return;
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  const auto limit_ns = static_cast<std::int64_t>(timeout_s_ * 1e9);
  const auto probe_every_ns = static_cast<std::int64_t>(kProbeAfterS * 1e9);
  std::int64_t last_probe_ns = 0;
  while (running_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    drain_probe();
    const char* op = operation_.load();
    const std::int64_t since = started_ns_.load();
    if (!op || since <= 0) continue;
    const std::string where = at_step(op);
    const std::int64_t now = now_ns();
    if (now - since > limit_ns) {
      const GonePeers gone = gone_peers();
      char limit[64];
      std::snprintf(limit, sizeof(limit), "%g", timeout_s_);
      const std::string late = where + " did not complete within dist.timeout_s = " + limit + " s";
      end_if_gone(gone, late + "; ending the job", rank_);
      end_process(late + " (another rank died, hung or is far behind); ending the job", kExitRuntimeError, rank_);
    }
    if (now - since > probe_every_ns && now - last_probe_ns > probe_every_ns) {
      last_probe_ns = now;
      const GonePeers gone = gone_peers();
      // Only while the same call still waits: one that completed meanwhile was not stuck.
      if (started_ns_.load() == since) end_if_gone(gone, where + " waits for them; ending the job", rank_);
    }
  }
}

void Watchdog::set_probe(const PeerProbe* probe) {
  std::lock_guard<std::mutex> lock(probe_mutex_);
  probe_ = probe;
}

void Watchdog::drain_probe() {
  std::lock_guard<std::mutex> lock(probe_mutex_);
  if (probe_) probe_->drain();
}

Watchdog::GonePeers Watchdog::gone_peers() {
  std::lock_guard<std::mutex> lock(probe_mutex_);
  if (!probe_ || !probe_->enabled()) return {};
  std::vector<int> lost = probe_->lost_ranks(kProbeAnswerS);
  if (lost.empty()) return {};
  // Notices that came in while probing; an accepted connection still silent may be one.
  for (int i = 0; probe_->drain() && i < static_cast<int>(kNoticeWaitS / 0.05); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::vector<int> announced = probe_->announced_own_error();
  std::vector<int> erred;
  for (auto it = lost.begin(); it != lost.end();)
    if (std::binary_search(announced.begin(), announced.end(), *it)) {
      erred.push_back(*it);
      it = lost.erase(it);
    } else {
      ++it;
    }
  return {lost.empty() ? "" : probe_->describe(lost), erred.empty() ? "" : probe_->describe(erred)};
}

void Watchdog::end_if_gone(const GonePeers& gone, const std::string& then, int rank) {
  if (!gone.lost.empty())
    end_process("lost " + gone.lost + " (their processes do not answer): " + then, kExitRanksLost, rank);
  // Gone after announcing an error of their own: the launcher has not ended the job yet.
  if (!gone.erred.empty())
    end_process(gone.erred + " ended after an error of their own (their line above): " + then, kExitRuntimeError,
                rank);
}

void Watchdog::announce_own_error() {
  if (ending_.load()) return;  // this process already ends on the watchdog's decision
  announce();
}

void Watchdog::announce() {
  std::lock_guard<std::mutex> lock(probe_mutex_);
  if (probe_ && probe_->enabled()) probe_->announce_own_error(kAnnounceS);
}

void Watchdog::end_if_peers_lost(const std::string& what, int rank) {
  if (gone_peers().empty()) return;
  // Decide when the ranks still waiting in this collective probe (5 s after it
  // began, by their monitors): the survivors then end together, with exit 76,
  // before the launcher reacts to the first of them. A peer that ended by
  // MPI_Abort after its own error announced it, and is named so (exit 1).
  const std::int64_t began = started_ns_.load();
  const std::int64_t decide_ns = (began > 0 ? began : now_ns()) + static_cast<std::int64_t>(kProbeAfterS * 1e9);
  linger(std::max(0.0, static_cast<double>(decide_ns - now_ns()) * 1e-9));
  end_if_gone(gone_peers(), at_step(what) + "; ending the job", rank);
}

std::string Watchdog::at_step(const std::string& operation) const {
  const std::int64_t step = step_.load();
  return step < 0 ? operation : operation + " at step " + std::to_string(step);
}

void Watchdog::linger(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    drain_probe();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Watchdog::end_process(const std::string& message, int exit_code, int rank) {
  // The monitor thread and a failed call may both find the lost peers: one line.
  if (ending_.exchange(true))
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the first caller exits
  std::fprintf(stderr, "mpiddp: error: rank %d: %s\n", rank, message.c_str());
  std::fflush(stderr);
  // Ranks still waiting must not take this one for a lost one: it stays, answering
  // probes, and unless it ends for lost peers itself, it tells them it ends on an error.
  if (exit_code != kExitRanksLost) announce();
  linger(kLingerS);
  // Without MPI_Finalize the launcher sees this rank fail and ends the others.
  ::_exit(exit_code);
}

Watchdog::Scope::Scope(const char* operation) {
  Watchdog& w = instance();
  outer_operation_ = w.operation_.load();
  outer_started_ns_ = w.started_ns_.load();
  w.started_ns_.store(0);  // never a new name with the old start time
  w.operation_.store(operation);
  w.started_ns_.store(now_ns());
}

Watchdog::Scope::~Scope() {
  Watchdog& w = instance();
  w.started_ns_.store(0);
  w.operation_.store(outer_operation_);
  w.started_ns_.store(outer_started_ns_);
}

}  // namespace mpiddp
