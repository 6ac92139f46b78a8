#include "attribute_checks.hpp"

#include <cmath>
#include <filesystem>
#include <string>

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {

// Far beyond any real run's count of resumes at another geometry, and far below
// the int64 limit, so the count can always grow by one more.
constexpr std::int64_t kMaxElasticResumes = 1000000000;

[[noreturn]] void refuse(const std::string& path, const char* attribute, const std::string& value,
                         const std::string& rule) {
  throw InputError(path + ": attribute '" + attribute + "' is " + value + ", " + rule +
                   " (damaged or edited checkpoint)");
}

void at_least(const std::string& path, const char* attribute, std::int64_t value, std::int64_t low) {
  if (value < low) refuse(path, attribute, std::to_string(value), "must be at least " + std::to_string(low));
}

// The digits of "ckpt-step-DIGITS.h5", or "" for any other name. (A hand-written
// match: std::regex draws GCC 12's false -Wmaybe-uninitialized warnings.)
std::string step_digits(const std::string& name) {
  const std::string prefix = "ckpt-step-", suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos ? digits : "";
}

// ckpt-step-000000051.h5 holds global step 51: a file under another step's name
// would be overwritten or pruned as that step.
void check_name(const TrainingState& state, const std::string& path) {
  const std::string digits = step_digits(std::filesystem::path(path).filename().string());
  if (digits.empty()) return;
  if (digits.size() > 18 || std::stoll(digits) != state.global_step)
    refuse(path, "global_step", std::to_string(state.global_step), "but the file is named for step " + digits);
}

// Whether `length` = W x floor(N / W) for some world size W (data.drop_last):
// W up to sqrt(N) directly, larger W through their quotient q = floor(N / W).
bool drop_last_length(std::int64_t size, std::int64_t length) {
  if (length < 1 || length > size) return false;
  for (std::int64_t w = 1; w * w <= size; ++w) {
    if ((size / w) * w == length) return true;
    const std::int64_t q = w;  // every W with floor(N / W) = q lies in (N / (q + 1), N / q]
    if (length % q == 0) {
      const std::int64_t world = length / q;
      if (world >= 1 && size / world == q) return true;
    }
  }
  return false;
}

}  // namespace

void check_attributes(const TrainingState& s, const std::string& path) {
  at_least(path, "epoch", s.epoch, 0);
  at_least(path, "step_in_epoch", s.step_in_epoch, 0);
  at_least(path, "global_step", s.global_step, 0);
  at_least(path, "world_size", s.world_size, 1);
  at_least(path, "dataset_size", s.dataset_size, 1);
  at_least(path, "batch_size", s.batch_size, 1);
  at_least(path, "accumulate", s.accumulate, 1);
  at_least(path, "skipped_steps", s.skipped_steps, 0);
  at_least(path, "elastic_resumes", s.elastic_resumes, 0);
  at_least(path, "epoch_samples_done", s.epoch_samples_done, 0);
  at_least(path, "epoch_length", s.epoch_length, 0);
  if (s.epoch_length > s.dataset_size)
    refuse(path, "epoch_length", std::to_string(s.epoch_length),
           "more than the dataset_size " + std::to_string(s.dataset_size));
  // An epoch's order is the whole data set, or with drop_last what some world
  // size leaves of it (W x floor(N / W), never below N / 2 + 1 for N > 1).
  if (s.step_in_epoch > 0 && s.epoch_length != s.dataset_size && !drop_last_length(s.dataset_size, s.epoch_length))
    refuse(path, "epoch_length", std::to_string(s.epoch_length),
           "which no world size orders from " + std::to_string(s.dataset_size) + " samples");
  // A counter that could not grow once more without overflowing.
  if (s.elastic_resumes > kMaxElasticResumes)
    refuse(path, "elastic_resumes", std::to_string(s.elastic_resumes),
           "more than " + std::to_string(kMaxElasticResumes) + " (no run resumes that often)");
  if (s.epoch_samples_done > s.epoch_length)
    refuse(path, "epoch_samples_done", std::to_string(s.epoch_samples_done),
           "more than the epoch_length " + std::to_string(s.epoch_length));
  // An epoch's order exists once a step of it was taken, and then holds a sample.
  if ((s.epoch_samples_done == 0) != (s.step_in_epoch == 0) || (s.step_in_epoch > 0 && s.epoch_length == 0))
    refuse(path, "epoch_samples_done", std::to_string(s.epoch_samples_done),
           "but step_in_epoch is " + std::to_string(s.step_in_epoch));
  // A loss sum is never negative (NaN is possible: skipped non-finite steps add to it).
  if (s.log_window_loss < 0) refuse(path, "log_window_loss", std::to_string(s.log_window_loss), "must not be negative");
  check_name(s, path);
}

void check_counters(const TrainingState& s, const std::string& path) {
  if (s.skipped_steps > s.global_step)
    refuse(path, "skipped_steps", std::to_string(s.skipped_steps),
           "more than global_step " + std::to_string(s.global_step));
  // Every step that was not skipped called the optimizer once.
  if (s.optimizer_steps != s.global_step - s.skipped_steps)
    refuse(path, "optimizer/step", std::to_string(s.optimizer_steps),
           "must be global_step - skipped_steps = " + std::to_string(s.global_step - s.skipped_steps));
  // (After a resume at another world size or batch the window may hold steps of
  // a larger global batch: then only whole and not negative.)
  const double samples = s.log_window_samples;
  const bool one_geometry = s.elastic_resumes == 0;
  if (!(samples >= 0) || samples != std::floor(samples) ||
      (one_geometry && samples > static_cast<double>(s.global_step) * static_cast<double>(s.world_size) *
                                     static_cast<double>(s.batch_size) * static_cast<double>(s.accumulate)))
    refuse(path, "log_window_samples", std::to_string(samples),
           "must be a whole number of samples, at most those of the steps taken");
}

}  // namespace mpiddp
