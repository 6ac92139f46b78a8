#include <sys/stat.h>

#include <map>

#include "mpiddp/common/error.hpp"
#include "shard.hpp"

namespace mpiddp {
namespace {

// What a shard written by `mpiddp shard` says about itself.
struct ShardLabel {
  const Shard* shard = nullptr;
  std::int64_t index = 0, count = 0, first_row = 0, total_rows = 0;
  std::vector<std::int64_t> sample_shape;
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text;
  for (auto d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return "[" + text + "]";
}

ShardLabel label_of(const Shard& shard) {
  const hid_t f = shard.file.get();
  ShardLabel l;
  l.shard = &shard;
  l.index = h5::read_int_attribute(f, "shard_index", shard.path);
  l.count = h5::read_int_attribute(f, "shard_count", shard.path);
  l.first_row = h5::read_int_attribute(f, "first_row", shard.path);
  l.total_rows = h5::read_int_attribute(f, "total_rows", shard.path);
  if (h5::has_attribute(shard.features.get(), "sample_shape"))
    l.sample_shape = h5::read_int_array_attribute(shard.features.get(), "sample_shape", shard.path);
  if (l.count < 1 || l.index < 0 || l.index >= l.count || l.total_rows < 1)
    throw InputError(shard.path + ": shard_index " + std::to_string(l.index) + " of shard_count " +
                     std::to_string(l.count) + " (total_rows " + std::to_string(l.total_rows) + ") is impossible");
  // The rows `mpiddp shard` gives shard i of n: [total*i/n, total*(i+1)/n), without overflow.
  const auto row_at = [&](std::int64_t i) {
    return l.total_rows / l.count * i + l.total_rows % l.count * i / l.count;
  };
  const std::int64_t first = row_at(l.index), last = row_at(l.index + 1);
  if (l.first_row != first || shard.rows != last - first)
    throw InputError(shard.path + ": shard " + std::to_string(l.index) + " of " + std::to_string(l.count) + " of " +
                     std::to_string(l.total_rows) + " rows should hold rows " + std::to_string(first) + " to " +
                     std::to_string(last - 1) + ", but holds " + std::to_string(shard.rows) + " from first_row " +
                     std::to_string(l.first_row));
  return l;
}

bool is_directory(const std::string& spec) {
  struct stat info {};
  return ::stat(spec.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

}  // namespace

void check_shard_set(const std::string& spec, const std::vector<Shard>& shards) {
  std::vector<ShardLabel> labels;
  const Shard* unlabelled = nullptr;
  for (const Shard& shard : shards) {
    if (h5::has_attribute(shard.file.get(), "mpiddp_shard_format")) labels.push_back(label_of(shard));
    else if (!unlabelled) unlabelled = &shard;
  }
  if (labels.empty()) return;  // written by other tools: nothing to compare
  const std::string where = spec + ": ";
  const ShardLabel& ref = labels.front();
  std::map<std::int64_t, const ShardLabel*> by_index;
  for (const ShardLabel& l : labels) {
    if (l.count != ref.count || l.total_rows != ref.total_rows)
      throw InputError(where + l.shard->path + " is shard " + std::to_string(l.index) + " of " +
                       std::to_string(l.count) + " (" + std::to_string(l.total_rows) + " rows) but " + ref.shard->path +
                       " is of " + std::to_string(ref.count) + " (" + std::to_string(ref.total_rows) +
                       " rows): shards of different conversions are mixed");
    if (l.sample_shape != ref.sample_shape)
      throw InputError(where + l.shard->path + " has sample_shape " + shape_text(l.sample_shape) + " but " +
                       ref.shard->path + " has " + shape_text(ref.sample_shape));
    const auto [at, fresh] = by_index.emplace(l.index, &l);
    if (!fresh)
      throw InputError(where + at->second->shard->path + " and " + l.shard->path + " are both shard " +
                       std::to_string(l.index) + " of " + std::to_string(l.count));
  }
  if (!is_directory(spec)) return;  // a file or glob may pick some shards on purpose
  if (unlabelled)
    throw InputError(where + unlabelled->path + " is not a shard of " + ref.shard->path +
                     "'s conversion (no shard attributes): shards of different origins are mixed");
  if (static_cast<std::int64_t>(labels.size()) != ref.count) {
    std::int64_t missing = 0;
    while (by_index.count(missing)) ++missing;
    throw InputError(where + "holds " + std::to_string(labels.size()) + " shard file(s) but they say shard_count " +
                     std::to_string(ref.count) + " (shard " + std::to_string(missing) +
                     " missing); a conversion incomplete, or re-sharded into a directory that was not empty?");
  }
}

}  // namespace mpiddp
