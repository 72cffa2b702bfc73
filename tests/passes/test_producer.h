// A minimal ir::ProducerNode for pass tests: a named tensor with a shape and an element type, in
// place of a te::Tensor.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/expr.h"

namespace kiln::pass::testing {

class TestProducer final : public ir::ProducerNode {
 public:
  TestProducer(std::string name, std::vector<ir::Expr> shape, ir::DataType dtype)
      : name_(std::move(name)), shape_(std::move(shape)), dtype_(dtype) {}
  const std::string& name() const override { return name_; }
  const std::vector<ir::Expr>& shape() const override { return shape_; }
  ir::DataType dtype() const override { return dtype_; }

 private:
  std::string name_;
  std::vector<ir::Expr> shape_;
  ir::DataType dtype_;
};

inline ir::Producer make_producer(std::string name, std::vector<ir::Expr> shape,
                                  ir::DataType dtype = ir::kFloat32) {
  return std::make_shared<TestProducer>(std::move(name), std::move(shape), dtype);
}

}  // namespace kiln::pass::testing
