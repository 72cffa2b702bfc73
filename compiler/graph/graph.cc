// Building, querying, rewriting, verifying and printing the graph IR.
#include "compiler/graph/graph.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_set>

#include "base/error.h"
#include "base/shape_string.h"

namespace kiln::graph {
namespace {

template <typename T>
const T& get_attr(const Node& n, const std::string& key, const char* kind) {
  auto it = n.attrs.find(key);
  KILN_ICHECK(it != n.attrs.end())
      << "node '" << n.name << "' (" << n.op << ") has no attribute '" << key << "'";
  const T* v = std::get_if<T>(&it->second);
  KILN_ICHECK(v != nullptr) << "attribute '" << key << "' of node '" << n.name << "' (" << n.op
                            << ") is not " << kind;
  return *v;
}

std::string float_string(float f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(f));
  return buf;
}

std::string ref(ValueId v) { return v == kNoValue ? std::string("_") : "%" + std::to_string(v); }

}  // namespace

bool Value::is_float32() const { return runtime::dtype_equal(dtype, runtime::kFloat32); }

int64_t Value::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ir::DataType Value::ir_dtype() const {
  return ir::DataType::parse(runtime::dtype_to_string(dtype));
}

std::string Value::type_string() const {
  if (!typed) return "?";
  return runtime::dtype_to_string(dtype) + shape_string(shape, ",");
}

int64_t Node::i(const std::string& key) const { return get_attr<int64_t>(*this, key, "an int"); }
float Node::f(const std::string& key) const { return get_attr<float>(*this, key, "a float"); }
const std::string& Node::s(const std::string& key) const {
  return get_attr<std::string>(*this, key, "a string");
}
const std::vector<int64_t>& Node::ints(const std::string& key) const {
  return get_attr<std::vector<int64_t>>(*this, key, "a list of ints");
}
const std::vector<float>& Node::floats(const std::string& key) const {
  return get_attr<std::vector<float>>(*this, key, "a list of floats");
}
const TensorAttr& Node::tensor(const std::string& key) const {
  return get_attr<TensorAttr>(*this, key, "a tensor");
}
int64_t Node::i(const std::string& key, int64_t dflt) const {
  return has_attr(key) ? i(key) : dflt;
}
float Node::f(const std::string& key, float dflt) const { return has_attr(key) ? f(key) : dflt; }

ValueId Graph::add_input(std::string name, KilnDType dtype, std::vector<int64_t> shape) {
  ValueId v = add_value(std::move(name), dtype, std::move(shape));
  inputs_.push_back(v);
  return v;
}

ValueId Graph::add_input_with_default(std::string name,
                                      std::shared_ptr<const runtime::NDArray> dflt) {
  KILN_ICHECK(dflt != nullptr && dflt->defined()) << "input '" << name << "': a null default";
  const ValueId v = add_input(std::move(name), dflt->dtype(), dflt->shape());
  input_defaults_[v] = std::move(dflt);
  return v;
}

std::shared_ptr<const runtime::NDArray> Graph::input_default(ValueId v) const {
  auto it = input_defaults_.find(v);
  return it == input_defaults_.end() ? nullptr : it->second;
}

ValueId Graph::add_constant(std::string name, runtime::NDArray data) {
  return add_constant(std::move(name), std::make_shared<const runtime::NDArray>(std::move(data)));
}

ValueId Graph::add_constant(std::string name, std::shared_ptr<const runtime::NDArray> data) {
  KILN_ICHECK(data != nullptr && data->defined()) << "constant '" << name << "' has no data";
  ValueId v = add_value(std::move(name), data->dtype(), data->shape());
  values_[static_cast<size_t>(v)].data = std::move(data);
  return v;
}

ValueId Graph::add_value(std::string name, KilnDType dtype, std::vector<int64_t> shape) {
  ValueId v = add_untyped_value(std::move(name));
  Value& val = values_.back();
  val.dtype = dtype;
  val.shape = std::move(shape);
  val.typed = true;
  return v;
}

ValueId Graph::add_untyped_value(std::string name) {
  values_.push_back(Value{});
  values_.back().name = std::move(name);
  return static_cast<ValueId>(values_.size() - 1);
}

size_t Graph::add_node(Node node) {
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

ValueId Graph::add_op(std::string op, std::string name, std::vector<ValueId> inputs, Attrs attrs,
                      KilnDType dtype, std::vector<int64_t> shape) {
  ValueId out = add_value(name, dtype, std::move(shape));
  add_node(Node{std::move(op), std::move(name), std::move(inputs), {out}, std::move(attrs)});
  return out;
}

const Value& Graph::value(ValueId v) const {
  KILN_ICHECK(v >= 0 && static_cast<size_t>(v) < values_.size()) << "no value %" << v;
  return values_[static_cast<size_t>(v)];
}

Value& Graph::value(ValueId v) {
  KILN_ICHECK(v >= 0 && static_cast<size_t>(v) < values_.size()) << "no value %" << v;
  return values_[static_cast<size_t>(v)];
}

ValueId Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].name == name) return static_cast<ValueId>(i);
  }
  return kNoValue;
}

