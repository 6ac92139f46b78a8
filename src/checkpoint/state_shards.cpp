#include "mpiddp/checkpoint/state_shards.hpp"

#include <mutex>

#include "array_values.hpp"
#include "flat_range.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "io/hdf5_util.hpp"

namespace mpiddp {
namespace {
// Rank 0's word before each transfer: a state buffer's index, or one of these.
constexpr std::int64_t kSaveOver = -1;
// Reading a shard failed: kReadFailed - exit code (a value refused is bad input, 2).
constexpr std::int64_t kReadFailed = -256;

// Inside a catch: the exit code the exception in flight ends this rank with.
int current_exit_code() {
  try {
    throw;
  } catch (const std::exception& e) {
    return exit_code_of(e);
  } catch (...) {
    return kExitRuntimeError;
  }
}
}  // namespace

StateShards::~StateShards() {
  if (comm_.rank() != 0 || finished_) return;
  // Small messages go out eagerly: this cannot block, even while unwinding.
  for (int r = 1; r < layout_.world; ++r) {
    try {
      comm_.send(&kSaveOver, sizeof(kSaveOver), r);
    } catch (...) {  // MPI itself failed: the job is ending anyway
    }
  }
  finished_ = true;
}

const float* StateShards::fetch(std::size_t index, int rank) {
  FlatBuffer& values = *optimizer_.state().at(index).values;
  if (rank == 0) return values.host().data();
  // Sized before the request: once asked, the rank sends, and a failed allocation
  // after that would leave it blocked in its send.
  scratch_.resize(layout_.count(rank));
  const std::int64_t word = static_cast<std::int64_t>(index);
  comm_.send(&word, sizeof(word), rank);
  comm_.receive(scratch_.data(), scratch_.size() * sizeof(float), rank);
  return scratch_.data();
}

void StateShards::serve() {
  for (;;) {
    std::int64_t word = 0;
    comm_.receive(&word, sizeof(word), 0);
    if (word < 0) return;
    auto states = optimizer_.state();
    if (static_cast<std::size_t>(word) >= states.size())
      throw RuntimeError("checkpoint: rank 0 asked for optimizer state " + std::to_string(word) + " of " +
                         std::to_string(states.size()));
    std::vector<float>& host = states[static_cast<std::size_t>(word)].values->host();
    if (host.size() != layout_.count())
      throw RuntimeError("checkpoint: rank " + std::to_string(comm_.rank()) + " holds " + std::to_string(host.size()) +
                         " floats of optimizer state, its shard is " + std::to_string(layout_.count()));
    comm_.send(host.data(), host.size() * sizeof(float), 0);
  }
}

void scatter_state_shards(const std::string& path, const std::vector<Parameter>& list, Optimizer& optimizer,
                          const ShardLayout& layout, Communicator& comm) {
  auto states = optimizer.state();
  const bool root = comm.rank() == 0;
  for (auto& state : states) {
    // Present in the file = rank 0 loaded its shard (AdamW before its first step, SGD without momentum: absent).
    std::int64_t present = root && !state.values->empty() ? 1 : 0;
    comm.broadcast(&present, sizeof(present), 0);
    if (!present) {
      state.values->host().clear();
      state.values->push();
      continue;
    }
    if (!root) {
      std::int64_t word = 0;
      comm.receive(&word, sizeof(word), 0);
      // Rank 0 names the file, the array and the value in its own line (only it
      // read them): this rank ends with its exit code and says nothing more.
      if (word <= kReadFailed) throw JobFailed(static_cast<int>(kReadFailed - word));
      state.values->host().resize(layout.count());
      comm.receive(state.values->host().data(), layout.count() * sizeof(float), 0);
      state.values->push();
      continue;
    }
    std::vector<float> shard;  // one shard at a time
    int next = 1;
    try {
      std::lock_guard<std::mutex> hdf5(h5::library_mutex());
      h5::Handle file = h5::open_read_only(path, path);
      if (!file) throw InputError(path + ": cannot reopen to read the optimizer shards");
      const std::string group_name = "optimizer/" + state.name;
      h5::Handle group(h5::check_id<InputError>(H5Gopen2(file.get(), group_name.c_str(), H5P_DEFAULT),
                                                path + ": no group " + group_name),
                       H5Gclose);
      for (; next < layout.world; ++next) {
        shard.resize(layout.count(next));
        read_flat_shard(group.get(), list, layout.begin(next), layout.end(next), shard.data(), path);
        check_flat_range_values(shard.data(), layout.begin(next), layout.end(next), list, group_name, path);
        const std::int64_t ok = 0;
        comm.send(&ok, sizeof(ok), next);
        comm.send(shard.data(), shard.size() * sizeof(float), next);
      }
    } catch (...) {
      const std::int64_t failed = kReadFailed - current_exit_code();
      for (int r = next; r < layout.world; ++r) comm.send(&failed, sizeof(failed), r);
      throw;
    }
  }
}

}  // namespace mpiddp
