#pragma once
// The vector kernels of the thin convolutions (thin_conv.hpp), one set per x86
// ISA (x86_thin_conv_kernels.cpp; none elsewhere: no_x86_thin_conv_kernels.cpp).
// Every set gives the same bits as every other: each output of the forward pass
// is one chain of FMAs in row order starting from the bias, and each weight
// gradient is kThinLanes chains of FMAs (lane j takes positions j, j + 16, ...),
// which AVX-512 runs as one vector and AVX2 as two halves, one after the other.
#include <cstddef>
#include <vector>

namespace mpiddp::cpu {

constexpr int kThinLanes = 16;
// The weight gradient's columns have a multiple of this many rows (zero rows pad them).
constexpr int kThinRowBlock = 5;

// One sample's im2col columns: `rows` rows of `stride` floats (stride a multiple
// of kThinLanes, zeros from `positions` on).
struct ThinColumns {
  const float* data;
  std::size_t stride;
  int rows, positions;
};

struct ThinKernels {
  const char* isa;  // "AVX-512", "AVX2+FMA"
  // y[o][p] = bias[o] + sum over rows r, in order, of w[o][r] * cols[r][p], for
  // out_c channels of `positions` floats each (w: out_c x cols.rows).
  void (*forward)(const ThinColumns& cols, const float* w, const float* bias, float* y, int out_c);
  // acc[o][r][lane] += dy[o][p] * cols[r][p] for the lane's positions p, for
  // out_c channels of dy (each `positions` floats) and every row of cols
  // (cols.rows a multiple of kThinRowBlock; acc: out_c x cols.rows x kThinLanes).
  void (*weight_grad)(const ThinColumns& cols, const float* dy, int out_c, float* acc);
};

// The sets this CPU can run, the widest ISA first; empty without AVX2 and FMA.
std::vector<ThinKernels> thin_kernel_sets();

}  // namespace mpiddp::cpu
