// A CPU other than x86-64: no thin-convolution kernels (the convolutions run on
// the libraries).
#include "thin_conv_kernels.hpp"

namespace mpiddp::cpu {

std::vector<ThinKernels> thin_kernel_sets() { return {}; }

}  // namespace mpiddp::cpu