int64_t Graph::producer(ValueId v) const {
  if (v == kNoValue) return -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& outs = nodes_[i].outputs;
    if (std::find(outs.begin(), outs.end(), v) != outs.end()) return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<size_t> Graph::consumers(ValueId v) const {
  std::vector<size_t> out;
  if (v == kNoValue) return out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& ins = nodes_[i].inputs;
    if (std::find(ins.begin(), ins.end(), v) != ins.end()) out.push_back(i);
  }
  return out;
}

bool Graph::is_output(ValueId v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

const Node* Graph::producer_node(ValueId v) const {
  const int64_t p = v == kNoValue ? -1 : producer(v);
  return p < 0 ? nullptr : &nodes_[static_cast<size_t>(p)];
}

bool Graph::single_reader(ValueId v) const { return !is_output(v) && consumers(v).size() == 1; }

void Graph::replace_all_uses(ValueId from, ValueId to) {
  for (Node& n : nodes_) std::replace(n.inputs.begin(), n.inputs.end(), from, to);
  std::replace(outputs_.begin(), outputs_.end(), from, to);
}

size_t Graph::remove_dead_nodes() {
  std::unordered_set<ValueId> live(outputs_.begin(), outputs_.end());
  std::vector<bool> keep(nodes_.size(), false);
  for (size_t i = nodes_.size(); i-- > 0;) {
    const Node& n = nodes_[i];
    for (ValueId o : n.outputs) keep[i] = keep[i] || live.count(o) != 0;
    if (keep[i]) live.insert(n.inputs.begin(), n.inputs.end());
  }
  std::vector<Node> kept;
  kept.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(nodes_[i]));
  }
  const size_t removed = nodes_.size() - kept.size();
  nodes_ = std::move(kept);
  return removed;
}

void Graph::sort_topologically() {
  // Repeatedly take the first node whose inputs are all available: stable, O(n^2) worst case,
  // which is fine for graphs of a few thousand nodes.
  std::vector<bool> available(values_.size(), true);
  for (const Node& n : nodes_) {
    for (ValueId o : n.outputs) {
      if (o != kNoValue) available[static_cast<size_t>(o)] = false;
    }
  }
  std::vector<Node> sorted;
  sorted.reserve(nodes_.size());
  std::vector<bool> placed(nodes_.size(), false);
  while (sorted.size() < nodes_.size()) {
    bool progress = false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (placed[i]) continue;
      bool ready = std::all_of(nodes_[i].inputs.begin(), nodes_[i].inputs.end(), [&](ValueId v) {
        return v == kNoValue || available[static_cast<size_t>(v)];
      });
      if (!ready) continue;
      for (ValueId o : nodes_[i].outputs) {
        if (o != kNoValue) available[static_cast<size_t>(o)] = true;
      }
      placed[i] = true;
      sorted.push_back(std::move(nodes_[i]));
      progress = true;
      break;
    }
    KILN_ICHECK(progress) << "sort_topologically: the graph has a cycle";
  }
  nodes_ = std::move(sorted);
}

