// `mpiddp shard --format bytes|llmc`: tokens into HDF5 shards, each a contiguous
// piece of the stream, as a 1-D `tokens` dataset of the narrowest unsigned type
// that holds the vocabulary, with `vocab_size` on it. Written as NAME.tmp and
// renamed when all are complete, like the row shards.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"
#include "mpiddp/data/token_shards.hpp"
#include "io/create_failure.hpp"
#include "shard_files.hpp"

namespace mpiddp {
namespace {

constexpr std::size_t kBlockTokens = 1 << 20;

hid_t stored_type(std::int64_t vocab) {
  if (vocab <= 256) return H5T_STD_U8LE;
  if (vocab <= 65536) return H5T_STD_U16LE;
  return H5T_STD_U32LE;
}

ShardSummary convert_tokens(TokenSource& source, const std::string& out_dir, int shards, const std::string& prefix,
                            const ShardProgress& progress, std::vector<std::string>& written) {
  const std::int64_t total = source.tokens();
  ShardSummary summary;
  std::vector<std::uint32_t> block;
  std::vector<std::string> temps;
  std::int64_t done = 0;
  for (int s = 0; s < shards; ++s) {
    const std::int64_t first = total * s / shards, last = total * (s + 1) / shards;
    const std::string path = out_dir + "/" + shard_name(prefix, s, shards), temp = path + ".tmp";
    written.push_back(temp);
    clear_path(temp);  // a new file, never through a link left at the temporary's name
    h5::Handle file(H5Fcreate(temp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file) throw RuntimeError(temp + ": cannot create shard (" + h5::why_not_creatable(temp) + ")");
    h5::Handle tokens = create_dataset(file.get(), "tokens", stored_type(source.vocab_size()),
                                       {static_cast<hsize_t>(last - first)}, path);
    for (std::int64_t at = first; at < last;) {
      const auto want = static_cast<std::size_t>(std::min<std::int64_t>(kBlockTokens, last - at));
      if (source.read(want, block) != want)
        throw InputError("the source ended early: expected " + std::to_string(total) + " tokens");
      write_rows(tokens.get(), H5T_NATIVE_UINT32, block.data(), static_cast<hsize_t>(at - first), want, 1, false, path);
      at += static_cast<std::int64_t>(want);
      done += static_cast<std::int64_t>(want);
      if (progress) progress(done, total);
    }
    h5::write_int_attribute(tokens.get(), "vocab_size", source.vocab_size());
    h5::write_int_attribute(file.get(), "mpiddp_shard_format", 1);
    h5::write_int_attribute(file.get(), "shard_index", s);
    h5::write_int_attribute(file.get(), "shard_count", shards);
    h5::write_int_attribute(file.get(), "first_token", first);
    h5::write_int_attribute(file.get(), "total_tokens", total);
    summary.files.push_back(path);
    temps.push_back(temp);
  }
  for (std::size_t s = 0; s < temps.size(); ++s) {
    if (std::rename(temps[s].c_str(), summary.files[s].c_str()) != 0)
      throw RuntimeError(summary.files[s] + ": rename failed (" + std::strerror(errno) + ")");
    written.push_back(summary.files[s]);
  }
  summary.rows = total;
  summary.classes = static_cast<int>(source.vocab_size());
  return summary;
}

}  // namespace

ShardSummary write_token_shards(TokenSource& source, const std::string& out_dir, int shards,
                                const std::string& prefix, const ShardProgress& progress) {
  h5::silence_errors();
  if (shards < 1) throw InputError("--shards must be at least 1");
  // Each shard must hold a window of at least two tokens.
  shards = static_cast<int>(std::min<std::int64_t>(shards, source.tokens() / 2));
  return convert_into_new_directory(out_dir, [&](std::vector<std::string>& written) {
    return convert_tokens(source, out_dir, shards, prefix, progress, written);
  });
}

}  // namespace mpiddp
