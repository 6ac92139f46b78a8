#include "mpiddp/train/compute_setup.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "mpiddp/common/error.hpp"
#include "mpiddp/config/rules.hpp"
#include "mpiddp/ddp/nccl.hpp"
#include "mpiddp/device/cuda.hpp"

namespace mpiddp {
namespace {

std::string visible_devices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? v : "unset";
}

// Two ranks on one host that picked the same GPU (same PCI bus id).
std::string shared_gpu(const std::vector<Placement>& all) {
  std::map<std::string, int> first;
  for (const Placement& p : all) {
    if (p.device < 0) continue;
    const std::string key = std::string(p.host) + " " + p.pci_bus_id;
    auto [it, inserted] = first.emplace(key, p.rank);
    if (!inserted)
      return "ranks " + std::to_string(it->second) + " and " + std::to_string(p.rank) + " on host " + p.host +
             " both use GPU " + p.pci_bus_id + " (CUDA_VISIBLE_DEVICES=" + p.visible + ")";
  }
  return "";
}

// Ranks may share a GPU only when asked to, and never over NCCL.
void check_sharing(const std::string& shared, const Config& config, DistBackend backend) {
  if (shared.empty()) return;
  if (!config.train.share_device)
    throw InputError(shared + ": start one rank per GPU, or set train.share_device = true (dist.backend = mpi)");
  if (backend == DistBackend::nccl)
    throw InputError(shared + ": NCCL cannot run two ranks on one GPU; set dist.backend = mpi to share it");
}

Placement placement_of(ProcessGroup& group, int device) {
  Placement p{};
  std::snprintf(p.host, sizeof(p.host), "%s", group.host().c_str());
  p.rank = group.rank();
  p.local_rank = group.local_rank();
  p.local_size = group.local_size();
  p.device = device;
  std::snprintf(p.visible, sizeof(p.visible), "%s", visible_devices().c_str());
  return p;
}

// debug.emulate_device: the GPU path's host side without a GPU (tests).
ComputeSetup emulated_setup(const Config& config, ProcessGroup& group) {
  Communicator& comm = group.world();
  ComputeSetup setup;
  setup.note = "debug.emulate_device: training on an emulated GPU (CPU arithmetic, separate memory)";
  Placement mine = placement_of(group, 0);
  std::snprintf(mine.pci_bus_id, sizeof(mine.pci_bus_id), "emulated");
  setup.placements.resize(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, sizeof(mine), setup.placements.data());
  // One emulated GPU per host, so several ranks on a host share it, as on a one-GPU node.
  agree_or_fail(comm, [&] {
    check_emulated_rules(config);
    check_sharing(shared_gpu(setup.placements), config, DistBackend::mpi);
  });
  setup.owned_device = make_emulated_device();
  setup.device = setup.owned_device.get();
  setup.backend = DistBackend::mpi;
  setup.transport = make_mpi_transport(comm, *setup.device);
  return setup;
}

}  // namespace

ComputeSetup setup_compute(const Config& config, ProcessGroup& group) {
  Communicator& comm = group.world();
  ComputeSetup setup;
  if (config.debug.emulate_device) return emulated_setup(config, group);
  const CudaProbe probe = config.train.device == DeviceChoice::cpu ? CudaProbe{0, "train.device = cpu"} : probe_cuda();
  bool use_cuda = false;
  agree_or_fail(comm, [&] {
    if (config.train.device == DeviceChoice::cuda && probe.count == 0)
      throw InputError("train.device = cuda: " + probe.problem);
  });
  if (config.train.device != DeviceChoice::cpu) {
    // The GPU only if every rank has one: a mixed job would be neither fast nor reproducible.
    use_cuda = comm.allreduce_min(probe.count > 0 ? 1 : 0) == 1;
    if (!use_cuda && built_with_cuda())
      setup.note = "train.device = auto: " +
                   (probe.count == 0 ? "no usable GPU (" + probe.problem + ")" : std::string("a rank has no usable GPU")) +
                   "; training on the CPU";
  }

  Placement mine = placement_of(group, use_cuda ? group.local_rank() % probe.count : -1);
  if (use_cuda)
    std::snprintf(mine.pci_bus_id, sizeof(mine.pci_bus_id), "%s", cuda_device_info(mine.device).pci_bus_id.c_str());
  setup.placements.resize(static_cast<std::size_t>(comm.size()));
  comm.allgather(&mine, sizeof(mine), setup.placements.data());

  const std::string shared = shared_gpu(setup.placements);
  setup.backend = config.dist.backend;
  // NCCL cannot put two ranks on one GPU: auto takes MPI when GPUs are shared.
  if (setup.backend == DistBackend::automatic)
    setup.backend = use_cuda && built_with_nccl() && shared.empty() ? DistBackend::nccl : DistBackend::mpi;
  agree_or_fail(comm, [&] {
    check_resolved_rules(config, use_cuda, setup.backend,
                         probe.problem.empty() ? "a rank has no usable GPU" : probe.problem);
    check_sharing(shared, config, setup.backend);
    if (use_cuda) {
      setup.owned_device = make_cuda_device(mine.device);
      setup.device = setup.owned_device.get();
    } else {
      setup.device = &cpu_device();
    }
    setup.device->set_precision(config.train.precision);
  });
  if (setup.backend == DistBackend::nccl) {
    agree_or_fail(comm, [&] {
      setup.transport = make_nccl_transport(comm, *setup.device, config.ddp.allreduce_dtype == AllreduceDtype::bf16,
                                            config.dist.timeout_s);
    });
  } else {
    setup.transport = make_mpi_transport(comm, *setup.device);
  }
  return setup;
}

}  // namespace mpiddp
