// The checks an ONNX model goes through before import (supported operators and opsets, static
// inputs), bound inputs, and ONNX shape inference one node at a time.
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/ops/registry.h"

namespace kiln::graph::onnx_detail {

using onnx::NodeProto;
using onnx::TensorProto;

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

/// For an operator of ONNX Runtime's domain that its quantization tools write in place of a
/// standard one Kiln takes: how to keep the standard one.
std::string contrib_hint(const std::string& op) {
  if (op != "DynamicQuantizeLSTM") return "";
  return " (onnxruntime.quantization.quantize_dynamic writes it for LSTM: leave LSTM out of "
         "op_types_to_quantize to keep the standard LSTM)";
}

/// Checks what does not need shapes: a graph, the opset, supported operators, static input shapes.
/// Returns the opset of the default domain (11 for an older model whose operators did not change
/// since: it reads as opset 11).
int64_t check_model(const onnx::ModelProto& model, const std::string& origin) {
  int64_t opset = 0;
  KILN_USER_CHECK(model.has_graph()) << "'" << origin << "' is not an ONNX model: it has no graph";
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  }
  KILN_USER_CHECK(opset != 0) << "'" << origin << "' declares no opset for the default ONNX domain";
  KILN_USER_CHECK(opset <= kMaxOpset)
      << "'" << origin << "' uses ONNX opset " << opset << "; Kiln accepts opsets " << kMinOpset
      << " to " << kMaxOpset << " (convert the model with onnx.version_converter)";
  const onnx::GraphProto& graph = model.graph();

  // Operators first, so that an unsupported one is reported as such, not as a failed inference.
  for (const NodeProto& n : graph.node()) {
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    KILN_USER_CHECK(default_domain || n.domain() != "com.microsoft")
        << "'" << origin << "': unsupported operator '" << n.op_type() << "' of domain '"
        << n.domain() << "' (ONNX Runtime's own operators, outside the ONNX standard) at node '"
        << n.name() << "'; Kiln takes the default ONNX domain's operators only"
        << contrib_hint(n.op_type());
    KILN_USER_CHECK(default_domain && std::binary_search(supported_onnx_ops().begin(),
                                                         supported_onnx_ops().end(), n.op_type()))
        << "'" << origin << "': unsupported operator '"
        << (default_domain ? n.op_type() : n.domain() + "." + n.op_type()) << "' at node '"
        << n.name() << "' (Kiln supports: " << join(supported_onnx_ops()) << ")";
  }

  // An older opset is read as opset 11 when none of its operators changed in between: the
  // schema in force at the model's opset is the very one in force at opset 11.
  if (opset < kMinOpset) {
    for (const NodeProto& n : graph.node()) {
      const auto* old_schema =
          onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
      const auto* new_schema =
          onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(kMinOpset), "");
      // Upsample-9, deprecated at 10: the importer reads it as the Resize it became.
      if (n.op_type() == "Upsample" && old_schema != nullptr && old_schema->since_version() == 9) {
        continue;
      }
      KILN_USER_CHECK(old_schema != nullptr && new_schema != nullptr &&
                      old_schema->since_version() == new_schema->since_version())
          << "'" << origin << "' uses ONNX opset " << opset << ", and operator '" << n.op_type()
          << "' (node '" << n.name() << "') changed before opset " << kMinOpset
          << "; Kiln accepts opsets " << kMinOpset << " to " << kMaxOpset
          << " (convert the model with onnx.version_converter)";
    }
    opset = kMinOpset;
  }

  // Graph inputs must have static shapes; one with an initializer has the initializer's shape
  // (the importer checks the two agree).
  std::set<std::string> initializer_names;
  for (const TensorProto& t : graph.initializer()) initializer_names.insert(t.name());
  for (const auto& input : graph.input()) {
    if (initializer_names.count(input.name())) continue;
    const std::string where = "graph input '" + input.name() + "'";
    KILN_USER_CHECK(input.type().has_tensor_type() && input.type().tensor_type().has_shape())
        << "'" << origin << "': " << where << " has no tensor type with a shape";
    const auto& shape = input.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d) {
      if (shape.dim(d).has_dim_value() && shape.dim(d).dim_value() >= 0) continue;
      // How to bind it: the fixed dimensions as declared, 1 for each open one.
      std::string suggestion;
      for (int e = 0; e < shape.dim_size(); ++e) {
        const auto& dim = shape.dim(e);
        suggestion +=
            (e ? "," : "") +
            std::to_string(dim.has_dim_value() && dim.dim_value() > 0 ? dim.dim_value() : 1);
      }
      KILN_USER_ERROR() << "'" << origin << "': input '" << input.name() << "' has a "
                        << (shape.dim(d).has_dim_param() && !shape.dim(d).dim_param().empty()
                                ? "symbolic dimension " + std::to_string(d) + " ('" +
                                      shape.dim(d).dim_param() + "')"
                                : "dynamic dimension " + std::to_string(d))
                        << "; give its size with --input-shape " << input.name() << "="
                        << suggestion;
    }
  }

  return opset;
}

