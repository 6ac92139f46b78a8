#include "mpiddp/train/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"
#include "mpiddp/common/host.hpp"

namespace mpiddp {
namespace {

// "host H, pid P, Slurm job J, since T": what a refused job is told.
std::string holder_text() {
  std::string text = "host " + host_name() + ", pid " + std::to_string(getpid());
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) text += std::string(", Slurm job ") + job;
  char when[64] = {0};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text + ", since " + when;
}

// The holder as it recorded itself; one line whatever stands at .lock: at most
// 300 bytes of a regular file, never through a link, never blocking on a FIFO.
std::string recorded_holder(const std::string& dir) {
  const std::string fallback = "a job that has not recorded its name yet";
  const int fd = ::open((dir + "/.lock").c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fallback;
  struct stat st {};
  char text[301] = {0};
  ssize_t got = 0;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) got = ::read(fd, text, 300);
  ::close(fd);
  std::string line(text, got > 0 ? static_cast<std::size_t>(got) : 0);
  line = line.substr(0, line.find('\n'));
  for (char& c : line)  // the holder writes ASCII; anything else (escapes, bidi overrides) is not shown
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return line.empty() ? fallback : line;
}

}  // namespace

void RunLock::acquire(const std::string& run_dir) {
  tried_ = true;
  dir_ = run_dir;
  const int fd = ::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw InputError("run.dir " + run_dir + ": cannot open (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    fd_ = fd;
    return;
  }
  const int why = errno;
  ::close(fd);
  if (why == EWOULDBLOCK)
    throw InputError("run.dir " + run_dir + " is in use by another job (" + recorded_holder(run_dir) +
                     "); one job per run directory: wait for it to end, or choose another run.dir");
  // No flock on this file system: the run goes on unguarded rather than not at all.
  std::fprintf(stderr, "mpiddp: warning: run.dir %s: cannot lock (%s); nothing stops a second job from using it\n",
               run_dir.c_str(), std::strerror(why));
}

void RunLock::record_holder() const {
  if (fd_ < 0) return;
  write_file_atomically(dir_ + "/.lock", holder_text() + "\n", /*durable=*/false);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // the last descriptor closed releases the lock
}

}  // namespace mpiddp
