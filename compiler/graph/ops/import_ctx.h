// ImportCtx: the ONNX node the importer (onnx_frontend.cc) is reading, with the values of its
// inputs and the accessors the family files' imports use: attributes with their defaults, the
// constant inputs that are parameters, errors naming the file, the node and the operator.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::graph::ops {

class ImportCtx {
 public:
  /// `values` maps the ONNX names defined so far to the graph's values.
  ImportCtx(const Graph& g, const std::unordered_map<std::string, ValueId>& values,
            const std::string& origin, int64_t opset, const onnx::NodeProto& proto)
      : g_(g),
        values_(values),
        origin_(origin),
        opset_(opset),
        proto_(proto),
        where_("node '" + proto.name() + "' (" + proto.op_type() + ")") {}

  const onnx::NodeProto& proto() const { return proto_; }
  const std::string& op() const { return proto_.op_type(); }
  /// The node's name, or "<op>_<index>" (its place in the graph so far) for an unnamed one: the
  /// name of the nodes a rewrite writes in its place and the prefix of their values.
  std::string node_name() const {
    return proto_.name().empty() ? proto_.op_type() + "_" + std::to_string(g_.nodes().size())
                                 : proto_.name();
  }
  /// The model's path (or "<memory>"), for messages.
  const std::string& origin() const { return origin_; }
  int64_t opset() const { return opset_; }
  const Graph& graph() const { return g_; }
  /// "node 'conv1' (Conv)".
  const std::string& where() const { return where_; }
  /// The node's inputs as graph values, kNoValue for "" and for absent trailing ones. An import
  /// may shorten it: inputs it turned into attributes are not the graph node's.
  std::vector<ValueId> inputs;

  /// kiln::Error "error: 'model.onnx': node 'conv1' (Conv): what".
  [[noreturn]] void fail(const std::string& what) const;

  ValueId in(size_t i) const { return i < inputs.size() ? inputs[i] : kNoValue; }
  /// Input i's value; an error when the node omits it.
  const Value& in_value(size_t i) const;
  int64_t in_rank(size_t i) const { return static_cast<int64_t>(in_value(i).shape.size()); }
  /// The node's output i (already typed by inference); an error if the file leaves it unnamed.
  const Value& output(size_t i) const;
  const Value& first_output() const { return output(0); }

  /// Constant input i's data, or null when it is omitted or not a constant.
  const runtime::NDArray* const_input(size_t i) const;
  /// Constant input i (`what` names it); an error if it is not a constant.
  const runtime::NDArray& need_constant(size_t i, const char* what) const;
  /// An integer constant input (int32 or int64) as int64s; an error if it is not a constant.
  std::vector<int64_t> const_ints(size_t i, const char* what) const;
  /// A scalar constant input as a float, or `dflt` if the input is omitted.
  float const_float(size_t i, const char* what, float dflt) const;

  /// The attribute named `name`, or null.
  const onnx::AttributeProto* attr(const std::string& name) const;
  int64_t attr_i(const char* name, int64_t dflt) const;
  float attr_f(const char* name, float dflt) const;
  std::string attr_s(const char* name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> dflt) const;

 private:
  const Graph& g_;
  const std::unordered_map<std::string, ValueId>& values_;
  const std::string& origin_;
  const int64_t opset_;
  const onnx::NodeProto& proto_;
  const std::string where_;
};

/// What an operator computed or aliased at import does to the importer's state (the Importer of
/// onnx_frontend.cc implements it).
class ImportSink {
 public:
  /// Defines ONNX name `name` as a new constant holding `data`.
  virtual void define_constant(const std::string& name, runtime::NDArray data) = 0;
  /// Defines ONNX name `name` as another name of value `v`.
  virtual void define_alias(const std::string& name, ValueId v) = 0;
  /// Types the node's outputs by ONNX shape inference; whether output 0 then has a static shape
  /// (put in *shape).
  virtual bool infer_outputs(const ImportCtx& c, std::vector<int64_t>* shape) = 0;
  /// The node's output i as a new value of the type inference gave it.
  virtual ValueId add_output(const ImportCtx& c, int i) = 0;
  virtual Value& value(ValueId v) = 0;
  /// A new intermediate value, typed, for a node a rewrite makes (`name`: the rewritten node's
  /// and a suffix, unique in the graph).
  virtual ValueId add_value(const std::string& name, KilnDType dtype,
                            std::vector<int64_t> shape) = 0;
  /// A new constant holding `data`, for a node a rewrite makes (`name` as add_value's).
  virtual ValueId add_constant(const std::string& name, runtime::NDArray data) = 0;
  /// Appends a graph node (its inputs defined, its outputs the node's, typed).
  virtual void add_node(Node node) = 0;

 protected:
  ~ImportSink() = default;
};

/// kiln::Error "the inferred output float32[2,3] does not match the inputs" unless `ok`: what a
/// fold checks before it copies any byte.
void check_folded(const ImportCtx& c, const Value& out, bool ok);

/// A constant's strided view copied at import (Slice, Transpose of constants: a window's padding
/// computed by the exporter from shapes): output element i reads `x` at
/// sum_d (start[d] + i[d] * step[d]) * stride of x's axis axis_of[d]. False (nothing folded) when
/// the output holds more than kImportFoldMaxElements: data that large is left to fold_constants.
/// An empty result is folded too (Concat drops empty inputs: concat_inference, import_concat).
constexpr int64_t kImportFoldMaxElements = int64_t{1} << 16;
bool fold_strided_view(const ImportCtx& c, const Value& out, const std::vector<int64_t>& axis_of,
                       const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                       runtime::NDArray* result);

/// The pads of a window (Conv, ConvTranspose, the poolings) with auto_pad SAME_UPPER, SAME_LOWER or
/// VALID resolved for input 0's spatial sizes `in_sizes`; the explicit pads (default 0) otherwise.
std::vector<int64_t> resolve_pads(const ImportCtx& c, const std::vector<int64_t>& in_sizes,
                                  const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dilations);

/// A possibly negative axis (validation has checked its range) made non-negative.
inline int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace kiln::graph::ops