bool resize_form(const NodeProto& n, const std::vector<const Value*>& inputs,
                 std::vector<int64_t>* out, std::vector<float>* scales) {
  auto get = [&](size_t i) -> const Value* {
    return i < inputs.size() && inputs[i] != nullptr ? inputs[i] : nullptr;
  };
  const Value* x = get(0);
  if (x == nullptr) return false;
  const std::vector<int64_t>& in = x->shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const bool upsample = n.op_type() == "Upsample";
  std::vector<int64_t> axes;
  std::string policy = "stretch";
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
    if (a.name() == "keep_aspect_ratio_policy") policy = a.s();
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  *out = in;
  scales->assign(in.size(), 1.0f);
  const Value* sc = get(upsample ? 1 : 2);
  const Value* sz = upsample ? nullptr : get(3);
  if (sc != nullptr && sc->num_elements() > 0) {
    if (!sc->is_constant() || sc->num_elements() != static_cast<int64_t>(axes.size())) return false;
    for (size_t k = 0; k < axes.size(); ++k) {
      const size_t a = static_cast<size_t>(axes[k]);
      const float s = static_cast<float>(element_as_double(*sc->data, static_cast<int64_t>(k)));
      (*scales)[a] = s;
      (*out)[a] = static_cast<int64_t>(std::floor(static_cast<double>(in[a]) * s));
    }
    return true;
  }
  if (sz == nullptr || !sz->is_constant() ||
      sz->num_elements() != static_cast<int64_t>(axes.size())) {
    return false;
  }
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < sz->num_elements(); ++k) {
    sizes.push_back(static_cast<int64_t>(element_as_double(*sz->data, k)));
  }
  if (policy == "not_larger" || policy == "not_smaller") {
    float s = policy == "not_larger" ? 1e30f : 0.0f;
    for (size_t k = 0; k < axes.size(); ++k) {
      const float r =
          static_cast<float>(sizes[k]) / static_cast<float>(in[static_cast<size_t>(axes[k])]);
      s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
    }
    for (int64_t a : axes) {
      (*scales)[static_cast<size_t>(a)] = s;
      (*out)[static_cast<size_t>(a)] =
          static_cast<int64_t>(std::round(s * static_cast<float>(in[static_cast<size_t>(a)])));
    }
    return true;
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t a = static_cast<size_t>(axes[k]);
    (*out)[a] = sizes[k];
    (*scales)[a] = static_cast<float>(sizes[k]) / static_cast<float>(in[a]);
  }
  return true;
}

ShapeInference::ShapeInference(const onnx::ModelProto& model, std::string origin)
    : opset_imports_(model.opset_import()), origin_(std::move(origin)) {}

