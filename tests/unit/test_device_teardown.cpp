// A device can destroy its op families before its own resources (the CUDA
// device destroys cuDNN's handle before the stream it runs on): checked here
// with a device whose family notes when it goes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "mpiddp/device/cpu_device.hpp"
#include "mpiddp/device/op_registry.hpp"

using namespace mpiddp;

namespace {

std::vector<std::string> order;

struct NoteFamily : OpFamily {
  ~NoteFamily() override { order.push_back("family"); }
};

std::unique_ptr<NoteFamily> make_note(Device&) { return std::make_unique<NoteFamily>(); }
// Registered for the emulated kind, which no real family uses: only this test's device makes it.
const bool registered = register_ops<NoteFamily>(DeviceKind::emulated, make_note);

class StreamDevice final : public CpuDevice {
 public:
  StreamDevice() { provide_registered(DeviceKind::emulated); }
  ~StreamDevice() override {
    release_families();
    order.push_back("streams");
  }
};

}  // namespace

TEST_CASE("a device's families can go before its own resources", "[device]") {
  order.clear();
  { StreamDevice device; CHECK(registered); (void)device.ops<NoteFamily>(); }
  CHECK(order == std::vector<std::string>{"family", "streams"});
}

TEST_CASE("each family is registered once per device kind", "[device]") {
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::cuda}) {
    std::vector<std::string> names;
    for (const OpsRegistration& r : registered_ops())
      if (r.kind == kind) names.push_back(r.family_name);
    std::vector<std::string> unique = names;
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    INFO(device_kind_name(kind));
    CHECK(unique.size() == names.size());
  }
  CHECK_NOTHROW(CpuDevice());  // a second registration of a family would throw here
}
