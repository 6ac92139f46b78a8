#pragma once
// Token data for sequence models: `mpiddp shard --format bytes` (every byte of a
// file is a token, vocabulary 256) and `--format llmc` (llm.c's .bin shards: a
// 256 x int32 header, magic 20240520, version 1, the token count, then uint16
// ids) write HDF5 shards with one 1-D integer dataset `tokens` (the narrowest
// unsigned type that holds the vocabulary) carrying the attribute `vocab_size`.
// The trainer reads them as windows of data.context + 1 tokens (token_windows.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/data/shard_writer.hpp"  // ShardSummary, ShardProgress

namespace mpiddp {

// Tokens of a source, delivered in blocks.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::int64_t tokens() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  // Appends up to `max` tokens to `out` (cleared first); returns how many (0 at the end).
  virtual std::size_t read(std::size_t max, std::vector<std::uint32_t>& out) = 0;
};

// Every byte of `path` (vocabulary 256).
std::unique_ptr<TokenSource> open_byte_source(const std::string& path);
// llm.c's token shards, `pattern` a file or a glob (files in name order). Every
// file's header is checked before any token is read; a wrong magic, version or
// size is refused with one line naming the file. `vocab_size`: ids must be below it.
constexpr std::uint32_t kLlmcMagic = 20240520;
std::unique_ptr<TokenSource> open_llmc_source(const std::string& pattern, std::int64_t vocab_size);

// Writes `out_dir`/PREFIX-0000i-of-0000N.h5 (each a contiguous piece of the
// tokens) as write_shards does: into a new or empty directory, every file
// complete or none. ShardSummary::rows counts tokens.
ShardSummary write_token_shards(TokenSource& source, const std::string& out_dir, int shards,
                                const std::string& prefix, const ShardProgress& progress = {});

}  // namespace mpiddp
