// DDP equivalence: W ranks with batch B (or accumulation K x B/K) must give the
// weights that one process gets with batch W*B on the same samples. Each rank
// also trains the single-process reference itself (on MPI_COMM_SELF), so the
// comparison needs no files.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "mpiddp/common/random.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/ddp/transport.hpp"
#include "mpiddp/device/cuda.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/train/step.hpp"

using namespace mpiddp;

namespace {

constexpr std::int64_t kSamples = 1920;  // divisible by 2, 3 and 4 ranks: no padding
constexpr std::size_t kFeatures = 20;
constexpr int kClasses = 4;

struct Data {
  Matrix x;
  std::vector<std::int32_t> y;
};

Data make_data() {
  Data d{Matrix(kSamples, kFeatures), std::vector<std::int32_t>(kSamples)};
  CounterRng rng(99);
  for (std::size_t i = 0; i < d.x.size(); ++i) d.x.data()[i] = 2.0f * rng.uniform(i) - 1.0f;
  for (std::int64_t s = 0; s < kSamples; ++s)  // a learnable rule
    d.y[s] = (d.x.at(s, 0) > 0 ? 1 : 0) + (d.x.at(s, 1) + d.x.at(s, 2) > 0 ? 2 : 0);
  return d;
}

// The device the models train on: the CPU, or with MPIDDP_TEST_DEVICE=cuda this
// rank's GPU (ranks may share one: gradients then go through MPI on the host),
// or with MPIDDP_TEST_DEVICE=emulated the emulated GPU (the same host-side path).
Device* test_device() {
  static std::unique_ptr<Device> gpu = []() -> std::unique_ptr<Device> {
    const char* name = std::getenv("MPIDDP_TEST_DEVICE");
    if (name && std::string(name) == "cuda") return make_cuda_device(0);
    if (name && std::string(name) == "emulated") return make_emulated_device();
    return nullptr;
  }();
  return gpu ? gpu.get() : &cpu_device();
}

Batch gather(const Data& d, const std::vector<std::int64_t>& indices, std::size_t begin, std::size_t count) {
  REQUIRE(begin + count <= indices.size());
  const std::size_t features = d.x.cols();
  Batch b;
  b.features.resize(count, features);
  b.class_ids.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    const auto s = static_cast<std::size_t>(indices[begin + k]);
    std::copy(d.x.row(s), d.x.row(s) + features, b.features.row(k));
    b.class_ids[k] = d.y[s];
  }
  return b;
}

struct RunSpec {
  int batch;          // per rank, per micro-batch
  int accumulate;     // micro-batches per step
  double bucket_mb;   // small caps force several buckets (non-blocking path)
  OptimizerKind optimizer;
  int zero_stage = 0;  // ddp.zero_stage
};

// `state_floats`: where to put the size of the optimizer's first state buffer
// (what this rank holds) after training.
std::vector<float> train(Communicator& comm, const Data& data, const RunSpec& spec, int steps,
                         std::size_t* state_floats = nullptr) {
  ModelConfig mc;
  mc.hidden = {32, 16};
  mc.activation = ActivationKind::tanh;
  auto model = build_mlp(mc, kFeatures, kClasses, 7, test_device());
  GradientReducer reducer(model->parameters(), comm, static_cast<std::size_t>(spec.bucket_mb * 1048576),
                          static_cast<std::size_t>(spec.bucket_mb * 1048576));
  reducer.set_zero_stage(spec.zero_stage);
  reducer.synchronize_parameters();
  OptimConfig oc;
  oc.name = spec.optimizer;
  oc.momentum = 0.9;
  oc.weight_decay = 1e-4;
  auto optimizer = make_optimizer(oc, test_device());
  SamplerOptions so;
  so.size = kSamples;
  so.world = comm.size();
  so.rank = comm.rank();
  so.seed = 3;
  const auto indices = distributed_sampler_indices(so);
  const std::size_t per_step = static_cast<std::size_t>(spec.batch * spec.accumulate);
  for (int step = 0; step < steps; ++step) {
    std::vector<Batch> micro;
    for (int m = 0; m < spec.accumulate; ++m)
      micro.push_back(gather(data, indices, step * per_step + m * spec.batch, spec.batch));
    StepInputs in;
    in.micro_batches = &micro;
    in.lr = spec.optimizer == OptimizerKind::sgd ? 0.1 : 0.01;
    REQUIRE(forward_backward(*model, reducer, in).finite);
    REQUIRE(gradients_finite(model->parameters()));
    reducer.update(*optimizer, in.lr);  // the whole buffer at stage 0, this rank's shard + all-gather at stage 1
  }
  if (state_floats) *state_floats = optimizer->state().at(0).values->size();
  auto& p = model->parameters();
  p.pull_values();
  return std::vector<float>(p.host_values(), p.host_values() + p.total());
}

