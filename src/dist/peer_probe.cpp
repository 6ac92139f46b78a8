#include "mpiddp/dist/peer_probe.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

namespace mpiddp {
namespace {

// A non-blocking connect to one entry; -1 if it failed at once.
int start_connect(const ProbeAddress& to) {
  if (to.ipv4 == 0 || to.port == 0) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = to.ipv4;
  addr.sin_port = to.port;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EINPROGRESS) return fd;
  ::close(fd);
  return -1;
}

bool connected(int fd) {
  int error = 0;
  socklen_t length = sizeof(error);
  return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
}

// Waits for every started connect (fd >= 0) to finish or the time to run out;
// answered[i] says which connected.
std::vector<bool> finish_connects(const std::vector<int>& fds, double timeout_s) {
  std::vector<bool> answered(fds.size(), false), done(fds.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::vector<pollfd> waiting;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i] >= 0 && !done[i]) {
        waiting.push_back({fds[i], POLLOUT, 0});
        index.push_back(i);
      }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (waiting.empty() || left.count() <= 0) break;
    if (::poll(waiting.data(), waiting.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (std::size_t j = 0; j < waiting.size(); ++j) {
      if (!waiting[j].revents) continue;
      done[index[j]] = true;
      answered[index[j]] = connected(waiting[j].fd);
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  return answered;
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
  if (listener_ >= 0) ::close(listener_);
}

ProbeAddress PeerProbe::own_address(const std::string& host) const {
  ProbeAddress mine{};
  std::snprintf(mine.host, sizeof(mine.host), "%s", host.c_str());
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (listener_ < 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return mine;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return mine;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    const auto ipv4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr;
    const bool loopback = (ntohl(ipv4) >> 24) == 127;
    if (mine.ipv4 == 0 || !loopback) mine.ipv4 = ipv4;
    if (!loopback) break;
  }
  ::freeaddrinfo(found);
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
  return finish_connects({start_connect(table_.at(static_cast<std::size_t>(rank)))}, timeout_s)[0];
}

std::vector<int> PeerProbe::lost_ranks(double timeout_s) const {
  std::vector<int> fds(table_.size(), -1);
  for (std::size_t r = 0; r < table_.size(); ++r)
    if (static_cast<int>(r) != self_) fds[r] = start_connect(table_[r]);
  const std::vector<bool> answered = finish_connects(fds, timeout_s);
  std::vector<int> lost;
  for (std::size_t r = 0; r < table_.size(); ++r)
    if (static_cast<int>(r) != self_ && !answered[r]) lost.push_back(static_cast<int>(r));
  return lost;
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

void PeerProbe::drain() const {
  if (listener_ < 0) return;
  for (int fd; (fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) ::close(fd);
}

}  // namespace mpiddp
