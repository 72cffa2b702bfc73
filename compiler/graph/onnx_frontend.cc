// ONNX ModelProto -> graph IR. import_model (at the end) is the script: check the model (opset,
// operators, static inputs), then let an Importer walk the nodes in file order (ONNX requires
// topological order). Each node is validated against the ONNX specification (validate_node), and
// then what its operator's registry entry (ops/registry.h) says is done: computed or aliased at
// import (its `evaluate`: Constant, Shape, Identity, ...), or its outputs typed by ONNX shape
// inference of that node alone (ShapeInference, which sees the constants found so far; the
// entry's `output_shape` where libonnx falls short), folded into a constant when its inputs are
// (try_fold), or emitted with its attributes and their defaults (the entry's `import`). A graph
// input that also has an initializer is an input with that default value (IR version 4 and
// later; before, every initializer had to be listed as an input, and such inputs are constants).
#include "compiler/graph/onnx_frontend.h"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/graph/tensor_limits.h"

namespace kiln::graph {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

/// The state of one import.
class Importer : public ops::ImportSink {
 public:
  Importer(const onnx::ModelProto& model, std::string origin, int64_t opset)
      : origin_(std::move(origin)), opset_(opset), inference_(model, origin_) {}

  /// Builds the graph from a model that check_model accepted.
  Graph run(const onnx::ModelProto& model);

  // --- ops::ImportSink: what an operator computed at import does --------------------------------
  void define_constant(const std::string& name, runtime::NDArray data) override {
    define(name, g_.add_constant(name, std::move(data)));
  }
  void define_alias(const std::string& name, ValueId v) override { define(name, v); }
  bool infer_outputs(const ops::ImportCtx& c, std::vector<int64_t>* shape) override {
    return inferred_static_shape(c, shape);
  }
  ValueId add_output(const ops::ImportCtx& c, int i) override { return output_value(c.proto(), i); }
  Value& value(ValueId v) override { return g_.value(v); }
  ValueId add_value(const std::string& name, KilnDType dtype, std::vector<int64_t> shape) override {
    return g_.add_value(name, dtype, std::move(shape));
  }
  ValueId add_constant(const std::string& name, runtime::NDArray data) override {
    return g_.add_constant(name, std::move(data));
  }
  void add_node(Node node) override { g_.add_node(std::move(node)); }

 private:
  /// Evaluates the node if it can be (returns true and defines its output as a constant).
  bool try_fold(const ops::ImportCtx& c);
  /// The static shape ONNX shape inference gives the node's first output, if it gives one.
  bool inferred_static_shape(const ops::ImportCtx& c, std::vector<int64_t>* shape);

  void define(const std::string& name, ValueId v) { values_[name] = v; }
  ValueId output_value(const NodeProto& n, int i);
  void set_type(ValueId v, const std::string& name, const std::string& where);
  /// Types the node's outputs by ONNX shape inference (into types_).
  void infer(const ops::ImportCtx& c);
  /// A graph input that also has an initializer: an input with that default value.
  void add_input_with_default(const onnx::ValueInfoProto& input, const TensorProto& init);

  std::string origin_;
  int64_t opset_;
  Graph g_;
  std::unordered_map<std::string, ValueId> values_;
  /// The types the file declares (graph inputs, value_info, graph outputs), then the inferred
  /// ones merged in, by ONNX name.
  std::unordered_map<std::string, onnx::TypeProto> types_;
  ShapeInference inference_;
};

void Importer::set_type(ValueId v, const std::string& name, const std::string& where) {
  auto it = types_.find(name);
  KILN_USER_CHECK(it != types_.end() && it->second.has_tensor_type() &&
                  it->second.tensor_type().has_shape())
      << "'" << origin_ << "': ONNX shape inference gave no static shape for '" << name << "' ("
      << where << ")";
  const auto& tt = it->second.tensor_type();
  Value& val = g_.value(v);
  KILN_USER_CHECK(onnx_dtype(tt.elem_type(), &val.dtype))
      << "'" << origin_ << "': '" << name << "' (" << where << ") has element type "
      << onnx_dtype_name(tt.elem_type()) << ", which Kiln does not support";
  val.shape.clear();
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    KILN_USER_CHECK(dim.has_dim_value() && dim.dim_value() >= 0)
        << "'" << origin_ << "': '" << name << "' (" << where << ") has a dynamic dimension " << d
        << (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : std::string())
        << "; Kiln needs static shapes";
    val.shape.push_back(dim.dim_value());
  }
  const std::string too_large = tensor_size_problem(val.shape, val.dtype);
  KILN_USER_CHECK(too_large.empty())
      << "'" << origin_ << "': '" << name << "' (" << where << ") " << too_large;
  val.typed = true;
}

