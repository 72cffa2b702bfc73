// What the ONNX importer's validation tests share (onnx_validation_test.cc: what every model must
// satisfy; onnx_validation_nn_test.cc and onnx_validation_tensor_test.cc: the operators, by the
// families of the operator registry): a model builder and the check that an import is refused
// with a kiln::Error naming the node, the operator and every part given.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/onnx_frontend.h"
#include "tests/common/onnx_model_builder.h"

namespace kiln::graph::validation_test {

using onnx::TensorProto;
using Ints = std::vector<int64_t>;

class Model : public testing::OnnxModelBuilder {
 public:
  using OnnxModelBuilder::OnnxModelBuilder;
  /// A float initializer of zeros.
  void weight(const std::string& name, const Ints& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    init_values(name, shape, std::vector<float>(static_cast<size_t>(n), 0.5f));
  }
  /// One node named `name` reading `inputs` whose output "y" is the graph's output.
  onnx::NodeProto* op(const std::string& type, const std::string& name,
                      const std::vector<std::string>& inputs) {
    output("y");
    return node(type, name, inputs, {"y"});
  }
};

/// Imports `m`, expecting kiln::Error whose message holds "node 'NAME' (OP)" and every part.
inline void expect_refused(const Model& m, const std::string& node, const std::string& op,
                           const std::vector<std::string>& parts) {
  SCOPED_TRACE("node '" + node + "' (" + op + ")");
  try {
    import_onnx_bytes(m.bytes(), "<bad>");
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'<bad>'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node '" + node + "' (" + op + ")"), std::string::npos) << msg;
    for (const std::string& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    }
    return;
  } catch (const std::exception& e) {
    FAIL() << "expected kiln::Error, got another exception: " << e.what();
  }
  FAIL() << "expected kiln::Error, the model imported";
}

/// The last node of `m` (to set attributes on after the model is made).
inline onnx::NodeProto* last(Model& m) {
  return m.graph()->mutable_node(m.graph()->node_size() - 1);
}

/// x convolved with a weight "w" of `w_shape` by node 'conv1'.
inline Model conv_model(const Ints& x_shape, const Ints& w_shape, const std::string& op = "Conv") {
  Model m;
  m.input("x", x_shape);
  m.weight("w", w_shape);
  m.op(op, "conv1", {"x", "w"});
  return m;
}

/// An integer initializer of ONNX element type `elem` (INT8, UINT8, INT32) holding `values`.
inline void init_ints(Model& m, const std::string& name, const Ints& shape, int elem,
                      const Ints& values) {
  auto* t = m.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : shape) t->add_dims(d);
  for (int64_t v : values) t->add_int32_data(static_cast<int32_t>(v));
}

}  // namespace kiln::graph::validation_test
