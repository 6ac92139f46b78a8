#include "io/mapped_reads.hpp"

#include <setjmp.h>
#include <signal.h>

#include <mutex>

#include "mpiddp/common/error.hpp"

namespace mpiddp::io {
namespace {

// The guarded read in progress on this thread (null: none).
thread_local sigjmp_buf* guarded_read = nullptr;
struct sigaction before_ours {};

void on_sigbus(int signal, siginfo_t* info, void*) {
  // A page past a mapped file's end, touched inside a guarded read: back to its
  // guard, which throws. (Not a SIGBUS another process sent, nor a hardware
  // memory error: those are no shrunk file.)
  if (guarded_read && info && info->si_code == BUS_ADRERR) siglongjmp(*guarded_read, 1);
  // Not ours: the action from before. A fault returns and faults again, so that
  // action sees the real details; a sent signal is sent again.
  ::sigaction(SIGBUS, &before_ours, nullptr);
  if (!info || info->si_code <= 0) ::raise(signal);
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction ours {};
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO;
    sigemptyset(&ours.sa_mask);
    ::sigaction(SIGBUS, &ours, &before_ours);
  });
}

}  // namespace

void guard_mapped_reads(const std::function<void()>& read, const std::string* const volatile& reading,
                        const char* what) {
  install_handler();
  sigjmp_buf jump;
  sigjmp_buf* const outer = guarded_read;
  // Saves the signal mask: the jump leaves the handler with SIGBUS still blocked otherwise.
  if (sigsetjmp(jump, 1) != 0) {
    guarded_read = outer;
    throw InputError((reading ? *reading : std::string("a memory-mapped file")) + ": " + what);
  }
  guarded_read = &jump;
  try {
    read();
  } catch (...) {
    guarded_read = outer;
    throw;
  }
  guarded_read = outer;
}

}  // namespace mpiddp::io
