#include "own_winograd.hpp"

#include <algorithm>
#include <vector>

#include "conv_columns.hpp"
#include "mpiddp/device/cpu_gemm.hpp"

namespace mpiddp::cpu::own_winograd {
namespace {

constexpr int kElements = 16;  // a 4 x 4 tile in the transformed domain
// Transformed tiles and their products per chunk of samples, in floats (2 MiB):
// they stay in the L2 cache between the transforms and the products.
constexpr std::size_t kChunkFloats = std::size_t{512} << 10;

constexpr int kLanes = 8;  // channels per block: one AVX2 vector

struct Scratch final : LayerScratch {
  std::vector<float> filters;   // transformed: [16][out][in]
  std::vector<float> turned;    // the input gradient's filters, [in][out][3][3]
  std::vector<float> tiles;     // transformed input tiles: [16][chunk tiles][in]
  std::vector<float> products;  // their products: [16][chunk tiles][out]
  std::vector<float> plane;     // one padded plane of a block of 8 channels: [rows][cols][8]
  std::vector<float> gradients; // transformed dy tiles (weight gradient): [16][chunk tiles][out]
  std::vector<float> sums;      // the weight gradient in the transformed domain: [16][out][in]
};

// One convolution as this file runs it: `in` planes of h x w, padded by `pad`,
// into `out` planes of (h + 2 pad - 2) x (w + 2 pad - 2), in tiles of 2 x 2 outputs.
struct Problem {
  int n, in, h, w, out, pad;
  int out_h() const { return h + 2 * pad - 2; }
  int out_w() const { return w + 2 * pad - 2; }
  int tiles_h() const { return (out_h() + 1) / 2; }
  int tiles_w() const { return (out_w() + 1) / 2; }
  int tiles() const { return tiles_h() * tiles_w(); }
  int chunk() const {
    const std::size_t per_sample = std::size_t{kElements} * (in + out) * tiles();
    return static_cast<int>(std::clamp<std::size_t>(kChunkFloats / per_sample, 1, static_cast<std::size_t>(n)));
  }
};

// G g Gᵀ for each filter g (3 x 3) of `weight` [out][in][3][3], G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1].
void transform_filters(const float* weight, int out, int in, std::vector<float>& filters) {
  filters.resize(std::size_t{kElements} * out * in);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) {
      const float* g = weight + (static_cast<std::size_t>(o) * in + i) * 9;
      float t[4][3];
      for (int b = 0; b < 3; ++b) {
        t[0][b] = g[b];
        t[1][b] = 0.5f * (g[b] + g[3 + b] + g[6 + b]);
        t[2][b] = 0.5f * (g[b] - g[3 + b] + g[6 + b]);
        t[3][b] = g[6 + b];
      }
      for (int a = 0; a < 4; ++a) {
        const float v[4] = {t[a][0], 0.5f * (t[a][0] + t[a][1] + t[a][2]), 0.5f * (t[a][0] - t[a][1] + t[a][2]),
                            t[a][2]};
        for (int b = 0; b < 4; ++b) filters[(static_cast<std::size_t>(a * 4 + b) * out + o) * in + i] = v[b];
      }
    }
}

// The first rows x cols values of 8 consecutive h x w planes, interleaved into
// `plane` ([padded rows][padded_w][8]) at row and column `offset`.
void interleave(const float* planes, int h, int w, int rows, int cols, int offset, int padded_w,
                std::vector<float>& plane) {
  for (int l = 0; l < kLanes; ++l) {
    const float* image = planes + static_cast<std::size_t>(l) * h * w;
    for (int r = 0; r < rows; ++r) {
      float* to = &plane[(static_cast<std::size_t>(r + offset) * padded_w + offset) * kLanes + l];
      const float* from = image + static_cast<std::size_t>(r) * w;
      for (int q = 0; q < cols; ++q) to[static_cast<std::size_t>(q) * kLanes] = from[q];
    }
  }
}

// Bᵀ d B for every 4 x 4 tile d (stride 2) of samples [first, first + count) of x,
// Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], 8 channels at a time (each
// operation below runs over the 8 lanes): tiles [16][count * tiles][in].
void transform_tiles(const float* x, const Problem& p, int first, int count, Scratch& s) {
  const int th = p.tiles_h(), tw = p.tiles_w(), padded_h = 2 * th + 2, padded_w = 2 * tw + 2;
  const std::size_t chunk_tiles = static_cast<std::size_t>(count) * p.tiles(), element = chunk_tiles * p.in;
  s.tiles.resize(kElements * element);
  s.plane.assign(static_cast<std::size_t>(padded_h) * padded_w * kLanes, 0.0f);
  const int rows_in = std::min(p.h, padded_h - p.pad), cols_in = std::min(p.w, padded_w - p.pad);
  for (int k = 0; k < count; ++k)
    for (int block = 0; block < p.in; block += kLanes) {
      // (The border stays zero: only the interior is written.)
      interleave(x + (static_cast<std::size_t>(first + k) * p.in + block) * p.h * p.w, p.h, p.w, rows_in, cols_in,
                 p.pad, padded_w, s.plane);
      for (int ti = 0; ti < th; ++ti)
        for (int tj = 0; tj < tw; ++tj) {
          const float* d = &s.plane[(static_cast<std::size_t>(2 * ti) * padded_w + 2 * tj) * kLanes];
          const auto at = [&](int a, int b) { return d + (static_cast<std::size_t>(a) * padded_w + b) * kLanes; };
          float t[4][4][kLanes];  // Bᵀ d
          for (int b = 0; b < 4; ++b)
            for (int l = 0; l < kLanes; ++l) {
              const float d0 = at(0, b)[l], d1 = at(1, b)[l], d2 = at(2, b)[l], d3 = at(3, b)[l];
              t[0][b][l] = d0 - d2;
              t[1][b][l] = d1 + d2;
              t[2][b][l] = d2 - d1;
              t[3][b][l] = d1 - d3;
            }
          const std::size_t tile = static_cast<std::size_t>(k) * p.tiles() + static_cast<std::size_t>(ti) * tw + tj;
          float* u = &s.tiles[tile * p.in + block];
          for (int a = 0; a < 4; ++a)
            for (int l = 0; l < kLanes; ++l) {  // (Bᵀ d) B
              u[(a * 4 + 0) * element + l] = t[a][0][l] - t[a][2][l];
              u[(a * 4 + 1) * element + l] = t[a][1][l] + t[a][2][l];
              u[(a * 4 + 2) * element + l] = t[a][2][l] - t[a][1][l];
              u[(a * 4 + 3) * element + l] = t[a][1][l] - t[a][3][l];
            }
        }
    }
}

// Aᵀ m A for every tile's products m, Aᵀ = [1 1 1 0; 0 1 -1 -1], plus the bias,
// 8 output channels at a time: samples [first, first + count) of y.
void transform_back(const Problem& p, const float* bias, int first, int count, float* y, const Scratch& s) {
  const int th = p.tiles_h(), tw = p.tiles_w(), oh = p.out_h(), ow = p.out_w();
  const std::size_t chunk_tiles = static_cast<std::size_t>(count) * p.tiles(), element = chunk_tiles * p.out;
  const std::size_t plane = static_cast<std::size_t>(oh) * ow;
  for (int k = 0; k < count; ++k)
    for (int ti = 0; ti < th; ++ti)
      for (int tj = 0; tj < tw; ++tj) {
        const std::size_t tile = static_cast<std::size_t>(k) * p.tiles() + static_cast<std::size_t>(ti) * tw + tj;
        const bool right = 2 * tj + 1 < ow, below = 2 * ti + 1 < oh;
        for (int block = 0; block < p.out; block += kLanes) {
          const float* m = &s.products[tile * p.out + block];
          float t[2][4][kLanes];  // Aᵀ m
          for (int b = 0; b < 4; ++b)
            for (int l = 0; l < kLanes; ++l) {
              const float m0 = m[b * element + l], m1 = m[(4 + b) * element + l], m2 = m[(8 + b) * element + l],
                          m3 = m[(12 + b) * element + l];
              t[0][b][l] = m0 + m1 + m2;
              t[1][b][l] = m1 - m2 - m3;
            }
          float out[2][2][kLanes];  // (Aᵀ m) A + bias
          for (int a = 0; a < 2; ++a)
            for (int l = 0; l < kLanes; ++l) {
              const float bl = bias ? bias[block + l] : 0.0f;
              out[a][0][l] = t[a][0][l] + t[a][1][l] + t[a][2][l] + bl;
              out[a][1][l] = t[a][1][l] - t[a][2][l] - t[a][3][l] + bl;
            }
          float* to = y + (static_cast<std::size_t>(first + k) * p.out + block) * plane +
                      static_cast<std::size_t>(2 * ti) * ow + 2 * tj;
          for (int l = 0; l < kLanes; ++l) {
            float* at = to + static_cast<std::size_t>(l) * plane;
            at[0] = out[0][0][l];
            if (right) at[1] = out[0][1][l];
            if (below) {
              at[ow] = out[1][0][l];
              if (right) at[ow + 1] = out[1][1][l];
            }
          }
        }
      }
}

// y = x convolved with the transformed filters, chunk by chunk.
void convolve(const float* x, const Problem& p, const float* bias, float* y, Scratch& s) {
  const int chunk = p.chunk();
  for (int first = 0; first < p.n; first += chunk) {
    const int count = std::min(chunk, p.n - first);
    const int chunk_tiles = count * p.tiles();
    transform_tiles(x, p, first, count, s);
    s.products.resize(kElements * static_cast<std::size_t>(p.out) * chunk_tiles);
    for (int e = 0; e < kElements; ++e)  // [tiles x in] x [out x in]ᵀ
      cpu::sgemm(false, true, chunk_tiles, p.out, p.in, 1.0f, &s.tiles[static_cast<std::size_t>(e) * chunk_tiles * p.in],
                 p.in, &s.filters[static_cast<std::size_t>(e) * p.out * p.in], p.in, 0.0f,
                 &s.products[static_cast<std::size_t>(e) * chunk_tiles * p.out], p.out);
    transform_back(p, bias, first, count, y, s);
  }
}

// A dY Aᵀ for every 2 x 2 tile dY of dy (outputs past the plane's edge count as
// zero), A = Aᵀᵀ, 8 output channels at a time: gradients [16][count * tiles][out].
void transform_gradient_tiles(const float* dy, const Problem& p, int first, int count, Scratch& s) {
  const int th = p.tiles_h(), tw = p.tiles_w(), oh = p.out_h(), ow = p.out_w(), padded_w = 2 * tw;
  const std::size_t chunk_tiles = static_cast<std::size_t>(count) * p.tiles(), element = chunk_tiles * p.out;
  s.gradients.resize(kElements * element);
  s.plane.assign(static_cast<std::size_t>(2 * th) * padded_w * kLanes, 0.0f);
  for (int k = 0; k < count; ++k)
    for (int block = 0; block < p.out; block += kLanes) {
      interleave(dy + (static_cast<std::size_t>(first + k) * p.out + block) * oh * ow, oh, ow, oh, ow, 0, padded_w,
                 s.plane);
      for (int ti = 0; ti < th; ++ti)
        for (int tj = 0; tj < tw; ++tj) {
          const float* d = &s.plane[(static_cast<std::size_t>(2 * ti) * padded_w + 2 * tj) * kLanes];
          const float *y00 = d, *y01 = d + kLanes, *y10 = d + static_cast<std::size_t>(padded_w) * kLanes,
                      *y11 = y10 + kLanes;
          float t[4][2][kLanes];  // A dY
          for (int l = 0; l < kLanes; ++l) {
            t[0][0][l] = y00[l];
            t[0][1][l] = y01[l];
            t[1][0][l] = y00[l] + y10[l];
            t[1][1][l] = y01[l] + y11[l];
            t[2][0][l] = y00[l] - y10[l];
            t[2][1][l] = y01[l] - y11[l];
            t[3][0][l] = -y10[l];
            t[3][1][l] = -y11[l];
          }
          const std::size_t tile = static_cast<std::size_t>(k) * p.tiles() + static_cast<std::size_t>(ti) * tw + tj;
          float* z = &s.gradients[tile * p.out + block];
          for (int a = 0; a < 4; ++a)
            for (int l = 0; l < kLanes; ++l) {  // (A dY) Aᵀ
              const float left = t[a][0][l], right = t[a][1][l];
              z[(a * 4 + 0) * element + l] = left;
              z[(a * 4 + 1) * element + l] = left + right;
              z[(a * 4 + 2) * element + l] = left - right;
              z[(a * 4 + 3) * element + l] = -right;
            }
        }
    }
}

// Gᵀ w G for each transformed filter gradient w (4 x 4) of sums [16][out][in],
// into dweight [out][in][3][3] (added where `accumulate`).
void transform_back_filters(const std::vector<float>& sums, int out, int in, float* dweight, bool accumulate) {
  const std::size_t element = static_cast<std::size_t>(out) * in;
  for (std::size_t f = 0; f < element; ++f) {
    float w[4][4];
    for (int e = 0; e < kElements; ++e) w[e / 4][e % 4] = sums[e * element + f];
    float t[3][4];  // Gᵀ w, Gᵀ = [1 ½ ½ 0; 0 ½ -½ 0; 0 ½ ½ 1]
    for (int b = 0; b < 4; ++b) {
      t[0][b] = w[0][b] + 0.5f * w[1][b] + 0.5f * w[2][b];
      t[1][b] = 0.5f * w[1][b] - 0.5f * w[2][b];
      t[2][b] = 0.5f * w[1][b] + 0.5f * w[2][b] + w[3][b];
    }
    float* g = dweight + f * 9;
    for (int a = 0; a < 3; ++a) {
      const float v[3] = {t[a][0] + 0.5f * t[a][1] + 0.5f * t[a][2], 0.5f * t[a][1] - 0.5f * t[a][2],
                          0.5f * t[a][1] + 0.5f * t[a][2] + t[a][3]};
      for (int b = 0; b < 3; ++b) g[a * 3 + b] = (accumulate ? g[a * 3 + b] : 0.0f) + v[b];
    }
  }
}

}  // namespace

