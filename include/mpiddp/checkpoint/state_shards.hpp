#pragma once
// Checkpoints at ddp.zero_stage = 1, where each rank holds only its shard of the
// optimizer state. The file keeps today's format and contents (the full arrays,
// PyTorch's consolidate_state_dict): saving, rank 0 writes them shard by shard,
// fetching each other rank's shard in turn into one shard-sized buffer, so it
// never holds more than one extra shard; resuming, rank 0 reads each rank's
// shard in turn and sends it. A stage-0 file resumes at stage 1 and back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/ddp/shards.hpp"
#include "mpiddp/dist/communicator.hpp"
#include "mpiddp/nn/parameters.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp {

class StateShards {
 public:
  StateShards(const ShardLayout& layout, Communicator& comm, Optimizer& optimizer)
      : layout_(layout), comm_(comm), optimizer_(optimizer) {}
  // Rank 0: the save is over, also after a failure: the serving ranks stop.
  ~StateShards();
  StateShards(const StateShards&) = delete;
  StateShards& operator=(const StateShards&) = delete;

  const ShardLayout& layout() const { return layout_; }
  // Rank 0: rank r's shard of optimizer state buffer `index` (its host copy on
  // rank 0 itself), valid until the next call.
  const float* fetch(std::size_t index, int rank);
  // Ranks > 0, while rank 0 saves: answers its fetches until it is done.
  void serve();

 private:
  const ShardLayout& layout_;
  Communicator& comm_;
  Optimizer& optimizer_;
  std::vector<float> scratch_;  // one shard
  bool finished_ = false;
};

// Collective, after rank 0 has read (and checked) checkpoint `path` at stage 1
// with only its own shard of the optimizer state: every other rank gets its shard.
void scatter_state_shards(const std::string& path, const std::vector<Parameter>& list, Optimizer& optimizer,
                          const ShardLayout& layout, Communicator& comm);

}  // namespace mpiddp
