// kiln-device-info: what DeviceAPI sees on this machine, for CUDA and OpenCL, one device a line,
// or why there is none. Exit status 0 if any device was found, 1 otherwise (a quick check on a
// GPU machine that the driver, the runtime and the device agree).
#include <cstdio>
#include <exception>
#include <string>

#include "base/cli.h"
#include "deploy/runtime/device_api.h"

namespace {

const kiln::cli::Program kDeviceInfo{
    .name = "kiln-device-info",
    .summary =
        "Lists the CUDA and OpenCL devices the runtime sees here, one a line, or why there "
        "is none. Exit status 0 if any device was found, 1 otherwise.",
};

int list_devices(const kiln::cli::Args&) {
  using kiln::TargetKind;
  using kiln::runtime::DeviceAPI;
  int found = 0;
  for (TargetKind kind : {TargetKind::kCuda, TargetKind::kOpenCL}) {
    std::string why;
    const int count = DeviceAPI::count(kind, &why);
    std::printf("%s: %d device(s)%s%s\n", std::string(kiln::device_kind_name(kind)).c_str(), count,
                count == 0 ? ": " : "", count == 0 ? why.c_str() : "");
    for (int i = 0; i < count; ++i) {
      try {
        std::printf("  %s\n", DeviceAPI::get(kind, i).description().c_str());
        ++found;
      } catch (const std::exception& e) {
        std::printf("  %s:%d cannot be opened: %s\n",
                    std::string(kiln::device_kind_name(kind)).c_str(), i, e.what());
      }
    }
  }
  return found > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kDeviceInfo, argc, argv, list_devices); }
