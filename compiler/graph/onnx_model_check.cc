// The checks and rewrites an ONNX model goes through before import: supported operators and
// opsets, attributes libonnx would divide by, static inputs, opset-18 Pads for libonnx 1.12, bound
// inputs, and shape inference.
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/onnx_frontend.h"

namespace kiln::graph::onnx_detail {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
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
    KILN_USER_CHECK(default_domain &&
                    std::binary_search(supported_onnx_ops().begin(), supported_onnx_ops().end(), n.op_type()))
        << "'" << origin << "': unsupported operator '"
        << (default_domain ? n.op_type() : n.domain() + "." + n.op_type()) << "' at node '"
        << n.name() << "' (Kiln supports: " << join(supported_onnx_ops()) << ")";
  }

  // An older opset is read as opset 11 when none of its operators changed in between: the
  // schema in force at the model's opset is the very one in force at opset 11.
  if (opset < kMinOpset) {
    for (const NodeProto& n : graph.node()) {
      const auto* old_schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), "");
      const auto* new_schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(kMinOpset), "");
      KILN_USER_CHECK(old_schema != nullptr && new_schema != nullptr &&
                      old_schema->since_version() == new_schema->since_version())
          << "'" << origin << "' uses ONNX opset " << opset << ", and operator '" << n.op_type()
          << "' (node '" << n.name() << "') changed before opset " << kMinOpset << "; Kiln accepts opsets "
          << kMinOpset << " to " << kMaxOpset << " (convert the model with onnx.version_converter)";
    }
    opset = kMinOpset;
  }

  // Attributes libonnx's shape inference divides by (it would crash on a zero stride).
  for (const NodeProto& n : graph.node()) {
    const std::string& op = n.op_type();
    if (op != "Conv" && op != "ConvTranspose" && op != "MaxPool" && op != "AveragePool") continue;
    for (const AttributeProto& a : n.attribute()) {
      const bool positive = a.name() == "strides" || a.name() == "dilations" ||
                            a.name() == "kernel_shape" || a.name() == "group";
      const bool non_negative = a.name() == "pads" || a.name() == "output_padding";
      if (!positive && !non_negative) continue;
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      if (a.type() == AttributeProto::INT) v.push_back(a.i());
      for (int64_t x : v) {
        KILN_USER_CHECK(positive ? x > 0 : x >= 0)
            << "'" << origin << "': node '" << n.name() << "' (" << op << "): attribute '"
            << a.name() << "' must be " << (positive ? "positive" : "non-negative") << ", got "
            << x;
      }
    }
  }

  // Graph inputs must have static shapes; initializers listed as inputs (IR < 4) are constants.
  std::set<std::string> initializer_names;
  for (const TensorProto& t : graph.initializer()) initializer_names.insert(t.name());
  for (const auto& input : graph.input()) {
    if (initializer_names.count(input.name())) continue;
    const std::string where = "graph input '" + input.name() + "'";
    KILN_USER_CHECK(input.type().has_tensor_type() && input.type().tensor_type().has_shape())
        << "'" << origin << "': " << where << " has no tensor type with a shape";
    const auto& shape = input.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d) {
      KILN_USER_CHECK(shape.dim(d).has_dim_value() && shape.dim(d).dim_value() >= 0)
          << "'" << origin << "': " << where << " has a dynamic dimension " << d
          << (shape.dim(d).has_dim_param() ? " ('" + shape.dim(d).dim_param() + "')" : "")
          << "; Kiln needs static shapes (export the model with fixed input sizes)";
    }
  }

  return opset;
}

void infer_shapes(onnx::ModelProto& model, const std::string& origin) {
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/1,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    while (!msg.empty() && std::isspace(static_cast<unsigned char>(msg.back()))) msg.pop_back();
    KILN_USER_ERROR() << "'" << origin << "': ONNX shape inference failed: " << msg;
  }
}