std::vector<onnx::TypeProto> ShapeInference::infer(
    const NodeProto& node, const std::vector<const Value*>& inputs,
    const std::vector<const onnx::TypeProto*>& declared) {
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);  // >= 4: initializers need not be graph inputs
  *m.mutable_opset_import() = opset_imports_;
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("kiln_node");
  NodeProto* n = g->add_node();
  *n = node;
  std::set<std::string> given;
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string& name = node.input(i);
    if (name.empty() || !given.insert(name).second) continue;
    const Value& v = *inputs.at(static_cast<size_t>(i));
    // Integer constants of rank 0 or 1 are the parameters inference reads (shapes, axes, pads,
    // starts); other inputs need only their type.
    const bool integer = v.dtype.code != kKilnFloat && v.dtype.bits > 1;
    if (v.is_constant() && integer && v.shape.size() <= 1 && v.num_elements() <= 4096) {
      *g->add_initializer() = to_tensor_proto(name, *v.data);
      continue;
    }
    onnx::ValueInfoProto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx_elem_type(v.dtype));
    auto* shape = tt->mutable_shape();
    for (int64_t d : v.shape) shape->add_dim()->set_dim_value(d);
  }
  // Where the operator's opset-18 form is newer than libonnx 1.12's schemas, or its inference
  // needs more than the node gives, its registry entry adapts the node (or types it itself).
  int64_t opset = 0;
  for (const auto& o : opset_imports_) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  const ops::OpDef* def = ops::find_op(node.op_type());
  if (def != nullptr && def->inference_form != nullptr) {
    std::vector<onnx::TypeProto> types;
    if (def->inference_form({node, inputs, opset, n, g}, &types)) return types;
  }
  for (int i = 0; i < node.output_size(); ++i) {
    onnx::ValueInfoProto* vi = g->add_output();
    vi->set_name(node.output(i));
    if (static_cast<size_t>(i) < declared.size() && declared[static_cast<size_t>(i)] != nullptr) {
      *vi->mutable_type() = *declared[static_cast<size_t>(i)];
    }
  }
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/1,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options,
                                       &shape_data_);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    while (!msg.empty() && std::isspace(static_cast<unsigned char>(msg.back()))) msg.pop_back();
    KILN_USER_ERROR() << "'" << origin_ << "': node '" << node.name() << "' (" << node.op_type()
                      << "): ONNX shape inference failed: " << msg;
  }
  std::vector<onnx::TypeProto> out;
  for (int i = 0; i < node.output_size(); ++i) out.push_back(m.graph().output(i).type());
  return out;
}

namespace {

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string declared_string(const onnx::TensorShapeProto& shape) {
  std::string s = "[";
  for (int d = 0; d < shape.dim_size(); ++d) {
    const auto& dim = shape.dim(d);
    s += (d ? "," : "") + (dim.has_dim_value()       ? std::to_string(dim.dim_value())
                           : dim.dim_param().empty() ? std::string("?")
                                                     : dim.dim_param());
  }
  return s + "]";
}

/// Replaces each dimension of `type` whose symbol `symbols` binds by its value.
void substitute_symbols(onnx::TypeProto* type, const std::map<std::string, int64_t>& symbols) {
  if (!type->has_tensor_type() || !type->tensor_type().has_shape()) return;
  auto* shape = type->mutable_tensor_type()->mutable_shape();
  for (int d = 0; d < shape->dim_size(); ++d) {
    auto* dim = shape->mutable_dim(d);
    if (!dim->has_dim_param()) continue;
    auto it = symbols.find(dim->dim_param());
    if (it != symbols.end()) dim->set_dim_value(it->second);
  }
}

}  // namespace

