#include "io/create_failure.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mpiddp::h5 {

std::string why_not_creatable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(path.c_str());
  return "the system allows it, HDF5 could not create it";
}

}  // namespace mpiddp::h5
