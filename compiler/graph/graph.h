// The graph IR: a dataflow graph of operators over tensors, what the ONNX front end produces and
// what graph-level passes (constant folding, batch-norm folding, operator fusion, layout
// transformation, memory planning) rewrite before each fused operator is handed to the tensor
// compiler.
//
//   graph(%0: float32[1,3,224,224]) {
//     const %1 "conv1.weight" : float32[64,3,7,7]
//     %2 = Conv(%0, %1) {dilations=[1,1], group=1, ...} : float32[1,64,112,112]
//     %3 = Relu(%2) : float32[1,64,112,112]
//     return %3
//   }
//
// A Value is a tensor with a name, a dtype and a static shape; a constant Value also holds its
// data. Values live in an arena and are named by their ValueId, which never changes: passes refer
// to values by id and rewiring an edge is changing an id in a node's input list. Nodes are kept in
// topological order in a plain vector that passes may edit directly (replace a node, insert new
// ones, erase some); remove_dead_nodes() and sort_topologically() restore the invariants that
// verify() checks. Values no node uses are left in the arena (ids stay stable) and are not printed.
//
// A graph input may have a default value (ONNX: an initializer that is also a graph input): the
// caller of the compiled model may give another array of the same dtype and shape, or none, and
// then the default is used. Such an input is not a constant: no pass folds it.
//
// A Graph is copyable; constants and defaults share their (immutable) data between copies.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "compiler/ir/type.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::graph {

/// Index of a value in its graph's arena.
using ValueId = int32_t;
/// An omitted optional input of a node (ONNX's empty input name).
inline constexpr ValueId kNoValue = -1;

/// A tensor of the graph: a graph input, a constant or the output of a node.
struct Value {
  std::string name;
  KilnDType dtype{};           ///< runtime dtype: "float32", "int64", "bool" (uint 1-bit)
  std::vector<int64_t> shape;  ///< static shape; [] is a scalar
  bool typed = false;          ///< dtype and shape are set (verify() requires it of used values)
  /// The data of a constant (null otherwise). Immutable and shared between graph copies: a pass
  /// that changes a constant makes a new array.
  std::shared_ptr<const runtime::NDArray> data;

  bool is_constant() const { return data != nullptr; }
  bool is_float32() const;
  /// The dtype as the loop IR spells it (float32 -> ir::kFloat32, bool -> ir::kBool).
  ir::DataType ir_dtype() const;
  int64_t num_elements() const;
  /// "float32[1,64,112,112]", or "?" when not typed.
  std::string type_string() const;
};

/// A tensor-valued attribute (ONNX's TensorProto attributes, e.g. ConstantOfShape's value).
using TensorAttr = std::shared_ptr<const runtime::NDArray>;
/// An attribute value: int, float, string, ints, floats or tensor.
using Attr =
    std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, TensorAttr>;
/// Attributes by name, sorted so that printing is deterministic.
using Attrs = std::map<std::string, Attr>;

/// One operator application: outputs = op(inputs) {attrs}.
struct Node {
  std::string op;                ///< ONNX operator type: "Conv", "Relu", "Gemm", ...
  std::string name;              ///< unique within the graph when imported; for messages
  std::vector<ValueId> inputs;   ///< kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  ///< kNoValue for an omitted optional output (LSTM's Y)
  Attrs attrs;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  /// Typed attribute access; kiln::InternalError naming the node if missing or of another kind
  /// (the front end fills in every default, so passes may rely on presence).
  int64_t i(const std::string& key) const;
  float f(const std::string& key) const;
  const std::string& s(const std::string& key) const;
  const std::vector<int64_t>& ints(const std::string& key) const;
  const std::vector<float>& floats(const std::string& key) const;
  const TensorAttr& tensor(const std::string& key) const;
  /// With a default for an absent attribute.
  int64_t i(const std::string& key, int64_t dflt) const;
  float f(const std::string& key, float dflt) const;
};

