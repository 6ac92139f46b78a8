// Embeddings on the GPU: embedding_kernels.cu's launchers on the device's
// compute stream.
#include "cuda/cuda_device.hpp"
#include "embedding_kernels.hpp"
#include "embedding_ops.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cuda {
namespace {

class CudaEmbeddingOps final : public EmbeddingOps {
 public:
  explicit CudaEmbeddingOps(CudaDevice& device) : device_(device) {}
  void gather(const float* ids, const float* table, float* y, const EmbeddingGeometry& g) override {
    embedding_gather(ids, table, y, g, stream());
  }
  void scatter_add(const float* ids, const float* dy, float* dtable, bool accumulate,
                   const EmbeddingGeometry& g) override {
    embedding_scatter_add(ids, dy, dtable, accumulate, g, sort_scratch_, stream());
  }
  void add_positions(const float* x, const float* table, float* y, const PositionGeometry& g) override {
    embedding_add_positions(x, table, y, g, stream());
  }
  void position_grad(const float* dy, float* dtable, bool accumulate, const PositionGeometry& g) override {
    embedding_position_grad(dy, dtable, accumulate, g, stream());
  }

 private:
  cudaStream_t stream() const { return device_.compute_stream(); }
  CudaDevice& device_;
  TokenSortScratch sort_scratch_;
};

std::unique_ptr<EmbeddingOps> make_cuda_embedding_ops(Device& device) {
  return std::make_unique<CudaEmbeddingOps>(as_cuda(device));
}
const bool registered = register_ops<EmbeddingOps>(DeviceKind::cuda, make_cuda_embedding_ops);

}  // namespace
}  // namespace mpiddp::cuda
