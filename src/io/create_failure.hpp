#pragma once
// HDF5 does not say why it could not create a file, and errno after H5Fcreate is
// whatever HDF5's last system call left (often ENOENT from a probe): ask the
// system the same question and report its answer (a permission problem, a
// read-only file system, a missing directory).
#include <string>

namespace mpiddp::h5 {

// The strerror text of creating `path` for writing; removes what it created.
std::string why_not_creatable(const std::string& path);

}  // namespace mpiddp::h5
