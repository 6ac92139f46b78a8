// The checkpoints directory of a run: saving under the step's name, `latest`,
// permanent keepers and pruning. "This run's" checkpoints are those carrying the
// saving run's id; nothing else is ever counted, replaced or deleted.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"

namespace mpiddp {
namespace {

bool of_run(const std::string& path, const std::string& run_id) {
  return !run_id.empty() && checkpoint_run_id(path) == run_id;
}

bool present(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

// A file that is not this run's stands where a new checkpoint goes: keep it,
// under a name that no reader or pruning counts.
void move_aside(const std::string& path) {
  std::string target = path + ".not-this-run";
  for (int n = 2; present(target); ++n) target = path + ".not-this-run." + std::to_string(n);
  if (std::rename(path.c_str(), target.c_str()) != 0)
    throw RuntimeError(path + ": not a checkpoint of this run, and cannot move it aside (" + std::strerror(errno) + ")");
  std::fprintf(stderr, "mpiddp: warning: %s is not a checkpoint of this run; moved to %s\n", path.c_str(),
               target.c_str());
}

}  // namespace

CheckpointDirectory::CheckpointDirectory(std::string dir, int keep, int keep_every_epochs)
    : dir_(std::move(dir)), keep_(keep), keep_every_epochs_(keep_every_epochs) {}

std::string CheckpointDirectory::save(const ParameterStore& params, Optimizer& optimizer, const TrainingState& state,
                                      bool epoch_boundary, StateShards* shards) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw InputError(dir_ + ": cannot create checkpoint directory (" + ec.message() + ")");
  char name[64];
  std::snprintf(name, sizeof(name), "ckpt-step-%09lld.h5", static_cast<long long>(state.global_step));
  const std::string path = dir_ + "/" + name;
  if (present(path) && !of_run(path, state.run_id)) move_aside(path);
  write_checkpoint(path, params, optimizer, state, shards);

  // `latest` names the newest complete checkpoint; it is replaced atomically too.
  write_file_atomically(dir_ + "/latest", std::string(name) + "\n", /*durable=*/true);

  // Permanent keepers are hard links: no copy, and pruning the original keeps them.
  if (epoch_boundary && keep_every_epochs_ > 0 && state.epoch % keep_every_epochs_ == 0) {
    char keeper[64];
    std::snprintf(keeper, sizeof(keeper), "keep-epoch-%04lld.h5", static_cast<long long>(state.epoch));
    const std::string keeper_path = dir_ + "/" + keeper;
    if (present(keeper_path) && !of_run(keeper_path, state.run_id)) move_aside(keeper_path);
    std::filesystem::remove(keeper_path, ec);
    std::filesystem::create_hard_link(path, keeper_path, ec);
    if (ec) throw RuntimeError(keeper_path + ": cannot create (" + ec.message() + ")");
  }
  if (keep_ > 0) {
    std::vector<std::string> ours;
    for (const std::string& file : complete_checkpoints())
      if (of_run(file, state.run_id)) ours.push_back(file);
    for (std::size_t i = static_cast<std::size_t>(keep_); i < ours.size(); ++i) std::filesystem::remove(ours[i], ec);
  }
  return path;
}

namespace {

// Calls `visit` with each entry of `dir`; an entry that cannot be read (or a
// directory that is gone) ends the walk instead of throwing.
template <class Visit>
void each_entry(const std::string& dir, Visit&& visit) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) visit(*it);
}

}  // namespace

void CheckpointDirectory::remove_stale_temporaries() const {
  each_entry(dir_, [](const std::filesystem::directory_entry& entry) {
    // Only the writer's own temporaries (ckpt-step-N.h5.tmp, latest.tmp): other files are not ours to delete.
    const std::string name = entry.path().filename().string();
    std::error_code ec;
    if (checkpoint_file_name(name, true) || name == "latest.tmp") std::filesystem::remove(entry.path(), ec);
  });
}

std::vector<std::string> CheckpointDirectory::complete_checkpoints() const {
  std::vector<std::string> found;
  each_entry(dir_, [&](const std::filesystem::directory_entry& entry) {
    // A symbolic link named like one is no checkpoint of this directory (it may lead anywhere).
    std::error_code ec;
    if (checkpoint_file_name(entry.path().filename().string(), false) && !entry.is_symlink(ec))
      found.push_back(entry.path().string());
  });
  std::sort(found.rbegin(), found.rend());  // zero-padded step numbers: newest first
  return found;
}

std::string directory_at_checkpoint_name(const std::string& dir) {
  std::string found;
  each_entry(dir, [&](const std::filesystem::directory_entry& entry) {
    const std::string name = entry.path().filename().string();
    std::error_code ec;
    if (found.empty() && (checkpoint_file_name(name, true) || checkpoint_file_name(name, false)) &&
        std::filesystem::is_directory(entry.symlink_status(ec)))
      found = name;
  });
  return found;
}

bool checkpoint_file_name(const std::string& name, bool temporary) {
  const std::string ending = temporary ? ".h5.tmp" : ".h5";
  return name.rfind("ckpt-step-", 0) == 0 && name.size() > ending.size() &&
         name.compare(name.size() - ending.size(), ending.size(), ending) == 0;
}

}  // namespace mpiddp
