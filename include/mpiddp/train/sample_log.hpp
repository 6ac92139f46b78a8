#pragma once
// debug.sample_log: every rank appends one line per training sample it reads,
// `epoch global_step rank index padding` (epoch 0-based, padding 1 for an entry
// that only fills the rank's share up, see sampler.hpp), so a test can check that
// an epoch interrupted and resumed at another world size used each sample once.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace mpiddp {

class SampleLog {
 public:
  // `pattern` empty: off. `%r` in it is the rank; without one, `.rank-R` is appended.
  SampleLog(const std::string& pattern, int rank);
  bool enabled() const { return file_ != nullptr; }
  // The step's indices: entries [first, last) of the rank's share, of which those
  // at or after `real` are padding. Flushed at once: a killed run keeps its lines.
  void record(std::int64_t epoch, std::int64_t global_step, const std::vector<std::int64_t>& share,
              std::int64_t real, std::size_t first, std::size_t last);

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> file_;
  int rank_;
  std::string path_;
};

}  // namespace mpiddp
