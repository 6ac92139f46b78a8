#pragma once
// The CUDA implementations of the op families (one file each), for CudaDevice.
#include <memory>

#include "cuda_device.hpp"
#include "mpiddp/device/ops/dense_ops.hpp"
#include "mpiddp/device/ops/loss_ops.hpp"
#include "mpiddp/device/ops/pointwise_ops.hpp"
#include "mpiddp/device/ops/update_ops.hpp"

namespace mpiddp::cuda {

std::unique_ptr<DenseOps> make_dense_ops(CudaDevice& device);
std::unique_ptr<PointwiseOps> make_pointwise_ops(CudaDevice& device);
std::unique_ptr<LossOps> make_loss_ops(CudaDevice& device);
std::unique_ptr<UpdateOps> make_update_ops(CudaDevice& device);

}  // namespace mpiddp::cuda
