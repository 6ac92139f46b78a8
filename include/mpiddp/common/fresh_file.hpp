#pragma once
// Writing into directories that others may have prepared (a run.dir, a shard
// output directory): never through a symbolic link planted there, never into a
// FIFO. Each of these leaves errno set where it fails.
#include <cstdio>
#include <string>

namespace mpiddp {

// Removes whatever stands at `path` (a stale temporary, a symlink, a FIFO; not a
// directory) and creates a new regular file there for writing, with O_EXCL and
// O_NOFOLLOW, so the file written is the one created. nullptr on failure.
std::FILE* create_fresh_file(const std::string& path);

// Removes whatever stands at `path` (not a directory), so that a create with
// O_EXCL (HDF5's H5F_ACC_EXCL) makes a new file there. False if it could not.
bool clear_path(const std::string& path);

// Opens `path` for appending, creating it if absent: only a regular file, never
// through a symbolic link (ELOOP). nullptr on failure.
std::FILE* open_to_append(const std::string& path);

}  // namespace mpiddp