// 8x8 one-channel images; the class is the quadrant with the largest sum.
Data make_images() {
  Data d{Matrix(kSamples, 64), std::vector<std::int32_t>(kSamples)};
  CounterRng rng(101);
  for (std::size_t i = 0; i < d.x.size(); ++i) d.x.data()[i] = rng.uniform(i);
  for (std::int64_t s = 0; s < kSamples; ++s) {
    float sums[4] = {};
    for (int p = 0; p < 64; ++p) sums[(p / 32) * 2 + (p % 8) / 4] += d.x.at(s, p);
    d.y[s] = static_cast<std::int32_t>(std::max_element(sums, sums + 4) - sums);
  }
  return d;
}

// A small BatchNorm CNN with SGD; returns the parameters followed by the
// running statistics. SyncBatchNorm's collectives go through the gradient
// transport, as in the trainer (TrainingSession::build_model).
std::vector<float> train_cnn(Communicator& comm, const Data& data, int batch, bool sync, int steps) {
  ModelConfig mc;
  mc.layers =
      "conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(6,3) batchnorm2d relu flatten "
      "linear(16) batchnorm1d relu linear";
  mc.sync_batchnorm = sync;
  auto model = build_model(mc, Shape{1, 8, 8}, kClasses, 7);
  const auto transport = make_mpi_transport(comm, model->device());
  model->set_cross_rank(transport.get());
  GradientReducer reducer(model->parameters(), comm, 1 << 20, 25 << 20, transport.get());
  reducer.set_broadcast_buffers(!sync);
  reducer.synchronize_parameters();
  OptimConfig oc;
  oc.name = OptimizerKind::sgd;
  oc.momentum = 0.9;
  auto optimizer = make_optimizer(oc, &model->device());
  SamplerOptions so;
  so.size = kSamples;
  so.world = comm.size();
  so.rank = comm.rank();
  so.seed = 5;
  const auto indices = distributed_sampler_indices(so);
  for (int step = 0; step < steps; ++step) {
    std::vector<Batch> micro{gather(data, indices, static_cast<std::size_t>(step * batch), batch)};
    StepInputs in;
    in.micro_batches = &micro;
    in.lr = 0.1;
    in.context.counter = static_cast<std::uint64_t>(step);
    REQUIRE(forward_backward(*model, reducer, in).finite);
    optimizer->step(model->parameters().values(), model->parameters().grads(), model->parameters().total(), in.lr);
  }
  auto& p = model->parameters();
  p.pull_values();
  p.pull_buffers();
  std::vector<float> state(p.host_values(), p.host_values() + p.total());
  state.insert(state.end(), p.host_buffers(), p.host_buffers() + p.buffer_total());
  return state;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("W ranks x B equal one process x W*B", "[mpi][ddp]") {
  MpiCommunicator world(MPI_COMM_WORLD), self(MPI_COMM_SELF);
  const int w = world.size();
  const Data data = make_data();
  const int global_batch = 64 * w;  // 128 on 2 ranks, 192 on 3, 256 on 4
  const int steps = 5;
  for (OptimizerKind optimizer : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    const auto reference = train(self, data, {global_batch, 1, 25.0, optimizer}, steps);
    const auto plain = train(world, data, {global_batch / w, 1, 25.0, optimizer}, steps);
    const auto accumulated = train(world, data, {global_batch / w / 2, 2, 25.0, optimizer}, steps);
    const auto bucketed = train(world, data, {global_batch / w, 1, 0.001, optimizer}, steps);
    INFO("world " << w << ", " << name_of(optimizer));
    CHECK(relative_difference(reference, plain) <= 1e-5);
    CHECK(relative_difference(reference, accumulated) <= 1e-5);
    CHECK(relative_difference(reference, bucketed) <= 1e-5);
    // Training moved the weights (the comparison is not between two untouched models).
    const auto untouched = train(self, data, {global_batch, 1, 25.0, optimizer}, 0);
    CHECK(relative_difference(reference, untouched) > 1e-2);
  }
}

TEST_CASE("ZeRO stage 1 gives stage 0's weights with 1/world of the optimizer state", "[mpi][ddp][zero]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const int w = world.size();
  const Data data = make_data();
  const int steps = 6;
  for (OptimizerKind optimizer : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    for (int accumulate : {1, 2}) {
      // Tiny buckets (1 KiB): several buckets, most of them straddling a shard boundary.
      for (double bucket_mb : {25.0, 0.001}) {
        std::size_t full = 0, sharded = 0;
        const auto stage0 = train(world, data, {64 / accumulate, accumulate, bucket_mb, optimizer, 0}, steps, &full);
        const auto stage1 = train(world, data, {64 / accumulate, accumulate, bucket_mb, optimizer, 1}, steps, &sharded);
        INFO("world " << w << ", " << name_of(optimizer) << ", accumulate " << accumulate << ", bucket_mb " << bucket_mb);
        const ShardLayout layout = ShardLayout::of(stage0.size(), w, world.rank());
        CHECK(full == stage0.size());
        CHECK(sharded == layout.count());  // only this rank's shard of the state
        if (w <= 2) {
          CHECK(stage1 == stage0);  // a sum of two terms is the same in any order: bit for bit
        } else {
          CHECK(relative_difference(stage0, stage1) <= 1e-6);  // the reduce-scatter sums in its own order
        }
        // Every rank holds the same (all-gathered) parameters.
        std::vector<float> max = stage1, sum = stage1;
        world.allreduce_sum(sum.data(), sum.size());
        for (std::size_t i = 0; i < sum.size(); ++i) max[i] = stage1[i] * static_cast<float>(w);
        CHECK(relative_difference(max, sum) <= 1e-6);
      }
    }
  }
}

TEST_CASE("ZeRO shards: contiguous, 16-float aligned, covering the buffer", "[mpi][zero]") {
  for (std::size_t total : {std::size_t{1}, std::size_t{10}, std::size_t{17}, std::size_t{1000}, std::size_t{1234567}}) {
    for (int w : {1, 2, 3, 4, 7}) {
      std::size_t covered = 0;
      for (int r = 0; r < w; ++r) {
        const ShardLayout s = ShardLayout::of(total, w, r);
        CHECK(s.shard % 16 == 0);
        CHECK(s.begin() == covered);
        covered = s.end();
        CHECK(s.count() <= s.shard);
        const auto pieces = s.pieces(total / 3, total);
        std::size_t sum = 0;
        for (std::size_t n : pieces) sum += n;
        CHECK(sum == total - total / 3);
      }
      CHECK(covered == total);
    }
  }
}

TEST_CASE("buckets follow reverse registration order and the size caps", "[mpi][ddp]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  ModelConfig mc;
  mc.hidden = {256, 128};
  auto model = build_mlp(mc, 784, 10, 1);  // 235146 parameters = 940584 bytes
  GradientReducer one(model->parameters(), world, 1 << 20, 25 << 20);
  REQUIRE(one.buckets().size() == 1);
  CHECK(one.buckets()[0].parameters.front() == 5);  // layers.4.bias first
  GradientReducer small(model->parameters(), world, 4096, 100000);
  const auto& b = small.buckets();
  REQUIRE(b.size() == 3);
  // First bucket closes once it reaches 4 KiB: layers.4.bias, layers.4.weight (5160 B).
  CHECK(b[0].parameters == std::vector<std::size_t>{5, 4});
  // Later buckets close once they reach 100000 bytes.
  CHECK(b[1].parameters == std::vector<std::size_t>{3, 2});  // 512 + 131072 bytes
  CHECK(b[2].parameters == std::vector<std::size_t>{1, 0});  // 1024 + 802816 bytes
  for (std::size_t i = 1; i < b.size(); ++i) CHECK(b[i].end == b[i - 1].begin);  // contiguous ranges
  CHECK(b.back().begin == 0);
}

TEST_CASE("SyncBatchNorm: W ranks x B train a BatchNorm CNN to the weights of one process x W*B", "[mpi][syncbn]") {
  MpiCommunicator world(MPI_COMM_WORLD), self(MPI_COMM_SELF);
  const int w = world.size();
  const Data data = make_images();
  const int steps = 4;
  const auto reference = train_cnn(self, data, 64 * w, false, steps);  // one process: BatchNorm sees the whole batch
  const auto synced = train_cnn(world, data, 64, true, steps);
  const auto plain = train_cnn(world, data, 64, false, steps);
  INFO("world " << w);
  CHECK(relative_difference(reference, synced) <= 1e-5);
  // The check can fail: per-rank BatchNorm statistics train other weights.
  CHECK(relative_difference(reference, plain) > 1e-4);
  CHECK(relative_difference(reference, train_cnn(self, data, 64 * w, false, 0)) > 1e-2);
}
