// The registry's table of operators, built once from the family registration functions, and what
// is derived from it: the completeness check, the supported ONNX operators, the markdown table.
#include "compiler/graph/ops/registry.h"

#include <onnx/defs/schema.h>

#include <sstream>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"

namespace kiln::graph::ops {

void Registry::add(OpDef def) {
  KILN_ICHECK(!def.name.empty()) << "operator registry: an entry without a name";
  const std::string name = def.name;
  KILN_ICHECK(ops_.emplace(name, std::move(def)).second)
      << "operator registry: '" << name << "' is registered twice";
}

const OpDef* Registry::find(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : &it->second;
}

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    // One line per family file.
    register_conv(reg);
    register_pool(reg);
    register_norm(reg);
    register_elementwise(reg);
    register_binary(reg);
    register_matmul(reg);
    register_shape(reg);
    register_index(reg);
    register_reduce(reg);
    register_rnn(reg);
    register_quant(reg);
    register_image(reg);
    return reg;
  }();
  return r;
}

const OpDef* find_op(const std::string& op) { return registry().find(op); }

std::vector<std::string> check_complete(const OpDef& def) {
  std::vector<std::string> missing;
  if (def.family.empty()) missing.push_back("family");
  if (def.origin != Origin::kInternal && def.check == nullptr && !def.schema_checks_suffice) {
    missing.push_back("validation (or schema_checks_suffice)");
  }
  // Its outputs' types: ONNX shape inference needs the operator's schema in libonnx.
  if (def.origin == Origin::kOnnx && def.output_shape == nullptr &&
      onnx::OpSchemaRegistry::Schema(def.name, static_cast<int>(onnx_detail::kMaxOpset), "") ==
          nullptr) {
    missing.push_back("shape inference (libonnx has no schema: an output_shape)");
  }
  switch (def.origin) {
    case Origin::kImportOnly:
      if (def.import_note.empty()) missing.push_back("import note (what the importer does)");
      return missing;  // never a graph node: no pattern, lowering or GPU strategy
    case Origin::kInternal:
      if (def.internal_note.empty()) missing.push_back("internal note (the pass that makes it)");
      break;
    case Origin::kOnnx:
      break;
  }
  if (!def.pattern) missing.push_back("fusion pattern");
  if (def.origin == Origin::kOnnx && def.import == nullptr && !def.no_attributes) {
    missing.push_back("import (or no_attributes)");
  }
  if (def.lower == nullptr && def.lower_note.empty()) {
    missing.push_back("CPU lowering (or a note on what builds it)");
  }
  switch (def.gpu) {
    case GpuStrategy::kUnset:
      missing.push_back("GPU strategy (or an explicit refusal)");
      break;
    case GpuStrategy::kTemplate:
      if (def.gpu_template == nullptr) missing.push_back("GPU template function");
      break;
    case GpuStrategy::kRefused:
      if (def.gpu_note.empty()) missing.push_back("GPU refusal reason");
      break;
    default:
      break;
  }
  return missing;
}

std::vector<std::string> onnx_operator_names() {
  std::vector<std::string> names;
  for (const auto& [name, def] : registry().all()) {
    if (def.origin != Origin::kInternal) names.push_back(name);
  }
  return names;  // a std::map's keys: sorted
}

namespace {

std::string pattern_cell(const OpDef& d) { return d.pattern ? op_pattern_name(*d.pattern) : "?"; }

std::string gpu_cell(const OpDef& d) {
  switch (d.gpu) {
    case GpuStrategy::kTemplate:
      return "template" + (d.gpu_note.empty() ? "" : " (not" + d.gpu_note + ")");
    case GpuStrategy::kReduce:
      return "reduce_gpu";
    case GpuStrategy::kInjective:
      return "injective kernel";
    case GpuStrategy::kOwn:
      return "its own schedule";
    case GpuStrategy::kRefused:
      return "no: " + d.gpu_note;
    case GpuStrategy::kUnset:
      break;
  }
  return "?";
}

}  // namespace

std::string operator_table_markdown() {
  std::ostringstream os;
  os << "| Operator | Family | Import | Fusion pattern | CPU (x86, AArch64) | GPU (CUDA, OpenCL) "
        "|\n";
  os << "|---|---|---|---|---|---|\n";
  for (const auto& [name, d] : registry().all()) {
    os << "| " << name << " | " << d.family << " | ";
    if (d.origin == Origin::kImportOnly) {
      os << d.import_note << " | - | - | - |\n";
      continue;
    }
    os << (d.origin == Origin::kOnnx ? std::string("node") : "made by " + d.internal_note) << " | "
       << pattern_cell(d) << " | " << (d.lower != nullptr ? "compute + schedule" : d.lower_note)
       << " | " << gpu_cell(d) << " |\n";
  }
  return os.str();
}

}  // namespace kiln::graph::ops
