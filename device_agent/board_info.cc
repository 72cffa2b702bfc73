#include "device_agent/board_info.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "base/host_arch.h"

namespace kiln::agent {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string trim(std::string v) {
  // Device-tree strings end with NUL.
  v.erase(std::remove(v.begin(), v.end(), '\0'), v.end());
  v.erase(0, v.find_first_not_of(" \t\r\n"));
  v.erase(v.find_last_not_of(" \t\r\n") + 1);
  return v;
}

/// The value of the first "field : value" line of `text` whose name is `field`.
std::string field_value(const std::string& text, const std::string& field) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) != field) continue;
    return trim(line.substr(colon + 1));
  }
  return "";
}

unsigned parse_number(const std::string& v) {
  try {
    return static_cast<unsigned>(std::stoul(v, nullptr, 0));  // "0x41", "0xd03"
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::string program_arch() { return host_arch(); }

std::string arm_cpu_name(unsigned implementer, unsigned part) {
  if (implementer != 0x41) return "";  // ARM Ltd.'s own cores only
  switch (part) {
    case 0xd03:
      return "Cortex-A53";
    case 0xd04:
      return "Cortex-A35";
    case 0xd05:
      return "Cortex-A55";
    case 0xd07:
      return "Cortex-A57";
    case 0xd08:
      return "Cortex-A72";
    case 0xd09:
      return "Cortex-A73";
    case 0xd0a:
      return "Cortex-A75";
    case 0xd0b:
      return "Cortex-A76";
    case 0xd0c:
      return "Neoverse-N1";
    case 0xd0d:
      return "Cortex-A77";
    case 0xd40:
      return "Neoverse-V1";
    case 0xd41:
      return "Cortex-A78";
    case 0xd46:
      return "Cortex-A510";
    case 0xd47:
      return "Cortex-A710";
    case 0xd49:
      return "Neoverse-N2";
    case 0xd4f:
      return "Neoverse-V2";
    default:
      return "";
  }
}

BoardInfo read_board_info(const std::string& root) {
  BoardInfo b;
  b.arch = program_arch();
  const std::string cpuinfo = read_file(root + "/proc/cpuinfo");
  if (!field_value(cpuinfo, "vendor_id").empty() ||
      (!field_value(cpuinfo, "model name").empty() && !field_value(cpuinfo, "flags").empty())) {
    b.cpuinfo_arch = "x86_64";
  } else if (!field_value(cpuinfo, "CPU implementer").empty()) {
    b.cpuinfo_arch = "aarch64";  // (32-bit ARM boards run no Kiln agent)
  }
  b.emulated = !b.cpuinfo_arch.empty() && b.cpuinfo_arch != b.arch;

  if (b.cpuinfo_arch == "aarch64") {
    // Boards often mix cores (big.LITTLE): name every distinct one, in cpuinfo's order.
    std::istringstream in(cpuinfo);
    std::string line;
    unsigned implementer = 0;
    std::vector<std::string> names;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string name = trim(line.substr(0, colon));
      const std::string value = trim(line.substr(colon + 1));
      if (name == "CPU implementer") implementer = parse_number(value);
      if (name != "CPU part") continue;
      std::string cpu = arm_cpu_name(implementer, parse_number(value));
      if (cpu.empty()) cpu = "ARM part " + value;
      if (std::find(names.begin(), names.end(), cpu) == names.end()) names.push_back(cpu);
    }
    for (const std::string& n : names) b.cpu_model += (b.cpu_model.empty() ? "" : " + ") + n;
  }
  if (b.cpu_model.empty()) {
    for (const char* f : {"model name", "Hardware", "Processor", "cpu model"}) {
      b.cpu_model = field_value(cpuinfo, f);
      if (!b.cpu_model.empty()) break;
    }
  }
  if (b.cpu_model.empty()) b.cpu_model = "unknown CPU";

  for (const char* f : {"/proc/device-tree/model", "/sys/firmware/devicetree/base/model",
                        "/sys/class/dmi/id/product_name"}) {
    b.board = trim(read_file(root + f));
    if (!b.board.empty()) break;
  }
  if (b.emulated) {
    // What runs the program is an emulator on another machine: say so wherever the farm shows it.
    b.cpu_model = b.arch + " emulated on " + b.cpu_model;
    b.board = "qemu-user" + (b.board.empty() ? std::string() : " on " + b.board);
  }
  b.cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string mem = field_value(read_file(root + "/proc/meminfo"), "MemTotal");  // "1 kB"
  try {
    b.memory_bytes = mem.empty() ? 0 : std::stoull(mem) * 1024;
  } catch (const std::exception&) {
    b.memory_bytes = 0;
  }
  return b;
}

}  // namespace kiln::agent
