// Running one VDLA program (deploy/vdla/driver/program.h) on the VDLA's simulator, as kiln-runner
// measures a request whose device is "vdla": the program's JSON read and checked at the door, the
// tensors placed in a vdla::Dram at their DMA alignment (each tensor at a multiple of the largest
// row any of its DMAs moves: 16 bytes for INP and OUT rows, 256 for WGT rows, 64 for ACC rows),
// the driver calls replayed on a CommandQueue, and the stream run on a vdla::Device that executes
// every instruction and times it on the cycle model.
//
// The cycle model is deterministic (the same program and configuration give the same cycles on
// any host, loaded or not), so one run is the measurement: its cost is cycles / clock.
//
//   std::vector<NDArray> arrays = {data, kernel, bias, shift, NDArray::empty(oshape, kInt8)};
//   VdlaRun r = run_vdla_program("candidate.json", "candidate", arrays, {false, false, false,
//                                false, true});
//   r.stats.cycles;  r.seconds;          // arrays[4] holds the output
#pragma once

#include <string>
#include <vector>

#include "deploy/runtime/ndarray.h"
#include "deploy/vdla/device/config.h"
#include "deploy/vdla/device/stats.h"

namespace kiln::runtime {

struct VdlaRun {
  vdla::Stats stats;
  double seconds = 0;  ///< stats.cycles / the configuration's clock
};

/// Runs the program in the JSON file `path`, which must be named `function` and take
/// arrays.size() tensors of exactly arrays[i]'s bytes, on a VDLA of configuration `cfg` (the
/// paper's prototype by default, a vdla target's). Inputs are copied into the DRAM, the outputs
/// (is_output[i]) copied back into arrays[i]. kiln::Error for a malformed program or one that does
/// not match the arrays (naming the file, the call or the tensor), and for a stream the device
/// refuses (a row out of range, a deadlock, naming the instruction).
VdlaRun run_vdla_program(const std::string& path, const std::string& function,
                         std::vector<NDArray>& arrays, const std::vector<bool>& is_output,
                         const vdla::Config& cfg = {});

/// The record device of a VDLA measured by kiln-runner: "VDLA cycle model (<cfg.describe()>),
/// deterministic: one run per measurement".
std::string vdla_device_description(const vdla::Config& cfg = {});

}  // namespace kiln::runtime
