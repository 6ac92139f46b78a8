#include "mpiddp/dist/peer_probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

namespace mpiddp {
namespace {

// What one connection attempt says of a peer. Only the peer's side of a failure
// (refused, reset, unreachable, silent to the end) counts as lost; a failure of
// this process or host (out of descriptors, ports or buffers; poll failing) says
// nothing about the peer, and a probe must never name a live rank.
enum class Reach { answered, lost, unknown };

bool peer_side(int error) {
  return error == ECONNREFUSED || error == ECONNRESET || error == ETIMEDOUT || error == EHOSTUNREACH ||
         error == ENETUNREACH || error == EHOSTDOWN;
}

struct Attempt {
  int fd = -1;  // >= 0: connecting
  Reach result = Reach::unknown;
};

// A non-blocking connect to one entry.
Attempt start_connect(const ProbeAddress& to) {
  if (to.ipv4 == 0 || to.port == 0) return {-1, Reach::lost};  // a rank without an address cannot answer
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return {-1, Reach::unknown};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = to.ipv4;
  addr.sin_port = to.port;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EINPROGRESS) return {fd};
  const int error = errno;
  ::close(fd);
  return {-1, peer_side(error) ? Reach::lost : Reach::unknown};
}

Reach outcome(int fd) {
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return Reach::unknown;
  if (error == 0) return Reach::answered;
  return peer_side(error) ? Reach::lost : Reach::unknown;
}

// A rank's notice that it ends after an error of its own: this magic, then its
// rank (4 bytes, network order). A probe sends nothing and closes.
constexpr unsigned char kNoticeMagic[4] = {'m', 'E', 'r', '!'};
constexpr std::size_t kNoticeBytes = 8;
// Accepted connections that have sent neither a notice nor their end yet (their
// bytes may still be on the way): at most this many, each at most this long.
constexpr std::size_t kMaxSilent = 64;
constexpr auto kSilentLimit = std::chrono::seconds(2);

// Waits for every started connect to finish or the time to run out (silent to
// the end: lost); sends `message` on each connection that completes, if any, and
// closes each as soon as its outcome is known. Meanwhile it empties this rank's
// own listener (`owner`'s), so that ranks probing each other at the same moment
// never fill each other's queues.
void finish_connects(std::vector<Attempt>& attempts, double timeout_s, int listener, const PeerProbe& owner,
                     const std::vector<unsigned char>& message) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool poll_failed = false;
  for (;;) {
    std::vector<pollfd> waiting;
    std::vector<Attempt*> waiting_for;
    for (Attempt& a : attempts)
      if (a.fd >= 0) {
        waiting.push_back({a.fd, POLLOUT, 0});
        waiting_for.push_back(&a);
      }
    if (waiting.empty()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    // Past the deadline, one more look without waiting: a connect that completed
    // while this process was not running (a busy or stalled machine) answered.
    const bool last_look = left.count() <= 0;
    if (listener >= 0) waiting.push_back({listener, POLLIN, 0});
    if (::poll(waiting.data(), waiting.size(), last_look ? 0 : static_cast<int>(left.count())) < 0) {
      if (errno == EINTR) continue;
      poll_failed = true;
      break;
    }
    for (std::size_t j = 0; j < waiting_for.size(); ++j) {
      if (!waiting[j].revents) continue;
      Attempt& a = *waiting_for[j];
      a.result = outcome(a.fd);  // unknown: this side failed, which names nobody
      // 8 bytes on a connection just made: the socket's buffer takes them at once.
      if (a.result == Reach::answered && !message.empty())
        (void)::send(a.fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(a.fd);
      a.fd = -1;
    }
    if (listener >= 0 && waiting.back().revents) owner.drain();
    if (last_look) break;
  }
  for (Attempt& a : attempts) {
    if (a.fd < 0) continue;
    if (!poll_failed) a.result = Reach::lost;  // never answered in time
    ::close(a.fd);
    a.fd = -1;
  }
}

// At most this many connections at once: a probe must not run this process out
// of descriptors (MPI and NCCL hold many) however large the world.
constexpr std::size_t kProbeBatch = 256;

// Probes `ranks` of `table`, kProbeBatch at a time, each batch for at most
// timeout_s and all of them for at most total_s (0: no such bound), sending
// `message` to each rank that answers; one result per rank (unknown for those
// never tried).
std::vector<Reach> probe(const std::vector<ProbeAddress>& table, const std::vector<int>& ranks, double timeout_s,
                         int listener, const PeerProbe& owner, const std::vector<unsigned char>& message = {},
                         double total_s = 0.0) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(total_s);
  std::vector<Reach> results;
  for (std::size_t first = 0; first < ranks.size(); first += kProbeBatch) {
    const std::size_t last = std::min(ranks.size(), first + kProbeBatch);
    double limit = timeout_s;
    if (total_s > 0.0) {
      limit = std::min(limit, std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count());
      if (limit <= 0.0) {
        results.resize(ranks.size(), Reach::unknown);
        break;
      }
    }
    std::vector<Attempt> batch;
    for (std::size_t i = first; i < last; ++i) batch.push_back(start_connect(table.at(static_cast<std::size_t>(ranks[i]))));
    finish_connects(batch, limit, listener, owner, message);
    for (const Attempt& a : batch) results.push_back(a.result);
  }
  return results;
}

}  // namespace

