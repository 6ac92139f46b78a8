// Embeddings on the CPU: row copies and adds, gradient sums in row order.
#include <algorithm>
#include <cstring>
#include <string>

#include "embedding_ops.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cpu {
namespace {

MPIDDP_VECTOR_CLONES
void add_row(const float* __restrict from, float* __restrict to, int d) {
  for (int j = 0; j < d; ++j) to[j] += from[j];
}

MPIDDP_VECTOR_CLONES
void sum_rows(const float* __restrict a, const float* __restrict b, float* __restrict out, int d) {
  for (int j = 0; j < d; ++j) out[j] = a[j] + b[j];
}

// Row `r`'s token id, which must name a row of the table: the readers check ids
// against the shards' vocabulary, but a table may have fewer rows than that (a
// checkpoint's embedding, mpiddp generate's bytes), and a row past it would be
// read or written outside the parameters.
std::size_t table_row(const float* ids, std::size_t r, const EmbeddingGeometry& g) {
  const int id = token_id(ids, r);
  if (id < 0 || id >= g.entries)
    throw RuntimeError("embedding: token id " + std::to_string(id) + " is outside its table of " +
                       std::to_string(g.entries) + " rows (num_embeddings)");
  return static_cast<std::size_t>(id);
}

class CpuEmbeddingOps final : public EmbeddingOps {
 public:
  void gather(const float* ids, const float* table, float* y, const EmbeddingGeometry& g) override {
    const auto d = static_cast<std::size_t>(g.d);
    for (std::size_t r = 0; r < static_cast<std::size_t>(g.rows); ++r)
      std::memcpy(y + r * d, table + table_row(ids, r, g) * d, d * sizeof(float));
  }
  void scatter_add(const float* ids, const float* dy, float* dtable, bool accumulate,
                   const EmbeddingGeometry& g) override {
    const auto d = static_cast<std::size_t>(g.d);
    if (!accumulate) std::fill(dtable, dtable + d * static_cast<std::size_t>(g.entries), 0.0f);
    for (std::size_t r = 0; r < static_cast<std::size_t>(g.rows); ++r)
      add_row(dy + r * d, dtable + table_row(ids, r, g) * d, g.d);
  }
  void add_positions(const float* x, const float* table, float* y, const PositionGeometry& g) override {
    const std::size_t plane = static_cast<std::size_t>(g.positions) * g.d;
    for (std::size_t s = 0; s < static_cast<std::size_t>(g.samples); ++s)
      sum_rows(x + s * plane, table, y + s * plane, static_cast<int>(plane));
  }
  void position_grad(const float* dy, float* dtable, bool accumulate, const PositionGeometry& g) override {
    const std::size_t plane = static_cast<std::size_t>(g.positions) * g.d;
    if (!accumulate) std::fill(dtable, dtable + plane, 0.0f);
    for (std::size_t s = 0; s < static_cast<std::size_t>(g.samples); ++s)
      add_row(dy + s * plane, dtable, static_cast<int>(plane));
  }
};

std::unique_ptr<EmbeddingOps> make_cpu_embedding_ops(Device&) { return std::make_unique<CpuEmbeddingOps>(); }
const bool registered = register_ops<EmbeddingOps>(DeviceKind::cpu, make_cpu_embedding_ops);

}  // namespace
}  // namespace mpiddp::cpu
