// Every node the ONNX front end accepts is checked here against the ONNX specification before
// ONNX shape inference or anything after it sees the node: libonnx's inference functions index
// attribute vectors and input dimensions without bounds checks, and the passes after import trust
// the shapes they are given. First what the operator's schema says (how many inputs and outputs,
// which are required, which attributes exist, their types, which are required, the element types
// each input may have and which inputs must share one), then the rules of each operator: ranks,
// channel counts, inner dimensions, broadcasting, axes and permutations, attribute lengths and
// ranges, the output size a window leaves, the values of the constant inputs that are parameters.
// Each failure is a kiln::Error naming the node, the operator, the input or attribute, and both
// values that disagree.
// The operators' own rules are their registry entries' (ops/registry.h), in their family files.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"

namespace kiln::graph::onnx_detail {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using ops::NodeCheck;
using ops::str;

const char* attr_type_name(int t) {
  switch (t) {
    case AttributeProto::FLOAT:
      return "a float (FLOAT)";
    case AttributeProto::INT:
      return "an int (INT)";
    case AttributeProto::STRING:
      return "a string (STRING)";
    case AttributeProto::TENSOR:
      return "a tensor (TENSOR)";
    case AttributeProto::GRAPH:
      return "a graph (GRAPH)";
    case AttributeProto::FLOATS:
      return "a list of floats (FLOATS)";
    case AttributeProto::INTS:
      return "a list of ints (INTS)";
    case AttributeProto::STRINGS:
      return "a list of strings (STRINGS)";
    default:
      return "of another type";
  }
}

/// The type of an attribute: its `type` field, or (files older than IR version 2 leave it unset)
/// the field that holds its value.
int attr_type(const AttributeProto& a) {
  if (a.type() != AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return AttributeProto::FLOAT;
  if (a.has_i()) return AttributeProto::INT;
  if (a.has_s()) return AttributeProto::STRING;
  if (a.has_t()) return AttributeProto::TENSOR;
  if (a.has_g()) return AttributeProto::GRAPH;
  if (a.floats_size() > 0) return AttributeProto::FLOATS;
  if (a.ints_size() > 0) return AttributeProto::INTS;
  if (a.strings_size() > 0) return AttributeProto::STRINGS;
  return AttributeProto::UNDEFINED;
}

std::string count_range(int lo, int hi) {
  if (hi == INT_MAX) return str(lo) + " or more";
  if (lo == hi) return str(lo);
  return str(lo) + " to " + str(hi);
}

}  // namespace
}  // namespace kiln::graph::onnx_detail

namespace kiln::graph::ops {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)
using onnx::AttributeProto;

void NodeCheck::run() {
  def_ = find_op(op_);
  check_schema();
  check_element_types();
  if (def_ != nullptr && def_->check != nullptr) def_->check(*this);
}

void NodeCheck::check_schema() {
  schema_ = onnx::OpSchemaRegistry::Schema(op_, static_cast<int>(opset_), "");
  if (schema_ == nullptr) fail("operator '" + op_ + "' does not exist at opset " + str(opset_));
  const int num_in = n_.input_size(), num_out = n_.output_size();
  const Opset18Form* form18 = opset18();
  const int max_in =
      schema_->max_input() + (form18 ? static_cast<int>(form18->extra_inputs.size()) : 0);
  if (num_in < schema_->min_input() || num_in > max_in) {
    fail("has " + str(num_in) + " inputs; " + op_ + " at opset " + str(opset_) + " takes " +
         count_range(schema_->min_input(), max_in));
  }
  if (num_out < schema_->min_output() || num_out > schema_->max_output()) {
    fail("has " + str(num_out) + " outputs; " + op_ + " at opset " + str(opset_) + " has " +
         count_range(schema_->min_output(), schema_->max_output()));
  }
  const auto& formal_in = schema_->inputs();
  for (int i = 0; i < num_in && !formal_in.empty(); ++i) {
    const auto& f = formal_in[std::min<size_t>(static_cast<size_t>(i), formal_in.size() - 1)];
    const bool beyond = static_cast<size_t>(i) >= formal_in.size();  // an opset-18 input
    if (!beyond && f.GetOption() == onnx::OpSchema::Single && n_.input(i).empty()) {
      fail(input(static_cast<size_t>(i)) + " is required, but the node leaves it empty");
    }
  }
  const auto& formal_out = schema_->outputs();
  for (int i = 0; i < num_out && !formal_out.empty(); ++i) {
    const auto& f = formal_out[std::min<size_t>(static_cast<size_t>(i), formal_out.size() - 1)];
    if (f.GetOption() == onnx::OpSchema::Single && n_.output(i).empty()) {
      fail("output " + str(i) + " (" + f.GetName() +
           ") is required, but the node leaves it "
           "empty");
    }
  }
  std::set<std::string> seen;
  for (const AttributeProto& a : n_.attribute()) {
    if (!seen.insert(a.name()).second) fail("attribute '" + a.name() + "' is given twice");
    // Opset 18's attributes that libonnx 1.12's schemas lack, and those it removed.
    if (form18 != nullptr) {
      const auto named = [&](const auto& entry) { return entry.first == a.name(); };
      const auto& extra = form18->extra_attributes;
      if (auto it = std::find_if(extra.begin(), extra.end(), named); it != extra.end()) {
        if (attr_type(a) != it->second) {
          fail("attribute '" + a.name() + "' must be " + attr_type_name(it->second) + ", got " +
               attr_type_name(attr_type(a)));
        }
        continue;
      }
      const auto& removed = form18->removed_attributes;
      if (auto it = std::find_if(removed.begin(), removed.end(), named); it != removed.end()) {
        fail("attribute '" + a.name() + "' is not an attribute of " + op_ + " at opset " +
             str(opset_) + " (" + it->second + ")");
      }
    }
    auto it = schema_->attributes().find(a.name());
    if (it == schema_->attributes().end()) {
      if (a.name().rfind("__", 0) == 0) continue;  // ONNX's internal attributes
      std::vector<std::string> known;
      for (const auto& [name, _] : schema_->attributes()) known.push_back(name);
      fail("attribute '" + a.name() + "' is not an attribute of " + op_ + " at opset " +
           str(opset_) + " (" + (known.empty() ? "it has none" : "it has " + join(known)) + ")");
    }
    if (attr_type(a) != it->second.type) {
      fail("attribute '" + a.name() + "' must be " + attr_type_name(it->second.type) + ", got " +
           attr_type_name(attr_type(a)));
    }
  }
  for (const auto& [name, spec] : schema_->attributes()) {
    if (spec.required && !seen.count(name)) fail("attribute '" + name + "' is required");
  }
}

