// Internals of the ONNX front end shared by its files: converting tensors between ONNX and Kiln,
// the checks a model goes through before it is imported, the validation of each node against the
// ONNX specification, and ONNX shape inference one node at a time. Not a public API.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/graph/graph.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::graph::onnx_detail {

inline constexpr int64_t kMinOpset = 11;
inline constexpr int64_t kMaxOpset = 18;

/// Whether reduction `op` takes its axes as input 1 at `opset` (ReduceSum from opset 13, the
/// other reductions from opset 18, with noop_with_empty_axes) rather than as an attribute.
inline bool axes_is_input(const std::string& op, int64_t opset) {
  return op == "ReduceSum" ? opset >= 13 : opset >= 18;
}

/// "a, b, c"
std::string join(const std::vector<std::string>& items);

// ---- tensors (onnx_tensor.cc) ----

/// The Kiln dtype of an ONNX TensorProto element type; false when Kiln has none.
bool onnx_dtype(int elem_type, KilnDType* out);
/// "FLOAT", "BFLOAT16", ... for messages.
std::string onnx_dtype_name(int elem_type);
/// The ONNX element type of a Kiln dtype (TensorProto::UNDEFINED when ONNX has none).
int onnx_elem_type(KilnDType dtype);
/// "tensor(float)", as ONNX's type constraints spell types.
std::string onnx_type_string(KilnDType dtype);
float half_to_float(uint16_t h);
/// Element i of a numeric array as a double, whatever its dtype.
double element_as_double(const runtime::NDArray& a, int64_t i);
/// The data of a TensorProto (raw or typed fields); kiln::Error naming `what` when malformed.
runtime::NDArray tensor_to_ndarray(const onnx::TensorProto& t, const std::string& what);
/// Rewrites each QLinearConv and QLinearMatMul of `model` into its QDQ form (onnx_qlinear.cc).
void expand_qlinear(onnx::ModelProto& model, const std::string& origin);
/// The TensorProto holding `a` (raw data), for constants given to shape inference.
onnx::TensorProto to_tensor_proto(const std::string& name, const runtime::NDArray& a);

// ---- shape arithmetic (onnx_shape_arith.cc) ----

/// The value of node `n` (Neg, Add, Sub, Mul, Div, Max, Min, Equal, Less, Greater, Not, Where, or
/// Slice along axis 0) when it computes a shape: constant int64 or bool `inputs` (null where
/// omitted) of at most one dimension and 64 elements, into `out`'s dtype and shape (from shape
/// inference). False, leaving `result` alone, for anything else: that node stays in the graph.
bool fold_shape_arithmetic(const onnx::NodeProto& n,
                           const std::vector<const runtime::NDArray*>& inputs, const Value& out,
                           runtime::NDArray* result);

// ---- the model before import (onnx_model_check.cc) ----

/// Checks what does not need shapes: a graph, the opset, supported operators, static input shapes.
/// Returns the opset of the default domain.
int64_t check_model(const onnx::ModelProto& model, const std::string& origin);
/// Resize's output shape and the scale of each axis, from its constant scales or sizes (opset
/// 18's axes and keep_aspect_ratio_policy applied); false when neither is a constant.
bool resize_form(const onnx::NodeProto& n, const std::vector<const Value*>& inputs,
                 std::vector<int64_t>* out, std::vector<float>* scales);

/// Gives the graph inputs named in `shapes` those shapes (OnnxImportOptions::input_shapes), and
/// the symbols they bind to the same dimensions of value_info and graph outputs.
void bind_input_shapes(onnx::ModelProto& model, const std::string& origin,
                       const std::map<std::string, std::vector<int64_t>>& shapes);
/// Turns the graph inputs named in `bound` into initializers holding the given values.
void bind_inputs(onnx::ModelProto& model, const std::string& origin,
                 const std::map<std::string, runtime::NDArray>& bound);

// ---- each node, in order (onnx_validate.cc, onnx_model_check.cc) ----

/// Checks `node` against the ONNX specification at `opset`, its inputs having the types (and, for
/// constants, the values) of `inputs` (null where omitted): its operator's schema (input and
/// output counts, attributes and their types, element types) and the operator's own rules
/// (ranks, channels, inner dimensions, broadcasting, axes, window sizes, ...). kiln::Error naming
/// `origin`, the node, the operator, the input or attribute and the values that disagree.
void validate_node(const onnx::NodeProto& node, int64_t opset,
                   const std::vector<const Value*>& inputs, const std::string& origin);

/// The pads in effect of a window (Conv, MaxPool, AveragePool) over spatial sizes `in`: `pads`
/// under auto_pad NOTSET, none under VALID, and under SAME_UPPER / SAME_LOWER those that leave
/// ceil(in / stride) outputs, the odd one at the end (UPPER) or the beginning (LOWER). `extent`
/// is the dilated kernel size.
std::vector<int64_t> window_pads(const std::string& auto_pad, const std::vector<int64_t>& pads,
                                 const std::vector<int64_t>& in, const std::vector<int64_t>& extent,
                                 const std::vector<int64_t>& strides);

/// ONNX's strict shape inference, one node at a time, on a node that validate_node accepted (it
/// is not safe on others): libonnx's inference functions see the node with its inputs' types and
/// the integer constants among them. Shape data that ONNX's data propagation computes (Shape ->
/// Slice -> Concat chains) carries from node to node.
class ShapeInference {
 public:
  ShapeInference(const onnx::ModelProto& model, std::string origin);
  /// The type of each output of `node` (unset where inference gives none), merged with the
  /// types the file declares for them (`declared`, null where none); kiln::Error naming the node
  /// with libonnx's message when inference fails or disagrees with a declared type.
  std::vector<onnx::TypeProto> infer(const onnx::NodeProto& node,
                                     const std::vector<const Value*>& inputs,
                                     const std::vector<const onnx::TypeProto*>& declared);

 private:
  google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto> opset_imports_;
  std::string origin_;
  std::unordered_map<std::string, onnx::TensorShapeProto> shape_data_;
};

}  // namespace kiln::graph::onnx_detail
