// The signal dispositions of train (train/signals.hpp), each in a child process so
// that the test runner keeps its own: SIGTERM and SIGUSR1 only set the stop flag,
// a write to a pipe nobody reads fails with
// EPIPE instead of killing (a survivor's send to a dead node's rank), and a write
// past the file-size limit fails with EFBIG (a full quota), again without a kill.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>

#include "mpiddp/train/signals.hpp"

using namespace mpiddp;

namespace {
// Runs `check` in a child after install_stop_signal_handlers: "exit N" (N = the
// check's verdict, 0 = as expected) or "signal N" when a signal killed it.
std::string in_child(const std::function<int()>& check) {
  const pid_t child = ::fork();
  if (child == 0) {
    int verdict = 99;
    try {
      install_stop_signal_handlers();
      verdict = check();
    } catch (...) {
    }
    ::_exit(verdict);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}
}  // namespace

TEST_CASE("SIGTERM and SIGUSR1 only set the stop flag", "[signals]") {
  CHECK(in_child([] {
          if (stop_requested()) return 1;
          std::raise(SIGUSR1);
          if (!stop_requested()) return 2;
          std::raise(SIGTERM);
          return stop_requested() ? 0 : 3;
        }) == "exit 0");
}

TEST_CASE("a write to a pipe nobody reads fails with EPIPE, and the process lives", "[signals]") {
  CHECK(in_child([] {
          int ends[2];
          if (::pipe(ends) != 0) return 1;
          ::close(ends[0]);
          const char byte = 'x';
          return ::write(ends[1], &byte, 1) == -1 && errno == EPIPE ? 0 : 2;
        }) == "exit 0");
}

TEST_CASE("a write past the file-size limit fails with EFBIG, and the process lives", "[signals]") {
  CHECK(in_child([] {
          char path[] = "/tmp/mpiddp-fsize-XXXXXX";
          const int fd = ::mkstemp(path);
          if (fd < 0) return 1;
          ::unlink(path);
          rlimit limit{};
          if (::getrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
          limit.rlim_cur = 4;
          if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 3;
          const char bytes[8] = {};
          return ::write(fd, bytes, sizeof(bytes)) == 4 && ::write(fd, bytes, sizeof(bytes)) == -1 && errno == EFBIG
                     ? 0
                     : 4;
        }) == "exit 0");
}