void NodeCheck::check_element_types() {
  const auto& formals = schema_->inputs();
  std::map<std::string, size_t> first;  // type parameter -> the first input of it
  for (size_t i = 0; i < in_.size(); ++i) {
    if (in_[i] == nullptr || formals.empty()) continue;
    if (i >= formals.size() && formals.back().GetOption() != onnx::OpSchema::Variadic) {
      // Pad's axes (opset 18): int32 or int64, like Slice's.
      const KilnDType t = in_[i]->dtype;
      if (!runtime::dtype_equal(t, runtime::kInt64) && !runtime::dtype_equal(t, runtime::kInt32)) {
        fail(input(i) + " is " + runtime::dtype_to_string(t) + "; it must be int32 or int64");
      }
      continue;
    }
    const auto& f = formals[std::min(i, formals.size() - 1)];
    const std::string type = onnx_type_string(in_[i]->dtype);
    bool allowed = false;
    std::vector<std::string> names;
    for (const std::string* t : f.GetTypes()) {
      allowed = allowed || *t == type;
      names.push_back(*t);
    }
    if (!allowed) {
      std::sort(names.begin(), names.end());
      fail(input(i) + " is " + type + ", but " + op_ + " takes " + join(names) + " there (" +
           f.GetTypeStr() + ")");
    }
    if (f.GetOption() == onnx::OpSchema::Variadic && !f.GetIsHomogeneous()) continue;
    auto [it, fresh] = first.emplace(f.GetTypeStr(), i);
    if (!fresh && !runtime::dtype_equal(in_[it->second]->dtype, in_[i]->dtype)) {
      fail(input(i) + " is " + type + ", but " + input(it->second) + " is " +
           onnx_type_string(in_[it->second]->dtype) + "; both have type " + f.GetTypeStr() +
           " and must agree");
    }
  }
}
}  // namespace kiln::graph::ops

namespace kiln::graph::onnx_detail {

std::vector<int64_t> window_pads(const std::string& auto_pad, const std::vector<int64_t>& pads,
                                 const std::vector<int64_t>& in, const std::vector<int64_t>& extent,
                                 const std::vector<int64_t>& strides) {
  const size_t k = in.size();
  if (auto_pad == "NOTSET") return pads;
  std::vector<int64_t> out(2 * k, 0);
  if (auto_pad == "VALID") return out;
  for (size_t i = 0; i < k; ++i) {
    const int64_t size = (in[i] + strides[i] - 1) / strides[i];
    const int64_t total = std::max<int64_t>(0, (size - 1) * strides[i] + extent[i] - in[i]);
    const int64_t small = total / 2, large = total - small;
    out[i] = auto_pad == "SAME_UPPER" ? small : large;
    out[i + k] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return out;
}

void validate_node(const NodeProto& node, int64_t opset, const std::vector<const Value*>& inputs,
                   const std::string& origin) {
  NodeCheck(node, opset, inputs, origin).run();
}

}  // namespace kiln::graph::onnx_detail
