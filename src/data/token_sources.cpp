// The token sources of `mpiddp shard`: a file's bytes, and llm.c's .bin shards.
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "mpiddp/common/error.hpp"
#include "mpiddp/data/token_shards.hpp"

namespace mpiddp {
namespace {

std::int64_t regular_file_size(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw InputError(path + ": cannot read (" + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) throw InputError(path + ": not a regular file");
  return static_cast<std::int64_t>(info.st_size);
}

class ByteSource final : public TokenSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path), size_(regular_file_size(path)), in_(path, std::ios::binary) {
    if (!in_) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
    if (size_ < 2) throw InputError(path + ": holds " + std::to_string(size_) + " byte(s); a sequence needs at least 2");
  }
  std::int64_t tokens() const override { return size_; }
  std::int64_t vocab_size() const override { return 256; }
  std::size_t read(std::size_t max, std::vector<std::uint32_t>& out) override {
    buffer_.resize(max);
    in_.read(reinterpret_cast<char*>(buffer_.data()), static_cast<std::streamsize>(max));
    const auto got = static_cast<std::size_t>(in_.gcount());
    out.assign(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(got));
    return got;
  }

 private:
  std::string path_;
  std::int64_t size_;
  std::ifstream in_;
  std::vector<unsigned char> buffer_;
};

// One llm.c shard: its header, read and checked.
struct LlmcFile {
  std::string path;
  std::int64_t tokens = 0;
};

LlmcFile check_llmc_header(const std::string& path) {
  const std::int64_t size = regular_file_size(path);
  std::ifstream in(path, std::ios::binary);
  std::int32_t header[256] = {};
  if (!in || size < static_cast<std::int64_t>(sizeof(header)) || !in.read(reinterpret_cast<char*>(header), sizeof(header)))
    throw InputError(path + ": not an llm.c token shard (shorter than its 1024-byte header)");
  if (static_cast<std::uint32_t>(header[0]) != kLlmcMagic)
    throw InputError(path + ": not an llm.c token shard (magic " + std::to_string(header[0]) + ", expected " +
                     std::to_string(kLlmcMagic) + ")");
  if (header[1] != 1)
    throw InputError(path + ": llm.c token shard version " + std::to_string(header[1]) + " (only version 1, uint16 ids, is read)");
  const std::int64_t count = header[2];
  const std::int64_t expected = static_cast<std::int64_t>(sizeof(header)) + 2 * count;
  if (count < 0 || size != expected)
    throw InputError(path + ": the header says " + std::to_string(count) + " tokens (" + std::to_string(expected) +
                     " bytes with the header), but the file has " + std::to_string(size) + " bytes");
  return {path, count};
}

class LlmcSource final : public TokenSource {
 public:
  LlmcSource(std::vector<LlmcFile> files, std::int64_t vocab) : files_(std::move(files)), vocab_(vocab) {
    for (const LlmcFile& f : files_) total_ += f.tokens;
    if (total_ < 2) throw InputError("the llm.c shards hold " + std::to_string(total_) + " token(s); a sequence needs 2");
  }
  std::int64_t tokens() const override { return total_; }
  std::int64_t vocab_size() const override { return vocab_; }
  std::size_t read(std::size_t max, std::vector<std::uint32_t>& out) override {
    out.clear();
    while (out.size() < max && next_ < files_.size()) {
      if (!in_.is_open()) {
        in_.open(files_[next_].path, std::ios::binary);
        in_.seekg(1024);
        left_ = files_[next_].tokens;
      }
      const auto want = static_cast<std::size_t>(std::min<std::int64_t>(left_, static_cast<std::int64_t>(max - out.size())));
      ids_.resize(want);
      if (!in_.read(reinterpret_cast<char*>(ids_.data()), static_cast<std::streamsize>(2 * want)))
        throw InputError(files_[next_].path + ": ended before the tokens its header counts (changed while read?)");
      for (std::uint16_t id : ids_) {
        if (id >= vocab_)
          throw InputError(files_[next_].path + ": token id " + std::to_string(id) + " is not below the vocabulary size " +
                           std::to_string(vocab_) + " (set --vocab)");
        out.push_back(id);
      }
      left_ -= static_cast<std::int64_t>(want);
      if (left_ == 0) {
        in_.close();
        ++next_;
      }
    }
    return out.size();
  }

 private:
  std::vector<LlmcFile> files_;
  std::int64_t vocab_, total_ = 0, left_ = 0;
  std::size_t next_ = 0;
  std::ifstream in_;
  std::vector<std::uint16_t> ids_;
};

std::vector<std::string> matching_files(const std::string& pattern) {
  glob_t found{};
  std::vector<std::string> paths;
  if (::glob(pattern.c_str(), 0, nullptr, &found) == 0)
    for (std::size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
  globfree(&found);
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw InputError(pattern + ": no file matches");
  return paths;
}

}  // namespace

std::unique_ptr<TokenSource> open_byte_source(const std::string& path) { return std::make_unique<ByteSource>(path); }

std::unique_ptr<TokenSource> open_llmc_source(const std::string& pattern, std::int64_t vocab_size) {
  if (vocab_size < 2 || vocab_size > 65536)
    throw InputError("--vocab " + std::to_string(vocab_size) + ": llm.c's uint16 ids need a vocabulary of 2 to 65536");
  std::vector<LlmcFile> files;
  for (const std::string& path : matching_files(pattern)) files.push_back(check_llmc_header(path));
  return std::make_unique<LlmcSource>(std::move(files), vocab_size);
}

}  // namespace mpiddp
