#pragma once
// The rules between the compute settings (train.device, train.precision,
// dist.backend, ddp.allreduce_dtype, debug.emulate_device), each stated once in
// rules.cpp. They are applied twice: by load_config to the settings as written,
// where `auto` may still become either choice (the message names the file and
// the key), and by setup_compute once `auto` has become a device and a backend.
// Every check throws InputError with the message of the broken rule.
#include <functional>
#include <string>

#include "mpiddp/config/config.hpp"

namespace mpiddp {

// load_config: `source_of(key)` is where that key's value came from (the input
// file, or "command line" for an override or without a file).
void check_stated_rules(const Config& config, const std::function<std::string(const std::string&)>& source_of);

// setup_compute: `backend` is mpi or nccl; `cpu_reason` says why the job trains
// on the CPU when `on_gpu` is false.
void check_resolved_rules(const Config& config, bool on_gpu, DistBackend backend, const std::string& cpu_reason);

// debug.emulate_device: the emulated GPU computes like the CPU and reduces over MPI.
void check_emulated_rules(const Config& config);

}  // namespace mpiddp
