#pragma once
// Writing into directories that others may have prepared (a run.dir, a shard
// output directory): never through a symbolic link planted there, never into a
// FIFO; and replacing a file so that a reader sees the old whole file or the new
// whole file, never a part. The first three leave errno set where they fail; the
// rest throw RuntimeError naming the path.
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

// fsync of a file or directory.
void fsync_path(const std::string& path, bool directory);

// fsync `temp`, rename it to `final_path`, fsync the directory: after a crash at
// any point the name holds the old file or the whole new one.
void publish(const std::string& temp, const std::string& final_path);

// Writes `text` to PATH.tmp (created fresh) and renames it over `path`; with
// `durable`, through publish() (fsyncs), for files a resume relies on.
void write_file_atomically(const std::string& path, const std::string& text, bool durable);

}  // namespace mpiddp
