// CSV rows "f1,f2,...,fD,label" (or D features then T float targets). The file is
// read twice: once to count rows and check the column count, once to convert.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/memory.hpp"
#include "mpiddp/data/shard_writer.hpp"

namespace mpiddp {
namespace {

constexpr std::size_t kMaxLineBytes = std::size_t{1} << 30;

class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw InputError(path + ": cannot open");
  }
  ~LineReader() { gzclose(file_); }
  // Next line without the newline; false at the end.
  bool next(std::string& line) {
    line.clear();
    for (;;) {
      if (pos_ == end_) {
        const int got = gzread(file_, buffer_, sizeof(buffer_));
        if (got < 0) throw InputError(path_ + ": read error (damaged gzip?)");
        if (got == 0) return !line.empty();
        pos_ = 0;
        end_ = static_cast<std::size_t>(got);
      }
      const char* start = buffer_ + pos_;
      const void* nl = std::memchr(start, '\n', end_ - pos_);
      if (nl) {
        const std::size_t len = static_cast<const char*>(nl) - start;
        line.append(start, len);
        pos_ += len + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
      line.append(start, end_ - pos_);
      pos_ = end_;
      // A file without newlines (binary, or one giant row) would grow the line without bound.
      if (line.size() > kMaxLineBytes)
        throw InputError(path_ + ": a line longer than " + bytes_text(kMaxLineBytes) + " (not a CSV file?)");
    }
  }

 private:
  std::string path_;
  gzFile file_;
  char buffer_[1 << 16];
  std::size_t pos_ = 0, end_ = 0;
};

// Parses comma-separated numbers; false if any field is not a number.
bool parse_numbers(const std::string& line, std::vector<double>& values) {
  values.clear();
  const char* p = line.c_str();
  for (;;) {
    while (*p == ' ' || *p == '\t') ++p;
    char* after = nullptr;
    errno = 0;
    const double v = std::strtod(p, &after);
    if (after == p || errno == ERANGE || !std::isfinite(v)) return false;
    values.push_back(v);
    p = after;
    while (*p == ' ' || *p == '\t') ++p;
    if (*p == '\0') return true;
    if (*p != ',') return false;
    ++p;
  }
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

class CsvSource final : public RowSource {
 public:
  CsvSource(const std::string& path, bool classification, std::size_t targets)
      : path_(path), classification_(classification), targets_(classification ? 1 : targets) {
    if (targets_ < 1) throw InputError(path + ": --targets must be at least 1");
    LineReader reader(path);
    std::string line;
    std::vector<double> values;
    std::int64_t line_no = 0;
    while (reader.next(line)) {
      ++line_no;
      if (blank(line)) continue;
      if (!parse_numbers(line, values)) {
        if (line_no == 1) {
          header_ = true;
          continue;
        }
        throw InputError(path + ":" + std::to_string(line_no) + ": not a row of numbers");
      }
      if (columns_ == 0) columns_ = values.size();
      if (values.size() != columns_)
        throw InputError(path + ":" + std::to_string(line_no) + ": " + std::to_string(values.size()) +
                         " columns, expected " + std::to_string(columns_));
      ++rows_;
    }
    if (columns_ <= targets_) throw InputError(path + ": need at least one feature column before the label column(s)");
    // The converter holds blocks of up to 4096 rows as floats: one block must fit in memory.
    const double block = std::min<double>(static_cast<double>(rows_), 4096.0) * static_cast<double>(columns_) * 4;
    if (const double memory = static_cast<double>(physical_memory_bytes()); memory > 0 && block > memory)
      throw InputError(path + ": rows of " + std::to_string(columns_) + " columns are too large to convert (" +
                       bytes_text(block) + " per block of rows, this machine has " + bytes_text(memory) + ")");
    reader_ = std::make_unique<LineReader>(path);
  }
  std::int64_t rows() const override { return rows_; }
  std::size_t feature_dim() const override { return columns_ - targets_; }
  std::size_t target_dim() const override { return targets_; }
  bool class_labels() const override { return classification_; }
  bool uint8_features() const override { return false; }
  std::vector<std::int64_t> sample_shape() const override { return {static_cast<std::int64_t>(feature_dim())}; }

  std::size_t read(std::size_t max_rows, std::vector<unsigned char>&, std::vector<float>& f32,
                   std::vector<std::int32_t>& ids, std::vector<float>& targets) override {
    const std::size_t dim = feature_dim();
    f32.clear();
    ids.clear();
    targets.clear();
    std::string line;
    std::vector<double> values;
    std::size_t n = 0;
    while (n < max_rows && reader_->next(line)) {
      ++line_no_;
      if (blank(line) || (header_ && line_no_ == 1)) continue;
      parse_numbers(line, values);
      for (std::size_t j = 0; j < dim; ++j) f32.push_back(static_cast<float>(values[j]));
      if (classification_) {
        const double label = values[dim];
        if (label != std::floor(label) || label < 0 || label > 2147483647.0)
          throw InputError(path_ + ":" + std::to_string(line_no_) + ": class label " + std::to_string(label) +
                           " is not a non-negative integer");
        ids.push_back(static_cast<std::int32_t>(label));
      } else {
        for (std::size_t j = 0; j < targets_; ++j) targets.push_back(static_cast<float>(values[dim + j]));
      }
      ++n;
    }
    return n;
  }

 private:
  std::string path_;
  bool classification_;
  std::size_t targets_;
  std::size_t columns_ = 0;
  std::int64_t rows_ = 0, line_no_ = 0;
  bool header_ = false;
  std::unique_ptr<LineReader> reader_;
};

}  // namespace

std::unique_ptr<RowSource> open_csv_source(const std::string& path, bool classification, std::size_t targets) {
  return std::make_unique<CsvSource>(path, classification, targets);
}

}  // namespace mpiddp
