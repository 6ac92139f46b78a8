#pragma once
// AdamW on the CPU: elementwise.hpp's update rule, the same bits, without paying
// for subnormal numbers (see cpu_adamw.cpp).
#include <cstddef>

#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {

// The update the optimizer runs: every element as ew::adamw_update computes it.
void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const ew::AdamWCoefficients& k);

// For tests and measurements: the rule as a plain loop of float operations (the
// reference), and every element through the software path that adamw_update
// takes where a subnormal could appear.
void adamw_update_plain(float* params, const float* grads, float* m, float* v, std::size_t n,
                        const ew::AdamWCoefficients& k);
void adamw_update_emulated(float* params, const float* grads, float* m, float* v, std::size_t n,
                           const ew::AdamWCoefficients& k);

}  // namespace mpiddp::cpu
