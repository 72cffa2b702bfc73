// The bundle: one file holding what a device needs to run a compiled model, loadable without the
// compiler — the executor's graph (JSON), the compiled library (a shared object) and the
// parameters (named arrays).
//
// Layout (little-endian):
//   "KILNBNDL"  u32 format version (1)  u32 section count
//   per section: u32 kind (1 graph, 2 library, 3 params)  u32 reserved (0)  u64 size  bytes
//   u64 checksum (FNV-1a 64 of every byte before it)  "KILNEND!"
// The params section: "KPRM" u32 count, then per array: u32 name length, name, u8 type code,
// u8 bits, u16 lanes, u32 rank, i64 dims[rank], u64 byte count, bytes.
// A damaged, truncated or foreign file is reported as kiln::Error naming the file and the defect.
#pragma once

#include <map>
#include <string>

#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

struct Bundle {
  std::string graph_json;
  std::string library;  ///< the shared object's bytes
  std::map<std::string, NDArray> params;
};

/// The bundle as bytes, and back; `origin` names the source in errors.
std::string serialize_bundle(const Bundle& b);
Bundle deserialize_bundle(const std::string& bytes, const std::string& origin);

void write_bundle(const std::string& path, const Bundle& b);
Bundle read_bundle(const std::string& path);

}  // namespace kiln::runtime
