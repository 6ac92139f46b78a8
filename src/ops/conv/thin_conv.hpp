#pragma once
// Convolutions with few input channels (a network's first layer, on grey or
// colour images) by mpiddp's own kernels, forward and weight gradient: the
// libraries run them far below the FMA peak (oneDNN's AVX2 weight gradient of a
// 1-channel 3x3 convolution at about 6 GFLOP/s), because their products are
// shaped for many channels. Here each sample's im2col columns (channels x 3 x 3
// rows, about 28 KiB for a 28 x 28 image) stay in the L1 cache while register
// tiles of output channels run over them (thin_conv_kernels.hpp). The CPU conv
// ops use them for a layer whose kernels are `own` (train.cpu_kernels); its input
// gradient, when training needs one, runs on the process's library.
#include <memory>

#include "conv_ops.hpp"
#include "thin_conv_kernels.hpp"

namespace mpiddp::cpu::thin_conv {

// Whether this CPU runs the kernels (x86-64 with AVX2 and FMA), and which set.
bool available();
const char* isa();

// The convolutions the kernels take: at most kMaxRows rows of columns (input
// channels x kernel height x kernel width). Their partial sums take 16 floats per
// weight, so a wide layer would need 16 times its weights in scratch; and where
// there are many rows the libraries' products run near the peak anyway.
constexpr int kMaxRows = 64;
bool supports(const ConvGeometry& g);
// Where `auto` gives a convolution these kernels: at most kSuitedRows rows
// (measured faster than oneDNN on AVX-512 and AVX2), one thread per rank.
constexpr int kSuitedRows = 27;
bool suits(const ConvGeometry& g, int threads);

// The layer's scratch, running kernel set `set` (the widest this CPU has unless
// a test asks for another).
std::unique_ptr<LayerScratch> make_scratch(const ThinKernels* set = nullptr);
// The kernels run one sample at a time: after_sample (if given) is called with
// each sample's output once it is written, in order.
void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             LayerScratch& scratch, const ConvOps::SampleWritten* after_sample = nullptr);
// dweight (+)= and dbias (+)= (overwritten unless accumulate).
void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, LayerScratch& scratch);
// The same with sample i's dy from dy_of(i), asked for in order.
void backward_params(const float* x, const ConvOps::SampleGradient& dy_of, float* dweight, float* dbias,
                     const ConvGeometry& g, bool accumulate, LayerScratch& scratch);

}  // namespace mpiddp::cpu::thin_conv
