// Optimizer updates on the CPU: vectorised loops over elementwise.hpp's rules.
#include "update_ops.hpp"
#include "cpu_adamw.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "mpiddp/common/simd.hpp"

namespace mpiddp::cpu {
namespace {

MPIDDP_VECTOR_CLONES
void sgd_loop(float* __restrict params, const float* __restrict grads, float* __restrict buffer, std::size_t n,
              ew::SgdCoefficients k) {
  if (k.has_buffer) {
    for (std::size_t i = 0; i < n; ++i) ew::sgd_update(params[i], grads[i], buffer + i, k);
  } else {
    for (std::size_t i = 0; i < n; ++i) ew::sgd_update(params[i], grads[i], nullptr, k);
  }
}

class CpuUpdateOps final : public UpdateOps {
 public:
  void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                  const ew::SgdCoefficients& k) override {
    sgd_loop(params, grads, buffer, n, k);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const ew::AdamWCoefficients& k) override {
    cpu::adamw_update(params, grads, m, v, n, k);  // without subnormal stalls: cpu_adamw.cpp
  }
};

std::unique_ptr<UpdateOps> make_cpu_update_ops(Device&) { return std::make_unique<CpuUpdateOps>(); }
const bool registered = register_ops<UpdateOps>(DeviceKind::cpu, make_cpu_update_ops);

}  // namespace

}  // namespace mpiddp::cpu
