#pragma once
// Which ranks of the job still live, asked without MPI. Every rank keeps a
// listening TCP socket open for as long as its process lives; the kernel answers
// a connection to it even while the rank is blocked in MPI. A rank whose process
// died (a node lost, a rank killed) refuses or never answers. The watchdog uses
// this to name the lost ranks and their hosts when a collective stalls, instead
// of only waiting for dist.timeout_s. It works only where every rank reaches every
// other rank's address (its hostname's): ProcessGroup checks that at start-up and
// switches probing off where it does not, so a probe never names a live rank.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace mpiddp {

// One rank's entry in the table every rank holds (exchanged by MPI_Allgather).
struct ProbeAddress {
  char host[64];       // hostname, for messages
  std::uint32_t ipv4;  // network byte order; 0 = no address
  std::uint16_t port;  // network byte order
};

class PeerProbe {
 public:
  PeerProbe();  // opens the listening socket; a failure leaves the probe disabled
  ~PeerProbe();
  PeerProbe(const PeerProbe&) = delete;
  PeerProbe& operator=(const PeerProbe&) = delete;

  // This rank's entry: its hostname, the first non-loopback IPv4 address the
  // hostname resolves to (loopback if none), and the listening port.
  // `single_host`: every rank of the job is on this host, so a hostname that does
  // not resolve may be served by loopback.
  ProbeAddress own_address(const std::string& host, bool single_host = false) const;
  void set_table(std::vector<ProbeAddress> table, int self);
  // Whether the table mixes hosts with loopback addresses (a hostname that resolves
  // to 127.0.1.1): such an address leads to the prober's own host, not the rank's.
  bool loopback_across_hosts() const;
  bool enabled() const { return enabled_; }
  void disable() { enabled_ = false; }

  // Whether `rank` answers within timeout_s.
  bool answers(int rank, double timeout_s) const;
  // Every other rank whose host refused, reset or left unanswered for timeout_s a
  // connection to it, in two rounds in a row (256 connections at a time). A
  // failure on this side (descriptors, ports, poll) never names a rank.
  std::vector<int> lost_ranks(double timeout_s) const;
  // "rank(s) 2,3 on host node2; rank(s) 5 on host node3".
  std::string describe(const std::vector<int>& ranks) const;
  // Accepts what waits at the listener: closes the connections probes left, and
  // reads the notices of ranks that announced an error of their own. Never
  // blocks. True while some accepted connection has sent nothing yet (a notice
  // may be on its way): a caller about to name lost ranks drains again.
  bool drain() const;

  // Tells every other rank, before this process ends after an error of its own
  // (its line printed, MPI_Abort next), that it does: a peer that then finds this
  // process gone, because the launcher is slow to end the job, knows it did not
  // die with its node. A short message to each rank's listener, all within timeout_s.
  void announce_own_error(double timeout_s) const;
  // The ranks whose notices drain() has read so far, in order.
  std::vector<int> announced_own_error() const;

 private:
  // A connection accepted at the listener, until its 8 bytes (a notice) or its end arrive.
  struct Incoming {
    int fd = -1;
    std::size_t got = 0;
    unsigned char bytes[8] = {};
    std::chrono::steady_clock::time_point since;
  };
  bool read_notice(Incoming& in) const;

  int listener_ = -1;
  bool enabled_ = false;
  int self_ = 0;
  std::vector<ProbeAddress> table_;
  mutable std::mutex incoming_mutex_;  // drain() may run on the watchdog's thread and the caller's
  mutable std::vector<Incoming> silent_;
  mutable std::vector<int> announced_;  // sorted
};

}  // namespace mpiddp
