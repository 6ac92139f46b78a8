#include "mpiddp/data/dataset.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/simd.hpp"
#include "io/mapped_reads.hpp"
#include "io/stored_extent.hpp"
#include "shard.hpp"
#include "token_windows.hpp"

namespace mpiddp {
namespace {
constexpr const char* kShrankWhileTraining = "shard was truncated or replaced while training";
}  // namespace

Shard::Shard(Shard&& other) noexcept
    : path(std::move(other.path)),
      first(other.first),
      rows(other.rows),
      bytes(other.bytes),
      file(std::move(other.file)),
      features(std::move(other.features)),
      labels(std::move(other.labels)),
      mapping(other.mapping) {
  other.mapping = Mapping();
}

Shard::~Shard() {
  if (mapping.base) ::munmap(const_cast<unsigned char*>(mapping.base), mapping.length);
  if (mapping.fd >= 0) ::close(mapping.fd);
}

std::vector<std::string> list_shards(const std::string& spec) {
  struct stat info {};
  std::string pattern = spec;
  const bool exists = ::stat(spec.c_str(), &info) == 0;
  if (exists && S_ISDIR(info.st_mode)) {
    pattern = spec + "/*.h5";
  } else if (exists) {
    return {spec};
  }
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);
  std::vector<std::string> paths;
  if (rc == 0)
    for (std::size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
  globfree(&found);
  if (paths.empty()) {
    if (exists) throw InputError(spec + ": directory holds no *.h5 shards");
    throw InputError(spec + ": no such shard file, directory or glob match");
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

ShardedDataset::ShardedDataset(ShardedDataset&&) noexcept = default;
ShardedDataset::~ShardedDataset() = default;

ShardedDataset::ShardedDataset(const std::string& spec, int context)
    : windows_(std::make_unique<TokenWindows>(list_shards(spec), context)), kind_(LabelKind::class_id) {
  size_ = windows_->size();
  feature_dim_ = target_dim_ = static_cast<std::size_t>(context);
  sample_shape_ = {feature_dim_};
  declared_classes_ = static_cast<int>(windows_->vocab_size());
  if (size_ == 0) throw InputError(spec + ": data set is empty (no window of " + std::to_string(context + 1) + " tokens)");
}

ShardedDataset::ShardedDataset(const std::string& spec, const std::string& features_name,
                               const std::string& labels_name, LabelKind kind)
    : features_name_(features_name), labels_name_(labels_name), kind_(kind) {
  h5::silence_errors();
  for (const auto& path : list_shards(spec)) {
    Shard shard;
    shard.path = path;
    shard.first = size_;
    open_shard(shard, shards_.empty());
    size_ += shard.rows;
    shards_.push_back(std::move(shard));
  }
  check_shard_set(spec, shards_);
  check_sample_shapes(spec);
  if (size_ == 0) throw InputError(spec + ": data set is empty (0 samples in " + std::to_string(shards_.size()) + " shard(s))");
}

namespace {

std::vector<hsize_t> dims_of(hid_t dataset) {
  h5::Handle space(H5Dget_space(dataset), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// Copies n floats (when dst is not null) and says whether all are finite, in one
// pass over the source: a float is NaN or Inf exactly when its exponent bits are
// all ones, and adding one to that exponent then carries into the sign bit. Plain
// integer operations vectorise, so on Fashion-MNIST as float32 the check adds
// about 60 ns to a 784-feature row's copy (docs/data.md).
// Row copies run where batches are read (the loader thread, or inline) once per sample, beside the ranks' own
// work on the same cores: built per instruction set so they take little of it.
MPIDDP_VECTOR_CLONES bool copy_all_finite(float* dst, const void* src, std::size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  std::uint32_t carry = 0;
  for (std::size_t j = 0; j < n; ++j) {
    std::uint32_t bits;
    std::memcpy(&bits, bytes + j * sizeof(bits), sizeof(bits));
    if (dst) std::memcpy(dst + j, &bits, sizeof(bits));
    carry |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (carry & 0x80000000u) == 0;
}

// A uint8 row as floats: byte * scale.
MPIDDP_VECTOR_CLONES void scale_bytes(float* __restrict dst, const unsigned char* __restrict src, std::size_t n,
                                      float scale) {
  for (std::size_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]) * scale;
}

std::string type_name(hid_t dataset) {
  h5::Handle type(H5Dget_type(dataset), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  const std::size_t size = H5Tget_size(type.get());
  if (cls == H5T_INTEGER)
    return std::string(H5Tget_sign(type.get()) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(size * 8);
  if (cls == H5T_FLOAT) return "float" + std::to_string(size * 8);
  return "other";
}

}  // namespace

void ShardedDataset::open_shard(Shard& shard, bool first) {
  const std::string& path = shard.path;
  if (::access(path.c_str(), R_OK) != 0) throw InputError(path + ": cannot read shard (" + std::strerror(errno) + ")");
  // No sieve buffer: with it, every scattered row read pulls in 64 KiB around it.
  h5::Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_sieve_buf_size(access.get(), 0);
  shard.file = h5::open_read_only(path, path, access.get());
  if (!shard.file) throw InputError(path + ": not a readable HDF5 file");
  shard.bytes = h5::file_bytes(shard.file.get());
  h5::refuse_outside_storage(shard.file.get(), path);
  for (const auto* name : {&features_name_, &labels_name_}) {
    if (H5Lexists(shard.file.get(), name->c_str(), H5P_DEFAULT) <= 0)
      throw InputError(path + ": no dataset '" + *name + "' (set data." +
                       (name == &features_name_ ? "features" : "labels") + ")");
  }
  shard.features = h5::Handle(H5Dopen2(shard.file.get(), features_name_.c_str(), H5P_DEFAULT), H5Dclose);
  shard.labels = h5::Handle(H5Dopen2(shard.file.get(), labels_name_.c_str(), H5P_DEFAULT), H5Dclose);
  if (!shard.features || !shard.labels) throw InputError(path + ": cannot open datasets");

  const auto fdims = dims_of(shard.features.get());
  const auto ldims = dims_of(shard.labels.get());
  const std::string ftype = type_name(shard.features.get()), ltype = type_name(shard.labels.get());
  const std::string fwhere = path + ": dataset '" + features_name_ + "'";
  const std::string lwhere = path + ": dataset '" + labels_name_ + "'";
  if (fdims.size() != 2) throw InputError(fwhere + " must be 2-D (samples, features), has " + std::to_string(fdims.size()) + " dimension(s)");
  if (ftype != "uint8" && ftype != "float32") throw InputError(fwhere + " has type " + ftype + ", expected uint8 or float32");
  if (fdims[1] == 0) throw InputError(fwhere + " holds 0 features per sample (" + std::to_string(fdims[0]) + " x 0)");
  if (ldims.empty() || ldims.size() > 2 || ldims[0] != fdims[0])
    throw InputError(lwhere + " must have one row per sample (" + std::to_string(fdims[0]) + ")");
  const std::string want_label = kind_ == LabelKind::class_id ? "int32" : "float32";
  if (ltype != want_label)
    throw InputError(lwhere + " has type " + ltype + ", expected " + want_label + " for data.task = " +
                     (kind_ == LabelKind::class_id ? "classification" : "regression"));
  if (kind_ == LabelKind::class_id && ldims.size() != 1) throw InputError(lwhere + " must be 1-D for classification");

  // Before anything is sized from the extents: the file must hold what they declare.
  h5::check_stored_extent(shard.features.get(), fdims, fwhere);
  h5::check_stored_extent(shard.labels.get(), ldims, lwhere);

  const bool u8 = ftype == "uint8";
  const double scale = u8 ? h5::read_double_attribute(shard.features.get(), "scale", fwhere) : 1.0;
  if (!(std::isfinite(scale) && scale > 0.0))
    throw InputError(fwhere + ": attribute 'scale' is " + std::to_string(scale) + ", not a positive finite number");
  const std::size_t tdim = ldims.size() == 2 ? ldims[1] : 1;
  int classes = 0;
  if (kind_ == LabelKind::class_id && h5::has_attribute(shard.labels.get(), "num_classes")) {
    const std::int64_t declared = h5::read_int_attribute(shard.labels.get(), "num_classes", lwhere);
    if (declared < 2 || declared > INT_MAX)
      throw InputError(lwhere + ": attribute num_classes is " + std::to_string(declared) +
                       (declared < 2 ? " (a classifier needs at least 2 classes)" : " (too many classes)"));
    classes = static_cast<int>(declared);
  }
  if (first) {
    feature_dim_ = fdims[1];
    stored_uint8_ = u8;
    scale_ = scale;
    target_dim_ = tdim;
    declared_classes_ = classes;
  } else {
    const std::string& ref = shards_.front().path;
    if (fdims[1] != feature_dim_)
      throw InputError(fwhere + " has " + std::to_string(fdims[1]) + " features per sample but " + ref + " has " +
                       std::to_string(feature_dim_));
    if (u8 != stored_uint8_ || scale != scale_)
      throw InputError(fwhere + " has type " + ftype + " (scale " + std::to_string(scale) + ") unlike " + ref);
    if (tdim != target_dim_) throw InputError(lwhere + " has a different target width than " + ref);
    if (classes != declared_classes_) throw InputError(lwhere + " declares num_classes " + std::to_string(classes) + " unlike " + ref);
  }
  shard.rows = static_cast<std::int64_t>(fdims[0]);
  map_shard(shard);
}

namespace {
// Byte offset of a dataset's data in its file, if it can be read directly:
// contiguous layout, no filters, storage allocated, little-endian native type.
bool direct_offset(hid_t dataset, hid_t native_type, std::size_t& offset) {
  h5::Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  if (H5Pget_layout(plist.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(plist.get()) != 0 ||
      H5Pget_external_count(plist.get()) != 0)
    return false;
  h5::Handle type(H5Dget_type(dataset), H5Tclose);
  if (H5Tequal(type.get(), native_type) <= 0) return false;
  const haddr_t address = H5Dget_offset(dataset);
  if (address == HADDR_UNDEF) return false;
  offset = static_cast<std::size_t>(address);
  return true;
}
}  // namespace

void ShardedDataset::map_shard(Shard& shard) {
  const hid_t label_type = kind_ == LabelKind::class_id ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT;
  Shard::Mapping m;
  if (shard.rows == 0 ||
      !direct_offset(shard.features.get(), stored_uint8_ ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT, m.features_offset) ||
      !direct_offset(shard.labels.get(), label_type, m.labels_offset)) {
    all_mapped_ = false;
    return;
  }
  m.fd = ::open(shard.path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info {};
  if (m.fd < 0 || ::fstat(m.fd, &info) != 0) throw InputError(shard.path + ": cannot open (" + std::strerror(errno) + ")");
  m.length = static_cast<std::size_t>(info.st_size);
  const std::size_t elem = stored_uint8_ ? 1 : sizeof(float);
  const std::size_t rows = static_cast<std::size_t>(shard.rows);
  if (m.features_offset + rows * feature_dim_ * elem > m.length || m.labels_offset + rows * target_dim_ * 4 > m.length)
    throw InputError(shard.path + ": file is shorter than its datasets (truncated?)");
  void* base = ::mmap(nullptr, m.length, PROT_READ, MAP_SHARED, m.fd, 0);
  if (base == MAP_FAILED) {
    ::close(m.fd);
    all_mapped_ = false;
    return;
  }
  m.base = static_cast<const unsigned char*>(base);
  shard.mapping = m;
}

// Shards of other tools are not compared by check_shard_set, so every shard's
// sample_shape is compared here; a shape must also describe the feature count.
void ShardedDataset::check_sample_shapes(const std::string& spec) {
  const auto shape_of = [](const Shard& shard) {
    std::vector<std::int64_t> shape;
    if (h5::has_attribute(shard.features.get(), "sample_shape"))
      shape = h5::read_int_array_attribute(shard.features.get(), "sample_shape", shard.path);
    return shape;
  };
  const auto text = [](const std::vector<std::int64_t>& shape) {
    if (shape.empty()) return std::string("none");
    std::string t;
    for (auto d : shape) t += (t.empty() ? "" : "x") + std::to_string(d);
    return "[" + t + "]";
  };
  const std::vector<std::int64_t> shape = shape_of(shards_.front());
  for (const Shard& shard : shards_) {
    if (const auto other = shape_of(shard); other != shape)
      throw InputError(spec + ": " + shard.path + " has sample_shape " + text(other) + " but " +
                       shards_.front().path + " has " + text(shape));
  }
  if (shape.empty()) {
    sample_shape_ = {feature_dim_};
    return;
  }
  std::size_t product = 1;
  bool fits = true;  // every extent positive, and their product never above the feature count
  for (const std::int64_t d : shape) {
    fits = fits && d >= 1 && static_cast<std::size_t>(d) <= feature_dim_ / product;
    if (fits) product *= static_cast<std::size_t>(d);
  }
  if (!fits || product != feature_dim_)
    throw InputError(shards_.front().path + ": dataset '" + features_name_ + "': attribute sample_shape " +
                     text(shape) + " does not hold its " + std::to_string(feature_dim_) + " features per sample");
  sample_shape_.assign(shape.begin(), shape.end());
}

void ShardedDataset::check_not_truncated(const Shard& shard) const {
  // Touching a mapping past the end of a file that shrank would be SIGBUS:
  // check the size first and fail with a message instead.
  struct stat info {};
  if (::fstat(shard.mapping.fd, &info) != 0 || static_cast<std::size_t>(info.st_size) < shard.mapping.length)
    throw InputError(shard.path + ": " + kShrankWhileTraining);
}

// NaN or Inf in the data would surface as a "non-finite loss" at some later step,
// naming neither file nor row: it is refused where it is read.
void ShardedDataset::refuse_nonfinite(const float* values, const Shard& shard, std::size_t row,
                                      const char* what) const {
  std::size_t j = 0;
  while (std::isfinite(values[j])) ++j;
  throw InputError(shard.path + ": row " + std::to_string(row) + ": " + what + " " + std::to_string(j) + " is " +
                   (std::isnan(values[j]) ? "NaN" : values[j] > 0 ? "+Inf" : "-Inf"));
}

void ShardedDataset::read_mapped(const std::vector<std::int64_t>& indices, Batch& out) {
  const std::size_t n = indices.size();
  const float scale = static_cast<float>(scale_);
  const std::size_t row_bytes = feature_dim_ * (stored_uint8_ ? 1 : sizeof(float));
  // One size check per shard per batch (not per sample: indices jump between shards).
  std::vector<bool> checked(shards_.size(), false);
  struct Located {
    const Shard* shard;
    std::size_t row;
    const unsigned char* features;
  };
  const auto shard_of = [&](std::int64_t g) {
    return std::upper_bound(shards_.begin(), shards_.end(), g,
                            [](std::int64_t v, const Shard& s) { return v < s.first; }) - 1;
  };
  const auto features_of = [&](const Shard& shard, std::size_t row) {
    return shard.mapping.base + shard.mapping.features_offset + row * row_bytes;
  };
  const auto locate = [&](std::size_t p) {
    const std::int64_t g = indices[p];
    if (g < 0 || g >= size_) throw RuntimeError("sample index " + std::to_string(g) + " outside the data set");
    const auto it = shard_of(g);
    if (const auto s = static_cast<std::size_t>(it - shards_.begin()); !checked[s]) {
      check_not_truncated(*it);
      checked[s] = true;
    }
    const auto row = static_cast<std::size_t>(g - it->first);
    return Located{&*it, row, features_of(*it, row)};
  };
  // A file cut after its size check makes the reads below fault (SIGBUS): the
  // guard turns that into the check's own error.
  // volatile: read by the guard after a jump out of the signal handler.
  const std::string* volatile reading = nullptr;
  io::guard_mapped_reads([&] {
    for (std::size_t p = 0; p < n; ++p) {
      const Located at = locate(p);
      reading = &at.shard->path;  // the file the reads below touch
      // The sampler's order is random, so no hardware prefetcher guesses the next
      // row: it is asked for while this one is copied (half of the loader's time
      // was waiting for rows on Fashion-MNIST). Only a row inside its shard's rows
      // is asked for; the next sample's own checks come at its turn, so each
      // sample's errors come in sample order.
      if (p + 1 < n && indices[p + 1] >= 0 && indices[p + 1] < size_) {
        const auto it = shard_of(indices[p + 1]);
        const auto row = static_cast<std::size_t>(indices[p + 1] - it->first);
        if (static_cast<std::int64_t>(row) < it->rows && checked[static_cast<std::size_t>(it - shards_.begin())])
          for (std::size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(features_of(*it, row) + b);
      }
      const Shard& shard = *at.shard;
      const std::size_t row = at.row;
      float* dst = out.features.row(p);
      if (stored_uint8_) {
        scale_bytes(dst, at.features, feature_dim_, scale);
      } else if (!copy_all_finite(dst, at.features, feature_dim_)) {
        refuse_nonfinite(dst, shard, row, "feature");
      }
      const unsigned char* base = shard.mapping.base;
      if (kind_ == LabelKind::class_id) {
        std::int32_t label;
        std::memcpy(&label, base + shard.mapping.labels_offset + row * sizeof(std::int32_t), sizeof(label));
        if (classes_ > 0 && (label < 0 || label >= classes_))
          throw InputError(shard.path + ": row " + std::to_string(row) + ": label " + std::to_string(label) +
                           " outside [0, " + std::to_string(classes_) + ")");
        out.class_ids[p] = label;
      } else {
        float* targets = out.targets.row(p);
        const unsigned char* stored = base + shard.mapping.labels_offset + row * target_dim_ * sizeof(float);
        if (!copy_all_finite(targets, stored, target_dim_)) refuse_nonfinite(targets, shard, row, "regression target");
      }
    }
  }, reading, kShrankWhileTraining);
  // After the reads too: a cut inside the last page a read touched gives zeros, no fault.
  for (std::size_t s = 0; s < shards_.size(); ++s)
    if (checked[s]) check_not_truncated(shards_[s]);
}

std::string ShardedDataset::describe() const {
  if (windows_)
    return std::to_string(size_) + " windows of " + std::to_string(feature_dim_) + " + 1 tokens (" +
           std::to_string(windows_->tokens()) + " tokens, vocabulary " + std::to_string(windows_->vocab_size()) +
           ") in " + std::to_string(windows_->shards()) + " shard(s)";
  return std::to_string(size_) + " samples in " + std::to_string(shards_.size()) + " shard(s), " +
         std::to_string(feature_dim_) + " features (" + (stored_uint8_ ? "uint8" : "float32") + "), " +
         (all_mapped_ ? "memory-mapped reads" : "HDF5 hyperslab reads");
}

void ShardedDataset::read(const std::vector<std::int64_t>& indices, Batch& out) {
  if (windows_) return windows_->read(indices, out, classes_ > 0 ? classes_ : windows_->vocab_size());
  const std::size_t n = indices.size();
  out.features.resize(n, feature_dim_);
  if (kind_ == LabelKind::class_id) out.class_ids.resize(n);
  else out.targets.resize(n, target_dim_);
  if (all_mapped_) {
    read_mapped(indices, out);
    return;
  }
  h5::silence_errors();  // per thread: this may run on the loader thread
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());

  // Read every distinct row once, in file order, then scatter into batch order.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return indices[a] < indices[b]; });
  std::vector<std::int64_t> unique_rows;
  std::vector<std::size_t> slot_of(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t g = indices[order[k]];
    if (g < 0 || g >= size_) throw RuntimeError("sample index " + std::to_string(g) + " outside the data set");
    if (unique_rows.empty() || unique_rows.back() != g) unique_rows.push_back(g);
    slot_of[order[k]] = unique_rows.size() - 1;
  }
  const std::size_t u = unique_rows.size();
  const std::size_t elem = stored_uint8_ ? 1 : sizeof(float);
  raw_.resize(u * feature_dim_ * elem);
  if (kind_ == LabelKind::class_id) raw_ids_.resize(u);
  else raw_targets_.resize(u * target_dim_);

  std::size_t done = 0;
  while (done < u) {
    // All unique rows that fall into one shard.
    const auto it = std::upper_bound(shards_.begin(), shards_.end(), unique_rows[done],
                                     [](std::int64_t g, const Shard& s) { return g < s.first; });
    Shard& shard = *(it - 1);
    std::size_t end = done;
    while (end < u && unique_rows[end] < shard.first + shard.rows) ++end;
    const hsize_t count = end - done;

    for (int which = 0; which < 2; ++which) {
      const hid_t dataset = which == 0 ? shard.features.get() : shard.labels.get();
      const hsize_t width = which == 0 ? feature_dim_ : target_dim_;
      const bool two_d = which == 0 || (kind_ == LabelKind::target && dims_of(dataset).size() == 2);
      h5::Handle file_space(H5Dget_space(dataset), H5Sclose);
      H5Sselect_none(file_space.get());
      // Consecutive rows form one hyperslab block: one selection per run.
      for (std::size_t k = done; k < end;) {
        std::size_t run_end = k + 1;
        while (run_end < end && unique_rows[run_end] == unique_rows[run_end - 1] + 1) ++run_end;
        const hsize_t start[2] = {static_cast<hsize_t>(unique_rows[k] - shard.first), 0};
        const hsize_t block[2] = {run_end - k, width};
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_OR, start, nullptr, block, nullptr);
        k = run_end;
      }
      const hsize_t mem_dims[2] = {count, width};
      h5::Handle mem_space(H5Screate_simple(two_d ? 2 : 1, mem_dims, nullptr), H5Sclose);
      void* target;
      hid_t mem_type;
      if (which == 0) {
        target = raw_.data() + done * feature_dim_ * elem;
        mem_type = stored_uint8_ ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT;
      } else if (kind_ == LabelKind::class_id) {
        target = raw_ids_.data() + done;
        mem_type = H5T_NATIVE_INT32;
      } else {
        target = raw_targets_.data() + done * target_dim_;
        mem_type = H5T_NATIVE_FLOAT;
      }
      if (H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, target) < 0)
        throw InputError(shard.path + ": cannot read dataset '" + (which == 0 ? features_name_ : labels_name_) +
                         "' (file truncated or damaged?)");
    }
    // HDF5 reads zeros past a cut file's end: after the reads, the file must still be whole.
    h5::refuse_shrunk(shard.file.get(), shard.bytes, shard.path);
    for (std::size_t k = done; k < end; ++k) {
      const auto row = static_cast<std::size_t>(unique_rows[k] - shard.first);
      if (!stored_uint8_) {
        const float* features = reinterpret_cast<const float*>(raw_.data()) + k * feature_dim_;
        if (!copy_all_finite(nullptr, features, feature_dim_)) refuse_nonfinite(features, shard, row, "feature");
      }
      if (kind_ == LabelKind::target) {
        const float* targets = raw_targets_.data() + k * target_dim_;
        if (!copy_all_finite(nullptr, targets, target_dim_)) refuse_nonfinite(targets, shard, row, "regression target");
      }
    }
    if (kind_ == LabelKind::class_id && classes_ > 0) {
      for (std::size_t k = done; k < end; ++k) {
        const std::int32_t label = raw_ids_[k];
        if (label < 0 || label >= classes_)
          throw InputError(shard.path + ": row " + std::to_string(unique_rows[k] - shard.first) + ": label " +
                           std::to_string(label) + " outside [0, " + std::to_string(classes_) + ")");
      }
    }
    done = end;
  }

  const float scale = static_cast<float>(scale_);
  for (std::size_t p = 0; p < n; ++p) {
    const std::size_t s = slot_of[p];
    float* dst = out.features.row(p);
    if (stored_uint8_) {
      const unsigned char* src = raw_.data() + s * feature_dim_;
      scale_bytes(dst, src, feature_dim_, scale);
    } else {
      const float* src = reinterpret_cast<const float*>(raw_.data()) + s * feature_dim_;
      std::copy(src, src + feature_dim_, dst);
    }
    if (kind_ == LabelKind::class_id) {
      out.class_ids[p] = raw_ids_[s];
    } else {
      std::copy(raw_targets_.begin() + s * target_dim_, raw_targets_.begin() + (s + 1) * target_dim_,
                out.targets.row(p));
    }
  }
}

}  // namespace mpiddp
