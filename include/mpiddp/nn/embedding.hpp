#pragma once
// The first layers of a sequence model. embedding(V, D) is nn.Embedding: a
// sample {T} of token ids becomes {T, D} rows of its table (weight [V, D]).
// position_embedding adds a learned [T, D] table to a {T, D} sample (nanoGPT's
// wpe). Both start as nn.Embedding does, from N(0, 1).
#include "mpiddp/nn/layer.hpp"
#include "ops/embedding/embedding_ops.hpp"

namespace mpiddp {

// N(0, std^2) into parameter `index`, a counter-based stream of (seed, index).
void fill_normal(ParameterStore& params, std::size_t index, float std, std::uint64_t seed);

class Embedding final : public Layer {
 public:
  Embedding(std::size_t entries, std::size_t width) : entries_(entries), d_(width) {}
  std::string kind() const override { return "Embedding"; }
  bool takes_tokens() const override { return true; }
  std::size_t entries() const { return entries_; }
  std::size_t width() const { return d_; }
  std::size_t weight_index() const { return weight_; }  // after declare()
  // A later linear(tie=K) uses this weight too: its gradient (written first, in
  // backward order) is then added to, never overwritten.
  void share_weight() { shared_ = true; }
  Shape output_shape(const Shape& in) const override;
  std::string arguments() const override;  // "256, 64"
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override { return {weight_}; }

 private:
  EmbeddingGeometry geometry(const Matrix& x) const;
  std::size_t entries_, d_;
  std::size_t weight_ = 0;
  bool shared_ = false;
  ParameterStore* params_ = nullptr;
};

class PositionEmbedding final : public Layer {
 public:
  std::string kind() const override { return "PositionEmbedding"; }
  Shape output_shape(const Shape& in) const override;
  std::string arguments() const override;  // "64, 128": positions, width
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override { return {weight_}; }

 private:
  PositionGeometry geometry(const Matrix& x) const;
  std::size_t positions_ = 0, d_ = 0;
  std::size_t weight_ = 0;
  ParameterStore* params_ = nullptr;
};

}  // namespace mpiddp
