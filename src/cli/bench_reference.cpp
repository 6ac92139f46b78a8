#include "bench_reference.hpp"

#include <cstddef>

namespace mpiddp::bench {
namespace {
using Index = std::ptrdiff_t;
}  // namespace

std::vector<float> linear_forward(const float* x, const float* w, const float* b, int n, int in, int out) {
  std::vector<float> y(static_cast<std::size_t>(n) * out);
  for (Index s = 0; s < n; ++s)
    for (Index o = 0; o < out; ++o) {
      double sum = b[o];
      for (Index i = 0; i < in; ++i) sum += static_cast<double>(x[s * in + i]) * w[o * in + i];
      y[s * out + o] = static_cast<float>(sum);
    }
  return y;
}

std::vector<float> linear_params_grad(const float* x, const float* dy, int n, int in, int out) {
  std::vector<float> grads(static_cast<std::size_t>(out) * in + out);
  for (Index o = 0; o < out; ++o) {
    for (Index i = 0; i < in; ++i) {
      double sum = 0.0;
      for (Index s = 0; s < n; ++s) sum += static_cast<double>(dy[s * out + o]) * x[s * in + i];
      grads[o * in + i] = static_cast<float>(sum);
    }
    double bias = 0.0;
    for (Index s = 0; s < n; ++s) bias += dy[s * out + o];
    grads[static_cast<Index>(out) * in + o] = static_cast<float>(bias);
  }
  return grads;
}

std::vector<float> linear_input_grad(const float* dy, const float* w, int n, int in, int out) {
  std::vector<float> dx(static_cast<std::size_t>(n) * in);
  for (Index s = 0; s < n; ++s)
    for (Index i = 0; i < in; ++i) {
      double sum = 0.0;
      for (Index o = 0; o < out; ++o) sum += static_cast<double>(dy[s * out + o]) * w[o * in + i];
      dx[s * in + i] = static_cast<float>(sum);
    }
  return dx;
}

namespace {
// Calls visit(sample, out channel, y, x position, in channel, ky, kx, input
// index, weight index) for every multiply-add of the convolution.
template <class Visit>
void for_each_tap(const ConvGeometry& g, Visit&& visit) {
  const Index oh = g.out_h(), ow = g.out_w();
  for (Index s = 0; s < g.n; ++s)
    for (Index o = 0; o < g.out_c; ++o)
      for (Index y = 0; y < oh; ++y)
        for (Index x = 0; x < ow; ++x) {
          const Index out_index = ((s * g.out_c + o) * oh + y) * ow + x;
          for (Index c = 0; c < g.c; ++c)
            for (Index ky = 0; ky < g.kh; ++ky)
              for (Index kx = 0; kx < g.kw; ++kx) {
                const Index iy = y * g.stride - g.padding + ky, ix = x * g.stride - g.padding + kx;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                visit(out_index, ((s * g.c + c) * g.h + iy) * g.w + ix, ((o * g.c + c) * g.kh + ky) * g.kw + kx);
              }
        }
}

Index outputs_of(const ConvGeometry& g) { return static_cast<Index>(g.n) * g.out_c * g.out_h() * g.out_w(); }
}  // namespace

std::vector<float> conv_forward(const float* x, const float* w, const float* b, const ConvGeometry& g) {
  std::vector<double> sum(static_cast<std::size_t>(outputs_of(g)));
  const Index plane = static_cast<Index>(g.out_h()) * g.out_w();
  for (Index i = 0; i < outputs_of(g); ++i) sum[i] = b[(i / plane) % g.out_c];
  for_each_tap(g, [&](Index out, Index in, Index weight) { sum[out] += static_cast<double>(x[in]) * w[weight]; });
  return {sum.begin(), sum.end()};
}

std::vector<float> conv_params_grad(const float* x, const float* dy, const ConvGeometry& g) {
  const Index weights = static_cast<Index>(g.out_c) * g.c * g.kh * g.kw;
  std::vector<double> sum(static_cast<std::size_t>(weights + g.out_c), 0.0);
  for_each_tap(g, [&](Index out, Index in, Index weight) { sum[weight] += static_cast<double>(dy[out]) * x[in]; });
  const Index plane = static_cast<Index>(g.out_h()) * g.out_w();
  for (Index i = 0; i < outputs_of(g); ++i) sum[weights + (i / plane) % g.out_c] += dy[i];
  return {sum.begin(), sum.end()};
}

std::vector<float> conv_input_grad(const float* dy, const float* w, const ConvGeometry& g) {
  std::vector<double> sum(static_cast<std::size_t>(g.n) * g.c * g.h * g.w, 0.0);
  for_each_tap(g, [&](Index out, Index in, Index weight) { sum[in] += static_cast<double>(dy[out]) * w[weight]; });
  return {sum.begin(), sum.end()};
}

}  // namespace mpiddp::bench
