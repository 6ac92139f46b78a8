// SyncBatchNorm: ranks with UNEQUAL batches must compute what one BatchNorm
// computes on the concatenation of their batches (the reference, which every
// rank computes by itself): the output and the input gradient of its own rows,
// the running statistics, num_batches_tracked, and, summed over ranks, the
// weight and bias gradients. Collectives go through the MPI gradient transport,
// as in training.
#include <mpi.h>

#include <catch2/catch.hpp>

#include "../unit/layer_test_util.hpp"
#include "mpiddp/ddp/transport.hpp"
#include "mpiddp/dist/mpi_communicator.hpp"
#include "mpiddp/nn/batchnorm.hpp"
#include "mpiddp/nn/conv_layers.hpp"
#include "mpiddp/nn/layers.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

// Largest |a - b| over rows [first, first + rows) of b, relative to b's largest value there.
double relative_error(const float* a, const float* b, std::size_t count) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < count; ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// This rank's rows of a global batch split unequally: rank r has base + step * r.
struct UnequalShare {
  std::size_t first = 0, total = 0, mine = 0;
  UnequalShare(const MpiCommunicator& world, std::size_t base, std::size_t step) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(world.size()); ++r) {
      if (r == static_cast<std::size_t>(world.rank())) first = total;
      total += base + step * r;
    }
    mine = base + step * static_cast<std::size_t>(world.rank());
  }
};

// The output and input gradient of a training forward and backward of `model`.
std::pair<Matrix, Matrix> train_passes(Sequential& model, const Matrix& x, const Matrix& dy) {
  Matrix y = model.forward(x, ForwardContext{}), dx;
  model.backward(dy, false, nullptr, &dx);
  return {y, dx};
}

// Rows [first, first + rows) of `all`, `width` values each.
Matrix rows_of(const Matrix& all, std::size_t first, std::size_t rows, std::size_t width) {
  Matrix part(rows, width);
  std::copy(all.data() + first * width, all.data() + (first + rows) * width, part.data());
  return part;
}

std::unique_ptr<Sequential> batchnorm_model(int dims, const Shape& in, bool sync) {
  auto model = one_layer(std::make_unique<BatchNorm>(dims, 1e-5, 0.2, sync), in);
  randomize_parameters(*model, 61);
  return model;
}

}  // namespace

TEST_CASE("SyncBatchNorm over unequal batches equals BatchNorm on the concatenated batch", "[mpi][syncbn]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const auto transport = make_mpi_transport(world, cpu_device());
  const std::size_t w = static_cast<std::size_t>(world.size()), rank = static_cast<std::size_t>(world.rank());
  const UnequalShare share(world, 2, 3);  // rank r has 2 + 3r samples: 2, 5, 8, ...
  const std::size_t first = share.first, total = share.total, mine = share.mine;

  struct Case {
    int dims;
    Shape in;
  };
  for (const Case& c : {Case{1, {5}}, Case{1, {3, 4}}, Case{2, {3, 4, 5}}}) {
    const std::size_t features = element_count(c.in);
    auto synced = batchnorm_model(c.dims, c.in, true);
    synced->set_cross_rank(transport.get());
    auto reference = batchnorm_model(c.dims, c.in, false);
    auto local = batchnorm_model(c.dims, c.in, false);  // what a plain BatchNorm would do
    const std::string what = "batchnorm" + std::to_string(c.dims) + "d on " + shape_text(c.in) + ", world " +
                             std::to_string(w) + ", rank " + std::to_string(rank);
    REQUIRE(synced->layers()[0]->kind() == "SyncBatchNorm");
    for (int step = 0; step < 2; ++step) {
      // The global batch, the same on every rank; channels with different offsets and spreads.
      Matrix all = random_matrix(total, features, 71 + step, 2.0f);
      for (std::size_t s = 0; s < total; ++s)
        for (std::size_t f = 0; f < features; ++f)
          all.data()[s * features + f] += 0.3f * static_cast<float>(f % 3) + step;
      const Matrix dy_all = random_matrix(total, features, 73 + step);
      const Matrix x = rows_of(all, first, mine, features), dy = rows_of(dy_all, first, mine, features);

      const auto [y_ref, dx_ref] = train_passes(*reference, all, dy_all);
      const auto [y, dx] = train_passes(*synced, x, dy);
      const Matrix& y_local = local->forward(x, ForwardContext{});

      INFO(what << ", step " << step);
      CHECK(relative_error(y.data(), y_ref.data() + first * features, mine * features) <= 1e-5);
      CHECK(relative_error(dx.data(), dx_ref.data() + first * features, mine * features) <= 1e-5);
      // The test can fail: one rank's own statistics give another output.
      CHECK(relative_error(y_local.data(), y_ref.data() + first * features, mine * features) > 1e-3);

      ParameterStore& sp = synced->parameters();
      ParameterStore& rp = reference->parameters();
      // Weight and bias gradients are this rank's share; DDP sums (averages) them.
      std::vector<float> grads(sp.grads(), sp.grads() + sp.total());
      world.allreduce_sum(grads.data(), grads.size());
      CHECK(relative_error(grads.data(), rp.grads(), rp.total()) <= 1e-5);
      CHECK(relative_error(sp.buffers(), rp.buffers(), rp.buffer_total()) <= 1e-6);
      CHECK(sp.counter(0) == step + 1);
      CHECK(rp.counter(0) == step + 1);
    }
  }
}