PeerProbe::PeerProbe() {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;  // any free port
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listener_, SOMAXCONN) != 0) {
    ::close(listener_);
    listener_ = -1;
    return;
  }
  enabled_ = true;
}

PeerProbe::~PeerProbe() {
  for (const Incoming& in : silent_) ::close(in.fd);
  if (listener_ >= 0) ::close(listener_);
}

ProbeAddress PeerProbe::own_address(const std::string& host, bool single_host) const {
  ProbeAddress mine{};
  std::snprintf(mine.host, sizeof(mine.host), "%s", host.c_str());
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (listener_ < 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return mine;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) == 0) {
    for (const addrinfo* a = found; a; a = a->ai_next) {
      const auto ipv4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr;
      const bool loopback = (ntohl(ipv4) >> 24) == 127;
      if (mine.ipv4 == 0 || !loopback) mine.ipv4 = ipv4;
      if (!loopback) break;
    }
    ::freeaddrinfo(found);
  }
  // A hostname that does not resolve (a fresh VM or container without an
  // /etc/hosts line for it), in a job on one host: loopback, which the listener
  // (bound to any address) answers on. Never across hosts, even where they share
  // a name (cloned VMs): a probe of 127.0.0.1 would reach the prober's own host.
  if (mine.ipv4 == 0 && single_host) mine.ipv4 = htonl(INADDR_LOOPBACK);
  mine.port = bound.sin_port;
  return mine;
}

void PeerProbe::set_table(std::vector<ProbeAddress> table, int self) {
  table_ = std::move(table);
  self_ = self;
}

bool PeerProbe::loopback_across_hosts() const {
  bool loopback = false, hosts = false;
  for (const ProbeAddress& a : table_) {
    loopback = loopback || (ntohl(a.ipv4) >> 24) == 127;
    hosts = hosts || std::strncmp(a.host, table_.front().host, sizeof(a.host)) != 0;
  }
  return loopback && hosts;
}

bool PeerProbe::answers(int rank, double timeout_s) const {
  return probe(table_, {rank}, timeout_s, listener_, *this).front() == Reach::answered;
}

std::vector<int> PeerProbe::lost_ranks(double timeout_s) const {
  std::vector<int> others;
  for (int r = 0; r < static_cast<int>(table_.size()); ++r)
    if (r != self_) others.push_back(r);
  // Lost twice in a row: a connection attempt a busy host dropped once does not
  // name a live rank. A dead rank's host refuses at once, so the second round is quick.
  for (int round = 0; round < 2 && !others.empty(); ++round) {
    const std::vector<Reach> results = probe(table_, others, timeout_s, listener_, *this);
    std::vector<int> lost;
    for (std::size_t i = 0; i < others.size(); ++i)
      if (results[i] == Reach::lost) lost.push_back(others[i]);
    others = std::move(lost);
  }
  return others;
}

