#pragma once
// What rank 0 writes into run.dir: config.ini, metrics.jsonl (one JSON object per
// logged step and per evaluation), summary.json; plus the progress lines on stdout.
#include <cstdio>
#include <string>

namespace mpiddp {

class RunOutput {
 public:
  // Creates the directory and writes config.ini; throws InputError if it cannot.
  RunOutput(const std::string& dir, const std::string& config_ini);
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
