#include "mpiddp/train/run_directory.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"

namespace fs = std::filesystem;

namespace mpiddp {
namespace {

fs::file_status status_of(const std::string& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec);
}

// run.dir does not exist yet: the nearest existing ancestor must be a writable directory.
void check_creatable(const std::string& dir) {
  fs::path at = fs::absolute(dir).parent_path();
  while (!at.empty() && !fs::exists(status_of(at.string()))) at = at.parent_path();
  const std::string where = "run.dir " + dir + ": cannot create (";
  if (!fs::is_directory(fs::status(at))) throw InputError(where + at.string() + " is not a directory)");
  if (::access(at.c_str(), W_OK | X_OK) != 0) throw InputError(where + at.string() + ": " + std::strerror(errno) + ")");
}

// The outputs of a run found in `dir` (empty: none).
std::vector<std::string> outputs_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const char* name : {"config.ini", "metrics.jsonl", "summary.json"})
    if (fs::exists(status_of(dir + "/" + name))) found.push_back(name);
  std::error_code ec;
  if (fs::is_directory(status_of(dir + "/checkpoints")) && !fs::is_empty(dir + "/checkpoints", ec))
    found.push_back("checkpoints/");
  return found;
}

void check_run_dir_files(const std::string& dir, const std::string& resume, bool has_checkpoints) {
  // Linux's limits (NAME_MAX, PATH_MAX), with room for the names mpiddp writes inside.
  for (const auto& part : fs::path(dir))
    if (part.string().size() > 255)
      throw InputError("run.dir " + printable(dir, 120) + ": a name in it is longer than 255 bytes");
  if (dir.size() > 3800) throw InputError("run.dir " + printable(dir, 120) + ": longer than 3800 bytes");
  const fs::file_status status = status_of(dir);
  if (!fs::exists(status)) {
    check_creatable(dir);
    return;
  }
  if (!fs::is_directory(fs::status(dir))) throw InputError("run.dir " + dir + ": exists and is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError("run.dir " + dir + ": cannot write (" + std::strerror(errno) + ")");
  const std::string checkpoints = dir + "/checkpoints";
  // Its own directory: through a link, another run's checkpoints would be moved aside and mixed in.
  if (fs::is_symlink(status_of(checkpoints)))
    throw InputError("run.dir " + dir + ": checkpoints is a symbolic link; a run keeps its checkpoints in a directory "
                     "of its own");
  if (fs::exists(status_of(checkpoints)) && !fs::is_directory(fs::status(checkpoints)))
    throw InputError("run.dir " + dir + ": checkpoints exists and is not a directory");
  // Found now rather than at the first checkpoint, after minutes or hours of training.
  if (fs::exists(status_of(checkpoints)) && ::access(checkpoints.c_str(), W_OK | X_OK) != 0)
    throw InputError("run.dir " + dir + ": cannot write checkpoints/ (" + std::strerror(errno) + ")");
  // Not a link either: a resume reads metrics.jsonl and latest, and would read another file through one.
  for (const std::string name : {"config.ini", "metrics.jsonl", "summary.json", "checkpoints/latest"}) {
    const std::string path = dir + "/" + name;
    if (fs::exists(status_of(path)) && !fs::is_regular_file(status_of(path)))
      throw InputError("run.dir " + dir + ": " + name + " exists and is not a regular file" +
                       (fs::is_symlink(status_of(path)) ? " (a symbolic link)" : ""));
  }
  // Written as NAME.tmp and renamed: a directory there would end the job at that write, perhaps after the training.
  for (const std::string name : {"config.ini.tmp", "metrics.jsonl.tmp", "summary.json.tmp", "checkpoints/latest.tmp",
                                 ".lock", ".lock.tmp"}) {
    if (fs::is_directory(status_of(dir + "/" + name)))
      throw InputError("run.dir " + dir + ": " + name + " is a directory, where mpiddp writes a file; remove it");
  }
  // A checkpoint is written as ckpt-step-N.h5.tmp and renamed: a directory under
  // either name would end the job at that step's checkpoint.
  if (const std::string name = directory_at_checkpoint_name(checkpoints); !name.empty())
    throw InputError("run.dir " + dir + ": checkpoints/" + printable(name) +
                     " is a directory, where mpiddp writes a checkpoint; remove it");
  const std::vector<std::string> outputs = outputs_in(dir);
  if (outputs.empty()) return;
  std::string list;
  for (const auto& name : outputs) list += (list.empty() ? "" : ", ") + name;
  if (resume.empty())
    throw InputError("run.dir " + dir + " already holds a run (" + list +
                     "); continue it with --resume auto, or choose another run.dir");
  if (resume == "auto" && !has_checkpoints && fs::exists(status_of(dir + "/summary.json")))
    throw InputError("run.dir " + dir + " holds a finished run (summary.json) and no checkpoint to continue from; " +
                     "choose another run.dir");
}
}  // namespace

void check_run_dir(const std::string& dir, const std::string& resume, bool has_checkpoints) {
  try {
    check_run_dir_files(dir, resume, has_checkpoints);
  } catch (const fs::filesystem_error& e) {  // a path too long, a component that is a file, no permission
    throw InputError("run.dir " + dir + ": " + e.code().message());
  }
}

void check_resume_into(const std::string& dir, const CheckpointDirectory& checkpoints, const std::string& path) {
  if (outputs_in(dir).empty() || !fs::exists(status_of(path))) return;  // nothing to mix, or read errors say why
  std::error_code ec;
  if (fs::equivalent(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path(), checkpoints.dir(), ec))
    return;  // one of the run's own checkpoints (going back to an earlier one)
  const std::string id = checkpoint_run_id(path);
  if (!id.empty())
    for (const std::string& file : checkpoints.complete_checkpoints())
      if (checkpoint_run_id(file) == id) return;
  throw IncompatibleCheckpoint("run.dir " + dir + " holds another run than " + path +
                               " (no checkpoint of its run there); resume into a new run.dir");
}

}  // namespace mpiddp
