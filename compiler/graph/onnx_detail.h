// Internals of the ONNX front end shared by its files: converting tensors between ONNX and Kiln,
// and the checks and rewrites a model goes through before it is imported. Not a public API.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deploy/runtime/ndarray.h"

namespace kiln::graph::onnx_detail {

inline constexpr int64_t kMinOpset = 11;
inline constexpr int64_t kMaxOpset = 18;

/// "a, b, c"
std::string join(const std::vector<std::string>& items);

// ---- tensors (onnx_tensor.cc) ----

/// The Kiln dtype of an ONNX TensorProto element type; false when Kiln has none.
bool onnx_dtype(int elem_type, KilnDType* out);
/// "FLOAT", "BFLOAT16", ... for messages.
std::string onnx_dtype_name(int elem_type);
float half_to_float(uint16_t h);
/// Element i of a numeric array as a double, whatever its dtype.
double element_as_double(const runtime::NDArray& a, int64_t i);
/// The data of a TensorProto (raw or typed fields); kiln::Error naming `what` when malformed.
runtime::NDArray tensor_to_ndarray(const onnx::TensorProto& t, const std::string& what);
/// The TensorProto holding `a` (raw data), for constants folded back into the model.
onnx::TensorProto to_tensor_proto(const std::string& name, const runtime::NDArray& a);

// ---- the model before import (onnx_model_check.cc) ----

/// Checks what does not need shapes: a graph, the opset, supported operators, attributes libonnx
/// divides by, static input shapes. Returns the opset of the default domain.
int64_t check_model(const onnx::ModelProto& model, const std::string& origin);
/// ONNX's strict shape inference; kiln::Error naming `origin` with libonnx's message on failure.
void infer_shapes(onnx::ModelProto& model, const std::string& origin);
/// The tensor behind `name` if it is an initializer or a Constant node's `value`, else null.
const onnx::TensorProto* find_constant_tensor(const onnx::GraphProto& graph, const std::string& name);
/// Rewrites opset-18 Pads (with an `axes` input) into the opset-13 form libonnx 1.12 infers.
void lower_opset18_pads(onnx::ModelProto& model);
/// Turns the graph inputs named in `bound` into initializers holding the given values.
void bind_inputs(onnx::ModelProto& model, const std::string& origin,
                 const std::map<std::string, runtime::NDArray>& bound);

}  // namespace kiln::graph::onnx_detail
