// Watchdog::end_if_peers_lost (dist/watchdog.hpp): a blocking call that failed
// (as a write to a dead node's rank does, long before dist.timeout_s) ends the
// process with the lost-ranks line and exit 76 when peers no longer answer, and
// returns (the caller reports the failure) when every peer answers. Each case runs
// in a child process, since the first ends it.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/peer_probe.hpp"
#include "mpiddp/dist/watchdog.hpp"

using mpiddp::PeerProbe;
using mpiddp::Watchdog;

namespace {
struct Ending {
  int exit_code = -1;  // -1: killed by a signal
  std::string stderr_text;
};

// Calls end_if_peers_lost in a child whose watchdog uses `probe`; what it printed
// and how it ended (exit 0: the call returned; 99: an exception in the child).
Ending fail_a_call_in_child(const PeerProbe& probe) {
  char path[] = "/tmp/mpiddp-watchdog-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      ::dup2(fd, STDERR_FILENO);
      Watchdog& watchdog = Watchdog::instance();
      watchdog.set_probe(&probe);
      watchdog.set_step(12);
      watchdog.end_if_peers_lost("MPI_Allreduce(float sum) failed: MPI_ERR_INTERN: internal error", 3);
    } catch (...) {
      ::_exit(99);  // never back into Catch2's runner in the child
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  ::close(fd);
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  std::remove(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}
}  // namespace

TEST_CASE("a failed call names the peers that no longer answer, and ends with exit 76", "[dist]") {
  PeerProbe me;
  auto live = std::make_unique<PeerProbe>();
  auto gone = std::make_unique<PeerProbe>();
  REQUIRE(me.enabled());
  const std::string host = "localhost";  // resolves everywhere; this host's own name may not
  me.set_table({me.own_address(host), live->own_address(host), gone->own_address(host)}, 0);
  gone.reset();  // rank 2's process ends: its socket closes
  const Ending ending = fail_a_call_in_child(me);
  CHECK(ending.exit_code == mpiddp::kExitRanksLost);
  CHECK(ending.stderr_text == "mpiddp: error: rank 3: lost rank(s) 2 on host " + host +
                                  " (their processes do not answer): MPI_Allreduce(float sum) failed: "
                                  "MPI_ERR_INTERN: internal error at step 12; ending the job\n");
}

TEST_CASE("a failed call while every peer answers is left to the caller to report", "[dist]") {
  PeerProbe me;
  auto live = std::make_unique<PeerProbe>();
  const std::string host = "localhost";  // resolves everywhere; this host's own name may not
  REQUIRE(me.enabled());
  me.set_table({me.own_address(host), live->own_address(host)}, 0);
  const Ending ending = fail_a_call_in_child(me);
  CHECK(ending.exit_code == 0);
  CHECK(ending.stderr_text.empty());
}
