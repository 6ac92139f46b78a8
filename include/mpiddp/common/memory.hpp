#pragma once
// Sizes declared by files and arguments are checked against what the machine can
// hold before anything is allocated from them (docs/data.md).
#include <cstdint>
#include <string>

namespace mpiddp {

// This node's physical memory in bytes (sysconf), or 0 if unknown.
std::uint64_t physical_memory_bytes();

// This process's peak resident memory (VmHWM in /proc/self/status), 0 if unknown.
std::uint64_t peak_resident_bytes();

// "12.3 GiB", "80 bytes": a byte count for messages.
std::string bytes_text(double bytes);

}  // namespace mpiddp
