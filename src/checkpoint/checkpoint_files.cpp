#include "checkpoint_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {
std::string parent_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}
}  // namespace

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
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

}  // namespace mpiddp
