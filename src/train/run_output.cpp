#include "mpiddp/train/run_output.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "mpiddp/common/error.hpp"

namespace mpiddp {

namespace {
void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  std::FILE* f = std::fopen(temp.c_str(), "w");
  if (!f) throw InputError(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw RuntimeError(path + ": write failed (disk full?)");
  if (std::rename(temp.c_str(), path.c_str()) != 0) throw RuntimeError(path + ": rename failed");
}
}  // namespace

RunOutput::RunOutput(const std::string& dir, const std::string& config_ini) : dir_(dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("run.dir " + dir + ": cannot create (" + ec.message() + ")");
  write_file_atomically(dir + "/config.ini", config_ini);
  metrics_ = std::fopen((dir + "/metrics.jsonl").c_str(), "w");
  if (!metrics_) throw InputError("run.dir " + dir + ": cannot write metrics.jsonl (" + std::strerror(errno) + ")");
}

RunOutput::~RunOutput() {
  if (metrics_) std::fclose(metrics_);
}

void RunOutput::metric(const std::string& json_line) {
  std::fputs(json_line.c_str(), metrics_);
  std::fputc('\n', metrics_);
  std::fflush(metrics_);
}

void RunOutput::summary(const std::string& json) { write_file_atomically(dir_ + "/summary.json", json + "\n"); }

std::string format_duration(double seconds) {
  const long total = std::lround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600)
    std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", total / 3600, (total / 60) % 60, total % 60);
  else
    std::snprintf(text, sizeof(text), "%ld:%02ld", total / 60, total % 60);
  return text;
}

}  // namespace mpiddp