/// The tensor behind `name` if it is an initializer or a Constant node's `value`, else null.
const TensorProto* find_constant_tensor(const onnx::GraphProto& graph, const std::string& name) {
  for (const TensorProto& t : graph.initializer()) {
    if (t.name() == name) return &t;
  }
  for (const NodeProto& n : graph.node()) {
    if (n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == name &&
        n.attribute_size() == 1 && n.attribute(0).name() == "value") {
      return &n.attribute(0).t();
    }
  }
  return nullptr;
}

/// libonnx 1.12 knows opsets up to 17, and opset 18's Pad takes an `axes` input that its shape
/// inference rejects. Rewrites each such Pad into the opset-13 form (pads for every axis, no axes)
/// once a lenient inference has given the rank of its data. Pads it cannot rewrite are left for
/// the strict inference to report.
void lower_opset18_pads(onnx::ModelProto& model) {
  auto needs = [](const NodeProto& n) {
    return n.op_type() == "Pad" && n.input_size() >= 4 && !n.input(3).empty();
  };
  onnx::GraphProto* graph = model.mutable_graph();
  while (std::any_of(graph->node().begin(), graph->node().end(), needs)) {
    onnx::ModelProto probe = model;
    try {
      onnx::shape_inference::InferShapes(probe, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(false, 0, true));
    } catch (const std::exception&) {
      return;
    }
    std::unordered_map<std::string, int64_t> ranks;
    auto note = [&](const onnx::ValueInfoProto& vi) {
      if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape()) {
        ranks[vi.name()] = vi.type().tensor_type().shape().dim_size();
      }
    };
    for (const auto& vi : probe.graph().input()) note(vi);
    for (const auto& vi : probe.graph().value_info()) note(vi);
    for (const TensorProto& t : probe.graph().initializer()) ranks[t.name()] = t.dims_size();
    bool progress = false;
    for (NodeProto& n : *graph->mutable_node()) {
      if (!needs(n) || !ranks.count(n.input(0))) continue;
      const TensorProto* pads_t = find_constant_tensor(*graph, n.input(1));
      const TensorProto* axes_t = find_constant_tensor(*graph, n.input(3));
      if (pads_t == nullptr || axes_t == nullptr) continue;
      runtime::NDArray pads_a, axes_a;
      try {
        pads_a = tensor_to_ndarray(*pads_t, "pads");
        axes_a = tensor_to_ndarray(*axes_t, "axes");
      } catch (const Error&) {
        continue;
      }
      if (!runtime::dtype_equal(pads_a.dtype(), runtime::kInt64)) continue;
      std::vector<int64_t> given = pads_a.to_vector<int64_t>(), axes;
      if (runtime::dtype_equal(axes_a.dtype(), runtime::kInt64)) {
        axes = axes_a.to_vector<int64_t>();
      } else if (runtime::dtype_equal(axes_a.dtype(), runtime::kInt32)) {
        for (int32_t a : axes_a.to_vector<int32_t>()) axes.push_back(a);
      } else {
        continue;
      }
      const int64_t rank = ranks[n.input(0)];
      if (given.size() != 2 * axes.size()) continue;
      std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
      bool ok = true;
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (ax < 0 || ax >= rank) {
          ok = false;
          break;
        }
        full[static_cast<size_t>(ax)] = given[i];
        full[static_cast<size_t>(ax + rank)] = given[i + axes.size()];
      }
      if (!ok) continue;
      const std::string name = n.output(0) + "/kiln_full_pads";
      *graph->add_initializer() = to_tensor_proto(
          name, runtime::NDArray::from_vector(full, {static_cast<int64_t>(full.size())}));
      n.set_input(1, name);
      while (n.input_size() > 3) n.mutable_input()->RemoveLast();
      progress = true;
    }
    if (!progress) return;
  }
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
    *graph->add_initializer() = to_tensor_proto(name, array);
  }
}

}  // namespace kiln::graph::onnx_detail
