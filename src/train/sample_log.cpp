#include "mpiddp/train/sample_log.hpp"

#include <cerrno>
#include <cstring>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"

namespace mpiddp {

SampleLog::SampleLog(const std::string& pattern, int rank) : rank_(rank) {
  if (pattern.empty()) return;
  const std::size_t at = pattern.find("%r");
  path_ = at == std::string::npos ? pattern + ".rank-" + std::to_string(rank)
                                  : pattern.substr(0, at) + std::to_string(rank) + pattern.substr(at + 2);
  file_.reset(open_to_append(path_));
  // agree_or_fail names the rank that could not open its file.
  if (!file_) throw InputError("debug.sample_log: cannot open " + path_ + " (" + std::strerror(errno) + ")");
}

void SampleLog::record(std::int64_t epoch, std::int64_t global_step, const std::vector<std::int64_t>& share,
                       std::int64_t real, std::size_t first, std::size_t last) {
  if (!file_) return;
  for (std::size_t i = first; i < last && i < share.size(); ++i)
    std::fprintf(file_.get(), "%lld %lld %d %lld %d\n", static_cast<long long>(epoch),
                 static_cast<long long>(global_step), rank_, static_cast<long long>(share[i]),
                 static_cast<std::int64_t>(i) >= real ? 1 : 0);
  if (std::fflush(file_.get()) != 0)
    throw RuntimeError("debug.sample_log: rank " + std::to_string(rank_) + ": cannot write " + path_);
}

}  // namespace mpiddp
