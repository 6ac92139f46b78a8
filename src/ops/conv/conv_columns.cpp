#include "conv_columns.hpp"

#include <algorithm>

namespace mpiddp::cpu {
namespace {

// The output columns ox whose input column ox * stride - padding + kj lies
// inside the image: [first, last).
struct ValidSpan {
  int first, last, shift;  // input column = ox * stride - shift
  ValidSpan(int kj, const ConvGeometry& g) : shift(g.padding - kj) {
    const int ow = g.out_w();
    first = std::min(shift <= 0 ? 0 : (shift + g.stride - 1) / g.stride, ow);
    last = g.w - 1 + shift < 0 ? first : std::clamp((g.w - 1 + shift) / g.stride + 1, first, ow);
  }
};

}  // namespace

void image_to_columns(const float* x, const ConvGeometry& g, float* cols, std::size_t stride, std::size_t at) {
  const int oh = g.out_h(), ow = g.out_w();
  for (int c = 0; c < g.c; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        float* row = cols + (static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj)) * stride + at;
        const float* plane = x + static_cast<std::size_t>(c) * g.h * g.w;
        const ValidSpan span(kj, g);
        for (int oy = 0; oy < oh; ++oy) {
          float* out = row + static_cast<std::size_t>(oy) * ow;
          const int iy = oy * g.stride - g.padding + ki;
          if (iy < 0 || iy >= g.h) {
            std::fill(out, out + ow, 0.0f);
            continue;
          }
          const float* in = plane + static_cast<std::size_t>(iy) * g.w;
          std::fill(out, out + span.first, 0.0f);
          if (g.stride == 1) std::copy(in + (span.first - span.shift), in + (span.last - span.shift), out + span.first);
          else
            for (int ox = span.first; ox < span.last; ++ox) out[ox] = in[ox * g.stride - span.shift];
          std::fill(out + span.last, out + ow, 0.0f);
        }
      }
}

void columns_to_image(const float* cols, std::size_t stride, std::size_t at, const ConvGeometry& g, float* dx) {
  const int oh = g.out_h(), ow = g.out_w();
  for (int c = 0; c < g.c; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float* row = cols + (static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj)) * stride + at;
        float* plane = dx + static_cast<std::size_t>(c) * g.h * g.w;
        const ValidSpan span(kj, g);
        for (int oy = 0; oy < oh; ++oy) {
          const int iy = oy * g.stride - g.padding + ki;
          if (iy < 0 || iy >= g.h) continue;
          const float* in = row + static_cast<std::size_t>(oy) * ow;
          float* out = plane + static_cast<std::size_t>(iy) * g.w;
          for (int ox = span.first; ox < span.last; ++ox) out[ox * g.stride - span.shift] += in[ox];
        }
      }
}

void bias_gradient(const float* dy, const ConvGeometry& g, float* dbias, bool accumulate) {
  const std::size_t positions = static_cast<std::size_t>(g.out_h()) * g.out_w();
  for (int oc = 0; oc < g.out_c; ++oc) {
    double sum = 0.0;
    for (int i = 0; i < g.n; ++i) {
      const float* plane = dy + (static_cast<std::size_t>(i) * g.out_c + oc) * positions;
      for (std::size_t q = 0; q < positions; ++q) sum += plane[q];
    }
    dbias[oc] = (accumulate ? dbias[oc] : 0.0f) + static_cast<float>(sum);
  }
}

}  // namespace mpiddp::cpu
