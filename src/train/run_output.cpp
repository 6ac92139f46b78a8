#include "mpiddp/train/run_output.hpp"

#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"

namespace mpiddp {

namespace {
std::int64_t number_after(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::atoll(line.c_str() + at + key.size() + 3);
}
}  // namespace

RunOutput::RunOutput(const std::string& dir, const std::string& config_ini, std::int64_t resumed_step,
                     std::int64_t completed_epochs)
    : dir_(dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("run.dir " + dir + ": cannot create (" + ec.message() + ")");
  write_file_atomically(dir + "/config.ini", config_ini, /*durable=*/false);
  const std::string path = dir + "/metrics.jsonl";
  std::string kept;
  if (resumed_step >= 0) {
    std::ifstream old(path);
    for (std::string line; std::getline(old, line);) {
      if (line.empty() || line.back() != '}') continue;  // torn by a crash mid-write
      const bool eval = line.find("\"type\":\"eval\"") != std::string::npos;
      const std::int64_t at = eval ? number_after(line, "epoch") : number_after(line, "global_step");
      if (at >= 0 && at <= (eval ? completed_epochs : resumed_step)) kept += line + "\n";
    }
  }
  write_file_atomically(path, kept, /*durable=*/false);
  metrics_ = open_to_append(path);  // the file just renamed into place, never a link put there since
  if (!metrics_) throw InputError("run.dir " + dir + ": cannot write metrics.jsonl (" + std::strerror(errno) + ")");
}

RunOutput::~RunOutput() {
  if (metrics_) std::fclose(metrics_);
}

void RunOutput::metric(const std::string& json_line) {
  // A record that cannot be written ends the job, as a failed checkpoint does:
  // the file would otherwise lose records without a word (a full disk).
  errno = 0;
  const bool ok = std::fputs(json_line.c_str(), metrics_) >= 0 && std::fputc('\n', metrics_) != EOF &&
                  std::fflush(metrics_) == 0;
  if (!ok)
    throw RuntimeError(dir_ + "/metrics.jsonl: cannot append a record (" +
                       (errno ? std::strerror(errno) : "write failed") + ")");
}

void RunOutput::summary(const std::string& json) {
  write_file_atomically(dir_ + "/summary.json", json + "\n", /*durable=*/false);
}

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