void bind_input_shapes(onnx::ModelProto& model, const std::string& origin,
                       const std::map<std::string, std::vector<int64_t>>& shapes) {
  if (shapes.empty()) return;
  onnx::GraphProto* graph = model.mutable_graph();
  std::set<std::string> initializer_names;
  for (const TensorProto& t : graph->initializer()) initializer_names.insert(t.name());
  std::vector<std::string> names;  // the inputs a shape may be given for
  for (const auto& input : graph->input()) {
    if (!initializer_names.count(input.name())) names.push_back("'" + input.name() + "'");
  }
  // symbol -> (value, the input and dimension that bound it)
  std::map<std::string, std::pair<int64_t, std::string>> symbols;
  for (const auto& [name, dims] : shapes) {
    auto& inputs = *graph->mutable_input();
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const onnx::ValueInfoProto& vi) { return vi.name() == name; });
    KILN_USER_CHECK(it != inputs.end() && !initializer_names.count(name))
        << "'" << origin << "': --input-shape names '" << name << "', which is not an input of "
        << "the model" << (it != inputs.end() ? " (it has an initializer, a fixed value)" : "")
        << "; its inputs are " << (names.empty() ? "none" : join(names));
    const std::string where = "'" + origin + "': input '" + name + "'";
    for (size_t d = 0; d < dims.size(); ++d) {
      KILN_USER_CHECK(dims[d] > 0) << where << ": --input-shape gives dimension " << d
                                   << " the size " << dims[d] << "; sizes must be positive";
    }
    KILN_USER_CHECK(it->type().has_tensor_type())
        << where << " is not a tensor; --input-shape binds tensors' shapes";
    auto* tt = it->mutable_type()->mutable_tensor_type();
    if (tt->has_shape()) {
      const auto& shape = tt->shape();
      KILN_USER_CHECK(static_cast<size_t>(shape.dim_size()) == dims.size())
          << where << " has rank " << shape.dim_size() << " (declared " << declared_string(shape)
          << "), but --input-shape gives " << dims.size() << " dimensions, " << dims_string(dims);
      for (int d = 0; d < shape.dim_size(); ++d) {
        const auto& dim = shape.dim(d);
        const int64_t given = dims[static_cast<size_t>(d)];
        if (dim.has_dim_value()) {
          KILN_USER_CHECK(dim.dim_value() == given)
              << where << ": dimension " << d << " is " << dim.dim_value()
              << " in the model, but --input-shape gives " << given << " (declared "
              << declared_string(shape) << ", given " << dims_string(dims) << ")";
        } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
          const std::string here = "input '" + name + "' dimension " + std::to_string(d);
          auto [sym, fresh] = symbols.emplace(dim.dim_param(), std::make_pair(given, here));
          KILN_USER_CHECK(fresh || sym->second.first == given)
              << "'" << origin << "': the symbolic dimension '" << dim.dim_param()
              << "' is bound to " << sym->second.first << " by " << sym->second.second << " and to "
              << given << " by " << here << "; a symbol has one size";
        }
      }
    }
    auto* shape = tt->mutable_shape();
    shape->clear_dim();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  // The declared types of intermediate values and outputs use the same symbols.
  std::map<std::string, int64_t> values;
  for (const auto& [symbol, bound] : symbols) values[symbol] = bound.first;
  for (auto& vi : *graph->mutable_value_info()) substitute_symbols(vi.mutable_type(), values);
  for (auto& vi : *graph->mutable_output()) substitute_symbols(vi.mutable_type(), values);
}

/// Turns the graph inputs named in `bound` into initializers holding the given values.
void bind_inputs(onnx::ModelProto& model, const std::string& origin,
                 const std::map<std::string, runtime::NDArray>& bound) {
  onnx::GraphProto* graph = model.mutable_graph();
  for (const auto& [name, array] : bound) {
    auto& inputs = *graph->mutable_input();
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const onnx::ValueInfoProto& vi) { return vi.name() == name; });
    KILN_USER_CHECK(it != inputs.end())
        << "'" << origin << "': cannot bind '" << name << "' to a constant: no graph input has "
        << "that name";
    KILN_USER_CHECK(array.defined())
        << "'" << origin << "': the value bound to '" << name << "' is a null array";
    const auto& tt = it->type().tensor_type();
    KilnDType declared{};
    KILN_USER_CHECK(it->type().has_tensor_type() && onnx_dtype(tt.elem_type(), &declared) &&
                    runtime::dtype_equal(declared, array.dtype()))
        << "'" << origin << "': the value bound to graph input '" << name << "' is "
        << runtime::dtype_to_string(array.dtype()) << ", the input is declared "
        << onnx_dtype_name(tt.elem_type());
    if (tt.has_shape()) {
      bool same = tt.shape().dim_size() == array.ndim();
      for (int d = 0; same && d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        same = !dim.has_dim_value() || dim.dim_value() == array.shape()[static_cast<size_t>(d)];
      }
      KILN_USER_CHECK(same) << "'" << origin << "': the value bound to graph input '" << name
                            << "' has shape " << array.shape_string()
                            << ", which the input's declared shape does not admit";
    }
    inputs.erase(it);
    auto& inits = *graph->mutable_initializer();
    auto init = std::find_if(inits.begin(), inits.end(),
                             [&](const TensorProto& t) { return t.name() == name; });
    *(init != inits.end() ? &*init : graph->add_initializer()) = to_tensor_proto(name, array);
  }
}

}  // namespace kiln::graph::onnx_detail
