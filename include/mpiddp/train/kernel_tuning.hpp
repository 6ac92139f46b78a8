#pragma once
// train.cpu_kernels = tune: at start-up each layer with matrix products of its
// own (Linear, Conv2d, at any depth) runs a training batch of its real shape
// forward and backward on each CPU library this build has (and on mpiddp's own
// kernels where the layer has them and the CPU runs them), and keeps the fastest
// (Layer::set_cpu_kernels). The timing decides only which library runs; each
// library's results repeat bit for bit, and the choice is printed, kept in every
// checkpoint and taken again on resume, so a resumed run stays bit-exact.
#include <string>
#include <vector>

#include "mpiddp/nn/sequential.hpp"

namespace mpiddp {

struct TunedLayer {
  std::string name, kind;
  CpuKernels chosen = CpuKernels::automatic;
  // The best of the timed repetitions; own_ms (winograd_ms, winograd_all_ms) < 0
  // (own_winograd_ms, own_winograd4_ms) where own kernels (Winograd convolutions, with Winograd's weight
  // gradient, mpiddp's own Winograd convolutions F(2x2), F(4x4)) were not timed.
  double onednn_ms = 0, openblas_ms = 0, own_ms = -1, winograd_ms = -1, winograd_all_ms = -1, own_winograd_ms = -1,
         own_winograd4_ms = -1;
};

// Times and sets each such layer's library for batches of `samples`, against the
// layer's default (own where own_kernels_suit, else oneDNN's direct kernels; auto
// would also take Winograd's where every rank has them), which another must beat by
// 10%. Winograd's kernels are a candidate only where `winograd_everywhere` (every
// rank's CPU runs them): a mixed job never times them.
// Nothing is timed without oneDNN in the build (one library) or off the CPU.
std::vector<TunedLayer> tune_cpu_kernels(Sequential& model, std::size_t samples, int threads,
                                         bool winograd_everywhere);

// The banner's lines for them.
std::string describe_tuning(const std::vector<TunedLayer>& tuned);

}  // namespace mpiddp
