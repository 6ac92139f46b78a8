#include "mpiddp/data/shard_writer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"
#include "io/create_failure.hpp"
#include "io/hdf5_util.hpp"
#include "shard_files.hpp"

namespace mpiddp {
namespace {

constexpr std::size_t kBlockRows = 4096;  // rows converted per read: bounds memory use

}  // namespace

std::string shard_name(const std::string& prefix, int index, int count) {
  char name[64];
  std::snprintf(name, sizeof(name), "-%05d-of-%05d.h5", index, count);
  return prefix + name;
}

h5::Handle create_dataset(hid_t file, const char* name, hid_t type, std::vector<hsize_t> dims, const std::string& path) {
  h5::Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  return h5::Handle(h5::check_id<RuntimeError>(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                               path + ": cannot create dataset " + name),
                    H5Dclose);
}

void write_rows(hid_t dataset, hid_t mem_type, const void* data, hsize_t first, hsize_t count, hsize_t width,
                bool two_d, const std::string& path) {
  h5::Handle file_space(H5Dget_space(dataset), H5Sclose);
  const hsize_t start[2] = {first, 0}, extent[2] = {count, width};
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr);
  h5::Handle mem_space(H5Screate_simple(two_d ? 2 : 1, extent, nullptr), H5Sclose);
  h5::check<RuntimeError>(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data),
                          path + ": write failed (disk full?)");
}

void check_shard_output_dir(const std::string& out_dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(out_dir, ec);
  if (!std::filesystem::exists(status)) return;
  if (!std::filesystem::is_directory(status)) throw InputError(out_dir + ": exists and is not a directory");
  std::filesystem::directory_iterator entries(out_dir, ec);
  if (ec) throw InputError(out_dir + ": cannot read directory (" + ec.message() + ")");
  if (entries != std::filesystem::directory_iterator())
    throw InputError(out_dir + ": output directory is not empty (it holds " + entries->path().filename().string() +
                     "); shards of two conversions would be read as one data set: choose a new or empty directory");
}

namespace {

// Writes every shard as NAME.tmp, then renames them all into place; `written`
// collects every file made, so a failure can remove them.
ShardSummary convert(RowSource& source, const std::string& out_dir, int shards, const std::string& prefix,
                     const ShardProgress& progress, std::vector<std::string>& written) {
  const std::int64_t total = source.rows();
  const std::size_t dim = source.feature_dim(), tdim = source.target_dim();
  const bool u8 = source.uint8_features(), classes = source.class_labels();
  ShardSummary summary;
  std::int32_t max_label = -1;
  std::vector<unsigned char> u8_block;
  std::vector<float> f32_block, target_block;
  std::vector<std::int32_t> id_block;
  std::vector<std::string> temp_files;
  std::int64_t rows_done = 0;

  for (int s = 0; s < shards; ++s) {
    const std::int64_t first = total * s / shards, last = total * (s + 1) / shards;
    const hsize_t rows = static_cast<hsize_t>(last - first);
    const std::string path = out_dir + "/" + shard_name(prefix, s, shards);
    const std::string temp = path + ".tmp";
    written.push_back(temp);
    clear_path(temp);  // a new file, never through a link left at the temporary's name
    h5::Handle file(H5Fcreate(temp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file) throw RuntimeError(temp + ": cannot create shard (" + h5::why_not_creatable(temp) + ")");
    h5::Handle features = create_dataset(file.get(), "features", u8 ? H5T_STD_U8LE : H5T_IEEE_F32LE, {rows, dim}, path);
    h5::Handle labels = classes ? create_dataset(file.get(), "labels", H5T_STD_I32LE, {rows}, path)
                        : tdim == 1 ? create_dataset(file.get(), "labels", H5T_IEEE_F32LE, {rows}, path)
                                    : create_dataset(file.get(), "labels", H5T_IEEE_F32LE, {rows, tdim}, path);
    hsize_t written = 0;
    while (written < rows) {
      const std::size_t want = static_cast<std::size_t>(std::min<hsize_t>(kBlockRows, rows - written));
      const std::size_t got = source.read(want, u8_block, f32_block, id_block, target_block);
      if (got != want) throw InputError("source ended early: expected " + std::to_string(total) + " rows");
      if (u8) write_rows(features.get(), H5T_NATIVE_UINT8, u8_block.data(), written, got, dim, true, path);
      else write_rows(features.get(), H5T_NATIVE_FLOAT, f32_block.data(), written, got, dim, true, path);
      if (classes) {
        write_rows(labels.get(), H5T_NATIVE_INT32, id_block.data(), written, got, 1, false, path);
        max_label = std::max(max_label, *std::max_element(id_block.begin(), id_block.end()));
      } else {
        write_rows(labels.get(), H5T_NATIVE_FLOAT, target_block.data(), written, got, tdim, tdim > 1, path);
      }
      written += got;
      rows_done += static_cast<std::int64_t>(got);
      if (progress) progress(rows_done, total);
    }
    if (u8) h5::write_double_attribute(features.get(), "scale", 1.0 / 255.0);
    h5::write_int_array_attribute(features.get(), "sample_shape", source.sample_shape());
    h5::write_int_attribute(file.get(), "mpiddp_shard_format", 1);
    h5::write_int_attribute(file.get(), "shard_index", s);
    h5::write_int_attribute(file.get(), "shard_count", shards);
    h5::write_int_attribute(file.get(), "first_row", first);
    h5::write_int_attribute(file.get(), "total_rows", total);
    summary.files.push_back(path);
    temp_files.push_back(temp);
  }
  // num_classes is known only after the last row: stamp it on every shard, then
  // publish the shards under their final names.
  summary.classes = classes ? max_label + 1 : 0;
  for (std::size_t s = 0; s < temp_files.size(); ++s) {
    if (classes) {
      h5::Handle file(H5Fopen(temp_files[s].c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
      h5::Handle labels(H5Dopen2(file.get(), "labels", H5P_DEFAULT), H5Dclose);
      if (!labels) throw RuntimeError(temp_files[s] + ": cannot reopen labels");
      h5::write_int_attribute(labels.get(), "num_classes", summary.classes);
    }
    if (std::rename(temp_files[s].c_str(), summary.files[s].c_str()) != 0)
      throw RuntimeError(summary.files[s] + ": rename failed (" + std::strerror(errno) + ")");
    written.push_back(summary.files[s]);
  }
  summary.rows = total;
  return summary;
}

}  // namespace

ShardSummary convert_into_new_directory(const std::string& out_dir, const Conversion& convert) {
  check_shard_output_dir(out_dir);
  std::error_code ec;
  const bool created = !std::filesystem::exists(out_dir, ec);
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw InputError(out_dir + ": cannot create directory (" + ec.message() + ")");
  std::vector<std::string> written;
  try {
    return convert(written);
  } catch (...) {
    // A failed conversion leaves nothing new: no partial shard, no .tmp file,
    // and no directory it created.
    for (const auto& file : written) std::filesystem::remove(file, ec);
    if (created) std::filesystem::remove(out_dir, ec);
    throw;
  }
}

ShardSummary write_shards(RowSource& source, const std::string& out_dir, int shards, const std::string& prefix,
                          const ShardProgress& progress) {
  h5::silence_errors();
  if (shards < 1) throw InputError("--shards must be at least 1");
  const std::int64_t total = source.rows();
  if (total == 0) throw InputError("the source holds no rows");
  if (shards > total) shards = static_cast<int>(total);
  return convert_into_new_directory(out_dir, [&](std::vector<std::string>& written) {
    return convert(source, out_dir, shards, prefix, progress, written);
  });
}

}  // namespace mpiddp
