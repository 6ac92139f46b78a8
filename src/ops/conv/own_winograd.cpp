#include "own_winograd.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv_columns.hpp"
#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/cpu_gemm.hpp"

namespace mpiddp::cpu::own_winograd {
namespace {

// Transformed tiles and their products per chunk of samples, in floats (2 MiB):
// they stay in the L2 cache between the transforms and the products.
constexpr std::size_t kChunkFloats = std::size_t{512} << 10;

constexpr int kLanes = 8;  // channels per block: one AVX2 vector, a Lanes8

// The distance between two elements' matrices (T² of them, each `floats` long) in
// the scratch arrays: whole 64-byte lines, an odd number of them. The transforms
// write (and read) all T² matrices at once, and at a distance of a multiple of
// 4 KiB those streams would all fall into one set of the L1 cache (36 into its
// 8 or 12 ways); an odd count of lines spreads them over the sets.
std::size_t spacing(std::size_t floats) {
  const std::size_t lines = (floats + 15) / 16;
  return (lines | 1) * 16;
}

#define MPIDDP_INLINE inline __attribute__((always_inline))

// The one-dimensional transforms of F(M, 3), M = 2 or 4 outputs from T = M + 2
// inputs; each 2-D transform applies one along the first index, then along the
// second. V is a float (the filters) or a Lanes8 (8 channels of a tile). Every
// sum is written in the order it is added: no FMA contraction (CMakeLists), so
// each instruction set gives the same bits.

// Bᵀ d. F(2): Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]. F(4): Bᵀ = [4 0 -5 0 1 0;
// 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1].
template <int M, class V>
MPIDDP_INLINE void input_1d(const V* d, V* r) {
  if constexpr (M == 2) {
    r[0] = d[0] - d[2];
    r[1] = d[1] + d[2];
    r[2] = d[2] - d[1];
    r[3] = d[1] - d[3];
  } else {
    const V sum34 = d[3] + d[4], diff43 = d[4] - d[3], diff42 = d[4] - d[2], diff31 = d[3] - d[1];
    r[0] = (d[0] * 4.0f - d[2] * 5.0f) + d[4];
    r[1] = sum34 - (d[1] + d[2]) * 4.0f;
    r[2] = diff43 + (d[1] - d[2]) * 4.0f;
    r[3] = diff42 + diff31 * 2.0f;
    r[4] = diff42 - diff31 * 2.0f;
    r[5] = (d[1] * 4.0f - d[3] * 5.0f) + d[5];
  }
}

// Aᵀ m. F(2): Aᵀ = [1 1 1 0; 0 1 -1 -1]. F(4): Aᵀ = [1 1 1 1 1 0; 0 1 -1 2 -2 0;
// 0 1 1 4 4 0; 0 1 -1 8 -8 1].
template <int M, class V>
MPIDDP_INLINE void output_1d(const V* m, V* o) {
  if constexpr (M == 2) {
    o[0] = m[0] + m[1] + m[2];
    o[1] = m[1] - m[2] - m[3];
  } else {
    const V sum12 = m[1] + m[2], diff12 = m[1] - m[2], sum34 = m[3] + m[4], diff34 = m[3] - m[4];
    o[0] = (m[0] + sum12) + sum34;
    o[1] = diff12 + diff34 * 2.0f;
    o[2] = sum12 + sum34 * 4.0f;
    o[3] = (diff12 + diff34 * 8.0f) + m[5];
  }
}

// A y (Aᵀ's transpose) for a column of M output gradients.
template <int M, class V>
MPIDDP_INLINE void gradient_1d(const V* y, V* z) {
  if constexpr (M == 2) {
    z[0] = y[0];
    z[1] = y[0] + y[1];
    z[2] = y[0] - y[1];
    z[3] = -y[1];
  } else {
    const V even = y[0] + y[2], odd = y[1] + y[3], even4 = y[0] + y[2] * 4.0f, odd4 = y[1] * 2.0f + y[3] * 8.0f;
    z[0] = y[0];
    z[1] = even + odd;
    z[2] = even - odd;
    z[3] = even4 + odd4;
    z[4] = even4 - odd4;
    z[5] = y[3];
  }
}

// G g. F(2): G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]. F(4): G = [¼ 0 0; -⅙ -⅙ -⅙; -⅙ ⅙ -⅙;
// 1/24 1/12 ⅙; 1/24 -1/12 ⅙; 0 0 1].
template <int M>
MPIDDP_INLINE void filter_1d(const float* g, float* r) {
  if constexpr (M == 2) {
    r[0] = g[0];
    r[1] = 0.5f * (g[0] + g[1] + g[2]);
    r[2] = 0.5f * (g[0] - g[1] + g[2]);
    r[3] = g[2];
  } else {
    r[0] = 0.25f * g[0];
    r[1] = (g[0] + g[1] + g[2]) * (-1.0f / 6);
    r[2] = (g[0] - g[1] + g[2]) * (-1.0f / 6);
    r[3] = (g[0] + 2.0f * g[1] + 4.0f * g[2]) * (1.0f / 24);
    r[4] = (g[0] - 2.0f * g[1] + 4.0f * g[2]) * (1.0f / 24);
    r[5] = g[2];
  }
}

// Gᵀ w: the filter gradient's way back from the transformed domain.
template <int M>
MPIDDP_INLINE void filter_back_1d(const float* w, float* r) {
  if constexpr (M == 2) {
    r[0] = w[0] + 0.5f * w[1] + 0.5f * w[2];
    r[1] = 0.5f * w[1] - 0.5f * w[2];
    r[2] = 0.5f * w[1] + 0.5f * w[2] + w[3];
  } else {
    const float sum12 = w[1] + w[2], diff12 = w[1] - w[2], sum34 = w[3] + w[4], diff34 = w[3] - w[4];
    r[0] = (0.25f * w[0] - sum12 * (1.0f / 6)) + sum34 * (1.0f / 24);
    r[1] = diff34 * (1.0f / 12) - diff12 * (1.0f / 6);
    r[2] = (sum34 - sum12) * (1.0f / 6) + w[5];
  }
}

// (By reference: a Lanes8 passed or returned by value would change the ABI
// between the clones' instruction sets.)
MPIDDP_INLINE void load(Lanes8& v, const float* from) { std::memcpy(&v, from, sizeof v); }
MPIDDP_INLINE void store(float* to, const Lanes8& v) { std::memcpy(to, &v, sizeof v); }

struct Scratch final : LayerScratch {
  std::vector<float> filters;   // transformed: [T²][out][in]
  std::vector<float> turned;    // the input gradient's filters, [in][out][3][3]
  std::vector<float> tiles;     // transformed input tiles: [T²][chunk tiles][in]
  std::vector<float> products;  // their products: [T²][chunk tiles][out]
  std::vector<float> plane;     // one padded plane of a block of 8 channels: [rows][cols][8]
  std::vector<float> gradients; // transformed dy tiles (weight gradient): [T²][chunk tiles][out]
  std::vector<float> sums;      // the weight gradient in the transformed domain: [T²][out][in]
};

// One convolution as F(M x M, 3 x 3) runs it: `in` planes of h x w, padded by
// `pad`, into `out` planes of (h + 2 pad - 2) x (w + 2 pad - 2), in tiles of M x M
// outputs from (M + 2) x (M + 2) inputs.
template <int M>
struct Problem {
  static constexpr int kSide = M + 2, kElements = kSide * kSide;
  int n, in, h, w, out, pad;
  int out_h() const { return h + 2 * pad - 2; }
  int out_w() const { return w + 2 * pad - 2; }
  int tiles_h() const { return (out_h() + M - 1) / M; }
  int tiles_w() const { return (out_w() + M - 1) / M; }
  int tiles() const { return tiles_h() * tiles_w(); }
  int chunk() const {
    const std::size_t per_sample = std::size_t{kElements} * (in + out) * tiles();
    return static_cast<int>(std::clamp<std::size_t>(kChunkFloats / per_sample, 1, static_cast<std::size_t>(n)));
  }
};

// G g Gᵀ for each filter g (3 x 3) of `weight` [out][in][3][3]: filters [T²][out][in].
// Sixteen filters at a time, so each element's values go out as one cache line.
template <int M>
void transform_filters(const float* weight, int out, int in, std::vector<float>& filters) {
  constexpr int T = M + 2, kBlock = 16;
  const std::size_t count = static_cast<std::size_t>(out) * in, element = spacing(count);
  filters.resize(T * T * element);
  for (std::size_t first = 0; first < count; first += kBlock) {
    const int block = static_cast<int>(std::min<std::size_t>(kBlock, count - first));
    float v[T * T][kBlock];
    for (int k = 0; k < block; ++k) {
      const float* g = weight + (first + k) * 9;
      float t[T][3];  // G g
      for (int b = 0; b < 3; ++b) {
        const float column[3] = {g[b], g[3 + b], g[6 + b]};
        float r[T];
        filter_1d<M>(column, r);
        for (int a = 0; a < T; ++a) t[a][b] = r[a];
      }
      for (int a = 0; a < T; ++a) {  // (G g) Gᵀ
        float r[T];
        filter_1d<M>(t[a], r);
        for (int b = 0; b < T; ++b) v[a * T + b][k] = r[b];
      }
    }
    for (int e = 0; e < T * T; ++e) std::memcpy(&filters[e * element + first], v[e], block * sizeof(float));
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

// Bᵀ d B for every tile d of one interleaved plane (8 channels, tiles at stride M):
// u + e * element + tile * stride, e = the element (a, b) as a T + b.
template <int M>
MPIDDP_VECTOR_CLONES void transform_plane(const float* plane, int tiles_h, int tiles_w, int padded_w,
                                          std::size_t element, std::size_t stride, float* u) {
  constexpr int T = M + 2;
  for (int ti = 0; ti < tiles_h; ++ti)
    for (int tj = 0; tj < tiles_w; ++tj) {
      const float* d = plane + (static_cast<std::size_t>(M * ti) * padded_w + M * tj) * kLanes;
      Lanes8 t[T][T];  // Bᵀ d, [a][b]
      for (int b = 0; b < T; ++b) {
        Lanes8 column[T], r[T];
        for (int a = 0; a < T; ++a) load(column[a], d + (static_cast<std::size_t>(a) * padded_w + b) * kLanes);
        input_1d<M>(column, r);
        for (int a = 0; a < T; ++a) t[a][b] = r[a];
      }
      float* to = u + (static_cast<std::size_t>(ti) * tiles_w + tj) * stride;
      for (int a = 0; a < T; ++a) {  // (Bᵀ d) B
        Lanes8 r[T];
        input_1d<M>(t[a], r);
        for (int b = 0; b < T; ++b) store(to + (a * T + b) * element, r[b]);
      }
    }
}

// Bᵀ d B for every tile of samples [first, first + count) of x: tiles [T²][count * tiles][in].
template <int M>
void transform_tiles(const float* x, const Problem<M>& p, int first, int count, Scratch& s) {
  const int th = p.tiles_h(), tw = p.tiles_w(), padded_h = M * th + 2, padded_w = M * tw + 2;
  const std::size_t chunk_tiles = static_cast<std::size_t>(count) * p.tiles(), element = spacing(chunk_tiles * p.in);
  s.tiles.resize(Problem<M>::kElements * element);
  s.plane.assign(static_cast<std::size_t>(padded_h) * padded_w * kLanes, 0.0f);
  const int rows_in = std::min(p.h, padded_h - p.pad), cols_in = std::min(p.w, padded_w - p.pad);
  for (int k = 0; k < count; ++k)
    for (int block = 0; block < p.in; block += kLanes) {
      // (The border stays zero: only the interior is written.)
      interleave(x + (static_cast<std::size_t>(first + k) * p.in + block) * p.h * p.w, p.h, p.w, rows_in, cols_in,
                 p.pad, padded_w, s.plane);
      transform_plane<M>(s.plane.data(), th, tw, padded_w, element, p.in,
                         &s.tiles[static_cast<std::size_t>(k) * p.tiles() * p.in + block]);
    }
}

// Aᵀ m A + bias for every tile's products m (8 output channels of one sample's
// tiles: m + e * element + tile * stride), into the 8 planes at y.
template <int M>
MPIDDP_VECTOR_CLONES void transform_back_tiles(const float* m, std::size_t element, std::size_t stride,
                                               const float* bias, int tiles_h, int tiles_w, int oh, int ow,
                                               float* y) {
  constexpr int T = M + 2;
  const std::size_t plane = static_cast<std::size_t>(oh) * ow;
  Lanes8 bl{};
  if (bias) load(bl, bias);
  for (int ti = 0; ti < tiles_h; ++ti)
    for (int tj = 0; tj < tiles_w; ++tj) {
      const float* from = m + (static_cast<std::size_t>(ti) * tiles_w + tj) * stride;
      Lanes8 t[M][T];  // Aᵀ m
      for (int b = 0; b < T; ++b) {
        Lanes8 column[T], r[M];
        for (int a = 0; a < T; ++a) load(column[a], from + (a * T + b) * element);
        output_1d<M>(column, r);
        for (int a = 0; a < M; ++a) t[a][b] = r[a];
      }
      const int rows = std::min(M, oh - M * ti), cols = std::min(M, ow - M * tj);
      float* to = y + static_cast<std::size_t>(M * ti) * ow + M * tj;
      for (int a = 0; a < rows; ++a) {  // (Aᵀ m) A + bias
        Lanes8 r[M];
        output_1d<M>(t[a], r);
        float out[M][kLanes];
        for (int b = 0; b < M; ++b) store(out[b], r[b] + bl);
        for (int l = 0; l < kLanes; ++l)
          for (int b = 0; b < cols; ++b) to[l * plane + static_cast<std::size_t>(a) * ow + b] = out[b][l];
      }
    }
}

// Aᵀ m A for every tile's products, plus the bias: samples [first, first + count) of y.
template <int M>
void transform_back(const Problem<M>& p, const float* bias, int first, int count, float* y, const Scratch& s) {
  const int oh = p.out_h(), ow = p.out_w();
  const std::size_t chunk_tiles = static_cast<std::size_t>(count) * p.tiles(), element = spacing(chunk_tiles * p.out);
  const std::size_t plane = static_cast<std::size_t>(oh) * ow;
  for (int k = 0; k < count; ++k)
    for (int block = 0; block < p.out; block += kLanes)
      transform_back_tiles<M>(&s.products[static_cast<std::size_t>(k) * p.tiles() * p.out + block], element, p.out,
                              bias ? bias + block : nullptr, p.tiles_h(), p.tiles_w(), oh, ow,
                              y + (static_cast<std::size_t>(first + k) * p.out + block) * plane);
}

// y = x convolved with the transformed filters, chunk by chunk.
template <int M>
void convolve(const float* x, const Problem<M>& p, const float* bias, float* y, Scratch& s) {
  constexpr int E = Problem<M>::kElements;
  const int chunk = p.chunk();
  for (int first = 0; first < p.n; first += chunk) {
    const int count = std::min(chunk, p.n - first);
    const int chunk_tiles = count * p.tiles();
    const std::size_t tiles = spacing(static_cast<std::size_t>(chunk_tiles) * p.in),
                      filters = spacing(static_cast<std::size_t>(p.out) * p.in),
                      products = spacing(static_cast<std::size_t>(chunk_tiles) * p.out);
    transform_tiles(x, p, first, count, s);
    s.products.resize(E * products);
    for (int e = 0; e < E; ++e)  // [tiles x in] x [out x in]ᵀ
      cpu::sgemm(false, true, chunk_tiles, p.out, p.in, 1.0f, &s.tiles[e * tiles], p.in, &s.filters[e * filters], p.in,
                 0.0f, &s.products[e * products], p.out);
    transform_back(p, bias, first, count, y, s);
  }
}

// A dY Aᵀ for every M x M tile dY of one interleaved plane of dy (8 channels; zero
// past the plane's edge): z + e * element + tile * stride.
template <int M>
MPIDDP_VECTOR_CLONES void transform_gradient_plane(const float* plane, int tiles_h, int tiles_w, int padded_w,
                                                   std::size_t element, std::size_t stride, float* z) {
  constexpr int T = M + 2;
  for (int ti = 0; ti < tiles_h; ++ti)
    for (int tj = 0; tj < tiles_w; ++tj) {
      const float* d = plane + (static_cast<std::size_t>(M * ti) * padded_w + M * tj) * kLanes;
      Lanes8 t[T][M];  // A dY
      for (int b = 0; b < M; ++b) {
        Lanes8 column[M], r[T];
        for (int a = 0; a < M; ++a) load(column[a], d + (static_cast<std::size_t>(a) * padded_w + b) * kLanes);
        gradient_1d<M>(column, r);
        for (int a = 0; a < T; ++a) t[a][b] = r[a];
      }
      float* to = z + (static_cast<std::size_t>(ti) * tiles_w + tj) * stride;
      for (int a = 0; a < T; ++a) {  // (A dY) Aᵀ
        Lanes8 r[T];
        gradient_1d<M>(t[a], r);
        for (int b = 0; b < T; ++b) store(to + (a * T + b) * element, r[b]);
      }
    }
}

// A dY Aᵀ for every tile of samples [first, first + count) of dy: gradients [T²][count * tiles][out].
template <int M>
void transform_gradient_tiles(const float* dy, const Problem<M>& p, int first, int count, Scratch& s) {
  const int th = p.tiles_h(), tw = p.tiles_w(), oh = p.out_h(), ow = p.out_w(), padded_w = M * tw;
  const std::size_t chunk_tiles = static_cast<std::size_t>(count) * p.tiles(), element = spacing(chunk_tiles * p.out);
  s.gradients.resize(Problem<M>::kElements * element);
  s.plane.assign(static_cast<std::size_t>(M * th) * padded_w * kLanes, 0.0f);
  for (int k = 0; k < count; ++k)
    for (int block = 0; block < p.out; block += kLanes) {
      interleave(dy + (static_cast<std::size_t>(first + k) * p.out + block) * oh * ow, oh, ow, oh, ow, 0, padded_w,
                 s.plane);
      transform_gradient_plane<M>(s.plane.data(), th, tw, padded_w, element, p.out,
                                  &s.gradients[static_cast<std::size_t>(k) * p.tiles() * p.out + block]);
    }
}

// Gᵀ w G for filter k of a block (w[element][k]), into g (3 x 3; added where `accumulate`).
template <int M, int kBlock>
void back_filter(const float (&w)[(M + 2) * (M + 2)][kBlock], int k, float* g, bool accumulate) {
  constexpr int T = M + 2;
  float t[3][T];  // Gᵀ w
  for (int b = 0; b < T; ++b) {
    float column[T], r[3];
    for (int a = 0; a < T; ++a) column[a] = w[a * T + b][k];
    filter_back_1d<M>(column, r);
    for (int a = 0; a < 3; ++a) t[a][b] = r[a];
  }
  for (int a = 0; a < 3; ++a) {  // (Gᵀ w) G
    float v[3];
    filter_back_1d<M>(t[a], v);
    for (int b = 0; b < 3; ++b) g[a * 3 + b] = (accumulate ? g[a * 3 + b] : 0.0f) + v[b];
  }
}

// Gᵀ w G for each transformed filter gradient w (T x T) of sums [T²][out][in],
// into dweight [out][in][3][3] (added where `accumulate`), sixteen filters at a
// time, each element's values read as one cache line.
template <int M>
void transform_back_filters(const std::vector<float>& sums, int out, int in, float* dweight, bool accumulate) {
  constexpr int T = M + 2, kBlock = 16;
  const std::size_t count = static_cast<std::size_t>(out) * in, element = spacing(count);
  for (std::size_t first = 0; first < count; first += kBlock) {
    const int block = static_cast<int>(std::min<std::size_t>(kBlock, count - first));
    float w[T * T][kBlock];
    for (int e = 0; e < T * T; ++e) std::memcpy(w[e], &sums[e * element + first], block * sizeof(float));
    for (int k = 0; k < block; ++k) back_filter<M>(w, k, dweight + (first + k) * 9, accumulate);
  }
}

template <int M>
void forward_as(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
                Scratch& s) {
  transform_filters<M>(weight, g.out_c, g.c, s.filters);
  convolve(x, Problem<M>{g.n, g.c, g.h, g.w, g.out_c, g.padding}, bias, y, s);
}

template <int M>
void backward_input_as(const float* dy, const float* weight, float* dx, const ConvGeometry& g, Scratch& s) {
  // dx[c] = Σ_o dy[o] ⋆ turn(w[o][c]): filters [c][o], each turned by 180 degrees.
  s.turned.resize(static_cast<std::size_t>(g.c) * g.out_c * 9);
  for (int o = 0; o < g.out_c; ++o)
    for (int c = 0; c < g.c; ++c)
      for (int q = 0; q < 9; ++q)
        s.turned[(static_cast<std::size_t>(c) * g.out_c + o) * 9 + q] = weight[(static_cast<std::size_t>(o) * g.c + c) * 9 + 8 - q];
  transform_filters<M>(s.turned.data(), g.c, g.out_c, s.filters);
  convolve(dy, Problem<M>{g.n, g.out_c, g.out_h(), g.out_w(), g.c, 2 - g.padding}, nullptr, dx, s);
}

template <int M>
void backward_params_as(const float* x, const float* dy, float* dweight, const ConvGeometry& g, bool accumulate,
                        Scratch& s) {
  constexpr int E = Problem<M>::kElements;
  const Problem<M> p{g.n, g.c, g.h, g.w, g.out_c, g.padding};
  const int chunk = p.chunk();
  const std::size_t sums = spacing(static_cast<std::size_t>(p.out) * p.in);
  s.sums.resize(E * sums);
  for (int first = 0; first < p.n; first += chunk) {
    const int count = std::min(chunk, p.n - first);
    const int chunk_tiles = count * p.tiles();
    const std::size_t tiles = spacing(static_cast<std::size_t>(chunk_tiles) * p.in),
                      gradients = spacing(static_cast<std::size_t>(chunk_tiles) * p.out);
    transform_tiles(x, p, first, count, s);
    transform_gradient_tiles(dy, p, first, count, s);
    for (int e = 0; e < E; ++e)  // [tiles x out]ᵀ x [tiles x in], summed over the chunks in order
      cpu::sgemm(true, false, p.out, p.in, chunk_tiles, 1.0f, &s.gradients[e * gradients], p.out, &s.tiles[e * tiles],
                 p.in, first == 0 ? 0.0f : 1.0f, &s.sums[e * sums], p.in);
  }
  transform_back_filters<M>(s.sums, p.out, p.in, dweight, accumulate);
}

}  // namespace

bool supports(const ConvGeometry& g) {
  return g.kh == 3 && g.kw == 3 && g.stride == 1 && g.padding >= 0 && g.padding <= 2 && g.out_h() >= 1 &&
         g.out_w() >= 1 && g.n >= 1 && g.h >= 1 && g.w >= 1 && g.c >= 1 && g.out_c >= 1 && g.c % kLanes == 0 &&
         g.out_c % kLanes == 0;
}

std::unique_ptr<LayerScratch> make_scratch() { return std::make_unique<Scratch>(); }

void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g, Tile tile,
             LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  if (tile == Tile::f4) return forward_as<4>(x, weight, bias, y, g, s);
  forward_as<2>(x, weight, bias, y, g, s);
}

void backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g, Tile tile,
                    LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  if (tile == Tile::f4) return backward_input_as<4>(dy, weight, dx, g, s);
  backward_input_as<2>(dy, weight, dx, g, s);
}

void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, Tile tile, LayerScratch& scratch) {
  auto& s = static_cast<Scratch&>(scratch);
  if (tile == Tile::f4)
    backward_params_as<4>(x, dy, dweight, g, accumulate, s);
  else
    backward_params_as<2>(x, dy, dweight, g, accumulate, s);
  bias_gradient(dy, g, dbias, accumulate);
}

}  // namespace mpiddp::cpu::own_winograd
