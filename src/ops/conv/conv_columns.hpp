#pragma once
// im2col and its adjoint for one image (NCHW, groups = 1): the rows of the
// columns are (channel, kernel row, kernel column), the columns the output
// positions. Shared by the CPU's im2col products (cpu_conv_ops.cpp) and its
// thin-convolution kernels (thin_conv.cpp).
#include <cstddef>

#include "conv_ops.hpp"

namespace mpiddp::cpu {

// Writes the columns of image x at column offset `at` of a buffer whose rows
// are `stride` floats long (zeros where the kernel reaches into the padding).
void image_to_columns(const float* x, const ConvGeometry& g, float* cols, std::size_t stride, std::size_t at);

// Adds the columns back onto image dx (the adjoint of image_to_columns).
void columns_to_image(const float* cols, std::size_t stride, std::size_t at, const ConvGeometry& g, float* dx);

// dbias (+)= dy summed over samples and positions per output channel, in double, in
// memory order (overwritten unless accumulate). Also used by own_winograd.cpp.
void bias_gradient(const float* dy, const ConvGeometry& g, float* dbias, bool accumulate);

}  // namespace mpiddp::cpu
