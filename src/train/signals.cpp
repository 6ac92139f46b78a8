#include "mpiddp/train/signals.hpp"

#include <atomic>
#include <csignal>

namespace mpiddp {
namespace {
// Lock-free, so safe in a handler, and visible to every thread the signal may hit.
std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_stop_signal(int signal) { received = signal; }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // let MPI and I/O calls continue
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  // A full disk or file-size limit must fail the write (EFBIG), not kill us.
  std::signal(SIGXFSZ, SIG_IGN);
  // So must a write to a peer whose node died (EPIPE on its socket): SIGPIPE would
  // kill this rank in silence, and the job would call it lost with the others,
  // where it should live to name them.
  std::signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return received != 0; }

}  // namespace mpiddp
