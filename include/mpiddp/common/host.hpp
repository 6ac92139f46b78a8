#pragma once
// This machine's host name, as error lines, lock files and peer-probe tables name it.
#include <unistd.h>

#include <string>

namespace mpiddp {

inline std::string host_name() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);  // a longer name is cut, still terminated
  return name;
}

}  // namespace mpiddp
