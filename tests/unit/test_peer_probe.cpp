// PeerProbe (dist/peer_probe.hpp): a live rank answers, a rank whose process is
// gone is named with its host, a peer that never answers is lost once the
// probe's own limit runs out, and the description groups ranks by host. Every
// probe stays on this machine (loopback or its own address).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>

#include "mpiddp/dist/peer_probe.hpp"

using mpiddp::PeerProbe;
using mpiddp::ProbeAddress;

TEST_CASE("peer probe: live ranks answer, a closed one is lost", "[dist]") {
  PeerProbe me;
  auto live = std::make_unique<PeerProbe>();
  auto gone = std::make_unique<PeerProbe>();
  REQUIRE(me.enabled());
  const std::string host = "localhost";  // resolves everywhere; this host's own name may not
  std::vector<ProbeAddress> table = {me.own_address(host), live->own_address(host), gone->own_address(host)};
  REQUIRE(table[1].port != 0);
  REQUIRE(table[1].ipv4 != 0);
  me.set_table(table, 0);
  CHECK(me.answers(1, 2.0));
  CHECK(me.lost_ranks(2.0).empty());
  gone.reset();  // the process of rank 2 ends: its socket closes
  CHECK_FALSE(me.answers(2, 2.0));
  CHECK(me.lost_ranks(2.0) == std::vector<int>{2});
  live->drain();  // the connections the probes left are closed, nothing blocks
  CHECK(me.answers(1, 2.0));
}

TEST_CASE("peer probe: a failure on the prober's side never names a rank", "[dist]") {
  PeerProbe me;
  auto gone = std::make_unique<PeerProbe>();
  const std::string host = "localhost";  // resolves everywhere; this host's own name may not
  me.set_table({me.own_address(host), gone->own_address(host)}, 0);
  gone.reset();
  // Out of file descriptors (as a large job's rank may be): no probe can start,
  // which says nothing about rank 1.
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit none = saved;
  none.rlim_cur = 0;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &none) == 0);
  const std::vector<int> while_short = me.lost_ranks(0.5);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK(while_short.empty());
  CHECK(me.lost_ranks(0.5) == std::vector<int>{1});  // with descriptors again: refused, lost
}

TEST_CASE("peer probe: the description groups lost ranks by host", "[dist]") {
  PeerProbe me;
  std::vector<ProbeAddress> table(5);
  const char* hosts[] = {"node1", "node1", "node2", "node2", "node3"};
  for (int r = 0; r < 5; ++r) std::snprintf(table[r].host, sizeof(table[r].host), "%s", hosts[r]);
  me.set_table(table, 0);
  CHECK(me.describe({2, 3}) == "rank(s) 2,3 on host node2");
  CHECK(me.describe({1, 2, 4}) == "rank(s) 1 on host node1; rank(s) 2 on host node2; rank(s) 4 on host node3");
}

namespace {
// A loopback listener whose accept queue is full (backlog 0, one connection
// queued and never accepted): Linux drops further SYNs, so a connection to it is
// silent, as to a host that died, without a packet leaving this machine.
struct SilentListener {
  int listener = -1, queued = -1;
  std::uint16_t port = 0;  // network order
  SilentListener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(listener, 0) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    queued = socket(AF_INET, SOCK_STREAM, 0);
    if (queued < 0 || connect(queued, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return;
    port = a.sin_port;
  }
  ~SilentListener() {
    if (queued >= 0) close(queued);
    if (listener >= 0) close(listener);
  }
};
}  // namespace

TEST_CASE("peer probe: a peer without an address, or one that never answers, is lost", "[dist]") {
  PeerProbe me;
  SilentListener silent;
  REQUIRE(silent.port != 0);
  std::vector<ProbeAddress> table(3);
  table[0] = me.own_address("localhost");
  // Rank 1: no address at all. Rank 2: a loopback port whose SYNs are dropped.
  std::snprintf(table[2].host, sizeof(table[2].host), "nowhere");
  table[2].ipv4 = htonl(INADDR_LOOPBACK);
  table[2].port = silent.port;
  me.set_table(table, 0);
  // The probe's own limit (0.5 s a round) ends each attempt; no wall-clock bound
  // is asserted here, since a busy machine may take longer to get there.
  CHECK(me.lost_ranks(0.5) == std::vector<int>{1, 2});
}

TEST_CASE("peer probe: a hostname that does not resolve gives loopback on one host, which answers", "[dist]") {
  PeerProbe me, peer;
  const std::string nowhere = "mpiddp-no-such-host.invalid";  // .invalid never resolves (RFC 6761)
  const std::vector<ProbeAddress> table = {me.own_address(nowhere, true), peer.own_address(nowhere, true)};
  CHECK(table[1].ipv4 == htonl(INADDR_LOOPBACK));
  CHECK(peer.own_address(nowhere, false).ipv4 == 0);  // a job across hosts: no address, so no probes
  REQUIRE(table[1].port != 0);
  me.set_table(table, 0);
  CHECK_FALSE(me.loopback_across_hosts());  // one host: the probes stay on
  CHECK(me.answers(1, 2.0));
}

TEST_CASE("peer probe: loopback addresses are refused only when the job spans hosts", "[dist]") {
  PeerProbe me;
  std::vector<ProbeAddress> table(2);
  std::snprintf(table[0].host, sizeof(table[0].host), "a");
  std::snprintf(table[1].host, sizeof(table[1].host), "a");
  table[0].ipv4 = table[1].ipv4 = htonl(0x7F000101);  // 127.0.1.1, as Debian's /etc/hosts gives a hostname
  me.set_table(table, 0);
  CHECK_FALSE(me.loopback_across_hosts());
  std::snprintf(table[1].host, sizeof(table[1].host), "b");
  me.set_table(table, 0);
  CHECK(me.loopback_across_hosts());
  table[0].ipv4 = table[1].ipv4 = htonl(0x0AD9000B);  // 10.217.0.11
  me.set_table(table, 0);
  CHECK_FALSE(me.loopback_across_hosts());
}

TEST_CASE("peer probe: a rank's notice of its own error reaches the others, a probe's connection is no notice",
          "[dist]") {
  PeerProbe me;
  auto erring = std::make_unique<PeerProbe>();
  PeerProbe quiet;
  const std::string host = "localhost";
  const std::vector<ProbeAddress> table = {me.own_address(host), erring->own_address(host), quiet.own_address(host)};
  me.set_table(table, 0);
  erring->set_table(table, 1);
  quiet.set_table(table, 2);
  CHECK(quiet.answers(0, 2.0));  // a probe: connects and closes, sends nothing
  // Eight bytes that are not a notice.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = table[0].ipv4;
  to.sin_port = table[0].port;
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0);
  REQUIRE(send(fd, "mEr?\0\0\0\2", 8, 0) == 8);
  close(fd);
  erring->announce_own_error(2.0);
  // Loopback delivers a send before it returns; a few drains cover a slow accept.
  for (int i = 0; i < 200 && me.announced_own_error().empty(); ++i) {
    me.drain();
    if (me.announced_own_error().empty()) usleep(10000);
  }
  CHECK(me.announced_own_error() == std::vector<int>{1});
  erring.reset();  // its process ends: still gone to a probe, the watchdog tells why
  CHECK(me.lost_ranks(2.0) == std::vector<int>{1});
  me.drain();
  CHECK(me.announced_own_error() == std::vector<int>{1});
  quiet.drain();
  CHECK(quiet.announced_own_error() == std::vector<int>{1});  // every other rank heard it
}
