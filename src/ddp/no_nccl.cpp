// Built without NCCL (MPIDDP_ENABLE_NCCL=OFF, or without CUDA at all):
// dist.backend = mpi only.
#include "mpiddp/common/error.hpp"
#include "mpiddp/ddp/nccl.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {

bool built_with_nccl() { return false; }

std::unique_ptr<GradientTransport> make_nccl_transport(Communicator&, Device&, bool, double) {
  if (!built_with_cuda())
    throw InputError("dist.backend = nccl: this mpiddp was built without CUDA (MPIDDP_ENABLE_CUDA=OFF)");
  throw InputError("dist.backend = nccl: this mpiddp was built without NCCL (MPIDDP_ENABLE_NCCL=OFF); "
                   "use dist.backend = mpi");
}

}  // namespace mpiddp
