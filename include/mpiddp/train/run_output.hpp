#pragma once
// What rank 0 writes into run.dir: config.ini, metrics.jsonl (one JSON object per
// logged step and per evaluation), summary.json; plus the progress lines on stdout.
#include <cstdint>
#include <cstdio>
#include <string>

namespace mpiddp {

class RunOutput {
 public:
  // Creates the directory and writes config.ini; throws InputError if it cannot.
  // When resuming, metrics.jsonl keeps only the records the checkpoint covers
  // (train records up to `resumed_step`, evaluations of completed epochs), so the
  // file reads as if the run had never stopped.
  RunOutput(const std::string& dir, const std::string& config_ini, std::int64_t resumed_step = -1,
            std::int64_t completed_epochs = 0);
  ~RunOutput();
  RunOutput(const RunOutput&) = delete;
  RunOutput& operator=(const RunOutput&) = delete;

  void metric(const std::string& json_line);  // appended and flushed
  void summary(const std::string& json);      // summary.json, written atomically
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::FILE* metrics_ = nullptr;
};

// "1:02:03" / "2:03"
std::string format_duration(double seconds);

}  // namespace mpiddp
