// run_vdla_program: read, check, place, replay, run, copy back.
#include "deploy/runtime/vdla_run.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "deploy/runtime/dtype.h"
#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/command_queue.h"
#include "deploy/vdla/driver/dram.h"
#include "deploy/vdla/driver/program.h"

namespace kiln::runtime {

namespace {

/// The alignment of each tensor: the largest DMA row among the calls that move it (16 bytes for a
/// tensor no DMA touches).
std::vector<uint64_t> arg_alignments(const vdla::VdlaProgram& p, const vdla::Config& cfg) {
  std::vector<uint64_t> align(p.arg_names.size(), static_cast<uint64_t>(cfg.inp_row_bytes()));
  for (const vdla::DriverCall& c : p.calls) {
    const auto* d = std::get_if<vdla::DmaCall>(&c);
    if (d == nullptr) continue;
    const int64_t row = d->store                        ? cfg.out_row_bytes()
                        : d->mem == vdla::MemType::kWgt ? cfg.wgt_row_bytes()
                        : d->mem == vdla::MemType::kAcc ? cfg.acc_row_bytes()
                                                        : cfg.inp_row_bytes();
    uint64_t& a = align.at(static_cast<size_t>(d->arg));  // from_json checked the index
    a = std::max(a, static_cast<uint64_t>(row));
  }
  return align;
}

}  // namespace

VdlaRun run_vdla_program(const std::string& path, const std::string& function,
                         std::vector<NDArray>& arrays, const std::vector<bool>& is_output,
                         const vdla::Config& cfg) {
  KILN_ICHECK(is_output.size() == arrays.size()) << "run_vdla_program: one flag per array";
  std::ifstream in(path, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "cannot read the VDLA program '" << path << "'";
  std::stringstream text;
  text << in.rdbuf();
  const vdla::VdlaProgram program =
      vdla::VdlaProgram::from_json(Json::parse(text.str(), path), path);
  KILN_USER_CHECK(program.name == function)
      << "the VDLA program '" << path << "' is '" << program.name << "', not '" << function << "'";
  KILN_USER_CHECK(program.arg_names.size() == arrays.size())
      << "the VDLA program '" << program.name << "' takes " << program.arg_names.size()
      << " tensors, the request passes " << arrays.size();
  for (size_t i = 0; i < arrays.size(); ++i) {
    const int64_t bytes = arrays[i].num_elements() * dtype_bytes(arrays[i].dtype());
    KILN_USER_CHECK(program.arg_bytes[i] == bytes)
        << "args[" << i << "] is " << dtype_to_string(arrays[i].dtype()) << " "
        << arrays[i].shape_string() << " (" << bytes << " bytes), the VDLA program's tensor '"
        << program.arg_names[i] << "' has " << program.arg_bytes[i] << " bytes";
  }

  vdla::Device device(cfg);
  vdla::Dram dram;
  const std::vector<uint64_t> align = arg_alignments(program, cfg);
  std::vector<uint64_t> addrs;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>(program.arg_bytes[i]);
    addrs.push_back(dram.alloc(bytes, align[i]));
    if (!is_output[i] && bytes > 0) std::memcpy(dram.at(addrs[i], bytes), arrays[i].data(), bytes);
  }
  vdla::CommandQueue queue(device, dram);
  program.emit(queue, addrs);
  VdlaRun run;
  run.stats = queue.synchronize(vdla::RunOptions{true});
  run.seconds = static_cast<double>(run.stats.cycles) / (cfg.clock_mhz * 1e6);
  for (size_t i = 0; i < arrays.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>(program.arg_bytes[i]);
    if (is_output[i] && bytes > 0) std::memcpy(arrays[i].data(), dram.at(addrs[i], bytes), bytes);
  }
  return run;
}

std::string vdla_device_description(const vdla::Config& cfg) {
  return "VDLA cycle model (" + cfg.describe() + "), deterministic: one run per measurement";
}

}  // namespace kiln::runtime
