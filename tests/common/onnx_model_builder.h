// Building small ONNX models in tests with libonnx's protobuf classes, so that the tests need no
// Python: inputs, initializers, nodes with attributes, and the serialized bytes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {

class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("kiln-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph()->set_name("test");
  }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  /// The model's IR version (7 unless set).
  void ir_version(int64_t v) { model_.set_ir_version(v); }

  /// A graph input; a negative dimension is dynamic, named `dim_param`.
  void input(const std::string& name, std::vector<int64_t> shape,
             int elem = onnx::TensorProto::FLOAT, const std::string& dim_param = "") {
    auto* vi = graph()->add_input();
    vi->set_name(name);
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* s = t->mutable_shape();
    for (int64_t d : shape) {
      auto* dim = s->add_dim();
      if (d < 0) {
        dim->set_dim_param(dim_param);
      } else {
        dim->set_dim_value(d);
      }
    }
    inputs_.emplace_back(name, std::move(shape));
  }
  void output(const std::string& name) { graph()->add_output()->set_name(name); }

  /// A float initializer holding `values` in float_data (or raw_data when `raw`).
  void init_values(const std::string& name, const std::vector<int64_t>& shape,
                   const std::vector<float>& values, bool raw = false) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    if (raw) {
      t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    } else {
      for (float f : values) t->add_float_data(f);
    }
  }
  /// An int64 initializer: a 1-D tensor, or a scalar when `scalar`.
  void init_int64(const std::string& name, const std::vector<int64_t>& values,
                  bool scalar = false) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  /// An int64 initializer of any shape.
  void init_int64_shaped(const std::string& name, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& values) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : shape) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }
  /// An int8 or uint8 initializer (`elem` onnx::TensorProto::INT8 / UINT8) of any shape, its
  /// values in raw_data.
  void init_8bit(const std::string& name, const std::vector<int64_t>& shape, int elem,
                 const std::vector<int>& values) {
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (int64_t d : shape) t->add_dims(d);
    std::string raw;
    for (int v : values) raw.push_back(static_cast<char>(v));
    t->set_raw_data(raw);
  }
  /// A float scalar initializer.
  void init_scalar(const std::string& name, float v) { init_values(name, {}, {v}); }

  /// A node named `name`.
  onnx::NodeProto* node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return n;
  }
  /// A node named after its operator and position ("Conv_1").
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    return node(op, op + "_" + std::to_string(graph()->node_size() + 1), inputs, outputs);
  }

  static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& ints) {
    auto* a = new_attr(n, name, onnx::AttributeProto::INTS);
    for (int64_t i : ints) a->add_ints(i);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, int64_t i) {
    new_attr(n, name, onnx::AttributeProto::INT)->set_i(i);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, float f) {
    new_attr(n, name, onnx::AttributeProto::FLOAT)->set_f(f);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::string& s) {
    new_attr(n, name, onnx::AttributeProto::STRING)->set_s(s);
  }

  std::string bytes() const { return model_.SerializeAsString(); }
  /// Writes the serialized model to `path` (without holding its bytes twice); false on failure.
  bool write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    return model_.SerializeToOstream(&out) && out.flush().good();
  }
  /// The inputs declared so far, with their shapes.
  const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs() const {
    return inputs_;
  }

 private:
  static onnx::AttributeProto* new_attr(onnx::NodeProto* n, const std::string& name,
                                        onnx::AttributeProto::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }

  onnx::ModelProto model_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs_;
};

}  // namespace kiln::testing
