#pragma once
// The NCCL gradient transport (src/ddp/nccl_transport.cpp). It exists in every
// build; without NCCL it reports that plainly.
#include <memory>

#include "mpiddp/ddp/transport.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/dist/communicator.hpp"

namespace mpiddp {

// NCCL all-reduce of gradient buckets on a dedicated stream of `device` (a CUDA
// device): the unique id goes from rank 0 to all over `control` (MPI_Bcast).
// bf16: buckets travel as bf16 (already divided by the world size). A failure
// reported by NCCL, or a wait longer than timeout_s (> 0), aborts the NCCL
// communicator and the MPI job with a one-line message.
std::unique_ptr<GradientTransport> make_nccl_transport(Communicator& control, Device& device, bool bf16,
                                                       double timeout_s);

}  // namespace mpiddp