bool supports(const ConvGeometry& g) {
  return g.kh == 3 && g.kw == 3 && g.stride == 1 && g.padding >= 0 && g.padding <= 2 && g.out_h() >= 1 &&
         g.out_w() >= 1 && g.n >= 1 && g.h >= 1 && g.w >= 1 && g.c >= 1 && g.out_c >= 1 && g.c % kLanes == 0 &&
         g.out_c % kLanes == 0;
}

std::unique_ptr<LayerScratch> make_scratch() { return std::make_unique<Scratch>(); }

void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  transform_filters(weight, g.out_c, g.c, s.filters);
  convolve(x, Problem{g.n, g.c, g.h, g.w, g.out_c, g.padding}, bias, y, s);
}

void backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  // dx[c] = Σ_o dy[o] ⋆ turn(w[o][c]): filters [c][o], each turned by 180 degrees.
  s.turned.resize(static_cast<std::size_t>(g.c) * g.out_c * 9);
  for (int o = 0; o < g.out_c; ++o)
    for (int c = 0; c < g.c; ++c)
      for (int q = 0; q < 9; ++q)
        s.turned[(static_cast<std::size_t>(c) * g.out_c + o) * 9 + q] = weight[(static_cast<std::size_t>(o) * g.c + c) * 9 + 8 - q];
  transform_filters(s.turned.data(), g.c, g.out_c, s.filters);
  convolve(dy, Problem{g.n, g.out_c, g.out_h(), g.out_w(), g.c, 2 - g.padding}, nullptr, dx, s);
}

void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  const Problem p{g.n, g.c, g.h, g.w, g.out_c, g.padding};
  const int chunk = p.chunk();
  s.sums.resize(std::size_t{kElements} * p.out * p.in);
  for (int first = 0; first < p.n; first += chunk) {
    const int count = std::min(chunk, p.n - first);
    const int chunk_tiles = count * p.tiles();
    transform_tiles(x, p, first, count, s);
    transform_gradient_tiles(dy, p, first, count, s);
    for (int e = 0; e < kElements; ++e)  // [tiles x out]ᵀ x [tiles x in], summed over the chunks in order
      cpu::sgemm(true, false, p.out, p.in, chunk_tiles, 1.0f,
                 &s.gradients[static_cast<std::size_t>(e) * chunk_tiles * p.out], p.out,
                 &s.tiles[static_cast<std::size_t>(e) * chunk_tiles * p.in], p.in, first == 0 ? 0.0f : 1.0f,
                 &s.sums[static_cast<std::size_t>(e) * p.out * p.in], p.in);
  }
  transform_back_filters(s.sums, p.out, p.in, dweight, accumulate);
  bias_gradient(dy, g, dbias, accumulate);
}

}  // namespace mpiddp::cpu::own_winograd
