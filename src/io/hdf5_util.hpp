#pragma once
// RAII for HDF5 identifiers and checked calls. HDF5's own error stack printing
// is switched off; failures become exceptions whose text names the file and
// object.
#include <hdf5.h>

#include <mutex>
#include <string>
#include <vector>

namespace mpiddp::h5 {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.id_;
      closer_ = other.closer_;
      other.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  // Forgets the id without closing it (it was closed by hand).
  void release() { id_ = -1; }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// Turns HDF5's automatic error printing off for the calling thread (thread-safe
// HDF5 builds keep one error stack per thread).
void silence_errors();

// Held around HDF5 calls that may run while another thread uses HDF5 (the loader
// thread's reads, the main thread's checkpoints): HDF5 builds that are not
// thread-safe need it, thread-safe ones serialise the same way internally.
std::mutex& library_mutex();

// Throws `Error` with `what` when id < 0.
template <class Error>
hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) throw Error(what);
  return id;
}
template <class Error>
void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw Error(what);
}

// Refuses (InputError naming `where` and the object) a file that would make a
// read leave it: a link that is not a hard link (soft, external or user-defined)
// or a dataset whose raw data is stored elsewhere (external storage, a virtual
// dataset). Called on every file mpiddp reads: data shards, checkpoints, init files.
void refuse_outside_storage(hid_t file, const std::string& where);

// The bytes the open file holds now (fstat of HDF5's own descriptor, so a file
// renamed over its path does not count); -1 where its driver has no descriptor.
// HDF5 reads zeros past a file's end: a reader that compares this with the size
// at opening after each read knows whether what it read was still the file.
std::int64_t file_bytes(hid_t file);
// InputError "<path>: shard was truncated while training" if the open file now
// holds fewer bytes than `bytes_at_open` (file_bytes then; -1: never refused).
void refuse_shrunk(hid_t file, std::int64_t bytes_at_open, const std::string& path);

// H5Fopen, read-only, of `path` once it is known to be a regular file: HDF5's
// open would block forever on a FIFO (and act on no signal meanwhile) or read a
// device without end. InputError naming `where` for anything else; an invalid
// handle where HDF5 cannot open it (the caller says why in its own words).
Handle open_read_only(const std::string& path, const std::string& where, hid_t access = H5P_DEFAULT);

bool has_attribute(hid_t object, const char* name);
// The names of a group's members (links), in name order.
std::vector<std::string> link_names(hid_t group, const std::string& where);
double read_double_attribute(hid_t object, const char* name, const std::string& where);
std::int64_t read_int_attribute(hid_t object, const char* name, const std::string& where);
std::vector<std::int64_t> read_int_array_attribute(hid_t object, const char* name, const std::string& where);
void write_double_attribute(hid_t object, const char* name, double value);
void write_int_attribute(hid_t object, const char* name, std::int64_t value);
void write_int_array_attribute(hid_t object, const char* name, const std::vector<std::int64_t>& values);
void write_string_attribute(hid_t object, const char* name, const std::string& value);
std::string read_string_attribute(hid_t object, const char* name, const std::string& where);

}  // namespace mpiddp::h5