void Importer::infer(const ops::ImportCtx& c) {
  const NodeProto& n = c.proto();
  std::vector<const Value*> inputs;
  for (ValueId v : c.inputs) inputs.push_back(v == kNoValue ? nullptr : &g_.value(v));
  std::vector<const onnx::TypeProto*> declared;
  for (const std::string& o : n.output()) {
    auto it = types_.find(o);
    declared.push_back(o.empty() || it == types_.end() ? nullptr : &it->second);
  }
  std::vector<onnx::TypeProto> types = inference_.infer(n, inputs, declared);
  const ops::OpDef* def = ops::find_op(n.op_type());
  if (def != nullptr && def->output_shape != nullptr) {
    // The operator's own inference of its first output's shape, where libonnx's falls short.
    auto* shape = types[0].mutable_tensor_type()->mutable_shape();
    shape->Clear();
    for (int64_t d : def->output_shape(c)) shape->add_dim()->set_dim_value(d);
  }
  for (int i = 0; i < n.output_size(); ++i) {
    if (!n.output(i).empty()) types_[n.output(i)] = std::move(types[static_cast<size_t>(i)]);
  }
}

void Importer::add_input_with_default(const onnx::ValueInfoProto& input, const TensorProto& init) {
  const std::string where = "'" + origin_ + "': graph input '" + input.name() + "'";
  auto data = std::make_shared<const runtime::NDArray>(
      tensor_to_ndarray(init, where + " (its initializer)"));
  const auto& tt = input.type().tensor_type();
  KILN_USER_CHECK(input.type().has_tensor_type() && tt.elem_type() == onnx_elem_type(data->dtype()))
      << where << " is declared " << onnx_dtype_name(tt.elem_type())
      << ", but its initializer (the default value) is "
      << onnx_dtype_name(onnx_elem_type(data->dtype()));
  if (tt.has_shape()) {
    bool same = tt.shape().dim_size() == data->ndim();
    for (int d = 0; same && d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      same = !dim.has_dim_value() || dim.dim_value() == data->shape()[static_cast<size_t>(d)];
    }
    std::string declared = "[";
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      declared += (d ? "," : "") + (dim.has_dim_value()       ? std::to_string(dim.dim_value())
                                    : dim.dim_param().empty() ? "?"
                                                              : dim.dim_param());
    }
    declared += "]";
    KILN_USER_CHECK(same) << where << " is declared with shape " << declared
                          << ", but its initializer (the default value) has shape "
                          << data->shape_string();
  }
  // The input has the default's static shape, also where the declaration leaves a dimension open.
  onnx::TypeProto& type = types_[input.name()];
  type.mutable_tensor_type()->set_elem_type(onnx_elem_type(data->dtype()));
  auto* shape = type.mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (int64_t d : data->shape()) shape->add_dim()->set_dim_value(d);
  define(input.name(), g_.add_input_with_default(input.name(), std::move(data)));
}

ValueId Importer::output_value(const NodeProto& n, int i) {
  const std::string& name = n.output(i);
  ValueId v = g_.add_untyped_value(name);
  set_type(v, name, "output of node '" + n.name() + "' (" + n.op_type() + ")");
  define(name, v);
  return v;
}

bool Importer::try_fold(const ops::ImportCtx& c) {
  const std::string& op = c.proto().op_type();
  const std::string& out_name = c.proto().output(0);
  if (out_name.empty()) return false;
  {
    // Shape arithmetic on small integer constants (a rank computed from Shape and Size, a
    // negative axis made positive, a patch count divided out of an image size): folded here, so
    // that ConstantOfShape, Reshape, Resize and the like see constants.
    std::vector<const runtime::NDArray*> args;
    bool all_constant = true;
    for (ValueId v : c.inputs) {
      if (v != kNoValue && !g_.value(v).is_constant()) all_constant = false;
      args.push_back(v == kNoValue ? nullptr : g_.value(v).data.get());
    }
    Value& ov = g_.value(values_.at(out_name));
    runtime::NDArray folded;
    if (all_constant && fold_shape_arithmetic(c.proto(), args, ov, &folded)) {
      ov.data = std::make_shared<const runtime::NDArray>(std::move(folded));
      return true;
    }
  }
  // The operator's fold (a copy of the data in the inferred shape, a Cast), all inputs constant.
  const ops::OpDef* def = ops::find_op(op);
  if (def == nullptr || def->import_fold == nullptr) return false;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i] != kNoValue && !g_.value(c.inputs[i]).is_constant()) return false;
  }
  if (c.in(0) == kNoValue) return false;
  Value& ov = g_.value(values_.at(out_name));
  runtime::NDArray result;
  if (!def->import_fold(c, ov, &result)) return false;
  ov.data = std::make_shared<const runtime::NDArray>(std::move(result));
  return true;
}