class Graph {
 public:
  // --- building -------------------------------------------------------------------------------
  /// A new graph input (not constant); it is appended to inputs().
  ValueId add_input(std::string name, KilnDType dtype, std::vector<int64_t> shape);
  /// A new graph input whose value is `dflt` unless the caller gives another (its dtype and shape
  /// are the array's).
  ValueId add_input_with_default(std::string name, std::shared_ptr<const runtime::NDArray> dflt);
  /// A new constant holding `data` (its dtype and shape are the array's).
  ValueId add_constant(std::string name, runtime::NDArray data);
  ValueId add_constant(std::string name, std::shared_ptr<const runtime::NDArray> data);
  /// A new intermediate value (a node's output), typed.
  ValueId add_value(std::string name, KilnDType dtype, std::vector<int64_t> shape);
  /// A new intermediate value whose type is not known yet (typed == false).
  ValueId add_untyped_value(std::string name);
  /// Appends a node (the caller keeps topological order, or calls sort_topologically());
  /// returns its index in nodes().
  size_t add_node(Node node);
  /// Appends a node with fresh output values of the given types and returns its first output.
  ValueId add_op(std::string op, std::string name, std::vector<ValueId> inputs, Attrs attrs,
                 KilnDType dtype, std::vector<int64_t> shape);
  /// Marks `v` as a graph output.
  void add_output(ValueId v) { outputs_.push_back(v); }

  // --- access ----------------------------------------------------------------------------------
  size_t num_values() const { return values_.size(); }
  const Value& value(ValueId v) const;
  Value& value(ValueId v);
  /// Nodes in topological order; passes may edit the vector directly.
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  /// The default value of graph input `v`, or null when it has none.
  std::shared_ptr<const runtime::NDArray> input_default(ValueId v) const;
  std::vector<ValueId>& outputs() { return outputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  /// The id of the value named `name`, or kNoValue. Linear in the number of values.
  ValueId find_value(const std::string& name) const;

  // --- queries ---------------------------------------------------------------------------------
  /// Index in nodes() of the node producing `v`, or -1 for inputs, constants and dangling values.
  int64_t producer(ValueId v) const;
  /// Indices in nodes() of the nodes reading `v`, in order, each once.
  std::vector<size_t> consumers(ValueId v) const;
  /// Whether `v` is one of the graph's outputs.
  bool is_output(ValueId v) const;
  /// The node producing `v`, or null for inputs, constants, dangling values and kNoValue.
  const Node* producer_node(ValueId v) const;
  /// Whether one node reads `v`, and nothing else (not a graph output, not that node twice).
  bool single_reader(ValueId v) const;

  // --- rewriting -------------------------------------------------------------------------------
  /// Makes every node input and graph output that reads `from` read `to` instead.
  void replace_all_uses(ValueId from, ValueId to);
  /// Erases the nodes whose outputs no graph output depends on; returns how many.
  size_t remove_dead_nodes();
  /// Reorders nodes() so that each node comes after the producers of its inputs (stable: the
  /// existing order is kept where it is already valid). kiln::InternalError on a cycle.
  void sort_topologically();

  // --- checking and printing ------------------------------------------------------------------
  /// Checks the invariants: value ids in range, nodes in topological order, every input defined
  /// (a graph input, a constant or an earlier node's output), each value produced once, every
  /// used value typed with non-negative dims, defaults only on graph inputs and of their type.
  /// Throws kiln::InternalError naming the node and value.
  void verify() const;
  /// The whole graph in the format shown at the top of this file.
  std::string to_string() const;
  /// One node: "%3 = Conv(%0, %1) {group=1, strides=[2,2]} : float32[1,64,112,112]".
  std::string node_to_string(const Node& node) const;

 private:
  // A deque: a reference to a value stays valid while more are added (an importer's rewrite
  // reads its node's inputs while it adds the values of the nodes it becomes).
  std::deque<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::map<ValueId, std::shared_ptr<const runtime::NDArray>> input_defaults_;
};

/// "[2,2]" / "1.5" / "\"NOTSET\"" / "tensor<float32[3]>" — for printing.
std::string attr_to_string(const Attr& attr);

}  // namespace kiln::graph
