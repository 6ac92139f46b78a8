// Dense products on the CPU: OpenBLAS (see device/cpu_blas.hpp).
#include "dense_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "mpiddp/device/cpu_blas.hpp"

namespace mpiddp::cpu {
namespace {

class CpuDenseOps final : public DenseOps {
 public:
  void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                      LayerScratch*) override {
    cpu::linear_forward(x, w, b, y, n, in, out);
  }
  void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                              bool accumulate, LayerScratch*) override {
    cpu::linear_backward_params(x, dy, dw, db, n, in, out, accumulate);
  }
  void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                             LayerScratch*) override {
    cpu::linear_backward_input(dy, w, dx, n, in, out);
  }
};

std::unique_ptr<DenseOps> make_cpu_dense_ops(Device&) { return std::make_unique<CpuDenseOps>(); }
const bool registered = register_ops<DenseOps>(DeviceKind::cpu, make_cpu_dense_ops);

}  // namespace

}  // namespace mpiddp::cpu
