#pragma once
// How op families reach the devices. Each family's implementation file (under
// src/ops/<family>/) registers a maker for the device kind it serves, with one
// line at namespace scope:
//
//   const bool registered = register_ops<NormOps>(DeviceKind::cpu, make_cpu_norm_ops);
//
// and a device, when built, makes one implementation of every family registered
// for its kind (Device::provide_registered). Adding a family therefore edits no
// device and no list: the build finds its CPU and CUDA files (CMakeLists.txt) and
// they register themselves. mpiddp_core is an object library, so the linker keeps
// every such file although nothing calls into it by name.
#include <functional>
#include <memory>
#include <typeindex>
#include <vector>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

struct OpsRegistration {
  std::type_index family;
  const char* family_name;  // the interface's C++ name, for messages
  DeviceKind kind;          // cpu (also used by the emulated device) or cuda
  std::function<std::unique_ptr<OpFamily>(Device&)> make;
};

// Adds a maker; returns true so that a namespace-scope constant can hold the call.
bool add_ops_maker(OpsRegistration registration);
// Every maker added so far, in the order the files registered.
const std::vector<OpsRegistration>& registered_ops();

template <class Family>
bool register_ops(DeviceKind kind, std::unique_ptr<Family> (*make)(Device&)) {
  static_assert(std::is_base_of_v<OpFamily, Family>);
  return add_ops_maker({std::type_index(typeid(Family)), typeid(Family).name(), kind,
                        [make](Device& device) -> std::unique_ptr<OpFamily> { return make(device); }});
}

}  // namespace mpiddp
