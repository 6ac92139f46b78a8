#include "mpiddp/device/op_registry.hpp"

#include "mpiddp/common/error.hpp"

namespace mpiddp {
namespace {

// A function-local static: the family files register during static
// initialisation, in any order, and may run before this file's own statics.
std::vector<OpsRegistration>& registry() {
  static std::vector<OpsRegistration> makers;
  return makers;
}

}  // namespace

bool add_ops_maker(OpsRegistration registration) {
  registry().push_back(std::move(registration));
  return true;
}

const std::vector<OpsRegistration>& registered_ops() { return registry(); }

void Device::provide_registered(DeviceKind kind) {
  for (const OpsRegistration& r : registered_ops()) {
    if (r.kind != kind) continue;
    for (const auto& [type, implementation] : families_)
      if (type == r.family) throw std::logic_error(std::string("two implementations of ") + r.family_name);
    families_.emplace_back(r.family, r.make(*this));
  }
}

OpFamily& Device::find_ops(const std::type_info& family) const {
  for (const auto& [type, implementation] : families_)
    if (type == std::type_index(family)) return *implementation;
  throw RuntimeError(describe() + " provides no " + family.name() + " operations");
}

}  // namespace mpiddp
