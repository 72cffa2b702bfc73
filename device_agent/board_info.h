// What a board tells the farm about itself when it registers: its model, CPU, cores, memory,
// architecture, and whether the agent runs under emulation. Read from the files Linux gives:
//   /proc/cpuinfo           CPU name (x86: "model name"; ARM: "CPU implementer" + "CPU part",
//                           decoded to "Cortex-A53" and the like, or "Hardware")
//   /proc/device-tree/model the board ("Raspberry Pi 3 Model B Rev 1.2"), else
//   /sys/class/dmi/id/      product_name (x86 machines)
//   /proc/meminfo           MemTotal
//
//   BoardInfo b = read_board_info();          // the real files
//   BoardInfo t = read_board_info("testdata/rpi3");   // the same files under another root
//
// Emulation: an agent built for aarch64 that runs under qemu-user on an x86 host reads the
// host's /proc/cpuinfo (qemu does not fake it): a cpuinfo of another architecture than the
// program's own means the agent is emulated, and its timings are not the board's.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::agent {

struct BoardInfo {
  std::string board;         ///< the board's model; "" when the system does not say
  std::string cpu_model;     ///< the CPU's name ("Cortex-A53", "AMD EPYC 9R14")
  std::string arch;          ///< the architecture this program runs as ("aarch64", "x86_64")
  std::string cpuinfo_arch;  ///< the architecture /proc/cpuinfo describes ("" when unclear)
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
  bool emulated = false;  ///< cpuinfo_arch is known and differs from arch
};

/// The architecture this program was built for: "x86_64", "aarch64" or "unknown".
std::string program_arch();

/// Reads the board's description from the files under `root` ("" for /).
BoardInfo read_board_info(const std::string& root = "");

/// The name of an ARM CPU from /proc/cpuinfo's implementer and part numbers (0x41, 0xd03 ->
/// "Cortex-A53"); "" when unknown.
std::string arm_cpu_name(unsigned implementer, unsigned part);

}  // namespace kiln::agent
