#include "mpiddp/nn/embedding.hpp"

#include <cmath>
#include <vector>

#include "mpiddp/common/random.hpp"

namespace mpiddp {

void fill_normal(ParameterStore& params, std::size_t index, float std, std::uint64_t seed) {
  // Box-Muller over two uniforms per value; drawn on the host, pushed by Sequential.
  CounterRng rng(hash_combine(seed, index));
  float* v = params.host_values() + params.list()[index].offset;
  for (std::size_t i = 0; i < params.list()[index].count; ++i) {
    const double u1 = 1.0 - static_cast<double>(rng.uniform(2 * i));  // in (0, 1]: log is finite
    const double u2 = static_cast<double>(rng.uniform(2 * i + 1));
    v[i] = static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

// ---- Embedding ----------------------------------------------------------------

Shape Embedding::output_shape(const Shape& in) const {
  if (in.size() != 1)
    throw LayerError("embedding takes a sequence of token ids {positions}, but gets " + shape_text(in) +
                     " (it must be the first layer of a model on token shards: data.context)");
  indexable(in[0], "its positions");
  indexable(entries_, "its num_embeddings");
  indexable(d_, "its embedding_dim");
  return {in[0], d_};
}

std::string Embedding::arguments() const { return std::to_string(entries_) + ", " + std::to_string(d_); }

void Embedding::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  weight_ = params.add(prefix + ".weight", {entries_, d_});
}

void Embedding::initialize(ParameterStore& params, std::uint64_t seed) {
  fill_normal(params, weight_, 1.0f, seed);
  params_ = &params;
}

EmbeddingGeometry Embedding::geometry(const Matrix& x) const {
  EmbeddingGeometry g;
  g.rows = static_cast<int>(indexable(x.size(), "token positions in a batch"));
  g.d = static_cast<int>(d_);
  g.entries = static_cast<int>(entries_);
  return g;
}

void Embedding::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), x.cols() * d_);
  device().ops<EmbeddingOps>().gather(x.data(), params_->value(weight_), y.data(), geometry(x));
}

void Embedding::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                         bool accumulate) {
  device().ops<EmbeddingOps>().scatter_add(x.data(), dy.data(), params.grad(weight_), accumulate || shared_,
                                           geometry(x));
  if (dx) {  // token ids have no gradient (only a test asks for one: zeros)
    dx->resize(x.rows(), x.cols());
    const std::vector<float> zeros(dx->size(), 0.0f);
    device().copy_to_device(dx->data(), zeros.data(), zeros.size() * sizeof(float));
  }
}

// ---- PositionEmbedding --------------------------------------------------------

Shape PositionEmbedding::output_shape(const Shape& in) const {
  if (in.size() != 2)
    throw LayerError("position_embedding takes a sequence {positions, features}, but gets " + shape_text(in) +
                     " (put it after embedding)");
  indexable(element_count(in), "its table");
  return in;
}

std::string PositionEmbedding::arguments() const {
  return std::to_string(positions_) + ", " + std::to_string(d_);
}

void PositionEmbedding::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  positions_ = in[0];
  d_ = in[1];
  weight_ = params.add(prefix + ".weight", {positions_, d_});
}

void PositionEmbedding::initialize(ParameterStore& params, std::uint64_t seed) {
  fill_normal(params, weight_, 1.0f, seed);
  params_ = &params;
}

PositionGeometry PositionEmbedding::geometry(const Matrix& x) const {
  return {static_cast<int>(x.rows()), static_cast<int>(positions_), static_cast<int>(d_)};
}

void PositionEmbedding::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), x.cols());
  device().ops<EmbeddingOps>().add_positions(x.data(), params_->value(weight_), y.data(), geometry(x));
}

void PositionEmbedding::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                                 bool accumulate) {
  device().ops<EmbeddingOps>().position_grad(dy.data(), params.grad(weight_), accumulate, geometry(x));
  if (dx) {
    dx->resize(x.rows(), x.cols());
    device().copy_within(dx->data(), dy.data(), dy.size() * sizeof(float));
  }
}

}  // namespace mpiddp
