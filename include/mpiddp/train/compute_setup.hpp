#pragma once
// Where each rank computes and how gradients travel, from train.device,
// train.precision, train.share_device, dist.backend and ddp.allreduce_dtype.
// Every rank takes the same decision (the GPU is used only if every rank has
// one); a rank's GPU is its node-local rank modulo the GPUs it sees.
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/ddp/transport.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {

// One rank's place in the job, gathered for the start-up log.
struct Placement {
  char host[64];
  int rank, local_rank, local_size;
  int device;          // GPU ordinal, -1 = CPU
  char pci_bus_id[32];
  char visible[64];    // CUDA_VISIBLE_DEVICES
};

struct ComputeSetup {
  Device* device = nullptr;                      // never null once set up
  std::unique_ptr<Device> owned_device;          // the CUDA device, when used
  std::unique_ptr<GradientTransport> transport;  // gradients between ranks
  DistBackend backend = DistBackend::mpi;        // resolved: mpi or nccl
  std::vector<Placement> placements;             // every rank's, in rank order
  std::string note;                              // e.g. why auto chose the CPU (rank 0 prints it)
};

// Collective; errors are agreed: one line from the lowest failing rank, every rank exits.
ComputeSetup setup_compute(const Config& config, ProcessGroup& group);

}  // namespace mpiddp
