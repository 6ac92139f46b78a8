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
  // Rank r has 2 + 3r samples: 2, 5, 8, ...
  std::size_t first = 0, total = 0;
  for (std::size_t r = 0; r < w; ++r) {
    if (r == rank) first = total;
    total += 2 + 3 * r;
  }
  const std::size_t mine = 2 + 3 * rank;

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
      Matrix x(mine, features), dy(mine, features);
      std::copy(all.data() + first * features, all.data() + (first + mine) * features, x.data());
      std::copy(dy_all.data() + first * features, dy_all.data() + (first + mine) * features, dy.data());

      ForwardContext ctx;
      const Matrix& y_ref = reference->forward(all, ctx);
      Matrix dx_ref;
      reference->backward(dy_all, false, nullptr, &dx_ref);
      const Matrix& y = synced->forward(x, ctx);
      Matrix dx;
      synced->backward(dy, false, nullptr, &dx);
      const Matrix& y_local = local->forward(x, ctx);

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
