#pragma once
// The CPU implementations of the op families (one file each), for CpuDevice.
#include <memory>

#include "mpiddp/device/ops/conv_ops.hpp"
#include "mpiddp/device/ops/dense_ops.hpp"
#include "mpiddp/device/ops/loss_ops.hpp"
#include "mpiddp/device/ops/norm_ops.hpp"
#include "mpiddp/device/ops/pointwise_ops.hpp"
#include "mpiddp/device/ops/pool_ops.hpp"
#include "mpiddp/device/ops/update_ops.hpp"

namespace mpiddp::cpu {

std::unique_ptr<DenseOps> make_dense_ops();
std::unique_ptr<PointwiseOps> make_pointwise_ops();
std::unique_ptr<LossOps> make_loss_ops();
std::unique_ptr<UpdateOps> make_update_ops();
std::unique_ptr<ConvOps> make_conv_ops();
std::unique_ptr<PoolOps> make_pool_ops();
std::unique_ptr<NormOps> make_norm_ops();

// True when no float of data is NaN or Inf (shared by the loss and update files).
bool all_finite(const float* data, std::size_t n);

}  // namespace mpiddp::cpu
