// The ONNX front end: reads an ONNX model (opsets 11 to 18 of the default domain) into Kiln's graph
// IR. Every node is first validated against the ONNX specification (its schema's inputs,
// attributes and element types, and its operator's rules on shapes and attribute values); ONNX
// shape inference, run one node at a time on validated nodes, gives every value a static shape;
// initializers and Constant nodes become constants, and a graph input that also has an initializer
// becomes an input with that default value (IR version 4 and later); Identity and Dropout
// disappear; Shape, and Gather, Unsqueeze, Squeeze, Concat, Reshape, Flatten, Cast on constant
// inputs, are evaluated; inputs that newer opsets use for parameters (Unsqueeze/Squeeze axes, Clip
// min/max, Pad pads, Slice starts/ends/axes/steps, Reshape shape) must be constant and become
// attributes; every supported operator gets its attributes with the ONNX defaults filled in
// (auto_pad resolved into explicit pads, negative axes made non-negative, Slice given per-axis
// clamped bounds), so passes never look up a default. See supported_onnx_ops() for what is
// accepted.
//
// Every problem in the model is a kiln::Error that names the file and the node, operator, input
// or attribute, value or opset; malformed files (truncated, garbage, bad attributes, shapes that
// disagree) never crash the importer.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::graph {

struct OnnxImportOptions {
  /// Graph inputs to read as constants holding these values, for parameters a model takes as
  /// inputs (ONNX's node tests feed Clip's bounds and Pad's pads this way). Each must match the
  /// input's declared dtype and shape.
  std::map<std::string, runtime::NDArray> constant_inputs;
  /// The shape each named graph input is compiled for (`--input-shape NAME=1,3,224,224`): binds
  /// the symbolic dimensions (`dim_param`, such as an exported model's "batch") of a model whose
  /// inputs are not all static. Each must name an input without an initializer, have its rank and
  /// agree with every fixed dimension it declares; a symbol used by several inputs takes one
  /// value. An input left with a symbolic dimension is an error that says how to bind it.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

/// Reads `NAME=D0,D1,...` (the value of `--input-shape`): kiln::Error naming `text` when it is not
/// a non-empty name, '=', and one or more positive whole numbers separated by commas (`NAME=` alone
/// is a scalar's empty shape).
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& text);

/// Reads the .onnx file at `path`.
Graph import_onnx(const std::string& path, const OnnxImportOptions& options = {});

/// Reads a serialized ModelProto; `origin` names it in error messages (a path, "<memory>").
Graph import_onnx_bytes(const std::string& bytes, const std::string& origin,
                        const OnnxImportOptions& options = {});

/// The ONNX operator types the front end accepts, sorted.
const std::vector<std::string>& supported_onnx_ops();

}  // namespace kiln::graph
