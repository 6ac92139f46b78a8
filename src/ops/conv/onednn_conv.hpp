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

std::unique_ptr<LayerScratch> make_scratch();
void forward(const float* x, const float* weight, const float* bias, float* y, const ConvGeometry& g,
             LayerScratch& scratch);
void backward_params(const float* x, const float* dy, float* dweight, float* dbias, const ConvGeometry& g,
                     bool accumulate, LayerScratch& scratch);
void backward_input(const float* dy, const float* weight, float* dx, const ConvGeometry& g, LayerScratch& scratch);

}  // namespace mpiddp::cpu::onednn_conv