void Graph::verify() const {
  auto in_range = [&](ValueId v) { return v >= 0 && static_cast<size_t>(v) < values_.size(); };
  std::vector<bool> defined(values_.size(), false);
  auto check_typed = [&](ValueId v, const std::string& where) {
    const Value& val = values_[static_cast<size_t>(v)];
    KILN_ICHECK(val.typed) << "verify: value %" << v << " '" << val.name << "' (" << where
                           << ") has no dtype/shape";
    for (int64_t d : val.shape) {
      KILN_ICHECK(d >= 0) << "verify: value %" << v << " '" << val.name << "' (" << where
                          << ") has a negative dimension: " << val.type_string();
    }
    if (val.is_constant()) {
      KILN_ICHECK(val.data->shape() == val.shape &&
                  runtime::dtype_equal(val.data->dtype(), val.dtype))
          << "verify: constant %" << v << " '" << val.name << "' is declared " << val.type_string()
          << " but holds " << runtime::dtype_to_string(val.data->dtype())
          << val.data->shape_string();
    }
  };
  for (ValueId v : inputs_) {
    KILN_ICHECK(in_range(v)) << "verify: graph input %" << v << " is out of range";
    KILN_ICHECK(!values_[static_cast<size_t>(v)].is_constant())
        << "verify: graph input %" << v << " is a constant";
    defined[static_cast<size_t>(v)] = true;
    check_typed(v, "graph input");
  }
  for (const auto& [v, dflt] : input_defaults_) {
    KILN_ICHECK(std::find(inputs_.begin(), inputs_.end(), v) != inputs_.end())
        << "verify: value %" << v << " has a default value but is not a graph input";
    const Value& val = values_[static_cast<size_t>(v)];
    KILN_ICHECK(dflt->shape() == val.shape && runtime::dtype_equal(dflt->dtype(), val.dtype))
        << "verify: graph input %" << v << " '" << val.name << "' is " << val.type_string()
        << " but its default is " << runtime::dtype_to_string(dflt->dtype())
        << dflt->shape_string();
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].is_constant()) defined[i] = true;
  }
  for (const Node& n : nodes_) {
    const std::string where = "node '" + n.name + "' (" + n.op + ")";
    KILN_ICHECK(!n.outputs.empty()) << "verify: " << where << " has no outputs";
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      KILN_ICHECK(in_range(v)) << "verify: " << where << " reads %" << v << ", out of range";
      KILN_ICHECK(defined[static_cast<size_t>(v)])
          << "verify: " << where << " reads %" << v << " '" << values_[static_cast<size_t>(v)].name
          << "' before it is defined (not a graph input, a constant or an earlier node's output)";
      check_typed(v, "input of " + where);
    }
    KILN_ICHECK(
        std::any_of(n.outputs.begin(), n.outputs.end(), [](ValueId v) { return v != kNoValue; }))
        << "verify: " << where << " has only omitted outputs";
    for (ValueId v : n.outputs) {
      if (v == kNoValue) continue;  // an omitted optional output
      KILN_ICHECK(in_range(v)) << "verify: " << where << " writes %" << v << ", out of range";
      KILN_ICHECK(!defined[static_cast<size_t>(v)])
          << "verify: " << where << " writes %" << v << " '" << values_[static_cast<size_t>(v)].name
          << "', which is already defined";
      defined[static_cast<size_t>(v)] = true;
      check_typed(v, "output of " + where);
    }
  }
  for (ValueId v : outputs_) {
    KILN_ICHECK(in_range(v)) << "verify: graph output %" << v << " is out of range";
    KILN_ICHECK(defined[static_cast<size_t>(v)])
        << "verify: graph output %" << v << " '" << values_[static_cast<size_t>(v)].name
        << "' is never defined";
    check_typed(v, "graph output");
  }
}

std::string attr_to_string(const Attr& attr) {
  struct Printer {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(float v) const { return float_string(v); }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const std::vector<int64_t>& v) const { return shape_string(v, ","); }
    std::string operator()(const std::vector<float>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + float_string(v[i]);
      return s + "]";
    }
    std::string operator()(const TensorAttr& t) const {
      if (t == nullptr || !t->defined()) return "tensor<null>";
      return "tensor<" + runtime::dtype_to_string(t->dtype()) + shape_string(t->shape(), ",") + ">";
    }
  };
  return std::visit(Printer{}, attr);
}

std::string Graph::node_to_string(const Node& node) const {
  std::ostringstream os;
  for (size_t i = 0; i < node.outputs.size(); ++i) os << (i ? ", " : "") << ref(node.outputs[i]);
  os << " = " << node.op << "(";
  for (size_t i = 0; i < node.inputs.size(); ++i) os << (i ? ", " : "") << ref(node.inputs[i]);
  os << ")";
  if (!node.attrs.empty()) {
    os << " {";
    bool first = true;
    for (const auto& [key, attr] : node.attrs) {
      os << (first ? "" : ", ") << key << "=" << attr_to_string(attr);
      first = false;
    }
    os << "}";
  }
  os << " : ";
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const ValueId o = node.outputs[i];
    const bool ok = o >= 0 && static_cast<size_t>(o) < values_.size();
    os << (i ? ", " : "")
       << (o == kNoValue ? "_"
           : ok          ? values_[static_cast<size_t>(o)].type_string()
                         : "?");
  }
  return os.str();
}

std::string Graph::to_string() const {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Value& v = value(inputs_[i]);
    os << (i ? ", " : "") << ref(inputs_[i]) << " \"" << v.name << "\": " << v.type_string()
       << (input_defaults_.count(inputs_[i]) ? " = default" : "");
  }
  os << ") {\n";
  // Constants that some node or output uses, in id order.
  std::vector<bool> used(values_.size(), false);
  for (const Node& n : nodes_) {
    for (ValueId v : n.inputs) {
      if (v >= 0 && static_cast<size_t>(v) < values_.size()) used[static_cast<size_t>(v)] = true;
    }
  }
  for (ValueId v : outputs_) {
    if (v >= 0 && static_cast<size_t>(v) < values_.size()) used[static_cast<size_t>(v)] = true;
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    if (used[i] && values_[i].is_constant()) {
      os << "  const " << ref(static_cast<ValueId>(i)) << " \"" << values_[i].name
         << "\" : " << values_[i].type_string() << "\n";
    }
  }
  for (const Node& n : nodes_) os << "  " << node_to_string(n) << "\n";
  os << "  return ";
  for (size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << ref(outputs_[i]);
  os << "\n}\n";
  return os.str();
}

}  // namespace kiln::graph
