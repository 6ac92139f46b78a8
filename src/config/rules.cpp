// Each rule is one predicate; the checks below apply them to what is known at
// their time and word the refusal for that time.
#include "mpiddp/config/rules.hpp"

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {

// NCCL reduces GPU memory: it needs the model on the GPU.
bool nccl_fits(DistBackend backend, bool on_gpu) { return backend != DistBackend::nccl || on_gpu; }

// MPI has no bf16 sum: bf16 buckets need NCCL.
bool bucket_dtype_fits(AllreduceDtype dtype, DistBackend backend) {
  return dtype != AllreduceDtype::bf16 || backend == DistBackend::nccl;
}

// The CPU (and the emulated GPU, which computes with the CPU's code) multiplies in fp32 only.
bool precision_fits(Precision precision, bool on_gpu) { return precision == Precision::fp32 || on_gpu; }

[[noreturn]] void refuse(const std::string& file, const std::string& key, const std::string& why) {
  throw InputError(file + ": key '" + key + "': " + why);
}

}  // namespace

void check_stated_rules(const Config& c, const std::function<std::string(const std::string&)>& source_of) {
  // Until set-up, `auto` may still become the GPU and NCCL: only what the file fixes can break a rule.
  const bool may_use_gpu = c.train.device != DeviceChoice::cpu;
  const DistBackend may_use = c.dist.backend == DistBackend::automatic ? DistBackend::nccl : c.dist.backend;
  if (!bucket_dtype_fits(c.ddp.allreduce_dtype, may_use))
    refuse(source_of("ddp.allreduce_dtype"), "ddp.allreduce_dtype", "bf16 needs dist.backend = nccl (MPI has no bf16 sum)");
  if (!nccl_fits(c.dist.backend, may_use_gpu))
    refuse(source_of("dist.backend"), "dist.backend", "nccl needs train.device = cuda (or auto on a GPU node)");
  if (!precision_fits(c.train.precision, may_use_gpu))
    refuse(source_of("train.precision"), "train.precision",
           std::string(name_of(c.train.precision)) + " needs train.device = cuda (the CPU computes in fp32)");
}

void check_resolved_rules(const Config& c, bool on_gpu, DistBackend backend, const std::string& cpu_reason) {
  if (!nccl_fits(backend, on_gpu))
    throw InputError("dist.backend = nccl needs GPUs, but this job trains on the CPU (" + cpu_reason +
                     "); use dist.backend = mpi or auto");
  if (!bucket_dtype_fits(c.ddp.allreduce_dtype, backend))
    throw InputError(std::string("ddp.allreduce_dtype = bf16 needs dist.backend = nccl (resolved: ") +
                     name_of(backend) + ")");
  if (!precision_fits(c.train.precision, on_gpu))
    throw InputError(std::string("train.precision = ") + name_of(c.train.precision) +
                     " needs train.device = cuda (the CPU computes in fp32)");
}

void check_emulated_rules(const Config& c) {
  if (!nccl_fits(c.dist.backend, false)) throw InputError("debug.emulate_device works with dist.backend = mpi only");
  if (!precision_fits(c.train.precision, false)) throw InputError("debug.emulate_device computes in fp32 only");
}

}  // namespace mpiddp
