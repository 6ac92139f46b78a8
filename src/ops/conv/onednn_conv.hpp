#pragma once
// Convolution through oneDNN's own primitives (forward, data and weight
// gradients), as PyTorch's CPU Conv2d runs it: each operand is reordered from
// NCHW into the blocked layout the primitive picks for this CPU and shape, and the
// result back. Used by the CPU conv ops when train.cpu_kernels resolves to onednn
// (cpu_conv_ops.cpp); no_onednn_conv.cpp stands in where oneDNN is not linked.
//
// Every operand the primitive reads or writes lives in memory oneDNN allocated
// (aligned as it wants), never in the caller's buffers: oneDNN promises the
// same bits run to run for the same shapes, threads and alignment, and the
// caller's alignment is malloc's. So a run stays bit-exact and resumable.
#include <memory>

#include "conv_ops.hpp"

namespace mpiddp::cpu::onednn_conv {

// direct: the sums PyTorch's CPU convolutions compute. winograd: oneDNN's
// Winograd kernels (F(4x4, 3x3), AVX-512 only) for the forward pass and the input
// gradient, about 1e-6 of the output's scale from direct (other bits); the weight
// gradient stays direct (Winograd's was slower on 14 x 14 images). winograd_all:
// the weight gradient on Winograd's kernels too (faster on planes of at most 8 x 8
// outputs). A geometry the Winograd kernels refuse for a product (some batch size)
// runs that product direct, the same every run.
enum class Algorithm { direct, winograd, winograd_all };

// Whether oneDNN runs Winograd convolutions for `g` on this CPU (a 3 x 3,
// stride-1 convolution, and oneDNN's AVX-512 kernels take it): the forward pass and
// the input gradient, and with `weight_gradient_too` the weight gradient as well;
// winograd_runs(): for some geometry (this CPU has them at all).
bool winograd_available(const ConvGeometry& g, bool weight_gradient_too = false);
bool winograd_runs();

std::unique_ptr<LayerScratch> make_scratch();
// The layer's input went through other kernels since: no operand copy kept of an
// earlier pass may stand for this step's (a buffer may hold new values at the same address).
void forget_inputs(LayerScratch& scratch);
void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             Algorithm algorithm, LayerScratch& scratch);
void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, Algorithm algorithm, LayerScratch& scratch);
void backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g, Algorithm algorithm,
                    LayerScratch& scratch);

}  // namespace mpiddp::cpu::onednn_conv