std::string PeerProbe::describe(const std::vector<int>& ranks) const {
  std::map<std::string, std::string> by_host;  // host -> "2,3"
  std::vector<std::string> order;
  for (int r : ranks) {
    const std::string host = table_.at(static_cast<std::size_t>(r)).host;
    auto [it, fresh] = by_host.emplace(host, std::to_string(r));
    if (fresh)
      order.push_back(host);
    else
      it->second += "," + std::to_string(r);
  }
  std::string text;
  for (const std::string& host : order)
    text += (text.empty() ? "" : "; ") + std::string("rank(s) ") + by_host[host] + " on host " + host;
  return text;
}

bool PeerProbe::drain() const {
  if (listener_ < 0) return false;
  std::lock_guard<std::mutex> lock(incoming_mutex_);
  const auto now = std::chrono::steady_clock::now();
  std::vector<Incoming> still;
  for (Incoming& in : silent_) {
    if (read_notice(in)) continue;  // finished and closed
    if (now - in.since < kSilentLimit)
      still.push_back(in);
    else
      ::close(in.fd);
  }
  silent_ = std::move(still);
  // Each new connection is read at once: a probe's has ended or will, a notice's
  // bytes came with it; only the few still silent are kept.
  for (int fd; (fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;) {
    Incoming in;
    in.fd = fd;
    in.since = now;
    if (read_notice(in)) continue;
    if (silent_.size() >= kMaxSilent) {  // the oldest waited long enough
      ::close(silent_.front().fd);
      silent_.erase(silent_.begin());
    }
    silent_.push_back(in);
  }
  return !silent_.empty();
}

// Reads what one accepted connection sent so far. True when it is finished
// (closed): a whole notice (recorded), its end, or an error.
bool PeerProbe::read_notice(Incoming& in) const {
  ssize_t n = 0;
  while (in.got < kNoticeBytes && (n = ::recv(in.fd, in.bytes + in.got, kNoticeBytes - in.got, MSG_DONTWAIT)) > 0)
    in.got += static_cast<std::size_t>(n);
  if (in.got < kNoticeBytes && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  ::close(in.fd);
  if (in.got < kNoticeBytes || std::memcmp(in.bytes, kNoticeMagic, sizeof(kNoticeMagic)) != 0) return true;
  std::uint32_t network = 0;
  std::memcpy(&network, in.bytes + sizeof(kNoticeMagic), sizeof(network));
  const auto rank = static_cast<std::int64_t>(ntohl(network));
  if (rank != self_ && rank < static_cast<std::int64_t>(table_.size())) {
    const auto at = std::lower_bound(announced_.begin(), announced_.end(), static_cast<int>(rank));
    if (at == announced_.end() || *at != rank) announced_.insert(at, static_cast<int>(rank));
  }
  return true;
}

void PeerProbe::announce_own_error(double timeout_s) const {
  if (!enabled_ || table_.empty()) return;
  std::vector<unsigned char> notice(kNoticeMagic, kNoticeMagic + sizeof(kNoticeMagic));
  const std::uint32_t network = htonl(static_cast<std::uint32_t>(self_));
  const auto* rank_bytes = reinterpret_cast<const unsigned char*>(&network);
  notice.insert(notice.end(), rank_bytes, rank_bytes + sizeof(network));
  std::vector<int> others;
  for (int r = 0; r < static_cast<int>(table_.size()); ++r)
    if (r != self_) others.push_back(r);
  probe(table_, others, timeout_s, listener_, *this, notice, timeout_s);
}

std::vector<int> PeerProbe::announced_own_error() const {
  std::lock_guard<std::mutex> lock(incoming_mutex_);
  return announced_;
}

}  // namespace mpiddp