bool Importer::inferred_static_shape(const ops::ImportCtx& c, std::vector<int64_t>* shape) {
  infer(c);
  auto it = types_.find(c.proto().output(0));
  if (it == types_.end() || !it->second.has_tensor_type() ||
      !it->second.tensor_type().has_shape()) {
    return false;
  }
  shape->clear();
  for (const auto& dim : it->second.tensor_type().shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0) return false;
    shape->push_back(dim.dim_value());
  }
  return true;
}

Graph Importer::run(const onnx::ModelProto& model) {
  const onnx::GraphProto& graph = model.graph();
  std::map<std::string, const TensorProto*> initializers;
  for (const TensorProto& t : graph.initializer()) initializers[t.name()] = &t;
  for (const auto& vi : graph.value_info()) types_[vi.name()] = vi.type();
  for (const auto& vi : graph.output()) types_[vi.name()] = vi.type();
  for (const auto& vi : graph.input()) types_[vi.name()] = vi.type();

  // Before IR version 4 every initializer had to be a graph input too: those are constants.
  const bool defaults = model.ir_version() >= 4;
  for (const TensorProto& t : graph.initializer()) {
    const bool input = std::any_of(graph.input().begin(), graph.input().end(),
                                   [&](const auto& vi) { return vi.name() == t.name(); });
    if (input && defaults) continue;
    define(t.name(),
           g_.add_constant(t.name(), tensor_to_ndarray(
                                         t, "'" + origin_ + "': initializer '" + t.name() + "'")));
  }
  for (const auto& input : graph.input()) {
    auto init = initializers.find(input.name());
    if (init != initializers.end()) {
      if (defaults) add_input_with_default(input, *init->second);
      continue;
    }
    const ValueId v = g_.add_input(input.name(), runtime::kFloat32, {});
    set_type(v, input.name(), "graph input");
    define(input.name(), v);
  }

  for (const NodeProto& original : graph.node()) {
    // An operator read as another (the opset-9 Upsample as the Resize it became): its entry's.
    const ops::OpDef* as_other = ops::find_op(original.op_type());
    const bool read_as = as_other != nullptr && as_other->read_as != nullptr;
    const NodeProto replaced = read_as ? as_other->read_as(original, origin_, *this) : NodeProto();
    const NodeProto& n = read_as ? replaced : original;
    ops::ImportCtx c(g_, values_, origin_, opset_, n);
    for (const std::string& name : n.input()) {
      if (name.empty()) {
        c.inputs.push_back(kNoValue);
        continue;
      }
      auto it = values_.find(name);
      if (it == values_.end()) {
        c.fail("input '" + name + "' is not defined by a graph input, an initializer or an " +
               "earlier node");
      }
      c.inputs.push_back(it->second);
    }
    if (std::all_of(n.output().begin(), n.output().end(),
                    [](const std::string& o) { return o.empty(); })) {
      c.fail("the node has no (named) output");
    }
    std::vector<const Value*> input_values;
    for (ValueId v : c.inputs) input_values.push_back(v == kNoValue ? nullptr : &g_.value(v));
    validate_node(n, opset_, input_values, origin_);
    const std::string& op = n.op_type();
    // Operators computed at import (Constant, Shape, ConstantOfShape, ...) or aliased (Identity,
    // Dropout): their registry entry's evaluate defines the outputs, and no graph node is made.
    const ops::OpDef& def = *ops::find_op(op);  // check_model accepted only registered operators
    if (def.evaluate != nullptr && def.evaluate(c, *this)) continue;
    // The inputs that are parameters Kiln needs at compile time: an error naming the node and the
    // input when one is not a constant, before shape inference (which would give no static shape).
    if (def.constant_inputs != nullptr) def.constant_inputs(c);
    infer(c);
    std::vector<ValueId> outs;
    for (int i = 0; i < n.output_size(); ++i) {
      outs.push_back(n.output(i).empty() ? kNoValue : output_value(n, i));
    }
    if (try_fold(c)) continue;
    // A node the operator's entry makes into others (Pow(x, 2) into x * x).
    if (def.rewrite != nullptr && def.rewrite(c, outs, *this)) continue;
    // The attributes with their defaults filled in, from the operator's import.
    Attrs attrs = def.import != nullptr ? def.import(c) : Attrs{};
    while (!outs.empty() && outs.back() == kNoValue) outs.pop_back();
    // A node name is unique in Kiln's graph even when the file leaves it empty.
    std::string name = n.name().empty() ? op + "_" + std::to_string(g_.nodes().size()) : n.name();
    g_.add_node(Node{def.node_op.empty() ? op : def.node_op, std::move(name), std::move(c.inputs),
                     std::move(outs), std::move(attrs)});
  }

  for (const auto& out : graph.output()) {
    auto it = values_.find(out.name());
    KILN_USER_CHECK(it != values_.end())
        << "'" << origin_ << "': graph output '" << out.name() << "' is never defined";
    ValueId v = it->second;
    // Aliases (Identity, Dropout) may have made the output another value: a node's output is
    // renamed back to the output's name; a graph input, a constant, or a value already returned
    // under another name is copied by an Identity node, so every output is computed and named.
    const bool computed = g_.producer(v) >= 0;
    if (computed && (g_.value(v).name == out.name() || !g_.is_output(v))) {
      g_.value(v).name = out.name();
    } else {
      const Value& val = g_.value(v);
      v = g_.add_op("Identity", "return_" + out.name(), {v}, {}, val.dtype, val.shape);
      g_.value(v).name = out.name();
    }
    g_.add_output(v);
  }
  g_.remove_dead_nodes();
  g_.verify();
  return std::move(g_);
}

