#pragma once
// File steps shared by checkpoint writing and the checkpoint directory (private
// to the checkpoint module).
#include <string>

namespace mpiddp {

// fsync of a file or directory; RuntimeError naming it on failure.
void fsync_path(const std::string& path, bool directory);
// fsync `temp`, rename it to `final_path`, fsync the directory.
void publish(const std::string& temp, const std::string& final_path);

}  // namespace mpiddp