TEST_CASE("SyncBatchNorm with the ReLU and max pooling it takes in equals the layers one by one on the concatenated batch",
          "[mpi][syncbn]") {
  MpiCommunicator world(MPI_COMM_WORLD);
  const auto transport = make_mpi_transport(world, cpu_device());
  const UnequalShare share(world, 1, 2);  // rank r has 1 + 2r samples
  const std::size_t first = share.first, total = share.total, mine = share.mine;
  const Shape in{3, 5, 4};  // 5 x 4 planes by 2: the last row is no window's
  // The reference runs the layers one by one: a dropout(0) after its BatchNorm
  // (exactly the identity) keeps the ReLU and the pooling out of it.
  const auto make = [&](bool sync) {
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<BatchNorm>(2, 1e-5, 0.2, sync));
    if (!sync) layers.push_back(std::make_unique<Dropout>(0.0, 1));
    layers.push_back(std::make_unique<Activation>(ActivationKind::relu));
    layers.push_back(std::make_unique<Pool2d>(PoolKind::max, 2, 2));
    auto model = std::make_unique<Sequential>(std::move(layers), in, 1);
    randomize_parameters(*model, 61);
    return model;
  };
  auto synced = make(true), reference = make(false);
  synced->set_cross_rank(transport.get());
  REQUIRE(synced->absorbed() == std::vector<bool>{false, true, true});  // the ReLU and the pooling run inside
  REQUIRE(reference->absorbed() == std::vector<bool>{false, false, false, false});
  const std::size_t features = element_count(in), outputs = 3 * 2 * 2;
  const Matrix all = random_matrix(total, features, 79, 2.0f);
  const Matrix dy_all = random_matrix(total, outputs, 83);
  const Matrix x = rows_of(all, first, mine, features), dy = rows_of(dy_all, first, mine, outputs);
  const auto [y_ref, dx_ref] = train_passes(*reference, all, dy_all);
  const auto [y, dx] = train_passes(*synced, x, dy);
  INFO("world " << world.size() << ", rank " << world.rank());
  REQUIRE(y.size() == mine * outputs);
  CHECK(relative_error(y.data(), y_ref.data() + first * outputs, mine * outputs) <= 1e-5);
  CHECK(relative_error(dx.data(), dx_ref.data() + first * features, mine * features) <= 1e-5);
  ParameterStore& sp = synced->parameters();
  std::vector<float> grads(sp.grads(), sp.grads() + sp.total());
  world.allreduce_sum(grads.data(), grads.size());
  CHECK(relative_error(grads.data(), reference->parameters().grads(), sp.total()) <= 1e-5);
}
