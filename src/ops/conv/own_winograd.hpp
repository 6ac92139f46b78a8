#pragma once
// 3 x 3, stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3) or
// F(4x4, 3x3), mpiddp's own, for CPUs where oneDNN has no Winograd kernels (oneDNN
// 2.6 has them for AVX-512 only). Each 4 x 4 (6 x 6) tile of the padded input and
// each 3 x 3 filter go into the transformed domain, where the convolution is 16
// (36) matrix products ([tiles x in channels] x [in x out channels], on the
// process's library: cpu::sgemm) with 2.25 (4) times fewer multiplications than
// the direct convolution's, and each tile's 2 x 2 (4 x 4) outputs come back. The transforms run over blocks of 8
// channels (one AVX2 vector; the channels must come in multiples of 8), the
// tiles in chunks of samples whose transformed tiles stay in the L2 cache; the
// chunk depends on the geometry only, so a run repeats its bits. Plain C++: every
// CPU runs it, with the same bits wherever the products give the same bits.
//
// All three products: the forward pass; the input gradient (dy convolved with
// the filters turned by 180 degrees, their channels swapped, padding 2 - p); the
// weight gradient (A dY Aᵀ of dy's 2 x 2 or 4 x 4 tiles times the input's tiles, summed
// over the tiles by one product per element, back through Gᵀ w G). The rounding
// differs from the direct convolution's by a few 1e-7 of the output's scale
// (F(2x2)) or about 1e-6 (F(4x4), whose transforms have larger coefficients).
#include <memory>

#include "conv_ops.hpp"

namespace mpiddp::cpu::own_winograd {

// The output tile: F(2x2, 3x3) (train.cpu_kernels own_winograd) or F(4x4, 3x3) (own_winograd4).
enum class Tile { f2, f4 };

// 3 x 3 kernels, stride 1, padding 0 to 2, input and output channels in multiples of 8.
bool supports(const ConvGeometry& g);

std::unique_ptr<LayerScratch> make_scratch();
void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             Tile tile, LayerScratch& scratch);
void backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g, Tile tile,
                    LayerScratch& scratch);
// dweight (+)= and dbias (+)= (overwritten unless accumulate).
void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, Tile tile, LayerScratch& scratch);

}  // namespace mpiddp::cpu::own_winograd
