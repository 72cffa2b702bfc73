// The bundle: one file holding what a device needs to run a compiled model, loadable without the
// compiler — the executor's graph (JSON), the compiled code and the parameters (named arrays).
// The code of a CPU bundle is a shared object; a GPU bundle's is a set of device programs
// (device_program.h: PTX or OpenCL C with their launches), one per function its nodes call.
//
// Layout (little-endian):
//   "KILNBNDL"  u32 format version (1, 2 for a GPU bundle, 3 for one with VDLA functions)
//   u32 section count
//   per section: u32 kind (1 graph, 2 library, 3 params, 4 device, 5 vdla)  u32 reserved (0)  u64
//   size bytes u64 checksum (FNV-1a 64 of every byte before it)  "KILNEND!"
// The params section: "KPRM" u32 count, then per array: u32 name length, name, u8 type code,
// u8 bits, u16 lanes, u32 rank, i64 dims[rank], u64 byte count, bytes.
// The device section (version 2 only, and there required): JSON {"programs": [DeviceProgram...]},
// at least one, names distinct, all of one format; a GPU bundle's library section is empty (its
// nodes all run on the device). CPU bundles keep version 1, so runtimes that predate GPU bundles
// read them as before and refuse GPU bundles by their version.
// The vdla section (version 3 only, and there required): JSON {"config": the VDLA configuration
// the programs were built for (vdla::Config::describe), "programs": [VdlaProgram...]}, at least
// one, names distinct, each checked by VdlaProgram::from_json. Its host library holds the CPU
// nodes' functions (the nodes marked "target": "vdla" in the graph call the programs); a bundle
// holds VDLA programs or GPU device programs, not both. Runtimes that predate the VDLA refuse it
// by its version.
// A damaged, truncated or foreign file is reported as kiln::Error naming the file and the defect.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/vdla/driver/program.h"

namespace kiln::runtime {

struct Bundle {
  std::string graph_json;
  std::string library;  ///< the shared object's bytes (empty in a GPU bundle)
  std::map<std::string, NDArray> params;
  /// A GPU bundle's code: the programs its nodes call, by name (empty in a CPU bundle).
  std::vector<DeviceProgram> device_programs;
  /// The VDLA's functions, by name (vdla section; empty when no node runs on the VDLA).
  std::vector<vdla::VdlaProgram> vdla_programs;
};

/// Where a bundle's nodes run: kCpu (a host library), kVdla (a host library and VDLA programs,
/// which run on the VDLA's simulator), kCuda (PTX) or kOpenCL (OpenCL C).
TargetKind bundle_device(const Bundle& b);

/// The bundle as bytes, and back; `origin` names the source in errors.
std::string serialize_bundle(const Bundle& b);
Bundle deserialize_bundle(std::string_view bytes, const std::string& origin);

void write_bundle(const std::string& path, const Bundle& b);
Bundle read_bundle(const std::string& path);

/// Checks a bundle file as read_bundle does (checksum, sections, every parameter's header and
/// size, the programs) without loading it: the file is mapped and no array is made, so a server
/// checks a bundle of any size in little memory of its own. kiln::Error as read_bundle.
void check_bundle_file(const std::string& path);

}  // namespace kiln::runtime