Graph import_model(onnx::ModelProto& model, const std::string& origin,
                   const OnnxImportOptions& options) {
  KILN_USER_CHECK(model.has_graph()) << "'" << origin << "' is not an ONNX model: it has no graph";
  bind_input_shapes(model, origin, options.input_shapes);
  bind_inputs(model, origin, options.constant_inputs);
  const int64_t opset = check_model(model, origin);
  expand_qlinear(model, origin);
  return Importer(model, origin, opset).run(model);
}

}  // namespace

const std::vector<std::string>& supported_onnx_ops() {
  static const std::vector<std::string> names = ops::onnx_operator_names();
  return names;
}

std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& text) {
  const size_t eq = text.rfind('=');
  KILN_USER_CHECK(eq != std::string::npos && eq > 0)
      << "--input-shape needs NAME=D0,D1,... (such as x=1,3,224,224), got '" << text << "'";
  std::pair<std::string, std::vector<int64_t>> out{text.substr(0, eq), {}};
  const std::string dims = text.substr(eq + 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    const std::string item = dims.substr(pos, comma - pos);
    KILN_USER_CHECK(!item.empty() && item.size() <= 12 &&
                    item.find_first_not_of("0123456789") == std::string::npos &&
                    std::stoll(item) > 0)
        << "--input-shape '" << text << "': '" << item
        << "' is not a positive whole number (give NAME=D0,D1,..., such as x=1,3,224,224)";
    out.second.push_back(std::stoll(item));
    pos = comma + 1;
    KILN_USER_CHECK(comma == dims.size() || pos < dims.size())
        << "--input-shape '" << text << "' ends with a comma";
  }
  return out;
}

Graph import_onnx_bytes(const std::string& bytes, const std::string& origin,
                        const OnnxImportOptions& options) {
  onnx::ModelProto model;
  KILN_USER_CHECK(!bytes.empty()) << "cannot parse ONNX model '" << origin
                                  << "': the file is empty";
  KILN_USER_CHECK(model.ParseFromString(bytes))
      << "cannot parse ONNX model '" << origin << "': not a valid ModelProto (" << bytes.size()
      << " bytes; the file is truncated or not an ONNX model)";
  return import_model(model, origin, options);
}

Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "cannot open ONNX model '" << path << "': " << std::strerror(errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  KILN_USER_CHECK(!in.bad()) << "cannot read ONNX model '" << path << "'";
  return import_onnx_bytes(ss.str(), path, options);
}

}  // namespace kiln::graph
