// The CUDA embedding and attention families against the CPU's: table lookups
// and their fixed-order gradients (bit for bit: the GPU adds in the CPU's
// order), positions, causal attention forward and backward for several
// geometries (one head, heads wider and narrower than a warp, T = 1), and the
// element-wise add the residual blocks use. Part of gpu_tests (skipped with
// exit 77 where no GPU is usable).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "gpu_support.hpp"
#include "ops/attention/attention_ops.hpp"
#include "ops/embedding/embedding_ops.hpp"
#include "ops/pointwise/pointwise_ops.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

namespace {

// Token ids as the loader delivers them: int32 bytes in float storage.
std::vector<float> token_ids(std::size_t n, int vocab) {
  std::vector<float> ids(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::int32_t>((i * 7 + i / 3) % static_cast<std::size_t>(vocab));
    std::memcpy(&ids[i], &id, sizeof(id));
  }
  return ids;
}

}  // namespace

TEST_CASE("GPU embeddings equal the CPU's bit for bit", "[gpu][embedding]") {
  // Small; wider than one block of columns with a thousand tokens; GPT-2's vocabulary with a batch's rows, most
  // entries untouched (the sort's key width follows the vocabulary).
  struct Case {
    int rows, d, entries;
  };
  for (const Case c : {Case{300, 40, 17}, Case{5000, 300, 1000}, Case{4096, 64, 50257}}) {
    CAPTURE(c.rows, c.d, c.entries);
    EmbeddingGeometry g;
    g.rows = c.rows;
    g.d = c.d;
    g.entries = c.entries;
    const std::size_t table_size = static_cast<std::size_t>(g.entries) * g.d;
    const std::size_t out = static_cast<std::size_t>(g.rows) * g.d;
    const auto ids = token_ids(static_cast<std::size_t>(g.rows), g.entries);
    const auto table = random_values(table_size, 11), dy = random_values(out, 12);
    EmbeddingOps& cpu = cpu_device().ops<EmbeddingOps>();
    EmbeddingOps& dev = gpu().ops<EmbeddingOps>();
    std::vector<float> y(out), dtable(table_size);
    cpu.gather(ids.data(), table.data(), y.data(), g);
    cpu.scatter_add(ids.data(), dy.data(), dtable.data(), false, g);
    OnGpu gids(ids), gtable(table), gdy(dy), gy(out), gdtable(table_size);
    dev.gather(gids.data, gtable.data, gy.data, g);
    dev.scatter_add(gids.data, gdy.data, gdtable.data, false, g);
    CHECK(gy.host() == y);
    CHECK(gdtable.host() == dtable);
    cpu.scatter_add(ids.data(), dy.data(), dtable.data(), true, g);
    dev.scatter_add(gids.data, gdy.data, gdtable.data, true, g);
    CHECK(gdtable.host() == dtable);
  }
}

TEST_CASE("GPU position embeddings equal the CPU's bit for bit", "[gpu][embedding]") {
  EmbeddingOps& cpu = cpu_device().ops<EmbeddingOps>();
  EmbeddingOps& dev = gpu().ops<EmbeddingOps>();
  PositionGeometry p{5, 12, 40};
  const std::size_t plane = 12 * 40, all = 5 * plane;
  const auto x = random_values(all, 13), pos = random_values(plane, 14), pdy = random_values(all, 15);
  std::vector<float> py(all), dpos(plane);
  cpu.add_positions(x.data(), pos.data(), py.data(), p);
  cpu.position_grad(pdy.data(), dpos.data(), false, p);
  OnGpu gx(x), gpos(pos), gpdy(pdy), gpy(all), gdpos(plane);
  dev.add_positions(gx.data, gpos.data, gpy.data, p);
  dev.position_grad(gpdy.data, gdpos.data, false, p);
  CHECK(gpy.host() == py);
  CHECK(gdpos.host() == dpos);
}

// Forward and backward through the four phases, without dropout (the weights are the probabilities).
static void attention_pass(AttentionOps& ops, const float* qkv, float* y, float* probs, const float* dy, float* dqkv,
                    float* dprobs, const AttentionGeometry& g) {
  ops.probabilities(qkv, probs, g);
  ops.weighted_sum(probs, qkv, y, g);
  ops.weighted_sum_backward(probs, qkv, dy, dqkv, dprobs, g);
  ops.probabilities_backward(probs, dprobs, qkv, dqkv, g);
}

TEST_CASE("GPU causal attention matches the CPU's, and repeats bit for bit", "[gpu][attention]") {
  struct Case {
    int samples, positions, heads, head_dim;
  };
  for (const Case k : {Case{2, 5, 1, 8}, Case{3, 33, 4, 16}, Case{2, 64, 2, 48}, Case{4, 1, 3, 4}}) {
    AttentionGeometry g;
    g.samples = k.samples;
    g.positions = k.positions;
    g.heads = k.heads;
    g.head_dim = k.head_dim;
    INFO("samples " << k.samples << " T " << k.positions << " heads " << k.heads << " head_dim " << k.head_dim);
    const std::size_t rows = static_cast<std::size_t>(g.samples) * g.positions, d = static_cast<std::size_t>(g.width());
    const std::size_t probs_size = static_cast<std::size_t>(g.samples) * g.heads * g.positions * g.positions;
    const auto qkv = random_values(rows * 3 * d, 20 + k.positions, 2.0f), dy = random_values(rows * d, 30);
    AttentionOps& cpu = cpu_device().ops<AttentionOps>();
    AttentionOps& dev = gpu().ops<AttentionOps>();
    std::vector<float> y(rows * d), probs(probs_size), dqkv(rows * 3 * d), dprobs(probs_size);
    attention_pass(cpu, qkv.data(), y.data(), probs.data(), dy.data(), dqkv.data(), dprobs.data(), g);
    OnGpu gqkv(qkv), gdy(dy), gy(rows * d), gprobs(probs_size), gdqkv(rows * 3 * d), gdprobs(probs_size);
    attention_pass(dev, gqkv.data, gy.data, gprobs.data, gdy.data, gdqkv.data, gdprobs.data, g);
    CHECK(close(gy.host(), y, 1e-4, 1e-5));
    CHECK(close(gprobs.host(), probs, 1e-5, 1e-6));
    CHECK(close(gdqkv.host(), dqkv, 1e-4, 1e-5));
    CHECK(close(gdprobs.host(), dprobs, 1e-4, 1e-5));
    const auto first = gdqkv.host();
    attention_pass(dev, gqkv.data, gy.data, gprobs.data, gdy.data, gdqkv.data, gdprobs.data, g);
    CHECK(gdqkv.host() == first);
  }
}

TEST_CASE("GPU add equals the CPU's, in place too", "[gpu][residual]") {
  const std::size_t n = 10007;
  const auto a = random_values(n, 40), b = random_values(n, 41);
  std::vector<float> sum(n);
  cpu_device().ops<PointwiseOps>().add(a.data(), b.data(), sum.data(), n);
  OnGpu ga(a), gb(b), gsum(n);
  gpu().ops<PointwiseOps>().add(ga.data, gb.data, gsum.data, n);
  CHECK(gsum.host() == sum);
  gpu().ops<PointwiseOps>().add(ga.data, gb.data, ga.data, n);
  CHECK(ga.host() == sum);
}
