#include "mpiddp/common/fresh_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace mpiddp {

bool clear_path(const std::string& path) {
  return ::unlink(path.c_str()) == 0 || errno == ENOENT;
}

std::FILE* create_fresh_file(const std::string& path) {
  if (!clear_path(path)) return nullptr;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "w");
  if (!f) ::close(fd);
  return f;
}

std::FILE* open_to_append(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = EINVAL;  // a FIFO or device: not a log file
    return nullptr;
  }
  ::fcntl(fd, F_SETFL, O_APPEND);  // blocking writes again
  std::FILE* f = ::fdopen(fd, "a");
  if (!f) ::close(fd);
  return f;
}

}  // namespace mpiddp
