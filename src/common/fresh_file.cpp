#include "mpiddp/common/fresh_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "mpiddp/common/error.hpp"

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

namespace {
std::string parent_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}
}  // namespace

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) throw RuntimeError(path + ": cannot open for fsync (" + std::strerror(errno) + ")");
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw RuntimeError(path + ": fsync failed (" + std::strerror(saved) + ")");
}

void publish(const std::string& temp, const std::string& final_path) {
  fsync_path(temp, false);
  if (std::rename(temp.c_str(), final_path.c_str()) != 0)
    throw RuntimeError(final_path + ": rename failed (" + std::strerror(errno) + ")");
  fsync_path(parent_of(final_path), true);
}

void write_file_atomically(const std::string& path, const std::string& text, bool durable) {
  const std::string temp = path + ".tmp";
  std::FILE* f = create_fresh_file(temp);
  if (!f) {
    const int why = errno;
    const std::string message = temp + ": cannot write (" + std::strerror(why) + ")";
    // A permission, a read-only or missing directory: the user's to mend. A full disk is not bad input.
    if (why == EACCES || why == EPERM || why == EROFS || why == ENOENT || why == ENOTDIR || why == EISDIR)
      throw InputError(message);
    throw RuntimeError(message);
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  if (ok && durable) ok = ::fsync(::fileno(f)) == 0;
  const int why = errno;
  if (std::fclose(f) != 0 || !ok) {
    ::unlink(temp.c_str());
    throw RuntimeError(temp + ": write failed (" + std::strerror(why) + ")");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int failed = errno;
    ::unlink(temp.c_str());  // no temporary left behind
    throw RuntimeError(path + ": rename failed (" + std::strerror(failed) + ")");
  }
  if (durable) fsync_path(parent_of(path), true);
}

}  // namespace mpiddp
