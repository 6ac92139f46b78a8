// A build without oneDNN: the CPU conv ops never choose these (cpu_kernels cannot
// resolve to onednn, and winograd_convolutions() is false without oneDNN:
// cpu_gemm.cpp), so reaching one is a bug.
#include "onednn_conv.hpp"

#include "mpiddp/common/error.hpp"

namespace mpiddp::cpu::onednn_conv {
namespace {
[[noreturn]] void missing() { throw RuntimeError("internal: oneDNN convolution called in a build without oneDNN"); }
}  // namespace

bool winograd_available(const ConvGeometry&, bool) { return false; }
bool winograd_runs() { return false; }
std::unique_ptr<LayerScratch> make_scratch() { missing(); }
void forget_inputs(LayerScratch&) {}
void forward(const float*, const float*, const float*, float*, const ConvGeometry&, Algorithm, LayerScratch&) {
  missing();
}
void backward_params(const float*, const float*, float*, float*, const ConvGeometry&, bool, Algorithm,
                     LayerScratch&) {
  missing();
}
void backward_input(const float*, const float*, float*, const ConvGeometry&, Algorithm, LayerScratch&) { missing(); }

}  // namespace mpiddp::cpu::onednn_conv
