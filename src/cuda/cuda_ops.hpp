#pragma once
// The CUDA implementations of the op families (one file each), for CudaDevice.
#include <memory>
#include <string>

#include "cuda_device.hpp"
#include "mpiddp/device/ops/conv_ops.hpp"
#include "mpiddp/device/ops/dense_ops.hpp"
#include "mpiddp/device/ops/loss_ops.hpp"
#include "mpiddp/device/ops/norm_ops.hpp"
#include "mpiddp/device/ops/pointwise_ops.hpp"
#include "mpiddp/device/ops/pool_ops.hpp"
#include "mpiddp/device/ops/update_ops.hpp"

namespace mpiddp::cuda {

std::unique_ptr<DenseOps> make_dense_ops(CudaDevice& device);
std::unique_ptr<PointwiseOps> make_pointwise_ops(CudaDevice& device);
std::unique_ptr<LossOps> make_loss_ops(CudaDevice& device);
std::unique_ptr<UpdateOps> make_update_ops(CudaDevice& device);
std::unique_ptr<PoolOps> make_pool_ops(CudaDevice& device);
std::unique_ptr<NormOps> make_norm_ops(CudaDevice& device);
// cuDNN's convolutions (cudnn_conv_ops.cpp), or, in a build without cuDNN
// (no_cudnn.cpp), ConvOps that say so.
std::unique_ptr<ConvOps> make_conv_ops(CudaDevice& device);
// ConvOps whose every call throws InputError with `reason` (no usable cuDNN).
std::unique_ptr<ConvOps> make_unavailable_conv_ops(std::string reason);

}  // namespace mpiddp::cuda
