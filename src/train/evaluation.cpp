#include "mpiddp/train/evaluation.hpp"

#include <algorithm>
#include <vector>

#include "mpiddp/data/loader.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/train/step.hpp"

namespace mpiddp {

Evaluation evaluate(Sequential& model, ShardedDataset& data, Communicator& comm, const Config& config,
                    bool classification, bool loader_thread) {
  std::vector<std::int64_t> indices;
  for (std::int64_t i = comm.rank(); i < data.size(); i += comm.size()) indices.push_back(i);
  // At least 256 samples per forward, except for sequence models: a window's
  // activations (its attention scores above all) are far larger than a row's.
  const std::size_t batch = static_cast<std::size_t>(
      config.data.context > 0 ? config.train.batch_size : std::max(256, config.train.batch_size));
  double sums[3] = {0.0, 0.0, 0.0};  // loss, correct, count
  agree_or_fail(comm, [&] {
    BatchLoader loader(data, std::move(indices), batch, static_cast<std::size_t>(config.data.prefetch), nullptr, 0,
                       loader_thread);
    while (auto b = loader.next()) {
      const LossResult r = evaluate_batch(model, *b, classification);
      sums[0] += r.loss_sum;
      sums[1] += static_cast<double>(r.correct);
      sums[2] += static_cast<double>(r.count);
    }
  });
  comm.allreduce_sum(sums, 3);
  Evaluation e;
  e.samples = static_cast<std::int64_t>(sums[2]);
  e.loss = sums[0] / std::max(1.0, sums[2]);
  e.accuracy = classification ? sums[1] / std::max(1.0, sums[2]) : 0.0;
  return e;
}

}  // namespace mpiddp
